"""``python -m blender_reldesc`` (with the ``bpy`` wheel)."""

import os
import sys

from .cli import run

if __name__ == "__main__":
    code = run(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without Blender's module teardown: the bpy 4.5 wheel can hang in it
    # at interpreter exit (seen with 4.5.15); every file is written by now.
    os._exit(code)
