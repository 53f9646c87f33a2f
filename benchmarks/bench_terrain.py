"""Feet on sculpted ground under the real clips (issue 36, point 2), the core alone.

    .venv/bin/python benchmarks/bench_terrain.py [--frames 600] [--starts 0] [--heights 0.1 0.2 0.3]

Per clip in ../shared/data/real and stretch of it (``--frames`` frames from each of ``--starts``,
the stretches a clip has): the clip bound over a flat floor (a 0.1 m grid), then the floor
sculpted after binding with a smooth Gaussian bump or dip (sigma 0.5 m) of each height, placed
three ways against the planted feet of the clip's middle: its crest under a planted foot
(``crest``), 0.5 m beside it so the foot stands on the slope (``slope``), and 1 sigma along the
walk so the foot lands on its edge (``edge``). The unedited floor is measured too (the result
must be the source).

Planted samples as ``bench_fidelity.py``: foot joints slower than 0.5 m/s within 5 cm of their
lowest height; *within 2 cm*: the adapted joint's height above the sculpted floor under it is
its source height above the flat one within 2 cm. *Inside*: frames with any joint more than
1 cm below the sculpted floor. The built-in rig comparison of the issue (leg IK to Shrinkwrap
Empties) needs Blender: not here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fidelity import DATA, find, floor, planted, sculpted  # noqa: E402
from bvh import read_bvh  # noqa: E402

from blender_reldesc.core import Skeleton, TriMesh, bind  # noqa: E402

SIGMA = 0.5


def shape(centre, height):
    def at(xy):
        return height * np.exp(-np.sum((xy - centre) ** 2, axis=-1) / (2 * SIGMA ** 2))
    return at


def placements(motion, feet, plant):
    """{name: centre (2,)} of the bump against a planted foot near the clip's middle."""
    F = len(motion)
    frames = np.flatnonzero(plant.any(axis=1))
    f = int(frames[np.argmin(np.abs(frames - F // 2))])
    k = int(np.flatnonzero(plant[f])[0])
    foot = motion[f, feet[k], :2]
    ahead = motion[min(f + 10, F - 1), 0, :2] - motion[max(f - 10, 0), 0, :2]
    ahead = ahead / max(np.linalg.norm(ahead), 1e-9)
    side = np.array([-ahead[1], ahead[0]])
    return {"crest": foot, "slope": foot + 0.5 * side, "edge": foot + SIGMA * ahead}


def measure(binding, motion, V, T, z0, feet, plant, ground_at):
    """``bench_fidelity.sculpted``'s row (joints more than 1 cm inside), and the adapt seconds."""
    _, seconds, row = sculpted(binding, motion, V, T, z0, feet, plant, ground_at, 0.01)
    return (*row, seconds)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--starts", type=int, nargs="+", default=[0], help="first frames of the stretches")
    ap.add_argument("--heights", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    args = ap.parse_args(argv)
    clips = sorted(DATA.glob("*.bvh"))
    if not clips:
        print(f"no clips in {DATA}: nothing to measure")
        return 0
    print("| clip, frames | edit | placement | planted samples | within 2 cm | on the edit | within 2 cm there "
          "| frames with a joint > 1 cm inside | adapt s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path, start in ((p, s) for p in clips for s in args.starts):
        names, parents, motion, fps = read_bvh(path, scale=0.01 if "_cm_" in path.name else 1.0,
                                               max_frames=start + args.frames)
        motion = motion[start:]
        if len(motion) < args.frames:
            continue                                     # the clip is shorter
        skel = Skeleton(names, parents)
        z0 = float(motion[..., 2].min()) - 0.01
        V, T = floor(motion, z0)
        binding = bind(skel, motion, TriMesh(V, T))
        feet = [j for j in (find(names, "foot", side="l"), find(names, "foot", side="r"),
                            find(names, "toe", side="l"), find(names, "toe", side="r")) if j is not None]
        plant = planted(motion, feet, fps)
        rows = [("unedited", "-", measure(binding, motion, V, T, z0, feet, plant, lambda xy: np.zeros(xy.shape[:-1])))]
        for name, centre in placements(motion, feet, plant).items():
            for h in args.heights:
                for kind, sign in (("bump", 1.0), ("dip", -1.0)):
                    rows.append((f"{kind} {h:.2f} m", name,
                                 measure(binding, motion, V, T, z0, feet, plant, shape(centre, sign * h))))
        for edit, where, (n, kept, n_there, kept_there, inside, s) in rows:
            print(f"| {path.name}, {start}-{start + len(motion) - 1} | {edit} | {where} | {n} | {100 * kept:.1f} % | {n_there} | "
                  f"{100 * kept_there:.1f} % | {inside} | {s:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
