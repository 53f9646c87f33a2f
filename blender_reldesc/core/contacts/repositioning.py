"""Contact phases, their validity after an edit, and contact re-positioning.

Tonneau, Al-Ashqar et al., *Character contact re-positioning under large
environment deformation* (Eurographics 2016). What this module implements:

- contact phases (§4.2.2, Eq. 2) with thresholds scaled by body height, and an
  effector whose closest approach to the environment is more than ``SOLE_MAX``
  body heights is never in contact (a hand hovering over a table);
- the force actuation profile of a contact (§4.2.3, Eq. 6-8) from the limb's
  positional Jacobian, every limb joint a ball joint, each axis length floored at
  a tenth of the longest (a straight limb's flat ellipsoid made 1/sigma explode);
- validity after adaptation (§5.2) in this order: *unsupported* (the adapted
  effector is on no surface), *unreachable* (the contact point leaves the
  limb's workspace on some frame: the convex hull of 12,000 configurations
  within anatomical joint limits, carried with the body frame, ``workspace``),
  *collision* (points along the bones of the contact's limb and of the trunk
  inside the environment on any frame of the phase, where the source was not)
  and *balance* (on most frames of the phase, the centre of mass from segment
  masses, ``balance``, projected along ``up`` lies outside the support region
  — the hull of the contacts active at that frame — by more than 0.1 body
  heights beyond what the source motion did; the pelvis and the knees ending
  the thighs are effectors too (a thigh rests by its knee or its middle), so
  seated, kneeling and lying supports count);
- re-positioning (§5.3): candidate points sampled on the edited surfaces with
  a similar orientation, within reach, scored h = 0.7 h1 + 0.3 h2 (Eq. 11-14,
  h2 the longest reachable run through the middle frame) with the limb bent to
  each candidate by FABRIK; the first candidate that passes the collision and
  balance tests wins; a contact reported repositioned is checked on the final
  motion (``landed``).

Continuity (§6): the new contact is first blended in with positional pins eased in and out
over enough frames to stay within the source's largest per-frame step; that pinned motion
gives the new contact postures, to which ``continuity`` re-embeds the limb's descriptors and
adapts again with them in place of the pins (pins stay as the reported fallback, each
outcome's ``continuity``). Root replanning (§7): ``replanning``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import RelDescError
from ..geometry import normalize
from ..geometry.proximity import Collider
from ..skeleton.joints import limb_effectors
from .balance import bone_samples, centre_of_mass, segment_masses
from .workspace import body_frames, limb_workspace, to_body

FRICTION = 0.7
#: An effector whose lowest distance to the environment over the clip is more than this many
#: body heights is never in contact: its "sole" (the joint's height above what it touches:
#: ankles 0.04-0.05, wrists on a table 0.02-0.03) cannot be that thick. A hand hovering 25 cm
#: above a table was a contact for the whole clip when the threshold was relative only.
SOLE_MAX = 0.1
#: A thigh rests on a surface only this close (body heights), by its knee or its middle: a
#: thigh's or kneecap's thickness.
KNEE_SOLE_MAX = 0.06
#: How far (body heights) a limb's root may move to reach a re-positioned contact.
ROOT_SLACK = 0.15
#: Root replanning's motion is kept only if its largest frame-to-frame joint step stays within
#: this times the source's (or the motion before it, if that was larger): issue 10's "no jump".
JUMP_RATIO = 1.2
#: A seat whose surface moved less than this (body heights) is followed: the pelvis is held on
#: it (a chair lowered); farther, it is gone, and only root replanning can help.
SEAT_FOLLOW = 0.3


class ContactError(RelDescError):
    """Contacts cannot be detected or re-positioned as asked; the message says why."""


@dataclass
class Limb:
    """The joints from a limb's root (below the branching joint) to its effector."""

    effector: int
    chain: np.ndarray

    @property
    def root(self):
        return int(self.chain[0])


@dataclass
class ContactPhase:
    """Frames ``start..end`` (inclusive) where ``effector`` rests on the surface."""

    effector: int
    name: str
    start: int
    end: int
    triangle: int
    bary: np.ndarray
    position: np.ndarray           # surface point at the middle frame (bind-time mesh)
    normal: np.ndarray
    clearance: float               # effector height above the surface (its sole)
    profile: np.ndarray            # (3,) force actuation profile, Eq. 8
    axes: np.ndarray               # (3,3) principal axes u_i as rows
    limb: Limb = field(repr=False, default=None)

    @property
    def middle(self):
        return (self.start + self.end) // 2


def default_effectors(skeleton, motion, body_height):
    """Names of the joints that count as effectors: the ends of the legs and arms, found
    from the structure (``skeleton.joints.limb_effectors``: fingers and toes fold into
    their hand or foot, end sites are not effectors)."""
    return [skeleton.names[j] for j in limb_effectors(skeleton, motion, body_height).tolist()]


def find_limb(skeleton, name):
    """The limb of effector ``name``: walk up until the joint whose parent branches. Leaves
    beside the limb (twist bones: Unreal's ``lowerarm_twist_01_l`` beside ``hand_l``) are no
    branch."""
    j = skeleton.index(name)
    chain = [j]
    p = skeleton.parents[j]
    while p >= 0 and all(len(skeleton.children(k)) == 0 for k in skeleton.children(p) if k != chain[-1]):
        chain.append(p)
        p = skeleton.parents[p]
    chain = np.array(chain[::-1])
    if len(chain) < 3:
        raise ContactError(f"the limb of '{name}' has fewer than two bones: choose effectors at the end of "
                           "an arm or a leg")
    return Limb(j, chain)


# --- force actuation profile (§4.2.3) ------------------------------------------

def limb_jacobian(chain_positions, axes=None):
    """Positional Jacobian (3, 3(n-1)) of the effector (last point) w.r.t. the joint
    rotations of the chain's first n-1 joints, ball joints (or (n-1,3) hinge
    ``axes``, then (3, n-1))."""
    p = np.asarray(chain_positions, float)
    r = p[-1] - p[:-1]                                           # joint -> effector
    if axes is not None:
        return np.cross(np.asarray(axes, float), r).T
    cols = [np.cross(np.eye(3)[a], rk) for rk in r for a in range(3)]
    return np.array(cols).T


def force_ellipsoid(jacobian):
    """Principal axes ``u (3,3)`` (rows) and ``sigma (3,)`` of f^T (J J^T) f <= 1 (Eq. 6)."""
    jjt = jacobian @ jacobian.T
    w, v = np.linalg.eigh(jjt)
    return v.T, np.sqrt(np.maximum(w, 0.0))


#: The ellipsoid's axis lengths are floored at this fraction of the longest one (see
#: ``force_profile``).
SIGMA_FLOOR = 0.1


def _floored(sigma2, top2):
    """sqrt(sigma² + (SIGMA_FLOOR top)²): axis lengths that never reach 0."""
    return np.sqrt(np.maximum(sigma2, 0.0) + SIGMA_FLOOR ** 2 * top2)


def force_profile(chain_positions, normal, friction=FRICTION, axes=None):
    """(alpha (3,), u (3,3)): Eq. 8, alpha_i = (1/sigma_i) * friction * n.u_i, u_i facing n.

    A straight limb's ellipsoid is flat (sigma ≈ 0 along the limb: the paper's 1/sigma
    reached 7e11 on a straight leg and decided every score alone); each sigma_i is taken as
    sqrt(sigma_i² + (0.1 sigma_max)²), as damped least squares does near singularities, so
    alpha stays within 10 friction / sigma_max and a bent limb's profile barely changes."""
    u, sigma = force_ellipsoid(limb_jacobian(chain_positions, axes))
    u = u * np.where(u @ normal < 0, -1.0, 1.0)[:, None]
    return friction * (u @ normal) / np.maximum(_floored(sigma ** 2, sigma.max() ** 2), 1e-12), u


def profile_along(chain_positions, u, normal, friction=FRICTION):
    """alpha(q, u_i, friction, n) of Eq. 11: a configuration's capability along given axes
    (axis lengths floored as in ``force_profile``). ``chain_positions`` (n,3) and ``normal``
    (3,) give (3,); (C,n,3) and (C,3), many configurations at once, give (C,3).

    With ball joints J Jᵀ = Σ_k |r_k|² I - r_k r_kᵀ (r_k from joint k to the effector)."""
    p = np.asarray(chain_positions, float)
    single = p.ndim == 2
    P, N = (p[None], np.asarray(normal, float)[None]) if single else (p, np.asarray(normal, float))
    r = P[:, -1:] - P[:, :-1]                                                  # (C,n-1,3)
    jjt = (np.einsum("ckd,ckd->c", r, r)[:, None, None] * np.eye(3) - np.einsum("ckd,cke->cde", r, r))
    top2 = np.linalg.eigvalsh(jjt).max(axis=-1)                                # (C,)
    sigma = np.maximum(_floored(np.einsum("ik,ckl,il->ci", u, jjt, u), top2[:, None]), 1e-12)
    out = friction * np.einsum("ik,ck->ci", u, N) / sigma
    return out[0] if single else out


def profile_score(alpha, source):
    """h1 of Eq. 11 for candidates' capabilities ``alpha`` (C,3) along the source contact's axes,
    whose own capabilities are ``source`` (3,): sum_i source_i min(alpha_i, source_i).

    The paper sums source_i alpha_i, and means "higher if ... their lengths are similar": the sum
    rewards capability beyond the source's without bound, so a straighter leg always wins. A
    foot whose stone moved went 0.3 m down to the ground under the next stone (or beside it)
    rather than onto that stone's top where it stood, its leg as bent as the source's (a real
    walk's overlapping stones). Capped at the source's, a candidate that gives the source's
    capability on every axis scores full, and the nearest such is taken (the 20 % buckets of
    ``plan_repositioning``). Product decision, documented in the manual, docs/how-it-works."""
    return np.minimum(alpha, source) @ source


# --- detection (§4.2.2) ------------------------------------------------------------

def _limb_samples(chain, ts=(0.25, 0.5, 0.75)):
    """Points along the bones of a limb chain (n,3), for collision tests."""
    return np.concatenate([chain[:-1] + t * (chain[1:] - chain[:-1]) for t in ts])


def _colliders(mesh, band):
    """get(f): the collider of ``mesh`` at frame f within ``band`` (a static mesh's is kept with
    the mesh, ``Collider.of``; an animated one's few latest here)."""
    cache = {}

    def get(f):
        if not mesh.animated:
            return Collider.of(mesh, band)
        if f not in cache:
            if len(cache) > 2:
                cache.clear()
            cache[f] = Collider.of(mesh, band, f)
        return cache[f]
    return get


def _stands_on(mesh, points, clearance, up, eps0):
    """(N,) whether each effector of ``points`` (N,3) on a static ``mesh`` stands its sole's
    ``clearance`` (one, or (N,)) over a surface facing ``up`` straight under it, within ``eps0``: a foot stepped
    down to the ground beside a stone is 1 mm from the stone's side, the surface nearest it, and
    was reported off every surface though it stood on the ground. An animated mesh: all False."""
    points = np.asarray(points, float).reshape(-1, 3)
    out = np.zeros(len(points), bool)
    if mesh.animated or not len(points):
        return out
    up = normalize(np.asarray(up, float))
    # From a little above the sole, so a foot a hair inside its floor still finds it.
    clearance = np.broadcast_to(np.asarray(clearance, float), (len(points),))
    lift = clearance + 2.0 * eps0
    dist, facing = _cast_down(mesh, points + (lift - clearance)[:, None] * up, up)
    out[facing] = np.abs(dist[facing] - lift[facing]) <= eps0
    return out


def _cast(mesh, origins, direction, up):
    """``(distance (N,), cos (N,))``: how far along the unit ``direction`` each of ``origins``
    (N,3) meets the static ``mesh`` (inf: nowhere), and the cosine of what it meets's normal with
    the unit ``up`` (0 where nothing)."""
    from ..geometry.rays import RayCaster
    dist, tri = RayCaster.of(mesh).cast(origins, np.broadcast_to(direction, origins.shape))
    cos = np.zeros(len(dist))
    hit = tri >= 0
    if hit.any():
        a, b, c = (mesh.frame(0)[mesh.triangles[tri[hit], k]] for k in range(3))
        cos[hit] = normalize(np.cross(b - a, c - a)) @ up
    return dist, cos


def _cast_down(mesh, origins, up):
    """``(distance (N,), facing (N,) bool)``: how far straight down (along the unit ``-up``) each
    of ``origins`` (N,3) meets the static ``mesh`` (inf: nowhere), and whether what it meets faces
    up (its normal within 60 degrees of ``up``)."""
    dist, cos = _cast(mesh, origins, -up, up)
    return dist, cos > 0.5


def _inside_depth(mesh, points, up, reach):
    """(N,) how far up (along the unit ``up``) each of ``points`` (N,3) must go to leave the solid
    of the static ``mesh`` it is inside, 0 where it is in none: straight up, within ``reach``,
    the first surface it meets faces up, so it is met from behind. The signed distance cannot
    tell: a point on the ground under a stone, beside its side, is nearest the side (a hair
    inside it) or the stone's bottom, which lies on the ground. An animated mesh: all 0."""
    points = np.asarray(points, float).reshape(-1, 3)
    if mesh.animated or not len(points):
        return np.zeros(len(points))
    up = normalize(np.asarray(up, float))
    dist, cos = _cast(mesh, points, up, up)
    return np.where((dist <= reach) & (cos > 0.0), dist, 0.0)


def _covered(mesh, points, up, reach):
    """(N,) whether each of ``points`` is inside a solid (``_inside_depth``)."""
    return _inside_depth(mesh, points, up, reach) > 0.0


def _closest_all(get, mesh, points):
    """closest() of (F,K,3) points against the mesh of each frame (colliders from ``get``)."""
    F, K, _ = points.shape
    if not mesh.animated:
        out = get(0).closest(points.reshape(-1, 3))
        return [x.reshape((F, K) + x.shape[1:]) for x in out]
    parts = [get(f).closest(points[f]) for f in range(F)]
    return [np.stack(x) for x in zip(*parts)]


def detect_contacts(binding, effectors=None, distance=None, speed=None, min_frames=3, friction=FRICTION,
                    fps=30.0):
    """Contact phases of the source motion on the bind-time environment.

    effectors : joint names (default ``default_effectors``).
    distance : ε0, how far above its lowest height an effector may be and still
        touch, in the motion's units (default 0.015 body heights; the paper's
        0.01 m is for a foot mesh, not a joint). The lowest height itself (the joint's
        "sole") must be below ``SOLE_MAX`` body heights.
    speed : 2·ε1 as a speed, units per second (default 0.12 body heights per
        second, i.e. 0.004 per frame at 30 fps); divided by ``fps`` to compare
        with the per-frame displacement of Eq. 2.
    Returns a list of ContactPhase, by effector then time.

    The phases depend on the source alone: they are kept with the binding for these settings
    (a re-bake found them again in 0.06 s of a 600-frame walk's 0.8 s), and each call gets its
    own list of the same phases (treated as read-only everywhere).
    """
    key = ("contacts", None if effectors is None else tuple(effectors), distance, speed, min_frames, friction, fps)
    kept = binding._joint_models.get(key)
    if kept is None:
        kept = binding._joint_models[key] = _detect_contacts(binding, effectors, distance, speed, min_frames,
                                                             friction, fps)
    return list(kept)


