"""The manual against the code: the generated reference is current, and the example files the
getting-started and task pages use (``make examples``) are what they say: bound and edited, and one
button away from the result, through the real operators."""

import os
import subprocess
import sys

import bpy
import numpy as np
import pytest

from blender_reldesc import adapter, demo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(bpy.app.version[:2] != (5, 2) or sys.version_info[:2] != (3, 13),
                    reason="the reference is generated with Blender 5.2 LTS on Python 3.13 (.venv)")
def test_the_generated_reference_is_what_the_code_gives():
    # A new operator property, panel field, CLI option, report field or message without
    # `make docs` run and docs/reference committed fails here (and in CI's docs build).
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "docs_reference.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]


def _joints(arm, frames):
    """World positions of every bone head on ``frames``."""
    scene = bpy.context.scene
    out = []
    for f in frames:
        scene.frame_set(f)
        mw = np.array(arm.matrix_world)
        heads = np.array([mw[:3, :3] @ np.array(b.head) + mw[:3, 3] for b in arm.pose.bones])
        out.append(heads)
    return np.array(out)


def _open(path):
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    return bpy.context.scene.reldesc


def test_examples_are_one_button_from_their_result(tmp_path):
    paths = demo.write_examples(str(tmp_path), ["start", "bridge", "crowd", "retarget"])
    assert [os.path.basename(p) for p in paths] == ["start.blend", "bridge.blend", "crowd.blend", "retarget.blend"]

    # start: nothing bound; the getting-started steps: Bind, lower the beam, Bake.
    s = _open(tmp_path / "start.blend")
    assert "reldesc_example" in bpy.data.texts and s.armature.name == "Walker" and s.environment.name == "Environment"
    assert adapter.storage.stored_meta(s.armature) is None                           # not bound yet
    assert bpy.ops.reldesc.bind() == {'FINISHED'}
    source = _joints(s.armature, range(1, 151, 10))
    bpy.data.objects["Beam"].location.z -= 0.3
    assert bpy.ops.reldesc.bake() == {'FINISHED'}
    assert s.armature.animation_data.action.name == "Walk.adapted"
    adapted = _joints(s.armature, range(1, 151, 10))
    assert np.abs(adapted - source).max() > 0.01               # the beam's edit changed the walk
    assert "Walk" in bpy.data.actions                           # the source is kept

    # bridge: bound and edited; Bake is the last step.
    s = _open(tmp_path / "bridge.blend")
    assert s.armature.animation_data.action.name == "Walk"
    assert bpy.ops.reldesc.bake() == {'FINISHED'}
    assert s.armature.animation_data.action.name == "Walk.adapted" and s.last_frames == 150

    # crowd: the Locomotion fields set; Walk Along Path makes nine characters.
    s = _open(tmp_path / "crowd.blend")
    assert s.walk_path is not None and s.walk_terrain is not None and s.walk_crowd == 9
    assert bpy.ops.reldesc.walk() == {'FINISHED'}
    walkers = [ob for ob in bpy.data.objects if ob.name.startswith(s.armature.name + ".walk.")
               and ob.type == 'ARMATURE']
    assert len(walkers) == 9

    # retarget: source and target set; Retarget writes Walk.retarget on the target.
    s = _open(tmp_path / "retarget.blend")
    assert s.retarget_source.name == "Source" and s.retarget_target.name == "Target"
    assert bpy.ops.reldesc.retarget() == {'FINISHED'}
    assert s.retarget_target.animation_data.action.name == "Walk.retarget"


def test_the_examples_command(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "blender_reldesc", "examples", "-o", str(tmp_path), "--scene", "start"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "start.blend").exists() and "1 example files" in r.stdout
    r = subprocess.run([sys.executable, "-m", "blender_reldesc", "examples", "--scene", "nowhere"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 2 and "invalid choice" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_writing_the_examples_again_keeps_the_previous_file(tmp_path):
    # An animator's edits to an example file are not lost when `make examples` runs again: the
    # previous file becomes <name>.blend1, Blender's own backup, for the garment too (it saves
    # itself once on the way, before its bind).
    for name in ("start", "garment"):
        path = tmp_path / f"{name}.blend"
        demo.write_examples(str(tmp_path), [name])
        _open(path)
        bpy.data.texts.new("my notes")
        bpy.ops.wm.save_mainfile()
        demo.write_examples(str(tmp_path), [name])
        _open(path)
        assert "my notes" not in bpy.data.texts and "reldesc_example" in bpy.data.texts
        bpy.ops.wm.open_mainfile(filepath=str(path) + "1", load_ui=False)
        assert "my notes" in bpy.data.texts
