"""The commands: one table of jobs that the command line, the batch manifest and the operators
share. Each command is named as its operator (``reldesc.bind_garment`` is ``bind-garment``), and
its options are argparse specs; its ``run`` builds the job (``jobs``), runs it and returns the
report with the one line the command line prints.

This module imports no bpy: the batch's parent process builds the parser and reads the
manifest from it without Blender. The jobs are imported where a command runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .core.solvers.interaction_mesh import SOLVERS
from .optional import feature

#: ``demo --scene`` choices (``demo.run``).
DEMO_SCENES = ("bridge", "stones", "ceiling", "post", "chair", "crowd", "transfer", "pair", "garment", "retarget")


class CommandError(Exception):
    """A command cannot run as given; the message says what to give (the command line exits 1)."""


@dataclass(frozen=True)
class Option:
    """One option of a command: its flags and argparse's keyword arguments."""

    flags: tuple
    spec: dict = field(default_factory=dict)

    @property
    def long(self):
        return next(f for f in self.flags if f.startswith("--"))

    @property
    def switch(self):
        """Takes no value (``--reposition-contacts``)."""
        return self.spec.get("action") in ("store_true", "store_false")

    @property
    def key(self):
        """Its name in a manifest and in the parsed arguments."""
        return self.spec.get("dest", self.long[2:].replace("-", "_"))


def _opt(*flags, **spec):
    return Option(tuple(flags), spec)


def _positive(convert, what):
    """An argparse type: ``convert(text)``, finite and > 0 (``what`` names it in the error)."""
    import argparse

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not 0 < value < float("inf"):                 # also rejects NaN
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


positive_int = _positive(int, "a whole number")
positive_float = _positive(float, "a distance in metres")


@dataclass(frozen=True)
class Command:
    """A job of the command line and of batch manifests.

    run : ``(args, scene, arm, warn, progress) -> (report, line)``; ``progress(label)`` gives the
    job's progress callback. saves : the file is saved after it (in place without ``-o``).
    """

    name: str
    help: str
    options: tuple
    run: object
    operator: str = None
    saves: bool = True
    one_of: tuple = ()          # option keys of which exactly one is required


ARMATURE = _opt("--armature", required=True, help="armature object name")
OUTPUT = _opt("-o", "--output", metavar="OUT.blend", help="save here instead of in place")
SCALE_WITH_BODY = _opt("--scale-with-body", action="store_true",
                       help="the garment follows the body's proportions (a cape on longer legs gets longer, as the "
                            "paper carries it); default: it keeps its size")


#: What a bake keys (frames, step, clean, interpolation): the bake's and the retarget's.
KEY_OPTIONS = (
    _opt("--frames", type=int, nargs=2, metavar=("START", "END"),
         help="bake only these frames (default: all bound frames)"),
    _opt("--step", type=positive_int, default=1, metavar="N", help="key every N-th frame (default 1)"),
    _opt("--clean", type=positive_float, metavar="TOLERANCE",
         help="reduce keys while the joints play back within TOLERANCE metres of the adapted motion"),
    _opt("--interpolation", type=str.upper, choices=("LINEAR", "BEZIER"), default="LINEAR",
         help="key interpolation (default LINEAR)"))


def _report(what):
    return _opt("--report", metavar="REPORT.json", help=f"write {what} as JSON")


# --- the jobs, as the operators and the command line build them ---------------------------

def bind_job(scene, arm, environment, partners=(), body_height=0.0, radius_factor=0.5, warn=print,
             bone_set="DEFORM"):
    """A bind of ``arm`` (with its ``partners``, when any, each bound too and adapted together)."""
    names = [n.strip() for n in partners.split(",")] if isinstance(partners, str) else list(partners)
    names = [n for n in names if n]
    if names:
        return feature("partners").PartnersBindJob(scene, arm, environment, names, body_height, radius_factor,
                                                   warn=warn, bone_set=bone_set)
    from .jobs import BindJob
    return BindJob(scene, arm, environment, body_height, radius_factor, warn=warn, bone_set=bone_set)


def bind_garment(scene, arm, garment, scale_with_body=False):
    return feature("garment").bind_garment(scene, arm, garment, scale_with_body)


def _garment_line(report, arm):
    return f"reldesc: '{report['garment']}' ({report['vertices']} vertices) is carried with '{arm.name}'"


