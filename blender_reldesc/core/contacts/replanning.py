"""Root replanning (contacts paper §7): the last resort when contacts stay invalid.

Where contact re-positioning leaves phases invalid (an obstacle moved in above the
path: the trunk passes through it and no foot placement helps), the root's
trajectory is planned again over those frames with a rapidly-exploring random tree,
in the reachability space of Eq. 20-22:

- *C_free*: the trunk and head (points along every bone that is not a limb's, taken
  ``CLEAR`` thick) carried with the root are not inside or against the environment
  where the source was not (the paper tests a box about the head and torso);
- *C_keep*: every contact still held lies inside its limb's workspace
  (``workspace``) placed at the moved limb root and turned with the body;
- *C_rep*: every invalid contact's limb workspace holds a point of a surface it
  can stand on (samples of the surfaces near the contact, oriented like it).

A state is the root's offset from the adapted trajectory and a turn about the
vertical (``YAW_MAX``); the tree grows forward in time from the first frame of the
window, its samples drawn around the adapted trajectory (the paper's bias) and,
one time in ``GOAL_BIAS``, at the window's end; an edge keeps the offset's speed
within ``SPEED`` body heights per frame and is checked on every frame it spans.
The window's ends join the adapted motion (offset 0) unless they are the clip's.
The path found is shortened (shortcuts between its nodes) and smoothed when the
smoothed path is still valid. Seeded, with a time budget; no path within it:
``None`` (reported ``unresolved``, reason ``no root path``).

Before the tree (product decisions, docs/how-it-works/departures.md), two searches by dynamic
programming that find what a person does where the tree often runs out of time on a real
walk's windows of four to eight seconds: the shallowest duck straight down (``_ducked``), then
the narrowest step aside, square to the way the hips go (``_sidestepped``) or, where that way
turns round at the obstacle, on a level grid (``_detoured``), with the arms clear as well as
the trunk when they can be. The tree never lifts the body (a lifted body stretches its legs off
the ground).

§7.3 (``root_pins``): the trunk is pinned where the plan carries it and the contacts
still held at their places; the solver bends the limbs in between (the paper's
per-limb IK), and contacts still invalid then go through re-positioning again. Where the plan
moves the body aside, the feet step aside with it (``step_aside``: each stance moved level, held
still, where the ground goes on at its height; reported re-positioned, "stepped aside") and
the free arms are carried with the body.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import binary_dilation, gaussian_filter1d, label

from ..geometry.proximity import Collider
from .balance import bone_samples
from .workspace import _rot

#: Largest turn (radians) of the body about the vertical.
YAW_MAX = np.radians(30.0)
#: Largest change of the root offset, body heights per second (0.53 m/s for a 1.75 m body:
#: a walk ducks 30 cm in 0.6 s), and of the turn, radians per second.
SPEED = 0.3
YAW_SPEED = np.radians(45.0)
#: One sample in this many is the goal; the latest this many new nodes try to join it.
GOAL_BIAS = 4
GOAL_TRIES = 4
#: Nodes this many frames or fewer from the window's end try to join it straight away.
GOAL_FRAMES = 24
#: Frames an edge spans at most.
EDGE_FRAMES = 6
#: Frames added before and after the invalid phases, doubled while no path is found up to PAD_MAX.
PAD = 12
PAD_MAX = 48
#: Where along each trunk bone C_free is tested (the bones of a trunk are 10-25 cm: one through
#: a 10 cm slab has a sample inside it).
TRUNK_SAMPLES = (0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0)
#: The trunk is taken as this thick about its bones (body heights: 9 cm for 1.75 m); with
#: samples at most 8 cm apart, a bone through a surface has one within it.
CLEAR = 0.05
#: C_free is tested at the centres of voxels this many body heights wide (1.8 cm for a 1.75 m
#: body: within the collision margin of 0.02).
VOXEL = 0.01
#: A foot in swing up to this many body heights above where its ankle stands does not go down
#: with a duck, one twice as high goes down in full (``_legs_by_ik``).
SWING_HEIGHT = 0.1
#: A swinging leg is kept this many body heights off a wall it newly comes near (``_swing_wider``),
#: the shift eased over ``SWING_EASE`` frames either side, in up to ``SWING_ROUNDS`` rounds.
SWING_CLEAR = 0.02
SWING_EASE = 4
SWING_ROUNDS = 3
#: Frames (Gaussian sigma) over which what a plan carries is steadied (``_steadied``).
STEADY_SIGMA = 2.0
#: Frames (a Gaussian's sigma) over which the knees' bend hint is smoothed (``_legs_by_ik``).
KNEE_SMOOTH = 3.0
#: The duck (``_ducked``): depths this many body heights apart (the planner's speed a frame at
#: 30 fps), down to DUCK_MAX (0.79 m for a 1.75 m body: a walk crouched as low as its legs let it).
DUCK_STEP = 0.01
DUCK_MAX = 0.45
#: What a change of depth by one step costs against the total depth (whose unit is a frame held
#: one step deeper: 0.2 is twenty of them): a duck holds its depth rather than bob with every frame's clearance (a straight leg
#: turns a 1.3 cm bob of the hips into a 5 cm swing of the knee).
DUCK_CHANGE = 0.2
#: How deep (body heights) a trunk joint may be inside a surface before ``trunk_collisions``
#: counts it (1.75 mm for a 1.75 m body; at 9 mm a head 5 mm up into a slab passed).
TRUNK_MARGIN = 0.001
#: Surface samples per invalid contact kept for the C_rep test.
REP_SAMPLES = 160
#: A stance carried aside by a plan less than this many body heights (``step_aside``) stays where it is.
ASIDE_MIN = 0.01
#: The step aside (``_sidestepped``): offsets up to this many body heights either side (0.61 m for
#: a 1.75 m body: round a post as wide as the shoulders).
ASIDE_MAX = 0.35
#: Frames (a Gaussian's sigma) over which the way the hips go is smoothed for the step aside (a
#: stride's sway and a pelvis's turn from step to step are not a change of way).
SIDE_SMOOTH = 15.0
#: Rounds of ``_sidestepped``: the cheapest free way, tested whole, its failing frames' states
#: tested, again.
SIDE_ROUNDS = 12
#: The grid of ``_detoured``, body heights (7 cm for a 1.75 m body).
DETOUR_CELL = 0.04


@dataclass
class RootWindow:
    """A stretch of frames ``start..end`` where the trunk went through a surface of the edited
    environment (``trunk_collisions``) or contacts stayed invalid, and what became of it.

    status : ``"replanned"`` (the root's new path is in the motion), ``"no root path"`` (the
        planner found none within its budget), ``"not kept"`` (a path was found but the motion
        it gave was not better: more phases unresolved, more frames through, or a jump) or
        ``"not replanned"`` (re-positioning or replanning was off).
    through : (n,) frames of the window where the trunk still goes through a surface.
    """

    start: int
    end: int
    status: str
    through: np.ndarray


def runs(mask):
    """(first, last) of every run of True in ``mask`` (F,)."""
    edges = np.flatnonzero(np.diff(np.r_[0, np.asarray(mask, np.int8), 0]))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]


@dataclass
class RootPlan:
    """A planned root over ``frames``: offset (n,3) from the adapted root and yaw (n,)."""

    frames: np.ndarray
    offset: np.ndarray
    yaw: np.ndarray
    nodes: int                       # tree size when the path was found
    seconds: float
    #: The foot contacts carried aside with the body (``step_aside``): phase index -> (its place
    #: on its middle frame (3,), the triangle under it), filled by ``replan_windows``.
    aside: dict = field(default_factory=dict)


def _yaw_rot(psi, up):
    """(n,3,3) rotations by ``psi`` (n,) about the unit axis ``up``."""
    return _rot(np.asarray(up, float), np.asarray(psi, float))


class _VoxelDistance:
    """Signed distance to a static mesh at the centres of voxels ``size`` wide, computed the first
    time a voxel is asked for and kept: the planner's states overlap, and most of its queries
    hit voxels it asked for before (a proximity query costs some 20 µs a point)."""

    def __init__(self, collider, size):
        self.collider, self.size = collider, float(size)
        self.keys = np.zeros(0, np.int64)
        self.values = np.zeros(0)

    def __call__(self, points):
        cell = np.floor(points / self.size).astype(np.int64)
        key = ((cell[:, 0] + (1 << 20)) << 42) | ((cell[:, 1] + (1 << 20)) << 21) | (cell[:, 2] + (1 << 20))
        uniq, inverse = np.unique(key, return_inverse=True)
        at = np.searchsorted(self.keys, uniq)
        known = (at < len(self.keys)) & (self.keys[np.minimum(at, len(self.keys) - 1)] == uniq) if len(self.keys) \
            else np.zeros(len(uniq), bool)
        vals = np.empty(len(uniq))
        vals[known] = self.values[at[known]]
        new = np.flatnonzero(~known)
        if new.size:
            first = np.zeros(len(uniq), np.int64)
            first[inverse] = np.arange(len(key))
            centres = (cell[first[new]] + 0.5) * self.size
            vals[new] = self.collider.closest(centres)[0]
            keys, values = np.r_[self.keys, uniq[new]], np.r_[self.values, vals[new]]
            order = np.argsort(keys, kind="stable")
            self.keys, self.values = keys[order], values[order]
        return vals[inverse]


class Reachability:
    """The test of Eq. 20-22 at frames of one window, many states at once.

    trunk_bones : (B,) bone indices (``bone_samples`` order, by child joint) of the trunk;
    keep : list of (limb, frames (n,), points (n,3)) of contacts held;
    rep : list of (limb, frames (n,), samples (S,3)) of contacts to re-position;
    workspace_of : callable limb -> ``workspace.Workspace``; frames_of : ``BodyFrames``.
    """

    def __init__(self, skeleton, positions, source, mesh, bind_mesh, body_height, root, trunk_bones,
                 keep, rep, workspace_of, body, up, margin, arm_bones=()):
        self.sk, self.pos, self.root, self.up = skeleton, positions, root, np.asarray(up, float)
        self.H, self.margin = body_height, margin
        self.collider = Collider(mesh.vertices, mesh.normals(0), mesh.triangles, mesh.valid, 0.3 * body_height)
        self.distance = _VoxelDistance(self.collider, VOXEL * body_height)
        self.clear = CLEAR * body_height
        samples_now = bone_samples(skeleton, positions, TRUNK_SAMPLES)          # (F,K,3)
        samples_then = bone_samples(skeleton, source, TRUNK_SAMPLES)
        then = Collider(bind_mesh.vertices, bind_mesh.normals(0), bind_mesh.triangles, bind_mesh.valid,
                        0.3 * body_height)

        def were_inside(mask):
            src = samples_then[:, mask]
            if not mask.any():
                return np.zeros(src.shape[:2], bool)
            return self._hit(then.closest(src.reshape(-1, 3))[0].reshape(src.shape[:2]))

        B = int(np.sum(skeleton.parents >= 0))
        k_of = np.tile(np.arange(B), len(samples_now[0]) // B)
        self.mask = np.isin(k_of, trunk_bones)
        self.trunk = samples_now[:, self.mask]                                   # (F,P,3)
        self.was_inside = were_inside(self.mask)
        # The arms, tested only when ``with_arms`` (the step aside and the random tree): a body
        # stepping round a post keeps its swinging arms clear of it too; a duck leaves a raised arm
        # to ``avoidance``.
        arms = np.isin(k_of, arm_bones)
        self.arms = samples_now[:, arms]
        self.arms_were_inside = were_inside(arms)
        self.with_arms = False
        self.keep, self.rep = keep, rep
        self.workspace_of, self.body = workspace_of, body
        self.rot = {False: body.rotations(positions), True: body.rotations(positions, upper=True)}   # (F,3,3)

    def holding(self, keep, rep, workspace_of):
        """This test with the contacts ``keep`` and ``rep`` (their limbs' workspaces from
        ``workspace_of``): a copy sharing the samples, the body's frames and the distances (the
        planners of a clip's windows and pads ask for the same voxels again), made once a clip."""
        out = copy.copy(self)
        out.keep, out.rep, out.workspace_of, out.with_arms = keep, rep, workspace_of, False
        return out

    def _hit(self, sd):
        """Samples inside the environment or within ``CLEAR`` of a surface (the trunk's
        thickness about its bones; a bone through a thin slab has a sample that near it)."""
        return (sd < -self.margin) | (np.abs(sd) < self.clear)

    def _moved(self, f, o, R, pts):
        """Points (n,K,3) of frames f (n,) carried by offset o (n,3) and turn R (n,3,3) about the root."""
        r = self.pos[f, self.root][:, None]
        return r + np.einsum("nij,nkj->nki", R, pts - r) + o[:, None]

    def _level(self, f, o, R, pts):
        """Points (n,3) of frames f (n,) carried by the level part of offset o (n,3) and the turn R
        (n,3,3) about the root: a foot stepping aside with the body stays at its height."""
        level = o - np.outer(o @ self.up, self.up)
        r = self.pos[f, self.root]
        return r + np.einsum("nij,nj->ni", R, pts - r) + level

    def free(self, f, o, psi):
        """(n,) whether states at frames f (n,) are in C_free (the trunk clear), the cheap test."""
        f = np.asarray(f, np.int64)
        R = _yaw_rot(psi, self.up)
        pts = self._moved(f, o, R, self.trunk[f])
        sd = self.distance(pts.reshape(-1, 3)).reshape(pts.shape[:2])
        ok = ~np.any(self._hit(sd) & ~self.was_inside[f], axis=1)
        if self.with_arms and self.arms.shape[1] and ok.any():
            idx = np.flatnonzero(ok)
            pts = self._moved(f[idx], o[idx], R[idx], self.arms[f[idx]])
            sd = self.distance(pts.reshape(-1, 3)).reshape(pts.shape[:2])
            ok[idx] = ~np.any(self._hit(sd) & ~self.arms_were_inside[f[idx]], axis=1)
        return ok

    def valid(self, f, o, psi):
        """(n,) whether states (offset o (n,3), yaw psi (n,)) at frames f (n,) are in C_reach."""
        f = np.asarray(f, np.int64)
        R = _yaw_rot(psi, self.up)
        ok = self.free(f, o, psi)
        body = {k: np.einsum("nij,nkj->nik", r[f], R) for k, r in self.rot.items()}   # R_body @ R^T
        for limb, frames, points, *carry in self.keep:
            hit = np.searchsorted(frames, f)
            on = (hit < len(frames)) & (frames[np.minimum(hit, len(frames) - 1)] == f) & ok
            if not on.any():
                continue
            idx = np.flatnonzero(on)
            if limb is None:                             # a seat held: the pelvis stays on it
                ok[idx] &= np.linalg.norm(self.pos[f[idx], self.root] + o[idx] - points[hit[idx]], axis=1) \
                    <= 2.0 * self.margin
                continue
            ws = self.workspace_of(limb)
            at = self._moved(f[idx], o[idx], R[idx], self.pos[f[idx], limb.root][:, None])[:, 0]
            held = points[hit[idx]]
            good = ws.excess(np.einsum("nij,nj->ni", body[ws.upper][idx], held - at)) <= self.margin
            if carry and carry[0] and not good.all():
                # A foot on the ground may step aside with the body (``step_aside``): carried by the
                # state's level offset and turn, where the ground goes on at the height it stands.
                n = np.flatnonzero(~good)
                moved = self._level(f[idx[n]], o[idx[n]], R[idx[n]], held[n])
                local = np.einsum("nij,nj->ni", body[ws.upper][idx[n]], moved - at[n])
                good[n] = (ws.excess(local) <= self.margin) & \
                    (np.abs(self.distance(moved) - self.distance(held[n])) <= self.margin)
            ok[idx] &= good
        for limb, frames, samples, *carry in self.rep:
            if limb is None:                             # a seat gone: the plan does not look for another
                continue
            on = (f >= frames[0]) & (f <= frames[-1]) & ok
            if not on.any():
                continue
            idx = np.flatnonzero(on)
            ws = self.workspace_of(limb)
            at = self._moved(f[idx], o[idx], R[idx], self.pos[f[idx], limb.root][:, None])[:, 0]
            local = np.einsum("nij,nsj->nsi", body[ws.upper][idx], samples[None] - at[:, None])
            good = ws.excess(local).min(axis=1) <= self.margin
            if carry and carry[0] is not None and not good.all():
                # A foot whose place the obstacle took may step aside with the body onto the ground
                # beside it (``step_aside``), its sole's clearance over a surface there.
                n = np.flatnonzero(~good)
                moved = self._level(f[idx[n]], o[idx[n]], R[idx[n]], np.broadcast_to(samples[0], (len(n), 3)))
                local = np.einsum("nij,nj->ni", body[ws.upper][idx[n]], moved - at[n])
                good[n] = (ws.excess(local) <= self.margin) & \
                    (np.abs(self.distance(moved) - carry[0]) <= self.margin)
            ok[idx] &= good
        return ok


