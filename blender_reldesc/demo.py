"""The demo: a generated humanoid walks across a bridge under a beam; the bridge
bends and the beam is lowered; the walk is adapted and rendered before/after.

``build_scene`` is also what the Blender-level tests use.
"""

from __future__ import annotations

import json
import os

import bpy
import numpy as np

from . import adapter, jobs
from .optional import feature
from .core import synthetic as S
from .core.skeleton.armature import adapted_pose, basis_from_pose, joint_layout, split_basis

BEAM_X = 3.0


def _rest_joints():
    skel, offsets = S.humanoid()
    pos = np.zeros((len(skel), 3))
    for j in skel.order:
        p = skel.parents[j]
        pos[j] = offsets[j] + (pos[p] if p >= 0 else [0.0, 0.0, S.HIP_HEIGHT])
    return skel, pos


def build_armature(name="Walker", collection=None):
    """A humanoid armature: one bone per joint that has children, tail at its
    first child (its spine child for the pelvis and chest)."""
    skel, rest = _rest_joints()
    arm_data = bpy.data.armatures.new(name)
    arm = bpy.data.objects.new(name, arm_data)
    (collection or bpy.context.scene.collection).objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    bones = {}
    for j in skel.order.tolist():
        kids = skel.children(j).tolist()
        if not kids:
            continue
        name_j = skel.names[j]
        main = next((k for k in kids if skel.names[k].startswith(("Spine", "Neck"))), kids[0])
        eb = arm_data.edit_bones.new(name_j)
        eb.head, eb.tail = rest[j], rest[main]
        p = skel.parents[j]
        if p >= 0:
            eb.parent = bones[skel.names[p]]
            eb.use_connect = bool(np.allclose(bones[skel.names[p]].tail, eb.head))
        bones[name_j] = eb
    bpy.ops.object.mode_set(mode='OBJECT')
    for pb in arm.pose.bones:
        pb.rotation_mode = 'QUATERNION'
    return arm


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
    scene, env = _empty_scene(frames)
    skel, motion, verts, tris, (a, b), centre = S.ceiling_walk(frames)
    mesh_object("Floor", verts[:a], tris[np.all(tris < a, axis=1)], env)
    slab = mesh_object("Ceiling", verts[a:b] - centre, tris[np.all(tris >= a, axis=1)] - a, env)
    slab.location = centre
    arm = build_armature()
    animate_walk(arm, frames, walk=(skel, motion))
    scene.frame_set(1)
    return scene, arm, env, slab


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


def add_stick_figure(arm, radius=0.035, color=(0.85, 0.35, 0.15)):
    """A body that reads as a person for rendering: a capsule per bone (a cylinder with a
    sphere at each joint), thicker on the trunk and thighs, and a head."""
    coll = bpy.data.collections.new("Figure")
    bpy.context.scene.collection.children.link(coll)
    mat = _material("Figure", color)

    def part(op, name, bone, location, rotation=(0.0, 0.0, 0.0), **size):
        op(**size)
        ob = bpy.context.active_object
        for c in ob.users_collection:
            c.objects.unlink(ob)
        coll.objects.link(ob)
        ob.data.materials.append(mat)
        ob.name = f"Figure.{name}"
        ob.parent = arm
        ob.parent_type = 'BONE'
        ob.parent_bone = bone.name
        # Bone parenting puts the child at the bone's tail, y along the bone.
        ob.matrix_parent_inverse.identity()
        ob.location = location
        ob.rotation_euler = rotation
        return ob

    thick = ("Hips", "Spine", "Spine1", "Spine2", "UpLeg")
    for bone in arm.data.bones:
        r = radius * (1.8 if any(bone.name.endswith(t) or bone.name == t for t in thick) else 1.0)
        part(bpy.ops.mesh.primitive_cylinder_add, bone.name, bone, (0.0, -bone.length / 2, 0.0),
             (np.pi / 2, 0.0, 0.0), vertices=16, radius=r, depth=bone.length)
        part(bpy.ops.mesh.primitive_uv_sphere_add, bone.name + ".joint", bone, (0.0, -bone.length, 0.0),
             segments=16, ring_count=8, radius=r)
        if bone.name == "Head":
            part(bpy.ops.mesh.primitive_uv_sphere_add, "Head.skull", bone, (0.0, 0.02, 0.02),
                 segments=24, ring_count=12, radius=0.11)
    return coll


