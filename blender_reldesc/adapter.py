"""The one place where Blender data becomes numpy arrays and back.

Everything crosses with ``foreach_get`` / ``foreach_set`` into arrays of the
dtype Blender stores; no Python loop runs over vertices, loops or keyframes
(loops over bones, objects and frames remain).
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

from .core import RelDescError

#: Keys of the data stored on an armature object.
BINDING_KEY = "_reldesc_binding"
POSE_KEY = "_reldesc_pose"
META_KEY = "_reldesc_meta"
#: Keys of bindings stored by 0.1.0 (bytes, shown in Custom Properties): read, replaced on re-bind.
LEGACY_KEYS = ("reldesc_binding", "reldesc_pose", "reldesc_meta")
STORAGE_VERSION = 2


class SceneError(RelDescError):
    """Something in the Blender scene is missing or unusable; the message says what to do."""


# --- finding things -------------------------------------------------------------

def get_armature(name=None, context=None):
    """The armature object ``name``, or the active object when name is empty."""
    context = context or bpy.context
    if name:
        ob = bpy.data.objects.get(name)
        if ob is None:
            raise SceneError(f"no object named '{name}' in the file")
    else:
        ob = getattr(context, "active_object", None) or getattr(context.view_layer.objects, "active", None)
        if ob is None:
            raise SceneError("no armature given and no active object: select the character's armature")
    if ob.type != 'ARMATURE':
        raise SceneError(f"'{ob.name}' is a {ob.type.lower()}, not an armature")
    return ob


def environment_objects(collection_name):
    """Mesh objects of a collection (and its children), and the names of ignored non-meshes."""
    if not collection_name:
        raise SceneError("no environment collection given: choose the collection holding the scene's meshes")
    coll = bpy.data.collections.get(collection_name)
    if coll is None:
        raise SceneError(f"no collection named '{collection_name}' in the file")
    meshes = [ob for ob in coll.all_objects if ob.type == 'MESH']
    ignored = sorted(ob.name for ob in coll.all_objects if ob.type != 'MESH')
    if not meshes:
        raise SceneError(f"collection '{collection_name}' holds no mesh objects: put the environment's "
                         "meshes in it")
    meshes.sort(key=lambda ob: ob.name)
    return meshes, ignored


def source_action(arm):
    ad = arm.animation_data
    action = ad.action if ad else None
    if action is None:
        raise SceneError(f"armature '{arm.name}' has no action: give it the motion to adapt")
    return action


def frame_range(action):
    start, end = action.frame_range
    return int(round(start)), int(round(end))


# --- rig --------------------------------------------------------------------

@dataclass
class Rig:
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

    @property
    def outer_names(self):
        """Blender parents outside the set, each once, in first-use order."""
        return list(dict.fromkeys(n for n in self.outer if n))


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
    return Rig(names, parents, rest, tails.reshape(B, 3).astype(float), connected, modes, _depth_order(parents),
               np.arange(B), [None] * B, local, {})


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
    """The Rig of the bones of ``bone_set`` (see ``bone_set_indices``).

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
    return Rig(names, parents, rig.rest[keep], rig.tails[keep], connected,
               [rig.rotation_modes[b] for b in keep.tolist()], order, keep, outer, rig.local[keep], anchors)


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


def world_matrix(ob):
    return np.array(ob.matrix_world, dtype=float)


def to_world(matrix, points):
    if np.array_equal(matrix, np.eye(4)):             # a floor at the origin: no product per frame
        return np.asarray(points, dtype=float)
    return points @ matrix[:3, :3].T + matrix[:3, 3]


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


# --- environment ---------------------------------------------------------------

