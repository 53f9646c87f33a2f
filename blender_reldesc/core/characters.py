"""Interactions between characters (Al-Asqhar et al. 2013, §9 "Multiple characters").

Another character's bones are capsules: a segment (parent joint to child joint) and a radius.
Every joint of a character is described relative to each capsule of its partners as well as
to the environment: the descriptor point is the source's closest point on the bone's segment,
kept at its place along the bone (a point re-found from where the joint now is would slide
with it, leaving it free to drift along the bone), and the joint's offset from it is kept in
the bone's own frame (the bone's axis, and a reference across it from the neighbouring bones).

When the capsules change (a partner grows 20 %, its radii with it) the offset is rescaled
so that the joint keeps its clearance from the capsule's surface (Eq. 12):
``|(α, β, γ)| = r_i + l_ij``, the radius new and the clearance as in the source.

``bind_partners(bindings, radii)`` takes each character's ``Binding`` (bound with the
environment as usual; the clips have the same frames) and keeps, per character, joint and
partner bone, the source's offsets. ``adapt_partners(...)`` adapts the characters together:

1. each character is first adapted to the environment alone;
2. then, for ``rounds`` rounds (five: the paper's three iterations, the first thrice, and up to
   two more with every capsule while the last still moved a joint ``SETTLE_TOLERANCE`` body
   heights), each character is
   adapted again with its joints also drawn to where its partners' capsules, as just solved,
   put them; the spatial window shrinks over the rounds: every capsule with weight 1, then
   within half the body height, then the fade window of Eq. 5 (r2 = r1 + H / 4);
3. a joint's target blends its environment target and its partner target by how close each
   is (the descriptors' proximity weighting of ``descriptors.reconstruct``), and joints are
   pushed out of the partners' capsules where they are deeper than in the source.

Product decision: the paper re-projects the partner descriptors inside each frame's solver
iterations; here each round solves whole clips one character after the other (block
Gauss-Seidel over characters), so each character keeps the whole single-character pipeline
(joint limits, hinges, collisions, exact bone lengths, the batched solver).

``PartnersLiveSession`` runs the rounds frame by frame for a live preview (two a frame), and
``adapt_partners(solver="interaction_mesh")`` solves the whole group in one interaction mesh
instead (``adaptation.adapt_group_interaction_mesh``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from . import constants as C
from .adaptation import AdaptResult, LiveSession, Rig, adapt, adapt_group_interaction_mesh, with_guide
from .solvers.interaction_mesh import check_solver
from .errors import InputError
from .geometry import cross

#: Default capsule radius as a fraction of the bone's length (the body's average limb).
RADIUS_FRACTION = 0.12
#: Rounds of solving each character against its partners' latest poses: three with every
#: capsule weighted, then the two narrower windows. The collar tie with a partner scaled 0.8
#: held 3.2 cm off the shoulders after three rounds (one with every capsule), about 1 cm after
#: five; eight hold them as five do, every joint within 1.3 cm on 40- to 300-frame clips (an
#: elbow 5.1 cm on a 30-frame one; the rounds with every capsule settle: 31, 11, 3, 2, 0.6 cm).
ROUNDS = 5
#: Rounds with every capsule added while the last one still moved a joint more than
#: ``SETTLE_TOLERANCE`` body heights (at most ``SETTLE_ROUNDS``), before the narrower windows.
#: The collar tie with the smaller partner standing over its feet (it had leaned back, read as a
#: duck) moved 28, 7, 6 cm in its three, then 2 and 0.2: five rounds ended 6 cm from eight.
SETTLE_ROUNDS = 2
SETTLE_TOLERANCE = 0.005
#: Solver settings of a round against the partners (``solvers.Warper``): the rounds before the
#: last only feed the next one's targets, so their segments join within 1e-3 body heights and
#: their frame 0 settles to 1e-5.
GUIDED_SOLVER = dict(static_tolerance=1e-5, static_steps=200, segment_tolerance=1e-3)
#: ... and the last round's, whose result is written: no step at a join a viewer could see
#: (1e-4 body heights: 0.2 mm on a 1.7 m body; 1e-5 cost the collar tie 10-15 % more time).
LAST_ROUND_SOLVER = dict(static_tolerance=1e-6, segment_tolerance=1e-4)
#: A character whose targets, its partners' included, are within this of where it is (body
#: heights), and that no capsule pushes, is not adapted again.
REST_TOLERANCE = 1e-9
#: Joints farther than this (body heights) from every partner capsule in the source are not
#: pushed out of the partners' capsules.
REACH = 0.2
#: Fade window of the last round (Eq. 5), body heights.
WINDOW = 0.25
#: A partner capsule whose surface is this close (body heights) counts as touched:
#: proximity weighting ``min(1, d0 / l)``.
CONTACT = 0.015
#: Whole-body interactions (``lean_anchors``): a hand within this of a partner's capsule
#: (body heights) in the source, on at least ``LEAN_FRAMES`` frames in a row, is a hold the
#: trunk leans to keep; the lean eases in and out over ``LEAN_EASE`` frames.
LEAN_CONTACT = 0.04
LEAN_FRAMES = 8
LEAN_EASE = 6
#: The joint above a limb's end (elbow, knee) is steered by partners only on the frames where it
#: or that end is within this of a partner's capsule in the source (body heights), eased in and
#: out over ``LEAN_EASE`` frames: a hug's knees, near the partner's legs without touching them,
#: steered each other round after round (6-8 cm a round), and a knee drawn down by a partner's
#: crouching legs took the ankle 2-4 cm into the floor.
LIMB_TOUCH = 0.04
#: The trunk leans where a holding hand's shoulder is farther from the hand's target than the
#: source's shoulder-to-hand distance by more than this fraction of it, or than ``LEAN_REACH``
#: of the arm's full length; by at most ``LEAN_MAX_DEGREES``.
LEAN_SLACK = 0.05
LEAN_REACH = 0.97
LEAN_MAX_DEGREES = 30.0


def capsule_radii(skeleton, motion, fraction=RADIUS_FRACTION, radii=None):
    """(J,) the capsule radius of the bone ending at each joint (0 for roots): ``fraction`` of
    the bone's mean length, or ``radii`` ({joint name: radius} or (J,), NaN = default)."""
    lengths = skeleton.bone_lengths(motion).mean(axis=0)
    out = np.where(skeleton.parents >= 0, fraction * lengths, 0.0)
    if radii is None:
        return out
    if isinstance(radii, dict):
        for name, r in radii.items():
            out[skeleton.index(name)] = float(r)
        return out
    radii = np.asarray(radii, float)
    if radii.shape != out.shape:
        raise InputError(f"radii must have one value per joint ({len(out)}), got shape {radii.shape}")
    return np.where(np.isnan(radii), out, radii)


