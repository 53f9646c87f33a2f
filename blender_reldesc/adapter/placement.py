"""Where objects are: world matrices, and points carried into world space.

The placement rule (docs/how-it-works/workflow.md, "Where the character is"): joints are tied to the environment in
world space; keys are written for the armature's placement *at bake time* (its object matrix at
every bound frame, animated or not). So a character moved together with its environment (a
parent, or both objects) bakes the same local keys; one moved away from it is pulled back by its
descriptors (the bake says how far, see ``jobs.bound.relative_move``); and a uniform object
scale changed since Bind is a character that grew (``jobs.bound.uniform_scale``).
"""

from __future__ import annotations

import numpy as np


def world_matrix(ob):
    return np.array(ob.matrix_world, dtype=float)


def to_world(matrix, points):
    if np.array_equal(matrix, np.eye(4)):             # a floor at the origin: no product per frame
        return np.asarray(points, dtype=float)
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def to_world_each(parts):
    """``to_world`` of each ``(matrix, points)`` of ``parts``: the arrays, in order."""
    return [to_world(m, p) for m, p in parts]


#: The data paths of an object's own transform (what places it; pose bones and custom
#: properties do not).
TRANSFORM_PATHS = frozenset({"location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale",
                             "delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale",
                             "matrix_world", "matrix_basis", "matrix_local", "matrix_parent_inverse"})


def placement_animated(ob, _seen=None):
    """Whether ``ob``'s world matrix can change over time: keys or drivers on its own transform
    (a rig's many drivers of pose bones and properties do not place it), unmuted NLA tracks,
    constraints, or a parent (or parent bone) whose placement or pose can change."""
    seen = _seen if _seen is not None else set()
    if ob is None or ob.name in seen:
        return False
    seen.add(ob.name)
    ad = ob.animation_data
    if ad is not None:
        if any(d.data_path in TRANSFORM_PATHS for d in ad.drivers) or any(not t.mute for t in ad.nla_tracks):
            return True
        if ad.action is not None and _keys_transform(ad.action, ad.action_slot):
            return True
    if len(ob.constraints):
        return True
    parent = ob.parent
    if parent is None:
        return False
    if ob.parent_type in {'BONE', 'VERTEX', 'VERTEX_3'}:
        # Parented to a bone or vertices: the parent's pose or geometry moves it as well.
        pad = parent.animation_data
        if pad is not None and (pad.action is not None or len(pad.drivers) or len(pad.nla_tracks)):
            return True
    return placement_animated(parent, seen)


def _keys_transform(action, slot):
    """Whether ``action`` keys the object transform for ``slot`` (every channelbag when the slot
    is unknown)."""
    for layer in action.layers:
        for strip in layer.strips:
            bags = [strip.channelbag(slot)] if slot is not None else list(strip.channelbags)
            if any(fc.data_path in TRANSFORM_PATHS for bag in bags if bag is not None for fc in bag.fcurves):
                return True
    return False


def object_matrices(scene, ob, frames):
    """(F,4,4) world matrices of ``ob`` at ``frames``: read once when nothing can move it
    (``placement_animated``), else played frame by frame (the current frame put back)."""
    frames = np.asarray(frames)
    if not placement_animated(ob):
        return np.broadcast_to(world_matrix(ob), (len(frames), 4, 4)).copy()
    current = scene.frame_current, scene.frame_subframe
    out = np.empty((len(frames), 4, 4))
    try:
        for i, f in enumerate(frames.tolist()):
            scene.frame_set(int(f))
            out[i] = world_matrix(ob)
    finally:
        scene.frame_set(current[0], subframe=current[1])
    return out
