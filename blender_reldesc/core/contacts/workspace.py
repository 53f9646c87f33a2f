"""Where a limb can reach: its workspace, and the body frame it is carried in.

The contacts paper (§5.2) calls a contact *unreachable* when it leaves the convex
hull of the limb's sampled configurations, taken with the limb's root. Here:

- **The body frames** (``BodyFrames``) are found from the structure: the pelvis
  is where the legs branch, the chest where the arms do. The legs' frame is the
  pelvis's (the side axis between the leg roots, up the vertical square to it),
  the arms' the chest's (up along the trunk's last bone below the arms,
  the side axis between the arm roots); forward is where the toes point in the
  source (the knees when there are no toes). Rows of ``rotations``: forward,
  left, up.
- **A limb's workspace** (``Workspace``) is the convex hull of 12,000 effector
  positions in that frame, relative to the limb's root, over configurations
  within anatomical limits (``LEG`` and ``ARM``: flexion and abduction of the
  ball joint, the twist that turns the hinge's plane, the hinge's bend; a short
  bone ahead of the limb, a clavicle, within ``PRE_CONE`` of its mean direction in
  the source; bones below the hinge's lower bone, a foot, in any direction).
  One tenth of the samples are straight limbs, so the extended boundary is
  sampled densely (a stance leg is straight at heel strike); the source's own
  effector positions are added (what the clip does is reachable), scaled with the
  limb when its bones change length.

The hull replaces the ball of the limb's length: that ball let a foot reach above
the hip and an arm reach through the back of the chest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull

from ..geometry import normalize
from ..skeleton.joints import split_joints

#: Anatomical ranges in degrees (Kapandji; the usual clinical tables, rounded out):
#: ball-joint flexion (forward +) and abduction (outward +), the hinge plane's twist either
#: way, and the hinge's bend (the knee bends backward, the elbow forward: the side is read
#: from the source when it bends clearly).
LEG = dict(flex=(-30.0, 125.0), abduct=(-30.0, 50.0), twist=40.0, bend=(0.0, 150.0), side=-1.0)
ARM = dict(flex=(-60.0, 180.0), abduct=(-30.0, 180.0), twist=90.0, bend=(0.0, 150.0), side=1.0)
#: How far (degrees) the bones ahead of a limb's first long bone (a clavicle) turn from
#: their mean direction in the source.
PRE_CONE = 20.0
#: Configurations per workspace (the issue asks for at least 10,000).
SAMPLES = 12000
#: Hull facets are merged where they differ by less than this many body heights.
HULL_MERGE = 0.005
#: A limb is a leg when its effector usually stays within this many body heights of the
#: clip's lowest point (as in ``balance``).
LEG_HEIGHT = 0.25


def on_leg(motion, joint, body_height):
    """Whether ``joint`` (a limb's effector) is a leg's: it usually stays within ``LEG_HEIGHT``
    body heights of the clip ``motion``'s (F,J,3) lowest point."""
    return bool(np.median(motion[:, joint, 2]) - float(motion[..., 2].min()) < LEG_HEIGHT * body_height)


@dataclass
class BodyFrames:
    """The joints that define the body's frames; ``rotations`` gives them for any poses.

    The lower frame (legs) is the pelvis's: left between the leg roots, up the vertical made
    square to it (the bone from the pelvis up the trunk is a lumbar bone: on a real walk bent
    sideways by an edit, it turned the legs' workspaces 20° and made a planted foot
    unreachable). The upper frame (arms) is the chest's: up along the trunk's last bone below
    the arms' branching joint, left between the arm roots. A back that bends turns the arms'
    workspaces, not the legs'."""

    pelvis: int
    top: int | None              # the arms' branching joint, None without arms
    top_below: int | None        # the trunk joint below it
    pair: tuple | None           # (a, b): the lower frame's left axis from a to b (times ``sign``)
    arm_pair: tuple | None       # the same for the upper frame (times ``arm_sign``)
    sign: float = 1.0
    arm_sign: float = 1.0

    def rotations(self, positions, upper=False):
        """(..., 3, 3) rows forward, left, up of poses ``positions`` (..., J, 3): the lower frame,
        or with ``upper`` the chest's."""
        p = np.asarray(positions, float)
        shape = p.shape[:-2]
        z = np.array([0.0, 0.0, 1.0])
        if upper and self.top is not None:
            pair, sign = self.arm_pair or self.pair, self.arm_sign
            up = normalize(p[..., self.top, :] - p[..., self.top_below, :])
        else:
            pair, sign = self.pair, self.sign
            up = np.broadcast_to(z, shape + (3,))
        if pair is not None:
            left = sign * (p[..., pair[1], :] - p[..., pair[0], :])
        else:
            left = np.broadcast_to(np.array([0.0, 1.0, 0.0]), shape + (3,))
        left = left - np.einsum("...d,...d->...", left, up)[..., None] * up
        left = normalize(left)
        forward = np.cross(left, up)
        return np.stack([forward, left, up], axis=-2)


def body_frames(skeleton, motion, body_height, chains):
    """``BodyFrames`` of a skeleton from its limb ``chains`` (root-to-effector joint arrays,
    one per limb, e.g. ``contacts.find_limb(...).chain``)."""
    roots = {}
    for c in chains:
        roots.setdefault(int(c[0]), np.asarray(c))
    chains = list(roots.values())
    legs = [c for c in chains if on_leg(motion, c[-1], body_height)]
    arms = [c for c in chains if not any(c is x for x in legs)]
    parents = skeleton.parents
    if legs:
        pelvis = int(parents[legs[0][0]])
    elif arms:
        pelvis = int(parents[arms[0][0]])
    else:
        pelvis = int(skeleton.roots[0])
    top = int(parents[arms[0][0]]) if arms else None
    if top == pelvis:
        top = None
    apart = lambda i, j: float(np.median(np.linalg.norm(motion[:, i] - motion[:, j], axis=-1))) > 0.02 * body_height  # noqa: E731
    top_below = None
    if top is not None:
        path = [top]                                        # from the top down to the pelvis
        while path[-1] != pelvis and parents[path[-1]] >= 0:
            path.append(int(parents[path[-1]]))
        if path[-1] == pelvis:
            path = path[::-1]                               # pelvis ... top
            top_below = next((j for j in path[-2::-1] if apart(j, top)), pelvis)

    def off_pelvis(c, at):
        """The chain's first joint away from ``at`` (Rigify's pelvis bones start on the spine)."""
        far = np.median(np.linalg.norm(motion[:, c] - motion[:, [at]], axis=-1), axis=0) > 1e-3 * body_height
        return int(c[np.argmax(far)]) if far.any() else int(c[0])

    pair = (off_pelvis(legs[0], pelvis), off_pelvis(legs[1], pelvis)) if len(legs) >= 2 else None
    arm_pair = (off_pelvis(arms[0], top), off_pelvis(arms[1], top)) if len(arms) >= 2 and top is not None else None
    if pair is None:
        pair = arm_pair
    frames = BodyFrames(pelvis, top, top_below, pair, arm_pair)
    if pair is None:
        return frames
    if legs:
        # Forward is where the toes point (the joints below each foot), else where the knees do
        # (the middle joint off the hip-ankle line; a hyperextended knee points back).
        R = frames.rotations(motion)                                          # (F,3,3)
        votes = 0.0
        for c in legs:
            below = skeleton.descendants(int(c[-1]))
            if len(below):
                votes += float(np.einsum("fd,fd->", R[:, 0], motion[:, below].mean(axis=1) - motion[:, c[-1]]))
        if abs(votes) < 1e-3 * body_height * len(motion):
            for c in legs:
                mid = len(c) // 2
                off = motion[:, c[mid]] - 0.5 * (motion[:, c[0]] + motion[:, c[-1]])
                votes += float(np.einsum("fd,fd->", R[:, 0], off))
        if votes < 0:
            frames.sign = -1.0
    if arm_pair is not None and legs:
        # The chest faces where the pelvis does.
        lower, chest = frames.rotations(motion), frames.rotations(motion, upper=True)
        if float(np.einsum("fd,fd->", lower[:, 0], chest[:, 0])) < 0:
            frames.arm_sign = -1.0
    return frames


@dataclass
class Workspace:
    """The convex hull of a limb's effector positions, in the body frame relative to the
    limb's root: ``equations`` (K,4), n·x + c <= 0 inside (scipy's ``ConvexHull``)."""

    root: int
    effector: int
    equations: np.ndarray
    points: np.ndarray = None
    upper: bool = False             # in the chest's frame (an arm), else the pelvis's

    def excess(self, local):
        """(...,) how far points ``local`` (..., 3) lie outside the hull: the largest plane
        distance (<= 0 inside; outside, a lower bound of the Euclidean distance)."""
        return (np.asarray(local, float) @ self.equations[:, :3].T + self.equations[:, 3]).max(axis=-1)


def _rot(axis, angle):
    """(N,3,3) rotations about unit axes (N,3) or one axis (3,) by angles (N,)."""
    axis = np.broadcast_to(np.asarray(axis, float), np.shape(angle) + (3,))
    x, y, z = axis[..., 0], axis[..., 1], axis[..., 2]
    c, s = np.cos(angle), np.sin(angle)
    t = 1.0 - c
    return np.stack([np.stack([c + x * x * t, x * y * t - z * s, x * z * t + y * s], -1),
                     np.stack([y * x * t + z * s, c + y * y * t, y * z * t - x * s], -1),
                     np.stack([z * x * t - y * s, z * y * t + x * s, c + z * z * t], -1)], -2)


def limb_workspace(skeleton, motion, body_height, frames, chain, lengths=None, samples=SAMPLES, seed=0):
    """The ``Workspace`` of the limb ``chain`` (root ... effector) in ``frames``
    (``BodyFrames``), with bone ``lengths`` (J,) (default the source's medians).

    The first bone at least half as long as the limb's longest is its ball-joint bone (the
    thigh, the upper arm), the next its hinge's lower bone; bones before them keep their
    source direction within ``PRE_CONE``, bones after them point anywhere."""
    chain = np.asarray(chain, np.int64)
    src_len = np.median(skeleton.bone_lengths(motion), axis=0)
    full = (src_len if lengths is None else np.asarray(lengths, float))
    # A bone split along its length (Rigify's thigh and thigh.001) is one segment.
    split = split_joints(skeleton, motion)
    keep = [0] + [i for i in range(1, len(chain) - 1) if not split[chain[i]]] + [len(chain) - 1]
    L = np.array([full[chain[a + 1:b + 1]].sum() for a, b in zip(keep[:-1], keep[1:])])
    src_total = float(src_len[chain[1:]].sum())
    chain = chain[keep]
    if not np.all(np.isfinite(L)) or L.max() <= 0:
        raise ValueError("a limb with no length has no workspace")
    u = int(np.flatnonzero(L >= 0.5 * L.max())[0])
    leg = on_leg(motion, chain[-1], body_height)
    R = frames.rotations(motion, upper=not leg)                                # (F,3,3)
    lim = LEG if leg else ARM
    rng = np.random.default_rng(seed)
    n = int(samples)
    # Which side of the body the limb is on (its outward direction), and which way its hinge bends.
    centre = frames.pelvis if leg or frames.top is None else frames.top
    rel_root = np.einsum("fij,fj->fi", R, motion[:, chain[0]] - motion[:, centre])
    out_sign = 1.0 if np.median(rel_root[:, 1]) >= 0 else -1.0
    bend_side = lim["side"]
    if u + 1 < len(L):
        a, k, c = motion[:, chain[u]], motion[:, chain[u + 1]], motion[:, chain[u + 2]]
        upper, lower = normalize(k - a), c - k
        perp = lower - np.einsum("fd,fd->f", lower, upper)[:, None] * upper
        bent = np.linalg.norm(perp, axis=-1) > np.sin(np.radians(20.0)) * np.linalg.norm(lower, axis=-1)
        if bent.sum() >= 0.1 * len(motion):
            fwd = np.einsum("fd,fd->f", normalize(perp[bent]), R[bent, 0])
            if abs(fwd.mean()) > 0.2:
                bend_side = float(np.sign(fwd.mean()))
    # Ahead of the ball joint: the source's mean offset, turned within PRE_CONE.
    pre = np.zeros((n, 3))
    if u > 0:
        v = np.einsum("fij,fj->fi", R, motion[:, chain[u]] - motion[:, chain[0]]).mean(axis=0)
        v = v * (L[:u].sum() / max(np.linalg.norm(v), 1e-12))
        axis = normalize(np.cross(v, rng.normal(size=(n, 3))))
        pre = np.einsum("nij,j->ni", _rot(axis, np.radians(PRE_CONE) * np.sqrt(rng.random(n))), v)
    flex = np.radians(rng.uniform(*lim["flex"], n))
    abd = np.radians(rng.uniform(*lim["abduct"], n))
    turn = _rot(np.array([1.0, 0.0, 0.0]), out_sign * abd) @ _rot(np.array([0.0, 1.0, 0.0]), -flex)
    d = turn @ np.array([0.0, 0.0, -1.0])
    hinge = turn @ np.array([bend_side, 0.0, 0.0])
    hinge = np.einsum("nij,nj->ni", _rot(d, np.radians(rng.uniform(-lim["twist"], lim["twist"], n))), hinge)
    beta = np.radians(rng.uniform(*lim["bend"], n))
    beta[: n // 10] = 0.0                                           # straight limbs: the far boundary
    lower_dir = np.cos(beta)[:, None] * d + np.sin(beta)[:, None] * hinge
    pts = pre + L[u] * d
    if u + 1 < len(L):
        pts = pts + L[u + 1] * lower_dir
    if u + 2 < len(L):
        pts = pts + L[u + 2:].sum() * normalize(rng.normal(size=(n, 3)))
    # What the source itself does is reachable (a dancer's leg above the table's range).
    pts = np.concatenate([pts, np.einsum("fij,fj->fi", R, motion[:, chain[-1]] - motion[:, chain[0]])
                          * (L.sum() / max(src_total, 1e-12))])
    # Facets merged within 0.5 % of the body height (Qhull's centrum test): some 400 facets
    # instead of 3000, every sample still inside; each test of a point is a product with them.
    hull = ConvexHull(pts, qhull_options=f"C{HULL_MERGE * body_height:.6g}")
    return Workspace(int(chain[0]), int(chain[-1]), hull.equations.copy(), pts[hull.vertices], upper=not leg)


def to_body(frames_rot, root_positions, points):
    """Points (..., 3) in the body frame (rows of ``frames_rot`` (..., 3, 3)) relative to
    ``root_positions`` (..., 3)."""
    return np.einsum("...ij,...j->...i", frames_rot, np.asarray(points, float) - root_positions)
