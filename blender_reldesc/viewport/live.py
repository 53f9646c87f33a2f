"""Live preview: a frame-change handler that poses the armature from the environment now.

The handler is registered only while a scene has Live Preview on. It caches
the stored binding and a core ``LiveSession`` per armature (cleared on file
load), reads the evaluated environment of the current frame and sets the
pose; it never calls ``frame_set`` or operators.

With *Re-position Contacts* on and a static environment, the preview shows
``core.contacts.ContactsPreview`` instead: each edit adapts the whole clip with
contact re-positioning and root replanning (what Bake gives), and every frame
is shown from that; ``last_contacts`` holds the statuses for the panel.

A character bound with partners poses its whole group (``core.characters.
PartnersLiveSession``, read as a bake reads the group: ``jobs.partners.group_of``):
every partner's armature is held and posed with it, without contact re-positioning.
"""

from __future__ import annotations

import contextlib
import time

import bpy
import numpy as np
from bpy.app.handlers import persistent

from .. import adapter
from ..core import LiveSession, RelDescError
from ..jobs import Bound, bone_controls, contact_plan, contact_settings, read_influence
from ..jobs.contacts import flags
from ..optional import feature

_sessions = {}
last_seconds = 0.0
last_error = ""
#: The contacts' counts and the whole-clip solve time of the last edit with contacts on.
last_contacts = {}


def session_for(arm, scene=None):
    """The cached stored binding and core LiveSession of ``arm`` (built on first use), and with
    the scene's *Re-position Contacts* on a ``ContactsPreview`` (``entry["contacts"]``)."""
    key = arm.name
    entry = _sessions.get(key)
    if entry is not None and scene is not None and _moved(entry["bound"], scene, arm, entry):
        entry = None                                    # the armature moved: read where it is now
    if entry is not None:
        return entry
    bound = Bound(arm, scene)
    if bound.meta.get("partners") and scene is not None:
        entry = _sessions[key] = _group_entry(scene, arm, bound)
    else:
        options = _options(bound)
        entry = {"bound": bound, "influence_dirty": True, "session": LiveSession(bound.binding, **options),
                 "contacts": None}
        settings = getattr(scene, "reldesc", None) if scene is not None else None
        if settings is not None and settings.reposition_contacts and not bound.binding.mesh.animated:
            entry["contacts"] = _contacts_preview(scene, arm, bound, options)
        entry["watched"] = set().union(*(p.watched() for p in bound.objects))
        _sessions[key] = entry
    return entry


def _options(bound):
    """A character's adapt options for the preview: its per-bone controls and bone lengths now."""
    overrides, hinges = bone_controls(bound)
    return dict(affinity_override=overrides, bone_lengths=bound.new_lengths, hinges=hinges)


def _group_entry(scene, arm, bound):
    """The cache entry of a character bound with partners: its group (``entry["group"]``:
    (armature, Bound) pairs, ``arm`` first) and their ``PartnersLiveSession``."""
    partners = feature("partners")
    arms, bounds = partners.group_of(scene, arm, bound)
    options = [_options(b) for b in bounds]
    return {"bound": bound, "influence_dirty": True, "session": partners.live_session(arms, bounds, options),
            "contacts": None, "group": list(zip(arms, bounds)),
            "watched": set().union(*(p.watched() for b in bounds for p in b.objects))}


def _moved(bound, scene, arm, entry=None):
    """Whether the armature's object matrix at the current frame is not the one ``bound`` read
    (with ``entry`` a group's: any of its armatures')."""
    if entry is not None and "group" in entry:
        try:
            return any(_moved(b, scene, ob) for ob, b in entry["group"])
        except ReferenceError:                          # a partner removed: read the group again
            return True
    f = int(np.clip(scene.frame_current - bound.frames[0], 0, len(bound.frames) - 1))
    return np.abs(adapter.placement.world_matrix(arm) - bound.placement[f]).max() > 1e-9


def _contacts_preview(scene, arm, bound, options):
    """The ContactsPreview of the scene's contact settings and the panel's lock / ignore flags."""
    from ..core.contacts import ContactError, ContactsPreview
    settings = contact_settings(adapter.scene.settings(scene), bound)
    try:
        plan = contact_plan(bound, flags(bound.contacts), False, settings)
    except ContactError:                                  # no phase: the whole clip, without contacts
        plan = dict(settings, reposition=False, locked=set(), ignored=set(), phases=[])
    phases = plan.pop("phases")
    plan.pop("reposition")
    return ContactsPreview(bound.binding, plan, phases=phases, **options)


