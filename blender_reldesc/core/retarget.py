"""Retargeting: a clip recorded on one skeleton onto another, its contacts kept.

The simple retargeters copy each bone's rotation through a name map and scale the root by the
ratio of leg lengths; the feet then slide or sink wherever the legs' proportions differ, and the
ground is assumed flat at zero. Here the motion is carried over in three steps:

1. **A bone map** (``map_bones``): the joints of the target that play a source joint. Both
   skeletons' *anchors* (hips, neck, head; clavicle, upper arm, forearm, hand, thigh, shin, foot,
   toe on each side) are found by the names of a known convention (``PRESETS``: BVH, CMU, Mixamo,
   Rigify, Unreal, MakeHuman) when one fits, else from the structure of the rest pose (the legs
   are the two lowest chains, the hips where they meet, the arms the long chains off the trunk, the
   sides from the feet's forward direction). Between anchors, chains of equal length pair joint by
   joint (spine, neck, fingers, ends); the rest of the target is placed, not mapped (below). A map
   can be saved, edited and loaded as JSON (``BoneMap.to_json`` / ``from_json``).
2. **The transfer** (``transfer``): each mapped target joint takes its source joint's position,
   so the transferred motion has the *source's* proportions and every contact the source has; an
   unmapped target joint between two mapped ones (an extra spine joint, a twist bone, Rigify's
   pelvis) lies on the source's chain between them at its rest fraction of the target's chain; one
   below every mapped joint (fingers the source lacks, a helper leaf) turns rigidly with its nearest
   mapped ancestor; an unmapped root above the hips (Unreal's ``root``) follows the hips over the
   floor. Each target bone's turn from its rest (``turns``) is its source bone's turn from the
   source's rest, after the source's rest is swung onto the target's (T-pose onto A-pose): limb
   directions *and* twist carried, rolls and rest poses free to differ.
   The legs take the target's lengths there already: the body rides higher or lower on them by
   the legs' ratio, the knees solved between hip and ankle, each foot standing on its own sole.
   Without an environment the stride scales with the legs (``stride="auto"``): the hips' path
   and each footstep (one shift a footstep, eased over the swing) spread by the ratio about the
   clip's start; with an environment the footsteps stay where the source put them.
3. **The descriptors** (the method of this product): the transferred motion is bound to the
   environment (or, without one, to a floor under the source's feet) and adapted to the target's
   own bone lengths (the arms', the trunk's), so hands stay on what they touch and feet on the
   ground, flat or sculpted after the clip was recorded (``edited``); each foot is held over the
   source's stance phases where a first adapt put it (``_stance_pins``).

``naive`` is the simple retarget (turns copied, root scaled by the legs' ratio), for comparison.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .geometry import TriMesh, normalize
from .skeleton import Skeleton
from .skeleton.rotations import recover_rotations, swing

#: Anchors: roles on the body, and per side.
BODY_ROLES = ("hips", "neck", "head")
SIDE_ROLES = ("clavicle", "upperarm", "forearm", "hand", "thigh", "shin", "foot", "toe")
SIDES = (".L", ".R")
#: What a rig must have for a retarget: legs (the method keeps their contacts) and a trunk.
REQUIRED = ("hips", "thigh.L", "shin.L", "foot.L", "thigh.R", "shin.R", "foot.R")
FINGERS = ("thumb", "index", "middle", "ring", "pinky")

#: Role -> bone names of each convention, first found wins; ``{S}`` Left/Right, ``{s}`` l/r,
#: ``{d}`` L/R. Names are compared without case and without a namespace (``mixamorig:``).
PRESETS = {
    "mixamo": dict(hips=["Hips"], neck=["Neck"], head=["Head"], clavicle=["{S}Shoulder"], upperarm=["{S}Arm"],
                   forearm=["{S}ForeArm"], hand=["{S}Hand"], thigh=["{S}UpLeg"], shin=["{S}Leg"],
                   foot=["{S}Foot"], toe=["{S}ToeBase", "{S}Toe"]),
    "cmu": dict(hips=["Hips"], neck=["Neck", "Neck1"], head=["Head"], clavicle=["{S}Shoulder"], upperarm=["{S}Arm"],
                forearm=["{S}ForeArm"], hand=["{S}Hand"], thigh=["{S}UpLeg"], shin=["{S}Leg"], foot=["{S}Foot"],
                toe=["{S}ToeBase"]),
    "bvh": dict(hips=["Hips"], neck=["Neck"], head=["Head"], clavicle=["{S}Collar"], upperarm=["{S}Shoulder"],
                forearm=["{S}Elbow"], hand=["{S}Wrist"], thigh=["{S}Hip"], shin=["{S}Knee"], foot=["{S}Ankle"],
                toe=["{S}Toe"]),
    "rigify": dict(hips=["DEF-spine", "pelvis", "spine"], neck=["DEF-spine.004", "neck", "spine.004"],
                   head=["DEF-spine.006", "head", "face", "spine.006"],
                   clavicle=["DEF-shoulder.{d}", "shoulder.{d}"], upperarm=["DEF-upper_arm.{d}", "upper_arm.{d}"],
                   forearm=["DEF-forearm.{d}", "forearm.{d}"], hand=["DEF-hand.{d}", "hand.{d}"],
                   thigh=["DEF-thigh.{d}", "thigh.{d}"], shin=["DEF-shin.{d}", "shin.{d}"],
                   foot=["DEF-foot.{d}", "foot.{d}"], toe=["DEF-toe.{d}", "toe.{d}"]),
    "ue": dict(hips=["pelvis"], neck=["neck_01"], head=["head"], clavicle=["clavicle_{s}"], upperarm=["upperarm_{s}"],
               forearm=["lowerarm_{s}"], hand=["hand_{s}"], thigh=["thigh_{s}"], shin=["calf_{s}"], foot=["foot_{s}"],
               toe=["ball_{s}"]),
    "makehuman": dict(hips=["root", "pelvis"], neck=["neck01"], head=["head"], clavicle=["clavicle.{d}"],
                      upperarm=["upperarm01.{d}"], forearm=["lowerarm01.{d}"], hand=["wrist.{d}"],
                      thigh=["upperleg01.{d}"], shin=["lowerleg01.{d}"], foot=["foot.{d}"], toe=["toe1-1.{d}"]),
}
#: Joints this close in angle (degrees) continue one limb segment (Rigify's split upper arm).
COLLINEAR_DEGREES = 12.0
#: A leg fitted onto its foot keeps this share of its length in reserve (not quite straight).
REACH_MARGIN = 0.005
#: A foot this high above its lowest (in body heights; its lowest joint) still stands for the legs' reach; above
#: it the reach gives way by ``LIFT_SLACK`` times the rest of its height (no jump when it lifts).
LIFT_GROUNDED = 0.02
LIFT_SLACK = 4.0
#: A bone off the chest starting within this many body heights of the spine's side is a clavicle.
CLAVICLE_REACH = 0.05


def _plain(name):
    """A name as presets compare it: no namespace, no case."""
    return name.rsplit(":", 1)[-1].lower()


def _roles_from_preset(skeleton, preset):
    """{role: joint} for the names of ``preset`` found in ``skeleton``."""
    where = {}
    for j, n in enumerate(skeleton.names):
        where.setdefault(_plain(n), j)
    out = {}
    for role, patterns in PRESETS[preset].items():
        for side in ((None,) if role in BODY_ROLES else SIDES):
            for pattern in patterns:
                if side is None:
                    name = pattern
                else:
                    S = "Left" if side == ".L" else "Right"
                    name = pattern.format(S=S, s=S[0].lower(), d=side[1])
                j = where.get(name.lower())
                if j is not None:
                    out[role if side is None else role + side] = j
                    break
    return out


def _ancestors(skeleton, j):
    out = []
    j = int(skeleton.parents[j])
    while j >= 0:
        out.append(j)
        j = int(skeleton.parents[j])
    return out


def _path(skeleton, top, bottom):
    """Joints from ``top`` down to ``bottom`` (both included), or None if ``top`` is not above."""
    chain = [bottom]
    j = bottom
    while j != top:
        j = int(skeleton.parents[j])
        if j < 0:
            return None
        chain.append(j)
    return chain[::-1]


def _consistent(skeleton, roles):
    """Whether ``roles``' limbs hang as a body's do (each side's chain descends from the hips or
    the trunk in order)."""
    for side in SIDES:
        chain = [roles.get(r + side) for r in ("thigh", "shin", "foot", "toe")]
        chain = [roles["hips"]] + [j for j in chain if j is not None]
        if any(_path(skeleton, a, b) is None for a, b in zip(chain, chain[1:])):
            return False
        # The clavicle need not be above the upper arm (Rigify's DEF-upper_arm hangs from the
        # spine among the deform bones).
        arm = [roles.get(r + side) for r in ("upperarm", "forearm", "hand")]
        arm = [j for j in arm if j is not None]
        if any(_path(skeleton, a, b) is None for a, b in zip(arm, arm[1:])):
            return False
    return True


def _children(skeleton):
    kids = [[] for _ in range(len(skeleton))]
    for j, p in enumerate(skeleton.parents.tolist()):
        if p >= 0:
            kids[p].append(j)
    return kids


def _straight(rest, a, b, c):
    """Whether bones a->b and b->c continue one line (or one of them has no length)."""
    u, v = rest[b] - rest[a], rest[c] - rest[b]
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    return nu < 1e-9 or nv < 1e-9 or float(u @ v) / (nu * nv) >= np.cos(np.radians(COLLINEAR_DEGREES))


def _arc(rest, chain):
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(rest[chain], axis=0), axis=1))])


def _limb(rest, chain, end, top=0):
    """``(top, middle)`` indices into ``chain`` of a limb ending at ``chain[end]`` (the ankle, the
    wrist): the top skips short helpers that turn into the limb (a clavicle, a hip bone, Rigify's
    zero-length pelvis), starting at ``top``; the middle (knee, elbow) is the joint nearest half
    way along, so split twist segments (Rigify's ``upper_arm.001``) fall on either side of it."""
    while end - top >= 3:
        arc = _arc(rest, chain[top:end + 1])
        short = arc[1] < 0.5 * (arc[-1] - arc[1])
        if not short or _straight(rest, chain[top], chain[top + 1], chain[top + 2]) and arc[1] > 1e-9:
            break
        top += 1
    if end - top < 2:
        return None
    arc = _arc(rest, chain[top:end + 1])
    inner = range(1, end - top)
    middle = top + min(inner, key=lambda k: abs(arc[k] - 0.5 * arc[-1]))
    return top, middle


def _leg(rest, chain, floor):
    """``(thigh, knee, ankle, toe or None)`` indices into a leg's ``chain`` (below the hips, down to
    the foot's tip), or None: the ankle is the first joint within a fifth of the hips' height of
    the floor."""
    hip = rest[chain[0], 2] - floor
    end = next((k for k in range(1, len(chain)) if rest[chain[k], 2] - floor < 0.2 * hip), None)
    if end is None or end == len(chain) - 1 and len(chain) < 3:
        return None
    found = _limb(rest, chain, end)
    if found is None:
        return None
    toe = end + 1 if end + 2 < len(chain) else None
    return found[0], found[1], end, toe


def _wrist(skeleton, rest, kids, chain):
    """Index into an arm's ``chain`` (down to its farthest leaf) of the wrist: the joint the
    digits branch from, else the joint before a short end bone, else the end itself (an arm
    whose forearm is its last bone)."""
    for k, j in enumerate(chain):
        if len(kids[j]) >= 3:
            return k
    if len(chain) >= 3:
        last = np.linalg.norm(rest[chain[-1]] - rest[chain[-2]])
        before = np.linalg.norm(rest[chain[-2]] - rest[chain[-3]])
        if last < 0.75 * before:
            return len(chain) - 2
    return len(chain) - 1


def _roles_from_structure(skeleton, rest, name="the rig"):
    """{role: joint} from the rest pose (Z up): legs, hips, arms, neck, head, sides."""
    kids = _children(skeleton)
    J = len(skeleton)
    leaves = [j for j in range(J) if not kids[j]]
    height = float(np.ptp(rest[:, 2])) or 1.0
    floor = float(rest[:, 2].min())
    # The feet: the lowest leaf, then the lowest leaf on another branch well apart from it.
    by_height = sorted(leaves, key=lambda j: rest[j, 2])
    first = by_height[0] if by_height else None
    second = next((j for j in by_height[1:]
                   if np.linalg.norm(rest[j, :2] - rest[first, :2]) > 0.05 * height
                   and rest[j, 2] < rest[first, 2] + 0.15 * height), None)
    if second is None:
        raise InputError(f"no legs found in {name}: fewer than two chains reach the floor")
    up_b = set(_ancestors(skeleton, second))
    hips = next((j for j in _ancestors(skeleton, first) if j in up_b), None)
    if hips is None:
        raise InputError(f"no legs found in {name}: its two lowest chains have no joint in common")
    roles = {"hips": hips}
    legs = {}
    for tip in (first, second):
        chain = _path(skeleton, hips, tip)[1:]
        found = _leg(rest, chain, floor)
        if found is None:
            raise InputError(f"no legs found in {name}: the chain down to '{skeleton.names[tip]}' has no knee "
                             f"and ankle")
        legs[tip] = (chain, found)
    # Forward: where the feet point (their tips ahead of the ankles); left = up x forward.
    forward = np.zeros(3)
    for tip, (chain, (_, _, ankle, _)) in legs.items():
        forward += rest[tip] - rest[chain[ankle]]
    forward[2] = 0.0
    if np.linalg.norm(forward) < 1e-3 * height:
        forward = np.array([0.0, -1.0, 0.0])                     # Blender's characters face -Y
    left = np.cross([0.0, 0.0, 1.0], normalize(forward))
    sides = {tip: float((rest[chain[ankle]] - rest[hips]) @ left) for tip, (chain, (_, _, ankle, _)) in legs.items()}
    if (sides[first] > 0) == (sides[second] > 0):
        raise InputError(f"no legs found in {name}: both lowest chains are on one side")
    for tip, (chain, (thigh, knee, ankle, toe)) in legs.items():
        side = ".L" if sides[tip] > 0 else ".R"
        roles["thigh" + side], roles["shin" + side], roles["foot" + side] = chain[thigh], chain[knee], chain[ankle]
        if toe is not None:
            roles["toe" + side] = chain[toe]
    # The trunk: from the hips to the highest leaf not in a leg.
    leg_joints = {j for chain, _ in legs.values() for j in chain}
    top = max((j for j in leaves if j not in leg_joints and hips in _ancestors(skeleton, j)),
              key=lambda j: rest[j, 2], default=None)
    if top is None:
        return roles
    trunk = _path(skeleton, hips, top)
    on_trunk = set(trunk)
    # The arms: branches off the trunk above the hips at least a quarter of the height long, on
    # the side their joints lie; the longest on each side.
    arms = {}
    for t in trunk[1:]:
        for k in kids[t]:
            if k in on_trunk or k in leg_joints:
                continue
            for leaf in [m for m in [k] + skeleton.descendants(k) if not kids[m]]:
                chain = _path(skeleton, t, leaf)
                length = _arc(rest, chain)[-1]
                lateral = float((rest[chain].mean(axis=0) - rest[t]) @ left)
                if length < 0.25 * height or abs(lateral) < 0.02 * height:
                    continue
                side = ".L" if lateral > 0 else ".R"
                if side not in arms or length > arms[side][0]:
                    arms[side] = (length, t, chain[1:])
    chest = None
    for side, (_, branch, chain) in arms.items():
        wrist = _wrist(skeleton, rest, kids, chain)
        # A clavicle starts by the spine (in a T-pose it lines up with the upper arm, so only
        # where it starts tells it from an upper arm split in two).
        clavicle = wrist >= 3 and abs(float((rest[chain[0]] - rest[branch]) @ left)) < CLAVICLE_REACH * height
        found = _limb(rest, chain, wrist, 1 if clavicle else 0)
        if found is None:
            continue
        upper, elbow = found
        roles["upperarm" + side], roles["forearm" + side], roles["hand" + side] = \
            chain[upper], chain[elbow], chain[wrist]
        if upper > 0:
            roles["clavicle" + side] = chain[0]
        chest = branch if chest is None or trunk.index(branch) > trunk.index(chest) else chest
    if chest is not None:
        above = trunk[trunk.index(chest) + 1:]
        # The head: where the trunk branches above the neck (a face's bones), else the joint
        # before the top.
        branch = next((j for j in above[1:-1] if len(kids[j]) > 1), None)
        if len(above) >= 3:
            roles["neck"] = above[0]
            roles["head"] = branch if branch is not None else above[-2]
        elif len(above) == 2:
            roles["head"] = above[0]
    return roles


def find_roles(skeleton, rest, preset=None, name="the rig"):
    """``({role: joint}, preset name or "structure")``: the anchors of a rig with rest joint
    positions ``rest`` (J,3), Z up. ``preset``: one of ``PRESETS``, "structure", or None to take
    the preset whose names fit best (all of ``REQUIRED`` found, limbs in order), else the
    structure. Raises InputError when no legs are found."""
    rest = np.asarray(rest, float)
    if preset is not None and preset != "structure" and preset not in PRESETS:
        raise InputError(f"unknown bone map preset '{preset}': use one of {', '.join(PRESETS)}, or structure")
    if preset != "structure":
        tried = [preset] if preset else list(PRESETS)
        fits = []
        for p in tried:
            roles = _roles_from_preset(skeleton, p)
            if all(r in roles for r in REQUIRED) and _consistent(skeleton, roles):
                fits.append((len(roles), p, roles))
        if fits:
            _, p, roles = max(fits, key=lambda x: x[0])
            return roles, p
        if preset:
            missing = [r for r in REQUIRED if r not in _roles_from_preset(skeleton, preset)]
            raise InputError(f"{name} does not fit the '{preset}' preset" +
                             (f": no bone for {', '.join(missing)}" if missing else ": its limbs are not in order"))
    return _roles_from_structure(skeleton, rest, name), "structure"


@dataclass
class BoneMap:
    """Target joint name -> source joint name. ``sources``/``targets``: how each side's roles were
    found (a preset's name, "structure" or "file")."""
    bones: dict
    source: str = "structure"
    target: str = "structure"
    roles: dict = field(default_factory=dict)       # target joint name -> its role, where it has one

    def to_json(self):
        return json.dumps({"format": "blender_reldesc bone map", "version": 1,
                           "bones": dict(sorted(self.bones.items()))}, indent=2)

    @classmethod
    def from_json(cls, text):
        """A map saved by ``to_json`` (or written by hand: ``{"bones": {target: source}}``).
        A target named twice is refused (JSON would keep the last silently)."""
        def pairs(items):
            seen = {}
            for k, v in items:
                if k in seen:
                    raise InputError(f"the bone map names target bone '{k}' twice: keep one line for it")
                seen[k] = v
            return seen
        try:
            data = json.loads(text, object_pairs_hook=pairs)
        except json.JSONDecodeError as e:
            raise InputError(f"the bone map is not valid JSON ({e.msg}, line {e.lineno})") from None
        bones = data.get("bones") if isinstance(data, dict) else None
        if not isinstance(bones, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in bones.items()):
            raise InputError('the bone map needs "bones": {"target bone": "source bone", ...}')
        return cls(dict(bones), "file", "file")

    def check(self, source, target):
        """Raise InputError unless every named bone exists and no source bone plays two targets."""
        for t, s in self.bones.items():
            if t not in target.names:
                raise InputError(f"the bone map names target bone '{t}', which the target does not have")
            if s not in source.names:
                raise InputError(f"the bone map names source bone '{s}' (for '{t}'), which the source does not have")
        used = {}
        for t, s in sorted(self.bones.items()):
            if s in used:
                raise InputError(f"source bone '{s}' is mapped to two target bones, '{used[s]}' and '{t}': "
                                 f"map it to one; the other follows its chain")
            used[s] = t
        for t, s in self.bones.items():
            a = _mapped_ancestor(target, self.bones, target.index(t))
            if a is not None and _path(source, source.index(self.bones[target.names[a]]), source.index(s)) is None:
                raise InputError(f"target bone '{t}' is below '{target.names[a]}' but its source '{s}' is not "
                                 f"below '{self.bones[target.names[a]]}': the map crosses the hierarchy")


def _mapped_ancestor(skeleton, bones, j):
    for a in _ancestors(skeleton, j):
        if skeleton.names[a] in bones:
            return a
    return None


def _pair_chain(out, src_sk, tgt_sk, s_chain, t_chain):
    """Pair two chains' inner joints one by one when they have as many (spine, neck, digits)."""
    if len(s_chain) == len(t_chain):
        for s, t in zip(s_chain, t_chain):
            out.setdefault(tgt_sk.names[t], src_sk.names[s])


def _end_of(kids, j):
    """A leaf continuing joint ``j``'s bone (head end, hand end, toe tip), or None."""
    ends = [k for k in kids[j] if not kids[k]]
    return ends[0] if len(ends) == 1 and len(kids[j]) == 1 else None


def _digits(skeleton, rest, kids, hand):
    """{finger: chain (top first)} of a hand with three or more digit chains: by name when
    named, else the thumb is the chain starting nearest the wrist and the others follow across."""
    chains = []
    for k in kids[hand]:
        chain = [k]
        while len(kids[chain[-1]]) == 1:
            chain.append(kids[chain[-1]][0])
        if not kids[chain[-1]]:
            chains.append(chain)
    if len(chains) < 3:
        return {}
    named = {}
    for chain in chains:
        n = _plain(skeleton.names[chain[0]])
        hit = [f for f in FINGERS if f in n or (f == "pinky" and "little" in n)]
        if len(hit) == 1:
            named[hit[0]] = chain
    if len(named) == len(chains):
        return named
    if len(chains) != 5:
        return {}
    start = np.array([rest[c[0]] for c in chains])
    thumb = int(np.argmin(np.linalg.norm(start - rest[hand], axis=1)))
    others = [i for i in range(5) if i != thumb]
    across = start[others] - start[thumb]
    order = [others[i] for i in np.argsort(np.linalg.norm(across, axis=1))]
    return dict(zip(FINGERS, [chains[thumb]] + [chains[i] for i in order]))


def map_bones(source, source_rest, target, target_rest, *, source_preset=None, target_preset=None,
              source_name="the source", target_name="the target"):
    """The ``BoneMap`` from ``source`` (Skeleton, rest (J,3)) to ``target``: identical names and
    hierarchies map one to one; otherwise the anchors (``find_roles``) pair by role, the chains
    between them joint by joint where both have as many (spine, neck, ends, fingers)."""
    source_rest, target_rest = np.asarray(source_rest, float), np.asarray(target_rest, float)
    if source.names == target.names and np.array_equal(source.parents, target.parents):
        return BoneMap({n: n for n in target.names}, "same", "same")
    s_roles, s_how = find_roles(source, source_rest, source_preset, source_name)
    t_roles, t_how = find_roles(target, target_rest, target_preset, target_name)
    bones, roles = {}, {}
    for role, t in t_roles.items():
        if role in s_roles:
            bones[target.names[t]] = source.names[s_roles[role]]
            roles[target.names[t]] = role
    s_kids, t_kids = _children(source), _children(target)
    # Chains between anchors, in order: spine (hips to the clavicles' parent), neck to head.
    def inner(sk, roles_, a, b):
        path = _path(sk, roles_[a], roles_[b]) if a in roles_ and b in roles_ else None
        return None if path is None else path[1:-1]
    for a, b in (("hips", "neck"), ("neck", "head")):
        s_in, t_in = inner(source, s_roles, a, b), inner(target, t_roles, a, b)
        if s_in is not None and t_in is not None:
            _pair_chain(bones, source, target, s_in, t_in)
    # Inside the limbs: Rigify's pelvis, split upper arms and thighs where both have them.
    for side in SIDES:
        for a, b in (("hips", "thigh"), ("thigh", "shin"), ("shin", "foot"), ("clavicle", "upperarm"),
                     ("upperarm", "forearm"), ("forearm", "hand")):
            a = a if a == "hips" else a + side
            s_in, t_in = inner(source, s_roles, a, b + side), inner(target, t_roles, a, b + side)
            if s_in is not None and t_in is not None:
                _pair_chain(bones, source, target, s_in, t_in)
    # Ends: the head's and the hands' tips.
    for role in ("head", "hand.L", "hand.R"):
        if role in s_roles and role in t_roles:
            s_end = _end_of(s_kids, s_roles[role])
            t_end = _end_of(t_kids, t_roles[role])
            if s_end is not None and t_end is not None:
                bones.setdefault(target.names[t_end], source.names[s_end])
    # Feet with a toe on one side only: the tips pair (toe tip with foot tip).
    for side in SIDES:
        s_tip = _tip(source, s_kids, s_roles, side)
        t_tip = _tip(target, t_kids, t_roles, side)
        if s_tip is not None and t_tip is not None:
            bones.setdefault(target.names[t_tip], source.names[s_tip])
    # Fingers where both hands have them.
    for side in SIDES:
        if "hand" + side not in s_roles or "hand" + side not in t_roles:
            continue
        sd = _digits(source, source_rest, s_kids, s_roles["hand" + side])
        td = _digits(target, target_rest, t_kids, t_roles["hand" + side])
        for finger, t_chain in td.items():
            if finger in sd:
                _pair_chain(bones, source, target, sd[finger], t_chain)
    used = set()
    for t in list(bones):                   # one source joint plays one target joint (the first found)
        if bones[t] in used:
            del bones[t]
        used.add(bones.get(t))
    return BoneMap(bones, s_how, t_how, roles)


def _tip(skeleton, kids, roles, side):
    """The leaf at the end of a foot: the toe's end, else the foot's own end."""
    for role in ("toe", "foot"):
        j = roles.get(role + side)
        if j is not None:
            ends = [k for k in kids[j] if not kids[k]]
            if role == "toe" or not any(kids[k] for k in kids[j]):
                return ends[0] if len(ends) == 1 else None
    return None


# --- the transfer ------------------------------------------------------------------------------

def _plan(target, target_rest, bones):
    """How each target joint is placed, parents first: ``(j, kind, a, d, fraction)`` with kind
    "mapped", "between" (on the source's chain from mapped ancestor ``a`` to mapped descendant
    ``d`` at ``fraction`` of it), "rigid" (turning with its parent), "root" (above every mapped
    joint: follows ``d`` over the floor) or "still" (nothing mapped above or below)."""
    kids = _children(target)
    mapped = np.array([n in bones for n in target.names])
    plan = []
    for j in target.order.tolist():
        if mapped[j]:
            plan.append((j, "mapped", None, None, None))
            continue
        a = _mapped_ancestor(target, bones, j)
        d = _chain_descendant(target, target_rest, kids, mapped, j, a)
        if a is None:
            plan.append((j, "root" if d is not None else "still", None, d, None))
        elif d is None:
            plan.append((j, "rigid", a, None, None))
        else:
            path = _path(target, a, d)
            arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(target_rest[path], axis=0), axis=1))])
            fraction = arc[path.index(j)] / arc[-1] if arc[-1] > 0 else 0.0
            plan.append((j, "between", a, d, float(fraction)))
    return plan


