"""Bind and bake: the jobs shared by the operators, the live preview, the command line and batches.

Each job checks everything first, then changes anything (a failed job leaves the file as it
was), and returns a report dictionary with counts and timings. A bake is assembled from stages:
read (the binding, the environment, the controls; main thread) -> compute (solve, then plan
the keys; worker thread) -> write (the adapted action; main thread). What a binding carries
besides its character (partners, garments) plugs in as a *stage* with the same phases:
``stages.stages`` returns the ones a read binding asks for, so the bake never imports those
features.
"""

from __future__ import annotations

import time

import numpy as np

from .. import adapter
from ..adapter import SceneError
from ..core import TriMesh, bind
from ..core.skeleton.armature import affine_inverse, joint_layout, polar
from ..core.skeleton.rotations import quat_from_matrix
from ..core.solvers.interaction_mesh import check_solver
from . import contacts, controls, keys
from .base import _save_npz, print_progress
from .bound import Bound, part_placement, placement_probe, rest_lengths
from .stages import stages

ADAPTED_SUFFIX = ".adapted"


class BindJob:
    """Bind ``arm``'s current action to the meshes of collection ``environment``.

    ``read`` (Blender data), ``compute`` (core only: safe in a worker thread)
    and ``write`` (stores the binding on the armature) run in that order;
    ``run`` does all three.
    """

    label = "bind"

    def __init__(self, scene, arm, environment, body_height=0.0, radius_factor=0.5, warn=print, bone_set="DEFORM"):
        self.scene, self.arm, self.environment = scene, arm, environment
        self.body_height, self.radius_factor, self.warn = body_height, radius_factor, warn
        self.bone_set = bone_set or "DEFORM"
        #: the armatures bound with this one as partners (``partners.PartnersBindJob``)
        self.partners = []
        #: its capsule radii per joint (None: a share of the bone's length), measured at bind
        self.capsule_radii = None

    def read(self):
        t0 = time.perf_counter()
        self.action = adapter.actions.source_action(self.arm)
        # Parts with no faces (a curve without bevel or extrusion) have no surface to describe.
        self.objects, ignored, self.no_surface = adapter.mesh.surfaces(self.environment)
        if ignored:
            self.warn(f"ignored objects without geometry in '{self.environment}': {', '.join(ignored)}")
        if self.no_surface:
            self.warn(f"ignored objects without faces in '{self.environment}' (give a curve a bevel or extrusion "
                      f"to make it a surface): {', '.join(self.no_surface)}")
        if not self.objects:
            raise SceneError(f"nothing in '{self.environment}' has faces: put the environment's surfaces in it")
        full, self.rig = adapter.rig.read_bone_set(self.arm, self.bone_set)
        rig = self.rig
        start, end = adapter.frame_range(self.action)
        self.frames = np.arange(start, end + 1)
        self.skeleton, _, tail_joint = joint_layout(rig.names, rig.parents)
        joints, pose, self.world, self.motion_path = adapter.read_source_motion(
            self.scene, self.arm, self.action, self.frames, full, rig.index[tail_joint >= 0])
        B = len(full.names)
        self.joints = np.concatenate([joints[:, rig.index], joints[:, B:]], axis=1)
        rot, stretch = polar(pose[:, rig.index, :3, :3])
        self.rotations = quat_from_matrix(rot)
        # Scale (keyed, inherited or from constraints) is kept beside the rotation, when there is any.
        self.stretch = None if np.abs(stretch - np.eye(3)).max() < 1e-6 else stretch
        # Outside parents: relative to their anchor (the set bone above them) or, without one, as played.
        self.outer_pose = np.empty((len(self.frames), len(rig.outer_names), 4, 4))
        for i, name in enumerate(rig.outer_names):
            o, a = full.names.index(name), rig.anchors[name]
            self.outer_pose[:, i] = pose[:, o] if a < 0 else affine_inverse(pose[:, rig.index[a]]) @ pose[:, o]
        verts, tris, self.counts, self.animated = adapter.mesh.read_environment_now(self.scene, self.objects,
                                                                                    self.frames)
        self.part_matrices = adapter.mesh.part_matrices(self.objects)
        self.mesh = TriMesh(verts, tris)
        self.read_seconds = time.perf_counter() - t0

    def compute(self, progress=None):
        t0 = time.perf_counter()
        self.binding = bind(self.skeleton, self.joints, self.mesh, self.body_height or None,
                            radius_factor=self.radius_factor, progress=progress)
        self.compute_seconds = time.perf_counter() - t0

    def write(self):
        binding, mesh = self.binding, self.mesh
        meta = dict(action=self.action.name, environment=self.environment,
                    objects=[ob.name for ob in self.objects],
                    vertex_counts=[c[0] for c in self.counts], triangle_counts=[c[1] for c in self.counts],
                    frame_start=int(self.frames[0]), frame_end=int(self.frames[-1]), animated=bool(self.animated),
                    descriptors=int(binding.descriptor_count), joints=len(self.skeleton),
                    body_height=float(binding.body_height), radius_factor=float(self.radius_factor),
                    degenerate=int(mesh.degenerate_count), motion_read=self.motion_path,
                    bone_set=self.bone_set, bones=len(self.rig.names), partners=list(self.partners),
                    no_surface=list(self.no_surface), **part_placement(self.part_matrices),
                    **placement_probe(self.world, self.joints))
        if self.capsule_radii is not None:
            # -1 where unknown (ID properties hold no None or NaN)
            meta["capsule_radii"] = [float(r) if np.isfinite(r) else -1.0 for r in self.capsule_radii]
        extra = {} if self.stretch is None else {"stretch": self.stretch}
        pose = _save_npz(rotations=self.rotations, world=self.world, bones=np.asarray(self.rig.names, dtype=str),
                         rest_lengths=rest_lengths(self.rig), outer_pose=self.outer_pose,
                         outer=np.asarray(self.rig.outer_names, dtype=str), **extra)
        adapter.bound.store_binding(self.arm, binding.to_bytes(), pose, meta, self.action,
                                    adapter.scene.find_collection(self.environment))
        return dict(meta, frames=len(self.frames), read_seconds=self.read_seconds,
                    compute_seconds=self.compute_seconds)

    def run(self, progress=None):
        self.read()
        self.compute(progress or print_progress(self.label))
        return self.write()


