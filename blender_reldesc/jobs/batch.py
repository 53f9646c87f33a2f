"""Batch retargeting: a manifest of jobs, run on a local pool of processes or on a Dask cluster.

A manifest (TOML) has one ``[[job]]`` table per job::

    [[job]]
    name = "shot010"
    operation = "bake"              # a command of the CLI (``commands.COMMANDS``): bind, bake, walk, ...
    file = "shots/shot010.blend"    # relative paths are relative to the manifest
    armature = "Walker"
    output = "out/shot010.blend"
    report = "out/shot010.json"
    reposition_contacts = true      # any other option of that command, by its long name

Each job is the command line ``<operation> <file> --<option> <value> ...`` run inside a worker
that imported ``bpy`` once (``execute``). Jobs that need another job's output (a bake of the
binding a bind job saves, a bake of a file a walk wrote) wait for it. A job whose outputs are
all newer than its inputs is skipped unless ``force``; a job never writes over its input file
unless it says ``overwrite = true``; a failing job does not stop the others.

This module's parent side imports no bpy: it reads the manifest, schedules and reports.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import threading
import time
import tomllib
from dataclasses import dataclass, field

from ..commands import COMMANDS

#: CLI commands a manifest job may run: every command of the table.
OPERATIONS = tuple(COMMANDS)
#: Job keys that are paths (relative to the manifest): inputs, then outputs.
INPUT_KEYS = ("file", "binding")
OUTPUT_KEYS = ("output", "report", "save_binding")
#: Keys of the job table itself, not options of the command.
OWN_KEYS = ("name", "operation", "file", "overwrite")


class ManifestError(Exception):
    """The manifest cannot be run (exit code 2); the message names the line and the reason."""


@dataclass
class Job:
    name: str
    operation: str
    argv: list
    inputs: list
    outputs: list
    line: int
    overwrite: bool = False
    needs: set = field(default_factory=set)


def _job_lines(text):
    """Line number (1-based) of each ``[[job]]`` header, in order."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if re.match(r"\s*\[\[\s*job\s*\]\]", line)]


def _key_line(text, start, key):
    """Line of ``key =`` in the job table starting at line ``start`` (else ``start``)."""
    lines = text.splitlines()
    for i in range(start, len(lines)):
        if i > start - 1 and re.match(r"\s*\[", lines[i]):
            break
        if re.match(rf"\s*{re.escape(key)}\s*=", lines[i]):
            return i + 1
    return start


def _options(operation):
    """{long option: ``commands.Option``} of a command."""
    return {o.long: o for o in COMMANDS[operation].options}


def load_manifest(path):
    """The jobs of manifest ``path`` (list of ``Job``). Raises ManifestError."""
    path = os.path.abspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror or e}") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    extra = sorted(set(data) - {"job"})
    if extra:
        raise ManifestError(f"{path}: unknown table or key '{extra[0]}': a manifest holds [[job]] tables only")
    tables = data.get("job", [])
    if not isinstance(tables, list) or not tables:
        raise ManifestError(f"{path}: no jobs: add one [[job]] table per shot")
    base = os.path.dirname(path)
    heads = _job_lines(text)
    jobs, names = [], set()
    for k, table in enumerate(tables):
        line = heads[k] if k < len(heads) else 1

        def bad(key, reason):
            return ManifestError(f"{path}:{_key_line(text, line, key) if key else line}: job "
                                 f"{table.get('name', k + 1)!s}: {reason}")

        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise bad("name", "needs a name (name = \"shot010\")")
        if name in names:
            raise bad("name", f"the name '{name}' is used by another job: names must be unique")
        names.add(name)
        operation = table.get("operation")
        if isinstance(operation, str):
            operation = operation.replace("_", "-")       # the operator's spelling too: detect_contacts
        if operation not in OPERATIONS:
            raise bad("operation", f"operation must be one of {', '.join(OPERATIONS)}, got {operation!r}")
        if not isinstance(table.get("file"), str):
            raise bad("file", "needs the .blend file to work on (file = \"shots/shot010.blend\")")
        overwrite = table.get("overwrite", False)
        if not isinstance(overwrite, bool):
            raise bad("overwrite", "overwrite must be true or false")
        options = _options(operation)

        def resolve(value):
            return os.path.normpath(os.path.join(base, value))

        file = resolve(table["file"])
        argv = [operation, file]
        inputs, outputs, paths = [file], [], {}
        for key, value in table.items():
            if key in OWN_KEYS:
                continue
            flag = "--" + key.replace("_", "-")
            option = options.get(flag)
            if option is None:
                known = ", ".join(sorted(o[2:].replace("-", "_") for o in options))
                raise bad(key, f"'{key}' is not an option of {operation} (options: {known})")
            if key == "map" and isinstance(value, str) and value.lower().endswith(".json"):
                value = resolve(value)                     # a retarget's map file, not a preset's name
                inputs.append(value)
            elif key in INPUT_KEYS + OUTPUT_KEYS:
                if not isinstance(value, str):
                    raise bad(key, f"{key} must be a path")
                value = paths[key] = resolve(value)
                (inputs if key in INPUT_KEYS else outputs).append(value)
            if isinstance(value, bool):
                if not option.switch:
                    raise bad(key, f"{key} takes a value, not {str(value).lower()}")
                if value:
                    argv.append(flag)
                continue
            if option.switch:
                raise bad(key, f"{key} is a switch: write {key} = true")
            values = value if isinstance(value, list) else [value]
            if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
                raise bad(key, f"{key} must be a string, a number or a list of them")
            argv.append(flag)
            argv += [str(v) for v in values]
        out = paths.get("output")
        if not overwrite and (out is None or out == file):
            raise bad("output" if out else None, "would save over its input file: give output = \"...\" or "
                      "overwrite = true")
        if overwrite and out is None:
            outputs.append(file)
        jobs.append(Job(name, operation, argv, inputs, outputs, line, overwrite))
    produced = {}
    for job in jobs:
        for o in job.outputs:
            if o in produced and produced[o] != job.name:
                raise ManifestError(f"{path}:{job.line}: job {job.name}: writes {o}, as job {produced[o]} does")
            produced[o] = job.name
    for job in jobs:
        job.needs = {produced[i] for i in job.inputs if i in produced and produced[i] != job.name}
    _check_cycles(path, jobs)
    return jobs


