"""Root replanning (contacts paper §7): an RRT over the root when contacts stay invalid."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.contacts import adapt_with_contacts, contact_report
from blender_reldesc.core.contacts import replanning as RP
from blender_reldesc.core.contacts.balance import bone_samples
from blender_reldesc.core.geometry import Collider


@pytest.fixture(scope="module")
def ceiling():
    skel, motion, verts, tris, (a, b), centre = S.ceiling_walk(120)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)

    def lowered(z):
        v = verts.copy()
        v[a:b, 2] += z - centre[2]
        return mesh.with_vertices(v)
    return skel, motion, binding, lowered, (a, b)


def _trunk_in_slab(skel, positions, mesh, slab):
    """Frames where a point along a bone of the trunk (hips, spine, neck, head) is inside the slab."""
    a, b = slab
    v = mesh.vertices[a:b]
    lo, hi = v.min(axis=0), v.max(axis=0)
    trunk = [skel.index(n) for n in ("Spine", "Spine1", "Spine2", "Neck", "Head")]
    child = np.flatnonzero(skel.parents >= 0)
    k = np.flatnonzero(np.isin(child, trunk))
    pts = bone_samples(skel, positions, tuple(np.linspace(0, 1, 9)))
    pts = pts.reshape(len(positions), 9, -1, 3)[:, :, k]
    inside = np.all((pts > lo) & (pts < hi), axis=-1)
    return np.flatnonzero(inside.any(axis=(1, 2)))


def _largest_step(m):
    return float(np.linalg.norm(np.diff(m, axis=0), axis=-1).max())


def test_an_inserted_ceiling_lowers_the_root_and_keeps_every_contact(ceiling):
    skel, motion, binding, lowered, slab = ceiling
    mesh = lowered(1.6)
    plain, before = adapt_with_contacts(binding, mesh, replan_root=False)
    assert len(_trunk_in_slab(skel, plain.positions, mesh, slab)) > 10     # the head goes through it
    assert {o.reason for o in before if o.status == "unresolved"} == {"collision"}
    result, outcomes = adapt_with_contacts(binding, mesh)
    assert [o.status for o in outcomes] == ["valid"] * len(outcomes)
    assert len(_trunk_in_slab(skel, result.positions, mesh, slab)) == 0
    # The hips go down under the slab only, and come back: the clip's ends are the plain adapt's.
    hips = skel.index("Hips")
    drop = plain.positions[:, hips, 2] - result.positions[:, hips, 2]
    assert drop.max() > 0.15
    assert np.abs(drop[:15]).max() < 0.01 and np.abs(drop[-15:]).max() < 0.01
    assert _largest_step(result.positions) <= 1.2 * _largest_step(motion)
    rows, counts = contact_report(outcomes)
    assert counts["unresolved"] == 0


def test_the_same_seed_gives_the_same_motion(ceiling):
    skel, motion, binding, lowered, slab = ceiling
    mesh = lowered(1.6)
    r1, _ = adapt_with_contacts(binding, mesh, seed=3)
    r2, _ = adapt_with_contacts(binding, mesh, seed=3)
    assert np.array_equal(r1.positions, r2.positions)


def test_a_ceiling_at_hip_height_has_no_root_path(ceiling):
    skel, motion, binding, lowered, slab = ceiling
    mesh = lowered(1.0)
    _, outcomes = adapt_with_contacts(binding, mesh)
    reasons = {o.reason for o in outcomes if o.status == "unresolved"}
    assert "no root path" in reasons


def test_a_plan_is_valid_on_every_frame_and_joins_the_adapted_root(ceiling):
    skel, motion, binding, lowered, slab = ceiling
    mesh = lowered(1.6)
    plain, outcomes = adapt_with_contacts(binding, mesh, replan_root=False)
    bad = [i for i, o in enumerate(outcomes) if o.status == "unresolved"]
    phases = [o.phase for o in outcomes]
    captured = {}
    real = RP.plan_root

    def keep(reach, a, b, F, **k):
        plan = real(reach, a, b, F, **k)
        captured.setdefault("runs", []).append((reach, plan))
        return plan
    RP.plan_root = keep
    try:
        plans, pins = RP.replan_windows(binding, mesh, phases, outcomes, plain, None, bad)
    finally:
        RP.plan_root = real
    reach, plan = captured["runs"][-1]
    assert plan is not None
    assert reach.valid(plan.frames, plan.offset, plan.yaw).all()
    speed = np.linalg.norm(np.diff(plan.offset, axis=0), axis=1).max()
    assert speed <= 1.5 * RP.SPEED * binding.body_height / 30.0 + 1e-12
    if plan.frames[0] > 0:
        assert np.allclose(plan.offset[0], 0.0) and plan.yaw[0] == 0.0
    if plan.frames[-1] < len(motion) - 1:
        assert np.allclose(plan.offset[-1], 0.0) and plan.yaw[-1] == 0.0
    assert np.isnan(pins).any() and not np.isnan(pins[plan.frames[len(plan.frames) // 2], skel.index("Head")]).any()


def test_voxel_distances_agree_with_the_exact_query():
    skel, motion, verts, tris, _, _ = S.ceiling_walk(30, ceiling=1.6)
    mesh = TriMesh(verts, tris)
    col = Collider(mesh.vertices, mesh.normals(0), mesh.triangles, mesh.valid, 0.5)
    size = 0.02
    fast = RP._VoxelDistance(col, size)
    rng = np.random.default_rng(0)
    pts = rng.uniform([0, -1, 0.0], [5, 1, 2.0], size=(3000, 3))
    got = fast(pts)
    again = fast(pts[::-1])[::-1]                          # from the cache
    exact = col.closest(pts)[0]
    finite = np.isfinite(exact) & np.isfinite(got)
    assert np.array_equal(got, again)
    assert np.abs(got[finite] - exact[finite]).max() <= size * np.sqrt(3) / 2 + 1e-9


def test_legs_through_a_thin_slab_at_knee_height_are_a_collision(ceiling):
    """A 10 cm slab brought down to knee height: no point along a leg is 0.02 body heights
    inside it on every frame, but the shins pass through it; the contacts say so."""
    skel, motion, binding, lowered, slab = ceiling
    _, outcomes = adapt_with_contacts(binding, lowered(0.45), replan_root=False)
    assert {o.reason for o in outcomes if o.status == "unresolved"} == {"collision"}


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
def test_every_rig_convention_ducks_under_a_slab_brought_onto_its_head(convention):
    """A standing pose held still, a slab bound 6 m up brought down through the head: the root is
    replanned on every convention (Rigify's pelvis bones, Unreal's floor root and twist leaves,
    names no matcher knows) and every foot contact is kept."""
    sk, off, roles = S.convention_rig(convention)
    motion = np.repeat(S.posed_motion(sk, off, roles, frames=40, limbs="straight", speed=0.0)[:1], 40, axis=0)
    lo, hi = motion.reshape(-1, 3).min(0) - 1.5, motion.reshape(-1, 3).max(0) + 1.5
    floor = S.grid(hi[0] - lo[0], hi[1] - lo[1], 20, 20, origin=(lo[0], lo[1]), z=motion[..., 2].min() - 0.005)
    c = motion[0, 0]
    verts, tris, (_, (a, b)) = S.merge(floor, S.box((c[0], c[1], 6.0), (1.5, 1.5, 0.1), subdivisions=3))
    mesh = TriMesh(verts, tris)
    binding = bind(sk, motion, mesh)
    top = motion[..., 2].max()
    v = verts.copy()
    v[a:b, 2] += (top - 0.2) - 6.0                                     # the slab through the neck
    plain, before = adapt_with_contacts(binding, mesh.with_vertices(v), replan_root=False)
    assert before and all(o.reason == "collision" for o in before)
    result, outcomes = adapt_with_contacts(binding, mesh.with_vertices(v))
    # Kept, or re-placed after the plan (on Rigify one toe stays unreachable: see the closing note).
    assert sum(o.status == "unresolved" for o in outcomes) <= 1
    assert result.positions[..., 2].max() < top - 0.2 - 0.05 - 0.02          # under the slab's underside
    lengths = sk.bone_lengths(motion)
    # Pinned hips and re-placed feet leave a leg a few millimetres short at worst.
    assert np.abs(sk.bone_lengths(result.positions) - lengths).max() < 5e-3 * binding.body_height
