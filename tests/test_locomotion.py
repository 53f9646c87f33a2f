"""Carpet unrolling (thesis chapter 3): locomotion along paths over terrain, and crowds."""

import re

import numpy as np
import pytest

from blender_reldesc.core import Cancelled, InputError, TriMesh
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.locomotion import STRETCH, Terrain, bind_carpet, fork_available, lateral_paths, walk
from blender_reldesc.core.locomotion import crowd as crowd_module

STRAIGHT = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0]])
#: A step of the generated walk (its stride is 1.4 m).
STEP = 0.7


@pytest.fixture(scope="module")
def carpet():
    skel, motion = S.walk(150)
    return bind_carpet(skel, motion)


@pytest.fixture(scope="module")
def flat():
    return TriMesh(*S.grid(16.0, 10.0, 32, 20, origin=(-3.0, -5.0)))


@pytest.fixture(scope="module")
def hills():
    return TriMesh(*S.grid(16.0, 10.0, 160, 100, origin=(-3.0, -5.0), height=S.hills(0.15, 3.0)))


def _rot_z(degrees):
    a = np.radians(degrees)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])


def _stance_checks(result, terrain, carpet, c=0):
    """(largest gap of a held joint to the terrain plus its source height, its largest
    horizontal speed per frame while held)."""
    P, held = result.positions[c], ~np.isnan(result.pins[c, ..., 0])
    source = carpet.layout(result.clip_frames.max() + 1).binding.motion[result.clip_frames[c]]
    ground = Terrain(terrain)
    gap, slide = 0.0, 0.0
    for j in carpet.standing.tolist():
        h = held[:, j]
        if not h.any():
            continue
        z, hit = ground.heights(P[:, j, :2], P[:, j, 2])
        assert hit[h].all()
        gap = max(gap, float(np.abs(P[h, j, 2] - z[h] - source[h, j, 2]).max()))
        both = h[1:] & h[:-1]
        if both.any():
            slide = max(slide, float(np.linalg.norm(np.diff(P[:, j, :2], axis=0), axis=1)[both].max()))
    return gap, slide


def test_bind_finds_the_cycle_and_the_feet(carpet):
    sk = carpet.skeleton
    a, b = carpet.cycle
    # The generated walk's cycle is 1.4 m / 1.3 m/s = 32.3 frames; the longest loop is 3 of them.
    assert abs((b - a) / (1.4 / 1.3 * 30.0) - round((b - a) / (1.4 / 1.3 * 30.0))) < 0.05
    np.testing.assert_allclose(carpet.speed, 1.3 / 30.0, rtol=2e-3)
    names = {sk.names[j] for j in carpet.standing}
    assert {"LeftFoot", "LeftToe", "RightFoot", "RightToe"} <= names
    assert not names & {"Hips", "LeftLeg", "RightLeg", "LeftHand"}
    # The played clip is continuous over the seams of the repeated cycle.
    long = carpet.extended(400)
    step = np.linalg.norm(np.diff(long, axis=0), axis=-1).max()
    src = np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()
    assert step <= 1.05 * src


def test_flat_straight_path_reproduces_the_clip(carpet, flat):
    r = walk(carpet, [STRAIGHT], flat, hold_stances=False)
    played = carpet.extended(r.positions.shape[1])
    assert np.abs(r.positions[0] - played).max() < 1e-9 * carpet.body_height
    # Holding the stances still only removes the played clip's own foot drift (its seams).
    held = walk(carpet, [STRAIGHT], flat)
    assert np.abs(held.positions[0] - played).max() < 0.01 * carpet.body_height
    assert held.warnings == []


def test_rigid_move_of_terrain_and_path_moves_the_walk_rigidly(carpet, hills):
    R, t = _rot_z(37.0), np.array([3.0, -2.0, 0.7])
    a = walk(carpet, [STRAIGHT], hills, time_offsets=[5])
    moved = TriMesh(hills.vertices @ R.T + t, hills.triangles)
    b = walk(carpet, [STRAIGHT @ R.T + t], moved, time_offsets=[5])
    assert np.abs(b.positions[0] - (a.positions[0] @ R.T + t)).max() < 1e-6 * carpet.body_height


