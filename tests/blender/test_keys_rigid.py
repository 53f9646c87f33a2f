"""The keys of a rigid pose (``Bound.keyable_basis``'s one-step path) against the depth-by-depth
path it skips: the same rotations, scales, locations and played pose."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from blender_reldesc import demo, jobs  # noqa: E402
from blender_reldesc.jobs.bound import Bound  # noqa: E402


@pytest.mark.parametrize("edit", ["none", "legs", "placed"])
def test_rigid_poses_key_in_one_step_as_depth_by_depth(edit, monkeypatch):
    scene, arm, env, bridge, beam = demo.build_scene(frames=20, deck_cells=(20, 6))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    if edit == "legs":
        demo.lengthen_legs(arm, 1.15)
    elif edit == "placed":                         # as an FBX import places it
        arm.rotation_euler = (np.pi / 2, 0.0, 0.3)
        arm.scale = (0.01, 0.01, 0.01)
        bpy.context.view_layer.update()
    bound = jobs.Bound(arm)
    rng = np.random.default_rng(0)
    positions = bound.binding.motion + rng.normal(scale=0.01, size=bound.binding.motion.shape)
    assert bound._rigid_keys(bound.adapted_pose(positions))
    fast = bound.keyable_basis(positions)
    monkeypatch.setattr(Bound, "_rigid_keys", lambda self, new: False)
    slow = bound.keyable_basis(positions)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, atol=1e-6)      # the rest matrices are float32: 3e-7
