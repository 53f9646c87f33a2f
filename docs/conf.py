"""Sphinx configuration of the documentation site (``make docs``; pages in Markdown through MyST).

Sphinx rather than MkDocs: MkDocs 1.x has had no release since 2024 and Material for MkDocs ended its
maintenance in November 2026, while Sphinx, Furo and MyST-Parser are maintained and released; Sphinx
fails a build on a broken cross-reference, a missing image or a page left out of every table of
contents (``-W``), which is what keeps a manual honest.
"""

project = "blender_reldesc"
author = "the blender_reldesc developers"
copyright = "2026, " + author
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
html_theme = "furo"
html_title = "blender_reldesc"
html_static_path = []
