"""Two characters holding hands (§9): the generated pair adapted together, unedited and with
one partner grown 20 %, against a plain adapt of one character (the baseline, same run); then
the whole-body scenes of issue 37 (``--scenes``): the collar tie and the hug with the partner
scaled, a hand on a partner's shoulder lowered or crouching, each with the limbs alone and with
the whole body (``adapt_partners(whole_body=True)``); the same scenes on rigs of four conventions
(``--conventions``), by both solvers side by side (``--solvers``), and played by the pair live
preview against the bake (``--live``).

Run with ``.venv/bin/python benchmarks/bench_characters.py [--frames 300] [--repeat 3]
[--scenes | --conventions | --solvers | --live]`` (times: medians).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from blender_reldesc.core import TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core import LiveSession  # noqa: E402
from blender_reldesc.core.characters import (PartnersLiveSession, adapt_partners, bind_partners,  # noqa: E402
                                             capsule_overlap)


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
    ap.add_argument("--scenes", action="store_true", help="only the whole-body scenes (issue 37)")
    ap.add_argument("--conventions", action="store_true",
                    help="only the collar tie and the hand on a shoulder on rigs of four conventions")
    ap.add_argument("--live", action="store_true",
                    help="only the pair live preview (PartnersLiveSession) against the bake, on the scenes")
    ap.add_argument("--windows", default="",
                    help="with --live: extra round schedules to compare, e.g. 'N,0.25;0.5,0.25' "
                         "(N: every capsule, else Eq. 5's window in body heights)")
    ap.add_argument("--solvers", action="store_true",
                    help="only the scenes adapted by both solvers side by side (descriptors, interaction mesh)")
    args = ap.parse_args(argv)
    if args.solvers:
        return solvers(args.frames, args.repeat)
    if args.live:
        return live(args.frames, args.repeat, args.windows)
    if args.scenes:
        return scenes(args.frames, args.repeat)
    if args.conventions:
        return conventions(args.frames, args.repeat)
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


#: Per scene, the holds measured: (character, hand, the partner joint it rests on), by role
#: (``synthetic.convention_rig``; the humanoid's joints through ``synthetic.humanoid_joint``).
HOLDS = {"wrestle": [(0, "hand.R", "upperarm.L"), (0, "hand.L", "upperarm.R"), (1, "hand.R", "upperarm.L"),
                     (1, "hand.L", "upperarm.R")],
         "hug": [(0, "hand.R", "chest"), (0, "hand.L", "chest"), (1, "hand.R", "chest2"), (1, "hand.L", "chest2")],
         "shoulder": [(0, "hand.R", "upperarm.L")]}


def _measure(sk, name, out, more, src, holds, moved, scale):
    """What the tables report of a pair's result ``out`` (and ``more``, the same with eight
    rounds) against its source ``src``: holds' worst change, distance to eight rounds, toes' and
    ankles' heights (a scaled partner's against the source's scaled), the hips' move from over
    the feet and each trunk's tilt against the source's, for the characters in ``moved``."""
    i = sk.index
    P = [o.positions for o in out]
    k = [1.0, scale]

    def at(role):
        return i(name(role))

    def over(p):
        return p[:, at("hips"), :2] - 0.5 * (p[:, at("foot.L"), :2] + p[:, at("foot.R"), :2])

    def tilt(p):
        v = p[:, at("neck")] - p[:, at("hips")]
        return np.degrees(np.arccos(v[:, 2] / np.linalg.norm(v, axis=-1)))

    def height(joints):
        js = [at(r) for r in joints]
        return max(np.abs(P[c][:, js, 2] - src[c][:, js, 2] * k[c]).max() for c in moved)

    return dict(
        holds=max(np.abs(np.linalg.norm(P[c][:, at(h)] - P[1 - c][:, at(j)], axis=-1)
                         - np.linalg.norm(src[c][:, at(h)] - src[1 - c][:, at(j)], axis=-1)).max()
                  for c, h, j in holds),
        beyond=max(float(np.linalg.norm(x.positions - y.positions, axis=-1).max()) for x, y in zip(out, more)),
        toes=height(("toe.L", "toe.R")), ankles=height(("foot.L", "foot.R")),
        hips=max(np.linalg.norm(over(P[c]) - over(src[c]) * k[c], axis=-1).max() for c in moved),
        tilt=[float(np.mean(tilt(P[c]) - tilt(src[c]))) for c in range(2)])


def _overlap(skel, pa, pb, partners, scale):
    """``capsule_overlap`` of two poses with the partners' radii (the second's scaled by ``scale``)."""
    return capsule_overlap(skel, pa, pb, partners.radii[0], scale * partners.radii[1])


def _edit(kind, v, sk, b, crouched):
    """``adapt_partners`` arguments of an edit (the partner scaled, lowered or crouching), the
    partner's scale and the characters whose feet are measured."""
    if kind == "scaled":
        lengths = sk.bone_lengths(b).mean(axis=0)
        return (dict(bone_lengths=[None, {n: v * lengths[j] for j, n in enumerate(sk.names)
                                          if sk.parents[j] >= 0 and lengths[j] > 1e-6}]), v, (0, 1))
    return dict(poses=[None, b - [0.0, 0.0, v] if kind == "lowered" else crouched]), 1.0, (0,)


