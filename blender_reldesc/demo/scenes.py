"""The demo's scenes: generated humanoids, actions, environments, and the edits the demo makes
(a bridge bent, a beam lowered, a character grown). The Blender-level tests build on them too."""

from __future__ import annotations

import bpy
import numpy as np

from .. import adapter
from ..core import synthetic as S
from ..core.skeleton.armature import adapted_pose, basis_from_pose, joint_layout, split_basis


BEAM_X = 3.0


def _rest_joints():
    skel, offsets = S.humanoid()
    return skel, S.rest_joints(skel, offsets, root=(0.0, 0.0, S.HIP_HEIGHT))


def build_armature(name="Walker", collection=None):
    """A humanoid armature: one bone per joint that has children, tail at its
    first child (its spine child for the pelvis and chest)."""
    skel, rest = _rest_joints()

    def main(kids):
        return next((k for k in kids if skel.names[k].startswith(("Spine", "Neck"))), kids[0])
    return build_skeleton_armature(skel, rest, name, main, collection)


def animate_walk(arm, frames, start=1, name="Walk", walk=None):
    """Key the procedural walk (or ``walk = (skeleton, positions)``) on ``arm`` as action ``name``."""
    skel_walk, walk = walk if walk is not None else S.walk(frames)
    rig = adapter.read_rig(arm)
    skeleton, head_joint, tail_joint = joint_layout(rig.names, rig.parents)
    order = [skel_walk.index(n if not n.endswith(".tail") else _tail_joint_name(n, skel_walk))
             for n in skeleton.names]
    target = walk[:, order]
    rest_heads = rig.rest[:, :3, 3]
    rest_tails = rest_heads + rig.rest[:, :3, 1] * np.array([b.length for b in arm.data.bones])[:, None]
    rest_joints = np.concatenate([rest_heads, rest_tails[tail_joint >= 0]])
    F = len(walk)
    pose0 = np.broadcast_to(rig.rest, (F,) + rig.rest.shape).copy()
    pose = adapted_pose(skeleton, head_joint, np.broadcast_to(rest_joints, (F,) + rest_joints.shape), target, pose0)
    quats, locs = split_basis(basis_from_pose(rig.rest, rig.parents, pose))
    channels = [(b, "rotation_quaternion", quats[:, b]) for b in range(len(rig.names))]
    channels += [(b, "location", locs[:, b]) for b in np.flatnonzero(rig.parents < 0)]
    return adapter.write_action(arm, name, np.arange(start, start + F), rig, channels)


def _tail_joint_name(tail_name, skel_walk):
    bone = tail_name[: -len(".tail")]
    kids = skel_walk.children(skel_walk.index(bone))
    return skel_walk.names[kids[0]]


def mesh_object(name, verts, tris, collection):
    """A mesh object from arrays, linked into ``collection``."""
    me = bpy.data.meshes.new(name)
    me.from_pydata(verts.tolist(), [], tris.tolist())
    me.update()
    ob = bpy.data.objects.new(name, me)
    collection.objects.link(ob)
    return ob


def _empty_scene(frames, reset=True):
    """The scene (factory-fresh with ``reset``), frames 1..frames at 30 fps, and a new 'Environment' collection."""
    if reset:
        bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps = 30
    env = bpy.data.collections.new("Environment")
    scene.collection.children.link(env)
    return scene, env


def build_scene(frames=150, deck_cells=(60, 10), reset=True):
    """Fresh scene: armature 'Walker' with action 'Walk', collection 'Environment'
    holding 'Bridge' (a deck, 12 m x 2 m) and 'Beam' (over the path at x = 3 m).
    ``reset`` starts from factory settings (which also disables add-ons)."""
    scene, env = _empty_scene(frames, reset)
    deck_v, deck_t = S.grid(12.0, 2.0, *deck_cells, origin=(-2.0, -1.0))
    bridge = mesh_object("Bridge", deck_v, deck_t, env)
    beam_v, beam_t = S.box((BEAM_X, 0.0, 2.05), (0.3, 2.0, 0.2), subdivisions=3)
    beam = mesh_object("Beam", beam_v, beam_t, env)
    arm = build_armature()
    animate_walk(arm, frames)
    scene.frame_set(1)
    return scene, arm, env, bridge, beam


