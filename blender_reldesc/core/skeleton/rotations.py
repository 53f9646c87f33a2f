"""Rotations and pose recovery.

Quaternions are (w, x, y, z), Blender's order, everywhere in this package. The
only conversion to and from scipy's (x, y, z, w) happens in this module.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from scipy.spatial.transform import Rotation

from ..geometry import cross, dot, normalize
from ..geometry.triangles import norm


def quat_from_matrix(m):
    """(...,3,3) rotation matrices -> (...,4) unit quaternions (w, x, y, z), w >= 0.

    Each from the largest of its four leading terms (the trace and the diagonal: Shepperd's
    method, as scipy's ``Rotation.from_matrix``), in numpy: scipy's took 160 µs for a Rigify
    rig's 273 joints and 45 ms for 100k matrices, this 60 µs and 22 ms, to 1e-15."""
    m = np.asarray(m, dtype=float)
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m.reshape(-1, 9).T
    trace = m00 + m11 + m22
    candidates = np.array([[1.0 + trace, m21 - m12, m02 - m20, m10 - m01],
                           [m21 - m12, 1.0 + m00 - m11 - m22, m01 + m10, m02 + m20],
                           [m02 - m20, m01 + m10, 1.0 - m00 + m11 - m22, m12 + m21],
                           [m10 - m01, m02 + m20, m12 + m21, 1.0 - m00 - m11 + m22]])   # (4,4,n)
    lead = np.argmax(np.stack([trace, m00, m11, m22]), axis=0)
    q = np.take_along_axis(candidates, lead[None, None], axis=0)[0].T                   # (n,4)
    q /= np.sqrt(np.einsum("ni,ni->n", q, q))[:, None]
    q *= np.where(q[:, :1] < 0, -1.0, 1.0)
    return q.reshape(m.shape[:-2] + (4,))


def matrix_from_quat(q):
    """(...,4) quaternions (w, x, y, z) -> (...,3,3) rotation matrices."""
    q = np.asarray(q, dtype=float)
    m = Rotation.from_quat(q.reshape(-1, 4)[:, [1, 2, 3, 0]]).as_matrix()
    return m.reshape(q.shape[:-1] + (3, 3))


def swing(u, v):
    """(...,3,3) smallest rotations taking directions u to v (no twist about them)."""
    return _swing_unit(normalize(u), normalize(v))


def swung(u, v, x):
    """(...,3) vectors ``x`` turned by the smallest rotation taking direction u onto v: ``swing(u, v)
    @ x`` without making the matrices (a crowd's hinge limits turn 1600 normals a step)."""
    u, v, x = normalize(u), normalize(v), np.asarray(x, dtype=float)
    k = cross(u, v)
    c = dot(u, v)
    opposite = c < -1 + 1e-12
    turned = bool(opposite.any())
    with np.errstate(divide="ignore", invalid="ignore") if turned else contextlib.nullcontext():
        # Rodrigues with k unnormalised: R x = c x + k × x + k (k·x) / (1 + c).
        out = c[..., None] * x + cross(k, x) + k * (dot(k, x) / (1.0 + c))[..., None]
    if turned:                                  # a half turn about an axis across u, as ``swing``
        axis = _across(np.broadcast_to(u, out.shape)[opposite])
        xo = np.broadcast_to(x, out.shape)[opposite]
        out[opposite] = 2.0 * axis * dot(axis, xo)[:, None] - xo
    return out


def _across(u):
    """(n,3) unit axes across unit directions ``u`` (n,3): the axis a swing between opposite
    directions turns half a turn about (any across u; this one the same on every path)."""
    return normalize(cross(u, np.where(np.abs(u[:, :1]) < 0.9, [[1.0, 0, 0]], [[0, 1.0, 0]])))


#: ``_swing_unit``'s entries of a flattened 3x3: the diagonal, and the cross-product matrix's
#: entries with the component of the axis and the sign each takes.
_DIAGONAL = np.array([0, 4, 8])
_SKEW_AT, _SKEW_FROM = np.array([1, 2, 3, 5, 6, 7]), np.array([2, 1, 2, 0, 1, 0])
_SKEW_SIGN = np.array([-1.0, 1.0, 1.0, -1.0, -1.0, 1.0])
#: (c, k) (4,) -> the flattened c I + [k]x (9,), from the entries above.
_RODRIGUES = np.zeros((4, 9))
_RODRIGUES[0, _DIAGONAL] = 1.0
_RODRIGUES[1 + _SKEW_FROM, _SKEW_AT] = _SKEW_SIGN


def _swing_unit(u, v):
    """``swing`` of unit directions (...,3) (``recover_rotations`` gives them unit already)."""
    axis = cross(u, v)
    c = dot(u, v)
    # Opposite directions (1 + c = 0) are turned below; numpy's warnings are silenced only where
    # there are some (an errstate is a context manager of Python calls, on every swing).
    opposite = c < -1 + 1e-12
    turned = bool(opposite.any())
    # Rodrigues with k = axis (unnormalised): R = c I + [k]x + k kᵀ / (1 + c).
    with np.errstate(divide="ignore", invalid="ignore") if turned else contextlib.nullcontext():
        r = axis[..., :, None] * (axis / (1.0 + c)[..., None])[..., None, :]
    # c I + [k]x as one product of (c, k) with ``_RODRIGUES``: every entry of the flattened
    # matrix gets its one term plus exact zeros (the same numbers as adding c to the diagonal and
    # k's components to their places, in fewer numpy calls).
    r.reshape(r.shape[:-2] + (9,))[...] += np.concatenate([c[..., None], axis], axis=-1) @ _RODRIGUES
    if turned:                                   # opposite directions: a half turn about any axis across u
        k = _across(u[opposite])
        r[opposite] = 2 * k[:, :, None] * k[:, None, :] - np.eye(3)
    return r


def kabsch(u, v, weights=None):
    """(...,3,3) best-fit rotations taking vector sets u (...,K,3) onto v (...,K,3): the nearest
    proper rotation to the transpose of their covariance (``nearest_rotation``)."""
    # sum_k w_k v_k u_k^T as a batched product (a three-operand einsum took 6.6x as long on
    # 1000 sets of 14 vectors, 3.4x on 100k sets of 3)
    wu = u if weights is None else u * np.asarray(weights)[..., None]
    return nearest_rotation(np.matmul(np.swapaxes(v, -1, -2), wu))


def nearest_rotation(m):
    """(...,3,3) the proper rotation nearest each matrix ``m`` (...,3,3): its orthogonal polar
    factor where the determinant is positive; where it is not (a mirrored matrix, or one of rank 2
    or less) the SVD's, with the sign of its least singular direction flipped.

    Batches of at least ``NEWTON_BATCH`` well-conditioned matrices take scaled Newton steps
    (``_polar_newton``): a crowd's rigid bodies (100k covariances) took 1.2 s by SVD, and a
    600-frame Rigify bind's 96k bone matrices 0.46 s. The others, and any the steps leave
    unsettled, the SVD (the same rotations to 1e-14)."""
    m = np.asarray(m, dtype=float)
    flat = m.reshape(-1, 3, 3)
    out = np.empty_like(flat)
    if len(flat) >= NEWTON_BATCH:
        size = np.sqrt(np.einsum("nij,nij->n", flat, flat))
        good = _det3(flat) > 1e-6 * size ** 3                      # well conditioned, not mirrored
        flat, good = _completed(flat, size, good)
        rot, settled = _polar_newton(flat[good])
        idx = np.flatnonzero(good)
        out[idx[settled]] = rot[settled]
        rest = np.setdiff1d(np.arange(len(flat)), idx[settled], assume_unique=True)
    else:
        rest = np.arange(len(flat))
    if len(rest):
        # The SVD of the transpose, m^T = U S V^T: the rotation is V diag(1, 1, d) U^T (Kabsch's
        # own form, so that a covariance of rank 1, whose answer is not unique, gets the one it got).
        uu, _, vt = np.linalg.svd(np.swapaxes(flat[rest], -1, -2))
        d = np.sign(np.linalg.det(vt.swapaxes(-1, -2) @ uu.swapaxes(-1, -2)))
        fix = np.ones((len(rest), 3))
        fix[:, -1] = np.where(d == 0, 1.0, d)                      # a mirror: keep a proper rotation
        out[rest] = vt.swapaxes(-1, -2) @ (fix[:, :, None] * uu.swapaxes(-1, -2))
    return out.reshape(m.shape)


def orthonormal(m, tolerance=1e-12):
    """(...,3,3) the nearest rotations to ``m`` (``nearest_rotation``); a matrix orthonormal within
    ``tolerance`` already is its own (a live frame's 160 Rigify bones: one check instead of an SVD
    each, 0.28 ms)."""
    m = np.asarray(m, dtype=float)
    flat = m.reshape(-1, 3, 3)
    error = np.abs(np.swapaxes(flat, -1, -2) @ flat - np.eye(3)).max(axis=(-2, -1), initial=0.0)
    bad = np.flatnonzero(~(error <= tolerance) | (_det3(flat) < 0))
    if not bad.size:
        return m
    out = flat.copy()
    out[bad] = nearest_rotation(flat[bad])
    return out.reshape(m.shape)


#: Matrices batched at least this many at a time take Newton steps (``nearest_rotation``); fewer,
#: the SVD: a step costs a few dozen numpy calls whatever the batch (a one-frame
#: ``recover_rotations`` of a Rigify rig took 6.5 ms with steps, 3.9 ms with the SVD).
NEWTON_BATCH = 256


def _completed(flat, size, good):
    """(flat, good) with the matrices not ``good`` (of rank 2: children on a plane, as a hip's
    spine and thighs; or mirrored) that can be, completed for the Newton steps: ``m + C / |m|``,
    ``C`` the cofactor matrix, has m's singular vectors, and its least singular value turns to
    the sign the proper rotation needs (``C = det(U) det(V) diag(s2 s3, s1 s3, s1 s2)`` in them),
    so its polar factor is the SVD's answer for ``m``; those whose completion is not well
    conditioned either (rank 1, or two least singular values alike) stay with the SVD. A crowd's
    twist limits sent 161k hip and chest covariances of rank 2 to the SVD (0.36 s)."""
    bad = np.flatnonzero(~good & (size > 0))
    if not bad.size:
        return flat, good
    m = flat[bad]
    rows = m[:, 0], m[:, 1], m[:, 2]
    cof = np.stack([cross(rows[1], rows[2]), cross(rows[2], rows[0]), cross(rows[0], rows[1])], axis=1)
    done = m + cof / size[bad, None, None]
    new_size = np.sqrt(np.einsum("nij,nij->n", done, done))
    ok = _det3(done) > 1e-6 * new_size ** 3
    if not ok.any():
        return flat, good
    flat = flat.copy()
    flat[bad[ok]] = done[ok]
    good = good.copy()
    good[bad[ok]] = True
    return flat, good


def _det3(a):
    """(n,) determinants of (n,3,3) matrices (the triple product of their rows)."""
    return np.einsum("ni,ni->n", a[:, 0], cross(a[:, 1], a[:, 2]))


def _polar_newton(a, steps=12):
    """Orthogonal polar factors of (n,3,3) matrices with positive determinants by Higham's scaled
    Newton iteration ``X <- (g X + X^-T / g) / 2`` (the inverse by cofactors, on the nine entries
    as flat arrays: a few microseconds a matrix, against 5 for numpy's batched SVD), and (n,)
    whether each settled (orthonormal to 1e-12). Stops once every matrix has."""
    x = [np.array(a[:, i, j], dtype=float) for i in range(3) for j in range(3)]
    for _ in range(steps):
        x00, x01, x02, x10, x11, x12, x20, x21, x22 = x
        c = [x11 * x22 - x12 * x21, x12 * x20 - x10 * x22, x10 * x21 - x11 * x20,
             x02 * x21 - x01 * x22, x00 * x22 - x02 * x20, x01 * x20 - x00 * x21,
             x01 * x12 - x02 * x11, x02 * x10 - x00 * x12, x00 * x11 - x01 * x10]       # cofactors
        det = x00 * c[0] + x01 * c[1] + x02 * c[2]
        inv_t = [ck / det for ck in c]                                                  # X^-T
        g = np.sqrt(np.sqrt(sum(v * v for v in inv_t) / sum(v * v for v in x)))
        new = [0.5 * (g * xk + ik / g) for xk, ik in zip(x, inv_t)]
        change = max(float(np.abs(nk - xk).max(initial=0.0)) for nk, xk in zip(new, x))
        x = new
        if change < 1e-15:
            break
    x = np.stack(x, axis=1).reshape(-1, 3, 3)
    err = np.abs(np.swapaxes(x, -1, -2) @ x - np.eye(3)).max(axis=(-2, -1), initial=0.0)
    return x, err < 1e-12


def recover_rotations(skeleton, original, adapted, primary=None, matrices=False):
    """World-space rotation of each bone from the original to the adapted pose.

    Parameters
    ----------
    skeleton : Skeleton.
    original, adapted : (F,J,3) joint positions.
    primary : optional (J,) int, for joints with several children the child
        the bone points at (its tail; -1 for none). Its direction is then met
        exactly: the best-fit rotation is followed by the small swing onto it,
        so a connected child bone starts exactly at the adapted joint.
    matrices : return (F,J,3,3) rotation matrices instead of quaternions.

    Returns
    -------
    (F,J,4) quaternions (w, x, y, z), the delta R_j with
    ``adapted_frame_j = R_j @ original_frame_j``: for a joint with one child,
    the parent's rotation followed by the swing onto the adapted child
    direction, which keeps the bone's twist relative to its parent; for
    several children, the best-fit (Kabsch) rotation of the child offsets
    (children all on one line: as for one child); a leaf or a zero-length bone takes its
    parent's rotation; a lone root keeps identity.
    """
    original = np.asarray(original, dtype=float)
    adapted = np.asarray(adapted, dtype=float)
    F, J, _ = original.shape
    parents = np.asarray(skeleton.parents)
    # A child counts when its bone has a length on every frame (of one frame, when the original
    # is one pose broadcast over the frames: the twist limits' reference over a crowd's 100k).
    child = np.flatnonzero(parents >= 0)
    once = original[:1] if F and original.strides[0] == 0 else original
    child = child[(norm(once[:, child] - once[:, parents[child]]) > 1e-12).all(axis=0)]
    levels, (singles, kids, spans), plan = _levels(skeleton, child, primary)
    lone = np.flatnonzero((parents < 0) & (np.bincount(parents[child], minlength=J) == 0))
    if F == 1 and plan[1] <= ONE_POSE_SEVERAL:
        rot = _rotations_of_one_pose(original[0], adapted[0], plan[0], lone)
        return rot if matrices else quat_from_matrix(rot)
    eye = np.broadcast_to(np.eye(3), (F, 3, 3))
    # Every joint is written below but a root without children: only those start as identity.
    rot = np.empty((F, J, 3, 3))
    rot[:, lone] = np.eye(3)
    # The bones of one-child joints at every depth in one go (a live frame asks for one frame:
    # numpy calls, not arithmetic, are its cost).
    u_all = normalize(original[:, kids] - original[:, singles])
    v_all = normalize(adapted[:, kids] - adapted[:, singles])
    # Joints of one depth depend only on their parents: one batched step per depth and kind.
    for (single, kid, par, rooted, multi, several, leaves, leaf_parents), span in zip(levels, spans):
        if single.size:
            base = rot[:, par] if rooted else np.where((par >= 0)[None, :, None, None], rot[:, np.maximum(par, 0)],
                                                       eye[:, None])
            carried = np.einsum("fkij,fkj->fki", base, u_all[:, span])
            # Carry each bone with its parent, then swing it onto the new direction:
            # its twist relative to the parent stays as it was.
            rot[:, single] = _swing_unit(carried, v_all[:, span]) @ base
        if multi.size:
            rot[:, multi] = _several_children(original, adapted, rot, parents, multi, several, eye)
        if leaves.size:
            rot[:, leaves] = rot[:, leaf_parents]
    return rot if matrices else quat_from_matrix(rot)


#: One pose takes ``_rotations_of_one_pose`` when at most this many joints have several children:
#: each costs it an SVD call of its own, where numpy's path fits a depth's together (measured, one pose: 27
#: joints 0.74 -> 0.32 ms, a 65-joint Mixamo rig with fingers 1.16 -> 0.73, the Unreal mannequin's
#: 36 joints with 10 such 1.91 -> 0.81, Rigify's 160 deform bones with 2 such 0.79 -> 0.74; but a
#: 280-joint tree with 68 of them 2.6 -> 4.0 ms).
ONE_POSE_SEVERAL = 16


def _rotations_of_one_pose(original, adapted, plan, lone):
    """``recover_rotations``' matrices (1,J,3,3) of one pose (``original``, ``adapted`` (J,3)), by
    the same rules in Python floats (``plan``: ``_levels``' as lists): a live frame asks for one
    pose at a time, where numpy's calls cost more than the arithmetic (a 27-joint pose took about
    270 calls, 0.74 ms). The same rotations to rounding (tests: against the batched path on every
    convention)."""
    o, a = original.tolist(), adapted.tolist()
    rot = [None] * len(o)
    for j in lone.tolist():
        rot[j] = _EYE
    for singles, multis, leaves in plan:
        for j, k, p in singles:
            base = rot[p] if p >= 0 else _EYE
            turn = _py_swing(_py_apply(base, _py_unit(_py_sub(o[k], o[j]))), _py_unit(_py_sub(a[k], a[j])))
            rot[j] = _py_mul(turn, base)
        for j, p, own, main in multis:
            u = [_py_sub(o[k], o[j]) for k in own]
            v = [_py_sub(a[k], a[j]) for k in own]
            r = _py_nearest_rotation([[sum(vk[i] * uk[c] for uk, vk in zip(u, v)) for c in range(3)]
                                      for i in range(3)])
            span = max(_py_norm(_py_cross(u[0], uk)) for uk in u[1:])
            if span < 1e-4 * _py_norm(u[0]) ** 2:               # on one line: as one child (_several_children)
                base = rot[p] if p >= 0 else _EYE
                side = [-1.0 if _py_dot(uk, u[0]) < 0 else 1.0 for uk in u]
                mean_u = [sum(sk * uk[c] for sk, uk in zip(side, u)) / len(u) for c in range(3)]
                mean_v = [sum(sk * vk[c] for sk, vk in zip(side, v)) / len(u) for c in range(3)]
                r = _py_mul(_py_swing(_py_unit(_py_apply(base, mean_u)), _py_unit(mean_v)), base)
            if main >= 0:
                r = _py_mul(_py_swing(_py_unit(_py_apply(r, u[main])), _py_unit(v[main])), r)
            rot[j] = r
        for j, p in leaves:
            rot[j] = rot[p]
    return np.array(rot, dtype=float)[None]


def _py_nearest_rotation(m):
    """``nearest_rotation`` of one matrix (a 3x3 list) by its SVD path: V diag(1, 1, d) U^T of
    m^T = U S V^T, d the sign that makes it proper."""
    uu, _, vt = (x.tolist() for x in np.linalg.svd(np.array(m).T))
    d = _py_det(vt) * _py_det(uu)                 # det(V U^T)
    d = 1.0 if d >= 0 else -1.0
    return [[vt[0][i] * uu[j][0] + vt[1][i] * uu[j][1] + d * vt[2][i] * uu[j][2] for j in range(3)]
            for i in range(3)]


def _py_det(m):
    return _py_dot(m[0], _py_cross(m[1], m[2]))


_EYE = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def _py_sub(x, y):
    return [x[0] - y[0], x[1] - y[1], x[2] - y[2]]


def _py_dot(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


def _py_cross(x, y):
    return [x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]]


def _py_norm(x):
    return math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])


