"""Operators: thin wrappers that gather inputs, run a job and report.

Interactive runs of Bind and Bake are modal: the core computation runs in a
worker thread (it touches no Blender data), the window-manager progress bar
moves, and Esc cancels cleanly (nothing is written). From scripts and in
background mode they run synchronously and print progress.
"""

import bpy
from bpy.props import EnumProperty, FloatProperty, IntProperty, StringProperty

from .. import adapter, jobs, live
from ..core import RelDescError
from ..optional import feature
from . import garments, locomotion, reaching, transfer
from .base import _JobOperator, _Target, _WorkerState, compute_in_worker  # noqa: F401 (tests import them)


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
        others = self.partners or settings.partners
        if others.strip():
            partners = feature("partners")
            return partners.PartnersBindJob(context.scene, self.get_armature(context), self.get_environment(context),
                                            others, settings.body_height, settings.radius_factor, warn=warn,
                                            bone_set=bone_set)
        return jobs.BindJob(context.scene, self.get_armature(context), self.get_environment(context),
                            settings.body_height, settings.radius_factor, warn=warn, bone_set=bone_set)

    def finish(self, context, report):
        live.clear()
        s = context.scene.reldesc
        s.bake_frame_start, s.bake_frame_end = report["frame_start"], report["frame_end"]
        with_partners = "".join(f", with '{p['armature']}'" for p in report.get("partners", []))
        self.report({'INFO'}, f"Bound {report['frames']} frames of '{report['action']}' to "
                              f"{report['descriptors']} descriptors on {len(report['objects'])} meshes"
                              + with_partners)


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

    def bake_options(self, context):
        o = jobs.bake_options_from_scene(context.scene)
        if self.frame_end >= self.frame_start:
            o.frames = (self.frame_start, self.frame_end)
        if self.step:
            o.step = self.step
        if self.clean >= 0:
            o.clean = self.clean or None
        if self.interpolation != 'PANEL':
            o.interpolation = self.interpolation
        if self.target != 'PANEL':
            o.target = self.target
        return o

    def make_job(self, context, warn):
        settings = context.scene.reldesc
        return jobs.BakeJob(context.scene, self.get_armature(context), settings.influence_group, warn=warn,
                            options=self.bake_options(context))

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
            meta = adapter.load_stored(arm)[2]
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        source = adapter.bound_source(arm, meta)
        if source is None:
            self.report({'ERROR'}, f"the source action '{meta['action']}' is gone")
            return {'CANCELLED'}
        restored = adapter.use_source(arm, source)
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
        if not adapter.clear_binding(arm):
            self.report({'WARNING'}, f"'{arm.name}' was not bound")
            return {'CANCELLED'}
        live.clear()
        self.report({'INFO'}, f"Removed the binding of '{arm.name}'")
        return {'FINISHED'}


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
                adapter.load_stored(arm)
            except RelDescError as e:
                self.report({'ERROR'}, str(e))
                return {'CANCELLED'}
            settings.armature = arm
        settings.live = not settings.live          # its update callback adds or removes the handler
        if settings.live:
            live.on_frame_change(context.scene, context.evaluated_depsgraph_get())
        self.report({'INFO'}, "Live preview on" if settings.live else "Live preview off")
        return {'FINISHED'}


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
            meshes, _ = adapter.environment_objects(self.get_environment(context))
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
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


class _Contacts(_Target):
    reposition = False

    def execute(self, context):
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        try:
            rows, counts = jobs.contacts_job(context.scene, arm, reposition=self.reposition,
                                             warn=lambda m: self.report({'WARNING'}, m))
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        if self.reposition:
            context.scene.reldesc.reposition_contacts = True
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
        rows = jobs.stored_contacts(arm)
        if not 0 <= self.index < len(rows):
            self.report({'ERROR'}, "no such contact phase: detect contacts first")
            return {'CANCELLED'}
        jobs.set_contact_flag(arm, self.index, self.flag, not rows[self.index].get(self.flag, False))
        from .. import live
        live.clear()                                   # a live preview with contacts takes the new flags
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


_own = (RELDESC_OT_bind, RELDESC_OT_bake, RELDESC_OT_unbind, RELDESC_OT_live, RELDESC_OT_paint_influence,
           RELDESC_OT_clear_affinity_override, RELDESC_OT_select_bone, RELDESC_OT_detect_contacts,
           RELDESC_OT_reposition_contacts, RELDESC_OT_contact_flag, RELDESC_OT_jump_to_frame, RELDESC_OT_use_source)
classes = _own + locomotion.classes + reaching.classes + transfer.classes + garments.classes
register, unregister = bpy.utils.register_classes_factory(classes)
