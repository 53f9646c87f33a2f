"""Rendering the demo: a stick figure on the armature, and before/after images side by side."""

from __future__ import annotations

import os

import bpy
import numpy as np

from .. import adapter
from .scenes import BEAM_X


def add_stick_figure(arm, radius=0.035, color=(0.85, 0.35, 0.15)):
    """A body that reads as a person for rendering: a capsule per bone (a cylinder with a
    sphere at each joint), thicker on the trunk and thighs, and a head."""
    coll = bpy.data.collections.new("Figure")
    bpy.context.scene.collection.children.link(coll)
    mat = _material("Figure", color)

    def part(op, name, bone, location, rotation=(0.0, 0.0, 0.0), **size):
        op(**size)
        ob = bpy.context.active_object
        for c in ob.users_collection:
            c.objects.unlink(ob)
        coll.objects.link(ob)
        ob.data.materials.append(mat)
        ob.name = f"Figure.{name}"
        ob.parent = arm
        ob.parent_type = 'BONE'
        ob.parent_bone = bone.name
        # Bone parenting puts the child at the bone's tail, y along the bone.
        ob.matrix_parent_inverse.identity()
        ob.location = location
        ob.rotation_euler = rotation
        return ob

    thick = ("Hips", "Spine", "Spine1", "Spine2", "UpLeg")
    for bone in arm.data.bones:
        r = radius * (1.8 if any(bone.name.endswith(t) or bone.name == t for t in thick) else 1.0)
        part(bpy.ops.mesh.primitive_cylinder_add, bone.name, bone, (0.0, -bone.length / 2, 0.0),
             (np.pi / 2, 0.0, 0.0), vertices=16, radius=r, depth=bone.length)
        part(bpy.ops.mesh.primitive_uv_sphere_add, bone.name + ".joint", bone, (0.0, -bone.length, 0.0),
             segments=16, ring_count=8, radius=r)
        if bone.name == "Head":
            part(bpy.ops.mesh.primitive_uv_sphere_add, "Head.skull", bone, (0.0, 0.02, 0.02),
                 segments=24, ring_count=12, radius=0.11)
    return coll


def _material(name, color):
    mat = bpy.data.materials.new(name)
    mat.diffuse_color = (*color, 1.0)
    mat.use_nodes = True
    bsdf = mat.node_tree.nodes.get("Principled BSDF")
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = (*color, 1.0)
    return mat


def _label(scene, cam, text):
    """A caption at the top of the camera's view (rendered with the scene)."""
    curve = bpy.data.curves.new("Label", 'FONT')
    curve.body = text
    curve.size = 0.055
    curve.align_x = 'CENTER'
    ob = bpy.data.objects.new("Label", curve)
    mat = bpy.data.materials.new("Label")
    mat.use_nodes = True
    out = mat.node_tree.nodes.get("Material Output")
    emit = mat.node_tree.nodes.new("ShaderNodeEmission")
    emit.inputs["Strength"].default_value = 1.0
    mat.node_tree.links.new(emit.outputs["Emission"], out.inputs["Surface"])
    curve.materials.append(mat)
    scene.collection.objects.link(ob)
    ob.parent = cam
    ob.location = (0.0, 0.27, -1.0)                    # camera space: in front, near the top edge
    return ob


def _render(scene, path):
    scene.render.filepath = path
    try:
        bpy.ops.render.render(write_still=True)
    except RuntimeError:
        scene.render.engine = 'BLENDER_WORKBENCH'
        bpy.ops.render.render(write_still=True)


def _stage(scene, view, lens, resolution):
    """A camera at ``view`` ``(location, rotation_euler)``, a sun, a grey-blue world and Cycles
    at 16 samples on the CPU, writing PNG; returns the camera."""
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    cam.data.lens = lens
    cam.location, cam.rotation_euler = view
    scene.camera = cam
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", 'SUN'))
    sun.rotation_euler = (np.radians(50), np.radians(10), np.radians(30))
    scene.collection.objects.link(sun)
    world = bpy.data.worlds.new("World")
    world.color = (0.55, 0.6, 0.68)
    scene.world = world
    scene.render.engine = 'CYCLES'
    scene.cycles.samples = 16
    scene.cycles.device = 'CPU'
    scene.render.resolution_x, scene.render.resolution_y = resolution
    scene.render.image_settings.file_format = 'PNG'
    return cam


def render_before_after(scene, arm, source, adapted, frame, path, view=None, captions=None, others=(),
                        after_only=()):
    """Render ``frame`` with the source and the adapted action side by side into ``path``.

    view : ``(location, rotation_euler)`` of the camera (default: the bridge and beam).
    captions : the two captions (before, after).
    others : more ``(armature, source, adapted)`` switched along (partners).
    after_only : modifiers shown in the after half only (a garment's point cache)."""
    # Wide enough for the lowered beam and the bent stretch of the bridge behind it.
    cam = _stage(scene, view or ((BEAM_X + 1.6, -7.8, 1.15), (np.radians(88), 0.0, 0.0)), 35, (640, 420))
    halves = []
    captions = captions or ("Before: source motion in the edited scene", "After: adapted")
    for action, tag, text in ((source, "before", captions[0]), (adapted, "after", captions[1])):
        for ob, act in [(arm, action)] + [(o, s if tag == "before" else a) for o, s, a in others]:
            adapter.assign_action(ob, act)
            ob.animation_data.action_slot = act.slots[0]
        for mod in after_only:
            mod.show_viewport = mod.show_render = tag == "after"
        scene.frame_set(frame)
        label = _label(scene, cam, text)
        p = os.path.splitext(path)[0] + f"_{tag}.png"
        _render(scene, p)
        bpy.data.objects.remove(label)
        img = bpy.data.images.load(p)
        px = np.empty(img.size[0] * img.size[1] * 4, np.float32)
        img.pixels.foreach_get(px)
        halves.append(px.reshape(img.size[1], img.size[0], 4))
        bpy.data.images.remove(img)
    both = np.concatenate(halves, axis=1)
    out = bpy.data.images.new("before_after", both.shape[1], both.shape[0], alpha=True)
    out.pixels.foreach_set(both.ravel())
    out.filepath_raw = path
    out.file_format = 'PNG'
    out.save()
    for ob, act in [(arm, adapted)] + [(o, a) for o, _, a in others]:
        adapter.assign_action(ob, act)
        ob.animation_data.action_slot = act.slots[0]