def _py_unit(x):
    """``normalize`` of one vector."""
    n = max(_py_norm(x), 1e-300)
    return [x[0] / n, x[1] / n, x[2] / n]


def _py_apply(m, x):
    return [m[0][0] * x[0] + m[0][1] * x[1] + m[0][2] * x[2], m[1][0] * x[0] + m[1][1] * x[1] + m[1][2] * x[2],
            m[2][0] * x[0] + m[2][1] * x[1] + m[2][2] * x[2]]


def _py_mul(m, n):
    return [[m[i][0] * n[0][k] + m[i][1] * n[1][k] + m[i][2] * n[2][k] for k in range(3)] for i in range(3)]


def _py_swing(u, v):
    """``_swing_unit`` of one pair of unit directions (a 3x3 list)."""
    k = _py_cross(u, v)
    c = _py_dot(u, v)
    if c < -1 + 1e-12:                          # opposite: a half turn about an axis across u
        w = _py_unit(_py_cross(u, [1.0, 0.0, 0.0] if abs(u[0]) < 0.9 else [0.0, 1.0, 0.0]))
        return [[2 * w[i] * w[j] - (1.0 if i == j else 0.0) for j in range(3)] for i in range(3)]
    q = [k[0] / (1.0 + c), k[1] / (1.0 + c), k[2] / (1.0 + c)]
    return [[k[0] * q[0] + c, k[0] * q[1] - k[2], k[0] * q[2] + k[1]],
            [k[1] * q[0] + k[2], k[1] * q[1] + c, k[1] * q[2] - k[0]],
            [k[2] * q[0] - k[1], k[2] * q[1] + k[0], k[2] * q[2] + c]]