def _chain_descendant(target, rest, kids, mapped, j, a):
    """The mapped joint below ``j`` that continues the chain from ``a`` through ``j`` (the
    nearest; among equally near, the one straightest ahead), or None."""
    best, frontier, depth = [], list(kids[j]), 1
    while frontier and not best:
        best = [k for k in frontier if mapped[k]]
        frontier = [c for k in frontier if not mapped[k] for c in kids[k]]
        depth += 1
    if not best:
        return None
    if len(best) == 1:
        return best[0]
    ahead = normalize(rest[j] - rest[a]) if a is not None else np.array([0.0, 0.0, 1.0])
    return max(best, key=lambda k: float(normalize(rest[k] - rest[j]) @ ahead))


def _along(points, fraction):
    """(F,3) the point at ``fraction`` of the arc length of polylines ``points`` (F,K,3)."""
    seg = np.linalg.norm(np.diff(points, axis=1), axis=-1)                   # (F,K-1)
    arc = np.concatenate([np.zeros((len(points), 1)), np.cumsum(seg, axis=1)], axis=1)
    at = fraction * arc[:, -1]
    out = points[:, 0].copy()
    for k in range(seg.shape[1]):
        inside = (at >= arc[:, k]) & (at <= arc[:, k + 1])
        t = np.where(seg[:, k] > 0, (at - arc[:, k]) / np.maximum(seg[:, k], 1e-300), 0.0)
        out = np.where(inside[:, None], points[:, k] + t[:, None] * (points[:, k + 1] - points[:, k]), out)
    return out


