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
    demo.grow_armature(partner, 1.2)
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


def _skin(arm, radius):
    """A mesh deformed by ``arm``: a ring of 8 vertices ``radius`` from each bone's axis at
    its middle (rest pose), weighted fully to that bone."""
    w = np.array(arm.matrix_world)
    verts, groups = [], []
    for bone in arm.data.bones:
        head, tail = np.array(bone.head_local), np.array(bone.tail_local)
        axis = (tail - head) / np.linalg.norm(tail - head)
        u = np.cross(axis, [0.0, 0.0, 1.0] if abs(axis[2]) < 0.9 else [1.0, 0.0, 0.0])
        u /= np.linalg.norm(u)
        v = np.cross(axis, u)
        for a in np.linspace(0.0, 2.0 * np.pi, 8, endpoint=False):
            p = 0.5 * (head + tail) + radius * (np.cos(a) * u + np.sin(a) * v)
            verts.append(w[:3, :3] @ p + w[:3, 3])
            groups.append(bone.name)
    me = bpy.data.meshes.new(arm.name + "Skin")
    me.from_pydata([tuple(p) for p in verts], [], [])
    ob = bpy.data.objects.new(arm.name + "Skin", me)
    bpy.context.scene.collection.objects.link(ob)
    for name in dict.fromkeys(groups):
        ob.vertex_groups.new(name=name).add([i for i, g in enumerate(groups) if g == name], 1.0, 'REPLACE')
    ob.modifiers.new("Armature", 'ARMATURE').object = arm
    return ob


def test_capsules_come_from_the_skinned_mesh_or_a_bone_property():
    # The issue: a partner's capsule radius is the mean distance of the bone's weighted
    # vertices when it has a skinned mesh, else a share of the bone's length, editable per bone.
    from blender_reldesc import adapter
    from blender_reldesc.core.skeleton.armature import joint_layout
    scene, lead, partner, env = demo.build_pair_scene(frames=20)
    _skin(partner, 0.07)
    partner.pose.bones["Head"][adapter.skin.RADIUS_PROPERTY] = 0.11
    rig = adapter.read_rig(partner)
    skeleton, _, _ = joint_layout(rig.names, rig.parents)
    radii = adapter.skin.measure_radii(partner, skeleton)
    names, parents = skeleton.names, skeleton.parents
    by_bone = {names[parents[j]]: radii[j] for j in range(len(names)) if parents[j] >= 0}
    assert by_bone["Head"] == pytest.approx(0.11)
    measured = [r for n, r in by_bone.items() if n != "Head" and np.isfinite(r)]
    assert len(measured) >= 10 and np.allclose(measured, 0.07, atol=0.012)
    # Without a mesh: unknown (NaN), the core's share of the bone length applies.
    lead_rig = adapter.read_rig(lead)
    assert np.isnan(adapter.skin.measure_radii(lead, joint_layout(lead_rig.names, lead_rig.parents)[0])).all()
    # Bound together: the partner's measured radii are kept with its binding, and the bake runs.
    assert bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners="Partner") == {'FINISHED'}
    stored = adapter.stored_meta(partner)["capsule_radii"]
    assert len(stored) == len(names) and any(r == pytest.approx(0.11) for r in stored)
    assert all(r == -1.0 for r in adapter.stored_meta(lead)["capsule_radii"])     # unknown
    assert bpy.ops.reldesc.bake(armature="Lead") == {'FINISHED'}
    assert partner.animation_data.action.name == "HoldPartner.adapted"


def test_a_pair_baked_with_contacts_repositioned_reports_both_characters_contacts():
    # Re-position Contacts on: the group is still baked together (no more "not re-positioned"
    # warning); each character's contacts are checked with its partner's targets, and the hands
    # still meet.
    from blender_reldesc import jobs
    scene, lead, partner, env = demo.build_pair_scene(frames=30)
    frames = [1, 15, 30]
    before = _hands(scene, lead, partner, frames)
    assert bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners="Partner") == {'FINISHED'}
    demo.grow_armature(partner, 1.2)
    scene.frame_set(1)
    warnings = []
    report = jobs.bake_job(scene, lead, reposition_contacts=True, warn=warnings.append)
    assert not any("re-position" in w for w in warnings), warnings
    assert report["contacts"] and report["contact_counts"]["unresolved"] == 0
    assert [p["action"] for p in report["partners"]] == ["HoldPartner.adapted"]
    assert _hands(scene, lead, partner, frames).max() <= before.max() + 0.02


