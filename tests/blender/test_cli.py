"""The command line, run as a user would: a subprocess, exit codes and stderr.

Helper subprocesses end with ``os._exit``: the bpy 4.5 wheel can hang in its
teardown at interpreter exit.
"""

import json
import os
import subprocess
import sys

import pytest
from blender_reldesc.reports import undocumented

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "blender_reldesc", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


@pytest.fixture(scope="module")
def scene_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "walk.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_scene(frames=30, deck_cells=(30, 6)); "
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                   capture_output=True, timeout=300)
    return path


def test_building_the_command_line_does_not_import_bpy():
    # A batch's worker processes inherit the parent's sys.path: once the parent has imported
    # bpy, "import bpy" in a worker finds bpy's script modules before the wheel and fails (every
    # batch job failed when the demo's scene list was imported from the demo module).
    code = ("import sys; from blender_reldesc import cli; cli.build_parser(); "
            "print('bpy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"


def test_bind_then_bake_with_report(scene_file, tmp_path):
    bound = tmp_path / "bound.blend"
    r = run("bind", str(scene_file), "--armature", "Walker", "--environment", "Environment", "-o", str(bound))
    assert r.returncode == 0, r.stderr
    assert "bound 30 frames" in r.stdout
    baked, report = tmp_path / "baked.blend", tmp_path / "report.json"
    r = run("bake", str(bound), "--armature", "Walker", "-o", str(baked), "--report", str(report))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert undocumented("bake", data) == []  # every field in the generated reference
    for key in ("frames", "joints", "descriptors", "read_seconds", "adapt_seconds", "write_seconds",
                "bone_length_error_mean", "bone_length_error_max"):
        assert key in data
    assert data["frames"] == 30 and len(data["bone_length_error_per_frame"]) == 30
    assert data["solver"] == "descriptors"
    assert baked.exists()
    # The same binding baked with the interaction-mesh solver.
    r = run("bake", str(bound), "--armature", "Walker", "-o", str(baked), "--report", str(report),
            "--solver", "interaction_mesh")
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert data["solver"] == "interaction_mesh" and data["frames"] == 30 and data["bone_length_error_max"] < 0.01


@pytest.mark.parametrize("args, code, message", [
    (("bind", "{scene}", "--armature", "Nobody", "--environment", "Environment"), 1, "no object named 'Nobody'"),
    (("bind", "{scene}", "--armature", "Walker", "--environment", "Nope"), 1, "no collection named 'Nope'"),
    (("bake", "{scene}", "--armature", "Walker"), 1, "not bound"),
    (("bind", "/no/such/file.blend", "--armature", "Walker", "--environment", "Environment"), 1, "no such file"),
    (("bind", "{scene}", "--environment", "Environment"), 2, "--armature"),
    (("frobnicate",), 2, "invalid choice"),
    (("bake", "{scene}", "--armature", "Walker", "--solver", "fem"), 2, "choose from 'descriptors', 'interaction_mesh'"),
    (("bind", "{scene}", "--armature", "Walker", "--environment", "Environment", "-o", "/no/such/dir/x.blend"), 1,
     "does not exist"),
    (("detect-contacts", "{scene}", "--armature", "Walker"), 1, "not bound"),
    (("reposition-contacts", "{scene}", "--armature", "Walker"), 1, "not bound"),
    (("bind-garment", "{scene}", "--armature", "Walker", "--garment", "Beam"), 1, "not bound"),
    (("bind-garment", "{scene}", "--armature", "Walker"), 2, "--garment"),
    (("unbind", "{scene}", "--armature", "Walker"), 1, "not bound: nothing to unbind"),
    (("use-source", "{scene}", "--armature", "Walker"), 1, "not bound"),
])
def test_failures_exit_non_zero_with_one_line(scene_file, args, code, message):
    before = os.path.getmtime(scene_file)
    r = run(*[a.format(scene=scene_file) for a in args])
    assert r.returncode == code
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert os.path.getmtime(scene_file) == before            # a failed run never saves


def test_every_operator_job_has_its_command_named_as_the_operator(scene_file, tmp_path):
    # Contacts, garments, unbind and use-source, headless: each reads the file, changes what its
    # operator changes and saves.
    from blender_reldesc.commands import COMMANDS
    assert {c.operator for c in COMMANDS.values()} >= {
        "reldesc.bind", "reldesc.bake", "reldesc.walk", "reldesc.reach", "reldesc.transfer", "reldesc.bind_garment",
        "reldesc.detect_contacts", "reldesc.reposition_contacts", "reldesc.unbind", "reldesc.use_source"}
    for c in COMMANDS.values():
        assert c.name == c.operator.split(".")[1].replace("_", "-"), c.name
    bound = tmp_path / "bound.blend"
    assert run("bind", str(scene_file), "--armature", "Walker", "--environment", "Environment",
               "-o", str(bound)).returncode == 0
    report = tmp_path / "contacts.json"
    r = run("detect-contacts", str(bound), "--armature", "Walker", "--report", str(report))
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert undocumented("detect-contacts", data) == []  # every field in the generated reference
    assert data["contacts"] and sum(data["contact_counts"].values()) == len(data["contacts"])
    assert f"{len(data['contacts'])} contact phases of 'Walker'" in r.stdout
    r = run("reposition-contacts", str(bound), "--armature", "Walker", "--report", str(report))
    assert r.returncode == 0 and json.loads(report.read_text())["repositioned"] is True, r.stderr
    code = ("import bpy, json, sys; bpy.ops.wm.open_mainfile(filepath=sys.argv[1]); "
            "from blender_reldesc.adapter import storage; ob = bpy.data.objects['Walker']; "
            "print(json.dumps([len(storage.stored_contacts(ob)), storage.stored_meta(ob) is not None, "
            "ob.animation_data.action.name])); import os; sys.stdout.flush(); os._exit(0)")

    def state(path):
        r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
        return json.loads(r.stdout.strip().splitlines()[-1])

    assert state(bound) == [len(data["contacts"]), True, "Walk"]          # saved in place, the rows stored
    assert run("bake", str(bound), "--armature", "Walker").returncode == 0
    assert state(bound)[2] == "Walk.adapted"
    r = run("use-source", str(bound), "--armature", "Walker")
    assert r.returncode == 0 and "plays 'Walk' again" in r.stdout, r.stderr
    assert state(bound)[2] == "Walk"
    r = run("unbind", str(bound), "--armature", "Walker")
    assert r.returncode == 0 and state(bound)[1] is False, r.stderr


def test_blender_command_entry_point(scene_file, tmp_path):
    """``blender -b IN.blend -c reldesc ...`` calls ``cli.execute`` on the loaded file."""
    out = tmp_path / "out.blend"
    code = (f"import bpy, sys; bpy.ops.wm.open_mainfile(filepath={str(scene_file)!r}); "
            "from blender_reldesc import cli; "
            f"code = cli.execute(['bind', '--armature', 'Walker', '--environment', 'Environment', '-o', {str(out)!r}]); "
            "import os; sys.stdout.flush(); sys.stderr.flush(); os._exit(code)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.exists()


def test_demo_writes_the_blend_the_report_and_the_picture(tmp_path):
    out = tmp_path / "demo"
    r = run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    # Bend limits now compete with bone lengths in the raw solve (issue 8 target: <= 0.5 %);
    # the final forward pass makes the baked lengths exact.
    assert report["frames"] == 150 and report["bone_length_error_mean"] < 0.005
    assert report["contact_counts"]["unresolved"] == 0
    png = (out / "before_after.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert (out / "demo.blend").stat().st_size > 100_000


def _demo(tmp_path, scene):
    """Run ``demo --scene scene`` into a fresh folder: (the folder, its report)."""
    out = tmp_path / scene
    r = run("demo", "--scene", scene, "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out, json.loads((out / "report.json").read_text())


def _is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_of_the_stepping_stones_repositions_the_foot_on_the_moved_stone(tmp_path):
    out, report = _demo(tmp_path, "stones")
    assert report["scene"] == "stones" and report["moved_stone"].startswith("Stone.")
    moved = [c for c in report["contacts"] if c["status"] == "repositioned" and c["effector"] == "LeftFoot"]
    assert len(moved) == 1 and moved[0]["new_surface"] != report["moved_stone"]
    assert report["contact_counts"]["unresolved"] == 0
    assert _is_png(out / "before_after.png")


def test_demo_of_the_ceiling_replans_the_root_under_it(tmp_path):
    out, report = _demo(tmp_path, "ceiling")
    assert report["scene"] == "ceiling"
    assert report["contact_counts"]["unresolved"] == 0
    assert any(c["reason"] == "root replanned" for c in report["contacts"])
    # The report lists where the root was replanned, in scene frames, nothing left through the slab.
    windows = report["root_windows"]
    assert windows and all(w["status"] == "replanned" and w["frames_through"] == [] for w in windows)
    assert all(w["start"] <= w["end"] for w in windows)
    assert _is_png(out / "before_after.png")


def test_demo_of_the_post_steps_round_it_feet_and_all(tmp_path):
    out, report = _demo(tmp_path, "post")
    assert report["scene"] == "post" and report["contact_counts"]["unresolved"] == 0
    aside = [c for c in report["contacts"] if c["reason"] == "stepped aside"]
    assert aside and all(c["status"] == "repositioned" for c in aside)
    windows = report["root_windows"]
    assert windows and all(w["status"] == "replanned" and w["frames_through"] == [] for w in windows)
    assert _is_png(out / "before_after.png")


def test_demo_of_the_chair_puts_the_hand_on_the_seat_and_follows_the_seat(tmp_path):
    out, report = _demo(tmp_path, "chair")
    assert report["scene"] == "chair" and report["contact_counts"]["unresolved"] == 0
    by = {c["effector"]: c for c in report["contacts"]}
    assert by["LeftHand"]["status"] == "repositioned" and by["LeftHand"]["new_surface"] == "Seat"
    # The pelvis follows the lowered seat by its descriptors and the clearance they keep from it
    # (``descriptors.clearance``): a valid contact on the seat, nothing left to re-position.
    assert by["Hips"]["status"] == "valid" and by["Hips"]["surface"] == "Seat"
    assert _is_png(out / "before_after.png")


def test_demo_of_a_transfer_sits_on_the_stool(tmp_path):
    out, report = _demo(tmp_path, "transfer")
    assert report["scene"] == "transfer" and report["action"] == "Sit.adapted"
    assert report["transfer"]["source"] == "Chair" and report["transfer"]["target"] == "Stool"
    assert report["transfer"]["segments"] == ["seat", "legs"] and "Hips" in report["transfer"]["matched"]
    assert _is_png(out / "before_after.png")


def test_demo_of_a_crowd_renders_walkers_over_hills(tmp_path):
    out, report = _demo(tmp_path, "crowd")
    assert report["scene"] == "crowd" and len(report["characters"]) == 9
    assert report["warnings"] == [] and report["stance_fraction"] > 0.5
    assert _is_png(out / "crowd.png")
    assert (out / "demo.blend").exists()


def test_demo_of_a_pair_bakes_both_and_the_hands_meet(tmp_path):
    out, report = _demo(tmp_path, "pair")
    assert report["scene"] == "pair" and report["action"] == "HoldLead.adapted"
    assert [p["action"] for p in report["partners"]] == ["HoldPartner.adapted"]
    gaps = report["hands_apart_at_render_frame"]
    assert gaps["source"] > 0.15 and gaps["adapted"] < 0.06          # 4 cm apart in the source
    assert _is_png(out / "before_after.png")


def test_demo_of_a_garment_carries_the_skirt(tmp_path):
    out, report = _demo(tmp_path, "garment")
    assert report["scene"] == "garment" and report["garment"]["garments"] == ["Skirt"]
    assert report["skirt_rise"] > 0.05 and report["edge_change_max"] <= 0.05
    assert (out / "Skirt.reldesc.pc2").exists()
    assert _is_png(out / "before_after.png")
