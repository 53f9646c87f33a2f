"""Joints near a sculpted surface keep their clearance from it (``descriptors.clearance``, issue 36).

Walks generated on rigs of four conventions over a floor sculpted after binding with bumps and
dips of 0.1-0.3 m placed under a planted foot (the crest), beside it (the slope) and ahead of it
(the edge); the correction is exact where nothing changed shape, and its distances agree with
brute force.
"""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.adaptation import Rig
from blender_reldesc.core.descriptors.clearance import source_clearance
from blender_reldesc.core.geometry.triangles import closest_point_on_triangles

from core_helpers import random_rotation

SIGMA = 0.5


def _walk(convention, frames=120):
    sk, off, roles = S.convention_rig(convention)
    motion = S.locomotion(sk, off, roles, frames=frames)
    lo, hi = motion.reshape(-1, 3).min(0), motion.reshape(-1, 3).max(0)
    z0 = lo[2] - 0.01
    V, T = S.grid(hi[0] - lo[0] + 3.0, hi[1] - lo[1] + 3.0, int((hi[0] - lo[0] + 3.0) / 0.1),
                  int((hi[1] - lo[1] + 3.0) / 0.1), origin=(lo[0] - 1.5, lo[1] - 1.5), z=z0)
    feet = [j for j, r in enumerate(roles) if r.split(".")[0] in ("foot", "toe")]
    speed = np.linalg.norm(np.gradient(motion[:, feet], axis=0), axis=-1) * 30.0
    plant = (speed < 0.5) & (motion[:, feet, 2] - motion[:, feet, 2].min(axis=0) < 0.05)
    return sk, roles, motion, V, T, z0, feet, plant


def _hill(centre, height, sigma=SIGMA):
    def at(xy):
        return height * np.exp(-np.sum((xy - centre) ** 2, axis=-1) / (2 * sigma ** 2))
    return at


