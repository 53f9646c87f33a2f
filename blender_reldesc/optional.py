"""Features that can be missing without taking the add-on down.

A feature's module fails to import when a dependency it needs is missing or changed its API
(scipy 1.17 removed ``sph_harm``: Transfer failed to import, and with it the whole add-on, bind
and bake included). Operators, panels and the command line reach a feature's module through
``feature(name)`` where they use it, never at module level: the add-on registers, every other
feature works, and using the broken one says what is missing and what to do.
"""

from __future__ import annotations

import importlib

from .core.errors import RelDescError

#: The features' job modules (``blender_reldesc.jobs.<name>``), with the name an animator knows.
FEATURES = {
    "garment": "Garments",
    "partners": "Partners",
    "reaching": "Reaching",
    "transfer": "Transfer to Object",
    "locomotion": "Walk Along Path",
    "retarget": "Retarget",
}

_broken = {}            # module name -> the message (a failed import is not retried on every redraw)


class FeatureUnavailable(RelDescError):
    """A feature's module cannot be imported in this installation."""


def feature(name):
    """The module ``blender_reldesc.jobs.<name>``; ``FeatureUnavailable`` when it cannot be imported."""
    if name not in _broken:
        try:
            return importlib.import_module(f"{__package__}.jobs.{name}")
        except Exception as e:          # ImportError, or an API a dependency changed, met at import
            _broken[name] = (f"{FEATURES[name]} is unavailable in this installation ({type(e).__name__}: {e}); "
                             "everything else works. Reinstall the extension zip made for your Blender and "
                             "platform, or with the bpy module install the dependencies docs/install.md names")
    raise FeatureUnavailable(_broken[name])


def unavailable(name):
    """Why feature ``name`` cannot be used, or None when it can."""
    try:
        feature(name)
    except FeatureUnavailable as e:
        return str(e)
    return None
