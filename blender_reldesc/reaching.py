"""Reaching in Blender: a bound armature's hand reaches an Empty at a frame (``core.reaching``).

The job is a bake (``jobs.BakeJob``: the same reading of the binding and the edited
environment, the same keys and the same ``<action>.adapted`` action, the source never changed)
whose compute is a reach: the hand bone's head goes to the Empty (animated or not) at the frame,
out and back over the window. The database is a list of other actions of the same armature
(reaching examples): they are sampled through Blender with the bound bones, the armature's own
action put back after.
"""

import time

import bpy
import numpy as np

from . import adapter, jobs
from .adapter import SceneError
from .core.reaching import WINDOW, ReachSession
from .core.skeleton.armature import joint_layout


class ReachJob(jobs.BakeJob):
    """read (binding, environment, target, database) -> compute (reach) -> write (keys)."""

    label = "reach"
    adapts_partners = False

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
        ob = bpy.data.objects.get(self.target_name or "")
        if ob is None:
            raise SceneError(f"no object named '{self.target_name}' in the file: give the Empty to reach")
        frames = bound.frames
        if not frames[0] <= self.frame <= frames[-1]:
            raise SceneError(f"frame {self.frame} is outside the bound frames {frames[0]}-{frames[-1]}")
        self.targets = self._positions(ob, frames)
        self.database = [self._sample(name) for name in self.database_names]
        self.read_seconds += time.perf_counter() - t0

    def _positions(self, ob, frames):
        """(F,3) world positions of ``ob`` at ``frames`` (read once when it is not animated)."""
        if not adapter.is_animated(ob) and not (ob.parent and adapter.is_animated(ob.parent)):
            return np.broadcast_to(np.array(ob.matrix_world.translation, float), (len(frames), 3)).copy()
        scene, keep = self.scene, self.scene.frame_current
        out = np.empty((len(frames), 3))
        try:
            for i, f in enumerate(frames.tolist()):
                scene.frame_set(int(f))
                out[i] = ob.matrix_world.translation
        finally:
            scene.frame_set(keep)
        return out

    def _sample(self, name):
        """Joint positions (F_k,J,3) of action ``name`` played on the armature, in the bound layout."""
        action = bpy.data.actions.get(name)
        if action is None:
            raise SceneError(f"no action named '{name}' in the file: name reaching examples of '{self.arm.name}'")
        arm, scene = self.arm, self.scene
        ad = arm.animation_data
        keep_action, keep_slot, keep_frame = ad.action, ad.action_slot, scene.frame_current
        full = adapter.read_rig(arm)
        rig = self.bound.rig
        _, _, tail_joint = joint_layout(rig.names, rig.parents)
        start, end = adapter.frame_range(action)
        try:
            ad.action = action
            slot = adapter.armature_slot(arm, action)
            if slot is not None:
                ad.action_slot = slot
            joints, _, _, _ = adapter.read_source_motion(scene, arm, action, np.arange(start, end + 1), full,
                                                         rig.index[tail_joint >= 0])
        finally:
            ad.action = keep_action
            if keep_slot is not None:
                ad.action_slot = keep_slot
            scene.frame_set(keep_frame)
        B = len(full.names)
        return np.concatenate([joints[:, rig.index], joints[:, B:]], axis=1)

    def compute(self, progress=None):
        t0 = time.perf_counter()
        bound = self.bound
        session = ReachSession(bound.binding, self.mesh, self.database, affinity_override=self.overrides,
                               vertex_influence=self.influence, bone_lengths=self.bone_lengths, hinges=self.hinges)
        index = int(np.searchsorted(bound.frames, self.frame))
        self.result, self.info = session.reach(self.hand_joint, self.targets, index, self.window, progress, self.hold,
                                               first_frame=int(bound.frames[0]), body=self.whole_body)
        self.outcomes = None
        self._planned(t0)

    def write(self):
        report = super().write()
        i = self.info
        report["reach"] = dict(hand=self.hand, joint=i.hand, target=self.target_name, frame=self.frame,
                               window=[int(self.bound.frames[i.window[0]]), int(self.bound.frames[i.window[1]])],
                               hold=self.hold, whole_body=self.whole_body, distance=i.distance, reach=i.reach, hand_error=i.hand_error,
                               database=self.database_names, references=len(i.references), seconds=i.seconds)
        return report


def reach_job(scene, arm, hand, target, frame, window=WINDOW, hold=0, database=(), progress=None, warn=print,
              options=None, whole_body=True):
    """Reach and bake; returns the report dictionary (``report['reach']``: the reach's figures).
    ``whole_body``: False moves the arm alone on the bake's body (``core.reaching``)."""
    return ReachJob(scene, arm, hand, target, frame, window, hold, database, warn, options,
                    whole_body).run(progress)
