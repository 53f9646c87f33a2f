"""Armatures: bones as arrays, bone sets, poses played over frames, per-bone controls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ..core.keys import rotation_matrices
from ..core.skeleton.armature import pose_from_basis
from . import storage
from .actions import _sample, _slot_fcurves, armature_slot, frame_range
from .placement import to_world, world_matrix
from .scene import SceneError


@dataclass
class Bones:
    """Bones of an armature as arrays (armature space): all of them (``read_rig``) or
    a bone set (``select_bones``)."""

    names: list
    parents: np.ndarray          # (B,) int, -1 for roots: the skeleton's parent within the set
    rest: np.ndarray             # (B,4,4) Bone.matrix_local
    tails: np.ndarray            # (B,3) Bone.tail_local
    connected: np.ndarray        # (B,) bool
    rotation_modes: list         # PoseBone.rotation_mode per bone
    order: np.ndarray            # parents-first in Blender's hierarchy (for keys and forward kinematics)
    index: np.ndarray = None     # (B,) each bone's index in the armature (all bones: arange)
    outer: list = None           # (B,) name of the bone's Blender parent when it is outside the set, else None
    local: np.ndarray = None     # (B,4,4) rest relative to the Blender parent (the rest itself for a root)
    anchors: dict = None         # {outside parent: nearest bone of the set above it, or -1}
    affinity: dict = None        # {bone: affinity} where the bone's ``reldesc`` override is on (every bone)
    hinges: dict = None          # {bone: 'ON' | 'OFF'} where the bone's ``reldesc.hinge`` is not AUTO (every bone)

    #: Blender parents outside the set, each once, in first-use order
    outer_names: list = field(init=False)

    def __post_init__(self):
        self.outer_names = list(dict.fromkeys(n for n in (self.outer or ()) if n))


def _depth_order(parents):
    depth = np.zeros(len(parents), int)
    for i in range(len(parents)):
        p = parents[i]
        while p >= 0:
            depth[i] += 1
            p = parents[p]
    return np.argsort(depth, kind="stable")


def read_rig(arm):
    """Every bone of ``arm``."""
    bones = arm.data.bones
    names = [b.name for b in bones]
    index = {n: i for i, n in enumerate(names)}
    parents = np.array([index[b.parent.name] if b.parent else -1 for b in bones], dtype=np.int64)
    B = len(names)
    if B == 0:
        raise SceneError(f"armature '{arm.name}' has no bones")
    rest = np.empty(B * 16, np.float32)
    bones.foreach_get("matrix_local", rest)
    rest = rest.reshape(B, 4, 4).transpose(0, 2, 1).astype(float)      # column-major in Blender
    tails = np.empty(B * 3, np.float32)
    bones.foreach_get("tail_local", tails)
    connected = np.array([b.use_connect for b in bones])
    modes = [arm.pose.bones[n].rotation_mode for n in names]
    local = rest.copy()
    child = parents >= 0
    local[child] = np.linalg.inv(rest[parents[child]]) @ rest[child]
    affinity, hinges = _controls(arm)
    return Bones(names, parents, rest, tails.reshape(B, 3).astype(float), connected, modes, _depth_order(parents),
               np.arange(B), [None] * B, local, {}, affinity, hinges)


def _controls(arm):
    """The animator's per-bone controls (the ``reldesc`` pose-bone settings, when registered)."""
    affinity, hinges = {}, {}
    for pb in arm.pose.bones:
        props = getattr(pb, "reldesc", None)
        if props is None:
            continue
        if props.use_affinity_override:
            affinity[pb.name] = float(props.affinity)
        if props.hinge != "AUTO":
            hinges[pb.name] = props.hinge
    return affinity, hinges


def read_bone_set(arm, bone_set):
    """(every bone, the bones of ``bone_set``) of ``arm`` as Bones (see ``select_bones``)."""
    full = read_rig(arm)
    return full, select_bones(arm, full, bone_set)


#: Bone sets for the descriptors (besides the name of a bone collection).
BONE_SETS = ("DEFORM", "ALL")


