"""What each command's report holds: the fields of ``--report REPORT.json`` (and of the dict an
operator's job returns), one line each.

The documentation's reference is generated from this table (``tools/docs_reference.py``), and the
Blender tests check every report a command writes against it (``undocumented``): a field added to
a job without a line here fails the tests, so the reference cannot fall behind the code.
"""

from __future__ import annotations

#: fields every adapting bake writes (bake, reach, transfer): field -> meaning
_ADAPTED = {
    "action": "name of the adapted action written and assigned (`<source>.adapted`, or `.001` when the old one "
              "is in use elsewhere)",
    "source": "name of the source action (never modified)",
    "frames": "frames adapted",
    "joints": "joints solved (bone heads and chain-end tails)",
    "descriptors": "descriptor points of the binding",
    "solver": "`descriptors` or `interaction_mesh`",
    "read_seconds": "seconds reading the rig, the action and the environment",
    "adapt_seconds": "seconds computing the adapted motion",
    "write_seconds": "seconds writing the action",
    "keys_seconds": "seconds turning the adapted joints into keys",
    "bone_length_error_mean": "relative bone-length error of the adapted joints, each frame's mean averaged over "
                              "the frames (0.01 = 1 %)",
    "bone_length_error_max": "the worst frame's mean relative bone-length error",
    "bone_length_error_per_frame": "each frame's mean relative bone-length error",
    "target_residual_mean": "mean distance (m) from the joints to their descriptor targets after the solve, "
                            "averaged over the frames",
    "target_residual_max": "the worst frame's mean distance (m)",
    "target_residual_per_frame": "mean distance to the targets on each frame (m)",
    "worst_frames": "the five frames with the largest bone-length error (the panel's jump buttons)",
    "joint_limit_violations": "`count`, `max_degrees` and `worst`: joints bent past their limits "
                              "(hinges backwards, twists beyond the source's range)",
    "changed_bones": "bones whose rest lengths differ from the bind's (what the adaptation made up for)",
    "placement": "`moved_from_environment` (m), `object_scale` and `message`: how the armature's object "
                 "transform relates to the bind (see *Where the character is*)",
    "hinges": "bones solved as hinges (knees, elbows, ankles, wrists found by the rig's structure)",
    "bake": "the bake options used: `frame_start`, `frame_end`, `step`, `clean`, `interpolation`, `target`",
    "keys": "`written`, `every_frame` (keys a key on every frame would take), `curves`, "
            "`curves_kept_from_source`, `max_deviation` (m, after Reduce Keys)",
    "constraints_bypassed": "bones whose constraints the bake keyed to influence 0 (kept on the rig)",
    "contacts": "one entry per contact phase: `effector`, `start`, `end`, `status` (valid, repositioned, "
                "unresolved), `reason`, `position`, `new_position`, `continuity` (`re-embedded` or `pins`)",
    "contact_counts": "phases by status: `valid`, `repositioned`, `unresolved`",
    "root_windows": "stretches where the trunk went through a surface or the root was replanned: `start`, "
                    "`end`, `status`, `frames_through`",
    "partners": "the other characters baked with this one (bound with partners): `armature`, `action`, "
                "`descriptors` each",
    "garments": "garments carried: `garment`, `cache` (the PC2 point cache written beside the .blend), "
                "`vertices` each",
}

#: fields of the contact commands (detect-contacts, reposition-contacts)
_CONTACTS = {
    "armature": "the armature",
    "contacts": _ADAPTED["contacts"],
    "contact_counts": _ADAPTED["contact_counts"],
    "root_windows": _ADAPTED["root_windows"],
    "repositioned": "whether the phases were re-positioned (reposition-contacts) or only classified",
}

_GARMENT = {
    "garment": "the garment mesh object bound",
    "vertices": "its vertices",
    "frames": "frames of the binding it was read over",
    "edges": "edges whose lengths the carrying keeps",
    "garments": "every garment now bound to the armature",
    "scale_with_body": "whether the garment scales with the body (the paper's behaviour) or keeps its size",
}

