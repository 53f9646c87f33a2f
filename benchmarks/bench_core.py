"""Core benchmark: bind and adapt speed and accuracy on generated and real motion.

Run with ``make bench`` (or ``.venv/bin/python benchmarks/bench_core.py``).
Prints a Markdown table; medians of ``--repeat`` runs. The baseline rows are
measured in the same run: the paper-literal warping (N_c = 3 only, no
target feed-forward, frame after frame), our solver frame after frame (the
batched solve's baseline) and brute-force proximity search over all triangles.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from blender_reldesc.core import Skeleton, TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.geometry import project_to_coverage  # noqa: E402
from bvh import read_bvh  # noqa: E402

REAL = ROOT.parent / "shared" / "data" / "real" / "walk_cm_30fps.bvh"


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def synthetic_scene(frames):
    skel, motion = S.walk(frames)
    length = motion[:, 0, 0].max() - motion[:, 0, 0].min() + 6.0
    verts, tris = S.grid(length, 4.0, 125, 40, origin=(motion[0, 0, 0] - 3.0, -2.0))
    return "synthetic walk, 10k-tri terrain", skel, motion, verts, tris


def real_scene(max_frames):
    names, parents, motion, fps = read_bvh(REAL, scale=0.01, max_frames=max_frames)
    lo, hi = motion.reshape(-1, 3).min(0) - 1.0, motion.reshape(-1, 3).max(0) + 1.0
    verts, tris = S.grid(hi[0] - lo[0], hi[1] - lo[1], 71, 71, origin=(lo[0], lo[1]))
    return f"real walk ({REAL.name})", Skeleton(names, parents), motion, verts, tris


def sculpt(verts):
    out = verts.copy()
    out[:, 2] += S.hills(amplitude=0.15, wavelength=3.0)(verts[:, 0], verts[:, 1])
    return out


def feet_error(skel, motion, positions, verts_height):
    idx = [j for j, n in enumerate(skel.names) if "Foot" in n and not n.endswith("_end")]
    src = motion[:, idx]
    want = src[..., 2] + verts_height(src[..., 0], src[..., 1])
    return float(np.abs(positions[:, idx, 2] - want).mean())


def run_scene(label, skel, motion, verts, tris, repeat):
    F, J = motion.shape[:2]
    mesh = TriMesh(verts, tris)
    deformed = mesh.with_vertices(sculpt(verts))
    t_bind, binding = timed(lambda: bind(skel, motion, mesh), repeat)
    t0 = time.perf_counter()
    adapt(binding, deformed)              # first adapt: builds the coefficient table
    t_first = time.perf_counter() - t0
    t_adapt, res = timed(lambda: adapt(binding, deformed), repeat)
    t_paper, paper = timed(lambda: adapt(binding, deformed, solver_options=dict(
        final_iterations=3, feed_forward=False, segments=0)), 1)
    t_seq, seq = timed(lambda: adapt(binding, deformed, solver_options=dict(segments=0)), 1)
    t_undeformed, same = timed(lambda: adapt(binding, mesh), 1)
    height = S.hills(amplitude=0.15, wavelength=3.0)
    rows = [
        (label, F, J, mesh.triangle_count, binding.descriptor_count, F / t_bind, F / t_first, F / t_adapt,
         100 * res.bone_length_error.mean(), 100 * res.bone_length_error.max(),
         feet_error(skel, motion, res.positions, height),
         float(np.abs(same.positions - motion).max() / binding.body_height)),
        (label + " — paper-literal solver, sequential (baseline)", F, J, mesh.triangle_count,
         binding.descriptor_count, float("nan"), float("nan"), F / t_paper,
         100 * paper.bone_length_error.mean(), 100 * paper.bone_length_error.max(),
         feet_error(skel, motion, paper.positions, height), float("nan")),
        (label + " — our solver, sequential (segments=0; last column: batched vs sequential / H)", F, J,
         mesh.triangle_count, binding.descriptor_count, float("nan"), float("nan"), F / t_seq,
         100 * seq.bone_length_error.mean(), 100 * seq.bone_length_error.max(),
         feet_error(skel, motion, seq.positions, height),
         float(np.abs(seq.positions - res.positions).max() / binding.body_height)),
    ]
    return rows, binding, mesh


def proximity_speedup(binding, mesh, frames=40):
    """Grid + Newton on candidates vs. Newton against every triangle (brute force)."""
    from blender_reldesc.core.geometry import CoverageIndex
    motion = binding.motion[:frames]
    pts = motion.reshape(-1, 3)
    H = binding.body_height
    t0 = time.perf_counter()
    idx = CoverageIndex(mesh.vertices, mesh.normals(), mesh.triangles, mesh.valid, H)
    pt, tri, _, _ = idx.query(pts, 1e-9 * H)
    t_grid = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = 0
    T = mesh.triangle_count
    for p in pts:
        pp = np.broadcast_to(p, (T, 3))
        b, _, inside = project_to_coverage(pp, mesh.vertices[mesh.triangles], mesh.normals()[mesh.triangles], 1e-9 * H)
        foot = np.einsum("kc,kcd->kd", b, mesh.vertices[mesh.triangles])
        found += int(np.sum(inside & (np.linalg.norm(pp - foot, axis=1) <= H)))
    t_brute = time.perf_counter() - t0
    return len(pts), t_grid, t_brute, len(pt), found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=1000, help="frames of the synthetic walk")
    ap.add_argument("--real-frames", type=int, default=0, help="limit the real clip (0 = all)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}")
    scenes = [synthetic_scene(args.frames)]
    if REAL.exists():
        scenes.append(real_scene(args.real_frames or None))
    else:
        print(f"(real clip not found at {REAL}: skipped)")
    print()
    print("| scene | frames | joints | triangles | descriptors | bind fps | first adapt fps | adapt fps "
          "| bone err mean % | bone err max % | feet vs terrain (m) | undeformed err / H |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    first = None
    for label, skel, motion, verts, tris in scenes:
        rows, binding, mesh = run_scene(label, skel, motion, verts, tris, args.repeat)
        first = first or (binding, mesh)
        for r in rows:
            print("| " + " | ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in r) + " |")
    n, t_grid, t_brute, k_grid, k_brute = proximity_speedup(*first)
    print()
    print("| proximity search (40 frames) | points | pairs found | seconds | speed-up |")
    print("|---|---|---|---|---|")
    print(f"| brute force, every triangle | {n} | {k_brute} | {t_brute:.3f} | 1 |")
    print(f"| coverage grid + Newton | {n} | {k_grid} | {t_grid:.4f} | {t_brute / t_grid:.0f}x |")


if __name__ == "__main__":
    main()