def closest_on_segments(p, a, b):
    """Closest points on segments a->b to points p (broadcast, (...,3)): ``(point, t)``."""
    ab = b - a
    denom = np.einsum("...d,...d->...", ab, ab)
    t = np.einsum("...d,...d->...", p - a, ab) / np.maximum(denom, 1e-300)
    t = np.clip(t, 0.0, 1.0)
    return a + t[..., None] * ab, t


def _frame_candidates(skeleton, bones):
    """(B,K,2) joint pairs whose difference may serve as a bone's reference direction, in
    order of preference (-1: none): the parent bone, the first child bone, the body's side
    line (the root's two children farthest apart in the rest of the clip: chosen by the
    caller)."""
    parents = skeleton.parents
    kids = [skeleton.children(j) for j in range(len(skeleton))]
    out = np.full((len(bones), 2, 2), -1, np.int64)
    for k, (pa, ch) in enumerate(bones.tolist()):
        if parents[pa] >= 0:
            out[k, 0] = (parents[pa], pa)
        if len(kids[ch]):
            out[k, 1] = (ch, kids[ch][0])
    return out


def _side_pair(skeleton, motion):
    """The root's two children farthest apart on average (hips: the thighs), or None."""
    roots = np.flatnonzero(skeleton.parents < 0)
    rk = skeleton.children(int(roots[0])) if len(roots) else []
    if len(rk) < 2:
        return None
    spread = np.linalg.norm(motion[:, rk][:, :, None] - motion[:, rk][:, None], axis=-1).mean(axis=0)
    i, j = divmod(int(np.argmax(spread)), len(rk))
    return int(rk[i]), int(rk[j])


def _bone_frames(skeleton, positions, bones, side=None, candidates=None):
    """(F,B,3,3) a frame per bone of ``positions`` (F,J,3) (columns: the axis, a reference
    across it, their cross product). The reference is the parent bone's direction across the
    axis, else the first child bone's, else the body's side-to-side line (``side``: a joint
    pair), else a world axis: the first of them more than 10° off the axis on that frame."""
    P = positions
    u = P[:, bones[:, 1]] - P[:, bones[:, 0]]
    u = u / np.maximum(np.linalg.norm(u, axis=-1, keepdims=True), 1e-300)
    pairs = _frame_candidates(skeleton, bones) if candidates is None else candidates
    F, B = u.shape[:2]
    # The candidates (F,B,K,3) filled in place: the joint pairs', the side line's, the world
    # axes' (a live preview asks four times a frame: numpy calls are its cost).
    k = pairs.shape[1]
    V = np.empty((F, B, k + (side is not None) + 3, 3))
    V[:, :, :k] = P[:, pairs[..., 1]] - P[:, pairs[..., 0]]
    V[:, :, :k][:, pairs[..., 0] < 0] = 0.0
    if side is not None:
        V[:, :, k] = (P[:, side[1]] - P[:, side[0]])[:, None]
    V[:, :, -3:] = _WORLD_AXES
    across = V - np.einsum("fbkd,fbd->fbk", V, u)[..., None] * u[:, :, None]
    n = np.linalg.norm(across, axis=-1)
    ok = n > _SIN_10 * np.linalg.norm(V, axis=-1)
    first = np.argmax(ok, axis=2)                                                # a world axis always is
    fi, bi = np.arange(F)[:, None], np.arange(B)[None]
    ref = across[fi, bi, first] / np.maximum(n[fi, bi, first], 1e-300)[..., None]
    return np.stack([u, ref, cross(u, ref)], axis=-1)


_WORLD_AXES = np.eye(3)
_SIN_10 = np.sin(np.radians(10.0))


@dataclass
class Relations:
    """The source's relations of one character's joints to one partner's capsules, per frame:
    ``offset (F,J,B,3)`` the joint's offset from its closest point on each bone, in the
    bone's frame; ``clearance (F,J,B)`` its distance to the capsule's surface (Eq. 12's
    l_ij, may be negative for a joint inside a capsule); the partner index, its bones (B,2)
    and the capsule radii (B,) it was bound with."""

    partner: int
    bones: np.ndarray
    radii: np.ndarray
    offset: np.ndarray
    clearance: np.ndarray
    #: (F,J,B) where along each bone (0: its parent joint, 1: its child) the closest point was
    along: np.ndarray


@dataclass
class Partners:
    """``bind_partners``' result: per character, its ``Relations`` to each partner."""

    relations: list = field(default_factory=list)
    radii: list = field(default_factory=list)
    skeletons: list = field(default_factory=list)
    body_height: float = 1.0
    #: per character, the joint pair of its side line (``_side_pair``) for the bone frames
    sides: list = field(default_factory=list)
    #: (character, partner) -> the reference joint pairs of the partner's bones
    #: (``_frame_candidates``), found on first use: a live preview asks at every round
    _candidates: dict = field(default_factory=dict, repr=False, compare=False)

    def candidates(self, c, rel):
        key = (c, rel.partner)
        got = self._candidates.get(key)
        if got is None:
            got = self._candidates[key] = _frame_candidates(self.skeletons[rel.partner], rel.bones)
        return got


#: A root joint with one child more than this far from it (a share of the body's extent) is a
#: root on the floor (Unreal's ``root`` under the pelvis), not a body part: no capsule.
FLOOR_ROOT = 0.3


def _bones(skeleton, motion):
    """(B,2) the bones of non-zero length (parent, child), but a floor-level root's bone (its
    capsule ran from the floor up through the pelvis: a cape skinned to a UE rig, carried onto
    longer legs, followed it and stretched 11 %)."""
    bones = skeleton.bones
    length = skeleton.bone_lengths(motion).mean(axis=0)
    keep = length[bones[:, 1]] > 1e-6 * max(float(length.max(initial=0.0)), 1e-300)
    extent = float(np.median(np.ptp(motion, axis=1).max(axis=-1))) if motion.size else 0.0     # the body's size
    parents = np.asarray(skeleton.parents)
    for k, (p, c) in enumerate(bones.tolist()):
        if parents[p] < 0 and len(skeleton.children(p)) == 1 and length[c] > FLOOR_ROOT * extent:
            keep[k] = False
    return bones[keep]


