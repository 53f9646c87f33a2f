"""Unrolling the carpet along a path and onto a terrain (thesis chapter 3, §6 and the
footstep-spacing section).

A descriptor at canonical (s, v) (s along the clip's heading, v across it) is placed at
the path's point at arc length s plus its offset v turned by the path's heading there
(c' = z'_c + R v_c), then projected vertically onto the terrain. The projection stretches
the carpet on slopes and the bend squeezes its inner side, which would change the
footstep spacing; so the carpet is relaxed as cloth (its Delaunay edges are soft distance
constraints acting only beyond ±15 % of their rest length) and projected again, three
times; the relaxation is solved globally rather than by particle sweeps (``_relax``). Every character's carpet is unrolled and relaxed at once, on a batch axis.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import splu
from scipy.spatial import cKDTree

from ..errors import InputError

#: Soft distance constraints act beyond this fraction of the rest length (thesis: 15 %).
STRETCH = 0.15
#: Projection / relaxation rounds, at most. The thesis alternates 3; here the re-projection
#: after the third still leaves edges 17 % stretched on a 35 degree ramp (measured), so the
#: rounds go on until every edge is within ``STRETCH`` + ``SLACK`` of its rest length.
ROUNDS = 12
SLACK = 0.005
#: The heading is taken over ± this many body heights of the path (smooths polyline corners).
HEADING_WINDOW = 0.1


class Path:
    """A polyline (P,3) evaluated by arc length; straight on beyond both ends."""

    def __init__(self, points, name="path"):
        p = np.asarray(points, dtype=float)
        if p.ndim != 2 or p.shape[1] != 3 or len(p) < 2:
            raise InputError(f"{name} must be a (P,3) polyline with at least 2 points, got shape {p.shape}")
        if not np.all(np.isfinite(p)):
            raise InputError(f"{name} has NaN or inf coordinates")
        seg = np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1)
        keep = np.r_[True, seg > 1e-9 * max(1.0, float(np.abs(p).max()))]
        p = p[keep]
        if len(p) < 2:
            raise InputError(f"{name} has zero length: draw a path that goes somewhere")
        self.points = p
        self.name = name
        self.cumulative = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))]
        self.length = float(self.cumulative[-1])

    def at(self, u):
        """(n,3) points at horizontal arc lengths ``u`` (n,), extrapolated beyond the ends."""
        u = np.asarray(u, dtype=float)
        k = np.clip(np.searchsorted(self.cumulative, u, side="right") - 1, 0, len(self.points) - 2)
        a, b = self.points[k], self.points[k + 1]
        t = (u - self.cumulative[k]) / (self.cumulative[k + 1] - self.cumulative[k])
        return a + t[..., None] * (b - a)

    def heading(self, u, window):
        """(n,) heading angle (radians about z) at ``u``, over ± ``window`` of arc length."""
        d = self.at(np.asarray(u, float) + window) - self.at(np.asarray(u, float) - window)
        return np.arctan2(d[..., 1], d[..., 0])


class Terrain:
    """Vertical projection onto a TriMesh (thesis: barycentric test per triangle in the
    ground plane, boxes culling the triangles). Where a vertical line meets several
    surfaces (a bridge over a valley), the one nearest a given height is taken."""

    def __init__(self, mesh):
        v = mesh.frame(0)
        t = mesh.triangles
        a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
        area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
        scale = max(float(np.ptp(v[:, :2], axis=0).max()), 1e-12)
        ok = np.abs(area) > 1e-12 * scale * scale                 # walls and slivers seen from above
        if not ok.any():
            raise InputError("the terrain has no surface seen from above (every triangle is vertical): "
                             "give a ground mesh")
        self.a, self.b, self.c, self.area = a[ok], b[ok], c[ok], area[ok]
        lo = np.minimum(np.minimum(self.a, self.b), self.c)[:, :2]
        hi = np.maximum(np.maximum(self.a, self.b), self.c)[:, :2]
        self.bounds = (lo.min(axis=0), hi.max(axis=0))
        # A dense 2-D grid of cells half a triangle wide and half a triangle deep (x and y sized
        # apart: square cells sized by the long side of triangles three times as deep as wide
        # made each height 2.6x slower); each triangle listed in the cells its box covers (CSR),
        # so a point's candidates are one slice away. Every triangle under a point is among them
        # in any grid, in index order, so the cells change nothing but the time (test).
        ext = np.median(hi - lo, axis=0)
        span = self.bounds[1] - self.bounds[0]
        cell = np.maximum(np.maximum(0.5 * ext, float(span.max()) / 8192.0), 1e-12)
        while np.prod(np.floor(span / cell) + 1) > 8 * len(lo) + 4096:
            cell = cell * 1.5
        self.cell, self.origin = cell, self.bounds[0]
        self.shape = (np.floor(span / cell) + 1).astype(np.int64)
        i0 = np.floor((lo - self.origin) / cell).astype(np.int64)
        i1 = np.floor((hi - self.origin) / cell).astype(np.int64)
        n = i1 - i0 + 1
        count = n[:, 0] * n[:, 1]
        tri = np.repeat(np.arange(len(lo)), count)
        local = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        cx = i0[tri, 0] + local // n[tri, 1]
        cy = i0[tri, 1] + local % n[tri, 1]
        key = cx * self.shape[1] + cy
        order = np.argsort(key, kind="stable")
        self.cell_triangles = tri[order]
        self.indptr = np.zeros(int(self.shape.prod()) + 1, np.int64)
        np.cumsum(np.bincount(key, minlength=int(self.shape.prod())), out=self.indptr[1:])

    def heights(self, xy, near, gradient=False):
        """(n,) terrain heights under ``xy`` (n,2), the hit nearest ``near`` (n,) in height,
        and (n,) bool whether there is any; with ``gradient`` also (n,2) the slope (dz/dx, dz/dy)
        of the triangle hit (0 where none)."""
        xy = np.asarray(xy, float).reshape(-1, 2)
        n = len(xy)
        idx = np.floor((xy - self.origin) / self.cell).astype(np.int64)
        inside = np.all((idx >= 0) & (idx < self.shape), axis=1)
        key = np.where(inside, idx[:, 0] * self.shape[1] + idx[:, 1], 0)
        start = self.indptr[key]
        count = np.where(inside, self.indptr[key + 1] - start, 0)
        pt = np.repeat(np.arange(n), count)
        tri = self.cell_triangles[np.repeat(start, count) + np.arange(int(count.sum()))
                                  - np.repeat(np.cumsum(count) - count, count)]
        p = xy[pt]
        a, b, c = self.a[tri], self.b[tri], self.c[tri]
        w1 = ((b[:, 0] - p[:, 0]) * (c[:, 1] - p[:, 1]) - (b[:, 1] - p[:, 1]) * (c[:, 0] - p[:, 0])) / self.area[tri]
        w2 = ((c[:, 0] - p[:, 0]) * (a[:, 1] - p[:, 1]) - (c[:, 1] - p[:, 1]) * (a[:, 0] - p[:, 0])) / self.area[tri]
        w3 = 1.0 - w1 - w2
        eps = -1e-9
        hit = (w1 >= eps) & (w2 >= eps) & (w3 >= eps)
        pt, tri, z = pt[hit], tri[hit], (w1 * a[:, 2] + w2 * b[:, 2] + w3 * c[:, 2])[hit]
        out = np.full(n, np.nan)
        which = np.zeros(n, np.int64)
        if len(pt):
            hits = np.bincount(pt, minlength=n)
            one = hits[pt] == 1
            out[pt[one]], which[pt[one]] = z[one], tri[one]
            if not one.all():                      # several surfaces (or a shared edge): the nearest
                pt, tri, z = pt[~one], tri[~one], z[~one]
                gap = np.abs(z - np.asarray(near, float).reshape(-1)[pt])
                order = np.lexsort((gap, pt))
                pt, tri, z = pt[order], tri[order], z[order]
                first = np.r_[True, pt[1:] != pt[:-1]]
                out[pt[first]], which[pt[first]] = z[first], tri[first]
        found = ~np.isnan(out)
        if not gradient:
            return out, found
        a, b, c = self.a[which], self.b[which], self.c[which]
        normal = np.cross(b - a, c - a)
        slope = -normal[:, :2] / np.where(np.abs(normal[:, 2:]) > 0, normal[:, 2:], 1.0)
        return out, found, np.where(found[:, None], slope, 0.0)


def check_paths(paths, terrain):
    """``Path`` per (P,3) polyline; a path point with no terrain under or over it is an error."""
    if isinstance(paths, np.ndarray) and paths.ndim == 2:
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise InputError("no paths: give one (P,3) polyline per character")
    out = []
    for c, p in enumerate(paths):
        path = p if isinstance(p, Path) else Path(p, f"path {c}")
        # Check the path every few centimetres, not only at its points.
        u = np.linspace(0.0, path.length, max(2, int(np.ceil(path.length / 0.05)) + 1))
        at = path.at(u)
        _, hit = terrain.heights(at[:, :2], at[:, 2])
        if not hit.all():
            k = int(np.flatnonzero(~hit)[0])
            raise InputError(f"{path.name} leaves the terrain at ({at[k, 0]:.3g}, {at[k, 1]:.3g}), {u[k]:.3g} along "
                             "it: keep the path over the terrain mesh")
        out.append(path)
    return out


def unroll(points, paths, starts, terrain, body_height, edges=None, rest=None, rounds=ROUNDS):
    """Each character's carpet unrolled along its path and onto the terrain.

    points : (N,2) canonical descriptors (x along the heading, y across).
    paths : C ``Path``. starts : (C,) canonical x that maps to each path's start.
    edges : (E,2) distance constraints and rest (E,) their lengths (None: no relaxation).
    Returns ``positions (C,N,3)``, ``rotations (C,N,3,3)`` (the yaw each descriptor turned by),
    ``stretch (C,E)`` each edge's length over its rest length after the last round.
    """
    C = len(paths)
    N = len(points)
    pos = np.empty((C, N, 3))
    yaw = np.empty((C, N))
    level = np.empty((C, N))
    for c, path in enumerate(paths):
        u = points[:, 0] - starts[c]
        centre = path.at(u)
        yaw[c] = path.heading(u, HEADING_WINDOW * body_height)
        cs, sn = np.cos(yaw[c]), np.sin(yaw[c])
        v = points[:, 1]
        pos[c, :, 0] = centre[:, 0] - sn * v
        pos[c, :, 1] = centre[:, 1] + cs * v
        level[c] = centre[:, 2]
    hit = _project(pos, level, terrain)
    stretch = np.ones((C, 0))
    if edges is not None and len(edges):
        solve = laplacian_solver(edges, N)
        anchor = np.argmin(np.abs(points[:, 0][None] - np.asarray(starts, float)[:, None]) * 4.0
                           + np.abs(points[:, 1])[None], axis=1)
        # Edges off the terrain's edge (their heights borrowed) do not keep the rounds going.
        judged = hit[:, edges[:, 0]] & hit[:, edges[:, 1]]
        for _ in range(rounds):
            stretch = np.linalg.norm(pos[:, edges[:, 1]] - pos[:, edges[:, 0]], axis=-1) / rest
            if np.all((np.abs(stretch - 1.0) <= STRETCH + SLACK) | ~judged):
                break
            _relax(pos, edges, rest, solve, anchor)
            _project(pos, level, terrain)
        stretch = np.linalg.norm(pos[:, edges[:, 1]] - pos[:, edges[:, 0]], axis=-1) / rest
    rot = np.zeros((C, N, 3, 3))
    cs, sn = np.cos(yaw), np.sin(yaw)
    rot[..., 0, 0], rot[..., 0, 1], rot[..., 1, 0], rot[..., 1, 1], rot[..., 2, 2] = cs, -sn, sn, cs, 1.0
    return pos, rot, stretch


def _project(pos, level, terrain):
    """Heights of ``pos`` (C,N,3) onto the terrain, in place; returns (C,N) which hit it. A
    descriptor beyond the terrain's edge (the carpet is wider than a path along the edge, or
    runs on past its end) takes its nearest projected neighbour's height."""
    C, N, _ = pos.shape
    z, hit = terrain.heights(pos[..., :2].reshape(-1, 2), level.reshape(-1))
    z, hit = z.reshape(C, N), hit.reshape(C, N)
    for c in np.flatnonzero(~hit.all(axis=1)).tolist():
        good = np.flatnonzero(hit[c])
        if not good.size:
            raise InputError("a carpet lies entirely off the terrain: keep the paths over the terrain mesh")
        bad = np.flatnonzero(~hit[c])
        z[c, bad] = z[c, good[cKDTree(pos[c, good, :2]).query(pos[c, bad, :2])[1]]]
    pos[..., 2] = z
    return hit


