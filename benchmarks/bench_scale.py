"""Scaling benchmark: bind and adapt time and peak memory against clip length and triangle count.

Run with ``make bench-scale`` (or ``.venv/bin/python benchmarks/bench_scale.py``). Each case runs
in a fresh process, so its peak resident memory is its own. Prints Markdown tables, the growth
exponent of each curve (slope of the least-squares line through the log-log points), and writes
a log-log plot (PNG) when matplotlib is installed (``make bench-scale`` installs it).

Motion: the real walk in ``shared/data/real`` when present (tiled end to end past its 3945
frames; the seams jump, which the solver takes like any other frame), otherwise the generated
walk. Environment: a floor grid under the motion with smooth hills sculpted after binding.
``--code DIR`` measures another checkout of the repository (the "before" of a change), each case
with a time limit.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "real" / "walk_cm_30fps.bvh"


def motion_of(frames):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from blender_reldesc.core import Skeleton
    from blender_reldesc.core import synthetic as S
    if REAL.exists():
        from bvh import read_bvh
        names, parents, motion, _ = read_bvh(REAL, scale=0.01)
        skel = Skeleton(names, parents)
    else:
        skel, motion = S.walk(min(frames, 2000))
    reps = -(-frames // len(motion))
    return skel, np.concatenate([motion] * reps)[:frames]


def floor_under(motion, triangles):
    from blender_reldesc.core import synthetic as S
    lo, hi = motion.reshape(-1, 3).min(0) - 1.0, motion.reshape(-1, 3).max(0) + 1.0
    sx, sy = hi[0] - lo[0], hi[1] - lo[1]
    cell = np.sqrt(2.0 * sx * sy / triangles)
    nx, ny = max(1, round(sx / cell)), max(1, round(sy / cell))
    return S.grid(sx, sy, nx, ny, origin=(lo[0], lo[1]), z=float(motion[..., 2].min()) - 0.01)


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def case(frames, triangles):
    """One measurement, in this process: a dict of figures."""
    from blender_reldesc.core import TriMesh, adapt, bind
    from blender_reldesc.core import synthetic as S
    skel, motion = motion_of(frames)
    verts, tris = floor_under(motion, triangles)
    mesh = TriMesh(verts, tris)
    sculpted = verts.copy()
    sculpted[:, 2] += S.hills(0.15, 3.0)(verts[:, 0], verts[:, 1])
    edited = mesh.with_vertices(sculpted)
    base = peak_mb()
    t0 = time.perf_counter()
    binding = bind(skel, motion, mesh)
    t_bind = time.perf_counter() - t0
    after_bind = peak_mb()
    t0 = time.perf_counter()
    adapt(binding, edited)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = adapt(binding, edited)
    t_again = time.perf_counter() - t0
    import blender_reldesc
    return dict(code=str(pathlib.Path(blender_reldesc.__file__).resolve().parents[1]),
                frames=frames, triangles=mesh.triangle_count, descriptors=binding.descriptor_count,
                bind_s=t_bind, first_adapt_s=t_first, adapt_s=t_again, base_mb=base, bind_peak_mb=after_bind,
                adapt_peak_mb=peak_mb(), bone_err=float(result.bone_length_error.mean()))


def run_case(code, frames, triangles, limit):
    env = dict(os.environ, PYTHONPATH=str(code))
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--case", str(frames), str(triangles)]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit, cwd=str(code))
    except subprocess.TimeoutExpired:
        return dict(frames=frames, triangles=triangles, timeout=limit)
    if out.returncode != 0:
        return dict(frames=frames, triangles=triangles, error=out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def exponent(xs, ys):
    ok = [(x, y) for x, y in zip(xs, ys) if y and y > 0]
    if len(ok) < 2:
        return float("nan")
    lx, ly = np.log([x for x, _ in ok]), np.log([y for _, y in ok])
    return float(np.polyfit(lx, ly, 1)[0])


def table(title, rows, key):
    codes = sorted({r["code"] for r in rows if "code" in r})
    print(f"\n### {title}\n\n(code measured: {', '.join(codes) or 'none'})\n")
    print(f"| {key} | descriptors | bind s | first adapt s | adapt s | adapt fps | peak MB after bind "
          "| peak MB after adapt | bone err % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "timeout" in r or "error" in r:
            what = f"> {r['timeout']} s (stopped)" if "timeout" in r else f"failed: {r['error']}"
            print(f"| {r[key]} | {what} | | | | | | | |")
            continue
        print(f"| {r[key]} | {r['descriptors']} | {r['bind_s']:.2f} | {r['first_adapt_s']:.2f} | {r['adapt_s']:.2f} "
              f"| {r['frames'] / r['adapt_s']:.0f} | {r['bind_peak_mb']:.0f} | {r['adapt_peak_mb']:.0f} "
              f"| {100 * r['bone_err']:.3f} |")
    good = [r for r in rows if "bind_s" in r]
    xs = [r[key] for r in good]
    print(f"\nGrowth exponents (time or memory ∝ {key}^k): "
          + ", ".join(f"{name} k = {exponent(xs, [r[col] for r in good]):.2f}"
                      for name, col in (("bind", "bind_s"), ("first adapt", "first_adapt_s"),
                                        ("adapt", "adapt_s"), ("peak memory", "adapt_peak_mb"))))


def plot(curves, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib not installed: no plot written; `make bench-scale` installs it)")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (key, label, sets) in zip(axes, curves):
        for name, rows, style in sets:
            good = [r for r in rows if "bind_s" in r]
            xs = [r[key] for r in good]
            for col, colour in (("bind_s", "tab:blue"), ("first_adapt_s", "tab:orange"), ("adapt_s", "tab:green")):
                ax.loglog(xs, [r[col] for r in good], style, color=colour,
                          label=f"{name}: {col.replace('_s', '').replace('_', ' ')}")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("blender_reldesc scaling (2-core machine); dashed: before, solid: now")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nplot written to {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", default="300,1000,3000,10000,30000", help="clip lengths over a 10k-triangle floor")
    ap.add_argument("--triangles", default="300,3000,30000,100000,300000,1000000",
                    help="floor triangle counts under a 1000-frame clip (the bind figure of the issue is 300 frames)")
    ap.add_argument("--triangle-frames", type=int, default=1000)
    ap.add_argument("--before", default=None, help="another checkout to measure as the baseline")
    ap.add_argument("--before-json", default=None,
                    help="take the baseline from this --json file of an earlier run instead of measuring it")
    ap.add_argument("--limit", type=float, default=600.0, help="seconds per case before it is stopped")
    ap.add_argument("--plot", default=str(ROOT / "benchmarks" / "scaling.png"))
    ap.add_argument("--json", default=None, help="write every measured case here")
    ap.add_argument("--baseline-only", action="store_true", help="measure only the --before checkout")
    ap.add_argument("--case", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:
        print(json.dumps(case(*args.case)))
        return
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}; motion: {REAL.name if REAL.exists() else 'generated walk'}")
    frames = [int(x) for x in args.frames.split(",") if x]
    tris = [int(x) for x in args.triangles.split(",") if x]
    codes = [("now", ROOT)] + ([("before", pathlib.Path(args.before).resolve())] if args.before else [])
    if args.baseline_only:
        codes = codes[1:]
    results = {}
    if args.before_json:
        results["before"] = json.loads(pathlib.Path(args.before_json).read_text())["before"]
        codes = [c for c in codes if c[0] != "before"]
    for name, code in codes:
        results[name] = dict(
            frames=[run_case(code, f, 10_000, args.limit) for f in frames],
            triangles=[run_case(code, args.triangle_frames, t, args.limit) for t in tris])
        table(f"{name}: clip length (10k-triangle floor)", results[name]["frames"], "frames")
        table(f"{name}: triangles ({args.triangle_frames} frames)", results[name]["triangles"], "triangles")
    for name in ("before",) if "before" in results and args.before_json else ():
        table(f"{name} (from {args.before_json}): clip length (10k-triangle floor)", results[name]["frames"], "frames")
        table(f"{name} (from {args.before_json}): triangles ({args.triangle_frames} frames)",
              results[name]["triangles"], "triangles")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    styles = {"now": "o-", "before": "s--"}
    plot([("frames", "frames (10k-triangle floor)", [(n, results[n]["frames"], styles[n]) for n in results]),
          ("triangles", f"triangles ({args.triangle_frames} frames)",
           [(n, results[n]["triangles"], styles[n]) for n in results])], args.plot)


if __name__ == "__main__":
    main()
