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

import numpy as np

from hyperapp.core.backend import get_namespace
from hyperapp.core.errors import ModelError
from hyperapp.kernels.pack import to_host_together

EIG_FLOOR = 1e-9
#: covariances up to this many bands are decomposed on the host (see ``BackgroundStats._eig_host``)
HOST_EIGH_MAX = 512
#: rows per float64 batch of :func:`scatter` on the CPU (16 MB at 128 bands, in the caches; see
#: docs/performance.md) and on the GPU (128 MB, few launches)
BATCH_ROWS = 1 << 14
GPU_BATCH_ROWS = 1 << 17


def scatter(X, shift):
    """(sum of d, sum of d d^T) in float64 over the rows d = x - shift of ``X`` (n, bands).

    Each batch of rows (:data:`BATCH_ROWS`, :data:`GPU_BATCH_ROWS`) is shifted into float64 and summed by
    one float64 product (no float64 copy of the whole cube is made). Float64 throughout, as Spectral Python's ``calc_stats`` and ENVI's
    statistics: a hyperspectral covariance spans eight or more decades, and float32 products, however
    finely their sums are blocked, move the small eigenvalues enough to change ACE's and RX's scores by
    per cents (docs/performance.md), and differently on the CPU and the GPU. The streamed path feeds the
    same rows tile by tile through a :class:`ScatterSums`.
    """
    return ScatterSums(shift, X.shape[1], get_namespace(X)).add(X).result()


class ScatterSums:
    """:func:`scatter`'s sums, fed rows in pieces (tiles of a file)."""

    def __init__(self, shift, bands: int, xp):
        self.xp = xp
        self.batch = BATCH_ROWS if xp is np else GPU_BATCH_ROWS
        self.shift = shift.astype(xp.float64, copy=False)
        self.s = xp.zeros(bands, xp.float64)
        self.G = xp.zeros((bands, bands), xp.float64)
        self.n = 0

    def add(self, X) -> ScatterSums:
        xp = self.xp
        n = X.shape[0]
        self.n += n
        for a in range(0, n, self.batch):
            R = X[a:a + self.batch] - self.shift  # float64 (the shift's type), in one pass
            self.G += R.T @ R
            # column sums as a GEMV: CuPy's reduction across rows is strided, and slow
            self.s += (xp.ones((1, R.shape[0]), xp.float64) @ R)[0]
        return self

    def result(self):
        """(s, G)."""
        return self.s, self.G


def correlation_from_sums(s, G, m: int, shift):
    """The uncentred correlation sum (the sum of x x^T) over the ``m`` rows whose :func:`scatter` about
    ``shift`` gave ``(s, G)``: G + c s^T + s c^T + m c c^T, with c the shift, in float64.

    CEM inverts this correlation, whose mean direction makes it far worse conditioned than a
    covariance; summed about zero it would lose the small directions. Summed about a rough mean (as
    every covariance here) and moved back to zero by this exact rank-two algebra, its error is that of
    the covariance.
    """
    xp = get_namespace(G)
    c = shift.astype(xp.float64)
    return G + xp.outer(c, s) + xp.outer(s, c) + m * xp.outer(c, c)


def _floored(w, v, xp):
    """Eigenvalues raised to :data:`EIG_FLOOR` of the largest (1e-12 when none is positive)."""
    floor = float(w.max()) * EIG_FLOOR if float(w.max()) > 0 else 1e-12
    return xp.maximum(w, floor), v


