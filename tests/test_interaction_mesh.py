"""The interaction-mesh solver (Ho, Komura, Tai 2010): adapt(..., solver="interaction_mesh")."""

import numpy as np
import pytest

from blender_reldesc.core import InputError, Skeleton, TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.geometry import Collider
from blender_reldesc.core.solvers import interaction_mesh as IM

from core_helpers import random_rotation

FRAMES = 40
FEET = ("LeftToe", "RightToe", "LeftFoot", "RightFoot")


@pytest.fixture(scope="module")
def scene():
    skel, motion = S.walk(FRAMES)
    verts, tris = S.grid(4.0, 3.0, 40, 30, origin=(-1.0, -1.5))
    mesh = TriMesh(verts, tris)
    return skel, motion, verts, tris, bind(skel, motion, mesh)


def _bump(verts, height=0.12, width=0.3, at=(0.6, 0.0)):
    v = verts.copy()
    v[:, 2] += height * np.exp(-((v[:, 0] - at[0]) ** 2 + (v[:, 1] - at[1]) ** 2) / width)
    return v


def _signed(mesh, points):
    c = Collider(mesh.frame(0), mesh.normals(0), mesh.triangles, mesh.valid, 0.5)   # inf beyond 0.5 m
    return c.signed_distance(points.reshape(-1, 3))[0].reshape(points.shape[:-1])


def test_the_undeformed_scene_gives_the_source_back(scene):
    skel, motion, verts, tris, binding = scene
    r = adapt(binding, TriMesh(verts, tris), solver="interaction_mesh")
    assert np.abs(r.positions - motion).max() < 1e-4 * binding.body_height
    assert r.positions.shape == motion.shape and r.targets.shape == motion.shape


def test_a_rigid_move_of_the_environment_moves_the_motion_rigidly(scene):
    skel, motion, verts, tris, binding = scene
    rot = random_rotation(np.random.default_rng(3))
    shift = np.array([2.0, -1.0, 0.5])
    r = adapt(binding, TriMesh(verts @ rot.T + shift, tris), solver="interaction_mesh")
    np.testing.assert_allclose(r.positions, motion @ rot.T + shift, rtol=0, atol=1e-4 * binding.body_height)


def test_feet_follow_a_sculpted_bump_without_sinking(scene):
    skel, motion, verts, tris, binding = scene
    flat, bumped = TriMesh(verts, tris), TriMesh(_bump(verts), tris)
    r = adapt(binding, bumped, solver="interaction_mesh")
    feet = [skel.index(n) for n in FEET]
    before = _signed(flat, motion[:, feet])
    after = _signed(bumped, r.positions[:, feet])
    contact = before < 0.03
    assert contact.sum() > 20
    assert (np.abs(after - before)[contact] < 0.02).mean() >= 0.9
    every = _signed(bumped, r.positions)
    assert (np.minimum(_signed(flat, motion), 0.0) - every).max() < 0.01         # no joint 1 cm deeper
    lengths = np.linalg.norm(r.positions[:, 1:] - r.positions[:, skel.parents[1:]], axis=-1)
    np.testing.assert_allclose(lengths, np.linalg.norm(motion[:, 1:] - motion[:, skel.parents[1:]], axis=-1),
                               rtol=1e-9)
    # Smooth: no frame-to-frame step much beyond the source's.
    step = np.linalg.norm(np.diff(r.positions, axis=0), axis=-1).max()
    assert step <= 1.2 * np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()


def test_longer_legs_morph_to_their_lengths_and_stand_on_the_floor(scene):
    skel, motion, verts, tris, binding = scene
    legs = {n: 1.2 * float(np.linalg.norm(motion[0, skel.index(n)] - motion[0, skel.parents[skel.index(n)]]))
            for n in ("LeftLeg", "RightLeg", "LeftFoot", "RightFoot")}
    flat = TriMesh(verts, tris)
    r = adapt(binding, flat, bone_lengths=legs, solver="interaction_mesh")
    for n, length in legs.items():
        j = skel.index(n)
        np.testing.assert_allclose(np.linalg.norm(r.positions[:, j] - r.positions[:, skel.parents[j]], axis=-1),
                                   length, rtol=1e-9)
    feet = [skel.index(n) for n in FEET]
    assert _signed(flat, r.positions[:, feet]).min() > -0.01                      # not through the floor
    hips = skel.index("Hips") if "Hips" in skel.names else 0
    assert r.positions[:, hips, 2].mean() > motion[:, hips, 2].mean() + 0.03       # taller, not crouched


