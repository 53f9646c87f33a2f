"""Batch manifests: the local pool, skip and force, failures, bad manifests, a Dask LocalCluster,
and the Flamenco job type's compiler (under Node, with a stand-in of Flamenco's author API).

Everything runs as a user would: the command line as a subprocess on generated shot files.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT)


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "blender_reldesc", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=ENV, timeout=600)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """A folder with shots/base.blend (the bound scene) and shots/shot000..002.blend: the same
    scene with the beam lowered a little more in each (same topology)."""
    root = tmp_path_factory.mktemp("batch")
    code = textwrap.dedent(f"""
        import bpy, os
        from blender_reldesc import demo
        os.makedirs({str(root / 'shots')!r})
        scene, arm, env, bridge, beam = demo.build_scene(frames=24, deck_cells=(24, 4))
        bpy.ops.wm.save_as_mainfile(filepath={str(root / 'shots' / 'base.blend')!r})
        for k in range(3):
            beam.location.z = 2.05 - 0.1 * k
            bpy.ops.wm.save_as_mainfile(filepath=os.path.join({str(root / 'shots')!r}, f"shot{{k:03d}}.blend"))
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=ENV, capture_output=True, timeout=300)
    return root


def manifest(folder, out="out", extra=""):
    text = f"""
        [[job]]
        name = "bind"
        operation = "bind"
        file = "shots/base.blend"
        armature = "Walker"
        environment = "Environment"
        output = "{out}/base.blend"
        save_binding = "{out}/walk.npz"
    """
    for k in range(3):
        text += f"""
        [[job]]
        name = "shot{k:03d}"
        operation = "bake"
        file = "shots/shot{k:03d}.blend"
        armature = "Walker"
        binding = "{out}/walk.npz"
        output = "{out}/shot{k:03d}.blend"
        report = "{out}/shot{k:03d}.json"
    """
    path = folder / f"{out}.toml"
    (folder / out).mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text) + textwrap.dedent(extra))
    return path