def bind_partners(bindings, radii=None):
    """Relations between characters (§9) from their source clips.

    bindings : a ``Binding`` per character (the same number of frames).
    radii : per character, None (``RADIUS_FRACTION`` of each bone's length), (J,) radii of the
        bone ending at each joint, or {joint name: radius}.
    """
    bindings = list(bindings)
    if len(bindings) < 2:
        raise InputError("partners need at least two characters")
    F = bindings[0].frame_count
    if any(b.frame_count != F for b in bindings):
        raise InputError("the characters' clips must have the same frames: "
                         + ", ".join(str(b.frame_count) for b in bindings))
    radii = [None] * len(bindings) if radii is None else list(radii)
    caps = [capsule_radii(b.skeleton, b.motion, radii=r) for b, r in zip(bindings, radii)]
    out = Partners(radii=caps, skeletons=[b.skeleton for b in bindings],
                   body_height=float(np.mean([b.body_height for b in bindings])),
                   sides=[_side_pair(b.skeleton, b.motion) for b in bindings])
    for c, b in enumerate(bindings):
        mine = []
        for o, other in enumerate(bindings):
            if o == c:
                continue
            bones = _bones(other.skeleton, other.motion)
            a, e = other.motion[:, bones[:, 0]], other.motion[:, bones[:, 1]]           # (F,B,3)
            p = b.motion[:, :, None]                                                 # (F,J,1,3)
            foot, along = closest_on_segments(p, a[:, None], e[:, None])             # (F,J,B,3)
            v = p - foot
            frames = _bone_frames(other.skeleton, other.motion, bones, out.sides[o])   # (F,B,3,3)
            offset = np.einsum("fbdk,fjbd->fjbk", frames, v)
            r = caps[o][bones[:, 1]]
            mine.append(Relations(o, bones, r, offset, np.linalg.norm(v, axis=-1) - r, along))
        out.relations.append(mine)
    return out


def _clip01(x):
    """``x`` clipped to [0, 1] (NaN stays NaN, as with np.clip)."""
    return np.minimum(np.maximum(x, 0.0), 1.0)


def partner_targets(partners, c, positions, poses, radii=None, window=None, body_height=None, joints=None,
                    frames=None):
    """Targets of character ``c``'s joints from its partners' capsules, with their weights.

    positions : (F,J,3) the character's current joints (only their shape is read: each
        descriptor point is where along its bone the source's closest point was); poses : per character (F,J_o,3) its current joints
        (the partners' are used); radii : per character (J_o,) capsule radii now (default:
        as bound); window : None for every capsule with weight 1, else the fade window
        (Eq. 5) in length units.
    joints : optional (K,) the joints wanted (the others get NaN targets and proximity 0).
    frames : optional slice of the clip's frames that ``positions`` and ``poses`` are (a live
        preview's one frame); default all.
    Returns ``targets (F,J,3)``, ``proximity (F,J)`` in [0, 1] (how close the nearest weighted
    capsule is: ``min(1, d0 / clearance)``), ``depth (F,J)`` the source's deepest
    penetration into each partner's capsules (0 where none; for the collision push), and
    ``distance (F,J)`` the source's clearance from the nearest capsule (inf for the joints
    not wanted).
    """
    H = partners.body_height if body_height is None else body_height
    rels = partners.relations[c]
    F, J, _ = positions.shape
    at = slice(None) if frames is None else frames
    js = np.arange(J) if joints is None else np.asarray(joints, np.int64)
    targets = np.full((F, J, 3), np.nan)
    prox = np.zeros((F, J))
    distance = np.full((F, J), np.inf)
    if not rels:
        return targets, prox, prox.copy(), distance
    # The source's deepest penetration, for every joint (the collision push).
    depth = np.maximum(-np.concatenate([rel.clearance[at] for rel in rels], axis=2).min(axis=2), 0.0)
    if not len(js):
        return targets, prox, depth, distance
    parts = []
    for rel in rels:
        o = rel.partner
        pose = poses[o]
        bones = rel.bones
        r_now = (partners.radii[o] if radii is None or radii[o] is None else radii[o])[bones[:, 1]]
        a, e = pose[:, bones[:, 0]], pose[:, bones[:, 1]]
        foot = a[:, None] + rel.along[at][:, js, :, None] * (e - a)[:, None]               # (F,K,B,3)
        axes = _bone_frames(partners.skeletons[o], pose, bones, partners.sides[o],
                            partners.candidates(c, rel))                                   # (F,B,3,3)
        # Eq. 12: the offset's length becomes the new radius plus the source clearance.
        offset, clearance = rel.offset[at][:, js], rel.clearance[at][:, js]
        length = np.linalg.norm(offset, axis=-1)
        want = np.maximum(r_now[None, None] + clearance, 0.0)
        scale = np.divide(want, length, out=np.ones_like(length), where=length > 1e-12)
        t = foot + np.einsum("fbdk,fjbk->fjbd", axes, offset * scale[..., None])
        parts.append((t, clearance))
    # (One partner: its arrays as they are. ``_clip01`` is np.clip(x, 0, 1) without its wrapper:
    # a live preview asks four times a frame.)
    T = parts[0][0] if len(parts) == 1 else np.concatenate([t for t, _ in parts], axis=2)     # (F,K,Btot,3)
    L = parts[0][1] if len(parts) == 1 else np.concatenate([lc for _, lc in parts], axis=2)   # (F,K,Btot)
    dist = np.maximum(L, 0.0)
    d0 = CONTACT * H
    if window is None:
        w = np.ones_like(dist)
    else:
        r1 = dist.min(axis=2, keepdims=True)
        w = _clip01(1.0 - (dist - r1) / window)                                            # Eq. 5
        # Product decision: weighted by proximity too, min(1, d0 / clearance), as the
        # environment's affinity is: within the paper's window (a quarter of the body height)
        # a hand holding a grown partner's hand also kept its offsets from the partner's
        # forearm and chest, and the hands stayed 7 cm apart where they were 4.
        w = w * _clip01(d0 / np.maximum(dist, d0))
    den = w.sum(axis=2)
    targets[:, js] = np.einsum("fjb,fjbd->fjd", w, T) / np.maximum(den, 1e-300)[..., None]
    distance[:, js] = dist.min(axis=2)
    prox[:, js] = _clip01(d0 / np.maximum(distance[:, js], d0))
    return targets, prox, depth, distance


def capsule_overlap(skeleton, pa, pb, ra, rb, samples=7):
    """The deepest overlap (length units; negative: the nearest gap) of any capsule of one
    character (joints ``pa`` (F,J,3), radii ``ra`` (J,)) with any of another of the same
    skeleton (``pb``, ``rb``) over the frames, ``samples`` points along each bone."""
    bones = _bones(skeleton, pa)
    a0, a1, b0, b1 = pa[:, bones[:, 0]], pa[:, bones[:, 1]], pb[:, bones[:, 0]], pb[:, bones[:, 1]]
    worst = -np.inf
    for t in np.linspace(0.0, 1.0, samples):
        q = a0 + t * (a1 - a0)
        foot, _ = closest_on_segments(q[:, :, None], b0[:, None], b1[:, None])
        gap = np.linalg.norm(q[:, :, None] - foot, axis=-1) - ra[bones[:, 1]][None, :, None] \
            - rb[bones[:, 1]][None, None, :]
        worst = max(worst, float(-gap.min()))
    return worst


