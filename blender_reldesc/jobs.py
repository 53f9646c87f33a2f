"""Bind and bake: the jobs shared by the operators, the live preview and the command line.

Each job checks everything first, then changes anything (a failed job leaves
the file as it was), and returns a report dictionary with counts and timings.
"""

from __future__ import annotations

import hashlib
import io
import time
from dataclasses import dataclass

import bpy
import numpy as np

import json

from . import adapter
from .adapter import SceneError
from .core import Binding, TriMesh, adapt, bind
from .core.solvers.interaction_mesh import check_solver
from .core.contacts import ContactError, adapt_with_contacts, contact_report
from .core.keys import (INTERPOLATIONS, Channels, bezier_handles, euler_compatible, play, reduce_keys,
                        rotation_matrices)
from .core.skeleton.armature import (adapted_pose, affine_inverse, axis_angle_from_quat, euler_from_quat,
                                     joint_layout, polar, primary_children, rotation_scale, sign_continuous,
                                     split_basis)
from .core.skeleton.rotations import matrix_from_quat, quat_from_matrix
from .optional import feature

ADAPTED_SUFFIX = ".adapted"


def _print_progress(label):
    state = {"last": -1}

    def progress(done, total):
        pct = int(100 * done / max(total, 1))
        if pct >= state["last"] + 10:
            state["last"] = pct
            print(f"reldesc: {label} {pct}%", flush=True)
        return True

    return progress


def _save_npz(**arrays):
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _load_npz(data):
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


class BindJob:
    """Bind ``arm``'s current action to the meshes of collection ``environment``.

    ``read`` (Blender data), ``compute`` (core only: safe in a worker thread)
    and ``write`` (stores the binding on the armature) run in that order;
    ``run`` does all three.
    """

    label = "bind"

    def __init__(self, scene, arm, environment, body_height=0.0, radius_factor=0.5, warn=print, bone_set="DEFORM"):
        self.scene, self.arm, self.environment = scene, arm, environment
        self.body_height, self.radius_factor, self.warn = body_height, radius_factor, warn
        self.bone_set = bone_set or "DEFORM"
        #: the armatures bound with this one as partners (``partners.PartnersBindJob``)
        self.partners = []
        #: its capsule radii per joint (None: a share of the bone's length), measured at bind
        self.capsule_radii = None

    def read(self):
        t0 = time.perf_counter()
        scene, arm = self.scene, self.arm
        self.action = adapter.source_action(arm)
        start, end = adapter.frame_range(self.action)
        self.frames = np.arange(start, end + 1)
        full = adapter.read_rig(arm)
        self.rig = rig = adapter.select_bones(arm, full, self.bone_set)
        self.skeleton, _, tail_joint = joint_layout(rig.names, rig.parents)
        objects, ignored = adapter.environment_objects(self.environment)
        if ignored:
            self.warn(f"ignored non-mesh objects in '{self.environment}': {', '.join(ignored)}")
        self.objects = objects
        joints, pose, self.world, self.motion_path = adapter.read_source_motion(
            scene, arm, self.action, self.frames, full, rig.index[tail_joint >= 0])
        B = len(full.names)
        self.joints = np.concatenate([joints[:, rig.index], joints[:, B:]], axis=1)
        rot, stretch = polar(pose[:, rig.index, :3, :3])
        self.rotations = quat_from_matrix(rot)
        # Scale (keyed, inherited or from constraints) is kept beside the rotation, when there is any.
        self.stretch = None if np.abs(stretch - np.eye(3)).max() < 1e-6 else stretch
        # Outside parents: relative to their anchor (the set bone above them) or, without one, as played.
        self.outer_pose = np.empty((len(self.frames), len(rig.outer_names), 4, 4))
        for i, name in enumerate(rig.outer_names):
            o, a = full.names.index(name), rig.anchors[name]
            self.outer_pose[:, i] = pose[:, o] if a < 0 else affine_inverse(pose[:, rig.index[a]]) @ pose[:, o]
        self.animated = any(adapter.is_animated(ob) for ob in objects)
        if self.animated:
            verts, tris, self.counts = adapter.read_environment_frames(scene, objects, self.frames)
        else:
            verts, tris, self.counts = adapter.read_environment(bpy.context.evaluated_depsgraph_get(), objects)
        self.mesh = TriMesh(verts, tris)
        self.read_seconds = time.perf_counter() - t0

    def compute(self, progress=None):
        t0 = time.perf_counter()
        self.binding = bind(self.skeleton, self.joints, self.mesh, self.body_height or None,
                            radius_factor=self.radius_factor, progress=progress)
        self.compute_seconds = time.perf_counter() - t0

    def write(self):
        binding, mesh = self.binding, self.mesh
        meta = dict(action=self.action.name, environment=self.environment,
                    objects=[ob.name for ob in self.objects],
                    vertex_counts=[c[0] for c in self.counts], triangle_counts=[c[1] for c in self.counts],
                    frame_start=int(self.frames[0]), frame_end=int(self.frames[-1]), animated=bool(self.animated),
                    descriptors=int(binding.descriptor_count), joints=len(self.skeleton),
                    body_height=float(binding.body_height), radius_factor=float(self.radius_factor),
                    degenerate=int(mesh.degenerate_count), motion_read=self.motion_path,
                    bone_set=self.bone_set, bones=len(self.rig.names), partners=list(self.partners))
        if self.capsule_radii is not None:
            # -1 where unknown (ID properties hold no None or NaN)
            meta["capsule_radii"] = [float(r) if np.isfinite(r) else -1.0 for r in self.capsule_radii]
        extra = {} if self.stretch is None else {"stretch": self.stretch}
        pose = _save_npz(rotations=self.rotations, world=self.world, bones=np.asarray(self.rig.names, dtype=str),
                         rest_lengths=rest_lengths(self.rig), outer_pose=self.outer_pose,
                         outer=np.asarray(self.rig.outer_names, dtype=str), **extra)
        adapter.store_binding(self.arm, binding.to_bytes(), pose, meta, action=self.action,
                              collection=bpy.data.collections.get(self.environment))
        # Once the adapted action is assigned nothing else may use the source:
        # a fake user keeps Blender from dropping it when the file is saved.
        self.action.use_fake_user = True
        return dict(meta, frames=len(self.frames), read_seconds=self.read_seconds,
                    compute_seconds=self.compute_seconds)

    def run(self, progress=None):
        self.read()
        self.compute(progress or _print_progress(self.label))
        return self.write()