_LEVELS = {}


def _levels(skeleton, child, primary):
    """Per depth of ``skeleton``, what ``recover_rotations`` works on, for the children with a
    length ``child`` and the ``primary`` children: ``(single joints, their child, their parents,
    whether all have one, joints with several children, (index (M,K), weight (M,K), main (M,)),
    leaves, their parents)``; and ``(single joints, their child, each depth's slice of them)``
    over every depth. Kept per skeleton and child set: a live preview asks for one
    frame at a time (on a 273-joint Rigify rig, finding the children again took about 0.6 ms
    of a 2.7 ms call)."""
    key = (id(skeleton), child.tobytes(), None if primary is None else np.asarray(primary).tobytes())
    kept = _LEVELS.get(key)
    if kept is not None and kept[0] is skeleton:
        return kept[1]
    parents = np.asarray(skeleton.parents)
    J = len(parents)
    depth = skeleton.depth
    count = np.bincount(parents[child], minlength=J)
    only = np.full(J, -1)
    only[parents[child]] = child                                  # the child of a one-child joint
    out = []
    for d in range(depth.max() + 1):
        level = depth == d
        single = np.flatnonzero(level & (count == 1))
        par = parents[single]
        multi = np.flatnonzero(level & (count > 1))
        several = None
        if multi.size:
            kids = [child[parents[child] == j] for j in multi.tolist()]
            K = max(len(k) for k in kids)
            index = np.array([np.pad(k, (0, K - len(k)), mode="edge") for k in kids])      # (M,K)
            weight = np.array([[1.0] * len(k) + [0.0] * (K - len(k)) for k in kids])          # (M,K)
            main = None if primary is None else \
                np.array([k.tolist().index(int(primary[j])) if int(primary[j]) in k.tolist() else -1
                          for j, k in zip(multi.tolist(), kids)])
            several = (index, weight, main)
        leaves = np.flatnonzero(level & (count == 0) & (parents >= 0))
        out.append((single, only[single], par, bool((par >= 0).all()), multi, several, leaves, parents[leaves]))
    bounds = np.cumsum([0] + [len(level[0]) for level in out])
    spans = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    singles = np.concatenate([level[0] for level in out]).astype(np.int64)
    kids = np.concatenate([level[1] for level in out]).astype(np.int64)
    # The same as lists for one pose (``_rotations_of_one_pose``): per depth (single joint, its child,
    # its parent), (joint, parent, its children, the main child's place among them or -1), (leaf,
    # parent); and how many joints have several children.
    plan = []
    for single, kid, par, _, multi, several, leaves, leaf_parents in out:
        multis = []
        if multi.size:
            index, weight, main = several
            for m, j in enumerate(multi.tolist()):
                own = [k for k, w in zip(index[m].tolist(), weight[m].tolist()) if w > 0]
                multis.append((j, int(parents[j]), own, -1 if main is None else int(main[m])))
        plan.append((list(zip(single.tolist(), kid.tolist(), par.tolist())), multis,
                     list(zip(leaves.tolist(), leaf_parents.tolist()))))
    out = (out, (singles, kids, spans), (plan, sum(len(multis) for _, multis, _ in plan)))
    if len(_LEVELS) > 32:
        _LEVELS.clear()
    _LEVELS[key] = (skeleton, out)
    return out


