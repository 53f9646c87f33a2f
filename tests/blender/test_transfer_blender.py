"""Transfer to a novel object through the real operator and the command line
(reldesc.transfer, ``transfer``)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import demo  # noqa: E402
from blender_helpers import PanelLayout, fcurve_snapshot, heads_over_frames  # noqa: E402
from blender_reldesc.reports import undocumented

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_transfer_operator_moves_the_sitting_onto_a_stool_elsewhere():
    scene, arm, env = demo.build_transfer_scene(frames=40, target="stool", at=(1.6, 0.8))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    source = bpy.data.actions["Sit"]
    before = fcurve_snapshot(source)
    src = heads_over_frames(scene, arm, [1, 20, 40])
    assert bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Stool") == {'FINISHED'}
    assert arm.animation_data.action.name == "Sit.adapted"
    # The source action is untouched.
    after = fcurve_snapshot(source)
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    got = heads_over_frames(scene, arm, [1, 20, 40])
    hips = [b.name for b in arm.data.bones].index("Hips")
    stool = bpy.data.objects["Stool"]
    # The pelvis sits over the stool as it sat over the chair (0.10 m above a 0.45 m seat).
    np.testing.assert_allclose(got[:, hips, :2], np.broadcast_to(np.array(stool.location)[:2], (3, 2)), atol=0.1)
    np.testing.assert_allclose(got[:, hips, 2], src[:, hips, 2], atol=0.02)


def test_transfer_errors_are_clear_and_change_nothing():
    scene, arm, env = demo.build_transfer_scene(frames=20)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    actions = set(bpy.data.actions.keys())
    with pytest.raises(RuntimeError, match="both the object to transfer from and to"):
        bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Chair")
    with pytest.raises(RuntimeError, match="not a mesh of the bound environment"):
        bpy.ops.reldesc.transfer(armature="Walker", source_object="Stool", target_object="Chair")
    lamp = bpy.data.objects.new("Lamp", bpy.data.lights.new("Lamp", 'POINT'))
    scene.collection.objects.link(lamp)
    with pytest.raises(RuntimeError, match="not a mesh"):
        bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Lamp")
    assert set(bpy.data.actions.keys()) == actions


def test_command_line_transfer_and_its_errors(tmp_path):
    path = tmp_path / "sit.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_transfer_scene(frames=30, target='bench', "
            f"seat_height=0.35, at=(1.2, -0.6)); bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); "
            "import os; os._exit(0)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, capture_output=True, timeout=300)
    run = lambda *a: subprocess.run([sys.executable, "-m", "blender_reldesc", *a], capture_output=True,  # noqa: E731
                                    text=True, cwd=ROOT, env=env, timeout=600)
    assert run("bind", str(path), "--armature", "Walker", "--environment", "Environment").returncode == 0
    out, report = tmp_path / "out.blend", tmp_path / "t.json"
    r = run("transfer", str(path), "--armature", "Walker", "--from", "Chair", "--to", "Bench", "-o", str(out),
            "--report", str(report))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert undocumented("transfer", data) == []  # every field in the generated reference
    assert data["action"] == "Sit.adapted" and data["transfer"]["segments"] == ["seat", "legs"]
    assert data["transfer"]["labels"] == "vertex groups" and "Hips" in data["transfer"]["matched"]
    assert out.exists()
    for args, message in ((("--from", "Chair", "--to", "Chair"), "both the object"),
                          (("--from", "Chair", "--to", "Nothing"), "no object named 'Nothing'")):
        r = run("transfer", str(path), "--armature", "Walker", *args, "-o", str(tmp_path / "bad.blend"))
        assert r.returncode == 1 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "bad.blend").exists()
    r = run("transfer", str(path), "--armature", "Walker", "--from", "Chair")
    assert r.returncode == 2


def test_the_transfer_panel_runs_the_operator_on_its_objects():
    # The sub-panel picks From / To, names the parts they share, and its button transfers
    # with them (the operator's own arguments left empty).
    from blender_reldesc import panels
    scene, arm, env = demo.build_transfer_scene(frames=30, target="stool", at=(1.6, 0.8))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    log = []
    panel = type("P", (), {"layout": PanelLayout(log)})()
    panels.transfer.RELDESC_PT_transfer.draw(panel, bpy.context)
    assert ("operator", "reldesc.transfer", False) in log           # nothing picked yet
    with pytest.raises(RuntimeError, match="pick the object"):
        bpy.ops.reldesc.transfer(armature="Walker")
    scene.reldesc.transfer_from, scene.reldesc.transfer_to = bpy.data.objects["Chair"], bpy.data.objects["Stool"]
    log.clear()
    panels.transfer.RELDESC_PT_transfer.draw(panel, bpy.context)
    assert ("operator", "reldesc.transfer", True) in log
    assert ("label", "Parts: legs, seat") in log
    assert bpy.ops.reldesc.transfer(armature="Walker") == {'FINISHED'}
    assert arm.animation_data.action.name == "Sit.adapted"


def test_parts_labelled_by_face_attributes_are_shared():
    # Without vertex groups, boolean face attributes named alike label the parts ("seat",
    # "legs"); Blender's own face flags (hidden, selected, sharp) are not labels.
    from blender_reldesc.jobs import transfer
    scene, arm, env = demo.build_transfer_scene(frames=20, target="stool", at=(1.6, 0.8))
    for name in ("Chair", "Stool"):
        ob = bpy.data.objects[name]
        groups = {vg.index: vg.name for vg in ob.vertex_groups}
        me = ob.data
        member = {n: [all(any(groups.get(g.group) == n for g in me.vertices[v].groups) for v in poly.vertices)
                      for poly in me.polygons] for n in set(groups.values())}
        ob.vertex_groups.clear()                       # (a group's name is taken for attributes)
        for n, flags in member.items():
            me.attributes.new(n, 'BOOLEAN', 'FACE').data.foreach_set("value", flags)
        assert "sharp_face" in me.attributes           # Blender's own flag, on every mesh
    chair, _, _ = transfer.segmented(bpy.data.objects["Chair"])
    stool, _, _ = transfer.segmented(bpy.data.objects["Stool"])
    assert chair.kind == stool.kind == "face attributes"
    assert "sharp_face" not in chair.names and set(stool.names) == {"seat", "legs"}
    assert (chair.labels >= 0).mean() > 0.9
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Stool") == {'FINISHED'}
    assert arm.animation_data.action.name == "Sit.adapted"
