"""Command line: ``python -m blender_reldesc ...`` and ``blender -b IN.blend -c reldesc ...``.

One parser serves both. Exit codes: 0 success; 1 failure, with one line on
stderr (missing object, no action, no binding, changed topology...); 2 bad
usage. Without ``-o`` the input file is saved in place, for bind, bake, walk, reach and
transfer only, and never after a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .core.solvers.interaction_mesh import SOLVERS

#: ``demo --scene`` choices (``demo.run``). Kept here, not imported from ``demo``: building the
#: parser must not import bpy (a batch's worker processes inherit the parent's sys.path, and
#: after bpy's import that finds bpy's script modules before the wheel).
DEMO_SCENES = ("bridge", "stones", "ceiling", "chair", "crowd", "transfer", "pair", "garment")

COMMAND_ID = "reldesc"


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def build_parser(blender_command=False):
    prog = "blender -b IN.blend -c reldesc" if blender_command else "python -m blender_reldesc"
    parser = _Parser(prog=prog, description="Adapt motion to a changed scene with relationship descriptors.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    infile = dict(nargs="?" if blender_command else None,
                  help="the .blend file" + (" (default: the file Blender opened)" if blender_command else ""))
    p = sub.add_parser("bind", help="bind an armature's action to an environment collection")
    p.add_argument("input", metavar="IN.blend", **infile)
    p.add_argument("--armature", required=True, help="armature object name")
    p.add_argument("--environment", help="collection holding the environment meshes (required unless only "
                                          "--garment is given, for an armature already bound)")
    p.add_argument("--garment", metavar="MESH", help="also carry this mesh with the armature in every bake "
                                                     "(a point cache and a Mesh Cache modifier)")
    p.add_argument("--body-height", type=float, default=0.0, help="character height (default: measured)")
    p.add_argument("--radius-factor", type=float, default=0.5, help="descriptor spacing factor (Eq. 7: 0.5)")
    p.add_argument("--bones", default="deform", metavar="deform|all|COLLECTION",
                   help="bones that get descriptors and keys: deform bones (default), all, or a bone collection")
    p.add_argument("--save-binding", metavar="BINDING.npz",
                   help="also write the binding to a file, for baking other shots of the same environment")
    p.add_argument("--partners", nargs="+", metavar="ARMATURE", default=(),
                   help="other armatures bound with this one and adapted together with it")
    p.add_argument("-o", "--output", metavar="OUT.blend", help="save here instead of in place")
    p = sub.add_parser("bake", help="adapt the bound action to the environment as it is and save a new action")
    p.add_argument("input", metavar="IN.blend", **infile)
    p.add_argument("--armature", required=True, help="armature object name")
    p.add_argument("--influence-group", default=None,
                   help="vertex group of painted influence (default: the file's setting)")
    p.add_argument("--binding", metavar="BINDING.npz",
                   help="bake from this saved binding (bind ... --save-binding) instead of the file's own; the "
                        "environment must be an edited copy of the bound one (same topology)")
    p.add_argument("-o", "--output", metavar="OUT.blend", help="save here instead of in place")
    p.add_argument("--report", metavar="REPORT.json", help="write timings, errors and contacts as JSON")
    p.add_argument("--reposition-contacts", action="store_true",
                   help="move contacts the edit made invalid onto other surfaces")
    p.add_argument("--solver", type=str.lower, choices=SOLVERS, default=None,
                   help="descriptors (the warping solver) or interaction_mesh (Ho et al. 2010); "
                        "default: the file's setting")
    p.add_argument("--effectors", default=None, help="comma-separated contact joints (default: feet, toes, hands)")
    p.add_argument("--contact-distance", type=float, default=None,
                   help="contact distance as a fraction of body height (default 0.015)")
    p.add_argument("--contact-speed", type=float, default=None,
                   help="resting speed as body heights per second (default 0.12)")
    p.add_argument("--frames", type=int, nargs=2, metavar=("START", "END"),
                   help="bake only these frames (default: all bound frames)")
    p.add_argument("--step", type=_positive_int, default=1, metavar="N", help="key every N-th frame (default 1)")
    p.add_argument("--clean", type=_positive_float, metavar="TOLERANCE",
                   help="reduce keys while the joints play back within TOLERANCE metres of the adapted motion")
    p.add_argument("--interpolation", type=str.upper, choices=("LINEAR", "BEZIER"), default="LINEAR",
                   help="key interpolation (default LINEAR)")
    p.add_argument("--target", type=str.lower, choices=("action", "nla"), default="action",
                   help="assign the adapted action (default) or add it as an NLA track above the source")
    p = sub.add_parser("walk", help="walk an armature's locomotion action along a path over a terrain "
                                    "(one character per path, or a crowd along one)")
    p.add_argument("input", metavar="IN.blend", **infile)
    p.add_argument("--armature", required=True, help="armature object name (its action: a walk or run on flat ground)")
    p.add_argument("--terrain", required=True, help="collection holding the terrain meshes")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--path", help="path curve object name")
    group.add_argument("--paths", metavar="COLLECTION", help="collection of path curves, one character each")
    p.add_argument("--crowd", type=int, default=1, metavar="N", help="characters side by side along --path (default 1)")
    p.add_argument("--spacing", type=float, default=1.0, metavar="METRES",
                   help="distance between neighbours of the crowd (default 1)")
    p.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                   help="processes to share the characters among, on Linux (default 1; same result)")
    p.add_argument("-o", "--output", metavar="OUT.blend", help="save here instead of in place")
    p.add_argument("--report", metavar="REPORT.json", help="write timings, warnings and characters as JSON")
    p = sub.add_parser("reach", help="make a bound armature's hand reach a target object at a frame, and bake it")
    p.add_argument("input", metavar="IN.blend", **infile)
    p.add_argument("--armature", required=True, help="armature object name (bound)")
    p.add_argument("--hand", required=True, metavar="BONE", help="the bone whose head reaches the target")
    p.add_argument("--target", required=True, metavar="OBJECT", help="the object (an Empty, animated or not) to reach")
    p.add_argument("--frame", required=True, type=int, help="the frame the hand is on the target")
    p.add_argument("--window", type=_positive_int, default=30, metavar="FRAMES",
                   help="frames to reach out over, and back after the hold (default 30)")
    p.add_argument("--hold", type=int, default=0, metavar="FRAMES", help="frames the hand stays on the target (default 0)")
    p.add_argument("--database", nargs="+", default=[], metavar="ACTION",
                   help="actions of the armature to learn the reach's path and timing from")
    p.add_argument("--arm-only", action="store_true",
                   help="move the arm alone on the baked body (fast; no collisions or joint limits for the arm)")
    p.add_argument("-o", "--output", metavar="OUT.blend", help="save here instead of in place")
    p.add_argument("--report", metavar="REPORT.json", help="write the reach's and the bake's figures as JSON")
    p = sub.add_parser("transfer", help="move a bound interaction from an object of the environment to another "
                                        "object of its kind, and bake it")
    p.add_argument("input", metavar="IN.blend", **infile)
    p.add_argument("--armature", required=True, help="armature object name (bound)")
    p.add_argument("--from", dest="source", required=True, metavar="OBJECT",
                   help="the mesh of the bound environment the motion interacts with")
    p.add_argument("--to", dest="target_object", required=True, metavar="OBJECT", help="the mesh to move it to")
    p.add_argument("-o", "--output", metavar="OUT.blend", help="save here instead of in place")
    p.add_argument("--report", metavar="REPORT.json", help="write the transfer's and the bake's figures as JSON")
    if not blender_command:
        p = sub.add_parser("batch", help="run a manifest of jobs (TOML) on a local pool of workers or a Dask cluster")
        p.add_argument("manifest", metavar="MANIFEST.toml")
        p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                       help="worker processes of the local pool (default: one per core)")
        p.add_argument("--scheduler", metavar="ADDRESS", help="send the jobs to this Dask scheduler (tcp://HOST:8786)")
        p.add_argument("--force", action="store_true", help="run jobs whose outputs are newer than their inputs too")
        p.add_argument("--summary", metavar="SUMMARY.json", help="write each job's status, seconds and error as JSON")
        p.add_argument("--progress", choices=("text", "json"), default="text",
                       help="one updating line (text, default) or JSON lines on stdout (json)")
        p.add_argument("--flamenco-settings", metavar="SETTINGS.json",
                       help="write the settings of a Flamenco 'reldesc_batch' job for this manifest, run nothing")
    p = sub.add_parser("demo", help="build the demo scene, bind, edit, bake and render before/after")
    p.add_argument("-o", "--output", metavar="OUT_DIR", default="demo_out", help="folder for the demo files")
    p.add_argument("--scene", choices=DEMO_SCENES, default="bridge",
                   help="bridge: a walk over a sagging bridge under a lowered beam (default); stones: a stepping "
                        "stone moved away, the foot re-positioned; ceiling: a ceiling brought down over a walk, the root "
                        "replanned under it; chair: a seated character loses an armrest and its seat is lowered; crowd: "
                        "a walk on flat ground walked by a crowd along a curve over hills; transfer: sitting on a chair "
                        "moved onto a stool; pair: two characters holding hands, one grown 20 %%; garment: a skirt "
                        "carried onto a walk whose legs got 15 %% longer")
    return parser


def _positive(convert, what):
    """An argparse type: ``convert(text)``, finite and > 0 (``what`` names it in the error)."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not 0 < value < float("inf"):                 # also rejects NaN
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