def push_out_of_capsules(x, a, b, r, allowed):
    """Points ``x`` (n,V,3), in place, out of capsules (segments a->b and radii r, broadcast to
    (n,V,K,3) and (n,V,K)) where deeper than ``allowed`` (broadcast to (n,V,K)): each along
    the direction from its deepest capsule's axis, by how much deeper it is."""
    foot, _ = closest_on_segments(x[:, :, None], a, b)
    v = x[:, :, None] - foot
    d = np.linalg.norm(v, axis=-1)
    inside = r - allowed - d                                                      # >0: too deep
    k = np.argmax(inside, axis=2)
    worst = np.take_along_axis(inside, k[..., None], axis=2)[..., 0]
    push = worst > 0
    if push.any():
        s, q = np.nonzero(push)
        vv = v[s, q, k[s, q]]
        dd = d[s, q, k[s, q]]
        direction = np.where(dd[:, None] > 1e-12, vv / np.maximum(dd, 1e-300)[:, None], [0.0, 0.0, 1.0])
        x[s, q] += direction * worst[s, q][:, None]
    return x


class CapsuleCollisions:
    """Pushes a character's joints out of its partners' capsules (as they now are), where a
    joint is deeper than it was in the source (``depth`` (F,J)), chained after the
    environment's collisions (``inner``).

    capsules : per partner, ``(a (F,B,3), b (F,B,3), r (B,))`` its bones' segments and radii.
    joints : optional (K,) the joints that can reach a capsule (None: all).
    pairs : optional, per partner, (P,2) (index into ``joints``, bone) the pairs tested (None:
        every joint against every bone).
    first : the clip's frame that the arrays' first row is (a live preview's frame): the
        solver's frame ``f`` reads row ``f - first``.

    Called at every solver substep, so each capsule's direction and inverse squared length
    are found once, a joint is tested only against the bones of its pairs, and a batch with
    no joint too deep (most substeps) is told apart with squared distances alone. A joint
    too deep goes out along the direction from its deepest capsule's axis, by how much deeper
    it is (as ``push_out_of_capsules``)."""

    def __init__(self, capsules, depth, inner=None, joints=None, pairs=None, first=0):
        self.depth = depth
        self.inner = inner
        self.joints = joints
        self.first = int(first)
        K = depth.shape[1] if joints is None else len(joints)
        self._sets = []
        for i, (a, b, r) in enumerate(capsules):
            B = a.shape[1]
            if pairs is None or pairs[i] is None:
                pk, pb = np.repeat(np.arange(K), B), np.tile(np.arange(B), K)
            else:
                pk, pb = np.asarray(pairs[i], np.int64).reshape(-1, 2).T
            if not len(pk):
                continue
            ab = b - a
            inv = 1.0 / np.maximum(np.einsum("fbd,fbd->fb", ab, ab), 1e-300)
            self._sets.append((pk, pb, a, ab, inv, np.asarray(r, float)[pb]))
        self._K = K

    def set_targets(self, frames, targets):
        if self.inner is not None:
            self.inner.set_targets(frames, targets)

    def __call__(self, p, fs):
        if p.ndim == 2:
            return self(p[None], np.atleast_1d(fs))[0]
        if self.inner is not None:
            p = self.inner(p, fs)
        rows = np.asarray(fs)
        fs = rows - self.first if self.first else rows
        js = slice(None) if self.joints is None else self.joints
        allowed = self.depth[fs][:, js]                                              # (S,K)
        x = None
        for pk, pb, a, ab, inv, r in self._sets:
            if x is None:
                x = np.ascontiguousarray(p[:, js])                                   # (S,K,3)
            AB = ab[fs][:, pb]                                                       # (S,P,3)
            w = x[:, pk] - a[fs][:, pb]
            t = np.einsum("spd,spd->sp", w, AB)
            t *= inv[fs][:, pb]
            np.clip(t, 0.0, 1.0, out=t)
            w -= t[..., None] * AB                                                   # from the axis
            reach = r - allowed[:, pk]                                               # (S,P)
            d2 = np.einsum("spd,spd->sp", w, w)
            deep = (reach > 0) & (d2 < reach * np.abs(reach))
            if not deep.any():
                continue
            s, q = np.nonzero(deep)
            d = np.sqrt(d2[s, q])
            inside = reach[s, q] - d
            key = s * self._K + pk[q]
            order = np.lexsort((inside, key))                    # each joint's deepest pair last
            ks = key[order]
            pick = order[np.append(ks[1:] != ks[:-1], True)]
            s, q, d, inside = s[pick], q[pick], d[pick], inside[pick]
            direction = np.where(d[:, None] > 1e-12, w[s, q] / np.maximum(d, 1e-300)[:, None], [0.0, 0.0, 1.0])
            x[s, pk[q]] += direction * inside[:, None]
        if x is not None:
            p[:, js] = x
        return p


