"""Every channel survives a bake: scale keys, spinning Euler bones, custom properties, object
channels with handles and modifiers, and only the armature's own slot; checked by evaluating
the rig at whole and half frames."""

import numpy as np
import pytest

import bpy

from blender_reldesc import adapter, jobs

HALF_FRAMES = np.arange(1.0, 40.01, 0.5)


def _bone_path(name, prop):
    return f'pose.bones["{name}"].{prop}'


def _rich_action(arm):
    """Add to the walk what production actions have: squash and stretch on the spine, a
    head spinning two turns in ZXY Euler on sparse Bezier keys, an IK/FK switch on a pose
    bone and on the object, an object channel with free handles, a modifier and linear
    extrapolation, and a second slot for another object in the same action."""
    action = arm.animation_data.action
    slot = arm.animation_data.action_slot
    bag = action.layers[0].strips[0].channelbag(slot)
    spine = arm.pose.bones["Spine1"]
    for f, s in ((1, 1.0), (12, 1.25), (25, 0.85), (40, 1.0)):
        spine.scale = (1.0, s, 1.0 / s)
        spine.keyframe_insert("scale", frame=f)
    head = arm.pose.bones["Head"]
    for k in range(4):
        fc = bag.fcurves.find(_bone_path("Head", "rotation_quaternion"), index=k)
        bag.fcurves.remove(fc)
    head.rotation_mode = 'ZXY'
    for f, turn in ((1, 0.0), (15, 1.6 * np.pi), (40, 4.0 * np.pi)):
        head.rotation_euler = (0.2, turn, 0.1)
        head.keyframe_insert("rotation_euler", frame=f)
    hips = arm.pose.bones["Hips"]
    hips["ik_fk"] = 0.0
    for f, v in ((1, 0.0), (18, 1.0), (33, 0.3)):
        hips["ik_fk"] = v
        hips.keyframe_insert('["ik_fk"]', frame=f)
    arm["switch"] = 0.0
    for f, v in ((1, 0.0), (40, 1.0)):
        arm["switch"] = v
        arm.keyframe_insert('["switch"]', frame=f)
    arm.rotation_euler = (0, 0, 0)
    for f, v in ((1, 0.0), (40, 0.4)):
        arm.rotation_euler[2] = v
        arm.keyframe_insert("rotation_euler", index=2, frame=f)
    fc = bag.fcurves.find("rotation_euler", index=2)
    for kp in fc.keyframe_points:
        kp.handle_left_type = kp.handle_right_type = 'FREE'
    fc.keyframe_points[0].handle_right = (10.0, 0.5)
    fc.keyframe_points[1].handle_left = (30.0, -0.2)
    fc.modifiers.new('NOISE').strength = 0.05
    fc.extrapolation = 'LINEAR'
    other = action.slots.new(id_type='OBJECT', name="Prop")
    adapter._ensure_bag(action, other).fcurves.new("location", index=2).keyframe_points.insert(1, 5.0)
    return action


def _sample(scene, arm, frames):
    """World bone heads and tails (F,2B,3) and the custom properties, at (sub)frames."""
    out, props = [], []
    for f in frames:
        scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
        head, tail, _ = adapter.read_pose(arm)
        w = adapter.world_matrix(arm)
        out.append(adapter.to_world(w, np.concatenate([head, tail])))
        props.append((arm.pose.bones["Hips"]["ik_fk"], arm["switch"]))
    return np.stack(out), np.array(props)


@pytest.fixture
def rich(scene):
    scene, arm, env, *_ = scene
    source = _rich_action(arm)
    scene.frame_set(1)
    before = _sample(scene, arm, HALF_FRAMES)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    return scene, arm, source, before


def test_an_unedited_bake_plays_exactly_like_the_source_at_whole_and_half_frames(rich):
    scene, arm, source, before = rich
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    baked = arm.animation_data.action
    assert baked != source and baked.name == "Walk.adapted"
    after = _sample(scene, arm, HALF_FRAMES)
    assert np.abs(after[0] - before[0]).max() < 1e-5
    assert np.abs(after[1] - before[1]).max() < 1e-6
    assert [s.identifier for s in baked.slots] == [arm.animation_data.action_slot.identifier]
    fc = baked.layers[0].strips[0].channelbag(baked.slots[0]).fcurves.find("rotation_euler", index=2)
    assert fc.extrapolation == 'LINEAR' and len(fc.modifiers) == 1
    assert fc.keyframe_points[0].handle_right_type == 'FREE'
    assert len(source.slots) == 2                                      # the source is untouched


