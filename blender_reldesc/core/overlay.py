"""What the viewport overlay draws, as plain arrays (testable without a window).

``overlay_geometry`` returns points, colours and line segments; the Blender
side only uploads them to the GPU.
"""

from __future__ import annotations

import numpy as np

from .descriptors import frames_of

#: RGBA colours.
FULL = np.array([0.2, 0.9, 0.3, 1.0])      # influence 1 / strongest weight
NONE = np.array([0.9, 0.2, 0.2, 1.0])      # influence 0
IDLE = np.array([0.5, 0.5, 0.5, 0.6])      # no weight for the active joint
TARGET = np.array([1.0, 0.8, 0.1, 1.0])
SOLVED = np.array([0.2, 0.6, 1.0, 1.0])


def frame_weights(binding, frame, joint, influence=None):
    """Normalised weights (N,) of every descriptor for ``joint`` at ``frame`` (Eq. 6)."""
    block = next(binding.cache.covering(frame, frame + 1))
    row = (frame - block.start) * block.joints + joint
    rows = slice(block.indptr[row], block.indptr[row + 1])
    w = np.zeros(binding.descriptor_count)
    np.add.at(w, block.desc[rows], block.weight[rows])
    if influence is not None:
        w *= influence
    total = w.sum()
    return w / total if total > 0 else w


def overlay_geometry(binding, mesh, frame, joint=None, influence=None, color_by="influence", strongest=8,
                     targets=None, solved=None):
    """Arrays for the overlay at ``frame``.

    binding : Binding; mesh : TriMesh of the environment now (bind-time triangles).
    joint : index of the active joint or None. influence : (N,) per-descriptor
    influence in [0,1] or None (= 1). color_by : 'influence' or 'weight'.
    strongest : how many of the active joint's strongest descriptors get a line.
    targets, solved : optional (J,3) joint targets and solved positions.

    Returns a dict: ``points (N,3)``, ``point_colors (N,4)``, ``lines (2K,3)``
    (segment end points, joint to descriptor), ``line_colors (2K,4)``,
    ``joints (M,3)`` and ``joint_colors (M,4)`` (targets then solved).
    """
    N = binding.descriptor_count
    f = int(np.clip(frame, 0, binding.frame_count - 1))
    d = frames_of(mesh, binding.triangles, binding.barycentrics, f if mesh.animated else 0)[0] if N else np.zeros((0, 3))
    infl = np.ones(N) if influence is None else np.clip(np.asarray(influence, float), 0.0, 1.0)
    if color_by == "weight" and joint is not None:
        w = frame_weights(binding, f, joint, influence)
        scale = w / w.max() if w.max() > 0 else w
        colors = np.where((w > 0)[:, None], NONE + scale[:, None] * (FULL - NONE), IDLE)
    else:
        colors = NONE + infl[:, None] * (FULL - NONE)
    lines = np.zeros((0, 3))
    if joint is not None and N:
        w = frame_weights(binding, f, joint, influence)
        order = np.argsort(-w)[:strongest]
        order = order[w[order] > 0]
        start = (solved if solved is not None else binding.motion[f])[joint]
        lines = np.empty((2 * len(order), 3))
        lines[0::2] = start
        lines[1::2] = d[order]
    line_colors = np.tile(FULL, (len(lines), 1))
    joints, joint_colors = [], []
    for arr, color in ((targets, TARGET), (solved, SOLVED)):
        if arr is not None:
            joints.append(np.asarray(arr, float))
            joint_colors.append(np.tile(color, (len(arr), 1)))
    joints = np.concatenate(joints) if joints else np.zeros((0, 3))
    joint_colors = np.concatenate(joint_colors) if joint_colors else np.zeros((0, 4))
    return dict(points=d, point_colors=colors, lines=lines, line_colors=line_colors, joints=joints,
                joint_colors=joint_colors)


CONTACT_COLORS = {"valid": FULL, "unresolved": NONE, "repositioned": np.array([1.0, 0.5, 0.0, 1.0])}
NEW_CONTACT = np.array([0.2, 0.6, 1.0, 1.0])


def contact_geometry(rows):
    """Points and lines for contact phases (rows of a contact report).

    Each phase's original contact point in its status colour; each re-positioned
    phase's new point in blue, with a line from the old point to it. Returns a
    dict: ``points (P,3)``, ``point_colors (P,4)``, ``lines (2K,3)``, ``line_colors (2K,4)``.
    """
    pts, cols, lines = [], [], []
    for r in rows:
        p = np.asarray(r["position"], float)
        pts.append(p)
        cols.append(CONTACT_COLORS[r["status"]])
        if r.get("new_position") is not None:
            q = np.asarray(r["new_position"], float)
            pts.append(q)
            cols.append(NEW_CONTACT)
            lines.extend([p, q])
    return dict(points=np.array(pts).reshape(-1, 3), point_colors=np.array(cols).reshape(-1, 4),
                lines=np.array(lines).reshape(-1, 3), line_colors=np.tile(NEW_CONTACT, (len(lines), 1)))
