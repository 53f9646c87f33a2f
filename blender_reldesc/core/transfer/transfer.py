"""Transfer of a bound interaction to a novel object (Al-Ashqar's thesis, §4.6-4.7).

``transfer(binding, mesh, template_triangles, template, novel)``:

1. the novel object is aligned onto the template (``segments.align``);
2. the key frame is the one where the character is closest to the template object (the
   smallest mean distance of its joints to it);
3. the key posture is carried with the object (the inverse of the alignment) and the joints
   within ``CONTACT`` body heights of the template are matched around the novel object
   (``matching.match_joints``); the posture is fitted to those targets by the warping solver
   (the matched joints firmly, the others loosely to where they were carried), bone lengths
   kept, colliding with the new object;
4. the descriptors on the template object are re-embedded so that, with the other
   descriptors (the floor's) unchanged, they give the fitted key posture (Eq. 19-21,
   ``descriptors.reembed``), starting from the template's descriptors carried with the
   object, and tied to the novel object's surface;
5. the whole motion is adapted with those descriptors in place of the template's, the
   template object taken out of the environment and the novel object put in for collisions.

A rigid move of the template (the novel object is the template moved) is exact: the carried
descriptors already give the carried posture, so the re-embedding starts at its optimum.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..descriptors.reembedding import Reembedded, attach, reembed
from ..descriptors.weights import frames_of
from ..geometry import TriMesh
from .features import closest_on
from .matching import match_joints
from .segments import TransferError, align, shared_segments

#: Joints of the key posture within this many body heights of the template are matched
#: around the novel object; the others follow.
CONTACT = 0.08
#: The open space is sampled within an arm's length of the new object: this many body heights.
REACH = 0.4
#: Affinity of the matched joints and of the others in the key posture's fit.
MATCHED_AFFINITY, FOLLOW_AFFINITY = 1.0, 0.15
#: The key posture's fit stops when no joint moves more than this many body heights in a
#: step, or after FIT_STEPS steps.
FIT_TOLERANCE, FIT_STEPS = 1e-6, 1500


@dataclass
class TransferResult:
    """``result`` (an ``AdaptResult`` of the whole motion on the novel object), the ``key``
    frame, its fitted ``posture (J,3)``, the matched ``targets (J,3)`` (NaN: not matched),
    the alignment ``rotation, translation`` (novel -> template), the ``embedding``
    (``descriptors.Reembedded``) and ``seconds`` per stage."""

    result: object
    key: int
    posture: np.ndarray
    targets: np.ndarray
    rotation: np.ndarray
    translation: np.ndarray
    embedding: Reembedded
    seconds: dict


class Carried(Reembedded):
    """Every descriptor re-embedded, each part tied to its own surface (``parts``: (index,
    Attachment, TriMesh or None for the environment))."""

    def __init__(self, *args, parts=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.parts = list(parts)

    def replace(self, mesh):
        cache = {}

        def at(f):
            if f not in cache:
                index, points, rotations = [], [], []
                for idx, att, surface in self.parts:
                    on = mesh if surface is None else surface
                    p, r = att.evaluate(on, f if on.animated else 0)
                    index.append(idx)
                    points.append(p)
                    rotations.append(r)
                cache[f] = (np.concatenate(index), np.concatenate(points), np.concatenate(rotations))
            return cache[f]
        return at


def _ground_part(R, t, up):
    """The alignment x -> R x + t restricted to a turn about ``up`` and a shift across it:
    ``(Rg, tg)`` with Rg the nearest such turn to R."""
    # The turn that best maps the plane's axes: angle from R's action on them.
    a = np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(up, a)
    Ra, Rb = R @ a, R @ b
    angle = np.arctan2(Ra @ b - Rb @ a, Ra @ a + Rb @ b)
    K = np.array([[0, -up[2], up[1]], [up[2], 0, -up[0]], [-up[1], up[0], 0]])
    Rg = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K
    return Rg, t - (t @ up) * up


def _without(mesh, triangles):
    """``mesh`` with the vertices used only by ``triangles`` collapsed onto one point (their
    triangles degenerate: no surface, no collisions)."""
    v = np.array(mesh.vertices, float)
    gone = np.zeros(len(v), bool)
    gone[np.unique(mesh.triangles[triangles])] = True
    gone[np.unique(np.delete(mesh.triangles, triangles, axis=0))] = False
    if gone.any():
        v[gone] = v[gone].mean(axis=0)
    return mesh.with_vertices(v)


def transfer(binding, mesh, template_triangles, template, novel, *, seed=0, **options):
    """Adapt the bound motion from the template object to the novel one.

    binding : the ``Binding`` (bound with the template object in its environment).
    mesh : the environment now (bind-time topology, static), template object included.
    template_triangles : (T_o,) the triangles of ``mesh`` that make the template object.
    template, novel : ``segments.Segmented`` of the template object (as in ``mesh``) and of
        the new object where it stands; they must share segment labels.
    options : passed to ``adapt`` (bone_lengths, vertex_influence, ...).
    """
    from ..adaptation import Collisions, Rig, adapt
    seconds = {}
    t0 = time.perf_counter()
    if mesh.animated:
        raise TransferError("transfer to a novel object needs a static environment")
    template_triangles = np.unique(np.asarray(template_triangles, np.int64))
    if not len(template_triangles):
        raise TransferError("the template object has no triangles in the bound environment")
    if np.array_equal(template.vertices.shape, novel.vertices.shape) and np.allclose(template.vertices,
                                                                                     novel.vertices) \
            and np.array_equal(template.triangles, novel.triangles):
        raise TransferError("the new object is the template object itself: pick another object to transfer to")
    names = shared_segments(template, novel)
    R, t = align(template, novel, names)                      # novel -> template
    H = binding.body_height
    motion, sk = binding.motion, binding.skeleton
    full = np.ones(len(template.triangles), bool)
    # The key frame: the character closest to the template object.
    F = len(motion)
    probe = np.unique(np.linspace(0, F - 1, min(F, 60)).round().astype(np.int64))
    dist = closest_on(template.vertices, template.triangles, full, motion[probe].reshape(-1, 3))[0]
    key = int(probe[np.argmin(dist.reshape(len(probe), -1).mean(axis=1))])
    pose = motion[key]
    # Matching in the template's frame (the novel object aligned onto it).
    aligned = novel.moved(R, t)
    # Near the object by its shared segments: a joint by a chair's back has nothing to match
    # on a stool (an elbow by the back went 27 cm down, matched on the seat alone).
    shared = np.isin(template.labels, [template.names.index(n) for n in names])
    to_object = closest_on(template.vertices, template.triangles, shared, pose)[0]
    rest = np.ones(mesh.triangle_count, bool)
    rest[template_triangles] = False
    rest &= mesh.valid
    to_rest = closest_on(mesh.vertices, mesh.triangles, rest, pose)[0] if rest.any() else np.full(len(pose), np.inf)
    # Matched: the joints near the object and nearer to it than to the rest (not the feet on
    # the floor beside a chair's legs).
    near = (to_object <= CONTACT * H) & (to_object < to_rest)
    if not near.any():
        raise TransferError("no joint of the character comes near the template object: nothing to transfer")
    gap = closest_on(aligned.vertices, aligned.triangles, np.ones(len(aligned.triangles), bool), pose[near])[0]
    if gap.min() > REACH * H:
        raise TransferError(f"after alignment the new object is {gap.min():.2f} from the joints that touched the "
                            "template, out of the character's reach: is it to scale, and are its parts labelled "
                            "like the template's?")
    bones = sk.bone_lengths(motion)[key]
    step = 0.5 * float(bones[bones > 1e-3 * H].min()) if np.any(bones > 1e-3 * H) else 0.05 * H
    size = float(np.linalg.norm(template.vertices.max(axis=0) - template.vertices.min(axis=0)))
    if aligned.vertices.shape == template.vertices.shape and np.array_equal(aligned.triangles, template.triangles) \
            and np.abs(aligned.vertices - template.vertices).max() <= 1e-6 * size:
        # The template moved rigidly: every joint keeps its place relative to it (exact; matching
        # on sampled open space would move the joints by up to half a sample step).
        found_target = np.where(near[:, None], pose, np.nan)
    else:
        found_target = match_joints(pose, template, aligned, names, step, REACH * H, near=near, seed=seed).target
    seconds["match"] = time.perf_counter() - t0
    # Back to where the novel object is: the key posture carried with the object, the matched
    # joints on their targets.
    Rt = R.T
    # What stands on the environment is carried along it: the alignment's turn about up and
    # its shift across (a lower chair's centres sit lower; the floor under the feet does not).
    up = np.array([0.0, 0.0, 1.0])
    Rg, tg = _ground_part(R, t, up)
    carried = (pose - tg) @ Rg                                   # x -> Rg^T (x - tg)
    targets = np.where(np.isnan(found_target), np.nan, (found_target - t) @ Rt.T)
    matched = ~np.isnan(targets[:, 0])
    t1 = time.perf_counter()
    novel_mesh = TriMesh(novel.vertices, novel.triangles)
    if rest.any():
        env = _without(mesh, template_triangles)
        combined = TriMesh(np.concatenate([env.vertices, novel.vertices]),
                           np.concatenate([env.triangles, novel.triangles + len(env.vertices)]))
    else:
        # The template is the whole environment: it stays in the mesh (its descriptors are all
        # replaced below), and the joints collide with the new object alone.
        env, combined = mesh, novel_mesh
    rig = Rig(binding, options.get("bone_lengths"))
    # Joints resting on the rest of the environment (feet on the floor) hold where they were
    # carried; the others follow loosely, shifted as the matched joints moved on average (the
    # upper body goes down with a pelvis on a lower seat).
    resting = ~matched & (to_rest <= CONTACT * H)
    shift = np.mean(targets[matched] - carried[matched], axis=0)
    goal = np.where(matched[:, None], targets, np.where(resting[:, None], carried, carried + shift))
    affinity = np.where(matched | resting, MATCHED_AFFINITY, FOLLOW_AFFINITY)
    collide = Collisions(combined, H, F, keep_dips=False)
    collide.set_targets(np.array([key]), goal[None])
    # Settled to a micrometre (the targets are half a sample step apart at best; an
    # unreachable set of them kept the default 1e-10 body heights stepping for seconds).
    posture = rig.warper(collide).settle(goal[None], carried[None], affinity[None], np.array([key]),
                                         max_steps=FIT_STEPS, tolerance=FIT_TOLERANCE)[0]
    seconds["fit"] = time.perf_counter() - t1
    # Re-embedding (§4.7): every descriptor, starting where carrying it with the object puts
    # it (the floor's too: a chair moved across the room takes the sitting with it), so that
    # they give the fitted posture at the key frame; the template's are then tied to the new
    # object, the others to the environment.
    t2 = time.perf_counter()
    on_object = np.isin(binding.triangles, template_triangles)
    if not on_object.any():
        raise TransferError("no descriptor lies on the template object: bind with it in the environment")
    N, J = binding.descriptor_count, len(sk)
    d0 = frames_of(binding.mesh, binding.triangles, binding.barycentrics, 0)[0]
    block = next(binding.cache.covering(key, key + 1))
    base = (key - block.start) * J
    lo, hi = int(block.indptr[base]), int(block.indptr[base + J])
    rows = np.repeat(np.arange(J), np.diff(block.indptr[base:base + J + 1]))
    desc = block.desc[lo:hi].astype(np.int64)
    weight = block.weight[lo:hi].astype(float)
    if options.get("vertex_influence") is not None:
        from ..adaptation import descriptor_influence
        weight = weight * descriptor_influence(binding, options["vertex_influence"])[desc]
    total = np.bincount(rows, weights=weight, minlength=J)
    ok = total[rows] > 0
    rows, desc, weight = rows[ok], desc[ok], weight[ok] / total[rows[ok]]
    if not on_object[desc].any():
        raise TransferError("no joint is described by the template object at the key frame: nothing to transfer")
    relative = motion[key][rows] - d0[desc]
    # The object's descriptors carried with the object, the others along the ground.
    start_points = np.where(on_object[:, None], (d0 - t) @ Rt.T, (d0 - tg) @ Rg)
    start_rot = np.where(on_object[:, None, None], Rt[None], Rg.T[None]).copy()
    e = reembed(rows, desc, weight, relative, posture, start_points, start_rot, floor=0.01)
    parts = []
    for part, surface in ((on_object, novel_mesh), (~on_object, None)):
        idx = np.flatnonzero(part)
        if idx.size:
            parts.append((idx, attach(novel_mesh if surface is not None else env, e.points[idx], e.rotations[idx]),
                          surface))
    embedding = Carried(np.arange(N), None, np.arange(F), np.ones(F), parts=parts)
    embeddings = [embedding]
    seconds["reembed"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    result = adapt(binding, env, embeddings=embeddings, collide_with=combined, **options)
    seconds["adapt"] = time.perf_counter() - t3
    return TransferResult(result, key, posture, targets, R, t, embedding, seconds)
