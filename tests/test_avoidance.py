"""Free limbs kept out of obstacles brought into the scene (``contacts.avoidance``)."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.contacts import adapt_with_contacts
from blender_reldesc.core.contacts.avoidance import limb_collisions
from core_helpers import walk_under_a_slab


def _walk_past_a_box(convention, size=0.12, frames=150):
    """A generated walk of a ``convention_rig``, a box bound 6 m up and brought down after binding
    onto the right hand's place at the middle frame (where it swings): skeleton, motion, binding,
    the edited mesh and the box's corners."""
    sk, off, roles = S.convention_rig(convention)
    motion = S.locomotion(sk, off, roles, frames=frames)
    lo, hi = motion.reshape(-1, 3).min(0) - 1.5, motion.reshape(-1, 3).max(0) + 1.5
    floor = S.grid(hi[0] - lo[0], hi[1] - lo[1], int((hi[0] - lo[0]) / 0.2), int((hi[1] - lo[1]) / 0.2),
                   origin=(lo[0], lo[1]), z=motion[..., 2].min() - 0.005)
    p = motion[frames // 2, roles.index("hand.R")]
    verts, tris, (_, (a, b)) = S.merge(floor, S.box((p[0], p[1], 6.0), (size,) * 3, subdivisions=2))
    mesh = TriMesh(verts, tris)
    binding = bind(sk, motion, mesh)
    v = verts.copy()
    v[a:b, 2] += p[2] - 6.0
    return sk, motion, binding, mesh.with_vertices(v), (v[a:b].min(axis=0), v[a:b].max(axis=0))


def _frames_in(points, box, tolerance=0.0):
    """Frames with a joint more than ``tolerance`` inside the box."""
    lo, hi = box[0] + tolerance, box[1] - tolerance
    return int(np.all((points > lo) & (points < hi), axis=-1).any(axis=1).sum())


def _step(m):
    return float(np.linalg.norm(np.diff(m, axis=0), axis=-1).max())


# Unreal's forearm twist leaf, halfway along the forearm, grazes the box's corner 2.3 mm deep on one
# frame (the IK places the elbow and hand, not the bone between them).
@pytest.mark.parametrize("convention, graze", [("bvh", 0.002), ("mixamo", 0.002), ("rigify", 0.002), ("ue", 0.003)])
def test_a_swinging_hand_is_kept_out_of_a_box_brought_onto_its_path(convention, graze):
    """The hand (with Mixamo's fingers) swings through the box in the plain adapt, as in the
    source (the box was out of every descriptor's reach); with contacts no joint enters it more
    than 2 mm (``limb_collisions`` counts 1.75 mm for this body), the
    limb goes through it on at most a third of those frames (the forearm still clips the box's
    corner between its joints on 5 of 16), every contact keeps its status, bone lengths and steps as the
    source's."""
    sk, motion, binding, mesh, box = _walk_past_a_box(convention)
    plain, before = adapt_with_contacts(binding, mesh, reposition=False)
    assert _frames_in(plain.positions, box) >= 5
    phases = [o.phase for o in before]
    through = limb_collisions(binding, mesh, plain.positions, phases).sum()
    result, outcomes = adapt_with_contacts(binding, mesh)
    assert _frames_in(result.positions, box, graze) == 0            # (a grazing elbow: 0.9 mm)
    assert limb_collisions(binding, mesh, result.positions, phases).sum() <= through // 3
    assert [o.status for o in outcomes] == [o.status for o in before]
    assert not result.root_windows
    assert _step(result.positions) <= 1.2 * _step(motion)
    err = np.abs(sk.bone_lengths(result.positions) - sk.bone_lengths(motion))
    assert err.max() < 5e-3 * binding.body_height


def test_nothing_is_held_where_nothing_goes_through():
    """The same box left 6 m up (unedited) and moved rigidly with the motion: no limb goes through
    anything, and the motion is the plain adapt's, to the bit."""
    sk, motion, binding, mesh, box = _walk_past_a_box("bvh")
    assert not limb_collisions(binding, binding.mesh, motion, []).any()
    result, _ = adapt_with_contacts(binding, binding.mesh)
    assert np.array_equal(result.positions, adapt(binding, binding.mesh).positions)


def _raised_arm_under_a_slab(convention, frames=150, below=0.08):
    """``walk_under_a_slab`` with the right arm raised straight up over the walk's middle third
    (eased in and out over 10 frames): skeleton, motion, binding, the edited mesh, the slab's box."""
    from scipy.spatial.transform import Rotation

    def raise_arm(motion, sk, roles):
        shoulder, hand = roles.index("upperarm.R"), roles.index("hand.R")
        arm = np.r_[shoulder, sk.descendants(shoulder)].astype(int)
        t = np.arange(frames)
        a, b = frames // 3, 2 * frames // 3
        w = np.clip(np.minimum(t - a, b - t) / 10.0, 0.0, 1.0)
        for f in np.flatnonzero(w > 0):
            d = motion[f, hand] - motion[f, shoulder]
            d /= np.linalg.norm(d)
            axis = np.cross(d, [0.0, 0.0, 1.0])
            angle = np.arccos(np.clip(d[2], -1.0, 1.0)) * w[f]
            R = Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle).as_matrix()
            motion[f, arm] = motion[f, shoulder] + (motion[f, arm] - motion[f, shoulder]) @ R.T

    return walk_under_a_slab(convention, below, frames, raise_arm)[:5]