_positive_int = _positive(int, "a whole number")
_positive_float = _positive(float, "a distance in metres")


def _fail(message):
    print(f"reldesc: error: {message}", file=sys.stderr)
    return 1


def _dump(args, report):
    """Write the report JSON where ``--report`` asks (when it does)."""
    if getattr(args, "report", None):
        with open(args.report, "w") as fh:
            json.dump(report, fh, indent=1)


def run(argv, blender_command=False):
    """Parse and run; returns the exit code."""
    try:
        args = build_parser(blender_command).parse_args(argv)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    if args.command == "batch":                # the parent of the workers imports no bpy
        return _batch(args)
    import bpy
    from .core import Cancelled, RelDescError
    try:
        if args.command == "demo":
            from . import demo
            report = demo.run(args.output, scene_name=args.scene)
            print(f"reldesc: demo written to {os.path.abspath(args.output)} "
                  f"({report['frames']} frames, bone-length error {100 * report['bone_length_error_mean']:.3f} % mean)")
            return 0
        _ensure_registered()
        for path, what in ((getattr(args, "output", None), "output file"), (getattr(args, "report", None), "report"),
                           (getattr(args, "save_binding", None), "binding file")):
            folder = os.path.dirname(os.path.abspath(path)) if path else None
            if folder and not os.path.isdir(folder):
                return _fail(f"cannot write the {what} {path}: folder {folder} does not exist")
        if args.input:
            if not os.path.isfile(args.input):
                return _fail(f"no such file: {args.input}")
            bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.input), load_ui=False)
        elif not bpy.data.filepath:
            return _fail("no .blend file given")
        from . import adapter, jobs
        from .optional import feature
        scene = bpy.context.scene
        arm = adapter.get_armature(args.armature)
        warn = lambda m: print(f"reldesc: warning: {m}", file=sys.stderr)  # noqa: E731
        if args.command == "reach":
            reaching = feature("reaching")
            report = reaching.reach_job(scene, arm, args.hand, args.target, args.frame, args.window, args.hold,
                                        args.database, progress=jobs._print_progress("reach"), warn=warn,
                                        whole_body=not args.arm_only)
            r = report["reach"]
            print(f"reldesc: {r['hand']} reaches '{r['target']}' at frame {r['frame']} ({1000 * r['hand_error']:.1f} mm "
                  f"off; frames {r['window'][0]}-{r['window'][1]}) in '{report['action']}'")
            _dump(args, report)
        elif args.command == "transfer":
            transfer = feature("transfer")
            report = transfer.transfer_job(scene, arm, args.source, args.target_object,
                                           progress=jobs._print_progress("transfer"), warn=warn)
            t = report["transfer"]
            print(f"reldesc: transferred '{report['source']}' from '{t['source']}' to '{t['target']}' "
                  f"({t['labels']}: {', '.join(t['segments'])}) into '{report['action']}'")
            _dump(args, report)
        elif args.command == "walk":
            walking = feature("walking")
            report = walking.walk_job(scene, arm, args.terrain, args.path, args.paths, args.crowd, args.spacing,
                                      progress=jobs._print_progress("walk"), warn=warn, workers=args.workers)
            print(f"reldesc: walked {len(report['characters'])} character(s) of '{report['source']}' for "
                  f"{report['frames']} frames into collection '{report['armature']} walk' "
                  f"(feet standing {100 * report['stance_fraction']:.0f} % of frames)")
            _dump(args, report)
        elif args.command == "bind" and not args.environment:
            if not args.garment:
                return _fail("give --environment (the collection to bind with), or --garment for an armature "
                             "already bound")
            garments = feature("garments")
            report = garments.bind_garment(scene, arm, args.garment)
            print(f"reldesc: '{report['garment']}' ({report['vertices']} vertices) is carried with '{arm.name}'")
        elif args.command == "bind":
            bones = args.bones.upper() if args.bones.lower() in ("deform", "all") else args.bones
            if args.partners:
                partners = feature("partners")
                report = partners.PartnersBindJob(scene, arm, args.environment, list(args.partners),
                                                  args.body_height, args.radius_factor, warn=warn,
                                                  bone_set=bones).run(jobs._print_progress("bind"))
            else:
                report = jobs.bind_job(scene, arm, args.environment, args.body_height, args.radius_factor,
                                       warn=warn, bone_set=bones)
            print(f"reldesc: bound {report['frames']} frames of '{report['action']}' to "
                  f"{report['descriptors']} descriptors"
                  + "".join(f", with '{p['armature']}'" for p in report.get("partners", [])))
            if args.save_binding:
                jobs.save_binding_file(arm, args.save_binding)
            if args.garment:
                garments = feature("garments")
                g = garments.bind_garment(scene, arm, args.garment)
                print(f"reldesc: '{g['garment']}' ({g['vertices']} vertices) is carried with '{arm.name}'")
        else:
            if args.binding:
                if not os.path.isfile(args.binding):
                    return _fail(f"no such binding file: {args.binding}")
                jobs.load_binding_file(arm, args.binding)
            group = args.influence_group
            if group is None:
                group = scene.reldesc.influence_group if hasattr(scene, "reldesc") else ""
            contacts = {k: v for k, v in (("effectors", args.effectors), ("distance", args.contact_distance),
                                          ("speed", args.contact_speed)) if v is not None}
            options = jobs.BakeOptions(frames=tuple(args.frames) if args.frames else None, step=args.step,
                                       clean=args.clean, interpolation=args.interpolation,
                                       target=args.target.upper())
            report = jobs.bake_job(scene, arm, group, warn=warn, reposition_contacts=args.reposition_contacts,
                                   contacts=contacts, options=options, solver=args.solver)
            print(f"reldesc: baked {report['frames']} frames into '{report['action']}' "
                  f"(bone-length error {100 * report['bone_length_error_mean']:.3f} % mean, "
                  f"{100 * report['bone_length_error_max']:.3f} % max; contacts: "
                  + ", ".join(f"{v} {k}" for k, v in report["contact_counts"].items())
                  + f"; {report['keys']['written']} keys, {1000 * report['keys']['max_deviation']:.2f} mm max from "
                    "the adapted motion)"
                  + "".join(f"; partner '{p['armature']}' into '{p['action']}'" for p in report.get("partners", [])))
            _dump(args, report)
        out = os.path.abspath(args.output or args.input or bpy.data.filepath)
        bpy.ops.wm.save_as_mainfile(filepath=out)
        return 0
    except (RelDescError, Cancelled) as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"{e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "))
    except RuntimeError as e:       # bpy operators report file errors this way
        return _fail(str(e).strip().splitlines()[-1] if str(e).strip() else "Blender reported an error")
    except Exception as e:          # a bug: still one line, never a traceback
        return _fail(f"unexpected {type(e).__name__}: {e} (please report this)")


