"""Meshes: environment geometry (evaluated, world space, one frame or every frame), vertex
groups as arrays, painted influence, boolean face attributes."""

from __future__ import annotations

import bpy
import numpy as np

from .placement import to_world_each
from .scene import SceneError


def environment_objects(collection_name):
    """Mesh objects of a collection (and its children), and the names of ignored non-meshes."""
    if not collection_name:
        raise SceneError("no environment collection given: choose the collection holding the scene's meshes")
    coll = bpy.data.collections.get(collection_name)
    if coll is None:
        raise SceneError(f"no collection named '{collection_name}' in the file")
    meshes = [ob for ob in coll.all_objects if ob.type == 'MESH']
    ignored = sorted(ob.name for ob in coll.all_objects if ob.type != 'MESH')
    if not meshes:
        raise SceneError(f"collection '{collection_name}' holds no mesh objects: put the environment's "
                         "meshes in it")
    meshes.sort(key=lambda ob: ob.name)
    return meshes, ignored


def is_animated(ob, _seen=None):
    """True if the object's evaluated geometry can change over time."""
    seen = _seen if _seen is not None else set()
    if ob is None or ob.name in seen:
        return False
    seen.add(ob.name)
    ad = ob.animation_data
    if ad and (ad.action or len(ad.drivers) or len(ad.nla_tracks)):
        return True
    data = getattr(ob, "data", None)
    keys = getattr(data, "shape_keys", None)
    if keys and keys.animation_data and (keys.animation_data.action or len(keys.animation_data.drivers)):
        return True
    if data is not None and data.animation_data and data.animation_data.action:
        return True
    if len(getattr(ob, "constraints", ())) or is_animated(ob.parent, seen):
        return True
    for mod in getattr(ob, "modifiers", ()):
        target = getattr(mod, "object", None)
        if target is not None and is_animated(target, seen):
            return True
    return False


def read_environment(depsgraph, objects, triangles=True):
    """Evaluated world-space geometry of ``objects`` as one mesh.

    Returns ``vertices (V,3)``, ``triangles (T,3)`` (None without
    ``triangles``, for callers that know the topology) and per object
    ``(vertex_count, triangle_count)``.
    """
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    verts, tris, counts = [], [], []
    base = 0
    for ob in objects:
        ev = ob.evaluated_get(depsgraph)
        me = ev.to_mesh()
        try:
            me.calc_loop_triangles()
            V, T = len(me.vertices), len(me.loop_triangles)
            co = np.empty(V * 3, np.float32)
            me.vertices.foreach_get("co", co)
            tri = np.empty(T * 3 if triangles else 0, np.int32)
            if triangles:
                me.loop_triangles.foreach_get("vertices", tri)
        finally:
            ev.to_mesh_clear()
        verts.append((np.array(ev.matrix_world, dtype=float), co.reshape(V, 3).astype(float)))
        tris.append(tri.reshape(-1, 3).astype(np.int64) + base)
        counts.append((V, T))
        base += V
    return np.concatenate(to_world_each(verts)), (np.concatenate(tris) if triangles else None), counts


def read_environment_frames(scene, objects, frames, progress=None):
    """(F,V,3) vertices of an animated environment, its triangles and counts."""
    current = scene.frame_current, scene.frame_subframe
    out = None
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            v, t, counts = read_environment(bpy.context.evaluated_depsgraph_get(), objects)
            if out is None:
                out = np.empty((len(frames),) + v.shape)
                tris, first_counts = t, counts
            elif counts != first_counts:
                raise SceneError("the environment's vertex count changes during the animation: "
                                 "apply or remove the modifier that changes it")
            out[i] = v
            if progress is not None and i % 25 == 0:
                progress(i, len(frames))
    finally:
        scene.frame_set(current[0], subframe=current[1])
    return out, tris, first_counts


def vertex_weights(ob, me, groups):
    """(V,G) weights of ``me`` (``ob``'s mesh, evaluated or not) in vertex groups ``groups`` (indices
    into ``ob.vertex_groups``); 0 where a vertex is not in a group. Vertex groups are not
    attributes: this is the one Python loop over vertices, for every reader of vertex groups."""
    column = {int(g): k for k, g in enumerate(groups)}
    out = np.zeros((len(me.vertices), len(column)))
    if not column:
        return out
    for v in me.vertices:
        for g in v.groups:
            k = column.get(g.group)
            if k is not None:
                out[v.index, k] = g.weight
    return out


def vertex_influence(objects, group_name, depsgraph=None):
    """(V,) painted influence from vertex group ``group_name`` (1 where absent).

    Read from the evaluated mesh (vertex groups survive modifier evaluation),
    so the weights match the evaluated geometry the environment is read from,
    Subdivision and other generative modifiers included.
    """
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    parts = []
    for ob in objects:
        ev = ob.evaluated_get(depsgraph)
        me = ev.to_mesh()
        try:
            vg = ob.vertex_groups.get(group_name) if group_name else None
            w = np.ones(len(me.vertices)) if vg is None else vertex_weights(ob, me, [vg.index])[:, 0]
        finally:
            ev.to_mesh_clear()
        parts.append(w)
    return np.concatenate(parts) if parts else np.zeros(0)