def _alignments(source, source_rest, target, target_rest, bones, heading=None):
    """(Jt,3,3) for each mapped target joint, the rotation taking its source joint's rest
    directions (towards the mapped joints below) onto its own: the source's rest swung onto the
    target's (a T-pose onto an A-pose). Where nothing mapped is below (a hand without fingers),
    its nearest mapped ancestor's: the rests' headings differ for every bone alike."""
    kids = _children(target)
    mapped = np.array([n in bones for n in target.names])
    # First the rests' headings (where each faces, about Z); each bone then swings the least from
    # there, so its twist does not depend on which way the rigs stand.
    heading = np.eye(3) if heading is None else heading
    out = np.tile(heading, (len(target), 1, 1))
    for t in target.order.tolist():
        if not mapped[t]:
            continue
        a = _mapped_ancestor(target, bones, t)
        if a is not None:
            out[t] = out[a]
        s = source.index(bones[target.names[t]])
        below = []
        for k in kids[t]:
            d = k if mapped[k] else _chain_descendant(target, target_rest, kids, mapped, k, t)
            if d is not None:
                below.append(d)
        u = np.array([source_rest[source.index(bones[target.names[d]])] - source_rest[s] for d in below]).reshape(-1, 3)
        v = np.array([target_rest[d] - target_rest[t] for d in below]).reshape(-1, 3)
        keep = (np.linalg.norm(u, axis=1) > 1e-9) & (np.linalg.norm(v, axis=1) > 1e-9)
        u, v = normalize(u[keep]), normalize(v[keep])
        if len(u) == 1 or (len(u) > 1 and np.linalg.matrix_rank(u, tol=1e-6) < 2):
            out[t] = swing(heading @ u[0], v[0]) @ heading
        elif len(u) > 1:
            from .skeleton.rotations import kabsch
            out[t] = kabsch(u, v)
    return out


