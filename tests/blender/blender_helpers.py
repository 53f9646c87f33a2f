"""Helpers shared by the Blender-level tests."""

import numpy as np


def heads_over_frames(scene, arm, frames):
    """World positions (F,B,3) of the bone heads, as Blender evaluates them."""
    from blender_reldesc import adapter
    out = []
    for f in frames:
        scene.frame_set(int(f))
        head, _, _ = adapter.read_pose(arm)
        out.append(adapter.to_world(adapter.world_matrix(arm), head))
    return np.stack(out)


def fcurve_snapshot(action):
    from blender_reldesc.adapter import _fcurves
    snap = {}
    for fc in _fcurves(action):
        co = np.empty(len(fc.keyframe_points) * 2, np.float32)
        fc.keyframe_points.foreach_get("co", co)
        snap[(fc.data_path, fc.array_index)] = co
    return snap