def _material(name, color):
    mat = bpy.data.materials.new(name)
    mat.diffuse_color = (*color, 1.0)
    mat.use_nodes = True
    bsdf = mat.node_tree.nodes.get("Principled BSDF")
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = (*color, 1.0)
    return mat


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


def lengthen_legs(arm, factor):
    """The thighs and shins of ``arm`` (``<Side>UpLeg``, ``<Side>Leg``) ``factor`` times as long,
    the feet moved with them, in edit mode."""
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')
    eb = arm.data.edit_bones
    for side in ("Left", "Right"):
        for name in (side + "UpLeg", side + "Leg"):
            b = eb[name]
            tail = b.head + (b.tail - b.head) * factor
            move = tail - b.tail
            b.tail = tail
            for child in b.children_recursive:
                if not child.use_connect:
                    child.head += move
                child.tail += move
    bpy.ops.object.mode_set(mode='OBJECT')


def _label(scene, cam, text):
    """A caption at the top of the camera's view (rendered with the scene)."""
    curve = bpy.data.curves.new("Label", 'FONT')
    curve.body = text
    curve.size = 0.055
    curve.align_x = 'CENTER'
    ob = bpy.data.objects.new("Label", curve)
    mat = bpy.data.materials.new("Label")
    mat.use_nodes = True
    out = mat.node_tree.nodes.get("Material Output")
    emit = mat.node_tree.nodes.new("ShaderNodeEmission")
    emit.inputs["Strength"].default_value = 1.0
    mat.node_tree.links.new(emit.outputs["Emission"], out.inputs["Surface"])
    curve.materials.append(mat)
    scene.collection.objects.link(ob)
    ob.parent = cam
    ob.location = (0.0, 0.27, -1.0)                    # camera space: in front, near the top edge
    return ob


def _render(scene, path):
    scene.render.filepath = path
    try:
        bpy.ops.render.render(write_still=True)
    except RuntimeError:
        scene.render.engine = 'BLENDER_WORKBENCH'
        bpy.ops.render.render(write_still=True)


def _stage(scene, view, lens, resolution):
    """A camera at ``view`` ``(location, rotation_euler)``, a sun, a grey-blue world and Cycles
    at 16 samples on the CPU, writing PNG; returns the camera."""
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    cam.data.lens = lens
    cam.location, cam.rotation_euler = view
    scene.camera = cam
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", 'SUN'))
    sun.rotation_euler = (np.radians(50), np.radians(10), np.radians(30))
    scene.collection.objects.link(sun)
    world = bpy.data.worlds.new("World")
    world.color = (0.55, 0.6, 0.68)
    scene.world = world
    scene.render.engine = 'CYCLES'
    scene.cycles.samples = 16
    scene.cycles.device = 'CPU'
    scene.render.resolution_x, scene.render.resolution_y = resolution
    scene.render.image_settings.file_format = 'PNG'
    return cam


