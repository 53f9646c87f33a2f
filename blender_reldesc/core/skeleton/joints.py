"""What the solver needs to know about each joint, learnt from the source motion.

- **Coincident joints.** Real rigs have bones that start where their parent
  starts (Rigify's pelvis and spine, a root at the hips, twist bones): the
  joint of such a bone coincides with its parent's. It is glued to its
  parent's position; its children hang, through it, from the parent (the
  parent is its *representative*).
- **Hinges** (paper §8: knees and elbows) are found from the motion, not the
  name: a joint with one child whose bend over the clip stays on one side of
  one plane, carried with the body part the limb hangs from. A hinge is only
  ever reflected back on frames where the source itself bends clearly; a
  limb that the source holds straight or hyperextended is never flipped.
- **Bend limits** (product addition, issue "human poses under large edits"):
  every joint on a chain (one parent bone, children roughly continuing it)
  may bend at most as far as the source does plus a margin, at least an
  anatomical minimum. Enforced in the solver as a minimum distance between
  the joint's parent and child (law of cosines), which is rigid-invariant and
  keeps bone lengths free.
- **Twist limits** (same issue): a joint whose children spread (a chest with
  neck and shoulders) turns about its incoming bone relative to its parent at
  most as far as the source does plus a margin. A bone with one child keeps
  its twist relative to its parent by construction (``recover_rotations``).

All arrays are in the motion's units; angles in radians unless named degrees.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import constants as C
from .rotations import quat_from_matrix, recover_rotations, swing, swung
from .hierarchy import Skeleton
from ..geometry.triangles import cross, dot, normalize


def zero_length(skeleton, motion, body_height):
    """(J,) bool: joints whose bone (parent to joint) has zero mean length."""
    mean = skeleton.bone_lengths(motion).mean(axis=0)
    return (skeleton.parents >= 0) & (mean <= C.ZERO_LENGTH * body_height)


def representatives(skeleton, zero):
    """(J,) int: each joint, or for a coincident joint the nearest ancestor that is not."""
    rep = np.arange(len(skeleton))
    for j in skeleton.order.tolist():
        if zero[j]:
            rep[j] = rep[skeleton.parents[j]]
    return rep


def effective_children(skeleton, zero):
    """List of (K,) int per joint: its children, looking through coincident ones."""
    kids = [[] for _ in range(len(skeleton))]
    rep = representatives(skeleton, zero)
    for j in skeleton.order.tolist():
        p = skeleton.parents[j]
        if p >= 0 and not zero[j]:
            kids[rep[p]].append(j)
    out = [np.asarray(k, np.int64) for k in kids]
    for j in np.flatnonzero(zero):                 # a coincident joint sees its own subtree only
        own = [c for c in _descend(skeleton, zero, j)]
        out[j] = np.asarray(own, np.int64)
    return out


def _descend(skeleton, zero, j):
    for c in skeleton.children(j).tolist():
        if zero[c]:
            yield from _descend(skeleton, zero, c)
        else:
            yield c


def _off_bone_children(motion, j, kids):
    """Children of j that are not twist joints lying on the bone from j to another child."""
    if len(kids) < 2:
        return kids
    f = len(motion) // 2
    rel = motion[f, kids] - motion[f, j]                                     # (K,3)
    seg_sq = np.maximum(np.einsum("ki,ki->k", rel, rel), 1e-300)
    # t[x, c]: where child x projects on the bone from j to child c; off[x, c]: how far from it
    t = (rel @ rel.T) / seg_sq[None, :]
    off = np.linalg.norm(rel[:, None, :] - t[..., None] * rel[None, :, :], axis=-1)
    inside = (C.ON_BONE_FRACTION < t) & (t < 1.0 - C.ON_BONE_FRACTION)     # not at either end
    on = inside & (off <= C.ON_BONE_FRACTION * np.sqrt(seg_sq)[None, :])
    np.fill_diagonal(on, False)
    return np.asarray(kids[~on.any(axis=1)], np.int64)


def _unit(v):
    return normalize(v)


def two_bone(top, middle, end, l1, l2):
    """Two-bone IK: ``(middle, end)`` (n,3), the middle joint at lengths l1 from ``top`` and l2 from
    ``end``, on the side of the given ``middle`` (a hint: the plane it bends in); an end out of
    reach (or too close) is brought along the line from ``top`` (the chain straight towards it)."""
    axis = end - top
    dist = np.linalg.norm(axis, axis=-1)
    axis = axis / np.maximum(dist, 1e-300)[:, None]
    d = np.clip(dist, np.abs(l1 - l2) + 1e-9, (l1 + l2) * (1.0 - 1e-9))
    along = (l1 ** 2 - l2 ** 2 + d ** 2) / (2.0 * d)
    height = np.sqrt(np.maximum(l1 ** 2 - along ** 2, 0.0))
    side = (middle - top) - np.einsum("ni,ni->n", middle - top, axis)[:, None] * axis
    side /= np.maximum(np.linalg.norm(side, axis=-1), 1e-300)[:, None]
    return top + along[:, None] * axis + height[:, None] * side, top + d[:, None] * axis


def split_joints(skeleton, motion, degrees=1.0):
    """(J,) bool: joints that only split a bone along its length (one child, bent less than
    ``degrees`` on every frame: Rigify's DEF-thigh.L.001). A limb's real joints are the others."""
    parents = skeleton.parents
    out = np.zeros(len(skeleton), bool)
    for k in range(len(skeleton)):
        kids = skeleton.children(k)
        a = int(parents[k])
        if a < 0 or len(kids) != 1:
            continue
        u, v = motion[:, k] - motion[:, a], motion[:, int(kids[0])] - motion[:, k]
        nu, nv = np.linalg.norm(u, axis=1), np.linalg.norm(v, axis=1)
        if np.any(nu < 1e-12) or np.any(nv < 1e-12):
            continue
        out[k] = bool(np.all(np.einsum("fi,fi->f", u, v) / (nu * nv) > np.cos(np.radians(degrees))))
    return out


def bending(chain, split):
    """The joints of ``chain`` (limb root to effector) that bend: its ends and the joints that do
    not only split a bone (``split_joints``: Rigify's upper_arm.001 is one segment with its bone)."""
    full = [int(j) for j in chain]
    return [full[0]] + [j for j in full[1:-1] if not split[j]] + [full[-1]]


def span(chain, lengths, a, b):
    """The length of ``chain`` from its joint ``a`` to its joint ``b`` (``lengths`` (J,): each
    joint's bone from its parent)."""
    full = [int(j) for j in chain]
    return float(np.sum(lengths[full[full.index(a) + 1:full.index(b) + 1]]))


def place_between(out, rows, chain, lengths, a, b, pa, pb):
    """In ``out`` (F,J,3) at ``rows``, the joints of ``chain`` strictly between ``a`` and ``b`` on
    the segment from ``pa`` to ``pb`` (n,3), each at its share of the chain's length: a bone split
    along its length stays straight and keeps its pieces' lengths."""
    full = [int(j) for j in chain]
    inner = full[full.index(a) + 1:full.index(b)]
    run = np.cumsum(lengths[inner]) / max(span(chain, lengths, a, b), 1e-300)
    for j, t in zip(inner, run):
        out[rows, j] = pa + t * (pb - pa)


def bend_angles(a, k, c):
    """(...) angle between the bones a->k and k->c (0 = straight), radians."""
    u, v = _unit(k - a), _unit(c - k)
    return np.arccos(np.clip(np.einsum("...i,...i->...", u, v), -1.0, 1.0))


def _anchor_rotations(offsets_src, offsets_now):
    """Best-fit rotations (...,3,3) of an anchor's child offsets (...,K,3) and whether each is
    well defined (Kabsch, one SVD: collinear offsets leave the turn about their line free)."""
    h = np.matmul(np.swapaxes(offsets_src, -1, -2), offsets_now)          # sum of src now^T
    uu, sv, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.swapaxes(-1, -2) @ uu.swapaxes(-1, -2)))
    fix = np.ones(h.shape[:-1])
    fix[..., -1] = np.where(d == 0, 1.0, d)
    rot = vt.swapaxes(-1, -2) @ (fix[..., :, None] * uu.swapaxes(-1, -2))
    return rot, sv[..., 1] > C.ANCHOR_CONDITION * sv[..., 0]


