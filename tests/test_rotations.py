"""Pose recovery: rotations that carry the original bones onto the adapted ones."""

import numpy as np
import pytest

from blender_reldesc.core import recover_rotations
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.skeleton.rotations import matrix_from_quat, quat_from_matrix, swing, swung

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


def test_swung_turns_vectors_as_the_swing_matrix_does():
    rng = np.random.default_rng(4)
    u, v, x = rng.normal(size=(3, 500, 3))
    # Some pairs opposite, some equal, some not unit: the matrix's conventions hold for each.
    u[:50], v[50:100] = -v[:50] * 2.0, u[50:100] * 0.3
    got = swung(u, v, x)
    want = np.einsum("nij,nj->ni", swing(u, v), x)
    np.testing.assert_allclose(got, want, atol=1e-12)
    # A direction onto the other, lengths kept.
    unit = u / np.linalg.norm(u, axis=1, keepdims=True)
    np.testing.assert_allclose(swung(u, v, unit), v / np.linalg.norm(v, axis=1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), np.linalg.norm(x, axis=1), rtol=1e-12)


def test_quaternion_round_trip_is_w_first():
    q = quat_from_matrix(np.eye(3))
    np.testing.assert_allclose(q, [1, 0, 0, 0])
    r = random_rotation(np.random.default_rng(3))
    np.testing.assert_allclose(matrix_from_quat(quat_from_matrix(r)), r, atol=1e-12)


def test_joints_with_several_children_get_their_own_best_fit_rotation_on_every_convention():
    # Hands with five fingers (Mixamo), pelvis bones starting where the spine starts (Rigify),
    # a root with legs and a spine (all): each such joint's rotation, computed for all of them
    # at once, is the best fit of its own children's offsets, or, with a primary child, meets
    # that child's direction exactly.
    from blender_reldesc.core.skeleton.rotations import kabsch
    rng = np.random.default_rng(4)
    for convention in S.CONVENTIONS:
        skel, offsets, roles = S.convention_rig(convention)
        motion = S.posed_motion(skel, offsets, roles, frames=12, limbs="twisting", seed=2)
        adapted = motion + 0.03 * rng.normal(size=motion.shape)
        J = len(skel)
        primary = np.full(J, -1)
        several = [j for j in range(J) if len(skel.children(j)) > 1]
        assert several, convention
        for j in several:
            primary[j] = rng.choice(skel.children(j))
        plain = matrix_from_quat(recover_rotations(skel, motion, adapted))
        aimed = matrix_from_quat(recover_rotations(skel, motion, adapted, primary))
        for j in several:
            kids = skel.children(j)
            u = motion[:, kids] - motion[:, j, None]
            v = adapted[:, kids] - adapted[:, j, None]
            if np.all(np.linalg.norm(u, axis=-1) > 1e-9):
                span = np.linalg.norm(np.cross(u[:, :1], u[:, 1:]), axis=-1).max(axis=-1)
                spread = span > 1e-6 * np.linalg.norm(u[:, 0], axis=-1) ** 2
                np.testing.assert_allclose(plain[spread, j], kabsch(u, v)[spread], atol=1e-9)
            k = list(kids).index(primary[j])
            if np.linalg.norm(u[:, k], axis=-1).min() > 1e-9:
                got = np.einsum("fij,fj->fi", aimed[:, j], u[:, k])
                cos = np.sum(got * v[:, k], 1) / np.linalg.norm(got, axis=1) / np.linalg.norm(v[:, k], axis=1)
                np.testing.assert_allclose(cos, 1.0, atol=1e-9)