def render_before_after(scene, arm, source, adapted, frame, path, view=None, captions=None, others=(),
                        after_only=()):
    """Render ``frame`` with the source and the adapted action side by side into ``path``.

    view : ``(location, rotation_euler)`` of the camera (default: the bridge and beam).
    captions : the two captions (before, after).
    others : more ``(armature, source, adapted)`` switched along (partners).
    after_only : modifiers shown in the after half only (a garment's point cache)."""
    # Wide enough for the lowered beam and the bent stretch of the bridge behind it.
    cam = _stage(scene, view or ((BEAM_X + 1.6, -7.8, 1.15), (np.radians(88), 0.0, 0.0)), 35, (640, 420))
    halves = []
    captions = captions or ("Before: source motion in the edited scene", "After: adapted")
    for action, tag, text in ((source, "before", captions[0]), (adapted, "after", captions[1])):
        for ob, act in [(arm, action)] + [(o, s if tag == "before" else a) for o, s, a in others]:
            adapter.assign_action(ob, act)
            ob.animation_data.action_slot = act.slots[0]
        for mod in after_only:
            mod.show_viewport = mod.show_render = tag == "after"
        scene.frame_set(frame)
        label = _label(scene, cam, text)
        p = os.path.splitext(path)[0] + f"_{tag}.png"
        _render(scene, p)
        bpy.data.objects.remove(label)
        img = bpy.data.images.load(p)
        px = np.empty(img.size[0] * img.size[1] * 4, np.float32)
        img.pixels.foreach_get(px)
        halves.append(px.reshape(img.size[1], img.size[0], 4))
        bpy.data.images.remove(img)
    both = np.concatenate(halves, axis=1)
    out = bpy.data.images.new("before_after", both.shape[1], both.shape[0], alpha=True)
    out.pixels.foreach_set(both.ravel())
    out.filepath_raw = path
    out.file_format = 'PNG'
    out.save()
    for ob, act in [(arm, adapted)] + [(o, a) for o, _, a in others]:
        adapter.assign_action(ob, act)
        ob.animation_data.action_slot = act.slots[0]


def _bind_settings(scene, arm, env):
    """Point the scene's settings at the walker and its environment."""
    if not hasattr(bpy.types.Scene, "reldesc"):
        from . import properties
        properties.register()
    scene.reldesc.armature, scene.reldesc.environment = arm, env


def _bind(scene, arm, env, body_height=None):
    """Point the scene's settings at the walker and its environment, bind; the bind report."""
    _bind_settings(scene, arm, env)
    return jobs.bind_job(scene, arm, env.name, body_height)