def adapt_partners(bindings, meshes, partners, bone_lengths=None, radii=None, poses=None, rounds=ROUNDS,
                   per_character=None, progress=None, contacts=None, outcomes=None, whole_body=True,
                   changes=None, solver="descriptors", settle=True, **options):
    """Adapt characters together (§9). Returns a list of ``AdaptResult``, one per character.

    bindings : as for ``bind_partners``; meshes : the environment now, per character (or one
        TriMesh for all); partners : ``bind_partners``' result.
    bone_lengths, radii : per character (None: unchanged), as ``adapt``'s bone_lengths and
        ``capsule_radii``'s radii.
    poses : per character, None to adapt it, or (F,J,3) joints it has now (its motion edited
        in the scene): it is not adapted, the others follow it.
    per_character : optional list of dicts of ``adapt`` options for each character (its
        affinity overrides, painted influence, hinges), on top of ``options``.
    progress : optional callable ``(done, total)`` over all the adapts; returning False cancels.
    contacts : optional list, per character, of ``contacts.adapt_with_contacts`` settings
        (reposition, phases, locked, ...) or None: its last round checks its contacts (and
        re-positions them) with the partners' targets; ``outcomes`` (a list as long, when
        given) receives each character's contact outcomes (None where not checked).
    whole_body : the trunk leans to keep a hold (``lean_anchors``: a hand on a partner in the
        source keeps its arm's shoulder-to-hand distance, the trunk turning about the hips),
        where the partner does not hold this character back; False steers the limbs alone.
    changes : optional list that receives, per round, the farthest any joint of any character
        moved from the round before (length units): the rounds' convergence.
    settle : the rounds with every capsule go on, up to ``SETTLE_ROUNDS`` more, while the last
        one moved a joint more than ``SETTLE_TOLERANCE`` body heights; False: ``rounds`` exactly.
    solver : "descriptors" (the rounds above) or "interaction_mesh": every character's joints in
        one interaction mesh per frame, solved together (``adaptation.adapt_group_interaction_
        mesh``; the partners' capsules, rounds, leans and contacts do not apply, the characters
        must share one environment).
    options : passed to every ``adapt``.
    """
    bindings = list(bindings)
    n = len(bindings)
    if len(partners.relations) != n:
        raise InputError(f"the partners were bound for {len(partners.relations)} characters, not {n}")
    meshes = list(meshes) if isinstance(meshes, (list, tuple)) else [meshes] * n
    bone_lengths = [None] * n if bone_lengths is None else list(bone_lengths)
    poses = [None] * n if poses is None else list(poses)
    own = [dict(options, **(per_character[c] if per_character is not None and per_character[c] else {}))
           for c in range(n)]
    if check_solver(solver) == "interaction_mesh":
        for m in meshes[1:]:
            if m is not meshes[0] and (m.vertex_count != meshes[0].vertex_count or
                                       not np.array_equal(m.vertices, meshes[0].vertices)):
                raise InputError("the interaction-mesh solver adapts characters in one environment: give one mesh")
        shared = {k: own[0][k] for k in ("collisions", "solver_options") if k in own[0]}
        return adapt_group_interaction_mesh(bindings, meshes[0], bone_lengths, own, poses, progress, **shared)
    solving = sum(p is None for p in poses)
    extra = SETTLE_ROUNDS if settle and rounds >= 3 else 0
    total, done = max(1, solving * (1 + max(rounds, 0) + extra)), [0]

    def step_progress():
        if progress is None:
            return None

        def report(k, K):
            return progress(done[0] * 1000 + int(1000 * k / max(K, 1)), total * 1000)
        return report

    def finished_one():
        done[0] += 1

    rigs = [Rig(b, bl) for b, bl in zip(bindings, bone_lengths)]
    group = _Group(bindings, partners, rigs, bone_lengths, radii, whole_body, [p is None for p in poses])
    H = partners.body_height
    # A round's frame 0 settles to 1e-5 body heights (1e-6 in the last) in at most 200 steps a
    # stage, not to the clip default 1e-8 in 4000: against the partners' targets it stepped
    # 250-1700 times a round (a third of it). A character's own solver options win.
    def settings_of(c, *defaults):
        opts = {k: v for d in defaults for k, v in d.items()}
        opts.update(own[c].get("solver_options") or {})
        return dict(own[c], solver_options=opts)
    guided = [settings_of(c, GUIDED_SOLVER) for c in range(n)]
    last = [settings_of(c, GUIDED_SOLVER, LAST_ROUND_SOLVER) for c in range(n)]
    results = [None] * n
    settled = [False] * n
    current = []
    # With rounds to come, no character is adapted alone first: the rounds only need where
    # its joints are for the partners' closest points, and its targets from the environment
    # will do (two whole-clip solves of eight saved, the hands as close).
    for c, b in enumerate(bindings):
        if poses[c] is not None:
            pose = np.asarray(poses[c], float)
            if pose.shape != b.motion.shape:
                raise InputError(f"pose {c} must have the clip's shape {b.motion.shape}, got {pose.shape}")
            current.append(pose)
        elif rounds >= 1:
            current.append(rigs[c].targets(meshes[c])[0])
            finished_one()
        else:
            results[c] = adapt(b, meshes[c], bone_lengths=bone_lengths[c], progress=step_progress(), **own[c])
            finished_one()
            current.append(results[c].positions)
            settled[c] = float(np.abs(results[c].targets - results[c].positions).max()) <= REST_TOLERANCE * \
                partners.body_height
    windows = _windows(rounds, H)
    r = 0
    while r < len(windows):
        window = windows[r]
        before = [p.copy() for p in current]
        for c, b in enumerate(bindings):
            if poses[c] is not None:
                continue
            guide = group.guide(c, current, window)
            if settled[c] and _at_rest(current[c], guide.targets, guide.proximity, guide.collide, H):
                # Its own targets and its partners' are where it already is, and no capsule
                # pushes it (an unedited or rigidly moved pair): the round would give it back.
                finished_one()
                continue
            plan = None if contacts is None or r < len(windows) - 1 else contacts[c]
            if plan is None:
                results[c] = adapt(b, meshes[c], bone_lengths=bone_lengths[c], guide=guide,
                                   progress=step_progress(), **(guided[c] if r < len(windows) - 1 else last[c]))
            else:
                from .contacts.repositioning import adapt_with_contacts
                results[c], found = adapt_with_contacts(b, meshes[c], bone_lengths=bone_lengths[c], guide=guide,
                                                        progress=step_progress(), **plan, **last[c])
                if outcomes is not None:
                    outcomes[c] = found
            finished_one()
            current[c] = results[c].positions
            settled[c] = float(np.abs(results[c].targets - results[c].positions).max()) <= REST_TOLERANCE * H
        moved = max(float(np.linalg.norm(p - q, axis=-1).max()) for p, q in zip(current, before))
        if changes is not None:
            changes.append(moved)
        if extra and window is None and r + 1 < len(windows) and windows[r + 1] is not None \
                and moved > SETTLE_TOLERANCE * H:
            windows.insert(r + 1, None)
            extra -= 1
        r += 1
    if progress is not None:                     # the end, whether or not the settling rounds ran
        progress(total * 1000, total * 1000)
    for c, b in enumerate(bindings):
        if results[c] is None:                   # given, not adapted: reported as it is
            zeros = np.zeros(current[c].shape[:2])
            results[c] = AdaptResult(current[c], current[c], zeros, zeros[:, 0], zeros[:, 0],
                                     b.skeleton.bone_lengths(current[c]), zeros, {}, [])
    return results


def _windows(rounds, body_height):
    """Each round's Eq. 5 window: the paper's three (every capsule, half the body height, Eq. 5's
    fade), the first repeated when there are more rounds. With the limbs alone steered
    (``steered_joints``) a grown partner's hand met the other's (4 cm apart in the source)
    3.8-4.0 cm apart after three rounds, as after five."""
    H = body_height
    return ([None] * max(rounds - 2, 1) + [0.5 * H, WINDOW * H])[-rounds:] if rounds >= 1 else []


