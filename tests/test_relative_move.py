"""How far an armature moved relative to its environment since Bind (``jobs.bound.relative_move``):
numpy only, no Blender."""

import numpy as np
from scipy.spatial.transform import Rotation

from blender_reldesc.jobs.bound import relative_move


def _m(rot_deg=0.0, t=(0.0, 0.0, 0.0), s=1.0):
    m = np.eye(4)
    m[:3, :3] = s * Rotation.from_euler("z", rot_deg, degrees=True).as_matrix()
    m[:3, 3] = t
    return m


def _case(arm_now, parts_now):
    F = 3
    arm_then = np.broadcast_to(_m(t=(0.5, 0.0, 0.0)), (F, 4, 4))
    probes = np.random.default_rng(0).normal(size=(F, 5, 3)) + [0.5, 0.0, 1.0]
    parts_then = np.stack([_m(), _m(t=(2.0, 0.0, 2.0))])              # a floor and a beam
    now = np.broadcast_to(arm_now @ arm_then[0], (F, 4, 4))
    return relative_move(arm_then, now, probes, parts_then, np.stack([p @ q for p, q in zip(parts_now, parts_then)]))


def test_an_armature_that_stayed_has_not_moved_whatever_moved_around_it():
    assert _case(_m(), [_m(t=(0, 0, 0.06)), _m(t=(0, 0, -0.3))]) == 0.0      # the floor raised, the beam lowered


def test_an_armature_moved_with_any_part_of_its_set_has_not_moved():
    move = _m(30.0, (4.0, -1.5, 0.0))
    assert _case(move, [move, move]) < 1e-12
    assert _case(move, [move, _m(t=(0, 0, -0.3)) @ move]) < 1e-12          # and the beam edited besides


def test_an_armature_moved_alone_moved_that_far_and_its_scale_is_not_a_move():
    assert abs(_case(_m(t=(1.5, 0.0, 0.0)), [_m(), _m()]) - 1.5) < 1e-12
    grown = _m(s=1.2)
    grown[:3, 3] = (1 - 1.2) * np.array([0.5, 0.0, 0.0])                   # scaled about its own origin
    assert _case(grown, [_m(), _m()]) < 1e-12


def test_parts_that_move_over_time_are_no_reference():
    nan = np.full((2, 4, 4), np.nan)
    F = 3
    eye = np.broadcast_to(np.eye(4), (F, 4, 4))
    assert relative_move(eye, eye + 0, np.zeros((F, 1, 3)), nan, nan) == 0.0
