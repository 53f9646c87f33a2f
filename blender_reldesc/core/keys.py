"""Keys for baked channels: which frames to key, and what a key set plays back.

A bake has the adapted value of every channel on every frame. Keying all of
them gives heavy actions (15k keys for a 150-frame clip); ``reduce_keys``
keeps the fewest keys for which the played-back joints stay within a
tolerance *in metres of joint motion*, measured on every frame by forward
kinematics, never estimated.

Playback is modelled exactly as Blender evaluates the keys we write:

- ``LINEAR``: straight lines between keys.
- ``BEZIER``: each key's two handles lie on the tangent given by the dense
  data's slope at that frame, a third of the way to the neighbouring key, so
  a segment is a cubic Hermite curve in the frame number (Blender evaluates
  the same curve: with handles at thirds, frame is linear in the Bezier
  parameter).

Quaternion channels are interpolated per component and normalised, as Blender
does before building a bone's matrix. Everything outside the keys holds the
end values (constant extrapolation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .skeleton.rotations import matrix_from_quat

INTERPOLATIONS = ("LINEAR", "BEZIER")


@dataclass
class Channels:
    """One bone's channels of one kind, keyed together (all components share key frames).

    kind : 'quaternion', 'euler', 'axis_angle', 'location' or 'scale'.
    values : (F,k) dense values, one row per baked frame.
    order : Euler order ('XYZ', ...) for kind 'euler'.
    """

    kind: str
    values: np.ndarray
    order: str = "XYZ"

    def slopes(self):
        """(F,k) value per frame at each frame (central differences; one-sided at the ends)."""
        v = self.values
        return np.gradient(v, axis=0) if len(v) > 1 else np.zeros_like(v)


def evaluate(key_frames, key_values, key_slopes, frames, interpolation="LINEAR"):
    """Values (F,k) at ``frames`` of keys at ``key_frames`` (K,) with values (K,k).

    ``key_slopes`` (K,k) are used by 'BEZIER' only (value per frame).
    """
    key_frames = np.asarray(key_frames, float)
    frames = np.asarray(frames, float)
    K = len(key_frames)
    if K == 1:
        return np.repeat(key_values[:1], len(frames), axis=0)
    f = np.clip(frames, key_frames[0], key_frames[-1])
    i = np.clip(np.searchsorted(key_frames, f, side="right") - 1, 0, K - 2)
    t0, t1 = key_frames[i], key_frames[i + 1]
    h = (t1 - t0)[:, None]
    s = ((f - t0) / (t1 - t0))[:, None]
    v0, v1 = key_values[i], key_values[i + 1]
    if interpolation == "LINEAR":
        return np.where(s == 1.0, v1, v0 + s * (v1 - v0))       # a key plays its own value, exactly
    if interpolation != "BEZIER":
        raise ValueError(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
    m0, m1 = key_slopes[i], key_slopes[i + 1]
    s2, s3 = s * s, s * s * s
    return ((2 * s3 - 3 * s2 + 1) * v0 + (s3 - 2 * s2 + s) * h * m0
            + (-2 * s3 + 3 * s2) * v1 + (s3 - s2) * h * m1)


def bezier_handles(key_frames, key_values, key_slopes):
    """(left, right) handles (K,k,2) as (frame, value) that make Blender play the Hermite curve."""
    key_frames = np.asarray(key_frames, float)
    gap = np.diff(key_frames)
    before = np.concatenate([[gap[0] if len(gap) else 1.0], gap])[:, None] / 3.0
    after = np.concatenate([gap, [gap[-1] if len(gap) else 1.0]])[:, None] / 3.0
    left = np.stack([np.broadcast_to(key_frames[:, None] - before, key_values.shape),
                     key_values - key_slopes * before], axis=-1)
    right = np.stack([np.broadcast_to(key_frames[:, None] + after, key_values.shape),
                      key_values + key_slopes * after], axis=-1)
    return left, right


def euler_matrices(values, order="XYZ"):
    """(...,3,3) rotations of Euler angles (...,3) (X, Y, Z) in a Blender rotation mode: the
    first axis of ``order`` turns first, ``R = R[order[2]] @ R[order[1]] @ R[order[0]]``.
    Closed form: scipy's ``from_euler`` took a fifth of a bake's key planning."""
    values = np.asarray(values, dtype=float)
    c, s = np.cos(values), np.sin(values)
    one, zero = np.ones(values.shape[:-1]), np.zeros(values.shape[:-1])
    out = None
    for a in order:
        k = "XYZ".index(a)
        ca, sa = c[..., k], s[..., k]
        rows = {0: ((one, zero, zero), (zero, ca, -sa), (zero, sa, ca)),
                1: ((ca, zero, sa), (zero, one, zero), (-sa, zero, ca)),
                2: ((ca, -sa, zero), (sa, ca, zero), (zero, zero, one))}[k]
        m = np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)
        out = m if out is None else m @ out
    return out


def rotation_matrices(kind, values, order="XYZ"):
    """(F,3,3) rotation of a channel's values as Blender builds it."""
    if kind == "quaternion":
        q = values / np.maximum(np.linalg.norm(values, axis=-1, keepdims=True), 1e-12)
        return matrix_from_quat(q)
    if kind == "euler":
        return euler_matrices(values, order)
    from scipy.spatial.transform import Rotation
    if kind == "axis_angle":
        axis = values[:, 1:] / np.maximum(np.linalg.norm(values[:, 1:], axis=-1, keepdims=True), 1e-12)
        return Rotation.from_rotvec(axis * values[:, :1]).as_matrix()
    raise ValueError(f"not a rotation kind: {kind}")


