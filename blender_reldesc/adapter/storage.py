"""Every key the extension stores in a .blend file, and the data behind them.

A binding lives on the armature *data* (see ``host``): the core's binding bytes, the source
pose, the bind report (meta), ID pointers to the source action and the environment collection,
the garments carried with it and the constraints a bake switched off. The contact rows live on
the armature object; the characters and actions a walk made carry ``WALK_KEY``.
"""

from __future__ import annotations

import json

import bpy
import numpy as np

from .scene import SceneError


#: Keys of the data stored on an armature object.
BINDING_KEY = "_reldesc_binding"


POSE_KEY = "_reldesc_pose"


META_KEY = "_reldesc_meta"


#: Keys of bindings stored by 0.1.0 (bytes, shown in Custom Properties): read, replaced on re-bind.
LEGACY_KEYS = ("reldesc_binding", "reldesc_pose", "reldesc_meta")


STORAGE_VERSION = 2


def _pack(data):
    """bytes -> int32 array (an ID property Blender stores whole, NUL bytes included)."""
    pad = (-len(data)) % 4
    return np.frombuffer(data + b"\0" * pad, dtype=np.int32).copy()


def _unpack(prop, size):
    return np.asarray(prop, dtype=np.int32).tobytes()[:size]


#: The names of a bound armature's garments (``jobs.garment``), on the armature data beside the
#: binding: read here, so a bake knows whether it carries garments without importing them.
GARMENTS_KEY = "_reldesc_garments"


def garment_names(arm):
    return [str(n) for n in arm.data.get(GARMENTS_KEY, [])]


#: ID-pointer properties: the source action and the environment collection follow
#: renames, and appending the armature brings them along.
SOURCE_KEY = "_reldesc_source"


ENVIRONMENT_KEY = "_reldesc_environment"


def host(arm):
    """Where a binding lives: the armature *data* block, not the object.

    Blender's Bake Action (``nla.bake``, custom properties on by default)
    reads every custom property of the object on every frame and keys it:
    a binding stored on the object took minutes per hundred frames to bake
    and would have been keyed element by element. Armature data is not
    touched by it, and appending the armature object brings its data along.
    (Linked duplicates that share the data share the binding.)
    """
    return arm.data


def bound_source(arm, meta):
    """The bound source action: by pointer, else by the name stored at bind (None if gone)."""
    action = host(arm).get(SOURCE_KEY)
    return action if isinstance(action, bpy.types.Action) else bpy.data.actions.get(meta["action"])


def bound_environment(arm, meta):
    """Name of the bound environment collection now (it may have been renamed or appended)."""
    coll = host(arm).get(ENVIRONMENT_KEY)
    return coll.name if isinstance(coll, bpy.types.Collection) else meta["environment"]


def store_binding(arm, binding_bytes, pose_bytes, meta, action=None, collection=None):
    """Store a binding on the armature, replacing any previous one whole.

    The data live in ID properties of the armature data (see ``host``)
    whose names start with "_" (hidden from the Custom Properties panel, so
    nobody edits them by accident) as int32 arrays: assigning bytes over an
    existing bytes property keeps only the bytes before the first NUL in
    Blender 5.0.1, which corrupted re-binds.
    """
    clear_binding(arm)
    store = host(arm)
    if action is not None:
        store[SOURCE_KEY] = action
    if collection is not None:
        store[ENVIRONMENT_KEY] = collection
    store[BINDING_KEY] = _pack(binding_bytes)
    store[POSE_KEY] = _pack(pose_bytes)
    store[META_KEY] = dict(meta, version=STORAGE_VERSION, binding_size=len(binding_bytes),
                           pose_size=len(pose_bytes))


def stored_meta(arm):
    meta = host(arm).get(META_KEY, arm.get(LEGACY_KEYS[2]))
    return None if meta is None else meta.to_dict()