def test_the_live_preview_of_a_pair_poses_both_and_gives_both_back():
    # Live Preview on a character bound with a partner poses both at every frame: unedited,
    # both sources; the partner grown 20 %, the hands still meet (as the bake has them); off,
    # both play their actions again.
    from blender_reldesc.viewport import live
    scene, lead, partner, env = demo.build_pair_scene(frames=30)
    frames = list(range(1, 31))
    source = [heads_over_frames(scene, ob, frames) for ob in (lead, partner)]
    gap = _hands(scene, lead, partner, frames)
    assert bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners="Partner") == {'FINISHED'}
    scene.frame_set(1)
    assert bpy.ops.reldesc.live(armature="Lead") == {'FINISHED'}
    posed = [heads_over_frames(scene, ob, frames) for ob in (lead, partner)]     # played in order
    for p, s in zip(posed, source):
        assert np.abs(p - s).max() < 1e-4
    assert adapter.rig.pose_held(lead) and adapter.rig.pose_held(partner) and live.last_error == ""
    assert bpy.ops.reldesc.live(armature="Lead") == {'FINISHED'}                 # off
    demo.grow_armature(partner, 1.2)
    grown = heads_over_frames(scene, partner, frames)
    assert _hands(scene, lead, partner, frames).max() > 0.1                     # apart without the preview
    assert bpy.ops.reldesc.live(armature="Lead") == {'FINISHED'}
    assert _hands(scene, lead, partner, frames).max() <= gap.max() + 0.02
    posed = [heads_over_frames(scene, ob, frames) for ob in (lead, partner)]
    assert live.last_error == "" and live.last_seconds < 0.5
    assert bpy.ops.reldesc.live(armature="Lead") == {'FINISHED'}                 # off: both given back
    assert not adapter.rig.pose_held(lead) and not adapter.rig.pose_held(partner)
    assert np.abs(heads_over_frames(scene, partner, frames) - grown).max() < 1e-6
    assert np.abs(heads_over_frames(scene, lead, frames) - source[0]).max() < 1e-6
    # A partner removed while the preview is on: the message says so, the lead plays its action.
    assert bpy.ops.reldesc.live(armature="Lead") == {'FINISHED'}
    scene.frame_set(5)
    assert adapter.rig.pose_held(partner)
    kept = partner.data
    bpy.data.objects.remove(partner)
    scene.frame_set(6)
    assert "partner 'Partner' of 'Lead' is gone" in live.last_error and not adapter.rig.pose_held(lead)
    assert bpy.ops.reldesc.live(armature="Lead") == {'FINISHED'}                 # off
    partner = bpy.data.objects.new("Partner", kept)
    scene.collection.objects.link(partner)
    partner.animation_data_create().action = bpy.data.actions["HoldPartner"]
    # The bake of the same edit: the preview within a few centimetres of it on every frame (3.5:
    # the preview runs two rounds a frame, the bake five over the whole clip).
    assert bpy.ops.reldesc.bake(armature="Lead") == {'FINISHED'}
    baked = [heads_over_frames(scene, ob, frames) for ob in (lead, partner)]
    worst = max(float(np.linalg.norm(p - b, axis=-1).max()) for p, b in zip(posed, baked))
    print(f"pair live preview from the bake: {100 * worst:.2f} cm")
    assert worst < 0.05


def test_a_hug_baked_with_the_interaction_mesh_solves_both_in_one_mesh():
    # The scene's solver set to Interaction Mesh: baking a character bound with a partner
    # adapts both in one interaction mesh a frame (the hug, the partner grown 20 %): both
    # adapted actions written, the sources untouched, every hand within 3 cm of its source
    # distance to the back it holds; asking for re-positioned contacts says which solver can.
    scene, lead, partner, env = demo.build_pair_scene(frames=30, hold="hug")
    frames = [1, 15, 30]
    names = [b.name for b in lead.data.bones]
    holds = [("RightHand", "Spine1"), ("LeftHand", "Spine1")]

    def distances():
        a, b = heads_over_frames(scene, lead, frames), heads_over_frames(scene, partner, frames)
        return np.array([np.linalg.norm(a[:, names.index(h)] - b[:, names.index(j)], axis=-1) for h, j in holds])
    before = distances()
    assert bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners="Partner") == {'FINISHED'}
    sources = {n: fcurve_snapshot(bpy.data.actions[n]) for n in ("HoldLead", "HoldPartner")}
    demo.grow_armature(partner, 1.2)
    scene.reldesc.solver = 'INTERACTION_MESH'
    scene.reldesc.reposition_contacts = True
    with pytest.raises(RuntimeError, match="switch the solver to Descriptors"):
        bpy.ops.reldesc.bake(armature="Lead")
    assert lead.animation_data.action.name == "HoldLead"
    scene.reldesc.reposition_contacts = False
    assert bpy.ops.reldesc.bake(armature="Lead") == {'FINISHED'}
    assert lead.animation_data.action.name == "HoldLead.adapted"
    assert partner.animation_data.action.name == "HoldPartner.adapted"
    for name, snap in sources.items():
        now = fcurve_snapshot(bpy.data.actions[name])
        assert all(np.array_equal(snap[k], now[k]) for k in snap)
    assert np.abs(distances() - before).max() < 0.03