def own_error(channels, played, reach):
    """(F,) how far this channel's playback error alone moves the joints it carries (metres):
    rotation error angle x reach, or the location error."""
    if channels.kind == "location":
        return np.linalg.norm(played - channels.values, axis=-1)
    if channels.kind == "scale":
        return np.abs(played - channels.values).max(axis=-1) * reach
    a = rotation_matrices(channels.kind, played, channels.order)
    b = rotation_matrices(channels.kind, channels.values, channels.order)
    cos = (np.einsum("fij,fij->f", a, b) - 1.0) / 2.0
    return np.arccos(np.clip(cos, -1.0, 1.0)) * reach


def _play(channels, keys, slopes, frames, interpolation):
    return evaluate(frames[keys], channels.values[keys], slopes[keys], frames, interpolation)


def play(channels, keys, interpolation="LINEAR"):
    """(F,k) what keys at frame indices ``keys`` play back on every dense frame of ``channels``."""
    frames = np.arange(len(channels.values), dtype=float)
    return _play(channels, keys, channels.slopes(), frames, interpolation)


def _split_intervals(keys, err, eligible, tol):
    """Frames to add: in each interval between keys, the eligible frame of largest error above tol."""
    bad = (err > tol) & eligible
    if not bad.any():
        return []
    seg = np.searchsorted(keys, np.flatnonzero(bad), side="right")
    idx = np.flatnonzero(bad)
    out = []
    for s in np.unique(seg).tolist():
        members = idx[seg == s]
        out.append(int(members[np.argmax(err[members])]))
    return out


def reduce_keys(groups, joints_of, carries, reach, tolerance, candidates=None, interpolation="LINEAR",
                max_rounds=200):
    """Fewest keys per channel group so that the played-back joints stay within ``tolerance``.

    groups : list of ``Channels`` (G), all with F dense frames.
    joints_of : callable(list of (F,k) played values) -> (F,J,3) joint positions.
    carries : (G,J) bool, the joints each group moves.
    reach : (G,) metres a unit rotation error of the group moves its farthest joint.
    candidates : (F,) bool, frames that may be keyed (default all); the first and
        last candidate are always keyed.
    Returns ``(keys, deviation)``: per group the sorted frame indices (into the F
    frames) to key, and the measured (F,J) joint deviation from the dense playback.
    """
    G = len(groups)
    if G == 0:
        return [], np.zeros((0, 0))
    F = len(groups[0].values)
    frames = np.arange(F, dtype=float)
    eligible = np.ones(F, bool) if candidates is None else np.asarray(candidates, bool)
    ends = np.flatnonzero(eligible)[[0, -1]]
    slopes = [g.slopes() for g in groups]
    keys = [np.unique(ends) for _ in range(G)]
    # Each group alone first, within half the tolerance (cheap: no kinematics).
    for g, ch in enumerate(groups):
        for _ in range(max_rounds):
            err = own_error(ch, _play(ch, keys[g], slopes[g], frames, interpolation), reach[g])
            add = _split_intervals(keys[g], err, eligible & ~np.isin(np.arange(F), keys[g]), tolerance / 2)
            if not add:
                break
            keys[g] = np.union1d(keys[g], add)
    # Then the joints themselves: where one strays, key the group that contributes most there.
    reference = joints_of([ch.values for ch in groups])
    for _ in range(max_rounds):
        played = [_play(ch, keys[g], slopes[g], frames, interpolation) for g, ch in enumerate(groups)]
        deviation = np.linalg.norm(joints_of(played) - reference, axis=-1)
        worst = deviation.max(axis=1)
        bad = np.flatnonzero(worst > tolerance)
        if not bad.size:
            break
        errors = np.stack([own_error(ch, played[g], reach[g]) for g, ch in enumerate(groups)])   # (G,F)
        keyed = np.zeros((G, F), bool)
        for g in range(G):
            keyed[g, keys[g]] = True
        joint = deviation[bad].argmax(axis=1)
        score = np.where(carries[:, joint] & ~keyed[:, bad] & eligible[bad][None], errors[:, bad], -1.0)
        pick = score.argmax(axis=0)
        ok = score[pick, np.arange(len(bad))] >= 0
        if not ok.any():
            break                                   # nothing left to key at those frames
        added = False
        for g in np.unique(pick[ok]).tolist():
            rows = bad[ok & (pick == g)]
            err = np.zeros(F)
            err[rows] = worst[rows]
            add = _split_intervals(keys[g], err, eligible, tolerance)
            if add:
                keys[g] = np.union1d(keys[g], add)
                added = True
        if not added:
            break
    else:
        played = [_play(ch, keys[g], slopes[g], frames, interpolation) for g, ch in enumerate(groups)]
        deviation = np.linalg.norm(joints_of(played) - reference, axis=-1)
    return [k.astype(np.int64) for k in keys], deviation


