"""Sidebar panel "RelDesc" in the 3D viewport: draws only."""

import bpy

import textwrap

from .. import adapter
from ..jobs import environment_status
from ..optional import feature, unavailable


def _unavailable(layout, name):
    """Draw why feature ``name`` cannot be used, and say so; False when it can."""
    message = unavailable(name)
    if message is None:
        return False
    box = layout.box()
    for i, line in enumerate(textwrap.wrap(message, 44)):
        box.label(text=line, icon='ERROR' if i == 0 else 'BLANK1')
    return True


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
        meta = adapter.stored_meta(arm) if arm else None
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
            worn = adapter.garment_names(arm)
            if worn:
                box.label(text="Garments: " + ", ".join(worn), icon='MOD_CLOTH')
            box.operator("reldesc.bind_garment", icon='MOD_CLOTH')
            ok, message = environment_status(meta, arm)
            box.label(text=message, icon='CHECKMARK' if ok else 'ERROR')
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


class _SubPanel:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "RelDesc"
    bl_parent_id = "RELDESC_PT_main"


class RELDESC_PT_affinity(_SubPanel, bpy.types.Panel):
    bl_label = "Affinity Overrides"

    def draw(self, context):
        layout = self.layout
        arm = context.scene.reldesc.armature
        if arm is None:
            layout.label(text="Choose an armature")
            return
        pb = context.active_pose_bone if getattr(context, "active_pose_bone", None) else None
        if pb is None and arm.data.bones.active is not None:
            pb = arm.pose.bones.get(arm.data.bones.active.name)
        if pb is not None:
            layout.label(text=f"Active bone: {pb.name}", icon='BONE_DATA')
            row = layout.row(align=True)
            row.prop(pb.reldesc, "use_affinity_override", text="Override")
            sub = row.row(align=True)
            sub.enabled = pb.reldesc.use_affinity_override
            sub.prop(pb.reldesc, "affinity", slider=True)
            layout.prop(pb.reldesc, "hinge")
        overridden = [b for b in arm.pose.bones if b.reldesc.use_affinity_override]
        if overridden:
            box = layout.box()
            for b in overridden:
                row = box.row(align=True)
                row.operator("reldesc.select_bone", text=b.name, icon='BONE_DATA').bone = b.name
                row.label(text=f"{b.reldesc.affinity:.2f}")
                row.operator("reldesc.clear_affinity_override", text="", icon='X').bone = b.name
            layout.operator("reldesc.clear_affinity_override", text="Clear All").bone = ""


class RELDESC_PT_influence(_SubPanel, bpy.types.Panel):
    bl_label = "Influence Painting"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        layout.prop(s, "influence_group", text="Group")
        painting = context.active_object is not None and context.active_object.mode == 'WEIGHT_PAINT'
        layout.operator("reldesc.paint_influence", text="Done Painting" if painting else "Paint Active Mesh",
                        icon='BRUSH_DATA')


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


def _jump_buttons(layout, frames):
    """A row "Worst:" of buttons jumping to each frame of the space-separated ``frames``."""
    if frames:
        row = layout.row(align=True)
        row.label(text="Worst:")
        for f in frames.split():
            row.operator("reldesc.jump_to_frame", text=f).frame = int(f)


class RELDESC_PT_contacts(_SubPanel, bpy.types.Panel):
    bl_label = "Contacts"

    def draw(self, context):
        from ..jobs import stored_contacts
        layout = self.layout
        s = context.scene.reldesc
        row = layout.row(align=True)
        row.operator("reldesc.detect_contacts", icon='VIEWZOOM')
        row.operator("reldesc.reposition_contacts", text="Reposition Invalid", icon='CON_FOLLOWPATH')
        layout.prop(s, "reposition_contacts", text="Bake and Live Preview re-position contacts")
        if s.live and s.reposition_contacts:
            from .. import live
            c = live.last_contacts
            if c:
                layout.label(text=f"Live: {c['repositioned']} re-positioned, {c['unresolved']} unresolved "
                                  f"(whole clip in {c['seconds']:.2f} s)", icon='TIME')
        col = layout.column(align=True)
        col.prop(s, "contact_effectors")
        col.prop(s, "contact_distance")
        col.prop(s, "contact_speed")
        rows = stored_contacts(s.armature) if s.armature else []
        if not rows:
            layout.label(text="No contacts detected yet")
            return
        box = layout.box()
        for i, r in enumerate(rows):
            line = box.row(align=True)
            icon = {'valid': 'CHECKMARK', 'repositioned': 'FORWARD', 'unresolved': 'ERROR'}[r["status"]]
            text = f"{r['effector']} {r['start']}-{r['end']} on {r.get('surface', '?')}"
            if r["status"] != "valid" or r.get("reason"):
                text += f": {r['status']} ({r['reason']})"
            if r.get("new_position") is not None:
                text += " -> ({:.2f}, {:.2f}, {:.2f})".format(*r["new_position"])
            if r.get("continuity") == "pins":
                text += " [pinned]"             # re-embedding did not hold: the fallback
            line.operator("reldesc.jump_to_frame", text=text, icon=icon).frame = r["start"]
            op = line.operator("reldesc.contact_flag", text="", icon='LOCKED' if r.get("lock") else 'UNLOCKED',
                               depress=bool(r.get("lock")))
            op.index, op.flag = i, 'lock'
            op = line.operator("reldesc.contact_flag", text="", icon='HIDE_ON' if r.get("ignore") else 'HIDE_OFF',
                               depress=bool(r.get("ignore")))
            op.index, op.flag = i, 'ignore'


class RELDESC_PT_locomotion(_SubPanel, bpy.types.Panel):
    bl_label = "Locomotion"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        if _unavailable(layout, "walking"):
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


classes = (RELDESC_PT_main, RELDESC_PT_bake_options, RELDESC_PT_affinity, RELDESC_PT_influence, RELDESC_PT_overlay, RELDESC_PT_diagnostics,
           RELDESC_PT_contacts, RELDESC_PT_locomotion, RELDESC_PT_reaching, RELDESC_PT_transfer)
register, unregister = bpy.utils.register_classes_factory(classes)
