"""Processes started from a Python that imported the bpy wheel find the wheel, not Blender's
inner ``bpy`` package (``blender_reldesc.spawn``); Blender proper's path is left alone."""

import os

from blender_reldesc.spawn import bpy_importable


def _folders(tmp_path):
    site = tmp_path / "site-packages"                        # the wheel: bpy is a compiled module
    (site / "bpy").mkdir(parents=True)
    (site / "bpy" / "__init__.cpython-313-x86_64-linux-gnu.so").write_bytes(b"")
    modules = site / "bpy" / "5.2" / "scripts" / "modules"   # Blender's own bpy package
    (modules / "bpy").mkdir(parents=True)
    (modules / "bpy" / "__init__.py").write_text("from _bpy import types\n")
    startup = site / "bpy" / "5.2" / "scripts" / "startup"
    startup.mkdir(parents=True)
    return str(site), str(modules), str(startup)


def test_the_inner_bpy_folder_moves_just_after_the_wheel(tmp_path):
    site, modules, startup = _folders(tmp_path)
    path = [startup, modules, "", "/usr/lib/python3.13", site, "/elsewhere"]
    assert bpy_importable(path) == [startup, "", "/usr/lib/python3.13", site, modules, "/elsewhere"]
    assert bpy_importable(bpy_importable(path)) == bpy_importable(path)          # once is enough


def test_a_path_that_already_finds_the_wheel_first_is_unchanged(tmp_path):
    site, modules, startup = _folders(tmp_path)
    for path in ([site, modules, startup], [startup, "/usr/lib/python3.13"], [modules, "/usr/lib"]):
        assert bpy_importable(path) == path               # no wheel folder: Blender proper's own path


def test_a_windows_wheel_is_found_too(tmp_path):
    site, modules, _ = _folders(tmp_path)
    so = os.path.join(site, "bpy", "__init__.cpython-313-x86_64-linux-gnu.so")
    os.rename(so, os.path.join(site, "bpy", "__init__.cp313-win_amd64.pyd"))
    assert bpy_importable([modules, site]) == [site, modules]
