"""Binding a motion to an environment, and adapting it to a changed one.

``bind`` samples the descriptors (§5-§6) and keeps what the on-the-fly
computation of §8 needs: the original motion, the bind-time mesh and the
descriptors' triangles and barycentric coordinates. ``adapt`` rebuilds joint
targets on a deformed mesh (Eq. 2) and warps the motion to them (§7.2).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

from .. import constants as C
from ..archive import save_npz
from .weights import CoefficientCache, Coefficients, frames_of, placement_of, reconstruct
from ..errors import BindingError, Cancelled, InputError
from ..geometry.mesh import TriMesh
from ..geometry.proximity import CoverageIndex
from .sampling import GeodesicSampler
from ..skeleton import Skeleton

FORMAT_VERSION = 1


def _check_motion(skeleton, motion):
    motion = np.asarray(motion, dtype=float)
    if motion.ndim != 3 or motion.shape[2] != 3:
        raise InputError(f"motion must have shape (F,J,3) (frames, joints, xyz), got {motion.shape}")
    if motion.shape[1] != len(skeleton):
        raise InputError(f"motion has {motion.shape[1]} joints but the skeleton has {len(skeleton)}")
    if motion.shape[0] == 0:
        raise InputError("motion has no frames")
    if not np.all(np.isfinite(motion)):
        f, j, _ = np.argwhere(~np.isfinite(motion))[0]
        raise InputError(f"motion has NaN or inf at frame {f}, joint '{skeleton.names[j]}': "
                         "clean the source animation first")
    return motion


def measure_body_height(motion):
    """Median over frames of the largest extent of the pose's bounding box."""
    extent = motion.max(axis=1) - motion.min(axis=1)
    return float(np.median(extent.max(axis=1)))


def _check_mesh_frames(mesh, frames, what):
    if mesh.animated and mesh.frame_count != frames:
        raise InputError(f"the {what} mesh is animated over {mesh.frame_count} frames but the motion "
                         f"has {frames}: give one set of vertices per frame, or a static (V,3) mesh")


