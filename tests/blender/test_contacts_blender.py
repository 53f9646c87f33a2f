"""Contacts in Blender: detect, re-position, bake; the command line and its report."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import bpy

from blender_reldesc import adapter, demo, jobs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stone_under_phase(rows, stones, effector="LeftFoot"):
    for r in rows:
        if r["effector"] == effector:
            p = np.array(r["position"])
            for ob in stones:
                if np.linalg.norm(np.array(ob.location)[:2] - p[:2]) < 0.25:
                    return r, ob
    raise AssertionError("no phase on a stone")


def test_moving_a_stone_far_away_repositions_the_foot():
    scene, arm, env, stones = demo.build_stones_scene(frames=120)
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.detect_contacts(armature="Walker") == {'FINISHED'}
    rows = jobs.stored_contacts(arm)
    assert rows and all(r["status"] == "valid" for r in rows)
    row, stone = _stone_under_phase([r for r in rows if r["start"] > 30], stones)
    assert row["surface"] == stone.name
    stone.location.y += 1.0
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.detect_contacts(armature="Walker") == {'FINISHED'}
    after = {(r["effector"], r["start"]): r for r in jobs.stored_contacts(arm)}
    assert after[(row["effector"], row["start"])]["status"] == "unresolved"
    assert after[(row["effector"], row["start"])]["reason"] == "unsupported"
    # Reported where the contact point is now (on the moved stone), and where it was at bind.
    now = np.array(after[(row["effector"], row["start"])]["position"])
    assert np.linalg.norm(now[:2] - np.array(stone.location)[:2]) < 0.25
    np.testing.assert_allclose(after[(row["effector"], row["start"])]["source_position"], row["position"])
    assert bpy.ops.reldesc.reposition_contacts(armature="Walker") == {'FINISHED'}
    assert scene.reldesc.reposition_contacts
    moved = {(r["effector"], r["start"]): r for r in jobs.stored_contacts(arm)}[(row["effector"], row["start"])]
    assert moved["status"] == "repositioned" and moved["new_position"] is not None
    assert moved["continuity"] == "re-embedded"              # carried by its descriptors, not pinned
    assert moved["new_surface"] in {ob.name for ob in env.all_objects} and moved["new_surface"] != stone.name
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    # The baked foot rests on a surface that exists during the phase.
    bound = jobs.Bound(arm)
    verts = bound.read_environment(scene)
    mesh = bound.binding.mesh.with_vertices(verts)
    from blender_reldesc.core.geometry import Collider
    collider = Collider(verts, mesh.normals(), mesh.triangles, mesh.valid, 1.0)
    i = [b.name for b in arm.data.bones].index("LeftFoot")
    mid = (moved["start"] + moved["end"]) // 2
    scene.frame_set(mid)
    head = adapter.to_world(adapter.world_matrix(arm), adapter.read_pose(arm)[0])[i]
    assert abs(collider.closest(head[None])[0][0]) < 0.08 + 0.015 * bound.binding.body_height
    # Locking that phase keeps its original contact (on the moved stone: unreachable, kept as asked).
    index = [k for k, r in enumerate(jobs.stored_contacts(arm))
             if (r["effector"], r["start"]) == (row["effector"], row["start"])][0]
    assert bpy.ops.reldesc.contact_flag(armature="Walker", index=index, flag='lock') == {'FINISHED'}
    assert jobs.stored_contacts(arm)[index]["lock"] is True


def test_command_line_bake_reports_contacts(tmp_path):
    path = tmp_path / "stones.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_stones_scene(frames=90); "
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, capture_output=True, timeout=300)
    run = lambda *a: subprocess.run([sys.executable, "-m", "blender_reldesc", *a], capture_output=True,  # noqa: E731
                                    text=True, cwd=ROOT, env=env, timeout=300)
    r = run("bind", str(path), "--armature", "Walker", "--environment", "Environment")
    assert r.returncode == 0, r.stderr
    move = (f"import bpy; bpy.ops.wm.open_mainfile(filepath={str(path)!r}); "
            "bpy.data.objects['Stone.002'].location.y += 1.0; "
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    subprocess.run([sys.executable, "-c", move], check=True, cwd=ROOT, env=env, capture_output=True, timeout=300)
    report = tmp_path / "plain.json"
    r = run("bake", str(path), "--armature", "Walker", "--report", str(report), "-o", str(tmp_path / "a.blend"))
    assert r.returncode == 0, r.stderr
    plain = json.loads(report.read_text())
    assert plain["contact_counts"]["unresolved"] >= 1 and plain["contact_counts"]["repositioned"] == 0
    r = run("bake", str(path), "--armature", "Walker", "--reposition-contacts", "--report", str(report),
            "-o", str(tmp_path / "b.blend"))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert data["contact_counts"]["repositioned"] >= 1
    row = next(c for c in data["contacts"] if c["status"] == "repositioned")
    assert set(row) >= {"effector", "start", "end", "status", "reason", "position", "new_position", "continuity"}
    assert row["reason"] in ("unsupported", "unreachable", "collision", "balance")
    assert row["continuity"] in ("re-embedded", "pins")
    assert len(row["new_position"]) == 3


def test_contact_settings_errors_are_clear_and_change_nothing(tmp_path):
    scene, arm, env, stones = demo.build_stones_scene(frames=40)
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    scene.reldesc.contact_effectors = "LeftHand"             # never touches anything
    with pytest.raises(RuntimeError, match="no contact phases found"):
        bpy.ops.reldesc.detect_contacts(armature="Walker")
    assert jobs.stored_contacts(arm) == []
    scene.reldesc.contact_effectors = "Spine"
    with pytest.raises(RuntimeError, match="fewer than two bones"):
        bpy.ops.reldesc.detect_contacts(armature="Walker")
    with pytest.raises(Exception, match="out of range"):
        jobs.bake_job(scene, arm, contacts={"distance": 3.0})
    assert "Walk.adapted" not in bpy.data.actions
    scene.reldesc.contact_effectors = ""
    assert bpy.ops.reldesc.detect_contacts(armature="Walker") == {'FINISHED'}


def test_live_preview_with_contacts_shows_the_bake():
    from blender_reldesc.viewport import live
    scene, arm, env, stones = demo.build_stones_scene(frames=90)
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.detect_contacts(armature="Walker") == {'FINISHED'}
    row, stone = _stone_under_phase([r for r in jobs.stored_contacts(arm) if r["start"] > 30], stones)
    stone.location.y += 1.0
    bpy.context.view_layer.update()
    scene.reldesc.reposition_contacts = True
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    bound = jobs.Bound(arm)
    frames = range(row["start"] - 5, row["end"] + 6)
    world = adapter.world_matrix(arm)
    baked = []
    for f in frames:
        scene.frame_set(f)
        baked.append(adapter.to_world(world, adapter.read_pose(arm)[0]))
    source = bpy.data.actions["Walk"]
    adapter.assign_action(arm, source)
    arm.animation_data.action_slot = source.slots[0]
    assert bpy.ops.reldesc.live(armature="Walker") == {'FINISHED'}
    try:
        posed = []
        for f in frames:
            scene.frame_set(f)
            bpy.context.view_layer.update()
            posed.append(adapter.to_world(world, adapter.read_pose(arm)[0]))
        assert np.abs(np.stack(posed) - np.stack(baked)).max() < 1e-3 * bound.binding.body_height
        assert live.last_contacts["repositioned"] >= 1 and live.last_error == ""
        # Turning re-positioning off goes back to the per-frame preview: the foot follows the
        # descriptors of the stone that moved away again.
        scene.reldesc.reposition_contacts = False
        scene.frame_set(row["start"] + 2)
        assert live._sessions["Walker"]["contacts"] is None
    finally:
        bpy.ops.reldesc.live(armature="Walker")