def bind_job(scene, arm, environment, body_height=0.0, radius_factor=0.5, progress=None, warn=print,
             bone_set="DEFORM"):
    """Bind and store; returns the report dictionary.

    bone_set : the bones that get descriptors and keys: 'DEFORM' (default), 'ALL',
    or the name of a bone collection (see ``adapter.bone_set_indices``).
    """
    return BindJob(scene, arm, environment, body_height, radius_factor, warn, bone_set).run(progress)


def save_binding_file(arm, path):
    """Write ``arm``'s stored binding to ``path`` (.npz): the core's binding file (``Binding.load``
    reads it) plus what Blender needs beside it (the source pose and the bind report), so other
    shots whose environment is an edited copy of the bound one can bake from it."""
    data, pose, meta = adapter.load_stored(arm)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["blender_pose"] = np.frombuffer(pose, np.uint8)
    arrays["blender_meta"] = np.asarray(json.dumps(meta))
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_binding_file(arm, path):
    """Store the binding saved by ``save_binding_file`` on ``arm`` (replacing any), after checking
    it fits: the same bones, the bound action and environment meshes present with the same
    topology. Raises SceneError saying what does not fit."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "blender_pose" not in z.files or "blender_meta" not in z.files:
                raise SceneError(f"{path} is a core binding without the Blender part: save it with "
                                 "'bind ... --save-binding'")
            pose = z["blender_pose"].tobytes()
            meta = json.loads(str(z["blender_meta"]))
            core = {k: z[k] for k in z.files if not k.startswith("blender_")}
    except (OSError, ValueError, KeyError) as e:
        if isinstance(e, SceneError):
            raise
        raise SceneError(f"cannot read the binding file {path}: {e}") from None
    buf = io.BytesIO()
    np.savez_compressed(buf, **core)
    data = buf.getvalue()
    bones = list(_load_npz(pose)["bones"])
    rig = adapter.select_bones(arm, adapter.read_rig(arm), meta.get("bone_set", "ALL"))
    if bones != rig.names:
        raise SceneError(f"the bones of '{arm.name}' are not those of the binding in {path}: bind this rig")
    action = bpy.data.actions.get(meta["action"])
    if action is None:
        raise SceneError(f"the binding in {path} is of action '{meta['action']}', which is not in this file")
    missing = [n for n in meta["objects"] if bpy.data.objects.get(n) is None]
    if missing:
        raise SceneError(f"the environment of the binding in {path} is missing here: {', '.join(missing)}")
    objects = [bpy.data.objects[n] for n in meta["objects"]]
    _, _, counts = adapter.read_environment(bpy.context.evaluated_depsgraph_get(), objects, triangles=False)
    if [c[0] for c in counts] != list(meta["vertex_counts"]):
        changed = [ob.name for ob, c, v in zip(objects, counts, meta["vertex_counts"]) if c[0] != v]
        raise SceneError(f"the environment's topology differs from the binding in {path} ({', '.join(changed)}): "
                         "bind this shot")
    adapter.store_binding(arm, data, pose, meta, action=action,
                          collection=bpy.data.collections.get(meta["environment"]))
    action.use_fake_user = True
    return meta


def bound_objects(meta, arm):
    """The environment meshes of ``arm``'s stored binding; SceneError when they changed since bind."""
    objects, _ = adapter.environment_objects(adapter.bound_environment(arm, meta))
    names = [ob.name for ob in objects]
    if names != list(meta["objects"]):
        raise SceneError(f"the meshes of '{meta['environment']}' changed since bind "
                         f"({', '.join(names)} now, {', '.join(meta['objects'])} then): re-bind")
    return objects


