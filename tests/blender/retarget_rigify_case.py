"""A walk on a Mixamo-named rig retargeted onto a generated Rigify rig, in a process of its own.

Usage: python retarget_rigify_case.py OUT.json (run by test_retarget_blender.py). Ends with os._exit:
with Rigify enabled the bpy 4.5 wheel hangs at interpreter exit.
"""

import json
import os
import sys
import traceback

import numpy as np

import bpy

import blender_reldesc
from blender_reldesc import adapter, demo
from blender_reldesc.core import retarget as R
from blender_reldesc.jobs.retarget import RetargetJob

FRAMES = 40


def main(out):
    scene, src, _, env = demo.build_retarget_scene("mixamo", "ue", 1.0, "T", frames=FRAMES)
    blender_reldesc.register()
    bpy.ops.preferences.addon_enable(module="rigify")
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.pose.rigify_generate()
    rig = bpy.context.object
    constraints = sum(len(pb.constraints) for pb in rig.pose.bones)
    warnings = []
    job = RetargetJob(scene, src, rig, environment=env.name, warn=warnings.append)
    job.read()
    job.compute(lambda *a: True)
    report = job.write()
    # What Blender plays: the deform bones' heads against the retargeted joints.
    names = adapter.read_rig(rig).names
    idx = [names.index(n) for n in job.rig.names]
    played = []
    for f in range(1, FRAMES + 1):
        scene.frame_set(f)
        head, _, _ = adapter.read_pose(rig)
        played.append(adapter.to_world(adapter.world_matrix(rig), head[idx]))
    played = np.stack(played)
    follow = float(np.abs(played - job.result.positions[:, job.head_joint]).max())
    roles = R.find_roles(job.target_skeleton, job.target_rest)
    result = dict(bones=len(rig.data.bones), keyed=len(job.rig.names), target_map=job.bone_map.target,
                  head=job.target_skeleton.names[roles[0]["head"]], mapped=len(job.bone_map.bones),
                  follow_max=follow, planted_within=report["planted_within"],
                  pose_similarity=report["pose_similarity"], stance_slide=report["stance_slide"],
                  source_stance_slide=report["source_stance_slide"],
                  constraints_bypassed=len(report["constraints_bypassed"]),
                  constraints_kept=sum(len(pb.constraints) for pb in rig.pose.bones) == constraints,
                  warned=any("constraints" in w for w in warnings), action=report["action"],
                  source_action=src.animation_data.action.name)
    with open(out, "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    try:
        main(sys.argv[1])
        code = 0
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
