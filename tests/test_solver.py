"""Warping solver details: hinge limits (paper §8) and the edge colouring."""

import numpy as np
import pytest

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


def _folded(skel, motion, f, rng):
    """Frame ``f`` of ``motion`` with every joint jittered and each limb's middle joint pulled
    towards its parent: bones off their lengths and bend limits broken, for the sweeps."""
    pose = motion[f] + rng.normal(0.0, 0.03, motion[f].shape)
    for j in range(len(skel)):
        p = skel.parents[j]
        if p >= 0 and len(skel.children(j)) == 1:
            pose[j] = pose[p] + 0.3 * (pose[j] - pose[p])
    return pose


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "mixamo with a face"])
def test_a_single_pose_steps_as_it_does_in_a_batch(convention):
    # A batch of one pose (the live preview, the sequential solve) sweeps with products of
    # gather and scatter matrices instead of takes and writes: its sweeps must give the numbers
    # a batch of several poses gives, to the bit, with bend limits broken, pins held, and a face
    # rig's cluster.
    if convention.endswith("face"):
        from test_clusters import _with_a_face
        skel, motion, _ = _with_a_face(convention.split()[0], 12)
    else:
        skel, off, roles = S.convention_rig(convention)
        motion = S.posed_motion(skel, off, roles, 12, limbs="bent", speed=1.0)
    lo = motion.reshape(-1, 3).min(0)
    mesh = TriMesh(*S.grid(8.0, 8.0, 8, 8, origin=(lo[0] - 4.0, lo[1] - 4.0), z=lo[2] - 0.01))
    rig = Rig(bind(skel, motion, mesh))
    rng = np.random.default_rng(3)
    root = int(np.flatnonzero(np.asarray(skel.parents) < 0)[0])
    pins = np.full(motion.shape, np.nan)
    pins[:, root] = motion[:, root] + [0.0, 0.0, -0.05]
    pinned = rig.warper()
    pinned.pins = pins
    for warper in (rig.warper(), pinned):
        assert warper.limits is not None
        assert bool(warper.clusters) == convention.endswith("face")
        f = 5
        previous = _folded(skel, motion, f - 1, rng)
        affinity = rng.uniform(0.0, 1.0, len(skel))
        pairs, dmin, _ = warper.limits                                        # bend limits broken
        assert (np.linalg.norm(previous[pairs[:, 1]] - previous[pairs[:, 0]], axis=-1) < dmin[f]).any()
        # The sweeps alone: the one-pose products against the general takes on the same pose, to
        # the bit; against a batch of two, within rounding (a face cluster's batched SVD and
        # products round apart by an ulp or so, on either path).
        single = np.ascontiguousarray(previous.T[:, :, None])                 # (3,J,1)
        general = single.copy()
        double = np.ascontiguousarray(np.stack([previous, previous]).transpose(2, 1, 0))
        _, groups1, held1, _ = warper._prepare(np.array([f]), affinity[None])
        _, groups2, held2, _ = warper._prepare(np.array([f, f]), np.stack([affinity, affinity]))
        limits, check, clusters, edges = groups1
        assert edges[0][-1] is not None and check[-1] is not None and groups2[-1][0][-1] is None
        def general_limits():
            return [e[:4] + (None,) for e in limits()]
        takes = (general_limits, check[:2] + (None,), clusters, [e[:4] + (None,) for e in edges])
        for _ in range(4):
            Warper._sweep(single, groups1, held1)
            Warper._sweep(general, takes, held1)
            Warper._sweep(double, groups2, held2)
        np.testing.assert_array_equal(single, general)
        np.testing.assert_allclose(single[..., 0], double[..., 0], rtol=0, atol=1e-13)
        np.testing.assert_allclose(single[..., 0], double[..., 1], rtol=0, atol=1e-13)
        assert np.abs(single[..., 0].T - previous).max() > 0.01              # the sweeps did move it
        # A whole step (hinges, whose batched SVD and products round apart by an ulp or so, too).
        one = warper.next(f, previous, motion[f - 1], motion[f], affinity)
        two = warper._advance(np.array([f, f]), np.stack([previous, previous]), motion[[f - 1, f - 1]],
                              motion[[f, f]], np.stack([affinity, affinity]))
        np.testing.assert_allclose(one, two[0], rtol=0, atol=1e-12)


