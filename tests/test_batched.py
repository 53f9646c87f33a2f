"""The batched solve (clip segments solved together) against the sequential one, and the
culled coefficient table against the dense one."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.adaptation import Rig
from blender_reldesc.core.descriptors.weights import _culled, _dense, frames_of
from blender_reldesc.core.errors import Cancelled

from core_helpers import random_rotation

FRAMES = 420                       # past SEGMENT_FROM_FRAMES: adapt takes the batched path


@pytest.fixture(scope="module")
def long_walk():
    skel, motion = S.walk(FRAMES)
    floor = S.grid(24.0, 4.0, 96, 16, origin=(-2.0, -2.0))
    beam = S.box((6.0, 0.0, 1.75), (0.3, 3.0, 0.2), subdivisions=2)
    verts, tris, ranges = S.merge(floor, beam)
    mesh = TriMesh(verts, tris)
    return skel, motion, mesh, ranges, bind(skel, motion, mesh)


def _edited(mesh, ranges):
    v = mesh.vertices.copy()
    lo, hi = ranges[0]
    v[lo:hi, 2] += S.hills(0.12, 2.5)(v[lo:hi, 0], v[lo:hi, 1])
    lo, hi = ranges[1]
    v[lo:hi, 2] -= 0.25                                              # the beam lowered: a duck
    return mesh.with_vertices(v)


def test_segments_solved_together_match_the_sequential_solve(long_walk):
    skel, motion, mesh, ranges, binding = long_walk
    edited = _edited(mesh, ranges)
    pins = np.full(motion.shape, np.nan)
    hand = skel.index("LeftHand")
    pins[200:260, hand] = motion[200:260, hand] + [0.0, 0.15, 0.1]   # a pinned hand across a seam
    seq = adapt(binding, edited, pins=pins, solver_options={"segments": 0})
    bat = adapt(binding, edited, pins=pins)
    H = binding.body_height
    assert np.abs(bat.positions - seq.positions).max() <= 1e-5 * H
    np.testing.assert_allclose(bat.positions[200:260, hand], pins[200:260, hand], atol=1e-9)
    # The edit did something: the comparison is not between two copies of the source.
    assert np.abs(seq.positions - motion).max() > 0.1


def test_many_short_segments_with_little_warm_up_still_converge(long_walk):
    # 5 warm-up frames are far too few for the first guess; the passes that follow must
    # still bring every segment onto the sequential solve.
    skel, motion, mesh, ranges, binding = long_walk
    edited = _edited(mesh, ranges)
    rig = Rig(binding)
    targets, affinity = rig.targets(edited)
    seq = rig.warper().run(targets, motion[0], affinity, segments=0)
    warper = rig.warper()
    warper.warmup = 5
    bat = warper.run(targets, motion[0], affinity, segments=20)
    assert np.abs(bat - seq).max() <= 1e-5 * binding.body_height


def test_batched_undeformed_and_rigid_edits_are_exact(long_walk):
    skel, motion, mesh, _, binding = long_walk
    H = binding.body_height
    same = adapt(binding, mesh)
    assert np.abs(same.positions - motion).max() <= 1e-6 * H
    R = random_rotation(np.random.default_rng(2))
    shift = np.array([3.0, -7.0, 0.5])
    moved = adapt(binding, mesh.with_vertices(mesh.vertices @ R.T + shift))
    assert np.abs(moved.positions - (motion @ R.T + shift)).max() <= 1e-6 * H


def test_batched_solve_on_an_animated_floor_matches_the_sequential_one():
    skel, motion = S.walk(300)
    verts, tris = S.grid(16.0, 4.0, 32, 8, origin=(-2.0, -2.0))
    rise = np.linspace(0.0, 0.3, 300)
    frames = np.repeat(verts[None], 300, axis=0)
    frames[:, :, 2] += rise[:, None]
    binding = bind(skel, motion, TriMesh(verts, tris))
    lifted = TriMesh(frames, tris)
    seq = adapt(binding, lifted, solver_options={"segments": 0})
    bat = adapt(binding, lifted, solver_options={"segments": 100})
    assert np.abs(bat.positions - seq.positions).max() <= 1e-5 * binding.body_height


def test_a_batched_solve_reports_progress_and_can_be_cancelled(long_walk):
    _, _, mesh, ranges, binding = long_walk
    seen = []

    def progress(done, total):
        seen.append((done, total))
        return done < 20

    with pytest.raises(Cancelled):
        adapt(binding, _edited(mesh, ranges), progress=progress)
    assert seen and all(0 < d <= t for d, t in seen)


def test_culled_coefficients_equal_the_dense_ones():
    # A floor, a box and a wall around a walk: the per-joint boxes keep every
    # (frame, joint, descriptor) that has a weight, with the same values.
    skel, motion = S.walk(64)
    floor = S.grid(8.0, 4.0, 32, 16, origin=(-2.0, -2.0), height=S.hills(0.1, 2.0))
    box = S.box((1.5, 0.6, 0.25), (0.5, 0.4, 0.5), subdivisions=3)
    wall = S.box((2.0, -1.2, 1.0), (4.0, 0.1, 2.0), subdivisions=4)
    verts, tris, _ = S.merge(floor, box, wall)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    d, n, t, b = frames_of(mesh, binding.triangles, binding.barycentrics, 0)
    window = 0.25 * binding.body_height
    for f0 in (0, 16, 40):
        p = motion[f0:f0 + 16]
        centre = p.reshape(-1, 3).mean(axis=0)
        fast = _culled(p - centre, d - centre, n, window)
        slow = _dense(p - centre, (d - centre)[None].repeat(16, 0), n[None].repeat(16, 0), window)
        for x, y in zip(fast[:3], slow[:3]):
            np.testing.assert_array_equal(x, y)
        for x, y in zip(fast[3:], slow[3:]):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12)
        assert len(fast[0]) > 1000


@pytest.mark.parametrize("convention", ["mixamo", "rigify", "ue"])
def test_batched_solve_matches_on_rigs_of_other_conventions(convention):
    # Mixamo's fingers, Rigify's coincident pelvis bones and split arms, Unreal's floor-level
    # root and twist leaves, walking 300 frames under a beam lowered into their way (a duck
    # mid-clip, crossing segment seams): segments solved together equal the frame-by-frame solve.
    skel, off, roles = S.convention_rig(convention)
    motion = S.posed_motion(skel, off, roles, 300, limbs="bent", speed=1.0)
    lo, hi = motion.reshape(-1, 3).min(0), motion.reshape(-1, 3).max(0)
    size = hi[:2] - lo[:2] + 2.0
    floor = S.grid(size[0], size[1], int(size[0] / 0.12), int(size[1] / 0.12), origin=tuple(lo[:2] - 1.0),
                   z=lo[2] - 0.01)
    hips = roles.index("hips")
    beam = S.box((motion[150, hips, 0], 0.0, hi[2] + 0.15), (0.3, 3.0, 0.2), subdivisions=3)
    verts, tris, ranges = S.merge(floor, beam)
    lowered = verts.copy()
    lowered[ranges[1][0]:ranges[1][1], 2] -= 0.35
    binding = bind(skel, motion, TriMesh(verts, tris))
    seq = adapt(binding, TriMesh(lowered, tris), solver_options={"segments": 0})
    bat = adapt(binding, TriMesh(lowered, tris), solver_options={"segments": 100})
    H = binding.body_height
    assert np.abs(seq.positions - motion).max() > 0.05 * H                   # it ducks
    assert np.abs(bat.positions - seq.positions).max() <= 1e-5 * H


def _stone_moved_far():
    skel, motion, verts, tris, stones = S.stepping_stones(120)
    mesh = TriMesh(verts, tris)
    v = verts.copy()
    a, b, _ = stones[1]
    v[a:b] += [0.0, 1.0, 0.0]                      # the stone under the right foot's first step
    return skel, motion, mesh, mesh.with_vertices(v)


def test_targets_that_jump_where_the_source_does_not_are_eased():
    # A stone moved a metre grabs the toe that steps towards its old place and lets it go:
    # its target jumped 0.44 m in a frame. Eased (smooth_jumps), no joint steps farther than
    # 1.2x the source's largest step; without the guard it did.
    from blender_reldesc.core.adaptation import smooth_jumps
    skel, motion, mesh, moved = _stone_moved_far()
    binding = bind(skel, motion, mesh)
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    raw = adapt(binding, moved, solver_options={"jump_guard": False})
    eased = adapt(binding, moved)
    assert step(raw.targets) > 1.5 * step(motion)
    assert step(eased.targets) <= 1.2 * step(motion) and step(eased.positions) <= 1.2 * step(motion)
    # Where nothing jumps nothing changes, and easing commutes with a rigid move of everything.
    top = step(motion)
    np.testing.assert_array_equal(smooth_jumps(motion, motion + 0.1, top), motion + 0.1)
    R = random_rotation(np.random.default_rng(2))
    np.testing.assert_allclose(smooth_jumps(motion @ R.T, raw.targets @ R.T + 1.0, top),
                               smooth_jumps(motion, raw.targets, top) @ R.T + 1.0, atol=1e-12)


def test_live_preview_eases_jumps_as_the_bake_does():
    # The live preview evaluates the targets within JUMP_REACH frames of the one it shows and
    # eases them together: playing forward it gives what adapt gives, jumps included.
    from blender_reldesc.core import LiveSession
    skel, motion, mesh, moved = _stone_moved_far()
    binding = bind(skel, motion, mesh)
    full = adapt(binding, moved, solver_options={"segments": 0})
    live = LiveSession(binding)
    for f in range(40):
        np.testing.assert_allclose(live.pose(f, moved.vertices), full.positions[f], atol=1e-9)


def test_live_preview_on_an_animated_environment_uses_each_frame_s_own_surfaces():
    # A floor bound while it rises and edited with a wave that moves: the live preview, given
    # each frame's vertices as Blender reads them, equals adapt frame for frame (the targets of
    # neighbouring frames must not be taken from the frame being shown).
    from blender_reldesc.core import LiveSession
    skel, motion = S.walk(40)
    verts, tris = S.grid(8.0, 4.0, 32, 16, origin=(-2.0, -2.0))
    F = len(motion)
    rising = np.repeat(verts[None], F, axis=0)
    rising[..., 2] += 0.002 * np.arange(F)[:, None]
    binding = bind(skel, motion, TriMesh(rising, tris))
    wave = rising.copy()
    wave[..., 2] += 0.08 * np.sin(verts[None, :, 0] - 0.2 * np.arange(F)[:, None])
    full = adapt(binding, TriMesh(wave, tris), solver_options={"segments": 0})
    live = LiveSession(binding)
    for f in range(F):
        np.testing.assert_allclose(live.pose(f, wave[f]), full.positions[f], atol=1e-9)


def test_finishing_poses_in_pieces_equals_one_piece(long_walk, monkeypatch):
    # Rig.finish and Rig.bone_error take many poses a piece at a time (ROWS_AT_ONCE); each row is
    # its own, so pieces of any size give the same poses, with held joints and twist limits that act
    # (to rounding: the twist limits' best-fit rotations take Newton steps or the SVD by batch size).
    from blender_reldesc.core import adaptation
    skel, motion, mesh, ranges, binding = long_walk
    rig = Rig(binding)
    rng = np.random.default_rng(3)
    frames = rng.integers(0, FRAMES, 600)
    poses = motion[frames] + rng.normal(scale=0.03, size=(600,) + motion.shape[1:])
    held = rng.random((600, len(skel))) < 0.1
    twist_held = rng.random((600, len(skel))) < 0.1
    whole = rig.finish(poses, frames, held, twist_held), rig.bone_error(poses, frames)
    # The poses are off enough for the limits and the lengths to move them.
    assert np.abs(whole[0] - poses).max() > 0.01 and whole[1].max() > 0.01
    monkeypatch.setattr(adaptation, "ROWS_AT_ONCE", 64)
    pieces = rig.finish(poses, frames, held, twist_held), rig.bone_error(poses, frames)
    np.testing.assert_allclose(pieces[0], whole[0], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(pieces[1], whole[1])


def test_live_collisions_measured_ahead_give_the_poses_measured_frame_by_frame(monkeypatch):
    # The live preview measures the targets of the frames it reads ahead in a few calls
    # (Collisions.prime); a frame then measures only the joints whose targets changed. The poses
    # are those of measuring every frame's targets on its own, over a narrow ridge 20 cm high that
    # the collisions push the feet out of (a lowered beam or hills leave them nothing to do).
    from blender_reldesc.core import LiveSession, adaptation
    skel, motion = S.walk(80)
    fine = TriMesh(*S.grid(2.8, 1.0, 112, 40, origin=(-0.5, -0.5)))
    binding = bind(skel, motion, fine)
    ridge = fine.frame(0).copy()
    ridge[:, 2] += 0.2 * np.exp(-((ridge[:, 0] - 0.6) ** 2) / 0.001)
    frames = list(range(60)) + [30, 31, 32]                            # played, then a jump
    primed = []
    prime = adaptation.Collisions.prime

    def counted(self, frames, targets):
        primed.append(len(frames))
        return prime(self, frames, targets)

    monkeypatch.setattr(adaptation.Collisions, "prime", counted)
    session = LiveSession(binding)
    ahead = np.array([session.pose(f, ridge) for f in frames])
    assert sum(primed) >= 60
    monkeypatch.setattr(adaptation.Collisions, "prime", lambda self, frames, targets: None)
    session = LiveSession(binding)
    alone = np.array([session.pose(f, ridge) for f in frames])
    np.testing.assert_array_equal(ahead, alone)
    # The collisions are in play: without them the poses differ.
    free = LiveSession(binding, collisions=False)
    assert np.abs(np.array([free.pose(f, ridge) for f in frames]) - alone).max() > 0.005
