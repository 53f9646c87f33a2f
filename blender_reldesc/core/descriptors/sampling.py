"""Adaptive sampling of a fixed descriptor set (SCA 2013 §6, Eq. 7)."""

from __future__ import annotations

import heapq

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
    through a shared vertex within r, is within geodesic distance r.
    """

    def __init__(self, vertices, triangles, valid, weld):
        self.vertices = vertices
        self.wtri = weld[triangles]
        indptr, nbr, length = mesh_graph(vertices, triangles, valid, weld)
        self._indptr = indptr.tolist()
        self._nbr = nbr.tolist()
        self._len = length.tolist()
        self.graph_searches = 0

    def _geodesic_from(self, point, tri, limit):
        """Dijkstra distances from a surface point on triangle ``tri`` up to ``limit``."""
        dist = {}
        heap = []
        for v in self.wtri[tri].tolist():
            d0 = float(np.linalg.norm(self.vertices[v] - point))
            heapq.heappush(heap, (d0, v))
        indptr, nbr, length = self._indptr, self._nbr, self._len
        while heap:
            d, v = heapq.heappop(heap)
            if v in dist or d > limit:
                continue
            dist[v] = d
            for e in range(indptr[v], indptr[v + 1]):
                w = nbr[e]
                if w not in dist:
                    nd = d + length[e]
                    if nd <= limit:
                        heapq.heappush(heap, (nd, w))
        return dist

    def sample(self, tri, positions, radii):
        """Indices of the adopted candidates, in candidate order.

        tri : (K,) int triangle of each candidate, in the order they are met
            (frame by frame, joint by joint).
        positions : (K,3) candidate points on the rest surface.
        radii : (K,) geodesic radius of each candidate (Eq. 7).
        """
        K = len(tri)
        cap = 256
        P = np.empty((cap, 3))
        T = np.empty(cap, np.int64)
        n = 0
        adopted = []
        for k in range(K):
            c, r, t = positions[k], radii[k], tri[k]
            if n:
                diff = P[:n] - c
                near = np.flatnonzero(np.einsum("ij,ij->i", diff, diff) <= r * r)
            else:
                near = ()
            if len(near) and not self._all_far(c, t, r, near, P, T):
                continue
            if n == cap:
                cap *= 2
                P = np.resize(P, (cap, 3))
                T = np.resize(T, cap)
            P[n], T[n] = c, t
            n += 1
            adopted.append(k)
        return np.asarray(adopted, dtype=np.int64)

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
        self.graph_searches += 1
        limit = r * C.GRAPH_SLACK
        dist = self._geodesic_from(c, t, limit)
        for m, i in enumerate(near):
            for v in dv[m].tolist():
                dvtx = dist.get(v)
                if dvtx is not None and dvtx + np.linalg.norm(self.vertices[v] - P[i]) <= limit:
                    return False
        return True
