"""Locomotion on any terrain along any path, and crowds (Al-Ashqar's thesis, chapter 3:
carpet unrolling).

Contract::

    from blender_reldesc.core.locomotion import bind_carpet, walk
    carpet = bind_carpet(skeleton, motion)        # motion (F,J,3): locomotion on flat ground
    result = walk(carpet, paths, terrain, time_offsets=None)
    result.positions                              # (C, F', J, 3), C = len(paths)
    result.path_frames                            # (C,) each character's walking frames
"""

from .carpet import Carpet, Laid, Stance, bind_carpet, carpet_edges, sample_carpet
from .crowd import WalkResult, fork_available, lateral_paths, solve_crowd, stop_frame, walk
from .unrolling import STRETCH, Path, Terrain, unroll

__all__ = ["Carpet", "Laid", "Path", "STRETCH", "Stance", "Terrain", "WalkResult", "bind_carpet", "carpet_edges",
           "fork_available", "lateral_paths", "sample_carpet", "solve_crowd", "stop_frame", "unroll", "walk"]