class Hinges:
    """Hinge joints of a skeleton and what the solver needs to keep them bending one way.

    triples : (H,3) int (parent-side joint a, hinge k, child c), using
        representatives so coincident joints are looked through.
    anchors : list of ``(anchor joint, its children (K,))``, each distinct
        anchor once: the nearest ancestor with two or more spread children,
        the body part a limb hangs from. ``which`` (H,): each hinge's anchor.
    normal : (F,H,3) unit bend-plane normal of the source, (k-a) x (c-k); on frames where the
        source is within ``HINGE_BEND_MIN`` of straight (``straight`` (F,H)), the nearest bent
        frame's, carried to the frame (zero where no frame is bent or the anchor is undefined).
    """

    def __init__(self, triples, anchors, which, normal, upper, straight=None):
        self.triples = triples
        self.anchors = anchors
        self.which = which
        self.normal = normal
        self.upper = upper
        self.bent = np.einsum("fhi,fhi->fh", normal, normal) > 0           # (F,H): a normal to keep
        self.straight = np.zeros(self.bent.shape, bool) if straight is None else straight

    @functools.cached_property
    def _anchor_layout(self):
        """``(children (A,K), anchors (A,))``: each distinct anchor's children, padded to the most
        any has with the anchor itself."""
        K = max(len(kids) for _, kids in self.anchors)
        kids = np.array([np.r_[kids, np.full(K - len(kids), a)] for a, kids in self.anchors], np.int64)
        return kids, np.array([a for a, _ in self.anchors], np.int64)

    def subset(self, joints):
        """The hinges whose hinge joint is in ``joints`` (a reach re-solves one arm: the others
        are the bake's), with only the anchors they use; None when there are none."""
        keep = np.flatnonzero(np.isin(self.triples[:, 1], np.asarray(list(joints), np.int64)))
        if not keep.size:
            return None
        used = sorted(set(self.which[keep].tolist()))
        where = {a: n for n, a in enumerate(used)}
        return Hinges(self.triples[keep], [self.anchors[a] for a in used],
                      np.array([where[a] for a in self.which[keep].tolist()], np.int64),
                      self.normal[:, keep], self.upper[:, keep], self.straight[:, keep])

    def __len__(self):
        return len(self.triples)

    @classmethod
    def detect(cls, skeleton, motion, zero, override=None):
        """Hinges found from the motion; ``override`` maps a joint index to "ON" / "OFF" / "AUTO"."""
        override = override or {}
        rep = representatives(skeleton, zero)
        kids = effective_children(skeleton, zero)
        triples, anchors, which = [], [], []
        memo = {}                                          # per anchor: rotations to frame 0
        limb = [_off_bone_children(motion, j, kids[j]) for j in range(len(skeleton))]
        for k in range(len(skeleton)):
            mode = str(override.get(k, "AUTO")).upper()
            p = skeleton.parents[k]
            if mode == "OFF" or p < 0 or zero[k] or len(limb[k]) != 1:
                continue
            a, c = rep[p], int(limb[k][0])
            if mode != "ON" and len(limb[a]) != 1:        # a hinge's upper bone is a limb bone, not a branch
                continue
            if mode != "ON" and (_upper_length(skeleton, motion, rep, a, k)
                                 < C.HINGE_UPPER_RATIO * _lower_length(motion, kids, k, c)):
                continue                                   # a clavicle, not an elbow
            anchor = _anchor_of(skeleton, motion, rep, kids, a, memo)
            if anchor is None:
                continue
            if mode != "ON" and not _bends_in_one_plane(motion, a, k, c, anchor, kids[anchor], memo):
                continue
            triples.append((a, k, c))
            if anchor not in [x for x, _ in anchors]:
                anchors.append((anchor, kids[anchor]))
            which.append([x for x, _ in anchors].index(anchor))
        if not triples:
            return None
        t = np.asarray(triples, np.int64)
        a, k, c = (motion[:, t[:, i]] for i in range(3))
        n = np.cross(k - a, c - k)
        bent = bend_angles(a, k, c) > np.radians(C.HINGE_BEND_MIN_DEGREES)
        normal = np.where(bent[..., None], _unit(n), 0.0)
        upper = _unit(k - a)
        # Frames where the source holds the limb straight get the bend normal of the nearest bent
        # frame, carried to them as ``limit`` carries a source normal to a pose (the anchor's turn,
        # then the upper bone's swing): a knee the edit bends there (a foot set on raised ground
        # while the source leg is straight) has a side to keep. Without it a crowd's first frame,
        # settled from the targets, could buckle a straight-legged knee backwards and keep it so
        # until the source next bent it, then snap (30 cm in a frame, measured).
        for h in range(len(t)):
            anchor, anchor_kids = anchors[which[h]]
            rot, ok = _to_first_frame(motion, anchor, anchor_kids, memo)
            have, need = np.flatnonzero(bent[:, h] & ok), np.flatnonzero(~bent[:, h] & ok)
            if not have.size or not need.size:
                continue
            at = np.searchsorted(have, need)
            before, after = have[np.maximum(at - 1, 0)], have[np.minimum(at, len(have) - 1)]
            near = np.where(np.abs(need - before) <= np.abs(after - need), before, after)
            turn = rot[need].swapaxes(-1, -2) @ rot[near]                      # anchor: frame near -> frame f
            normal[need, h] = swung(np.einsum("nij,nj->ni", turn, upper[near, h]), upper[need, h],
                                    np.einsum("nij,nj->ni", turn, normal[near, h]))
        return cls(t, anchors, np.asarray(which, np.int64), normal, upper, straight=~bent)

    def limit(self, p, src_motion, f, free=None):
        """Reflect, in place, hinges of poses ``p`` (S,J,3) at frames ``f`` (S,) that bend against
        the source (a single pose (J,3) at one frame works too).

        The source's bend normal is carried by the anchor's best-fit rotation
        and then by the swing of the upper bone onto its current direction.
        Reflection across the plane through a and c keeps both bone lengths.
        ``free`` (S,H) bool masks hinges that may move (a pinned knee stays).
        """
        if p.ndim == 2:
            self.limit(p[None], src_motion, np.atleast_1d(f), None if free is None else np.asarray(free)[None])
            return p
        f = np.asarray(f)
        t = self.triples
        test = self.bent[f]                                              # (S,H)
        if free is not None:
            test = test & free
        if not test.any():
            return p
        # Every anchor's best fit in one SVD call (S,A,3,3): its children's offsets padded with the
        # anchor itself, whose offset is zero and adds nothing to the covariance.
        kids, anchor = self._anchor_layout
        src = src_motion[f[:, None, None], kids] - src_motion[f[:, None], anchor][..., None, :]
        now = p[:, kids] - p[:, anchor][..., None, :]                   # (S,A,K,3)
        rot_all, ok_all = _anchor_rotations(src, now)                   # (S,A,3,3), (S,A)
        si, hi = np.nonzero(test & ok_all[:, self.which])
        if not si.size:
            return p
        rot = rot_all[si, self.which[hi]]
        n_src = self.normal[f[si], hi]                                   # (n,3)
        a, k, c = p[si, t[hi, 0]], p[si, t[hi, 1]], p[si, t[hi, 2]]
        # The source's upper bone and bend normal turned with the anchor, the normal then swung
        # with the bone onto the bone now (vectors, not matrices: numpy's batched 3x3 products
        # cost a crowd step's 1600 hinges 0.6 ms, these products 0.06).
        up_src = np.einsum("nij,nj->ni", rot, self.upper[f[si], hi])
        n_want = swung(up_src, k - a, np.einsum("nij,nj->ni", rot, n_src))
        axis = _unit(c - a)
        want = _unit(cross(axis, n_want))                    # the side the knee should be on
        side = dot(k - a, want)
        flip = side < 0
        if not flip.any():
            return p
        straight = flip & self.straight[f[si], hi]
        if straight.any():
            # Where the source holds the limb straight, only a pose bent clearly the wrong way is
            # reflected: one held straight or hyperextended like the source stays as it is.
            u, v = k[straight] - a[straight], c[straight] - k[straight]
            cos = dot(u, v) / np.maximum(np.sqrt(dot(u, u) * dot(v, v)), 1e-300)
            flip[straight] = cos < np.cos(np.radians(C.HINGE_BEND_MIN_DEGREES))
        if flip.any():
            p[si[flip], t[hi[flip], 1]] = k[flip] - 2.0 * side[flip, None] * want[flip]
        return p


