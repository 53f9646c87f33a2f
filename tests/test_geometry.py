"""Projection onto coverages, closest points and the spatial grid against brute force."""

import numpy as np
from hypothesis import given, settings, strategies as st

from blender_reldesc.core.geometry import (closest_point_on_triangles, normalize, project_to_coverage,
                                           vertex_normals)
from blender_reldesc.core.geometry import CoverageIndex
from blender_reldesc.core.geometry import BoxGrid


def _triangle_with_normals(rng, spread):
    corners = rng.normal(size=(3, 3))
    fn = normalize(np.cross(corners[1] - corners[0], corners[2] - corners[0]))
    normals = normalize(fn + spread * rng.normal(size=(3, 3)))
    return corners, normals


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), u=st.floats(0, 1), v=st.floats(0, 1), hf=st.floats(0, 0.5))
def test_newton_recovers_the_point_it_was_built_from(seed, u, v, hf):
    # Heights up to half the triangle's size: higher up, the normal lines of a
    # triangle with diverging normals cross and the projection is not unique.
    rng = np.random.default_rng(seed)
    corners, normals = _triangle_with_normals(rng, 0.15)
    area = np.linalg.norm(np.cross(corners[1] - corners[0], corners[2] - corners[0]))
    if area < 0.3:        # thin slivers: the normal field folds at small heights
        return
    h = hf * np.sqrt(area)
    if u + v > 1:
        u, v = 1 - u, 1 - v
    b = np.array([1 - u - v, u, v])
    p = b @ corners + h * (b @ normals)
    bary, height, inside = project_to_coverage(p[None], corners[None], normals[None], 1e-9)
    assert inside[0]
    np.testing.assert_allclose(bary[0], b, atol=1e-7)
    assert abs(height[0] - h) < 1e-7


def test_newton_agrees_with_brute_force_grid_search():
    rng = np.random.default_rng(1)
    for _ in range(20):
        corners, normals = _triangle_with_normals(rng, 0.2)
        b0 = rng.dirichlet([2, 2, 2])
        p = b0 @ corners + rng.uniform(0.1, 0.8) * normalize(b0 @ normals)
        bary, _, inside = project_to_coverage(p[None], corners[None], normals[None], 1e-9)
        # Brute force: the barycentric point whose normal line passes closest to p.
        s = np.linspace(0, 1, 401)
        U, V = np.meshgrid(s, s)
        ok = U + V <= 1
        B = np.stack([1 - U[ok] - V[ok], U[ok], V[ok]], 1)
        x, n = B @ corners, normalize(B @ normals)
        rel = p - x
        miss = np.linalg.norm(rel - np.sum(rel * n, 1)[:, None] * n, axis=1)
        miss[np.sum(rel * n, 1) < 0] = np.inf
        best = B[np.argmin(miss)]
        assert inside[0]
        np.testing.assert_allclose(bary[0], best, atol=5e-3)


def test_points_outside_the_coverage_are_rejected():
    corners = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
    normals = np.tile([0.0, 0, 1], (3, 1))
    pts = np.array([[0.2, 0.2, 0.5], [0.8, 0.8, 0.5], [-0.1, 0.2, 0.5], [0.2, 0.2, -0.5]])
    _, _, inside = project_to_coverage(pts, np.tile(corners, (4, 1, 1)), np.tile(normals, (4, 1, 1)), 1e-9)
    assert inside.tolist() == [True, False, False, False]


def test_closest_point_agrees_with_dense_sampling():
    rng = np.random.default_rng(2)
    P = 300
    a, b, c = (rng.normal(size=(P, 3)) for _ in range(3))
    p = 2 * rng.normal(size=(P, 3))
    bary = closest_point_on_triangles(p, a, b, c)
    assert np.all(bary >= -1e-12) and np.allclose(bary.sum(1), 1)
    got = np.linalg.norm(p - (bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c), axis=1)
    s = np.linspace(0, 1, 121)
    U, V = np.meshgrid(s, s)
    ok = U + V <= 1
    B = np.stack([1 - U[ok] - V[ok], U[ok], V[ok]], 1)
    for k in range(0, P, 15):
        pts = B @ np.stack([a[k], b[k], c[k]])
        brute = np.linalg.norm(pts - p[k], axis=1).min()
        assert got[k] <= brute + 1e-12
        assert got[k] >= brute - 0.02


def test_box_grid_matches_brute_force():
    rng = np.random.default_rng(3)
    lo = rng.uniform(-5, 5, size=(400, 3))
    hi = lo + rng.exponential(0.8, size=(400, 3))
    pts = rng.uniform(-6, 7, size=(2000, 3))
    pt, box = BoxGrid(lo, hi).query(pts)
    inside = np.all((pts[:, None] >= lo[None]) & (pts[:, None] <= hi[None]), axis=-1)
    want = set(zip(*np.nonzero(inside)))
    assert set(zip(pt.tolist(), box.tolist())) == want


def test_coverage_index_matches_brute_force_over_all_triangles():
    rng = np.random.default_rng(4)
    xs = np.linspace(0, 3, 13)
    X, Y = np.meshgrid(xs, xs, indexing="ij")
    Z = 0.2 * np.sin(2 * X) * np.cos(1.5 * Y)
    verts = np.stack([X, Y, Z], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    a = (i * 13 + j).ravel()
    tris = np.concatenate([np.stack([a, a + 13, a + 14], 1), np.stack([a, a + 14, a + 1], 1)])
    normals = vertex_normals(verts, tris, np.ones(len(tris), bool), np.arange(len(verts)))
    pts = np.column_stack([rng.uniform(0, 3, 500), rng.uniform(0, 3, 500), rng.uniform(-0.2, 1.2, 500)])
    pts[:100, 0] = rng.choice(xs, 100)             # exactly above grid lines: on box boundaries
    pts[50:150, 1] = rng.choice(xs, 100)
    index = CoverageIndex(verts, normals, tris, np.ones(len(tris), bool), max_distance=1.0)
    pt, tri, bary, dist = index.query(pts, 1e-9)
    # Brute force: every (point, triangle) pair through the same projection.
    P, T = len(pts), len(tris)
    pp = np.repeat(pts, T, axis=0)
    tt = np.tile(np.arange(T), P)
    b, _, inside = project_to_coverage(pp, verts[tris[tt]], normals[tris[tt]], 1e-9)
    foot = np.einsum("kc,kcd->kd", b, verts[tris[tt]])
    inside &= np.linalg.norm(pp - foot, axis=1) <= 1.0
    want = set(zip(np.repeat(np.arange(P), T)[inside].tolist(), tt[inside].tolist()))
    assert set(zip(pt.tolist(), tri.tolist())) == want
    assert len(want) > P // 2
