"""Does the live preview show what the bake gives on a Rigify rig? (issue 40: found in review that
it did not, 57 / 50 mm off; since the eleventh session 0.4 / 0.4 mm)

``.venv/bin/python benchmarks/check_live_rigify.py``: Rigify's generated human rig walking 5
strides over 120 frames (``tests/blender/rigify_case.rigify_walker``), bound with its deform
bones, the floor raised 5 cm, baked; then the bound bones' heads as the live preview poses them
(frames played in order) against the baked joints: with the source action and its constraints on
(*Use Source*: what a user who binds, edits and previews sees), and with the constraints left at
influence 0 by the bake (the source assigned back by anything else). Prints metres.
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "blender"))

import bpy  # noqa: E402
import numpy as np  # noqa: E402

import rigify_case  # noqa: E402
from blender_reldesc import adapter, jobs  # noqa: E402


def main():
    scene, arm, floor = rigify_case.rigify_walker(120, strides=5)
    assert bpy.ops.reldesc.bind(armature=arm.name, environment="Environment") == {'FINISHED'}
    floor.location.z = 0.05
    source = arm.animation_data.action
    job = jobs.BakeJob(scene, arm, warn=lambda m: None)
    job.run(progress=lambda *a: True)
    names = job.bound.rig.names
    index = [arm.pose.bones.find(n) for n in names]
    adapted = job.bound.out_of_bind(job.result.positions)[:, :len(names)]
    frames = job.bound.frames[:60]

    def heads():
        out = []
        for f in frames:
            scene.frame_set(int(f))
            bpy.context.view_layer.update()
            out.append(adapter.to_world(adapter.world_matrix(arm), adapter.read_pose(arm)[0][index]))
        return np.stack(out)

    def gap(posed):
        return float(np.linalg.norm(posed - adapted[:len(frames)], axis=-1).max())

    print(f"baked action against the adapted joints: {gap(heads()):.4f} m")
    adapter.assign_action(arm, source)
    scene.reldesc.armature = arm
    scene.reldesc.live = True
    off = heads()
    print(f"live preview, constraints left off by the bake: {gap(off):.4f} m")
    scene.reldesc.live = False
    bpy.ops.reldesc.use_source(armature=arm.name)
    scene.reldesc.live = True
    print(f"live preview, source with its constraints on: {gap(heads()):.4f} m")
    scene.reldesc.live = False


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)        # with Rigify enabled the bpy 4.5 wheel hangs at interpreter exit