@dataclass
class Binding:
    """Descriptors of a motion against an environment, and what is needed to use them.

    skeleton : Skeleton; motion : (F,J,3) original joint positions.
    mesh : the bind-time TriMesh (static or animated over F frames).
    triangles : (N,) int, barycentrics : (N,3) float: the descriptors.
    body_height : float, in the motion's units.
    settings : dict of the sampling parameters used.
    """

    skeleton: Skeleton
    motion: np.ndarray
    mesh: TriMesh
    triangles: np.ndarray
    barycentrics: np.ndarray
    body_height: float
    settings: dict = field(default_factory=dict)
    _coefficients: object = field(default=None, repr=False, compare=False)
    #: What is learnt from the motion once: hinges and bend limits per set of hinge overrides (see
    #: ``Rig``), segment masses and limb bones (``contacts``).
    _joint_models: dict = field(default_factory=dict, repr=False, compare=False)
    _reference_frames: tuple = field(default=None, init=False, repr=False, compare=False)

    @property
    def descriptor_count(self):
        return len(self.triangles)

    @property
    def frame_count(self):
        return self.motion.shape[0]

    @property
    def cache(self):
        """The coefficient table (§8), computed block by block when first needed."""
        if self._coefficients is None:
            self._coefficients = CoefficientCache(self)
        return self._coefficients

    def coefficients(self):
        """The whole coefficient table as one ``Coefficients`` (for inspection and tests)."""
        blocks = list(self.cache.covering(0, self.frame_count))
        offsets = np.cumsum([0] + [len(b.desc) for b in blocks])
        indptr = np.concatenate([[0]] + [b.indptr[1:] + o for b, o in zip(blocks, offsets)])
        cat = [np.concatenate([getattr(b, k) for b in blocks]) for k in ("desc", "weight", "proximity", "affinity")]
        centre = self.motion.reshape(-1, 3).mean(axis=0)
        return Coefficients(0, self.frame_count, len(self.skeleton), indptr, *cat, centre)

    def targets(self, mesh, frames=None, influence=None, replace=None):
        """Joint targets (Eq. 2) and affinities on ``mesh``.

        mesh : TriMesh with the bind-time triangles. frames : sorted frame
        indices (default: all). influence : (N,) per-descriptor influence.
        replace : re-embedded descriptors (see ``reconstruct``).
        Returns ``targets (n,J,3)`` (NaN where a joint has no descriptor) and
        ``affinity (n,J)``.
        """
        frames = np.arange(self.frame_count) if frames is None else np.asarray(frames, dtype=np.int64)
        if self._reference_frames is None and not self.mesh.animated:
            # The descriptors' frames on the bind-time mesh, once (a crowd asks per character).
            self._reference_frames = frames_of(self.mesh, self.triangles, self.barycentrics, 0)
        placement = None
        if not (mesh.animated or self.mesh.animated):
            # The descriptors on a static mesh, once for every block (a crowd's carpet: 8 a character).
            after = self._reference_frames if mesh is self.mesh else frames_of(mesh, self.triangles, self.barycentrics, 0)
            placement = placement_of(self._reference_frames, after, None if replace is None else replace(0))
        out_t, out_a = [], []
        for block in self.cache.covering(int(frames[0]), int(frames[-1]) + 1):
            inside = frames[(frames >= block.start) & (frames < block.start + block.count)]
            if inside.size:
                t, a = reconstruct(block, self.motion, self.mesh, mesh, self.triangles, self.barycentrics,
                                   influence, inside, replace, placement)
                out_t.append(t)
                out_a.append(a)
        return np.concatenate(out_t), np.concatenate(out_a)

    def save(self, path):
        """Write the binding to ``path`` (.npz). ``Binding.load`` reads it back exactly."""
        data = dict(
            version=np.int64(FORMAT_VERSION),
            names=np.asarray(self.skeleton.names, dtype=str),
            parents=self.skeleton.parents,
            motion=self.motion,
            vertices=self.mesh.vertices,
            mesh_triangles=self.mesh.triangles,
            triangles=self.triangles,
            barycentrics=self.barycentrics,
            body_height=np.float64(self.body_height),
            setting_keys=np.asarray(sorted(self.settings), dtype=str),
            setting_values=np.asarray([float(self.settings[k]) for k in sorted(self.settings)]),
        )
        save_npz(path, **data)

    def to_bytes(self):
        buf = io.BytesIO()
        self.save(buf)
        return buf.getvalue()

    @classmethod
    def load(cls, path):
        """Read a binding written by ``save`` (a path, file object or bytes)."""
        if isinstance(path, (bytes, bytearray)):
            path = io.BytesIO(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                version = int(z["version"])
                if version > FORMAT_VERSION:
                    raise BindingError(f"the binding was written by a newer version (format {version}); "
                                       "update the extension")
                skeleton = Skeleton(z["names"].tolist(), z["parents"])
                mesh = TriMesh(z["vertices"], z["mesh_triangles"])
                settings = dict(zip(z["setting_keys"].tolist(), z["setting_values"].tolist()))
                return cls(skeleton, z["motion"], mesh, z["triangles"], z["barycentrics"],
                           float(z["body_height"]), settings)
        except (OSError, KeyError, ValueError) as e:
            if isinstance(e, BindingError):
                raise
            raise BindingError(f"cannot read the binding ({e}): re-bind") from e


def bind(skeleton, motion, mesh, body_height=None, *, radius_factor=C.RADIUS_FACTOR,
         min_distance_fraction=C.MIN_DISTANCE_FRACTION, max_distance_fraction=C.MAX_DISTANCE_FRACTION,
         progress=None):
    """Sample relationship descriptors of ``motion`` against ``mesh``.

    Parameters
    ----------
    skeleton : Skeleton with J joints.
    motion : (F,J,3) float, world-space joint positions per frame (the
        heads of the bones plus the tails of the leaf bones).
    mesh : TriMesh, static (V,3) or animated (F,V,3), same units as motion.
    body_height : float or None (measured from the motion).
    radius_factor : Eq. 7 factor (0.5 in the paper); larger = fewer descriptors.
    min_distance_fraction : d0 of Eq. 7 as a fraction of body height (0.05).
    max_distance_fraction : joints farther than this (times body height) from
        a triangle get no proximity point on it.
    progress : optional callable ``(done, total)``; returning False cancels.

    Returns
    -------
    Binding. A joint that never comes near a surface simply has no descriptor.
    """
    if not isinstance(skeleton, Skeleton):
        raise InputError("skeleton must be a Skeleton(names, parents)")
    if not isinstance(mesh, TriMesh):
        raise InputError("mesh must be a TriMesh(vertices, triangles)")
    motion = _check_motion(skeleton, motion)
    F, J, _ = motion.shape
    _check_mesh_frames(mesh, F, "environment")
    if body_height is None:
        body_height = measure_body_height(motion)
    body_height = float(body_height)
    if not np.isfinite(body_height) or body_height <= 0:
        raise InputError(f"body height must be a positive length, got {body_height}; "
                         "pass body_height explicitly for a motion that does not move its joints apart")
    for name, value in (("radius_factor", radius_factor), ("min_distance_fraction", min_distance_fraction),
                        ("max_distance_fraction", max_distance_fraction)):
        if not (np.isfinite(value) and value > 0):
            raise InputError(f"{name} must be a positive number, got {value}")

    max_distance = max_distance_fraction * body_height
    tolerance = C.NEWTON_TOLERANCE * body_height
    # §5: proximity points of every joint in every frame, frame-major order.
    found = []
    chunk = 1 if mesh.animated else max(1, 8192 // J)
    index = None
    for f0 in range(0, F, chunk):
        fs = np.arange(f0, min(F, f0 + chunk))
        if mesh.animated or index is None:
            index = CoverageIndex(mesh.frame(f0), mesh.normals(f0), mesh.triangles, mesh.valid, max_distance)
        pts = motion[fs].reshape(-1, 3)
        pt, tri, bary, dist = index.query(pts, tolerance)
        found.append((pt + f0 * J, tri, bary, dist))
        if progress is not None and progress(int(fs[-1]) + 1, 2 * F) is False:
            raise Cancelled("bind cancelled")
    key, tri, bary, dist = (np.concatenate(x) for x in zip(*found))
    order = np.argsort(key, kind="stable")
    key, tri, bary, dist = key[order], tri[order], bary[order], dist[order]

    # §6: one fixed descriptor set, sampled incrementally with a geodesic radius.
    rest = mesh.frame(0)
    sampler = GeodesicSampler(rest, mesh.triangles, mesh.valid, mesh.weld)
    on_rest = np.einsum("kc,kcd->kd", bary, rest[mesh.triangles[tri]])
    d0 = min_distance_fraction * body_height
    radii = radius_factor * np.maximum(dist, d0)                              # Eq. 7
    keep = sampler.sample(tri, on_rest, radii) if len(tri) else np.zeros(0, np.int64)
    if len(keep) == 0:
        raise BindingError(f"no surface within reach of the character ({max_distance_fraction:g} body heights, "
                           f"{max_distance:.3g} units) faces any joint on any frame: check that the environment "
                           "holds the surfaces the character touches, that it is placed and scaled like the "
                           "character (same units), and that its normals face the character")
    if progress is not None:
        progress(2 * F, 2 * F)
    settings = dict(radius_factor=float(radius_factor), min_distance_fraction=float(min_distance_fraction),
                    max_distance_fraction=float(max_distance_fraction),
                    proximity_points=float(len(key)), graph_searches=float(sampler.graph_searches))
    return Binding(skeleton, motion, mesh, tri[keep].astype(np.int64), bary[keep], body_height, settings)
