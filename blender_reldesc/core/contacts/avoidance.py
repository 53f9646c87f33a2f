"""Free limbs kept out of obstacles brought into the scene (a departure from the contacts paper).

The paper keeps the trunk clear by replanning the root (§7) and re-positions limbs that are in
contact; a limb swinging free has only its descriptors, and a surface that was out of every
descriptor's reach at bind time (a slab lowered from 6 m) pulls nothing: a real walk's raised
hands went through a slab lowered to the head on 15-40 frames while the trunk ducked under it.

Here, on the frames where a limb whose effector has no contact then (an arm, a leg in swing)
goes through a surface of a static environment where the source's did not
(``limb_collisions``), the effector is pinned on the line from the limb's root to it, ``CLEAR``
body heights before the first surface that line meets (or farther back, as what hangs below it
needs), and the middle joint (elbow, knee) by two-bone IK towards where it is, drawn back the
same way on its own line: the limb keeps its bone lengths. Eased in and out over ``EASE``
frames. The result is kept only when
it leaves fewer such frames, no new trunk collision, every contact's status as it was and no
new jump (``repositioning.JUMP_RATIO``).
"""

from __future__ import annotations

import numpy as np

from ..geometry.triangles import dot, norm, normalize
from ..skeleton.joints import bending, place_between, span, two_bone

#: How far short of the surface the effector is held, body heights (3.5 cm for 1.75 m).
CLEAR = 0.02
#: Frames over which the pin is eased in before and out after the frames it is needed on.
EASE = 8
#: A limb laid along the surface it met (``_laid_along``) points this many degrees away from it.
LAY_TILT = 10.0


def _limbs(binding):
    """[(effector, chain (k,), bones (b,) of the chain and what hangs below the effector)]."""
    key = ("avoid_limbs",)
    if key not in binding._joint_models:
        from ..skeleton.joints import limb_effectors
        from .repositioning import ContactError, _subtree, find_limb
        sk = binding.skeleton
        child = np.flatnonzero(sk.parents >= 0)
        out = []
        for e in limb_effectors(sk, binding.motion, binding.body_height).tolist():
            try:
                chain = find_limb(sk, sk.names[e]).chain
            except ContactError:
                continue
            joints = set(chain[1:].tolist()) | set(_subtree(sk, e).tolist())
            # Leaves beside the chain (Unreal's forearm_twist_01_r) are the limb's, as ``_limb_joints``.
            joints |= {int(k) for j in chain[1:-1].tolist() for k in sk.children(j) if len(sk.children(k)) == 0}
            out.append((int(e), chain, np.flatnonzero(np.isin(child, list(joints)))))
        binding._joint_models[key] = out
    return binding._joint_models[key]


def limb_collisions(binding, mesh, positions, phases):
    """(F, L) bool per frame and limb (``_limbs`` order): the limb goes through a surface of the
    static ``mesh`` (a bone through it, or a joint more than 1.75 mm inside) where the source's
    did not, on a frame where none of its joints is in a contact phase."""
    from .replanning import TRUNK_MARGIN
    from .repositioning import newly_inside
    sk, H = binding.skeleton, binding.body_height
    limbs = _limbs(binding)
    F = len(positions)
    out = np.zeros((F, len(limbs)), bool)
    if not limbs or mesh.animated:
        return out
    B = int(np.sum(sk.parents >= 0))
    need = np.zeros((F, B), bool)
    child = np.flatnonzero(sk.parents >= 0)
    for k, (e, chain, bones) in enumerate(limbs):
        busy = np.zeros(F, bool)
        mine = set(sk.parents[child[bones]].tolist()) | set(child[bones].tolist())
        for ph in phases:
            if ph.effector in mine:
                busy[ph.start:ph.end + 1] = True
        need[np.ix_(~busy, bones)] = True
    frames = np.flatnonzero(need.any(axis=1))
    if not frames.size:
        return out
    fresh, _ = newly_inside(binding, positions, mesh, frames, need[frames], TRUNK_MARGIN * H)
    for k, (_, _, bones) in enumerate(limbs):
        out[frames, k] = fresh[:, bones].any(axis=1)
    return out


