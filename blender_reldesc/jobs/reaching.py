"""Reaching: a bound armature's hand reaches an Empty at a frame (``core.reaching``).

The job is a bake (``BakeJob``: the same reading of the binding and the edited environment, the
same keys and the same ``<action>.adapted`` action, the source never changed) whose solve is a
reach: the hand bone's head goes to the Empty (animated or not) at the frame, out and back over
the window. The database is a list of other actions of the same armature (reaching examples):
they are played through Blender with the bound bones, the armature's own action put back after.
"""

from __future__ import annotations

import time

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core.reaching import WINDOW, ReachSession
from .bind_bake import BakeJob


class ReachJob(BakeJob):
    """read (binding, environment, target, database) -> solve (reach) -> keys -> write."""

    label = "reach"
    carries_partners = False

    def __init__(self, scene, arm, hand, target, frame, window=WINDOW, hold=0, database=(), warn=print,
                 options=None, whole_body=True):
        super().__init__(scene, arm, warn=warn, reposition_contacts=False, options=options, solver="descriptors")
        self.hand, self.target_name, self.frame = hand, target, int(frame)
        self.window, self.hold = int(window), int(hold)
        self.database_names = [n for n in database if n]
        self.whole_body = bool(whole_body)

    def read(self):
        super().read()
        t0 = time.perf_counter()
        bound = self.bound
        names = bound.rig.names
        if self.hand not in names:
            raise SceneError(f"no bone named '{self.hand}' among the bound bones of '{self.arm.name}': give the hand "
                             "bone (its head reaches the target)")
        self.hand_joint = int(bound.head_joint[names.index(self.hand)])
        ob = adapter.scene.find_object(self.target_name)
        if ob is None:
            raise SceneError(f"no object named '{self.target_name}' in the file: give the Empty to reach")
        frames = bound.frames
        if not frames[0] <= self.frame <= frames[-1]:
            raise SceneError(f"frame {self.frame} is outside the bound frames {frames[0]}-{frames[-1]}")
        # Where the character was bound (``Bound.into_bind``), as the environment.
        self.targets = bound.into_bind(adapter.empties.positions(self.scene, ob, frames)[:, None], collapse=False)
        self.targets = np.broadcast_to(self.targets, (len(frames), 1, 3))[:, 0].copy()
        self.database = [self._example(name) for name in self.database_names]
        self.read_seconds += time.perf_counter() - t0

    def _example(self, name):
        """Joint positions (F_k,J,3) of action ``name`` played on the armature, in the bound layout."""
        action = adapter.scene.find_action(name)
        if action is None:
            raise SceneError(f"no action named '{name}' in the file: name reaching examples of '{self.arm.name}'")
        rig, full = self.bound.rig, self.bound.full
        tails = rig.index[self.bound.tail_joint >= 0]
        joints = adapter.rig.play_action(self.scene, self.arm, action, full, tails)
        B = len(full.names)
        return self.bound.body_into_bind(np.concatenate([joints[:, rig.index], joints[:, B:]], axis=1))

    def solve(self, progress=None):
        bound = self.bound
        session = ReachSession(bound.binding, self.mesh, self.database, affinity_override=self.overrides,
                               vertex_influence=self.influence, bone_lengths=self.bone_lengths, hinges=self.hinges)
        index = int(np.searchsorted(bound.frames, self.frame))
        self.result, self.info = session.reach(self.hand_joint, self.targets, index, self.window, progress, self.hold,
                                               first_frame=int(bound.frames[0]), body=self.whole_body)

    def write(self):
        report = super().write()
        i = self.info
        report["reach"] = dict(hand=self.hand, joint=i.hand, target=self.target_name, frame=self.frame,
                               window=[int(self.bound.frames[i.window[0]]), int(self.bound.frames[i.window[1]])],
                               hold=self.hold, whole_body=self.whole_body, distance=i.distance, reach=i.reach,
                               hand_error=i.hand_error, database=self.database_names, references=len(i.references),
                               seconds=i.seconds)
        return report


def reach_job(scene, arm, hand, target, frame, window=WINDOW, hold=0, database=(), progress=None, warn=print,
              options=None, whole_body=True):
    """Reach and bake; returns the report dictionary (``report['reach']``: the reach's figures).
    ``whole_body``: False moves the arm alone on the bake's body (``core.reaching``)."""
    return ReachJob(scene, arm, hand, target, frame, window, hold, database, warn, options,
                    whole_body).run(progress)
