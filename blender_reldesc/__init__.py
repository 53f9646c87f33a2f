"""blender_reldesc: adapt motion to a changed scene with relationship descriptors.

The numerical core (``blender_reldesc.core``) is pure numpy/scipy and is
importable without Blender.
"""
