"""Garments and other deformable meshes carried by descriptors (Al-Asqhar et al. 2013, §9,
"Dynamic garment transfer").

A garment's vertices are described like joints, relative to the character's bones as
capsules (``characters``): at every frame, for each vertex, the ``NEAREST`` bones it is
closest to, its closest point on each of them (its distance along the bone) and its offset
from that point in the bone's frame, weighted by the fade window of Eq. 5 (closed at the next
nearest bone). When the character changes (its motion adapted, its legs 15 % longer), each vertex goes where those offsets put it from the new bones
(rescaled to the new capsule radius, Eq. 12); no bone-length constraint, but the garment's
edges are kept near their source lengths softly (``EDGE_ITERATIONS`` Gauss-Seidel passes over
the edges, coloured like the warping solver's bones) and vertices are pushed out of the new
capsules where deeper than in the source (plus ``SLACK``).

Product decisions: the descriptor point keeps its distance from the bone's head (a garment
keeps its size on longer legs) rather than being re-projected, so that a frame needs no
solve; and the offsets are taken from the source clip each frame rather than stored (a
10k-vertex garment over 300 frames would hold 140 MB of them).

``bind_garment(skeleton, motion, vertices, triangles)`` -> ``GarmentBinding``;
``carry_garment(binding, new_motion)`` -> (F,V,3); ``write_pc2(path, positions)`` writes a point
cache Blender's Mesh Cache modifier reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .characters import (_bone_frames, _bones, _side_pair, capsule_radii, closest_on_segments,
                         push_out_of_capsules)
from .errors import InputError

#: Bones describing each vertex (its nearest at each frame).
NEAREST = 4
#: Fade window (Eq. 5), body heights.
WINDOW = 0.25
#: Edge relaxation passes after the descriptors' targets.
EDGE_ITERATIONS = 40
#: A vertex may go this much (body heights) deeper into a capsule than in the source.
SLACK = 0.003
#: Frames computed together (bounded memory).
CHUNK = 32


@dataclass
class GarmentBinding:
    """A garment bound to a character: the body ``skeleton`` and its source ``motion``
    (F,J,3), the garment's source ``vertices`` (F,V,3) and ``edges`` (E,2), the body's
    ``bones`` (B,2) and capsule ``radii`` (J,), how many ``nearest`` bones describe a vertex, the
    body height and the body's side line (for bone frames)."""

    skeleton: object
    motion: np.ndarray
    vertices: np.ndarray
    edges: np.ndarray
    bones: np.ndarray
    radii: np.ndarray
    nearest: int
    body_height: float
    side: tuple

    @property
    def frame_count(self):
        return len(self.motion)


def mesh_edges(triangles):
    """(E,2) the unique edges of ``triangles`` (T,3)."""
    t = np.asarray(triangles, np.int64).reshape(-1, 3)
    e = np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1)
    return np.unique(e, axis=0)


def bind_garment(skeleton, motion, vertices, triangles, radii=None, body_height=None, nearest=NEAREST):
    """Bind a garment to a character.

    motion : (F,J,3) the character's source joints; vertices : (F,V,3) the garment's source
    vertices over the same frames; triangles : (T,3).
    radii : the body's capsule radii (``characters.capsule_radii``'s ``radii``).
    """
    motion = np.asarray(motion, float)
    vertices = np.asarray(vertices, float)
    if vertices.ndim != 3 or vertices.shape[0] != motion.shape[0] or vertices.shape[2] != 3:
        raise InputError(f"the garment's vertices must be (F,V,3) over the clip's {motion.shape[0]} frames, got "
                         f"{vertices.shape}")
    if not np.all(np.isfinite(vertices)):
        raise InputError("the garment's vertices contain NaN or inf")
    edges = mesh_edges(triangles)
    if len(edges) and edges.max() >= vertices.shape[1]:
        raise InputError("the garment's triangles name vertices it does not have")
    H = float(body_height) if body_height else float(np.ptp(motion[..., 2]) or 1.0)
    bones = _bones(skeleton, motion)
    if not len(bones):
        raise InputError("the character has no bones to carry a garment")
    r = capsule_radii(skeleton, motion, radii=radii)
    # How far the garment is from the body: each vertex's mean distance to its nearest capsule.
    F, V, _ = vertices.shape
    probe = np.unique(np.linspace(0, F - 1, min(F, 24)).round().astype(np.int64))
    dist = np.zeros((V, len(bones)))
    for f in probe.tolist():
        a, b = motion[f, bones[:, 0]], motion[f, bones[:, 1]]
        foot, _ = closest_on_segments(vertices[f][:, None], a[None], b[None])
        dist += np.linalg.norm(vertices[f][:, None] - foot, axis=-1) - r[bones[:, 1]][None]
    k = min(int(nearest), len(bones))
    gap = float((dist / len(probe)).min(axis=1).max())
    if gap > 0.5 * H:
        raise InputError(f"the garment is {gap:.2f} from the body at its farthest vertex (over half the body height): "
                         "is it the character's garment, and near it?")
    return GarmentBinding(skeleton, motion, vertices, edges, bones, r, k, H, _side_pair(skeleton, motion))


