"""Descriptor re-embedding (Tonneau et al. 2016 §6): properties of the solve and of the attachment."""

import numpy as np
import pytest

from blender_reldesc.core import TriMesh
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.descriptors.reembedding import attach, predict, project_rotations, reembed
from blender_reldesc.core.errors import InputError

from core_helpers import random_rotation


def _scene(rng, n=40, joints=6, postures=3, per_joint=12):
    """Descriptors on a patch, joints above them, normalised weights, relative vectors."""
    d = np.column_stack([rng.uniform(-0.5, 0.5, n), rng.uniform(-0.3, 0.3, n), np.zeros(n)])
    p = np.column_stack([rng.uniform(-0.4, 0.4, joints * postures), rng.uniform(-0.2, 0.2, joints * postures),
                         rng.uniform(0.05, 0.8, joints * postures)])
    rows, desc = [], []
    for r in range(len(p)):
        pick = rng.choice(n, per_joint, replace=False)
        rows += [r] * per_joint
        desc += pick.tolist()
    rows, desc = np.array(rows), np.array(desc)
    w = rng.uniform(0.1, 1.0, len(rows))
    w /= np.bincount(rows, weights=w)[rows]
    rel = p[rows] - d[desc]
    return d, p, rows, desc, w, rel


def test_undisturbed_targets_leave_the_descriptors_where_they_are():
    rng = np.random.default_rng(0)
    d, p, rows, desc, w, rel = _scene(rng)
    np.testing.assert_allclose(predict(rows, desc, w, rel, d, np.broadcast_to(np.eye(3), (len(d), 3, 3)), len(p)),
                               p, atol=1e-12)
    e = reembed(rows, desc, w, rel, p, d, iterations=5)
    np.testing.assert_allclose(e.points, d, atol=1e-9)
    np.testing.assert_allclose(e.rotations, np.broadcast_to(np.eye(3), e.rotations.shape), atol=1e-9)
    assert max(e.energy) < 1e-16


def test_a_uniform_translation_is_recovered():
    rng = np.random.default_rng(1)
    d, p, rows, desc, w, rel = _scene(rng)
    t = np.array([0.3, -0.7, 0.25])
    e = reembed(rows, desc, w, rel, p + t, d, iterations=3)
    np.testing.assert_allclose(e.points, d + t, atol=1e-7)
    np.testing.assert_allclose(e.rotations, np.broadcast_to(np.eye(3), e.rotations.shape), atol=1e-7)
    assert e.energy[-1] < 1e-12


def test_a_known_rigid_motion_of_the_descriptors_is_recovered():
    # The joints of three key postures moved by one rotation and translation: every descriptor
    # is moved and turned by it, and the joints are met.
    rng = np.random.default_rng(2)
    d, p, rows, desc, w, rel = _scene(rng)
    R = random_rotation(rng)
    R = project_rotations((np.eye(3) + 0.35 * (R - np.eye(3)))[None])[0]      # a turn of a few tens of degrees
    t = np.array([0.1, 0.4, -0.05])
    e = reembed(rows, desc, w, rel, p @ R.T + t, d)
    assert e.energy[-1] < 1e-8 * len(p)
    np.testing.assert_allclose(e.rotations, np.broadcast_to(R, e.rotations.shape), atol=2e-3)
    np.testing.assert_allclose(e.points, d @ R.T + t, atol=2e-3)


def test_joint_energy_decreases_as_the_descriptors_free_up():
    # A key posture bent, not moved rigidly (the higher a joint, the farther it leans, as a
    # limb reaching a new contact): E_J falls from iteration to iteration as w_S drops, and
    # ends far below where it started.
    rng = np.random.default_rng(3)
    d, p, rows, desc, w, rel = _scene(rng, postures=1)
    moved = p + np.column_stack([0.15 * p[:, 2] ** 2, 0.05 * p[:, 0], -0.05 * p[:, 2]])
    e = reembed(rows, desc, w, rel, moved, d)
    start = float(np.sum((moved - p) ** 2))
    energy = np.array(e.energy)
    assert len(energy) == 100
    assert np.all(np.diff(energy) <= 1e-9 * start)
    assert energy[-1] < 0.05 * start
    det = np.linalg.det(e.rotations)
    np.testing.assert_allclose(det, 1.0, atol=1e-9)
    np.testing.assert_allclose(e.rotations @ e.rotations.transpose(0, 2, 1),
                               np.broadcast_to(np.eye(3), e.rotations.shape), atol=1e-9)


