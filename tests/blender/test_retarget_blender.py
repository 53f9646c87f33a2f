"""Retarget through the real operators and the command line (reldesc.retarget, ``retarget``): a
generated walk on one rig convention onto another rig, placed as users place rigs."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import adapter, demo  # noqa: E402
from blender_reldesc.core import retarget as R  # noqa: E402
from blender_reldesc.core.skeleton.armature import joint_layout  # noqa: E402
from blender_helpers import PanelLayout, fcurve_snapshot  # noqa: E402
from blender_reldesc.reports import undocumented

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def played_joints(scene, arm, frames):
    """World joints (F,J,3) of ``arm`` (bone heads, then leaf tails) as Blender plays it."""
    rig = adapter.read_rig(arm)
    _, _, tail = joint_layout(rig.names, rig.parents)
    out = []
    for f in frames:
        scene.frame_set(int(f))
        head, tails, _ = adapter.read_pose(arm)
        joints = np.concatenate([head, tails[tail >= 0]])
        out.append(adapter.to_world(adapter.world_matrix(arm), joints))
    return np.stack(out)


def _job(scene, source, target, **kw):
    from blender_reldesc.jobs.retarget import RetargetJob
    job = RetargetJob(scene, source, target, **kw)
    job.read()
    job.compute(lambda *a: True)
    return job, job.write()


@pytest.mark.parametrize("source,target,legs,arms", [("mixamo", "ue", 1.15, "T"), ("bvh", "rigify", 0.85, "down"),
                                                     ("arbitrary", "mixamo", 1.0, "A")])
def test_the_retarget_plays_the_adapted_joints_with_feet_on_the_floor(source, target, legs, arms):
    scene, src, tgt, env = demo.build_retarget_scene(source, target, legs, arms, frames=45)
    walk = src.animation_data.action
    before = fcurve_snapshot(walk)
    job, report = _job(scene, src, tgt, environment="Environment")
    assert report["action"] == "Walk.retarget" and tgt.animation_data.action.name == "Walk.retarget"
    assert src.animation_data.action == walk                          # the source keeps its action, untouched
    after = fcurve_snapshot(walk)
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    # The keys play the retargeted joints.
    frames = np.arange(1, 46)
    got = played_joints(scene, tgt, frames)
    assert np.abs(got - job.result.positions).max() < 1e-3
    # Feet on the floor, pose kept (measured on what Blender plays).
    sk, trest = job.target_skeleton, job.target_rest
    m = R.measure(job.source_skeleton, job.source_rest, job.source_motion, sk, trest, got, job.result.bone_map)
    assert m["planted_within"] >= 0.99 and m["pose_similarity"] >= 0.95
    assert m["stance_slide"] <= m["source_stance_slide"] + 0.02
    assert report["bone_map"]["mapped"] >= 19


def test_a_target_placed_as_an_fbx_import_under_a_moved_parent_or_rolled_gets_the_same_motion():
    scene, src, tgt, env = demo.build_retarget_scene("mixamo", "ue", 1.15, "T", frames=30)
    plain, _ = _job(scene, src, tgt, environment="Environment")
    want = played_joints(scene, tgt, [1, 15, 30])
    # The same rig as an FBX import: Y-up bones in centimetres under a 90-degree X turn and scale 0.01.
    tsk, trest = demo.scenes.S.convention_rest("ue", legs=1.15, arms="T")
    turn = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])          # world -> Y-up data
    fbx = demo.build_skeleton_armature(tsk, 100.0 * trest @ turn.T, "FBX", demo.scenes._main_child("ue", tsk))
    fbx.rotation_euler = (math.pi / 2, 0.0, 0.0)
    fbx.scale = (0.01, 0.01, 0.01)
    # The same rig under a parent that moved and turned.
    parent = bpy.data.objects.new("Set", None)
    scene.collection.objects.link(parent)
    parent.location, parent.rotation_euler = (1.0, -2.0, 0.3), (0.0, 0.0, 0.5)
    child = demo.build_skeleton_armature(tsk, trest, "Child", demo.scenes._main_child("ue", tsk))
    child.parent = parent
    # The same rig with every bone rolled otherwise (the rolls a rig's author or an importer chose).
    rolled = demo.build_skeleton_armature(tsk, trest, "Rolled", demo.scenes._main_child("ue", tsk))
    bpy.context.view_layer.objects.active = rolled
    bpy.ops.object.mode_set(mode='EDIT')
    for k, eb in enumerate(rolled.data.edit_bones):
        eb.roll += 0.3 + 0.4 * (k % 3)
    bpy.ops.object.mode_set(mode='OBJECT')
    bpy.context.view_layer.update()
    for arm in (fbx, child, rolled):
        _job(scene, src, arm, environment="Environment")
        np.testing.assert_allclose(played_joints(scene, arm, [1, 15, 30]), want, atol=2e-3)


def test_the_panel_map_lists_edits_and_saves_the_pairs(tmp_path):
    scene, src, tgt, env = demo.build_retarget_scene("bvh", "ue", 1.0, "down", frames=30)
    s = scene.reldesc
    s.retarget_source, s.retarget_target, s.retarget_environment = src, tgt, env
    assert bpy.ops.reldesc.retarget_find_map() == {'FINISHED'}
    rows = {r.target: r.source for r in s.retarget_rows}
    assert len(rows) == len(tgt.data.bones)
    assert rows["thigh_l"] == "LeftHip" and rows["lowerarm_r"] == "RightElbow"
    assert next(r.role for r in s.retarget_rows if r.target == "calf_l") == "shin.L"
    # Saved and loaded back as a file map, it retargets as the listed rows do.
    path = tmp_path / "map.json"
    assert bpy.ops.reldesc.retarget_save_map(filepath=str(path)) == {'FINISHED'}
    saved = json.loads(path.read_text())["bones"]
    assert saved == {k: v for k, v in rows.items() if v}
    assert bpy.ops.reldesc.retarget() == {'FINISHED'}
    by_rows = played_joints(scene, tgt, [10, 20])
    assert bpy.ops.reldesc.retarget(bone_map=str(path)) == {'FINISHED'}
    np.testing.assert_allclose(played_joints(scene, tgt, [10, 20]), by_rows, atol=1e-6)
    # A row naming a bone the source does not have is refused, nothing written.
    next(r for r in s.retarget_rows if r.target == "calf_l").source = "Knee.Left"
    actions = set(bpy.data.actions.keys())
    with pytest.raises(RuntimeError, match="source bone 'Knee.Left'"):
        bpy.ops.reldesc.retarget()
    assert set(bpy.data.actions.keys()) == actions
    assert bpy.ops.reldesc.retarget_clear_map() == {'FINISHED'} and not len(s.retarget_rows)


def test_retarget_errors_are_clear_and_change_nothing():
    scene, src, tgt, env = demo.build_retarget_scene("bvh", "ue", frames=20)
    actions = set(bpy.data.actions.keys())
    with pytest.raises(RuntimeError, match="both the source and the target"):
        bpy.ops.reldesc.retarget(source="Source", target="Source")
    with pytest.raises(RuntimeError, match="has no action"):
        bpy.ops.reldesc.retarget(source="Target", target="Source")
    with pytest.raises(RuntimeError, match="pick the Source armature"):
        bpy.ops.reldesc.retarget()
    with pytest.raises(RuntimeError, match="no bone map file"):
        bpy.ops.reldesc.retarget(source="Source", target="Target", bone_map="/nowhere/map.json")
    with pytest.raises(RuntimeError, match="does not fit the 'mixamo' preset"):
        bpy.ops.reldesc.retarget(source="Source", target="Target", bone_map="mixamo")
    stick = bpy.data.objects.new("Stick", bpy.data.armatures.new("Stick"))
    scene.collection.objects.link(stick)
    bpy.context.view_layer.objects.active = stick
    bpy.ops.object.mode_set(mode='EDIT')
    for k, name in enumerate(("a", "b")):
        eb = stick.data.edit_bones.new(name)
        eb.head, eb.tail = (0.0, 0.0, 1.0 - 0.5 * k), (0.0, 0.0, 0.5 - 0.5 * k)
    bpy.ops.object.mode_set(mode='OBJECT')
    with pytest.raises(RuntimeError, match="no legs found in 'Stick'"):
        bpy.ops.reldesc.retarget(source="Source", target="Stick")
    assert set(bpy.data.actions.keys()) == actions
    assert tgt.animation_data is None or tgt.animation_data.action is None


def test_an_nla_retarget_keeps_the_target_s_own_action_below():
    scene, src, tgt, env = demo.build_retarget_scene("ue", "mixamo", frames=20)
    sk, rest = demo.scenes.S.convention_rest("mixamo")
    own = demo.animate_walk(tgt, 20, name="Idle", walk=(sk, np.broadcast_to(rest, (20,) + rest.shape).copy()))
    assert tgt.animation_data.action == own
    from blender_reldesc.jobs.retarget import RetargetJob
    RetargetJob(scene, src, tgt, options={"target": "NLA"}).run(lambda *a: True)
    tracks = tgt.animation_data.nla_tracks
    assert [t.name for t in tracks] == ["Idle", adapter.NLA_PREFIX + "Walk.retarget"]
    assert tgt.animation_data.action is None and "Idle" in bpy.data.actions


def test_command_line_retarget_and_its_errors(tmp_path):
    path = tmp_path / "clip.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_retarget_scene('mixamo', 'rigify', 1.15, 'T', "
            f"frames=30); bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, capture_output=True, timeout=300)
    run = lambda *a: subprocess.run([sys.executable, "-m", "blender_reldesc", *a], capture_output=True,  # noqa: E731
                                    text=True, cwd=ROOT, env=env, timeout=600)
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    r = run("retarget", str(path), "--source", "Source", "--target", "Target", "-o", str(out), "--report", str(report),
            "--step", "2", "--bake-target", "nla")
    assert r.returncode == 0, r.stderr
    assert "retargeted 'Walk' from 'Source' onto 'Target' as 'Walk.retarget'" in r.stdout
    data = json.loads(report.read_text())
    assert undocumented("retarget", data) == []  # every field in the generated reference
    assert data["floor"] == "generated" and data["stride"] == pytest.approx(1.15, rel=0.02)
    assert data["planted_within"] >= 0.99 and data["bake"]["step"] == 2 and data["bake"]["target"] == "nla"
    assert data["bone_map"]["source"] == "mixamo" and data["bone_map"]["target"] == "rigify"
    assert out.exists()
    mtime = path.stat().st_mtime
    for args, message in ((("--source", "Nobody", "--target", "Target"), "Nobody"),
                          (("--source", "Source", "--target", "Source"), "both the source and the target"),
                          (("--source", "Source", "--target", "Target", "--map", str(tmp_path / "no.json")),
                           "no bone map file"),
                          (("--source", "Source", "--target", "Target", "--map", "maya"), "unknown bone map 'maya'")):
        r = run("retarget", str(path), *args, "-o", str(tmp_path / "bad.blend"))
        assert r.returncode == 1 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "bad.blend").exists()
    assert path.stat().st_mtime == mtime
    assert run("retarget", str(path), "--source", "Source").returncode == 2


def test_a_batch_manifest_retargets_with_a_map_file_beside_it(tmp_path):
    import textwrap
    scene, src, tgt, env = demo.build_retarget_scene("ue", "mixamo", 0.85, "T", frames=20)
    from blender_reldesc.jobs.retarget import find_map
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "ue_to_mixamo.json").write_text(find_map(scene, src, tgt).to_json())
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "clip.blend"))
    manifest = tmp_path / "jobs.toml"
    manifest.write_text(textwrap.dedent("""
        [[job]]
        name = "hero"
        operation = "retarget"
        file = "clip.blend"
        source = "Source"
        target = "Target"
        map = "maps/ue_to_mixamo.json"
        environment = "Environment"
        output = "hero.blend"
        report = "hero.json"
    """))
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "blender_reldesc", "batch", str(manifest), "--workers", "1"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((tmp_path / "hero.json").read_text())
    assert report["action"] == "Walk.retarget" and report["bone_map"]["source"] == "file"
    assert report["planted_within"] >= 0.99 and (tmp_path / "hero.blend").exists()


def test_a_walk_retargeted_onto_a_generated_rigify_rig_plays_on_its_deform_bones(tmp_path):
    """Rigify's human rig as generated (706 bones, deform bones driven by constraints from ORG and
    MCH bones, a face), in its own process (``retarget_rigify_case.py``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = tmp_path / "rigify.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, here]))
    r = subprocess.run([sys.executable, os.path.join(here, "retarget_rigify_case.py"), str(out)], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["bones"] > 600 and res["target_map"] == "rigify" and res["head"] == "DEF-spine.006"
    assert res["mapped"] >= 23 and res["follow_max"] < 1e-3
    assert res["planted_within"] >= 0.99 and res["pose_similarity"] >= 0.98
    assert res["stance_slide"] <= res["source_stance_slide"] + 0.02
    assert res["constraints_bypassed"] > 100 and res["warned"] and res["constraints_kept"]
    assert res["action"] == "Walk.retarget" and res["source_action"] == "Walk"


def test_a_source_placed_as_an_fbx_import_gives_the_same_retarget():
    # The source as an FBX import brings it: Y-up bones in centimetres under a 90-degree X turn and
    # scale 0.01, its action keyed in those units; the same world motion.
    scene, src, tgt, env = demo.build_retarget_scene("mixamo", "ue", 0.85, "down", frames=30)
    _job(scene, src, tgt, environment="Environment")
    want = played_joints(scene, tgt, [1, 15, 30])
    S = demo.scenes.S
    sk, rest, motion = S.convention_clip("mixamo", S.walk(30)[1])
    turn = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])          # world -> Y-up data
    fbx = demo.build_skeleton_armature(sk, 100.0 * rest @ turn.T, "FBXSource", demo.scenes._main_child("mixamo", sk))
    fbx.rotation_euler = (math.pi / 2, 0.0, 0.0)
    fbx.scale = (0.01, 0.01, 0.01)
    demo.animate_walk(fbx, 30, name="WalkCm", walk=(sk, 100.0 * motion @ turn.T))
    bpy.context.view_layer.update()
    np.testing.assert_allclose(played_joints(scene, fbx, [1, 15, 30])[:, :5],
                               played_joints(scene, src, [1, 15, 30])[:, :5], atol=1e-4)
    job, report = _job(scene, fbx, tgt, environment="Environment")
    assert report["action"] == "WalkCm.retarget"
    np.testing.assert_allclose(played_joints(scene, tgt, [1, 15, 30]), want, atol=2e-3)


