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
#: Relative rounding of float32 products, with room (2**-23 is one ulp).
_F32_ROUNDING = 8.0 * 2.0 ** -23
#: Entries of the coefficient table kept in memory (30 bytes each: 300 MB).
CACHE_ENTRIES = 10_000_000


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
    step = max(1, 2_000_000 // max(1, J * N))
    for f0 in range(start, start + count, step) if N else ():
        fs = np.arange(f0, min(start + count, f0 + step))
        if static is not None:
            d, n, t, b = (x[None] for x in static)
        else:
            d, n, t, b = (np.stack(x) for x in zip(*(frames_of(mesh, tri, bary, f) for f in fs)))
        # Which (frame, joint, descriptor) triples may get a weight, from two
        # matrix products in float32 around a local centre (|p|^2 + |d|^2 -
        # 2 p.d and n.(p - d)), with a slack for float32 rounding; the few
        # candidates are then computed exactly in float64, r1 included, so the
        # weights do not depend on how far the scene is from the origin.
        centre = motion[fs].reshape(-1, 3).mean(axis=0)
        p = (motion[fs] - centre).astype(np.float32)                          # (f,J,3)
        dc = (d - centre).astype(np.float32)
        n32 = n.astype(np.float32)
        if static is not None:
            p2 = p.reshape(-1, 3)
            gram = (p2 @ dc[0].T).reshape(len(fs), J, N)
            num = (p2 @ n32[0].T).reshape(len(fs), J, N)
        else:
            gram = np.einsum("fjk,fnk->fjn", p, dc)
            num = np.einsum("fjk,fnk->fjn", p, n32)
        num -= dot(n32, dc)[:, None, :]
        d2 = gram
        d2 *= -2.0
        d2 += dot(p, p)[:, :, None]
        d2 += dot(dc, dc)[:, None, :]
        reach = float(np.abs(p).max() + np.abs(dc).max()) * np.sqrt(3.0)
        slack_n = np.float32(_F32_ROUNDING * reach)
        slack_d2 = np.float32(_F32_ROUNDING * 4.0 * reach * reach)
        front = num > -slack_n
        # r1: distance to the closest descriptor the joint is in front of; here an upper
        # bound (closest of those surely in front, plus the slack), so no candidate is lost.
        sure = num > slack_n
        r1 = np.sqrt(np.where(sure, d2, np.inf).min(axis=-1, keepdims=True) + slack_d2)
        keep = front & (d2 < (r1 + np.float32(window * (1 + 1e-5))) ** 2 + slack_d2)
        fi, ji, di = np.nonzero(keep)
        src = fi if static is None else np.zeros_like(fi)
        rel = motion[fs[fi], ji] - d[src, di]
        dk = np.linalg.norm(rel, axis=-1)
        alpha = dot(rel, n[src, di])
        r1x = np.full(len(fs) * J, np.inf)
        ahead = alpha > 0
        np.minimum.at(r1x, (fi * J + ji)[ahead], dk[ahead])
        r1k = r1x[fi * J + ji]
        facing = np.where(dk > 0, alpha / np.where(dk > 0, dk, 1.0), 1.0)     # Eq. 3
        fade = np.clip(1.0 - (dk - r1k) / window, 0.0, 1.0)                   # Eq. 5
        w = facing * fade                                                     # Eq. 4
        good = w > 0
        fi, ji, di, src, rel = fi[good], ji[good], di[good], src[good], rel[good]
        coeff = np.stack([alpha[good], dot(rel, t[src, di]), dot(rel, b[src, di])], axis=-1)   # Eq. 1
        parts.append((fs[fi], ji, di, w[good], coeff, (d0 / np.maximum(dk, d0))[good]))
    if not parts:
        empty = np.zeros(0, np.int32)
        return Coefficients(start, count, empty, empty, empty, np.zeros(0), np.zeros((0, 3)), np.zeros(0))
    frame, joint, desc, weight, coeff, prox = (np.concatenate(x) for x in zip(*parts))
    # Stored compactly (30 bytes an entry instead of 52): float32 keeps targets
    # within 1e-7 of the float64 ones, far below any tolerance that matters.
    return Coefficients(start, count, frame.astype(np.int32), joint.astype(np.int16), desc.astype(np.int32),
                        weight.astype(np.float32), coeff.astype(np.float32), prox.astype(np.float32))


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
        """Blocks that cover frames ``start .. stop - 1``.

        A short span of several frames (a live-preview jump) whose block is not cached yet is
        computed on its own, without building and caching the whole block.
        """
        first = (start // BLOCK_FRAMES) * BLOCK_FRAMES
        if 1 < stop - start <= SHORT_SPAN and first not in self.blocks and stop <= first + BLOCK_FRAMES:
            return [self._compute(start, stop - start)]
        return [self.block(s) for s in range(first, stop, BLOCK_FRAMES)]


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
    J, N = joints, len(tri)
    if frames is None:
        frames = np.arange(coef.start, coef.start + coef.count)
    frames = np.asarray(frames)
    R = len(frames) * J
    lo = np.searchsorted(coef.frame, frames[0], "left")
    hi = np.searchsorted(coef.frame, frames[-1], "right")
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
        # Static mesh: Eq. 2 is four sparse (rows x N) products with the
        # descriptor positions and frames, the rows already sorted by key.
        d, n, t, b = frames_of(mesh, tri, bary, 0)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=R))])
        targets = np.zeros((R, 3))
        for values, vec in ((wn, d), (wn * c[:, 0], n), (wn * c[:, 1], t), (wn * c[:, 2], b)):
            targets += sparse.csr_matrix((values, desc, indptr), shape=(R, N)) @ vec
    affinity = np.bincount(key, weights=wn * coef.proximity[sel][use], minlength=R)
    targets[total == 0] = np.nan
    affinity[total == 0] = 0.0
    return targets.reshape(-1, J, 3), np.clip(affinity.reshape(-1, J), 0.0, 1.0)
