"""A stored binding read back (``Bound``), with the pose arithmetic the bake and the live preview
share: from adapted world joints to the bone matrices Blender will play, parents first."""

from __future__ import annotations

import functools
import hashlib
from types import SimpleNamespace

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import Binding
from ..core.skeleton.armature import (adapted_pose, affine_inverse, into_frame, joint_layout, primary_children,
                                     rotation_scale)
from ..core.skeleton.rotations import matrix_from_quat, quat_from_matrix
from .base import _load_npz


def carried(matrices, points):
    """Points (F,K,3) carried by matrices (F,4,4)."""
    return np.einsum("fij,fkj->fki", matrices[:, :3, :3], points) + matrices[:, None, :3, 3]


def uniform_scale(matrices):
    """The uniform scale of matrices (...,4,4): the cube root of their determinant's size."""
    return np.cbrt(np.abs(np.linalg.det(np.asarray(matrices, float)[..., :3, :3])))


def rigid_part(matrices):
    """Matrices (F,4,4) without their uniform scale (rotation and translation)."""
    out = np.array(matrices, float)
    out[:, :3, :3] /= uniform_scale(out)[:, None, None]
    return out


def rigid_move(then, now):
    """(F,4,4) the rigid move from object matrices ``then`` to ``now`` (F,4,4): where the object's
    origin went and how it turned, its scale aside (an object scaled about its origin did not
    move)."""
    return rigid_part(np.asarray(now, float)) @ affine_inverse(rigid_part(np.asarray(then, float)))


def rest_lengths(rig):
    """(J,) rest length of every joint's bone (parent joint to joint) in armature space."""
    skeleton, head, tail = joint_layout(rig.names, rig.parents)
    joints = np.concatenate([rig.rest[:, :3, 3], rig.tails[tail >= 0]])
    return skeleton.bone_lengths(joints[None])[0]


def part_placement(matrices):
    """The environment parts' world matrices (P,4,4) (NaN: a part that moves over time) as ID
    property values: ``part_matrices`` (16 floats a part, 0 for a moving part) and
    ``part_static`` (1 a part with one placement)."""
    static = np.isfinite(matrices).all(axis=(1, 2))
    return dict(part_matrices=[float(x) for x in np.where(static[:, None, None], matrices, 0.0).ravel()],
                part_static=[int(x) for x in static])


