"""The Blender side's shape (issue 33): bpy only in the adapter and the UI, no import circles,
no module grown past what one responsibility needs. Static: read from the sources, no Blender."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "blender_reldesc"
BLENDER = {"bpy", "bmesh", "mathutils", "gpu", "gpu_extras", "bpy_extras"}
#: Where Blender's modules may be imported: the adapter, the UI and the viewport, the properties,
#: the package's registration, and the demo (it builds and renders Blender scenes).
MAY_IMPORT_BLENDER = ("adapter/", "operators/", "panels/", "viewport/", "demo/", "properties.py", "__init__.py")


def _sources():
    return sorted(p for p in PACKAGE.rglob("*.py") if "core" not in p.relative_to(PACKAGE).parts)


def _module(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path, top_level_only):
    """Absolute names of what ``path`` imports (each ``from X import a`` gives X and X.a)."""
    tree = ast.parse(path.read_text())
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.add(name)
            out |= {f"{name}.{a.name}" for a in node.names}
    return out


def test_only_the_adapter_and_the_ui_import_blender():
    offenders = []
    for path in _sources():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(MAY_IMPORT_BLENDER[:-2]) or rel in MAY_IMPORT_BLENDER[-2:]:
            continue
        blender = {n for n in _imports(path, top_level_only=False) if n.split(".")[0] in BLENDER}
        if blender:
            offenders.append(f"{rel}: {', '.join(sorted(blender))}")
    assert not offenders, "bpy outside the adapter and the UI:\n" + "\n".join(offenders)


def test_the_jobs_and_the_commands_never_import_blender():
    for path in sorted((PACKAGE / "jobs").rglob("*.py")) + [PACKAGE / "commands.py", PACKAGE / "cli.py"]:
        blender = {n for n in _imports(path, top_level_only=False) if n.split(".")[0] in BLENDER}
        assert not blender, f"{path.relative_to(PACKAGE)} imports {blender}"


def test_no_import_circle_in_the_package():
    modules = {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for imported in _imports(path, top_level_only=True):
            # ``from . import x`` names module x; ``from .x import y`` names module x (y is in it)
            while imported and imported not in modules:
                imported = imported.rsplit(".", 1)[0] if "." in imported else ""
            if imported and imported != name:
                deps.add(imported)
        graph[name] = deps
    state, cycles = {}, []

    def visit(node, chain):
        if state.get(node) == 1:
            cycles.append(chain[chain.index(node):] + [node])
            return
        if state.get(node) == 2:
            return
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if not (node.startswith(dep + ".")):       # a module's own package is loaded before it
                visit(dep, chain + [node])
        state[node] = 2

    for node in sorted(graph):
        visit(node, [])
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_over_600_lines_outside_the_core():
    long = [(p.relative_to(PACKAGE).as_posix(), n) for p in _sources()
            if (n := len(p.read_text().splitlines())) > 600]
    assert not long, f"split these by responsibility: {long}"


def test_one_name_per_feature_on_every_layer():
    # The features' job, operator and panel modules share their names; no Blender-side module
    # repeats a core module's name for something else (core/garment.py and garments.py, ...).
    jobs = {p.stem for p in (PACKAGE / "jobs").glob("*.py")}
    for layer in ("operators", "panels"):
        names = {p.stem for p in (PACKAGE / layer).glob("*.py")} - {"__init__", "base", "viewport"}
        assert names <= jobs, f"{layer} modules without a job of the same name: {names - jobs}"
    core = {p.stem for p in (PACKAGE / "core").rglob("*.py")}
    side = {p.stem for p in _sources()} - {"__init__", "base"}
    twins = {n for n in side if n.rstrip("s") in core and n not in core} | {
        n for n in side if n + "s" in core}
    assert not twins, f"Blender-side modules named like core modules of another name: {twins}"


def test_no_class_of_the_blender_side_shares_a_core_class_name():
    # adapter.Rig (bones as arrays) and core.adaptation.Rig (the adaptation's rig) were two
    # different things under one name; the adapter's is ``Bones`` now.
    def classes(paths):
        return {n.name for p in paths for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef)}

    core = classes((PACKAGE / "core").rglob("*.py"))
    twins = classes(_sources()) & core
    assert not twins, f"named as core classes of other meaning: {twins}"
