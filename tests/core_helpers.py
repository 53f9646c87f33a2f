"""Helpers shared by the core tests."""

import numpy as np

from blender_reldesc.core import TriMesh, bind
from blender_reldesc.core import synthetic as S


def random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def walk_under_a_slab(convention, below=0.08, frames=150, edit=None):
    """A generated walk of a ``convention_rig`` over a floor, a 2 m x 2 m slab 0.1 m thick bound 6 m
    up over the middle of its path and lowered after binding to ``below`` under the top of the head
    while the hips pass under it (the contacts paper's Fig. 9): skeleton, motion, binding, the
    lowered mesh, the slab's box and the rig's roles. ``edit(motion, skeleton, roles)`` changes the
    motion in place before it is bound (an arm raised)."""
    sk, off, roles = S.convention_rig(convention)
    motion = S.locomotion(sk, off, roles, frames=frames).copy()
    if edit is not None:
        edit(motion, sk, roles)
    lo, hi = motion.reshape(-1, 3).min(0) - 1.5, motion.reshape(-1, 3).max(0) + 1.5
    floor = S.grid(hi[0] - lo[0], hi[1] - lo[1], int((hi[0] - lo[0]) / 0.2), int((hi[1] - lo[1]) / 0.2),
                   origin=(lo[0], lo[1]), z=motion[..., 2].min() - 0.005)
    mid = motion[frames // 2, 0]
    verts, tris, (_, (a, b)) = S.merge(floor, S.box((mid[0], mid[1], 6.0), (2.0, 2.0, 0.1), subdivisions=4))
    mesh = TriMesh(verts, tris)
    binding = bind(sk, motion, mesh)
    under = np.all(np.abs(motion[:, 0, :2] - mid[:2]) < 1.0, axis=1)
    bottom = float(motion[under, roles.index("head_end"), 2].max()) - below
    v = verts.copy()
    v[a:b, 2] += bottom + 0.05 - 6.0
    box = (np.r_[mid[:2] - 1.0, bottom], np.r_[mid[:2] + 1.0, bottom + 0.1])
    return sk, motion, binding, mesh.with_vertices(v), box, roles


def walk_past_a_post(convention, width=0.3, side=0.0, depth=None, frames=150, gait="walk"):
    """A generated walk of a ``convention_rig`` over a floor and a post ``width`` wide (``depth``
    long along the walk, default ``width``) and 2.5 m tall, bound 8 m up and set down on the floor
    after binding, its centre ``side`` metres left of the hips' path at the middle frame (a wall
    across the path when ``width`` is wide): skeleton, motion, binding, the edited mesh, the post's
    box and the rig's roles. ``gait``: ``synthetic.GAITS`` ("in place": the post where it stands)."""
    sk, off, roles = S.convention_rig(convention)
    motion = S.locomotion(sk, off, roles, frames=frames, gait=gait).copy()
    lo, hi = motion.reshape(-1, 3).min(0) - 1.5, motion.reshape(-1, 3).max(0) + 1.5
    z0 = motion[..., 2].min() - 0.005
    floor = S.grid(hi[0] - lo[0], hi[1] - lo[1], int((hi[0] - lo[0]) / 0.2), int((hi[1] - lo[1]) / 0.2),
                   origin=(lo[0], lo[1]), z=z0)
    mid = motion[frames // 2, 0]
    size = np.array([width if depth is None else depth, width, 2.5])   # the walks go along +x
    centre = np.array([mid[0], mid[1] + side])
    verts, tris, (_, (a, b)) = S.merge(floor, S.box((centre[0], centre[1], 8.0), tuple(size), subdivisions=4))
    mesh = TriMesh(verts, tris)
    binding = bind(sk, motion, mesh)
    v = verts.copy()
    v[a:b, 2] += (z0 + 1.25) - 8.0
    box = (np.r_[centre - 0.5 * size[:2], z0], np.r_[centre + 0.5 * size[:2], z0 + 2.5])
    return sk, motion, binding, mesh.with_vertices(v), box, roles
