"""Reaching: the bound armature's hand reaches an Empty at a frame, baked (``jobs.reaching``)."""

import bpy
from bpy.props import EnumProperty, IntProperty, StringProperty

from ..optional import feature
from .base import _JobOperator


class RELDESC_OT_reach(_JobOperator, bpy.types.Operator):
    """Make the hand bone reach the target Empty at the frame, out and back over the window, and bake
    it into '<action>.adapted' (the rest of the body keeps its relation to the environment)"""
    bl_idname = "reldesc.reach"
    bl_label = "Reach"
    bl_options = {'REGISTER', 'UNDO'}

    # Left empty (or negative), each takes the Reaching panel's value.
    hand: StringProperty(name="Hand", default="", options={'SKIP_SAVE'}, description="Hand bone name")
    target: StringProperty(name="Target", default="", options={'SKIP_SAVE'}, description="Empty to reach")
    frame: IntProperty(name="Frame", default=-1, options={'SKIP_SAVE'},
                       description="Frame the hand is on the target (negative: the panel's)")
    window: IntProperty(name="Window", default=-1, options={'SKIP_SAVE'},
                        description="Frames to reach out over, and back (negative: the panel's)")
    hold: IntProperty(name="Hold", default=-1, options={'SKIP_SAVE'},
                      description="Frames the hand stays on the target (negative: the panel's)")
    database: StringProperty(name="Database", default="", options={'SKIP_SAVE'},
                             description="Comma-separated reaching actions to learn from (empty: the panel's)")
    solve: EnumProperty(name="Solve", options={'SKIP_SAVE'}, default='PANEL', items=[
        ('PANEL', "Panel", ""), ('BODY', "Whole Body", ""), ('ARM', "Arm Alone", "")])

    def make_job(self, context, warn):
        s = context.scene.reldesc
        target = self.target or (s.reach_target.name if s.reach_target else "")
        database = [n.strip() for n in (self.database or s.reach_database).split(",") if n.strip()]
        reaching = feature("reaching")
        return reaching.ReachJob(context.scene, self.get_armature(context), self.hand or s.reach_hand, target,
                                 self.frame if self.frame >= 0 else s.reach_frame,
                                 self.window if self.window >= 0 else s.reach_window,
                                 self.hold if self.hold >= 0 else s.reach_hold, database, warn=warn,
                                 options={},
                                 whole_body=s.reach_whole_body if self.solve == 'PANEL' else self.solve == 'BODY')

    def finish(self, context, report):
        r = report["reach"]
        self.report({'INFO'}, f"{r['hand']} reaches '{r['target']}' at frame {r['frame']} (frames "
                              f"{r['window'][0]}-{r['window'][1]}, {1000 * r['hand_error']:.1f} mm off) "
                              f"in '{report['action']}'")


classes = (RELDESC_OT_reach,)
