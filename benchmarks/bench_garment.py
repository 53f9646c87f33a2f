"""A skirt carried on a walk whose legs got 15 % longer (seed 000 §9, garment transfer): the
time per frame against the garment's size, the edge-length change and the body penetration,
against the plain adapt of the walk (the baseline, same run).

Run with ``.venv/bin/python benchmarks/bench_garment.py [--frames 120]``.
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=120)
    args = ap.parse_args(argv)
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
