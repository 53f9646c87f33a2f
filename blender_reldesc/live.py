"""Live preview: a frame-change handler that poses the armature from the environment now.

The handler is registered only while a scene has Live Preview on. It caches
the stored binding and a core ``LiveSession`` per armature (cleared on file
load), reads the evaluated environment of the current frame and sets the
pose; it never calls ``frame_set`` or operators.
"""

from __future__ import annotations

import time

import bpy
import numpy as np
from bpy.app.handlers import persistent

from . import adapter
from .core import LiveSession, RelDescError

_sessions = {}
last_seconds = 0.0
last_error = ""


def session_for(arm):
    """The cached stored binding and core LiveSession of ``arm`` (built on first use)."""
    from .jobs import Bound, bone_overrides, hinge_overrides
    key = arm.name
    entry = _sessions.get(key)
    if entry is None:
        bound = Bound(arm)
        entry = {"bound": bound, "influence_dirty": True,
                 "session": LiveSession(bound.binding, affinity_override=bone_overrides(arm, bound) or None,
                                        bone_lengths=bound.bone_lengths()[0],
                                        hinges=hinge_overrides(arm, bound) or None)}
        entry["watched"] = {ob.name for ob in bound.objects} | {ob.data.name for ob in bound.objects}
        _sessions[key] = entry
    return entry


def _refresh_influence(scene, entry):
    """Re-read painted influence after an edit (vertex groups need a Python loop: not every frame)."""
    from .jobs import read_influence
    if entry["influence_dirty"]:
        entry["session"].set_influence(read_influence(scene, entry["bound"]))
        entry["influence_dirty"] = False


def clear():
    _sessions.clear()


def pose_frame(scene, depsgraph, arm):
    """Pose ``arm`` at the scene's current frame; returns the joint positions (J,3)."""
    entry = session_for(arm)
    _refresh_influence(scene, entry)
    bound, session = entry["bound"], entry["session"]
    verts, _, counts = adapter.read_environment(depsgraph, bound.objects, triangles=False)
    bound.check_counts(counts)
    f = int(np.clip(scene.frame_current - bound.frames[0], 0, len(bound.frames) - 1))
    p = session.pose(f, verts)
    quats, locs = bound.pose_channels(p[None], frames=np.array([f]))
    adapter.set_pose(arm, bound.rig, quats[0], locs[0], bound.location_mask())
    return p


@persistent
def on_frame_change(scene, depsgraph=None):
    global last_seconds, last_error
    settings = getattr(scene, "reldesc", None)
    if settings is None or not settings.live or settings.armature is None:
        return
    t0 = time.perf_counter()
    try:
        pose_frame(scene, depsgraph or bpy.context.evaluated_depsgraph_get(), settings.armature)
        last_error = ""
    except RelDescError as e:
        if str(e) != last_error:
            print(f"reldesc live preview: {e}")
        last_error = str(e)
    last_seconds = time.perf_counter() - t0


@persistent
def on_depsgraph_update(scene, depsgraph=None):
    """Follow edits and weight painting of the environment without a frame change."""
    settings = getattr(scene, "reldesc", None)
    if settings is None or not settings.live or settings.armature is None or depsgraph is None:
        return
    entry = _sessions.get(settings.armature.name)
    if entry is None:
        return
    touched = any(getattr(u.id, "original", u.id).name in entry["watched"] for u in depsgraph.updates
                  if isinstance(u.id, (bpy.types.Object, bpy.types.Mesh)))
    if touched:
        entry["influence_dirty"] = True
        on_frame_change(scene, depsgraph)


@persistent
def on_load(_dummy=None):
    clear()
    for scene in bpy.data.scenes:
        if getattr(scene, "reldesc", None) is not None and scene.reldesc.live:
            _add()
            return
    _remove()


def _add():
    if on_frame_change not in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.append(on_frame_change)
    if on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.append(on_depsgraph_update)


def _remove():
    while on_frame_change in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.remove(on_frame_change)
    while on_depsgraph_update in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.remove(on_depsgraph_update)


def sync(scene):
    """Add or remove the handler to match the scene's Live Preview setting."""
    clear()
    if scene.reldesc.live:
        _add()
    else:
        _remove()


def register():
    bpy.app.handlers.load_post.append(on_load)


def unregister():
    _remove()
    while on_load in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(on_load)
    clear()
