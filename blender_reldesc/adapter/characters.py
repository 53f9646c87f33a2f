"""Characters a job adds to the scene: the walkers of a crowd, each a linked duplicate of the
source armature playing an action of its own."""

from __future__ import annotations

import bpy

from .actions import write_action
from .storage import WALK_KEY


def write_walk_characters(scene, arm, frames, keys, rig, action_names):
    """One character per entry of ``keys`` (its channels, as ``actions.write_action`` takes them):
    a linked duplicate of ``arm`` (its armature data shared) with linked duplicates of the meshes
    it deforms, in collection ``<arm> walk``, each playing a new action of ``action_names``. The
    characters and actions of a previous walk of ``arm`` are removed first. Returns the
    characters' and the actions' names."""
    name = f"{arm.name} walk"
    coll = bpy.data.collections.get(name)
    if coll is None:
        coll = bpy.data.collections.new(name)
        scene.collection.children.link(coll)
    elif coll.name not in scene.collection.children and not any(coll.name in c.children for c in
                                                                 bpy.data.collections):
        scene.collection.children.link(coll)
    remove_walk_characters(arm)
    names, actions = [], []
    deformed = [ob for ob in bpy.data.objects if ob.parent == arm and ob.type == 'MESH']
    for c, channels in enumerate(keys):
        new = arm.copy()                               # linked: the armature data is shared
        new.name = f"{arm.name}.walk.{c:03d}"
        new.animation_data_clear()
        new.matrix_world = arm.matrix_world.copy()
        new[WALK_KEY] = arm.name
        coll.objects.link(new)
        for child in deformed:
            twin = child.copy()
            twin.parent = new
            twin.matrix_parent_inverse = child.matrix_parent_inverse.copy()
            for mod in twin.modifiers:
                if mod.type == 'ARMATURE' and mod.object == arm:
                    mod.object = new
            twin[WALK_KEY] = arm.name
            coll.objects.link(twin)
        action = write_action(new, action_names[c], frames, rig, channels)
        action[WALK_KEY] = arm.name
        names.append(new.name)
        actions.append(action.name)
    if scene.frame_end < frames[-1]:
        scene.frame_end = int(frames[-1])
    return names, actions


def remove_walk_characters(arm):
    """Remove the characters (and the meshes they deform) a previous walk of ``arm`` made, and
    their actions when nothing else uses them."""
    gone = [ob for ob in bpy.data.objects if ob.get(WALK_KEY) == arm.name and ob != arm]
    actions = {ob.animation_data.action for ob in gone
               if ob.type == 'ARMATURE' and ob.animation_data is not None and ob.animation_data.action}
    for ob in gone:
        bpy.data.objects.remove(ob)
    for action in actions:
        if action.get(WALK_KEY) == arm.name and action.users == 0:
            bpy.data.actions.remove(action)
