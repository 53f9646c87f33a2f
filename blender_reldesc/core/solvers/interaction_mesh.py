"""The interaction-mesh solver (Ho, Komura and Tai 2010; seed 003), on a descriptors binding.

The method the relationship descriptors are compared with, and the one robotics retargeting
uses today. Per frame, the joints and the environment points near them (the binding's
descriptor points: the same binding serves both solvers) are tetrahedralised (Delaunay) on the
source frame. Each vertex gets a Laplacian coordinate over its neighbours in that mesh,
weighted by inverse distance and normalised, a joint's bone neighbours left out (paper §5.1:
they fight the bone lengths). The motion is then solved as spacetime least squares over a
window of frames::

    min  |M V - R δ|² + w_Δ |A (V - V̂)|² + w_c |collisions|² + w_p |pins|²
    s.t. bone lengths (linearised, hard: Lagrange multipliers, one sparse factorisation per step)

over ``MORPH_STEPS`` morph steps, in which the bone lengths, the environment points and the
pins go from the source's to the targets in equal parts, the tetrahedra kept from the source
(re-tetrahedralising would drift). Joints found behind a surface after a step get soft
collision constraints (weight 4, paper §5.2) for the next, and the last state is solved
``SETTLE_STEPS`` more times for them (and up to as many again while a solve adds constraints). Long clips are solved in overlapping windows of about
100 frames, so memory stays linear in the clip's length: each window after the first starts
two frames inside the one before and holds them where it put them (morphed with the window:
the source carried to each step plus that step's share of what the window before changed).

Product departures (docs/how-it-works/solvers.md):

- δ is turned by the best-fit rotation of the environment points (source to now) at each
  frame, and the acceleration energy is on the change from the source, ``A (V - V̂)`` with V̂
  the source moved by that fit, not on V itself: an undeformed scene then gives the source
  back exactly and a rigid move of the environment moves the motion rigidly. The paper's
  ``|A V|²`` would smooth the source itself, and its fixed δ resists any turn.
- Pins are soft with a large weight (``PIN_WEIGHT``) rather than hard: a pin out of reach of
  hard bone lengths would make the system singular.
- Collisions are between the joints and the environment's triangles (the descriptor solver's
  collider); the paper's bounding volumes of the body parts against each other are not built.
- Bend limits learnt from the motion (the descriptors solver's) are soft constraints of weight
  ``LIMIT_WEIGHT``, added like collisions: without them a beam lowered 40 cm onto the head
  folds the neck 89 degrees past its limit (2.4 with them).
- A re-bake reuses each frame's tetrahedra (``cache``): they depend on the source alone.
- Each step's linearised bone lengths carry their curvature, weighted by the multipliers of the
  step before (``_curvature``): without it a foot pulled onto a crest slid a hip along its pelvis
  bone for free, 20-46 cm too long on a real clip before the exact-length pass.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import lsqr, splu
from scipy.spatial import Delaunay, QhullError, cKDTree
from scipy.spatial.transform import Rotation

from .. import constants as C
from ..errors import Cancelled, InputError
from ..geometry import Collider
from ..geometry.triangles import norm
from ..descriptors.weights import frames_of
from ..skeleton.rotations import kabsch

#: Morph steps from the source to the targets (the paper: 10 for all its examples).
MORPH_STEPS = 10
#: Extra solves at the targets, each after a collision check.
SETTLE_STEPS = 2
#: w_Δ, the weight of the acceleration energy (paper: 0.2).
ACCELERATION_WEIGHT = 0.2
#: Weight of a soft collision constraint (paper: 4.0).
COLLISION_WEIGHT = 4.0
#: Weight of a row keeping a joint at its source distance from a surface (a product departure,
#: ``_clearances``), as a multiple of the collisions': at 1 a floor-level root bone (Unreal's)
#: under the hips stayed 3.2 cm inside a 0.25 m bump, the Laplacian of its neighbours holding it
#: down; at 10, 1.2 cm above, and the feet 98.6 -> 100 % within 2 cm.
CLEARANCE_WEIGHT = 10.0
#: Weight of a bend limit (soft; see ``solve``). Measured on the lowered beam: 4 (the collisions'
#: weight) leaves 29 degrees past a limit, 100 about 10, 1e4 oscillates (22).
LIMIT_WEIGHT = 100.0
#: Weight of a pin (soft; see the module docstring).
PIN_WEIGHT = 1e4
#: Environment points per frame: the descriptors nearest the frame's joints.
ENVIRONMENT_POINTS = 500
#: Frames per window, and frames a window shares with the one before.
WINDOW = 100
OVERLAP = 20
#: Collision constraints stay on a joint within this distance (times body height) of its
#: allowed depth, so a joint pushed out is not let back in by the next step.
COLLISION_BAND = 0.005

#: Clips up to this long keep their tetrahedra on the binding between bakes (about 100 kB a frame).
CACHE_FRAMES = 2000

SOLVERS = ("descriptors", "interaction_mesh")


def check_solver(name):
    """The solver name, or an ``InputError`` that lists the valid ones."""
    if name not in SOLVERS:
        raise InputError(f"unknown solver {name!r}: use one of {', '.join(SOLVERS)}")
    return name


class _Frame:
    """The interaction mesh of one source frame (joints first, then environment points)."""

    __slots__ = ("points", "rows", "cols", "weights", "row_vertex", "delta", "known_rows", "known_cols",
                 "known_weights")


def bone_codes(bones, size):
    """``a * size + b`` for each joint pair (a, b) of ``bones`` (B,2), both ways."""
    bones = np.asarray(bones, np.int64).reshape(-1, 2)
    return np.concatenate([bones[:, 0] * size + bones[:, 1], bones[:, 1] * size + bones[:, 0]])


def _mesh_of_frame(joints, env, bones_set, body_height, f):
    """Laplacian of the tetrahedralised joints (J',3) and environment points (P,3) of a frame.

    Returns a ``_Frame``: for each kept vertex (a joint, or an environment point next to a
    joint) its Laplacian row over the joint neighbours (``rows``, ``cols``, ``weights``) and over
    the environment neighbours (``known_*``), and its source Laplacian coordinate δ."""
    pts = np.concatenate([joints, env])
    Jv = len(joints)
    try:
        tets = Delaunay(pts).simplices
    except (QhullError, ValueError) as e:
        raise InputError(f"frame {f}: the joints and environment points cannot be tetrahedralised "
                         f"(all on one plane, or too few): the interaction mesh needs points spread in "
                         f"3-D; use solver='descriptors' ({str(e).splitlines()[0]})") from None
    size = len(pts)
    a = tets[:, [0, 0, 0, 1, 1, 2]].ravel()
    b = tets[:, [1, 2, 3, 2, 3, 3]].ravel()
    code = np.unique(np.minimum(a, b) * size + np.maximum(a, b))          # each edge once
    v = np.concatenate([code // size, code % size])                       # (v, neighbour) both ways
    n = np.concatenate([code % size, code // size])
    # A joint's bone neighbours are left out of its neighbourhood (paper §5.1).
    keep = ~np.isin(v * size + n, bone_codes(bones_set, size))
    # Rows: joints, and environment points with a joint among their neighbours.
    touches = np.zeros(len(pts), bool)
    touches[v[keep & (n < Jv)]] = True
    touches[:Jv] = True
    keep &= touches[v]
    v, n = v[keep], n[keep]
    dist = np.linalg.norm(pts[v] - pts[n], axis=1)
    w = 1.0 / np.maximum(dist, 1e-6 * body_height)
    total = np.bincount(v, weights=w, minlength=len(pts))
    w = w / total[v]
    has = total > 0
    rows_of = np.full(len(pts), -1)
    kept = np.flatnonzero(touches & has)
    rows_of[kept] = np.arange(len(kept))
    delta = pts[kept] - np.stack([np.bincount(v, weights=w * pts[n, c], minlength=len(pts))[kept]
                                  for c in range(3)], axis=1)
    fr = _Frame()
    fr.points = pts
    fr.row_vertex = kept
    fr.delta = delta
    joint_n = n < Jv
    fr.rows, fr.cols, fr.weights = rows_of[v[joint_n]], n[joint_n], w[joint_n]
    fr.known_rows, fr.known_cols, fr.known_weights = rows_of[v[~joint_n]], n[~joint_n] - Jv, w[~joint_n]
    return fr


def solve(motion, bones, lengths, glue, original, deformed, triangles, barycentrics, body_height, *,
          pins=None, collisions=True, progress=None, morph_steps=MORPH_STEPS, settle_steps=SETTLE_STEPS,
          window=WINDOW, overlap=OVERLAP, environment_points=ENVIRONMENT_POINTS,
          acceleration_weight=ACCELERATION_WEIGHT, collision_weight=COLLISION_WEIGHT, pin_weight=PIN_WEIGHT,
          limits=None, limit_weight=LIMIT_WEIGHT, cache=None, keep_clearance=True, up=None):
    """Joint positions (F,J,3) adapting ``motion`` (F,J,3) to the ``deformed`` environment.

    bones : (B,2) (parent, child) joints with a length; lengths : (F,J) each bone's target length
        (at its child joint). glue : (Z,2) (joint, parent) pairs of zero-length bones.
    original, deformed : the bind-time and the current TriMesh (same triangles).
    triangles, barycentrics : the binding's descriptors, the environment's sample points.
    pins : optional (F,J,3), NaN where free. progress : optional ``(done, total)``; False cancels.
    limits : optional ``(pairs (P,2), min_distance (F,P))``, bend limits as the descriptors'
        solver has them (``skeleton.joints.BendLimits``): a joint bent past its limit gets a soft
        constraint on its parent-child distance (``limit_weight``) for the next step. The paper has
        no joint limits; without them a beam lowered onto the head folds the neck (benchmarks).
    keep_clearance : joints near a surface that faces ``up`` (3,) (a floor, a terrain, a seat) keep
        their source distance from it (soft rows, ``_clearances``), with ``collisions`` on and an
        ``up`` given.
    cache : optional dict kept by the caller between solves of the same source (``adapt`` keeps
        one on the binding): each frame's tetrahedra and environment points depend on the
        source alone, so a re-bake after an edit skips the Delaunay.

    Returns ``positions (F,J,3), info`` with ``info`` a dict: ``windows``, ``collision_rows``
    (soft collision constraints in the last solve of each window, summed), ``points`` (mean
    environment points per frame).
    """
    motion = np.asarray(motion, float)
    F, J, _ = motion.shape
    if F < 1:
        raise InputError("the motion has no frames")
    glued = np.zeros(J, bool)
    if len(glue):
        glued[np.asarray(glue)[:, 0]] = True
    free_joints = np.flatnonzero(~glued)                                    # the mesh's joint vertices
    slot = np.full(J, -1)
    slot[free_joints] = np.arange(len(free_joints))
    bones = np.asarray(bones, np.int64).reshape(-1, 2)
    bone_slots = slot[bones]
    bones_set = bone_slots
    H = float(body_height)
    window = max(3, int(window))
    overlap = min(max(2, int(overlap)), window - 1)

    # Environment points per frame: the mesh's vertices and the descriptors (points on its
    # surfaces near the character, where a coarse mesh has no vertices), on the source and the
    # current mesh; per frame the ones nearest the joints.
    def candidates(mesh, f):
        return np.concatenate([mesh.frame(f if mesh.animated else 0),
                               frames_of(mesh, triangles, barycentrics, f if mesh.animated else 0)[0]])

    src_static = None if original.animated else candidates(original, 0)
    now_static = None if deformed.animated else candidates(deformed, 0)
    tree = None if src_static is None else cKDTree(src_static)
    used = (np.ones(len(src_static), bool) if src_static is not None else None)
    if used is not None:
        used[:original.vertex_count] = np.isin(np.arange(original.vertex_count), original.triangles[original.valid])

    def pick_of(f, src):
        """The environment points of frame f: the candidates nearest the frame's joints."""
        ok = used if used is not None else np.ones(len(src), bool)
        count = min(int(environment_points), int(ok.sum()))
        near = tree if tree is not None else cKDTree(src)
        # The nearest points to each joint, then the nearest of those to any joint.
        k = min(len(src), count)
        d, i = near.query(motion[f, free_joints], k=k)
        d, i = np.atleast_2d(d).ravel(), np.atleast_2d(i).ravel()
        best = np.full(len(src), np.inf)
        np.minimum.at(best, i, d)
        best[~ok] = np.inf
        pick = np.argsort(best, kind="stable")[:count]
        return np.sort(pick[np.isfinite(best[pick])])

    def frame_of(f):
        """``(interaction mesh, source points, current points)`` of frame f."""
        src = src_static if src_static is not None else candidates(original, f)
        now = now_static if now_static is not None else candidates(deformed, f)
        hit = None if cache is None else cache.get(f)
        if hit is None:
            pick = pick_of(f, src)
            hit = (_mesh_of_frame(motion[f, free_joints], src[pick], bones_set, H, f), pick)
            if cache is not None:
                cache[f] = hit
        mesh, pick = hit
        return mesh, src[pick], now[pick]

    final_collider = source_collider = None
    if collisions:
        final_collider = _collider(deformed, 0, H) if not deformed.animated else None
        source_collider = _collider(original, 0, H) if not original.animated else None
    between = {}

    def collider_at(t):
        """The static environment's collider at morph step ``t``: its vertices moved that far from
        the source's to the current ones (built once per step for every window). Testing a step's
        pose against the final surface found the feet of a floor lifted 0.2 m behind it from the
        first step, and the constraints that pushed them there stayed: 1.7 cm off a rigid lift."""
        if t >= 1.0:
            return final_collider
        c = between.get(t)
        if c is None:
            v0, v1 = original.frame(0), deformed.frame(0)
            c = between[t] = _collider(original.with_vertices(v0 + t * (v1 - v0)), 0, H)
        return c

    out = np.empty_like(motion)
    starts = list(range(0, max(F - overlap, 1), window - overlap))
    info = {"windows": len(starts), "collision_rows": 0, "points": 0.0}
    total_steps = len(starts) * (morph_steps + 2 * settle_steps)          # at most: see _solve_window
    done = 0
    for k, s in enumerate(starts):
        e = min(F, s + window)
        frames = np.arange(s, e)
        meshes, envs = [], []
        for f in frames.tolist():
            mesh, src_env, now_env = frame_of(f)
            meshes.append(mesh)
            envs.append((src_env, now_env))
        info["points"] += sum(len(a) for a, _ in envs) / F
        held = None
        if k > 0:                                                    # continuity with the window before
            held = {0: out[s, free_joints], 1: out[s + 1, free_joints]} if e - s > 1 else {0: out[s, free_joints]}
        collide = None
        if collisions:
            fc = final_collider
            sc = source_collider
            colliders = [(fc or _collider(deformed, f, H), sc or _collider(original, f, H)) for f in
                         (frames.tolist() if (fc is None or sc is None) else [s])]
            static = fc is not None and sc is not None
            collide = (colliders, static, collider_at if static else None)

        def step(done_here):
            nonlocal done
            done += 1
            if progress is not None and progress(done, total_steps) is False:
                raise Cancelled(f"cancelled at step {done} of {total_steps}")

        bend = None
        if limits is not None and len(limits[0]):
            pairs = slot[np.asarray(limits[0], np.int64)]
            ok = (pairs >= 0).all(axis=1)
            bend = (pairs[ok], np.asarray(limits[1], float)[s:e][:, ok], limit_weight)
        result, rows = _solve_window(motion[s:e][:, free_joints], bone_slots, lengths[s:e][:, bones[:, 1]],
                                     meshes, envs, pins[s:e][:, free_joints] if pins is not None else None,
                                     held, collide, H, morph_steps, settle_steps, acceleration_weight,
                                     collision_weight, pin_weight, step, bend,
                                     None if not keep_clearance or up is None else np.asarray(up, float))
        info["collision_rows"] += rows
        first = 0 if k == 0 else min(2, e - s)
        out[s + first:e][:, free_joints] = result[first:]
    for j, parent in np.asarray(glue, np.int64).reshape(-1, 2).tolist():
        out[:, j] = out[:, parent]
    return out, info


def _collider(mesh, f, H):
    return Collider(mesh.frame(f), mesh.normals(f), mesh.triangles, mesh.valid, C.COLLISION_BAND_FRACTION * H)


def _solve_window(src, bones, lengths, meshes, envs, pins, held, collide, H, morph_steps, settle_steps,
                  w_acc, w_col, w_pin, step, bend=None, up=None):
    """One window: ``src`` (W,J',3) source joints, ``bones`` (B,2) joint slots, ``lengths`` (W,B)
    target bone lengths; returns the solved joints (W,J',3) and the collision rows of the last
    solve."""
    W, Jv, _ = src.shape
    n = W * Jv * 3
    idx = np.arange(n).reshape(W, Jv, 3)
    src_len = np.linalg.norm(src[:, bones[:, 1]] - src[:, bones[:, 0]], axis=-1) if len(bones) else np.zeros((W, 0))
    # The Laplacian matrix: constant through the morph steps (the tetrahedra are the source's).
    L_rows, L_cols, L_vals = [], [], []
    row0 = 0
    offsets = []
    for f, m in enumerate(meshes):
        R = len(m.row_vertex)
        offsets.append(row0)
        joint_rows = np.flatnonzero(m.row_vertex < Jv)
        for c in range(3):
            L_rows.append(row0 + 3 * joint_rows + c)
            L_cols.append(idx[f, m.row_vertex[joint_rows], c])
            L_vals.append(np.ones(len(joint_rows)))
            L_rows.append(row0 + 3 * m.rows + c)
            L_cols.append(idx[f, m.cols, c])
            L_vals.append(-m.weights)
        row0 += 3 * R
    M = sparse.csr_matrix((np.concatenate(L_vals), (np.concatenate(L_rows), np.concatenate(L_cols))),
                          shape=(row0, n))
    # Acceleration: frames 1 .. W-2, each joint and coordinate.
    if W >= 3:
        a = idx[1:-1].ravel()
        rows = np.arange(len(a))
        A = sparse.csr_matrix((np.concatenate([np.ones(len(a)), -2 * np.ones(len(a)), np.ones(len(a))]),
                               (np.tile(rows, 3), np.concatenate([a - Jv * 3, a, a + Jv * 3]))),
                              shape=(len(a), n))
    else:
        A = sparse.csr_matrix((0, n))
    base = sparse.vstack([M, np.sqrt(w_acc) * A]).tocsr()
    base_t = base.T.tocsr()
    Q0 = (base_t @ base).tocsc()
    # Pins (soft, heavy): the user's, and the frames held from the window before.
    pin_idx, pin_val, pin_src = [], [], []
    if pins is not None:
        fi, ji = np.nonzero(~np.isnan(pins[..., 0]))
        pin_idx.append(idx[fi, ji].ravel())
        pin_val.append(pins[fi, ji].ravel())
        pin_src.append(src[fi, ji].ravel())
    held_frames = np.array(sorted(held or {}), np.int64)
    held_idx = [idx[f].ravel() for f in held_frames.tolist()]
    held_val = [np.asarray(held[f]).ravel() for f in held_frames.tolist()]
    pin_idx = np.concatenate(pin_idx) if pin_idx else np.zeros(0, np.int64)
    pin_val = np.concatenate(pin_val) if pin_val else np.zeros(0)
    pin_src = np.concatenate(pin_src) if pin_src else np.zeros(0)
    held_idx = np.concatenate(held_idx) if held_idx else np.zeros(0, np.int64)
    held_val = np.concatenate(held_val) if held_val else np.zeros(0)

    X = src.copy()
    col_rows = 0
    tension = None                              # (W,B) the bones' multipliers of the solve before
    source_sd = _source_signed(src, collide) if collide is not None else None
    allowed = _allowed_depth(source_sd) if collide is not None else None
    # The clearance rows' distances (``descriptors.clearance``), inf beyond their band.
    clearance = None if collide is None or up is None else \
        np.where(np.abs(source_sd) < C.CLEARANCE_FADE_FRACTION * H, source_sd, np.inf)
    # Collision constraints (frame, joint) -> (normal, target along it), renewed after each solve.
    contacts = {}
    kept = {}                                   # (frame, joint) -> (normal, target along it, weight)
    bent = {}                                   # (frame, limit pair) -> (direction, distance to keep)
    steps = [min(1.0, (s + 1) / morph_steps) for s in range(morph_steps)] + [1.0] * settle_steps
    extra = settle_steps              # more solves at the targets while the last one added constraints
    # Per frame the environment's best fit from the source to now: rotation (as a rotation
    # vector, to interpolate), centroids, and what the fit leaves (the non-rigid edit).
    fits = []
    for e_src, e_now in envs:
        c0, c1 = e_src.mean(axis=0), e_now.mean(axis=0)
        rot = kabsch((e_src - c0)[None], (e_now - c1)[None])[0]
        fits.append((Rotation.from_matrix(rot).as_rotvec(), c0, c1, e_now - ((e_src - c0) @ rot.T + c1)))
    moved = [(np.eye(3), fit[1]) for fit in fits]                      # the fit at the previous step
    held_final = np.concatenate([((src[f] - fits[f][1]) @ Rotation.from_rotvec(fits[f][0]).as_matrix().T
                                  + fits[f][2]).ravel() for f in held_frames.tolist()]) if len(held_frames) else 0.0
    while steps:
        t = steps[0]
        # The environment at this step: the rigid part of the edit interpolated as a rotation,
        # the rest linearly, so a rigid edit stays rigid at every step. The pose found at the
        # previous step is carried by the change of the fit (the linearisation point: exact
        # for a rigid edit).
        b_L = np.empty(row0)
        target = np.empty_like(src)
        for f, (m, (e_src, _), (rotvec, c0, c1, rest)) in enumerate(zip(meshes, envs, fits)):
            rot = Rotation.from_rotvec(t * rotvec).as_matrix()
            centre = c0 + t * (c1 - c0)
            e_t = (e_src - c0) @ rot.T + centre + t * rest
            before, was = moved[f]
            X[f] = (X[f] - was) @ (rot @ before.T).T + centre
            moved[f] = (rot, centre)
            target[f] = (src[f] - c0) @ rot.T + centre
            rhs = m.delta @ rot.T                                          # R δ
            # Environment terms of each row: a kept environment vertex itself, its known neighbours.
            env_pos = e_t
            is_env = m.row_vertex >= Jv
            rhs[is_env] -= env_pos[m.row_vertex[is_env] - Jv]
            for c in range(3):
                rhs[:, c] += np.bincount(m.known_rows, weights=m.known_weights * env_pos[m.known_cols, c],
                                         minlength=len(m.row_vertex))
            b_L[offsets[f]:offsets[f] + 3 * len(m.row_vertex)] = rhs.ravel()
        acc = (target[:-2] - 2 * target[1:-1] + target[2:]).ravel() if W >= 3 else np.zeros(0)
        g = base_t @ np.concatenate([b_L, np.sqrt(w_acc) * acc])
        Q = Q0
        # Soft rows: pins (morphed from the source), held frames, collisions.
        diag = np.zeros(n)
        if len(pin_idx):
            np.add.at(diag, pin_idx, w_pin)
            np.add.at(g, pin_idx, w_pin * (pin_src + t * (pin_val - pin_src)))
        if len(held_idx):
            # Morphed with the window: the source carried to this step plus t of what the window
            # before changed (its final frames against the source carried to the end). Held at
            # their final place from the first step, they pulled the window's first steps apart.
            np.add.at(diag, held_idx, w_pin)
            np.add.at(g, held_idx, w_pin * (target[held_frames].ravel() + t * (held_val - held_final)))
        Q = Q + sparse.diags(diag + 1e-9)
        if clearance is not None and (t >= 1.0 or collide[2] is not None):
            # On the pose carried to this step's environment, against it: rows found after the
            # step before would hold the feet where its environment was (1.2 cm off a lift).
            kept = _clearances(X, clearance, collide, H, t, up)
        rows_kept = {**kept, **contacts}                # a joint behind a surface: the collision's row
        if rows_kept:
            keys = list(rows_kept)
            normals = np.array([rows_kept[k][0] for k in keys])
            goal = np.array([rows_kept[k][1] for k in keys])
            weight = w_col * np.array([CLEARANCE_WEIGHT * rows_kept[k][2] if len(rows_kept[k]) > 2 else 1.0
                                       for k in keys])
            cols = np.array([idx[f, j] for f, j in keys])                   # (K,3)
            Cm = sparse.csr_matrix((normals.ravel(), (np.repeat(np.arange(len(keys)), 3), cols.ravel())),
                                   shape=(len(keys), n))
            Q = Q + Cm.T @ sparse.diags(weight) @ Cm
            g = g + Cm.T @ (weight * goal)
        col_rows = len(contacts)
        if bent:
            keys = list(bent)
            pairs, _, w_lim = bend
            dirs_l = np.array([bent[k][0] for k in keys])
            goal = np.array([bent[k][1] for k in keys])
            a_cols = np.array([idx[f, pairs[p, 0]] for f, p in keys])
            c_cols = np.array([idx[f, pairs[p, 1]] for f, p in keys])
            Lm = sparse.csr_matrix((np.concatenate([dirs_l, -dirs_l], axis=1).ravel(),
                                    (np.repeat(np.arange(len(keys)), 6), np.concatenate([c_cols, a_cols], axis=1).ravel())),
                                   shape=(len(keys), n))
            Q = Q + w_lim * (Lm.T @ Lm)
            g = g + w_lim * (Lm.T @ goal)
        # Hard: bone lengths, linearised about the current pose: n·(x_b - x_a) = l.
        lt = src_len + t * (lengths - src_len)
        d = X[:, bones[:, 1]] - X[:, bones[:, 0]]                             # (W,B,3)
        r = np.maximum(norm(d), 1e-12 * H)
        dirs = d / r[..., None]
        B = len(bones)
        if B:
            rows = np.repeat(np.arange(W * B), 6)
            cols = np.concatenate([idx[:, bones[:, 1]], idx[:, bones[:, 0]]], axis=-1).reshape(W * B, 6).ravel()
            vals = np.concatenate([dirs, -dirs], axis=-1).reshape(-1)
            Cb = sparse.csr_matrix((vals, (rows, cols)), shape=(W * B, n))
            Q2, g2 = 2 * Q, 2 * g
            if tension is not None:
                Hc = _curvature(dirs, np.maximum(r, 1e-6 * H), bones, idx, tension, n)
                Q2 = Q2 + Hc
                g2 = g2 + Hc @ X.ravel()
            kkt = sparse.bmat([[Q2, Cb.T], [Cb, None]], format="csc")
            rhs = np.concatenate([g2, lt.ravel()])
        else:
            kkt, rhs = (2 * Q).tocsc(), 2 * g
        try:
            x = splu(kkt).solve(rhs)
        except RuntimeError:                                                # singular: least squares instead
            x = lsqr(kkt, rhs, atol=1e-12, btol=1e-12)[0]
        X = x[:n].reshape(W, Jv, 3)
        tension = x[n:].reshape(W, B) if B else None
        before = set(contacts) | set(bent)
        if collide is not None and (t >= 1.0 or collide[2] is not None):
            # An animated environment is tested at the targets only (no collider between).
            contacts = _collisions(X, allowed, collide, H, contacts, t)
        if bend is not None:
            bent = _bends(X, bend, bent)
        if len(steps) == 1 and extra > 0 and not (set(contacts) | set(bent)) <= before:
            steps.append(1.0)
            extra -= 1
        steps.pop(0)
        step(t)
    return X, col_rows


def _curvature(u, r, bones, idx, tension, n):
    """(n,n) the bone-length constraints' curvature about the pose whose bones (W,B) have
    directions ``u`` (W,B,3) and lengths ``r``, weighted by their multipliers ``tension`` (W,B)
    from the solve before: for a bone pulled apart (nu > 0), nu (I - u u^T) / r on its two ends'
    difference; ``idx`` (W,J',3) the unknowns' indices.

    A length linearised about the pose (n . (x_b - x_a) = l) lets a bone's ends slide across it
    for free, and the first-order slide only ever lengthens it: a foot pulled up on a crest slid
    the hip along the pelvis bone (the in-place real clip's thighs 20-46 cm too long, growing
    step by step; its feet 3-5 cm low after the exact-length pass). With this term each step is
    the Lagrangian's Newton step for a bone in tension. A compressed bone (nu < 0) keeps the
    plain linearisation: its true curvature is negative (it invites buckling), and |nu| in its
    place stiffened the joints against their bend limits (legs 20 % longer: 4.8 degrees past a
    limit, 0.6 without; the lowered beam 4.5, 2.5). The term vanishes where the pose stops
    changing, so an undeformed scene and a rigid move give what they gave."""
    nu = np.maximum(tension, 0.0)
    P = (nu / r)[..., None, None] * (np.eye(3) - u[..., :, None] * u[..., None, :])   # (W,B,3,3)
    a, b = idx[:, bones[:, 0]], idx[:, bones[:, 1]]                        # (W,B,3)
    rows, cols, vals = [], [], []
    for p, q, sgn in ((b, b, 1.0), (a, a, 1.0), (b, a, -1.0), (a, b, -1.0)):
        rows.append(np.broadcast_to(p[..., :, None], P.shape).ravel())
        cols.append(np.broadcast_to(q[..., None, :], P.shape).ravel())
        vals.append((sgn * P).ravel())
    return sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))