def test_moving_the_new_support_after_re_embedding_carries_the_contact():
    # Descriptors re-embedded onto the top of a stone, attached to it; the stone is then moved
    # and turned: the joints the descriptors describe move with it, rigidly.
    rng = np.random.default_rng(4)
    verts, tris = S.box((0.0, 0.0, 0.15), (1.2, 0.8, 0.3), subdivisions=4)
    stone = TriMesh(verts, tris)
    d, p, rows, desc, w, rel = _scene(rng)
    d[:, 2] = 0.3                                                           # on the stone's top
    p[:, 2] += 0.3
    rel = p[rows] - d[desc]
    target = p + [0.05, 0.02, 0.0]
    e = reembed(rows, desc, w, rel, target, d)
    before = predict(rows, desc, w, rel, e.points, e.rotations, len(p))
    np.testing.assert_allclose(before, target, atol=1e-4)
    att = attach(stone, e.points, e.rotations)
    pts, rots = att.evaluate(stone)
    np.testing.assert_allclose(pts, e.points, atol=1e-12)
    np.testing.assert_allclose(rots, e.rotations, atol=1e-12)
    R, t = random_rotation(rng), np.array([1.0, -2.0, 0.4])
    moved = stone.with_vertices(verts @ R.T + t)
    pts, rots = att.evaluate(moved)
    np.testing.assert_allclose(predict(rows, desc, w, rel, pts, rots, len(p)), before @ R.T + t, atol=1e-9)


def test_attach_finds_the_closest_surface_as_brute_force_does():
    # attach searches each point only as far as its nearest triangle centre: the surface point
    # it ties to is as close as the closest over every triangle, near and far from the mesh.
    from blender_reldesc.core.geometry.triangles import closest_point_on_triangles
    rng = np.random.default_rng(8)
    verts, tris = S.merge(S.grid(4.0, 3.0, 40, 30, origin=(-2.0, -1.5), height=S.hills(0.2, 1.5)),
                          S.box((0.3, 0.2, 0.4), (0.5, 0.4, 0.3), subdivisions=2))[:2]
    mesh = TriMesh(verts, tris)
    pts = np.column_stack([rng.uniform(-2.5, 2.5, 300), rng.uniform(-2.0, 2.0, 300), rng.uniform(-0.5, 2.5, 300)])
    att = attach(mesh, pts, np.broadcast_to(np.eye(3), (len(pts), 3, 3)))
    corners = verts[tris[att.triangle]]
    got = np.linalg.norm(pts - np.einsum("pk,pkd->pd", att.bary, corners), axis=1)
    a, b, c = (np.repeat(verts[tris[:, k]][None], len(pts), axis=0).reshape(-1, 3) for k in range(3))
    q = np.repeat(pts, len(tris), axis=0)
    bary = closest_point_on_triangles(q, a, b, c)
    foot = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
    want = np.linalg.norm(q - foot, axis=1).reshape(len(pts), -1).min(axis=1)
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_bad_input_is_refused_with_a_clear_error():
    rng = np.random.default_rng(5)
    d, p, rows, desc, w, rel = _scene(rng)
    bad = p.copy()
    bad[0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        reembed(rows, desc, w, rel, bad, d)
    with pytest.raises(InputError, match="does not exist"):
        reembed(rows, desc + 1000, w, rel, p, d)
    with pytest.raises(InputError, match="one rotation per descriptor"):
        reembed(rows, desc, w, rel, p, d, np.eye(3)[None])


def test_adapt_blends_to_re_embedded_descriptors_over_their_frames():
    # Every descriptor re-embedded by one rigid motion and tied to the floor: over the frames of
    # the embedding the targets are the source moved rigidly (blended halfway where the blend
    # is 0.5), for the joints it names only; elsewhere they are the source.
    from blender_reldesc.core import adapt, bind
    from blender_reldesc.core.descriptors import Reembedded, attach, frames_of
    skel, motion = S.walk(60)
    mesh = TriMesh(*S.grid(6.0, 4.0, 24, 16, origin=(-2.0, -2.0)))
    binding = bind(skel, motion, mesh)
    d = frames_of(mesh, binding.triangles, binding.barycentrics, 0)[0]
    rng = np.random.default_rng(6)
    R = project_rotations((np.eye(3) + 0.2 * (random_rotation(rng) - np.eye(3)))[None])[0]
    t = np.array([0.2, -0.1, 0.05])
    N = binding.descriptor_count
    att = attach(mesh, d @ R.T + t, np.broadcast_to(R, (N, 3, 3)))
    frames = np.arange(20, 40)
    blend = np.where(frames < 30, 1.0, 0.5)
    legs = np.array([skel.index(n) for n in skel.names if "Leg" in n or "Foot" in n])
    plain = {"share_compression": False, "jump_guard": False}      # the blend alone
    for joints in (None, legs):
        e = Reembedded(np.arange(N), att, frames, blend, joints)
        got = adapt(binding, mesh, embeddings=[e], solver_options=plain).targets
        moved = motion @ R.T + t
        want = motion.copy()
        sel = np.arange(len(skel)) if joints is None else joints
        want[frames[:, None], sel[None]] += blend[:, None, None] * (moved[frames][:, sel] - motion[frames][:, sel])
        np.testing.assert_allclose(got, want, atol=1e-9)
