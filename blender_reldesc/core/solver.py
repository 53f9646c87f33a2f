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

from . import constants as C
from .errors import Cancelled


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
    """

    def __init__(self, edges, lengths, body_height, glue=None, pins=None, collide=None,
                 substeps=C.SUBSTEPS, iterations=C.CONSTRAINT_ITERATIONS,
                 final_iterations=C.FINAL_ITERATIONS):
        self.edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        self.lengths = lengths
        self.body_height = body_height
        self.glue = np.zeros((0, 2), np.int64) if glue is None else np.asarray(glue).reshape(-1, 2)
        self.pins = pins
        self.collide = collide
        self.substeps = substeps
        self.iterations = iterations
        self.final_iterations = max(iterations, final_iterations)
        J = int(self.edges.max()) + 1 if len(self.edges) else 0
        self.groups = [(self.edges[g, 0], self.edges[g, 1], g) for g in color_edges(self.edges, max(J, 1))]

    def _constraints(self, p, s, f, last):
        L = self.lengths[f]
        for a, b, g in self.groups:
            delta = p[b] - p[a]
            dist = np.sqrt(np.einsum("ij,ij->i", delta, delta))
            corr = ((L[g] - dist) / np.maximum(dist, 1e-300))[:, None] * delta
            sa, sb = s[a], s[b]
            share = (sa / (sa + sb))[:, None]                      # Eq. 11
            p[b] += share * corr
            p[a] -= (1.0 - share) * corr
        if self.pins is not None:
            pin = self.pins[f]
            held = ~np.isnan(pin[:, 0])
            p[held] = pin[held]
        if last and self.collide is not None:
            p = self.collide(p, f)
        return p

    def _step(self, p, prev, target, s, damping, f, k, iterations=None):
        force = k * (target - p)                                       # Eq. 9
        new = p + damping[:, None] * (p - prev) + 0.5 * force / self.substeps ** 2   # Eq. 10
        prev = p
        p = new
        n = iterations or self.iterations
        for i in range(n):
            p = self._constraints(p, s, f, i == n - 1)
        return p, prev

    def run(self, targets, start, affinity, progress=None):
        """Warp all frames.

        targets : (F,J,3) joint targets; start : (J,3) pose the first frame
        converges from; affinity : (F,J) in [0,1].
        Returns (F,J,3) positions.
        """
        F, J, _ = targets.shape
        out = np.empty_like(targets)
        s_all = np.maximum(affinity, C.AFFINITY_FLOOR)
        damp_all = C.DAMPING_AT_ZERO + (C.DAMPING_AT_ONE - C.DAMPING_AT_ZERO) * np.clip(affinity, 0, 1)
        tol = C.STATIC_TOLERANCE * self.body_height
        k = C.SPRING_K
        # First frame: solved statically from the given pose until it settles.
        p = np.array(start, dtype=float)
        prev = p.copy()
        for _ in range(C.STATIC_MAX_STEPS):
            before = p
            p, prev = self._step(p, prev, targets[0], s_all[0], damp_all[0], 0, k)
            if np.max(np.abs(p - before)) < tol:
                break
        out[0] = self._glue(p)
        for f in range(1, F):
            p = out[f - 1] + (targets[f] - targets[f - 1])
            prev = p.copy()
            for i in range(self.substeps):
                last = self.final_iterations if i == self.substeps - 1 else None
                p, prev = self._step(p, prev, targets[f], s_all[f], damp_all[f], f, k, last)
            out[f] = self._glue(p)
            if progress is not None and f % 64 == 0 and progress(f, F) is False:
                raise Cancelled(f"cancelled at frame {f} of {F}")
        return out

    def _glue(self, p):
        for j, parent in self.glue.tolist():
            p[j] = p[parent]
        return p
