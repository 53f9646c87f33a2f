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
1 cm below the sculpted floor.

``--builtin`` (needs the bpy wheel: ``.venv``) adds, for the unedited floor and the 0.3 m edits,
what a competent user's rig of Blender built-ins keeps on the same scene in the same run
(``blender_scenes.build_ik_rig``: leg IK to Empties at the ankles that copy the source ankle and
add the terrain height under it, projected by Shrinkwrap; the feet turned by Damped Track to such
Empties at the balls of the feet, where the clip has toes; the hips raised by the lower of the
two ankles' heights by a driver), measured the same way on the pose Blender evaluates. The clip is
imported with Blender's BVH importer, the armature moved down so the floor is at world z = 0
(the rig measures heights from there). ``BuiltinRig.play`` gives the joints Blender evaluates for
any vertices of the environment (``bench_real_stones.py --builtin``, ``bench_obstacles.py
--builtin`` use it); on the unedited floor they are the source's.
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


def _rotation(matrix):
    """The rotation (3,3) of a pose bone's matrix, its scale taken out."""
    m = np.array(matrix)[:3, :3]
    return m / np.linalg.norm(m, axis=0)


class BuiltinRig:
    """The built-in rig of the module's docstring on one stretch of a clip, the floor sculpted in turn."""

    def __init__(self, path, start, frames, names, motion, z0, V, T, feet):
        import bpy
        from blender_scenes import build_ik_rig
        from blender_reldesc import demo
        self.bpy = bpy
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = self.scene = bpy.context.scene
        bpy.ops.import_anim.bvh(filepath=str(path), global_scale=0.01 if "_cm_" in path.name else 1.0,
                                update_scene_fps=True, update_scene_duration=True)
        arm = self.arm = bpy.context.active_object
        arm.location.z -= z0                                      # the floor at world z = 0
        flat = V.copy()
        flat[:, 2] -= z0
        self.flat = flat
        coll = bpy.data.collections.new("Environment")
        scene.collection.children.link(coll)
        self.ground = demo.mesh_object("Terrain", flat, T, coll)
        self.frames = scene.frame_start + start + np.arange(frames)
        self.names, self.motion, self.z0, self.feet = names, motion, z0, feet
        self.skeleton_parents = np.asarray(read_bvh(path, max_frames=1)[1])
        hips = names[0]
        legs, toes = [], []
        for side in ("l", "r"):
            foot = names[find(names, "foot", side=side)]
            legs.append((foot, arm.data.bones[foot].parent.name))          # the IK on the shin
            toes += [c.name for c in arm.data.bones[foot].children][:1]      # the ball, when the clip has one
        build_ik_rig(scene, arm, self.ground, legs=legs, hips=hips, toes=toes if len(toes) == 2 else ())

    def play(self, vertices):
        """(F,J,3) the joints Blender evaluates, in the clip's frame, with the environment's
        vertices set to ``vertices`` (the clip's frame, the bound mesh's order)."""
        me = self.ground.data
        co = np.asarray(vertices, float).copy()
        co[:, 2] -= self.z0
        me.vertices.foreach_set("co", co.astype(np.float32).ravel())
        me.update()
        self.scene.frame_set(int(self.frames[0]))
        mw = np.array(self.arm.matrix_world)                      # evaluated: the move down included
        pose = self.arm.pose.bones
        # A BVH end site is the tail of its joint's bone (the importer makes no bone for it).
        ends = [(pose[n], "head") if n in pose else (pose[n.removesuffix("_end")], "tail") for n in self.names]
        # The importer gives a leaf bone of zero length a length of its own, so its tail is not the
        # clip's end site: the end site is the source's offset from its joint, turned as the rig
        # turns the bone against the source copy (a head 25 cm tall went through a slab above it).
        src = self.bpy.data.objects[self.arm.name + "_source"].pose.bones
        parent = {j: int(self.skeleton_parents[j]) for j, (_, at) in enumerate(ends) if at == "tail"}
        rot, unrot = mw[:3, :3], np.linalg.inv(mw[:3, :3])
        P = np.empty((len(self.frames), len(ends), 3))
        for i, f in enumerate(self.frames.tolist()):
            self.scene.frame_set(f)
            heads = np.array([b.head for b, _ in ends])
            P[i] = heads @ mw[:3, :3].T + mw[:3, 3]
            for j, pj in parent.items():
                bone = ends[j][0]
                turn = _rotation(bone.matrix) @ _rotation(src[bone.name].matrix).T
                P[i, j] = P[i, pj] + rot @ turn @ unrot @ (self.motion[i, j] - self.motion[i, pj])
        P[..., 2] += self.z0                                      # back to the clip's frame
        self.heads = [j for j, (_, at) in enumerate(ends) if at == "head"]
        self.last_played = P
        return P

    def measure(self, ground_at, plant):
        """(share of planted samples within 2 cm, frames with a joint more than 1 cm inside) of the rig."""
        co = self.flat.copy()
        co[:, 2] += self.z0 + ground_at(co[:, :2])
        P = self.play(co)
        feet = self.feet
        error = np.abs(P[:, feet, 2] - self.motion[:, feet, 2] - ground_at(P[:, feet, :2]))
        heads = self.heads
        below = (P[:, heads, 2] < self.z0 + ground_at(P[:, heads, :2]) - 0.01).any(axis=1)
        self.last = P, error
        return float((error[plant] <= 0.02).mean()), int(below.sum())


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--starts", type=int, nargs="+", default=[0], help="first frames of the stretches")
    ap.add_argument("--heights", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    ap.add_argument("--builtin", action="store_true",
                    help="also the built-in rig (bpy) on the unedited floor and the largest edits")
    args = ap.parse_args(argv)
    clips = sorted(DATA.glob("*.bvh"))
    if not clips:
        print(f"no clips in {DATA}: nothing to measure")
        return 0
    extra = " built-in rig: within 2 cm | built-in rig: frames with a joint > 1 cm inside |" if args.builtin else ""
    print("| clip, frames | edit | placement | planted samples | within 2 cm | on the edit | within 2 cm there "
          "| frames with a joint > 1 cm inside | adapt s |" + extra)
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.builtin else ""))
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
        flat = lambda xy: np.zeros(xy.shape[:-1])                      # noqa: E731
        rows = [("unedited", "-", flat, measure(binding, motion, V, T, z0, feet, plant, flat))]
        for name, centre in placements(motion, feet, plant).items():
            for h in args.heights:
                for kind, sign in (("bump", 1.0), ("dip", -1.0)):
                    g = shape(centre, sign * h)
                    rows.append((f"{kind} {h:.2f} m", name, g, measure(binding, motion, V, T, z0, feet, plant, g)))
        rig = None
        if args.builtin:
            rig = BuiltinRig(path, start, len(motion), names, motion, z0, V, T, feet)
        for edit, where, g, (n, kept, n_there, kept_there, inside, s) in rows:
            line = (f"| {path.name}, {start}-{start + len(motion) - 1} | {edit} | {where} | {n} | {100 * kept:.1f} % | "
                    f"{n_there} | {100 * kept_there:.1f} % | {inside} | {s:.1f} |")
            if rig is not None:
                if edit == "unedited" or edit.endswith(f"{max(args.heights):.2f} m"):
                    b_kept, b_inside = rig.measure(g, plant)
                    line += f" {100 * b_kept:.1f} % | {b_inside} |"
                else:
                    line += " - | - |"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