def _batch(args):
    from . import batch
    if args.flamenco_settings:
        try:
            settings = batch.flamenco_settings(args.manifest)
        except batch.ManifestError as e:
            print(f"reldesc: error: {e}", file=sys.stderr)
            return 2
        with open(args.flamenco_settings, "w") as fh:
            json.dump(settings, fh, indent=1)
        print(f"reldesc: wrote the Flamenco job settings of {len(json.loads(settings['jobs_json']))} jobs to "
              f"{args.flamenco_settings}")
        return 0
    for path in (args.summary,):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            return _fail(f"cannot write the summary {path}: folder {folder} does not exist")
    return batch.run_batch(args.manifest, args.workers, args.scheduler, args.force, args.summary, args.progress)


def _ensure_registered():
    """Register the extension's properties when run from the bpy wheel."""
    import bpy
    if not hasattr(bpy.types.Scene, "reldesc"):
        from . import properties
        properties.register()


def execute(argv):
    """Entry point of ``blender -c reldesc``."""
    return run(list(argv), blender_command=True)


_handle = None


def register():
    global _handle
    import bpy
    if hasattr(bpy.utils, "register_cli_command"):
        _handle = bpy.utils.register_cli_command(COMMAND_ID, execute)


def unregister():
    global _handle
    import bpy
    if _handle is not None:
        bpy.utils.unregister_cli_command(_handle)
        _handle = None
