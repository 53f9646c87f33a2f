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

A garment of more than ``CONTROLS`` vertices is carried through that many of them (its
controls, spread evenly along the mesh): they are carried as above, and the others follow
them (``_Embedding``), each control turning its neighbourhood rigidly; a capsule poking into
the garment raises a tent along its normal. A 10k-vertex skirt: 48 frames/s, edges within
4.5 % (vertex by vertex: 3 frames/s, 51 %).

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
#: Edge relaxation passes after the descriptors' targets, over the whole garment; then round
#: the edges still farther than ``EDGE_TOLERANCE`` from their source length, ``LOCAL_RINGS``
#: rings of edges relaxed on their own (``_settle``), ``EDGE_BLOCK`` passes at a time while one
#: is, ``LOCAL_ITERATIONS`` at most. Forty passes alone left a cape skinned to a Mixamo rig with
#: automatic weights, carried over a raised floor, with an edge 11.9 % long, and a coat on a UE
#: rig 19.5 % (Gauss-Seidel passes undo a stretch spread over many rows slowly: 160 passes
#: over the whole coat 10.6 %, 320 7.7 %). A coat on a Mixamo rig brushed by a forearm kept an
#: edge 15.5 % short after 100 local passes, 6.7 % after 300. The cost: a 10k-vertex skirt, whose
#: edges were within 4.5 %, is carried in 8 s instead of 3.3 (120 frames; 3.8 % now).
EDGE_ITERATIONS = 40
EDGE_TOLERANCE = 0.02
EDGE_BLOCK = 20
LOCAL_RINGS = 2
LOCAL_ITERATIONS = 300
#: A vertex may go this much (body heights) deeper into a capsule than in the source.
SLACK = 0.003
#: Frames computed together (bounded memory).
CHUNK = 32
#: A garment bound with the environment follows it within this many body heights of it ...
SURFACE_BAND = 0.05
#: ... fully within this (touching), less farther, nothing at the band's edge.
SURFACE_CONTACT = 0.015
#: Garments with more vertices than this are carried through this many control vertices
#: (spread evenly over the garment); the others follow them (``_Embedding``).
CONTROLS = 320
#: Controls each other vertex follows.
EMBED_NEAREST = 4
#: Edge relaxation passes over all the edges of a garment carried through controls, then
#: ``_settle`` round the edges still off (four passes alone left a 384-vertex coat skinned to a
#: UE rig with an edge 34 % long where a swinging hand brushes it; forty over the whole
#: garment, 9 %, but a 10k-vertex skirt 2.7x slower).
FINE_ITERATIONS = 4
#: Capsules a vertex following controls is kept out of: its main control's nearest.
FINE_BONES = 2
#: A push out of the body spreads round the vertices pushed as a tent this steep (height per
#: distance), over at most ``SPREAD`` rings of edges (garments carried through controls).
TENT_SLOPE = 0.15
SPREAD = 40


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
    embedding: object = None
    #: the environment's source TriMesh (``bind_garment(environment=...)``) or None
    environment: object = None

    @property
    def frame_count(self):
        return len(self.motion)


def mesh_edges(triangles):
    """(E,2) the unique edges of ``triangles`` (T,3)."""
    t = np.asarray(triangles, np.int64).reshape(-1, 3)
    e = np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1)
    return np.unique(e, axis=0)