def _refresh_influence(scene, entry):
    """Re-read painted influence after an edit (vertex groups need a Python loop: not every frame)."""
    if entry["influence_dirty"] and "group" in entry:
        for c, (_, bound) in enumerate(entry["group"]):
            entry["session"].set_influence(c, read_influence(scene, bound))
        entry["influence_dirty"] = False
    if entry["influence_dirty"]:
        influence = read_influence(scene, entry["bound"])
        entry["session"].set_influence(influence)
        if entry["contacts"] is not None:
            entry["contacts"].set_influence(influence)
        entry["influence_dirty"] = False


def clear():
    _sessions.clear()
    last_contacts.clear()


def pose_frame(scene, depsgraph, arm):
    """Pose ``arm`` at the scene's current frame; returns the joint positions (J,3).

    The bound bones are posed as the bake keys them: their constraints muted (``hold_pose``, as
    the bake keys their influence to 0), each keyed against its parent as Blender plays it now
    (a bone whose parent is outside the bound set, as most of a Rigify rig's deform bones: read
    from this frame's evaluated pose, as the bake reads it back)."""
    entry = session_for(arm, scene)
    frames = entry["bound"].frames
    f = int(np.clip(scene.frame_current - frames[0], 0, len(frames) - 1))
    _refresh_influence(scene, entry)
    if "group" in entry:
        return _pose_group(entry, depsgraph, f)[0]
    bound, session = entry["bound"], entry["contacts"] or entry["session"]
    verts, _, counts = adapter.mesh.read_environment(depsgraph, bound.objects, triangles=False)
    bound.check_counts(counts)
    p = session.pose(f, bound.into_bind(verts, np.array([f])))
    if entry["contacts"] is not None:
        c = entry["contacts"]
        last_contacts.update({k: sum(o.status == k for o in c.outcomes) for k in ("valid", "repositioned",
                                                                                  "unresolved")},
                             seconds=c.seconds)
    _hold([(arm, bound)])
    _set_pose(arm, bound, p, f)
    return p


def _pose_group(entry, depsgraph, f):
    """Pose every armature of a group's entry at bound frame ``f``; their joints (list of (J,3))."""
    verts, read = [], {}
    for _, bound in entry["group"]:
        key = tuple(part.name for part in bound.objects)             # partners share an environment
        got = read.get(key)
        if got is None:
            got = read[key] = adapter.mesh.read_environment(depsgraph, bound.objects, triangles=False)
        bound.check_counts(got[2])
        verts.append(bound.into_bind(got[0], np.array([f])))
    poses = entry["session"].pose(f, verts)
    _hold(entry["group"])
    for (ob, bound), p in zip(entry["group"], poses):
        _set_pose(ob, bound, p, f)
    return poses


def _hold(group):
    """Hold the armatures of ``group`` ((armature, Bound) pairs) for the preview, giving back
    first what it held of others (another armature's preview, before this one)."""
    if all(adapter.rig.pose_held(ob) for ob, _ in group):
        return
    release()
    for ob, bound in group:
        adapter.rig.hold_pose(ob, bound.rig.names)
        _held.append(ob)


def _set_pose(arm, bound, p, f):
    """Pose ``arm``'s bound bones on the joints ``p`` (J,3) at bound frame ``f``."""
    watch = bound.outer_watch
    quats, locs, scales = bound.pose_now(p, f, adapter.rig.posed_matrices(arm, watch) if watch else None)
    adapter.rig.set_pose(arm, bound.rig, quats, locs, bound.keyed_locations, scales)


@persistent
def on_frame_change(scene, depsgraph=None):
    global last_seconds, last_error
    settings = getattr(scene, "reldesc", None)
    if _paused or settings is None or not settings.live or settings.armature is None:
        return
    t0 = time.perf_counter()
    try:
        pose_frame(scene, depsgraph or bpy.context.evaluated_depsgraph_get(), settings.armature)
        last_error = ""
    except RelDescError as e:
        if str(e) != last_error:
            print(f"reldesc live preview: {e}")
        last_error = str(e)
        release()                                     # the rigs play their actions while the preview cannot
        if adapter.rig.pose_held(settings.armature):
            adapter.rig.release_pose(settings.armature)
    last_seconds = time.perf_counter() - t0


