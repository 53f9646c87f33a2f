"""Blender-level tests: the real operators on a fresh factory scene, with the bpy wheel."""

import pytest

bpy = pytest.importorskip("bpy", reason="the bpy wheel is installed by `make test`")

import blender_reldesc  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def registered():
    blender_reldesc.register()
    yield
    blender_reldesc.unregister()


@pytest.fixture
def scene():
    """A fresh generated scene: 'Walker' walks 40 frames over 'Bridge' under 'Beam'."""
    from blender_reldesc import demo
    scene, arm, env, bridge, beam = demo.build_scene(frames=40, deck_cells=(40, 8))
    scene.reldesc.armature, scene.reldesc.environment = arm, env
    return scene, arm, env, bridge, beam