def _mean_length(motion, a, b):
    return float(np.linalg.norm(motion[:, b] - motion[:, a], axis=-1).mean())


def _upper_length(skeleton, motion, rep, a, k):
    """Mean length of the limb bone ending at k, through twist joints: while a lies on the
    line from its parent to k (within ``ON_BONE_FRACTION``), the bone starts at that parent."""
    start = a
    while skeleton.parents[start] >= 0:
        p = int(rep[skeleton.parents[start]])
        whole = np.median(np.linalg.norm(motion[:, k] - motion[:, p], axis=-1))
        if p == start or _detour(motion, p, start, k) > C.ON_BONE_FRACTION * whole:
            break
        start = p
    return _mean_length(motion, start, k)


def _lower_length(motion, kids, k, c):
    """Mean length of the limb bone starting at k, through twist joints (see ``_upper_length``)."""
    end = c
    while len(kids[end]) == 1:
        d = int(kids[end][0])
        if _detour(motion, k, end, d) > C.ON_BONE_FRACTION * np.median(np.linalg.norm(motion[:, d] - motion[:, k], axis=-1)):
            break
        end = d
    return _mean_length(motion, k, end)


def _detour(motion, a, b, c):
    """Largest |ab| + |bc| - |ac| over the clip: 0 when b always lies on the segment from a to c
    (a twist joint; a wrist or ankle that happens to be straight bends at some point)."""
    n = np.linalg.norm
    return float(np.max(n(motion[:, b] - motion[:, a], axis=-1) + n(motion[:, c] - motion[:, b], axis=-1)
                           - n(motion[:, c] - motion[:, a], axis=-1)))


