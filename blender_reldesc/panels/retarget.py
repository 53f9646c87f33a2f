"""Retarget: a clip of one armature onto another."""

import bpy

from .base import _SubPanel, _unavailable


class RELDESC_UL_map(bpy.types.UIList):
    """The bone map's rows: each target bone and the source bone it plays (editable)."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        source = context.scene.reldesc.retarget_source
        row = layout.row(align=True)
        row.label(text=item.target, icon='BONE_DATA')
        if source is not None and source.type == 'ARMATURE':
            row.prop_search(item, "source", source.data, "bones", text="")
        else:
            row.prop(item, "source", text="")


class RELDESC_PT_retarget(_SubPanel, bpy.types.Panel):
    bl_label = "Retarget"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        if _unavailable(layout, "retarget"):
            return
        col = layout.column(align=True)
        col.prop(s, "retarget_source")
        col.prop(s, "retarget_target")
        col.prop(s, "retarget_environment")
        layout.prop(s, "retarget_map")
        if s.retarget_map == 'FILE':
            layout.prop(s, "retarget_map_file", text="")
        row = layout.row(align=True)
        row.enabled = s.retarget_source is not None and s.retarget_target is not None
        row.operator("reldesc.retarget_find_map", icon='VIEWZOOM')
        if len(s.retarget_rows):
            row.operator("reldesc.retarget_save_map", text="", icon='FILE_TICK')
            row.operator("reldesc.retarget_clear_map", text="", icon='X')
            mapped = sum(1 for r in s.retarget_rows if r.source)
            layout.label(text=f"{mapped} of {len(s.retarget_rows)} target bones mapped", icon='GROUP_BONE')
            layout.template_list("RELDESC_UL_map", "", s, "retarget_rows", s, "retarget_row", rows=6)
        row = layout.row()
        row.scale_y = 1.3
        row.enabled = s.retarget_source is not None and s.retarget_target is not None
        row.operator("reldesc.retarget", icon='ARMATURE_DATA')


classes = (RELDESC_UL_map, RELDESC_PT_retarget)