def _detect_contacts(binding, effectors, distance, speed, min_frames, friction, fps):
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    names = list(effectors) if effectors else default_effectors(sk, binding.motion, binding.body_height)
    if not names:
        raise ContactError("no effectors: name the feet and hands that make contacts")
    eps0 = 0.015 * H if distance is None else float(distance)
    per_second = 0.12 * H if speed is None else float(speed)
    if not (np.isfinite(fps) and fps > 0):
        raise ContactError(f"frame rate must be positive, got {fps}")
    vmax = per_second / fps
    if not (0 < eps0 < H and 0 < vmax < H):
        raise ContactError(f"contact thresholds out of range (distance {eps0:g}, speed {per_second:g} per second): "
                           f"give positive values below the body height ({H:g})")
    # The pelvis is an effector too: seated or lying on a surface, it is a support (§8.3,
    # the chair). It has no limb: its phases are never re-positioned, only held or replanned.
    pelvis = _body_frames(binding).pelvis
    # So are the thighs, by the knees at their ends: kneeling or lying, they rest on a surface.
    knees, thigh_tops = ([], []) if effectors else thigh_ends(binding, names, with_hips=True)
    if not effectors and sk.names[pelvis] not in names:
        names.append(sk.names[pelvis])
    limbs = []
    for n in names:
        try:
            limbs.append(find_limb(sk, n))
        except ContactError:
            if sk.index(n) != pelvis:
                raise
            limbs.append(Limb(pelvis, np.array([pelvis])))
    limbs += [Limb(k, np.array([k])) for k in knees if sk.names[k] not in names]
    idx = np.array([lb.effector for lb in limbs])
    pts = motion[:, idx]
    # Effectors farther than 0.2 body heights from every surface are never in
    # contact (a joint's sole height is a few centimetres): a narrow search band.
    bind_get = _colliders(binding.mesh, 0.2 * H)
    sd, normal, tri, bary = _closest_all(bind_get, binding.mesh, pts)
    dist = np.abs(sd)
    # A thigh rests by its middle (seated: the knee is past the seat's edge), so a knee's
    # resting test measures the middle of its thigh; its contact place stays the knee's own.
    rest = dist.copy()
    if knees:
        mid = 0.5 * (motion[:, knees] + motion[:, thigh_tops])
        d_mid = np.abs(_closest_all(bind_get, binding.mesh, mid)[0])
        for k, limb in enumerate(limbs):
            if limb.effector in knees:
                rest[:, k] = np.minimum(dist[:, k], d_mid[:, knees.index(limb.effector)])
    F = len(motion)
    vel = np.zeros((F, len(idx)))
    if F > 2:
        vel[1:-1] = np.linalg.norm(pts[2:] - pts[:-2], axis=-1) / 2
        vel[0], vel[-1] = vel[1], vel[-2]
    phases = []
    for k, limb in enumerate(limbs):
        d, r = dist[:, k], rest[:, k]
        finite = np.isfinite(d) & np.isfinite(r)
        if not finite.any():
            continue
        floor = np.percentile(r[finite], 5)
        sole = KNEE_SOLE_MAX if limb.effector in knees else SOLE_MAX
        if floor > sole * H:
            continue
        touching = finite & (r - floor < eps0) & (r < sole * H + eps0) & (vel[:, k] <= vmax)
        edges = np.flatnonzero(np.diff(np.r_[0, touching.astype(int), 0]))
        for s, e in zip(edges[::2], edges[1::2] - 1):
            if e - s + 1 < min_frames:
                continue
            m = (s + e) // 2
            # The contact normal is the face's: interpolated vertex normals lean
            # over the edges of coarse boxes (a stepping stone's top, say).
            n = _face_normal(binding.mesh, m, tri[m, k])
            if seat(limb):
                alpha, u = np.zeros(3), np.eye(3)               # no limb: no force profile
            else:
                alpha, u = force_profile(motion[m, limb.chain], n, friction)
            mesh_m = binding.mesh.frame(m)
            corners = mesh_m[binding.mesh.triangles[tri[m, k]]]
            phases.append(ContactPhase(int(limb.effector), sk.names[limb.effector], int(s), int(e),
                                       int(tri[m, k]), bary[m, k].copy(), bary[m, k] @ corners, n.copy(),
                                       float(d[m]), alpha, u, None if seat(limb) else limb))
    return phases


def thigh_ends(binding, names, with_hips=False):
    """The joints ending the thighs (knees) of the legs among the effectors ``names``: on each
    leg's chain, the joint about halfway down its length (Rigify's split thigh counts as one
    bone). Legs are the effectors whose median height is below the pelvis's. ``with_hips``:
    also each thigh's first joint (its hip joint)."""
    sk, motion = binding.skeleton, binding.motion
    pelvis = _body_frames(binding).pelvis
    height = np.median(motion[..., 2], axis=0)
    lengths = np.median(sk.bone_lengths(motion), axis=0)
    out, hips = [], []
    for n in names:
        j = sk.index(n)
        if height[j] >= height[pelvis]:
            continue
        try:
            chain = find_limb(sk, n).chain
        except ContactError:
            continue
        if len(chain) < 3:
            continue
        run = np.cumsum(lengths[chain[1:]])
        knee = int(chain[1 + int(np.argmin(np.abs(run[:-1] - run[-1] / 2)))])
        if knee not in out:                           # a foot and its toes share the knee
            out.append(knee)
            hips.append(int(chain[0]))
    return (out, hips) if with_hips else out


def seat(limb):
    """Whether a limb (or a phase's ``limb``, None for the pelvis) is the pelvis's: a seated or
    lying support, with no chain to bend."""
    return limb is None or len(limb.chain) == 1


# --- validity (§5.2) ---------------------------------------------------------------

def _body_frames(binding):
    """The binding's ``workspace.BodyFrames``, found once."""
    key = ("body_frames",)
    if key not in binding._joint_models:
        sk = binding.skeleton
        chains = []
        for e in limb_effectors(sk, binding.motion, binding.body_height).tolist():
            try:
                chains.append(find_limb(sk, sk.names[e]).chain)
            except ContactError:
                pass
        binding._joint_models[key] = body_frames(sk, binding.motion, binding.body_height, chains)
    return binding._joint_models[key]


def _workspace_key(binding, limb, lengths):
    """``_workspace``'s key and the limb's bone lengths (the median over the frames judged)."""
    L = np.median(np.atleast_2d(lengths)[:, limb.chain[1:]], axis=0)
    return ("workspace", tuple(limb.chain.tolist()),
            tuple(np.round(L / (0.005 * binding.body_height)).astype(int).tolist())), L


def _workspace(binding, limb, lengths):
    """The limb's ``workspace.Workspace`` for bone ``lengths`` ((n,J) over the frames judged:
    their median), built once per limb and length."""
    key, L = _workspace_key(binding, limb, lengths)
    if key not in binding._joint_models:
        full = np.median(binding.skeleton.bone_lengths(binding.motion), axis=0)
        full[limb.chain[1:]] = L
        binding._joint_models[key] = limb_workspace(binding.skeleton, binding.motion, binding.body_height,
                                                    _body_frames(binding), limb.chain, full)
    return binding._joint_models[key]


def reach_excess(binding, limb, poses, roots, points, lengths):
    """How far (body-frame plane distance, <= 0 inside) ``points`` (..., n, 3) lie outside the
    limb's workspace placed at ``roots`` (n,3) and turned with the body of ``poses`` (n,J,3)."""
    return _excess(binding, _workspace(binding, limb, lengths), poses, roots, points)


def _excess(binding, ws, poses, roots, points):
    rot = _body_frames(binding).rotations(poses, upper=ws.upper)
    return ws.excess(to_body(rot, roots, points))


def _phase_reach(binding, positions, mesh, phases, lengths):
    """{phase index: (n,) ``reach_excess`` of its contact point over its frames} for ``phases``
    {index: phase} with a limb: the phases of one limb and workspace in one batch (a walk's
    forty-nine phases took forty-nine rounds of body frames and hull tests)."""
    groups = {}
    for i, ph in phases.items():
        if ph.limb is not None:
            key, _ = _workspace_key(binding, ph.limb, lengths[ph.start:ph.end + 1])
            groups.setdefault(key, []).append(i)
    out = {}
    for members in groups.values():
        first = phases[members[0]]
        ws = _workspace(binding, first.limb, lengths[first.start:first.end + 1])
        frames, goals = [], []
        for i in members:
            ph = phases[i]
            fr = np.arange(ph.start, ph.end + 1)
            frames.append(fr)
            goals.append(held_path(binding, mesh, ph, fr))
        fr = np.concatenate(frames)
        ex = _excess(binding, ws, positions[fr], positions[fr, first.limb.root], np.concatenate(goals))
        for i, part in zip(members, np.split(ex, np.cumsum([len(f) for f in frames])[:-1])):
            out[i] = part
    return out


