"""Locomotion: walk an armature's locomotion action along path curves over a terrain collection,
one character per path (``core.locomotion``: carpet unrolling, footstep relaxation, crowds).

``WalkJob`` has the three phases of the other jobs: ``read`` (Blender data), ``compute``
(core only: safe in a worker thread) and ``write``. Writing creates one character per path —
a linked duplicate of the armature (its armature data shared) with linked duplicates of the
meshes it deforms — in a collection ``<armature> walk``, each with its own action
``<source action>.walk.NNN``. The armature and its action are never changed. Walking again
replaces the characters and actions a previous walk of the same armature made (an action
something else also uses is kept, and the new one numbered).
"""

from __future__ import annotations

import time

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import Cancelled, TriMesh
from ..core.locomotion import bind_carpet, lateral_paths, walk
from ..core.skeleton.armature import (adapted_pose, axis_angle_from_quat, basis_from_pose, euler_from_quat,
                                     joint_layout, split_basis)

#: The part of a walk job's progress that is the walk; the rest is its characters' keys.
WALK_SHARE = 0.65
#: Steps of a walk job's progress (``progress(done, PROGRESS_STEPS)``).
PROGRESS_STEPS = 1000
#: Fraction of the gait cycle between neighbours of a crowd (the golden ratio's: never in step).
CROWD_STAGGER = 0.618034


