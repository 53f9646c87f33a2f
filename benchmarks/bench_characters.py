"""Two characters holding hands (§9): the generated pair adapted together, unedited and with
one partner grown 20 %, against a plain adapt of one character (the baseline, same run).

Run with ``.venv/bin/python benchmarks/bench_characters.py [--frames 300] [--repeat 3]`` (times: medians).
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
from blender_reldesc.core.characters import adapt_partners, bind_partners  # noqa: E402


def timed(run, repeat):
    """(median seconds of ``repeat`` calls of ``run``, its last result)."""
    times, out = [], None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3, help="timings are the median of this many runs")
    args = ap.parse_args(argv)
    skel, (a, b) = S.pair_scene(args.frames)
    mesh = TriMesh(*S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)))
    ba, bb = bind(skel, a, mesh), bind(skel, b, mesh)
    t0 = time.perf_counter()
    partners = bind_partners([ba, bb])
    t_bind = time.perf_counter() - t0
    t0 = time.perf_counter()
    adapt(ba, mesh)
    t_one = time.perf_counter() - t0
    lengths = skel.bone_lengths(b).mean(axis=0)
    grown = {n: 1.2 * lengths[j] for j, n in enumerate(skel.names) if skel.parents[j] >= 0}
    hand = lambda pa, pb: np.linalg.norm(pa[:, skel.index("RightHand")] - pb[:, skel.index("LeftHand")], axis=-1)  # noqa: E731
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.frames} frames, {len(skel)} joints a character; bind_partners {t_bind:.2f} s; "
          f"one character's plain adapt {t_one:.2f} s (baseline)")
    print()
    print("| pair | rounds | s | pair frames/s | hands apart (cm, source 4) | without partners (cm) |")
    print("|---|---|---|---|---|---|")
    for label, lengths_b in (("unedited", None), ("partner grown 20 %", grown)):
        for rounds in (3, 5):
            dt, out = timed(lambda: adapt_partners([ba, bb], mesh, partners, bone_lengths=[None, lengths_b],
                                                   rounds=rounds), args.repeat)
            gap = hand(out[0].positions, out[1].positions)
            alone = hand(adapt(ba, mesh).positions, adapt(bb, mesh, bone_lengths=lengths_b).positions)
            print(f"| {label} | {rounds} | {dt:.2f} | {args.frames / dt:.0f} | {100 * gap.min():.1f}-{100 * gap.max():.1f} "
                  f"| {100 * alone.min():.1f}-{100 * alone.max():.1f} |")

    # The collar tie (``synthetic.pair_scene(hold="wrestle")``), the partner scaled.
    skel, (a, b) = S.pair_scene(args.frames, apart=0.45, hold="wrestle")
    ba, bb = bind(skel, a, mesh), bind(skel, b, mesh)
    partners = bind_partners([ba, bb])
    i = skel.index

    def holds(pa, pb):
        return max(np.abs(np.linalg.norm(p[:, i(h)] - q[:, i(s)], axis=-1) - 0.05).max()
                   for p, q in ((pa, pb), (pb, pa)) for h, s in (("RightHand", "LeftArm"), ("LeftHand", "RightArm")))

    print()
    print("| wrestling hold, partner scaled | s | pair frames/s | hands off the shoulders (cm, worst of 4) "
          "| without partners (cm) |")
    print("|---|---|---|---|---|")
    lengths = skel.bone_lengths(b).mean(axis=0)
    for scale in (0.8, 0.9, 1.0, 1.1, 1.2):
        scaled = {n: scale * lengths[j] for j, n in enumerate(skel.names) if skel.parents[j] >= 0}
        dt, out = timed(lambda: adapt_partners([ba, bb], mesh, partners, bone_lengths=[None, scaled]), args.repeat)
        alone = holds(adapt(ba, mesh).positions, adapt(bb, mesh, bone_lengths=scaled).positions)
        print(f"| {scale:.1f} | {dt:.2f} | {args.frames / dt:.0f} | {100 * holds(out[0].positions, out[1].positions):.1f} "
              f"| {100 * alone:.1f} |")


if __name__ == "__main__":
    main()
