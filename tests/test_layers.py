"""The core imports without Blender and never imports bpy, bmesh or mathutils."""

import ast
import pathlib
import subprocess
import sys

CORE = pathlib.Path(__file__).resolve().parents[1] / "blender_reldesc" / "core"


def test_core_sources_do_not_import_blender_modules():
    for path in CORE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"bpy", "bmesh", "mathutils"}, f"{path.name} imports {name}"


def test_core_imports_with_bpy_unavailable():
    code = ("import sys; sys.modules['bpy'] = None; sys.modules['mathutils'] = None; "
            "import blender_reldesc.core as c; print(c.bind.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=CORE.parents[1], check=True)
    assert out.stdout.strip() == "bind"