def influence(objects, group):
    """The painted influence of ``objects`` (V,), or None when none of them has vertex group
    ``group``; and the names of meshes outside them that have it (ignored: the caller warns)."""
    if not group:
        return None, []
    names = {ob.name for ob in objects}
    stray = sorted(ob.name for ob in bpy.data.objects
                   if ob.type == 'MESH' and ob.name not in names and group in ob.vertex_groups)
    if not any(group in ob.vertex_groups for ob in objects):
        return None, stray
    return vertex_influence(objects, group), stray


def read_environment_now(scene, objects, frames):
    """The environment over ``frames``: (V,3) vertices when nothing in it can move, else (F,V,3);
    its triangles, counts per object, and whether it is animated."""
    if any(is_animated(ob) for ob in objects):
        verts, tris, counts = read_environment_frames(scene, objects, frames)
        return verts, tris, counts, True
    verts, tris, counts = read_environment(bpy.context.evaluated_depsgraph_get(), objects)
    return verts, tris, counts, False


def read_bound_environment(scene, objects, frames, meta, group=None):
    """The bound environment now (static (V,3), or animated over ``frames``), checked against the
    topology stored at bind (``meta``: SceneError naming the meshes that changed), and its painted
    influence from vertex group ``group`` (``influence``: the weights or None, and the meshes
    outside the environment that have the group)."""
    if meta["animated"] or any(is_animated(ob) for ob in objects):
        verts, _, counts = read_environment_frames(scene, objects, frames)
    else:
        verts, _, counts = read_environment(bpy.context.evaluated_depsgraph_get(), objects, triangles=False)
    check_counts(objects, counts, meta)
    weights, stray = influence(objects, group)
    return verts, weights, stray


def check_counts(objects, counts, meta):
    if ([c[0] for c in counts] != list(meta["vertex_counts"])
            or [c[1] for c in counts] != list(meta["triangle_counts"])):
        changed = [ob.name for ob, c, v, t in zip(objects, counts, meta["vertex_counts"],
                                                  meta["triangle_counts"]) if c != (v, t)]
        raise SceneError(f"environment topology changed since bind ({', '.join(changed)}): re-bind")


def bound_objects(environment, meta):
    """The meshes of collection ``environment`` (the bound one, by its name now); SceneError when
    they are not the ones bound (``meta['objects']``)."""
    objects, _ = environment_objects(environment)
    names = [ob.name for ob in objects]
    if names != list(meta["objects"]):
        raise SceneError(f"the meshes of '{meta['environment']}' changed since bind "
                         f"({', '.join(names)} now, {', '.join(meta['objects'])} then): re-bind")
    return objects


def topology_matches(objects, meta):
    """A cheap check for the panel: vertex counts of the meshes without modifiers (the bake
    checks the evaluated geometry)."""
    return all(ob.modifiers or len(ob.data.vertices) == v for ob, v in zip(objects, meta["vertex_counts"]))


#: Boolean face attributes Blender itself makes (not segment labels).
BUILTIN_FACE_FLAGS = {"sharp_face"}


def face_flag_labels(ob, depsgraph):
    """Per triangle the first of the object's boolean face attributes set on it (-1: none),
    and their names; (None, []) when it has none. Attributes whose names start with '.' are
    Blender's own (selection, hiding)."""
    ev = ob.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        flags = [a for a in me.attributes if a.domain == 'FACE' and a.data_type == 'BOOLEAN'
                 and not a.name.startswith(".") and a.name not in BUILTIN_FACE_FLAGS]
        if not flags:
            return None, []
        me.calc_loop_triangles()
        poly = np.empty(len(me.loop_triangles), np.int32)
        me.loop_triangles.foreach_get("polygon_index", poly)
        values = np.zeros((len(me.polygons), len(flags)), bool)
        for k, a in enumerate(flags):
            col = np.zeros(len(me.polygons), bool)
            a.data.foreach_get("value", col)
            values[:, k] = col
        names = [a.name for a in flags]
    finally:
        ev.to_mesh_clear()
    per_tri = values[poly]
    return np.where(per_tri.any(axis=1), per_tri.argmax(axis=1), -1), names


def segment_labels(ob, ignore=(), depsgraph=None):
    """A mesh object's world geometry and its segment labels: ``(verts, tris, labels (T,) or None,
    names, kind)``. Labels come from its vertex groups (those not in ``ignore``: a triangle takes
    the group most of its corners are in, -1 none), else from its boolean face attributes (a
    face's first one set), else None."""
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    verts, tris, _ = read_environment(depsgraph, [ob])
    groups = [vg for vg in ob.vertex_groups if vg.name not in ignore]
    if not groups:
        labels, names = face_flag_labels(ob, depsgraph)
        return verts, tris, labels, names, "face attributes"
    ev = ob.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        weight = vertex_weights(ob, me, [vg.index for vg in groups])
    finally:
        ev.to_mesh_clear()
    corner = weight[tris].sum(axis=1)                        # (T, G) summed over the corners
    labels = np.where(corner.max(axis=1) >= 1.5, corner.argmax(axis=1), -1)   # most corners in a group
    return verts, tris, labels, [vg.name for vg in groups], "vertex groups"