def environment_status(meta, arm):
    """(matches, message) for the panel: a cheap check of names and, on meshes
    without modifiers, vertex counts (the bake checks the evaluated geometry)."""
    try:
        objects = bound_objects(meta, arm)
    except SceneError as e:
        return False, str(e)
    if not all(ob.modifiers or len(ob.data.vertices) == v for ob, v in zip(objects, meta["vertex_counts"])):
        return False, "environment topology changed since bind: re-bind"
    return True, "Environment matches the binding"


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
        data, pose, self.meta = adapter.load_stored(arm)
        self.binding = load_binding(data)
        pose = _load_npz(pose)
        self.rotations, self.world = pose["rotations"], pose["world"]
        self.stretch = pose.get("stretch")
        # Bindings from before bone sets covered every bone.
        self.rig = adapter.select_bones(arm, adapter.read_rig(arm), self.meta.get("bone_set", "ALL"))
        self.bind_rest_lengths = pose.get("rest_lengths")
        if list(pose["bones"]) != self.rig.names:
            raise SceneError(f"the bones of '{arm.name}' changed since bind: re-bind")
        outer = list(pose["outer"]) if "outer" in pose else []
        if outer != self.rig.outer_names:
            raise SceneError(f"the parents of the bound bones of '{arm.name}' changed since bind: re-bind")
        self.outer_pose = pose.get("outer_pose")
        skeleton, self.head_joint, self.tail_joint = joint_layout(self.rig.names, self.rig.parents)
        self.frames = np.arange(self.meta["frame_start"], self.meta["frame_end"] + 1)
        self.arm = arm
        self.objects = self._objects()

    def _objects(self):
        return bound_objects(self.meta, self.arm)

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
        if ([c[0] for c in counts] != list(self.meta["vertex_counts"])
                or [c[1] for c in counts] != list(self.meta["triangle_counts"])):
            changed = [ob.name for ob, c, v, t in zip(self.objects, counts, self.meta["vertex_counts"],
                                                      self.meta["triangle_counts"]) if c != (v, t)]
            raise SceneError(f"environment topology changed since bind ({', '.join(changed)}): re-bind")

    def read_environment(self, scene):
        """The environment now: static (V,3) or animated over the bound frames (F,V,3)."""
        if self.meta["animated"] or any(adapter.is_animated(ob) for ob in self.objects):
            verts, _, counts = adapter.read_environment_frames(scene, self.objects, self.frames)
        else:
            verts, _, counts = adapter.read_environment(bpy.context.evaluated_depsgraph_get(), self.objects)
        self.check_counts(counts)
        return verts

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


def bone_overrides(arm, bound, warn=None):
    """{joint name: affinity} from the bones' ``reldesc`` overrides (when the property exists).

    Overrides on bones that are not in the binding are ignored, with a warning naming them.
    """
    out, stray = {}, []
    names = set(bound.binding.skeleton.names)
    for pb in arm.pose.bones:
        props = getattr(pb, "reldesc", None)
        if props is not None and props.use_affinity_override:
            if pb.name in names:
                out[pb.name] = float(props.affinity)
            else:
                stray.append(pb.name)
    if stray and warn is not None:
        warn(f"affinity overrides ignored on bones not in the binding: {', '.join(stray)}")
    return out


def hinge_overrides(arm, bound):
    """{joint name: "ON" | "OFF"} from the bones' ``reldesc.hinge`` (AUTO bones are left out)."""
    names = set(bound.binding.skeleton.names)
    out = {}
    for pb in arm.pose.bones:
        mode = getattr(getattr(pb, "reldesc", None), "hinge", "AUTO")
        if mode != "AUTO" and pb.name in names:
            out[pb.name] = mode
    return out


