"""Placement table (issue 34): each feature on the shared real clips, with the rig placed as an FBX
import leaves it (object rotated 90 degrees about X, scale 0.01, bones in centimetres, under a
parent Empty with its floor), unedited, moved together with its set, moved apart, and scaled.

Usage (from the project's root, after `make test` built .venv; needs ../shared/data/real):
    .venv/bin/python benchmarks/bench_placement.py [--frames 240]

Rows, per clip (the CMU-convention walk, the Rigify-named in-place clip):
- bake, unedited: world joints against the source (mm)
- bake, moved together (the parent moved 4 m and turned 30 degrees): largest change of the
  bones' local pose (matrix_basis; locations relative), world joints against the source moved
  the same way (mm)
- bake, moved apart (the armature alone moved 1.5 m): the move the bake reports (m), world
  joints against the source (pulled back, mm)
- bake, scaled 1.2 (object scale): the reported scale, thigh length ratio, lowest foot against
  the source's (mm), median ratio of the hips' height over the lowest foot
- contacts, moved together: the detected phases the same (yes/no)
- reach, moved together (the target in the set): largest change of the local pose
- partners (two copies of the clip 0.8 m apart): unedited, moved together, the partner scaled
  1.2, the partner moved 0.2 m closer: minimum clearance (least joint-to-joint distance) against
  the source's (cm) and frames within 2 cm of the source's clearance (%)
Seconds are each bake's wall time; the ratio is against the unedited bake in the same run.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import tempfile
import time

import bpy
import numpy as np
from mathutils import Matrix

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import blender_reldesc  # noqa: E402
from blender_reldesc import adapter, jobs  # noqa: E402

REAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
#: clip, file, scale to centimetres, foot bones, hand bone (None: the clip has none), thigh and shin bones
CLIPS = [("walk (CMU names)", "walk_cm_30fps.bvh", 1.0, ("LeftToe", "RightToe"), "RightHand", ("LeftUpLeg", "LeftLeg")),
         ("in place (Rigify names)", "rigify_inplace_24fps.bvh", 100.0, ("foot.L", "foot.R"), None,
          ("thigh.L", "shin.L"))]
MOVE = Matrix.Translation((4.0, -1.5, 0.0)) @ Matrix.Rotation(math.radians(30), 4, "Z")


def trimmed(path, count, out):
    lines = path.read_text().splitlines()
    m = next(i for i, line in enumerate(lines) if line.strip() == "MOTION")
    rows = lines[m + 3:m + 3 + count]
    out.write_text("\n".join(lines[:m + 1] + [f"Frames: {len(rows)}", lines[m + 2]] + rows) + "\n")
    return out


def heads(scene, ob, frames):
    """World positions (F,B,3) of the bone heads as Blender evaluates them."""
    return adapter.read_motion(scene, ob, np.asarray(list(frames)), [])[0]


def local_pose(scene, ob, frames):
    """(F,B,4,4) every pose bone's matrix_basis as Blender plays the assigned action."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        out.append([np.array(pb.matrix_basis) for pb in ob.pose.bones])
    return np.array(out)


def pose_change(a, b):
    """Largest change of a local pose value (rotation entries; locations relative to the largest)."""
    rot = float(np.abs(a[..., :3, :3] - b[..., :3, :3]).max())
    loc = float(np.abs(a[..., :3, 3] - b[..., :3, 3]).max()) / max(1.0, float(np.abs(a[..., :3, 3]).max()))
    return max(rot, loc)


def moved(points, matrix=MOVE):
    m = np.array(matrix)
    return points @ m[:3, :3].T + m[:3, 3]


def import_fbx_like(path, scale, name, frames):
    """The clip as an FBX import leaves it (bones in cm, Y-up rest data, object R_x(90) S(0.01))."""
    before = set(bpy.data.objects)
    bpy.ops.import_anim.bvh(filepath=str(path), global_scale=scale, frame_start=1, update_scene_fps=True,
                            update_scene_duration=True)
    arm = next(ob for ob in bpy.data.objects if ob not in before)
    arm.name = name
    bpy.context.view_layer.objects.active = arm
    for ob in bpy.context.selected_objects:
        ob.select_set(False)
    arm.select_set(True)
    arm.rotation_euler = (-math.pi / 2, 0.0, 0.0)
    bpy.ops.object.transform_apply(location=False, rotation=True, scale=False)
    arm.rotation_euler = (math.pi / 2, 0.0, 0.0)
    arm.scale = (0.01, 0.01, 0.01)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    return arm