class _Group:
    """What adapting a group needs besides the poses, found once from the source (``adapt_partners``
    and ``PartnersLiveSession``): each character's capsule radii now, the joints partners steer
    and on which frames, the joints and (joint, bone) pairs that can reach a partner's capsule,
    and the holds the trunk leans to keep. ``guide`` gives a character's ``Guide`` from the
    group's current poses, for the whole clip or a slice of it."""

    def __init__(self, bindings, partners, rigs, bone_lengths, radii, whole_body, adapted):
        n = len(bindings)
        H = self.H = partners.body_height
        self.partners = partners
        radii = [None] * n if radii is None else list(radii)
        self.radii = [capsule_radii(b.skeleton, b.motion, radii=r) if r is not None else partners.radii[c]
                      for c, (b, r) in enumerate(zip(bindings, radii))]
        # The bone lengths' scale goes to the default radii too (a bigger character is thicker).
        for c, bl in enumerate(bone_lengths):
            if bl is not None and radii[c] is None:
                self.radii[c] = partners.radii[c] * rigs[c].scale
        self.steer = [np.flatnonzero(steered_joints(b)) for b in bindings]
        self.touch = [_touching_above(b, partners, c) for c, b in enumerate(bindings)]
        # The joints that can reach a partner's capsule: within REACH body heights of one in the
        # source (a grown partner comes nearer, not across the room); the others are not tested.
        self.reach = [np.flatnonzero(np.min([rel.clearance.min(axis=(0, 2)) for rel in partners.relations[c]],
                                            axis=0) < REACH * H) if partners.relations[c] else None
                      for c in range(n)]
        # ... and of each partner, the bones those joints come within REACH of (``used``), and the
        # (joint, bone) pairs that do, the bones renumbered among those: a joint is tested against
        # those bones only.
        self.near = []
        for c in range(n):
            mine = []
            for rel in partners.relations[c]:
                near = (np.argwhere(rel.clearance[:, self.reach[c]].min(axis=0) < REACH * H)
                        if self.reach[c] is not None and len(self.reach[c]) else np.zeros((0, 2), np.int64))
                used, local = np.unique(near[:, 1], return_inverse=True)
                mine.append((rel.bones[used], np.stack([near[:, 0], local.reshape(-1)], axis=1)))
            self.near.append(mine)
        leans = [lean_anchors(b, partners, c, rigs[c]) if whole_body and adapted[c] else None
                 for c, b in enumerate(bindings)]
        # Where a partner being adapted holds this character back (a collar tie, a hug), neither
        # leans: the holds close a loop through both trunks, and leaning to keep one's arms as
        # they were moved the other's hands, round after round (the collar tie scaled 0.8: hands
        # 5.5 cm off where the limbs alone hold 0.9, poses 45 cm from eight rounds' after five).
        hands = [None if lean is None else lean.hands for lean in leans]
        for c in range(n):
            if leans[c] is None:
                continue
            back = [_holds(partners, o, c, hands[o]) for o in range(n) if o != c and hands[o] is not None]
            back = [w for w in back if w is not None]
            if back:
                free = 1.0 - np.max(back, axis=0)
                leans[c] = replace(leans[c], weight=leans[c].weight * free[:, None])
                if not leans[c].weight.any():
                    leans[c] = None
        self.leans = leans

    def guide(self, c, current, window, frames=None):
        """Character ``c``'s ``Guide`` from the group's poses ``current`` (per character (n,J,3))
        in Eq. 5's ``window`` (None: every capsule); ``frames``: the slice of the clip they are
        (default: all of it)."""
        at = slice(None) if frames is None else frames
        t, prox, depth, distance = partner_targets(self.partners, c, current[c], current, self.radii, window,
                                                   self.H, joints=self.steer[c], frames=frames)
        if self.touch[c] is not None:
            prox = prox * self.touch[c][at]
        caps, pairs = [], []
        for rel, (bones, near) in zip(self.partners.relations[c], self.near[c]):
            o = rel.partner
            caps.append((current[o][:, bones[:, 0]], current[o][:, bones[:, 1]], self.radii[o][bones[:, 1]]))
            pairs.append(near)
        lean = self.leans[c]
        if lean is not None:
            lean = replace(lean, span=lean.span[at], reach=lean.reach[at], weight=lean.weight[at],
                           goals=t[:, lean.hands])
        # Frame 0 settles from where the character is (the last round's, or its targets before
        # the first): about 170 of a round's 350 solver steps went to settling it from the source's.
        collide = CapsuleCollisions(caps, depth, joints=self.reach[c], pairs=pairs,
                                    first=0 if frames is None else frames.start)
        return Guide(t, prox, collide, start=current[c][0], lean=lean, distance=distance)


def _touching_above(binding, partners, c):
    """(F,J) 1 where partners may steer character ``c``'s joints: everywhere but at the joint
    above each limb's end (elbow, knee), which only where it or that end touches a partner in
    the source (``LIMB_TOUCH``), eased over ``LEAN_EASE`` frames; None without partners."""
    from .skeleton.joints import limb_effectors
    rels = partners.relations[c]
    if not rels:
        return None
    sk, H = binding.skeleton, partners.body_height
    ends = limb_effectors(sk, binding.motion, binding.body_height).tolist()
    clearance = np.min([rel.clearance.min(axis=2) for rel in rels], axis=0)              # (F,J)
    out = np.ones(clearance.shape)
    for j in sorted({int(sk.parents[e]) for e in ends if sk.parents[e] >= 0} - set(ends)):
        near = (clearance[:, [j] + [e for e in ends if sk.parents[e] == j]] <= LIMB_TOUCH * H).any(axis=1)
        out[:, j] = _eased_runs(near, 1, LEAN_EASE)
    return out


def steered_joints(binding):
    """(J,) bool: the joints partners steer, the limbs' ends (``skeleton.joints.limb_effectors``:
    hands, feet, toes), the joint above each (elbows, knees) and every joint below them
    (fingers, end sites).

    Product decision: the rest of the body keeps its own targets and is only kept out of the
    partners' capsules. Steering every joint near a partner, a collar tie whose partner was
    scaled 0.8 or 1.2 drifted round by round (each trunk following the other's, the unscaled
    wrestler's hips lifted 10 cm off the floor): the hands on the shoulders ended 30-60 cm
    off; steering the ends and elbows: within 3.2 cm. The elbows and knees only where they or
    their ends touch a partner (``LIMB_TOUCH``); the trunk leans to keep a hold instead
    (``lean_anchors``)."""
    from .skeleton.joints import limb_effectors
    sk = binding.skeleton
    keep = np.zeros(len(sk), bool)
    keep[limb_effectors(sk, binding.motion, binding.body_height)] = True
    above = np.asarray(sk.parents)[np.flatnonzero(keep)]                         # elbows, knees
    keep[above[above >= 0]] = True
    for j in sk.order.tolist():
        p = sk.parents[j]
        if p >= 0 and keep[p]:
            keep[j] = True
    return keep


def _at_rest(pose, targets, proximity, collide, body_height):
    """Whether ``pose`` (F,J,3) is on the partners' ``targets`` wherever they weigh
    (``proximity`` > 0) and ``collide`` leaves it where it is, within ``REST_TOLERANCE``."""
    tol = REST_TOLERANCE * body_height
    weighed = proximity > 0
    if weighed.any() and float(np.abs(targets - pose)[weighed].max()) > tol:
        return False
    pushed = collide(pose.copy(), np.arange(len(pose)))
    return float(np.abs(pushed - pose).max()) <= tol