def read_influence(scene, bound, group=None, warn=None):
    """(V,) painted influence of the bound environment, or None when no mesh has the group.

    A group of that name on meshes outside the environment is ignored, with a warning naming them.
    """
    group = scene.reldesc.influence_group if group is None and hasattr(scene, "reldesc") else group
    if not group:
        return None
    if warn is not None:
        env = {ob.name for ob in bound.objects}
        stray = sorted(ob.name for ob in bpy.data.objects
                       if ob.type == 'MESH' and ob.name not in env and group in ob.vertex_groups)
        if stray:
            warn(f"influence group '{group}' ignored on meshes outside the environment: {', '.join(stray)}")
    if not any(group in ob.vertex_groups for ob in bound.objects):
        return None
    return adapter.vertex_influence(bound.objects, group)


@dataclass
class BakeOptions:
    """What a bake writes (panel, operator and command line share these).

    frames : (start, end) inclusive, within the bound range (None: all of it).
    step : key every N-th frame (the range's last frame is always keyed).
    clean : tolerance in metres of joint motion; keys are reduced until the played-back
        joints would stray further (None: key every step).
    interpolation : 'LINEAR' or 'BEZIER' (smooth tangents from the adapted motion).
    target : 'ACTION' (assign the adapted action) or 'NLA' (a new NLA track above the source).
    """

    frames: tuple = None
    step: int = 1
    clean: float = None
    interpolation: str = "LINEAR"
    target: str = "ACTION"

    def checked(self, bound_frames):
        """Normalised copy; SceneError naming the bad value and the allowed ones."""
        lo, hi = int(bound_frames[0]), int(bound_frames[-1])
        start, end = self.frames if self.frames else (lo, hi)
        start, end = int(start), int(end)
        if not lo <= start <= end <= hi:
            raise SceneError(f"bake frames {start}-{end} are outside the bound frames {lo}-{hi}: choose a "
                             "range inside them (or re-bind a longer action)")
        if int(self.step) < 1:
            raise SceneError(f"bake step must be 1 or more, got {self.step}")
        if self.clean is not None and not (np.isfinite(self.clean) and self.clean > 0):
            raise SceneError(f"clean tolerance must be a positive distance in metres, got {self.clean}")
        interp, target = str(self.interpolation).upper(), str(self.target).upper()
        if interp not in INTERPOLATIONS:
            raise SceneError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, got '{self.interpolation}'")
        if target not in TARGETS:
            raise SceneError(f"bake target must be one of {', '.join(t.lower() for t in TARGETS)}, "
                             f"got '{self.target}'")
        return BakeOptions((start, end), int(self.step), None if self.clean is None else float(self.clean),
                           interp, target)


TARGETS = ("ACTION", "NLA")
#: Channel values within this of the source's on every baked frame keep the source's curve whole.
UNCHANGED = 1e-6
_ROTATION_KIND = {"QUATERNION": ("quaternion", "rotation_quaternion"),
                  "AXIS_ANGLE": ("axis_angle", "rotation_axis_angle")}


def bake_options_from_scene(scene):
    s = getattr(scene, "reldesc", None)
    if s is None:
        return BakeOptions()
    return BakeOptions(frames=(s.bake_frame_start, s.bake_frame_end) if s.use_bake_range else None,
                       step=s.bake_step, clean=s.bake_clean_tolerance if s.use_bake_clean else None,
                       interpolation=s.bake_interpolation, target=s.bake_target)


