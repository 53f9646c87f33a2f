"""Animator controls: affinity overrides, influence painting, overlays data, diagnostics."""

import numpy as np
import pytest

import bpy

from blender_reldesc import adapter, demo, jobs
from blender_reldesc.viewport import live

from blender_helpers import heads_over_frames


def _bone_heights(scene, arm, bone):
    i = [b.name for b in arm.data.bones].index(bone)
    return heads_over_frames(scene, arm, range(1, 41))[:, i, 2]


def test_hips_affinity_one_keeps_their_height_above_a_raised_floor(scene):
    scene, arm, env, bridge, beam = scene
    source = _bone_heights(scene, arm, "Hips")
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    bridge.location.z += 0.2                      # raise the floor under the beam
    bpy.ops.reldesc.bake(armature="Walker")
    plain = _bone_heights(scene, arm, "Hips")
    arm.pose.bones["Hips"].reldesc.use_affinity_override = True
    arm.pose.bones["Hips"].reldesc.affinity = 1.0
    bpy.ops.reldesc.bake(armature="Walker")
    held = _bone_heights(scene, arm, "Hips")
    want = source + 0.2
    err_plain, err_held = np.abs(plain - want).mean(), np.abs(held - want).mean()
    assert err_held < 0.7 * err_plain, (err_held, err_plain)


def test_zero_influence_makes_a_surface_ignored(scene):
    scene, arm, env, bridge, beam = scene
    head_src = _bone_heights(scene, arm, "Head")
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    beam.location.z -= 0.3
    bridge.location.z -= 0.1
    assert bpy.ops.reldesc.paint_influence(environment="Environment", object="Beam") == {'FINISHED'}
    group = beam.vertex_groups["reldesc_influence"]
    assert bpy.context.active_object == beam and beam.mode == 'WEIGHT_PAINT'
    assert all(abs(group.weight(v.index) - 1.0) < 1e-6 for v in beam.data.vertices)
    group.add(range(len(beam.data.vertices)), 0.0, 'REPLACE')
    assert bpy.ops.reldesc.paint_influence() == {'FINISHED'}           # done painting: back to object mode
    assert beam.mode == 'OBJECT'
    bpy.ops.reldesc.bake(armature="Walker")
    ignored = _bone_heights(scene, arm, "Head")
    # The beam no longer counts; the lowered bridge still does.
    assert np.abs(ignored - (head_src - 0.1)).max() < 0.02
    group.add(range(len(beam.data.vertices)), 1.0, 'REPLACE')
    bpy.ops.reldesc.bake(armature="Walker")
    followed = _bone_heights(scene, arm, "Head")
    assert np.min(followed - (head_src - 0.1)) < -0.03                    # ducks for the beam again (bend limits keep the spine human: less than before)


def test_all_zero_influence_is_a_clear_error(scene):
    scene, arm, env, bridge, beam = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    for ob in (bridge, beam):
        g = ob.vertex_groups.new(name="reldesc_influence")
        g.add(range(len(ob.data.vertices)), 0.0, 'REPLACE')
    with pytest.raises(RuntimeError, match="no active descriptor"):
        bpy.ops.reldesc.bake(armature="Walker")


def test_influence_group_outside_the_environment_is_named_in_a_warning(scene):
    scene, arm, env, bridge, beam = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    me = bpy.data.meshes.new("Prop")
    me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
    prop = bpy.data.objects.new("Prop", me)
    scene.collection.objects.link(prop)
    prop.vertex_groups.new(name="reldesc_influence")
    warnings = []
    jobs.BakeJob(scene, arm, warn=warnings.append).run(progress=lambda *a: True)
    assert any("Prop" in w for w in warnings)


def test_overrides_and_weights_survive_save_and_reload(scene, tmp_path):
    scene, arm, env, bridge, beam = scene
    arm.pose.bones["Hips"].reldesc.use_affinity_override = True
    arm.pose.bones["Hips"].reldesc.affinity = 0.75
    g = beam.vertex_groups.new(name="reldesc_influence")
    g.add([0, 1, 2], 0.25, 'REPLACE')
    path = str(tmp_path / "controls.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    arm, beam = bpy.data.objects["Walker"], bpy.data.objects["Beam"]
    assert arm.pose.bones["Hips"].reldesc.use_affinity_override
    assert abs(arm.pose.bones["Hips"].reldesc.affinity - 0.75) < 1e-6
    assert abs(beam.vertex_groups["reldesc_influence"].weight(1) - 0.25) < 1e-6


def test_live_preview_follows_painting_without_rebinding(scene):
    scene, arm, env, bridge, beam = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    beam.location.z -= 0.3
    bpy.context.view_layer.update()
    head = [b.name for b in arm.data.bones].index("Head")
    frame = 1 + int(np.argmin(np.abs(jobs.Bound(arm).binding.motion[:, 0, 0] - demo.BEAM_X)))
    scene.frame_set(1)
    bpy.ops.reldesc.live(armature="Walker")
    for f in range(1, frame + 1):
        scene.frame_set(f)
    ducked = adapter.read_pose(arm)[0][head, 2]
    g = beam.vertex_groups.new(name="reldesc_influence")
    g.add(range(len(beam.data.vertices)), 0.0, 'REPLACE')
    beam.data.update()
    live.on_depsgraph_update(scene, bpy.context.evaluated_depsgraph_get())   # what painting triggers
    for f in range(1, frame + 1):
        scene.frame_set(f)
    upright = adapter.read_pose(arm)[0][head, 2]
    assert upright - ducked > 0.03
    bpy.ops.reldesc.live(armature="Walker")


def test_report_arrays_have_one_value_per_frame(scene):
    scene, arm, *_ = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    report = jobs.bake_job(scene, arm, progress=lambda *a: True)
    assert len(report["bone_length_error_per_frame"]) == report["frames"] == 40
    assert len(report["target_residual_per_frame"]) == 40


def test_overlay_handler_exists_only_while_enabled_and_builds_its_arrays(scene):
    from blender_reldesc.viewport import overlay
    scene, arm, env, bridge, beam = scene
    bpy.ops.reldesc.bind(armature="Walker", environment="Environment")
    assert overlay._handle is None
    scene.reldesc.show_overlay = True
    assert overlay._handle is not None
    arm.data.bones.active = arm.data.bones["Head"]
    scene.reldesc.overlay_color_by = 'weight'
    g = overlay._geometry(bpy.context)
    n = adapter.stored_meta(arm)["descriptors"]
    assert g["points"].shape == (n, 3)
    assert len(g["joints"]) == 2 * adapter.stored_meta(arm)["joints"]
    scene.reldesc.show_overlay = False
    assert overlay._handle is None
