"""Blender-level benchmark: end-to-end bake and live preview, against nla.bake.

Run with ``.venv/bin/python benchmarks/bench_blender.py`` (the bpy wheel); ``--pair``: only the
live preview of a bound pair against one character's; ``--walk``: only the viewport's Walk (the
``reldesc.walk`` job) of crowds of 10 and 100 characters x about 1000 frames, phase by phase (the
walk itself, the keys' rotations, writing the actions), medians of 3.
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
from blender_reldesc import jobs  # noqa: E402
from blender_reldesc.viewport import live  # noqa: E402

from blender_scenes import REAL, build_ik_rig, real_scene, sculpt, synthetic_scene  # noqa: E402


def _action_fcurves(arm):
    return blender_reldesc.adapter.actions._fcurves(arm.animation_data.action)


def nla_bake_seconds(scene, arm, frames, names=None):
    """Seconds of Blender's Bake Action (visual keying, pose) of every bone, or of bones ``names``."""
    bpy.context.view_layer.objects.active = arm
    arm.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    bpy.ops.pose.select_all(action='SELECT')
    if names is not None:
        for pb in arm.pose.bones:              # selection is the pose bone's from Blender 5.0, the bone's before
            (pb if hasattr(pb, "select") else pb.bone).select = pb.name in names
    # The operator takes its bones from the context's selected_pose_bones, which the wheel (no
    # window) leaves empty: without the override it plays every frame and keys nothing.
    selected = [pb for pb in arm.pose.bones if names is None or pb.name in names]
    t0 = time.perf_counter()
    with bpy.context.temp_override(selected_pose_bones=selected, active_object=arm, object=arm):
        bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=names is not None, visual_keying=True,
                         bake_types={'POSE'}, use_current_action=False)
    t = time.perf_counter() - t0
    keyed = {fc.data_path.split('"')[1] for fc in _action_fcurves(arm) if fc.data_path.startswith("pose.bones")}
    if len(keyed) != len(selected):
        raise RuntimeError(f"Bake Action keyed {len(keyed)} bones of the {len(selected)} asked for")
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
        job.plan_keys()
        plan = job.plan
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


def bump(ob, centre, height=0.25, radius=0.7):
    me = ob.data
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    r2 = ((co[:, :2] - np.asarray(centre)[None]) ** 2).sum(axis=1)
    co[:, 2] += height * np.exp(-r2 / radius ** 2)
    me.vertices.foreach_set("co", co.ravel())
    me.update()


def trim_action(arm, frames, start=1):
    """Keep the first ``frames`` keys of every curve of the armature's action (a shorter clip)."""
    from blender_reldesc import adapter
    for fc in adapter._fcurves(adapter.source_action(arm)):
        keys = adapter._keys_of(fc)
        keep = keys["co"][:, 0] < start + frames - 0.5
        fc.keyframe_points.clear()
        adapter._fill(fc, {k: v[keep] for k, v in keys.items()})