def _offsets(binding, motion, rows, radii):
    """At frames ``rows``, per vertex: its ``K`` nearest bones (n,V,K) on the source, the
    descriptor point's fraction along each, the offset in the bone's frame, the clearance, and
    the weights: Eq. 5's fade, its window closed at the next nearest bone's distance, so a
    bone's weight is 0 where it joins or leaves a vertex's nearest (neighbouring vertices with
    other nearest bones, or a vertex whose nearest change, get continuous targets)."""
    sk, bones = binding.skeleton, binding.bones
    P = motion[rows]
    G = binding.vertices[rows]                                                    # (n,V,3)
    n, V, _ = G.shape
    K = binding.nearest
    a_all, b_all = P[:, bones[:, 0]], P[:, bones[:, 1]]                           # (n,B,3)
    foot, _ = closest_on_segments(G[:, :, None], a_all[:, None], b_all[:, None])   # (n,V,B,3)
    d_all = np.linalg.norm(G[:, :, None] - foot, axis=-1) - radii[bones[:, 1]][None, None]
    del foot
    count = min(K + 1, len(bones))
    part = np.argpartition(d_all, count - 1, axis=2)[..., :count] if count < len(bones) else \
        np.broadcast_to(np.arange(len(bones)), d_all.shape).copy()
    part = np.take_along_axis(part, np.argsort(np.take_along_axis(d_all, part, axis=2), axis=2), axis=2)
    near = part[..., :K]                                                          # (n,V,K)
    edge = np.take_along_axis(d_all, part[..., -1:], axis=2) if count > K else None
    nb = bones[near]                                                              # (n,V,K,2)
    fi = np.arange(n)[:, None, None]
    a, b = P[fi, nb[..., 0]], P[fi, nb[..., 1]]                                   # (n,V,K,3)
    foot, t = closest_on_segments(G[:, :, None], a, b)
    v = G[:, :, None] - foot
    frames = _bone_frames(sk, P, bones, binding.side)                             # (n,B,3,3)
    R = frames[fi, near]                                                          # (n,V,K,3,3)
    offset = np.einsum("nvkdi,nvkd->nvki", R, v)
    clearance = np.linalg.norm(v, axis=-1) - radii[nb[..., 1]]
    H = binding.body_height
    dist = np.maximum(clearance, 0.0)
    r1 = dist.min(axis=2, keepdims=True)
    window = np.full_like(r1, WINDOW * H)
    if edge is not None:
        window = np.minimum(window, np.maximum(np.maximum(edge, 0.0) - r1, 1e-9 * H))
    w = np.clip(1.0 - (dist - r1) / window, 0.0, 1.0)
    # Eq. 5's window alone (the paper's weights): weighted by proximity too, as the partners'
    # joints are, a skirt touching a thigh followed it sharply and its edges there stretched 47 %.
    w /= np.maximum(w.sum(axis=2, keepdims=True), 1e-300)
    return near, t, offset, clearance, w