def test_stance_feet_stand_on_the_terrain_and_do_not_slide(carpet, hills):
    r = walk(carpet, [STRAIGHT], hills)
    held = ~np.isnan(r.pins[0, ..., 0])
    assert held.any(axis=1).mean() > 0.5                 # a walk stands on a foot most of the time
    gap, slide = _stance_checks(r, hills, carpet)
    assert gap < 0.01                                    # within 1 cm (plus the source's height)
    assert slide * 30.0 < 0.01                           # < 1 cm/s at 30 fps
    # Without holding them, the descriptors alone average the terrain under the feet.
    loose = walk(carpet, [STRAIGHT], hills, hold_stances=False)
    assert np.isnan(loose.pins).all()
    sk = carpet.skeleton
    bones = np.linalg.norm(r.positions[0][:, 1:] - r.positions[0][:, sk.parents[1:]], axis=-1)
    src = np.linalg.norm(carpet.motion[0][1:] - carpet.motion[0][sk.parents[1:]], axis=-1)
    # Exact lengths except where a held toe meets a held foot on a slope.
    assert np.median(np.abs(bones / src - 1)) < 1e-9 and np.abs(bones / src - 1).max() < 0.02
    step = np.linalg.norm(np.diff(r.positions[0], axis=0), axis=-1).max()
    assert step <= 1.3 * np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()


def test_root_follows_a_turn_of_two_metres(carpet, flat):
    th = np.linspace(0.0, np.pi, 120)
    circle = np.c_[2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.zeros_like(th)]
    r = walk(carpet, [circle], flat)
    root = r.positions[0][:, carpet.root]
    off = np.abs(np.hypot(root[:, 0], root[:, 1] - 2.0) - 2.0)
    assert off.max() < 0.05
    # Walked to its end: stopped within one step of it (half a gait cycle), never past it.
    assert r.path_frames.tolist() == [r.positions.shape[1]]
    end = np.degrees(np.arctan2(root[-1, 0], 2.0 - root[-1, 1])) % 360.0   # degrees round the circle
    assert 180.0 - np.degrees(STEP / 2.0) - 1.0 <= end <= 180.0 + 1.0
    assert r.warnings == []
    gap, slide = _stance_checks(r, flat, carpet)
    assert gap < 0.01 and slide * 30.0 < 0.01


def test_spacing_relaxed_within_fifteen_percent_on_a_steep_ramp(carpet):
    slope = np.tan(np.radians(35.0))
    ramp = TriMesh(*S.grid(14.0, 6.0, 56, 24, origin=(-2.0, -3.0),
                           height=lambda x, y: slope * np.clip(x - 2.0, 0.0, None)))
    path = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0]])
    laid = carpet.layout(150 + carpet.period)                # walk lays the clip a period past its last frame
    rest = np.linalg.norm(laid.points[laid.edges[:, 1]] - laid.points[laid.edges[:, 0]], axis=1)
    for relax in (False, True):
        r = walk(carpet, [path], ramp, relax=relax, frames=150)
        P = r.carpets[0]
        ratio = np.linalg.norm(P[laid.edges[:, 1]] - P[laid.edges[:, 0]], axis=1) / rest
        if relax:
            assert ratio.min() >= 1.0 - STRETCH - 0.01 and ratio.max() <= 1.0 + STRETCH + 0.01
            np.testing.assert_allclose(r.stretch[0], ratio)
        else:
            assert ratio.max() > 1.2                     # 1 / cos 35° = 1.22 along the slope
    # The slope is steeper than the method can walk well: the warning names the frames.
    assert len(r.warnings) == 1 and "slope" in r.warnings[0] and "frames" in r.warnings[0]


def test_a_crowd_equals_its_characters_solved_one_by_one(carpet, hills):
    paths = lateral_paths(STRAIGHT, 3, 1.2)
    offsets = [0, 11, 23]
    crowd = walk(carpet, paths, hills, offsets)
    assert crowd.positions.shape[:2] == (3, crowd.path_frames.max())
    for c in range(3):
        alone = walk(carpet, [paths[c]], hills, [offsets[c]])
        n = int(crowd.path_frames[c])
        assert alone.path_frames.tolist() == [n] and alone.positions.shape[1] == n
        assert np.abs(alone.positions[0] - crowd.positions[c, :n]).max() < 1e-9
        np.testing.assert_array_equal(alone.clip_frames[0], crowd.clip_frames[c, :n])
        assert (crowd.positions[c, n:] == crowd.positions[c, n - 1]).all()          # then stands
    # Side by side, 1.2 m apart across the path.
    lateral = crowd.positions[:, :, carpet.root, 1].mean(axis=1)
    np.testing.assert_allclose(np.diff(lateral), 1.2, atol=0.05)




def test_a_crowd_cut_short_equals_its_characters_walked_alone(carpet, hills):
    # frames shorter than the paths: every character is still walking at the last frame, some
    # with a stance that runs past it. Each was laid only to the last frame the crowd plays, so a
    # character beside later-starting ones had that stance judged whole and, alone, cut: its feet
    # were carried by other descriptors over its last frames (8 cm apart, measured).
    paths = lateral_paths(STRAIGHT, 6, 0.8)
    offsets = (np.arange(6) * 7) % 30
    crowd = walk(carpet, paths, hills, offsets, frames=150)
    assert crowd.positions.shape[:2] == (6, 150) and (crowd.path_frames == 150).all()
    for c in range(6):
        alone = walk(carpet, [paths[c]], hills, [offsets[c]], frames=150)
        assert np.abs(alone.positions[0] - crowd.positions[c]).max() < 1e-9
        np.testing.assert_array_equal(np.isnan(alone.pins[0]), np.isnan(crowd.pins[c]))