def bone_set_indices(arm, bone_set):
    """Indices (armature order) of the bones of ``bone_set``: 'DEFORM' (bones that deform
    a mesh), 'ALL', or the name of a bone collection. SceneError when it is empty or unknown."""
    bones = arm.data.bones
    key = (bone_set or "DEFORM")
    if key.upper() == "ALL":
        return np.arange(len(bones))
    if key.upper() == "DEFORM":
        picked = np.array([b.use_deform for b in bones], bool)
        if not picked.any():
            raise SceneError(f"armature '{arm.name}' has no deform bones: choose the bone set ALL or a bone "
                             "collection")
        return np.flatnonzero(picked)
    collections = getattr(arm.data, "collections_all", None)
    coll = collections.get(key) if collections is not None else None
    if coll is None:
        known = ", ".join(c.name for c in collections) if collections is not None else ""
        raise SceneError(f"bone set '{key}' is neither DEFORM, ALL nor a bone collection of '{arm.name}'"
                         + (f" ({known})" if known else ""))
    names = {b.name for b in coll.bones}
    picked = np.array([b.name in names for b in bones], bool)
    if not picked.any():
        raise SceneError(f"bone collection '{key}' of '{arm.name}' has no bones: assign the bones to bind, "
                         "or choose DEFORM or ALL")
    return np.flatnonzero(picked)


def _proxies(arm, chosen):
    """{outside bone: bone of the set that copies its transforms} (Rigify's DEF bones copy ORG bones)."""
    out = {}
    for name in chosen:
        for con in arm.pose.bones[name].constraints:
            if con.type == 'COPY_TRANSFORMS' and getattr(con, "target", None) == arm and con.subtarget:
                out.setdefault(con.subtarget, name)
    return out


def select_bones(arm, rig, bone_set):
    """The ``Bones`` of ``bone_set`` (see ``bone_set_indices``).

    Each bone's parent in the skeleton is its nearest ancestor in the set; where
    the chain up leaves the set, an outside ancestor that a set bone copies
    (COPY_TRANSFORMS, as Rigify's DEF bones follow ORG bones) stands for that bone.
    The Blender parent itself is kept (``outer``, ``local``): keys are relative to it.
    An outside parent moves with its nearest set bone above it (``anchors``; Rigify's
    ORG-palm hangs from DEF-hand) or, with none, plays as in the source.
    """
    keep = bone_set_indices(arm, bone_set)
    if len(keep) == len(rig.names):
        return rig
    pos = {int(b): i for i, b in enumerate(keep.tolist())}
    names = [rig.names[b] for b in keep.tolist()]
    proxy = {k: pos[rig.names.index(v)] for k, v in _proxies(arm, names).items()}
    parents = np.full(len(keep), -1, np.int64)
    outer = [None] * len(keep)
    for i, b in enumerate(keep.tolist()):
        p = int(rig.parents[b])
        if p >= 0 and p not in pos:
            outer[i] = rig.names[p]
        while p >= 0:
            if p in pos:
                parents[i] = pos[p]
                break
            if rig.names[p] in proxy and proxy[rig.names[p]] != i:
                parents[i] = proxy[rig.names[p]]
                break
            p = int(rig.parents[p])
    # A proxy may close a loop (a bone below its own proxy): such a bone becomes a root.
    for i in range(len(parents)):
        seen, p = {i}, parents[i]
        while p >= 0:
            if p in seen:
                parents[i] = -1
                break
            seen.add(p)
            p = parents[p]
    connected = rig.connected[keep] & np.array([o is None for o in outer])
    anchors = {}
    for name in dict.fromkeys(o for o in outer if o):
        p = int(rig.parents[rig.names.index(name)])
        while p >= 0 and p not in pos:
            p = int(rig.parents[p])
        anchors[name] = pos[p] if p >= 0 else -1
    order = np.array([pos[b] for b in rig.order.tolist() if b in pos], np.int64)
    return Bones(names, parents, rig.rest[keep], rig.tails[keep], connected,
               [rig.rotation_modes[b] for b in keep.tolist()], order, keep, outer, rig.local[keep], anchors,
               rig.affinity, rig.hinges)


def read_pose(arm):
    """Current pose: bone heads and tails (B,3) and matrices (B,4,4), armature space."""
    pb = arm.pose.bones
    B = len(pb)
    head = np.empty(B * 3, np.float32)
    tail = np.empty(B * 3, np.float32)
    mat = np.empty(B * 16, np.float32)
    pb.foreach_get("head", head)
    pb.foreach_get("tail", tail)
    pb.foreach_get("matrix", mat)
    return (head.reshape(B, 3).astype(float), tail.reshape(B, 3).astype(float),
            mat.reshape(B, 4, 4).transpose(0, 2, 1).astype(float))


