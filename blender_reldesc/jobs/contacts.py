"""Contacts in a bake: the panel's thresholds and per-phase flags, adaptation with contacts checked
(and re-positioned when asked), the rows the Contacts panel and the report show; and the Detect /
Reposition Contacts job."""

from __future__ import annotations

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import adapt
from ..core.contacts import ContactError, adapt_with_contacts, contact_report, detect_contacts
from .bound import Bound
from .controls import read_environment


def phase_key(row):
    """A phase's key in the stored rows: ``effector:start-end`` (frames)."""
    return f"{row['effector']}:{row['start']}-{row['end']}"


def flags(rows):
    """{phase key: (locked, ignored)} set by the animator in the Contacts panel (stored rows)."""
    return {phase_key(r): (bool(r.get("lock")), bool(r.get("ignore"))) for r in rows}


def contact_settings(settings, bound, overrides=None):
    """Effectors and thresholds (motion units, per second) from the panel's settings
    (``adapter.scene.settings``), each overridable (``effectors`` a list or comma-separated,
    ``distance`` and ``speed`` fractions of body height)."""
    H = bound.binding.body_height
    o = overrides or {}
    names = o.get("effectors", settings.contact_effectors)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    dist = float(o.get("distance", settings.contact_distance))
    speed = float(o.get("speed", settings.contact_speed))
    if not (0 < dist < 1 and 0 < speed < 10):
        raise SceneError(f"contact thresholds out of range (distance {dist:g}, speed {speed:g}): give the "
                         "distance as a fraction of body height in (0, 1) and the speed in body heights per "
                         "second in (0, 10)")
    return dict(effectors=names or None, distance=dist * H, speed=speed * H, fps=settings.fps)


def prepare(settings, bound, overrides=None):
    """What a bake reads for its contacts: (the stored rows' flags, ``contact_settings``)."""
    return flags(bound.contacts), contact_settings(settings, bound, overrides)


def contact_plan(bound, flags, reposition, settings=None):
    """``adapt_with_contacts``' contact settings for a bound armature: its phases (detected
    once), the panel's per-phase lock / ignore flags, the thresholds. Raises ContactError when
    no phase is found."""
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


def rows(outcomes, bound, mesh, flags):
    """The rows the panel and the report show (``contact_report``), each with the surfaces' names
    and the animator's flags kept; and their counts by status."""
    out, counts = contact_report(outcomes, int(bound.frames[0]), mesh)
    ends = np.cumsum(bound.meta["triangle_counts"])
    names = bound.meta["objects"]
    for row, o in zip(out, outcomes):
        row["surface"] = names[int(np.searchsorted(ends, o.phase.triangle, side="right"))]
        if o.status == "repositioned" and o.triangle is not None:
            row["new_surface"] = names[int(np.searchsorted(ends, o.triangle, side="right"))]
        row["lock"], row["ignore"] = flags.get(phase_key(row), (False, False))
    return out, counts


def root_rows(result, bound, warn=None):
    """The report's ``root_windows``: per stretch of frames where the trunk went through a surface
    or the root was replanned (``AdaptResult.root_windows``), its scene frames, status and the
    frames where the trunk still goes through a surface; with ``warn``, one warning naming those
    frames when there are any."""
    offset = int(bound.frames[0])
    out = [dict(start=int(w.start + offset), end=int(w.end + offset), status=w.status,
                frames_through=[int(f + offset) for f in w.through]) for w in (result.root_windows or [])]
    through = [f for r in out for f in r["frames_through"]]
    if warn is not None and through:
        spans = ", ".join(f"{r['start']}-{r['end']} ({r['status']})" for r in out if r["frames_through"])
        warn(f"the body goes through a surface on {len(through)} frame(s), first {through[0]}, last {through[-1]} "
             f"[{spans}]: bake with 'Re-position contacts' on to replan the root, or move the obstacle")
    return out


def adapt_checked(bound, mesh, flags, reposition, settings, warn, **options):
    """Adapt with the contacts checked (re-positioned with ``reposition``): ``(result, outcomes,
    rows, counts, root windows)`` (``root_rows``, warned about). Without contact phases the motion
    is adapted alone (outcomes None, a warning), unless re-positioning was asked for (SceneError)."""
    try:
        result, outcomes = adapt_with_contacts(bound.binding, mesh, **contact_plan(bound, flags, reposition,
                                                                                   settings), **options)
    except ContactError as e:
        if reposition:
            raise SceneError(f"cannot re-position contacts: {e}") from None
        warn(f"contacts not checked: {e}")
        return adapt(bound.binding, mesh, **options), None, [], {"valid": 0, "repositioned": 0, "unresolved": 0}, []
    return (result, outcomes, *rows(outcomes, bound, mesh, flags), root_rows(result, bound, warn))


class ContactsJob:
    """Detect the contact phases of a bound armature and their status against the environment now;
    with ``reposition`` the invalid ones are re-positioned too (shown in the panel; Bake then bakes
    with re-positioning on). The rows are stored on the armature for the panel."""

    label = "contacts"

    def __init__(self, scene, arm, reposition=False, warn=print):
        self.scene, self.arm, self.reposition, self.warn = scene, arm, bool(reposition), warn

    def read(self):
        settings = adapter.scene.settings(self.scene)
        self.bound = bound = Bound(self.arm, self.scene)
        self.mesh, self.influence, self.overrides, _ = read_environment(self.scene, bound, settings.influence_group,
                                                                        self.warn)
        self.flags, self.settings = prepare(settings, bound)

    def compute(self, progress=None):
        try:
            plan = contact_plan(self.bound, self.flags, self.reposition, self.settings)
            result, outcomes = adapt_with_contacts(self.bound.binding, self.mesh, **plan,
                                                   affinity_override=self.overrides,
                                                   vertex_influence=self.influence, progress=progress)
        except ContactError as e:
            raise SceneError(str(e)) from None
        self.rows, self.counts = rows(outcomes, self.bound, self.mesh, self.flags)
        self.root_windows = root_rows(result, self.bound)

    def write(self):
        adapter.storage.store_contacts(self.arm, self.rows)
        return dict(contacts=self.rows, contact_counts=self.counts, armature=self.arm.name,
                    repositioned=self.reposition, root_windows=self.root_windows)

    def run(self, progress=None):
        self.read()
        self.compute(progress)
        return self.write()


def contacts_job(scene, arm, reposition=False, warn=print, progress=None):
    """``ContactsJob(...).run()``: (rows, counts)."""
    report = ContactsJob(scene, arm, reposition, warn).run(progress)
    return report["contacts"], report["contact_counts"]
