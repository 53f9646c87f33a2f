"""Side views of one crowd character's first ten frames, walked by two trees: issue 35's benchmark
crowd (100 characters x 1000 frames over hills, ``bench_crowd_ab.crowd_scene``), character 28
(clip offset 16: its left leg straight in the source) walked alone (it walks the same in the
crowd). Top row BEFORE, bottom row AFTER; the left leg red, the terrain under the character grey.
Written as a PNG with no plotting library.

Run with ``.venv/bin/python benchmarks/crowd_knee_picture.py BEFORE AFTER OUT.png``, BEFORE and AFTER
being checkouts (``git worktree add /tmp/before <commit>``).
"""

from __future__ import annotations

import argparse
import pathlib
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_crowd_ab import crowd_scene  # noqa: E402
from bench_live_ab import load  # noqa: E402

WIDTH, HEIGHT, SCALE = 1400, 600, 140.0          # pixels; pixels a metre


def first_frames(pkg, character=28, frames=12, count=100, length_frames=1000):
    carpet, paths, terrain, offsets = crowd_scene(pkg["core"], pkg["synthetic"], pkg["locomotion"], count,
                                                  length_frames)
    loco = pkg["locomotion"]
    positions = loco.walk(carpet, [paths[character]], terrain, [offsets[character]], frames=frames).positions[0]
    return carpet.skeleton, positions, loco.Terrain(terrain)


def draw(rows):
    img = np.full((HEIGHT, WIDTH, 3), 255, np.uint8)

    def line(p, q, colour, w):
        for t in np.linspace(0.0, 1.0, int(max(np.abs(q - p).max(), 1)) * 2):
            x, y = (p + (q - p) * t).astype(int)
            if w <= x < WIDTH - w and w <= y < HEIGHT - w:
                img[y - w:y + w, x - w:x + w] = colour

    for row, (skel, P, ground) in enumerate(rows):
        left = {skel.names.index(n) for n in ("LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe")}
        for f in range(10):
            ox, oy = 70 + f * 135 - P[f, 0, 0] * SCALE, 280 + row * 300

            def at(v):
                return np.array([ox + v[0] * SCALE, oy - v[2] * SCALE])
            xs = np.linspace(P[f, 0, 0] - 0.5, P[f, 0, 0] + 0.5, 30)
            z, _ = ground.heights(np.c_[xs, np.full(30, P[f, 0, 1])], np.full(30, 1.0))
            for a in range(29):
                line(at([xs[a], 0.0, z[a]]), at([xs[a + 1], 0.0, z[a + 1]]), (150, 150, 150), 1)
            for j, p in enumerate(skel.parents.tolist()):
                if p >= 0:
                    line(at(P[f, p]), at(P[f, j]), (200, 30, 30) if j in left else (60, 60, 60), 2 if j in left else 1)
    return img


def write_png(path, img):
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(img.shape[0]))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", img.shape[1], img.shape[0], 8, 2, 0, 0, 0)
    pathlib.Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                                   + chunk(b"IEND", b""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("before", type=pathlib.Path)
    ap.add_argument("after", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    args = ap.parse_args(argv)
    names = ("core", "core.synthetic", "core.locomotion")
    rows = [first_frames(load(tree, f"reldesc_knee_{k}", names)) for k, tree in enumerate((args.before, args.after))]
    write_png(args.out, draw(rows))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