def limb_pins(binding, mesh, positions, through, bend=True):
    """Pins (F,J,3) (NaN where free) on the frames ``through`` (F,L) marks, eased in and out: each
    limb's effector short of the first surface on the line from the limb's root (as far back as
    the farthest of what hangs below it needs: a hand's fingers), its middle joint (elbow, knee)
    placed by two-bone IK towards where it is, itself drawn back short of a surface on its own
    line from the root (and with ``bend``, pushed off the surface the effector met by its bone's
    length), so the pinned limb keeps its bone lengths; what hangs below the effector moves
    with it. None when nothing needs pinning."""
    from ..geometry.rays import RayCaster
    from ..skeleton.joints import split_joints
    from .repositioning import _subtree
    sk = binding.skeleton
    F, J, _ = positions.shape
    H = binding.body_height
    caster = RayCaster.of(mesh)
    lengths = np.median(sk.bone_lengths(binding.motion), axis=0)
    split = split_joints(sk, binding.motion)
    pins = np.full((F, J, 3), np.nan)
    done = set()
    for k, (e, chain, _) in enumerate(_limbs(binding)):
        frames = np.flatnonzero(through[:, k])
        # Real joints only (a bone split along its length, Rigify's upper_arm twist, is one segment).
        real = bending(chain, split)
        if not frames.size or len(real) < 3 or e in done:
            continue
        top, mid = int(real[-3]), int(real[-2])
        root = int(chain[0])
        end_shift, end_w, facing = _short(caster, positions, frames, root, e, _subtree(sk, e), CLEAR * H)
        if end_w is None:
            continue
        done.add(e)
        mid_shift, mid_w, _ = _short(caster, positions, frames, root, mid, [mid], CLEAR * H)
        on = np.flatnonzero(end_w > 0.0)
        end = positions[on, e] + end_w[on, None] * end_shift[on]
        seg = lambda a, b: span(chain, lengths, a, b)  # noqa: E731
        # The middle joint bends away from the surface (down under a slab: a raised arm folded
        # towards the shoulder put its elbow up into it), pushed by twice the limb's length so that
        # the push outweighs wherever the joint was (an elbow is at most the upper bone's length
        # off the line; where the bone lengths leave no elbow out of the surface, ``_laid_along``).
        hint = positions[on, mid] + (0.0 if mid_w is None else mid_w[on, None] * mid_shift[on]) \
            + float(bend) * end_w[on, None] * facing[on] * 2.0 * seg(top, e)
        k_new, a_new = two_bone(positions[on, top], hint, end, seg(top, mid), seg(mid, e))
        if bend:
            k_new, a_new = _laid_along(caster, positions, on, (root, top, mid, e), k_new, a_new, end_w, facing,
                                       (seg(top, mid), seg(mid, e)), CLEAR * H)
        pins[on, mid], pins[on, e] = k_new, a_new
        # The limb's top (a shoulder) held where the IK took it from: moved by the solve that
        # follows, it stretched an upper arm laid along a slab by 1.8 cm.
        pins[on, top] = positions[on, top]
        place_between(pins, on, chain, lengths, top, mid, positions[on, top], k_new)
        place_between(pins, on, chain, lengths, mid, e, k_new, a_new)
        for j in _subtree(sk, e)[1:]:
            pins[on, j] = positions[on, j] + (a_new - positions[on, e])
    return pins if done else None


def _blocked(caster, start, stop, clear):
    """(n,) whether the segments ``start`` -> ``stop`` (n,3) meet a surface before ``clear`` past
    their end."""
    ray = stop - start
    t, _ = caster.cast(start, ray)
    return t < norm(ray) + clear