def floor_under(points, coll, parent):
    lo, hi = points.reshape(-1, 3).min(0), points.reshape(-1, 3).max(0)
    z = float(np.percentile(points[..., 2], 0.5)) - 0.01
    xs, ys = np.arange(lo[0] - 1.5, hi[0] + 1.55, 0.1), np.arange(lo[1] - 1.5, hi[1] + 1.55, 0.1)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    V = np.stack([X.ravel(), Y.ravel(), np.full(X.size, z)], 1)
    idx = np.arange(X.size).reshape(X.shape)
    q = [idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()]
    T = np.concatenate([np.stack([q[0], q[1], q[2]], 1), np.stack([q[0], q[2], q[3]], 1)])
    me = bpy.data.meshes.new("Floor")
    me.from_pydata(V.tolist(), [], T.tolist())
    floor = bpy.data.objects.new("Floor", me)
    coll.objects.link(floor)
    floor.parent = parent
    return floor


def scene_of(clip, frames, work, partner=False):
    """A fresh file with the clip (and with ``partner`` a second copy 0.8 m along X) over a floor,
    everything under 'Root'; returns (scene, armatures, source world heads per armature, root)."""
    label, file, scale, *_ = clip
    bpy.ops.wm.read_factory_settings(use_empty=True)
    path = trimmed(REAL / file, frames, work / f"{file}.{frames}.bvh")
    scene = bpy.context.scene
    root = bpy.data.objects.new("Root", None)
    scene.collection.objects.link(root)
    arms = [import_fbx_like(path, scale, "A", frames)]
    if partner:
        arms.append(import_fbx_like(path, scale, "B", frames))
        arms[1].location.x += 0.8
    for arm in arms:
        arm.parent = root
    bpy.context.view_layer.update()
    src = [heads(scene, arm, range(1, frames + 1)) for arm in arms]
    coll = bpy.data.collections.new("Env")
    scene.collection.children.link(coll)
    floor_under(np.concatenate(src, axis=1), coll, root)
    bpy.context.view_layer.update()
    return scene, arms, src, root


def bake(scene, arm):
    t0 = time.perf_counter()
    report = jobs.BakeJob(scene, arm, warn=lambda m: None).run(lambda d, t: True)
    return report, time.perf_counter() - t0


def bind(scene, arm, partners=()):
    job = jobs.bind_job if not partners else None
    if job is not None:
        return job(scene, arm, "Env", progress=lambda d, t: True, warn=lambda m: None)
    from blender_reldesc.commands import bind_job
    return bind_job(scene, arm, "Env", list(partners), warn=lambda m: None).run(lambda d, t: True)


def clearance(scene, a, b, frames):
    ha, hb = heads(scene, a, frames), heads(scene, b, frames)
    return np.linalg.norm(ha[:, :, None] - hb[:, None], axis=-1).min(axis=(1, 2))


