"""Meshes: environment geometry (evaluated, world space, one frame or every frame), vertex
groups as arrays, painted influence, boolean face attributes."""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

from .placement import to_world_each
from .scene import SceneError


#: Object types Blender evaluates to surfaces (a curve counts when its bevel or extrusion gives it faces).
GEOMETRY_TYPES = {'MESH', 'CURVE', 'SURFACE', 'FONT', 'META'}


@dataclass(eq=False)
class Part:
    """One piece of an environment as Blender evaluates it: an object of the collection, or one
    instance its objects make (a collection instance, nested or linked, or geometry-nodes
    instances), each with its own world matrix.

    ``name`` is the object's name, or ``instancer/object`` for an instance (`` #k`` added when the
    instancer makes several of the same object, numbered in a stable order); ``object`` is the
    original object whose geometry it is (its vertex groups, modifiers and data), ``instancer``
    the original object of the collection that makes the instance (None for a plain object) and
    ``key`` what finds the instance again in an evaluated depsgraph."""

    name: str
    object: object
    instancer: object = None
    key: tuple = ()

    @property
    def data(self):
        return self.object.data

    @property
    def vertex_groups(self):
        return self.object.vertex_groups

    @property
    def modifiers(self):
        return self.object.modifiers

    @property
    def type(self):
        return self.object.type

    def watched(self):
        """Names of the datablocks whose change changes this part (the live preview's)."""
        out = {self.object.name}
        if self.object.data is not None:
            out.add(self.object.data.name)
        if self.instancer is not None:
            out.add(self.instancer.name)
        return out


def _makes_instances(ob):
    """Whether ``ob`` may make instances: a collection, vertex or face instancer, or geometry nodes."""
    if ob.instance_type == 'COLLECTION':
        return ob.instance_collection is not None
    return ob.instance_type in {'VERTS', 'FACES'} or any(m.type == 'NODES' for m in ob.modifiers)


def _instances(depsgraph, owners):
    """``(key, instance)`` of the evaluated depsgraph's instances made by objects named ``owners``
    (a set), nested instances included (the outermost instancer owns them). An instance is only
    valid during the iteration: read it there."""
    if not owners:
        return
    for inst in depsgraph.object_instances:
        if inst.is_instance:
            owner = inst.parent.original
            if owner.name in owners:
                yield (owner.name, tuple(inst.persistent_id), inst.object.original.name), inst


def surfaces(collection_name):
    """``(objects with faces, names without geometry, names without faces)`` of a collection's
    environment (``environment_objects``; a curve without bevel or extrusion has no faces): what
    Bind binds and a retarget stands on; the caller warns of the others."""
    parts, ignored = environment_objects(collection_name)
    faces = [r[3][1] for r in read_parts(None, parts, triangles=False)]
    return ([p for p, t in zip(parts, faces) if t], ignored, [p.name for p, t in zip(parts, faces) if not t])


