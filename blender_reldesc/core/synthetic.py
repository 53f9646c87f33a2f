"""Generated scenes for tests, benchmarks and the demo: no data files needed.

A humanoid skeleton with a procedural walk (analytic two-bone leg IK, so the
stance foot is planted and every bone keeps its length exactly), ground
grids, and boxes. Z is up, the character walks along +X. Metres.
"""

from __future__ import annotations

import zlib

import numpy as np

from .skeleton import Skeleton
from .skeleton.joints import two_bone

#: (name, parent, rest offset from the parent) of the generated humanoid, metres.
HUMANOID = [
    ("Hips", None, (0.0, 0.0, 0.0)),
    ("Spine", "Hips", (0.0, 0.0, 0.10)),
    ("Spine1", "Spine", (0.0, 0.0, 0.14)),
    ("Spine2", "Spine1", (0.0, 0.0, 0.14)),
    ("Neck", "Spine2", (0.0, 0.0, 0.16)),
    ("Head", "Neck", (0.0, 0.0, 0.10)),
    ("HeadTop", "Head", (0.0, 0.0, 0.20)),
    ("LeftShoulder", "Spine2", (0.0, 0.05, 0.12)),
    ("LeftArm", "LeftShoulder", (0.0, 0.13, 0.0)),
    ("LeftForeArm", "LeftArm", (0.0, 0.0, -0.28)),
    ("LeftHand", "LeftForeArm", (0.0, 0.0, -0.26)),
    ("LeftHandEnd", "LeftHand", (0.0, 0.0, -0.16)),
    ("RightShoulder", "Spine2", (0.0, -0.05, 0.12)),
    ("RightArm", "RightShoulder", (0.0, -0.13, 0.0)),
    ("RightForeArm", "RightArm", (0.0, 0.0, -0.28)),
    ("RightHand", "RightForeArm", (0.0, 0.0, -0.26)),
    ("RightHandEnd", "RightHand", (0.0, 0.0, -0.16)),
    ("LeftUpLeg", "Hips", (0.0, 0.10, -0.05)),
    ("LeftLeg", "LeftUpLeg", (0.0, 0.0, -0.44)),
    ("LeftFoot", "LeftLeg", (0.0, 0.0, -0.42)),
    ("LeftToe", "LeftFoot", (0.14, 0.0, -0.06)),
    ("LeftToeEnd", "LeftToe", (0.05, 0.0, 0.0)),
    ("RightUpLeg", "Hips", (0.0, -0.10, -0.05)),
    ("RightLeg", "RightUpLeg", (0.0, 0.0, -0.44)),
    ("RightFoot", "RightLeg", (0.0, 0.0, -0.42)),
    ("RightToe", "RightFoot", (0.14, 0.0, -0.06)),
    ("RightToeEnd", "RightToe", (0.05, 0.0, 0.0)),
]
ANKLE_HEIGHT = 0.08   # LeftFoot above the ground when the foot is flat
HIP_HEIGHT = 0.05 + 0.44 + 0.42 + ANKLE_HEIGHT - 0.04   # knees slightly bent at mid-stance


def humanoid():
    """(Skeleton, rest offsets (J,3)) of the generated 27-joint humanoid."""
    names = [n for n, _, _ in HUMANOID]
    parents = [-1 if p is None else names.index(p) for _, p, _ in HUMANOID]
    return Skeleton(names, parents), np.array([o for _, _, o in HUMANOID], dtype=float)


def _rot_y(angle):
    """(...,3,3) rotations about the lateral axis (+Y)."""
    c, s = np.cos(angle), np.sin(angle)
    m = np.zeros(np.shape(angle) + (3, 3))
    m[..., 0, 0], m[..., 0, 2], m[..., 1, 1], m[..., 2, 0], m[..., 2, 2] = c, s, 1.0, -s, c
    return m


def walk(frames=120, fps=30.0, speed=1.3, stride=1.4, start=(0.0, 0.0), ground=None):
    """Joint positions (F,J,3) of the humanoid walking along +X.

    ground : optional callable ``(x, y) -> z`` of the floor height (default 0):
        the feet are planted on it, the pelvis follows the average foot height.
    Feet: stance 60 % of the cycle, planted; swing along a raised arc. Legs by
    analytic two-bone IK in the sagittal plane, so bone lengths are exact.
    """
    skel, off = humanoid()
    idx = {n: i for i, n in enumerate(skel.names)}
    F = frames
    t = np.arange(F) / fps
    period = stride / speed
    ground = ground or (lambda x, y: np.zeros_like(x))
    pos = np.zeros((F, len(skel), 3))
    x0, y0 = start
    pelvis_x = x0 + speed * t
    feet = {}
    for side, phase_shift, lateral in (("Left", 0.0, 0.10), ("Right", 0.5, -0.10)):
        phase = (t / period + phase_shift) % 1.0
        cycle = np.floor(t / period + phase_shift)
        # Plant positions: the foot lands at the pelvis position + stride/4 ahead.
        land = x0 + stride * (cycle - phase_shift) + stride * 0.3
        in_swing = phase >= 0.6
        s = np.clip((phase - 0.6) / 0.4, 0, 1)
        ease = 0.5 - 0.5 * np.cos(np.pi * s)
        fx = np.where(in_swing, land + stride * ease, land)
        fy = np.full(F, y0 + lateral)
        lift = np.where(in_swing, 0.12 * np.sin(np.pi * s), 0.0)
        fz = ground(fx, fy) + lift
        feet[side] = np.stack([fx, fy, fz], axis=1)
    floor = 0.5 * (feet["Left"][:, 2] + feet["Right"][:, 2])
    bob = 0.02 * np.cos(4 * np.pi * t / period)
    hips = np.stack([pelvis_x, np.full(F, y0), floor + HIP_HEIGHT + bob - 0.01], axis=1)
    pos[:, idx["Hips"]] = hips
    # Upper body: straight spine with a slight forward lean, arms swinging.
    lean = _rot_y(np.full(F, 0.06))
    for name in ("Spine", "Spine1", "Spine2", "Neck", "Head", "HeadTop", "LeftShoulder", "RightShoulder",
                 "LeftArm", "RightArm"):
        j = idx[name]
        p = skel.parents[j]
        pos[:, j] = pos[:, p] + np.einsum("fij,j->fi", lean, off[j])
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        phase = 2 * np.pi * t / period
        swing = -sign * 0.35 * np.sin(phase)          # opposite to the same-side leg
        upper = _rot_y(swing)
        lower = _rot_y(swing - 0.25)
        arm, fore, hand, end = (idx[side + n] for n in ("Arm", "ForeArm", "Hand", "HandEnd"))
        pos[:, fore] = pos[:, arm] + np.einsum("fij,j->fi", upper, off[fore])
        pos[:, hand] = pos[:, fore] + np.einsum("fij,j->fi", lower, off[hand])
        pos[:, end] = pos[:, hand] + np.einsum("fij,j->fi", lower, off[end])
    for side, lateral in (("Left", 0.10), ("Right", -0.10)):
        up, leg, foot, toe, end = (idx[side + n] for n in ("UpLeg", "Leg", "Foot", "Toe", "ToeEnd"))
        hip = hips + np.array([0.0, lateral, -0.05])
        pos[:, up] = hip
        ankle = feet[side] + np.array([0.0, 0.0, ANKLE_HEIGHT])
        l1, l2 = np.linalg.norm(off[leg]), np.linalg.norm(off[foot])
        d = ankle - hip
        dist = np.clip(np.linalg.norm(d, axis=1), 1e-6, (l1 + l2) * 0.9999)
        dirn = d / np.linalg.norm(d, axis=1, keepdims=True)
        # Knee in the sagittal plane (x, z), bent forward (+X).
        cos_a = (l1 ** 2 + dist ** 2 - l2 ** 2) / (2 * l1 * dist)
        a = np.arccos(np.clip(cos_a, -1, 1))
        side_axis = np.array([0.0, 1.0, 0.0])
        bend = np.cross(side_axis, dirn)                       # forward-ish, perpendicular
        bend /= np.linalg.norm(bend, axis=1, keepdims=True)
        knee = hip + l1 * (np.cos(a)[:, None] * dirn - np.sin(a)[:, None] * bend)
        pos[:, leg] = knee
        pos[:, foot] = knee + l2 * (ankle - knee) / np.linalg.norm(ankle - knee, axis=1, keepdims=True)
        pos[:, toe] = pos[:, foot] + off[toe]
        pos[:, end] = pos[:, toe] + off[end]
    return skel, pos


#: (name, parent, rest offset) of the generated quadruped (a dog-sized four-legged rig), metres.
QUADRUPED = [
    ("Pelvis", None, (0.0, 0.0, 0.0)),
    ("Spine", "Pelvis", (0.25, 0.0, 0.02)),
    ("Chest", "Spine", (0.25, 0.0, 0.0)),
    ("Neck", "Chest", (0.12, 0.0, 0.12)),
    ("Head", "Neck", (0.12, 0.0, 0.06)),
    ("HeadEnd", "Head", (0.16, 0.0, -0.04)),
    ("Tail", "Pelvis", (-0.18, 0.0, 0.02)),
    ("TailEnd", "Tail", (-0.22, 0.0, -0.08)),
]
for _side, _y in (("Left", 0.09), ("Right", -0.09)):
    QUADRUPED += [
        (f"{_side}Thigh", "Pelvis", (0.0, _y, -0.04)),
        (f"{_side}Shin", f"{_side}Thigh", (0.0, 0.0, -0.24)),
        (f"{_side}Hock", f"{_side}Shin", (0.0, 0.0, -0.24)),
        (f"{_side}HindPaw", f"{_side}Hock", (0.06, 0.0, -0.04)),
        (f"{_side}UpperArm", "Chest", (0.0, _y, -0.06)),
        (f"{_side}ForeArm", f"{_side}UpperArm", (0.0, 0.0, -0.22)),
        (f"{_side}Wrist", f"{_side}ForeArm", (0.0, 0.0, -0.22)),
        (f"{_side}FrontPaw", f"{_side}Wrist", (0.06, 0.0, -0.04)),
    ]
