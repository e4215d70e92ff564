"""Gaussian mixture segmentation by EM (seed 003), full or diagonal covariances, NumPy or CuPy.

E-step: each component's log density through the Cholesky factor of its precision, as scikit-learn
does (y = (x - mu) U with U U^T = Sigma^-1, log N = -(d log 2pi + |y|^2)/2 + log det U), then a
log-sum-exp over components for stable responsibilities. M-step: weights, means and covariances, a
covariance floor (``reg_covar`` on the diagonal, so constant bands stay invertible) and the Cholesky
factors from the covariances. EM stops when the average log-likelihood per spectrum changes by less
than ``tol``. k-means (part 1) starts each run. With a range of k, BIC picks the k that labels the image.

Several starts: em-EM (Biernacki, Celeux and Govaert 2003, "Choosing starting values for the EM
algorithm for getting the highest likelihood in multivariate Gaussian mixture models", Comput. Stat.
Data Anal. 41). Each of the ``n_init`` k-means starts runs a short EM that stops, as theirs does, once an
iteration gains at most 1 % of what the run gained since its first E-step (:data:`SHORT_RUN_SETTLE`), at
``start_iter`` iterations at most (20), or when it converges; the start whose last short-run E-step has
the highest log-likelihood (EM never lowers it) goes on from where it stopped, to ``max_iter`` iterations
in all, and the others are dropped. ``ll_curve_`` and ``n_iter_`` are that start's whole run, its short
run included; ``start_log_likelihoods_`` and ``start_iterations_`` hold every start's short-run figure
and length and ``best_start_`` the one chosen, and ``log_likelihood_`` is the likelihood of the final
parameters, as before. ``start_iter`` at least ``max_iter`` (or one start) runs every start to the end
and keeps the one whose final parameters score highest, as scikit-learn's ``n_init`` does. A fixed 10
iterations chose the wrong start on the airport scene (4,000 spectra, 5 diagonal components: one start
settles at 303.9 within 10 iterations, the other two climb past it to 316.0 after 20,
``tests/test_som_gmm.py``); the relative stop left the short runs on the bench case's spectra (16,384 of
them, on the CPU) at 3 iterations each: 106 EM iterations where every start run to the end takes 300.

Full covariances on the GPU (the fused path): the E-step for every component is one float64 GEMM per
block of spectra, Y = X [U_1 ... U_k] (d x k d), after which one kernel (``kernels/gmm.cu``, k and d
runtime arguments) subtracts b_j = mu_j U_j, sums each row's k squared norms and takes the log-sum-exp
and the responsibilities, reading Y once. The M-step's sums come from the same pass: one kernel writes
B = r_ij (x - s_j) into Y's buffer (s_j the E-step's mean of component j) with B's column sums g, and
one GEMM per block gives S = X^T B for every component (d x k d). With delta = g / n_j the new mean is
s_j + delta and the covariance (S_j - s_j g^T) / n_j - delta delta^T (:meth:`GaussianMixtureEM._fused_m_step`),
so only the shift's move cancels, never the spectra's offset (radiance in the thousands). The first
M-step of a start is the same pass with the k-means labels as responsibilities, shifted by their means.
The CPU keeps the float32 path below; diagonal covariances use the direct float64 sums everywhere.

Precision. The spectra are centred in float64. Real scenes (radiance in the thousands, hundreds of
nearly collinear bands) have covariances whose smallest eigenvalues sit below float32's rounding of
their largest, so a covariance summed in float32 from the spectra comes out indefinite; the Cholesky
factors and every covariance are float64. With full covariances on the CPU, the products over all
spectra are float32 all the same, where float32 resolves them (a float32 GEMM runs at twice float64's
rate on a CPU's vector units); on the GPU they stay float64 (the fused path above), as the E-step of
diagonal covariances and the first M-step of every start do everywhere: an H100's or H200's tensor
cores run float64 GEMMs at float32's rate, and the float32 path below measured slower there
(``docs/performance.md``).

- The E-step's whitened spectra, y_j = [x, 1] [[U_j, 0], [-mu_j U_j, 1]]: one float32 GEMM per
  component (the spectra carry a column of ones, so the GEMM subtracts the mean and leaves the ones).
- The M-step's sums, in each component's *old* whitened coordinates: S_j = sum_i r_ij [y, 1][y, 1]^T
  (one float32 GEMM per component of the E-step's y scaled by sqrt(r)). There the covariance is near
  the identity, which float32 resolves; blocks of at most ``BLOCK_ROWS`` spectra are summed in float64.
  With g = (sum r y) / n_j, C = (sum r y y^T) / n_j - g g^T in whitened coordinates, and Sigma = L L^T
  the old covariance: mu' = mu + L g and Sigma' = L C L^T + reg_covar I, in float64.
- A component whose new covariance, in the old whitened coordinates and with the floor, is far from
  the identity (its Cholesky factor fails or has a squared pivot below ``WHITENED_PIVOT`` of its
  largest diagonal entry: the component shrank by that much in some direction in one step) gets its
  mean and covariance summed from the spectra in float64, as the first M-step (from the k-means
  labels) always does. So does a component whose whitening factors are too large for float32 to
  resolve x U - mu U (``WIDE``: a component of nearly identical spectra, held by the floor), whose
  densities are float64 too.

Where a covariance is still not positive definite (a component on a handful of nearly identical
spectra), the diagonal gets the smallest extra floor, in steps from 1e-10 of the component's mean
variance, that makes it so; ``regularised_`` reports which components got how much. A run whose
likelihood is not finite is dropped, and a fit where every run fails ends in a :class:`ModelError`.
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.core.backend import get_namespace, serial_host_blas, to_host
from hyperapp.core.errors import ModelError
from hyperapp.models.base import Estimator, Param

CHUNK_BYTES = 256 << 20
#: spectra per block of the full-covariance E-step: float32 sums within a block, float64 across blocks
BLOCK_ROWS = 65536
#: a whitened covariance whose smallest squared Cholesky pivot is below this share of its largest
#: diagonal entry is summed again from the spectra in float64
WHITENED_PIVOT = 1e-3
#: a component whose largest whitening factor times the largest centred value exceeds this has its
#: densities computed in float64 (float32's rounding of x U would be a sizeable part of y: a component
#: of nearly identical spectra, or one floored far below the others)
WIDE = 1e5

#: the fused M-step's GEMM S = X_b^T B (d x k d from a block's m spectra) as this many batched GEMMs over
#: slices of the block's rows, summed after (an explicit split of its long inner dimension; 1: one GEMM,
#: cuBLAS's own choice). ``scripts/profile_gmm.py`` times both.
M_SPLIT = 1
#: em-EM's short runs stop once an iteration gains at most this share of the run's gain since its first
#: E-step (Biernacki, Celeux and Govaert 2003: (L_p - L_p-1) / (L_p - L_0) <= 1e-2), or at ``start_iter``
SHORT_RUN_SETTLE = 1e-2
#: a fused M-step's covariance whose smallest squared Cholesky pivot is below this many float64 epsilons
#: of the largest centred value squared (the rounding level of its sums, see ``_fused_m_step``) is summed
#: again from the spectra, centred per component (a component of nearly identical spectra)
FUSED_PIVOT = 16.0
#: a component whose largest precision factor times the largest centred value exceeds this has its
#: fused E-step densities summed from (x - mu) U instead (x U - mu U would lose the difference: float64's
#: rounding of x U, about 1e-16 of this, must stay far below 1)
FUSED_WIDE = 1e10

_SQ_NORMS = None


#: bytes of the fused path's (m, k d) float64 block (the GPU's): 512 MB ran one pass of E-step and sums
#: 6% faster than 256 MB, 128 MB 41% slower (H200, docs/performance.md)
FUSED_BYTES = 512 << 20


def _fused_rows(n: int, k: int, d: int) -> int:
    """Spectra per block of the fused full-covariance path: the block's (m, k d) float64 array is at most
    :data:`FUSED_BYTES`."""
    return int(max(256, min(n, FUSED_BYTES // (8 * k * d))))


def _estep_rows(Y, b, const, k: int, d: int, out=None, extra=None):
    """Responsibilities (m, k) float64 and each row's log-sum-exp (m,) from the E-step's GEMM ``Y``
    (m, k d) = X [U_1 ... U_k]: log density c_j - |Y_j - b_j|^2 / 2 per component, then the log-sum-exp
    over components; ``extra`` (m, k), if given, is added to the squared norms. One kernel on CuPy
    (``kernels/gmm.cu``: ``Y`` read once), the same arithmetic on NumPy."""
    xp = get_namespace(Y)
    m = Y.shape[0]
    if xp is np:
        D = Y.reshape(m, k, d) - b[None]
        sq = np.einsum("mkd,mkd->mk", D, D)
        lp = const[None, :] - 0.5 * (sq if extra is None else sq + extra)
        mx = lp.max(axis=1, keepdims=True)
        lse = mx[:, 0] + np.log(np.exp(lp - mx).sum(axis=1))
        if out is None:
            return np.exp(lp - lse[:, None]), lse
        np.exp(lp - lse[:, None], out=out)
        return out, lse
    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import get_kernel

    resp = xp.empty((m, k), xp.float64) if out is None else out
    lse = xp.empty(m, xp.float64)
    blocks = max(1, min(8 * int(device_attributes().get("MultiProcessorCount", 80)), -(-m // 8)))
    get_kernel("gmm", "hyperapp_gmm_estep_rows")((blocks,), (256,), (
        Y, b, const, const if extra is None else extra, np.int32(extra is not None), np.int64(m), np.int32(k),
        np.int32(d), resp, lse))
    return resp, lse


#: rows per tile of the weighted deviations' kernel (its column sums are summed over tiles afterwards)
DEVIATION_TILE = 64


def _weighted_deviations(X, R, s, out):
    """B[i, j d + c] = R[i, j] (X[i, c] - s[j, c]) into ``out`` (m, k d) float64, and B's column sums
    (k d,): what the M-step's GEMM X^T B needs. One kernel on CuPy (``B`` written once)."""
    xp = get_namespace(X)
    m, d = X.shape
    k = R.shape[1]
    if xp is np:
        np.multiply(R[:, :, None], X[:, None, :] - s[None], out=out.reshape(m, k, d))
        return out.sum(axis=0)
    from hyperapp.kernels import get_kernel

    tile = max(DEVIATION_TILE, -(-m // 65535))
    tiles = -(-m // tile)
    partial = xp.empty((tiles, k * d), xp.float64)
    get_kernel("gmm", "hyperapp_gmm_weighted_deviations")((-(-k * d // 256), tiles), (256,), (
        X, R, s, np.int64(m), np.int32(k), np.int32(d), np.int32(tile), out, partial))
    return partial.sum(axis=0)


#: threads per block of the factorisation kernel (one block per component)
FACTOR_THREADS = 512


def _covariances(S, s, g, nk, reg: float):
    """The fused M-step's covariances (k, d, d) and means (k, d) from its sums (see
    :meth:`GaussianMixtureEM._fused_m_step`; ``nk`` with its epsilon added), ``reg`` on the diagonal. One
    kernel on CuPy (``kernels/gmm.cu``), the same arithmetic on NumPy."""
    xp = get_namespace(S)
    k, d = s.shape
    if xp is np:
        delta = g / nk[:, None]
        T = S.reshape(d, k, d).transpose(1, 0, 2) - s[:, :, None] * g[:, None, :]
        cov = T / nk[:, None, None] - delta[:, :, None] * delta[:, None, :]
        cov = 0.5 * (cov + cov.transpose(0, 2, 1))
        diag = np.arange(d)
        cov[:, diag, diag] += reg
        return cov, s + delta
    from hyperapp.kernels import get_kernel

    cov = xp.empty((k, d, d), xp.float64)
    means = xp.empty((k, d), xp.float64)
    c = xp.ascontiguousarray
    get_kernel("gmm", "hyperapp_gmm_covariances")((-(-k * d * d // 256),), (256,), (
        c(S, dtype=xp.float64), c(s, dtype=xp.float64), c(g, dtype=xp.float64), c(nk, dtype=xp.float64),
        np.int32(k), np.int32(d), np.float64(reg), cov, means))
    return cov, means


def _factors(cov, means):
    """Every component's Cholesky factor L (Sigma = L L^T), its precision's factor U = (L^-1)^T, the fused
    E-step's W = [U_1 ... U_k] (d, k d) and b_j = mu_j U_j (k, d), and ``info`` (k, d + 2): the squared
    pivots of L, log det U and the largest |U|. A covariance that is not positive definite gets a pivot
    <= 0 or NaN pivots (the caller checks them). One kernel launch on CuPy (a block per component, the
    matrix in shared memory where it fits), LAPACK's potrf and trtri on NumPy."""
    xp = get_namespace(cov)
    k, d, _ = cov.shape
    if xp is np:
        from scipy.linalg import lapack

        L = np.full_like(cov, np.nan)
        inv = np.full_like(cov, np.nan)
        for j in range(k):  # a loop over components (a handful)
            c, status = lapack.dpotrf(cov[j], lower=1, clean=1)
            if status == 0:
                L[j] = c
                inv[j], status = lapack.dtrtri(c, lower=1)
        U = np.ascontiguousarray(inv.transpose(0, 2, 1))
        info = np.empty((k, d + 2))
        info[:, :d] = np.diagonal(L, axis1=1, axis2=2) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            info[:, d] = np.log(np.diagonal(U, axis1=1, axis2=2)).sum(axis=1)
        info[:, d + 1] = np.abs(U).max(axis=(1, 2))
        W = np.ascontiguousarray(U.transpose(1, 0, 2).reshape(d, k * d))
        b = np.ascontiguousarray(np.matmul(means[:, None, :], U)[:, 0])
        return L, U, W, b, info
    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import allow_shared, get_kernel

    L = xp.empty((k, d, d), xp.float64)
    U = xp.empty((k, d, d), xp.float64)
    W = xp.empty((d, k * d), xp.float64)
    b = xp.empty((k, d), xp.float64)
    info = xp.empty((k, d + 2), xp.float64)
    whole = (d * d + 2 * d) * 8
    use_shared = whole + 1024 <= int(device_attributes().get("MaxSharedMemoryPerBlockOptin", 48 * 1024))
    smem = whole if use_shared else 2 * d * 8
    kernel = get_kernel("gmm", "hyperapp_gmm_factors")
    allow_shared(kernel, smem)
    kernel((k,), (FACTOR_THREADS,), (xp.ascontiguousarray(cov, dtype=xp.float64),
                                     xp.ascontiguousarray(means, dtype=xp.float64), np.int32(k), np.int32(d),
                                     np.int32(use_shared), L, U, W, b, info), shared_mem=smem)
    return L, U, W, b, info


def _sq_norms(Z):
    """Row sums of squares over the last axis of a float32 array (one kernel on CuPy)."""
    xp = get_namespace(Z)
    if xp is np:
        return np.einsum("kmd,kmd->km", Z, Z)
    global _SQ_NORMS
    if _SQ_NORMS is None:
        _SQ_NORMS = xp.ReductionKernel("T z", "T y", "z * z", "a + b", "y = a", "0", "gmm_sq_norms")
    return _SQ_NORMS(Z, axis=2)


def kmeans_starts(X, k: int, n_init: int, seed: int, progress=None) -> list:
    """The k-means labels of every EM start: start r is ``MultiKMeans(k=k, n_init=1, seed=seed + r,
    max_iter=100)``'s labels of the float32 spectra ``X`` (the same seeding from the same generators, the
    same Lloyd iterations and stopping rule), with every start seeded and iterated together: one k-means++
    and one Lloyd loop whose GEMMs cover all starts (:func:`~hyperapp.models.kmeans.lloyd_segments` stops
    each start on its own, so a start's result does not depend on the others), instead of one k-means fit
    per start."""
    from hyperapp.models.kmeans import seeded_runs

    # MultiKMeans' generator of its one run (restart 0) at seed + r, and its default tolerance
    _, _, _, seg, labels, _, _ = seeded_runs(X, [([seed + r, 0, k], k) for r in range(n_init)], 100, 1e-4,
                                             progress, progress)
    return [labels[r] - int(seg[r]) for r in range(n_init)]


class GaussianMixtureEM(Estimator):
    """EM for Gaussian mixtures over spectra.

    Parameters
    ----------
    k : int or str
        Components, one (``8``) or a range (``"2..10"``, the lowest BIC labels the image).
    covariance : {"full", "diag"}
    n_init : int
        Initialisations (k-means with different seeds); the highest likelihood is kept. 3 by default:
        one start (scikit-learn's default) lands in a visibly worse optimum on some real scenes and k,
        and three cost little on the GPU (k = 8, full covariances, 10,000 spectra of 205 bands: 0.6 s
        a start on an H100). Compare with scikit-learn at the same ``n_init``.
    start_iter : int
        With ``n_init`` > 1, the most iterations of each start's short EM (em-EM, see the module's notes;
        it stops earlier once it settles): only the best start continues. At least ``max_iter``: every
        start runs to the end (scikit-learn's ``n_init``).
    max_iter : int
        EM iterations at most of the run kept, its short run included.
    tol : float
        Stop when the average log-likelihood per spectrum changes by less than this.
    reg_covar : float
        Added to every covariance's diagonal (scikit-learn's ``reg_covar``).
    seed : int

    Attributes
    ----------
    k_values_, bic_, log_likelihood_ (average per spectrum, per k) : host arrays
    chosen_k_ : int
    weights_, means_, covariances_ : the chosen k's parameters (host arrays)
    ll_curve_ : per-iteration average log-likelihood of the chosen k's best run (its short run included)
    n_iter_ : iterations of that run
    start_log_likelihoods_ : the chosen k's starts' average log-likelihoods that chose the run (each short
        run's last E-step; with every start run to the end, each one's final likelihood); NaN where a
        start diverged
    start_iterations_ : each of those starts' iterations before the choice
    best_start_ : the start chosen (its k-means seed is ``seed`` + ``best_start_``)
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("k", str, help="Components, one number (8) or a range (2..10): the lowest BIC labels the image.", label="Components (k or range)"),
        Param("covariance", str, help="Each component's covariance: full matrices, or diagonal (bands independent).", choices=("full", "diag"), label="Covariance"),
        Param("n_init", int, help="EM runs from different k-means starts; the highest likelihood is kept. One start can settle in a worse optimum; several cost little on the GPU. To compare with scikit-learn's GaussianMixture, give it the same number (its n_init).", minimum=1, maximum=100, label="Starts"),
        Param("start_iter", int, help="With several starts, each runs a short EM first, of at most this many iterations (it stops earlier once an iteration gains under 1 % of the run's gain); only the start with the highest likelihood then goes on, to the iterations at most in all (em-EM, Biernacki, Celeux and Govaert 2003). At least the iterations at most: every start runs to the end, as scikit-learn's n_init does.", minimum=1, maximum=10000, label="Iterations per start"),
        Param("max_iter", int, help="EM iterations at most (of the start that goes on: its short run's iterations count).", minimum=1, maximum=10000, label="Iterations at most"),
        Param("tol", float, help="Stop when the average log-likelihood per spectrum changes by less than this.", minimum=0.0, maximum=10.0, label="Tolerance"),
        Param("reg_covar", float, help="Added to every covariance's diagonal, so constant or collinear bands stay invertible.", minimum=0.0, maximum=1e6, label="Covariance floor"),
        Param("seed", int, help="Seed of the k-means starts.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, k="8", covariance: str = "full", n_init: int = 3, start_iter: int = 20, max_iter: int = 100,
                 tol: float = 1e-3, reg_covar: float = 1e-6, seed: int = 0):
        self.k = k
        self.covariance = covariance
        self.n_init = n_init
        self.start_iter = start_iter
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.seed = seed


    # ------------------------------------------------------------------ the two steps
    def _log_gauss(self, X, means, chol):
        """(n, k) log densities in float64; ``chol`` (k, d, d) precision Cholesky factors, or (k, d) for
        diag (1 / sqrt of the variances)."""
        xp = get_namespace(X)
        n, d = X.shape
        k = means.shape[0]
        if chol.ndim == 2:
            # diagonal: sum_d (x - mu)^2 p = x^2 . p - 2 x . (mu p) + mu^2 . p with p = chol^2, two GEMMs for
            # every component at once (as scikit-learn's diagonal E-step), where a component at a time made
            # three passes over a float64 copy of the spectra (airport, k = 8: 0.1-0.16 s an iteration on 2
            # cores); X is centred, so the terms stay near the data's spread and float64 keeps their difference
            prec = chol * chol
            y2 = (X * X) @ prec.T - 2.0 * (X @ (means * prec).T) + (means * means * prec).sum(axis=1)[None, :]
            return -0.5 * (d * math.log(2 * math.pi) + xp.maximum(y2, 0.0)) + xp.log(chol).sum(axis=1)[None, :]
        out = xp.empty((n, k), xp.float64)
        for j in range(k):  # a loop over components (a handful), never over spectra
            D = X - means[j]
            y2 = ((D @ chol[j]) ** 2).sum(axis=1)
            logdet = xp.log(xp.diagonal(chol[j])).sum()
            out[:, j] = -0.5 * (d * math.log(2 * math.pi) + y2) + logdet
        return out

    def _e_step(self, X, weights, means, chol):
        """(average log-likelihood, responsibilities (n, k)) in float64, ``X`` centred float64."""
        xp = get_namespace(X)
        lp = self._log_gauss(X, means, chol) + xp.log(weights)[None, :]
        m = lp.max(axis=1, keepdims=True)
        lse = m[:, 0] + xp.log(xp.exp(lp - m).sum(axis=1))
        resp = xp.exp(lp - lse[:, None])
        return float(lse.mean()), resp

    def _m_step(self, X, resp):
        """Weights, means, covariances, precision factors, the extra diagonal floor per component and
        (full covariances) the covariances' Cholesky factors, from centred float64 spectra ``X`` and their
        responsibilities ``resp`` (n, k), in float64."""
        xp = get_namespace(X)
        n, d = X.shape
        nk = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
        means = (resp.T @ X) / nk[:, None]
        k = resp.shape[1]
        reg = float(self.reg_covar)
        if self.covariance == "full":
            cov = xp.empty((k, d, d), xp.float64)
            for j in range(k):
                cov[j] = self._direct_cov(X, resp[:, j], means[j], nk[j])
            L, chol, extra = self._precision_factors(cov)
            return nk / n, means, cov, chol, extra, L
        sq = (resp.T @ (X * X)) / nk[:, None]
        cov = xp.maximum(sq - means ** 2, 0) + reg
        # a band with no variance in a component (and reg_covar 0) gets a floor relative to the rest
        floor = 1e-10 * xp.maximum(cov.mean(axis=1, keepdims=True), np.finfo(np.float64).tiny)
        extra = to_host(xp.maximum(floor - cov, 0).max(axis=1))
        cov = xp.maximum(cov, floor)
        return nk / n, means, cov, 1.0 / xp.sqrt(cov), extra, None

    def _direct_cov(self, X, r, mean, nk):
        """One component's covariance summed from the centred float64 spectra, plus ``reg_covar``."""
        xp = get_namespace(X)
        D = X - mean
        cov = ((r[:, None] * D).T @ D) / nk
        d = X.shape[1]
        cov[xp.arange(d), xp.arange(d)] += float(self.reg_covar)
        return cov

    # ------------------------------------------------------------------ full covariances on the GPU: fused
    def _path(self, xp) -> str:
        """Which E- and M-steps a fit takes: ``"fused"`` (full covariances on the GPU: one float64 GEMM per
        block for all components' densities and one for all their sums), ``"whitened"`` (full covariances
        on the CPU: float32 products in whitened coordinates) or ``"direct"`` (diagonal covariances)."""
        if self.covariance != "full":
            return "direct"
        return "whitened" if xp is np else "fused"

    def _whitened(self, xp) -> bool:
        """Whether this fit takes the float32 path (full covariances on the CPU; see the module's notes)."""
        return self._path(xp) == "whitened"

    def _stacked_factors(self, weights, means, chol, xmax: float):
        """What the fused E-step needs: W = [U_1 ... U_k] (d, k d), b_j = mu_j U_j (k, d), each
        component's log weight + log normalisation (k,), all float64 and C-contiguous, and the components
        too wide for x U - mu U (:data:`FUSED_WIDE`; ``xmax`` the largest centred value), whose columns of W
        and rows of b are zeros. Where :meth:`_fused_m_step` made ``chol`` and ``means``, its factorisation
        already wrote W, b and log det U (:func:`_factors`), and the host has the largest |U|: no copy back."""
        xp = get_namespace(means)
        k, d = means.shape
        memo = getattr(self, "_stacked_memo", None)
        if memo is not None and memo[0] is chol and memo[1] is means:
            _, _, W, b, logdet, top = memo
            if (top * max(float(xmax), 1.0) <= FUSED_WIDE).all():
                const = xp.ascontiguousarray(xp.log(weights) - 0.5 * d * math.log(2 * math.pi) + logdet)
                return W, b, const, []
        big = to_host(xp.abs(chol).max(axis=(1, 2))) * max(float(xmax), 1.0)
        wide = [int(j) for j in np.flatnonzero(~(big <= FUSED_WIDE))]
        U = chol
        if wide:
            U = chol.copy()
            U[wide] = 0
        W = xp.ascontiguousarray(U.transpose(1, 0, 2).reshape(d, k * d))
        b = xp.ascontiguousarray(xp.matmul(means[:, None, :], U)[:, 0])
        logdet = xp.log(xp.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        const = xp.ascontiguousarray(xp.log(weights) - 0.5 * d * math.log(2 * math.pi) + logdet)
        return W, b, const, wide

    def _fused_pass(self, X, params=None, resp=None, shift=None, stats: bool = True, proba_out=None,
                    xmax: float | None = None):
        """One pass over the centred float64 spectra ``X`` (n, d) in blocks of :func:`_fused_rows`.

        With ``params`` (weights, means, covariances, precision factors, ...): the E-step, Y = X_b W (one
        GEMM for every component), then :func:`_estep_rows`; its average log-likelihood is returned and
        the responsibilities go to ``proba_out`` if given. Otherwise the responsibilities are ``resp``
        (n, k). With ``stats``: the M-step's sums about ``shift`` (k, d; the E-step's means by default),
        B = r (x - s) by :func:`_weighted_deviations` into the same block buffer, S += X_b^T B (one GEMM
        for every component), B's column sums g, the weights n_k and the responsibilities: returned for
        :meth:`_fused_m_step`. ``xmax``: the largest centred value (the fit's by default).
        """
        xp = get_namespace(X)
        n, d = X.shape
        if params is not None:
            xmax = getattr(self, "_xmax", None) if xmax is None else xmax
            W, b, const, wide = self._stacked_factors(params[0], params[1], params[3],
                                                      float(xp.abs(X).max()) if xmax is None else xmax)
            if shift is None:
                shift = params[1]
        k = int(shift.shape[0] if shift is not None else params[1].shape[0])
        rows = _fused_rows(n, k, d)
        buf = xp.empty((min(rows, n), k * d), xp.float64)
        total = xp.zeros((), xp.float64)
        if stats:
            shift = xp.ascontiguousarray(shift, dtype=xp.float64)
            g = xp.zeros(k * d, xp.float64)
            S = xp.zeros((d, k * d), xp.float64)
            R = xp.empty((n, k), xp.float64) if params is not None else resp
        for a in range(0, n, rows):
            Xb = X[a:a + rows]
            Yb = buf[:Xb.shape[0]]
            if params is not None:
                xp.matmul(Xb, W, out=Yb)
                extra = None
                if wide:
                    extra = xp.zeros((Xb.shape[0], k), xp.float64)
                    for j in wide:
                        extra[:, j] = (((Xb - params[1][j]) @ params[3][j]) ** 2).sum(axis=1)
                r, lse = _estep_rows(Yb, b, const, k, d, R[a:a + rows] if stats else None, extra)
                total += lse.sum()
                if proba_out is not None:
                    proba_out[a:a + rows] = r
            else:
                r = xp.ascontiguousarray(resp[a:a + rows], dtype=xp.float64)
            if stats:
                g += _weighted_deviations(Xb, r, shift, Yb)
                mb = Xb.shape[0]
                if M_SPLIT > 1 and mb % M_SPLIT == 0:
                    c = M_SPLIT
                    S += xp.matmul(Xb.reshape(c, mb // c, d).transpose(0, 2, 1),
                                   Yb.reshape(c, mb // c, k * d)).sum(axis=0)
                else:
                    S += Xb.T @ Yb
        if stats:  # the weights: one product of all responsibilities with a vector of ones
            nk = xp.ones(n, xp.float64) @ R
        ll = float(total) / n if params is not None else None
        return ll, ((nk, g.reshape(k, d), S, shift, R) if stats else None)

    def _fused_m_step(self, X, stats):
        """Weights, means, covariances and factors from :meth:`_fused_pass`'s sums, in float64.

        With s the shift, b_i = r_i (x_i - s), g = sum_i b_i and S_j = sum_i x_i b_i^T:
        T = sum_i r_i (x_i - s)(x_i - s)^T = S_j - s g^T, the mean is s + delta with delta = g / n_j and
        the covariance T / n_j - delta delta^T. Only the products with a *centred* factor are summed (b),
        and g is summed from the very b the GEMM multiplies, so what cancels is the shift's move (delta),
        not the spectra's offset. The products of the spectra themselves (x_i b_i^T) still round at about
        float64's epsilon times the largest centred value squared: a component whose covariance has no
        Cholesky factor or a squared pivot below :data:`FUSED_PIVOT` times that (one of nearly identical
        spectra, with a floor below that level) gets its mean and covariance summed again from the
        spectra ``X`` and the pass's responsibilities, centred per component (:meth:`_direct_cov`), as
        the direct path does.
        """
        xp = get_namespace(stats[2])
        nk, g, S, s, R = stats
        n = X.shape[0]
        k, d = s.shape
        nk = nk + 10 * np.finfo(np.float64).eps
        cov, means = _covariances(S, s, g, nk, float(self.reg_covar))
        xmax = getattr(self, "_xmax", None)
        if xmax is None:
            xmax = float(xp.abs(X).max())
        L, U, W, b, info = _factors(cov, means)
        info_h = to_host(info)  # the iteration's one copy back: pivots, log det U, largest |U| (k x (d + 2))
        piv = info_h[:, :d]
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(piv).all(axis=1) & (piv.min(axis=1) >= FUSED_PIVOT * np.finfo(np.float64).eps
                                                    * xmax * xmax))
        if bad.any():
            for j in np.flatnonzero(bad):
                means[j] = (R[:, j] @ X) / nk[j]
                cov[j] = self._direct_cov(X, R[:, j], means[j], nk[j])
            L, chol, extra = self._precision_factors(cov)
            return nk / n, means, cov, chol, extra, L
        self._stacked_memo = (U, means, W, b, info[:, d], info_h[:, d + 1])
        return nk / n, means, cov, U, np.zeros(k), L

    @staticmethod
    def _cholesky_pivots(C):
        """Cholesky factors of the stack ``C`` (NaN for a matrix that has none) and their squared pivots."""
        xp = get_namespace(C)
        try:
            M = xp.linalg.cholesky(C)
        except np.linalg.LinAlgError:  # NumPy raises for the whole stack: factor one by one
            M = xp.full_like(C, np.nan)
            for j in range(C.shape[0]):
                try:
                    M[j] = xp.linalg.cholesky(C[j])
                except np.linalg.LinAlgError:
                    pass
        return M, xp.diagonal(M, axis1=1, axis2=2) ** 2

    def _fused_first_m_step(self, X, labels, k: int):
        """The M-step from k-means labels through the fused sums, shifted by the labels' own means (so
        the sums are about each component's mean from the start)."""
        xp = get_namespace(X)
        resp = (labels[:, None] == xp.arange(k)[None, :]).astype(xp.float64)
        nk = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
        shift = (resp.T @ X) / nk[:, None]
        stats = self._fused_pass(X, resp=resp, shift=shift)[1]
        return self._fused_m_step(X, stats)

    # ------------------------------------------------------------------ full covariances: float32 products
    @staticmethod
    def _block_rows(n: int, k: int, d1: int) -> int:
        return int(min(n, BLOCK_ROWS, max(1024, CHUNK_BYTES // (4 * k * d1))))

    @staticmethod
    def _whitening(weights, means, chol, xmax: float):
        """What the E-step needs of the mixture: the float32 factors [[U, 0], [-mu U, 1]]
        (k, d + 1, d + 1), each component's log weight + log normalisation (k,) float64, the components
        whose whitened spectra float32 cannot resolve (``wide``: their largest factor times ``xmax``,
        the largest centred value, above :data:`WIDE`) and the float64 means and factors for those."""
        xp = get_namespace(means)
        k, d = means.shape
        Ua = xp.zeros((k, d + 1, d + 1), xp.float64)
        Ua[:, :d, :d] = chol
        Ua[:, d, :d] = -xp.matmul(means[:, None, :], chol)[:, 0]
        Ua[:, d, d] = 1.0
        logdet = xp.log(xp.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        const = xp.log(weights) - 0.5 * d * math.log(2 * math.pi) + logdet
        big = to_host(xp.abs(Ua).max(axis=(1, 2))) * max(float(xmax), 1.0)
        wide = [int(j) for j in np.flatnonzero(~(big <= WIDE))]
        with np.errstate(over="ignore"):
            Ua32 = Ua.astype(xp.float32)
        return Ua32, const, wide, means, chol

    @staticmethod
    def _full_block(Xa, white, X64=None):
        """Whitened spectra Z (k, m, d + 1) float32 (each component's y, then a column of ones; zeros for
        the ``wide`` components) and log(weight x density) (k, m) float64 of the augmented centred
        spectra ``Xa`` (m, d + 1); the wide components' densities in float64 from ``X64`` (m, d)."""
        xp = get_namespace(Xa)
        Ua, const, wide, means, chol = white
        k, d1 = Ua.shape[0], Ua.shape[1]
        Z = xp.empty((k, Xa.shape[0], d1), xp.float32)
        for j in range(k):  # one GEMM per component (a handful)
            if j in wide:
                Z[j] = 0
            else:
                xp.matmul(Xa, Ua[j], out=Z[j])
        y2 = _sq_norms(Z[:, :, : d1 - 1]).astype(xp.float64)
        for j in wide:
            y2[j] = (((X64 - means[j]) @ chol[j]) ** 2).sum(axis=1)
        return Z, const[:, None] - 0.5 * y2

    @staticmethod
    def _augmented(X, center=None):
        """[X - center, 1] as float32 (n, d + 1), the centring in float64."""
        xp = get_namespace(X)
        n, d = X.shape
        Xa = xp.empty((n, d + 1), xp.float32)
        Xa[:, :d] = X if center is None else X.astype(xp.float64) - center
        Xa[:, d] = 1.0
        return Xa

    def _full_e_step(self, Xa, params, X64, stats: bool = True):
        """Average log-likelihood and, with ``stats``, the responsibilities (k, n) float64, the
        whitened sums S (k, d + 1, d + 1) float64 (see the module's notes) and the wide components
        (whose S is not summed); ``X64`` the centred float64 spectra."""
        xp = get_namespace(Xa)
        n, d1 = Xa.shape
        means = params[1]
        k = means.shape[0]
        white = self._whitening(params[0], means, params[3], self._xmax)
        rows = self._block_rows(n, k, d1)
        total = xp.zeros((), xp.float64)
        R = xp.empty((k, n), xp.float64) if stats else None
        S = xp.zeros((k, d1, d1), xp.float64) if stats else None
        for a in range(0, n, rows):
            Z, lp = self._full_block(Xa[a:a + rows], white, X64[a:a + rows])
            m = lp.max(axis=0)
            lse = m + xp.log(xp.exp(lp - m).sum(axis=0))
            total += lse.sum()
            if stats:
                r = xp.exp(lp - lse)
                R[:, a:a + rows] = r
                Z *= xp.sqrt(r).astype(xp.float32)[:, :, None]
                for j in range(k):
                    if j not in white[2]:
                        S[j] += Z[j].T @ Z[j]
            del Z
        return float(total) / n, (R, S, white[2])

    def _full_m_step(self, X, params, stats):
        """The M-step from the E-step's whitened sums (float64 from here); components whose whitened
        covariance is far from the identity, or wide, are summed from the float64 spectra ``X``."""
        xp = get_namespace(X)
        n, d = X.shape
        R, S, wide = stats
        L, chol = params[5], params[3]
        nk = R.sum(axis=1) + 10 * np.finfo(np.float64).eps
        g = S[:, :d, d] / nk[:, None]
        C = S[:, :d, :d] / nk[:, None, None] - g[:, :, None] * g[:, None, :]
        C = 0.5 * (C + C.transpose(0, 2, 1))
        means = params[1] + xp.matmul(L, g[:, :, None])[:, :, 0]
        cov = xp.matmul(xp.matmul(L, C), L.transpose(0, 2, 1))
        diag = xp.arange(d)
        cov[:, diag, diag] += float(self.reg_covar)
        # the new covariance in the old whitened coordinates, the floor included: U^T Sigma' U
        with np.errstate(all="ignore"):
            A = C + float(self.reg_covar) * xp.matmul(chol.transpose(0, 2, 1), chol)
        with serial_host_blas:
            far = self._far_from_identity(A)
        for j in sorted(set(wide) | set(far)):
            means[j] = (R[j] @ X) / nk[j]
            cov[j] = self._direct_cov(X, R[j], means[j], nk[j])
        with serial_host_blas:  # band-sized matrices: one thread answers them fastest (hyperapp.core.backend)
            Lnew, Unew, extra = self._precision_factors(cov)
        return nk / n, means, cov, Unew, extra, Lnew

    @staticmethod
    def _far_from_identity(C) -> list[int]:
        """Components whose new covariance in the old whitened coordinates ``C`` (k, d, d) has no
        Cholesky factor or one with a squared pivot below :data:`WHITENED_PIVOT` of its largest diagonal
        entry (float32's error in the sums, relative to the largest, would be large in that direction)."""
        xp = get_namespace(C)
        piv = GaussianMixtureEM._cholesky_pivots(C)[1]
        top = xp.diagonal(C, axis1=1, axis2=2).max(axis=1)
        ok = xp.isfinite(piv).all(axis=1) & (piv.min(axis=1) >= WHITENED_PIVOT * top)
        return [int(j) for j in np.flatnonzero(~to_host(ok))]

    @staticmethod
    def _precision_factors(cov, L=None):
        """Cholesky factors L of the covariances and U of the precisions (Sigma = L L^T,
        Sigma^-1 = U U^T, U = (L^-1)^T); ``L`` the covariances' factors where already computed (every one
        finite).

        Returns both and, per component, what had to be added to the diagonal (in place in ``cov``)
        for its Cholesky factorisation to exist: 0 for every component that needed nothing. NumPy
        raises on a matrix that is not positive definite, CuPy returns NaN: both are caught.
        """
        xp = get_namespace(cov)
        k, d, _ = cov.shape
        extra = np.zeros(k)

        def factor(a):
            try:
                L = xp.linalg.cholesky(a)
            except np.linalg.LinAlgError:
                return None
            return L if bool(xp.isfinite(L).all()) else None

        if L is None:
            L = factor(cov)
        if L is None:  # find the components that fail, and floor only those
            L = xp.empty_like(cov)
            diag = xp.arange(d)
            for j in range(k):
                Lj = factor(cov[j])
                if Lj is None:
                    scale = max(float(xp.trace(cov[j])) / d, np.finfo(np.float64).tiny)
                    step = 1e-10 * scale
                    while Lj is None and step <= scale:
                        Lj = factor(cov[j] + step * xp.eye(d))
                        if Lj is None:
                            step *= 10
                    if Lj is None:
                        raise ModelError(f"mixture component {j + 1}'s covariance stays singular even with a "
                                         "floor of its mean variance: try diagonal covariances or fewer components")
                    cov[j, diag, diag] += step
                    extra[j] = step
                L[j] = Lj
        if xp is np:  # a triangular inverse per component (LAPACK trtri), not a general solve
            from scipy.linalg import lapack

            inv = np.empty_like(L)
            for j in range(k):
                inv[j], info = lapack.dtrtri(L[j], lower=1)
                if info:
                    raise ModelError(f"mixture component {j + 1}'s covariance factor is singular")
            return L, inv.transpose(0, 2, 1), extra
        eye = xp.broadcast_to(xp.eye(d), (k, d, d))
        return L, xp.linalg.solve(L, eye).transpose(0, 2, 1), extra

    def _n_params(self, k: int, d: int) -> int:
        cov = k * d * (d + 1) // 2 if self.covariance == "full" else k * d
        return cov + k * d + k - 1

    # ------------------------------------------------------------------ fitting
    def _first(self, path: str, Xc, labels, k: int):
        """The first M-step of a start, from its k-means labels (float64, summed from the spectra)."""
        xp = get_namespace(Xc)
        if path == "fused":
            return self._fused_first_m_step(Xc, labels, k)
        resp = (labels[:, None] == xp.arange(k)[None, :]).astype(xp.float64)
        return self._m_step(Xc, resp)

    def _iteration(self, path: str, Xc, Xa, params):
        """One E-step and the M-step after it: (average log-likelihood of ``params``, the M-step's input)."""
        if path == "fused":
            return self._fused_pass(Xc, params)
        if path == "whitened":
            return self._full_e_step(Xa, params, Xc)
        return self._e_step(Xc, params[0], params[1], params[3])

    def _update(self, path: str, Xc, params, stats):
        if path == "fused":
            return self._fused_m_step(Xc, stats)
        if path == "whitened":
            return self._full_m_step(Xc, params, stats)
        return self._m_step(Xc, stats)

    def _log_likelihood(self, path: str, Xc, Xa, params) -> float:
        """Average log-likelihood of ``params`` (an E-step without the M-step's sums)."""
        if path == "fused":
            return self._fused_pass(Xc, params, stats=False)[0]
        if path == "whitened":
            return self._full_e_step(Xa, params, Xc, stats=False)[0]
        return self._e_step(Xc, params[0], params[1], params[3])[0]

    def _run(self, path: str, Xc, Xa, run: dict, until: int, tick=None, settle: float | None = None) -> None:
        """EM on ``run`` (its parameters and likelihood curve) until its curve has ``until`` iterations,
        it converges (a change below ``tol``) or its likelihood stops being finite (``run["done"]``); with
        ``settle`` (a short run), also once an iteration gains at most ``settle`` of the run's gain so far
        (:data:`SHORT_RUN_SETTLE`), after that iteration's M-step, so the run can go on from there."""
        curve = run["curve"]
        while len(curve) < until and not run["done"]:
            ll, stats = self._iteration(path, Xc, Xa, run["params"])
            curve.append(ll)
            if not math.isfinite(ll) or (len(curve) > 1 and abs(curve[-1] - curve[-2]) < float(self.tol)):
                run["done"] = True
                break
            run["params"] = self._update(path, Xc, run["params"], stats)
            stats = None
            if tick is not None:
                tick()
            if settle is not None and len(curve) > 1 and curve[-1] - curve[-2] <= settle * (curve[-1] - curve[0]):
                break

    def fit(self, X, y=None, progress=None):
        from hyperapp.models.base import as_pixels, selected_spectra
        from hyperapp.models.kmeans import parse_k

        X, _ = as_pixels(X)
        xp = get_namespace(X)
        ks = parse_k(self.k)
        X = selected_spectra(X, max(ks), f"{max(ks)} components is more than the number of spectra ({X.shape[0]})")
        n, d = X.shape
        self.center_ = X.mean(axis=0, dtype=xp.float64)
        Xc = X.astype(xp.float64) - self.center_
        if float(Xc.var(axis=0).max()) <= 0:
            raise ModelError("the selected spectra are all identical: there is nothing to model")
        path = self._path(xp)
        Xa = self._augmented(Xc) if path == "whitened" else None
        self._xmax = float(xp.abs(Xc).max())
        self.k_values_ = np.asarray(ks)
        self.bic_ = np.empty(len(ks))
        self.log_likelihood_ = np.empty(len(ks))
        n_init, max_iter = int(self.n_init), int(self.max_iter)
        # em-EM: every start runs a short EM, only the best one goes on (see the class's notes)
        short = n_init > 1 and int(self.start_iter) < max_iter
        first = int(self.start_iter) if short else max_iter
        per_k = n_init * first + (max_iter - first)  # iterations at most, for the progress bar
        done_its = [0]

        def tick():
            done_its[0] += 1
            if progress is not None:
                progress(min(done_its[0] / (len(ks) * per_k), 1.0), f"EM with {k} components")

        best_models = []
        for i, k in enumerate(ks):
            runs = []
            if progress is not None:
                progress(min(done_its[0] / (len(ks) * per_k), 1.0), f"k-means starts for {k} components")
            starts = kmeans_starts(Xc.astype(xp.float32), k, n_init, int(self.seed),
                                   None if progress is None else progress.sub(done_its[0] / (len(ks) * per_k),
                                                                              done_its[0] / (len(ks) * per_k)))
            for r in range(n_init):
                if progress is not None:
                    progress(min(done_its[0] / (len(ks) * per_k), 1.0), f"EM with {k} components, start {r + 1}")
                run = {"params": self._first(path, Xc, starts[r], k), "curve": [], "done": False}
                starts[r] = None
                self._run(path, Xc, Xa, run, first, tick, SHORT_RUN_SETTLE if short else None)
                if not short:  # every start ran to the end: compare the likelihoods of their final parameters
                    run["ll"] = self._log_likelihood(path, Xc, Xa, run["params"])
                else:  # compare the short runs by their last E-step's likelihood (EM never lowers it)
                    run["ll"] = run["curve"][-1] if run["curve"] else float("nan")
                if not math.isfinite(run["ll"]):
                    run["params"] = None  # a diverged start is never chosen; drop its arrays now
                runs.append(run)
            lls = np.array([run["ll"] for run in runs], dtype=float)
            short_its = [len(run["curve"]) for run in runs]
            lls[~np.isfinite(lls)] = np.nan
            if np.isnan(lls).all():  # every start diverged: say so, never label from NaN responsibilities
                raise ModelError(f"the Gaussian mixture with {k} components has no finite likelihood on these "
                                 "spectra: try diagonal covariances, fewer components or a larger covariance floor")
            chosen = int(np.nanargmax(lls))
            best = runs[chosen]
            for run in runs:
                if run is not best:
                    run["params"] = None
            if short:  # the best start goes on to max_iter iterations in all
                done_its[0] += n_init * first - sum(len(run["curve"]) for run in runs)
                self._run(path, Xc, Xa, best, max_iter, tick)
                best["ll"] = self._log_likelihood(path, Xc, Xa, best["params"])
                if not math.isfinite(best["ll"]):
                    raise ModelError(f"the Gaussian mixture with {k} components lost its finite likelihood on these "
                                     "spectra: try diagonal covariances, fewer components or a larger covariance "
                                     "floor")
            ll = best["ll"]
            self.log_likelihood_[i] = ll
            self.bic_[i] = -2.0 * ll * n + self._n_params(k, d) * math.log(n)
            best_models.append((best["params"], best["curve"], len(best["curve"]), lls, chosen, short_its))
            done_its[0] = (i + 1) * per_k
        i = int(np.argmin(self.bic_))
        self.chosen_k_ = int(ks[i])
        (w, means, cov, chol, extra, _), curve, n_it, lls, chosen, short_its = best_models[i]
        self.weights_ = to_host(w)
        self.means_ = to_host(means + self.center_)
        self.covariances_ = to_host(cov)
        #: components whose covariance needed more than ``reg_covar`` on its diagonal: {component: amount}
        self.regularised_ = {int(j): float(extra[j]) for j in np.flatnonzero(extra > 0)}
        self._chol = chol
        self._means_c = means
        self._stacked_memo = None  # (the last M-step's factors: the fitted model keeps only its own)
        self.ll_curve_ = np.asarray(curve)
        self.n_iter_ = n_it
        self.start_log_likelihoods_ = lls
        self.best_start_ = chosen
        self.start_iterations_ = np.asarray(short_its)
        if progress is not None:
            progress(1.0, "mixture fitted")
        return self


    def _posterior(self, X, proba: bool):
        """(average log-likelihood, posteriors (n, k) float32 or None) of the rows of ``X``, in blocks."""
        from hyperapp.models.base import as_pixels

        self._check_fitted()
        P, _ = as_pixels(X)
        xp = get_namespace(P)
        n, d = P.shape
        k = self.chosen_k_
        out = xp.empty((n, k), xp.float32) if proba else None
        w, mu, ch, c0 = (xp.asarray(to_host(v)) for v in (self.weights_, self._means_c, self._chol, self.center_))
        total = 0.0
        path = self._path(xp)
        full = path == "whitened"
        step = self._block_rows(n, k, d + 1) if full else max(1024, CHUNK_BYTES // (8 * d))
        if path == "fused":
            step = max(_fused_rows(n, k, d), 1024)
        for a in range(0, n, step):
            if path == "fused":
                part = out[a:a + step] if proba else None
                Xc = P[a:a + step].astype(xp.float64) - c0
                total += self._fused_pass(Xc, (w, mu, None, ch), stats=False, proba_out=part,
                                          xmax=float(xp.abs(Xc).max()))[0] * Xc.shape[0]
                continue
            if full:
                Xa = self._augmented(P[a:a + step], c0)
                white = self._whitening(w, mu, ch, float(xp.abs(Xa[:, :d]).max()))
                X64 = P[a:a + step].astype(xp.float64) - c0 if white[2] else None
                lp = self._full_block(Xa, white, X64)[1].T
            else:
                lp = self._log_gauss(P[a:a + step].astype(xp.float64) - c0, mu, ch) + xp.log(w)[None, :]
            m = lp.max(axis=1, keepdims=True)
            lse = m[:, 0] + xp.log(xp.exp(lp - m).sum(axis=1))
            total += float(lse.sum())
            if proba:
                out[a:a + step] = xp.exp(lp - lse[:, None])
        return total / max(n, 1), out

    def predict_proba(self, X):
        """Posterior probability of every component (n, k) for the rows of ``X``."""
        return self._posterior(X, True)[1]

    def predict(self, X):
        """Most probable component of every row of ``X``."""
        from hyperapp.models.base import as_pixels

        _, lead = as_pixels(X)
        return self.predict_proba(X).argmax(axis=1).astype(np.int32).reshape(lead)

    def score(self, X) -> float:
        """Average log-likelihood per spectrum of ``X`` under the chosen mixture."""
        return self._posterior(X, False)[0]

    def summary(self) -> dict:
        self._check_fitted()
        return {"k": [int(k) for k in self.k_values_], "bic": [float(v) for v in self.bic_],
                "log_likelihood_per_sample": [float(v) for v in self.log_likelihood_],
                "chosen_k": self.chosen_k_, "covariance": self.covariance,
                "weights": [float(v) for v in self.weights_], "n_iter": int(self.n_iter_),
                "regularised_components": [
                    {"component": j, "added_to_diagonal": v,
                     "relative_to_mean_variance": v / max(float(np.trace(self.covariances_[j])) / self.means_.shape[1]
                                                          if self.covariance == "full"
                                                          else float(self.covariances_[j].mean()), 1e-300)}
                    for j, v in sorted(self.regularised_.items())],
                "log_likelihood_curve": [float(v) for v in self.ll_curve_]}

    def tables(self) -> dict:
        s = self.summary()
        return {"gmm_bic": (["k", "bic", "log_likelihood_per_sample"],
                            [list(r) for r in zip(s["k"], s["bic"], s["log_likelihood_per_sample"])]),
                "components": (["component", "weight"] + [f"band_{b}" for b in range(self.means_.shape[1])],
                               [[j, float(self.weights_[j]), *map(float, self.means_[j])]
                                for j in range(self.chosen_k_)])}
