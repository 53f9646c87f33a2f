"""Transfer to a novel object (thesis ch. 4), the parts built so far: ray casting, segmented
objects and their alignment, the open-space features and the matching of a key posture."""

import numpy as np
import pytest

from blender_reldesc.core import synthetic as S
from blender_reldesc.core.geometry.rays import RayCaster, ray_triangle_distance
from blender_reldesc.core.transfer import (Segmented, TransferError, align, label_parts, match_joints, match_parts,
                                           segment_distances, shared_segments, space_coverage)
from blender_reldesc.core.transfer.features import spherical_harmonic

from core_helpers import random_rotation


def _brute_rays(o, d, verts, tris):
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    T = len(tris)
    t = ray_triangle_distance(np.repeat(o, T, 0), np.repeat(d, T, 0),
                              *(np.tile(verts[tris[:, k]], (len(o), 1)) for k in range(3)))
    return t.reshape(len(o), T).min(axis=1)


@pytest.mark.parametrize("step", [None, 0.02, 0.3])
def test_ray_casting_agrees_with_brute_force(step):
    verts, tris = S.merge(S.grid(2.0, 2.0, 20, 20, origin=(-1, -1), height=S.hills(0.1, 0.8)),
                          S.box((0.2, 0.1, 0.3), (0.4, 0.3, 0.5), subdivisions=3))[:2]
    rng = np.random.default_rng(0)
    o = np.column_stack([rng.uniform(-1.5, 1.5, 400), rng.uniform(-1.5, 1.5, 400), rng.uniform(-0.3, 1.2, 400)])
    d = rng.normal(size=(400, 3))
    t, tri = RayCaster(verts, tris, step=step).cast(o, d)
    want = _brute_rays(o, d, verts, tris)
    assert np.array_equal(np.isinf(t), np.isinf(want)) and np.isfinite(t).sum() > 50
    np.testing.assert_allclose(t[np.isfinite(t)], want[np.isfinite(want)], atol=1e-12)
    hit = tri >= 0
    assert np.array_equal(hit, np.isfinite(t))


def test_segments_are_shared_aligned_and_matched():
    chair = Segmented(*S.seat_object("chair"))
    stool = Segmented(*S.seat_object("stool"))
    assert shared_segments(chair, stool) == ["seat", "legs"]
    # A known rigid motion of the chair is recovered from its three segment centres.
    rng = np.random.default_rng(1)
    R, t = random_rotation(rng), np.array([1.0, -2.0, 0.5])
    moved = chair.moved(R, t)
    R2, t2 = align(chair, moved)
    np.testing.assert_allclose(moved.vertices @ R2.T + t2, chair.vertices, atol=1e-9)
    # With two segments (seat and legs on one vertical line) only a turn about up and a shift.
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    R3, t3 = align(stool, stool.moved(turn, [2.0, 1.0, 0.0]))
    assert abs(R3[2, 2] - 1.0) < 1e-12
    np.testing.assert_allclose(stool.centres() , stool.moved(turn, [2.0, 1.0, 0.0]).centres() @ R3.T + t3,
                               atol=1e-9)
    # Unlabelled: connected parts, named after the template's by where they sit.
    parts = label_parts(chair.vertices, chair.triangles)
    assert len(parts.names) >= 2 and set(np.unique(parts.labels)) == set(range(len(parts.names)))
    named = match_parts(parts, label_parts(moved.vertices @ R2.T + t2, chair.triangles))
    assert np.array_equal(named.labels, parts.labels)


def test_objects_without_shared_labels_are_refused():
    chair = Segmented(*S.seat_object("chair"))
    v, t, labels, _ = S.seat_object("stool")
    other = Segmented(v, t, labels, ["top", "feet"])
    with pytest.raises(TransferError, match="share no segment"):
        shared_segments(chair, other)
    with pytest.raises(TransferError, match="one segment label per triangle"):
        Segmented(v, t, labels[:-1], ["seat", "legs"])


def test_segment_distances_are_the_closest_over_each_segment():
    chair = Segmented(*S.seat_object("chair"))
    rng = np.random.default_rng(2)
    p = rng.uniform(-0.8, 0.8, (50, 3)) + [0.0, 0.0, 0.5]
    got = segment_distances(p, chair, ["seat", "back"])
    from blender_reldesc.core.geometry import closest_point_on_triangles
    for k, name in enumerate(["seat", "back"]):
        tri = chair.triangles[chair.mask(name)]
        a, b, c = (np.repeat(chair.vertices[tri[:, i]][None], len(p), 0).reshape(-1, 3) for i in range(3))
        q = np.repeat(p, len(tri), axis=0)
        bary = closest_point_on_triangles(q, a, b, c)
        foot = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
        np.testing.assert_allclose(got[:, k], np.linalg.norm(q - foot, axis=1).reshape(len(p), -1).min(1),
                                   atol=1e-9)


