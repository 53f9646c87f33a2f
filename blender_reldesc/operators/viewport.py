"""The viewport: the live preview toggle, and jumping to a frame the panels name."""

import bpy

from .. import adapter
from ..core import RelDescError
from ..viewport import live
from .base import _Target


class RELDESC_OT_live(_Target, bpy.types.Operator):
    """Toggle the live preview: pose the armature from the current environment at every frame"""
    bl_idname = "reldesc.live"
    bl_label = "Live Preview"
    bl_options = {'REGISTER'}

    def execute(self, context):
        settings = context.scene.reldesc
        if not settings.live:
            try:
                arm = self.get_armature(context)
                adapter.storage.load_stored(arm)
            except RelDescError as e:
                self.report({'ERROR'}, str(e))
                return {'CANCELLED'}
            settings.armature = arm
        settings.live = not settings.live          # its update callback adds or removes the handler
        if settings.live:
            live.on_frame_change(context.scene, context.evaluated_depsgraph_get())
        else:
            context.scene.frame_set(context.scene.frame_current)    # the action plays the frame again
        self.report({'INFO'}, "Live preview on" if settings.live else "Live preview off")
        return {'FINISHED'}


class RELDESC_OT_jump_to_frame(bpy.types.Operator):
    """Go to this frame"""
    bl_idname = "reldesc.jump_to_frame"
    bl_label = "Jump to Frame"
    bl_options = {'REGISTER'}
    frame: bpy.props.IntProperty()

    def execute(self, context):
        context.scene.frame_set(self.frame)
        return {'FINISHED'}


classes = (RELDESC_OT_live, RELDESC_OT_jump_to_frame)