class BakeJob:
    """Adapt the bound motion to the environment as it is now; write ``<source>.adapted``.

    Same three phases as ``BindJob``. The source action is never modified; a
    previous ``<source>.adapted`` is replaced only when nothing else uses it.
    The adapted action is a copy of the source (its scale, custom-property and
    object channels, handles and modifiers whole, other slots dropped) whose
    bound bones' rotation and location channels are rewritten where the
    adaptation changed them; channels it left unchanged keep the source's curve.
    """

    label = "bake"
    #: a character bound with partners is adapted with them (``partners``); a reach or a
    #: transfer adapts it alone
    adapts_partners = True

    def __init__(self, scene, arm, influence_group=None, warn=print, reposition_contacts=None, contacts=None,
                 options=None, solver_options=None, solver=None):
        self.scene, self.arm, self.influence_group, self.warn = scene, arm, influence_group, warn
        self.solver_options = solver_options
        if solver is None:
            solver = str(getattr(getattr(scene, "reldesc", None), "solver", "DESCRIPTORS")).lower()
        self.solver = check_solver(solver)
        self.contact_overrides = contacts
        if reposition_contacts is None:
            reposition_contacts = bool(getattr(getattr(scene, "reldesc", None), "reposition_contacts", False))
        self.reposition_contacts = reposition_contacts
        self.options = options if options is not None else BakeOptions()

    def read(self):
        t0 = time.perf_counter()
        self.bound = bound = Bound(self.arm)
        self.source = adapter.bound_source(self.arm, bound.meta)
        if self.source is None:
            raise SceneError(f"the source action '{bound.meta['action']}' is gone: re-bind with the motion "
                             "to adapt")
        self.options = self.options.checked(bound.frames)
        self.mesh = bound.binding.mesh.with_vertices(bound.read_environment(self.scene))
        self.influence = read_influence(self.scene, bound, self.influence_group, self.warn)
        self.overrides = bone_overrides(self.arm, bound, self.warn) or None
        self.hinges = hinge_overrides(self.arm, bound) or None
        self.bone_lengths, self.changed_bones = bound.bone_lengths()
        self.flags = stored_contact_flags(self.arm)
        self.contact_settings = contact_settings(self.scene, bound, self.contact_overrides)
        start, end = self.options.frames
        self.baked = (bound.frames >= start) & (bound.frames <= end)
        self.channels = self._channels()
        wanted = {(p, k) for _, _, p, width in self.channels for k in range(width)}
        self.source_values = adapter.sample_curves(self.source, adapter.armature_slot(self.arm, self.source),
                                                   wanted, bound.frames[self.baked])
        self.partner_jobs = []
        if bound.meta.get("partners") and self.adapts_partners and not getattr(self, "in_group", False):
            self.partner_jobs = feature("partners").partner_bake_jobs(self)
        # Checked before anything is written: a bake that cannot carry its garments writes nothing.
        worn = any(adapter.garment_names(j.arm) for j in (self, *self.partner_jobs))
        self.garments = feature("garments") if worn else None
        self.read_seconds = time.perf_counter() - t0

    def _channels(self):
        """(bone, kind, data path, width) of every channel the bake may write."""
        out = []
        mask = self.bound.location_mask()
        for b, (name, mode) in enumerate(zip(self.bound.rig.names, self.bound.rig.rotation_modes)):
            bone = f'pose.bones["{bpy.utils.escape_identifier(name)}"]'
            kind, prop = _ROTATION_KIND.get(mode, ("euler", "rotation_euler"))
            out.append((b, kind, f"{bone}.{prop}", 4 if kind != "euler" else 3))
            if mask[b]:
                out.append((b, "location", f"{bone}.location", 3))
            out.append((b, "scale", f"{bone}.scale", 3))
        return out

    def compute(self, progress=None):
        if self.partner_jobs:
            from . import partners
            partners.compute_together(self, progress)
            return
        t0 = time.perf_counter()
        options = dict(affinity_override=self.overrides, vertex_influence=self.influence, progress=progress,
                       bone_lengths=self.bone_lengths, hinges=self.hinges, solver_options=self.solver_options,
                       solver=self.solver)
        self.outcomes = None
        try:
            self.result, self.outcomes = contacts_outcomes(self.bound, self.mesh, self.flags,
                                                           self.reposition_contacts, self.contact_settings,
                                                           **options)
        except ContactError as e:
            if self.reposition_contacts:
                raise SceneError(f"cannot re-position contacts: {e}") from None
            self.warn(f"contacts not checked: {e}")
            self.result = adapt(self.bound.binding, self.mesh, **options)
        if self.result.unbound_joints:
            self.warn("no surface near " + ", ".join(f"{n} ({k} frames)" for n, k in
                                                     self.result.unbound_joints.items())
                      + ": those joints followed the body rigidly; add the surfaces they touch to the "
                        "environment or raise the sampling radius, then re-bind")
        self._planned(t0)

    def _planned(self, t0):
        """The compute started at ``t0`` is done: time it, then plan the keys (timed too)."""
        self.adapt_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.plan = self._plan_keys()
        self.keys_seconds = time.perf_counter() - t1

    def _plan_keys(self):
        """Curves to write and what they cost and lose: pure numpy (runs on the worker thread)."""
        bound, opt, idx = self.bound, self.options, np.flatnonzero(self.baked)
        rot, scale, locs, played_pose = bound.keyable_basis(self.result.positions[idx], idx)
        quats = sign_continuous(quat_from_matrix(rot))
        frames = bound.frames[idx]
        groups, kept = [], 0
        for b, kind, path, width in self.channels:
            if kind == "scale":
                values = scale[:, b]
                if (path, 0) not in self.source_values and np.abs(values - 1.0).max() <= UNCHANGED:
                    continue                                # unscaled, and the source keys no scale
            elif kind == "location":
                values = locs[:, b]
            elif kind == "quaternion":
                values = quats[:, b]
            elif kind == "axis_angle":
                values = axis_angle_from_quat(quats[:, b:b + 1])[:, 0]
            else:
                mode = bound.rig.rotation_modes[b]
                raw = euler_from_quat(quats[:, b:b + 1], mode)
                ref = np.array([[self.source_values.get((path, k), [0.0])[0] for k in range(3)]])
                values = euler_compatible(raw, mode, ref)[:, 0]
            src = [self.source_values.get((path, k)) for k in range(width)]
            if all(v is not None for v in src):
                src = np.stack(src, axis=-1)
                if kind == "quaternion" and src[0] @ values[0] < 0:
                    values = -values                        # the source's hemisphere
                if np.abs(values - src).max() <= UNCHANGED:
                    kept += 1                               # the source's curve stays, sub-frames and all
                    continue
            groups.append((b, kind, path, Channels(kind, values, bound.rig.rotation_modes[b])))

        def joints_of(played):
            r, t, s = rot.copy(), locs.copy(), scale.copy()
            for (b, kind, _, ch), v in zip(groups, played):
                if kind == "location":
                    t[:, b] = v
                elif kind == "scale":
                    s[:, b] = v
                else:
                    r[:, b] = rotation_matrices(kind, v, ch.order)
            m = np.broadcast_to(np.eye(4), r.shape[:2] + (4, 4)).copy()
            m[..., :3, :3] = r * s[..., None, :]
            m[..., :3, 3] = t
            return bound.forward(m, idx)

        candidates = (np.arange(len(idx)) % opt.step == 0)
        candidates[-1] = True
        channels = [ch for *_, ch in groups]
        if opt.clean is None:
            keys = [np.flatnonzero(candidates)] * len(groups)
            played = [play(ch, k, opt.interpolation) for ch, k in zip(channels, keys)]
            if all(np.array_equal(p, ch.values) for p, ch in zip(played, channels)):
                deviation = np.zeros((1, 1))                # every frame keyed: the keys play the values
            else:
                reference = joints_of([ch.values for ch in channels])
                deviation = np.linalg.norm(joints_of(played) - reference, axis=-1)
        else:
            sk = bound.binding.skeleton
            below = _descendants(sk)
            reference = joints_of([ch.values for ch in channels])
            carries = np.zeros((len(groups), len(sk)), bool)
            reach = np.zeros(len(groups))
            for g, (b, kind, _, _) in enumerate(groups):
                head = bound.head_joint[b]
                carries[g] = below[head]
                carries[g, head] = kind == "location"          # rotation and scale move what hangs below
                if carries[g].any():
                    reach[g] = np.linalg.norm(reference[:, carries[g]] - reference[:, head:head + 1],
                                              axis=-1).max()
            keys, deviation = reduce_keys(channels, joints_of, carries, reach, opt.clean, candidates,
                                          opt.interpolation)
        curves = []
        for (b, kind, path, ch), k in zip(groups, keys):
            left = right = [None] * ch.values.shape[1]
            if opt.interpolation == "BEZIER":
                left, right = (h.swapaxes(0, 1) for h in bezier_handles(frames[k], ch.values[k], ch.slopes()[k]))
            for c in range(ch.values.shape[1]):
                curves.append(adapter.Curve(path, c, bound.rig.names[b], frames[k].astype(float), ch.values[k, c],
                                            opt.interpolation, left[c], right[c]))
        return dict(curves=curves, kept=kept, played=played_pose,
                    deviation=float(deviation.max()) if deviation.size else 0.0,
                    per_frame=sum(ch.values.shape[1] for ch in channels) * len(idx),
                    keys=int(sum(len(c.frames) for c in curves)))

    def write(self):
        report = self._write_own()
        if adapter.garment_names(self.arm):
            report["garments"] = self.garments.carry(self)
        if self.partner_jobs:
            report["partners"] = []
            for j in self.partner_jobs:
                r = j._write_own()
                report["partners"].append(dict(armature=j.arm.name, **{k: r[k] for k in ("action", "source", "frames")}))
                if adapter.garment_names(j.arm):
                    report["garments"] = report.get("garments", []) + self.garments.carry(j)
        return report

    def _write_own(self):
        t0 = time.perf_counter()
        bound, opt, plan = self.bound, self.options, self.plan
        bypass, bypassed = adapter.constraint_bypass_curves(self.arm, bound.rig.names, opt.frames[0])
        if opt.target == "NLA":
            adapter.remove_own_tracks(self.arm)
        wanted = self.source.name + ADAPTED_SUFFIX
        action, slot = adapter.write_adapted(self.arm, self.source, wanted, plan["curves"] + bypass, opt.frames)
        if action.name != wanted:
            self.warn(f"kept '{wanted}' because something else uses it (another object, an NLA strip or a "
                      f"fake user); wrote '{action.name}'")
        if opt.target == "NLA":
            adapter.add_nla_track(self.arm, action, slot, self.source, opt.frames[0])
        else:
            adapter.assign(self.arm, action, slot)
        self._follow_outer_parents(action, slot)
        adapter.remember_bypass(self.arm, self.source, plan["curves"] + bypass)
        if bypassed:
            self.warn(f"the constraints of {len(bypassed)} bound bone(s) are off in '{action.name}' (their "
                      "influence is keyed to 0, as Bake Action's Clear Constraints, without removing them): "
                      "use 'Use Source Action' to switch back with the constraints on")
        write_seconds = time.perf_counter() - t0
        err, res = self.result.bone_length_error, self.result.target_residual
        worst = np.argsort(-err)[:5]
        contacts, counts = [], {"valid": 0, "repositioned": 0, "unresolved": 0}
        if self.outcomes is not None:
            contacts, counts = contact_report(self.outcomes, int(bound.frames[0]), self.mesh)
            _surface_names(bound, contacts, self.outcomes)
            store_contacts(self.arm, contacts, self.flags)
        return dict(contacts=contacts, contact_counts=counts, solver=self.solver,
            action=action.name, source=self.source.name, frames=int(len(bound.frames)),
            joints=int(len(bound.binding.skeleton)), descriptors=int(bound.binding.descriptor_count),
            read_seconds=self.read_seconds, adapt_seconds=self.adapt_seconds, write_seconds=write_seconds,
            keys_seconds=self.keys_seconds,
            bone_length_error_mean=float(err.mean()), bone_length_error_max=float(err.max()),
            target_residual_mean=float(res.mean()), target_residual_max=float(res.max()),
            bone_length_error_per_frame=[float(x) for x in err],
            target_residual_per_frame=[float(x) for x in res],
            worst_frames=[int(bound.frames[i]) for i in worst],
            joint_limit_violations=_limit_report(self.result, bound),
            changed_bones=self.changed_bones,
            hinges=list(self.result.hinges or []),
            bake=dict(frame_start=opt.frames[0], frame_end=opt.frames[1], step=opt.step, clean=opt.clean,
                      interpolation=opt.interpolation, target=opt.target.lower()),
            keys=dict(written=plan["keys"], every_frame=plan["per_frame"], curves=len(plan["curves"]),
                      curves_kept_from_source=plan["kept"], max_deviation=plan["deviation"]),
            constraints_bypassed=bypassed)

    def _follow_outer_parents(self, action, slot):
        """Bones whose Blender parent is outside the bone set were keyed against a prediction of
        that parent (carried by the set bone above it as in the source). Its constraints may
        play it slightly otherwise (Rigify's ORG-palm copies the scale of DEF-hand): read how
        Blender plays it under the new keys and key its children against that. One pass is
        exact, since an outside parent depends only on bones above it."""
        bound = self.bound
        if not bound.rig.outer_names:
            return
        idx = np.flatnonzero(self.baked)
        played = adapter.read_bone_matrices(self.scene, self.arm, bound.frames[idx], bound.rig.outer_names)
        predicted = bound.outer_world(self.plan["played"], idx)
        if np.abs(played - predicted).max() <= 1e-7:
            return
        bound.use_played_outer(played, idx)
        self.plan = self._plan_keys()
        adapter.write_curves(action, slot, self.plan["curves"], self.options.frames)

    def run(self, progress=None):
        self.read()
        self.compute(progress or _print_progress(self.label))
        return self.write()


