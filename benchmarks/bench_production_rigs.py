"""Production rigs: bind, bake and live preview against Blender's own bake, and adapt time
against the number of joints (issue 40).

``.venv/bin/python benchmarks/bench_production_rigs.py [TREE ...] [--frames 600] [--rounds 3]``

Each TREE (a checkout's root, the folder holding ``blender_reldesc``; default: this one) runs
in processes of its own, the trees taking turns scene by scene, so that two trees are compared
in one run on the same spells of a noisy machine. Scenes, all generated in the bpy wheel:

- **Rigify**: Blender's human metarig generated with Rigify (the wheel ships it), its torso,
  IK feet and IK hands keyed as a walk over ``--frames`` frames, a floor under it; bound with
  the default bone set (deform bones); the floor raised 5 cm; baked. The baseline is Blender's
  Bake Action (``nla.bake``, visual keying, pose) of the same deform bones from the same source,
  timed in turn with our bake (medians of ``--rounds``). Live preview (``_live``): the handler's
  time per frame while playing 60 frames, per jump after an edit, per cold jump; and how far the
  deform bones it shows are from those the baked action plays (the source assigned back with
  *Use Source*, its constraints on, as a user previews).
- **Rigify, body**: the same rig bound with a bone collection of its deform bones outside the
  face (the joint-count table's middle point).
- **Mixamo with fingers**: the generated walker with three bones per finger and Mixamo's names,
  walking over a terrain sculpted after binding; baseline ``nla.bake`` of all its bones.
- **Real walk (27 joints)**: the shared real clip's first ``--frames`` frames over a floor with a
  bump, against ``nla.bake`` of a leg-IK rig built from Blender's constraints
  (``bench_blender.ik_rig_comparison``, the figure of earlier issues).

The last table fits adapt time per frame against the joint count: ``t = a J^k``, k the growth
exponent (least squares on the logarithms).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parents[1]
SCENES = ("rigify", "rigify_body", "mixamo", "walk27")


# --- the child process: one scene, one tree ----------------------------------------------------

def _rigify_rig(frames):
    """Rigify's generated human rig keyed as a walk of a stride a second at 24 fps (torso, IK
    feet and hands: ``rigify_case.rigify_walker``), a floor under it."""
    import rigify_case
    scene, rig, floor = rigify_case.rigify_walker(frames, strides=frames / 24.0)
    return scene, rig, floor.users_collection[0], floor


def _body_collection(rig):
    """A bone collection 'Body' of the deform bones outside the face."""
    body = rig.data.collections.new("Body")
    for b in rig.data.bones:
        if b.use_deform and "ORG-face" not in [p.name for p in b.parent_recursive]:
            body.assign(b)
    return "Body"


def _live(scene, arm, frames, live, ground, baked=None):
    """Live preview, handler ms: median and max while playing 60 frames; median of 10 jumps to a
    far frame just after an edit (the ground moved 1 mm: the session and its weights stay, the
    solved frames go); median of 10 cold jumps (the session dropped, as after loading a file).
    With ``baked`` (the adapted action's name), also how far (mm) the bones the preview shows
    while playing are from those the baked action plays, the source assigned back with *Use
    Source* (its constraints on: what a user who binds, edits and previews sees)."""
    import bpy
    import numpy as np
    from blender_reldesc import adapter
    scene.reldesc.armature = arm
    n = min(61, frames)
    expected = None
    if baked is not None:
        adapter.assign_action(arm, bpy.data.actions[baked])
        expected = _heads(scene, arm, range(1, 1 + n))
        bpy.ops.reldesc.use_source(armature=arm.name)
    scene.reldesc.live = True
    play, shown = [], []
    for f in range(1, 1 + n):
        scene.frame_set(f)
        play.append(live.last_seconds)
        if expected is not None:
            shown.append(_heads(scene, arm, None))
    edited, cold = [], []
    for k in range(10):
        ground.location.z += 0.001 if k % 2 == 0 else -0.001
        scene.frame_set(int(10 + (k * 37) % max(frames - 20, 1)))
        edited.append(live.last_seconds)
    for k in range(10):
        live.clear()
        scene.frame_set(int(10 + (k * 53) % max(frames - 20, 1)))
        cold.append(live.last_seconds)
    scene.reldesc.live = False
    gap = None if expected is None else 1000 * float(np.linalg.norm(np.stack(shown) - expected, axis=-1).max())
    return (1000 * statistics.median(play[1:]), 1000 * max(play[1:]), 1000 * statistics.median(edited),
            1000 * statistics.median(cold), gap)


def _heads(scene, arm, frames):
    """World positions of the deform bones' heads at ``frames`` (F,B,3), or now (B,3)."""
    import numpy as np
    from blender_reldesc import adapter
    deform = [i for i, b in enumerate(arm.data.bones) if b.use_deform]

    def now():
        return adapter.to_world(adapter.world_matrix(arm), adapter.read_pose(arm)[0][deform])
    if frames is None:
        return now()
    out = []
    for f in frames:
        scene.frame_set(f)
        out.append(now())
    return np.stack(out)


def _child(tree, scene_name, frames, rounds):
    sys.path.insert(0, tree)
    import bpy
    import numpy as np

    import blender_reldesc
    from blender_reldesc import adapter, jobs
    from blender_reldesc.viewport import live
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(ROOT / "tests" / "blender"))
    import bench_blender
    import blender_scenes

    if scene_name not in ("rigify", "rigify_body"):            # rigify_walker starts a scene of its own
        bpy.ops.wm.read_factory_settings(use_empty=True)
        blender_reldesc.register()
    out = dict(tree=tree, scene=scene_name, frames=frames)
    if scene_name == "walk27":
        label, F, read, adapt, keys, write, ours, t_nla, ratio = bench_blender.ik_rig_comparison(frames, rounds)
        scene, arm, coll, ground = blender_scenes.real_scene()
        bench_blender.trim_action(arm, frames, scene.frame_start)
        scene.frame_end = scene.frame_start + frames - 1
        scene.reldesc.armature, scene.reldesc.environment = arm, coll
        t0 = time.perf_counter()
        bind = jobs.bind_job(scene, arm, coll.name, progress=lambda *a: True, warn=lambda m: None)
        out.update(bind_s=time.perf_counter() - t0, joints=bind["joints"], bake_s=ours, read_s=read, adapt_s=adapt,
                   keys_s=keys, write_s=write, baseline_s=t_nla, baseline="leg-IK rig nla.bake (all bones)")
        blender_scenes.sculpt(ground)
        out["live_ms"] = _live(scene, arm, frames, live, ground)
        _emit(out)
        return
    if scene_name in ("rigify", "rigify_body"):
        scene, arm, coll, floor = _rigify_rig(frames)
        bone_set = _body_collection(arm) if scene_name == "rigify_body" else "DEFORM"
        baked = [b.name for b in arm.data.bones if b.use_deform and (bone_set == "DEFORM" or any(
            c.name == bone_set for c in b.collections))]
        edit = lambda: setattr(floor.location, "z", 0.05)          # noqa: E731
        ground = floor
    else:
        scene, arm, coll, ground = blender_scenes.synthetic_scene(frames)
        import blender_helpers
        blender_helpers.mixamo_with_fingers(arm)
        bone_set = "ALL"
        baked = [b.name for b in arm.data.bones]
        edit = lambda: blender_scenes.sculpt(ground)                # noqa: E731
    scene.reldesc.armature, scene.reldesc.environment = arm, coll
    source = adapter.source_action(arm)
    t0 = time.perf_counter()
    bind = jobs.bind_job(scene, arm, coll.name, progress=lambda *a: True, warn=lambda m: None, bone_set=bone_set)
    out.update(bind_s=time.perf_counter() - t0, bind_read_s=bind["read_seconds"],
               bind_compute_s=bind["compute_seconds"], joints=bind["joints"], bones_baked=len(baked))
    edit()
    runs, nla = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        rep = jobs.bake_job(scene, arm, progress=lambda *a: True, warn=lambda m: None)
        runs.append((time.perf_counter() - t0, rep))
        adapter.assign_action(arm, source)
        nla.append(bench_blender.nla_bake_seconds(scene, arm, frames, set(baked)))
        adapter.assign_action(arm, source)
    wall, rep = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    out.update(bake_s=wall, read_s=rep["read_seconds"], adapt_s=rep["adapt_seconds"], keys_s=rep["keys_seconds"],
               write_s=rep["write_seconds"], baseline_s=statistics.median(nla),
               baseline=f"nla.bake of the {len(baked)} baked bones",
               bone_error_mean=rep["bone_length_error_mean"])
    out["live_ms"] = _live(scene, arm, frames, live, ground, baked=rep["action"])
    _emit(out)


