"""A generated Rigify rig bound, baked and switched back, in a process of its own.

Usage: python rigify_case.py OUT.json (run by test_production_rigs.py). Ends with os._exit:
with Rigify enabled the bpy 4.5 wheel hangs at interpreter exit.
"""

import json
import os
import sys
import traceback

import numpy as np

import bpy

import blender_reldesc
from blender_reldesc import adapter, demo, jobs
from blender_reldesc.core import synthetic as S

FRAMES = 24


def rigify_walker(frames=None, strides=1.0):
    """Generate Rigify's human rig (Rigify ships with Blender), key its controls (torso, IK feet and
    hands) as a walk of ``strides`` strides (0.4 m each) over ``frames`` frames (default
    ``FRAMES``), and put a floor under it in 'Environment'."""
    frames = FRAMES if frames is None else int(frames)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    blender_reldesc.register()
    bpy.ops.preferences.addon_enable(module="rigify")
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.pose.rigify_generate()
    rig = bpy.context.object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    for f in range(1, frames + 1):
        t = (f - 1) / (frames - 1)
        ph = 2 * np.pi * strides * t
        ahead = 0.4 * strides * t
        rig.pose.bones["torso"].location = (0, ahead, 0.03 * np.sin(2 * ph))
        rig.pose.bones["torso"].keyframe_insert("location", frame=f)
        for side, sgn in (("L", 1), ("R", -1)):
            foot = rig.pose.bones[f"foot_ik.{side}"]
            foot.location = (0, ahead + 0.15 * sgn * np.sin(ph), max(0.0, 0.08 * sgn * np.cos(ph)))
            foot.keyframe_insert("location", frame=f)
            hand = rig.pose.bones[f"hand_ik.{side}"]
            hand.location = (0, ahead - 0.1 * sgn * np.sin(ph), 0.02 * np.cos(2 * ph))
            hand.keyframe_insert("location", frame=f)
    env = bpy.data.collections.new("Environment")
    scene.collection.children.link(env)
    length = 4.0 + 0.4 * max(strides - 1.0, 0.0)
    V, T = S.grid(4.0, length, 30, max(30, int(round(length / 4.0 * 30))), origin=(-2.0, -2.0), z=0.0)
    floor = demo.mesh_object("Floor", V, T, env)
    scene.reldesc.armature, scene.reldesc.environment = rig, env
    scene.frame_set(1)
    return scene, rig, floor


def heads(scene, arm, frames, names):
    index = [arm.pose.bones.find(n) for n in names]
    out = []
    for f in frames:
        scene.frame_set(int(f))
        head, _, _ = adapter.read_pose(arm)
        out.append(adapter.to_world(adapter.world_matrix(arm), head[index]))
    return np.stack(out)


def moved_with_its_set(scene, rig, floor):
    """Bake, then move the rig and its floor together under a parent (4 m, turned 30 degrees) and
    bake again: how much the bones' local pose changes and how far the evaluated bound bones are
    from the adapted joints, carried where the rig now stands."""
    from mathutils import Matrix
    root = bpy.data.objects.new("Root", None)
    scene.collection.objects.link(root)
    floor.location.z = 0.0          # the floor as bound: its only part moved would be read as the rig's move
    rig.parent = floor.parent = root
    bpy.context.view_layer.update()
    def local_pose():
        out = []
        for f in range(1, FRAMES + 1):
            scene.frame_set(f)
            out.append([np.array(pb.matrix_basis) for pb in rig.pose.bones])
        return np.array(out)

    jobs.BakeJob(scene, rig, warn=lambda m: None).run(progress=lambda *a: True)
    here = local_pose()
    root.matrix_world = Matrix.Translation((4.0, -1.5, 0.0)) @ Matrix.Rotation(np.radians(30), 4, "Z")
    bpy.context.view_layer.update()
    job = jobs.BakeJob(scene, rig, warn=lambda m: None)
    report = job.run(progress=lambda *a: True)
    # Every pose bone's local matrix as played (keys of channels the bake leaves to the source
    # are kept or rewritten by a 1e-6 test, so the curves themselves may differ in layout).
    change = float(np.abs(local_pose() - here).max())
    names = job.bound.rig.names
    played = heads(scene, rig, job.bound.frames, names)
    adapted = job.bound.out_of_bind(job.result.positions)[:, :len(names)]
    return dict(moved_keys_change=change, moved_follow_max=float(np.linalg.norm(played - adapted, axis=-1).max()),
                moved_report=report["placement"]["moved_from_environment"])


