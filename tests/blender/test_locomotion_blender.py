"""Walk along a path (reldesc.walk and the ``walk`` command) on a fresh generated scene."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import adapter, demo  # noqa: E402
from blender_reldesc.core import TriMesh  # noqa: E402
from blender_reldesc.core.locomotion import Terrain  # noqa: E402
from blender_helpers import fcurve_snapshot, mixamo_with_fingers  # noqa: E402
from blender_reldesc.reports import undocumented

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def crowd_scene():
    scene, arm, env, curve = demo.build_crowd_scene(frames=80, size=(14.0, 10.0), cells=(70, 50))
    # A shorter path: the tests stay quick.
    bpy.data.objects.remove(curve)
    t = np.linspace(0.0, 1.0, 30)
    curve = demo.curve_object("Path", np.c_[5.0 * t, 1.0 * np.sin(np.pi * t), np.zeros_like(t)], scene.collection)
    s = scene.reldesc
    s.armature, s.walk_path, s.walk_terrain = arm, curve, env
    return scene, arm, env, curve


def _terrain(env):
    verts, tris, _ = adapter.read_environment(bpy.context.evaluated_depsgraph_get(),
                                              adapter.environment_objects(env.name)[0])
    return Terrain(TriMesh(verts, tris))


def _feet(scene, ob, frames, names=("LeftToe", "RightToe")):
    out = np.empty((len(frames), len(names), 3))
    for i, f in enumerate(frames):
        scene.frame_set(int(f))
        for k, n in enumerate(names):
            out[i, k] = np.array(ob.matrix_world @ ob.pose.bones[n].head)
    return out


def test_walk_operator_makes_a_crowd_on_the_terrain(crowd_scene):
    scene, arm, env, curve = crowd_scene
    source = arm.animation_data.action
    keys_before = sum(len(fc.keyframe_points) for fc in adapter._fcurves(source))
    s = scene.reldesc
    s.walk_crowd, s.walk_spacing = 3, 1.0
    assert bpy.ops.reldesc.walk() == {'FINISHED'}
    coll = bpy.data.collections["Walker walk"]
    chars = sorted(ob.name for ob in coll.objects if ob.type == 'ARMATURE')
    assert chars == ["Walker.walk.000", "Walker.walk.001", "Walker.walk.002"]
    # The source armature and its action are untouched.
    assert arm.animation_data.action == source
    assert sum(len(fc.keyframe_points) for fc in adapter._fcurves(source)) == keys_before
    ground = _terrain(env)
    lateral = []
    for name in chars:
        ob = bpy.data.objects[name]
        action = ob.animation_data.action
        assert action.name.startswith("Walk.walk.") and action != source
        assert ob.data == arm.data                       # a linked duplicate
        lo, hi = action.frame_range
        frames = np.arange(int(lo), int(hi) + 1, 3)
        feet = _feet(scene, ob, frames)
        z, hit = ground.heights(feet[..., :2].reshape(-1, 2), feet[..., 2].reshape(-1))
        gap = feet[..., 2].reshape(-1) - z
        assert hit.all()
        # The toes stand on the terrain (their source height is 2 cm) and never sink into it.
        assert gap.min() > -0.01 and np.percentile(gap, 10) < 0.04
        scene.frame_set(int(lo))
        lateral.append(np.array(ob.matrix_world @ ob.pose.bones["Hips"].head)[:2])
    # Each starts at its own path's start: side by side, 1 m apart across the path.
    np.testing.assert_allclose(np.linalg.norm(np.diff(lateral, axis=0), axis=1), 1.0, atol=0.1)


def test_walking_again_replaces_the_characters(crowd_scene):
    scene, arm, env, curve = crowd_scene
    scene.reldesc.walk_crowd = 2
    assert bpy.ops.reldesc.walk() == {'FINISHED'}
    first = {a.name for a in bpy.data.actions}
    scene.reldesc.walk_crowd = 1
    assert bpy.ops.reldesc.walk() == {'FINISHED'}
    assert [ob.name for ob in bpy.data.collections["Walker walk"].objects if ob.type == 'ARMATURE'] == \
        ["Walker.walk.000"]
    assert "Walk.walk.001" not in {a.name for a in bpy.data.actions}        # its character is gone
    assert {a.name for a in bpy.data.actions} <= first
    assert bpy.data.actions["Walk"].users >= 1


def test_walk_progress_covers_the_keys_and_a_cancel_there_changes_nothing(crowd_scene):
    # The viewport's progress bar and Esc: the job reports the walk, then each character's keys
    # (a third of a large crowd's time), and a cancel while keying leaves the scene as it was.
    from blender_reldesc.core import Cancelled
    from blender_reldesc.jobs import locomotion
    scene, arm, env, curve = crowd_scene
    source = arm.animation_data.action
    heard = []

    def record(done, total):
        heard.append(done / total)
        return True

    job = locomotion.WalkJob(scene, arm, env.name, curve.name, "", 3, 1.0, warn=lambda *a: None)
    job.read()
    job.compute(record)
    assert heard == sorted(heard) and heard[-1] == 1.0
    keying = [f for f in heard if f > locomotion.WALK_SHARE]
    assert len(keying) >= 2                                  # the keys' part, character by character
    assert max(f for f in heard[:len(heard) - len(keying)]) <= locomotion.WALK_SHARE

    objects, actions = set(bpy.data.objects.keys()), set(bpy.data.actions.keys())
    job = locomotion.WalkJob(scene, arm, env.name, curve.name, "", 3, 1.0, warn=lambda *a: None)
    job.read()
    with pytest.raises(Cancelled, match="keying character 2 of 3"):
        job.compute(lambda done, total: done / total <= locomotion.WALK_SHARE + 0.1)
    assert set(bpy.data.objects.keys()) == objects and set(bpy.data.actions.keys()) == actions
    assert "Walker walk" not in bpy.data.collections and arm.animation_data.action == source


@pytest.mark.parametrize("change, message", [
    (dict(crowd=0), "crowd count is 0"),
    (dict(path="Nope"), "no object named 'Nope'"),
    (dict(terrain="Nope"), "no collection named 'Nope'"),
    (dict(path="Walker"), "a path must be a curve"),
])
def test_walk_bad_input_changes_nothing(crowd_scene, change, message):
    scene, arm, env, curve = crowd_scene
    objects, actions = len(bpy.data.objects), len(bpy.data.actions)
    args = dict(path=curve.name, terrain=env.name)
    args.update(change)
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.reldesc.walk(**args)
    assert len(bpy.data.objects) == objects and len(bpy.data.actions) == actions


def test_path_off_the_terrain_is_refused(crowd_scene):
    scene, arm, env, curve = crowd_scene
    far = demo.curve_object("Far", np.array([[0.0, 0.0, 0.0], [40.0, 0.0, 0.0]]), scene.collection)
    with pytest.raises(RuntimeError, match="leaves the terrain"):
        bpy.ops.reldesc.walk(path=far.name)
    assert "Walker walk" not in bpy.data.collections or not bpy.data.collections["Walker walk"].objects


def test_walk_command_line(crowd_scene, tmp_path):
    path = tmp_path / "crowd.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    out, report = tmp_path / "out.blend", tmp_path / "walk.json"
    env = dict(os.environ, PYTHONPATH=ROOT)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "blender_reldesc", *args], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=300)

    r = run("walk", str(path), "--armature", "Walker", "--path", "Path", "--terrain", "Terrain", "--crowd", "2",
            "-o", str(out), "--report", str(report))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert undocumented("walk", data) == []  # every field in the generated reference
    assert data["characters"] == ["Walker.walk.000", "Walker.walk.001"] and data["frames"] > 30
    assert len(data["path_frames"]) == 2 and max(data["path_frames"]) == data["frames"]
    assert data["stands_from"] == [data["frame_start"] + n - 1 for n in data["path_frames"]]
    assert out.exists()
    # Shared among two processes: the same keys (within rounding: the keys are float32).
    shared = tmp_path / "shared.blend"
    r = run("walk", str(path), "--armature", "Walker", "--path", "Path", "--terrain", "Terrain", "--crowd", "2",
            "--workers", "2", "-o", str(shared))
    assert r.returncode == 0, r.stderr
    walked = {}
    for name, file in (("one", out), ("two", shared)):
        with bpy.data.libraries.load(str(file), link=False) as (src, dst):
            dst.actions = [a for a in src.actions if ".walk." in a]
        walked[name] = [fcurve_snapshot(a) for a in dst.actions]
    assert len(walked["one"]) == len(walked["two"]) == 2
    for a, b in zip(walked["one"], walked["two"]):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6)
    before = os.path.getmtime(path)
    base = ["walk", str(path), "--armature", "Walker"]
    for args, code, message in ((["--path", "Path", "--terrain", "Terrain", "--crowd", "0"], 1, "crowd count is 0"),
                                (["--path", "Nope", "--terrain", "Terrain"], 1, "no object named 'Nope'"),
                                (["--path", "Path", "--terrain", "Walker"], 1, "no collection named 'Walker'"),
                                (["--terrain", "Terrain"], 2, "--path"),
                                (["--path", "Path", "--terrain", "Terrain", "--workers", "0"], 2, "--workers"),
                                (["--path", "Path", "--paths", "X", "--terrain", "Terrain"], 2, "not allowed")):
        r = run(*base, *args)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == code and len(lines) == 1 and message in lines[0], r.stderr
        assert "Traceback" not in r.stderr
    assert os.path.getmtime(path) == before                  # a failed run never saves


def test_one_character_per_curve_of_a_collection_and_a_terrain_edited_again(crowd_scene):
    scene, arm, env, curve = crowd_scene
    paths = bpy.data.collections.new("Paths")
    scene.collection.children.link(paths)
    t = np.linspace(0.0, 1.0, 20)
    for k, y in enumerate((-1.5, 1.5)):
        demo.curve_object(f"Lane.{k}", np.c_[4.0 * t, np.full_like(t, y), np.zeros_like(t)], paths)
    assert bpy.ops.reldesc.walk(paths="Paths") == {'FINISHED'}
    chars = [bpy.data.objects[f"Walker.walk.{k:03d}"] for k in range(2)]
    scene.frame_set(1)
    starts = [np.array(ob.matrix_world @ ob.pose.bones["Hips"].head) for ob in chars]
    assert abs(starts[0][1] + 1.5) < 0.1 and abs(starts[1][1] - 1.5) < 0.1
    # Raise the terrain under the lanes by 30 cm and walk again: no bind step, the feet follow.
    hills = env.objects["Hills"]
    co = np.empty(len(hills.data.vertices) * 3, np.float32)
    hills.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] += 0.3 * np.exp(-((co[:, 0] - 2.0) ** 2 + co[:, 1] ** 2) / 4.0)
    hills.data.vertices.foreach_set("co", co.ravel())
    hills.data.update()
    assert bpy.ops.reldesc.walk(paths="Paths") == {'FINISHED'}
    ground = _terrain(env)
    for k in range(2):
        ob = bpy.data.objects[f"Walker.walk.{k:03d}"]
        lo, hi = ob.animation_data.action.frame_range
        feet = _feet(scene, ob, np.arange(int(lo), int(hi) + 1, 2))
        z, hit = ground.heights(feet[..., :2].reshape(-1, 2), feet[..., 2].reshape(-1))
        gap = feet[..., 2].reshape(-1) - z
        assert hit.all() and gap.min() > -0.01 and np.percentile(gap, 10) < 0.04


def test_each_curve_of_a_collection_is_walked_to_its_end(crowd_scene):
    # Curves of different lengths (issue 35: every character was cut to the shortest): each
    # character walks its own curve to its end and stands there for the rest of the walk.
    scene, arm, env, curve = crowd_scene
    paths = bpy.data.collections.new("Paths")
    scene.collection.children.link(paths)
    t = np.linspace(0.0, 1.0, 20)
    ends = []
    for k, (y, length) in enumerate(((-1.5, 2.5), (1.5, 5.0))):
        demo.curve_object(f"Lane.{k}", np.c_[length * t, np.full_like(t, y), np.zeros_like(t)], paths)
        ends.append(np.array([length, y]))
    assert bpy.ops.reldesc.walk(paths="Paths") == {'FINISHED'}
    chars = [bpy.data.objects[f"Walker.walk.{k:03d}"] for k in range(2)]
    last = int(max(ob.animation_data.action.frame_range[1] for ob in chars))
    hips = {}
    for f in (last - 1, last):
        scene.frame_set(f)
        hips[f] = [np.array(ob.matrix_world @ ob.pose.bones["Hips"].head) for ob in chars]
    # The long lane's walker is still walking at the end; the short lane's has stood still for
    # a while, at the end of its lane (within a step: 0.7 m), not past it.
    assert np.linalg.norm(hips[last][1] - hips[last - 1][1]) > 0.01
    assert np.linalg.norm(hips[last][0] - hips[last - 1][0]) < 1e-6
    for k in range(2):
        gap = ends[k][0] - hips[last][k][0]
        assert -0.05 < gap < 0.75 and abs(hips[last][k][1] - ends[k][1]) < 0.15
    # The standing frames are keyed with one pose: every curve of the short lane's action is flat
    # over its last frames.
    act = chars[0].animation_data.action
    frames = np.arange(last - 10, last + 1, dtype=float)
    for fc in adapter.actions._fcurves(act):
        values = [fc.evaluate(f) for f in frames]
        assert max(values) - min(values) < 1e-6, fc.data_path


def test_a_mixamo_named_rig_with_fingers_walks(crowd_scene):
    """Another convention than the generated walker's: Mixamo names and unkeyed finger bones.
    The fingers ride with the hands (their keys follow the source's rest pose) and the feet
    still stand on the terrain."""
    scene, arm, env, curve = crowd_scene
    mixamo_with_fingers(arm)
    assert bpy.ops.reldesc.walk(crowd=1) == {'FINISHED'}
    ob = bpy.data.objects["Walker.walk.000"]
    lo, hi = ob.animation_data.action.frame_range
    frames = np.arange(int(lo), int(hi) + 1, 3)
    feet = _feet(scene, ob, frames, names=("mixamorig:LeftToe", "mixamorig:RightToe"))
    z, hit = _terrain(env).heights(feet[..., :2].reshape(-1, 2), feet[..., 2].reshape(-1))
    gap = feet[..., 2].reshape(-1) - z
    assert hit.all() and gap.min() > -0.01 and np.percentile(gap, 10) < 0.04
    # A finger keeps its place on the hand: the distance from the hand's head to a fingertip is
    # the rest pose's on every frame.
    rest = (arm.data.bones["mixamorig:LeftHandIndex3"].tail_local - arm.data.bones["mixamorig:LeftHand"].head_local).length
    for f in frames[::5]:
        scene.frame_set(int(f))
        pb = ob.pose.bones
        d = (pb["mixamorig:LeftHandIndex3"].tail - pb["mixamorig:LeftHand"].head).length
        assert abs(d - rest) < 1e-4