def bind_garment(skeleton, motion, vertices, triangles, radii=None, body_height=None, nearest=NEAREST,
                 controls=CONTROLS, environment=None):
    """Bind a garment to a character.

    motion : (F,J,3) the character's source joints; vertices : (F,V,3) the garment's source
    vertices over the same frames; triangles : (T,3).
    radii : the body's capsule radii (``characters.capsule_radii``'s ``radii``).
    controls : above this many vertices, only this many are carried by descriptors and the
        others follow them (0: every vertex by descriptors).
    environment : the environment's source TriMesh (static, or animated over the clip's
        frames): where the garment touches it (a hem on the floor, a skirt on a seat) it
        follows the environment's surface as much as the body (``carry_garment``'s
        ``environment``).
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
    embedding = _Embedding.build(vertices, np.asarray(triangles, np.int64).reshape(-1, 3), edges, controls) \
        if vertices.shape[1] > controls > 0 and len(edges) else None
    if environment is not None and environment.animated and environment.frame_count != F:
        raise InputError(f"the environment is animated over {environment.frame_count} frames, the clip has {F}")
    return GarmentBinding(skeleton, motion, vertices, edges, bones, r, k, H, _side_pair(skeleton, motion), embedding,
                          environment)


def _offsets(binding, vertices, motion, rows, radii):
    """At frames ``rows``, per vertex: its ``K`` nearest bones (n,V,K) on the source, the
    descriptor point's fraction along each, the offset in the bone's frame, the clearance, and
    the weights: Eq. 5's fade, its window closed at the next nearest bone's distance, so a
    bone's weight is 0 where it joins or leaves a vertex's nearest (neighbouring vertices with
    other nearest bones, or a vertex whose nearest change, get continuous targets)."""
    sk, bones = binding.skeleton, binding.bones
    P = motion[rows]
    G = vertices[rows]                                                            # (n,V,3)
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


def carry_garment(binding, new_motion, radii=None, iterations=EDGE_ITERATIONS, progress=None, environment=None,
                  keep_size=True):
    """The garment's vertices (F,V,3) on the character's new motion (F,J,3) (its adapted or
    edited joints, bone lengths and all), with ``radii`` its capsules now (default: as bound;
    a body that got thicker gives its new radii) and ``environment`` the environment now (a
    TriMesh of the bound one's topology; default: unchanged), for a garment bound with one.
    ``iterations``: the edges' relaxation passes over the whole garment (then more round the
    edges still off their source length by more than ``EDGE_TOLERANCE``: ``_settle``).

    keep_size : True (default, a product departure): each descriptor point keeps its distance
        from its bone's head and the edges their source lengths, so a garment keeps its size
        on longer legs. False: the paper's "we do not preserve the original proportions": the
        point keeps its place along the bone as a fraction of it, and each edge's length is
        stretched along its vertices' bones as they are (a cape on legs 15 % longer gets 15 %
        longer where it hangs along them)."""
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
    emb = binding.embedding
    carried = binding.vertices if emb is None else binding.vertices[:, emb.controls]
    e = binding.edges if emb is None else emb.edges
    colours = edge_colours(e, carried.shape[1]) if len(e) else []
    fine_colours = edge_colours(binding.edges, V) if emb is not None and len(binding.edges) else []
    chunk = max(1, min(CHUNK, int(4e6 // max(carried.shape[1] * len(bones), 1)),
                       int(4e6 // max(V * binding.nearest * 3, 1))))                   # bounded memory
    H = binding.body_height
    if environment is None:
        environment = binding.environment                 # the environment as bound
    if environment is not None and binding.environment is not None:
        if environment.vertex_count != binding.environment.vertex_count or \
                environment.triangle_count != binding.environment.triangle_count:
            raise InputError("the environment's topology changed since the garment was bound: bind the garment again")
    colliders, fine_colliders = {}, {}
    for s in range(0, F, chunk):
        rows = np.arange(s, min(F, s + chunk))
        near, t, offset, clearance, w = _offsets(binding, carried, binding.motion, rows, binding.radii)
        nb = bones[near]
        fi = np.arange(len(rows))[:, None, None]
        P = new_motion[rows]
        a, b = P[fi, nb[..., 0]], P[fi, nb[..., 1]]
        # The point keeps its distance from the bone's head (within the bone): a garment keeps
        # its size. Taken as a fraction of the bone instead, a skirt on legs 15 % longer was
        # stretched 15 % (47 % on some edges) for the edges' relaxation to undo.
        src = binding.motion[rows]
        was = np.linalg.norm(src[fi, nb[..., 1]] - src[fi, nb[..., 0]], axis=-1)
        along = t * was
        bone = np.linalg.norm(b - a, axis=-1)
        if keep_size:
            point = a + (np.minimum(along, bone) / np.maximum(bone, 1e-300))[..., None] * (b - a)
            lengths = fine_lengths = None
        else:
            point = a + t[..., None] * (b - a)
            # Each vertex stretched along its bones by theirs (weighted), each edge by its ends'.
            sigma = np.einsum("nvk,nvk->nv", w, bone / np.maximum(was, 1e-300))
            axis = np.einsum("nvk,nvkd->nvd", w, (src[fi, nb[..., 1]] - src[fi, nb[..., 0]]) /
                             np.maximum(was, 1e-300)[..., None])
            lengths, fine_lengths = _stretched(carried[rows], e, sigma, axis), None
            if emb is not None:
                main = emb.index[:, 0]
                fine_lengths = _stretched(binding.vertices[rows], binding.edges, sigma[:, main], axis[:, main])
        R = _bone_frames(sk, P, bones, binding.side)[fi, near]                    # (n,V,K,3,3)
        length = np.linalg.norm(offset, axis=-1)
        want = np.maximum(radii[nb[..., 1]] + clearance, 0.0)                    # Eq. 12
        scale = np.divide(want, length, out=np.ones_like(length), where=length > 1e-12)
        target = np.einsum("nvk,nvkd->nvd", w, point + np.einsum("nvkdi,nvki->nvkd", R, offset * scale[..., None]))
        surfaces = None
        if binding.environment is not None and environment is not None:
            surfaces = _Surfaces(binding, carried[rows], rows, environment, colliders)
            target = surfaces.blend(target)
        # Pushed out only past the source's depth plus SLACK: exactly at it, vertices the edges
        # pull back in were pushed out again pass after pass (an edge by the hip 7 % long).
        depth = np.maximum(-clearance, 0.0) + SLACK * H
        def constrain(y):
            y = push_out_of_capsules(y, a, b, radii[nb[..., 1]], depth)
            return y if surfaces is None else surfaces.push(y)

        x = _settle(_relax(target, carried[rows], e, iterations, constrain, colours, lengths=lengths), carried[rows], e,
                    constrain, lengths)
        if emb is None:
            out[rows] = x
        else:
            # The other vertices follow their controls; then out of the capsules their main
            # control is nearest to (``FINE_BONES``), past their own source depth.
            fine = emb.follow(binding.vertices[rows], carried[rows], x)
            fb = nb[:, emb.index[:, 0], :FINE_BONES]                              # (n,V,k,2)
            sa, sb = src[fi, fb[..., 0]], src[fi, fb[..., 1]]
            foot, _ = closest_on_segments(binding.vertices[rows][:, :, None], sa, sb)
            was = np.linalg.norm(binding.vertices[rows][:, :, None] - foot, axis=-1) - binding.radii[fb[..., 1]]
            fa, fbb, fr = P[fi, fb[..., 0]], P[fi, fb[..., 1]], radii[fb[..., 1]]
            allowed = np.maximum(-was, 0.0) + SLACK * H
            # A hand brushing a skirt: pushed straight out from the hand's axis, the vertices
            # round its rim slid along the skirt and its 5 mm edges stretched 50 %. They are
            # moved along the garment's normal instead (a tent over the capsule), the tent
            # spread over the mesh around it, then the edges relaxed with the exact push.
            fine += emb.spread(_tent(fine, emb.normals, fa, fbb, fr, allowed), binding.vertices[rows])
            # Every vertex, not only the controls, kept from going nearer the environment than
            # in the source (a fine hem between two controls would sag into a raised floor).
            fine_surfaces = None if surfaces is None else \
                _Surfaces(binding, binding.vertices[rows], rows, environment, fine_colliders)
            if fine_surfaces is not None:
                fine = fine_surfaces.push(fine)
            push = None if fine_surfaces is None else fine_surfaces.push
            out[rows] = _settle(_relax(fine, binding.vertices[rows], binding.edges, FINE_ITERATIONS, push,
                                       fine_colours, lengths=fine_lengths), binding.vertices[rows], binding.edges,
                                push, fine_lengths)
        if progress is not None and progress(int(rows[-1]) + 1, F) is False:
            from .errors import Cancelled
            raise Cancelled(f"cancelled at frame {int(rows[-1]) + 1} of {F}")
    return out


def _tent(x, normals, a, b, r, allowed):
    """(n,V,3) how far to move each vertex of ``x`` along its normal (``normals(x, frames,
    vertices)``; either way, away from the
    capsule's axis) to leave the capsule it is deepest in past ``allowed`` (capsules as in
    ``characters.push_out_of_capsules``); straight out from the axis where the normal runs
    along it."""
    foot, t = closest_on_segments(x[:, :, None], a, b)
    v = x[:, :, None] - foot
    d = np.linalg.norm(v, axis=-1)
    inside = r - allowed - d
    k = np.argmax(inside, axis=2)
    worst = np.take_along_axis(inside, k[..., None], axis=2)[..., 0]
    out = np.zeros_like(x)
    s, q = np.nonzero(worst > 0)
    if not len(s):
        return out
    kk = k[s, q]
    vv, nn = v[s, q, kk], normals(x, s, q)
    R = (r - allowed)[s, q, kk] if np.ndim(r) == 3 else np.broadcast_to(r - allowed, inside.shape)[s, q, kk]
    axis = b[s, q, kk] - a[s, q, kk]
    axis /= np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), 1e-300)
    tt = t[s, q, kk]
    side = (tt > 0.0) & (tt < 1.0)                                               # off the end caps
    m = nn - np.where(side, np.einsum("ei,ei->e", nn, axis), 0.0)[:, None] * axis
    m *= np.where(np.einsum("ei,ei->e", vv, m) < 0.0, -1.0, 1.0)[:, None]
    a2 = np.einsum("ei,ei->e", m, m)
    b2 = 2.0 * np.einsum("ei,ei->e", vv, m)
    c2 = np.einsum("ei,ei->e", vv, vv) - R ** 2
    along = a2 > 0.05                                                            # the normal crosses the axis
    step = (-b2 + np.sqrt(np.maximum(b2 * b2 - 4.0 * a2 * c2, 0.0))) / (2.0 * np.maximum(a2, 1e-300))
    dd = np.linalg.norm(vv, axis=-1)
    radial = np.where(dd[:, None] > 1e-12, vv / np.maximum(dd, 1e-300)[:, None], nn) * worst[s, q][:, None]
    out[s, q] = np.where(along[:, None], step[:, None] * m, radial)
    return out


class _Surfaces:
    """Where a garment bound with the environment touches it, at frames ``rows``: per frame,
    the carried vertices within ``SURFACE_BAND`` body heights of the bound environment
    (``source`` (n,V,3)), their closest points there and the same points on the environment
    now (``environment``).

    ``blend(target)``: each such vertex's target moved towards its offset from its closest
    point carried to the same point now (turned with its triangle), weighted 1 within
    ``SURFACE_CONTACT`` (touching: the surface alone) fading to 0 at the band's edge.
    ``push(x)``: no such vertex nearer the surface now (or further under it) than in the
    source, along the triangle's normal. Unchanged or rigidly moved with the body, exact."""

    def __init__(self, binding, source, rows, environment, colliders):
        from .geometry.proximity import Collider
        H = binding.body_height
        then, now = binding.environment, environment
        self.frames = []
        for i, f in enumerate(rows.tolist()):
            key = f if then.animated else 0
            if key not in colliders:
                colliders.clear()
                colliders[key] = Collider(then.frame(f), then.normals(f), then.triangles, then.valid, SURFACE_BAND * H)
            sd, _, tri, bary = colliders[key].closest(source[i])
            near = np.flatnonzero(tri >= 0)
            if not len(near):
                continue
            t, b = then.triangles[tri[near]], bary[near]
            v0, v1 = then.frame(f)[t], now.frame(f)[t]                                 # (P,3,3)
            foot0, foot1 = np.einsum("pk,pkd->pd", b, v0), np.einsum("pk,pkd->pd", b, v1)
            R = _triangle_turns(v0, v1)
            onto = foot1 + np.einsum("pij,pj->pi", R, source[i, near] - foot0)
            fade = (SURFACE_BAND * H - np.abs(sd[near])) / ((SURFACE_BAND - SURFACE_CONTACT) * H)
            normal = _normal(v1)                                                       # the triangle's now
            height = np.einsum("pd,pd->p", source[i, near] - foot0, _normal(v0))       # over it in the source
            self.frames.append((i, near, onto, np.clip(fade, 0.0, 1.0)[:, None] ** 2, foot1, normal, height))

    def blend(self, target):
        out = target.copy()
        for i, near, onto, w, *_ in self.frames:
            out[i, near] = (1.0 - w) * target[i, near] + w * onto
        return out

    def push(self, x):
        for i, near, _, _, foot1, normal, height in self.frames:
            now = np.einsum("pd,pd->p", x[i, near] - foot1, normal)
            under = height - now
            deep = under > 0.0
            if deep.any():
                x[i, near[deep]] += under[deep, None] * normal[deep]
        return x


