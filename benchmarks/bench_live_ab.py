"""Live preview speed of two trees in one process, taking turns play by play: the pair preview
(``PartnersLiveSession``) on issue 37's scenes and one character's ``LiveSession``, each tree's
core imported under a name of its own, so that this noisy machine's slow spells (it runs the
same code up to twice as slow from one minute to the next) fall on both. Prints per scene the
median milliseconds a frame played (the first frame left out) of each tree over the rounds, the
median of the per-round ratios, and AFTER's poses against BEFORE's.

Run with ``.venv/bin/python benchmarks/bench_live_ab.py BEFORE AFTER [--rounds 7]``, BEFORE and
AFTER being checkouts (``git worktree add /tmp/before <commit>``; ``.`` for this one).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import platform
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_characters as B  # noqa: E402


def load(tree, alias, names=("core", "core.synthetic", "core.characters")):
    """The core of checkout ``tree`` imported as package ``alias`` (a link in a temporary folder):
    ``{last part of each of names: module}``."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="reldesc_ab_"))
    (folder / alias).symlink_to(pathlib.Path(tree).resolve() / "blender_reldesc", target_is_directory=True)
    sys.path.insert(0, str(folder))
    return {n.rsplit(".", 1)[-1]: importlib.import_module(f"{alias}.{n}") for n in names}


def scenes(pkg, frames):
    """``B.SCENES``' edits built with ``pkg``'s own core: (key, session factory, one-character factory,
    vertices)."""
    core, S, ch = pkg["core"], pkg["synthetic"], pkg["characters"]
    mesh = core.TriMesh(*S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)))
    out = []
    for label, _, edit, _, _, (ba, bb), partners, kw, _, _ in B._scene_edits(frames, mesh,
                                                                          (S, core.bind, ch.bind_partners)):
        one = kw.get("bone_lengths", [None, None])[1]
        out.append((f"{label}, {edit}",
                    lambda ba=ba, bb=bb, partners=partners, kw=kw: ch.PartnersLiveSession([ba, bb], partners, **kw),
                    lambda bb=bb, one=one: core.LiveSession(bb, bone_lengths=one), mesh.vertices))
    return out


def play(session, frames, vertices):
    """Poses (F,...) and the median seconds a frame (the first left out), as ``bench_characters``
    plays a session."""
    got, seconds = B._play(session, frames, vertices)
    return np.array(got), float(np.median(seconds[1:]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("before", type=pathlib.Path)
    ap.add_argument("after", type=pathlib.Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--frames", type=int, default=120)
    args = ap.parse_args(argv)
    trees = [load(args.before, "reldesc_before"), load(args.after, "reldesc_after")]
    built = [scenes(t, args.frames) for t in trees]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.frames} frames, 27 joints a character; {args.rounds} rounds, the trees in turn")
    print()
    print("| scene | preview | BEFORE ms/frame | AFTER ms/frame | AFTER / BEFORE (median of rounds) "
          "| AFTER's poses from BEFORE's (m) |")
    print("|---|---|---|---|---|---|")
    for i, (key, *_rest) in enumerate(built[0]):
        for which, label in ((1, "pair"), (2, "one character")):
            times, poses = [[], []], [None, None]
            for r in range(args.rounds):
                order = (0, 1) if r % 2 == 0 else (1, 0)
                for t in order:
                    _, make_pair, make_one, vertices = built[t][i]
                    session = (make_pair if which == 1 else make_one)()
                    poses[t], dt = play(session, args.frames, vertices)
                    times[t].append(dt)
            ratio = np.median(np.array(times[1]) / np.array(times[0]))
            diff = float(np.abs(poses[1] - poses[0]).max())
            print(f"| {key} | {label} | {1e3 * np.median(times[0]):.1f} | {1e3 * np.median(times[1]):.1f} "
                  f"| {ratio:.2f} | {diff:.1e} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
