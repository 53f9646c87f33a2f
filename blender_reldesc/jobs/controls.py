"""The animator's controls of a bake: per-bone affinity overrides and hinge modes, and the painted
influence of the environment; checked against the binding, with a warning for what is ignored."""

from __future__ import annotations

from .. import adapter
from ..core.skeleton.armature import into_frame


def bone_controls(bound, warn=None):
    """``(affinity overrides {joint: affinity} or None, hinge modes {joint: 'ON' | 'OFF'} or None)``
    of ``bound``'s bones as read with its rig. Overrides on bones that are not in the binding are
    ignored, with a warning naming them."""
    names = set(bound.binding.skeleton.names)
    rig = bound.rig
    affinity = {n: v for n, v in (rig.affinity or {}).items() if n in names}
    stray = [n for n in (rig.affinity or {}) if n not in names]
    if stray and warn is not None:
        warn(f"affinity overrides ignored on bones not in the binding: {', '.join(stray)}")
    hinges = {n: m for n, m in (rig.hinges or {}).items() if n in names}
    return affinity or None, hinges or None


def warn_stray_influence(group, stray, warn):
    if stray and warn is not None:
        warn(f"influence group '{group}' ignored on meshes outside the environment: {', '.join(stray)}")


def read_influence(scene, bound, group=None, warn=None):
    """(V,) painted influence of the bound environment, or None when no mesh has the group.

    A group of that name on meshes outside the environment is ignored, with a warning naming them.
    """
    group = adapter.scene.settings(scene).influence_group if group is None else group
    weights, stray = adapter.mesh.influence(bound.objects, group)
    warn_stray_influence(group, stray, warn)
    return weights


def read_environment(scene, bound, group, warn=None):
    """What an adaptation of ``bound`` reads besides the binding (main thread): ``(mesh, influence,
    affinity overrides, hinge modes)``: the environment now (checked against the bound topology),
    its painted influence from vertex group ``group`` and the bones' controls."""
    verts, influence, stray = adapter.mesh.read_bound_environment(scene, bound.objects, bound.frames, bound.meta,
                                                                  group)
    warn_stray_influence(group, stray, warn)
    overrides, hinges = bone_controls(bound, warn)
    # Where the character was bound (``Bound.into_bind``): a set moved with it is the bound one.
    mesh = bound.binding.mesh
    bound_verts = None if mesh.animated else mesh.vertices
    return mesh.with_vertices(into_frame(bound.carry, verts, like=bound_verts)), influence, overrides, hinges
