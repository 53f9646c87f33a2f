"""Partners through the real operators and the command line (reldesc.bind partners, bake)."""

import os
import subprocess
import sys

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import adapter, demo  # noqa: E402
from blender_helpers import fcurve_snapshot, heads_over_frames  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _grow(arm, factor):
    """Every bone of ``arm`` ``factor`` times as long (its rest pose scaled about the origin)."""
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    # All positions first: a connected child's head is its parent's tail (moved with it).
    ends = [(eb, eb.head * factor, eb.tail * factor) for eb in arm.data.edit_bones]
    for eb, head, tail in ends:
        eb.head, eb.tail = head, tail
    bpy.ops.object.mode_set(mode='OBJECT')


def _hands(scene, lead, partner, frames):
    names = [b.name for b in lead.data.bones]
    a = heads_over_frames(scene, lead, frames)[:, names.index("RightHand")]
    b = heads_over_frames(scene, partner, frames)[:, names.index("LeftHand")]
    return np.linalg.norm(a - b, axis=-1)


def test_a_pair_bound_together_is_baked_together():
    # Lead binds with Partner; Partner grows 20 %; baking Lead writes both adapted actions,
    # the hands still meet (within 2 cm of the source's gap), the sources are untouched.
    scene, lead, partner, env = demo.build_pair_scene(frames=40)
    frames = [1, 20, 40]
    before = _hands(scene, lead, partner, frames)
    assert bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners="Partner") == {'FINISHED'}
    assert adapter.stored_meta(lead)["partners"] == ["Partner"]
    assert adapter.stored_meta(partner)["partners"] == ["Lead"]
    sources = {n: fcurve_snapshot(bpy.data.actions[n]) for n in ("HoldLead", "HoldPartner")}
    rest = np.array([b.length for b in partner.data.bones])
    _grow(partner, 1.2)
    np.testing.assert_allclose([b.length for b in partner.data.bones], 1.2 * rest, rtol=1e-5)
    scene.frame_set(1)
    assert _hands(scene, lead, partner, frames).max() > 0.1            # grown, the hands came apart
    assert bpy.ops.reldesc.bake(armature="Lead") == {'FINISHED'}
    assert lead.animation_data.action.name == "HoldLead.adapted"
    assert partner.animation_data.action.name == "HoldPartner.adapted"
    for name, snap in sources.items():
        now = fcurve_snapshot(bpy.data.actions[name])
        assert snap.keys() == now.keys() and all(np.array_equal(snap[k], now[k]) for k in snap)
    assert _hands(scene, lead, partner, frames).max() <= before.max() + 0.02
    # Bake again, from the partner this time: the same two actions are rewritten (no '.001'
    # copies), the sources still untouched.
    assert bpy.ops.reldesc.bake(armature="Partner") == {'FINISHED'}
    assert lead.animation_data.action.name == "HoldLead.adapted"
    assert partner.animation_data.action.name == "HoldPartner.adapted"
    assert not [a.name for a in bpy.data.actions if a.name.endswith(".001")]
    for name, snap in sources.items():
        now = fcurve_snapshot(bpy.data.actions[name])
        assert all(np.array_equal(snap[k], now[k]) for k in snap)


def test_bad_partners_say_why_and_bind_nothing():
    scene, lead, partner, env = demo.build_pair_scene(frames=20)
    demo.build_armature("Still")                         # an armature with no action
    cases = [("Floor", "not an armature"), ("Lead", "the character itself"), ("Nobody", "no object named"),
             ("Still", "has no action")]
    for name, message in cases:
        with pytest.raises(RuntimeError, match=message):
            bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners=name)
        assert adapter.stored_meta(lead) is None and adapter.stored_meta(partner) is None


def test_command_line_bind_with_partners(tmp_path):
    path = tmp_path / "pair.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_pair_scene(frames=20); "
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, capture_output=True, timeout=300)
    run = [sys.executable, "-m", "blender_reldesc", "bind", str(path), "--armature", "Lead", "--environment",
           "Environment", "--partners", "Partner"]
    done = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "with 'Partner'" in done.stdout
    bad = subprocess.run(run[:-1] + ["Floor"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and "not an armature" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    done = subprocess.run([sys.executable, "-m", "blender_reldesc", "bake", str(path), "--armature", "Lead"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "partner 'Partner' into 'HoldPartner.adapted'" in done.stdout
