"""Transfer to a novel object (thesis ch. 4), the issue's three scenes generated: sitting moved
from a chair to other seats, standing moved from a box to round pedestals, a hand on a table's
edge moved to round tables; the time of each stage and the issue's checks.

Run with ``.venv/bin/python benchmarks/bench_transfer.py [--frames 300]``.
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
from blender_reldesc.core.transfer import Segmented, transfer  # noqa: E402

SCENES = [("stool", 0.45, (0.05, 0.0)), ("chair", 0.35, (0.05, 0.0)), ("armchair", 0.45, (0.05, 0.0)),
          ("bench", 0.35, (0.05, 0.0)), ("stool", 0.45, (2.0, 1.0)), ("chair", 0.45, (1.05, 0.5))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=300)
    args = ap.parse_args(argv)
    skel, motion, *_ = S.chair_scene(args.frames)
    cv, ct, cl, cn = S.seat_object("chair")
    floor = S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0))
    verts, tris, _ = S.merge(floor, (cv, ct))
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    t0 = time.perf_counter()
    adapt(binding, mesh)
    t_adapt = time.perf_counter() - t0
    chair = Segmented(cv, ct, cl, cn)
    hips = skel.index("Hips")
    feet = [skel.index(n) for n in ("LeftFoot", "RightFoot")]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.frames} frames, plain adapt of the clip {t_adapt:.2f} s (baseline)")
    print()
    print("| new seat | total s | match s | fit s | re-embed s | adapt s | pelvis height over the seat: off by (cm) "
          "| feet height off by (cm) | largest step / source |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, height, at in SCENES:
        new = Segmented(*S.seat_object(kind, seat_height=height, at=at))
        t0 = time.perf_counter()
        out = transfer(binding, mesh, np.arange(len(floor[1]), len(tris)), chair, new)
        total = time.perf_counter() - t0
        p = out.result.positions
        top = new.vertices[new.triangles[new.mask("seat")]][..., 2].max()
        pelvis = np.abs((p[:, hips, 2] - top) - (motion[:, hips, 2] - 0.45)).max()
        foot = np.abs(p[:, feet, 2] - motion[:, feet, 2]).max()
        s = out.seconds
        print(f"| {kind} {height} m at {at} | {total:.2f} | {s['match']:.2f} | {s['fit']:.2f} | {s['reembed']:.2f} "
              f"| {s['adapt']:.2f} | {100 * pelvis:.1f} | {100 * foot:.1f} | {step(p) / step(motion):.2f} |")
    pedestal(args.frames)
    table(args.frames)


def _scene_with(skel, motion, obj):
    floor = S.grid(6.0, 6.0, 24, 24, origin=(-3.0, -3.0))
    verts, tris, _ = S.merge(floor, obj[:2])
    mesh = TriMesh(verts, tris)
    return bind(skel, motion, mesh), mesh, np.arange(len(floor[1]), len(tris)), Segmented(*obj)


def pedestal(frames):
    """Standing on a 0.3 m box -> round pedestals (the issue's second scene)."""
    sk, motion, box = S.stand_scene(frames)
    binding, mesh, tris, template = _scene_with(sk, motion, box)
    feet = [sk.index(n) for n in ("LeftFoot", "RightFoot", "LeftToe", "RightToe", "LeftToeEnd", "RightToeEnd")]
    print()
    print("| standing on a 0.3 m box -> | total s | match s | feet height over the top: off by (cm) "
          "| feet from the centre (m, radius 0.35) | largest step / source |")
    print("|---|---|---|---|---|---|")
    for height, at in ((0.5, (1.5, 1.0)), (0.3, (-1.0, 0.5)), (0.5, (0.0, 0.0))):
        new = Segmented(*S.pedestal_object("round", at, height, 0.7))
        t0 = time.perf_counter()
        out = transfer(binding, mesh, tris, template, new)
        total = time.perf_counter() - t0
        p = out.result.positions
        off = np.abs((p[:, feet, 2] - height) - (motion[:, feet, 2] - 0.3)).max()
        centre = np.linalg.norm(p[:, feet, :2] - np.array(at), axis=-1).max()
        print(f"| round pedestal {height} m at {at} | {total:.2f} | {out.seconds['match']:.2f} | {100 * off:.1f} "
              f"| {centre:.2f} | {step(p) / step(motion):.2f} |")


def table(frames):
    """A hand resting on a table's edge -> round tables (the issue's third scene)."""
    sk, motion, rect = S.table_scene(frames)
    binding, mesh, tris, template = _scene_with(sk, motion, rect)
    hand = sk.index("RightHand")
    print()
    print("| hand on a table's edge (4 cm in) -> | total s | match s | hand height over the top: off by (cm) "
          "| hand in from the rim (cm) | largest step / source |")
    print("|---|---|---|---|---|---|")
    for size, at in ((0.9, (1.5, 1.0)), (1.0, (0.65, 0.0)), (0.8, (0.65, 0.0))):
        v, t, labels, _ = S.table_object("round", 1.0, at, size)
        new = Segmented(v, t, labels, ["top", "column"])
        t0 = time.perf_counter()
        out = transfer(binding, mesh, tris, template, new)
        total = time.perf_counter() - t0
        p = out.result.positions
        off = np.abs(p[:, hand, 2] - motion[:, hand, 2]).max()
        rim = size / 2 - np.linalg.norm(p[:, hand, :2] - np.array(at), axis=-1)
        print(f"| round table {size} m across at {at} | {total:.2f} | {out.seconds['match']:.2f} | {100 * off:.1f} "
              f"| {100 * rim.min():.1f}-{100 * rim.max():.1f} | {step(p) / step(motion):.2f} |")


def step(m):
    return float(np.linalg.norm(np.diff(m, axis=0), axis=-1).max())


if __name__ == "__main__":
    main()