#: command -> {field: meaning}
FIELDS = {
    "bind": {
        "action": "the source action bound",
        "environment": "the environment collection",
        "objects": "the environment's parts (objects, or `instancer/object` for instances)",
        "vertex_counts": "vertices of each part",
        "triangle_counts": "triangles of each part",
        "frame_start": "first frame bound",
        "frame_end": "last frame bound",
        "frames": "frames bound",
        "animated": "whether any part of the environment moves during the action",
        "descriptors": "descriptor points sampled",
        "joints": "joints described",
        "body_height": "the body height used for the sampling radius (m; measured from the clip unless given)",
        "radius_factor": "the sampling radius as a fraction of the body height",
        "degenerate": "degenerate triangles skipped",
        "motion_read": "how the motion was read: `fk` (from the action) or `evaluated` (from the depsgraph, "
                       "constraints and drivers included)",
        "bone_set": "`DEFORM`, `ALL` or the bone collection bound",
        "bones": "bones bound",
        "partners": "the partner armatures bound with this one",
        "no_surface": "joints with no surface within reach (they keep the source's motion; see "
                      "*Troubleshooting*)",
        "part_matrices": "internal: each part's world matrix at binding (flattened 4x4)",
        "part_static": "internal: whether each part is still during the action",
        "probe_frames": "internal: the frames whose joints are kept to check the binding later",
        "probe_world": "internal: the armature's world matrix on those frames (flattened 4x4)",
        "probe_points": "internal: joint positions on those frames (flattened)",
        "probe_count": "internal: joints kept per probe frame",
        "read_seconds": "seconds reading",
        "compute_seconds": "seconds sampling and computing the descriptors",
        "garment": "with `--garment`: the garment's bind report (the `bind-garment` fields)",
    },
    "bake": _ADAPTED,
    "reach": dict(_ADAPTED, reach="`hand`, `joint`, `target`, `frame`, `window`, `hold`, `whole_body`, `distance` "
                                  ""
                                  "(m, hand to target on the reach frame), `reach`, `hand_error`, `database`, "
                                  "`references`, `seconds`"),
    "transfer": dict(_ADAPTED, transfer="`source` and `target` objects, `labels` (how segments were found), "
                                        "`segments`, `key_frame`, `matched` joints, `seconds`"),
    "walk": {
        "armature": "the armature walked",
        "source": "its source action",
        "characters": "the armatures written, one per path or crowd member (`<armature>.walk.NNN`)",
        "actions": "their actions",
        "paths": "the curve each character walks",
        "frames": "frames of the longest walk",
        "frame_start": "first frame",
        "frame_end": "last frame",
        "path_frames": "frames each character takes to reach the end of its own path",
        "stands_from": "frame from which each character stands at the end of its path (an idle pose from the "
                       "clip's slowest phase)",
        "joints": "joints per character",
        "cycle": "the walk cycle found in the clip: first and last frame",
        "speed": "the clip's walking speed (m per frame)",
        "stance_fraction": "fraction of the cycle with a foot planted",
        "warnings": "what could not be kept (a turn too tight for the clip's stride, frames named)",
        "bone_length_error_mean": _ADAPTED["bone_length_error_mean"],
        "bone_length_error_max": _ADAPTED["bone_length_error_max"],
        "read_seconds": "seconds reading",
        "compute_seconds": "seconds computing",
        "write_seconds": "seconds writing",
        "seconds": "seconds by stage: `bind`, `unroll`, `targets`, `solve`, `total`",
    },
    "retarget": {
        "action": "the retargeted action written on the target (`<source action>.retarget`)",
        "source": "the source action (never modified)",
        "source_armature": "the armature the clip plays on",
        "target_armature": "the armature it was put on",
        "frames": "frames retargeted",
        "environment": "the environment collection used (null: none)",
        "floor": "`environment`, or `generated` (a floor under the source's feet)",
        "stride": "how far the root's travel was scaled (the legs' ratio)",
        "bone_map": "`source` and `target` conventions, `mapped` (target bones with a source), "
                    "`target_bones`, `bones` (target bone -> source bone)",
        "bone_length_error_mean": _ADAPTED["bone_length_error_mean"],
        "bone_length_error_max": _ADAPTED["bone_length_error_max"],
        "read_seconds": "seconds reading",
        "adapt_seconds": "seconds retargeting",
        "keys_seconds": _ADAPTED["keys_seconds"],
        "write_seconds": "seconds writing",
        "constraints_bypassed": _ADAPTED["constraints_bypassed"],
        "bake": _ADAPTED["bake"],
        "keys": _ADAPTED["keys"],
        "pose_similarity": "mean cosine between the mapped bones' directions, source against target",
        "planted_within": "fraction of the source's planted foot samples within 2 cm of the ground",
        "stance_slide": "how fast planted feet slide on the target (m/s)",
        "source_stance_slide": "the same on the source (m/s)",
        "stance_samples": "planted foot samples measured",
    },
    "bind-garment": _GARMENT,
    "detect-contacts": _CONTACTS,
    "reposition-contacts": _CONTACTS,
    "unbind": {"armature": "the armature unbound"},
    "use-source": {
        "armature": "the armature",
        "action": "the source action assigned again",
        "constraints_restored": "constraints given back their influence (a baked constrained rig)",
    },
}


def undocumented(command, report):
    """The top-level fields of ``report`` (a ``command``'s) that ``FIELDS`` does not describe."""
    known = FIELDS.get(command, {})
    return sorted(k for k in report if k not in known)