def _bones_in(sk, positions, box, tolerance=0.0):
    """Frames where a point along any bone (every 1/16 of it) is more than ``tolerance`` inside."""
    from blender_reldesc.core.contacts.balance import bone_samples
    pts = bone_samples(sk, positions, tuple(np.linspace(0.0, 1.0, 17)))
    return int(np.all((pts > box[0] + tolerance) & (pts < box[1] - tolerance), axis=-1)
               .reshape(len(positions), -1).any(axis=1).sum())


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue"])
def test_an_arm_raised_into_a_lowered_slab_stays_under_it_with_its_lengths(convention):
    """The arm raised through the slab while the trunk ducks under it: held under the slab by
    ``limb_pins`` with its top joint (the shoulder) held too, so that the solve that follows cannot
    stretch the arm the IK placed from it (the shoulder moved, an upper arm was 0.9-1.4 cm long on
    these rigs before). No bone in the slab, every contact kept, steps as the source's."""
    sk, motion, binding, mesh, box = _raised_arm_under_a_slab(convention)
    plain, before = adapt_with_contacts(binding, mesh, reposition=False, replan_root=False)
    assert _bones_in(sk, plain.positions, box) >= 10
    result, outcomes = adapt_with_contacts(binding, mesh)
    assert _bones_in(sk, result.positions, box, 0.002) == 0
    assert {o.status for o in outcomes} <= {"valid", "repositioned"}
    assert _step(result.positions) <= 1.2 * _step(motion)
    err = np.abs(sk.bone_lengths(result.positions) - sk.bone_lengths(motion))
    # Unreal's floor root: its "bone" to the pelvis is the pelvis's height, which the duck lowers.
    floor_root = [j for j in range(len(sk)) if sk.parents[j] >= 0 and sk.parents[sk.parents[j]] < 0
                  and convention == "ue"]
    err[:, floor_root] = 0.0
    assert err.max() < 5e-3 * binding.body_height



def test_a_limb_folded_into_the_surface_it_was_brought_under_is_laid_along_it():
    """``_laid_along`` on the case measured on a real walk (the numbers are its frame): a hand
    brought back under a slab 12 cm above the shoulder lands 10 cm from it, and with an upper arm of
    0.33 m and a forearm of 0.25 m the two-bone IK has only elbows 0.25 m up its line, in the slab.
    Laid along the slab, the arm's bones are clear of it and keep their lengths, and frames where
    the first answer was clear keep it."""
    from blender_reldesc.core.contacts.avoidance import CLEAR, _blocked, _laid_along
    from blender_reldesc.core.geometry.rays import RayCaster
    from blender_reldesc.core.skeleton.joints import two_bone
    V, T, _ = S.merge(S.box((1.8, -2.65, 1.533), (2.0, 2.0, 0.1), subdivisions=2))
    caster = RayCaster(V, T)
    F = 12
    positions = np.zeros((F, 4, 3))                               # clavicle, shoulder, elbow, hand
    positions[:, 0] = (1.78, -2.52, 1.33)
    positions[:, 1] = (1.83, -2.64, 1.361)
    positions[:, 2] = (1.95, -2.70, 1.62)
    positions[:, 3] = (1.688, -2.641, 1.767)                      # raised through the slab
    positions[:, :, 0] += np.linspace(0.0, 0.3, F)[:, None]       # walking on
    on = np.arange(F)
    end_w = np.ones(F)
    facing = np.tile([0.0, 0.0, -1.0], (F, 1))
    l1, l2 = 0.33, 0.252
    end = positions[:, 1] + (np.array([1.809, -2.671, 1.455]) - positions[0, 1])    # 10 cm from the shoulder
    hint = positions[:, 2] + facing * 2.0 * (l1 + l2)
    k, a = two_bone(positions[:, 1], hint, end, l1, l2)
    clear = CLEAR * 1.75
    assert (_blocked(caster, positions[:, 1], k, clear) | _blocked(caster, k, a, clear)).all()
    k2, a2 = _laid_along(caster, positions, on, (0, 1, 2, 3), k, a, end_w, facing, (l1, l2), clear)
    assert not (_blocked(caster, positions[:, 1], k2, clear) | _blocked(caster, k2, a2, clear)).any()
    np.testing.assert_allclose(np.linalg.norm(k2 - positions[:, 1], axis=1), l1, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(a2 - k2, axis=1), l2, atol=1e-9)
    # A run whose pinned limb is clear already is left as it was.
    low = positions.copy()
    low[..., 2] -= 1.0
    k3, a3 = two_bone(low[:, 1], low[:, 2], low[:, 3], l1, l2)
    k4, a4 = _laid_along(caster, low, on, (0, 1, 2, 3), k3, a3, end_w, facing, (l1, l2), clear)
    assert np.array_equal(k4, k3) and np.array_equal(a4, a3)
