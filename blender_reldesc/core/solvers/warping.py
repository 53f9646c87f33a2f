"""Relationship-aware motion warping (SCA 2013 §7.2, Jakobsen 2001).

One particle per joint. Per frame: ``substeps`` times, a force step (Eq. 9),
a Verlet step with affinity-dependent damping (Eq. 10), then
``iterations`` constraint sweeps: bone lengths and rigidity links weighted by
affinity (Eq. 11), positional pins, and collision pushes.

Product improvement over the paper (documented in the README): each frame
starts from the previous frame's result *advanced by the motion of the
targets* between the two frames. The paper starts from the previous result
alone, which with k = 1 and N_s = 3 lags behind a moving target by several
centimetres at walking speed; advancing by the target motion keeps the same
temporal coherence (the residual of the previous frame is carried over) while
an undeformed or rigidly moved environment reproduces the motion exactly.
"""

from __future__ import annotations

import numpy as np

from .. import constants as C
from ..errors import Cancelled


def color_edges(edges, joint_count):
    """Split edges into groups in which no two edges share a joint.

    Within a group the Eq. 11 projections are independent and run as one
    vectorised Gauss-Seidel step. Greedy colouring: a tree needs as many
    colours as its largest degree.
    """
    used = [set() for _ in range(joint_count)]
    color = np.zeros(len(edges), np.int64)
    for e, (a, b) in enumerate(edges.tolist()):
        c = 0
        while c in used[a] or c in used[b]:
            c += 1
        color[e] = c
        used[a].add(c)
        used[b].add(c)
    return [np.flatnonzero(color == c) for c in range(color.max() + 1)] if len(edges) else []