def test_spherical_harmonics_are_the_textbook_ones_on_every_scipy():
    # scipy 1.17 removed sph_harm (azimuth first); sph_harm_y (polar first) came in 1.15. Whichever
    # this scipy has, the harmonics must be the closed forms, Condon-Shortley phase included.
    rng = np.random.default_rng(0)
    t, p = rng.uniform(0, np.pi, 50), rng.uniform(0, 2 * np.pi, 50)
    c, s, e = np.cos(t), np.sin(t), np.exp(1j * p)
    closed = {(0, 0): np.full_like(t, 0.5 / np.sqrt(np.pi)),
              (1, 0): np.sqrt(3 / (4 * np.pi)) * c,
              (1, 1): -np.sqrt(3 / (8 * np.pi)) * s * e,
              (1, -1): np.sqrt(3 / (8 * np.pi)) * s / e,
              (2, 0): np.sqrt(5 / (16 * np.pi)) * (3 * c ** 2 - 1),
              (2, 1): -np.sqrt(15 / (8 * np.pi)) * s * c * e,
              (2, 2): np.sqrt(15 / (32 * np.pi)) * s ** 2 * e ** 2}
    for (l, m), want in closed.items():
        np.testing.assert_allclose(spherical_harmonic(l, m, t, p), want, atol=1e-12, err_msg=f"Y_{l}^{m}")


def test_the_space_coverage_feature_ignores_place_scale_and_turns():
    verts, tris, _, _ = S.seat_object("chair")
    pts = np.array([[0.05, 0.0, 0.62], [0.6, 0.1, 0.3], [0.3, 0.4, 0.9]])
    a = space_coverage(pts, verts, tris)
    assert a.shape == (3, 15) and np.all(a >= 0) and np.all(np.isfinite(a))
    # Place and scale: the volume diameter function is normalised by the depths (up to rays
    # grazing an edge, which hit or miss by rounding: measured 0.1 %).
    moved = space_coverage(pts * 2.5 + [3.0, -1.0, 2.0], verts * 2.5 + [3.0, -1.0, 2.0], tris)
    assert np.abs(moved - a).max() <= 0.005 * np.abs(a).max()
    # A turn: the power spectrum is rotation invariant; the 30 x 30 ray grid is not, exactly.
    R = random_rotation(np.random.default_rng(3))
    b = space_coverage(pts @ R.T, verts @ R.T, tris)
    assert np.abs(a - b).max() <= 0.05 * np.abs(a).max()
    # The features tell a point above the seat from one under it.
    under = space_coverage(np.array([[0.05, 0.0, 0.2]]), verts, tris)
    assert np.linalg.norm(under - a[0]) > 0.1 * np.linalg.norm(a[0])


def _sitting():
    skel, motion, *_ = S.chair_scene(30)
    return skel, motion[0]


@pytest.mark.parametrize("kind, height, at", [("chair", 0.45, (0.05, 0.0)), ("stool", 0.45, (0.05, 0.0)),
                                              ("stool", 0.45, (2.0, 1.0)), ("chair", 0.35, (0.05, 0.0)),
                                              ("armchair", 0.45, (0.05, 0.0))])
def test_the_pelvis_of_a_sitting_pose_finds_the_new_seat(kind, height, at):
    # The joints near the chair matched around a new seat (aligned onto the chair): the pelvis
    # goes above the new seat, as high above it as it sat above the chair's; the feet stay
    # near the floor.
    skel, pose = _sitting()
    chair = Segmented(*S.seat_object("chair"))
    new = Segmented(*S.seat_object(kind, seat_height=height, at=at))
    names = shared_segments(chair, new)
    R, t = align(chair, new, names)
    aligned = new.moved(R, t)
    got = match_joints(pose, chair, aligned, names, step=0.025, reach=0.7)
    hips = got.target[skel.index("Hips")]
    seat_top = aligned.vertices[aligned.triangles[aligned.mask("seat")]].reshape(-1, 3)
    inside = np.all(np.abs(hips[:2] - 0.5 * (seat_top.min(0) + seat_top.max(0))[:2])
                    <= 0.5 * (seat_top.max(0) - seat_top.min(0))[:2] + 0.05)
    assert inside
    above = hips[2] - seat_top[:, 2].max()
    assert abs(above - (pose[skel.index("Hips"), 2] - 0.45)) < 0.04
    for foot in ("LeftFoot", "RightFoot"):
        assert got.target[skel.index(foot), 2] < 0.15


