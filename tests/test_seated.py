"""Seated supports (contacts paper §8.3, the chair and table of Fig. 12): the pelvis is an effector."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.contacts import adapt_with_contacts, detect_contacts, landed
from blender_reldesc.core.contacts.balance import centre_of_mass, segment_masses
from blender_reldesc.core.contacts.repositioning import _balance_excess


@pytest.fixture(scope="module")
def chair():
    skel, motion, verts, tris, parts = S.chair_scene(60)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh, body_height=1.75)

    def edited(name, shift):
        v = verts.copy()
        a, b = parts[name]
        v[a:b] += shift
        return mesh.with_vertices(v)
    return skel, motion, mesh, parts, binding, edited


def test_a_seated_pelvis_is_a_contact_and_a_walking_one_is_not(chair):
    skel, motion, mesh, parts, binding, _ = chair
    phases = detect_contacts(binding)
    names = sorted(p.name for p in phases)
    # The thighs rest on the seat too (by their middle; the knees that end them are past its edge).
    assert names == sorted(["Hips", "LeftHand", "RightHand", "LeftFoot", "LeftToe", "RightFoot", "RightToe",
                            "LeftLeg", "RightLeg"])
    assert all(p.limb is None for p in phases if p.name in ("LeftLeg", "RightLeg"))
    seat = next(p for p in phases if p.name == "Hips")
    assert seat.limb is None and (seat.start, seat.end) == (0, len(motion) - 1)
    assert abs(seat.clearance - 0.10) < 1e-6 and seat.normal[2] > 0.99
    walk_skel, walk, verts, tris, _ = S.stepping_stones(60)
    walking = detect_contacts(bind(walk_skel, walk, TriMesh(verts, tris)))
    assert "Hips" not in {p.name for p in walking}


def test_the_seat_is_part_of_the_support_polygon(chair):
    skel, motion, mesh, parts, binding, _ = chair
    f = 0
    com = centre_of_mass(skel, motion[f], segment_masses(skel, motion, 1.75))
    feet = motion[f, [skel.index(n) for n in ("LeftFoot", "RightFoot", "LeftToe", "RightToe")]]
    assert _balance_excess(com, feet, (0, 0, 1.0)) > 0.1            # sitting back: not over the feet
    with_seat = np.vstack([feet, motion[f, skel.index("Hips")]])
    assert _balance_excess(com, with_seat, (0, 0, 1.0)) == 0.0
    _, outcomes = adapt_with_contacts(binding, mesh)
    assert all(o.status == "valid" for o in outcomes)


def test_a_lowered_seat_is_followed(chair):
    skel, motion, mesh, parts, binding, edited = chair
    low = edited("seat", [0.0, 0.0, -0.10])
    result, outcomes = adapt_with_contacts(binding, low)
    seat = next(o for o in outcomes if o.phase.name == "Hips")
    assert seat.status == "repositioned" and abs(seat.new_position[2] - 0.35) < 1e-6
    hips = result.positions[:, skel.index("Hips"), 2]
    assert np.abs(hips - 0.45).max() < 0.01                           # on the lowered seat, its sole kept
    # The thighs go down with it: the knees ending them too.
    for knee in ("LeftLeg", "RightLeg"):
        o = next(o for o in outcomes if o.phase.name == knee)
        assert o.status == "repositioned"
        j = skel.index(knee)
        np.testing.assert_allclose(result.positions[:, j, 2], motion[:, j, 2] - 0.10, atol=0.01)
    assert all(o.status != "unresolved" for o in outcomes)


def test_a_removed_armrest_puts_the_hand_on_the_chair(chair):
    """The armrest is taken away (moved 3 m down, its painted influence 0, as a user removes a
    surface from the relationship): the hand finds another surface, as in the paper's Fig. 12."""
    skel, motion, mesh, parts, binding, edited = chair
    gone = edited("armrest.L", [0.0, 0.0, -3.0])
    influence = np.ones(len(mesh.vertices))
    influence[slice(*parts["armrest.L"])] = 0.0
    result, outcomes = adapt_with_contacts(binding, gone, vertex_influence=influence)
    hand = next(o for o in outcomes if o.phase.name == "LeftHand")
    assert hand.status == "repositioned" and hand.reason == "unsupported"
    assert landed(result.positions, gone, hand.phase, 0.015 * 1.75)
    a, b = parts["seat"]
    seat = gone.vertices[a:b]
    assert np.all(hand.new_position >= seat.min(axis=0) - 1e-6) and np.all(hand.new_position <= seat.max(axis=0) + 1e-6)
    assert all(o.status != "unresolved" for o in outcomes)