@dataclass
class Guide:
    """Extra joint targets blended into ``adapt``'s: ``targets (F,J,3)``, ``proximity (F,J)``
    in [0,1] (the blend weight against the environment's own proximity) and an optional
    ``collide`` chained after the environment's collisions (with ``inner`` set by ``adapt``)."""

    targets: np.ndarray
    proximity: np.ndarray
    collide: object = None
    #: (J,3) the pose frame 0 settles from (default: the source's frame 0)
    start: np.ndarray = None
    #: optional ``Lean``: the trunk leans to keep the holding hands' arms as in the source
    lean: object = None
    #: optional (F,J) each joint's distance to the nearest weighted partner capsule: the
    #: environment's and the partners' weights then fade by one Eq. 5 window (``adapt``)
    distance: np.ndarray = None

    def touching(self):
        """(F,J) bool: the joints resting on a partner (proximity 1), which the twist limits
        leave where they are."""
        return (np.asarray(self.proximity) >= 1.0) & ~np.isnan(np.asarray(self.targets)[..., 0])


@dataclass
class Lean:
    """A character's holds on its partners, for the trunk's lean (``lean_anchors``).

    ``hands (K,)`` hold a partner on the frames where ``weight (F,K)`` is above 0;
    ``shoulders (K,)`` are their arms' roots; ``span (F,K)`` the source's shoulder-to-hand
    distance with the arm's bone lengths now, ``reach (F,K)`` the arm's full length now;
    ``goals (F,K,3)`` where the partners now put the hands (set each round)."""

    hands: np.ndarray
    shoulders: np.ndarray
    span: np.ndarray
    reach: np.ndarray
    weight: np.ndarray
    goals: np.ndarray = None
    max_degrees: float = LEAN_MAX_DEGREES

    def anchors(self, targets):
        """``(shoulders, goals (F,K,3), weight (F,K))`` for ``_TrunkModel.lean``: each
        shoulder's goal is the nearest point to its target (``targets``, the environment's)
        no farther from the hand's goal than ``LEAN_SLACK`` past the source's distance and
        within ``LEAN_REACH`` of the arm's length (a shoulder nearer stays)."""
        s = targets[:, self.shoulders]
        v = s - self.goals
        d = np.linalg.norm(v, axis=-1)
        hi = np.minimum(self.span * (1.0 + LEAN_SLACK), LEAN_REACH * self.reach)
        want = np.minimum(d, hi)
        ok = np.isfinite(d) & (d > 1e-12)
        goals = np.where(ok[..., None], self.goals + v * (want / np.where(ok, d, 1.0))[..., None], s)
        return self.shoulders, goals, np.where(ok, self.weight, 0.0)


def _holds(partners, o, c, hands):
    """(F,) how much character ``o``'s ``hands`` hold character ``c`` on each frame (eased as
    ``lean_anchors``' weights), or None where ``o`` has no relation to ``c``."""
    rel = next((x for x in partners.relations[o] if x.partner == c), None)
    if rel is None:
        return None
    near = rel.clearance[:, hands].min(axis=2) <= LEAN_CONTACT * partners.body_height             # (F,K)
    return np.max([_eased_runs(near[:, k], LEAN_FRAMES, LEAN_EASE) for k in range(len(hands))], axis=0)


