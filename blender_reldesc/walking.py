"""Locomotion in Blender: walk an armature's locomotion action along path curves over a
terrain collection, one character per path (``core.locomotion``).

``WalkJob`` has the three phases of the other jobs: ``read`` (Blender data), ``compute``
(core only: safe in a worker thread) and ``write``. Writing creates one character per path —
a linked duplicate of the armature (its armature data shared) with linked duplicates of the
meshes it deforms — in a collection ``<armature> walk``, each with its own action
``<source action>.walk.NNN``. The armature and its action are never changed. Walking again
replaces the characters and actions a previous walk of the same armature made (an action
something else also uses is kept, and the new one numbered).
"""

from __future__ import annotations

import time

import bpy
import numpy as np

from . import adapter
from .adapter import SceneError
from .core import TriMesh
from .core.locomotion import bind_carpet, lateral_paths, walk
from .core.skeleton.armature import (adapted_pose, axis_angle_from_quat, basis_from_pose, euler_from_quat,
                                     joint_layout, sign_continuous, split_basis)

#: Custom property on the characters and actions a walk made: the armature's name.
WALK_KEY = "reldesc_walk"
#: Fraction of the gait cycle between neighbours of a crowd (the golden ratio's: never in step).
CROWD_STAGGER = 0.618034


def walk_collection_name(arm):
    return f"{arm.name} walk"


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
    points = adapter.to_world(np.array(ev.matrix_world, dtype=float), co.reshape(V, 3).astype(float))
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