def _hull_distance(points2d, q):
    """Distance from q to the convex hull of 2-D points (0 inside).

    The hull by Andrew's monotone chain (a handful of support points: far cheaper than
    Qhull's set-up), then the distance to its edges when q is outside."""
    pts = sorted(set(map(tuple, np.round(np.asarray(points2d, float), 9).tolist())))
    q = np.asarray(q, float)
    if len(pts) == 1:
        return float(np.linalg.norm(q - pts[0]))

    def turn(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and turn(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and turn(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    hull = np.array(lower[:-1] + upper[:-1])                       # counter-clockwise
    a, b = hull, np.roll(hull, -1, axis=0)
    if len(hull) >= 3:
        cross = (b[:, 0] - a[:, 0]) * (q[1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (q[0] - a[:, 0])
        if np.all(cross >= -1e-12):
            return 0.0
    ab = b - a
    t = np.clip(np.einsum("kd,kd->k", q - a, ab) / np.maximum(np.einsum("kd,kd->k", ab, ab), 1e-300), 0.0, 1.0)
    return float(np.linalg.norm(q - (a + t[:, None] * ab), axis=1).min())


def _plane_basis(up):
    up = normalize(np.asarray(up, float))
    a = np.cross(up, [1.0, 0, 0] if abs(up[0]) < 0.9 else [0, 1.0, 0])
    a = normalize(a)
    return np.stack([a, np.cross(up, a)])


def _balance_excess(com, support_points, up):
    """How far (plane distance) the centre of mass ``com`` (3,) lies outside the support hull."""
    basis = _plane_basis(up)
    return _hull_distance(support_points @ basis.T, com @ basis.T)


def _masses(binding):
    """The binding's segment masses (``balance.segment_masses``), computed once."""
    key = ("segment_masses",)
    if key not in binding._joint_models:
        binding._joint_models[key] = segment_masses(binding.skeleton, binding.motion, binding.body_height)
    return binding._joint_models[key]


def _face_normal(mesh, f, tri):
    a, b, c = mesh.frame(f)[mesh.triangles[tri]]
    return normalize(np.cross(b - a, c - a))


def contact_point(mesh, phase, f):
    """The phase's surface point and face normal on ``mesh`` at frame f (moves with the surface)."""
    corners = mesh.frame(f)[mesh.triangles[phase.triangle]]
    return phase.bary @ corners, _face_normal(mesh, f, phase.triangle)


def check_contacts(binding, positions, mesh, phases, lengths, distance=None, up=(0.0, 0.0, 1.0), judge=None):
    """Status of each phase after adaptation: list of (valid: bool, reason or None).

    positions : (F,J,3) adapted joints; mesh : the edited environment;
    lengths : (F,J) bone lengths the adaptation aimed for.
    judge : optional indices of the phases to judge (the others still count as supports in
        the balance test); the list then has one entry per judged phase, in that order.
    """
    H = binding.body_height
    eps0 = 0.015 * H if distance is None else float(distance)
    margin = 0.02 * H
    get = _colliders(mesh, 0.2 * H)
    judged = list(range(len(phases))) if judge is None else [int(k) for k in judge]
    new_hit, worse, joint_sd = _frame_checks(binding, positions, mesh, phases, get, margin, up,
                                             [phases[k] for k in judged])
    reach = _phase_reach(binding, positions, mesh, {k: phases[k] for k in judged}, lengths)
    out = []
    for k, ph in ((i, phases[i]) for i in judged):
        limb = ph.limb
        frames = np.arange(ph.start, ph.end + 1)
        sd = joint_sd[frames, ph.effector]
        if np.isnan(sd).any():                        # an effector no tested bone ends at
            eff = positions[frames, ph.effector]
            if mesh.animated:
                sd = np.array([get(int(f)).closest(eff[i:i + 1])[0][0] for i, f in enumerate(frames)])
            else:
                sd = get(0).closest(eff)[0]
        off_surface = np.abs(sd) - ph.clearance > eps0
        off_surface[off_surface] &= ~_stands_on(mesh, positions[frames[off_surface], ph.effector], ph.clearance, up,
                                                 eps0)
        if np.mean(off_surface) > 0.5:
            out.append((False, "unsupported"))
            continue
        # Outside the limb's workspace (the hull of its configurations within joint limits,
        # carried with the body) by more than the contact tolerance on any frame.
        if limb is not None and np.any(reach[k] > eps0):
            out.append((False, "unreachable"))
            continue
        # Collision: a bone of the contact's limb or of the trunk (three points along each)
        # inside the environment on any frame of the phase, where the source was not.
        if new_hit[np.ix_(frames, _judged_bones(binding, ph))].any():
            out.append((False, "collision"))
            continue
        # Balance over the whole phase: the centre of mass from segment masses against the
        # hull of the contacts active at each frame, relative to the source; lost when it is
        # more than 0.1 body heights farther out on most of the phase (as *unsupported*: a walk
        # ducking under a beam leans 0.115 body heights farther out on 42 % of a step and
        # keeps its footing).
        if np.mean(worse[frames] > 0.1 * H) > 0.5:
            out.append((False, "balance"))
            continue
        out.append((True, None))
    return out


def _active(phases, F):
    """Per frame of F, the effectors of the ``phases`` in contact then (lists)."""
    active = [[] for _ in range(F)]
    for q in phases:
        for f in range(q.start, q.end + 1):
            active[f].append(q.effector)
    return active


def _frame_checks(binding, positions, mesh, phases, get, margin, up, judged=None):
    """Over the frames of the ``judged`` phases (default: all ``phases``): per frame and bone
    (F,B) whether the bone (by its child joint, ``bone_samples`` order) is newly inside the
    environment (more than ``margin`` deep where the source was not), per frame (F,) how
    much farther the centre of mass is outside the hull of the active contacts (all
    ``phases``) than in the source, and per frame and joint (F,J) the joints' signed distances
    where they were measured (NaN elsewhere).

    A bone is tested only on the frames where a judged phase whose collision test covers it
    (``_judged_bones``) is active: a walk's swinging leg is not the standing foot's business
    (the 600-frame walk of the benchmark: 34,425 samples and joints searched, not 62,685)."""
    sk, F = binding.skeleton, len(positions)
    active = _active(phases, F)
    B = int(np.sum(sk.parents >= 0))
    wanted, need = np.zeros(F, bool), np.zeros((F, B), bool)
    for q in phases if judged is None else judged:
        wanted[q.start:q.end + 1] = True
        need[q.start:q.end + 1, _judged_bones(binding, q)] = True
    frames = np.array([f for f in range(F) if active[f] and wanted[f]], np.int64)
    new_hit, worse = np.zeros((F, B), bool), np.zeros(F)
    joint_sd = np.full((F, len(sk.parents)), np.nan)
    if not frames.size:
        return new_hit, worse, joint_sd
    new_hit[frames], joint_sd[frames] = newly_inside(binding, positions, mesh, frames, need[frames], margin, get)
    masses = _masses(binding)
    com_now, com_then = centre_of_mass(sk, positions[frames], masses), centre_of_mass(sk, binding.motion[frames], masses)
    basis = _plane_basis(up)
    # Frames with the same active contacts at once (a walk: a handful of groups, not 600 hulls).
    groups = {}
    for i, f in enumerate(frames.tolist()):
        groups.setdefault(tuple(active[f]), []).append(i)
    for on, rows in groups.items():
        rows = np.asarray(rows)
        at, on = frames[rows], list(on)
        worse[at] = (_hull_distances(positions[at][:, on] @ basis.T, com_now[rows] @ basis.T)
                     - _hull_distances(binding.motion[at][:, on] @ basis.T, com_then[rows] @ basis.T))
    return new_hit, worse, joint_sd


def _hull_distances(points2d, q):
    """(n,) ``_hull_distance`` of each q (n,2) to its points (n,k,2), for many frames at once.

    Outside the hull, the distance to it is the least distance to a segment joining two of the
    points (the hull's edges are among them, and the others lie inside it); inside, some
    triangle of three points holds q. Beyond eight points a frame at a time."""
    points2d, q = np.asarray(points2d, float), np.asarray(q, float)
    n, k = points2d.shape[:2]
    if k > 8:
        return np.array([_hull_distance(p, x) for p, x in zip(points2d, q)])
    if k == 1:
        return np.linalg.norm(q - points2d[:, 0], axis=-1)
    i, j = np.triu_indices(k, 1)
    a, b = points2d[:, i], points2d[:, j]                                   # (n,P,2)
    ab, aq = b - a, q[:, None] - a
    t = np.clip(np.einsum("npd,npd->np", aq, ab) / np.maximum(np.einsum("npd,npd->np", ab, ab), 1e-300), 0.0, 1.0)
    out = np.linalg.norm(aq - t[..., None] * ab, axis=-1).min(axis=1)
    if k >= 3:
        tri = np.array([(x, y, z) for x in range(k) for y in range(x + 1, k) for z in range(y + 1, k)])
        a, b, c = (points2d[:, tri[:, m]] for m in range(3))                 # (n,T,2)

        def cross(o, u, v):
            return (u[..., 0] - o[..., 0]) * (v[..., 1] - o[..., 1]) - (u[..., 1] - o[..., 1]) * (v[..., 0] - o[..., 0])
        x = q[:, None]
        area = cross(a, b, c)
        c1, c2, c3 = cross(a, b, x), cross(b, c, x), cross(c, a, x)
        sign = np.where(area < 0, -1.0, 1.0)
        held = (np.abs(area) > 1e-12) & (sign * c1 >= -1e-12) & (sign * c2 >= -1e-12) & (sign * c3 >= -1e-12)
        out = np.where(held.any(axis=1), 0.0, out)
    return out


def _limb_joints(binding):
    """Every joint on a limb chain or below an effector, found once."""
    key = ("limb_bones",)
    if key not in binding._joint_models:
        sk = binding.skeleton
        limbs = set()
        for e in limb_effectors(sk, binding.motion, binding.body_height).tolist():
            try:
                chain = find_limb(sk, sk.names[e]).chain.tolist()
            except ContactError:                      # a one-bone limb: its subtree only
                chain = []
            limbs |= set(chain)
            # Leaves beside the chain (twist bones: Unreal's ``calf_twist_01_l``) are the limb's.
            limbs |= {int(k) for j in chain[1:-1] for k in sk.children(j) if len(sk.children(k)) == 0}
            limbs |= set(_subtree(sk, e).tolist())
        binding._joint_models[key] = limbs
    return binding._joint_models[key]


def _judged_bones(binding, phase):
    """(b,) indices (``bone_samples`` order) of the bones a phase's collision test covers: its
    own limb (the chain and what hangs below the effector) and the trunk. Another limb's bones
    are its own contacts' business: a swinging foot clipping a stone does not make the other
    foot's contact invalid."""
    key = ("judged_bones", None if phase.limb is None else tuple(phase.limb.chain.tolist()), int(phase.effector))
    if key not in binding._joint_models:                 # once per limb (a walk: 49 phases, 2 limbs)
        sk = binding.skeleton
        limbs = _limb_joints(binding)
        if phase.limb is None:                            # a seat: the trunk only
            mine = set()
        else:
            mine = set(phase.limb.chain.tolist()) | set(_subtree(sk, phase.effector).tolist())
        child = np.flatnonzero(sk.parents >= 0)
        floor = floor_bones(binding)
        binding._joint_models[key] = np.flatnonzero([((c in mine) or (c not in limbs)) and c not in floor
                                                     for c in child.tolist()])
    return binding._joint_models[key]


def floor_bones(binding):
    """Child joints of the trunk bones that start well below the hips (Unreal's ``root`` on the
    floor under the pelvis): no body segment (as in ``balance``), never a collision, and left
    out of the root planner's trunk (lowered with the hips, that bone goes through the floor)."""
    key = ("floor_bones",)
    if key not in binding._joint_models:
        sk, motion = binding.skeleton, binding.motion
        height = np.median(motion[..., 2], axis=0)
        low = height < height[_body_frames(binding).pelvis] - 0.25 * binding.body_height
        limbs = _limb_joints(binding)
        binding._joint_models[key] = {int(c) for c in np.flatnonzero(sk.parents >= 0)
                                      if low[sk.parents[c]] and c not in limbs}
    return binding._joint_models[key]


def newly_inside(binding, positions, mesh, frames, need, margin, get=None):
    """(n,B) per frame of ``frames`` and bone (``bone_samples`` order) whether the bone of
    ``positions`` is inside ``mesh`` or through it (``_bones_inside``, the bones ``need`` (n,B)
    marks) where the source's was not in the bind-time environment; and (n,J) the joints'
    signed distances (NaN where not measured). ``get``: the colliders of ``mesh`` (``_colliders``)."""
    sk, H = binding.skeleton, binding.body_height
    B = int(np.sum(sk.parents >= 0))
    get = _colliders(mesh, 0.2 * H) if get is None else get
    inside, at = _bones_inside(sk, positions, mesh, frames, get, margin, need)
    fresh = np.zeros((len(frames), B), bool)
    hit = np.flatnonzero(inside.any(axis=1))
    if hit.size:
        now = inside[hit].reshape(len(hit), -1, B)                          # (n, samples, B)
        was, _ = _bones_inside(sk, binding.motion, binding.mesh, frames[hit], _colliders(binding.mesh, 0.2 * H),
                               margin, now.any(axis=1))
        fresh[hit] = (now & ~was.reshape(len(hit), -1, B)).any(axis=1)
    return fresh, at


def _bones_inside(skeleton, positions, mesh, frames, get, margin, need=None):
    """(n,K+B) whether each point along the bones (``bone_samples``) of ``positions`` at
    ``frames`` is more than ``margin`` inside ``mesh`` (colliders from ``get``), then per bone
    whether it passes through a surface or has a joint more than ``margin`` inside (a slab
    thinner than the samples' spacing: a leg went through a 10 cm slab at knee height with no
    sample 2 cm inside it); and (n,J) the joints' signed distances (NaN where not measured).

    need : optional (n,B) bool, the bones to test on each frame (the others read False, and
        only the joints of tested bones are measured)."""
    child = np.flatnonzero(skeleton.parents >= 0)
    parent = skeleton.parents[child]
    n, J, B = len(frames), len(skeleton.parents), len(child)
    need = np.ones((n, B), bool) if need is None else np.asarray(need, bool)
    P = positions[frames]                                                      # (n,J,3)
    S = len(bone_samples(skeleton, P[:1])[0]) // max(B, 1)                     # samples per bone
    pts = bone_samples(skeleton, P).reshape(n, S, B, 3)
    # The joints of the tested bones.
    ends = np.zeros((B, J), bool)
    ends[np.arange(B), parent] = ends[np.arange(B), child] = True
    used = (need.astype(np.int64) @ ends) > 0                                  # (n,J)
    pick = np.broadcast_to(need[:, None, :], (n, S, B))
    sd, at = np.full((n, S, B), np.inf), np.full((n, J), np.inf)
    if mesh.animated:
        for i, f in enumerate(frames.tolist()):
            col = get(int(f))
            sd[i][pick[i]] = col.closest(pts[i][pick[i]])[0]
            at[i, used[i]] = col.closest(P[i, used[i]])[0]
    else:
        # Samples and joints in one search.
        found = get(0).closest(np.concatenate([pts[pick], P[used]]))[0]
        k = int(pick.sum())
        sd[pick], at[used] = found[:k], found[k:]
    # Through, not dipping: both of the bone's joints outside (a toe tip a few mm into a raised
    # stone is the samples' business, with their margin); or a joint itself deeper than the
    # margin (a head inside a slab, its bones' samples each within 3 cm of a face).
    # A point of the surface is at least d_a from a joint d_a away from it, so a bone whose
    # joints lie d_a and d_b from the surface can only cross it between d_a from one end and
    # d_b from the other: none when d_a + d_b exceeds its length (a thigh 20 cm over a floor, a
    # bone out of the band), and only that part of it is traced (a hair longer, for rounding).
    band = get(int(frames[0])).band
    lower = np.minimum(np.abs(at), band)
    length = np.linalg.norm(P[:, child] - P[:, parent], axis=-1)
    fi, bi = np.nonzero(need & (at[:, parent] >= 0.0) & (at[:, child] >= 0.0)
                        & (lower[:, parent] + lower[:, child] <= length * (1.0 + 1e-9)))
    cross = np.zeros((n, B), bool)

    def trace(fi, bi, a, b):
        """cross[fi, bi] from whether each segment a -> b passes through the mesh at its frame."""
        if mesh.animated:
            for f in np.unique(fi).tolist():
                rows = np.flatnonzero(fi == f)
                cross[f, bi[rows]] = get(int(frames[f])).crossing(a[rows], b[rows])
        else:
            cross[fi, bi] = get(0).crossing(a, b)

    if fi.size:
        a, b = P[fi, parent[bi]], P[fi, child[bi]]
        span = np.maximum(length[fi, bi], 1e-300)[:, None]
        from_a = np.clip(lower[fi, parent[bi]] * (1.0 - 1e-9) - 1e-9 * band, 0.0, None)[:, None] / span
        from_b = np.clip(lower[fi, child[bi]] * (1.0 - 1e-9) - 1e-9 * band, 0.0, None)[:, None] / span
        trace(fi, bi, a + from_a * (b - a), b - from_b * (b - a))
    # Entering: one joint outside, the other inside, and still past the surface when the bone is
    # cut ``margin`` short at its inside end (a head 8 cm up into a 10 cm slab is 2 cm from its
    # top face, within the margin of it, yet went through the underside 8 cm).
    fi, bi = np.nonzero(need & ~cross & ((at[:, parent] >= 0.0) != (at[:, child] >= 0.0)) & (length > margin))
    if fi.size:
        out_end = np.where((at[fi, parent[bi]] >= 0.0)[:, None], P[fi, parent[bi]], P[fi, child[bi]])
        in_end = np.where((at[fi, parent[bi]] >= 0.0)[:, None], P[fi, child[bi]], P[fi, parent[bi]])
        trace(fi, bi, out_end, in_end + (out_end - in_end) * (margin / length[fi, bi])[:, None])
    cross |= (at[:, parent] < -margin) | (at[:, child] < -margin)
    cross &= need
    return np.concatenate([(sd < -margin).reshape(n, S * B), cross], axis=1), np.where(used, at, np.nan)


# --- re-positioning (§5.3) -----------------------------------------------------------

def fabrik(chain, target, lengths, iterations=12):
    """The chain (n,3) bent so its last point reaches ``target`` (3,) with its root fixed
    (n,3); with targets (C,3), every bend at once (C,n,3)."""
    target = np.asarray(target, float)
    single = target.ndim == 1
    goal = target[None] if single else target
    p = np.repeat(np.asarray(chain, float)[None], len(goal), axis=0)
    root = p[:, 0].copy()
    n = p.shape[1]
    for _ in range(iterations):
        p[:, -1] = goal
        for i in range(n - 2, -1, -1):
            d = p[:, i] - p[:, i + 1]
            p[:, i] = p[:, i + 1] + d * (lengths[i] / np.maximum(np.linalg.norm(d, axis=-1), 1e-12))[:, None]
        p[:, 0] = root
        for i in range(1, n):
            d = p[:, i] - p[:, i - 1]
            p[:, i] = p[:, i - 1] + d * (lengths[i - 1] / np.maximum(np.linalg.norm(d, axis=-1), 1e-12))[:, None]
    return p[0] if single else p


def candidate_points(mesh, f, normal, min_cos=0.5, facing=None, with_ids=False):
    """Surface samples (triangle centroids and corners pulled 10 % inwards) with their
    face normals: within 60° of ``normal`` (``min_cos``), or, with ``facing`` (a point),
    any face that looks towards it. ``with_ids``: also each sample's triangle (K,) and
    barycentric coordinates (K,3), so it can be followed on an animated surface."""
    v = mesh.frame(f)
    ids = np.flatnonzero(mesh.valid)
    tri = mesh.triangles[ids]
    corners = v[tri]
    fn = normalize(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]))
    cen = corners.mean(axis=1)
    inner = cen[:, None] + 0.9 * (corners - cen[:, None])
    pts = np.concatenate([cen, inner.reshape(-1, 3)])
    nrm = np.concatenate([fn, np.repeat(fn, 3, axis=0)])
    if facing is not None:
        keep = np.einsum("kd,kd->k", nrm, facing - pts) > 0
    else:
        keep = nrm @ normal >= min_cos
    if not with_ids:
        return pts[keep], nrm[keep]
    T = len(ids)
    which = np.concatenate([ids, np.repeat(ids, 3)])
    bary = np.concatenate([np.full((T, 3), 1.0 / 3.0), np.tile(0.9 * np.eye(3) + 0.1 / 3.0, (T, 1))])
    return pts[keep], nrm[keep], which[keep], bary[keep]


def held_path(binding, mesh, ph, frames):
    """(n,3) where phase ``ph``'s effector stands at ``frames`` held on its contact point: the
    point where ``mesh`` has it, plus the source's offset from the point, turned as its face
    turned. A contact point is the nearest surface point, not always under the sole: a toe past
    its stone's edge is nearest the stone's side, and the point plus the face normal times the
    clearance put it 3.7 cm out from the side and as low as the stone's top; a real walk's held
    foot was reported unreachable there (4 cm out of its workspace) where it stood as the
    source. On an unmoved surface: the source's own path; on one moved rigidly, that path moved
    with it."""
    motion, e = binding.motion, ph.effector
    frames = np.asarray(frames, np.int64)
    if not (mesh.animated or binding.mesh.animated):
        turn = _face_axes(mesh, 0, ph.triangle) @ _face_axes(binding.mesh, 0, ph.triangle).T
        return contact_point(mesh, ph, 0)[0] + (motion[frames, e] - ph.position) @ turn.T
    out = np.empty((len(frames), 3))
    for i, f in enumerate(frames.tolist()):
        turn = _face_axes(mesh, f, ph.triangle) @ _face_axes(binding.mesh, f, ph.triangle).T
        out[i] = contact_point(mesh, ph, f)[0] + turn @ (motion[f, e] - contact_point(binding.mesh, ph, f)[0])
    return out


def _face_axes(mesh, f, tri):
    """(3,3) triangle ``tri``'s axes at frame f as columns: its first edge, the normal crossed
    with it, the normal."""
    a, b, c = mesh.frame(f)[mesh.triangles[tri]]
    n = normalize(np.cross(b - a, c - a))
    t = normalize(b - a)
    return np.stack([t, np.cross(n, t), n], axis=1)


def track(mesh, triangle, bary, clearance, frames):
    """(n,3) where an effector resting on the surface point (``triangle``, ``bary``) is at each
    of ``frames``: the point plus its face normal times ``clearance``. On an animated surface
    it moves with the surface (a contact pinned at one frame slid on a moving support)."""
    out = np.empty((len(frames), 3))
    for i, f in enumerate(np.asarray(frames).tolist()):
        corners = mesh.frame(f)[mesh.triangles[triangle]]
        out[i] = bary @ corners + _face_normal(mesh, f, triangle) * clearance
        if not mesh.animated:
            out[i + 1:] = out[i]
            break
    return out


@dataclass
class Outcome:
    """What happened to one contact phase."""

    phase: ContactPhase
    status: str                        # 'valid' | 'repositioned' | 'unresolved'
    reason: str | None
    position: np.ndarray               # original contact point (world)
    new_position: np.ndarray | None
    #: The triangle of the new contact (re-positioned or held), for the report's surface.
    triangle: int | None = None
    #: How the new contact is carried: "re-embedded" (§6, ``continuity``) or "pins" (positional
    #: pins, the fallback); None for a phase that was not moved.
    continuity: str | None = None
    #: ``(frames (n,), blend (n,), joints (m,))`` the pins of a re-positioned limb held: the
    #: effector and what hangs below it, eased in and out (``_pin_phase``).
    pinned: tuple | None = None
    #: The ``descriptors.Reembedded`` that carries a re-embedded contact: passed to ``adapt``
    #: again (``embeddings``), it keeps the contact on its new support when that support moves.
    embedding: object | None = None


def plan_repositioning(binding, positions, mesh, phases, checks, lengths, locked=(), ignored=(),
                       friction=FRICTION, up=(0.0, 0.0, 1.0)):
    """New contact points for the invalid phases, and the pins that put them there.

    Returns ``outcomes`` (one Outcome per phase) and ``pins`` (F,J,3), NaN
    where a joint is free. ``locked`` phases (indices) keep their original
    contact (pinned where the edited surface now has it); ``ignored`` ones are
    left alone.
    """
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    F, J, _ = positions.shape
    pins = np.full((F, J, 3), np.nan)
    margin = 0.02 * H
    get = _colliders(mesh, 0.5 * H)
    outcomes = [None] * len(phases)
    moved = []                       # (subtree joints, start, end, shift) of repositioned phases
    # Parents before children, so a toe follows its repositioned foot.
    order = sorted(range(len(phases)), key=lambda i: (len(_ancestors(sk, phases[i].effector)), phases[i].start))
    for i in order:
        ph, (ok, reason) = phases[i], checks[i]
        limb, m = ph.limb, ph.middle
        if ok or i in ignored:
            outcomes[i] = Outcome(ph, "valid" if ok else "unresolved", reason, ph.position, None)
            continue
        if limb is None:                              # a seat: held where its surface is now, or left
            p, n = contact_point(mesh, ph, m)         # to replanning (there is no limb to move it)
            if i in locked or np.linalg.norm(p - ph.position) < SEAT_FOLLOW * H:
                fr = np.arange(ph.start, ph.end + 1)
                # Held at its source offset from the contact point, carried with the surface (a
                # knee sits past a seat's edge, not along its face's normal).
                pins[fr, ph.effector] = track(mesh, ph.triangle, ph.bary, 0.0, fr) + (motion[fr, ph.effector]
                                                                                      - ph.position)
                outcomes[i] = Outcome(ph, "repositioned", reason, ph.position, p, int(ph.triangle))
            else:
                outcomes[i] = Outcome(ph, "unresolved", reason, ph.position, None)
            continue
        carried = next((shift for joints, s0, e0, shift in moved
                        if ph.effector in joints and s0 <= m <= e0), None)
        if carried is not None:                       # moved with its limb (toes under a foot)
            outcomes[i] = Outcome(ph, "repositioned", reason, ph.position, ph.position + carried,
                                  continuity="pins")
            continue
        if i in locked:
            p, n = contact_point(mesh, ph, m)
            # Where the source has it from its contact point (``held_path``): along the face's
            # normal by the clearance, a toe whose nearest face was its stone's side (it stood
            # past the edge) was held 3.7 cm out from the side, hanging off the stone.
            target = held_path(binding, mesh, ph, np.arange(ph.start, ph.end + 1))
            span = _pin_phase(pins, sk, positions, motion, ph, target, phases)
            _swing_clear(binding, mesh, pins, span, up, 0.015 * H)
            moved.append((set(_subtree(sk, ph.effector).tolist()), ph.start, ph.end, p - ph.position))
            outcomes[i] = Outcome(ph, "repositioned", reason, ph.position, p, int(ph.triangle), "pins", span)
            continue
        # The root may come down or across by ROOT_SLACK body heights to reach a new
        # contact (the solver lowers the hips): candidates within that of the workspace.
        frames = np.arange(ph.start, ph.end + 1)
        # Feet need support (a surface oriented like the original one); hands may
        # push on anything that faces the limb's root (a wall after a ceiling).
        support = any(w in ph.name.lower() for w in ("foot", "toe"))
        pts, nrm, cand_tri, cand_bary = candidate_points(mesh, m, ph.normal, with_ids=True,
                                                         facing=None if support else positions[m, limb.root])
        goal = pts + nrm * ph.clearance
        # Where the limb's root would be had this contact not pulled it: the
        # source root moved like the neighbouring valid contacts moved.
        roots = _root_estimate(phases, checks, positions, motion, ph)
        root = roots[m - ph.start]
        # The ball of the limb's length holds its workspace: a cheap first cut (a finely cut
        # floor gives 200,000 candidate points).
        ball = float(lengths[frames][:, limb.chain[1:]].sum(axis=1).max()) + ROOT_SLACK * H
        near = np.linalg.norm(goal - root, axis=1) <= ball
        near[near] = reach_excess(binding, limb, positions[m], root, goal[near], lengths[frames]) <= ROOT_SLACK * H
        # Not on the surface that failed: a candidate must stay on after the edit.
        pts, nrm, goal, cand_tri, cand_bary = pts[near], nrm[near], goal[near], cand_tri[near], cand_bary[near]
        # Nor under another surface: the ground under a stone is a surface facing up in reach, and
        # a foot set there is inside the stone (on a real standing stretch, 0.18 m into it; the
        # limb's collision test misses it by the stone's side 2.5 cm away).
        free = ~_covered(mesh, goal, up, ball)
        pts, nrm, goal, cand_tri, cand_bary = pts[free], nrm[free], goal[free], cand_tri[free], cand_bary[free]
        if not len(pts):
            outcomes[i] = Outcome(ph, "unresolved", reason, ph.position, None)
            continue
        seg = lengths[m, limb.chain[1:]]
        chain_m = motion[m, limb.chain] - motion[m, limb.root] + root
        bents = fabrik(chain_m, goal, seg)                                    # every candidate at once
        h1 = profile_score(profile_along(bents, ph.axes, nrm, friction), ph.profile)          # Eq. 11
        inside = reach_excess(binding, limb, positions[frames], roots, goal[:, None], lengths[frames]) <= ROOT_SLACK * H
        h2 = duration_score(inside, m - ph.start)                                             # Eq. 12-13
        h1n = h1 / max(np.abs(h1).max(), 1e-12)
        score = 0.7 * h1n + 0.3 * h2                                                           # Eq. 14
        masses = _masses(binding)
        balance_lost = _balance_judge(binding, positions, phases, ph, roots, lengths, masses, up)
        chosen = None
        # Candidates scoring within 20 % of the best are taken nearest to the original
        # contact first (product decision: the foot lands where the animator expects).
        near_orig = np.linalg.norm(pts - ph.position, axis=1)        # where it was in the source
        bucket = np.floor((score.max() - score) / max(0.2 * abs(score.max()), 1e-12))
        order = np.lexsort((near_orig, bucket))
        # The foot's toes in contact go where it goes (``carried`` above): candidates that keep
        # them on a surface first (product decision: a real walk's foot was set on the corner of
        # the next stone with its toe 0.3 m over the ground).
        toes_on = _carried_supported(mesh, phases, ph, sk, pts - ph.position, up, 0.015 * H)
        order = order[np.argsort(~toes_on[order], kind="stable")]
        for c in order:
            bent = bents[c]
            if np.any(get(m).closest(_limb_samples(bent, (0.25, 0.5, 0.75, 1.0)))[0] < -margin):   # collision
                continue
            if balance_lost(goal[c], bent):                                                     # balance
                continue
            chosen = c
            break
        if chosen is None:
            outcomes[i] = Outcome(ph, "unresolved", reason, ph.position, None)
            continue
        point, bary = _inside_edges(mesh, phases, ph, sk, m, int(cand_tri[chosen]), cand_bary[chosen], up, H)
        span = _pin_phase(pins, sk, positions, motion, ph, track(mesh, cand_tri[chosen], bary,
                                                                 ph.clearance, np.arange(ph.start, ph.end + 1)), phases)
        _swing_clear(binding, mesh, pins, span, up, 0.015 * H)
        moved.append((set(_subtree(sk, ph.effector).tolist()), ph.start, ph.end, point - ph.position))
        outcomes[i] = Outcome(ph, "repositioned", reason, ph.position, point, int(cand_tri[chosen]), "pins",
                              span)
    return outcomes, pins


#: Frames of a phase its candidates' balance is judged on (``_balance_judge``), evenly spread.
BALANCE_FRAMES = 5


def _balance_judge(binding, positions, phases, ph, roots, lengths, masses, up):
    """``lost(goal, bent)``: whether a candidate contact at ``goal`` (3,), the limb bent onto it
    at the phase's middle as ``bent`` (K,3), loses balance over the phase as ``check_contacts``
    judges a contact: at ``BALANCE_FRAMES`` frames of it, the centre of mass of the posture with
    the limb bent onto the candidate (what hangs below the effector carried along) against the
    hull of the candidate and the other contacts active then where they are, lost when more than
    0.1 body heights farther out than the source's on most of them. The paper judges the middle
    frame; the issue asks for the whole phase."""
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    limb, m = ph.limb, ph.middle
    below = _subtree(sk, ph.effector)[1:]
    frames = np.unique(np.r_[np.linspace(ph.start, ph.end, BALANCE_FRAMES).round().astype(np.int64), m])
    others, then, chains, segs = [], [], [], []
    for f in frames:
        on = [q for q in phases if q.start <= f <= q.end and q is not ph]
        others.append(positions[f, [q.effector for q in on]])
        then.append(_balance_excess(centre_of_mass(sk, motion[f], masses),
                                    motion[f, [q.effector for q in on] + [ph.effector]], up))
        chains.append(motion[f, limb.chain] - motion[f, limb.root] + roots[f - ph.start])
        segs.append(lengths[f, limb.chain[1:]])

    def lost(goal, bent):
        out = 0
        for k, f in enumerate(frames):
            limb_f = bent if f == m else fabrik(chains[k], goal[None], segs[k])[0]
            posed = positions[f].copy()
            posed[below] += limb_f[-1] - posed[ph.effector]
            posed[limb.chain] = limb_f
            # The other contacts where they are then, toes included, as the middle frame's test
            # had them. (Carried with the foot, the toes of a real walk's foot whose stone moved
            # left it no candidate in balance on 1900 stone 9 and 3300 stone 11: 8 and 12 frames
            # hanging, and the issue's row 1900 stone 9 stepped 2.29x.)
            now = _balance_excess(centre_of_mass(sk, posed, masses), np.vstack([others[k], goal]), up)
            out += now - then[k] > 0.1 * H
        return out > 0.5 * len(frames)

    return lost


def _carried_by(sk, phases, ph):
    """The ``phases`` of effectors below ``ph``'s (a toe under a foot) whose middle falls within
    ``ph``: they go where ``ph``'s contact goes."""
    below = set(_subtree(sk, ph.effector)[1:].tolist())
    return [q for q in phases if q is not ph and q.effector in below and ph.start <= q.middle <= ph.end]


def _carried_supported(mesh, phases, ph, sk, shifts, up, eps0):
    """(n,) for each of the ``shifts`` (n,3) of phase ``ph``'s contact, whether every phase it
    carries (``_carried_by``) still stands on a surface when moved by the same shift
    (``_stands_on``: a surface facing up straight under it at its sole's distance; the nearest
    surface's distance passed a toe 4 cm past a stone's edge)."""
    up = normalize(np.asarray(up, float))
    ok = np.ones(len(shifts), bool)
    for q in _carried_by(sk, phases, ph):
        ok &= _stands_on(mesh, q.position + q.clearance * up + shifts, q.clearance, up, eps0)   # the joint
    return ok


def _edge_ring(up, H):
    """(4,3) level offsets ``STAND_MARGIN`` body heights (``H``) long, two by two opposite, square
    to the unit ``up``: a point stands that far inside a surface's edges when it stands at each."""
    side = normalize(np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0]))
    return STAND_MARGIN * H * np.array([side, -side, np.cross(up, side), -np.cross(up, side)])


def _inside_edges(mesh, phases, ph, sk, f, tri, bary, up, H):
    """``(point (3,), bary (3,))``: the chosen surface point of phase ``ph`` (``tri``, ``bary`` on
    frame ``f``), moved towards its triangle's centre by the least quarter of the way that has the
    effector and the contacts it carries stand ``STAND_MARGIN`` body heights inside the surface's
    edges (a foot set on the neighbouring stone 2 mm inside its edge stood its joint 6 mm past it
    for 13 frames); as chosen when none does, or on an animated surface."""
    corners = mesh.frame(f)[mesh.triangles[tri]]
    if mesh.animated:
        return bary @ corners, bary
    up = normalize(np.asarray(up, float))
    ring = _edge_ring(up, H)
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        b = bary + t * (1.0 / 3.0 - bary)
        shift = b @ corners - ph.position
        if all(_stands_on(mesh, q.position + q.clearance * up + shift + ring, q.clearance, up, 0.015 * H).all()
               for q in [ph] + _carried_by(sk, phases, ph)):
            return b @ corners, b
    return bary @ corners, bary


def duration_score(inside, middle):
    """h2 of Eq. 12-13 per candidate: the longest run of frames s* <= middle <= g* during which
    the candidate stays within reach (``inside`` (C,n) bool over the phase's n frames),
    (g* - s*) / (g - s); 0 when it is out of reach at the middle frame itself."""
    inside = np.asarray(inside, bool)
    C, n = inside.shape
    if n < 2:
        return inside[:, 0].astype(float) if n else np.zeros(C)
    left = inside[:, middle::-1]                         # middle, middle - 1, ..., 0
    right = inside[:, middle:]
    run_l = np.where(left.all(axis=1), left.shape[1], np.argmin(left, axis=1))      # frames from middle down
    run_r = np.where(right.all(axis=1), right.shape[1], np.argmin(right, axis=1))
    span = np.maximum(run_l + run_r - 2, 0)                                         # g* - s*
    return np.where(inside[:, middle], span / (n - 1), 0.0)


def _root_estimate(phases, checks, positions, motion, ph, pad=10):
    """(n,3) root positions over the phase: the source root shifted by the mean
    displacement of the valid contacts within ``pad`` frames of it (none: no shift)."""
    frames = np.arange(ph.start, ph.end + 1)
    shifts = []
    for q, (ok, _) in zip(phases, checks):
        if ok and q is not ph and q.effector != ph.effector and q.end >= ph.start - pad and q.start <= ph.end + pad:
            fr = np.arange(q.start, q.end + 1)
            shifts.append((positions[fr, q.effector] - motion[fr, q.effector]).mean(axis=0))
    shift = np.mean(shifts, axis=0) if shifts else np.zeros(3)
    return motion[frames, ph.limb.root] + shift


def largest_step(p):
    """The largest frame-to-frame joint step of a motion (F,J,3) (0 for one frame)."""
    return float(np.linalg.norm(np.diff(p, axis=0), axis=-1).max()) if len(p) > 1 else 0.0


def _ancestors(sk, j):
    out = []
    p = sk.parents[j]
    while p >= 0:
        out.append(p)
        p = sk.parents[p]
    return out


def adapt_with_contacts(binding, mesh, *, reposition=True, effectors=None, locked=(), ignored=(),
                        distance=None, speed=None, fps=30.0, friction=FRICTION, up=(0.0, 0.0, 1.0), phases=None,
                        replan_root=True, seed=0, reembed=True, **options):
    """``adapt`` plus contact checking and, with ``reposition``, contact re-positioning.

    phases : the ``detect_contacts`` result for these settings when the caller has it already
        (detected once per bake); detected here otherwise.
    replan_root : with ``reposition``, phases still invalid after re-positioning get the root
        replanned over their frames (``replanning``, §7; static environments); when no root
        path is found they are reported ``unresolved`` with reason ``no root path``. A
        replanned motion is kept only when it leaves fewer phases unresolved and adds no jump
        (``JUMP_RATIO``); otherwise the motion before it is returned.
    seed : the root planner's random seed (the same seed gives the same motion).
    reembed : carry re-positioned limbs by re-embedded descriptors instead of positional pins
        (§6, ``continuity``); each outcome's ``continuity`` says which one a phase got.
    options : passed to ``adapt`` (bone_lengths, affinity_override, ...).
    Returns ``(AdaptResult, outcomes)``; without ``reposition`` invalid phases
    are reported ``unresolved``.
    """
    user_pins = options.get("pins")
    result, outcomes, pins = _adapt_pinned(binding, mesh, reposition, effectors, locked, ignored, distance, speed,
                                           fps, friction, up, phases, replan_root, seed, **options)
    if reposition and not mesh.animated:
        result, pins = _limbs_kept_out(binding, mesh, result, outcomes, pins, distance, up, options)
    if reposition and reembed and not mesh.animated and pins is not None:
        from .continuity import carry
        eps0 = 0.015 * binding.body_height if distance is None else float(distance)
        pinned = result
        result, outcomes, used, embeddings = carry(binding, mesh, result, outcomes, pins, user_pins, eps0, up,
                                                   distance, options, with_pins=True)
        # The contacts that stay are held on the motion as carried: the re-embedded descriptors
        # ease in where the pins did, and the jump guard spreads their first step over the frames
        # before (a toe still down on its stone slid 4 cm off its edge there).
        result, used = _stances_held(binding, mesh, result, outcomes, used, distance, up,
                                     {**options, "embeddings": embeddings})
        if result is not pinned and pinned.root_windows:           # re-embedded: the trunk measured again
            through = _through(binding, mesh, result.positions)
            result.root_windows = [replace(w, through=np.flatnonzero(through[w.start:w.end + 1]) + w.start)
                                   for w in pinned.root_windows]
        pins, options = used, {**options, "embeddings": embeddings}
    elif reposition and pins is not None:
        result, pins = _stances_held(binding, mesh, result, outcomes, pins, distance, up, options)
    elif reposition and not mesh.animated:
        # Nothing re-positioned, and yet a stone moved from under no foot drags the feet on its
        # neighbours by its descriptors (a real walk's two feet 18-20 cm, 0.4 m over the ground
        # past their stones' edges, every check passed by the edge): those on supports that did
        # not move are held at the source's places.
        result, pins = _stances_held(binding, mesh, result, outcomes, None, distance, up, options, unmoved_only=True)
    if reposition and not mesh.animated and any(o.status == "unresolved" for o in outcomes):
        result, outcomes = _set_down(binding, mesh, result, outcomes, pins, distance, up, options, ignored)
    if result.root_windows is None:
        result.root_windows = []
    return result, outcomes


#: A contact kept (valid) whose effector slides more than this (body heights) against the source's
#: own motion over its phase is held (``_stances_held``).
SLIDE_HOLD = 0.01
#: How far inside its surface's edges a held stance is kept where it can be (body heights).
STAND_MARGIN = 0.01


def _stances_held(binding, mesh, result, outcomes, pins, distance, up, options, unmoved_only=False):
    """Valid contacts that slide held where they stand: ``(result, pins)``.

    Re-positioning a contact changes the motion around it, and the descriptors of the surface
    that moved still pull at the contacts near it that stay: on a real walk over stones, a foot
    planted on an unmoved stone next to the moved one slid 7 cm within its plant and its toe
    came off the stone's edge, all the while passing its check. Each valid phase whose effector
    departs more than ``SLIDE_HOLD`` body heights from where it should stand is pinned there,
    eased on and off as a re-positioned contact is (``_pin_phase``). Where it should stand: with
    the character's own bone lengths and its surface where it was, the source's place (a
    knock-on effect, as the rounds' ``kept``), the body brought back over it if that costs its
    balance (``_recentre``); failing that, or with other proportions, where it stands at the
    phase's middle, following the source's own motion over the phase (a heel that rolls keeps
    rolling). Each way is kept only if no valid contact then fails its check, no re-positioned
    one leaves its surface and no frame steps farther than the limit. ``unmoved_only``: only the
    contacts whose own surface did not move, held at the source's places (with no contact
    re-positioned; a rigid move of the whole scene holds none, so it still moves the motion
    rigidly). Product decision (the paper has no such step): documented in the manual, docs/how-it-works."""
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    eps0 = 0.015 * H if distance is None else float(distance)
    options = {k: v for k, v in options.items() if k != "pins"}
    if pins is None:
        pins = np.full(result.positions.shape, np.nan)
    same_body = np.allclose(result.bone_lengths, sk.bone_lengths(motion), rtol=1e-9, atol=1e-9 * H)
    if unmoved_only:
        ways = (True,) if same_body else ()
    else:
        ways = (True, False) if same_body else (False,)
    # Every departing contact first; failing that, only those that hang (a real walk's toe 2 cm
    # past its stone's edge, 0.3 m over the ground, was left there because holding the other
    # foot's slid stance too put a 1.3x step into that foot's swing: walk 3300, stone 1).
    tried = {}
    for only_hanging in (False, True):
        for at_source in ways:
            held = _stance_pins(binding, mesh, result.positions, outcomes, pins, eps0, at_source, up, unmoved_only,
                                only_hanging)
            if held is None or (at_source in tried and np.array_equal(held, tried[at_source], equal_nan=True)):
                continue
            tried[at_source] = held.copy()
            _keep_embedded(held, pins, options)
            kept = _held_trial(binding, mesh, result, outcomes, held, distance, up, options, eps0, at_source)
            if kept is not None:
                return kept
    return result, pins


#: How far (body heights) a foot left unresolved over no surface is brought down to the surface
#: under it (``_set_down``): a step down (0.3 m is 0.18 of a 1.7 m body), not a crouch.
SET_DOWN = 0.25


def _set_down(binding, mesh, result, outcomes, pins, distance, up, options, ignored=()):
    """Legs' contacts (feet, toes, a mannequin's balls) left unresolved that hang where the
    source stands, set on a surface: ``(result, outcomes)``. ``ignored`` phases (indices) are
    left alone.

    A phase no support was found for (every candidate off balance, or none within reach) used to
    be left where its descriptors put it: on a real walk whose stone moved, a foot stood 0.37 m
    over the ground for 23 frames. It now goes, in this order, to where it is brought level
    towards the source's place by the least tenth of the way that has it stand
    (``_supported_toward``: a toe 5 mm past its stone's edge goes back onto it), or to the surface
    straight under it, ``SET_DOWN`` body heights down at most, and level from there: the best
    reachable surface point. It is held there as a held stance is (``_pin_phase``), all such
    phases at once, else each alone, and kept only where it then stands on every frame and
    ``_held_trial`` passes (no valid contact fails or slides more, no re-positioned one leaves
    its surface, no new jump). The phase stays ``unresolved`` with its reason; its
    ``new_position`` says where it was set down. Product decision (the paper leaves an
    unresolved contact to the animator): documented in the manual, docs/how-it-works."""
    from .workspace import on_leg
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    eps0 = 0.015 * H if distance is None else float(distance)
    up = normalize(np.asarray(up, float))
    options = {k: v for k, v in options.items() if k != "pins"}
    phases = [o.phase for o in outcomes]
    P = result.positions
    base = np.full(P.shape, np.nan) if pins is None else pins
    todo = [i for i, o in enumerate(outcomes) if o.status == "unresolved" and o.phase.limb is not None
            and i not in set(ignored) and on_leg(motion, o.phase.effector, H)]
    if not todo:
        return result, outcomes
    todo = [i for i, h in zip(todo, _hanging(binding, mesh, P, [phases[i] for i in todo], up, eps0)) if h]
    places = {}
    for i in sorted(todo, key=lambda i: (len(_ancestors(sk, phases[i].effector)), phases[i].start)):
        ph = phases[i]
        e, m = ph.effector, ph.middle
        fr = np.arange(ph.start, ph.end + 1)
        place = P[m, e] + (motion[fr, e] - motion[m, e])
        want = _supported_toward(binding, mesh, phases, ph, place, up, eps0)
        if want is place:
            dist, facing = _cast_down(mesh, place[m - ph.start][None] + 2.0 * eps0 * up, up)
            drop = float(dist[0]) - 2.0 * eps0 - ph.clearance
            if not (facing[0] and 0.0 < drop <= SET_DOWN * H):
                continue
            lower = place - drop * up
            want = _supported_toward(binding, mesh, phases, ph, lower, up, eps0)
            if want is lower and not _stands_on(mesh, lower, ph.clearance, up, eps0).all():
                continue
        places[i] = want
    if not places:
        return result, outcomes

    def trial(chosen, neighbours=False):
        held, mine = base.copy(), np.zeros(P.shape[:2], bool)
        for i in chosen:                              # feet before their toes (``places``' order)
            ph = phases[i]
            if mine[ph.start:ph.end + 1, ph.effector].any():
                continue                              # carried by its foot, set down already
            span = _pin_phase(held, sk, P, motion, ph, places[i], phases, travel=True)
            _swing_clear(binding, mesh, held, span, up, eps0, arriving=True)
            frames, _, joints = span
            mine[np.ix_(frames, joints)] = True
            held[np.ix_(frames, _giving_way(ph, phases, outcomes))] = np.nan
            if not neighbours:
                continue
            # Failing that, the same effector's valid contacts before and after stay where they
            # stand (eased off towards the next one, a real walk's next toe contact slid 1.7 cm
            # and the set-down was refused: 2700, stone 1).
            same = sorted((q for q, o in zip(phases, outcomes) if q.effector == ph.effector and o.status == "valid"),
                          key=lambda q: q.start)
            for q in [q for q in same if q.end < ph.start][-1:] + [q for q in same if q.start > ph.end][:1]:
                at = np.arange(q.start, q.end + 1)
                if np.isnan(held[at, q.effector, 0]).all():
                    held[at, q.effector] = P[at, q.effector]
        # But for what is set down here (a toe left unresolved under its re-embedded foot: its
        # pins dropped there, it hung 7 frames).
        _keep_embedded(held, base, options, mine)
        kept = _held_trial(binding, mesh, result, outcomes, held, distance, up, options, eps0, False)
        if kept is None or not all(landed(kept[0].positions, mesh, phases[i], eps0, up) for i in chosen):
            return None
        return kept[0]

    def tried(chosen):
        """``trial`` alone, else with the same effectors' neighbouring contacts held."""
        got = trial(chosen)
        return trial(chosen, True) if got is None else got

    chosen = list(places)
    got = tried(chosen)
    if got is None:
        chosen = []
        for i in list(places)[:RECENTRE_TRIES]:
            alone = tried(chosen + [i])
            if alone is not None:
                got, chosen = alone, chosen + [i]
        if got is None:
            return result, outcomes
    outcomes = list(outcomes)
    for i in chosen:
        o, ph = outcomes[i], phases[i]
        outcomes[i] = replace(o, new_position=got.positions[ph.middle, ph.effector] - ph.clearance * up,
                              continuity="pins")
    got.root_windows = result.root_windows
    return got, outcomes


def _giving_way(ph, phases, outcomes):
    """The joints of ``ph``'s limb, between its root and its effector, whose pins give way over
    ``ph``'s frames when it is set down (``_set_down``): the root plan's IK pins held the knee over
    the foot's place in the air (kept, the knee jumped 0.29 m into the phase). But not a joint that
    is re-positioned itself on those frames: it stays where it was put, eases and all (a toe set
    down under its foot's two re-positioned phases wiped the foot's pins, the foot left the ground
    it was put on and the set-down was refused; the toe hung at its lift: real walk 2700, stone 1)."""
    put = {q.effector for q, o in zip(phases, outcomes)
           if o.status == "repositioned" and q.start <= ph.end and q.end >= ph.start}
    return [j for j in ph.limb.chain[1:-1] if j not in put]


def _keep_embedded(held, base, options, mine=None):
    """``held`` (pins, changed in place) given back ``base``'s where a re-embedded limb is carried
    (``options['embeddings']``), not pins; but for the joints and frames ``mine`` (F,J) marks."""
    for e in options.get("embeddings", ()):
        if e.joints is not None:
            at = np.ix_(e.frames, e.joints)
            held[at] = base[at] if mine is None else np.where(mine[at][..., None], held[at], base[at])


def _slides(motion, positions, phases):
    """(len(phases),) how far each phase's effector in ``positions`` slides over its frames
    against the source's own motion, from where it is at the phase's middle."""
    out = np.zeros(len(phases))
    for k, ph in enumerate(phases):
        e, m = ph.effector, ph.middle
        d = (positions[ph.start:ph.end + 1, e] - positions[m, e]) - (motion[ph.start:ph.end + 1, e] - motion[m, e])
        out[k] = float(np.linalg.norm(d, axis=1).max())
    return out


def _stance_pins(binding, mesh, P, outcomes, pins, eps0, at_source, up=(0.0, 0.0, 1.0), unmoved_only=False,
                 only_hanging=False):
    """``pins`` with the valid phases that depart from their place, or hang where the source
    stands, held (``_stances_held``); None when none does. ``unmoved_only``: only those whose
    own surface did not move (with ``at_source``). ``only_hanging``: only those that hang (or
    carry a contact that does)."""
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    phases = [o.phase for o in outcomes]
    held = pins.copy()
    n = 0
    if unmoved_only:
        # Only those off the source's places are looked at (held there, the others would not
        # move): an undeformed scene casts no ray (the test cost a 1000-frame walk 0.3 s).
        off = {id(ph) for o, ph in zip(outcomes, phases) if o.status == "valid" and ph.limb is not None and
               np.abs(P[ph.start:ph.end + 1, ph.effector] - motion[ph.start:ph.end + 1, ph.effector]).max() > 1e-6 * H}
        if not off:
            return None
        looked = [ph for ph in phases if id(ph) in off]
        hangs = dict.fromkeys(map(id, phases), False)
        hangs.update(zip(map(id, looked), _hanging(binding, mesh, P, looked, up, eps0)))
    else:
        hangs = dict(zip(map(id, phases), _hanging(binding, mesh, P, phases, up, eps0)))
    # Limbs before what hangs below them: a foot held carries its toes' phases with it.
    for i in sorted(range(len(outcomes)), key=lambda i: (len(_ancestors(sk, phases[i].effector)), phases[i].start)):
        o, ph = outcomes[i], phases[i]
        if o.status != "valid" or ph.limb is None:
            continue
        fr = np.arange(ph.start, ph.end + 1)
        e, m = ph.effector, ph.middle
        if unmoved_only and id(ph) not in off:
            continue
        unmoved = np.linalg.norm(contact_point(mesh, ph, m)[0] - ph.position) < eps0
        if unmoved_only and not (at_source and unmoved):
            continue
        if at_source and unmoved:
            want = motion[fr, e]
        else:
            want = P[m, e] + (motion[fr, e] - motion[m, e])
            # Brought back onto its surface, where the motion departs from the source at all (an
            # unedited stretch reproduces it; the test casts rays over every frame of the phase).
            gap = P[m, e] - motion[m, e]
            if np.linalg.norm(gap - (gap @ up) * np.asarray(up, float)) > STAND_MARGIN * 0.1 * H:
                want = _supported_toward(binding, mesh, phases, ph, want, up, eps0)
        hanging = any(hangs[id(q)] for q in [ph] + _carried_by(sk, phases, ph))
        if not hanging and (only_hanging or np.linalg.norm(P[fr, e] - want, axis=1).max() <= SLIDE_HOLD * H):
            continue
        if not np.isnan(held[fr, e, 0]).all():      # something holds it already on some frame
            free = np.isnan(pins[fr, e, 0])
            if at_source and free.any():
                # Held at the source's place over the frames no pin held it before these holds:
                # a standing toe carried by its heel's holds on some of its frames only slid 4 cm
                # between them, where the heel eased (a real standing stretch, 1600, stone 9,
                # where the hold was then refused). (Over the root plan's pins too, a ducking
                # leg tore.)
                held[fr[free], e] = want[free]
                n += 1
            continue
        # Eased on and off: pinned straight at its place, a foot the moved stone had pulled
        # 0.28 m jumped back at the phase's ends.
        # (Not ``_swing_clear``: a held stance's ease is short, and lifted, a real walk's other
        # contact slid 6 cm.)
        _pin_phase(held, sk, P, motion, ph, want, phases, travel=True)
        n += 1
    return held if n else None


def _hanging(binding, mesh, P, phases, up, eps0):
    """(len(phases),) bool: whether each phase's effector hangs in ``P``: on a frame where the
    source's stands on a surface (``_stands_on``), nothing is under it now (a toe pulled 2 cm past
    its stone's edge, 0.33 m over the ground, whose check the edge passed). Two ray casts for all
    the phases (a cast per phase, with every held place tested too, added 1.6 s to a 1000-frame
    walk's 0.9)."""
    if not len(phases):
        return np.zeros(0, bool)
    frames = [np.arange(ph.start, ph.end + 1) for ph in phases]
    eff = np.concatenate([np.full(len(fr), ph.effector) for ph, fr in zip(phases, frames)])
    fr = np.concatenate(frames)
    clearance = np.concatenate([np.full(len(f), ph.clearance) for ph, f in zip(phases, frames)])
    # Where the source stands does not change from call to call: kept with the binding.
    key = ("source stands", float(eps0), tuple(np.round(np.asarray(up, float), 12)),
           tuple((ph.start, ph.end, ph.effector, float(ph.clearance)) for ph in phases))
    if key not in binding._joint_models:
        binding._joint_models[key] = _stands_on(binding.mesh, binding.motion[fr, eff], clearance, up, eps0)
    bad = binding._joint_models[key] & ~_stands_on(mesh, P[fr, eff], clearance, up, eps0)
    return np.logical_or.reduceat(bad, np.cumsum([0] + [len(f) for f in frames[:-1]]))


def _supported_toward(binding, mesh, phases, ph, place, up, eps0, steps=10):
    """``place`` (n,3), phase ``ph``'s held place (the source's motion over the phase, shifted),
    brought level towards the source's own by the least tenth of the way that has it, and the
    contacts it carries (a heel's toe, over the toe's own frames), stand on a surface on every
    frame the source's stand on one, ``STAND_MARGIN`` body heights inside its edges (a toe held on
    a stone's edge slid off it on 9 frames), else on it at all (``_stands_on``); ``place`` itself
    when no tenth does."""
    if mesh.animated:
        return place
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    up = normalize(np.asarray(up, float))
    fr = np.arange(ph.start, ph.end + 1)
    shift = place[ph.middle - ph.start] - motion[ph.middle, ph.effector]
    level = shift - (shift @ up) * up
    ring = _edge_ring(up, H)
    parts = []
    for q in [ph] + _carried_by(sk, phases, ph):
        pts = motion[q.start:q.end + 1, q.effector]
        parts.append((pts[_stands_on(binding.mesh, pts, q.clearance, up, eps0)], q.clearance))
    shifts = shift - (np.arange(steps + 1) / steps)[:, None] * level                     # (K,3)
    # Where it is first (it mostly stands), then every other tenth at once: a cast per contact.
    trials = [(margin, tenths) for margin in (ring, np.zeros((1, 3))) for tenths in (shifts[:1], shifts[1:])]
    # Then at the source's own height: a toe the solve held 3.6 cm low, 3.5 cm past its stone's
    # edge, stood on no tenth of the way back (real walk 2400, stone 3: it hung 4 frames).
    if abs(float(shift @ up)) > eps0:
        trials += [(margin, shifts - (shift @ up) * up) for margin in (ring, np.zeros((1, 3)))]
    for margin, tenths in trials:
        ok = np.ones(len(tenths), bool)
        for pts, c in parts:
            trial = pts[None, :, None] + tenths[:, None, None] + margin[None, None]
            ok &= _stands_on(mesh, trial.reshape(-1, 3), c, up, eps0).reshape(len(tenths), -1).all(axis=1)
        if ok.any():
            return motion[fr, ph.effector] + tenths[int(np.argmax(ok))]
    return place


def _held_trial(binding, mesh, result, outcomes, held, distance, up, options, eps0, recentre):
    """``(result, pins)`` adapted with ``held``, or None when a valid contact then fails its check
    (but for balance, which ``recentre`` lets ``_recentre`` restore), a re-positioned one leaves
    its surface or a frame steps farther than the limit (``JUMP_RATIO``, or ``result``'s step)."""
    from ..adaptation import adapt
    motion, H = binding.motion, binding.body_height
    phases = [o.phase for o in outcomes]
    trial = adapt(binding, mesh, pins=held, **options)
    checks = check_contacts(binding, trial.positions, mesh, phases, trial.bone_lengths, distance, up)
    worse = [i for i, (o, (ok, _)) in enumerate(zip(outcomes, checks)) if o.status == "valid" and not ok]
    if worse and recentre and all(checks[i][1] == "balance" for i in worse):
        # The body was pulled after the moved surface, the foot with it: held back, the foot is
        # out from under the body, which is brought back over it.
        marked = list(outcomes)
        for i in worse:
            marked[i] = Outcome(phases[i], "unresolved", "balance", phases[i].position, None)
        again, now, pinned = _recentre(binding, mesh, phases, marked, trial, held, (), distance, up, options)
        if again is not trial and all(x.status == "valid" for x, o in zip(now, outcomes) if o.status == "valid"):
            trial, held, worse = again, pinned, []
    limit = max(largest_step(result.positions), JUMP_RATIO * largest_step(motion), 0.02 * H)
    lost = any(o.status == "repositioned" and not landed(trial.positions, mesh, o.phase, eps0, up) for o in outcomes)
    # Nor may a valid contact slide more (over SLIDE_HOLD): held at the source's places under
    # its heel's four steps, a standing walker's toe, between them, slid 18 cm.
    valid = [o.phase for o in outcomes if o.status == "valid"]
    slid = max(_slides(motion, result.positions, valid).max(initial=0.0), SLIDE_HOLD * H)
    if worse or lost or largest_step(trial.positions) > limit + 1e-12 or \
            _slides(motion, trial.positions, valid).max(initial=0.0) > slid + 1e-9:
        return None
    trial.root_windows = result.root_windows
    return trial, held


def _limbs_kept_out(binding, mesh, result, outcomes, pins, distance, up, options):
    """``avoidance``: free limbs held out of the surfaces they newly go through; ``(result, pins)``,
    unchanged unless that leaves fewer such frames, no new trunk collision, no contact that
    passed its check failing it and no new jump."""
    from ..adaptation import adapt
    from .avoidance import limb_collisions, limb_pins
    phases = [o.phase for o in outcomes]
    through = limb_collisions(binding, mesh, result.positions, phases)
    if not through.any():
        return result, pins
    before_checks = None
    trunk0 = _through(binding, mesh, result.positions)
    limit = max(largest_step(result.positions), JUMP_RATIO * largest_step(binding.motion), 0.02 * binding.body_height)
    best = (int(through.sum()), result, pins)
    # The middle joint bent off the surface the effector met (a raised arm under a slab folds
    # its elbow down), or left where the IK puts it (a hand swinging into a post: bent off the
    # post's face, the forearm crossed it): whichever leaves fewer frames through. A second
    # round from the better one for the frames left (an elbow the IK put against the slab).
    for _ in range(2):
        start, start_pins, through = best[1], best[2], limb_collisions(binding, mesh, best[1].positions, phases)
        for bend in (True, False):
            extra = limb_pins(binding, mesh, start.positions, through, bend)
            if extra is None:
                break
            merged = extra if start_pins is None else np.where(np.isnan(extra), start_pins, extra)
            if pins is not None:                      # the contacts' own pins win, but an arm's where it goes through
                merged = np.where(np.isnan(pins) | _arms_through(binding, through)[..., None], merged, pins)
            trial = adapt(binding, mesh, pins=merged, **{k: v for k, v in options.items() if k != "pins"})
            left = int(limb_collisions(binding, mesh, trial.positions, phases).sum())
            if left >= best[0] or _through(binding, mesh, trial.positions).sum() > trunk0.sum() \
                    or largest_step(trial.positions) > limit + 1e-12:
                continue
            if before_checks is None:
                before_checks = check_contacts(binding, result.positions, mesh, phases, result.bone_lengths, distance,
                                               up)
            after_checks = check_contacts(binding, trial.positions, mesh, phases, trial.bone_lengths, distance, up)
            if any(ok0 and not ok1 for (ok0, _), (ok1, _) in zip(before_checks, after_checks)):
                continue
            trial.root_windows = result.root_windows
            best = (left, trial, merged)
            if not left:
                break
        if not best[0] or best[1] is start:
            break
    return best[1], best[2]


def _arms_through(binding, through):
    """(F,J) bool: the joints of the arms (limbs whose effector stands higher than a leg's) on the
    frames ``through`` (F,L) (``avoidance.limb_collisions``) marks and the ``avoidance.EASE`` frames
    before and after: where the arm's own pins (carried aside with a body stepping round a post,
    ``replanning.step_aside``) give way to the avoidance's (they would hold the arm in the post)."""
    from scipy.ndimage import binary_dilation
    from .avoidance import EASE, _limbs
    from .workspace import on_leg
    sk = binding.skeleton
    child = np.flatnonzero(sk.parents >= 0)
    out = np.zeros((len(through), len(sk)), bool)
    for k, (e, chain, bones) in enumerate(_limbs(binding)):
        if on_leg(binding.motion, e, binding.body_height) or not through[:, k].any():
            continue
        frames = binary_dilation(through[:, k], iterations=EASE)
        out[np.ix_(frames, child[bones])] = True
    return out


def _through(binding, mesh, positions):
    """``replanning.trunk_collisions`` on a static environment (None on an animated one)."""
    if mesh.animated:
        return None
    from .replanning import trunk_collisions
    return trunk_collisions(binding, mesh, positions)


def _windows_of(through, status):
    """A ``RootWindow`` of ``status`` for every run of frames ``through`` (F,) holds."""
    from .replanning import RootWindow, runs
    return [RootWindow(a, b, status, np.arange(a, b + 1)) for a, b in runs(through)] if through is not None else []


def _adapt_pinned(binding, mesh, reposition, effectors, locked, ignored, distance, speed, fps, friction, up, phases,
                  replan_root, seed, **options):
    """``adapt_with_contacts`` with re-positioned contacts held by positional pins: also returns
    the pins (F,J,3), NaN where free (None when nothing is pinned)."""
    from ..adaptation import adapt
    if phases is None:
        phases = detect_contacts(binding, effectors, distance, speed, friction=friction, fps=fps)
    user_pins = options.pop("pins", None)
    result = adapt(binding, mesh, pins=user_pins, **options)
    checks = check_contacts(binding, result.positions, mesh, phases, result.bone_lengths, distance, up)
    outcomes = [Outcome(ph, "valid" if ok else "unresolved", why, ph.position, None)
                for ph, (ok, why) in zip(phases, checks)]
    measured, through = result, _through(binding, mesh, result.positions)
    if not (reposition and replan_root) and through is not None:
        result.root_windows = _windows_of(through, "not replanned")
    if not reposition or (all(ok for ok, _ in checks) and (through is None or not through.any() or not replan_root)):
        return result, outcomes, user_pins
    # Causes first: a contact whose surface went away is re-positioned, the motion
    # re-adapted and checked again, and only then are the remaining invalid
    # phases (often knock-on effects that the first round already cured) handled.
    pins = user_pins
    done = set()
    for severity in (("unsupported",), ("unsupported", "unreachable", "collision", "balance")):
        todo = [i for i, (ok, why) in enumerate(checks) if not ok and why in severity and i not in done]
        if not todo:
            continue
        # Knock-on effects: a contact whose own surface did not move was only
        # disturbed by another one; it is held where it was, not moved.
        eps0 = 0.015 * binding.body_height if distance is None else float(distance)
        kept = {i for i in todo if np.linalg.norm(contact_point(mesh, phases[i], phases[i].middle)[0]
                                                  - phases[i].position) < eps0}
        round_checks = [checks[i] if i in todo else (True, None) for i in range(len(phases))]
        planned, new_pins = plan_repositioning(binding, result.positions, mesh, phases, round_checks,
                                               result.bone_lengths, set(locked) | kept, ignored, friction, up)
        for i in todo:
            outcomes[i] = (Outcome(phases[i], "valid", None, phases[i].position, None) if i in kept
                           else planned[i])
            done.add(i)
        pins = new_pins if pins is None else np.where(np.isnan(new_pins), pins, new_pins)
        result = adapt(binding, mesh, pins=pins, **options)
        checks = check_contacts(binding, result.positions, mesh, phases, result.bone_lengths, distance, up)
        for i, (ok, why) in enumerate(checks):
            # A contact held where it was is valid only if it now passes: held in place, a leg
            # that a box moved into still collides (it used to be reported valid).
            if i not in done or i in kept:
                outcomes[i] = Outcome(phases[i], "valid" if ok else "unresolved", why, phases[i].position, None)
    # A contact reported repositioned must be on a surface in the final motion, on every frame
    # of its phase (the pins put it there, but a later round or the solver may not keep it).
    eps0 = 0.015 * binding.body_height if distance is None else float(distance)

    def confirm(outcomes):
        for i, o in enumerate(outcomes):
            if o.status == "repositioned" and not landed(result.positions, mesh, o.phase, eps0, up):
                outcomes[i] = Outcome(o.phase, "unresolved", "unsupported", o.position, None)
        return outcomes

    outcomes = confirm(outcomes)
    # Balance: all the phases left for it at once, then each one left alone (a few tries).
    result, outcomes, pins = _recentre(binding, mesh, phases, outcomes, result, pins, ignored, distance, up,
                                       options)
    tried = 0
    for i in [i for i, o in enumerate(outcomes) if o.status == "unresolved" and o.reason == "balance"]:
        if tried == RECENTRE_TRIES or outcomes[i].status != "unresolved":
            continue
        tried += 1
        result, outcomes, pins = _recentre(binding, mesh, phases, outcomes, result, pins, ignored, distance,
                                           up, options, only=i)
    bad = [i for i, o in enumerate(outcomes) if o.status == "unresolved" and i not in set(ignored)]
    if mesh.animated:
        return result, outcomes, pins
    # §7: the root replanned over the frames of the phases still invalid and those where the
    # trunk goes through an obstacle (a slab brought down onto the path: the head passes
    # through it with every foot contact valid), then §7.3.
    from .replanning import RootWindow, replan_windows, runs
    if result is not measured:                         # re-adapted by the rounds above
        through = _through(binding, mesh, result.positions)
    if not replan_root:
        result.root_windows = _windows_of(through, "not replanned")
        return result, outcomes, pins
    if not (bad or through.any()):
        result.root_windows = []
        return result, outcomes, pins
    before = (result, list(outcomes), None if pins is None else pins.copy())
    plans, pins = replan_windows(binding, mesh, phases, outcomes, result, pins, bad, up, seed, fps=fps,
                                 spans=runs(through))

    def windows(status_found, through_now):
        return [RootWindow(a, b, "no root path" if p is None else status_found,
                           np.flatnonzero(through_now[a:b + 1]) + a) for (a, b), p in plans]

    if not any(p is not None for _, p in plans):
        for i in bad:
            outcomes[i] = Outcome(phases[i], "unresolved", "no root path", phases[i].position, None)
        result.root_windows = windows("no root path", through)
        return result, outcomes, before[2]
    result = adapt(binding, mesh, pins=pins, **options)
    checks = check_contacts(binding, result.positions, mesh, phases, result.bone_lengths, distance, up)
    # Feet that stepped aside with the body (a post on the path) stand where the plan took them:
    # re-positioned there, judged on landing (``confirm``) and not against their old places.
    aside = {i: v for _, p in plans if p is not None for i, v in p.aside.items()}
    for i, (place, tri) in aside.items():
        outcomes[i] = Outcome(phases[i], "repositioned", "stepped aside", phases[i].position, place, tri, "pins")
    again = [i for i in bad if not checks[i][0] and i not in aside]
    if again and set(ignored).isdisjoint(again):
        round_checks = [checks[i] if i in again else (True, None) for i in range(len(phases))]
        planned, new_pins = plan_repositioning(binding, result.positions, mesh, phases, round_checks,
                                               result.bone_lengths, set(locked), ignored, friction, up)
        # A limb re-placed now drops the plan's IK pins on its chain where its new pins act
        # (a knee held for the old foot place tore the shin 0.36 m).
        for i in again:
            limb = phases[i].limb
            if limb is None:
                continue
            acting = ~np.isnan(new_pins[:, limb.effector, 0])
            pins[np.ix_(acting, limb.chain[1:])] = np.nan
        pins = np.where(np.isnan(new_pins), pins, new_pins)
        result = adapt(binding, mesh, pins=pins, **options)
        checks = check_contacts(binding, result.positions, mesh, phases, result.bone_lengths, distance, up)
        for i in again:
            if planned[i].status == "repositioned" and checks[i][0]:
                outcomes[i] = planned[i]
    for i, (ok, why) in enumerate(checks):
        planned_here = any(p is not None and p.frames[0] <= phases[i].middle <= p.frames[-1] for _, p in plans)
        if i in aside:
            continue
        if i in bad and outcomes[i].status != "repositioned":
            reason = why if planned_here else "no root path"
            outcomes[i] = Outcome(phases[i], "valid" if ok and planned_here else "unresolved",
                                  "root replanned" if ok and planned_here else reason, phases[i].position, None)
        elif i not in bad and outcomes[i].status == "valid" and not ok:
            outcomes[i] = Outcome(phases[i], "unresolved", why, phases[i].position, None)
    outcomes = confirm(outcomes)
    # The replanned motion is kept only if it is better: fewer contacts unresolved and no new
    # jump (on a real walk over stones, replanning around two leftover phases unsettled five
    # others and put a 1.66x step in a knee).
    # The trunk's frames through an obstacle count too: fewer of either, and more of neither.
    def unresolved(o):
        return sum(x.status == "unresolved" for x in o)

    through_now = _through(binding, mesh, result.positions)
    u0, u1, t0, t1 = unresolved(before[1]), unresolved(outcomes), int(through.sum()), int(through_now.sum())
    # (At least 0.02 body heights a frame: a still source has no step to compare with.)
    limit = max(largest_step(before[0].positions), JUMP_RATIO * largest_step(binding.motion),
                0.02 * binding.body_height)
    if u1 > u0 or t1 > t0 or (u1, t1) == (u0, t0) or largest_step(result.positions) > limit + 1e-12:
        before[0].root_windows = windows("not kept", through)
        return before
    result.root_windows = windows("replanned", through_now)
    return result, outcomes, pins


#: Phases re-centred one at a time after all of them at once (each try adapts the clip again).
RECENTRE_TRIES = 4


def _recentre(binding, mesh, phases, outcomes, result, pins, ignored, distance, up, options, only=None):
    """Phases left unresolved for *balance*: the body brought back over the support as the source
    has it. On those frames (eased in and out), the joints outside the limbs in contact (the
    hips, the trunk, the head, free arms) are pinned where they are, shifted across ``up`` by how
    far the centre of mass's offset from the centroid of the active contacts departs from the
    source's. The descriptors of a stone moved from under one foot pulled the hips 0.43 m after
    it while that foot held its place. Kept only with fewer phases unresolved and no jump."""
    from ..adaptation import adapt
    bal = [i for i, o in enumerate(outcomes) if o.status == "unresolved" and o.reason == "balance"
           and i not in set(ignored) and (only is None or i == only)]
    if not bal:
        return result, outcomes, pins
    sk, motion, H = binding.skeleton, binding.motion, binding.body_height
    F = len(motion)
    up = normalize(np.asarray(up, float))
    root = int(np.flatnonzero(sk.parents < 0)[0])
    active = _active(phases, F)
    P = result.positions
    masses = _masses(binding)
    com_now, com_then = centre_of_mass(sk, P, masses), centre_of_mass(sk, motion, masses)
    shift = np.zeros((F, 3))
    for f in range(F):
        if active[f]:
            on = active[f]
            d = (com_now[f] - P[f, on].mean(axis=0)) - (com_then[f] - motion[f, on].mean(axis=0))
            shift[f] = -(d - (d @ up) * up)
    want = np.zeros(F, bool)
    for i in bal:
        want[phases[i].start:phases[i].end + 1] = True
    want &= np.linalg.norm(shift, axis=1) > 0.02 * H
    if not want.any():
        return result, outcomes, pins
    # Eased in and out (smoothstep by the distance to the nearest frame that wants it) over
    # enough frames to stay well within the source's largest root step; outside the wanted
    # frames, the shift of the nearest one.
    vmax = max(largest_step(motion[:, root:root + 1]), 1e-6)
    ease = int(np.clip(np.ceil(3.0 * np.abs(shift[want]).max() / (0.5 * vmax)), 4, 60))
    near = np.flatnonzero(want)
    gap = np.abs(np.arange(F)[:, None] - near[None])
    at, gap = near[gap.argmin(axis=1)], gap.min(axis=1)
    weight = np.where(gap <= ease, 0.5 - 0.5 * np.cos(np.pi * (1.0 - gap / (ease + 1))), 0.0)
    # The body above the limbs in contact moves as a whole: the hips pinned alone left the arms
    # to their descriptors, and a hand's swing grew 0.16 -> 0.22 m a frame (a jump).
    limbs = set()
    for q in phases:
        if q.limb is not None:
            limbs.update(int(j) for j in q.limb.chain)
            limbs.update(int(j) for j in _subtree(sk, q.effector))
    body = np.array([j for j in range(len(sk.parents)) if j not in limbs or j == root])
    pinned = np.full((F, len(sk.parents), 3), np.nan) if pins is None else pins.copy()
    moving = weight > 0
    free = np.isnan(pinned[np.ix_(moving, body)][..., 0])
    held = P[np.ix_(moving, body)] + (weight[moving, None] * shift[at[moving]])[:, None]
    pinned[np.ix_(moving, body)] = np.where(free[..., None], held, pinned[np.ix_(moving, body)])
    trial = adapt(binding, mesh, pins=pinned, **options)
    checks = check_contacts(binding, trial.positions, mesh, phases, trial.bone_lengths, distance, up)
    new = list(outcomes)
    for i, (ok, why) in enumerate(checks):
        if outcomes[i].status == "unresolved" and ok:
            new[i] = Outcome(phases[i], "valid", "body re-centred", phases[i].position, None)
        elif outcomes[i].status == "valid" and not ok:
            new[i] = Outcome(phases[i], "unresolved", why, phases[i].position, None)
    eps0 = 0.015 * H if distance is None else float(distance)
    for i, o in enumerate(new):                 # a re-positioned contact must still be on its surface
        if o.status == "repositioned" and not landed(trial.positions, mesh, o.phase, eps0, up):
            new[i] = Outcome(o.phase, "unresolved", "unsupported", o.position, None)
    left = lambda o: sum(x.status == "unresolved" for x in o)                    # noqa: E731
    limit = max(largest_step(P), JUMP_RATIO * largest_step(motion), 0.02 * H)
    if left(new) >= left(outcomes) or largest_step(trial.positions) > limit + 1e-12:
        return result, outcomes, pins
    return trial, new, pinned


def landed(positions, mesh, phase, eps0, up=(0.0, 0.0, 1.0)):
    """Whether the effector of ``phase`` is within ``eps0`` of its sole's distance from some
    surface of ``mesh`` on every frame of the phase (``positions`` (F,J,3)): the nearest surface,
    or (a static mesh) one facing ``up`` straight under it (``_stands_on``)."""
    frames = np.arange(phase.start, phase.end + 1)
    get = _colliders(mesh, phase.clearance + 4.0 * eps0)
    eff = positions[frames, phase.effector]
    if mesh.animated:
        sd = np.array([get(int(f)).closest(eff[i:i + 1])[0][0] for i, f in enumerate(frames)])
    else:
        sd = get(0).closest(eff)[0]
    ok = np.abs(np.abs(sd) - phase.clearance) <= eps0
    ok[~ok] = _stands_on(mesh, eff[~ok], phase.clearance, up, eps0)
    return bool(np.all(ok))


def contact_report(outcomes, frame_offset=0, mesh=None):
    """JSON-ready list of phases (the report's ``contacts``) and ``contact_counts``.

    ``position`` is where the contact's surface point is on ``mesh`` (the environment now;
    without it, at bind time), ``source_position`` where it was at bind time and
    ``new_position`` where a re-positioned contact went, so an overlay draws each contact
    where it is."""
    rows = []
    for o in outcomes:
        ph = o.phase
        now = contact_point(mesh, ph, ph.middle)[0] if mesh is not None else o.position
        rows.append(dict(effector=ph.name, start=int(ph.start + frame_offset), end=int(ph.end + frame_offset),
                         status=o.status, reason=o.reason, continuity=o.continuity, position=[float(x) for x in now],
                         source_position=[float(x) for x in o.position],
                         new_position=None if o.new_position is None else [float(x) for x in o.new_position]))
    counts = {k: sum(r["status"] == k for r in rows) for k in ("valid", "repositioned", "unresolved")}
    return rows, counts


def _subtree(sk, j):
    out = [j]
    for k in range(len(sk)):
        p = sk.parents[k]
        while p >= 0:
            if p == j:
                out.append(k)
                break
            p = sk.parents[p]
    return np.array(out)


#: How far (frames) before or after a phase an ease may start or end (see ``_pin_phase``).
EASE_SEARCH = 60


def _pin_phase(pins, sk, positions, motion, ph, target, phases=(), travel=False):
    """Pin the effector at ``target`` during the phase and carry it there smoothly.

    ``target`` is a point (3,) or its path over the phase's frames (n,3) (``track``: a
    contact on an animated support). During the phase the effector is held there; its subtree (toes) keeps
    the source motion's offsets from it, and while a contact below it that moves with it (``phases``
    of a toe whose middle is in this phase) is on before or after the phase, the effector follows
    the source shifted whole (the heel rises about the held toe). Before that, from the end of the
    same effector's previous contact (or over a short ease when there is none),
    the effector follows the *source* swing shifted by a smoothstep blend of the
    previous contact's shift and the new one; after it, symmetrically up to the
    next contact. The swing thus keeps its source shape instead of the pull of
    the descriptors on the surface that moved away.

    ``travel``: the ease is as long as the way from where ``positions`` have the effector at the
    phase's ends to the target there takes (a contact held back where the source has it,
    ``_stances_held``: its target's shift from the source is zero, the way is not), not only the
    target's shift from the source.

    Returns ``(frames (n,), blend (n,), joints)``: the frames pinned, how far each is eased
    towards the new contact (1 over the phase) and the joints held (the effector and its
    subtree), for ``continuity`` to replace the pins by re-embedded descriptors.
    """
    F = len(positions)
    eff = ph.effector
    below = _subtree(sk, eff)[1:]
    same = sorted((q for q in phases if q.effector == eff and q is not ph), key=lambda q: q.start)
    before = [q for q in same if q.end < ph.start]
    after = [q for q in same if q.start > ph.end]
    # Held, not eased, while a contact below it carried with it is on (a toe still down as the
    # heel rises: eased from the phase's end, the toe slid 0.15 m and came off a stone's edge).
    carried = _carried_by(sk, phases, ph)
    first = max([min([ph.start] + [q.start for q in carried]), 0] + [q.end + 1 for q in before[-1:]])
    last = min([max([ph.end] + [q.end for q in carried]), F - 1] + [q.start - 1 for q in after[:1]])
    steps = np.linalg.norm(np.diff(motion[:, eff], axis=0), axis=-1)
    vmax = max(float(steps.max()) if len(steps) else 0.0, 1e-6)
    # The held place, frame by frame over the phase (it moves with an animated support).
    target = np.asarray(target, float)
    path = np.broadcast_to(target, (ph.end - ph.start + 1, 3)) if target.ndim == 1 else target
    shift = path[ph.middle - ph.start] - motion[ph.middle, eff]
    shift_in, shift_out = path[0] - motion[ph.middle, eff], path[-1] - motion[ph.middle, eff]
    # A held place that is the source's own motion shifted (``_stances_held``) is left by the toes
    # it carries at that shift: shifted from its last place less the source's middle, the heel's
    # roll over the phase moved a real walk's toe 3 mm, past the edge of the stone it stood on.
    src = motion[ph.start:ph.end + 1, eff]
    if np.abs((path - src) - shift).max() <= 1e-9 * max(1.0, float(np.abs(src).max())):
        shift_in = shift_out = shift
    way = float(np.linalg.norm(shift))
    if travel:
        way = max(way, float(np.linalg.norm(positions[ph.start, eff] - path[0])),
                  float(np.linalg.norm(positions[ph.end, eff] - path[-1])))
    ease = int(np.clip(np.ceil(1.5 * way / (0.5 * vmax)), 4, 60))
    # With no other contact of this effector to start from (or end on), the ease starts
    # where the solve last followed the source closely: the descriptors of a surface that
    # moved away can grab the effector several frames before the phase (a toe thrown 0.44 m
    # in one frame towards a stone moved a metre), and an ease that starts after that keeps
    # the jump.
    dev = np.linalg.norm(positions[:, eff] - motion[:, eff], axis=-1)
    tol = 0.015 * float(np.linalg.norm(motion[0].max(axis=0) - motion[0].min(axis=0)))

    def calm(frames):
        """The frame of ``frames`` (ordered from the phase outwards) nearest the phase whose
        deviation is within ``tol`` of the least."""
        if not len(frames):
            return None
        d = dev[frames]
        return int(frames[np.flatnonzero(d <= d.min() + tol)[0]])

    # The ease starts once every contact below it that came before has ended (the toe of the
    # previous step is down after the heel lifts: eased from the heel's end, a generated walk's
    # toe left its stone), and ends before the next begins.
    below_set, mine = set(below.tolist()), {id(q) for q in carried}
    others = [q for q in phases if q.effector in below_set and id(q) not in mine]
    ended = [q.end for q in others if first - EASE_SEARCH <= q.end < first]
    begun = [q.start for q in others if last < q.start <= last + EASE_SEARCH]
    if before:
        a = before[-1].end
    else:
        a = calm(np.arange(max(0, first - ease), max(0, first - EASE_SEARCH) - 1, -1))
        a = max(0, first - ease) if a is None else a
    a = max([a] + ended)
    if after:
        b = after[0].start
    else:
        b = calm(np.arange(min(F - 1, last + ease), min(F - 1, last + EASE_SEARCH) + 1))
        b = min(F - 1, last + ease) if b is None else b
    b = min([b] + begun)
    # Where the effector is at the ends of the ease: where another phase of the same foot
    # already holds it when it does (two moved stones in a row: the second ease starts on the
    # first new stone, not where the foot was before it moved), else where the solve put it.
    def shift_at(f):
        held = pins[f, eff]
        return (held if not np.isnan(held[0]) else positions[f, eff]) - motion[f, eff]

    shift_a, shift_b = shift_at(a), shift_at(b)
    # An end set by a toe still pushing off from the step the swing leaves (its contact point
    # nearer that step's than the other's), when that step stays where the source has it (its
    # shift within ``tol``) and nothing holds the effector on that frame: the effector is there
    # at that step's shift, not where the solve before these pins had it. The descriptors of a
    # stone moved a metre had pulled a real walk's foot 0.35 m towards it on the three frames of
    # its toe's last push off the stone before; both eases aimed there, the foot, free between
    # them, came back, and jumped 0.33 m there and back (walk 3300, stone 1). (A step that moved
    # leaves its toe's later stances to be placed on their own: its shift is no guide there.)
    def nearer(q, left, come):
        return np.linalg.norm(q.position - left.position) <= np.linalg.norm(q.position - come.position)

    if before and a > before[-1].end and np.isnan(pins[a, eff, 0]):
        left = shift_at(before[-1].end)
        if np.linalg.norm(left) <= tol and any(q.end == a and nearer(q, before[-1], ph) for q in others):
            shift_a = left
    if after and b < after[0].start and np.isnan(pins[b, eff, 0]) and np.linalg.norm(shift_out) <= tol and \
            any(q.start == b and nearer(q, ph, after[0]) for q in others):
        shift_b = shift_out

    def offset_at(f):
        """How far what hangs below the effector (toes) is from the source's offsets at f."""
        held = pins[f, below]
        got = np.where(np.isnan(held), positions[f, below], held) - (pins[f, eff] if not np.isnan(pins[f, eff, 0])
                                                                     else positions[f, eff])
        return got - (motion[f, below] - motion[f, eff])

    off_a, off_b = offset_at(a), offset_at(b)

    def hold(f, w, s0, o0=None, towards=shift):
        s = s0 + w * (towards - s0)
        p = motion[f, eff] + s if w < 1.0 or not ph.start <= f <= ph.end else path[f - ph.start]
        pins[f, eff] = p
        # What hangs below keeps the source's offsets, eased in from how they were at the
        # ease's end (pinned straight to the source's, a toe jumped at the first pinned frame).
        off = motion[f, below] - motion[f, eff]
        if w < 1.0 and o0 is not None:
            off = off + (1.0 - w) * o0
        pins[f, below] = p + off

    # The shift changes where the body moves slowly in the source: each frame's
    # share of the blend is proportional to the room left below the source's
    # largest step (the whole body follows the pinned limb, the hips first).
    speed = np.r_[0.0, np.linalg.norm(np.diff(motion, axis=0), axis=-1).max(axis=1)]
    top = float(np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()) if len(motion) > 1 else 1.0

    def shares(frames):
        room = np.maximum(top - speed[frames], 0.02 * top)
        return np.cumsum(room) / room.sum()

    held_frames, held_w = [], []
    if first - a > 1:
        inner = np.arange(a + 1, first + 1)
        w = shares(inner)
        for f, wf in zip(inner[:-1], w[:-1]):
            hold(f, wf, shift_a, off_a, shift_in)
        held_frames += inner[:-1].tolist()
        held_w += w[:-1].tolist()
    for f in range(first, last + 1):                 # the source's heel and toe, moved whole
        whole = shift_in if f < ph.start else shift_out if f > ph.end else shift
        hold(f, 1.0, whole, towards=whole)
    held_frames += list(range(first, last + 1))
    held_w += [1.0] * (last - first + 1)
    if b - last > 1:
        inner = np.arange(last + 1, b + 1)
        w = 1.0 - shares(inner)
        for f, wf in zip(inner[:-1], w[:-1]):
            hold(f, wf, shift_b, off_b, shift_out)
        held_frames += inner[:-1].tolist()
        held_w += w[:-1].tolist()
    return np.array(held_frames, np.int64), np.array(held_w), np.r_[eff, below].astype(np.int64)


def _swing_clear(binding, mesh, pins, span, up, eps0, arriving=False):
    """Raise an eased swing (``_pin_phase``'s ``span``: its frames eased, blend < 1) where it goes
    nearer a surface under it than the source's went over its own, up to ``eps0``: a foot stepping
    down 0.3 m to the ground where its stone was is taken down from its first eased frame, and
    its toe, still over the stone it leaves, went 2.4 cm under its top (the free limbs kept out
    of it then lifted that toe 2.7 cm on the frames before). The effector and what hangs below it
    rise together, by the most any of them needs, smoothed over the frames (the swing's way off
    an edge does not drop in one frame). ``pins`` changed in place; a static ``mesh`` only. For
    re-positioned contacts (``plan_repositioning``); the held stances' short eases are left as
    they are. ``arriving``: the run of frames up to each eased stretch's last is raised too, and
    a point inside a solid (``_inside_depth``) out through its top (a foot set down on the ground
    coming up onto the next stone went through its side; ``_set_down``)."""
    from scipy.ndimage import gaussian_filter1d, maximum_filter1d
    frames, blend, joints = span
    if mesh.animated or not len(frames) or np.all(blend >= 1.0):
        return
    up = normalize(np.asarray(up, float))
    order = np.argsort(frames, kind="stable")
    frames, blend = np.asarray(frames)[order], np.asarray(blend, float)[order]
    eased = blend < 1.0
    fe = frames[eased]
    reach = 0.05 * binding.body_height                 # how far under a surface a point is still "on" it

    def heights(m, points):
        d, facing = _cast_down(m, points.reshape(-1, 3) + reach * up, up)
        return np.where(facing, d - reach, np.inf).reshape(len(fe), len(joints))

    now = pins[np.ix_(fe, joints)]
    if np.isnan(now).any():
        return
    source = heights(binding.mesh, binding.motion[np.ix_(fe, joints)])
    need = np.minimum(np.maximum(source, 0.0), eps0)
    under = need - heights(mesh, now)
    if arriving:
        depth = _inside_depth(mesh, now, up, binding.body_height).reshape(under.shape)
        under = np.where(depth > 0.0, np.maximum(under, depth + need), under)
    lift = np.maximum(under, 0.0).max(axis=1)
    # Only as it leaves: the run of frames from each eased stretch's first (the foot coming off
    # the contact before, or off this one) on which it would go in. Farther on, the way down
    # may cut a stone's corner; lifted there, the foot dropped 17 cm in its last frame before
    # landing (the source's foot 12 cm at most). ``arriving``: and as it comes, up to each stretch's last.
    first = np.r_[True, np.diff(fe) != 1]              # where each eased stretch starts
    keep = lift > 0.0
    for k in np.flatnonzero(~first):
        keep[k] &= keep[k - 1]
    if arriving:
        last = np.r_[np.diff(fe) != 1, True]
        come = lift > 0.0
        for k in np.flatnonzero(~last)[::-1]:
            come[k] &= come[k + 1]
        keep |= come
    lift = np.where(keep, lift, 0.0)
    if not lift.any():
        return
    full = np.zeros(len(frames))
    full[eased] = lift
    full = np.maximum(full, gaussian_filter1d(maximum_filter1d(full, 5, mode="nearest"), 1.0, mode="nearest"))
    full[~eased] = 0.0
    pins[np.ix_(frames[eased], joints)] += full[eased][:, None, None] * up
