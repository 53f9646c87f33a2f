"""Pose-matrix algebra used to write keyframes, checked without Blender."""

import numpy as np
from scipy.spatial.transform import Rotation

from blender_reldesc.core.skeleton.armature import (adapted_pose, basis_from_pose, euler_from_quat, joint_layout,
                                           polar, pose_from_basis, sign_continuous, split_basis)
from blender_reldesc.core.skeleton.rotations import matrix_from_quat


def _chain():
    names = ["root", "a", "b", "c"]
    parents = np.array([-1, 0, 1, 1])
    rest = np.tile(np.eye(4), (4, 1, 1))
    rest[1, :3, 3] = [0, 0, 1]
    rest[2, :3, 3] = [0, 0, 2]
    rest[3, :3, 3] = [0.3, 0, 2]
    rest[3, :3, :3] = Rotation.from_euler("x", 30, degrees=True).as_matrix()
    return names, parents, rest


def test_basis_and_pose_round_trip():
    names, parents, rest = _chain()
    rng = np.random.default_rng(0)
    F = 5
    basis = np.tile(np.eye(4), (F, 4, 1, 1))
    basis[..., :3, :3] = Rotation.random(F * 4, random_state=1).as_matrix().reshape(F, 4, 3, 3)
    basis[..., :3, 3] = rng.normal(size=(F, 4, 3))
    pose = pose_from_basis(rest, parents, basis, [0, 1, 2, 3])
    np.testing.assert_allclose(basis_from_pose(rest, parents, pose), basis, atol=1e-10)


def test_joint_layout_adds_leaf_tails():
    names, parents, _ = _chain()
    skel, head, tail = joint_layout(names, parents)
    assert skel.names == ["root", "a", "b", "c", "b.tail", "c.tail"]
    assert tail.tolist() == [-1, -1, 4, 5]
    assert skel.parents.tolist() == [-1, 0, 1, 1, 2, 3]


def test_adapted_pose_on_unchanged_joints_is_the_original_pose():
    names, parents, rest = _chain()
    skel, head, tail = joint_layout(names, parents)
    F = 3
    basis = np.tile(np.eye(4), (F, 4, 1, 1))
    basis[..., :3, :3] = Rotation.random(F * 4, random_state=2).as_matrix().reshape(F, 4, 3, 3)
    pose = pose_from_basis(rest, parents, basis, [0, 1, 2, 3])
    # Bone y axis is the bone direction in Blender; tails one unit along it.
    leaf = pose[:, [2, 3]]
    joints = np.concatenate([pose[:, :, :3, 3], leaf[..., :3, 3] + leaf[..., :3, 1]], axis=1)
    out = adapted_pose(skel, head, joints, joints, pose)
    np.testing.assert_allclose(out, pose, atol=1e-9)
    q, loc = split_basis(basis_from_pose(rest, parents, out))
    np.testing.assert_allclose(matrix_from_quat(q), basis[..., :3, :3], atol=1e-9)


def test_euler_conversion_matches_blender_order():
    # Blender 'XYZ' mode: R = Rz @ Ry @ Rx (X applied first).
    ang = np.array([0.3, -0.2, 1.1])
    R = (Rotation.from_euler("z", ang[2]).as_matrix() @ Rotation.from_euler("y", ang[1]).as_matrix()
         @ Rotation.from_euler("x", ang[0]).as_matrix())
    q = Rotation.from_matrix(R).as_quat()[[3, 0, 1, 2]]
    np.testing.assert_allclose(euler_from_quat(q[None, None], "XYZ")[0, 0], ang, atol=1e-9)


