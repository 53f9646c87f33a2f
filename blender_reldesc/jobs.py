"""Bind and bake: the jobs shared by the operators, the live preview and the command line.

Each job checks everything first, then changes anything (a failed job leaves
the file as it was), and returns a report dictionary with counts and timings.
"""

from __future__ import annotations

import io
import time

import bpy
import numpy as np

from . import adapter
from .adapter import SceneError
import json

from .core import Binding, TriMesh, adapt, bind
from .core.contacts import ContactError, adapt_with_contacts, contact_report
from .core.skeleton.armature import (adapted_pose, axis_angle_from_quat, basis_from_pose, euler_from_quat, joint_layout,
                            primary_children, split_basis)
from .core.skeleton.rotations import matrix_from_quat, quat_from_matrix

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

    def __init__(self, scene, arm, environment, body_height=0.0, radius_factor=0.5, warn=print):
        self.scene, self.arm, self.environment = scene, arm, environment
        self.body_height, self.radius_factor, self.warn = body_height, radius_factor, warn

    def read(self):
        t0 = time.perf_counter()
        scene, arm = self.scene, self.arm
        self.action = adapter.source_action(arm)
        start, end = adapter.frame_range(self.action)
        self.frames = np.arange(start, end + 1)
        self.rig = adapter.read_rig(arm)
        self.skeleton, _, tail_joint = joint_layout(self.rig.names, self.rig.parents)
        objects, ignored = adapter.environment_objects(self.environment)
        if ignored:
            self.warn(f"ignored non-mesh objects in '{self.environment}': {', '.join(ignored)}")
        self.objects = objects
        self.joints, pose, self.world, self.motion_path = adapter.read_source_motion(
            scene, arm, self.action, self.frames, self.rig, np.flatnonzero(tail_joint >= 0))
        self.rotations = quat_from_matrix(pose[..., :3, :3])
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
                    degenerate=int(mesh.degenerate_count), motion_read=self.motion_path)
        pose = _save_npz(rotations=self.rotations, world=self.world, bones=np.asarray(self.rig.names, dtype=str),
                         rest_lengths=rest_lengths(self.rig))
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


def bind_job(scene, arm, environment, body_height=0.0, radius_factor=0.5, progress=None, warn=print):
    """Bind and store; returns the report dictionary."""
    return BindJob(scene, arm, environment, body_height, radius_factor, warn).run(progress)


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


class Bound:
    """A stored binding read back with what the bake and the live preview need."""

    def __init__(self, arm):
        data, pose, self.meta = adapter.load_stored(arm)
        self.binding = Binding.load(data)
        pose = _load_npz(pose)
        self.rotations, self.world = pose["rotations"], pose["world"]
        self.rig = adapter.read_rig(arm)
        self.bind_rest_lengths = pose.get("rest_lengths")
        if list(pose["bones"]) != self.rig.names:
            raise SceneError(f"the bones of '{arm.name}' changed since bind: re-bind")
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

    def pose_channels(self, positions, frames=None):
        """Basis rotations (F,B,4) and locations (F,B,3) for adapted world joints (F,J,3)."""
        idx = slice(None) if frames is None else frames
        world = self.world[idx]
        inv = np.linalg.inv(world)
        to_arm = lambda p: np.einsum("fij,fkj->fki", inv[:, :3, :3], p) + inv[:, None, :3, 3]  # noqa: E731
        original = to_arm(self.binding.motion[idx])
        adapted = to_arm(positions)
        pose = np.tile(np.eye(4), original.shape[:1] + (len(self.rig.names), 1, 1))
        pose[..., :3, :3] = matrix_from_quat(self.rotations[idx])
        pose[..., :3, 3] = original[:, self.head_joint]
        new = adapted_pose(self.binding.skeleton, self.head_joint, original, adapted, pose,
                           primary_children(self.rig.parents, self.rig.connected))
        return split_basis(basis_from_pose(self.rig.rest, self.rig.parents, new))

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