PAW_HEIGHT = 0.05      # a hock or wrist above the ground when its paw stands


def quadruped():
    """(Skeleton, rest offsets (J,3)) of the generated 24-joint quadruped."""
    names = [n for n, _, _ in QUADRUPED]
    parents = [-1 if p is None else names.index(p) for _, p, _ in QUADRUPED]
    return Skeleton(names, parents), np.array([o for _, _, o in QUADRUPED], dtype=float)


def _two_bone(top, end, l1, l2, forward):
    """(F,3) middle joint of a two-bone chain from ``top`` to ``end`` (F,3), bent towards
    ``forward`` (+1: +X, -1: -X) in the sagittal plane; lengths l1, l2 kept exactly."""
    d = end - top
    dist = np.clip(np.linalg.norm(d, axis=1), 1e-6, (l1 + l2) * 0.9999)
    dirn = d / np.linalg.norm(d, axis=1, keepdims=True)
    a = np.arccos(np.clip((l1 ** 2 + dist ** 2 - l2 ** 2) / (2 * l1 * dist), -1, 1))
    bend = np.cross(np.array([0.0, 1.0, 0.0]), dirn)
    bend /= np.linalg.norm(bend, axis=1, keepdims=True)
    return top + l1 * (np.cos(a)[:, None] * dirn - forward * np.sin(a)[:, None] * bend)


def quadruped_walk(frames=120, fps=30.0, speed=0.8, stride=0.7, start=(0.0, 0.0)):
    """Joint positions (F,J,3) of the quadruped walking along +X on flat ground (z = 0).

    A four-beat walk (left hind, left fore, right hind, right fore a quarter cycle apart),
    each paw planted for 70 % of the cycle and swung along a raised arc; legs by analytic
    two-bone IK (hind knees bent forward, elbows back), so bone lengths are exact.
    """
    skel, off = quadruped()
    idx = {n: i for i, n in enumerate(skel.names)}
    F = frames
    t = np.arange(F) / fps
    period = stride / speed
    pos = np.zeros((F, len(skel), 3))
    x0, y0 = start
    bob = 0.01 * np.cos(4 * np.pi * t / period)
    pelvis = np.stack([x0 + speed * t, np.full(F, y0), np.full(F, 0.50) + bob], axis=1)
    pos[:, idx["Pelvis"]] = pelvis
    for name in ("Spine", "Chest", "Neck", "Head", "HeadEnd", "Tail", "TailEnd"):
        j = idx[name]
        pos[:, j] = pos[:, skel.parents[j]] + off[j]
    for side, y, shifts in (("Left", 0.09, (0.0, 0.25)), ("Right", -0.09, (0.5, 0.75))):
        for part, top_name, bones, shift, forward in (
                ("Hind", f"{side}Thigh", ("Shin", "Hock", "HindPaw"), shifts[0], 1.0),
                ("Front", f"{side}UpperArm", ("ForeArm", "Wrist", "FrontPaw"), shifts[1], -1.0)):
            top = idx[top_name]
            mid, low, paw = (idx[side + b] for b in bones)
            pos[:, top] = pos[:, skel.parents[top]] + off[top]
            phase = (t / period + shift) % 1.0
            cycle = np.floor(t / period + shift)
            base = pos[0, top, 0] - x0
            land = x0 + base + stride * (cycle - shift) + stride * 0.35
            s = np.clip((phase - 0.7) / 0.3, 0, 1)
            ease = 0.5 - 0.5 * np.cos(np.pi * s)
            fx = np.where(phase >= 0.7, land + stride * ease, land)
            lift = np.where(phase >= 0.7, 0.08 * np.sin(np.pi * s), 0.0)
            ankle = np.stack([fx, np.full(F, y0 + y), PAW_HEIGHT + lift], axis=1)
            l1, l2 = np.linalg.norm(off[mid]), np.linalg.norm(off[low])
            pos[:, mid] = _two_bone(pos[:, top], ankle, l1, l2, forward)
            pos[:, low] = pos[:, mid] + l2 * _unit_rows(ankle - pos[:, mid])
            pos[:, paw] = pos[:, low] + off[paw]
    return skel, pos


def _unit_rows(v):
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def grid(size_x, size_y, nx, ny, origin=(0.0, 0.0), height=None, z=0.0):
    """A ground grid: vertices (V,3), triangles (T,3) with normals up (+Z).

    height : optional callable ``(x, y) -> z`` offset; ``2 * nx * ny`` triangles.
    """
    xs = origin[0] + np.linspace(0, size_x, nx + 1)
    ys = origin[1] + np.linspace(0, size_y, ny + 1)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    Z = np.full_like(X, z) + (height(X, Y) if height is not None else 0.0)
    verts = np.stack([X, Y, Z], axis=-1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    a = (i * (ny + 1) + j).ravel()
    b, c, d = a + (ny + 1), a + (ny + 1) + 1, a + 1
    tris = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return verts, tris


def box(center, size, subdivisions=1):
    """A closed box with outward normals: vertices (V,3), triangles (T,3).

    subdivisions : quads per edge on each face (``12 * subdivisions**2`` triangles).
    Faces share no vertices (like a flat-shaded Blender cube); TriMesh welds them.
    """
    center, size = np.asarray(center, float), np.asarray(size, float)
    verts, tris = [], []
    n = subdivisions
    for axis in range(3):
        for sign in (-1.0, 1.0):
            u_ax, v_ax = [a for a in range(3) if a != axis]
            if sign < 0:
                u_ax, v_ax = v_ax, u_ax
            # Right-handed (u, v, normal) so that triangles face outwards.
            if np.cross(np.eye(3)[u_ax], np.eye(3)[v_ax])[axis] * sign < 0:
                u_ax, v_ax = v_ax, u_ax
            s = np.linspace(-0.5, 0.5, n + 1)
            U, V = np.meshgrid(s, s, indexing="ij")
            p = np.zeros(U.shape + (3,))
            p[..., axis] = 0.5 * sign
            p[..., u_ax], p[..., v_ax] = U, V
            base = sum(len(x) for x in verts)
            verts.append((p.reshape(-1, 3) * size) + center)
            i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            a = base + (i * (n + 1) + j).ravel()
            b, c, d = a + (n + 1), a + (n + 1) + 1, a + 1
            tris.append(np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)]))
    return np.concatenate(verts), np.concatenate(tris)


def merge(*parts):
    """Concatenate (vertices, triangles) pairs into one mesh; returns also vertex ranges."""
    verts, tris, ranges = [], [], []
    base = 0
    for v, t in parts:
        verts.append(v)
        tris.append(t + base)
        ranges.append((base, base + len(v)))
        base += len(v)
    return np.concatenate(verts), np.concatenate(tris), ranges


def hills(amplitude=0.15, wavelength=3.0):
    """A smooth terrain height function ``(x, y) -> z`` for sculpted-ground tests."""
    k = 2 * np.pi / wavelength

    def height(x, y):
        return amplitude * (np.sin(k * x) * np.cos(0.7 * k * y) + 0.5 * np.sin(0.37 * k * x + 1.0))

    return height


def stepping_stones(frames=120, stone_height=0.2, floor=True):
    """A walk whose feet land on boxes (stepping stones) over an optional floor.

    Returns ``skeleton, motion (F,J,3), vertices, triangles, stones`` where
    ``stones`` lists ``(vertex_start, vertex_stop, centre)`` per stone.
    """
    skel, flat = walk(frames)
    plants = []
    for side in ("LeftFoot", "RightFoot"):
        x = flat[:, skel.index(side), 0]
        y = flat[0, skel.index(side), 1]
        still = np.flatnonzero(np.abs(np.diff(x)) < 1e-9)
        for px in np.unique(np.round(x[still], 6)):
            plants.append((px + 0.06, y))
    plants.sort()
    size = np.array([0.36, 0.24, stone_height])

    def ground(x, y):
        h = np.zeros_like(np.asarray(x, float))
        for cx, cy in plants:
            inside = (np.abs(x - cx) <= size[0] / 2 + 0.02) & (np.abs(y - cy) <= size[1] / 2 + 0.02)
            h = np.where(inside, stone_height, h)
        return h

    skel, motion = walk(frames, ground=ground)
    parts, stones = [], []
    x0, x1 = motion[..., 0].min() - 1.5, motion[..., 0].max() + 1.5
    if floor:
        parts.append(grid(x1 - x0, 3.0, int((x1 - x0) / 0.25), 12, origin=(x0, -1.5)))
    for cx, cy in plants:
        parts.append(box((cx, cy, stone_height / 2), size))
    verts, tris, ranges = merge(*parts)
    for (a, b), (cx, cy) in zip(ranges[1 if floor else 0:], plants):
        stones.append((a, b, np.array([cx, cy, stone_height])))
    return skel, motion, verts, tris, stones


def ceiling_walk(frames=120, ceiling=6.0):
    """A walk on a floor under a ceiling slab (the contacts paper's Fig. 9): the slab is
    1.6 m long across the middle of the path, 2 m wide and 0.1 m thick, its centre at height
    ``ceiling`` (at 6 m it is out of every descriptor's reach; moved to 1.6 m it is an obstacle
    inserted over the path: the head passes through it).

    Returns ``skeleton, motion (F,J,3), vertices, triangles, (slab_start, slab_stop), centre``.
    """
    return _walk_and_box(frames, (1.6, 2.0, 0.1), ceiling)


