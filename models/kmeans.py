"""Lloyd's k-means with k-means++ seeding, on NumPy or CuPy arrays.

Used to place RBF centres (inside each class) on the device the pixels are on; scikit-learn's KMeans
is the CPU reference in the tests. Distances use the expansion ||x||² - 2x·c + ||c||², one GEMM per
iteration.
"""

from __future__ import annotations

from hyperapp.backend import get_namespace


def sq_distances(X, C):
    """(n, k) squared Euclidean distances between rows of X and rows of C."""
    xp = get_namespace(X)
    d = (X * X).sum(axis=1)[:, None] - 2.0 * (X @ C.T) + (C * C).sum(axis=1)[None, :]
    return xp.maximum(d, 0)


def kmeans(X, k: int, n_iter: int = 25, seed: int = 0):
    """Cluster the rows of ``X`` into ``k`` groups.

    Returns
    -------
    centres : (k, d) array
    labels : (n,) int array
    """
    import numpy as np

    xp = get_namespace(X)
    n = X.shape[0]
    k = min(int(k), n)
    rng = np.random.default_rng(seed)
    # k-means++ seeding (host RNG so NumPy and CuPy pick the same points)
    idx = [int(rng.integers(n))]
    d2 = sq_distances(X, X[idx[0]][None, :])[:, 0]
    for _ in range(1, k):
        p = np.asarray(d2.get() if hasattr(d2, "get") else d2, dtype=np.float64)
        s = p.sum()
        nxt = int(rng.choice(n, p=p / s)) if s > 0 else int(rng.integers(n))
        idx.append(nxt)
        d2 = xp.minimum(d2, sq_distances(X, X[nxt][None, :])[:, 0])
    C = X[xp.asarray(idx)].copy()
    labels = xp.zeros(n, dtype=xp.int64)
    for _ in range(n_iter):
        labels = sq_distances(X, C).argmin(axis=1)
        onehot = (labels[:, None] == xp.arange(k)[None, :]).astype(X.dtype)
        counts = onehot.sum(axis=0)
        newC = (onehot.T @ X) / xp.maximum(counts, 1)[:, None]
        newC = xp.where((counts > 0)[:, None], newC, C)  # keep an emptied centre where it was
        if bool(xp.allclose(newC, C)):
            C = newC
            break
        C = newC
    return C, labels