def test_affine_inverse_agrees_with_lapack_and_falls_back_on_the_rest():
    # Pose matrices (rotation, non-uniform and negative scale, translation) invert as LAPACK
    # does; a projective matrix goes through LAPACK; a singular one raises as LAPACK does.
    import pytest
    from blender_reldesc.core.skeleton.armature import affine_inverse
    rng = np.random.default_rng(5)
    m = np.zeros((300, 4, 4))
    m[:, :3, :3] = Rotation.random(300, random_state=2).as_matrix() * rng.uniform(0.2, 3.0, (300, 1, 3))
    m[::7, :3, 0] *= -1.0
    m[:, :3, 3] = rng.normal(size=(300, 3))
    m[:, 3, 3] = 1.0
    np.testing.assert_allclose(affine_inverse(m), np.linalg.inv(m), atol=1e-12)
    np.testing.assert_allclose(affine_inverse(m[3]), np.linalg.inv(m[3]), atol=1e-12)
    p = m[:5].copy()
    p[:, 3, :3] = [0.1, 0.0, 0.2]
    np.testing.assert_allclose(affine_inverse(p), np.linalg.inv(p), atol=1e-12)
    s = m[:4].copy()
    s[2, :3, 1] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        affine_inverse(s)


def test_into_frame_undoes_each_frames_matrix_and_collapses_what_comes_out_the_same():
    from blender_reldesc.core.skeleton.armature import into_frame
    rng = np.random.default_rng(3)
    F, N = 5, 7
    m = np.tile(np.eye(4), (F, 1, 1))
    m[:, :3, :3] = Rotation.random(F, random_state=4).as_matrix()
    m[:, :3, 3] = rng.normal(size=(F, 3))
    base = rng.normal(size=(N, 3))
    moved = np.einsum("fij,nj->fni", m[:, :3, :3], base) + m[:, None, :3, 3]    # base carried by each frame
    # Points that moved with the frames come back the same on every frame: once.
    np.testing.assert_allclose(into_frame(m, moved), base, atol=1e-12)
    # Points that did not: each frame's inverse, as brute force gives it.
    out = into_frame(m, base)
    assert out.shape == (F, N, 3)
    for f in range(F):
        np.testing.assert_allclose(out[f], base @ np.linalg.inv(m[f])[:3, :3].T + np.linalg.inv(m[f])[:3, 3],
                                   atol=1e-12)
    np.testing.assert_allclose(into_frame(m, moved, collapse=False), np.broadcast_to(base, (F, N, 3)), atol=1e-12)
    # One matrix for every frame: the points once; None: as they are.
    np.testing.assert_allclose(into_frame(np.broadcast_to(m[0], (F, 4, 4)), base),
                               base @ np.linalg.inv(m[0])[:3, :3].T + np.linalg.inv(m[0])[:3, 3], atol=1e-12)
    assert into_frame(None, base) is base
    # ``like``: points back where they were to float precision are taken as they were.
    noisy = moved.copy()
    noisy[0, 0] += 1e-9
    np.testing.assert_array_equal(into_frame(m, noisy, like=base), base)
    shifted = base.copy()
    shifted[1] += 0.01                                       # one point really moved
    edited = np.einsum("fij,nj->fni", m[:, :3, :3], shifted) + m[:, None, :3, 3]
    out = into_frame(m, edited, like=base)
    np.testing.assert_array_equal(np.delete(out, 1, axis=0), np.delete(base, 1, axis=0))
    assert np.abs(out[1] - base[1]).max() > 0.005


def test_polar_factor_of_near_rotations_agrees_with_the_svd():
    # Unscaled bones read in single precision take Newton-Schulz steps, stretched or mirrored
    # ones the SVD: both give the polar factor (the nearest proper rotation) and m = R S.
    R = Rotation.random(400, random_state=2).as_matrix()
    m = R.astype(np.float32).astype(float)                         # within ~1e-7 of a rotation
    m[::5] = m[::5] * np.array([1.0, 1.3, 0.9])                    # stretched along Y (Stretch To)
    # Mirrored: with three equal singular values (-R, or R @ diag(-1, 1, 1)) the nearest proper
    # rotation is not unique and LAPACK builds may pick different ones; distinct scales make it so.
    m[3] = m[3] * np.array([-0.9, 1.0, 1.1])
    m[7] = np.zeros((3, 3))                                        # degenerate: a bone scaled to 0
    rot, stretch = polar(m.reshape(20, 20, 3, 3))
    rot, stretch = rot.reshape(-1, 3, 3), stretch.reshape(-1, 3, 3)
    u, _, vt = np.linalg.svd(m)
    want = u @ vt
    flip = np.linalg.det(want) < 0
    u[flip, :, -1] *= -1
    want = u @ vt
    ok = np.arange(len(m)) != 7                                     # a zero matrix has no unique factor
    np.testing.assert_allclose(rot[ok], want[ok], atol=1e-12)
    np.testing.assert_allclose(rot @ stretch, m, atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(rot, 1, 2) @ rot, np.tile(np.eye(3), (len(m), 1, 1)), atol=1e-12)
    assert np.all(np.linalg.det(rot[ok]) > 0)


