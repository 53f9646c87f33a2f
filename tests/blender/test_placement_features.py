"""Every feature follows the placement rule (issue 34): a character moved together with its set
after binding (a parent Empty moved and turned) adapts as if nothing had moved, in the live
preview, reaching, transfer, garments, walking and contacts; and a parent is nothing but its
world matrix."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import adapter, demo, jobs  # noqa: E402
from blender_reldesc.viewport import live  # noqa: E402
from blender_helpers import evaluated_vertices, fcurve_snapshot, heads_over_frames  # noqa: E402
from test_placement import MOVE, _moved, _parent, _root, _same_keys  # noqa: E402


def _basis(arm):
    return np.array([np.array(pb.matrix_basis) for pb in arm.pose.bones])


def _in_a_set(scene, arm, env, *more):
    root = _root()
    _parent([arm] + list(env.all_objects) + list(more), root)
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    return root


def test_the_live_preview_of_a_rig_moved_with_its_set_poses_the_same(scene):
    scene, arm, env, bridge, beam = scene
    root = _in_a_set(scene, arm, env)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    beam.location.z -= 0.2                                   # an edit, so the preview has work to do
    live.clear()
    scene.frame_set(20)
    live.pose_frame(scene, bpy.context.evaluated_depsgraph_get(), arm)
    before = _basis(arm)
    root.matrix_world = MOVE
    for pb in arm.pose.bones:                                # a preview that did nothing would show this
        pb.matrix_basis = np.eye(4).tolist()
    bpy.context.view_layer.update()
    live.pose_frame(scene, bpy.context.evaluated_depsgraph_get(), arm)   # same session: it sees the move
    assert np.abs(before - np.eye(4)).max() > 1e-3
    np.testing.assert_allclose(_basis(arm), before, atol=1e-6)
    live.clear()


def test_a_reach_for_a_target_in_the_moved_set_keys_the_same(scene):
    scene, arm, env, bridge, beam = scene
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    bound = jobs.Bound(arm)
    hand = bound.binding.motion[19, bound.binding.skeleton.index("RightHand")] + np.array([0.2, -0.1, 0.25])
    target = bpy.data.objects.new("Cup", None)
    target.location = hand
    scene.collection.objects.link(target)
    root = _in_a_set(scene, arm, env, target)                  # the cup is set dressing too
    s = scene.reldesc
    s.reach_hand, s.reach_target, s.reach_frame, s.reach_window = "RightHand", target, 20, 10
    assert bpy.ops.reldesc.reach(armature="Walker") == {'FINISHED'}
    here = fcurve_snapshot(arm.animation_data.action)
    heads = heads_over_frames(scene, arm, [20])[0]
    assert np.linalg.norm(heads[[b.name for b in arm.data.bones].index("RightHand")] - hand) < 0.01
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.reach(armature="Walker") == {'FINISHED'}
    _same_keys(here, fcurve_snapshot(arm.animation_data.action))


def test_a_transfer_in_a_moved_set_and_onto_a_stool_under_a_scaled_parent_keys_the_same():
    scene, arm, env = demo.build_transfer_scene(frames=30, target="stool", at=(1.6, 0.8))
    stool = bpy.data.objects["Stool"]
    root = _in_a_set(scene, arm, env, stool)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    assert bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Stool") == {'FINISHED'}
    here = fcurve_snapshot(arm.animation_data.action)
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Stool") == {'FINISHED'}
    _same_keys(here, fcurve_snapshot(arm.animation_data.action))
    # The stool under a parent scaled 2 that leaves it where it is: a parent is its world matrix.
    root.matrix_world = np.eye(4).tolist()
    holder = _root("Holder", location=(0.3, -0.2, 0.0))
    holder.scale = (2.0, 2.0, 2.0)
    _parent([stool], holder)
    assert bpy.ops.reldesc.transfer(armature="Walker", source_object="Chair", target_object="Stool") == {'FINISHED'}
    _same_keys(here, fcurve_snapshot(arm.animation_data.action))


def test_a_garment_of_a_rig_moved_with_its_set_is_carried_with_it(tmp_path):
    scene, arm, skirt, env = demo.build_garment_scene(frames=20)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "skirt.blend"))
    _parent([skirt], arm)                  # a character's meshes are its armature's children (an FBX import's)
    root = _in_a_set(scene, arm, env)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    bpy.data.objects["Floor"].location.z += 0.05              # an edit: the skirt is carried, not copied
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    here = {f: evaluated_vertices(skirt, scene, f) for f in (1, 10, 20)}
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    for f, then in here.items():
        assert np.abs(evaluated_vertices(skirt, scene, f) - _moved(then)).max() < 1e-4, f


def test_a_walk_in_a_moved_set_walks_the_same_way_moved():
    scene, arm, env, curve = demo.build_crowd_scene(frames=60, size=(10.0, 8.0), cells=(40, 32))
    bpy.data.objects.remove(curve)
    t = np.linspace(0.0, 1.0, 20)
    curve = demo.curve_object("Path", np.c_[3.0 * t, 0.5 * np.sin(np.pi * t), np.zeros_like(t)], scene.collection)
    s = scene.reldesc
    s.armature, s.walk_path, s.walk_terrain = arm, curve, env
    root = _in_a_set(scene, arm, env, curve)
    frames = [1, 30, 60]
    assert bpy.ops.reldesc.walk() == {'FINISHED'}
    here = heads_over_frames(scene, bpy.data.objects["Walker.walk.000"], frames)
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.walk() == {'FINISHED'}
    moved = heads_over_frames(scene, bpy.data.objects["Walker.walk.000"], frames)
    assert np.abs(moved - _moved(here)).max() < 1e-3


def test_contacts_of_a_rig_moved_with_its_set_are_the_same(scene):
    scene, arm, env, bridge, beam = scene
    root = _in_a_set(scene, arm, env)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    assert bpy.ops.reldesc.detect_contacts(armature="Walker") == {'FINISHED'}
    here = adapter.stored_contacts(arm)
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.detect_contacts(armature="Walker") == {'FINISHED'}
    again = adapter.stored_contacts(arm)
    assert [(r["effector"], r["start"], r["end"], r["status"]) for r in again] == \
        [(r["effector"], r["start"], r["end"], r["status"]) for r in here]


def test_the_overlay_of_a_rig_moved_with_its_set_is_drawn_where_it_now_is(scene):
    from blender_reldesc.viewport import overlay
    scene, arm, env, bridge, beam = scene
    root = _in_a_set(scene, arm, env)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    arm.data.bones.active = arm.data.bones["Head"]
    scene.reldesc.overlay_targets = True
    scene.frame_set(20)
    live.clear()
    before = {k: np.array(v, float) for k, v in overlay._geometry(bpy.context).items()
              if k in ("points", "lines", "joints")}
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    after = overlay._geometry(bpy.context)                     # the same session: it sees the move
    for key, then in before.items():
        assert len(then)
        np.testing.assert_allclose(np.array(after[key], float), _moved(then), atol=1e-5)
    live.clear()


def test_a_garment_of_an_armature_scaled_after_binding_grows_with_it(tmp_path):
    scene, arm, skirt, env = demo.build_garment_scene(frames=20)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "skirt.blend"))
    _parent([skirt], arm)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    frames = (1, 10, 20)
    before = {f: evaluated_vertices(skirt, scene, f) for f in frames}
    hips_before = heads_over_frames(scene, arm, frames)[:, 0]
    arm.scale = (1.2, 1.2, 1.2)
    bpy.context.view_layer.update()
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    hips = heads_over_frames(scene, arm, frames)[:, 0]
    for i, f in enumerate(frames):
        then, now = before[f] - hips_before[i], evaluated_vertices(skirt, scene, f) - hips[i]
        radius = lambda v: np.linalg.norm(v[:, :2], axis=1).mean()  # noqa: E731
        assert radius(now) / radius(then) == pytest.approx(1.2, rel=0.01)
        assert np.ptp(now[:, 2]) / np.ptp(then[:, 2]) == pytest.approx(1.2, rel=0.01)
