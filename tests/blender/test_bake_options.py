"""Bake options: frame range, step, key reduction within a tolerance, interpolation and target,
through the operator, the job and the command line; judged by what Blender plays back."""

import numpy as np
import pytest

import bpy

from blender_reldesc import adapter, demo, jobs

from test_cli import ROOT, run  # noqa: F401  (the CLI helpers)

FRAMES = np.arange(1, 41)


def _world_joints(scene, arm):
    """Bone heads and tails (F,2B,3) at every frame, as Blender plays the armature now."""
    out = []
    for f in FRAMES:
        scene.frame_set(int(f))
        head, tail, _ = adapter.read_pose(arm)
        out.append(adapter.to_world(adapter.world_matrix(arm), np.concatenate([head, tail])))
    return np.stack(out)


def _keys(action, path_end="rotation_quaternion"):
    return [(fc.data_path, [k.co[0] for k in fc.keyframe_points], [k.interpolation for k in fc.keyframe_points])
            for fc in adapter._fcurves(action) if fc.data_path.endswith(path_end)]


@pytest.fixture
def edited(scene):
    scene, arm, env, bridge, beam = scene
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    demo.lower_beam(beam, 0.45)
    demo.bend_bridge(bridge, sag=0.2, at=1.5)
    report = jobs.bake_job(scene, arm)
    dense = _world_joints(scene, arm)
    return scene, arm, report, dense


def test_a_frame_range_rewrites_only_those_frames_and_keeps_the_source_around_them(edited):
    scene, arm, dense_report, dense = edited
    source = bpy.data.actions["Walk"]
    before = {p: f for p, f, _ in _keys(source)}
    assert bpy.ops.reldesc.bake(armature="Walker", frame_start=10, frame_end=20) == {'FINISHED'}
    baked = arm.animation_data.action
    for path, frames, _ in _keys(baked):
        inside = [f for f in frames if 10 <= f <= 20]
        outside = [f for f in frames if not 10 <= f <= 20]
        assert outside == [f for f in before[path] if not 10 <= f <= 20]      # the source's keys
        assert inside in ([], list(range(10, 21)))                             # unchanged, or every frame
    played = _world_joints(scene, arm)
    assert np.abs(played[9:20] - dense[9:20]).max() < 1e-5


def test_step_keys_every_nth_frame_and_the_last(edited):
    scene, arm, *_ = edited
    report = jobs.bake_job(scene, arm, options=jobs.BakeOptions(step=3))
    expected = sorted(set(range(1, 41, 3)) | {40})
    for path, frames, _ in _keys(arm.animation_data.action):
        assert frames == expected or len(frames) == 40      # rewritten with the step, or the source's curve
    assert report["keys"]["written"] < report["keys"]["every_frame"] / 2.5
    # Keys every third frame stray between them (measured); keys on every frame play the motion.
    assert report["keys"]["max_deviation"] > 1e-5
    assert jobs.bake_job(scene, arm)["keys"]["max_deviation"] == 0.0


@pytest.mark.parametrize("interpolation", ["LINEAR", "BEZIER"])
def test_clean_keeps_fewer_keys_within_the_tolerance_as_blender_plays_them(edited, interpolation):
    scene, arm, dense_report, dense = edited
    tol = 0.005
    report = jobs.bake_job(scene, arm, options=jobs.BakeOptions(clean=tol, interpolation=interpolation))
    keys = report["keys"]
    # The generated walk is jerky (its source needs keys on most frames at this tolerance):
    # the property is fewer keys, within the tolerance as Blender plays them.
    assert keys["written"] < 0.8 * dense_report["keys"]["written"]
    assert keys["max_deviation"] <= tol
    played = _world_joints(scene, arm)
    assert np.abs(np.linalg.norm(played - dense, axis=-1)).max() <= tol + 1e-5
    assert {i for *_, interp in _keys(arm.animation_data.action) for i in interp} == {interpolation}