def _collisions(X, allowed, collide, H, contacts, t=1.0):
    """Soft collision constraints for joints of ``X`` (W,J',3) behind a surface of the environment
    at morph step ``t``, deeper than ``allowed`` (W,J') (their source's depth behind the source's
    surfaces, or 0): per (frame, joint) the surface normal and the target along it. Earlier ones
    stay while the joint is within ``COLLISION_BAND`` of its allowed depth."""
    colliders, static, at = collide
    W, Jv, _ = X.shape
    if static:
        sd, normal = (colliders[0][0] if at is None else at(t)).signed_distance(X.reshape(-1, 3))
        sd, normal = sd.reshape(W, Jv), normal.reshape(W, Jv, 3)
    else:
        sd, normal = np.empty((W, Jv)), np.empty((W, Jv, 3))
        for f in range(W):
            sd[f], normal[f] = colliders[f][0].signed_distance(X[f])
    near = (sd < allowed + COLLISION_BAND * H) & np.isfinite(sd)
    out = {}
    for f, j in zip(*np.nonzero(near)):
        f, j = int(f), int(j)
        if sd[f, j] < allowed[f, j] or (f, j) in contacts:
            out[(f, j)] = (normal[f, j], float(normal[f, j] @ X[f, j] + (allowed[f, j] - sd[f, j])))
    return out


