"""Sidebar panel "RelDesc" in the 3D viewport: draws only."""

import bpy

from .. import adapter


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
            box.label(text="Environment animated" if meta.get("animated") else "Environment static")
            box.label(text=topology_status(meta), icon='CHECKMARK' if topology_ok(meta) else 'ERROR')
        row = layout.row(align=True)
        row.enabled = meta is not None
        row.operator("reldesc.bake", icon='REC')
        row.operator("reldesc.live", text="Live Preview", icon='PLAY', depress=s.live)
        if s.last_frames:
            box = layout.box()
            box.label(text=f"Last bake: {s.last_frames} frames in {s.last_seconds:.2f} s")
            box.label(text=f"Bone-length error: {s.last_error_mean:.3f} % mean, {s.last_error_max:.3f} % max")
            if s.last_worst_frames:
                row = box.row(align=True)
                row.label(text="Worst:")
                for f in s.last_worst_frames.split():
                    row.operator("reldesc.jump_to_frame", text=f).frame = int(f)


def topology_ok(meta):
    coll = bpy.data.collections.get(meta["environment"])
    if coll is None:
        return False
    meshes = sorted((ob for ob in coll.all_objects if ob.type == 'MESH'), key=lambda ob: ob.name)
    if [ob.name for ob in meshes] != list(meta["objects"]):
        return False
    # Cheap check on meshes without modifiers; the bake checks the evaluated geometry.
    return all(ob.modifiers or len(ob.data.vertices) == v for ob, v in zip(meshes, meta["vertex_counts"]))


def topology_status(meta):
    return "Environment matches the binding" if topology_ok(meta) else "Environment changed: re-bind"


classes = (RELDESC_PT_main,)
register, unregister = bpy.utils.register_classes_factory(classes)
