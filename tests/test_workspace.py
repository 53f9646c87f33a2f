"""Limb workspaces and the body frame (contacts paper §5.2: the hull of sampled configurations)."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.contacts import check_contacts, detect_contacts, find_limb
from blender_reldesc.core.contacts.workspace import SAMPLES, body_frames, limb_workspace, to_body
from blender_reldesc.core.skeleton.joints import limb_effectors

from core_helpers import random_rotation

POSES = ("bent", "straight", "hyperextended", "twisting")


def _limbs(sk, motion, H):
    out = []
    for e in limb_effectors(sk, motion, H).tolist():
        out.append(find_limb(sk, sk.names[e]))
    return out


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
@pytest.mark.parametrize("limbs", POSES)
def test_the_body_frame_faces_the_walk_on_every_convention(convention, limbs):
    sk, off, roles = S.convention_rig(convention)
    motion = S.posed_motion(sk, off, roles, frames=40, limbs=limbs)
    H = float(np.ptp(motion[0, :, 2]))
    chains = [lb.chain for lb in _limbs(sk, motion, H)]
    assert len(chains) >= 4                          # both hands and both feet (Unreal's twist leaves looked through)
    R = body_frames(sk, motion, H, chains).rotations(motion)
    assert np.all(R[:, 0] @ [1.0, 0, 0] > 0.9)       # the rig walks along +x, z up
    assert np.all(R[:, 2] @ [0, 0, 1.0] > 0.9)
    assert np.allclose(np.linalg.det(R), 1.0)


def _walk_leg():
    sk, motion = S.walk(60)
    H = float(np.ptp(motion[0, :, 2]))
    limbs = _limbs(sk, motion, H)
    frames = body_frames(sk, motion, H, [lb.chain for lb in limbs])
    leg = find_limb(sk, "LeftFoot")
    return sk, motion, H, frames, leg


def test_a_leg_reaches_forward_and_down_not_behind_or_above_the_hip():
    sk, motion, H, frames, leg = _walk_leg()
    ws = limb_workspace(sk, motion, H, frames, leg.chain)
    L = np.median(sk.bone_lengths(motion), axis=0)[leg.chain[1:]].sum()
    at = {"down": [0, 0, -0.95 * L], "forward at hip height": [0.9 * L, 0, -0.1 * L],
          "behind at hip height": [-0.85 * L, 0, -0.3 * L], "above the hip": [0, 0, 0.5 * L],
          "beyond the straight leg": [0, 0, -1.1 * L]}
    excess = {k: float(ws.excess(np.array(v))) for k, v in at.items()}
    assert excess["down"] < 0 and excess["forward at hip height"] < 0
    # Behind and above lie within the ball of the limb's length, which took them.
    assert excess["behind at hip height"] > 0.05 * H
    assert excess["above the hip"] > 0.1 * H
    assert excess["beyond the straight leg"] > 0.08 * L
    assert len(ws.points) <= SAMPLES + len(motion)


def test_every_source_effector_is_inside_its_workspace_and_the_frame_turns_with_the_body():
    sk, motion, H, frames, _ = _walk_leg()
    rng = np.random.default_rng(3)
    Q = random_rotation(rng)
    if Q[2, 2] < 0.99:                                # a turn about the vertical: the rig still stands
        c, s = np.cos(1.1), np.sin(1.1)
        Q = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    moved = motion @ Q.T + [3.0, -2.0, 0.5]
    for limb in _limbs(sk, motion, H):
        ws = limb_workspace(sk, motion, H, frames, limb.chain)
        ex = ws.excess(to_body(frames.rotations(motion), motion[:, limb.root], motion[:, limb.effector]))
        assert ex.max() <= 1e-9
        ex2 = ws.excess(to_body(frames.rotations(moved), moved[:, limb.root], moved[:, limb.effector]))
        assert np.allclose(ex, ex2, atol=1e-9)


def test_a_longer_leg_has_a_larger_workspace():
    sk, motion, H, frames, leg = _walk_leg()
    lengths = np.median(sk.bone_lengths(motion), axis=0)
    small = limb_workspace(sk, motion, H, frames, leg.chain, lengths)
    big = limb_workspace(sk, motion, H, frames, leg.chain, lengths * 1.3)
    L = lengths[leg.chain[1:]].sum()
    p = np.array([0, 0, -1.15 * L])
    assert small.excess(p) > 0 and big.excess(p) < 0


def test_a_foot_behind_the_hip_is_unreachable_though_the_limb_is_long_enough():
    """The reason *unreachable*: the body lifted and moved forward over a planted foot, bone
    lengths broken on purpose, so the contact lies behind the hip at 0.95 of the leg's length
    (the old ball of the limb's length passed it)."""
    skel, motion, verts, tris, stones = S.stepping_stones(120)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    phases = detect_contacts(binding)
    k = next(i for i, ph in enumerate(phases) if ph.name == "LeftFoot" and ph.end - ph.start >= 6)
    ph = phases[k]
    lengths = skel.bone_lengths(motion)
    L = lengths[ph.middle, ph.limb.chain[1:]].sum()
    pos = motion.copy()
    foot = [ph.effector] + skel.descendants(ph.effector)
    rest = np.setdiff1d(np.arange(len(skel)), foot)
    frames = np.arange(ph.start, ph.end + 1)
    hip = pos[frames, ph.limb.root]
    goal = pos[frames, ph.effector]
    # Put the hip 0.85 L ahead of the foot and 0.4 L above it.
    shift = goal + [0.85 * L, 0.0, 0.4 * L] - hip
    pos[np.ix_(frames, rest)] += shift[:, None]
    assert np.all(np.linalg.norm(pos[frames, ph.effector] - pos[frames, ph.limb.root], axis=-1) < L)
    status = check_contacts(binding, pos, mesh, phases, lengths)
    assert status[k] == (False, "unreachable")
    assert check_contacts(binding, motion, mesh, phases, lengths)[k] == (True, None)
