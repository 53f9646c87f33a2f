"""Garments carried by descriptors (seed 000 §9), Blender side.

``reldesc.bind_garment`` records a mesh object (a skirt, a cape: its own animation, a baked
cloth simulation or shape keys) as a garment of a bound armature. Every bake of that armature
then reads the garment as it plays with the *source* action, carries it onto the adapted
motion (``core.garment``), writes a PC2 point cache beside the .blend (or in the temporary
folder for an unsaved file) and points a Mesh Cache modifier ("RelDesc Garment", last in
the stack) at it, so the garment plays back without a simulation. The garment's own data are
never changed; removing the modifier shows it as it was.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

import bpy
import numpy as np

from . import adapter
from .adapter import GARMENTS_KEY, SceneError, garment_names
from .core.errors import RelDescError
from .core import garment as core_garment

#: The Mesh Cache modifier the bake adds to a garment.
MODIFIER = "RelDesc Garment"


def _garment(name, arm):
    ob = bpy.data.objects.get(name or "")
    if ob is None:
        raise SceneError(f"no object named '{name}' to carry as a garment: give a mesh object")
    if ob.type != 'MESH':
        raise SceneError(f"garment '{name}' is a {ob.type.lower()}, not a mesh: give the garment's mesh object")
    if ob == arm:
        raise SceneError("the armature cannot be its own garment")
    return ob


def read_source_vertices(scene, arm, source, frames, garment):
    """(F,V,3) world vertices of ``garment`` over ``frames`` with ``arm`` playing ``source``
    and the garment's own RelDesc modifier off; the armature's action and the modifier are
    put back after."""
    mod = garment.modifiers.get(MODIFIER)
    shown = None if mod is None else (mod.show_viewport, mod.show_render)
    ad = arm.animation_data
    before = (ad.action, ad.action_slot) if ad is not None else (None, None)
    try:
        if mod is not None:
            mod.show_viewport = mod.show_render = False
        adapter.assign(arm, source, adapter.armature_slot(arm, source))
        verts, tris, _ = adapter.read_environment_frames(scene, [garment], frames)
    finally:
        if before[0] is not None:
            adapter.assign(arm, *before)
        if mod is not None:
            mod.show_viewport, mod.show_render = shown
    return verts, tris


def bind_garment(scene, arm, name):
    """Record mesh ``name`` as a garment of the bound ``arm`` (checked against the binding: the
    garment must be near the body). Returns a report."""
    from . import jobs
    garment = _garment(name, arm)
    bound = jobs.Bound(arm)
    source = adapter.bound_source(arm, bound.meta)
    if source is None:
        raise SceneError(f"the source action '{bound.meta['action']}' is gone: re-bind with the motion to adapt")
    verts, tris = read_source_vertices(scene, arm, source, bound.frames, garment)
    try:
        g = _bound_garment(bound, garment, verts, tris)
    except RelDescError as e:
        raise SceneError(f"garment '{name}': {e}") from None
    names = garment_names(arm)
    if garment.name not in names:
        names.append(garment.name)
    arm.data[GARMENTS_KEY] = names
    return dict(garment=garment.name, vertices=int(verts.shape[1]), frames=int(len(bound.frames)),
                edges=int(len(g.edges)), garments=names)


def _bound_garment(bound, garment, verts, tris):
    """``core.garment.bind_garment`` of the garment as the source plays it (``verts`` (F,V,3),
    ``tris``), kept with the binding for the next bake while the garment, the body's radii and
    the binding stay the same: binding a 10k-vertex skirt (its control graph, its embedding)
    took 1.5 s of every bake."""
    radii = _body_radii(bound.arm, bound, garment)
    digest = hashlib.blake2b(digest_size=16)
    for part in (verts, tris, radii):
        digest.update(b"-" if part is None else np.ascontiguousarray(part).tobytes())
    digest = digest.digest()
    memo = bound.binding._joint_models
    key = ("garment", garment.name)
    kept = memo.get(key)
    if kept is not None and kept[0] == digest:
        return kept[1]
    b = bound.binding
    g = core_garment.bind_garment(b.skeleton, b.motion, verts, tris, body_height=b.body_height, radii=radii,
                                  environment=b.mesh)
    memo[key] = (digest, g)
    return g


def _body_radii(arm, bound, garment):
    """The body's capsule radii (``partners.capsule_radii``: its skinned meshes, this garment
    and the other garments aside, or the bones' radius properties; NaN: the core's default)."""
    from .partners import capsule_radii
    return capsule_radii(arm, bound.binding.skeleton, exclude={garment.name})


#: Object channels that move an object (an action holding any of them moves it).
_TRANSFORMS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale",
               "delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale")


def _moves(ob, _seen=None):
    """Whether ``ob``'s world transform can change over the frames: object channels keyed or
    driven, constraints, or a parent that moves (a bone or vertex parent moves with its
    armature's or mesh's animation)."""
    seen = set() if _seen is None else _seen
    if ob is None or ob.name in seen:
        return False
    seen.add(ob.name)
    if len(ob.constraints):
        return True
    ad = ob.animation_data
    if ad is not None:
        if len(ad.drivers) or len(ad.nla_tracks):
            return True
        if ad.action is not None and any(fc.data_path in _TRANSFORMS for fc in adapter._fcurves(ad.action)):
            return True
    if ob.parent is not None and ob.parent_type != 'OBJECT' and adapter.is_animated(ob.parent):
        return True
    return _moves(ob.parent, seen)


def _matrices(scene, garment, frames):
    """The garment's world matrices: (1,4,4) when it cannot move, else (F,4,4) over ``frames``
    as the scene now plays (the adapted actions assigned), so that the point cache, in the
    object's space, plays back where it was carried in the world."""
    if not _moves(garment):
        return np.array(garment.matrix_world, dtype=float)[None]
    now = scene.frame_current
    out = np.empty((len(frames), 4, 4))
    try:
        for i, f in enumerate(np.asarray(frames).tolist()):
            scene.frame_set(int(f))
            out[i] = np.array(garment.matrix_world, dtype=float)
    finally:
        scene.frame_set(now)
    return out