def _run_bind(args, scene, arm, warn, progress):
    if not args.environment:
        if not args.garment:
            raise CommandError("give --environment (the collection to bind with), or --garment for an armature "
                               "already bound")
        report = bind_garment(scene, arm, args.garment, args.scale_with_body)
        return report, _garment_line(report, arm)
    bones = args.bones.upper() if args.bones.lower() in ("deform", "all") else args.bones
    report = bind_job(scene, arm, args.environment, args.partners, args.body_height, args.radius_factor, warn,
                      bones).run(progress("bind"))
    line = (f"reldesc: bound {report['frames']} frames of '{report['action']}' to {report['descriptors']} descriptors"
            + "".join(f", with '{p['armature']}'" for p in report.get("partners", [])))
    if args.save_binding:
        from .jobs import save_binding_file
        save_binding_file(arm, args.save_binding)
    if args.garment:
        g = bind_garment(scene, arm, args.garment, args.scale_with_body)
        report["garment"] = g
        line += "\n" + _garment_line(g, arm)
    return report, line


def _run_bind_garment(args, scene, arm, warn, progress):
    report = bind_garment(scene, arm, args.garment, args.scale_with_body)
    return report, _garment_line(report, arm)


def _run_bake(args, scene, arm, warn, progress):
    from .jobs import BakeJob, BakeOptions, load_binding_file
    if args.binding:
        if not os.path.isfile(args.binding):
            raise CommandError(f"no such binding file: {args.binding}")
        load_binding_file(arm, args.binding)
    contacts = {k: v for k, v in (("effectors", args.effectors), ("distance", args.contact_distance),
                                  ("speed", args.contact_speed)) if v is not None}
    options = BakeOptions(frames=tuple(args.frames) if args.frames else None, step=args.step, clean=args.clean,
                          interpolation=args.interpolation, target=args.target.upper())
    report = BakeJob(scene, arm, args.influence_group, warn=warn, reposition_contacts=args.reposition_contacts,
                     contacts=contacts, options=options, solver=args.solver).run(progress("bake"))
    line = (f"reldesc: baked {report['frames']} frames into '{report['action']}' "
            f"(bone-length error {100 * report['bone_length_error_mean']:.3f} % mean, "
            f"{100 * report['bone_length_error_max']:.3f} % max; contacts: "
            + ", ".join(f"{v} {k}" for k, v in report["contact_counts"].items())
            + f"; {report['keys']['written']} keys, {1000 * report['keys']['max_deviation']:.2f} mm max from "
              "the adapted motion)"
            + "".join(f"; root {w['status']} on frames {w['start']}-{w['end']}" for w in report.get("root_windows", []))
            + "".join(f"; partner '{p['armature']}' into '{p['action']}'" for p in report.get("partners", [])))
    return report, line


def _run_contacts(reposition):
    def run(args, scene, arm, warn, progress):
        from .jobs import ContactsJob
        report = ContactsJob(scene, arm, reposition, warn).run(progress("contacts"))
        c = report["contact_counts"]
        return report, (f"reldesc: {len(report['contacts'])} contact phases of '{arm.name}': {c['valid']} valid, "
                        f"{c['repositioned']} re-positioned, {c['unresolved']} unresolved")
    return run


def _run_walk(args, scene, arm, warn, progress):
    report = feature("locomotion").WalkJob(scene, arm, args.terrain, args.path, args.paths, args.crowd, args.spacing,
                                           warn=warn, workers=args.workers).run(progress("walk"))
    return report, (f"reldesc: walked {len(report['characters'])} character(s) of '{report['source']}' for "
                    f"{report['frames']} frames into collection '{report['armature']} walk' "
                    f"(feet standing {100 * report['stance_fraction']:.0f} % of frames)")


def _run_reach(args, scene, arm, warn, progress):
    report = feature("reaching").ReachJob(scene, arm, args.hand, args.target, args.frame, args.window, args.hold,
                                          args.database, warn=warn, whole_body=not args.arm_only).run(progress("reach"))
    r = report["reach"]
    return report, (f"reldesc: {r['hand']} reaches '{r['target']}' at frame {r['frame']} ({1000 * r['hand_error']:.1f} "
                    f"mm off; frames {r['window'][0]}-{r['window'][1]}) in '{report['action']}'")


def _run_transfer(args, scene, arm, warn, progress):
    report = feature("transfer").TransferJob(scene, arm, args.source, args.target_object,
                                             warn=warn).run(progress("transfer"))
    t = report["transfer"]
    return report, (f"reldesc: transferred '{report['source']}' from '{t['source']}' to '{t['target']}' "
                    f"({t['labels']}: {', '.join(t['segments'])}) into '{report['action']}'")


