"""Continuity of a re-positioned contact by descriptor re-embedding (Tonneau et al. 2016, §6).

Re-positioning (§5.3) first puts the limb on its new contact with positional pins and adapts:
that gives the new contact postures. §6 then re-embeds the descriptors that describe the limb
so that they give those postures (Eq. 15-19, ``descriptors.reembed``), ties them to the surface
under them (``descriptors.attach``) and adapts again with the re-embedded descriptors in place
of the pins: the limb is carried to its new contact and away from it by the descriptors, as
every other joint is, and moving the new support afterwards carries the contact with it (the
paper's Fig. 8).

What this module does per re-positioned phase of a limb:

- the terms of Eq. 15 are those of the limb's joints below its root (the knee, the ankle and
  the toes for a foot) on every frame of the phase (and of the phases of what hangs below the
  effector, a toe's, that it carries): the descriptors that weigh on them, their normalised
  weights (with the painted influence) and their relative vectors r_ij(f) = p_j(f) − d_i in
  the source; the key postures p'_j(f) are the pinned motion's over those frames;
- the unknowns start where the edited surfaces put the descriptors (origin and frame), so an
  unmoved descriptor starts exact;
- the re-embedded descriptors replace the surface's for those joints only (the rest of the body
  keeps the bind's descriptors and follows through the solver), blended in and out over the
  frames the pins eased over; when that does not hold up (below) or makes a valid contact slide
  farther than the pinned motion (``_drags``), over the phase only, the pins' eases kept (a
  departure: blended back in, the moved surface's own descriptors pulled the swing towards it);
- on the frames of the contact itself the effector (and what hangs below it) is held on its
  re-embedded target (``Reembedded.held``). Product decision: left soft, a planted foot stayed
  1.5-2.7 cm off its new support on the synthetic and the real walk, the hips (whose
  descriptors did not move) holding the leg up; the paper's solver has the same softness.
  The target it is held on comes from the descriptors, so it moves with the new support.

Pins stay as the fallback, reported: a phase whose re-embedded contact does not land (the
effector off its surface on some frame by more than the contact tolerance) keeps its pins,
and so do all when the re-embedded motion leaves a phase invalid that the pinned one did not
or steps farther in a frame than ``JUMP_RATIO`` times the source's (or than the pinned motion,
if that did more). Each outcome says ``continuity = "re-embedded"`` or ``"pins"``. Limbs the
root planner bent by IK pins (§7.3) keep them, and animated environments keep the pins (one
embedding per descriptor cannot describe a support that moves under it frame by frame the way
the tracked pins do).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..descriptors.reembedding import Reembedded, attach, reembed
from ..descriptors.weights import frames_of



@dataclass
class Continuity:
    """How one re-positioned phase is carried: ``embedding`` (``descriptors.Reembedded``), the
    pinned ``frames`` and ``joints`` it replaces, and ``energy`` (E_J per iteration)."""

    phase_index: int
    embedding: Reembedded
    frames: np.ndarray
    joints: np.ndarray
    energy: list


def _normalised_terms(binding, frames, joints, influence=None):
    """Eq. 15's terms for ``joints`` on ``frames``: ``rows`` (index into frames × joints),
    ``desc`` (binding descriptor ids), normalised ``weight`` and ``relative`` (K,3) r_ij in the
    source (p_j(f) − d_i on the bind-time surface)."""
    J = len(binding.skeleton)
    frames = np.asarray(frames, np.int64)
    joints = np.asarray(joints, np.int64)
    rows, desc, weight, fr = [], [], [], []
    for block in binding.cache.covering(int(frames.min()), int(frames.max()) + 1):
        inside = np.flatnonzero((frames >= block.start) & (frames < block.start + block.count))
        for k in inside.tolist():
            base = (int(frames[k]) - block.start) * J
            for jj, j in enumerate(joints.tolist()):
                lo, hi = int(block.indptr[base + j]), int(block.indptr[base + j + 1])
                if hi <= lo:
                    continue
                rows.append(np.full(hi - lo, k * len(joints) + jj))
                desc.append(block.desc[lo:hi].astype(np.int64))
                weight.append(block.weight[lo:hi].astype(float))
                fr.append(np.full(hi - lo, int(frames[k])))
    if not rows:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0), np.zeros((0, 3)))
    rows, desc, weight, fr = (np.concatenate(x) for x in (rows, desc, weight, fr))
    if influence is not None:
        weight = weight * influence[desc]
    total = np.bincount(rows, weights=weight, minlength=len(frames) * len(joints))
    keep = total[rows] > 0
    rows, desc, fr = rows[keep], desc[keep], fr[keep]
    weight = weight[keep] / total[rows]
    d_bind = frames_of(binding.mesh, binding.triangles, binding.barycentrics, 0)[0]
    joint_of = joints[rows % len(joints)]
    relative = binding.motion[fr, joint_of] - d_bind[desc]
    return rows, desc, weight, relative


def reembed_phase(binding, mesh, phase_index, phase, positions, frames, joints, blend, influence=None, key=None,
                  held=None):
    """A ``Continuity`` for one phase: the descriptors of ``joints`` re-embedded so that on the
    ``key`` frames (default: the phase's) they give ``positions`` (F,J,3, the pinned motion),
    used over ``frames`` with ``blend`` (see ``descriptors.Reembedded``); ``held``: the
    ``Reembedded.held`` pairs. None when no descriptor weighs on those joints."""
    joints = np.asarray(joints, np.int64)
    key = np.arange(phase.start, phase.end + 1) if key is None else np.asarray(key, np.int64)
    rows, desc, weight, relative = _normalised_terms(binding, key, joints, influence)
    if not len(rows):
        return None
    index, local = np.unique(desc, return_inverse=True)
    d_now, n, t, b = frames_of(mesh, binding.triangles[index], binding.barycentrics[index], 0)
    d0, n0, t0, b0 = frames_of(binding.mesh, binding.triangles[index], binding.barycentrics[index], 0)
    # The edited surface's map of each descriptor's relative vectors (as ``weights._maps``).
    A = n[:, :, None] * n0[:, None, :] + t[:, :, None] * t0[:, None, :] + b[:, :, None] * b0[:, None, :]
    targets = positions[np.repeat(key, len(joints)), np.tile(joints, len(key))]
    e = reembed(rows, local, weight, relative, targets, d_now, A, floor=0.01)
    att = attach(mesh, e.points, e.rotations)
    return Continuity(phase_index, Reembedded(index, att, np.asarray(frames), np.asarray(blend, float), joints,
                                              held), np.asarray(frames), joints, e.energy)


def _spans(outcomes, candidates):
    """Per candidate phase (indices into outcomes) its frames and blend: the frames its pins
    held, cut where a later re-embedded phase of the same effector takes over. Two moved
    contacts of one foot in a row: the first holds (blend 1) up to the second's ease, which then
    blends from the first's embedding to its own (the pins eased from the first new place too)."""
    spans = {}
    by_effector = {}
    for i in candidates:
        by_effector.setdefault(outcomes[i].phase.effector, []).append(i)
    for same in by_effector.values():
        same.sort(key=lambda i: outcomes[i].phase.start)
        for k, i in enumerate(same):
            frames, blend, _ = outcomes[i].pinned
            frames, blend = np.asarray(frames), np.asarray(blend, float)
            if k + 1 < len(same):
                nxt = outcomes[same[k + 1]].phase
                ph = outcomes[i].phase
                keep = frames < nxt.start
                blend = np.where(frames > ph.end, 1.0, blend)[keep]
                frames = frames[keep]
                gap = np.arange(frames.max() + 1 if frames.size else ph.end + 1, nxt.start)
                frames, blend = np.r_[frames, gap], np.r_[blend, np.ones(len(gap))]
            spans[i] = (frames, blend)
    return spans


def _drags(binding, positions, pinned, outcomes):
    """Whether a valid contact slides farther in ``positions`` than in ``pinned`` (the pinned
    motion), past ``SLIDE_HOLD`` body heights, against the source's own motion over its phase.
    Blended back in, the moved surface's own descriptors pull the swing towards it: on a real
    standing stretch whose stone moved 1 m the foot swung 0.35 m off its pinned path into its
    stone, and the stances after it slid 10 and 17 cm (1600, stone 3; pinned: 1 cm)."""
    from .repositioning import SLIDE_HOLD, _slides
    valid = [o.phase for o in outcomes if o.status == "valid"]
    if not valid:
        return False
    before = max(float(_slides(binding.motion, pinned, valid).max()), SLIDE_HOLD * binding.body_height)
    return bool(_slides(binding.motion, positions, valid).max() > before + 1e-9)


def carry(binding, mesh, result, outcomes, pins, user_pins, eps0, up, distance, options, with_pins=False):
    """Replace the pins of re-positioned limbs by re-embedded descriptors where that holds up.

    ``result``, ``outcomes``, ``pins``: the pinned adaptation (``repositioning._adapt_pinned``);
    ``user_pins``: pins the caller gave (kept); ``options``: the ``adapt`` options.
    A phase keeps its pins (``continuity = "pins"``) when re-embedded it does not land, when the
    re-embedded motion leaves a phase invalid that the pinned one did not, or steps farther in a
    frame than ``JUMP_RATIO`` times the source's (or than the pinned motion, if that did);
    phases carried by the root planner's IK pins keep them too. ``with_pins``: also return the
    pins the returned motion was adapted with (``pins`` when nothing is re-embedded), and in
    the order ``adapt`` took them, the embeddings (empty then).
    """
    from ..adaptation import adapt, descriptor_influence
    from .repositioning import JUMP_RATIO, _ancestors, check_contacts, landed, largest_step
    kept = (result, outcomes, pins, []) if with_pins else (result, outcomes)
    if pins is None:
        return kept
    candidates = []
    pinned_joints = set()                          # joints the re-positioned phases' own pins hold
    for o in outcomes:
        if o.status == "repositioned" and o.pinned is not None:
            pinned_joints |= set(o.pinned[2].tolist())
    for i, o in enumerate(outcomes):
        if o.status != "repositioned" or o.pinned is None or o.phase.limb is None:
            continue
        frames, _, _ = o.pinned
        inner = np.array([j for j in o.phase.limb.chain[1:-1].tolist() if j not in pinned_joints], np.int64)
        # The root planner's §7.3 bends legs by IK pins (a knee): such a limb stays on its pins.
        if inner.size and not np.all(np.isnan(pins[np.ix_(frames, inner)][..., 0])):
            continue
        candidates.append(i)
    # A phase of what hangs below a moved effector (a toe's, under its foot) over the same
    # frames is carried by the effector's embedding, held on the frames of its own phase.
    carried = {}
    for k in candidates:
        for i in candidates:
            if i != k and outcomes[k].phase.effector in outcomes[i].pinned[2] and \
                    np.isin(np.arange(outcomes[k].phase.start, outcomes[k].phase.end + 1), outcomes[i].pinned[0]).any():
                carried[k] = i
                break
    candidates = [i for i in candidates if i not in carried]
    if not candidates:
        return kept
    options = {k: v for k, v in options.items() if k != "pins"}
    influence = descriptor_influence(binding, options.get("vertex_influence"))
    spans = _spans(outcomes, candidates)
    H = binding.body_height
    limit = max(largest_step(result.positions), JUMP_RATIO * largest_step(binding.motion), 0.02 * H)
    phases = [o.phase for o in outcomes]

    def attempt(eased):
        """The re-embedded motion (``carry``'s return) or None: ``eased``, the descriptors carry
        the limb over the frames its pins eased over, blended in and out; else over the phase
        only, the pins' eases kept (the source's swing, shifted)."""
        conts = {}
        for i in candidates:
            o = outcomes[i]
            mine = [i] + [k for k, c in carried.items() if c == i]
            own = [np.arange(outcomes[k].phase.start, outcomes[k].phase.end + 1) for k in mine]
            key = np.unique(np.concatenate(own))
            held = [(fr, outcomes[k].pinned[2]) for fr, k in zip(own, mine)]
            joints = np.unique(np.concatenate([o.phase.limb.chain[1:]] + [outcomes[k].pinned[2] for k in mine]))
            frames, blend = spans[i] if eased else (key, np.ones(len(key)))
            frames, blend = np.union1d(frames, key), np.where(np.isin(np.union1d(frames, key), key), 1.0,
                                                              np.interp(np.union1d(frames, key), frames, blend))
            c = reembed_phase(binding, mesh, i, o.phase, result.positions, frames, joints.astype(np.int64), blend,
                              influence, key, held)
            if c is not None:
                conts[i] = c
        for _ in range(2):                               # all at once; then without those that failed
            if not conts:
                return None
            free = pins.copy()
            for i, c in conts.items():
                for k in [i] + [k for k, ci in carried.items() if ci == i]:
                    free[np.ix_(c.frames, outcomes[k].pinned[2])] = np.nan
            if user_pins is not None:
                free = np.where(np.isnan(user_pins), free, user_pins)
            # Limbs before what hangs below them, each effector's phases in time order (``_spans``).
            order = sorted(conts, key=lambda i: (len(_ancestors(binding.skeleton, outcomes[i].phase.effector)),
                                                 outcomes[i].phase.start))
            trial = adapt(binding, mesh, pins=free if not np.all(np.isnan(free)) else None,
                          embeddings=[conts[i].embedding for i in order], **options)
            # A moved contact is judged where it went (``landed``); the others near the re-embedded
            # frames must stay valid (farther away the motion is the pinned one's).
            changed = np.flatnonzero(np.abs(trial.positions - result.positions).max(axis=(1, 2)) > 1e-3 * H)
            near = [k for k, ph in enumerate(phases) if outcomes[k].status == "valid"
                    and np.any((changed >= ph.start) & (changed <= ph.end))]
            checks = check_contacts(binding, trial.positions, mesh, phases, trial.bone_lengths, distance, up, near)
            failed = {i for i, o in enumerate(outcomes) if o.status == "repositioned"
                      and not landed(trial.positions, mesh, o.phase, eps0, up)}
            broken = not all(ok for ok, _ in checks)
            if eased and not failed and not broken and _drags(binding, trial.positions, result.positions, outcomes):
                return None
            if not failed and not broken and largest_step(trial.positions) <= limit + 1e-12:
                out = list(outcomes)
                for i in conts:
                    out[i] = replace(out[i], continuity="re-embedded", embedding=conts[i].embedding)
                for k, i in carried.items():
                    if i in conts:
                        out[k] = replace(out[k], continuity="re-embedded", embedding=conts[i].embedding)
                for k, o in enumerate(out):                # moved with a limb that is re-embedded now
                    if o.status == "repositioned" and o.pinned is None and o.phase.limb is not None:
                        span = np.arange(o.phase.start, o.phase.end + 1)
                        by = next((c for c in conts.values() if o.phase.effector in c.joints
                                   and np.isin(span, c.frames).any()), None)
                        if by is not None:
                            out[k] = replace(o, continuity="re-embedded", embedding=by.embedding)
                if with_pins:
                    return trial, out, free, [conts[i].embedding for i in order]
                return trial, out
            # A carried phase (toes under a moved foot) that did not land is its carrier's failure.
            failed = {carried.get(i, i) for i in failed}
            if broken or not failed or not failed <= set(conts):     # a jump or a knock-on: no one to blame
                break
            conts = {i: c for i, c in conts.items() if i not in failed}
        return None

    # Eased first (the paper: the descriptors carry the limb to its new contact and away); when
    # that does not hold up, over the phase only (a departure): on the eases the moved surface's
    # own descriptors, blended back in, pulled the swing towards it (a knee jumped 0.28 m on the
    # synthetic stones; on the real walk 35 of 74 re-positioned phases kept their pins).
    for eased in (True, False):
        got = attempt(eased)
        if got is not None:
            return got
    return kept
