"""Processes started from a Python that imported the ``bpy`` wheel can import it too.

Importing the wheel puts Blender's script folders at the front of ``sys.path``. One of them,
``bpy/<version>/scripts/modules``, holds Blender's *own* ``bpy`` package, which works only in a
process whose ``bpy`` module has started Blender ("No module named '_bpy'" anywhere else).
A process spawned from such a Python (a Dask ``LocalCluster`` in a TD's script or notebook, a
``multiprocessing`` pool) inherits that ``sys.path``, so its ``import bpy`` finds the inner
package before the wheel. Putting that folder just after the wheel's own folder fixes it and
changes nothing else: ``bpy`` itself is already imported where the folder came from, and no other
name in the folder is also in the wheel's folder (``site-packages``).

Blender proper (``blender -b ... -c reldesc``) has no wheel folder on ``sys.path``: nothing moves.
"""

from __future__ import annotations

import os
import sys


def _has_inner_bpy(entry):
    return os.path.isfile(os.path.join(entry, "bpy", "__init__.py"))


def _has_bpy_wheel(entry):
    """The wheel's folder: a ``bpy`` package that is a compiled module, not Python source."""
    folder = os.path.join(entry, "bpy")
    return (os.path.isdir(folder) and not _has_inner_bpy(entry)
            and any(name.startswith("__init__.") for name in os.listdir(folder)))


def bpy_importable(path):
    """``path`` (a list like ``sys.path``) with every folder that holds Blender's inner ``bpy``
    package moved to just after the first folder that holds the ``bpy`` wheel. Unchanged when
    there is no wheel folder, or none of those folders stands before it."""
    path = list(path)
    wheel = next((i for i, entry in enumerate(path) if entry and _has_bpy_wheel(entry)), None)
    if wheel is None:
        return path
    inner = [entry for entry in path[:wheel] if entry and _has_inner_bpy(entry)]
    if not inner:
        return path
    rest = [entry for entry in path if entry not in inner]
    at = rest.index(path[wheel]) + 1
    return rest[:at] + inner + rest[at:]


def let_children_import_bpy():
    """Reorder ``sys.path`` in place (see the module's docstring); call it before starting
    processes and before ``import bpy`` in a process that was started from one."""
    sys.path[:] = bpy_importable(sys.path)
