"""Garments: a mesh carried with a bound armature into every bake (``jobs.garment``)."""

import bpy
from bpy.props import BoolProperty, StringProperty

from ..core.errors import RelDescError
from ..optional import feature
from ..viewport import live
from .base import _Target


class RELDESC_OT_bind_garment(_Target, bpy.types.Operator):
    """Carry a garment mesh (its own animation: a cached cloth, shape keys) with the bound armature:
    every bake writes it a point cache read by a Mesh Cache modifier"""
    bl_idname = "reldesc.bind_garment"
    bl_label = "Bind Garment"
    bl_options = {'REGISTER', 'UNDO'}

    garment: StringProperty(name="Garment", default="", options={'SKIP_SAVE'},
                            description="The garment's mesh object (default: the active object, if a mesh)")
    scale_with_body: BoolProperty(name="Scale With Body", default=False,
                                  description="The garment follows the body's proportions (a cape on longer legs "
                                              "gets longer, as the paper carries it); off, it keeps its size")

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        name = self.garment
        if not name and context.active_object is not None and context.active_object.type == 'MESH':
            name = context.active_object.name
        try:
            with live.paused():                      # its motion is read as the rig plays
                report = feature("garment").bind_garment(context.scene, arm, name, self.scale_with_body)
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        self.report({'INFO'}, f"'{report['garment']}' ({report['vertices']} vertices) is carried with "
                              f"'{arm.name}': bake to write its point cache")
        return {'FINISHED'}


classes = (RELDESC_OT_bind_garment,)
