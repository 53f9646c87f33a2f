"""Settings stored in the .blend: per scene, and per pose bone (affinity overrides)."""

import bpy
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty,
                       StringProperty)


def _is_armature(self, ob):
    return ob.type == 'ARMATURE'


def _is_curve(self, ob):
    return ob.type == 'CURVE'


def _is_mesh(self, ob):
    return ob.type == 'MESH'


def _live_changed(self, context):
    from .viewport import live
    live.sync(context.scene)


def _contacts_changed(self, context):
    """The live preview rebuilds its session: with or without contacts, other thresholds."""
    from .viewport import live
    live.clear()
    if context.scene.reldesc.live:
        live.on_frame_change(context.scene)


def _overlay_changed(self, context):
    from .viewport import overlay
    overlay.sync(context.scene)


def _map_choices(self, context):
    from .core.retarget import PRESETS
    names = {"mixamo": "Mixamo", "cmu": "CMU BVH", "bvh": "BVH (Collar/Shoulder/Elbow)", "rigify": "Rigify",
             "ue": "Unreal Mannequin", "makehuman": "MakeHuman"}
    return ([('AUTO', "Auto", "The best-fitting preset for each rig, else its structure"),
             ('STRUCTURE', "Structure", "From the rest poses alone (any names)")]
            + [(p.upper(), names.get(p, p), f"Bone names of the {names.get(p, p)} convention") for p in PRESETS]
            + [('FILE', "File", "A map saved as JSON (Save Map writes one)")])


class RelDescMapRow(bpy.types.PropertyGroup):
    """One row of the retarget's bone map: a target bone and the source bone it plays."""
    target: StringProperty(name="Target Bone", description="The bone of the target armature")
    source: StringProperty(name="Source Bone", description="The source bone it plays (empty: placed from the "
                                                            "bones around it)")
    role: StringProperty(name="Role", description="What the bone is found to be (hips, thigh.L, ...)")