def is_animated(ob, _seen=None):
    """True if the object's evaluated geometry can change over time."""
    seen = _seen if _seen is not None else set()
    if ob is None or ob.name in seen:
        return False
    seen.add(ob.name)
    ad = ob.animation_data
    if ad and (ad.action or len(ad.drivers) or len(ad.nla_tracks)):
        return True
    data = getattr(ob, "data", None)
    keys = getattr(data, "shape_keys", None)
    if keys and keys.animation_data and (keys.animation_data.action or len(keys.animation_data.drivers)):
        return True
    if data is not None and data.animation_data and data.animation_data.action:
        return True
    if len(getattr(ob, "constraints", ())) or is_animated(ob.parent, seen):
        return True
    for mod in getattr(ob, "modifiers", ()):
        target = getattr(mod, "object", None)
        if target is not None and is_animated(target, seen):
            return True
    return False


def read_environment(depsgraph, objects, triangles=True):
    """Evaluated world-space geometry of ``objects`` as one mesh.

    Returns ``vertices (V,3)``, ``triangles (T,3)`` (None without
    ``triangles``, for callers that know the topology) and per object
    ``(vertex_count, triangle_count)``.
    """
    verts, tris, counts = [], [], []
    base = 0
    for ob in objects:
        ev = ob.evaluated_get(depsgraph)
        me = ev.to_mesh()
        try:
            me.calc_loop_triangles()
            V, T = len(me.vertices), len(me.loop_triangles)
            co = np.empty(V * 3, np.float32)
            me.vertices.foreach_get("co", co)
            tri = np.empty(T * 3 if triangles else 0, np.int32)
            if triangles:
                me.loop_triangles.foreach_get("vertices", tri)
        finally:
            ev.to_mesh_clear()
        m = np.array(ev.matrix_world, dtype=float)
        verts.append(to_world(m, co.reshape(V, 3).astype(float)))
        tris.append(tri.reshape(-1, 3).astype(np.int64) + base)
        counts.append((V, T))
        base += V
    return np.concatenate(verts), (np.concatenate(tris) if triangles else None), counts


def read_environment_frames(scene, objects, frames, progress=None):
    """(F,V,3) vertices of an animated environment, its triangles and counts."""
    current = scene.frame_current, scene.frame_subframe
    out = None
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            v, t, counts = read_environment(bpy.context.evaluated_depsgraph_get(), objects)
            if out is None:
                out = np.empty((len(frames),) + v.shape)
                tris, first_counts = t, counts
            elif counts != first_counts:
                raise SceneError("the environment's vertex count changes during the animation: "
                                 "apply or remove the modifier that changes it")
            out[i] = v
            if progress is not None and i % 25 == 0:
                progress(i, len(frames))
    finally:
        scene.frame_set(current[0], subframe=current[1])
    return out, tris, first_counts


def vertex_influence(objects, group_name, depsgraph=None):
    """(V,) painted influence from vertex group ``group_name`` (1 where absent).

    Read from the evaluated mesh (vertex groups survive modifier evaluation),
    so the weights match the evaluated geometry the environment is read from,
    Subdivision and other generative modifiers included.
    """
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    parts = []
    for ob in objects:
        ev = ob.evaluated_get(depsgraph)
        me = ev.to_mesh()
        try:
            w = np.ones(len(me.vertices))
            vg = ob.vertex_groups.get(group_name) if group_name else None
            if vg is not None:
                w[:] = 0.0
                gi = vg.index
                for v in me.vertices:                        # vertex groups are not attributes
                    for g in v.groups:
                        if g.group == gi:
                            w[v.index] = g.weight
        finally:
            ev.to_mesh_clear()
        parts.append(w)
    return np.concatenate(parts) if parts else np.zeros(0)


# --- storing a binding ------------------------------------------------------------

def _pack(data):
    """bytes -> int32 array (an ID property Blender stores whole, NUL bytes included)."""
    pad = (-len(data)) % 4
    return np.frombuffer(data + b"\0" * pad, dtype=np.int32).copy()


def _unpack(prop, size):
    return np.asarray(prop, dtype=np.int32).tobytes()[:size]


#: The names of a bound armature's garments (``garments``), on the armature data beside the
#: binding: read here, so a bake knows whether it carries garments without importing them.
GARMENTS_KEY = "_reldesc_garments"