def _write(out_dir, report):
    """report.json and demo.blend in ``out_dir``; returns the report."""
    with open(os.path.join(out_dir, "report.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(os.path.join(out_dir, "demo.blend")), copy=False)
    backup = os.path.join(out_dir, "demo.blend1")
    if os.path.exists(backup):
        os.remove(backup)
    return report


#: ``demo --scene`` choices.
from .cli import DEMO_SCENES as SCENES  # noqa: E402


def run(out_dir, frames=150, scene_name="bridge"):
    """The main job on a generated scene; writes demo.blend, report.json, before_after.png.

    scene_name : "bridge" (a walk over a bridge that sags, under a beam that is lowered),
        "stones" (a walk over stepping stones, one of which is moved a metre sideways after
        binding: the foot that stood on it is re-positioned onto another surface), "ceiling"
        (a ceiling slab far above at binding is brought down over the path, 8 cm below the top
        of the head: the root is replanned so the walk ducks under it, the paper's Fig. 9),
        "chair" (a seated character, Fig. 12: the left armrest is taken away and the seat
        lowered; the hand moves onto the seat, the pelvis follows the seat down), "crowd" (a
        walk on flat ground, walked by a crowd along a curve over hills), "transfer" (sitting
        on a chair moved onto a stool elsewhere in the room, thesis ch. 4), "pair" (two
        characters holding hands, one grown 20 %: baked together, the hands still meet, §9) or
        "garment" (a skirt carried onto a walk whose legs got 15 % longer, §9)."""
    if scene_name not in SCENES:
        raise ValueError(f"unknown demo scene '{scene_name}': use one of {', '.join(SCENES)}")
    os.makedirs(out_dir, exist_ok=True)
    if scene_name == "stones":
        return _run_stones(out_dir)
    if scene_name == "crowd":
        return _run_crowd(out_dir)
    if scene_name == "ceiling":
        return _run_ceiling(out_dir)
    if scene_name == "chair":
        return _run_chair(out_dir)
    if scene_name == "transfer":
        return _run_transfer(out_dir)
    if scene_name == "pair":
        return _run_pair(out_dir)
    if scene_name == "garment":
        return _run_garment(out_dir)
    scene, arm, env, bridge, beam = build_scene(frames)
    bind_report = _bind(scene, arm, env)
    bend_bridge(bridge)
    lower_beam(beam)
    bake_report = jobs.bake_job(scene, arm)
    source = bpy.data.actions["Walk"]
    adapted = bpy.data.actions[bake_report["action"]]
    add_stick_figure(arm)
    # The frame where the head is closest to the beam.
    head = jobs.Bound(arm).binding.motion[:, jobs.Bound(arm).binding.skeleton.index("Head")]
    frame = int(np.argmin(np.abs(head[:, 0] - BEAM_X))) + 1
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"))
    report = dict(bake_report, bind=bind_report, render_frame=frame)
    return _write(out_dir, report)


def _run_stones(out_dir, frames=120):
    """Stepping stones: bind, move the stone under the left foot's second step 1 m sideways,
    bake with contact re-positioning, render the middle of that step before and after."""
    scene, arm, env, stones = build_stones_scene(frames)
    bind_report = _bind(scene, arm, env)
    rows, _ = jobs.contacts_job(scene, arm)
    row = next(r for r in rows if r["effector"] == "LeftFoot" and r["start"] > 30)
    where = np.array(row["position"])
    stone = min(stones, key=lambda ob: np.linalg.norm(np.array(ob.location)[:2] - where[:2]))
    stone.location.y += 1.0
    bpy.context.view_layer.update()
    bake_report = jobs.bake_job(scene, arm, reposition_contacts=True)
    source = bpy.data.actions["Walk"]
    adapted = bpy.data.actions[bake_report["action"]]
    add_stick_figure(arm)
    frame = (row["start"] + row["end"]) // 2
    view = ((where[0] + 0.4, where[1] - 6.2, 2.3), (np.radians(73), 0.0, np.radians(4)))
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"), view,
                        ("Before: stone moved, foot on air", "After: foot re-positioned"))
    report = dict(bake_report, bind=bind_report, render_frame=frame, scene="stones", moved_stone=stone.name)
    return _write(out_dir, report)


def _run_ceiling(out_dir, frames=120, height=1.6):
    """The ceiling: bind with the slab far above, bring it down to ``height`` (its centre) over
    the path, bake with contact re-positioning (the root is replanned), render the frame where
    the hips are lowest before and after."""
    scene, arm, env, slab = build_ceiling_scene(frames)
    bind_report = _bind(scene, arm, env)
    slab.location.z = height
    bpy.context.view_layer.update()
    bake_report = jobs.bake_job(scene, arm, reposition_contacts=True)
    source = bpy.data.actions["Walk"]
    adapted = bpy.data.actions[bake_report["action"]]
    add_stick_figure(arm)
    bound = jobs.Bound(arm)
    hips = bound.binding.skeleton.index("Hips")
    x = bound.binding.motion[:, hips, 0]
    frame = int(np.argmin(np.abs(x - slab.location.x))) + 1
    view = ((slab.location.x + 0.2, -6.5, 1.2), (np.radians(88), 0.0, np.radians(2)))
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"), view,
                        ("Before: a ceiling brought down, head through it", "After: root replanned"))
    report = dict(bake_report, bind=bind_report, render_frame=frame, scene="ceiling")
    return _write(out_dir, report)


def _run_chair(out_dir, frames=90):
    """The chair (Fig. 12): bind the seated clip (its body height given: sitting, the clip does
    not show it), take the left armrest away (moved down out of sight, its painted influence 0
    through the 'Removed' vertex group) and lower the seat 10 cm, bake with contact
    re-positioning, render the middle frame before and after."""
    scene, arm, env, objects = build_chair_scene(frames)
    bind_report = _bind(scene, arm, env, body_height=1.75)
    rest = objects["armrest.L"]
    rest.vertex_groups.new(name="Removed")               # in the group with no vertex: influence 0
    scene.reldesc.influence_group = "Removed"
    rest.location.z -= 3.0
    objects["seat"].location.z -= 0.10
    bpy.context.view_layer.update()
    bake_report = jobs.bake_job(scene, arm, reposition_contacts=True)
    source = bpy.data.actions["Sit"]
    adapted = bpy.data.actions[bake_report["action"]]
    add_stick_figure(arm)
    frame = frames // 2
    view = ((1.9, 2.85, 1.5), (np.radians(76.0), 0.0, np.radians(146.9)))
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"), view,
                        ("Before: armrest gone, seat lowered", "After: hand on the seat, pelvis followed"))
    report = dict(bake_report, bind=bind_report, render_frame=frame, scene="chair")
    return _write(out_dir, report)


