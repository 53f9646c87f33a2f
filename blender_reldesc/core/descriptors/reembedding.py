"""Descriptor re-embedding (Tonneau et al. 2016, §6, Eq. 15-19).

When a contact is moved, the joints of a key posture go from where the
descriptors put them, p_j = Σ_i w_ij (d_i + r_ij), to a new place p'_j. The
descriptors are re-embedded so that they describe p'_j instead: each gets a new
origin d_i and a rotation R_i of its relative vectors, minimising

    E_J = Σ_j ‖p'_j − Σ_i w_ij (d_i + R_i r_ij)‖²                     (Eq. 15)
    E_S = Σ_i Σ_{n ∈ kNN(i)} ‖d_i − d_n − R_i (d⁰_i − d⁰_n)‖² + ‖R_i − R_n‖²_F
    E_R = Σ_i ‖R_i − R'_i‖²_F   (R'_i: the previous iteration's rotation) (Eq. 17)

as E_J + w_S E_S + w_R E_R (Eq. 18). Each iteration is a linear least-squares
problem (Eq. 19) and each R_i is then projected onto the nearest rotation by SVD
(det +1); w_S starts at 100 and drops by 1 per iteration, so the descriptors
first move together and then adjust one by one. The relative vectors r_ij are
those of the scene before the contact moved (the descriptors' current frames),
so the relation between body and environment is kept around the new contact,
and R_i starts at the identity as in the paper.

E_S differs from Eq. 16 on purpose. Read literally, ‖d_i − d_n‖² pulls
neighbouring origins onto each other (with w_S = 100 at first, the whole set
collapses); on the displacements, ‖(d_i − d⁰_i) − (d_n − d⁰_n)‖², it resists
any rotation of the set. Measured against the neighbour's offset turned by the
descriptor's own rotation (as-rigid-as-possible), it is 0 for every rigid
motion of the set and still linear in the unknowns, so a contact moved and
turned as a whole is re-embedded exactly.

The unknowns split by coordinate: row a of every equation involves only the
a-th coordinate of d_i and the a-th row of R_i, with the same coefficients for
a = x, y, z. So one sparse matrix of 4 unknowns per descriptor is factorised
per iteration and solved for three right-hand sides, instead of one system of
12 unknowns per descriptor.

``attach`` then ties each new origin and rotation to the surface under it
(triangle, barycentric coordinates, an offset and a rotation in the triangle's
local frame), so that moving the new support later carries the contact with it
(the paper's Fig. 8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve
from scipy.sparse.linalg import splu
from scipy.spatial import cKDTree

from ..errors import InputError
from ..geometry.triangles import descriptor_frames

#: Eq. 16: neighbours per descriptor.
NEIGHBOURS = 3
#: w_S at the first iteration, lowered by 1 per iteration (the paper: 100, about 100 iterations).
SMOOTH_START = 100.0
#: w_R.
ROTATION_WEIGHT = 1.0
#: Up to this many unknowns (4 per descriptor) each iteration's system is solved dense by
#: Cholesky (a contact's limb: some 60 descriptors, 3.6x faster than a sparse LU per
#: iteration); above it, by a sparse LU.
DENSE_UNKNOWNS = 480
#: Keeps the origins of descriptors that no equation ties down where they were (relative to
#: the other weights: far below anything that matters).
_ANCHOR = 1e-9


@dataclass
class Embedding:
    """New origins ``points (n,3)`` and rotations ``rotations (n,3,3)`` of the n descriptors
    given to ``reembed`` (``index``: 0..n-1, positions in those arrays, not the binding's
    descriptor ids); ``energy`` is E_J after each iteration (after the rotations are projected)."""

    index: np.ndarray
    points: np.ndarray
    rotations: np.ndarray
    energy: list = field(default_factory=list)


def predict(rows, desc, weight, relative, points, rotations, count):
    """(count,3) joint positions Σ_i w_ij (d_i + R_i r_ij) of the terms ``rows (K,)``,
    ``desc (K,)`` (indices into ``points`` and ``rotations``), ``weight (K,)``, ``relative (K,3)``."""
    term = weight[:, None] * (points[desc] + np.einsum("kab,kb->ka", rotations[desc], relative))
    out = np.zeros((count, 3))
    np.add.at(out, rows, term)
    return out


def reembed(rows, desc, weight, relative, targets, points, rotations=None, *, neighbours=NEIGHBOURS,
            iterations=None, smooth=SMOOTH_START, rotation_weight=ROTATION_WEIGHT, tolerance=0.0, floor=1.0,
            row_weight=None):
    """Re-embed descriptors so they describe new joint positions (Eq. 15-19).

    Parameters
    ----------
    rows, desc, weight, relative : the terms of Eq. 15, one per (joint, descriptor) with a
        weight: the row of ``targets`` (K,), the descriptor (K,) indexing ``points``, the
        normalised weight w_ij (K,) and the relative vector r_ij (K,3) of the original scene.
    targets : (R,3) the new joint positions p'_j (rows of several key postures may be stacked).
    points : (n,3) the descriptors' current origins (where they put the joints before the
        contact moved), the starting point. rotations : (n,3,3) R'_i of the first iteration
        (default: the identity, as the paper).
    neighbours : k of Eq. 16. smooth : w_S of the first iteration, lowered by 1 per iteration.
    iterations : how many (default: until w_S reaches ``floor``).
    tolerance : stop once E_J is below it.
    row_weight : optional (R,) weight of each target row in E_J (default 1).
    floor : the lowest w_S. Past 1, w_S keeps falling by a fifth per iteration down to it (the
        paper runs "until E_J is below the threshold"), so descriptors that E_S holds to
        neighbours with other duties (a stone's top next to the floor) can still let go.

    Returns an ``Embedding`` of the n descriptors.
    """
    rows, desc = np.asarray(rows, np.int64), np.asarray(desc, np.int64)
    weight, relative = np.asarray(weight, float), np.asarray(relative, float).reshape(-1, 3)
    targets = np.asarray(targets, float).reshape(-1, 3)
    d = np.array(points, dtype=float).reshape(-1, 3)
    n, K = len(d), len(rows)
    R = np.broadcast_to(np.eye(3), (n, 3, 3)).copy() if rotations is None else np.array(rotations, float).reshape(-1, 3, 3)
    if len(R) != n or not (len(desc) == len(weight) == len(relative) == K):
        raise InputError("re-embedding needs one rotation per descriptor and one descriptor, weight and "
                         "relative vector per term")
    for name, x in (("targets", targets), ("points", d), ("rotations", R), ("weights", weight),
                    ("relative vectors", relative)):
        if not np.all(np.isfinite(x)):
            raise InputError(f"re-embedding: the {name} contain NaN or inf")
    if K and (desc.min() < 0 or desc.max() >= n or rows.min() < 0 or rows.max() >= len(targets)):
        raise InputError("re-embedding: a term names a descriptor or joint row that does not exist")
    schedule = [float(w) for w in np.arange(float(smooth), 1.0 - 1e-9, -1.0)] or [float(smooth)]
    while schedule[-1] * 0.8 >= floor - 1e-12:
        schedule.append(schedule[-1] * 0.8)
    iterations = len(schedule) if iterations is None else int(iterations)
    # E_J: per coordinate a, row j reads Σ w (d_a + R_a · r) = p'_a over unknowns
    # [d_a (n), R_a0 (n), R_a1 (n), R_a2 (n)].
    cols = np.concatenate([desc + k * n for k in range(4)])
    vals = np.concatenate([weight] + [weight * relative[:, k] for k in range(3)])
    AJ = sparse.csr_matrix((vals, (np.tile(rows, 4), cols)), shape=(len(targets), 4 * n))
    rw = np.ones(len(targets)) if row_weight is None else np.asarray(row_weight, float)
    JtJ = (AJ.T @ sparse.diags(rw) @ AJ).tocsc()
    Jtp = AJ.T @ (rw[:, None] * targets)                                    # (4n, 3)
    # E_S over each descriptor's k nearest (by its current origin): per pair (i, m), row a reads
    # d_ia - d_ma - R_i[a] . (d0_i - d0_m) = 0, and R_i[a] - R_m[a] = 0, with the same
    # coefficients for every a.
    k = min(neighbours, n - 1)
    if k > 0:
        _, near = cKDTree(d).query(d, k=k + 1)
        i, m = np.repeat(np.arange(n), k), near[:, 1:].ravel()
        P = len(i)
        e = d[i] - d[m]
        at = np.arange(P)
        shift = sparse.csr_matrix((np.concatenate([np.ones(P), -np.ones(P)] + [-e[:, b] for b in range(3)]),
                                   (np.tile(at, 5), np.concatenate([i, m] + [i + (1 + b) * n for b in range(3)]))),
                                  shape=(P, 4 * n))
        turn = sparse.csr_matrix((np.tile(np.r_[np.ones(P), -np.ones(P)], 3),
                                  (np.concatenate([at + b * P for b in range(3) for _ in (0, 1)]),
                                   np.concatenate([x + (1 + b) * n for b in range(3) for x in (i, m)]))),
                                 shape=(3 * P, 4 * n))
    # The weights w_S and w_R are relative to how firmly E_J holds an average descriptor: its
    # origin by Σ_j w_ij² (``stiff``), its rotation by Σ_j w_ij² |r_ij|² (``stiff * lever``).
    # The paper's numbers are for its units and descriptor density; relative, the same numbers
    # give the same result in metres or centimetres and with 10 or 500 descriptors per joint.
    stiff_i = np.bincount(desc, weights=rw[rows] * weight ** 2, minlength=n)
    held = stiff_i > 0
    stiff = float(stiff_i[held].mean()) if held.any() else 1.0
    lever = float(np.sum(rw[rows] * weight ** 2 * np.einsum("ka,ka->k", relative, relative)) / max(stiff_i.sum(), 1e-300))
    lever = lever if lever > 0 else 1.0
    if k > 0:
        L = (stiff * (shift.T @ shift) + stiff * lever * (turn.T @ turn)).tocsc()
    else:
        L = sparse.csc_matrix((4 * n, 4 * n))
    # E_R on the rotation blocks, and a vanishing pull of each origin to where it was.
    rotation_weight = float(rotation_weight) * stiff * lever
    keep = sparse.diags(np.r_[np.full(n, _ANCHOR * stiff), np.full(3 * n, rotation_weight)]).tocsc()
    d_start = d.copy()
    energy = []
    dense = 4 * n <= DENSE_UNKNOWNS
    if dense:                                       # summed dense per iteration, not sparse
        JtJ, L, keep = JtJ.toarray(), L.toarray(), keep.toarray()
    for it in range(iterations):
        w_s = schedule[min(it, len(schedule) - 1)]
        M = JtJ + w_s * L + keep                    # E_S weighted by w_S (not w_S² by stacking)
        rhs = Jtp.copy()
        rhs[:n] += _ANCHOR * stiff * d_start
        rhs[n:] += rotation_weight * np.concatenate([R[:, :, b] for b in range(3)])  # R'_i rows
        x = _solve(M, rhs)                                                 # (4n, 3): column a
        d = x[:n].copy()
        raw = np.stack([x[(1 + b) * n:(2 + b) * n] for b in range(3)], axis=2)   # raw[i, a, b]
        R = project_rotations(raw)
        err = targets - predict(rows, desc, weight, relative, d, R, len(targets))
        energy.append(float(np.einsum("i,ij,ij->", rw, err, err)))
        if energy[-1] <= tolerance:
            break
    return Embedding(np.arange(n), d, R, energy)


def _solve(M, rhs):
    """M x = rhs for the symmetric positive definite M of one iteration (dense or sparse)."""
    if isinstance(M, np.ndarray):
        try:
            return cho_solve(cho_factor(M), rhs)
        except np.linalg.LinAlgError:               # not numerically positive definite: LU
            return np.linalg.solve(M, rhs)
    return splu(M.tocsc()).solve(rhs)


def project_rotations(m):
    """(n,3,3) nearest rotations (det +1) to matrices ``m`` (n,3,3), by SVD."""
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0
    if np.any(flip):
        u = u.copy()
        u[flip, :, -1] *= -1.0
        r[flip] = u[flip] @ vt[flip]
    return r


@dataclass
class Attachment:
    """Descriptors tied to a surface: each ``triangle (n,)`` and ``bary (n,3)``, with its
    origin's ``offset (n,3)`` and its rotation ``local (n,3,3)`` in the triangle's frame
    (n, t, b) at the time of attaching."""

    triangle: np.ndarray
    bary: np.ndarray
    offset: np.ndarray
    local: np.ndarray

    def evaluate(self, mesh, f=0):
        """``points (n,3), rotations (n,3,3)`` on ``mesh`` at frame f: carried by the surface."""
        d, n, t, b = descriptor_frames(mesh.frame(f), mesh.normals(f), mesh.triangles, self.triangle, self.bary)
        frame = np.stack([n, t, b], axis=2)                                # columns n, t, b
        return d + np.einsum("nab,nb->na", frame, self.offset), frame @ self.local


def attach(mesh, points, rotations, f=0, triangles=None):
    """Tie origins ``points (n,3)`` and ``rotations (n,3,3)`` to the closest surface of
    ``mesh`` at frame f (or to the triangles ``triangles`` (m,) only, e.g. the new support)."""
    from ..geometry.proximity import Collider
    points = np.asarray(points, float).reshape(-1, 3)
    verts, normals = mesh.frame(f), mesh.normals(f)
    valid = mesh.valid.copy()
    if triangles is not None:
        only = np.zeros(len(valid), bool)
        only[np.asarray(triangles, np.int64)] = True
        valid &= only
    if not valid.any():
        raise InputError("no valid triangle to attach the descriptors to")
    corners = verts[mesh.triangles[valid]]
    span = float(np.linalg.norm(corners.max(axis=(0, 1)) - corners.min(axis=(0, 1))))
    # The nearest triangle centre bounds each point's distance to the surface from above, so
    # the search looks that far only (a band as wide as the scene searched every triangle of
    # it: 2 s over 50k triangles).
    bound = cKDTree(corners.mean(axis=1)).query(points)[0] * (1.0 + 1e-9) + 1e-9 * span + 1e-12
    collider = Collider(verts, normals, mesh.triangles, valid, float(bound.max(initial=1e-12)))
    _, _, tri, bary = collider.closest(points, far=bound)
    d, n, t, b = descriptor_frames(verts, normals, mesh.triangles, tri, bary)
    frame = np.stack([n, t, b], axis=2)
    offset = np.einsum("nba,nb->na", frame, points - d)                    # frameᵀ (p - d)
    local = frame.transpose(0, 2, 1) @ np.asarray(rotations, float).reshape(-1, 3, 3)
    return Attachment(tri, bary, offset, local)


@dataclass
class Reembedded:
    """Descriptors ``index (m,)`` re-embedded and tied to a surface (``attachment``), used over
    ``frames (n,)`` with a blend ``blend (n,)`` in [0, 1] from where the bind put them (0) to
    their new embedding (1): a contact moved over a phase, eased in and out. ``joints``: the
    joints that use the new embedding (None: all); the others keep the bind's, so a limb's
    descriptors can move with its contact without dragging the rest of the body that shares
    them. ``held`` joints are pinned to their targets on its frames (``adapt``)."""

    index: np.ndarray
    attachment: Attachment
    frames: np.ndarray
    blend: np.ndarray
    joints: np.ndarray | None = None
    #: ``[(frames (h,), joints (k,)), ...]``: joints held exactly on their re-embedded targets on
    #: those frames (a contact phase: soft, a planted foot stayed a few centimetres off its new
    #: support); None: the targets are soft everywhere.
    held: list | None = None

    def replace(self, mesh):
        """``f -> (index, points, rotations)`` on ``mesh`` (see ``descriptors.reconstruct``)."""
        cache = {}

        def at(f):
            key = f if mesh.animated else 0
            if key not in cache:
                cache[key] = (self.index,) + self.attachment.evaluate(mesh, key)
            return cache[key]
        return at