def garment_names(arm):
    return [str(n) for n in arm.data.get(GARMENTS_KEY, [])]


#: ID-pointer properties: the source action and the environment collection follow
#: renames, and appending the armature brings them along.
SOURCE_KEY = "_reldesc_source"
ENVIRONMENT_KEY = "_reldesc_environment"


def _store(arm):
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
    action = _store(arm).get(SOURCE_KEY)
    return action if isinstance(action, bpy.types.Action) else bpy.data.actions.get(meta["action"])


def bound_environment(arm, meta):
    """Name of the bound environment collection now (it may have been renamed or appended)."""
    coll = _store(arm).get(ENVIRONMENT_KEY)
    return coll.name if isinstance(coll, bpy.types.Collection) else meta["environment"]


def store_binding(arm, binding_bytes, pose_bytes, meta, action=None, collection=None):
    """Store a binding on the armature, replacing any previous one whole.

    The data live in ID properties of the armature data (see ``_store``)
    whose names start with "_" (hidden from the Custom Properties panel, so
    nobody edits them by accident) as int32 arrays: assigning bytes over an
    existing bytes property keeps only the bytes before the first NUL in
    Blender 5.0.1, which corrupted re-binds.
    """
    clear_binding(arm)
    store = _store(arm)
    if action is not None:
        store[SOURCE_KEY] = action
    if collection is not None:
        store[ENVIRONMENT_KEY] = collection
    store[BINDING_KEY] = _pack(binding_bytes)
    store[POSE_KEY] = _pack(pose_bytes)
    store[META_KEY] = dict(meta, version=STORAGE_VERSION, binding_size=len(binding_bytes),
                           pose_size=len(pose_bytes))


def stored_meta(arm):
    meta = _store(arm).get(META_KEY, arm.get(LEGACY_KEYS[2]))
    return None if meta is None else meta.to_dict()


def load_stored(arm):
    """(binding bytes, pose bytes, meta dict) or SceneError when not bound."""
    store = _store(arm)
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
    for host, keys in ((_store(arm), (BINDING_KEY, POSE_KEY, META_KEY, SOURCE_KEY, ENVIRONMENT_KEY)),
                       (arm, LEGACY_KEYS)):
        for key in keys:
            if key in host:
                del host[key]
                found = True
    return found


# --- writing keyframes --------------------------------------------------------------

def _channelbag(action, arm):
    """A new slot for ``arm`` in ``action`` and its channelbag."""
    slot = action.slots.new(id_type='OBJECT', name=arm.name)
    return slot, _ensure_bag(action, slot)


def _release(arm, name, keep=None):
    """Remove action ``name`` when nothing but ``arm`` uses it (and it is not ``keep``), so a new
    action can take the name; otherwise it stays and Blender numbers the new one ``.001``."""
    old = bpy.data.actions.get(name)
    if old is not None and old != keep and other_users(arm, old) == 0:
        bpy.data.actions.remove(old)


def _new_fcurve(bag, path, index, group):
    """An F-curve in ``bag``, in group ``group`` (5.0 takes the group by name; 4.4/4.5 do not)."""
    try:
        return bag.fcurves.new(path, index=index, group_name=group)
    except TypeError:
        fc = bag.fcurves.new(path, index=index)
        grp = next((g for g in bag.groups if g.name == group), None) or bag.groups.new(group)
        fc.group = grp
        return fc


def other_users(arm, action):
    """Users of ``action`` besides ``arm``'s active action slot: other objects, NLA strips, a fake user."""
    own = 1 if arm.animation_data is not None and arm.animation_data.action == action else 0
    return action.users - own


