"""blender_reldesc: adapt motion to a changed scene with relationship descriptors.

The numerical core (``blender_reldesc.core``) is pure numpy/scipy and is
importable without Blender; the Blender modules are imported in ``register``.
"""

# A process that imported the bpy wheel, or one started from it: processes started from here, and
# this one, import the wheel and not Blender's inner bpy package (``spawn``; in Blender, a no-op).
from .spawn import let_children_import_bpy

let_children_import_bpy()

_modules = None


def _blender_modules():
    from . import cli, operators, panels, properties
    from .viewport import live, overlay
    return [properties, operators, panels, live, overlay, cli]


def register():
    global _modules
    _modules = _blender_modules()
    for module in _modules:
        module.register()


def unregister():
    global _modules
    for module in reversed(_modules or _blender_modules()):
        module.unregister()
    _modules = None
