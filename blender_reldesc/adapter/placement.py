"""Where objects are: world matrices, and points carried into world space.

Issue 34 (placement) grows this into one rule for object matrices at bind and at bake time.
"""

from __future__ import annotations

import numpy as np


def world_matrix(ob):
    return np.array(ob.matrix_world, dtype=float)


def to_world(matrix, points):
    if np.array_equal(matrix, np.eye(4)):             # a floor at the origin: no product per frame
        return np.asarray(points, dtype=float)
    return points @ matrix[:3, :3].T + matrix[:3, 3]



def to_world_each(parts):
    """``to_world`` of each ``(matrix, points)`` of ``parts``: the arrays, in order."""
    return [to_world(m, p) for m, p in parts]
