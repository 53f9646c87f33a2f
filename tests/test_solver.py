"""Warping solver details: hinge limits (paper §8) and the edge colouring."""

import numpy as np

from blender_reldesc.core import Skeleton, TriMesh, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.adaptation import Rig
from blender_reldesc.core.solvers import Warper, color_edges


def _leg_scene():
    names = ["Pelvis", "LeftUpLeg", "LeftLeg", "LeftFoot", "RightUpLeg"]
    parents = [-1, 0, 1, 2, 0]
    pose = np.array([[0, 0, 1.0], [0, 0.1, 0.95], [0.15, 0.1, 0.52], [0, 0.1, 0.1], [0, -0.1, 0.95]])   # knee bent 39°
    motion = np.repeat(pose[None], 3, axis=0)
    mesh = TriMesh(*S.grid(2, 2, 4, 4, origin=(-1, -1)))
    return bind(Skeleton(names, parents), motion, mesh, body_height=1.0), motion


def test_a_knee_pulled_backwards_is_reflected_forwards():
    binding, motion = _leg_scene()
    rig = Rig(binding)
    targets = motion.copy()
    targets[:, 2, 0] = -0.1                         # the knee's target behind the hip-ankle line
    affinity = np.zeros((3, 5))
    affinity[:, 2] = 1.0                            # and held there hard
    free = Warper(rig.edges, rig.edge_lengths, 1.0, hinges=None).run(targets, motion[0], affinity)
    limited = rig.warper().run(targets, motion[0], affinity)
    assert rig.warper().hinges is not None and rig.warper().hinges[0].triples.tolist() == [[1, 2, 3]]
    assert np.all(free[:, 2, 0] < 0)                # without the limit the knee bends backwards
    assert np.all(limited[:, 2, 0] > 0)             # with it, forwards again
    for out in (free, limited):                     # either way bone lengths hold
        np.testing.assert_allclose(np.linalg.norm(out[:, 2] - out[:, 1], axis=-1),
                                   np.linalg.norm(motion[:, 2] - motion[:, 1], axis=-1), rtol=1e-3)


def test_edge_colouring_never_shares_a_joint_within_a_group():
    skel, _ = S.humanoid()
    edges = np.concatenate([skel.bones, skel.rigidity_links()])
    groups = color_edges(edges, len(skel))
    _assert_colouring(edges, groups)


def _assert_colouring(edges, groups):
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(edges)))
    for g in groups:
        joints = edges[g].ravel()
        assert len(joints) == len(set(joints.tolist()))


def test_edge_colouring_needs_no_more_groups_than_a_joint_has_edges_on_every_rig_convention():
    # Each group costs a constraint sweep the same numpy calls: greedy colouring gave the
    # 27-joint rig with its rigidity links 5 groups (one of a single edge) where 4 do.
    for convention in S.CONVENTIONS:
        skel = S.convention_rig(convention)[0]
        edges = np.concatenate([skel.bones, skel.rigidity_links()])
        groups = color_edges(edges, len(skel))
        _assert_colouring(edges, groups)
        assert len(groups) == np.bincount(edges.ravel()).max(), convention


def test_edge_colouring_of_a_graph_that_needs_one_more_colour_is_still_valid():
    # The Petersen graph: every joint has three edges, but no three groups hold them.
    ring = [(i, (i + 1) % 5) for i in range(5)]
    star = [(5 + i, 5 + (i + 2) % 5) for i in range(5)]
    spokes = [(i, i + 5) for i in range(5)]
    edges = np.array(ring + star + spokes)
    groups = color_edges(edges, 10)
    _assert_colouring(edges, groups)
    assert len(groups) == 4