"""Garments carried by descriptors (§9): a skirt on a walk, PC2 point caches."""

import numpy as np
import pytest

from blender_reldesc.core import InputError, TriMesh, adapt, bind
from blender_reldesc.core import synthetic as S
from blender_reldesc.core.characters import _bones, closest_on_segments
from blender_reldesc.core.garment import bind_garment, carry_garment, mesh_edges, read_pc2, write_pc2


@pytest.fixture(scope="module")
def walk():
    sk, motion = S.walk(60)
    verts, tris = S.skirt(sk, motion)
    return sk, motion, verts, tris, bind_garment(sk, motion, verts, tris)


def _deepest(garment, motion, bones, radii):
    a, b = motion[:, bones[:, 0]], motion[:, bones[:, 1]]
    foot, _ = closest_on_segments(garment[:, :, None], a[:, None], b[:, None])
    return float(-(np.linalg.norm(garment[:, :, None] - foot, axis=-1) - radii[bones[:, 1]][None, None]).min())


#: The humanoid's joints that end its thighs and shins.
LEGS = ("LeftLeg", "LeftFoot", "RightLeg", "RightFoot")


def _longer_legs(sk, motion, joints):
    """The walk adapted over a floor with the bones ending at ``joints`` (knee and ankle
    indices) 15 % longer."""
    x = motion[:, 0, 0]
    mesh = TriMesh(*S.grid(x.max() - x.min() + 4.0, 4.0, 60, 8, origin=(x.min() - 2.0, -2.0)))
    lengths = sk.bone_lengths(motion).mean(axis=0)
    legs = {sk.names[j]: 1.15 * lengths[j] for j in joints}
    return adapt(bind(sk, motion, mesh), mesh, bone_lengths=legs).positions


def _assert_carried(sk, motion, verts, tris, g, longer, out, hips):
    """The issue's criteria for a skirt on legs 15 % longer: no edge more than 5 % longer or
    shorter, no vertex more than 1 cm deeper into the body's capsules than in the source, and
    the skirt rises with the hips (joint ``hips``)."""
    e = mesh_edges(tris)
    then = np.linalg.norm(verts[:, e[:, 1]] - verts[:, e[:, 0]], axis=-1)
    now = np.linalg.norm(out[:, e[:, 1]] - out[:, e[:, 0]], axis=-1)
    assert np.abs(now / then - 1.0).max() <= 0.05
    bones = _bones(sk, motion)
    assert _deepest(out, longer, bones, g.radii) <= max(_deepest(verts, motion, bones, g.radii), 0.0) + 0.01
    rise = (longer[:, hips, 2] - motion[:, hips, 2]).mean()
    assert rise > 0.05
    assert abs((out[..., 2] - verts[..., 2]).mean() - rise) < 0.03


@pytest.mark.parametrize("convention", ["bvh", "mixamo", "rigify", "ue", "arbitrary"])
def test_a_skirt_on_every_rig_convention(convention):
    # The same skirt (800 vertices: through controls) on walking rigs of each common convention
    # (Mixamo's fingers, Rigify's split pelvis and twist bones, Unreal's root and twist leaves,
    # arbitrary names): unchanged exact; legs 15 % longer, the criteria.
    sk, off, roles = S.convention_rig(convention)
    motion = S.posed_motion(sk, off, roles, frames=24, limbs="bent", speed=1.0)
    motion = motion + [0.0, 0.0, -motion[..., 2].min()]
    role = {r: j for j, r in reversed(list(enumerate(roles)))}           # a role's first joint
    joints = dict(Hips=role["hips"], LeftUpLeg=role["thigh.L"], RightUpLeg=role["thigh.R"],
                  LeftLeg=role["shin.L"], RightLeg=role["shin.R"])
    verts, tris = S.skirt(sk, motion, rings=20, around=40, joints=joints)
    g = bind_garment(sk, motion, verts, tris)
    assert g.embedding is not None
    np.testing.assert_allclose(carry_garment(g, motion), verts, atol=1e-9)
    longer = _longer_legs(sk, motion, [role[r] for r in ("shin.L", "shin.R", "foot.L", "foot.R")])
    _assert_carried(sk, motion, verts, tris, g, longer, carry_garment(g, longer), role["hips"])


def test_an_unchanged_body_carries_the_garment_as_it_was(walk):
    sk, motion, verts, tris, g = walk
    np.testing.assert_allclose(carry_garment(g, motion), verts, atol=1e-9)


