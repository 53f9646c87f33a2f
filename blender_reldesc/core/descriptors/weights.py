"""Relative-vector coefficients, weights and reconstruction (SCA 2013 §4, §8).

As in §8 of the paper, only the descriptors' triangles and barycentric
coordinates are stored; the coefficients (α, β, γ) and weights are computed
from the original motion on the bind-time mesh when needed, as a sparse table
of the (frame, joint, descriptor) triples whose weight is not 0. The table is
built in blocks of frames; ``CoefficientCache`` keeps blocks up to a memory
budget and recomputes the rest on demand, so a long clip never holds the
whole table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from .. import constants as C
from ..geometry.triangles import descriptor_frames, dot

#: Frames per block of the coefficient table.
BLOCK_FRAMES = 128
#: Spans up to this many frames whose block is not cached are computed alone.
SHORT_SPAN = 16
#: (frame, joint, descriptor) triples computed densely at a time on an animated mesh
#: (about 8 bytes x 6 each).
_DENSE_BUDGET = 2_000_000
#: Frames per chunk on a static mesh: short, so each joint's box (``_culled``) stays small.
CULL_FRAMES = 16
#: Entries of the coefficient table kept in memory (38 bytes each with the normalised
#: weights of ``_summed``: 460 MB). The 3945-frame real walk over a floor needs 10.6 M, so
#: re-bakes of clips that long compute nothing again; longer clips recompute blocks past it.
CACHE_ENTRIES = 12_000_000


@dataclass
class Coefficients:
    """Sparse table of descriptor terms for frames ``start .. start + count``.

    Rows are sorted by (frame, joint).
    frame : (K,) int32, absolute frame index; joint : (K,) int16; desc : (K,) int32.
    weight : (K,) float32, unnormalised weight w'' (Eq. 3-5).
    coeff : (K,3) float32, (α, β, γ) of Eq. 1 in the descriptor's (n, t, b) frame.
    proximity : (K,) float32 in (0,1], ``min(1, d0 / |p_j - d_i|)``: how close the
        joint is to the descriptor, for the affinity (see ``reconstruct``).
    """

    start: int
    count: int
    frame: np.ndarray
    joint: np.ndarray
    desc: np.ndarray
    weight: np.ndarray
    coeff: np.ndarray
    proximity: np.ndarray
    #: What Eq. 2 needs of the whole block that no mesh changes (``_summed``), kept once built.
    summed: tuple = None



def frames_of(mesh, tri, bary, f):
    """(d, n, t, b) of the descriptors on ``mesh`` at frame f."""
    return descriptor_frames(mesh.frame(f), mesh.normals(f), mesh.triangles, tri, bary)


def compute_coefficients(motion, mesh, tri, bary, body_height, d0, start=0, count=None):
    """Coefficients of every joint against every descriptor, from the original motion.

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
    parts = []
    window = C.WINDOW_FRACTION * body_height
    static = None if mesh.animated else frames_of(mesh, tri, bary, 0)
    step = CULL_FRAMES if static is not None else max(1, _DENSE_BUDGET // max(1, J * N))
    for f0 in range(start, start + count, step) if N else ():
        fs = np.arange(f0, min(start + count, f0 + step))
        # Everything about a local centre, so nothing depends on how far the scene is from
        # the origin.
        centre = motion[fs].reshape(-1, 3).mean(axis=0)
        p = motion[fs] - centre                                               # (f,J,3)
        if static is not None:
            d, n, t, b = static
            fi, ji, di, alpha, beta, gamma, dist, r1 = _culled(p, d - centre, n, t, b, window)
        else:
            d, n, t, b = (np.stack(x) for x in zip(*(frames_of(mesh, tri, bary, f) for f in fs)))
            fi, ji, di, alpha, beta, gamma, dist, r1 = _dense(p, d - centre, n, t, b, window)
        facing = np.where(dist > 0, alpha / np.where(dist > 0, dist, 1.0), 1.0)   # Eq. 3
        fade = np.clip(1.0 - (dist - r1) / window, 0.0, 1.0)                      # Eq. 5
        coeff = np.empty((len(fi), 3), np.float32)                                # Eq. 1
        coeff[:, 0], coeff[:, 1], coeff[:, 2] = alpha, beta, gamma
        # Stored compactly (30 bytes an entry instead of 52): float32 keeps targets
        # within 1e-7 of the float64 ones, far below any tolerance that matters.
        parts.append((fs[fi].astype(np.int32), ji.astype(np.int16), di.astype(np.int32),
                      (facing * fade).astype(np.float32), coeff,                               # Eq. 4
                      (d0 / np.maximum(dist, d0)).astype(np.float32)))
    if not parts:
        empty = np.zeros(0, np.int32)
        return Coefficients(start, count, empty, empty.astype(np.int16), empty, np.zeros(0, np.float32),
                            np.zeros((0, 3), np.float32), np.zeros(0, np.float32))
    if len(parts) == 1:
        return Coefficients(start, count, *parts[0])
    return Coefficients(start, count, *(np.concatenate(x) for x in zip(*parts)))


def _kept(alpha, dist, r1, window):
    """The entries with a weight (Eq. 3-5): in front of the descriptor (or on it), and within
    the fade window of the closest descriptor the joint is in front of."""
    return ((alpha > 0) | (dist == 0)) & (dist - r1 < window)


def _culled(p, d, n, t, b, window):
    """Entries with a weight for frames ``p`` (f,J,3) of a static mesh's descriptors (N,3).

    Per joint, over the f frames, a box around its positions. A descriptor in front of every
    point of the box bounds r1 for all of them by its distance to the box's farthest corner,
    U; a descriptor whose distance to the box is U + window or more gets no weight on any
    of these frames (Eq. 5). The rest, typically a small part of the set, are computed
    exactly, and r1 over them is r1 over the whole set (the closest descriptor in front is
    among them). Returns the entries sorted by (frame, joint)."""
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
    beta = np.einsum("fmk,mk->fm", rel, t[ii]).take(good)
    gamma = np.einsum("fmk,mk->fm", rel, b[ii]).take(good)
    return (fi, jj.take(mi), ii.take(mi), alpha.take(good), beta, gamma, dist.take(good), r1.take(good))


def _dense(p, d, n, t, b, window):
    """Entries with a weight for frames ``p`` (f,J,3) of an animated mesh's descriptors
    (f,N,3): every (frame, joint, descriptor) at once. Sorted by (frame, joint)."""
    f, J, _ = p.shape
    N = d.shape[1]
    alpha, beta, gamma = (np.einsum("fjk,fnk->fjn", p, v) - dot(v, d)[:, None, :] for v in (n, t, b))
    d2 = np.einsum("fjk,fnk->fjn", p, -2.0 * d)
    d2 += dot(d, d)[:, None, :]
    d2 += dot(p, p)[:, :, None]
    dist = np.sqrt(np.maximum(d2, 0.0))
    r1 = np.where(alpha > 0, dist, np.inf).min(axis=-1, keepdims=True)
    good = np.flatnonzero(_kept(alpha, dist, r1, window))
    row, di = np.divmod(good, N)
    fi, ji = np.divmod(row, J)
    return (fi, ji, di, alpha.take(good), beta.take(good), gamma.take(good), dist.take(good),
            r1.ravel().take(row))


class CoefficientCache:
    """Blocks of the coefficient table of one binding, kept up to a budget."""

    def __init__(self, binding):
        self.binding = binding
        self.blocks = {}
        self.entries = 0

    def _compute(self, start, count):
        b = self.binding
        d0 = b.settings.get("min_distance_fraction", C.MIN_DISTANCE_FRACTION) * b.body_height
        return compute_coefficients(b.motion, b.mesh, b.triangles, b.barycentrics, b.body_height, d0,
                                    start, count)

    def block(self, start):
        c = self.blocks.get(start)
        if c is None:
            c = self._compute(start, min(BLOCK_FRAMES, self.binding.frame_count - start))
            if self.entries + len(c.weight) <= CACHE_ENTRIES:
                self.blocks[start] = c
                self.entries += len(c.weight)
        return c

    def covering(self, start, stop):
        """Blocks that cover frames ``start .. stop - 1``, in order (a generator).

        A short span of several frames (a live-preview jump) whose block is not cached yet is
        computed on its own, without building and caching the whole block.
        """
        first = (start // BLOCK_FRAMES) * BLOCK_FRAMES
        if 1 < stop - start <= SHORT_SPAN and first not in self.blocks and stop <= first + BLOCK_FRAMES:
            yield self._compute(start, stop - start)
            return
        for s in range(first, stop, BLOCK_FRAMES):       # one at a time: blocks past the budget are
            yield self.block(s)                          # computed, used and dropped


def reconstruct(coef, mesh, tri, bary, joints, influence=None, frames=None):
    """Joint targets (Eq. 2) and affinities on a (deformed) mesh for one block.

    Parameters
    ----------
    coef : Coefficients of frames ``coef.start .. coef.start + coef.count``.
    mesh : TriMesh with the bind-time triangles (static, or animated over
        the motion's frames: frame f of the block uses mesh frame f).
    tri, bary : the descriptors. joints : J.
    influence : (N,) float in [0,1] or None, scales each descriptor's weight.
    frames : optional sorted absolute frame indices within the block to
        evaluate (default: all of them).

    Returns
    -------
    targets : (n,J,3), NaN where a joint has no weighted descriptor.
    affinity : (n,J) in [0,1], 0 where a joint has no weighted descriptor.

    Affinity (product decision, documented in the README): Eq. 8 sums the
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
    J = joints
    if frames is None:
        frames = np.arange(coef.start, coef.start + coef.count)
    frames = np.asarray(frames)
    if not mesh.animated and influence is None and len(frames) == coef.count:
        return _whole_block(coef, mesh, tri, bary, J)
    R = len(frames) * J
    if coef.summed is not None:                      # the rows' bounds are known: no search
        indptr = coef.summed[0]
        lo, hi = int(indptr[(frames[0] - coef.start) * J]), int(indptr[(frames[-1] + 1 - coef.start) * J])
    else:
        first, last = np.asarray(frames[[0, -1]], dtype=coef.frame.dtype)   # same type: no copy of the table
        lo = np.searchsorted(coef.frame, first, "left")
        hi = np.searchsorted(coef.frame, last, "right")
    sel = slice(lo, hi)
    row_of_frame = np.full(coef.count, -1)
    row_of_frame[frames - coef.start] = np.arange(len(frames))
    fr = row_of_frame[coef.frame[sel] - coef.start]
    use = fr >= 0
    desc, c = coef.desc[sel][use], coef.coeff[sel][use]
    key = fr[use].astype(np.int64) * J + coef.joint[sel][use]
    w = coef.weight[sel][use]
    if influence is not None:
        w = w * influence[desc]
    total = np.bincount(key, weights=w, minlength=R)
    with np.errstate(divide="ignore", invalid="ignore"):
        wn = np.where(total[key] > 0, w / total[key], 0.0)                 # Eq. 6
    if mesh.animated:
        targets = np.zeros((R, 3))
        per_frame = np.bincount(key // J, minlength=len(frames))
        bounds = np.concatenate([[0], np.cumsum(per_frame)])
        for i, f in enumerate(frames.tolist()):
            s = slice(bounds[i], bounds[i + 1])
            d, n, t, b = (x[desc[s]] for x in frames_of(mesh, tri, bary, f))
            cc = c[s]
            point = d + cc[:, :1] * n + cc[:, 1:2] * t + cc[:, 2:] * b      # Eq. 1
            for k in range(3):
                targets[:, k] += np.bincount(key[s], weights=wn[s] * point[:, k], minlength=R)  # Eq. 2
    else:
        indptr = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=R))])      # rows sorted by key
        targets = _eq2_static(frames_of(mesh, tri, bary, 0), wn, c, desc, indptr, R)
    affinity = np.bincount(key, weights=wn * coef.proximity[sel][use], minlength=R)
    targets[total == 0] = np.nan
    affinity[total == 0] = 0.0
    return targets.reshape(-1, J, 3), np.clip(affinity.reshape(-1, J), 0.0, 1.0)


def _eq2_static(dntb, wn, coeff, desc, indptr, R):
    """Eq. 2 on a static mesh: four sparse (rows x N) products of the normalised weights
    (times each coefficient of Eq. 1) with the descriptors' points and frames (d, n, t, b)."""
    d, n, t, b = dntb
    shape = (R, len(d))
    targets = sparse.csr_matrix((wn, desc, indptr), shape=shape) @ d
    for k, vec in enumerate((n, t, b)):
        targets += sparse.csr_matrix((wn * coeff[:, k], desc, indptr), shape=shape) @ vec
    return targets


def _summed(coef, J):
    """``indptr (R+1,), wn (K,), affinity (R,), empty (R,)`` of a whole block, R = count x J rows:
    the row bounds of each (frame, joint), the normalised weights (Eq. 6), the affinity and
    which rows have no descriptor. None of it depends on the mesh, so it is built once."""
    if coef.summed is None:
        R = coef.count * J
        key = (coef.frame - coef.start).astype(np.int64) * J + coef.joint
        total = np.bincount(key, weights=coef.weight, minlength=R)
        wn = coef.weight / total[key] if len(key) else np.zeros(0)                    # Eq. 6
        counts = np.bincount(key, minlength=R)
        index = np.int32 if len(key) < 2 ** 31 else np.int64
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(index)
        affinity = np.bincount(key, weights=wn * coef.proximity, minlength=R)
        coef.summed = (indptr, wn, np.clip(affinity, 0.0, 1.0), total == 0)
    return coef.summed


def _whole_block(coef, mesh, tri, bary, J):
    """``reconstruct`` of every frame of a block on a static mesh with no painted influence:
    four sparse products (rows x N) with the descriptors' positions and frames."""
    indptr, wn, affinity, empty = _summed(coef, J)
    targets = _eq2_static(frames_of(mesh, tri, bary, 0), wn, coef.coeff, coef.desc, indptr, coef.count * J)
    targets[empty] = np.nan
    return targets.reshape(-1, J, 3), np.where(empty, 0.0, affinity).reshape(-1, J)
