"""A uniform hash grid of axis-aligned boxes for batched point-stabbing queries.

Each box is entered into every grid cell it overlaps; a query point looks up its
own cell and is paired with the boxes listed there that really contain it.
Build and query are pure numpy (sort + searchsorted), so the cost of a query
grows with the number of boxes near each point, not with the number of boxes.
"""

from __future__ import annotations

import numpy as np

#: Average number of cells a box may occupy before the cell size is increased.
_CELLS_PER_BOX = 24


def expand_ranges(starts, counts):
    """Concatenate ``arange(s, s + c)`` for every (s, c), plus the row of each item."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    row = np.repeat(np.arange(len(counts)), counts)
    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return row, np.repeat(np.asarray(starts, dtype=np.int64), counts) + offset


class BoxGrid:
    """Grid over boxes ``lo (B,3)``, ``hi (B,3)``; ``query(points)`` -> pairs."""

    def __init__(self, lo, hi):
        lo = np.asarray(lo, dtype=float)
        hi = np.asarray(hi, dtype=float)
        self.lo, self.hi = lo, hi
        B = len(lo)
        if B == 0:
            self._keys = np.zeros(0, np.int64)
            self._boxes = np.zeros(0, np.int64)
            self.cell = 1.0
            self.origin = np.zeros(3)
            self.shape = np.ones(3, np.int64)
            return
        span = float(np.max(hi.max(axis=0) - lo.min(axis=0)))
        ext = hi - lo
        cell = max(float(np.median(ext.max(axis=1))) * 0.5, span * 1e-5, 1e-12)
        self.origin = lo.min(axis=0)
        while True:
            i0 = np.floor((lo - self.origin) / cell).astype(np.int64)
            i1 = np.floor((hi - self.origin) / cell).astype(np.int64)
            n = i1 - i0 + 1
            counts = n.prod(axis=1)
            if counts.sum() <= _CELLS_PER_BOX * B + 4096:
                break
            cell *= 1.5
        self.cell = cell
        self.shape = np.floor((hi.max(axis=0) - self.origin) / cell).astype(np.int64) + 1
        box, local = expand_ranges(np.zeros(B, np.int64), counts)
        nb = n[box]
        dz = local % nb[:, 2]
        dy = (local // nb[:, 2]) % nb[:, 1]
        dx = local // (nb[:, 2] * nb[:, 1])
        idx = i0[box] + np.stack([dx, dy, dz], axis=1)
        keys = self._key(idx)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._boxes = box[order]

    def _key(self, idx):
        return (idx[:, 0] * self.shape[1] + idx[:, 1]) * self.shape[2] + idx[:, 2]

    def query(self, points, budget=None):
        """Pairs ``(point_index, box_index)`` with the point inside the box.

        points : (P,3) float. Returns two (K,) int64 arrays, sorted by point.
        budget : if given, None is returned instead when the points' cells list more than
            ``budget`` boxes per point on average (boxes of very different sizes crowd the
            cells of a uniform grid; ``BoxTree`` answers those queries in logarithmic time).
        """
        points = np.asarray(points, dtype=float)
        idx = np.floor((points - self.origin) / self.cell).astype(np.int64)
        ok = np.all((idx >= 0) & (idx < self.shape), axis=1)
        keys = np.where(ok, self._key(np.where(ok[:, None], idx, 0)), -1)
        start = np.searchsorted(self._keys, keys, side="left")
        stop = np.searchsorted(self._keys, keys, side="right")
        stop = np.where(ok, stop, start)
        if budget is not None and int((stop - start).sum()) > budget * max(len(points), 1):
            return None
        pt, pos = expand_ranges(start, stop - start)
        box = self._boxes[pos]
        p = points[pt]
        inside = np.all((p >= self.lo[box]) & (p <= self.hi[box]), axis=1)
        return pt[inside], box[inside]


def z_order(cells):
    """Interleave the low 10 bits of three (n,) int arrays into one (n,) int64 Z-order code."""
    code = np.zeros(len(cells[0]), np.int64)
    for bit in range(10):
        for axis in range(3):
            code |= ((cells[axis] >> bit) & 1) << (3 * bit + axis)
    return code


class BoxTree:
    """A bounding-volume hierarchy over boxes ``lo (B,3)``, ``hi (B,3)``.

    Built in one sort: the boxes are ordered along a Z-order curve of their centres, grouped
    ``leaf_size`` at a time, and the groups are merged pairwise into a perfect binary tree
    (a linear BVH). Queries walk the tree one level at a time for all points together, so
    their cost grows with the depth (log B) and with the number of boxes near each point,
    not with how finely the surface is cut: unlike a uniform grid, a dense mesh of small
    triangles next to large ones, or tall boxes over a fine floor, costs no more per query.
    """

    #: Points queried at a time.
    CHUNK = 32768

    def __init__(self, lo, hi, leaf_size=8):
        lo = np.asarray(lo, dtype=float).reshape(-1, 3)
        hi = np.asarray(hi, dtype=float).reshape(-1, 3)
        self.count = B = len(lo)
        self.leaf_size = leaf_size
        if B == 0:
            self.order = np.zeros(0, np.int64)
            self.levels = []
            return
        centre = 0.5 * (lo + hi)
        base = centre.min(axis=0)
        span = max(float((centre.max(axis=0) - base).max()), 1e-300)
        cells = np.clip(((centre - base) / span * 1023.0).astype(np.int64), 0, 1023)
        self.order = np.argsort(z_order(cells.T), kind="stable")
        leaves = -(-B // leaf_size)
        L = 1 << max(0, int(np.ceil(np.log2(leaves))))
        slots = L * leaf_size
        self.lo = np.full((slots, 3), np.inf)
        self.hi = np.full((slots, 3), -np.inf)                 # padding: boxes nothing is inside
        np.take(lo, self.order, axis=0, out=self.lo[:B])
        np.take(hi, self.order, axis=0, out=self.hi[:B])
        levels = [(self.lo.reshape(L, leaf_size, 3).min(axis=1), self.hi.reshape(L, leaf_size, 3).max(axis=1))]
        while len(levels[-1][0]) > 1:
            a, b = levels[-1]
            levels.append((a.reshape(-1, 2, 3).min(axis=1), b.reshape(-1, 2, 3).max(axis=1)))
        self.levels = levels[::-1]                              # root first

    @staticmethod
    def _near(points, lo, hi, r2):
        gap = np.maximum(np.maximum(lo - points, points - hi), 0.0)
        if r2 is None:
            return ~np.any(gap > 0.0, axis=1)
        return np.einsum("ij,ij->i", gap, gap) <= r2

    def query(self, points, radius=None):
        """Pairs ``(point_index, box_index)`` with the point inside the box, or within
        ``radius`` (a float or (P,) array) of it. Two (K,) int64 arrays, sorted by point."""
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        if self.count == 0 or not len(points):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        r2 = None
        if radius is not None:
            r2 = np.broadcast_to(np.asarray(radius, dtype=float) ** 2, (len(points),))
        if len(points) > self.CHUNK:                 # bounded memory: the frontier grows with the points
            parts = [self._query(points[i:i + self.CHUNK], None if r2 is None else r2[i:i + self.CHUNK])
                     for i in range(0, len(points), self.CHUNK)]
            return (np.concatenate([pt + i for (pt, _), i in zip(parts, range(0, len(points), self.CHUNK))]),
                    np.concatenate([box for _, box in parts]))
        return self._query(points, r2)

    def _query(self, points, r2):
        pt = np.arange(len(points))
        node = np.zeros(len(points), np.int64)
        for depth, (lo, hi) in enumerate(self.levels):
            if depth:
                pt = np.repeat(pt, 2)
                node = (2 * node[:, None] + np.arange(2)).ravel()
            keep = self._near(points[pt], lo[node], hi[node], None if r2 is None else r2[pt])
            pt, node = pt[keep], node[keep]
        k = self.leaf_size
        pt = np.repeat(pt, k)
        box = (k * node[:, None] + np.arange(k)).ravel()
        keep = self._near(points[pt], self.lo[box], self.hi[box], None if r2 is None else r2[pt])
        pt, box = pt[keep], box[keep]
        order = np.argsort(pt, kind="stable")
        return pt[order], self.order[box[order]]
