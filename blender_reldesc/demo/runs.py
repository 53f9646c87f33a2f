"""The demo's runs: build a scene, bind, edit, bake (or walk, transfer...), render before/after,
write demo.blend and report.json."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import bpy
import numpy as np

from .. import adapter, jobs
from ..commands import DEMO_SCENES as SCENES
from ..optional import feature
from .render import _material, _render, _stage, add_stick_figure, render_before_after
from .scenes import (BEAM_X, bend_bridge, build_ceiling_scene, build_chair_scene, build_crowd_scene,
                     build_garment_scene, build_pair_scene, build_post_scene, build_retarget_scene, build_scene,
                     build_stones_scene, build_transfer_scene, grow_armature, lengthen_legs, lower_beam)


def _bind_settings(scene, arm, env):
    """Point the scene's settings at the walker and its environment."""
    adapter.scene.ensure_registered()
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


#: the frames of each scene's demo (the crowd's: its scene's own)
FRAMES = dict(start=150, bridge=150, stones=120, ceiling=120, post=120, chair=90, transfer=90, pair=90, garment=60, retarget=60)


def prepare(scene_name, out_dir, frames=None, blend_name="demo.blend", **edit):
    """Build the demo scene ``scene_name``, bind it and make its edit: everything the demo does
    before the bake (or the walk, the transfer, the retarget), with the panel's fields set so that
    one button finishes it (``make examples`` saves this). ``out_dir`` / ``blend_name`` is where the
    garment scene saves itself first: its bake writes the point cache beside the .blend.

    Returns a namespace: ``scene``, ``arm`` (the character the panel points at; the retarget's
    target), ``bind`` (the bind report, None where nothing is bound) and what the scene's run needs
    (``row``, ``where``, ``stone``; ``obstacle``; ``partner``; ``skirt``, ``garment``; ``source``;
    ``curve``; ``env``)."""
    if scene_name not in EXAMPLES:
        raise ValueError(f"unknown demo scene '{scene_name}': use one of {', '.join(EXAMPLES)}")
    frames = frames or FRAMES.get(scene_name)
    kw = {} if frames is None else {"frames": frames}
    if scene_name == "start":                   # the bridge, nothing bound or edited yet
        scene, arm, env, bridge, beam = build_scene(**kw)
        _bind_settings(scene, arm, env)
        return SimpleNamespace(scene=scene, arm=arm, env=env, bind=None, bridge=bridge, beam=beam)
    if scene_name == "bridge":
        scene, arm, env, bridge, beam = build_scene(**kw)
        bind_report = _bind(scene, arm, env)
        bend_bridge(bridge)
        lower_beam(beam)
        return SimpleNamespace(scene=scene, arm=arm, env=env, bind=bind_report)
    if scene_name == "stones":
        scene, arm, env, stones = build_stones_scene(**kw)
        bind_report = _bind(scene, arm, env)
        rows, _ = jobs.contacts_job(scene, arm)
        row = next(r for r in rows if r["effector"] == "LeftFoot" and r["start"] > 30)
        where = np.array(row["position"])
        stone = min(stones, key=lambda ob: np.linalg.norm(np.array(ob.location)[:2] - where[:2]))
        stone.location.y += 1.0
        bpy.context.view_layer.update()
        scene.reldesc.reposition_contacts = True
        return SimpleNamespace(scene=scene, arm=arm, env=env, bind=bind_report, row=row, where=where, stone=stone)
    if scene_name in ("ceiling", "post"):
        build = build_ceiling_scene if scene_name == "ceiling" else build_post_scene
        scene, arm, env, obstacle = build(**kw)
        bind_report = _bind(scene, arm, env)
        obstacle.location.z = edit.get("height", 0.5 * obstacle.dimensions.z)
        bpy.context.view_layer.update()
        scene.reldesc.reposition_contacts = True
        return SimpleNamespace(scene=scene, arm=arm, env=env, bind=bind_report, obstacle=obstacle, name=scene_name)
    if scene_name == "chair":
        scene, arm, env, objects = build_chair_scene(**kw)
        bind_report = _bind(scene, arm, env, body_height=1.75)
        rest = objects["armrest.L"]
        rest.vertex_groups.new(name="Removed")               # in the group with no vertex: influence 0
        scene.reldesc.influence_group = "Removed"
        rest.location.z -= 3.0
        objects["seat"].location.z -= 0.10
        bpy.context.view_layer.update()
        scene.reldesc.reposition_contacts = True
        return SimpleNamespace(scene=scene, arm=arm, env=env, bind=bind_report)
    if scene_name == "transfer":
        scene, arm, env = build_transfer_scene(**kw, target="stool", at=(1.6, 0.8))
        bind_report = _bind(scene, arm, env)
        scene.reldesc.transfer_from = bpy.data.objects["Chair"]
        scene.reldesc.transfer_to = bpy.data.objects["Stool"]
        return SimpleNamespace(scene=scene, arm=arm, env=env, bind=bind_report)
    if scene_name == "crowd":
        scene, arm, env, curve = build_crowd_scene(**kw)
        adapter.scene.ensure_registered()
        s = scene.reldesc
        s.armature, s.walk_path, s.walk_terrain = arm, curve, env
        s.walk_crowd, s.walk_spacing = edit.get("count", 9), edit.get("spacing", 0.9)
        return SimpleNamespace(scene=scene, arm=arm, env=env, curve=curve, bind=None)
    if scene_name == "pair":
        PartnersBindJob = feature("partners").PartnersBindJob
        scene, lead, partner, env = build_pair_scene(**kw)
        _bind_settings(scene, lead, env)
        bind_report = PartnersBindJob(scene, lead, env.name, [partner.name]).run()
        grow_armature(partner, edit.get("grow", 1.2))
        scene.frame_set(1)
        return SimpleNamespace(scene=scene, arm=lead, partner=partner, env=env, bind=bind_report)
    if scene_name == "garment":
        garments = feature("garment")
        scene, arm, skirt, env = build_garment_scene(**kw, rings=30, around=64)
        # Saved first: the bake writes the point cache beside the .blend (an unsaved file's would
        # go to the temporary folder, and the saved file would point there).
        bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(os.path.join(out_dir, blend_name)))
        bind_report = _bind(scene, arm, env)
        garment_report = garments.bind_garment(scene, arm, skirt.name)
        lengthen_legs(arm, edit.get("legs", 1.15))
        scene.frame_set(1)
        return SimpleNamespace(scene=scene, arm=arm, env=env, skirt=skirt, bind=bind_report, garment=garment_report)
    scene, src, tgt, env = build_retarget_scene("mixamo", "rigify", edit.get("legs", 0.8), "T", kw.get("frames", 60),
                                                scale=edit.get("scale", 1.2))
    adapter.scene.ensure_registered()
    s = scene.reldesc
    s.retarget_source, s.retarget_target, s.retarget_environment = src, tgt, env
    return SimpleNamespace(scene=scene, arm=tgt, source=src, env=env, bind=None)