def _clearances(X, clearance, collide, H, t, up):
    """Soft rows keeping the joints near a surface that faces ``up`` at their source distance from
    it (a product departure, ``descriptors.clearance``'s for this solver): the Laplacian moves a
    foot by the mean of its neighbours, the environment points under it and the other joints,
    and a foot on a sculpted crest stayed 3-5 cm short of it. Per (frame, joint) within the band:
    the normal, the target along it, the weight (full within ``CLEARANCE_FULL_FRACTION`` body
    heights of the surface, none from ``CLEARANCE_FADE_FRACTION``, less as the distance now
    departs from the source's by more than the mismatch band, as the descriptors' correction;
    full where the surface faces up within 45 degrees, none beyond 60: rows under a lowered beam
    pulled the head down with it and folded the neck 10.7 degrees past its limit, where the
    collisions alone push it out)."""
    colliders, static, at = collide
    W, Jv, _ = X.shape
    f, j = np.nonzero(np.isfinite(clearance))
    if not f.size:
        return {}
    p = X[f, j]
    if static:
        sd, normal = (colliders[0][0] if at is None else at(t)).signed_distance(p)
    else:
        sd, normal = np.empty(len(f)), np.empty((len(f), 3))
        for k in np.unique(f).tolist():
            rows = np.flatnonzero(f == k)
            sd[rows], normal[rows] = colliders[k][0].signed_distance(p[rows])
    want = clearance[f, j]
    ok = np.isfinite(sd)
    miss = np.abs(np.where(ok, want - sd, np.inf))
    weight = np.clip((C.CLEARANCE_FADE_FRACTION * H - np.abs(want)) /
                     ((C.CLEARANCE_FADE_FRACTION - C.CLEARANCE_FULL_FRACTION) * H), 0.0, 1.0)
    weight *= np.clip((C.CLEARANCE_MISMATCH_FADE_FRACTION * H - miss) /
                      ((C.CLEARANCE_MISMATCH_FADE_FRACTION - C.CLEARANCE_MISMATCH_FULL_FRACTION) * H), 0.0, 1.0)
    facing = normal @ up
    weight *= np.clip((facing - 0.5) / (np.sqrt(0.5) - 0.5), 0.0, 1.0)
    out = {}
    for k in np.flatnonzero(weight > 0).tolist():
        n = normal[k]
        out[(int(f[k]), int(j[k]))] = (n, float(n @ p[k] + (want[k] - sd[k])), float(weight[k]))
    return out


