"""Relative-vector coefficients, weights and reconstruction (SCA 2013 §4, §8).

As in §8 of the paper, only the descriptors' triangles and barycentric
coordinates are stored; the weights are computed from the original motion on
the bind-time mesh when needed, as a sparse table of the (frame, joint,
descriptor) triples whose weight is not 0. The table is built in blocks of
frames; ``CoefficientCache`` keeps blocks up to a memory budget and recomputes
the rest on demand, so a long clip never holds the whole table.

The table does not store the coefficients (α, β, γ) of Eq. 1. Each descriptor's
frame F = [n t b] is orthonormal, so (α, β, γ) = Fᵀ (p_j - d_i) and Eq. 2 is

    p'_j = Σ_i w_ij (d'_i + F'_i F_iᵀ (p_j - d_i))
         = Σ_i w_ij (d'_i - A_i d_i) + (Σ_i w_ij A_i) p_j,      A_i = F'_i F_iᵀ,

one sparse product of the weights with 13 numbers per descriptor (A_i, the
offset, and 1 for the weights' sum), then a 3x3 map per (frame, joint). The
result is Eq. 2 exactly; it needs 10 bytes an entry instead of 38, and an
undeformed or rigidly moved environment gives A_i the same rotation for every
descriptor, so the source motion comes back exactly whatever the weights'
precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from .. import constants as C
from ..geometry.triangles import descriptor_frames, dot

#: Frames per block of the coefficient table.
BLOCK_FRAMES = 128
#: Frames per piece of the coefficient table (``CoefficientCache``)...
SHORT_SPAN = 16
#: ... computed for spans of up to this many frames whose block is not cached (a live preview's:
#: a jump's window and the frames either side that ease it, ``adaptation.JUMP_REACH``).
PIECES_UP_TO = 64
#: (frame, joint, descriptor) triples computed densely at a time on an animated mesh
#: (about 8 bytes x 6 each).
_DENSE_BUDGET = 2_000_000
#: Frames per chunk on a static mesh: short, so each joint's box (``_culled``) stays small.
CULL_FRAMES = 16
#: Entries of the coefficient table kept in memory (10 bytes each: descriptor, weight and
#: proximity; 500 MB). The 3945-frame real walk over a floor needs 37-42 M, so re-bakes of
#: clips that long compute nothing again; longer clips recompute the blocks past it.
CACHE_ENTRIES = 50_000_000


@dataclass
class Coefficients:
    """Sparse table of descriptor weights for frames ``start .. start + count``.

    Rows are (frame, joint), frame-major: row ``(f - start) * joints + j``.
    indptr : (rows + 1,) int64, each row's entries ``indptr[r] : indptr[r + 1]``.
    desc : (K,) int32, the descriptor of each entry.
    weight : (K,) float32, the normalised weight w_ij of Eq. 6 (a row sums to 1).
    proximity : (K,) float16 in (0,1], ``min(1, d0 / |p_j - d_i|)``: how close the
        joint is to the descriptor, for the affinity (see ``reconstruct``).
    affinity : (rows,) float32, Σ_i w_ij proximity_ij clipped to [0, 1]; 0 on an empty row.
    centre : (3,) the mean joint position over the block; Eq. 2 is evaluated about it, so
        nothing depends on how far the scene is from the origin.
    """

    start: int
    count: int
    joints: int
    indptr: np.ndarray
    desc: np.ndarray
    weight: np.ndarray
    proximity: np.ndarray
    affinity: np.ndarray
    centre: np.ndarray

    @property
    def frame(self):
        """(K,) absolute frame of each entry (for inspection)."""
        return self.start + np.repeat(np.arange(self.count * self.joints) // self.joints, np.diff(self.indptr))

    @property
    def joint(self):
        """(K,) joint of each entry (for inspection)."""
        return np.repeat(np.arange(self.count * self.joints) % self.joints, np.diff(self.indptr))


def frames_of(mesh, tri, bary, f):
    """(d, n, t, b) of the descriptors on ``mesh`` at frame f."""
    return descriptor_frames(mesh.frame(f), mesh.normals(f), mesh.triangles, tri, bary)


def compute_coefficients(motion, mesh, tri, bary, body_height, d0, start=0, count=None):
    """Weights of every joint against every descriptor, from the original motion.

    Parameters
    ----------
    motion : (F,J,3) original joint positions.
    mesh : the bind-time TriMesh. tri (N,) int, bary (N,3): the descriptors.
    body_height : float, sets the fade window r2 - r1 (Eq. 5).
    d0 : float, the minimum distance of Eq. 7; closer counts as contact.
    start, count : the frames to compute (default: all).
    """
    F, J, _ = motion.shape
    count = F - start if count is None else count
    N = len(tri)
    centre = motion[start:start + count].reshape(-1, 3).mean(axis=0) if count else np.zeros(3)
    parts = []
    window = C.WINDOW_FRACTION * body_height
    static = None if mesh.animated else frames_of(mesh, tri, bary, 0)
    step = CULL_FRAMES if static is not None else max(1, _DENSE_BUDGET // max(1, J * N))
    for f0 in range(start, start + count, step) if N else ():
        fs = np.arange(f0, min(start + count, f0 + step))
        # Everything about a local centre, so nothing depends on how far the scene is from
        # the origin.
        local = motion[fs].reshape(-1, 3).mean(axis=0)
        p = motion[fs] - local                                                # (f,J,3)
        if static is not None:
            d, n = static[0], static[1]
            fi, ji, di, alpha, dist, r1 = _culled(p, d - local, n, window)
        else:
            d, n = (np.stack(x) for x in zip(*((v[0], v[1]) for v in (frames_of(mesh, tri, bary, f) for f in fs))))
            fi, ji, di, alpha, dist, r1 = _dense(p, d - local, n, window)
        # In place, as the table has tens of millions of entries: every pass over them counts.
        w = np.divide(alpha, dist, out=np.ones_like(alpha), where=dist > 0)   # Eq. 3
        fade = np.subtract(r1, dist, out=r1)                                   # Eq. 5: kept entries have
        fade *= 1.0 / window                                                   # a fade in (0, inf)
        fade += 1.0
        w *= np.minimum(fade, 1.0, out=fade)                                   # Eq. 4
        key = fi * J
        key += ji
        key += (f0 - start) * J
        proximity = np.maximum(dist, d0, out=dist)
        parts.append((key, di.astype(np.int32), w, np.divide(d0, proximity, out=proximity)))
    R = count * J
    if parts:
        key, desc, w, proximity = (np.concatenate(x) for x in zip(*parts)) if len(parts) > 1 else parts[0]
    else:
        key, desc, w, proximity = np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0), np.zeros(0)
    counts = np.bincount(key, minlength=R)
    total = np.bincount(key, weights=w, minlength=R)
    w /= total[key]                                                            # Eq. 6
    weight = w.astype(np.float32)
    proximity = proximity.astype(np.float16)
    affinity = np.bincount(key, weights=w * proximity, minlength=R)
    indptr = np.zeros(R + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Coefficients(start, count, J, indptr, desc, weight, proximity,
                        np.clip(affinity, 0.0, 1.0).astype(np.float32), centre)


def _kept(alpha, dist, r1, window):
    """The entries with a weight (Eq. 3-5): in front of the descriptor (or on it), and within
    the fade window of the closest descriptor the joint is in front of."""
    return ((alpha > 0) | (dist == 0)) & (dist - r1 < window)


def _culled(p, d, n, window):
    """Entries with a weight for frames ``p`` (f,J,3) of a static mesh's descriptors (N,3).

    Per joint, over the f frames, a box around its positions. A descriptor in front of every
    point of the box bounds r1 for all of them by its distance to the box's farthest corner,
    U; a descriptor whose distance to the box is U + window or more gets no weight on any
    of these frames (Eq. 5). The rest, typically a small part of the set, are computed
    exactly, and r1 over them is r1 over the whole set (the closest descriptor in front is
    among them). Returns the entries sorted by (frame, joint): ``frame, joint, descriptor, α, distance, r1``."""
    f, J, _ = p.shape
    lo, hi = p.min(axis=0), p.max(axis=0)                                     # (J,3)
    centre, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    below, above = lo[:, None] - d[None], d[None] - hi[:, None]               # (J,N,3)
    gap = np.maximum(np.maximum(below, above), 0.0)
    near2 = np.einsum("jnk,jnk->jn", gap, gap)
    far2 = np.einsum("jnk,jnk->jn", np.maximum(below, above) + 2.0 * half[:, None], np.maximum(below, above)
                     + 2.0 * half[:, None])
    lowest = centre @ n.T - dot(n, d)[None] - half @ np.abs(n).T              # min over the box of n.(x - d)
    U = np.sqrt(np.where(lowest > 0, far2, np.inf).min(axis=1))              # (J,)
    reach = (U + window) * (1.0 + 1e-9) + 1e-12 * window
    jj, ii = np.nonzero(near2 < reach[:, None] ** 2)                          # sorted by joint
    M = len(jj)
    rel = p[:, jj] - d[ii]                                                    # (f,M,3)
    dist = np.sqrt(np.einsum("fmk,fmk->fm", rel, rel))
    alpha = np.einsum("fmk,mk->fm", rel, n[ii])
    starts = np.flatnonzero(np.r_[True, jj[1:] != jj[:-1]])
    r1 = np.minimum.reduceat(np.where(alpha > 0, dist, np.inf), starts, axis=1)   # (f,joints with any)
    r1 = np.repeat(r1, np.diff(np.r_[starts, M]), axis=1)
    good = np.flatnonzero(_kept(alpha, dist, r1, window))                     # flat takes: fast
    fi, mi = np.divmod(good, M)
    return fi, jj.take(mi), ii.take(mi), alpha.take(good), dist.take(good), r1.take(good)


def _dense(p, d, n, window):
    """Entries with a weight for frames ``p`` (f,J,3) of an animated mesh's descriptors
    (f,N,3): every (frame, joint, descriptor) at once. Sorted by (frame, joint), as ``_culled``."""
    f, J, _ = p.shape
    N = d.shape[1]
    alpha = np.einsum("fjk,fnk->fjn", p, n) - dot(n, d)[:, None, :]
    d2 = np.einsum("fjk,fnk->fjn", p, -2.0 * d)
    d2 += dot(d, d)[:, None, :]
    d2 += dot(p, p)[:, :, None]
    dist = np.sqrt(np.maximum(d2, 0.0))
    r1 = np.where(alpha > 0, dist, np.inf).min(axis=-1, keepdims=True)
    good = np.flatnonzero(_kept(alpha, dist, r1, window))
    row, di = np.divmod(good, N)
    fi, ji = np.divmod(row, J)
    return fi, ji, di, alpha.take(good), dist.take(good), r1.ravel().take(row)


class CoefficientCache:
    """Blocks of the coefficient table of one binding, kept up to a budget.

    A whole clip (a bake) is computed a block of ``BLOCK_FRAMES`` at a time; a short span (a live
    preview's frame or jump) a piece of ``SHORT_SPAN`` frames at a time, each kept until its
    block is made: playing a clip the first time then pauses for a piece every ``SHORT_SPAN``
    frames instead of a block every ``BLOCK_FRAMES`` (a 600-frame Rigify walk over 473
    descriptors: 90-130 ms against 0.71-0.81 s).
    """

    def __init__(self, binding):
        self.binding = binding
        self.blocks = {}
        self.pieces = {}
        self.entries = 0

    def _compute(self, start, count):
        b = self.binding
        d0 = b.settings.get("min_distance_fraction", C.MIN_DISTANCE_FRACTION) * b.body_height
        return compute_coefficients(b.motion, b.mesh, b.triangles, b.barycentrics, b.body_height, d0,
                                    start, count)

    def _keep(self, kept, start, c):
        if self.entries + len(c.weight) <= CACHE_ENTRIES:
            kept[start] = c
            self.entries += len(c.weight)

    def block(self, start):
        c = self.blocks.get(start)
        if c is None:
            c = self._compute(start, min(BLOCK_FRAMES, self.binding.frame_count - start))
            for s in range(start, start + BLOCK_FRAMES, SHORT_SPAN):      # its pieces are not needed now
                piece = self.pieces.pop(s, None)
                if piece is not None:
                    self.entries -= len(piece.weight)
            self._keep(self.blocks, start, c)
        return c

    def piece(self, start):
        c = self.pieces.get(start)
        if c is None:
            c = self._compute(start, min(SHORT_SPAN, self.binding.frame_count - start))
            self._keep(self.pieces, start, c)
        return c

    def covering(self, start, stop):
        """Blocks that cover frames ``start .. stop - 1``, in order (a generator): the cached
        blocks, and for a span of at most ``PIECES_UP_TO`` frames the pieces of the others."""
        first = (start // BLOCK_FRAMES) * BLOCK_FRAMES
        for s in range(first, stop, BLOCK_FRAMES):       # one at a time: blocks past the budget are
            if s in self.blocks or stop - start > PIECES_UP_TO:           # computed, used and dropped
                yield self.block(s)
                continue
            lo = max(start, s) // SHORT_SPAN * SHORT_SPAN
            for p in range(lo, min(stop, s + BLOCK_FRAMES), SHORT_SPAN):
                yield self.piece(p)


def reconstruct(coef, motion, reference, mesh, tri, bary, influence=None, frames=None, replace=None,
                placement=None):
    """Joint targets (Eq. 2) and affinities on a (deformed) mesh for one block.

    Parameters
    ----------
    coef : Coefficients of frames ``coef.start .. coef.start + coef.count``.
    motion : (F,J,3) the original motion. reference : the bind-time TriMesh.
    mesh : TriMesh with the bind-time triangles (static, or animated over
        the motion's frames: frame f of the block uses mesh frame f).
    tri, bary : the descriptors.
    influence : (N,) float in [0,1] or None, scales each descriptor's weight.
    frames : optional sorted absolute frame indices within the block to
        evaluate (default: all of them).
    replace : optional ``f -> (index (m,), points (m,3), rotations (m,3,3))``: descriptors
        re-embedded (``reembed``), with their origin and the rotation of their relative
        vectors on ``mesh`` at frame f, used instead of their place on the surface.
    placement : optional ``placement_of(...)`` of the descriptors on a static ``mesh`` (with
        ``replace`` applied), computed once by a caller that reconstructs several blocks.

    Returns
    -------
    targets : (n,J,3), NaN where a joint has no weighted descriptor.
    affinity : (n,J) in [0,1], 0 where a joint has no weighted descriptor.

    Eq. 2 as one sparse product (see the module's docstring): per row the
    weighted sums of A_i, of d'_i - A_i d_i and of the weights, then
    ``(offset + A p_j) / sum``.

    Affinity (product decision, documented in the manual, docs/how-it-works): Eq. 8 sums the
    weights of a joint's descriptors. With the normalised weights of Eq. 6
    that sum is 1 for every joint; with the unnormalised w'' it grows with the
    size of the fade window, so on a floor the head gets the largest affinity
    and the feet the smallest (measured: 1.00 vs 0.19), the opposite of the
    paper's intent that joints close to a surface move less. We keep the
    weighted sum but of each descriptor's proximity ``min(1, d0 / distance)``:
    ``s_j = sum_i w_ij * proximity_ij``, 1 for a joint in contact, falling
    as 1/distance beyond d0, so joints near surfaces hold their relation
    while the others give way.
    """
    J, N = coef.joints, len(tri)
    local = np.arange(coef.count) if frames is None else np.asarray(frames, dtype=np.int64) - coef.start
    n = len(local)
    if n == 0:
        return np.zeros((0, J, 3)), np.zeros((0, J))
    rows = (local[:, None] * J + np.arange(J)).ravel()
    if local[-1] - local[0] == n - 1:                            # contiguous frames: views, no copy
        lo = int(coef.indptr[rows[0]])
        sel = slice(lo, int(coef.indptr[rows[-1] + 1]))
        indptr = coef.indptr[rows[0]:rows[-1] + 2] - lo
    else:
        starts = coef.indptr[rows]
        counts = coef.indptr[rows + 1] - starts
        indptr = np.concatenate([[0], np.cumsum(counts)])
        sel = np.repeat(starts - indptr[:-1], counts) + np.arange(indptr[-1])
    desc, weight = coef.desc[sel], coef.weight[sel]
    affinity = coef.affinity[rows].astype(np.float64)
    if influence is not None:
        row = np.repeat(np.arange(n * J), np.diff(indptr))
        weight = weight * influence[desc]
        total = np.bincount(row, weights=weight, minlength=n * J)
        with np.errstate(divide="ignore", invalid="ignore"):
            affinity = np.clip(np.bincount(row, weights=weight * coef.proximity[sel], minlength=n * J) / total,
                               0.0, 1.0)
    centre = coef.centre
    if mesh.animated or reference.animated:
        # One column block per frame: descriptor i at local frame k is column k N + i.
        at = (coef.start + local).tolist()
        maps = np.concatenate([_maps(placement_of(frames_of(reference, tri, bary, f), frames_of(mesh, tri, bary, f),
                                                  None if replace is None else replace(f)), centre) for f in at])
        frame_of_entry = np.repeat(np.arange(n), np.diff(indptr[::J]))
        columns = desc + frame_of_entry * N
    else:
        if placement is None:
            before = frames_of(reference, tri, bary, 0)
            after = before if mesh is reference else frames_of(mesh, tri, bary, 0)
            placement = placement_of(before, after, None if replace is None else replace(0))
        maps = _maps(placement, centre)
        columns = desc
    sums = sparse.csr_matrix((weight, columns, indptr), shape=(n * J, len(maps))) @ maps    # (rows, 13)
    total = sums[:, 12]
    empty = ~(total > 0)
    p = motion[coef.start + local].reshape(-1, 3) - centre
    with np.errstate(divide="ignore", invalid="ignore"):
        targets = centre + (sums[:, 9:12] + np.einsum("rij,rj->ri", sums[:, :9].reshape(-1, 3, 3), p)) / total[:, None]
    targets[empty] = np.nan
    affinity[empty] = 0.0
    return targets.reshape(n, J, 3), affinity.reshape(n, J)


def placement_of(before, after, replace=None):
    """``(A (N,3,3), d (N,3), d' (N,3))`` per descriptor: the rotation A = F' Fᵀ of its relative
    vectors and its origin before and now, from the descriptors' (d, n, t, b) on the bind-time
    mesh and on the mesh now; ``replace`` ``(index, points, rotations)`` sets d' and A of
    re-embedded descriptors."""
    (d, n, t, b), (d2, n2, t2, b2) = before, after
    A = n2[:, :, None] * n[:, None, :] + t2[:, :, None] * t[:, None, :] + b2[:, :, None] * b[:, None, :]
    if replace is not None:
        index, points, rotations = replace
        d2 = d2.copy()
        d2[index], A[index] = points, rotations
    return A, d, d2


def _maps(placement, centre):
    """(N,13) per descriptor: A (row-major), d' - c - A (d - c), and 1 (``placement_of``)."""
    A, d, d2 = placement
    out = np.empty((len(d), 13))
    out[:, :9] = A.reshape(-1, 9)
    out[:, 9:12] = (d2 - centre) - np.einsum("nij,nj->ni", A, d - centre)
    out[:, 12] = 1.0
    return out
