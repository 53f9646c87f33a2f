"""Garments carried by descriptors (seed 000 §9).

Bind Garment records a mesh object (a skirt, a cape: its own animation, a baked cloth
simulation or shape keys) as a garment of a bound armature. Every bake of that armature then
reads the garment as it plays with the *source* action, carries it onto the adapted motion
(``core.garment``; ``GarmentStage``, a bake stage), writes a PC2 point cache beside the .blend (or in
the temporary folder for an unsaved file) and points a Mesh Cache modifier ("RelDesc Garment",
last in the stack) at it, so the garment plays back without a simulation. The garment's own
data are never changed; removing the modifier shows it as it was.

Bind Garment also keeps the garment's source as bound (``<garment>.reldesc.source.pc2`` beside
the .blend): where bones were lengthened since Bind, a garment skinned to them plays through
the edited bones, and the bake carries the kept source instead.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import garment as core_garment
from ..core.errors import RelDescError
from .bound import Bound


def _bound_garment(bound, name, verts, tris, radii):
    """``core.garment.bind_garment`` of garment ``name`` as the source plays it (``verts`` (F,V,3),
    ``tris``), kept with the binding for the next bake while the garment, the body's radii and
    the binding stay the same: binding a 10k-vertex skirt (its control graph, its embedding)
    took 1.5 s of every bake."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (verts, tris, radii):
        digest.update(b"-" if part is None else np.ascontiguousarray(part).tobytes())
    digest = digest.digest()
    memo = bound.binding._joint_models
    key = ("garment", name)
    kept = memo.get(key)
    if kept is not None and kept[0] == digest:
        return kept[1]
    b = bound.binding
    try:
        g = core_garment.bind_garment(b.skeleton, b.motion, verts, tris, body_height=b.body_height, radii=radii,
                                      environment=b.mesh)
    except RelDescError as e:
        raise SceneError(f"garment '{name}': {e}") from None
    memo[key] = (digest, g)
    return g


def _digest(*arrays):
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _read(scene, arm, bound, source, garment):
    """A garment as the source plays it, and the body's capsule radii without it (the other
    garments aside too: ``adapter.skin``): ``(verts (F,V,3), tris, radii)``.

    Where bones were lengthened since Bind, the garment as the source plays it now is skinned to
    the edited bones (a cape on thighs 15 % longer, through Blender's automatic weights: edges
    19 % longer before anything is carried); its source is then the one Bind Garment kept
    (``_kept_source``)."""
    kept = bool(bound.changed_bones) and adapter.pointcache.skinned_to(garment, arm)
    # Where its kept source is carried, one frame tells the garment's triangles and vertex count.
    verts, tris = adapter.pointcache.source_vertices(scene, arm, source, bound.frames[:1] if kept else bound.frames,
                                                     garment)
    if kept:
        verts = _kept_source(arm, bound, garment, (len(bound.frames),) + verts.shape[1:])
    # Where the character was bound: the garment goes with the armature (moved with its set since
    # Bind, the binding's world is the bind-time one; scaled, the body it fits is the bound one).
    elif bound.carry is not None or bound.object_scale != 1.0:
        verts = np.stack([bound.body_into_bind(v, f) for f, v in enumerate(verts)])
    radii = adapter.skin.measure_radii(arm, bound.binding.skeleton, exclude={garment.name}) / bound.object_scale
    return verts, tris, radii


def _keep_source(arm, bound, garment, verts):
    """Write the garment's source as bound (``verts`` (F,V,3), where the character was bound)
    beside the .blend and record where on the armature, with its digest and the binding's."""
    path = adapter.pointcache.cache_path(garment, "source")
    core_garment.write_pc2(path, verts, start=float(bound.frames[0]))
    stored = core_garment.read_pc2(path)[0]                       # as it reads back (float32)
    return dict(path=path, digest=_digest(stored), binding=_digest(bound.binding.motion),
                data=adapter.pointcache.data_digest(garment))


