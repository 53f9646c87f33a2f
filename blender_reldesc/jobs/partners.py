"""Partners: other armatures bound with a character (seed 000 §9).

Binding a character with partners binds each of them with the same environment too (each
binding stored on its own armature) and records the group on every one of them; baking any
of them then adapts the whole group together (``core.characters``) and writes
``<action>.adapted`` for each, never touching the sources (``PartnerStage``, a bake stage).
"""

from __future__ import annotations

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core.characters import PartnersLiveSession, adapt_partners, bind_partners
from ..core.contacts import ContactError
from .base import print_progress
from .bind_bake import BakeJob, BindJob
from .bound import Bound
from .contacts import contact_plan, root_rows, rows


def capsules(bounds, measured):
    """Each character's capsule radii ``(then, now)``: as measured at bind (the source's), and
    now where the body changed thickness (its mesh or a bone's radius edited; else None: the
    bone lengths' scale applies). ``measured``: per character, ``adapter.skin.measure_radii``
    now (read on the main thread)."""
    then, now = [], []
    for bound, radii in zip(bounds, measured):
        stored = bound.meta.get("capsule_radii")
        source = radii if stored is None or len(stored) != len(radii) else \
            np.array([r if r >= 0 else np.nan for r in stored], float)
        then.append(source)
        same = np.isnan(source) == np.isnan(radii)
        changed = not same.all() or np.nanmax(np.abs(np.nan_to_num(source) - np.nan_to_num(radii)),
                                                initial=0.0) > 1e-3
        now.append(radii if changed else None)
    return then, now


def group_of(scene, arm, bound):
    """The partners of ``arm`` (bound as ``bound``) read for a live preview: ``(armatures,
    bounds)``, ``arm`` first, each partner's binding carried into ``bound``'s frame as a bake
    carries it. Raises ``SceneError`` where a partner is gone or was bound with other frames."""
    arms, bounds = [arm], [bound]
    for name in bound.meta.get("partners") or []:
        ob = _partner(name, arm)
        other = Bound(ob, scene)
        other.use_carry(bound.carry)
        _same_frames(name, other, arm, bound)
        arms.append(ob)
        bounds.append(other)
    return arms, bounds


def _partner(name, arm):
    """The armature of ``arm``'s partner ``name``; SceneError when it is gone."""
    ob = adapter.scene.find_object(name)
    if ob is None or ob.type != 'ARMATURE':
        raise SceneError(f"partner '{name}' of '{arm.name}' is gone: re-bind without it, or bring it back")
    return ob


def _same_frames(name, other, arm, bound):
    if len(other.frames) != len(bound.frames):
        raise SceneError(f"partner '{name}' was bound with other frames than '{arm.name}': re-bind them together")


def live_session(arms, bounds, options):
    """The ``core.characters.PartnersLiveSession`` of a group read by ``group_of``; ``options``
    per character (its affinity overrides, bone lengths and hinges, as the single preview's)."""
    measured = [adapter.skin.measure_radii(ob, b.binding.skeleton) for ob, b in zip(arms, bounds)]
    then, now = capsules(bounds, measured)
    bindings = [b.binding for b in bounds]
    partners = bind_partners(bindings, radii=then)
    lengths = [o.pop("bone_lengths", None) for o in options]
    return PartnersLiveSession(bindings, partners, bone_lengths=lengths, radii=now, per_character=options)


