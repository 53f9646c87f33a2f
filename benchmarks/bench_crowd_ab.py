"""Crowd speed of two trees, taking turns: issue 35's crowd (100 characters x 1000 frames over
50k triangles of hills, ``bench_locomotion.py``'s) walked by tree BEFORE and tree AFTER in
alternation, each walk in a fresh process of its own tree, so that a slow spell of this noisy
machine falls on both. Prints per round and the medians, and AFTER's positions against BEFORE's.

Run with ``.venv/bin/python benchmarks/bench_crowd_ab.py BEFORE AFTER [--rounds 3]``, BEFORE and
AFTER being checkouts (``git worktree add /tmp/before <commit>``).
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

import numpy as np

#: One walk in a tree: set up (not timed), warm the carpet's layout, then time ``walk``.
_ONE = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from blender_reldesc.core import TriMesh
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.locomotion import bind_carpet, lateral_paths, walk
C, F, workers, out = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
skel, motion = S.walk(150)
carpet = bind_carpet(skel, motion)
length = F * carpet.speed + 1.0
width = C * 0.5 + 10.0
terrain = TriMesh(*S.grid(length + 6.0, width, 250, 100, origin=(-3.0, -width / 2), height=S.hills(0.15, 3.0)))
paths = lateral_paths(np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]), C, 0.5)
offsets = (np.arange(C) * 7) % 30
walk(carpet, paths[:1], terrain, offsets[:1], frames=F)
t = time.perf_counter()
r = walk(carpet, paths, terrain, offsets, frames=F, workers=workers)
seconds = time.perf_counter() - t
np.save(out, r.positions)
print(json.dumps({"seconds": seconds}))
"""


def one(tree, characters, frames, workers, out):
    done = subprocess.run([sys.executable, "-c", _ONE, str(tree), str(characters), str(frames), str(workers), out],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("before", type=pathlib.Path)
    ap.add_argument("after", type=pathlib.Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--characters", type=int, default=100)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{args.characters} characters x {args.frames} frames; BEFORE {args.before}, AFTER {args.after}")
    print()
    print("| round | workers | BEFORE s | AFTER s | AFTER / BEFORE |")
    print("|---|---|---|---|---|")
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