#: what is left to do in each example file (``make examples``), shown in the file's text block
EXAMPLE_STEPS = {
    "start": "The getting-started scene: a walk over a bridge under a beam, nothing bound yet; the panel points "
             "at the armature 'Walker' and the collection 'Environment'. Press Bind, lower the beam (select "
             "it, G Z -0.3), turn on Live Preview and play, then press Bake.",
    "bridge": "The walk is bound; the bridge has been bent and the beam lowered. Press Bake (or turn on Live "
              "Preview and play): the feet stay on the bridge and the walk ducks under the beam.",
    "stones": "The walk is bound and its contacts found; a stepping stone has been moved 1 m. Re-position "
              "Contacts is on: press Bake, and the foot that stood on the moved stone finds another surface.",
    "ceiling": "The walk is bound with the ceiling far above; the ceiling has been brought down over the path. "
               "Re-position Contacts is on: press Bake, and the root is replanned under it.",
    "post": "The walk is bound with the post far above; the post has been set down on the path. Re-position "
            "Contacts is on: press Bake, and the walk steps round it.",
    "chair": "The seated clip is bound; the left armrest has been taken away (influence group 'Removed') and "
             "the seat lowered 10 cm. Re-position Contacts is on: press Bake.",
    "transfer": "The sitting is bound to the chair; the panel's Transfer fields point from 'Chair' to 'Stool'. "
                "Press Transfer (sub-panel Transfer).",
    "crowd": "A walk on flat ground; the Walk sub-panel points at the curve 'Path' over the hills, 9 "
             "characters 0.9 m apart. Press Walk.",
    "pair": "Two characters holding hands are bound together; the partner has been grown 20 %. Press Bake: "
            "both are baked, and the hands meet.",
    "garment": "The walk and the skirt are bound; the legs have been made 15 % longer. Press Bake: the skirt "
               "is carried (a point cache beside this file).",
    "retarget": "A walk on a Mixamo-named rig ('Source') and a bigger Rigify-named rig in a T-pose with shorter "
                "legs ('Target'). Press Find Map, then Retarget (sub-panel Retarget).",
}
TEXT_BLOCK = "reldesc_example"
#: the example files: the getting-started scene, then every demo scene
EXAMPLES = ("start",) + tuple(SCENES)