def load_stored(arm):
    """(binding bytes, pose bytes, meta dict) or SceneError when not bound."""
    store = host(arm)
    if META_KEY not in store and all(k in arm for k in LEGACY_KEYS):    # stored by 0.1.0, on the object
        return bytes(arm[LEGACY_KEYS[0]]), bytes(arm[LEGACY_KEYS[1]]), arm[LEGACY_KEYS[2]].to_dict()
    if BINDING_KEY not in store or META_KEY not in store or POSE_KEY not in store:
        raise SceneError(f"armature '{arm.name}' is not bound: press Bind first")
    meta = store[META_KEY].to_dict()
    if meta.get("version", 0) > STORAGE_VERSION:
        raise SceneError("the binding was stored by a newer version of the extension: update it or re-bind")
    return (_unpack(store[BINDING_KEY], meta["binding_size"]), _unpack(store[POSE_KEY], meta["pose_size"]),
            meta)


def clear_binding(arm):
    found = False
    for where, keys in ((host(arm), (BINDING_KEY, POSE_KEY, META_KEY, SOURCE_KEY, ENVIRONMENT_KEY)),
                       (arm, LEGACY_KEYS)):
        for key in keys:
            if key in where:
                del where[key]
                found = True
    return found


BYPASS_KEY = "_reldesc_bypassed"

#: What the live preview took from an armature to pose it, on the armature data: the constraints it
#: muted and the pose channels of the bones it poses (``adapter.rig.hold_pose``). Stored in the
#: file's data, not in a module, so that an undo or a crash's autosave keeps it with the flags.
LIVE_MUTED_KEY = "_reldesc_live_muted"



def add_garment(arm, name, record=None):
    """Record mesh ``name`` as a garment of ``arm``, with ``record``: how it is carried (``jobs.
    garment``: where its source as bound is kept, whether it scales with the body); the names
    after."""
    names = garment_names(arm)
    if name not in names:
        names.append(name)
    arm.data[GARMENTS_KEY] = names
    if record is not None:
        kept = garment_records(arm)
        kept[name] = dict(record)
        arm.data[GARMENT_RECORDS_KEY] = json.dumps(kept)
    return names


#: How each garment is carried ({name: {"path", "digest", "binding", "scale_with_body"}}, JSON),
#: on the armature data beside the garments' names.
GARMENT_RECORDS_KEY = "_reldesc_garment_records"


def garment_records(arm):
    """{garment name: its record} of ``arm``'s garments bound with one (``add_garment``)."""
    return json.loads(arm.data.get(GARMENT_RECORDS_KEY, "{}"))


#: The contact rows of the last detection, re-positioning or bake (JSON), on the armature object,
#: with the animator's per-phase lock / ignore flags.
CONTACTS_KEY = "reldesc_contacts"


def stored_contacts(arm):
    """The contact rows stored by the last detection, re-positioning or bake ([] if none)."""
    raw = arm.get(CONTACTS_KEY)
    return json.loads(raw) if raw else []


def store_contacts(arm, rows):
    arm[CONTACTS_KEY] = json.dumps(rows)


def contacts_state(arm):
    """What the overlay's cache compares: the stored rows as stored."""
    return str(arm.get(CONTACTS_KEY, ""))


def set_contact_flag(arm, index, flag, value):
    rows = stored_contacts(arm)
    rows[index][flag] = bool(value)
    store_contacts(arm, rows)


#: On the characters and actions a walk made: the name of the armature they walk for.
WALK_KEY = "reldesc_walk"


def load(arm):
    """Everything stored with ``arm``'s binding, read at once: ``{data, pose, meta, source (the
    action, None when gone), environment (the collection's name now), contacts, garments,
    restore (what the last bake recorded for ``actions.use_source``)}``.
    SceneError when the armature is not bound."""
    data, pose, meta = load_stored(arm)
    return dict(data=data, pose=pose, meta=meta, source=bound_source(arm, meta),
                environment=bound_environment(arm, meta), contacts=stored_contacts(arm),
                garments=garment_names(arm), restore=json.loads(host(arm).get(BYPASS_KEY, "{}")))


def store_bake(arm, restore, contacts=None):
    """What a bake stores beside its action: what ``actions.use_source`` restores, and the contact
    rows (when the bake checked contacts). A bake after a bake keeps what the first one recorded:
    the values from before any adapted action played."""
    earlier = json.loads(host(arm).get(BYPASS_KEY, "{}"))
    host(arm)[BYPASS_KEY] = json.dumps({**restore, **earlier})
    if contacts is not None:
        store_contacts(arm, contacts)
