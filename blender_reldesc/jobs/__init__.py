"""The jobs: what the operators, the live preview, the command line and batches run.

No module here imports bpy: a job reads what it needs through ``adapter`` on the main thread
(``read``), computes with the core alone (``compute``: safe on a worker thread) and writes
through ``adapter`` again (``write``). One module per feature:

- ``bind_bake``: ``BindJob`` and ``BakeJob`` (read -> solve -> plan keys -> write); ``stages``:
  what a binding carries besides its character plugs into a bake as a stage
- ``bound`` (a stored binding read back), ``keys`` (bake options, the key plan),
  ``controls`` (per-bone overrides, painted influence), ``contacts`` (Detect / Reposition)
- ``partners``, ``garment``, ``transfer``, ``reaching``, ``locomotion``: the features, each
  imported only where it is used (``optional.feature``), so one whose dependency broke
  cannot take the others down
- ``batch``: manifests of jobs on a local pool or a Dask cluster

The names below load their module on first use: ``jobs.batch``'s parent process (and the
command line's parser) import no bpy, which every other job module reaches through ``adapter``.
"""

import importlib

#: name -> the module of this package that defines it
_NAMES = {
    "ADAPTED_SUFFIX": "bind_bake", "BakeJob": "bind_bake", "BindJob": "bind_bake", "bake_job": "bind_bake",
    "bind_job": "bind_bake", "Bound": "bound", "load_binding": "bound", "rest_lengths": "bound",
    "ContactsJob": "contacts", "contact_plan": "contacts", "contact_settings": "contacts",
    "contacts_job": "contacts", "bone_controls": "controls", "read_influence": "controls",
    "BakeOptions": "keys", "bake_options": "keys", "print_progress": "base",
}
#: names kept here from before the Blender side was laid out by feature (one release): they read
#: or write stored data, which is the adapter's
_ADAPTER = {"environment_status": "bound", "load_binding_file": "bound", "save_binding_file": "bound",
            "set_contact_flag": "storage", "stored_contacts": "storage"}

__all__ = sorted(_NAMES) + sorted(_ADAPTER)


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    if name in _ADAPTER:
        return getattr(importlib.import_module(f"..adapter.{_ADAPTER[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
