"""The core imports without Blender and never imports bpy, bmesh or mathutils."""

import ast
import pathlib
import subprocess
import sys

CORE = pathlib.Path(__file__).resolve().parents[1] / "blender_reldesc" / "core"


def test_core_sources_do_not_import_blender_modules():
    paths = sorted(CORE.rglob("*.py"))
    assert {p.parent.name for p in paths} >= {"core", "contacts", "locomotion", "transfer", "geometry"}
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"bpy", "bmesh", "mathutils"}, \
                    f"{path.relative_to(CORE)} imports {name}"


def test_every_core_module_imports_with_bpy_unavailable():
    code = ("import importlib, pkgutil, sys\n"
            "for name in ('bpy', 'bmesh', 'mathutils'): sys.modules[name] = None\n"
            "import blender_reldesc.core as c\n"
            "names = [m.name for m in pkgutil.walk_packages(c.__path__, 'blender_reldesc.core.')]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names), c.bind.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=CORE.parents[1])
    assert out.returncode == 0, out.stderr
    count, name = out.stdout.split()
    assert name == "bind" and int(count) == sum(1 for p in CORE.rglob("*.py") if p.name != "__init__.py") + \
        sum(1 for p in CORE.rglob("__init__.py") if p.parent != CORE)
