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

    def query(self, points):
        """Pairs ``(point_index, box_index)`` with the point inside the box.

        points : (P,3) float. Returns two (K,) int64 arrays, sorted by point.
        """
        points = np.asarray(points, dtype=float)
        idx = np.floor((points - self.origin) / self.cell).astype(np.int64)
        ok = np.all((idx >= 0) & (idx < self.shape), axis=1)
        keys = np.where(ok, self._key(np.where(ok[:, None], idx, 0)), -1)
        start = np.searchsorted(self._keys, keys, side="left")
        stop = np.searchsorted(self._keys, keys, side="right")
        stop = np.where(ok, stop, start)
        pt, pos = expand_ranges(start, stop - start)
        box = self._boxes[pos]
        p = points[pt]
        inside = np.all((p >= self.lo[box]) & (p <= self.hi[box]), axis=1)
        return pt[inside], box[inside]
