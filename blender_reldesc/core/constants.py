"""Tolerances and default parameters, each with the reason for its value.

Lengths that are not fractions of the body height are relative to it where
stated, so that a rig in centimetres behaves like the same rig in metres.
"""

# --- SCA 2013 parameters (pinned in shared/METHOD.md) -----------------------
#: Eq. 5: r2 = r1 + WINDOW_FRACTION * body height.
WINDOW_FRACTION = 0.25
#: Eq. 7: geodesic sampling radius is RADIUS_FACTOR * max(d, d0).
RADIUS_FACTOR = 0.5
#: Eq. 7: d0 = MIN_DISTANCE_FRACTION * body height.
MIN_DISTANCE_FRACTION = 0.05
#: Eq. 9: elasticity constant.
SPRING_K = 1.0
#: Eq. 10: damping is DAMPING_AT_ZERO at affinity 0 and DAMPING_AT_ONE at affinity 1.
DAMPING_AT_ZERO = 0.8
DAMPING_AT_ONE = 0.2
#: §7.2: N_s outer steps, each followed by N_c constraint iterations.
SUBSTEPS = 3
CONSTRAINT_ITERATIONS = 3
#: Product decision: constraint sweeps after the last substep of each frame,
#: so bone lengths converge further than the paper's N_c = 3 alone allows.
FINAL_ITERATIONS = 12

# --- Product decisions --------------------------------------------------------
#: A joint farther than this (times body height) from a triangle gets no
#: proximity point on it. The paper has no cut-off; one body height keeps the
#: head of a standing character tied to the floor while bounding the search.
MAX_DISTANCE_FRACTION = 1.0
#: Collision pushes act only on joints at most this deep (times body height)
#: behind a surface; deeper joints are taken to be on the other side of it.
COLLISION_BAND_FRACTION = 0.1
#: Edge-graph path lengths overestimate surface distance on a flat
#: triangulation by up to about 15 %; geodesic radius tests allow for it.
GRAPH_SLACK = 1.15
#: The batched solve (``solvers.Warper.run``): a clip longer than SEGMENT_FROM_FRAMES is cut
#: into at most SEGMENT_BATCH segments solved together, each first started SEGMENT_WARMUP
#: frames early at its targets, then solved again from its predecessor frame until that frame
#: moves less than SEGMENT_TOLERANCE body heights between passes. 2e-6 body heights (3 µm on a
#: 1.7 m body, a thousandth of what key reduction allows) is the result's distance from the
#: sequential solve; 1e-7 cost a 600-frame walk a second pass of 24 steps (7 % of its adapt)
#: to move no joint more than 2 µm.
SEGMENT_FROM_FRAMES = 240
SEGMENT_WARMUP = 30
SEGMENT_BATCH = 128
SEGMENT_TOLERANCE = 2e-6
#: A joint with at least this many children (a head with a face rig's bones) holds them as one
#: rigid cluster, projected by shape matching (``solvers.Warper``), instead of a rigidity link
#: between every two of them: the links grow as k² and need at least k colours of Gauss-Seidel
#: projections a sweep, which made a Rigify head with 87 face bones cost more than the rest of
#: the body. Below it the links stay as the paper has them; there they cost no more than a
#: fit's SVD does (measured in one run, ``benchmarks/bench_production_rigs.py``: Rigify's body
#: bones, whose hands have nine children, adapted in 0.82 s with links and 1.29 s with clusters
#: from six children; the whole rig the same either way). With clusters from five children the
#: generated Mixamo hand's fingers also took another hinge branch on one frame of a 300-frame
#: duck in the batched solve than in the sequential one (``tests/test_batched.py``).
CLUSTER_CHILDREN = 10
#: Sculpted surfaces (``descriptors.clearance``, a departure): a joint within
#: CLEARANCE_FULL_FRACTION body heights (10 cm on a 1.7 m body: an ankle, a toe, a hand on a
#: table) of the bind-time surface keeps its source distance from the surface now, fading out by
#: CLEARANCE_FADE_FRACTION (20 cm: a swinging foot a little, a knee not). Eq. 2 is first order in
#: the surface's shape; a 0.3 m bump of sigma 0.5 m left feet 2-2.5 cm off over its crest.
CLEARANCE_FULL_FRACTION = 0.08
CLEARANCE_FADE_FRACTION = 0.14
#: A target whose distance from the surface is off by more than CLEARANCE_MISMATCH_FULL_FRACTION
#: body heights (5 cm; curvature leaves a few centimetres) is corrected less, and from
#: CLEARANCE_MISMATCH_FADE_FRACTION (10 cm) not at all: the surface under the joint changed more
#: than its shape (a stone moved away), which the contacts handle.
CLEARANCE_MISMATCH_FULL_FRACTION = 0.03
CLEARANCE_MISMATCH_FADE_FRACTION = 0.06
#: The surface a joint keeps its clearance from must be the one it had in the source: the closest
#: point now, taken back to the bind-time surface, within CLEARANCE_DRIFT_FULL_FRACTION body heights
#: (5 cm: an ankle 10 cm over a 20 degree slope finds its closest point 3.4 cm aside) of the
#: source's closest point, fading out by CLEARANCE_DRIFT_FADE_FRACTION (10 cm). A foot swinging
#: past where a stone was finds the ground or another stone closest: left as Eq. 2 has it.
CLEARANCE_DRIFT_FULL_FRACTION = 0.03
CLEARANCE_DRIFT_FADE_FRACTION = 0.06
#: Affinity floor in Eq. 11 so that two joints of affinity 0 share a correction.
AFFINITY_FLOOR = 1e-3
#: Static solve of the first frame stops when no joint moves more than this
#: (times body height) in one step, or after STATIC_MAX_STEPS steps. It converges slowly near
#: the end: the pose is then within about ten times this of where it settles (1e-10 took 50
#: more steps of a 600-frame walk's 200 to move nothing more than 0.15 µm).
STATIC_TOLERANCE = 1e-8
STATIC_MAX_STEPS = 4000

