"""Detectors that suppress known background signatures: OSP and TCIMF, and ATGP to find those signatures.

With ``d`` the target signature, ``U`` (bands, q) the undesired signatures and ``x`` a pixel:

* **OSP** (orthogonal subspace projection; Harsanyi and Chang 1994, IEEE TGRS 32(4)):
  P⊥ = I - U (UᵀU)⁻¹ Uᵀ annihilates the undesired signatures, and the score is the abundance estimate
  dᵀP⊥x / dᵀP⊥d: 1 for the pure target, 0 for any mixture of the undesired ones.
* **TCIMF** (target-constrained interference-minimised filter; Ren and Chang 2000, IEEE TAES 36(4)):
  with M = [D U] and R the autocorrelation matrix of the pixels (as CEM),
  w = R⁻¹M (MᵀR⁻¹M)⁻¹ [1_p; 0_q]: gain 1 on each target signature, 0 on each undesired one, and least
  output energy otherwise. Without undesired signatures it is CEM.
* **ATGP** (automatic target generation process; Ren and Chang 2003, IEEE TAES 39(4)): the pixel of
  largest norm, then repeatedly the pixel of largest residual norm after projecting out those found.
  Started from the target (projected out first), it finds the image's most distinct materials that are
  not the target: the undesired signatures OSP and TCIMF use when none are given.

Each score is one GEMV over the pixels (one cuBLAS call on the GPU, after a small host solve); ATGP is
one GEMM per signature found.
"""

from __future__ import annotations

import numpy as np

from hyperapp.backend import get_namespace, to_host
from hyperapp.errors import InputError
from hyperapp.models.base import (
    TARGET,
    PixelDetector,
    as_pixels,
    check_finite,
    float_dtype,
    labelled_target_mean,
)
from hyperapp.models.stats import BackgroundStats, correlation_from_sums, scatter

#: ATGP looks at every pixel up to this many; a larger image is sampled (evenly, every k-th pixel).
#: Undesired signatures are the background's materials, which a quarter-million pixels hold; ATGP's
#: one GEMM and host round trip per signature over a 1024 x 1024 image cost the library click 4-6 ms
ATGP_MAX_PIXELS = 1 << 18


