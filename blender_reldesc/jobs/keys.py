"""Keys: what a bake writes (``BakeOptions``), the channels it may write, and the key plan:
curves from the adapted motion, reduced where asked, each channel in the bone's own rotation
mode. Pure numpy: the plan is made on the worker thread and written by ``adapter.actions``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..adapter import SceneError
from ..adapter.actions import Curve
from ..core.keys import (INTERPOLATIONS, Channels, bezier_handles, euler_compatible, play, reduce_keys,
                        rotation_matrices)
from ..core.skeleton.armature import axis_angle_from_quat, euler_from_quat, sign_continuous
from ..core.skeleton.rotations import quat_from_matrix


@dataclass
class BakeOptions:
    """What a bake writes (panel, operator and command line share these).

    frames : (start, end) inclusive, within the bound range (None: all of it).
    step : key every N-th frame (the range's last frame is always keyed).
    clean : tolerance in metres of joint motion; keys are reduced until the played-back
        joints would stray further (None: key every step).
    interpolation : 'LINEAR' or 'BEZIER' (smooth tangents from the adapted motion).
    target : 'ACTION' (assign the adapted action) or 'NLA' (a new NLA track above the source).
    """

    frames: tuple = None
    step: int = 1
    clean: float = None
    interpolation: str = "LINEAR"
    target: str = "ACTION"

    def checked(self, bound_frames):
        """Normalised copy; SceneError naming the bad value and the allowed ones."""
        lo, hi = int(bound_frames[0]), int(bound_frames[-1])
        start, end = self.frames if self.frames else (lo, hi)
        start, end = int(start), int(end)
        if not lo <= start <= end <= hi:
            raise SceneError(f"bake frames {start}-{end} are outside the bound frames {lo}-{hi}: choose a "
                             "range inside them (or re-bind a longer action)")
        if int(self.step) < 1:
            raise SceneError(f"bake step must be 1 or more, got {self.step}")
        if self.clean is not None and not (np.isfinite(self.clean) and self.clean > 0):
            raise SceneError(f"clean tolerance must be a positive distance in metres, got {self.clean}")
        interp, target = str(self.interpolation).upper(), str(self.target).upper()
        if interp not in INTERPOLATIONS:
            raise SceneError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, got '{self.interpolation}'")
        if target not in TARGETS:
            raise SceneError(f"bake target must be one of {', '.join(t.lower() for t in TARGETS)}, "
                             f"got '{self.target}'")
        return BakeOptions((start, end), int(self.step), None if self.clean is None else float(self.clean),
                           interp, target)


TARGETS = ("ACTION", "NLA")
#: Channel values within this of the source's on every baked frame keep the source's curve whole.
UNCHANGED = 1e-6
_ROTATION_KIND = {"QUATERNION": ("quaternion", "rotation_quaternion"),
                  "AXIS_ANGLE": ("axis_angle", "rotation_axis_angle")}


def bake_options(settings):
    """The panel's bake options (``adapter.scene.settings``) as ``BakeOptions``."""
    s = settings
    return BakeOptions(frames=(s.bake_frame_start, s.bake_frame_end) if s.use_bake_range else None,
                       step=s.bake_step, clean=s.bake_clean_tolerance if s.use_bake_clean else None,
                       interpolation=s.bake_interpolation, target=s.bake_target)


#: What Blender's ``bpy.utils.escape_identifier`` escapes in a name inside a data path.
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\t": "\\t", "\n": "\\n", "\r": "\\r", "\a": "\\a",
            "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def escape_identifier(name):
    """``bpy.utils.escape_identifier`` without bpy (the jobs build data paths on any thread)."""
    return "".join(_ESCAPES.get(c, c) for c in name)


def checked_options(options, settings, frames):
    """``(checked BakeOptions, the frames baked (bool over ``frames``))``: ``options`` a
    ``BakeOptions``, or a dict of changes to the panel's (``settings``)."""
    if isinstance(options, dict):
        changed = bake_options(settings)
        for k, v in options.items():
            setattr(changed, k, v)
        options = changed
    options = options.checked(frames)
    start, end = options.frames
    return options, (frames >= start) & (frames <= end)


def prepare(options, settings, bound):
    """What a bake of ``bound`` keys, read before its compute: ``(options, baked, channels,
    wanted)``: the checked options (``options`` a ``BakeOptions``, or a dict of changes to the
    panel's, ``settings``), the bound frames baked (bool), ``channels(bound)`` and the
    (data path, index) of each channel's curves."""
    options, baked = checked_options(options, settings, bound.frames)
    writable = channels(bound)
    wanted = {(p, k) for _, _, p, width in writable for k in range(width)}
    return options, baked, writable, wanted


def channels(bound):
    """(bone, kind, data path, width) of every channel a bake of ``bound`` may write."""
    out = []
    mask = bound.keyed_locations
    for b, (name, mode) in enumerate(zip(bound.rig.names, bound.rig.rotation_modes)):
        bone = f'pose.bones["{escape_identifier(name)}"]'
        kind, prop = _ROTATION_KIND.get(mode, ("euler", "rotation_euler"))
        out.append((b, kind, f"{bone}.{prop}", 4 if kind != "euler" else 3))
        if mask[b]:
            out.append((b, "location", f"{bone}.location", 3))
        out.append((b, "scale", f"{bone}.scale", 3))
    return out


def plan_keys(bound, positions, baked, writable, source_values, opt):
    """Curves to write for adapted world joints ``positions`` (F,J,3) on the ``baked`` frames
    (bool over the bound frames), and what they cost and lose: ``{curves, kept, played,
    deviation, per_frame, keys}``. Pure numpy (runs on the worker thread).

    writable : ``channels(bound)``; source_values : {(path, index): (F,) the source's values on
    the baked frames}; opt : checked ``BakeOptions``.
    """
    idx = np.flatnonzero(baked)
    rot, scale, locs, played_pose = bound.keyable_basis(positions[idx], idx)
    quats = sign_continuous(quat_from_matrix(rot))
    frames = bound.frames[idx]
    groups, kept = [], 0
    for b, kind, path, width in writable:
        if kind == "scale":
            values = scale[:, b]
            if (path, 0) not in source_values and np.abs(values - 1.0).max() <= UNCHANGED:
                continue                                # unscaled, and the source keys no scale
        elif kind == "location":
            values = locs[:, b]
        elif kind == "quaternion":
            values = quats[:, b]
        elif kind == "axis_angle":
            values = axis_angle_from_quat(quats[:, b:b + 1])[:, 0]
        else:
            mode = bound.rig.rotation_modes[b]
            raw = euler_from_quat(quats[:, b:b + 1], mode)
            ref = np.array([[source_values.get((path, k), [0.0])[0] for k in range(3)]])
            values = euler_compatible(raw, mode, ref)[:, 0]
        src = [source_values.get((path, k)) for k in range(width)]
        if all(v is not None for v in src):
            src = np.stack(src, axis=-1)
            if kind == "quaternion" and src[0] @ values[0] < 0:
                values = -values                        # the source's hemisphere
            if np.abs(values - src).max() <= UNCHANGED:
                kept += 1                               # the source's curve stays, sub-frames and all
                continue
        groups.append((b, kind, path, Channels(kind, values, bound.rig.rotation_modes[b])))

    def joints_of(played):
        r, t, s = rot.copy(), locs.copy(), scale.copy()
        for (b, kind, _, ch), v in zip(groups, played):
            if kind == "location":
                t[:, b] = v
            elif kind == "scale":
                s[:, b] = v
            else:
                r[:, b] = rotation_matrices(kind, v, ch.order)
        m = np.broadcast_to(np.eye(4), r.shape[:2] + (4, 4)).copy()
        m[..., :3, :3] = r * s[..., None, :]
        m[..., :3, 3] = t
        return bound.forward(m, idx)

    candidates = (np.arange(len(idx)) % opt.step == 0)
    candidates[-1] = True
    channels = [ch for *_, ch in groups]
    if opt.clean is None:
        keys = [np.flatnonzero(candidates)] * len(groups)
        played = [play(ch, k, opt.interpolation) for ch, k in zip(channels, keys)]
        if all(np.array_equal(p, ch.values) for p, ch in zip(played, channels)):
            deviation = np.zeros((1, 1))                # every frame keyed: the keys play the values
        else:
            reference = joints_of([ch.values for ch in channels])
            deviation = np.linalg.norm(joints_of(played) - reference, axis=-1)
    else:
        sk = bound.binding.skeleton
        below = _descendants(sk)
        reference = joints_of([ch.values for ch in channels])
        carries = np.zeros((len(groups), len(sk)), bool)
        reach = np.zeros(len(groups))
        for g, (b, kind, _, _) in enumerate(groups):
            head = bound.head_joint[b]
            carries[g] = below[head]
            carries[g, head] = kind == "location"          # rotation and scale move what hangs below
            if carries[g].any():
                reach[g] = np.linalg.norm(reference[:, carries[g]] - reference[:, head:head + 1],
                                          axis=-1).max()
        keys, deviation = reduce_keys(channels, joints_of, carries, reach, opt.clean, candidates,
                                      opt.interpolation)
    curves = []
    for (b, kind, path, ch), k in zip(groups, keys):
        left = right = [None] * ch.values.shape[1]
        if opt.interpolation == "BEZIER":
            left, right = (h.swapaxes(0, 1) for h in bezier_handles(frames[k], ch.values[k], ch.slopes()[k]))
        for c in range(ch.values.shape[1]):
            curves.append(Curve(path, c, bound.rig.names[b], frames[k].astype(float), ch.values[k, c],
                                        opt.interpolation, left[c], right[c]))
    return dict(curves=curves, kept=kept, played=played_pose,
                deviation=float(deviation.max()) if deviation.size else 0.0,
                per_frame=sum(ch.values.shape[1] for ch in channels) * len(idx),
                keys=int(sum(len(c.frames) for c in curves)))


def _descendants(skeleton):
    """(J,J) bool: [a, j] when j is strictly below a."""
    J = len(skeleton)
    out = np.zeros((J, J), bool)
    for j in skeleton.order[::-1].tolist():
        p = skeleton.parents[j]
        if p >= 0:
            out[p] |= out[j]
            out[p, j] = True
    return out