@pytest.mark.parametrize("convention", S.CONVENTIONS)
def test_one_pose_gets_the_rotations_of_many(convention, monkeypatch):
    # One pose (a live frame) takes a path of its own in Python floats: every joint's rotation is
    # the batched path's, with and without primary children, on poses that turn bones about
    # (opposite directions), put a joint's children on one line (a pelvis whose thighs start
    # left and right of it) and leave a bone of zero length. (Rigs with many joints of several
    # children keep numpy's path for one pose too: here every rig takes the one-pose path.)
    from blender_reldesc.core.skeleton import rotations
    monkeypatch.setattr(rotations, "ONE_POSE_SEVERAL", 10 ** 6)
    rng = np.random.default_rng(7)
    skel, offsets, roles = S.convention_rig(convention)
    motion = S.posed_motion(skel, offsets, roles, frames=8, limbs="twisting", seed=3)
    adapted = motion + 0.05 * rng.normal(size=motion.shape)
    J = len(skel)
    one_child = [j for j in range(J) if len(skel.children(j)) == 1]
    j = one_child[len(one_child) // 2]
    k = int(skel.children(j)[0])
    adapted[1] = motion[1]                                              # unmoved but for that bone,
    adapted[1, k] = adapted[1, j] - (motion[1, k] - motion[1, j])         # turned about
    several = [j for j in range(J) if len(skel.children(j)) > 1]
    m = several[0]
    kids = skel.children(m)
    line = motion[2, kids[0]] - motion[2, m]
    for n, kid in enumerate(kids):                                      # children on one line, both ways
        motion[2, kid] = motion[2, m] + line * (1.0 if n % 2 == 0 else -0.5 - n)
    leaf = [j for j in range(J) if len(skel.children(j)) == 0][0]
    motion[3, leaf] = motion[3, skel.parents[leaf]]                     # a bone of zero length
    primary = np.full(J, -1)
    for j in several:
        primary[j] = rng.choice(skel.children(j))
    for prim in (None, primary):
        for f in range(len(motion)):
            # The batched path on the same pose twice (a child counts by its length on every frame
            # given: a batch of other frames would count the zero-length bone's).
            twice = recover_rotations(skel, motion[f:f + 1].repeat(2, 0), adapted[f:f + 1].repeat(2, 0), prim,
                                      matrices=True)
            one = recover_rotations(skel, motion[f:f + 1], adapted[f:f + 1], prim, matrices=True)
            # To rounding, grown along a chain: 5 cm of noise on a finger's 2 cm bones turns them
            # nearly about, where a swing's rounding grows (1.6e-12 at a Mixamo thumb's tip with
            # numpy 2.5, 2e-13 elsewhere).
            np.testing.assert_allclose(one[0], twice[0], rtol=0, atol=1e-10)
        np.testing.assert_allclose(recover_rotations(skel, motion[:1], adapted[:1], prim),
                                   recover_rotations(skel, motion[:1].repeat(2, 0), adapted[:1].repeat(2, 0), prim)[:1],
                                   rtol=0, atol=1e-10)


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
def test_twist_on_the_part_of_the_skeleton_equals_the_whole(convention):
    """``TwistLimits.twist`` recovers rotations on the joints it needs only; the same as on all."""
    from blender_reldesc.core.skeleton.joints import TwistLimits
    from blender_reldesc.core.skeleton.rotations import matrix_from_quat, quat_from_matrix
    sk, off, roles = S.convention_rig(convention)
    motion = S.posed_motion(sk, off, roles, frames=40, limbs="twisting")
    limits = TwistLimits.learn(sk, motion, np.zeros(len(sk), bool))
    moved = motion + np.random.default_rng(3).normal(0.0, 0.02, motion.shape)
    got = limits.twist(sk, moved)
    if not len(limits.joints):                      # no joint whose children spread: nothing to twist
        assert got.shape == (len(moved), 0)
        return
    R = matrix_from_quat(recover_rotations(sk, np.broadcast_to(limits.reference, moved.shape), moved))
    q = quat_from_matrix(np.einsum("fkji,fkjl->fkil", R[:, limits.parents], R[:, limits.joints]))
    q = np.where(q[..., :1] < 0, -q, q)
    want = np.degrees(2.0 * np.arctan2(np.einsum("fkd,kd->fk", q[..., 1:], limits.axis), q[..., 0]))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_children_on_one_line_pointing_opposite_ways_give_a_rotation():
    # A pelvis whose thighs start exactly left and right of it (a Rigify-named capture): the two
    # child offsets cancel, which used to give a zero matrix (and a failed bake).
    from blender_reldesc.core import Skeleton
    names = ["pelvis", "thigh.L", "thigh.R", "shin.L", "shin.R"]
    parents = [-1, 0, 0, 1, 2]
    sk = Skeleton(names, parents)
    rest = np.array([[0, 0, 1], [0.1, 0, 1], [-0.1, 0, 1], [0.1, 0, 0.5], [-0.1, 0, 0.5]], float)
    motion = np.broadcast_to(rest, (3, 5, 3)).copy()
    m = matrix_from_quat(recover_rotations(sk, motion, motion))
    np.testing.assert_allclose(m, np.broadcast_to(np.eye(3), m.shape), atol=1e-12)
    R = random_rotation(np.random.default_rng(2))
    m = matrix_from_quat(recover_rotations(sk, motion, motion @ R.T))
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=1e-9)
    # The line the thighs lie on is carried onto its new direction (its twist is undetermined).
    for f in range(3):
        np.testing.assert_allclose(m[f, 0] @ np.array([1.0, 0, 0]), R @ np.array([1.0, 0, 0]), atol=1e-9)
    # Float32 noise on positions read from Blender (1e-7 of their size) must not turn the pelvis
    # about the line of its thighs: children that only noise spreads are on one line.
    rng = np.random.default_rng(5)
    noisy = motion + 1e-7 * rng.normal(size=motion.shape)
    m = matrix_from_quat(recover_rotations(sk, motion + 1e-7 * rng.normal(size=motion.shape), noisy))
    np.testing.assert_allclose(m[:, 0], np.broadcast_to(np.eye(3), (3, 3, 3)), atol=1e-5)
