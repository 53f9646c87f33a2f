"""Reaching (Mousas and Newbury): a hand reaches a target at a frame; core.reaching."""

import numpy as np
import pytest

from blender_reldesc.core import InputError, RelDescError, TriMesh, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.reaching import ReachSession, learn_timing, minimum_jerk, normalise_graph, reach

from core_helpers import random_rotation

FRAME = 60
HAND = "RightHand"


@pytest.fixture(scope="module")
def scene():
    skel, motion = S.walk(120)
    verts, tris = S.grid(8.0, 3.0, 32, 12, origin=(-1.0, -1.5))
    binding = bind(skel, motion, TriMesh(verts, tris))
    h = skel.index(HAND)
    database = [S.reaching_clip(skel, motion[k], motion[k, h] + off)
                for k, off in ((20, [0.3, -0.1, 0.3]), (40, [0.2, -0.2, 0.4]), (90, [0.35, 0.0, 0.2]))]
    return skel, motion, verts, tris, binding, database


def _target(skel, motion):
    return motion[FRAME, skel.index(HAND)] + np.array([0.25, -0.15, 0.35])


@pytest.mark.parametrize("body", [True, False])
def test_the_hand_reaches_the_target_and_the_rest_stays(scene, body):
    skel, motion, verts, tris, binding, database = scene
    result, info = reach(binding, None, HAND, _target(skel, motion), FRAME, window=20, database=database, body=body)
    out, h = result.positions, skel.index(HAND)
    assert np.linalg.norm(out[FRAME, h] - _target(skel, motion)) < 0.01 and info.hand_error < 0.01
    assert info.window == (FRAME - 20, FRAME + 20)
    outside = np.r_[0:FRAME - 20, FRAME + 21:len(motion)]
    assert np.linalg.norm(out[outside] - motion[outside], axis=-1).max() < 0.02
    step = np.linalg.norm(np.diff(out, axis=0), axis=-1).max()
    assert step <= 1.2 * np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()
    lengths = np.linalg.norm(out[:, 1:] - out[:, skel.parents[1:]], axis=-1)
    np.testing.assert_allclose(lengths, np.linalg.norm(motion[:, 1:] - motion[:, skel.parents[1:]], axis=-1),
                               rtol=1e-9)
    if body:                                            # the arm alone keeps no limits (see reach)
        assert result.joint_limit_violations.max() < 5.0
    # The references came from the database, in order along the line to the target.
    assert len(info.references) == 13 and {c for c, _ in info.references} <= {0, 1, 2}


def test_the_database_bends_the_path_and_times_it(scene):
    skel, motion, verts, tris, binding, database = scene
    target = _target(skel, motion)
    h = skel.index(HAND)
    plain, _ = reach(binding, None, HAND, target, FRAME, window=20)
    learnt, _ = reach(binding, None, HAND, target, FRAME, window=20, database=database)
    # The database's reaches rise on their way (arcs lifted 8 cm): so does the learnt hand.
    mid = FRAME - 10
    assert learnt.positions[mid, h, 2] > plain.positions[mid, h, 2] + 0.01
    timing = learn_timing(database, np.array([h]))[0]
    t = np.linspace(0.0, 1.0, len(timing))
    assert timing[0] == 0.0 and timing[-1] == 1.0 and np.all(np.diff(timing) >= 0)
    assert np.abs(timing - minimum_jerk(t)).max() < 0.2            # the examples are minimum jerk, arced


def test_a_moving_target_is_followed_while_held(scene):
    skel, motion, verts, tris, binding, database = scene
    # A point carried along beside the walker, bobbing up and down.
    F = len(motion)
    root = motion[:, 0] - motion[FRAME, 0]
    target = (motion[FRAME, skel.index(HAND)] + [0.2, -0.1, 0.25] + root
              + np.outer(np.sin(np.arange(F) / 3.0), [0.0, 0.0, 0.04]))
    result, info = reach(binding, None, HAND, target, FRAME, window=15, hold=10)
    h = skel.index(HAND)
    held = np.arange(FRAME, FRAME + 11)
    assert np.linalg.norm(result.positions[held, h] - target[held], axis=1).max() < 0.01
    assert info.window == (FRAME - 15, FRAME + 25)
    step = np.linalg.norm(np.diff(result.positions, axis=0), axis=-1).max()
    assert step <= 1.2 * np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()


def test_a_rigid_move_of_scene_and_target_moves_the_reach_rigidly(scene):
    skel, motion, verts, tris, binding, database = scene
    rot = random_rotation(np.random.default_rng(5))
    shift = np.array([1.0, 2.0, -0.5])
    base, _ = reach(binding, None, HAND, _target(skel, motion), FRAME, window=15)
    moved, _ = reach(binding, TriMesh(verts @ rot.T + shift, tris), HAND, _target(skel, motion) @ rot.T + shift,
                     FRAME, window=15)
    np.testing.assert_allclose(moved.positions, base.positions @ rot.T + shift, atol=1e-4)


def test_the_feet_keep_the_edited_floor_during_a_reach(scene):
    skel, motion, verts, tris, binding, database = scene
    raised = verts.copy()
    raised[:, 2] += 0.05
    session = ReachSession(binding, TriMesh(raised, tris))
    result, info = session.reach(HAND, _target(skel, motion) + [0.0, 0.0, 0.05], FRAME, window=20)
    feet = [skel.index(n) for n in ("LeftToe", "RightToe")]
    W = np.arange(info.window[0], info.window[1] + 1)
    np.testing.assert_allclose(result.positions[W][:, feet, 2], session.base.positions[W][:, feet, 2], atol=0.01)


