"""Joints near a surface keep their clearance from it where the surface was sculpted.

A departure from SCA 2013, documented in the manual, docs/how-it-works ("Sculpted ground"). A descriptor a
distance s from a joint carries the joint's relative vector with its own frame, so it predicts
the surface under the joint to first order: where a floor sculpted after binding is
z(d) + s z'(d) + s² z''(d) / 2, Eq. 2 puts a planted foot at z(d) + s z'(d) plus its source
height. On a bump of 0.3 m (sigma 0.5 m, |z''| = 1.2 / m) descriptors 0.2 m away leave a foot
floating 2.4 cm over the crest, or sunk as far into a dip (``benchmarks/bench_terrain.py``).

The correction: a joint whose source position is within ``CLEARANCE_FULL_FRACTION`` body heights
of the bind-time surface (a foot, a toe, a hand on a table), fading out by
``CLEARANCE_FADE_FRACTION``, has its target moved along the surface's normal until its distance
from the surface now is its source distance. The descriptors still say where along the surface
it goes; only the second-order term is taken from the surface itself. An undeformed or rigidly
moved surface leaves every distance as it was, so the targets are Eq. 2's there (exactly, when
the surface is the bind-time one). A target that finds no surface within the fade band, or one
whose distance is off by more than ``CLEARANCE_MISMATCH_FADE_FRACTION`` (a stone moved away
from under a foot: the contacts decide where that foot goes), is left as Eq. 2 has it, with a
fade in between so the targets stay continuous over time.
"""

from __future__ import annotations

import numpy as np

from .. import constants as C
from ..geometry import Collider
from ..geometry.triangles import closest_point_on_triangles

#: A joint this close to the bind-time surface (times body height) keeps its clearance fully ...
FULL = C.CLEARANCE_FULL_FRACTION
#: ... and not at all from this far.
FADE = C.CLEARANCE_FADE_FRACTION


def _ramp(x, full, zero):
    """1 up to ``full``, 0 from ``zero``, linear between."""
    return np.clip((zero - x) / (zero - full), 0.0, 1.0)


def _by_frame(mesh, frames):
    """(frame, rows) groups of a query: one group at frame 0 on a static mesh."""
    if not mesh.animated:
        return [(0, np.arange(len(frames)))]
    return [(f, np.flatnonzero(frames == f)) for f in np.unique(frames).tolist()]


def _closest(mesh, band, points, frames):
    """Signed distance (P,), normal (P,3), triangle (P,) and barycentrics (P,3) of the closest point
    of ``mesh`` within ``band`` to each point, at its frame (P,); triangle -1 where none.

    The collider finds the triangle; the point on it, the distance and the normal are then worked
    out again here, pair by pair with the same arithmetic, so that they do not depend on how many
    points were asked at once (the collider's searches differ by batch size, and the live preview,
    which asks a few frames at a time, must give what the bake gives, bit for bit)."""
    P = len(points)
    sd, normal, tri, bary = np.full(P, np.inf), np.zeros((P, 3)), np.full(P, -1), np.zeros((P, 3))
    for f, at in _by_frame(mesh, frames):
        _, _, tri[at], _ = Collider.of(mesh, band, f).closest(points[at])
        ok = at[tri[at] >= 0]
        if not ok.size:
            continue
        corners = mesh.frame(f)[mesh.triangles[tri[ok]]]                          # (k,3,3)
        b = closest_point_on_triangles(points[ok], corners[:, 0], corners[:, 1], corners[:, 2])
        foot = _weighted(b, corners)
        n = _weighted(b, mesh.normals(f)[mesh.triangles[tri[ok]]])
        n = n / np.maximum(_length(n), 1e-300)[:, None]
        rel = points[ok] - foot
        side = rel[:, 0] * n[:, 0] + rel[:, 1] * n[:, 1] + rel[:, 2] * n[:, 2]
        sd[ok] = np.where(side < 0, -1.0, 1.0) * _length(rel)
        normal[ok], bary[ok] = n, b
    return sd, normal, tri, bary


def _weighted(bary, corners):
    """(k,3) ``bary`` (k,3) of ``corners`` (k,3,3), term by term (no reduction whose order could
    depend on the batch)."""
    return bary[:, 0:1] * corners[:, 0] + bary[:, 1:2] * corners[:, 1] + bary[:, 2:3] * corners[:, 2]


def _length(v):
    return np.sqrt(v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2])


def _on(mesh, tri, bary, frames):
    """(P,3) the points (tri, bary) of ``mesh`` at their frames (P,); tri >= 0."""
    out = np.empty((len(tri), 3))
    for f, at in _by_frame(mesh, frames):
        out[at] = _weighted(bary[at], mesh.frame(f)[mesh.triangles[tri[at]]])
    return out


def source_clearance(binding, frames, band=FADE):
    """``sd (n,J), foot (n,J,3)``: each source joint's signed distance from the bind-time surface at
    ``frames`` (inf where none within ``band`` body heights, by default the fade band) and its closest
    point there (NaN where none), computed once per frame and kept on the binding."""
    F, J = binding.motion.shape[:2]
    key = "clearance" if band == FADE else ("clearance", band)
    kept = binding._joint_models.get(key)
    if kept is None:
        kept = binding._joint_models[key] = (np.zeros(F, bool), np.full((F, J), np.inf),
                                             np.full((F, J, 3), np.nan))
    have, sd, foot = kept
    todo = frames[~have[frames]]
    if todo.size:
        mesh = binding.mesh
        at = np.repeat(todo, J)
        d, _, tri, bary = _closest(mesh, band * binding.body_height, binding.motion[todo].reshape(-1, 3), at)
        on = np.full((len(at), 3), np.nan)
        ok = tri >= 0
        on[ok] = _on(mesh, tri[ok], bary[ok], at[ok])
        sd[todo], foot[todo] = d.reshape(-1, J), on.reshape(-1, J, 3)
        have[todo] = True
    return sd[frames], foot[frames]


