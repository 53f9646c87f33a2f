"""The overlay's arrays for a known binding (drawing itself needs a window)."""

import numpy as np

from blender_reldesc.core.overlay import FULL, NONE, frame_weights, overlay_geometry


def test_overlay_counts_and_colours(walk_scene, walk_binding):
    skel, motion, mesh, (floor, beam) = walk_scene
    N = walk_binding.descriptor_count
    j = skel.index("LeftFoot")
    on_beam = mesh.triangles[walk_binding.triangles, 0] >= beam[0]
    assert on_beam.any() and not on_beam.all()
    influence = np.where(on_beam, 0.0, 1.0)
    g = overlay_geometry(walk_binding, mesh, 10, joint=j, influence=influence, strongest=5,
                         targets=motion[10], solved=motion[10])
    assert g["points"].shape == (N, 3) and g["point_colors"].shape == (N, 4)
    np.testing.assert_allclose(g["point_colors"][on_beam], np.tile(NONE, (on_beam.sum(), 1)))
    np.testing.assert_allclose(g["point_colors"][~on_beam], np.tile(FULL, ((~on_beam).sum(), 1)))
    w = frame_weights(walk_binding, 10, j, influence)
    k = min(5, int(np.sum(w > 0)))
    assert g["lines"].shape == (2 * k, 3) and k > 0
    np.testing.assert_allclose(g["lines"][0], motion[10, j])
    assert g["joints"].shape == (2 * len(skel), 3)
    # Points sit on the mesh: descriptors of the undeformed mesh at their bind position.
    tri = mesh.vertices[mesh.triangles[walk_binding.triangles]]
    np.testing.assert_allclose(g["points"], np.einsum("nk,nkd->nd", walk_binding.barycentrics, tri))


def test_weights_for_a_joint_sum_to_one(walk_scene, walk_binding):
    skel, motion, *_ = walk_scene
    w = frame_weights(walk_binding, 3, skel.index("Head"))
    assert abs(w.sum() - 1.0) < 1e-12 and np.all(w >= 0)


def test_contact_overlay_points_and_lines():
    from blender_reldesc.core.overlay import NEW_CONTACT, contact_geometry
    rows = [dict(status="valid", position=[0, 0, 0], new_position=None),
            dict(status="repositioned", position=[1, 0, 0], new_position=[1, 1, 0]),
            dict(status="unresolved", position=[2, 0, 0], new_position=None)]
    g = contact_geometry(rows)
    assert g["points"].shape == (4, 3) and g["lines"].shape == (2, 3)
    np.testing.assert_allclose(g["lines"], [[1, 0, 0], [1, 1, 0]])
    np.testing.assert_allclose(g["point_colors"][2], NEW_CONTACT)
    assert contact_geometry([])["points"].shape == (0, 3)
