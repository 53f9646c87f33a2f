"""Reaching: time per reach edit and its quality (issue 17).

    .venv/bin/python benchmarks/bench_reaching.py [--edits 20]

A 300-frame walk over a floor (generated; and the real walk's frames 3175-3475 when the shared
clips are present); a ``ReachSession`` adapts it once, then each edit moves the target a little
and reaches again (what an animator dragging the Empty pays). Columns: database clips, window,
median and 90th percentile seconds per edit, the hand's distance from the target at the frame,
the largest joint distance from the base outside the window, the largest frame-to-frame joint
step against the source's, the bone-length deviation, the largest bend past a joint limit. "whole
body": the window solved again through the descriptors (the default); "arm alone": the arm moved
on the bake's body (``reach(..., body=False)``, the paper's way).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
REAL = ROOT.parent / "shared" / "data" / "real" / "walk_cm_30fps.bvh"

from blender_reldesc.core import Skeleton, TriMesh, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.reaching import ReachSession  # noqa: E402


def clips():
    skel, motion = S.walk(300)
    yield "generated walk", skel, motion, "RightHand"
    if REAL.exists():
        from bvh import read_bvh
        names, parents, m, _ = read_bvh(str(REAL), scale=0.01)
        hand = next(n for n in names if "hand" in n.lower() and ("right" in n.lower() or n.lower().startswith("r")))
        yield "real walk (frames 3175-3475)", Skeleton(names, parents), m[3175:3475], hand


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--window", type=int, default=30)
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    print("| clip | frames | database clips | solve | window | edit s median | edit s p90 | hand error mm "
          "| outside window max mm | step / source | bone dev mm | limit max ° |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, skel, motion, hand in clips():
        F = len(motion)
        lo, hi = motion[..., :2].min((0, 1)) - 1.0, motion[..., :2].max((0, 1)) + 1.0
        verts, tris = S.grid(*(hi - lo), int((hi - lo)[0] / 0.25), int((hi - lo)[1] / 0.25), origin=tuple(lo),
                             z=float(motion[..., 2].min()))
        binding = bind(skel, motion, TriMesh(verts, tris))
        h = skel.index(hand)
        frame = F // 2
        elbow = skel.parents[h]
        shoulder = skel.parents[elbow]
        # A target forward and up from the hand, within reach from the shoulder.
        reach = np.linalg.norm(motion[frame, h] - motion[frame, elbow]) + \
            np.linalg.norm(motion[frame, elbow] - motion[frame, shoulder])
        ahead = motion[frame, 0] - motion[frame - 5, 0]
        ahead[2] = 0.0
        ahead /= max(np.linalg.norm(ahead), 1e-9)
        target0 = motion[frame, shoulder] + 0.75 * reach * (0.6 * ahead + 0.8 * np.array([0.0, 0.0, 0.0]) +
                                                            0.4 * np.array([0.0, 0.0, 1.0]))
        database = [S.reaching_clip(skel, motion[k], motion[k, h] + 0.4 * reach * (ahead + [0.0, 0.0, 0.6 + 0.2 * i]),
                                    hand=hand) for i, k in enumerate((40, 100, 160))]
        for db, body in ((database, True), ([], True), (database, False), ([], False)):
            session = ReachSession(binding, None, db)
            times, results = [], []
            rng = np.random.default_rng(0)
            for _ in range(args.edits):
                target = target0 + rng.normal(scale=0.02, size=3)
                t = time.perf_counter()
                result, info = session.reach(hand, target, frame, args.window, body=body)
                times.append(time.perf_counter() - t)
                results.append((result, info, target))
            result, info, target = results[-1]
            out, base = result.positions, session.base.positions
            W = np.arange(info.window[0], info.window[1] + 1)
            outside = np.setdiff1d(np.arange(F), W)
            off = np.linalg.norm(out[outside] - base[outside], axis=-1).max() if outside.size else 0.0
            step = np.linalg.norm(np.diff(out, axis=0), axis=-1).max() / np.linalg.norm(np.diff(motion, axis=0),
                                                                                        axis=-1).max()
            parents = skel.parents
            kids = np.flatnonzero(parents >= 0)
            dev = np.abs(np.linalg.norm(out[:, kids] - out[:, parents[kids]], axis=-1) -
                         np.linalg.norm(motion[:, kids] - motion[:, parents[kids]], axis=-1)).max()
            print(f"| {name} | {F} | {len(db)} | {'whole body' if body else 'arm alone'} | {args.window} "
                  f"| {np.median(times):.3f} | {np.percentile(times, 90):.3f} | {1000 * info.hand_error:.2f} "
                  f"| {1000 * off:.2f} | {step:.2f} | {1000 * dev:.3f} | {result.joint_limit_violations.max():.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