def test_a_walk_starting_on_a_straight_leg_over_a_rise_does_not_snap_its_knee(carpet):
    # Clip frames 15-21 hold the left leg straight. Started there over a rise, the first frame
    # (settled from the targets) buckled that knee backwards, and the hinge limit, off where the
    # source is straight, let it stay so until the source bent it: a 30 cm snap at frame 6, 1.4-1.8x
    # the source's largest step (12 of the 100-character benchmark crowd's characters).
    terrain = TriMesh(*S.grid(10.0, 4.0, 100, 40, origin=(-3.0, -12.75), height=S.hills(0.15, 3.0)))
    src_step = np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()
    for y in (-10.75, -10.5):
        path = np.array([[0.0, y, 0.0], [5.0, y, 0.0]])
        r = walk(carpet, [path], terrain, [16], frames=30)
        assert np.linalg.norm(np.diff(r.positions[0], axis=0), axis=-1).max() <= 1.12 * src_step



def test_a_crowd_starting_at_every_phase_over_hills_steps_no_farther_than_the_source(carpet):
    # 30 characters over 30 cm hills, each starting at another frame of the cycle: none snaps a
    # knee on its first frames (6 did, up to 1.95x the source's largest step, while the hinge
    # limits skipped frames where the source leg is straight).
    C = 30
    terrain = TriMesh(*S.grid(14.0, 25.0, 110, 120, origin=(-3.0, -12.5), height=S.hills(0.3, 6.0)))
    paths = lateral_paths(np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0]]), C, 0.5)
    offsets = np.arange(C) * max(1, carpet.period // C) % carpet.period
    assert len(set(offsets.tolist())) == C
    r = walk(carpet, paths, terrain, offsets)
    src = np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()
    for c in range(C):
        n = int(r.path_frames[c])
        assert np.linalg.norm(np.diff(r.positions[c, :n], axis=0), axis=-1).max() <= 1.12 * src


def test_a_long_crowd_solved_in_segments_is_its_characters_one_by_one_and_the_sequential_solve(carpet, monkeypatch):
    # Three segments of frames, solved side by side.
    long_hills = TriMesh(*S.grid(30.0, 10.0, 150, 50, origin=(-3.0, -5.0), height=S.hills(0.15, 3.0)))
    paths = lateral_paths(np.array([[0.0, 0.0, 0.0], [24.0, 0.0, 0.0]]), 3, 1.2)
    offsets = [0, 11, 23]
    seen = []
    crowd = walk(carpet, paths, long_hills, offsets, progress=lambda done, total: seen.append((done, total)))
    frames = crowd.positions.shape[1]
    assert frames > 2 * crowd_module.CROWD_SEGMENT_FRAMES + 30                  # three segments
    assert seen and all(0 <= done <= total for done, total in seen)
    # A character alone (fewer frames: its segments are the crowd's) gives what it gives in the crowd.
    for c in (0, 2):
        alone = walk(carpet, [paths[c]], long_hills, [offsets[c]])
        n = int(crowd.path_frames[c])
        assert alone.positions.shape[1] == n
        assert np.abs(alone.positions[0] - crowd.positions[c, :n]).max() < 1e-9
    # One segment is the sequential solve: the segments rejoin it within their tolerance.
    monkeypatch.setattr(crowd_module, "CROWD_SEGMENT_FRAMES", 10 ** 6)
    sequential = walk(carpet, paths, long_hills, offsets)
    assert np.abs(sequential.positions - crowd.positions).max() < 1e-5 * carpet.body_height
    with pytest.raises(Cancelled):
        monkeypatch.setattr(crowd_module, "CROWD_SEGMENT_FRAMES", 128)
        walk(carpet, paths, long_hills, offsets, progress=lambda done, total: done < 40)

@pytest.mark.skipif(not fork_available(), reason="walk shares a crowd among forked processes on Linux only")
def test_a_crowd_shared_among_processes_is_the_same_crowd(carpet, hills):
    paths = lateral_paths(STRAIGHT, 3, 1.2)
    offsets = [0, 11, 23]
    seen = []
    one = walk(carpet, paths, hills, offsets)
    two = walk(carpet, paths, hills, offsets, workers=2, progress=lambda done, total: seen.append(done))
    assert two.seconds["workers"] == 2
    for name in ("positions", "clip_frames", "pins", "carpets", "stretch", "targets", "bone_error"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
    assert one.warnings == two.warnings
    assert seen                                          # this process's part reports progress
    # Without relaxation the carpets have no stretch to share (its rows are (0,) long).
    loose = walk(carpet, paths, hills, offsets, relax=False, workers=2)
    assert loose.stretch.shape == (3, 0)
    np.testing.assert_array_equal(loose.positions, walk(carpet, paths, hills, offsets, relax=False).positions)
    # More workers than characters: one process per character (the carpet is laid for a
    # shorter clip here, as for one character alone: equal within rounding, see above).
    np.testing.assert_allclose(walk(carpet, paths[:2], hills, offsets[:2], workers=8).positions,
                               one.positions[:2], rtol=0, atol=1e-9)


@pytest.mark.skipif(not fork_available(), reason="walk shares a crowd among forked processes on Linux only")
def test_an_error_in_a_worker_process_reaches_the_caller(carpet, hills, monkeypatch):
    real = crowd_module._walk

    def failing(carpet, paths, *args, **kwargs):
        if paths[0].name == "path 2":                    # the second process's part
            raise InputError("made to fail in the worker")
        return real(carpet, paths, *args, **kwargs)

    monkeypatch.setattr(crowd_module, "_walk", failing)
    with pytest.raises(InputError, match="made to fail in the worker"):
        walk(carpet, lateral_paths(STRAIGHT, 3, 1.2), hills, [0, 11, 23], workers=2)
    with pytest.raises(Cancelled):                       # cancelled in this process: the other stops too
        walk(carpet, lateral_paths(STRAIGHT, 3, 1.2), hills, [0, 11, 23], workers=2,
             progress=lambda done, total: False)


def test_a_path_on_a_bridge_walks_on_the_bridge(carpet):
    ground = S.grid(16.0, 10.0, 32, 20, origin=(-3.0, -5.0))
    deck = S.grid(16.0, 2.0, 32, 4, origin=(-3.0, -1.0), z=1.0)       # over the ground, as long
    verts, tris, _ = S.merge(ground, deck)
    scene = TriMesh(verts, tris)
    low = walk(carpet, [STRAIGHT], scene)
    high = walk(carpet, [STRAIGHT + [0.0, 0.0, 1.0]], scene)
    np.testing.assert_allclose(high.positions[0], low.positions[0] + [0.0, 0.0, 1.0], atol=1e-9)


def test_quadruped_walks_a_curve_over_hills():
    skel, motion = S.quadruped_walk(120)
    carpet = bind_carpet(skel, motion)
    names = {skel.names[j] for j in carpet.standing}
    assert {"LeftHindPaw", "RightHindPaw", "LeftFrontPaw", "RightFrontPaw"} <= names
    terrain = TriMesh(*S.grid(12.0, 10.0, 120, 100, origin=(-2.0, -4.0), height=S.hills(0.1, 2.5)))
    th = np.linspace(0.0, np.pi / 2, 60)
    path = np.c_[3.0 * np.sin(th), 3.0 - 3.0 * np.cos(th), np.zeros_like(th)]
    r = walk(carpet, [path], terrain)
    gap, slide = _stance_checks(r, terrain, carpet)
    assert gap < 0.01 and slide * 30.0 < 0.01
    for paw in ("LeftHindPaw", "RightHindPaw", "LeftFrontPaw", "RightFrontPaw"):
        assert (~np.isnan(r.pins[0, :, skel.index(paw), 0])).mean() > 0.4
    root = r.positions[0][:, carpet.root]
    assert np.abs(np.hypot(root[:, 0], root[:, 1] - 3.0) - 3.0).max() < 0.05
    bones = np.linalg.norm(r.positions[0][:, 1:] - r.positions[0][:, skel.parents[1:]], axis=-1)
    src = np.linalg.norm(motion[0][1:] - motion[0][skel.parents[1:]], axis=-1)
    assert np.abs(bones / src - 1).max() < 0.02


def test_sharp_turn_is_reported_with_its_frames(carpet, flat):
    corner = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [2.0, 3.0, 0.0]])
    r = walk(carpet, [corner], flat)
    assert len(r.warnings) == 1 and "turn" in r.warnings[0]
    assert "frames" in r.warnings[0]