def _to_first_frame(motion, anchor, kids, memo):
    """Rotations (F,3,3) taking the anchor's child offsets at each frame to frame 0, and
    where they are well defined; computed once per anchor (``memo``: {anchor: result})."""
    if anchor not in memo:
        off = motion[:, kids] - motion[:, anchor:anchor + 1]
        memo[anchor] = _anchor_rotations(off, np.broadcast_to(off[:1], off.shape))
    return memo[anchor]


def _anchor_of(skeleton, motion, rep, kids, a, memo):
    """Nearest ancestor-or-self of ``a`` with two or more children spread in a plane (or None)."""
    j = a
    while j >= 0:
        ks = kids[j]
        if len(ks) >= 2:
            _, ok = _to_first_frame(motion, j, ks, memo)
            if ok.mean() > 0.99:
                return j
        parent = skeleton.parents[j]
        j = rep[parent] if parent >= 0 else -1
    return None


def _bends_in_one_plane(motion, a, k, c, anchor, anchor_kids, memo):
    """Whether the source bends k on one side of one plane, in the anchor's frame.

    The source must bend it more than ``HINGE_CLEAR_DEGREES`` on enough frames
    (``HINGE_MIN_FRACTION``): a knee a clip holds nearly straight, or a few
    degrees hyperextended, gives no side worth enforcing when an edit bends it.
    On frames bent more than ``HINGE_BEND_MIN_DEGREES``, the bend normal is
    brought back to the first frame's anchor and upper-bone frame; a hinge
    has normals that agree (mean resultant length >= ``HINGE_COHERENCE``) on
    enough frames (``HINGE_MIN_FRACTION``).
    """
    pa, pk, pc = motion[:, a], motion[:, k], motion[:, c]
    angle = bend_angles(pa, pk, pc)
    if (angle > np.radians(C.HINGE_CLEAR_DEGREES)).mean() < C.HINGE_MIN_FRACTION:
        return False                          # held about straight: the clip shows no side to keep
    bent = angle > np.radians(C.HINGE_BEND_MIN_DEGREES)
    rot, ok = _to_first_frame(motion, anchor, anchor_kids, memo)
    use = bent & ok
    if use.sum() < 2:
        return False
    up = _unit(pk - pa)[use]
    up0 = np.einsum("fij,fj->fi", rot[use], up)
    back = swing(up0, np.broadcast_to(_unit(pk[0] - pa[0]), up0.shape)) @ rot[use]
    n = _unit(np.cross(pk - pa, pc - pk)[use])
    m = np.einsum("fij,fj->fi", back, n)
    return float(np.linalg.norm(m.mean(axis=0))) >= C.HINGE_COHERENCE