def _laid_along(caster, positions, on, joints, k_new, a_new, end_w, facing, lengths, clear):
    """``(middle, end)`` of a limb pinned on frames ``on``, laid along the surface it met on each
    run of frames where the pinned limb still folds its middle joint into it.

    Brought back along its line from the root, a hand raised through a slab lands under it close to
    the shoulder, and the only elbow those bone lengths allow points up into the slab (13 frames of
    a real walk). There the limb keeps its reach from its top joint (the shoulder) but turns until it
    no longer points into the surface, ``LAY_TILT`` away from parallel, and bends away from it; a
    whole run of pinned frames is laid so, eased in and out as the pin is, when that leaves fewer
    of its frames blocked."""
    root, top, mid, e = joints
    l1, l2 = lengths
    shoulder = positions[on, top]
    stuck = _blocked(caster, shoulder, k_new, clear) | _blocked(caster, k_new, a_new, clear)
    if not stuck.any():
        return k_new, a_new
    k_new, a_new = k_new.copy(), a_new.copy()
    cut = np.flatnonzero(np.diff(on) > 1) + 1
    for rows in np.split(np.arange(len(on)), cut):
        if not stuck[rows].any():
            continue
        f, t, n = on[rows], shoulder[rows], facing[on[rows]]
        d = positions[f, e] - t
        length = norm(d)
        reach = np.minimum(length, 0.999 * (l1 + l2))
        flat = (d - np.minimum(dot(d, n), 0.0)[:, None] * n) / np.maximum(length, 1e-300)[:, None]   # none into it
        # Outward, the way the limb's first bone points (a clavicle's: sideways), along the surface:
        # an arm raised straight into a slab has no way along it of its own, and the little it has
        # swung from frame to frame (a 0.28 m step).
        out = t - positions[f, root]
        out = normalize(out - dot(out, n)[:, None] * n)
        way = normalize(normalize(flat + 0.5 * out) + np.tan(np.radians(LAY_TILT)) * n)
        goal = positions[f, e] + end_w[f, None] * (t + way * reach[:, None] - positions[f, e])
        hint = positions[f, mid] + end_w[f, None] * n * 2.0 * (l1 + l2)
        k2, a2 = two_bone(t, hint, goal, l1, l2)
        left = _blocked(caster, t, k2, clear) | _blocked(caster, k2, a2, clear)
        if left.sum() < stuck[rows].sum():
            k_new[rows], a_new[rows] = k2, a2
    return k_new, a_new


def _short(caster, positions, frames, root, j, tips, clear):
    """``(shift (F,3), weight (F,), facing (F,3))`` bringing joint ``j`` back along its line from
    ``root`` on ``frames`` until each of ``tips`` (``j`` and what hangs below it) is ``clear``
    short of the first surface on its own line from ``root``, eased in and out over ``EASE``
    frames, and the unit normal of the surface that needed it most, facing the root; weight None
    when none of them is past a surface."""
    F = len(positions)
    start = positions[frames, root]
    reach = positions[frames, j] - start
    length = np.linalg.norm(reach, axis=1)
    direction = reach / np.maximum(length, 1e-300)[:, None]
    back = np.full(len(frames), -np.inf)                 # how far j must come back along its line
    normal = np.zeros((len(frames), 3))                  # the surface it met, facing the root
    for q in tips:
        ray = positions[frames, q] - start
        far = np.linalg.norm(ray, axis=1)
        t, tri = caster.cast(start, ray)
        need = np.where(t < far + clear, far - (t - clear), -np.inf)
        worse = need > back
        if worse.any():
            a, b, c = (caster.a[np.maximum(tri[worse], 0)], caster.b[np.maximum(tri[worse], 0)],
                       caster.c[np.maximum(tri[worse], 0)])
            n = np.cross(b - a, c - a)
            n /= np.maximum(np.linalg.norm(n, axis=1), 1e-300)[:, None]
            n *= np.where(np.einsum("ni,ni->n", n, ray[worse]) > 0.0, -1.0, 1.0)[:, None]
            normal[worse] = n
        back = np.maximum(back, need)
    ok = np.isfinite(back)
    if not ok.any():
        return None, None, None
    frames, direction = frames[ok], direction[ok]
    shift = np.zeros((F, 3))
    weight = np.zeros(F)
    facing = np.zeros((F, 3))
    shift[frames] = -direction * np.minimum(back[ok], length[ok])[:, None]
    facing[frames] = normal[ok]
    weight[frames] = 1.0
    # Eased in and out: each frame near the pinned ones takes the nearest one's shift (the earlier
    # on a tie), less.
    every = np.arange(F)
    right = np.minimum(np.searchsorted(frames, every), len(frames) - 1)
    left = np.maximum(right - 1, 0)
    near = np.where(np.abs(frames[left] - every) <= np.abs(frames[right] - every), frames[left], frames[right])
    gap = np.abs(near - every)
    ease = (weight < 1.0) & (gap <= EASE)
    s = 1.0 - gap[ease] / (EASE + 1.0)
    weight[ease] = s * s * (3.0 - 2.0 * s)
    shift[ease], facing[ease] = shift[near[ease]], facing[near[ease]]
    return shift, weight, facing
