"""Adapting a bound motion to a changed environment or character (§7).

``adapt`` solves every frame of the clip; ``LiveSession`` solves one frame at
a time for a live preview, reusing the previous frame when it can, so that
playing forward gives exactly what ``adapt`` gives.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import constants as C
from .descriptors.binding import Binding, _check_mesh_frames
from .descriptors.clearance import hold_off_surfaces, keep_clearance
from .errors import InputError, TopologyError
from .geometry import TriMesh
from .geometry import Collider
from .geometry.triangles import norm
from .skeleton.joints import (BendLimits, Hinges, TwistLimits, effective_children, representatives,
                              trunk_mask, zero_length)
from .skeleton.rotations import kabsch, swing
from .solvers import Warper, interaction_mesh
from .solvers.interaction_mesh import check_solver


@dataclass
class AdaptResult:
    """Adapted motion and diagnostics.

    positions : (F,J,3) adapted joint positions.
    targets : (F,J,3) joint targets from the descriptors (Eq. 2).
    affinity : (F,J) in [0,1], 1 for a joint in contact with a surface
        (Eq. 8 with proximity weighting, see ``descriptors.reconstruct``;
        overrides replace it).
    bone_length_error : (F,) mean relative bone-length error per frame left
        by the warping solver (the paper's measure); ``positions`` have it
        removed by a final forward pass (``Rig.finish``), so they are exactly
        what the recovered rotations give.
    target_residual : (F,) mean distance from joints to their targets.
    bone_lengths : (F,J) the bone lengths the solver aimed for.
    joint_limit_violation : (F,) degrees, the largest bend past a joint's
        limit on each frame (0 where none; see ``skeleton.joints.BendLimits``).
    joint_limit_violations : (F,J) degrees per joint.
    unbound_joints : {joint name: frames} for joints that had no weighted
        descriptor on some frames and followed the body rigidly there.
    hinges : names of the joints treated as hinges.
    root_windows : with contacts checked (``contacts.adapt_with_contacts``) on a static
        environment, the ``contacts.replanning.RootWindow`` of every stretch of frames where
        the trunk went through a surface or where the root was replanned (empty when none).
    """

    positions: np.ndarray
    targets: np.ndarray
    affinity: np.ndarray
    bone_length_error: np.ndarray
    target_residual: np.ndarray
    bone_lengths: np.ndarray
    joint_limit_violations: np.ndarray = None
    unbound_joints: dict = None
    hinges: list = None
    root_windows: list = None

    @property
    def joint_limit_violation(self):
        return self.joint_limit_violations.max(axis=1) if self.joint_limit_violations.size else \
            np.zeros(len(self.positions))


def _per_joint(skeleton, value, what, lo=None, hi=None):
    """A (J,) float array from None, a sequence, or a mapping name -> value (NaN = unset)."""
    J = len(skeleton)
    out = np.full(J, np.nan)
    if value is None:
        return out
    if isinstance(value, dict):
        for name, v in value.items():
            j = int(name) if isinstance(name, (int, np.integer)) else skeleton.index(name)
            out[j] = float(v)
    else:
        arr = np.asarray(value, dtype=float)
        if arr.shape != (J,):
            raise InputError(f"{what} must have one value per joint, shape ({J},), got {arr.shape}")
        out[:] = arr
    if np.any(np.isinf(out)):
        raise InputError(f"{what} contains inf")
    low = -np.inf if lo is None else lo
    high = np.inf if hi is None else hi
    bad = ~np.isnan(out) & ((out < low) | (out > high))
    if bad.any():
        names = ", ".join(skeleton.names[j] for j in np.flatnonzero(bad))
        raise InputError(f"{what} out of range [{low}, {high}] for {names}")
    return out


def check_topology(binding, mesh):
    """Raise TopologyError unless ``mesh`` has the bind-time triangles."""
    ref = binding.mesh
    if not isinstance(mesh, TriMesh):
        raise InputError("the deformed environment must be a TriMesh")
    if mesh.triangle_count != ref.triangle_count:
        raise TopologyError(f"the environment has {mesh.triangle_count} triangles but had "
                            f"{ref.triangle_count} at bind time: its topology changed, re-bind")
    if mesh.vertex_count != ref.vertex_count or not np.array_equal(mesh.triangles, ref.triangles):
        raise TopologyError("the environment's triangles differ from the bind-time mesh: its topology "
                            "changed, re-bind")


def descriptor_influence(binding, vertex_influence):
    """(N,) influence of each descriptor from the painted ``vertex_influence`` (V,), or None."""
    if vertex_influence is None:
        return None
    ref = binding.mesh
    vi = np.asarray(vertex_influence, dtype=float)
    if vi.shape != (ref.vertex_count,):
        raise InputError(f"vertex_influence must have one value per vertex ({ref.vertex_count},), "
                         f"got {vi.shape}")
    if not np.all(np.isfinite(vi)):
        raise InputError("vertex_influence contains NaN or inf")
    vi = np.clip(vi, 0.0, 1.0)
    influence = np.einsum("nk,nk->n", binding.barycentrics, vi[ref.triangles[binding.triangles]])
    if binding.descriptor_count and not np.any(influence > 0):
        raise InputError("the painted influence is 0 on every surface, so the binding has no active "
                         "descriptor: paint some influence back (weight > 0)")
    return influence


#: ``smooth_jumps``: a target step counts as a jump when it is longer than the source's step
#: by more than this fraction of the source's largest step (over all joints and frames)...
JUMP_FRACTION = 0.25
#: ...and is eased over a Gaussian of this many frames (sigma) around it...
JUMP_SIGMA = 3.0
#: ...whose support (``scipy.ndimage`` truncates at 4 sigma) is this many frames either side:
#: a frame's eased target depends on the raw targets this far away at most.
JUMP_REACH = int(4 * JUMP_SIGMA + 0.5) + 1
#: The live preview, asked for one frame whose targets are not made, makes this many frames'
#: beyond it too (``LiveSession._targets``).
READ_AHEAD = 16
#: ``Rig.finish`` and ``Rig.bone_error`` take poses this many at a time: each pass over a crowd's
#: 100k poses (65 MB an array) then stays in the cache (measured for 100 x 1000: finish 0.68 s
#: against 1.07 s in one piece, bone errors 0.04 against 0.10). Rows are independent: the same poses,
#: to rounding (the twist limits' best-fit rotations take Newton steps or the SVD by batch size).
ROWS_AT_ONCE = 4096


def jumps(source_from, source_to, target_from, target_to, top, fraction=JUMP_FRACTION):
    """(n,J) whether each joint's target step (``target_from`` -> ``target_to``, (n,J,3)) is longer
    than its source step by more than ``fraction`` of ``top`` (``smooth_jumps``'s test)."""
    src, tgt = norm(source_to - source_from), norm(target_to - target_from)
    return np.nan_to_num(tgt - src, nan=0.0) > fraction * top


def smooth_jumps(source, targets, top, fraction=JUMP_FRACTION, sigma=JUMP_SIGMA):
    """(n,J,3) ``targets`` of consecutive frames with their jumps eased.

    Where a joint's target moves in one frame farther than its source did, by more than
    ``fraction`` of ``top`` (the source's largest step), its target is blended, over a
    Gaussian window around those frames, into its Gaussian-smoothed version. A surface moved
    far drags the joints that pass near it through its descriptors and lets go of them as
    they move away: on a real walk a hand passing
    70 cm above a stone moved a metre had its target jump 0.55 m in one frame (the source's
    hand moved 0.2 m). Steps the source takes are left alone, so an undeformed scene, a rigid
    move of the environment (steps keep their length) and smooth edits are exactly as before.
    A frame's result depends on the targets within ``JUMP_REACH`` frames of it only (the live
    preview evaluates that window and gets what a bake gets, except on an animated
    environment, whose other frames it is not given).
    """
    from scipy.ndimage import gaussian_filter1d
    n = len(source)
    if n < 3 or not np.isfinite(top) or top <= 0:
        return targets
    jump = jumps(source[:-1], source[1:], targets[:-1], targets[1:], top, fraction)   # (n-1,J)
    if not jump.any():
        return targets
    mark = np.zeros(targets.shape[:2])
    mark[1:] += jump
    mark[:-1] += jump
    # Peak 1 at a lone jump (a unit impulse smoothed by the Gaussian peaks at 1 / (2.5 sigma)).
    weight = np.clip(gaussian_filter1d(np.minimum(mark, 1.0), sigma, axis=0, mode="nearest") * 2.5 * sigma,
                     0.0, 1.0)[..., None]
    # The targets themselves are smoothed, not their deviation from the source: a Gaussian
    # filter commutes with rigid motions (its weights sum to 1), so a rigidly moved scene
    # still moves the eased motion rigidly.
    finite = np.isfinite(targets)
    smooth = gaussian_filter1d(np.where(finite, targets, 0.0), sigma, axis=0, mode="nearest")
    return np.where(finite, targets + weight * (smooth - targets), targets)


class Rig:
    """What the solver needs that does not depend on the environment.

    Checks the options of ``adapt`` and builds the constraints: bones of
    non-zero length, rigidity links between siblings (keeping the angle at
    their common parent with the new bone lengths), the zero-length end
    bones to glue, per-descriptor influence and affinity overrides.
    """

    def __init__(self, binding, bone_lengths=None, affinity_override=None, vertex_influence=None,
                 pins=None, solver_options=None, hinges=None):
        if not isinstance(binding, Binding):
            raise InputError("binding must be a Binding from bind() or Binding.load()")
        self.binding = binding
        skeleton, motion, H = binding.skeleton, binding.motion, binding.body_height
        F, J, _ = motion.shape
        new_len = _per_joint(skeleton, bone_lengths, "bone_lengths", lo=0.0)
        self.override = _per_joint(skeleton, affinity_override, "affinity_override", lo=0.0, hi=1.0)
        self.influence = descriptor_influence(binding, vertex_influence)
        if pins is not None:
            pins = np.asarray(pins, dtype=float)
            if pins.shape != (F, J, 3):
                raise InputError(f"pins must have shape ({F},{J},3) with NaN where free, got {pins.shape}")
            if np.any(np.isinf(pins)):
                raise InputError("pins contain inf; use NaN for free joints")
        self.pins = pins
        #: ``descriptors.Reembedded`` blended into the targets over their frames (moved contacts).
        self.embeddings = []
        self.solver_options = dict(solver_options or {})
        # Ducking (on by default; ``share_compression=False`` gives the descriptors' targets alone).
        self.share_compression = bool(self.solver_options.pop("share_compression", True))
        # The trunk's compression is measured against its new bone lengths wherever they changed
        # (``trunk_from_lengths``; ``False`` measures against the source's): a character scaled
        # 0.8 read as a body ducking under a beam by a tenth of its trunk, and its hips went
        # 11-13 cm back off its feet on open ground (issue 37's collar tie and hug; 16-36 cm at
        # 0.85-0.7 on the conventions' generated pose, 10-27 cm on the real walk). ``retarget``
        # always sets it: the bound motion has the source's proportions.
        from_lengths = self.solver_options.pop("trunk_from_lengths", None)
        # Targets that jump where the source does not are eased (``smooth_jumps``; on by default),
        # on the scale of the source's largest frame-to-frame joint step.
        self.jump_guard = bool(self.solver_options.pop("jump_guard", True))
        # Joints near a sculpted surface keep their source distance from it (``descriptors.clearance``;
        # on by default, ``keep_clearance=False`` gives Eq. 2's targets as they are).
        self.keep_clearance = bool(self.solver_options.pop("keep_clearance", True))
        self.source_step = float(np.linalg.norm(np.diff(motion, axis=0), axis=-1).max()) if F > 1 else 0.0
        self.unbound = {}

        # Coincident joints (bones of zero length, e.g. Rigify's pelvis) are glued to their
        # parent; their children hang from the parent, their representative.
        zero = zero_length(skeleton, motion, H)
        rep = representatives(skeleton, zero)
        src = skeleton.bone_lengths(motion)                                     # (F,J)
        scale = np.ones(J)
        given = ~np.isnan(new_len) & (skeleton.parents >= 0) & ~zero
        scale[given] = new_len[given] / src.mean(axis=0)[given]
        self.lengths = src * scale
        self.scale = scale
        self.trunk_from_lengths = bool(np.any(self.scale != 1.0)) if from_lengths is None else bool(from_lengths)
        bones = skeleton.bones
        bones = bones[~zero[bones[:, 1]]]
        self.bones = np.stack([rep[bones[:, 0]], bones[:, 1]], axis=1) if len(bones) else bones
        kids = effective_children(skeleton, zero)
        # A joint with many children holds them as one rigid cluster (``Warper``'s clusters,
        # ``constants.CLUSTER_CHILDREN``); the others keep a link between every two children.
        star = [j for j in range(J) if not zero[j] and len(kids[j]) >= C.CLUSTER_CHILDREN]
        links = np.asarray([pair for j in range(J) if not zero[j] and j not in star
                            for pair in itertools.combinations(kids[j].tolist(), 2)], np.int64).reshape(-1, 2)
        self.clusters = []
        for j in star:
            offset = motion[:, kids[j]] - motion[:, j, None]
            shape = offset * (self.lengths[:, kids[j]] / np.maximum(np.linalg.norm(offset, axis=-1), 1e-300))[..., None]
            self.clusters.append((np.concatenate([[j], kids[j]]).astype(np.int64),
                                  np.concatenate([np.zeros((F, 1, 3)), shape], axis=1)))
        solved = ~np.isin(self.bones[:, 0], star) if len(self.bones) else np.zeros(0, bool)
        self.edges = np.concatenate([self.bones[solved], links]).astype(np.int64)
        edge_len = [self.lengths[:, self.bones[solved, 1]]]
        if len(links):
            p = rep[skeleton.parents[links[:, 0]]]
            ua, ub = motion[:, links[:, 0]] - motion[:, p], motion[:, links[:, 1]] - motion[:, p]
            la, lb = self.lengths[:, links[:, 0]], self.lengths[:, links[:, 1]]
            na, nb = np.linalg.norm(ua, axis=-1), np.linalg.norm(ub, axis=-1)
            cos = np.einsum("fld,fld->fl", ua, ub) / np.maximum(na * nb, 1e-300)
            edge_len.append(np.sqrt(np.maximum(la ** 2 + lb ** 2 - 2 * la * lb * cos, 0.0)))
        self.edge_lengths = np.concatenate(edge_len, axis=1)
        rank = np.argsort(skeleton.order)
        glue = np.stack([np.flatnonzero(zero), skeleton.parents[zero]], axis=1)
        self.glue = glue[np.argsort(rank[glue[:, 0]])] if len(glue) else glue
        modes = {}
        for name, mode in (hinges or {}).items():
            mode = str(mode).upper()
            if mode not in ("AUTO", "ON", "OFF"):
                raise InputError(f"hinge mode for '{name}' must be AUTO, ON or OFF, got {mode!r}")
            modes[skeleton.index(name) if isinstance(name, str) else int(name)] = mode
        # Learnt from the source motion only: kept on the binding, so repeated adapts
        # (contact rounds, re-bakes, live sessions) do not learn them again.
        key = tuple(sorted(modes.items()))
        if key not in binding._joint_models:
            trunk = _TrunkModel.learn(skeleton, motion, zero, rep, kids, H)
            found = Hinges.detect(skeleton, motion, zero, modes)
            # Knees may bend as far as hinges even where the clip holds them straight (no hinge
            # found): a duck or a raised floor folds them further than the clip ever does.
            free = set() if found is None else set(found.triples[:, 1].tolist())
            if trunk is not None and trunk.legs is not None:
                free |= {knee for _, knee, _, _ in trunk.legs.chains if modes.get(knee) != "OFF"}
            binding._joint_models[key] = (found, BendLimits.learn(skeleton, motion, zero, sorted(free)), trunk,
                                          TwistLimits.learn(skeleton, motion, zero))
        self.hinges, self.limits, self.trunk, self.twists = binding._joint_models[key]

    def unbound_names(self):
        """{joint name: frames} of joints that followed the body rigidly for lack of descriptors."""
        return {self.binding.skeleton.names[j]: n for j, n in sorted(self.unbound.items())}

    @property
    def hinge_names(self):
        """Names of the joints treated as hinges."""
        if self.hinges is None:
            return []
        return [self.binding.skeleton.names[k] for k in self.hinges.triples[:, 1].tolist()]

    def limit_violations(self, positions, frames):
        """(n,J) degrees by which each joint of ``positions`` bends past its limit."""
        out = np.zeros(positions.shape[:2])
        if len(self.limits):
            np.maximum.at(out, (slice(None), self.limits.joint), self.limits.violation(positions))
        return out

    def targets(self, mesh, frames=None, guard=True, replace=None):
        """Targets (n,J,3) and affinities (n,J) on ``mesh``, with fallbacks and overrides.

        guard : ease jumps (``smooth_jumps``) when ``frames`` are consecutive; the live
            preview asks without and eases a window itself.
        replace : descriptors placed by the caller instead of by ``mesh`` (see
            ``descriptors.weights.reconstruct``; the carpet of ``locomotion`` places them all).

        A joint with no weighted descriptor follows the body rigidly: the
        best-fit rigid motion of the joints that have targets, applied to its
        source offset from its parent (a root: to its source position), so a
        rigid edit of the environment moves it rigidly too. Such joints are
        counted in ``self.unbound`` {joint: frames}.
        """
        b = self.binding
        frames = np.arange(b.frame_count) if frames is None else np.asarray(frames, dtype=np.int64)
        targets, affinity = b.targets(mesh, frames, self.influence, replace)
        if self.keep_clearance and replace is None:
            keep_clearance(b, mesh, frames, targets)
        kept = []                                       # (frame rows, joints, targets) held as they are
        for e in self.embeddings:                       # moved contacts, eased in and out
            inside = np.isin(frames, e.frames)
            if inside.any():
                at = frames[inside]
                new, _ = b.targets(mesh, at, self.influence, e.replace(mesh))
                blend = e.blend[np.searchsorted(e.frames, at)][:, None, None]
                if e.joints is not None:
                    keep = np.ones(targets.shape[1], bool)
                    keep[e.joints] = False
                    new[:, keep] = targets[inside][:, keep]
                targets[inside] += blend * (new - targets[inside])
                for held_frames, joints in e.held or ():
                    rows = np.flatnonzero(np.isin(frames, held_frames))
                    kept.append((rows, np.asarray(joints, np.int64), targets[np.ix_(rows, joints)].copy()))
        missing = np.isnan(targets[..., 0])
        if missing.any():
            self._follow_rigidly(targets, missing, b.motion[frames])
        if np.any(self.scale != 1.0):
            shift = self._morphology_shift(b.motion[frames], targets, affinity)
            targets += hold_off_surfaces(b, mesh, frames, targets, shift)
        has = ~np.isnan(self.override)
        if self.trunk is not None and self.share_compression:
            # A joint the user holds (an affinity override) keeps its descriptor target.
            held = targets[:, has].copy()
            if not has[self.trunk.chain[0]]:
                self.trunk.reach_feet(b.motion[frames], targets, affinity, self.lengths[frames])
            self.trunk.share_compression(b.motion[frames], frames, targets, affinity, self.lengths[frames],
                                         hold_hips=bool(has[self.trunk.chain[0]]),
                                         from_lengths=self.trunk_from_lengths)
            self.trunk.place_knees(b.motion[frames], targets, self.lengths[frames])
            targets[:, has] = held
        affinity[:, has] = self.override[has]
        if guard and self.jump_guard and len(frames) > 2 and np.all(np.diff(frames) == 1):
            targets = smooth_jumps(b.motion[frames], targets, self.source_step)
        # A contact held by its re-embedded descriptors stays where they put it: the ducking
        # stage and the jump guard lifted a planted foot 3 cm at its phase's ends.
        for rows, joints, values in kept:
            targets[np.ix_(rows, joints)] = values
        return targets, affinity

    def _morphology_shift(self, motion, targets, affinity):
        """(n,J,3) how changed bone lengths move each joint's target.

        The source pose is rebuilt with the new bone lengths (each bone vector
        scaled, parents first) and the change of every joint is taken relative
        to the joints in contact (weighted by affinity⁴), so a character with
        longer legs stands taller on the same floor instead of bending its
        knees further. The shift is turned with the best-fit rotation of the
        source onto its targets, so a rigid edit of the scene turns it too.
        """
        sk = self.binding.skeleton
        morphed = motion.copy()
        for j in sk.order.tolist():
            p = sk.parents[j]
            if p >= 0:
                morphed[:, j] = morphed[:, p] + (motion[:, j] - motion[:, p]) * self.scale[j]
        shift = morphed - motion
        w = affinity ** 4 + 1e-12
        shift -= np.einsum("fj,fjd->fd", w, shift)[:, None] / w.sum(axis=1)[:, None, None]
        cs, cd = motion.mean(axis=1, keepdims=True), targets.mean(axis=1, keepdims=True)
        rot = kabsch(motion - cs, targets - cd)
        return np.einsum("fij,fkj->fki", rot, shift)

    def _follow_rigidly(self, targets, missing, motion):
        sk = self.binding.skeleton
        rows = np.flatnonzero(missing.any(axis=1))
        known = (~missing[rows]).astype(float)                                  # (n,J) weights
        count = known.sum(axis=1)
        src, dst = motion[rows], np.where(missing[rows, :, None], 0.0, targets[rows])
        cs = np.einsum("fj,fjd->fd", known, src) / np.maximum(count, 1)[:, None]
        cd = np.einsum("fj,fjd->fd", known, dst) / np.maximum(count, 1)[:, None]
        rot = kabsch(src - cs[:, None], dst - cd[:, None], known)                # best-fit rigid motion
        rot[count < 3] = np.eye(3)                                              # too few: translation only
        shift = cd - np.einsum("fij,fj->fi", rot, cs)
        shift[count == 0] = 0.0                                                 # nothing to follow
        for j in sk.order.tolist():
            miss = missing[rows, j]
            if not miss.any():
                continue
            r = rows[miss]
            self.unbound[j] = self.unbound.get(j, 0) + int(miss.sum())
            parent = sk.parents[j]
            if parent < 0:
                targets[r, j] = np.einsum("fij,fj->fi", rot[miss], motion[r, j]) + shift[miss]
            else:
                targets[r, j] = targets[r, parent] + np.einsum("fij,fj->fi", rot[miss],
                                                               motion[r, j] - motion[r, parent])

    def hold_embeddings(self, targets):
        """Pin the joints that re-embedded contacts hold (``Reembedded.held``) on their targets
        (F,J,3) there; the caller's own pins win where both pin a joint."""
        holds = [h for e in self.embeddings if e.held is not None for h in e.held]
        if not holds:
            return
        F, J, _ = targets.shape
        pins = np.full((F, J, 3), np.nan) if self.pins is None else self.pins.copy()
        mine = np.zeros((F, J), bool)
        for frames, joints in holds:
            at = np.ix_(np.asarray(frames, np.int64), np.asarray(joints, np.int64))
            mine[at] |= np.isnan(pins[at][..., 0])
        pins[mine] = targets[mine]
        # A held joint below another held joint (toes under a held foot) keeps its bone's length:
        # its target's direction from the parent, at the bone's length (targets are not exact).
        sk = self.binding.skeleton
        for j in sk.order.tolist():
            parent = sk.parents[j]
            if parent < 0:
                continue
            both = mine[:, j] & ~np.isnan(pins[:, parent, 0])
            if both.any():
                d = pins[both, j] - pins[both, parent]
                n = np.linalg.norm(d, axis=1, keepdims=True)
                pins[both, j] = pins[both, parent] + d * (self.lengths[both, j][:, None] / np.maximum(n, 1e-12))
        self.pins = pins

    def warper(self, collide=None, frames=None, **overrides):
        """The warping solver of this rig; with ``frames`` (n,), one that solves those frames only
        (the rows of its batch are them, e.g. a reach's window); ``overrides``: ``Warper``
        settings over the rig's solver options."""
        options = dict(self.solver_options, **overrides)
        if "hinges" not in options:
            options["hinges"] = None if self.hinges is None else (self.hinges, self.binding.motion)
        if "limits" not in options and len(self.limits):
            options["limits"] = (self.limits.pairs, self.limits.min_distance(self.lengths))
        pins = self.pins
        if frames is not None:
            frames = np.asarray(frames, np.int64)
            options["rows"] = frames
            pins = None if pins is None else pins[frames]
        return Warper(self.edges, self.edge_lengths, self.binding.body_height, glue=self.glue,
                      pins=pins, collide=collide, clusters=self.clusters, **options)

    def finish(self, positions, frames, held=None, twist_held=None):
        """Twist limits, then exact bone lengths: each joint moved along its bone, parents first.

        The warper leaves a small bone-length error (``bone_length_error``);
        this forward pass removes it so the positions are exactly what forward
        kinematics of the recovered rotations gives, i.e. what a baked action
        shows. Pinned joints stay where they are pinned (``held`` (n,J) bool: the joints
        pinned at each row, when the pins are not the rig's own). ``twist_held`` (n,J) bool:
        joints held by something else (a partner), which the twist limits leave in place as
        they leave pinned ones, though the exact-length pass moves them.
        """
        frames = np.asarray(frames)
        if len(positions) > ROWS_AT_ONCE:
            out = np.empty(np.shape(positions))
            for a in range(0, len(out), ROWS_AT_ONCE):
                rows = slice(a, a + ROWS_AT_ONCE)
                out[rows] = self.finish(positions[rows], frames[rows], None if held is None else held[rows],
                                        None if twist_held is None else twist_held[rows])
            return out
        out = np.array(positions, dtype=float)
        sk = self.binding.skeleton
        if held is None and self.pins is not None:
            held = ~np.isnan(self.pins[frames][..., 0])
        if len(self.twists) and self.solver_options.get("limits", True) is not None:
            keep = held if twist_held is None else (twist_held if held is None else held | twist_held)
            out = self.twists.limit(sk, out, keep)
        jm = np.ascontiguousarray(out.swapaxes(0, 1))                    # (J,n,3): each joint contiguous
        lengths = np.ascontiguousarray(self.lengths[frames].T)
        free = None if held is None else ~np.ascontiguousarray(held.T)
        # Joints of one depth hang from joints already placed: one batched step per depth.
        for glued, glued_parent, j, parent in self._length_levels:
            if glued.size:                                                # zero-length end bones
                jm[glued] = jm[glued_parent]
            if not j.size:
                continue
            d = jm[j] - jm[parent]
            d *= (lengths[j] / np.maximum(np.sqrt(np.einsum("kni,kni->kn", d, d)), 1e-300))[..., None]
            d += jm[parent]
            if free is None:
                jm[j] = d
            else:
                jm[j] = np.where(free[j][..., None], d, jm[j])
        return np.ascontiguousarray(jm.swapaxes(0, 1))

    @functools.cached_property
    def _length_levels(self):
        """``finish``'s exact-length pass, per depth below the roots: ``(joints on their parent (the
        zero-length end bones), those parents, the other joints, their parents)`` (a live frame
        finishes one pose: these cost more numpy calls than its arithmetic)."""
        sk = self.binding.skeleton
        bone = np.zeros(len(sk), bool)
        bone[self.bones[:, 1]] = True
        out = []
        for d in range(1, int(sk.depth.max()) + 1):
            level = np.flatnonzero(sk.depth == d)
            parent, glued = sk.parents[level], ~bone[level]
            out.append((level[glued], parent[glued], level[~glued], parent[~glued]))
        return out

    def bone_error(self, positions, frames):
        """(n,) mean relative bone-length error of ``positions`` (n,J,3) at ``frames``."""
        b = self.bones
        if not len(b):
            return np.zeros(len(positions))
        positions, frames = np.asarray(positions), np.asarray(frames)
        if len(positions) > ROWS_AT_ONCE:
            return np.concatenate([self.bone_error(positions[a:a + ROWS_AT_ONCE], frames[a:a + ROWS_AT_ONCE])
                                   for a in range(0, len(positions), ROWS_AT_ONCE)])
        # ``take``, not fancy indexing: on a crowd's 100k poses 6x faster, the same values
        got = norm(positions.take(b[:, 1], 1) - positions.take(b[:, 0], 1))   # (n,B)
        want = self.lengths.take(np.asarray(frames), 0).take(b[:, 1], 1)
        return (np.abs(got - want) / want).mean(axis=1)


class Collisions:
    """Collision constraint of the warping step, for a batch of poses at their frames.

    A joint is pushed out only where it lies behind a surface, within the
    collision band, and deeper than its target (a source motion whose foot
    dips into the floor keeps that dip). A joint closer to its target than the
    target is to any surface cannot have crossed one, so most joints are
    never tested.
    """

    def __init__(self, mesh, body_height, frames=None, joints=None, keep_dips=True):
        """``joints``: optional (J,) bool, the joints tested (default: all); a reach tests the
        arm and the trunk, whose feet stand where the bake put them. ``keep_dips``: a target
        behind a surface keeps its depth (off: every joint is pushed out, as on an object the
        source never touched)."""
        self.mesh = mesh
        self.keep_dips = bool(keep_dips)
        self.joints = None if joints is None else np.asarray(joints, bool)
        self.band = C.COLLISION_BAND_FRACTION * body_height
        self.tol = 1e-9 * body_height
        self.frames = frames or mesh.frame_count
        self._collider = {}
        self._target = self._sd = self._clearance = self._set = None

    def collider(self, f):
        if not self.mesh.animated:
            return Collider.of(self.mesh, self.band)
        c = self._collider.get(f)
        if c is None:
            if len(self._collider) >= C.SEGMENT_BATCH + 2:
                self._collider.clear()
            c = self._collider[f] = Collider.of(self.mesh, self.band, f)
        return c

    def set_targets(self, frames, targets):
        """Targets (n,J,3) of ``frames`` (n,), before those frames are solved."""
        frames = np.asarray(frames)
        if self.mesh.animated:
            sd = np.stack([self.collider(f).signed_distance(t)[0] for f, t in zip(frames.tolist(), targets)])
        elif self._target is not None and len(frames) and frames.max() < len(self._set) and self._set[frames].all():
            # Frames set before (measured ahead by ``prime``; a pair's live rounds move a few
            # joints' targets): the joints whose targets moved are measured again, the others keep
            # theirs.
            sd = self._sd[frames].copy()
            fi, ji = np.nonzero((self._target[frames] != targets).any(axis=2))
            if fi.size:
                sd[fi, ji] = self.collider(0).signed_distance(targets[fi, ji])[0]
        else:
            sd = self.collider(0).signed_distance(targets.reshape(-1, 3))[0].reshape(targets.shape[:2])
        F = max(self.frames or 0, int(frames.max()) + 1)
        if self._target is None or len(self._target) < F:           # per frame: the target and its
            old = self._target, self._sd, self._clearance, self._set   # signed distance (inf: none in the band)
            J = targets.shape[1]
            self._target, self._sd = np.zeros((F,) + targets.shape[1:]), np.full((F, J), np.inf)
            self._clearance = np.full((F, J), self.band - self.tol)
            self._set = np.zeros(F, bool)
            if old[0] is not None:
                self._target[:len(old[0])], self._sd[:len(old[1])], self._clearance[:len(old[2])], \
                    self._set[:len(old[3])] = old
        self._target[frames], self._sd[frames] = targets, sd
        self._set[frames] = True
        # A joint closer to its target than this cannot have crossed a surface (see __call__). Only
        # the frames set now: a live frame recomputed all of a 600-frame Rigify clip's (1 ms).
        self._clearance[frames] = np.where(sd > 0, np.minimum(sd, self.band), 0.0) - self.tol

    def prime(self, frames, targets):
        """Measure the targets (n,J,3) of ``frames`` (n,) ahead of their solve, a few frames a call
        (``set_targets``): a live frame's own ``set_targets`` then measures only the joints whose
        targets changed since (a one-point search costs as many numpy calls as a frame's 27)."""
        if self.mesh.animated or not len(frames):
            return
        step = max(1, Collider.FEW // targets.shape[1])   # each call within the search's few-point path
        for a in range(0, len(frames), step):
            self.set_targets(frames[a:a + step], targets[a:a + step])

    def __call__(self, p, fs):
        """Push the joints of poses ``p`` (S,J,3) at frames ``fs`` (S,) out of the surfaces (or
        of one pose (J,3) at one frame)."""
        if p.ndim == 2:
            return self(p[None], np.atleast_1d(fs))[0]
        fs = np.asarray(fs)
        target_sd = self._sd[fs]
        off = p - self._target[fs]
        moved = np.sqrt(np.einsum("sjd,sjd->sj", off, off))
        near = moved >= self._clearance[fs]
        if self.joints is not None:
            near &= self.joints
        si, ji = np.nonzero(near)
        if si.size == 0:
            return p
        # The distance to the surface changes no faster than the joint moves: bounds for the
        # search (a joint still a band away is not searched at all; the others in one round).
        was = np.minimum(np.abs(target_sd[si, ji]), self.band)    # no surface within the band: at least that
        step = moved[si, ji]
        near, far = np.maximum(was - step - self.tol, 0.0), was + step + self.tol
        if self.mesh.animated:
            sd, normal = np.empty(si.size), np.empty((si.size, 3))
            for f in np.unique(fs[si]).tolist():
                rows = np.flatnonzero(fs[si] == f)
                sd[rows], normal[rows] = self.collider(f).signed_distance(p[si[rows], ji[rows]], near[rows],
                                                                          far[rows])
        else:
            sd, normal = self.collider(0).signed_distance(p[si, ji], near, far)
        # A target behind a surface keeps its depth (a source foot dipping into the floor).
        want = np.minimum(np.where(np.isinf(target_sd[si, ji]), 0.0, target_sd[si, ji]), 0.0)
        if not self.keep_dips:
            want = np.zeros_like(want)
        push = (sd < want - self.tol) & (sd > -self.band)
        if push.any():
            p[si[push], ji[push]] += normal[push] * (want[push] - sd[push])[:, None]
        return p


class _Legs(NamedTuple):
    """The legs below the trunk's root (``_legs``)."""

    feet: np.ndarray      # (L,) joints hanging below the root, far down their leg (ankles, toes)
    reach: np.ndarray     # (L,) how far from the root the source ever holds each
    paths: list           # the bones from the root to each foot joint...
    along: np.ndarray     # (L,) ...and their source length (to scale the reach with new lengths)
    chains: list          # per leg (hip joint, knee, ankle, bones from the hip joint to the ankle)


def _legs(skeleton, motion, chain, rep, kids, up):
    """The legs below the trunk's root (``_Legs``), or None.

    Feet are the joints hanging below the root off the chain at least ``FOOT_PATH_FRACTION``
    of the longest leg path from it (ankles and toes, not knees). Per leg, the ankle is its
    first foot joint and the knee the joint halfway down the bones from the hip joint to it."""
    root = chain[0]
    on = set(chain.tolist())
    height = np.einsum("fjd,d->fj", motion, up)
    joints, paths = [], []
    stack = [(int(c), [int(c)]) for c in kids[root].tolist() if int(c) not in on]
    while stack:
        j, path = stack.pop()
        if np.median(height[:, j]) < np.median(height[:, root]):
            joints.append(j)
            paths.append(path)
        stack += [(int(c), path + [int(c)]) for c in kids[j].tolist()]
    if not joints:
        return None
    bones = skeleton.bone_lengths(motion)                                             # (F,J)
    along = np.array([bones[:, p].sum(axis=1).mean() for p in paths])
    feet = along >= C.FOOT_PATH_FRACTION * along.max()            # ankles and toes; knees will move
    joints = np.array(joints, np.int64)[feet]
    paths, along = [p for p, keep in zip(paths, feet) if keep], along[feet]
    reach = np.linalg.norm(motion[:, joints] - motion[:, root:root + 1], axis=-1).max(axis=0)
    mean = bones.mean(axis=0)
    legs = []
    for j, path in zip(joints.tolist(), paths):
        if len(path) < 3 or any(path[-1] != q[-1] and q == path[:len(q)] for q in paths):
            continue
        run = np.cumsum(mean[path[1:]])
        at = 1 + int(np.argmin(np.abs(run[:-1] - run[-1] / 2)))
        legs.append((path[0], path[at], j, path[1:]))
    return _Legs(joints, reach, paths, along, legs)


def _facing(skeleton, motion, chain, rep, kids, up, body_height):
    """(F,3) unit horizontal direction the body faces, continuous over the clip.

    The lateral axis is the widest pair of limb roots hanging off the trunk (the hip joints,
    or the shoulders when they are wider), which move rigidly with the pelvis or the chest;
    forward is across it. One sign for the whole clip, voted by the direction of travel, the
    head's lean and the feet (leaf joints below the trunk's root, ahead of their parents), so
    a body that stands still or sways never flips its facing from one frame to the next.
    """
    on = set(chain.tolist())
    roots = [int(c) for a in chain.tolist() for c in kids[a].tolist() if int(c) not in on]
    flat = motion - np.einsum("fjd,d->fj", motion, up)[..., None] * up
    med = np.median(flat, axis=0)
    pairs = [(a, b) for i, a in enumerate(roots) for b in roots[i + 1:]]
    if not pairs:
        return np.zeros((len(motion), 3))
    a, b = max(pairs, key=lambda ab: np.linalg.norm(med[ab[0]] - med[ab[1]]))
    if np.linalg.norm(med[a] - med[b]) < C.TRAVEL_MIN_STEP * body_height:
        return np.zeros((len(motion), 3))
    fwd = np.cross(up, flat[:, a] - flat[:, b])
    fwd /= np.maximum(np.linalg.norm(fwd, axis=1, keepdims=True), 1e-300)

    def unit(v):
        n = np.linalg.norm(v, axis=-1, keepdims=True)
        return np.where(n > C.TRAVEL_MIN_STEP * body_height, v / np.maximum(n, 1e-300), 0.0)

    root, top = chain[0], chain[-1]
    F = len(motion)
    step = np.zeros_like(flat[:, root])
    if F > 2:
        k = min(8, F // 2)                                 # about a quarter second of travel
        step[k:-k] = flat[2 * k:, root] - flat[:-2 * k, root]
    vote = np.einsum("fd,fd->", fwd, unit(step)) / F
    vote += np.einsum("fd,fd->", fwd, unit(flat[:, top] - flat[:, root])) / F
    height = np.einsum("fjd,d->fj", motion, up)
    below = [j for j in range(len(skeleton)) if skeleton.parents[j] >= 0 and not len(kids[j])
             and np.median(height[:, j]) < np.median(height[:, root])]
    for j in below:
        vote += np.einsum("fd,fd->", fwd, unit(flat[:, j] - flat[:, rep[skeleton.parents[j]]])) / F
    return fwd if vote >= 0 else -fwd


def _turn(a, b):
    """(n,3,3) the smallest rotations taking directions ``a`` (n,3) to ``b`` (n,3)."""
    a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-300)
    b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-300)
    v, c = np.cross(a, b), np.einsum("nd,nd->n", a, b)
    K = np.zeros((len(a), 3, 3))
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -v[:, 2], v[:, 1], -v[:, 0]
    K -= K.transpose(0, 2, 1)
    return np.eye(3) + K + np.einsum("nij,njk->nik", K, K) / np.maximum(1.0 + c, 1e-12)[:, None, None]


def _any_perpendicular(v):
    helper = np.where(np.abs(v[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    return np.cross(v, helper)


def _rotate(v, axis, angle):
    """Rodrigues: vectors v (n,k,3) about unit axes (n,3) by angles (n,k)."""
    a = axis[:, None, :]
    c, s = np.cos(angle)[..., None], np.sin(angle)[..., None]
    return v * c + np.cross(a, v) * s + a * np.einsum("nki,nki->nk", a.repeat(v.shape[1], 1), v)[..., None] * (1 - c)


def _curl_to(shape, side, span, max_degrees=C.TRUNK_CURL_MAX_DEGREES, steps=24):
    """Chain points (n,C,3) from its root, curled forward about ``side`` (n,3) so that the end
    lies ``span`` (n,) from the root (as close as the largest bend allows).

    Water-filling: every inner joint flexes forward to a common angle θ, and a joint the source
    already flexes further keeps its own bend, so a neck that leans keeps leaning and the flat
    middle of the spine takes the curl. Bisection on θ: the span shrinks as it grows.
    """
    side = side / np.maximum(np.linalg.norm(side, axis=-1, keepdims=True), 1e-300)
    seg = np.diff(shape, axis=1)                                     # (n,C-1,3)
    a, b = seg[:, :-1], seg[:, 1:]
    own = np.arctan2(np.einsum("nd,nkd->nk", side, np.cross(a, b)), np.einsum("nkd,nkd->nk", a, b))
    lo = np.minimum(own.min(axis=1), 0.0) if own.size else np.zeros(len(shape))

    def bent(theta):
        add = np.maximum(theta[:, None] - own, 0.0)                  # (n,C-2) forward flexion added
        turn = np.concatenate([np.zeros((len(shape), 1)), np.cumsum(add, axis=1)], axis=1)
        return np.concatenate([shape[:, :1], shape[:, :1] + np.cumsum(_rotate(seg, side, turn), axis=1)], axis=1)

    hi = np.full(len(shape), np.radians(max_degrees))
    if not own.size:
        return shape
    for _ in range(steps):
        mid = (lo + hi) / 2
        too_long = np.linalg.norm(bent(mid)[:, -1] - shape[:, 0], axis=-1) > span
        lo, hi = np.where(too_long, mid, lo), np.where(too_long, hi, mid)
    return bent(hi)


class _TrunkModel:
    """Compression shared along the body the way a person ducks (product addition, issue
    "human poses under large edits"; on by default, ``solver_options={"share_compression": False}``
    switches it off).

    When the targets bring the head closer to the hips than ``TRUNK_KEEP`` of the source's
    hips-to-head distance (a beam lowered over a walk), the descriptors alone would fold the
    spine on itself. Instead:

    - the hips go down (the knees bend, ``HIPS_SHARE`` of the shortfall, up to
      ``HIPS_DROP_MAX`` body heights) and back, away from where the body faces (the torso
      pitches forward), as far as the source spine needs room, at most ``HIPS_BACK_MAX``, and
      only as far as the feet still reach their targets; the hip joints go with them;
    - the spine keeps the source's shape, curled forward to a common flexion at every joint
      (``_curl_to``, at most ``TRUNK_CURL_MAX_DEGREES``) until it spans the new hips-to-head
      distance, and is swung onto that line;
    - a spine curled that far and still too long: the hips go lower, in all at most
      ``HIPS_DROP_MAX_CROUCH``;
    - arms hanging from the spine are carried along as far as their affinity lets them go.

    Before that, ``reach_feet``: where a foot in contact is out of its leg's reach (a sculpted
    bump lifts the hips with the terrain's mean), the body comes down to it.

    The facing is the body's own (``_facing``), one direction per frame that never flips, so
    a body standing still under a beam does not swing its hips front to back. Everything is
    measured on the targets and turned with the best-fit rotation of the source onto them, so
    a rigid edit of the scene moves it rigidly; an unedited scene has no shortfall and is
    untouched. The posture blends in over ``TRUNK_BLEND`` body heights of shortfall.
    """

    def __init__(self, chain, below, up, forward, body_height, legs=None, body=None):
        self.chain, self.below, self.up, self.forward = chain, below, up, forward
        self.body_height = body_height
        self.legs = legs                    # see ``_legs``
        self.body = body                    # joints that go with the hips: all but knees and below

    @classmethod
    def learn(cls, skeleton, motion, zero, rep, kids, body_height):
        trunk = trunk_mask(skeleton, motion, zero, rep, kids)
        root = next((j for j in skeleton.order.tolist() if trunk[j]), None)
        if root is None:
            return None
        while len(kids[root]) == 1 and trunk[kids[root][0]]:     # a floor-level root above the hips
            root = int(kids[root][0])
        ends = [j for j in np.flatnonzero(trunk).tolist() if not any(trunk[c] for c in kids[j].tolist())]
        med = np.median(motion, axis=0)
        top = max(ends, key=lambda j: np.linalg.norm(med[j] - med[root]))
        chain = [top]
        while chain[-1] != root and skeleton.parents[chain[-1]] >= 0:
            chain.append(int(rep[skeleton.parents[chain[-1]]]))
        chain = np.array(chain[::-1], np.int64)
        if len(chain) < 3 or chain[0] != root:
            return None
        up = np.median(motion[:, top] - motion[:, root], axis=0)
        up /= max(np.linalg.norm(up), 1e-300)
        forward = _facing(skeleton, motion, chain, rep, kids, up, body_height)
        # Joints carried by each spine joint: its subtree off the chain (not the legs below the root).
        on = set(chain.tolist())
        below = {}
        for j in skeleton.order.tolist():
            p = skeleton.parents[j]
            if j in on or p < 0:
                continue
            a = int(rep[p]) if int(rep[p]) in on else below.get(int(p), (None,))[0]
            if a is not None and a != root:
                below[j] = (a,)
        carried = {}
        for j, (a,) in below.items():
            carried.setdefault(a, []).append(j)
        legs = _legs(skeleton, motion, chain, rep, kids, up)
        body = None
        if legs is not None:
            lower = {knee for _, knee, _, _ in legs.chains}
            for j in skeleton.order.tolist():
                if skeleton.parents[j] in lower:
                    lower.add(j)
            # Nor what the hips hang from (a floor-level root bone, as Unreal's): it stays on the floor.
            up_from = int(skeleton.parents[root])
            while up_from >= 0:
                lower.add(up_from)
                up_from = int(skeleton.parents[up_from])
            body = np.array([j for j in range(len(skeleton)) if j not in lower], np.int64)
        return cls(chain, {a: np.array(js, np.int64) for a, js in carried.items()}, up, forward, body_height,
                   legs, body)

    def _back_within_reach(self, hips, fwd, t, lengths):
        """(n,) the largest backward shift along ``fwd`` keeping every leg joint's target within
        the source's reach of the hips (scaled with the leg's bone lengths)."""
        joints, reach, paths, src = self.legs.feet, self.legs.reach, self.legs.paths, self.legs.along
        now = np.stack([lengths[:, p].sum(axis=1) for p in paths], axis=1)             # (n,L)
        r = reach[None] * now / np.maximum(src[None], 1e-300)
        d = hips[:, None] - t[:, joints]                                               # (n,L,3)
        df = np.einsum("nld,nd->nl", d, fwd)
        disc = df * df - np.einsum("nld,nld->nl", d, d) + r * r
        far = df + np.sqrt(np.maximum(disc, 0.0))                                      # leaves the reach there
        limit = np.where(disc >= 0, far, df)                                           # out of reach: go no farther
        return np.maximum(limit.min(axis=1), 0.0)

    def reach_feet(self, motion, targets, affinity, lengths):
        """Lower the body (every joint but the legs below the hip joints) where a foot in contact
        is out of its leg's reach: on a sculpted bump the descriptors lift the hips with the
        terrain's mean, and the foot on the lower side could only hang. Weighted by the affinity of
        the foot's joints (the ankle and those below it), so a swinging foot does not pull the
        body down. A reachable foot (any edit that keeps the legs' reach, a rigid edit, no edit)
        changes nothing."""
        if self.legs is None or not self.legs.chains:
            return
        m, t = motion, targets
        drop = np.zeros(len(t))
        down = None
        for hip, _, ankle, bones in self.legs.chains:
            v = t[:, hip] - t[:, ankle]
            reach = lengths[:, bones].sum(axis=1)
            over = np.einsum("fd,fd->f", v, v) > reach * reach
            if not over.any():
                continue
            if down is None:
                rot = kabsch(m - m.mean(axis=1, keepdims=True), t - t.mean(axis=1, keepdims=True))
                down = -np.einsum("fij,j->fi", rot, self.up)
            vd = np.einsum("fd,fd->f", v, down)
            disc = vd * vd - np.einsum("fd,fd->f", v, v) + reach * reach
            x = np.where(disc >= 0, -vd - np.sqrt(np.maximum(disc, 0.0)), -vd)
            # In contact as much as the foot's most affine joint (a heel lifting off, a toe still down).
            foot = [k for k, path in zip(self.legs.feet.tolist(), self.legs.paths) if ankle in path]
            w = np.clip((affinity[:, foot].max(axis=1) - C.REACH_AFFINITY_FROM) / C.REACH_AFFINITY_RAMP, 0.0, 1.0)
            drop = np.maximum(drop, np.where(over, np.maximum(x, 0.0) * w * w * (3 - 2 * w), 0.0))
        if down is not None:
            t[:, self.body] += (drop[:, None] * down)[:, None]

    def place_knees(self, motion, targets, lengths):
        """Put each knee's target where the leg's bones reach from its hip's target to its ankle's
        (two-bone IK, bent the way the source knee bends, turned with the body) where the targets ask the leg to
        stretch further than the source does: the descriptors place a knee as the source bends
        it, and a foot on a crest then asks for a longer leg than that knee target fits; the
        solver's compromise left a planted ankle 2 cm short on a real walk. Blended in as the
        hip-to-ankle distance grows past the source's (fully ``KNEE_IK_FRACTION`` body heights
        past it), so where it does not (no edit, a rigid one, a leg that folds: a duck, a dip,
        which the solver's hinges fold) nothing changes. The joints between the hip and the knee
        (a split thigh) turn with the thigh, those between the knee and the ankle with the shin.
        """
        if self.legs is None:
            return
        H = self.body_height
        turn = None
        for hip, knee, ankle, bones in self.legs.chains:
            m, t = motion, targets
            thigh = np.linalg.norm(m[:, knee] - m[:, hip], axis=-1)
            shin = np.linalg.norm(m[:, ankle] - m[:, knee], axis=-1)
            upper = [j for j in bones if j != knee and j != ankle and bones.index(j) < bones.index(knee)]
            lower = [j for j in bones if j != ankle and bones.index(j) > bones.index(knee)]
            scale = lengths[:, bones].sum(axis=1) / np.maximum(np.linalg.norm(np.diff(
                m[:, [hip] + list(bones)], axis=1), axis=-1).sum(axis=1), 1e-300)
            a, b = thigh * scale, shin * scale
            v = t[:, ankle] - t[:, hip]
            d = np.linalg.norm(v, axis=-1)
            src = np.linalg.norm(m[:, ankle] - m[:, hip], axis=-1) * scale
            w = np.clip((d - src) / (C.KNEE_IK_FRACTION * H), 0.0, 1.0)
            rows = np.flatnonzero(w > 0)
            if not rows.size:
                continue
            v, d, a, b, w = v[rows], d[rows], a[rows], b[rows], w[rows]
            u = v / np.maximum(d, 1e-300)[:, None]
            k0 = t[rows, knee]
            # The knee bends the way the source's does, turned with the body (the best-fit rotation
            # of the source onto the targets): the side of the knee's own target flips where that
            # target lies near the line from hip to ankle, and a knee target thrown behind the leg
            # made the solver flip the knee 0.58 m in a frame (a real walk over moved stones).
            if turn is None:
                turn = kabsch(m - m.mean(axis=1, keepdims=True), t - t.mean(axis=1, keepdims=True))
            ms = m[rows]
            us = ms[:, ankle] - ms[:, hip]
            us /= np.maximum(np.linalg.norm(us, axis=-1, keepdims=True), 1e-300)
            side = ms[:, knee] - ms[:, hip]
            side -= np.einsum("nd,nd->n", side, us)[:, None] * us
            side = np.einsum("nij,nj->ni", turn[rows], side)
            side -= np.einsum("nd,nd->n", side, u)[:, None] * u
            n = np.linalg.norm(side, axis=-1)
            ok = n > 1e-9 * H
            side = np.where(ok[:, None], side / np.maximum(n, 1e-300)[:, None], 0.0)
            # Never quite straight: at full reach the knee's place is the square root of nothing, and
            # rounding in the targets (a live frame's against the bake's: 4e-16) came out 1.6e-9.
            reach = np.minimum(d, C.KNEE_IK_REACH * (a + b))
            x = (a * a - b * b + reach * reach) / np.maximum(2 * reach, 1e-300)
            y = np.sqrt(np.maximum(a * a - x * x, 0.0))
            k1 = t[rows, hip] + x[:, None] * u + y[:, None] * side
            k1 = np.where(ok[:, None], k1, k0)
            new = k0 + w[:, None] * (k1 - k0)
            for js, pivot_old, pivot_new, end_old, end_new in (
                    (upper, t[rows, hip], t[rows, hip], k0, new),
                    (lower, k0, new, t[rows, ankle], t[rows, ankle])):
                if js:
                    R = _turn(end_old - pivot_old, end_new - pivot_new)
                    for j in js:
                        t[rows, j] = pivot_new + np.einsum("nij,nj->ni", R, t[rows, j] - pivot_old)
            t[rows, knee] = new

    def lean(self, targets, affinity, joints, goals, weight, max_degrees):
        """Turn the trunk's ``targets`` (F,J,3) about the hips, in place, so that ``joints`` (K,)
        (shoulders) come nearer ``goals`` (F,K,3), weighted by ``weight`` (F,K) in [0, 1]: the
        smallest rotation taking their weighted mean offset from the hips to their goals', at
        most ``max_degrees``, times the frame's largest weight. Everything above the hips turns
        (the spine, the head, the arms); the hips and the legs stay. Where it turns, the spine's
        ``affinity`` rises to the weight times ``TRUNK_AFFINITY``, as the ducking posture's."""
        weight = np.asarray(weight, float)
        rows = np.flatnonzero((weight > 0).any(axis=1))
        if not rows.size:
            return
        root = int(self.chain[0])
        t, w = targets[rows], weight[rows]
        h = t[:, root]
        a = np.einsum("nk,nkd->nd", w, t[:, joints] - h[:, None])
        b = np.einsum("nk,nkd->nd", w, goals[rows] - h[:, None])
        cross = np.cross(a, b)
        sin = norm(cross)
        angle = np.arctan2(sin, np.einsum("nd,nd->n", a, b))
        turns = sin > 1e-12 * np.maximum(norm(a) * norm(b), 1e-300)
        share = w.max(axis=1)
        angle = np.where(turns, np.minimum(angle, np.radians(max_degrees)) * share, 0.0)
        axis = cross / np.maximum(sin, 1e-300)[:, None]
        moved = [int(j) for j in self.chain[1:]]
        for j in self.chain[1:].tolist():
            moved += self.below.get(j, np.zeros(0, np.int64)).tolist()
        moved = np.array(sorted(set(moved)), np.int64)
        t[:, moved] = h[:, None] + _rotate(t[:, moved] - h[:, None], axis, np.repeat(angle[:, None], len(moved), 1))
        targets[rows] = t
        chain = self.chain[1:]
        lift = np.where(turns, share, 0.0)[:, None] * C.TRUNK_AFFINITY
        affinity[rows[:, None], chain[None]] = np.maximum(affinity[rows][:, chain], lift)

    def share_compression(self, motion, frames, targets, affinity, lengths, hold_hips=False, from_lengths=False):
        """Move ``targets`` (n,J,3) and raise ``affinity`` (n,J) in place where the trunk is
        compressed; ``hold_hips``: the hips keep their target (the spine curls from there);
        ``from_lengths``: compressed against the trunk's bone ``lengths``, not the source's."""
        chain, root, top = self.chain, self.chain[0], self.chain[-1]
        H = self.body_height
        if from_lengths:
            # The trunk as long as its bones are now: a shorter spine is no compression, and
            # ducking it would sink the hips (a retarget onto a real Mixamo rig: 26 cm under the
            # shared walk's crouch, the hips below the knees).
            bones = np.linalg.norm(motion[:, chain[1:]] - motion[:, chain[:-1]], axis=-1).sum(axis=1)
            # Shorter only: a longer trunk's targets keep the source's length or grow with it, and
            # measured against its new length they would read as compressed.
            scale = np.where(bones > 0, lengths[:, chain[1:]].sum(axis=1) / np.maximum(bones, 1e-300), 1.0)
            scale = np.minimum(scale, 1.0)
            motion = motion[:, :1] + (motion - motion[:, :1]) * scale[:, None, None]
        s_len = np.linalg.norm(motion[:, top] - motion[:, root], axis=-1)
        t_len = np.linalg.norm(targets[:, top] - targets[:, root], axis=-1)
        want = C.TRUNK_KEEP * s_len
        rows = np.flatnonzero(want - t_len > 1e-9 * np.maximum(s_len, 1e-300))
        if not rows.size:
            return
        m, t = motion[rows], targets[rows]
        cs, cd = m.mean(axis=1, keepdims=True), t.mean(axis=1, keepdims=True)
        rot = kabsch(m - cs, t - cd)
        down = -np.einsum("fij,j->fi", rot, self.up)
        fwd = np.einsum("fij,fj->fi", rot, self.forward[frames[rows]])
        deficit = want[rows] - t_len[rows]
        drop = np.minimum(C.HIPS_SHARE * deficit, C.HIPS_DROP_MAX * H) * (not hold_hips)
        hips = t[:, root] + drop[:, None] * down
        v = t[:, top] - hips
        ff, vf = np.einsum("fi,fi->f", fwd, fwd), np.einsum("fi,fi->f", v, fwd)
        c = np.einsum("fi,fi->f", v, v) - s_len[rows] ** 2       # room for the whole source spine
        with np.errstate(invalid="ignore", divide="ignore"):
            back = np.where(ff > 0.5, (-vf + np.sqrt(np.maximum(vf * vf - ff * c, 0.0))) / np.maximum(ff, 1e-300), 0.0)
        back = np.clip(back, 0.0, C.HIPS_BACK_MAX * H * (not hold_hips))
        if self.legs is not None:
            back = np.minimum(back, self._back_within_reach(hips, fwd, t, lengths[rows]))
        hips = hips - back[:, None] * fwd
        # The source's spine, turned with the body, curled forward to a common flexion at every
        # spine joint until it spans the new hips-to-head distance, then swung onto that line.
        shape = np.einsum("fij,fkj->fki", rot, m[:, chain] - m[:, root:root + 1])
        side = np.cross(-down, np.where(ff[:, None] > 0.5, fwd, _any_perpendicular(down)))
        shape = _curl_to(shape, side, np.linalg.norm(t[:, top] - hips, axis=-1))
        # A spine curled as far as it goes and still too long: the knees bend further.
        v = t[:, top] - hips
        span, vd = np.linalg.norm(shape[:, -1] - shape[:, 0], axis=-1), np.einsum("fi,fi->f", v, down)
        more = vd + np.sqrt(np.maximum(vd * vd - np.einsum("fi,fi->f", v, v) + span * span, 0.0))
        more = np.clip(more, 0.0, np.maximum(C.HIPS_DROP_MAX_CROUCH * H - drop, 0.0) * (not hold_hips))
        hips = hips + more[:, None] * down
        turn = swing(shape[:, -1], t[:, top] - hips)
        new = hips[:, None] + np.einsum("fij,fkj->fki", turn, shape)
        w = np.clip(deficit / (C.TRUNK_BLEND * H), 0.0, 1.0)[:, None]
        w = w * w * (3 - 2 * w)                                   # smooth onset: no pop at the threshold
        if self.legs is not None:
            for hip, _, _, _ in self.legs.chains:                   # the hip joints go with the pelvis
                t[:, hip] += w * (hips - t[:, root])
        old = t[:, chain[:-1]].copy()
        t[:, chain[:-1]] = (1 - w[..., None]) * old + w[..., None] * new[:, :-1]
        moved = t[:, chain[:-1]] - old
        for i, a in enumerate(chain[:-1].tolist()):
            js = self.below.get(a)
            if js is not None:
                t[:, js] += moved[:, i:i + 1] * (1.0 - affinity[rows][:, js, None])
        targets[rows] = t
        # The posture is a decision, not a hint: the spine follows it as firmly as a contact.
        a = affinity[rows][:, chain]
        affinity[rows[:, None], chain[None]] = np.maximum(a, w * C.TRUNK_AFFINITY)


def adapt(binding, deformed_mesh, bone_lengths=None, affinity_override=None, vertex_influence=None, *,
          pins=None, collisions=True, solver_options=None, progress=None, hinges=None, embeddings=(),
          solver="descriptors", collide_with=None, guide=None):
    """Adapt the bound motion to a deformed environment (and new bone lengths).

    Parameters
    ----------
    binding : Binding from ``bind``.
    deformed_mesh : TriMesh with the bind-time triangles; static (V,3) or
        animated over the motion's F frames.
    bone_lengths : None, (J,) float or {joint name: length}: new length of the
        bone ending at each joint (roots ignored, NaN = unchanged). The
        per-frame variation of the source lengths is kept proportionally.
    affinity_override : None, (J,) float in [0,1] (NaN = computed) or
        {joint name: affinity}. An overridden joint keeps its descriptor
        target: the ducking posture does not move it.
    vertex_influence : None or (V,) float in [0,1], the painted influence of
        each environment vertex; scales each descriptor's weight through its
        barycentric coordinates.
    pins : None or (F,J,3) float, positional constraints, NaN where free.
    collisions : push joints out of the environment along the closest normal.
    solver_options : optional dict of ``solvers.Warper`` settings (substeps,
        iterations, final_iterations, feed_forward, segments: 0 solves frame
        after frame instead of in batched segments); ``limits=None`` switches
        the joint limits off (bend and twist), ``hinges=None`` the hinge
        reflection, ``share_compression=False`` the ducking stage (on by
        default), ``keep_clearance=False`` the clearance kept from sculpted
        surfaces (``descriptors.clearance``; on by default).
    progress : optional callable ``(done, total)``; returning False cancels.
    hinges : optional {joint name: "AUTO" | "ON" | "OFF"}: hinges are found
        from the motion (AUTO); ON forces a joint to be a hinge, OFF never.
    embeddings : ``descriptors.Reembedded`` of moved contacts: over their frames, the targets
        blend to those of the re-embedded descriptors, and the joints they hold
        (``Reembedded.held``) are pinned on those targets (``contacts.continuity``).
    guide : optional ``characters.Guide``: targets from partners (F,J,3) blended in by their
        proximity against the environment's affinity, and collisions with the partners'
        capsules chained after the environment's (``characters.adapt_partners``).
    collide_with : optional static TriMesh the joints collide with instead of ``deformed_mesh``
        (an environment whose objects changed: ``transfer`` swaps an object for another).
    solver : "descriptors" (the relationship descriptors and the warping solver, default) or
        "interaction_mesh" (Ho, Komura and Tai 2010: ``solvers.interaction_mesh``, on the same
        binding; ``solver_options`` then holds its settings: morph_steps, settle_steps,
        window, overlap, environment_points, acceleration_weight, collision_weight,
        pin_weight). Either gives an ``AdaptResult``; with the interaction mesh ``targets``
        are still the descriptors' (for comparison) and ``bone_length_error`` is what its
        linearised bone lengths leave before the exact-length pass.

    Returns
    -------
    AdaptResult.
    """
    check_solver(solver)
    if solver == "interaction_mesh":
        return _adapt_interaction_mesh(binding, deformed_mesh, bone_lengths, affinity_override, vertex_influence,
                                       pins, collisions, solver_options, progress, hinges)
    rig = Rig(binding, bone_lengths, affinity_override, vertex_influence, pins, solver_options, hinges)
    rig.embeddings = list(embeddings)
    check_topology(binding, deformed_mesh)
    _check_mesh_frames(deformed_mesh, binding.frame_count, "deformed")
    targets, affinity = rig.targets(deformed_mesh)
    if guide is not None:
        targets, affinity = with_guide(rig, targets, affinity, guide)

    rig.hold_embeddings(targets)
    frames = np.arange(binding.frame_count)
    collide = None
    if collisions:
        # A new object (``transfer``) was never touched by the source: no dip into it is kept.
        collide = Collisions(deformed_mesh if collide_with is None else collide_with, binding.body_height,
                             binding.frame_count, keep_dips=collide_with is None)
        collide.set_targets(frames, targets)
    if guide is not None and guide.collide is not None:
        guide.collide.inner = collide
        collide = guide.collide
    start = binding.motion[0] if guide is None or guide.start is None else guide.start
    solved = rig.warper(collide).run(targets, start, affinity, progress)
    # A hand resting on a partner is not swung off it by the twist limits, as a pinned joint is
    # not: turning the spine's subtree back into its range flung a collar tie's hands 0.6-1.1 m
    # off the partner's shoulders when the narrowest window was repeated round after round (a
    # schedule tried), and the partner then chased them.
    touching = None if guide is None else guide.touching()
    positions = rig.finish(solved, frames, twist_held=touching)
    return _result(rig, solved, positions, targets, affinity, frames)


def with_guide(rig, targets, affinity, guide):
    """``rig``'s ``targets`` (n,J,3) and ``affinity`` (n,J) from the environment with a
    ``characters.Guide`` of the same frames: the trunk leaned for the guide's holds (in place),
    then the partners' targets blended in (``_guided``)."""
    binding = rig.binding
    if guide.lean is not None and rig.trunk is not None:
        joints, goals, weight = guide.lean.anchors(targets)
        rig.trunk.lean(targets, affinity, joints, goals, weight, guide.lean.max_degrees)
    d0 = binding.settings.get("min_distance_fraction", C.MIN_DISTANCE_FRACTION) * binding.body_height
    return _guided(targets, affinity, guide, binding.body_height, d0)


def _guided(targets, affinity, guide, body_height, d0):
    """Targets and affinities with a ``characters.Guide`` blended in: per joint, the guide's
    share is its proximity against the environment's affinity (a hand holding a partner's
    hand follows the partner; a foot on the floor, the floor), the affinity the larger.

    With the guide's ``distance`` (the nearest partner capsule's), each side's weight also fades
    by Eq. 5's window from the nearer side, the environment's distance read from its affinity
    (``d0 / affinity``, ``d0`` the descriptors' Eq. 7 distance): a hand resting on a partner
    lowered 0.2 m, 1.4 m over the floor, kept 5 % of the floor's pull (affinity 0.06) and
    ended 1.1 cm off the shoulder on every frame; as one window over both, the paper's
    reading, the floor is 0.9 body heights past the partner and weighs nothing."""
    t = np.asarray(guide.targets, float)
    prox = np.where(np.isnan(t[..., 0]), 0.0, np.asarray(guide.proximity, float))
    env = affinity
    if guide.distance is not None:
        window = C.WINDOW_FRACTION * body_height
        d_env = d0 / np.maximum(affinity, 1e-12)
        d_par = np.asarray(guide.distance, float)
        env = affinity * np.clip(1.0 - (d_env - d_par) / window, 0.0, 1.0)
        prox = prox * np.clip(1.0 - (d_par - d_env) / window, 0.0, 1.0)
        # A joint the environment holds (a foot on the floor) keeps its target, a partner's
        # touch or not: a hug's toes, touching the partner's, slid 5-13 cm a round with them.
        prox = np.where(affinity >= C.ENVIRONMENT_HELD, 0.0, prox)
    share = prox / np.maximum(prox + env, 1e-12)
    share = np.where(prox + env > 0, share, 0.0)
    out = targets + share[..., None] * (np.nan_to_num(t) - targets)
    return out, np.maximum(affinity, prox)


def _result(rig, solved, positions, targets, affinity, frames):
    """The ``AdaptResult`` of a solve: ``solved`` before the exact-length pass, ``positions`` after."""
    residual = np.linalg.norm(positions - targets, axis=-1).mean(axis=1)
    return AdaptResult(positions, targets, affinity, rig.bone_error(solved, frames), residual, rig.lengths,
                       rig.limit_violations(positions, frames), rig.unbound_names(), rig.hinge_names)


def _interaction_mesh_options(solver_options):
    """``(solver settings, Rig solver options)`` of ``adapt``'s ``solver_options`` for the
    interaction-mesh solver; InputError names an unknown setting."""
    options = dict(solver_options or {})
    known = {"morph_steps", "settle_steps", "window", "overlap", "environment_points", "acceleration_weight",
             "collision_weight", "pin_weight", "limit_weight", "limits", "keep_clearance"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"unknown interaction-mesh solver options {', '.join(unknown)}: use "
                         f"{', '.join(sorted(known))}")
    return options, ({"limits": options.pop("limits")} if "limits" in options else {})


def _adapt_interaction_mesh(binding, deformed_mesh, bone_lengths, affinity_override, vertex_influence, pins,
                            collisions, solver_options, progress, hinges):
    """``adapt`` with the interaction-mesh solver (see ``adapt``)."""
    options, rig_options = _interaction_mesh_options(solver_options)
    rig = Rig(binding, bone_lengths, affinity_override, vertex_influence, pins, rig_options, hinges)
    check_topology(binding, deformed_mesh)
    _check_mesh_frames(deformed_mesh, binding.frame_count, "deformed")
    targets, affinity = rig.targets(deformed_mesh)
    frames = np.arange(binding.frame_count)
    limits = None
    if len(rig.limits) and rig.solver_options.get("limits", True) is not None:
        limits = (rig.limits.pairs, rig.limits.min_distance(rig.lengths))
    cache = None
    if binding.frame_count <= interaction_mesh.CACHE_FRAMES:     # the tetrahedra, kept for re-bakes
        key = ("interaction_mesh", options.get("environment_points", interaction_mesh.ENVIRONMENT_POINTS),
               rig.bones.tobytes(), rig.glue.tobytes())
        cache = binding._joint_models.setdefault(key, {})
    # Clearance rows need the body's up (floors face it): from the trunk, when one is found.
    up = None if rig.trunk is None else rig.trunk.up
    solved, _ = interaction_mesh.solve(binding.motion, rig.bones, rig.lengths, rig.glue, binding.mesh, deformed_mesh,
                                       binding.triangles, binding.barycentrics, binding.body_height, pins=rig.pins,
                                       collisions=collisions, progress=progress, limits=limits, cache=cache, up=up,
                                       **options)
    positions = rig.finish(solved, frames)
    return _result(rig, solved, positions, targets, affinity, frames)


def adapt_group_interaction_mesh(bindings, deformed_mesh, bone_lengths=None, per_character=None, poses=None,
                                 progress=None, collisions=True, solver_options=None):
    """Characters adapted together by the interaction-mesh solver (Ho, Komura and Tai 2010, whose
    examples are mostly two characters in close contact): per frame every character's joints and
    the environment points near any of them are tetrahedralised together, so the Laplacian
    coordinates keep each character's joints where they were relative to the others' as well as
    to the surfaces, and the group is solved as one (``solvers.interaction_mesh.solve``).
    ``characters.adapt_partners(solver="interaction_mesh")`` calls it. Returns a list of
    ``AdaptResult`` (``targets``: the descriptors', for comparison).

    bindings : one per character, bound to one environment (the same triangles);
        deformed_mesh : that environment now. bone_lengths, per_character (affinity overrides,
        painted influence, pins, hinges), poses : as ``adapt_partners``': a character whose
        pose is given is pinned to it (``PIN_WEIGHT``) and returned as given.
    solver_options : the interaction-mesh settings (``adapt``'s), for the group.

    Departures (docs/how-it-works/solvers.md): the paper's bounding volumes between the body parts are
    not built; characters are kept apart by the interaction mesh between them alone (and each
    from the environment by its collisions).
    """
    bindings = list(bindings)
    n = len(bindings)
    if n < 1:
        raise InputError("no characters to adapt")
    F = bindings[0].frame_count
    if any(b.frame_count != F for b in bindings):
        raise InputError("the characters' clips must have the same frames: "
                         + ", ".join(str(b.frame_count) for b in bindings))
    original = bindings[0].mesh
    for b in bindings[1:]:
        if b.mesh.vertex_count != original.vertex_count or not np.array_equal(b.mesh.triangles, original.triangles):
            raise InputError("the interaction-mesh solver adapts characters bound to one environment: bind the "
                             "partners with the same objects")
    bone_lengths = [None] * n if bone_lengths is None else list(bone_lengths)
    poses = [None] * n if poses is None else list(poses)
    own = [dict(per_character[c] or {}) if per_character is not None else {} for c in range(n)]
    options, rig_options = _interaction_mesh_options(solver_options)
    rigs, offsets, parts = [], [], {k: [] for k in ("motion", "bones", "lengths", "glue", "pins", "tri", "bary",
                                                    "pairs", "least")}
    start = 0
    for c, b in enumerate(bindings):
        o = own[c]
        rig = Rig(b, bone_lengths[c], o.get("affinity_override"), o.get("vertex_influence"), o.get("pins"),
                  rig_options, o.get("hinges"))
        check_topology(b, deformed_mesh)
        J = b.motion.shape[1]
        pins = np.full((F, J, 3), np.nan) if rig.pins is None else np.array(rig.pins, float)
        if poses[c] is not None:
            pose = np.asarray(poses[c], float)
            if pose.shape != b.motion.shape:
                raise InputError(f"pose {c} must have the clip's shape {b.motion.shape}, got {pose.shape}")
            pins = pose
        parts["motion"].append(b.motion)
        parts["bones"].append(rig.bones + start)
        parts["lengths"].append(rig.lengths)
        parts["glue"].append(np.asarray(rig.glue, np.int64).reshape(-1, 2) + start)
        parts["pins"].append(pins)
        parts["tri"].append(b.triangles)
        parts["bary"].append(b.barycentrics)
        if len(rig.limits) and rig.solver_options.get("limits", True) is not None:
            parts["pairs"].append(np.asarray(rig.limits.pairs, np.int64) + start)
            parts["least"].append(rig.limits.min_distance(rig.lengths))
        rigs.append(rig)
        offsets.append(start)
        start += J
    _check_mesh_frames(deformed_mesh, F, "deformed")
    pins = np.concatenate(parts["pins"], axis=1)
    limits = None
    if parts["pairs"]:
        limits = (np.concatenate(parts["pairs"]), np.concatenate(parts["least"], axis=1))
    up = next((r.trunk.up for r in rigs if r.trunk is not None), None)
    H = float(np.mean([b.body_height for b in bindings]))
    solved, _ = interaction_mesh.solve(np.concatenate(parts["motion"], axis=1), np.concatenate(parts["bones"]),
                                       np.concatenate(parts["lengths"], axis=1), np.concatenate(parts["glue"]),
                                       original, deformed_mesh, np.concatenate(parts["tri"]),
                                       np.concatenate(parts["bary"]), H,
                                       pins=None if np.isnan(pins).all() else pins, collisions=collisions,
                                       progress=progress, limits=limits, up=up, **options)
    frames = np.arange(F)
    out = []
    for c, (b, rig, at) in enumerate(zip(bindings, rigs, offsets)):
        mine = solved[:, at:at + b.motion.shape[1]]
        targets, affinity = rig.targets(deformed_mesh)
        if poses[c] is not None:
            given = np.asarray(poses[c], float)
            out.append(_result(rig, given, given, targets, affinity, frames))
            continue
        out.append(_result(rig, mine, rig.finish(mine, frames), targets, affinity, frames))
    return out


class LiveSession:
    """Frame-by-frame adaptation for a live preview.

    ``pose(frame, vertices)`` returns the adapted joints (J,3) at ``frame``
    with the environment as it is now. Solved frames are cached with the
    targets they used; while the environment is unchanged, a frame whose
    predecessor is cached costs one warping step and equals what ``adapt``
    gives for it. After an edit (a static environment whose vertices change,
    or an animated one whose vertices at an already seen frame change) the
    cache is dropped; a frame without a cached predecessor is solved from
    ``window`` frames earlier, starting at their targets, which converges to
    within a small fraction of the body height of the full solve.
    """

    def __init__(self, binding, window=6, static_steps=60, collisions=True, **options):
        self.rig = Rig(binding, **options)
        self.binding = binding
        self.window = window
        self.static_steps = static_steps
        self.collisions = collisions
        self._sigs = {}
        self._solved = {}
        self._raw = {}          # targets and affinities of the frames seen, before easing jumps
        self._warper = None
        self._env = None
        self.exact_hits = 0
        #: how many times the solved frames were dropped (an edit, new influence)
        self.edits = 0

    def _signature(self, frame, vertices):
        """Something equal for equal environments: on a static one the vertices themselves (one
        comparison with the last ones, several times cheaper than hashing them every frame),
        on an animated one a hash per frame."""
        if not self.binding.mesh.animated:
            last = self._sigs.get(-1)
            if last is not None and last.shape == vertices.shape and np.array_equal(last, vertices):
                return last
            if last is not None:
                self._solved.clear()
                self._raw.clear()
                self.edits += 1
            self._sigs = {-1: vertices.copy()}
            return self._sigs[-1]
        sig = hashlib.blake2b(np.ascontiguousarray(vertices).tobytes(), digest_size=16).digest()
        if frame in self._sigs and self._sigs[frame] != sig:
            self._solved.clear()
            self._raw.clear()
            self._sigs.clear()
            self.edits += 1
        self._sigs[frame] = sig
        return sig

    def invalidate(self):
        self._solved.clear()
        self._raw.clear()
        self.edits += 1
        if self.binding.mesh.animated:
            self._sigs.clear()

    def set_influence(self, vertex_influence):
        """New painted influence (V,) or None; drops the cache when it changed."""
        old = self.rig.influence
        new = descriptor_influence(self.binding, vertex_influence)
        if (old is None) != (new is None) or (old is not None and not np.array_equal(old, new)):
            self.rig.influence = new
            self.invalidate()

    def _environment(self, vertices, sig):
        """TriMesh and collision constraint for these vertices, reused while they are unchanged."""
        cached = self._env
        same = cached is not None and (cached[0] is sig if isinstance(sig, np.ndarray) else cached[0] == sig)
        if same:
            return cached[1], cached[2]
        b = self.binding
        mesh = b.mesh.with_vertices(vertices)
        check_topology(b, mesh)
        collide = Collisions(mesh, b.body_height, b.frame_count) if self.collisions else None
        self._env = (sig, mesh, collide)
        return mesh, collide

    def environment(self, frame, vertices):
        """The TriMesh and collision constraint of the environment ``vertices`` (V,3) at ``frame``;
        an edit (vertices other than the last ones seen there) drops the solved frames."""
        return self._environment(vertices, self._signature(frame, vertices))

    def pose(self, frame, vertices):
        """Adapted joint positions (J,3) at ``frame`` for environment ``vertices`` (V,3)."""
        b = self.binding
        F = b.frame_count
        frame = int(np.clip(frame, 0, F - 1))
        vertices = np.asarray(vertices, dtype=float)
        sig = self._signature(frame, vertices)
        hit = self._solved.get(frame)
        if hit is not None:
            return hit[2].copy()
        mesh, collide = self._environment(vertices, sig)
        if self._warper is None:
            self._warper = self.rig.warper()
        warper = self._warper
        warper.collide = collide
        prev = self._solved.get(frame - 1)
        if frame == 0 or prev is not None:
            targets, affinity = self.targets(mesh, np.array([frame]))
            if collide is not None:
                collide.set_targets([frame], targets)
            if frame == 0:
                p = warper.first(targets[0], b.motion[0], affinity[0])
            else:
                p = warper.next(frame, prev[0], prev[1], targets[0], affinity[0])
                self.exact_hits += 1
            return self._keep(frame, p, targets[0])
        start = max(0, frame - self.window)
        frames = np.arange(start, frame + 1)
        targets, affinity = self.targets(mesh, frames)
        if collide is not None:
            collide.set_targets(frames, targets)
        p = warper.first(targets[0], targets[0], affinity[0], f=start, max_steps=self.static_steps,
                         free_first=False)
        for i in range(1, len(frames)):
            p = warper.next(int(frames[i]), p, targets[i - 1], targets[i], affinity[i])
        return self._keep(frame, p, targets[-1])

    def targets(self, mesh, frames):
        """Targets and affinities of consecutive ``frames`` as ``adapt`` has them: the targets of
        the frames within ``JUMP_REACH`` of them (cached until the environment changes), with
        their jumps eased together (``smooth_jumps``)."""
        rig, b = self.rig, self.binding
        # On an animated environment the preview is given one frame's surfaces at a time: the
        # neighbours' targets cannot be known, so jumps are not eased here (the bake eases them).
        if not rig.jump_guard or b.mesh.animated:
            return rig.targets(mesh, frames, guard=False)
        F = b.frame_count
        if not self._raw:
            J = b.motion.shape[1]
            self._raw = {"have": np.zeros(F, bool), "t": np.empty((F, J, 3)), "a": np.empty((F, J)),
                         "tested": np.zeros(F, bool), "jump": np.zeros(F, bool)}
        raw = self._raw
        lo, hi = max(0, int(frames[0]) - JUMP_REACH), min(F, int(frames[-1]) + JUMP_REACH + 1)
        missing = lo + np.flatnonzero(~raw["have"][lo:hi])
        if missing.size:
            if len(frames) == 1:
                # Playing: the frames ahead in one go (one frame's targets cost a third of
                # sixteen's), so that the next READ_AHEAD frames find theirs made.
                missing = lo + np.flatnonzero(~raw["have"][lo:min(F, hi + READ_AHEAD)])
            raw["t"][missing], raw["a"][missing] = rig.targets(mesh, missing, guard=False)
            raw["have"][missing] = True
            if self._env is not None and self._env[1] is mesh and self._env[2] is not None:
                self._env[2].prime(missing, raw["t"][missing])
        # ``smooth_jumps`` returns the targets as they are where no step of the window jumps: the
        # test of each step is kept (frame k: the step k -> k + 1), and the window eased only when
        # one of its steps jumps (the same test, the same result).
        untested = lo + np.flatnonzero(~raw["tested"][lo:hi - 1])
        if untested.size and np.isfinite(rig.source_step) and rig.source_step > 0:
            raw["jump"][untested] = jumps(b.motion[untested], b.motion[untested + 1], raw["t"][untested],
                                          raw["t"][untested + 1], rig.source_step).any(axis=1)
            raw["tested"][untested] = True
        if hi - lo < 3 or not raw["jump"][lo:hi - 1].any():
            return raw["t"][frames], raw["a"][frames]
        t = smooth_jumps(b.motion[lo:hi], raw["t"][lo:hi], rig.source_step)
        return t[frames - lo], raw["a"][frames]

    def _keep(self, frame, solved, target):
        """Cache frame's raw solve (the next frame starts from it), its target and its finished
        pose (what is shown: twist limits and exact lengths are not redone on every redraw)."""
        finished = self.rig.finish(solved[None], [frame])[0]
        self._solved[frame] = (solved, target, finished)
        return finished