def write_action(arm, name, frames, rig, channels):
    """Create action ``name`` with the given channels and assign it.

    A previous action of that name is replaced only when nothing but
    ``arm`` uses it; otherwise it is kept and the new one is named
    ``<name>.001`` (Blender's numbering): the caller compares names to say so.

    channels : list of ``(bone index, property, values (F,k))``, property one
        of 'location', 'rotation_quaternion', 'rotation_euler',
        'rotation_axis_angle'. Keys are linear, one per frame.
    """
    _release(arm, name)
    action = bpy.data.actions.new(name)                      # "<name>.001", ... while the old one is kept
    slot, bag = _channelbag(action, arm)
    frames = np.asarray(frames, dtype=float)
    for b, prop, values in channels:
        bone = rig.names[b]
        path = f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{prop}'
        for k in range(values.shape[1]):
            _fill(_new_fcurve(bag, path, k, bone), _curve_keys(Curve(path, k, bone, frames, values[:, k])))
    assign(arm, action, slot)
    return action


def assign_action(arm, action):
    """Assign ``action`` with its first slot (or none) to the armature."""
    if arm.animation_data is None:
        arm.animation_data_create()
    arm.animation_data.action = action
    if action is not None and len(action.slots) and arm.animation_data.action_slot is None:
        arm.animation_data.action_slot = action.slots[0]


def set_pose(arm, rig, quats, locs, loc_mask):
    """Pose the armature now: quaternions (B,4) in every bone's own rotation mode, locations (B,3)."""
    from mathutils import Quaternion
    for b, name in enumerate(rig.names):
        pb = arm.pose.bones[name]
        q = Quaternion(quats[b])
        mode = pb.rotation_mode
        if mode == 'QUATERNION':
            pb.rotation_quaternion = q
        elif mode == 'AXIS_ANGLE':
            axis, angle = q.to_axis_angle()
            pb.rotation_axis_angle = (angle, *axis)
        else:
            pb.rotation_euler = q.to_euler(mode, pb.rotation_euler)
        if loc_mask[b]:
            pb.location = locs[b]


def _fcurves(action):
    """All F-curves of an action (slotted in 4.4+)."""
    curves = []
    for layer in getattr(action, "layers", ()):
        for strip in layer.strips:
            for bag in getattr(strip, "channelbags", ()):
                curves.extend(bag.fcurves)
    return curves


def armature_slot(arm, action):
    """The slot of ``action`` that animates ``arm``: the one assigned to it, else the only
    object slot, else the one named after it (None when the action has no slots)."""
    ad = arm.animation_data
    if ad is not None and ad.action == action and ad.action_slot is not None:
        return ad.action_slot
    slots = [s for s in getattr(action, "slots", ()) if s.target_id_type in ('OBJECT', 'UNSPECIFIED')]
    if len(slots) == 1:
        return slots[0]
    return next((s for s in slots if s.name_display == arm.name), slots[0] if slots else None)


def _bag(action, slot):
    for layer in action.layers:
        for strip in layer.strips:
            bag = strip.channelbag(slot) if hasattr(strip, "channelbag") else None
            if bag is not None:
                return bag
    return None


def sample_curves(action, slot, wanted, frames):
    """{(path, index): (F,) values at ``frames``} for the F-curves of ``slot`` among ``wanted``."""
    bag = _bag(action, slot) if slot is not None else None
    out = {}
    if bag is None:
        return out
    for fc in bag.fcurves:
        key = (fc.data_path, fc.array_index)
        if key in wanted:
            values = _sample(fc, np.asarray(frames, float))
            if values is not None:
                out[key] = values
    return out


@dataclass
class Curve:
    """Keys for one F-curve: frames (K,), values (K,), and for BEZIER the handles (K,2) each."""

    path: str
    index: int
    group: str
    frames: np.ndarray
    values: np.ndarray
    interpolation: str = "LINEAR"         # 'LINEAR', 'BEZIER' or 'CONSTANT'
    left: np.ndarray = None
    right: np.ndarray = None
    influence: float = None               # a constraint bypass: the influence it had