def test_a_knee_the_source_holds_straight_keeps_its_side_when_an_edit_buckles_it():
    # Frames 0-2 bend the knee 39° forwards, frames 3-5 hold the leg straight. On a straight
    # frame the knee has the nearest bent frame's side: a pose buckled backwards there (a foot set
    # on raised ground) is reflected forwards; one held about straight, or hyperextended 5° as a
    # source may be, is left as it is.
    from blender_reldesc.core.skeleton.joints import Hinges
    binding, bent = _leg_scene()
    straight = bent.copy()
    straight[:, 2] = [0.0, 0.1, 0.52]
    motion = np.concatenate([bent, straight])
    rig = Rig(bind(binding.skeleton, motion, TriMesh(*S.grid(2, 2, 4, 4, origin=(-1, -1))), body_height=1.0))
    hinges = rig.hinges
    assert hinges.triples.tolist() == [[1, 2, 3]]
    assert hinges.straight[:, 0].tolist() == [False] * 3 + [True] * 3
    np.testing.assert_allclose(hinges.normal[4, 0], hinges.normal[2, 0], atol=1e-12)   # the anchor does not turn
    buckled = straight[1].copy()
    buckled[2, 0] = -0.15                                                   # bent 39° backwards
    out = hinges.limit(buckled.copy(), motion, 4)
    assert out[2, 0] > 0.1                                                  # forwards, as on the bent frames
    np.testing.assert_allclose(np.linalg.norm(out[2] - out[1]), np.linalg.norm(buckled[2] - buckled[1]))
    np.testing.assert_allclose(np.linalg.norm(out[3] - out[2]), np.linalg.norm(buckled[3] - buckled[2]))
    for x in (0.0, -0.02):                                                  # straight; 5° hyperextended
        pose = straight[1].copy()
        pose[2, 0] = x
        np.testing.assert_array_equal(hinges.limit(pose.copy(), motion, 4), pose)
    # On a bent frame any backwards bend is reflected, as before.
    pose = bent[1].copy()
    pose[2, 0] = -0.02
    assert hinges.limit(pose.copy(), motion, 1)[2, 0] > 0.0


def test_hinge_anchors_with_different_numbers_of_children_fit_as_one_by_one():
    # The anchors' best fits are one SVD call, each anchor's children padded with the anchor
    # itself: the same rotations, to the bit, as fitting each anchor on its own.
    from blender_reldesc.core.skeleton.joints import Hinges, _anchor_rotations
    rng = np.random.default_rng(5)
    motion = rng.normal(size=(4, 9, 3))
    pose = rng.normal(size=(2, 9, 3))
    anchors = [(0, np.array([1, 2, 3, 4])), (5, np.array([6, 7])), (8, np.array([2, 6, 7]))]
    hinges = Hinges(np.array([[1, 2, 3]]), anchors, np.array([0]), np.zeros((4, 1, 3)), np.zeros((4, 1, 3)))
    kids, anchor = hinges._anchor_layout
    f = np.array([1, 3])
    src = motion[f[:, None, None], kids] - motion[f[:, None], anchor][..., None, :]
    now = pose[:, kids] - pose[:, anchor][..., None, :]
    rot, ok = _anchor_rotations(src, now)
    for a, (j, children) in enumerate(anchors):
        r1, ok1 = _anchor_rotations(motion[f[:, None], children] - motion[f, j][:, None],
                                    pose[:, children] - pose[:, j][:, None])
        np.testing.assert_array_equal(rot[:, a], r1)
        np.testing.assert_array_equal(ok[:, a], ok1)


def test_a_single_pose_that_is_not_contiguous_is_swept_in_place_all_the_same():
    # The one-pose sweep adds to a (3,J) view of the pose; a pose laid out otherwise takes the
    # general path, so the corrections are never written to a copy.
    skel, off, roles = S.convention_rig("bvh")
    motion = S.posed_motion(skel, off, roles, 8, limbs="bent", speed=1.0)
    lo = motion.reshape(-1, 3).min(0)
    rig = Rig(bind(skel, motion, TriMesh(*S.grid(8.0, 8.0, 8, 8, origin=(lo[0] - 4.0, lo[1] - 4.0), z=lo[2] - 0.01))))
    warper = rig.warper()
    pose = _folded(skel, motion, 3, np.random.default_rng(1))
    _, groups, held, _ = warper._prepare(np.array([3]), np.full((1, len(skel)), 0.5))
    contiguous = np.ascontiguousarray(pose.T[:, :, None])
    strided = np.zeros((3, len(skel), 2))[:, :, :1]                           # a view with a stride
    strided[...] = contiguous
    assert not strided.flags.c_contiguous
    Warper._sweep(contiguous, groups, held)
    Warper._sweep(strided, groups, held)
    assert np.abs(contiguous[..., 0].T - pose).max() > 0.01
    np.testing.assert_allclose(strided, contiguous, rtol=0, atol=1e-15)
