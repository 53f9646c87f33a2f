import pytest

from blender_reldesc.core import TriMesh, bind
from blender_reldesc.core import synthetic as S


@pytest.fixture(scope="session")
def walk_scene():
    """A 90-frame walk over a flat 12 m x 4 m floor with an overhead beam."""
    skel, motion = S.walk(90)
    floor = S.grid(12.0, 4.0, 60, 20, origin=(-2.0, -2.0))
    beam = S.box((2.0, 0.0, 2.2), (0.3, 3.0, 0.2), subdivisions=2)
    verts, tris, ranges = S.merge(floor, beam)
    mesh = TriMesh(verts, tris)
    return skel, motion, mesh, ranges


@pytest.fixture(scope="session")
def walk_binding(walk_scene):
    skel, motion, mesh, _ = walk_scene
    return bind(skel, motion, mesh)
