"""Fidelity table on the real clips in ../shared/data/real (when present).

    .venv/bin/python benchmarks/bench_fidelity.py [--frames 600]

Per clip: invariance (largest joint error in body heights after no edit, a 0.2 m lift,
a 30° turn about the vertical, a 10° tilt and a random rotation of the whole floor);
ducking (a beam 5 cm above the head, lowered 0.35 m); a 0.25 m bump sculpted after
binding; morphology (shins 15 % longer and shorter). Planted samples: foot joints slower than 0.5 m/s within 5 cm of their
lowest height; "within 2 cm" compares them with the source height.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bvh import read_bvh  # noqa: E402

from blender_reldesc.core import Skeleton, TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core.adaptation import Rig  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"


def rotation(axis, degrees):
    a = np.radians(degrees)
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * K @ K


def floor(motion, z):
    lo, hi = motion.reshape(-1, 3).min(0), motion.reshape(-1, 3).max(0)
    size = hi[:2] - lo[:2] + 2.0
    return S.grid(size[0], size[1], int(size[0] / 0.1), int(size[1] / 0.1), origin=tuple(lo[:2] - 1), z=z)


def find(names, *words, side=None):
    for w in words:
        for i, n in enumerate(names):
            low = n.lower()
            if w in low and (side is None or side in low) and not low.endswith("_end"):
                return i
    return None


def spine_chain(skel, head):
    chain = [head]
    while skel.parents[chain[-1]] >= 0:
        chain.append(int(skel.parents[chain[-1]]))
    return chain[::-1]


def bends(P, chain, min_len):
    pts = [chain[0]]
    for j in chain[1:]:
        if np.linalg.norm(P[:, j] - P[:, pts[-1]], axis=-1).mean() > min_len:
            pts.append(j)
    seg = P[:, pts[1:]] - P[:, pts[:-1]]
    seg /= np.linalg.norm(seg, axis=-1, keepdims=True)
    return np.degrees(np.arccos(np.clip(np.einsum("fsk,fsk->fs", seg[:, 1:], seg[:, :-1]), -1, 1)))


def planted(motion, feet, fps):
    v = np.linalg.norm(np.gradient(motion[:, feet], axis=0), axis=-1) * fps
    low = motion[:, feet, 2] - motion[:, feet, 2].min(axis=0) < 0.05
    return (v < 0.5) & low


def sculpted(binding, motion, V, T, z0, feet, plant, ground_at, inside):
    """Adapt over the floor ``V, T`` (bound flat at ``z0``) raised by ``ground_at(xy)`` after binding:
    ``(positions, seconds, row)``, the row ``(planted samples, share of them within 2 cm of the
    sculpted floor + their source height, samples where the edit moved the floor more than 2 cm,
    the share within 2 cm there, frames with a joint more than ``inside`` below the floor)``."""
    bumped = V.copy()
    bumped[:, 2] += ground_at(V[:, :2])
    t = time.perf_counter()
    P = adapt(binding, TriMesh(bumped, T)).positions
    seconds = time.perf_counter() - t
    error = np.abs(P[:, feet, 2] - motion[:, feet, 2] - ground_at(P[:, feet, :2]))
    touched = plant & (np.abs(ground_at(motion[:, feet, :2])) > 0.02)
    there = error[touched] <= 0.02
    below = (P[..., 2] < z0 + ground_at(P[..., :2]) - inside).any(axis=1)
    return P, seconds, (int(plant.sum()), float((error[plant] <= 0.02).mean()), int(touched.sum()),
                        float(there.mean()) if there.size else float("nan"), int(below.sum()))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=600)
    args = ap.parse_args(argv)
    clips = sorted(DATA.glob("*.bvh"))
    if not clips:
        print(f"no clips in {DATA}: nothing to measure")
        return 0
    inv_rows, duck_rows, morph_rows, bump_rows = [], [], [], []
    for path in clips:
        names, parents, motion, fps = read_bvh(path, scale=0.01 if "_cm_" in path.name else 1.0,
                                               max_frames=args.frames)
        skel = Skeleton(names, parents)
        H = float(np.median(motion[..., 2].max(1) - motion[..., 2].min(1)))
        z0 = float(motion[..., 2].min()) - 0.01
        V, T = floor(motion, z0)
        t = time.perf_counter()
        binding = bind(skel, motion, TriMesh(V, T))
        bind_s = time.perf_counter() - t
        centre = V.mean(0)
        errs = []
        rng = np.random.default_rng(0)
        q = rng.normal(size=3)
        for label, R, lift in [("unchanged", np.eye(3), 0.0), ("lift 0.2 m", np.eye(3), 0.2),
                               ("turn 30°", rotation([0, 0, 1], 30), 0.0), ("tilt 10°", rotation([1, 0, 0], 10), 0.0),
                               ("random rotation", rotation(q, 73), 0.0)]:
            def move(P):
                return (P - centre) @ R.T + centre + [0, 0, lift]
            got = adapt(binding, TriMesh(move(V), T)).positions
            errs.append(float(np.abs(got - move(motion)).max()) / H)
        inv_rows.append((path.name, len(motion), len(names), binding.descriptor_count, bind_s, *errs))

        # Ducking: a beam 5 cm above the head at the clip's middle, lowered 0.35 m.
        head = find(names, "head")
        if head is None:                                  # Rigify-style names: the highest joint
            head = int(np.argmax(np.median(motion[..., 2], axis=0)))
        feet = [j for j in (find(names, "foot", side="l"), find(names, "foot", side="r"),
                            find(names, "toe", side="l"), find(names, "toe", side="r")) if j is not None]
        mid = len(motion) // 2
        x = motion[mid, head, 0]
        top = motion[:, :, 2].max()
        beam_v, beam_t = S.box((x, motion[mid, head, 1], top + 0.05 + 0.1), (0.3, 3.0, 0.2), subdivisions=3)
        Vb, Tb, ranges = S.merge((V, T), (beam_v, beam_t))
        lowered = Vb.copy()
        lowered[ranges[1][0]:, 2] -= 0.35
        duck_binding = bind(skel, motion, TriMesh(Vb, Tb))
        for variant, options in (("", None), (" — without shared compression", {"share_compression": False})):
            t = time.perf_counter()
            result = adapt(duck_binding, TriMesh(lowered, Tb), solver_options=options)
            duck_s = time.perf_counter() - t
            P = result.positions
            bottom = lowered[ranges[1][0]:, 2].min()
            lo, hi = lowered[ranges[1][0]:, 0].min(), lowered[ranges[1][0]:, 0].max()
            inside = (P[:, head, 0] > lo) & (P[:, head, 0] < hi) & (P[:, head, 2] > bottom)
            chain = spine_chain(skel, head)
            b = bends(P, chain, 0.02 * H)
            hips = chain[0]
            chest = chain[len(chain) // 2]
            plant = planted(motion, feet, fps)
            kept = np.abs(P[:, feet, 2] - motion[:, feet, 2])[plant] <= 0.02
            acc_src = np.linalg.norm(np.diff(motion, 2, axis=0), axis=-1).max()
            acc = np.linalg.norm(np.diff(P, 2, axis=0), axis=-1).max()
            twists = Rig(duck_binding).twists
            tau = twists.twist(skel, P) if len(twists) else np.zeros((len(P), 0))
            past = ((tau > twists.high + 1.0) | (tau < twists.low - 1.0)).any(axis=1) if len(twists) else tau[:, :0]
            twist_src = twists.twist(skel, motion) if len(twists) else tau
            extra = float(np.abs(tau - twist_src).max()) if tau.size else 0.0
            duck_rows.append((path.name + variant, int(inside.sum()), float(b.max()),
                              float((P[:, chest, 2] - P[:, hips, 2]).min()),
                              float(kept.mean()) if kept.size else float("nan"), acc / acc_src,
                              100 * float(result.bone_length_error.mean()), float(result.joint_limit_violation.max()),
                              duck_s, extra, int(past.sum()) if tau.size else 0))

        # Bump: a smooth hill 0.25 m high (Gaussian, sigma 0.5 m) sculpted after binding where the
        # clip's feet pass most, under the middle of the clip.
        feet_xy = motion[:, feet, :2].reshape(-1, 2)
        centre_xy = feet_xy[len(feet_xy) // 2]

        def hill(xy):
            return 0.25 * np.exp(-np.sum((xy - centre_xy) ** 2, axis=-1) / (2 * 0.5 ** 2))

        P, bump_s, row = sculpted(binding, motion, V, T, z0, feet, plant, hill, 0.005)
        bump_rows.append((path.name, *row, float(np.linalg.norm(np.diff(P, 2, axis=0), axis=-1).max() / acc_src),
                          bump_s))

        # Morphology: shins (knee -> ankle bones) 15 % longer and shorter.
        src = skel.bone_lengths(motion).mean(axis=0)
        shins = [j for j in (find(names, "foot", side="l"), find(names, "foot", side="r")) if j is not None]
        for factor in (1.15, 0.85):
            P = adapt(binding, TriMesh(V, T), bone_lengths={names[j]: factor * src[j] for j in shins}).positions
            added = (factor - 1) * src[shins[0]]
            rise = float(np.median(P[:, hips, 2] - motion[:, hips, 2]))
            kept = np.abs(P[:, feet, 2] - motion[:, feet, 2])[plant] <= 0.02
            morph_rows.append((path.name, f"{factor:.2f}", added, rise, rise / added,
                               float(kept.mean()) if kept.size else float("nan")))

    print("| clip | frames | joints | descriptors | bind s | unchanged | lift 0.2 m | turn 30° | tilt 10° | random rotation |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in inv_rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | " + " | ".join(f"{e:.1e}" for e in r[5:]) + " |")
    print()
    print("| clip, beam lowered 0.35 m | head frames in beam | worst spine bend ° | chest above hips min (m) | "
          "planted within 2 cm | accel ratio | bone err mean % | limit violation max ° | twist added max ° | "
          "frames past twist range | adapt s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in duck_rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.3f} | {100 * r[4]:.1f} % | {r[5]:.2f} | {r[6]:.3f} | "
              f"{r[7]:.1f} | {r[9]:.1f} | {r[10]} | {r[8]:.1f} |")
    print()
    print("| clip, 0.25 m bump | planted samples | within 2 cm | on the bump | within 2 cm there | "
          "frames below the terrain | accel ratio | adapt s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in bump_rows:
        print(f"| {r[0]} | {r[1]} | {100 * r[2]:.1f} % | {r[3]} | {100 * r[4]:.1f} % | {r[5]} | {r[6]:.2f} | {r[7]:.1f} |")
    print()
    print("| clip | shin factor | added length (m) | hips rise (m, median) | rise / added | planted within 2 cm |")
    print("|---|---|---|---|---|---|")
    for r in morph_rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.2f} | {100 * r[5]:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