def _descendants(skeleton):
    """(J,J) bool: [a, j] when j is strictly below a."""
    J = len(skeleton)
    out = np.zeros((J, J), bool)
    for j in skeleton.order[::-1].tolist():
        p = skeleton.parents[j]
        if p >= 0:
            out[p] |= out[j]
            out[p, j] = True
    return out


def _limit_report(result, bound, worst=5):
    """{count, max_degrees, worst: [{joint, frame, degrees}]} of the joint-limit violations."""
    v = result.joint_limit_violations
    names = bound.binding.skeleton.names
    f, j = np.nonzero(v > 1e-6)
    order = np.argsort(-v[f, j])
    rows, seen = [], set()
    for i in order.tolist():
        if f[i] in seen:
            continue
        seen.add(f[i])
        rows.append(dict(joint=names[j[i]], frame=int(bound.frames[f[i]]), degrees=float(v[f[i], j[i]])))
        if len(rows) == worst:
            break
    return dict(count=int(len(f)), max_degrees=float(v.max()) if v.size else 0.0, worst=rows)


def bake_job(scene, arm, influence_group=None, progress=None, warn=print, reposition_contacts=None,
             contacts=None, options=None, solver=None):
    """Bake and assign the adapted action; returns the report dictionary.

    contacts : optional overrides of the scene's contact settings: ``effectors``
    (list or comma-separated), ``distance`` and ``speed`` (fractions of body height).
    options : ``BakeOptions`` (default: every bound frame, linear keys on every frame,
    assigned as the active action).
    solver : "descriptors" or "interaction_mesh" (default: the scene's Solver).
    """
    return BakeJob(scene, arm, influence_group, warn, reposition_contacts, contacts, options,
                   solver=solver).run(progress)


