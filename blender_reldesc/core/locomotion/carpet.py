"""The carpet: a locomotion clip bound to descriptors on the ground it walks on
(Al-Ashqar's thesis, chapter 3, "Carpet unrolling").

The clip walks (or runs) roughly straight on flat ground. ``bind_carpet`` puts it in a
canonical frame (ground at z = 0, heading along +x), finds a cycle in it so it can be
played for as long as a path needs (the cycle repeated, each repetition moved on by the
cycle's travel, blended over a few frames at each seam), and finds the frames on which
each low joint (feet, toes, paws) stands.

For a walk of a given length, ``Carpet.binding`` samples the descriptors as the thesis
does (§4): each joint's projection on the ground, kept when no descriptor lies within a
radius equal to the joint's height, starting from the middle of the first cycle. They are
the vertices of a flat mesh (their 2-D Delaunay triangulation), so the binding is an
ordinary ``Binding`` and Eq. 1-6 are the core's; the unrolled carpet only tells each
descriptor where it is now and how it turned (``unroll``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import Delaunay, QhullError

from .. import constants as C
from ..descriptors.binding import Binding, _check_motion, measure_body_height
from ..errors import InputError
from ..geometry import TriMesh
from ..skeleton import Skeleton

#: A clip whose root travels less than this many body heights is not locomotion.
MIN_TRAVEL = 0.5
#: A cycle travels at least this many body heights (a walking cycle, two steps, is about 0.8).
MIN_CYCLE_TRAVEL = 0.3
#: Frames blended at each seam of the repeated cycle, at most (and at most half of it): a real
#: clip's cycles differ by centimetres in the feet and up to 20 cm in the arms (measured on the
#: shared real walk), so the difference is spread widely.
SEAM_FRAMES = 24
#: Weight of the standing joints when the cycle is chosen.
STANDING_WEIGHT = 8.0
#: Joints whose lowest point is within this many body heights of the ground can stand on it.
STANCE_JOINT_HEIGHT = 0.1
#: A joint stands while it is within this many body heights of its own lowest height...
STANCE_HEIGHT = 0.02
#: ... and moves less than this many body heights per frame.
STANCE_SPEED = 0.003
#: A stance shorter than this many frames is not one.
STANCE_MIN_FRAMES = 3
#: Descriptor radius floor (thesis: the joint's height), times d0 (Eq. 7).
RADIUS_FLOOR = 0.5


@dataclass
class Stance:
    """A joint standing on the ground over frames ``start .. stop - 1`` of the extended clip."""

    joint: int
    start: int
    stop: int


@dataclass
class Carpet:
    """A locomotion clip bound to its carpet (``bind_carpet``).

    skeleton : Skeleton. source : (F,J,3) the clip as given.
    motion : (F,J,3) the clip in the canonical frame: ground z = 0, heading +x, the root
        starting above the origin.
    body_height : float. ground : the clip's ground height (in the source's frame).
    origin (3,), rotation (3,3) : canonical = rotation @ (source - origin).
    cycle : (a, b) the repeated frames ``a .. b - 1``; travel : (3,) how far one cycle moves
        the root (along +x); speed : travel per frame.
    root : the joint that carries the character. standing : (K,) joints that can stand.
    leg_length : float, the root's median height above the ground.
    """

    skeleton: Skeleton
    source: np.ndarray
    motion: np.ndarray
    body_height: float
    ground: float
    origin: np.ndarray
    rotation: np.ndarray
    cycle: tuple
    travel: np.ndarray
    root: int
    standing: np.ndarray
    leg_length: float
    seam: int = SEAM_FRAMES
    _bindings: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def speed(self):
        """Distance the root travels per frame, in the clip's units."""
        return float(self.travel[0]) / (self.cycle[1] - self.cycle[0])

    @property
    def period(self):
        return self.cycle[1] - self.cycle[0]

    # --- the clip played for any number of frames --------------------------------------

    def extended(self, frames):
        """(frames,J,3) the canonical clip played for ``frames`` frames: the frames before the
        cycle as they are, then the cycle repeated, each repetition moved on by ``travel`` and
        blended into the next over the last ``seam`` frames (the pose at the seam is the
        cycle's first, moved on)."""
        a, b = self.cycle
        T = b - a
        m = self.motion
        f = np.arange(frames)
        i = np.where(f < a, 0, (f - a) % T)
        n = np.where(f < a, 0, (f - a) // T)
        out = np.where((f < a)[:, None, None], m[np.minimum(f, len(m) - 1)], m[a + i] + n[:, None, None] * self.travel)
        k = max(1, min(self.seam, T // 2))
        delta = m[b] - m[a] - self.travel if b < len(m) else np.zeros_like(m[a])
        ramp = np.clip((i - (T - k)) / k, 0.0, 1.0)
        ramp = ramp * ramp * (3.0 - 2.0 * ramp)
        out = out - np.where((f >= a)[:, None, None], ramp[:, None, None] * delta, 0.0)
        # Blended poses keep the clip's bone lengths: each bone's direction from the blend, its
        # length from the frame it was blended from (parents first).
        blended = np.flatnonzero((f >= a) & (ramp > 0))
        if blended.size:
            src = m[a + i[blended]]
            fixed = out[blended].copy()
            sk = self.skeleton
            for j in sk.order.tolist():
                p = sk.parents[j]
                if p < 0:
                    continue
                length = np.linalg.norm(src[:, j] - src[:, p], axis=-1, keepdims=True)
                bone = out[blended, j] - out[blended, p]
                norm = np.linalg.norm(bone, axis=-1, keepdims=True)
                fixed[:, j] = fixed[:, p] + np.where(norm > 0, bone * length / np.maximum(norm, 1e-300),
                                                     src[:, j] - src[:, p])
            out[blended] = fixed
        return out

    def stances(self, motion):
        """Stance phases (``Stance``) of the standing joints in ``motion`` (F,J,3), canonical."""
        H = self.body_height
        out = []
        if len(motion) < 2:
            return out
        # A frame's speed is the slower of its steps from the frame before and to the frame after:
        # a foot that lands (or lifts) between two frames stands on the frame after (or before)
        # that step. A central difference halves the landing step onto both neighbours, which
        # lost the first and last frames of every stance and whole stances of a fast gait (3
        # frames on the ground at 2.6 m/s; measured: 43 % of its planted samples held).
        step = np.linalg.norm(np.diff(motion, axis=0), axis=-1)                       # (F-1,J)
        speed = np.minimum(np.r_[step[:1], step], np.r_[step, step[-1:]])             # (F,J)
        for j in self.standing.tolist():
            z = motion[:, j, 2]
            down = (z <= z.min() + STANCE_HEIGHT * H) & (speed[:, j] <= STANCE_SPEED * H)
            edges = np.flatnonzero(np.diff(np.r_[0, down.astype(np.int8), 0]))
            for s, e in zip(edges[::2], edges[1::2]):
                if e - s >= STANCE_MIN_FRAMES:
                    out.append(Stance(j, int(s), int(e)))
        return out

    # --- descriptors for a walk of a given length --------------------------------------

    def layout(self, frames):
        """The clip played for ``frames`` frames, laid on its carpet (``Laid``, cached)."""
        frames = int(frames)
        laid = self._bindings.get(frames)
        if laid is None:
            if len(self._bindings) >= 4:
                self._bindings.pop(next(iter(self._bindings)))
            laid = self._bindings[frames] = _bind_extended(self, self.extended(frames))
        return laid


@dataclass
class Laid:
    """The clip played for a number of frames, bound to its carpet.

    binding : ``Binding`` of the played clip to the flat carpet mesh.
    points : (N,2) the descriptors on the canonical ground (the mesh's first N vertices).
    edges : (E,2) the carpet's distance constraints: Delaunay edges no longer than half the
        leg length (thesis, footstep spacing).
    stances : the standing joints' ``Stance`` phases in the played clip.
    """

    binding: Binding
    points: np.ndarray
    edges: np.ndarray
    stances: list


def _root_joint(skeleton):
    roots = np.flatnonzero(skeleton.parents < 0)
    size = np.zeros(len(skeleton), np.int64)
    for j in skeleton.order[::-1].tolist():
        size[j] += 1
        if skeleton.parents[j] >= 0:
            size[skeleton.parents[j]] += size[j]
    return int(roots[np.argmax(size[roots])])


def _yaw_to_x(v):
    """Rotation about z turning the horizontal direction ``v`` onto +x."""
    a = np.arctan2(v[1], v[0])
    c, s = np.cos(-a), np.sin(-a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _find_cycle(motion, root, body_height, standing=None):
    """``(a, b)``: the pair of frames, b later by at least ``MIN_CYCLE_TRAVEL`` body heights
    of travel, whose poses about the root (and the next frames', for the same direction of
    motion) are closest; among pairs within 1.5x the best distance the longest cycle. The
    joints that stand (``standing``, (J,) bool) count ``STANDING_WEIGHT`` times: a real
    clip's cycles differ most in the arms, and a seam is seen most in the feet."""
    F, J, _ = motion.shape
    rel = motion - motion[:, root:root + 1] * np.array([1.0, 1.0, 0.0])
    w = np.ones(J) if standing is None else np.where(standing, STANDING_WEIGHT, 1.0)
    rel = rel * np.sqrt(w / w.sum())[None, :, None]
    feat = np.concatenate([rel[:-1], rel[1:]], axis=1).reshape(F - 1, -1)
    x = motion[:, root, 0]
    A = np.arange(0, min(F - 1, max(1, F // 3), 200))
    B = np.arange(1, F - 1)
    d = ((feat[A, None, :] - feat[None, B, :]) ** 2).sum(axis=-1)                    # (A,B)
    ok = (x[B][None, :] - x[A][:, None]) >= MIN_CYCLE_TRAVEL * body_height
    if not ok.any():
        raise InputError(f"the clip's root travels {x[-1] - x[0]:.3g} along its heading, too little for a "
                         "cycle of the gait: bind a walk or run with at least one full cycle (two steps)")
    d = np.where(ok, d, np.inf)
    best = d.min()
    ia, ib = np.nonzero(d <= 1.5 * best + 1e-12 * body_height ** 2)
    k = np.argmax(B[ib] - A[ia])
    return int(A[ia[k]]), int(B[ib[k]])


def bind_carpet(skeleton, motion, ground=None):
    """Bind a locomotion clip to a carpet of ground descriptors.

    Parameters
    ----------
    skeleton : Skeleton. motion : (F,J,3) world positions, z up, of a walk or run on flat
        ground, roughly straight, in any direction, with at least one full cycle.
    ground : height of the floor the clip was captured on (default: the lowest joint's).

    Returns
    -------
    Carpet. Raises ``InputError`` for a clip that is not locomotion (the root barely moves).
    """
    if not isinstance(skeleton, Skeleton):
        raise InputError("skeleton must be a Skeleton")
    motion = _check_motion(skeleton, motion)
    F = len(motion)
    if F < 8:
        raise InputError(f"the clip has {F} frames: a locomotion clip needs at least one full cycle")
    H = measure_body_height(motion)
    root = _root_joint(skeleton)
    g = float(motion[..., 2].min()) if ground is None else float(ground)
    heading = motion[-1, root, :2] - motion[0, root, :2]
    travel = float(np.linalg.norm(heading))
    if travel < MIN_TRAVEL * H:
        raise InputError(f"the clip is not locomotion: its root '{skeleton.names[root]}' travels {travel:.3g} over "
                         f"{F} frames, less than half the body height ({H:.3g}); bind a walk or run")
    origin = np.array([motion[0, root, 0], motion[0, root, 1], g])
    rot = _yaw_to_x(heading)
    canon = (motion - origin) @ rot.T
    low = canon[..., 2].min(axis=0) <= STANCE_JOINT_HEIGHT * H
    a, b = _find_cycle(canon, root, H, low)
    # Heading along the cycle's own travel, so repeated cycles stay on the line.
    step = canon[b, root] - canon[a, root]
    rot2 = _yaw_to_x(step)
    canon = canon @ rot2.T
    rot = rot2 @ rot
    shift = np.array([canon[0, root, 0], canon[0, root, 1], 0.0])
    canon = canon - shift
    origin = origin + rot.T @ shift
    travel_vec = np.array([np.linalg.norm((canon[b, root] - canon[a, root])[:2]), 0.0, 0.0])
    lowest = canon[..., 2].min(axis=0)
    standing = np.flatnonzero((lowest <= STANCE_JOINT_HEIGHT * H) & (np.arange(len(skeleton)) != root))
    if not standing.size:
        raise InputError("no joint of the clip comes near the ground: bind_carpet needs feet on the floor "
                         "(give ground= if the floor is not under the lowest joint)")
    leg = float(np.median(canon[:, root, 2]))
    return Carpet(skeleton, motion, canon, H, g, origin, rot, (a, b), travel_vec, root, standing, leg)


def sample_carpet(motion, body_height, cycle_middle=0):
    """(N,2) descriptor points on the ground (thesis §4): each joint's projection, kept when
    no descriptor lies within its height (at least ``RADIUS_FLOOR`` d0), frames visited from
    ``cycle_middle`` on, then the ones before it."""
    F, J, _ = motion.shape
    d0 = C.MIN_DISTANCE_FRACTION * body_height
    floor = RADIUS_FLOOR * d0
    order = np.r_[np.arange(cycle_middle, F), np.arange(cycle_middle)]
    xy = motion[order, :, :2].reshape(-1, 2)
    r = np.maximum(motion[order, :, 2].reshape(-1), floor)
    # Nearly the same projections over neighbouring frames: keep one per small cell first.
    cell = np.floor(xy / (0.5 * floor)).astype(np.int64)
    _, first = np.unique(cell, axis=0, return_index=True)
    first.sort()
    xy, r = xy[first], r[first]
    grid = {}
    kept = []
    size = floor * 4.0

    def near(p, rad):
        lo = np.floor((p - rad) / size).astype(int)
        hi = np.floor((p + rad) / size).astype(int)
        cells = ((cx, cy) for cx in range(lo[0], hi[0] + 1) for cy in range(lo[1], hi[1] + 1))
        return any((q[0] - p[0]) ** 2 + (q[1] - p[1]) ** 2 < rad * rad for cell in cells for q in grid.get(cell, ()))

    for k in np.argsort(r, kind="stable").tolist():     # small radii (feet) first: the lane is dense
        if not near(xy[k], r[k]):
            kept.append(xy[k])
            grid.setdefault(tuple(np.floor(xy[k] / size).astype(int).tolist()), []).append(xy[k])
    return np.asarray(kept).reshape(-1, 2)


def carpet_edges(points, max_length):
    """(E,2) edges of the 2-D Delaunay triangulation of ``points`` (N,2) no longer than
    ``max_length`` (thesis: half the leg length), and the triangles (T,3), counter-clockwise."""
    if len(points) < 3:
        return np.zeros((0, 2), np.int64), np.zeros((0, 3), np.int64)
    try:
        tri = Delaunay(points).simplices.astype(np.int64)
    except QhullError:
        return np.zeros((0, 2), np.int64), np.zeros((0, 3), np.int64)
    a, b, c = (points[tri[:, k]] for k in range(3))
    cw = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]) < 0
    tri[cw] = tri[cw][:, [0, 2, 1]]
    e = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    e = np.unique(e, axis=0)
    length = np.linalg.norm(points[e[:, 0]] - points[e[:, 1]], axis=1)
    return e[length <= max_length], tri


def carpet_points(carpet, frames):
    """(N,2) the descriptors of the clip played for ``frames`` frames. Sampled on one cycle
    (from its middle, as the thesis) and repeated with it, two cycles past the last frame,
    then the frames before the cycle where they add ground: a walk's descriptors near a frame
    do not depend on how long the walk is (a crowd's characters get what they get alone)."""
    H = carpet.body_height
    a, b = carpet.cycle
    T = b - a
    one = carpet.extended(a + T)
    base = sample_carpet(one[a:], H, T // 2)
    cycles = max(1, -(-(frames - a) // T)) + 2
    points = np.concatenate([base + [n * carpet.travel[0], 0.0] for n in range(cycles)])
    if a > 0:
        before = sample_carpet(one[:a], H, 0)
        floor = RADIUS_FLOOR * C.MIN_DISTANCE_FRACTION * H
        near = np.min(((before[:, None] - points[None]) ** 2).sum(-1), axis=1) < floor ** 2
        points = np.concatenate([points, before[~near]])
    return points


def _bind_extended(carpet, motion):
    """``Binding`` of the canonical ``motion`` to its carpet: descriptors are the vertices of a
    flat mesh (their Delaunay triangles, plus four far corners so that any layout triangulates)."""
    H = carpet.body_height
    points = carpet_points(carpet, len(motion))
    N = len(points)
    lo, hi = points.min(axis=0) - H, points.max(axis=0) + H
    corners = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    allp = np.concatenate([points, corners])
    _, tris = carpet_edges(allp, np.inf)
    verts = np.concatenate([allp, np.zeros((len(allp), 1))], axis=1)
    mesh = TriMesh(verts, tris)
    # Each descriptor at a corner of a triangle that has it.
    owner = np.full(len(allp), -1, np.int64)
    corner = np.zeros(len(allp), np.int64)
    for k in range(3):
        owner[tris[:, k]] = np.arange(len(tris))
        corner[tris[:, k]] = k
    if np.any(owner[:N] < 0):
        raise InputError("the carpet's descriptors could not be triangulated: the clip's joints project onto a "
                         "line or a point")
    bary = np.eye(3)[corner[:N]]
    binding = Binding(carpet.skeleton, motion, mesh, owner[:N], bary, H,
                      settings={"carpet": True, "frames": len(motion)})
    return Laid(binding, points, carpet_edges(points, 0.5 * carpet.leg_length)[0], carpet.stances(motion))
