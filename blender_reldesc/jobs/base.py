"""What every job shares: progress printed on the command line, and arrays packed as bytes.

A job has three phases: ``read`` (Blender data, through ``adapter``, on the main thread),
``compute`` (the core only: safe on a worker thread, where Blender must not be touched) and
``write`` (through ``adapter`` again, on the main thread); ``run`` does all three. A job checks
everything before it changes anything, so a failed job leaves the file as it was, and returns
a report dictionary with counts and timings.
"""

from __future__ import annotations

import io

import numpy as np

from ..core.archive import save_npz


def print_progress(label):
    """A progress callback printing ``reldesc: <label> N%`` every ten per cent (the command line's)."""
    state = {"last": -1}

    def progress(done, total):
        pct = int(100 * done / max(total, 1))
        if pct >= state["last"] + 10:
            state["last"] = pct
            print(f"reldesc: {label} {pct}%", flush=True)
        return True

    return progress


def _save_npz(**arrays):
    buf = io.BytesIO()
    save_npz(buf, **arrays)
    return buf.getvalue()


def _load_npz(data):
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