def _normal(t):
    """(P,3) unit normals of triangles ``t`` (P,3,3)."""
    n = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)


def _triangle_turns(a, b):
    """(P,3,3) the rotations taking triangles ``a`` (P,3,3) to ``b`` (their first edge and
    normal): the identity for a translated triangle, the move's rotation for a rigid one."""
    def frame(t):
        e = t[:, 1] - t[:, 0]
        n = np.cross(e, t[:, 2] - t[:, 0])
        e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-300)
        n = n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
        return np.stack([e, np.cross(n, e), n], axis=2)                              # columns
    return np.einsum("pij,pkj->pik", frame(b), frame(a))


class _Embedding:
    """How a fine garment's vertices follow a few of them (its *controls*), which alone are
    carried by descriptors and relaxed along the ``edges`` (C',2) between controls whose
    regions touch on the mesh.

    Each vertex follows its ``EMBED_NEAREST`` nearest controls along the mesh (``index``
    (V,k), ``weight`` (V,k), summing to 1; its own first when it is a control): each control
    moves the vertex rigidly, by the rotation that best maps its neighbours' offsets from it in
    the source to their offsets in the carried controls (Kabsch), and the vertex goes to the
    weighted mean of those. A rigid move of the whole garment is exact, and neighbouring
    vertices get neighbouring places.

    Product decision (speed and fine meshes, not in the paper, which carries every vertex):
    a 10k-vertex skirt carried vertex by vertex took 0.3 s a frame and its edges, relaxed 40
    passes, were still 51 % off; the controls carry its shape in 320 vertices whose edges
    the relaxation keeps, and the rest follows smoothly."""

    def __init__(self, controls, edges, index, weight, neighbours, ring, triangles, corners, weights):
        self.weights = weights            # (V,C) sparse: ``weight`` at ``index``
        self.triangles = triangles        # (T,3)
        self.corners = corners            # (V,D) the triangles each vertex is a corner of, padded with -1
        self.ring = ring                  # (V,D) each vertex and its neighbours, padded with itself
        self.controls = controls          # (C,) vertex indices
        self.edges = edges                # (C',2) into controls
        self.index = index                # (V,k) into controls
        self.weight = weight              # (V,k)
        self.neighbours = neighbours      # (C,M) into controls, padded with the control itself

    @classmethod
    def build(cls, vertices, triangles, edges, count):
        from scipy.sparse import coo_matrix, identity
        from scipy.sparse.csgraph import dijkstra
        F, V, _ = vertices.shape
        length = np.linalg.norm(vertices[:, edges[:, 1]] - vertices[:, edges[:, 0]], axis=-1).mean(axis=0)
        length = np.maximum(length, 1e-9)
        graph = coo_matrix((np.r_[length, length], (np.r_[edges[:, 0], edges[:, 1]], np.r_[edges[:, 1], edges[:, 0]])),
                           shape=(V, V)).tocsr()
        # Controls spread evenly: farthest-point sampling along the mesh (each piece of a
        # garment in several pieces starts with one control).
        from scipy.sparse.csgraph import connected_components
        pieces, label = connected_components(graph, directed=False)
        if pieces > count // 2:
            return None                     # loose points or a scatter of tiny pieces: vertex by vertex
        mean = vertices.mean(axis=0)
        controls = []
        for k in range(pieces):
            members = np.flatnonzero(label == k)
            controls.append(int(members[np.argmin(np.linalg.norm(mean[members] - mean[members].mean(axis=0), axis=1))]))
        nearest = dijkstra(graph, directed=False, indices=controls, min_only=True)
        while len(controls) < count:
            far = int(np.argmax(nearest))
            if not np.isfinite(nearest[far]) or nearest[far] <= 0.0:
                break
            controls.append(far)
            nearest = np.minimum(nearest, dijkstra(graph, directed=False, indices=far, limit=float(nearest[far])))
        controls = np.array(controls, np.int64)
        spacing = float(nearest.max())
        # Each vertex's nearest controls along the mesh, within a few spacings.
        dist = dijkstra(graph, directed=False, indices=controls, limit=4.0 * spacing + 1e-12)   # (C,V)
        k = min(EMBED_NEAREST, len(controls))
        order = np.argsort(dist, axis=0)[:k + 1].T                                   # (V,k+1)
        d = np.take_along_axis(dist.T, order, axis=1)
        index, dk, edge = order[:, :k], d[:, :k], d[:, k:k + 1] if len(controls) > k else np.full((V, 1), np.inf)
        edge = np.where(np.isfinite(edge), edge, 2.0 * np.where(np.isfinite(dk), dk, 0.0).max(axis=1, keepdims=True)
                        + spacing)
        # Eq. 5's fade closed at the next control (continuous where a control joins or leaves
        # a vertex's nearest).
        fade = np.clip(1.0 - dk / edge, 0.0, 1.0) ** 2
        fade = np.where(np.isfinite(dk), fade, 0.0)
        weight = fade / fade.sum(axis=1, keepdims=True)
        # Controls' edges: pairs whose regions (vertices nearest to each) touch, and pairs a
        # vertex follows together. With the first alone, two controls on a hem with a third
        # above them were joined only through it, and the hem between them folded 11 % shorter.
        owner = index[:, 0]
        a, b = owner[edges[:, 0]], owner[edges[:, 1]]
        pairs = [np.stack([a, b], axis=1)]
        for i in range(k):
            for j in range(i + 1, k):
                both = (weight[:, i] > 0) & (weight[:, j] > 0)
                pairs.append(index[both][:, [i, j]])
        pairs = np.concatenate(pairs)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        coarse = np.unique(np.sort(pairs, axis=1), axis=0)
        C = len(controls)
        lists = [[c] for c in range(C)]
        for i, j in coarse.tolist():
            lists[i].append(j)
            lists[j].append(i)
        M = max(len(x) for x in lists)
        neighbours = np.array([x + [x[0]] * (M - len(x)) for x in lists], np.int64)
        A = graph.copy()
        A.data[:] = 1.0
        A = A + identity(V, format="csr")
        A = A.tolil()
        D = max(len(r) for r in A.rows)
        ring = np.array([r + [v] * (D - len(r)) for v, r in enumerate(A.rows)], np.int64)
        T = len(triangles)
        weights = coo_matrix((weight.ravel(), (np.repeat(np.arange(V), index.shape[1]), index.ravel())),
                             shape=(V, len(controls))).tocsr()
        incidence = coo_matrix((np.ones(3 * T), (triangles.T.ravel(), np.tile(np.arange(T), 3))), shape=(V, T)).tolil()
        D = max((len(r) for r in incidence.rows), default=1)
        corners = np.array([r + [-1] * (D - len(r)) for r in incidence.rows], np.int64).reshape(V, D)
        return cls(controls, coarse, index, weight, neighbours, ring, triangles, corners, weights)

    def spread(self, push, source):
        """Displacements ``push`` (n,V,3), non-zero where vertices must move, spread round
        them as a cone: a vertex moves at least as far as a neighbour less ``TENT_SLOPE`` times
        the edge between them (in the source ``source`` (n,V,3)), in that neighbour's
        direction. Cloth over a finger is a tent, not a spike: a harmonic spread (each vertex
        the mean of its neighbours) left the vertex over a hand's tip 5 mm above its
        neighbours, 5 mm away."""
        size = np.linalg.norm(push, axis=-1)                                          # (n,V)
        f, v = np.nonzero(size > 0.0)
        if not len(f):
            return push
        n, V = size.shape
        nbr = self.ring                                                               # (V,D), padded with self
        d = push.copy()
        for _ in range(SPREAD):
            # Only the neighbours of the vertices that moved last pass can move further.
            key = np.unique(f[:, None] * V + nbr[v])
            f, v = key // V, key % V
            drop = TENT_SLOPE * np.linalg.norm(source[f[:, None], nbr[v]] - source[f, v][:, None], axis=-1)
            cand = size[f[:, None], nbr[v]] - drop                                    # (m,D)
            best = np.argmax(cand, axis=1)
            new = cand[np.arange(len(f)), best]
            grow = new > size[f, v] + 1e-12
            if not grow.any():
                break
            f, v, new, u = f[grow], v[grow], new[grow], nbr[v[grow], best[grow]]
            d[f, v] = d[f, u] * (new / size[f, u])[:, None]
            size[f, v] = new
        return d

    def normals(self, x, f, v):
        """(m,3) unit normals (area-weighted) of the garment at ``x`` (n,V,3), at frames ``f``
        and vertices ``v`` (m,)."""
        tri = self.corners[v]                                                         # (m,D) padded -1
        t = self.triangles[np.maximum(tri, 0)]                                        # (m,D,3)
        ff = f[:, None]
        fn = np.cross(x[ff, t[..., 1]] - x[ff, t[..., 0]], x[ff, t[..., 2]] - x[ff, t[..., 0]])
        vn = (fn * (tri >= 0)[..., None]).sum(axis=1)
        return vn / np.maximum(np.linalg.norm(vn, axis=-1, keepdims=True), 1e-300)

    def rotations(self, source, carried):
        """(n,C,3,3) each control's best rotation from its neighbourhood in ``source`` (n,C,3)
        to ``carried`` (n,C,3) (Kabsch, no reflection)."""
        nb = self.neighbours
        u = source[:, nb] - source[:, :, None]                                        # (n,C,M,3)
        v = carried[:, nb] - carried[:, :, None]
        Hm = np.einsum("ncmi,ncmj->ncij", u, v)
        U, _, Vt = np.linalg.svd(Hm)
        d = np.sign(np.linalg.det(np.einsum("ncij,ncjk->ncik", U, Vt)))
        d = np.where(d == 0, 1.0, d)
        Vt = Vt.copy()
        Vt[:, :, 2] *= d[..., None]
        return np.einsum("ncji,nckj->ncik", Vt, U)                                     # V diag U^T

    def follow(self, vertices, source, carried):
        """Every vertex (n,V,3) following the controls carried from ``source`` (n,C,3) to
        ``carried`` (n,C,3); ``vertices`` are the garment's source vertices (n,V,3):
        sum_k w_k (c'_k + R_k (g - c_k)) = sum_k w_k (c'_k - R_k c_k) + (sum_k w_k R_k) g,
        both sums one sparse product over the frames."""
        R = self.rotations(source, carried)                                           # (n,C,3,3)
        n, C = R.shape[:2]
        shift = carried - np.einsum("ncij,ncj->nci", R, source)                       # (n,C,3)
        W = self.weights
        T = (W @ shift.transpose(1, 0, 2).reshape(C, -1)).reshape(-1, n, 3)          # (V,n,3)
        M = (W @ R.transpose(1, 0, 2, 3).reshape(C, -1)).reshape(-1, n, 3, 3)        # (V,n,3,3)
        return T.transpose(1, 0, 2) + np.einsum("vnij,nvj->nvi", M, vertices)


