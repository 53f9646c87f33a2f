"""Paths that could lose an animator's data or mislead them: re-bind, re-bake with other users,
append into another file, rename, worker-thread safety, painted influence on modified meshes,
and bone lengths edited after bind."""

import numpy as np
import pytest

import bpy

from blender_reldesc import adapter, demo, jobs
from blender_reldesc.operators import _WorkerState, compute_in_worker


def _bind_bake(arm_name="Walker", env="Environment"):
    assert bpy.ops.reldesc.bind(armature=arm_name, environment=env) == {'FINISHED'}
    assert bpy.ops.reldesc.bake(armature=arm_name) == {'FINISHED'}


def test_binding_twice_then_bake_works_and_is_hidden_from_custom_properties(scene):
    scene, arm, *_ = scene
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    first = jobs.Bound(arm).binding
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    again = jobs.Bound(arm).binding
    np.testing.assert_array_equal(first.triangles, again.triangles)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    # Stored under "_" names (Blender's Custom Properties panel does not list them) on the
    # armature data, where Blender's Bake Action does not read custom properties.
    assert not any("reldesc" in k and "contacts" not in k for k in arm.keys())
    assert all(k.startswith("_") for k in arm.data.keys() if "reldesc" in k)


def test_blenders_bake_action_leaves_the_binding_alone(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    stored = adapter.load_stored(arm)
    bpy.context.view_layer.objects.active = arm
    arm.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    bpy.ops.pose.select_all(action='SELECT')
    bpy.ops.nla.bake(frame_start=1, frame_end=5, visual_keying=True, bake_types={'POSE', 'OBJECT'},
                     use_current_action=False)
    bpy.ops.object.mode_set(mode='OBJECT')
    baked = arm.animation_data.action
    from blender_reldesc.adapter import _fcurves
    assert not any("reldesc" in fc.data_path for fc in _fcurves(baked))
    assert adapter.load_stored(arm)[:2] == stored[:2]


def _second_armature(scene, arm, action):
    other = bpy.data.objects.new("Other", arm.data)
    scene.collection.objects.link(other)
    other.animation_data_create()
    other.animation_data.action = action


def _nla_strip(scene, arm, action):
    track = arm.animation_data.nla_tracks.new()
    track.strips.new("kept", 1, action)


def _fake_user(scene, arm, action):
    action.use_fake_user = True


@pytest.mark.parametrize("keep", [_second_armature, _nla_strip, _fake_user])
def test_rebake_keeps_an_adapted_action_used_elsewhere(scene, keep):
    scene, arm, *_ = scene
    _bind_bake()
    first = bpy.data.actions["Walk.adapted"]
    keys = len(first.layers[0].strips[0].channelbags[0].fcurves) if hasattr(first, "layers") else None
    keep(scene, arm, first)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    assert bpy.data.actions.get("Walk.adapted") == first                 # still there, untouched
    assert arm.animation_data.action.name == "Walk.adapted.001"
    if keys is not None:
        assert len(first.layers[0].strips[0].channelbags[0].fcurves) == keys


def test_rebake_replaces_its_own_previous_result(scene):
    scene, arm, *_ = scene
    _bind_bake()
    names = sorted(a.name for a in bpy.data.actions)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    assert sorted(a.name for a in bpy.data.actions) == names


def test_append_into_another_file_and_rename_then_bake(scene, tmp_path):
    scene, arm, env, bridge, beam = scene
    _bind_bake()
    path = str(tmp_path / "bound.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    with bpy.data.libraries.load(path, link=False) as (src, dst):
        dst.objects = [n for n in src.objects if n in ("Walker", "Bridge", "Beam")]
        dst.collections = ["Environment"]
    scene = bpy.context.scene
    for ob in dst.objects:
        if ob.name not in [o.name for c in dst.collections for o in c.objects]:
            scene.collection.objects.link(ob)
    for c in dst.collections:
        scene.collection.children.link(c)
    walker = bpy.data.objects["Walker"]
    assert adapter.stored_meta(walker) is not None
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    bpy.data.collections["Environment"].name = "Set"
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}


class _Poison:
    def __getattr__(self, name):
        raise AssertionError(f"bpy.{name} touched from the compute phase")


def test_the_compute_phase_touches_no_bpy(scene, monkeypatch):
    scene, arm, env, bridge, beam = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    demo.lower_beam(beam)
    state = _WorkerState()
    job = jobs.BakeJob(scene, arm, warn=state.warnings.append)
    job.read()
    _poison_bpy(monkeypatch, job)
    compute_in_worker(job, state)
    assert state.error is None and state.fraction > 0.9
    monkeypatch.undo()
    assert job.write()["frames"] == 40


def _poison_bpy(monkeypatch, job=None):
    """Every Blender-side module's bpy fails when touched (the compute runs on a worker thread),
    and so does every Blender datablock the job (its stages, its partners' jobs, what they hold)
    keeps from its read: an armature's ``name`` read on the worker thread is a bpy access too."""
    import sys
    for name, module in list(sys.modules.items()):
        if name.startswith("blender_reldesc.") and getattr(module, "bpy", None) is bpy:
            monkeypatch.setattr(module, "bpy", _Poison())
    seen = set()

    def visit(obj):
        if id(obj) in seen or not type(obj).__module__.startswith("blender_reldesc"):
            return
        seen.add(id(obj))
        for key, value in list(vars(obj).items()):
            if isinstance(value, bpy.types.bpy_struct):
                monkeypatch.setattr(obj, key, _Poison())
            elif isinstance(value, (list, tuple)):
                if any(isinstance(v, bpy.types.bpy_struct) for v in value):
                    monkeypatch.setattr(obj, key, type(value)(_Poison() if isinstance(v, bpy.types.bpy_struct)
                                                              else v for v in value))
                for v in value:
                    visit(v)
            elif hasattr(value, "__dict__"):
                visit(value)

    if job is not None:
        visit(job)


def _pair_bake():
    scene, lead, partner, env = demo.build_pair_scene(frames=20)
    assert bpy.ops.reldesc.bind(armature="Lead", environment="Environment", partners="Partner") == {'FINISHED'}
    demo.grow_armature(partner, 1.2)
    return jobs.BakeJob(scene, lead), lambda report: {p["armature"] for p in report["partners"]} == {"Partner"}


def _walk():
    from blender_reldesc.jobs import locomotion
    scene, arm, env, curve = demo.build_crowd_scene(frames=40, size=(14.0, 10.0), cells=(70, 50))
    t = np.linspace(0.0, 1.0, 30)
    path = demo.curve_object("Short", np.c_[5.0 * t, np.sin(np.pi * t), np.zeros_like(t)], scene.collection)
    return locomotion.WalkJob(scene, arm, env.name, path.name, crowd=2, spacing=1.0), \
        lambda report: len(report["characters"]) == 2


def _reach():
    from blender_reldesc.jobs import reaching
    scene, arm, env, bridge, beam = demo.build_scene(frames=40, deck_cells=(40, 8))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    bound = jobs.Bound(arm)
    target = bpy.data.objects.new("Cup", None)
    target.location = bound.binding.motion[20, bound.binding.skeleton.index("RightHand")] + np.array([0.2, -0.1, 0.2])
    scene.collection.objects.link(target)
    bpy.context.view_layer.update()
    return reaching.ReachJob(scene, arm, "RightHand", "Cup", int(bound.frames[20]), window=8), \
        lambda report: report["reach"]["hand_error"] < 0.01


def _transfer():
    from blender_reldesc.jobs import transfer
    scene, arm, env = demo.build_transfer_scene(frames=20, target="stool", at=(1.6, 0.8))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    return transfer.TransferJob(scene, arm, "Chair", "Stool"), lambda report: report["action"] == "Sit.adapted"


def _garment_bake():
    scene, arm, skirt, env = demo.build_garment_scene(frames=12)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    demo.lengthen_legs(arm, 1.15)
    return jobs.BakeJob(scene, arm), lambda report: [g["garment"] for g in report["garments"]] == ["Skirt"]


def _plain_bake():
    scene, arm, env, bridge, beam = demo.build_scene(frames=30, deck_cells=(30, 6))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    demo.lower_beam(beam)
    return jobs.BakeJob(scene, arm), lambda report: report["action"] == "Walk.adapted"


def _contacts():
    scene, arm, env, stones = demo.build_stones_scene(frames=60)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    return jobs.ContactsJob(scene, arm), lambda report: len(report["contacts"]) > 0


@pytest.mark.parametrize("make", [_plain_bake, _pair_bake, _garment_bake, _walk, _reach, _transfer, _contacts],
                         ids=["bake", "partners", "garments", "walk", "reach", "transfer", "contacts"])
def test_no_compute_phase_touches_bpy(make, monkeypatch):
    # Every job kind the operators run modally: read on the main thread, compute on a worker
    # thread with no Blender data, write on the main thread.
    job, written = make()
    state = _WorkerState()
    job.warn = state.warnings.append
    job.read()
    _poison_bpy(monkeypatch, job)
    compute_in_worker(job, state)
    assert state.error is None, state.error
    monkeypatch.undo()
    assert written(job.write())


def test_influence_painting_on_a_mesh_with_a_subdivision_modifier(scene):
    scene, arm, env, bridge, beam = scene
    bridge.modifiers.new("Subdivision", 'SUBSURF').levels = 1
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    vg = bridge.vertex_groups.new(name="reldesc_influence")
    vg.add(list(range(len(bridge.data.vertices))), 0.5, 'REPLACE')
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    bound = jobs.Bound(arm)
    influence = jobs.read_influence(scene, bound, "reldesc_influence")
    assert influence.shape == (bound.binding.mesh.vertex_count,)


@pytest.mark.parametrize("factor", [1.15, 0.85])
def test_shins_edited_after_bind_stand_taller_or_lower(scene, factor):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bound = jobs.Bound(arm)
    sk, motion = bound.binding.skeleton, bound.binding.motion
    # Lengthen the shins in Edit Mode the way an animator would: move the foot bones down.
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    added = {}
    for side in ("Left", "Right"):
        leg, foot = arm.data.edit_bones[side + "Leg"], arm.data.edit_bones[side + "Foot"]
        shin = foot.head - leg.head
        delta = shin * (factor - 1.0)
        added[side] = delta.length * np.sign(factor - 1.0)
        for b in [foot] + list(foot.children_recursive):
            b.head += delta
            b.tail += delta
    bpy.ops.object.mode_set(mode='OBJECT')
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    report = jobs.BakeJob(scene, arm).run()
    assert {"LeftFoot", "RightFoot"} <= set(report["changed_bones"])
    bound = jobs.Bound(arm)
    from blender_helpers import heads_over_frames
    heads = heads_over_frames(scene, arm, bound.frames)
    hips = bound.rig.names.index("Hips")
    rise = np.median(heads[:, hips, 2] - motion[:, sk.index("Hips"), 2])
    assert np.sign(rise) == np.sign(factor - 1.0) and abs(rise) >= 0.7 * abs(added["Left"])
    for side in ("Left", "Right"):
        b = bound.rig.names.index(side + "Foot")
        speed = np.linalg.norm(np.gradient(motion[:, sk.index(side + "Foot")], axis=0), axis=-1) * 24.0
        planted = speed < 0.5
        assert np.abs(heads[planted, b, 2] - motion[planted, sk.index(side + "Foot"), 2]).max() <= 0.02


def test_a_binding_stored_by_0_1_0_still_bakes_and_rebind_replaces_it(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    data, pose, meta = adapter.load_stored(arm)
    adapter.clear_binding(arm)
    meta.pop("binding_size"), meta.pop("pose_size")
    legacy_binding, legacy_pose, legacy_meta = adapter.LEGACY_KEYS
    arm[legacy_binding], arm[legacy_pose], arm[legacy_meta] = data, pose, dict(meta, version=1)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert not any(k in arm for k in adapter.LEGACY_KEYS) and adapter.stored_meta(arm)["version"] == 2
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