_INTERPOLATION = {"CONSTANT": 0, "LINEAR": 1, "BEZIER": 2}
_HANDLE_ALIGNED = 3                       # FREE, ALIGNED, VECTOR, AUTO, AUTO_CLAMPED: enum index of ALIGNED
_HANDLE_AUTO_CLAMPED = 4


def _keys_of(fc):
    """Every keyframe attribute of ``fc`` as arrays (for rebuilding part of a curve)."""
    kp = fc.keyframe_points
    K = len(kp)
    out = {}
    for attr, width, dtype in (("co", 2, np.float32), ("handle_left", 2, np.float32),
                               ("handle_right", 2, np.float32), ("interpolation", 1, np.int32),
                               ("handle_left_type", 1, np.int32), ("handle_right_type", 1, np.int32),
                               ("easing", 1, np.int32)):
        buf = np.empty(K * width, dtype)
        kp.foreach_get(attr, buf)
        out[attr] = buf.reshape(K, width) if width > 1 else buf
    return out


def _fill(fc, keys):
    kp = fc.keyframe_points
    K = len(keys["co"])
    kp.add(K)
    for attr, values in keys.items():
        kp.foreach_set(attr, np.ascontiguousarray(values).ravel())
    fc.update()


def _curve_keys(curve):
    K = len(curve.frames)
    co = np.stack([curve.frames, curve.values], axis=-1).astype(np.float32)
    bezier = curve.interpolation == "BEZIER" and curve.left is not None
    handle = np.full(K, _HANDLE_ALIGNED if bezier else _HANDLE_AUTO_CLAMPED, np.int32)
    return {"co": co,
            "handle_left": (curve.left if bezier else co).astype(np.float32),
            "handle_right": (curve.right if bezier else co).astype(np.float32),
            "interpolation": np.full(K, _INTERPOLATION[curve.interpolation], np.int32),
            "handle_left_type": handle, "handle_right_type": handle.copy(),
            "easing": np.zeros(K, np.int32)}


def _keys_outside(fc, start, end):
    """Whether ``fc`` has keys before ``start`` or after ``end`` (one read of the key frames: a
    bake over the whole clip reads nothing more of the 600-key curves it replaces)."""
    kp = fc.keyframe_points
    co = np.empty(2 * len(kp), np.float32)
    kp.foreach_get("co", co)
    f = co[0::2]
    return bool(np.any((f < start - 1e-4) | (f > end + 1e-4)))


def _merge_outside(old, new, start, end):
    """``new`` keys, with the keys of ``old`` before ``start`` and after ``end`` kept around them."""
    f = old["co"][:, 0]
    before, after = f < start - 1e-4, f > end + 1e-4
    return {k: np.concatenate([old[k][before], new[k], old[k][after]]) for k in new}


def write_adapted(arm, source, name, curves, frame_range):
    """Write the adapted action: a copy of ``source`` reduced to ``arm``'s slot, with ``curves``
    replacing its keys inside ``frame_range`` (the source's keys outside it are kept).

    Everything else of the source comes along whole, as Blender copies it:
    scale and custom-property channels, object transforms, handle types, F-curve
    modifiers, extrapolation, groups, the action's frame range. Replaced curves lose
    their modifiers (their effect is in the baked values). ``source`` is not changed.

    A previous action named ``name`` is replaced only when nothing but ``arm`` uses
    it; otherwise the new one is ``<name>.001`` (compare names to say so). Returns
    ``(action, slot)``; nothing is assigned.
    """
    _release(arm, name, keep=source)
    source_slot = armature_slot(arm, source)
    action = source.copy()
    action.name = name
    action.use_fake_user = False
    if source_slot is None:
        slot, _ = _channelbag(action, arm)
    else:
        for other in [s for s in action.slots if s.handle != source_slot.handle]:
            action.slots.remove(other)
        slot = next(s for s in action.slots if s.handle == source_slot.handle)
        _ensure_bag(action, slot)
    write_curves(action, slot, curves, frame_range)
    return action, slot