def _worst_edge(x, groups):
    """The largest relative error of the edges' lengths in ``x`` (V,n,3, vertex-major)."""
    worst = 0.0
    for i, j, want in groups:
        L = np.linalg.norm(x[j] - x[i], axis=-1)[..., None]
        worst = max(worst, float((np.abs(L - want) / np.maximum(want, 1e-300)).max(initial=0.0)))
    return worst


def _relax(x, source, edges, iterations, constrain=None, colours=None, until=None, keep_mean=True, fixed=None,
           lengths=None):
    """Edges of ``x`` (n,V,3) moved towards their lengths in ``source``: Gauss-Seidel passes,
    one colour of edges (no two sharing a vertex) at a time, each edge's ends moved half its
    error each; the mean drift put back so the garment stays where its targets put it, and
    ``constrain`` (the capsules' push) applied after each pass (pushed once at the end,
    vertices by a swinging thigh stretched their edges 22 %). ``iterations`` passes, then with
    ``until`` = (tolerance, most passes) more while an edge is farther than the tolerance
    (relative) from its length, checked every ``EDGE_BLOCK`` passes. ``keep_mean`` False: the
    mean drift is not put back (a few edges relaxed where they are); ``fixed`` (V,) bool: the
    vertices that stay (an edge to one moves its other end by the whole error); ``lengths``
    (n,E): the edges' lengths wanted instead of the source's."""
    if not len(edges) or (iterations <= 0 and until is None):
        return x if constrain is None else constrain(x)
    target_mean = x.mean(axis=1)
    if colours is None:
        colours = edge_colours(edges, source.shape[1])
    # Vertex-major (V,n,3): an edge's ends are whole rows, gathered and scattered contiguously
    # (3x faster on a 10k-vertex garment than gathering along the frames' axis).
    x = np.ascontiguousarray(x.transpose(1, 0, 2))
    src = np.ascontiguousarray(source.transpose(1, 0, 2))
    if lengths is None:
        groups = [(edges[sl, 0], edges[sl, 1],
                   np.linalg.norm(src[edges[sl, 1]] - src[edges[sl, 0]], axis=-1)[..., None]) for sl in colours]
    else:
        groups = [(edges[sl, 0], edges[sl, 1], np.ascontiguousarray(lengths[:, sl].T)[..., None]) for sl in colours]
    shares = None
    if fixed is not None:                          # each end's share of an edge's error
        shares = [(np.where(fixed[i], 0.0, np.where(fixed[j], 1.0, 0.5))[:, None, None],
                   np.where(fixed[j], 0.0, np.where(fixed[i], 1.0, 0.5))[:, None, None]) for i, j, _ in groups]
    done, cap = 0, max(iterations, until[1]) if until is not None else iterations
    while done < cap:
        if done >= iterations and (done - iterations) % EDGE_BLOCK == 0:
            if until is None or _worst_edge(x, groups) <= until[0]:
                break
        done += 1
        for k, (i, j, want) in enumerate(groups):
            d = x[j] - x[i]
            L = np.sqrt(np.einsum("eni,eni->en", d, d))[..., None]
            if shares is None:
                d *= 0.5 * (L - want) / np.maximum(L, 1e-300)
                x[i] += d
                x[j] -= d
            else:
                d *= (L - want) / np.maximum(L, 1e-300)
                x[i] += shares[k][0] * d
                x[j] -= shares[k][1] * d
        # Relaxing moves the garment as a whole a little (a skirt's hem pulls it down): keep
        # the targets' mean place.
        if keep_mean:
            x += target_mean - x.mean(axis=0)
        if constrain is not None:
            x = np.ascontiguousarray(constrain(x.transpose(1, 0, 2)).transpose(1, 0, 2))
    return x.transpose(1, 0, 2)


