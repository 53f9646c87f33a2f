"""A smaller character on open ground, on the shared real clips: every bone scaled 0.85 and 0.7,
adapted on a flat floor under the clip (``adapt(bone_lengths=...)``). Reports how far the hips
end from over the feet against the source's offset scaled, the hips' height against the source's
scaled, the trunk's shortest length against its scaled source, and the lowest foot joint.

Until Dec 4 (thirtieth session) the ducking stage measured the trunk against the source's, and a
body scaled below 0.9 leaned back off its feet as if under a beam. Run with
``.venv/bin/python benchmarks/bench_smaller.py`` (about 30 s).
"""

from __future__ import annotations

import os
import pathlib
import platform
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from blender_reldesc.core import Skeleton, TriMesh, adapt, bind  # noqa: E402
from blender_reldesc.core import synthetic as S  # noqa: E402
from blender_reldesc.core.retarget import find_roles  # noqa: E402
from bvh import read_bvh  # noqa: E402

REAL = ROOT.parent / "shared" / "data" / "real"
#: (file, scale to metres or None to guess, frames): the walk's straight stretch, its stretch that
#: walks and crouches, the in-place clip.
CLIPS = (("walk_cm_30fps.bvh", 0.01, (900, 1200)), ("walk_cm_30fps.bvh", 0.01, (2700, 3000)),
         ("rigify_inplace_24fps.bvh", None, (0, 300)))


def main():
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    print("| clip | frames | scale | hips over the feet, off the source's scaled: median / max (cm) "
          "| hips' height / the source's scaled (median) | trunk length / the source's scaled (min) "
          "| lowest foot joint over the floor, source / now (cm) |")
    print("|---|---|---|---|---|---|---|")
    for clip, scale, (lo_f, hi_f) in CLIPS:
        names, parents, motion, _ = read_bvh(REAL / clip, max_frames=hi_f, **({} if scale is None else {"scale": scale}))
        motion = motion[lo_f:hi_f]
        if scale is None and np.ptp(motion[..., 2]) > 10:                  # centimetres
            motion = motion * 0.01
        sk = Skeleton(names, parents)
        roles = find_roles(sk, motion[0])[0]
        hips, feet = roles["hips"], [roles["foot.L"], roles["foot.R"]]
        top = roles.get("head", roles.get("neck"))
        lo, hi = motion.reshape(-1, 3).min(0), motion.reshape(-1, 3).max(0)
        V, T = S.grid(hi[0] - lo[0] + 2, hi[1] - lo[1] + 2, 40, 40, origin=(lo[0] - 1, lo[1] - 1), z=lo[2] - 0.005)
        binding = bind(sk, motion, TriMesh(V, T))
        src = sk.bone_lengths(motion).mean(axis=0)
        floor = V[:, 2].min()

        def over(X):
            return X[:, hips, :2] - X[:, feet, :2].mean(axis=1)

        for f in (0.85, 0.7):
            small = {n: f * src[j] for j, n in enumerate(sk.names) if sk.parents[j] >= 0 and src[j] > 1e-6}
            P = adapt(binding, TriMesh(V, T), bone_lengths=small).positions
            off = np.linalg.norm(over(P) - f * over(motion), axis=-1)
            height = np.median((P[:, hips, 2] - floor) / (f * (motion[:, hips, 2] - floor)))
            trunk = (np.linalg.norm(P[:, top] - P[:, hips], axis=-1)
                     / (f * np.linalg.norm(motion[:, top] - motion[:, hips], axis=-1))).min()
            print(f"| {clip} | {lo_f}-{hi_f - 1} | {f:g} | {100 * np.median(off):.1f} / {100 * off.max():.1f} "
                  f"| {height:.3f} | {trunk:.3f} | {100 * (motion[:, feet, 2].min() - floor):.1f} / "
                  f"{100 * (P[:, feet, 2].min() - floor):.1f} |")


if __name__ == "__main__":
    main()
