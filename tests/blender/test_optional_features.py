"""A feature whose module cannot be imported does not take the add-on down (scipy 1.17 removed
``sph_harm``: Transfer failed to import, and with it registration, bind and bake). The add-on
registers, bind and bake work, and the broken feature says what is missing wherever it is used:
its operator, its panel and its command, changing nothing."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# feature -> (the core module it imports, its operator call, its sub-panel, its command line)
CASES = {
    "transfer": ("core.transfer", "transfer(armature='Walker', source_object='Deck', target_object='Beam')",
                 "RELDESC_PT_transfer", ["transfer", "--armature", "Walker", "--from", "Deck", "--to", "Beam"]),
    "locomotion": ("core.locomotion", "walk(armature='Walker', path='Path', terrain='Environment')",
                "RELDESC_PT_locomotion", ["walk", "--armature", "Walker", "--terrain", "Environment",
                                          "--path", "Path"]),
    "reaching": ("core.reaching", "reach(armature='Walker', hand='hand.L', target='Target', frame=5)",
                 "RELDESC_PT_reaching", ["reach", "--armature", "Walker", "--hand", "hand.L", "--target",
                                         "Target", "--frame", "5"]),
    "garment": ("core.garment", "bind_garment(armature='Walker', garment='Beam')",
                 None, ["bind", "--armature", "Walker", "--garment", "Beam"]),
    "partners": ("core.characters", "bind(armature='Walker', environment='Environment', partners='Other')",
                 None, ["bind", "--armature", "Walker", "--environment", "Environment", "--partners", "Other"]),
}

SCRIPT = textwrap.dedent('''
    import contextlib, io, os, sys, types
    broken_module, feature, call, panel, argv, blend = sys.argv[1:7]
    sys.modules["blender_reldesc." + broken_module] = None        # its import now fails
    import bpy
    import blender_reldesc
    blender_reldesc.register()
    from blender_reldesc import cli, demo, optional, panels

    ops = set(dir(bpy.ops.reldesc))
    assert {"bind", "bake", "live", "transfer", "walk", "reach", "bind_garment"} <= ops, ops
    scene, arm, env, bridge, beam = demo.build_scene(frames=20, deck_cells=(20, 4))
    assert bpy.ops.reldesc.bind(armature="Walker", environment="Environment") == {'FINISHED'}
    demo.lower_beam(beam, 0.2)
    assert bpy.ops.reldesc.bake(armature="Walker") == {'FINISHED'}
    assert "Walk.adapted" in bpy.data.actions
    bpy.ops.wm.save_as_mainfile(filepath=blend)

    down = {feature} | ({"garment"} if broken_module == "core.characters" else set())    # garments use capsules
    for other in optional.FEATURES:
        assert (optional.unavailable(other) is None) == (other not in down), other
    actions, meta = sorted(a.name for a in bpy.data.actions), dict(arm.data.items())
    try:
        eval("bpy.ops.reldesc." + call)
        raise AssertionError("the operator of a broken feature ran")
    except RuntimeError as e:
        message = str(e)
    assert optional.FEATURES[feature] + " is unavailable" in message, message
    assert "blender_reldesc." + broken_module in message, message
    assert sorted(a.name for a in bpy.data.actions) == actions and dict(arm.data.items()).keys() == meta.keys()

    if feature == "garment":
        # A file whose armature carries a garment, baked where garments cannot load: the bake
        # refuses before writing anything (the garment's cache would not match the new action).
        from blender_reldesc import adapter
        arm.data[adapter.GARMENTS_KEY] = ["Beam"]
        demo.lower_beam(beam, 0.1)
        adapted = bpy.data.actions["Walk.adapted"]
        keys = [tuple(kp.co) for fc in adapter._fcurves(adapted) for kp in fc.keyframe_points]
        try:
            bpy.ops.reldesc.bake(armature="Walker")
            raise AssertionError("a bake that cannot carry its garment ran")
        except RuntimeError as e:
            assert "Garments is unavailable" in str(e), str(e)
        assert [tuple(kp.co) for fc in adapter._fcurves(adapted) for kp in fc.keyframe_points] == keys
        assert sorted(a.name for a in bpy.data.actions) == actions
        del arm.data[adapter.GARMENTS_KEY]

    if panel != "-":
        class Layout:                       # records what a panel draws
            def __init__(self): self.text = []
            def label(self, text="", icon="NONE"): self.text.append(text)
            def box(self): return self
            def column(self, align=False): return self
            def row(self, align=False): return self
            def prop(self, *args, **kwargs): pass
            def prop_search(self, *args, **kwargs): pass
            def operator(self, *args, **kwargs): return types.SimpleNamespace()
        layout = Layout()
        drawn = next(c for c in panels.classes if c.__name__ == panel)
        drawn.draw(types.SimpleNamespace(layout=layout), bpy.context)
        assert optional.FEATURES[feature] + " is unavailable" in " ".join(layout.text), layout.text

    err = io.StringIO()
    args = argv.split("|")
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.run([args[0], blend] + args[1:])
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and "is unavailable" in lines[0], (code, err.getvalue())
    print("FEATURE-OK", flush=True)
    os._exit(0)
''')


@pytest.mark.parametrize("feature", sorted(CASES))
def test_a_feature_that_cannot_import_leaves_the_rest_working_and_says_why(feature, tmp_path):
    module, call, panel, argv = CASES[feature]
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", SCRIPT, module, feature, call, panel or "-", "|".join(argv),
                        str(tmp_path / "scene.blend")], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=600)
    assert "FEATURE-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
