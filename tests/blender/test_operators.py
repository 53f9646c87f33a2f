"""Bind, bake, unbind and live preview through the real operators."""

import numpy as np
import pytest

import bpy

from blender_reldesc import adapter, jobs
from blender_reldesc.viewport import live
from blender_reldesc.core import adapt

from blender_helpers import fcurve_snapshot, heads_over_frames


def test_bind_and_bake_reproduce_the_core_within_a_millimetre(scene):
    scene, arm, env, bridge, beam = scene
    source = bpy.data.actions["Walk"]
    before = fcurve_snapshot(source)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    meta = adapter.stored_meta(arm)
    assert meta["descriptors"] > 0 and meta["frame_start"] == 1 and meta["frame_end"] == 40
    from blender_reldesc import demo
    demo.bend_bridge(bridge)
    demo.lower_beam(beam)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    adapted = bpy.data.actions["Walk.adapted"]
    assert arm.animation_data.action == adapted
    # The source action is untouched.
    after = fcurve_snapshot(source)
    assert before.keys() == after.keys()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    # Blender's evaluation of the baked action puts the bones where the core put the joints.
    bound = jobs.Bound(arm)
    mesh = bound.binding.mesh.with_vertices(bound.read_environment(scene))
    result = adapt(bound.binding, mesh)
    heads = heads_over_frames(scene, arm, bound.frames)
    want = result.positions[:, bound.head_joint]
    assert np.abs(heads - want).max() < 1e-3
    # The character really adapted: the head went under the lowered beam.
    head = bound.binding.skeleton.index("Head")
    assert np.min(want[:, head, 2] - bound.binding.motion[:, head, 2]) < -0.03
    assert scene.reldesc.last_frames == 40


def test_bake_with_the_interaction_mesh_solver(scene):
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    demo.bend_bridge(bridge)
    scene.reldesc.solver = 'INTERACTION_MESH'
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    bound = jobs.Bound(arm)
    mesh = bound.binding.mesh.with_vertices(bound.read_environment(scene))
    result = adapt(bound.binding, mesh, solver="interaction_mesh")
    heads = heads_over_frames(scene, arm, bound.frames)
    assert np.abs(heads - result.positions[:, bound.head_joint]).max() < 1e-3
    # Not the descriptors' result: the other solver really ran (and both follow the sagging deck).
    other = adapt(bound.binding, mesh)
    assert np.abs(other.positions - result.positions).max() > 1e-3
    # The standing toes stay on the sagging deck as high as they stood on the flat one.
    from blender_reldesc.core.geometry import Collider
    sk = bound.binding.skeleton
    toes = [sk.index("LeftToe"), sk.index("RightToe")]
    flat, bent = bound.binding.mesh, mesh
    before = Collider(flat.frame(0), flat.normals(0), flat.triangles, flat.valid, 0.5).signed_distance(
        bound.binding.motion[:, toes].reshape(-1, 3))[0]
    after = Collider(bent.frame(0), bent.normals(0), bent.triangles, bent.valid, 0.5).signed_distance(
        result.positions[:, toes].reshape(-1, 3))[0]
    standing = before < 0.03
    assert standing.sum() > 10 and np.abs(after - before)[standing].max() < 0.02


def test_a_rebake_reuses_the_binding_read_back_and_a_rebind_does_not(scene):
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    demo.lower_beam(beam)
    bpy.ops.reldesc.bake(armature="Walker")
    first = jobs.Bound(arm).binding
    keys = fcurve_snapshot(bpy.data.actions["Walk.adapted"])
    bpy.ops.reldesc.bake(armature="Walker")
    assert jobs.Bound(arm).binding is first                   # what the first bake computed is reused
    again = fcurve_snapshot(bpy.data.actions["Walk.adapted"])
    assert keys.keys() == again.keys() and all(np.array_equal(keys[k], again[k]) for k in keys)
    arm.animation_data.action = bpy.data.actions["Walk"]
    demo.bend_bridge(bridge)                                  # bound again on another environment
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    rebound = jobs.Bound(arm).binding
    assert rebound is not first and not np.array_equal(rebound.mesh.vertices, first.mesh.vertices)


