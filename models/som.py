"""Self-organising map (seed 000, the SOM half): batch training on NumPy or CuPy, any map size.

Each epoch finds every spectrum's best-matching unit with one GEMM of distances to all neurons (in
chunks of spectra, so memory stays bounded whatever the map), accumulates each neuron's sum and count
(one-hot GEMM: a single reduction per epoch), and sets every neuron to the neighbourhood-weighted mean
W = (H S) / (H c), H the Gaussian neighbourhood on the grid. The radius and the learning rate decay
exponentially over the epochs; the learning rate blends the batch mean into the old codebook
(1 = the pure batch rule). The seed capped maps at 1024 neurons to bound kernel launches; here a map of
any size is a few GEMMs per epoch.

Quantisation error (mean distance of a spectrum to its unit) and topographic error (share of spectra
whose two best units are not grid neighbours) are recorded per epoch.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.models.base import Estimator, Param
from hyperapp.models.kmeans import nearest_centre

CHUNK_BYTES = 256 << 20


def grid_coords(rows: int, cols: int) -> np.ndarray:
    """(rows*cols, 2) grid positions of the neurons, row-major."""
    r, c = np.mgrid[0:rows, 0:cols]
    return np.column_stack([r.ravel(), c.ravel()]).astype(np.float64)


def _two_best(X, W, ww, xx):
    """(best unit, second unit, squared distance to the best) of every row of X."""
    xp = get_namespace(X)
    d = ww[None, :] - 2.0 * (X @ W.T)
    b1 = d.argmin(axis=1)
    rows = xp.arange(X.shape[0])
    d1 = d[rows, b1]
    d[rows, b1] = xp.inf
    b2 = d.argmin(axis=1)
    return b1, b2, xp.maximum(d1 + xx, 0)


class SOM(Estimator):
    """Batch self-organising map.

    Parameters
    ----------
    rows, cols : int
        Map size (no cap: 64 x 64 works).
    epochs : int
    sigma_start, sigma_end : float
        Neighbourhood radius (grid units) at the first and the last epoch; ``sigma_start`` 0 means half
        the map's larger side.
    learning_rate_start, learning_rate_end : float
        Share of the batch mean blended into the codebook, first and last epoch.
    codebook_clusters : int
        k > 0 (default 8, a readable number of classes; at most the map's neurons): the image is labelled
        by k-means clusters of the codebook; 0: by best-matching unit (one class per neuron).
    init : {"pca", "random"}
        Codebook start: a plane on the two principal components (deterministic), or random spectra.
    training : {"batch", "online"}
        ``batch``: one neighbourhood-weighted mean per epoch (above). ``online``: the seed's per-spectrum
        rule, w += lr h (x - w) for each spectrum in a seeded random order, radius and learning rate
        decaying over every step (the learning rates then are step sizes: 0.5 -> 0.01 is usual). On the
        GPU one block runs each epoch in one launch (``hyperapp_som_online``); it is sequential by
        nature, so far slower than batch training on large selections.
    seed : int

    Attributes
    ----------
    codebook_ : (rows*cols, bands)
    quantization_error_, topographic_error_ : (epochs,) host arrays
    hits_ : (rows*cols,) spectra per unit at the end
    umatrix_ : (rows, cols) mean distance of each unit to its grid neighbours
    cluster_of_unit_ : (rows*cols,) the codebook cluster of each unit (when codebook_clusters > 0)
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("rows", int, help="Neurons down the map.", minimum=1, maximum=512, label="Map rows"),
        Param("cols", int, help="Neurons across the map.", minimum=1, maximum=512, label="Map columns"),
        Param("epochs", int, help="Passes over the spectra; each is one batch update of every neuron.", minimum=1, maximum=10000, label="Epochs"),
        Param("sigma_start", float, help="Neighbourhood radius (in neurons) at the first epoch; 0: half the map's larger side.", minimum=0.0, maximum=1000.0, label="Start radius (0 = half the map)"),
        Param("sigma_end", float, help="Neighbourhood radius at the last epoch; the radius shrinks exponentially.", minimum=0.01, maximum=1000.0, label="End radius"),
        Param("learning_rate_start", float, help="Share of each epoch's batch mean taken into the codebook at the start (1: the pure batch rule).", minimum=0.001, maximum=1.0, label="Start learning rate (1 = batch)"),
        Param("learning_rate_end", float, help="The same at the last epoch.", minimum=0.001, maximum=1.0, label="End learning rate (1 = batch)"),
        Param("codebook_clusters", int, help="k: colour the image by k-means clusters of the neurons (a readable number of classes); 0: by best-matching neuron (one class per neuron).", minimum=0, maximum=4096, label="Clusters of the codebook"),
        Param("init", str, help="Start from the plane of the two principal components, or from random spectra.", choices=("pca", "random"), label="Start codebook"),
        Param("training", str, help="batch: one neighbourhood-weighted mean per epoch (fast); online: the thesis's per-spectrum updates (sequential, slow on large selections; use learning rates like 0.5 -> 0.01).", choices=("batch", "online"), label="Training"),
        Param("seed", int, help="Seed of the random start and of the codebook's k-means.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, rows: int = 10, cols: int = 10, epochs: int = 10, sigma_start: float = 0.0,
                 sigma_end: float = 1.0, learning_rate_start: float = 1.0, learning_rate_end: float = 1.0,
                 codebook_clusters: int = 8, init: str = "pca", training: str = "batch", seed: int = 0):
        self.rows = rows
        self.cols = cols
        self.epochs = epochs
        self.sigma_start = sigma_start
        self.sigma_end = sigma_end
        self.learning_rate_start = learning_rate_start
        self.learning_rate_end = learning_rate_end
        self.codebook_clusters = codebook_clusters
        self.init = init
        self.training = training
        self.seed = seed


    def schedule(self) -> tuple[np.ndarray, np.ndarray]:
        """(radius, learning rate) of every epoch: exponential decay from start to end."""
        e = int(self.epochs)
        s0 = float(self.sigma_start) or max(int(self.rows), int(self.cols)) / 2.0
        s1 = min(float(self.sigma_end), s0)
        t = np.arange(e) / max(e - 1, 1)
        sig = s0 * (s1 / s0) ** t
        lr = float(self.learning_rate_start) * (float(self.learning_rate_end) / float(self.learning_rate_start)) ** t
        return sig, lr

    def initial_codebook(self, X):
        """The starting codebook: the PCA plane (mean +- 2 std along the first two components), or
        ``rows*cols`` random spectra."""
        xp = get_namespace(X)
        M = int(self.rows) * int(self.cols)
        if self.init == "random":
            rng = np.random.default_rng(self.seed)
            return X[xp.asarray(rng.choice(X.shape[0], M, replace=M > X.shape[0]))].astype(xp.float32)
        mean = X.mean(axis=0, dtype=xp.float64)
        Xs = X[:: max(1, X.shape[0] // 20000)].astype(xp.float64) - mean
        cov = Xs.T @ Xs / max(Xs.shape[0] - 1, 1)
        w, v = np.linalg.eigh(to_host(cov))
        order = np.argsort(w)[::-1][:2]
        comp = v[:, order] * np.sqrt(np.maximum(w[order], 0))  # (bands, 2)
        if comp.shape[1] < 2:  # one band: the plane is that band's line (the map's second axis adds nothing)
            comp = np.column_stack([comp, np.zeros(comp.shape[0])])
        g = grid_coords(int(self.rows), int(self.cols))
        span = np.column_stack([np.linspace(-2, 2, int(self.rows))[g[:, 0].astype(int)],
                                np.linspace(-2, 2, int(self.cols))[g[:, 1].astype(int)]])
        return (xp.asarray(to_host(mean)[None, :] + span @ comp.T)).astype(xp.float32)

    def fit(self, X, y=None, progress=None):
        from hyperapp.models.base import as_pixels, check_not_identical, selected_spectra

        X, _ = as_pixels(X)
        xp = get_namespace(X)
        R, C = int(self.rows), int(self.cols)
        n = X.shape[0]
        X = selected_spectra(X, 2, "a self-organising map needs at least 2 spectra")
        check_not_identical(X, "map")
        M = R * C
        g = grid_coords(R, C)
        gd2 = xp.asarray(((g[:, None, :] - g[None, :, :]) ** 2).sum(axis=2))  # (M, M) grid distances^2
        W = self.initial_codebook(X)
        sig, lr = self.schedule()
        xx = (X * X).sum(axis=1)
        chunk = max(1024, min(n, CHUNK_BYTES // (4 * max(M, 1))))
        qe, te = [], []
        adjacent = xp.asarray(np.abs(g[:, None, :] - g[None, :, :]).max(axis=2) <= 1)
        rng = np.random.default_rng(self.seed)
        for e in range(int(self.epochs)):
            if progress is not None:
                progress(e / self.epochs, f"SOM epoch {e + 1} of {self.epochs}")
            if self.training == "online":
                W = self._online_epoch(X, W, rng.permutation(n), e, gd2, progress)
            ww = (W * W).sum(axis=1)
            S = xp.zeros((M, X.shape[1]), xp.float32)
            cnt = xp.zeros(M, xp.float32)
            qsum = 0.0
            tbad = 0
            for a in range(0, n, chunk):
                if progress is not None:
                    progress.check()  # a cancel (or SIGTERM in a batch) stops within one chunk
                Xc = X[a:a + chunk]
                b1, b2, d1 = _two_best(Xc, W, ww, xx[a:a + chunk])
                oh = xp.zeros((Xc.shape[0], M), xp.float32)
                oh[xp.arange(Xc.shape[0]), b1] = 1.0
                S += oh.T @ Xc
                cnt += oh.sum(axis=0)
                qsum += float(xp.sqrt(d1).sum(dtype=xp.float64))
                tbad += int((~adjacent[b1, b2]).sum())
            qe.append(qsum / n)
            te.append(tbad / n)
            if self.training == "online":
                continue  # the errors above are after this epoch's steps
            H = xp.exp(-gd2 / (2.0 * sig[e] ** 2)).astype(xp.float32)
            num = H @ S
            den = H @ cnt
            batch = xp.where(den[:, None] > 0, num / xp.maximum(den, 1e-30)[:, None], W)
            W = (1.0 - lr[e]) * W + lr[e] * batch
        self.codebook_ = W
        self.quantization_error_ = np.asarray(qe)
        self.topographic_error_ = np.asarray(te)
        self.hits_ = to_host(xp.bincount(nearest_centre(X, W), minlength=M))
        self.umatrix_ = self._umatrix(to_host(W), R, C)
        self.n_bands_ = X.shape[1]
        self.cluster_of_unit_ = None
        k = int(self.codebook_clusters)
        if k > 0:
            from hyperapp.models.kmeans import MultiKMeans

            k = min(k, M)  # a map smaller than the clusters asked: one cluster per neuron
            if k == 1:  # one cluster (a 1 x 1 map): no k-means of one neuron ("the spectra are identical")
                self.cluster_of_unit_ = np.zeros(M, np.int32)
            else:
                km = MultiKMeans(k=k, n_init=4, seed=self.seed, silhouette_sample=0).fit(W)
                self.cluster_of_unit_ = to_host(km.labels_).astype(np.int32)
        if progress is not None:
            progress(1.0, "SOM trained")
        return self

    def _online_epoch(self, X, W, order: np.ndarray, epoch: int, gd2, progress=None):
        """One epoch of the per-spectrum rule over ``order``; the GPU runs it as one kernel launch."""
        xp = get_namespace(X)
        n, d = X.shape
        M = W.shape[0]
        s0 = float(self.sigma_start) or max(int(self.rows), int(self.cols)) / 2.0
        s1 = min(float(self.sigma_end), s0)
        a0, a1 = float(self.learning_rate_start), float(self.learning_rate_end)
        total = int(self.epochs) * n
        step0 = epoch * n
        if xp is not np:
            from hyperapp.kernels import allow_shared, get_kernel

            W = xp.ascontiguousarray(W, dtype=xp.float32)
            k = get_kernel("kmeans", "hyperapp_som_online")
            allow_shared(k, 4 * d)
            k((1,), (1024,), (W, xp.ascontiguousarray(X), xp.asarray(order.astype(np.int32)), np.int32(n),
                              np.int32(d), np.int32(M), np.int32(int(self.cols)), np.float32(s0), np.float32(s1),
                              np.float32(a0), np.float32(a1), np.int64(step0), np.int64(total)),
              shared_mem=4 * d)
            return W
        W = np.array(W, dtype=np.float32)
        gd2 = np.asarray(gd2, np.float32)
        for s, p in enumerate(order):  # the CPU reference of the kernel: the rule is sequential
            if progress is not None and s % 1024 == 0:
                progress.check()
            x = X[p]
            bmu = int(((x - W) ** 2).sum(axis=1).argmin())
            frac = (step0 + s) / max(total - 1, 1)
            sig = np.float32(s0 * (s1 / s0) ** frac)
            lr = np.float32(a0 * (a1 / a0) ** frac)
            h = np.exp(-gd2[bmu] / (np.float32(2.0) * sig * sig))
            W += (lr * h)[:, None] * (x - W)
        return W

    @staticmethod
    def _umatrix(W: np.ndarray, R: int, C: int) -> np.ndarray:
        """Mean distance of every unit to its (up to 8) grid neighbours."""
        G = W.reshape(R, C, -1).astype(np.float64)
        tot = np.zeros((R, C))
        num = np.zeros((R, C))
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                if dr == dc == 0:
                    continue
                r0, r1 = max(0, -dr), R - max(0, dr)
                c0, c1 = max(0, -dc), C - max(0, dc)
                if r1 <= r0 or c1 <= c0:
                    continue
                d = np.sqrt(((G[r0:r1, c0:c1] - G[r0 + dr:r1 + dr, c0 + dc:c1 + dc]) ** 2).sum(axis=2))
                tot[r0:r1, c0:c1] += d
                num[r0:r1, c0:c1] += 1
        return tot / np.maximum(num, 1)


    def best_units(self, X):
        """Best-matching unit of every row of ``X``."""
        from hyperapp.models.base import as_pixels

        self._check_fitted()
        P, lead = as_pixels(X)
        return nearest_centre(P, self.codebook_).reshape(lead)

    def predict(self, X):
        """The unit (or, with codebook clusters, the unit's cluster) of every row of ``X``."""
        b = self.best_units(X)
        if self.cluster_of_unit_ is None:
            return b
        xp = get_namespace(b)
        return xp.asarray(self.cluster_of_unit_)[b]

    def summary(self) -> dict:
        self._check_fitted()
        return {"rows": int(self.rows), "cols": int(self.cols), "epochs": int(self.epochs),
                "quantization_error": [float(v) for v in self.quantization_error_],
                "topographic_error": [float(v) for v in self.topographic_error_],
                "units_hit": int((self.hits_ > 0).sum()),
                "codebook_clusters": int(self.codebook_clusters)}

    def tables(self) -> dict:
        s = self.summary()
        W = to_host(self.codebook_)
        return {"som_errors": (["epoch", "quantization_error", "topographic_error"],
                               [[i + 1, q, t] for i, (q, t) in enumerate(zip(s["quantization_error"],
                                                                             s["topographic_error"]))]),
                "codebook": (["unit", "row", "col", "hits"] + [f"band_{b}" for b in range(W.shape[1])],
                             [[u, u // int(self.cols), u % int(self.cols), int(self.hits_[u]), *map(float, W[u])]
                              for u in range(W.shape[0])])}

    def arrays(self) -> dict:
        """Arrays written beside the report (``codebook.npy``)."""
        return {"codebook": to_host(self.codebook_)}
