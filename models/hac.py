"""Hierarchical agglomerative clustering of spectra (seed 004), NumPy or CuPy.

The seed accelerates average linkage on the GPU from a stored distance matrix. Here: single, complete,
average and Ward linkage, on Euclidean distances or spectral angles (SAM, in radians), with the
output SciPy uses -- a linkage matrix of n - 1 rows (cluster a, cluster b, height, size), clusters
numbered as :func:`scipy.cluster.hierarchy.linkage` numbers them -- so the dendrogram, ``fcluster``
and any SciPy tool read it.

On the CPU the tree is :func:`scipy.cluster.hierarchy.linkage` of the condensed distances
(:func:`scipy.spatial.distance.pdist`; spectral angles as the arccos of one minus the cosine distance).
On the GPU: the full distance matrix (one GEMM, float64 as the seed found double precision needed to keep
the dendrogram's upper merges), every cluster's nearest neighbour, then n - 1 merges, each of the globally
closest pair, with the Lance-Williams update of the merged row and a rescan of only the rows that had one
of the pair as nearest neighbour (exact for these reducible linkages), all in one kernel launch
(``kernels/hac.cu``).

The tree is cut into ``n_clusters`` clusters (or at ``height``), each cluster's mean spectrum is kept,
and :meth:`HierarchicalClustering.predict` gives any spectrum the cluster of the nearest mean (by the
same metric), so the whole image can be labelled from clusters of a selection.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import InputError
from hyperapp.models.base import Estimator, Param

LINKAGES = ("single", "complete", "average", "ward")
METRICS = ("euclidean", "sam")
#: share of free device (or host) memory the distance matrix may take
MATRIX_SHARE = 0.6


def distance_matrix(X, metric: str = "euclidean"):
    """Full (n, n) float64 distances, +inf on the diagonal: Euclidean, or spectral angle in radians."""
    xp = get_namespace(X)
    A = X.astype(xp.float64)
    if metric == "sam":
        nrm = xp.sqrt((A * A).sum(axis=1))
        if bool((nrm == 0).any()):
            raise InputError("a spectrum of all zeros has no spectral angle: use the euclidean metric")
        A = A / nrm[:, None]
        D = xp.arccos(xp.clip(A @ A.T, -1.0, 1.0))
    else:
        A = A - A.mean(axis=0)  # centred: smaller norms, less cancellation in |a|^2 + |b|^2 - 2ab
        sq = (A * A).sum(axis=1)
        D = sq[:, None] + sq[None, :] - 2.0 * (A @ A.T)
        xp.maximum(D, 0.0, out=D)
        xp.sqrt(D, out=D)
    xp.fill_diagonal(D, np.inf)
    return D


def condensed_distances(X: np.ndarray, metric: str = "euclidean") -> np.ndarray:
    """SciPy's condensed float64 distances of host spectra: Euclidean, or spectral angle in radians."""
    from scipy.spatial.distance import pdist

    A = np.asarray(X, dtype=np.float64)
    if metric == "sam":
        nrm = np.sqrt((A * A).sum(axis=1))
        if bool((nrm == 0).any()):
            raise InputError("a spectrum of all zeros has no spectral angle: use the euclidean metric")
        d = pdist(A / nrm[:, None], "cosine")
        np.subtract(1.0, d, out=d)
        np.clip(d, -1.0, 1.0, out=d)
        return np.arccos(d, out=d)
    return pdist(A)


def _linkage_cpu(X: np.ndarray, method: str, metric: str) -> np.ndarray:
    """The tree on the host: :func:`scipy.cluster.hierarchy.linkage` of :func:`condensed_distances`
    (with ``sam`` and Ward, SciPy applies Ward's update to the angles, as the GPU kernel does)."""
    from scipy.cluster.hierarchy import linkage

    return linkage(condensed_distances(X, metric), method)


