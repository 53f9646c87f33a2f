"""Keys of a bake: Euler continuity, playback models, and key reduction within a tolerance."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from blender_reldesc.core.keys import (Channels, bezier_handles, euler_compatible, evaluate, reduce_keys,
                                       rotation_matrices)


@pytest.mark.parametrize("order", ["XYZ", "ZXY", "YXZ"])
def test_euler_compatible_keeps_a_spinning_bone_turning(order):
    F = 60
    turn = np.linspace(0, 4 * np.pi, F)                        # two full turns, 12 degrees per frame
    rot = Rotation.from_euler("z", turn[:, None]) * Rotation.from_euler("x", 0.3)     # (F,1): scipy 1.18 reads (F,) as one rotation
    raw = rot.as_euler(order.lower())
    xyz = np.empty_like(raw)
    for k, a in enumerate(order):
        xyz[:, "XYZ".index(a)] = raw[:, k]
    out = euler_compatible(xyz[:, None], order, reference=xyz[:1])[:, 0]
    assert np.abs(np.diff(out, axis=0)).max() < np.radians(20)                # no jump by pi
    assert np.allclose(rotation_matrices("euler", out, order), rot.as_matrix(), atol=1e-9)
    assert np.allclose(out[0], xyz[0])


def test_euler_compatible_starts_from_the_reference_turn():
    angles = np.array([[[0.1, 0.2, 0.3]]])
    ref = np.array([[0.1 + 2 * np.pi, 0.2, 0.3 - 2 * np.pi]])
    assert np.allclose(euler_compatible(angles, "XYZ", ref)[0], ref)


def test_bezier_handles_play_the_hermite_curve_blender_evaluates():
    kf = np.array([0.0, 3.0, 10.0])
    kv = np.array([[0.0], [2.0], [-1.0]])
    ks = np.array([[0.5], [0.0], [-0.3]])
    left, right = bezier_handles(kf, kv, ks)
    for i in range(2):                                        # a cubic Bezier with these control points
        p = np.array([[kf[i], kv[i, 0]], right[i, 0], left[i + 1, 0], [kf[i + 1], kv[i + 1, 0]]])
        s = np.linspace(0, 1, 11)[:, None]
        curve = ((1 - s) ** 3 * p[0] + 3 * (1 - s) ** 2 * s * p[1] + 3 * (1 - s) * s ** 2 * p[2] + s ** 3 * p[3])
        assert np.allclose(np.diff(curve[:, 0]), curve[1, 0] - curve[0, 0])   # frame linear in s
        assert np.allclose(evaluate(kf, kv, ks, curve[:, 0], "BEZIER")[:, 0], curve[:, 1])


def _arm(F=120, seed=0):
    """A planar two-bone arm: shoulder and elbow angles over F frames, and its FK."""
    t = np.linspace(0, 1, F)
    rng = np.random.default_rng(seed)
    a1 = 0.8 * np.sin(2 * np.pi * t) + 0.02 * rng.standard_normal(F).cumsum() * 0.1
    a2 = 0.5 + 0.6 * np.sin(4 * np.pi * t + 0.3)

    def quat(a):
        return np.stack([np.cos(a / 2), 0 * a, 0 * a, np.sin(a / 2)], axis=-1)

    groups = [Channels("quaternion", quat(a1)), Channels("quaternion", quat(a2)),
              Channels("location", np.stack([0.1 * t, 0 * t, 0 * t], axis=-1))]

    def joints_of(values):
        r1 = rotation_matrices("quaternion", values[0])
        r2 = r1 @ rotation_matrices("quaternion", values[1])
        base = values[2]
        elbow = base + r1[:, :, 0] * 0.3
        hand = elbow + r2[:, :, 0] * 0.25
        return np.stack([base, elbow, hand], axis=1)

    carries = np.array([[False, True, True], [False, False, True], [True, True, True]])
    reach = np.array([0.55, 0.25, 0.0])
    return groups, joints_of, carries, reach


@pytest.mark.parametrize("interpolation", ["LINEAR", "BEZIER"])
@pytest.mark.parametrize("tolerance", [0.01, 0.001])
def test_reduced_keys_stay_within_the_tolerance_with_fewer_keys(interpolation, tolerance):
    groups, joints_of, carries, reach = _arm()
    keys, deviation = reduce_keys(groups, joints_of, carries, reach, tolerance, interpolation=interpolation)
    F = len(groups[0].values)
    frames = np.arange(F, dtype=float)
    played = [evaluate(frames[k], g.values[k], g.slopes()[k], frames, interpolation) for g, k in zip(groups, keys)]
    measured = np.linalg.norm(joints_of(played) - joints_of([g.values for g in groups]), axis=-1)
    assert np.allclose(measured, deviation)
    assert measured.max() <= tolerance
    assert sum(len(k) for k in keys) < 0.6 * F * len(groups)
    assert len(keys[2]) == 2                                    # a straight line needs its two ends


def test_key_candidates_are_respected():
    groups, joints_of, carries, reach = _arm(F=61)
    step = np.zeros(61, bool)
    step[::5] = True
    keys, _ = reduce_keys(groups, joints_of, carries, reach, 1e-4, candidates=step)
    for k in keys:
        assert np.all(k % 5 == 0) and k[0] == 0 and k[-1] == 60


@pytest.mark.parametrize("order", ["XYZ", "ZXY", "YXZ"])
def test_euler_compatible_equals_the_frame_by_frame_definition(order):
    # The vectorised chain against the definition: each frame, of the two triples of the
    # rotation, each moved by whole turns next to the previous frame's, the nearer one.
    rng = np.random.default_rng(4)
    angles = np.cumsum(rng.normal(0, 0.5, (300, 5, 3)), axis=0)
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    ref = rng.normal(0, 3, (5, 3))
    first, second, third = ("XYZ".index(a) for a in order)
    prev, want = ref, []
    for a in angles:
        b = a.copy()
        b[:, first] += np.pi
        b[:, second] = np.pi - b[:, second]
        b[:, third] += np.pi
        a = a + 2 * np.pi * np.round((prev - a) / (2 * np.pi))
        b = b + 2 * np.pi * np.round((prev - b) / (2 * np.pi))
        prev = np.where((np.abs(b - prev).sum(-1) < np.abs(a - prev).sum(-1))[:, None], b, a)
        want.append(prev)
    np.testing.assert_allclose(euler_compatible(angles, order, ref), np.array(want), atol=1e-9)


def test_the_euler_choice_chain_equals_the_frame_by_frame_walk():
    # ``euler_compatible`` chooses between two triples per frame by which one the previous frame
    # took; the vectorised chain must be the frame-by-frame walk it replaced.
    from blender_reldesc.core.keys import _two_state_chain
    rng = np.random.default_rng(3)
    for shape in ((1, 1), (2, 3), (50, 4), (600, 7)):
        from_a, from_b = rng.random(shape) < 0.5, rng.random(shape) < 0.5
        want = np.empty(shape, bool)
        state = from_a[0]
        want[0] = state
        for f in range(1, shape[0]):
            state = np.where(state, from_b[f], from_a[f])
            want[f] = state
        np.testing.assert_array_equal(_two_state_chain(from_a, from_b), want)


@pytest.mark.parametrize("order", ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
def test_euler_matrices_agree_with_scipy_in_every_rotation_mode(order):
    # The closed form against scipy's from_euler (the first axis of the mode turns first),
    # over angles beyond a full turn.
    v = np.random.default_rng(7).uniform(-7.0, 7.0, (200, 3))
    ref = Rotation.from_euler(order.lower(), v[:, ["XYZ".index(a) for a in order]]).as_matrix()
    np.testing.assert_allclose(rotation_matrices("euler", v, order), ref, atol=1e-14)