def ik_rig_comparison(frames=600, repeat=5):
    """End-to-end bake (read + adapt + key planning + write, wall clock) against nla.bake of the
    IK rig above, one run: medians of ``repeat`` of each, taken in turn (ours, nla.bake, ours,
    ...) so that both see the same spells of a noisy machine. For our bakes the rig's bone
    constraints are muted (our bake would otherwise key their influence to zero: more curves
    than before the rig existed); for nla.bake the source is assigned again and they act."""
    scene, arm, coll, ground = real_scene()
    trim_action(arm, frames, scene.frame_start)
    scene.frame_end = scene.frame_start + frames - 1
    scene.reldesc.environment = coll
    bind = jobs.bind_job(scene, arm, coll.name, progress=lambda *a: True)
    scene.frame_set(scene.frame_start + frames // 2)
    hips = arm.matrix_world @ arm.pose.bones["Hips"].head
    bump(ground, (hips.x, hips.y))
    scene.frame_set(scene.frame_start)
    from blender_reldesc import adapter
    source = bpy.data.actions[bind["action"]]
    build_ik_rig(scene, arm, ground)
    rig = [c for pb in arm.pose.bones for c in pb.constraints]
    runs, t_nla = [], []
    for _ in range(repeat):
        for c in rig:
            c.mute = True
        t0 = time.perf_counter()
        rep = jobs.bake_job(scene, arm, progress=lambda *a: True)
        runs.append((time.perf_counter() - t0, rep))
        for c in rig:
            c.mute = False
        adapter.assign_action(arm, source)
        t_nla.append(nla_bake_seconds(scene, arm, frames))
        adapter.assign_action(arm, source)
    ours, rep = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    t_nla = statistics.median(t_nla)
    return (f"real walk, first {frames} frames, 10k-tri floor with a 0.25 m bump", frames, rep["read_seconds"],
            rep["adapt_seconds"], rep["keys_seconds"], rep["write_seconds"], ours, t_nla, t_nla / ours)


def live_on_dense_floor(frames=600, cells=189):
    """Live preview on the real walk over a 71k-triangle floor, sculpted after binding."""
    scene, arm, coll, ground = real_scene(cells)
    trim_action(arm, frames, scene.frame_start)
    scene.frame_end = scene.frame_start + frames - 1
    scene.reldesc.environment = coll
    jobs.bind_job(scene, arm, coll.name, progress=lambda *a: True)
    sculpt(ground)
    play, worst, jump = live_seconds(scene, arm, frames)
    return (f"real walk, first {frames} frames, {2 * cells * cells}-tri floor", frames, 1000 * play, 1000 * worst,
            1000 * jump)


def pair_live(frames=120):
    """The live preview of a pair (``--pair``): milliseconds per frame with both characters
    posed (``reldesc.live`` on the lead of a group bound with ``partners``), the partner scaled,
    against the lead bound alone in the same scene (the baseline)."""
    from blender_reldesc import demo
    print(f"| scene | partner | frames | pair live ms/frame (play, median) | pair live ms (play, max) "
          f"| pair live ms (jump) | one character's live ms/frame (play, median) | ratio |")
    print("|" + "---|" * 8)
    for hold, scale in (("hands", 1.2), ("wrestle", 0.8), ("wrestle", 1.2), ("hug", 0.8), ("shoulder", 1.0)):
        scene, lead, partner, env = demo.build_pair_scene(frames=frames, hold=hold)
        jobs.bind_job(scene, lead, env.name, progress=lambda *a: True)
        one = live_seconds(scene, lead, frames)
        bpy.ops.reldesc.bind(armature="Lead", environment=env.name, partners="Partner")
        if scale != 1.0:
            demo.grow_armature(partner, scale)
        pair = live_seconds(scene, lead, frames)
        print(f"| {hold} | scaled {scale:g} | {frames} | {1000 * pair[0]:.1f} | {1000 * pair[1]:.1f} "
              f"| {1000 * pair[2]:.0f} | {1000 * one[0]:.1f} | {pair[0] / one[0]:.1f} |")


def walk_phases(characters, frames=1000, repeat=3):
    """The viewport's Walk of ``characters`` 0.5 m apart along a straight path over about 50k
    triangles of 35 cm hills (``demo.build_crowd_scene``'s walker): medians of ``repeat`` runs of
    (frames walked, walk s, keys s (each bone's rotation from the positions), write s (the
    characters' objects and actions), total s). Each run on a fresh scene."""
    from blender_reldesc import demo
    from blender_reldesc.jobs.locomotion import WalkJob
    runs = []
    for _ in range(repeat):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene, arm, env, curve = demo.build_crowd_scene(frames=150, size=(frames * 0.045 + 8.0, 0.5 * characters + 10.0),
                                                        cells=(200, 120))
        bpy.data.objects.remove(curve)
        t = np.linspace(0.0, 1.0, 30)
        curve = demo.curve_object("Path", np.c_[frames * 0.043 * t, np.zeros_like(t), np.zeros_like(t)],
                                  scene.collection)
        t0 = time.perf_counter()
        job = WalkJob(scene, arm, env.name, curve.name, "", characters, 0.5, warn=lambda *a: None)
        job.read()
        t1 = time.perf_counter()
        job.compute()
        t2 = time.perf_counter()
        report = job.write()
        t3 = time.perf_counter()
        walked = job.result.seconds["total"]
        runs.append((report["frames"], walked, t2 - t1 - walked, t3 - t2, t3 - t0))
    return tuple(statistics.median(r[k] for r in runs) for k in range(5))


def main():
    blender_reldesc.register()
    if "--walk" in sys.argv:
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Blender {bpy.app.version_string} "
              f"(bpy wheel), numpy {np.__version__}")
        print()
        print("| characters | frames | walk s | keys s | write s | total s | character-frames / s (total) |")
        print("|" + "---|" * 7)
        for C in (10, 100):
            F, walk_s, keys_s, write_s, total = walk_phases(C)
            print(f"| {C} | {F:.0f} | {walk_s:.2f} | {keys_s:.2f} | {write_s:.2f} | {total:.2f} | {C * F / total:.0f} |")
        sys.stdout.flush()
        os._exit(0)
    if "--pair" in sys.argv:
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Blender {bpy.app.version_string} "
              f"(bpy wheel), numpy {np.__version__}")
        print()
        pair_live()
        sys.stdout.flush()
        os._exit(0)
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
    if REAL.exists():
        print()
        print("| scene | frames | read s | adapt s | keys s | write s | our bake s (wall, median of 5) "
              "| IK rig nla.bake s (median of 5, in turn with ours) | ours faster by |")
        print("|" + "---|" * 9)
        r = ik_rig_comparison()
        print("| " + " | ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in r) + " |")
        print()
        print("| scene | frames | live ms/frame (play, median) | live ms (play, max) | live ms (jump) |")
        print("|" + "---|" * 5)
        r = live_on_dense_floor()
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