def _run_retarget(args, scene, arm, warn, progress):
    from .adapter import get_armature
    from .jobs import BakeOptions
    source = get_armature(args.source)
    options = BakeOptions(frames=tuple(args.frames) if args.frames else None, step=args.step, clean=args.clean,
                          interpolation=args.interpolation, target=args.bake_target.upper())
    bones = args.bones.upper() if args.bones.lower() in ("deform", "all") else args.bones
    report = feature("retarget").RetargetJob(scene, source, arm, args.map, args.environment, options, warn=warn,
                                             bone_set=bones).run(progress("retarget"))
    m = report["bone_map"]
    return report, (f"reldesc: retargeted '{report['source']}' from '{source.name}' onto '{arm.name}' as "
                     f"'{report['action']}' ({m['mapped']} of {m['target_bones']} bones mapped by {m['source']}/"
                     f"{m['target']}; pose similarity {report['pose_similarity']:.4f}; planted feet "
                     f"{100 * report['planted_within']:.1f} % within 2 cm of the ground; "
                     f"stride x{report['stride']:.3f})")


def _run_unbind(args, scene, arm, warn, progress):
    from .adapter import storage
    if not storage.clear_binding(arm):
        raise CommandError(f"'{arm.name}' is not bound: nothing to unbind")
    return dict(armature=arm.name), f"reldesc: removed the binding of '{arm.name}'"


def _run_use_source(args, scene, arm, warn, progress):
    from .adapter import actions, storage
    stored = storage.load(arm)
    if stored["source"] is None:
        raise CommandError(f"the source action '{stored['meta']['action']}' is gone")
    restored = actions.use_source(arm, stored["source"])
    return (dict(armature=arm.name, action=stored["source"].name, constraints_restored=restored),
            f"reldesc: '{arm.name}' plays '{stored['source'].name}' again"
            + (f" ({restored} constraints back on)" if restored else ""))


