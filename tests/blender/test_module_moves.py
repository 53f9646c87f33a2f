"""One bake walks the Blender side once: read (adapter) -> compute (core) -> write (adapter), each
Blender-side module entered at most twice (issue 33; ``benchmarks/bench_boundary.py`` counts the
same way and lists every move with ``--edges``)."""

import collections
import os
import sys

import bpy

import blender_reldesc
from blender_reldesc import demo

PACKAGE = os.path.dirname(os.path.abspath(blender_reldesc.__file__))
CORE = os.path.join(PACKAGE, "core") + os.sep


def _side(filename):
    return filename.startswith(PACKAGE + os.sep) and not filename.startswith(CORE)


def test_an_operator_bake_enters_each_blender_side_module_at_most_twice(scene):
    scene, arm, env, bridge, beam = scene
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    demo.bend_bridge(bridge)
    entered, moves = collections.Counter(), []

    def profile(frame, event, arg):
        if event == "call" and _side(frame.f_code.co_filename) and frame.f_back is not None:
            caller = frame.f_back.f_code.co_filename
            if _side(caller) and caller != frame.f_code.co_filename:
                entered[os.path.relpath(frame.f_code.co_filename, PACKAGE)] += 1
                moves.append(f"{frame.f_back.f_code.co_name} -> {frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    finally:
        sys.setprofile(None)
    assert entered and max(entered.values()) <= 2, (entered.most_common(5), moves)
    assert "Walk.adapted" in bpy.data.actions
