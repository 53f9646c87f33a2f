"""Actions: F-curves as arrays (read, sampled, written whole with ``foreach_set``), slots,
NLA tracks, the constraint bypass, assigning and switching back to the source."""

from __future__ import annotations

import json
from dataclasses import dataclass

import bpy
import numpy as np

from .scene import SceneError
from .storage import BYPASS_KEY, host


def source_action(arm):
    ad = arm.animation_data
    action = ad.action if ad else None
    if action is None:
        raise SceneError(f"armature '{arm.name}' has no action: give it the motion to adapt")
    return action


def frame_range(action):
    start, end = action.frame_range
    return int(round(start)), int(round(end))


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
            _fill(_new_fcurve(bag, path, k, bone), _auto_handle_keys(Curve(path, k, bone, frames, values[:, k])))
    assign(arm, action, slot)
    return action


def assign_action(arm, action):
    """Assign ``action`` with its first slot (or none) to the armature."""
    if arm.animation_data is None:
        arm.animation_data_create()
    arm.animation_data.action = action
    if action is not None and len(action.slots) and arm.animation_data.action_slot is None:
        arm.animation_data.action_slot = action.slots[0]


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


def sample_source(arm, source, wanted, frames):
    """``sample_curves`` of the slot of ``source`` that animates ``arm``."""
    return sample_curves(source, armature_slot(arm, source), wanted, frames)


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


def _auto_handle_keys(curve):
    """``_curve_keys`` of a new curve given no handles (``curve.left`` None), less what the curve's
    update computes: its auto-clamped handles, and the easing new keys have ('AUTO'). Writing
    them changes nothing (tests, Blender 4.5, 5.2, 5.3) and cost three of seven writes a curve (a
    100-character walk's 10k curves: about 1 s)."""
    keys = _curve_keys(curve)
    return {k: v for k, v in keys.items() if k not in ("handle_left", "handle_right", "easing")}


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
            keys = _auto_handle_keys(curve)
        _fill(_new_fcurve(bag, curve.path, curve.index, curve.group), keys)


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


def constraint_bypass_curves(arm, bone_names, frame, earlier=None):
    """Curves keying the influence of every active constraint on ``bone_names`` to 0: the keyed
    bones then play their keys exactly, as Blender's Bake Action with Clear Constraints, but
    the rig keeps its constraints (assign the source again and they act as before). A bake over
    an adapted action (whose keys hold the influences at 0) takes them from the earlier bake's
    record ``earlier`` ({path:index: value}, ``bypass_restore``'s)."""
    earlier = earlier or {}
    curves, bones = [], set()
    for name in bone_names:
        for con in arm.pose.bones[name].constraints:
            path = (f'pose.bones["{bpy.utils.escape_identifier(name)}"].constraints'
                    f'["{bpy.utils.escape_identifier(con.name)}"].influence')
            influence = float(earlier.get(f"{path}:0", con.influence))
            if con.mute or influence <= 0.0 or not getattr(con, "enabled", True):
                continue
            curves.append(Curve(path, 0, name, np.array([float(frame)]), np.zeros(1), "CONSTANT",
                                influence=influence))
            bones.add(name)
    return curves, sorted(bones)


_DEFAULTS = {"location": 0.0, "scale": 1.0, "rotation_euler": 0.0, "rotation_quaternion": (1.0, 0.0, 0.0, 0.0),
             "rotation_axis_angle": (0.0, 0.0, 1.0, 0.0)}