#: Hinges (paper §8: knees and elbows) are found from the motion
#: (``skeleton.joints.Hinges``): a joint with one child whose bend normal, in
#: the frame of the body part its limb hangs from, agrees over the clip.
#: Frames bent less than this are "straight": they do not count for the
#: detection, and a pose there is reflected only when it bends more than this
#: the wrong way (a limb held straight or hyperextended like the source must
#: not flip; one the edit buckles backwards must).
HINGE_BEND_MIN_DEGREES = 10.0
#: A hinge bends more than HINGE_CLEAR_DEGREES on at least this fraction of frames...
HINGE_CLEAR_DEGREES = 30.0
HINGE_MIN_FRACTION = 0.1
#: ...with bend normals whose mean resultant length is at least this (1 = one plane, one side).
HINGE_COHERENCE = 0.8
#: A hinge sits inside a limb: its upper bone is at least this fraction of its lower one. A
#: clavicle (short, ahead of a long upper arm) bends the arm in one plane in many clips but is
#: a ball joint: reflecting it jumps the arm. Thigh/shin, upper arm/forearm, shin/foot pass.
HINGE_UPPER_RATIO = 0.7
#: A child lying on the bone from its parent to a sibling (within this
#: fraction of that bone's length) is a twist joint, not a branch.
ON_BONE_FRACTION = 0.02
#: An anchor (the body part a limb hangs from) is usable where the second
#: singular value of its child offsets' scatter is at least this times the
#: first: collinear children leave the rotation about their line undefined.
ANCHOR_CONDITION = 1e-3

#: Bend limits (``skeleton.joints.BendLimits``): a chain joint bends at most
#: the source's largest bend plus BEND_MARGIN_DEGREES, and never less than
#: BEND_MIN_LIMIT_DEGREES (so a spine can curl into a duck: four spine joints
#: at 40° make a 160° curl, with room to spare); hinges up to HINGE_LIMIT_DEGREES (a deep crouch).
BEND_MARGIN_DEGREES = 25.0
#: A joint whose children spread (a chest) twists relative to its parent at most the source's
#: range plus this (``skeleton.joints.TwistLimits``).
TWIST_MARGIN_DEGREES = 15.0
#: ... eased in over this much of the margin, so the source's own range is never touched.
TWIST_SOFT_DEGREES = 10.0
BEND_MIN_LIMIT_DEGREES = 45.0
#: Limb joints beyond the trunk (wrists, ankles, fingers, toes) may always bend this far.
LIMB_MIN_LIMIT_DEGREES = 90.0
#: From a branch point, the child chain within this angle of the bone above it
#: continues the trunk (the neck and head above the chest).
TRUNK_CONTINUE_DEGREES = 30.0
HINGE_LIMIT_DEGREES = 160.0
#: A joint whose children continue its parent bone within this angle (median
#: frame) is a chain joint; larger angles are branches (hips to thighs).
CHAIN_MAX_REST_DEGREES = 45.0

