"""Centre of mass from segment masses, and the body's capsules for collision tests.

The contacts paper tests balance with the centre of mass against the support
polygon (§5.2). A joint average puts the centre of mass where the joints are
dense (a hand with fifteen finger joints weighs as much as the trunk); here each
bone carries the mass of the body segment it is, from a standard table of
segment masses (Winter, *Biomechanics and Motor Control of Human Movement*,
Table 4.1: per side thigh 10.0 %, shank 4.65 %, foot 1.45 %, upper arm 2.8 %,
forearm 1.6 %, hand 0.6 %; head, neck and trunk 57.8 %), at its centre along
the bone (0.43-0.5 from its proximal end in the table; 0.45 for the long bones,
0.5 for the rest here).

Segments are found from the structure, not from names: the limbs are the
chains ``limb_effectors`` finds (the ends of legs and arms); a limb whose
effector stays within a quarter of the body height of the clip's lowest point is
a leg, the others are arms; the last
two bones before the effector are its upper and lower segment, the bones below
the effector its hand or foot, and the bones above (a clavicle) belong to the
trunk. The head and neck (8.1 %) are the two bones up to the trunk's highest joint;
the trunk's share (49.7 %) is spread over the remaining bones by length, except a
root bone that starts well below the hips (a root on the floor).
"""

from __future__ import annotations

import numpy as np

from ..skeleton.joints import limb_effectors

#: Fractions of the body mass per side: (upper, lower, end) of a leg and of an arm.
LEG = (0.100, 0.0465, 0.0145)
ARM = (0.028, 0.016, 0.006)
#: Head and neck.
HEAD = 0.081
#: A limb whose effector is usually within this many body heights of the lowest point of the
#: clip is a leg (hands hang at 0.4 or more).
LEG_HEIGHT = 0.25
#: Where a long bone's mass sits along it, from its proximal end.
LONG_CENTRE = 0.45


def _below(skeleton, j):
    out, stack = [], list(skeleton.children(j))
    while stack:
        k = int(stack.pop())
        out.append(k)
        stack += list(skeleton.children(k))
    return out


def segment_masses(skeleton, motion, body_height):
    """``(child (B,), share (B,), centre (B,))``: for each bone (by its child joint) its share
    of the body mass and where that mass sits along it (0: the parent joint, 1: the child).
    Shares sum to 1 over the bones with a length."""
    J = len(skeleton)
    parents = skeleton.parents
    lengths = np.median(skeleton.bone_lengths(motion), axis=0)                # (J,) bone ending at j
    bone = (parents >= 0) & (lengths > 1e-9 * body_height)
    share = np.zeros(J)
    centre = np.full(J, 0.5)
    taken = ~bone
    height = np.median(motion[..., 2], axis=0)
    ground = float(motion[..., 2].min())
    effectors = limb_effectors(skeleton, motion, body_height).tolist()
    # One entry per limb: the effector nearest the trunk (an ankle, not the ball below it).
    below_another = {k for e in effectors for k in _below(skeleton, e)}
    starts = []                                      # the first joint of each leg (the hips)
    for eff in [e for e in effectors if e not in below_another]:
        path = [eff]
        # Up the limb while the other children of the next joint are leaves (twist bones).
        while parents[path[-1]] >= 0 and all(len(skeleton.children(k)) == 0
                                             for k in skeleton.children(parents[path[-1]]) if k != path[-1]):
            path.append(int(parents[path[-1]]))
        path = [j for j in path[::-1] if bone[j]]                             # bones ending at these joints
        if len(path) < 2:
            continue
        for j in path:                               # twist bones inside the limb carry nothing
            taken[[k for k in skeleton.children(j) if len(skeleton.children(k)) == 0 and k not in path]] = True
        table = LEG if height[eff] - ground < LEG_HEIGHT * body_height else ARM
        if table is LEG:
            starts.append(path[0])
        upper, lower = path[-2], path[-1]
        end = [k for k in _below(skeleton, eff) if bone[k]]
        share[upper], share[lower] = table[0], table[1]
        centre[upper] = centre[lower] = LONG_CENTRE
        taken[upper] = taken[lower] = True
        if end:
            w = lengths[end] / lengths[end].sum()
            share[end] += table[2] * w
            taken[end] = True
        else:                                        # no hand or foot bone: its mass at the lower's end
            share[lower] += table[2]
    # A root on the floor (Unreal's ``root`` under the pelvis) is no body segment: a trunk bone
    # starting well below the hips carries nothing.
    hips = [height[parents[path_start]] for path_start in starts] if starts else []
    if hips:
        low = np.array([parents[j] >= 0 and height[parents[j]] < min(hips) - LEG_HEIGHT * body_height
                        for j in range(J)])
        taken |= low
    rest = np.flatnonzero(bone & ~taken)
    if rest.size:
        # The head and neck: the two bones up to the highest joint of the trunk.
        top = int(rest[np.argmax(height[rest])])
        head = [top] + ([int(parents[top])] if parents[top] >= 0 and int(parents[top]) in set(rest.tolist()) else [])
        head = np.array(head)
        share[head] = HEAD * lengths[head] / lengths[head].sum()
        rest = np.setdiff1d(rest, head)
        left = 1.0 - share.sum()
        if rest.size and left > 0:
            share[rest] = left * lengths[rest] / lengths[rest].sum()
    child = np.flatnonzero(share > 0)
    share = share[child] / share[child].sum()
    return child, share, centre[child]


def centre_of_mass(skeleton, positions, masses):
    """(..., 3) centre of mass of poses ``positions`` (..., J, 3) from ``segment_masses``."""
    child, share, along = masses
    parent = skeleton.parents[child]
    at = positions[..., parent, :] + along[:, None] * (positions[..., child, :] - positions[..., parent, :])
    return np.einsum("b,...bd->...d", share, at)


def bone_samples(skeleton, positions, ts=(0.25, 0.5, 0.75)):
    """(..., B * len(ts), 3) points along every bone of poses ``positions`` (..., J, 3): the
    body's capsules, thin, for penetration tests."""
    child = np.flatnonzero(skeleton.parents >= 0)
    a, b = positions[..., skeleton.parents[child], :], positions[..., child, :]
    return np.concatenate([a + t * (b - a) for t in ts], axis=-2)