class BakeJob:
    """Adapt the bound motion to the environment as it is now; write ``<source>.adapted``.

    Same three phases as ``BindJob``. The source action is never modified;
    a previous ``<source>.adapted`` is replaced.
    """

    label = "bake"

    def __init__(self, scene, arm, influence_group=None, warn=print, reposition_contacts=None, contacts=None):
        self.scene, self.arm, self.influence_group, self.warn = scene, arm, influence_group, warn
        self.contact_overrides = contacts
        if reposition_contacts is None:
            reposition_contacts = bool(getattr(getattr(scene, "reldesc", None), "reposition_contacts", False))
        self.reposition_contacts = reposition_contacts

    def read(self):
        t0 = time.perf_counter()
        self.bound = bound = Bound(self.arm)
        self.source = adapter.bound_source(self.arm, bound.meta)
        if self.source is None:
            raise SceneError(f"the source action '{bound.meta['action']}' is gone: re-bind with the motion "
                             "to adapt")
        self.mesh = bound.binding.mesh.with_vertices(bound.read_environment(self.scene))
        self.influence = read_influence(self.scene, bound, self.influence_group, self.warn)
        self.overrides = bone_overrides(self.arm, bound, self.warn) or None
        self.hinges = hinge_overrides(self.arm, bound) or None
        self.bone_lengths, self.changed_bones = bound.bone_lengths()
        self.flags = stored_contact_flags(self.arm)
        self.contact_settings = contact_settings(self.scene, bound, self.contact_overrides)
        self.read_seconds = time.perf_counter() - t0

    def compute(self, progress=None):
        t0 = time.perf_counter()
        options = dict(affinity_override=self.overrides, vertex_influence=self.influence, progress=progress,
                       bone_lengths=self.bone_lengths, hinges=self.hinges)
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
        self.quats, self.locs = self.bound.pose_channels(self.result.positions)
        self.adapt_seconds = time.perf_counter() - t0

    def write(self):
        t0 = time.perf_counter()
        bound = self.bound
        channels = []
        mask = bound.location_mask()
        quats, locs = self.quats, self.locs
        for b, mode in enumerate(bound.rig.rotation_modes):
            if mode == 'QUATERNION':
                channels.append((b, "rotation_quaternion", quats[:, b]))
            elif mode == 'AXIS_ANGLE':
                channels.append((b, "rotation_axis_angle", axis_angle_from_quat(quats[:, b:b + 1])[:, 0]))
            else:
                channels.append((b, "rotation_euler", euler_from_quat(quats[:, b:b + 1], mode)[:, 0]))
            if mask[b]:
                channels.append((b, "location", locs[:, b]))
        wanted = self.source.name + ADAPTED_SUFFIX
        action = adapter.write_action(self.arm, wanted, bound.frames, bound.rig, channels)
        if action.name != wanted:
            self.warn(f"kept '{wanted}' because something else uses it (another object, an NLA strip or a "
                      f"fake user); wrote '{action.name}'")
        adapter.copy_object_channels(self.source, action)
        write_seconds = time.perf_counter() - t0
        err, res = self.result.bone_length_error, self.result.target_residual
        worst = np.argsort(-err)[:5]
        contacts, counts = [], {"valid": 0, "repositioned": 0, "unresolved": 0}
        if self.outcomes is not None:
            contacts, counts = contact_report(self.outcomes, int(bound.frames[0]))
            _surface_names(bound, contacts, self.outcomes)
            store_contacts(self.arm, contacts, self.flags)
        return dict(contacts=contacts, contact_counts=counts,
            action=action.name, source=self.source.name, frames=int(len(bound.frames)),
            joints=int(len(bound.binding.skeleton)), descriptors=int(bound.binding.descriptor_count),
            read_seconds=self.read_seconds, adapt_seconds=self.adapt_seconds, write_seconds=write_seconds,
            bone_length_error_mean=float(err.mean()), bone_length_error_max=float(err.max()),
            target_residual_mean=float(res.mean()), target_residual_max=float(res.max()),
            bone_length_error_per_frame=[float(x) for x in err],
            target_residual_per_frame=[float(x) for x in res],
            worst_frames=[int(bound.frames[i]) for i in worst],
            joint_limit_violations=_limit_report(self.result, bound),
            changed_bones=self.changed_bones,
            hinges=list(self.result.hinges or []))

    def run(self, progress=None):
        self.read()
        self.compute(progress or _print_progress(self.label))
        return self.write()


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
             contacts=None):
    """Bake and assign the adapted action; returns the report dictionary.

    contacts : optional overrides of the scene's contact settings: ``effectors``
    (list or comma-separated), ``distance`` and ``speed`` (fractions of body height).
    """
    return BakeJob(scene, arm, influence_group, warn, reposition_contacts, contacts).run(progress)


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


def contacts_outcomes(bound, mesh, flags, reposition, settings=None, **options):
    """adapt_with_contacts with the panel's per-phase lock / ignore flags."""
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
    result, outcomes = adapt_with_contacts(bound.binding, mesh, reposition=reposition, locked=locked,
                                           ignored=ignored, **settings, **options)
    return result, outcomes


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
    rows, counts = contact_report(outcomes, int(job.bound.frames[0]))
    _surface_names(job.bound, rows, outcomes)
    store_contacts(arm, rows, job.flags)
    return rows, counts