def build_stones_scene(frames=120):
    """Fresh scene: 'Walker' stepping over stones 'Stone.000'.. onto a 'Floor', all in 'Environment'."""
    scene, env = _empty_scene(frames)
    skel, motion, verts, tris, stones = S.stepping_stones(frames)
    ends = [s[0] for s in stones]
    floor_v, floor_t = verts[:ends[0]], tris[np.all(tris < ends[0], axis=1)]
    mesh_object("Floor", floor_v, floor_t, env)
    objects = []
    for k, (a, b, centre) in enumerate(stones):
        t = tris[np.all((tris >= a) & (tris < b), axis=1)] - a
        ob = mesh_object(f"Stone.{k:03d}", verts[a:b] - centre, t, env)
        ob.location = centre
        objects.append(ob)
    arm = build_armature()
    animate_walk(arm, frames, walk=(skel, motion))
    scene.frame_set(1)
    return scene, arm, env, objects


def build_ceiling_scene(frames=120):
    """Fresh scene: 'Walker' on a 'Floor' and a 'Ceiling' slab 6 m up (beyond every
    descriptor's reach), both in 'Environment'; moving the ceiling down inserts an obstacle."""
    return _walk_and_obstacle(frames, "Ceiling", S.ceiling_walk)


def build_post_scene(frames=120):
    """Fresh scene: 'Walker' on a 'Floor' and a 'Post' 8 m up (beyond every descriptor's reach),
    both in 'Environment'; setting the post down on the floor puts it on the path."""
    return _walk_and_obstacle(frames, "Post", S.post_walk)


def _walk_and_obstacle(frames, name, generated):
    """Fresh scene of ``generated(frames)`` (``synthetic.ceiling_walk``'s returns): the walk on a
    'Floor' and the obstacle as object ``name`` at its centre: scene, armature, 'Environment', it."""
    scene, env = _empty_scene(frames)
    skel, motion, verts, tris, (a, b), centre = generated(frames)
    mesh_object("Floor", verts[:a], tris[np.all(tris < a, axis=1)], env)
    obstacle = mesh_object(name, verts[a:b] - centre, tris[np.all(tris >= a, axis=1)] - a, env)
    obstacle.location = centre
    arm = build_armature()
    animate_walk(arm, frames, walk=(skel, motion))
    scene.frame_set(1)
    return scene, arm, env, obstacle


def build_chair_scene(frames=90):
    """Fresh scene: 'Walker' seated (action 'Sit') on a chair, its hands on the armrests, a
    table in front: 'Floor', 'Seat', 'Armrest.L', 'Armrest.R' and 'Table' in 'Environment'."""
    scene, env = _empty_scene(frames)
    skel, motion, verts, tris, parts = S.chair_scene(frames)
    objects = {}
    for name, (a, b) in parts.items():
        t = tris[np.all((tris >= a) & (tris < b), axis=1)] - a
        centre = verts[a:b].mean(axis=0) if name != "floor" else np.zeros(3)
        ob = mesh_object(name.title() if name != "armrest.L" and name != "armrest.R" else name.capitalize(),
                         verts[a:b] - centre, t, env)
        ob.location = centre
        objects[name] = ob
    arm = build_armature()
    animate_walk(arm, frames, name="Sit", walk=(skel, motion))
    scene.frame_set(1)
    return scene, arm, env, objects


def labelled_object(name, verts, tris, labels, names, collection):
    """A mesh object whose segments are vertex groups (``transfer``'s labels), origin at its centre."""
    centre = verts.mean(axis=0)
    ob = mesh_object(name, verts - centre, tris, collection)
    ob.location = centre
    for k, n in enumerate(names):
        vg = ob.vertex_groups.new(name=n)
        vg.add(np.unique(tris[labels == k]).tolist(), 1.0, 'REPLACE')
    return ob


