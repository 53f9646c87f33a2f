"""The Blender boundary before and after a restructuring, measured in one run.

``.venv/bin/python benchmarks/bench_boundary.py BEFORE_TREE [AFTER_TREE] [--rounds N]``

Each tree (a checkout's root: the folder holding ``blender_reldesc``) runs in a process of its
own, the trees alternating round by round so that the machine's drift falls on both alike:

- **module moves**: one Bake through the operator (``reldesc.bake``, one character,
  re-positioning off, the panel's default options) on the demo's bridge scene, profiled with
  ``sys.setprofile``. A *move* is a call from a function of one Blender-side module of
  ``blender_reldesc`` (anything outside ``core/``) into a function of another; a module is
  *entered* each time it is the callee of a move. Calls from the core back into the Blender
  side (progress callbacks) and calls into the core are counted apart.
- **timings**: bind, bake (read, adapt, write) and live preview (median per frame over 120
  frames, and after a jump) on the generated walk (1000 frames, 10k-triangle terrain,
  sculpted) and on the real walk clip (``shared/data/real``) when present.

Only public entry points that both trees share are used: ``jobs.bind_job``, ``jobs.bake_job``,
the operators, the scene's Live Preview toggle.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve()


def _child(tree):
    sys.path.insert(0, tree)
    import time

    import bpy
    import numpy as np

    import blender_reldesc
    from blender_reldesc import demo, jobs
    blender_reldesc.register()
    sys.path.insert(0, str(HERE.parent))
    import blender_scenes
    pkg = os.path.dirname(os.path.abspath(blender_reldesc.__file__))
    core = os.path.join(pkg, "core") + os.sep

    def side(filename):
        return filename.startswith(pkg + os.sep) and not filename.startswith(core)

    def live_module():
        try:
            from blender_reldesc.viewport import live
        except ImportError:
            from blender_reldesc import live
        return live

    out = {}
    # --- module moves in one operator bake -------------------------------------------------
    scene, arm, coll, bridge, beam = demo.build_scene(frames=120)
    scene.reldesc.armature, scene.reldesc.environment = arm, coll
    bpy.ops.reldesc.bind(armature=arm.name, environment=coll.name)
    demo.bend_bridge(bridge)
    entered, edges, moves, callbacks, core_calls = collections.Counter(), collections.Counter(), [0], [0], [0]

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = frame.f_code.co_filename
        back = frame.f_back
        caller = back.f_code.co_filename if back is not None else ""
        if side(callee):
            if side(caller) and caller != callee:
                moves[0] += 1
                entered[os.path.relpath(callee, pkg)] += 1
                edges[f"{os.path.relpath(caller, pkg)}:{back.f_code.co_name} -> "
                      f"{os.path.relpath(callee, pkg)}:{frame.f_code.co_name}"] += 1
            elif caller.startswith(core):
                callbacks[0] += 1
        elif callee.startswith(core) and side(caller):
            core_calls[0] += 1

    sys.setprofile(profile)
    try:
        bpy.ops.reldesc.bake(armature=arm.name)
    finally:
        sys.setprofile(None)
    out["moves"] = moves[0]
    out["entered"] = dict(entered)
    out["edges"] = dict(edges)
    out["callbacks"] = callbacks[0]
    out["core_calls"] = core_calls[0]

    if "--moves-only" in sys.argv:
        print("RESULT " + json.dumps(out), flush=True)
        return
    # --- timings ---------------------------------------------------------------------------
    def live_seconds(scene, arm, frames, count=120):
        live = live_module()
        scene.reldesc.armature = arm
        scene.reldesc.live = True
        seq = []
        for f in range(scene.frame_start, scene.frame_start + min(count, frames)):
            scene.frame_set(f)
            seq.append(live.last_seconds)
        jumps = []
        for f in np.random.default_rng(0).integers(scene.frame_start + 10, scene.frame_start + frames - 1, 10):
            live.clear()
            scene.frame_set(int(f))
            jumps.append(live.last_seconds)
        scene.reldesc.live = False
        return statistics.median(seq[1:]), statistics.median(jumps)

    def measure(label, scene, arm, coll, ground):
        frames = scene.frame_end - scene.frame_start + 1
        scene.reldesc.environment = coll
        t0 = time.perf_counter()
        jobs.bind_job(scene, arm, coll.name, progress=lambda *a: True, warn=lambda m: None)
        bind = time.perf_counter() - t0
        blender_scenes.sculpt(ground)
        t0 = time.perf_counter()
        rep = jobs.bake_job(scene, arm, progress=lambda *a: True, warn=lambda m: None)
        bake = time.perf_counter() - t0
        seq, jump = live_seconds(scene, arm, frames)
        out[label] = dict(frames=frames, bind=bind, bake=bake, read=rep["read_seconds"],
                          adapt=rep["adapt_seconds"], write=rep["write_seconds"], live=seq, jump=jump)

    measure("generated", *blender_scenes.synthetic_scene(1000))
    if blender_scenes.REAL.exists():
        measure("real walk", *blender_scenes.real_scene())
    print("RESULT " + json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--edges", action="store_true", help="list every move (caller -> callee)")
    ap.add_argument("--moves-only", action="store_true", help="count the moves, time nothing")
    a = ap.parse_args()
    runs = {t: [] for t in a.trees}
    for r in range(a.rounds):
        for tree in a.trees:
            p = subprocess.run([sys.executable, str(HERE), "--child", os.path.abspath(tree)]
                               + (["--moves-only"] if a.moves_only else []), capture_output=True, text=True)
            line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"{tree}: {p.stderr.strip().splitlines()[-5:]}")
            runs[tree].append(json.loads(line[7:]))
            print(f"round {r + 1}: {tree} done", file=sys.stderr)
    import platform
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{a.rounds} rounds, trees alternating; medians")
    first = a.trees[0]
    for tree in a.trees:
        r = runs[tree][0]
        print(f"\n{tree}: {r['moves']} moves between Blender-side modules in one operator bake; "
              f"{r['core_calls']} calls into the core; {r['callbacks']} callbacks from the core")
        for name, n in sorted(r["entered"].items(), key=lambda kv: -kv[1]):
            print(f"  {name:32s} entered {n}")
        if a.edges:
            for edge, n in sorted(r["edges"].items()):
                print(f"    {n} x {edge}")
    for label in ("generated", "real walk"):
        if label not in runs[first][0] or any(label not in runs[t][0] for t in a.trees):
            continue
        print(f"\n{label} ({runs[first][0][label]['frames']} frames)")
        print(f"{'tree':40s} {'bind s':>8s} {'bake s':>8s} {'read':>7s} {'adapt':>7s} {'write':>7s} "
              f"{'live ms':>8s} {'jump ms':>8s}  bake/first")
        base = statistics.median(x[label]["bake"] for x in runs[first])
        for tree in a.trees:
            m = {k: statistics.median(x[label][k] for x in runs[tree]) for k in
                 ("bind", "bake", "read", "adapt", "write", "live", "jump")}
            print(f"{tree[-40:]:40s} {m['bind']:8.2f} {m['bake']:8.2f} {m['read']:7.2f} {m['adapt']:7.2f} "
                  f"{m['write']:7.2f} {1000 * m['live']:8.2f} {1000 * m['jump']:8.1f}  {m['bake'] / base:.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2])
    else:
        main()
