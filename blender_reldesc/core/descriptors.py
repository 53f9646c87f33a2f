"""Relative-vector coefficients, weights and reconstruction (SCA 2013 §4, §8).

As in §8 of the paper, only the descriptors' triangles and barycentric
coordinates are stored; the coefficients (α, β, γ) and weights are computed
from the original motion on the bind-time mesh when first needed and kept as a
sparse table of the (frame, joint, descriptor) triples whose weight is not 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import constants as C
from .geometry import descriptor_frames, dot

#: Upper bound of frames * joints * descriptors handled in one dense block.
_BLOCK = 2_000_000


@dataclass
class Coefficients:
    """Sparse table of descriptor terms, sorted by (frame, joint).

    frame, joint, desc : (K,) int32 indices.
    weight : (K,) float, unnormalised weight w'' (Eq. 3-5).
    coeff : (K,3) float, (α, β, γ) of Eq. 1 in the descriptor's (n, t, b) frame.
    proximity : (K,) float in (0,1], ``min(1, d0 / |p_j - d_i|)``: how close the
        joint is to the descriptor, for the affinity (see ``affinity``).
    """

    frame: np.ndarray
    joint: np.ndarray
    desc: np.ndarray
    weight: np.ndarray
    coeff: np.ndarray
    proximity: np.ndarray


def frames_of(mesh, tri, bary, f):
    """(d, n, t, b) of the descriptors on ``mesh`` at frame f."""
    return descriptor_frames(mesh.frame(f), mesh.normals(f), mesh.triangles, tri, bary)


def compute_coefficients(motion, mesh, tri, bary, body_height, d0):
    """Coefficients of every joint against every descriptor, from the original motion.

    Parameters
    ----------
    motion : (F,J,3) original joint positions.
    mesh : the bind-time TriMesh. tri (N,) int, bary (N,3): the descriptors.
    body_height : float, sets the fade window r2 - r1 (Eq. 5).
    d0 : float, the minimum distance of Eq. 7; distances below it count as contact.
    """
    F, J, _ = motion.shape
    N = len(tri)
    parts = []
    if N == 0:
        empty_i = np.zeros(0, np.int32)
        return Coefficients(empty_i, empty_i, empty_i, np.zeros(0), np.zeros((0, 3)), np.zeros(0))
    window = C.WINDOW_FRACTION * body_height
    static = None if mesh.animated else frames_of(mesh, tri, bary, 0)
    chunk = max(1, _BLOCK // (J * N))
    for f0 in range(0, F, chunk):
        fs = np.arange(f0, min(F, f0 + chunk))
        if static is not None:
            d, n, t, b = (x[None] for x in static)
        else:
            d, n, t, b = (np.stack(x) for x in zip(*(frames_of(mesh, tri, bary, f) for f in fs)))
        rel = motion[fs][:, :, None, :] - d[:, None]                     # (f,J,N,3)
        dist = np.linalg.norm(rel, axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            facing = np.where(dist > 0, dot(rel, n[:, None]) / dist, 1.0)  # Eq. 3
        front = facing > 0
        # r1: distance to the closest descriptor the joint is in front of.
        r1 = np.where(front, dist, np.inf).min(axis=-1, keepdims=True)
        fade = np.clip(1.0 - (dist - r1) / window, 0.0, 1.0)                # Eq. 5
        w = np.where(front, facing * fade, 0.0)                             # Eq. 4
        fi, ji, di = np.nonzero(w > 0)
        r = rel[fi, ji, di]
        nn, tt, bb = (x[fi if static is None else np.zeros_like(fi), di] for x in (n, t, b))
        coeff = np.stack([dot(r, nn), dot(r, tt), dot(r, bb)], axis=-1)     # Eq. 1
        prox = d0 / np.maximum(dist[fi, ji, di], d0)
        parts.append((fs[fi], ji, di, w[fi, ji, di], coeff, prox))
    frame, joint, desc, weight, coeff, prox = (np.concatenate(x) for x in zip(*parts))
    return Coefficients(frame.astype(np.int32), joint.astype(np.int32), desc.astype(np.int32),
                        weight, coeff, prox)


def reconstruct(coef, mesh, tri, bary, shape, influence=None):
    """Joint targets (Eq. 2) and summed weights on a (deformed) mesh.

    Parameters
    ----------
    coef : Coefficients from the bind-time mesh.
    mesh : TriMesh with the bind-time triangles (static, or animated over F).
    tri, bary : the descriptors.
    shape : (F, J).
    influence : (N,) float in [0,1] or None, scales each descriptor's weight.

    Returns
    -------
    targets : (F,J,3), NaN where a joint has no weighted descriptor.
    affinity : (F,J) in [0,1], 0 where a joint has no weighted descriptor.

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
    F, J = shape
    w = coef.weight if influence is None else coef.weight * influence[coef.desc]
    key = coef.frame.astype(np.int64) * J + coef.joint
    total = np.bincount(key, weights=w, minlength=F * J)
    if mesh.animated:
        N = len(tri)
        d, n, t, b = (np.stack(x) for x in zip(*(frames_of(mesh, tri, bary, f) for f in range(F))))
        flat = coef.frame.astype(np.int64) * N + coef.desc
        d, n, t, b = (x.reshape(-1, 3)[flat] for x in (d, n, t, b))
    else:
        d, n, t, b = (x[coef.desc] for x in frames_of(mesh, tri, bary, 0))
    c = coef.coeff
    point = d + c[:, :1] * n + c[:, 1:2] * t + c[:, 2:] * b              # Eq. 1
    with np.errstate(divide="ignore", invalid="ignore"):
        wn = w / total[key]                                                 # Eq. 6
        targets = np.stack([np.bincount(key, weights=wn * point[:, k], minlength=F * J)
                            for k in range(3)], axis=-1)                    # Eq. 2
        affinity = np.bincount(key, weights=wn * coef.proximity, minlength=F * J)
    targets[total == 0] = np.nan
    affinity[total == 0] = 0.0
    return targets.reshape(F, J, 3), np.clip(affinity.reshape(F, J), 0.0, 1.0)