def single(clip, frames, work, rows):
    label, _, _, feet, hand, (thigh, shin) = clip
    F = range(1, frames + 1)
    scene, (arm,), (src,), root = scene_of(clip, frames, work)
    names = [pb.name for pb in arm.pose.bones]
    bind(scene, arm)
    r, base = bake(scene, arm)
    unedited = local_pose(scene, arm, F)
    rows.append((label, "bake", "unedited", f"{np.abs(heads(scene, arm, F) - src).max() * 1000:.2f} mm from the source",
                 base, 1.0))
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    r, t = bake(scene, arm)
    err = np.abs(heads(scene, arm, F) - moved(src)).max() * 1000
    rows.append((label, "bake", "moved together", f"local pose changed {pose_change(unedited, local_pose(scene, arm, F)):.1e}; "
                 f"{err:.2f} mm from the source moved; reported move {r['placement']['moved_from_environment']:.3f} m",
                 t, t / base))
    root.matrix_world = Matrix()
    bpy.context.view_layer.update()
    arm.matrix_world = Matrix.Translation((1.5, 0.0, 0.0)) @ arm.matrix_world
    bpy.context.view_layer.update()
    r, t = bake(scene, arm)
    err = np.abs(heads(scene, arm, F) - src).max() * 1000
    rows.append((label, "bake", "moved apart 1.5 m", f"reported move {r['placement']['moved_from_environment']:.3f} m; "
                 f"pulled back to {err:.2f} mm from the source", t, t / base))
    bpy.context.view_layer.update()
    arm.matrix_world = Matrix.Translation((-1.5, 0.0, 0.0)) @ arm.matrix_world
    arm.scale = (0.012, 0.012, 0.012)
    bpy.context.view_layer.update()
    r, t = bake(scene, arm)
    h = heads(scene, arm, F)
    length = lambda p: np.linalg.norm(p[:, names.index(shin)] - p[:, names.index(thigh)], axis=-1)  # noqa: E731
    fi = [names.index(n) for n in feet]
    rows.append((label, "bake", "scaled 1.2", f"scale {r['placement']['object_scale']:.3f}; thigh x"
                 f"{np.median(length(h) / length(src)):.3f}; lowest foot {(h[:, fi, 2].min() - src[:, fi, 2].min()) * 1000:+.1f} mm; "
                 f"hips over the lowest foot x{np.median((h[:, 0, 2] - h[:, fi, 2].min()) / (src[:, 0, 2] - src[:, fi, 2].min())):.3f}; "
                 f"bone-length error "
                 f"{100 * r['bone_length_error_max']:.3f} %", t, t / base))
    arm.scale = (0.01, 0.01, 0.01)
    bpy.context.view_layer.update()
    # contacts
    c0 = jobs.ContactsJob(scene, arm).run(lambda d, t: True)["contacts"]
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    t0 = time.perf_counter()
    c1 = jobs.ContactsJob(scene, arm).run(lambda d, t: True)["contacts"]
    t = time.perf_counter() - t0
    same = [(c["effector"], c["start"], c["end"]) for c in c0] == [(c["effector"], c["start"], c["end"]) for c in c1]
    rows.append((label, "contacts", "moved together", f"{len(c1)} phases, {'the same' if same else 'DIFFERENT'}", t,
                 float("nan")))
    # reach: a target in the set, a little away from the hand at the middle frame
    if hand is None:
        rows.append((label, "reach", "moved together", "the clip has no hand bone (its arms end at the forearm)",
                     float("nan"), float("nan")))
        return
    root.matrix_world = Matrix()
    bpy.context.view_layer.update()
    mid = frames // 2
    target = bpy.data.objects.new("Target", None)
    bound = jobs.Bound(arm, scene)                         # the source's hand, as bound (the parent where it was)
    at = bound.binding.motion[mid - 1, bound.binding.skeleton.index(hand)]
    target.location = at + np.array([0.1, -0.05, 0.1])
    scene.collection.objects.link(target)
    target.parent = root
    from blender_reldesc.jobs.reaching import reach_job
    reach_job(scene, arm, hand, "Target", mid, window=20, warn=lambda m: None, progress=lambda d, t: True)
    here = local_pose(scene, arm, F)
    root.matrix_world = MOVE
    bpy.context.view_layer.update()
    t0 = time.perf_counter()
    reach_job(scene, arm, hand, "Target", mid, window=20, warn=lambda m: None, progress=lambda d, t: True)
    t = time.perf_counter() - t0
    rows.append((label, "reach", "moved together", f"local pose changed {pose_change(here, local_pose(scene, arm, F)):.1e}",
                 t, t / base))


def pair(clip, frames, work, rows):
    label = clip[0]
    F = range(1, frames + 1)
    for case in ("unedited", "moved together", "partner scaled 1.2", "partner moved 0.2 m closer"):
        scene, (a, b), src, root = scene_of(clip, frames, work, partner=True)
        source = clearance(scene, a, b, F)
        bind(scene, a, partners=["B"])
        if case == "moved together":
            root.matrix_world = MOVE
        elif case == "partner scaled 1.2":
            b.scale = (0.012, 0.012, 0.012)
        elif case == "partner moved 0.2 m closer":
            b.matrix_world = Matrix.Translation((-0.2, 0.0, 0.0)) @ b.matrix_world
        bpy.context.view_layer.update()
        before = clearance(scene, a, b, F)
        r, t = bake(scene, a)
        after = clearance(scene, a, b, F)
        rows.append((label, "partners", case,
                     f"clearance min {after.min() * 100:.1f} cm (source {source.min() * 100:.1f}, unadapted "
                     f"{before.min() * 100:.1f}); within 2 cm of the source on {100 * (np.abs(after - source) <= 0.02).mean():.0f} % "
                     f"of frames (unadapted {100 * (np.abs(before - source) <= 0.02).mean():.0f} %)", t, float("nan")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=240)
    a = ap.parse_args()
    if not REAL.is_dir():
        print(f"bench_placement: {REAL} is missing: the table needs the shared real clips", file=sys.stderr)
        return 1
    blender_reldesc.register()
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-placement-"))
    rows = []
    for clip in CLIPS:
        single(clip, a.frames, work, rows)
        pair(clip, a.frames, work, rows)
    print(f"\nPlacement, {a.frames} frames of each clip, rig FBX-like under a parent (bpy {bpy.app.version_string})\n")
    print("| clip | feature | case | figures | seconds | vs unedited bake |")
    print("|---|---|---|---|---|---|")
    for label, feature, case, figures, seconds, ratio in rows:
        print(f"| {label} | {feature} | {case} | {figures} | {'' if math.isnan(seconds) else f'{seconds:.2f}'} | "
              f"{'' if math.isnan(ratio) else f'{ratio:.2f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
