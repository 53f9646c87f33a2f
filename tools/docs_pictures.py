"""Render the documentation's pictures with the project's own demo (``make pictures``).

    .venv/bin/python tools/docs_pictures.py [SCENE ...]

For each demo scene (default: all), runs ``python -m blender_reldesc demo --scene SCENE`` in a fresh
process and copies its before/after render to ``docs/images/SCENE.png`` (the crowd's:
``crowd.png``); for the getting-started page, the bridge's two halves (``start_edited.png``,
``start_baked.png``) and the example scene before any edit (``start_scene.png``, rendered here); for
the task "a bigger character", the bridge walk with legs 20 % longer (``bigger.png``); for "reach for a prop", the walk's right
hand reaching a target placed beside it (``reach.png``).
Cycles on the CPU: a few minutes in all. The pictures are committed; this script is how they are
made again when a scene or the renderer changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "docs", "images")


def _demo(scene, tmp):
    out = os.path.join(tmp, scene)
    subprocess.run([sys.executable, "-m", "blender_reldesc", "demo", "--scene", scene, "-o", out], check=True,
                   cwd=ROOT, stdout=subprocess.DEVNULL)
    picture = "crowd.png" if scene == "crowd" else "before_after.png"
    shutil.copyfile(os.path.join(out, picture), os.path.join(IMAGES, f"{scene}.png"))
    if scene == "bridge":
        shutil.copyfile(os.path.join(out, "before_after_before.png"), os.path.join(IMAGES, "start_edited.png"))
        shutil.copyfile(os.path.join(out, "before_after_after.png"), os.path.join(IMAGES, "start_baked.png"))


_START = """
import numpy as np, bpy
from blender_reldesc import demo
from blender_reldesc.demo.render import _label, _render, _stage
s = demo.prepare("start", None)
demo.add_stick_figure(s.arm)
frames = range(s.scene.frame_start, s.scene.frame_end + 1)
xs = []
for f in frames:
    s.scene.frame_set(f)
    xs.append((s.arm.matrix_world @ s.arm.pose.bones["Head"].head).x)
frame = list(frames)[int(np.argmin(np.abs(np.array(xs) - demo.BEAM_X)))]
cam = _stage(s.scene, ((demo.BEAM_X + 1.6, -7.8, 1.15), (np.radians(88), 0.0, 0.0)), 35, (640, 420))
s.scene.frame_set(frame)
_label(s.scene, cam, "The example scene: a walk under a beam")
_render(s.scene, {path!r})
import os; os._exit(0)
"""


_BIGGER = """
import os, numpy as np, bpy
from blender_reldesc import demo, jobs
from blender_reldesc.demo.runs import _bind
s = demo.prepare("start", None)
_bind(s.scene, s.arm, s.env)
demo.lengthen_legs(s.arm, 1.2)
s.scene.frame_set(1)
report = jobs.bake_job(s.scene, s.arm)
demo.add_stick_figure(s.arm)
bound = jobs.Bound(s.arm)
head = bound.binding.motion[:, bound.binding.skeleton.index("Head")]
frame = int(np.argmin(np.abs(head[:, 0] - demo.BEAM_X))) + 1                # under the beam
demo.render_before_after(s.scene, s.arm, bpy.data.actions["Walk"], bpy.data.actions[report["action"]], frame,
                         {path!r}, None, ("Before: legs 20 % longer, feet in the floor", "After: feet on the floor, ducking under"))
"""


_REACH = """
import numpy as np, bpy
from blender_reldesc import demo, jobs
from blender_reldesc.demo.runs import _bind
from blender_reldesc.optional import feature
s = demo.prepare("start", None)
_bind(s.scene, s.arm, s.env)
bound = jobs.Bound(s.arm)
frame = 60
hand = bound.binding.motion[frame - 1, bound.binding.skeleton.index("RightHand")]
target = bpy.data.objects.new("Cup", None)
target.location = hand + np.array([0.15, -0.3, 0.35])
s.scene.collection.objects.link(target)
bpy.ops.mesh.primitive_uv_sphere_add(radius=0.05, location=target.location)
bpy.context.object.name = "CupMarker"
report = feature("reaching").reach_job(s.scene, s.arm, "RightHand", "Cup", frame, window=20)
demo.add_stick_figure(s.arm)
x = bound.binding.motion[frame - 1, 0, 0]
demo.render_before_after(s.scene, s.arm, bpy.data.actions["Walk"], bpy.data.actions[report["action"]], frame,
                         {path!r}, ((x + 0.3, -4.5, 1.3), (np.radians(86), 0.0, 0.0)),
                         ("Before: the walk, the target placed", "After: the hand reaches it"))
import os; os._exit(0)
"""


def _reach(tmp):
    path = os.path.join(tmp, "reach.png")
    subprocess.run([sys.executable, "-c", _REACH.format(path=path)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    shutil.copyfile(path, os.path.join(IMAGES, "reach.png"))


def _bigger(tmp):
    path = os.path.join(tmp, "bigger.png")
    subprocess.run([sys.executable, "-c", _BIGGER.format(path=path)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    shutil.copyfile(path, os.path.join(IMAGES, "bigger.png"))


def _start():
    subprocess.run([sys.executable, "-c", _START.format(path=os.path.join(IMAGES, "start_scene.png"))], check=True,
                   cwd=ROOT, stdout=subprocess.DEVNULL)


def main(argv):
    sys.path.insert(0, ROOT)
    from blender_reldesc.commands import DEMO_SCENES
    scenes = argv or list(DEMO_SCENES) + ["start", "bigger", "reach"]
    os.makedirs(IMAGES, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for scene in scenes:
            if scene == "start":
                _start()
            elif scene == "bigger":
                _bigger(tmp)
            elif scene == "reach":
                _reach(tmp)
            else:
                _demo(scene, tmp)
            print(f"pictures: {scene}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
