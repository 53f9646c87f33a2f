"""The animator's controls: affinity overrides per bone, painted influence."""

import bpy

from .base import _SubPanel


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


classes = (RELDESC_PT_affinity, RELDESC_PT_influence)