class WalkJob:
    """Walk ``arm``'s action along paths over the meshes of collection ``terrain``.

    path : a curve object's name, walked by ``crowd`` characters ``spacing`` apart across it;
    paths : or a collection's name, one character per curve in it (by name).
    """

    label = "walk"

    def __init__(self, scene, arm, terrain, path=None, paths=None, crowd=1, spacing=1.0, warn=print, workers=1):
        self.scene, self.arm, self.terrain, self.workers = scene, arm, terrain, workers
        self.path, self.paths, self.crowd, self.spacing, self.warn = path, paths, crowd, spacing, warn

    def read(self):
        t0 = time.perf_counter()
        scene, arm = self.scene, self.arm
        if int(self.crowd) < 1:
            raise SceneError(f"the crowd count is {self.crowd}: walk at least one character")
        if not np.isfinite(self.spacing) or self.spacing < 0:
            raise SceneError(f"the crowd spacing must be a distance >= 0, got {self.spacing}")
        depsgraph = bpy.context.evaluated_depsgraph_get()
        if self.paths:
            coll = bpy.data.collections.get(self.paths)
            if coll is None:
                raise SceneError(f"no collection named '{self.paths}' in the file")
            curves = sorted((ob for ob in coll.all_objects if ob.type == 'CURVE'), key=lambda ob: ob.name)
            if not curves:
                raise SceneError(f"collection '{self.paths}' holds no curves: put one path curve per character in it")
            self.polylines = [read_path(ob, depsgraph) for ob in curves]
            self.path_names = [ob.name for ob in curves]
        else:
            if not self.path:
                raise SceneError("no path given: choose a curve for the characters to walk along")
            ob = bpy.data.objects.get(self.path)
            if ob is None:
                raise SceneError(f"no object named '{self.path}' in the file")
            line = read_path(ob, depsgraph)
            self.polylines = lateral_paths(line, int(self.crowd), float(self.spacing))
            self.path_names = [ob.name] * len(self.polylines)
        objects, ignored = adapter.environment_objects(self.terrain)
        if ignored:
            self.warn(f"ignored non-mesh objects in '{self.terrain}': {', '.join(ignored)}")
        verts, tris, _ = adapter.read_environment(depsgraph, objects)
        self.mesh = TriMesh(verts, tris)
        self.action = adapter.source_action(arm)
        start, end = adapter.frame_range(self.action)
        self.frames = np.arange(start, end + 1)
        self.rig = rig = adapter.read_rig(arm)
        self.skeleton, self.head_joint, tail_joint = joint_layout(rig.names, rig.parents)
        self.joints, self.pose, self.world, _ = adapter.read_source_motion(
            scene, arm, self.action, self.frames, rig, rig.index[tail_joint >= 0])
        self.matrix = np.array(arm.matrix_world, dtype=float)
        self.read_seconds = time.perf_counter() - t0

    def compute(self, progress=None):
        t0 = time.perf_counter()
        self.carpet = carpet = bind_carpet(self.skeleton, self.joints)
        C = len(self.polylines)
        offsets = (np.arange(C) * CROWD_STAGGER % 1.0) * carpet.period if C > 1 else None
        self.result = walk(carpet, self.polylines, self.mesh, offsets, progress=progress, workers=self.workers)
        for w in self.result.warnings:
            self.warn(w)
        self.keys = [self._channels(c) for c in range(C)]
        self.compute_seconds = time.perf_counter() - t0

    def _source_frames(self, played):
        """Index into the source frames of each played-clip frame (the cycle repeated)."""
        a, b = self.carpet.cycle
        return np.where(played < a, np.minimum(played, len(self.frames) - 1), a + (played - a) % (b - a))

    def _channels(self, c):
        """(bone, property, values (F,k)) keys of character c: each bone turned from its source
        pose at the played frame onto the walk (twist kept), in its own rotation mode."""
        rig = self.rig
        src = self._source_frames(self.result.clip_frames[c])
        inv = np.linalg.inv(self.world[src])
        original = np.einsum("fij,fkj->fki", inv[:, :3, :3], self.joints[src]) + inv[:, None, :3, 3]
        minv = np.linalg.inv(self.matrix)
        adapted = self.result.positions[c] @ minv[:3, :3].T + minv[:3, 3]
        pose = adapted_pose(self.skeleton, self.head_joint, original, adapted, self.pose[src])
        quats, locs = split_basis(basis_from_pose(rig.rest, rig.parents, pose))
        quats = sign_continuous(quats)
        out = []
        for b, mode in enumerate(rig.rotation_modes):
            if mode == 'QUATERNION':
                out.append((b, "rotation_quaternion", quats[:, b]))
            elif mode == 'AXIS_ANGLE':
                out.append((b, "rotation_axis_angle", axis_angle_from_quat(quats[:, b:b + 1])[:, 0]))
            else:
                out.append((b, "rotation_euler", euler_from_quat(quats[:, b:b + 1], mode)[:, 0]))
            if rig.parents[b] < 0 or not rig.connected[b]:
                out.append((b, "location", locs[:, b]))
        return out

    def write(self):
        t0 = time.perf_counter()
        arm, scene = self.arm, self.scene
        name = walk_collection_name(arm)
        coll = bpy.data.collections.get(name)
        if coll is None:
            coll = bpy.data.collections.new(name)
            scene.collection.children.link(coll)
        elif coll.name not in scene.collection.children and not any(coll.name in c.children for c in
                                                                     bpy.data.collections):
            scene.collection.children.link(coll)
        remove_characters(arm)
        F = self.result.positions.shape[1]
        frames = np.arange(self.frames[0], self.frames[0] + F)
        names, actions = [], []
        deformed = [ob for ob in bpy.data.objects if ob.parent == arm and ob.type == 'MESH']
        for c, channels in enumerate(self.keys):
            new = arm.copy()                               # linked: the armature data is shared
            new.name = f"{arm.name}.walk.{c:03d}"
            new.animation_data_clear()
            new.matrix_world = arm.matrix_world.copy()
            new[WALK_KEY] = arm.name
            coll.objects.link(new)
            for child in deformed:
                twin = child.copy()
                twin.parent = new
                twin.matrix_parent_inverse = child.matrix_parent_inverse.copy()
                for mod in twin.modifiers:
                    if mod.type == 'ARMATURE' and mod.object == arm:
                        mod.object = new
                twin[WALK_KEY] = arm.name
                coll.objects.link(twin)
            action = adapter.write_action(new, f"{self.action.name}.walk.{c:03d}", frames, self.rig, channels)
            action[WALK_KEY] = arm.name
            names.append(new.name)
            actions.append(action.name)
        if scene.frame_end < frames[-1]:
            scene.frame_end = int(frames[-1])
        r = self.result
        held = ~np.isnan(r.pins[..., 0])
        return dict(armature=arm.name, source=self.action.name, characters=names, actions=actions,
                    paths=self.path_names, frames=int(F), frame_start=int(frames[0]), frame_end=int(frames[-1]),
                    joints=int(len(self.skeleton)), cycle=list(self.carpet.cycle), speed=float(self.carpet.speed),
                    stance_fraction=float(held.any(axis=2).mean()), warnings=list(r.warnings),
                    bone_length_error_mean=float(r.bone_error.mean()), bone_length_error_max=float(r.bone_error.max()),
                    read_seconds=self.read_seconds, compute_seconds=self.compute_seconds,
                    write_seconds=time.perf_counter() - t0, seconds=dict(r.seconds))

    def run(self, progress=None):
        self.read()
        self.compute(progress)
        return self.write()


def remove_characters(arm):
    """Remove the characters (and the meshes they deform) a previous walk of ``arm`` made, and
    their actions when nothing else uses them."""
    gone = [ob for ob in bpy.data.objects if ob.get(WALK_KEY) == arm.name and ob != arm]
    actions = {ob.animation_data.action for ob in gone
               if ob.type == 'ARMATURE' and ob.animation_data is not None and ob.animation_data.action}
    for ob in gone:
        bpy.data.objects.remove(ob)
    for action in actions:
        if action.get(WALK_KEY) == arm.name and action.users == 0:
            bpy.data.actions.remove(action)


def walk_job(scene, arm, terrain, path=None, paths=None, crowd=1, spacing=1.0, progress=None, warn=print, workers=1):
    """Walk and write; returns the report dictionary. ``workers``: see ``core.locomotion.walk``
    (the command line's ``--workers``; the viewport's job walks in Blender's own process)."""
    return WalkJob(scene, arm, terrain, path, paths, crowd, spacing, warn, workers).run(progress)
