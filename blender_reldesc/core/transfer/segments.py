"""Segmented objects for transfer to a novel object (Al-Ashqar's thesis, §4.2).

A template object (the one the motion was bound with) and a new object share segment labels:
named parts (a chair's ``seat``, ``back``, ``legs``), given per triangle. Where the labels come
from is the Blender side's business (vertex groups, face attributes, separate objects named
alike); without labels, ``label_parts`` cuts an object into its connected parts and
``match_parts`` names the new object's parts after the template's by where they sit in the
object. ``align`` then finds the rigid motion that brings the new object's segment centres
onto the template's (the thesis' rigid ICP on segment centres, solved in closed form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import RelDescError


class TransferError(RelDescError):
    """A transfer to a novel object cannot be done as asked; the message says why."""


@dataclass
class Segmented:
    """An object's triangles with a segment label each: ``vertices (V,3)``, ``triangles (T,3)``,
    ``labels (T,)`` indices into ``names`` (-1: no segment)."""

    vertices: np.ndarray
    triangles: np.ndarray
    labels: np.ndarray
    names: list

    def __post_init__(self):
        self.vertices = np.asarray(self.vertices, float).reshape(-1, 3)
        self.triangles = np.asarray(self.triangles, np.int64).reshape(-1, 3)
        self.labels = np.asarray(self.labels, np.int64).reshape(-1)
        self.names = [str(n) for n in self.names]
        if len(self.labels) != len(self.triangles):
            raise TransferError(f"one segment label per triangle is needed ({len(self.triangles)}), "
                                f"got {len(self.labels)}")
        if not len(self.triangles):
            raise TransferError("the object has no triangles")
        if not np.all(np.isfinite(self.vertices)):
            raise TransferError("the object's vertices contain NaN or inf")

    def areas(self):
        c = self.vertices[self.triangles]
        return 0.5 * np.linalg.norm(np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), axis=1)

    def mask(self, name):
        """(T,) bool: the triangles of segment ``name``."""
        return self.labels == self.names.index(name)

    def centres(self, names=None):
        """(S,3) the area-weighted centre of each segment of ``names`` (default: all)."""
        names = self.names if names is None else names
        c = self.vertices[self.triangles].mean(axis=1)
        a = self.areas() + 1e-300
        out = []
        for n in names:
            m = self.mask(n)
            if not m.any():
                raise TransferError(f"segment '{n}' has no triangles")
            out.append((c[m] * a[m, None]).sum(axis=0) / a[m].sum())
        return np.array(out).reshape(-1, 3)

    def moved(self, rotation, translation):
        """The object moved rigidly: x -> rotation x + translation."""
        return Segmented(self.vertices @ np.asarray(rotation, float).T + translation, self.triangles, self.labels,
                         list(self.names))


def shared_segments(template, novel):
    """The segment names both objects have (in the template's order), or ``TransferError``."""
    names = [n for n in template.names if n in novel.names and template.mask(n).any() and novel.mask(n).any()]
    if not names:
        raise TransferError("the two objects share no segment label: name their parts alike (vertex groups or "
                            "separate parts with the same names), or use unlabelled objects whose connected "
                            "parts can be matched")
    return names


def label_parts(vertices, triangles, name="part"):
    """A ``Segmented`` whose segments are the connected parts of the mesh (vertices welded
    within a millionth of its size), named ``part.000``, ``part.001``, ... from largest area."""
    vertices = np.asarray(vertices, float).reshape(-1, 3)
    triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
    span = float(np.linalg.norm(vertices.max(axis=0) - vertices.min(axis=0))) if len(vertices) else 1.0
    key = np.round(vertices / max(span * 1e-6, 1e-12)).astype(np.int64)
    _, weld = np.unique(key, axis=0, return_inverse=True)
    weld = weld.reshape(-1)
    t = weld[triangles]
    rows = np.concatenate([t[:, 0], t[:, 1], t[:, 2]])
    cols = np.concatenate([t[:, 1], t[:, 2], t[:, 0]])
    n = int(weld.max()) + 1 if len(weld) else 0
    _, comp = connected_components(coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)), directed=False)
    part = comp[t[:, 0]]
    seg = Segmented(vertices, triangles, part, [f"{name}.{k:03d}" for k in range(int(part.max()) + 1)])
    area = np.bincount(part, weights=seg.areas(), minlength=len(seg.names))
    order = np.argsort(-area, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return Segmented(vertices, triangles, rank[part], [f"{name}.{k:03d}" for k in range(len(order))])


def match_parts(template, novel):
    """``novel`` with its segments renamed after the template's: each template segment gets
    the novel segment whose centre sits at the most similar place in its object (centres in
    each object's bounding box, scaled to a unit cube; a one-to-one assignment). Novel
    segments left over are unlabelled (-1)."""
    def placed(seg):
        lo, hi = seg.vertices.min(axis=0), seg.vertices.max(axis=0)
        return (seg.centres() - lo) / np.maximum(hi - lo, 1e-12)

    cost = np.linalg.norm(placed(template)[:, None] - placed(novel)[None], axis=-1)
    rows, cols = linear_sum_assignment(cost)
    labels = np.full(len(novel.labels), -1)
    for r, c in zip(rows.tolist(), cols.tolist()):
        labels[novel.labels == c] = r
    return Segmented(novel.vertices, novel.triangles, labels, list(template.names))


#: Segment centres whose offsets across ``up`` are below this fraction of their spread are
#: stacked: they fix no turn about up.
STACKED = 0.1


def align(template, novel, names=None, up=(0.0, 0.0, 1.0)):
    """``(R (3,3), t (3,))``: the rigid motion x -> R x + t that brings the novel object's
    segment centres closest to the template's (least squares). With three or more segments
    whose centres span a plane, any rotation; with two (or centres on a line), a turn about
    ``up`` only (an object is not tipped over to match two points); with one, a translation."""
    names = shared_segments(template, novel) if names is None else list(names)
    a, b = novel.centres(names), template.centres(names)
    ca, cb = a.mean(axis=0), b.mean(axis=0)
    x, y = a - ca, b - cb
    up = np.asarray(up, float) / np.linalg.norm(up)
    s = np.linalg.svd(x, compute_uv=False) if len(x) else np.zeros(3)
    planar = len(names) >= 3 and s[1] > 1e-6 * max(s[0], 1e-300)
    if planar:
        u, _, vt = np.linalg.svd(x.T @ y)
        R = (u @ vt).T
        if np.linalg.det(R) < 0:
            u[:, -1] *= -1
            R = (u @ vt).T
    elif len(names) >= 2:
        # Turn about up: the angle between the centres' offsets projected on the ground plane.
        # (the least-squares angle: atan2 of the summed cross and dot products).
        xp, yp = x - np.outer(x @ up, up), y - np.outer(y @ up, up)
        angle = np.arctan2(np.sum(np.cross(xp, yp) @ up), np.sum(xp * yp))
        # Centres stacked along up (a table's top over its legs) fix no turn: the angle would
        # be that of rounding noise (a table moved without turning came out turned 17°).
        spread = max(np.linalg.norm(x), np.linalg.norm(y))
        if min(np.linalg.norm(xp), np.linalg.norm(yp)) < STACKED * spread:
            angle = 0.0
        K = np.array([[0, -up[2], up[1]], [up[2], 0, -up[0]], [-up[1], up[0], 0]])
        R = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K
    else:
        R = np.eye(3)
    return R, cb - R @ ca