def build_transfer_scene(frames=90, target="stool", seat_height=0.45, at=(1.6, 0.8)):
    """Fresh scene: 'Walker' seated (action 'Sit') on 'Chair' (vertex groups seat, back, legs) on
    'Floor' in 'Environment'; a '<target>' (``synthetic.seat_object``: stool, chair, armchair,
    bench) stands at ``at``, outside the environment."""
    scene, env = _empty_scene(frames)
    skel, motion, *_ = S.chair_scene(frames)
    floor = S.grid(6.0, 6.0, 24, 24, origin=(-3.0, -3.0))
    mesh_object("Floor", *floor, env)
    labelled_object("Chair", *S.seat_object("chair"), env)
    other = bpy.data.collections.new("Props")
    scene.collection.children.link(other)
    labelled_object(target.title(), *S.seat_object(target, seat_height=seat_height, at=at), other)
    arm = build_armature()
    animate_walk(arm, frames, name="Sit", walk=(skel, motion))
    scene.frame_set(1)
    return scene, arm, env


def bend_bridge(bridge, sag=0.3, at=7.0, width=1.5):
    """Sag the deck by up to ``sag`` metres around x = ``at`` (same topology)."""
    me = bridge.data
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    co[:, 2] -= sag * np.exp(-((co[:, 0] - at) / width) ** 2)
    me.vertices.foreach_set("co", co.ravel())
    me.update()


def lower_beam(beam, drop=0.3):
    beam.location.z -= drop


def grow_armature(arm, factor):
    """Every bone of ``arm`` ``factor`` times as long (its rest pose scaled about the
    armature's origin), in edit mode."""
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    # All positions first: a connected child's head is its parent's tail (moved with it).
    ends = [(eb, eb.head * factor, eb.tail * factor) for eb in arm.data.edit_bones]
    for eb, head, tail in ends:
        eb.head, eb.tail = head, tail
    bpy.ops.object.mode_set(mode='OBJECT')


def lengthen_legs(arm, factor, bones=("LeftUpLeg", "LeftLeg", "RightUpLeg", "RightLeg")):
    """The ``bones`` of ``arm`` (by default the thighs and shins, ``<Side>UpLeg``, ``<Side>Leg``)
    ``factor`` times as long, what hangs below them moved with them, in edit mode."""
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    eb = arm.data.edit_bones
    for name in bones:
        b = eb[name]
        tail = b.head + (b.tail - b.head) * factor
        move = tail - b.tail
        b.tail = tail
        for child in b.children_recursive:
            if not child.use_connect:
                child.head += move
            child.tail += move
    bpy.ops.object.mode_set(mode='OBJECT')


def build_skeleton_armature(skeleton, rest, name="Walker", main=None, collection=None):
    """An armature of ``skeleton`` at the rest joints ``rest`` (J,3): one bone per joint that has
    children, its tail at its main child (``main(children)``, default the first; a zero-length
    joint's bone, as Rigify's pelvis, 5 cm up), connected where it starts at its parent's tail."""
    arm_data = bpy.data.armatures.new(name)
    arm = bpy.data.objects.new(name, arm_data)
    (collection or bpy.context.scene.collection).objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    bones = {}
    for j in skeleton.order.tolist():
        kids = skeleton.children(j).tolist()
        if not kids:
            continue
        child = kids[0] if main is None else main(kids)
        eb = arm_data.edit_bones.new(skeleton.names[j])
        eb.head, eb.tail = rest[j], rest[child]
        if np.linalg.norm(rest[child] - rest[j]) < 1e-4:
            eb.tail = rest[j] + np.array([0.0, 0.0, 0.05])
        p = skeleton.parents[j]
        if p >= 0:
            eb.parent = bones[skeleton.names[p]]
            eb.use_connect = bool(np.allclose(bones[skeleton.names[p]].tail, eb.head))
        bones[skeleton.names[j]] = eb
    bpy.ops.object.mode_set(mode='OBJECT')
    for pb in arm.pose.bones:
        pb.rotation_mode = 'QUATERNION'
    return arm


