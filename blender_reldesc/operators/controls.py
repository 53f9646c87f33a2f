"""The animator's controls: painted influence, affinity overrides, the active bone."""

import bpy
from bpy.props import StringProperty

from .. import adapter
from ..core import RelDescError
from ..viewport import live
from .base import _Target


class RELDESC_OT_paint_influence(_Target, bpy.types.Operator):
    """Paint the influence of an environment mesh (creates the vertex group, filled with 1);
    run again to return to the previous mode"""
    bl_idname = "reldesc.paint_influence"
    bl_label = "Paint Influence"
    bl_options = {'REGISTER', 'UNDO'}

    object: StringProperty(name="Object", default="",
                           description="Environment mesh to paint (default: the active one)")

    def execute(self, context):
        settings = context.scene.reldesc
        ob = context.active_object
        if ob is not None and ob.mode == 'WEIGHT_PAINT' and not self.object:
            bpy.ops.object.mode_set(mode='OBJECT')
            prev_name, _, prev_mode = settings.paint_return_mode.partition("|")
            prev = bpy.data.objects.get(prev_name)
            if prev is not None and prev.name in context.view_layer.objects:
                ob.select_set(False)
                prev.select_set(True)
                context.view_layer.objects.active = prev
                if prev_mode and prev_mode != 'OBJECT':
                    bpy.ops.object.mode_set(mode=prev_mode)
            live.clear()
            self.report({'INFO'}, f"Finished painting '{ob.name}'")
            return {'FINISHED'}
        try:
            parts, _ = adapter.mesh.environment_objects(self.get_environment(context))
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        # An instanced mesh is painted on the object it instances (every instance shows the paint).
        meshes = list({p.object.name: p.object for p in parts if p.object.type == 'MESH'}.values())
        name = self.object or (ob.name if ob is not None else "")
        target = next((m for m in meshes if m.name == name), None)
        if target is None:
            self.report({'ERROR'}, f"'{name or 'nothing'}' is not a mesh of the environment "
                                   f"'{self.get_environment(context)}': pick one of {', '.join(m.name for m in meshes)}")
            return {'CANCELLED'}
        group_name = settings.influence_group or "reldesc_influence"
        group = target.vertex_groups.get(group_name)
        if group is None:
            group = target.vertex_groups.new(name=group_name)
            group.add(range(len(target.data.vertices)), 1.0, 'REPLACE')
        target.vertex_groups.active_index = group.index
        prev = context.active_object
        settings.paint_return_mode = f"{prev.name}|{prev.mode}" if prev is not None else ""
        if prev is not None and prev.mode != 'OBJECT':
            bpy.ops.object.mode_set(mode='OBJECT')
        for other in context.view_layer.objects:
            other.select_set(False)
        target.select_set(True)
        context.view_layer.objects.active = target
        bpy.ops.object.mode_set(mode='WEIGHT_PAINT')
        live.clear()
        self.report({'INFO'}, f"Painting '{group_name}' on '{target.name}': 1 = full influence, 0 = ignored")
        return {'FINISHED'}


class RELDESC_OT_clear_affinity_override(_Target, bpy.types.Operator):
    """Clear the affinity override of a bone (or of every bone)"""
    bl_idname = "reldesc.clear_affinity_override"
    bl_label = "Clear Affinity Override"
    bl_options = {'REGISTER', 'UNDO'}

    bone: StringProperty(name="Bone", default="", description="Bone name (empty: every bone)")

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        bones = [arm.pose.bones[self.bone]] if self.bone in arm.pose.bones else (
            [] if self.bone else list(arm.pose.bones))
        if not bones:
            self.report({'WARNING'}, f"no bone named '{self.bone}' in '{arm.name}'")
            return {'CANCELLED'}
        for pb in bones:
            pb.reldesc.use_affinity_override = False
        live.clear()
        return {'FINISHED'}


class RELDESC_OT_select_bone(_Target, bpy.types.Operator):
    """Make this bone the active one"""
    bl_idname = "reldesc.select_bone"
    bl_label = "Select Bone"
    bl_options = {'REGISTER', 'UNDO'}

    bone: StringProperty(name="Bone")

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        bone = arm.data.bones.get(self.bone)
        if bone is None:
            self.report({'WARNING'}, f"no bone named '{self.bone}'")
            return {'CANCELLED'}
        arm.data.bones.active = bone
        return {'FINISHED'}


classes = (RELDESC_OT_paint_influence, RELDESC_OT_clear_affinity_override, RELDESC_OT_select_bone)
