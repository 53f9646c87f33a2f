"""Walking carpets: one character or a crowd along paths over a terrain.

``walk`` unrolls each character's carpet along its path and onto the terrain
(``unrolling``), rebuilds every joint's target with Eq. 2 from the unrolled descriptors,
then, as product improvements over the thesis (each switchable, each measured in the manual, docs/how-it-works):

- the body above the legs keeps the source's shape, placed by the best fit of its targets and
  held firmly (``_rigid_body``), and the root stays on its path (``_follow_paths``);
- the standing feet are held still on the terrain where their carpet puts them, eased in and
  out (``_stance_pins``); the body goes down where a held foot is out of reach and free feet
  are kept within reach (``_reach_stances``); a held leg's knee is placed exactly
  (``_knees_onto_held_feet``);

and warps all characters in one batched solve: every step of the solver covers every
character (the batch axis of ``solvers.Warper``), as the thesis' GPU version evaluates every
joint of every character at once. With ``workers`` > 1 the characters are shared among that
many processes (forked, on Linux), each a batched solve of its own: characters do not
interact, so the result is the same.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..adaptation import Rig
from ..errors import Cancelled, InputError
from ..geometry import TriMesh
from ..skeleton.joints import two_bone
from ..skeleton.rotations import kabsch
from ..solvers import Warper
from .carpet import Carpet
from .unrolling import HEADING_WINDOW, Terrain, check_paths, unroll

#: Frames over which a target eases onto a stance pin before it, and off it after.
EASE_FRAMES = 6
#: Constraint sweeps ending each frame of a crowd's solve (``Warper.final_iterations``).
CROWD_FINAL_ITERATIONS = 3
#: A crowd's first frame is settled until no joint moves more than this (times body height) in
#: a step (``Warper.settle``); the clip solver's 1e-10 takes about 1500 steps there, this about
#: 150, and the walk differs by less than 0.1 mm from it.
CROWD_STATIC_TOLERANCE = 1e-7
#: A crowd's frames are solved in segments of this many frames side by side (``solve_crowd``).
CROWD_SEGMENT_FRAMES = 256
#: Steps of the pitch of a held toe onto the terrain (exact after one on a plane).
PITCH_STEPS = 4
#: Affinity of the body above the legs in a walk (``_rigid_body``).
BODY_AFFINITY = 1.0
#: A held leg may reach as far as the source holds it, or this fraction of its length if more.
REACH_FRACTION = 0.97
#: A free foot's target is kept within this fraction of its leg's length from the hip (or as far
#: as the source holds it, if more).
FREE_REACH_FRACTION = 0.995
#: Turns tighter than this radius (body heights) at the root are reported.
MIN_TURN_RADIUS = 0.3
#: What stopping short of the end of a path costs a stop frame (``stop_frame``), per unit of
#: distance, against the feet's height: a metre short costs what a foot 5 cm up does.
STOP_SHORT = 0.05
#: Slopes steeper than this (rise over run) along the path are reported.
MAX_SLOPE = np.tan(np.radians(30.0))


@dataclass
class WalkResult:
    """What ``walk`` made.

    positions : (C,F,J,3) every character's joints; C = len(paths), F frames.
    clip_frames : (C,F) the frame of the played clip (``Carpet.extended``) each frame shows.
    pins : (C,F,J,3) where the standing joints were held, NaN where free.
    carpets : (C,N,3) each character's unrolled descriptors; stretch : (C,E) each carpet
        edge's length over its rest length after relaxation.
    targets : (C,F,J,3) Eq. 2 targets (with the stances eased in).
    bone_error : (C,F) mean relative bone-length error before the exact-length pass.
    warnings : list of str, what the method could not do well (sharp turns, steep slopes),
        naming the character and the frames.
    seconds : dict, time per stage.
    path_frames : (C,) int, the frames each character walks: from its frame path_frames - 1 on
        it stands at the end of its path (``walk(stop=True)``); F where it walks every frame.
    """

    positions: np.ndarray
    clip_frames: np.ndarray
    pins: np.ndarray
    carpets: np.ndarray
    stretch: np.ndarray
    targets: np.ndarray
    bone_error: np.ndarray
    warnings: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    path_frames: np.ndarray = None


def lateral_paths(path, count, spacing):
    """``count`` polylines side by side, ``spacing`` apart across ``path`` (P,3), centred on it
    (a crowd walking one path). Heights are the path's own."""
    p = np.asarray(path, dtype=float)
    count = int(count)
    if count < 1:
        raise InputError(f"the crowd needs at least one character, got {count}")
    if not np.isfinite(spacing):
        raise InputError("spacing must be a finite distance")
    d = np.gradient(p[:, :2], axis=0)
    n = np.stack([-d[:, 1], d[:, 0]], axis=1)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    out = []
    for k in range(count):
        off = (k - 0.5 * (count - 1)) * float(spacing)
        q = p.copy()
        q[:, :2] += off * n
        out.append(q)
    return out


