"""A taller character under a beam it cleared: the demo's bridge walk with longer legs, the beam not moved.

    .venv/bin/python benchmarks/bench_taller.py [--legs 1.0 1.1 1.2 1.3]

For each leg factor (thighs and shins, ``demo.lengthen_legs``) the walk is bound, the legs lengthened,
baked through the product's bake job; and, for comparison, the unchanged character under the beam
lowered by the hips' rise. Columns: the head tip's least clearance under the beam (source: 13 cm),
the hips' median rise away from the beam, the mean bone-length error, the bake's seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _run(legs, drop):
    import bpy
    from mathutils import Vector

    from blender_reldesc import demo, jobs
    from blender_reldesc.demo.runs import _bind
    s = demo.prepare("start", None)
    _bind(s.scene, s.arm, s.env)
    beam = bpy.data.objects["Beam"]
    if legs != 1.0:
        demo.lengthen_legs(s.arm, legs)
    beam.location.z -= drop
    bpy.context.view_layer.update()
    s.scene.frame_set(1)
    t = time.perf_counter()
    report = jobs.bake_job(s.scene, s.arm)
    seconds = time.perf_counter() - t
    corners = np.array([beam.matrix_world @ Vector(c) for c in beam.bound_box])
    bottom, x0, x1 = corners[:, 2].min(), corners[:, 0].min(), corners[:, 0].max()
    heads, hips = [], []
    for f in range(s.scene.frame_start, s.scene.frame_end + 1):
        s.scene.frame_set(f)
        heads.append(tuple(s.arm.matrix_world @ s.arm.pose.bones["Head"].tail))
        hips.append(tuple(s.arm.matrix_world @ s.arm.pose.bones["Hips"].head))
    heads, hips = np.array(heads), np.array(hips)
    bound = jobs.Bound(s.arm)
    source_hips = bound.binding.motion[:, bound.binding.skeleton.index("Hips")]
    under = (heads[:, 0] > x0 - 0.1) & (heads[:, 0] < x1 + 0.1)
    away = np.abs(hips[:, 0] - 0.5 * (x0 + x1)) > 1.5
    return dict(clearance=float((bottom - heads[under, 2]).min()),
                rise=float(np.median(hips[away, 2] - source_hips[away, 2])),
                error=report["bone_length_error_mean"], seconds=seconds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--legs", type=float, nargs="+", default=[1.0, 1.1, 1.2, 1.3])
    args = ap.parse_args(argv)
    print("| legs | beam lowered (m) | head clearance under the beam (cm) | hips' rise away from it (cm) "
          "| bone-length error mean (%) | bake s |")
    print("|---|---|---|---|---|---|")
    rows = [(legs, 0.0) for legs in args.legs]
    for legs, drop in rows:
        r = _run(legs, drop)
        print(f"| {legs:.2f} | {drop:.2f} | {100 * r['clearance']:.1f} | {100 * r['rise']:.1f} | "
              f"{100 * r['error']:.3f} | {r['seconds']:.1f} |", flush=True)
        if legs != 1.0:                      # the same character under the beam lowered by its rise
            q = _run(1.0, r["rise"])
            print(f"| 1.00 | {r['rise']:.2f} | {100 * q['clearance']:.1f} | {100 * q['rise']:.1f} | "
                  f"{100 * q['error']:.3f} | {q['seconds']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
