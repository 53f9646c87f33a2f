"""Objects as moving frames: where an Empty (or any object) is over the frames."""

from __future__ import annotations

import numpy as np

from .actions import _fcurves
from .mesh import is_animated

#: Object channels that move an object (an action holding any of them moves it).
_TRANSFORMS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale",
               "delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale")


def moves(ob, _seen=None):
    """Whether ``ob``'s world transform can change over the frames: object channels keyed or
    driven, constraints, or a parent that moves (a bone or vertex parent moves with its
    armature's or mesh's animation)."""
    seen = set() if _seen is None else _seen
    if ob is None or ob.name in seen:
        return False
    seen.add(ob.name)
    if len(ob.constraints):
        return True
    ad = ob.animation_data
    if ad is not None:
        if len(ad.drivers) or len(ad.nla_tracks):
            return True
        if ad.action is not None and any(fc.data_path in _TRANSFORMS for fc in _fcurves(ad.action)):
            return True
    if ob.parent is not None and ob.parent_type != 'OBJECT' and is_animated(ob.parent):
        return True
    return moves(ob.parent, seen)


def matrices(scene, ob, frames, moving=None):
    """``ob``'s world matrices: (1,4,4) when it cannot move, else (F,4,4) over ``frames`` as the
    scene now plays. ``moving``: whether it moves (default: ``moves(ob)``)."""
    if not (moves(ob) if moving is None else moving):
        return np.array(ob.matrix_world, dtype=float)[None]
    now = scene.frame_current, scene.frame_subframe
    out = np.empty((len(frames), 4, 4))
    try:
        for i, f in enumerate(np.asarray(frames).tolist()):
            scene.frame_set(int(f))
            out[i] = np.array(ob.matrix_world, dtype=float)
    finally:
        scene.frame_set(now[0], subframe=now[1])
    return out


def positions(scene, ob, frames):
    """(F,3) world positions of ``ob`` at ``frames`` (read once when it is not animated)."""
    moving = is_animated(ob) or bool(ob.parent and is_animated(ob.parent))
    m = matrices(scene, ob, frames, moving)
    return np.broadcast_to(m[:, :3, 3], (len(frames), 3)).copy()
