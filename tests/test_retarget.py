"""Retargeting (``core.retarget``): bone maps, the transfer, contacts kept, bad input."""

import json

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from blender_reldesc.core import InputError, Skeleton, TriMesh
from blender_reldesc.core import retarget as R
from blender_reldesc.core import synthetic as S

CONVENTIONS = ("bvh", "mixamo", "rigify", "ue", "arbitrary")
ANCHORS = ("hips", "neck", "head") + tuple(r + s for s in R.SIDES for r in R.SIDE_ROLES)


@pytest.fixture(scope="module")
def walk():
    return S.walk(90)[1]


def _role_joints(convention):
    """{anchor role: joint} of a generated rig, from its own role list."""
    sk, _, roles = S.convention_rig(convention)
    rename = {"upperarm": "upperarm", "forearm": "forearm"}
    out = {}
    for j, r in enumerate(roles):
        base, _, side = r.partition(".")
        key = rename.get(base, base) + ("." + side if side else "")
        if key in ANCHORS:
            out[key] = j
    return sk, out


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("arms", ["down", "A", "T"])
def test_anchors_found_by_name_and_by_structure_alike(convention, arms):
    sk, rest = S.convention_rest(convention, arms=arms)
    _, want = _role_joints(convention)
    found, how = R.find_roles(sk, rest)
    assert how == ("structure" if convention == "arbitrary" else {"bvh": "bvh"}.get(convention, how))
    assert found == want
    assert R.find_roles(sk, rest, "structure")[0] == want


@pytest.mark.parametrize("a", CONVENTIONS)
@pytest.mark.parametrize("b", CONVENTIONS)
def test_maps_between_every_two_conventions_pair_the_same_roles(a, b):
    sa, ra = S.convention_rest(a)
    sb, rb = S.convention_rest(b, legs=1.1, arms="T")
    m = R.map_bones(sa, ra, sb, rb)
    m.check(sa, sb)
    _, ja = _role_joints(a)
    _, jb = _role_joints(b)
    for role in ANCHORS:
        assert m.bones[sb.names[jb[role]]] == sa.names[ja[role]], role
    # No source joint plays two targets; the spine pairs joint by joint (both have three).
    assert len(set(m.bones.values())) == len(m.bones)
    assert len(m.bones) >= 25


def test_an_unedited_retarget_onto_the_same_skeleton_is_the_source(walk):
    sk, rest, motion = S.convention_clip("mixamo", walk)
    out = R.retarget(sk, rest, motion, sk, rest)
    assert out.bone_map.source == "same"
    np.testing.assert_allclose(out.positions, motion, atol=1e-5)
    mesh = TriMesh(*S.grid(8.0, 4.0, 16, 8, origin=(-2.0, -2.0)))
    np.testing.assert_allclose(R.retarget(sk, rest, motion, sk, rest, mesh).positions, motion, atol=1e-5)


@pytest.mark.parametrize("source,target,legs,arms", [
    ("bvh", "mixamo", 1.15, "down"), ("mixamo", "ue", 0.85, "T"), ("rigify", "arbitrary", 1.15, "A"),
    ("ue", "rigify", 0.85, "down"), ("arbitrary", "bvh", 1.0, "A")])
def test_longer_and_shorter_legs_keep_planted_feet_on_the_ground(walk, source, target, legs, arms):
    sk, rest, motion = S.convention_clip(source, walk)
    tsk, trest = S.convention_rest(target, legs=legs, arms=arms)
    out = R.retarget(sk, rest, motion, tsk, trest)
    assert out.stride == pytest.approx(R.leg_length(tsk, trest, R.find_roles(tsk, trest)[0]) /
                                       R.leg_length(sk, rest, R.find_roles(sk, rest)[0]))
    m = R.measure(sk, rest, motion, tsk, trest, out.positions, out.bone_map)
    assert m["stance_samples"] > 40
    assert m["planted_within"] >= 0.99
    assert m["stance_slide"] <= m["source_stance_slide"] + 0.02
    assert m["pose_similarity"] >= 0.95                # legs of other lengths bend otherwise
    # Bone lengths are the target's.
    lengths = tsk.bone_lengths(out.positions)
    want = tsk.bone_lengths(trest[None])[0]
    hips = R.find_roles(tsk, trest)[0]["hips"]
    rigid = tsk.parents >= 0
    rigid[hips] = False                          # under a root on the floor (Unreal's): keyed by location
    assert np.abs(lengths - want)[:, rigid].max() < 0.01 * np.ptp(trest[:, 2])
    # The naive retarget (turns copied, hips scaled) keeps fewer of them.
    naive = R.naive(sk, rest, motion, tsk, trest, out.bone_map)
    assert R.measure(sk, rest, motion, tsk, trest, naive, out.bone_map)["planted_within"] <= m["planted_within"]


