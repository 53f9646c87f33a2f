"""The same core work in each Python environment the project supports, in turn, in one run.

    .venv/bin/python benchmarks/bench_environments.py --rounds 3 \\
        .venv45/bin/python .venv/bin/python .venv-latest/bin/python

Each environment runs, in a process of its own and taking turns round after round: bind of the
real walk (``shared/data/real/walk_cm_30fps.bvh``, all frames) on a 10k-triangle floor, a first
adapt to the floor sculpted with hills (0.15 m) and a repeated adapt; and the space coverage
feature of Transfer (spherical harmonics: ``sph_harm`` before scipy 1.15, ``sph_harm_y`` after).
Prints a Markdown table: medians over the rounds, speed against the first environment named,
and how far each environment's results are from the first one's (adapted joints in body heights,
features relative to their largest value).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "real" / "walk_cm_30fps.bvh"


def child(out):
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    import platform

    import numpy as np
    import scipy

    from bench_core import real_scene, sculpt, timed
    from blender_reldesc.core import TriMesh, adapt, bind
    from blender_reldesc.core import synthetic as S
    from blender_reldesc.core.transfer import space_coverage

    from importlib import metadata
    try:
        blender = metadata.version("bpy")              # not imported: its threads would share the cores
    except metadata.PackageNotFoundError:
        blender = "-"
    _, skel, motion, verts, tris = real_scene(None)
    mesh = TriMesh(verts, tris)
    deformed = mesh.with_vertices(sculpt(verts))
    t_bind, binding = timed(lambda: bind(skel, motion, mesh), 1)
    t_first, _ = timed(lambda: adapt(binding, deformed), 1)            # builds the coefficient table
    t_adapt, res = timed(lambda: adapt(binding, deformed), 1)
    chair_v, chair_t, _, _ = S.seat_object("chair")
    points = np.array([[0.05, 0.0, 0.62], [0.6, 0.1, 0.3], [0.3, 0.4, 0.9], [0.05, 0.0, 0.2]])
    t_feature, feature = timed(lambda: space_coverage(points, chair_v, chair_t), 1)
    np.savez(out, positions=res.positions, feature=feature, height=binding.body_height)
    print(json.dumps(dict(python=platform.python_version(), numpy=np.__version__, scipy=scipy.__version__,
                          blender=blender, frames=int(motion.shape[0]), bind=t_bind, first=t_first,
                          adapt=t_adapt, feature=t_feature,
                          bone_err=float(100 * res.bone_length_error.mean()))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pythons", nargs="+", help="Python executables of the environments (the first: the baseline)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", metavar="OUT.npz", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    import numpy as np
    runs = {p: [] for p in args.pythons}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for k, py in enumerate(args.pythons):
                out = os.path.join(tmp, f"{k}.npz")
                proc = subprocess.run([py, __file__, "--child", out, py], capture_output=True, text=True,
                                      cwd=str(ROOT))
                if proc.returncode != 0:
                    sys.exit(f"{py} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
                runs[py].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(f"round {r + 1}: {py} adapt {runs[py][-1]['adapt']:.2f} s", file=sys.stderr)
        results = [np.load(os.path.join(tmp, f"{k}.npz")) for k in range(len(args.pythons))]
        base = results[0]
        H = float(base["height"])
        print(f"Real walk ({REAL.name}, {runs[args.pythons[0]][0]['frames']} frames), 10k-triangle floor "
              f"sculpted with hills; medians of {args.rounds} rounds taken in turn.\n")
        print("| environment | Python | numpy | scipy | Blender | bind s | first adapt s | adapt s | adapt vs first env "
              "| coverage feature s | joints vs first env / H | feature vs first env | bone err mean % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        med0 = statistics.median(x["adapt"] for x in runs[args.pythons[0]])
        for py, res in zip(args.pythons, results):
            rows = runs[py]
            med = {key: statistics.median(x[key] for x in rows) for key in ("bind", "first", "adapt", "feature")}
            joints = float(np.abs(res["positions"] - base["positions"]).max() / H)
            feature = float(np.abs(res["feature"] - base["feature"]).max() / np.abs(base["feature"]).max())
            v = rows[0]
            print(f"| `{py}` | {v['python']} | {v['numpy']} | {v['scipy']} | {v['blender']} | {med['bind']:.2f} | "
                  f"{med['first']:.2f} | {med['adapt']:.2f} | {med0 / med['adapt']:.2f}x | {med['feature']:.2f} | "
                  f"{joints:.1e} | {feature:.1e} | {v['bone_err']:.4f} |")


if __name__ == "__main__":
    main()