def environment_objects(collection_name, depsgraph=None):
    """The parts of a collection's environment (``Part``; its child collections included) sorted by
    name, and the names of its objects that give no geometry (lights, cameras, empties instancing
    nothing: ignored, the caller warns).

    Its objects of a ``GEOMETRY_TYPES`` type are parts themselves (read as Blender evaluates them,
    hidden or not); the instances its instancers make are parts too, each where the depsgraph
    puts it (an instancer must be visible for Blender to make its instances)."""
    if not collection_name:
        raise SceneError("no environment collection given: choose the collection holding the scene's meshes")
    coll = bpy.data.collections.get(collection_name)
    if coll is None:
        raise SceneError(f"no collection named '{collection_name}' in the file")
    members = {ob.name: ob for ob in coll.all_objects}
    parts = [Part(ob.name, ob, None, (ob.name, (), ob.name)) for ob in members.values() if ob.type in GEOMETRY_TYPES]
    instancers = {n for n, ob in members.items() if _makes_instances(ob)}
    found = []
    for key, inst in _instances(depsgraph or (instancers and bpy.context.evaluated_depsgraph_get()), instancers):
        if inst.object.type in GEOMETRY_TYPES:
            found.append(Part(f"{key[0]}/{inst.object.original.name}", inst.object.original, members[key[0]], key))
    # Several instances of one object by one instancer: numbered in the order of their persistent ids.
    by_name = {}
    for part in found:
        by_name.setdefault(part.name, []).append(part)
    for name, same in by_name.items():
        if len(same) > 1:
            for k, part in enumerate(sorted(same, key=lambda p: p.key[1]), 1):
                part.name = f"{name} #{k}"
        parts.extend(same)
    parts.sort(key=lambda p: p.name)
    used = {p.key[0] for p in parts}
    ignored = sorted(n for n in members if n not in used)
    if not parts:
        raise SceneError(f"collection '{collection_name}' holds no geometry (meshes, curves, text, collection "
                         "instances): put the environment's objects in it")
    return parts, ignored


def is_animated(ob, _seen=None):
    """True if the object's evaluated geometry can change over time (a ``Part``: its object or its
    instancer)."""
    if isinstance(ob, Part):
        return is_animated(ob.object, _seen) or (ob.instancer is not None and is_animated(ob.instancer, _seen))
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


def _as_parts(objects):
    return [p if isinstance(p, Part) else Part(p.name, p, None, (p.name, (), p.name)) for p in objects]


def _mesh_arrays(ev, triangles):
    """Local vertices (V,3) and triangles (T,3) (None without ``triangles``) of evaluated object ``ev``."""
    me = ev.to_mesh()
    try:
        me.calc_loop_triangles()
        V, T = len(me.vertices), len(me.loop_triangles)
        co = np.empty(V * 3, np.float32)
        me.vertices.foreach_get("co", co)
        tri = None
        if triangles:
            tri = np.empty(T * 3, np.int32)
            me.loop_triangles.foreach_get("vertices", tri)
            tri = tri.reshape(-1, 3).astype(np.int64)
    finally:
        ev.to_mesh_clear()
    return co.reshape(V, 3).astype(float), tri, (V, T)


def read_parts(depsgraph, objects, triangles=True):
    """Per part of ``objects`` (``Part`` or objects): ``(matrix (4,4), local vertices (V,3),
    triangles (T,3) or None, (V, T))`` as the depsgraph evaluates it; SceneError naming an
    instance that is gone. Geometry an instancer repeats is converted once."""
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    parts = _as_parts(objects)
    out = [None] * len(parts)
    wanted = {}
    for i, p in enumerate(parts):
        if p.instancer is None:
            ev = p.object.evaluated_get(depsgraph)
            out[i] = (np.array(ev.matrix_world, dtype=float), *_mesh_arrays(ev, triangles))
        else:
            wanted[p.key] = i
    cache = {}
    for key, inst in _instances(depsgraph, {k[0] for k in wanted}):
        i = wanted.get(key)
        if i is None:
            continue
        ev = inst.object
        data = getattr(ev, "data", None)
        shared = (ev.original.name, data.as_pointer() if data is not None else 0)
        if shared not in cache:
            cache[shared] = _mesh_arrays(ev, triangles)
        out[i] = (np.array(inst.matrix_world, dtype=float), *cache[shared])
    missing = [p.name for p, o in zip(parts, out) if o is None]
    if missing:
        raise SceneError(f"the environment's {', '.join(missing)} is no longer made by its instancer (hidden, "
                         "or its collection changed): show it, or re-bind")
    return out


