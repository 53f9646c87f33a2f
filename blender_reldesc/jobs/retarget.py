"""Retarget: a clip recorded on one armature onto another, in the scene, contacts kept
(``core.retarget``).

read (main thread: the source armature's action as it plays, both rests, the environment when
one is given, the bone map) -> compute (worker thread: ``core.retarget``, then the keys, planned
as a bake plans them) -> write (main thread: a new action ``<source action>.retarget`` on the
target, assigned or on an NLA track). The source armature and its action are never changed; the
target's own actions stay. Everything is checked before anything is written.

The bone map comes from a preset (``core.retarget.PRESETS``) or the rigs' structure ("auto"), a
JSON file (``BoneMap.to_json``), or rows given here (the panel's, edited by the animator).
"""

from __future__ import annotations

import functools
import os
import time
from types import SimpleNamespace

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import InputError, TriMesh
from ..core import retarget as core_retarget
from ..core.skeleton.armature import adapted_pose, affine_inverse, joint_layout, polar
from ..core.skeleton.rotations import swing
from . import keys
from .bound import Bound, carried

#: The suffix of the action a retarget writes on the target.
RETARGET_SUFFIX = ".retarget"
#: The map choices besides the presets: found from names and structure, or from a JSON file.
MAP_CHOICES = ("auto", "structure") + tuple(core_retarget.PRESETS)


def _rotation(m):
    """(...,3,3) the rotation part of matrices (...,4,4) (their scale removed)."""
    return polar(np.asarray(m, float)[..., :3, :3])[0]


def _joints_rest(rig):
    """(J,3) rest joints of ``rig`` in armature space (heads, then the leaves' tails)."""
    skeleton, head, tail = joint_layout(rig.names, rig.parents)
    return skeleton, head, tail, np.concatenate([rig.rest[:, :3, 3], rig.tails[tail >= 0]])


class _RetargetBound(Bound):
    """What ``keys.plan_keys`` reads of a bound character, for the target of a retarget: its
    bones, its placement, and the transferred motion with the bones' turns the adapted joints are
    reached from (a ``Bound`` without a stored binding)."""

    def __init__(self, arm, rig, skeleton, head_joint, tail_joint, frames, placement, outer_pose, transferred,
                 turns):
        self.arm, self.rig, self.frames = arm, rig, frames
        self.head_joint, self.tail_joint = head_joint, tail_joint
        self.binding = SimpleNamespace(skeleton=skeleton)
        self.placement = placement
        self.carry = None
        self.frame_to_armature = affine_inverse(placement)
        self.outer_pose = outer_pose
        self.keyed_locations = self.location_mask()
        self._transferred, self._turns = transferred, turns

    def adapted_pose(self, positions, frames=None):
        idx = slice(None) if frames is None else frames
        to_arm = self.frame_to_armature[idx]
        original = carried(to_arm, self._transferred[idx])
        adapted = carried(to_arm, positions)
        r = _rotation(affine_inverse(to_arm))                              # armature -> world rotation
        turn = np.swapaxes(r, -1, -2)[:, None] @ self._turns[idx][:, self.head_joint] @ r[:, None]
        rot = turn @ self.rig.rest[None, :, :3, :3]
        # Each bone along the transferred motion's bone: its Y axis onto its tail's joint (its
        # connected child's head, or its own tail), as the adapted pose is reached from there.
        tip = self._tip_joint
        has = tip >= 0
        if has.any():
            heads = original[:, self.head_joint[has]]
            rot[:, has] = swing(rot[:, has][..., :, 1], original[:, tip[has]] - heads) @ rot[:, has]
        pose = np.tile(np.eye(4), original.shape[:1] + (len(self.rig.names), 1, 1))
        pose[..., :3, :3] = rot
        pose[..., :3, 3] = original[:, self.head_joint]
        return adapted_pose(self.binding.skeleton, self.head_joint, original, adapted, pose, self._primary)

    @functools.cached_property
    def _tip_joint(self):
        """(B,) the joint each bone's tail sits on: its connected child's head, its own tail for a
        leaf, -1 for neither."""
        out = np.where(self.tail_joint >= 0, self.tail_joint, -1)
        primary = self._primary[:len(self.rig.names)]
        return np.where(primary >= 0, self.head_joint[np.maximum(primary, 0)], out)