def _placements(motion, feet, plant):
    F = len(motion)
    frames = np.flatnonzero(plant.any(axis=1))
    f = int(frames[np.argmin(np.abs(frames - F // 2))])
    foot = motion[f, feet[int(np.flatnonzero(plant[f])[0])], :2]
    return {"crest": foot, "slope": foot + [0.0, 0.5], "edge": foot + [SIGMA, 0.0]}


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue"])
def test_planted_feet_follow_bumps_and_dips_wherever_they_are(convention):
    """≥ 99 % of planted samples within 2 cm of the sculpted floor + their source height and no
    joint more than 1 cm inside, for bumps and dips of 0.1-0.3 m at the crest, the slope and the
    edge; the unedited floor gives the source."""
    sk, roles, motion, V, T, z0, feet, plant = _walk(convention)
    binding = bind(sk, motion, TriMesh(V, T))
    assert np.abs(adapt(binding, TriMesh(V.copy(), T)).positions - motion).max() < 1e-9
    worst = []
    for where, centre in _placements(motion, feet, plant).items():
        for height in (0.1, -0.3, 0.3):
            g = _hill(centre, height)
            edited = V.copy()
            edited[:, 2] += g(V[:, :2])
            P = adapt(binding, TriMesh(edited, T)).positions
            err = np.abs(P[:, feet, 2] - motion[:, feet, 2] - g(P[:, feet, :2]))[plant]
            inside = (P[..., 2] < z0 + g(P[..., :2]) - 0.01).any(axis=1)
            worst.append(((err <= 0.02).mean(), where, height, int(inside.sum())))
    assert plant.sum() > 100
    assert min(w[0] for w in worst) >= 0.99, sorted(worst)[:3]
    assert all(w[3] == 0 for w in worst), [w for w in worst if w[3]]


def test_without_the_correction_the_crest_misses_it_fixes():
    """The error the correction is for: Eq. 2 alone leaves planted feet off on a 0.3 m crest (first
    order in the surface's shape), the correction brings them back."""
    sk, roles, motion, V, T, z0, feet, plant = _walk("bvh")
    binding = bind(sk, motion, TriMesh(V, T))
    g = _hill(_placements(motion, feet, plant)["crest"], 0.3, sigma=0.35)
    edited = V.copy()
    edited[:, 2] += g(V[:, :2])
    mesh = TriMesh(edited, T)
    off = []
    for options in ({"keep_clearance": False}, {}):
        t = Rig(binding, solver_options=options).targets(mesh)[0]
        off.append(np.abs(t[:, feet, 2] - motion[:, feet, 2] - g(t[:, feet, :2]))[plant])
    # Measured: the largest miss 11.4 -> 6.6 mm (what is left is vertical against normal distance on
    # the slope: the ankle keeps its distance along the surface's normal), the median 0.77 -> 0.26 mm.
    assert off[0].max() > 0.01                        # the first-order miss is there ...
    assert off[1].max() < 0.7 * off[0].max() and np.median(off[1]) < 0.5 * np.median(off[0])   # ... and less


def test_rigid_moves_of_the_floor_leave_the_correction_out():
    """A lifted, turned or tilted floor moves the walk rigidly with or without the correction: the
    distances it keeps do not change under a rigid move."""
    sk, roles, motion, V, T, z0, feet, plant = _walk("mixamo", frames=60)
    binding = bind(sk, motion, TriMesh(V, T))
    rng = np.random.default_rng(3)
    for _ in range(3):
        R, shift = random_rotation(rng), rng.normal(size=3)
        mesh = TriMesh(V @ R.T + shift, T)
        on = Rig(binding).targets(mesh)[0]
        off = Rig(binding, solver_options={"keep_clearance": False}).targets(mesh)[0]
        assert np.abs(on - off).max() < 1e-9
        assert np.abs(on - (motion @ R.T + shift)).max() < 1e-9


def test_source_clearance_is_the_distance_to_the_closest_triangle():
    """The kept distances (the fast search) agree with brute force over every triangle, signed
    by the side of the surface; joints beyond the band get none."""
    sk, roles, motion, V, T, z0, feet, plant = _walk("ue", frames=30)
    V = V.copy()
    V[:, 2] += 0.05 * np.sin(3 * V[:, 0]) * np.cos(2 * V[:, 1])          # not flat: any surface
    binding = bind(sk, motion, TriMesh(V, T))
    frames = np.arange(0, 30, 7)
    got, kept_foot = source_clearance(binding, frames)
    p = motion[frames].reshape(-1, 3)
    a, b, c = (V[T[:, k]] for k in range(3))
    best, where = np.full(len(p), np.inf), np.zeros((len(p), 3))
    for i, q in enumerate(p):
        bary = closest_point_on_triangles(np.repeat(q[None], len(T), 0), a, b, c)
        foot = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
        d = np.linalg.norm(q - foot, axis=1)
        k = int(np.argmin(d))
        n = np.cross(b[k] - a[k], c[k] - a[k])
        best[i] = d[k] * (1.0 if np.dot(q - foot[k], n) >= 0 else -1.0)
        where[i] = foot[k]
    got = got.reshape(-1)
    near = np.abs(best) < 0.1 * binding.body_height
    assert near.sum() > 20
    assert np.allclose(got[near], best[near], atol=1e-9)
    assert np.allclose(kept_foot.reshape(-1, 3)[near], where[near], atol=1e-9)
    assert np.all(np.isinf(got[np.abs(best) > 0.2 * binding.body_height]))


@pytest.mark.parametrize("convention", ["bvh", "rigify", "ue"])
def test_a_leg_stretched_by_a_crest_gets_a_knee_target_its_bones_reach(convention):
    """Where the targets ask a leg to reach farther than the source does, the knee's target sits
    at the thigh's length from the hip's target and the shin's from the ankle's (the solver's
    compromise with a knee bent as in the source left an ankle 2 cm short); elsewhere the
    knee keeps Eq. 2's target."""
    sk, roles, motion, V, T, z0, feet, plant = _walk(convention)
    binding = bind(sk, motion, TriMesh(V, T))
    g = _hill(_placements(motion, feet, plant)["crest"], 0.3)
    edited = V.copy()
    edited[:, 2] += g(V[:, :2])
    rig = Rig(binding)
    t = rig.targets(TriMesh(edited, T), guard=False)[0]          # before jumps are eased
    H = binding.body_height
    stretched = 0
    for hip, knee, ankle, bones in rig.trunk.legs.chains:
        thigh = np.linalg.norm(motion[:, knee] - motion[:, hip], axis=-1)
        shin = np.linalg.norm(motion[:, ankle] - motion[:, knee], axis=-1)
        d = np.linalg.norm(t[:, ankle] - t[:, hip], axis=-1)
        src = np.linalg.norm(motion[:, ankle] - motion[:, hip], axis=-1)
        full = (d > src + 0.02 * H) & (d < 0.999 * (thigh + shin))       # within the IK's reach
        stretched += int(full.sum())
        assert np.allclose(np.linalg.norm(t[full, knee] - t[full, hip], axis=-1), thigh[full], atol=1e-9)
        assert np.allclose(np.linalg.norm(t[full, ankle] - t[full, knee], axis=-1), shin[full], atol=1e-9)
    assert stretched > 0
    # No edit: Eq. 2's knees (the source's).
    same = rig.targets(TriMesh(V.copy(), T))[0]
    assert np.abs(same - motion).max() < 1e-9


@pytest.mark.parametrize("convention", ["bvh", "rigify", "ue"])
def test_the_interaction_mesh_lifts_exactly_and_keeps_feet_on_a_bump(convention):
    """The interaction-mesh solver (issue 36, point 4): a floor lifted 0.2 m after binding lifts the
    walk exactly (its collisions tested each morph step against the final floor held the feet
    1.7 cm off on a real walk), and a 0.25 m bump under a planted foot keeps ≥ 95 % of planted
    samples within 2 cm of the terrain + source height (its clearance rows; 51 % without on a
    real walk), no joint more than 1 cm inside."""
    sk, roles, motion, V, T, z0, feet, plant = _walk(convention, frames=60)
    binding = bind(sk, motion, TriMesh(V, T))
    H = binding.body_height
    lifted = adapt(binding, TriMesh(V + [0.0, 0.0, 0.2], T), solver="interaction_mesh").positions
    assert np.abs(lifted - (motion + [0.0, 0.0, 0.2])).max() < 1e-4 * H
    g = _hill(_placements(motion, feet, plant)["crest"], 0.25, sigma=0.6)
    edited = V.copy()
    edited[:, 2] += g(V[:, :2])
    P = adapt(binding, TriMesh(edited, T), solver="interaction_mesh").positions
    err = np.abs(P[:, feet, 2] - motion[:, feet, 2] - g(P[:, feet, :2]))[plant]
    assert plant.sum() > 40 and (err <= 0.02).mean() >= 0.95
    assert not (P[..., 2] < z0 + g(P[..., :2]) - 0.01).any()


def _standing(convention, frames=60):
    """A convention rig standing in its rest pose (legs straight), swaying 2 cm sideways."""
    sk, off, roles = S.convention_rig(convention)
    rest = np.zeros((len(sk), 3))
    for j in sk.order.tolist():
        p = sk.parents[j]
        rest[j] = off[j] + (rest[p] if p >= 0 else 0.0)
    motion = np.repeat(rest[None], frames, axis=0)
    motion[..., 1] += 0.02 * np.sin(2 * np.pi * np.arange(frames) / 60.0)[:, None]
    lo, hi = motion.reshape(-1, 3).min(0), motion.reshape(-1, 3).max(0)
    z0 = lo[2] - 0.01
    V, T = S.grid(4.0, 4.0, 40, 40, origin=(0.5 * (lo[0] + hi[0]) - 2.0, -2.0), z=z0)
    feet = [j for j, r in enumerate(roles) if r.split(".")[0] == "foot"]
    return sk, motion, V, T, z0, feet


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue"])
def test_the_interaction_mesh_stands_straight_legs_on_a_bump_with_their_lengths(convention):
    """Straight legs on a 0.3 m bump under both feet (the in-place real clip's case, issue 36,
    point 4): the interaction mesh's linearised bone lengths let a hip slide along its pelvis bone
    while the clearance rows pulled the feet up (13 % of the rig's bones' length on a Mixamo rig,
    the real clip's thighs 20-46 cm too long before the exact-length pass, its feet 3-5 cm low after
    it). With the constraints' curvature the solver keeps the lengths itself (< 2 % mean on every
    frame: Unreal's compressed spine keeps 1.6 %, as before) and every foot sample stays within
    2 cm of the bump + its source height."""
    sk, motion, V, T, z0, feet = _standing(convention)
    binding = bind(sk, motion, TriMesh(V, T))
    g = _hill(motion[0, feet, :2].mean(axis=0), 0.3, sigma=0.6)
    edited = V.copy()
    edited[:, 2] += g(V[:, :2])
    result = adapt(binding, TriMesh(edited, T), solver="interaction_mesh")
    P = result.positions
    assert result.bone_length_error.max() < 0.02
    err = np.abs(P[:, feet, 2] - motion[:, feet, 2] - g(P[:, feet, :2]))
    assert err.max() <= 0.02
    assert not (P[..., 2] < z0 + g(P[..., :2]) - 0.01).any()


def test_the_interaction_mesh_lifts_exactly_across_its_windows():
    """A rigid lift over a clip solved in several windows: each window's first frames are held
    where the window before put them, morphed with the window (held at their final place from the
    first step, they pulled the morph apart and left a shoulder 3 cm off the lifted source)."""
    sk, roles, motion, V, T, z0, feet, plant = _walk("rigify", frames=90)
    binding = bind(sk, motion, TriMesh(V, T))
    lifted = adapt(binding, TriMesh(V + [0.0, 0.0, 0.2], T), solver="interaction_mesh",
                   solver_options={"window": 40, "overlap": 10}).positions
    assert np.abs(lifted - (motion + [0.0, 0.0, 0.2])).max() < 1e-4 * binding.body_height
