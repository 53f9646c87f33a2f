"""Scenes as users build them (issue 34): the placement rule on rigs placed with object transforms.

The rule (docs/how-it-works/workflow.md, "Where the character is"): joints are tied to the environment in world space;
keys are written for the armature's placement at bake time. So moving a character together
with its environment (a parent, animated or not, or every object) bakes the same local keys;
an armature moved away from its environment is pulled back, and the bake and the panel say so;
a uniform object scale changed since Bind is a character that grew.

The rig is the generated walker as an FBX import leaves a rig: exported to BVH in centimetres,
imported back (bones in cm), its rest data turned Y-up and its object rotated 90 degrees about X
and scaled 0.01, under a parent Empty with its environment.
"""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from mathutils import Matrix, Vector  # noqa: E402

from blender_reldesc import adapter, demo, jobs  # noqa: E402
from blender_reldesc.panels.bind_bake import placement_note  # noqa: E402
from blender_helpers import fcurve_snapshot, heads_over_frames, mixamo_with_fingers  # noqa: E402

FRAMES = 40
#: the parent's move after binding: 4 m along X, -1.5 m along Y, turned 30 degrees about Z
MOVE = Matrix.Translation((4.0, -1.5, 0.0)) @ Matrix.Rotation(math.radians(30), 4, "Z")


def _moved(points, matrix=MOVE):
    m = np.array(matrix)
    return points @ m[:3, :3].T + m[:3, 3]


def _root(name="Root", location=(0.0, 0.0, 0.0)):
    root = bpy.data.objects.new(name, None)
    root.location = location
    bpy.context.scene.collection.objects.link(root)
    return root


def _parent(obs, root):
    """Parent ``obs`` to ``root`` keeping where they are (the parent inverse, as Ctrl-P does)."""
    bpy.context.view_layer.update()
    for ob in obs:
        world = ob.matrix_world.copy()
        ob.parent = root
        ob.matrix_parent_inverse = root.matrix_world.inverted()
        ob.matrix_world = world
    bpy.context.view_layer.update()


def fbx_like(arm, tmp_path):
    """The walker as an FBX import leaves it: BVH round trip in centimetres (bones in cm), rest
    data Y-up, object R_x(90 degrees) S(0.01); the same world motion. Returns the new armature
    (named as the old one, which is removed)."""
    scene = bpy.context.scene
    name = arm.name
    bpy.context.view_layer.objects.active = arm
    arm.select_set(True)
    path = str(tmp_path / "walker.bvh")
    bpy.ops.export_anim.bvh(filepath=path, frame_start=1, frame_end=FRAMES, global_scale=100.0)
    old = arm.animation_data.action
    bpy.data.objects.remove(arm)
    bpy.data.actions.remove(old)
    before = set(bpy.data.objects)
    # Blender's BVH export writes its Z-up world as it is: read it back without turning it.
    bpy.ops.import_anim.bvh(filepath=path, global_scale=1.0, frame_start=1, use_fps_scale=False, axis_forward='Y',
                            axis_up='Z')
    new = next(ob for ob in bpy.data.objects if ob not in before)
    new.name = name
    bpy.context.view_layer.objects.active = new
    new.rotation_euler = (-math.pi / 2, 0.0, 0.0)
    bpy.ops.object.transform_apply(location=False, rotation=True, scale=False)
    new.rotation_euler = (math.pi / 2, 0.0, 0.0)
    new.scale = (0.01, 0.01, 0.01)
    new.animation_data.action.name = "Walk"
    scene.frame_set(1)
    return new


@pytest.fixture
def fbx_scene(tmp_path):
    """The generated walk over the bridge under the beam, its rig FBX-like, rig and set under 'Root'."""
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    source = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    arm = fbx_like(arm, tmp_path)
    assert tuple(round(s, 6) for s in arm.scale) == (0.01, 0.01, 0.01)
    assert max(b.length for b in arm.data.bones) > 10.0                       # centimetres
    root = _root()
    _parent([arm, bridge, beam], root)
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    heads = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    # The BVH has the bones' heads (not the generated rig's end bones): compare the ones both have.
    assert np.abs(heads[:, 0] - source[:, 0]).max() < 1e-4
    return scene, arm, env, root, bridge, beam, heads