def test_collision_constraints_keep_joints_out_of_a_narrow_ridge(scene):
    skel, motion, verts, tris, binding = scene
    fine = TriMesh(*S.grid(2.8, 1.0, 112, 40, origin=(-0.5, -0.5)))             # 2.5 cm cells under the walk
    b = bind(skel, motion, fine)
    ridge = fine.frame(0).copy()
    ridge[:, 2] += 0.08 * np.exp(-((ridge[:, 0] - 0.6) ** 2) / 0.004)           # 8 cm high, a few cm wide
    edited = TriMesh(ridge, fine.triangles)
    on = adapt(b, edited, solver="interaction_mesh", solver_options={"environment_points": 60})
    off = adapt(b, edited, solver="interaction_mesh", collisions=False, solver_options={"environment_points": 60})
    allowed = np.minimum(_signed(fine, motion), 0.0)
    deep_on = (allowed - _signed(edited, on.positions)).max()
    deep_off = (allowed - _signed(edited, off.positions)).max()
    assert deep_off > 0.01                   # the Laplacian alone lets a foot into the ridge
    assert deep_on < 0.01 and deep_on < deep_off


def test_windows_join_smoothly_and_agree_with_one_window():
    skel, motion = S.walk(130)
    verts, tris = S.grid(6.0, 3.0, 60, 30, origin=(-1.0, -1.5))
    b = bind(skel, motion, TriMesh(verts, tris))
    bumped = TriMesh(_bump(verts, at=(1.5, 0.0)), tris)
    windows = adapt(b, bumped, solver="interaction_mesh", solver_options={"window": 50, "overlap": 10})
    whole = adapt(b, bumped, solver="interaction_mesh", solver_options={"window": 200})
    assert np.abs(windows.positions - whole.positions).max() < 0.01
    step = np.linalg.norm(np.diff(windows.positions, axis=0), axis=-1).max()
    assert step <= 1.2 * np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()


def test_bad_input(scene):
    skel, motion, verts, tris, binding = scene
    mesh = TriMesh(verts, tris)
    with pytest.raises(InputError, match="descriptors, interaction_mesh"):
        adapt(binding, mesh, solver="laplacian")
    with pytest.raises(InputError, match="unknown interaction-mesh solver options"):
        adapt(binding, mesh, solver="interaction_mesh", solver_options={"substeps": 3})
    # Everything on one plane: a stick figure lying flat on a flat floor.
    names = ["Root", "A", "B"]
    flat_motion = np.repeat(np.array([[[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.3, 0.4, 0.0]]]), 4, axis=0)
    plane = TriMesh(*S.grid(2.0, 2.0, 4, 4, origin=(-1.0, -1.0)))
    with pytest.raises(InputError, match="cannot be tetrahedralised"):
        IM.solve(flat_motion, Skeleton(names, [-1, 0, 1]).bones, np.full((4, 3), 0.3), np.zeros((0, 2), int),
                 plane, plane, np.array([0, 1]), np.full((2, 3), 1 / 3), 1.0)


def test_bend_limits_keep_the_neck_from_folding_under_a_lowered_beam():
    skel, motion = S.walk(60)
    x1 = motion[..., 0].max() + 1.0
    floor = S.grid(x1 + 2.0, 2.0, int(x1 / 0.25) + 8, 8, origin=(-2.0, -1.0))
    v, t, ranges = S.merge(floor, S.box((0.5 * x1, 0.0, 2.1), (0.3, 1.6, 0.3), subdivisions=3))
    lowered = v.copy()
    a, b = ranges[1]
    lowered[a:b, 2] -= 0.4
    binding = bind(skel, motion, TriMesh(v, t))
    edited = TriMesh(lowered, t)
    limited = adapt(binding, edited, solver="interaction_mesh")
    paper = adapt(binding, edited, solver="interaction_mesh", solver_options={"limits": None})
    head = skel.index("Head")
    for r in (limited, paper):                         # both duck under the beam
        assert (r.positions[:, head, 2] - motion[:, head, 2]).min() < -0.25
    # The paper's solver (no joint limits) folds the trunk; with the (soft) limits it stays within 10°.
    assert paper.joint_limit_violations.max() > 20.0
    assert limited.joint_limit_violations.max() < 10.0


def test_a_rigify_rig_with_zero_length_bones_and_split_arms():
    skel, offsets, roles = S.convention_rig("rigify")
    motion = S.posed_motion(skel, offsets, roles, frames=30, limbs="bent")
    lo, hi = motion[..., :2].min((0, 1)) - 1.0, motion[..., :2].max((0, 1)) + 1.0
    verts, tris = S.grid(*(hi - lo), 16, 16, origin=tuple(lo), z=float(motion[..., 2].min()))
    binding = bind(skel, motion, TriMesh(verts, tris))
    same = adapt(binding, TriMesh(verts, tris), solver="interaction_mesh")
    assert np.abs(same.positions - motion).max() < 1e-4 * binding.body_height
    raised = verts.copy()
    raised[:, 2] += 0.05
    up = adapt(binding, TriMesh(raised, tris), solver="interaction_mesh")
    np.testing.assert_allclose(up.positions[..., 2] - motion[..., 2], 0.05, atol=0.01)    # all of it, 5 cm up
    pelvis = [j for j, r in enumerate(roles) if r == "pelvis"]
    for j in pelvis:                                    # the zero-length pelvis bones stay on their parent
        np.testing.assert_allclose(up.positions[:, j], up.positions[:, skel.parents[j]], atol=1e-9)
