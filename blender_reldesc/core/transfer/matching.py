"""Where a posture's joints go around a novel object (Al-Ashqar's thesis, §4.5).

For the joints of a key posture near the template object: their distances to the shared
segments (D_j) and their Space Coverage Feature (SCF_j). Around the novel object, aligned
onto the template (``segments.align``), open space is sampled on a jittered grid whose step is
half the character's smallest bone, kept within an arm's length of the surface and outside
the object; each sample gets the same features. Per joint (Eq. 9-15):

1. the 5 % of samples whose D_o is closest to D_j,
2. of those, the 40 % whose SCF_o is closest to SCF_j,
3. weights 1/||SCF_j - SCF_o|| and 1/||D_j - D_o||, each normalised over the candidates, summed,
4. candidates grouped into clusters (linked when within 1.5 sample steps), and the cluster
   whose centre sits where the joint sits relative to the objects' aligned bounding boxes
   chosen (symmetric objects give several clusters),
5. the target: the cluster's candidate of largest weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ..geometry.rays import RayCaster
from .features import closest_on, segment_distances, space_coverage
from .segments import TransferError

#: Eq. 10 and 12: the share of samples kept by segment distance, then by SCF.
KEEP_SEGMENTS = 0.05
KEEP_COVERAGE = 0.40
#: At most this many candidates per joint get an SCF (900 rays each): the 5 % of 50,000
#: samples would be 2,500 per joint, 2-3 µs a ray.
MAX_CANDIDATES = 192
#: The sampling step is at least this fraction of the reach (half the smallest bone, as the
#: thesis, is 1 cm on a hand with fingers: millions of samples around a chair).
MIN_STEP_OF_REACH = 1.0 / 16.0
#: Width of the prior for staying put, as a fraction of the reach.
PRIOR_OF_REACH = 0.25
#: Shifts tried per placed joint when the joints move together (its heaviest candidates).
SHIFTS_PER_JOINT = 6
#: Open space is sampled this many steps beyond the farthest placed joint's distance.
SHELL_STEPS = 2.0


@dataclass
class Targets:
    """Per joint of the key posture (J,): its ``target (J,3)`` around the novel object (NaN
    for joints left to follow), the ``weight (J,)`` of the chosen candidate and the number of
    ``clusters (J,)`` its candidates formed; ``samples`` the open-space points used."""

    target: np.ndarray
    weight: np.ndarray
    clusters: np.ndarray
    samples: np.ndarray


def _outside(points, segmented):
    """(P,) whether each point is outside the (closed) object: an even number of crossings
    along a ray (off the grid's axes, so it does not run along faces)."""
    caster = RayCaster(segmented.vertices, segmented.triangles)
    odd = np.zeros(len(points), bool)
    origin = np.asarray(points, float).copy()
    direction = np.tile([0.0123, 0.0071, 1.0], (len(points), 1))
    live = np.arange(len(points))
    for _ in range(64):
        t, _ = caster.cast(origin[live], direction[live])
        hit = np.isfinite(t)
        odd[live[hit]] ^= True
        origin[live[hit]] += direction[live[hit]] * (t[hit, None] + 1e-7)
        live = live[hit]
        if not live.size:
            break
    return ~odd


def open_space(novel, step, reach, seed=0, shell=None):
    """Jittered grid samples (P,3) with step ``step`` around ``novel``: within ``reach`` of
    its surface and outside it; with ``shell`` (< reach), only those within ``shell`` of it,
    the same samples as the whole set has there (the grid and its jitter are laid over the
    reach either way)."""
    lo, hi = novel.vertices.min(axis=0) - reach, novel.vertices.max(axis=0) + reach
    axes = [np.arange(a, b + 0.5 * step, step) for a, b in zip(lo, hi)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    if len(grid) > 400_000:
        raise TransferError(f"the open space around the new object would need {len(grid)} samples: the object is "
                            "far larger than the character (wrong units?)")
    rng = np.random.default_rng(seed)
    grid = grid + rng.uniform(-0.25 * step, 0.25 * step, grid.shape)
    within = reach if shell is None else min(float(shell), reach)
    if within < reach:
        near = np.all((grid >= novel.vertices.min(axis=0) - within) & (grid <= novel.vertices.max(axis=0) + within),
                      axis=1)
        grid = grid[near]
    dist, _ = closest_on(novel.vertices, novel.triangles, np.ones(len(novel.triangles), bool), grid)
    grid = grid[(dist <= within) & (dist > 1e-6)]
    return grid[_outside(grid, novel)]


def _refine(x, want, novel, names, limit, iterations=6):
    """The candidate ``x`` moved (at most ``limit``) so that its distances to the segments
    match the joint's ``want`` (S,), relatively (a near segment's distance counts most): a
    few Gauss-Newton steps on the distance functions (product decision: the best sample of a
    grid whose step is half a bone sits up to half a step off; a pelvis sat 6 cm low on a stool)."""
    start = x.copy()
    scale = 1.0 / np.maximum(want, 0.25 * limit)
    for _ in range(iterations):
        rows, err = [], []
        for k, name in enumerate(names):
            d, foot = closest_on(novel.vertices, novel.triangles, novel.mask(name), x[None])
            g = (x - foot[0]) / max(d[0], 1e-12)
            rows.append(g * scale[k])
            err.append((d[0] - want[k]) * scale[k])
        A, e = np.array(rows), np.array(err)
        dx = -np.linalg.lstsq(A, e, rcond=None)[0]
        x = x + dx
        off = x - start
        n = np.linalg.norm(off)
        if n > limit:
            x = start + off * (limit / n)
        if np.linalg.norm(dx) < 1e-5:
            break
    return x


def _distance_gap(D_j, H_j, D_o, H_o):
    """(J,P) how far each point's segment distances ``D_o (P,S)`` are from each joint's
    ``D_j (J,S)``, a segment's height difference ``H`` (along up) counting where its sign
    differs (over a seat or under it)."""
    return np.sqrt(np.sum((D_j[:, None] - D_o[None]) ** 2, axis=-1)
                   + np.sum((np.sign(H_j)[:, None] - np.sign(H_o)[None]) ** 2
                            * np.minimum(np.abs(H_j)[:, None], np.abs(H_o)[None]) ** 2, axis=-1))


def _box_coordinates(points, segmented):
    lo, hi = segmented.vertices.min(axis=0), segmented.vertices.max(axis=0)
    return (points - 0.5 * (lo + hi)) / np.maximum(0.5 * (hi - lo), 1e-9)


def _move_together(joints, placed, first, D_j, H_j, scf_j, novel, names, step):
    """Product decision: the joints move together. Each is matched on its own (Eq. 9-15), so
    a hand and its fingers' end could land on two spots of a round table 30 cm apart, which
    no posture reaches, and on a bench twice as wide as the chair the pelvis and the thighs
    went 30 cm apart along it. The shifts that bring one joint onto one of its best
    candidates are tried on all the joints at once, each scored at the shifted joints
    themselves (their distance gap in steps, plus their SCF gap in units of that joint's
    typical candidate gap; a shifted joint inside the object disqualifies the shift); the
    joints start their refinement from their places moved by the best shift. Returns the
    starts, one per placed joint."""
    up = np.array([0.0, 0.0, 1.0])
    shifts, scales = [], []
    for (j, row, pts, w, *_), b in zip(placed, first):
        best = np.argsort(-w, kind="stable")[:SHIFTS_PER_JOINT]
        shifts += [pts[i] - joints[j] for i in np.r_[b, best]]
        scales.append(np.median(np.linalg.norm(space_coverage(pts[best], novel.vertices, novel.triangles)
                                               - scf_j[row], axis=1)))
    shifts = np.unique(np.round(np.array(shifts) / (0.25 * step)), axis=0) * (0.25 * step)
    rows = np.array([row for _, row, *_ in placed])
    js = np.array([j for j, *_ in placed])
    moved = (joints[js][None] + shifts[:, None]).reshape(-1, 3)                      # (K*n,3)
    D_m = segment_distances(moved, novel, names)
    H_m = (moved @ up)[:, None] - novel.centres(names) @ up
    n = len(js)
    gap = np.array([_distance_gap(D_j[rows[i]][None], H_j[rows[i]][None], D_m[i::n], H_m[i::n])[0]
                    for i in range(n)]).T                                            # (K,n)
    scf = space_coverage(moved, novel.vertices, novel.triangles).reshape(len(shifts), n, -1)
    scf_gap = np.linalg.norm(scf - scf_j[rows][None], axis=-1) / np.maximum(scales, 1e-12)[None]
    cost = (gap / step + scf_gap).sum(axis=1)
    cost[~_outside(moved, novel).reshape(len(shifts), n).all(axis=1)] = np.inf
    if not np.isfinite(cost).any():
        return [pts[b] for (_, _, pts, *_), b in zip(placed, first)]
    shift = shifts[int(np.argmin(cost))]
    return [joints[j] + shift for j in js.tolist()]


def match_joints(joints, template, novel, names, step, reach, near=None, seed=0):
    """``Targets`` for the joints (J,3) of a key posture around the template object, on the
    ``novel`` object aligned onto it (same frame). ``names``: the shared segments;
    ``step``: the open-space sampling step (half the smallest bone); ``reach``: how far from
    the surface samples are taken (an arm's length); ``near``: (J,) bool, the joints to place
    (default: those within ``reach`` of the template)."""
    joints = np.asarray(joints, float).reshape(-1, 3)
    J = len(joints)
    full = np.ones(len(template.triangles), bool)
    if near is None:
        near = closest_on(template.vertices, template.triangles, full, joints)[0] <= reach
    target, weight, clusters = np.full((J, 3), np.nan), np.zeros(J), np.zeros(J, np.int64)
    step = max(float(step), MIN_STEP_OF_REACH * float(reach))
    # Product decision (speed): open space only as far from the object as the placed joints
    # were from the template, plus two steps. A sample farther out is farther than that from
    # every segment, so its distances miss the joint's nearest one by more than two steps:
    # it is never among the best by segment distance (the thesis samples an arm's length
    # around the object: five times the samples around a table).
    to_template = closest_on(template.vertices, template.triangles, full, joints[near])[0]
    shell = min(float(reach), float(to_template.max(initial=0.0)) + SHELL_STEPS * step)
    samples = open_space(novel, step, reach, seed, shell)
    if not near.any():
        return Targets(target, weight, clusters, samples)
    if len(samples) < 20:
        raise TransferError("too little open space around the new object to place the character: is it a closed "
                            "mesh of a sensible size?")
    D_j = segment_distances(joints[near], template, names)
    D_o = segment_distances(samples, novel, names)
    scf_j = space_coverage(joints[near], template.vertices, template.triangles)
    # Eq. 9-10: the closest 5 % by segment distances, per joint; their SCF once for all joints.
    k = min(MAX_CANDIDATES, max(8, int(np.ceil(KEEP_SEGMENTS * len(samples)))))
    # Product decision: the distances are unsigned, so a joint over a seat matched as well
    # under it (a thigh pulled the pelvis 5 cm down); each segment's height difference from
    # the point (along up, in the aligned frame) joins the distances, its sign settling the side.
    up = np.array([0.0, 0.0, 1.0])
    H_j = (joints[near] @ up)[:, None] - template.centres(names) @ up
    H_o = (samples @ up)[:, None] - novel.centres(names) @ up
    dseg = _distance_gap(D_j, H_j, D_o, H_o)
    top = np.argsort(dseg, axis=1, kind="stable")[:, :k]
    wanted = np.unique(top)
    scf_o = np.zeros((len(samples), scf_j.shape[1]))
    scf_o[wanted] = space_coverage(samples[wanted], novel.vertices, novel.triangles)
    box_j = _box_coordinates(joints[near], template)
    placed = []                                          # per joint: (j, row, points, weights, labels, agree)
    for row, j in enumerate(np.flatnonzero(near).tolist()):
        cand = top[row]
        dscf = np.linalg.norm(scf_o[cand] - scf_j[row], axis=1)
        keep = np.argsort(dscf, kind="stable")[:max(4, int(np.ceil(KEEP_COVERAGE * len(cand))))]   # Eq. 11-12
        cand, dscf, ds = cand[keep], dscf[keep], dseg[row, cand[keep]]
        w_scf = 1.0 / np.maximum(dscf, 1e-12)
        # Product decision: distance differences below half a sample step are the jittered
        # grid's noise, not a better match; unfloored, the sample that happened to fall at the
        # joint's distances outweighed every better SCF (a hand on a round table's rim went
        # 18 cm in from it).
        w_seg = 1.0 / np.maximum(ds, 0.5 * step)
        w = w_scf / w_scf.sum() + w_seg / w_seg.sum()                          # Eq. 13-15
        pts = samples[cand]
        pairs = cKDTree(pts).query_pairs(1.5 * step, output_type="ndarray")
        n = len(pts)
        graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
        count, label = connected_components(graph, directed=False)
        # Sidedness: how many axes of the aligned objects' boxes each cluster's weighted centre
        # shares the joint's side on (the objects are aligned: a seat's top is where the
        # template's was, give or take its size).
        centres = np.array([np.average(pts[label == c], axis=0, weights=w[label == c]) for c in range(count)])
        agree = (np.sign(np.round(_box_coordinates(centres, novel), 6)) == np.sign(np.round(box_j[row], 6))).sum(axis=1)
        placed.append((j, row, pts, w, label, centres, agree))
        clusters[j] = count

    def pick(item, goal, width=PRIOR_OF_REACH * reach):
        """The cluster on the joint's side nearest ``goal``, and in it the candidate of largest
        weight with a prior (``width``) for lying near ``goal``."""
        j, row, pts, w, label, centres, agree = item
        chosen = int(np.lexsort((np.linalg.norm(centres - goal, axis=1), -agree))[0])
        inside = np.flatnonzero(label == chosen)
        # Product decision: within the cluster the weight is taken with a prior for staying
        # where the joint was (the objects are aligned): a cluster wrapping a seat's edge held
        # candidates above and under it, and the heaviest was under it.
        prior = np.exp(-0.5 * (np.linalg.norm(pts[inside] - goal, axis=1) / width) ** 2)
        return inside[np.argmax(w[inside] * prior)]

    first = [pick(item, joints[item[0]]) for item in placed]
    starts = [item[2][b] for item, b in zip(placed, first)]
    if len(placed) > 1:
        starts = _move_together(joints, placed, first, D_j, H_j, scf_j, novel, names, step)
    for (j, row, pts, w, *_), best, start in zip(placed, first, starts):
        target[j], weight[j] = _refine(start, D_j[row], novel, names, 2.0 * step), w[best]
    return Targets(target, weight, clusters, samples)
