"""Reaching: a hand reaches a target the animator places (Mousas and Newbury; seed 004).

The base motion is the binding's, adapted to the environment as it is (``adapt``). Around the
reach's frame a window of frames is made again:

1. **Reference postures.** The database (other clips of the same skeleton) is aligned, posture
   by posture, on the base's trunk at the reach's frame (best-fit rotation of the trunk about
   the arm's anchor joint). Along the straight line from the hand's unreached position to the
   target, at ``STEPS`` equal distance steps, the posture whose hand is nearest each step is
   registered; the posture nearest the target ends the series, with its hand on the target.
2. **Internal graphs.** Per joint of the arm (the anchor's child down to the hand) the series of
   positions is a graph; discontinuities are found with a Laplacian of Gaussian (σ =
   ``LOG_SIGMA`` samples) and normalised (a sample whose |LoG| exceeds the series' mean moves
   towards its neighbours by 1 - mean / |LoG|: our reading of Eq. 3, which as printed scales
   positions by a ratio), then smoothed by a moving average of ``2 n + 1`` samples (Eq. 4), the
   first and last samples pinned.
3. **Timing per body part**, learnt from the database: per arm joint, the mean over the clips of
   its distance from its starting position against normalised time, up to its farthest point
   (the paper's time-warping graphs); without a database, a minimum-jerk profile.
4. **The reach.** Over the window the hand goes from where the base has it to the target and
   back: about the shoulder (its direction turned on the sphere, its distance changed in step,
   so it never passes through the shoulder), bent as its graph bends, each arm joint's target
   shifted along its own graph by its own timing, all carried with the trunk's motion. The
   hand is pinned to that path; a moving target is followed while held; after the hold the
   point it let go of is carried with the trunk. The elbow is then placed by exact two-bone IK
   (bones split along their length count as one), and what hangs from the arm turns with it.
5. **The rest of the body**, by default, is solved again over the window through the
   descriptors (reaching while seated keeps the seat), frame after frame from the window's
   first frame, with collisions for the arm and trunk, the arm's hinges, the limits and the
   exact-length pass of a bake (one substep a frame: the body around the arm follows the
   bake's targets, which its solve already met). With ``body=False`` the arm alone moves on
   the bake's body, the paper's way (a few milliseconds; no collisions or limits for the arm).

Positions only: the paper registers rotations too (Euler angles); here the bone rotations follow
from the positions as in every bake.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import gaussian_laplace

from .adaptation import AdaptResult, Collisions, Rig, adapt, smooth_jumps
from .descriptors.binding import Binding
from .errors import InputError
from .geometry import TriMesh
from .skeleton.joints import two_bone
from .skeleton.rotations import kabsch, swing

#: Distance steps along the straight line from the hand to the target (reference postures).
STEPS = 12
#: A reference posture's hand must lie within this fraction of the reach's scale (the hand's
#: way to the target plus the arm's span) of its step on the line.
NEAR_FRACTION = 0.25
#: Width (samples) of the Laplacian-of-Gaussian that finds discontinuities in a graph.
LOG_SIGMA = 1.0
#: Half width n of the moving average of 2 n + 1 samples (Eq. 4).
SMOOTH_HALF = 2
#: Samples of a learnt timing curve.
TIMING_SAMPLES = 64
#: The hand's path is kept within this fraction of the arm's length from its anchor, except at
#: the reach's frame (where the target is checked against the whole length).
REACH_MARGIN = 0.97
#: Substeps per frame of a reach's window (the clip solver's 3: see ``ReachSession.reach``).
WINDOW_SUBSTEPS = 1
#: Constraint sweeps ending each frame of a reach's window (the exact-length pass follows).
FINAL_ITERATIONS = 3
#: Default frames before and after the reach's frame.
WINDOW = 30


@dataclass
class ReachInfo:
    """What a reach did.

    hand, anchor : joint names (the anchor: the trunk joint the arm hangs from).
    frame : the frame the hand is on the target; window : (first, last) frame solved again.
    distance : from the arm's first joint (the anchor's child) to the target at the frame;
    reach : the length of the arm's bones below that joint.
    hand_error : the hand's distance from the target at the frame.
    references : (clip, frame) of the database postures registered, in order along the line.
    seconds : time of the reach's solve (the base adapt not included).
    """

    hand: str
    anchor: str
    frame: int
    window: tuple
    distance: float
    reach: float
    hand_error: float
    references: list = field(default_factory=list)
    seconds: float = 0.0


def arm_chain(skeleton, hand):
    """``(anchor, chain)``: the nearest ancestor of ``hand`` with two or more children (the chest
    an arm hangs from), and the joints below it down to the hand (shoulder ... hand)."""
    chain = [hand]
    j = int(skeleton.parents[hand])
    while j >= 0 and len(skeleton.children(j)) < 2:
        chain.append(j)
        j = int(skeleton.parents[j])
    if j < 0:
        raise InputError(f"'{skeleton.names[hand]}' hangs from no joint with several children: name a hand "
                         "of an arm (a joint below the chest)")
    return j, np.array(chain[::-1], np.int64)


#: A joint whose bones in and out stay within this angle (degrees) on every frame splits one bone.
STRAIGHT_DEGREES = 1.0


def limb(skeleton, motion, hand):
    """``(shoulder, elbow, upper, lower)`` of the arm ending at ``hand``: the upper arm from the
    shoulder to the elbow and the forearm from the elbow to the hand, each a list of the joints
    that end its bones (more than one where a bone is split along its length, straight on every
    frame of ``motion``, as Rigify's DEF-upper_arm.L / .L.001)."""
    parents = skeleton.parents

    def straight(k):
        a, c = int(parents[k]), [int(x) for x in skeleton.children(k)]
        if a < 0 or len(c) != 1:
            return False
        u, v = motion[:, k] - motion[:, a], motion[:, c[0]] - motion[:, k]
        cos = np.einsum("fi,fi->f", u, v) / np.maximum(np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1), 1e-300)
        return bool(np.all(cos > np.cos(np.radians(STRAIGHT_DEGREES))))

    def segment(end):
        bones, j = [end], int(parents[end])
        while j >= 0 and straight(j):
            bones.append(j)
            j = int(parents[j])
        return j, bones[::-1]

    elbow, lower = segment(hand)
    if elbow < 0:
        raise InputError(f"'{skeleton.names[hand]}' needs two bones above it (upper arm, forearm) to reach")
    shoulder, upper = segment(elbow)
    if shoulder < 0:
        raise InputError(f"'{skeleton.names[hand]}' needs two bones above it (upper arm, forearm) to reach")
    return shoulder, elbow, upper, lower


