"""Projection onto coverages, closest points, the spatial grid and the box tree against brute force."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from blender_reldesc.core.geometry import (closest_point_on_triangles, normalize, project_to_coverage,
                                           vertex_normals)
from blender_reldesc.core.geometry import CoverageIndex
from blender_reldesc.core.geometry import BoxGrid, BoxTree, Collider
from blender_reldesc.core import TriMesh
from blender_reldesc.core import synthetic as S


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


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 700), leaf=st.sampled_from([1, 2, 8]))
def test_box_tree_matches_brute_force(seed, count, leaf):
    # Boxes of very different sizes (a tree must not care), points inside, outside and on
    # box faces; both the stabbing query and the within-radius query.
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-5, 5, size=(count, 3))
    hi = lo + rng.exponential(0.8, size=(count, 3)) * rng.choice([0.01, 1.0, 10.0], size=(count, 1))
    pts = np.concatenate([rng.uniform(-6, 7, size=(300, 3)), lo[:50], hi[:50]])
    tree = BoxTree(lo, hi, leaf_size=leaf)
    pt, box = tree.query(pts)
    inside = np.all((pts[:, None] >= lo[None]) & (pts[:, None] <= hi[None]), axis=-1)
    assert set(zip(pt.tolist(), box.tolist())) == set(zip(*np.nonzero(inside)))
    assert np.all(np.diff(pt) >= 0)
    radius = rng.uniform(0, 1.5, size=len(pts))
    pt, box = tree.query(pts, radius)
    gap = np.maximum(np.maximum(lo[None] - pts[:, None], pts[:, None] - hi[None]), 0.0)
    near = np.einsum("pbk,pbk->pb", gap, gap) <= radius[:, None] ** 2
    assert set(zip(pt.tolist(), box.tolist())) == set(zip(*np.nonzero(near)))


def test_box_tree_and_collider_answer_the_same_in_chunks(monkeypatch):
    rng = np.random.default_rng(9)
    lo = rng.uniform(-5, 5, size=(300, 3))
    hi = lo + rng.exponential(0.8, size=(300, 3))
    pts = rng.uniform(-6, 7, size=(500, 3))
    tree = BoxTree(lo, hi)
    whole = tree.query(pts, 0.3)
    verts, tris = np.array([[0, 0, 0], [4, 0, 0], [0, 4, 0], [4, 4, 0.5]], float), np.array([[0, 1, 2], [1, 3, 2]])
    valid = np.ones(2, bool)
    normals = vertex_normals(verts, tris, valid, np.arange(4))
    collider = Collider(verts, normals, tris, valid, 1.0)
    once = collider.closest(pts)
    monkeypatch.setattr(BoxTree, "CHUNK", 37)
    for a, b in zip(whole, tree.query(pts, 0.3)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(once, collider.closest(pts)):
        np.testing.assert_array_equal(a, b)


def test_box_tree_of_nothing_finds_nothing():
    pt, box = BoxTree(np.zeros((0, 3)), np.zeros((0, 3))).query(np.zeros((4, 3)))
    assert pt.size == 0 and box.size == 0


def test_collider_finds_the_closest_triangle_of_a_fine_mesh_like_brute_force():
    # A finely cut wavy sheet (small triangles, a band many triangles wide): the search that
    # starts near each point and widens only when needed returns the same triangle as
    # testing every triangle in the band.
    rng = np.random.default_rng(11)
    n = 40
    xs = np.linspace(0, 2, n + 1)
    X, Y = np.meshgrid(xs, xs, indexing="ij")
    verts = np.stack([X, Y, 0.1 * np.sin(3 * X) * np.cos(2 * Y)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    a = (i * (n + 1) + j).ravel()
    tris = np.concatenate([np.stack([a, a + n + 1, a + n + 2], 1), np.stack([a, a + n + 2, a + 1], 1)])
    valid = np.ones(len(tris), bool)
    normals = vertex_normals(verts, tris, valid, np.arange(len(verts)))
    band = 0.3
    pts = np.column_stack([rng.uniform(-0.3, 2.3, 400), rng.uniform(-0.3, 2.3, 400), rng.uniform(-0.5, 0.5, 400)])
    collider = Collider(verts, normals, tris, valid, band)
    sd, normal, tri, bary = collider.closest(pts)
    # Lower bounds of the distances (as a solver knows them from the last step) change nothing.
    known = np.where(np.isfinite(sd), np.abs(sd), band)
    near = known * rng.uniform(0.0, 1.0, len(pts))
    far = known * rng.uniform(1.0, 3.0, len(pts))
    for hints in ((near, None), (None, far), (near, far)):
        for a, b in zip((sd, normal, tri, bary), collider.closest(pts, *hints)):
            np.testing.assert_array_equal(a, b)
    # ... nor do a few points at a time (a solver step's collisions: one k-d tree ball query).
    for k in range(0, len(pts), 7):
        rows = slice(k, k + 7)
        for hints in ((None, far[rows]), (near[rows], far[rows])):
            for a, b in zip((sd, normal, tri, bary), collider.closest(pts[rows], *hints)):
                np.testing.assert_array_equal(a[rows], b)
    corners = verts[tris]
    for k in range(len(pts)):
        b = closest_point_on_triangles(np.broadcast_to(pts[k], (len(tris), 3)), *(corners[:, c] for c in range(3)))
        d = np.linalg.norm(np.einsum("tc,tcd->td", b, corners) - pts[k], axis=1)
        lo, hi = corners.min(axis=1) - pts[k], pts[k] - corners.max(axis=1)
        gap = np.maximum(np.maximum(lo, hi), 0.0)
        candidates = np.einsum("tk,tk->t", gap, gap) <= band * band
        if not candidates.any():
            assert np.isinf(sd[k]) and tri[k] == -1
            continue
        best = np.flatnonzero(candidates)[np.argmin(d[candidates])]
        assert abs(abs(sd[k]) - d[best]) < 1e-12
        assert np.isclose(d[tri[k]], d[best], atol=1e-12)


def test_collider_on_triangles_of_very_different_sizes_and_ties_agrees_with_brute_force():
    # Long slivers beside a finely cut patch (one triangle's radius 40 times another's: the
    # k-d search's per-triangle bounds and its fall-back to the box tree), and points exactly
    # over grid vertices and edges (ties between triangles go to the lowest id): every point's
    # triangle, distance and sign as testing every triangle, and the same a few at a time.
    rng = np.random.default_rng(4)
    fine = S.grid(1.0, 1.0, 20, 20, origin=(0.0, 0.0))
    verts = [fine[0], np.array([[1.0, 0.0, 0.0], [3.0, 0.0, 0.02], [3.0, 1.0, 0.0], [1.0, 1.0, 0.05],
                                [3.0, 3.0, 0.1], [0.0, 3.0, -0.05]])]
    base = len(fine[0])
    tris = [fine[1], base + np.array([[0, 1, 2], [0, 2, 3], [3, 2, 4], [3, 4, 5]])]
    verts, tris = np.concatenate(verts), np.concatenate(tris)
    verts[:base, 2] += 0.01 * rng.normal(size=base)
    valid = np.ones(len(tris), bool)
    normals = vertex_normals(verts, tris, valid, np.arange(len(verts)))
    band = 0.4
    on_grid = np.column_stack([np.repeat(np.linspace(0.0, 1.0, 11), 11), np.tile(np.linspace(0.0, 1.0, 11), 11),
                               np.full(121, 0.07)])
    pts = np.concatenate([on_grid, np.column_stack([rng.uniform(-0.3, 3.3, 600), rng.uniform(-0.3, 3.3, 600),
                                                    rng.uniform(-0.45, 0.45, 600)])])
    collider = Collider(verts, normals, tris, valid, band)
    sd, normal, tri, bary = collider.closest(pts)
    for k in range(0, len(pts), 9):
        rows = slice(k, k + 9)
        for a, b in zip((sd, normal, tri, bary), collider.closest(pts[rows])):
            np.testing.assert_array_equal(a[rows], b)
    corners = verts[tris]
    for k in range(len(pts)):
        b = closest_point_on_triangles(np.broadcast_to(pts[k], (len(tris), 3)), *(corners[:, c] for c in range(3)))
        d = np.linalg.norm(np.einsum("tc,tcd->td", b, corners) - pts[k], axis=1)
        gap = np.maximum(np.maximum(corners.min(axis=1) - pts[k], pts[k] - corners.max(axis=1)), 0.0)
        candidates = np.einsum("tk,tk->t", gap, gap) <= band * band
        if not candidates.any():
            assert np.isinf(sd[k]) and tri[k] == -1
            continue
        if d[candidates].min() > band:
            continue                                 # beyond the band: either answer is allowed
        rounded = np.round(d, 12)
        best = np.flatnonzero(candidates & (rounded == rounded[candidates].min())).min()
        assert tri[k] == best, k
        assert abs(abs(sd[k]) - d[best]) < 1e-12


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


def _coverage_brute_force(verts, tris, normals, pts, max_distance):
    P, T = len(pts), len(tris)
    pp = np.repeat(pts, T, axis=0)
    tt = np.tile(np.arange(T), P)
    b, _, inside = project_to_coverage(pp, verts[tris[tt]], normals[tris[tt]], 1e-9)
    foot = np.einsum("kc,kcd->kd", b, verts[tris[tt]])
    inside &= np.linalg.norm(pp - foot, axis=1) <= max_distance
    return set(zip(np.repeat(np.arange(P), T)[inside].tolist(), tt[inside].tolist()))


@pytest.mark.parametrize("grid_budget, pairs", [(48, 1 << 19), (0, 1 << 19), (48, 64)])
def test_coverage_index_on_a_thin_box_and_a_steep_fine_slope_matches_brute_force(monkeypatch, grid_budget, pairs):
    # Patches of triangles whose normals cancel (the two faces of a thin wall) and thin
    # coverage columns leaning across every world axis (a fine, steep, twisted slope): the
    # boxes in the surface's own frame must never lose a triangle. The slabs are found by the
    # uniform grid, or by the box tree (a budget of 0 sends every query there); the triangles of
    # a patch are tested in parts of any size.
    monkeypatch.setattr(CoverageIndex, "GRID_BUDGET", grid_budget)
    monkeypatch.setattr(CoverageIndex, "PAIRS", pairs)
    from blender_reldesc.core import synthetic as S
    from blender_reldesc.core.geometry import TriMesh
    rng = np.random.default_rng(5)
    wall = TriMesh(*S.box((0, 0, 1.0), (2.0, 0.02, 2.0), subdivisions=6))
    n = 30
    xs = np.linspace(0, 1.5, n + 1)
    X, Y = np.meshgrid(xs, xs, indexing="ij")
    Z = 0.6 * X + 0.4 * Y + 0.08 * np.sin(5 * X) * np.cos(4 * Y)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    a = (i * (n + 1) + j).ravel()
    slope = TriMesh(np.stack([X, Y, Z], -1).reshape(-1, 3),
                    np.concatenate([np.stack([a, a + n + 1, a + n + 2], 1), np.stack([a, a + n + 2, a + 1], 1)]))
    for mesh, lo, hi in ((wall, (-1.2, -0.6, -0.2), (1.2, 0.6, 2.2)), (slope, (0, 0, 0), (1.5, 1.5, 2.5))):
        pts = rng.uniform(lo, hi, size=(300, 3))
        normals = mesh.normals()
        index = CoverageIndex(mesh.vertices, normals, mesh.triangles, mesh.valid, max_distance=1.0)
        pt, tri, _, _ = index.query(pts, 1e-9)
        want = _coverage_brute_force(mesh.vertices, mesh.triangles, normals, pts, 1.0)
        assert set(zip(pt.tolist(), tri.tolist())) == want
        assert len(want) > 50
        assert np.all(np.diff(pt) >= 0)
        assert (index._tree is not None) == (grid_budget == 0)


def test_coverage_index_of_a_fine_prop_on_a_large_floor_falls_back_to_the_tree():
    # Slabs of very different sizes (a finely cut prop on two huge floor triangles) crowd the
    # uniform grid's cells: its query gives up within its budget and the box tree answers.
    from blender_reldesc.core import synthetic as S
    from blender_reldesc.core.geometry import TriMesh
    rng = np.random.default_rng(8)
    floor = (np.array([[-50.0, -50, 0], [50, -50, 0], [50, 50, 0], [-50, 50, 0]]), np.array([[0, 1, 2], [0, 2, 3]]))
    prop = S.box((0.0, 0.0, 0.3), (0.4, 0.4, 0.4), subdivisions=12)
    verts, tris, _ = S.merge(floor, prop)
    mesh = TriMesh(verts, tris)
    normals = mesh.normals()
    index = CoverageIndex(verts, normals, tris, mesh.valid, max_distance=0.5)
    pts = rng.uniform((-0.5, -0.5, 0.0), (0.5, 0.5, 0.8), size=(400, 3))
    assert index.grid.query(pts, budget=CoverageIndex.GRID_BUDGET) is None
    pt, tri, _, _ = index.query(pts, 1e-9)
    assert set(zip(pt.tolist(), tri.tolist())) == _coverage_brute_force(verts, tris, normals, pts, 0.5)
    assert index._tree is not None


def test_geodesic_searches_agree_with_dijkstra():
    # A* (and the greedy straight walk, which may only say "near") against scipy's Dijkstra
    # on the edge graph of a bumpy grid with a slit cut into it (paths must go round).
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra
    from blender_reldesc.core import synthetic as S
    from blender_reldesc.core.geometry import TriMesh
    from blender_reldesc.core.descriptors.sampling import GeodesicSampler
    rng = np.random.default_rng(7)
    verts, tris = S.grid(2.0, 2.0, 24, 24, height=S.hills(0.15, 1.0))
    centre = verts[tris].mean(axis=1)
    slit = (np.abs(centre[:, 0] - 1.0) < 0.05) & (centre[:, 1] > 0.4)
    mesh = TriMesh(verts, tris[~slit])
    sampler = GeodesicSampler(mesh.vertices, mesh.triangles, mesh.valid, mesh.weld)
    indptr = np.asarray(sampler._indptr)
    graph = csr_matrix((np.asarray(sampler._len), np.asarray(sampler._nbr), indptr),
                       shape=(len(verts), len(verts)))
    T = mesh.triangle_count
    agree = near = 0
    for _ in range(150):
        t, u = rng.integers(T), rng.dirichlet(np.ones(3))
        c = u @ mesh.vertices[mesh.triangles[t]]
        targets = []
        for _ in range(rng.integers(1, 4)):
            tt = int(rng.integers(T))
            targets.append((tt, tuple((rng.dirichlet(np.ones(3)) @ mesh.vertices[mesh.triangles[tt]]).tolist())))
        limit = float(rng.uniform(0.05, 1.5))
        starts = mesh.weld[mesh.triangles[t]]
        dist = dijkstra(graph, indices=starts, limit=np.inf).T + np.linalg.norm(mesh.vertices[starts] - c, axis=1)
        dist = dist.min(axis=1)                                           # (V,) from the point c
        best = min(dist[w] + np.linalg.norm(mesh.vertices[w] - np.asarray(p))
                   for tt, p in targets for w in mesh.weld[mesh.triangles[tt]])
        got = sampler._within(tuple(c.tolist()), t, targets, limit)
        assert got == (best <= limit)
        for target in targets:
            if sampler._straight(tuple(c.tolist()), t, target, limit):
                assert got
        agree += 1
        near += got
    assert 20 < near < 130


def test_band_filter_never_drops_a_point_with_a_triangle_box_in_the_band():
    # Boxes of very different sizes (a floor of large triangles, a finely cut wavy sheet, a
    # thin pole): a point the cell filter rules out has no triangle box within the band, and
    # the filter rules out most of the points far from everything.
    rng = np.random.default_rng(5)
    parts = [S.grid(6.0, 6.0, 3, 3, origin=(-3.0, -3.0)),
             S.grid(1.0, 1.0, 30, 30, origin=(0.5, 0.5), height=lambda x, y: 0.6 + 0.05 * np.sin(9 * x)),
             S.box((-1.0, 1.0, 1.0), (0.02, 0.02, 2.0), subdivisions=1)]
    verts, tris, _ = S.merge(*parts)
    mesh = TriMesh(verts, tris)
    band = 0.17
    collider = Collider(mesh.vertices, mesh.normals(), mesh.triangles, mesh.valid, band)
    pts = rng.uniform([-3.5, -3.5, -0.5], [3.5, 3.5, 2.5], size=(4000, 3))
    pts[:200] = verts[rng.integers(len(verts), size=200)] + rng.uniform(-band, band, (200, 3))
    kept = collider._in_band(pts)
    corners = verts[tris[mesh.valid]]
    lo, hi = corners.min(axis=1), corners.max(axis=1)
    gap = np.maximum(np.maximum(lo[None] - pts[:, None], pts[:, None] - hi[None]), 0.0)
    near = (np.einsum("ptk,ptk->pt", gap, gap) <= band * band).any(axis=1)
    assert not np.any(near & ~kept)
    assert np.sum(~kept) > 0.5 * np.sum(~near)
    # And the search with the filter (many points, no bounds) equals the one without it.
    sd, _, tri, _ = collider.closest(pts)
    few = [collider.closest(pts[i:i + Collider.FEW]) for i in range(0, len(pts), Collider.FEW)]
    np.testing.assert_array_equal(sd, np.concatenate([f[0] for f in few]))
    np.testing.assert_array_equal(tri, np.concatenate([f[2] for f in few]))


def test_a_few_points_filtered_by_the_band_cells_get_what_the_search_gives(monkeypatch):
    # A live frame's 27 targets: the points the cells rule out are not searched, and every answer
    # (beyond-the-band ones from a triangle whose box is in the band included) is the search's.
    rng = np.random.default_rng(6)
    parts = [S.grid(6.0, 6.0, 3, 3, origin=(-3.0, -3.0)),
             S.box((1.0, 1.0, 0.4), (0.6, 0.3, 0.8), subdivisions=0),
             S.grid(1.0, 1.0, 10, 10, origin=(-2.0, 0.5), height=lambda x, y: 0.5 + 0.4 * x)]
    verts, tris, _ = S.merge(*parts)
    mesh = TriMesh(verts, tris)
    collider = Collider(mesh.vertices, mesh.normals(), mesh.triangles, mesh.valid, 0.18)
    pts = rng.uniform([-3.0, -3.0, -0.3], [3.0, 3.0, 1.8], size=(27 * 30, 3))
    filtered = [collider.closest(pts[i:i + 27]) for i in range(0, len(pts), 27)]
    ruled_out = ~collider._in_band(pts)
    assert 0.2 < ruled_out.mean() < 0.9
    monkeypatch.setattr(Collider, "_in_band", lambda self, p: np.ones(len(p), bool))
    for i, got in zip(range(0, len(pts), 27), filtered):
        for a, b in zip(got, collider.closest(pts[i:i + 27])):
            np.testing.assert_array_equal(a, b)
    assert np.isinf(np.concatenate([f[0] for f in filtered])[ruled_out]).all()


def test_segments_through_a_thin_slab_are_found_and_dips_are_not():
    from blender_reldesc.core.geometry.triangles import segments_hit_triangles
    # One triangle, segments through it, beside it, stopping short, and lying in its plane.
    a, b, c = np.array([0.0, 0, 0]), np.array([1.0, 0, 0]), np.array([0.0, 1, 0])
    p = np.array([[0.2, 0.2, 1.0], [0.9, 0.9, 1.0], [0.2, 0.2, 1.0], [0.0, 0.1, 0.0], [0.2, 0.2, 0.0]])
    q = np.array([[0.2, 0.2, -1.0], [0.9, 0.9, -1.0], [0.2, 0.2, 0.1], [1.0, 0.1, 0.0], [0.2, 0.2, -0.5]])
    n = len(p)
    hit = segments_hit_triangles(p, q, np.tile(a, (n, 1)), np.tile(b, (n, 1)), np.tile(c, (n, 1)))
    assert hit.tolist() == [True, False, False, False, True]
    # A 4 cm slab (a closed box): segments through it are found; one ending inside it is, as a
    # crossing of its top face, and the caller tells them apart by the ends' signed distances.
    verts, tris = S.box((0.0, 0.0, 0.5), (2.0, 2.0, 0.04), subdivisions=6)
    mesh = TriMesh(verts, tris)
    col = Collider(mesh.vertices, mesh.normals(), mesh.triangles, mesh.valid, 0.2)
    rng = np.random.default_rng(2)
    xy = rng.uniform(-0.9, 0.9, (200, 2))
    through = col.crossing(np.c_[xy, np.full(200, 0.7)], np.c_[xy, np.full(200, 0.3)])
    above = col.crossing(np.c_[xy, np.full(200, 0.9)], np.c_[xy, np.full(200, 0.55)])
    outside = col.crossing(np.c_[xy + 3.0, np.full(200, 0.7)], np.c_[xy + 3.0, np.full(200, 0.3)])
    assert through.all() and not above.any() and not outside.any()


def test_a_static_mesh_keeps_its_colliders_and_other_bands_share_their_trees():
    # Collider.of: the same band gives the same collider; another band shares the box tree and
    # the k-d tree and answers exactly as a collider built for it; an animated mesh's frames
    # are built afresh.
    rng = np.random.default_rng(2)
    mesh = TriMesh(*S.grid(2.0, 2.0, 12, 12, origin=(-1.0, -1.0), height=lambda x, y: 0.1 * np.sin(3 * x) * y))
    a = Collider.of(mesh, 0.3)
    assert Collider.of(mesh, 0.3) is a
    pts = np.column_stack([rng.uniform(-1.2, 1.2, 500), rng.uniform(-1.2, 1.2, 500), rng.uniform(-0.4, 0.4, 500)])
    a.closest(pts)                                             # builds the k-d tree
    b = Collider.of(mesh, 0.12)
    assert b is not a and b.tree is a.tree and b._kd_tree()[0] is a._kd_tree()[0]
    fresh = Collider(mesh.frame(0), mesh.normals(0), mesh.triangles, mesh.valid, 0.12)
    for x, y in zip(b.closest(pts), fresh.closest(pts)):
        np.testing.assert_array_equal(x, y)
    far = np.full(20, 0.3)
    for x, y in zip(a.closest(pts[:20], far=far), Collider.of(mesh, 0.3).closest(pts[:20], far=far)):
        np.testing.assert_array_equal(x, y)
    for band in np.linspace(0.01, 0.2, 3 * Collider.KEPT_BANDS):
        Collider.of(mesh, band)
    assert len(mesh._colliders) <= Collider.KEPT_BANDS and Collider.of(mesh, 0.3) is a
    moving = TriMesh(np.stack([mesh.vertices, mesh.vertices + [0.0, 0.0, 0.1]]), mesh.triangles)
    assert Collider.of(moving, 0.3, 1) is not Collider.of(moving, 0.3, 1)
    np.testing.assert_allclose(Collider.of(moving, 0.3, 1).closest(pts)[0],
                               fresh.with_band(0.3).closest(pts - [0.0, 0.0, 0.1])[0])


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((27, 3), (27, 3)), ((1, 8, 3), (1, 8, 3)), ((5, 1, 3), (1, 4, 3)),
                                    ((5, 3), (3,)), ((600, 3), (600, 3)), ((400, 27, 3), (400, 27, 3))])
def test_cross_of_few_and_of_many_vectors_is_numpys(shapes):
    # Up to 512 vectors the cross product comes from rolled components, more from single ones:
    # both give numpy's numbers to the bit, broadcasting included.
    from blender_reldesc.core.geometry import cross
    rng = np.random.default_rng(len(shapes[0]) + shapes[0][0])
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    np.testing.assert_array_equal(cross(a, b), np.cross(a, b))
