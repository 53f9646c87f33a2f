"""Batch manifests: a pool of 1 worker against 2 on the same manifest, and each job's overhead.

Run with ``.venv/bin/python benchmarks/bench_batch.py``. Generates ``--shots`` shots of a
``--frames``-frame walk over the demo's bridge (the beam lowered a little more in each), one
bind that saves its binding and one bake per shot from it, then runs the manifest with
``--workers 1`` and ``--workers 2`` (``--force``, alternating, ``--repeat`` times each; medians).
A job's overhead is its time in the worker minus what its own report says the job did
(read + adapt + keys + write).
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
import textwrap
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def make_shots(folder, shots, frames):
    code = textwrap.dedent(f"""
        import bpy, os
        from blender_reldesc import demo
        os.makedirs({str(folder / 'shots')!r}, exist_ok=True)
        scene, arm, env, bridge, beam = demo.build_scene(frames={frames})
        bpy.ops.wm.save_as_mainfile(filepath={str(folder / 'shots' / 'base.blend')!r})
        for k in range({shots}):
            beam.location.z = 2.05 - 0.01 * k
            bpy.ops.wm.save_as_mainfile(filepath=os.path.join({str(folder / 'shots')!r}, f"shot{{k:03d}}.blend"))
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, capture_output=True)
    text = """
[[job]]
name = "bind"
operation = "bind"
file = "shots/base.blend"
armature = "Walker"
environment = "Environment"
output = "out/base.blend"
save_binding = "out/walk.npz"
"""
    for k in range(shots):
        text += f"""
[[job]]
name = "shot{k:03d}"
operation = "bake"
file = "shots/shot{k:03d}.blend"
armature = "Walker"
binding = "out/walk.npz"
output = "out/shot{k:03d}.blend"
report = "out/shot{k:03d}.json"
"""
    (folder / "out").mkdir(exist_ok=True)
    path = folder / "manifest.toml"
    path.write_text(text)
    # The same shots' bakes alone, from the binding the first manifest saves.
    bakes = folder / "bakes.toml"
    bakes.write_text(text.split("[[job]]", 2)[0] + "[[job]]" + text.split("[[job]]", 2)[2])
    return path, bakes


def run(manifest, workers):
    summary = manifest.parent / "out" / f"summary{workers}.json"
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "blender_reldesc", "batch", str(manifest), "--workers", str(workers),
                        "--force", "--summary", str(summary)], env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    return wall, json.loads(summary.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shots", type=int, default=20)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        manifest, bakes = make_shots(folder, args.shots, args.frames)
        run(manifest, 2)                                   # the binding file, for the bakes alone
        walls_bakes = {1: [], 2: []}
        walls = {1: [], 2: []}
        job_time = {1: [], 2: []}
        overhead = []
        for _ in range(args.repeat):
            for workers in (1, 2):
                wall, summary = run(manifest, workers)
                walls[workers].append(wall)
                walls_bakes[workers].append(run(bakes, workers)[0])
                job_time[workers] += [j["seconds"] for j in summary["jobs"] if j["name"].startswith("shot")]
                for job in summary["jobs"]:
                    if job["name"].startswith("shot"):
                        rep = json.loads((folder / "out" / f"{job['name']}.json").read_text())
                        work = rep["read_seconds"] + rep["adapt_seconds"] + rep["keys_seconds"] + rep["write_seconds"]
                        overhead.append(job["seconds"] - work)
        one, two = np.median(walls[1]), np.median(walls[2])
        print()
        print(f"{args.shots} shots of a {args.frames}-frame walk (one bind, then a bake per shot from its binding); "
              f"wall time of the whole `batch` command, median of {args.repeat}")
        print()
        print("| workers | wall s | jobs / s | speed-up | a bake in its worker s (median) |")
        print("|---|---|---|---|---|")
        print(f"| 1 | {one:.2f} | {(args.shots + 1) / one:.2f} | 1.00x | {np.median(job_time[1]):.2f} |")
        print(f"| 2 | {two:.2f} | {(args.shots + 1) / two:.2f} | {one / two:.2f}x | {np.median(job_time[2]):.2f} |")
        b1, b2 = np.median(walls_bakes[1]), np.median(walls_bakes[2])
        print(f"| 1, bakes only (binding saved before) | {b1:.2f} | {args.shots / b1:.2f} | 1.00x | |")
        print(f"| 2, bakes only (binding saved before) | {b2:.2f} | {args.shots / b2:.2f} | {b1 / b2:.2f}x | |")
        print()
        print(f"Per-job overhead on a warm worker (job time minus its report's read + adapt + keys + write): "
              f"median {np.median(overhead):.3f} s, 90th percentile {np.percentile(overhead, 90):.3f} s, "
              f"over {len(overhead)} bakes")


if __name__ == "__main__":
    main()