def test_bad_input(carpet, flat):
    with pytest.raises(InputError, match="leaves the terrain"):
        walk(carpet, [np.array([[0.0, 0.0, 0.0], [30.0, 0.0, 0.0]])], flat)
    # The error names the path that leaves, and where along it (the paths are checked together).
    inside = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
    with pytest.raises(InputError, match=r"path 1 leaves the terrain at \(\S+, 0\), (\S+) along") as e:
        walk(carpet, [inside, np.array([[0.0, 0.0, 0.0], [30.0, 0.0, 0.0]]), inside], flat)
    x, along = (float(v) for v in re.search(r"at \((\S+), 0\), (\S+) along", str(e.value)).groups())
    assert x == along and flat.vertices[:, 0].max() < x <= flat.vertices[:, 0].max() + 0.1    # printed to 3 digits
    with pytest.raises(InputError, match="zero length"):
        walk(carpet, [np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])], flat)
    with pytest.raises(InputError, match="no paths"):
        walk(carpet, [], flat)
    with pytest.raises(InputError, match="one per path"):
        walk(carpet, [STRAIGHT], flat, time_offsets=[0, 1])
    with pytest.raises(InputError, match=">= 0"):
        walk(carpet, [STRAIGHT], flat, time_offsets=[-3])
    with pytest.raises(InputError, match="NaN"):
        walk(carpet, [np.array([[0.0, 0.0, 0.0], [np.nan, 0.0, 0.0]])], flat)
    wall = TriMesh(np.array([[0.0, 0, 0], [1, 0, 0], [1, 0, 1], [0, 0, 1]]), np.array([[0, 1, 2], [0, 2, 3]]))
    with pytest.raises(InputError, match="vertical"):
        walk(carpet, [STRAIGHT], wall)
    with pytest.raises(InputError, match="at least one character"):
        lateral_paths(STRAIGHT, 0, 1.0)
    with pytest.raises(InputError, match="shorter than one frame"):
        walk(carpet, [np.array([[0.0, 0.0, 0.0], [0.01, 0.0, 0.0]])], flat)
    skel, motion = S.walk(60)
    standing = np.repeat(motion[:1], 60, axis=0)            # a clip that goes nowhere
    with pytest.raises(InputError, match="not locomotion"):
        bind_carpet(skel, standing)
    with pytest.raises(InputError, match="NaN"):
        bad = motion.copy()
        bad[3, 2, 1] = np.nan
        bind_carpet(skel, bad)