def walk(carpet, paths, terrain, time_offsets=None, *, frames=None, stop=True, relax=True, hold_stances=True,
         follow_path=True, rigid_body=True, progress=None, solver_options=None, workers=1):
    """Walk the carpet's clip along each path over the terrain.

    Parameters
    ----------
    carpet : Carpet from ``bind_carpet``.
    paths : list of (P,3) polylines, one per character (or ``unrolling.Path``). A path's
        height chooses the level where the terrain has several (a bridge over a valley).
    terrain : TriMesh (static).
    time_offsets : None or (C,) frames of the clip each character starts at (rounded), so a
        crowd does not step in unison.
    frames : frames to make (default: as many as the longest walk takes, so that every character
        walks its own path to its end).
    stop : each character stops at the end of its path (``stop_frame``: a frame of its last gait
        cycle before the end with both feet nearest the ground) and stands there, holding that
        pose, for the frames left (default); False: it walks on straight past the end.
        ``WalkResult.path_frames`` gives each character's walking frames.
    relax : relax the carpets' footstep spacing (thesis; on by default).
    hold_stances : pin standing feet on the terrain (product improvement, on by default); off,
        the feet follow the descriptors alone, as in the thesis.
    follow_path : keep the root on its path (product improvement, on by default; see
        ``_follow_paths``); off, the root goes where Eq. 2 puts it, as in the thesis.
    rigid_body : the body above the legs keeps the source's shape, placed by the best fit of
        its joints' Eq. 2 targets (product improvement, on by default; see ``_rigid_body``).
    progress : optional callable ``(done, total)``; returning False cancels (``Cancelled``).
    solver_options : optional dict of ``solvers.Warper`` settings. By default a crowd ends each
        frame with ``CROWD_FINAL_ITERATIONS`` constraint sweeps instead of the clip solver's 12:
        the exact-length pass after the solve removes what they leave.
    workers : processes to share the characters among (``fork_available()``: on Linux; elsewhere,
        and from a process that must not fork, 1). The result is the same as with 1.

    Returns
    -------
    WalkResult, positions (C, frames, J, 3).
    """
    t0 = time.perf_counter()
    if not isinstance(carpet, Carpet):
        raise InputError("carpet must be a Carpet from bind_carpet()")
    if not isinstance(terrain, TriMesh):
        raise InputError("terrain must be a TriMesh")
    if terrain.animated:
        raise InputError("the terrain must be static: give its vertices as (V,3)")
    ground = Terrain(terrain)
    paths = check_paths(paths, ground)
    C = len(paths)
    offsets = np.zeros(C, np.int64) if time_offsets is None else np.asarray(time_offsets, dtype=float).reshape(-1)
    if len(offsets) != C:
        raise InputError(f"time_offsets has {len(offsets)} values for {C} paths: give one per path")
    if not np.all(np.isfinite(offsets)) or np.any(offsets < 0):
        raise InputError("time_offsets must be finite frame counts >= 0")
    offsets = np.round(offsets).astype(np.int64)
    speed = carpet.speed
    shortest = min(p.length for p in paths)
    if shortest < speed:
        raise InputError(f"the shortest path ({shortest:.3g}) is shorter than one frame of the walk ({speed:.3g} "
                         "per frame): draw a longer path")
    played = carpet.extended(int(offsets.max()) + int(np.ceil(max(p.length for p in paths) / speed)) + 3)
    walked = np.array([stop_frame(carpet, p.length, o, played) - o + 1 for p, o in zip(paths, offsets.tolist())],
                      np.int64)
    frames = int(walked.max()) if frames is None else int(frames)
    if frames < 2:
        raise InputError(f"frames is {frames}: walk at least 2 frames")
    if not stop:
        walked = np.full(C, frames, np.int64)
    walked = np.minimum(walked, frames)
    # The clip is laid a period past the last frame any character plays: a stance running past a
    # character's last frame is then judged whole (``_stance_pins`` picks its carrying descriptor
    # from all its frames), so a character gives the same walk alone and beside others that start
    # later in the clip (laid only to its own last frame, a stance was cut there, and a foot
    # could be carried by another descriptor in its last frames: 2.6 cm in a 10-character crowd).
    total = int(offsets.max()) + frames + carpet.period
    options = dict(relax=relax, hold_stances=hold_stances, follow_path=follow_path, rigid_body=rigid_body,
                   solver_options=solver_options)
    workers = max(1, min(int(workers), C))
    if workers > 1 and fork_available():
        return _walk_shared(carpet, paths, ground, offsets, frames, total, t0, progress, walked, options, workers)
    return _walk(carpet, paths, ground, offsets, frames, total, t0, progress, walked=walked, **options)


def _walk_shared(carpet, paths, ground, offsets, frames, total, t0, progress, walked, options, workers):
    """``_walk`` with the characters shared among ``workers`` processes (this one and forked
    ones). Each worker writes its characters' rows of the result into memory shared with this
    process before the fork (``_Shared``) instead of pickling its result back through a pipe
    (a 100-character crowd's arrays: 200 MB; measured before, 50 characters alone took a median
    4.0 s and 100 on two workers 4.8 s)."""
    C = len(paths)
    chunks = np.array_split(np.arange(C), workers)
    laid = carpet.layout(total)
    J, N = len(carpet.skeleton), len(laid.points)
    E = len(laid.edges) if options["relax"] else 0
    shapes = {"positions": (frames, J, 3), "clip_frames": (frames,), "pins": (frames, J, 3), "carpets": (N, 3),
              "stretch": (E,), "targets": (frames, J, 3), "bone_error": (frames,)}
    kinds = {"clip_frames": np.int64}
    out = {name: np.empty((C,) + shapes[name], kinds.get(name, float)) for name in _STACKED}
    # The rows of every worker but this process's, shared with the forked processes.
    others = np.concatenate(chunks[1:])
    shared = _Shared({name: ((len(others),) + shapes[name], kinds.get(name, float)) for name in _STACKED})

    def run(k, report):
        rows = chunks[k]
        r = _walk(carpet, [paths[c] for c in rows.tolist()], ground, offsets[rows], frames, total, t0, report,
                  walked=walked[rows], **options)
        if k == 0:
            for name in _STACKED:
                out[name][rows] = getattr(r, name)
        else:
            at = np.searchsorted(others, rows)
            for name in _STACKED:
                shared[name][at] = getattr(r, name)
        return r.warnings, r.seconds

    try:
        parts = _in_processes(run, len(chunks), progress)
        for name in _STACKED:
            out[name][others] = shared[name]
    finally:
        shared.close()
    result = WalkResult(*(out[name] for name in _STACKED), warnings=[w for part in parts for w in part[0]],
                        path_frames=walked)
    result.seconds = {k: max(part[1][k] for part in parts) for k in parts[0][1]}
    result.seconds["workers"] = len(parts)
    result.seconds["total"] = time.perf_counter() - t0
    return result