def main(out_path):
    scene, rig, floor = rigify_walker()
    deform = [b.name for b in rig.data.bones if b.use_deform]
    source = rig.animation_data.action
    frames = range(1, FRAMES + 1)
    before = heads(scene, rig, frames, deform)
    influence = [c.influence for n in deform for c in rig.pose.bones[n].constraints]
    assert bpy.ops.reldesc.bind(armature=rig.name, environment="Environment") == {'FINISHED'}
    meta = adapter.stored_meta(rig)
    floor.location.z = 0.06                                   # the ground rose after the capture
    warnings = []
    job = jobs.BakeJob(scene, rig, warn=warnings.append)
    report = job.run(progress=lambda *a: True)
    played = heads(scene, rig, job.bound.frames, job.bound.rig.names)
    adapted = job.result.positions[:, :len(job.bound.rig.names)]
    hips = job.bound.rig.names.index("DEF-spine")
    baked = rig.animation_data.action
    res = dict(bones=len(rig.data.bones), deform_bones=len(deform), bound_bones=meta["bones"],
               bone_set=meta["bone_set"],
               constraint_warning=any("constraints" in w for w in warnings),
               constraints_bypassed=len(report["constraints_bypassed"]),
               follow_max=float(np.linalg.norm(played - adapted, axis=-1).max()),
               hips_rise=float(np.mean(played[:, hips, 2] - before[:, deform.index("DEF-spine"), 2])),
               torso_keys_kept=any(fc.data_path == 'pose.bones["torso"].location' for fc in adapter._fcurves(baked)),
               constraints_before=len(influence),
               constraints_after=sum(len(rig.pose.bones[n].constraints) for n in deform),
               keys=report["keys"])
    # The read-back of the outside parents with the curves of bones that cannot move them muted
    # (issue 40) reads what a read with every curve playing reads, and unmutes them after.
    outer = job.bound.rig.outer_names
    quiet = adapter.rig.read_bone_matrices(scene, rig, job.bound.frames, outer)
    loud = adapter.rig.read_bone_matrices(scene, rig, job.bound.frames, outer, only_what_moves_them=False)
    res["outer_read_change"] = float(np.abs(quiet - loud).max())
    res["moving_bones"] = len(adapter.rig.bones_moving(rig, outer))
    res["muted_after"] = sum(fc.mute for fc in adapter.actions._fcurves(baked))
    assert bpy.ops.reldesc.use_source(armature=rig.name) == {'FINISHED'}
    res["source_again"] = rig.animation_data.action == source
    res["influence_restored"] = [c.influence for n in deform for c in rig.pose.bones[n].constraints] == influence
    res["source_max"] = float(np.abs(heads(scene, rig, frames, deform) - before).max())
    # The live preview shows what the bake gives (its constraints muted while it is on, each bone
    # posed against its outside parent as Blender plays it), and gives the rig back when off.
    assert bpy.ops.reldesc.live(armature=rig.name) == {'FINISHED'}
    shown = heads(scene, rig, job.bound.frames, job.bound.rig.names)
    res["live_max"] = float(np.linalg.norm(shown - adapted, axis=-1).max())
    res["live_muted"] = sum(c.mute for n in deform for c in rig.pose.bones[n].constraints)
    assert bpy.ops.reldesc.live(armature=rig.name) == {'FINISHED'}
    res["live_off_muted"] = sum(c.mute for n in deform for c in rig.pose.bones[n].constraints)
    res["live_off_source_max"] = float(np.abs(heads(scene, rig, frames, deform) - before).max())
    res.update(moved_with_its_set(scene, rig, floor))
    with open(out_path, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    code = 0
    try:
        main(sys.argv[1])
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