def _bends(X, bend, bent):
    """Soft bend limits for ``X`` (W,J',3): per (frame, pair) bent past its limit (parent-child
    closer than allowed) the direction between them and the distance to keep. Earlier ones stay
    while the pair is within 1 % of its limit."""
    pairs, dmin, _ = bend
    d = X[:, pairs[:, 1]] - X[:, pairs[:, 0]]
    dist = np.linalg.norm(d, axis=-1)
    near = dist < dmin * 1.01
    out = {}
    for f, p in zip(*np.nonzero(near)):
        f, p = int(f), int(p)
        if dist[f, p] < dmin[f, p] or (f, p) in bent:
            out[(f, p)] = (d[f, p] / max(dist[f, p], 1e-12), float(dmin[f, p]))
    return out


def _source_signed(src, collide):
    """(W,J') each source joint's signed distance from the source's surfaces (inf beyond the band):
    what the collisions allow (``_allowed_depth``) and the clearance rows keep, computed once."""
    colliders, static, _ = collide
    W, Jv, _ = src.shape
    if static:
        return colliders[0][1].signed_distance(src.reshape(-1, 3))[0].reshape(W, Jv)
    return np.stack([colliders[f][1].signed_distance(src[f])[0] for f in range(W)])


def _allowed_depth(sd):
    """(W,J') how far each source joint lies behind the source's surfaces (0 where it does not),
    from their signed distances ``sd`` (``_source_signed``)."""
    return np.minimum(np.where(np.isinf(sd), 0.0, sd), 0.0)