class RelDescSceneSettings(bpy.types.PropertyGroup):
    armature: PointerProperty(name="Armature", type=bpy.types.Object, poll=_is_armature,
                              description="The character whose action is adapted")
    environment: PointerProperty(name="Environment", type=bpy.types.Collection,
                                 description="Collection holding the meshes the character interacts with")
    body_height: FloatProperty(name="Body Height", default=0.0, min=0.0, unit='LENGTH',
                               description="Character height used to scale every distance; 0 measures it "
                                           "from the motion")
    radius_factor: FloatProperty(name="Sampling Radius", default=0.5, min=0.05, max=5.0,
                                 description="Descriptor spacing as a fraction of the joint-surface distance "
                                             "(Eq. 7 of the paper: 0.5); larger gives fewer descriptors")
    influence_group: StringProperty(name="Influence Group", default="reldesc_influence",
                                    description="Vertex group on environment meshes whose weight scales each "
                                                "surface's influence (missing group: full influence)")
    bone_set: EnumProperty(name="Bones", default='DEFORM', items=[
        ('DEFORM', "Deform Bones", "Bones that deform a mesh (skips controls and mechanism bones)"),
        ('ALL', "All Bones", "Every bone of the armature"),
        ('COLLECTION', "Bone Collection", "The bones of one bone collection")],
        description="Which bones get descriptors and keys")
    bone_collection: StringProperty(name="Bone Collection", default="",
                                    description="Bone collection of the bones to bind (Bones: Bone Collection)")
    # Bake options.
    use_bake_range: BoolProperty(name="Frame Range", default=False,
                                 description="Bake only these frames (the bound action's other frames keep the "
                                             "source's keys)")
    bake_frame_start: IntProperty(name="Start", default=1)
    bake_frame_end: IntProperty(name="End", default=250)
    bake_step: IntProperty(name="Step", default=1, min=1, max=100, description="Key every N-th frame")
    use_bake_clean: BoolProperty(name="Reduce Keys", default=False,
                                 description="Keep the fewest keys that play back within the tolerance")
    bake_clean_tolerance: FloatProperty(name="Tolerance", default=0.002, min=1e-6, max=1.0, unit='LENGTH',
                                        precision=4,
                                        description="Largest joint motion lost by reducing keys, measured on every "
                                                    "frame")
    bake_interpolation: EnumProperty(name="Interpolation", default='LINEAR', items=[
        ('LINEAR', "Linear", "Straight lines between keys"),
        ('BEZIER', "Bezier", "Smooth curves with tangents from the adapted motion")])
    bake_target: EnumProperty(name="Target", default='ACTION', items=[
        ('ACTION', "Action", "Assign the adapted action to the armature"),
        ('NLA', "NLA Track", "Add the adapted action as a new NLA track above the source (mute it to compare)")])
    live: BoolProperty(name="Live Preview", default=False, update=_live_changed,
                       description="Pose the armature from the environment as it is now at every frame change")
    show_overlay: BoolProperty(name="Show Descriptors", default=False, update=_overlay_changed,
                               description="Draw the descriptor points and the active bone's relative vectors")
    overlay_color_by: EnumProperty(name="Colour By", items=[
        ('influence', "Influence", "Painted influence of the surface under each descriptor"),
        ('weight', "Weight", "Weight of each descriptor for the active bone at this frame")],
        default='influence', update=_overlay_changed)
    overlay_targets: BoolProperty(name="Targets", default=True, update=_overlay_changed,
                                  description="Draw each joint's target (yellow) and solved position (blue)")
    overlay_size: FloatProperty(name="Size", default=6.0, min=1.0, max=30.0, update=_overlay_changed)
    solver: EnumProperty(name="Solver", default='DESCRIPTORS', items=[
        ('DESCRIPTORS', "Descriptors", "Relationship descriptors and the warping solver (fast; live preview)"),
        ('INTERACTION_MESH', "Interaction Mesh", "Ho, Komura and Tai 2010: the joints and the environment "
                                                 "points near them tetrahedralised, solved in space-time "
                                                 "(slower; smooth; bakes only)")],
        description="The method Bake adapts the motion with (the same binding serves both)")
    reposition_contacts: BoolProperty(name="Re-position Contacts", default=False, update=_contacts_changed,
                                      description="Bake and Live Preview move contacts made invalid by the edit "
                                                  "onto other surfaces, and replan the root when none will do "
                                                  "(set by Reposition Invalid Contacts)")
    contact_effectors: StringProperty(name="Effectors", default="", update=_contacts_changed,
                                      description="Comma-separated joints that make contacts (empty: feet, "
                                                  "toes and hands)")
    contact_distance: FloatProperty(name="Contact Distance", default=0.015, min=0.001, max=0.5, update=_contacts_changed,
                                    description="How far above its lowest height an effector still touches, "
                                                "as a fraction of body height")
    contact_speed: FloatProperty(name="Contact Speed", default=0.12, min=0.001, max=5.0, update=_contacts_changed,
                                 description="Fastest a resting effector may move, as body heights per second")
    walk_path: PointerProperty(name="Path", type=bpy.types.Object, poll=_is_curve,
                               description="Curve the characters walk along")
    walk_paths: PointerProperty(name="Paths", type=bpy.types.Collection,
                                description="Collection of path curves, one character each (instead of one path)")
    walk_terrain: PointerProperty(name="Terrain", type=bpy.types.Collection,
                                  description="Collection holding the terrain meshes walked on")
    walk_crowd: IntProperty(name="Crowd", default=1, min=1, max=10000,
                            description="Characters side by side along the one path")
    walk_spacing: FloatProperty(name="Spacing", default=1.0, min=0.0, unit='LENGTH',
                                description="Distance between neighbours across the path")
    reach_hand: StringProperty(name="Hand", default="", description="The bone whose head reaches the target")
    reach_target: PointerProperty(name="Target", type=bpy.types.Object,
                                  description="The object (an Empty, animated or not) the hand reaches")
    reach_frame: IntProperty(name="Frame", default=1, description="Frame the hand is on the target")
    reach_window: IntProperty(name="Window", default=30, min=1, max=100000,
                              description="Frames over which the hand reaches out, and comes back after the hold")
    reach_hold: IntProperty(name="Hold", default=0, min=0, max=100000,
                            description="Frames the hand stays on the target (a moving target is followed)")
    reach_whole_body: BoolProperty(name="Whole Body", default=True,
                                   description="Solve the whole body again around the reach (collisions, joint "
                                               "limits, the trunk follows a little); off: move the arm alone on the "
                                               "bake's body (much faster, no collisions or limits for the arm)")
    reach_database: StringProperty(name="Database", default="",
                                   description="Comma-separated actions of this armature that reach for things: "
                                               "the path and timing are learnt from them (empty: a straight, "
                                               "minimum-jerk reach)")
    partners: StringProperty(name="Partners", default="",
                             description="Comma-separated armatures bound with the character and adapted "
                                         "together with it (they hold hands, wrestle...)")
    transfer_from: PointerProperty(name="From", type=bpy.types.Object, poll=_is_mesh,
                                   description="The object of the bound environment the motion interacts with "
                                               "(a chair the character sits on)")
    transfer_to: PointerProperty(name="To", type=bpy.types.Object, poll=_is_mesh,
                                 description="The object to move the interaction to (a stool): its parts named "
                                             "like the first's by vertex groups, or matched by where they sit")
    retarget_source: PointerProperty(name="Source", type=bpy.types.Object, poll=_is_armature,
                                     description="The armature whose action is retargeted (it is not changed)")
    retarget_target: PointerProperty(name="Target", type=bpy.types.Object, poll=_is_armature,
                                     description="The armature that gets the motion, as a new action "
                                                 "'<source action>.retarget'")
    retarget_map: EnumProperty(name="Map", items=_map_choices,
                               description="How the bones of the two armatures are paired")
    retarget_map_file: StringProperty(name="Map File", subtype='FILE_PATH', default="",
                                      description="A bone map saved as JSON (Map: File)")
    retarget_environment: PointerProperty(name="Environment", type=bpy.types.Collection,
                                          description="The surfaces the source moves on and touches (empty: a "
                                                      "floor under its feet, and the stride scales with the legs)")
    retarget_rows: CollectionProperty(type=RelDescMapRow)
    retarget_row: IntProperty(name="Row", default=0)
    paint_return_mode: StringProperty(default="OBJECT", options={'HIDDEN'})
    last_residual_mean: FloatProperty(name="Mean Target Residual", default=0.0, unit='LENGTH')
    # Diagnostics of the last bake.
    last_frames: IntProperty(name="Frames", default=0)
    last_seconds: FloatProperty(name="Seconds", default=0.0)
    last_error_mean: FloatProperty(name="Mean Bone-Length Error", default=0.0, subtype='PERCENTAGE')
    last_error_max: FloatProperty(name="Max Bone-Length Error", default=0.0, subtype='PERCENTAGE')
    last_worst_frames: StringProperty(name="Worst Frames", default="")
    last_limit_count: IntProperty(name="Joint-Limit Violations", default=0)
    last_limit_max: FloatProperty(name="Worst Joint-Limit Violation", default=0.0,
                                  description="Degrees past the joint's limit")
    last_limit_frames: StringProperty(name="Worst Joint-Limit Frames", default="")


