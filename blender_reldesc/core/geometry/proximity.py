"""Proximity points (SCA 2013 §5) and closest-point queries for collisions."""

from __future__ import annotations

import numpy as np

from .. import constants as C
from .triangles import closest_point_on_triangles, dot, face_normals, normalize, project_to_coverage
from .spatial import BoxGrid


class CoverageIndex:
    """Finds, for query points, every triangle whose coverage contains them.

    The coverage of a triangle is the prism bounded by the triangle and the
    surfaces swept by its vertex normals (paper Fig. 4). It is capped at
    ``max_distance`` from the surface: a point ``x(b) + h n(b)`` of the capped
    coverage is a convex combination of the segments ``[x_k, x_k + H n_k]``,
    so the bounding box of those six points bounds it, and a grid over these
    boxes finds the candidate triangles of each point.

    Parameters
    ----------
    vertices, normals : (V,3) float, positions and unit vertex normals.
    triangles : (T,3) int; valid : (T,) bool (degenerate triangles are skipped).
    max_distance : float, largest joint-to-surface distance that counts.
    """

    def __init__(self, vertices, normals, triangles, valid, max_distance):
        self.vertices, self.normals, self.triangles = vertices, normals, triangles
        self.max_distance = max_distance
        self.tri_ids = np.flatnonzero(valid)
        tri = triangles[self.tri_ids]
        fn, _ = face_normals(vertices, tri)
        corner_n = normals[tri]                                    # (T,3,3)
        # |n(b)| >= min_k n_k . n_f, so h <= max_distance / that bound.
        cos = np.clip(np.min(np.einsum("tkd,td->tk", corner_n, fn), axis=1), 0.2, 1.0)
        reach = (max_distance / cos)[:, None, None]
        pts = np.concatenate([vertices[tri], vertices[tri] + reach * corner_n], axis=1)
        lo, hi = pts.min(axis=1), pts.max(axis=1)
        # Pad by the coverage test's own slack, so a joint exactly above an
        # edge (common on grids) is not lost to rounding at the box boundary.
        pad = (C.BARY_TOLERANCE * (hi - lo).max(axis=1) + 1e-12 * max_distance)[:, None]
        self.grid = BoxGrid(lo - pad, hi + pad)

    def query(self, points, tolerance):
        """Proximity points of ``points`` (P,3).

        Returns ``point (K,) int, triangle (K,) int, bary (K,3), distance (K,)``:
        one row per (point, triangle) whose capped coverage holds the point,
        sorted by point. ``distance`` is the joint-to-proximity-point length.
        """
        pt, box = self.grid.query(points)
        tri = self.tri_ids[box]
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
    """

    def __init__(self, vertices, normals, triangles, valid, band):
        self.vertices, self.normals, self.triangles = vertices, normals, triangles
        self.tri_ids = np.flatnonzero(valid)
        corners = vertices[triangles[self.tri_ids]]
        self.grid = BoxGrid(corners.min(axis=1) - band, corners.max(axis=1) + band)

    def signed_distance(self, points):
        """``sd (P,), normal (P,3)``; points with no surface in the band get sd = +inf."""
        sd, normal, _, _ = self.closest(points)
        return sd, normal

    def closest(self, points):
        """``sd (P,), normal (P,3), triangle (P,), bary (P,3)`` of the closest surface point.

        Points with no surface within the band get sd = +inf and triangle -1.
        """
        points = np.asarray(points, dtype=float)
        P = len(points)
        sd = np.full(P, np.inf)
        normal = np.zeros((P, 3))
        tri_out = np.full(P, -1)
        bary_out = np.zeros((P, 3))
        pt, box = self.grid.query(points)
        if pt.size == 0:
            return sd, normal, tri_out, bary_out
        tri_id = self.tri_ids[box]
        tri = self.triangles[tri_id]
        a, b, c = (self.vertices[tri[:, k]] for k in range(3))
        bary = closest_point_on_triangles(points[pt], a, b, c)
        foot = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
        dist = np.linalg.norm(points[pt] - foot, axis=-1)
        order = np.lexsort((dist, pt))
        first = order[np.r_[True, pt[order][1:] != pt[order][:-1]]]
        n = normalize(np.einsum("kc,kcd->kd", bary[first], self.normals[tri[first]]))
        rel = points[pt[first]] - foot[first]
        sign = np.where(dot(rel, n) < 0, -1.0, 1.0)
        sd[pt[first]] = sign * dist[first]
        normal[pt[first]] = n
        tri_out[pt[first]] = tri_id[first]
        bary_out[pt[first]] = bary[first]
        return sd, normal, tri_out, bary_out


def mesh_graph(vertices, triangles, valid, weld):
    """Edge graph of the welded mesh for geodesic distances.

    Returns CSR arrays ``indptr (V+1,), neighbours, lengths`` over vertex ids
    (welded ids are representatives: other ids have no edges).
    """
    tri = weld[triangles[valid]]
    edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    edges = edges[edges[:, 0] != edges[:, 1]]
    edges = np.unique(np.sort(edges, axis=1), axis=0)
    edges = np.concatenate([edges, edges[:, ::-1]])
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    lengths = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=-1)
    indptr = np.searchsorted(edges[:, 0], np.arange(len(vertices) + 1))
    return indptr, edges[:, 1], lengths
