"""The one place where Blender data becomes numpy arrays and back.

Everything crosses with ``foreach_get`` / ``foreach_set`` into arrays of the dtype Blender
stores; no Python loop runs over vertices, loops or keyframes (loops over bones, objects and
frames remain, and the one loop over vertex groups: ``mesh.vertex_weights``). The jobs read what
they need here on the main thread, compute without Blender, and write here after.

By what it reads and writes:

- ``scene``: objects and collections by name, the panel's settings, the .blend file
- ``placement``: world matrices, an object's matrices over frames (the placement rule)
- ``rig``: bones, bone sets, poses over frames, per-bone controls
- ``mesh``: the environment's parts as Blender evaluates them (objects, instances), their
  geometry, vertex groups, painted influence, face attributes
- ``skin``: capsule radii from the meshes an armature deforms
- ``paths``: curves as polylines
- ``empties``: objects as moving frames (reach targets, garments)
- ``actions``: F-curves, slots, NLA, the constraint bypass
- ``pointcache``: a garment's source vertices, the Mesh Cache modifier
- ``characters``: the walkers a walk adds
- ``storage``: every stored key; ``bound``: a stored binding with what it refers to, binding files
"""

from . import (actions, bound, characters, empties, mesh, paths, placement, pointcache, rig, scene, skin,
               storage)
from .actions import (Curve, NLA_PREFIX, _channelbag, _curve_keys, _ensure_bag, _fcurves, _fill, _keys_of,
                      add_nla_track, armature_slot, assign, assign_action, constraint_bypass_curves, frame_range,
                      other_users, bypass_restore, remove_own_tracks, sample_curves, source_action, use_source,
                      write_action, write_adapted, write_bake, write_curves)
from .bound import environment_status, load_binding_file, read_bound, save_binding_file
from .mesh import (environment_objects, is_animated, read_environment, read_environment_frames,
                   vertex_influence, vertex_weights)
from .placement import to_world, world_matrix
from .rig import (BONE_SETS, Bones, bone_set_indices, fk_blockers, read_bone_matrices, read_motion,
                  read_motion_fk, read_pose, read_rig, read_source_motion, select_bones, set_pose)
from .scene import SceneError, get_armature
from .storage import (BINDING_KEY, CONTACTS_KEY, ENVIRONMENT_KEY, GARMENTS_KEY, LEGACY_KEYS, META_KEY,
                      POSE_KEY, SOURCE_KEY, STORAGE_VERSION, WALK_KEY, bound_environment, bound_source,
                      clear_binding, garment_names, load_stored, store_binding, stored_contacts, stored_meta)

__all__ = ["BINDING_KEY", "BONE_SETS", "Bones", "CONTACTS_KEY", "Curve", "ENVIRONMENT_KEY", "GARMENTS_KEY",
           "LEGACY_KEYS", "META_KEY", "NLA_PREFIX", "POSE_KEY", "SOURCE_KEY", "STORAGE_VERSION",
           "SceneError", "WALK_KEY", "_channelbag", "_curve_keys", "_ensure_bag", "_fcurves", "_fill",
           "_keys_of", "actions", "add_nla_track", "armature_slot", "assign", "assign_action",
           "bone_set_indices", "bound", "bound_environment", "bound_source", "bypass_restore", "characters",
           "clear_binding", "constraint_bypass_curves", "empties", "environment_objects", "environment_status",
           "fk_blockers", "frame_range", "garment_names", "get_armature", "is_animated", "load_binding_file",
           "load_stored", "mesh", "other_users", "paths", "placement", "pointcache", "read_bone_matrices",
           "read_bound", "read_environment", "read_environment_frames", "read_motion", "read_motion_fk",
           "read_pose", "read_rig", "read_source_motion", "remove_own_tracks", "rig", "sample_curves",
           "save_binding_file", "scene", "select_bones", "set_pose", "skin", "source_action", "storage",
           "store_binding", "stored_contacts", "stored_meta", "to_world", "use_source", "vertex_influence",
           "vertex_weights", "world_matrix", "write_action", "write_adapted", "write_bake", "write_curves"]
