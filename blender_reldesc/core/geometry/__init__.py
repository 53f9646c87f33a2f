"""Geometry: triangles and normals, coverage projection and closest points, spatial grids and trees,
the TriMesh container and the colliders built on them."""

from .mesh import TriMesh
from .proximity import Collider, CoverageIndex, mesh_graph
from .spatial import BoxGrid, BoxTree, expand_ranges
from .triangles import (closest_point_on_triangles, cross, descriptor_frames, dot, face_normals, interpolate,
                        normalize, project_to_coverage, vertex_normals)

__all__ = ["BoxGrid", "BoxTree", "Collider", "CoverageIndex", "TriMesh", "closest_point_on_triangles", "cross",
           "descriptor_frames", "dot", "expand_ranges", "face_normals", "interpolate", "mesh_graph", "normalize",
           "project_to_coverage", "vertex_normals"]
