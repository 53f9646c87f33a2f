"""Point caches: a garment's vertices as its source plays, and the Mesh Cache modifier that plays
a written PC2 cache back."""

from __future__ import annotations

import hashlib
import os
import tempfile

import bpy
import numpy as np

from .actions import armature_slot, assign
from .mesh import read_environment_frames
from .scene import SceneError

#: The Mesh Cache modifier the bake adds to a garment.
MODIFIER = "RelDesc Garment"


def garment_object(name, arm):
    """The mesh object ``name`` to carry as a garment of ``arm`` (SceneError saying what is wrong)."""
    ob = bpy.data.objects.get(name or "")
    if ob is None:
        raise SceneError(f"no object named '{name}' to carry as a garment: give a mesh object")
    if ob.type != 'MESH':
        raise SceneError(f"garment '{name}' is a {ob.type.lower()}, not a mesh: give the garment's mesh object")
    if ob == arm:
        raise SceneError("the armature cannot be its own garment")
    return ob


def source_vertices(scene, arm, source, frames, garment):
    """(F,V,3) world vertices of ``garment`` over ``frames`` with ``arm`` playing ``source``
    and the garment's own RelDesc modifier off, and its triangles; the armature's action and the
    modifier are put back after."""
    mod = garment.modifiers.get(MODIFIER)
    shown = None if mod is None else (mod.show_viewport, mod.show_render)
    ad = arm.animation_data
    before = (ad.action, ad.action_slot) if ad is not None else (None, None)
    try:
        if mod is not None:
            mod.show_viewport = mod.show_render = False
        assign(arm, source, armature_slot(arm, source))
        verts, tris, _ = read_environment_frames(scene, [garment], frames)
    finally:
        if before[0] is not None:
            assign(arm, *before)
        if mod is not None:
            mod.show_viewport, mod.show_render = shown
    return verts, tris


def skinned_to(garment, arm):
    """Whether ``garment`` plays through ``arm``'s bones (an Armature modifier on it, or parented
    to one of its bones)."""
    if garment.parent == arm and garment.parent_type == 'BONE':
        return True
    return any(m.type == 'ARMATURE' and m.object == arm for m in garment.modifiers)


def data_digest(garment):
    """A digest of the garment's own data: its vertices, vertex group weights and shape keys (what
    an edit of the garment itself changes)."""
    me = garment.data
    h = hashlib.blake2b(digest_size=16)
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    h.update(co.tobytes())
    weights = [(v.index, g.group, g.weight) for v in me.vertices for g in v.groups]
    h.update(np.array(weights, np.float32).tobytes())
    h.update("|".join(g.name for g in garment.vertex_groups).encode())
    if me.shape_keys is not None:
        for key in me.shape_keys.key_blocks:
            kc = np.empty(len(key.data) * 3, np.float32)
            key.data.foreach_get("co", kc)
            h.update(key.name.encode() + kc.tobytes())
    return h.hexdigest()


def cache_path(garment, kind=""):
    """Beside the .blend (the temporary folder for an unsaved file); ``kind`` "source": the
    garment's source as bound (``jobs.garment``), else the carried garment the bake writes."""
    folder = bpy.path.abspath("//") if bpy.data.filepath else tempfile.gettempdir()
    return os.path.join(folder, f"{bpy.path.clean_name(garment.name)}.reldesc{'.' + kind if kind else ''}.pc2")


def show_cache(garment, path, frame_start):
    """Point the garment's Mesh Cache modifier (added last in the stack when missing) at ``path``."""
    mod = garment.modifiers.get(MODIFIER) or garment.modifiers.new(MODIFIER, 'MESH_CACHE')
    mod.cache_format = 'PC2'
    mod.filepath = path
    mod.frame_start = float(frame_start)
    mod.frame_scale = 1.0
    mod.forward_axis, mod.up_axis = 'POS_Y', 'POS_Z'
    return mod
