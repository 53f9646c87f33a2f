"""The demo: a generated humanoid walks across a bridge under a beam; the bridge bends and the
beam is lowered; the walk is adapted and rendered before/after (``run``; other scenes: ``SCENES``).

``scenes`` builds the generated scenes (the Blender-level tests build on them too), ``render``
draws them, ``runs`` binds, edits, bakes and writes each demo (``prepare``: all but the bake,
which ``write_examples`` saves for ``make examples``).
"""

from .render import add_stick_figure, render_before_after
from .runs import EXAMPLE_STEPS, EXAMPLES, SCENES, prepare, run, write_examples
from .scenes import (BEAM_X, animate_walk, bend_bridge, build_armature, build_ceiling_scene,
                     build_chair_scene, build_convention_garment_scene, build_crowd_scene, build_garment_scene,
                     build_pair_scene, build_post_scene, build_retarget_scene, build_scene, build_skeleton_armature,
                     build_stones_scene,
                     build_transfer_scene, curve_object, grow_armature, labelled_object, lengthen_legs, lower_beam,
                     mesh_object, raise_floor)

__all__ = ["BEAM_X", "EXAMPLES", "EXAMPLE_STEPS", "SCENES", "prepare", "write_examples", "add_stick_figure", "animate_walk", "bend_bridge", "build_armature",
           "build_ceiling_scene", "build_chair_scene", "build_convention_garment_scene", "build_crowd_scene",
           "build_garment_scene", "build_pair_scene", "build_post_scene", "build_retarget_scene", "build_scene",
           "build_skeleton_armature",
           "build_stones_scene", "build_transfer_scene", "curve_object", "grow_armature", "labelled_object",
           "lengthen_legs", "lower_beam", "mesh_object", "raise_floor", "render_before_after", "run"]
