"""The built extension zips validate, carry scipy for every Python Blender ships, and install,
enable and run in this Blender with their own scipy."""

import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def test_zip_installs_enables_and_binds_and_bakes_with_its_own_scipy(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HOME"] = str(tmp_path)                     # a fresh user configuration and user repository
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extension_install.py")
    r = subprocess.run([sys.executable, script, _zip(tmp_path / "dist")], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env, timeout=600)
    assert "EXTENSION-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    # scipy came from the wheel the zip carries for this Python, installed beside the user repository.
    version, where = r.stdout.split("SCIPY ", 1)[1].split()[:2]
    assert version == bundled_scipy(), (version, bundled_scipy())
    assert where.startswith(str(tmp_path)) and f"{os.sep}.local{os.sep}" in where, where


def bundled_scipy():
    """The scipy version the manifest bundles."""
    text = open(os.path.join(ROOT, "blender_reldesc", "blender_manifest.toml")).read()
    versions = set(re.findall(r"wheels/scipy-([0-9.]+)-", text))
    assert len(versions) == 1, versions
    return versions.pop()


def test_the_bundled_scipy_is_the_one_downloaded_and_tested():
    version = bundled_scipy()
    assert f"SCIPY_BUNDLED := {version}" in open(os.path.join(ROOT, "Makefile")).read()
    assert f"scipy=={version}" in open(os.path.join(ROOT, "requirements", "blender-5.2.txt")).read()


def test_every_zip_carries_scipy_for_both_pythons_blender_ships(tmp_path):
    # Blender 4.5 runs Python 3.11, Blender 5.1 and later 3.13: each zip has a wheel for each.
    import zipfile
    _zip(tmp_path / "dist")
    zips = sorted(glob.glob(str(tmp_path / "dist" / "blender_reldesc-*.zip")))
    assert [os.path.basename(z).rsplit("-", 1)[1] for z in zips] == \
        ["linux_x64.zip", "macos_arm64.zip", "macos_x64.zip", "windows_x64.zip"]
    for z in zips:
        wheels = [n for n in zipfile.ZipFile(z).namelist() if n.endswith(".whl")]
        assert sorted(n.split("-")[2] for n in wheels) == ["cp311", "cp313"], (z, wheels)