def test_a_body_moved_rigidly_moves_the_garment_rigidly(walk):
    sk, motion, verts, tris, g = walk
    c, s = np.cos(0.9), np.sin(0.9)
    R, t = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.array([1.0, 2.0, -0.5])
    np.testing.assert_allclose(carry_garment(g, motion @ R.T + t), verts @ R.T + t, atol=1e-9)


def test_a_skirt_on_legs_15_percent_longer(walk):
    # The scene: the walk adapted with legs 15 % longer; the skirt keeps its relation
    # to the body: no vertex more than 1 cm deeper into the body's capsules than in the source,
    # no edge more than 5 % longer or shorter, and it rises with the hips.
    sk, motion, verts, tris, g = walk
    longer = _longer_legs(sk, motion, [sk.index(n) for n in LEGS])
    out = carry_garment(g, longer)
    _assert_carried(sk, motion, verts, tris, g, longer, out, sk.index("Hips"))


def test_point_caches_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    pos = rng.normal(size=(5, 7, 3))
    write_pc2(tmp_path / "g.pc2", pos, start=3.0, rate=1.0)
    back, start, rate = read_pc2(tmp_path / "g.pc2")
    np.testing.assert_allclose(back, pos.astype(np.float32), atol=0)
    assert (start, rate) == (3.0, 1.0)
    assert (tmp_path / "g.pc2").stat().st_size == 32 + 5 * 7 * 12


def test_bad_garments_say_why(walk):
    sk, motion, verts, tris, g = walk
    with pytest.raises(InputError, match="over the clip"):
        bind_garment(sk, motion, verts[:10], tris)
    with pytest.raises(InputError, match="not near|near it"):
        bind_garment(sk, motion, verts + [0.0, 0.0, 5.0], tris)
    with pytest.raises(InputError, match="NaN"):
        bind_garment(sk, motion, np.where(np.arange(verts.shape[1])[None, :, None] == 3, np.nan, verts), tris)
    with pytest.raises(InputError, match="shape"):
        carry_garment(g, motion[:10])


@pytest.fixture(scope="module")
def fine():
    # 2400 vertices: carried through 320 controls (``garment.CONTROLS``), the rest following.
    sk, motion = S.walk(40)
    verts, tris = S.skirt(sk, motion, rings=40, around=60)
    g = bind_garment(sk, motion, verts, tris)
    assert g.embedding is not None and len(g.embedding.controls) == 320
    return sk, motion, verts, tris, g, _longer_legs(sk, motion, [sk.index(n) for n in LEGS])


def test_a_fine_garment_through_controls_is_exact_unchanged_and_moved_rigidly(fine):
    sk, motion, verts, tris, g, _ = fine
    np.testing.assert_allclose(carry_garment(g, motion), verts, atol=1e-9)
    c, s = np.cos(-2.1), np.sin(-2.1)
    R, t = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.array([-3.0, 0.5, 0.2])
    np.testing.assert_allclose(carry_garment(g, motion @ R.T + t), verts @ R.T + t, atol=1e-9)


def test_a_fine_skirt_on_legs_15_percent_longer(fine):
    # The criteria on a fine skirt (5 mm edges by the waist, a hand brushing it):
    # edges within 5 %, no deeper into the body than in the source plus 1 cm, rises with the
    # hips; and the controls' path agrees with carrying every vertex by descriptors.
    sk, motion, verts, tris, g, longer = fine
    out = carry_garment(g, longer)
    _assert_carried(sk, motion, verts, tris, g, longer, out, sk.index("Hips"))
    every = carry_garment(bind_garment(sk, motion, verts, tris, controls=0), longer)
    gap = np.linalg.norm(out - every, axis=-1)
    assert gap.mean() < 0.01 and gap.max() < 0.03


def _long_skirt(frames, rings, around):
    """A walk, a skirt whose hem hangs 1 cm over the floor at the hips' lowest, the floor."""
    sk, motion = S.walk(frames)
    length = motion[:, sk.index("Hips"), 2].min() + 0.05 - 0.01
    verts, tris = S.skirt(sk, motion, rings=rings, around=around, length=length)
    x = motion[:, 0, 0]
    floor = TriMesh(*S.grid(x.max() - x.min() + 4.0, 4.0, 40, 8, origin=(x.min() - 2.0, -2.0)))
    return sk, motion, verts, tris, floor