def raise_floor(ob, centre, height=0.1, radius=0.6):
    """Raise mesh ``ob``'s vertices by a smooth bump ``height`` high at ``centre`` (x, y),
    ``radius`` wide (a Gaussian), as a sculpt would."""
    me = ob.data
    co = np.empty(len(me.vertices) * 3, np.float64)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    r2 = ((co[:, :2] - np.asarray(centre, float)[None]) ** 2).sum(axis=1)
    co[:, 2] += height * np.exp(-r2 / radius ** 2)
    me.vertices.foreach_set("co", co.ravel())
    me.update()


def build_convention_garment_scene(convention="bvh", garment="cape", frames=40):
    """Fresh scene: a rig of ``convention`` (``synthetic.convention_rig``) named 'Walker' walking
    (action 'Walk': the generated walk carried onto it, ``synthetic.on_convention``) on 'Floor' in
    'Environment', wearing ``garment`` ("cape" or "coat": ``synthetic.cape`` / ``coat`` made at
    its rest pose) parented to it with Blender's automatic weights. Returns ``(scene, arm, env,
    garment object, name)``, ``name(role)`` the rig's bone of a role."""
    scene, env = _empty_scene(frames)
    sk, off, roles = S.convention_rig(convention)
    rest = S.rest_joints(sk, off)
    _, walk = S.walk(frames)
    sk, motion, name = S.on_convention(convention, walk)
    x = motion[:, 0, 0]
    mesh_object("Floor", *S.grid(x.max() - x.min() + 4.0, 4.0, 60, 12, origin=(x.min() - 2.0, -2.0)), env)
    trunk = {"spine", "chest", "chest2", "neck", "head", "head_end"}

    def main(kids):                     # the trunk's child, else the first that is not a twist leaf
        ranked = sorted(kids, key=lambda k: (roles[k] not in trunk, roles[k] == "twist"))
        return ranked[0]
    arm = build_skeleton_armature(sk, rest, "Walker", main)
    animate_walk(arm, frames, name="Walk", walk=(sk, motion))
    make = {"cape": S.cape, "coat": S.coat}[garment]
    verts, tris = make(sk, rest, name)
    ob = mesh_object(garment.capitalize(), verts, tris, scene.collection)
    bpy.ops.object.select_all(action='DESELECT')
    ob.select_set(True)
    arm.select_set(True)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.parent_set(type='ARMATURE_AUTO')
    scene.frame_set(1)
    return scene, arm, env, ob, name


def curve_object(name, points, collection):
    """A poly curve through ``points`` (P,3), linked into ``collection``."""
    data = bpy.data.curves.new(name, 'CURVE')
    data.dimensions = '3D'
    spline = data.splines.new('POLY')
    spline.points.add(len(points) - 1)
    spline.points.foreach_set("co", np.c_[points, np.ones(len(points))].ravel().tolist())
    ob = bpy.data.objects.new(name, data)
    collection.objects.link(ob)
    return ob


def build_crowd_scene(frames=150, size=(24.0, 16.0), cells=(240, 160)):
    """Fresh scene: 'Walker' walking on flat ground (action 'Walk'), a 'Terrain' collection with
    'Hills' (sculpted-looking ground) and a curve 'Path' across them."""
    scene, env = _empty_scene(frames)
    env.name = "Terrain"
    verts, tris = S.grid(size[0], size[1], *cells, origin=(-4.0, -size[1] / 2), height=S.hills(0.35, 4.0))
    mesh_object("Hills", verts, tris, env)
    t = np.linspace(0.0, 1.0, 80)
    path = np.c_[16.0 * t, 2.5 * np.sin(2.0 * np.pi * t * 0.8), np.zeros_like(t)]
    curve = curve_object("Path", path, scene.collection)
    arm = build_armature()
    animate_walk(arm, frames)
    scene.frame_set(1)
    return scene, arm, env, curve


