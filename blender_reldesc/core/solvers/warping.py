"""Relationship-aware motion warping (SCA 2013 §7.2, Jakobsen 2001).

One particle per joint. Per frame: ``substeps`` times, a force step (Eq. 9),
a Verlet step with affinity-dependent damping (Eq. 10), then
``iterations`` constraint sweeps: bone lengths and rigidity links weighted by
affinity (Eq. 11), positional pins, and collision pushes.

Product improvement over the paper (documented in the manual, docs/how-it-works): each frame
starts from the previous frame's result *advanced by the motion of the
targets* between the two frames. The paper starts from the previous result
alone, which with k = 1 and N_s = 3 lags behind a moving target by several
centimetres at walking speed; advancing by the target motion keeps the same
temporal coherence (the residual of the previous frame is carried over) while
an undeformed or rigidly moved environment reproduces the motion exactly.

Product improvement for speed: a long clip is solved as segments in one batch,
then chained until it equals the frame-by-frame solve (``Warper.run``).
"""

from __future__ import annotations

import numpy as np

from .. import constants as C
from ..errors import Cancelled


def color_edges(edges, joint_count):
    """Split edges into groups in which no two edges share a joint.

    Within a group the Eq. 11 projections are independent and run as one vectorised
    Gauss-Seidel step, so every group costs a sweep the same numpy calls: the fewer groups
    the faster. Greedy colouring first; when it needs more colours than a joint has edges
    (a 27-joint rig with its rigidity links: 5 groups, one of a single edge, where 4 do),
    a bounded exact search for that many (``_colour_exactly``) on small graphs.
    """
    edges = np.asarray(edges, np.int64).reshape(-1, 2)
    if not len(edges):
        return []
    used = [set() for _ in range(joint_count)]
    color = np.zeros(len(edges), np.int64)
    for e, (a, b) in enumerate(edges.tolist()):
        c = 0
        while c in used[a] or c in used[b]:
            c += 1
        color[e] = c
        used[a].add(c)
        used[b].add(c)
    degree = int(np.bincount(edges.ravel(), minlength=joint_count).max())
    if color.max() + 1 > degree and len(edges) <= _EXACT_COLOURING_EDGES:
        better = _colour_exactly(edges, joint_count, degree)
        if better is not None:
            color = better
    return [np.flatnonzero(color == c) for c in range(color.max() + 1)]


#: Graphs up to this many edges (a rig with fingers and its rigidity links: 90; Rigify's deform
#: bones with their face: 286, where greedy colouring took 16 colours and the search takes 10)
#: get the exact search of ``_colour_exactly`` (one level of recursion an edge)...
_EXACT_COLOURING_EDGES = 600
#: ... which gives up after this many assignments an edge (a rig colours without going back).
_EXACT_COLOURING_BUDGET = 4


def _colour_exactly(edges, joint_count, colours):
    """(E,) a colour in ``range(colours)`` per edge, no two edges of a joint alike, or None.

    Backtracking, always on the uncoloured edge with the fewest colours left (ties: the
    first), within ``_EXACT_COLOURING_BUDGET`` assignments an edge. Deterministic. A joint's
    colours are a bit mask: the scan for the most constrained edge is one OR and one bit count
    an edge (a 273-joint Rigify rig's 286 edges colour in a few milliseconds).
    """
    E = len(edges)
    ends = edges.tolist()
    mask = [0] * joint_count                                # per joint, the colours its edges hold
    full = (1 << colours) - 1
    color = [-1] * E
    budget = [_EXACT_COLOURING_BUDGET * E]

    def solve(left):
        if not left:
            return True
        best, options, fewest = None, 0, colours + 1
        for e in left:
            a, b = ends[e]
            free = full & ~(mask[a] | mask[b])
            n = bin(free).count("1")
            if n < fewest:
                best, options, fewest = e, free, n
                if n <= 1:
                    break
        rest = [e for e in left if e != best]
        a, b = ends[best]
        for c in range(colours):
            if not options >> c & 1:
                continue
            budget[0] -= 1
            if budget[0] < 0:
                return False
            color[best] = c
            mask[a] |= 1 << c
            mask[b] |= 1 << c
            if solve(rest):
                return True
            mask[a] &= ~(1 << c)
            mask[b] &= ~(1 << c)
        color[best] = -1
        return False

    return np.array(color, np.int64) if solve(list(range(E))) else None