def _arc(a, b, u):
    """(n,3) from vectors ``a`` to ``b`` (n,3) at fractions ``u`` (n,): the direction turned
    (spherical interpolation) and the length interpolated linearly."""
    la, lb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    da, db = a / np.maximum(la, 1e-300)[:, None], b / np.maximum(lb, 1e-300)[:, None]
    cos = np.clip(np.einsum("ni,ni->n", da, db), -1.0, 1.0)
    theta = np.arccos(cos)
    sin = np.sin(theta)
    small = sin < 1e-6                                          # (anti)parallel: straight blend
    with np.errstate(divide="ignore", invalid="ignore"):
        wa = np.where(small, 1.0 - u, np.sin((1.0 - u) * theta) / sin)
        wb = np.where(small, u, np.sin(u * theta) / sin)
    d = wa[:, None] * da + wb[:, None] * db
    d /= np.maximum(np.linalg.norm(d, axis=1), 1e-300)[:, None]
    return d * (la + u * (lb - la))[:, None]


def _trunk(skeleton, anchor, chain):
    """Joints that carry the arm: the anchor, its ancestors and its other children."""
    out = [anchor]
    j = int(skeleton.parents[anchor])
    while j >= 0:
        out.append(j)
        j = int(skeleton.parents[j])
    out += [int(k) for k in skeleton.children(anchor) if k != chain[0]]
    return np.array(sorted(set(out)), np.int64)


def minimum_jerk(t):
    t = np.clip(t, 0.0, 1.0)
    return t ** 3 * (10.0 - 15.0 * t + 6.0 * t * t)


def normalise_graph(series, sigma=LOG_SIGMA, half=SMOOTH_HALF):
    """Discontinuities of a graph (n,3) found by a Laplacian of Gaussian and normalised, then a
    moving average of 2 ``half`` + 1 samples; the first and last samples are kept."""
    g = np.array(series, dtype=float)
    n = len(g)
    if n < 3:
        return g
    log = np.stack([gaussian_laplace(g[:, c], sigma, mode="nearest") for c in range(3)], axis=1)
    size = np.linalg.norm(log, axis=1)
    mean = size[1:-1].mean()
    jump = np.flatnonzero(size > mean)
    jump = jump[(jump > 0) & (jump < n - 1)]
    if jump.size and mean > 0:
        local = 0.5 * (g[jump - 1] + g[jump + 1])
        g[jump] += (1.0 - mean / size[jump])[:, None] * (local - g[jump])
    out = g.copy()
    for k in range(1, n - 1):
        h = min(half, k, n - 1 - k)                       # narrower near the pinned ends
        out[k] = g[k - h:k + h + 1].mean(axis=0)
    return out


