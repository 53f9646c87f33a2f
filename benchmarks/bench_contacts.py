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
    args = ap.parse_args(argv)
    skel, motion, verts, tris, stones = S.stepping_stones(args.frames)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    adapt(binding, mesh)                          # build the coefficient table once
    moved = verts.copy()
    a, b, _ = stones[len(stones) // 2]
    moved[a:b] += [0.0, 1.0, 0.0]                 # one stone 1 m sideways
    deformed = mesh.with_vertices(moved)
    t_detect, phases = timed(lambda: detect_contacts(binding), args.repeat)
    t_plain, _ = timed(lambda: adapt(binding, deformed), args.repeat)
    t_full, (result, outcomes) = timed(lambda: adapt_with_contacts(binding, deformed), args.repeat)
    rows, counts = contact_report(outcomes)
    n_moved = max(counts["repositioned"], 1)
    step = lambda m: np.linalg.norm(np.diff(m, axis=0), axis=-1).max()  # noqa: E731
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    print("| frames | stones | phases | detect s | adapt s (baseline) | adapt + contacts s | extra per repositioned phase s "
          "| valid / repositioned / unresolved | largest step source / result (m) |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.frames} | {len(stones)} | {len(phases)} | {t_detect:.3f} | {t_plain:.3f} | {t_full:.3f} | "
          f"{(t_full - t_plain) / n_moved:.3f} | {counts['valid']} / {counts['repositioned']} / {counts['unresolved']} | "
          f"{step(motion):.3f} / {step(result.positions):.3f} |")


if __name__ == "__main__":
    main()