def test_a_garment_bound_with_the_environment_rests_on_it():
    # A long skirt whose hem hangs 1 cm over the floor, bound with the floor: unchanged or moved
    # rigidly with the body, exact; the floor raised 2 cm under the unchanged body, the hem
    # stays 1 cm over it (it rises 2 cm) while the waist stays with the body.
    sk, motion, verts, tris, floor = _long_skirt(30, 12, 24)
    g = bind_garment(sk, motion, verts, tris, environment=floor)
    np.testing.assert_allclose(carry_garment(g, motion, environment=floor), verts, atol=1e-9)
    c, s = np.cos(0.5), np.sin(0.5)
    R, t = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.array([1.0, 2.0, 0.3])
    moved = carry_garment(g, motion @ R.T + t, environment=floor.with_vertices(floor.vertices @ R.T + t))
    np.testing.assert_allclose(moved, verts @ R.T + t, atol=1e-9)
    out = carry_garment(g, motion, environment=floor.with_vertices(floor.vertices + [0.0, 0.0, 0.02]))
    hem, waist = np.arange(11 * 24, 12 * 24), np.arange(24)
    assert (out[:, hem, 2] - verts[:, hem, 2]).min() >= 0.0199
    assert np.abs(out[:, waist] - verts[:, waist]).max() < 0.01
    # No environment given: the one it was bound with (unchanged here, so exact).
    assert np.abs(carry_garment(g, motion) - verts).max() < 1e-9
    with pytest.raises(InputError, match="topology"):
        carry_garment(g, motion, environment=TriMesh(*S.grid(4.0, 4.0, 4, 4)))


def test_a_fine_garment_bound_with_the_environment_keeps_every_vertex_over_it():
    # Through controls (2400 vertices), the vertices between the controls too: a hem 1 cm over
    # a floor raised 2 cm stays 1 cm over it everywhere.
    sk, motion, verts, tris, floor = _long_skirt(20, 40, 60)
    g = bind_garment(sk, motion, verts, tris, environment=floor)
    assert g.embedding is not None
    out = carry_garment(g, motion, environment=floor.with_vertices(floor.vertices + [0.0, 0.0, 0.02]))
    assert (out[..., 2] - 0.02).min() >= 0.0099
    np.testing.assert_allclose(carry_garment(g, motion, environment=floor), verts, atol=1e-9)


@pytest.mark.parametrize("controls", [0, 100])
def test_a_garment_scaled_with_the_body_grows_with_its_bones_and_otherwise_keeps_its_size(controls):
    # keep_size=False is the paper's carrying: a skirt on thighs and shins 15 % longer hangs
    # longer (its hem lower against its waist), its edges stretched along the legs by at most
    # their bones' 15 %; kept at its size (the default), its length and edges stay. Vertex by
    # vertex and through controls alike; an unchanged body gives the same garment either way.
    sk, motion = S.walk(40)
    verts, tris = S.skirt(sk, motion, rings=12, around=24, length=0.55)
    g = bind_garment(sk, motion, verts, tris, controls=controls)
    mesh = TriMesh(*S.grid(30.0, 4.0, 60, 8, origin=(-5.0, -2.0)))
    L = sk.bone_lengths(motion).mean(axis=0)
    legs = {n: 1.15 * L[sk.index(n)] for n in ("LeftUpLeg", "LeftLeg", "RightUpLeg", "RightLeg")}
    longer = adapt(bind(sk, motion, mesh), mesh, bone_lengths=legs).positions
    e = mesh_edges(tris)
    then = np.linalg.norm(verts[:, e[:, 1]] - verts[:, e[:, 0]], axis=-1)

    def length(x):                                      # waist ring to hem ring, mean height
        return float(np.mean(x[:, :24, 2] - x[:, -24:, 2]))
    kept, scaled = carry_garment(g, longer), carry_garment(g, longer, keep_size=False)
    change = [np.linalg.norm(x[:, e[:, 1]] - x[:, e[:, 0]], axis=-1) / then - 1.0 for x in (kept, scaled)]
    assert abs(length(kept) - length(verts)) < 0.005
    assert length(scaled) - length(verts) > 0.03
    assert np.abs(change[0]).max() < 0.05
    assert np.median(change[1]) > 0.0 and change[1].max() < 0.15 + 0.03
    np.testing.assert_allclose(carry_garment(g, motion, keep_size=False), carry_garment(g, motion), atol=1e-9)
