"""Reaching."""

import bpy

from .base import _SubPanel, _unavailable


class RELDESC_PT_reaching(_SubPanel, bpy.types.Panel):
    bl_label = "Reaching"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        if _unavailable(layout, "reaching"):
            return
        col = layout.column(align=True)
        if s.armature is not None and s.armature.type == 'ARMATURE':
            col.prop_search(s, "reach_hand", s.armature.data, "bones")
        else:
            col.prop(s, "reach_hand")
        col.prop(s, "reach_target")
        col = layout.column(align=True)
        col.prop(s, "reach_frame")
        col.prop(s, "reach_window")
        col.prop(s, "reach_hold")
        layout.prop(s, "reach_database")
        layout.prop(s, "reach_whole_body")
        layout.operator("reldesc.reach", icon='VIEW_PAN')


classes = (RELDESC_PT_reaching,)
