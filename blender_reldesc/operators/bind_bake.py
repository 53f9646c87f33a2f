"""Bind and Bake, and what undoes them: Use Source Action, Unbind."""

import bpy
from bpy.props import EnumProperty, FloatProperty, IntProperty, StringProperty

from .. import adapter, commands, jobs
from ..core import RelDescError
from ..viewport import live
from .base import _JobOperator, _Target


class RELDESC_OT_bind(_JobOperator, bpy.types.Operator):
    """Compute relationship descriptors of the armature's action against the environment"""
    bl_idname = "reldesc.bind"
    bl_label = "Bind"
    bl_options = {'REGISTER', 'UNDO'}

    bone_set: StringProperty(name="Bones", default="",
                             description="DEFORM, ALL or a bone collection name (default: the panel's)")
    partners: StringProperty(name="Partners", default="", options={'SKIP_SAVE'},
                             description="Comma-separated armatures bound with this one and adapted together "
                                         "with it (default: the panel's)")

    def make_job(self, context, warn):
        settings = context.scene.reldesc
        bone_set = self.bone_set or (settings.bone_collection if settings.bone_set == 'COLLECTION'
                                     else settings.bone_set)
        if not bone_set:
            raise adapter.SceneError("no bone collection chosen: pick one under Bones, or bind deform bones")
        return commands.bind_job(context.scene, self.get_armature(context), self.get_environment(context),
                                 self.partners or settings.partners, settings.body_height, settings.radius_factor,
                                 warn=warn, bone_set=bone_set)

    def finish(self, context, report):
        live.clear()
        s = context.scene.reldesc
        s.bake_frame_start, s.bake_frame_end = report["frame_start"], report["frame_end"]
        with_partners = "".join(f", with '{p['armature']}'" for p in report.get("partners", []))
        self.report({'INFO'}, f"Bound {report['frames']} frames of '{report['action']}' to "
                              f"{report['descriptors']} descriptors on {len(report['objects'])} meshes"
                              + with_partners)


class RELDESC_OT_rebind_here(_JobOperator, bpy.types.Operator):
    """Bind the armature again where it stands now, with its binding's environment, bones, body
    height, radius and partners: the source action is assigned again (as Use Source Action) and
    bound; the adapted action stays in the file"""
    bl_idname = "reldesc.rebind_here"
    bl_label = "Re-bind Here"
    bl_options = {'REGISTER', 'UNDO'}
    cancel_message = "Cancelled: the source action is assigned again (as Use Source Action); the binding is unchanged"

    def make_job(self, context, warn):
        arm = self.get_armature(context)
        own = adapter.storage.load(arm)
        meta = own["meta"]
        environment = own["environment"]
        adapter.mesh.environment_objects(environment)      # checked before any action is switched
        partners = [n for n in meta.get("partners", []) if adapter.scene.find_object(n) is not None]
        armatures = [arm] + [adapter.scene.find_object(n) for n in partners]
        sources = [own] + [adapter.storage.load(ob) for ob in armatures[1:]]
        for ob, stored in zip(armatures, sources):
            if stored["source"] is None:
                raise adapter.SceneError(f"the source action '{stored['meta']['action']}' of '{ob.name}' is gone: "
                                         "assign the motion to adapt and Bind")
        for ob, stored in zip(armatures, sources):
            adapter.actions.use_source(ob, stored["source"])
        return commands.bind_job(context.scene, arm, environment, partners, meta.get("body_height", 0.0),
                                 meta.get("radius_factor", 0.5), warn=warn, bone_set=meta.get("bone_set", "ALL"))

    def finish(self, context, report):
        live.clear()
        self.report({'INFO'}, f"Bound '{report['action']}' again where '{self.get_armature(context).name}' "
                              f"stands now ({report['descriptors']} descriptors)")