def read_motion(scene, arm, frames, tail_bones, progress=None):
    """Evaluate the armature at every frame (exact for any rig: constraints, drivers, NLA).

    Returns ``joints (F,J,3)`` world positions (bone heads, then the tails of
    ``tail_bones``), ``pose (F,B,4,4)`` armature-space bone matrices and
    ``world (F,4,4)`` object matrices. Restores the current frame.
    """
    current = scene.frame_current, scene.frame_subframe
    F = len(frames)
    B = len(arm.pose.bones)
    joints = np.empty((F, B + len(tail_bones), 3))
    pose = np.empty((F, B, 4, 4))
    world = np.empty((F, 4, 4))
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            head, tail, mat = read_pose(arm)
            w = world_matrix(arm)
            joints[i, :B] = to_world(w, head)
            joints[i, B:] = to_world(w, tail[tail_bones])
            pose[i], world[i] = mat, w
            if progress is not None and i % 25 == 0:
                progress(i, F)
    finally:
        scene.frame_set(current[0], subframe=current[1])
    return joints, pose, world


def set_pose(arm, rig, quats, locs, loc_mask, scales=None):
    """Pose the armature now: quaternions (B,4) in every bone's own rotation mode, locations (B,3)
    (of the bones ``loc_mask``), scales (B,3) when given.

    Quaternion-mode bones and locations in one ``foreach_set`` each, the rotation modes read in
    one ``foreach_get`` (a Rigify rig's 160 bones one by one took 6 ms a frame of the live
    preview); bones in other rotation modes one by one."""
    from mathutils import Quaternion
    pbs = arm.pose.bones
    n = len(pbs)
    quats, locs = np.asarray(quats), np.asarray(locs)
    index = _pose_index(arm, rig.names)
    modes = np.empty(n, np.int32)
    pbs.foreach_get("rotation_mode", modes)
    quat_mode = modes[index] == _QUATERNION_MODE
    mask = np.asarray(loc_mask, bool)
    writes = [("rotation_quaternion", quat_mode, quats), ("location", mask, locs)]
    if scales is not None:
        writes.append(("scale", np.ones(len(index), bool), np.asarray(scales)))
    for prop, rows, values in writes:
        if rows.any():
            buf = np.empty((n, values.shape[1]), np.float32)
            pbs.foreach_get(prop, buf.ravel())
            buf[index[rows]] = values[rows]
            pbs.foreach_set(prop, buf.ravel())
    if quat_mode.any() or mask.any() or scales is not None:
        arm.update_tag()                 # foreach_set runs no property update: tag the pose for evaluation
    for b in np.flatnonzero(~quat_mode).tolist():
        pb, q = pbs[int(index[b])], Quaternion(quats[b])
        if pb.rotation_mode == 'AXIS_ANGLE':
            axis, angle = q.to_axis_angle()
            pb.rotation_axis_angle = (angle, *axis)
        else:
            pb.rotation_euler = q.to_euler(pb.rotation_mode, pb.rotation_euler)


def posed_matrices(arm, names):
    """(N,4,4) armature-space matrices of bones ``names`` as the armature was last evaluated (in a
    frame-change handler: as Blender plays the frame), in one ``foreach_get``."""
    pbs = arm.pose.bones
    mat = np.empty(len(pbs) * 16, np.float32)
    pbs.foreach_get("matrix", mat)
    return mat.reshape(-1, 4, 4).transpose(0, 2, 1)[_pose_index(arm, names)].astype(float)


