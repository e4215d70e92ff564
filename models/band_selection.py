"""Band reduction with k-means (seed 001, section 4): a search over random band subsets, and band
clustering.

:class:`BandSubsetSearch` explores thousands of random subsets of a few bands. Each subset gets its own
small k-means over the spectra restricted to its bands, so every pixel is encoded by its cluster
(log2 k bits instead of bands x 16); the subset is scored by how well that code separates the labelled
classes (the share of labelled pixels in their cluster's majority class, as the seed scores its codes
by accuracy), or, without classes, by the share of the variance the code keeps (1 - inertia / total
sum of squares). On the GPU every subset is one block of one kernel launch (``kernels/kmeans.cu``);
on the CPU the same algorithm runs vectorised over batches of subsets.

:class:`BandClustering` clusters the bands themselves (k-means of the standardised band vectors, so
bands that vary together fall together) and keeps, per cluster, the band nearest its centre.
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import InputError, ModelError
from hyperapp.models.base import Estimator, Param

#: labelled classes the GPU kernel's per-cluster histogram holds at most
MAX_CLASSES = 32


def random_subsets(n_bands: int, size: int, count: int, rng) -> np.ndarray:
    """``count`` distinct sorted subsets of ``size`` bands (all of them when there are fewer)."""
    total = math.comb(n_bands, size)
    if total <= count:
        from itertools import combinations

        return np.asarray(list(combinations(range(n_bands), size)), np.int32)
    seen: set[tuple[int, ...]] = set()
    out: list[tuple[int, ...]] = []
    while len(out) < count:
        batch = np.sort(np.argsort(rng.random((2 * (count - len(out)), n_bands)), axis=1)[:, :size], axis=1)
        for row in map(tuple, batch):
            if row not in seen:
                seen.add(row)
                out.append(row)
                if len(out) == count:
                    break
    return np.asarray(out, np.int32)


def balanced_separation(hist: np.ndarray) -> np.ndarray:
    """Balanced accuracy of cluster codes: (S, k, classes) histograms -> (S,) scores in [0, 1].

    Each cluster votes for the class it holds the largest share of (shares of each class's labelled
    pixels, so a small target class counts as much as a large background); a subset's score is the
    mean over classes of the share of that class's pixels in clusters that voted for it.
    """
    tot = hist.sum(axis=1, keepdims=True).astype(np.float64)  # (S, 1, C)
    share = hist / np.maximum(tot, 1)
    vote = share.argmax(axis=2)  # (S, k)
    won = (vote[:, :, None] == np.arange(hist.shape[2])) * share
    return won.sum(axis=1).mean(axis=1)


def _standardise(X):
    xp = get_namespace(X)
    X = X.astype(xp.float32)
    mu = X.mean(axis=0, dtype=xp.float64)
    sd = X.std(axis=0, dtype=xp.float64)
    sd = xp.maximum(sd, 1e-12)
    return ((X - mu.astype(xp.float32)) / sd.astype(xp.float32)), mu, sd


def subset_kmeans_numpy(Xt: np.ndarray, subsets: np.ndarray, init: np.ndarray, iters: int,
                        y: np.ndarray, n_classes: int, batch: int = 64, progress=None):
    """The CPU path of the subset search: the kernel's algorithm, vectorised over ``batch`` subsets.

    Returns centres (S, k, r), inertia (S,), counts (S, k), class histograms (S, k, n_classes) and
    iterations (S,).
    """
    S, r = subsets.shape
    k = init.shape[1]
    centres = init.astype(np.float32).copy()
    inertia = np.zeros(S)
    counts = np.zeros((S, k), np.int64)
    hist = np.zeros((S, k, max(n_classes, 1)), np.int64)
    iters_out = np.zeros(S, np.int64)
    lab_ok = y >= 0
    for a in range(0, S, batch):
        if progress is not None:
            progress(a / S, f"band subsets {a}/{S}")
        sl = slice(a, a + batch)
        P = np.ascontiguousarray(Xt[subsets[sl]].transpose(0, 2, 1))  # (B, n, r)
        C = centres[sl]
        active = np.ones(P.shape[0], bool)
        it = np.zeros(P.shape[0], np.int64)
        pp = (P * P).sum(axis=2)[:, :, None]  # (B, n, 1)

        def dist(C, P=P, pp=pp):  # squared distances (B, n, k) by the expansion: batched GEMMs, no (B, n, k, r) temporary
            return np.maximum(pp - 2.0 * (P @ C.transpose(0, 2, 1)) + (C * C).sum(axis=2)[:, None, :], 0)

        for _ in range(iters):
            lab = dist(C).argmin(axis=2)
            oh = (lab[:, :, None] == np.arange(k)).astype(np.float32)
            cnt = oh.sum(axis=1)
            sums = oh.transpose(0, 2, 1) @ P
            newC = np.where(cnt[:, :, None] > 0, sums / np.maximum(cnt, 1)[:, :, None], C).astype(np.float32)
            it += active
            changed = (newC != C).any(axis=(1, 2))
            C = np.where(active[:, None, None], newC, C)
            active &= changed
            if not active.any():
                break
        d = dist(C)
        lab = d.argmin(axis=2)
        inertia[sl] = np.take_along_axis(d, lab[:, :, None], 2)[:, :, 0].sum(axis=1)
        counts[sl] = (lab[:, :, None] == np.arange(k)).sum(axis=1)
        if n_classes:
            for b in range(P.shape[0]):
                np.add.at(hist[a + b], (lab[b, lab_ok], y[lab_ok]), 1)
        centres[sl] = C
        iters_out[sl] = it
    return centres, inertia, counts, hist[:, :, :n_classes], iters_out


def subset_kmeans_gpu(Xt, subsets: np.ndarray, init: np.ndarray, iters: int, y, n_classes: int):
    """The GPU path: one block per subset, all subsets in one launch (``hyperapp_kmeans_subsets``)."""
    import cupy

    from hyperapp.kernels import allow_shared, get_kernel

    S, r = subsets.shape
    k = init.shape[1]
    nc = max(n_classes, 1)
    fn = get_kernel("kmeans", "hyperapp_kmeans_subsets", {"KS": k, "R": r})  # the classes: a runtime argument
    allow_shared(fn, k * nc * 4)
    n = Xt.shape[1]
    centres = cupy.empty((S, k, r), cupy.float32)
    inertia = cupy.empty(S, cupy.float64)
    counts = cupy.empty((S, k), cupy.int32)
    hist = cupy.empty((S, k, nc), cupy.int32)
    it = cupy.empty(S, cupy.int32)
    fn((S,), (256,), (cupy.ascontiguousarray(Xt), np.int32(n), cupy.asarray(subsets, cupy.int32),
                      cupy.asarray(init, cupy.float32), np.int32(iters), y, centres, inertia, counts, hist, it,
                      np.int32(nc)), shared_mem=k * nc * 4)
    return centres, inertia, counts, hist[:, :, :n_classes], it


class BandSubsetSearch(Estimator):
    """Score many random band subsets by a small k-means on each (seed 001's attribute search).

    Parameters
    ----------
    n_subsets : int
        Random subsets to explore (all subsets when there are fewer).
    subset_size : int
        Bands per subset (r).
    k : int
        Clusters per subset: every pixel is coded in log2(k) bits.
    max_iter : int
        Lloyd iterations per subset at most (each stops once its centres stop moving).
    top : int
        Best subsets kept in ``best_subsets_``.
    seed : int
        Seed of the subsets and of the initial centres (spectra picked at random).

    Attributes
    ----------
    subsets_ : (S, r) int array of band indices (of the bands given to ``fit``)
    scores_ : (S,) float array, higher is better
    score_kind_ : {"class separation", "variance kept"}
    best_subsets_ : (top, r) int array, best first
    best_scores_ : (top,) float array
    centres_ : (k, r) array, the best subset's centres (standardised units)
    best_centres_ : (top, k, r) array, each best subset's centres, for :meth:`predict`'s ``rank``
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("n_subsets", int, help="Random band subsets explored, each with its own small k-means.", minimum=1, maximum=1000000, label="Subsets explored"),
        Param("subset_size", int, help="Bands in each subset.", minimum=1, maximum=16, label="Bands per subset"),
        Param("k", int, help="Clusters per subset: each pixel is coded in log2(k) bits.", minimum=2, maximum=64, label="Clusters per subset"),
        Param("max_iter", int, help="k-means iterations per subset at most.", minimum=1, maximum=1000, label="Iterations at most"),
        Param("top", int, help="Best subsets listed.", minimum=1, maximum=1000, label="Subsets listed"),
        Param("seed", int, help="Seed of the subsets and the initial centres.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, n_subsets: int = 10000, subset_size: int = 3, k: int = 8, max_iter: int = 20,
                 top: int = 20, seed: int = 0):
        self.n_subsets = n_subsets
        self.subset_size = subset_size
        self.k = k
        self.max_iter = max_iter
        self.top = top
        self.seed = seed


    def fit(self, X, y=None, progress=None):
        """Explore subsets of the columns of ``X`` (n, bands).

        ``y`` (n,) holds classes (>= 0) and -1 for unlabelled spectra; with a single class marked, every
        unlabelled spectrum is taken as a second class ("the rest"). Without two classes the subsets
        are scored by the variance their code keeps.
        """
        from hyperapp.models.base import as_pixels, check_finite

        X, _ = as_pixels(X)
        xp = get_namespace(X)
        n, nb = X.shape
        r, k = int(self.subset_size), int(self.k)
        if n == 0:
            raise ModelError("no spectra selected: the selection is empty")
        if not 1 <= r <= nb:
            raise InputError(f"subset size must be between 1 and the number of bands ({nb}), got {r}")
        if k > n:
            raise ModelError(f"k = {k} is larger than the number of spectra ({n})")
        check_finite(X, "selected spectra")
        Z, mu, sd = _standardise(X)
        if not bool((sd > 1e-12).any()):
            raise ModelError("the selected spectra are all identical: there is nothing to cluster")
        self._mu, self._sd = to_host(mu).astype(np.float32), to_host(sd).astype(np.float32)
        if y is None:
            yh = np.full(n, -1, np.int8)
        else:
            yh = np.asarray(to_host(y)).reshape(-1)
            if yh.shape[0] != n:
                raise InputError(f"classes cover {yh.shape[0]} spectra, the selection has {n}")
        if len(np.unique(yh[yh >= 0])) == 1 and (yh < 0).any():
            # one class marked (targets only): separate it from everything else
            yh = np.where(yh >= 0, yh, np.iinfo(np.int64).max)
        classes = np.unique(yh[yh >= 0])
        if len(classes) > MAX_CLASSES:
            raise InputError(f"at most {MAX_CLASSES} classes, got {len(classes)}")
        yc = np.full(n, -1, np.int8)
        for i, c in enumerate(classes):
            yc[yh == c] = i
        n_classes = len(classes) if len(classes) >= 2 else 0
        if n_classes == 0:
            yc[:] = -1
        rng = np.random.default_rng(self.seed)
        subsets = random_subsets(nb, r, int(self.n_subsets), rng)
        S = subsets.shape[0]
        picks = np.stack([rng.choice(n, k, replace=False) for _ in range(S)])  # Forgy start per subset
        Zt = xp.ascontiguousarray(Z.T)  # band-major: one band of all pixels is contiguous
        Zh = to_host(Zt) if xp is np else None
        init = (Zh[subsets[:, None, :], picks[:, :, None]] if xp is np
                else to_host(Zt[xp.asarray(subsets[:, None, :]), xp.asarray(picks[:, :, None])]))
        if progress is not None:
            progress(0.1, f"k-means on {S} band subsets")
        if xp is np:
            C, inertia, counts, hist, iters = subset_kmeans_numpy(
                Zh, subsets, init, int(self.max_iter), yc, n_classes,
                progress=progress.sub(0.1, 0.95) if progress is not None else None)
        else:
            C, inertia, counts, hist, iters = subset_kmeans_gpu(Zt, subsets, init, int(self.max_iter),
                                                                xp.asarray(yc), n_classes)
        C, inertia, hist = to_host(C), to_host(inertia), to_host(hist)
        if n_classes:
            self.scores_ = balanced_separation(hist)
            self.score_kind_ = "class separation"
        else:
            self.scores_ = 1.0 - inertia / (n * r)  # standardised bands: total sum of squares is n per band
            self.score_kind_ = "variance kept"
        self.subsets_ = subsets
        self.inertia_ = inertia
        self.iters_ = to_host(iters)
        self.hist_ = hist
        self.classes_ = classes
        order = np.lexsort((np.arange(S), -self.scores_))[: int(self.top)]
        self.best_subsets_ = subsets[order]
        self.best_scores_ = self.scores_[order]
        self.best_centres_ = C[order]
        self.centres_ = self.best_centres_[0]
        self.n_bands_ = nb
        if progress is not None:
            progress(1.0, "band subsets scored")
        return self


    def predict(self, X, rank: int = 0):
        """The cluster code (0..k-1) of every row of ``X`` (rows, cols, bands) or (n, bands) in the subset of
        ``rank`` (0: the best; up to ``top`` - 1), so any row of the ranking can be mapped."""
        from hyperapp.models.base import as_pixels

        self._check_fitted()
        if not 0 <= int(rank) < len(self.best_subsets_):
            raise InputError(f"rank must be from 0 to {len(self.best_subsets_) - 1}, got {rank}")
        P, lead = as_pixels(X)
        xp = get_namespace(P)
        sub = self.best_subsets_[int(rank)]
        # standardised with the statistics of the fitted spectra, as the centres are
        Z = (P[:, xp.asarray(sub)].astype(xp.float32) - xp.asarray(self._mu[sub])) / xp.asarray(self._sd[sub])
        C = xp.asarray(self.best_centres_[int(rank)])
        d = ((Z[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        return d.argmin(axis=1).astype(xp.int32).reshape(lead)

    def summary(self) -> dict:
        self._check_fitted()
        return {"score": self.score_kind_, "subsets_explored": int(len(self.scores_)),
                "subset_size": int(self.subsets_.shape[1]), "k": int(self.k),
                "bits_per_pixel": math.ceil(math.log2(int(self.k))),
                "best": [{"bands": [int(b) for b in s], "score": float(v)}
                         for s, v in zip(self.best_subsets_, self.best_scores_)],
                "median_score": float(np.median(self.scores_))}

    def tables(self) -> dict:
        self._check_fitted()
        r = self.subsets_.shape[1]
        rows = [[i + 1, *map(int, s), float(v)] for i, (s, v) in enumerate(zip(self.best_subsets_, self.best_scores_))]
        return {"best_subsets": (["rank"] + [f"band_{j + 1}" for j in range(r)] + ["score"], rows)}


class BandClustering(Estimator):
    """Cluster the bands (k-means on standardised band vectors) and keep one band per cluster.

    Parameters
    ----------
    n_clusters : int
        Bands to keep.
    max_pixels : int
        Spectra the band vectors are built from (a seeded sample when there are more).
    seed : int

    Attributes
    ----------
    band_labels_ : (bands,) int array, the cluster of every band
    representatives_ : (n_clusters,) int array, sorted: per cluster, the band nearest its centre
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("n_clusters", int, help="Bands kept: the bands are clustered by how they vary together, and the band nearest each cluster's centre is kept.", minimum=1, maximum=1024, label="Bands to keep"),
        Param("max_pixels", int, help="Of the spectra chosen above, at most this many (a random subset of them) build the band vectors.", minimum=100, maximum=10**7, label="Of them, use at most"),
        Param("seed", int, help="Seed of the sample and of k-means.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, n_clusters: int = 8, max_pixels: int = 20000, seed: int = 0):
        self.n_clusters = n_clusters
        self.max_pixels = max_pixels
        self.seed = seed


    def fit(self, X, y=None, progress=None):
        from hyperapp.models.base import as_pixels, check_finite
        from hyperapp.models.kmeans import MultiKMeans, sq_distances

        X, _ = as_pixels(X)
        xp = get_namespace(X)
        n, nb = X.shape
        k = int(self.n_clusters)
        if n < 2:
            raise ModelError("band clustering needs at least 2 spectra")
        if not 1 <= k <= nb:
            raise InputError(f"the number of band clusters must be between 1 and the number of bands ({nb}), got {k}")
        check_finite(X, "selected spectra")
        rng = np.random.default_rng(self.seed)
        if n > int(self.max_pixels):
            X = X[xp.asarray(np.sort(rng.choice(n, int(self.max_pixels), replace=False)))]
        Z, _, sd = _standardise(X)
        if not bool((sd > 1e-12).any()):
            raise ModelError("the selected spectra are all identical: there is nothing to cluster")
        B = xp.ascontiguousarray(Z.T) / math.sqrt(Z.shape[0])  # (bands, pixels); distances ~ 2 - 2 corr
        km = MultiKMeans(k=k, n_init=3, seed=self.seed, silhouette_sample=0).fit(
            B, progress=progress.sub(0.0, 0.9) if progress is not None else None)
        lab = to_host(km.labels_)
        C = km.centres_for(k)
        d = to_host(sq_distances(B, xp.asarray(C)))
        reps = []
        for c in range(k):
            members = np.flatnonzero(lab == c)
            if members.size:
                reps.append(int(members[np.argmin(d[members, c])]))
        self.band_labels_ = lab.astype(np.int32)
        self.representatives_ = np.asarray(sorted(reps), np.int32)
        self.inertia_ = float(km.inertia_[0])
        self.n_bands_ = nb
        return self

    def summary(self) -> dict:
        self._check_fitted()
        return {"n_clusters": int(self.n_clusters), "representatives": [int(b) for b in self.representatives_],
                "band_clusters": [int(v) for v in self.band_labels_]}

    def tables(self) -> dict:
        s = self.summary()
        rep = set(s["representatives"])
        return {"band_clusters": (["band", "cluster", "representative"],
                                  [[b, c, int(b in rep)] for b, c in enumerate(s["band_clusters"])])}