def build_pair_scene(frames=60, hold="hands"):
    """Fresh scene: 'Lead' and 'Partner' (the humanoid twice) standing face to face on 'Floor'
    in 'Environment', holding hands (actions 'HoldLead', 'HoldPartner'; ``synthetic.pair_scene``)
    or, with ``hold`` "shoulder", Lead's hand resting on Partner's shoulder ("wrestle": a
    collar tie, "hug": a hug)."""
    scene, env = _empty_scene(frames)
    skel, (a, b) = S.pair_scene(frames, apart=S.PAIR_APART[hold], hold=hold)
    mesh_object("Floor", *S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)), env)
    lead = build_armature("Lead")
    animate_walk(lead, frames, name="HoldLead", walk=(skel, a))
    partner = build_armature("Partner")
    animate_walk(partner, frames, name="HoldPartner", walk=(skel, b))
    scene.frame_set(1)
    return scene, lead, partner, env


def build_garment_scene(frames=60, rings=8, around=24):
    """Fresh scene: 'Walker' walking (action 'Walk') on 'Floor' in 'Environment', wearing
    'Skirt' (``synthetic.skirt`` at the rest pose, ``rings`` rings of ``around`` vertices),
    skinned to the hips by an Armature modifier: the skirt moves with whatever action the
    walker plays."""
    scene, env = _empty_scene(frames)
    skel, motion = S.walk(frames)
    x = motion[:, 0, 0]
    mesh_object("Floor", *S.grid(x.max() - x.min() + 4.0, 4.0, 40, 8, origin=(x.min() - 2.0, -2.0)), env)
    arm = build_armature()
    animate_walk(arm, frames, name="Walk", walk=(skel, motion))
    rest_skel, rest = _rest_joints()
    verts, tris = S.skirt(rest_skel, rest[None], rings=rings, around=around)
    skirt = mesh_object("Skirt", verts[0], tris, scene.collection)
    group = skirt.vertex_groups.new(name="Hips")
    group.add(list(range(len(verts[0]))), 1.0, 'REPLACE')
    mod = skirt.modifiers.new("Armature", 'ARMATURE')
    mod.object = arm
    scene.frame_set(1)
    return scene, arm, skirt, env



def build_retarget_scene(source="mixamo", target="ue", legs=1.15, arms="T", frames=60, floor=True, scale=1.0):
    """Fresh scene for a retarget: 'Source', a rig of ``source`` convention walking (action 'Walk':
    the generated walk carried onto it, its rest a capture's: ``synthetic.convention_clip``), and
    'Target', a rig of ``target`` convention (``synthetic.convention_rest``: legs ``legs`` times as
    long, arms ``arms``, all ``scale`` times as big) without an action, beside it; with ``floor``, a
    'Floor' in 'Environment'.
    Returns ``(scene, source armature, target armature, environment collection)``."""
    scene, env = _empty_scene(frames)
    _, walk = S.walk(frames)
    sk, rest, motion = S.convention_clip(source, walk)
    if floor:
        x = motion[:, 0, 0]
        mesh_object("Floor", *S.grid(x.max() - x.min() + 4.0, 4.0, 60, 12, origin=(x.min() - 2.0, -2.0)), env)
    src = build_skeleton_armature(sk, rest, "Source", _main_child(source, sk))
    animate_walk(src, frames, name="Walk", walk=(sk, motion))
    tsk, trest = S.convention_rest(target, legs=legs, arms=arms, scale=scale)
    tgt = build_skeleton_armature(tsk, trest, "Target", _main_child(target, tsk))
    scene.frame_set(1)
    return scene, src, tgt, env


def _main_child(convention, skeleton):
    """``build_skeleton_armature``'s ``main`` for a convention rig: the trunk's child, else the first
    that is not a twist leaf."""
    _, _, roles = S.convention_rig(convention)
    trunk = {"spine", "chest", "chest2", "neck", "head", "head_end"}

    def main(kids):
        return sorted(kids, key=lambda k: (roles[k] not in trunk, roles[k] == "twist"))[0]
    return main