def colour_slices(pairs, joint_count):
    """``order (E,)`` sorting ``pairs`` by colour (``color_edges``) and the slice of each colour.
    Kept for the last few graphs: every warper of a rig (each live session, contact round and
    crowd) colours the same edges (10 ms for a Rigify rig's)."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    key = (pairs.tobytes(), int(joint_count))
    kept = _COLOURED.pop(key, None)
    if kept is None:
        groups = color_edges(pairs, joint_count)
        order = np.concatenate(groups) if groups else np.zeros(0, np.int64)
        bounds = np.cumsum([0] + [len(g) for g in groups])
        kept = order, [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        kept[0].setflags(write=False)
    _COLOURED[key] = kept
    while len(_COLOURED) > 16:
        _COLOURED.pop(next(iter(_COLOURED)))
    return kept[0], list(kept[1])


_COLOURED = {}


def _colour_pairs(pairs, slices):
    """Per colour, its pairs' first joints then their second ones (2k,), and the slice of
    ``pairs`` it holds."""
    return [(np.concatenate([pairs[sl, 0], pairs[sl, 1]]), sl) for sl in slices]


class _Later:
    """``function(*args)``, computed on the first call and kept."""

    def __init__(self, function, *args):
        self.function, self.args, self.value = function, args, None

    def __call__(self):
        if self.value is None:
            self.value = self.function(*self.args)
        return self.value


class Warper:
    """Frame-by-frame warping of joint particles towards their targets.

    Every step works on a batch of poses (S,J,3) at frames (S,): one frame of one clip in
    the live preview and the sequential solve, one frame of each of S clip segments in
    ``run`` (``segments``), so that each numpy call covers many frames at once.

    Parameters
    ----------
    edges : (E,2) int, constrained joint pairs (bones and rigidity links).
    lengths : (F,E) float, rest length of each edge per frame.
    body_height : float, scale for tolerances.
    glue : (Z,2) int, (joint, parent) pairs of zero-length bones: the joint
        is placed on its parent after each frame.
    pins : (F,J,3) float or None, NaN where a joint is free.
    collide : callable ``(positions (S,J,3), frames (S,)) -> positions`` or None.
    substeps, iterations : N_s and N_c of the paper.
    final_iterations : constraint sweeps after the last substep of a frame
        (product improvement: the paper's N_c = 3 leaves 0.16 % mean
        bone-length error on a sculpted terrain; 12 sweeps there leave
        0.03 %, at no visible cost in target tracking).
    hinges : optional ``(skeleton.joints.Hinges, source motion (F,J,3))``:
        hinges found from the source (paper §8: hinge limits). A hinge that
        ends a frame bent against the source's bend, carried with the body
        part its limb hangs from, is reflected back across its parent-child
        axis, which keeps both bone lengths.
    limits : optional ``(pairs (P,2), min_distance (F,P))``: bend limits as
        inequality constraints |p_c - p_a| >= min_distance between a joint's
        parent and child (``skeleton.joints.BendLimits``), projected with the
        same affinity shares as Eq. 11 and only when violated.
    feed_forward : start each frame from the previous result advanced by the
        targets' motion (product improvement, see the module docstring);
        False is the paper's scheme, kept for comparison in the benchmarks.
    segments : ``run`` splits a clip longer than this many frames into segments solved
        together (0: never; see ``run``).
    warmup : frames each segment after the first is solved from before its own first frame.
    static_tolerance, static_steps : a clip's frame 0 settles until no joint moves more than
        this many body heights in a step, or for this many steps.
    segment_tolerance : ``run`` re-solves a segment until its start is within this many body
        heights of its predecessor's end.
    rows : optional (R,) int, the frame each row of the batch plays when rows are not frames
        (a crowd's rows are (character, frame)): lengths, limits, hinges and collisions are
        looked up by it, pins per row (``pins`` (R,J,3)), without copying per-frame data per row.
    clusters : optional list of ``(members (m,) int, shape (F,m,3) float)``: joints held as one
        rigid body whose shape on frame f is ``shape[f]`` (offsets from its first member), each
        projected once a sweep by shape matching (Müller et al. 2005, weighted by affinity as
        Eq. 11 shares a correction: the joints nearer a surface move less). Product decision
        for speed (``constants.CLUSTER_CHILDREN``): a joint and its many children (a head and
        a face rig's bones) were rigid already through a bone to each child and
        a link between every two; one projection keeps the same distances, costs one fit
        instead of k colours of projections, and cannot mirror the cluster.
    """

    def __init__(self, edges, lengths, body_height, glue=None, pins=None, collide=None,
                 substeps=C.SUBSTEPS, iterations=C.CONSTRAINT_ITERATIONS,
                 final_iterations=C.FINAL_ITERATIONS, feed_forward=True, hinges=None, limits=None,
                 segments=C.SEGMENT_FROM_FRAMES, warmup=C.SEGMENT_WARMUP, rows=None,
                 static_tolerance=C.STATIC_TOLERANCE, static_steps=C.STATIC_MAX_STEPS,
                 segment_tolerance=C.SEGMENT_TOLERANCE, clusters=None):
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        J = int(edges.max()) + 1 if len(edges) else 1
        order, slices = colour_slices(edges, J)
        self.edges = edges[order]
        self.lengths = np.asarray(lengths, dtype=float)[:, order]
        self._edge_groups = _colour_pairs(self.edges, slices)
        self.body_height = body_height
        self.glue = np.zeros((0, 2), np.int64) if glue is None else np.asarray(glue).reshape(-1, 2)
        self.pins = pins
        self.collide = collide
        self.substeps = substeps
        self.iterations = iterations
        self.final_iterations = max(iterations, final_iterations)
        self.feed_forward = feed_forward
        self.hinges = hinges
        self.segments = int(segments)
        self.warmup = int(warmup)
        self.rows = None if rows is None else np.asarray(rows, np.int64)
        self.static_tolerance, self.static_steps = float(static_tolerance), int(static_steps)
        self.segment_tolerance = float(segment_tolerance)
        self.clusters = [(np.asarray(m, np.int64), np.asarray(q, float)) for m, q in clusters or ()]
        self._cluster_colours = _cluster_colours(self.clusters)
        self.limits = None
        if limits is not None and len(limits[0]):
            pairs = np.asarray(limits[0], np.int64)
            lim_order, lim_slices = colour_slices(pairs, int(pairs.max()) + 1)
            pairs = pairs[lim_order]
            self.limits = (pairs, np.asarray(limits[1], float)[:, lim_order], _colour_pairs(pairs, lim_slices))

    # --- one step of a batch -------------------------------------------------------------
    #
    # Inside a step the poses are coordinate-major, (3,J,S): a joint's gather is a block of S
    # contiguous values per coordinate, and a distance is a sum of three contiguous planes.
    # Measured on a 27-joint rig: 1.4x faster per sweep than joint-major (J,S,3) at 100 poses,
    # 2.7x at 1000 (benchmarks/RESULTS.md, "Crowds").

    @staticmethod
    def _groups(pairs, lengths, colours, s, at_least):
        """Per colour ``(ends (2k,), L (k,S), share (2,k,S), at_least, one)`` for the sweeps: ``ends``
        the pairs' first joints then their second, ``share`` the part of the correction each end
        takes; ``one``: for a batch of one pose (S = 1), ``_one_pose``'s matrices, else None."""
        sa, sb = s[:, pairs[:, 0]], s[:, pairs[:, 1]]
        share = (sa / (sa + sb)).T                                               # Eq. 11
        lengths = lengths.T
        out = []
        for ends, sl in colours:
            L, sh = np.ascontiguousarray(lengths[sl]), np.stack([share[sl] - 1.0, share[sl]])
            one = None
            if s.shape[0] == 1:
                # The scatter matrix weighted by each end's share (k,J): a sweep then scales it by
                # the pairs' gaps and adds delta @ it to the pose, one product for both ends. Each
                # joint's column has one entry (no two pairs of a colour share a joint), so every
                # correction is the same product as share * gap * delta, exactly.
                gather, scatter = _one_pose(ends, s.shape[1])
                k = len(L)
                weighted = sh[0, :, :1] * scatter[:k] + sh[1, :, :1] * scatter[k:]
                one = (gather, weighted, L[:, 0])
            out.append((ends, L, sh, at_least, one))
        return out

    def _prepare(self, fs, affinity):
        """Per-step arrays for rows ``fs`` (S,) with affinities (S,J), reused by every sweep."""
        s = np.maximum(affinity, C.AFFINITY_FLOOR)
        frames = self._frames(fs)
        limits, check = None, None
        if self.limits is not None:                     # limits first, so each sweep ends on the bone lengths
            pairs, dmin, colours = self.limits
            # Made when a sweep first needs them (a Rigify rig's 133 limits take 50 colours, and
            # most frames violate none).
            limits = _Later(self._groups, pairs, dmin[frames], colours, s, True)
            # A sweep whose poses violate no limit skips the limits' groups (they would move
            # nothing): one test of every pair instead of a projection per colour.
            floor = dmin[frames].T
            ends = np.concatenate([pairs[:, 0], pairs[:, 1]])
            floor2 = floor * floor * (1.0 + 1e-12)
            check = (ends, floor2, None if len(fs) != 1 else (_one_pose(ends, s.shape[1])[0], floor2[:, 0]))
        clusters = [self._cluster(colour, frames, s) for colour in self._cluster_colours]
        groups = (limits, check, clusters, self._groups(self.edges, self.lengths[frames], self._edge_groups, s, False))
        held = None
        if self.pins is not None:
            pins = self.pins[fs].swapaxes(0, 1)                                  # (J,S,3)
            mask = ~np.isnan(pins[..., 0])
            if mask.any():
                # flat indices into a (3,J,S) pose's (J*S) columns: one write a sweep (the
                # boolean mask took 15 µs of a 100-character crowd's 190 µs sweep, these 5)
                held = (np.flatnonzero(mask), np.ascontiguousarray(pins[mask].T))
        damping = C.DAMPING_AT_ZERO + (C.DAMPING_AT_ONE - C.DAMPING_AT_ZERO) * np.clip(affinity, 0, 1)
        return fs, groups, held, np.ascontiguousarray(damping.T)[None]

    @staticmethod
    def _cluster(colour, frames, s):
        """A colour of disjoint clusters at rows playing ``frames`` (S,) with affinities ``s`` (S,J):
        per cluster ``(members (m,), weights (1,m,S), shape (S,m,3) and (S,3,m))``, the weights
        summing to one and the shape about its weighted centre."""
        out = []
        for members, shape in colour:
            w = s[:, members]
            w = w / w.sum(axis=1, keepdims=True)                                 # (S,m)
            q = shape[frames]
            q = q - np.einsum("sm,smd->sd", w, q)[:, None]
            out.append((members, np.ascontiguousarray(w.T)[None], np.ascontiguousarray(q),
                        np.ascontiguousarray(q.swapaxes(1, 2))))
        return out

    @staticmethod
    def _sweep(p, prepared_groups, held):
        """One Gauss-Seidel sweep over the colour groups of coordinate-major poses ``p`` (3,J,S).

        Within a colour no two pairs share a joint, so each colour is one vectorised
        projection (Eq. 11) moving both ends of its pairs. In place: these arrays are small,
        numpy calls count.
        """
        limits, check, clusters, edges = prepared_groups
        groups = edges
        if check is not None:
            ends, floor2, one = check
            if one is not None:                                       # one pose: one product
                delta = p.reshape(3, -1) @ one[0]
                floor2 = one[1]
            else:
                x = p.take(ends, axis=1)
                k = len(floor2)
                delta = x[:, k:] - x[:, :k]
            if (np.add.reduce(np.square(delta), 0) < floor2).any():
                groups = limits() + edges
        for colour in clusters:                                       # shape matching, then the bones
            centres, covs = [], []
            for members, w, q, _ in colour:
                xw = p.take(members, axis=1) * w                      # (3,m,S)
                centres.append(np.add.reduce(xw, 1))                  # (3,S)
                covs.append(np.matmul(xw.transpose(2, 0, 1), q))      # (S,3,3): sum of w x q^T
            # one SVD for every cluster of the colour
            u, _, vt = np.linalg.svd(covs[0][:, None] if len(covs) == 1 else np.stack(covs, axis=1))
            rot = np.matmul(u, vt)                                    # (S,n,3,3)
            mirror = np.linalg.det(rot) < 0                           # (one call: np.cross took 25 µs)
            if mirror.any():                                          # the nearest rotation, not a reflection
                rot -= 2.0 * mirror[..., None, None] * (u[..., :, 2, None] * vt[..., None, 2, :])
            for k, (members, _, _, qt) in enumerate(colour):
                goal = np.matmul(rot[:, k], qt)                       # (S,3,m)
                p[:, members] = goal.transpose(1, 2, 0) + centres[k][:, None]
        # The poses' columns (3,J*S): a view of p when it can be one (p contiguous, as the steps
        # make it), so that writing to it moves p; None when it would be a copy (setting .shape
        # instead is deprecated in numpy 2.5).
        columns = p.reshape(3, -1)
        if not (p.flags.c_contiguous or np.may_share_memory(columns, p)):
            columns = None
        for ends, L, share, at_least, one in groups:
            if one is not None and columns is not None:               # one pose: two products, fewer calls
                gather, weighted, L = one
                q = columns                                           # (3,J)
                delta = q @ gather                                    # (3,k): second ends minus first
                dist = np.sqrt(np.add.reduce(np.square(delta), 0))
                gap = L - dist
                if at_least:
                    np.maximum(gap, 0.0, out=gap)
                gap /= np.maximum(dist, 1e-300)
                q += delta @ (gap[:, None] * weighted)                # Eq. 11, both ends
                continue
            x = p.take(ends, axis=1)                                  # (3,2k,S): first ends, second ends
            k = len(L)
            delta = x[:, k:] - x[:, :k]
            dist = np.sqrt(np.add.reduce(np.square(delta), 0))
            gap = L - dist
            if at_least:                                              # bend limit: push apart only
                np.maximum(gap, 0.0, out=gap)
            gap /= np.maximum(dist, 1e-300)
            x.reshape(3, 2, k, -1)[...] += delta[:, None] * (share * gap)     # Eq. 11, both ends
            p[:, ends] = x
        if held is not None:
            if columns is None:                      # raises rather than write a copy
                raise ValueError("the poses are not contiguous: held joints would be written to a copy")
            columns[:, held[0]] = held[1]

    def _step(self, p, prev, target, sweeps, prepared, collide=True):
        """One substep of coordinate-major poses (3,J,S) towards ``target`` (3,J,S)."""
        fs, groups, held, damping = prepared
        force = C.SPRING_K * (target - p)                              # Eq. 9
        new = p + damping * (p - prev) + (0.5 / self.substeps ** 2) * force   # Eq. 10
        for _ in range(sweeps):
            self._sweep(new, groups, held)
        if collide and self.collide is not None:
            new = _coordinate_major(self.collide(_pose_major(new), self._frames(fs)))
        return new, p

    def _advance(self, fs, previous, target_before, target, affinity):
        """Frames ``fs`` (S,) from the previous frames' results (S,J,3) and both frames' targets.
        Returns (S,J,3): a view of a coordinate-major array, so that passing it back as
        ``previous`` costs no copy."""
        return self.advance_coordinates(fs, _coordinate_major(previous), _coordinate_major(target_before),
                                        _coordinate_major(target), affinity)

    def advance_coordinates(self, fs, previous, goal_before, goal, affinity):
        """``_advance`` with poses and targets given coordinate-major (3,J,S) (a crowd converts
        its targets once, not per frame). Returns (S,J,3) as ``_advance``."""
        prepared = self._prepare(fs, affinity)
        previous = np.ascontiguousarray(previous)                      # free when it is one already
        p = previous + (goal - goal_before) if self.feed_forward else previous.copy()
        prev = p.copy()
        for i in range(self.substeps):
            sweeps = self.final_iterations if i == self.substeps - 1 else self.iterations
            p, prev = self._step(p, prev, goal, sweeps, prepared)
        p = np.transpose(p, (2, 1, 0))                                 # a view: hinges and glue write through
        if self.hinges is not None:
            p = self._limit_hinges(p, fs)
        return self._glue(p)

    # --- one frame ----------------------------------------------------------------------

    def first(self, target, start, affinity, f=0, max_steps=C.STATIC_MAX_STEPS, free_first=True):
        """Frame f solved statically from the pose ``start`` (J,3) until it settles.

        With ``free_first`` it settles first without collisions, then with them: a source pose
        that the edit put inside an obstacle (a head in a lowered beam) would otherwise be
        pushed out through the obstacle's far side and held there for the rest of the clip.
        A start at the targets needs no such first pass.
        """
        return self.settle(np.asarray(target, float)[None], np.asarray(start, float)[None],
                           np.asarray(affinity, float)[None], np.array([f]), max_steps, free_first)[0]

    def settle(self, targets, starts, affinity, fs, max_steps=C.STATIC_MAX_STEPS, free_first=True,
               tolerance=C.STATIC_TOLERANCE):
        """A batch of frames ``fs`` (S,) solved statically from the poses ``starts`` (S,J,3)
        towards ``targets`` (S,J,3) (``first`` for several characters at once).

        Each pose steps until no joint moves more than ``tolerance`` body heights in a step: a
        pose that has settled is not stepped again, so a batch gives the poses it would give
        solved one at a time.
        """
        fs = np.asarray(fs, dtype=np.int64)
        tol = tolerance * self.body_height
        out = _coordinate_major(np.asarray(starts, dtype=float))
        goal_all = _coordinate_major(np.asarray(targets, float))
        affinity = np.asarray(affinity, float)
        stages = (True,) if self.collide is None or not free_first else (False, True)
        for collide in stages:
            live = np.arange(len(fs))
            p, prev = out.copy(), out.copy()
            goal = goal_all
            prepared = self._prepare(fs, affinity)
            for _ in range(max_steps):
                before = p
                p, prev = self._step(p, prev, goal, self.iterations, prepared, collide)
                moving = np.abs(p - before).max(axis=(0, 1)) >= tol
                if not moving.all():
                    out[:, :, live[~moving]] = p[:, :, ~moving]
                    live = live[moving]
                    p, prev = np.ascontiguousarray(p[:, :, moving]), np.ascontiguousarray(prev[:, :, moving])
                    if not live.size:
                        break
                    goal = np.ascontiguousarray(goal_all[:, :, live])
                    prepared = self._prepare(fs[live], affinity[live])
            out[:, :, live] = p
        out = _pose_major(out)
        if self.hinges is not None:
            out = self._limit_hinges(out, fs)
        return self._glue(out)

    def _first_frame(self, target, start, affinity):
        """A clip's frame 0, settled statically to ``static_tolerance`` (within ``static_steps``)."""
        return self.settle(np.asarray(target, float)[None], np.asarray(start, float)[None],
                           np.asarray(affinity, float)[None], np.array([0]), self.static_steps,
                           tolerance=self.static_tolerance)[0]

    def next(self, f, previous, target_before, target, affinity):
        """Frame f from the previous frame's result (J,3) and the targets of both frames."""
        return self._advance(np.array([f]), previous[None], target_before[None], target[None],
                             np.asarray(affinity, float)[None])[0]

    # --- a whole clip -------------------------------------------------------------------

    def run(self, targets, start, affinity, progress=None, segments=None, settled=False):
        """Warp all frames.

        targets : (F,J,3) joint targets; start : (J,3) pose the first frame
        converges from; affinity : (F,J) in [0,1].
        segments : override of ``self.segments``.
        settled : ``start`` is already frame 0's solution (a window of a solved clip starting
            where nothing changes), so frame 0 is not solved statically from it.
        Returns (F,J,3) positions.

        A clip longer than ``segments`` frames is cut into S segments of L frames solved
        together, one frame of every segment per step (``SEGMENT_BATCH`` segments at most).
        Each frame's solve depends on the previous frame's result alone, so the sequential
        solve is a chain, and segments are linked by their first frames' predecessors:

        1. The first pass guesses them: the first segment starts at frame 0 like the
           sequential solve and covers L + warmup frames; segment s starts ``warmup`` frames
           before its first frame, at the targets, and drops those frames. The solver forgets
           most of where it started within a few frames (damped Verlet, targets fed forward).
        2. Then, like parareal time integration, every segment whose predecessor frame
           (the last frame of the segment before) is not the pose it started from, within
           ``SEGMENT_TOLERANCE`` body heights, is solved again from that pose, until none is.
           Segment s is then exactly the sequential solve once segments 0 .. s - 1 are, so
           this ends after at most S passes (measured: 4 or 5 on the real walk, where a few
           segments take a different branch than their warm-up guessed).

        The result is the sequential solve's within a few ``SEGMENT_TOLERANCE`` body heights
        (measured in the tests and benchmarks: 3.4e-6 on the real walk), in at most about
        L + warmup + 4 L steps (170-200 on the clips measured, whatever their length) instead
        of F; a clip whose warm-ups all land within the tolerance needs no second pass.
        """
        F = len(targets)
        limit = self.segments if segments is None else int(segments)
        W = self.warmup
        if limit <= 0 or F <= max(limit, 2 * W + 2):
            return self._sequential(targets, start, affinity, progress, settled)
        L = max(W, -(-F // C.SEGMENT_BATCH))
        steps = L + W
        S = 1 + max(0, -(-(F - steps) // L))
        first = np.arange(S) * L                                   # frame each segment starts at
        out = np.empty_like(targets)
        out[0] = np.array(start, float) if settled else self._first_frame(targets[0], start, affinity[0])
        p = targets[first].copy()
        p[0] = out[0]
        tol = self.segment_tolerance * self.body_height
        used = None                                                # the pose each segment went on from
        done = 0
        budget = steps + 3 * L                                     # for progress: passes are guessed
        for k in range(1, steps):
            if k == W:
                used = p.copy()
            fs = np.minimum(first + k, F - 1)
            before = targets[np.minimum(first + k - 1, F - 1)]
            p = self._advance(fs, p, before, targets[fs], affinity[fs])
            keep = (k >= W) | (np.arange(S) == 0)
            keep &= first + k < F
            out[fs[keep]] = p[keep]
            done += 1
            self._report(progress, done, budget)
        link = first[1:] + W - 1                                   # each later segment's predecessor frame
        while True:
            off = np.abs(out[link] - used[1:]).max(axis=(1, 2)) > tol
            redo = np.flatnonzero(off)
            if not redo.size:
                return out
            at = link[redo]
            p = out[at].copy()
            used[1 + redo] = p
            for k in range(1, L + 1):
                fs = np.minimum(at + k, F - 1)
                p = self._advance(fs, p, targets[fs - 1], targets[fs], affinity[fs])
                # A segment back on the previous pass's frames (within a tenth of the
                # tolerance) would only repeat them: it stops there.
                inside = at + k < F
                live = inside & (np.abs(p - out[fs]).max(axis=(1, 2)) > 0.1 * tol)
                out[fs[inside]] = p[inside]
                done += 1
                self._report(progress, done, max(budget, done + L - k))
                if not live.all():
                    at, p = at[live], p[live]
                    if not at.size:
                        break

    @staticmethod
    def _report(progress, done, total):
        if progress is not None and done % 4 == 0 and progress(done, total) is False:
            raise Cancelled(f"cancelled at step {done} of about {total}")

    def _sequential(self, targets, start, affinity, progress=None, settled=False):
        F = len(targets)
        out = np.empty_like(targets)
        out[0] = np.array(start, float) if settled else self._first_frame(targets[0], start, affinity[0])
        for f in range(1, F):
            out[f] = self.next(f, out[f - 1], targets[f - 1], targets[f], affinity[f])
            if progress is not None and (f % 16 == 0 or f == F - 1) and progress(f, F) is False:
                raise Cancelled(f"cancelled at frame {f} of {F}")
        return out

    def _frames(self, fs):
        """The frames rows ``fs`` play."""
        return fs if self.rows is None else self.rows[fs]

    def _limit_hinges(self, p, fs):
        hinges, motion = self.hinges
        free = None
        if self.pins is not None:
            free = np.isnan(self.pins[fs][:, hinges.triples[:, 1], 0])     # a pinned knee stays pinned
        return hinges.limit(p, motion, self._frames(fs), free)

    def _glue(self, p):
        for j, parent in self.glue.tolist():
            p[:, j] = p[:, parent]
        return p


def _one_pose(ends, joint_count):
    """A colour's ``ends`` (2k,) as matrices for a sweep of one pose (3,J): ``gather`` (J,k), whose
    product gives each pair's second end minus its first, and ``scatter`` (2k,J), which adds each
    end's correction to its joint. A product of one pose costs one numpy call where taking,
    subtracting and writing back cost five, and gives the same numbers: every entry is one
    difference (or one correction) plus exact zeros. Kept per colour and joint count."""
    key = (ends.tobytes(), int(joint_count))
    kept = _ONE_POSE.get(key)
    if kept is None:
        k = len(ends) // 2
        gather = np.zeros((joint_count, k))
        gather[ends[:k], np.arange(k)] = -1.0
        gather[ends[k:], np.arange(k)] = 1.0
        scatter = np.zeros((2 * k, joint_count))
        scatter[np.arange(2 * k), ends] = 1.0
        if len(_ONE_POSE) > 64:
            _ONE_POSE.clear()
        kept = _ONE_POSE[key] = (gather, scatter)
    return kept


_ONE_POSE = {}


def _cluster_colours(clusters):
    """Clusters ``[(members, shape)]`` grouped so that no two of a group share a joint (their
    projections are then independent: one SVD call for the group)."""
    groups = []
    for members, shape in clusters:
        for g in groups:
            if not any(np.isin(members, m).any() for m, _ in g):
                g.append((members, shape))
                break
        else:
            groups.append([(members, shape)])
    return groups


def _coordinate_major(p):
    """Poses (S,J,3) as a contiguous (3,J,S) array (a copy)."""
    return np.ascontiguousarray(np.transpose(p, (2, 1, 0)))


def _pose_major(p):
    """Coordinate-major poses (3,J,S) as a contiguous (S,J,3) array (a copy)."""
    return np.ascontiguousarray(np.transpose(p, (2, 1, 0)))