def _several_children(original, adapted, rot, parents, multi, several, eye):
    """(F,M,3,3) rotations of joints ``multi`` (M,) that have several children (``several``:
    ``_levels``'s children ``index`` padded to the most any of them has with ``weight`` 0, and
    the ``main`` child's column, -1 for none): the best-fit rotation of the child offsets."""
    index, weight, main = several
    u = (original[:, index] - original[:, multi, None]) * weight[..., None]         # (F,M,K,3)
    v = (adapted[:, index] - adapted[:, multi, None]) * weight[..., None]
    r = kabsch(u, v, weight)                                                         # (M,K) broadcasts
    # Collinear children (e.g. a neck and shoulders that all start at the chest's tail)
    # leave the twist undetermined: carried with the parent and swung, like a bone with one
    # child, so the twist relative to the parent stays as it was.
    # On one line to 1e-4 rad: positions read from Blender carry float32 noise (about 1e-7 of
    # their distance from the origin, 1e-6 of a short offset far from it), and a best fit of
    # children that noise alone spreads turns the joint about that line at random (a pelvis
    # pitched by whatever noise its thighs carry).
    span = np.linalg.norm(cross(u[:, :, :1], u[:, :, 1:]), axis=-1).max(axis=-1)
    flat = span < 1e-4 * np.linalg.norm(u[:, :, 0], axis=-1) ** 2                    # (F,M)
    if flat.any():
        fi, mi = np.nonzero(flat)
        par = parents[multi[mi]]
        base = np.where((par >= 0)[:, None, None], rot[fi, np.maximum(par, 0)], eye[fi])
        n = weight.sum(axis=1)[mi, None]
        # Children on one line may point opposite ways (a pelvis whose thighs start left and
        # right of it): turned to the first child's side before averaging, they cannot cancel.
        uf, vf = u[fi, mi], v[fi, mi]
        side = np.where(np.einsum("kcj,kj->kc", uf, uf[:, 0]) < 0, -1.0, 1.0)[..., None]
        carried = np.einsum("kij,kj->ki", base, (side * uf).sum(axis=1) / n)
        r[fi, mi] = swing(carried, (side * vf).sum(axis=1) / n) @ base
    if main is not None:
        has = np.flatnonzero(main >= 0)
        if has.size:
            uk = u[:, has, main[has]]
            vk = v[:, has, main[has]]
            carried = np.einsum("fmij,fmj->fmi", r[:, has], uk)
            r[:, has] = swing(carried, vk) @ r[:, has]
    return r
