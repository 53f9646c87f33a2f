"""The two solvers side by side: relationship descriptors + warping, and the interaction mesh.

    .venv/bin/python benchmarks/bench_solvers.py [--frames 150] [--repeat 1]

The same binding, the same edit, both solvers (``adapt(..., solver=...)``). Columns: the mean
bone-length error the solver leaves before the exact-length pass; frames on which a joint lies
more than 1 cm deeper behind a surface than its source did; standing foot frames kept within
2 cm of their height above the surface; the largest frame-to-frame joint acceleration against
the source's; the largest bend past a joint limit; seconds (median of ``--repeat``) and seconds
per 100 frames. Generated scenes only (tests need no data); the real clips are in other
benchmarks.
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

from blender_reldesc.core import TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.geometry import Collider  # noqa: E402

FEET = ("LeftFoot", "RightFoot", "LeftToe", "RightToe")


def scenes(frames):
    """(name, skeleton, motion, bind-time mesh, edited mesh, bone_lengths) per scene."""
    skel, motion = S.walk(frames)
    x1 = motion[..., 0].max() + 1.0
    # A bridge: a deck that sags 25 cm in its middle.
    deck_v, deck_t = S.grid(x1 + 2.0, 2.0, int(x1 / 0.1) + 20, 20, origin=(-2.0, -1.0))
    sag = deck_v.copy()
    span = np.clip(sag[:, 0] / x1, 0.0, 1.0)
    sag[:, 2] -= 0.25 * np.sin(np.pi * span)
    yield "bridge sags 25 cm", skel, motion, TriMesh(deck_v, deck_t), TriMesh(sag, deck_t), None
    # Ducking: a beam over the path lowered from 1.95 m to 1.55 m.
    floor = S.grid(x1 + 2.0, 2.0, int(x1 / 0.25) + 8, 8, origin=(-2.0, -1.0))
    beam = S.box((0.5 * x1, 0.0, 2.1), (0.3, 1.6, 0.3), subdivisions=3)
    v, t, ranges = S.merge(floor, beam)
    lowered = v.copy()
    a, b = ranges[1]
    lowered[a:b, 2] -= 0.4
    yield "beam lowered 40 cm", skel, motion, TriMesh(v, t), TriMesh(lowered, t), None
    # Stepping stones, one moved 30 cm sideways.
    sk2, m2, sv, st, stones = S.stepping_stones(frames)
    moved = sv.copy()
    a, b, _ = stones[len(stones) // 2]
    moved[a:b] += [0.0, 0.3, 0.0]
    yield "stepping stone moved 30 cm", sk2, m2, TriMesh(sv, st), TriMesh(moved, st), None
    # Longer legs on the same floor.
    legs = {n: 1.2 * float(np.linalg.norm(motion[0, skel.index(n)] - motion[0, skel.parents[skel.index(n)]]))
            for n in ("LeftLeg", "RightLeg", "LeftFoot", "RightFoot")}
    fv, ft = floor
    yield "legs 20 % longer", skel, motion, TriMesh(fv, ft), TriMesh(fv, ft), legs
    # A sculpted bump under the path.
    bump = fv.copy()
    bump[:, 2] += 0.12 * np.exp(-((bump[:, 0] - 0.5 * x1) ** 2 + bump[:, 1] ** 2) / 0.3)
    yield "bump 12 cm", skel, motion, TriMesh(fv, ft), TriMesh(bump, ft), None


def signed(mesh, points):
    c = Collider(mesh.frame(0), mesh.normals(0), mesh.triangles, mesh.valid, 0.5)
    return c.signed_distance(points.reshape(-1, 3))[0].reshape(points.shape[:-1])


def measure(skel, motion, before, after, result):
    feet = [skel.index(n) for n in FEET]
    sd0 = signed(before, motion)
    sd1 = signed(after, result.positions)
    allowed = np.minimum(np.where(np.isinf(sd0), 0.0, sd0), 0.0)
    deep = np.where(np.isinf(sd1), -np.inf, allowed - sd1)
    penetrating = int((deep > 0.01).any(axis=1).sum())
    standing = sd0[:, feet] < 0.03
    kept = (np.abs(sd1[:, feet] - sd0[:, feet]) < 0.02)[standing].mean() if standing.any() else float("nan")
    acc = np.linalg.norm(np.diff(result.positions, 2, axis=0), axis=-1).max()
    acc0 = np.linalg.norm(np.diff(motion, 2, axis=0), axis=-1).max()
    limit = float(result.joint_limit_violations.max()) if result.joint_limit_violations is not None else 0.0
    return 100 * float(result.bone_length_error.mean()), penetrating, 100 * kept, acc / acc0, limit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    print("| scene | solver | frames | bone err mean % | penetrating frames | standing feet kept within 2 cm % "
          "| acceleration / source | joint limit max ° | s | s / 100 frames |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, skel, motion, before, after, lengths in scenes(args.frames):
        binding = bind(skel, motion, before)
        runs = [("descriptors", "descriptors", None), ("interaction_mesh", "interaction_mesh", None),
                ("interaction_mesh, no joint limits (paper)", "interaction_mesh", {"limits": None})]
        for label, solver, options in runs:
            times = []
            for _ in range(max(1, args.repeat)):
                t = time.perf_counter()
                result = adapt(binding, after, bone_lengths=lengths, solver=solver, solver_options=options)
                times.append(time.perf_counter() - t)
            s = float(np.median(times))
            err, pen, kept, acc, limit = measure(skel, motion, before, after, result)
            F = len(motion)
            print(f"| {name} | {label} | {F} | {err:.3f} | {pen} | {kept:.0f} | {acc:.2f} | {limit:.1f} | {s:.2f} "
                  f"| {100 * s / F:.2f} |", flush=True)


if __name__ == "__main__":
    main()
