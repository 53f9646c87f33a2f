"""Retargeting between real files, imported as a user imports them (Blender's own BVH and FBX importers).

Run with ``.venv/bin/python benchmarks/bench_retarget_files.py --source CLIP.bvh|CLIP.fbx
--target CHARACTER.fbx [--windows 1:300 901:1200 ...] [--bvh-scale 0.01]`` (the ``bpy`` wheel).
The files are not in the repository: the runs recorded in ``RESULTS.md`` used the shared walk
(``../shared/data/real/walk_cm_30fps.bvh``, imported at scale 0.01 as its centimetres need) and
two of three.js's example files (``examples/models/fbx/mixamo.fbx``: Mixamo's Y Bot with 65 bones,
fingers, the FBX import's 90 degree X turn and 0.01 scale, bones in centimetres; ``Samba
Dancing.fbx``: a Mixamo dance on the same rig). Each window is retargeted by the product's own
job (``jobs.retarget.RetargetJob``, as ``reldesc.retarget`` and the ``retarget`` command run it),
baked to a new action on the target, and the report's measures printed: pose similarity, planted
feet within 2 cm of the ground, stance sliding against the source's, bone length error.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def generated(spec, name):
    """``generated:CONVENTION[:LEGS[:ARMS]]``: a rig of ``synthetic.convention_rest`` (legs LEGS
    times as long, arms down, A or T) standing at the origin."""
    from blender_reldesc.core import synthetic as S
    from blender_reldesc.demo.scenes import _main_child, build_skeleton_armature
    parts = spec.split(":")[1:]
    conv = parts[0]
    legs = float(parts[1]) if len(parts) > 1 else 1.0
    arms = parts[2] if len(parts) > 2 else "down"
    sk, rest = S.convention_rest(conv, legs=legs, arms=arms)
    return build_skeleton_armature(sk, rest, name, _main_child(conv, sk))


def import_file(path, name, bvh_scale):
    """The armature a file brings in, renamed ``name`` (its action ``name_action``)."""
    import bpy
    if str(path).startswith("generated:"):
        return generated(str(path), name)
    before = set(bpy.data.objects)
    if path.suffix.lower() == ".fbx":
        bpy.ops.import_scene.fbx(filepath=str(path))
    elif path.suffix.lower() == ".bvh":
        bpy.ops.import_anim.bvh(filepath=str(path), global_scale=bvh_scale, update_scene_duration=True)
    else:
        raise SystemExit(f"bench_retarget_files: {path.name}: give a .bvh or an .fbx file")
    arms = [o for o in set(bpy.data.objects) - before if o.type == "ARMATURE"]
    if not arms:
        raise SystemExit(f"bench_retarget_files: {path.name} has no armature")
    arm = arms[0]
    arm.name = name
    if arm.animation_data and arm.animation_data.action:
        arm.animation_data.action.name = name + "_action"
    return arm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=pathlib.Path, required=True, help="the clip: .bvh or .fbx")
    ap.add_argument("--target", type=pathlib.Path, required=True,
                    help="the character: .fbx, or generated:CONVENTION[:LEGS[:ARMS]] (a generated rig)")
    ap.add_argument("--windows", nargs="*", default=None, metavar="START:END",
                    help="frame ranges to retarget (default: the whole clip)")
    ap.add_argument("--bvh-scale", type=float, default=0.01, help="the BVH importer's scale (default 0.01: cm)")
    args = ap.parse_args()
    for p in (args.source, args.target):
        if not str(p).startswith("generated:") and not p.exists():
            raise SystemExit(f"bench_retarget_files: {p} not found")
    import bpy
    import addon_utils                                   # importable once bpy is
    bpy.ops.wm.read_factory_settings(use_empty=True)
    for module in ("io_scene_fbx", "io_anim_bvh"):
        addon_utils.enable(module, default_set=True)
    src = import_file(args.source, "Source", args.bvh_scale)
    tgt = import_file(args.target, "Target", args.bvh_scale)
    scene = bpy.context.scene
    from blender_reldesc.jobs.keys import BakeOptions
    from blender_reldesc.optional import feature
    start, end = (int(v) for v in src.animation_data.action.frame_range)
    windows = [tuple(int(v) for v in w.split(":")) for w in args.windows] if args.windows else [(start, end)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Blender {bpy.app.version_string}")
    print(f"source: {args.source.name} ({len(src.data.bones)} bones, frames {start}-{end}, object scale "
          f"{tuple(round(v, 4) for v in src.scale)}); target: {args.target} ({len(tgt.data.bones)} bones, "
          f"object rotation {tuple(round(v, 3) for v in tgt.rotation_euler)}, scale {tuple(round(v, 4) for v in tgt.scale)})")
    print()
    print("| frames | map | mapped / target bones | pose similarity | planted within 2 cm | stance slide / source (m/s) "
          "| bone length error max (m) | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for a, b in windows:
        t0 = time.perf_counter()
        report = feature("retarget").RetargetJob(scene, src, tgt, options=BakeOptions(frames=(a, b)),
                                                 warn=lambda m: None).run(progress=lambda done, total: True)
        dt = time.perf_counter() - t0
        m = report["bone_map"]
        print(f"| {a}-{b} | {m['source']} / {m['target']} | {m['mapped']} / {m['target_bones']} "
              f"| {report['pose_similarity']:.4f} | {100 * report['planted_within']:.1f} % "
              f"| {report['stance_slide']:.3f} / {report['source_stance_slide']:.3f} "
              f"| {report['bone_length_error_max']:.4f} | {dt:.1f} |")


if __name__ == "__main__":
    main()