def test_a_rest_pose_apart_from_the_source_does_not_change_the_motion(walk):
    # T-pose target rest against a source whose arms hang: directions follow the source.
    sk, rest, motion = S.convention_clip("bvh", walk)
    tsk, trest = S.convention_rest("bvh", arms="T")
    out = R.retarget(sk, rest, motion, tsk, trest)
    assert R.measure(sk, rest, motion, tsk, trest, out.positions, out.bone_map)["pose_similarity"] >= 0.999
    for name in ("LeftElbow", "LeftWrist", "RightWrist"):
        j = sk.index(name)
        p = sk.parents[j]
        a = motion[:, j] - motion[:, p]
        b = out.positions[:, j] - out.positions[:, p]
        cos = np.einsum("fi,fi->f", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        assert cos.min() > 0.99, name


def test_twist_is_carried_from_the_source_bones(walk):
    sk, rest, motion = S.convention_clip("bvh", walk)
    turns = R.source_turns_from_positions(sk, rest, motion)
    # Twist the left forearm about its own bone by a varying angle: positions do not change.
    j = sk.index("LeftElbow")
    axis = rest[sk.index("LeftWrist")] - rest[j]
    angle = np.linspace(0.0, 1.2, len(motion))
    twisted = turns.copy()
    twisted[:, j] = turns[:, j] @ Rotation.from_rotvec(angle[:, None] * axis / np.linalg.norm(axis)).as_matrix()
    tsk, trest = S.convention_rest("ue", arms="T")
    plain = R.retarget(sk, rest, motion, tsk, trest, source_turns=turns)
    out = R.retarget(sk, rest, motion, tsk, trest, source_turns=twisted)
    np.testing.assert_allclose(out.positions, plain.positions, atol=1e-9)
    t = tsk.index("lowerarm_l")
    extra = np.swapaxes(plain.turns[:, t], 1, 2) @ out.turns[:, t]
    got = Rotation.from_matrix(extra).as_rotvec()
    bone = trest[tsk.index("hand_l")] - trest[t]
    np.testing.assert_allclose(got @ (bone / np.linalg.norm(bone)), angle, atol=1e-6)


def test_a_bump_under_the_target_is_stepped_on(walk):
    sk, rest, motion = S.convention_clip("mixamo", walk)
    tsk, trest = S.convention_rest("rigify", legs=1.15)
    v, t = S.grid(8.0, 4.0, 160, 80, origin=(-2.0, -2.0))
    flat = TriMesh(v, t)
    bumped = v.copy()
    centre = motion[len(motion) // 2, 0, :2]
    bumped[:, 2] += 0.12 * np.exp(-np.sum((v[:, :2] - centre) ** 2, axis=1) / (2 * 0.35 ** 2))
    bump = TriMesh(bumped, t)
    out = R.retarget(sk, rest, motion, tsk, trest, flat, edited=bump)
    assert out.stride == 1.0                                         # an environment keeps the footsteps
    m = R.measure(sk, rest, motion, tsk, trest, out.positions, out.bone_map, ground=flat, ground_now=bump)
    assert m["planted_within"] >= 0.99


def test_without_an_environment_the_footsteps_spread_with_the_legs(walk):
    sk, rest, motion = S.convention_clip("bvh", walk)
    tsk, trest = S.convention_rest("bvh", legs=1.15)
    scaled = R.retarget(sk, rest, motion, tsk, trest)
    kept = R.retarget(sk, rest, motion, tsk, trest, stride="kept")
    hips = sk.index("Hips")
    travel = lambda p: np.linalg.norm(p[-1, hips, :2] - p[0, hips, :2])    # noqa: E731
    assert travel(kept.positions) == pytest.approx(travel(motion), rel=0.03)
    assert travel(scaled.positions) == pytest.approx(scaled.stride * travel(motion), rel=0.03)


def test_a_lying_bvh_rest_is_replaced_by_a_standing_pose_from_the_clip_wherever_it_starts(walk):
    sk, rest, motion = S.convention_clip("mixamo", walk)
    lying = rest.copy()
    lying[:, [0, 2]] = lying[:, [2, 0]]                              # every bone along X
    assert not R.stands(sk, lying)
    tsk, trest = S.convention_rest("ue")
    roles = R.find_roles(sk, rest)[0]
    feet = [roles[r + side] for side in R.SIDES for r in ("foot", "toe")]
    floor = R.floor_height(sk, motion, roles)
    first = None
    for start in (0, 10, 20):                                       # a clip that starts mid-stride
        clip = motion[start:]
        ref, turns = R.reference_pose(sk, lying, clip)
        assert R.stands(sk, ref)
        # Its feet flat (ankle over toe as they stand in the clip); the turns from it play the clip.
        stand = R.standing_height(clip, feet, floor)
        np.testing.assert_allclose(ref[feet[0::2], 2] - ref[feet[1::2], 2], stand[0::2] - stand[1::2], atol=0.005)
        np.testing.assert_allclose(sk.bone_lengths(ref[None])[0], sk.bone_lengths(clip[:1])[0], atol=1e-9)
        a = R.retarget(sk, rest, clip, tsk, trest)
        b = R.retarget(sk, lying, clip, tsk, trest)
        m = R.measure(sk, lying, clip, tsk, trest, b.positions, b.bone_map)
        assert m["planted_within"] >= 0.99 and m["pose_similarity"] >= 0.999
        np.testing.assert_allclose(b.positions, a.positions, atol=0.05)
        # The same retarget whichever frame the clip starts at (the footsteps kept where they are:
        # spread, they spread from the clip's first frame).
        kept = R.retarget(sk, lying, clip, tsk, trest, stride="kept").positions
        if first is None:
            first = kept
        else:
            np.testing.assert_allclose(kept, first[start:], atol=0.01)


def test_a_bone_map_survives_json_and_names_what_is_wrong():
    sa, ra = S.convention_rest("bvh")
    sb, rb = S.convention_rest("ue")
    m = R.map_bones(sa, ra, sb, rb)
    back = R.BoneMap.from_json(m.to_json())
    assert back.bones == m.bones
    back.check(sa, sb)
    with pytest.raises(InputError, match="target bone 'nope'"):
        R.BoneMap({"nope": "Hips"}).check(sa, sb)
    with pytest.raises(InputError, match="source bone 'Nope'"):
        R.BoneMap({"pelvis": "Nope"}).check(sa, sb)
    with pytest.raises(InputError, match="mapped to two target bones"):
        R.BoneMap({"pelvis": "Hips", "spine_01": "Hips"}).check(sa, sb)
    with pytest.raises(InputError, match="names target bone 'pelvis' twice"):
        R.BoneMap.from_json('{"bones": {"pelvis": "Hips", "pelvis": "Chest"}}')
    with pytest.raises(InputError, match="not valid JSON"):
        R.BoneMap.from_json("{bones")
    with pytest.raises(InputError, match='needs "bones"'):
        R.BoneMap.from_json(json.dumps({"bones": ["pelvis"]}))
    with pytest.raises(InputError, match="crosses the hierarchy"):
        R.BoneMap({"pelvis": "LeftWrist", "thigh_l": "Hips"}).check(sa, sb)


def test_bad_input_says_what_to_do(walk):
    sk, rest, motion = S.convention_clip("bvh", walk)
    chain = Skeleton(["a", "b", "c"], [-1, 0, 1])
    with pytest.raises(InputError, match="no legs found"):
        R.find_roles(chain, np.array([[0, 0, 1.0], [0, 0, 0.5], [0, 0, 0.0]]))
    with pytest.raises(InputError, match="unknown bone map preset"):
        R.find_roles(sk, rest, "maya")
    with pytest.raises(InputError, match="does not fit the 'ue' preset"):
        R.find_roles(sk, rest, "ue")
    with pytest.raises(InputError, match="stride"):
        R.retarget(sk, rest, motion, sk, rest, stride="long")
    with pytest.raises(InputError, match="source motion must be"):
        R.retarget(sk, rest, motion[:, :5], sk, rest)
    with pytest.raises(InputError, match="edited environment needs"):
        R.retarget(sk, rest, motion, sk, rest, edited=TriMesh(*S.grid(1.0, 1.0, 1, 1)))


def test_a_crouch_onto_a_shorter_trunk_keeps_the_hips_over_the_knees(monkeypatch):
    # A shorter spine and neck are the target's proportions, not a duck: measured against the
    # source's trunk, the ducking stage sank the hips of a real Mixamo rig 26 cm under the shared
    # walk's crouch, below its knees.
    monkeypatch.setitem(S.GAITS, "crouch", dict(speed=0.5, stride=0.5, stance=0.6, drop=0.55, bob=0.01, lift=0.08))
    sk, off, roles = S.convention_rig("mixamo")
    rest = S.rest_joints(sk, off)
    motion = S.locomotion(sk, off, roles, frames=60, gait="crouch")
    lift = rest[:, 2].min()
    rest[:, 2] -= lift
    motion[..., 2] -= lift
    short = off.copy()
    for j, r in enumerate(roles):
        if r in ("chest", "chest2", "neck", "head"):
            short[j] *= 0.5
    trest = S.rest_joints(sk, short)
    trest[:, 2] -= trest[:, 2].min()
    hips = sk.index("mixamorig:Hips")
    thighs = [(sk.index(f"mixamorig:{s}UpLeg"), sk.index(f"mixamorig:{s}Leg")) for s in ("Left", "Right")]

    def thigh_cos(pos):
        a = pos[:, [k for _, k in thighs]] - pos[:, [t for t, _ in thighs]]
        b = motion[:, [k for _, k in thighs]] - motion[:, [t for t, _ in thighs]]
        return np.einsum("fki,fki->fk", a, b) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

    out = R.retarget(sk, rest, motion, sk, trest)
    assert (motion[:, hips, 2] - out.positions[:, hips, 2]).max() < 0.005
    assert np.abs(out.positions[:, hips, 2] - motion[:, hips, 2]).max() < 0.02
    assert thigh_cos(out.positions).min() > 0.99
    m = R.measure(sk, rest, motion, sk, trest, out.positions, out.bone_map)
    assert m["planted_within"] >= 0.99 and m["pose_similarity"] >= 0.98
    # Measured against the source's trunk (the adapt's default), the crouch sinks (here 1.8 cm;
    # on the real rig 26 cm).
    sunk = R.retarget(sk, rest, motion, sk, trest, solver_options={"trunk_from_lengths": False})
    assert (motion[:, hips, 2] - sunk.positions[:, hips, 2]).max() > 0.01


@pytest.mark.parametrize("legs", [0.85, 1.15])
def test_spread_footsteps_keep_the_knees_bending_as_the_source_s(walk, legs):
    # Without an environment the hips' path and the footsteps spread with the legs; the knees go
    # with them (left where they were, metres behind the hips at the end of a walk, they turned
    # backwards: thigh cosine -0.04 on the shared walk with legs 15 % shorter).
    sk, rest, motion = S.convention_clip("bvh", walk)
    tsk, trest = S.convention_rest("mixamo", legs=legs)
    out = R.retarget(sk, rest, motion, tsk, trest)
    assert abs(out.stride - 1.0) > 0.05
    for side in ("Left", "Right"):
        t = [tsk.index(f"mixamorig:{side}{n}") for n in ("UpLeg", "Leg", "Foot")]
        s = [sk.index(f"{side}{n}") for n in ("Hip", "Knee", "Ankle")]
        for (a, b), (c, d) in (((t[0], t[1]), (s[0], s[1])), ((t[1], t[2]), (s[1], s[2]))):
            u = out.positions[:, b] - out.positions[:, a]
            v = motion[:, d] - motion[:, c]
            cos = np.einsum("fi,fi->f", u, v) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
            assert cos.min() > 0.9, (side, cos.min())
