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


def build_ik_rig(scene, arm, ground, legs=(("LeftFoot", "LeftLeg"), ("RightFoot", "RightLeg")), hips="Hips",
                 toes=()):
    """What a competent user builds instead: leg IK to Empties projected onto the terrain by
    Shrinkwrap, the hips lowered with the lower foot by a driver. A copy of the armature keeps
    playing the source; each foot's Empty copies the source foot and adds the terrain height
    under it (a second Empty, shrinkwrapped down onto the terrain), so the terrain's height is
    measured from world z = 0. ``legs``: (foot bone, shin bone) per leg; ``hips``: the bone the
    body hangs from; ``toes``: a toe bone per leg (the ball of the foot), whose own Empty (the
    source toe plus the terrain height under it, the same way) the foot bone turns to by a Damped
    Track, so the foot lies on a slope."""
    src = arm.copy()
    src.name = arm.name + "_source"
    scene.collection.objects.link(src)

    def empty(name):
        ob = bpy.data.objects.new(name, None)
        scene.collection.objects.link(ob)
        return ob

    def on_ground(bone):
        """An Empty at the source bone's head raised by the terrain height under it, and the
        Empty that measures that height."""
        under = empty(bone + "Ground")
        c = under.constraints.new('COPY_LOCATION')
        c.target, c.subtarget = src, bone
        w = under.constraints.new('SHRINKWRAP')
        w.target, w.shrinkwrap_type, w.project_axis, w.use_project_opposite = ground, 'PROJECT', 'NEG_Z', True
        goal = empty(bone + "Goal")
        c = goal.constraints.new('COPY_LOCATION')
        c.target, c.subtarget = src, bone
        c = goal.constraints.new('COPY_LOCATION')
        c.target, c.use_x, c.use_y, c.use_offset = under, False, False, True
        return goal, under

    grounds = []
    for k, (foot, shin) in enumerate(legs):
        goal, under = on_ground(foot)
        ik = arm.pose.bones[shin].constraints.new('IK')
        ik.target, ik.chain_count = goal, 2
        grounds.append(under)
        if k < len(toes):
            toe_goal, _ = on_ground(toes[k])
            c = arm.pose.bones[foot].constraints.new('DAMPED_TRACK')
            c.target, c.track_axis = toe_goal, 'TRACK_Y'
    lower = empty("HipsOffset")
    fc = lower.driver_add("location", 2)
    fc.driver.type = 'SCRIPTED'
    for name, ob in zip("lr", grounds):
        var = fc.driver.variables.new()
        var.name, var.type = name, 'TRANSFORMS'
        var.targets[0].id, var.targets[0].transform_type, var.targets[0].transform_space = ob, 'LOC_Z', 'WORLD_SPACE'
    fc.driver.expression = "min(l, r)"
    c = arm.pose.bones[hips].constraints.new('COPY_LOCATION')
    c.target, c.use_x, c.use_y, c.use_offset = lower, False, False, True
    c.target_space = c.owner_space = 'WORLD'