def _heading(source_rest, target_rest, s_roles, t_roles):
    """(3,3) the turn about Z taking the source rest's facing onto the target's (their left hips'
    side: thigh.L from thigh.R); identity when either has no legs found (roles None)."""
    if s_roles is None or t_roles is None:
        return np.eye(3)
    u = source_rest[s_roles["thigh.L"]] - source_rest[s_roles["thigh.R"]]
    v = target_rest[t_roles["thigh.L"]] - target_rest[t_roles["thigh.R"]]
    u[2] = v[2] = 0.0
    if np.linalg.norm(u) < 1e-9 or np.linalg.norm(v) < 1e-9:
        return np.eye(3)
    return swing(u, v)


def _roles_or_none(skeleton, rest):
    """``find_roles``' anchors, or None for a rig without legs found (then placed without them)."""
    try:
        return find_roles(skeleton, rest)[0]
    except InputError:
        return None


def source_turns_from_positions(source, source_rest, source_motion):
    """(F,J,3,3) each source bone's turn from its rest, recovered from joint positions alone
    (``recover_rotations``: a bone's twist follows its parent's)."""
    motion = np.asarray(source_motion, float)
    rest = np.broadcast_to(np.asarray(source_rest, float), motion.shape)
    return recover_rotations(source, rest, motion, matrices=True)


def stands(skeleton, rest):
    """Whether a rest pose stands (Z up): the structure finds legs in it, the hips above the
    feet by a third of the pose's height. A BVH whose channels at zero lay every bone along X
    does not."""
    try:
        roles = _roles_from_structure(skeleton, rest)
    except InputError:
        return False
    feet = [roles["foot" + side] for side in SIDES]
    return float(rest[roles["hips"], 2] - rest[feet, 2].mean()) > np.ptp(rest[:, 2]) / 3.0


def reference_pose(source, source_rest, motion, source_turns=None):
    """``(reference (J,3), turns (F,J,3,3) from it)``: the rest and the turns from it when the rest
    stands (``stands``), else a standing pose taken from the clip (``standing_reference``) and the
    turns from it (a lying rest would make every limb's alignment a quarter turn, and its twist
    with it)."""
    source_rest = np.asarray(source_rest, float)
    motion = np.asarray(motion, float)
    if stands(source, source_rest):
        if source_turns is None:
            source_turns = source_turns_from_positions(source, source_rest, motion)
        return source_rest, np.asarray(source_turns, float)
    if source_turns is None:
        reference, _ = standing_reference(source, motion)
        return reference, source_turns_from_positions(source, reference, motion)
    source_turns = np.asarray(source_turns, float)
    reference, frames, yaw = _standing(source, motion)
    # Each joint's turn at its own reference frame, brought to the reference's heading.
    at = source_turns[frames, np.arange(len(source))]
    return reference, source_turns @ np.swapaxes(yaw[frames] @ at, -1, -2)[None]


def _facing(source, motion):
    """(F,3) where the clip's hips face each frame, about Z (the left hip's side, horizontal), or
    None when no legs are found."""
    try:
        roles = find_roles(source, motion[0])[0]
    except InputError:
        return None
    side = motion[:, roles["thigh.L"]] - motion[:, roles["thigh.R"]]
    side[:, 2] = 0.0
    if np.any(np.linalg.norm(side, axis=1) < 1e-9):
        return None
    return normalize(side)


def _about_z(u, v):
    """(...,3,3) the turns about Z taking horizontal unit directions ``u`` onto ``v`` (a half turn
    too, which ``swing`` leaves to any axis)."""
    u, v = np.broadcast_arrays(u, v)
    a = np.arctan2(u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0], np.einsum("...i,...i", u, v))
    c, s = np.cos(a), np.sin(a)
    out = np.zeros(a.shape + (3, 3))
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1], out[..., 2, 2] = c, -s, s, c, 1.0
    return out


def standing_reference(source, motion):
    """``(pose (J,3), frames (J,))``: a standing pose assembled from the clip, for a source whose
    rest does not stand. Each joint's turn comes from the frame ``frames[j]`` where what it
    carries looks most like the clip at rest: a leg (hip, knee, ankle, toes) from the frame its
    foot is flattest on the floor and stillest (ankle and toe at their standing heights), every
    other joint from the frame whose bones below it point nearest their mean direction over the
    clip (an arm mid-swing, the trunk's mean lean); each frame turned to the first frame's facing.
    The first frame alone (a walk's stride, one foot pitched) would tilt a foot for the whole
    clip: toes 4-11 cm above the floor over the shared walk's stance phases."""
    return _standing(source, motion)[:2]


def _standing(source, motion):
    """``standing_reference``'s ``(pose, frames)`` and each frame's turn about Z onto the first
    frame's facing (F,3,3) (identity where no legs are found)."""
    motion = np.asarray(motion, float)
    F, J = motion.shape[:2]
    frames = np.zeros(J, int)
    facing = _facing(source, motion)
    if facing is None or F == 1:
        return motion[0].copy(), frames, np.tile(np.eye(3), (F, 1, 1))
    yaw = _about_z(facing, facing[0])                                          # (F,3,3) to frame 0
    parents = source.parents
    kids = _children(source)
    roles = find_roles(source, motion[0])[0]
    height = max(float(np.ptp(motion[0, :, 2])), 1e-9)
    legs = set()
    floor = floor_height(source, motion, roles)
    for side in SIDES:
        chain = [roles[r + side] for r in ("thigh", "shin", "foot", "toe") if r + side in roles]
        feet = [roles[r + side] for r in ("foot", "toe") if r + side in roles]
        joints = set(chain) | set(source.descendants(roles["thigh" + side]))
        flat = np.abs(motion[:, feet, 2] - floor - standing_height(motion, feet, floor)).sum(axis=1)
        still = np.zeros(F)
        still[1:] = np.linalg.norm(np.diff(motion[:, feet[0], :2], axis=0), axis=1)
        still[0] = still[1]
        k = int(np.argmin((flat + still) / height))
        for j in joints:
            frames[j] = k
        legs |= joints
    for j in range(J):
        if j in legs or not kids[j]:
            continue
        d = normalize(motion[:, kids[j]] - motion[:, [j]])                       # (F,K,3)
        d = np.einsum("fab,fkb->fka", yaw, d)
        mean = normalize(d.mean(axis=0))
        frames[j] = int(np.argmin(np.sum((d - mean) ** 2, axis=(1, 2))))
    pose = np.empty((J, 3))
    for j in source.order.tolist():
        p = int(parents[j])
        if p < 0:
            pose[j] = motion[0, j]
        else:
            k = frames[p]
            pose[j] = pose[p] + yaw[k] @ (motion[k, j] - motion[k, p])
    return pose, frames, yaw


