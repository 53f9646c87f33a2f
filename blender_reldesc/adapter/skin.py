"""The body's thickness: capsule radii measured from the meshes an armature deforms."""

from __future__ import annotations

import bpy
import numpy as np

from .mesh import vertex_weights
from .storage import garment_names

#: A pose bone's custom property giving its capsule radius (metres) by hand.
RADIUS_PROPERTY = "reldesc_radius"
#: Vertices weighted at least this much to a bone measure its capsule.
SKIN_WEIGHT = 0.5


def skinned_meshes(arm, exclude=()):
    """Mesh objects deformed by ``arm`` (an Armature modifier on it), its garments aside."""
    worn = set(garment_names(arm)) | set(exclude)
    return [ob for ob in bpy.data.objects if ob.type == 'MESH' and ob.name not in worn and any(
        m.type == 'ARMATURE' and m.object == arm for m in ob.modifiers)]


def measure_radii(arm, skeleton, exclude=()):
    """(J,) capsule radii for ``skeleton``'s joints (the bone ending at each: its parent joint's
    bone), NaN where none is known (``core.characters.capsule_radii`` then takes a share of the
    bone's length): a pose bone's ``reldesc_radius`` property where set, else the mean
    distance from the bone's own axis, at rest, of the vertices weighted at least
    ``SKIN_WEIGHT`` to it in the meshes ``arm`` deforms (three at least). A bone's radius
    goes to every segment from its head (the hips' to the spine and both thighs)."""
    # Imported here, not with the adapter: only Partners and Garments measure bodies, and a core
    # they need that cannot load must take those two features down, not the whole add-on.
    from ..core.characters import closest_on_segments
    w = np.array(arm.matrix_world, float)
    bones = {b.name for b in arm.data.bones}
    skin = {}                                                   # bone name -> world points
    for ob in skinned_meshes(arm, exclude):
        me = ob.data
        co = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        m = np.array(ob.matrix_world, float)
        co = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
        groups = [g for g in ob.vertex_groups if g.name in bones]
        weight = vertex_weights(ob, me, [g.index for g in groups])
        for k, g in enumerate(groups):
            points = co[weight[:, k] >= SKIN_WEIGHT]
            if len(points):
                skin.setdefault(g.name, []).append(points)
    radius = {}
    for bone in arm.data.bones:
        pb = arm.pose.bones.get(bone.name)
        if pb is not None and RADIUS_PROPERTY in pb.keys():
            radius[bone.name] = float(pb[RADIUS_PROPERTY])
            continue
        points = np.concatenate(skin[bone.name]) if bone.name in skin else None
        if points is None or len(points) < 3:
            continue
        head = w[:3, :3] @ np.array(bone.head_local, float) + w[:3, 3]
        tail = w[:3, :3] @ np.array(bone.tail_local, float) + w[:3, 3]
        foot, _ = closest_on_segments(points, head[None], tail[None])
        radius[bone.name] = float(np.linalg.norm(points - foot, axis=1).mean())
    names, parents = list(skeleton.names), list(skeleton.parents)
    return np.array([radius.get(names[p], np.nan) if p >= 0 else np.nan for p in parents], float)