def _bend(X, a, b, c):
    u, w = X[:, b] - X[:, a], X[:, c] - X[:, b]
    cos = np.einsum("fk,fk->f", u, w) / (np.linalg.norm(u, axis=1) * np.linalg.norm(w, axis=1))
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def test_the_spine_keeps_its_shape_over_hills(carpet):
    """Judged by joint angles: the generated walk holds its spine straight; over 35 cm hills
    each joint's Eq. 2 target averages a different patch of terrain, which bent the spine to
    64° before the body was fitted rigidly and held (``_rigid_body``)."""
    steep = TriMesh(*S.grid(24.0, 16.0, 240, 160, origin=(-4.0, -8.0), height=S.hills(0.35, 4.0)))
    t = np.linspace(0.0, 1.0, 80)
    curve = np.c_[16.0 * t, 2.5 * np.sin(2.0 * np.pi * 0.8 * t), np.zeros_like(t)]
    ix = carpet.skeleton.index
    r = walk(carpet, [curve], steep)
    for joints in (("Hips", "Spine", "Spine1"), ("Spine", "Spine1", "Spine2"), ("Spine1", "Spine2", "Neck")):
        bend = _bend(r.positions[0], *map(ix, joints))
        assert np.median(bend) < 5.0 and bend.max() < 20.0, (joints, np.median(bend), bend.max())
    thesis = walk(carpet, [curve], steep, rigid_body=False)
    assert _bend(thesis.positions[0], ix("Hips"), ix("Spine"), ix("Spine1")).max() > 30.0


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
def test_every_rig_convention_walks_over_hills(convention, hills):
    """Rigs named and built as the common conventions (Rigify's coincident joints, UE's floor
    root, Mixamo's fingers) bind and walk; bones keep the played clip's lengths frame by frame.
    (Their generated motion travels but does not plant its feet: nothing is held.)"""
    from blender_reldesc.core.locomotion.crowd import body_joints, trunk_chain
    sk, offsets, roles = S.convention_rig(convention)
    motion = S.posed_motion(sk, offsets, roles, frames=120, limbs="bent", speed=1.2)
    carpet = bind_carpet(sk, motion)
    r = walk(carpet, [STRAIGHT], hills, frames=120)
    P = r.positions[0]
    assert np.isfinite(P).all() and r.warnings == []
    assert len(carpet.standing) >= 4                      # the feet and toes can stand
    played = carpet.layout(120).binding.motion[r.clip_frames[0]]
    child = np.flatnonzero(sk.parents >= 0)
    got = np.linalg.norm(P[:, child] - P[:, sk.parents[child]], axis=-1)
    want = np.linalg.norm(played[:, child] - played[:, sk.parents[child]], axis=-1)
    assert np.abs(got - want).max() <= 0.02 * max(want.max(), 1e-9) + 1e-9
    chain = trunk_chain(sk, body_joints(sk, carpet.standing), carpet.motion)
    u = P[:, chain[1:]] - P[:, chain[:-1]]
    keep = np.linalg.norm(u, axis=-1).min(axis=0) > 1e-6
    assert keep.sum() >= 2