def _check_cycles(path, jobs):
    by_name = {j.name: j for j in jobs}
    state = {}

    def visit(name, chain):
        if state.get(name) == 1:
            raise ManifestError(f"{path}:{by_name[name].line}: job {name}: jobs need each other's outputs in a "
                                f"circle ({' -> '.join(chain + [name])})")
        if state.get(name) == 2:
            return
        state[name] = 1
        for other in sorted(by_name[name].needs):
            visit(other, chain + [name])
        state[name] = 2

    for j in jobs:
        visit(j.name, [])


def up_to_date(job):
    """Every output exists and is newer than every input."""
    if not job.outputs or job.overwrite:
        return False
    try:
        newest_in = max(os.path.getmtime(p) for p in job.inputs)
        oldest_out = min(os.path.getmtime(p) for p in job.outputs)
    except OSError:
        return False
    return oldest_out > newest_in


# --- the worker side: one job in a process that imported bpy once ---------------------------

_STATE = {"ready": False, "queue": None, "bpy_thread": None}


def _init_worker(queue=None, quiet=True, threads=None):
    """Import bpy and register the extension's properties once per worker process. ``threads``:
    the BLAS threads each worker may use (set before numpy loads; a user's setting wins), so
    that N workers on N cores do not each start a thread per core."""
    if _STATE["ready"]:
        return
    if threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, str(threads))
    # The bpy wheel can hang in its teardown when a worker's interpreter exits (seen with 4.5):
    # a worker ends at once instead, as multiprocessing's forked children do.
    import atexit
    atexit.register(os._exit, 0)
    if quiet:                       # Blender's own prints (file saved, ...) would scramble the terminal
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    from ..spawn import let_children_import_bpy
    let_children_import_bpy()          # started from a Python that imported the bpy wheel
    imported_here = "bpy" not in sys.modules
    from ..adapter import scene        # imports bpy, once per worker
    scene.ensure_registered()
    _STATE.update(ready=True, queue=queue, bpy_thread=threading.get_ident() if imported_here else None)


def _ready():
    return os.getpid()


def _progress_to(name):
    """The jobs' progress (``cli.run``'s ``progress``) sent to the parent's queue (None: printed)."""
    queue = _STATE["queue"]
    if queue is None:
        return None

    def reporter(label):
        def progress(done, total):
            queue.put(("progress", name, label, done / max(total, 1)))
            return True
        return progress

    return reporter


def execute(name, argv):
    """Run one job's command line in this worker; ``{name, status, seconds, error, pid}``."""
    if not _STATE["ready"]:
        _init_worker(quiet=False)
    from .. import cli
    t0 = time.perf_counter()
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = cli.run(list(argv), progress=_progress_to(name))
        except SystemExit as e:                # never let a job end the worker
            code = e.code if isinstance(e.code, int) else 1
    return _result(name, code, err.getvalue(), t0)


