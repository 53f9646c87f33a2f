"""A real walk over stepping stones, one stone moved: contacts and jumps on real motion.

Run with ``.venv/bin/python benchmarks/bench_real_stones.py [--frames 400 --start 1900]``.
Needs ``../shared/data/real/walk_cm_30fps.bvh``. The stones are boxes (0.45 x 0.3 x 0.3 m)
under the clip's foot plants, their tops at the walk's floor and a ground 0.3 m below; the
stone under the middle plant is moved 1 m sideways after binding. Prints the contact counts,
the time of the contact handling against a plain adapt measured in the same run, and the
largest frame-to-frame joint step of both against the source's.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from blender_reldesc.core import Skeleton, TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.contacts import adapt_with_contacts, contact_report, detect_contacts, landed  # noqa: E402
from bvh import read_bvh  # noqa: E402

REAL = ROOT.parent / "shared" / "data" / "real" / "walk_cm_30fps.bvh"


def plants(skel, motion, feet=("LeftFoot", "RightFoot"), speed=0.004, height=0.03, min_frames=4):
    """(foot, start, end, centre) of every stretch where a foot joint is slow and low."""
    out = []
    for foot in feet:
        p = motion[:, skel.index(foot)]
        v = np.r_[0.0, np.linalg.norm(np.diff(p, axis=0), axis=1)]
        slow = (v < speed) & (p[:, 2] < p[:, 2].min() + height)
        edges = np.flatnonzero(np.diff(np.r_[0, slow.astype(int), 0]))
        out += [(foot, s, e, p[s:e].mean(axis=0)) for s, e in zip(edges[::2], edges[1::2]) if e - s >= min_frames]
    return sorted(out, key=lambda x: x[1])


def stones_scene(motion, skel, feet, size, shift=0.0):
    """Ground 0.3 m under the walk's floor and a stone (``size``) under each foot plant, its top at
    the floor, ``shift`` m along +X from the plant's centre: vertices, triangles, vertex ranges,
    the plants."""
    floor = motion[..., 2].min() - 0.01
    lo, hi = motion.reshape(-1, 3).min(0) - 1.0, motion.reshape(-1, 3).max(0) + 1.0
    steps = plants(skel, motion, feet)
    parts = [S.grid(hi[0] - lo[0], hi[1] - lo[1], 40, 20, origin=(lo[0], lo[1]), z=floor - 0.3)]
    parts += [S.box((c[0] + shift, c[1], floor - 0.5 * size[2]), size, subdivisions=2) for _, _, _, c in steps]
    verts, tris, ranges = S.merge(*parts)
    return verts, tris, ranges, steps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=400)
    ap.add_argument("--start", type=int, default=1900, help="first frame (1900: where the person walks)")
    ap.add_argument("--builtin", action="store_true",
                    help="with --all: also the built-in rig (bpy, ``bench_terrain.BuiltinRig``) on the same scenes")
    ap.add_argument("--all", action="store_true",
                    help="both clips in ../shared/data/real at several stretches, 0.34 m stones (the issue's "
                         "scene), the stone under each of three middle plants moved in turn; one table")
    ap.add_argument("--more", action="store_true",
                    help="with --all: the walk's other stretches too (1600, where the person stands and shuffles "
                         "and the stones under its plants overlap; 2400, 2700, 3300), the stone under every other "
                         "plant moved in turn")
    args = ap.parse_args(argv)
    if args.all:
        return every_clip(args)
    if not REAL.exists():
        sys.exit(f"needs {REAL}")
    names, parents, motion, _ = read_bvh(REAL, scale=0.01)
    motion = motion[args.start:args.start + args.frames]
    skel = Skeleton(names, parents)
    verts, tris, ranges, steps = stones_scene(motion, skel, ("LeftFoot", "RightFoot"), (0.45, 0.3, 0.3), 0.05)
    mesh = TriMesh(verts, tris)
    binding = bind(skel, motion, mesh)
    phases = detect_contacts(binding)
    a, b = ranges[1 + len(steps) // 2]
    moved = verts.copy()
    moved[a:b] += [0.0, 1.0, 0.0]
    deformed = mesh.with_vertices(moved)
    adapt(binding, deformed)                                  # the table, once
    t0 = time.perf_counter()
    plain = adapt(binding, deformed)
    t_plain = time.perf_counter() - t0
    print(f"frames {args.start}..{args.start + len(motion) - 1} of {REAL.name}, {len(steps)} stones, "
          f"{len(phases)} phases")
    print()
    print("| carried by | plain adapt s | adapt + contacts s | valid / repositioned / unresolved "
          "| re-embedded / pinned | repositioned off a surface | largest step: plain / source | result / source |")
    print("|---|---|---|---|---|---|---|---|")
    for reembed in (False, True):
        t0 = time.perf_counter()
        result, outcomes = adapt_with_contacts(binding, deformed, phases=phases, reembed=reembed)
        t_full = time.perf_counter() - t0
        _, counts = contact_report(outcomes)
        off = sum(not landed(result.positions, deformed, o.phase, 0.015 * binding.body_height)
                  for o in outcomes if o.status == "repositioned")
        carried = [o.continuity for o in outcomes if o.status == "repositioned" and o.continuity]
        print(f"| {'re-embedding' if reembed else 'pins only'} | {t_plain:.2f} | {t_full:.2f} "
              f"| {counts['valid']} / {counts['repositioned']} / {counts['unresolved']} "
              f"| {carried.count('re-embedded')} / {carried.count('pins')} | {off} "
              f"| {step(plain.positions) / step(motion):.2f} | {step(result.positions) / step(motion):.2f} |")


def step(m):
    return float(np.linalg.norm(np.diff(m, axis=0), axis=-1).max())


def every_clip(args):
    """The issue's scene on both real clips, several stretches, three stones moved in turn."""
    from bench_fidelity import DATA, find
    extra = (" built-in rig: its foot from a surface, median cm | built-in rig: largest step / source |"
             if args.builtin else "")
    print("| clip, frames | plants | moved stone (plant) | phases | valid / repositioned / unresolved "
          "| unresolved: reasons | the moved stone's phases | its foot from the surface it stands on, median cm "
          "| contact frames hanging | planted slide, largest cm "
          "| largest step / source | plain s | with contacts s | re-positioned: re-embedded / pinned |" + extra)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.builtin else ""))
    for path in sorted(DATA.glob("*.bvh")):
        table = (1900, 3000, 3600) if "_cm_" in path.name else (0, 1200)
        more = (1600, 2400, 2700, 3300) if args.more and "_cm_" in path.name else ()
        for start in table + more:
            names, parents, motion, fps = read_bvh(path, scale=0.01 if "_cm_" in path.name else 1.0,
                                                   max_frames=start + 300)
            motion = motion[start:]
            skel = Skeleton(names, parents)
            feet = tuple(names[j] for j in (find(names, "foot", side="l"), find(names, "foot", side="r")))
            verts, tris, ranges, steps = stones_scene(motion, skel, feet, (0.34, 0.34, 0.3))
            mesh = TriMesh(verts, tris)
            binding = bind(skel, motion, mesh)
            phases = detect_contacts(binding, fps=fps)
            H = binding.body_height
            rig = None
            if args.builtin:
                from bench_terrain import BuiltinRig
                z0 = float(motion[..., 2].min()) - 0.01                           # the stones' tops
                rig = BuiltinRig(path, start, len(motion), names, motion, z0, verts, tris,
                                 [skel.index(f) for f in feet])
                P = rig.play(verts)
                print(f"| {path.name}, {start}-{start + len(motion) - 1} | {len(steps)} | none | - | - | - | - "
                      f"| - | - | - | - | - | - | - | {_rig_gap(P, mesh, mesh, motion, skel, steps, H):.1f} "
                      f"| {step(P) / step(motion):.2f} |", flush=True)
            middle = sorted({len(steps) // 2 - 1, len(steps) // 2, len(steps) // 2 + 1} & set(range(len(steps))))
            for k in (middle if start in table else range(1, len(steps) - 1, 2)):
                a, b = ranges[1 + k]
                moved = verts.copy()
                moved[a:b] += [0.0, 1.0, 0.0]
                deformed = mesh.with_vertices(moved)
                t0 = time.perf_counter()
                adapt(binding, deformed)
                t_plain = time.perf_counter() - t0
                t0 = time.perf_counter()
                result, outcomes = adapt_with_contacts(binding, deformed, phases=phases, fps=fps)
                t_full = time.perf_counter() - t0
                _, counts = contact_report(outcomes)
                reasons = sorted({o.reason for o in outcomes if o.status == "unresolved"})
                foot, s0, s1, _ = steps[k]
                mine = [o for o in outcomes if o.phase.name == foot and o.phase.start <= s1 and o.phase.end >= s0]
                e = skel.index(foot)
                gaps = [_gap(deformed, result.positions[o.phase.start:o.phase.end + 1, e], H) - o.phase.clearance
                        for o in mine]
                gap = 100 * float(np.median(np.concatenate(gaps))) if gaps else float("nan")
                hanging, slide = _hanging(mesh, deformed, motion, result.positions, outcomes)
                carried = [o.continuity for o in outcomes if o.status == "repositioned"]
                print(f"| {path.name}, {start}-{start + len(motion) - 1} | {len(steps)} | {k} ({foot} {s0}-{s1}) "
                      f"| {len(phases)} | {counts['valid']} / {counts['repositioned']} / {counts['unresolved']} "
                      f"| {', '.join(map(str, reasons)) or '-'} "
                      f"| {', '.join(o.status + (f' ({o.reason})' if o.reason else '') for o in mine) or '-'} "
                      f"| {gap:.1f} | {hanging} | {slide:.1f} "
                      f"| {step(result.positions) / step(motion):.2f} | {t_plain:.2f} | {t_full:.2f} "
                      f"| {carried.count('re-embedded')} / {carried.count('pins')} |"
                      + ("" if rig is None else
                         f" {_rig_gap(rig.play(moved), deformed, mesh, motion, skel, [steps[k]], H):.1f} "
                         f"| {step(rig.last_played) / step(motion):.2f} |"), flush=True)
    return 0


def _height(mesh, points):
    """(N,) each point's height over the highest upward surface straight under it that is not
    more than 2 cm above it (inf: none)."""
    from blender_reldesc.core.geometry.rays import RayCaster
    best = np.full(len(points), np.inf)
    for lift in (0.02, 0.6):
        d, tri = RayCaster.of(mesh).cast(points + [0.0, 0.0, lift], np.broadcast_to([0.0, 0.0, -1.0], points.shape))
        h = np.where(tri >= 0, d - lift, np.inf)
        best = np.minimum(best, np.where(h >= -0.02, h, np.inf))
    return best


def _hanging(mesh, deformed, motion, positions, outcomes):
    """Over every contact phase (issue 36, point 1: a foot is never left hanging): the frames
    where the effector stands more than 2 cm higher over the surface straight under it than the
    source over its own, counted where the source stands (within 2 cm of its sole's height); and
    the largest slide of a valid phase's effector (cm): its move from the phase's middle against
    the source's."""
    hanging, slide = 0, 0.0
    for o in outcomes:
        ph = o.phase
        fr = np.arange(ph.start, ph.end + 1)
        src = _height(mesh, motion[fr, ph.effector])
        now = _height(deformed, positions[fr, ph.effector])
        hanging += int(((src <= ph.clearance + 0.02) & (now - src > 0.02)).sum())
        if o.status == "valid":
            d = (positions[fr, ph.effector] - positions[ph.middle, ph.effector]) \
                - (motion[fr, ph.effector] - motion[ph.middle, ph.effector])
            slide = max(slide, 100 * float(np.linalg.norm(d, axis=1).max()))
    return hanging, slide


def _rig_gap(P, deformed, original, motion, skel, steps, H):
    """Median over the ``steps``' plant frames of how much farther the foot of ``P`` is from any
    surface of ``deformed`` than the source foot from ``original`` (cm)."""
    gaps = []
    for foot, s0, s1, _ in steps:
        e = skel.index(foot)
        gaps.append(_gap(deformed, P[s0:s1, e], H) - _gap(original, motion[s0:s1, e], H))
    return 100 * float(np.median(np.concatenate(gaps)))


def _gap(mesh, points, H):
    """(N,) each point's distance from the surface it stands on: the larger of the nearest
    surface's distance and the height over the surface straight under it (a foot stepped down
    to the ground beside a stone is 1 mm from the stone's side, 9 cm over the ground)."""
    from blender_reldesc.core.geometry import Collider
    from blender_reldesc.core.geometry.rays import RayCaster
    near = np.abs(Collider.of(mesh, 0.5 * H).closest(points)[0])
    down, tri = RayCaster.of(mesh).cast(points + [0.0, 0.0, 0.05], np.broadcast_to([0.0, 0.0, -1.0], points.shape))
    return np.where(tri >= 0, np.maximum(near, down - 0.05), near)


if __name__ == "__main__":
    main()
