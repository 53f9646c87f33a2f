"""Locomotion and crowds (carpet unrolling): quality on generated and real scenes, and crowd speed.

Run with ``.venv/bin/python benchmarks/bench_locomotion.py``. The crowd table times the same
characters walked one by one (each its own ``walk``) as the baseline measured in the same run,
twice: each walk after its clip was laid (``Carpet.layout`` keeps four layouts, and characters
starting at other clip frames play clips of other lengths), the median of ``--repeat`` walks per
character, summed; and as a script walking them in turn meets them, each laying its clip. Crowd
walks: medians of ``--repeat`` runs, the crowd's layout laid before. The real walk
(``../shared/data/real/walk_cm_30fps.bvh``, frames 3175-3275, a straight stretch) is used when
present; the other shared clip (``rigify_inplace_24fps.bvh``) stands in place, and the feet
table shows what ``bind_carpet`` says of it.
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
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.errors import InputError  # noqa: E402
from blender_reldesc.core.locomotion import STRETCH, Terrain, bind_carpet, lateral_paths, walk  # noqa: E402
from blender_reldesc.core.locomotion.crowd import body_joints, trunk_chain  # noqa: E402

REAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "walk_cm_30fps.bvh"
INPLACE = REAL.with_name("rigify_inplace_24fps.bvh")


def bends(X, chain):
    """(F,K) the bends (degrees) along the joint chain of poses X (F,J,3), its bones of no length
    (a real rig's coincident joints) left out."""
    u = X[:, chain[1:]] - X[:, chain[:-1]]
    u = u[:, np.linalg.norm(u, axis=-1).min(axis=0) > 1e-6]
    cos = np.einsum("fkd,fkd->fk", u[:, 1:], u[:, :-1]) / (np.linalg.norm(u[:, 1:], axis=-1)
                                                           * np.linalg.norm(u[:, :-1], axis=-1))
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def quality(name, carpet, path, terrain, fps=30.0, circle=None, **options):
    """One row of the quality table for a walk of ``carpet`` along ``path`` over ``terrain``."""
    t0 = time.perf_counter()
    r = walk(carpet, [path], terrain, **options)
    seconds = time.perf_counter() - t0
    P, held = r.positions[0], ~np.isnan(r.pins[0, ..., 0])
    played = carpet.layout(r.clip_frames.max() + 1).binding.motion[r.clip_frames[0]]
    ground = Terrain(terrain)
    gap, slide = held_gap(carpet, P, held, played, ground), 0.0
    for j in carpet.standing.tolist():
        both = held[1:, j] & held[:-1, j]
        if both.any():
            slide = max(slide, float(np.linalg.norm(np.diff(P[:, j, :2], axis=0), axis=1)[both].max()) * fps)
    root = P[:, carpet.root]
    if circle is not None:                     # across the path, against the source's own offset
        (cx, cy), radius = circle
        off = float(np.abs(radius - np.hypot(root[:, 0] - cx, root[:, 1] - cy) - played[:, carpet.root, 1]).max())
    else:
        off = float(np.abs(signed_offset(root[:, :2], path[:, :2]) - played[:, carpet.root, 1]).max())
    sk = carpet.skeleton
    bones = np.linalg.norm(P[:, 1:] - P[:, sk.parents[1:]], axis=-1)
    src = np.linalg.norm(carpet.motion[:, 1:] - carpet.motion[:, sk.parents[1:]], axis=-1).mean(axis=0)
    step = np.linalg.norm(np.diff(P, axis=0), axis=-1).max()
    src_step = np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()
    spacing = np.mean(np.abs(r.stretch[0] - 1.0) <= STRETCH + 1e-3) if r.stretch.size else 1.0
    chain = trunk_chain(sk, body_joints(sk, carpet.standing), carpet.motion)
    bend = np.abs(bends(P, chain) - bends(played, chain)).max()
    return (f"| {name} | {P.shape[0]} | {held.any(axis=1).mean():.2f} | {100 * gap:.2f} | {100 * slide:.2f} "
            f"| {100 * off:.1f} | {step / src_step:.2f} | {bend:.1f} | {1000 * np.abs(bones - src).max():.1f} "
            f"| {100 * spacing:.0f} % | {len(r.warnings)} | {seconds:.2f} |")


def held_gap(carpet, P, held, played, ground):
    """The largest distance (m) of a held standing joint of poses ``P`` (F,J,3) (``held`` (F,J))
    from the terrain under it plus its height in the ``played`` source."""
    gap = 0.0
    for j in carpet.standing.tolist():
        h = held[:, j]
        if h.any():
            z, _ = ground.heights(P[h, j, :2], P[h, j, 2])
            gap = max(gap, float(np.abs(P[h, j, 2] - z - played[h, j, 2]).max()))
    return gap


def feet_of(carpet, r, c, path, ground, played_all, fps):
    """Character c's planted samples in the walk ``r`` along ``path`` (``feet_on_hills``' rules):
    (height errors (n,), pinned (n,) bool, mean slide m/s, the source's mean slide, coverage: how
    far along its path the root got when it stopped, over the path's length)."""
    H = carpet.body_height
    low = carpet.motion[..., 2].min(axis=0)
    n = int(r.path_frames[c])
    played, P = played_all[r.clip_frames[c, :n]], r.positions[c, :n]
    speed = np.linalg.norm(np.gradient(played, axis=0), axis=-1) * fps
    errs, slide, src_slide, pinned = [], [], [], []
    for j in carpet.standing.tolist():
        h = (played[:, j, 2] <= low[j] + 0.015 * H) & (speed[:, j] <= 0.12 * H)
        if not h.any():
            continue
        z, _ = ground.heights(P[:, j, :2], P[:, j, 2])
        errs.append(np.abs(P[h, j, 2] - z[h] - played[h, j, 2]))
        pinned.append(~np.isnan(r.pins[c, :n, j, 0])[h])
        both = h[1:] & h[:-1]
        slide.append(np.linalg.norm(np.diff(P[:, j, :2], axis=0), axis=1)[both] * fps)
        src_slide.append(np.linalg.norm(np.diff(played[:, j, :2], axis=0), axis=1)[both] * fps)
    seg = np.linalg.norm(np.diff(path[:, :2], axis=0), axis=1)
    # Arc length of the path point nearest the root at the stop.
    root = P[-1, carpet.root, :2]
    a, ab = path[:-1, :2], np.diff(path[:, :2], axis=0)
    t = np.clip(np.einsum("sk,sk->s", root - a, ab) / (ab * ab).sum(1), 0, 1)
    k = int(np.argmin(np.linalg.norm(a + t[:, None] * ab - root, axis=1)))
    reached = (seg[:k].sum() + t[k] * seg[k]) / seg.sum()
    return (np.concatenate(errs), np.concatenate(pinned), float(np.mean(np.concatenate(slide))),
            float(np.mean(np.concatenate(src_slide))), reached)


def feet_on_hills(label, carpet, fps, rows):
    """Rows of the feet table (issue 35): ``carpet`` walked along an 8 m straight line, a quarter
    circle of radius 2 m, an S-curve and a half circle of radius 1 m, in one call, over 30 m x 30 m
    of hills (0.3 m amplitude, 6 m wavelength, a 0.25 m grid, heights read from the mesh).

    A *planted sample* is a standing joint on a frame where the played source has it planted by
    the contacts paper's test with the product's defaults (``detect_contacts``): within 0.015 body
    heights of its lowest height and slower than 0.12 body heights a second. It is *on the
    terrain* when its height above the terrain under it is its source height above the floor
    within 2 cm. Slide: the mean horizontal speed of planted samples on consecutive planted
    frames, against the source's own. Coverage: how far along its path the character's root got
    when it stopped, over the path's length (the root is up to a step behind its feet)."""
    hills = TriMesh(*S.grid(30.0, 30.0, 120, 120, origin=(-10.0, -15.0), height=S.hills(0.3, 6.0)))
    th = np.linspace(0.0, 0.5 * np.pi, 60)
    x = np.linspace(0.0, 6.0, 80)
    half = np.linspace(0.0, np.pi, 90)
    shapes = [("straight 8 m", np.array([[0.0, -5.0, 0.0], [8.0, -5.0, 0.0]])),
              ("quarter circle r 2 m", np.c_[2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.zeros_like(th)]),
              ("S-curve 6 m", np.c_[x, 5.0 + 0.8 * np.sin(x * np.pi / 3.0), np.zeros_like(x)]),
              ("half circle r 1 m", np.c_[10.0 + np.sin(half), -12.0 + 1.0 - np.cos(half), np.zeros_like(half)])]
    r = walk(carpet, [p for _, p in shapes], hills)
    ground = Terrain(hills)
    played_all = carpet.extended(int(r.clip_frames.max()) + 1)
    for c, (name, path) in enumerate(shapes):
        n = int(r.path_frames[c])
        e, pn, slide, src_slide, reached = feet_of(carpet, r, c, path, ground, played_all, fps)
        warned = sum(w.startswith(f"path {c}:") for w in r.warnings)
        rows.append(f"| {label} | {name} | {n} | {100 * reached:.0f} % | {len(e)} | {100 * (e <= 0.02).mean():.1f} % "
                    f"| {100 * np.median(e):.2f} | {slide:.3f} / {src_slide:.3f} "
                    f"| {100 * pn.mean():.0f} % | {100 * (e[~pn] <= 0.02).mean() if (~pn).any() else 100:.0f} % | {warned} |")


def phases_table():
    """Every start phase (issue 35: a crowd's characters start at different clip frames): 30
    characters side by side over 30 cm hills (6 m wavelength), each starting at another frame of
    the gait cycle, for the generated walk and fast gait and a generated walk and run on four rig
    conventions. Per clip: the largest joint step over the source's largest, worst and median
    character, and how many characters pass 1.12x (a first frame that settles a knee the wrong
    way snaps when it is turned back)."""
    print()
    print("| clip | characters (start phases) | step / source, worst | median | characters over 1.12x |")
    print("|---|---|---|---|---|")
    clips = [("generated walk", S.walk(150)), ("generated fast gait (2.6 m/s)", S.walk(150, speed=2.6, stride=2.2))]
    for convention in ("mixamo", "ue", "rigify", "bvh"):
        for gait in ("walk", "run"):
            sk, off, roles = S.convention_rig(convention)
            clips.append((f"{convention} rig, generated {gait}", (sk, S.locomotion(sk, off, roles, frames=150, gait=gait))))
    if REAL.exists():
        from bvh import read_bvh
        names, parents, m, _ = read_bvh(str(REAL), scale=0.01)
        clips.append(("real walk (frames 3175-3354)", (Skeleton(names, parents), m[3175:3355])))
    C, length = 30, 8.0
    width = C * 0.5 + 10.0
    terrain = TriMesh(*S.grid(length + 6.0, width, 110, 120, origin=(-3.0, -width / 2), height=S.hills(0.3, 6.0)))
    paths = lateral_paths(np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]), C, 0.5)
    for label, (sk, motion) in clips:
        carpet = bind_carpet(sk, motion, ground=0.0) if label.startswith("real") else bind_carpet(sk, motion)
        offsets = np.arange(C) * max(1, carpet.period // C) % carpet.period
        r = walk(carpet, paths, terrain, offsets)
        src = np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()
        worst = np.array([np.linalg.norm(np.diff(r.positions[c, :int(r.path_frames[c])], axis=0), axis=-1).max() / src
                          for c in range(C)])
        print(f"| {label} | {C} ({len(set(offsets.tolist()))}) | {worst.max():.2f} | {np.median(worst):.2f} "
              f"| {int((worst > 1.12).sum())} |")


def feet_table(carpet):
    """Feet on hills and paths walked to their ends (issue 35): the generated walk, its fast gait,
    a walk and a run (both feet off the ground between steps) on generated Mixamo (fingers) and
    Unreal (floor root, twist leaves) rigs, and the shared real walk."""
    rows = []
    feet_on_hills("generated walk", carpet, 30.0, rows)
    fsk, fm = S.walk(150, speed=2.6, stride=2.2)
    feet_on_hills("generated fast gait (2.6 m/s)", bind_carpet(fsk, fm), 30.0, rows)
    for convention, gait in (("mixamo", "walk"), ("mixamo", "run"), ("ue", "walk"), ("ue", "run")):
        sk, off, roles = S.convention_rig(convention)
        speed = S.GAITS[gait]["speed"]
        feet_on_hills(f"{convention} rig, generated {gait} ({speed} m/s)",
                      bind_carpet(sk, S.locomotion(sk, off, roles, frames=150, gait=gait)), 30.0, rows)
    if REAL.exists():
        from bvh import read_bvh
        names, parents, m, fps = read_bvh(str(REAL), scale=0.01)
        feet_on_hills("real walk (frames 3175-3354)", bind_carpet(Skeleton(names, parents), m[3175:3355],
                                                                    ground=0.0), fps, rows)
    if INPLACE.exists():
        # The other shared clip stands in place (its feet move a few cm in 3089 frames): the row
        # shows that the carpet refuses it and what it says, for each stretch tried.
        from bvh import read_bvh
        names, parents, m, fps = read_bvh(str(INPLACE), scale=1.0)
        for a in (0, 1500):
            label = f"real in-place clip (frames {a}-{a + 299})"
            try:
                standing = bind_carpet(Skeleton(names, parents), m[a:a + 300], ground=float(m[:, :, 2].min()))
            except InputError as e:
                rows.append(f"| {label} | refused by bind_carpet: {e} | | | | | | | | | |")
                continue
            feet_on_hills(label, standing, fps, rows)
    print()
    print("| clip | path | frames walked | path covered | planted samples | on the terrain (2 cm) | median error cm "
          "| slide m/s (ours / source) | pinned | unpinned on the terrain | warnings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def signed_offset(points, line):
    """(n,) distance of ``points`` (n,2) from the polyline ``line`` (P,2), positive on its left."""
    a, b = line[:-1], line[1:]
    ab = b - a
    t = np.clip(np.einsum("psk,sk->ps", points[:, None] - a[None], ab) / np.maximum((ab * ab).sum(1), 1e-300), 0, 1)
    closest = a[None] + t[..., None] * ab[None]
    d = np.sqrt(((points[:, None] - closest) ** 2).sum(-1))
    k = np.argmin(d, axis=1)
    rows = np.arange(len(points))
    rel = points - closest[rows, k]
    side = np.sign(ab[k, 0] * rel[:, 1] - ab[k, 1] * rel[:, 0])
    return side * d[rows, k]


def crowd_quality(carpet, r, paths, terrain, fps=30.0, alone=None):
    """The crowd walk ``r`` judged on every character (issue 35: "quality unchanged, the table
    above on every character"): a markdown table of the worst character and the median one for
    each measure (``feet_of``'s planted samples on the terrain within 2 cm and their slide against
    the source's; ``held_gap``; the root off its path beyond the source's own sway; the largest joint
    step over the source's; bone deviation; no path coverage: the crowd's paths are longer than its
    frames), and with ``alone`` (a walk of each character by itself) the largest difference from it."""
    ground = Terrain(terrain)
    played_all = carpet.extended(int(r.clip_frames.max()) + 1)
    sk = carpet.skeleton
    src_bones = np.linalg.norm(carpet.motion[:, 1:] - carpet.motion[:, sk.parents[1:]], axis=-1).mean(axis=0)
    src_step = np.linalg.norm(np.diff(carpet.motion, axis=0), axis=-1).max()
    rows = {k: [] for k in ("on", "median", "slide", "gap", "off", "step", "bones")}
    for c, path in enumerate(paths):
        n = int(r.path_frames[c])
        e, _, slide, src_slide, _ = feet_of(carpet, r, c, path, ground, played_all, fps)
        P, played = r.positions[c, :n], played_all[r.clip_frames[c, :n]]
        gap = held_gap(carpet, P, ~np.isnan(r.pins[c, :n, :, 0]), played, ground)
        off = np.abs(signed_offset(P[:, carpet.root, :2], path[:, :2]) - played[:, carpet.root, 1]).max()
        bones = np.linalg.norm(P[:, 1:] - P[:, sk.parents[1:]], axis=-1)
        rows["on"].append(100 * (e <= 0.02).mean())
        rows["median"].append(100 * np.median(e))
        rows["slide"].append(slide - src_slide)
        rows["gap"].append(100 * gap)
        rows["off"].append(100 * off)
        rows["step"].append(np.linalg.norm(np.diff(P, axis=0), axis=-1).max() / src_step)
        rows["bones"].append(1000 * np.abs(bones - src_bones).max())
    v = {k: np.array(x) for k, x in rows.items()}
    worst = {"on": v["on"].min(), "median": v["median"].max(), "slide": v["slide"].max(),
             "gap": v["gap"].max(), "off": v["off"].max(), "step": v["step"].max(), "bones": v["bones"].max()}
    mid = {k: float(np.median(x)) for k, x in v.items()}
    out = ["| characters | | planted on the terrain (2 cm) | median error cm | slide beyond the source's m/s "
           "| held feet's gap cm | root off path cm (beyond the source's) | step / source | bone dev mm |",
           "|---|---|---|---|---|---|---|---|---|"]
    for label, d in (("worst", worst), ("median", mid)):
        out.append(f"| {len(paths)} | {label} | {d['on']:.1f} % | {d['median']:.2f} | {d['slide']:+.3f} "
                   f"| {d['gap']:.2f} | {d['off']:.1f} | {d['step']:.2f} | {d['bones']:.1f} |")
    if alone is not None:
        diff = max(float(np.abs(a.positions[0] - r.positions[c]).max()) for c, a in enumerate(alone))
        out.append("")
        out.append(f"Every character of the crowd against the same character walked alone: {diff:.1e} m at most.")
    return "\n".join(out)


def one_by_one(carpet, paths, terrain, offsets, frames, repeat):
    """The characters walked one by one: ``(seconds with each clip laid before, seconds each laying
    its clip, the walks)``. Per character, its first walk lays its clip (timed: the second sum),
    then the median of ``repeat`` more walks (the first sum)."""
    warm, cold, walks = 0.0, 0.0, []
    for p, o in zip(paths, offsets):
        t0 = time.perf_counter()
        walks.append(walk(carpet, [p], terrain, [o], frames=frames))
        cold += time.perf_counter() - t0
        warm += median_time(lambda: walk(carpet, [p], terrain, [o], frames=frames), repeat)
    return warm, cold, walks


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--characters", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--baseline", type=int, default=10, help="characters walked one by one as the baseline")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--feet-only", action="store_true", help="only the feet-on-hills table (issue 35)")
    ap.add_argument("--phases-only", action="store_true", help="only the start-phases table (issue 35)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                    help="processes to share each crowd among (walk(workers=N)); 1 is the baseline")
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    skel, motion = S.walk(150)
    carpet = bind_carpet(skel, motion)
    if args.feet_only:
        feet_table(carpet)
        return
    if args.phases_only:
        phases_table()
        return
    if not args.skip_quality:
        hills = TriMesh(*S.grid(24.0, 16.0, 240, 160, origin=(-4.0, -8.0), height=S.hills(0.15, 3.0)))
        flat = TriMesh(*S.grid(24.0, 16.0, 48, 32, origin=(-4.0, -8.0)))
        slope = np.tan(np.radians(35.0))
        ramp = TriMesh(*S.grid(24.0, 16.0, 96, 64, origin=(-4.0, -8.0),
                               height=lambda x, y: slope * np.clip(x - 2.0, 0.0, 3.0)))
        straight = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0]])
        th = np.linspace(0.0, np.pi, 120)
        turn = np.c_[2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.zeros_like(th)]
        t = np.linspace(0.0, 1.0, 100)
        curve = np.c_[12.0 * t, 2.0 * np.sin(np.pi * t), np.zeros_like(t)]
        print()
        print("| scene | frames | stance | stance gap cm | slide cm/s | root off path cm (beyond the source's) | step / source "
              "| trunk bend vs source ° | bone dev mm | edges in ±15 % | warnings | s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print(quality("generated walk, straight, hills 15 cm", carpet, straight, hills))
        print(quality("generated walk, 2 m radius turn, flat", carpet, turn, flat, circle=((0.0, 2.0), 2.0)))
        print(quality("generated walk, curve over hills", carpet, curve, hills))
        steep = TriMesh(*S.grid(24.0, 16.0, 240, 160, origin=(-4.0, -8.0), height=S.hills(0.35, 4.0)))
        print(quality("generated walk, curve over 35 cm hills", carpet, curve, steep))
        print(quality("same, thesis' body (rigid_body=False)", carpet, curve, steep, rigid_body=False))
        print(quality("generated walk, 35° ramp", carpet, straight, ramp))
        qsk, qm = S.quadruped_walk(120)
        print(quality("generated quadruped, curve over hills", bind_carpet(qsk, qm), curve, hills))
        if REAL.exists():
            from bvh import read_bvh
            names, parents, m, fps = read_bvh(str(REAL), scale=0.01)
            real = bind_carpet(Skeleton(names, parents), m[3175:3275], ground=0.0)
            print(quality("real walk (frames 3175-3275), curve over hills", real, curve, hills, fps))
            print(quality("real walk, 2 m radius turn, flat", real, turn, flat, fps, circle=((0.0, 2.0), 2.0)))
        feet_table(carpet)
        phases_table()
    # Crowd speed over a 50k-triangle terrain.
    F = args.frames
    length = F * carpet.speed + 1.0
    C_max = max(args.characters + [args.baseline])
    width = C_max * 0.5 + 10.0
    terrain = TriMesh(*S.grid(length + 6.0, width, 250, 100, origin=(-3.0, -width / 2), height=S.hills(0.15, 3.0)))
    line = np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0]])
    print()
    print(f"Crowds: {F} frames each over {terrain.triangle_count} triangles, 0.5 m apart, staggered cycles; "
          f"median of {args.repeat}")
    print()
    print("| characters | workers | walk s | character-frames / s | one by one s (clips laid) | speed-up "
          "| one by one s (each laying its clip) | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    last = {}                                                              # the last walks of the largest crowd
    for C in args.characters:
        paths = lateral_paths(line, C, 0.5)
        offsets = (np.arange(C) * 7) % 30
        walk(carpet, paths[:1], terrain, [offsets.max()], frames=F)       # the layout the crowd plays, once
        one = None
        if 1 < C <= args.baseline:
            warm, cold, alone = one_by_one(carpet, paths, terrain, offsets, F, args.repeat)
            one, last["alone"] = (warm, cold), alone
            walk(carpet, paths[:1], terrain, [offsets.max()], frames=F)   # laid again for the crowd
        for n in (args.workers if C > 1 else [1]):
            t_crowd = median_time(lambda: last.update(crowd=walk(carpet, paths, terrain, offsets, frames=F, workers=n)),
                                  args.repeat)
            cells = (f"{one[0]:.2f} | {one[0] / t_crowd:.1f}x | {one[1]:.2f} | {one[1] / t_crowd:.1f}x"
                     if one is not None else "| | |")
            print(f"| {C} | {n} | {t_crowd:.2f} | {C * F / t_crowd:.0f} | {cells} |")
        if C == max(args.characters) and C > 1:
            print()
            print(f"The {C} characters' walks (the last, with {args.workers[-1]} worker(s)) judged one by one "
                  "(the quality table's measures):")
            print()
            alone = last.get("alone") if len(last.get("alone") or ()) == C else None
            print(crowd_quality(carpet, last["crowd"], paths, terrain, alone=alone))


if __name__ == "__main__":
    main()
