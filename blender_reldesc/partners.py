"""Partners: other armatures bound with a character (seed 000 §9), Blender side.

Binding a character with partners binds each of them with the same environment too (each
binding stored on its own armature) and records the group on every one of them; baking any
of them then adapts the whole group together (``core.characters``) and writes
``<action>.adapted`` for each, never touching the sources.
"""

from __future__ import annotations

import time

import bpy
import numpy as np

from . import jobs
from .adapter import SceneError, garment_names
from .core.characters import adapt_partners, bind_partners, closest_on_segments


def partner_objects(arm, names):
    """The partner armatures named (a list or a comma-separated string), checked: each exists,
    is an armature other than ``arm`` and has an action."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out = []
    for name in names:
        ob = bpy.data.objects.get(name)
        if ob is None:
            raise SceneError(f"no object named '{name}' to bind as a partner: give the name of another armature")
        if ob.type != 'ARMATURE':
            raise SceneError(f"partner '{name}' is a {ob.type.lower()}, not an armature: partners are other "
                             "characters")
        if ob == arm:
            raise SceneError(f"'{name}' is the character itself: its partners are the other armatures it "
                             "interacts with")
        if ob.animation_data is None or ob.animation_data.action is None:
            raise SceneError(f"partner '{name}' has no action: give it the motion it plays with '{arm.name}'")
        if ob not in out:
            out.append(ob)
    return out


class PartnersBindJob:
    """Bind a character and its partners with one environment (``jobs.BindJob`` each), then
    record the group on each armature."""

    label = "bind"

    def __init__(self, scene, arm, environment, partners, body_height=0.0, radius_factor=0.5, warn=print,
                 bone_set="DEFORM"):
        self.arm = arm
        self.others = partner_objects(arm, partners)
        self.jobs = [jobs.BindJob(scene, ob, environment, body_height, radius_factor, warn, bone_set)
                     for ob in [arm] + self.others]

    def read(self):
        for job in self.jobs:
            job.read()
        first = self.jobs[0]
        for job in self.jobs[1:]:
            if len(job.frames) != len(first.frames) or job.frames[0] != first.frames[0]:
                raise SceneError(f"'{job.arm.name}' plays frames {job.frames[0]}-{job.frames[-1]} and "
                                 f"'{first.arm.name}' {first.frames[0]}-{first.frames[-1]}: partners must play "
                                 "the same frames (set their actions' frame ranges alike)")

    def compute(self, progress=None):
        n = len(self.jobs)
        for k, job in enumerate(self.jobs):
            job.compute(None if progress is None else (lambda d, t, k=k: progress(k * t + d, n * t)))

    def write(self):
        group = [job.arm.name for job in self.jobs]
        reports = []
        for job in self.jobs:
            job.partners = [name for name in group if name != job.arm.name]
            job.capsule_radii = capsule_radii(job.arm, job.skeleton)
            reports.append(job.write())
        report = dict(reports[0])
        report["partners"] = [dict(armature=j.arm.name, action=r["action"], descriptors=r["descriptors"])
                              for j, r in zip(self.jobs[1:], reports[1:])]
        return report

    def run(self, progress=None):
        self.read()
        self.compute(progress or jobs._print_progress(self.label))
        return self.write()


#: A pose bone's custom property giving its capsule radius (metres) by hand.
RADIUS_PROPERTY = "reldesc_radius"
#: Vertices weighted at least this much to a bone measure its capsule.
SKIN_WEIGHT = 0.5


def skinned_meshes(arm, exclude=()):
    """Mesh objects deformed by ``arm`` (an Armature modifier on it), its garments aside."""
    worn = set(garment_names(arm)) | set(exclude)
    return [ob for ob in bpy.data.objects if ob.type == 'MESH' and ob.name not in worn and any(
        m.type == 'ARMATURE' and m.object == arm for m in ob.modifiers)]


def capsule_radii(arm, skeleton, exclude=()):
    """(J,) capsule radii for ``skeleton``'s joints (the bone ending at each: its parent joint's
    bone), NaN where none is known (``characters.capsule_radii`` then takes a share of the
    bone's length): a pose bone's ``reldesc_radius`` property where set, else the mean
    distance from the bone's own axis, at rest, of the vertices weighted at least
    ``SKIN_WEIGHT`` to it in the meshes ``arm`` deforms (three at least). A bone's radius
    goes to every segment from its head (the hips' to the spine and both thighs)."""
    w = np.array(arm.matrix_world, float)
    skin = {}                                                   # bone name -> world points
    for ob in skinned_meshes(arm, exclude):
        me = ob.data
        co = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        m = np.array(ob.matrix_world, float)
        co = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
        groups = {g.index: g.name for g in ob.vertex_groups}
        for v in me.vertices:
            for g in v.groups:
                if g.weight >= SKIN_WEIGHT and g.group in groups:
                    skin.setdefault(groups[g.group], []).append(co[v.index])
    radius = {}
    for bone in arm.data.bones:
        pb = arm.pose.bones.get(bone.name)
        if pb is not None and RADIUS_PROPERTY in pb.keys():
            radius[bone.name] = float(pb[RADIUS_PROPERTY])
            continue
        points = skin.get(bone.name)
        if points is None or len(points) < 3:
            continue
        head = w[:3, :3] @ np.array(bone.head_local, float) + w[:3, 3]
        tail = w[:3, :3] @ np.array(bone.tail_local, float) + w[:3, 3]
        points = np.asarray(points)
        foot, _ = closest_on_segments(points, head[None], tail[None])
        radius[bone.name] = float(np.linalg.norm(points - foot, axis=1).mean())
    names, parents = list(skeleton.names), list(skeleton.parents)
    return np.array([radius.get(names[p], np.nan) if p >= 0 else np.nan for p in parents], float)


def partner_bake_jobs(job):
    """For a ``jobs.BakeJob`` whose binding has partners: a read ``BakeJob`` per partner (its
    own binding, environment, bone lengths and overrides), or []."""
    names = job.bound.meta.get("partners") or []
    out = []
    for name in names:
        ob = bpy.data.objects.get(name)
        if ob is None or ob.type != 'ARMATURE':
            raise SceneError(f"partner '{name}' of '{job.arm.name}' is gone: re-bind without it, or bring it back")
        other = jobs.BakeJob(job.scene, ob, warn=job.warn, reposition_contacts=job.reposition_contacts,
                             options=job.options, solver="descriptors")
        other.in_group = True                       # its own partners are this group: not read again
        try:
            other.read()
        except SceneError as e:
            raise SceneError(f"partner '{name}': {e}") from None
        if len(other.bound.frames) != len(job.bound.frames):
            raise SceneError(f"partner '{name}' was bound with other frames than '{job.arm.name}': re-bind them "
                             "together")
        out.append(other)
    # The bodies' thickness now, read here on the main thread: the compute runs on a worker
    # thread, where Blender's data must not be touched.
    for j in (job, *out):
        j.measured_radii = capsule_radii(j.arm, j.bound.binding.skeleton)
    return out


def compute_together(job, progress=None):
    """Adapt ``job``'s character and its partners' (``job.partner_jobs``) together; their
    results go to each job, which then plans its keys."""
    t0 = time.perf_counter()
    group = [job] + job.partner_jobs
    bindings = [j.bound.binding for j in group]
    if len({b.frame_count for b in bindings}) != 1:
        raise SceneError("the partners' bindings have different frame counts: re-bind them together")
    # Capsules: as measured at bind (the source's), and now where the body changed thickness
    # (its mesh or a bone's radius edited); unchanged, the bone lengths' scale applies.
    then, now = [], []
    for j, b in zip(group, bindings):
        stored = j.bound.meta.get("capsule_radii")
        measured = j.measured_radii
        source = measured if stored is None or len(stored) != len(measured) else \
            np.array([r if r >= 0 else np.nan for r in stored], float)
        then.append(source)
        same = np.isnan(source) == np.isnan(measured)
        changed = not same.all() or np.nanmax(np.abs(np.nan_to_num(source) - np.nan_to_num(measured)),
                                                initial=0.0) > 1e-3
        now.append(measured if changed else None)
    relations = bind_partners(bindings, radii=then)
    per = [dict(affinity_override=j.overrides, vertex_influence=j.influence, hinges=j.hinges) for j in group]
    # Contacts checked (and, with Re-position Contacts, re-positioned) in the last round, with
    # the partners' targets: each character's own settings and flags.
    plans = []
    for j in group:
        try:
            plans.append(jobs.contact_plan(j.bound, j.flags, j.reposition_contacts, j.contact_settings))
        except jobs.ContactError as e:
            if j.reposition_contacts:
                raise SceneError(f"'{j.arm.name}': cannot re-position contacts: {e}") from None
            j.warn(f"'{j.arm.name}': contacts not checked: {e}")
            plans.append(None)
    outcomes = [None] * len(group)
    results = adapt_partners(bindings, [j.mesh for j in group], relations, radii=now,
                             bone_lengths=[j.bone_lengths for j in group], per_character=per, progress=progress,
                             contacts=plans, outcomes=outcomes)
    for j, r, o in zip(group, results, outcomes):
        j.result, j.outcomes = r, o
        j._planned(t0)
