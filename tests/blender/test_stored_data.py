"""A .blend bound before the Blender side was laid out by feature (issue 33) bakes the same keys
after it: the stored keys, the binding's format and the contact flags are read as they were.

``data/bound_before_issue33.blend`` was written by commit 722fe5c with the bpy 4.5 wheel (every
supported Blender opens it): the demo's bridge scene, 30 frames, bound, its contacts detected
and the first phase locked, then the bridge bent and the beam lowered.
``data/bound_before_issue33.json`` holds what that commit's bake of it wrote: every key of the
adapted action, the contact rows, and figures of the report."""

import json
import os
import shutil

import bpy
import numpy as np

from blender_reldesc import adapter, jobs

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_a_file_bound_before_the_change_bakes_the_same_keys(tmp_path):
    path = tmp_path / "bound.blend"
    shutil.copy(os.path.join(DATA, "bound_before_issue33.blend"), path)
    with open(os.path.join(DATA, "bound_before_issue33.json")) as fh:
        before = json.load(fh)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    arm = bpy.data.objects["Walker"]
    assert adapter.storage.stored_contacts(arm)[0]["lock"] is True          # the flag set before
    op = bpy.ops.reldesc.bake(armature="Walker")
    assert op == {'FINISHED'}
    action = bpy.data.actions[before["action"]]
    keys = {f"{fc.data_path}:{fc.array_index}": np.array([tuple(kp.co) for kp in fc.keyframe_points])
            for fc in adapter._fcurves(action)}
    assert set(keys) == set(before["keys"])
    worst = max(np.abs(keys[k] - np.array(v)).max() for k, v in before["keys"].items())
    assert worst < 1e-5, worst
    rows = adapter.storage.stored_contacts(arm)
    assert [(r["effector"], r["start"], r["end"], r["status"], r["lock"], r["ignore"]) for r in rows] == \
        [(r["effector"], r["start"], r["end"], r["status"], r["lock"], r["ignore"]) for r in before["contacts"]]
    report = jobs.bake_job(bpy.context.scene, arm, progress=lambda *a: True)
    assert report["keys"]["written"] == before["keys_written"]
    assert abs(report["bone_length_error_max"] - before["bone_length_error_max"]) < 1e-9
