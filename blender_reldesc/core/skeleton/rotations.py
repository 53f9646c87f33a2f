"""Rotations and pose recovery.

Quaternions are (w, x, y, z), Blender's order, everywhere in this package. The
only conversion to and from scipy's (x, y, z, w) happens in this module.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from ..geometry import cross, dot, normalize


def quat_from_matrix(m):
    """(...,3,3) rotation matrices -> (...,4) unit quaternions (w, x, y, z), w >= 0."""
    m = np.asarray(m, dtype=float)
    q = Rotation.from_matrix(m.reshape(-1, 3, 3)).as_quat()[:, [3, 0, 1, 2]]
    q *= np.where(q[:, :1] < 0, -1.0, 1.0)
    return q.reshape(m.shape[:-2] + (4,))


def matrix_from_quat(q):
    """(...,4) quaternions (w, x, y, z) -> (...,3,3) rotation matrices."""
    q = np.asarray(q, dtype=float)
    m = Rotation.from_quat(q.reshape(-1, 4)[:, [1, 2, 3, 0]]).as_matrix()
    return m.reshape(q.shape[:-1] + (3, 3))


def swing(u, v):
    """(...,3,3) smallest rotations taking directions u to v (no twist about them)."""
    u, v = normalize(u), normalize(v)
    axis = cross(u, v)
    c = dot(u, v)
    # Rodrigues with k = axis (unnormalised): R = I + [k]x + [k]x^2 / (1 + c).
    kx = np.zeros(u.shape[:-1] + (3, 3))
    kx[..., 0, 1], kx[..., 0, 2] = -axis[..., 2], axis[..., 1]
    kx[..., 1, 0], kx[..., 1, 2] = axis[..., 2], -axis[..., 0]
    kx[..., 2, 0], kx[..., 2, 1] = -axis[..., 1], axis[..., 0]
    eye = np.broadcast_to(np.eye(3), kx.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = eye + kx + kx @ kx / (1.0 + c)[..., None, None]
    # Opposite directions: half turn about any axis perpendicular to u.
    opposite = c < -1 + 1e-12
    if np.any(opposite):
        uo = u[opposite]
        helper = np.where(np.abs(uo[:, :1]) < 0.9, [[1.0, 0, 0]], [[0, 1.0, 0]])
        k = normalize(cross(uo, helper))
        r[opposite] = 2 * k[:, :, None] * k[:, None, :] - np.eye(3)
    return r


def kabsch(u, v, weights=None):
    """(...,3,3) best-fit rotations taking vector sets u (...,K,3) onto v (...,K,3)."""
    w = np.ones(u.shape[:-1]) if weights is None else weights
    h = np.einsum("...k,...ki,...kj->...ij", w, u, v)
    uu, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.swapaxes(-1, -2) @ uu.swapaxes(-1, -2)))
    d = np.where(d == 0, 1.0, d)
    fix = np.ones(h.shape[:-1])
    fix[..., -1] = d
    return vt.swapaxes(-1, -2) @ (fix[..., :, None] * uu.swapaxes(-1, -2))


def recover_rotations(skeleton, original, adapted, primary=None):
    """World-space rotation of each bone from the original to the adapted pose.

    Parameters
    ----------
    skeleton : Skeleton.
    original, adapted : (F,J,3) joint positions.
    primary : optional (J,) int, for joints with several children the child
        the bone points at (its tail; -1 for none). Its direction is then met
        exactly: the best-fit rotation is followed by the small swing onto it,
        so a connected child bone starts exactly at the adapted joint.

    Returns
    -------
    (F,J,4) quaternions (w, x, y, z), the delta R_j with
    ``adapted_frame_j = R_j @ original_frame_j``: for a joint with one child,
    the parent's rotation followed by the swing onto the adapted child
    direction, which keeps the bone's twist relative to its parent; for
    several children, the best-fit (Kabsch) rotation of the child offsets
    (children all on one line: as for one child); a leaf or a zero-length bone takes its
    parent's rotation; a lone root keeps identity.
    """
    original = np.asarray(original, dtype=float)
    adapted = np.asarray(adapted, dtype=float)
    F, J, _ = original.shape
    eye = np.broadcast_to(np.eye(3), (F, 3, 3))
    rot = np.broadcast_to(np.eye(3), (F, J, 3, 3)).copy()
    parents = skeleton.parents
    depth = np.zeros(J, int)
    for j in skeleton.order.tolist():
        depth[j] = depth[parents[j]] + 1 if parents[j] >= 0 else 0
    kids_of = []
    for j in range(J):
        kids = skeleton.children(j)
        if len(kids):
            u = original[:, kids] - original[:, j:j + 1]
            kids = kids[(np.linalg.norm(u, axis=-1) > 1e-12).all(axis=0)]
        kids_of.append(kids)
    # Joints of one depth depend only on their parents: one batched swing per depth.
    for d in range(depth.max() + 1):
        level = np.flatnonzero(depth == d)
        single = np.array([j for j in level if len(kids_of[j]) == 1], dtype=int)
        if single.size:
            child = np.array([kids_of[j][0] for j in single])
            u = original[:, child] - original[:, single]
            v = adapted[:, child] - adapted[:, single]
            par = parents[single]
            base = np.where((par >= 0)[None, :, None, None], rot[:, np.maximum(par, 0)], eye[:, None])
            carried = np.einsum("fkij,fkj->fki", base, u)
            # Carry each bone with its parent, then swing it onto the new direction:
            # its twist relative to the parent stays as it was.
            rot[:, single] = swing(carried, v) @ base
        for j in level:
            kids = kids_of[j]
            if len(kids) > 1:
                u = original[:, kids] - original[:, j:j + 1]
                v = adapted[:, kids] - adapted[:, j:j + 1]
                r = kabsch(u, v)
                # Collinear children (e.g. a neck and shoulders that all start at the chest's
                # tail) leave the twist undetermined: carried with the parent and swung, like a
                # bone with one child, so the twist relative to the parent stays as it was.
                span = np.linalg.norm(cross(np.broadcast_to(u[:, :1], u[:, 1:].shape), u[:, 1:]),
                                      axis=-1).max(axis=-1)
                flat = span < 1e-9 * np.linalg.norm(u[:, 0], axis=-1) ** 2
                if np.any(flat):
                    base = rot[flat, parents[j]] if parents[j] >= 0 else eye[flat]
                    carried = np.einsum("fij,fj->fi", base, u[flat].mean(axis=1))
                    r[flat] = swing(carried, v[flat].mean(axis=1)) @ base
                main = -1 if primary is None else int(primary[j])
                if main >= 0 and main in kids.tolist():
                    k = kids.tolist().index(main)
                    carried = np.einsum("fij,fj->fi", r, u[:, k])
                    r = swing(carried, v[:, k]) @ r
                rot[:, j] = r
            elif len(kids) == 0 and parents[j] >= 0:
                rot[:, j] = rot[:, parents[j]]
    return quat_from_matrix(rot)