class _Layout:
    """Records what a panel draws (headless: no real UI layout)."""

    def __init__(self, log):
        self.log, self.enabled = log, True

    def label(self, text="", **kw):
        self.log.append(("label", text))

    def operator(self, idname, **kw):
        self.log.append(("operator", idname))
        return type("OperatorProperties", (), {})()      # a button's properties, set by the panel

    def __getattr__(self, name):                  # prop, prop_search: recorded as nothing
        if name in ("box", "row", "column"):
            return lambda **kw: self
        return lambda *a, **kw: None


def _draw_main_panel():
    from blender_reldesc import panels
    log = []
    panels.bind_bake.RELDESC_PT_main.draw(type("P", (), {"layout": _Layout(log)})(), bpy.context)
    return log


def _bake(arm, **kw):
    assert bpy.ops.reldesc.bake(armature=arm.name, **kw) == {'FINISHED'}
    return fcurve_snapshot(arm.animation_data.action)


def _same_keys(a, b, rel=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        scale = max(1.0, float(np.abs(a[k]).max()))
        assert np.abs(a[k] - b[k]).max() <= rel * scale, k


def _report(arm):
    job = jobs.BakeJob(bpy.context.scene, arm, warn=lambda m: None)
    return job.run()


def test_an_fbx_placed_rig_bakes_its_source_and_a_raised_floor_lifts_it(fbx_scene):
    scene, arm, env, root, bridge, beam, source = fbx_scene
    assert bpy.ops.reldesc.bind(armature=arm.name, environment=env.name) == {'FINISHED'}
    _bake(arm)
    assert np.abs(heads_over_frames(scene, arm, range(1, FRAMES + 1)) - source).max() < 1e-4
    bridge.location.z += 0.1
    _bake(arm)
    lifted = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    hips = lifted[:, 0, 2] - source[:, 0, 2]
    assert np.median(hips) == pytest.approx(0.1, abs=0.02)


@pytest.mark.parametrize("how", ["parent", "animated parent", "every object"])
def test_moving_the_rig_with_its_set_changes_no_key(fbx_scene, how):
    scene, arm, env, root, bridge, beam, source = fbx_scene
    assert bpy.ops.reldesc.bind(armature=arm.name, environment=env.name) == {'FINISHED'}
    unedited = _bake(arm)
    if how == "parent":
        root.matrix_world = MOVE
    elif how == "animated parent":                       # the set travels during the shot
        for f, x in ((1, 0.0), (FRAMES, 3.0)):
            root.location = (x, 0.5 * x, 0.0)
            root.rotation_euler = (0.0, 0.0, 0.2 * x)
            root.keyframe_insert("location", frame=f)
            root.keyframe_insert("rotation_euler", frame=f)
    else:                                                # without a parent: each object moved the same way
        for ob in (arm, bridge, beam):
            ob.parent = None
        bpy.context.view_layer.update()
        for ob in (arm, bridge, beam):
            ob.matrix_world = MOVE @ ob.matrix_world
    scene.frame_set(1)
    report = _report(arm)
    assert report["placement"]["moved_from_environment"] < 1e-5
    assert report["placement"]["message"] == ""
    _same_keys(unedited, fcurve_snapshot(arm.animation_data.action))
    if how != "animated parent":
        baked = heads_over_frames(scene, arm, range(1, FRAMES + 1))
        assert np.abs(baked - _moved(source)).max() < 1e-4


def test_an_armature_moved_away_is_pulled_back_says_so_and_rebinds_here(fbx_scene):
    scene, arm, env, root, bridge, beam, source = fbx_scene
    assert bpy.ops.reldesc.bind(armature=arm.name, environment=env.name) == {'FINISHED'}
    meta = adapter.stored_meta(arm)
    assert placement_note(meta, arm) == ""
    arm.matrix_world = Matrix.Translation((1.5, 0.0, 0.0)) @ arm.matrix_world
    bpy.context.view_layer.update()
    note = placement_note(meta, arm)
    assert "moved 1.5 m relative to its environment" in note and "Re-bind Here" in note
    drawn = _draw_main_panel()
    assert any("moved 1.5 m relative" in text for kind, text in drawn if kind == "label")
    assert ("operator", "reldesc.rebind_here") in drawn
    warnings = []
    report = jobs.BakeJob(scene, arm, warn=warnings.append).run()
    assert report["placement"]["moved_from_environment"] == pytest.approx(1.5, abs=1e-4)
    assert report["placement"]["message"] == note and note in warnings
    # Pulled back by its descriptors: where the source was in the world.
    assert np.abs(heads_over_frames(scene, arm, range(1, FRAMES + 1)) - source).max() < 1e-4
    # Re-bind Here: the source again, bound where the armature stands now.
    assert bpy.ops.reldesc.rebind_here(armature=arm.name) == {'FINISHED'}
    assert arm.animation_data.action.name == "Walk"
    assert placement_note(adapter.stored_meta(arm), arm) == ""
    assert ("operator", "reldesc.rebind_here") not in _draw_main_panel()
    _bake(arm)
    shifted = source + np.array([1.5, 0.0, 0.0])
    assert np.abs(heads_over_frames(scene, arm, range(1, FRAMES + 1)) - shifted).max() < 1e-4


@pytest.mark.parametrize("factor", [1.2, 0.8])
def test_a_scaled_armature_is_a_bigger_character_on_the_same_floor(tmp_path, factor):
    # Scaled 0.8: a smaller character, not one ducking (its trunk measured against the source's
    # read as a duck, and the hips leaned back off the feet).
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    names = [b.name for b in arm.data.bones]
    feet = [names.index("LeftToe"), names.index("RightToe")]
    arm.location.y = 0.3                                  # its origin off the world's: scaled about it
    bpy.context.view_layer.update()
    source = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    arm.scale = (factor, factor, factor)
    bpy.context.view_layer.update()
    report = _report(arm)
    assert report["placement"]["object_scale"] == pytest.approx(factor, rel=1e-6)
    assert report["placement"]["moved_from_environment"] < 1e-5
    assert report["bone_length_error_max"] < 1e-3
    baked = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    # Other bones, in the world: the thigh is ``factor`` times the source's.
    thigh = lambda h: np.linalg.norm(h[:, names.index("LeftLeg")] - h[:, names.index("LeftUpLeg")], axis=-1)  # noqa: E731
    np.testing.assert_allclose(thigh(baked), factor * thigh(source), rtol=1e-3)
    # On the same floor: the toes as low as the source's (to 1 cm), the hips higher or lower.
    assert baked[:, feet, 2].min() == pytest.approx(source[:, feet, 2].min(), abs=0.01)
    ratio = np.median(baked[:, 0, 2] / source[:, 0, 2])
    assert ratio > 1.1 if factor > 1 else ratio < 0.9
    # Scaled about its origin 0.3 m aside, it did not move: no sideways shift of 0.2 x 0.3 m
    # (longer legs stride a little further along the walk).
    assert np.abs(baked[:, 0, 1] - source[:, 0, 1]).max() < 0.03
    # The hips as far ahead of the feet as the source's, scaled, within 3 cm on average.
    ahead = lambda h: h[:, 0, 0] - h[:, [names.index("LeftFoot"), names.index("RightFoot")], 0].mean(axis=1)  # noqa: E731
    assert abs(np.mean(ahead(baked) - factor * ahead(source))) < 0.03


def _clearance(scene, a, b):
    ha = heads_over_frames(scene, a, range(1, FRAMES + 1))
    hb = heads_over_frames(scene, b, range(1, FRAMES + 1))
    return np.linalg.norm(ha[:, :, None] - hb[:, None], axis=-1).min(axis=(1, 2))


@pytest.mark.parametrize("change", ["scaled 1.2", "moved 0.2 m closer"])
def test_a_partner_scaled_or_moved_after_binding_keeps_its_clearance(change):
    scene, lead, partner, env = demo.build_pair_scene(frames=FRAMES)
    source = _clearance(scene, lead, partner)
    assert bpy.ops.reldesc.bind(armature="Lead", environment=env.name, partners="Partner") == {'FINISHED'}
    if change == "scaled 1.2":
        partner.scale = (1.2, 1.2, 1.2)
    else:
        toward = np.array(jobs.Bound(lead).binding.motion[0, 0] - jobs.Bound(partner).binding.motion[0, 0])
        toward[2] = 0.0
        partner.location += Vector(0.2 * toward / np.linalg.norm(toward))
    bpy.context.view_layer.update()
    unadapted = _clearance(scene, lead, partner)
    assert (np.abs(unadapted - source) <= 0.02).mean() < 0.9           # the change matters
    warnings = []
    report = jobs.BakeJob(scene, lead, warn=warnings.append).run()
    assert [p["armature"] for p in report["partners"]] == ["Partner"]
    baked = _clearance(scene, lead, partner)
    assert baked.min() >= source.min() - 0.01
    assert (np.abs(baked - source) <= 0.02).mean() >= 0.9
    if change != "scaled 1.2":                                       # moved away from the floor: said
        assert any("'Partner' moved 0.2 m relative to its environment" in w for w in warnings)


def test_partners_moved_with_their_floor_change_no_key():
    scene, lead, partner, env = demo.build_pair_scene(frames=FRAMES)
    assert bpy.ops.reldesc.bind(armature="Lead", environment=env.name, partners="Partner") == {'FINISHED'}
    _bake(lead)
    keys = {ob.name: fcurve_snapshot(ob.animation_data.action) for ob in (lead, partner)}
    for ob in [lead, partner] + list(env.all_objects):
        ob.location += Vector((1.0, 2.0, 0.0))
    bpy.context.view_layer.update()
    _bake(lead)
    for ob in (lead, partner):
        _same_keys(keys[ob.name], fcurve_snapshot(ob.animation_data.action))


def test_a_bound_scene_appended_into_another_file_at_an_offset_bakes_the_same(tmp_path):
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    here = _bake(arm)
    adapter.use_source(arm, bpy.data.actions["Walk"])
    path = str(tmp_path / "bound.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    with bpy.data.libraries.load(path, link=False) as (src, dst):
        dst.collections = ["Environment"]
        dst.objects = ["Walker"]
    scene = bpy.context.scene
    scene.collection.children.link(dst.collections[0])
    scene.collection.objects.link(dst.objects[0])
    arm = dst.objects[0]
    root = _root("Offset")
    _parent([arm] + list(dst.collections[0].all_objects), root)
    root.location = (10.0, -4.0, 0.5)
    bpy.context.view_layer.update()
    report = _report(arm)
    assert report["placement"]["moved_from_environment"] < 1e-5
    _same_keys(here, fcurve_snapshot(arm.animation_data.action))


def _instanced(env, obs, name):
    """Move ``obs`` into collection ``name`` (not in the scene) and instance it from ``env`` by an Empty."""
    pieces = bpy.data.collections.new(name)
    for ob in obs:
        for c in list(ob.users_collection):
            c.objects.unlink(ob)
        pieces.objects.link(ob)
    empty = bpy.data.objects.new(name + "Instance", None)
    empty.instance_type, empty.instance_collection = 'COLLECTION', pieces
    env.objects.link(empty)
    return empty


def _rail(env, bevel=0.03):
    curve = bpy.data.curves.new("Rail", 'CURVE')
    curve.dimensions, curve.bevel_depth = '3D', bevel
    spline = curve.splines.new('POLY')
    spline.points.add(1)
    spline.points[0].co, spline.points[1].co = (-1.0, 2.5, 0.9, 1.0), (3.0, 2.5, 0.9, 1.0)   # a handrail aside
    ob = bpy.data.objects.new("Rail", curve)
    env.objects.link(ob)
    return ob


def test_an_environment_of_collection_instances_and_a_bevelled_curve(tmp_path):
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    source = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    _instanced(env, [bridge], "Deck")
    beams = _instanced(env, [beam], "Overhead")
    _rail(env)
    bpy.context.view_layer.update()
    parts, ignored = adapter.environment_objects(env.name)
    assert [p.name for p in parts] == ["DeckInstance/Bridge", "OverheadInstance/Beam", "Rail"] and not ignored
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    assert adapter.stored_meta(arm)["objects"] == [p.name for p in parts]
    _bake(arm)
    assert np.abs(heads_over_frames(scene, arm, range(1, FRAMES + 1)) - source).max() < 1e-5
    # The beam's instance lowered after binding is an edit: the walker ducks.
    beams.location.z -= 0.25
    scene.frame_set(1)
    by_instance = _bake(arm)
    ducked = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    assert (source[..., 2] - ducked[..., 2]).max() > 0.03
    # A change inside the instanced collection is an edit like any other: the same move made
    # on the beam itself bakes the same keys.
    beams.location.z += 0.25
    beam.location.z -= 0.25
    scene.frame_set(1)
    _same_keys(by_instance, _bake(arm))
    # A binding file of an environment of instances loads back (its parts found by their names).
    path = str(tmp_path / "instances.npz")
    adapter.save_binding_file(arm, path)
    assert adapter.load_binding_file(arm, path)["objects"] == [p.name for p in parts]
    # Topology is checked per instance.
    bpy.context.view_layer.objects.active = None
    beam.data = beam.data.copy()
    beam.data.vertices.add(1)
    with pytest.raises(RuntimeError, match="OverheadInstance/Beam"):
        bpy.ops.reldesc.bake(armature="Walker")


def test_a_curve_without_faces_is_said_and_left_out():
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    _rail(env, bevel=0.0)
    warnings = []
    jobs.BindJob(scene, arm, env.name, warn=warnings.append).run()
    assert any("without faces" in w and "Rail" in w for w in warnings)
    meta = adapter.stored_meta(arm)
    assert meta["no_surface"] == ["Rail"] and "Rail" not in meta["objects"]
    _report(arm)                                  # the bake reads the same parts


def test_influence_painted_on_an_instanced_mesh_counts_for_each_instance():
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    _instanced(env, [beam], "Overhead")
    group = beam.vertex_groups.new(name="reldesc_influence")
    group.add(range(len(beam.data.vertices)), 0.25, 'REPLACE')
    bpy.context.view_layer.update()
    parts, _ = adapter.environment_objects(env.name)
    weights, stray = adapter.mesh.influence(parts, "reldesc_influence")
    assert not stray
    counts = [r[3][0] for r in adapter.mesh.read_parts(None, parts, triangles=False)]
    k = [p.name for p in parts].index("OverheadInstance/Beam")
    first = sum(counts[:k])
    np.testing.assert_allclose(weights[first:first + counts[k]], 0.25)
    assert np.all(np.delete(weights, np.arange(first, first + counts[k])) == 1.0)


def test_a_rig_with_mixamo_names_under_a_scaled_parent_moved_with_its_set():
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    mixamo_with_fingers(arm)
    root = _root()
    root.scale = (2.0, 2.0, 2.0)                        # a set built at another scale
    _parent([arm, bridge, beam], root)
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    unedited = _bake(arm)
    root.location, root.rotation_euler = (3.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    bpy.context.view_layer.update()
    _same_keys(unedited, _bake(arm))


def _crates(env, points):
    """A geometry-nodes object instancing a cube on each of its vertices (instances not realised)."""
    me = bpy.data.meshes.new("CratePoints")
    me.from_pydata([tuple(p) for p in points], [], [])
    ob = bpy.data.objects.new("Crates", me)
    env.objects.link(ob)
    tree = bpy.data.node_groups.new("Crates", 'GeometryNodeTree')
    tree.interface.new_socket("Geometry", in_out='INPUT', socket_type='NodeSocketGeometry')
    tree.interface.new_socket("Geometry", in_out='OUTPUT', socket_type='NodeSocketGeometry')
    inp, out = tree.nodes.new("NodeGroupInput"), tree.nodes.new("NodeGroupOutput")
    cube, on_points = tree.nodes.new("GeometryNodeMeshCube"), tree.nodes.new("GeometryNodeInstanceOnPoints")
    tree.links.new(inp.outputs[0], on_points.inputs["Points"])
    tree.links.new(cube.outputs[0], on_points.inputs["Instance"])
    tree.links.new(on_points.outputs[0], out.inputs[0])
    ob.modifiers.new("Crates", 'NODES').node_group = tree
    return ob


def test_instances_made_by_geometry_nodes_are_parts_of_the_environment():
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    source = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    crates = _crates(env, [(0.5, 1.2, 0.5), (1.5, 1.2, 0.5)])
    bpy.context.view_layer.update()
    warnings = []
    jobs.BindJob(scene, arm, env.name, warn=warnings.append).run()
    meta = adapter.stored_meta(arm)
    assert meta["objects"] == ["Beam", "Bridge", "Crates/Crates #1", "Crates/Crates #2"]
    assert meta["no_surface"] == ["Crates"]                  # its own mesh is points only: said, left out
    assert meta["vertex_counts"][2:] == [8, 8]
    _bake(arm)
    assert np.abs(heads_over_frames(scene, arm, range(1, FRAMES + 1)) - source).max() < 1e-5
    # A crate moved by its points is an edit the bake reads; one crate fewer is a change of parts.
    crates.data.vertices[0].co.x += 0.3
    crates.data.update()
    report = _report(arm)
    assert report["placement"]["moved_from_environment"] < 1e-5
    crates.data.vertices.add(1)
    crates.data.update()
    with pytest.raises(RuntimeError, match="changed since bind"):
        bpy.ops.reldesc.bake(armature="Walker")


def test_a_set_linked_from_another_file_through_nested_instances(tmp_path):
    # The library: 'Outer' holds the bridge and an Empty instancing 'Inner' (the beam). The shot
    # links 'Outer' and instances it from the environment: two levels of instances, linked data.
    scene, arm, env, bridge, beam = demo.build_scene(frames=FRAMES, deck_cells=(40, 8))
    source = heads_over_frames(scene, arm, range(1, FRAMES + 1))
    inner = bpy.data.collections.new("Inner")
    outer = bpy.data.collections.new("Outer")
    for ob in (bridge, beam):
        for c in list(ob.users_collection):
            c.objects.unlink(ob)
    inner.objects.link(beam)
    outer.objects.link(bridge)
    nested = bpy.data.objects.new("BeamInstance", None)
    nested.instance_type, nested.instance_collection = 'COLLECTION', inner
    outer.objects.link(nested)
    outer.use_fake_user = True
    library = str(tmp_path / "set.blend")
    bpy.data.libraries.write(library, {outer, inner, bridge, beam, nested, bridge.data, beam.data})
    for ob in (bridge, beam, nested):
        bpy.data.objects.remove(ob)
    bpy.data.collections.remove(outer)
    bpy.data.collections.remove(inner)
    with bpy.data.libraries.load(library, link=True) as (src, dst):
        dst.collections = ["Outer"]
    linked = dst.collections[0]
    assert linked.library is not None
    instancer = bpy.data.objects.new("Set", None)
    instancer.instance_type, instancer.instance_collection = 'COLLECTION', linked
    env.objects.link(instancer)
    bpy.context.view_layer.update()
    parts, _ = adapter.environment_objects(env.name)
    assert [p.name for p in parts] == ["Set/Beam", "Set/Bridge"]
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    _bake(arm)
    assert np.abs(heads_over_frames(scene, arm, range(1, FRAMES + 1)) - source).max() < 1e-5
    # The whole linked set moved with the character: nothing changes.
    root = _root()
    _parent([arm, instancer], root)
    unedited = fcurve_snapshot(arm.animation_data.action)
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    _same_keys(unedited, _bake(arm))


def test_rebind_here_binds_a_pair_again_with_its_partners():
    scene, lead, partner, env = demo.build_pair_scene(frames=FRAMES)
    assert bpy.ops.reldesc.bind(armature="Lead", environment=env.name, partners="Partner") == {'FINISHED'}
    _bake(lead)                                           # both play their adapted actions now
    lead.location.x -= 0.3
    bpy.context.view_layer.update()
    assert "moved 0.3 m" in placement_note(adapter.stored_meta(lead), lead)
    assert bpy.ops.reldesc.rebind_here(armature="Lead") == {'FINISHED'}
    for ob, source in ((lead, "HoldLead"), (partner, "HoldPartner")):
        assert ob.animation_data.action.name == source   # the sources bound again
        assert adapter.stored_meta(ob)["action"] == source
    assert adapter.stored_meta(lead)["partners"] == ["Partner"]
    assert adapter.stored_meta(partner)["partners"] == ["Lead"]
    assert placement_note(adapter.stored_meta(lead), lead) == ""
    assert "HoldLead.adapted" in bpy.data.actions            # the adapted actions stay in the file


def test_rebind_here_without_its_environment_changes_nothing(scene):
    scene, arm, env, bridge, beam = scene
    assert bpy.ops.reldesc.bind(armature="Walker", environment=env.name) == {'FINISHED'}
    _bake(arm)
    stored = adapter.load_stored(arm)
    arm.location.x += 1.0
    for ob in list(env.all_objects):
        env.objects.unlink(ob)
    with pytest.raises(RuntimeError, match="holds no geometry"):
        bpy.ops.reldesc.rebind_here(armature="Walker")
    assert arm.animation_data.action.name == "Walk.adapted"      # still the adapted action
    assert adapter.load_stored(arm)[:2] == stored[:2]           # and the binding as it was


def test_what_places_an_armature_over_time_is_its_transform_not_its_rigs_drivers(scene):
    # A production rig drives hundreds of pose-bone properties: reading its placement frame by
    # frame for those cost a Rigify bake 0.24 s a 120 frames. Only its own transform, its
    # constraints and its parents place it.
    from blender_reldesc.adapter.placement import object_matrices, placement_animated
    scene, arm, env, bridge, beam = scene
    arm["switch"] = 0.0
    arm.keyframe_insert('["switch"]', frame=1)
    fc = arm.pose.bones["Head"].driver_add("rotation_quaternion", 1)
    fc.driver.expression = "0.0"
    assert not placement_animated(arm)
    np.testing.assert_array_equal(object_matrices(scene, arm, [1, 2, 3]), np.broadcast_to(np.array(arm.matrix_world),
                                                                                          (3, 4, 4)))
    arm.driver_add("location", 2).driver.expression = "frame / 100"
    assert placement_animated(arm)
    arm.driver_remove("location", 2)
    assert not placement_animated(arm)
    root = _root()
    arm.parent = root
    root.keyframe_insert("location", frame=1)
    root.location.x = 1.0
    root.keyframe_insert("location", frame=10)
    assert placement_animated(arm)
    m = object_matrices(scene, arm, [1, 10])
    assert m[1, 0, 3] - m[0, 0, 3] == pytest.approx(1.0)
