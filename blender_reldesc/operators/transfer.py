"""Transfer to a novel object: the bound interaction swapped onto another object, baked (``jobs.transfer``)."""

import bpy
from bpy.props import StringProperty

from ..adapter import SceneError
from ..optional import feature
from .base import _JobOperator


class RELDESC_OT_transfer(_JobOperator, bpy.types.Operator):
    """Move the bound motion from an object of the environment to another object of its kind (parts
    labelled alike by vertex groups, or matched by where they sit), and bake it into '<action>.adapted'"""
    bl_idname = "reldesc.transfer"
    bl_label = "Transfer to Object"
    bl_options = {'REGISTER', 'UNDO'}

    source_object: StringProperty(name="From", default="", options={'SKIP_SAVE'},
                                  description="The object of the bound environment the motion interacts with "
                                              "(empty: the panel's From)")
    target_object: StringProperty(name="To", default="", options={'SKIP_SAVE'},
                                  description="The object to move the interaction to (empty: the panel's To)")

    def make_job(self, context, warn):
        s = context.scene.reldesc
        source = self.source_object or (s.transfer_from.name if s.transfer_from else "")
        target = self.target_object or (s.transfer_to.name if s.transfer_to else "")
        if not source or not target:
            raise SceneError("pick the object the motion interacts with (From) and the object to move it to "
                                  "(To) in the Transfer panel")
        transfer = feature("transfer")
        return transfer.TransferJob(context.scene, self.get_armature(context), source, target, warn=warn,
                                    options={})

    def finish(self, context, report):
        t = report["transfer"]
        self.report({'INFO'}, f"transferred from '{t['source']}' to '{t['target']}' ({t['labels']}: "
                              f"{', '.join(t['segments'])}) into '{report['action']}'")


classes = (RELDESC_OT_transfer,)
