"""Locomotion: walk the armature's action along path curves over a terrain (``jobs.locomotion``)."""

import bpy
from bpy.props import FloatProperty, IntProperty, StringProperty

from ..optional import feature
from .base import _JobOperator


class RELDESC_OT_walk(_JobOperator, bpy.types.Operator):
    """Walk the armature's locomotion action along the path over the terrain: one character per
    path (or a crowd along one path), each with its own new action; the source is not changed"""
    bl_idname = "reldesc.walk"
    bl_label = "Walk Along Path"
    bl_options = {'REGISTER', 'UNDO'}

    # Left empty (or negative), each takes the Locomotion panel's value.
    path: StringProperty(name="Path", default="", options={'SKIP_SAVE'}, description="Path curve object name")
    paths: StringProperty(name="Paths", default="", options={'SKIP_SAVE'},
                          description="Collection of path curves, one character each")
    terrain: StringProperty(name="Terrain", default="", options={'SKIP_SAVE'},
                            description="Collection holding the terrain meshes")
    crowd: IntProperty(name="Crowd", default=-1, options={'SKIP_SAVE'},
                       description="Characters along the one path (negative: the panel's)")
    spacing: FloatProperty(name="Spacing", default=-1.0, options={'SKIP_SAVE'}, unit='LENGTH',
                           description="Distance between neighbours across the path (negative: the panel's)")

    def make_job(self, context, warn):
        s = context.scene.reldesc
        arm = self.get_armature(context)
        paths = self.paths or (s.walk_paths.name if s.walk_paths and not self.path else "")
        path = self.path or (s.walk_path.name if s.walk_path else "")
        terrain = self.terrain or (s.walk_terrain.name if s.walk_terrain else "")
        crowd = self.crowd if self.crowd >= 0 else s.walk_crowd
        spacing = self.spacing if self.spacing >= 0 else s.walk_spacing
        return feature("locomotion").WalkJob(context.scene, arm, terrain, path, paths, crowd, spacing, warn=warn)

    def finish(self, context, report):
        self.report({'INFO'}, f"Walked {len(report['characters'])} character(s) for {report['frames']} frames "
                              f"into collection '{report['armature']} walk'")


classes = (RELDESC_OT_walk,)