def read_map(choice, rows=None):
    """``(preset or None, BoneMap or None)`` for a map choice: "auto", "structure", a preset's
    name, or a path to a JSON file; ``rows`` ({target: source}) given by the panel win."""
    if rows:
        return None, core_retarget.BoneMap(dict(rows), "panel", "panel")
    choice = (choice or "auto").strip()
    if choice.lower() in MAP_CHOICES:
        return (None if choice.lower() == "auto" else choice.lower()), None
    if choice.lower().endswith(".json") or os.path.sep in choice or "/" in choice:
        if not os.path.isfile(choice):
            raise SceneError(f"no bone map file {choice}: give a JSON map (Save Map writes one) or a preset "
                             f"({', '.join(MAP_CHOICES)})")
        with open(choice, encoding="utf-8") as fh:
            return None, core_retarget.BoneMap.from_json(fh.read())
    raise SceneError(f"unknown bone map '{choice}': use {', '.join(MAP_CHOICES)}, or a .json map file")


class RetargetJob:
    """Retarget ``source``'s action onto ``target`` (armature objects); see the module docstring.

    bone_map : "auto", "structure", a preset's name or a JSON file's path; rows : {target bone:
    source bone} (the panel's, which win over ``bone_map``); environment : a collection's name or
    None (a floor under the source's feet); options : ``keys.BakeOptions`` or a dict of changes to
    the panel's bake options (frames are the source action's); bone_set : the target's bones that
    are keyed (as Bind's).
    """

    label = "retarget"

    def __init__(self, scene, source, target, bone_map="auto", environment=None, options=None, warn=print,
                 rows=None, bone_set="DEFORM", stride="auto"):
        self.scene, self.source_arm, self.arm = scene, source, target
        self.map_choice, self.rows, self.environment = bone_map, rows, environment or None
        self.options = options if options is not None else keys.BakeOptions()
        self.warn, self.bone_set, self.stride = warn, bone_set or "DEFORM", stride

    # --- read ----------------------------------------------------------------------------

    def read(self):
        t0 = time.perf_counter()
        src, tgt = self.source_arm, self.arm
        if src == tgt:
            raise SceneError(f"'{src.name}' is both the source and the target: pick the armature whose motion to "
                             "take (Source) and the one to put it on (Target)")
        self.action = adapter.actions.source_action(src)
        start, end = adapter.frame_range(self.action)
        # Only the frames to bake are read and retargeted (a 300-frame range of a 4000-frame
        # capture takes a thirteenth of the time); the bake options are checked against the action.
        self.options, _ = keys.checked_options(self.options, adapter.scene.settings(self.scene),
                                               np.arange(start, end + 1))
        self.frames = np.arange(self.options.frames[0], self.options.frames[1] + 1)
        # The source: its deform bones as its action plays them, in the world.
        full, rig = adapter.rig.read_bone_set(src, "DEFORM")
        self.source_skeleton, s_head, s_tail, s_rest = _joints_rest(rig)
        joints, pose, world, _ = adapter.read_source_motion(self.scene, src, self.action, self.frames, full,
                                                            rig.index[s_tail >= 0])
        B = len(full.names)
        self.source_motion = np.concatenate([joints[:, rig.index], joints[:, B:]], axis=1)
        self.source_rest = carried(world[:1], s_rest[None])[0]
        # Each source bone's turn from its rest, in the world (twist included).
        r_world = _rotation(world)                                          # (F,3,3)
        bone_rot = _rotation(pose[:, rig.index])                           # (F,B,3,3) armature space
        turn_arm = bone_rot @ np.swapaxes(rig.rest[None, :, :3, :3], -1, -2)
        turns = r_world[:, None] @ turn_arm @ np.swapaxes(r_world, -1, -2)[:, None]
        J = len(self.source_skeleton)
        self.source_turns = np.tile(np.eye(3), (len(self.frames), J, 1, 1))
        self.source_turns[:, s_head] = turns
        leaves = np.flatnonzero(s_tail >= 0)
        self.source_turns[:, s_tail[leaves]] = turns[:, leaves]
        # The target: its rest where it stands now (the keys are written for this placement).
        t_full, t_rig = adapter.rig.read_bone_set(tgt, self.bone_set)
        self.rig = t_rig
        self.target_skeleton, self.head_joint, self.tail_joint, t_rest = _joints_rest(t_rig)
        placement = np.asarray(adapter.world_matrix(tgt), float)
        self.placement = np.broadcast_to(placement, (len(self.frames), 4, 4)).copy()
        self.target_rest = carried(placement[None], t_rest[None])[0]
        # Bones of the target outside the keyed set that a keyed bone hangs from, as they are now.
        O = len(t_rig.outer_names)
        anchors = [t_rig.anchors[n] for n in t_rig.outer_names]
        now = adapter.rig.posed_matrices(tgt, list(t_rig.outer_names) + [t_rig.names[a] for a in anchors if a >= 0]) \
            if O else np.zeros((0, 4, 4))
        outer = now[:O].copy()
        held = np.array([a >= 0 for a in anchors], bool)
        outer[held] = affine_inverse(now[O:]) @ outer[held]
        self.outer_pose = np.broadcast_to(outer, (len(self.frames),) + outer.shape).copy()
        # The environment, when one is given.
        self.mesh = None
        if self.environment:
            objects, ignored, _ = adapter.mesh.surfaces(self.environment)
            if ignored:
                self.warn(f"ignored objects without geometry in '{self.environment}': {', '.join(ignored)}")
            if not objects:
                raise SceneError(f"nothing in '{self.environment}' has faces: put the surfaces the source moves on "
                                 "in it, or leave Environment empty for a floor under its feet")
            verts, tris, _, _ = adapter.mesh.read_environment_now(self.scene, objects, self.frames)
            self.mesh = TriMesh(verts, tris)
        self.preset, self.bone_map = read_map(self.map_choice, self.rows)
        self.baked = np.ones(len(self.frames), bool)
        start = self.options.frames[0]
        self.fps = self.scene.render.fps / self.scene.render.fps_base
        # Every name the map gives must exist, and the map be checked, before the compute.
        try:
            if self.bone_map is None:
                self.bone_map = core_retarget.map_bones(
                    self.source_skeleton, core_retarget.reference_pose(self.source_skeleton, self.source_rest,
                                                                       self.source_motion)[0],
                    self.target_skeleton, self.target_rest, source_preset=self.preset, target_preset=self.preset,
                    source_name=f"'{src.name}'", target_name=f"'{tgt.name}'")
            self.bone_map.check(self.source_skeleton, self.target_skeleton)
            # Hips hanging connected from a root bone's tail keep their distance to it: the root
            # cannot stay on the floor under them.
            hips = core_retarget.find_roles(self.target_skeleton, self.target_rest,
                                            name=f"'{tgt.name}'")[0]["hips"]
            self.root_on_floor = not (t_rig.parents[hips] >= 0 and t_rig.connected[hips])
        except InputError as e:
            raise SceneError(str(e)) from None
        self.target_bypass = adapter.constraint_bypass_curves(tgt, t_rig.names, int(start))
        self.read_seconds = time.perf_counter() - t0

    # --- compute -------------------------------------------------------------------------

    def compute(self, progress=None):
        t0 = time.perf_counter()
        try:
            self.result = core_retarget.retarget(
                self.source_skeleton, self.source_rest, self.source_motion, self.target_skeleton, self.target_rest,
                self.mesh, self.bone_map, stride=self.stride, source_turns=self.source_turns, fps=self.fps,
                root_on_floor=self.root_on_floor,
                progress=progress, source_name=f"'{self.source_arm.name}'", target_name=f"'{self.arm.name}'")
        except InputError as e:
            raise SceneError(str(e)) from None
        self.adapt_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.bound = _RetargetBound(self.arm, self.rig, self.target_skeleton, self.head_joint, self.tail_joint,
                                    self.frames, self.placement, self.outer_pose, self.result.transferred,
                                    self.result.turns)
        self.plan = keys.plan_keys(self.bound, self.result.positions, self.baked, keys.channels(self.bound), {},
                                   self.options)
        self.measures = core_retarget.measure(
            self.source_skeleton, self.source_rest, self.source_motion, self.target_skeleton, self.target_rest,
            self.result.positions, self.result.bone_map, fps=self.fps,
            ground=self.mesh, ground_now=self.mesh)
        self.keys_seconds = time.perf_counter() - t1

    # --- write ---------------------------------------------------------------------------

    def write(self):
        t0 = time.perf_counter()
        opt = self.options
        wanted = self.action.name + RETARGET_SUFFIX
        bypass, bypassed = self.target_bypass
        action, slot = adapter.actions.write_new(self.arm, wanted, self.plan["curves"] + bypass, opt.frames,
                                                 opt.target)
        if action.name != wanted:
            self.warn(f"kept '{wanted}' because something else uses it (another object, an NLA strip or a fake "
                      f"user); wrote '{action.name}'")
        if bypassed:
            self.warn(f"the constraints of {len(bypassed)} keyed bone(s) of '{self.arm.name}' are off in "
                      f"'{action.name}' (their influence is keyed to 0): assign another action to switch back")
        m = self.bone_map_report()
        write_seconds = time.perf_counter() - t0
        return dict(action=action.name, source=self.action.name, source_armature=self.source_arm.name,
                    target_armature=self.arm.name, frames=int(len(self.frames)),
                    environment=self.environment, floor="generated" if self.mesh is None else "environment",
                    stride=float(self.result.stride), bone_map=m,
                    bone_length_error_mean=float(self.result.adapted.bone_length_error.mean()),
                    bone_length_error_max=float(self.result.adapted.bone_length_error.max()),
                    read_seconds=self.read_seconds, adapt_seconds=self.adapt_seconds, keys_seconds=self.keys_seconds,
                    write_seconds=write_seconds, constraints_bypassed=bypassed,
                    bake=dict(frame_start=opt.frames[0], frame_end=opt.frames[1], step=opt.step, clean=opt.clean,
                              interpolation=opt.interpolation, target=opt.target.lower()),
                    keys=dict(written=self.plan["keys"], curves=len(self.plan["curves"]),
                              max_deviation=self.plan["deviation"]),
                    **{k: self.measures[k] for k in ("pose_similarity", "planted_within", "stance_slide",
                                                     "source_stance_slide", "stance_samples")})

    def write_naive(self, name=None):
        """After ``compute``: the naive retarget (``core.retarget.naive``: turns copied, hips scaled
        by the legs' ratio) as another new action on the target, ``<source action>.naive`` (for
        comparison: the demo's picture, the benchmark). Returns ``(action, positions (F,J,3))``."""
        naive = core_retarget.naive(self.source_skeleton, self.source_rest, self.source_motion,
                                    self.target_skeleton, self.target_rest, self.result.bone_map, self.source_turns)
        plan = keys.plan_keys(self.bound, naive, self.baked, keys.channels(self.bound), {}, self.options)
        bypass, _ = self.target_bypass
        action, _ = adapter.actions.write_new(self.arm, name or self.action.name + ".naive",
                                              plan["curves"] + bypass, self.options.frames, "ACTION")
        return action, naive

    def bone_map_report(self):
        bm = self.result.bone_map
        # Bones, not joints: a leaf bone's tail is a joint of the skeleton the core solves.
        names = set(self.rig.names)
        bones = {t: s for t, s in bm.bones.items() if t in names}
        return dict(source=bm.source, target=bm.target, mapped=len(bones), target_bones=len(self.rig.names),
                    bones=dict(sorted(bones.items())))

    def run(self, progress=None):
        from .base import print_progress
        self.read()
        self.compute(progress or print_progress(self.label))
        return self.write()


def retarget_job(scene, source, target, bone_map="auto", environment=None, options=None, progress=None, warn=print,
                 rows=None, bone_set="DEFORM"):
    """Retarget and write ``<source action>.retarget`` on ``target``; returns the report."""
    return RetargetJob(scene, source, target, bone_map, environment, options, warn, rows, bone_set).run(progress)


def find_map(scene, source, target, bone_map="auto", bone_set="DEFORM"):
    """The ``BoneMap`` a retarget would use (for the panel's rows and Save Map): read only."""
    job = RetargetJob(scene, source, target, bone_map, bone_set=bone_set)
    job.read()
    return job.bone_map