def _along(graph, u):
    """Points of a graph (n,3) at parameters u (m,) in [0,1] (linear between samples)."""
    n = len(graph)
    x = np.clip(np.asarray(u, float), 0.0, 1.0) * (n - 1)
    k = np.minimum(x.astype(np.int64), n - 2)
    w = (x - k)[:, None]
    return graph[k] * (1.0 - w) + graph[k + 1] * w


def learn_timing(database, joints):
    """Per joint (K,) a timing curve (TIMING_SAMPLES,) in [0,1]: the mean over the clips of the
    joint's distance from its first position, up to its farthest, against normalised time."""
    curves = np.zeros((len(joints), TIMING_SAMPLES))
    count = np.zeros(len(joints))
    t = np.linspace(0.0, 1.0, TIMING_SAMPLES)
    for clip in database:
        for i, j in enumerate(joints.tolist()):
            d = np.linalg.norm(clip[:, j] - clip[0, j], axis=-1)
            top = int(np.argmax(d))
            if top < 2 or d[top] <= 1e-9:
                continue
            part = np.maximum.accumulate(d[:top + 1] / d[top])
            curves[i] += np.interp(t * top, np.arange(top + 1), part)
            count[i] += 1
    out = np.where(count[:, None] > 0, curves / np.maximum(count, 1)[:, None], minimum_jerk(t)[None])
    out = np.maximum.accumulate(out, axis=1)
    out -= out[:, :1]
    return out / np.maximum(out[:, -1:], 1e-12)


