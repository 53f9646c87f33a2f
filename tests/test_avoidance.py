"""Free limbs kept out of obstacles brought into the scene (``contacts.avoidance``)."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.contacts import adapt_with_contacts
from blender_reldesc.core.contacts.avoidance import limb_collisions


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