_paused = 0


@contextlib.contextmanager
def paused():
    """Hold the live preview while a job plays frames (Bind reading the source, Bake reading
    parents back, a command line job): the handler does nothing and what it took from the rig
    is given back (``release``), so that the job reads the rig as its action plays it. After,
    the current frame is posed again."""
    global _paused
    _paused += 1
    try:
        if _paused == 1:
            release()
        yield
    finally:
        _paused -= 1
        if not _paused:
            refresh()


#: The armatures the preview holds (``adapter.rig.hold_pose``) since the last file load or undo.
_held = []


def release(everywhere=False):
    """Give back what the live preview took from the armatures it holds (``adapter.rig.
    release_pose``): their constraints switched back on, the posed bones' channels as they were;
    ``everywhere``: from every armature with a record (after a load or an undo, a crash's
    autosave: the record is in the file's data)."""
    if everywhere:
        _held[:] = [ob for ob in getattr(bpy.data, "objects", ()) if ob.type == 'ARMATURE']  # none while registering
    for ob in _held:
        try:
            if adapter.rig.pose_held(ob):
                adapter.rig.release_pose(ob)
        except ReferenceError:                          # removed since
            pass
    _held.clear()


def refresh():
    """Pose the current frame again in the scene whose preview is on (after a pause, a save)."""
    scene = getattr(bpy.context, "scene", None)
    if scene is not None and getattr(scene, "reldesc", None) is not None and scene.reldesc.live:
        on_frame_change(scene)


@persistent
def on_depsgraph_update(scene, depsgraph=None):
    """Follow edits and weight painting of the environment without a frame change."""
    settings = getattr(scene, "reldesc", None)
    if settings is None or not settings.live or settings.armature is None or depsgraph is None:
        return
    entry = _sessions.get(settings.armature.name)
    if entry is None:
        return
    touched = any(getattr(u.id, "original", u.id).name in entry["watched"] for u in depsgraph.updates
                  if isinstance(u.id, (bpy.types.Object, bpy.types.Mesh)))
    if touched:
        entry["influence_dirty"] = True
        on_frame_change(scene, depsgraph)


@persistent
def on_load(_dummy=None):
    clear()
    release(everywhere=True)        # a crash's autosave keeps what a preview took: give it back
    for scene in bpy.data.scenes:
        if getattr(scene, "reldesc", None) is not None and scene.reldesc.live:
            _add()
            return
    _remove()


def _add():
    if on_frame_change not in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.append(on_frame_change)
    if on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.append(on_depsgraph_update)


def _remove():
    while on_frame_change in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.remove(on_frame_change)
    while on_depsgraph_update in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.remove(on_depsgraph_update)


@persistent
def on_save_pre(_dummy=None):
    """Files are saved as the rig is without the preview (constraints on, the bones' own pose)."""
    release()


@persistent
def on_save_post(_dummy=None):
    refresh()


@persistent
def on_undo(_dummy=None):
    """An undo brings back the data as it was (what a preview took with it, in its record), not the
    sessions, whose objects may be gone: read them again, and pose the frame."""
    clear()
    if _live_scene() is None:
        release(everywhere=True)
        return
    _held[:] = [ob for ob in bpy.data.objects if ob.type == 'ARMATURE' and adapter.rig.pose_held(ob)]
    refresh()


def _live_scene():
    return next((sc for sc in getattr(bpy.data, "scenes", ()) if getattr(sc, "reldesc", None) is not None
                 and sc.reldesc.live), None)


def sync(scene):
    """Add or remove the handler to match the scene's Live Preview setting; off gives the rig back
    (``release``)."""
    clear()
    if scene.reldesc.live:
        _add()
    else:
        _remove()
        release(everywhere=True)


_FILE_HANDLERS = (("load_post", on_load), ("save_pre", on_save_pre), ("save_post", on_save_post),
                  ("undo_post", on_undo), ("redo_post", on_undo))


def register():
    for name, fn in _FILE_HANDLERS:
        getattr(bpy.app.handlers, name).append(fn)


def unregister():
    _remove()
    for name, fn in _FILE_HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while fn in handlers:
            handlers.remove(fn)
    release(everywhere=True)
    clear()