class _Shared:
    """Arrays ``{name: (shape, dtype)}`` in one anonymous memory map shared with processes forked
    after it is made (``shared[name]`` an ndarray view of it); ``close`` unmaps it."""

    def __init__(self, specs):
        import mmap
        sizes = {name: int(np.prod(shape)) * np.dtype(dtype).itemsize for name, (shape, dtype) in specs.items()}
        self._map = mmap.mmap(-1, max(1, sum(sizes.values())))
        self.arrays, at = {}, 0
        for name, (shape, dtype) in specs.items():
            self.arrays[name] = np.frombuffer(self._map, dtype, int(np.prod(shape)), at).reshape(shape)
            at += sizes[name]

    def __getitem__(self, name):
        return self.arrays[name]

    def close(self):
        self.arrays = {}
        try:
            self._map.close()
        except BufferError:           # a view still held (an exception's traceback): freed with it
            pass


def stop_frame(carpet, length, offset=0, played=None):
    """The frame of the played clip (``Carpet.extended``) where a character starting at clip frame
    ``offset`` stops to stand at the end of a path of ``length``: within the cycle before its root
    has travelled ``length`` (never past it: walked on, the clip would leave the path straight
    ahead), the frame with both feet nearest the ground (a double support), less whatever
    stopping short costs. Score: the highest leg's height (each leg by its lowest standing joint,
    above where that joint is lowest in the clip), plus ``STOP_SHORT`` times the distance left to
    the end of the path. ``played``: the clip played for at least that long (default: played here)."""
    a, b = carpet.cycle
    T = b - a
    offset = int(offset)
    reach = offset + int(np.ceil(length / carpet.speed)) + 2
    m = carpet.extended(reach + 1) if played is None or len(played) < reach + 1 else played[:reach + 1]
    x = m[:, carpet.root, 0]
    end = offset + int(np.argmax(x[offset:] - x[offset] >= length)) if x[-1] - x[offset] >= length else reach
    lo, hi = max(offset + 1, end - T + 1), end + 1
    if hi <= lo:
        return end
    sk, standing = carpet.skeleton, carpet.standing
    up = m[lo:hi, standing, 2] - carpet.motion[:, standing, 2].min(axis=0)           # (n,K)
    anchor = _foot_anchor(sk, standing)
    legs = sorted(set(anchor.values()))
    leg_of = np.array([legs.index(anchor[j]) for j in standing.tolist()])
    height = np.stack([up[:, leg_of == k].min(axis=1) for k in range(len(legs))], axis=1).max(axis=1)
    short = x[end] - x[lo:hi] if end < len(x) else x[-1] - x[lo:hi]
    return lo + int(np.argmin(height + STOP_SHORT * short))


#: The fields of ``WalkResult`` with one row per character, in order.
_STACKED = ("positions", "clip_frames", "pins", "carpets", "stretch", "targets", "bone_error")