class WalkJob:
    """Walk ``arm``'s action along paths over the meshes of collection ``terrain``.

    path : a curve object's name, walked by ``crowd`` characters ``spacing`` apart across it;
    paths : or a collection's name, one character per curve in it (by name).
    """

    label = "walk"

    def __init__(self, scene, arm, terrain, path=None, paths=None, crowd=1, spacing=1.0, warn=print, workers=1):
        self.scene, self.arm, self.terrain, self.workers = scene, arm, terrain, workers
        self.path, self.paths, self.crowd, self.spacing, self.warn = path, paths, crowd, spacing, warn

    def read(self):
        t0 = time.perf_counter()
        scene, arm = self.scene, self.arm
        if int(self.crowd) < 1:
            raise SceneError(f"the crowd count is {self.crowd}: walk at least one character")
        if not np.isfinite(self.spacing) or self.spacing < 0:
            raise SceneError(f"the crowd spacing must be a distance >= 0, got {self.spacing}")
        names, lines = adapter.paths.read_paths(self.path, self.paths)
        if self.paths:
            self.polylines, self.path_names = lines, names
        else:
            self.polylines = lateral_paths(lines[0], int(self.crowd), float(self.spacing))
            self.path_names = names * len(self.polylines)
        objects, ignored = adapter.mesh.environment_objects(self.terrain)
        if ignored:
            self.warn(f"ignored non-mesh objects in '{self.terrain}': {', '.join(ignored)}")
        verts, tris, _ = adapter.mesh.read_environment(None, objects)
        self.mesh = TriMesh(verts, tris)
        self.action = adapter.actions.source_action(arm)
        start, end = adapter.actions.frame_range(self.action)
        self.frames = np.arange(start, end + 1)
        self.rig = rig = adapter.rig.read_rig(arm)
        self.skeleton, self.head_joint, tail_joint = joint_layout(rig.names, rig.parents)
        self.joints, self.pose, self.world, _ = adapter.rig.read_source_motion(
            scene, arm, self.action, self.frames, rig, rig.index[tail_joint >= 0])
        self.matrix = adapter.placement.world_matrix(arm)
        self.read_seconds = time.perf_counter() - t0

    def compute(self, progress=None):
        """The walk, then each character's keys. ``progress(done, total)`` hears of both, the walk
        as the first ``WALK_SHARE`` of the way (a 100-character crowd's keys take about a third
        of the time); returning False cancels (``Cancelled``) before anything is written."""
        t0 = time.perf_counter()
        self.carpet = carpet = bind_carpet(self.skeleton, self.joints)
        C = len(self.polylines)
        offsets = (np.arange(C) * CROWD_STAGGER % 1.0) * carpet.period if C > 1 else None

        def report(fraction):
            """Tell ``progress`` how far the job is; False when it asks to cancel."""
            return progress is None or progress(round(PROGRESS_STEPS * fraction), PROGRESS_STEPS) is not False

        walking = None if progress is None else (lambda done, total: report(WALK_SHARE * done / max(total, 1)))
        self.result = walk(carpet, self.polylines, self.mesh, offsets, progress=walking, workers=self.workers)
        for w in self.result.warnings:
            self.warn(w)
        self.keys = []
        for c in range(C):
            if not report(WALK_SHARE + (1.0 - WALK_SHARE) * c / C):
                raise Cancelled(f"cancelled while keying character {c + 1} of {C}")
            self.keys.append(self._channels(c))
        report(1.0)
        self.compute_seconds = time.perf_counter() - t0

    def _source_frames(self, played):
        """Index into the source frames of each played-clip frame (the cycle repeated)."""
        a, b = self.carpet.cycle
        return np.where(played < a, np.minimum(played, len(self.frames) - 1), a + (played - a) % (b - a))

    def _channels(self, c):
        """(bone, property, values (F,k)) keys of character c: each bone turned from its source
        pose at the played frame onto the walk (twist kept), in its own rotation mode."""
        rig = self.rig
        src = self._source_frames(self.result.clip_frames[c])
        inv = np.linalg.inv(self.world[src])
        original = np.einsum("fij,fkj->fki", inv[:, :3, :3], self.joints[src]) + inv[:, None, :3, 3]
        minv = np.linalg.inv(self.matrix)
        adapted = self.result.positions[c] @ minv[:3, :3].T + minv[:3, 3]
        pose = adapted_pose(self.skeleton, self.head_joint, original, adapted, self.pose[src])
        quats, locs = split_basis(basis_from_pose(rig.rest, rig.parents, pose))    # sign-continuous
        out = []
        for b, mode in enumerate(rig.rotation_modes):
            if mode == 'QUATERNION':
                out.append((b, "rotation_quaternion", quats[:, b]))
            elif mode == 'AXIS_ANGLE':
                out.append((b, "rotation_axis_angle", axis_angle_from_quat(quats[:, b:b + 1])[:, 0]))
            else:
                out.append((b, "rotation_euler", euler_from_quat(quats[:, b:b + 1], mode)[:, 0]))
            if rig.parents[b] < 0 or not rig.connected[b]:
                out.append((b, "location", locs[:, b]))
        return out

    def write(self):
        t0 = time.perf_counter()
        arm = self.arm
        F = self.result.positions.shape[1]
        frames = np.arange(self.frames[0], self.frames[0] + F)
        names, actions = adapter.characters.write_walk_characters(
            self.scene, arm, frames, self.keys, self.rig,
            [f"{self.action.name}.walk.{c:03d}" for c in range(len(self.keys))])
        r = self.result
        held = ~np.isnan(r.pins[..., 0])
        walked = [int(n) for n in r.path_frames]
        return dict(armature=arm.name, source=self.action.name, characters=names, actions=actions,
                    paths=self.path_names, frames=int(F), frame_start=int(frames[0]), frame_end=int(frames[-1]),
                    path_frames=walked, stands_from=[int(frames[0]) + n - 1 for n in walked],
                    joints=int(len(self.skeleton)), cycle=list(self.carpet.cycle), speed=float(self.carpet.speed),
                    stance_fraction=float(held.any(axis=2).mean()), warnings=list(r.warnings),
                    bone_length_error_mean=float(r.bone_error.mean()), bone_length_error_max=float(r.bone_error.max()),
                    read_seconds=self.read_seconds, compute_seconds=self.compute_seconds,
                    write_seconds=time.perf_counter() - t0, seconds=dict(r.seconds))

    def run(self, progress=None):
        self.read()
        self.compute(progress)
        return self.write()


def walk_job(scene, arm, terrain, path=None, paths=None, crowd=1, spacing=1.0, progress=None, warn=print, workers=1):
    """Walk and write; returns the report dictionary. ``workers``: see ``core.locomotion.walk``
    (the command line's ``--workers``; the viewport's job walks in Blender's own process)."""
    return WalkJob(scene, arm, terrain, path, paths, crowd, spacing, warn, workers).run(progress)