def bind_job(scene, arm, environment, body_height=0.0, radius_factor=0.5, progress=None, warn=print,
             bone_set="DEFORM"):
    """Bind and store; returns the report dictionary.

    bone_set : the bones that get descriptors and keys: 'DEFORM' (default), 'ALL',
    or the name of a bone collection (see ``adapter.bone_set_indices``).
    """
    return BindJob(scene, arm, environment, body_height, radius_factor, warn, bone_set).run(progress)


class BakeJob:
    """Adapt the bound motion to the environment as it is now; write ``<source>.adapted``.

    Same three phases as ``BindJob``. The source action is never modified; a
    previous ``<source>.adapted`` is replaced only when nothing else uses it.
    The adapted action is a copy of the source (its scale, custom-property and
    object channels, handles and modifiers whole, other slots dropped) whose
    bound bones' rotation and location channels are rewritten where the
    adaptation changed them; channels it left unchanged keep the source's curve.

    options : ``BakeOptions`` (default: every bound frame, linear keys on every frame, assigned),
    or a dict of changes to the panel's bake options (the operator's).

    A job that adapts otherwise (a reach, a transfer) overrides ``solve``, and ``read`` and
    ``write`` around the bake's own.

    Stages (``stages.stages``): objects with ``compute(job, progress)`` (after the keys are planned)
    and ``write(job, report)`` (after the adapted action is written); a stage that adapts the
    character together with others (partners) also has ``solve(job, progress)`` and
    ``jobs`` (the group, this job first), and replaces this job's own ``solve``.
    """

    label = "bake"
    #: whether a binding's partners are adapted with it (a reach or a transfer adapts it alone)
    carries_partners = True

    def __init__(self, scene, arm, influence_group=None, warn=print, reposition_contacts=None, contacts=None,
                 options=None, solver_options=None, solver=None):
        self.scene, self.arm, self.influence_group, self.warn = scene, arm, influence_group, warn
        self.name = arm.name                   # for messages from the compute, which must not touch arm
        self.solver_options = solver_options
        self.solver = None if solver is None else check_solver(solver)
        self.contact_overrides = contacts
        self.reposition_contacts = reposition_contacts
        self.options = options if options is not None else keys.BakeOptions()
        #: a partner of a group being baked: its partners are that group, not read again
        self.in_group = False
        #: the ``Bound`` whose frame this adaptation works in (None: its own; ``Bound.use_carry``)
        self.carry_from = None
        self.stages = []
        self.outcomes, self.rows, self.contact_counts = None, [], {"valid": 0, "repositioned": 0, "unresolved": 0}
        self.root_windows = []

    def read(self):
        t0 = time.perf_counter()
        settings = adapter.scene.settings(self.scene)
        if self.solver is None:
            self.solver = check_solver(str(settings.solver).lower())
        if self.reposition_contacts is None:
            self.reposition_contacts = bool(settings.reposition_contacts)
        group = settings.influence_group if self.influence_group is None else self.influence_group
        self.bound = bound = Bound(self.arm, self.scene)
        if self.carry_from is not None:                 # a partner: adapted in its group's frame
            bound.use_carry(self.carry_from.carry)
        self.source = bound.source
        if bound.placement_note:
            self.warn(bound.placement_note)
        if self.source is None:
            raise SceneError(f"the source action '{bound.meta['action']}' is gone: re-bind with the motion "
                             "to adapt")
        self.mesh, self.influence, self.overrides, self.hinges = controls.read_environment(
            self.scene, bound, group, self.warn)
        self.bone_lengths, self.changed_bones = bound.new_lengths, bound.changed_bones
        self.flags, self.contact_settings = contacts.prepare(settings, bound, self.contact_overrides)
        self.options, self.baked, self.channels, wanted = keys.prepare(self.options, settings, bound)
        self.source_values = adapter.actions.sample_source(self.arm, self.source, wanted, bound.frames[self.baked])
        # Checked before anything is written: a bake that cannot carry its partners or garments writes nothing.
        self.stages = stages(self)
        self.read_seconds = time.perf_counter() - t0

    def solve(self, progress=None):
        """Adapt this character alone (contacts checked): sets ``result``, ``outcomes`` and the
        contact ``rows`` and ``contact_counts``."""
        options = dict(affinity_override=self.overrides, vertex_influence=self.influence, progress=progress,
                       bone_lengths=self.bone_lengths, hinges=self.hinges, solver_options=self.solver_options,
                       solver=self.solver)
        self.result, self.outcomes, self.rows, self.contact_counts, self.root_windows = contacts.adapt_checked(
            self.bound, self.mesh, self.flags, self.reposition_contacts, self.contact_settings, self.warn, **options)
        self.warn_unbound()

    def compute(self, progress=None):
        t0 = time.perf_counter()
        together = next((s for s in self.stages if hasattr(s, "solve")), None)
        if together is None:
            self.solve(progress)
            group = [self]
        else:
            together.solve(self, progress)
            group = together.jobs
        for job in group:
            job.adapt_seconds = time.perf_counter() - t0
            job.plan_keys()
        for stage in self.stages:
            stage.compute(self, progress)

    def warn_unbound(self):
        if self.result.unbound_joints:
            self.warn("no surface near " + ", ".join(f"{n} ({k} frames)" for n, k in
                                                     self.result.unbound_joints.items())
                      + ": those joints followed the body rigidly; add the surfaces they touch to the "
                        "environment or raise the sampling radius, then re-bind")

    def plan_keys(self):
        """Plan the keys of the adapted motion (``keys.plan_keys``; timed)."""
        t0 = time.perf_counter()
        self.plan = keys.plan_keys(self.bound, self.result.positions, self.baked, self.channels, self.source_values,
                                   self.options)
        self.keys_seconds = time.perf_counter() - t0

    def write(self):
        report = self.write_keys()
        for stage in self.stages:
            stage.write(self, report)
        return report

    def write_keys(self):
        """Write the planned keys as the adapted action (and the contact rows); the report."""
        t0 = time.perf_counter()
        bound, opt, plan = self.bound, self.options, self.plan
        wanted = self.source.name + ADAPTED_SUFFIX
        action, slot, bypassed, restore = adapter.actions.write_bake(self.arm, self.source, wanted, plan["curves"],
                                                                     bound.rig.names, opt.frames, opt.target,
                                                                     bound.restore)
        if action.name != wanted:
            self.warn(f"kept '{wanted}' because something else uses it (another object, an NLA strip or a "
                      f"fake user); wrote '{action.name}'")
        self._follow_outer_parents(action, slot)
        if bypassed:
            self.warn(f"the constraints of {len(bypassed)} bound bone(s) are off in '{action.name}' (their "
                      "influence is keyed to 0, as Bake Action's Clear Constraints, without removing them): "
                      "use 'Use Source Action' to switch back with the constraints on")
        adapter.storage.store_bake(self.arm, restore, self.rows if self.outcomes is not None else None)
        write_seconds = time.perf_counter() - t0
        err, res = self.result.bone_length_error, self.result.target_residual
        worst = np.argsort(-err)[:5]
        return dict(contacts=self.rows, contact_counts=self.contact_counts, root_windows=self.root_windows,
            solver=self.solver,
            action=action.name, source=self.source.name, frames=int(len(bound.frames)),
            joints=int(len(bound.binding.skeleton)), descriptors=int(bound.binding.descriptor_count),
            read_seconds=self.read_seconds, adapt_seconds=self.adapt_seconds, write_seconds=write_seconds,
            keys_seconds=self.keys_seconds,
            bone_length_error_mean=float(err.mean()), bone_length_error_max=float(err.max()),
            target_residual_mean=float(res.mean()), target_residual_max=float(res.max()),
            bone_length_error_per_frame=[float(x) for x in err],
            target_residual_per_frame=[float(x) for x in res],
            worst_frames=[int(bound.frames[i]) for i in worst],
            joint_limit_violations=_limit_report(self.result, bound),
            changed_bones=self.changed_bones,
            placement=dict(moved_from_environment=bound.moved, object_scale=bound.object_scale,
                           message=bound.placement_note),
            hinges=list(self.result.hinges or []),
            bake=dict(frame_start=opt.frames[0], frame_end=opt.frames[1], step=opt.step, clean=opt.clean,
                      interpolation=opt.interpolation, target=opt.target.lower()),
            keys=dict(written=plan["keys"], every_frame=plan["per_frame"], curves=len(plan["curves"]),
                      curves_kept_from_source=plan["kept"], max_deviation=plan["deviation"]),
            constraints_bypassed=bypassed)

    def _follow_outer_parents(self, action, slot):
        """Bones whose Blender parent is outside the bone set were keyed against a prediction of
        that parent (carried by the set bone above it as in the source). Its constraints may
        play it slightly otherwise (Rigify's ORG-palm copies the scale of DEF-hand): read how
        Blender plays it under the new keys and key its children against that. One pass is
        exact, since an outside parent depends only on bones above it."""
        bound = self.bound
        if not bound.rig.outer_names:
            return
        idx = np.flatnonzero(self.baked)
        played = adapter.read_bone_matrices(self.scene, self.arm, bound.frames[idx], bound.rig.outer_names)
        predicted = bound.outer_world(self.plan["played"], idx)
        if np.abs(played - predicted).max() <= 1e-7:
            return
        bound.use_played_outer(played, idx)
        before = {(c.path, c.index): c for c in self.plan["curves"]}
        self.plan_keys()
        # Only the curves the played parents changed are written again (those of the bones
        # below them): rewriting all 1384 curves of a Rigify bake cost 0.6 s.
        changed = [c for c in self.plan["curves"] if not _same_curve(before.get((c.path, c.index)), c)]
        adapter.write_curves(action, slot, changed, self.options.frames)

    def run(self, progress=None):
        self.read()
        self.compute(progress or print_progress(self.label))
        return self.write()