def trunk_mask(skeleton, motion, zero, rep, kids):
    """(J,) bool: the spine, neck and head: joints with a branch point below them, and from
    each branch point the child chain that continues the bone above it most closely."""
    J = len(skeleton)
    # A branch point splits the body into parts (hips, chest): a twist leaf on a forearm (Unreal's
    # lowerarm_twist_01) or a hand's fingers (digits, within DIGIT_FRACTION of the body's size)
    # do not make one, or Mixamo arms would count as trunk.
    med = np.median(motion, axis=0)
    size = max(float(np.ptp(med, axis=0).max()), 1e-300)
    extent = np.zeros(J)
    for j in skeleton.order[::-1].tolist():
        p = skeleton.parents[j]
        if p >= 0:
            extent[p] = max(extent[p], extent[j] + np.linalg.norm(med[j] - med[p]))
    branch = np.array([sum(extent[c] + np.linalg.norm(med[c] - med[j]) > C.DIGIT_FRACTION * size
                           for c in _off_bone_children(motion, j, k).tolist()) >= 2 for j, k in enumerate(kids)])
    below = branch.copy()
    for j in skeleton.order[::-1].tolist():
        p = skeleton.parents[j]
        if p >= 0 and below[j]:
            below[rep[p]] = True
    trunk = below & ~zero
    for j in skeleton.order.tolist():
        p = skeleton.parents[j]
        if not trunk[j] or p < 0 or len(kids[j]) < 1:
            continue
        a = rep[p]
        bends = [np.median(bend_angles(motion[:, a], motion[:, j], motion[:, c])) for c in kids[j].tolist()]
        best = int(np.argmin(bends))
        if np.degrees(bends[best]) <= C.TRUNK_CONTINUE_DEGREES:
            c = int(kids[j][best])
            while True:
                trunk[c] = True
                if len(kids[c]) != 1:
                    break
                c = int(kids[c][0])
    return trunk