def _settle(x, source, edges, constrain=None, lengths=None):
    """``x`` (n,V,3) with the edges within ``LOCAL_RINGS`` rings of those off their length in
    ``source`` by more than ``EDGE_TOLERANCE`` relaxed on their own (``LOCAL_ITERATIONS`` passes
    at most), the rest of the garment where it is."""
    if not len(edges):
        return x
    a, b = edges[:, 0], edges[:, 1]
    want = np.linalg.norm(source[:, b] - source[:, a], axis=-1) if lengths is None else lengths
    off = np.abs(np.linalg.norm(x[:, b] - x[:, a], axis=-1) - want) > EDGE_TOLERANCE * np.maximum(want, 1e-300)
    bad = off.any(axis=0)
    if not bad.any():
        return x
    near = np.zeros(x.shape[1], bool)
    near[edges[bad].ravel()] = True
    for _ in range(LOCAL_RINGS):
        near[edges[near[a] | near[b]].ravel()] = True
    # The edges touching the region, its outside vertices held where they are.
    inside = near[a] | near[b]
    return _relax(x, source, edges[inside], 0, constrain, None, (EDGE_TOLERANCE, LOCAL_ITERATIONS), keep_mean=False,
                  fixed=~near, lengths=None if lengths is None else lengths[:, inside])


def _stretched(source, edges, sigma, axis):
    """(n,E) the lengths of ``edges`` of ``source`` (n,V,3) stretched by ``sigma`` (n,V) along
    ``axis`` (n,V,3) (each edge by the mean of its ends')."""
    a, b = edges[:, 0], edges[:, 1]
    d = source[:, b] - source[:, a]
    u = axis[:, a] + axis[:, b]
    u /= np.maximum(np.linalg.norm(u, axis=-1, keepdims=True), 1e-300)
    s = 0.5 * (sigma[:, a] + sigma[:, b])
    along = np.einsum("ned,ned->ne", d, u)
    return np.sqrt(np.maximum(np.einsum("ned,ned->ne", d, d) + (s * s - 1.0) * along * along, 0.0))


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