class ReachSession:
    """Reaches on one adapted motion: the base ``adapt`` once, then each ``reach`` solves its
    window only (an animator moving the target pays that alone).

    binding : Binding; mesh : the environment now (default: the bind-time one).
    database : clips (F_k,J,3) of the same skeleton (joint positions, world space), e.g.
        other reaching actions; empty: a straight reach with a minimum-jerk timing.
    adapt_options : passed to ``adapt`` (bone_lengths, affinity_override, ...).
    """

    def __init__(self, binding, mesh=None, database=(), **adapt_options):
        if not isinstance(binding, Binding):
            raise InputError("binding must be a Binding from bind() or Binding.load()")
        self.binding = binding
        self.mesh = binding.mesh if mesh is None else mesh
        if not isinstance(self.mesh, TriMesh):
            raise InputError("mesh must be a TriMesh")
        J = len(binding.skeleton)
        self.database = []
        for k, clip in enumerate(database):
            clip = np.asarray(clip, dtype=float)
            if clip.ndim != 3 or clip.shape[1:] != (J, 3) or len(clip) < 2:
                raise InputError(f"database clip {k} has shape {clip.shape}: give (frames, {J}, 3) joint positions "
                                 "of the same skeleton, at least 2 frames")
            if not np.all(np.isfinite(clip)):
                raise InputError(f"database clip {k} has NaN or inf positions")
            self.database.append(clip)
        self.options = dict(adapt_options)
        self.base = adapt(binding, self.mesh, **self.options)

    def reach(self, hand, target, frame, window=WINDOW, progress=None, hold=0, first_frame=0, body=True):
        """The base motion with ``hand`` (name or index) on ``target`` at ``frame``.

        target : (3,) or (F,3), a point or one per frame (a moving target: the hand aims at
            where it is at each frame, and stays on it while held). window : frames before
            ``frame`` over which the reach goes out, and after the hold over which it comes
            back (clipped to the clip). hold : frames after ``frame`` the hand stays on the
            target. first_frame : the number messages give frame 0 (a scene's first bound frame).
        body : solve the whole body again over the window (through the descriptors, with
            collisions, limits and hinges: the trunk follows the arm a little); False moves the
            arm alone on the bake's body (the paper's way: a few milliseconds an edit, no
            collisions for the arm).
        Returns ``(AdaptResult, ReachInfo)``. A target beyond the arm's reach raises InputError
        naming the distance and the reach; nothing else is changed.
        """
        t0 = time.perf_counter()
        b = self.binding
        sk, F = b.skeleton, b.frame_count
        hand = sk.index(hand) if isinstance(hand, str) else int(hand)
        if not 0 <= hand < len(sk):
            raise InputError(f"hand joint {hand} is not in the skeleton (0..{len(sk) - 1})")
        frame = int(frame)
        if not 0 <= frame < F:
            raise InputError(f"frame {frame} is outside the clip (0..{F - 1})")
        window, hold = int(window), int(hold)
        if window < 1:
            raise InputError(f"window must be at least 1 frame, got {window}")
        if hold < 0:
            raise InputError(f"hold must be 0 or more frames, got {hold}")
        target = np.asarray(target, dtype=float)
        if target.shape == (3,):
            target = np.broadcast_to(target, (F, 3))
        if target.shape != (F, 3):
            raise InputError(f"target must be (3,) or ({F},3), got {target.shape}")
        if not np.all(np.isfinite(target)):
            raise InputError("the target has NaN or inf coordinates")
        anchor, chain = arm_chain(sk, hand)
        base = self.base.positions
        rig = Rig(b, **{k: v for k, v in self.options.items()
                        if k in ("bone_lengths", "affinity_override", "vertex_influence", "pins", "solver_options",
                                 "hinges")})
        # The reach: the upper arm and the forearm above the hand, from the shoulder (the joints
        # above it are held to the trunk by the rig's links and the limits learnt from the motion).
        # Bones split along their length (Rigify's DEF-upper_arm.L.001) count as one.
        root, elbow, upper, lower = limb(sk, b.motion, hand)
        arm = np.array(upper + lower, np.int64)                   # the bones, by their child joints
        reach = float(rig.lengths[frame, arm].sum())
        distance = float(np.linalg.norm(target[frame] - base[frame, root]))
        if distance > reach:
            raise InputError(f"the target is {distance:.2f} from {sk.names[root]} at frame {frame + first_frame}, "
                             f"beyond the reach of {sk.names[hand]} ({reach:.2f}): move the target closer")
        last = min(F - 1, frame + hold)                         # the last frame on the target
        s, e = max(0, frame - window), min(F - 1, last + window)
        W = np.arange(s, e + 1)
        # Timing: 0 at the window's ends, 1 from the frame to the end of the hold.
        tau = np.where(W <= frame, (W - s) / max(frame - s, 1), (e - W) / max(e - last, 1))
        tau[(W >= frame) & (W <= last)] = 1.0
        for f in range(frame, last + 1):                        # every held frame must be reachable
            far = float(np.linalg.norm(target[f] - base[f, root]))
            if far > float(rig.lengths[f, arm].sum()):
                raise InputError(f"the target is {far:.2f} from {sk.names[root]} at frame {f + first_frame}, beyond "
                                 f"the reach of "
                                 f"{sk.names[hand]} ({float(rig.lengths[f, arm].sum()):.2f}): move the target "
                                 "closer or hold it for fewer frames")
        # The trunk's rigid motion from the reach's frame to each frame of the window.
        trunk = _trunk(sk, anchor, chain)
        ref = base[frame, trunk] - base[frame, anchor]
        rot = kabsch(np.broadcast_to(ref, (len(W),) + ref.shape), base[W][:, trunk] - base[W, anchor][:, None])
        # Internal graphs (reference frame: the reach's frame).
        graphs, refs = self._graphs(base[frame], target[frame], anchor, chain, trunk)
        timing = learn_timing(self.database, chain)
        u = np.array([np.interp(tau, np.linspace(0.0, 1.0, TIMING_SAMPLES), timing[i]) for i in range(len(chain))])
        # The hand: from where the base has it to the target, bent as its graph bends.
        g = graphs[-1]
        chord = g[0] + u[-1][:, None] * (g[-1] - g[0])
        bend = _along(g, u[-1]) - chord
        # Around the shoulder: the direction turned and the distance changed in step, so the
        # hand never passes through the shoulder on its way (a straight line from a hand swung
        # back to a target ahead does; the elbow then whips round).
        # After the hold the hand lets go: the point it left is carried with the trunk (a target
        # the character walks past is not reached back for).
        goal = target[W].copy()
        after = W > last
        if after.any():
            i_last = int(np.searchsorted(W, last))
            held_at = rot[i_last].T @ (target[last] - base[last, anchor])
            goal[after] = base[W[after], anchor] + np.einsum("wij,j->wi", rot[after], held_at)
        path = base[W, root] + _arc(base[W, hand] - base[W, root], goal - base[W, root], u[-1]) \
            + np.einsum("wij,wj->wi", rot, bend)
        # On the way the trunk moves (a walk): each point is kept within the arm's reach.
        centre = base[W, root]
        away = path - centre
        far = np.linalg.norm(away, axis=1)
        limit = REACH_MARGIN * rig.lengths[W][:, arm].sum(axis=1)
        path = np.where((far > limit)[:, None], centre + away * (limit / np.maximum(far, 1e-12))[:, None], path)
        on = (W >= frame) & (W <= last)
        path[on] = target[W[on]]                                 # exact while on the target
        pins = np.full((F, len(sk), 3), np.nan)
        pins[W, hand] = path
        if rig.pins is not None:
            pins[~np.isnan(rig.pins)] = rig.pins[~np.isnan(rig.pins)]
        rig.pins = pins
        # The bake's targets (Eq. 2 does not depend on the reach), the arm's replaced below.
        targets, affinity = self.base.targets[W].copy(), self.base.affinity[W].copy()
        for i, j in enumerate(chain[:-1].tolist()):              # the arm above the hand: along its graph
            shift = np.einsum("wij,wj->wi", rot, _along(graphs[i], u[i]) - graphs[i][0])
            targets[:, j] = base[W, j] + shift                   # (their affinity stays: the pinned hand leads)
        # A graph that still jumps (references far apart) is eased like any target that outpaces
        # the source: the solver carries a frame's target motion into the next frame.
        targets = smooth_jumps(base[W], targets, rig.source_step)
        targets[:, hand] = path                                  # where it is pinned (collisions test from there)
        if body:
            # Collisions for the joints the reach moves: the arm, what hangs from it, and the
            # trunk above the legs (the feet keep the bake's places: their targets are the bake's).
            tested = np.zeros(len(sk), bool)
            tested[trunk] = True
            tested[[root, *arm]] = True
            for j in [root, *arm]:
                tested[sk.descendants(j)] = True
            collide = Collisions(self.mesh, b.body_height, F, joints=tested)
            collide.set_targets(W, targets)
            warper = rig.warper(collide, frames=W)
            # One substep a frame and the arm's hinges only: the body around the arm follows the
            # bake's targets, which its solve already met (measured: the same steps, limits and
            # hand as three substeps with every hinge, in half the time).
            warper.substeps = WINDOW_SUBSTEPS
            warper.final_iterations = max(warper.iterations, FINAL_ITERATIONS)
            if warper.hinges is not None:
                arm_hinges = warper.hinges[0].subset([root, *arm])
                warper.hinges = None if arm_hinges is None else (arm_hinges, warper.hinges[1])
            # Frame after frame from the window's first frame, where the reach has not started
            # yet (the base's pose is its solution): a frame's solve starts from the one before,
            # so the arm cannot swing to the other side between frames, as independent solves
            # did (measured: steps 1.5-2.6x the source's).
            solved = warper.run(targets, base[s], affinity, progress, segments=0, settled=True)
            solved = rig.finish(solved, W, held=~np.isnan(pins[W][..., 0]))
            side = solved[:, elbow]                              # the plane the solve bent the arm in
        else:
            # The arm alone (the paper's way): the body is the bake's.
            solved = base[W].copy()
            solved[:, hand] = path
            # The bake's arm turned by the smallest rotation taking its shoulder-hand line onto
            # the new one: the elbow keeps its side (a swivel continuous in time).
            turn = swing(base[W, hand] - base[W, root], path - base[W, root])
            side = base[W, root] + np.einsum("wij,wj->wi", turn, base[W, elbow] - base[W, root])
        # The elbow placed exactly between the shoulder and the pinned hand (two-bone IK): the
        # exact-length pass keeps a pinned joint where it is.
        l1, l2 = rig.lengths[W][:, upper].sum(axis=1), rig.lengths[W][:, lower].sum(axis=1)
        before = solved.copy()
        solved[:, elbow], solved[:, hand] = two_bone(solved[:, root], side, solved[:, hand], l1, l2)
        for top, end, bones, total in ((root, elbow, upper, l1), (elbow, hand, lower, l2)):
            along = np.cumsum(rig.lengths[W][:, bones], axis=1) / total[:, None]
            for k, j in enumerate(bones[:-1]):                # split joints stay on their straight bone
                solved[:, j] = solved[:, top] + along[:, k, None] * (solved[:, end] - solved[:, top])
        # Whatever else hangs from the arm (Unreal's twist bones) turns with the bone it hangs on.
        chain_joints = [root] + upper + lower[:-1]
        on_chain = set(chain_joints) | {hand}
        for k, nxt in zip(chain_joints, upper + lower):
            turn = swing(before[:, nxt] - before[:, k], solved[:, nxt] - solved[:, k])
            for c in sk.children(k).tolist():
                if c in on_chain:
                    continue
                sub = [c] + sk.descendants(c)
                solved[:, sub] = solved[:, k, None] + np.einsum("wij,wkj->wki", turn,
                                                                before[:, sub] - before[:, k, None])
        # What hangs from the hand turns with the forearm, so the wrist bends as in the base.
        below = sk.descendants(hand)
        if below:
            turn = swing(base[W, hand] - base[W, elbow], solved[:, hand] - solved[:, elbow])
            solved[:, below] = solved[:, hand, None] + np.einsum("wij,wkj->wki", turn,
                                                                   base[W][:, below] - base[W, hand][:, None])
        out = base.copy()
        out[W] = solved
        all_targets = self.base.targets.copy()
        all_targets[W] = targets
        all_affinity = self.base.affinity.copy()
        all_affinity[W] = affinity
        bone_error = self.base.bone_length_error.copy()
        bone_error[W] = rig.bone_error(solved, W)
        residual = np.linalg.norm(out - all_targets, axis=-1).mean(axis=1)
        limits = self.base.joint_limit_violations.copy()          # the window's only: the rest is the bake's
        limits[W] = rig.limit_violations(solved, W)
        result = AdaptResult(out, all_targets, all_affinity, bone_error, residual, rig.lengths,
                             limits, self.base.unbound_joints, self.base.hinges)
        info = ReachInfo(sk.names[hand], sk.names[anchor], frame, (int(s), int(e)), distance, reach,
                         float(np.linalg.norm(out[frame, hand] - target[frame])), refs,
                         time.perf_counter() - t0)
        return result, info

    def _graphs(self, pose, target, anchor, chain, trunk):
        """Per chain joint its graph (n,3) at the reach's frame, and the registered references."""
        start = pose[chain]                                                  # (K,3) unreached
        end = start.copy()
        end[-1] = target
        refs = []
        if self.database:
            clips = np.concatenate(self.database)
            which = np.concatenate([np.full(len(c), k) for k, c in enumerate(self.database)])
            at = np.concatenate([np.arange(len(c)) for c in self.database])
            ref = pose[trunk] - pose[anchor]
            rot = kabsch(clips[:, trunk] - clips[:, anchor][:, None], np.broadcast_to(ref, (len(clips),) + ref.shape))
            arm = np.einsum("dij,dkj->dki", rot, clips[:, chain] - clips[:, anchor][:, None]) + pose[anchor]
            hand = arm[:, -1]
            line = start[-1] + np.linspace(0.0, 1.0, STEPS + 2)[1:-1, None] * (target - start[-1])
            # A posture counts only if its hand is near its step (a database that never reaches
            # there gives nothing rather than a posture from elsewhere).
            near = NEAR_FRACTION * float(np.linalg.norm(target - start[-1]) + np.linalg.norm(pose[chain[-1]]
                                                                                           - pose[chain[0]]))
            picks = []
            for q in line:
                d = np.linalg.norm(hand - q, axis=1)
                k = int(np.argmin(d))
                if d[k] <= near:
                    picks.append(k)
            d = np.linalg.norm(hand - target, axis=1)
            last = int(np.argmin(d))
            if d[last] <= near:
                end = arm[last].copy()
                end[-1] = target
                refs_at = picks + [last]
            else:
                refs_at = picks
            refs = [(int(which[k]), int(at[k])) for k in refs_at]
            series = np.concatenate([start[None], arm[picks], end[None]])    # (n,K,3)
        else:
            series = np.stack([start, end])
        graphs = [normalise_graph(series[:, i]) for i in range(len(chain))]
        return graphs, refs


def reach(binding, mesh, hand, target, frame, window=WINDOW, database=(), progress=None, hold=0, body=True,
          **adapt_options):
    """One reach (see ``ReachSession``): ``(AdaptResult, ReachInfo)``."""
    return ReachSession(binding, mesh, database, **adapt_options).reach(hand, target, frame, window, progress, hold,
                                                                        body=body)