def _walk_and_box(frames, size, height):
    """``walk(frames)`` on a floor 3 m wide and a box ``size`` centred over the middle of the path at
    ``height``: skeleton, motion, vertices, triangles, the box's vertex range, its centre."""
    skel, motion = walk(frames)
    x0, x1 = motion[..., 0].min() - 1.5, motion[..., 0].max() + 1.5
    floor = grid(x1 - x0, 3.0, int((x1 - x0) / 0.25), 12, origin=(x0, -1.5))
    cx = 0.5 * (motion[:, 0, 0].min() + motion[:, 0, 0].max())
    verts, tris, ranges = merge(floor, box((cx, 0.0, height), size, subdivisions=4))
    return skel, motion, verts, tris, ranges[1], np.array([cx, 0.0, height])


def post_walk(frames=120, height=8.0, size=(0.3, 0.3, 2.5)):
    """A walk on a floor and a post ``size`` (x, y, z) whose centre is over the middle of the path
    at ``height`` (at 8 m it is out of every descriptor's reach; set down on the floor, centre at
    ``size[2] / 2``, it stands on the path: too tall to duck under, it is stepped round).

    Returns ``skeleton, motion (F,J,3), vertices, triangles, (post_start, post_stop), centre``.
    """
    return _walk_and_box(frames, size, height)


def chair_scene(frames=90, fps=30.0):
    """The contacts paper's chair and table (Fig. 12), generated: the humanoid sits on a chair,
    its hands resting on the armrests, its trunk swaying slowly forward and back (±6°), its
    feet on the floor; a table stands in front.

    Returns ``skeleton, motion (F,J,3), vertices, triangles, parts`` where ``parts`` maps
    "floor", "seat", "armrest.L", "armrest.R", "table" to (vertex_start, vertex_stop).
    Seat top at 0.45 m, armrest tops at 0.65 m (0.32 m either side), table top at 0.74 m.
    """
    skel, off = humanoid()
    names = skel.names
    J = len(names)
    t = np.arange(frames) / fps
    lean = np.radians(6.0) * np.sin(2.0 * np.pi * t / 3.0)                  # forward +
    pos = np.zeros((frames, J, 3))
    idx = names.index
    hips = np.array([0.0, 0.0, 0.55])
    pos[:, idx("Hips")] = hips
    R = _rot_y(lean)                                                          # (F,3,3), +x leans forward
    # A forward lean rotates +z towards +x: that is a rotation of -lean about +y in _rot_y's sense.
    R = _rot_y(-lean)
    up = (lambda j: np.einsum("fij,j->fi", R, off[idx(j)]))
    for j in ("Spine", "Spine1", "Spine2", "Neck", "Head", "HeadTop"):
        pos[:, idx(j)] = pos[:, skel.parents[idx(j)]] + up(j)
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        pos[:, idx(side + "Shoulder")] = pos[:, idx("Spine2")] + up(side + "Shoulder")
        pos[:, idx(side + "Arm")] = pos[:, idx(side + "Shoulder")] + up(side + "Arm")
        hand = np.array([0.02, sign * 0.32, 0.65 + 0.03])
        l1, l2 = np.linalg.norm(off[idx(side + "ForeArm")]), np.linalg.norm(off[idx(side + "Hand")])
        top = pos[:, idx(side + "Arm")]
        d = hand - top
        dist = np.linalg.norm(d, axis=1)
        axis = d / dist[:, None]
        along = (l1 ** 2 - l2 ** 2 + dist ** 2) / (2.0 * dist)
        height = np.sqrt(np.maximum(l1 ** 2 - along ** 2, 0.0))
        back = np.array([-1.0, sign * 0.3, 0.0])                            # elbows back and out
        side_dir = back - np.einsum("fd,d->f", axis, back)[:, None] * axis
        side_dir /= np.linalg.norm(side_dir, axis=1, keepdims=True)
        pos[:, idx(side + "ForeArm")] = top + along[:, None] * axis + height[:, None] * side_dir
        pos[:, idx(side + "Hand")] = hand
        pos[:, idx(side + "HandEnd")] = hand + np.array([0.16, 0.0, 0.0])
        # Thighs on the seat, shins down, feet flat on the floor.
        pos[:, idx(side + "UpLeg")] = hips + np.array([0.0, sign * 0.10, -0.05])
        pos[:, idx(side + "Leg")] = pos[:, idx(side + "UpLeg")] + np.array([0.44, 0.0, 0.0])
        pos[:, idx(side + "Foot")] = pos[:, idx(side + "Leg")] + np.array([0.0, 0.0, -0.42])
        pos[:, idx(side + "Toe")] = pos[:, idx(side + "Foot")] + off[idx(side + "Toe")]
        pos[:, idx(side + "ToeEnd")] = pos[:, idx(side + "Toe")] + off[idx(side + "ToeEnd")]
    floor = grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0))
    seat = box((0.05, 0.0, 0.40), (0.5, 0.5, 0.1), subdivisions=3)
    arm_l = box((0.02, 0.32, 0.62), (0.5, 0.08, 0.06), subdivisions=3)
    arm_r = box((0.02, -0.32, 0.62), (0.5, 0.08, 0.06), subdivisions=3)
    table = box((0.85, 0.0, 0.72), (0.6, 1.2, 0.04), subdivisions=3)
    verts, tris, ranges = merge(floor, seat, arm_l, arm_r, table)
    parts = dict(zip(("floor", "seat", "armrest.L", "armrest.R", "table"), ranges))
    return skel, pos, verts, tris, parts


# --- Rigs of the common naming conventions -------------------------------------
#: Roles of a generic humanoid: (role, parent role, rest offset from the parent,
#: metres, Z up, +Y the character's left). "{s}" is the side, mirrored in Y.
_BODY = [
    ("hips", None, (0.0, 0.0, 0.95)),
    ("spine", "hips", (0.0, 0.0, 0.10)),
    ("chest", "spine", (0.0, 0.0, 0.16)),
    ("chest2", "chest", (0.0, 0.0, 0.16)),
    ("neck", "chest2", (0.0, 0.0, 0.14)),
    ("head", "neck", (0.0, 0.0, 0.10)),
    ("head_end", "head", (0.0, 0.0, 0.20)),
]
_SIDE = [
    ("clavicle{s}", "chest2", (0.0, 0.04, 0.10)),
    ("upperarm{s}", "clavicle{s}", (0.0, 0.14, 0.0)),
    ("forearm{s}", "upperarm{s}", (0.0, 0.0, -0.28)),
    ("hand{s}", "forearm{s}", (0.0, 0.0, -0.25)),
    ("hand_end{s}", "hand{s}", (0.03, 0.0, -0.16)),
    ("thigh{s}", "hips", (0.0, 0.10, -0.05)),
    ("shin{s}", "thigh{s}", (0.0, 0.0, -0.43)),
    ("foot{s}", "shin{s}", (0.0, 0.0, -0.42)),
    ("toe{s}", "foot{s}", (0.13, 0.0, -0.06)),
    ("toe_end{s}", "toe{s}", (0.05, 0.0, 0.0)),
]
_FINGERS = ("Thumb", "Index", "Middle", "Ring", "Pinky")

#: Role -> bone name per convention; "{S}" is Left/Right, "{s}" l/r, "{d}" L/R.
CONVENTIONS = {
    "bvh": dict(hips="Hips", spine="Chest", chest="Chest2", chest2="Chest3", neck="Neck", head="Head",
                head_end="HeadEnd", clavicle="{S}Collar", upperarm="{S}Shoulder", forearm="{S}Elbow",
                hand="{S}Wrist", hand_end="{S}WristEnd", thigh="{S}Hip", shin="{S}Knee", foot="{S}Ankle",
                toe="{S}Toe", toe_end="{S}ToeEnd"),
    "mixamo": dict(hips="mixamorig:Hips", spine="mixamorig:Spine", chest="mixamorig:Spine1",
                   chest2="mixamorig:Spine2", neck="mixamorig:Neck", head="mixamorig:Head",
                   head_end="mixamorig:HeadTop_End", clavicle="mixamorig:{S}Shoulder",
                   upperarm="mixamorig:{S}Arm", forearm="mixamorig:{S}ForeArm", hand="mixamorig:{S}Hand",
                   hand_end=None, thigh="mixamorig:{S}UpLeg", shin="mixamorig:{S}Leg",
                   foot="mixamorig:{S}Foot", toe="mixamorig:{S}ToeBase", toe_end="mixamorig:{S}Toe_End"),
    "rigify": dict(hips="DEF-spine", spine="DEF-spine.001", chest="DEF-spine.002", chest2="DEF-spine.003",
                   neck="DEF-spine.004", head="DEF-spine.006", head_end="DEF-spine.006.tail",
                   clavicle="DEF-shoulder.{d}", upperarm="DEF-upper_arm.{d}", forearm="DEF-forearm.{d}",
                   hand="DEF-hand.{d}", hand_end="DEF-hand.{d}.tail", thigh="DEF-thigh.{d}",
                   shin="DEF-shin.{d}", foot="DEF-foot.{d}", toe="DEF-toe.{d}", toe_end="DEF-toe.{d}.tail"),
    "ue": dict(hips="pelvis", spine="spine_01", chest="spine_02", chest2="spine_03", neck="neck_01",
               head="head", head_end="head_end", clavicle="clavicle_{s}", upperarm="upperarm_{s}",
               forearm="lowerarm_{s}", hand="hand_{s}", hand_end="hand_end_{s}", thigh="thigh_{s}",
               shin="calf_{s}", foot="foot_{s}", toe="ball_{s}", toe_end="ball_end_{s}"),
    "arbitrary": None,
}