def test_kabsch_by_newton_steps_agrees_with_the_svd():
    # Well-spread sets take scaled Newton steps on the covariance; sets on a plane or a line and
    # mirrored ones the SVD: every answer is the SVD's best-fit proper rotation.
    from blender_reldesc.core.skeleton.rotations import kabsch
    rng = np.random.default_rng(4)
    N = 300
    u = rng.normal(size=(N, 6, 3))
    R = Rotation.random(N, random_state=5).as_matrix()
    v = np.einsum("nij,nkj->nki", R, u) + 0.1 * rng.normal(size=u.shape)
    u[:20, :, 2] = 0.0
    v[:20, :, 2] = 0.0                                              # on a plane
    v[20:30] = -v[20:30]                                           # mirrored
    v[30:40] = 1e3 * v[30:40]                                      # scaled: still a rotation
    w = rng.uniform(0.0, 1.0, size=(N, 6))
    for weights in (None, w):
        got = kabsch(u, v, weights)
        ww = np.ones((N, 6)) if weights is None else weights
        h = np.einsum("nk,nki,nkj->nij", ww, u, v)
        uu, _, vt = np.linalg.svd(h)
        d = np.sign(np.linalg.det(vt.swapaxes(-1, -2) @ uu.swapaxes(-1, -2)))
        fix = np.ones((N, 3))
        fix[:, -1] = np.where(d == 0, 1.0, d)
        want = vt.swapaxes(-1, -2) @ (fix[:, :, None] * uu.swapaxes(-1, -2))
        np.testing.assert_allclose(got, want, atol=1e-11)
        np.testing.assert_allclose(np.linalg.det(got), 1.0, atol=1e-12)
    # Batched shapes are kept.
    assert kabsch(u.reshape(30, 10, 6, 3), v.reshape(30, 10, 6, 3)).shape == (30, 10, 3, 3)


def _sign_continuous_frame_by_frame(q):
    """The rule itself: each frame negated where its dot with the frame before, as already
    signed, is negative."""
    q = q.copy()
    for f in range(1, len(q)):
        q[f, np.einsum("bk,bk->b", q[f], q[f - 1]) < 0] *= -1
    return q


def test_sign_continuous_is_the_frame_by_frame_rule():
    # The array version (a running product of signs, started again where a dot is 0 or NaN)
    # against the rule applied frame by frame: random signs, a zero quaternion, a NaN frame,
    # quaternions at right angles (dot exactly 0), one frame, none.
    rng = np.random.default_rng(11)
    for trial in range(60):
        F, B = int(rng.integers(4, 50)), int(rng.integers(1, 5))
        q = rng.normal(size=(F, B, 4))
        q /= np.linalg.norm(q, axis=-1, keepdims=True)
        q *= rng.choice([-1.0, 1.0], size=(F, B, 1))
        if trial % 3 == 0:
            q[2, 0] = 0.0
        if trial % 4 == 0:
            q[F // 2, -1] = np.nan
        if trial % 5 == 0:
            q[1, 0], q[2, 0], q[3, 0] = [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, -1, 0]
        got, want = sign_continuous(q), _sign_continuous_frame_by_frame(q)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))
        assert np.all(np.einsum("fbk,fbk->fb", got[1:], got[:-1])[~np.isnan(got[1:, :, 0]) & ~np.isnan(got[:-1, :, 0])]
                      >= 0)
    for F in (0, 1):
        q = rng.normal(size=(F, 2, 4))
        np.testing.assert_array_equal(sign_continuous(q), q)
