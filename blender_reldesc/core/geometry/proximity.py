"""Proximity points (SCA 2013 §5) and closest-point queries for collisions."""

from __future__ import annotations

import copy
import itertools

import numpy as np

from .. import constants as C
from .triangles import (closest_point_on_triangles, dot, face_normals, normalize, project_to_coverage,
                        segments_hit_triangles)
from .spatial import BoxGrid, BoxTree, expand_ranges, z_order


class CoverageIndex:
    """Finds, for query points, every triangle whose coverage contains them.

    The coverage of a triangle is the prism bounded by the triangle and the
    surfaces swept by its vertex normals (paper Fig. 4). It is capped at
    ``max_distance`` from the surface: a point ``x(b) + h n(b)`` of the capped
    coverage is a convex combination of the segments ``[x_k, x_k + H n_k]``,
    so any box around those six points bounds it.

    On a finely cut sloping surface the coverage of one triangle is a thin
    column leaning with the slope, and its world-axis box is many times wider
    than the column: a point would fall in thousands of boxes. So boxes are
    taken in the surface's own frame. Triangles are grouped into patches of
    ``PATCH`` neighbours (Z-order of their centres); each patch gets a box in
    the frame of its mean normal, cut into slabs of height about as tall as the
    patch is wide, whose world boxes go into a bounding-volume hierarchy. A query finds the patches, then
    tests each of their triangles against its box in the triangle's own frame,
    and only the triangles left go through the Newton projection. The work per
    query grows with the patches near a point, not with how fine the mesh is.

    Parameters
    ----------
    vertices, normals : (V,3) float, positions and unit vertex normals.
    triangles : (T,3) int; valid : (T,) bool (degenerate triangles are skipped).
    max_distance : float, largest joint-to-surface distance that counts.
    """

    #: Triangles per patch.
    PATCH = 16
    #: At most this many slabs of height per patch (each about as tall as the patch is wide).
    MAX_SLABS = 8
    #: (point, triangle) pairs tested at a time.
    PAIRS = 1 << 19

    def __init__(self, vertices, normals, triangles, valid, max_distance):
        self.vertices, self.normals, self.triangles = vertices, normals, triangles
        self.max_distance = max_distance
        tri_ids = np.flatnonzero(valid)
        # Patches: consecutive triangles along a Z-order curve of their centres.
        centre = vertices[triangles[tri_ids]].mean(axis=1)
        lo = centre.min(axis=0)
        span = max(float((centre.max(axis=0) - lo).max()), 1e-300)
        cells = np.clip(((centre - lo) / span * 1023.0).astype(np.int64), 0, 1023)
        self.tri_ids = tri_ids = tri_ids[np.argsort(z_order(cells.T), kind="stable")]
        tri = triangles[tri_ids]
        fn, _ = face_normals(vertices, tri)
        corner_n = normals[tri]                                    # (T,3,3)
        # |n(b)| >= min_k n_k . n_f, so h <= max_distance / that bound.
        cos = np.clip(np.min(np.matmul(corner_n, fn[:, :, None])[..., 0], axis=1), 0.2, 1.0)
        reach = max_distance / cos
        corners = vertices[tri]
        # The six points, point-major (6,T,3): reductions over them run along the first axis.
        pts = np.concatenate([corners.transpose(1, 0, 2),
                              (corners + reach[:, None, None] * corner_n).transpose(1, 0, 2)])
        # Pad by the coverage test's own slack, so a joint exactly above an
        # edge (common on grids) is not lost to rounding at a box boundary.
        # Each triangle's box in its own frame (first edge, in-plane normal to it, face normal).
        first = corners[:, 0]
        e1 = normalize(corners[:, 1] - first)
        self.origin = first
        self.frame = np.stack([e1, np.cross(fn, e1), fn], axis=1)            # (T,3,3) rows
        local = np.matmul(self.frame, (pts - first)[..., None])[..., 0]
        self.local_lo, self.local_hi = local.min(axis=0), local.max(axis=0)
        del local
        # (2 x the largest side in its own frame bounds the largest side of its world box.)
        pad = 2.0 * C.BARY_TOLERANCE * (self.local_hi - self.local_lo).max(axis=1) + 1e-12 * max_distance
        self.local_lo -= pad[:, None]
        self.local_hi += pad[:, None]
        # Each patch's box in the frame of its mean normal, cut into slabs of height. The last
        # patch is filled up with copies of the last triangle (which change no bound).
        T = len(tri_ids)
        K = self.PATCH
        starts = np.arange(0, T, K)
        self.patch_start = starts
        self.patch_count = np.diff(np.r_[starts, T])
        fill = np.r_[np.arange(T), np.full(len(starts) * K - T, T - 1)]
        pn = fn[fill].reshape(-1, K, 3).sum(axis=1)
        flat = np.linalg.norm(pn, axis=1) < 1e-6 * self.patch_count     # normals that cancel (a thin wall)
        pn = normalize(np.where(flat[:, None], [[0.0, 0.0, 1.0]], pn))   # any frame bounds the patch
        helper = np.where(np.abs(pn[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        u = normalize(np.cross(pn, helper))
        pframe = np.stack([u, np.cross(pn, u), pn], axis=1)                  # (Pt,3,3)
        of = np.repeat(np.arange(len(starts)), K)                           # patch of each filled slot
        plocal = np.matmul(pframe[of], pts[:, fill][..., None])[..., 0]      # (6,Pt*K,3), about the origin
        # Each triangle's box in its patch's frame: a point found in a patch is tested against
        # its triangles there by comparisons alone (slots filled up hold no point).
        tlo = (plocal.min(axis=0) - pad[fill, None]).reshape(-1, K, 3)
        thi = (plocal.max(axis=0) + pad[fill, None]).reshape(-1, K, 3)
        plo, phi = tlo.min(axis=1), thi.max(axis=1)
        tlo.reshape(-1, 3)[T:] = np.inf
        self.tri_lo, self.tri_hi = tlo, thi
        del plocal, pts
        self.patch_frame, self.patch_lo, self.patch_hi = pframe, plo, phi
        width = np.maximum((phi - plo)[:, :2].max(axis=1), 1e-300)
        slabs = np.clip(np.ceil((phi - plo)[:, 2] / width), 1, self.MAX_SLABS).astype(np.int64)
        owner, part = expand_ranges(np.zeros(len(starts), np.int64), slabs)
        z = plo[owner, 2:] + (part[:, None] + np.arange(2)) / slabs[owner, None] * (phi - plo)[owner, 2:]
        box_lo = np.stack([plo[owner, 0], plo[owner, 1], z[:, 0]], axis=1)
        box_hi = np.stack([phi[owner, 0], phi[owner, 1], z[:, 1]], axis=1)
        # The world box of an oriented box: its centre turned, its half sides through |R|.
        rot = pframe[owner].transpose(0, 2, 1)                               # local -> world
        centre = np.matmul(rot, (0.5 * (box_lo + box_hi))[..., None])[..., 0]
        half = np.matmul(np.abs(rot), (0.5 * (box_hi - box_lo))[..., None])[..., 0]
        half += 1e-12 * max_distance + 4 * np.finfo(float).eps * np.abs(centre)   # rounding of the turn
        self._slabs = (centre - half, centre + half)
        self.grid = BoxGrid(*self._slabs)
        self._tree = None
        self.slab_owner = owner

    #: A query is answered by the uniform grid of slabs while its points' cells list at most this
    #: many slabs a point (on average), else by the box tree. On a floor or a terrain the grid
    #: answers 10-15 times faster (a Rigify bind: 164k points, 1.85 s -> 0.15 s, the same pairs);
    #: slabs of very different sizes (a fine prop on a large set) crowd its cells.
    GRID_BUDGET = 48

    @property
    def tree(self):
        """The bounding-volume hierarchy of the slabs (built when a query first needs it)."""
        if self._tree is None:
            self._tree = BoxTree(*self._slabs)
        return self._tree

    def _candidates(self, points):
        """(point, triangle slot) pairs whose boxes (patch's, then triangle's) hold the point."""
        found = self.grid.query(points, budget=self.GRID_BUDGET)
        pt, slab = found if found is not None else self.tree.query(points)
        patch = self.slab_owner[slab]
        if not len(pt):
            return pt, patch
        key = np.unique(pt * len(self.patch_start) + patch)           # a point in two slabs of a patch
        pt, patch = key // len(self.patch_start), key % len(self.patch_start)
        local = np.einsum("kij,kj->ki", self.patch_frame[patch], points[pt])
        fits = np.all((local >= self.patch_lo[patch]) & (local <= self.patch_hi[patch]), axis=1)
        pt, patch, local = pt[fits], patch[fits], local[fits]
        # The patch's triangles by their boxes in the patch's frame (a few of its 16 hold the
        # point), in bounded parts; then the survivors' boxes in their own frames.
        rows, slots = [], []
        step = max(1, self.PAIRS // self.PATCH)
        for i in range(0, len(pt), step):
            lp, pa = local[i:i + step, None], patch[i:i + step]
            r, k = np.nonzero(np.all((lp >= self.tri_lo[pa]) & (lp <= self.tri_hi[pa]), axis=2))
            rows.append(r + i)
            slots.append(self.PATCH * pa[r] + k)
        row, slot = np.concatenate(rows), np.concatenate(slots)
        pt = pt[row]
        local = np.einsum("kij,kj->ki", self.frame[slot], points[pt] - self.origin[slot])
        fits = np.all((local >= self.local_lo[slot]) & (local <= self.local_hi[slot]), axis=1)
        return pt[fits], slot[fits]

    def query(self, points, tolerance):
        """Proximity points of ``points`` (P,3).

        Returns ``point (K,) int, triangle (K,) int, bary (K,3), distance (K,)``:
        one row per (point, triangle) whose capped coverage holds the point,
        sorted by point. ``distance`` is the joint-to-proximity-point length.
        """
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        pt, slot = self._candidates(points)
        tri = self.tri_ids[slot]
        order = np.lexsort((tri, pt))
        pt, tri = pt[order], tri[order]
        corners = self.vertices[self.triangles[tri]]
        normals = self.normals[self.triangles[tri]]
        bary, _, inside = project_to_coverage(points[pt], corners, normals, tolerance)
        foot = np.einsum("kc,kcd->kd", bary, corners)
        dist = np.linalg.norm(points[pt] - foot, axis=-1)
        keep = inside & (dist <= self.max_distance)
        return pt[keep], tri[keep], bary[keep], dist[keep]


class Collider:
    """Signed distance of points to a mesh within a band around its surface.

    The sign is taken against the interpolated vertex normal at the closest
    point, which is well defined at edges and vertices (a pseudo-normal).

    The closest triangle is searched in a bounding-volume hierarchy of the
    triangles, first within ``band / SEARCH_SHRINK`` of each point; a point that
    found a triangle only beyond that radius searches again within its distance,
    one that found nothing searches ``SEARCH_GROWTH`` times farther, up to the whole band. A triangle closer than the best one
    found has its box within that distance too, so the result is exact, while a
    point near a finely cut surface tests the few triangles around it rather
    than every triangle in the band.
    """

    #: The first search radius is the band divided by this; a point that finds nothing
    #: searches again this many times farther (a point at distance d from a finely cut
    #: surface first meets the triangles within sqrt(GROWTH^2 - 1) d of its foot).
    SEARCH_SHRINK = 8.0
    SEARCH_GROWTH = 1.25
    #: Up to this many points are searched within the whole band in one round.
    FEW = 256
    #: Up to this many points with distance bounds are searched by one k-d tree ball query.
    BALL_POINTS = 32

    def __init__(self, vertices, normals, triangles, valid, band):
        self.vertices, self.normals, self.triangles = vertices, normals, triangles
        self.band = float(band)
        self.tri_ids = np.flatnonzero(valid)
        a, b, c = (vertices[triangles[self.tri_ids, k]] for k in range(3))
        self._boxes = np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)
        self.tree = BoxTree(*self._boxes)
        self._cells = None
        self._shared = {}                              # the k-d tree, shared by ``with_band`` copies

    #: Bands a static mesh keeps colliders for (``of``); they share one surface's trees.
    KEPT_BANDS = 8

    @classmethod
    def of(cls, mesh, band, f=0):
        """The collider of ``mesh`` (a ``TriMesh``) at frame f within ``band``.

        A static mesh keeps its colliders, and those of other bands share its trees: a bake's
        solver, its contact check and each later bake's check of the bound surface built the
        same box tree and k-d tree (13 ms each on a 10k-triangle floor) and differ only in
        band. An animated mesh gets a new one (the caller keeps what it needs)."""
        if mesh.animated:
            return cls(mesh.frame(f), mesh.normals(f), mesh.triangles, mesh.valid, band)
        kept = mesh.__dict__.setdefault("_colliders", {})
        band = float(band)
        c = kept.get(band)
        if c is None:
            base = next(iter(kept.values()), None)
            c = cls(mesh.frame(0), mesh.normals(0), mesh.triangles, mesh.valid, band) if base is None \
                else base.with_band(band)
            if len(kept) >= cls.KEPT_BANDS:                # the first band stays: the others share it
                kept.pop(next(k for k in kept if kept[k] is not base))
            kept[band] = c
        return c

    def with_band(self, band):
        """This collider within another band, sharing its trees."""
        other = copy.copy(self)
        other.band = float(band)
        other._cells = None
        return other

    def _in_band(self, points):
        """(P,) bool, False where no triangle can be within the band of a point.

        Cells as wide as the band, each marked when a triangle's box overlaps it and then
        grown by one cell on every side: a triangle within the band of a point has a point in
        a cell at most one cell away from the point's own. One lookup per point, where the
        search would grow its radius round after round before finding nothing (the head and
        hands of a character on a floor)."""
        if self._cells is None:
            lo, hi = self._boxes
            if not len(lo):
                self._cells = (np.zeros(3), np.ones(3, np.int64), np.zeros(0, np.int64))
            else:
                origin = lo.min(axis=0) - 2.0 * self.band
                shape = np.floor((hi.max(axis=0) - origin) / self.band).astype(np.int64) + 3
                i0 = np.floor((lo - origin) / self.band).astype(np.int64)
                n = np.floor((hi - origin) / self.band).astype(np.int64) - i0 + 1
                box, local = expand_ranges(np.zeros(len(lo), np.int64), n.prod(axis=1))
                nb = n[box]
                idx = i0[box] + np.stack([local // (nb[:, 2] * nb[:, 1]), (local // nb[:, 2]) % nb[:, 1],
                                          local % nb[:, 2]], axis=1)
                strides = np.array([shape[1] * shape[2], shape[2], 1], np.int64)
                keys = np.unique(idx @ strides)
                grown = (keys[:, None] + (np.stack(np.meshgrid(*[[-1, 0, 1]] * 3, indexing="ij"), -1)
                                          .reshape(-1, 3) @ strides)[None]).ravel()
                self._cells = (origin, shape, np.unique(grown))
        origin, shape, keys = self._cells
        cell = np.floor((points - origin) / self.band).astype(np.int64)
        inside = np.all((cell >= 0) & (cell < shape), axis=1)
        key = np.clip(cell, 0, shape - 1) @ np.array([shape[1] * shape[2], shape[2], 1], np.int64)
        at = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
        return inside & (keys[at] == key) if len(keys) else np.zeros(len(points), bool)

    #: Nearest triangle centres taken per point by the k-d tree search.
    KD_NEIGHBOURS = 16

    def _kd_tree(self):
        """(k-d tree of the triangle centres, the largest centre-to-corner distance R, (T,) each
        triangle's own centre-to-corner distance)."""
        from scipy.spatial import cKDTree
        kd = self._shared.get("kd")
        if kd is None:
            tri = self.triangles[self.tri_ids]
            corners = self.vertices[tri]
            centre = corners.mean(axis=1)
            radius = np.linalg.norm(corners - centre[:, None], axis=-1).max(axis=1)
            kd = self._shared["kd"] = (cKDTree(centre), float(radius.max()) if len(radius) else 0.0, radius)
        return kd[:2]

    def _kd_nearest(self, points):
        """``_nearest`` for many points at once without a radius: the closest triangle, exact,
        or inf where there is none within the band; and (P,) bool, the points it could not
        settle (their candidates may miss a closer triangle).

        A triangle's distance from a point is at least the distance to its centre minus its
        radius r (centre to farthest corner), and at least the distance to its box. The
        ``KD_NEIGHBOURS`` nearest centres (one compiled k-d tree query) are candidates; the
        nearest one's triangle gives an upper bound u, and only the candidates that both
        bounds put within u are measured (two to four of sixteen on a floor). Any triangle
        closer than the best d has its centre within d + R_max, so when the farthest
        candidate lies beyond that, none was missed; the others go through the box-tree
        search from d. Ties (to 1e-12) go to the lowest triangle id, as in ``_best_of``."""
        tree, R = self._kd_tree()
        radius = self._shared["kd"][2]
        P, T = len(points), len(self.tri_ids)
        k = min(self.KD_NEIGHBOURS, T)
        if k == 0 or P == 0:
            return np.full(P, np.inf), np.full(P, -1), np.zeros((P, 3)), np.zeros((P, 3)), np.ones(P, bool)
        cd, ci = tree.query(points, k=k, distance_upper_bound=self.band + R)
        cd, ci = cd.reshape(P, k), ci.reshape(P, k)
        real = ci < T
        ci[~real] = 0
        tid = self.tri_ids[ci]                                                   # (P,k)
        a, b, c = (self.vertices[self.triangles[tid[:, 0], j]] for j in range(3))
        bary0 = closest_point_on_triangles(points, a, b, c)
        foot0 = bary0[:, :1] * a + bary0[:, 1:2] * b + bary0[:, 2:] * c
        u = np.where(real[:, 0], np.linalg.norm(points - foot0, axis=-1), np.inf)
        # A hair wider: a candidate tied with the bound must not be lost to rounding.
        lim = u * (1.0 + 1e-9) + 1e-9 * self.band
        keep = real & (cd - radius[ci] <= lim[:, None])
        keep[:, 0] = False
        pi, kj = np.nonzero(keep)
        lo, hi = self._boxes
        t = ci[pi, kj]
        gap = np.maximum(np.maximum(lo[t] - points[pi], points[pi] - hi[t]), 0.0)
        near = np.einsum("kd,kd->k", gap, gap) <= lim[pi] ** 2
        pi, kj = pi[near], kj[near]
        a, b, c = (self.vertices[self.triangles[tid[pi, kj], j]] for j in range(3))
        bary = closest_point_on_triangles(points[pi], a, b, c)
        foot = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
        dist = np.full((P, k), np.inf)
        dist[:, 0] = u
        dist[pi, kj] = np.linalg.norm(points[pi] - foot, axis=-1)
        rounded = np.round(dist, 12)
        tied = rounded == rounded.min(axis=1, keepdims=True)
        j = np.argmin(np.where(tied, tid, np.iinfo(np.int64).max), axis=1)
        rows = np.arange(P)
        best = dist[rows, j]
        found = np.isfinite(best)
        pair = np.zeros((P, k), np.int64)
        pair[pi, kj] = np.arange(len(pi))
        other = (j > 0)[:, None]
        bary_out = np.where(other, bary[pair[rows, j]] if len(pi) else 0.0, bary0) * found[:, None]
        foot_out = np.where(other, foot[pair[rows, j]] if len(pi) else 0.0, foot0) * found[:, None]
        tri_out = np.where(found, tid[rows, j], -1)
        # Settled: every centre that could hold a closer triangle was a candidate (the farthest
        # is beyond best + R, or there were fewer centres within reach).
        reach = np.minimum(best, self.band) + R
        settled = ((cd[:, -1] > reach) | ~real[:, -1]) & (best <= self.band)
        # Beyond the band (or nothing found) is the box-tree search's call: it keeps a triangle
        # whose box, not the triangle itself, is within the band.
        return best, tri_out, bary_out, foot_out, ~settled

    def crossing(self, p, q):
        """(N,) whether each segment p->q (N,3) passes through a triangle of the mesh: a bone
        through a slab thinner than any collision margin has no sample inside it."""
        p, q = np.asarray(p, float).reshape(-1, 3), np.asarray(q, float).reshape(-1, 3)
        out = np.zeros(len(p), bool)
        if not len(p):
            return out
        mid, half = 0.5 * (p + q), 0.5 * np.linalg.norm(q - p, axis=1)
        seg, box = self.tree.query(mid, half)
        if seg.size:
            tri = self.triangles[self.tri_ids[box]]
            a, b, c = (self.vertices[tri[:, k]] for k in range(3))
            hit = segments_hit_triangles(p[seg], q[seg], a, b, c)
            out[seg[hit]] = True
        return out

    def signed_distance(self, points, near=None, far=None):
        """``sd (P,), normal (P,3)``; points with no surface in the band get sd = +inf
        (``near``, ``far``: see ``closest``)."""
        sd, normal, _, _ = self.closest(points, near, far)
        return sd, normal

    def _nearest(self, points, radius):
        """Per point the closest triangle among those whose box is within ``radius`` (P,):
        ``distance (P,)`` (inf where none), ``triangle id (P,)``, ``bary (P,3)``, foot (P,3)."""
        pt, box = self.tree.query(points, radius)
        return self._best_of(points, pt, self.tri_ids[box])

    #: ``closest`` settles up to FEW points without bounds by one ball query when it tests at most
    #: this many (point, triangle) pairs (a dense mesh within a whole band of many points: rounds).
    BALL_PAIRS = 20000

    def _ball_nearest(self, points, radius, budget=None):
        """``_nearest`` among a superset of the triangles within ``radius`` (P,) of each point:
        those whose centre is within ``radius`` + R (one compiled k-d tree query). Where the
        closest of them is within ``radius`` it is ``_nearest``'s (every triangle as near or
        nearer is among them); elsewhere the caller searches again."""
        tree, R = self._kd_tree()
        # A hair wider: a triangle exactly that far must not be lost to rounding.
        found = tree.query_ball_point(points, np.asarray(radius, float) * (1.0 + 1e-9) + R + 1e-9 * self.band)
        counts = np.fromiter((len(x) for x in found), np.int64, len(points))
        if budget is not None and counts.sum() > budget:
            return None
        centre = np.fromiter(itertools.chain.from_iterable(found), np.int64, int(counts.sum()))
        return self._best_of(points, np.repeat(np.arange(len(points)), counts), self.tri_ids[centre])

    def _best_of(self, points, pt, tri_id):
        """``_nearest`` over given (point, triangle id) pairs (K,), sorted by point."""
        P = len(points)
        best = np.full(P, np.inf)
        tri_out = np.full(P, -1)
        bary_out = np.zeros((P, 3))
        foot_out = np.zeros((P, 3))
        if pt.size == 0:
            return best, tri_out, bary_out, foot_out
        tri = self.triangles[tri_id]
        a, b, c = (self.vertices[tri[:, k]] for k in range(3))
        bary = closest_point_on_triangles(points[pt], a, b, c)
        foot = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
        dist = np.linalg.norm(points[pt] - foot, axis=-1)
        order = np.lexsort((tri_id, np.round(dist, 12), pt))   # ties (to 1e-12): the lowest triangle id
        first = order[np.r_[True, pt[order][1:] != pt[order][:-1]]]
        who = pt[first]
        best[who], tri_out[who], bary_out[who], foot_out[who] = dist[first], tri_id[first], bary[first], foot[first]
        return best, tri_out, bary_out, foot_out

    def _closest_few(self, points, near, far):
        """``closest`` of a few points with distance bounds (a solver step's collisions): one
        ball query (``_ball_nearest``) and no more of the general search's set-up, the same
        answer. None when some point needs the general search (known to be a band away, or
        with no triangle within its bound)."""
        band = self.band
        radius = np.clip(np.asarray(far, dtype=float), band / self.SEARCH_SHRINK, band)
        if near is not None:
            near = np.asarray(near, dtype=float)
            if np.any(near >= band):
                return None
            radius = np.maximum(radius, near)
        dist, tri, bary, foot = self._ball_nearest(points, radius)
        if not np.all(dist <= radius):
            return None
        n = normalize(np.einsum("kc,kcd->kd", bary, self.normals[self.triangles[tri]]))
        return np.where(dot(points - foot, n) < 0, -1.0, 1.0) * dist, n, tri, bary

    def closest(self, points, near=None, far=None):
        """``sd (P,), normal (P,3), triangle (P,), bary (P,3)`` of the closest surface point.

        Points with no surface within the band get sd = +inf and triangle -1.
        near, far : optional (P,) lower and upper bounds of the points' distances to the
            surface (a point that moved m from where its distance was d is between d - m
            and d + m away). A point at least the band away is not searched at all; the
            others search within ``far`` at once, so one round finds their surface.
        """
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        P = len(points)
        if P > BoxTree.CHUNK:                          # bounded memory on long clips
            cut = [slice(i, i + BoxTree.CHUNK) for i in range(0, P, BoxTree.CHUNK)]
            parts = [self.closest(points[c], None if near is None else near[c], None if far is None else far[c])
                     for c in cut]
            return tuple(np.concatenate(x) for x in zip(*parts))
        if far is not None and 0 < P <= self.BALL_POINTS:
            done = self._closest_few(points, near, far)
            if done is not None:
                return done
        dist, tri_out = np.full(P, np.inf), np.full(P, -1)
        bary_out, foot = np.zeros((P, 3)), np.zeros((P, 3))
        # Within the upper bound when there is one (one round); a few points (a live frame)
        # within the whole band at once (rounds cost more than the triangles they spare);
        # many points from a small radius up.
        start = self.band / self.SEARCH_SHRINK
        if far is not None:
            radius = np.clip(np.asarray(far, dtype=float), start, self.band)
        else:
            radius = np.full(P, self.band if P <= self.FEW else start)
        todo = np.arange(P)
        if near is None and far is None:
            # No triangle's box within the band of a point: nothing a search would find (a few
            # points too: a pair's live frame measures its upper bodies' targets, 0.5 ms a call
            # where none is searched).
            todo = np.flatnonzero(self._in_band(points))
        if near is not None:
            near = np.asarray(near, dtype=float)
            radius = np.maximum(radius, np.minimum(near, self.band))
            todo = np.flatnonzero(near < self.band)
        if todo.size > self.FEW:
            # Many points: the k-d tree settles most of those near the surface in one compiled
            # query; the box-tree rounds below take the rest, from their best distance so far
            # (a hair wider: a box exactly that far, a triangle tied with the best, must not be
            # lost to rounding), or the band.
            d2, t2, b2, f2, unsure = self._kd_nearest(points[todo])
            sure = todo[~unsure]
            dist[sure], tri_out[sure], bary_out[sure], foot[sure] = d2[~unsure], t2[~unsure], b2[~unsure], f2[~unsure]
            todo = todo[unsure]
            radius[todo] = np.clip(d2[unsure] * (1.0 + 1e-9) + 1e-9 * self.band, start, self.band)
        ball = None
        if far is None and 0 < todo.size <= self.FEW:
            # Points left without bounds (the legs of a live frame's targets, the head and hands
            # known to be a band away): one ball query within the whole band settles those that
            # have a surface there, where the rounds below grew a radius nine times (11 ms a
            # Rigify live frame), unless it would test too many triangles.
            ball = self._ball_nearest(points[todo], np.full(todo.size, self.band), self.BALL_PAIRS)
        if ball is not None:
            d2, t2, b2, f2 = ball
            done = d2 <= self.band
            sure = todo[done]
            dist[sure], tri_out[sure], bary_out[sure], foot[sure] = d2[done], t2[done], b2[done], f2[done]
            # None within the band: the rounds' last answer is their search within the band
            # (a triangle whose box is in it may be given, farther), reached here in one round.
            todo = todo[~done]
            radius[todo] = self.band
        if far is not None and 0 < todo.size <= self.BALL_POINTS:
            # A few points with bounds (a solver step's collisions: five joints, a few centimetres
            # each): one ball query of the triangle centres instead of a box-tree round, a dozen
            # levels of numpy calls (0.45 ms a step in a 600-frame bake).
            d2, t2, b2, f2 = self._ball_nearest(points[todo], radius[todo])
            done = d2 <= radius[todo]
            sure = todo[done]
            dist[sure], tri_out[sure], bary_out[sure], foot[sure] = d2[done], t2[done], b2[done], f2[done]
            todo = todo[~done]
        first = True
        while todo.size:
            if not first:
                # Found something beyond the radius: everything nearer is within its distance.
                # Found nothing: look farther. Never beyond the band.
                found = np.isfinite(dist[todo])
                radius[todo] = np.minimum(np.maximum(np.where(found, dist[todo] * (1.0 + 1e-9),
                                                              self.SEARCH_GROWTH * radius[todo]), start), self.band)
            d2, t2, b2, f2 = self._nearest(points[todo], radius[todo])
            dist[todo], tri_out[todo], bary_out[todo], foot[todo] = d2, t2, b2, f2
            todo = todo[(d2 > radius[todo]) & (radius[todo] < self.band)]
            first = False
        sd = np.full(P, np.inf)
        normal = np.zeros((P, 3))
        hit = np.flatnonzero(tri_out >= 0)
        if hit.size:
            n = normalize(np.einsum("kc,kcd->kd", bary_out[hit], self.normals[self.triangles[tri_out[hit]]]))
            rel = points[hit] - foot[hit]
            sd[hit] = np.where(dot(rel, n) < 0, -1.0, 1.0) * dist[hit]
            normal[hit] = n
        return sd, normal, tri_out, bary_out


def mesh_graph(vertices, triangles, valid, weld):
    """Edge graph of the welded mesh for geodesic distances.

    Returns CSR arrays ``indptr (V+1,), neighbours, lengths`` over vertex ids
    (welded ids are representatives: other ids have no edges).
    """
    tri = weld[triangles[valid]]
    edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    edges = edges[edges[:, 0] != edges[:, 1]]
    V = np.int64(len(vertices))
    key = np.unique(np.sort(edges, axis=1) @ np.array([V, 1], np.int64))      # one int per edge: fast
    a, b = key // V, key % V
    key = np.unique(np.concatenate([a * V + b, b * V + a]))                    # both directions, sorted
    edges = np.stack([key // V, key % V], axis=1)
    lengths = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=-1)
    indptr = np.searchsorted(edges[:, 0], np.arange(len(vertices) + 1))
    return indptr, edges[:, 1], lengths
