"""A stored binding read back with what it refers to (its bones, its environment's meshes), and
binding files: a binding saved to disk to bake other shots of an edited copy of the environment."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import bpy
import numpy as np

from ..core.archive import save_npz
from . import storage
from .mesh import bound_objects, environment_objects, read_environment, topology_matches
from .placement import object_matrices, placement_animated
from .rig import read_bone_set, select_bones, read_rig
from .scene import SceneError


def read_bound(arm, scene=None):
    """``arm``'s stored binding (``storage.load``) with its bones now (``rig``, and ``full``: every
    bone), its environment's parts (``objects``, checked against the bound ones) and where things
    are now: the armature's object matrix at every bound frame (``placement`` (F,4,4)) and the
    parts' (``part_matrices`` (P,4,4), NaN for a part that moves)."""
    stored = storage.load(arm)
    meta = stored["meta"]
    # Bindings from before bone sets covered every bone.
    full, rig = read_bone_set(arm, meta.get("bone_set", "ALL"))
    objects, parts_now = bound_objects(stored["environment"], meta, placed=True)
    frames = np.arange(meta["frame_start"], meta["frame_end"] + 1)
    placement = object_matrices(scene or bpy.context.scene, arm, frames)
    return SimpleNamespace(arm=arm, full=full, rig=rig, objects=objects, placement=placement,
                           part_matrices=parts_now, **stored)


def environment_status(meta, arm):
    """(matches, message) for the panel: a cheap check of names and, on meshes
    without modifiers, vertex counts (the bake checks the evaluated geometry)."""
    status = binding_status(meta, arm)
    return status.ok, status.message


def binding_status(meta, arm):
    """What the panel shows of a binding, read once a redraw: ``ok`` and ``message``
    (``environment_status``'s), and where things are now: ``matrix``, the armature's object
    matrix (None when its placement changes over time: only a bake, which plays every frame,
    tells then, or when the environment does not match) and ``parts``, its environment parts'
    matrices (P,4,4) (None when it does not match)."""
    try:
        objects, parts = bound_objects(storage.bound_environment(arm, meta), meta, placed=True)
    except SceneError as e:
        return SimpleNamespace(ok=False, message=str(e), matrix=None, parts=None)
    if not topology_matches(objects, meta):
        return SimpleNamespace(ok=False, message="environment topology changed since bind: re-bind", matrix=None,
                               parts=None)
    matrix = None if placement_animated(arm) else np.array(arm.matrix_world, dtype=float)
    return SimpleNamespace(ok=True, message="Environment matches the binding", matrix=matrix, parts=parts)


def save_binding_file(arm, path):
    """Write ``arm``'s stored binding to ``path`` (.npz): the core's binding file (``Binding.load``
    reads it) plus what Blender needs beside it (the source pose and the bind report), so other
    shots whose environment is an edited copy of the bound one can bake from it."""
    data, pose, meta = storage.load_stored(arm)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["blender_pose"] = np.frombuffer(pose, np.uint8)
    arrays["blender_meta"] = np.asarray(json.dumps(meta))
    with open(path, "wb") as fh:
        save_npz(fh, **arrays)


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
    save_npz(buf, **core)
    data = buf.getvalue()
    with np.load(io.BytesIO(pose), allow_pickle=False) as z:
        bones = list(z["bones"])
    rig = select_bones(arm, read_rig(arm), meta.get("bone_set", "ALL"))
    if bones != rig.names:
        raise SceneError(f"the bones of '{arm.name}' are not those of the binding in {path}: bind this rig")
    action = bpy.data.actions.get(meta["action"])
    if action is None:
        raise SceneError(f"the binding in {path} is of action '{meta['action']}', which is not in this file")
    coll = bpy.data.collections.get(meta["environment"])
    parts = {p.name: p for p in environment_objects(meta["environment"])[0]} if coll is not None else {}
    missing = [n for n in meta["objects"] if n not in parts]
    if missing:
        raise SceneError(f"the environment of the binding in {path} is missing here: {', '.join(missing)}")
    objects = [parts[n] for n in meta["objects"]]
    _, _, counts = read_environment(bpy.context.evaluated_depsgraph_get(), objects, triangles=False)
    if [c[0] for c in counts] != list(meta["vertex_counts"]):
        changed = [ob.name for ob, c, v in zip(objects, counts, meta["vertex_counts"]) if c[0] != v]
        raise SceneError(f"the environment's topology differs from the binding in {path} ({', '.join(changed)}): "
                         "bind this shot")
    store_binding(arm, data, pose, meta, action, bpy.data.collections.get(meta["environment"]))
    return meta


def store_binding(arm, binding_bytes, pose_bytes, meta, action, collection):
    """Store a binding (``storage.store_binding``) and keep its source action: once the adapted
    action is assigned nothing else may use the source, and a fake user keeps Blender from
    dropping it when the file is saved."""
    storage.store_binding(arm, binding_bytes, pose_bytes, meta, action=action, collection=collection)
    action.use_fake_user = True

