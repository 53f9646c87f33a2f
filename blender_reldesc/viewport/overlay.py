"""Viewport overlay (gpu draw handler): descriptors, relative vectors, targets.

Registered only while a scene's overlay toggle is on, so it costs nothing when
off. The arrays come from ``core.overlay.overlay_geometry``; this module only
caches them per (frame, active bone, environment state) and draws.
"""

from __future__ import annotations

import bpy
import numpy as np

from .. import adapter
from ..core.overlay import contact_geometry, overlay_geometry
from . import live

_handle = None
_cache = {"key": None, "geometry": None}


def _geometry(context):
    scene = context.scene
    s = scene.reldesc
    arm = s.armature
    if arm is None or adapter.storage.stored_meta(arm) is None:
        return None
    entry = live.session_for(arm, scene)
    bound = entry["bound"]
    depsgraph = context.evaluated_depsgraph_get()
    verts, _, counts = adapter.mesh.read_environment(depsgraph, bound.objects, triangles=False)
    bound.check_counts(counts)
    f = int(np.clip(scene.frame_current - bound.frames[0], 0, len(bound.frames) - 1))
    pb = getattr(context, "active_pose_bone", None)
    active = pb.name if pb is not None else (arm.data.bones.active.name if arm.data.bones.active else None)
    sk = bound.binding.skeleton
    joint = sk.names.index(active) if active in sk.names else None
    key = (arm.name, f, joint, s.overlay_color_by, s.overlay_targets, hash(verts.tobytes()),
           adapter.storage.contacts_state(arm))
    if _cache["key"] == key:
        return _cache["geometry"]
    at = np.array([f])
    mesh = bound.binding.mesh.with_vertices(bound.into_bind(verts, at))     # where the character was bound
    verts = mesh.vertices
    session = entry["session"]
    influence = session.rig.influence
    targets = solved = None
    if s.overlay_targets:
        t, _ = session.rig.targets(mesh, [f])
        targets = t[0]
        solved = session.pose(f, verts)
    g = overlay_geometry(bound.binding, mesh, f, joint, influence, s.overlay_color_by, targets=targets,
                         solved=solved)
    c = contact_geometry(adapter.storage.stored_contacts(arm))
    for key in ("points", "point_colors", "lines", "line_colors"):
        g[key] = np.concatenate([g[key], c[key]])
    for key in ("points", "lines", "joints"):                  # drawn where the armature is now
        if len(g[key]):
            g[key] = bound.out_of_bind(np.asarray(g[key], float)[None], at)[0]
    _cache.update(key=key, geometry=g)
    return g


def draw():
    import gpu
    from gpu_extras.batch import batch_for_shader
    context = bpy.context
    scene = context.scene
    if scene is None or not getattr(scene, "reldesc", None) or not scene.reldesc.show_overlay:
        return
    try:
        g = _geometry(context)
    except Exception:            # never let a drawing error spam the UI; the panel shows status
        return
    if g is None:
        return
    size = scene.reldesc.overlay_size
    shader = gpu.shader.from_builtin('FLAT_COLOR')
    gpu.state.point_size_set(size)
    gpu.state.line_width_set(max(1.0, size / 4))
    gpu.state.blend_set('ALPHA')
    for pts, cols, kind in ((g["points"], g["point_colors"], 'POINTS'), (g["lines"], g["line_colors"], 'LINES'),
                            (g["joints"], g["joint_colors"], 'POINTS')):
        if len(pts):
            batch = batch_for_shader(shader, kind, {"pos": pts.astype(np.float32).tolist(),
                                                    "color": cols.astype(np.float32).tolist()})
            batch.draw(shader)
    gpu.state.blend_set('NONE')
    gpu.state.point_size_set(1.0)


def sync(scene):
    """Add or remove the draw handler to match the scene's overlay toggle."""
    global _handle
    want = scene.reldesc.show_overlay
    if want and _handle is None:
        _handle = bpy.types.SpaceView3D.draw_handler_add(draw, (), 'WINDOW', 'POST_VIEW')
    elif not want and _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, 'WINDOW')
        _handle = None
    _cache.update(key=None, geometry=None)


def register():
    pass


def unregister():
    global _handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, 'WINDOW')
        _handle = None
