"""Transfer to Object."""

import bpy

from ..optional import feature
from .base import _SubPanel, _unavailable


class RELDESC_PT_transfer(_SubPanel, bpy.types.Panel):
    bl_label = "Transfer to Object"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        if _unavailable(layout, "transfer"):
            return
        layout.label(text="The bound motion, moved to another object:")
        col = layout.column(align=True)
        col.prop(s, "transfer_from")
        col.prop(s, "transfer_to")
        if s.transfer_from is not None and s.transfer_to is not None:
            shared = sorted({g.name for g in s.transfer_from.vertex_groups}
                            & {g.name for g in s.transfer_to.vertex_groups} - feature("transfer").NOT_SEGMENTS)
            layout.label(text=("Parts: " + ", ".join(shared)) if shared else "Parts: matched by where they sit",
                         icon='GROUP_VERTEX')
        row = layout.row()
        row.enabled = s.transfer_from is not None and s.transfer_to is not None
        row.operator("reldesc.transfer", icon='ARROW_LEFTRIGHT')


classes = (RELDESC_PT_transfer,)
