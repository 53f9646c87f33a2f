"""Garments through the real operators (reldesc.bind_garment, bake): a skirt skinned to the
hips carried onto a walk whose legs got longer, as a PC2 point cache and a Mesh Cache modifier."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import adapter, demo  # noqa: E402
from blender_reldesc.core.garment import mesh_edges, read_pc2  # noqa: E402
from blender_helpers import evaluated_vertices, fcurve_snapshot  # noqa: E402


def test_a_skirt_is_carried_onto_longer_legs(tmp_path):
    scene, arm, skirt, env = demo.build_garment_scene(frames=30)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "skirt.blend"))
    before = skirt.data.vertices[0].co.copy()
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    assert adapter.storage.garment_names(arm) == ["Skirt"]
    source = [evaluated_vertices(skirt, scene, f) for f in (1, 15, 30)]
    demo.lengthen_legs(arm, 1.15)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    mod = skirt.modifiers[adapter.pointcache.MODIFIER]
    assert mod.type == 'MESH_CACHE' and mod.cache_format == 'PC2'
    cached, start, _ = read_pc2(bpy.path.abspath(mod.filepath))
    assert start == 1.0 and cached.shape[0] == 30
    edges = mesh_edges(np.array([p.vertices[:] for p in skirt.data.polygons if len(p.vertices) == 3]
                                + [t for p in skirt.data.polygons if len(p.vertices) == 4
                                   for t in ((p.vertices[0], p.vertices[1], p.vertices[2]),
                                             (p.vertices[0], p.vertices[2], p.vertices[3]))]))
    for k, f in enumerate((1, 15, 30)):
        now = evaluated_vertices(skirt, scene, f)
        # The modifier plays the carried skirt: it rose with the hips on the longer legs, its
        # edges within 5 % of their source lengths.
        assert now[:, 2].mean() - source[k][:, 2].mean() > 0.03
        then_len = np.linalg.norm(source[k][edges[:, 1]] - source[k][edges[:, 0]], axis=1)
        now_len = np.linalg.norm(now[edges[:, 1]] - now[edges[:, 0]], axis=1)
        assert np.abs(now_len / then_len - 1.0).max() <= 0.05
    # The garment's own mesh is untouched.
    assert skirt.data.vertices[0].co == before


def test_bad_garments_say_why():
    scene, arm, skirt, env = demo.build_garment_scene(frames=10)
    with pytest.raises(RuntimeError, match="not bound"):
        bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt")
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    for name, message in (("Nobody", "no object named"), ("Walker", "not a mesh")):
        with pytest.raises(RuntimeError, match=message):
            bpy.ops.reldesc.bind_garment(armature="Walker", garment=name)
    skirt.location.z += 5.0
    with pytest.raises(RuntimeError, match="near it"):
        bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt")
    assert adapter.storage.garment_names(arm) == []


def test_command_line_bind_with_a_garment(tmp_path):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = tmp_path / "skirt.blend"
    code = ("import bpy; from blender_reldesc import demo; demo.build_garment_scene(frames=12); "
            f"bpy.ops.wm.save_as_mainfile(filepath={str(path)!r}); import os; os._exit(0)")
    env = dict(os.environ, PYTHONPATH=root)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env=env, capture_output=True, timeout=300)
    cli = [sys.executable, "-m", "blender_reldesc"]
    bad = subprocess.run(cli + ["bind", str(path), "--armature", "Walker"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    assert bad.returncode == 1 and "--environment" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    done = subprocess.run(cli + ["bind", str(path), "--armature", "Walker", "--environment", "Environment",
                                 "--garment", "Skirt"], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "'Skirt' (" in done.stdout
    done = subprocess.run(cli + ["bake", str(path), "--armature", "Walker"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "Skirt.reldesc.pc2").exists()
    # The operator's own command: bind-garment (the same garment again: recorded once).
    again = subprocess.run(cli + ["bind-garment", str(path), "--armature", "Walker", "--garment", "Skirt"], cwd=root,
                           env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "'Skirt' (" in again.stdout, again.stderr
    bad = subprocess.run(cli + ["bind-garment", str(path), "--armature", "Walker", "--garment", "Walker"], cwd=root,
                         env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and "not a mesh" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_garment_whose_object_moves_plays_back_where_it_was_carried(tmp_path):
    # The skirt's object is parented to an Empty that moves 0.5 m over the clip (its world
    # matrix changes every frame): the point cache, in the object's space, must undo each
    # frame's matrix. Unedited, the carried skirt is the source one, so the skirt played by the
    # cache is where it was with the modifier off.
    scene, arm, skirt, env = demo.build_garment_scene(frames=20)
    mover = bpy.data.objects.new("Mover", None)
    scene.collection.objects.link(mover)
    for frame, x in ((1, 0.0), (20, 0.5)):
        mover.location.x = x
        mover.keyframe_insert("location", index=0, frame=frame)
    skirt.parent = mover
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "moving.blend"))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    source = bpy.data.actions["Walk"]
    from blender_reldesc import adapter
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    mod = skirt.modifiers[adapter.pointcache.MODIFIER]
    played = {f: evaluated_vertices(skirt, scene, f) for f in (1, 10, 20)}
    mod.show_viewport = False
    adapter.assign(arm, source, adapter.armature_slot(arm, source))
    for f, now in played.items():
        then = evaluated_vertices(skirt, scene, f)
        assert np.abs(now - then).max() < 1e-4, f


def test_a_rebake_reuses_the_garments_binding_until_the_garment_changes(tmp_path, monkeypatch):
    # Binding a fine garment is most of a bake's garment time: kept with the armature's binding
    # while the garment plays the same; an edited garment is bound again, never carried stale.
    import blender_reldesc.core.garment as core_garment
    calls = []
    real = core_garment.bind_garment
    monkeypatch.setattr(core_garment, "bind_garment", lambda *a, **k: calls.append(1) or real(*a, **k))
    scene, arm, skirt, env = demo.build_garment_scene(frames=12)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "skirt.blend"))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    demo.lengthen_legs(arm, 1.15)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    path = bpy.path.abspath(skirt.modifiers[adapter.pointcache.MODIFIER].filepath)
    first = read_pc2(path)[0]
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    np.testing.assert_array_equal(read_pc2(path)[0], first)
    assert len(calls) == 1                          # bound once: at Bind Garment
    low = [v for v in skirt.data.vertices if v.co.z < np.median([u.co.z for u in skirt.data.vertices])]
    for v in low:
        v.co.z -= 0.02                              # the hem let down 2 cm
    skirt.data.update()
    # Skinned to the lengthened legs, the edited skirt has no source to read (its kept one is the
    # old skirt's, the one playing now is stretched by the edited bones): the bake says so.
    with pytest.raises(RuntimeError, match="the garment itself changed since Bind Garment"):
        bpy.ops.reldesc.bake(armature="Walker")
    np.testing.assert_array_equal(read_pc2(path)[0], first)           # nothing written
    demo.lengthen_legs(arm, 1.0 / 1.15)                               # the bones as bound
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    assert len(calls) == 2
    lowered = read_pc2(path)[0]
    moved = np.abs(lowered - first).max(axis=(0, 2))
    assert moved.max() > 0.015                      # the let-down hem is carried, not the old one


def test_a_garment_that_cannot_be_carried_fails_the_bake_before_anything_is_written(tmp_path, monkeypatch):
    # The garment is carried in the compute now (it was carried while writing, after the adapted
    # action had been written): a carry that fails leaves the file as it was, the previous bake's
    # action, its keys and the garment's point cache untouched.
    import blender_reldesc.core.garment as core_garment
    from blender_reldesc.core.errors import InputError
    scene, arm, skirt, env = demo.build_garment_scene(frames=12)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "skirt.blend"))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    adapted = bpy.data.actions["Walk.adapted"]
    keys = [tuple(kp.co) for fc in adapter._fcurves(adapted) for kp in fc.keyframe_points]
    path = bpy.path.abspath(skirt.modifiers[adapter.pointcache.MODIFIER].filepath)
    cache = read_pc2(path)[0]
    actions = sorted(a.name for a in bpy.data.actions)

    def refuse(*a, **k):
        raise InputError("the garment tore")

    monkeypatch.setattr(core_garment, "carry_garment", refuse)
    demo.lengthen_legs(arm, 1.15)
    with pytest.raises(RuntimeError, match="garment 'Skirt': the garment tore"):
        bpy.ops.reldesc.bake(armature="Walker")
    assert sorted(a.name for a in bpy.data.actions) == actions
    assert [tuple(kp.co) for fc in adapter._fcurves(bpy.data.actions["Walk.adapted"])
            for kp in fc.keyframe_points] == keys
    np.testing.assert_array_equal(read_pc2(path)[0], cache)
    assert arm.animation_data.action.name == "Walk.adapted"


def _edges_change(source, carried, ob):
    from blender_reldesc.core.garment import mesh_edges
    e = mesh_edges(np.array([list(p.vertices) for p in ob.data.polygons]))
    then = np.linalg.norm(source[:, e[:, 1]] - source[:, e[:, 0]], axis=-1)
    return np.abs(np.linalg.norm(carried[:, e[:, 1]] - carried[:, e[:, 0]], axis=-1) / then - 1.0)


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
def test_a_cape_and_a_long_coat_hold_their_shape_on_a_rig_of_every_convention(convention):
    # A cape and a sleeveless long coat made at the rest pose of a generated rig of each
    # convention and parented with Blender's automatic weights, carried onto legs 15 % longer
    # (thighs and shins) and then over a floor raised 12 cm where the walk crosses it: no edge
    # beyond 10 % of its source length on any frame (8.1 % the worst measured: the cape on the
    # UE rig), the garments' own meshes untouched.
    for garment in ("cape", "coat"):
        scene, arm, env, ob, name = demo.build_convention_garment_scene(convention, garment, frames=30)
        frames = list(range(1, 31))
        rest = np.array([v.co[:] for v in ob.data.vertices])
        assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
        assert bpy.ops.reldesc.bind_garment(armature="Walker", garment=ob.name) == {'FINISHED'}

        def played():
            return adapter.read_environment_frames(scene, [ob], frames)[0]
        source = played()
        legs = (name("thigh.L"), name("shin.L"), name("thigh.R"), name("shin.R"))
        demo.lengthen_legs(arm, 1.15, bones=legs)
        assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
        longer = played()
        assert _edges_change(source, longer, ob).max() < 0.10, (garment, "legs")
        assert longer[..., 2].mean() - source[..., 2].mean() > 0.05           # it rose with the hips
        demo.lengthen_legs(arm, 1.0 / 1.15, bones=legs)
        demo.raise_floor(bpy.data.objects["Floor"], (0.6, 0.1), 0.12, 0.5)
        assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
        assert _edges_change(source, played(), ob).max() < 0.10, (garment, "floor")
        np.testing.assert_array_equal(np.array([v.co[:] for v in ob.data.vertices]), rest)


def test_a_garment_bound_without_a_kept_source_is_refused_on_lengthened_bones_and_nothing_is_lost(tmp_path):
    # A file from before the kept source (its record gone), the legs lengthened since Bind: the
    # skinned skirt playing now is stretched by them, so the bake refuses, saying what to do; the
    # earlier bake's action and point cache, and the source action, are as they were.
    scene, arm, skirt, env = demo.build_garment_scene(frames=12)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "old.blend"))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    path = bpy.path.abspath(skirt.modifiers[adapter.pointcache.MODIFIER].filepath)
    cache = read_pc2(path)[0]
    actions = {n: fcurve_snapshot(bpy.data.actions[n]) for n in ("Walk", "Walk.adapted")}
    del arm.data[adapter.storage.GARMENT_RECORDS_KEY]
    demo.lengthen_legs(arm, 1.15)
    with pytest.raises(RuntimeError, match="source as bound was not kept"):
        bpy.ops.reldesc.bake(armature="Walker")
    np.testing.assert_array_equal(read_pc2(path)[0], cache)
    for name, snap in actions.items():
        now = fcurve_snapshot(bpy.data.actions[name])
        assert snap.keys() == now.keys() and all(np.array_equal(snap[k], now[k]) for k in snap)
    # Bound again with the bones as bound, the garment is carried.
    demo.lengthen_legs(arm, 1.0 / 1.15)
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}
    demo.lengthen_legs(arm, 1.15)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