# --- Numerical tolerances -------------------------------------------------------
#: Triangles whose doubled area is below this times the squared bounding-box
#: diagonal are degenerate: skipped and counted.
DEGENERATE_AREA = 1e-14
#: Barycentric slack of the coverage test, so a joint above a shared edge lies
#: in both neighbouring coverages instead of in neither.
BARY_TOLERANCE = 1e-7
#: Newton iterations of the proximity projection (quadratic convergence: 8 is
#: far more than needed for any triangle whose vertex normals differ by < 90°).
NEWTON_ITERATIONS = 8
#: Residual (times body height) below which a Newton projection has converged.
NEWTON_TOLERANCE = 1e-9
#: Vertices closer than this (times the bounding-box diagonal) are welded when
#: computing normals and geodesic neighbourhoods, so split seams stay connected.
WELD_TOLERANCE = 1e-7
#: Length below which a bone (times body height) counts as zero-length.
ZERO_LENGTH = 1e-6

# --- contact effectors from the structure (product addition: no names needed) ---
#: Children of a joint that are unbranched chains within this many body heights are digits.
DIGIT_FRACTION = 0.15
#: A limb (branch point to extremity) is at least this many body heights long.
LIMB_MIN_FRACTION = 0.25
#: Joints above a limb's end reached through bones shorter than this fraction of the
#: limb's longest bone are effectors too (the ankle above the ball, not the elbow).
SHORT_BONE_FRACTION = 0.45
#: A leaf bone this long relative to its limb's longest bone is a limb segment, not a hand
#: or toe bone: its tail (the wrist or ankle) is the effector.
END_BONE_FRACTION = 0.75

# --- compression shared along the body (product addition: a duck, not a folded spine) ---
#: The head may come this close to the hips (fraction of the source distance) before the body ducks.
TRUNK_KEEP = 0.9
#: Share of the shortfall taken by lowering the hips (bending the knees).
HIPS_SHARE = 0.5
#: Largest hip drop and largest backward shift of the hips, in body heights.
HIPS_DROP_MAX = 0.1
HIPS_BACK_MAX = 0.3
#: When the spine cannot curl further, the hips go lower still, in all at most this (body heights).
HIPS_DROP_MAX_CROUCH = 0.25
#: The hips go back only as far as the feet can still reach their targets; feet are the leg
#: joints at least this fraction of the longest path of bones from the hips (ankles, toes).
FOOT_PATH_FRACTION = 0.75
#: A foot out of its leg's reach lowers the body by as much as its ankle's affinity says it is in
#: contact: not at all below REACH_AFFINITY_FROM, fully from FROM + RAMP (a planted foot).
REACH_AFFINITY_FROM = 0.3
REACH_AFFINITY_RAMP = 0.3
#: A knee's target is placed by two-bone IK from its hip's and ankle's targets as far as their
#: distance exceeds the source's: fully from KNEE_IK_FRACTION body heights (3.4 cm) beyond it,
#: not at all up to it (``_TrunkModel.place_knees``). Folding legs are left to the solver's
#: hinges: with folding too, a ducking walk's batched solve drifted 5e-5 body heights from the
#: sequential one (``tests/test_batched.py``, 5 warm-up frames), stretching only 3.6e-6.
KNEE_IK_FRACTION = 0.02
#: ... and reaching at most this fraction of the leg's length: the knee stays bent a few degrees,
#: where its place is no longer the square root of a rounding error.
KNEE_IK_REACH = 0.999
#: While ducking, every spine joint flexes forward to a common angle, at most this (a joint the
#: source already flexes further keeps its own bend).
TRUNK_CURL_MAX_DEGREES = 40.0
#: Affinity the spine's targets get while ducking (at least).
TRUNK_AFFINITY = 0.6
#: Shortfall (body heights) over which the ducking posture blends in.
TRUNK_BLEND = 0.05
#: Shortest offset (body heights) that gives a direction: the hip joints' spread for the facing,
#: a step of travel, a lean or a foot that votes for which way the body faces.
TRAVEL_MIN_STEP = 0.002

#: Partners (``characters.adapt_partners``): a joint whose environment affinity is at least this
#: (a foot standing on the floor) keeps the environment's target; the partners' capsules only
#: push it out.
ENVIRONMENT_HELD = 0.5
