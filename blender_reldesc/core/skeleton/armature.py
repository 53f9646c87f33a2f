"""Armature math without Blender: joints of a bone hierarchy and pose matrices.

Conventions (those of Blender's Python API, here as plain arrays):

- ``rest`` (B,4,4): each bone's rest matrix in armature space (``Bone.matrix_local``).
- ``pose`` (F,B,4,4): each bone's posed matrix in armature space (``PoseBone.matrix``).
- ``basis`` (F,B,4,4): each bone's pose relative to its rest (``PoseBone.matrix_basis``).
- ``pose = pose[parent] @ inv(rest[parent]) @ rest @ basis`` for a bone that
  inherits its parent's rotation and scale (Blender's default), and
  ``pose = rest @ basis`` for a root.

Joints: one per bone head, plus one per leaf-bone tail, so every bone's
direction is carried by a joint pair.
"""

from __future__ import annotations

import numpy as np

from ..geometry import cross
from .rotations import nearest_rotation, orthonormal, quat_from_matrix, recover_rotations
from .hierarchy import Skeleton


def primary_children(bone_parents, connected):
    """(J,) for the joints of ``joint_layout``: the connected child bone of each
    bone (the joint its tail sits on), -1 where there is none."""
    bone_parents = np.asarray(bone_parents)
    B = len(bone_parents)
    has_child = np.zeros(B, bool)
    has_child[bone_parents[bone_parents >= 0]] = True
    out = np.full(B + int((~has_child).sum()), -1)
    for b in np.flatnonzero(connected & (bone_parents >= 0)):
        out[bone_parents[b]] = b
    return out


def joint_layout(bone_names, bone_parents):
    """Joints of a bone hierarchy.

    Returns ``skeleton`` (Skeleton of bone heads then leaf tails, named
    ``<bone>`` and ``<bone>.tail``), ``head_joint (B,)`` and ``tail_joint
    (B,)`` (-1 for a bone whose tail is not a joint).
    """
    bone_parents = np.asarray(bone_parents, dtype=np.int64)
    B = len(bone_names)
    has_child = np.zeros(B, bool)
    has_child[bone_parents[bone_parents >= 0]] = True
    leaves = np.flatnonzero(~has_child)
    names = list(bone_names) + [f"{bone_names[b]}.tail" for b in leaves]
    parents = np.concatenate([bone_parents, leaves])
    tail = np.full(B, -1)
    tail[leaves] = B + np.arange(len(leaves))
    return Skeleton(names, parents), np.arange(B), tail


def affine_inverse(m):
    """Inverse of 4x4 matrices (...,4,4): of affine ones (bottom row 0 0 0 1, every pose and
    rest matrix) from the 3x3 adjugate, about nine times faster than LAPACK on a clip's
    (F,4,4) (1.2 -> 0.13 ms at 600 frames) and as exact on matrices of rotation and scale;
    others, and singular ones (which raise ``LinAlgError``), through ``np.linalg.inv``."""
    m = np.asarray(m, dtype=float)
    if m.shape[-2:] != (4, 4) or not m.size or np.any(m[..., 3, :] != (0.0, 0.0, 0.0, 1.0)):
        return np.linalg.inv(m)
    c0, c1, c2 = m[..., :3, 0], m[..., :3, 1], m[..., :3, 2]
    rows = np.stack([cross(c1, c2), cross(c2, c0), cross(c0, c1)], axis=-2)   # adjugate
    det = np.einsum("...i,...i->...", c0, rows[..., 0, :])
    if not np.all(np.isfinite(det)) or np.any(det == 0.0):
        return np.linalg.inv(m)
    out = np.zeros_like(m)
    out[..., :3, :3] = rows / det[..., None, None]
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", out[..., :3, :3], m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out