def floor_height(skeleton, motion, roles):
    """The floor under a clip: the lowest its feet reach, the ankles, the toes and every joint
    below them; where a toe joint is found, not the ends of its chains. An end is where a leaf
    bone stops, and beyond a toe nothing says where that is: Blender's BVH import gives a leaf toe
    bone its parent's length, and the shared walk's 17 cm toes point 15 cm into the floor
    mid-swing (a fifth of the frames). A foot without a toe joint (the in-place clip's
    ``foot.L_end``) has only its end for the sole."""
    has_child = np.zeros(len(skeleton), bool)
    has_child[skeleton.parents[skeleton.parents >= 0]] = True
    feet = []
    for side in SIDES:
        toe = "toe" + side in roles
        for r in ("foot", "toe"):
            if r + side in roles:
                j = roles[r + side]
                feet += [j] + [k for k in skeleton.descendants(j) if has_child[k] or not toe]
    return float(np.min(np.asarray(motion)[:, feet, 2]))


def transfer(source, source_rest, source_motion, target, target_rest, bone_map, source_turns=None, floor=None,
             legs=None, root_on_floor=True, stride=1.0, fps=30.0):
    """The source motion on the target skeleton, with the source's proportions.

    Returns ``(positions (F,Jt,3), turns (F,Jt,3,3))``: every mapped target joint at its source
    joint; the rest placed as the module docstring says; ``turns[f, j]`` the world rotation of
    target bone ``j`` from its rest (its direction towards its one child met exactly).
    ``source_turns`` (F,Js,3,3): the source bones' turns from their rest, twist included (a
    Blender armature's); default recovered from the positions. ``floor``: the source floor's
    height (an unmapped root stands on it); default the lowest the feet reach. ``legs``: the
    legs' length ratio, target to source: the legs then take the target's lengths and the body
    rides higher or lower on them (``_fit_legs``); None keeps the source's proportions throughout.
    ``stride``: with ``legs``, the hips' path and the footsteps spread by it about the clip's start
    (the body's shape unchanged; a planted foot stays planted: ``_footstep_shift``, at ``fps``).
    ``root_on_floor``: an unmapped root above the hips (Unreal's ``root``) stays on the floor under
    them (root motion); False holds it at its rest offset from the hips (a rig whose hips hang
    from its root's tail, connected: their distance cannot change).
    """
    source_rest, target_rest = np.asarray(source_rest, float), np.asarray(target_rest, float)
    motion = np.asarray(source_motion, float)
    F = len(motion)
    bones = bone_map.bones
    bone_map.check(source, target)
    if source.names == target.names and np.array_equal(source.parents, target.parents) and \
            np.allclose(source_rest, target_rest, rtol=0.0, atol=1e-9 * max(1.0, float(np.ptp(source_rest)))):
        # The same skeleton: the motion as it is (a retarget onto a copy of the source rig).
        return motion.copy(), reference_pose(source, source_rest, motion, source_turns)[1]
    source_rest, source_turns = reference_pose(source, source_rest, motion, source_turns)
    s_roles, t_roles = _roles_or_none(source, source_rest), _roles_or_none(target, target_rest)
    align = _alignments(source, source_rest, target, target_rest, bones, _heading(source_rest, target_rest,
                                                                                  s_roles, t_roles))
    if floor is None:
        floor = float(np.min(motion[..., 2]))
    Jt = len(target)
    pos = np.zeros((F, Jt, 3))
    turns = np.tile(np.eye(3), (F, Jt, 1, 1))
    ground = target_floor(target, target_rest, t_roles or {})
    plan = _plan(target, target_rest, bones)
    for j, kind, a, d, fraction in plan:
        p = int(target.parents[j])
        if kind == "mapped":
            s = source.index(bones[target.names[j]])
            pos[:, j] = motion[:, s]
            turns[:, j] = source_turns[:, s] @ align[j].T
        elif kind == "between":
            sa, sd = (source.index(bones[target.names[k]]) for k in (a, d))
            chain = _path(source, sa, sd) or [sa, sd]
            pos[:, j] = _along(motion[:, chain], fraction)
            turns[:, j] = turns[:, a]
        elif kind == "rigid":
            pos[:, j] = pos[:, p] + np.einsum("fij,j->fi", turns[:, p], target_rest[j] - target_rest[p])
            turns[:, j] = turns[:, p]
        elif kind == "root":
            sd = source.index(bones[target.names[d]])
            turns[:, j] = _yaw(source_turns[:, sd] @ align[d].T)
            if root_on_floor:
                pos[:, j, :2] = motion[:, sd, :2] + (target_rest[j, :2] - target_rest[d, :2])
                pos[:, j, 2] = floor + (target_rest[j, 2] - ground)
            else:                                    # held at its rest offset from the hips, turning with them
                pos[:, j] = motion[:, sd] + np.einsum("fij,j->fi", turns[:, j], target_rest[j] - target_rest[d])
        else:
            pos[:, j] = target_rest[j]
    if s_roles is not None and t_roles is not None:
        _stand_feet(source, source_rest, motion, floor, source_turns, target, target_rest, bones, pos, turns, plan,
                    s_roles, t_roles)
        if legs is not None:
            _fit_legs(target, target_rest, pos, turns, plan, legs, t_roles, stride, fps)
    # Each bone with one child points at it: the direction the positions give (a chain with
    # more or fewer joints than the source's bends where the source's does).
    kids = _children(target)
    for j in range(Jt):
        if len(kids[j]) == 1:
            k = kids[j][0]
            rest_dir = target_rest[k] - target_rest[j]
            now = pos[:, k] - pos[:, j]
            ok = (np.linalg.norm(rest_dir) > 1e-9) & (np.linalg.norm(now, axis=-1) > 1e-9)
            if np.any(ok):
                carried = np.einsum("fij,j->fi", turns[:, j], rest_dir)
                fix = swing(carried, now)
                turns[ok, j] = fix[ok] @ turns[ok, j]
    return pos, turns


def _footstep_shift(feet, ankle, centre, stride, fps, height):
    """(F,2) how far a foot moves to land ``stride`` times as far from ``centre``: one shift per
    footstep (the frames where its slowest joint of ``feet`` (F,K,2) moves under a fifth of the
    body ``height`` a second, three or more in a row), from where its ``ankle`` (F,2) stands on
    average, eased from one footstep to the next over the swing; a still foot then stays still."""
    F = len(feet)
    speed = np.full(F, np.inf)
    if F > 1:
        v = np.linalg.norm(np.diff(feet, axis=0), axis=-1).min(axis=1) * fps
        speed[1:] = v
        speed[0] = v[0]
    still = speed < 0.2 * height
    steps, f = [], 0
    while f < F:
        if still[f]:
            g = f
            while g + 1 < F and still[g + 1]:
                g += 1
            if g - f + 1 >= 3:
                steps.append((f, g))
            f = g + 1
        else:
            f += 1
    if not steps:
        return (stride - 1.0) * (ankle - centre)
    shifts = [(stride - 1.0) * (ankle[a:b + 1].mean(axis=0) - centre) for a, b in steps]
    out = np.empty((F, 2))
    out[:steps[0][0]] = shifts[0]
    for k, (a, b) in enumerate(steps):
        out[a:b + 1] = shifts[k]
        end = steps[k + 1][0] if k + 1 < len(steps) else F
        if k + 1 < len(steps):
            t = (np.arange(b + 1, end) - b) / max(end - b, 1)
            w = (0.5 - 0.5 * np.cos(np.pi * t))[:, None]
            out[b + 1:end] = (1.0 - w) * shifts[k] + w * shifts[k + 1]
        else:
            out[b + 1:] = shifts[k]
    return out