def test_rebake_replaces_the_adapted_action(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.reldesc.bake(armature="Walker")
    bpy.ops.reldesc.bake(armature="Walker")
    names = [a.name for a in bpy.data.actions]
    assert names.count("Walk.adapted") == 1 and "Walk.adapted.001" not in names


def test_binding_survives_save_and_reload(scene, tmp_path):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.reldesc.bake(armature="Walker")          # the source is no longer assigned: it must still be saved
    meta = adapter.stored_meta(arm)
    first = jobs.Bound(arm).binding
    path = str(tmp_path / "bound.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    arm = bpy.data.objects["Walker"]
    assert adapter.stored_meta(arm) == meta
    assert "Walk" in bpy.data.actions
    again = jobs.Bound(arm).binding
    np.testing.assert_array_equal(again.triangles, first.triangles)
    np.testing.assert_array_equal(again.barycentrics, first.barycentrics)
    np.testing.assert_array_equal(again.motion, first.motion)


def test_unbind_removes_the_binding(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    assert bpy.ops.reldesc.unbind(armature="Walker") == {'FINISHED'}
    assert adapter.stored_meta(arm) is None
    with pytest.raises(RuntimeError, match="not bound"):
        bpy.ops.reldesc.bake(armature="Walker")


def test_live_preview_poses_like_the_bake_and_goes_away(scene):
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    demo.lower_beam(beam, 0.2)
    bpy.ops.reldesc.bake(armature="Walker")
    bound = jobs.Bound(arm)
    baked = heads_over_frames(scene, arm, bound.frames)
    adapter.assign_action(arm, bpy.data.actions["Walk"])
    arm.animation_data.action_slot = bpy.data.actions["Walk"].slots[0]
    scene.frame_set(1)
    assert bpy.ops.reldesc.live(armature="Walker") == {'FINISHED'}
    assert live.on_frame_change in bpy.app.handlers.frame_change_post
    posed = []
    for f in bound.frames:
        scene.frame_set(int(f))
        bpy.context.view_layer.update()
        head, _, _ = adapter.read_pose(arm)
        posed.append(adapter.to_world(adapter.world_matrix(arm), head))
    assert np.abs(np.stack(posed) - baked).max() < 1e-3
    assert live.last_seconds < 0.5
    bpy.ops.reldesc.live(armature="Walker")
    assert live.on_frame_change not in bpy.app.handlers.frame_change_post


def _walker_with_constraints(arm):
    """A constraint on a bound bone that shapes the source (Copy Rotation, influence 0.3), one the
    user muted, and a bound bone the action does not key, posed by hand."""
    con = arm.pose.bones["LeftForeArm"].constraints.new('COPY_ROTATION')
    con.target, con.subtarget, con.influence = arm, "RightForeArm", 0.3
    off = arm.pose.bones["LeftHand"].constraints.new('LIMIT_ROTATION')
    off.mute = True
    action = arm.animation_data.action
    for fc in [fc for fc in adapter.actions._slot_fcurves(arm, action) if '"Head"' in fc.data_path]:
        adapter.actions._bag(action, arm.animation_data.action_slot).fcurves.remove(fc)
    arm.pose.bones["Head"].rotation_quaternion = (0.9, 0.1, 0.3, 0.0)
    return con, off, tuple(arm.pose.bones["Head"].rotation_quaternion)


def test_live_preview_poses_a_constrained_rig_like_the_bake_and_gives_it_back(scene, tmp_path):
    # The bake keys the bound bones' constraint influence to 0; the preview mutes them while it
    # is on and keeps the posed bones' own channels, on the armature's data: live off, a save
    # (the file is written as the rig is without the preview), an error and unregister give
    # both back; the user's own muted constraint stays muted.
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    con, off, head = _walker_with_constraints(arm)
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    demo.lower_beam(beam, 0.2)
    frames = [3, 4, 5, 17, 18, 30]
    bpy.ops.reldesc.bake(armature="Walker")
    bpy.ops.reldesc.bake(armature="Walker")                      # again, over the adapted action
    adapted = bpy.data.actions["Walk.adapted"]
    assert any(fc.data_path.endswith(f'["{con.name}"].influence')
               for fc in adapter.actions._slot_fcurves(arm, adapted))   # still keyed off
    baked = heads_over_frames(scene, arm, frames)
    bpy.ops.reldesc.use_source(armature="Walker")
    assert con.influence == pytest.approx(0.3) and not con.mute
    # the unkeyed bone gets the pose it had before any bake, not its default
    assert tuple(arm.pose.bones["Head"].rotation_quaternion) == pytest.approx(head, abs=1e-6)
    source = heads_over_frames(scene, arm, frames)
    assert np.abs(source - baked).max() > 0.01                   # the bake changed the pose
    assert bpy.ops.reldesc.live(armature="Walker") == {'FINISHED'}
    posed = heads_over_frames(scene, arm, frames)
    assert np.abs(posed - baked).max() < 1e-3
    assert con.mute and off.mute and adapter.rig.pose_held(arm)
    path = str(tmp_path / "saved_live.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path, copy=True)
    assert con.mute and adapter.rig.pose_held(arm)               # the preview goes on after the save
    with bpy.data.libraries.load(path) as (src, dst):
        dst.objects = ["Walker"]
    saved = dst.objects[0]
    assert not saved.pose.bones["LeftForeArm"].constraints[0].mute and saved.pose.bones["LeftHand"].constraints[0].mute
    assert not adapter.rig.pose_held(saved)
    assert tuple(saved.pose.bones["Head"].rotation_quaternion) == pytest.approx(head, abs=1e-6)
    bpy.data.objects.remove(saved)
    # An error gives the rig back to its action; fixed, the preview holds it again.
    bone = arm.data.bones["Spine1"]
    bone.name = "Renamed"
    scene.frame_set(6)
    assert "no bone Spine1" in live.last_error and not con.mute and not adapter.rig.pose_held(arm)
    bone.name = "Spine1"
    scene.frame_set(7)
    assert live.last_error == "" and con.mute
    assert bpy.ops.reldesc.live(armature="Walker") == {'FINISHED'}   # off
    assert not con.mute and off.mute and not adapter.rig.pose_held(arm)
    assert tuple(arm.pose.bones["Head"].rotation_quaternion) == pytest.approx(head, abs=1e-6)
    assert np.abs(heads_over_frames(scene, arm, frames) - source).max() < 1e-6


def test_a_file_written_while_the_preview_held_the_rig_opens_with_the_rig_given_back(scene, tmp_path):
    # A crash's autosave does not run the save handlers: the record on the armature's data is
    # what gives the constraints and the pose back when the file is opened.
    scene, arm, env, bridge, beam = scene
    con, off, head = _walker_with_constraints(arm)
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.reldesc.live(armature="Walker")
    scene.frame_set(9)
    assert con.mute and arm.pose.bones["Head"].rotation_quaternion[0] != pytest.approx(head[0])
    path = str(tmp_path / "autosave_like.blend")
    bpy.data.libraries.write(path, {scene})                       # no save_pre: written as held
    assert bpy.ops.wm.open_mainfile(filepath=path) == {'FINISHED'}
    arm = bpy.data.objects["Walker"]
    assert not arm.pose.bones["LeftForeArm"].constraints[0].mute and arm.pose.bones["LeftHand"].constraints[0].mute
    assert tuple(arm.pose.bones["Head"].rotation_quaternion) == pytest.approx(head, abs=1e-6)
    assert not adapter.rig.pose_held(arm)
    bpy.context.scene.frame_set(10)                               # its preview is still on: held again
    assert arm.pose.bones["LeftForeArm"].constraints[0].mute
    bpy.ops.reldesc.live(armature="Walker")


def test_undo_keeps_what_the_preview_holds_with_the_data_it_was_held_in(scene):
    # The record of what the preview took lives in the armature's data, so an undo brings back
    # flags and record together: undoing an edit made while previewing keeps the rig held and
    # posed; undoing past the moment the preview was turned on gives the rig back whole.
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    _walker_with_constraints(arm)
    head = tuple(arm.pose.bones["Head"].rotation_quaternion)
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.ed.undo_push(message="bound")
    bpy.ops.reldesc.live(armature="Walker")
    scene.frame_set(11)
    bpy.ops.ed.undo_push(message="previewing")
    shown = heads_over_frames(bpy.context.scene, bpy.data.objects["Walker"], [11])
    demo.lower_beam(beam, 0.2)
    bpy.ops.ed.undo_push(message="beam lowered")
    assert bpy.ops.ed.undo() == {'FINISHED'}                      # back to "previewing"
    arm = bpy.data.objects["Walker"]
    assert arm.pose.bones["LeftForeArm"].constraints[0].mute and adapter.rig.pose_held(arm)
    assert np.abs(heads_over_frames(bpy.context.scene, arm, [11]) - shown).max() < 1e-6
    assert bpy.ops.ed.undo() == {'FINISHED'}                      # back to "bound": no preview
    arm = bpy.data.objects["Walker"]
    assert not bpy.context.scene.reldesc.live
    assert not arm.pose.bones["LeftForeArm"].constraints[0].mute and not adapter.rig.pose_held(arm)
    assert tuple(arm.pose.bones["Head"].rotation_quaternion) == pytest.approx(head, abs=1e-6)
    live.sync(bpy.context.scene)                                   # the handler goes with the setting


def test_a_job_run_while_the_live_preview_is_on_reads_the_rig_as_its_action_plays(scene):
    # Bind plays every frame: the preview pauses (its handler does nothing, the constraints it
    # muted are back on) and poses the frame again after.
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    con, *_ = _walker_with_constraints(arm)
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    first = jobs.Bound(arm).binding.motion.copy()
    demo.lower_beam(beam, 0.2)
    bpy.ops.reldesc.live(armature="Walker")
    scene.frame_set(12)
    assert con.mute
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert np.abs(jobs.Bound(arm).binding.motion - first).max() < 1e-9
    assert con.mute and adapter.rig.pose_held(arm)                # previewing again
    bpy.ops.reldesc.live(armature="Walker")
    assert not con.mute


def test_live_preview_poses_bones_in_every_rotation_mode_alike(scene):
    # set_pose writes quaternion bones in bulk (their modes read with one foreach_get) and the
    # others one by one: a rig whose bones were switched to Euler and axis-angle after binding
    # shows the same pose. A bone renamed while it plays is a message naming it, not a traceback.
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    demo.lower_beam(beam, 0.2)
    frames = [5, 6, 7, 20]

    def heads():
        out = []
        for f in frames:
            scene.frame_set(f)
            bpy.context.view_layer.update()
            out.append(adapter.to_world(adapter.world_matrix(arm), adapter.read_pose(arm)[0]))
        return np.stack(out)

    bpy.ops.reldesc.live(armature="Walker")
    quaternion = heads()
    bpy.ops.reldesc.live(armature="Walker")
    modes = ["XZY", "AXIS_ANGLE", "ZYX"]
    for k, pb in enumerate(arm.pose.bones):
        if k % 2:
            pb.rotation_mode = modes[k % 3]
    bpy.ops.reldesc.live(armature="Walker")
    mixed = heads()
    assert np.abs(mixed - quaternion).max() < 1e-4            # Euler angles are stored as float32
    moved = arm.data.bones[len(arm.data.bones) // 2]
    moved_name, moved.name = moved.name, "Renamed"
    scene.frame_set(8)
    assert f"no bone {moved_name}" in live.last_error and "rename it back" in live.last_error
    bpy.ops.reldesc.live(armature="Walker")


def test_errors_are_reported_not_raised_as_tracebacks(scene):
    scene, arm, env, bridge, beam = scene
    with pytest.raises(RuntimeError, match="no collection named 'Nope'"):
        bpy.ops.reldesc.bind(armature="Walker", environment="Nope")
    with pytest.raises(RuntimeError, match="no object named 'Ghost'"):
        bpy.ops.reldesc.bind(armature="Ghost", environment="Environment")
    with pytest.raises(RuntimeError, match="not an armature"):
        bpy.ops.reldesc.bind(armature="Beam", environment="Environment")
    # A non-mesh in the environment is ignored with a warning naming it.
    empty = bpy.data.objects.new("Marker", None)
    env.objects.link(empty)
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    # Changed topology since bind: a clear error, and nothing is written.
    me = bridge.data
    me.vertices.add(1)
    me.update()
    actions = {a.name for a in bpy.data.actions}
    with pytest.raises(RuntimeError, match="re-bind"):
        bpy.ops.reldesc.bake(armature="Walker")
    assert {a.name for a in bpy.data.actions} == actions


def test_armature_without_action(scene):
    scene, arm, *_ = scene
    arm.animation_data.action = None
    with pytest.raises(RuntimeError, match="has no action"):
        bpy.ops.reldesc.bind(armature="Walker", environment="Environment")


def test_euler_bones_are_baked_in_their_own_rotation_mode(scene):
    scene, arm, env, bridge, beam = scene
    from blender_reldesc import demo
    # Re-key the walk with Euler rotations on every bone.
    for pb in arm.pose.bones:
        pb.rotation_mode = 'XZY'
    bpy.data.actions.remove(bpy.data.actions["Walk"])
    walk = demo.animate_walk(arm, 40)
    rig = adapter.read_rig(arm)
    # animate_walk keys quaternions: convert the action to the bones' Euler mode.
    from blender_reldesc.core.skeleton.armature import euler_from_quat
    from blender_reldesc.adapter import _fcurves
    q = np.zeros((40, len(rig.names), 4))
    for fc in _fcurves(walk):
        if fc.data_path.endswith("rotation_quaternion"):
            b = rig.names.index(fc.data_path.split('"')[1])
            co = np.empty(80, np.float32)
            fc.keyframe_points.foreach_get("co", co)
            q[:, b, fc.array_index] = co[1::2]
    eul = euler_from_quat(q, 'XZY')
    channels = [(b, "rotation_euler", eul[:, b]) for b in range(len(rig.names))]
    channels += [(b, "location", np.zeros((40, 3))) for b in range(0)]
    root = rig.names.index("Hips")
    loc = [fc for fc in _fcurves(walk) if fc.data_path.endswith("location")]
    loc_values = np.zeros((40, 3))
    for fc in loc:
        co = np.empty(80, np.float32)
        fc.keyframe_points.foreach_get("co", co)
        loc_values[:, fc.array_index] = co[1::2]
    channels.append((root, "location", loc_values))
    bpy.data.actions.remove(walk)
    adapter.write_action(arm, "Walk", np.arange(1, 41), rig, channels)
    heads_source = heads_over_frames(scene, arm, range(1, 41))
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.reldesc.bake(armature="Walker")
    adapted = bpy.data.actions["Walk.adapted"]
    paths = {fc.data_path.rsplit(".", 1)[1] for fc in _fcurves(adapted)}
    assert "rotation_euler" in paths and "rotation_quaternion" not in paths
    # Undeformed scene: the adapted action reproduces the source motion.
    heads = heads_over_frames(scene, arm, range(1, 41))
    assert np.abs(heads - heads_source).max() < 1e-3


@pytest.mark.parametrize("mode", ["QUATERNION", "XZY", "AXIS_ANGLE"])
def test_fast_forward_kinematics_agrees_with_blender_evaluation(scene, mode):
    scene, arm, *_ = scene
    action = bpy.data.actions["Walk"]
    rig = adapter.read_rig(arm)
    if mode != "QUATERNION":
        # Re-key every bone in ``mode`` from the evaluated quaternion pose.
        frames = np.arange(1, 41)
        _, pose, _ = adapter.read_motion(scene, arm, frames, np.zeros(0, int))
        from blender_reldesc.core.skeleton.armature import axis_angle_from_quat, basis_from_pose, euler_from_quat, split_basis
        q, loc = split_basis(basis_from_pose(rig.rest, rig.parents, pose))
        for pb in arm.pose.bones:
            pb.rotation_mode = mode
        rig = adapter.read_rig(arm)
        rot = euler_from_quat(q, mode) if mode != "AXIS_ANGLE" else axis_angle_from_quat(q)
        prop = "rotation_euler" if mode != "AXIS_ANGLE" else "rotation_axis_angle"
        channels = [(b, prop, rot[:, b]) for b in range(len(rig.names))]
        channels += [(b, "location", loc[:, b]) for b in range(len(rig.names))]
        action = adapter.write_action(arm, "Walk", frames, rig, channels)
    frames = np.arange(1, 41)
    tails = np.array([0, 3])
    assert adapter.fk_blockers(arm, action) == []
    fast = adapter.read_motion_fk(arm, action, frames, rig, tails)
    slow = adapter.read_motion(scene, arm, frames, tails)
    np.testing.assert_allclose(fast[0], slow[0], atol=1e-5)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-5)
    # A bone constraint makes the fast path step aside.
    arm.pose.bones["Head"].constraints.new('COPY_ROTATION')
    assert "bone constraints" in adapter.fk_blockers(arm, action)
    *_, path = adapter.read_source_motion(scene, arm, action, frames, rig, tails)
    assert path == "evaluated"


def test_transformed_objects_are_handled_in_world_space(scene):
    scene, arm, env, bridge, beam = scene
    heads_source = heads_over_frames(scene, arm, range(1, 41))
    for ob in (arm, bridge, beam):
        ob.location.x += 1.5
        ob.rotation_euler.z += 0.4
        ob.scale = (1.0, 1.0, 1.0)
    bpy.context.view_layer.update()
    moved_source = heads_over_frames(scene, arm, range(1, 41))
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.reldesc.bake(armature="Walker")
    baked = heads_over_frames(scene, arm, range(1, 41))
    assert np.abs(baked - moved_source).max() < 1e-3          # undeformed: the source, in world space
    assert np.abs(moved_source - heads_source).max() > 1.0    # (the objects really moved)


def test_animated_environment_is_read_per_frame(scene):
    scene, arm, env, bridge, beam = scene
    # The beam slides down 10 cm over the clip in the source scene.
    beam.location.z = 0.0
    beam.keyframe_insert("location", index=2, frame=1)
    beam.location.z = -0.1
    beam.keyframe_insert("location", index=2, frame=40)
    assert adapter.is_animated(beam)
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    assert adapter.stored_meta(arm)["animated"] is True
    heads_source = heads_over_frames(scene, arm, range(1, 41))
    bpy.ops.reldesc.bake(armature="Walker")
    assert np.abs(heads_over_frames(scene, arm, range(1, 41)) - heads_source).max() < 1e-3


def test_cancelled_bake_changes_nothing(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    from blender_reldesc.core import Cancelled
    job = jobs.BakeJob(scene, arm)
    job.read()
    with pytest.raises(Cancelled):
        job.compute(progress=lambda done, total: False)       # what Esc does in the modal operator
    assert "Walk.adapted" not in bpy.data.actions
    assert arm.animation_data.action.name == "Walk"


def test_live_handlers_are_gone_after_unregister(scene):
    import blender_reldesc
    scene, arm, *_ = scene
    con, *_ = _walker_with_constraints(arm)
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bpy.ops.reldesc.live(armature="Walker")
    assert live.on_frame_change in bpy.app.handlers.frame_change_post and con.mute
    blender_reldesc.unregister()
    try:
        assert not con.mute and not adapter.rig.pose_held(arm)
        assert live.on_frame_change not in bpy.app.handlers.frame_change_post
        assert live.on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post
        assert live.on_load not in bpy.app.handlers.load_post
        assert not hasattr(bpy.types.Scene, "reldesc")
        assert "bake" not in dir(bpy.ops.reldesc)
    finally:
        blender_reldesc.register()


def test_the_add_on_unregisters_and_registers_again_as_preferences_toggle_it():
    import blender_reldesc
    blender_reldesc.unregister()
    try:
        assert "bind" not in dir(bpy.ops.reldesc) and not hasattr(bpy.types.Scene, "reldesc")
        assert blender_reldesc._modules is None
    finally:
        blender_reldesc.register()
    blender_reldesc.unregister()
    blender_reldesc.register()
    assert "bind" in dir(bpy.ops.reldesc) and hasattr(bpy.types.Scene, "reldesc")