def test_nla_target_adds_a_track_above_the_source_and_rebake_replaces_it(edited):
    scene, arm, dense_report, dense = edited
    adapter.assign(arm, bpy.data.actions["Walk"], None)
    assert bpy.ops.reldesc.bake(armature="Walker", target='NLA') == {'FINISHED'}
    tracks = arm.animation_data.nla_tracks
    assert [t.name for t in tracks] == ["Walk", "[reldesc] Walk.adapted"]
    assert tracks[0].strips[0].action.name == "Walk" and tracks[1].strips[0].action.name == "Walk.adapted"
    assert arm.animation_data.action is None
    assert np.abs(_world_joints(scene, arm) - dense).max() < 1e-5
    tracks[1].mute = True                                     # compare with the source
    assert np.abs(_world_joints(scene, arm) - dense).max() > 0.01
    tracks[1].mute = False
    assert bpy.ops.reldesc.bake(armature="Walker", target='NLA') == {'FINISHED'}
    assert [t.name for t in arm.animation_data.nla_tracks] == ["Walk", "[reldesc] Walk.adapted"]
    assert "Walk.adapted.001" not in bpy.data.actions


def test_bad_bake_options_say_what_to_do(edited):
    scene, arm, *_ = edited
    for options, words in ((jobs.BakeOptions(frames=(30, 60)), "outside the bound frames 1-40"),
                           (jobs.BakeOptions(step=0), "step must be 1 or more"),
                           (jobs.BakeOptions(clean=float("nan")), "positive distance"),
                           (jobs.BakeOptions(interpolation="CUBIC"), "LINEAR, BEZIER"),
                           (jobs.BakeOptions(target="strip"), "action, nla")):
        before = arm.animation_data.action
        with pytest.raises(adapter.SceneError, match=words):
            jobs.bake_job(scene, arm, options=options)
        assert arm.animation_data.action == before


def test_the_command_line_takes_the_bake_options(tmp_path):
    import subprocess
    import sys
    import os
    path = tmp_path / "walk.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_scene(frames=30, deck_cells=(30, 6)); "
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                   capture_output=True, timeout=300)
    assert run("bind", str(path), "--armature", "Walker", "--environment", "Environment").returncode == 0
    for bad in (["--step", "0"], ["--clean", "-1"], ["--target", "strip"], ["--interpolation", "cubic"],
                ["--frames", "5"]):
        r = run("bake", str(path), "--armature", "Walker", *bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (bad, r.stderr)
    r = run("bake", str(path), "--armature", "Walker", "--frames", "40", "50")
    assert r.returncode == 1 and "outside the bound frames 1-30" in r.stderr
    report = tmp_path / "report.json"
    r = run("bake", str(path), "--armature", "Walker", "--frames", "5", "25", "--step", "2", "--clean", "0.003",
            "--interpolation", "bezier", "--target", "nla", "--report", str(report))
    assert r.returncode == 0, r.stderr
    import json
    rep = json.loads(report.read_text())
    assert rep["bake"] == dict(frame_start=5, frame_end=25, step=2, clean=0.003, interpolation="BEZIER",
                               target="nla")
    assert rep["keys"]["max_deviation"] <= 0.003


def test_nla_target_after_an_action_bake_still_puts_the_source_below(edited):
    scene, arm, dense_report, dense = edited           # the adapted action is active now
    assert arm.animation_data.action.name == "Walk.adapted"
    assert bpy.ops.reldesc.bake(armature="Walker", target='NLA') == {'FINISHED'}
    tracks = arm.animation_data.nla_tracks
    assert [t.strips[0].action.name for t in tracks] == ["Walk", "Walk.adapted"]
    tracks[1].mute = True
    assert np.abs(_world_joints(scene, arm) - _source_joints(scene, arm)).max() < 1e-6


def _source_joints(scene, arm):
    ad = arm.animation_data
    mutes = [t.mute for t in ad.nla_tracks]
    for t in ad.nla_tracks:
        t.mute = True
    action = ad.action
    adapter.assign(arm, bpy.data.actions["Walk"], None)
    out = _world_joints(scene, arm)
    ad.action = action
    for t, m in zip(ad.nla_tracks, mutes):
        t.mute = m
    return out