def _run_transfer(out_dir, frames=90):
    """Transfer (thesis ch. 4): a character sitting on a chair (seat, back, legs as vertex
    groups), the sitting moved onto a stool (seat, legs) elsewhere in the room; render a frame
    before and after."""
    transfer_job = feature("transfer").transfer_job
    scene, arm, env = build_transfer_scene(frames, target="stool", at=(1.6, 0.8))
    bind_report = _bind(scene, arm, env)
    report = transfer_job(scene, arm, "Chair", "Stool")
    source = bpy.data.actions["Sit"]
    adapted = bpy.data.actions[report["action"]]
    add_stick_figure(arm)
    frame = frames // 2
    view = ((0.8, -5.5, 1.4), (np.radians(82), 0.0, 0.0))
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"), view,
                        ("Before: sitting on the chair", "After: transferred to the stool"))
    return _write(out_dir, dict(report, bind=bind_report, render_frame=frame, scene="transfer"))


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


def _run_crowd(out_dir, count=9, spacing=0.9):
    """A crowd of ``count`` walkers along a curve over hills, from one walk on flat ground;
    renders the middle frame from above the path."""
    walking = feature("walking")
    scene, arm, env, curve = build_crowd_scene()
    if not hasattr(bpy.types.Scene, "reldesc"):
        from . import properties
        properties.register()
    add_stick_figure(arm)
    report = walking.walk_job(scene, arm, env.name, path=curve.name, crowd=count, spacing=spacing)
    arm.hide_render = True
    for ob in bpy.data.objects:
        if ob.parent == arm:
            ob.hide_render = True
    curve.hide_render = True
    frame = report["frame_start"] + report["frames"] // 2
    _stage(scene, ((8.0, -13.0, 7.5), (np.radians(62), 0.0, np.radians(8))), 30, (960, 540))
    scene.frame_set(frame)
    _render(scene, os.path.abspath(os.path.join(out_dir, "crowd.png")))
    report = dict(report, scene="crowd", render_frame=frame)
    return _write(out_dir, report)


def build_pair_scene(frames=60, hold="hands"):
    """Fresh scene: 'Lead' and 'Partner' (the humanoid twice) standing face to face on 'Floor'
    in 'Environment', holding hands (actions 'HoldLead', 'HoldPartner'; ``synthetic.pair_scene``)
    or, with ``hold`` "shoulder", Lead's hand resting on Partner's shoulder."""
    scene, env = _empty_scene(frames)
    skel, (a, b) = S.pair_scene(frames, apart=0.6 if hold == "hands" else 0.5, hold=hold)
    mesh_object("Floor", *S.grid(4.0, 4.0, 16, 16, origin=(-2.0, -2.0)), env)
    lead = build_armature("Lead")
    animate_walk(lead, frames, name="HoldLead", walk=(skel, a))
    partner = build_armature("Partner")
    animate_walk(partner, frames, name="HoldPartner", walk=(skel, b))
    scene.frame_set(1)
    return scene, lead, partner, env


def _run_pair(out_dir, frames=90, grow=1.2):
    """Two characters holding hands, bound together; the partner grown ``grow`` times (its
    bones); both baked together; the middle frame rendered before (the sources: the hands
    apart) and after (the hands meet)."""
    PartnersBindJob = feature("partners").PartnersBindJob
    scene, lead, partner, env = build_pair_scene(frames)
    _bind_settings(scene, lead, env)
    bind_report = PartnersBindJob(scene, lead, env.name, [partner.name]).run()
    grow_armature(partner, grow)
    scene.frame_set(1)
    bake_report = jobs.bake_job(scene, lead)
    other = bake_report["partners"][0]
    add_stick_figure(lead)
    add_stick_figure(partner, color=(0.2, 0.45, 0.8))
    frame = frames // 2
    gaps = {}
    for tag, (a, b) in (("source", ("HoldLead", "HoldPartner")), ("adapted", (bake_report["action"], other["action"]))):
        for ob, name in ((lead, a), (partner, b)):
            adapter.assign_action(ob, bpy.data.actions[name])
            ob.animation_data.action_slot = bpy.data.actions[name].slots[0]
        scene.frame_set(frame)
        p = (np.array(lead.matrix_world) @ np.r_[lead.pose.bones["RightHand"].head, 1.0])[:3]
        q = (np.array(partner.matrix_world) @ np.r_[partner.pose.bones["LeftHand"].head, 1.0])[:3]
        gaps[tag] = float(np.linalg.norm(p - q))
    view = ((0.0, -4.2, 1.25), (np.radians(88), 0.0, 0.0))
    render_before_after(scene, lead, bpy.data.actions["HoldLead"], bpy.data.actions[bake_report["action"]], frame,
                        os.path.join(out_dir, "before_after.png"), view,
                        ("Before: partner grown 20 %, hands apart", "After: baked together, hands meet"),
                        others=[(partner, bpy.data.actions["HoldPartner"], bpy.data.actions[other["action"]])])
    report = dict(bake_report, bind=bind_report, render_frame=frame, scene="pair",
                  hands_apart_at_render_frame=gaps)
    return _write(out_dir, report)