class PartnersBindJob:
    """Bind a character and its partners with one environment (``BindJob`` each), then record the
    group and each body's measured thickness on each armature."""

    label = "bind"

    def __init__(self, scene, arm, environment, partners, body_height=0.0, radius_factor=0.5, warn=print,
                 bone_set="DEFORM"):
        self.arm = arm
        self.others = adapter.scene.partner_objects(arm, partners)
        self.jobs = [BindJob(scene, ob, environment, body_height, radius_factor, warn, bone_set)
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
        for job in self.jobs:
            job.capsule_radii = adapter.skin.measure_radii(job.arm, job.skeleton)

    def compute(self, progress=None):
        n = len(self.jobs)
        for k, job in enumerate(self.jobs):
            job.compute(None if progress is None else (lambda d, t, k=k: progress(k * t + d, n * t)))

    def write(self):
        group = [job.arm.name for job in self.jobs]
        reports = []
        for job in self.jobs:
            job.partners = [name for name in group if name != job.arm.name]
            reports.append(job.write())
        report = dict(reports[0])
        report["partners"] = [dict(armature=j.arm.name, action=r["action"], descriptors=r["descriptors"])
                              for j, r in zip(self.jobs[1:], reports[1:])]
        return report

    def run(self, progress=None):
        self.read()
        self.compute(progress or print_progress(self.label))
        return self.write()


class PartnerStage:
    """The bake stage of a character bound with partners: each partner read as a bake of its own
    (its binding, environment, bone lengths and controls), the group adapted together, each
    partner's keys written after the character's."""

    def __init__(self, job):
        names = job.bound.meta.get("partners") or []
        self.jobs = [job]
        for name in names:
            ob = _partner(name, job.arm)
            other = BakeJob(job.scene, ob, warn=job.warn, reposition_contacts=job.reposition_contacts,
                            options=job.options, solver="descriptors")
            other.in_group = True                       # its own partners are this group: not read again
            other.carry_from = job.bound                # and it is adapted in the group's frame
            try:
                other.read()
            except SceneError as e:
                raise SceneError(f"partner '{name}': {e}") from None
            _same_frames(name, other.bound, job.arm, job.bound)
            self.jobs.append(other)
        # The interaction mesh solves the group in one go: no last round to re-position contacts in.
        asked = [j.name for j in self.jobs if j.reposition_contacts]
        if job.solver == "interaction_mesh" and asked:
            raise SceneError(f"'{asked[0]}': contacts are re-positioned with the Descriptors solver only when "
                             "partners are baked together: switch the solver to Descriptors, or turn "
                             "Re-position Contacts off")
        # The bodies' thickness now, read here on the main thread: the compute runs on a worker
        # thread, where Blender's data must not be touched.
        self.measured = [adapter.skin.measure_radii(j.arm, j.bound.binding.skeleton) for j in self.jobs]

    def solve(self, job, progress=None):
        """Adapt the group together; each job gets its ``result``, ``outcomes`` and contact rows."""
        group = self.jobs
        bindings = [j.bound.binding for j in group]
        if len({b.frame_count for b in bindings}) != 1:
            raise SceneError("the partners' bindings have different frame counts: re-bind them together")
        then, now = capsules([j.bound for j in group], self.measured)
        relations = bind_partners(bindings, radii=then)
        per = [dict(affinity_override=j.overrides, vertex_influence=j.influence, hinges=j.hinges) for j in group]
        if job.solver == "interaction_mesh":
            # Every character's joints in one interaction mesh a frame: no rounds, so no last
            # round to check contacts in.
            job.warn("partners baked with the interaction-mesh solver: contacts not checked")
            results = adapt_partners(bindings, [j.mesh for j in group], relations, bone_lengths=[j.bone_lengths
                                                                                                 for j in group],
                                     per_character=per, progress=progress, solver="interaction_mesh",
                                     solver_options=job.solver_options)
            for j, r in zip(group, results):
                j.result, j.outcomes, j.solver = r, None, job.solver
            return
        # Contacts checked (and, with Re-position Contacts, re-positioned) in the last round, with
        # the partners' targets: each character's own settings and flags.
        plans = []
        for j in group:
            try:
                plans.append(contact_plan(j.bound, j.flags, j.reposition_contacts, j.contact_settings))
            except ContactError as e:
                if j.reposition_contacts:
                    raise SceneError(f"'{j.name}': cannot re-position contacts: {e}") from None
                j.warn(f"'{j.name}': contacts not checked: {e}")
                plans.append(None)
        outcomes = [None] * len(group)
        results = adapt_partners(bindings, [j.mesh for j in group], relations, radii=now,
                                 bone_lengths=[j.bone_lengths for j in group], per_character=per, progress=progress,
                                 contacts=plans, outcomes=outcomes)
        for j, r, o in zip(group, results, outcomes):
            j.result, j.outcomes = r, o
            if o is not None:
                j.rows, j.contact_counts = rows(o, j.bound, j.mesh, j.flags)
                j.root_windows = root_rows(r, j.bound, j.warn)

    def compute(self, job, progress=None):
        for j in self.jobs[1:]:                         # the partners' own stages (their garments)
            for stage in j.stages:
                stage.compute(j, None)

    def write(self, job, report):
        report["partners"] = []
        for j in self.jobs[1:]:
            r = j.write()
            report["partners"].append(dict(armature=j.arm.name, **{k: r[k] for k in ("action", "source", "frames")}))
            if "garments" in r:
                report["garments"] = report.get("garments", []) + r["garments"]