def write_curves(action, slot, curves, frame_range):
    """Replace the keys of ``curves`` inside ``frame_range`` in ``slot``'s channelbag (keys
    outside the range are kept; a replaced curve loses its modifiers)."""
    bag = _bag(action, slot)
    start, end = frame_range
    for curve in curves:
        keys = _curve_keys(curve)
        merged = False
        fc = bag.fcurves.find(curve.path, index=curve.index)
        if fc is not None:
            if _keys_outside(fc, start, end):
                keys, merged = _merge_outside(_keys_of(fc), keys, start, end), True
            bag.fcurves.remove(fc)
        if not merged and curve.left is None:
            # Auto-clamped handles are computed by the curve's update and new keys ease 'AUTO':
            # writing either changes nothing (measured) and cost three of seven writes a curve.
            keys = {k: v for k, v in keys.items() if k not in ("handle_left", "handle_right", "easing")}
        _fill(_new_fcurve(bag, curve.path, curve.index, curve.group), keys)


def read_bone_matrices(scene, arm, frames, names):
    """(F,N,4,4) armature-space matrices of bones ``names`` as Blender plays them at ``frames``."""
    current = scene.frame_current, scene.frame_subframe
    index = [arm.pose.bones.find(n) for n in names]
    out = np.empty((len(frames), len(names), 4, 4))
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            out[i] = read_pose(arm)[2][index]
    finally:
        scene.frame_set(current[0], subframe=current[1])
    return out


def _ensure_bag(action, slot):
    try:
        from bpy_extras import anim_utils
        return anim_utils.action_ensure_channelbag_for_slot(action, slot)
    except (ImportError, AttributeError):                  # Blender 4.4 / 4.5
        layer = action.layers[0] if action.layers else action.layers.new("Layer")
        strip = layer.strips[0] if layer.strips else layer.strips.new(type='KEYFRAME')
        return strip.channelbag(slot, ensure=True)


#: Name prefix of the NLA tracks the bake adds (``--target nla``).
NLA_PREFIX = "[reldesc] "


def remove_own_tracks(arm):
    """Remove the NLA tracks an earlier bake added on ``arm`` (their actions are kept)."""
    ad = arm.animation_data
    if ad is None:
        return 0
    ours = [t for t in ad.nla_tracks if t.name.startswith(NLA_PREFIX)]
    for t in ours:
        ad.nla_tracks.remove(t)
    return len(ours)


def add_nla_track(arm, action, slot, source, frame_start):
    """Put ``action`` on a new NLA track above the source: the source, unless it is already on a
    track, first goes onto a track of its own below; the active action is then cleared so the
    tracks play (mute the top track to compare with the source)."""
    if arm.animation_data is None:
        arm.animation_data_create()
    ad = arm.animation_data
    on_track = any(strip.action == source for t in ad.nla_tracks for strip in t.strips)
    if not on_track:                                       # active, or replaced by an earlier bake
        src_slot = ad.action_slot if ad.action == source else armature_slot(arm, source)
        track = ad.nla_tracks.new()
        track.name = source.name
        strip = track.strips.new(source.name, int(round(source.frame_range[0])), source)
        if src_slot is not None and hasattr(strip, "action_slot"):
            strip.action_slot = src_slot
    ad.action = None
    track = ad.nla_tracks.new()
    track.name = NLA_PREFIX + action.name
    strip = track.strips.new(action.name, int(frame_start), action)
    if slot is not None and hasattr(strip, "action_slot"):
        strip.action_slot = slot
    return track


def constraint_bypass_curves(arm, bone_names, frame):
    """Curves keying the influence of every active constraint on ``bone_names`` to 0: the keyed
    bones then play their keys exactly, as Blender's Bake Action with Clear Constraints, but
    the rig keeps its constraints (assign the source again and they act as before)."""
    curves, bones = [], set()
    for name in bone_names:
        for con in arm.pose.bones[name].constraints:
            if con.mute or con.influence <= 0.0 or not getattr(con, "enabled", True):
                continue
            path = (f'pose.bones["{bpy.utils.escape_identifier(name)}"].constraints'
                    f'["{bpy.utils.escape_identifier(con.name)}"].influence')
            curves.append(Curve(path, 0, name, np.array([float(frame)]), np.zeros(1), "CONSTANT",
                                influence=float(con.influence)))
            bones.add(name)
    return curves, sorted(bones)