@pytest.fixture(scope="module")
def sitting():
    from blender_reldesc.core import TriMesh, bind
    skel, motion, *_ = S.chair_scene(60)
    cv, ct, cl, cn = S.seat_object("chair")
    floor = S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0))
    verts, tris, _ = S.merge(floor, (cv, ct))
    mesh = TriMesh(verts, tris)
    return skel, motion, mesh, np.arange(len(floor[1]), len(tris)), Segmented(cv, ct, cl, cn), bind(skel, motion, mesh)


def _inside_depth(points, seg):
    """How deep each point is inside the closed object (0 outside)."""
    from blender_reldesc.core.transfer.features import closest_on
    from blender_reldesc.core.transfer.matching import _outside
    d = closest_on(seg.vertices, seg.triangles, np.ones(len(seg.triangles), bool), points)[0]
    return np.where(_outside(points, seg), 0.0, d)


@pytest.mark.parametrize("kind, height, at", [("stool", 0.45, (0.05, 0.0)), ("chair", 0.35, (0.05, 0.0)),
                                              ("armchair", 0.45, (0.05, 0.0)), ("bench", 0.35, (0.05, 0.0)),
                                              ("stool", 0.45, (2.0, 1.0)), ("chair", 0.45, (1.05, 0.5))])
def test_sitting_is_transferred_to_another_seat(sitting, kind, height, at):
    # The checks: the pelvis sits on the new seat as it sat on the chair (within 2 cm),
    # the feet stay on the floor (within 2 cm of their height), nothing goes more than 1 cm
    # into the new object, and no frame-to-frame step beyond 1.2x the source's.
    from blender_reldesc.core.transfer import transfer
    skel, motion, mesh, template_tris, chair, binding = sitting
    new = Segmented(*S.seat_object(kind, seat_height=height, at=at))
    out = transfer(binding, mesh, template_tris, chair, new)
    p = out.result.positions
    hips = skel.index("Hips")
    seat = new.vertices[new.triangles[new.mask("seat")]].reshape(-1, 3)
    above_then = motion[:, hips, 2] - 0.45
    np.testing.assert_allclose(p[:, hips, 2] - seat[:, 2].max(), above_then, atol=0.02)
    assert np.all(np.abs(p[:, hips, :2] - 0.5 * (seat.min(0) + seat.max(0))[:2]) <= 0.5 * (seat.max(0) - seat.min(0))[:2])
    feet = [skel.index(n) for n in ("LeftFoot", "RightFoot", "LeftToe", "RightToe")]
    np.testing.assert_allclose(p[:, feet, 2], motion[:, feet, 2], atol=0.02)
    assert _inside_depth(p.reshape(-1, 3), new).max() <= 0.01
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    assert step(p) <= 1.2 * step(motion) + 1e-9


def test_a_chair_moved_rigidly_moves_the_sitting_with_it(sitting):
    from blender_reldesc.core.transfer import transfer
    skel, motion, mesh, template_tris, chair, binding = sitting
    c, s = np.cos(0.6), np.sin(0.6)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    t = np.array([0.8, -0.6, 0.0])
    out = transfer(binding, mesh, template_tris, chair, chair.moved(R, t))
    np.testing.assert_allclose(out.result.positions, motion @ R.T + t, atol=0.03)


def test_bad_transfers_say_why(sitting):
    from blender_reldesc.core.transfer import transfer
    skel, motion, mesh, template_tris, chair, binding = sitting
    with pytest.raises(TransferError, match="template object itself"):
        transfer(binding, mesh, template_tris, chair, chair)
    v, t, labels, _ = S.seat_object("stool")
    with pytest.raises(TransferError, match="share no segment"):
        transfer(binding, mesh, template_tris, chair, Segmented(v, t, labels, ["top", "feet"]))
    with pytest.raises(TransferError, match="(out of the character's reach|wrong units)"):
        transfer(binding, mesh, template_tris, chair, Segmented(v * 100.0, t, labels, ["seat", "legs"]))


def test_a_template_that_is_the_whole_environment_can_be_transferred():
    # Bound with the chair alone (no floor): the chair stays in the bound mesh, every descriptor
    # is re-embedded, and the joints collide with the stool alone.
    from blender_reldesc.core import TriMesh, bind
    from blender_reldesc.core.transfer import transfer
    skel, motion, *_ = S.chair_scene(20)
    cv, ct, cl, cn = S.seat_object("chair")
    binding = bind(skel, motion, TriMesh(cv, ct))
    stool = Segmented(*S.seat_object("stool"))
    out = transfer(binding, TriMesh(cv, ct), np.arange(len(ct)), Segmented(cv, ct, cl, cn), stool)
    hips = skel.index("Hips")
    seat = stool.vertices[stool.triangles[stool.mask("seat")]].reshape(-1, 3)
    np.testing.assert_allclose(out.result.positions[:, hips, 2] - seat[:, 2].max(), motion[:, hips, 2] - 0.45,
                               atol=0.02)