def into_frame(matrices, points, collapse=True, like=None, tolerance=1e-6):
    """Points into the frames of ``matrices`` (F,4,4) (each frame's points carried by its matrix's
    inverse): (N,3) points the same on every frame, or (F,N,3). Returns (N,3) when one matrix
    serves every frame, or, with ``collapse``, when the points come out the same on every frame
    (within 1e-9 of their size); else (F,N,3). None for ``matrices`` leaves the points as they are.

    like : optional (N,3) points these are expected to equal where nothing moved them (a bound
        environment): a point within ``tolerance`` of the points' extent of its twin is taken as
        its twin, so the float noise of single-precision matrices does not pass for an edit.
    """
    if matrices is None:
        return points
    inv = affine_inverse(np.asarray(matrices, float))
    if points.ndim == 2 and np.abs(inv - inv[0]).max() <= 1e-12:
        out = points @ inv[0, :3, :3].T + inv[0, :3, 3]
    else:
        if points.ndim == 2:
            points = np.broadcast_to(points, (len(inv),) + points.shape)
        out = np.einsum("fij,fkj->fki", inv[:, :3, :3], points) + inv[:, None, :3, 3]
        if collapse and np.abs(out - out[0]).max() <= 1e-9 * max(1.0, float(np.abs(out[0]).max())):
            out = out[0]
    if like is not None and len(like):
        like = np.asarray(like, float)
        tol = tolerance * max(1.0, float(np.ptp(like, axis=0).max()))
        same = (np.abs(out - like) <= tol).all(axis=-1)
        out = np.where(same[..., None], like, out)
    return out


def basis_from_pose(rest, parents, pose):
    """``basis (F,B,4,4)`` such that the bones reach ``pose`` (see module docstring)."""
    parents = np.asarray(parents)
    basis = np.empty_like(pose)
    root = parents < 0
    basis[:, root] = affine_inverse(rest[root])[None] @ pose[:, root]
    child = np.flatnonzero(~root)
    if child.size:
        p = parents[child]
        local = affine_inverse(rest[p]) @ rest[child]                              # rest relative to parent
        basis[:, child] = affine_inverse(local)[None] @ affine_inverse(pose[:, p]) @ pose[:, child]
    return basis


def pose_from_basis(rest, parents, basis, order):
    """Forward kinematics: ``pose (F,B,4,4)`` from ``basis``; ``order`` parents-first."""
    pose = np.empty_like(basis)
    for b in order:
        p = parents[b]
        if p < 0:
            pose[:, b] = rest[b] @ basis[:, b]
        else:
            pose[:, b] = pose[:, p] @ (affine_inverse(rest[p]) @ rest[b]) @ basis[:, b]
    return pose


def adapted_pose(skeleton, head_joint, original_joints, adapted_joints, pose, primary=None):
    """Posed bone matrices (F,B,4,4) that put the bones on the adapted joints.

    original_joints, adapted_joints : (F,J,3) in armature space.
    pose : (F,B,4,4) original posed matrices (armature space, unit scale).
    Each bone is rotated by its joint's recovered rotation (twist kept, see
    ``recover_rotations``, with ``primary`` as there) and its head moved to
    the adapted head.
    """
    delta = recover_rotations(skeleton, original_joints, adapted_joints, primary, matrices=True)
    out = pose.copy()
    out[..., :3, :3] = delta[:, head_joint] @ pose[..., :3, :3]
    out[..., :3, 3] = adapted_joints[:, head_joint]
    return out


def polar(m):
    """(...,3,3) -> rotation (...,3,3) and stretch (...,3,3) with ``m = rotation @ stretch``
    (the stretch is the bone's own scale: identity for an unscaled bone; a mirrored bone keeps a
    proper rotation, ``nearest_rotation``)."""
    rot = nearest_rotation(m)
    return rot, np.swapaxes(rot, -1, -2) @ np.asarray(m, dtype=float)


