"""The viewport overlay's settings."""

import bpy

from .base import _SubPanel


class RELDESC_PT_overlay(_SubPanel, bpy.types.Panel):
    bl_label = "Overlays"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        layout.prop(s, "show_overlay")
        col = layout.column()
        col.enabled = s.show_overlay
        col.prop(s, "overlay_color_by")
        col.prop(s, "overlay_targets")
        col.prop(s, "overlay_size")


classes = (RELDESC_PT_overlay,)