class BendLimits:
    """Largest bend per chain joint, as minimum parent-child distances for the solver.

    A chain joint k (parent-side joint a, one or more children c) whose
    children continue the parent bone (source bend below
    ``CHAIN_MAX_REST_DEGREES`` on the median frame) may bend at most
    ``max(source max + BEND_MARGIN_DEGREES, BEND_MIN_LIMIT_DEGREES)`` (hinges
    up to ``HINGE_LIMIT_DEGREES``). Joints that branch sideways (hips to
    thighs, chest to collars) have no such limit.

    pairs : (P,2) int (a, c); joint : (P,) int k; limit : (P,) radians;
    length : (F,P,2) the two bone lengths per frame, for ``min_distance``.
    """

    def __init__(self, pairs, joint, limit):
        self.pairs, self.joint, self.limit = pairs, joint, limit

    def __len__(self):
        return len(self.pairs)

    @classmethod
    def learn(cls, skeleton, motion, zero, hinge_joints=()):
        rep = representatives(skeleton, zero)
        kids = effective_children(skeleton, zero)
        hinge_joints = set(int(h) for h in hinge_joints)
        trunk = trunk_mask(skeleton, motion, zero, rep, kids)
        pairs, joint, limit = [], [], []
        for k in range(len(skeleton)):
            p = skeleton.parents[k]
            if p < 0 or zero[k]:
                continue
            a = rep[p]
            for c in kids[k].tolist():
                bend = bend_angles(motion[:, a], motion[:, k], motion[:, c])
                if k in hinge_joints:
                    lim = max(np.degrees(bend.max()) + C.BEND_MARGIN_DEGREES, C.HINGE_LIMIT_DEGREES)
                elif np.degrees(np.median(bend)) <= C.CHAIN_MAX_REST_DEGREES:
                    floor = C.BEND_MIN_LIMIT_DEGREES if trunk[k] else C.LIMB_MIN_LIMIT_DEGREES
                    lim = max(np.degrees(bend.max()) + C.BEND_MARGIN_DEGREES, floor)
                else:
                    continue
                if lim >= 179.0:
                    continue
                pairs.append((a, c))
                joint.append(k)
                limit.append(np.radians(lim))
        return cls(np.asarray(pairs, np.int64).reshape(-1, 2), np.asarray(joint, np.int64),
                   np.asarray(limit, float))

    def min_distance(self, lengths):
        """(F,P) smallest |c - a| allowed, from the bone lengths (F,J) of k and c."""
        l1 = lengths[:, self.joint]
        l2 = lengths[:, self.pairs[:, 1]]
        cos = np.cos(self.limit)[None]
        return np.sqrt(np.maximum(l1 ** 2 + l2 ** 2 + 2.0 * l1 * l2 * cos, 0.0))

    def violation(self, positions):
        """(F,P) degrees by which each limited joint bends past its limit (0 where within)."""
        a, c = self.pairs[:, 0], self.pairs[:, 1]
        bend = bend_angles(positions[:, a], positions[:, self.joint], positions[:, c])
        return np.degrees(np.maximum(bend - self.limit[None], 0.0))