def test_the_retarget_panel_finds_lists_and_retargets():
    from blender_reldesc import panels
    scene, src, tgt, env = demo.build_retarget_scene("bvh", "mixamo", 1.0, "A", frames=20)
    log = []
    panel = type("P", (), {"layout": PanelLayout(log)})()
    panels.retarget.RELDESC_PT_retarget.draw(panel, bpy.context)
    assert ("operator", "reldesc.retarget", False) in log and ("operator", "reldesc.retarget_find_map", False) in log
    s = scene.reldesc
    s.retarget_source, s.retarget_target = src, tgt
    assert bpy.ops.reldesc.retarget_find_map() == {'FINISHED'}
    log.clear()
    panels.retarget.RELDESC_PT_retarget.draw(panel, bpy.context)
    assert ("operator", "reldesc.retarget", True) in log and ("list", "RELDESC_UL_map", "retarget_rows") in log
    mapped = sum(1 for r in s.retarget_rows if r.source)
    assert ("label", f"{mapped} of {len(tgt.data.bones)} target bones mapped") in log
    assert bpy.ops.reldesc.retarget() == {'FINISHED'}                # the panel's picks, no environment
    assert tgt.animation_data.action.name == "Walk.retarget"


def test_a_retarget_again_replaces_its_own_action_and_keeps_one_in_use():
    scene, src, tgt, env = demo.build_retarget_scene("bvh", "ue", 1.0, "down", frames=20)
    _job(scene, src, tgt)
    assert tgt.animation_data.action.name == "Walk.retarget"
    _job(scene, src, tgt)                                       # only the target used it: replaced
    assert [a.name for a in bpy.data.actions if a.name.startswith("Walk.retarget")] == ["Walk.retarget"]
    assert tgt.animation_data.action.name == "Walk.retarget" and "Walk" in bpy.data.actions
    kept = bpy.data.actions["Walk.retarget"]
    kept.use_fake_user = True                                   # the animator keeps it: a new one beside it
    before = fcurve_snapshot(kept)
    _, report = _job(scene, src, tgt, options={"step": 2})
    assert report["action"] == "Walk.retarget.001" and "Walk.retarget" in bpy.data.actions
    after = fcurve_snapshot(bpy.data.actions["Walk.retarget"])
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)