def fork_available():
    """Whether ``walk`` can share characters among forked processes here: on Linux only (macOS
    and Windows libraries are not safe to fork, and spawning would re-import the caller)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def _in_processes(run, count, progress):
    """``[run(k, report) for k in range(count)]`` with part 0 in this process (reporting
    ``progress``) and the others in forked processes: they see this process's memory, so
    nothing is pickled on the way in; each result comes back through a pipe."""
    context = multiprocessing.get_context("fork")
    children = []
    try:
        for k in range(1, count):
            recv, send = context.Pipe(duplex=False)
            proc = context.Process(target=_child, args=(run, k, send), daemon=True)
            proc.start()
            send.close()
            children.append((proc, recv))
        out = [run(0, progress)]
        for proc, recv in children:
            try:
                status, value = recv.recv()
            except EOFError:
                raise RuntimeError(f"a worker process of the crowd stopped without a result (exit code "
                                   f"{proc.exitcode}; out of memory?): walk with workers=1") from None
            if status == "error":
                raise value
            out.append(value)
        return out
    finally:
        for proc, recv in children:
            recv.close()
            if proc.is_alive():
                proc.terminate()
            proc.join()


def _child(run, k, send):
    try:
        send.send(("ok", run(k, None)))
    except BaseException as e:                     # sent back whole: the caller raises it
        send.send(("error", e))
    finally:
        send.close()


def _walk(carpet, paths, ground, offsets, frames, total, t0, progress, relax, hold_stances, follow_path,
          rigid_body, solver_options, walked):
    """``walk`` of checked ``Path``s with offsets (C,), ``frames`` and the carpet laid for
    ``total`` frames (the same for every part of a crowd shared among processes); character c
    walks ``walked[c]`` frames and holds its last pose for the rest."""
    C = len(paths)
    laid = carpet.layout(total)
    binding = laid.binding
    motion = binding.motion
    H = carpet.body_height
    seconds = {"bind": time.perf_counter() - t0}

    t1 = time.perf_counter()
    starts = motion[offsets, carpet.root, 0]
    rest = np.linalg.norm(laid.points[laid.edges[:, 1]] - laid.points[laid.edges[:, 0]], axis=1)
    pos, rot, stretch = unroll(laid.points, paths, starts, ground, H, laid.edges if relax else None, rest)
    seconds["unroll"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    # The ducking stage bends the trunk to share a compression with the knees; a rigid body
    # replaces the trunk's targets, so it would only cost time.
    rig = Rig(binding, solver_options={"share_compression": not rigid_body})
    J = len(carpet.skeleton)
    index = np.arange(len(laid.points))
    clip = offsets[:, None] + np.arange(frames)                                        # (C,F)
    targets = np.empty((C, frames, J, 3))
    affinity = np.empty((C, frames, J))
    pins = np.full((C, frames, J, 3), np.nan)
    for c in range(C):
        targets[c], affinity[c] = rig.targets(binding.mesh, clip[c], replace=lambda f, c=c: (index, pos[c], rot[c]))
    if rigid_body:
        _rigid_body(carpet, motion, clip, targets, affinity)
    if follow_path:
        _follow_paths(carpet, motion, clip, paths, starts, targets)
    if hold_stances:
        # A character that stops holds the stances it stands in from then on (cut at its stop,
        # as if its walk ended there: in a crowd as alone) and eases onto none after.
        _stance_pins(carpet, laid, motion, clip, pos, rot, ground, targets, pins, walked)
        _reach_stances(carpet, rig, motion, clip, targets, pins, walked)
    seconds["targets"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    options = {"final_iterations": CROWD_FINAL_ITERATIONS}
    options.update(solver_options or {})
    solved = solve_crowd(rig, motion, clip, targets, affinity, pins, progress, options)
    if hold_stances:
        _knees_onto_held_feet(carpet, rig, solved, pins, clip)
    flat = solved.reshape(C * frames, J, 3)
    bone_error = rig.bone_error(flat, clip.ravel()).reshape(C, frames)
    positions = rig.finish(flat, clip.ravel(), held=~np.isnan(pins[..., 0]).reshape(C * frames, J)).reshape(solved.shape)
    seconds["solve"] = time.perf_counter() - t3
    # Characters at the end of their paths stand: every array holds its stop frame's values.
    # (All characters are solved for every frame, so that a crowd is one batch; the frames past a
    # stop cost what walking on would.)
    for c in np.flatnonzero(walked < frames).tolist():
        last = int(walked[c]) - 1
        for a in (positions, clip, pins, targets, bone_error):
            a[c, last + 1:] = a[c, last]
    warnings = _warnings(carpet, motion, clip, paths, starts, ground)
    seconds["total"] = time.perf_counter() - t0
    return WalkResult(positions, clip, pins, pos, stretch, targets, bone_error, warnings, seconds,
                      path_frames=np.asarray(walked, np.int64))


def leg_chains(skeleton, standing):
    """Per leg ``(hip, knee, ankle, bones)``: the topmost standing joint of a foot (the ankle,
    a hock, a wrist), its parent (the knee, an elbow) and grandparent (the hip joint, a
    shoulder), and the two bones between them (indexed by their child joint)."""
    standing = set(np.asarray(standing).tolist())
    out = []
    for ankle in sorted(standing):
        knee = int(skeleton.parents[ankle])
        if knee < 0 or knee in standing:
            continue
        hip = int(skeleton.parents[knee])
        if hip < 0:
            continue
        out.append((hip, knee, ankle, [knee, ankle]))
    return out


def body_joints(skeleton, standing):
    """(K,) the joints that are not on a leg: a leg is the chain above a standing joint up to,
    not including, the first joint with several children (the hips, a quadruped's chest)."""
    kids = np.bincount(skeleton.parents[skeleton.parents >= 0], minlength=len(skeleton))
    leg = set()
    for j in np.asarray(standing).tolist():
        while j >= 0 and kids[j] < 2 and j not in leg:
            leg.add(j)
            j = int(skeleton.parents[j])
    # Below a leg's top, everything is the leg (a foot's toes).
    for j in skeleton.order.tolist():
        if skeleton.parents[j] in leg:
            leg.add(j)
    return np.array([j for j in range(len(skeleton)) if j not in leg], np.int64)


def _rigid_body(carpet, motion, clip, targets, affinity):
    """The body above the legs as the source has it, placed by the best-fit rigid motion of its
    Eq. 2 targets (in place).

    Each joint's Eq. 2 target averages the terrain over its own window of descriptors, wider
    the higher the joint: over hills neighbouring spine joints were lifted by different
    heights, and the bone lengths turned the difference into a zig-zag spine (measured: 63°
    at a spine joint the source holds straight, on 35 cm hills). The body still turns, tilts
    and rises as its targets say (a quadruped's trunk pitches on a slope); only its shape is
    the source's. Legs below their top joint (the hip joint) keep their own targets."""
    sk = carpet.skeleton
    body = body_joints(sk, carpet.standing)
    if len(body) < 3:
        return
    # With the top joint of each leg (a hip joint): the pelvis is one piece.
    body = np.r_[body, [j for j in range(len(sk)) if sk.parents[j] in set(body.tolist()) and j not in body]]
    shape = motion[:, body]
    shape = shape - shape.mean(axis=1, keepdims=True)                              # the source's, centred
    for c in range(len(clip)):
        # One character at a time: a character's rotations are then the same alone as in a
        # crowd (``nearest_rotation`` takes another method for batches of another size).
        # (All at once measured no faster: 0.19-0.32 s against 0.20-0.24 s for 100 x 1000.)
        src = shape[clip[c]]                                                        # (F,K,3)
        tgt = targets[c][:, body]
        ct = tgt.mean(axis=1, keepdims=True)
        targets[c][:, body] = np.matmul(src, np.swapaxes(kabsch(src, tgt - ct), -1, -2)) + ct
    # The body holds its targets as firmly as a joint in contact (affinity 1): with the paper's
    # affinity (low far from surfaces), a leg whose targets do not fit its bones bent the
    # pelvis round and kinked the spine (measured: 17° median at a spine joint the source
    # holds straight, on 15 cm hills, with every target of the body straight).
    affinity[:, :, body] = BODY_AFFINITY

def _frames_to(mask):
    """(F,) frames from each frame to the nearest frame where ``mask`` (F,) is set."""
    F = len(mask)
    idx = np.arange(F)
    last = np.maximum.accumulate(np.where(mask, idx, -F * 4))
    nxt = np.minimum.accumulate(np.where(mask, idx, F * 5)[::-1])[::-1]
    return np.minimum(idx - last, nxt - idx)


def _reach_stances(carpet, rig, motion, clip, targets, pins, walked=None):
    """Lower the body where a held foot (or one easing onto or off its hold) is farther from its
    hip than the leg can reach (in place).

    The hips' Eq. 2 target averages the terrain over a metre or so; in a dip the foot held on
    the terrain hangs out of reach, and the solver, pulling the leg straight, drags the hips
    sideways and kinks the spine (measured: a 64° bend at a spine joint the source holds
    straight, on 35 cm hills). Each leg may be held as far as the source holds it at that
    frame, or 97 % of its length if more; the body (and the hip joints) goes down by what the
    farthest held leg needs, weighted by how held it is, kept up over ±3 frames and smoothed
    (σ 2 frames). Nothing moves where every held foot is within that reach (a flat floor, a
    rigid move). Character c's first ``walked[c]`` frames only (default: all)."""
    from scipy.ndimage import gaussian_filter1d, maximum_filter1d
    chains = leg_chains(carpet.skeleton, carpet.standing)
    body = body_joints(carpet.skeleton, carpet.standing)
    moved = np.unique(np.r_[body, [hip for hip, _, _, _ in chains]])
    C, F = clip.shape
    for c in range(C):
        n = F if walked is None else int(walked[c])
        drop = np.zeros(n)
        src = motion[clip[c, :n]]
        lengths = rig.lengths[clip[c, :n]]
        for hip, _, ankle, bones in chains:
            held = ~np.isnan(pins[c, :n, ankle, 0])
            if not held.any():
                continue
            # How held: 1 on held frames, fading over the ease window either side.
            gap = _frames_to(held)
            w = np.clip(1.0 - gap / (EASE_FRAMES + 1.0), 0.0, 1.0)
            w = w * w * (3.0 - 2.0 * w)
            foot = np.where(held[:, None], pins[c, :n, ankle], targets[c, :n, ankle])
            v = targets[c, :n, hip] - foot
            reach = np.maximum(np.linalg.norm(src[:, hip] - src[:, ankle], axis=1),
                               REACH_FRACTION * lengths[:, bones].sum(axis=1))
            # Lower the hip by x (along -z) until |v - x z| = reach.
            disc = v[:, 2] ** 2 - np.einsum("fd,fd->f", v, v) + reach ** 2
            x = np.where(disc >= 0, v[:, 2] - np.sqrt(np.maximum(disc, 0.0)), v[:, 2])
            drop = np.maximum(drop, w * np.maximum(x, 0.0))
        if drop.any():
            drop = gaussian_filter1d(maximum_filter1d(drop, 7, mode="nearest"), 2.0, mode="nearest")
            targets[c][:n, moved, 2] -= drop[:, None]
        # A free foot whose target its leg cannot reach is brought within reach (with what hangs
        # below it, and half as much its knee): pulled straight, the leg would drag the pelvis
        # round and the spine with it.
        for hip, knee, ankle, bones in chains:
            free = np.isnan(pins[c, :n, ankle, 0])
            v = targets[c, :n, ankle] - targets[c, :n, hip]
            length = np.linalg.norm(v, axis=1)
            limit = np.maximum(np.linalg.norm(src[:, hip] - src[:, ankle], axis=1),
                               FREE_REACH_FRACTION * lengths[:, bones].sum(axis=1))
            over = free & (length > limit)
            if not over.any():
                continue
            shift = v[over] * (limit[over] / length[over] - 1.0)[:, None]
            foot = [ankle] + carpet.skeleton.descendants(ankle)
            rows = np.flatnonzero(over)
            targets[c][np.ix_(rows, foot)] += shift[:, None]
            targets[c][rows, knee] += 0.5 * shift


def _knees_onto_held_feet(carpet, rig, solved, pins, clip):
    """Each two-bone leg whose ankle is held: its knee placed exactly (two-bone IK from the solved
    hip joint to the held ankle, in the plane the solve bent it in), in place. The solve's few
    sweeps leave a held leg's bones a little off where the body holds its targets firmly
    (measured: 3 % on a shin); the exact-length pass after it would leave that on the held
    ankle's bone. A hip out of reach leaves the leg straight towards the ankle."""
    for hip, knee, ankle, bones in leg_chains(carpet.skeleton, carpet.standing):
        held = ~np.isnan(pins[:, :, ankle, 0])
        if not held.any():
            continue
        a, c, k = solved[:, :, hip][held], solved[:, :, ankle][held], solved[:, :, knee][held]
        l1 = rig.lengths[clip[held], bones[0]]
        l2 = rig.lengths[clip[held], bones[1]]
        solved[held, knee] = two_bone(a, k, c, l1, l2)[0]


def _follow_paths(carpet, motion, clip, paths, starts, targets):
    """Shift each frame's targets across the ground so the root's is where the carpet puts the
    source's root: on its path, at the source's own offset from the clip's line (in place).

    Eq. 2 averages the root over descriptors a metre around it; on a bend their chord pulls
    it towards the inside (measured: 5 cm on a 2 m radius turn with the generated walk,
    12 cm with the real one). A straight path or a rigid move leaves the shift 0."""
    H = carpet.body_height
    for c, path in enumerate(paths):
        src = motion[clip[c], carpet.root]
        u = src[:, 0] - starts[c]
        centre = path.at(u)
        yaw = path.heading(u, HEADING_WINDOW * H)
        want = centre[:, :2] + src[:, 1:2] * np.stack([-np.sin(yaw), np.cos(yaw)], axis=1)
        targets[c, :, :, :2] += (want - targets[c, :, carpet.root, :2])[:, None]


def trunk_chain(skeleton, body, motion):
    """The trunk: the chain of body joints from the root, each step the straightest
    continuation of the bone before it (hips to head; a quadruped's pelvis to head). For
    judging poses: the bends along it (benchmarks, tests)."""
    body = set(np.asarray(body).tolist())
    pose = np.median(motion, axis=0)
    root = next(j for j in skeleton.order.tolist() if j in body)
    chain, j = [root], root
    while True:
        kids = [k for k in skeleton.children(j).tolist() if k in body]
        if not kids:
            break
        if len(chain) > 1:      # the straightest continuation of the bone into j (the spine, not an arm)
            into = pose[j] - pose[chain[-2]]
            nxt = max(kids, key=lambda k: np.dot(pose[k] - pose[j], into) / max(np.linalg.norm(pose[k] - pose[j]),
                                                                                    1e-300))
        else:                   # from the root: the child with the most of the body below it
            nxt = max(kids, key=lambda k: len(set(body) & {k, *skeleton.descendants(k)}))
        chain.append(nxt)
        j = nxt
    return chain


def solve_crowd(rig, motion, clip, targets, affinity, pins, progress=None, solver_options=None):
    """Warp every character at once: rows of the solver's batch are (character, frame), each
    row's bone lengths, hinges and limits those of its frame of the played clip ``clip`` (C,F).
    Returns (C,F,J,3). One character solved alone gives what it gives in the crowd.

    The frames are cut into segments of ``CROWD_SEGMENT_FRAMES`` solved side by side, every
    character's, as ``Warper.run`` cuts a clip: a segment starts ``Warper.warmup`` frames early at
    its targets, then, like parareal time integration, a segment whose predecessor frame is not
    the pose it started from (within ``Warper.segment_tolerance`` body heights) is solved again
    from it until none is. A step of 100 characters costs numpy's calls more than their
    arithmetic: four segments side by side cost about twice one, for four times the frames
    (measured, benchmarks/RESULTS.md). The segments' frames do not depend on how many frames or
    characters are solved, so a character alone is solved as in a crowd; the result is the
    sequential solve's within a few ``segment_tolerance`` body heights (test).
    """
    C, F = clip.shape
    J = targets.shape[2]
    options = dict(solver_options or {})
    if rig.hinges is not None:
        options["hinges"] = (rig.hinges, motion)
    if len(rig.limits):
        options["limits"] = (rig.limits.pairs, rig.limits.min_distance(rig.lengths))
    warper = Warper(rig.edges, rig.edge_lengths, rig.binding.body_height, glue=rig.glue,
                    pins=pins.reshape(C * F, *pins.shape[2:]), rows=clip.ravel(), clusters=rig.clusters,
                    **options)
    at = np.arange(C) * F                                                     # row of each character's frame 0
    out = np.empty_like(targets)
    out[:, 0] = warper.settle(targets[:, 0], targets[:, 0], affinity[:, 0], at, tolerance=CROWD_STATIC_TOLERANCE)
    L, W = CROWD_SEGMENT_FRAMES, warper.warmup
    K = 1 if F <= L + W else 1 + -(-(F - L - W) // L)
    steps = F if K == 1 else L + W
    first = np.arange(K) * L                                                   # frame each segment starts at
    # For progress: the second pass is guessed (a quarter segment; 68 steps for 100 x 1000).
    budget = steps + (L // 4 if K > 1 else 0)
    done = 0

    def report():
        if progress is not None and (done % 16 == 0) and progress(done, max(budget, done)) is False:
            raise Cancelled(f"cancelled at step {done} of about {budget}")

    # Pass 1: every segment of every character, rows (segment, character).
    goal = _coordinates(targets[:, first])                                     # each step's targets, kept for the next
    p = goal.copy()
    p[:, :, :C] = out[:, 0].transpose(2, 1, 0)
    used = None                                                                # the pose each segment went on from
    for k in range(1, steps):
        if k == W:
            used = p.copy()
        # The segments still inside the frames (the last one ends first; every one ends after its
        # warm-up): a row's solve does not depend on the others in its batch.
        n = int(np.count_nonzero(first + k < F))
        if n < p.shape[2] // C:
            p = np.ascontiguousarray(p[:, :, :n * C])
            goal = np.ascontiguousarray(goal[:, :, :n * C])
        fr = first[:n] + k
        before, goal = goal, _coordinates(targets[:, fr])
        q = warper.advance_coordinates((fr[:, None] + at).ravel(), p, before, goal,
                                       affinity[:, fr].swapaxes(0, 1).reshape(n * C, J))
        p = np.transpose(q, (2, 1, 0))
        keep = np.flatnonzero((k >= W) | (first[:n] == 0))
        out[:, fr[keep]] = q.reshape(n, C, J, 3)[keep].swapaxes(0, 1)
        done += 1
        report()
    if K == 1:
        return out
    # Pass 2: a segment whose predecessor frame moved is solved again from it, row by row.
    tol = warper.segment_tolerance * warper.body_height
    link = first[1:] + W - 1                                                   # each later segment's predecessor frame
    used = used.reshape(3, J, K, C)[:, :, 1:].transpose(2, 3, 1, 0)            # (K-1,C,J,3)
    while True:
        off = np.abs(out[:, link].swapaxes(0, 1) - used).max(axis=(2, 3)) > tol    # (K-1,C)
        si, ci = np.nonzero(off)
        if not si.size:
            return out
        fa = link[si]
        used[si, ci] = out[ci, fa]
        p = np.ascontiguousarray(out[ci, fa].transpose(2, 1, 0))
        for k in range(1, L + 1):
            fr = np.minimum(fa + k, F - 1)
            q = warper.advance_coordinates(at[ci] + fr, p, np.ascontiguousarray(targets[ci, fr - 1].T),
                                           np.ascontiguousarray(targets[ci, fr].T), affinity[ci, fr])
            # A segment back on the previous pass's frames (within a tenth of the tolerance)
            # would only repeat them: it stops there.
            inside = fa + k < F
            live = inside & (np.abs(q - out[ci, fr]).max(axis=(1, 2)) > 0.1 * tol)
            out[ci[inside], fr[inside]] = q[inside]
            done += 1
            report()
            if not live.all():
                fa, ci, q = fa[live], ci[live], q[live]
                if not ci.size:
                    break
            p = np.ascontiguousarray(np.transpose(q, (2, 1, 0)))


def _coordinates(poses):
    """Coordinate-major poses (3,J,K*C) of the crowd's poses (C,K,J,3) at each segment's frame,
    rows (segment, character) as the solver's."""
    return np.ascontiguousarray(poses.transpose(3, 2, 1, 0)).reshape(poses.shape[3], poses.shape[2], -1)


def _foot_anchor(skeleton, standing):
    """Per standing joint, its topmost ancestor that can stand too (itself if none)."""
    keep = set(standing.tolist())
    out = {}
    for j in standing.tolist():
        a = j
        while skeleton.parents[a] >= 0 and int(skeleton.parents[a]) in keep:
            a = int(skeleton.parents[a])
        out[j] = a
    return out


def _stance_pins(carpet, laid, motion, clip, pos, rot, ground, targets, pins, walked=None):
    """Pins (C,F,J,3) of every character's stances, and the targets eased onto them (in place).

    A stance of joint j is carried by the descriptor nearest where its foot (the topmost
    standing ancestor) stands: the source's position turned and moved with that descriptor,
    held at its mean over the stance (no slide), on the terrain at the source's height above
    the ground. A standing joint whose parent is held at the same frame keeps its bone length
    instead: it is placed in the vertical plane through the parent and its own still place, at its
    bone's length from the parent, pitched to meet the terrain, and held at the mean of those
    places over its stance. All characters and stances at once, one depth of the foot at a time.
    Character c's stances within its first ``walked[c]`` frames only (default: all), cut there.
    """
    sk = carpet.skeleton
    anchor = _foot_anchor(sk, carpet.standing)
    C, F = clip.shape
    phases = laid.stances
    if not phases:
        return
    pj = np.array([s.joint for s in phases])
    p0 = np.array([s.start for s in phases])
    p1 = np.array([s.stop for s in phases])
    # The descriptor carrying each stance (the same for every character: canonical).
    feet = np.array([motion[s.start:s.stop, anchor[s.joint], :2].mean(axis=0) for s in phases])
    pk = np.argmin(((feet[:, None] - laid.points[None]) ** 2).sum(-1), axis=1)
    # Stance instances: (character, stance) pairs that overlap the character's frames.
    first = clip[:, 0]
    last = first + (F if walked is None else np.asarray(walked))
    ci, si = np.nonzero((p1[None] > first[:, None]) & (p0[None] < last[:, None]))
    lo = np.maximum(p0[si], first[ci]) - first[ci]
    hi = np.minimum(p1[si], last[ci]) - first[ci]
    inst, lf = _expand(lo, hi)                                 # entries: (instance, local frame)
    c, j, k = ci[inst], pj[si[inst]], pk[si[inst]]
    src = motion[clip[c, lf], j]                                # (n,3) canonical
    R, d2 = rot[c, k], pos[c, k]
    d = np.c_[laid.points[k], np.zeros(len(k))]
    placed = d2 + np.einsum("nij,nj->ni", R, src - d)
    I = len(ci)

    def per_instance(values, rows):
        """Mean of ``values`` (m,k) over the entries ``rows`` (m,) of each instance; (I,k), and
        (I,) how many entries each had."""
        n = np.bincount(inst[rows], minlength=I)
        out = np.stack([np.bincount(inst[rows], weights=values[:, a], minlength=I) for a in range(values.shape[1])],
                       axis=1)
        return out / np.maximum(n, 1)[:, None], n

    # Held still (no slide): one place per stance instance, the mean of the carried source.
    where, _ = per_instance(placed[:, :2], np.arange(len(inst)))                       # (I,2)
    level_of = d2[:, 2] - d[:, 2]                                # the descriptor's height: the level to land on
    depth = np.zeros(len(sk), np.int64)
    for q in sk.order.tolist():
        if q in anchor and anchor[q] != q:
            depth[q] = depth[sk.parents[q]] + 1
    for level in range(int(depth[j].max()) + 1 if len(j) else 0):
        e = np.flatnonzero(depth[j] == level)
        parent = sk.parents[j[e]]
        hp = pins[c[e], lf[e], np.maximum(parent, 0)]
        h = e[~np.isnan(hp[:, 0])] if level > 0 else e[:0]
        if h.size:
            # Next to the held parent, on the terrain at the source's height, at its bone's length
            # from the parent (on average over the frames both are down), towards its own place:
            # following its source offset's turn instead, a rolling foot would drag a held toe
            # round the held heel.
            hp_h = pins[c[h], lf[h], sk.parents[j[h]]]
            length = np.linalg.norm(src[h] - motion[clip[c[h], lf[h]], sk.parents[j[h]]], axis=1)
            mean, n = per_instance(np.c_[hp_h, length, src[h, 2]], h)
            inst_h = np.flatnonzero(n > 0)
            top, length, hz = mean[inst_h, :3], mean[inst_h, 3], mean[inst_h, 4]
            toward = where[inst_h] - top[:, :2]
            across = toward / np.maximum(np.linalg.norm(toward, axis=1), 1e-300)[:, None]
            # Newton on the pitch: the terrain taken as the plane of the triangle under the
            # current guess, where the bone's circle meets it (exact on a plane).
            theta = np.zeros(len(inst_h))
            for _ in range(PITCH_STEPS):
                u = length * np.cos(theta)
                z, hit, grad = ground.heights(top[:, :2] + across * u[:, None], top[:, 2], gradient=True)
                z = np.where(hit, z, top[:, 2] - hz)
                slope = np.einsum("nk,nk->n", grad, across)
                k = z - slope * u + hz - top[:, 2]
                scale = length * np.sqrt(1.0 + slope ** 2)
                theta = np.arctan(slope) + np.arcsin(np.clip(k / np.maximum(scale, 1e-300), -1.0, 1.0))
                theta = np.clip(theta, -0.499 * np.pi, 0.499 * np.pi)
            where[inst_h] = top[:, :2] + across * (length * np.cos(theta))[:, None]
        # Each held place on the terrain, at the source's height above the floor on each frame
        # (the bone's length then varies by the millimetres a heel rises while both are down).
        mine = np.unique(inst[e])
        near, _ = per_instance(level_of[e, None] + src[e, 2:3], e)
        z, hit = ground.heights(where[mine], near[mine, 0])
        ground_z = np.zeros(I)
        ground_z[mine] = np.where(hit, z, near[mine, 0])
        q = np.c_[where[inst[e]], ground_z[inst[e]] + src[e, 2]]
        placed[e] = q
        pins[c[e], lf[e], j[e]] = q
    # Targets ease onto each stance over the frames before it and off it after.
    ic, ij = ci, pj[si]
    iR = rot[ic, pk[si]]
    for edge, direction in ((lo, -1), (hi - 1, 1)):
        for step in range(1, EASE_FRAMES + 1):
            f = edge + direction * step
            ok = (f >= 0) & (f < F)
            ok[ok] &= np.isnan(pins[ic[ok], f[ok], ij[ok], 0])
            if not ok.any():
                continue
            a, fa, ea, ja = ic[ok], f[ok], edge[ok], ij[ok]
            w = 1.0 - step / (EASE_FRAMES + 1.0)
            w = w * w * (3.0 - 2.0 * w)
            goal = pins[a, ea, ja] + np.einsum("nij,nj->ni", iR[ok], motion[clip[a, fa], ja] - motion[clip[a, ea], ja])
            targets[a, fa, ja] += w * (goal - targets[a, fa, ja])


def _expand(lo, hi):
    """(instance, frame) of every frame ``lo[i] .. hi[i] - 1`` of every instance i."""
    n = np.maximum(hi - lo, 0)
    inst = np.repeat(np.arange(len(lo)), n)
    frame = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
    return inst, frame


def _ranges(frames):
    """'a-b, c' for sorted frame indices."""
    if not len(frames):
        return ""
    cuts = np.flatnonzero(np.diff(frames) > 1)
    starts = np.r_[frames[0], frames[cuts + 1]]
    ends = np.r_[frames[cuts], frames[-1]]
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in zip(starts.tolist(), ends.tolist()))


def _warnings(carpet, motion, clip, paths, starts, ground):
    """Sharp turns and steep slopes under each character's root, by frame. The slope is the
    terrain's rise along the path over a quarter body height each way, sampled along the path
    and read at each frame's root."""
    H = carpet.body_height
    w = 0.25 * H
    C, F = clip.shape
    u = motion[clip, carpet.root, 0] - np.asarray(starts)[:, None]                     # (C,F)
    lo, hi = u.min(axis=1) - w, u.max(axis=1) + w
    n = np.maximum(2, np.ceil((hi - lo) / (0.5 * w)).astype(int) + 1)
    samples = [np.linspace(a, b, k) for a, b, k in zip(lo, hi, n)]
    at = np.concatenate([p.at(s) for p, s in zip(paths, samples)])
    z, _ = ground.heights(at[:, :2], at[:, 2])
    z = np.split(np.nan_to_num(z), np.cumsum(n)[:-1])
    out = []
    for c, path in enumerate(paths):
        ahead = np.interp(u[c] + w, samples[c], z[c])
        behind = np.interp(u[c] - w, samples[c], z[c])
        slope = np.abs(ahead - behind) / (2 * w)
        # The bend of the carpet under the root: its heading (over the unrolling's window)
        # just ahead of the root against just behind.
        h = HEADING_WINDOW * H
        turn = np.angle(np.exp(1j * (path.heading(u[c] + h, h) - path.heading(u[c] - h, h))))
        radius = 2 * h / np.maximum(np.abs(turn), 1e-12)
        sharp = np.flatnonzero(radius < MIN_TURN_RADIUS * H)
        if sharp.size:
            out.append(f"{path.name}: turn sharper than the walk can follow (radius {radius[sharp].min():.2g}, "
                       f"under {MIN_TURN_RADIUS * H:.2g}) at frames {_ranges(sharp)}")
        steep = np.flatnonzero(slope > MAX_SLOPE)
        if steep.size:
            out.append(f"{path.name}: slope steeper than 30 degrees ({np.degrees(np.arctan(slope.max())):.0f} "
                       f"degrees) at frames {_ranges(steep)}")
    return out