def _fit_legs(target, target_rest, pos, turns, plan, ratio, roles, stride=1.0, fps=30.0):
    """The legs at the target's lengths, the body above them raised or lowered to fit: by the
    legs' height (hip joint over ankle) times ``ratio`` - 1 (the legs' ratio; everything above
    the hips moves with them), each knee solved between the hip and the ankle with the target's
    thigh and shin (in the plane the source's knee bends in), the joints between on those bones, the thigh's and
    shin's turns swung onto them and what hangs rigidly from them carried along. Without it a
    leg much longer than the source's pushes its foot off the ground (the descriptors hold the
    hips where the source's were) and a much shorter one cannot reach it. In place."""
    from .skeleton.joints import two_bone
    hips = roles["hips"]
    kids = _children(target)
    kind = {j: k for j, k, _, _, _ in plan}
    height = float(np.ptp(target_rest[:, 2])) or 1.0
    legs, fixed = [], set()
    for side in SIDES:
        thigh, knee, ankle = (roles[r + side] for r in ("thigh", "shin", "foot"))
        upper, lower = _path(target, thigh, knee), _path(target, knee, ankle)
        if upper is None or lower is None:
            return
        legs.append((thigh, knee, ankle, upper, lower))
        fixed.update(upper[1:] + lower[1:] + target.descendants(ankle))
    moving = np.array([j not in fixed for j in range(len(target))])
    if stride != 1.0:
        # The hips' path spread by ``stride`` about where they start, the body carried along
        # unchanged; each foot put down ``stride`` times as far out (a still foot stays still).
        centre = pos[0, hips, :2].copy()
        body = (stride - 1.0) * (pos[:, hips, :2] - centre)
        pos[:, moving, :2] += body[:, None]
        for _, knee, ankle, upper, lower in legs:
            foot = [ankle] + target.descendants(ankle)
            shift = _footstep_shift(pos[:, foot, :2], pos[:, ankle, :2], centre, stride, fps, height)
            pos[:, foot, :2] += shift[:, None]
            # The knee (the bend plane's pole) half way between: left where it was, metres behind
            # a spread walk's hips, it turned the knee backwards (thigh cosine -0.04).
            pos[:, upper[1:] + lower[1:-1], :2] += (0.5 * (body + shift))[:, None]
    # The legs' height (hip joint over ankle, both legs' mean) grows with them, and no more than
    # lets each leg on the ground reach its foot (a shorter character crouches a little to reach
    # the source's footsteps); the feet stand. A foot in the air gives way instead, the more the
    # higher it is (a leg raised high out of a shorter leg's reach crouched the body 0.5 m).
    dz = (ratio - 1.0) * np.mean([pos[:, thigh, 2] - pos[:, ankle, 2] for thigh, _, ankle, _, _ in legs], axis=0)
    for thigh, knee, ankle, _, _ in legs:
        reach = (np.linalg.norm(target_rest[knee] - target_rest[thigh])
                 + np.linalg.norm(target_rest[ankle] - target_rest[knee])) * (1.0 - REACH_MARGIN)
        across = np.linalg.norm(pos[:, thigh, :2] - pos[:, ankle, :2], axis=-1)
        up = np.sqrt(np.maximum(reach ** 2 - across ** 2, 0.0))
        foot = [ankle] + target.descendants(ankle)
        lift = (pos[:, foot, 2] - pos[:, foot, 2].min(axis=0)).min(axis=1)     # on its toes it stands
        slack = LIFT_SLACK * np.maximum(lift - LIFT_GROUNDED * height, 0.0)
        dz = np.minimum(dz, up - (pos[:, thigh, 2] - pos[:, ankle, 2]) + slack)
    pos[:, moving, 2] += dz[:, None]
    for thigh, knee, ankle, upper, lower in legs:
        l1 = np.linalg.norm(target_rest[knee] - target_rest[thigh])
        l2 = np.linalg.norm(target_rest[ankle] - target_rest[knee])
        pos[:, knee], end = two_bone(pos[:, thigh], pos[:, knee], pos[:, ankle], l1, l2)
        # An ankle out of the leg's reach comes along the leg (the foot with it): the lengths hold.
        shift = end - pos[:, ankle]
        for j in [ankle] + target.descendants(ankle):
            pos[:, j] += shift
        for chain, (a, b) in ((upper, (thigh, knee)), (lower, (knee, ankle))):
            arc = _arc(target_rest, chain)
            for k, j in enumerate(chain[1:-1], 1):
                t = arc[k] / arc[-1] if arc[-1] > 0 else 0.0
                pos[:, j] = pos[:, a] + t * (pos[:, b] - pos[:, a])
            for j in chain[:-1]:
                nxt = chain[chain.index(j) + 1]
                rest_dir = target_rest[nxt] - target_rest[j]
                if np.linalg.norm(rest_dir) > 1e-9:
                    turns[:, j] = swing(np.einsum("fij,j->fi", turns[:, j], rest_dir), pos[:, nxt] - pos[:, j]) \
                        @ turns[:, j]
                for k in kids[j]:                        # rigid helpers off the leg (twist leaves)
                    if kind[k] == "rigid" and k not in chain:
                        for m in [k] + target.descendants(k):
                            p = int(target.parents[m])
                            pos[:, m] = pos[:, p] + np.einsum("fij,j->fi", turns[:, p],
                                                              target_rest[m] - target_rest[p])
                            turns[:, m] = turns[:, p]


def target_floor(target, target_rest, roles):
    """The floor under a rest pose: its feet's lowest joint (not a root bone that sits elsewhere)."""
    feet = [j for side in SIDES if "foot" + side in roles
            for j in [roles["foot" + side]] + target.descendants(roles["foot" + side])]
    return float(target_rest[feet, 2].min()) if feet else float(target_rest[:, 2].min())


def standing_height(motion, joints, floor):
    """(K,) how high ``joints`` stand above the floor at ``floor`` when a foot is down: the 5th
    percentile of their heights over the clip (a reference pose may have a foot lifted)."""
    return np.percentile(np.asarray(motion)[:, joints, 2] - floor, 5, axis=0)


def _stand_feet(source, source_rest, motion, floor, source_turns, target, target_rest, bones, pos, turns, plan,
                s_roles, t_roles):
    """Each target foot on the ground by its own sole: the ankle where the source's is, raised or
    lowered by how much higher the target's ankle stands above its floor than the source's
    (``standing_height``); the
    foot's bones turned from the target's standing rest as the source's turn from its standing
    reference (not swung onto the source's directions: a foot flat on the floor in both stays
    flat, whatever the angle of its bone), with the target's own lengths, so a longer or shorter
    foot keeps its shape instead of being stretched between the source's ankle and toe tip. In
    place on ``pos`` and ``turns``."""
    source_leaves, target_leaves = set(source.leaves.tolist()), set(target.leaves.tolist())
    kind = {j: k for j, k, _, _, _ in plan}
    t_floor = target_floor(target, target_rest, t_roles)
    for side in SIDES:
        s_ankle, t_ankle = s_roles.get("foot" + side), t_roles.get("foot" + side)
        if s_ankle is None or t_ankle is None or bones.get(target.names[t_ankle]) != source.names[s_ankle]:
            continue
        lift = (target_rest[t_ankle, 2] - t_floor) - standing_height(motion, [s_ankle], floor)[0]
        pos[:, t_ankle, 2] += lift
        # The feet's headings differ by the source reference's heading: turned about Z alone.
        s_tip = [j for j in [s_ankle] + source.descendants(s_ankle) if j in source_leaves]
        t_tip = [j for j in [t_ankle] + target.descendants(t_ankle) if j in target_leaves]
        u = source_rest[s_tip].mean(axis=0) - source_rest[s_ankle]
        v = target_rest[t_tip].mean(axis=0) - target_rest[t_ankle]
        u[2] = v[2] = 0.0
        heading = swing(u, v) if np.linalg.norm(u) > 1e-9 and np.linalg.norm(v) > 1e-9 else np.eye(3)
        turns[:, t_ankle] = source_turns[:, s_ankle] @ heading.T
        for j in target.descendants(t_ankle):
            p = int(target.parents[j])
            pos[:, j] = pos[:, p] + np.einsum("fij,j->fi", turns[:, p], target_rest[j] - target_rest[p])
            turns[:, j] = source_turns[:, source.index(bones[target.names[j]])] @ heading.T \
                if kind[j] == "mapped" else turns[:, p]
        # On its toes (the source's heel up, its toe down) a foot turns about the toe: a foot of
        # another shape (the target's ankle higher, its toe nearer) turned as much about its ankle
        # would lift the toe off the floor or push it in. The foot is raised or lowered until its
        # toe stands as high as the source's, by how far the heel is up.
        s_toe, t_toe = s_roles.get("toe" + side), t_roles.get("toe" + side)
        if s_toe is None or t_toe is None or bones.get(target.names[t_toe]) != source.names[s_toe]:
            continue
        stand = standing_height(motion, [s_ankle, s_toe], floor)
        heel = motion[:, s_ankle, 2] - floor - stand[0]
        toe = motion[:, s_toe, 2] - floor - stand[1]
        w = np.clip((heel - toe) / (0.01 * max(float(np.ptp(source_rest[:, 2])), 1e-9)), 0.0, 1.0)
        want = floor + toe + (target_rest[t_toe, 2] - t_floor)
        dz = w * (want - pos[:, t_toe, 2])
        for j in [t_ankle] + target.descendants(t_ankle):
            pos[:, j, 2] += dz


def _yaw(turn):
    """(F,3,3) the turn about Z alone of rotations (F,3,3) (where their X axis heads)."""
    x = turn[:, :, 0].copy()
    x[:, 2] = 0.0
    angle = np.arctan2(x[:, 1], x[:, 0])
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros((len(turn), 3, 3))
    out[:, 0, 0], out[:, 0, 1], out[:, 1, 0], out[:, 1, 1], out[:, 2, 2] = c, -s, s, c, 1.0
    return out


# --- the retarget ------------------------------------------------------------------------------

@dataclass
class RetargetResult:
    """What ``retarget`` gives: ``positions`` (F,Jt,3) the target's joints, adapted to its own
    bone lengths; ``transferred`` (F,Jt,3) and ``turns`` (F,Jt,3,3) from ``transfer`` (the
    source's proportions; a Blender bake writes the bones' rotations from ``turns`` swung onto
    ``positions``); ``bone_map``; ``floor``: the generated floor (None with an environment);
    ``stride``: the factor the footsteps were spread by; ``adapted``: the ``AdaptResult``."""
    positions: np.ndarray
    transferred: np.ndarray
    turns: np.ndarray
    bone_map: BoneMap
    floor: object
    stride: float
    adapted: object
    binding: object