def test_each_path_is_walked_to_its_end(carpet, flat):
    # Three paths of different lengths in one call (issue 35: all were cut to the shortest):
    # each character walks its own path to its end, stops on a frame with both feet down, and
    # stands there for the frames the longer walks still take.
    th = np.linspace(0.0, 0.5 * np.pi, 60)
    quarter = np.c_[2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.zeros_like(th)]
    x = np.linspace(0.0, 6.0, 80)
    s_curve = np.c_[x, 0.8 * np.sin(x * np.pi / 3.0), np.zeros_like(x)]
    paths = [STRAIGHT, quarter, s_curve]
    lengths = [8.0, np.pi, float(np.linalg.norm(np.diff(s_curve[:, :2], axis=0), axis=1).sum())]
    r = walk(carpet, paths, flat)
    F = r.positions.shape[1]
    assert F == r.path_frames.max() and len(set(r.path_frames.tolist())) == 3
    sk = carpet.skeleton
    ankles = [j for j in carpet.standing.tolist() if sk.parents[j] not in set(carpet.standing.tolist())]
    played = carpet.extended(int(r.clip_frames.max()) + 1)
    legs = [[j for j in carpet.standing.tolist() if sk.names[j].startswith(side)] for side in ("Left", "Right")]

    def highest_foot(frames):
        """The higher foot's height, each foot by its lowest joint (a foot on its toes is down)."""
        return np.max([(played[frames][..., leg, 2] - carpet.motion[:, leg, 2].min(axis=0)).min(axis=-1)
                       for leg in legs], axis=0)
    for c, (path, length) in enumerate(zip(paths, lengths)):
        n = int(r.path_frames[c])
        assert length / carpet.speed - STEP / carpet.speed - 1 <= n <= length / carpet.speed + 2
        root = r.positions[c, :, carpet.root]
        # Its root's distance left to the end of the path when it stops: at most a step, never past.
        to_end = np.linalg.norm(root[n - 1, :2] - path[-1, :2])
        assert to_end <= STEP + 0.05
        way = (path[-1, :2] - path[-2, :2]) / np.linalg.norm(path[-1, :2] - path[-2, :2])
        assert np.dot(root[n - 1, :2] - path[-1, :2], way) <= 0.05          # the hips sway: 5 cm
        # Standing: the same pose on every frame after, both feet down.
        assert (r.positions[c, n:] == r.positions[c, n - 1]).all()
        assert (r.clip_frames[c, n:] == r.clip_frames[c, n - 1]).all()
        # Its feet as low as the clip has them: the higher foot within 2 cm of the clip's best
        # (the generated walk never has both feet down at once: its best is 3.5 cm).
        assert highest_foot(r.clip_frames[c, n - 1]) <= highest_foot(np.arange(*carpet.cycle)).min() + 0.02
        assert np.abs(r.positions[c, n - 1, ankles, 2] - played[r.clip_frames[c, n - 1], ankles, 2]).max() < 0.01
        # Walking until then, as it walks alone.
        alone = walk(carpet, [path], flat)
        assert alone.positions.shape[1] == n
        assert np.abs(alone.positions[0] - r.positions[c, :n]).max() < 1e-9
    # Asked for fewer frames: every walk is cut there. With stop=False: every character walks
    # every frame (on straight past the end of a shorter path).
    cut = walk(carpet, paths, flat, frames=60)
    assert cut.positions.shape[1] == 60 and cut.path_frames.tolist() == [60, 60, 60]
    on = walk(carpet, paths, flat, stop=False)
    assert on.positions.shape[1] == F and on.path_frames.tolist() == [F] * 3
    assert np.abs(on.positions[0] - r.positions[0]).max() < 1e-9          # the longest path's walk


def _planted_on_terrain(carpet, result, terrain, fps=30.0):
    """(share of planted samples on the terrain within 2 cm, mean stance slide, the source's) of
    every character of ``result``. Planted: the contacts paper's test with the product's defaults
    (within 0.015 body heights of the joint's lowest height, slower than 0.12 body heights/s)."""
    H = carpet.body_height
    ground = Terrain(terrain)
    played_all = carpet.extended(int(result.clip_frames.max()) + 1)
    low = carpet.motion[..., 2].min(axis=0)
    ok, slide, src_slide = [], [], []
    for c in range(len(result.positions)):
        n = int(result.path_frames[c])
        played, P = played_all[result.clip_frames[c, :n]], result.positions[c, :n]
        speed = np.linalg.norm(np.gradient(played, axis=0), axis=-1) * fps
        for j in carpet.standing.tolist():
            h = (played[:, j, 2] <= low[j] + 0.015 * H) & (speed[:, j] <= 0.12 * H)
            z, hit = ground.heights(P[:, j, :2], P[:, j, 2])
            ok.append(hit[h] & (np.abs(P[h, j, 2] - z[h] - played[h, j, 2]) <= 0.02))
            both = h[1:] & h[:-1]
            slide.append(np.linalg.norm(np.diff(P[:, j, :2], axis=0), axis=1)[both] * fps)
            src_slide.append(np.linalg.norm(np.diff(played[:, j, :2], axis=0), axis=1)[both] * fps)
    return np.concatenate(ok).mean(), np.concatenate(slide).mean(), np.concatenate(src_slide).mean()


