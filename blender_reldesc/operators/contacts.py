"""Contacts: detect the contact phases, re-position the invalid ones, lock or ignore a phase."""

import bpy

from .. import adapter, jobs
from ..core import RelDescError
from ..viewport import live
from .base import _Target


class _Contacts(_Target):
    reposition = False

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        try:
            with live.paused():
                report = jobs.ContactsJob(context.scene, arm, reposition=self.reposition,
                                          warn=lambda m: self.report({'WARNING'}, m)).run()
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        if self.reposition:
            context.scene.reldesc.reposition_contacts = True
        rows, counts = report["contacts"], report["contact_counts"]
        self.report({'INFO'}, f"{len(rows)} contact phases: {counts['valid']} valid, "
                              f"{counts['repositioned']} re-positioned, {counts['unresolved']} unresolved")
        return {'FINISHED'}


class RELDESC_OT_detect_contacts(_Contacts, bpy.types.Operator):
    """Find the contact phases of the bound motion and check them against the environment now"""
    bl_idname = "reldesc.detect_contacts"
    bl_label = "Detect Contacts"
    bl_options = {'REGISTER', 'UNDO'}


class RELDESC_OT_reposition_contacts(_Contacts, bpy.types.Operator):
    """Re-position the contacts the edit made invalid (Bake then uses the new contacts)"""
    bl_idname = "reldesc.reposition_contacts"
    bl_label = "Reposition Invalid Contacts"
    bl_options = {'REGISTER', 'UNDO'}
    reposition = True


class RELDESC_OT_contact_flag(_Target, bpy.types.Operator):
    """Lock a contact phase (keep its original contact) or ignore it"""
    bl_idname = "reldesc.contact_flag"
    bl_label = "Contact Flag"
    bl_options = {'REGISTER', 'UNDO'}

    index: bpy.props.IntProperty()
    flag: bpy.props.EnumProperty(items=[('lock', "Lock", ""), ('ignore', "Ignore", "")])

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        rows = adapter.storage.stored_contacts(arm)
        if not 0 <= self.index < len(rows):
            self.report({'ERROR'}, "no such contact phase: detect contacts first")
            return {'CANCELLED'}
        adapter.storage.set_contact_flag(arm, self.index, self.flag, not rows[self.index].get(self.flag, False))
        live.clear()                                   # a live preview with contacts takes the new flags
        return {'FINISHED'}


classes = (RELDESC_OT_detect_contacts, RELDESC_OT_reposition_contacts, RELDESC_OT_contact_flag)