def write_examples(out_dir, names=None, progress=None):
    """``make examples``: each demo scene (``names``, default all) prepared as ``prepare`` leaves it,
    saved as ``out_dir/<name>.blend`` with a text block saying what to press (a file already there
    is kept as ``<name>.blend1``); the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name in names or EXAMPLES:
        path = os.path.abspath(os.path.join(out_dir, f"{name}.blend"))
        # A file already there (an animator may have worked in it) becomes <name>.blend1, as
        # Blender keeps a saved-over file; the saves made on the way leave no backup of their own.
        previous, backup = path + ".previous", path + "1"
        had_backup = os.path.exists(backup)
        if os.path.exists(path):
            os.replace(path, previous)
        prepare(name, out_dir, blend_name=f"{name}.blend")
        text = bpy.data.texts.new(TEXT_BLOCK)
        text.write(f"blender_reldesc example '{name}'\n\n{EXAMPLE_STEPS[name]}\n")
        bpy.context.scene.frame_set(1)
        bpy.ops.wm.save_as_mainfile(filepath=path, copy=False)
        if os.path.exists(previous):
            os.replace(previous, backup)
        elif os.path.exists(backup) and not had_backup:
            os.remove(backup)
        paths.append(path)
        if progress:
            progress(name, path)
    return paths


def run(out_dir, frames=150, scene_name="bridge"):
    """The main job on a generated scene; writes demo.blend, report.json, before_after.png.

    scene_name : "bridge" (a walk over a bridge that sags, under a beam that is lowered),
        "stones" (a walk over stepping stones, one of which is moved a metre sideways after
        binding: the foot that stood on it is re-positioned onto another surface), "ceiling"
        (a ceiling slab far above at binding is brought down over the path, 8 cm below the top
        of the head: the root is replanned so the walk ducks under it, the paper's Fig. 9), "post"
        (a post far above at binding is set down on the path, too tall to duck under: the walk
        steps round it, feet and all),
        "chair" (a seated character, Fig. 12: the left armrest is taken away and the seat
        lowered; the hand moves onto the seat, the pelvis follows the seat down), "crowd" (a
        walk on flat ground, walked by a crowd along a curve over hills), "transfer" (sitting
        on a chair moved onto a stool elsewhere in the room, thesis ch. 4), "pair" (two
        characters holding hands, one grown 20 %: baked together, the hands still meet, §9) or
        "garment" (a skirt carried onto a walk whose legs got 15 % longer, §9), "retarget" (a walk
        on a Mixamo-named rig onto an Unreal-named rig in a T-pose with shorter legs: the naive
        retarget before, ours after)."""
    if scene_name not in SCENES:
        raise ValueError(f"unknown demo scene '{scene_name}': use one of {', '.join(SCENES)}")
    os.makedirs(out_dir, exist_ok=True)
    if scene_name == "stones":
        return _run_stones(out_dir)
    if scene_name == "crowd":
        return _run_crowd(out_dir)
    if scene_name == "ceiling":
        return _run_ceiling(out_dir)
    if scene_name == "post":
        return _run_post(out_dir)
    if scene_name == "chair":
        return _run_chair(out_dir)
    if scene_name == "transfer":
        return _run_transfer(out_dir)
    if scene_name == "pair":
        return _run_pair(out_dir)
    if scene_name == "garment":
        return _run_garment(out_dir)
    if scene_name == "retarget":
        return _run_retarget(out_dir)
    s = prepare("bridge", out_dir, frames)
    scene, arm, bind_report = s.scene, s.arm, s.bind
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
    s = prepare("stones", out_dir, frames)
    scene, arm, bind_report, row, where, stone = s.scene, s.arm, s.bind, s.row, s.where, s.stone
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
    the hips pass under it before and after."""
    return _run_obstacle(out_dir, prepare("ceiling", out_dir, frames, height=height),
                         lambda x: ((x + 0.2, -6.5, 1.2), (np.radians(88), 0.0, np.radians(2))),
                         ("Before: a ceiling brought down, head through it", "After: root replanned"))


def _run_post(out_dir, frames=120):
    """The post: bind with it far above, set it down on the floor on the path, bake with contact
    re-positioning (the root is replanned aside, the feet step aside with it), render the frame
    where the hips pass it, seen from ahead, before and after."""
    return _run_obstacle(out_dir, prepare("post", out_dir, frames),
                         lambda x: ((x + 4.5, 0.0, 1.6), (np.radians(80), 0.0, np.radians(90))),
                         ("Before: a post set down, walked through", "After: stepped round it"))


def _run_obstacle(out_dir, s, view, captions):
    """An obstacle bound far above brought onto the walk's path (``s``, prepared): bake with
    contact re-positioning, render the frame where the hips pass it (the camera ``view(its x)``)
    before and after."""
    scene, arm, bind_report, obstacle, name = s.scene, s.arm, s.bind, s.obstacle, s.name
    bake_report = jobs.bake_job(scene, arm, reposition_contacts=True)
    source = bpy.data.actions["Walk"]
    adapted = bpy.data.actions[bake_report["action"]]
    add_stick_figure(arm)
    bound = jobs.Bound(arm)
    hips = bound.binding.skeleton.index("Hips")
    x = bound.binding.motion[:, hips, 0]
    frame = int(np.argmin(np.abs(x - obstacle.location.x))) + 1
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"),
                        view(obstacle.location.x), captions)
    report = dict(bake_report, bind=bind_report, render_frame=frame, scene=name)
    return _write(out_dir, report)