def keys_of(path, armature="Walker"):
    """{data path[index]: keyframe coordinates} of the armature's action in a saved file."""
    code = textwrap.dedent(f"""
        import bpy, json, sys, os
        bpy.ops.wm.open_mainfile(filepath={str(path)!r})
        arm = bpy.data.objects[{armature!r}]
        action = arm.animation_data.action
        from blender_reldesc import adapter
        out = {{"action": action.name}}
        for fc in adapter._fcurves(action):
            out[f"{{fc.data_path}}[{{fc.array_index}}]"] = [list(k.co) for k in fc.keyframe_points]
        sys.stdout.write("KEYS" + json.dumps(out)); sys.stdout.flush(); os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    return json.loads(r.stdout.split("KEYS", 1)[1])


def test_pool_binds_once_bakes_many_and_survives_a_failing_job(shots):
    path = manifest(shots, "pool", extra="""
        [[job]]
        name = "missing"
        operation = "bake"
        file = "shots/nowhere.blend"
        armature = "Walker"
        output = "pool/nowhere.blend"
    """)
    summary = shots / "pool" / "summary.json"
    r = run("batch", str(path), "--workers", "2", "--summary", str(summary))
    assert r.returncode == 1, r.stderr
    data = json.loads(summary.read_text())
    assert (data["ok"], data["failed"], data["skipped"]) == (4, 1, 0)
    rows = {j["name"]: j for j in data["jobs"]}
    assert rows["missing"]["status"] == "failed" and "nowhere.blend" in rows["missing"]["error"]
    assert all(rows[f"shot{k:03d}"]["status"] == "ok" for k in range(3))
    assert "4 ok, 1 failed, 0 skipped" in r.stdout                    # the table at the end
    # Each shot baked from the one binding: its own edit adapted, its inputs untouched.
    for k in range(3):
        report = json.loads((shots / "pool" / f"shot{k:03d}.json").read_text())
        assert report["action"] == "Walk.adapted" and report["frames"] == 24
        assert keys_of(shots / "pool" / f"shot{k:03d}.blend")["action"] == "Walk.adapted"
    assert keys_of(shots / "shots" / "shot000.blend")["action"] == "Walk"


def test_skip_when_outputs_are_newer_then_force(shots):
    path = manifest(shots, "skip")
    assert run("batch", str(path), "--workers", "2").returncode == 0
    summary = shots / "skip" / "summary.json"
    r = run("batch", str(path), "--workers", "2", "--summary", str(summary))
    assert r.returncode == 0 and json.loads(summary.read_text())["skipped"] == 4
    # A shot edited since: only it runs again.
    later = os.path.getmtime(shots / "skip" / "shot001.blend") + 5
    os.utime(shots / "shots" / "shot001.blend", (later, later))
    r = run("batch", str(path), "--workers", "2", "--summary", str(summary))
    data = json.loads(summary.read_text())
    assert r.returncode == 0 and (data["ok"], data["skipped"]) == (1, 3)
    assert [j["name"] for j in data["jobs"] if j["status"] == "ok"] == ["shot001"]
    r = run("batch", str(path), "--workers", "2", "--force", "--summary", str(summary), "--progress", "json")
    assert r.returncode == 0 and json.loads(summary.read_text())["ok"] == 4
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert {e["event"] for e in events} >= {"start", "done", "summary"}
    assert [e for e in events if e["event"] == "progress" and e["job"] == "shot000"]


def test_a_failed_bind_fails_the_bakes_that_need_it(shots):
    path = manifest(shots, "needs")
    text = path.read_text().replace('environment = "Environment"', 'environment = "Nowhere"', 1)
    path.write_text(text)
    summary = shots / "needs" / "summary.json"
    r = run("batch", str(path), "--workers", "2", "--summary", str(summary))
    data = json.loads(summary.read_text())
    assert r.returncode == 1 and data["failed"] == 4
    rows = {j["name"]: j for j in data["jobs"]}
    assert "no collection named 'Nowhere'" in rows["bind"]["error"]
    assert "needs the output of job bind" in rows["shot002"]["error"]


@pytest.mark.parametrize("text, where, reason", [
    ('[[job]]\nname = "a"\noperation = "bake"\nfile = "x.blend"\narmature = "W"\noutput = "y.blend"\nspeed = 3\n',
     ":7:", "'speed' is not an option of bake"),
    ('[[job]]\nname = "a"\noperation = "bake"\nfile = "x.blend"\narmature = "W"\n', ":1:", "save over its input"),
    ('[[job]]\nname = "a"\noperation = "render"\nfile = "x.blend"\n', ":3:", "operation must be one of"),
    ('[[job]]\nname = "a"\noperation = "bake"\nfile = "x.blend"\noutput = "y.blend"\n'
     '[[job]]\nname = "a"\noperation = "bake"\nfile = "z.blend"\noutput = "w.blend"\n', ":7:", "used by another job"),
    ('[[job]]\nname = "a"\noperation = "bake\n', "line 3", "not valid TOML"),
    ('', "", "no jobs"),
])
def test_bad_manifest_exits_2_naming_the_line(tmp_path, text, where, reason):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    r = run("batch", str(path))
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert reason in lines[0] and where in lines[0] and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def pool_keys(shots):
    """The keys the local pool bakes, the reference for the Dask runs."""
    assert run("batch", str(manifest(shots, "same_pool")), "--workers", "2").returncode == 0
    return [keys_of(shots / "same_pool" / f"shot{k:03d}.blend") for k in range(3)]


IMPORTS = {"no-bpy": "from blender_reldesc import cli",
           "bpy-first": "import bpy; from blender_reldesc import cli",
           "package-first": "from blender_reldesc import cli; import bpy"}


@pytest.mark.parametrize("imports", sorted(IMPORTS))
def test_dask_local_cluster_bakes_the_same_actions_as_the_pool(shots, pool_keys, imports):
    # A LocalCluster started in a TD's script that imported bpy: its spawned workers inherit
    # sys.path with Blender's scripts/modules (and its inner `bpy` package) first, and run the
    # script's top again in their main thread.
    pytest.importorskip("distributed")
    out = "dask_" + imports.replace("-", "_")
    dask_manifest = manifest(shots, out)
    code = textwrap.dedent(f"""
        import os, sys
        from distributed import LocalCluster
        {IMPORTS[imports]}
        if __name__ == "__main__":
            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
                code = cli.run(["batch", {str(dask_manifest)!r}, "--scheduler", c.scheduler_address,
                                "--summary", {str(shots / out / 'summary.json')!r}])
            sys.stdout.flush(); os._exit(code)
    """)
    script = shots / f"{out}_run.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((shots / out / "summary.json").read_text())
    assert data["ok"] == 4 and data["scheduler"].startswith("tcp://")
    for k in range(3):
        b = keys_of(shots / out / f"shot{k:03d}.blend")
        assert len(pool_keys[k]) > 10 and pool_keys[k] == b          # every key, to the last bit


def test_flamenco_job_type_compiles_one_task_per_job(shots, tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the Flamenco job compiler is JavaScript")
    path = manifest(shots, "farm")
    settings = tmp_path / "settings.json"
    r = run("batch", str(path), "--flamenco-settings", str(settings))
    assert r.returncode == 0, r.stderr
    r = subprocess.run([node, os.path.join(ROOT, "tests", "farm", "flamenco_standin.js"),
                        os.path.join(ROOT, "farm", "flamenco", "reldesc_batch.js"), str(settings)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["error"] is None and out["label"] == "RelDesc Batch"
    assert out["settings"] == ["manifest", "jobs_json"]
    tasks = {t["name"]: t for t in out["tasks"]}
    assert list(tasks) == ["bind", "shot000", "shot001", "shot002"]
    assert all(t["type"] == "blender" for t in tasks.values())
    bake = tasks["shot001"]["commands"][0]["parameters"]
    assert bake["blendfile"] == str(shots / "shots" / "shot001.blend")
    assert bake["args"][:3] == ["-c", "reldesc", "bake"] and "--binding" in bake["args"]
    assert tasks["shot001"]["dependencies"] == ["bind"] and tasks["bind"]["dependencies"] == []
    # A bad setting is refused by the compiler, not silently compiled.
    broken = json.loads(settings.read_text())
    broken["jobs_json"] = "[]"
    settings.write_text(json.dumps(broken))
    r = subprocess.run([node, os.path.join(ROOT, "tests", "farm", "flamenco_standin.js"),
                        os.path.join(ROOT, "farm", "flamenco", "reldesc_batch.js"), str(settings)],
                       capture_output=True, text=True, timeout=60)
    assert "no jobs" in json.loads(r.stdout)["error"]


def test_a_job_saves_over_its_input_only_when_it_says_so(shots, tmp_path):
    shutil.copy(shots / "shots" / "base.blend", tmp_path / "mine.blend")
    path = tmp_path / "inplace.toml"
    path.write_text(textwrap.dedent("""
        [[job]]
        name = "bind in place"
        operation = "bind"
        file = "mine.blend"
        armature = "Walker"
        environment = "Environment"
        overwrite = true
    """))
    before = os.path.getmtime(tmp_path / "mine.blend")
    r = run("batch", str(path), "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert os.path.getmtime(tmp_path / "mine.blend") > before
    # Without overwrite, the same job is refused before anything runs.
    path.write_text(path.read_text().replace("overwrite = true", ""))
    stamp = os.path.getmtime(tmp_path / "mine.blend")
    r = run("batch", str(path), "--workers", "1")
    assert r.returncode == 2 and "would save over its input file" in r.stderr
    assert os.path.getmtime(tmp_path / "mine.blend") == stamp


def test_a_manifest_runs_every_command_of_the_table(tmp_path):
    # Transfer, contacts and garments were commands of the operators only; now every job is a
    # command, and a manifest runs any of them, each waiting for the file it reads.
    code = textwrap.dedent(f"""
        import bpy, os
        from blender_reldesc import demo
        demo.build_transfer_scene(frames=20, target="stool", at=(1.6, 0.8))
        bpy.ops.wm.save_as_mainfile(filepath={str(tmp_path / 'sit.blend')!r})
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=ENV, capture_output=True, timeout=300)
    path = tmp_path / "all.toml"
    path.write_text(textwrap.dedent("""
        [[job]]
        name = "bind"
        operation = "bind"
        file = "sit.blend"
        armature = "Walker"
        environment = "Environment"
        output = "bound.blend"

        [[job]]
        name = "contacts"
        operation = "detect_contacts"       # the operator's spelling works too
        file = "bound.blend"
        armature = "Walker"
        output = "contacts.blend"
        report = "contacts.json"

        [[job]]
        name = "stool"
        operation = "transfer"
        file = "contacts.blend"
        armature = "Walker"
        source = "Chair"
        target_object = "Stool"
        output = "stool.blend"
        report = "stool.json"
    """).replace('source = "Chair"', 'from = "Chair"').replace('target_object = "Stool"', 'to = "Stool"'))
    summary = tmp_path / "summary.json"
    r = run("batch", str(path), "--workers", "1", "--summary", str(summary))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [j["status"] for j in json.loads(summary.read_text())["jobs"]] == ["ok", "ok", "ok"]
    assert json.loads((tmp_path / "contacts.json").read_text())["contacts"]
    transfer = json.loads((tmp_path / "stool.json").read_text())
    assert transfer["action"] == "Sit.adapted" and transfer["transfer"]["target"] == "Stool"