def read_environment(depsgraph, objects, triangles=True):
    """Evaluated world-space geometry of ``objects`` (``Part`` or objects) as one mesh.

    Returns ``vertices (V,3)``, ``triangles (T,3)`` (None without
    ``triangles``, for callers that know the topology) and per part
    ``(vertex_count, triangle_count)``.
    """
    read = read_parts(depsgraph, objects, triangles)
    tris, base = [], 0
    for _, co, tri, (V, _) in read:
        if triangles:
            tris.append(tri + base)
        base += V
    verts = np.concatenate(to_world_each([(m, co) for m, co, _, _ in read]))
    return verts, (np.concatenate(tris) if triangles else None), [r[3] for r in read]


def part_matrices(objects, depsgraph=None):
    """(P,4,4) world matrices of the parts now (no geometry converted), NaN for a part whose
    geometry can move over time (its placement then compares at no single frame)."""
    parts = _as_parts(objects)
    out = np.full((len(parts), 4, 4), np.nan)
    wanted = {}
    for i, p in enumerate(parts):
        if p.instancer is None:
            out[i] = np.array(p.object.matrix_world, dtype=float)
        else:
            wanted[p.key] = i
    if wanted:
        for key, inst in _instances(depsgraph or bpy.context.evaluated_depsgraph_get(), {k[0] for k in wanted}):
            if key in wanted:
                out[wanted[key]] = np.array(inst.matrix_world, dtype=float)
    out[[is_animated(p) for p in parts]] = np.nan
    return out


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
    parts = _as_parts(objects)
    counts = [r[3][0] for r in read_parts(depsgraph, parts, triangles=False)]
    out = []
    for part, V in zip(parts, counts):
        ob = part.object
        vg = ob.vertex_groups.get(group_name) if group_name and ob.type == 'MESH' else None
        w = None
        if vg is not None:
            ev = ob.evaluated_get(depsgraph)
            me = ev.to_mesh()
            try:
                w = vertex_weights(ob, me, [vg.index])[:, 0]
            finally:
                ev.to_mesh_clear()
        # A part whose geometry is not its object's own (geometry-nodes instances) has no weights.
        out.append(w if w is not None and len(w) == V else np.ones(V))
    return np.concatenate(out) if out else np.zeros(0)


def influence(objects, group):
    """The painted influence of ``objects`` (V,), or None when none of them has vertex group
    ``group``; and the names of meshes outside them that have it (ignored: the caller warns)."""
    if not group:
        return None, []
    names = {p.object.name for p in _as_parts(objects)}
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


def bound_objects(environment, meta, placed=False):
    """The parts of collection ``environment`` (the bound one, by its name now) that were bound
    (``meta['objects']``); SceneError when one is gone or a new one appeared (parts that had no
    surface at bind, ``meta['no_surface']``, aside). With ``placed``, also their matrices now
    (``part_matrices``)."""
    objects, _ = environment_objects(environment)
    names = [ob.name for ob in objects]
    bound = list(meta["objects"])
    skipped = set(meta.get("no_surface", ()))
    if [n for n in names if n not in skipped] != bound:
        raise SceneError(f"the meshes of '{meta['environment']}' changed since bind "
                         f"({', '.join(names)} now, {', '.join(bound)} then): re-bind")
    objects = [ob for ob in objects if ob.name not in skipped]
    return (objects, part_matrices(objects)) if placed else objects


def topology_matches(objects, meta):
    """A cheap check for the panel: vertex counts of the meshes without modifiers (the bake
    checks the evaluated geometry, and that of curves, text and instances made by nodes)."""
    return all(ob.type != 'MESH' or ob.modifiers or len(ob.data.vertices) == v
               for ob, v in zip(objects, meta["vertex_counts"]))


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
    """A mesh object's (or a ``Part``'s) world geometry and its segment labels: ``(verts, tris, labels (T,) or None,
    names, kind)``. Labels come from its vertex groups (those not in ``ignore``: a triangle takes
    the group most of its corners are in, -1 none), else from its boolean face attributes (a
    face's first one set), else None."""
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    verts, tris, _ = read_environment(depsgraph, [ob])
    ob = _as_parts([ob])[0].object                  # a part's labels are its object's
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