def convention_rig(convention="bvh"):
    """A humanoid named as one of ``CONVENTIONS`` (bvh, mixamo, rigify, ue, arbitrary).

    Returns ``(skeleton, offsets (J,3), roles)``: rest offsets from each joint's
    parent (Z up, metres; roots: the rest position) and each joint's role
    (``"forearm.L"``, ``"finger"``, ``"twist"``, ``"pelvis"``, ...). Each
    convention carries what real rigs of that kind have: Mixamo five fingers
    of three bones per hand; Rigify pelvis bones that start where the spine
    starts (zero-length joints with children) and split upper arms
    (``DEF-upper_arm.L.001``); Unreal a ``root`` on the floor and twist
    leaves; arbitrary names have no word a name matcher could use.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention '{convention}': use one of {', '.join(CONVENTIONS)}")
    table = CONVENTIONS[convention]
    rows = []                                                  # (name, parent name, offset, role)

    def name(role, side=None):
        if table is None:
            key = role + ("" if side is None else side)
            return f"j{zlib.crc32(key.encode()) % 100000:05d}_{len(key)}"
        pattern = table[role]
        if side is None:
            return pattern
        S = "Left" if side == ".L" else "Right"
        return pattern.format(S=S, s=S[0].lower(), d=side[1])

    for role, parent, off in _BODY:
        rows.append([name(role), None if parent is None else name(parent), off, role])
    for side, sign in ((".L", 1.0), (".R", -1.0)):
        for role, parent, off in _SIDE:
            r, p = role.format(s=""), parent.format(s="")
            psd = side if "{s}" in parent else None
            if r == "hand_end" and table is not None and table[r] is None:
                continue
            rows.append([name(r, side), name(p, psd), (off[0], sign * off[1], off[2]), r + side])
    names = [r[0] for r in rows]

    def parent_of(role_name):
        return next(r for r in rows if r[3] == role_name)[0]

    if convention == "mixamo":
        hand = {".L": parent_of("hand.L"), ".R": parent_of("hand.R")}
        for side, sign in ((".L", 1.0), (".R", -1.0)):
            S = "Left" if side == ".L" else "Right"
            for k, finger in enumerate(_FINGERS):
                parent = hand[side]
                spread = (k - 2) * 0.02
                first = (0.03, sign * 0.02, -0.04) if finger == "Thumb" else (spread, 0.0, -0.09)
                for seg in range(1, 5):
                    off = first if seg == 1 else (0.0, 0.0, -0.03 if seg < 4 else -0.02)
                    nm = f"mixamorig:{S}Hand{finger}{seg}"
                    rows.append([nm, parent, off, "finger"])
                    parent = nm
    if convention == "rigify":
        hips = parent_of("hips")
        for side in (".L", ".R"):
            pelvis = f"DEF-pelvis{side}"
            rows.insert(1, [pelvis, hips, (0.0, 0.0, 0.0), "pelvis"])
            thigh = next(r for r in rows if r[3] == "thigh" + side)
            thigh[1] = pelvis
            # Split upper arm: the twist segment DEF-upper_arm.L.001 halfway down.
            upper = next(r for r in rows if r[3] == "upperarm" + side)
            fore = next(r for r in rows if r[3] == "forearm" + side)
            half = tuple(0.5 * np.asarray(fore[2]))
            twist = [upper[0] + ".001", upper[0], half, "twist"]
            fore[1], fore[2] = twist[0], half
            rows.insert(rows.index(fore), twist)
    if convention == "ue":
        hips_row = next(r for r in rows if r[3] == "hips")
        rows.insert(0, ["root", None, (0.0, 0.0, 0.0), "root"])
        hips_row[1] = "root"
        for side in (".L", ".R"):
            for limb in ("upperarm", "forearm", "thigh", "shin"):
                row = next(r for r in rows if r[3] == limb + side)
                child = next(r for r in rows if r[1] == row[0])
                s = side[1].lower()
                rows.append([f"{limb}_twist_01_{s}", row[0], tuple(0.5 * np.asarray(child[2])), "twist"])
    names = [r[0] for r in rows]
    parents = [-1 if r[1] is None else names.index(r[1]) for r in rows]
    return Skeleton(names, parents), np.array([r[2] for r in rows], float), [r[3] for r in rows]


def _axis_rotation(axis, angle):
    """(...,3,3) rotations by ``angle`` (...) about the unit ``axis`` (3,)."""
    angle = np.asarray(angle, float)
    k = np.asarray(axis, float)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    s, c = np.sin(angle)[..., None, None], np.cos(angle)[..., None, None]
    return np.eye(3) + s * K + (1 - c) * (K @ K)


def _posed_locals(skeleton, roles, t, limbs, rng, hz=1.0):
    """(F,J,3,3) each joint's rotation relative to its parent at times ``t`` (``posed_motion``),
    every wave's frequency times ``hz``."""
    F, J = len(t), len(skeleton)
    local = np.broadcast_to(np.eye(3), (F, J, 3, 3)).copy()
    lateral, forward, up = np.array([0, 1.0, 0]), np.array([1.0, 0, 0]), np.array([0, 0, 1.0])

    def wave(amp, freq=1.0):
        return amp * np.sin(2 * np.pi * freq * hz * t + rng.uniform(0, 2 * np.pi))

    for j, role in enumerate(roles):
        base = role.split(".")[0]
        if base in ("forearm", "shin"):
            sign = 1.0 if base == "shin" else -1.0        # knees bend back (+), elbows forward (-)
            if limbs == "bent":
                lo, hi = (np.radians(20), np.radians(70)) if base == "forearm" else (np.radians(5), np.radians(60))
                bend = lo + (hi - lo) * (0.5 + 0.5 * np.sin(2 * np.pi * hz * t + rng.uniform(0, 6.3)))
            elif limbs == "straight":
                bend = np.radians(0.5) + wave(np.radians(0.4))
            elif limbs == "nearly_straight":
                bend = np.radians(4.0) + wave(np.radians(3.0))
            elif limbs == "hyperextended":
                bend = -np.radians(4.5) + wave(np.radians(1.5))
            else:
                bend = np.radians(15) + wave(np.radians(5))
            local[:, j] = _axis_rotation(lateral, sign * bend)
            if limbs == "twisting":
                local[:, j] = local[:, j] @ _axis_rotation(up, wave(np.radians(80), 0.7))
        elif base in ("upperarm", "thigh"):
            local[:, j] = _axis_rotation(lateral, wave(np.radians(30))) @ _axis_rotation(forward, wave(np.radians(8)))
        elif base in ("spine", "chest", "chest2", "neck", "head"):
            local[:, j] = (_axis_rotation(lateral, wave(np.radians(6))) @ _axis_rotation(forward, wave(np.radians(4)))
                           @ _axis_rotation(up, wave(np.radians(8))))
        elif base in ("hand", "foot"):
            local[:, j] = _axis_rotation(lateral, wave(np.radians(15)))
        elif base == "finger":
            local[:, j] = _axis_rotation(forward, np.radians(20) + wave(np.radians(15)))
        elif base == "hips":
            local[:, j] = _axis_rotation(up, wave(np.radians(10)))
    return local


def posed_motion(skeleton, offsets, roles, frames=90, fps=30.0, limbs="bent", speed=1.0, seed=0):
    """Joint positions (F,J,3) of a convention rig by forward kinematics.

    limbs : "bent" (elbows 20-70°, knees 5-60°), "straight" (elbows and knees
        within 1° of straight), "hyperextended" (3-6° past straight) or
        "twisting" (forearms and shins turning ±80° about themselves, hands
        and feet carried off-axis).
    speed : forward speed in m/s (0: in place, swaying).
    Rotations are sums of sinusoids seeded by ``seed``; every bone keeps its
    length exactly.
    """
    rng = np.random.default_rng(seed)
    F, J = frames, len(skeleton)
    t = np.arange(F) / fps
    local = _posed_locals(skeleton, roles, t, limbs, rng)
    world = np.empty_like(local)
    pos = np.zeros((F, J, 3))
    for j in skeleton.order.tolist():
        p = skeleton.parents[j]
        if p < 0:
            world[:, j] = local[:, j]
            pos[:, j] = offsets[j]
            if roles[j] == "hips":
                pos[:, j] = offsets[j] + np.stack([speed * t, 0.02 * np.sin(2 * np.pi * t),
                                                   0.03 * np.cos(4 * np.pi * t)], 1)
            elif roles[j] == "root":
                pos[:, j, 0] = speed * t
        else:
            world[:, j] = world[:, p] @ local[:, j]
            pos[:, j] = pos[:, p] + np.einsum("fij,j->fi", world[:, p], offsets[j])
            if roles[j] == "hips":        # under a floor-level root
                pos[:, j] += np.stack([np.zeros(F), 0.02 * np.sin(2 * np.pi * t), 0.03 * np.cos(4 * np.pi * t)], 1)
    return pos


def _swing_to(rest, now):
    """(F,3,3) the smallest rotations taking unit direction ``rest`` (3,) to unit directions ``now`` (F,3)."""
    axis = np.cross(rest, now)
    s, c = np.linalg.norm(axis, axis=-1), now @ rest
    k = axis / np.maximum(s, 1e-12)[:, None]
    K = np.zeros((len(now), 3, 3))
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
    K -= K.transpose(0, 2, 1)
    return np.eye(3) + s[:, None, None] * K + (1 - c)[:, None, None] * (K @ K)


