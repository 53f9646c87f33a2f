"""Properties of bind/adapt: reproduction, rigid covariance, weights, sampling, terrain."""


import numpy as np

from blender_reldesc.core import Binding, TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.descriptors import frames_of

from core_helpers import random_rotation


def test_undeformed_scene_reproduces_the_source_motion(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    result = adapt(walk_binding, mesh)
    H = walk_binding.body_height
    assert np.abs(result.positions - motion).max() < 1e-4 * H
    assert np.abs(result.targets - motion).max() < 1e-4 * H
    assert result.bone_length_error.max() < 1e-6


def test_rigid_move_of_the_environment_moves_the_motion_rigidly(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    rng = np.random.default_rng(7)
    R = random_rotation(rng)
    t = rng.normal(size=3)
    result = adapt(walk_binding, mesh.with_vertices(mesh.vertices @ R.T + t))
    H = walk_binding.body_height
    assert np.abs(result.positions - (motion @ R.T + t)).max() < 1e-3 * H


def test_weights_are_non_negative_and_sum_to_one(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    coef = walk_binding.coefficients()
    assert np.all(coef.weight >= 0)
    F, J = motion.shape[:2]
    key = coef.frame.astype(np.int64) * J + coef.joint
    total = np.bincount(key, weights=coef.weight, minlength=F * J)
    normalised = coef.weight / total[key]
    sums = np.bincount(key, weights=normalised, minlength=F * J)[total > 0]
    np.testing.assert_allclose(sums, 1.0, atol=1e-12)
    # Every joint of a character walking on a floor is tied to it.
    assert np.all(total > 0)


def test_descriptors_are_denser_where_joints_come_close():
    # One joint skims the floor at 3 cm over x in [0,2]; another flies at 1 m over x in [3,5].
    from blender_reldesc.core import Skeleton
    F = 200
    x = np.linspace(0, 2, F)
    low = np.stack([x, np.zeros(F), np.full(F, 0.03)], 1)
    high = np.stack([x + 3, np.zeros(F), np.full(F, 1.0)], 1)
    motion = np.stack([low, high], 1)
    skel = Skeleton(["low", "high"], [-1, -1])
    mesh = TriMesh(*S.grid(6, 2, 120, 40, origin=(-0.5, -1)))
    b = bind(skel, motion, mesh, body_height=1.7)
    pts = np.einsum("nk,nkd->nd", b.barycentrics, mesh.vertices[mesh.triangles[b.triangles]])
    near_low = np.sum((pts[:, 0] > 0) & (pts[:, 0] < 2))
    near_high = np.sum((pts[:, 0] > 3) & (pts[:, 0] < 5))
    assert near_low > 3 * near_high > 0


def test_sampling_radius_is_geodesic_not_euclidean():
    # A thin wall: joints pass on both sides, 2 cm apart through the wall.
    # Euclidean sampling would share descriptors across it; geodesic must not.
    from blender_reldesc.core import Skeleton
    wall = S.box((0, 0, 1.0), (2.0, 0.02, 2.0), subdivisions=20)
    mesh = TriMesh(*wall)
    F = 50
    x = np.linspace(-0.5, 0.5, F)
    a = np.stack([x, np.full(F, 0.06), np.full(F, 1.0)], 1)
    b = np.stack([x, np.full(F, -0.06), np.full(F, 1.0)], 1)
    skel = Skeleton(["a", "b"], [-1, -1])
    binding = bind(skel, np.stack([a, b], 1), mesh, body_height=1.7)
    pts = np.einsum("nk,nkd->nd", binding.barycentrics, mesh.vertices[mesh.triangles[binding.triangles]])
    front, back = np.sum(pts[:, 1] > 0.005), np.sum(pts[:, 1] < -0.005)
    assert front > 0 and back > 0
    assert abs(front - back) <= max(2, 0.2 * front)


def test_feet_follow_a_sculpted_terrain_and_bones_keep_their_length():
    skel, motion = S.walk(150)
    verts, tris = S.grid(10.0, 4.0, 100, 40, origin=(-2.0, -2.0))
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    height = S.hills(amplitude=0.15, wavelength=3.0)
    sculpted = verts.copy()
    sculpted[:, 2] += height(verts[:, 0], verts[:, 1])
    result = adapt(binding, mesh.with_vertices(sculpted))
    assert result.bone_length_error.mean() <= 0.005
    for foot in ("LeftFoot", "RightFoot"):
        j = skel.index(foot)
        src = motion[:, j]
        want = src[:, 2] + height(src[:, 0], src[:, 1])
        got = result.positions[:, j, 2]
        # Feet follow the terrain: far closer to it than to the source height.
        moved = np.abs(height(src[:, 0], src[:, 1]))
        assert np.abs(got - want).mean() < 0.25 * moved.mean()
        assert np.abs(got - want).mean() < 0.03


def test_animated_environment_is_bound_frame_by_frame():
    # The floor rises by 30 cm during the source motion (an elevator): the
    # undeformed animated mesh reproduces the motion, and a deformed one that
    # rises by 30 cm more lifts the character by that much.
    skel, motion = S.walk(60)
    verts, tris = S.grid(6.0, 2.0, 30, 10, origin=(-1.0, -1.0))
    F = len(motion)
    lift = np.linspace(0, 0.3, F)
    anim = np.repeat(verts[None], F, axis=0)
    anim[:, :, 2] += lift[:, None]
    moved = motion.copy()
    moved[:, :, 2] += lift[:, None]
    mesh = TriMesh(anim, tris)
    binding = bind(skel, moved, mesh)
    H = binding.body_height
    assert np.abs(adapt(binding, mesh).positions - moved).max() < 1e-4 * H
    higher = anim.copy()
    higher[:, :, 2] += 0.3
    res = adapt(binding, mesh.with_vertices(higher))
    assert np.abs(res.positions - (moved + [0, 0, 0.3])).max() < 1e-3 * H


def test_binding_save_load_round_trips_exactly(tmp_path, walk_binding):
    path = tmp_path / "walk.npz"
    walk_binding.save(path)
    loaded = Binding.load(path)
    np.testing.assert_array_equal(loaded.triangles, walk_binding.triangles)
    np.testing.assert_array_equal(loaded.barycentrics, walk_binding.barycentrics)
    np.testing.assert_array_equal(loaded.motion, walk_binding.motion)
    np.testing.assert_array_equal(loaded.mesh.vertices, walk_binding.mesh.vertices)
    assert loaded.skeleton.names == walk_binding.skeleton.names
    assert loaded.body_height == walk_binding.body_height
    assert loaded.settings == walk_binding.settings
    again = Binding.load(walk_binding.to_bytes())
    a = adapt(again, walk_binding.mesh).positions
    np.testing.assert_array_equal(a, adapt(walk_binding, walk_binding.mesh).positions)


def test_longer_legs_are_reached_and_keep_the_feet_on_the_floor(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    lengths = skel.bone_lengths(motion).mean(axis=0)
    new = {name: 1.2 * lengths[skel.index(name)] for name in
           ("LeftLeg", "LeftFoot", "RightLeg", "RightFoot")}
    result = adapt(walk_binding, mesh, bone_lengths=new)
    assert result.bone_length_error.mean() < 0.002
    j = skel.index("LeftLeg")
    got = np.linalg.norm(result.positions[:, j] - result.positions[:, skel.parents[j]], axis=1)
    np.testing.assert_allclose(got, new["LeftLeg"], rtol=0.01)
    hips = skel.index("Hips")
    assert np.mean(result.positions[:, hips, 2] - motion[:, hips, 2]) > 0.03  # stands taller
    foot = skel.index("LeftToe")
    assert np.abs(result.positions[:, foot, 2] - motion[:, foot, 2]).mean() < 0.03


def test_affinity_override_holds_a_joint_to_its_target(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    raised = mesh.vertices.copy()
    raised[:, 2] += np.where(mesh.vertices[:, 2] < 0.5, 0.25, 0.0)        # raise the floor only
    deformed = mesh.with_vertices(raised)
    plain = adapt(walk_binding, deformed)
    held = adapt(walk_binding, deformed, affinity_override={"Hips": 1.0})
    j = skel.index("Hips")
    err_plain = np.linalg.norm(plain.positions[:, j] - plain.targets[:, j], axis=1).mean()
    err_held = np.linalg.norm(held.positions[:, j] - held.targets[:, j], axis=1).mean()
    assert np.all(held.affinity[:, j] == 1.0)
    assert err_held < 0.8 * err_plain


def test_zero_vertex_influence_ignores_a_surface(walk_scene, walk_binding):
    skel, motion, mesh, (floor, beam) = walk_scene
    moved = mesh.vertices.copy()
    moved[beam[0]:beam[1], 2] -= 0.3                                      # lower the beam
    deformed = mesh.with_vertices(moved)
    influence = np.ones(mesh.vertex_count)
    influence[beam[0]:beam[1]] = 0.0
    ignored = adapt(walk_binding, deformed, vertex_influence=influence)
    followed = adapt(walk_binding, deformed)
    head = skel.index("HeadTop")
    near = np.abs(motion[:, head, 0] - 2.0) < 0.3                          # under the beam
    assert near.any()
    # With the beam ignored the head keeps its height; with it, the head ducks.
    assert np.abs(ignored.positions[near, head, 2] - motion[near, head, 2]).max() < 0.01
    assert (motion[near, head, 2] - followed.positions[near, head, 2]).mean() > 0.05


def test_pins_hold_joints_where_they_are_put(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    F, J, _ = motion.shape
    pins = np.full((F, J, 3), np.nan)
    hand = skel.index("LeftHand")
    pins[:, hand] = motion[:, hand] + [0.0, 0.1, 0.1]
    result = adapt(walk_binding, mesh, pins=pins)
    assert np.abs(result.positions[:, hand] - pins[:, hand]).max() < 1e-9


def test_collisions_push_joints_out_of_a_surface():
    from blender_reldesc.core.adaptation import Collisions
    mesh = TriMesh(*S.grid(2, 2, 4, 4, origin=(-1, -1)))
    targets = np.array([[[0.0, 0.0, 0.1], [0.3, 0.2, 0.5]]])
    collide = Collisions(mesh, body_height=1.7)
    collide.set_targets([0], targets)
    p = collide(np.array([[0.0, 0.0, -0.05], [0.3, 0.2, 0.4]]), 0)
    np.testing.assert_allclose(p[0], [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(p[1], [0.3, 0.2, 0.4])


def test_a_joint_without_descriptors_gets_a_defined_target_and_zero_affinity():
    from blender_reldesc.core import Skeleton
    F = 20
    root = np.stack([np.linspace(0, 1, F), np.zeros(F), np.full(F, 0.5)], 1)
    far = root + [0.0, 0.0, -1.5]                       # behind (under) the floor: no facing descriptor
    motion = np.stack([root, far], 1)
    skel = Skeleton(["root", "far"], [-1, 0])
    mesh = TriMesh(*S.grid(3, 2, 6, 4, origin=(-1, -1)))
    b = bind(skel, motion, mesh, body_height=1.0)
    res = adapt(b, mesh.with_vertices(mesh.vertices + [0, 0, 0.2]))
    assert np.all(np.isfinite(res.positions)) and np.all(np.isfinite(res.targets))
    assert np.all(res.affinity[:, 1] == 0.0)
    np.testing.assert_allclose(res.positions[:, 1] - res.positions[:, 0], far - root, atol=1e-6)


def test_sparse_static_path_agrees_with_per_frame_path(walk_scene, walk_binding):
    skel, motion, mesh, _ = walk_scene
    rng = np.random.default_rng(5)
    bent = mesh.vertices + 0.05 * rng.normal(size=mesh.vertices.shape)
    static = mesh.with_vertices(bent)
    animated = mesh.with_vertices(np.repeat(bent[None], len(motion), axis=0))
    t_static, a_static = walk_binding.targets(static)
    t_anim, a_anim = walk_binding.targets(animated)
    np.testing.assert_allclose(t_static, t_anim, atol=1e-12)
    np.testing.assert_allclose(a_static, a_anim, atol=1e-12)
    # A few frames on their own give the same targets as the whole clip.
    some = np.array([0, 7, 40, len(motion) - 1])
    t_some, _ = walk_binding.targets(static, frames=some)
    np.testing.assert_allclose(t_some, t_static[some], atol=1e-12)


def test_coefficient_cache_budget_does_not_change_results(walk_scene, monkeypatch):
    from blender_reldesc.core.descriptors import weights as descriptors
    skel, motion, mesh, _ = walk_scene
    full = adapt(bind(skel, motion, mesh), mesh.with_vertices(mesh.vertices * 1.1))
    monkeypatch.setattr(descriptors, "CACHE_ENTRIES", 1000)
    monkeypatch.setattr(descriptors, "BLOCK_FRAMES", 16)
    binding = bind(skel, motion, mesh)
    small = adapt(binding, mesh.with_vertices(mesh.vertices * 1.1))
    assert binding.cache.entries <= 1000
    np.testing.assert_allclose(small.positions, full.positions, atol=1e-12)


def test_live_session_playing_forward_equals_adapt(walk_scene, walk_binding):
    from blender_reldesc.core import LiveSession
    skel, motion, mesh, _ = walk_scene
    bent = mesh.vertices.copy()
    bent[:, 2] += 0.1 * np.sin(mesh.vertices[:, 0])
    full = adapt(walk_binding, mesh.with_vertices(bent))
    live = LiveSession(walk_binding)
    for f in range(20):
        np.testing.assert_allclose(live.pose(f, bent), full.positions[f], atol=1e-12)
    assert live.exact_hits == 19
    # Jumping ahead without a cached predecessor solves a short window: close, not exact.
    far = live.pose(60, bent)
    assert np.abs(far - full.positions[60]).max() < 0.01 * walk_binding.body_height
    # An edit drops the cache.
    live.pose(61, bent + [0, 0, 0.05])
    assert 20 not in live._solved


def test_pieces_of_the_coefficient_table_equal_its_blocks(walk_scene):
    # A live preview computes the table a piece at a time (SHORT_SPAN frames), a bake a block at a
    # time: every frame's rows are the same either way, and a block made later drops its pieces.
    from blender_reldesc.core.descriptors import weights as descriptors
    skel, motion, mesh, _ = walk_scene
    binding = bind(skel, motion, mesh)
    cache = binding.cache
    J = len(skel)
    pieces = list(cache.covering(20, 41))                          # a short span: pieces only
    assert [p.start for p in pieces] == [16, 32] and not cache.blocks
    assert all(p.count == descriptors.SHORT_SPAN for p in pieces)
    block = cache.block(0)
    assert not cache.pieces and cache.entries == len(block.weight)
    for piece in pieces:
        for f in range(piece.start, piece.start + piece.count):
            a = slice(*piece.indptr[(f - piece.start) * J + np.array([0, J])])
            b = slice(*block.indptr[f * J + np.array([0, J])])
            np.testing.assert_array_equal(np.diff(piece.indptr[(f - piece.start) * J:(f - piece.start + 1) * J + 1]),
                                          np.diff(block.indptr[f * J:(f + 1) * J + 1]))
            for k in ("desc", "weight", "proximity"):
                np.testing.assert_array_equal(getattr(piece, k)[a], getattr(block, k)[b])
            np.testing.assert_array_equal(piece.affinity[(f - piece.start) * J:(f - piece.start + 1) * J],
                                          block.affinity[f * J:(f + 1) * J])
    assert next(cache.covering(30, 31)) is block                   # a block made serves short spans


def test_live_session_playing_across_pieces_and_blocks_equals_adapt(walk_scene, monkeypatch):
    # Playing reads the targets ahead (READ_AHEAD) from pieces of the table, across their ends and
    # the blocks' ends, and tests each step for a jump once: what adapt gives, frame for frame.
    from blender_reldesc.core import LiveSession
    from blender_reldesc.core.descriptors import weights as descriptors
    monkeypatch.setattr(descriptors, "BLOCK_FRAMES", 32)
    monkeypatch.setattr(descriptors, "SHORT_SPAN", 8)
    monkeypatch.setattr(descriptors, "PIECES_UP_TO", 40)
    skel, motion, mesh, _ = walk_scene
    bent = mesh.vertices.copy()
    bent[:, 2] += 0.1 * np.sin(mesh.vertices[:, 0])
    binding = bind(skel, motion, mesh)
    full = adapt(binding, mesh.with_vertices(bent))
    live = LiveSession(bind(skel, motion, mesh))
    for f in range(len(motion)):
        np.testing.assert_allclose(live.pose(f, bent), full.positions[f], atol=1e-12)
    assert live.exact_hits == len(motion) - 1
    assert live.binding.cache.pieces and not live.binding.cache.blocks


def _eq2_literal(binding, mesh, influence=None):
    """Eq. 1 and 2 as the paper writes them, frame by frame: (α, β, γ) of each joint in each
    descriptor's frame on the bind-time mesh, rebuilt in the descriptor's frame on ``mesh``."""
    F, J = binding.motion.shape[:2]
    coef = binding.coefficients()
    out = np.full((F, J, 3), np.nan)
    for f in range(F):
        d, n, t, b = frames_of(binding.mesh, binding.triangles, binding.barycentrics, f)
        d2, n2, t2, b2 = frames_of(mesh, binding.triangles, binding.barycentrics, f)
        for j in range(J):
            row = f * J + j
            k = slice(coef.indptr[row], coef.indptr[row + 1])
            i, w = coef.desc[k], coef.weight[k].astype(float)
            if influence is not None:
                w = w * influence[i]
            if not w.sum():
                continue
            rel = binding.motion[f, j] - d[i]
            abc = np.stack([np.einsum("ik,ik->i", rel, v[i]) for v in (n, t, b)], 1)          # Eq. 1
            point = d2[i] + abc[:, :1] * n2[i] + abc[:, 1:2] * t2[i] + abc[:, 2:] * b2[i]
            out[f, j] = (w[:, None] * point).sum(0) / w.sum()                                # Eq. 2
    return out


def test_targets_equal_eq1_and_eq2_written_out():
    # The table keeps weights only and evaluates Eq. 2 as one sparse product with each
    # descriptor's rotation; on a non-rigid edit, with painted influence and on an animated
    # mesh, that is the paper's sum of rebuilt relative vectors.
    skel, motion = S.walk(40)
    floor = S.grid(6.0, 4.0, 24, 16, origin=(-2.0, -2.0))
    box = S.box((1.0, 0.5, 0.3), (0.5, 0.4, 0.6), subdivisions=2)
    verts, tris, _ = S.merge(floor, box)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    rng = np.random.default_rng(3)
    bent = verts + 0.04 * rng.normal(size=verts.shape)
    bent[:, 2] += 0.2 * np.sin(verts[:, 0])
    edited = mesh.with_vertices(bent)
    influence = rng.uniform(0.2, 1.0, binding.descriptor_count)
    for inf in (None, influence):
        got, _ = binding.targets(edited, influence=inf)
        np.testing.assert_allclose(got, _eq2_literal(binding, edited, inf), rtol=0, atol=1e-9)
    waving = np.stack([bent + [0.0, 0.0, 0.1 * np.sin(0.3 * f)] for f in range(len(motion))])
    animated = mesh.with_vertices(waving)
    got, _ = binding.targets(animated)
    np.testing.assert_allclose(got, _eq2_literal(binding, animated), rtol=0, atol=1e-9)
    # Undeformed or moved rigidly, the targets are the source motion whatever the weights.
    got, _ = binding.targets(mesh)
    assert np.abs(got - motion).max() < 1e-12 * binding.body_height * 1e3
    R = random_rotation(rng)
    got, _ = binding.targets(mesh.with_vertices(verts @ R.T + [3.0, -1.0, 0.5]))
    assert np.abs(got - (motion @ R.T + [3.0, -1.0, 0.5])).max() < 1e-12 * binding.body_height * 1e3


def test_the_samplers_shortcuts_change_no_descriptor(monkeypatch):
    # The sampler's shortcuts (issue 40: a candidate near a descriptor on its own triangle, then
    # one with a path already known to a descriptor, is rejected before any search) against the
    # full test of every candidate, on a walk over stepping stones: flat, sculpted into hills, and
    # with a box on the way (paths around its edges are longer than the straight line).
    from blender_reldesc.core.descriptors.sampling import GeodesicSampler
    seen = []
    sample, all_far = GeodesicSampler.sample, GeodesicSampler._all_far

    def spy(self, tri, positions, radii, **kw):
        seen.append((self, tri, positions, radii))
        return sample(self, tri, positions, radii, **kw)

    searched = []

    def counted(self, *a):
        searched.append(1)
        return all_far(self, *a)

    monkeypatch.setattr(GeodesicSampler, "sample", spy)
    monkeypatch.setattr(GeodesicSampler, "_all_far", counted)
    skel, motion, verts, tris, _ = S.stepping_stones(120)
    hills = verts.copy()
    hills[:, 2] += S.hills(0.1, 2.0)(verts[:, 0], verts[:, 1])
    box_v, box_t = S.box((0.4, 0.0, 0.15), (0.3, 1.5, 0.3))
    with_box = S.merge((verts, tris), (box_v, box_t))
    for v, t in ((verts, tris), (hills, tris), with_box[:2]):
        bind(skel, motion, TriMesh(v, t))
        sampler, tri, positions, radii = seen[-1]
        counts = []
        results = []
        for options in ({}, dict(known_paths=False), dict(same_triangle_first=False, known_paths=False)):
            searched.clear()
            results.append(sample(sampler, tri, positions, radii, **options))
            counts.append(len(searched))
        fast = results[0]
        assert len(fast) > 10 and len(tri) > 20 * len(fast)
        for slow in results[1:]:
            np.testing.assert_array_equal(fast, slow)
        assert counts[0] < counts[1] < counts[2]            # each shortcut decided candidates


def test_targets_set_again_on_a_frame_measure_only_what_moved_and_agree_with_a_fresh_set():
    # A pair's live rounds set a frame's targets again with some joints moved: the joints that
    # did not move keep their measure, the moved ones are measured again; the pushes are those
    # of targets set once.
    from blender_reldesc.core.adaptation import Collisions
    mesh = TriMesh(*S.grid(2, 2, 8, 8, origin=(-1, -1)))
    rng = np.random.default_rng(3)
    first = rng.uniform(-0.8, 0.8, (1, 12, 3)) * [1.0, 1.0, 0.1]
    second = first.copy()
    second[0, [2, 5, 7], 2] -= 0.08                   # three targets moved, two of them under the floor
    again, fresh = Collisions(mesh, body_height=1.7, frames=4), Collisions(mesh, body_height=1.7, frames=4)
    again.set_targets([2], first)
    before = again._sd[2].copy()
    again.set_targets([2], second)
    assert not np.array_equal(before, again._sd[2])                  # the moved ones were measured again
    fresh.set_targets([2], second)
    np.testing.assert_array_equal(again._sd[2], fresh._sd[2])
    poses = rng.uniform(-0.8, 0.8, (1, 12, 3)) * [1.0, 1.0, 0.1]
    np.testing.assert_array_equal(again(poses.copy(), [2]), fresh(poses.copy(), [2]))