@pytest.mark.parametrize("gait", ["walk", "fast", "quadruped"])
def test_planted_feet_stay_on_hills_along_a_line_a_turn_and_an_s_curve(gait):
    # Issue 35: planted feet on 30 cm hills, on the three path shapes in one call, for a walk, a
    # fast gait (2.6 m/s: a foot's heel is down 3 frames a step, which the stance test lost) and a
    # quadruped: at least 95 % of planted samples on the terrain (within 2 cm of its height plus
    # the source's), sliding no faster than the source's feet + 0.02 m/s.
    sk, motion = {"walk": lambda: S.walk(150), "fast": lambda: S.walk(150, speed=2.6, stride=2.2),
                  "quadruped": lambda: S.quadruped_walk(150)}[gait]()
    carpet = bind_carpet(sk, motion)
    hills = TriMesh(*S.grid(30.0, 30.0, 120, 120, origin=(-10.0, -15.0), height=S.hills(0.3, 6.0)))
    th = np.linspace(0.0, 0.5 * np.pi, 60)
    x = np.linspace(0.0, 6.0, 80)
    paths = [np.array([[0.0, -5.0, 0.0], [8.0, -5.0, 0.0]]),
             np.c_[2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.zeros_like(th)],
             np.c_[x, 5.0 + 0.8 * np.sin(x * np.pi / 3.0), np.zeros_like(x)]]
    for path in paths:
        r = walk(carpet, [path], hills)
        on, slide, src = _planted_on_terrain(carpet, r, hills)
        assert on >= 0.95, (gait, on)
        assert slide <= src + 0.02, (gait, slide, src)


def _feet(roles, side):
    return [j for j, r in enumerate(roles) if r.split(".")[0] in ("foot", "toe", "toe_end") and r.endswith(side)]


@pytest.mark.parametrize("gait", ["walk", "run"])
def test_the_generated_gaits_plant_their_feet_and_a_run_leaves_the_ground(gait):
    # synthetic.locomotion: a foot down stays still; a walk always has a foot down, a run has both
    # off the ground twice a cycle; bones keep their lengths (all but the UE root's link to the
    # pelvis, which is no bone of the body: the pelvis moves over it).
    for convention in ("bvh", "ue"):
        sk, off, roles = S.convention_rig(convention)
        m = S.locomotion(sk, off, roles, frames=120, gait=gait)
        child = [j for j in np.flatnonzero(sk.parents >= 0).tolist() if roles[sk.parents[j]] != "root"]
        lengths = np.linalg.norm(m[:, child] - m[:, sk.parents[child]], axis=-1)
        assert np.ptp(lengths, axis=0).max() < 1e-9
        low = m[..., 2].min(axis=0)
        down = {side: (m[:, _feet(roles, side), 2] - low[_feet(roles, side)]).min(axis=1) < 1e-6
                for side in (".L", ".R")}
        flight = ~down[".L"] & ~down[".R"]
        assert (flight.mean() > 0.15) if gait == "run" else not flight.any()
        for side in (".L", ".R"):
            ankle = next(j for j, r in enumerate(roles) if r == "foot" + side)
            still = down[side][1:] & down[side][:-1]
            assert np.abs(np.diff(m[:, ankle], axis=0)[still]).max() < 1e-9


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue"])
@pytest.mark.parametrize("gait", ["walk", "run"])
def test_every_convention_walks_and_runs_with_its_feet_on_hills(convention, gait):
    # Issue 35: a walk and a run (both feet off the ground between steps) on rigs of four
    # conventions (Mixamo's fingers, Rigify's zero-length pelvis, UE's floor root and twist
    # leaves), along a line, a 2 m turn, an S-curve and a 1 m half circle in one call over 30 cm
    # hills: at least 95 % of the planted samples on the terrain, sliding no faster than the
    # source + 0.02 m/s, and no path cut short of a step of its end.
    sk, off, roles = S.convention_rig(convention)
    carpet = bind_carpet(sk, S.locomotion(sk, off, roles, frames=150, gait=gait))
    hills = TriMesh(*S.grid(30.0, 30.0, 120, 120, origin=(-10.0, -15.0), height=S.hills(0.3, 6.0)))
    th, x, hh = np.linspace(0.0, 0.5 * np.pi, 60), np.linspace(0.0, 6.0, 80), np.linspace(0.0, np.pi, 60)
    paths = [np.array([[0.0, -5.0, 0.0], [8.0, -5.0, 0.0]]),
             np.c_[2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.zeros_like(th)],
             np.c_[x, 5.0 + 0.8 * np.sin(x * np.pi / 3.0), np.zeros_like(x)],
             np.c_[-6.0 + np.sin(hh), -8.0 - np.cos(hh), np.zeros_like(hh)]]
    r = walk(carpet, paths, hills)
    on, slide, src = _planted_on_terrain(carpet, r, hills)
    assert on >= 0.95, (convention, gait, on)
    assert slide <= src + 0.02, (convention, gait, slide, src)
    stride = S.GAITS[gait]["stride"]                                   # two steps
    for c, path in enumerate(paths):
        stop = r.positions[c, int(r.path_frames[c]) - 1, carpet.root, :2]
        assert np.linalg.norm(stop - path[-1, :2]) <= 0.5 * stride + 0.1, (convention, gait, c)