# --- contacts ----------------------------------------------------------------------

CONTACTS_KEY = "reldesc_contacts"


def _phase_key(row):
    return f"{row['effector']}:{row['start']}-{row['end']}"


def stored_contacts(arm):
    """The contact rows stored by the last detection, re-positioning or bake ([] if none)."""
    raw = arm.get(CONTACTS_KEY)
    return json.loads(raw) if raw else []


def stored_contact_flags(arm):
    """{phase key: (locked, ignored)} set by the animator in the Contacts panel."""
    return {_phase_key(r): (bool(r.get("lock")), bool(r.get("ignore"))) for r in stored_contacts(arm)}


def set_contact_flag(arm, index, flag, value):
    rows = stored_contacts(arm)
    rows[index][flag] = bool(value)
    arm[CONTACTS_KEY] = json.dumps(rows)


def _surface_names(bound, rows, outcomes):
    ends = np.cumsum(bound.meta["triangle_counts"])
    names = bound.meta["objects"]
    for row, o in zip(rows, outcomes):
        row["surface"] = names[int(np.searchsorted(ends, o.phase.triangle, side="right"))]
        if o.status == "repositioned" and o.triangle is not None:
            row["new_surface"] = names[int(np.searchsorted(ends, o.triangle, side="right"))]


def store_contacts(arm, rows, flags):
    for row in rows:
        lock, ignore = flags.get(_phase_key(row), (False, False))
        row["lock"], row["ignore"] = lock, ignore
    arm[CONTACTS_KEY] = json.dumps(rows)