def _same_curve(a, b):
    """Whether planned curves ``a`` (or None) and ``b`` write the same keys."""
    if a is None or a.interpolation != b.interpolation or a.group != b.group:
        return False
    return all((x is None) == (y is None) and (x is None or np.array_equal(x, y))
               for x, y in ((a.frames, b.frames), (a.values, b.values), (a.left, b.left), (a.right, b.right)))


def _limit_report(result, bound, worst=5):
    """{count, max_degrees, worst: [{joint, frame, degrees}]} of the joint-limit violations."""
    v = result.joint_limit_violations
    names = bound.binding.skeleton.names
    f, j = np.nonzero(v > 1e-6)
    order = np.argsort(-v[f, j])
    rows, seen = [], set()
    for i in order.tolist():
        if f[i] in seen:
            continue
        seen.add(f[i])
        rows.append(dict(joint=names[j[i]], frame=int(bound.frames[f[i]]), degrees=float(v[f[i], j[i]])))
        if len(rows) == worst:
            break
    return dict(count=int(len(f)), max_degrees=float(v.max()) if v.size else 0.0, worst=rows)


def bake_job(scene, arm, influence_group=None, progress=None, warn=print, reposition_contacts=None,
             contacts=None, options=None, solver=None):
    """Bake and assign the adapted action; returns the report dictionary.

    contacts : optional overrides of the scene's contact settings: ``effectors``
    (list or comma-separated), ``distance`` and ``speed`` (fractions of body height).
    options : ``BakeOptions`` (default: every bound frame, linear keys on every frame,
    assigned as the active action).
    solver : "descriptors" or "interaction_mesh" (default: the scene's Solver).
    """
    return BakeJob(scene, arm, influence_group, warn, reposition_contacts, contacts, options,
                   solver=solver).run(progress)