def placement_probe(world, joints):
    """What Bind stores to tell later how far the armature moved relative to its environment
    (``relative_move``), small enough for the panel to read at every redraw: the armature's
    matrices and a few joints' world positions on the first, middle and last frames."""
    F, J = joints.shape[:2]
    frames = np.unique([0, F // 2, F - 1])
    points = joints[frames][:, np.unique(np.linspace(0, J - 1, min(J, 8)).astype(int))]
    return dict(probe_frames=[int(f) for f in frames], probe_world=[float(x) for x in world[frames].ravel()],
                probe_points=[float(x) for x in points.ravel()], probe_count=int(points.shape[1]))


def stored_probe(meta):
    """(frame indices (K,), armature matrices (K,4,4), points (K,N,3)) stored at Bind, or None."""
    if "probe_frames" not in meta:
        return None
    frames = np.array(meta["probe_frames"], int)
    world = np.array(meta["probe_world"], float).reshape(-1, 4, 4)
    points = np.array(meta["probe_points"], float).reshape(len(frames), int(meta["probe_count"]), 3)
    return frames, world, points


def moved_since_bind(meta, placement, parts_now):
    """How far the armature moved relative to its environment since Bind (``relative_move``) with
    its placement now (F,4,4) over the bound frames, or (4,4) when it does not move over time;
    0 for a binding made before placement was stored."""
    probe, then = stored_probe(meta), stored_part_matrices(meta)
    if probe is None or then is None or len(then) != len(parts_now):
        return 0.0
    frames, world, points = probe
    now = placement[frames] if np.ndim(placement) == 3 else np.broadcast_to(placement, world.shape)
    return relative_move(world, now, points, then, parts_now)


def placement_message(name, moved, body_height):
    """What the panel and the bake say about an armature moved away from its environment since
    Bind ('' when it did not: moved with it, or not at all)."""
    if moved <= max(1e-3 * float(body_height), 1e-6):
        return ""
    return (f"the armature '{name}' moved {moved:.3g} m relative to its environment since Bind, and its "
            "descriptors pull it back: re-bind to adapt it where it is now (Re-bind Here)")


def stored_part_matrices(meta):
    """(P,4,4) the parts' matrices at bind (NaN for a moving part), or None for a binding made
    before they were stored."""
    if "part_matrices" not in meta:
        return None
    m = np.array(meta["part_matrices"], float).reshape(-1, 4, 4)
    m[~np.array(meta["part_static"], bool)] = np.nan
    return m


def relative_move(world_then, world_now, probes, parts_then, parts_now):
    """How far (world units) the character moved relative to its environment since Bind.

    world_then, world_now : (F,4,4) the armature's object matrices at bind and now;
    probes : (F,K,3) world points of the source motion (its joints on a few frames);
    parts_then, parts_now : (P,4,4) the environment parts' matrices (NaN: a part that moves).

    For each part, the distance between where the probes are now as the armature carries them
    (rigidly: an object scale is morphology, not a move) and where they would be had they
    moved with that part; the least over the parts (a character that moved with any part of
    its environment, its floor or its whole set, has not moved relative to it), the largest over
    the probes. An armature that stayed where it was has not moved either, whatever moved
    around it (a floor raised is an edit): the world counts as one more part. 0 when no part's
    placement is known.
    """
    carry = rigid_move(world_then, world_now)
    by_armature = carried(carry, probes)
    if not any(np.isfinite(then).all() and np.isfinite(now).all() for then, now in zip(parts_then, parts_now)):
        return 0.0
    best = float(np.linalg.norm(by_armature - probes, axis=-1).max())     # the world, where it stayed
    for then, now in zip(parts_then, parts_now):
        if not (np.isfinite(then).all() and np.isfinite(now).all()):
            continue
        with_part = now @ affine_inverse(then)
        moved = probes @ with_part[:3, :3].T + with_part[:3, 3]
        best = min(best, float(np.linalg.norm(moved - by_armature, axis=-1).max()))
    return best


#: Bindings read back this session, by a digest of their stored bytes (most recent last): a
#: re-bake reuses what the last bake learnt and computed from the source (the coefficient table,
#: hinges and limits, the interaction mesh's tetrahedra). A re-bind stores other bytes.
_LOADED = {}
_LOADED_MAX = 2


def load_binding(data):
    """``Binding.load(data)``, the same object again for the same bytes."""
    key = hashlib.sha1(data).hexdigest()
    binding = _LOADED.pop(key, None)
    if binding is None:
        binding = Binding.load(data)
    _LOADED[key] = binding
    while len(_LOADED) > _LOADED_MAX:
        _LOADED.pop(next(iter(_LOADED)))
    return binding


_POSES = {}


def _load_pose(data):
    """The stored pose's arrays, read-only, the same again for the same bytes (a Rigify rig's took
    55 ms to inflate, a third of a live preview's first frame)."""
    key = hashlib.sha1(data).hexdigest()
    pose = _POSES.pop(key, None)
    if pose is None:
        pose = _load_npz(data)
        for a in pose.values():
            a.setflags(write=False)
    _POSES[key] = pose
    while len(_POSES) > _LOADED_MAX:
        _POSES.pop(next(iter(_POSES)))
    return pose


class Bound:
    """A stored binding read back with what the bake and the live preview need."""

    def __init__(self, arm, scene=None):
        stored = adapter.bound.read_bound(arm, scene)
        self.arm, self.meta, self.rig, self.objects = arm, stored.meta, stored.rig, stored.objects
        self.full = stored.full                    # every bone of the armature
        #: the source action (None when it is gone), the stored contact rows, the garments' names
        self.source, self.contacts, self.garments = stored.source, stored.contacts, stored.garments
        #: what the last bake recorded for Use Source ({path:index: value}; empty: none since)
        self.restore = stored.restore
        self.binding = load_binding(stored.data)
        pose = _load_pose(stored.pose)
        self.rotations, self.world = pose["rotations"], pose["world"]
        self.stretch = pose.get("stretch")
        self.bind_rest_lengths = pose.get("rest_lengths")
        if list(pose["bones"]) != self.rig.names:
            raise SceneError(f"the bones of '{arm.name}' changed since bind: re-bind")
        outer = list(pose["outer"]) if "outer" in pose else []
        if outer != self.rig.outer_names:
            raise SceneError(f"the parents of the bound bones of '{arm.name}' changed since bind: re-bind")
        self.outer_pose = pose.get("outer_pose")
        skeleton, self.head_joint, self.tail_joint = joint_layout(self.rig.names, self.rig.parents)
        self.frames = np.arange(self.meta["frame_start"], self.meta["frame_end"] + 1)
        #: the armature's object matrices now, at every bound frame (``world``: at bind): the keys
        #: are written for this placement (adapter.placement)
        self.placement = stored.placement
        #: the armature's uniform object scale now against at bind: a character that grew (1: none)
        self.object_scale = float(np.median(uniform_scale(self.placement) / uniform_scale(self.world)))
        if abs(self.object_scale - 1.0) < 1e-6:
            self.object_scale = 1.0
        #: (F,4,4) the rigid move of the armature since Bind (None: it did not move). The core works
        #: where the character was bound: the world now comes in through ``into_bind`` and the
        #: adapted joints go out through it, so a character moved with its set (even by an animated
        #: parent) is adapted exactly as if nothing moved.
        self.use_carry(rigid_move(self.world, self.placement))
        #: how far the armature moved relative to its environment since Bind (``relative_move``),
        #: and what the panel and the bake say of it
        self.moved = moved_since_bind(self.meta, self.placement, stored.part_matrices)
        self.placement_note = placement_message(arm.name, self.moved, self.binding.body_height)
        #: ({joint: new length} or None, their names): see ``bone_lengths``
        self.new_lengths, self.changed_bones = self.bone_lengths()
        #: the bones whose location is keyed (``location_mask``)
        self.keyed_locations = self.location_mask()

    def bone_lengths(self):
        """({joint: new length} for bones whose rest length changed since bind, or None; their names).

        Whatever way a bone was edited (its tail moved, a child moved or not),
        each bone keeps the source's per-frame variation scaled by
        rest length now / rest length at bind, times the armature's object scale now / at bind
        (an armature scaled after Bind is a character that grew).
        """
        sk = self.binding.skeleton
        if self.bind_rest_lengths is None or len(self.bind_rest_lengths) != len(sk):
            ratio = np.where(sk.parents >= 0, self.object_scale, 1.0)
        else:
            now, then = rest_lengths(self.rig), self.bind_rest_lengths
            ok = (sk.parents >= 0) & (then > 1e-9 * max(then.max(), 1e-300))
            ratio = np.where(ok, now / np.where(ok, then, 1.0), 1.0) * np.where(ok, self.object_scale, 1.0)
        changed = np.flatnonzero(np.abs(ratio - 1.0) > 1e-5)
        if not changed.size:
            return None, []
        src = sk.bone_lengths(self.binding.motion).mean(axis=0)
        names = [sk.names[j] for j in changed.tolist()]
        return {n: float(src[j] * ratio[j]) for n, j in zip(names, changed.tolist())}, names

    def use_carry(self, carry):
        """Adapt in the frame ``carry`` (F,4,4) brings the binding to (None: the world's): a
        character's own move since Bind, or in a group of partners the baked character's, so that
        the group is adapted in one frame."""
        if carry is not None and np.abs(carry - np.eye(4)).max() <= 1e-9:
            carry = None
        self.carry = carry
        self.frame_to_armature = affine_inverse(self.placement) if carry is None else \
            affine_inverse(self.placement) @ carry

    def into_bind(self, points, frames=None, collapse=True):
        """World points now into the binding's frame: (N,3) for one placement, (F,N,3) over the bound
        frames (or ``frames``); an armature that did not move leaves them as they are. With
        ``collapse``, points that come out the same on every frame (an environment that moved with
        the armature) come out once: (N,3). The bound environment's vertices that come out where
        they were bound, to float precision, are the bound ones (``into_frame``'s ``like``)."""
        if self.carry is None:
            return points
        mesh = self.binding.mesh
        like = mesh.vertices if not mesh.animated and points.shape[-2:] == mesh.vertices.shape else None
        return into_frame(self.carry if frames is None else self.carry[frames], points, collapse, like=like)

    def body_into_bind(self, points, frame=0):
        """Points (...,3) that move with the character (played on the armature now: its skin, its
        other actions) into the binding's frame at bound frame index ``frame``: the armature's
        whole move since Bind undone, its scale included."""
        m = self.world[frame] @ affine_inverse(self.placement[frame])
        return points @ m[:3, :3].T + m[:3, 3]

    def out_of_bind(self, positions, frames=None):
        """Adapted joints (F,J,3) from the binding's frame into the world now (``into_bind``'s inverse)."""
        if self.carry is None:
            return positions
        return carried(self.carry if frames is None else self.carry[frames], positions)

    def check_counts(self, counts):
        """SceneError when the environment's (vertex, triangle) counts per object are not the bound ones."""
        adapter.mesh.check_counts(self.objects, counts, self.meta)

    def read_environment(self, scene):
        """The environment now: static (V,3) or animated over the bound frames (F,V,3)."""
        return adapter.mesh.read_bound_environment(scene, self.objects, self.frames, self.meta)[0]

    def adapted_pose(self, positions, frames=None):
        """Posed bone matrices (F,B,4,4), armature space, that put the bones on adapted world joints (F,J,3)."""
        idx = slice(None) if frames is None else frames
        original = carried(affine_inverse(self.world[idx]), self.binding.motion[idx])   # as bound
        adapted = carried(self.frame_to_armature[idx], positions)                      # where it is now
        pose = np.tile(np.eye(4), original.shape[:1] + (len(self.rig.names), 1, 1))
        pose[..., :3, :3] = self._bound_poses[idx]
        pose[..., :3, 3] = original[:, self.head_joint]
        return adapted_pose(self.binding.skeleton, self.head_joint, original, adapted, pose, self._primary)

    # What a live frame would otherwise rebuild, made once per Bound (the stored pose does not
    # change under it: a new binding is a new Bound).

    @functools.cached_property
    def _bound_poses(self):
        """(F,B,3,3) the bones' posed rotation and stretch at bind, every frame (F x B x 72 bytes:
        7 MB for a 600-frame Rigify clip)."""
        rot = matrix_from_quat(self.rotations)
        return rot if self.stretch is None else rot @ self.stretch

    @functools.cached_property
    def _primary(self):
        """``primary_children`` of the bound rig."""
        return primary_children(self.rig.parents, self.rig.connected)

    @functools.cached_property
    def _inv_local(self):
        return affine_inverse(self.rig.local)

    def keyable_basis(self, positions, frames=None, outer=None):
        """(rotation (F,B,3,3), scale (F,B,3), location (F,B,3), played pose (F,B,4,4)) to key,
        parents first, each bone relative to its parent *as the keys will play it* (``outer``
        (F,O,4,4): the outside parents relative to their anchors (as they are when they have none)
        as Blender plays them, in place of ``outer_pose``; see ``pose_now``).

        A pose from constraints may carry shear (Stretch To with volume preservation, inherited
        non-uniform scale) that keys cannot hold; keying each bone against the parent Blender
        will actually play keeps every bone's head and tail where the adaptation put them
        (see ``rotation_scale``) instead of letting the loss pile up down the chain. The bones of
        one depth go together (``_levels``): a Rigify rig's 160 bones are 8 steps, not 160 (one
        frame, measured: 23-38 ms bone by bone, 3.3-4.4 ms by depth).
        """
        idx = slice(None) if frames is None else frames
        new = self.adapted_pose(positions, frames)
        rig = self.rig
        F, B = new.shape[:2]
        if self._rigid_keys(new):
            # Every bone rigid (no stretch, no shear) and none hanging from an outside parent:
            # each bone against its parent in one step, and the keys play the pose exactly (a
            # live frame of a 27-joint character: about 1 ms less, twice that for a pair).
            parent = np.empty_like(new)
            roots = rig.parents < 0
            parent[:, roots] = np.eye(4)
            parent[:, ~roots] = new[:, rig.parents[~roots]]
            basis = self._inv_local @ affine_inverse(parent) @ new
            return basis[..., :3, :3].copy(), np.ones((F, B, 3)), basis[..., :3, 3].copy(), new.copy()
        played = np.empty_like(new)
        rot, scale, loc = np.empty((F, B, 3, 3)), np.empty((F, B, 3)), np.empty((F, B, 3))
        absolute = self.played_outer[idx] if outer is None and self.played_outer is not None else None
        relative = None if absolute is not None else (self.outer_pose[idx] if outer is None else outer)
        for lv in self._levels:
            bones = lv.bones
            parent = np.empty((F, len(bones), 4, 4))
            parent[:, lv.roots] = np.eye(4)
            parent[:, lv.inside] = played[:, lv.parents]
            if lv.outer.size:
                if absolute is not None:
                    parent[:, lv.held] = absolute[:, lv.outer]
                else:
                    rel = relative[:, lv.outer]
                    parent[:, lv.held] = rel
                    if lv.anchored.size:
                        parent[:, lv.held[lv.anchored]] = played[:, lv.anchors] @ rel[:, lv.anchored]
            basis = lv.inv_local @ affine_inverse(parent) @ new[:, bones]
            r, sc = rotation_scale(basis[..., :3, :3])
            rot[:, bones], scale[:, bones], loc[:, bones] = r, sc, basis[..., :3, 3]
            basis[..., :3, :3] = r * sc[..., None, :]                     # what the keys play
            played[:, bones] = parent @ lv.local @ basis
        return rot, scale, loc, played

    def _rigid_keys(self, new):
        """Whether ``keyable_basis`` may key ``new`` (F,B,4,4) bone by bone against its parent at
        once: no bone hangs from an outside parent and every posed bone is a proper rotation."""
        if len(self._outer_layout[1]):
            return False
        r = new[..., :3, :3]
        gram = np.einsum("...ji,...jk->...ik", r, r)
        return bool(np.abs(gram - np.eye(3)).max() < 1e-9 and np.linalg.det(r).min() > 0.0)

    @functools.cached_property
    def _levels(self):
        """The bound bones by depth, each bone after the bone it hangs from (its parent, or its
        outside parent's anchor). Per depth: ``bones``; the positions among them of the roots, of
        those whose parent is bound (``inside``, and those ``parents``), and of those whose parent
        is outside (``held``, its index in ``rig.outer_names``: ``outer``; ``anchored``: the
        positions in ``held`` of those with an anchor, and their ``anchors``); their rest
        matrices relative to their parents and the inverses (``local``, ``inv_local``)."""
        rig = self.rig
        inside, bones, outer, anchors = self._outer_layout
        up = np.full(len(rig.names), -1, np.int64)
        up[inside] = rig.parents[inside]
        up[bones] = anchors
        depth = np.zeros(len(rig.names), np.int64)
        for b in rig.order.tolist():                     # both are Blender ancestors: parents first
            if up[b] >= 0:
                depth[b] = depth[up[b]] + 1
        where = {int(b): i for i, b in enumerate(bones.tolist())}
        levels = []
        for d in range(int(depth.max()) + 1 if len(depth) else 0):
            level = np.flatnonzero(depth == d)
            own = np.flatnonzero(inside[level])
            held = np.array([i for i, b in enumerate(level.tolist()) if b in where], np.int64)
            k = np.array([where[b] for b in level[held].tolist()], np.int64)
            anchored = np.flatnonzero(anchors[k] >= 0)
            roots = np.setdiff1d(np.arange(len(level)), np.concatenate([own, held]))
            levels.append(SimpleNamespace(bones=level, roots=roots, inside=own, parents=rig.parents[level[own]],
                                          held=held, outer=outer[k], anchored=anchored,
                                          anchors=anchors[k][anchored], local=rig.local[level],
                                          inv_local=self._inv_local[level]))
        return levels

    @functools.cached_property
    def _outer_layout(self):
        """``(inside (B,) bool, bones (k,), outer (k,), anchors (k,))``: the bones whose parent is
        bound, and those whose parent is outside with its index in ``rig.outer_names`` and its
        anchor (-1: none) (a Rigify rig's 116 outside parents one by one took 1 ms of each live
        frame)."""
        rig = self.rig
        has = np.array([o is not None for o in rig.outer], bool)
        bones = np.flatnonzero(has)
        outer = np.array([rig.outer_names.index(rig.outer[b]) for b in bones.tolist()], np.int64)
        anchors = np.array([rig.anchors[rig.outer[b]] for b in bones.tolist()], np.int64)
        return (rig.parents >= 0) & ~has, bones, outer, anchors

    def _parent_of(self, b, pose, idx):
        rig = self.rig
        name = rig.outer[b]
        if name is None:
            return pose[:, rig.parents[b]] if rig.parents[b] >= 0 else np.eye(4)
        i = rig.outer_names.index(name)
        if self.played_outer is not None:
            return self.played_outer[idx, i]
        rel = self.outer_pose[idx, i]
        a = rig.anchors[name]
        return rel if a < 0 else pose[:, a] @ rel

    played_outer = None

    def outer_world(self, played, idx):
        """(F,O,4,4) the outside parents as predicted for the bound bones' ``played`` pose."""
        rig = self.rig
        out = np.empty((len(idx), len(rig.outer_names), 4, 4))
        for i, name in enumerate(rig.outer_names):
            a = rig.anchors[name]
            out[:, i] = self.outer_pose[idx, i] if a < 0 else played[:, a] @ self.outer_pose[idx, i]
        return out

    def use_played_outer(self, matrices, idx):
        """Key against the outside parents as Blender played them (F,O,4,4) on frames ``idx``."""
        full = np.broadcast_to(np.eye(4), (len(self.frames), len(self.rig.outer_names), 4, 4)).copy()
        full[idx] = matrices
        self.played_outer = full

    def forward(self, basis, idx=slice(None)):
        """Joints (F,J,3) of basis matrices (F,B,4,4), forward kinematics as Blender plays them, in the
        frame the adaptation works in (the world, or where the character was bound: ``into_bind``)."""
        rig = self.rig
        pose = np.empty_like(basis)
        for b in rig.order.tolist():
            pose[:, b] = self._parent_of(b, pose, idx) @ rig.local[b] @ basis[:, b]
        leaves = np.flatnonzero(self.tail_joint >= 0)
        length = np.linalg.norm(rig.tails - rig.rest[:, :3, 3], axis=-1)
        heads = pose[..., :3, 3]
        tails = heads[:, leaves] + pose[:, leaves][..., :3, 1] * length[leaves, None]
        joints = np.concatenate([heads, tails], axis=1)
        return carried(affine_inverse(self.frame_to_armature[idx]), joints)

    @functools.cached_property
    def _anchored(self):
        """(O,) bool: which outside parents have a bound anchor."""
        return np.array([self.rig.anchors[n] >= 0 for n in self.rig.outer_names], bool)

    @functools.cached_property
    def outer_watch(self):
        """The bones the live preview reads back at each frame (``pose_now``): the outside parents,
        then the bound anchors of those that have one."""
        rig = self.rig
        return list(rig.outer_names) + [rig.names[rig.anchors[n]] for n, on in zip(rig.outer_names, self._anchored)
                                        if on]

    def pose_now(self, positions, frame, matrices=None):
        """(quaternions (B,4), locations (B,3), scales (B,3)) that pose the bones on adapted world
        joints ``positions`` (J,3) at bound frame index ``frame``, as the bake keys them
        (``keyable_basis``), the outside parents as Blender plays them now: ``matrices``, the
        armature-space matrices of ``outer_watch`` as last evaluated. Each outside parent is
        taken relative to its anchor there (it is carried by the anchor's new pose), or as it is
        when it has none; without ``matrices``, as the source played it (``outer_pose``)."""
        outer = None
        if matrices is not None and len(self.rig.outer_names):
            O = len(self.rig.outer_names)
            outer = np.array(matrices[:O], float)
            outer[self._anchored] = affine_inverse(np.asarray(matrices[O:], float)) @ outer[self._anchored]
            outer = outer[None]
        rot, scale, loc, _ = self.keyable_basis(np.asarray(positions)[None], np.array([frame]), outer)
        return quat_from_matrix(rot[0]), loc[0], scale[0]

    def location_mask(self):
        return (self.rig.parents < 0) | ~self.rig.connected
