"""Reaching through the real operator and the command line (reldesc.reach, ``reach``)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import jobs  # noqa: E402
from blender_helpers import fcurve_snapshot, heads_over_frames  # noqa: E402
from blender_reldesc.reports import undocumented

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAME = 20


def _reachable(arm, offset=(0.2, -0.1, 0.25)):
    """A point near the right hand at FRAME (scene frame), as the binding has it."""
    bound = jobs.Bound(arm)
    hand = bound.binding.skeleton.index("RightHand")
    return bound.binding.motion[int(np.searchsorted(bound.frames, FRAME)), hand] + np.array(offset)


def _empty(name, location):
    ob = bpy.data.objects.new(name, None)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.update()
    return ob


def test_the_reach_operator_bakes_the_hand_onto_an_empty(scene):
    scene, arm, *_ = scene
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    source = bpy.data.actions["Walk"]
    before = fcurve_snapshot(source)
    target = _empty("Cup", _reachable(arm))
    s = scene.reldesc
    s.reach_hand, s.reach_target, s.reach_frame, s.reach_window, s.reach_database = "RightHand", target, FRAME, 10, "Walk"
    assert bpy.ops.reldesc.reach(armature="Walker") == {'FINISHED'}
    assert arm.animation_data.action == bpy.data.actions["Walk.adapted"]
    after = fcurve_snapshot(source)                              # the source (also the database) is untouched
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    bound = jobs.Bound(arm)
    heads = heads_over_frames(scene, arm, bound.frames)
    hand = bound.rig.names.index("RightHand")
    i = int(np.searchsorted(bound.frames, FRAME))
    assert np.linalg.norm(heads[i, hand] - np.array(target.location)) < 0.01
    # Outside the window the baked bones play the source.
    arm.animation_data.action = source
    plain = heads_over_frames(scene, arm, bound.frames)
    outside = np.r_[0:i - 10, i + 11:len(bound.frames)]
    assert np.linalg.norm(heads[outside] - plain[outside], axis=-1).max() < 0.02


def test_an_animated_empty_is_followed_while_held(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    target = _empty("Ball", _reachable(arm))
    # The ball travels with the walker (about its speed) for the held frames.
    bound = jobs.Bound(arm)
    root = bound.binding.motion[:, 0]
    for f in range(FRAME - 3, FRAME + 8):
        target.location = _reachable(arm) + root[int(np.searchsorted(bound.frames, f))] - \
            root[int(np.searchsorted(bound.frames, FRAME))]
        target.keyframe_insert("location", frame=f)
    assert bpy.ops.reldesc.reach(armature="Walker", hand="RightHand", target="Ball", frame=FRAME, window=8,
                                 hold=5) == {'FINISHED'}
    heads = heads_over_frames(scene, arm, bound.frames)
    hand = bound.rig.names.index("RightHand")
    for f in range(FRAME, FRAME + 6):
        scene.frame_set(f)
        i = int(np.searchsorted(bound.frames, f))
        assert np.linalg.norm(heads[i, hand] - np.array(target.matrix_world.translation)) < 0.01


def test_a_target_out_of_reach_changes_nothing(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    _empty("Moon", _reachable(arm, (5.0, 0.0, 0.0)))
    actions = {a.name for a in bpy.data.actions}
    # Scripts get the operator's error report as a RuntimeError (the UI shows it); nothing is written.
    with pytest.raises(RuntimeError, match=r"the target is 5\.\d\d from RightArm at frame 20, beyond the reach "
                                           r"of RightHand \(0\.54\)"):
        bpy.ops.reldesc.reach(armature="Walker", hand="RightHand", target="Moon", frame=FRAME)
    assert {a.name for a in bpy.data.actions} == actions
    assert arm.animation_data.action == bpy.data.actions["Walk"]
    with pytest.raises(RuntimeError, match="no bone named 'Nope'"):
        bpy.ops.reldesc.reach(armature="Walker", hand="Nope", target="Moon", frame=FRAME)
    with pytest.raises(RuntimeError, match="no object named 'Sun'"):
        bpy.ops.reldesc.reach(armature="Walker", hand="RightHand", target="Sun", frame=FRAME)
    with pytest.raises(RuntimeError, match="outside the bound frames"):
        bpy.ops.reldesc.reach(armature="Walker", hand="RightHand", target="Moon", frame=500)


def test_reach_command_line(scene, tmp_path):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    _empty("Cup", _reachable(arm))
    _empty("Moon", _reachable(arm, (5.0, 0.0, 0.0)))
    path = tmp_path / "bound.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    env = dict(os.environ, PYTHONPATH=ROOT)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "blender_reldesc", "reach", str(path), "--armature", "Walker",
                               "--hand", "RightHand", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=300)

    out, report = tmp_path / "out.blend", tmp_path / "reach.json"
    r = run("--target", "Cup", "--frame", str(FRAME), "--window", "10", "--database", "Walk", "-o", str(out),
            "--report", str(report))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert undocumented("reach", data) == []  # every field in the generated reference
    assert data["reach"]["hand_error"] < 0.01 and data["reach"]["window"] == [FRAME - 10, FRAME + 10]
    assert data["action"] == "Walk.adapted" and out.exists()
    r = run("--target", "Cup", "--frame", str(FRAME), "--arm-only", "-o", str(out), "--report", str(report))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert data["reach"]["whole_body"] is False and data["reach"]["hand_error"] < 0.01
    before = os.path.getmtime(path)
    r = run("--target", "Moon", "--frame", str(FRAME))
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "beyond the reach of RightHand" in lines[0], r.stderr
    assert "Traceback" not in r.stderr and os.path.getmtime(path) == before
