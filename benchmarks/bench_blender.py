"""Blender-level benchmark: end-to-end bake and live preview, against nla.bake.

Run with ``.venv/bin/python benchmarks/bench_blender.py`` (the bpy wheel).
Scenes: the generated humanoid walking 1000 frames over a 10k-triangle
terrain, and the real walk clip (imported with Blender's BVH importer) when
``shared/data/real`` is present. The baseline, measured in the same run, is
Blender's own ``nla.bake`` with visual keying of the same clip on the same rig.
"""

from __future__ import annotations

import os
import pathlib
import platform
import statistics
import sys
import time

import bpy
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import blender_reldesc  # noqa: E402
from blender_reldesc import demo, jobs, live  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402

REAL = ROOT.parent / "shared" / "data" / "real" / "walk_cm_30fps.bvh"


def sculpt(ob):
    me = ob.data
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] += S.hills(0.15, 3.0)(co[:, 0], co[:, 1])
    me.vertices.foreach_set("co", co.ravel())
    me.update()


def synthetic_scene(frames):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    coll = bpy.data.collections.new("Environment")
    scene.collection.children.link(coll)
    arm = demo.build_armature()
    demo.animate_walk(arm, frames)
    x = S.walk(frames)[1][:, 0, 0]
    verts, tris = S.grid(x.max() - x.min() + 6.0, 4.0, 125, 40, origin=(x.min() - 3.0, -2.0))
    ground = demo.mesh_object("Terrain", verts, tris, coll)
    return scene, arm, coll, ground


def real_scene():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.import_anim.bvh(filepath=str(REAL), global_scale=0.01, update_scene_fps=True,
                            update_scene_duration=True)
    arm = bpy.context.active_object
    coll = bpy.data.collections.new("Environment")
    scene.collection.children.link(coll)
    scene.frame_set(scene.frame_start)
    lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
    for f in range(scene.frame_start, scene.frame_end + 1, 50):
        scene.frame_set(f)
        for pb in arm.pose.bones:
            p = arm.matrix_world @ pb.head
            lo, hi = np.minimum(lo, p[:2]), np.maximum(hi, p[:2])
    verts, tris = S.grid(*(hi - lo + 2.0), 71, 71, origin=tuple(lo - 1.0))
    ground = demo.mesh_object("Terrain", verts, tris, coll)
    return scene, arm, coll, ground


def nla_bake_seconds(scene, arm, frames):
    bpy.context.view_layer.objects.active = arm
    arm.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    bpy.ops.pose.select_all(action='SELECT')
    t0 = time.perf_counter()
    bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=False, visual_keying=True,
                     bake_types={'POSE'}, use_current_action=False)
    t = time.perf_counter() - t0
    bpy.ops.object.mode_set(mode='OBJECT')
    return t


def live_seconds(scene, arm, frames, count=120):
    scene.reldesc.armature = arm
    scene.reldesc.live = True
    seq = []
    start = scene.frame_start
    for f in range(start, start + min(count, frames)):
        scene.frame_set(f)
        seq.append(live.last_seconds)
    rng = np.random.default_rng(0)
    jumps = []
    for f in rng.integers(start + 10, start + frames - 1, 20):
        live.clear()          # a jump after an edit: no cached predecessor
        scene.frame_set(int(f))
        jumps.append(live.last_seconds)
    scene.reldesc.live = False
    return statistics.median(seq[1:]), max(seq[1:]), statistics.median(jumps)


KEY_ROWS = []
KEY_OPTIONS = [("every frame (default)", {}), ("--clean 0.002", dict(clean=0.002)),
               ("--clean 0.01", dict(clean=0.01)), ("--clean 0.005 --interpolation bezier",
                                                    dict(clean=0.005, interpolation="BEZIER")),
               ("--step 2", dict(step=2))]


def key_rows(label, scene, arm):
    """Keys each bake option writes for the same adapted motion, and what they lose (measured)."""
    job = jobs.BakeJob(scene, arm, warn=lambda m: None)
    job.read()
    job.compute(lambda *a: True)
    rows = []
    for name, opts in KEY_OPTIONS:
        job.options = jobs.BakeOptions(**opts).checked(job.bound.frames)
        t0 = time.perf_counter()
        plan = job._plan_keys()
        rows.append((label, name, plan["per_frame"], plan["keys"], plan["keys"] / plan["per_frame"],
                     1000 * plan["deviation"], time.perf_counter() - t0))
    return rows


def run(label, scene, arm, coll, ground):
    frames = scene.frame_end - scene.frame_start + 1
    scene.reldesc.environment = coll
    t0 = time.perf_counter()
    bind = jobs.bind_job(scene, arm, coll.name, progress=lambda *a: True)
    t_bind = time.perf_counter() - t0
    sculpt(ground)
    rep = jobs.bake_job(scene, arm, progress=lambda *a: True)
    KEY_ROWS.extend(key_rows(label, scene, arm))
    total = rep["read_seconds"] + rep["adapt_seconds"] + rep["write_seconds"]
    live_seq, live_max, live_jump = live_seconds(scene, arm, frames)
    source = bpy.data.actions[bind["action"]]
    from blender_reldesc import adapter
    adapter.assign_action(arm, source)
    t_nla = nla_bake_seconds(scene, arm, frames)
    return (label, frames, len(arm.data.bones), bind["descriptors"], bind["motion_read"], frames / t_bind,
            frames / total, rep["read_seconds"], rep["adapt_seconds"], rep["write_seconds"],
            frames / t_nla, t_nla / total, 1000 * live_seq, 1000 * live_max, 1000 * live_jump,
            100 * rep["bone_length_error_mean"])


def main():
    blender_reldesc.register()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Blender {bpy.app.version_string} (bpy wheel), "
          f"numpy {np.__version__}")
    print()
    print("| scene | frames | bones | descriptors | source read | bind fps | bake fps (read+adapt+write) "
          "| read s | adapt s | write s | nla.bake fps | bake speed-up vs nla.bake | live ms/frame (play, median) "
          "| live ms (play, max) | live ms (jump) | bone err mean % |")
    print("|" + "---|" * 16)
    rows = [run("synthetic walk, 10k-tri terrain", *synthetic_scene(1000))]
    if REAL.exists():
        rows.append(run(f"real walk ({REAL.name})", *real_scene()))
    for r in rows:
        print("| " + " | ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in r) + " |")
    print()
    print("| scene | keys | keys per frame | keys written | ratio | max joint deviation (mm, measured) | planning s |")
    print("|" + "---|" * 7)
    for r in KEY_ROWS:
        print("| " + " | ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in r) + " |")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