def _emit(out):
    print("RESULT " + json.dumps(out))
    sys.stdout.flush()
    os._exit(0)          # with Rigify enabled the bpy 4.5 wheel hangs at interpreter exit


# --- the parent: trees in turn, tables -----------------------------------------------------------

def _run(tree, scene, frames, rounds):
    proc = subprocess.run([sys.executable, str(HERE), "--child", tree, scene, "--frames", str(frames),
                           "--rounds", str(rounds)], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{scene} on {tree} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def _fit(points):
    """(a, k) of t = a J^k by least squares on the logarithms of (J, t) ``points``."""
    import numpy as np
    j, t = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    k, loga = np.polyfit(j, t, 1)
    return float(np.exp(loga)), float(k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", default=[str(ROOT)])
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenes", default=",".join(SCENES))
    ap.add_argument("--child", nargs=2, metavar=("TREE", "SCENE"))
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.frames, args.rounds)
        return
    import bpy
    import numpy as np
    print(f"Blender {bpy.app.version_string} (bpy wheel), numpy {np.__version__}, {os.cpu_count()} cores; "
          f"{args.frames} frames, medians of {args.rounds}")
    trees = [str(pathlib.Path(t).resolve()) for t in args.trees]
    results = []
    for scene in args.scenes.split(","):
        for tree in trees:
            results.append(_run(tree, scene, args.frames, args.rounds))
            print(f"  measured {scene} on {tree}", file=sys.stderr, flush=True)
    print()
    print("| tree | scene | joints | bind s | bake s (wall) | read s | adapt s | keys s | write s | baseline | "
          "baseline s | ours / baseline | adapt frames/s | live ms (play median / max / jump after an edit / cold jump) "
          "| live vs bake mm |")
    print("|" + "---|" * 15)
    for r in results:
        live = " / ".join(f"{x:.1f}" for x in r["live_ms"][:4])
        gap = r["live_ms"][4] if len(r["live_ms"]) > 4 else None
        live += " | " + ("-" if gap is None else f"{gap:.2f}")
        print(f"| {os.path.basename(r['tree'])} | {r['scene']} | {r['joints']} | {r['bind_s']:.2f} | {r['bake_s']:.2f} "
              f"| {r['read_s']:.2f} | {r['adapt_s']:.2f} | {r['keys_s']:.2f} | {r['write_s']:.2f} | {r['baseline']} "
              f"| {r['baseline_s']:.2f} | {r['bake_s'] / r['baseline_s']:.2f} | {r['frames'] / r['adapt_s']:.0f} "
              f"| {live} |")
    print()
    print("| tree | joints: adapt ms per frame | growth exponent k (t = a J^k) |")
    print("|---|---|---|")
    for tree in trees:
        pts = sorted((r["joints"], 1000 * r["adapt_s"] / r["frames"]) for r in results if r["tree"] == tree)
        _, k = _fit(pts) if len(pts) > 1 else (0.0, float("nan"))
        print(f"| {os.path.basename(tree)} | " + ", ".join(f"{j}: {t:.2f}" for j, t in pts) + f" | {k:.2f} |")


if __name__ == "__main__":
    main()