def keep_clearance(binding, mesh, frames, targets):
    """Move ``targets`` (n,J,3) of ``frames`` (n,) on ``mesh`` (in place) so the joints near a surface
    keep their source distance from it (see the module). Returns the number of targets moved."""
    if mesh is binding.mesh:
        return 0
    if not mesh.animated and not binding.mesh.animated and np.array_equal(mesh.vertices, binding.mesh.vertices):
        return 0
    H = binding.body_height
    h, was = source_clearance(binding, frames)
    near = np.abs(h) < FADE * H
    near &= np.isfinite(targets[..., 0])
    rows, joints = np.nonzero(near)
    if rows.size == 0:
        return 0
    at = frames[rows]
    points = targets[rows, joints]
    sd, normal, tri, bary = _closest(mesh, (FADE + C.CLEARANCE_MISMATCH_FADE_FRACTION) * H, points, at)
    found = tri >= 0
    want = h[rows, joints]
    miss = np.where(found, want - sd, 0.0)
    weight = _ramp(np.abs(want), FULL * H, FADE * H) * \
        _ramp(np.abs(miss), C.CLEARANCE_MISMATCH_FULL_FRACTION * H, C.CLEARANCE_MISMATCH_FADE_FRACTION * H)
    # The same piece of surface as in the source: the closest point now, taken back to the bind-time
    # surface, lies near the source's closest point (a stone moved away leaves the ground, or
    # another stone, closest: not this correction's to decide).
    drift = np.full(rows.size, np.inf)
    drift[found] = np.linalg.norm(_on(binding.mesh, tri[found], bary[found], at[found]) - was[rows[found], joints[found]],
                                  axis=1)
    weight *= _ramp(drift, C.CLEARANCE_DRIFT_FULL_FRACTION * H, C.CLEARANCE_DRIFT_FADE_FRACTION * H)
    weight[~found] = 0.0
    # Away from the surface along the line from the closest point (a face's normal, the direction
    # from an edge or a corner), or the pseudo-normal for a point on the surface itself.
    away = normal
    off = found & (np.abs(sd) > 1e-9 * H)
    away[off] = (points[off] - _on(mesh, tri[off], bary[off], at[off])) / sd[off, None]
    targets[rows, joints] = points + (weight * miss)[:, None] * away
    return int(np.count_nonzero(weight))


def hold_off_surfaces(binding, mesh, frames, targets, shift):
    """``shift`` (n,J,3) without its part towards a surface, for the joints near one in the source.

    The move of the targets ``targets`` (n,J,3) of ``frames`` by changed bone lengths
    (``Rig._morphology_shift``: a character with longer legs stands taller) knows nothing of the
    surfaces round a joint: a head 13 cm under a beam was lifted 17 cm by legs 20 % longer, 4 cm
    into the beam, where the same beam lowered 17 cm is ducked under with 10 cm to spare. So, for a
    joint whose source position lies within ``FADE`` body heights of the bind-time surface (fully;
    fading out by twice that, so the neck below the head is held too), the component of its shift
    towards the nearest surface of ``mesh`` now (from its unshifted target) is taken out: the joint
    keeps its Eq. 2 distance from that surface, and the ducking stage bends the body to fit (7 cm
    left under that beam). Only surfaces above the joint count (weighted by how far up they lie,
    +z): the shift towards the floor under a shorter character is what it is for. A shift away
    from the surface, or along it, is kept. Returns the new shift."""
    H = binding.body_height
    h, was = source_clearance(binding, frames, 2 * FADE)
    # Only joints whose nearest surface in the source lay above them are asked about (a foot on the
    # floor, most of the joints near a surface, is not searched again on every call).
    above = was[..., 2] > binding.motion[frames][..., 2]
    near = above & (np.abs(h) < 2 * FADE * H) & np.isfinite(targets[..., 0]) & \
        (np.einsum("fjd,fjd->fj", shift, shift) > 0.0)
    rows, joints = np.nonzero(near)
    if rows.size == 0:
        return shift
    at = frames[rows]
    points = targets[rows, joints]
    sd, normal, tri, bary = _closest(mesh, 2 * FADE * H, points, at)
    found = tri >= 0
    towards = -normal
    off = found & (np.abs(sd) > 1e-9 * H)
    towards[off] = (_on(mesh, tri[off], bary[off], at[off]) - points[off]) / np.abs(sd[off, None])
    move = shift[rows, joints]
    into = np.einsum("pd,pd->p", move, towards)
    # Overhead surfaces only: a joint nearing the floor the character stands on, as a shorter
    # character's knees and hips do, is what the shift is for.
    weight = _ramp(np.abs(h[rows, joints]), FADE * H, 2 * FADE * H) * (into > 0.0) * found * \
        np.clip(towards[:, 2], 0.0, 1.0)
    out = shift.copy()
    out[rows, joints] = move - (weight * into)[:, None] * towards
    return out
