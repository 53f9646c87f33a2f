"""Crowd speed of two trees, taking turns: issue 35's crowd (100 characters x 1000 frames over
50k triangles of hills, ``bench_locomotion.py``'s) walked by tree BEFORE and tree AFTER in
alternation, each walk in a fresh process of its own tree, so that a slow spell of this noisy
machine falls on both. Prints per round and the medians, and AFTER's positions against BEFORE's.

Run with ``.venv/bin/python benchmarks/bench_crowd_ab.py BEFORE AFTER [--rounds 3]``, BEFORE and
AFTER being checkouts (``git worktree add /tmp/before <commit>``).

``--in-process``: both trees' cores imported in this one process under names of their own
(``bench_live_ab.load``), their walks in turns, one process only (``workers`` 1): a slow spell of a
minute falls on both trees, where processes of their own meet it one at a time. Each tree's layout
of the played clip (its coefficient table) is warmed first, as a repeated walk finds it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

def crowd_scene(core, S, loco, characters, frames):
    """Issue 35's crowd built with one tree's modules (its core, ``synthetic`` and ``locomotion``):
    ``(carpet, paths, terrain, offsets)``, characters 0.5 m apart on straight lines over 50k
    triangles of 15 cm hills, their clips staggered."""
    C, F = characters, frames
    skel, motion = S.walk(150)
    carpet = loco.bind_carpet(skel, motion)
    length = F * carpet.speed + 1.0
    width = C * 0.5 + 10.0
    terrain = core.TriMesh(*S.grid(length + 6.0, width, 250, 100, origin=(-3.0, -width / 2),
                                   height=S.hills(0.15, 3.0)))
    paths = loco.lateral_paths(np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]), C, 0.5)
    return carpet, paths, terrain, (np.arange(C) * 7) % 30


def crowd(core, S, loco, characters, frames):
    """``crowd_scene``'s crowd, its layout warmed (the frames the crowd plays: the largest offset's
    walk): a function walking it ``workers`` processes wide and returning the positions."""
    carpet, paths, terrain, offsets = crowd_scene(core, S, loco, characters, frames)
    loco.walk(carpet, paths[:1], terrain, [offsets.max()], frames=frames)
    return lambda workers=1: loco.walk(carpet, paths, terrain, offsets, frames=frames, workers=workers).positions


#: One walk in a tree, in a process of its own: set up (not timed, ``crowd``), then time the walk.
_ONE = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[6])
import blender_reldesc.core as core
from blender_reldesc.core import locomotion, synthetic
from bench_crowd_ab import crowd
C, F, workers, out = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
go = crowd(core, synthetic, locomotion, C, F)
t = time.perf_counter()
positions = go(workers)
seconds = time.perf_counter() - t
np.save(out, positions)
print(json.dumps({"seconds": seconds}))
"""


def in_process(args):
    """``--in-process``: (seconds per round per tree, each tree's last positions)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from bench_live_ab import load
    names = ("core", "core.synthetic", "core.locomotion")
    trees = {"before": load(args.before, "reldesc_crowd_before", names),
             "after": load(args.after, "reldesc_crowd_after", names)}
    walks = {name: crowd(pkg["core"], pkg["synthetic"], pkg["locomotion"], args.characters, args.frames)
             for name, pkg in trees.items()}
    times, last = {"before": [], "after": []}, {}
    for k in range(args.rounds):
        got = {}
        for name in (("before", "after") if k % 2 == 0 else ("after", "before")):
            t = time.perf_counter()
            last[name] = walks[name]()
            got[name] = time.perf_counter() - t
            times[name].append(got[name])
        print(f"| {k + 1} | 1 | {got['before']:.2f} | {got['after']:.2f} | {got['after'] / got['before']:.2f} |",
              flush=True)
    return times, last


def one(tree, characters, frames, workers, out):
    done = subprocess.run([sys.executable, "-c", _ONE, str(tree), str(characters), str(frames), str(workers), out,
                           str(pathlib.Path(__file__).resolve().parent)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("before", type=pathlib.Path)
    ap.add_argument("after", type=pathlib.Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--characters", type=int, default=100)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--in-process", action="store_true",
                    help="both trees in this process, in turns (one process only)")
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{args.characters} characters x {args.frames} frames; BEFORE {args.before}, AFTER {args.after}")
    print()
    print("| round | workers | BEFORE s | AFTER s | AFTER / BEFORE |")
    print("|---|---|---|---|---|")
    if args.in_process:
        times, last = in_process(args)
        b, a = np.median(times["before"]), np.median(times["after"])
        ratio = np.median(np.array(times["after"]) / np.array(times["before"]))
        print()
        print("| workers | BEFORE median s | AFTER median s | AFTER character-frames / s | median of AFTER / BEFORE |")
        print("|---|---|---|---|---|")
        print(f"| 1 | {b:.2f} | {a:.2f} | {args.characters * args.frames / a:.0f} | {ratio:.2f} |")
        print()
        print(f"AFTER's positions against BEFORE's: {np.abs(last['after'] - last['before']).max():.2e} m at most")
        return
    times = {(w, t): [] for w in args.workers for t in ("before", "after")}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for w in args.workers:
                got = {}
                for name in (("before", "after") if k % 2 == 0 else ("after", "before")):
                    got[name] = one(getattr(args, name).resolve(), args.characters, args.frames, w,
                                    os.path.join(tmp, f"{name}.npy"))
                    times[(w, name)].append(got[name])
                print(f"| {k + 1} | {w} | {got['before']:.2f} | {got['after']:.2f} | {got['after'] / got['before']:.2f} |")
        diff = np.abs(np.load(os.path.join(tmp, "after.npy")) - np.load(os.path.join(tmp, "before.npy"))).max()
    print()
    print("| workers | BEFORE median s | AFTER median s | AFTER character-frames / s | AFTER / BEFORE |")
    print("|---|---|---|---|---|")
    for w in args.workers:
        b, a = np.median(times[(w, "before")]), np.median(times[(w, "after")])
        print(f"| {w} | {b:.2f} | {a:.2f} | {args.characters * args.frames / a:.0f} | {a / b:.2f} |")
    print()
    print(f"AFTER's positions against BEFORE's (the last walk of each): {diff:.2e} m at most")


if __name__ == "__main__":
    main()