def scenes(frames, repeat):
    """The issue-37 table: per scene and edit, limbs alone and whole body."""
    mesh = TriMesh(*S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{frames} frames, 27 joints a character")
    print()
    print("| scene | edit | whole body | holds: worst change of the hand-to-joint distance (cm) "
          "| capsule overlap source -> now (cm) | toes / ankles up or down (cm) | hips over the feet (cm) "
          "| trunk tilt vs source (deg, A / B) | largest move in each round (cm) | against 8 rounds (cm) | pair frames/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    # The capsules' default radius is 12 % of a bone's length: a 1.5-2 cm spine, where a
    # skinned body gives a torso about 11 cm deep on each side (``reldesc_radius`` or the mesh).
    torso = {"Spine": 0.11, "Spine1": 0.11, "Spine2": 0.11, "Neck": 0.06, "Head": 0.09, "HeadTop": 0.09,
             "LeftShoulder": 0.06, "RightShoulder": 0.06}
    for label, hold, apart, edits, radii in (
            ("wrestle", "wrestle", 0.45, ("scaled 0.8", "scaled 1.2"), None),
            ("hug", "hug", 0.3, ("scaled 0.8", "scaled 1.2"), None),
            ("hug, torso radii", "hug", 0.3, ("scaled 0.8", "scaled 1.2"), torso),
            ("hand on shoulder", "shoulder", 0.5, ("lowered 0.2", "crouching 0.2", "crouching 0.4"), None)):
        skel, (a, b) = S.pair_scene(frames, apart=apart, hold=hold)
        ba, bb = bind(skel, a, mesh), bind(skel, b, mesh)
        partners = bind_partners([ba, bb], radii=None if radii is None else [radii, radii])
        for edit in edits:
            kind, v = edit.split()
            v = float(v)
            crouched = S.pair_scene(frames, apart=apart, hold=hold, crouch=v)[1][1] if kind == "crouching" else None
            kw, rb, moved = _edit(kind, v, skel, b, crouched)
            if kind == "scaled" and radii is not None:
                kw["radii"] = [radii, {k: v * r for k, r in radii.items()}]
            for whole in (False, True):
                changes = []
                dt, out = timed(lambda: adapt_partners([ba, bb], mesh, partners, whole_body=whole, changes=changes,
                                                       **kw), repeat)
                more = adapt_partners([ba, bb], mesh, partners, whole_body=whole, rounds=8, **kw)
                m = _measure(skel, S.humanoid_joint, out, more, [a, b], HOLDS[hold], moved, rb)
                before, after = _overlap(skel, a, b, partners, 1.0), _overlap(skel, out[0].positions,
                                                                             out[1].positions, partners, rb)
                print(f"| {label} | {edit} | {'yes' if whole else 'no'} | {100 * m['holds']:.2f} | {100 * before:.1f} -> "
                      f"{100 * after:.1f} | {100 * m['toes']:.2f} / {100 * m['ankles']:.2f} | {100 * m['hips']:.1f} "
                      f"| {m['tilt'][0]:+.1f} / {m['tilt'][1]:+.1f} | {', '.join(f'{100 * x:.1f}' for x in changes)} "
                      f"| {100 * m['beyond']:.2f} | {frames / dt:.0f} |")


#: The issue-37 scenes: (label, hold, distance apart, edits).
SCENES = (("collar tie", "wrestle", 0.45, ("scaled 0.8", "scaled 1.2")),
          ("hug", "hug", 0.3, ("scaled 0.8", "scaled 1.2")),
          ("hand on shoulder", "shoulder", 0.5, ("lowered 0.2", "crouching 0.4")))


def _scene_edits(frames, mesh, core=None):
    """Each of ``SCENES``' edits, bound on ``mesh``: ``(label, hold, edit, skel, (a, b), (ba, bb),
    partners, adapt_partners arguments, the partner's scale, the characters whose feet count)``.
    ``core``: optional ``(synthetic, bind, bind_partners)`` of another tree (``bench_live_ab.py``)."""
    S_, bind_, bind_partners_ = (S, bind, bind_partners) if core is None else core
    for label, hold, apart, edits in SCENES:
        skel, (a, b) = S_.pair_scene(frames, apart=apart, hold=hold)
        ba, bb = bind_(skel, a, mesh), bind_(skel, b, mesh)
        partners = bind_partners_([ba, bb])
        for edit in edits:
            kind, v = edit.split()
            v = float(v)
            crouched = S_.pair_scene(frames, apart=apart, hold=hold, crouch=v)[1][1] if kind == "crouching" else None
            yield (label, hold, edit, skel, (a, b), (ba, bb), partners) + _edit(kind, v, skel, b, crouched)


def solvers(frames, repeat):
    """The scenes adapted by the descriptors' rounds and by the interaction mesh with both
    characters in one tetrahedralisation (``adapt_partners(solver=...)``), side by side."""
    mesh = TriMesh(*S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{frames} frames, 27 joints a character")
    print()
    print("| scene | edit | solver | holds: worst change (cm) | capsule overlap source -> now (cm) "
          "| toes / ankles (cm) | hips over the feet (cm) | trunk tilt vs source (deg, A / B) | pair frames/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, hold, edit, skel, (a, b), (ba, bb), partners, kw, rb, moved in _scene_edits(frames, mesh):
        for solver in ("descriptors", "interaction_mesh"):
            dt, out = timed(lambda: adapt_partners([ba, bb], mesh, partners, solver=solver, **kw), repeat)
            m = _measure(skel, S.humanoid_joint, out, out, [a, b], HOLDS[hold], moved, rb)
            before, after = _overlap(skel, a, b, partners, 1.0), _overlap(skel, out[0].positions,
                                                                         out[1].positions, partners, rb)
            print(f"| {label} | {edit} | {solver.replace('_', ' ')} | {100 * m['holds']:.2f} "
                  f"| {100 * before:.1f} -> {100 * after:.1f} | {100 * m['toes']:.2f} / {100 * m['ankles']:.2f} "
                  f"| {100 * m['hips']:.1f} | {m['tilt'][0]:+.1f} / {m['tilt'][1]:+.1f} | {frames / dt:.0f} |")


def _play(session, frames, vertices):
    """Play ``session`` frame after frame: ``(what each frame's pose gave, seconds per frame (F,))``."""
    out, seconds = [], []
    for f in range(frames):
        t0 = time.perf_counter()
        out.append(session.pose(f, vertices))
        seconds.append(time.perf_counter() - t0)
    return out, np.array(seconds)


def live(frames, repeat, extra=""):
    """The pair live preview on the issue-37 scenes: milliseconds per frame played (the first
    frame left out) and per jump to the clip's middle, against one character's ``LiveSession``
    (the baseline, same run); its holds, capsule overlap and distance from the bake."""
    mesh = TriMesh(*S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)))
    schedules = [None] + [[None if w.strip() == "N" else float(w) for w in x.split(",")]
                          for x in extra.split(";") if x.strip()]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{frames} frames, 27 joints a character; times: medians of {repeat} plays")
    print()
    print("| scene | edit | rounds | ms a frame played (median / 95th pct) | one character's LiveSession (ms) "
          "| ms a jump | holds: worst change, live / bake (cm) | capsule overlap source -> live / bake (cm) "
          "| live from bake: worst joint, median frame (cm) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, hold, edit, skel, (a, b), (ba, bb), partners, kw, rb, moved in _scene_edits(frames, mesh):
        bake = adapt_partners([ba, bb], mesh, partners, **kw)
        m_bake = _measure(skel, S.humanoid_joint, bake, bake, [a, b], HOLDS[hold], moved, rb)
        overlap = [_overlap(skel, p, q, partners, rb) for p, q in ((a, b), (bake[0].positions, bake[1].positions))]
        one = kw.get("bone_lengths", [None, None])[1]
        base = np.median([np.median(_play(LiveSession(bb, bone_lengths=one), frames, mesh.vertices)[1][1:])
                          for _ in range(repeat)])
        for windows in schedules:
            plays = [_play(PartnersLiveSession([ba, bb], partners, windows=windows, **kw), frames, mesh.vertices)
                     for _ in range(repeat)]
            poses = [np.array([o[c] for o in plays[-1][0]]) for c in range(2)]
            played = np.median([np.median(t[1:]) for _, t in plays])
            p95 = np.median([np.percentile(t[1:], 95) for _, t in plays])
            jumps = []
            for _ in range(repeat):
                session = PartnersLiveSession([ba, bb], partners, windows=windows, **kw)
                t0 = time.perf_counter()
                session.pose(frames // 2, mesh.vertices)
                jumps.append(time.perf_counter() - t0)
            got = [SimpleNamespace(positions=p) for p in poses]           # as _measure reads a result
            m = _measure(skel, S.humanoid_joint, got, got, [a, b], HOLDS[hold], moved, rb)
            after = _overlap(skel, poses[0], poses[1], partners, rb)
            d = np.max([np.linalg.norm(p - r.positions, axis=-1) for p, r in zip(poses, bake)], axis=0)
            name = "N, 0.25 (default)" if windows is None else ", ".join("N" if w is None else f"{w:g}"
                                                                       for w in windows)
            print(f"| {label} | {edit} | {name} | {1e3 * played:.1f} / {1e3 * p95:.1f} | {1e3 * base:.1f} "
                  f"| {1e3 * np.median(jumps):.0f} | {100 * m['holds']:.2f} / {100 * m_bake['holds']:.2f} "
                  f"| {100 * overlap[0]:.1f} -> {100 * after:.1f} / {100 * overlap[1]:.1f} "
                  f"| {100 * d.max():.1f}, {100 * np.median(d.max(axis=1)):.1f} |")


def conventions(frames, repeat):
    """The collar tie (partner scaled) and the hand on a crouching partner's shoulder, carried
    onto rigs of four conventions (``synthetic.on_convention``), with the whole body."""
    mesh = TriMesh(*S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{frames} frames")
    print()
    print("| rig | joints | scene | edit | holds: worst change (cm) | against 8 rounds (cm) | toes and ankles (cm) "
          "| trunk tilt vs source (deg) | pair frames/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    tie = S.pair_scene(frames, apart=0.45, hold="wrestle")[1]
    rest = S.pair_scene(frames, apart=0.5, hold="shoulder")[1]
    crouch = S.pair_scene(frames, apart=0.5, hold="shoulder", crouch=0.4)[1][1]
    for convention in ("bvh", "mixamo", "rigify", "ue"):
        for scene, hold, (a0, b0), edits in (("collar tie", "wrestle", tie, ("scaled 0.8", "scaled 1.2")),
                                             ("hand on shoulder", "shoulder", rest, ("crouching 0.4",))):
            sk, a, name = S.on_convention(convention, a0)
            b = S.on_convention(convention, b0)[1]
            ba, bb = bind(sk, a, mesh), bind(sk, b, mesh)
            partners = bind_partners([ba, bb])
            for edit in edits:
                kind, v = edit.split()
                kw, scale, moved = _edit(kind, float(v), sk, b, S.on_convention(convention, crouch)[1])
                dt, out = timed(lambda: adapt_partners([ba, bb], mesh, partners, **kw), repeat)
                more = adapt_partners([ba, bb], mesh, partners, rounds=8, **kw)
                m = _measure(sk, name, out, more, [a, b], HOLDS[hold], moved, scale)
                print(f"| {convention} | {len(sk)} | {scene} | {edit} | {100 * m['holds']:.2f} | {100 * m['beyond']:.2f} "
                      f"| {100 * m['toes']:.2f} / {100 * m['ankles']:.2f} | {m['tilt'][0]:+.1f} | {frames / dt:.0f} |")


if __name__ == "__main__":
    main()
