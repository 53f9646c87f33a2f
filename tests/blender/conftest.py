"""Blender-level tests: the real operators on a fresh factory scene, with the bpy wheel."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy", reason="the bpy wheel is installed by `make test`")

import blender_reldesc  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def registered():
    blender_reldesc.register()
    yield
    blender_reldesc.unregister()


@pytest.fixture
def scene():
    """A fresh generated scene: 'Walker' walks 40 frames over 'Bridge' under 'Beam'."""
    from blender_reldesc import demo
    scene, arm, env, bridge, beam = demo.build_scene(frames=40, deck_cells=(40, 8))
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    return scene, arm, env, bridge, beam


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