def _kept_source(arm, bound, garment, shape):
    """The garment's source kept by Bind Garment (F,V,3); SceneError when it is not there or not
    this binding's and this garment's."""
    record = adapter.storage.garment_records(arm).get(garment.name)
    what = (f"garment '{garment.name}': the bones {', '.join(bound.changed_bones[:3])} changed since Bind, and "
            "the garment as it plays now is skinned to them")
    fix = "set the bones back, Bind Garment again, then edit them"
    if record is None or record.get("binding") != _digest(bound.binding.motion):
        raise SceneError(f"{what}; its source as bound was not kept (bound before this version, or the "
                         f"character bound again since): {fix}")
    if record.get("data") != adapter.pointcache.data_digest(garment):
        raise SceneError(f"{what}, and the garment itself changed since Bind Garment (its vertices, weights or "
                         f"shape keys), so neither its kept source nor what plays now is its source: {fix}")
    try:
        verts = core_garment.read_pc2(record["path"])[0]
    except (OSError, RelDescError) as e:
        raise SceneError(f"{what}; its source as bound ({record['path']}) cannot be read ({e}): {fix}") from None
    if verts.shape != tuple(shape) or _digest(verts) != record.get("digest"):
        raise SceneError(f"{what}; its source as bound ({record['path']}) was overwritten: {fix}")
    return verts


def bind_garment(scene, arm, name, scale_with_body=False):
    """Record mesh ``name`` as a garment of the bound ``arm`` (checked against the binding: the
    garment must be near the body); ``scale_with_body``: carried as the paper carries it, its
    proportions following the body's bones (``core.garment.carry_garment(keep_size=False)``),
    else it keeps its size. Returns a report."""
    garment = adapter.pointcache.garment_object(name, arm)
    bound = Bound(arm, scene)
    if bound.source is None:
        raise SceneError(f"the source action '{bound.meta['action']}' is gone: re-bind with the motion to adapt")
    if bound.changed_bones:
        raise SceneError(f"the bones {', '.join(bound.changed_bones[:3])} of '{arm.name}' changed since Bind, and "
                         f"'{garment.name}' as it plays now is skinned to them: bind the garment with the bones as "
                         "bound (set them back), or bind the character again first")
    verts, tris, radii = _read(scene, arm, bound, bound.source, garment)
    g = _bound_garment(bound, garment.name, verts, tris, radii)
    record = dict(_keep_source(arm, bound, garment, verts), scale_with_body=bool(scale_with_body))
    names = adapter.storage.add_garment(arm, garment.name, record)
    return dict(garment=garment.name, vertices=int(verts.shape[1]), frames=int(len(bound.frames)),
                edges=int(len(g.edges)), garments=names, scale_with_body=bool(scale_with_body))


class GarmentStage:
    """The bake stage of an armature with garments: each garment read as the source plays it
    (read), carried onto the adapted motion (compute) and written as a point cache shown by a
    Mesh Cache modifier (write)."""

    def __init__(self, job):
        self.garments = [adapter.pointcache.garment_object(name, job.arm) for name in job.bound.garments]
        self.names = [g.name for g in self.garments]         # the compute must not touch the objects
        records = adapter.storage.garment_records(job.arm)
        self.keep_size = [not records.get(n, {}).get("scale_with_body", False) for n in self.names]
        self.sources = [_read(job.scene, job.arm, job.bound, job.source, g) for g in self.garments]
        self.carried = None

    def compute(self, job, progress=None):
        self.carried = []
        # An armature scaled since Bind is a character that grew, and so did what it wears: the
        # garment (bound at the bound size) is carried onto the body brought back to that size
        # about its root, then grown with it.
        s = job.bound.object_scale
        positions = job.result.positions
        root = positions[:, :1]
        body = positions if s == 1.0 else root + (positions - root) / s
        for name, (verts, tris, radii), keep in zip(self.names, self.sources, self.keep_size):
            g = _bound_garment(job.bound, name, verts, tris, radii)
            try:
                carried = core_garment.carry_garment(g, body, environment=job.mesh, keep_size=keep)
            except RelDescError as e:
                raise SceneError(f"garment '{name}': {e}") from None
            self.carried.append(carried if s == 1.0 else root + s * (carried - root))

    def write(self, job, report):
        """After the adapted action is assigned: the garments' matrices as the scene now plays
        (a garment parented to the character moves with it), so that each point cache, in its
        object's space, plays back where it was carried in the world."""
        frames = job.bound.frames
        out = []
        for garment, carried in zip(self.garments, self.carried):
            world = job.bound.out_of_bind(carried)                  # carried where the character was bound
            inv = np.linalg.inv(adapter.empties.matrices(job.scene, garment, frames))          # (1 or F,4,4)
            local = np.einsum("fij,fvj->fvi", inv[:, :3, :3], world) + inv[:, None, :3, 3]
            path = adapter.pointcache.cache_path(garment)
            core_garment.write_pc2(path, local, start=float(frames[0]), rate=1.0)
            adapter.pointcache.show_cache(garment, path, frames[0])
            out.append(dict(garment=garment.name, cache=path, vertices=int(local.shape[1])))
        report["garments"] = report.get("garments", []) + out