def euler_compatible(angles, order, reference):
    """Euler angles (F,B,3) rewritten frame by frame to the equivalent triple closest to the
    previous frame's (the first to ``reference`` (B,3)), as mathutils' ``to_euler(order, compat)``.

    Each frame has two triples for one rotation, (a, b, c) and (a + pi, pi - b, c + pi)
    in the order's axes, each defined up to whole turns per angle: the one nearest the
    previous frame wins, so a spinning bone keeps turning instead of jumping by pi.

    Which of the two wins depends only on which one the previous frame took (distances up to
    whole turns do not depend on the turns), so the choice is a two-state chain: both
    transitions are computed for every frame at once, the chain is walked with one small
    operation per frame, and the whole turns are then added by ``np.unwrap``.
    """
    first, second, third = ("XYZ".index(a) for a in order)
    a = np.array(angles, dtype=float, copy=True)
    if not len(a):
        return a
    b = a.copy()
    b[..., first] += np.pi
    b[..., second] = np.pi - b[..., second]
    b[..., third] += np.pi
    ref = np.broadcast_to(np.asarray(reference, float), a.shape[1:])[None]
    two_pi = 2.0 * np.pi

    def far(x, y):
        d = x - y
        return np.abs(d - two_pi * np.round(d / two_pi)).sum(-1)

    after_a = np.concatenate([ref, a[:-1]])
    after_b = np.concatenate([ref, b[:-1]])
    from_a = far(b, after_a) < far(a, after_a)          # (F,B): b wins if the previous frame took a
    from_b = far(b, after_b) < far(a, after_b)
    chosen = np.where(_two_state_chain(from_a, from_b)[..., None], b, a)
    return np.unwrap(np.concatenate([ref, chosen]), axis=0)[1:]


def _two_state_chain(from_a, from_b):
    """(F,B) bool ``took[f] = from_b[f] if took[f - 1] else from_a[f]``, ``took[0] = from_a[0]``,
    without a loop over frames.

    Each frame maps the previous state to the next: to a constant where ``from_a == from_b``,
    else keeping it (``from_b``) or flipping it (``from_a``). So a frame's state is the value
    of the last constant frame, flipped once per flipping frame since: a running maximum and
    a running count. (A loop of one numpy call per frame cost 0.02 s of a 600-frame bake.)"""
    F = len(from_a)
    const = from_a == from_b
    const[0] = True                                      # frame 0 starts from state a
    frames = np.arange(F).reshape((F,) + (1,) * (from_a.ndim - 1))
    last = np.maximum.accumulate(np.where(const, frames, 0), axis=0)
    value = np.take_along_axis(from_a, last, axis=0)
    flips = np.cumsum(~const & from_a, axis=0)
    return value ^ ((flips - np.take_along_axis(flips, last, axis=0)) % 2 == 1)