def cache_path(garment):
    folder = bpy.path.abspath("//") if bpy.data.filepath else tempfile.gettempdir()
    return os.path.join(folder, f"{bpy.path.clean_name(garment.name)}.reldesc.pc2")


def carry(job):
    """After ``job`` (a ``jobs.BakeJob``) computed its result: each of its armature's garments
    carried onto the adapted motion, written as a point cache and shown by a Mesh Cache
    modifier. Returns a report per garment."""
    arm, bound = job.arm, job.bound
    out = []
    for name in garment_names(arm):
        garment = _garment(name, arm)
        verts, tris = read_source_vertices(job.scene, arm, job.source, bound.frames, garment)
        try:
            g = _bound_garment(bound, garment, verts, tris)
            world = core_garment.carry_garment(g, job.result.positions, environment=job.mesh)
        except RelDescError as e:
            raise SceneError(f"garment '{name}': {e}") from None
        inv = np.linalg.inv(_matrices(job.scene, garment, bound.frames))                  # (1 or F,4,4)
        local = np.einsum("fij,fvj->fvi", inv[:, :3, :3], world) + inv[:, None, :3, 3]
        path = cache_path(garment)
        core_garment.write_pc2(path, local, start=float(bound.frames[0]), rate=1.0)
        mod = garment.modifiers.get(MODIFIER) or garment.modifiers.new(MODIFIER, 'MESH_CACHE')
        mod.cache_format = 'PC2'
        mod.filepath = path
        mod.frame_start = float(bound.frames[0])
        mod.frame_scale = 1.0
        mod.forward_axis, mod.up_axis = 'POS_Y', 'POS_Z'
        out.append(dict(garment=garment.name, cache=path, vertices=int(local.shape[1])))
    return out
