"""Lloyd's k-means with k-means++ seeding, on NumPy or CuPy arrays.

:func:`kmeans_small` places RBF centres (inside each class) on the device the pixels are on, one
CUDA block on the GPU; :class:`MultiKMeans` runs many k at once (seed 001) with distances from the
expansion ||x||² - 2x·c + ||c||², one GEMM per iteration. scikit-learn's KMeans is the CPU reference
in the tests.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.models.base import Estimator, Param


def sq_distances(X, C):
    """(n, k) squared Euclidean distances between rows of X and rows of C."""
    xp = get_namespace(X)
    d = (X * X).sum(axis=1)[:, None] - 2.0 * (X @ C.T) + (C * C).sum(axis=1)[None, :]
    return xp.maximum(d, 0)


class SmallKMeans(NamedTuple):
    """What :func:`kmeans_small` found: ``centres`` (k, d); ``labels`` (n,) of the last assignment;
    ``counts`` (k,) members per centre; ``ssq`` (k,) float64 summed squared distance of each centre's
    members to it (after the last update)."""

    centres: object
    labels: object
    counts: object
    ssq: object


#: the one-block CUDA k-means (``kernels/kmeans_small.cu``) holds centres and float64 sums in shared
#: memory, (2 k d + k) * 8 + 12 k bytes, within the default 48 KB
SMALL_SHARED_BYTES = 48 * 1024


#: points a thread of ``kernels/kmeans_small.cu`` keeps in registers: the template instantiations, a fixed
#: set whatever the data's dimension (0: none, the coordinates read at each use, for wider points)
SMALL_DMAX = (8, 16, 32, 64, 0)


def _small_dmax(dim: int) -> int:
    return next((d for d in SMALL_DMAX if d and dim <= d), 0)


def small_kernel_variants() -> list[tuple[str, tuple[str, ...]]]:
    """(module, name expressions) of every instantiation :func:`kmeans_small` may launch: what
    ``prepare-gpu`` compiles."""
    return [("kmeans_small", (f"hyperapp_kmeans_small<{d}>",)) for d in SMALL_DMAX]


def _small_shared(k: int, dim: int) -> int:
    return (2 * k * dim + k) * 8 + 12 * k


def kmeans_small(X, k: int, n_iter: int = 25, seed: int = 0) -> SmallKMeans:
    """Lloyd's k-means with k-means++ seeding of a few thousand points (the RBFN's centres).

    Distances are float64 (the expansion ||x||² - 2x·c + ||c||² cancels in float32, which let
    near-equidistant points fall differently on two backends), and so are the centre sums; centres are
    kept in the data's float32. Seeding draws each centre with probability proportional to the squared
    distance to the nearest centre so far, from uniforms the host generator draws in advance; Lloyd
    stops early once no coordinate moves more than ``1e-8 + 1e-5 |c|``. On CuPy the whole run is one
    launch of ``kernels/kmeans_small.cu`` (one thread block) when its centres fit in shared memory,
    the same arithmetic; otherwise the array code below runs on either backend.
    """
    xp = get_namespace(X)
    X = X.astype(xp.float32, copy=False)
    n, dim = X.shape
    k = min(int(k), n)
    rng = np.random.default_rng(seed)
    first = int(rng.integers(n))
    u = rng.random(k - 1)
    if xp is not np and _small_shared(k, dim) <= SMALL_SHARED_BYTES:
        return _kmeans_small_gpu(X, k, n_iter, first, u)
    # float64, laid out (d, n) with the points along the fast axis: NumPy's reductions and broadcasts
    # over a d- or k-wide last axis cost 10-20x the arithmetic
    X64 = X.astype(xp.float64)
    XT = xp.ascontiguousarray(X64.T)
    xx = (XT * XT).sum(axis=0)

    def to(j):
        c = X64[j]
        return xp.maximum(xx - 2.0 * (X64 @ c) + c @ c, 0)

    d2 = to(first)
    idx = [first]
    for j in range(1, k):
        cum = np.cumsum(to_host(d2))
        nxt = min(int(np.searchsorted(cum, u[j - 1] * cum[-1], side="right")), n - 1) if cum[-1] > 0 \
            else min(int(u[j - 1] * n), n - 1)
        idx.append(nxt)
        d2 = xp.minimum(d2, to(nxt))
    C = X[xp.asarray(idx)].copy()
    labels = xp.zeros(n, dtype=xp.int64)
    G = xp.empty((k, n), xp.float64)  # one buffer for every iteration (fresh pages cost more than the GEMM)
    for _ in range(n_iter):
        # the arg-min needs only ||c||^2 - 2 c.x, (k, n)
        C64 = C.astype(xp.float64)
        xp.matmul(-2.0 * C64, XT, out=G)
        G += (C64 * C64).sum(axis=1)[:, None]
        labels = G.argmin(axis=0)
        counts = xp.bincount(labels, minlength=k)
        sums = xp.stack([xp.bincount(labels, weights=XT[i], minlength=k) for i in range(dim)], axis=1)
        newC = xp.where((counts > 0)[:, None], (sums / xp.maximum(counts, 1)[:, None]).astype(xp.float32), C)
        done = bool((xp.abs(newC - C) <= 1e-8 + 1e-5 * xp.abs(C)).all())  # numpy.allclose's test
        C = newC
        if done:
            break
    counts = xp.bincount(labels, minlength=k)
    d = XT - C.astype(xp.float64).T[:, labels]
    return SmallKMeans(C, labels, counts, xp.bincount(labels, weights=(d * d).sum(axis=0), minlength=k))


def _kmeans_small_gpu(X, k: int, n_iter: int, first: int, u) -> SmallKMeans:
    import cupy

    from hyperapp.kernels import allow_shared, get_kernel

    n, dim = X.shape
    XT = cupy.ascontiguousarray(X.T)  # (d, n): a warp reads 32 consecutive points of one coordinate
    C = cupy.empty((k, dim), cupy.float32)
    labels = cupy.empty(n, cupy.int32)
    counts = cupy.empty(k, cupy.int32)
    ssq = cupy.empty(k, cupy.float64)
    scratch = cupy.empty((2, n), cupy.float64)
    perm = cupy.empty(n, cupy.int32)
    u_d = cupy.asarray(np.ascontiguousarray(u, np.float64) if len(u) else np.zeros(1))
    expr = f"hyperapp_kmeans_small<{_small_dmax(dim)}>"
    kernel = get_kernel("kmeans_small", expr, name_expressions=(expr,))
    allow_shared(kernel, _small_shared(k, dim))
    kernel(
        (1,), (1024,), (XT, np.int32(n), np.int32(dim), np.int32(k), np.int32(first), u_d, np.int32(n_iter), scratch[0],
                        scratch[1], perm, C, labels, counts, ssq), shared_mem=_small_shared(k, dim))
    return SmallKMeans(C, labels.astype(cupy.int64), counts, ssq)


def kmeans(X, k: int, n_iter: int = 25, seed: int = 0):
    """Cluster the rows of ``X`` into ``k`` groups (:func:`kmeans_small`).

    Returns
    -------
    centres : (k, d) array
    labels : (n,) int array
    """
    r = kmeans_small(X, k, n_iter, seed)
    return r.centres, r.labels


# --------------------------------------------------------------------------------------------------
# Many k at once (seed 001, "Multik")
# --------------------------------------------------------------------------------------------------

#: packed centre-distance block (M centres x points) kept under this many bytes per chunk
CHUNK_BYTES = 256 << 20


def nearest_centre(P, C):
    """Index (int32) of the nearest row of ``C`` for every row of ``P``, in chunks of rows so the
    distance block stays under :data:`CHUNK_BYTES`. ||p||^2 is the same for every centre, so the
    arg-min needs only ||c||^2 - 2 p.c (one GEMM per chunk)."""
    xp = get_namespace(P)
    C = xp.asarray(C).astype(xp.float32)
    cc = (C * C).sum(axis=1)
    out = xp.empty(P.shape[0], xp.int32)
    step = max(1024, CHUNK_BYTES // (4 * C.shape[0] + 4 * P.shape[1]))
    for a in range(0, P.shape[0], step):
        out[a:a + step] = (cc[None, :] - 2.0 * (P[a:a + step].astype(xp.float32) @ C.T)).argmin(axis=1)
    return out


def parse_k(k) -> tuple[int, ...]:
    """``8`` -> (8,); ``"2..16"`` (or ``"2-16"``, ``"2:16"``) -> (2, ..., 16); a list stays a list.

    Raises
    ------
    InputError
        Anything else, or a k below 1.
    """
    from hyperapp.core.errors import InputError

    if isinstance(k, (list, tuple)):
        ks = [int(v) for v in k]
    elif isinstance(k, (int, np.integer)):
        ks = [int(k)]
    else:
        text = str(k).strip()
        if re.fullmatch(r"[+-]?\d+", text):  # one k, its sign and all ("-3" read as a range said "not an integer")
            ks = [int(text)]
        else:
            for sep in ("..", ":", "-"):
                if sep in text:
                    a, _, b = text.partition(sep)
                    try:
                        lo, hi = int(a), int(b)
                    except ValueError as exc:
                        raise InputError(f"k must be an integer or a range like 2..16, got {k!r}") from exc
                    if hi < lo:
                        raise InputError(f"k range {k!r} runs backwards")
                    ks = list(range(lo, hi + 1))
                    break
            else:
                raise InputError(f"k must be an integer or a range like 2..16, got {k!r}")
    if not ks or min(ks) < 1:
        raise InputError(f"k must be at least 1, got {k!r}")
    return tuple(sorted(set(ks)))


def _assign_segments(G, cc, seg_start, seg_host, onehot: bool = False):
    """Labels (S, n), min partial distances (S, n) and, if asked, the transposed one-hot membership
    (M, n) of every point in every segment, from G = C X^T (M, n) (on the CPU, G is overwritten)."""
    xp = get_namespace(G)
    S, n = len(seg_host) - 1, G.shape[1]
    if xp is np:
        lab = np.empty((S, n), np.int32)
        mind = np.empty((S, n), np.float32)
        part = G  # cc - 2 G in place: two passes over the distances fewer, and no second array of them
        part *= -2.0
        part += cc[:, None]
        for s in range(S):  # a loop over runs (tens), never over points
            a, b = seg_host[s], seg_host[s + 1]
            i = part[a:b].argmin(axis=0)
            lab[s] = a + i
            mind[s] = np.take_along_axis(part[a:b], i[None, :], 0)[0]
        oh = None
        if onehot:
            oh = np.zeros(G.shape, np.float32)
            oh[lab, np.arange(n)[None, :]] = 1.0
        return lab, mind, oh
    from hyperapp.kernels import get_kernel

    lab = xp.empty((S, n), xp.int32)
    mind = xp.empty((S, n), xp.float32)
    oh = xp.empty(G.shape, xp.float32) if onehot else None
    k = get_kernel("kmeans", "hyperapp_kmeans_assign")
    k(((n + 255) // 256, S), (256,), (G, cc, seg_start, np.int32(n), lab, mind, oh if onehot else np.uint64(0)))  # a null pointer
    return lab, mind, oh


def lloyd_segments(X, C, seg_host, max_iter: int, tol: float, progress=None):
    """Lloyd's iterations for many runs at once, each run a segment of the packed centres ``C``.

    Every iteration is two GEMMs over all runs together (distances ``C X^T``, sums ``onehot^T X``)
    and one segmented arg-min, in chunks of points so memory stays bounded.

    Returns
    -------
    C : (M, d) final centres
    labels : (S, n) int32, the packed centre index of every point in every run
    inertia : (S,) float64
    n_iter : int
    """
    xp = get_namespace(X)
    n, d = X.shape
    M = C.shape[0]
    S = len(seg_host) - 1
    seg_host = np.asarray(seg_host, np.int64)
    chunk = max(1024, min(n, CHUNK_BYTES // (4 * max(M, 1))))
    xx = (X * X).sum(axis=1)

    full_start = xp.asarray(seg_host.astype(np.int32))
    full_of = xp.asarray(np.repeat(np.arange(S), np.diff(seg_host)).astype(np.int32))

    def sweep(C, seg_host, accumulate: bool):
        S, M = len(seg_host) - 1, C.shape[0]
        seg_start = full_start if S == len(full_start) - 1 else xp.asarray(seg_host.astype(np.int32))
        cc = (C * C).sum(axis=1)
        sums = xp.zeros((M, d), xp.float32) if accumulate else None
        counts = xp.zeros(M, xp.float32) if accumulate else None
        labels = None if accumulate else xp.empty((S, n), xp.int32)
        inertia = None if accumulate else xp.zeros(S, xp.float64)
        for a in range(0, n, chunk):
            if progress is not None:
                progress.check()  # a cancel (or SIGTERM in a batch) stops within one chunk
            Xc = X[a:a + chunk]
            G = C @ Xc.T  # (M, nc), one GEMM for every run
            lab, mind, oh = _assign_segments(G, cc, seg_start, seg_host, onehot=accumulate)
            if accumulate:
                sums += oh @ Xc  # (M, nc) one-hot membership: a second GEMM gives every run's sums
                counts += oh.sum(axis=1)
            else:
                labels[:, a:a + chunk] = lab
                inertia += xp.maximum(mind + xx[None, a:a + chunk], 0).sum(axis=1, dtype=xp.float64)
        return labels, inertia, sums, counts

    it = 0
    # each run stops on its own: once its centres move less than tol, they stay (a run's result must not
    # depend on the runs packed beside it: k = 12 iterated on while k = 16 of a wider range had not converged).
    # On the CPU the runs still moving are swept alone: a run that has stopped gives the same centres
    # whether or not it is swept again (multi-k on the land sample: 51 sweeps for the slowest of 72 runs)
    done = np.zeros(S, bool)
    sizes = np.diff(seg_host)
    for it in range(1, max_iter + 1):
        if progress is not None:
            progress(it / (max_iter + 1), f"k-means iteration {it}")
        act = np.flatnonzero(~done) if xp is np else np.arange(S)
        rows = np.concatenate([np.arange(seg_host[r], seg_host[r + 1]) for r in act]) if act.size < S else None
        sub = np.concatenate([[0], np.cumsum(sizes[act])]) if rows is not None else seg_host
        Ca = C if rows is None else C[rows]
        _, _, sums, counts = sweep(Ca, sub, True)
        seg_of = full_of if rows is None else xp.asarray(np.repeat(np.arange(act.size), sizes[act]).astype(np.int32))
        moving = xp.logical_and(xp.asarray(~done[act])[seg_of], counts > 0)
        newC = xp.where(moving[:, None], sums / xp.maximum(counts, 1)[:, None], Ca)
        shift = xp.zeros(act.size, xp.float64)
        shift += xp.bincount(seg_of, weights=((newC - Ca) ** 2).sum(axis=1).astype(xp.float64), minlength=act.size)
        if rows is None:
            C = newC
        else:
            C = C.copy()
            C[rows] = newC
        done[act] |= to_host(shift <= tol).astype(bool)
        if done.all():
            break
    labels, inertia, _, _ = sweep(C, seg_host, False)
    return C, labels, inertia, it


def seeded_runs(X, runs, max_iter: int, tol: float, progress=None, lloyd_progress=None):
    """Independent k-means runs of the float32 spectra ``X`` (n, bands), seeded (:func:`kmeans_pp`) and
    iterated (:func:`lloyd_segments`) together: ``runs`` lists (generator seed, k), each run drawing from
    ``numpy.random.default_rng(seed)`` alone; ``tol`` is relative to the spectra's mean variance.
    Returns the centred spectra, their mean, the packed centres (centred), the segments' bounds, the
    labels (runs, n; packed indices), the inertias and the iterations run."""
    from hyperapp.core.errors import ModelError

    xp = get_namespace(X)
    mean = X.mean(axis=0, dtype=xp.float64).astype(xp.float32)
    Xc = X - mean[None, :]
    var = float(Xc.var(axis=0, dtype=xp.float64).mean())
    if var <= 0:
        raise ModelError("the selected spectra are all identical: there is nothing to cluster")
    xx = (Xc * Xc).sum(axis=1)
    ks = [int(k) for _, k in runs]
    seeds, min_pot = kmeans_pp(Xc, ks, [np.random.default_rng(s) for s, _ in runs], xx, progress)
    if max(ks) > 1 and min_pot <= 0:
        raise ModelError(f"the selected spectra have fewer than k = {max(ks)} distinct values")
    seg = np.concatenate([[0], np.cumsum(ks)]).astype(np.int64)
    C = xp.concatenate([seeds[j, :k] for j, k in enumerate(ks)], axis=0)
    C, labels, inertia, n_iter = lloyd_segments(Xc, C, seg, max_iter, tol * var, lloyd_progress)
    return Xc, mean, C, seg, labels, inertia, n_iter


def kmeans_pp(X, ks, rngs, xx=None, progress=None):
    """Greedy k-means++ seeding (as scikit-learn's) of many independent runs at once.

    Run ``j`` gets ``ks[j]`` centres, each the best of ``2 + log(k)`` candidates drawn with probability
    proportional to the squared distance to the centres so far. All runs advance together (one GEMM per
    step for every run's candidates); the random numbers come from run ``j``'s own host generator
    ``rngs[j]``, so NumPy and CuPy pick the same points, and a run's seeding does not depend on the other
    runs (k = 2 was seeded differently in a range 2..12 than in 2..16, and chose another k). Returns (runs,
    max(ks), d) centres (rows past a run's k unused) and the smallest potential met (0 means fewer distinct
    points than centres).
    """
    xp = get_namespace(X)
    n = X.shape[0]
    ks = np.asarray(ks, np.int64)
    Rn, kmax = len(ks), int(ks.max())
    trials = 2 + np.log(ks).astype(np.int64)
    L = int(trials.max())
    # candidates beyond a run's own number of trials never win
    extra = xp.asarray(np.where(np.arange(L)[None, :] < trials[:, None], 0.0, np.inf))
    if xx is None:
        xx = (X * X).sum(axis=1)
    # each run's draws from its own generator, in an order that depends only on its k: its first centre,
    # then (k - 1) x its trials uniforms; entries past a run's k or trials are never used (0.5 fills them)
    first = np.empty(Rn, np.int64)
    u = np.full((max(kmax - 1, 0), Rn, L), 0.5)
    for j, (g, k, t) in enumerate(zip(rngs, ks, trials)):
        first[j] = g.integers(n)
        if k > 1:
            u[:k - 1, j, :t] = g.random((int(k) - 1, int(t)))
    idx_d = xp.zeros((Rn, kmax), xp.int64)
    idx_d[:, 0] = xp.asarray(first)
    C0 = X[xp.asarray(first)]
    # distances in the data's float32; potentials and the cumulative sums the sampling searches in float64
    d2 = xp.maximum(xx[None, :] - 2.0 * (C0 @ X.T) + (C0 * C0).sum(axis=1)[:, None], 0)
    min_pot = d2.sum(axis=1, dtype=xp.float64).min()
    rows = xp.arange(Rn)
    live_h = ks > 1
    for j in range(1, kmax):
        if progress is not None:
            progress.check()
        live_h = ks > j
        live = xp.asarray(live_h)
        cs = xp.cumsum(d2, axis=1, dtype=xp.float64)
        pot = cs[:, -1]  # (Rn,)
        min_pot = xp.minimum(min_pot, xp.where(live, pot, xp.inf).min())
        # one sorted array over all runs: offset each run's cumulative sums past the previous run's
        off = xp.concatenate([xp.zeros(1, xp.float64), xp.cumsum(cs[:, -1])[:-1]])
        target = xp.asarray(u[j - 1]) * pot[:, None] + off[:, None]
        cand = xp.searchsorted((cs + off[:, None]).reshape(-1), target.reshape(-1)).reshape(Rn, L)
        cand = xp.clip(cand - rows[:, None] * n, 0, n - 1)
        P = X[cand.reshape(-1)]  # (Rn*L, d)
        dc = xp.maximum(xx[None, :] - 2.0 * (P @ X.T) + (P * P).sum(axis=1)[:, None], 0)
        dc = xp.minimum(d2[:, None, :], dc.reshape(Rn, L, n))
        best = (dc.sum(axis=2, dtype=xp.float64) + extra).argmin(axis=1)
        idx_d[:, j] = xp.where(live, cand[rows, best], idx_d[:, j - 1])
        d2 = xp.where(live[:, None], dc[rows, best], d2)
    return X[idx_d.reshape(-1)].reshape(Rn, kmax, X.shape[1]), float(min_pot)


def pairwise_distances(X):
    """(m, m) Euclidean distances (float64) between the rows of ``X``: one GEMM."""
    xp = get_namespace(X)
    Xd = X.astype(xp.float64)
    return xp.sqrt(xp.maximum(sq_distances(Xd, Xd), 0))


def silhouette(X, labels, k: int, D=None) -> float:
    """Mean silhouette coefficient (as ``sklearn.metrics.silhouette_score``) of ``labels`` in 0..k-1.

    One GEMM for the pairwise distances (or ``D`` given, shared by every k), one for each point's
    distance sums per cluster; meant for a sample of a few thousand points.
    """
    xp = get_namespace(X)
    if D is None:
        D = pairwise_distances(X)
    oh = (labels[:, None] == xp.arange(k)[None, :]).astype(xp.float64)
    sums = D @ oh  # (m, k)
    counts = oh.sum(axis=0)
    own = counts[labels]
    a = sums[xp.arange(X.shape[0]), labels] / xp.maximum(own - 1, 1)
    other = xp.where(oh > 0, xp.inf, sums / xp.maximum(counts, 1)[None, :])
    other = xp.where((counts > 0)[None, :], other, xp.inf)
    b = other.min(axis=1)
    s = (b - a) / xp.maximum(xp.maximum(a, b), 1e-300)
    s = xp.where(own > 1, s, 0.0)
    return float(s.mean())


def davies_bouldin(X, labels, centres) -> float:
    """Davies-Bouldin index (as ``sklearn.metrics.davies_bouldin_score``); lower is better."""
    xp = get_namespace(X)
    k = centres.shape[0]
    C = centres.astype(xp.float64)
    Cx = centres.astype(X.dtype)
    dist = xp.zeros(X.shape[0], xp.float64)
    step = max(1, (128 << 20) // (4 * X.shape[1]))
    for a in range(0, X.shape[0], step):
        diff = X[a:a + step] - Cx[labels[a:a + step]]  # direct differences: no cancellation
        dist[a:a + step] = xp.sqrt((diff * diff).sum(axis=1, dtype=xp.float64))
    counts = xp.bincount(labels, minlength=k)
    s = xp.bincount(labels, weights=dist, minlength=k) / xp.maximum(counts, 1)
    M = xp.sqrt(xp.maximum(sq_distances(C, C), 0))
    xp.fill_diagonal(M, xp.inf)
    r = (s[:, None] + s[None, :]) / M
    r = xp.where(xp.isfinite(r), r, 0.0)
    return float(r.max(axis=1).mean())


def elbow(ks, inertia) -> int:
    """The k at the elbow of the inertia curve: the point farthest below the chord from first to last
    (the "kneedle" rule on the normalised curve)."""
    ks = np.asarray(ks, np.float64)
    y = np.asarray(inertia, np.float64)
    if len(ks) < 3:
        return int(ks[-1])
    x = (ks - ks[0]) / (ks[-1] - ks[0])
    yn = (y - y.min()) / max(y.max() - y.min(), 1e-300)
    chord = 1 - x  # a decreasing curve from 1 to 0
    return int(ks[int(np.argmax(chord - yn))])


class MultiKMeans(Estimator):
    """k-means for one k or a whole range of k at once, with several restarts, on NumPy or CuPy.

    Every k of the range and every restart is a run; each Lloyd iteration assigns the points to the
    centres of all runs with one GEMM and one segmented arg-min and accumulates all new centres with
    one more GEMM, so the data are read once per iteration for every k together (seed 001). Seeding is
    greedy k-means++ (as scikit-learn's), every run's own, all runs advancing together. The data are centred first
    (as scikit-learn does) so the float32 distance expansion keeps its precision.

    Parameters
    ----------
    k : int or str
        One k (``8``) or a range (``"2..16"``); with a range, ``criterion`` chooses the k that labels
        the image.
    n_init : int
        Restarts per k; the run with the lowest inertia is kept.
    max_iter : int
        Lloyd iterations at most.
    tol : float
        Stop when every run's squared centre shift is at most ``tol`` times the mean band variance
        (scikit-learn's rule).
    criterion : {"silhouette", "davies_bouldin", "elbow"}
        How a range chooses its k: the highest silhouette (on a sample), the lowest Davies-Bouldin
        index, or the elbow of the inertia curve.
    silhouette_sample : int
        Points (a seeded random sample) the silhouette is computed on.
    seed : int
        Seed of the host random generator (seeding and the silhouette sample).

    Attributes
    ----------
    k_values_ : (nk,) int array
    inertia_ : (nk,) float array, best over restarts
    centers_ : list of (k, bands) arrays, one per k
    silhouette_, davies_bouldin_ : (nk,) float arrays (NaN for k = 1)
    chosen_k_ : int
    labels_ : (n,) int array, the chosen k's cluster of every fitted point
    n_iter_ : int
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("k", str, help="One number of clusters (8) or a range (2..16): every k of a range is fitted at once and the criterion picks the one that labels the image.", label="Clusters (k or range)"),
        Param("n_init", int, help="Restarts per k from different k-means++ seeds; the lowest inertia is kept.", minimum=1, maximum=100, label="Restarts"),
        Param("max_iter", int, help="Lloyd iterations at most.", minimum=1, maximum=10000, label="Iterations at most"),
        Param("tol", float, help="Stop when the centres move less than this (relative to the mean band variance).", minimum=0.0, maximum=1.0, label="Tolerance"),
        Param("criterion", str, help="How a range chooses k: highest silhouette (on a sample), lowest Davies-Bouldin index, or the elbow of the inertia curve.", choices=("silhouette", "davies_bouldin", "elbow"), label="Choose k by"),
        Param("silhouette_sample", int, help="Spectra (a random sample) the silhouette is computed on.", minimum=0, maximum=20000, label="Silhouette sample"),
        Param("seed", int, help="Seed of the k-means++ seeding and the silhouette sample.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, k="2..16", n_init: int = 4, max_iter: int = 100, tol: float = 1e-4,
                 criterion: str = "silhouette", silhouette_sample: int = 2000, seed: int = 0):
        self.k = k
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.criterion = criterion
        self.silhouette_sample = silhouette_sample
        self.seed = seed


    def fit(self, X, y=None, progress=None):
        """Cluster the rows of ``X`` (n, bands) for every k."""
        from hyperapp.models.base import as_pixels, selected_spectra

        X, _ = as_pixels(X)
        xp = get_namespace(X)
        ks = parse_k(self.k)
        n = X.shape[0]
        X = selected_spectra(X, max(ks), f"k = {max(ks)} is larger than the number of spectra ({n})")
        rng = np.random.default_rng(self.seed)
        # one run per restart and k, each seeded independently; all seeded and iterated together
        runs = [(r, k) for r in range(int(self.n_init)) for k in ks]
        # one generator per run, from (seed, restart, k): a run is seeded alike whatever the rest of the range
        Xc, mean, C, seg, labels, inertia, n_iter = seeded_runs(
            X, [([int(self.seed), r, k], k) for r, k in runs], int(self.max_iter), float(self.tol), progress,
            progress.sub(0.0, 0.9) if progress is not None else None)
        inertia_h = np.asarray(inertia.get() if hasattr(inertia, "get") else inertia)
        self.k_values_ = np.asarray(ks)
        self.inertia_ = np.empty(len(ks))
        self.centers_ = []
        self._labels_all = {}
        for i, k in enumerate(ks):
            cand = [j for j, (_, kk) in enumerate(runs) if kk == k]
            best = min(cand, key=lambda j: (inertia_h[j], j))
            self.inertia_[i] = inertia_h[best]
            self.centers_.append(C[seg[best]:seg[best + 1]] + mean[None, :])
            self._labels_all[k] = labels[best] - int(seg[best])
        self.n_iter_ = int(n_iter)
        # choosing k
        if progress is not None:
            progress(0.92, "choosing k")
        m = min(int(self.silhouette_sample), n)
        samp = xp.asarray(np.sort(rng.choice(n, m, replace=False)))
        self.silhouette_ = np.full(len(ks), np.nan)
        self.davies_bouldin_ = np.full(len(ks), np.nan)
        D = pairwise_distances(Xc[samp]) if m > 2 and len(ks) > 1 else None
        for i, k in enumerate(ks):
            if k < 2:
                continue
            lab = self._labels_all[k]
            if m > k and D is not None:
                self.silhouette_[i] = silhouette(Xc[samp], lab[samp], k, D)
            self.davies_bouldin_[i] = davies_bouldin(Xc, lab, self.centers_[i] - mean[None, :])
        self.chosen_k_ = self._choose(ks)
        self.labels_ = self._labels_all[self.chosen_k_]
        del self._labels_all
        return self

    def _choose(self, ks) -> int:
        """The chosen k; ``criterion_used_`` says by what (the elbow where the asked criterion is undefined
        for every k, a silhouette sample of a few spectra, say: the report said "by silhouette" of a choice
        no silhouette made)."""
        self.criterion_used_ = self.criterion
        if len(ks) == 1:
            return ks[0]
        if self.criterion == "elbow":
            return elbow(ks, self.inertia_)
        vals = self.silhouette_ if self.criterion == "silhouette" else -self.davies_bouldin_
        if np.all(np.isnan(vals)):
            self.criterion_used_ = f"elbow ({self.criterion.replace('_', '-')} undefined for every k)"
            return elbow(ks, self.inertia_)
        if np.isnan(vals).any():
            undefined = [int(k) for k, v in zip(self.k_values_, vals) if np.isnan(v)]
            self.criterion_used_ = (f"{self.criterion} (undefined for k = {', '.join(map(str, undefined))}: the "
                                    "sample is too small)")
        return int(self.k_values_[int(np.nanargmax(vals))])


    def centres_for(self, k: int | None = None):
        """Centres of ``k`` (default: the chosen k)."""
        self._check_fitted()
        k = self.chosen_k_ if k is None else int(k)
        where = np.flatnonzero(self.k_values_ == k)
        if not where.size:
            from hyperapp.core.errors import InputError

            raise InputError(f"k = {k} was not fitted; fitted: {', '.join(map(str, self.k_values_))}")
        return self.centers_[int(where[0])]

    def predict(self, X, k: int | None = None):
        """Nearest centre (0..k-1) of every row of ``X`` for ``k`` (default: the chosen k)."""
        from hyperapp.models.base import as_pixels

        P, lead = as_pixels(X)
        return nearest_centre(P, self.centres_for(k)).reshape(lead)

    def summary(self) -> dict:
        """JSON-ready results: inertia, silhouette and Davies-Bouldin per k, and the chosen k."""
        self._check_fitted()

        def clean(a):  # a criterion undefined at some k (one cluster, an empty one) is written null
            return [None if not np.isfinite(v) else float(v) for v in a]

        # the inertia is the objective: a non-finite one stays visible (hyperapp.analyse.run refuses it)
        return {"k": [int(k) for k in self.k_values_], "inertia": [float(v) for v in self.inertia_],
                "silhouette": clean(self.silhouette_), "davies_bouldin": clean(self.davies_bouldin_),
                "chosen_k": int(self.chosen_k_), "criterion": getattr(self, "criterion_used_", self.criterion),
                "n_iter": self.n_iter_}

    def tables(self) -> dict:
        """CSV tables: the per-k curves and the chosen k's centres (one row per cluster)."""
        from hyperapp.core.backend import to_host

        s = self.summary()
        curves = (["k", "inertia", "silhouette", "davies_bouldin"],
                  [list(r) for r in zip(s["k"], s["inertia"], s["silhouette"], s["davies_bouldin"])])
        C = to_host(self.centres_for())
        centres = (["cluster"] + [f"band_{b}" for b in range(C.shape[1])],
                   [[i, *map(float, row)] for i, row in enumerate(C)])
        return {"kmeans_curves": curves, "centres": centres}
