"""The two solvers side by side: relationship descriptors + warping, and the interaction mesh.

    .venv/bin/python benchmarks/bench_solvers.py [--frames 150] [--repeat 1]

The same binding, the same edit, both solvers (``adapt(..., solver=...)``). Columns: the mean
bone-length error the solver leaves before the exact-length pass; frames on which a joint lies
more than 1 cm deeper behind a surface than its source did; standing foot frames kept within
2 cm of their height above the surface; the largest frame-to-frame joint acceleration against
the source's; the largest bend past a joint limit; seconds (median of ``--repeat``) and seconds
per 100 frames. Generated scenes; with ``--real``, also the shared real clips (issue 36, point 4):
stretches of ``--real-frames`` frames from each of ``--starts`` over a flat floor, the floor lifted
0.2 m rigidly after binding (the largest joint distance from the source lifted 0.2 m) and sculpted
with a 0.25 m Gaussian bump of sigma 0.6 m under a planted foot (``crest``) or 0.5 m beside it
(``slope``): planted foot samples within 2 cm of the terrain + their source height, as
``bench_terrain.py``; frames with a joint more than 1 cm inside.
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
    ap.add_argument("--real", action="store_true", help="also the shared real clips (lift and bump)")
    ap.add_argument("--real-frames", type=int, default=300)
    ap.add_argument("--starts", type=int, nargs="+", default=[0, 1200])
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
    if args.real:
        real(args.real_frames, args.starts)


def real(frames, starts):
    """The real clips' rows (see the module)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_fidelity import DATA, find, floor, planted
    from bench_terrain import placements
    from bvh import read_bvh
    from blender_reldesc.core import Skeleton
    print()
    print("| clip, frames | edit | solver | planted samples within 2 cm | largest error on the lift, cm "
          "| frames with a joint > 1 cm inside | s |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(DATA.glob("*.bvh")):
        for start in starts:
            names, parents, motion, fps = read_bvh(path, scale=0.01 if "_cm_" in path.name else 1.0,
                                                   max_frames=start + frames)
            motion = motion[start:]
            if len(motion) < frames:
                continue
            z0 = float(motion[..., 2].min()) - 0.01
            V, T = floor(motion, z0)
            binding = bind(Skeleton(names, parents), motion, TriMesh(V, T))
            feet = [j for j in (find(names, "foot", side="l"), find(names, "foot", side="r"),
                                find(names, "toe", side="l"), find(names, "toe", side="r")) if j is not None]
            plant = planted(motion, feet, fps)
            where = placements(motion, feet, plant)

            def hill(centre):
                return lambda xy: 0.25 * np.exp(-np.sum((xy - centre) ** 2, axis=-1) / (2 * 0.6 ** 2))

            edits = [("lift 0.2 m", lambda xy: np.full(xy.shape[:-1], 0.2)),
                     ("bump 0.25 m, crest", hill(where["crest"])), ("bump 0.25 m, slope", hill(where["slope"]))]
            for label, g in edits:
                edited = V.copy()
                edited[:, 2] += g(V[:, :2])
                for solver in ("descriptors", "interaction_mesh"):
                    t = time.perf_counter()
                    P = adapt(binding, TriMesh(edited, T), solver=solver).positions
                    s = time.perf_counter() - t
                    err = np.abs(P[:, feet, 2] - motion[:, feet, 2] - g(P[:, feet, :2]))
                    lift = (f"{100 * np.abs(P - motion - [0.0, 0.0, 0.2]).max():.2f}" if label.startswith("lift")
                            else "-")
                    inside = int((P[..., 2] < z0 + g(P[..., :2]) - 0.01).any(axis=1).sum())
                    print(f"| {path.name}, {start}-{start + frames - 1} | {label} | {solver} | "
                          f"{100 * (err[plant] <= 0.02).mean():.1f} % | {lift} | {inside} | {s:.1f} |", flush=True)


if __name__ == "__main__":
    main()
