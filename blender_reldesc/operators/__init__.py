"""Operators: thin wrappers that gather inputs, run a job and report; one module per feature,
named as the jobs (``jobs``) and the panels (``panels``).

Interactive runs of the jobs are modal: the core computation runs in a worker thread (it
touches no Blender data), the window-manager progress bar moves, and Esc cancels cleanly
(nothing is written). From scripts and in background mode they run synchronously and print
progress.
"""

import bpy

from . import bind_bake, contacts, controls, garment, locomotion, reaching, retarget, transfer, viewport
from .base import _JobOperator, _Target, _WorkerState, compute_in_worker  # noqa: F401 (tests import them)

classes = (bind_bake.classes + controls.classes + contacts.classes + viewport.classes + locomotion.classes
           + reaching.classes + transfer.classes + garment.classes + retarget.classes)
register, unregister = bpy.utils.register_classes_factory(classes)