def _result(name, code, stderr, t0):
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line.split("error: ", 1)[-1] for line in lines if "error" in line] or lines
    return dict(name=name, status="ok" if code == 0 else "failed", seconds=time.perf_counter() - t0,
                error=None if code == 0 else (errors[-1] if errors else f"exit code {code}"),
                warnings=[line for line in lines if "warning" in line], pid=os.getpid())


def _execute_in_process(name, argv):
    """``execute`` in a fresh ``python -m blender_reldesc`` of its own (the job's prints are dropped)."""
    import subprocess
    t0 = time.perf_counter()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "blender_reldesc", *argv], capture_output=True, text=True, env=env)
    return _result(name, r.returncode, r.stderr, t0)


def _execute_on_dask(name, argv):
    """``execute`` in a Dask worker (its prints stay its own).

    Blender must be driven from the thread that imported ``bpy`` (another thread crashes it on
    the first file it opens). A task runs on one of the worker's threads; when ``bpy`` came in
    on another (the script that started a ``LocalCluster`` imports bpy at its top, and a spawned
    worker runs that script's top again in its main thread), or on another task thread, the job
    runs in a process of its own instead."""
    if "bpy" not in sys.modules:
        _init_worker(quiet=False)
    if _STATE["ready"] and _STATE["bpy_thread"] == threading.get_ident():
        return execute(name, argv)
    return _execute_in_process(name, argv)


# --- the parent side ---------------------------------------------------------------------------

class _Progress:
    """One updating status line (text) or JSON lines (json) on ``stream``."""

    def __init__(self, mode, total, stream):
        self.mode, self.total, self.stream = mode, total, stream
        self.running = {}
        self.counts = {"ok": 0, "failed": 0, "skipped": 0}
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.last = 0.0

    def event(self, **fields):
        if self.mode == "json":
            print(json.dumps(fields), file=self.stream, flush=True)

    def started(self, name):
        self.running[name] = ("", 0.0)
        self.event(event="start", job=name)
        self.draw()

    def progress(self, name, stage, fraction):
        if name in self.running:
            self.running[name] = (stage, fraction)
        self.event(event="progress", job=name, stage=stage, fraction=round(fraction, 4))
        self.draw()

    def finished(self, row):
        self.running.pop(row["name"], None)
        self.counts[row["status"]] += 1
        self.event(event="done", job=row["name"], status=row["status"], seconds=round(row["seconds"], 3),
                   error=row["error"])
        if self.mode == "text" and not self.tty:
            print(f"reldesc batch: {row['name']} {row['status']}"
                  + (f": {row['error']}" if row["error"] else "") + f" ({row['seconds']:.1f} s)",
                  file=self.stream, flush=True)
        self.draw(force=True)

    def draw(self, force=False):
        if self.mode != "text" or not self.tty:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.1:
            return
        self.last = now
        done = sum(self.counts.values())
        jobs = " | ".join(f"{n} {s} {100 * f:.0f}%" if s else n for n, (s, f) in list(self.running.items())[:3])
        line = (f"[{done}/{self.total}] ok {self.counts['ok']} failed {self.counts['failed']} "
                f"skipped {self.counts['skipped']}" + (f" | {jobs}" if jobs else ""))
        print("\r" + line[:160].ljust(160), end="", file=self.stream, flush=True)

    def close(self):
        if self.mode == "text" and self.tty:
            print(file=self.stream, flush=True)


class _LocalPool:
    """A pool of worker processes (spawned: each imports bpy once, in its main thread)."""

    def __init__(self, workers):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from ..spawn import let_children_import_bpy
        let_children_import_bpy()          # this process may have imported the bpy wheel
        ctx = multiprocessing.get_context("spawn")
        self.manager = ctx.Manager()
        self.queue = self.manager.Queue()
        threads = max(1, (os.cpu_count() or 1) // workers)
        self.executor = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                            initargs=(self.queue, True, threads))
        # Start every worker now (a spawned pool starts them one by one as work waits): the
        # seconds each takes to import bpy then overlap the first jobs instead of following them.
        for _ in range(workers):
            self.executor.submit(_ready)

    def submit(self, name, argv):
        return self.executor.submit(execute, name, argv)

    def messages(self):
        out = []
        while True:
            try:
                out.append(self.queue.get_nowait())
            except Exception:
                return out

    def close(self):
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.manager.shutdown()