def colour_slices(pairs, joint_count):
    """``order (E,)`` sorting ``pairs`` by colour (``color_edges``) and the slice of each colour."""
    groups = color_edges(pairs, joint_count)
    order = np.concatenate(groups) if groups else np.zeros(0, np.int64)
    bounds = np.cumsum([0] + [len(g) for g in groups])
    return order, [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _pair_groups(pairs, lengths, slices, s, at_least):
    """Per colour, the gather/scatter arrays of the Eq. 11 projection of ``pairs`` (E,2).

    Each pair appears twice: once to move its second end (by the first's share)
    and once to move its first end, so one gather and one scatter per group
    apply both halves of Eq. 11. ``at_least``: only push apart (bend limits).
    """
    a_all, b_all = pairs[:, 0], pairs[:, 1]
    share = s[a_all] / (s[a_all] + s[b_all])                              # Eq. 11
    groups = []
    for sl in slices:
        a, b, sh = a_all[sl], b_all[sl], share[sl]
        groups.append((np.concatenate([a, a]), np.concatenate([b, b]), np.concatenate([b, a]),
                       np.tile(lengths[sl], 2), np.concatenate([sh, sh - 1.0])[:, None], at_least))
    return groups


class Warper:
    """Frame-by-frame warping of joint particles towards their targets.

    Parameters
    ----------
    edges : (E,2) int, constrained joint pairs (bones and rigidity links).
    lengths : (F,E) float, rest length of each edge per frame.
    body_height : float, scale for tolerances.
    glue : (Z,2) int, (joint, parent) pairs of zero-length bones: the joint
        is placed on its parent after each frame.
    pins : (F,J,3) float or None, NaN where a joint is free.
    collide : callable ``(positions (J,3), frame) -> positions`` or None.
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
    """

    def __init__(self, edges, lengths, body_height, glue=None, pins=None, collide=None,
                 substeps=C.SUBSTEPS, iterations=C.CONSTRAINT_ITERATIONS,
                 final_iterations=C.FINAL_ITERATIONS, feed_forward=True, hinges=None, limits=None):
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        J = int(edges.max()) + 1 if len(edges) else 1
        order, self.slices = colour_slices(edges, J)
        self.edges = edges[order]
        self.lengths = np.asarray(lengths, dtype=float)[:, order]
        self.body_height = body_height
        self.glue = np.zeros((0, 2), np.int64) if glue is None else np.asarray(glue).reshape(-1, 2)
        self.pins = pins
        self.collide = collide
        self.substeps = substeps
        self.iterations = iterations
        self.final_iterations = max(iterations, final_iterations)
        self.feed_forward = feed_forward
        self.hinges = hinges
        self.limits = None
        if limits is not None and len(limits[0]):
            pairs = np.asarray(limits[0], np.int64)
            lim_order, lim_slices = colour_slices(pairs, int(pairs.max()) + 1)
            self.limits = (pairs[lim_order], np.asarray(limits[1], float)[:, lim_order], lim_slices)

    def _prepare(self, f, affinity):
        """Per-frame arrays, built once and reused by every sweep of frame f."""
        s = np.maximum(affinity, C.AFFINITY_FLOOR)
        groups = []
        if self.limits is not None:                     # limits first, so each sweep ends on the bone lengths
            pairs, dmin, slices = self.limits
            groups += _pair_groups(pairs, dmin[f], slices, s, at_least=True)
        groups += _pair_groups(self.edges, self.lengths[f], self.slices, s, at_least=False)
        held = None
        if self.pins is not None:
            idx = np.flatnonzero(~np.isnan(self.pins[f, :, 0]))
            held = (idx, self.pins[f, idx]) if idx.size else None
        damping = C.DAMPING_AT_ZERO + (C.DAMPING_AT_ONE - C.DAMPING_AT_ZERO) * np.clip(affinity, 0, 1)
        return groups, held, damping

    def _sweep(self, p, groups, held):
        for a, b, moved, L, share, at_least in groups:
            delta = p[b] - p[a]
            dist = np.sqrt(np.einsum("ij,ij->i", delta, delta))
            gap = L - dist
            if at_least:                                              # bend limit: push apart only
                gap = np.maximum(gap, 0.0)
            corr = (gap / np.maximum(dist, 1e-300))[:, None] * delta
            p[moved] += share * corr                                  # Eq. 11, both ends
        if held is not None:
            p[held[0]] = held[1]

    def _step(self, p, prev, target, f, sweeps, prepared, collide=True):
        groups, held, damping = prepared
        force = C.SPRING_K * (target - p)                              # Eq. 9
        new = p + damping[:, None] * (p - prev) + (0.5 / self.substeps ** 2) * force   # Eq. 10
        for _ in range(sweeps):
            self._sweep(new, groups, held)
        if collide and self.collide is not None:
            new = self.collide(new, f)
        return new, p

    def first(self, target, start, affinity, f=0, max_steps=C.STATIC_MAX_STEPS, free_first=True):
        """Frame f solved statically from the pose ``start`` (J,3) until it settles.

        With ``free_first`` it settles first without collisions, then with them: a source pose
        that the edit put inside an obstacle (a head in a lowered beam) would otherwise be
        pushed out through the obstacle's far side and held there for the rest of the clip.
        A start at the targets needs no such first pass.
        """
        prepared = self._prepare(f, affinity)
        tol = C.STATIC_TOLERANCE * self.body_height
        p = np.array(start, dtype=float)
        stages = (True,) if self.collide is None or not free_first else (False, True)
        for collide in stages:
            prev = p.copy()
            for _ in range(max_steps):
                before = p
                p, prev = self._step(p, prev, target, f, self.iterations, prepared, collide)
                if np.max(np.abs(p - before)) < tol:
                    break
        if self.hinges is not None:
            p = self._limit_hinges(p, f)
        return self._glue(p)

    def next(self, f, previous, target_before, target, affinity):
        """Frame f from the previous frame's result (J,3) and the targets of both frames."""
        prepared = self._prepare(f, affinity)
        p = previous + (target - target_before) if self.feed_forward else previous.copy()
        prev = p.copy()
        for i in range(self.substeps):
            sweeps = self.final_iterations if i == self.substeps - 1 else self.iterations
            p, prev = self._step(p, prev, target, f, sweeps, prepared)
        if self.hinges is not None:
            p = self._limit_hinges(p, f)
        return self._glue(p)

    def run(self, targets, start, affinity, progress=None):
        """Warp all frames.

        targets : (F,J,3) joint targets; start : (J,3) pose the first frame
        converges from; affinity : (F,J) in [0,1].
        Returns (F,J,3) positions.
        """
        F = len(targets)
        out = np.empty_like(targets)
        out[0] = self.first(targets[0], start, affinity[0])
        for f in range(1, F):
            out[f] = self.next(f, out[f - 1], targets[f - 1], targets[f], affinity[f])
            if progress is not None and (f % 16 == 0 or f == F - 1) and progress(f, F) is False:
                raise Cancelled(f"cancelled at frame {f} of {F}")
        return out

    def _limit_hinges(self, p, f):
        hinges, motion = self.hinges
        free = None
        if self.pins is not None:
            free = np.isnan(self.pins[f, hinges.triples[:, 1], 0])       # a pinned knee stays pinned
        return hinges.limit(p, motion, f, free)

    def _glue(self, p):
        for j, parent in self.glue.tolist():
            p[j] = p[parent]
        return p
