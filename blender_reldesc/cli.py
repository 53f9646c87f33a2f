"""Command line: ``python -m blender_reldesc ...`` and ``blender -b IN.blend -c reldesc ...``.

One parser serves both, built from the table of commands (``commands``): parse -> job -> one
report line -> save. Exit codes: 0 success; 1 failure, with one line on stderr (missing object,
no action, no binding, changed topology...); 2 bad usage. Without ``-o`` the input file is
saved in place, for the commands that change it, and never after a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .commands import COMMANDS, DEMO_SCENES, CommandError, positive_int

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
    for command in COMMANDS.values():
        p = sub.add_parser(command.name, help=command.help)
        p.add_argument("input", metavar="IN.blend", **infile)
        group = p.add_mutually_exclusive_group(required=True) if command.one_of else None
        for option in command.options:
            (group if option.key in command.one_of else p).add_argument(*option.flags, **option.spec)
    if not blender_command:
        p = sub.add_parser("batch", help="run a manifest of jobs (TOML) on a local pool of workers or a Dask cluster")
        p.add_argument("manifest", metavar="MANIFEST.toml")
        p.add_argument("--workers", type=positive_int, default=None, metavar="N",
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
                        "carried onto a walk whose legs got 15 %% longer; retarget: a walk on a Mixamo rig put on a "
                        "bigger Rigify rig with shorter legs, the naive retarget beside ours")
    p = sub.add_parser("examples", help="write each demo scene as a .blend, bound and edited, ready to bake")
    p.add_argument("-o", "--output", metavar="OUT_DIR", default="examples", help="folder for the example files")
    p.add_argument("--scene", choices=("start",) + DEMO_SCENES, action="append", metavar="SCENE",
                   help="only this scene (repeatable; default: all: start, the getting-started scene, nothing "
                        "bound yet, and " + ", ".join(DEMO_SCENES) + ")")
    return parser


def _fail(message):
    print(f"reldesc: error: {message}", file=sys.stderr)
    return 1


def run(argv, blender_command=False, progress=None):
    """Parse and run; returns the exit code.

    progress : ``(label) -> callback(done, total)`` for the job's progress (default: printed
    every ten per cent; a batch worker passes its own).
    """
    try:
        args = build_parser(blender_command).parse_args(argv)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    if args.command == "batch":                # the parent of the workers imports no bpy
        return _batch(args)
    from .core import Cancelled, RelDescError
    try:
        if args.command == "demo":
            from . import demo
            report = demo.run(args.output, scene_name=args.scene)
            print(f"reldesc: demo written to {os.path.abspath(args.output)} "
                  f"({report['frames']} frames, bone-length error {100 * report['bone_length_error_mean']:.3f} % mean)")
            return 0
        if args.command == "examples":
            from . import demo
            paths = demo.write_examples(args.output, args.scene,
                                        progress=lambda name, path: print(f"reldesc: wrote {path}"))
            print(f"reldesc: {len(paths)} example files in {os.path.abspath(args.output)}")
            return 0
        from .adapter import scene as blend
        from .jobs import print_progress
        blend.ensure_registered()
        for path, what in ((getattr(args, "output", None), "output file"), (getattr(args, "report", None), "report"),
                           (getattr(args, "save_binding", None), "binding file")):
            folder = os.path.dirname(os.path.abspath(path)) if path else None
            if folder and not os.path.isdir(folder):
                return _fail(f"cannot write the {what} {path}: folder {folder} does not exist")
        if args.input:
            if not os.path.isfile(args.input):
                return _fail(f"no such file: {args.input}")
            blend.open_file(os.path.abspath(args.input))
        elif not blend.file_path():
            return _fail("no .blend file given")
        command = COMMANDS[args.command]
        arm = blend.get_armature(args.armature)
        warn = lambda m: print(f"reldesc: warning: {m}", file=sys.stderr)  # noqa: E731
        from .viewport import live
        with live.paused():            # a file saved with its live preview on: the job reads the rig as it plays
            report, line = command.run(args, blend.current_scene(), arm, warn, progress or print_progress)
            print(line)
            if getattr(args, "report", None):
                with open(args.report, "w") as fh:
                    json.dump(report, fh, indent=1)
            if command.saves:
                blend.save_file(os.path.abspath(args.output or args.input or blend.file_path()))
        return 0
    except (RelDescError, Cancelled, CommandError) as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"{e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "))
    except RuntimeError as e:       # bpy operators report file errors this way
        return _fail(str(e).strip().splitlines()[-1] if str(e).strip() else "Blender reported an error")
    except Exception as e:          # a bug: still one line, never a traceback
        return _fail(f"unexpected {type(e).__name__}: {e} (please report this)")


def _batch(args):
    from .jobs import batch
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


def execute(argv):
    """Entry point of ``blender -c reldesc``."""
    return run(list(argv), blender_command=True)


_handle = None


def register():
    global _handle
    from .adapter import scene as blend
    _handle = blend.register_cli_command(COMMAND_ID, execute)


def unregister():
    global _handle
    from .adapter import scene as blend
    if _handle is not None:
        blend.unregister_cli_command(_handle)
        _handle = None
