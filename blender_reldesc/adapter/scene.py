"""The scene: finding objects and collections, the panel's settings, the .blend file itself."""

from __future__ import annotations

from types import SimpleNamespace

import bpy

from ..core import RelDescError


class SceneError(RelDescError):
    """Something in the Blender scene is missing or unusable; the message says what to do."""


def get_armature(name=None, context=None):
    """The armature object ``name``, or the active object when name is empty."""
    context = context or bpy.context
    if name:
        ob = bpy.data.objects.get(name)
        if ob is None:
            raise SceneError(f"no object named '{name}' in the file")
    else:
        ob = getattr(context, "active_object", None) or getattr(context.view_layer.objects, "active", None)
        if ob is None:
            raise SceneError("no armature given and no active object: select the character's armature")
    if ob.type != 'ARMATURE':
        raise SceneError(f"'{ob.name}' is a {ob.type.lower()}, not an armature")
    return ob


def find_object(name):
    """The object named ``name`` (None when there is none)."""
    return bpy.data.objects.get(name or "")


def find_action(name):
    return bpy.data.actions.get(name or "")


def find_collection(name):
    return bpy.data.collections.get(name or "")


#: What a job assumes when the scene has no RelDesc settings (the extension's properties not
#: registered: a script on the bpy wheel): ``properties.RelDescSceneSettings``' defaults, but no
#: influence group (a group is painted through the panel, which registers them).
DEFAULTS = dict(influence_group="", solver="DESCRIPTORS", reposition_contacts=False, contact_effectors="",
                contact_distance=0.015, contact_speed=0.12, use_bake_range=False, bake_frame_start=1,
                bake_frame_end=250, bake_step=1, use_bake_clean=False, bake_clean_tolerance=0.002,
                bake_interpolation="LINEAR", bake_target="ACTION")


def settings(scene):
    """The scene's RelDesc settings a job reads, as plain values (read once, on the main thread),
    with its frame rate (``fps``)."""
    s = getattr(scene, "reldesc", None)
    values = {k: (getattr(s, k) if s is not None else v) for k, v in DEFAULTS.items()}
    return SimpleNamespace(fps=scene.render.fps / scene.render.fps_base, registered=s is not None, **values)


def ensure_registered():
    """Register the extension's properties when run from the bpy wheel (the CLI, a batch worker)."""
    if not hasattr(bpy.types.Scene, "reldesc"):
        from .. import properties
        properties.register()


def open_file(path):
    bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)


def file_path():
    """The open .blend file's path ('' when unsaved)."""
    return bpy.data.filepath


def save_file(path):
    bpy.ops.wm.save_as_mainfile(filepath=path)


def current_scene():
    return bpy.context.scene



def partner_objects(arm, names):
    """The partner armatures named (a list or a comma-separated string), checked: each exists,
    is an armature other than ``arm`` and has an action."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out = []
    for name in names:
        ob = bpy.data.objects.get(name)
        if ob is None:
            raise SceneError(f"no object named '{name}' to bind as a partner: give the name of another armature")
        if ob.type != 'ARMATURE':
            raise SceneError(f"partner '{name}' is a {ob.type.lower()}, not an armature: partners are other "
                             "characters")
        if ob == arm:
            raise SceneError(f"'{name}' is the character itself: its partners are the other armatures it "
                             "interacts with")
        if ob.animation_data is None or ob.animation_data.action is None:
            raise SceneError(f"partner '{name}' has no action: give it the motion it plays with '{arm.name}'")
        if ob not in out:
            out.append(ob)
    return out


def register_cli_command(name, execute):
    """``blender -c <name>`` runs ``execute(argv)`` (Blender 4.2+; None before)."""
    if hasattr(bpy.utils, "register_cli_command"):
        return bpy.utils.register_cli_command(name, execute)
    return None


def unregister_cli_command(handle):
    bpy.utils.unregister_cli_command(handle)
