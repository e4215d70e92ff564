"""Background statistics shared by ACE, MF, CEM, RX and the RBFN's whitening.

Like Spectral Python's ``GaussianStats``, a value object holding the mean and covariance with derived
quantities computed once, on whichever device the pixels are. The covariance uses N-1 normalisation
(as ``spectral.calc_stats``). Its inverse and inverse square root come from one symmetric
eigendecomposition; eigenvalues below ``1e-9`` of the largest are raised to that floor, so a
singular covariance (identical spectra, more bands than pixels) still gives a usable whitening
instead of an error, while a well-conditioned one is inverted exactly.
"""

from __future__ import annotations

from functools import cached_property

from hyperapp.backend import get_namespace
from hyperapp.errors import ModelError

EIG_FLOOR = 1e-9


class BackgroundStats:
    """Mean and covariance of background pixels with cached inverse and whitening.

    Parameters
    ----------
    mean : (bands,) array
    cov : (bands, bands) array
    n : int
        Number of pixels they came from.
    """

    def __init__(self, mean, cov, n: int):
        self.mean = mean
        self.cov = cov
        self.n = n

    @classmethod
    def from_pixels(cls, X, chunk: int = 1 << 18) -> BackgroundStats:
        """Statistics of the rows of ``X`` (n, bands), accumulated in chunks (float64 sums)."""
        xp = get_namespace(X)
        n, b = X.shape
        if n < 2:
            raise ModelError(f"background statistics need at least 2 pixels, got {n}")
        s = xp.zeros(b, dtype=xp.float64)
        for i in range(0, n, chunk):
            s += X[i:i + chunk].sum(axis=0, dtype=xp.float64)
        mean = s / n
        c = xp.zeros((b, b), dtype=xp.float64)
        for i in range(0, n, chunk):
            d = X[i:i + chunk].astype(xp.float64) - mean
            c += d.T @ d
        return cls(mean, c / (n - 1), n)

    @cached_property
    def _eig(self):
        xp = get_namespace(self.cov)
        w, v = xp.linalg.eigh(self.cov)
        floor = float(w.max()) * EIG_FLOOR if float(w.max()) > 0 else 1e-12
        return xp.maximum(w, floor), v

    @property
    def singular(self) -> bool:
        xp = get_namespace(self.cov)
        w = xp.linalg.eigvalsh(self.cov)
        return bool(w.min() <= w.max() * EIG_FLOOR)

    @cached_property
    def inv_cov(self):
        w, v = self._eig
        return (v / w) @ v.T

    @cached_property
    def sqrt_inv_cov(self):
        """Symmetric whitening matrix Σ^{-1/2}: (x - μ) Σ^{-1/2} has identity covariance."""
        xp = get_namespace(self.cov)
        w, v = self._eig
        return (v / xp.sqrt(w)) @ v.T

    def pca_whitening(self, n_components: int | None):
        """(bands, k) matrix projecting onto the leading k principal components, whitened."""
        xp = get_namespace(self.cov)
        w, v = self._eig
        order = xp.argsort(w)[::-1]
        k = w.shape[0] if n_components is None else min(int(n_components), w.shape[0])
        idx = order[:k]
        return v[:, idx] / xp.sqrt(w[idx])