def test_centres_stacked_along_up_fix_no_turn():
    # A table's top centre sits over its legs' centre: two centres on a vertical line say
    # nothing about a turn (it came out turned 17° by rounding noise, the hand off the edge).
    table = Segmented(*S.table_object("rect", 1.0, (0.65, 0.0)))
    R, t = align(table, table.moved(np.eye(3), [0.85, 1.0, 0.0]))
    np.testing.assert_allclose(R, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(t, [-0.85, -1.0, 0.0], atol=1e-12)


def _scene_with(skel, motion, obj):
    from blender_reldesc.core import TriMesh, bind
    floor = S.grid(6.0, 6.0, 24, 24, origin=(-3.0, -3.0))
    verts, tris, _ = S.merge(floor, obj[:2])
    mesh = TriMesh(verts, tris)
    return bind(skel, motion, mesh), mesh, np.arange(len(floor[1]), len(tris)), Segmented(*obj)


@pytest.mark.parametrize("height, at", [(0.5, (1.5, 1.0)), (0.3, (-1.0, 0.5))])
def test_standing_on_a_box_is_transferred_to_a_round_pedestal(height, at):
    # The second scene: standing on a 0.3 m box -> a round pedestal elsewhere (taller,
    # or as tall). The feet keep their height over the top (2 cm) and stand on it; nothing goes
    # more than 1 cm into the pedestal; no step beyond 1.2x the source's.
    from blender_reldesc.core.transfer import transfer
    skel, motion, box = S.stand_scene(60)
    binding, mesh, template_tris, template = _scene_with(skel, motion, box)
    new = Segmented(*S.pedestal_object("round", at, height, 0.7))
    out = transfer(binding, mesh, template_tris, template, new)
    p = out.result.positions
    feet = [skel.index(n) for n in ("LeftFoot", "RightFoot", "LeftToe", "RightToe", "LeftToeEnd", "RightToeEnd")]
    np.testing.assert_allclose(p[:, feet, 2] - height, motion[:, feet, 2] - 0.3, atol=0.02)
    assert np.linalg.norm(p[:, feet, :2] - np.array(at), axis=-1).max() <= 0.35
    assert _inside_depth(p.reshape(-1, 3), new).max() <= 0.01
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    assert step(p) <= 1.2 * step(motion) + 1e-9


@pytest.mark.parametrize("size, at", [(0.9, (1.5, 1.0)), (1.0, (0.65, 0.0))])
def test_a_hand_on_a_table_edge_is_transferred_to_a_round_table(size, at):
    # The third scene: a hand resting on a table's edge -> a round table (its top
    # labelled like the table's; its column is no set of legs, so it is named otherwise). The
    # hand rests on the rim as on the edge: as high over the top (1 cm), within 10 cm of the
    # rim (the source: 4 cm in from the edge), the hand and its end together; the feet stay on
    # the floor (2 cm); nothing 1 cm into the table; no step beyond 1.2x the source's.
    from blender_reldesc.core.transfer import transfer
    skel, motion, table = S.table_scene(60)
    binding, mesh, template_tris, template = _scene_with(skel, motion, table)
    v, t, labels, _ = S.table_object("round", 1.0, at, size)
    new = Segmented(v, t, labels, ["top", "column"])
    out = transfer(binding, mesh, template_tris, template, new)
    p = out.result.positions
    hand, end = skel.index("RightHand"), skel.index("RightHandEnd")
    np.testing.assert_allclose(p[:, [hand, end], 2] - 1.0, motion[:, [hand, end], 2] - 1.0, atol=0.01)
    in_from_rim = size / 2 - np.linalg.norm(p[:, hand, :2] - np.array(at), axis=-1)
    assert np.all((in_from_rim > 0.0) & (in_from_rim < 0.10))
    feet = [skel.index(n) for n in ("LeftFoot", "RightFoot", "LeftToe", "RightToe")]
    np.testing.assert_allclose(p[:, feet, 2], motion[:, feet, 2], atol=0.02)
    assert _inside_depth(p.reshape(-1, 3), new).max() <= 0.01
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    assert step(p) <= 1.2 * step(motion) + 1e-9


def test_the_generated_standing_and_table_clips_keep_their_bones():
    for skel, motion, _ in (S.stand_scene(30), S.table_scene(30)):
        lengths = skel.bone_lengths(motion)
        np.testing.assert_allclose(lengths, lengths[:1].repeat(len(lengths), 0), atol=1e-12)