class RELDESC_OT_bake(_JobOperator, bpy.types.Operator):
    """Adapt the bound motion to the environment as it is now and write '<action>.adapted'"""
    bl_idname = "reldesc.bake"
    bl_label = "Bake"
    bl_options = {'REGISTER', 'UNDO'}

    # Options left unset take the panel's (the scene's) values.
    frame_start: IntProperty(name="Start", default=0, options={'SKIP_SAVE'})
    frame_end: IntProperty(name="End", default=-1, options={'SKIP_SAVE'},
                           description="Last frame to bake (with Start; End < Start: the panel's range)")
    step: IntProperty(name="Step", default=0, min=0, options={'SKIP_SAVE'}, description="0: the panel's")
    clean: FloatProperty(name="Clean", default=-1.0, options={'SKIP_SAVE'},
                         description="Key-reduction tolerance in metres (0: no reduction; negative: the panel's)")
    interpolation: EnumProperty(name="Interpolation", options={'SKIP_SAVE'}, default='PANEL', items=[
        ('PANEL', "Panel", ""), ('LINEAR', "Linear", ""), ('BEZIER', "Bezier", "")])
    target: EnumProperty(name="Target", options={'SKIP_SAVE'}, default='PANEL', items=[
        ('PANEL', "Panel", ""), ('ACTION', "Action", ""), ('NLA', "NLA Track", "")])

    def bake_options(self):
        """The options given to the operator, as changes to the panel's (the bake reads those)."""
        o = {}
        if self.frame_end >= self.frame_start:
            o["frames"] = (self.frame_start, self.frame_end)
        if self.step:
            o["step"] = self.step
        if self.clean >= 0:
            o["clean"] = self.clean or None
        if self.interpolation != 'PANEL':
            o["interpolation"] = self.interpolation
        if self.target != 'PANEL':
            o["target"] = self.target
        return o

    def make_job(self, context, warn):
        settings = context.scene.reldesc
        return jobs.BakeJob(context.scene, self.get_armature(context), settings.influence_group, warn=warn,
                            options=self.bake_options())

    def finish(self, context, report):
        s = context.scene.reldesc
        s.last_frames = report["frames"]
        s.last_seconds = report["read_seconds"] + report["adapt_seconds"] + report["write_seconds"]
        s.last_error_mean = 100 * report["bone_length_error_mean"]
        s.last_error_max = 100 * report["bone_length_error_max"]
        s.last_worst_frames = " ".join(str(f) for f in report["worst_frames"])
        s.last_residual_mean = report["target_residual_mean"]
        limits = report["joint_limit_violations"]
        s.last_limit_count = limits["count"]
        s.last_limit_max = limits["max_degrees"]
        s.last_limit_frames = " ".join(str(r["frame"]) for r in limits["worst"])
        keys = report["keys"]
        self.report({'INFO'}, f"Baked {report['frames']} frames of '{report['source']}' into '{report['action']}' "
                              f"(bone-length error {100 * report['bone_length_error_mean']:.3f} % mean; "
                              f"{keys['written']} keys, {1000 * keys['max_deviation']:.2f} mm from the adapted "
                              "motion)" + "".join(f"; '{p['armature']}' into '{p['action']}'"
                                                  for p in report.get("partners", [])))


class RELDESC_OT_use_source(_Target, bpy.types.Operator):
    """Assign the bound source action again (constraints the bake switched off act again)"""
    bl_idname = "reldesc.use_source"
    bl_label = "Use Source Action"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        try:
            stored = adapter.storage.load(arm)
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        source = stored["source"]
        if source is None:
            self.report({'ERROR'}, f"the source action '{stored['meta']['action']}' is gone")
            return {'CANCELLED'}
        restored = adapter.actions.use_source(arm, source)
        live.clear()
        self.report({'INFO'}, f"'{arm.name}' plays '{source.name}' again"
                              + (f" ({restored} constraints back on)" if restored else ""))
        return {'FINISHED'}


class RELDESC_OT_unbind(_Target, bpy.types.Operator):
    """Remove the stored binding from the armature"""
    bl_idname = "reldesc.unbind"
    bl_label = "Unbind"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        if not adapter.storage.clear_binding(arm):
            self.report({'WARNING'}, f"'{arm.name}' was not bound")
            return {'CANCELLED'}
        live.clear()
        self.report({'INFO'}, f"Removed the binding of '{arm.name}'")
        return {'FINISHED'}


classes = (RELDESC_OT_bind, RELDESC_OT_rebind_here, RELDESC_OT_bake, RELDESC_OT_use_source, RELDESC_OT_unbind)