def plan_root(reach, first, last, clip_frames, *, fps=30.0, seed=0, budget=1.0, max_nodes=4000, batch=48,
              arms_optional=True):
    """A root plan from ``first`` to ``last`` (frames) in ``reach`` (``Reachability``): a RootPlan
    over first..last, or None when none was found within ``budget`` seconds.

    Tried in turn: the shallowest duck (``_ducked``), the narrowest step aside (``_sidestepped``,
    else ``_detoured``) with the arms clear and, with ``arms_optional``, with the trunk alone
    clear, then an RRT (the paper's), with the arms clear. The tree grows ``batch`` edges per
    round, all checked in one call (a proximity query costs the same for one point as for a few
    hundred)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    H = reach.H
    vmax, wmax = SPEED * H / fps, YAW_SPEED / fps
    free_start, free_end = first == 0, last == clip_frames - 1
    duck = _ducked(reach, first, last, free_start, free_end, vmax)
    if duck is not None:
        frames = np.arange(first, last + 1)
        offset, yaw = _smoothed(reach, frames, duck, np.zeros(len(frames)), free_start, free_end, vmax)
        return RootPlan(frames, offset, yaw, 0, time.perf_counter() - t0)
    # A step aside with the arms clear, else with the trunk clear (arms held out wider than any
    # step aside: ``avoidance`` keeps them out of what they would pass through).
    frames = np.arange(first, last + 1)
    for arms in (True, False) if arms_optional else (True,):
        reach.with_arms = arms
        aside = _sidestepped(reach, first, last, free_start, free_end, vmax, _sideways(reach, frames))
        if aside is None:
            aside = _detoured(reach, first, last, free_start, free_end, vmax)
        if aside is not None:
            offset, yaw = _smoothed(reach, frames, aside, np.zeros(len(frames)), free_start, free_end, vmax)
            return RootPlan(frames, offset, yaw, 0, time.perf_counter() - t0)
    reach.with_arms = True
    sigma = np.array([0.15, 0.15, 0.15]) * H
    # Roots: the adapted trajectory at the first frame, or any valid state there at the clip's start.
    if reach.valid([first], np.zeros((1, 3)), np.zeros(1))[0]:
        T, O, Y = np.array([first]), np.zeros((1, 3)), np.zeros(1)
    elif free_start:                                   # the clip starts in the obstacle: the nearest valid state
        cand_o = rng.normal(size=(200, 3)) * sigma
        cand_y = rng.uniform(-YAW_MAX, YAW_MAX, 200) * 0.3
        ok = np.flatnonzero(reach.valid(np.full(200, first), cand_o, cand_y))
        if not ok.size:
            return None
        best = ok[np.argmin(np.linalg.norm(cand_o[ok], axis=1) / H + 0.3 * np.abs(cand_y[ok]))]
        T, O, Y = np.array([first]), cand_o[best][None], cand_y[best][None]
    else:
        return None
    parent = np.full(len(T), -1)

    def edges(ta, oa, ya, tb, ob, yb):
        """(K,) whether each straight edge is within the speed limits and valid on every frame
        it spans (all checked in one call)."""
        n = tb - ta
        ok = (n > 0) & (np.linalg.norm(ob - oa, axis=1) <= vmax * n + 1e-12) & (np.abs(yb - ya) <= wmax * n + 1e-12)
        idx = np.flatnonzero(ok)
        if not idx.size:
            return ok
        k = np.repeat(idx, n[idx])
        step = np.concatenate([np.arange(1, m + 1) for m in n[idx]])
        s = step / n[k]
        good = reach.valid(ta[k] + step, oa[k] + s[:, None] * (ob[k] - oa[k]), ya[k] + s * (yb[k] - ya[k]))
        bad = np.unique(k[~good])
        ok[bad] = False
        return ok

    def to_goal(idx):
        """(index, goal state) of the first node of ``idx`` that joins the window's end, or None.
        Of the nodes within ``GOAL_FRAMES`` of the end, the ``GOAL_TRIES`` latest are tried."""
        idx = np.asarray(idx)
        idx = idx[last - T[idx] <= GOAL_FRAMES][-GOAL_TRIES:]
        if not len(idx):
            return None
        ta, oa, ya = T[idx], O[idx], Y[idx]
        if free_end:
            tb, ob, yb = np.full(len(idx), last), oa, ya
        else:
            tb, ob, yb = np.full(len(idx), last), np.zeros_like(oa), np.zeros_like(ya)
        at_end = ta == last
        ok = at_end | edges(ta, oa, ya, tb, ob, yb)
        if free_end is False:
            ok &= ~at_end | ((np.linalg.norm(oa, axis=1) < 1e-12) & (np.abs(ya) < 1e-12))
        hit = np.flatnonzero(ok)
        if not hit.size:
            return None
        i = int(idx[hit[0]])
        return i, (last, ob[hit[0]], float(yb[hit[0]]))

    # Only nodes whose offset the speed limit can still bring back are worth joining to the end.
    def joinable(idx):
        if free_end:
            return idx
        room = last - T[idx]
        return idx[(np.linalg.norm(O[idx], axis=1) <= vmax * room) & (np.abs(Y[idx]) <= wmax * room)]

    found = to_goal(joinable(np.arange(len(T))))
    while found is None and time.perf_counter() - t0 < budget and len(T) < max_nodes:
        # Samples: the goal; around the adapted trajectory (the paper's bias), at any frame or
        # just behind the tree's frontier in time (where a descent must start earlier).
        kind = rng.integers(GOAL_BIAS, size=batch)
        goal = kind == 0
        front = int(T.max())
        near_front = np.clip(front + 1 - rng.integers(0, 4 * EDGE_FRAMES, size=batch), first + 1, last)
        ts = np.where(goal, last, np.where(kind == 1, near_front, rng.integers(first + 1, last + 1, size=batch)))
        grow = min(1.0 + len(T) / 400.0, 1.5)                 # widen the search as the tree grows
        os_ = np.where(goal[:, None], 0.0, rng.normal(size=(batch, 3)) * sigma * grow)
        # Never up: a body lifted off its walk stretches its legs off the ground (a post stepped
        # round with the hips 9 cm higher lifted the planted heel 4 cm); down is a duck.
        os_ -= np.maximum(os_ @ reach.up, 0.0)[:, None] * reach.up
        ys = np.where(goal, 0.0, np.clip(rng.normal(size=batch) * YAW_MAX * 0.3 * grow, -YAW_MAX, YAW_MAX))
        # Nearest earlier node of each sample.
        d = (np.linalg.norm(O[None] - os_[:, None], axis=-1) / H + 0.3 * np.abs(Y[None] - ys[:, None])
             + 0.01 * (ts[:, None] - T[None]))
        d[T[None] >= ts[:, None]] = np.inf
        keep = np.isfinite(d).any(axis=1)
        if not keep.any():
            continue
        j = np.argmin(d[keep], axis=1)
        ts, os_, ys = ts[keep], os_[keep], ys[keep]
        ta, oa, ya = T[j], O[j], Y[j]
        tb = np.minimum(ts, ta + EDGE_FRAMES)
        n = tb - ta
        step = os_ - oa
        norm = np.linalg.norm(step, axis=1)
        ob = oa + step * np.minimum(1.0, vmax * n / np.maximum(norm, 1e-12))[:, None]
        yb = ya + np.clip(ys - ya, -wmax * n, wmax * n)
        ok = edges(ta, oa, ya, tb, ob, yb)
        if not ok.any():
            continue
        new = np.arange(len(T), len(T) + int(ok.sum()))
        T, O, Y = np.r_[T, tb[ok]], np.vstack([O, ob[ok]]), np.r_[Y, yb[ok]]
        parent = np.r_[parent, j[ok]]
        found = to_goal(joinable(new))
    if found is None:
        return None
    i, (tg, og, yg) = found
    path = [(tg, og, yg)]
    while i >= 0:
        path.append((int(T[i]), O[i], float(Y[i])))
        i = int(parent[i])
    path = path[::-1]
    if path[-1][0] == path[-2][0]:
        path.pop(-2)

    def edge(ta, oa, ya, tb, ob, yb):
        return bool(edges(np.array([ta]), oa[None], np.array([ya]), np.array([tb]), ob[None], np.array([yb]))[0])

    path = _shortcut(path, edge, rng)
    frames = np.arange(first, last + 1)
    tp = np.array([p[0] for p in path], float)
    offset = np.stack([np.interp(frames, tp, [p[1][d] for p in path]) for d in range(3)], axis=1)
    yaw = np.interp(frames, tp, [p[2] for p in path])
    offset, yaw = _smoothed(reach, frames, offset, yaw, free_start, free_end, vmax)
    offset, yaw = _tightened(reach, frames, offset, yaw, vmax)
    return RootPlan(frames, offset, yaw, len(T), time.perf_counter() - t0)


def _cheapest(ok, value, step, change, free_start, free_end, zero):
    """The states (n,) index into ``value`` (K,) of the least total |value| plus ``change`` per step
    of state, by dynamic programming over ``ok`` (n,K) (every frame's state allowed), moving at
    most ``step`` states a frame, starting and ending at state ``zero`` unless ``free_start`` /
    ``free_end``; None when no sequence is allowed."""
    n, K = ok.shape
    inf = np.inf
    value = np.abs(value)
    cost = np.where(ok[0], value, inf)
    if not free_start:
        cost[np.arange(K) != zero] = inf
    back = np.zeros((n, K), np.int64)
    for f in range(1, n):
        best, arg = np.full(K, inf), np.zeros(K, np.int64)
        for d in range(-step, step + 1):                # from state k + d to state k
            src = np.arange(K) + d
            valid = (src >= 0) & (src < K)
            c = np.full(K, inf)
            c[valid] = cost[src[valid]] + change * abs(d)
            better = c < best
            best[better], arg[better] = c[better], src[better]
        back[f] = arg
        cost = best + np.where(ok[f], value, inf)
    return _backtrack(cost, back, free_end, zero)


def _backtrack(cost, back, free_end, zero):
    """The cheapest sequence of states (n,) from the last step's ``cost`` (K,) and the best
    predecessors ``back`` (n,K), ending at ``zero`` unless ``free_end``; None when none is finite."""
    cost = cost.copy()
    if not free_end:
        cost[np.arange(len(cost)) != zero] = np.inf
    if not np.isfinite(cost.min()):
        return None
    n = len(back)
    pick = np.empty(n, np.int64)
    pick[-1] = int(np.argmin(cost))
    for f in range(n - 1, 0, -1):
        pick[f - 1] = back[f, pick[f]]
    return pick


def _sidestepped(reach, first, last, free_start, free_end, vmax, side):
    """The narrowest step aside over first..last (a post on the path, too tall to duck under): a
    level offset along ``side`` (n,3), by ``_cheapest`` over offsets ``DUCK_STEP`` body heights
    apart up to ``ASIDE_MAX`` either way, every frame valid, the arms clear too when
    ``Reachability.with_arms``. (n,3) offsets, or None when none passes or they move faster than
    1.5 times the planner's speed (``side`` turning fast; then ``_detoured``). Before the random
    tree: on a real walk the window round a post is four to six seconds long, and the tree found
    no way within its budget where a step aside passed."""
    H = reach.H
    frames = np.arange(first, last + 1)
    n = len(frames)
    M = int(round(ASIDE_MAX / DUCK_STEP))
    value = np.arange(-M, M + 1) * DUCK_STEP * H
    K = len(value)
    step = max(1, int(np.floor(vmax / (DUCK_STEP * H) + 1e-9)))
    ff = np.repeat(frames, K)
    off = np.tile(value, n)[:, None] * np.repeat(side, K, axis=0)
    ok = reach.free(ff, off, np.zeros(len(ff))).reshape(n, K)
    if not ok.any(axis=1).all():
        return None
    # The whole test (the workspaces': 50x C_free's) only on the frames where the cheapest way
    # through the free states fails it, then the cheapest way again, until one passes.
    tested = np.zeros(n, bool)
    for _ in range(SIDE_ROUNDS):
        pick = _cheapest(ok, value / H, step, DUCK_CHANGE, free_start, free_end, M)
        if pick is None:
            return None
        bad = ~reach.valid(frames, value[pick][:, None] * side, np.zeros(n))
        if not bad.any():
            break
        new = np.flatnonzero(bad & ~tested)
        if not new.size:                 # tested frames cannot fail: their states all passed
            return None
        f_i, k_i = np.nonzero(ok[new])
        ok[new[f_i], k_i] = reach.valid(frames[new[f_i]], value[k_i][:, None] * side[new[f_i]], np.zeros(len(f_i)))
        tested[new] = True
    else:
        return None
    offset = value[pick][:, None] * side
    # Square to a way that turns, the offset turns with it: no faster than the planner's speed.
    if n > 1 and np.linalg.norm(np.diff(offset, axis=0), axis=1).max() > 1.5 * vmax + 1e-12:
        return None
    return offset


def _detoured(reach, first, last, free_start, free_end, vmax):
    """The least detour over first..last where no step square to the way passes (a walk that turns
    round at the post, or curls round it): a level offset on a grid ``DETOUR_CELL`` body heights
    wide up to ``ASIDE_MAX`` from the adapted root, chosen on every ``k``-th frame (``k`` frames to
    cross a cell at the planner's speed) by dynamic programming as ``_cheapest``: each key frame's
    state clear (C_free), a move of at most one cell (sideways or diagonal) from one key frame to
    the next, the window's ends at zero unless they are the clip's; the least total offset plus
    ``DUCK_CHANGE`` per cell moved. The frames between key frames are interpolated; the whole way is
    then tested on every frame (C_reach), and a key frame's states next to a frame that fails it
    are tested whole before the next round. (n,3) offsets, or None."""
    H, up = reach.H, reach.up
    frames = np.arange(first, last + 1)
    n = len(frames)
    cell = DETOUR_CELL * H
    k = max(1, int(np.ceil(cell / vmax - 1e-9)))
    keys = np.unique(np.r_[np.arange(0, n, k), n - 1])
    R = int(round(ASIDE_MAX / DETOUR_CELL))
    e1 = np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(up, e1)
    ii, jj = np.meshgrid(np.arange(-R, R + 1), np.arange(-R, R + 1), indexing="ij")
    ii, jj = ii.ravel(), jj.ravel()
    grid = (ii[:, None] * e1 + jj[:, None] * e2) * cell                       # (S,3)
    S, m = len(grid), len(keys)
    zero = int(np.flatnonzero((ii == 0) & (jj == 0))[0])
    # C_free on every other frame (the arms swing several centimetres a frame): a key frame's
    # state is clear when it is on those up to the key frames either side (the way between two
    # key frames lies between two states clear there; the whole way is tested on every frame below).
    every = np.arange(0, n, 2)
    ff = np.repeat(frames[every], S)
    clear = reach.free(ff, np.tile(grid, (len(every), 1)), np.zeros(len(ff))).reshape(len(every), S)
    ok = np.stack([clear[(every >= keys[t] - k) & (every <= keys[t] + k)].all(axis=0) for t in range(m)])
    if not ok.any(axis=1).all():
        return None
    size = 2 * R + 1
    moves = [(di, dj) for di in (-1, 0, 1) for dj in (-1, 0, 1)]
    radius = np.linalg.norm(grid, axis=1) / H
    tested = np.zeros(m, bool)
    for _ in range(SIDE_ROUNDS):
        inf = np.inf
        cost = np.where(ok[0], radius, inf)
        if not free_start:
            cost[np.arange(S) != zero] = inf
        back = np.zeros((m, S), np.int64)
        for t in range(1, m):
            best = np.full((size, size), inf)
            arg = np.zeros((size, size), np.int64)
            c2 = cost.reshape(size, size)
            idx = np.arange(S).reshape(size, size)
            for di, dj in moves:                      # from (i - di, j - dj) to (i, j)
                src = np.full((size, size), inf)
                sid = np.zeros((size, size), np.int64)
                a0, a1 = max(di, 0), size + min(di, 0)
                b0, b1 = max(dj, 0), size + min(dj, 0)
                src[a0:a1, b0:b1] = c2[a0 - di:a1 - di, b0 - dj:b1 - dj] + DUCK_CHANGE * (abs(di) + abs(dj) > 0)
                sid[a0:a1, b0:b1] = idx[a0 - di:a1 - di, b0 - dj:b1 - dj]
                better = src < best
                best[better], arg[better] = src[better], sid[better]
            back[t] = arg.ravel()
            cost = best.ravel() + np.where(ok[t], radius, inf)
        pick = _backtrack(cost, back, free_end, zero)
        if pick is None:
            return None
        offset = np.stack([np.interp(np.arange(n), keys, grid[pick, d]) for d in range(3)], axis=1)
        bad = ~reach.valid(frames, offset, np.zeros(n))
        if not bad.any():
            return offset
        # The key frames on either side of each failing frame, tested whole.
        at = np.searchsorted(keys, np.flatnonzero(bad))
        near = np.unique(np.r_[at - 1, at])
        near = near[(near >= 0) & (near < m)]
        new = near[~tested[near]]
        if not new.size:
            # Both ends pass but a frame between them does not (a foot's stance carried across
            # it): the way is barred there, the next round goes round it.
            ok[near, pick[near]] = False
            continue
        t_i, s_i = np.nonzero(ok[new])
        ok[new[t_i], s_i] = reach.valid(frames[keys[new[t_i]]], grid[s_i], np.zeros(len(t_i)))
        tested[new] = True
    return None


def _sideways(reach, frames, sigma=SIDE_SMOOTH):
    """(n,3) level unit vectors to the left of the way the hips go on each of ``frames`` (their
    velocity, smoothed over a Gaussian of ``sigma`` frames; the way the body faces, smoothed,
    where they barely move: walking in place)."""
    root = reach.pos[:, reach.root]
    up = reach.up
    way = gaussian_filter1d(np.gradient(root, axis=0), sigma, axis=0, mode="nearest")[frames]
    face = gaussian_filter1d(reach.rot[False][:, :, 0], sigma, axis=0, mode="nearest")[frames]
    way -= np.outer(way @ up, up)
    face -= np.outer(face @ up, up)
    speed = np.linalg.norm(way, axis=1)
    slow = speed < 0.002 * reach.H                      # 0.1 m/s for a 1.75 m body at 30 fps
    way[slow] = face[slow]
    way /= np.maximum(np.linalg.norm(way, axis=1), 1e-300)[:, None]
    return np.cross(up, way)


def _ducked(reach, first, last, free_start, free_end, vmax):
    """The shallowest duck over first..last: an offset straight down the body's up on each frame,
    found by dynamic programming over depths ``DUCK_STEP`` body heights apart down to
    ``DUCK_MAX``: every frame's state valid, the depth changing at most the planner's speed
    from one frame to the next, the window's ends at depth 0 unless they are the clip's; the
    least total depth plus ``DUCK_CHANGE`` per change. (n,3) offsets, or None when no duck
    passes (then the random tree looks for a way around). Tried before the tree: a long window
    (a real walk under a slab for eight seconds) has a duck the tree does not find within its
    budget, and where a duck passes it is what a person does."""
    H = reach.H
    frames = np.arange(first, last + 1)
    n = len(frames)
    depth = np.arange(0.0, DUCK_MAX * H + 1e-12, DUCK_STEP * H)
    K = len(depth)
    step = max(1, int(np.floor(vmax / (DUCK_STEP * H) + 1e-9)))
    # C_free first (cheap), then the whole test only at depths a duck can need: no deeper than
    # the deepest frame's shallowest clear depth, two steps more (the workspaces' test costs 50x).
    ff = np.repeat(frames, K)
    off = -np.tile(depth, n)[:, None] * reach.up[None]
    ok = reach.free(ff, off, np.zeros(len(ff))).reshape(n, K)
    if not ok.any(axis=1).all():
        return None
    K = min(K, int(np.argmax(ok, axis=1).max()) + 3)
    depth, ok = depth[:K], ok[:, :K].copy()
    f_i, k_i = np.nonzero(ok)
    ok[f_i, k_i] = reach.valid(frames[f_i], -depth[k_i][:, None] * reach.up[None], np.zeros(len(f_i)))
    pick = _cheapest(ok, depth / H, step, DUCK_CHANGE, free_start, free_end, 0)
    return None if pick is None else -depth[pick][:, None] * reach.up[None]


def _shortcut(path, edge, rng, attempts=40):
    """The path with straight edges between non-adjacent nodes where they are valid."""
    path = list(path)
    for _ in range(attempts):
        if len(path) < 3:
            break
        i, j = sorted(rng.choice(len(path), 2, replace=False))
        if j - i < 2:
            continue
        (ta, oa, ya), (tb, ob, yb) = path[i], path[j]
        if edge(ta, oa, ya, tb, ob, yb):
            path = path[:i + 1] + path[j:]
    return path


def _smoothed(reach, frames, offset, yaw, free_start, free_end, vmax, sigma=4.0):
    """Offsets and yaw filtered by a Gaussian of ``sigma`` frames (ends kept at the adapted
    trajectory unless they are the clip's) when every frame stays valid and the offset within
    1.5 times the planner's speed; else unchanged."""
    n = len(frames)
    if n < 5:
        return offset, yaw
    k = np.arange(-int(3 * sigma), int(3 * sigma) + 1)
    w = np.exp(-0.5 * (k / sigma) ** 2)
    w /= w.sum()
    pad = len(k) // 2

    def smooth(x):
        xp = np.concatenate([np.repeat(x[:1], pad, 0), x, np.repeat(x[-1:], pad, 0)])
        return np.stack([np.convolve(xp[:, d], w, mode="valid") for d in range(xp.shape[1])], axis=1)

    so, sy = smooth(offset), smooth(yaw[:, None])[:, 0]
    ramp = np.ones(n)
    if not free_start:
        ramp[:pad] = np.linspace(0.0, 1.0, pad + 1)[:pad] if pad else ramp[:pad]
    if not free_end:
        ramp[n - pad:] = np.minimum(ramp[n - pad:], np.linspace(1.0, 0.0, pad + 1)[1:])
    so, sy = so * ramp[:, None], sy * ramp
    fast = np.linalg.norm(np.diff(so, axis=0), axis=1).max() > 1.5 * vmax + 1e-12
    if not fast and reach.valid(frames, so, sy).all():
        return so, sy
    return offset, yaw


def _tightened(reach, frames, offset, yaw, vmax, levels=11):
    """The plan pulled back towards the adapted trajectory: each frame takes a share λ of its
    offset and yaw from ``levels`` steps in [0, 1], the smallest total Σλ (plus a little
    for changing λ) under three rules, by dynamic programming over frames: the state is valid,
    the offset moves at most 1.5 times the planner's speed from one frame to the next, and
    λ = 1 (the plan itself) is always allowed. An RRT's path wanders wherever it was free to;
    the walk should duck only where it must, and no deeper."""
    n = len(frames)
    lam = np.linspace(0.0, 1.0, levels)
    ok = np.stack([reach.valid(frames, l * offset, l * yaw) for l in lam[:-1]] + [np.ones(n, bool)], axis=1)
    cost = np.where(ok[0], lam, np.inf)
    back = np.zeros((n, levels), np.int64)
    for f in range(1, n):
        step = np.linalg.norm(lam[:, None, None] * offset[f] - lam[None, :, None] * offset[f - 1], axis=-1)
        trans = cost[None, :] + 0.05 * np.abs(lam[:, None] - lam[None, :]) + np.where(step <= 1.5 * vmax + 1e-12,
                                                                                       0.0, np.inf)
        back[f] = np.argmin(trans, axis=1)
        cost = trans[np.arange(levels), back[f]] + np.where(ok[f], lam, np.inf)
    if not np.isfinite(cost.min()):
        return offset, yaw
    pick = np.empty(n, np.int64)
    pick[-1] = int(np.argmin(cost))
    for f in range(n - 1, 0, -1):
        pick[f - 1] = back[f, pick[f]]
    share = lam[pick]
    return share[:, None] * offset, share * yaw


def root_transforms(plan, positions, root, up):
    """(n,J,3) the poses of ``plan.frames`` with everything turned by the plan's yaw about the
    root and moved by its offset."""
    f = plan.frames
    R = _yaw_rot(plan.yaw, np.asarray(up, float))
    r = positions[f, root][:, None]
    return r + np.einsum("nij,nkj->nki", R, positions[f] - r) + plan.offset[:, None]


def _steadied(positions, source, frames, sigma=STEADY_SIGMA):
    """(n,J,3) ``positions`` (F,J,3) over ``frames``, their departure from ``source`` smoothed over a
    Gaussian of ``sigma`` frames, eased back to the unsmoothed at the window's ends within the clip
    (where the plan joins the adapted motion). What a plan carries is the motion adapted with the
    obstacle where it was: where the body stood in it, the solver's pushes out of it jerked the
    hips (1.3 cm in a frame on the in-place clip with a post where it stands, against the source's
    0.1), and a near-straight leg carried aside turned that into a 5 cm jump of its knee."""
    F = len(positions)
    d = positions[frames] - source[frames]
    smooth = gaussian_filter1d(d, sigma, axis=0, mode="nearest")
    n = len(frames)
    ramp = np.ones(n)
    edge = int(np.ceil(3 * sigma))
    k = np.arange(n, dtype=float)
    if frames[0] > 0:
        ramp = np.minimum(ramp, k / edge)
    if frames[-1] < F - 1:
        ramp = np.minimum(ramp, (n - 1 - k) / edge)
    ramp = np.clip(ramp, 0.0, 1.0)
    ramp = (ramp * ramp * (3.0 - 2.0 * ramp))[:, None, None]
    return source[frames] + d + ramp * (smooth - d)


def _windows(phases, bad, F, pad=PAD, spans=(), free=None):
    """Merged frame windows (first, last) around the phases ``bad`` and the frame ``spans``
    (first, last), ``pad`` frames wider; with ``free`` (F,), each first widened to the frames
    where the unmoved trunk is clear (``_grown``), then padded, then widened again: the root
    needs the pad's frames to go down before the obstacle and come back up after it, which a
    pad ending under the obstacle does not give."""
    raw = [(phases[i].start, phases[i].end) for i in bad] + [(int(a), int(b)) for a, b in spans]
    if free is not None:
        raw = _grown(raw, free)
    spans = [(max(0, a - pad), min(F - 1, b + pad)) for a, b in raw]
    if free is not None:
        spans = _grown(spans, free)
    spans.sort()
    out = []
    for a, b in spans:
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _grown(windows, free):
    """``windows`` widened until each end is a frame whose unmoved trunk is clear (``free`` (F,)),
    or the clip's end: a plan must leave from and join the adapted motion where it is valid (a
    window cut by its padding inside the obstacle has no path)."""
    F = len(free)
    out = []
    for a, b in windows:
        while a > 0 and not free[a]:
            a -= 1
        while b < F - 1 and not free[b]:
            b += 1
        out.append((a, b))
    return out


def trunk_parts(binding):
    """``(trunk joints, trunk bones)``: every joint that is no limb's below its root (limb roots,
    hips and shoulders, move with the trunk; twist leaves beside a limb are the limb's), and
    the bones (``bone_samples`` order, by child joint) ending at one, the floor's left out."""
    key = ("trunk_parts",)
    if key not in binding._joint_models:
        from .repositioning import ContactError, _limb_joints, find_limb, floor_bones
        from ..skeleton.joints import limb_effectors
        sk = binding.skeleton
        roots = set()
        for e in limb_effectors(sk, binding.motion, binding.body_height).tolist():
            try:
                roots.add(int(find_limb(sk, sk.names[e]).chain[0]))
            except ContactError:
                pass
        limb_joints = _limb_joints(binding) - roots
        trunk = np.array([j for j in range(len(sk)) if j not in limb_joints], np.int64)
        child = np.flatnonzero(sk.parents >= 0)
        bones = np.flatnonzero(np.isin(child, trunk) & ~np.isin(child, list(floor_bones(binding))))
        binding._joint_models[key] = trunk, bones
    return binding._joint_models[key]


def trunk_collisions(binding, mesh, positions):
    """(F,) bool: the frames where a bone of the trunk (hips, spine, neck, head) passes through a
    surface of ``mesh`` (a static environment) or has a joint more than the collision margin
    inside it, where the source's did not at bind time: an obstacle brought down onto the path,
    whether or not a contact is disturbed by it."""
    from .repositioning import newly_inside
    F = len(positions)
    _, bones = trunk_parts(binding)
    if not bones.size or mesh.animated:
        return np.zeros(F, bool)
    need = np.zeros((F, int(np.sum(binding.skeleton.parents >= 0))), bool)
    need[:, bones] = True
    return newly_inside(binding, positions, mesh, np.arange(F), need, TRUNK_MARGIN * binding.body_height)[0].any(axis=1)


def replan_windows(binding, mesh, phases, outcomes, result, pins, bad, up=(0.0, 0.0, 1.0), seed=0, budget=3.0,
                   fps=30.0, spans=()):
    """§7 over every window of invalid phases ``bad`` (indices) and of frame ``spans`` (first,
    last: the trunk through an obstacle, ``trunk_collisions``): ``[((first, last), RootPlan or
    None)]`` and the pins (F,J,3) of §7.3 (NaN where free): the trunk where each plan carries
    it, every contact still held where it is."""
    from .repositioning import _body_frames, _subtree, _workspace, candidate_points, contact_point
    sk, H = binding.skeleton, binding.body_height
    positions, lengths = result.positions, result.bone_lengths
    F, J, _ = positions.shape
    up = np.asarray(up, float) / np.linalg.norm(up)
    body = _body_frames(binding)
    trunk, trunk_bones = trunk_parts(binding)
    pins = np.full((F, J, 3), np.nan) if pins is None else pins.copy()
    bad = set(bad)

    memo = {}

    feet = _feet(binding, phases)
    arms = _arms(binding)
    child = np.flatnonzero(sk.parents >= 0)
    arm_bones = np.flatnonzero(np.isin(child, [int(j) for c in arms for j in _subtree(sk, int(c[2]))]))

    def keep_rep(a, b):
        """The contacts held (limb, frames, points, whether a foot that may step aside) and to
        re-position (limb, frames, samples, a foot's sole clearance or None) in a..b, and the
        indices of the feet's phases among them (once per window: the pins ask again)."""
        if (a, b) in memo:
            return memo[(a, b)]
        keep, rep, foot = [], [], []
        for i, ph in enumerate(phases):
            lo, hi = max(a, ph.start), min(b, ph.end)
            if lo > hi:
                continue
            fr = np.arange(lo, hi + 1)
            if i in bad:
                p, n = contact_point(mesh, ph, ph.middle)
                pts, nrm = candidate_points(mesh, ph.middle, ph.normal)
                goal = pts + nrm * ph.clearance
                near = np.argsort(np.linalg.norm(goal - p, axis=1))[:REP_SAMPLES]
                rep.append((ph.limb, fr, np.vstack([p + n * ph.clearance, goal[near]]),
                            ph.clearance if i in feet else None))
            elif outcomes[i].status in ("valid", "repositioned"):
                if ph.limb is None and ph.effector != body.pelvis:
                    continue                             # a knee resting: the legs' IK places it
                keep.append((ph.limb, fr, _held_place(binding, positions, ph, fr), i in feet))
            else:
                continue
            if i in feet:
                foot.append(i)
        memo[(a, b)] = keep, rep, foot
        return keep, rep, foot

    def plan(w, a, b, seconds, arms_optional):
        keep, rep, _ = keep_rep(a, b)
        reach = clear.holding(keep, rep, lambda limb: _workspace(binding, limb, lengths))
        return plan_root(reach, a, b, F, fps=fps, seed=seed + w, budget=seconds, arms_optional=arms_optional)

    # A window too short for the root to get there at the planner's speed is widened (the walk
    # must start ducking before the obstacle): its pad doubles up to ``PAD_MAX`` frames.
    # Each wider try gets twice the time of the one before (the whole budget for the widest).
    clear = Reachability(sk, positions, binding.motion, mesh, binding.mesh, H, body.pelvis, trunk_bones, [], [],
                         None, body, up, 0.02 * H, arm_bones)
    free = clear.valid(np.arange(F), np.zeros((F, 3)), np.zeros(F))
    pad, share = PAD, budget * PAD / PAD_MAX
    while True:
        windows = _windows(phases, bad, F, pad, spans, free)
        # A step aside with the trunk clear but not the arms only in the widest window (a wider one
        # may have room to take the arms round too).
        plans = [plan(w, a, b, share, pad >= PAD_MAX) for w, (a, b) in enumerate(windows)]
        if all(p is not None for p in plans) or pad >= PAD_MAX:
            break
        pad, share = 2 * pad, 2 * share
    for (a, b), p in zip(windows, plans):
        if p is None:
            continue
        steady = positions.copy()
        steady[p.frames] = _steadied(positions, binding.motion, p.frames)
        moved = root_transforms(p, steady, body.pelvis, up)
        pins[np.ix_(p.frames, trunk)] = moved[:, trunk]
        keep, _, foot = keep_rep(a, b)
        slides, places = step_aside(binding, mesh, phases, foot, positions, p, body.pelvis, up)
        # A foot stepping aside drops what held it where the unmoved body had it (an earlier
        # round's pins of a contact the obstacle hit, eased over the frames around it).
        for i in foot:
            if phases[i].limb.root in slides:
                pins[np.ix_(p.frames, _subtree(sk, phases[i].effector))] = np.nan
        for limb, fr, pts, _ in keep:
            if limb is None:                             # a seat held: the trunk's pins hold the pelvis
                continue
            eff = int(limb.effector)
            free = np.isnan(pins[fr, eff, 0])
            pins[fr[free], eff] = pts[free]
        for i, (place, tri) in places.items():           # feet that stepped aside with the body
            ph = phases[i]
            pins[np.arange(ph.start, ph.end + 1), ph.effector] = place
            p.aside[i] = (place[ph.middle - ph.start], tri)
        if places:
            # The free arms go aside with the body where it steps aside (their descriptors hold them
            # where the unmoved body swung them: a left arm trailed through the post it passed).
            level = p.offset - np.outer(p.offset @ up, up)
            aside = np.linalg.norm(level, axis=1) > ASIDE_MIN * H
            held = {int(j) for limb, *_ in keep if limb is not None for j in limb.chain}
            away = level[aside] / np.maximum(np.linalg.norm(level[aside], axis=1), 1e-300)[:, None]
            for chain in arms:
                if held.isdisjoint(chain.tolist()):
                    joints = _subtree(sk, int(chain[1]))
                    pins[np.ix_(p.frames[aside], joints)] = moved[np.ix_(np.flatnonzero(aside), joints)]
                    _arm_clear(binding, mesh, chain, p.frames[aside], pins, away)
        _legs_by_ik(sk, binding, positions, moved, p.frames, pins, phases, slides, mesh)
    return list(zip(windows, plans)), pins


def _arms(binding):
    """The chains (limb root to effector) of the limbs that are not legs (``avoidance``'s limbs)."""
    from .avoidance import _limbs
    from .workspace import on_leg
    return [chain for e, chain, _ in _limbs(binding) if not on_leg(binding.motion, e, binding.body_height)]


def _feet(binding, phases):
    """Indices of ``phases`` of a leg's foot (``workspace.on_leg``): the contacts that may step
    aside with the body."""
    from .workspace import on_leg
    return {i for i, ph in enumerate(phases)
            if ph.limb is not None and on_leg(binding.motion, ph.effector, binding.body_height)}


def step_aside(binding, mesh, phases, foot, positions, plan, root, up):
    """The feet carried with a plan that moves the body aside (a post on the path: a person steps
    round it, feet and all), not left where the unmoved body had them.

    The phases ``foot`` (indices) of each leg that overlap (a heel's and its toe's) move as one
    stance: every phase of a stance inside the plan's frames is shifted level as far as the plan's
    offset and turn about the root take the stance's first joint on its middle frame (one place for
    the whole stance: no slide; the foot is moved, not turned), at the height
    of the ground there, when the ground goes on there at the height it stands on (``_stands_on``
    on every frame) and the move is more than ``ASIDE_MIN`` body heights (a duck moves no foot).
    Returns ``(slides, places)``: per leg (its limb root) the level shift (n,3) of its foot on
    each of the plan's frames (a stance's shift, eased smoothly from one stance to the next and
    from and to zero at the window's ends, for the swing between stances), and per phase carried
    its places (its frames, 3) and the triangle under its middle frame's."""
    from .repositioning import _stands_on
    from ..geometry.rays import RayCaster
    frames = plan.frames
    f0, f1 = int(frames[0]), int(frames[-1])
    up = np.asarray(up, float)
    H = binding.body_height
    eps0 = 0.015 * H
    caster = RayCaster.of(mesh)                          # (replanning runs on static environments)
    by_leg = {}
    for i in sorted(foot, key=lambda i: phases[i].start):
        by_leg.setdefault(phases[i].limb.root, []).append(i)
    slides, places = {}, {}
    for leg, idx in by_leg.items():
        stances = []
        for i in idx:
            ph = phases[i]
            if stances and ph.start <= stances[-1][1]:
                stances[-1] = (stances[-1][0], max(stances[-1][1], ph.end), stances[-1][2] + [i])
            else:
                stances.append((ph.start, ph.end, [i]))
        knots = []                                       # (first, last, shift (3,))
        for s, e, members in stances:
            if e < f0 or s > f1:
                continue
            if s < f0 or e > f1:                         # not carried: the swing eases back to it
                knots.append((max(s, f0), min(e, f1), np.zeros(3)))
                continue
            m = (s + e) // 2
            # One level shift for the whole foot: where the turned body takes its first joint on the
            # middle frame (turned too, the toe's tip, which follows the ankle, was torn 9 mm);
            # unless the body's way aside moves during the stance so far that the leg cannot reach
            # the foot there on some frame, then the shift of the frame that asks least of the leg.
            k = np.arange(s, e + 1) - f0
            level = plan.offset[k] - np.outer(plan.offset[k] @ up, up)
            R = _yaw_rot(plan.yaw[k], up)
            r = positions[s:e + 1, root]
            x_m = positions[m, phases[members[0]].effector]
            each = r + np.einsum("nij,nj->ni", R, x_m - r) + level - x_m
            each -= np.outer(each @ up, up)
            shift = each[m - s]
            beyond = _beyond_reach(binding.motion, positions, phases, members, leg, r, R, level, s, each)
            if beyond[m - s] > 0.0:
                shift = each[int(np.argmin(beyond))]
            carried, ok = {}, True
            for i in members:
                ph = phases[i]
                # Held still: the place on its middle frame, moving as the source moves about it (a
                # heel rolling onto the toe) and no more (a foot the post pushed about, not at all).
                src = binding.motion[ph.start:ph.end + 1, ph.effector]
                x = positions[ph.middle, ph.effector] + (src - src[ph.middle - ph.start])
                c = x + shift
                # At the height of the ground under the new place (the same on a flat floor).
                lift = ph.clearance + 0.1 * H
                d0, t0 = caster.cast(x + (lift - ph.clearance) * up, np.broadcast_to(-up, x.shape))
                d1, t1 = caster.cast(c + (lift - ph.clearance) * up, np.broadcast_to(-up, c.shape))
                if (t0 < 0).any() or (t1 < 0).any():
                    ok = False
                    break
                c = c + (d0 - d1)[:, None] * up
                if not _stands_on(mesh, c, ph.clearance, up, eps0).all():
                    ok = False
                    break
                carried[i] = c, int(t1[ph.middle - ph.start])
            if not ok or np.linalg.norm(shift) <= ASIDE_MIN * H:
                knots.append((s, e, np.zeros(3)))
                continue
            places.update(carried)
            knots.append((s, e, shift))
        if not any(d.any() for _, _, d in knots):
            continue
        n = len(frames)
        slide = np.zeros((n, 3))
        # Zero at the window's ends (where the plan joins the adapted motion) unless they are the clip's.
        # Between stances the foot goes with the body (the plan's level offset), eased from where it
        # left the one stance to where it lands on the next: eased straight from stance to stance,
        # a swinging foot cut the corner of the post the body was clear of.
        level = plan.offset - np.outer(plan.offset @ up, up)
        points = ([] if f0 == 0 else [(f0, np.zeros(3), None)]) + \
            [pt for s, e, d in knots for pt in ((s, d, s), (e, d, s))] + \
            ([] if f1 == len(positions) - 1 else [(f1, np.zeros(3), None)])
        for (ta, da, ka), (tb, db, kb) in zip(points[:-1], points[1:]):
            t = np.arange(ta, tb + 1)
            if ka is not None and ka == kb:              # within a stance: where it stands
                slide[t - f0] = da
                continue
            u = (t - ta) / max(tb - ta, 1)
            u = (u * u * (3.0 - 2.0 * u))[:, None]       # smoothstep
            ca, cb = da - level[ta - f0], db - level[tb - f0]
            slide[t - f0] = level[t - f0] + ca + u * (cb - ca)
        if f0 == 0:
            slide[:points[0][0] - f0] = points[0][1]
        if f1 == len(positions) - 1:
            slide[points[-1][0] - f0:] = points[-1][1]
        slide -= np.outer(slide @ up, up)
        slides[leg] = slide
    return slides, places


def _beyond_reach(source, positions, phases, members, leg, r, R, level, s, shifts):
    """(k,) for each candidate level shift ``shifts`` (k,3) of a stance (its phases ``members``, from
    frame ``s``), how far past the leg's reach the foot would be on its worst frame: the distance
    from the hip (``leg``, the limb's root, as the plan takes it: about the root ``r`` (n,3) turned
    by ``R`` (n,3,3) and moved by ``level`` (n,3)) to each phase's held place shifted, less the
    longest the source ever stretches that hip to that joint. The in-place clip stands seven
    seconds while the body's way aside round a post moves 0.15 m: shifted as the middle frame has
    it, the foot was out of the leg's reach at the stance's start and stood 1.8 cm up."""
    hip = r + np.einsum("nij,nj->ni", R, positions[s:s + len(r), leg] - r) + level
    worst = np.full(len(shifts), -np.inf)
    for i in members:
        ph = phases[i]
        src = source[ph.start:ph.end + 1, ph.effector]
        place = positions[ph.middle, ph.effector] + (src - src[ph.middle - ph.start])
        most = np.linalg.norm(source[:, leg] - source[:, ph.effector], axis=1).max()
        d = hip[ph.start - s:ph.end + 1 - s][None] - place[None] - shifts[:, None]
        worst = np.maximum(worst, np.linalg.norm(d, axis=-1).max(axis=1) - most)
    return worst


def _legs_by_ik(sk, binding, positions, moved, frames, pins, phases=(), slides=None, mesh=None):
    """§7.3's per-limb IK for the legs over ``frames``: from the moved hip to the ankle where it
    is held in one of its contact ``phases``, or elsewhere where the plan carries it (down with
    the body, no lower than it stands), the knee on the side it bends in the
    adapted motion carried with the body; knee, ankle and what hangs below pinned. Left to the
    whole-body solver, a leg compressed by a lowered root could fold its knee to the other side
    (a 0.45 m jump in one frame measured under a ceiling at 1.5 m). ``slides``: per leg (limb
    root) the level shift (n,3) of a foot stepping aside (``step_aside``), which its swing follows.
    ``mesh``: the static environment now; a swinging leg that would come nearer than
    ``SWING_CLEAR`` body heights to a wall of it where the source's leg did not (a post the body
    steps round) swings that much wider (``_swing_wider``)."""
    from .repositioning import ContactError, find_limb
    from .workspace import on_leg
    from ..skeleton.joints import bending, limb_effectors, place_between, span, split_joints, two_bone
    H = binding.body_height
    lengths = np.median(sk.bone_lengths(binding.motion), axis=0)
    split = split_joints(sk, binding.motion)
    from .repositioning import _body_frames
    forward = _body_frames(binding).rotations(moved)[:, 0]
    done = set()
    for e in limb_effectors(sk, binding.motion, H).tolist():
        try:
            chain = find_limb(sk, sk.names[e]).chain
        except ContactError:
            continue
        if not on_leg(binding.motion, chain[-1], H):
            continue
        # Real joints only: a bone split along its length (Rigify's thigh.001) is one segment.
        real = bending(chain, split)
        L = np.array([span(chain, lengths, a, b) for a, b in zip(real[:-1], real[1:])])
        u = int(np.flatnonzero(L >= 0.5 * L.max())[0])
        if u + 2 >= len(real):
            continue
        hip, knee, ankle = (int(real[u + k]) for k in range(3))
        if ankle in done:
            continue
        done.add(ankle)
        held = pins[frames, ankle]
        # Out of its contacts a foot in swing goes down with the body (carried by the plan, from
        # where it is held or adapted), no lower than the ankle stands in the source or than it
        # was: left where it was, a high step under a 0.43 m duck brought the ankle within the
        # knee's fold of the hip and the knee leapt 0.7 m.
        # How much: none up to SWING_HEIGHT body heights above where the ankle stands (a foot
        # between its heel's and its toe's phases stays where it is: carried, planted samples
        # fell from 100 to 88 % on a real clip), all of it from twice that.
        slide = (slides or {}).get(int(chain[0]), np.zeros((len(frames), 3)))
        base = _from_held(held, positions[frames, ankle] + slide)
        stand = binding.motion[:, ankle, 2].min()
        share = np.clip((base[:, 2] - stand) / (SWING_HEIGHT * H) - 1.0, 0.0, 1.0)[:, None]
        swing = base + share * (moved[:, ankle] - positions[frames, ankle] - slide)
        swing[:, 2] = np.maximum(swing[:, 2], np.minimum(base[:, 2], stand))
        foot = set(int(j) for j in sk.descendants(ankle)) | {ankle}
        planted = np.zeros(len(frames), bool)
        for ph in phases:
            if ph.effector in foot:
                planted |= (frames >= ph.start) & (frames <= ph.end)
        end = np.where((planted & ~np.isnan(held[:, 0]))[:, None], held, swing)
        l1, l2 = L[u], L[u + 1]
        # The knee's side: the way the adapted knee bends off its hip-ankle line (carried with the
        # body), pushed forward (knees point forward in the body frame): near straight, the
        # adapted knee alone flipped the side from frame to frame; and the lowered knee itself,
        # once a duck took the hips 0.37 m down, lay below the new hip-ankle line and folded
        # the knee backwards for one frame (a 0.6 m step).
        line = moved[:, ankle] - moved[:, hip]
        line /= np.maximum(np.linalg.norm(line, axis=1), 1e-300)[:, None]
        bend = moved[:, knee] - moved[:, hip]
        bend -= np.einsum("ni,ni->n", bend, line)[:, None] * line
        # Smoothed over frames (a Gaussian of KNEE_SMOOTH frames): where the bend passes near the
        # hip-ankle line the side can flip for a frame (a high-stepping leg under a 0.43 m duck:
        # the knee went 0.68 m down and back up).
        hint = 0.5 * (moved[:, hip] + end) + gaussian_filter1d(bend + 0.3 * l1 * forward, KNEE_SMOOTH, axis=0,
                                                               mode="nearest", truncate=3.0)
        k_new, a_new = two_bone(moved[:, hip], hint, end, l1, l2)
        if mesh is not None and not mesh.animated and (~planted).any():
            below = np.asarray(sk.descendants(ankle), np.int64)
            src = binding.motion[frames]
            for _ in range(SWING_ROUNDS):
                points = _limb_points(moved[:, hip], k_new, a_new, positions[frames][:, below]
                                     + (a_new - positions[frames, ankle])[:, None])
                wider = _swing_wider(binding, mesh, ~planted, points,
                                     _limb_points(src[:, hip], src[:, knee], src[:, ankle], src[:, below]), moved[:, hip])
                if wider is None:
                    break
                wider[planted] = 0.0                     # a foot on the ground stays
                end, hint = end + wider, hint + wider
                k_new, a_new = two_bone(moved[:, hip], hint, end, l1, l2)
        pins[frames, knee] = k_new
        # The joints that split the thigh or the shin, at their share along the new segments.
        place_between(pins, frames, chain, lengths, hip, knee, moved[:, hip], k_new)
        place_between(pins, frames, chain, lengths, knee, ankle, k_new, a_new)
        below = sk.descendants(ankle)
        shift = a_new - positions[frames, ankle]
        for j in below:
            held_j = pins[frames, j]
            pins[frames, j] = np.where(np.isnan(held_j), positions[frames, j] + shift, held_j + (a_new - base))
        pins[frames, ankle] = a_new


def _held_place(binding, positions, ph, frames):
    """(n,3) where a contact the plan holds stands over ``frames``: where ``positions`` have it,
    or, where that slides off the source's own motion over the phase by more than
    ``SLIDE_HOLD`` body heights, where they have it at the phase's middle plus the source's motion
    from there (a real walk's toe, still down as its heel rose, slid 2.6 cm off its stone's edge
    on the last frames of its phase; the plan held it there)."""
    from .repositioning import SLIDE_HOLD
    e, m, motion = ph.effector, ph.middle, binding.motion
    want = positions[m, e] + motion[frames, e] - motion[m, e]
    if np.linalg.norm(positions[frames, e] - want, axis=1).max() <= SLIDE_HOLD * binding.body_height:
        return positions[frames, e]
    return want


def _from_held(held, carried):
    """(n,3) ``held`` (n,3) where it is a place (not NaN), ``carried`` (n,3) elsewhere, plus, on
    each run of frames between held places, the gap between the held place next to it and
    ``carried`` on its first and last frames, blended from one end to the other (smoothstep): the
    swing leaves a stance from where the foot stood and lands where it will stand (gaps taken on
    the swing's own frames: where the carried foot jumps as the stance ends, the swing does not).
    Without it, where the adapted foot had been pushed about by an obstacle the held one is not,
    the ankle jumped 1.7 cm as its stance ended and the knee of the near-straight leg 7.9 cm (the
    in-place clip with a post where it stands)."""
    out = np.where(np.isnan(held), carried, held)
    free = np.isnan(held[:, 0])
    n = len(held)
    for a, b in runs(free):
        g0 = held[a - 1] - carried[a] if a > 0 else np.zeros(3)
        g1 = held[b + 1] - carried[b] if b < n - 1 else np.zeros(3)
        u = (np.arange(a, b + 1) - a + 1) / (b - a + 2)
        u = (u * u * (3.0 - 2.0 * u))[:, None]
        out[a:b + 1] += (1.0 - u) * g0 + u * g1
    return out


def _limb_points(hip, knee, ankle, foot):
    """(n,m,3) the points of a limb ``_swing_wider`` keeps off walls: along the lower thigh and the
    shin (upper arm and forearm), the knee (elbow), the ankle (wrist) and the joints of the foot
    (hand) ``foot`` (n,k,3)."""
    along = [hip + t * (knee - hip) for t in (0.5, 0.75)] + [knee + t * (ankle - knee) for t in (0.25, 0.5, 0.75)]
    return np.concatenate([np.stack(along + [knee, ankle], axis=1), foot], axis=1)


def _swing_wider(binding, mesh, swinging, points, source, hip, towards=None):
    """(n,3) the level shift, eased over ``SWING_EASE`` frames, that takes a leg's ``points``
    (n,m,3, ``_limb_points``) on the frames ``swinging`` (n,) marks towards the side of the wall its
    ``hip`` (n,3) is on, up to ``SWING_CLEAR`` body heights off the walls of the static ``mesh``
    they come nearer to than the source's (``source``, the same points of the source) came to the
    bind-time environment (a walking leg brushes no wall it did not brush); None when none does.
    A wall is a surface whose normal is more level than up: a floor is left to the contacts.
    Towards the hip's side, not along the wall's normal: a shin across a post's corner, both ends
    out, went to and fro between its faces. ``towards``: (n,3) level unit directions to shift along
    instead, whichever way leaves the wall (``_arm_clear``)."""
    H = binding.body_height
    clear = SWING_CLEAR * H
    rows = np.flatnonzero(swinging)
    m = points.shape[1]
    collider = Collider.of(mesh, 0.2 * H)
    sd, normal, tri, bary = collider.closest(points[rows].reshape(-1, 3))
    sd, normal = sd.reshape(len(rows), m), normal.reshape(len(rows), m, 3)
    corners = collider.vertices[collider.triangles[np.maximum(tri, 0)]]                  # (r m,3,3)
    foot = np.einsum("kc,kcd->kd", bary, corners).reshape(len(rows), m, 3)
    level = normal.copy()
    level[..., 2] = 0.0
    near = (np.linalg.norm(level, axis=-1) > 0.5) & (sd < clear)
    if not near.any():
        return None
    was, _ = Collider.of(binding.mesh, 0.2 * H).signed_distance(source[rows].reshape(-1, 3))
    near &= sd < was.reshape(len(rows), m) - 1e-3 * H
    if not near.any():
        return None
    need = np.where(near, clear - sd, 0.0)                             # (r,m)
    worst = np.argmax(need, axis=1)
    k = np.arange(len(rows))
    if towards is not None:                             # that way or the other, out of the wall
        direction = towards[rows] * np.where(np.einsum("ni,ni->n", towards[rows], level[k, worst]) < 0, -1.0, 1.0)[:, None]
    else:
        side = hip[rows] - foot[k, worst]
        side[:, 2] = 0.0
        direction = np.where((np.linalg.norm(side, axis=1) > 1e-3 * H)[:, None], side, level[k, worst])
        direction /= np.maximum(np.linalg.norm(direction, axis=1), 1e-300)[:, None]
    push = np.zeros(len(swinging))
    push[rows] = need[k, worst]
    way = np.zeros((len(swinging), 3))
    way[rows] = direction * push[rows, None]
    # Eased in and out, one way for each run of frames (runs nearer than the easing taken as
    # one): every frame takes the largest of its neighbours' pushes, less with distance.
    runs, n = label(binary_dilation(push > 0, iterations=SWING_EASE))
    out = np.zeros((len(swinging), 3))
    for r in range(1, n + 1):
        at = np.flatnonzero(runs == r)
        w = way[at].sum(axis=0)
        w /= max(np.linalg.norm(w), 1e-300)
        size = np.zeros(len(at))
        for d in range(-SWING_EASE, SWING_EASE + 1):
            e = 1.0 - abs(d) / (SWING_EASE + 1.0)
            size = np.maximum(size, e * e * (3.0 - 2.0 * e) * push[np.clip(at + d, at[0], at[-1])])
        out[at] = size[:, None] * w
    return out


def _arm_clear(binding, mesh, chain, frames, pins, away):
    """A free arm carried aside with the body (``pins`` on ``frames``, in place) kept off the walls
    of the static ``mesh`` it newly comes near, as a swinging leg is (``_swing_wider``), but moved
    the way the body stepped aside (``away`` (n,3), level unit directions): the hand and the elbow
    shifted, the arm placed by two-bone IK from the shoulder, what hangs below the hand moved with
    it. Carried round a post on a real walk, the arm on the post's side swung its hand through it
    on 7 frames; ``avoidance``, shortening it along its line from the shoulder, made it jump 0.4 m
    in a frame, and shifted towards the shoulder's side it folded and flipped its elbow."""
    from .repositioning import _subtree
    from ..skeleton.joints import bending, place_between, span, split_joints, two_bone
    from ..skeleton.rotations import swing
    if mesh.animated or not len(frames):
        return
    sk = binding.skeleton
    real = bending(chain, split_joints(sk, binding.motion))
    if len(real) < 3:
        return
    top, mid, end = (int(j) for j in real[-3:])
    lengths = np.median(sk.bone_lengths(binding.motion), axis=0)
    P = pins[frames]
    if np.isnan(P[:, [top, mid, end], 0]).any():
        return
    below = np.asarray(_subtree(sk, end)[1:], np.int64)
    src = binding.motion[frames]
    shoulder, elbow, hand = P[:, top], P[:, mid], P[:, end]
    rest = P[:, below] - hand[:, None]
    moved = False
    for _ in range(SWING_ROUNDS):
        wider = _swing_wider(binding, mesh, np.ones(len(frames), bool),
                             _limb_points(shoulder, elbow, hand, hand[:, None] + rest),
                             _limb_points(src[:, top], src[:, mid], src[:, end], src[:, below]), shoulder, away)
        if wider is None:
            break
        elbow, hand = two_bone(shoulder, elbow + wider, hand + wider, span(chain, lengths, top, mid),
                               span(chain, lengths, mid, end))
        moved = True
    if not moved:
        return
    pins[frames, mid], pins[frames, end] = elbow, hand
    pins[np.ix_(frames, below)] = hand[:, None] + rest
    place_between(pins, frames, chain, lengths, top, mid, shoulder, elbow)
    place_between(pins, frames, chain, lengths, mid, end, elbow, hand)
    # Leaves beside the chain (Unreal's lowerarm_twist_01_l) turn with the bone they hang from: left
    # where they were carried, one stayed 1.3 cm inside the wall, off its bone.
    full = [int(j) for j in chain]
    for k in sorted(set(_subtree(sk, int(chain[1])).tolist()) - set(full) - set(below.tolist())):
        a = int(sk.parents[k])
        if a not in full or a == end:
            continue
        b = full[full.index(a) + 1]
        turn = swing(P[:, b] - P[:, a], pins[frames, b] - pins[frames, a])
        pins[frames, k] = pins[frames, a] + np.einsum("nij,nj->ni", turn, P[:, k] - P[:, a])
