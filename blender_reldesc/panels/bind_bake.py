"""The main panel (Bind, Bake, the binding's state), the bake options and the last bake's diagnostics."""

from textwrap import wrap

import bpy

from .. import adapter
from ..jobs.bound import moved_since_bind, placement_message
from .base import _SubPanel, _jump_buttons


def placement_note(meta, arm, status=None):
    """The bake's placement message for the armature as it stands now ('' when it did not move
    away from its environment, or when its placement changes over time: the bake says then).
    ``status``: ``adapter.bound.binding_status`` when the caller read it already."""
    status = status or adapter.bound.binding_status(meta, arm)
    if status.matrix is None:
        return ""
    moved = moved_since_bind(meta, status.matrix, status.parts)
    return placement_message(arm.name, moved, meta.get("body_height", 1.0))


class RELDESC_PT_main(bpy.types.Panel):
    bl_label = "Relationship Descriptors"
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "RelDesc"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        col = layout.column()
        col.prop(s, "armature")
        col.prop(s, "environment")
        col.prop(s, "body_height")
        col.prop(s, "radius_factor")
        col.prop(s, "influence_group")
        col.prop(s, "bone_set")
        if s.bone_set == 'COLLECTION':
            if s.armature is not None and s.armature.type == 'ARMATURE':
                col.prop_search(s, "bone_collection", s.armature.data, "collections_all", text="Collection")
            else:
                col.prop(s, "bone_collection", text="Collection")
        col.prop(s, "partners")
        row = layout.row(align=True)
        row.operator("reldesc.bind", icon='LINKED')
        row.operator("reldesc.unbind", icon='UNLINKED')
        arm = s.armature
        meta = adapter.storage.stored_meta(arm) if arm else None
        box = layout.box()
        if meta is None:
            box.label(text="Not bound", icon='INFO')
        else:
            box.label(text=f"'{meta['action']}' on '{meta['environment']}'", icon='ACTION')
            box.label(text=f"{meta['descriptors']} descriptors, frames {meta['frame_start']}-{meta['frame_end']}")
            box.label(text=f"{meta.get('bones', '?')} bones ({str(meta.get('bone_set', 'ALL')).title()})")
            box.label(text="Environment animated" if meta.get("animated") else "Environment static")
            if meta.get("partners"):
                box.label(text="Partners: " + ", ".join(meta["partners"]), icon='COMMUNITY')
            worn = adapter.storage.garment_names(arm)
            if worn:
                box.label(text="Garments: " + ", ".join(worn), icon='MOD_CLOTH')
            row = box.row(align=True)
            row.operator("reldesc.bind_garment", icon='MOD_CLOTH')
            row.operator("reldesc.bind_garment", text="Scale With Body").scale_with_body = True
            status = adapter.bound.binding_status(meta, arm)
            box.label(text=status.message, icon='CHECKMARK' if status.ok else 'ERROR')
            note = placement_note(meta, arm, status)
            if note:
                for k, line in enumerate(wrap(note, 48)):
                    box.label(text=line, icon='BLANK1' if k else 'ORIENTATION_GLOBAL')
                box.operator("reldesc.rebind_here", icon='FILE_REFRESH')
        row = layout.row(align=True)
        row.enabled = meta is not None
        row.operator("reldesc.bake", icon='REC')
        row.operator("reldesc.live", text="Live Preview", icon='PLAY', depress=s.live)
        row = layout.row()
        row.enabled = meta is not None
        row.operator("reldesc.use_source", icon='LOOP_BACK')


class RELDESC_PT_bake_options(bpy.types.Panel):
    bl_label = "Bake Options"
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "RelDesc"
    bl_parent_id = "RELDESC_PT_main"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        layout.use_property_split = True
        layout.prop(s, "use_bake_range")
        col = layout.column(align=True)
        col.enabled = s.use_bake_range
        col.prop(s, "bake_frame_start")
        col.prop(s, "bake_frame_end")
        layout.prop(s, "bake_step")
        layout.prop(s, "use_bake_clean")
        row = layout.row()
        row.enabled = s.use_bake_clean
        row.prop(s, "bake_clean_tolerance")
        layout.prop(s, "bake_interpolation")
        layout.prop(s, "bake_target")
        layout.prop(s, "solver")


class RELDESC_PT_diagnostics(_SubPanel, bpy.types.Panel):
    bl_label = "Diagnostics"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        if not s.last_frames:
            layout.label(text="Bake to see diagnostics")
            return
        layout.label(text=f"Last bake: {s.last_frames} frames in {s.last_seconds:.2f} s")
        layout.label(text=f"Bone-length error: {s.last_error_mean:.3f} % mean, {s.last_error_max:.3f} % max")
        layout.label(text=f"Target residual: {s.last_residual_mean * 1000:.1f} mm mean")
        _jump_buttons(layout, s.last_worst_frames)
        layout.label(text=f"Joint limits: {s.last_limit_count} violations, {s.last_limit_max:.1f}° worst")
        _jump_buttons(layout, s.last_limit_frames)


classes = (RELDESC_PT_main, RELDESC_PT_bake_options, RELDESC_PT_diagnostics)
