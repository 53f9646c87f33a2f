"""Triangle meshes of the environment, static or animated per frame."""

from __future__ import annotations

import numpy as np

from .. import constants as C
from ..errors import MeshError
from .triangles import vertex_normals


def _check_vertices(vertices, what="vertices"):
    v = np.asarray(vertices, dtype=float)
    if v.ndim not in (2, 3) or v.shape[-1] != 3:
        raise MeshError(f"{what} must have shape (V,3) or (F,V,3), got {v.shape}")
    if v.shape[-2] == 0:
        raise MeshError(f"the mesh has no {what}: give the environment at least one triangle")
    if not np.all(np.isfinite(v)):
        bad = np.argwhere(~np.isfinite(v))[0]
        raise MeshError(f"{what} contain NaN or inf (first at index {tuple(bad.tolist())}): "
                        "fix or remove the broken geometry")
    return v


class TriMesh:
    """A triangle mesh whose vertices are static or animated.

    Parameters
    ----------
    vertices : (V,3) float, or (F,V,3) for an environment that moves or deforms
        over the F frames of the motion. World space, same units as the motion.
    triangles : (T,3) int, indices into the vertices, counter-clockwise seen
        from the side the normals point to.

    Degenerate triangles (zero area in any frame) are skipped and counted in
    ``degenerate_count``; they are not an error.
    """

    def __init__(self, vertices, triangles):
        v = _check_vertices(vertices)
        t = np.asarray(triangles)
        if t.ndim != 2 or t.shape[1] != 3:
            raise MeshError(f"triangles must have shape (T,3), got {t.shape}")
        if t.shape[0] == 0:
            raise MeshError("the mesh has no triangles: give the environment at least one face")
        if not np.issubdtype(t.dtype, np.integer):
            if not np.all(np.isfinite(t)) or np.any(t != np.round(t)):
                raise MeshError("triangles must hold integer vertex indices")
        t = t.astype(np.int64)
        V = v.shape[-2]
        if t.min() < 0 or t.max() >= V:
            raise MeshError(f"triangle indices must lie in 0..{V - 1}, found {t.min()}..{t.max()}")
        self.triangles = t
        rest = v[0] if v.ndim == 3 else v
        self.scale = float(np.linalg.norm(rest.max(axis=0) - rest.min(axis=0))) or 1.0
        keys = np.round(rest / (C.WELD_TOLERANCE * self.scale)).astype(np.int64)
        order = np.lexsort(keys.T[::-1])                          # rows sorted, then grouped: a fast unique
        step = np.r_[True, np.any(keys[order[1:]] != keys[order[:-1]], axis=1)]
        self.weld = np.empty(len(keys), np.int64)
        self.weld[order] = np.cumsum(step) - 1
        self.weld = self.weld.reshape(-1)
        # A representative vertex index per welded group.
        rep = np.zeros(self.weld.max() + 1, np.int64)
        rep[self.weld[::-1]] = np.arange(V)[::-1]
        self.weld = rep[self.weld]
        self._set_vertices(v)

    def _set_vertices(self, v):
        self.vertices = v
        self.animated = v.ndim == 3
        frames = v if self.animated else v[None]
        a, b, c = (frames[:, self.triangles[:, k]] for k in range(3))
        area2 = np.linalg.norm(np.cross(b - a, c - a), axis=-1).min(axis=0)
        self.valid = area2 > C.DEGENERATE_AREA * self.scale ** 2
        self.degenerate_count = int((~self.valid).sum())
        if not self.valid.any():
            raise MeshError("every triangle of the mesh is degenerate (zero area): "
                            "the environment has no usable surface")
        self._normals = {}

    def with_vertices(self, vertices):
        """The same triangles over new vertices (V,3) or (F,V,3); cheap."""
        v = _check_vertices(vertices)
        if v.shape[-2] != self.vertex_count:
            raise MeshError(f"expected {self.vertex_count} vertices, got {v.shape[-2]}")
        m = object.__new__(TriMesh)
        m.triangles, m.scale, m.weld = self.triangles, self.scale, self.weld
        m._set_vertices(v)
        return m

    @property
    def vertex_count(self):
        return self.vertices.shape[-2]

    @property
    def triangle_count(self):
        return len(self.triangles)

    @property
    def frame_count(self):
        """F for an animated mesh, None for a static one."""
        return self.vertices.shape[0] if self.animated else None

    def frame(self, f):
        """Vertices (V,3) at frame f (a static mesh ignores f)."""
        return self.vertices[f] if self.animated else self.vertices

    def normals(self, f=0):
        """Unit angle-weighted vertex normals (V,3) at frame f."""
        key = f if self.animated else 0
        n = self._normals.get(key)
        if n is None:
            n = vertex_normals(self.frame(f), self.triangles, self.valid, self.weld)
            if len(self._normals) > 4:
                self._normals.clear()
            self._normals[key] = n
        return n

    def __repr__(self):
        kind = f"animated over {self.frame_count} frames" if self.animated else "static"
        return (f"TriMesh({self.vertex_count} vertices, {self.triangle_count} triangles, {kind}, "
                f"{self.degenerate_count} degenerate)")
