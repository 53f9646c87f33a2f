"""Retargeting (``core.retarget``) against the naive retarget, on real clips onto generated rigs.

Run with ``.venv/bin/python benchmarks/bench_retarget.py [--frames N]``. The clips are the two
shared real captures (``../shared/data/real/``; skipped when absent): a walk (Mixamo-style names
without the namespace, a lying rest, centimetres, Y up) and an in-place capture (Rigify-style
names, no hands). Targets are generated rigs of four conventions (``synthetic.convention_rest``):
Mixamo with fingers, Rigify, Unreal, arbitrary names; with their own proportions, legs 15 %
longer and shorter, arms down, in an A-pose or in a T-pose. "naive" copies each bone's turn through the map and
scales the hips' path by the legs' ratio (what the simple add-ons do); "ours" is ``retarget``.
Columns (``retarget.measure``): pose similarity (mean cosine of mapped bones' directions), the
stance samples' height change within 2 cm, their horizontal speed against the source's, and the
same height measure with a 0.15 m bump sculpted under the target's path after the clip was
recorded (ours adapts to it; naive cannot know it). Times: one run each.
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

from blender_reldesc.core import Skeleton, TriMesh  # noqa: E402
from blender_reldesc.core import retarget as R  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402

REAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
#: (file, scale, first frame): the walk's first stretch stands still, then it walks (900), and it
#: crouches low with its arms up (2700); a clip's first frames alone measured only the standing.
CLIPS = (("walk_cm_30fps.bvh", 0.01, 0), ("walk_cm_30fps.bvh", 0.01, 900), ("walk_cm_30fps.bvh", 0.01, 2700),
         ("rigify_inplace_24fps.bvh", 1.0, 0))
TARGETS = (("mixamo", 1.0, "down"), ("mixamo", 1.15, "down"), ("mixamo", 0.85, "down"), ("rigify", 1.0, "T"),
           ("rigify", 1.0, "A"), ("ue", 1.15, "T"), ("ue", 0.85, "A"), ("arbitrary", 0.85, "down"))


def clip(name, scale, start, frames):
    from bvh import read_bvh_clip
    c = read_bvh_clip(str(REAL / name), scale=scale, max_frames=start + frames)
    sl = slice(start, start + frames)
    return Skeleton(c["names"], c["parents"]), c["rest"], c["positions"][sl], c["turns"][sl], c["fps"]


def bumped(motion, floor_z, height=0.15, radius=0.35):
    """A fine flat floor under the clip and the same floor with a bump where the clip's hips pass
    at its middle frame."""
    lo = motion[..., :2].reshape(-1, 2).min(axis=0) - 0.6
    hi = motion[..., :2].reshape(-1, 2).max(axis=0) + 0.6
    n = np.maximum(np.ceil((hi - lo) / 0.05).astype(int), 1)
    v, t = S.grid(hi[0] - lo[0], hi[1] - lo[1], n[0], n[1], origin=tuple(lo), z=floor_z)
    c = motion[len(motion) // 2, 0, :2]
    bump = v.copy()
    bump[:, 2] += height * np.exp(-np.sum((v[:, :2] - c) ** 2, axis=1) / (2 * radius ** 2))
    return TriMesh(v, t), TriMesh(bump, t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.frames} frames of each clip from the frame given")
    print()
    print("| clip | target | legs | rest arms | mapped / target joints | method | pose similarity "
          "| planted within 2 cm | stance slide / source (m/s) | bump: planted within 2 cm | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, scale, start in CLIPS:
        if not (REAL / name).exists():
            print(f"| {name} | (not found: skipped) |")
            continue
        sk, rest, motion, turns, fps = clip(name, scale, start, args.frames)
        ref = R.reference_pose(sk, rest, motion)[0]
        floor_z = R.floor_height(sk, motion, R.find_roles(sk, ref)[0])
        flat, bump = bumped(motion, floor_z)
        for conv, legs, arms in TARGETS:
            tsk, trest = S.convention_rest(conv, legs=legs, arms=arms)
            t0 = time.perf_counter()
            ours = R.retarget(sk, rest, motion, tsk, trest, source_turns=turns, fps=fps)
            dt = time.perf_counter() - t0
            naive = R.naive(sk, rest, motion, tsk, trest, ours.bone_map, source_turns=turns)
            on_bump = R.retarget(sk, rest, motion, tsk, trest, flat, ours.bone_map, edited=bump,
                                 source_turns=turns, fps=fps)
            for label, pos, bump_pos in (("naive", naive, naive), ("ours", ours.positions, on_bump.positions)):
                m = R.measure(sk, rest, motion, tsk, trest, pos, ours.bone_map, fps=fps)
                mb = R.measure(sk, rest, motion, tsk, trest, bump_pos, ours.bone_map, fps=fps, ground=flat,
                               ground_now=bump)
                print(f"| {name.split('_')[0]} {start}- | {conv} | {legs:g} | {arms} | {len(ours.bone_map.bones)} / {len(tsk)} "
                      f"| {label} | {m['pose_similarity']:.4f} | {100 * m['planted_within']:.1f} % "
                      f"| {m['stance_slide']:.3f} / {m['source_stance_slide']:.3f} "
                      f"| {100 * mb['planted_within']:.1f} % | {dt if label == 'ours' else float('nan'):.1f} |")


if __name__ == "__main__":
    main()