class _DaskPool:
    """Jobs sent to a Dask distributed scheduler."""

    def __init__(self, address):
        try:
            from distributed import Client
        except ImportError:
            raise ManifestError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
        try:
            self.client = Client(address, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise RuntimeError(f"cannot reach the Dask scheduler at {address}: {e}") from None

    def submit(self, name, argv):
        return self.client.submit(_execute_on_dask, name, argv, key=f"reldesc-{name}-{time.time_ns()}", pure=False)

    def messages(self):
        return []

    def close(self):
        self.client.close()


def run_batch(manifest, workers=None, scheduler=None, force=False, summary=None, progress="text",
              stream=None, out=None):
    """Run a manifest; returns the exit code (0 all ok or skipped, 1 a job failed, 2 bad manifest)."""
    stream = stream or sys.stderr
    out = out or sys.stdout
    try:
        jobs = load_manifest(manifest)
    except ManifestError as e:
        print(f"reldesc: error: {e}", file=stream)
        return 2
    t0 = time.perf_counter()
    rows = {}
    show = _Progress(progress, len(jobs), out if progress == "json" else stream)
    workers = int(workers or os.cpu_count() or 1)
    try:
        pool = _DaskPool(scheduler) if scheduler else _LocalPool(workers)
    except (ManifestError, RuntimeError) as e:
        print(f"reldesc: error: {e}", file=stream)
        return 2 if isinstance(e, ManifestError) else 1
    pending = {j.name: j for j in jobs}
    running = {}
    try:
        while pending or running:
            for name, job in list(pending.items()):
                failed = [n for n in job.needs if rows.get(n, {}).get("status") == "failed"]
                if failed:
                    rows[name] = dict(name=name, status="failed", seconds=0.0,
                                      error=f"not run: it needs the output of job {failed[0]}, which failed")
                    show.finished(rows[name])
                    del pending[name]
                elif all(n in rows for n in job.needs):
                    del pending[name]
                    if not force and up_to_date(job):
                        rows[name] = dict(name=name, status="skipped", seconds=0.0, error=None)
                        show.finished(rows[name])
                    else:
                        running[name] = pool.submit(name, job.argv)
                        show.started(name)
            for kind, name, stage, fraction in pool.messages():
                show.progress(name, stage, fraction)
            for name, future in list(running.items()):
                if future.done():
                    del running[name]
                    try:
                        row = future.result()
                    except Exception as e:         # the worker died (crash, lost connection)
                        row = dict(name=name, status="failed", seconds=0.0,
                                   error=f"the worker running it failed: {type(e).__name__}: {e}")
                    rows[name] = row
                    show.finished(row)
            if running:
                time.sleep(0.05)
    finally:
        pool.close()
        show.close()
    ordered = [rows[j.name] for j in jobs]
    counts = {k: sum(r["status"] == k for r in ordered) for k in ("ok", "failed", "skipped")}
    report = dict(jobs=[{k: r.get(k) for k in ("name", "status", "seconds", "error")} for r in ordered], **counts,
                  workers=None if scheduler else workers, scheduler=scheduler, seconds=time.perf_counter() - t0)
    if summary:
        with open(summary, "w") as fh:
            json.dump(report, fh, indent=1)
    if progress == "json":
        print(json.dumps(dict(event="summary", **{k: report[k] for k in ("ok", "failed", "skipped", "seconds")})),
              file=out, flush=True)
    else:
        _table(ordered, report, out)
    return 1 if counts["failed"] else 0


def _table(rows, report, out):
    width = max([len(r["name"]) for r in rows] + [4])
    print(f"{'job'.ljust(width)}  status   seconds  error", file=out)
    for r in rows:
        print(f"{r['name'].ljust(width)}  {r['status'].ljust(7)}  {r['seconds']:7.2f}  {r['error'] or ''}", file=out)
    print(f"{report['ok']} ok, {report['failed']} failed, {report['skipped']} skipped in {report['seconds']:.1f} s",
          file=out)


def flamenco_settings(manifest):
    """The settings of a ``farm/flamenco/reldesc_batch.js`` job for a manifest: its jobs as the
    JSON the job type's compiler reads (each: name, file, the command after the file, and the
    jobs it needs)."""
    jobs = load_manifest(manifest)
    items = [dict(name=j.name, file=j.argv[1], args=[j.argv[0]] + j.argv[2:], needs=sorted(j.needs)) for j in jobs]
    return {"manifest": os.path.abspath(manifest), "jobs_json": json.dumps(items)}