def test_a_frame_range_retargets_those_frames_only():
    # A user who bakes 300 frames of a 4000-frame capture waits for 300 (70 s before on the shared
    # walk, all of it retargeted); the range keys as the whole clip's retarget does there.
    from blender_reldesc.jobs.keys import BakeOptions
    from blender_reldesc.adapter import SceneError
    scene, src, tgt, env = demo.build_retarget_scene("mixamo", "ue", 1.0, "A", frames=40)
    whole, _ = _job(scene, src, tgt)
    part, report = _job(scene, src, tgt, options=BakeOptions(frames=(11, 30)))
    assert report["frames"] == 20 and report["bake"]["frame_start"] == 11 and report["bake"]["frame_end"] == 30
    assert len(part.source_motion) == 20 and report["planted_within"] >= 0.99
    got = played_joints(scene, tgt, np.arange(11, 31))
    assert np.abs(got - part.result.positions).max() < 1e-3
    assert np.abs(got - whole.result.positions[10:30]).max() < 0.03
    keyed = np.concatenate([co[0::2] for co in fcurve_snapshot(tgt.animation_data.action).values()])
    assert keyed.min() == 11 and keyed.max() == 30
    with pytest.raises(SceneError, match="frame"):
        _job(scene, src, tgt, options=BakeOptions(frames=(11, 400)))
