"""Skeleton: joint names and the parent of each joint.

Joints are indexed 0..J-1. ``parents[j] == -1`` marks a root. Joint j is the
head of the bone that runs from ``parents[j]`` to j, so "bone j" and "joint j"
share an index; roots have no bone.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import SkeletonError


class Skeleton:
    """Names and parents of J joints.

    Parameters
    ----------
    names : sequence of J str, unique.
    parents : (J,) int, ``-1`` for a root, otherwise the index of the parent.
        The joints need not be sorted parents-first.
    """

    def __init__(self, names, parents):
        names = [str(n) for n in names]
        parents = np.asarray(parents)
        if parents.ndim != 1 or not np.issubdtype(parents.dtype, np.integer):
            raise SkeletonError(f"parents must be a 1-D integer array, got shape {parents.shape} "
                                f"dtype {parents.dtype}")
        if len(names) != len(parents):
            raise SkeletonError(f"{len(names)} names but {len(parents)} parents: give one parent per joint")
        if len(names) == 0:
            raise SkeletonError("the skeleton has no joints")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise SkeletonError(f"joint names must be unique; repeated: {', '.join(dup)}")
        J = len(names)
        bad = np.flatnonzero((parents < -1) | (parents >= J) | (parents == np.arange(J)))
        if bad.size:
            raise SkeletonError(f"joint '{names[bad[0]]}' has parent index {parents[bad[0]]}; "
                                f"use -1 for a root or the index of another joint (0..{J - 1})")
        self.names = names
        self.parents = parents.astype(np.int64)
        self.depth, self.order = self._depth_and_order()

    def _depth_and_order(self):
        """(J,) each joint's depth (a root 0) and (J,) the joints parents first."""
        J = len(self.parents)
        depth = np.full(J, -1)
        for start in range(J):
            chain = []
            j = start
            while j != -1 and depth[j] < 0:
                if j in chain:
                    cycle = " -> ".join(self.names[k] for k in chain[chain.index(j):] + [j])
                    raise SkeletonError(f"the parents form a cycle ({cycle}): every chain must end at a root (-1)")
                chain.append(j)
                j = self.parents[j]
            base = -1 if j == -1 else depth[j]
            for k in reversed(chain):
                base += 1
                depth[k] = base
        return depth.astype(np.int64), np.argsort(depth, kind="stable")

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        return f"Skeleton({len(self)} joints, roots: {[self.names[r] for r in self.roots]})"

    def index(self, name):
        """Index of joint ``name``; raises SkeletonError naming the known joints."""
        try:
            return self.names.index(name)
        except ValueError:
            raise SkeletonError(f"no joint named '{name}' in the skeleton") from None

    @property
    def roots(self):
        return np.flatnonzero(self.parents == -1)

    @property
    def bones(self):
        """(B, 2) int: (parent, child) for every non-root joint, parents-first order."""
        child = self.order[self.parents[self.order] >= 0]
        return np.stack([self.parents[child], child], axis=1)

    def children(self, j):
        return np.flatnonzero(self.parents == j)

    def descendants(self, j):
        """Joints strictly below ``j``, parents first (a list)."""
        keep, out = {int(j)}, []
        for k in self.order.tolist():
            if int(self.parents[k]) in keep:
                keep.add(k)
                out.append(k)
        return out

    @property
    def leaves(self):
        has_child = np.zeros(len(self), bool)
        has_child[self.parents[self.parents >= 0]] = True
        return np.flatnonzero(~has_child)

    def rigidity_links(self):
        """(L, 2) int: extra links between siblings, for rigidity (paper §8).

        Every pair of children of a joint with two or more children is linked:
        the two hips and the spine under the pelvis, the shoulders and the neck
        under the chest. This keeps those triangles rigid like Jakobsen's
        extra sticks.
        """
        links = []
        for j in range(len(self)):
            kids = self.children(j)
            links.extend(itertools.combinations(kids.tolist(), 2))
        return np.asarray(links, dtype=np.int64).reshape(-1, 2)

    def bone_lengths(self, motion):
        """(F, J) float: length of bone j (parent to j) per frame; 0 for roots."""
        motion = np.asarray(motion, dtype=float)
        lengths = np.zeros(motion.shape[:2])
        child = np.flatnonzero(self.parents >= 0)
        lengths[:, child] = np.linalg.norm(motion[:, child] - motion[:, self.parents[child]], axis=-1)
        return lengths