#: Gaits for ``locomotion``: a walk (each foot down 60 % of a cycle, one always down), a run
#: (down 35 %: both feet off the ground twice a cycle) and stepping in place (a walk's cycle, each
#: foot lifted and set down where it stood: ``period`` seconds a cycle).
GAITS = {"walk": dict(speed=1.1, stride=0.9, stance=0.6, drop=0.08, bob=0.02, lift=0.10),
         "run": dict(speed=2.8, stride=2.0, stance=0.35, drop=0.12, bob=0.03, lift=0.18),
         "in place": dict(speed=0.0, stride=0.0, stance=0.6, drop=0.04, bob=0.01, lift=0.06, period=1.2)}


def locomotion(skeleton, offsets, roles, frames=150, fps=30.0, gait="walk", seed=0):
    """Joint positions (F,J,3) of a ``convention_rig`` walking or running along +X (``GAITS``) on
    the floor its rest pose stands on, each foot planted while it is down.

    The legs are placed by two-bone IK (thigh to ankle, the knee forward) on feet that land half a
    stance's travel ahead of the hips and roll over in swing; the feet lie flat while down and
    pitch in swing; the rest of the body moves as ``posed_motion`` (bent arms, a swaying trunk),
    in time with the steps, as a person's arms swing with their legs.
    Every bone keeps its length; twist leaves turn with their bone. Raises ValueError when a leg
    cannot reach its foot (a stride too long for the rig).
    """
    g = GAITS[gait]
    rng = np.random.default_rng(seed)
    F, J = frames, len(skeleton)
    t = np.arange(F) / fps
    period = g.get("period") or g["stride"] / g["speed"]
    local = _posed_locals(skeleton, roles, t, "bent", rng, hz=1.0 / period)     # the body keeps the step's time
    rest = np.zeros((J, 3))
    for j in skeleton.order.tolist():
        p = skeleton.parents[j]
        rest[j] = offsets[j] + (rest[p] if p >= 0 else 0.0)
    leg = {r: j for j, r in enumerate(roles) if r.split(".")[0] in ("thigh", "shin", "foot", "toe", "toe_end")}
    step = 2 * np.pi * t / period
    lift_hips = np.stack([g["speed"] * t, 0.02 * np.sin(step), -g["drop"] + g["bob"] * np.cos(2 * step)], 1)
    targets, pitch = {}, {}
    for side, shift in ((".L", 0.0), (".R", 0.5)):
        ankle_rest = rest[leg["foot" + side]]
        phase = (t / period + shift) % 1.0
        cycle = np.floor(t / period + shift)
        land = ankle_rest[0] + g["stride"] * (cycle - shift) + 0.5 * g["stance"] * g["stride"]
        swing = np.clip((phase - g["stance"]) / (1.0 - g["stance"]), 0.0, 1.0)
        ease = 0.5 - 0.5 * np.cos(np.pi * swing)
        up = np.where(phase >= g["stance"], g["lift"] * np.sin(np.pi * swing), 0.0)
        targets[side] = np.stack([land + g["stride"] * ease, np.full(F, ankle_rest[1]), ankle_rest[2] + up], 1)
        pitch[side] = np.where(phase >= g["stance"], -np.radians(25) * np.sin(np.pi * swing), 0.0)
    lateral = np.array([0.0, 1.0, 0.0])
    world = np.empty((F, J, 3, 3))
    pos = np.zeros((F, J, 3))
    for j in skeleton.order.tolist():
        p, role = skeleton.parents[j], roles[j]
        base, side = role.split(".")[0], role[role.index("."):] if "." in role else ""
        world[:, j] = local[:, j] if p < 0 else world[:, p] @ local[:, j]
        pos[:, j] = offsets[j] if p < 0 else pos[:, p] + np.einsum("fij,j->fi", world[:, p], offsets[j])
        if role == "hips":
            pos[:, j] += lift_hips if p < 0 else lift_hips * np.array([0.0, 1.0, 1.0])
        elif role == "root":
            pos[:, j, 0] += g["speed"] * t
        if base == "thigh":
            shin, foot = leg["shin" + side], leg["foot" + side]
            l1, l2 = np.linalg.norm(offsets[shin]), np.linalg.norm(offsets[foot])
            d = targets[side] - pos[:, j]
            dist = np.linalg.norm(d, axis=1)
            if dist.max() > (l1 + l2) * 0.999:
                raise ValueError(f"the legs of this rig cannot reach a {gait}'s feet (stride {g['stride']} m)")
            u = d / dist[:, None]
            a = np.arccos(np.clip((l1 ** 2 + dist ** 2 - l2 ** 2) / (2 * l1 * dist), -1.0, 1.0))
            bend = np.cross(lateral, u)
            bend /= np.linalg.norm(bend, axis=1, keepdims=True)
            knee = pos[:, j] + l1 * (np.cos(a)[:, None] * u - np.sin(a)[:, None] * bend)
            world[:, j] = _swing_to(offsets[shin] / l1, (knee - pos[:, j]) / l1)
            world[:, shin] = _swing_to(offsets[foot] / l2, (targets[side] - knee) / l2)
            local[:, shin] = np.swapaxes(world[:, j], 1, 2) @ world[:, shin]
            local[:, foot] = np.swapaxes(world[:, shin], 1, 2) @ _axis_rotation(lateral, pitch[side])
            for k in (leg.get("toe" + side), leg.get("toe_end" + side)):
                if k is not None:
                    local[:, k] = np.eye(3)
    return pos


def reaching_clip(skeleton, pose, target, frames=30, hand="RightHand", lift=0.08):
    """Joint positions (frames,J,3): ``pose`` (J,3) held while the arm ending at ``hand`` reaches
    ``target`` along an arc raised by ``lift``, minimum-jerk in time (two-bone IK, the elbow bent
    down and out as in ``pose``). A reaching example for the reaching database."""
    h = skeleton.index(hand)
    elbow = int(skeleton.parents[h])
    shoulder = int(skeleton.parents[elbow])
    l1 = float(np.linalg.norm(pose[elbow] - pose[shoulder]))
    l2 = float(np.linalg.norm(pose[h] - pose[elbow]))
    t = np.linspace(0.0, 1.0, frames)
    s = t ** 3 * (10 - 15 * t + 6 * t * t)
    start = pose[h]
    path = start + s[:, None] * (np.asarray(target, float) - start)
    path[:, 2] += lift * np.sin(np.pi * s)
    pole = np.broadcast_to(pose[elbow] - 0.5 * (pose[shoulder] + pose[h]) + [0.0, 0.0, -1e-3], (frames, 3))
    top = np.broadcast_to(pose[shoulder], (frames, 3))
    mid, end = two_bone(top, top + np.array(pole), path, l1, l2)
    out = np.repeat(pose[None], frames, axis=0)
    below = skeleton.descendants(h)
    shift = end - pose[h]
    out[:, elbow], out[:, h] = mid, end
    for k in below:
        out[:, k] = pose[k] + shift
    return out


def seat_object(kind="chair", seat_height=0.45, at=(0.05, 0.0), size=0.5):
    """A labelled seat for transfer tests: ``vertices, triangles, labels (T,), names``.

    kind : "chair" (seat, back, legs), "stool" (seat, legs: no back), "armchair" (seat, back,
    legs, arms), "bench" (seat, legs; twice as wide). The seat's top is at ``seat_height``,
    its centre at ``at``; the back (when there is one) behind it, at -x.
    """
    x, y = at
    top, thick = seat_height, 0.06
    width = 2.0 * size if kind == "bench" else size
    parts = [("seat", box((x, y, top - thick / 2), (size, width, thick), subdivisions=2))]
    leg_h = top - thick
    for dx in (-0.42 * size, 0.42 * size):
        for dy in (-0.42 * width, 0.42 * width):
            parts.append(("legs", box((x + dx, y + dy, leg_h / 2), (0.04, 0.04, leg_h), subdivisions=1)))
    if kind in ("chair", "armchair"):
        parts.append(("back", box((x - size / 2 - 0.025, y, top + 0.3), (0.05, width, 0.6), subdivisions=2)))
    if kind == "armchair":
        for sy in (-1.0, 1.0):
            parts.append(("arms", box((x, y + sy * (width / 2 + 0.04), top + 0.2), (size, 0.08, 0.06),
                                      subdivisions=2)))
    names = []
    for n, _ in parts:
        if n not in names:
            names.append(n)
    verts, tris, ranges = merge(*[p for _, p in parts])
    labels = np.concatenate([np.full(len(p[1]), names.index(n)) for n, p in parts])
    return verts, tris, labels, names


def pedestal_object(kind="box", centre=(0.0, 0.0), height=0.3, size=0.6, segments=24):
    """A labelled pedestal for transfer tests: ``vertices, triangles, labels (T,), names`` with
    segments "top" (the upper face) and "sides" (the rest). kind: "box" (``size`` wide) or
    "round" (a cylinder of diameter ``size``)."""
    cx, cy = centre
    if kind == "box":
        v, t = box((cx, cy, height / 2), (size, size, height), subdivisions=2)
        top = v[t].mean(axis=1)[:, 2] > height - 1e-9
        return v, t, np.where(top, 0, 1), ["top", "sides"]
    a = 2.0 * np.pi * np.arange(segments) / segments
    ring = np.c_[0.5 * size * np.cos(a) + cx, 0.5 * size * np.sin(a) + cy]
    rings = 3
    verts = np.concatenate([np.c_[ring, np.full(segments, z)] for z in np.linspace(0.0, height, rings + 1)]
                           + [[[cx, cy, 0.0], [cx, cy, height]]])
    tris, labels = [], []
    for r in range(rings):
        for k in range(segments):
            a0, a1 = r * segments + k, r * segments + (k + 1) % segments
            tris += [[a0, a1, a1 + segments], [a0, a1 + segments, a0 + segments]]
            labels += [1, 1]
    bottom, top = len(verts) - 2, len(verts) - 1
    for k in range(segments):
        k1 = (k + 1) % segments
        tris += [[bottom, k1, k], [top, rings * segments + k, rings * segments + k1]]
        labels += [1, 0]
    return verts, np.array(tris, np.int64), np.array(labels), ["top", "sides"]


