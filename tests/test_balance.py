"""Segment masses and the centre of mass: a standard table on bones found from the structure."""

import numpy as np

from blender_reldesc.core import synthetic as S
from blender_reldesc.core.contacts.balance import ARM, HEAD, LEG, centre_of_mass, segment_masses


def test_shares_follow_the_table_and_sum_to_one_on_every_convention():
    for convention in S.CONVENTIONS:
        skel, offsets, roles = S.convention_rig(convention)
        motion = S.posed_motion(skel, offsets, roles, frames=8)
        child, share, along = segment_masses(skel, motion, 1.75)
        assert np.all(share > 0) and abs(share.sum() - 1.0) < 1e-12, convention
        assert np.all((along > 0) & (along < 1))
        # Four limb segments of each kind carry the table's masses: thighs and upper arms...
        top = np.sort(share)[::-1]
        assert np.isclose(top[0], LEG[0]) and np.isclose(top[1], LEG[0]), convention
        big = {round(x, 4) for x in share.tolist()}
        assert {round(LEG[0], 4), round(ARM[0], 4), round(ARM[1], 4)} <= big, convention


def test_the_centre_of_mass_does_not_depend_on_the_rig_convention():
    # The same body posed the same way: fingers (Mixamo), a root on the floor and twist bones
    # (Unreal) or arbitrary names move the joints' mean by 5-7 cm, not the centre of mass.
    coms, means = {}, {}
    for convention in ("bvh", "mixamo", "ue", "arbitrary"):
        skel, offsets, roles = S.convention_rig(convention)
        motion = S.posed_motion(skel, offsets, roles, frames=6, seed=3)
        coms[convention] = centre_of_mass(skel, motion, segment_masses(skel, motion, 1.75))
        means[convention] = motion.mean(axis=1)
    for c in coms:
        np.testing.assert_allclose(coms[c], coms["bvh"], atol=0.01)
    assert np.abs(means["mixamo"] - means["bvh"]).max() > 0.05
    # A standing body's centre of mass is a little above the middle of its height.
    skel, offsets, roles = S.convention_rig("bvh")
    motion = S.posed_motion(skel, offsets, roles, frames=6, seed=3)
    z = coms["bvh"][:, 2] - motion[..., 2].min(axis=1)
    height = motion[..., 2].max(axis=1) - motion[..., 2].min(axis=1)
    assert np.all((z > 0.5 * height) & (z < 0.65 * height))
    assert 0 < HEAD < 0.1
