"""Open-space features of points around an object (Al-Ashqar's thesis, §4.3-4.4).

- ``segment_distances``: per point, its closest distance to each segment (Eq. 3 and 7).
- ``space_coverage``: the Space Coverage Feature (Zhao 2014, Eq. 4-6). From the point, n × n
  rays on a latitude-longitude grid (n = 30) of a sphere whose pole points at the nearest
  surface point give a depth map d(i, j) (inf where a ray hits nothing); the volume diameter
  function F = (d_min + e) / (d + e), e the mean finite depth (0 where a ray hits nothing,
  about 1 where it is shortest: scale invariant), is expanded in spherical harmonics and
  the feature is its power per degree l, sqrt(Σ_m a_lm²), which a rotation leaves unchanged.

The coefficients are taken by quadrature on the ray grid (the thesis used SpharmonicKit):
degrees up to n/2 - 1, as the grid's sampling theorem allows.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

try:                                                  # scipy >= 1.15; sph_harm was removed in 1.17
    from scipy.special import sph_harm_y
except ImportError:                                   # scipy 1.11-1.14
    from scipy.special import sph_harm as _sph_harm

    def sph_harm_y(n, m, theta, phi):
        return _sph_harm(m, n, phi, theta)

from ..geometry import Collider
from ..geometry.rays import RayCaster

#: Rays per latitude and per longitude of the depth map (the thesis: 30).
RAYS = 30


def _collider(vertices, triangles, mask, points):
    """A collider over the ``mask`` triangles and each point's upper bound of its distance."""
    corners = vertices[triangles[mask]]
    span = float(np.linalg.norm(corners.max(axis=(0, 1)) - corners.min(axis=(0, 1))))
    bound = cKDTree(corners.mean(axis=1)).query(points)[0] * (1.0 + 1e-9) + 1e-9 * span + 1e-12
    # Triangle centres bound the distance from above; the band covers every point's bound.
    return Collider(vertices, np.zeros_like(vertices), triangles, mask, float(bound.max(initial=1e-12))), bound


def closest_on(vertices, triangles, mask, points):
    """``distance (P,), foot (P,3)``: each point's closest point on the ``mask`` triangles."""
    points = np.asarray(points, float).reshape(-1, 3)
    collider, bound = _collider(vertices, triangles, mask, points)
    _, _, tri, bary = collider.closest(points, far=bound)
    foot = np.einsum("pk,pkd->pd", bary, vertices[triangles[tri]])
    return np.linalg.norm(points - foot, axis=1), foot


def segment_distances(points, segmented, names):
    """(P,S) the closest distance of each point to each segment of ``names``."""
    points = np.asarray(points, float).reshape(-1, 3)
    return np.stack([closest_on(segmented.vertices, segmented.triangles, segmented.mask(n), points)[0]
                     for n in names], axis=1) if len(points) else np.zeros((0, len(names)))


def _grid(n):
    """Polar and azimuth angles (n*n,) of the ray grid and its quadrature weights."""
    theta = np.pi * (np.arange(n) + 0.5) / n
    phi = 2.0 * np.pi * np.arange(n) / n
    T, P = np.meshgrid(theta, phi, indexing="ij")
    w = np.sin(T) * (np.pi / n) * (2.0 * np.pi / n)
    return T.ravel(), P.ravel(), w.ravel()


_BASES = {}


def spherical_harmonic(l, m, polar, azimuth):
    """Y_l^m at polar angle ``polar`` (from +z) and azimuth ``azimuth``: orthonormal on the
    sphere, with the Condon-Shortley phase (as scipy's ``sph_harm_y`` on every scipy)."""
    return sph_harm_y(l, m, polar, azimuth)


def _basis(n, degree):
    """(n*n, K) conjugated spherical harmonics times quadrature weights, and the degree of
    each of the K columns."""
    key = (n, degree)
    if key not in _BASES:
        T, P, w = _grid(n)
        cols, deg = [], []
        for l in range(degree + 1):
            for m in range(-l, l + 1):
                cols.append(np.conj(spherical_harmonic(l, m, T, P)) * w)
                deg.append(l)
        _BASES[key] = (np.stack(cols, axis=1), np.array(deg))
    return _BASES[key]


def depth_maps(points, caster, poles, n=RAYS):
    """(P, n*n) ray depths from each point on the latitude-longitude grid of a sphere whose
    pole is ``poles (P,3)`` (unit), inf where a ray hits nothing."""
    points = np.asarray(points, float).reshape(-1, 3)
    T, P, _ = _grid(n)
    local = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], axis=1)      # (R,3)
    z = poles / np.maximum(np.linalg.norm(poles, axis=1, keepdims=True), 1e-300)
    helper = np.where(np.abs(z[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.cross(z, x)
    frames = np.stack([x, y, z], axis=2)                                                      # columns
    dirs = np.einsum("pab,rb->pra", frames, local).reshape(-1, 3)
    depth, _ = caster.cast(np.repeat(points, len(local), axis=0), dirs)
    return depth.reshape(len(points), -1)


def space_coverage(points, vertices, triangles, mask=None, n=RAYS, degree=None, caster=None):
    """(P, degree + 1) the Space Coverage Feature of each point against the ``mask``
    triangles (default all): the power of its volume diameter function per degree
    (``degree`` default n/2 - 1)."""
    points = np.asarray(points, float).reshape(-1, 3)
    vertices = np.asarray(vertices, float)
    triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
    mask = np.ones(len(triangles), bool) if mask is None else np.asarray(mask, bool)
    degree = n // 2 - 1 if degree is None else int(degree)
    if not len(points):
        return np.zeros((0, degree + 1))
    caster = RayCaster(vertices, triangles, mask) if caster is None else caster
    _, foot = closest_on(vertices, triangles, mask, points)
    pole = foot - points
    pole[np.linalg.norm(pole, axis=1) < 1e-12] = (0.0, 0.0, -1.0)   # on the surface: any pole
    d = depth_maps(points, caster, pole, n)
    finite = np.isfinite(d)
    count = finite.sum(axis=1)
    e = np.where(count > 0, np.where(finite, d, 0.0).sum(axis=1) / np.maximum(count, 1), 1.0)
    dmin = np.where(count > 0, np.where(finite, d, np.inf).min(axis=1), 0.0)
    # A point on the surface with every hit at depth 0 has 0 / 0: the shortest ray, F = 1.
    num = np.broadcast_to(dmin[:, None] + e[:, None], d.shape)
    den = np.where(finite, d, 0.0) + e[:, None]
    F = np.where(finite, np.divide(num, den, out=np.ones_like(den), where=den > 0), 0.0)
    Y, deg = _basis(n, degree)
    a = F @ Y                                                              # (P,K) a_lm
    power = np.zeros((len(points), degree + 1))
    np.add.at(power.T, deg, (np.abs(a) ** 2).T)
    return np.sqrt(power)