def limb_effectors(skeleton, motion, body_height):
    """Joint indices of the contact effectors, found from the structure: the ends of
    the legs and arms.

    Fingers and toes fold into their hand or foot: a joint whose children are two
    or more short unbranched chains (each within ``DIGIT_FRACTION`` body heights)
    is an extremity. A limb is an unbranched chain, at least ``LIMB_MIN_FRACTION``
    body heights long, from a branch point to an extremity or a leaf, off the trunk
    (so not the head). Its effectors are its last joint that is a bone head (an end
    site's tail is not), and the joints above it reached through bones shorter than
    ``SHORT_BONE_FRACTION`` of the limb's longest bone (ankle and ball above a toe
    tip; not the elbow above a wrist). A leaf bone at least ``END_BONE_FRACTION`` of
    the longest is the limb's last segment itself (a forearm with no hand bone): its tail
    is the effector. Twist joints lying inside a bone are looked through.
    """
    J = len(skeleton)
    zero = zero_length(skeleton, motion, body_height)
    rep = representatives(skeleton, zero)
    kids = effective_children(skeleton, zero)
    limb = [_off_bone_children(motion, j, kids[j]) for j in range(J)]
    at = np.median(motion, axis=0)
    lengths = np.median(skeleton.bone_lengths(motion), axis=0)
    parent = np.array([rep[p] if p >= 0 else -1 for p in skeleton.parents.tolist()])

    def chain_extent(c, j):
        """Extent of the subtree of c from j, or None when it branches."""
        far = np.linalg.norm(at[c] - at[j])
        while len(limb[c]):
            if len(limb[c]) > 1:
                return None
            c = int(limb[c][0])
            far = max(far, np.linalg.norm(at[c] - at[j]))
        return far

    extremity = np.zeros(J, bool)
    for j in range(J):
        if len(limb[j]) >= 2:
            ext = [chain_extent(int(c), j) for c in limb[j]]
            extremity[j] = all(e is not None and e <= C.DIGIT_FRACTION * body_height for e in ext)
    folded = np.zeros(J, bool)
    for j in skeleton.order.tolist():
        p = parent[j]
        folded[j] = p >= 0 and (extremity[p] or folded[p])
    trunk = trunk_mask(skeleton, motion, zero, rep, [np.zeros(0, np.int64) if x else k
                                                 for x, k in zip(extremity, limb)])
    out = set()
    for e in range(J):
        if folded[e] or zero[e] or trunk[e] or not (extremity[e] or len(limb[e]) == 0):
            continue
        chain, c = [e], e
        while True:
            p = int(parent[c])
            if p < 0 or c not in limb[p]:
                chain = None                                  # a twist leaf on a bone, or no branch point
                break
            chain.append(p)
            if len(limb[p]) != 1:
                break
            c = p
        if chain is None or trunk[chain[:-1]].any():
            continue
        bones = lengths[chain[:-1]]
        if bones.sum() < C.LIMB_MIN_FRACTION * body_height or len(chain) < 3:
            continue
        # A leaf bone's tail is an end site (its head counts instead) unless the leaf bone
        # is as long as the limb's main bones: then the tail is the wrist or ankle.
        end_site = len(skeleton.children(e)) == 0 and not extremity[e]
        last = 1 if end_site and bones[0] < C.END_BONE_FRACTION * bones.max() else 0
        picked = [chain[last]]
        for i in range(last, len(chain) - 2):
            if bones[i] >= C.SHORT_BONE_FRACTION * bones.max():
                break
            picked.append(chain[i + 1])
        out.update(picked)
    return np.array(sorted(out), np.int64)


def _spread(pose, j, kids):
    """Whether the children of j (pose (J,3)) span a plane: their offsets fix a rotation."""
    if len(kids) < 2:
        return False
    off = pose[kids] - pose[j]
    n = np.linalg.norm(off, axis=-1)
    if n.min() <= 0:
        return False
    sv = np.linalg.svd(off / n[:, None], compute_uv=False)
    return bool(sv[1] >= 0.1 * sv[0])


def _turn_defined(skeleton, pose, j):
    """Whether ``recover_rotations`` gives joint j a full rotation (twist included): j or an
    ancestor up the chain of one-child bones has children that span a plane. A chain that
    starts at a root with one child (a floor-level root, hips whose other children are
    coincident) is only swung: its twist is not the body's."""
    while j >= 0:
        kids = skeleton.children(j)
        kids = kids[np.linalg.norm(pose[kids] - pose[j], axis=-1) > 0] if len(kids) else kids
        if len(kids) >= 2:
            return _spread(pose, j, kids)
        j = skeleton.parents[j]
    return False


def _soft_clip(x, low, high, band):
    """``x`` limited to [low, high], eased in over ``band`` inside each end (tanh): smooth where
    the limit starts to act, so a twist that runs into it slows down instead of stopping dead
    (a hard clamp flicked a hand 0.2 m/frame² on the frame it engaged). Identity inside
    [low + band, high - band]."""
    top, bottom = high - band, low + band
    out = np.where(x > top, top + band * np.tanh((x - top) / band), x)
    return np.where(x < bottom, bottom - band * np.tanh((bottom - x) / band), out)


