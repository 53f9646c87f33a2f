"""The built extension zip validates, enables inside Blender and runs its operators."""

import glob
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENABLE_AND_RUN = textwrap.dedent('''
    import os, sys, tempfile, zipfile
    import bpy, addon_utils
    zip_path = sys.argv[-1]
    repo_dir = tempfile.mkdtemp()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    prefs = bpy.context.preferences
    prefs.extensions.repos.new(name="test_repo", module="test_repo", custom_directory=repo_dir, source='USER')
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(os.path.join(repo_dir, "blender_reldesc"))
    addon_utils.enable("bl_ext.test_repo.blender_reldesc", default_set=True)
    import importlib
    ext = importlib.import_module("bl_ext.test_repo.blender_reldesc")
    assert "blender_reldesc" not in sys.modules, "the repository copy was imported instead of the zip"
    demo = importlib.import_module("bl_ext.test_repo.blender_reldesc.demo")
    scene, arm, env, bridge, beam = demo.build_scene(frames=20, deck_cells=(20, 4), reset=False)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    demo.lower_beam(beam, 0.2)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    assert "Walk.adapted" in bpy.data.actions
    addon_utils.disable("bl_ext.test_repo.blender_reldesc")
    assert "bind" not in dir(bpy.ops.reldesc)
    assert not hasattr(bpy.types.Scene, "reldesc")
    print("EXTENSION-OK", flush=True)
    os._exit(0)             # the bpy 4.5 wheel can hang in its teardown at exit
''')


def _builder():
    import sysconfig
    import bpy
    return os.path.join(sysconfig.get_paths()["purelib"], "bpy", f"{bpy.app.version[0]}.{bpy.app.version[1]}",
                        "scripts", "addons_core", "bl_pkg", "cli", "blender_ext.py")


def _zip(out_dir):
    """Build the zips from the current sources with this Blender's own builder."""
    if not glob.glob(os.path.join(ROOT, "blender_reldesc", "wheels", "scipy-*manylinux*.whl")):
        pytest.fail("the bundled scipy wheels are missing: run `make extension` (make test does)")
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([sys.executable, _builder(), "build", "--source-dir", os.path.join(ROOT, "blender_reldesc"),
                        "--output-dir", str(out_dir), "--split-platforms"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return glob.glob(os.path.join(str(out_dir), "blender_reldesc-*-linux_x64.zip"))[0]


def test_manifest_validates():
    r = subprocess.run([sys.executable, _builder(), "validate", os.path.join(ROOT, "blender_reldesc")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_zip_enables_and_runs_its_operators(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HOME"] = str(tmp_path)                     # a clean user config for Blender
    r = subprocess.run([sys.executable, "-c", ENABLE_AND_RUN, _zip(tmp_path / "dist")], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env, timeout=600)
    assert "EXTENSION-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
