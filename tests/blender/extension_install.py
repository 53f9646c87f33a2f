"""Run by test_extension.py in a fresh process with a fresh HOME: the zip named last on the command
line is installed as a user installs it (Install from Disk into the user repository, enabled on
install), then a bind and a bake run through the enabled add-on.

scipy is hidden from this venv, so it can only come from the wheel the zip bundles for this
Python, as in a user's Blender (which has numpy and no scipy). Prints SCIPY <version> <path> and,
last, EXTENSION-OK.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig

ZIP = sys.argv[-1]
VENV_SITE = os.path.realpath(sysconfig.get_paths()["purelib"])


def _outside_venv(entry):
    real = os.path.realpath(entry)
    return os.path.commonpath([real, VENV_SITE]) != VENV_SITE


class BundledScipyOnly(importlib.abc.MetaPathFinder):
    """Finds ``scipy`` only outside the venv (the extension's wheel folder)."""

    def find_spec(self, name, path=None, target=None):
        if name != "scipy":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p and _outside_venv(p)])
        if spec is None:
            raise ModuleNotFoundError("No module named 'scipy' outside the test venv", name=name)
        return spec


sys.meta_path.insert(0, BundledScipyOnly())

import bpy  # noqa: E402  (bpy first: it puts Blender's own modules on sys.path)
import addon_utils  # noqa: E402

bpy.ops.wm.read_factory_settings(use_empty=True)
assert bpy.ops.extensions.package_install_files(filepath=ZIP, repo="user_default",
                                                enable_on_install=True) == {'FINISHED'}
MODULE = "bl_ext.user_default.blender_reldesc"
assert MODULE in bpy.context.preferences.addons, "installed but not enabled"

import scipy  # noqa: E402

print("SCIPY", scipy.__version__, scipy.__file__, flush=True)
demo = importlib.import_module(MODULE + ".demo")
scene, arm, env, bridge, beam = demo.build_scene(frames=20, deck_cells=(20, 4), reset=False)
assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
demo.lower_beam(beam, 0.2)
assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
assert "Walk.adapted" in bpy.data.actions and "Walk" in bpy.data.actions      # the source is kept
assert "blender_reldesc" not in sys.modules, "the repository copy was imported instead of the zip"
addon_utils.disable(MODULE)
assert "bind" not in dir(bpy.ops.reldesc)
assert not hasattr(bpy.types.Scene, "reldesc")
print("EXTENSION-OK", flush=True)
os._exit(0)             # the bpy 4.5 wheel can hang in its teardown at exit