@pytest.fixture(scope="module")
def kneel():
    skel, motion, verts, tris = S.kneel_scene(60)
    mesh = TriMesh(verts, tris)
    return skel, motion, mesh, bind(skel, motion, mesh)


def test_kneeling_knees_are_supports_and_walking_ones_are_not(kneel):
    # The thighs are effectors by the knees at their ends (§8.3: pelvis and thighs rest on
    # surfaces): a kneeling pose has one knee phase per leg over the whole clip; a walk none.
    skel, motion, mesh, binding = kneel
    phases = detect_contacts(binding)
    knees = [p for p in phases if p.name in ("LeftLeg", "RightLeg")]
    assert sorted(p.name for p in knees) == ["LeftLeg", "RightLeg"]
    assert all(p.limb is None and (p.start, p.end) == (0, len(motion) - 1) for p in knees)
    sk, walk = S.walk(120)
    walking = bind(sk, walk, TriMesh(*S.grid(10.0, 4.0, 20, 8, origin=(-2.0, -2.0))))
    assert not [p for p in detect_contacts(walking) if p.name in ("LeftLeg", "RightLeg")]


def test_kneeling_knees_follow_a_raised_mat_and_count_for_balance(kneel):
    # A mat under the knees raised 4 cm (the feet behind stay on the floor): the knees are held
    # on it (repositioned, like a seat that moved); and without the knees the kneeling body
    # would be out of balance (its centre of mass is over the knees, not the feet behind).
    skel, motion, mesh, binding = kneel
    v = mesh.vertices.copy()
    under = (np.abs(v[:, 0]) < 0.3) & (np.abs(v[:, 1]) < 0.4)
    v[under, 2] += 0.04
    result, outcomes = adapt_with_contacts(binding, mesh.with_vertices(v))
    for name in ("LeftLeg", "RightLeg"):
        o = next(o for o in outcomes if o.phase.name == name)
        assert o.status in ("valid", "repositioned")
        j = skel.index(name)
        np.testing.assert_allclose(result.positions[:, j, 2], motion[:, j, 2] + 0.04, atol=0.01)
    masses = segment_masses(skel, motion, binding.body_height)
    com = centre_of_mass(skel, motion[0], masses)
    feet = motion[0, [skel.index(n) for n in ("LeftFoot", "RightFoot", "LeftToe", "RightToe")]]
    knees = motion[0, [skel.index("LeftLeg"), skel.index("RightLeg")]]
    assert _balance_excess(com, feet, (0.0, 0.0, 1.0)) > 0.1
    assert _balance_excess(com, np.vstack([feet, knees]), (0.0, 0.0, 1.0)) == 0.0


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
def test_the_knees_ending_the_thighs_are_found_on_every_rig_convention(convention):
    # The thigh's end is found from the structure (halfway down each leg's chain), not from
    # names: Rigify's split thigh counts as one bone, Unreal's twist leaves are not knees.
    from blender_reldesc.core.contacts.repositioning import default_effectors, thigh_ends
    sk, off, roles = S.convention_rig(convention)
    motion = S.posed_motion(sk, off, roles, frames=10, limbs="bent", speed=0.0)
    binding = bind(sk, motion, TriMesh(*S.grid(4.0, 4.0, 8, 8, origin=(-2.0, -2.0), z=motion[..., 2].min() - 0.01)))
    knees = thigh_ends(binding, default_effectors(sk, motion, binding.body_height))
    shins = {j for j, r in enumerate(roles) if r.startswith("shin")}
    assert len(knees) == 2 and set(knees) == shins