def kneel_scene(frames=60, fps=30.0):
    """A kneeling humanoid (an upright kneel: knees and shins on the floor, the trunk swaying
    ±5° forward and back) on a floor grid: ``skeleton, motion (F,J,3), vertices, triangles``."""
    skel, off = humanoid()
    names = skel.names
    idx = names.index
    J = len(names)
    t = np.arange(frames) / fps
    lean = np.radians(5.0) * np.sin(2.0 * np.pi * t / 2.0)
    R = _rot_y(-lean)
    pos = np.zeros((frames, J, 3))
    knee_z, thigh = 0.05, float(np.linalg.norm(off[idx("LeftLeg")]))
    hips = np.array([0.0, 0.0, knee_z + thigh + 0.05])
    pos[:, idx("Hips")] = hips
    up = (lambda j: np.einsum("fij,j->fi", R, off[idx(j)]))
    for j in ("Spine", "Spine1", "Spine2", "Neck", "Head", "HeadTop"):
        pos[:, idx(j)] = pos[:, skel.parents[idx(j)]] + up(j)
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        for j in ("Shoulder", "Arm", "ForeArm", "Hand", "HandEnd"):
            pos[:, idx(side + j)] = pos[:, skel.parents[idx(side + j)]] + up(side + j)
        pos[:, idx(side + "UpLeg")] = hips + np.array([0.0, sign * 0.10, -0.05])
        pos[:, idx(side + "Leg")] = np.array([0.0, sign * 0.10, knee_z])
        shin = float(np.linalg.norm(off[idx(side + "Foot")]))
        pos[:, idx(side + "Foot")] = np.array([-shin, sign * 0.10, 0.06])
        pos[:, idx(side + "Toe")] = pos[:, idx(side + "Foot")] + np.array([-0.10, 0.0, -0.03])
        pos[:, idx(side + "ToeEnd")] = pos[:, idx(side + "Toe")] + np.array([-0.05, 0.0, 0.0])
    verts, tris = grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0))
    return skel, pos, verts, tris


def _upper_body(pos, skel, off, R):
    """Trunk, neck and head above the hips, turned by ``R`` (F,3,3), in place."""
    idx = skel.names.index
    for j in ("Spine", "Spine1", "Spine2", "Neck", "Head", "HeadTop", "LeftShoulder", "RightShoulder",
              "LeftArm", "RightArm"):
        pos[:, idx(j)] = pos[:, skel.parents[idx(j)]] + np.einsum("fij,j->fi", R, off[idx(j)])


def _arm_to(pos, skel, off, side, hand, elbow_dir, flat=True):
    """The arm of ``side`` reaching ``hand`` (F,3) (two-bone IK, the elbow towards
    ``elbow_dir`` (3,)), in place; the hand's end 0.16 m further on along +x (``flat``: a
    hand lying on something) or along the forearm (hanging)."""
    idx = skel.names.index
    top = pos[:, idx(side + "Arm")]
    l1, l2 = np.linalg.norm(off[idx(side + "ForeArm")]), np.linalg.norm(off[idx(side + "Hand")])
    d = hand - top
    dist = np.clip(np.linalg.norm(d, axis=1), 1e-6, (l1 + l2) * 0.9999)
    axis = d / np.linalg.norm(d, axis=1, keepdims=True)
    along = (l1 ** 2 - l2 ** 2 + dist ** 2) / (2.0 * dist)
    height = np.sqrt(np.maximum(l1 ** 2 - along ** 2, 0.0))
    side_dir = elbow_dir - np.einsum("fd,d->f", axis, elbow_dir)[:, None] * axis
    side_dir /= np.linalg.norm(side_dir, axis=1, keepdims=True)
    pos[:, idx(side + "ForeArm")] = top + along[:, None] * axis + height[:, None] * side_dir
    pos[:, idx(side + "Hand")] = pos[:, idx(side + "ForeArm")] + l2 * _unit_rows(hand - pos[:, idx(side + "ForeArm")])
    along_arm = _unit_rows(pos[:, idx(side + "Hand")] - pos[:, idx(side + "ForeArm")])
    pos[:, idx(side + "HandEnd")] = pos[:, idx(side + "Hand")] + 0.16 * (np.array([1.0, 0.0, 0.0]) if flat
                                                                          else along_arm)


def _standing_legs(pos, skel, off, ground, feet_x=0.0):
    """Both feet flat at height ``ground`` under the hips (ankles at ``feet_x``), knees forward
    (two-bone IK, exact lengths), in place."""
    idx = skel.names.index
    F = len(pos)
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        hip = pos[:, idx("Hips")] + off[idx(side + "UpLeg")]
        pos[:, idx(side + "UpLeg")] = hip
        ankle = np.tile([feet_x, sign * 0.11, ground + ANKLE_HEIGHT], (F, 1))
        l1, l2 = np.linalg.norm(off[idx(side + "Leg")]), np.linalg.norm(off[idx(side + "Foot")])
        pos[:, idx(side + "Leg")] = _two_bone(hip, ankle, l1, l2, 1.0)
        pos[:, idx(side + "Foot")] = ankle
        pos[:, idx(side + "Toe")] = ankle + off[idx(side + "Toe")]
        pos[:, idx(side + "ToeEnd")] = pos[:, idx(side + "Toe")] + off[idx(side + "ToeEnd")]


def stand_scene(frames=90, fps=30.0, top=0.3, centre=(0.0, 0.0)):
    """The humanoid standing on a box (the transfer chapter's "standing on a box"): both feet
    flat on the top (toes 2 cm over it), knees slightly bent, the weight shifting from foot to
    foot (hips ±4 cm sideways, the trunk leaning ±3° with them), the arms hanging.

    Returns ``skeleton, motion (F,J,3), (box vertices, triangles, labels, names)`` with the
    box 0.6 m wide and ``top`` high, centred under the feet at ``centre``.
    """
    skel, off = humanoid()
    idx = skel.names.index
    J = len(skel)
    t = np.arange(frames) / fps
    shift = 0.04 * np.sin(2.0 * np.pi * t / 3.0)
    cx, cy = centre
    pos = np.zeros((frames, J, 3))
    pos[:, idx("Hips")] = np.stack([np.full(frames, cx), cy + shift, np.full(frames, top + HIP_HEIGHT)], axis=1)
    lean = np.radians(3.0) * np.sin(2.0 * np.pi * t / 3.0)
    c, s = np.cos(lean), np.sin(lean)
    R = np.zeros((frames, 3, 3))                                  # a lean about +x, with the shift
    R[:, 0, 0], R[:, 1, 1], R[:, 1, 2], R[:, 2, 1], R[:, 2, 2] = 1.0, c, -s, s, c
    _upper_body(pos, skel, off, R)
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        shoulder = pos[:, idx(side + "Arm")]
        hand = shoulder + np.array([0.06, sign * 0.05, -0.52])
        _arm_to(pos, skel, off, side, hand, np.array([-1.0, sign * 0.3, 0.0]), flat=False)
    pos[..., :2] -= pos[:, idx("Hips"), :2].mean(axis=0) - np.array([cx, cy])
    _standing_legs(pos, skel, off, top, cx)
    box_v, box_t, labels, names = pedestal_object("box", (cx, cy), top, 0.6)
    return skel, pos, (box_v, box_t, labels, names)


def table_object(kind="rect", height=0.74, at=(0.55, 0.0), size=0.8):
    """A labelled table for transfer tests: ``vertices, triangles, labels (T,), names`` with
    segments "top" (the board) and "legs". kind: "rect" (``size`` deep along x, 1.2 ``size``
    wide, four legs) or "round" (a disc of diameter ``size`` on one central column)."""
    x, y = at
    thick = 0.04
    if kind == "rect":
        parts = [("top", box((x, y, height - thick / 2), (size, 1.2 * size, thick), subdivisions=3))]
        for dx in (-0.42 * size, 0.42 * size):
            for dy in (-0.5 * size, 0.5 * size):
                parts.append(("legs", box((x + dx, y + dy, (height - thick) / 2), (0.05, 0.05, height - thick),
                                          subdivisions=1)))
        verts, tris, ranges = merge(*[p for _, p in parts])
        labels = np.concatenate([np.full(len(p[1]), 0 if n == "top" else 1) for n, p in parts])
        return verts, tris, labels, ["top", "legs"]
    disc_v, disc_t, disc_l, _ = pedestal_object("round", (x, y), thick, size, segments=32)
    disc_v = disc_v + np.array([0.0, 0.0, height - thick])
    col_v, col_t, _, _ = pedestal_object("round", (x, y), height - thick, 0.08, segments=12)
    verts, tris, _ = merge((disc_v, disc_t), (col_v, col_t))
    labels = np.concatenate([np.zeros(len(disc_t), np.int64), np.ones(len(col_t), np.int64)])
    return verts, tris, labels, ["top", "legs"]


