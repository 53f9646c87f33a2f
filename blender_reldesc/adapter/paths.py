"""Paths: curve objects (or meshes whose edges form a chain) as world-space polylines."""

from __future__ import annotations

import bpy
import numpy as np

from .placement import to_world
from .scene import SceneError


def read_path(ob, depsgraph=None):
    """(P,3) world-space polyline of a curve object (evaluated: its resolution, modifiers) or
    of a mesh object whose edges form a chain."""
    if ob.type not in ('CURVE', 'MESH'):
        raise SceneError(f"'{ob.name}' is a {ob.type.lower()}: a path must be a curve (or a mesh of edges)")
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        V = len(me.vertices)
        co = np.empty(V * 3, np.float32)
        me.vertices.foreach_get("co", co)
        E = len(me.edges)
        edges = np.empty(E * 2, np.int32)
        me.edges.foreach_get("vertices", edges)
    finally:
        ev.to_mesh_clear()
    points = to_world(np.array(ev.matrix_world, dtype=float), co.reshape(V, 3).astype(float))
    if V < 2:
        raise SceneError(f"path '{ob.name}' has no length: draw a curve with at least two points")
    order = _chain(edges.reshape(E, 2), V) if E else np.arange(V)
    return points[order]


def _chain(edges, count):
    """Vertex order along the first chain of ``edges`` (from an end, or anywhere on a loop)."""
    nbrs = [[] for _ in range(count)]
    for a, b in edges.tolist():
        nbrs[a].append(b)
        nbrs[b].append(a)
    ends = [v for v in range(count) if len(nbrs[v]) == 1]
    start = ends[0] if ends else int(edges[0, 0])
    order, prev, v = [start], -1, start
    while True:
        nxt = [n for n in nbrs[v] if n != prev and n not in order[-2:]]
        if not nxt or nxt[0] == start:
            break
        prev, v = v, nxt[0]
        order.append(v)
    return np.asarray(order)


def read_paths(path=None, paths=None):
    """``(names, polylines)``: the curve object ``path``, or every curve of collection ``paths``
    (one per character, by name)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    if paths:
        coll = bpy.data.collections.get(paths)
        if coll is None:
            raise SceneError(f"no collection named '{paths}' in the file")
        curves = sorted((ob for ob in coll.all_objects if ob.type == 'CURVE'), key=lambda ob: ob.name)
        if not curves:
            raise SceneError(f"collection '{paths}' holds no curves: put one path curve per character in it")
        return [ob.name for ob in curves], [read_path(ob, depsgraph) for ob in curves]
    if not path:
        raise SceneError("no path given: choose a curve for the characters to walk along")
    ob = bpy.data.objects.get(path)
    if ob is None:
        raise SceneError(f"no object named '{path}' in the file")
    return [ob.name], [read_path(ob, depsgraph)]