def rotation_scale(m):
    """(...,3,3) -> rotation (...,3,3) and per-axis scale (...,3) with ``m ~ rotation @ diag(scale)``,
    exact for the bone's own axis (Y, along which its tail and connected children lie).

    A basis is a rotation times a scale when the bone is keyed; constraints (Stretch To with
    volume preservation) and inherited non-uniform scale add shear, which keys cannot carry.
    Blender's visual keying then loses the tail; this keeps the Y column exact and puts the
    shear's error on X and Z, which only offset children hang from.
    """
    y = m[..., :, 1]
    y = y / np.maximum(np.linalg.norm(y, axis=-1, keepdims=True), 1e-300)
    x = m[..., :, 0] - np.einsum("...i,...i->...", m[..., :, 0], y)[..., None] * y
    x = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)
    z = np.cross(x, y)
    rot = np.stack([x, y, z], axis=-1)
    scale = np.einsum("...ij,...ij->...j", rot, m)
    return rot, scale


def split_basis(basis):
    """(F,B,4,4) basis -> rotation quaternions (F,B,4) (w,x,y,z, sign-continuous over
    frames) and locations (F,B,3). The rotation part is orthonormalised first."""
    return sign_continuous(quat_from_matrix(orthonormal(basis[..., :3, :3]))), basis[..., :3, 3].copy()


def sign_continuous(q):
    """(F,B,4) quaternions with consecutive frames in the same hemisphere, so that
    interpolating keys takes the short way."""
    q = np.array(q)
    if len(q) < 2:
        return q
    # Frame f is negated when its dot with frame f-1 *as already signed* is negative. With d the
    # dot of the unsigned frames, frame f's sign is then frame f-1's times the sign of d; where d
    # is neither positive nor negative (0, NaN) it is +1 whatever came before. So the signs are a
    # running product of the signs of d, started again at each such frame (one pass of array
    # calls instead of a Python loop over frames: 1000 frames of 27 bones 7.5 ms -> 1.9 ms).
    d = np.einsum("fbk,fbk->fb", q[1:], q[:-1])
    restart = ~((d > 0) | (d < 0))
    step = np.where(d < 0, -1.0, 1.0)
    run = np.cumprod(step, axis=0)                          # +-1: exact
    # Divided by (here: times, as it is +-1) the running product at the last restart.
    last = np.maximum.accumulate(np.where(restart, np.arange(len(d))[:, None], -1), axis=0)
    at = np.where(last >= 0, np.take_along_axis(run, np.maximum(last, 0), axis=0), 1.0)
    q[1:] *= (run * at)[..., None]
    return q


def euler_from_quat(q, order="XYZ"):
    """(F,B,4) quaternions -> (F,B,3) Euler angles (radians) in Blender's ``order``,
    unwrapped over frames. Blender's 'XYZ' applies X first: scipy's extrinsic 'xyz'."""
    from scipy.spatial.transform import Rotation
    flat = q.reshape(-1, 4)[:, [1, 2, 3, 0]]
    angles = Rotation.from_quat(flat).as_euler(order.lower())             # extrinsic, in order's axes
    angles = angles.reshape(q.shape[:-1] + (3,))
    # Reorder from (first, second, third applied) to (x, y, z) components.
    out = np.empty_like(angles)
    for k, axis in enumerate(order):
        out[..., "XYZ".index(axis)] = angles[..., k]
    return np.unwrap(out, axis=0)


def axis_angle_from_quat(q):
    """(F,B,4) quaternions -> (F,B,4) (angle, x, y, z) as Blender's AXIS_ANGLE stores."""
    w = np.clip(q[..., 0], -1.0, 1.0)
    angle = 2.0 * np.arccos(w)
    s = np.sqrt(np.maximum(1.0 - w * w, 0.0))
    axis = np.where(s[..., None] > 1e-12, q[..., 1:] / np.maximum(s, 1e-12)[..., None], [0.0, 1.0, 0.0])
    return np.concatenate([angle[..., None], axis], axis=-1)