def carry_garment(binding, new_motion, radii=None, iterations=EDGE_ITERATIONS, progress=None):
    """The garment's vertices (F,V,3) on the character's new motion (F,J,3) (its adapted or
    edited joints, bone lengths and all), with ``radii`` its capsules now (default: as bound;
    a body that got thicker gives its new radii)."""
    new_motion = np.asarray(new_motion, float)
    if new_motion.shape != binding.motion.shape:
        raise InputError(f"the new motion must have the bound clip's shape {binding.motion.shape}, got "
                         f"{new_motion.shape}")
    sk, bones = binding.skeleton, binding.bones
    if radii is None:
        radii = binding.radii                 # longer legs are not thicker ones
    else:
        radii = capsule_radii(sk, new_motion, radii=radii)
    F, V, _ = binding.vertices.shape
    out = np.empty((F, V, 3))
    e = binding.edges
    colours = edge_colours(e, V) if len(e) else []
    chunk = max(1, min(CHUNK, int(4e6 // max(V * len(bones), 1))))               # bounded memory
    for s in range(0, F, chunk):
        rows = np.arange(s, min(F, s + chunk))
        near, t, offset, clearance, w = _offsets(binding, binding.motion, rows, binding.radii)
        nb = bones[near]
        fi = np.arange(len(rows))[:, None, None]
        P = new_motion[rows]
        a, b = P[fi, nb[..., 0]], P[fi, nb[..., 1]]
        # The point keeps its distance from the bone's head (within the bone): a garment keeps
        # its size. Taken as a fraction of the bone instead, a skirt on legs 15 % longer was
        # stretched 15 % (47 % on some edges) for the edges' relaxation to undo.
        src = binding.motion[rows]
        along = t * np.linalg.norm(src[fi, nb[..., 1]] - src[fi, nb[..., 0]], axis=-1)
        bone = np.linalg.norm(b - a, axis=-1)
        point = a + (np.minimum(along, bone) / np.maximum(bone, 1e-300))[..., None] * (b - a)
        R = _bone_frames(sk, P, bones, binding.side)[fi, near]                    # (n,V,K,3,3)
        length = np.linalg.norm(offset, axis=-1)
        want = np.maximum(radii[nb[..., 1]] + clearance, 0.0)                    # Eq. 12
        scale = np.divide(want, length, out=np.ones_like(length), where=length > 1e-12)
        target = np.einsum("nvk,nvkd->nvd", w, point + np.einsum("nvkdi,nvki->nvkd", R, offset * scale[..., None]))
        # Pushed out only past the source's depth plus SLACK: exactly at it, vertices the edges
        # pull back in were pushed out again pass after pass (an edge by the hip 7 % long).
        depth = np.maximum(-clearance, 0.0) + SLACK * binding.body_height
        x = _relax(target, binding.vertices[rows], e, iterations,
                   lambda y: push_out_of_capsules(y, a, b, radii[nb[..., 1]], depth), colours)
        out[rows] = x
        if progress is not None and progress(int(rows[-1]) + 1, F) is False:
            from .errors import Cancelled
            raise Cancelled(f"cancelled at frame {int(rows[-1]) + 1} of {F}")
    return out


def _relax(x, source, edges, iterations, constrain=None, colours=None):
    """Edges of ``x`` (n,V,3) moved towards their lengths in ``source``: Gauss-Seidel passes,
    one colour of edges (no two sharing a vertex) at a time, each edge's ends moved half its
    error each; the mean drift put back so the garment stays where its targets put it, and
    ``constrain`` (the capsules' push) applied after each pass (pushed once at the end,
    vertices by a swinging thigh stretched their edges 22 %)."""
    if not len(edges) or iterations <= 0:
        return x if constrain is None else constrain(x)
    target_mean = x.mean(axis=1)
    x = x.copy()
    if colours is None:
        colours = edge_colours(edges, source.shape[1])
    groups = [(edges[sl, 0], edges[sl, 1], np.linalg.norm(source[:, edges[sl, 1]] - source[:, edges[sl, 0]], axis=-1))
              for sl in colours]
    for _ in range(iterations):
        for i, j, want in groups:
            d = x[:, j] - x[:, i]
            L = np.linalg.norm(d, axis=-1)
            c = (0.5 * (L - want) / np.maximum(L, 1e-300))[..., None] * d
            x[:, i] += c
            x[:, j] -= c
        # Relaxing moves the garment as a whole a little (a skirt's hem pulls it down): keep
        # the targets' mean place.
        x += (target_mean - x.mean(axis=1))[:, None]
        if constrain is not None:
            x = constrain(x)
    return x


def edge_colours(edges, count):
    """Index arrays into ``edges`` (E,2) over ``count`` vertices, one per colour: no two edges
    of a colour share a vertex (the warping solver's colouring)."""
    from .solvers.warping import colour_slices
    order, slices = colour_slices(edges, count)
    return [order[sl] for sl in slices]


def write_pc2(path, positions, start=1.0, rate=1.0):
    """Write ``positions`` (F,V,3) as a PC2 point cache (Blender's Mesh Cache modifier, format
    'PC2'): the header (signature, version 1, points, start frame, sample rate, samples) and
    float32 xyz per point per sample."""
    positions = np.asarray(positions, np.float32)
    F, V, _ = positions.shape
    with open(path, "wb") as fh:
        fh.write(struct.pack("<12siiffi", b"POINTCACHE2\0", 1, V, float(start), float(rate), F))
        fh.write(np.ascontiguousarray(positions).astype("<f4").tobytes())


def read_pc2(path):
    """``(positions (F,V,3), start, rate)`` of a PC2 file."""
    with open(path, "rb") as fh:
        head = fh.read(32)
        sig, version, V, start, rate, F = struct.unpack("<12siiffi", head)
        if sig != b"POINTCACHE2\0":
            raise InputError(f"{path} is not a PC2 point cache")
        data = np.frombuffer(fh.read(F * V * 12), dtype="<f4")
    return data.reshape(F, V, 3).astype(float), start, rate
