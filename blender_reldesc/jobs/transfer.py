"""Transfer to a novel object (``core.transfer``, Al-Ashqar's thesis ch. 4).

The job is a bake (``BakeJob``: the binding and the environment read the same way, the same
keys, the same ``<action>.adapted`` action, the source never changed) whose solve is a
transfer: the object ``from`` (a mesh of the bound environment) is swapped for the object
``to`` (any mesh in the file). Segment labels come from vertex groups named alike on both
objects (a triangle takes the group most of its corners are in), else from boolean face
attributes named alike (a face's first one set); objects with no shared names are cut into
their connected parts, named after each other by where they sit
(``core.transfer.label_parts`` / ``match_parts``).
"""

from __future__ import annotations

import time

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core.transfer import Segmented, TransferError, label_parts, match_parts, transfer
from ..core.transfer.segments import shared_segments
from .bind_bake import BakeJob

#: Vertex groups that are not segment labels.
NOT_SEGMENTS = {"reldesc_influence"}


def segmented(ob, bound=None):
    """A ``core.transfer.Segmented`` of mesh object ``ob`` in world space (where ``bound``'s
    character was bound: ``Bound.into_bind``), labelled by its vertex groups, else by its boolean
    face attributes (unlabelled triangles -1), or None when it has neither; and its vertices and
    triangles."""
    verts, tris, labels, names, kind = adapter.mesh.segment_labels(ob, NOT_SEGMENTS)
    if bound is not None:
        verts = bound.into_bind(verts, np.array([0]))
    if labels is None:
        return None, verts, tris
    seg = Segmented(verts, tris, labels, names)
    seg.kind = kind
    return seg, verts, tris


class TransferJob(BakeJob):
    """read (binding, environment, both objects) -> solve (transfer) -> keys -> write."""

    label = "transfer"
    carries_partners = False

    def __init__(self, scene, arm, source_object, target_object, warn=print, options=None):
        super().__init__(scene, arm, warn=warn, reposition_contacts=False, options=options, solver="descriptors")
        self.source_name, self.target_name = source_object, target_object

    def read(self):
        super().read()
        t0 = time.perf_counter()
        if self.source_name == self.target_name:
            raise SceneError(f"'{self.source_name}' is both the object to transfer from and to: pick another "
                             "object to transfer to")
        objects = self.bound.objects
        names = [ob.name for ob in objects]
        if self.source_name not in names:
            raise SceneError(f"'{self.source_name}' is not a mesh of the bound environment "
                             f"({', '.join(names)}): give the object the motion was bound with")
        target = adapter.scene.find_object(self.target_name)
        if target is None:
            raise SceneError(f"no object named '{self.target_name}' in the file: give the object to transfer to")
        if target.type != 'MESH':
            raise SceneError(f"'{self.target_name}' is a {target.type.lower()}, not a mesh: give a mesh object to "
                             "transfer to")
        counts = self.bound.meta["triangle_counts"]
        k = names.index(self.source_name)
        first = sum(counts[:k])
        self.template_triangles = np.arange(first, first + counts[k])
        template, tv, tt = segmented(objects[k], self.bound)
        novel, nv, nt = segmented(target, self.bound)
        if not len(nt):
            raise SceneError(f"'{self.target_name}' has no faces: give a mesh with faces to transfer to")
        shared = template is not None and novel is not None and self._shares(template, novel)
        if not shared:
            # No labels in common: connected parts, named after each other by where they sit.
            template = label_parts(tv, tt)
            novel = match_parts(template, label_parts(nv, nt))
            self.labels = "connected parts"
        else:
            self.labels = " and ".join(sorted({template.kind, novel.kind}))
        self.template, self.novel = template, novel
        self.read_seconds += time.perf_counter() - t0

    @staticmethod
    def _shares(template, novel):
        try:
            shared_segments(template, novel)
            return True
        except TransferError:
            return False

    def solve(self, progress=None):
        options = dict(vertex_influence=self.influence, bone_lengths=self.bone_lengths,
                       affinity_override=self.overrides, hinges=self.hinges, progress=progress)
        self.out = transfer(self.bound.binding, self.mesh, self.template_triangles, self.template, self.novel,
                            **options)
        self.result = self.out.result

    def write(self):
        report = super().write()
        o = self.out
        report["transfer"] = dict(source=self.source_name, target=self.target_name, labels=self.labels,
                                  segments=shared_segments(self.template, self.novel),
                                  key_frame=int(self.bound.frames[o.key]),
                                  matched=[self.bound.binding.skeleton.names[j]
                                           for j in np.flatnonzero(~np.isnan(o.targets[:, 0]))],
                                  seconds=o.seconds)
        return report


def transfer_job(scene, arm, source_object, target_object, progress=None, warn=print, options=None):
    """Transfer and bake; returns the report dictionary (``report['transfer']``)."""
    return TransferJob(scene, arm, source_object, target_object, warn, options).run(progress)