def atgp(P, n: int, start=None, exclude=None):
    """``n`` signatures found by ATGP among the pixels ``P`` (m, bands): a host (n, bands) float64 array
    and their pixel indices.

    ``start`` (k, bands) are projected out before the search (the target, for undesired signatures);
    ``exclude`` are pixel indices never picked (the clicks). One GEMM per signature on ``P``'s device.
    """
    xp = get_namespace(P)
    m = P.shape[0]
    step = max(1, -(-m // ATGP_MAX_PIXELS))
    idx_all = xp.arange(0, m, step)
    S = P[idx_all].astype(xp.float32, copy=False)
    sq = (S.astype(xp.float64) ** 2).sum(axis=1)
    found = [] if start is None else [np.asarray(s, np.float64) for s in np.atleast_2d(to_host(start))]
    picked: list[int] = []
    banned = np.zeros(0, np.int64) if exclude is None else np.asarray(to_host(exclude), np.int64)
    for _ in range(int(n)):
        if found:
            Q, _ = np.linalg.qr(np.array(found).T)  # orthonormal basis of what is found (bands, j)
            proj = S @ xp.asarray(Q.astype(np.float32))
            resid = sq - (proj.astype(xp.float64) ** 2).sum(axis=1)
        else:
            resid = sq.copy()
        ban = np.concatenate([banned // step, np.asarray(picked, np.int64)]) if banned.size or picked else None
        if ban is not None:
            resid[xp.asarray(ban[ban < resid.shape[0]])] = -np.inf
        i = int(resid.argmax())
        if not np.isfinite(float(resid[i])):
            break
        picked.append(i)
        found.append(to_host(S[i]).astype(np.float64))
    k0 = 0 if start is None else np.atleast_2d(to_host(start)).shape[0]
    sig = np.array(found[k0:]) if len(found) > k0 else np.zeros((0, P.shape[1]))
    return sig, np.asarray(picked, np.int64) * step


def _signature_matrix(target, undesired, nb: int, xp_host=np):
    """(bands, p) targets and (bands, q) undesired signatures as float64 host arrays, checked."""
    D = np.atleast_2d(np.asarray(to_host(target), np.float64))
    U = np.zeros((0, nb)) if undesired is None else np.atleast_2d(np.asarray(to_host(undesired), np.float64))
    for name, A in (("target", D), ("undesired", U)):
        if A.size and A.shape[1] != nb:
            raise InputError(f"{name} signatures have {A.shape[1]} bands, the image has {nb}")
        if A.size and not np.isfinite(A).all():
            raise InputError(f"{name} signatures hold NaN or Inf values")
    return D.T, U.T


class _SignatureDetector(PixelDetector):
    """Shared fitting of the detectors that take a target and undesired signatures.

    ``fit(X, y)`` takes the target from the clicks' mean; :meth:`fit_signature` from a spectrum (a
    library's). Undesired signatures come from the caller (a library, ROI class means) or, when none are
    given, from ATGP started at the target (``n_undesired`` of them; 0 uses none).
    """

    accepts_check_input = True
    uses_undesired = True

    def fit(self, X, y, check_input: bool = True, undesired=None):
        P, xp, y, t = labelled_target_mean(X, y, check_input)
        return self.fit_signature(X, t, y=y, undesired=undesired, check_input=False)

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True):
        """Fit from a target spectrum ``target`` (bands,) and optional ``undesired`` (q, bands)."""
        P, _ = as_pixels(X)
        if check_input:
            check_finite(P)
        xp = get_namespace(P)
        exclude = None if y is None else xp.flatnonzero(xp.equal(xp.asarray(y).reshape(-1), TARGET))
        if undesired is None or np.asarray(to_host(undesired)).size == 0:
            n = int(self.n_undesired)
            if n < 0:
                raise InputError(f"n_undesired must be 0 or more, got {self.n_undesired}")
            undesired, self.undesired_pixels_ = atgp(P, n, start=to_host(target), exclude=exclude) if n else \
                (None, np.zeros(0, np.int64))
            self.undesired_source_ = "ATGP" if n else "none"
        else:
            self.undesired_source_ = "given"
        D, U = _signature_matrix(target, undesired, P.shape[1])
        self.target_ = D[:, 0]
        self.undesired_ = U.T
        self._fit_matrices(P, D, U, float_dtype(P))
        return self

    def decision_function(self, X):
        self._check_fitted()
        P, lead = as_pixels(X)
        if P.shape[1] != self.w_.shape[0]:
            raise InputError(f"image has {P.shape[1]} bands, the detector was fitted on {self.w_.shape[0]}")
        return (P.astype(self.w_.dtype, copy=False) @ self.w_).reshape(lead)


class OSP(_SignatureDetector):
    """Orthogonal subspace projection (Harsanyi and Chang 1994), scores = abundance estimates.

    Parameters
    ----------
    n_undesired : int
        Undesired signatures ATGP finds when none are given (0: none, which makes OSP a scaled
        projection on the target).
    """

    def __init__(self, n_undesired: int = 8):
        self.n_undesired = n_undesired

    #: the streamed path needs the target alone (and undesired signatures given: ATGP needs every pixel)
    stream_stats = "none"

    def fit_from_stats(self, target_mean, dtype=np.float32, undesired=None):
        """Fit from the target spectrum and given undesired signatures (the streamed path)."""
        D, U = _streamed_signatures(self, target_mean, undesired)
        self._fit_matrices(target_mean, D, U, dtype)  # (only its array module is used)
        return self

    def _fit_matrices(self, P, D, U, dtype):
        """``w_`` on the device of ``P`` from the (bands, p) targets and (bands, q) undesired signatures."""
        xp = get_namespace(P)
        d = D[:, 0]
        if U.shape[1]:
            Pperp = np.eye(U.shape[0]) - U @ np.linalg.pinv(U)
        else:
            Pperp = np.eye(D.shape[0])
        q = Pperp @ d
        den = float(d @ q)
        if not den > 1e-12 * max(float(d @ d), 1e-300):
            raise InputError("the target lies in the span of the undesired signatures: OSP cannot separate it")
        self.w_ = xp.asarray((q / den).astype(dtype))


class TCIMF(_SignatureDetector):
    """Target-constrained interference-minimised filter (Ren and Chang 2000).

    Parameters
    ----------
    n_undesired : int
        Undesired signatures ATGP finds when none are given (0: none, which makes TCIMF the CEM).
    """

    def __init__(self, n_undesired: int = 8):
        self.n_undesired = n_undesired

    #: the streamed path accumulates the uncentred correlation (undesired signatures must be given)
    stream_stats = "correlation"

    def _fit_matrices(self, P, D, U, dtype):
        shift = BackgroundStats.shift_of(P)
        s, G = scatter(P, shift)
        self._from_correlation(correlation_from_sums(s, G, P.shape[0], shift), P.shape[0], D, U, dtype)

    def _from_correlation(self, R_sum, n: int, D, U, dtype):
        xp = get_namespace(R_sum)
        R = R_sum / n
        Rinv = np.asarray(to_host(BackgroundStats(np.zeros(R.shape[0]), R, n).inv_cov), np.float64)
        self.w_ = xp.asarray(tcimf_weights(Rinv, D, U).astype(dtype))

    def fit_from_stats(self, R_sum, n: int, target_mean, dtype=np.float32, undesired=None):
        """Fit from the sum of x x^T over ``n`` pixels, the target spectrum and given undesired signatures
        (the streamed path)."""
        D, U = _streamed_signatures(self, target_mean, undesired)
        self._from_correlation(R_sum, n, D, U, dtype)
        return self


def streamed_undesired_given(est, undesired, path=None) -> bool:
    """Whether undesired signatures are given to ``est`` fitted from statistics; an :class:`InputError`
    (naming the cube's ``path``) where it would need ATGP, which needs every pixel at once: the streamed
    path asks before pass 1."""
    given = undesired is not None and np.asarray(to_host(undesired)).size > 0
    if not given and int(getattr(est, "n_undesired", 0)) > 0:
        raise InputError(f"streamed from its file, {type(est).__name__} cannot find undesired signatures by ATGP "
                         "(it needs every pixel at once): give them (--undesired-spectra, --undesired-rois) or set "
                         "n_undesired=0", path)
    return given


def _streamed_signatures(est, target_mean, undesired):
    """Checked (bands, p) target and (bands, q) undesired matrices for a fit from statistics, where ATGP
    (which needs every pixel at once) cannot run; sets the fitted signature attributes."""
    if target_mean is None:
        raise InputError("no target: click target pixels or give target spectra")
    given = streamed_undesired_given(est, undesired)
    t = np.asarray(to_host(target_mean), np.float64)
    D, U = _signature_matrix(t, undesired if given else None, t.shape[-1])
    est.target_, est.undesired_ = D[:, 0], U.T
    est.undesired_source_ = "given" if given else "none"
    return D, U


def tcimf_weights(Rinv, D, U):
    """TCIMF's filter R⁻¹M (MᵀR⁻¹M)⁻¹ [1_p; 0_q] summed over the p targets (one score), from the
    inverse correlation ``Rinv`` and the (bands, p) targets ``D``, (bands, q) undesired ``U`` (host)."""
    M = np.concatenate([D, U], axis=1)
    RM = Rinv @ M
    A = M.T @ RM
    c = np.concatenate([np.ones(D.shape[1]), np.zeros(U.shape[1])])
    try:
        coef = np.linalg.solve(A, c)
    except np.linalg.LinAlgError:
        coef = np.linalg.lstsq(A, c, rcond=None)[0]
    return RM @ coef
