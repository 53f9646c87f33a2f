"""blender_reldesc.core: relationship descriptors and motion warping, pure numpy/scipy.

Importable without Blender. Public API::

    from blender_reldesc.core import Skeleton, TriMesh, bind, adapt, Binding
    binding = bind(skeleton, motion, mesh)          # motion: (F,J,3) world positions
    result = adapt(binding, deformed_mesh)          # result.positions: (F,J,3)

Conventions: world space, one consistent length unit (body height and every
tolerance scale with the motion), quaternions (w, x, y, z).
"""

from .adaptation import AdaptResult, LiveSession, adapt
from .descriptors import Binding, bind, measure_body_height
from .errors import (BindingError, Cancelled, InputError, MeshError, RelDescError, SkeletonError,
                     TopologyError)
from .geometry import TriMesh
from .skeleton.rotations import recover_rotations
from .skeleton import Skeleton

__all__ = [
    "AdaptResult", "Binding", "LiveSession", "BindingError", "Cancelled", "InputError", "MeshError", "RelDescError",
    "Skeleton", "SkeletonError", "TopologyError", "TriMesh", "adapt", "bind", "measure_body_height",
    "recover_rotations",
]
