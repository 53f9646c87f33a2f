"""Sidebar panel "RelDesc" in the 3D viewport: draws only. One module per feature, named as the
operators and the jobs; registered in the order they appear in the sidebar."""

import bpy

from . import bind_bake, contacts, controls, locomotion, reaching, retarget, transfer, viewport

classes = (bind_bake.RELDESC_PT_main,
           bind_bake.RELDESC_PT_bake_options,
           controls.RELDESC_PT_affinity,
           controls.RELDESC_PT_influence,
           viewport.RELDESC_PT_overlay,
           bind_bake.RELDESC_PT_diagnostics,
           contacts.RELDESC_PT_contacts,
           locomotion.RELDESC_PT_locomotion,
           reaching.RELDESC_PT_reaching,
           transfer.RELDESC_PT_transfer,
           retarget.RELDESC_UL_map,
           retarget.RELDESC_PT_retarget)
register, unregister = bpy.utils.register_classes_factory(classes)
