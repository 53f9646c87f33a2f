"""Retarget: a clip of one armature onto another, contacts kept (``jobs.retarget``); the bone map
found, shown, edited and saved."""

import bpy
from bpy.props import StringProperty
from bpy_extras.io_utils import ExportHelper

from .. import adapter
from ..adapter import SceneError
from ..optional import feature
from .base import _JobOperator


def _armatures(context, source="", target=""):
    """The source and target armature objects: the operator's names, else the panel's."""
    s = context.scene.reldesc
    out = []
    for name, fallback, what in ((source, s.retarget_source, "Source"), (target, s.retarget_target, "Target")):
        name = name or (fallback.name if fallback else "")
        if not name:
            raise SceneError(f"pick the {what} armature in the Retarget panel")
        out.append(adapter.get_armature(name, context))
    return out


def _map_choice(context, bone_map=""):
    s = context.scene.reldesc
    if bone_map:
        return bone_map
    if s.retarget_map == 'FILE':
        if not s.retarget_map_file:
            raise SceneError("Map is File: pick the JSON bone map to use (or choose Auto)")
        return bpy.path.abspath(s.retarget_map_file)
    return s.retarget_map.lower()


def _rows(context):
    """The panel's map rows ({target: source}, empty sources left out), or None when there are none."""
    rows = {r.target: r.source for r in context.scene.reldesc.retarget_rows if r.source}
    return rows or None


class RELDESC_OT_retarget(_JobOperator, bpy.types.Operator):
    """Put the source armature's action on the target armature: bones paired by the map, the motion's
    contacts with the environment (or the floor) kept for the target's proportions, written as
    '<source action>.retarget' on the target (the source is not changed)"""
    bl_idname = "reldesc.retarget"
    bl_label = "Retarget"
    bl_options = {'REGISTER', 'UNDO'}

    source: StringProperty(name="Source", default="", options={'SKIP_SAVE'},
                           description="Source armature name (empty: the panel's)")
    target: StringProperty(name="Target", default="", options={'SKIP_SAVE'},
                           description="Target armature name (empty: the panel's)")
    bone_map: StringProperty(name="Map", default="", options={'SKIP_SAVE'},
                             description="auto, structure, a preset's name or a JSON map file (empty: the "
                                         "panel's map, its edited rows first)")
    environment: StringProperty(name="Environment", default="", options={'SKIP_SAVE'},
                                description="Collection the source moves in (empty: the panel's, else a floor "
                                            "under its feet)")

    def make_job(self, context, warn):
        source, target = _armatures(context, self.source, self.target)
        s = context.scene.reldesc
        environment = self.environment or (s.retarget_environment.name if s.retarget_environment else None)
        rows = None if self.bone_map else _rows(context)
        bone_set = s.bone_collection if s.bone_set == 'COLLECTION' else s.bone_set
        return feature("retarget").RetargetJob(context.scene, source, target, _map_choice(context, self.bone_map),
                                               environment, options={}, warn=warn, rows=rows, bone_set=bone_set)

    def finish(self, context, report):
        self.report({'INFO'}, f"retargeted '{report['source']}' onto '{report['target_armature']}' as "
                              f"'{report['action']}' ({report['bone_map']['mapped']} bones mapped; planted feet "
                              f"{100 * report['planted_within']:.0f} % on the ground)")


class RELDESC_OT_retarget_find_map(bpy.types.Operator):
    """Pair the bones of the source and target armatures (by the Map choice) and list the pairs in the
    panel, where a row can be changed before retargeting"""
    bl_idname = "reldesc.retarget_find_map"
    bl_label = "Find Map"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        from ..core import RelDescError
        s = context.scene.reldesc
        try:
            source, target = _armatures(context)
            bm = feature("retarget").find_map(context.scene, source, target, _map_choice(context))
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        s.retarget_rows.clear()
        for bone in target.data.bones:
            row = s.retarget_rows.add()
            row.target = bone.name
            row.source = bm.bones.get(bone.name, "")
            row.role = bm.roles.get(bone.name, "")
        self.report({'INFO'}, f"{len(bm.bones)} of {len(target.data.bones)} bones of '{target.name}' mapped "
                              f"(source: {bm.source}, target: {bm.target})")
        return {'FINISHED'}


class RELDESC_OT_retarget_clear_map(bpy.types.Operator):
    """Forget the listed map: the next retarget finds one again by the Map choice"""
    bl_idname = "reldesc.retarget_clear_map"
    bl_label = "Clear Map"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        context.scene.reldesc.retarget_rows.clear()
        return {'FINISHED'}


class RELDESC_OT_retarget_save_map(bpy.types.Operator, ExportHelper):
    """Save the listed bone map as JSON, to load it for other shots (Map: File) or edit it"""
    bl_idname = "reldesc.retarget_save_map"
    bl_label = "Save Map"
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'})

    def execute(self, context):
        from ..core.retarget import BoneMap
        rows = _rows(context)
        if not rows:
            self.report({'ERROR'}, "no map listed: Find Map first")
            return {'CANCELLED'}
        try:
            with open(self.filepath, "w", encoding="utf-8") as fh:
                fh.write(BoneMap(rows).to_json())
        except OSError as e:
            self.report({'ERROR'}, f"cannot write {self.filepath}: {e.strerror or e}")
            return {'CANCELLED'}
        self.report({'INFO'}, f"saved {len(rows)} pairs to {self.filepath}")
        return {'FINISHED'}


classes = (RELDESC_OT_retarget, RELDESC_OT_retarget_find_map, RELDESC_OT_retarget_clear_map,
           RELDESC_OT_retarget_save_map)
