"""The Blender benchmarks' scenes (bpy): the generated walk over a terrain, the real walk clip
imported with Blender's BVH importer over a floor, and the sculpt applied after binding.

Only ``demo``'s builders and ``core.synthetic`` are used, which every tree of the project has:
``bench_boundary.py`` builds these scenes with two trees in one run.
"""

from __future__ import annotations

import pathlib

import bpy
import numpy as np

from blender_reldesc import demo
from blender_reldesc.core import synthetic as S

REAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "walk_cm_30fps.bvh"


def sculpt(ob):
    me = ob.data
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] += S.hills(0.15, 3.0)(co[:, 0], co[:, 1])
    me.vertices.foreach_set("co", co.ravel())
    me.update()


def synthetic_scene(frames):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    coll = bpy.data.collections.new("Environment")
    scene.collection.children.link(coll)
    arm = demo.build_armature()
    demo.animate_walk(arm, frames)
    x = S.walk(frames)[1][:, 0, 0]
    verts, tris = S.grid(x.max() - x.min() + 6.0, 4.0, 125, 40, origin=(x.min() - 3.0, -2.0))
    ground = demo.mesh_object("Terrain", verts, tris, coll)
    return scene, arm, coll, ground


def real_scene(cells=71):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.import_anim.bvh(filepath=str(REAL), global_scale=0.01, update_scene_fps=True,
                            update_scene_duration=True)
    arm = bpy.context.active_object
    coll = bpy.data.collections.new("Environment")
    scene.collection.children.link(coll)
    scene.frame_set(scene.frame_start)
    lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
    for f in range(scene.frame_start, scene.frame_end + 1, 50):
        scene.frame_set(f)
        for pb in arm.pose.bones:
            p = arm.matrix_world @ pb.head
            lo, hi = np.minimum(lo, p[:2]), np.maximum(hi, p[:2])
    verts, tris = S.grid(*(hi - lo + 2.0), cells, cells, origin=tuple(lo - 1.0))
    ground = demo.mesh_object("Terrain", verts, tris, coll)
    return scene, arm, coll, ground
