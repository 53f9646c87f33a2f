"""Every documented bad input raises its ValueError subclass before any work."""

import numpy as np
import pytest

from blender_reldesc.core import (Binding, BindingError, InputError, MeshError, RelDescError, Skeleton,
                                  SkeletonError, TopologyError, TriMesh, adapt, bind)
from blender_reldesc.core import synthetic as S


def test_errors_are_value_errors():
    for cls in (InputError, MeshError, SkeletonError, TopologyError, BindingError):
        assert issubclass(cls, RelDescError) and issubclass(cls, ValueError)


@pytest.mark.parametrize("parents, match", [
    ([-1, 2, 1], "cycle"),
    ([-1, 5, 0], "parent index"),
    ([0, 0], "parent index"),
    ([-1, -2], "parent index"),
])
def test_parents_that_are_not_a_forest(parents, match):
    with pytest.raises(SkeletonError, match=match):
        Skeleton([f"j{i}" for i in range(len(parents))], parents)


def test_skeleton_shape_and_names():
    with pytest.raises(SkeletonError, match="names"):
        Skeleton(["a", "b"], [-1])
    with pytest.raises(SkeletonError, match="unique"):
        Skeleton(["a", "a"], [-1, 0])
    with pytest.raises(SkeletonError, match="integer"):
        Skeleton(["a"], [0.5])


def test_mesh_inputs():
    v, t = S.grid(1, 1, 2, 2)
    with pytest.raises(MeshError, match="shape"):
        TriMesh(v[:, :2], t)
    with pytest.raises(MeshError, match="no triangles"):
        TriMesh(v, np.zeros((0, 3), int))
    with pytest.raises(MeshError, match="no vertices"):
        TriMesh(np.zeros((0, 3)), t)
    bad = v.copy()
    bad[3, 1] = np.nan
    with pytest.raises(MeshError, match="NaN"):
        TriMesh(bad, t)
    with pytest.raises(MeshError, match="indices"):
        TriMesh(v, t + 100)
    flat = v.copy()
    flat[:, 2] = 0
    flat[:, 1] = 0                                 # every triangle collapses to a line
    with pytest.raises(MeshError, match="degenerate"):
        TriMesh(flat, t)


def test_degenerate_triangles_are_skipped_and_counted():
    v, t = S.grid(2, 2, 4, 4)
    v = np.vstack([v, [[0.5, 0.5, 0.0]]])
    t = np.vstack([t, [[len(v) - 1, len(v) - 1, 0]], [[0, 1, 2]]])    # a repeated index; a line
    v[2] = v[0] + 2 * (v[1] - v[0])
    mesh = TriMesh(v, t)
    assert mesh.degenerate_count >= 1
    assert np.all(np.isfinite(mesh.normals()))


@pytest.fixture(scope="module")
def small():
    skel, motion = S.walk(20)
    mesh = TriMesh(*S.grid(4, 2, 8, 4, origin=(-1, -1)))
    return skel, motion, mesh, bind(skel, motion, mesh)


def test_motion_inputs(small):
    skel, motion, mesh, _ = small
    with pytest.raises(InputError, match=r"\(F,J,3\)"):
        bind(skel, motion[0], mesh)
    with pytest.raises(InputError, match="joints"):
        bind(skel, motion[:, :5], mesh)
    broken = motion.copy()
    broken[4, 2, 1] = np.inf
    with pytest.raises(InputError, match="frame 4"):
        bind(skel, broken, mesh)
    with pytest.raises(InputError, match="body height"):
        bind(skel, motion, mesh, body_height=-1.0)
    with pytest.raises(InputError, match="Skeleton"):
        bind("skeleton", motion, mesh)


def test_zero_length_bones(small):
    skel, motion, mesh, _ = small
    moved = motion.copy()
    knee, hip = skel.index("LeftLeg"), skel.index("LeftUpLeg")
    moved[:, knee] = moved[:, hip]
    # A zero-length bone with children (Rigify's pelvis, a root at the hips) is glued to its
    # parent: binding works and a rigid lift of the floor lifts the motion exactly.
    b = bind(skel, moved, mesh)
    res = adapt(b, mesh.with_vertices(mesh.vertices + [0, 0, 0.1]))
    np.testing.assert_allclose(res.positions, moved + [0, 0, 0.1], atol=1e-6)
    # A zero-length end bone is allowed and ignored by the bone constraints.
    end = skel.index("LeftToeEnd")
    moved = motion.copy()
    moved[:, end] = moved[:, skel.parents[end]]
    b = bind(skel, moved, mesh)
    res = adapt(b, mesh.with_vertices(mesh.vertices + [0, 0, 0.1]))
    assert np.all(np.isfinite(res.positions))
    np.testing.assert_allclose(res.positions[:, end], res.positions[:, skel.parents[end]])


def test_changed_topology_is_refused(small):
    skel, motion, mesh, binding = small
    v, t = S.grid(4, 2, 8, 5, origin=(-1, -1))
    with pytest.raises(TopologyError, match="re-bind"):
        adapt(binding, TriMesh(v, t))
    v, t = mesh.vertices, mesh.triangles[:, [0, 2, 1]]
    with pytest.raises(TopologyError, match="re-bind"):
        adapt(binding, TriMesh(v, t))


def test_adapt_argument_checks(small):
    skel, motion, mesh, binding = small
    F, J = motion.shape[:2]
    with pytest.raises(InputError, match="one value per joint"):
        adapt(binding, mesh, bone_lengths=np.ones(3))
    with pytest.raises(InputError, match="out of range"):
        adapt(binding, mesh, affinity_override={"Hips": 1.5})
    with pytest.raises(SkeletonError, match="no joint named"):
        adapt(binding, mesh, affinity_override={"Tail": 0.5})
    with pytest.raises(InputError, match="per vertex"):
        adapt(binding, mesh, vertex_influence=np.ones(3))
    with pytest.raises(InputError, match="NaN"):
        adapt(binding, mesh, vertex_influence=np.full(mesh.vertex_count, np.nan))
    with pytest.raises(InputError, match="pins"):
        adapt(binding, mesh, pins=np.zeros((F, J)))
    anim = np.repeat(mesh.vertices[None], F + 1, axis=0)
    with pytest.raises(InputError, match="frames"):
        adapt(binding, mesh.with_vertices(anim))
    with pytest.raises(InputError, match="Binding"):
        adapt("binding", mesh)


def test_unreadable_binding(tmp_path):
    path = tmp_path / "junk.npz"
    path.write_bytes(b"not a binding")
    with pytest.raises(BindingError, match="re-bind"):
        Binding.load(path)