#: The pose channels ``hold_pose`` keeps, with their sizes.
_CHANNELS = (("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4), ("location", 3),
             ("scale", 3))


def _channels(arm, index):
    """{channel: (N,k) float32} of the pose bones at ``index``, and the whole arrays read."""
    pbs = arm.pose.bones
    whole = {}
    for prop, k in _CHANNELS:
        buf = np.empty(len(pbs) * k, np.float32)
        pbs.foreach_get(prop, buf)
        whole[prop] = buf.reshape(-1, k)
    return {prop: a[index] for prop, a in whole.items()}, whole


def hold_pose(arm, names):
    """Let the live preview pose bones ``names``: mute their active constraints (what the bake does
    by keying their influence to 0: the bones then play the pose set on them) and keep their pose
    channels as they are, recorded on the armature's data (``storage.LIVE_MUTED_KEY``) so that
    ``release_pose`` gives both back, after an undo, a save or a crash's autosave too. Nothing is
    done when the armature is held already. Returns how many constraints were muted."""
    data = storage.host(arm)
    if storage.LIVE_MUTED_KEY in data:
        return 0
    index = _pose_index(arm, names)
    kept, _ = _channels(arm, index)
    muted = []
    for name in names:
        for con in arm.pose.bones[name].constraints:
            if not con.mute and con.influence > 0.0:
                con.mute = True
                muted.append([name, con.name])
    record = {"object": arm.name, "bones": json.dumps(list(names)), "constraints": json.dumps(muted)}
    record.update({prop: [float(x) for x in a.ravel()] for prop, a in kept.items()})
    data[storage.LIVE_MUTED_KEY] = record
    arm.update_tag()
    return len(muted)


def release_pose(arm):
    """Give back what ``hold_pose`` took from ``arm``: the constraints it muted (those still there)
    and the held bones' pose channels (those still there), and drop the record. Returns how many
    constraints were switched back on."""
    data = storage.host(arm)
    record = data.get(storage.LIVE_MUTED_KEY)
    if record is None:
        return 0
    import bpy
    holder = bpy.data.objects.get(record.get("object", arm.name))
    if holder is not None and holder != arm:                   # another user of this armature data held it
        return 0
    restored = 0
    try:
        names = json.loads(record["bones"])
        pbs = arm.pose.bones
        for bone, con_name in json.loads(record["constraints"]):
            pb = pbs.get(bone)
            con = pb.constraints.get(con_name) if pb is not None else None
            if con is not None and con.mute:
                con.mute = False
                restored += 1
        found = np.array([pbs.find(n) for n in names], np.int64)
        here = np.flatnonzero(found >= 0)                       # bones renamed or removed since: skipped
        index = found[here]
        if index.size:
            _, whole = _channels(arm, index)
            for prop, k in _CHANNELS:
                kept = np.asarray(record[prop], np.float32).reshape(-1, k)
                whole[prop][index] = kept[here]
                pbs.foreach_set(prop, whole[prop].ravel())
    except (KeyError, TypeError, ValueError):
        pass                                                    # a damaged record: drop it
    finally:
        del data[storage.LIVE_MUTED_KEY]
        arm.update_tag()
    return restored


def pose_held(arm):
    """Whether ``arm`` is held by the live preview (``hold_pose``)."""
    return arm.type == 'ARMATURE' and storage.LIVE_MUTED_KEY in storage.host(arm)


#: ``PoseBone.rotation_mode``'s value for 'QUATERNION' as ``foreach_get`` reads it.
_QUATERNION_MODE = 0

_POSE_INDEX = {}


def _pose_index(arm, names):
    """(B,) index in ``arm.pose.bones`` of each of ``names``, kept while the names there
    still match (``find`` by name cost 35 µs a bone, 6 ms a frame of a Rigify live preview;
    reading the names back costs 0.3 ms, and catches a bone renamed or removed at once)."""
    pbs = arm.pose.bones
    key = (arm.as_pointer(), tuple(names))
    index = _POSE_INDEX.get(key)
    if index is not None and len(pbs) == index[1] and [pbs[i].name for i in index[0].tolist()] == list(names):
        return index[0]
    index = np.array([pbs.find(name) for name in names], np.int64)
    if (index < 0).any():
        missing = [n for n, i in zip(names, index.tolist()) if i < 0]
        raise SceneError(f"armature '{arm.name}' has no bone {', '.join(missing[:3])} any more: rename it back "
                         "or re-bind")
    if len(_POSE_INDEX) > 64:
        _POSE_INDEX.clear()
    _POSE_INDEX[key] = (index, len(pbs))
    return index


def read_bone_matrices(scene, arm, frames, names, only_what_moves_them=True):
    """(F,N,4,4) armature-space matrices of bones ``names`` as Blender plays them at ``frames``.

    With ``only_what_moves_them`` the keys of the bones that cannot move them (``bones_moving``:
    neither an ancestor nor a constraint or driver source of theirs, directly or through
    others) are muted while the frames play, and unmuted after: Blender then evaluates a few
    bones' curves instead of every bone's (a 120-frame Rigify bake read its eight palm bones back
    in 5.1 ms a frame with every curve playing, 2.8 ms with those of the 223 of 706 bones that
    move them)."""
    current = scene.frame_current, scene.frame_subframe
    index = [arm.pose.bones.find(n) for n in names]
    out = np.empty((len(frames), len(names), 4, 4))
    muted = []
    if only_what_moves_them and arm.animation_data is not None and arm.animation_data.action is not None:
        moving = bones_moving(arm, names)
        if moving is not None:
            for fc in _slot_fcurves(arm, arm.animation_data.action):
                bone = _bone_of_path(fc.data_path)
                if bone is not None and bone not in moving and not fc.mute:
                    fc.mute = True
                    muted.append(fc)
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            out[i] = read_pose(arm)[2][index]
    finally:
        for fc in muted:
            fc.mute = False
        scene.frame_set(current[0], subframe=current[1])
    return out


def _bone_of_path(path):
    """The bone name of a ``pose.bones["name"]...`` (or ``bones["name"]...``) data path, else None."""
    for head in ('pose.bones["', 'bones["'):
        if path.startswith(head):
            end = path.find('"]', len(head))
            while end > 0 and path[end - 1] == "\\":            # an escaped quote inside the name
                end = path.find('"]', end + 1)
            if end > 0:
                return path[len(head):end].replace('\\"', '"').replace("\\\\", "\\")
    return None


def bones_moving(arm, names):
    """Names of the bones whose pose can change how bones ``names`` play (theirs included): their
    ancestors, their constraints' targets, the sources of drivers on them or their constraints,
    and the owners of IK chains through any of these, each followed in turn. None when a
    driver's source on this armature cannot be read as a bone (nothing can then be left out)."""
    pbs = arm.pose.bones
    drivers = {}                                        # bone -> [driver F-curve] on its channels
    for ad in (arm.animation_data, arm.data.animation_data):
        for fc in (ad.drivers if ad is not None else ()):
            bone = _bone_of_path(fc.data_path)
            if bone is not None:
                drivers.setdefault(bone, []).append(fc)
    chains = []                                         # (IK owner, the bones its chain moves)
    for pb in pbs:
        for c in pb.constraints:
            if c.type in ('IK', 'SPLINE_IK') and not c.mute:
                count = getattr(c, "chain_count", 0)
                chain, b = [], pb if c.type == 'SPLINE_IK' or getattr(c, "use_tail", True) else pb.parent
                while b is not None and (count <= 0 or len(chain) < count):
                    chain.append(b.name)
                    b = b.parent
                chains.append((pb.name, set(chain)))
    found, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in found or name not in pbs:
            continue
        found.add(name)
        pb = pbs[name]
        if pb.parent is not None:
            todo.append(pb.parent.name)
        for c in pb.constraints:
            for t in [c] + list(getattr(c, "targets", ())):
                if getattr(t, "target", None) == arm and getattr(t, "subtarget", ""):
                    todo.append(t.subtarget)
            if getattr(c, "pole_target", None) == arm and getattr(c, "pole_subtarget", ""):
                todo.append(c.pole_subtarget)
            if getattr(c, "space_object", None) == arm and getattr(c, "space_subtarget", ""):
                todo.append(c.space_subtarget)                  # a constraint evaluated in a bone's space
        for fc in drivers.get(name, ()):
            for var in fc.driver.variables:
                for t in var.targets:
                    if t.id not in (arm, arm.data):
                        continue
                    if getattr(t, "bone_target", ""):
                        todo.append(t.bone_target)
                    elif t.data_path and (".bones[" in t.data_path or t.data_path.startswith(("pose", "bones"))):
                        bone = _bone_of_path(t.data_path)
                        if bone is None:
                            return None
                        todo.append(bone)
        for owner, chain in chains:
            if name in chain:
                todo.append(owner)
    return found


def fk_blockers(arm, action):
    """Why the keyed values alone do not determine the pose (empty list: they do)."""
    why = []
    ad = arm.animation_data
    if ad is not None and len(ad.drivers):
        why.append("drivers")
    if ad is not None and any(not t.mute for t in ad.nla_tracks):
        why.append("NLA tracks")
    if arm.parent is not None or len(arm.constraints):
        why.append("object parent or constraints")
    if any(len(pb.constraints) for pb in arm.pose.bones):
        why.append("bone constraints")
    if any(not b.use_inherit_rotation or b.inherit_scale != 'FULL' or not b.use_local_location
           for b in arm.data.bones):
        why.append("non-default bone inheritance")
    if any(not fc.data_path.startswith("pose.bones") for fc in _slot_fcurves(arm, action)):
        why.append("animated object transform")
    return why


def read_motion_fk(arm, action, frames, rig, tail_bones):
    """Same outputs as ``read_motion`` by numpy forward kinematics of the keyed values.

    Valid only when ``fk_blockers`` is empty (no constraints, drivers, NLA,
    animated object transform or special inheritance).
    """
    F, B = len(frames), len(rig.names)
    index = {n: i for i, n in enumerate(rig.names)}
    frames = np.asarray(frames, dtype=float)
    pbs = arm.pose.bones
    loc = np.array([tuple(pbs[n].location) for n in rig.names])[None].repeat(F, 0)
    scale = np.array([tuple(pbs[n].scale) for n in rig.names])[None].repeat(F, 0)
    quat = np.array([tuple(pbs[n].rotation_quaternion) for n in rig.names])[None].repeat(F, 0)
    euler = np.array([tuple(pbs[n].rotation_euler) for n in rig.names])[None].repeat(F, 0)
    axang = np.array([tuple(pbs[n].rotation_axis_angle) for n in rig.names])[None].repeat(F, 0)
    targets = {"location": loc, "scale": scale, "rotation_quaternion": quat, "rotation_euler": euler,
               "rotation_axis_angle": axang}
    for fc in _slot_fcurves(arm, action):
        path = fc.data_path
        if not path.startswith('pose.bones["'):
            continue
        name, prop = path[len('pose.bones["'):].split('"].', 1)
        b = index.get(name.replace('\\"', '"').replace("\\\\", "\\"))
        if b is None or prop not in targets:
            continue
        values = _sample(fc, frames)
        if values is not None:
            targets[prop][:, b, fc.array_index] = values
    basis = np.tile(np.eye(4), (F, B, 1, 1))
    for b, mode in enumerate(rig.rotation_modes):
        # As the keys will be played back (``keys.rotation_matrices``, Blender's conventions).
        if mode == 'QUATERNION':
            r = rotation_matrices("quaternion", quat[:, b])
        elif mode == 'AXIS_ANGLE':
            r = rotation_matrices("axis_angle", axang[:, b])
        else:
            r = rotation_matrices("euler", euler[:, b], mode)
        basis[:, b, :3, :3] = r * scale[:, b, None, :]
        basis[:, b, :3, 3] = loc[:, b]
    pose = pose_from_basis(rig.rest, rig.parents, basis, rig.order)
    lengths = np.array([arm.data.bones[n].length for n in rig.names])
    head = pose[..., :3, 3]
    tail = head + pose[..., :3, 1] * lengths[None, :, None]
    w = world_matrix(arm)
    joints = np.concatenate([to_world(w, head), to_world(w, tail[:, tail_bones])], axis=1)
    world = np.broadcast_to(w, (F, 4, 4)).copy()
    return joints, pose, world


def read_source_motion(scene, arm, action, frames, rig, tail_bones):
    """``read_motion_fk`` where the keyed values determine the pose, else ``read_motion``.

    Returns ``joints, pose, world`` and the path taken ('fk' or 'evaluated').
    """
    if arm.animation_data is not None and arm.animation_data.action == action and not fk_blockers(arm, action):
        return (*read_motion_fk(arm, action, frames, rig, tail_bones), "fk")
    return (*read_motion(scene, arm, frames, tail_bones), "evaluated")



def play_action(scene, arm, action, full, tail_bones):
    """Joints (F,J,3) of ``action`` played on ``arm`` over its frame range (``read_source_motion``),
    the armature's own action and slot and the current frame put back after."""
    ad = arm.animation_data
    keep_action, keep_slot, keep_frame = ad.action, ad.action_slot, scene.frame_current
    start, end = frame_range(action)
    try:
        ad.action = action
        slot = armature_slot(arm, action)
        if slot is not None:
            ad.action_slot = slot
        joints, _, _, _ = read_source_motion(scene, arm, action, np.arange(start, end + 1), full, tail_bones)
    finally:
        ad.action = keep_action
        if keep_slot is not None:
            ad.action_slot = keep_slot
        scene.frame_set(keep_frame)
    return joints