BYPASS_KEY = "_reldesc_bypassed"
_DEFAULTS = {"location": 0.0, "scale": 1.0, "rotation_euler": 0.0, "rotation_quaternion": (1.0, 0.0, 0.0, 0.0),
             "rotation_axis_angle": (0.0, 0.0, 1.0, 0.0)}


def remember_bypass(arm, source, curves):
    """Remember what only the adapted action animates, so ``use_source`` can undo it: the
    influences the bypass keyed to 0, and bone channels the source does not key (an animated
    property keeps its last value when the next action does not key it)."""
    import json                                             # paths are longer than ID-property keys may be
    slot = armature_slot(arm, source)
    bag = _bag(source, slot) if slot is not None else None
    restore = {}
    for c in curves:
        if c.influence is not None:
            restore[f"{c.path}:0"] = c.influence
        elif bag is None or bag.fcurves.find(c.path, index=c.index) is None:
            default = _DEFAULTS[c.path.rsplit(".", 1)[1]]
            restore[f"{c.path}:{c.index}"] = default[c.index] if isinstance(default, tuple) else default
    _store(arm)[BYPASS_KEY] = json.dumps(restore)


def assign(arm, action, slot):
    if arm.animation_data is None:
        arm.animation_data_create()
    arm.animation_data.action = action
    if slot is not None:
        arm.animation_data.action_slot = slot


def use_source(arm, source):
    """Assign the bound source action again, give constraints the bake bypassed their influence
    back and reset the bone channels only the adapted action keyed (see ``remember_bypass``).
    Returns how many constraints were switched back on."""
    assign(arm, source, armature_slot(arm, source))
    restored = 0
    import json
    for key, value in json.loads(_store(arm).get(BYPASS_KEY, "{}")).items():
        path, index = key.rsplit(":", 1)
        owner, prop = path.rsplit(".", 1)
        try:
            target = arm.path_resolve(owner)
        except ValueError:
            continue                                       # the bone or constraint is gone
        if prop == "influence":
            target.influence = value
            restored += 1
        else:
            getattr(target, prop)[int(index)] = value
    if BYPASS_KEY in _store(arm):
        del _store(arm)[BYPASS_KEY]
    return restored


# --- fast source motion: numpy forward kinematics from the keyed values ----------

def _slot_fcurves(arm, action):
    slot = arm.animation_data.action_slot if arm.animation_data else None
    if slot is None:
        return list(_fcurves(action))
    bag = _bag(action, slot)
    return list(bag.fcurves) if bag is not None else []


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


def _sample(fc, frames):
    """Values of an F-curve at integer ``frames``: linear keys by np.interp, else evaluate()."""
    kp = fc.keyframe_points
    K = len(kp)
    if K == 0:
        return None
    interp = np.empty(K, np.int32)
    kp.foreach_get("interpolation", interp)
    if fc.modifiers or np.any(interp[:-1] != 1) or fc.extrapolation != 'CONSTANT':     # 1 = LINEAR
        return np.array([fc.evaluate(float(f)) for f in frames])
    co = np.empty(K * 2, np.float32)
    kp.foreach_get("co", co)
    co = co.reshape(K, 2).astype(float)
    return np.interp(frames, co[:, 0], co[:, 1])


def read_motion_fk(arm, action, frames, rig, tail_bones):
    """Same outputs as ``read_motion`` by numpy forward kinematics of the keyed values.

    Valid only when ``fk_blockers`` is empty (no constraints, drivers, NLA,
    animated object transform or special inheritance).
    """
    from .core.keys import rotation_matrices
    from .core.skeleton.armature import pose_from_basis
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
