"""What the panels share: the sub-panel placement, a box saying why a feature is unavailable, frame buttons."""

import textwrap

from ..optional import unavailable


def _unavailable(layout, name):
    """Draw why feature ``name`` cannot be used, and say so; False when it can."""
    message = unavailable(name)
    if message is None:
        return False
    box = layout.box()
    for i, line in enumerate(textwrap.wrap(message, 44)):
        box.label(text=line, icon='ERROR' if i == 0 else 'BLANK1')
    return True


class _SubPanel:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "RelDesc"
    bl_parent_id = "RELDESC_PT_main"


def _jump_buttons(layout, frames):
    """A row "Worst:" of buttons jumping to each frame of the space-separated ``frames``."""
    if frames:
        row = layout.row(align=True)
        row.label(text="Worst:")
        for f in frames.split():
            row.operator("reldesc.jump_to_frame", text=f).frame = int(f)
