"""What every operator shares: the armature and environment inputs, and the job runner
(modal with a worker thread when interactive, synchronous from scripts and in background)."""

import threading

import bpy
from bpy.props import StringProperty

from .. import adapter
from ..core import Cancelled, RelDescError
from ..viewport import live


class _Target:
    """Shared inputs: optional ``armature`` and ``environment`` names for scripting."""

    armature: StringProperty(name="Armature", default="",
                             description="Armature object name (default: the panel's, else the active object)")
    environment: StringProperty(name="Environment", default="",
                                description="Environment collection name (default: the panel's)")

    def get_armature(self, context):
        settings = context.scene.reldesc
        name = self.armature or (settings.armature.name if settings.armature else "")
        return adapter.get_armature(name, context)

    def get_environment(self, context):
        settings = context.scene.reldesc
        return self.environment or (settings.environment.name if settings.environment else "")

    def armature_or_report(self, context):
        """The armature, or None after reporting why there is none."""
        try:
            return self.get_armature(context)
        except RelDescError as e:
            self.report({'ERROR'}, str(e))
            return None

    @classmethod
    def poll(cls, context):
        return context.scene is not None and hasattr(context.scene, "reldesc")


class _WorkerState:
    """What the worker thread and the main thread share. The worker touches only this
    plain object (never bpy, never the operator): progress, cancel flag, error and
    warnings are read and replayed by the main thread."""

    def __init__(self):
        self.fraction = 0.0
        self.cancel = False
        self.error = None
        self.warnings = []          # list.append is atomic under the GIL

    def progress(self, done, total):
        self.fraction = done / max(total, 1)
        return not self.cancel


class _JobOperator(_Target):
    """Runs a job's read / compute / write phases; modal with a worker thread when interactive."""

    _job = None
    #: what a cancelled run left changed
    cancel_message = "Cancelled: nothing was changed"
    _thread = None
    _timer = None
    _state = None

    def make_job(self, context, warn):
        raise NotImplementedError

    def finish(self, context, report):
        raise NotImplementedError

    def _replay(self, state):
        for message in state.warnings:
            self.report({'WARNING'}, message)
        state.warnings.clear()

    def execute(self, context):
        with live.paused():
            return self._execute(context)

    def _execute(self, context):
        state = _WorkerState()
        try:
            job = self.make_job(context, state.warnings.append)
            report = job.run()
        except (RelDescError, Cancelled) as e:
            self._replay(state)
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        except Exception as e:          # a bug: report it, the details go to the console
            import traceback
            traceback.print_exc()
            self.report({'ERROR'}, f"Unexpected {type(e).__name__}: {e} (details in the system console)")
            return {'CANCELLED'}
        self._replay(state)
        self.finish(context, report)
        return {'FINISHED'}

    def invoke(self, context, event):
        if bpy.app.background:
            return self.execute(context)
        state = self._state = _WorkerState()
        try:
            with live.paused():              # the job reads the rig as its action plays it
                job = self._job = self.make_job(context, state.warnings.append)
                job.read()
        except RelDescError as e:
            self._replay(state)
            self.report({'ERROR'}, str(e))
            return {'CANCELLED'}
        self._replay(state)
        self._thread = threading.Thread(target=compute_in_worker, args=(job, state), daemon=True)
        self._thread.start()
        wm = context.window_manager
        wm.progress_begin(0, 100)
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        wm = context.window_manager
        state = self._state
        if event.type == 'ESC':
            state.cancel = True
        if event.type != 'TIMER':
            return {'RUNNING_MODAL'}
        wm.progress_update(int(100 * state.fraction))
        if self._thread.is_alive():
            return {'RUNNING_MODAL'}
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        self._replay(state)
        if state.error is not None:
            cancelled = isinstance(state.error, Cancelled)
            self.report({'WARNING'} if cancelled else {'ERROR'},
                        self.cancel_message if cancelled else str(state.error))
            return {'CANCELLED'}
        with live.paused():
            try:
                report = self._job.write()
            except RelDescError as e:
                self._replay(state)
                self.report({'ERROR'}, str(e))
                return {'CANCELLED'}
            self._replay(state)
            self.finish(context, report)
        return {'FINISHED'}


def compute_in_worker(job, state):
    """The compute phase of ``job`` on a worker thread: no bpy, only ``state`` is written."""
    try:
        job.compute(state.progress)
    except (RelDescError, Cancelled) as e:
        state.error = e
    except Exception as e:              # a bug: keep the modal loop alive to report it
        import traceback
        traceback.print_exc()
        state.error = RelDescError(f"Unexpected {type(e).__name__}: {e} (details in the system console)")