def test_out_of_reach_and_bad_input(scene):
    skel, motion, verts, tris, binding, database = scene
    session = ReachSession(binding, None, database)
    before = session.base.positions.copy()
    far = motion[FRAME, skel.index(HAND)] + [5.0, 0.0, 0.0]
    with pytest.raises(InputError, match=r"the target is 5\.\d\d from RightArm .* beyond the reach of RightHand \(0\.54\)"):
        session.reach(HAND, far, FRAME)
    np.testing.assert_array_equal(session.base.positions, before)          # nothing changed
    with pytest.raises(RelDescError, match="no joint named 'Paw'"):
        session.reach("Paw", far, FRAME)
    with pytest.raises(InputError, match="outside the clip"):
        session.reach(HAND, far, 500)
    with pytest.raises(InputError, match="window"):
        session.reach(HAND, far, FRAME, window=0)
    with pytest.raises(InputError, match="NaN"):
        session.reach(HAND, [np.nan, 0.0, 0.0], FRAME)
    with pytest.raises(InputError, match="two bones above"):
        session.reach("Spine", far, FRAME)
    with pytest.raises(InputError, match="database clip 0"):
        ReachSession(binding, None, [np.zeros((5, 3, 3))])


def test_graph_normalisation_removes_a_spike_and_keeps_the_ends():
    line = np.linspace([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], 15)
    spiky = line.copy()
    spiky[7, 2] = 0.5
    out = normalise_graph(spiky)
    np.testing.assert_array_equal(out[[0, -1]], spiky[[0, -1]])
    assert np.abs(out[:, 2]).max() < 0.2                          # the spike is mostly gone
    np.testing.assert_allclose(normalise_graph(line), line, atol=1e-12)   # a straight graph stays


@pytest.mark.parametrize("convention", ["rigify", "mixamo", "ue"])
def test_rigs_of_other_conventions_reach(convention):
    skel, offsets, roles = S.convention_rig(convention)
    motion = S.posed_motion(skel, offsets, roles, frames=60, limbs="bent")
    lo, hi = motion[..., :2].min((0, 1)) - 1.0, motion[..., :2].max((0, 1)) + 1.0
    verts, tris = S.grid(*(hi - lo), 12, 12, origin=tuple(lo), z=float(motion[..., 2].min()))
    binding = bind(skel, motion, TriMesh(verts, tris))
    hand = roles.index("hand.R")
    frame = 30
    from blender_reldesc.core.reaching import limb
    shoulder, elbow, upper, lower = limb(skel, motion, hand)
    assert roles[elbow] == "forearm.R" and roles[shoulder] == "upperarm.R"      # split bones count as one
    reach_length = sum(np.linalg.norm(motion[frame, j] - motion[frame, skel.parents[j]]) for j in upper + lower)
    direction = np.array([0.6, -0.3, 0.5]) / np.linalg.norm([0.6, -0.3, 0.5])
    target = motion[frame, shoulder] + 0.8 * reach_length * direction
    result, info = reach(binding, None, hand, target, frame, window=25)
    out = result.positions
    assert np.linalg.norm(out[frame, hand] - target) < 0.01
    lengths = np.linalg.norm(out[:, 1:] - out[:, skel.parents[1:]], axis=-1)
    np.testing.assert_allclose(lengths, np.linalg.norm(motion[:, 1:] - motion[:, skel.parents[1:]], axis=-1),
                               rtol=1e-6, atol=1e-9)
    for j in upper[:-1] + lower[:-1]:                       # a split bone stays straight
        u, v = out[:, j] - out[:, skel.parents[j]], out[:, skel.children(j)[0]] - out[:, j]
        cos = np.einsum("fi,fi->f", u, v) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
        assert np.degrees(np.arccos(np.clip(cos, -1, 1))).max() < 1.0
    step = np.linalg.norm(np.diff(out, axis=0), axis=-1).max()
    assert step <= 1.2 * np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()


def test_a_hinge_subset_keeps_its_hinges_and_their_anchors(scene):
    from blender_reldesc.core.adaptation import Rig
    skel, motion, verts, tris, binding, database = scene
    hinges = Rig(binding).hinges
    knee = skel.index("LeftLeg")                         # the walk's hinges are its knees and ankles
    part = hinges.subset([knee])
    assert part.triples[:, 1].tolist() == [knee] and len(part.anchors) == 1
    k = int(np.flatnonzero(hinges.triples[:, 1] == knee)[0])
    assert part.anchors[0][0] == hinges.anchors[hinges.which[k]][0]
    np.testing.assert_array_equal(part.normal[:, 0], hinges.normal[:, k])
    assert hinges.subset([skel.index("RightForeArm")]) is None      # not a hinge in this walk
    # The subset reflects the knee exactly as the whole set does.
    hip, ankle = int(part.triples[0, 0]), int(part.triples[0, 2])
    bent = motion.copy()
    bent[:, knee] = bent[:, hip] + bent[:, ankle] - bent[:, knee]            # the knee flipped through
    whole = hinges.limit(bent.copy(), motion, np.arange(len(motion)))
    alone = part.limit(bent.copy(), motion, np.arange(len(motion)))
    np.testing.assert_allclose(alone[:, knee], whole[:, knee], atol=1e-12)
    assert np.abs(alone[:, knee] - bent[:, knee]).max() > 0.01                # it did reflect