def table_scene(frames=90, fps=30.0, height=1.0):
    """The humanoid standing on the floor at a bar table, leaning on it a little (8° ± 3°
    forward and back), its right hand resting on the table's near edge (the wrist 4 cm over
    the top and 4 cm in from the edge, the hand flat along +x), the left arm hanging (the
    transfer chapter's "hand on a table").

    Returns ``skeleton, motion (F,J,3), (table vertices, triangles, labels, names)``: a
    rectangular table ("top", "legs") whose near edge is 0.25 m in front of the hips.
    """
    skel, off = humanoid()
    idx = skel.names.index
    J = len(skel)
    t = np.arange(frames) / fps
    lean = np.radians(8.0 + 3.0 * np.sin(2.0 * np.pi * t / 2.5))
    pos = np.zeros((frames, J, 3))
    pos[:, idx("Hips")] = [0.0, 0.0, HIP_HEIGHT]
    _upper_body(pos, skel, off, _rot_y(lean))
    edge, size = 0.25, 0.8
    hand = np.tile([edge + 0.04, -0.2, height + 0.04], (frames, 1))
    _arm_to(pos, skel, off, "Right", hand, np.array([-0.3, -1.0, 0.0]))
    shoulder = pos[:, idx("LeftArm")]
    _arm_to(pos, skel, off, "Left", shoulder + np.array([0.06, 0.05, -0.52]), np.array([-1.0, 0.3, 0.0]), flat=False)
    _standing_legs(pos, skel, off, 0.0)
    table = table_object("rect", height, (edge + size / 2, 0.0), size)
    return skel, pos, table


#: ``pair_scene``'s distance apart for each hold.
PAIR_APART = {"hands": 0.6, "shoulder": 0.5, "wrestle": 0.45, "hug": 0.3}


def pair_scene(frames=90, fps=30.0, apart=0.6, hold="hands", crouch=0.0):
    """Two humanoids standing face to face ``apart`` metres apart on the floor, both trunks
    swaying ±3° forward and back, the free arms hanging. ``hold``:

    - "hands": A (at -x, facing +x) holds B's left hand in its right, the clasped hands
      swinging 6 cm up and down (A's ``RightHand`` and B's ``LeftHand`` 4 cm apart);
    - "shoulder": A's right hand rests on B's left shoulder (``RightHand`` 5 cm over B's
      ``LeftArm``, the hand flat), B's arms hanging (use ``apart`` 0.5);
    - "wrestle": a collar tie (use ``apart`` 0.45): both lean 12° into each other, swaying
      ±4° out of step, and each has both hands on the other's shoulders (``LeftHand`` 5 cm
      over the other's ``RightArm``, ``RightHand`` over its ``LeftArm``);
    - "hug": face to face (use ``apart`` 0.3), each with both arms around the other's back,
      A's hands 10 cm behind B's ``Spine1`` and 12 cm to each side, B's around A's ``Spine2``,
      both trunks leaning 6° in.

    ``crouch``: B's hips that much lower, its knees bent and its feet flat on the floor.

    Returns ``skeleton, (motion_a (F,J,3), motion_b (F,J,3))`` (one skeleton, two clips).
    """
    skel, off = humanoid()
    idx = skel.names.index
    t = np.arange(frames) / fps

    def one(x0, turn, targets, phase, lean=0.0, sway=3.0, low=0.0):
        tilt = np.radians(lean) + np.radians(sway) * np.sin(2.0 * np.pi * t / 2.5 + phase)
        pos = np.zeros((frames, len(skel), 3))
        pos[:, idx("Hips")] = [0.0, 0.0, HIP_HEIGHT - low]
        _upper_body(pos, skel, off, _rot_y(tilt))
        c, s = np.cos(turn), np.sin(turn)
        Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        origin = np.array([x0, 0.0, 0.0])
        for arm in ("Left", "Right"):
            sign = 1.0 if arm == "Left" else -1.0
            if arm in targets:
                local = (targets[arm] - origin) @ Rz                  # the target in this character's frame
                _arm_to(pos, skel, off, arm, local, np.array([-0.3, sign, -0.5]) if hold != "hug"
                        else np.array([0.0, sign, -0.3]))
            else:
                shoulder = pos[:, idx(arm + "Arm")]
                _arm_to(pos, skel, off, arm, shoulder + np.array([0.06, sign * 0.05, -0.52]),
                        np.array([-1.0, sign * 0.3, 0.0]), flat=False)
        _standing_legs(pos, skel, off, 0.0)
        return pos @ Rz.T + origin

    if hold == "hands":
        grip = np.stack([np.zeros(frames), np.full(frames, -0.2), 1.1 + 0.03 * np.sin(2.0 * np.pi * t / 2.0)],
                        axis=1)
        a = one(-apart / 2, 0.0, {"Right": grip - [0.02, 0.0, 0.0]}, 0.0)
        b = one(apart / 2, np.pi, {"Left": grip + [0.02, 0.0, 0.0]}, 1.3)
    elif hold == "shoulder":
        b = one(apart / 2, np.pi, {}, 1.3, low=crouch)
        a = one(-apart / 2, 0.0, {"Right": b[:, idx("LeftArm")] + [0.0, 0.0, 0.05]}, 0.0)
    elif hold == "wrestle":
        up = np.array([0.0, 0.0, 0.05])
        b = one(apart / 2, np.pi, {}, 1.6, lean=12.0, sway=4.0)        # its shoulders first
        a = one(-apart / 2, 0.0, {"Right": b[:, idx("LeftArm")] + up, "Left": b[:, idx("RightArm")] + up}, 0.0,
                lean=12.0, sway=4.0)
        b = one(apart / 2, np.pi, {"Right": a[:, idx("LeftArm")] + up, "Left": a[:, idx("RightArm")] + up}, 1.6,
                lean=12.0, sway=4.0)
    elif hold == "hug":
        b = one(apart / 2, np.pi, {}, 1.6, lean=6.0, sway=2.0, low=crouch)
        back = np.array([0.10, 0.0, 0.0])
        side = np.array([0.0, 0.12, 0.0])
        a = one(-apart / 2, 0.0, {"Right": b[:, idx("Spine1")] + back - side, "Left": b[:, idx("Spine1")] + back + side},
                0.0, lean=6.0, sway=2.0)
        b = one(apart / 2, np.pi, {"Right": a[:, idx("Spine2")] - back + side, "Left": a[:, idx("Spine2")] - back - side},
                1.6, lean=6.0, sway=2.0, low=crouch)
    else:
        raise ValueError(f"hold must be 'hands', 'shoulder', 'wrestle' or 'hug', got {hold!r}")
    return skel, (a, b)


#: The generated humanoid's joint for each role of ``convention_rig`` (".L"/".R" sides).
HUMANOID_ROLES = dict(hips="Hips", spine="Spine", chest="Spine1", chest2="Spine2", neck="Neck", head="Head",
                      head_end="HeadTop", clavicle="{S}Shoulder", upperarm="{S}Arm", forearm="{S}ForeArm",
                      hand="{S}Hand", hand_end="{S}HandEnd", thigh="{S}UpLeg", shin="{S}Leg", foot="{S}Foot",
                      toe="{S}Toe", toe_end="{S}ToeEnd")
#: The joint a limb bone runs to, by the role of the joint it starts from (a twist lies halfway).
_NEXT = {"upperarm": "forearm", "forearm": "hand", "thigh": "shin", "shin": "foot"}


def humanoid_joint(role):
    """The generated humanoid's joint name for a ``convention_rig`` role ("forearm.L"), or None."""
    base, _, side = role.partition(".")
    name = HUMANOID_ROLES.get(base)
    if name is None:
        return None
    return name.format(S="Left" if side == "L" else "Right")


def on_convention(convention, motion):
    """A motion of the generated humanoid (``humanoid()``, (F,27,3)) carried onto a rig of
    ``convention`` (``convention_rig``): each joint with a humanoid counterpart takes its
    positions; Rigify's pelvis joints sit on the hips, Unreal's root on the floor under them,
    twist joints halfway along their bone, Mixamo's fingers turn rigidly with the hand (the
    trunk's turn, then the hand's swing from its rest direction).

    Returns ``(skeleton, motion (F,J,3), name)``: ``name(role)`` gives the rig's joint of a role
    ("hips", "hand.L", ...)."""
    sk, off, roles = convention_rig(convention)
    hsk, hoff = humanoid()
    F = len(motion)
    out = np.zeros((F, len(sk), 3))
    rest = np.zeros((len(sk), 3))
    for j in sk.order.tolist():
        p = int(sk.parents[j])
        rest[j] = off[j] if p < 0 else rest[p] + off[j]
    by_role = {r: j for j, r in enumerate(roles) if r not in ("finger", "twist", "pelvis", "root")}
    for j, r in enumerate(roles):
        h = humanoid_joint(r)
        if h is not None:
            out[:, j] = motion[:, hsk.index(h)]
    hips = motion[:, hsk.index("Hips")]
    trunk_h = [hsk.index(n) for n in ("Hips", "Spine", "Spine1", "Spine2", "Neck")]
    trunk_c = [by_role[r] for r in ("hips", "spine", "chest", "chest2", "neck")]
    from .skeleton.rotations import kabsch, swing
    src = rest[trunk_c] - rest[trunk_c].mean(axis=0)
    now = motion[:, trunk_h] - motion[:, trunk_h].mean(axis=1, keepdims=True)
    turn = kabsch(np.broadcast_to(src, now.shape), now)                              # (F,3,3)
    for j in sk.order.tolist():
        r, p = roles[j], int(sk.parents[j])
        if r == "root":
            out[:, j] = hips * [1.0, 1.0, 0.0]
        elif r == "pelvis":
            out[:, j] = out[:, p]
        elif r == "twist":
            nxt = by_role[_NEXT[roles[p].split(".")[0]] + "." + roles[p].split(".")[1]]
            out[:, j] = 0.5 * (out[:, p] + out[:, nxt])
        elif r == "finger":
            hand = p
            while roles[hand] == "finger":
                hand = int(sk.parents[hand])
            fore = int(sk.parents[hand])
            axis_rest = rest[hand] - rest[fore]
            axis_now = out[:, hand] - out[:, fore]
            turned = np.einsum("fij,j->fi", turn, axis_rest)
            R = swing(turned, axis_now) @ turn
            out[:, j] = out[:, p] + np.einsum("fij,j->fi", R, rest[j] - rest[p])
    def name(role):
        return sk.names[roles.index(role)]
    return sk, out, name