def _bone_changed(self, context):
    from .viewport import live
    live.clear()


class RelDescBoneSettings(bpy.types.PropertyGroup):
    use_affinity_override: BoolProperty(name="Override Affinity", default=False, update=_bone_changed,
                                        description="Use the affinity below instead of the computed one")
    affinity: FloatProperty(name="Affinity", default=1.0, min=0.0, max=1.0, update=_bone_changed,
                            description="1 keeps the joint's relation to the surfaces; 0 lets it give way")
    hinge: EnumProperty(name="Hinge", default='AUTO', update=_bone_changed, items=[
        ('AUTO', "Auto", "A hinge when the source bends this joint on one side of one plane"),
        ('ON', "On", "Always a hinge: never bent against the source's bend direction"),
        ('OFF', "Off", "Never a hinge: free to bend either way")],
        description="Whether the solver keeps this joint bending the way the source bends it (knees, elbows)")


classes = (RelDescMapRow, RelDescSceneSettings, RelDescBoneSettings)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.Scene.reldesc = PointerProperty(type=RelDescSceneSettings)
    bpy.types.PoseBone.reldesc = PointerProperty(type=RelDescBoneSettings)


def unregister():
    del bpy.types.PoseBone.reldesc
    del bpy.types.Scene.reldesc
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