def _relax(pos, edges, rest, solve, anchor):
    """Soft distance constraints (thesis): every edge stretched or squeezed beyond
    ±``STRETCH`` of its rest length is given that bound as its goal, the others their
    current length, and the ground-plane positions are fitted to the goal edge vectors by
    least squares, all at once (``solve``: the factorised graph Laplacian). The thesis' particle
    sweeps move a correction one edge per sweep; a carpet on a long slope needs it carried
    along its whole length (measured: on a 35 degree ramp, 3 rounds of 10 sweeps left edges
    35 % stretched, 30 rounds of 50 still 19 %). Every character at once; each carpet keeps
    the descriptor ``anchor[c]`` (where its walk starts) in place."""
    C, N, _ = pos.shape
    a, b = edges[:, 0], edges[:, 1]
    d = pos[:, b] - pos[:, a]                                                        # (C,E,3)
    length = np.sqrt(np.einsum("cek,cek->ce", d, d))
    goal = np.clip(length, (1.0 - STRETCH) * rest, (1.0 + STRETCH) * rest)
    target = d[..., :2] * (goal / np.maximum(length, 1e-300))[..., None]              # (C,E,2)
    rhs = np.zeros((C, N, 2))
    for k in range(2):
        flat = np.arange(C)[:, None] * N
        idx = np.concatenate([flat + b, flat + a], axis=1).ravel()
        val = np.concatenate([target[..., k], -target[..., k]], axis=1).ravel()
        rhs[..., k] = np.bincount(idx, weights=val, minlength=C * N).reshape(C, N)
    rhs += _REGULAR * pos[..., :2]
    xy = solve(rhs.transpose(1, 0, 2).reshape(N, 2 * C)).reshape(N, C, 2).transpose(1, 0, 2)
    rows = np.arange(C)
    xy += (pos[rows, anchor, :2] - xy[rows, anchor])[:, None]
    pos[..., :2] = xy


#: Weight tying each descriptor to where it is (keeps the fit's system regular; each part of a
#: carpet that the kept edges leave unconnected stays where it is).
_REGULAR = 1e-6


def laplacian_solver(edges, count):
    """``solve(rhs (N,k)) -> (N,k)`` for the carpet's graph Laplacian plus ``_REGULAR``."""
    a, b = edges[:, 0], edges[:, 1]
    ones = np.ones(len(edges))
    A = sparse.coo_matrix((np.r_[ones, ones, -ones, -ones], (np.r_[a, b, a, b], np.r_[a, b, b, a])),
                          shape=(count, count)).tocsc()
    A = A + _REGULAR * sparse.identity(count, format="csc")
    lu = splu(A)
    return lu.solve
