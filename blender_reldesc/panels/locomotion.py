"""Walk Along Path."""

import bpy

from .base import _SubPanel, _unavailable


class RELDESC_PT_locomotion(_SubPanel, bpy.types.Panel):
    bl_label = "Locomotion"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        if _unavailable(layout, "locomotion"):
            return
        layout.label(text="The armature's action, walked along a path:")
        col = layout.column(align=True)
        col.prop(s, "walk_path")
        col.prop(s, "walk_paths")
        col.prop(s, "walk_terrain")
        row = layout.row(align=True)
        row.enabled = s.walk_paths is None
        row.prop(s, "walk_crowd")
        row.prop(s, "walk_spacing")
        layout.operator("reldesc.walk", icon='MOD_CURVE')


classes = (RELDESC_PT_locomotion,)