@pytest.mark.parametrize("interpolation", ["LINEAR", "BEZIER"])
def test_rewritten_channels_keep_scale_euler_turns_and_custom_properties(rich, monkeypatch, interpolation):
    """With every rotation and location channel rewritten (as after an edit), the unedited
    bake still equals the source on the keyed frames: Euler angles keep turning (no jump by
    pi), scale stays the source's, custom properties play at half frames too."""
    frames, tol = np.arange(1.0, 41.0), 1e-5
    scene, arm, source, before = rich
    from blender_reldesc.jobs import keys
    monkeypatch.setattr(keys, "UNCHANGED", -1.0)
    report = jobs.bake_job(scene, arm, options=jobs.BakeOptions(interpolation=interpolation))
    assert report["keys"]["curves_kept_from_source"] == 0
    idx = np.searchsorted(HALF_FRAMES, frames)
    after = _sample(scene, arm, frames)
    assert np.abs(after[0] - before[0][idx]).max() < tol
    assert np.abs(after[1] - before[1][idx]).max() < 1e-6
    baked = arm.animation_data.action
    bag = baked.layers[0].strips[0].channelbag(baked.slots[0])
    turn = [bag.fcurves.find(_bone_path("Head", "rotation_euler"), index=1).evaluate(float(f))
            for f in range(1, 41)]
    assert np.abs(np.diff(turn)).max() < 1.0 and turn[-1] == pytest.approx(4 * np.pi, abs=1e-4)


def test_an_edited_bake_keeps_the_channels_it_does_not_own(rich):
    scene, arm, source, before = rich
    from blender_reldesc import demo
    demo.lower_beam(bpy.data.objects["Beam"], 0.5)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    baked = arm.animation_data.action
    bag = baked.layers[0].strips[0].channelbag(baked.slots[0])
    scale = bag.fcurves.find(_bone_path("Spine1", "scale"), index=1)
    assert np.allclose([tuple(k.co) for k in scale.keyframe_points], [(1, 1), (12, 1.25), (25, 0.85), (40, 1)])
    after = _sample(scene, arm, HALF_FRAMES)
    assert np.abs(after[1] - before[1]).max() < 1e-6
    head = bag.fcurves.find(_bone_path("Head", "rotation_euler"), index=1)
    turn = [head.evaluate(float(f)) for f in range(1, 41)]
    assert np.abs(np.diff(turn)).max() < 1.0 and turn[-1] == pytest.approx(4 * np.pi, abs=0.5)


@pytest.mark.parametrize("handles", ["AUTO_CLAMPED", "VECTOR", "ALIGNED"])
def test_a_linear_curve_written_without_handles_is_the_curve_written_with_them(handles):
    # Writing a baked linear curve skips its handles and easing (the curve's update computes
    # auto-clamped handles, new keys ease AUTO): every key attribute reads as when all are
    # written, whatever the preferred handle type for new keys.
    prefs = bpy.context.preferences.edit
    before = prefs.keyframe_new_handle_type
    prefs.keyframe_new_handle_type = handles
    try:
        ob = bpy.data.objects.new("HandleProbe", None)
        action = bpy.data.actions.new("HandleProbe")
        slot, bag = adapter._channelbag(action, ob)
        values = np.cumsum(np.random.default_rng(3).normal(size=40))
        curve = adapter.Curve("location", 0, "Probe", np.arange(1.0, 41.0), values, "LINEAR")
        adapter.write_curves(action, slot, [curve], (1, 40))
        lean = adapter._keys_of(bag.fcurves.find("location", index=0))
        full = bag.fcurves.new("location", index=1)
        adapter._fill(full, adapter._curve_keys(curve))
        whole = adapter._keys_of(full)
        for k in whole:
            np.testing.assert_array_equal(lean[k], whole[k], err_msg=k)
    finally:
        prefs.keyframe_new_handle_type = before


@pytest.mark.parametrize("handles", ["AUTO_CLAMPED", "VECTOR"])
def test_an_action_written_without_handles_is_the_action_written_with_them(handles):
    # write_action (a walk's characters, a retarget) skips the handles and easing of its linear
    # keys as the bake does: every key attribute of every curve reads as when all are written.
    from blender_reldesc import demo
    prefs = bpy.context.preferences.edit
    before = prefs.keyframe_new_handle_type
    prefs.keyframe_new_handle_type = handles
    try:
        arm = demo.build_armature("HandleProbeRig")
        rig = adapter.rig.read_rig(arm)
        rng = np.random.default_rng(5)
        q = rng.normal(size=(30, 4))
        channels = [(0, "rotation_quaternion", q / np.linalg.norm(q, axis=1, keepdims=True)),
                    (0, "location", np.cumsum(rng.normal(size=(30, 3)), axis=0)),
                    (1, "rotation_euler", rng.normal(size=(30, 3)))]
        frames = np.arange(1.0, 31.0)
        action = adapter.write_action(arm, "HandleProbe", frames, rig, channels)
        bag = action.layers[0].strips[0].channelbag(action.slots[0])
        assert len(bag.fcurves) == 10
        full = bpy.data.actions.new("HandleProbeFull")
        _, full_bag = adapter._channelbag(full, arm)
        for fc in bag.fcurves:
            values = np.array([fc.evaluate(f) for f in frames])
            ref = full_bag.fcurves.new(fc.data_path, index=fc.array_index)
            adapter._fill(ref, adapter._curve_keys(adapter.Curve(fc.data_path, fc.array_index, "", frames, values)))
            lean, whole = adapter._keys_of(fc), adapter._keys_of(ref)
            for k in whole:
                np.testing.assert_array_equal(lean[k], whole[k], err_msg=f"{fc.data_path}[{fc.array_index}] {k}")
    finally:
        prefs.keyframe_new_handle_type = before
