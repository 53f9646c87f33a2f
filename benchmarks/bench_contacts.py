"""Contact detection and re-positioning on the generated stepping-stones walk.

Run with ``.venv/bin/python benchmarks/bench_contacts.py``. Medians of
``--repeat`` runs; the plain adapt of the same edit is the baseline measured
in the same run, so "re-positioning" is the extra time the contacts cost.
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
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from blender_reldesc.core import TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.contacts import adapt_with_contacts, contact_report, detect_contacts  # noqa: E402
from bench_core import timed  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--floor-triangles", type=int, default=0,
                    help="replace the floor by a grid of about this many triangles (the issue's 50k)")
    args = ap.parse_args(argv)
    skel, motion, verts, tris, stones = S.stepping_stones(args.frames)
    if args.floor_triangles:
        floor_end = stones[0][0]
        x0, y0 = verts[:floor_end, 0].min(), verts[:floor_end, 1].min()
        sx, sy = verts[:floor_end, 0].max() - x0, verts[:floor_end, 1].max() - y0
        cell = np.sqrt(2.0 * sx * sy / args.floor_triangles)
        fine = S.grid(sx, sy, max(1, round(sx / cell)), max(1, round(sy / cell)), origin=(x0, y0))
        stone_parts = [(verts[a:b], tris[np.all((tris >= a) & (tris < b), axis=1)] - a) for a, b, _ in stones]
        verts, tris, ranges = S.merge(fine, *stone_parts)
        stones = [(r[0], r[1], c) for r, (_, _, c) in zip(ranges[1:], stones)]
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    adapt(binding, mesh)                          # build the coefficient table once
    moved = verts.copy()
    a, b, _ = stones[len(stones) // 2]
    moved[a:b] += [0.0, 1.0, 0.0]                 # one stone 1 m sideways
    deformed = mesh.with_vertices(moved)
    t_detect, phases = timed(lambda: detect_contacts(binding), args.repeat)
    t_plain, _ = timed(lambda: adapt(binding, deformed), args.repeat)
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    print("| carried by | frames | stones | triangles | phases | detect s | adapt s (baseline) | adapt + contacts s "
          "| extra per repositioned phase s | valid / repositioned / unresolved | re-embedded / pinned "
          "| largest step source / result (m) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for reembed in (False, True):
        t_full, (result, outcomes) = timed(lambda: adapt_with_contacts(binding, deformed, reembed=reembed),
                                           args.repeat)
        rows, counts = contact_report(outcomes)
        n_moved = max(counts["repositioned"], 1)
        carried = [o.continuity for o in outcomes if o.continuity]
        print(f"| {'re-embedding' if reembed else 'pins only'} | {args.frames} | {len(stones)} | {len(tris)} "
              f"| {len(phases)} | {t_detect:.3f} | {t_plain:.3f} | {t_full:.3f} | {(t_full - t_plain) / n_moved:.3f} "
              f"| {counts['valid']} / {counts['repositioned']} / {counts['unresolved']} "
              f"| {carried.count('re-embedded')} / {carried.count('pins')} "
              f"| {step(motion):.3f} / {step(result.positions):.3f} |")

    live(args.repeat)
    ceiling(args.repeat)


def live(repeat, frames=300):
    """Live preview with contacts: a 300-frame walk over stones, the time from an edit (a stone
    moved) to the first frame shown, the plain per-frame preview's first frame after the same
    edit as the baseline."""
    from blender_reldesc.core import LiveSession
    from blender_reldesc.core.contacts import ContactsPreview
    skel, motion, verts, tris, stones = S.stepping_stones(frames)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    adapt(binding, mesh)
    a, b, _ = stones[len(stones) // 2]
    print()
    print("| live preview, per edit | carried by | frames | with contacts s (median) "
          "| per-frame preview, first frame after the edit s | valid / repositioned / unresolved |")
    print("|---|---|---|---|---|---|")
    for reembed in (False, True):
        preview, plain = ContactsPreview(binding, {"reembed": reembed}), LiveSession(binding)
        times, base, counts = [], [], None
        for k in range(max(repeat, 3)):
            moved = verts.copy()
            moved[a:b] += [0.0, 0.9 + 0.05 * k, 0.0]                 # a new edit each time
            t0 = time.perf_counter()
            preview.pose(frames // 2, moved)
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plain.pose(frames // 2, moved)
            base.append(time.perf_counter() - t0)
            counts = [sum(o.status == s for o in preview.outcomes) for s in ("valid", "repositioned", "unresolved")]
        print(f"| stone moved ~1 m | {'re-embedding' if reembed else 'pins only'} | {frames} "
              f"| {np.median(times):.3f} | {np.median(base):.4f} | {counts[0]} / {counts[1]} / {counts[2]} |")


def ceiling(repeat, frames=120):
    """Root replanning: the ceiling of the paper's Fig. 9 brought down over a 120-frame walk."""
    skel, motion, verts, tris, (a, b), centre = S.ceiling_walk(frames)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    adapt(binding, mesh)
    print()
    print("| ceiling centre (m) | plain adapt s | adapt + contacts (root replanned) s | valid / repositioned / unresolved "
          "| reasons | hips lowered most (m) | largest step source / result (m) |")
    print("|---|---|---|---|---|---|---|")
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    for z in (1.6, 1.5, 1.0):
        v = verts.copy()
        v[a:b, 2] += z - centre[2]
        edited = mesh.with_vertices(v)
        t_plain, plain = timed(lambda: adapt(binding, edited), repeat)
        t_full, (result, outcomes) = timed(lambda: adapt_with_contacts(binding, edited), repeat)
        _, counts = contact_report(outcomes)
        reasons = sorted({o.reason for o in outcomes if o.reason})
        drop = float((plain.positions[:, 0, 2] - result.positions[:, 0, 2]).max())
        print(f"| {z} | {t_plain:.3f} | {t_full:.2f} | {counts['valid']} / {counts['repositioned']} / "
              f"{counts['unresolved']} | {', '.join(reasons)} | {drop:.2f} | {step(motion):.3f} / "
              f"{step(result.positions):.3f} |")


if __name__ == "__main__":
    main()
