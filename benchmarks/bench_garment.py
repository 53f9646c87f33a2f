"""A skirt carried on a walk whose legs got 15 % longer (seed 000 §9, garment transfer): the
time per frame against the garment's size, the edge-length change and the body penetration,
against the plain adapt of the walk (the baseline, same run).

Run with ``.venv/bin/python benchmarks/bench_garment.py [--frames 120]``.

``--conventions`` (the bpy wheel): issue 37's cape and long coat on generated rigs of five
conventions, parented with automatic weights, carried onto longer legs and over a raised floor
through the operators; and the cape bound with Scale With Body.

``--real`` (the bpy wheel): issue 37's real-rig case instead, through the operators. The real
in-place capture (``../shared/data/real/rigify_inplace_24fps.bvh``) imported as Blender imports a
BVH, a floor under its lowest foot, a skirt made around its rest pose (``synthetic.skirt`` with
the Rigify names) and parented with *automatic weights*, ``reldesc.bind`` and
``reldesc.bind_garment``, both shins 15 % longer in edit mode, ``reldesc.bake``; the played
skirt's edges against the source's on every frame.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from blender_reldesc.core import TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.characters import _bones, closest_on_segments  # noqa: E402
from blender_reldesc.core.garment import bind_garment, carry_garment, mesh_edges  # noqa: E402


def penetration(garment, motion, bones, radii):
    a, b = motion[:, bones[:, 0]], motion[:, bones[:, 1]]
    worst = 0.0
    for f in range(len(motion)):
        foot, _ = closest_on_segments(garment[f][:, None], a[f][None], b[f][None])
        gap = np.linalg.norm(garment[f][:, None] - foot, axis=-1) - radii[bones[:, 1]][None]
        worst = max(worst, float(-gap.min()))
    return worst


REAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "rigify_inplace_24fps.bvh"


def real_rig(rings, around, length):
    """One row of the ``--real`` table: a skirt of ``rings`` x ``around`` vertices, ``length``
    body heights long (from 5 cm over the hips joint), on the real in-place capture."""
    import tempfile
    import bpy
    from blender_reldesc import adapter, demo
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.import_anim.bvh(filepath=str(REAL), frame_start=1, update_scene_fps=True, update_scene_duration=True)
    arm = bpy.context.object
    arm.name = "Walker"
    M = np.array(arm.matrix_world)

    def world(p):
        return M[:3, :3] @ np.asarray(p, float) + M[:3, 3]

    bones = arm.data.bones
    roles = {"Hips": "pelvis", "LeftUpLeg": "thigh.L", "RightUpLeg": "thigh.R",
             "LeftLeg": "shin.L", "RightLeg": "shin.R"}
    rest = np.array([[world(bones[n].head_local) for n in roles.values()]])
    H = float(np.ptp([world(b.head_local)[2] for b in bones] + [world(b.tail_local)[2] for b in bones]))
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    low = []
    for f in frames[::4]:
        scene.frame_set(f)
        for n in ("foot.L", "foot.R"):
            pb = arm.pose.bones[n]
            low += [world(pb.head)[2], world(pb.tail)[2]]
    verts, tris = S.skirt(None, rest, rings=rings, around=around, waist=0.1 * H, hem=0.2 * H, length=length * H,
                          joints={k: i for i, k in enumerate(roles)})
    env = bpy.data.collections.new("Environment")
    scene.collection.children.link(env)
    lo, hi = verts[0].min(axis=0) - 3.0, verts[0].max(axis=0) + 3.0
    demo.scenes.mesh_object("Floor", *S.grid(hi[0] - lo[0], hi[1] - lo[1], 20, 20, origin=(lo[0], lo[1]),
                                             z=min(low) - 0.01), env)
    skirt = demo.scenes.mesh_object("Skirt", verts[0], tris, scene.collection)
    bpy.ops.object.select_all(action='DESELECT')
    skirt.select_set(True)
    arm.select_set(True)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.parent_set(type='ARMATURE_AUTO')
    groups = len(skirt.vertex_groups)
    scene.frame_set(frames[0])
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    assert bpy.ops.reldesc.bind_garment(armature="Walker", garment="Skirt") == {'FINISHED'}

    def played():                                       # the skirt as Blender evaluates it, every frame
        return adapter.read_environment_frames(scene, [skirt], frames)[0]

    source = played()
    demo.lengthen_legs(arm, 1.15, bones=("shin.L", "shin.R"))       # the feet moved with them
    bpy.ops.wm.save_as_mainfile(filepath=str(pathlib.Path(tempfile.mkdtemp()) / "skirt.blend"))
    t0 = time.perf_counter()
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    t_bake = time.perf_counter() - t0
    carried = played()
    e = mesh_edges(tris)
    then = np.linalg.norm(source[:, e[:, 1]] - source[:, e[:, 0]], axis=-1)
    change = np.abs(np.linalg.norm(carried[:, e[:, 1]] - carried[:, e[:, 0]], axis=-1) / then - 1.0)
    rise = 100 * float(carried[..., 2].mean() - source[..., 2].mean())
    return (f"| {len(verts[0])} | {length:.2f} | {groups} | {len(frames)} | {100 * change.max():.1f} "
            f"| {100 * np.percentile(change, 99):.2f} | {100 * change.mean():.3f} | {rise:.1f} | {t_bake:.1f} |")


def convention_rows(frames):
    """``--conventions``: a cape and a long coat (``synthetic.cape`` / ``coat``) made at the rest
    pose of a generated rig of each convention, parented with automatic weights, bound, carried
    onto legs 15 % longer (thighs and shins) and over a floor raised 12 cm on the walk's way, through
    the operators; and the cape bound with Scale With Body on the longer legs."""
    import bpy
    from blender_reldesc import adapter, demo
    for convention in ("bvh", "mixamo", "rigify", "ue", "arbitrary"):
        for garment, scale in (("cape", False), ("coat", False), ("cape", True)):
            scene, arm, env, ob, name = demo.build_convention_garment_scene(convention, garment, frames=frames)
            groups = len(ob.vertex_groups)
            span = list(range(1, frames + 1))
            assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
            assert bpy.ops.reldesc.bind_garment(armature="Walker", garment=ob.name, scale_with_body=scale) \
                == {'FINISHED'}

            def played():
                return adapter.read_environment_frames(scene, [ob], span)[0]
            source = played()
            e = mesh_edges(np.array([list(p.vertices) for p in ob.data.polygons]))
            then = np.linalg.norm(source[:, e[:, 1]] - source[:, e[:, 0]], axis=-1)
            legs = (name("thigh.L"), name("shin.L"), name("thigh.R"), name("shin.R"))
            edits = (("legs 15 % longer", lambda: demo.lengthen_legs(arm, 1.15, bones=legs)),)
            if not scale:
                edits += (("floor raised 12 cm", lambda: (demo.lengthen_legs(arm, 1.0 / 1.15, bones=legs),
                                                          demo.raise_floor(bpy.data.objects["Floor"], (0.6, 0.1),
                                                                           0.12, 0.5))),)
            for label, edit in edits:
                edit()
                t0 = time.perf_counter()
                assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
                dt = time.perf_counter() - t0
                carried = played()
                change = np.abs(np.linalg.norm(carried[:, e[:, 1]] - carried[:, e[:, 0]], axis=-1) / then - 1.0)
                length = float(np.ptp(carried[..., 2], axis=1).mean() - np.ptp(source[..., 2], axis=1).mean())
                print(f"| {convention} | {garment}{' (scale with body)' if scale else ''} | {len(ob.data.vertices)} "
                      f"| {groups} | {label} | {100 * change.max():.1f} | {100 * np.percentile(change, 99):.2f} "
                      f"| {100 * change.mean():.3f} | {100 * length:+.1f} | {dt:.1f} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--real", action="store_true", help="the real-rig case through the operators (the bpy wheel)")
    ap.add_argument("--conventions", action="store_true",
                    help="a cape and a long coat on rigs of five conventions, through the operators (the bpy wheel)")
    args = ap.parse_args(argv)
    if args.conventions:
        import blender_reldesc
        blender_reldesc.register()
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
              f"{args.frames} frames of the generated walk on each rig, garments parented with automatic weights")
        print()
        print("| rig | garment | vertices | vertex groups | edit | edge-length change max (%) | 99th percentile (%) "
              "| mean (%) | garment height change (cm) | bake s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        convention_rows(args.frames)
        sys.stdout.flush()
        os._exit(0)
    if args.real:
        if not REAL.exists():
            sys.exit(f"needs {REAL}")
        import blender_reldesc
        blender_reldesc.register()
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
              f"{REAL.name}, both shins 15 % longer, skirt parented with automatic weights")
        print()
        print("| skirt vertices | length, body heights | vertex groups | frames | edge-length change max (%) "
              "| 99th percentile (%) | mean (%) | rise, cm | bake s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for rings, around, length in ((12, 40, 0.3), (12, 40, 0.45), (30, 64, 0.35)):
            print(real_rig(rings, around, length), flush=True)
        return
    sk, motion = S.walk(args.frames)
    mesh = TriMesh(*S.grid(30.0, 4.0, 60, 8, origin=(-5.0, -2.0)))
    binding = bind(sk, motion, mesh)
    lengths = sk.bone_lengths(motion).mean(axis=0)
    legs = {n: 1.15 * lengths[sk.index(n)] for n in ("LeftLeg", "LeftFoot", "RightLeg", "RightFoot")}
    t0 = time.perf_counter()
    longer = adapt(binding, mesh, bone_lengths=legs).positions
    t_adapt = time.perf_counter() - t0
    bones = _bones(sk, motion)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.frames} frames of the generated walk, legs 15 % longer; adapt of the walk {t_adapt:.2f} s "
          "(baseline)")
    print()
    print("| skirt vertices | bind s | carry s | frames/s | edge-length change max / mean (%) "
          "| deepest into the body: source / carried (cm) | vertex by vertex (controls=0): carry s, edges max (%) |")
    print("|---|---|---|---|---|---|---|")
    for rings, around in ((8, 24), (40, 60), (100, 100)):
        verts, tris = S.skirt(sk, motion, rings=rings, around=around)
        t0 = time.perf_counter()
        g = bind_garment(sk, motion, verts, tris)
        t_bind = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = carry_garment(g, longer)
        dt = time.perf_counter() - t0
        e = mesh_edges(tris)
        then = np.linalg.norm(verts[:, e[:, 1]] - verts[:, e[:, 0]], axis=-1)

        def change_of(x):
            return np.abs(np.linalg.norm(x[:, e[:, 1]] - x[:, e[:, 0]], axis=-1) / then - 1.0)

        change = change_of(out)
        if g.embedding is None:
            brute = "same"
        else:                                    # the baseline: every vertex by descriptors
            t0 = time.perf_counter()
            every = carry_garment(bind_garment(sk, motion, verts, tris, controls=0), longer)
            brute = f"{time.perf_counter() - t0:.2f}, {100 * change_of(every).max():.1f}"
        print(f"| {verts.shape[1]} | {t_bind:.2f} | {dt:.2f} | {args.frames / dt:.0f} | "
              f"{100 * change.max():.1f} / {100 * change.mean():.2f} | "
              f"{100 * penetration(verts, motion, bones, g.radii):.1f} / "
              f"{100 * penetration(out, longer, bones, g.radii):.1f} | {brute} |")


if __name__ == "__main__":
    main()