class TwistLimits:
    """Twist range of joints whose children spread, learnt from the source clip.

    Twist is the turn of a joint's frame relative to its parent's, about the
    bone into the joint, measured from the clip's first frame (so a rigid edit
    of the scene leaves it unchanged). ``limit`` turns a joint's subtree back
    about that bone, keeping every bone length, where the adapted pose twists
    beyond the source's range plus ``TWIST_MARGIN_DEGREES`` (eased in over the
    last ``TWIST_SOFT_DEGREES`` of it).

    joints, parents : (T,) int; axis : (T,3) unit incoming bone at the first
    frame; low, high : (T,) degrees; below : list of (K,) int, each joint's
    subtree (the joints the correction turns).
    """

    def __init__(self, reference, joints, parents, axis, low, high, below):
        self.reference = reference
        self.joints, self.parents, self.axis = joints, parents, axis
        self.low, self.high, self.below = low, high, below

    def __len__(self):
        return len(self.joints)

    @classmethod
    def learn(cls, skeleton, motion, zero):
        rep = representatives(skeleton, zero)
        kids = effective_children(skeleton, zero)
        med = np.median(motion, axis=0)
        joints = []
        for j in range(len(skeleton)):
            p = skeleton.parents[j]
            if p < 0 or zero[j] or len(kids[j]) < 2:
                continue
            p = int(rep[p])
            if not (_spread(med, j, kids[j]) and _turn_defined(skeleton, med, p)):
                continue                 # no twist to read here, or none in the parent
            if np.linalg.norm(med[j] - med[p]) <= 0:
                continue
            joints.append((j, p))
        below = []
        for j, _ in joints:
            sub = {j}
            for k in skeleton.order.tolist():
                if skeleton.parents[k] in sub:
                    sub.add(k)
            sub.discard(j)
            below.append(np.array(sorted(sub), np.int64))
        ref = motion[0].copy()
        j_idx = np.array([j for j, _ in joints], np.int64)
        p_idx = np.array([p for _, p in joints], np.int64)
        axis = ref[j_idx] - ref[p_idx]
        axis = axis / np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), 1e-300)
        model = cls(ref, j_idx, p_idx, axis, np.zeros(len(joints)), np.zeros(len(joints)), below)
        if len(joints):
            tau = model.twist(skeleton, motion)
            model.low = tau.min(axis=0) - C.TWIST_MARGIN_DEGREES
            model.high = tau.max(axis=0) + C.TWIST_MARGIN_DEGREES
        return model

    def _part(self, skeleton):
        """``(joints (K,), Skeleton)``: the joints the rotations of ``joints`` and ``parents``
        depend on (them, their ancestors, and the children of all of those), as a skeleton of
        their own; ``recover_rotations`` on it gives those rotations exactly as on the whole."""
        key = tuple(skeleton.parents.tolist())
        if getattr(self, "_part_key", None) != key:
            keep = set()
            for j in np.r_[self.joints, self.parents].tolist():
                while j >= 0:
                    keep.add(j)
                    j = int(skeleton.parents[j])
            keep |= {k for k in range(len(skeleton)) if skeleton.parents[k] in keep}
            idx = np.array(sorted(keep), np.int64)
            where = np.full(len(skeleton), -1)
            where[idx] = np.arange(len(idx))
            sub = Skeleton([skeleton.names[k] for k in idx.tolist()],
                           np.where(skeleton.parents[idx] >= 0, where[skeleton.parents[idx]], -1))
            self._part_key, self._part_value = key, (idx, sub, where)
        return self._part_value

    def twist(self, skeleton, positions):
        """(n,T) degrees: each joint's twist relative to its parent, from the first source frame."""
        if not len(self.joints):
            return np.zeros((len(positions), 0))
        idx, sub, where = self._part(skeleton)
        ref = np.broadcast_to(self.reference[idx], positions.shape[:1] + (len(idx), 3))
        R = recover_rotations(sub, ref, positions.take(idx, 1), matrices=True)
        rel = np.einsum("fkji,fkjl->fkil", R.take(where[self.parents], 1), R.take(where[self.joints], 1))  # R_p^T R_j
        q = quat_from_matrix(rel)
        q = np.where(q[..., :1] < 0, -q, q)
        return np.degrees(2.0 * np.arctan2(np.einsum("fkd,kd->fk", q[..., 1:], self.axis), q[..., 0]))

    def limit(self, skeleton, positions, held=None):
        """Turn, in place, the subtrees of joints twisted beyond their range; returns positions.
        ``held`` (n,J) bool: a frame where the subtree holds a pinned joint is left alone."""
        taus = self.twist(skeleton, positions) if len(self.joints) else None
        for t, (j, p) in enumerate(zip(self.joints.tolist(), self.parents.tolist())):
            tau = taus[:, t]
            excess = tau - _soft_clip(tau, self.low[t], self.high[t], C.TWIST_SOFT_DEGREES)
            if held is not None:
                excess[held[:, self.below[t]].any(axis=1)] = 0.0
            rows = np.flatnonzero(np.abs(excess) > 1e-9)
            if not rows.size or not self.below[t].size:
                continue
            axis = positions[rows, j] - positions[rows, p]
            axis /= np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), 1e-300)
            a = -np.radians(excess[rows])
            v = positions[np.ix_(rows, self.below[t])] - positions[rows, j][:, None]
            c, s = np.cos(a)[:, None, None], np.sin(a)[:, None, None]
            k = axis[:, None]
            v = v * c + np.cross(np.broadcast_to(k, v.shape), v) * s + k * np.einsum("nkd,nkd->nk", np.broadcast_to(k, v.shape), v)[..., None] * (1 - c)
            positions[np.ix_(rows, self.below[t])] = positions[rows, j][:, None] + v
            if t + 1 < len(self.joints):                  # only the turned rows changed
                taus[rows] = self.twist(skeleton, positions[rows])
        return positions