def _run_garment(out_dir, frames=60, legs=1.15):
    """A skirt on a walk: bind, bind the skirt as a garment, lengthen the legs ``legs`` times,
    bake; the skirt is carried (a PC2 point cache and a Mesh Cache modifier); the middle frame
    rendered before (the source walk on the longer legs, the skirt skinned to the hips) and
    after."""
    garments = feature("garments")
    scene, arm, skirt, env = build_garment_scene(frames, rings=30, around=64)
    # Saved first: the bake writes the point cache beside the .blend (an unsaved file's would
    # go to the temporary folder, and demo.blend would point there).
    bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(os.path.join(out_dir, "demo.blend")))
    bind_report = _bind(scene, arm, env)
    garment_report = garments.bind_garment(scene, arm, skirt.name)
    lengthen_legs(arm, legs)
    scene.frame_set(1)
    bake_report = jobs.bake_job(scene, arm)
    add_stick_figure(arm)
    skirt.data.materials.append(_material("Skirt", (0.25, 0.55, 0.35)))
    frame = frames // 2
    hips = jobs.Bound(arm).binding.motion[frame - 1, jobs.Bound(arm).binding.skeleton.index("Hips")]
    view = ((hips[0], -4.6, 0.9), (np.radians(90), 0.0, 0.0))
    render_before_after(scene, arm, bpy.data.actions["Walk"], bpy.data.actions[bake_report["action"]], frame,
                        os.path.join(out_dir, "before_after.png"), view,
                        ("Before: legs 15 % longer, skirt skinned", "After: walk adapted, skirt carried"),
                        after_only=[skirt.modifiers[garments.MODIFIER]])
    # What the render shows, measured: the skirt as it plays (the point cache) against the
    # source's (skinned, the source walk) at the render frame.
    mod = skirt.modifiers[garments.MODIFIER]
    shown = {}
    for tag, action, on in (("source", bpy.data.actions["Walk"], False),
                            ("carried", bpy.data.actions[bake_report["action"]], True)):
        adapter.assign_action(arm, action)
        arm.animation_data.action_slot = action.slots[0]
        mod.show_viewport = on
        scene.frame_set(frame)
        ev = skirt.evaluated_get(bpy.context.evaluated_depsgraph_get())
        co = np.empty(len(ev.data.vertices) * 3)
        ev.data.vertices.foreach_get("co", co)
        shown[tag] = co.reshape(-1, 3) @ np.array(skirt.matrix_world)[:3, :3].T + np.array(skirt.matrix_world)[:3, 3]
    mod.show_viewport = True
    edges = np.array([e.vertices[:] for e in skirt.data.edges])
    length = {k: np.linalg.norm(v[edges[:, 1]] - v[edges[:, 0]], axis=1) for k, v in shown.items()}
    report = dict(bake_report, bind=bind_report, garment=garment_report, render_frame=frame, scene="garment",
                  skirt_rise=float((shown["carried"][:, 2] - shown["source"][:, 2]).mean()),
                  edge_change_max=float(np.abs(length["carried"] / length["source"] - 1.0).max()))
    return _write(out_dir, report)


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