def bypass_restore(arm, source, curves):
    """What only the adapted action animates, for ``use_source`` to undo (stored with
    ``storage.store_bake``): the influences the bypass keyed to 0, and bone channels the source
    does not key (an animated property keeps its last value when the next action does not key
    it), with the value they have now, before the adapted action plays (the pose the animator
    gave an unkeyed bone; the channel's default when it cannot be read).
    {``path:index``: the value to restore}."""
    slot = armature_slot(arm, source)
    bag = _bag(source, slot) if slot is not None else None
    restore = {}
    for c in curves:
        if c.influence is not None:
            restore[f"{c.path}:0"] = c.influence
        elif bag is None or bag.fcurves.find(c.path, index=c.index) is None:
            try:
                value = float(arm.path_resolve(c.path)[c.index])
            except (ValueError, TypeError, IndexError):
                default = _DEFAULTS[c.path.rsplit(".", 1)[1]]
                value = default[c.index] if isinstance(default, tuple) else default
            restore[f"{c.path}:{c.index}"] = value
    return restore


def assign(arm, action, slot):
    if arm.animation_data is None:
        arm.animation_data_create()
    arm.animation_data.action = action
    if slot is not None:
        arm.animation_data.action_slot = slot


def use_source(arm, source):
    """Assign the bound source action again, give constraints the bake bypassed their influence
    back and reset the bone channels only the adapted action keyed (see ``bypass_restore``).
    Returns how many constraints were switched back on."""
    assign(arm, source, armature_slot(arm, source))
    restored = 0

    for key, value in json.loads(host(arm).get(BYPASS_KEY, "{}")).items():
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
    if BYPASS_KEY in host(arm):
        del host(arm)[BYPASS_KEY]
    return restored


def _slot_fcurves(arm, action):
    slot = arm.animation_data.action_slot if arm.animation_data else None
    if slot is None:
        return list(_fcurves(action))
    bag = _bag(action, slot)
    return list(bag.fcurves) if bag is not None else []


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



def write_bake(arm, source, name, curves, bone_names, frame_range, target, earlier=None):
    """Write a bake's ``curves`` into action ``name`` (``write_adapted``), with the influence of
    the constraints on ``bone_names`` keyed to 0 (``constraint_bypass_curves``), and assign it
    (``target`` 'ACTION') or put it on an NLA track above the source ('NLA', replacing the
    tracks of earlier bakes); ``earlier``: the last bake's record (``constraint_bypass_curves``).
    Returns ``(action, slot, bypassed bone names, what use_source restores)``."""
    bypass, bypassed = constraint_bypass_curves(arm, bone_names, frame_range[0], earlier)
    restore = bypass_restore(arm, source, curves + bypass)          # before the adapted action plays
    if target == "NLA":
        remove_own_tracks(arm)
    action, slot = write_adapted(arm, source, name, curves + bypass, frame_range)
    if target == "NLA":
        add_nla_track(arm, action, slot, source, frame_range[0])
    else:
        assign(arm, action, slot)
    return action, slot, bypassed, restore


def write_new(arm, name, curves, frame_range, target):
    """A new action ``name`` holding ``curves`` (a retarget's keys, and a constraint bypass), with a
    slot for ``arm``; assigned (``target`` 'ACTION') or put on a new NLA track above whatever plays
    now ('NLA': the armature's current action, if any, goes onto a track of its own first). A
    previous action of that name is replaced only when nothing but ``arm`` uses it (else the new
    one is ``<name>.001``: compare names to say so). Nothing else of ``arm`` changes: its other
    actions stay. Returns ``(action, slot)``."""
    _release(arm, name)
    action = bpy.data.actions.new(name)
    slot, _ = _channelbag(action, arm)
    write_curves(action, slot, curves, frame_range)
    if target == "NLA":
        current = arm.animation_data.action if arm.animation_data is not None else None
        if current is not None and current != action:
            add_nla_track(arm, action, slot, current, frame_range[0])
        else:
            if arm.animation_data is None:
                arm.animation_data_create()
            arm.animation_data.action = None
            track = arm.animation_data.nla_tracks.new()
            track.name = NLA_PREFIX + action.name
            strip = track.strips.new(action.name, int(frame_range[0]), action)
            if hasattr(strip, "action_slot"):
                strip.action_slot = slot
    else:
        assign(arm, action, slot)
    return action, slot