def _run_chair(out_dir, frames=90):
    """The chair (Fig. 12): bind the seated clip (its body height given: sitting, the clip does
    not show it), take the left armrest away (moved down out of sight, its painted influence 0
    through the 'Removed' vertex group) and lower the seat 10 cm, bake with contact
    re-positioning, render the middle frame before and after."""
    s = prepare("chair", out_dir, frames)
    scene, arm, bind_report = s.scene, s.arm, s.bind
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
    s = prepare("transfer", out_dir, frames)
    scene, arm, bind_report = s.scene, s.arm, s.bind
    report = transfer_job(scene, arm, "Chair", "Stool")
    source = bpy.data.actions["Sit"]
    adapted = bpy.data.actions[report["action"]]
    add_stick_figure(arm)
    frame = frames // 2
    view = ((0.8, -5.5, 1.4), (np.radians(82), 0.0, 0.0))
    render_before_after(scene, arm, source, adapted, frame, os.path.join(out_dir, "before_after.png"), view,
                        ("Before: sitting on the chair", "After: transferred to the stool"))
    return _write(out_dir, dict(report, bind=bind_report, render_frame=frame, scene="transfer"))


def _run_crowd(out_dir, count=9, spacing=0.9):
    """A crowd of ``count`` walkers along a curve over hills, from one walk on flat ground;
    renders the middle frame from above the path."""
    locomotion = feature("locomotion")
    s = prepare("crowd", out_dir, count=count, spacing=spacing)
    scene, arm, env, curve = s.scene, s.arm, s.env, s.curve
    add_stick_figure(arm)
    report = locomotion.walk_job(scene, arm, env.name, path=curve.name, crowd=count, spacing=spacing)
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