def contact_settings(scene, bound, overrides=None):
    """Effectors and thresholds (motion units, per second) from the scene's settings."""
    s = getattr(scene, "reldesc", None)
    H = bound.binding.body_height
    o = overrides or {}
    names = o.get("effectors", s.contact_effectors if s is not None else "")
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    dist = float(o.get("distance", s.contact_distance if s is not None else 0.015))
    speed = float(o.get("speed", s.contact_speed if s is not None else 0.12))
    if not (0 < dist < 1 and 0 < speed < 10):
        raise SceneError(f"contact thresholds out of range (distance {dist:g}, speed {speed:g}): give the "
                         "distance as a fraction of body height in (0, 1) and the speed in body heights per "
                         "second in (0, 10)")
    return dict(effectors=names or None, distance=dist * H, speed=speed * H,
                fps=scene.render.fps / scene.render.fps_base)


def contact_plan(bound, flags, reposition, settings=None):
    """``adapt_with_contacts``' contact settings for a bound armature: its phases (detected
    once), the panel's per-phase lock / ignore flags, the thresholds. Raises ContactError when
    no phase is found."""
    from .core.contacts import detect_contacts
    settings = settings or {}
    phases = detect_contacts(bound.binding, **settings)
    if not phases:
        raise ContactError("no contact phases found: raise the contact speed or the contact distance, "
                           "or name the effectors that touch the environment")
    offset = int(bound.frames[0])
    keys = [f"{p.name}:{p.start + offset}-{p.end + offset}" for p in phases]
    locked = {i for i, k in enumerate(keys) if flags.get(k, (False, False))[0]}
    ignored = {i for i, k in enumerate(keys) if flags.get(k, (False, False))[1]}
    return dict(reposition=reposition, locked=locked, ignored=ignored, phases=phases, **settings)


def contacts_outcomes(bound, mesh, flags, reposition, settings=None, **options):
    """adapt_with_contacts with the panel's per-phase lock / ignore flags."""
    return adapt_with_contacts(bound.binding, mesh, **contact_plan(bound, flags, reposition, settings), **options)


def contacts_job(scene, arm, reposition=False, warn=print):
    """Detect the contact phases and their status against the environment now.

    With ``reposition`` the invalid ones are re-positioned (shown in the panel;
    Bake then bakes with re-positioning on). Returns (rows, counts).
    """
    job = BakeJob(scene, arm, warn=warn, reposition_contacts=reposition)
    job.read()
    try:
        _, outcomes = contacts_outcomes(job.bound, job.mesh, job.flags, reposition, job.contact_settings,
                                        affinity_override=job.overrides, vertex_influence=job.influence)
    except ContactError as e:
        raise SceneError(str(e)) from None
    rows, counts = contact_report(outcomes, int(job.bound.frames[0]), job.mesh)
    _surface_names(job.bound, rows, outcomes)
    store_contacts(arm, rows, job.flags)
    return rows, counts
