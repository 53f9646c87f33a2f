"""An obstacle brought down onto the path of the real clips (issue 36, point 3), the core alone.

    .venv/bin/python benchmarks/bench_obstacles.py [--frames 300] [--starts 1200 2100 3000 3600] [--below 0.08]
    .venv/bin/python benchmarks/bench_obstacles.py --post [--sides 0 0.15] [--width 0.3]

``--post``: instead of the slab, a post ``--width`` square and 2.5 m tall, bound 8 m up and set
down on the floor after binding, its centre ``--sides`` metres to the left of the hips at the
stretch's middle frame (the walk's left, square to its heading): a person steps round it. The
columns are the slab's, "hips down" becoming how far the hips went aside at most.

Per clip in ../shared/data/real and stretch of it (``--frames`` frames from each of ``--starts``):
the clip bound over a flat floor with a 2 m x 2 m slab, 0.1 m thick, 6 m up (out of every
descriptor's reach), centred over the hips at the stretch's middle frame; after binding the slab is
lowered so that its underside is ``--below`` under the highest the head joint reaches while the
hips are under it (the contacts paper's Fig. 9); then ``adapt_with_contacts`` (re-positioning and
root replanning on, as ``bake --reposition-contacts``).

Columns: frames where a bone of the trunk (hips, spine, neck, head; points every 1/16 of each
bone) is inside the slab's box, for the source, the plain adapt and the result; the same for any
bone (arms included: ``contacts.avoidance`` keeps free limbs out); the root windows
(``AdaptResult.root_windows``: status, frames still through); how far the hips went down; planted
foot samples (``bench_fidelity.planted``) whose height above the floor is their source height
within 2 cm, and the median distance of planted samples from their source place; the largest
frame-to-frame joint step against the source's; contacts valid / re-positioned / unresolved; and
the seconds of the plain adapt and of the adapt with contacts, measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fidelity import DATA, find, planted  # noqa: E402
from bvh import read_bvh  # noqa: E402

from blender_reldesc.core import Skeleton, TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.contacts import adapt_with_contacts, contact_report, detect_contacts  # noqa: E402
from blender_reldesc.core.contacts.balance import bone_samples  # noqa: E402
from blender_reldesc.core.contacts.replanning import trunk_parts  # noqa: E402
from blender_reldesc.core.contacts.repositioning import largest_step  # noqa: E402

SLAB = (2.0, 2.0, 0.1)


def scene(motion, below):
    """Floor and slab vertices, triangles, the lowered vertices, the slab's box (lo, hi) once
    lowered, the floor's height and the floor alone (vertices, triangles)."""
    z0 = float(motion[..., 2].min()) - 0.01
    lo, hi = motion.reshape(-1, 3).min(0) - 1.5, motion.reshape(-1, 3).max(0) + 1.5
    floor = S.grid(hi[0] - lo[0], hi[1] - lo[1], int((hi[0] - lo[0]) / 0.1), int((hi[1] - lo[1]) / 0.1),
                   origin=(lo[0], lo[1]), z=z0)
    mid = motion[len(motion) // 2, 0]
    V, T, (_, (a, b)) = S.merge(floor, S.box((mid[0], mid[1], 6.0), SLAB, subdivisions=4))
    head = int(np.argmax(np.median(motion[..., 2], axis=0)))
    under = np.all(np.abs(motion[:, 0, :2] - mid[:2]) < 0.5 * SLAB[0], axis=1)
    bottom = float(motion[under, head, 2].max()) - below
    lowered = V.copy()
    lowered[a:b, 2] += bottom + 0.5 * SLAB[2] - 6.0
    box = (np.r_[mid[:2] - 0.5 * np.array(SLAB[:2]), bottom], np.r_[mid[:2] + 0.5 * np.array(SLAB[:2]), bottom + SLAB[2]])
    return V, T, lowered, box, z0, floor


def post_scene(motion, width, side, hips_lr):
    """``scene`` with a post instead of the slab: ``width`` x ``width`` x 2.5 m, bound 8 m up, set
    down on the floor ``side`` metres to the left of the hips at the middle frame (left: towards
    the left hip joint of ``hips_lr`` (left, right), level)."""
    z0 = float(motion[..., 2].min()) - 0.01
    lo, hi = motion.reshape(-1, 3).min(0) - 1.5, motion.reshape(-1, 3).max(0) + 1.5
    floor = S.grid(hi[0] - lo[0], hi[1] - lo[1], int((hi[0] - lo[0]) / 0.1), int((hi[1] - lo[1]) / 0.1),
                   origin=(lo[0], lo[1]), z=z0)
    m = len(motion) // 2
    left = motion[m, hips_lr[0], :2] - motion[m, hips_lr[1], :2]
    left /= np.linalg.norm(left)
    c = motion[m, 0, :2] + side * left
    V, T, (_, (a, b)) = S.merge(floor, S.box((c[0], c[1], 8.0), (width, width, 2.5), subdivisions=4))
    lowered = V.copy()
    lowered[a:b, 2] += z0 + 1.25 - 8.0
    box = (np.r_[c - 0.5 * width, z0], np.r_[c + 0.5 * width, z0 + 2.5])
    return V, T, lowered, box, z0, floor


def in_box(skel, P, box, joints=None):
    """(F,) frames where a point along a bone of ``P`` (F,J,3) ending at one of ``joints`` (default
    all), sampled every 1/16 of the bone, is inside the box (a bone through a 10 cm slab has a
    sample in it)."""
    lo, hi = box
    pts = bone_samples(skel, P, tuple(np.linspace(0.0, 1.0, 17)))
    child = np.flatnonzero(skel.parents >= 0)
    pick = np.ones(len(child), bool) if joints is None else np.isin(child, joints)
    pts = pts.reshape(len(P), 17, len(child), 3)[:, :, pick]
    return np.all((pts > lo) & (pts < hi), axis=-1).any(axis=(1, 2))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--starts", type=int, nargs="+", default=[1200, 2100, 3000, 3600])
    ap.add_argument("--below", type=float, default=0.08, help="the slab's underside under the head's top (m)")
    ap.add_argument("--builtin", action="store_true",
                    help="also the built-in rig (bpy, ``bench_terrain.BuiltinRig``) on the same scenes")
    ap.add_argument("--post", action="store_true", help="a post set down on the path instead of the slab")
    ap.add_argument("--sides", type=float, nargs="+", default=[0.0, 0.15],
                    help="with --post: its centre this far left of the hips (m)")
    ap.add_argument("--width", type=float, default=0.3, help="with --post: its width (m)")
    args = ap.parse_args(argv)
    clips = sorted(DATA.glob("*.bvh"))
    if not clips:
        print(f"no clips in {DATA}: nothing to measure")
        return 0
    what = "post" if args.post else "slab"
    print(f"| clip, frames{', post left of hips m' if args.post else ''} | trunk in {what}: source / plain / result "
          f"| any bone: source / result | root windows "
          f"| hips {'aside' if args.post else 'down'} most m | planted within 2 cm | planted moved median cm "
          "| largest step / source "
          "| valid / repositioned / unresolved | plain s | with contacts s |"
          + (f" built-in rig: trunk in {what} | built-in rig: any bone | built-in rig: planted within 2 cm "
             "| built-in rig: largest step / source |" if args.builtin else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|---|" if args.builtin else ""))
    for path, start, side in ((p, s, d) for p in clips for s in args.starts
                              for d in (args.sides if args.post else [None])):
        names, parents, motion, fps = read_bvh(path, scale=0.01 if "_cm_" in path.name else 1.0,
                                               max_frames=start + args.frames)
        motion = motion[start:]
        if len(motion) < args.frames:
            continue
        skel = Skeleton(names, parents)
        if args.post:
            hips_lr = [_hip_of(skel, find(names, "foot", side=s)) for s in ("l", "r")]
            V, T, lowered, box, z0, floor = post_scene(motion, args.width, side, hips_lr)
        else:
            V, T, lowered, box, z0, floor = scene(motion, args.below)
        mesh = TriMesh(V, T)
        binding = bind(skel, motion, mesh)
        edited = mesh.with_vertices(lowered)
        trunk, _ = trunk_parts(binding)
        t0 = time.perf_counter()
        plain = adapt(binding, edited)
        t_plain = time.perf_counter() - t0
        phases = detect_contacts(binding, fps=fps)
        t0 = time.perf_counter()
        result, outcomes = adapt_with_contacts(binding, edited, phases=phases, fps=fps)
        t_full = time.perf_counter() - t0
        _, counts = contact_report(outcomes)
        feet = [j for j in (find(names, "foot", side="l"), find(names, "foot", side="r"),
                            find(names, "toe", side="l"), find(names, "toe", side="r")) if j is not None]
        plant = planted(motion, feet, fps)
        P = result.positions
        height_ok = np.abs(P[:, feet, 2] - motion[:, feet, 2]) < 0.02
        moved = np.linalg.norm(P[:, feet] - motion[:, feet], axis=-1)
        hips = binding.skeleton.parents.tolist().index(-1)
        windows = ", ".join(f"{w.start}-{w.end} {w.status}" + (f" ({len(w.through)} through)" if len(w.through) else "")
                            for w in result.root_windows) or "none"
        if args.post:
            away = float(np.linalg.norm((P[:, hips] - plain.positions[:, hips])[:, :2], axis=1).max())
        else:
            away = float((plain.positions[:, hips, 2] - P[:, hips, 2]).max())
        print(f"| {path.name}, {start}-{start + len(motion) - 1}{f', {side:.2f}' if args.post else ''} "
              f"| {in_box(skel, motion, box, trunk).sum()} / {in_box(skel, plain.positions, box, trunk).sum()} "
              f"/ {in_box(skel, P, box, trunk).sum()} | {in_box(skel, motion, box).sum()} / {in_box(skel, P, box).sum()} "
              f"| {windows} | {away:.2f} "
              f"| {100 * height_ok[plant].mean():.1f} % | {100 * float(np.median(moved[plant])):.1f} "
              f"| {largest_step(P) / largest_step(motion):.2f} "
              f"| {counts['valid']} / {counts['repositioned']} / {counts['unresolved']} | {t_plain:.2f} | {t_full:.2f} |"
              + (_builtin(path, start, names, skel, motion, z0, floor, box, trunk, feet, plant)
                 if args.builtin else ""), flush=True)
    return 0


def _hip_of(skel, foot):
    """The joint below the root on the way down to ``foot`` (a hip joint)."""
    j = foot
    while skel.parents[skel.parents[j]] >= 0:
        j = int(skel.parents[j])
    return j


def _builtin(path, start, names, skel, motion, z0, floor, box, trunk, feet, plant):
    """The built-in rig's columns. Its Shrinkwrap targets the floor alone (on the floor and slab
    as one mesh, the Empties' projections met the slab above the feet and raised the body into
    it: 113-195 frames of the trunk in the slab where the source has 42-65); the rig has nothing
    that sees an obstacle overhead, so it plays the source's trunk through the slab."""
    from bench_terrain import BuiltinRig
    P = BuiltinRig(path, start, len(motion), names, motion, z0, *floor, feet).play(floor[0])
    height_ok = np.abs(P[:, feet, 2] - motion[:, feet, 2]) < 0.02
    return (f" {in_box(skel, P, box, trunk).sum()} | {in_box(skel, P, box).sum()} | {100 * height_ok[plant].mean():.1f} % "
            f"| {largest_step(P) / largest_step(motion):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
