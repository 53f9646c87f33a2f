"""Contacts: the phases, their status, lock and ignore."""

import bpy

from .. import adapter
from ..viewport import live
from .base import _SubPanel


class RELDESC_PT_contacts(_SubPanel, bpy.types.Panel):
    bl_label = "Contacts"

    def draw(self, context):
        layout = self.layout
        s = context.scene.reldesc
        row = layout.row(align=True)
        row.operator("reldesc.detect_contacts", icon='VIEWZOOM')
        row.operator("reldesc.reposition_contacts", text="Reposition Invalid", icon='CON_FOLLOWPATH')
        layout.prop(s, "reposition_contacts", text="Bake and Live Preview re-position contacts")
        if s.live and s.reposition_contacts:
            c = live.last_contacts
            if c:
                layout.label(text=f"Live: {c['repositioned']} re-positioned, {c['unresolved']} unresolved "
                                  f"(whole clip in {c['seconds']:.2f} s)", icon='TIME')
        col = layout.column(align=True)
        col.prop(s, "contact_effectors")
        col.prop(s, "contact_distance")
        col.prop(s, "contact_speed")
        rows = adapter.storage.stored_contacts(s.armature) if s.armature else []
        if not rows:
            layout.label(text="No contacts detected yet")
            return
        box = layout.box()
        for i, r in enumerate(rows):
            line = box.row(align=True)
            icon = {'valid': 'CHECKMARK', 'repositioned': 'FORWARD', 'unresolved': 'ERROR'}[r["status"]]
            text = f"{r['effector']} {r['start']}-{r['end']} on {r.get('surface', '?')}"
            if r["status"] != "valid" or r.get("reason"):
                text += f": {r['status']} ({r['reason']})"
            if r.get("new_position") is not None and r["status"] == "unresolved":
                # No support found: its foot set on the best reachable surface, not left hanging.
                text += " set down at ({:.2f}, {:.2f}, {:.2f})".format(*r["new_position"])
            elif r.get("new_position") is not None:
                text += " -> ({:.2f}, {:.2f}, {:.2f})".format(*r["new_position"])
            if r.get("continuity") == "pins" and r["status"] == "repositioned":
                text += " [pinned]"             # re-embedding did not hold: the fallback
            line.operator("reldesc.jump_to_frame", text=text, icon=icon).frame = r["start"]
            op = line.operator("reldesc.contact_flag", text="", icon='LOCKED' if r.get("lock") else 'UNLOCKED',
                               depress=bool(r.get("lock")))
            op.index, op.flag = i, 'lock'
            op = line.operator("reldesc.contact_flag", text="", icon='HIDE_ON' if r.get("ignore") else 'HIDE_OFF',
                               depress=bool(r.get("ignore")))
            op.index, op.flag = i, 'ignore'


classes = (RELDESC_PT_contacts,)
