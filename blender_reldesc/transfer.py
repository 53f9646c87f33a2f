"""Transfer to a novel object in Blender (``core.transfer``, Al-Ashqar's thesis ch. 4).

The job is a bake (``jobs.BakeJob``: the binding and the environment read the same way, the
same keys, the same ``<action>.adapted`` action, the source never changed) whose compute is a
transfer: the object ``from`` (a mesh of the bound environment) is swapped for the object
``to`` (any mesh in the file). Segment labels come from vertex groups named alike on both
objects (a triangle takes the group most of its corners are in), else from boolean face
attributes named alike (a face's first one set); objects with no shared names are cut into
their connected parts, named after each other by where they sit
(``core.transfer.label_parts`` / ``match_parts``).
"""

import time

import bpy
import numpy as np

from . import adapter, jobs
from .adapter import SceneError
from .core.transfer import Segmented, TransferError, label_parts, match_parts, transfer
from .core.transfer.segments import shared_segments

#: Vertex groups that are not segment labels.
NOT_SEGMENTS = {"reldesc_influence"}


#: Boolean face attributes Blender itself makes (not segment labels).
BUILTIN_FACE_FLAGS = {"sharp_face"}


def _face_flag_labels(ob, depsgraph):
    """Per triangle the first of the object's boolean face attributes set on it (-1: none),
    and their names; (None, []) when it has none. Attributes whose names start with '.' are
    Blender's own (selection, hiding)."""
    ev = ob.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        flags = [a for a in me.attributes if a.domain == 'FACE' and a.data_type == 'BOOLEAN'
                 and not a.name.startswith(".") and a.name not in BUILTIN_FACE_FLAGS]
        if not flags:
            return None, []
        me.calc_loop_triangles()
        poly = np.empty(len(me.loop_triangles), np.int32)
        me.loop_triangles.foreach_get("polygon_index", poly)
        values = np.zeros((len(me.polygons), len(flags)), bool)
        for k, a in enumerate(flags):
            col = np.zeros(len(me.polygons), bool)
            a.data.foreach_get("value", col)
            values[:, k] = col
        names = [a.name for a in flags]
    finally:
        ev.to_mesh_clear()
    per_tri = values[poly]
    return np.where(per_tri.any(axis=1), per_tri.argmax(axis=1), -1), names


def segmented(ob, depsgraph=None):
    """A ``core.transfer.Segmented`` of mesh object ``ob`` in world space, labelled by its vertex
    groups, else by its boolean face attributes (unlabelled triangles -1), or None when it has
    neither."""
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    verts, tris, _ = adapter.read_environment(depsgraph, [ob])
    groups = [vg for vg in ob.vertex_groups if vg.name not in NOT_SEGMENTS]
    if not groups:
        labels, names = _face_flag_labels(ob, depsgraph)
        if labels is None:
            return None, verts, tris
        seg = Segmented(verts, tris, labels, names)
        seg.kind = "face attributes"
        return seg, verts, tris
    ev = ob.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        weight = np.zeros((len(me.vertices), len(groups)))
        column = {vg.index: k for k, vg in enumerate(groups)}
        for v in me.vertices:                               # vertex groups are not attributes
            for g in v.groups:
                k = column.get(g.group)
                if k is not None:
                    weight[v.index, k] = g.weight
    finally:
        ev.to_mesh_clear()
    corner = weight[tris].sum(axis=1)                        # (T, G) summed over the corners
    labels = np.where(corner.max(axis=1) >= 1.5, corner.argmax(axis=1), -1)   # most corners in a group
    seg = Segmented(verts, tris, labels, [vg.name for vg in groups])
    seg.kind = "vertex groups"
    return seg, verts, tris


class TransferJob(jobs.BakeJob):
    """read (binding, environment, both objects) -> compute (transfer) -> write (keys)."""

    label = "transfer"
    adapts_partners = False

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
        target = bpy.data.objects.get(self.target_name or "")
        if target is None:
            raise SceneError(f"no object named '{self.target_name}' in the file: give the object to transfer to")
        if target.type != 'MESH':
            raise SceneError(f"'{self.target_name}' is a {target.type.lower()}, not a mesh: give a mesh object to "
                             "transfer to")
        depsgraph = bpy.context.evaluated_depsgraph_get()
        _, _, counts = adapter.read_environment(depsgraph, objects, triangles=False)
        k = names.index(self.source_name)
        first = sum(t for _, t in counts[:k])
        self.template_triangles = np.arange(first, first + counts[k][1])
        template, tv, tt = segmented(objects[k], depsgraph)
        novel, nv, nt = segmented(target, depsgraph)
        if not len(nt):
            raise SceneError(f"'{self.target_name}' has no faces: give a mesh with faces to transfer to")
        shared = template is not None and novel is not None and self._shares(template, novel)
        if not shared:
            # No labels in common: connected parts, named after each other by where they sit.
            template = label_parts(tv, tt)
            novel = match_parts(template, label_parts(nv, nt))
            self.labels = "connected parts"
        else:
            kinds = sorted({template.kind, novel.kind})
            self.labels = " and ".join(kinds)
        self.template, self.novel = template, novel
        self.read_seconds += time.perf_counter() - t0

    @staticmethod
    def _shares(template, novel):
        try:
            shared_segments(template, novel)
            return True
        except TransferError:
            return False

    def compute(self, progress=None):
        t0 = time.perf_counter()
        options = dict(vertex_influence=self.influence, bone_lengths=self.bone_lengths,
                       affinity_override=self.overrides, hinges=self.hinges, progress=progress)
        self.out = transfer(self.bound.binding, self.mesh, self.template_triangles, self.template, self.novel,
                            **options)
        self.result = self.out.result
        self.outcomes = None
        self._planned(t0)

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