def _eased_runs(on, least, ease):
    """(F,) in [0,1]: 1 over the runs of ``on`` (F,) bool at least ``least`` frames long,
    falling to 0 over ``ease`` frames outside them (smoothstep); 0 elsewhere."""
    F = len(on)
    keep = np.zeros(F, bool)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], on.astype(np.int8), [0]])))
    for a, b in zip(edges[::2], edges[1::2]):
        if b - a >= least:
            keep[a:b] = True
    if not keep.any():
        return np.zeros(F)
    from scipy.ndimage import distance_transform_edt
    gap = distance_transform_edt(~keep)                      # frames to the nearest kept one
    x = np.clip(1.0 - gap / float(ease + 1), 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def lean_anchors(binding, partners, c, rig):
    """The hands of character ``c`` that hold a partner in the source (``LEAN_CONTACT``, for
    ``LEAN_FRAMES`` frames in a row), as a ``Lean`` without goals; None when none does (or
    the trunk is not found).

    A hand is an arm's end among the contact effectors (``skeleton.joints.limb_effectors``)
    whose arm the spine above the hips carries; ``rig`` the character's ``adaptation.Rig``
    (its trunk, and its bone lengths now)."""
    from .reaching import limb
    from .skeleton.joints import limb_effectors
    rels = partners.relations[c]
    trunk = rig.trunk
    if not rels or trunk is None:
        return None
    sk, m, H = binding.skeleton, binding.motion, binding.body_height
    scale = rig.scale
    lengths = sk.bone_lengths(m)
    carried = set()
    for a in trunk.chain[1:].tolist():
        carried.update(trunk.below.get(a, np.zeros(0, np.int64)).tolist())
    hands, shoulders, span, reach, weight = [], [], [], [], []
    seen = set()
    clearance = np.min([rel.clearance.min(axis=2) for rel in rels], axis=0)          # (F,J)
    for e in limb_effectors(sk, m, H).tolist():
        try:
            shoulder, elbow, upper, lower = limb(sk, m, e)
        except InputError:
            continue
        if shoulder in seen or shoulder not in carried:
            continue
        w = _eased_runs(clearance[:, e] <= LEAN_CONTACT * H, LEAN_FRAMES, LEAN_EASE)
        if not w.any():
            continue
        seen.add(shoulder)
        bones = list(upper) + list(lower)
        hands.append(e)
        shoulders.append(shoulder)
        arm_scale = float(np.sum(lengths[:, bones].mean(axis=0) * scale[bones]) /
                          max(float(np.sum(lengths[:, bones].mean(axis=0))), 1e-300))
        span.append(np.linalg.norm(m[:, e] - m[:, shoulder], axis=-1) * arm_scale)
        reach.append((lengths[:, bones] * scale[bones]).sum(axis=1))
        weight.append(w)
    if not hands:
        return None
    return Lean(np.array(hands, np.int64), np.array(shoulders, np.int64), np.stack(span, axis=1),
                np.stack(reach, axis=1), np.stack(weight, axis=1))



class PartnersLiveSession:
    """Frame-by-frame adaptation of characters bound together (``bind_partners``), for a live
    preview: ``pose(frame, vertices)`` gives every character's adapted joints (J,3) at ``frame``
    with the environment as it is now.

    Each character keeps a ``LiveSession`` (its targets from the environment, their eased jumps,
    its collisions, its cache dropped on an edit). At a frame the group runs rounds on that
    frame alone with the bake's ``Guide`` cut to it (partner targets in the round's window, the
    elbows' and knees' gating, the trunk's lean, the capsules): each character, one after the
    other, is warped one step from its previous frame's result towards its environment targets
    blended with where its partners, as last solved, put its joints. The rounds start from the
    frame before's result moved as the environment's targets move. A frame whose predecessor
    is solved costs one warping step per character and round; a frame reached by a jump is
    solved from ``window`` frames earlier, as ``LiveSession`` does.

    bindings, partners, bone_lengths, radii, poses, per_character, whole_body, options : as
        ``adapt_partners``'.
    windows : each round's Eq. 5 window in body heights, None for every capsule; default
        ``[None, WINDOW]``, the bake's first and last.

    Departures from the bake (``adapt_partners``), for speed: two rounds, not five (the bake's
    five whole-clip rounds do not settle either: its last two, in narrower windows, still move
    the collar tie's hands 8-13 cm, so a frame's result depends on the schedule); the first
    round with three sweeps after its last substep and no collisions, as it only places the
    partners for the second. Where one character is given (``poses``) the preview is the bake;
    elsewhere ``benchmarks/bench_characters.py --live`` measures its holds against the bake's
    and how far it is from it. An unedited group gives its source.
    """

    def __init__(self, bindings, partners, bone_lengths=None, radii=None, poses=None, per_character=None,
                 windows=None, whole_body=True, window=6, static_steps=60, **options):
        bindings = list(bindings)
        n = len(bindings)
        if len(partners.relations) != n:
            raise InputError(f"the partners were bound for {len(partners.relations)} characters, not {n}")
        bone_lengths = [None] * n if bone_lengths is None else list(bone_lengths)
        self.poses = [None] * n if poses is None else [None if p is None else np.asarray(p, float) for p in poses]
        for c, (b, pose) in enumerate(zip(bindings, self.poses)):
            if pose is not None and pose.shape != b.motion.shape:
                raise InputError(f"pose {c} must have the clip's shape {b.motion.shape}, got {pose.shape}")
        own = [dict(options, **(per_character[c] if per_character is not None and per_character[c] else {}))
               for c in range(n)]
        self.bindings = bindings
        self.sessions = [LiveSession(b, window=window, static_steps=static_steps, bone_lengths=bl, **o)
                         for b, bl, o in zip(bindings, bone_lengths, own)]
        self.group = _Group(bindings, partners, [s.rig for s in self.sessions], bone_lengths, radii, whole_body,
                            [p is None for p in self.poses])
        H = partners.body_height
        self.windows = [None, WINDOW * H] if windows is None else [None if w is None else w * H for w in windows]
        self.window, self.static_steps = window, static_steps
        self._warpers = [s.rig.warper() for s in self.sessions]
        # The rounds before the last only place the partners for the next: fewer sweeps and no
        # collisions (the collar tie's and the hug's holds within 2 mm of the full rounds', about
        # a tenth of a frame's time saved).
        self._quick = [s.rig.warper(final_iterations=C.CONSTRAINT_ITERATIONS) for s in self.sessions]
        self._solved = {}          # frame -> per character (solved, target, finished)
        self._edits = None

    def set_influence(self, c, vertex_influence):
        """Character ``c``'s new painted influence (V,) or None (``LiveSession.set_influence``)."""
        self.sessions[c].set_influence(vertex_influence)

    def pose(self, frame, vertices):
        """Every character's adapted joints (list of (J,3)) at ``frame``, the environment's
        ``vertices`` (V,3) one array for all or one per character."""
        n = len(self.sessions)
        F = self.bindings[0].frame_count
        frame = int(np.clip(frame, 0, F - 1))
        if not isinstance(vertices, (list, tuple)):
            vertices = [vertices] * n
        envs = [s.environment(frame, np.asarray(v, float)) for s, v in zip(self.sessions, vertices)]
        edits = [s.edits for s in self.sessions]
        if edits != self._edits:
            self._solved.clear()
            self._edits = edits
        hit = self._solved.get(frame)
        if hit is None:
            prev = self._solved.get(frame - 1)
            if frame == 0 or prev is not None:
                hit = self._keep(frame, self._step(frame, envs, prev))
            else:
                state = None
                for f in range(max(0, frame - self.window), frame + 1):
                    state = self._step(f, envs, state, warm=state is None)
                hit = self._keep(frame, state)
        return [h[2].copy() for h in hit]

    def _step(self, f, envs, prev, warm=False):
        """Frame ``f``'s rounds: per character ``(solved (J,3), target (J,3), touching (J,))``.
        ``prev``: the frame before's (None at frame 0, or ``warm``: a jump's first frame, settled
        from its targets)."""
        at, frames = slice(f, f + 1), np.array([f])
        n = len(self.sessions)
        env, current, state = [None] * n, [None] * n, [None] * n
        for c, (s, (mesh, _), pose) in enumerate(zip(self.sessions, envs, self.poses)):
            if pose is not None:                                 # given: the others follow it
                current[c] = pose[at]
                state[c] = (pose[f], pose[f], np.zeros(len(pose[f]), bool))
                continue
            env[c] = s.targets(mesh, frames)
            # The rounds start from the frame before's result moved as the environment's targets
            # move (the source's own step where nothing changed), else from those targets.
            current[c] = env[c][0].copy() if prev is None else \
                (prev[c][0] + env[c][0][0] - s.targets(mesh, frames - 1)[0][0])[None]
        for r, window in enumerate(self.windows):
            for c, s in enumerate(self.sessions):
                if self.poses[c] is not None:
                    continue
                last = r == len(self.windows) - 1
                guide = self.group.guide(c, current, window, frames=at)
                t, a = with_guide(s.rig, env[c][0].copy(), env[c][1].copy(), guide)
                warper = (self._warpers if last else self._quick)[c]
                warper.collide = None
                if last:
                    collide = envs[c][1]
                    if collide is not None:
                        collide.set_targets(frames, t)
                    guide.collide.inner = collide
                    warper.collide = guide.collide
                if prev is not None:
                    p = warper.next(f, prev[c][0], prev[c][1], t[0], a[0])
                elif warm:
                    start = t[0] if state[c] is None else state[c][0]
                    p = warper.first(t[0], start, a[0], f=f, max_steps=self.static_steps, free_first=False)
                else:
                    start = self.bindings[c].motion[0] if state[c] is None else state[c][0]
                    p = warper.first(t[0], start, a[0], f=f)
                state[c] = (p, t[0], guide.touching()[0])
                current[c] = p[None]
        return state

    def _keep(self, frame, state):
        """Cache the frame's solves (the next frame starts from them) and finished poses."""
        kept = [(p, t, p if pose is not None else s.rig.finish(p[None], [frame], twist_held=touching[None])[0])
                for s, pose, (p, t, touching) in zip(self.sessions, self.poses, state)]
        self._solved[frame] = kept
        return kept