COMMANDS = {c.name: c for c in (
    Command("bind", "bind an armature's action to an environment collection", (
        ARMATURE,
        _opt("--environment", help="collection holding the environment meshes (required unless only --garment is "
                                   "given, for an armature already bound)"),
        _opt("--garment", metavar="MESH", help="also carry this mesh with the armature in every bake (a point cache "
                                               "and a Mesh Cache modifier)"),
        SCALE_WITH_BODY,
        _opt("--body-height", type=float, default=0.0, help="character height (default: measured)"),
        _opt("--radius-factor", type=float, default=0.5, help="descriptor spacing factor (Eq. 7: 0.5)"),
        _opt("--bones", default="deform", metavar="deform|all|COLLECTION",
             help="bones that get descriptors and keys: deform bones (default), all, or a bone collection"),
        _opt("--save-binding", metavar="BINDING.npz",
             help="also write the binding to a file, for baking other shots of the same environment"),
        _opt("--partners", nargs="+", metavar="ARMATURE", default=(),
             help="other armatures bound with this one and adapted together with it"),
        OUTPUT), _run_bind, "reldesc.bind"),
    Command("bake", "adapt the bound action to the environment as it is and save a new action", (
        ARMATURE,
        _opt("--influence-group", default=None, help="vertex group of painted influence (default: the file's setting)"),
        _opt("--binding", metavar="BINDING.npz",
             help="bake from this saved binding (bind ... --save-binding) instead of the file's own; the "
                  "environment must be an edited copy of the bound one (same topology)"),
        OUTPUT, _report("timings, errors and contacts"),
        _opt("--reposition-contacts", action="store_true", help="move contacts the edit made invalid onto other "
                                                                "surfaces"),
        _opt("--solver", type=str.lower, choices=SOLVERS, default=None,
             help="descriptors (the warping solver) or interaction_mesh (Ho et al. 2010); default: the file's "
                  "setting"),
        _opt("--effectors", default=None, help="comma-separated contact joints (default: feet, toes, hands)"),
        _opt("--contact-distance", type=float, default=None,
             help="contact distance as a fraction of body height (default 0.015)"),
        _opt("--contact-speed", type=float, default=None, help="resting speed as body heights per second (default 0.12)"),
        *KEY_OPTIONS,
        _opt("--target", type=str.lower, choices=("action", "nla"), default="action",
             help="assign the adapted action (default) or add it as an NLA track above the source")),
        _run_bake, "reldesc.bake"),
    Command("bind-garment", "carry a mesh (a skirt, a cape) with a bound armature in every bake", (
        ARMATURE, _opt("--garment", required=True, metavar="MESH", help="the garment's mesh object"), SCALE_WITH_BODY,
        OUTPUT),
        _run_bind_garment, "reldesc.bind_garment"),
    Command("detect-contacts", "find the contact phases of the bound motion and check them against the "
                               "environment now (stored for the Contacts panel)", (
        ARMATURE, OUTPUT, _report("the contact phases")), _run_contacts(False), "reldesc.detect_contacts"),
    Command("reposition-contacts", "re-position the contacts the edit made invalid (stored for the Contacts panel; "
                                   "bake with --reposition-contacts to use them)", (
        ARMATURE, OUTPUT, _report("the contact phases")), _run_contacts(True), "reldesc.reposition_contacts"),
    Command("walk", "walk an armature's locomotion action along a path over a terrain (one character per path, "
                    "or a crowd along one)", (
        _opt("--armature", required=True, help="armature object name (its action: a walk or run on flat ground)"),
        _opt("--terrain", required=True, help="collection holding the terrain meshes"),
        _opt("--path", help="path curve object name"),
        _opt("--paths", metavar="COLLECTION", help="collection of path curves, one character each"),
        _opt("--crowd", type=int, default=1, metavar="N", help="characters side by side along --path (default 1)"),
        _opt("--spacing", type=float, default=1.0, metavar="METRES",
             help="distance between neighbours of the crowd (default 1)"),
        _opt("--workers", type=positive_int, default=1, metavar="N",
             help="processes to share the characters among, on Linux (default 1; same result)"),
        OUTPUT, _report("timings, warnings and characters")), _run_walk, "reldesc.walk", one_of=("path", "paths")),
    Command("reach", "make a bound armature's hand reach a target object at a frame, and bake it", (
        _opt("--armature", required=True, help="armature object name (bound)"),
        _opt("--hand", required=True, metavar="BONE", help="the bone whose head reaches the target"),
        _opt("--target", required=True, metavar="OBJECT", help="the object (an Empty, animated or not) to reach"),
        _opt("--frame", required=True, type=int, help="the frame the hand is on the target"),
        _opt("--window", type=positive_int, default=30, metavar="FRAMES",
             help="frames to reach out over, and back after the hold (default 30)"),
        _opt("--hold", type=int, default=0, metavar="FRAMES", help="frames the hand stays on the target (default 0)"),
        _opt("--database", nargs="+", default=[], metavar="ACTION",
             help="actions of the armature to learn the reach's path and timing from"),
        _opt("--arm-only", action="store_true",
             help="move the arm alone on the baked body (fast; no collisions or joint limits for the arm)"),
        OUTPUT, _report("the reach's and the bake's figures")), _run_reach, "reldesc.reach"),
    Command("transfer", "move a bound interaction from an object of the environment to another object of its "
                        "kind, and bake it", (
        _opt("--armature", required=True, help="armature object name (bound)"),
        _opt("--from", dest="source", required=True, metavar="OBJECT",
             help="the mesh of the bound environment the motion interacts with"),
        _opt("--to", dest="target_object", required=True, metavar="OBJECT", help="the mesh to move it to"),
        OUTPUT, _report("the transfer's and the bake's figures")), _run_transfer, "reldesc.transfer"),
    Command("retarget", "put an armature's action on another armature (any rig), keeping its contacts with the "
                        "environment or the floor, as a new action '<action>.retarget'", (
        _opt("--source", required=True, metavar="ARMATURE", help="the armature whose action is taken (not changed)"),
        _opt("--target", dest="armature", required=True, metavar="ARMATURE", help="the armature that gets it"),
        _opt("--map", default="auto", metavar="PRESET|MAP.json",
             help="how bones pair: auto (default: the best-fitting preset, else the structure), structure, "
                  "mixamo, cmu, bvh, rigify, ue, makehuman, or a JSON map file"),
        _opt("--environment", default=None, metavar="COLLECTION",
             help="the surfaces the source moves on and touches (default: a floor under its feet; the stride "
                  "then scales with the legs)"),
        _opt("--bones", default="deform", metavar="deform|all|COLLECTION",
             help="the target's bones that get keys (default: deform bones)"),
        OUTPUT, _report("the map, the measures and the timings"),
        *KEY_OPTIONS,
        _opt("--bake-target", type=str.lower, choices=("action", "nla"), default="action",
             help="assign the new action (default) or add it as an NLA track (--target names the armature here)")),
        _run_retarget, "reldesc.retarget"),
    Command("unbind", "remove the stored binding from an armature (its actions stay)", (ARMATURE, OUTPUT),
            _run_unbind, "reldesc.unbind"),
    Command("use-source", "assign the bound source action again (constraints a bake switched off act again)",
            (ARMATURE, OUTPUT), _run_use_source, "reldesc.use_source"),
)}
