"""A small BVH reader for benchmarks: joint world positions by numpy forward kinematics.

End sites become leaf joints named ``<parent>_end``. Rotations follow the
channel order as intrinsic rotations (the BVH convention).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation


def read_bvh(path, scale=1.0, y_up=True, max_frames=None):
    """Return ``names, parents, positions (F,J,3), fps``; Z-up output when ``y_up``."""
    clip = read_bvh_clip(path, scale, y_up, max_frames)
    return clip["names"], clip["parents"], clip["positions"], clip["fps"]


def read_bvh_clip(path, scale=1.0, y_up=True, max_frames=None):
    """``read_bvh`` with the rest pose and the bones' rotations: a dict of ``names``, ``parents``,
    ``positions`` (F,J,3), ``rest`` (J,3) (every channel at zero, the root at its first frame's
    place), ``turns`` (F,J,3,3) each joint's world rotation from that rest, ``fps``."""
    with open(path) as fh:
        tokens = fh.read().split()
    names, parents, offsets, channels = [], [], [], []
    stack = []
    i = tokens.index("HIERARCHY") + 1
    while tokens[i] != "MOTION":
        tok = tokens[i]
        if tok in ("ROOT", "JOINT"):
            names.append(tokens[i + 1])
            parents.append(stack[-1] if stack else -1)
            i += 2
        elif tok == "End":
            names.append(names[stack[-1]] + "_end")
            parents.append(stack[-1])
            channels.append([])
            i += 2
        elif tok == "{":
            stack.append(len(names) - 1)
            i += 1
        elif tok == "}":
            stack.pop()
            i += 1
        elif tok == "OFFSET":
            offsets.append([float(x) for x in tokens[i + 1:i + 4]])
            i += 4
        elif tok == "CHANNELS":
            n = int(tokens[i + 1])
            channels.append(tokens[i + 2:i + 2 + n])
            i += 2 + n
        else:
            i += 1
    frames = int(tokens[i + 2])
    frame_time = float(tokens[i + 5])
    data = np.asarray(tokens[i + 6:], dtype=float)
    width = sum(len(c) for c in channels)
    data = data[: frames * width].reshape(frames, width)
    if max_frames:
        data = data[:max_frames]
    F, J = len(data), len(names)
    offsets = np.asarray(offsets)
    world_rot = np.zeros((F, J, 3, 3))
    pos = np.zeros((F, J, 3))
    col = 0
    for j in range(J):
        ch = channels[j]
        local_t = np.broadcast_to(offsets[j], (F, 3)).copy()
        rot = np.broadcast_to(np.eye(3), (F, 3, 3))
        rot_axes = "".join(c[0] for c in ch if c.endswith("rotation"))
        rot_cols = [col + k for k, c in enumerate(ch) if c.endswith("rotation")]
        for k, c in enumerate(ch):
            if c.endswith("position"):
                local_t[:, "XYZ".index(c[0])] = data[:, col + k]
        if rot_axes:
            rot = Rotation.from_euler(rot_axes.upper(), data[:, rot_cols], degrees=True).as_matrix()
        col += len(ch)
        p = parents[j]
        if p < 0:
            pos[:, j] = local_t
            world_rot[:, j] = rot
        else:
            pos[:, j] = pos[:, p] + np.einsum("fij,fj->fi", world_rot[:, p], local_t)
            world_rot[:, j] = world_rot[:, p] @ rot
    rest = np.zeros((J, 3))
    for j in range(J):
        rest[j] = pos[0, 0] if parents[j] < 0 else rest[parents[j]] + offsets[j]
    pos, rest = pos * scale, rest * scale
    if y_up:
        def up(v):
            return np.stack([v[..., 0], -v[..., 2], v[..., 1]], axis=-1)
        pos, rest = up(pos), up(rest)
        C = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
        world_rot = C @ world_rot @ C.T
    return dict(names=names, parents=np.asarray(parents), positions=pos, rest=rest, turns=world_rot,
                fps=1.0 / frame_time)