class PixelSums:
    """:func:`scatter`'s sums over the rows of an image that count (its pixels with data), about the rough
    mean :meth:`BackgroundStats.shift_of` takes of those rows, and their number: what every background
    statistic of that image starts from (Spectral Python's ``calc_stats`` once per image, ENVI's statistics
    file). A fit whose background leaves some of those rows out (its clicked targets) subtracts their
    sums about the same shift (:meth:`BackgroundStats.from_pixels`), which gives the very statistics of
    the rows left, so the sums of a resident image are taken once and reused by every click
    (:mod:`hyperapp.detect.resident`). Never written in place.

    Parameters
    ----------
    shift : (bands,) float64 array
        The rough mean the sums are about.
    s, G : float64 arrays
        The sum of d and of d d^T over the rows d = x - shift.
    n : int
        How many rows they summed.
    """

    def __init__(self, shift, s, G, n: int):
        self.shift, self.s, self.G, self.n = shift, s, G, int(n)

    @classmethod
    def of(cls, P) -> PixelSums:
        """The sums over every row of ``P`` (n, bands): one :func:`scatter` about ``shift_of(P)``."""
        shift = BackgroundStats.shift_of(P)
        s, G = scatter(P, shift)
        return cls(shift, s, G, P.shape[0])

    @property
    def bands(self) -> int:
        return int(self.s.shape[0])


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
    def from_pixels(cls, X, exclude=None, sums: PixelSums | None = None) -> BackgroundStats:
        """Statistics of the rows of ``X`` (n, bands), less the rows ``exclude`` (indices, few).

        One pass of float64 products over batches of the rows, shifted by a rough mean first so nothing
        cancels (see :func:`scatter`); the excluded rows (the target clicks) are subtracted from the sums
        instead of copying every other row.

        ``sums``: :class:`PixelSums` already taken over the rows of ``X`` that count (a resident
        image's, :mod:`hyperapp.detect.resident`); then ``X`` is not read but for the ``exclude`` rows,
        which must be among those counted, and the statistics are the ones the pass over those rows
        would give, to the bit: the same shift, the same sums, the same subtraction.
        """
        n, b = X.shape
        n_ex = 0 if exclude is None else int(exclude.size)
        if sums is not None:
            if sums.bands != b:
                raise ModelError(f"background sums of {sums.bands} bands for pixels of {b}")
            n = sums.n
        if n - n_ex < 2:
            raise ModelError(f"background statistics need at least 2 pixels, got {n - n_ex}")
        if sums is not None:
            shift, s, G = sums.shift, sums.s, sums.G
        else:
            shift = cls.shift_of(X)
            s, G = scatter(X, shift)
        if n_ex:
            # a rank-n_ex downdate of the sums, in float64 about the same shift (new arrays: the sums
            # may be a resident image's, reused by the next click)
            se, Ge = scatter(X[exclude], shift)
            s, G = s - se, G - Ge
        return cls.from_sums(s, G, n - n_ex, shift)

    @staticmethod
    def shift_of(X):
        """A rough mean (of the first 1,024 rows, float64) the sums are taken about, so nothing cancels."""
        return X[: min(X.shape[0], 1024)].astype(get_namespace(X).float64).mean(axis=0)

    @classmethod
    def from_sums(cls, s, G, m: int, shift) -> BackgroundStats:
        """Statistics from :func:`scatter`'s sums about ``shift`` over ``m`` rows (the streamed path
        adds the sums of every tile)."""
        xp = get_namespace(G)
        if m < 2:
            raise ModelError(f"background statistics need at least 2 pixels, got {m}")
        d = xp.divide(s, m)  # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators
        mean = shift.astype(xp.float64) + d
        cov = xp.divide(G - xp.multiply(m, xp.outer(d, d)), m - 1)
        return cls(mean, xp.multiply(cov + cov.T, 0.5), m)

    @property
    def _small(self) -> bool:
        """A covariance small enough to decompose on the host (see :meth:`_eig_host`)."""
        return self.cov.shape[0] <= HOST_EIGH_MAX

    @cached_property
    def _host(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, covariance) on the host, float64: one copy of both, kept."""
        mean, cov = to_host_together([self.mean, self.cov], np.float64)
        return mean, cov

    @property
    def host_cov(self) -> np.ndarray:
        """The covariance on the host, float64 (copied once, with the mean)."""
        return self._host[1]

    @property
    def host_mean(self) -> np.ndarray:
        """The mean on the host, float64 (copied once, with the covariance)."""
        return self._host[0]

    def split(self, nb: int) -> tuple[BackgroundStats, BackgroundStats]:
        """Statistics of columns ``:nb`` and ``nb:`` of the rows these were computed from, from one pass
        over both sets of columns (one GEMM, and one copy of the mean and covariance to the host serving
        both)."""
        mean, cov = self._host
        parts = []
        for sl in (slice(None, nb), slice(nb, None)):
            part = BackgroundStats(self.mean[sl], self.cov[sl, sl], self.n)
            part.__dict__["_host"] = (mean[sl], cov[sl, sl])  # the cached property, already known
            parts.append(part)
        return parts[0], parts[1]

    @cached_property
    def _eig_host(self):
        """(w, v) on the host, eigenvalues floored. A band covariance is small: LAPACK answers in well
        under a millisecond, cuSOLVER's syevd takes about two (launch-bound), and both backends then
        agree exactly; the whitening matrices are built here too and go to the device once."""
        return _floored(*np.linalg.eigh(self.host_cov), np)

    @cached_property
    def _eig_device(self):
        """(w, v) where the covariance is, eigenvalues floored: for covariances over
        :data:`HOST_EIGH_MAX` bands."""
        xp = get_namespace(self.cov)
        return _floored(*xp.linalg.eigh(self.cov), xp)

    @property
    def singular(self) -> bool:
        xp = get_namespace(self.cov)
        w = xp.linalg.eigvalsh(self.cov)
        return bool(w.min() <= w.max() * EIG_FLOOR)

    def _from_eig(self, fn, host: bool = False):
        """``fn(w, v, np_or_xp)`` on the host for a small covariance (then one copy to the device, or
        none where ``host``: the caller gathers several matrices into one copy), else on the device."""
        xp = get_namespace(self.cov)
        if self._small:
            out = fn(*self._eig_host, np)
            return out if host else xp.asarray(out)
        return fn(*self._eig_device, xp)

    @cached_property
    def inv_cov(self):
        return self._from_eig(lambda w, v, m: (v / w) @ v.T)

    @cached_property
    def _sqrt_inv_cov_either(self):
        return self._from_eig(_sym_inv_sqrt, host=True)

    @cached_property
    def sqrt_inv_cov(self):
        """Symmetric whitening matrix Σ^{-1/2}: (x - μ) Σ^{-1/2} has identity covariance."""
        return get_namespace(self.cov).asarray(self._sqrt_inv_cov_either)

    def sqrt_inv_cov_on_host(self):
        """:attr:`sqrt_inv_cov` left on the host (float64) where the covariance is small enough to be
        decomposed there; on the device otherwise (computed once for both)."""
        return self._sqrt_inv_cov_either

    @cached_property
    def _tri_whitening_either(self):
        """(U, True) with U the inverse transposed Cholesky factor of the covariance, upper triangular, where
        no eigenvalue would be floored (:func:`_floored`), else (:attr:`sqrt_inv_cov`'s matrix, False).

        Every whitening U with U U^T = Σ^{-1} gives the same z.z, z.s and s.s (RX, ACE, the matched
        filter), and a triangular one lets the scoring kernel skip half its FMAs (``kernels/quadform.cu``);
        the factor costs a Cholesky and a triangular inverse, where the symmetric one costs an
        eigendecomposition (1.7 ms at 128 bands on a GPU host, the largest host part of a click). The
        test is exact without the eigenvalues: λ_min >= 1 / ||L^-1||_F^2 and λ_max <= trace(Σ), so when
        1 / ||L^-1||_F^2 >= EIG_FLOOR trace(Σ) the floor moves nothing and both matrices whiten the same
        covariance; otherwise (or where the Cholesky fails) the floored symmetric one is taken."""
        U = self.exact_triangular_whitening
        return (self._sqrt_inv_cov_either, False) if U is None else (U, True)

    @cached_property
    def exact_triangular_whitening(self):
        """(L^-1)^T (host, float64, upper triangular) where it whitens the covariance exactly as the floored
        eigendecomposition would (no eigenvalue floored: :attr:`_tri_whitening_either`'s test, which needs
        no eigenvalues), else None (also for a covariance decomposed on the device)."""
        Li = self.inverse_cholesky if self._small else None
        if Li is None or not 1.0 / float(np.sum(Li * Li)) >= EIG_FLOOR * float(np.trace(self.host_cov)):
            return None
        return Li.T

    @cached_property
    def inverse_cholesky(self):
        """L^-1 (host, float64, lower triangular) for the Cholesky factor L of the covariance, or None where
        the covariance is not positive definite: (L^-1)^T whitens it, with no floor on its eigenvalues."""
        try:
            return lower_inverse(np.linalg.cholesky(self.host_cov))
        except np.linalg.LinAlgError:
            return None

    def whitening(self, host: bool = False) -> tuple[object, bool]:
        """A whitening matrix U with U U^T = Σ^{-1} (its eigenvalues floored) and whether it is upper
        triangular: the inverse Cholesky factor where that is exact (:attr:`_tri_whitening_either`), else
        :attr:`sqrt_inv_cov`. ``host``: left on the host where it was computed there."""
        U, tri = self._tri_whitening_either
        return (U if host else get_namespace(self.cov).asarray(U)), tri

    def pca_whitening(self, n_components: int | None, host: bool = False):
        """(bands, k) matrix projecting onto the leading k principal components, whitened (``host``: left
        on the host where it was computed there, as :meth:`sqrt_inv_cov_on_host`)."""
        def fn(w, v, m):
            order = m.argsort(w)[::-1]
            k = w.shape[0] if n_components is None else min(int(n_components), w.shape[0])
            idx = order[:k]
            return v[:, idx] / m.sqrt(w[idx])

        return self._from_eig(fn, host)


def lower_inverse(L) -> np.ndarray:
    """The inverse of a lower triangular matrix (float64, host), by halves: [[A, 0], [B, C]]^-1 is
    [[A^-1, 0], [-C^-1 B A^-1, C^-1]], so two half-size inverses and two GEMMs; exactly lower
    triangular. NumPy has no triangular inverse (its general solve against the identity took 0.76 ms at
    128 bands on the 2-core host, this 0.22 ms; the same to 1e-16), and SciPy's ``solve_triangular``
    brings SciPy's own OpenBLAS, whose spinning threads then slow NumPy's next small LAPACK call (a
    64-band ``eigh`` from under a millisecond to 50 ms on a 16-core host)."""
    n = L.shape[0]
    if n <= 32:
        return np.tril(np.linalg.solve(L, np.eye(n)))
    h = n // 2
    A, C = lower_inverse(L[:h, :h]), lower_inverse(L[h:, h:])
    out = np.zeros_like(L, dtype=np.float64)
    out[:h, :h], out[h:, h:] = A, C
    out[h:, :h] = -(C @ (L[h:, :h] @ A))
    return out


def _sym_inv_sqrt(w, v, m):
    return (v / m.sqrt(w)) @ v.T
