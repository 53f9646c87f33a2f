"""A stored binding read back (``Bound``), with the pose arithmetic the bake and the live preview
share: from adapted world joints to the bone matrices Blender will play, parents first."""

from __future__ import annotations

import hashlib

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import Binding
from ..core.skeleton.armature import (adapted_pose, affine_inverse, joint_layout, primary_children,
                                     rotation_scale, split_basis)
from ..core.skeleton.rotations import matrix_from_quat
from .base import _load_npz


def rest_lengths(rig):
    """(J,) rest length of every joint's bone (parent joint to joint) in armature space."""
    skeleton, head, tail = joint_layout(rig.names, rig.parents)
    joints = np.concatenate([rig.rest[:, :3, 3], rig.tails[tail >= 0]])
    return skeleton.bone_lengths(joints[None])[0]


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


class Bound:
    """A stored binding read back with what the bake and the live preview need."""

    def __init__(self, arm):
        stored = adapter.bound.read_bound(arm)
        self.arm, self.meta, self.rig, self.objects = arm, stored.meta, stored.rig, stored.objects
        self.full = stored.full                    # every bone of the armature
        #: the source action (None when it is gone), the stored contact rows, the garments' names
        self.source, self.contacts, self.garments = stored.source, stored.contacts, stored.garments
        self.binding = load_binding(stored.data)
        pose = _load_npz(stored.pose)
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
        #: ({joint: new length} or None, their names): see ``bone_lengths``
        self.new_lengths, self.changed_bones = self.bone_lengths()
        #: the bones whose location is keyed (``location_mask``)
        self.keyed_locations = self.location_mask()

    def bone_lengths(self):
        """({joint: new length} for bones whose rest length changed since bind, or None; their names).

        Whatever way a bone was edited (its tail moved, a child moved or not),
        each bone keeps the source's per-frame variation scaled by
        rest length now / rest length at bind.
        """
        if self.bind_rest_lengths is None or len(self.bind_rest_lengths) != len(self.binding.skeleton):
            return None, []
        now, then = rest_lengths(self.rig), self.bind_rest_lengths
        sk = self.binding.skeleton
        ok = (sk.parents >= 0) & (then > 1e-9 * max(then.max(), 1e-300))
        ratio = np.where(ok, now / np.where(ok, then, 1.0), 1.0)
        changed = np.flatnonzero(np.abs(ratio - 1.0) > 1e-5)
        if not changed.size:
            return None, []
        src = sk.bone_lengths(self.binding.motion).mean(axis=0)
        names = [sk.names[j] for j in changed.tolist()]
        return {n: float(src[j] * ratio[j]) for n, j in zip(names, changed.tolist())}, names

    def check_counts(self, counts):
        """SceneError when the environment's (vertex, triangle) counts per object are not the bound ones."""
        adapter.mesh.check_counts(self.objects, counts, self.meta)

    def read_environment(self, scene):
        """The environment now: static (V,3) or animated over the bound frames (F,V,3)."""
        return adapter.mesh.read_bound_environment(scene, self.objects, self.frames, self.meta)[0]

    def adapted_pose(self, positions, frames=None):
        """Posed bone matrices (F,B,4,4), armature space, that put the bones on adapted world joints (F,J,3)."""
        idx = slice(None) if frames is None else frames
        world = self.world[idx]
        inv = affine_inverse(world)
        to_arm = lambda p: np.einsum("fij,fkj->fki", inv[:, :3, :3], p) + inv[:, None, :3, 3]  # noqa: E731
        original = to_arm(self.binding.motion[idx])
        adapted = to_arm(positions)
        pose = np.tile(np.eye(4), original.shape[:1] + (len(self.rig.names), 1, 1))
        pose[..., :3, :3] = matrix_from_quat(self.rotations[idx])
        if self.stretch is not None:
            pose[..., :3, :3] = pose[..., :3, :3] @ self.stretch[idx]
        pose[..., :3, 3] = original[:, self.head_joint]
        return adapted_pose(self.binding.skeleton, self.head_joint, original, adapted, pose,
                            primary_children(self.rig.parents, self.rig.connected))

    def pose_basis(self, positions, frames=None):
        """Basis matrices (F,B,4,4) (each bone relative to its Blender parent, as
        ``PoseBone.matrix_basis``) that put the bones on adapted world joints (F,J,3)."""
        idx = slice(None) if frames is None else frames
        new = self.adapted_pose(positions, frames)
        return affine_inverse(self.rig.local)[None] @ affine_inverse(self.parent_pose(new, idx)) @ new

    def keyable_basis(self, positions, frames=None):
        """(rotation (F,B,3,3), scale (F,B,3), location (F,B,3), played pose (F,B,4,4)) to key,
        parents first, each bone relative to its parent *as the keys will play it*.

        A pose from constraints may carry shear (Stretch To with volume preservation, inherited
        non-uniform scale) that keys cannot hold; keying each bone against the parent Blender
        will actually play keeps every bone's head and tail where the adaptation put them
        (see ``rotation_scale``) instead of letting the loss pile up down the chain.
        """
        idx = slice(None) if frames is None else frames
        new = self.adapted_pose(positions, frames)
        rig = self.rig
        played = np.empty_like(new)
        F, B = new.shape[:2]
        rot, scale, loc = np.empty((F, B, 3, 3)), np.empty((F, B, 3)), np.empty((F, B, 3))
        inv_local = affine_inverse(rig.local)
        for b in rig.order.tolist():
            parent = self._parent_of(b, played, idx)
            basis = inv_local[b] @ affine_inverse(parent) @ new[:, b]
            rot[:, b], scale[:, b] = rotation_scale(basis[:, :3, :3])
            loc[:, b] = basis[:, :3, 3]
            keyed = np.broadcast_to(np.eye(4), basis.shape).copy()
            keyed[:, :3, :3] = rot[:, b] * scale[:, b, None, :]
            keyed[:, :3, 3] = loc[:, b]
            played[:, b] = parent @ rig.local[b] @ keyed
        return rot, scale, loc, played

    def parent_pose(self, pose, idx=slice(None)):
        """(F,B,4,4) pose of each bone's Blender parent: a bound bone's from ``pose``; an outside
        parent's carried by its anchor in ``pose`` as in the source, or with no anchor as the
        source played it (its keys are copied); identity for a root."""
        rig = self.rig
        out = np.broadcast_to(np.eye(4), pose.shape).copy()
        inside = (rig.parents >= 0) & np.array([o is None for o in rig.outer])
        out[:, inside] = pose[:, rig.parents[inside]]                  # the common case, in one go
        for b in np.flatnonzero([o is not None for o in rig.outer]).tolist():
            out[:, b] = self._parent_of(b, pose, idx)
        return out

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
        """World joints (F,J,3) of basis matrices (F,B,4,4): forward kinematics as Blender plays them."""
        rig = self.rig
        pose = np.empty_like(basis)
        for b in rig.order.tolist():
            pose[:, b] = self._parent_of(b, pose, idx) @ rig.local[b] @ basis[:, b]
        leaves = np.flatnonzero(self.tail_joint >= 0)
        length = np.linalg.norm(rig.tails - rig.rest[:, :3, 3], axis=-1)
        heads = pose[..., :3, 3]
        tails = heads[:, leaves] + pose[:, leaves][..., :3, 1] * length[leaves, None]
        joints = np.concatenate([heads, tails], axis=1)
        world = self.world[idx]
        return np.einsum("fij,fkj->fki", world[:, :3, :3], joints) + world[:, None, :3, 3]

    def pose_channels(self, positions, frames=None):
        """Basis rotations (F,B,4) and locations (F,B,3) for adapted world joints (F,J,3)."""
        return split_basis(self.pose_basis(positions, frames))

    def location_mask(self):
        return (self.rig.parents < 0) | ~self.rig.connected