def _run_pair(out_dir, frames=90, grow=1.2):
    """Two characters holding hands, bound together; the partner grown ``grow`` times (its
    bones); both baked together; the middle frame rendered before (the sources: the hands
    apart) and after (the hands meet)."""
    s = prepare("pair", out_dir, frames, grow=grow)
    scene, lead, partner, bind_report = s.scene, s.arm, s.partner, s.bind
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
    s = prepare("garment", out_dir, frames, legs=legs)
    scene, arm, skirt, bind_report, garment_report = s.scene, s.arm, s.skirt, s.bind, s.garment
    bake_report = jobs.bake_job(scene, arm)
    add_stick_figure(arm)
    skirt.data.materials.append(_material("Skirt", (0.25, 0.55, 0.35)))
    frame = frames // 2
    hips = jobs.Bound(arm).binding.motion[frame - 1, jobs.Bound(arm).binding.skeleton.index("Hips")]
    view = ((hips[0], -4.6, 0.9), (np.radians(90), 0.0, 0.0))
    render_before_after(scene, arm, bpy.data.actions["Walk"], bpy.data.actions[bake_report["action"]], frame,
                        os.path.join(out_dir, "before_after.png"), view,
                        ("Before: legs 15 % longer, skirt skinned", "After: walk adapted, skirt carried"),
                        after_only=[skirt.modifiers[adapter.pointcache.MODIFIER]])
    # What the render shows, measured: the skirt as it plays (the point cache) against the
    # source's (skinned, the source walk) at the render frame.
    mod = skirt.modifiers[adapter.pointcache.MODIFIER]
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



def _run_retarget(out_dir, frames=60, legs=0.8, scale=1.2):
    """A walk on a Mixamo-named rig retargeted onto a Rigify-named rig in a T-pose, ``scale``
    times as big with legs ``legs`` times as long: the naive retarget (turns copied, hips scaled
    by the legs' ratio) rendered before, ours after, at the frame where the naive feet are
    farthest from ours (off the floor or into it)."""
    from ..core import retarget as core_retarget
    s = prepare("retarget", out_dir, frames, legs=legs, scale=scale)
    scene, src, tgt, env = s.scene, s.source, s.arm, s.env
    job = feature("retarget").RetargetJob(scene, src, tgt, environment=env.name)
    job.read()
    job.compute()
    report = job.write()
    ours = bpy.data.actions[report["action"]]
    naive_action, naive = job.write_naive()
    adapter.assign_action(tgt, ours)
    tgt.animation_data.action_slot = ours.slots[0]
    src.hide_render = True
    add_stick_figure(tgt)
    args = (job.source_skeleton, job.source_rest, job.source_motion, job.target_skeleton, job.target_rest)
    naive_measures = core_retarget.measure(*args, naive, job.result.bone_map, ground=job.mesh)
    roles = core_retarget.find_roles(job.target_skeleton, job.target_rest)[0]
    feet = [roles["foot.L"], roles["foot.R"]]
    off = np.abs(naive[:, feet, 2] - job.result.positions[:, feet, 2]).max(axis=1)
    frame = int(np.argmax(off)) + 1
    hips = job.result.positions[frame - 1, roles["hips"]]
    view = ((hips[0], -1.7, 0.32), (np.radians(82), 0.0, 0.0))            # the feet, close
    render_before_after(scene, tgt, naive_action, ours, frame, os.path.join(out_dir, "before_after.png"), view,
                        (f"Before: naive retarget, feet {100 * off[frame - 1]:.0f} cm off",
                         "After: retargeted, feet on the floor"))
    report = dict(report, render_frame=frame, scene="retarget", naive=naive_measures,
                  naive_feet_off_at_render_frame=float(off[frame - 1]))
    return _write(out_dir, report)
