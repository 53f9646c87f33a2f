"""Adaptive sampling of a fixed descriptor set (SCA 2013 §6, Eq. 7)."""

from __future__ import annotations

import heapq
import math

import numpy as np

from .. import constants as C
from ..geometry.proximity import mesh_graph


class GeodesicSampler:
    """Incremental Poisson-style sampling with a geodesic radius per candidate.

    A candidate proximity point with radius r is adopted only if no adopted
    descriptor lies within geodesic distance r of it. Geodesic distances are
    measured on the rest surface (frame 0 of an animated mesh) along the
    welded edge graph (Dijkstra, cut off at r). Cheap certificates avoid most
    graph searches: no descriptor within Euclidean distance r means none
    within geodesic distance r; a descriptor on the same triangle, or reached
    through a shared vertex within r, is within geodesic distance r; so is one
    reached by a greedy walk along the edges within r (``_straight``). The
    remaining cases search the graph with A* (``_within``).
    """

    def __init__(self, vertices, triangles, valid, weld):
        self.vertices = vertices
        self.wtri = weld[triangles]
        indptr, nbr, length = mesh_graph(vertices, triangles, valid, weld)
        self._indptr = indptr.tolist()
        self._nbr = nbr.tolist()
        self._len = length.tolist()
        self._xyz = [tuple(x) for x in vertices.tolist()]
        self.graph_searches = 0
        # Set by ``sample``: the paths known (vertex -> {descriptor: length}) and the descriptors.
        self._paths, self._points = None, []

    def _straight(self, point, tri, target, limit):
        """A path found greedily (each step to the neighbour nearest the target) that reaches the
        target within ``limit``: its vertices, each with the length of the rest of the path to the
        target; or None. A path found is a proof; not finding one proves nothing (``_within``
        decides then). On a smooth surface the greedy path is nearly straight."""
        verts = self._xyz
        t_tri, (a, b, c) = target
        goal = set(self.wtri[t_tri].tolist())
        cx, cy, cz = point

        def to_target(v):
            x, y, z = verts[v]
            return math.sqrt((x - a) ** 2 + (y - b) ** 2 + (z - c) ** 2)

        best = None
        for v in self.wtri[tri].tolist():
            x, y, z = verts[v]
            g = math.sqrt((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2)
            if best is None or g + to_target(v) < best[0] + best[2]:
                best = (g, v, to_target(v))
        g, v, left = best
        indptr, nbr, length = self._indptr, self._nbr, self._len
        path = [(v, g)]
        while g + left <= limit:
            if v in goal:
                # each vertex of the path, with the length of the rest of the path to the target
                total = g + left
                return [(w, total - gw) for w, gw in path]
            step = None
            for e in range(indptr[v], indptr[v + 1]):
                d = to_target(nbr[e])
                if d < left and (step is None or d < step[2]):
                    step = (e, nbr[e], d)
            if step is None:
                return None
            g, v, left = g + length[step[0]], step[1], step[2]
            path.append((v, g))
        return None

    def _within(self, point, tri, targets, limit):
        """True if some target is within ``limit`` of a surface point on triangle ``tri``
        along the edge graph: a path to a vertex w of the target's triangle, plus |w - target|.

        A* towards the nearest target (heuristic: the straight-line distance, which never
        overestimates and grows by at most an edge's length along an edge), so the search
        follows a narrow corridor instead of flooding the whole ball of radius ``limit``:
        the same answer as Dijkstra's distances, at a cost that grows with limit / edge
        length instead of its square.
        """
        verts = self._xyz
        goals = {}                                     # vertex -> target points it leads to
        for t_tri, (px, py, pz) in targets:
            for v in self.wtri[t_tri].tolist():
                goals.setdefault(v, []).append((px, py, pz))
        tx = [t[1] for t in targets]

        def h(v):
            x, y, z = verts[v]
            return min(math.sqrt((x - a) ** 2 + (y - b) ** 2 + (z - c) ** 2) for a, b, c in tx)

        best = {}
        heap = []
        cx, cy, cz = point
        for v in self.wtri[tri].tolist():
            x, y, z = verts[v]
            d0 = math.sqrt((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2)
            if d0 < best.get(v, math.inf):
                best[v] = d0
                heapq.heappush(heap, (d0 + h(v), d0, v))
        indptr, nbr, length = self._indptr, self._nbr, self._len
        done = set()
        while heap:
            f, d, v = heapq.heappop(heap)
            if f > limit:
                return False                           # every remaining path is longer
            if v in done:
                continue
            done.add(v)
            here = goals.get(v)
            if here is not None:
                x, y, z = verts[v]
                for a, b, c in here:
                    if d + math.sqrt((x - a) ** 2 + (y - b) ** 2 + (z - c) ** 2) <= limit:
                        return True
            for e in range(indptr[v], indptr[v + 1]):
                w = nbr[e]
                nd = d + length[e]
                if w not in done and nd < best.get(w, math.inf):
                    hw = h(w)
                    if nd + hw <= limit:
                        best[w] = nd
                        heapq.heappush(heap, (nd + hw, nd, w))
        return False

    def sample(self, tri, positions, radii, same_triangle_first=True, known_paths=True):
        """Indices of the adopted candidates, in candidate order.

        tri : (K,) int triangle of each candidate, in the order they are met
            (frame by frame, joint by joint).
        positions : (K,3) candidate points on the rest surface.
        radii : (K,) geodesic radius of each candidate (Eq. 7).
        same_triangle_first, known_paths : reject a candidate within its radius of a descriptor
            on its own triangle, then one with a path already known to a descriptor, before any
            search (the same answer, sooner; off only to test that).
        """
        K = len(tri)
        cap = 256
        P = np.empty((cap, 3))
        T = np.empty(cap, np.int64)
        n = 0
        adopted = []
        # Adopted descriptors by triangle: a candidate within r of one on its own triangle is
        # rejected at once (``_all_far``'s first test, exactly), without a pass over every
        # descriptor. Most candidates end here: a joint's proximity point stays on one triangle
        # for many frames (measured: a 581-frame Rigify bind, 6.6 s of sampling).
        on_tri = {}
        # Paths known on the surface: vertex -> {descriptor: length of a path from the vertex to
        # it}, from each descriptor's own corners and from every path ``_straight`` found. A
        # candidate on a triangle with a corner w within r of a descriptor by |c - w| + that
        # length is rejected without a search: the searches would find that path or a shorter
        # one (the next frames' candidates of a joint sit next to the last one's; measured: a
        # 600-frame Rigify bind, 43k candidates past the same-triangle test, 2.9 s -> 0.3 s).
        self._paths = paths = {}
        self._points = points = []
        xyz, wtri = self._xyz, self.wtri.tolist()
        pos, rad, tris = positions.tolist(), np.asarray(radii, float).tolist(), np.asarray(tri).tolist()
        for k in range(K):
            t = tris[k]
            x, y, z = pos[k]
            r = rad[k]
            rr = r * r
            same = on_tri.get(t) if same_triangle_first else None
            if same is not None and any((x - a) ** 2 + (y - b) ** 2 + (z - d) ** 2 <= rr for a, b, d in same):
                continue
            if known_paths and paths and self._known_near(x, y, z, wtri[t], r, rr):
                continue
            c = positions[k]
            if n:
                diff = P[:n] - c
                near = np.flatnonzero(np.einsum("ij,ij->i", diff, diff) <= rr)
            else:
                near = ()
            if len(near) and not self._all_far(c, t, r, near, P, T):
                continue
            if n == cap:
                cap *= 2
                P = np.resize(P, (cap, 3))
                T = np.resize(T, cap)
            P[n], T[n] = c, t
            for v in wtri[t]:
                vx, vy, vz = xyz[v]
                paths.setdefault(v, {})[n] = math.sqrt((vx - x) ** 2 + (vy - y) ** 2 + (vz - z) ** 2)
            points.append((x, y, z))
            n += 1
            adopted.append(k)
            on_tri.setdefault(t, []).append((x, y, z))
        return np.asarray(adopted, dtype=np.int64)

    def _known_near(self, x, y, z, corners, r, rr):
        """True if a known path from a corner of the candidate's triangle reaches a descriptor
        within Euclidean r (the candidates ``_all_far`` weighs) in at most ``r * GRAPH_SLACK``."""
        limit = r * C.GRAPH_SLACK
        xyz, points = self._xyz, self._points
        for w in corners:
            known = self._paths.get(w)
            if not known:
                continue
            wx, wy, wz = xyz[w]
            dw = math.sqrt((wx - x) ** 2 + (wy - y) ** 2 + (wz - z) ** 2)
            for i, g in known.items():
                if dw + g <= limit:
                    a, b, d = points[i]
                    if (x - a) ** 2 + (y - b) ** 2 + (z - d) ** 2 <= rr:
                        return True
        return False

    def _all_far(self, c, t, r, near, P, T):
        """True if every descriptor in ``near`` is farther than r along the surface."""
        near_tri = T[near]
        if np.any(near_tri == t):
            return False
        cv = self.wtri[t]                                           # (3,)
        dv = self.wtri[near_tri]                                    # (m,3)
        shared = dv[:, :, None] == cv[None, None, :]                # (m,3,3)
        if shared.any():
            m, k, _ = np.nonzero(shared)
            v = dv[m, k]
            via = (np.linalg.norm(self.vertices[v] - c, axis=-1)
                   + np.linalg.norm(self.vertices[v] - P[near[m]], axis=-1))
            if np.any(via <= r):
                return False
        limit = r * C.GRAPH_SLACK
        start = tuple(c.tolist())
        targets = [(int(T[i]), tuple(P[i].tolist()), int(i)) for i in near]
        targets.sort(key=lambda tp: sum((a - b) ** 2 for a, b in zip(tp[1], start)))
        paths = self._paths
        for t_tri, point, i in targets:
            path = self._straight(start, t, (t_tri, point), limit)
            if path is not None:
                if paths is not None:
                    for v, rest in path:
                        known = paths.setdefault(v, {})
                        if rest < known.get(i, math.inf):
                            known[i] = rest
                return False
        self.graph_searches += 1
        return not self._within(start, t, [tp[:2] for tp in targets], limit)
