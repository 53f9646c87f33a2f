"""Nearest hits of many rays on a triangle mesh, batched in numpy.

Each ray is clipped to the mesh's bounding box and sampled every ``step``; a sample looks up
the triangles whose bounding boxes, grown by half a step, overlap its cell (cells a step wide). A hit
point of a triangle lies within half a step of a sample, so every triangle a ray hits is
found at some sample, and the samples are visited front to back in chunks: once a ray's best
hit lies before the end of the chunk just searched, nothing farther can beat it. The ray
test itself is Möller and Trumbore's (``triangles.ray_hits``).
"""

from __future__ import annotations

import numpy as np

from .spatial import expand_ranges
from .triangles import ray_hits

#: Samples along every ray looked up per round.
CHUNK_SAMPLES = 8
#: Rays marched together (bounded memory).
CHUNK_RAYS = 65536


def ray_triangle_distance(o, d, a, b, c, eps=1e-12):
    """(N,) distance along each ray o + t d (d unit, all (N,3)) to its triangle (a, b, c),
    inf where it misses (``triangles.ray_hits``)."""
    return ray_hits(o, d, a, b, c, eps)


class RayCaster:
    """Nearest hits of rays on the triangles ``triangles (T,3)`` of ``vertices (V,3)``
    (``valid`` (T,) bool: the triangles to hit; default all).

    step : the sampling step along the rays (default 1/32 of the mesh's diagonal: on a chair
        of 144 triangles 1.2 µs a ray, against 4.7 µs at 1/4 of it).
    """

    def __init__(self, vertices, triangles, valid=None, step=None):
        vertices = np.asarray(vertices, float)
        triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
        self.ids = np.arange(len(triangles)) if valid is None else np.flatnonzero(valid)
        corners = vertices[triangles[self.ids]]
        self.a, self.b, self.c = corners[:, 0], corners[:, 1], corners[:, 2]
        if not len(self.ids):
            self.step, self.grid, self.lo, self.hi = 1.0, None, np.zeros(3), np.zeros(3)
            return
        lo, hi = corners.min(axis=1), corners.max(axis=1)
        diag = float(np.linalg.norm(hi.max(axis=0) - lo.min(axis=0)))
        if step is None:
            step = diag / 32.0
        self.step = max(float(step), diag * 1e-6, 1e-12)
        grow = 0.5 * self.step * (1.0 + 1e-9)
        self.lo, self.hi = lo.min(axis=0) - grow, hi.max(axis=0) + grow
        # Cells one step wide; each lists the triangles whose grown box overlaps it (a sample
        # then takes its cell's triangles as they are: the ray test sorts them out, cheaper
        # than testing each box).
        self.shape = np.floor((self.hi - self.lo) / self.step).astype(np.int64) + 1
        i0 = np.floor((lo - grow - self.lo) / self.step).astype(np.int64)
        n = np.floor((hi + grow - self.lo) / self.step).astype(np.int64) - i0 + 1
        box, local = expand_ranges(np.zeros(len(lo), np.int64), n.prod(axis=1))
        nb = n[box]
        idx = i0[box] + np.stack([local // (nb[:, 2] * nb[:, 1]), (local // nb[:, 2]) % nb[:, 1], local % nb[:, 2]], 1)
        keys = self._key(idx)
        order = np.argsort(keys, kind="stable")
        self._keys, self._tris = keys[order], box[order]
        self.grid = True

    @classmethod
    def of(cls, mesh):
        """The caster of a static ``mesh`` (a ``TriMesh``), kept with the mesh as its colliders
        are (``Collider.of``): the contact checks and the limb avoidance of one bake share it."""
        if mesh.animated:
            raise ValueError("RayCaster.of takes a static mesh")
        caster = mesh.__dict__.get("_ray_caster")
        if caster is None:
            caster = mesh.__dict__["_ray_caster"] = cls(mesh.frame(0), mesh.triangles, mesh.valid)
        return caster

    def _key(self, idx):
        return (idx[:, 0] * self.shape[1] + idx[:, 1]) * self.shape[2] + idx[:, 2]

    def _lookup(self, points):
        """Pairs (point, triangle) of the triangles listed in each point's cell."""
        idx = np.floor((points - self.lo) / self.step).astype(np.int64)
        ok = np.all((idx >= 0) & (idx < self.shape), axis=1)
        keys = self._key(np.where(ok[:, None], idx, 0))
        start = np.searchsorted(self._keys, keys, side="left")
        stop = np.where(ok, np.searchsorted(self._keys, keys, side="right"), start)
        pt, pos = expand_ranges(start, stop - start)
        return pt, self._tris[pos]

    def cast(self, origins, directions):
        """``distance (N,)`` to the nearest hit of each ray (inf where none) and the hit
        ``triangle (N,)`` (an index into the mesh's triangles; -1 where none). Directions
        need not be unit: distances are along the unit direction."""
        o = np.asarray(origins, float).reshape(-1, 3)
        d = np.asarray(directions, float).reshape(-1, 3)
        d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-300)
        N = len(o)
        best, tri = np.full(N, np.inf), np.full(N, -1)
        if self.grid is None or not N:
            return best, tri
        for s in range(0, N, CHUNK_RAYS):
            best[s:s + CHUNK_RAYS], tri[s:s + CHUNK_RAYS] = self._cast(o[s:s + CHUNK_RAYS], d[s:s + CHUNK_RAYS])
        return best, tri

    def _cast(self, o, d):
        N = len(o)
        # The part of each ray inside the bounding box (slabs).
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / d
            t1, t2 = (self.lo - o) * inv, (self.hi - o) * inv
        near = np.nanmax(np.where(np.isnan(t1), -np.inf, np.minimum(t1, t2)), axis=1)
        far = np.nanmin(np.where(np.isnan(t1), np.inf, np.maximum(t1, t2)), axis=1)
        inside = np.all((o >= self.lo) & (o <= self.hi), axis=1)
        near = np.where(inside, 0.0, np.maximum(near, 0.0))
        best, tri = np.full(N, np.inf), np.full(N, -1)
        live = np.flatnonzero(far >= near)
        k = 0
        while live.size:
            ts = near[live, None] + self.step * (k + np.arange(CHUNK_SAMPLES))[None]   # (n, C)
            end = ts[:, -1] + 0.5 * self.step
            on = ts <= far[live, None] + 0.5 * self.step
            ray = np.repeat(live, CHUNK_SAMPLES).reshape(len(live), -1)[on]
            pts = o[ray] + ts[on][:, None] * d[ray]
            at, box = self._lookup(pts)
            if at.size:
                pair = np.unique(ray[at] * len(self.ids) + box)
                r, b = pair // len(self.ids), pair % len(self.ids)
                t = ray_triangle_distance(o[r], d[r], self.a[b], self.b[b], self.c[b])
                better = t < best[r]
                if better.any():
                    # Per ray the smallest (ties: the lowest triangle) among this round's hits.
                    order = np.lexsort((b[better], t[better], r[better]))
                    rr, tt, bb = r[better][order], t[better][order], b[better][order]
                    first = np.r_[True, rr[1:] != rr[:-1]]
                    upd = tt[first] < best[rr[first]]
                    best[rr[first][upd]], tri[rr[first][upd]] = tt[first][upd], bb[first][upd]
            # Done: a hit before the end of what was searched, or past the box.
            done = (best[live] <= end) | (ts[:, -1] + self.step > far[live] + 0.5 * self.step)
            live = live[~done]
            k += CHUNK_SAMPLES
        found = tri >= 0
        tri[found] = self.ids[tri[found]]
        return best, tri
