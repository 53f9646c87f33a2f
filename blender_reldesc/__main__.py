"""``python -m blender_reldesc`` (with the ``bpy`` wheel)."""

import sys

from .cli import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