def leg_length(skeleton, rest, roles):
    """Mean over the sides of hip-to-knee plus knee-to-ankle in the rest pose."""
    out = []
    for side in SIDES:
        a, b, c = (roles[r + side] for r in ("thigh", "shin", "foot"))
        out.append(np.linalg.norm(rest[b] - rest[a]) + np.linalg.norm(rest[c] - rest[b]))
    return float(np.mean(out))


def _rest_lengths(target, target_rest):
    lengths = np.full(len(target), np.nan)
    child = np.flatnonzero(target.parents >= 0)
    lengths[child] = np.linalg.norm(target_rest[child] - target_rest[target.parents[child]], axis=-1)
    return lengths


def floor_under(motion, height, margin):
    """A flat TriMesh at ``height`` under every joint of ``motion`` (F,J,3), ``margin`` around."""
    lo = motion[..., :2].reshape(-1, 2).min(axis=0) - margin
    hi = motion[..., :2].reshape(-1, 2).max(axis=0) + margin
    n = np.maximum(np.ceil((hi - lo) / margin).astype(int), 1)
    xs, ys = np.linspace(lo[0], hi[0], n[0] + 1), np.linspace(lo[1], hi[1], n[1] + 1)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    vertices = np.stack([X, Y, np.full_like(X, height)], axis=-1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(n[0]), np.arange(n[1]), indexing="ij")
    v = (i * (n[1] + 1) + j).ravel()
    triangles = np.concatenate([np.stack([v, v + n[1] + 1, v + n[1] + 2], 1), np.stack([v, v + n[1] + 2, v + 1], 1)])
    return TriMesh(vertices, triangles)


def retarget(source, source_rest, source_motion, target, target_rest, mesh=None, bone_map=None, *, edited=None,
             stride="auto", source_turns=None, plant=True, fps=30.0, root_on_floor=True, progress=None,
             source_name="the source", target_name="the target", **adapt_options):
    """The source clip on the target skeleton, its contacts with ``mesh`` kept.

    source, target : Skeleton; ``source_rest`` (Js,3), ``target_rest`` (Jt,3) their rest joints and
        ``source_motion`` (F,Js,3) the clip, world space, Z up, one length unit (the target placed
        where it will play: its rest's feet on its floor). A source rest that does not stand
        (``stands``) is replaced by the clip's first frame (``reference_pose``).
    mesh : the environment the source clip moves in (TriMesh), or None: a flat floor under the
        source's feet.
    edited : the environment as the target finds it (``mesh``'s triangles, moved vertices: a
        sculpted floor), default ``mesh`` as it is.
    bone_map : ``BoneMap`` (``map_bones``'s by default).
    stride : "auto" (scaled by the legs' ratio without an environment, kept with one), "scaled"
        or "kept" (the footsteps stay where the source's are: contacts with an environment).
    source_turns : (F,Js,3,3) the source bones' turns from their rest, twist included (default:
        recovered from the positions, twist following the parents).
    root_on_floor : as ``transfer``'s.
    plant : where the bone lengths change, hold each foot still over the source's stance phases
        (found at ``fps``): the descriptors alone let a lengthened leg's foot slide (measured in
        ``benchmarks/bench_retarget.py``).
    adapt_options : passed to ``adapt`` (solver, solver_options, ...).

    Returns ``RetargetResult``. Raises InputError for a skeleton without legs, a map naming a
    missing bone or a source bone twice, or an unknown stride.
    """
    from .adaptation import adapt
    from .descriptors import bind
    if stride not in ("auto", "scaled", "kept"):
        raise InputError(f"stride must be auto, scaled or kept, not '{stride}'")
    source_rest, target_rest = np.asarray(source_rest, float), np.asarray(target_rest, float)
    motion = np.asarray(source_motion, float)
    if motion.ndim != 3 or motion.shape[1:] != (len(source), 3) or source_rest.shape != (len(source), 3):
        raise InputError(f"the source motion must be (frames, {len(source)}, 3) with a ({len(source)}, 3) rest; "
                         f"got {motion.shape} and {source_rest.shape}")
    if target_rest.shape != (len(target), 3):
        raise InputError(f"the target rest must be ({len(target)}, 3), got {target_rest.shape}")
    source_rest, source_turns = reference_pose(source, source_rest, motion, source_turns)
    if bone_map is None:
        bone_map = map_bones(source, source_rest, target, target_rest,
                             source_name=source_name, target_name=target_name)
    bone_map.check(source, target)
    s_roles = find_roles(source, source_rest, None, source_name)[0]
    t_roles = find_roles(target, target_rest, None, target_name)[0]
    floor_z = floor_height(source, motion, s_roles)
    ratio = leg_length(target, target_rest, t_roles) / leg_length(source, source_rest, s_roles)
    scaled = stride == "scaled" or (stride == "auto" and mesh is None)
    positions, turns = transfer(source, source_rest, motion, target, target_rest, bone_map, source_turns, floor_z,
                                legs=ratio, root_on_floor=root_on_floor, stride=ratio if scaled else 1.0,
                                fps=fps)
    from .descriptors import measure_body_height
    floor = None
    if mesh is None:
        height = measure_body_height(motion)
        floor = floor_under(np.concatenate([motion, positions], axis=1), floor_z, 0.5 * height)
        mesh = floor
    if edited is not None and floor is not None:
        raise InputError("an edited environment needs the environment the source moved in (mesh)")
    now = mesh if edited is None else edited
    # The body is the hips and what hangs from them: a root bone above them (Unreal's, on the
    # floor) is no joint of the body; the descriptors would pull it up a sculpted floor and the
    # body with it. It is placed again from the adapted hips after.
    body, sub = _body_of(target, t_roles["hips"])
    binding = bind(sub, positions[:, body], mesh, progress=progress)
    lengths = _rest_lengths(target, target_rest)[body]
    # A bone the transfer placed with the source's proportions takes the target's length; an
    # identical skeleton's unedited retarget keeps the source untouched.
    same = np.isclose(lengths, sub.bone_lengths(positions[:1, body])[0], rtol=1e-9, atol=1e-12)
    lengths[same] = np.nan
    lengths = None if np.all(np.isnan(lengths)) else lengths
    if adapt_options.get("solver", "descriptors") == "descriptors":
        # The bound motion has the source's proportions: a trunk shorter than the source's is the
        # target's, not a duck (``Rig``'s ``trunk_from_lengths``).
        adapt_options["solver_options"] = {"trunk_from_lengths": True, **(adapt_options.get("solver_options") or {})}
    adapted = adapt(binding, now, bone_lengths=lengths, progress=progress, **adapt_options)
    final = adapted.positions
    feet = {r: sub.names.index(target.names[j]) for r, j in t_roles.items() if target.names[j] in sub.names}
    if plant and (lengths is not None or now is not mesh):
        pins = _stance_pins(binding, positions[:, body], adapted.positions, feet, fps)
        if pins is not None:
            adapted = adapt(binding, now, bone_lengths=lengths, pins=pins, progress=progress, **adapt_options)
            # A pin the leg cannot reach leaves its bones stretched: the bones as the keys will
            # play them (each from its parent, along the adapted direction, its own length).
            final = played(sub, adapted.positions, sub.bone_lengths(positions[:, body]), lengths)
    out = positions.copy()
    out[:, body] = final
    outside = np.setdiff1d(np.arange(len(target)), body)
    if outside.size:                         # moved as the hips moved (on the floor: horizontally)
        hips = t_roles["hips"]
        axes = slice(0, 2) if root_on_floor else slice(0, 3)
        out[:, outside, axes] += (final[:, body.tolist().index(hips), axes] - positions[:, hips, axes])[:, None]
    return RetargetResult(out, positions, turns, bone_map, floor, ratio if scaled else 1.0, adapted, binding)


def _body_of(skeleton, hips):
    """``(joints (K,), Skeleton)``: the hips and every joint below them, as a skeleton of its own
    (the hips its root); all joints when the hips are the skeleton's root."""
    body = np.array(sorted([hips] + skeleton.descendants(hips)))
    if len(body) == len(skeleton):
        return np.arange(len(skeleton)), skeleton
    where = {int(j): k for k, j in enumerate(body)}
    parents = [where.get(int(skeleton.parents[j]), -1) if j != hips else -1 for j in body]
    return body, Skeleton([skeleton.names[j] for j in body], np.array(parents))


def played(skeleton, positions, source_lengths, lengths=None):
    """(F,J,3) ``positions`` with every bone its length (``lengths`` (J,) where given and not NaN,
    with the per-frame variation of ``source_lengths`` (F,J) as ``adapt`` keeps it; else the
    source's): each joint from its parent along the direction ``positions`` give, parents first."""
    F = len(positions)
    want = np.array(source_lengths, float)
    if lengths is not None:
        mean = want.mean(axis=0)
        set_ = np.isfinite(lengths) & (mean > 0)
        want[:, set_] *= (lengths[set_] / mean[set_])[None]
    out = np.array(positions, float)
    for j in skeleton.order.tolist():
        p = int(skeleton.parents[j])
        if p < 0:
            continue
        d = positions[:, j] - positions[:, p]
        n = np.linalg.norm(d, axis=-1, keepdims=True)
        out[:, j] = out[:, p] + np.where(n > 1e-12, d / np.maximum(n, 1e-12), 0.0) * want[:, j:j + 1]
    return out