def _merge_gpu(D, method: str) -> np.ndarray:
    import cupy as cp

    from hyperapp.kernels import get_kernel

    n = D.shape[0]
    nn = cp.empty(n, cp.int32)
    nnd = cp.empty(n, cp.float64)
    get_kernel("hac", "hac_row_nn")((n,), (256,), (D, np.int32(n), nn, nnd))
    size = cp.ones(n, cp.int32)
    label = cp.arange(n, dtype=cp.int32)
    todo = cp.empty(n, cp.int32)
    Z = cp.empty((n - 1, 4), cp.float64)
    # one block per SM, so every block of the persistent kernel is resident for its grid barrier
    blocks = min(cp.cuda.Device().attributes["MultiProcessorCount"], max(1, n // 64))
    part_d = cp.empty(2 * blocks, cp.float64)
    part_i = cp.empty(2 * blocks, cp.int32)
    bar = cp.zeros(4, cp.uint32)
    get_kernel("hac", "hac_merge")((blocks,), (512,), (D, np.int32(n), np.int32(LINKAGES.index(method)), nn, nnd,
                                                        size, label, todo, Z, part_d, part_i, bar))
    return to_host(Z)


def check_linkage_size(n: int, xp) -> None:
    """Refuse a selection whose distance matrix would not fit, with the numbers."""
    need = n * n * 8
    if xp is np:
        import os

        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = 8 << 30
    else:
        from hyperapp.core.backend import gpu_free_bytes

        free = gpu_free_bytes(xp)
    if need > MATRIX_SHARE * free:
        cap = int((MATRIX_SHARE * free / 8) ** 0.5)
        raise InputError(f"clustering {n} spectra needs a {need / 2**30:.1f} GiB distance matrix; "
                         f"{free / 2**30:.1f} GiB is free: select at most about {cap} spectra (a sample or an ROI)")


class HierarchicalClustering(Estimator):
    """Agglomerative clustering with a SciPy-compatible linkage matrix.

    Parameters
    ----------
    linkage : {"ward", "average", "complete", "single"}
    metric : {"euclidean", "sam"}
        Distance between spectra: Euclidean, or spectral angle (radians). Ward is defined for
        Euclidean distances; with ``sam`` it applies the same update to angles.
    n_clusters : int
        Clusters the tree is cut into (when ``height`` is 0).
    height : float
        Cut the tree at this merge height instead (0: use ``n_clusters``).

    Attributes
    ----------
    linkage_ : (n - 1, 4) host array, SciPy's layout
    labels_ : (n,) cluster of each fitted spectrum, 0-based
    means_ : (n_clusters_, bands) host array, each cluster's mean spectrum
    n_clusters_ : int
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("linkage", str, help="How the distance between two clusters is measured: Ward (least growth of the within-cluster variance), average, complete (farthest pair) or single (closest pair).", choices=("ward", "average", "complete", "single"), label="Linkage"),
        Param("metric", str, help="Distance between spectra: Euclidean, or the spectral angle (SAM, insensitive to brightness).", choices=("euclidean", "sam"), label="Distance"),
        Param("n_clusters", int, help="Clusters the tree is cut into.", minimum=1, maximum=100000, label="Clusters"),
        Param("height", float, help="Cut the tree at this merge height instead (0: cut into the number of clusters above).", minimum=0.0, maximum=1e12, label="Cut height (0 = by count)"),
    )

    def __init__(self, linkage: str = "ward", metric: str = "euclidean", n_clusters: int = 8, height: float = 0.0):
        self.linkage = linkage
        self.metric = metric
        self.n_clusters = n_clusters
        self.height = height

    def fit(self, X, y=None):
        xp = get_namespace(X)
        if X.ndim != 2:
            raise InputError(f"expected spectra (n, bands), got shape {X.shape}")
        n = X.shape[0]
        if n < 2:
            raise InputError(f"clustering needs at least 2 spectra, the selection holds {n}")
        if float(self.height) <= 0 and not 1 <= int(self.n_clusters) <= n:
            raise InputError(f"{self.n_clusters} clusters asked of {n} spectra: ask for 1 to {n}")
        from hyperapp.models.base import check_not_identical

        check_not_identical(X, "cluster")
        check_linkage_size(n, xp)
        if xp is np:
            self.linkage_ = _linkage_cpu(X, self.linkage, self.metric)
        else:
            D = distance_matrix(X, self.metric)
            self.linkage_ = _merge_gpu(D, self.linkage)
            del D
        self._X = X
        self.cut(self.n_clusters, self.height)
        del self._X
        return self

    def cut(self, n_clusters: int | None = None, height: float | None = None, X=None) -> np.ndarray:
        """Cut the tree into ``n_clusters`` clusters, or at ``height`` when it is > 0; updates
        :attr:`labels_` (and :attr:`means_` from the fitted spectra ``X``). Returns the labels."""
        from scipy.cluster.hierarchy import fcluster

        Z = self.linkage_
        n = Z.shape[0] + 1
        if height is not None and float(height) > 0:
            lab = fcluster(Z, float(height), criterion="distance")
        else:
            k = int(n_clusters if n_clusters is not None else self.n_clusters)
            if not 1 <= k <= n:
                raise InputError(f"{k} clusters asked of {n} spectra: ask for 1 to {n}")
            lab = fcluster(Z, k, criterion="maxclust")
        self.labels_ = (lab - 1).astype(np.int32)
        self.n_clusters_ = int(self.labels_.max()) + 1
        X = self._X if X is None else X
        xp = get_namespace(X)
        A = X.astype(xp.float64)
        if self.metric == "sam":
            A = A / xp.linalg.norm(A, axis=1, keepdims=True)
        onehot = xp.zeros((self.n_clusters_, n))
        onehot[xp.asarray(self.labels_), xp.arange(n)] = 1.0
        cnt = onehot.sum(axis=1, keepdims=True)
        self.means_ = to_host(onehot @ A / cnt).astype(np.float32)
        self.counts_ = to_host(cnt[:, 0]).astype(np.int64)
        self._centres = None
        return self.labels_

    def predict(self, X):
        """Cluster of the nearest cluster mean (Euclidean, or smallest angle for ``sam``)."""
        from hyperapp.models.kmeans import nearest_centre

        xp = get_namespace(X)
        if not hasattr(self, "means_"):
            self._check_fitted()
        P = X.astype(xp.float32)
        C = xp.asarray(self.means_)
        if self.metric == "sam":
            P = P / xp.maximum(xp.linalg.norm(P, axis=1, keepdims=True), 1e-30)
            C = C / xp.maximum(xp.linalg.norm(C, axis=1, keepdims=True), 1e-30)
        return nearest_centre(P, C)

    def summary(self) -> dict:
        self._check_fitted()
        h = self.linkage_[:, 2]
        return {"n_spectra": int(self.linkage_.shape[0] + 1), "n_clusters": self.n_clusters_,
                "cluster_sizes": [int(c) for c in self.counts_],
                "top_heights": [float(v) for v in h[-min(10, h.size):][::-1]]}

    def tables(self) -> dict:
        self._check_fitted()
        Z = self.linkage_
        rows = [[int(a), int(b), float(hh), int(s)] for a, b, hh, s in Z]
        return {"linkage": (["a", "b", "height", "size"], rows),
                "clusters": (["cluster", "spectra"], [[k, int(c)] for k, c in enumerate(self.counts_)])}

    def arrays(self) -> dict:
        self._check_fitted()
        return {"cluster_means": self.means_}