def rest_joints(skeleton, offsets, root=(0.0, 0.0, 0.0)):
    """(J,3) the rest positions of a skeleton given as offsets from each joint's parent
    (``humanoid``'s, ``convention_rig``'s), the roots at ``root`` plus their offset."""
    rest = np.zeros((len(skeleton), 3))
    for j in skeleton.order.tolist():
        p = int(skeleton.parents[j])
        rest[j] = offsets[j] + (rest[p] if p >= 0 else np.asarray(root, float))
    return rest


def _grid_triangles(rows, columns, closed=False):
    """(T,3) the triangles of a grid of ``rows`` x ``columns`` vertices (row-major), its columns
    joined round (a tube) when ``closed``."""
    tris = []
    for r in range(rows - 1):
        for k in range(columns if closed else columns - 1):
            i0, i1 = r * columns + k, r * columns + (k + 1) % columns
            tris += [[i0, i1, i1 + columns], [i0, i1 + columns, i0 + columns]]
    return np.array(tris, np.int64)


def cape(skeleton, rest, name, rings=12, across=14):
    """A cape at the rest pose of a humanoid facing +x (left +y): from the shoulders down the
    back to just below the knees, 10-16 cm behind the spine, bulging out at its middle and
    flaring 40 % wider at the hem. ``rest`` (J,3) the rest joints of ``skeleton``, ``name(role)``
    its joint of a ``convention_rig`` role (``on_convention``'s). Returns ``vertices (V,3), triangles (T,3)`` (an open
    sheet of ``rings`` x ``across`` vertices)."""
    at = lambda role: rest[skeleton.index(name(role))]      # noqa: E731
    left, right, neck = at("upperarm.L"), at("upperarm.R"), at("neck")
    knee = 0.5 * (at("shin.L") + at("shin.R"))
    top, bottom = left[2] + 0.03, knee[2] - 0.05
    half = 0.5 * abs(left[1] - right[1]) + 0.05
    middle = 0.5 * (left[1] + right[1])
    u = np.linspace(-1.0, 1.0, across)[None, :]
    v = np.linspace(0.0, 1.0, rings)[:, None]
    x = neck[0] - (0.10 + 0.06 * v) - 0.04 * (1.0 - u ** 2)
    y = middle + u * half * (1.0 + 0.4 * v)
    z = top - (top - bottom) * v + 0.0 * u
    verts = np.stack(np.broadcast_arrays(x, y, z), axis=-1).reshape(-1, 3)
    return verts, _grid_triangles(rings, across)


def coat(skeleton, rest, name, rings=16, around=24):
    """A long sleeveless coat at the rest pose of a humanoid facing +x: a tube round the trunk
    from the shoulders to the middle of the shins, between the trunk and the hanging arms (14 cm
    to each side, 12 cm deep) down to 10 cm below the wrists, flaring below to 24 cm by 20 (the
    legs swing inside). ``skeleton``, ``rest``, ``name``: as ``cape``'s. Returns ``vertices (V,3), triangles (T,3)``
    (an open tube of ``rings`` x ``around`` vertices)."""
    at = lambda role: rest[skeleton.index(name(role))]      # noqa: E731
    hips = at("hips")
    top = at("upperarm.L")[2] - 0.02
    bottom = 0.5 * (at("shin.L")[2] + at("foot.L")[2])
    z = np.linspace(top, bottom, rings)[:, None]
    # Flared below the fingertips (the hands hang outside it), not from the hips.
    tips = min(at("hand.L")[2], at("hand.R")[2]) - 0.1
    below = np.clip((tips - z) / max(tips - bottom, 1e-9), 0.0, 1.0)
    half = 0.14 + 0.10 * below
    depth = 0.12 + 0.08 * below
    a = 2.0 * np.pi * np.arange(around)[None, :] / around
    x = hips[0] + depth * np.cos(a)
    y = hips[1] + half * np.sin(a)
    verts = np.stack(np.broadcast_arrays(x, y, z + 0.0 * a), axis=-1).reshape(-1, 3)
    return verts, _grid_triangles(rings, around, closed=True)


def skirt(skeleton, motion, rings=8, around=24, waist=0.17, hem=0.34, length=0.5, joints=None):
    """A skirt following a humanoid's pelvis: ``vertices (F,V,3), triangles (T,3)``. ``rings``
    rings of ``around`` vertices from the waist (radius ``waist``, 5 cm above the hips joint)
    down ``length`` metres to the hem (radius ``hem``), turned with the hips' side line; the
    hem swings with the thighs (each vertex pushed out along its ring's normal by how far the
    thigh nearer it swings towards it), so the legs stay inside. An open tube (no top or
    bottom). ``joints``: {"Hips", "LeftUpLeg", "RightUpLeg", "LeftLeg", "RightLeg"} -> joint
    index for a rig named otherwise (``convention_rig``'s roles: hips, thigh, shin)."""
    names = {n: skeleton.names.index(n) for n in ("Hips", "LeftUpLeg", "RightUpLeg", "LeftLeg", "RightLeg")} \
        if joints is None else joints
    idx = names.__getitem__
    F = len(motion)
    hips = motion[:, idx("Hips")]
    side = motion[:, idx("LeftUpLeg")] - motion[:, idx("RightUpLeg")]
    side[:, 2] = 0.0
    side /= np.linalg.norm(side, axis=1, keepdims=True)
    fwd = np.cross(side, [0.0, 0.0, 1.0])
    a = 2.0 * np.pi * np.arange(around) / around
    s = np.linspace(0.0, 1.0, rings)
    radius = waist + (hem - waist) * s ** 1.5
    height = 0.05 - length * s
    verts = np.zeros((F, rings * around, 3))
    knees = [motion[:, idx(n)] for n in ("LeftLeg", "RightLeg")]
    for r in range(rings):
        for k in range(around):
            d = np.cos(a[k])[None] * fwd + np.sin(a[k])[None] * side          # (F,3) outward
            reach = 0.0
            for knee in knees:                                               # a swinging thigh pushes the cloth
                rel = knee - hips
                reach = np.maximum(reach, np.einsum("fd,fd->f", rel, d))
            bulge = np.maximum(reach - 0.6 * radius[r], 0.0) * s[r]
            verts[:, r * around + k] = hips + height[r] * np.array([0.0, 0.0, 1.0]) + (radius[r] + bulge)[:, None] * d
    tris = []
    for r in range(rings - 1):
        for k in range(around):
            i0, i1 = r * around + k, r * around + (k + 1) % around
            tris += [[i0, i1, i1 + around], [i0, i1 + around, i0 + around]]
    return verts, np.array(tris, np.int64)


def convention_rest(convention="bvh", legs=1.0, arms="down", scale=1.0):
    """``(skeleton, rest (J,3))`` of a ``convention_rig`` standing on z = 0, for retargeting:
    thighs and shins ``legs`` times as long (the feet below them as they are), the arms hanging
    (``"down"``, the rig's own rest), 45 degrees out (``"A"``) or held out sideways (``"T"``: a
    T-pose), everything times ``scale``."""
    sk, off, roles = convention_rig(convention)
    off = off.copy()
    for j, r in enumerate(roles):
        base = r.split(".")[0]
        parent_role = roles[sk.parents[j]].split(".")[0] if sk.parents[j] >= 0 else ""
        if base in ("shin", "foot") or (r == "twist" and parent_role in ("thigh", "shin")):
            off[j] *= legs
    angle = {"down": 0.0, "A": 45.0, "T": 90.0}.get(arms)
    if angle is None:
        raise ValueError(f"arms must be 'down', 'A' or 'T', not '{arms}'")
    if angle:
        # Every offset inside an arm (below the shoulder joint) turned about the forward axis
        # (X), out to the side.
        for j in range(len(roles)):
            p = sk.parents[j]
            inside = p >= 0 and (roles[p].split(".")[0] in ("upperarm", "forearm", "hand") or
                                 roles[p] in ("twist", "finger"))
            if not inside:
                continue
            a = np.radians(angle) * _arm_side(sk, roles, j)
            x, y, z = off[j]
            off[j] = (x, y * np.cos(a) - z * np.sin(a), y * np.sin(a) + z * np.cos(a))
    rest = rest_joints(sk, off)
    body = [j for j, r in enumerate(roles) if r != "root"]
    rest[:, 2] -= rest[body, 2].min()
    for j, r in enumerate(roles):
        if r == "root":                                  # Unreal's root stays on the floor
            rest[j, 2] = 0.0
    return sk, rest * scale


def _arm_side(skeleton, roles, j):
    """+1 for a joint in the left arm, -1 in the right (by its limb's role)."""
    while j >= 0:
        if roles[j].endswith(".L"):
            return 1.0
        if roles[j].endswith(".R"):
            return -1.0
        j = int(skeleton.parents[j])
    return 0.0


def convention_clip(convention, motion):
    """``(skeleton, rest (J,3), motion (F,J,3))``: a humanoid motion on a ``convention`` rig
    (``on_convention``) with the rest a capture of it would have: the rig's rest directions, the
    motion's own bone lengths, standing on z = 0 (as a retarget's source)."""
    sk, off, _ = convention_rig(convention)
    _, moved, _ = on_convention(convention, motion)
    lengths = np.median(sk.bone_lengths(moved), axis=0)
    norm = np.linalg.norm(off, axis=1)
    scaled = np.where(norm[:, None] > 0, off / np.maximum(norm, 1e-12)[:, None] * lengths[:, None], off)
    scaled[sk.parents < 0] = off[sk.parents < 0]
    rest = rest_joints(sk, scaled)
    rest[:, 2] -= rest[:, 2].min()
    return sk, rest, moved