def _stance_pins(binding, transferred, positions, roles, fps):
    """(F,J,3) pins (NaN where free) for each foot joint (ankle, toe) with source stance phases
    (``contacts.detect_contacts`` on the transferred motion): the source's own trajectory moved
    by where a first adapt put the foot over each phase on average (the footstep's offset), the
    offset eased from one footstep to the next over the swing. A stance then slides no more than
    the source's, and the swing between two footsteps carries the source's path."""
    from .contacts.repositioning import detect_contacts
    feet = [binding.skeleton.names[roles[r + side]] for side in SIDES for r in ("foot", "toe") if r + side in roles]
    phases = [p for p in detect_contacts(binding, effectors=feet, fps=fps) if p.name in feet]
    if not phases:
        return None
    F, J, _ = positions.shape
    pins = np.full((F, J, 3), np.nan)
    frames = np.arange(F)
    # A foot on its toes moves as one: its ankle, free there, takes the toe's footstep (its own
    # offset, held from its last flat stance, left it where the foot could not reach the toe's
    # pin on a bump's flank: the toe 2-3 cm up at toe-off).
    toe_of = {roles["foot" + side]: roles["toe" + side] for side in SIDES if "foot" + side in roles and "toe" + side in roles}
    for j in sorted({p.effector for p in phases}):
        own = [(p.start, p.end, j) for p in phases if p.effector == j]
        t = toe_of.get(j)
        if t is not None:
            down = np.zeros(F, bool)
            for p in phases:
                if p.effector == j:
                    down[p.start:p.end + 1] = True
            for p in phases:
                if p.effector == t and not down[p.start:p.end + 1].any():
                    own.append((p.start, p.end, t))
        own.sort()
        offsets = np.array([(positions[a:b + 1, k] - transferred[a:b + 1, k]).mean(axis=0) for a, b, k in own])
        own = [(a, b) for a, b, _ in own]
        offset = np.empty((F, 3))
        offset[:] = offsets[0]
        for k, (a, b) in enumerate(own):
            offset[a:b + 1] = offsets[k]
            if k + 1 < len(own):
                c = own[k + 1][0]
                t = (frames[b + 1:c] - b) / max(c - b, 1)
                w = 0.5 - 0.5 * np.cos(np.pi * t)
                offset[b + 1:c] = (1.0 - w)[:, None] * offsets[k] + w[:, None] * offsets[k + 1]
            else:
                offset[b + 1:] = offsets[k]
        pins[:, j] = transferred[:, j] + offset
    return pins


def naive(source, source_rest, source_motion, target, target_rest, bone_map, source_turns=None):
    """The simple retarget, for comparison: each target bone turned as its source bone
    (``transfer``'s turns), the target's own bone lengths, the hips moved as the source's scaled
    by the legs' ratio about the floor under the clip's start. (F,Jt,3)."""
    source_rest, target_rest = np.asarray(source_rest, float), np.asarray(target_rest, float)
    motion = np.asarray(source_motion, float)
    source_rest, source_turns = reference_pose(source, source_rest, motion, source_turns)
    s_roles = find_roles(source, source_rest)[0]
    t_roles = find_roles(target, target_rest)[0]
    floor_z = floor_height(source, motion, s_roles)
    _, turns = transfer(source, source_rest, motion, target, target_rest, bone_map, source_turns, floor_z)
    ratio = leg_length(target, target_rest, t_roles) / leg_length(source, source_rest, s_roles)
    hs, ht = s_roles["hips"], t_roles["hips"]
    origin = np.array([motion[0, hs, 0], motion[0, hs, 1], floor_z])
    out = np.zeros((len(motion), len(target), 3))
    out[:, ht] = origin + ratio * (motion[:, hs] - origin)
    above = _ancestors(target, ht)
    for j in above:                                       # a root above the hips stays on the floor under them
        out[:, j, :2] = out[:, ht, :2] + (target_rest[j, :2] - target_rest[ht, :2])
        out[:, j, 2] = floor_z + target_rest[j, 2] - target_floor(target, target_rest, t_roles)
    for j in target.order.tolist():
        p = int(target.parents[j])
        if j != ht and j not in above:
            out[:, j] = out[:, p] + np.einsum("fij,j->fi", turns[:, p], target_rest[j] - target_rest[p]) \
                if p >= 0 else target_rest[j]
    return out


# --- measures ----------------------------------------------------------------------------------

def ground_under(mesh, points):
    """(N,) the height of ``mesh`` straight under (or over) each point (N,3); NaN off the mesh."""
    from .geometry.rays import RayCaster
    points = np.asarray(points, float).reshape(-1, 3)
    caster = RayCaster(mesh.vertices if mesh.vertices.ndim == 2 else mesh.vertices[0], mesh.triangles)
    top = float(caster.hi[2]) + 1.0
    origins = np.column_stack([points[:, :2], np.full(len(points), top)])
    dist = caster.cast(origins, np.tile([0.0, 0.0, -1.0], (len(points), 1)))[0]
    return np.where(np.isfinite(dist), top - dist, np.nan)


def measure(source, source_rest, source_motion, target, target_rest, positions, bone_map, *, fps=30.0,
            ground=None, ground_now=None, tolerance=0.02, phases=None):
    """How well ``positions`` (F,Jt,3) carry the source clip (the report of a retarget).

    ground, ground_now : the source's and the target's ground (TriMesh, or a height; default the
        floor under the source's feet for both).
    phases : the source feet's stance samples (F,K) bool for the K foot joints of ``feet``;
        default: ``contacts.detect_contacts`` on the source bound to a flat floor.

    Returns a dict: ``pose_similarity`` (mean cosine between mapped bones' directions, source vs
    target), ``planted_within`` (fraction of stance samples whose height above the ground changed
    by less than ``tolerance`` from the source's, each joint's height counted from where it stands:
    ``standing_height`` for the source, the rest for the target), ``stance_slide`` and
    ``source_stance_slide`` (mean horizontal speed of those
    samples, units per second), ``stance_samples``.
    """
    source_rest, target_rest = np.asarray(source_rest, float), np.asarray(target_rest, float)
    motion, positions = np.asarray(source_motion, float), np.asarray(positions, float)
    source_rest = reference_pose(source, source_rest, motion)[0]
    s_roles = find_roles(source, source_rest)[0]
    t_roles = find_roles(target, target_rest)[0]
    # Pose: bones whose both ends are mapped.
    pairs = []
    for t_name, s_name in bone_map.bones.items():
        t = target.index(t_name)
        p = int(target.parents[t])
        if p >= 0 and target.names[p] in bone_map.bones:
            pairs.append((p, t, source.index(bone_map.bones[target.names[p]]), source.index(s_name)))
    p_, t_, ps, ss = (np.array(x) for x in zip(*pairs))
    a, b = normalize(positions[:, t_] - positions[:, p_]), normalize(motion[:, ss] - motion[:, ps])
    ok = (np.linalg.norm(positions[:, t_] - positions[:, p_], axis=-1) > 1e-9) & \
         (np.linalg.norm(motion[:, ss] - motion[:, ps], axis=-1) > 1e-9)
    similarity = float(np.einsum("fki,fki->fk", a, b)[ok].mean())
    # Feet.
    sf = [s_roles[r + side] for side in SIDES for r in ("foot", "toe") if r + side in s_roles and r + side in t_roles]
    tf = [t_roles[r + side] for side in SIDES for r in ("foot", "toe") if r + side in s_roles and r + side in t_roles]
    floor_z = floor_height(source, motion, s_roles)
    ground = floor_z if ground is None else ground
    ground_now = ground if ground_now is None else ground_now

    def above(mesh, points):
        if isinstance(mesh, TriMesh):
            return points[..., 2] - ground_under(mesh, points.reshape(-1, 3)).reshape(points.shape[:-1])
        return points[..., 2] - float(mesh)
    if phases is None:
        from .contacts.repositioning import detect_contacts
        from .descriptors import bind
        H = float(np.ptp(source_rest[:, 2]))
        flat = floor_under(motion, floor_z, 0.5 * H)
        names = [source.names[j] for j in sf]
        phases = np.zeros((len(motion), len(sf)), bool)
        for ph in detect_contacts(bind(source, motion, flat), effectors=names, fps=fps):
            if ph.name in names:
                phases[ph.start:ph.end + 1, names.index(ph.name)] = True
    s_h = above(ground, motion[:, sf]) - standing_height(motion, sf, floor_z)
    t_h = above(ground_now, positions[:, tf]) - (target_rest[tf, 2] - target_floor(target, target_rest, t_roles))
    err = np.abs(t_h - s_h)[phases]
    speed_t = np.linalg.norm(np.diff(positions[:, tf, :2], axis=0), axis=-1) * fps
    speed_s = np.linalg.norm(np.diff(motion[:, sf, :2], axis=0), axis=-1) * fps
    moving = phases[1:] & phases[:-1]
    return dict(pose_similarity=similarity,
                planted_within=float(np.mean(err < tolerance)) if err.size else float("nan"),
                stance_slide=float(speed_t[moving].mean()) if moving.any() else float("nan"),
                source_stance_slide=float(speed_s[moving].mean()) if moving.any() else float("nan"),
                stance_samples=int(phases.sum()))
