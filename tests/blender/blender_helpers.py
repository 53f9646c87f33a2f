"""Helpers shared by the Blender-level tests."""

import numpy as np


def heads_over_frames(scene, arm, frames):
    """World positions (F,B,3) of the bone heads, as Blender evaluates them."""
    from blender_reldesc import adapter
    out = []
    for f in frames:
        scene.frame_set(int(f))
        head, _, _ = adapter.read_pose(arm)
        out.append(adapter.to_world(adapter.world_matrix(arm), head))
    return np.stack(out)


def evaluated_vertices(ob, scene, frame):
    """World vertices (V,3) of mesh object ``ob`` as Blender evaluates it at ``frame``."""
    import bpy
    scene.frame_set(frame)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    co = np.empty(len(ev.data.vertices) * 3)
    ev.data.vertices.foreach_get("co", co)
    m = np.array(ev.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def fcurve_snapshot(action):
    from blender_reldesc.adapter import _fcurves
    snap = {}
    for fc in _fcurves(action):
        co = np.empty(len(fc.keyframe_points) * 2, np.float32)
        fc.keyframe_points.foreach_get("co", co)
        snap[(fc.data_path, fc.array_index)] = co
    return snap


def mixamo_with_fingers(arm):
    """Give the generated walker three unkeyed bones per finger on each hand, then Mixamo's
    names (``mixamorig:`` before every bone's)."""
    import bpy
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    eb = arm.data.edit_bones
    for side in ("Left", "Right"):
        hand = eb[f"{side}Hand"]
        for k, finger in enumerate(("Thumb", "Index", "Middle", "Ring", "Pinky")):
            parent, head = hand, np.array(hand.tail) + np.array([0.0, 0.02 * (k - 2), 0.0])
            for n in range(1, 4):
                bone = eb.new(f"{side}Hand{finger}{n}")
                bone.head, bone.tail = head, head + np.array([0.0, 0.0, -0.025])
                bone.parent, bone.use_connect = parent, n > 1
                parent, head = bone, np.array(bone.tail)
    bpy.ops.object.mode_set(mode='OBJECT')
    for b in list(arm.data.bones):
        b.name = "mixamorig:" + b.name


class PanelLayout:
    """Records what a panel draws (headless: no real UI layout): ``log`` gets ("label", text),
    ("prop", name), ("operator", idname, enabled) and ("list", UIList name, collection name)."""

    def __init__(self, log):
        self.log, self.enabled, self.scale_y = log, True, 1.0

    def label(self, text="", **kw):
        self.log.append(("label", text))

    def prop(self, data, name, **kw):
        self.log.append(("prop", name))

    def operator(self, idname, **kw):
        self.log.append(("operator", idname, self.enabled))

    def template_list(self, *args, **kw):
        self.log.append(("list", args[0], args[3]))

    def row(self, **kw):
        return PanelLayout(self.log)

    column = box = row
