"""Pose recovery: rotations that carry the original bones onto the adapted ones."""

import numpy as np

from blender_reldesc.core import recover_rotations
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.skeleton.rotations import matrix_from_quat, quat_from_matrix, swing

from core_helpers import random_rotation


def test_rigid_rotation_of_the_pose_is_recovered_for_every_bone():
    skel, motion = S.walk(10)
    R = random_rotation(np.random.default_rng(0))
    q = recover_rotations(skel, motion, motion @ R.T + [1, 2, 3])
    np.testing.assert_allclose(matrix_from_quat(q), np.broadcast_to(R, q.shape[:2] + (3, 3)), atol=1e-9)


def test_recovered_rotations_carry_each_single_child_bone_onto_its_new_direction():
    rng = np.random.default_rng(1)
    skel, motion = S.walk(10)
    adapted = motion + 0.05 * rng.normal(size=motion.shape)
    m = matrix_from_quat(recover_rotations(skel, motion, adapted))
    for j in range(len(skel)):
        kids = skel.children(j)
        if len(kids) != 1:
            continue
        u = motion[:, kids[0]] - motion[:, j]
        v = adapted[:, kids[0]] - adapted[:, j]
        got = np.einsum("fij,fj->fi", m[:, j], u)
        cos = np.sum(got * v, 1) / np.linalg.norm(got, axis=1) / np.linalg.norm(v, axis=1)
        np.testing.assert_allclose(cos, 1.0, atol=1e-9)


def test_swing_keeps_twist():
    # The swing's axis is perpendicular to the bone: no rotation about it.
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    r = swing(u, v)
    q = quat_from_matrix(r)
    axis = q[:, 1:]
    np.testing.assert_allclose(np.sum(axis * u, 1), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-9)


def test_quaternion_round_trip_is_w_first():
    q = quat_from_matrix(np.eye(3))
    np.testing.assert_allclose(q, [1, 0, 0, 0])
    r = random_rotation(np.random.default_rng(3))
    np.testing.assert_allclose(matrix_from_quat(quat_from_matrix(r)), r, atol=1e-12)
