"""Live preview with contact re-positioning (the contacts paper's interactive loop).

Re-positioning and root replanning act on whole phases, so a preview that solves one
frame at a time cannot show them. ``ContactsPreview`` adapts the whole clip with
``adapt_with_contacts`` when the environment changes (once per edit: some 0.5-1 s for
300 frames) and shows every frame from that result, which is exactly what the bake
gives. Static environments only: an animated one is given to a preview one frame at a
time, so its other frames are not known (the per-frame ``LiveSession`` serves it).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import RelDescError
from .repositioning import adapt_with_contacts, detect_contacts


class ContactsPreview:
    """``pose(frame, vertices)`` like ``LiveSession``, with contacts re-positioned.

    contact_options : ``adapt_with_contacts`` settings (effectors, distance, speed, fps,
        locked, ignored, ...); options : ``adapt`` settings (bone_lengths, affinity_override,
        hinges, ...); phases : the ``detect_contacts`` result for these settings when the caller
        has it (detected here otherwise). After ``pose``, ``outcomes`` holds the contacts' statuses and ``seconds``
        how long the last whole-clip solve took.
    """

    def __init__(self, binding, contact_options=None, phases=None, **options):
        if binding.mesh.animated:
            raise RelDescError("contact re-positioning in the live preview needs a static environment: "
                               "bake to see contacts on an animated one")
        self.binding = binding
        self.contact_options = dict(contact_options or {})
        self.options = dict(options)
        detect = {k: self.contact_options[k] for k in ("effectors", "distance", "speed", "fps")
                  if k in self.contact_options}
        self.phases = detect_contacts(binding, **detect) if phases is None else phases
        self._vertices = None
        self.positions = None
        self.outcomes = []
        self.seconds = 0.0
        self.solves = 0

    def set_influence(self, vertex_influence):
        """New painted influence (V,) or None; the next pose solves again when it changed."""
        old = self.options.get("vertex_influence")
        if (old is None) != (vertex_influence is None) or (old is not None and not np.array_equal(old, vertex_influence)):
            self.options["vertex_influence"] = vertex_influence
            self._vertices = None

    def invalidate(self):
        self._vertices = None

    def pose(self, frame, vertices):
        """Adapted joint positions (J,3) at ``frame`` for the environment ``vertices`` (V,3)."""
        vertices = np.asarray(vertices, dtype=float)
        if self._vertices is None or self._vertices.shape != vertices.shape or not np.array_equal(self._vertices,
                                                                                                    vertices):
            t0 = time.perf_counter()
            mesh = self.binding.mesh.with_vertices(vertices)
            result, self.outcomes = adapt_with_contacts(self.binding, mesh, phases=self.phases,
                                                        **self.contact_options, **self.options)
            self.positions = result.positions
            self._vertices = vertices.copy()
            self.seconds = time.perf_counter() - t0
            self.solves += 1
        frame = int(np.clip(frame, 0, len(self.positions) - 1))
        return self.positions[frame].copy()