def _heights_brute_force(mesh, xy, near):
    """Every triangle against every point, with ``Terrain.heights``' own hit test: the height and
    slope of the hit nearest ``near``, the lowest triangle index among equals."""
    v, t = mesh.frame(0), mesh.triangles
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    scale = float(np.ptp(v[:, :2], axis=0).max())
    ok = np.abs(area) > 1e-12 * scale * scale
    a, b, c, area = a[ok], b[ok], c[ok], area[ok]
    out, slope = np.full(len(xy), np.nan), np.zeros((len(xy), 2))
    for i, p in enumerate(xy):
        w1 = ((b[:, 0] - p[0]) * (c[:, 1] - p[1]) - (b[:, 1] - p[1]) * (c[:, 0] - p[0])) / area
        w2 = ((c[:, 0] - p[0]) * (a[:, 1] - p[1]) - (c[:, 1] - p[1]) * (a[:, 0] - p[0])) / area
        w3 = 1.0 - w1 - w2
        hit = np.flatnonzero((w1 >= -1e-9) & (w2 >= -1e-9) & (w3 >= -1e-9))
        if not hit.size:
            continue
        z = (w1 * a[:, 2] + w2 * b[:, 2] + w3 * c[:, 2])[hit]
        k = hit[np.argmin(np.abs(z - near[i]))] if hit.size > 1 else hit[0]
        out[i] = z[list(hit).index(k)]
        n = np.cross(b[k] - a[k], c[k] - a[k])
        slope[i] = -n[:2] / n[2]
    return out, slope


@pytest.mark.parametrize("shape", ["long thin triangles", "a bridge over a valley", "mixed sizes"])
def test_terrain_heights_are_every_triangle_tested(shape):
    # The cell grid only picks candidates: heights, hits and slopes are those of testing every
    # triangle (points inside, outside, on vertices and edges; several surfaces over a point).
    rng = np.random.default_rng(7)
    if shape == "long thin triangles":
        mesh = TriMesh(*S.grid(6.0, 9.0, 60, 15, origin=(-1.0, -4.5), height=S.hills(0.3, 2.0)))
    elif shape == "a bridge over a valley":
        v1, t1 = S.grid(6.0, 6.0, 12, 12, origin=(-3.0, -3.0), height=lambda x, y: -0.5 * np.cos(x))
        v2, t2 = S.grid(6.0, 1.0, 24, 2, origin=(-3.0, -0.5), height=lambda x, y: 0.4 + 0.0 * x)
        mesh = TriMesh(np.r_[v1, v2], np.r_[t1, t2 + len(v1)])
    else:
        v, t = S.grid(4.0, 4.0, 8, 8, origin=(-2.0, -2.0), height=S.hills(0.2, 1.5))
        fine, ft = S.grid(1.0, 1.0, 40, 40, origin=(-0.5, -0.5), height=lambda x, y: 0.5 + 0.1 * x)
        mesh = TriMesh(np.r_[v, fine], np.r_[t, ft + len(v)])
    v = mesh.frame(0)
    lo, hi = v[:, :2].min(axis=0), v[:, :2].max(axis=0)
    xy = np.r_[rng.uniform(lo - 0.3, hi + 0.3, size=(400, 2)), v[rng.choice(len(v), 60), :2],
               0.5 * (v[mesh.triangles[:40, 0], :2] + v[mesh.triangles[:40, 1], :2])]
    near = rng.uniform(-1.0, 1.0, len(xy))
    got, found, slope = Terrain(mesh).heights(xy, near, gradient=True)
    want, want_slope = _heights_brute_force(mesh, xy, near)
    np.testing.assert_array_equal(found, ~np.isnan(want))
    np.testing.assert_array_equal(got[found], want[found])
    np.testing.assert_allclose(slope[found], want_slope[found], rtol=0, atol=1e-12)
    assert found.sum() > 300
