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

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import InputError
from hyperapp.models.base import (
    TARGET,
    Param,
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
    ``exclude`` are pixel indices never picked (the clicks).

    Each pick's residual ``||P_U⊥ x||²`` is kept up to date instead of recomputed: with ``q`` the new
    orthonormal direction (the pick, Gram-Schmidt against the basis so far, twice), every residual drops
    by ``(x . q)²``, dot products in float64. On the GPU a pick is two launches of ``kernels/atgp.cu``
    and the loop never waits for the device (it waited three times a pick, ~20 CuPy operations each:
    5-6 ms of the live library click); the picks and their spectra come back once at the end.
    """
    xp = get_namespace(P)
    m, nb = P.shape
    step = max(1, -(-m // ATGP_MAX_PIXELS))
    S = xp.ascontiguousarray(P[::step], dtype=xp.float32)
    ms, n = S.shape[0], int(n)
    st = np.zeros((0, nb)) if start is None else np.atleast_2d(np.asarray(to_host(start), np.float64))
    k0 = st.shape[0]
    basis = np.zeros((k0 + n, nb))
    if k0:
        basis[:k0] = np.linalg.qr(st.T)[0].T  # orthonormal directions of the start signatures, one a row
    ban = np.zeros(0, np.int64)
    if exclude is not None:
        ban = np.unique(np.asarray(to_host(exclude), np.int64) // step)
        ban = ban[(ban >= 0) & (ban < ms)]
    if xp is np:
        picks, best = _atgp_host(S, basis, k0, n, ban)
    else:
        picks, best = _atgp_device(S, basis, k0, n, ban)
    ok = np.isfinite(best)
    count = int(ok.argmin()) if not ok.all() else n  # the first -inf maximum: nothing was left to pick
    picked = picks[:count]
    sig = np.asarray(to_host(S[xp.asarray(picked)]), np.float64) if count else np.zeros((0, nb))
    return sig, picked * step


def _atgp_host(S, basis, k0: int, n: int, ban):
    """:func:`atgp`'s loop in NumPy, step for step as ``kernels/atgp.cu``: (picks, their residuals)."""
    S64 = S.astype(np.float64)
    resid = np.einsum("ij,ij->i", S64, S64)
    resid[ban] = -np.inf
    for k in range(k0):
        resid -= (S64 @ basis[k]) ** 2
    picks, best = np.zeros(n, np.int64), np.full(n, -np.inf)
    for j in range(n):
        i = int(resid.argmax())
        picks[j], best[j] = i, resid[i]
        v = S64[i].copy() if np.isfinite(resid[i]) else np.zeros(S.shape[1])
        for _ in range(2):  # Gram-Schmidt, twice
            for k in range(k0 + j):
                v -= (basis[k] @ v) * basis[k]
        norm = float(np.sqrt(v @ v))
        q = v / norm if norm > 0 else v
        basis[k0 + j] = q
        resid -= (S64 @ q) ** 2
        if np.isfinite(best[j]):
            resid[i] = -np.inf
    return picks, best


def _atgp_device(S, basis, k0: int, n: int, ban):
    """:func:`atgp`'s loop on the GPU (``kernels/atgp.cu``): (picks, their residuals) on the host."""
    import cupy

    from hyperapp.kernels import allow_shared, get_module

    mod = get_module("atgp")
    update, pick = mod.get_function("atgp_update"), mod.get_function("atgp_pick")
    ms, nb = S.shape
    allow_shared(pick, nb * 8)
    threads = 256  # 8 warps a block (WARPS_PER_BLOCK)
    blocks = int(min(1024, max(1, -(-ms // 8))))
    resid = cupy.empty(ms, cupy.float64)
    cand_v, cand_i = cupy.empty(blocks, cupy.float64), cupy.empty(blocks, cupy.int64)
    B = cupy.asarray(basis)
    picks, best = cupy.zeros(max(n, 1), cupy.int64), cupy.full(max(n, 1), -np.inf)
    args = (np.int64(ms), np.int32(nb))
    update((blocks,), (threads,), (S, B, resid, *args, np.int32(2), cand_v, cand_i))  # resid = ||x||²
    if ban.size:
        resid[cupy.asarray(ban)] = -np.inf
    for k in range(k0):
        update((blocks,), (threads,), (S, B[k], resid, *args, np.int32(1), cand_v, cand_i))
    if not k0:
        update((blocks,), (threads,), (S, B, resid, *args, np.int32(0), cand_v, cand_i))  # the candidates
    for j in range(n):
        q = B[k0 + j]
        pick((1,), (threads,), (S, resid, *args, cand_v, cand_i, np.int32(blocks), B, np.int32(k0 + j), q, picks,
                                best, np.int32(j)), shared_mem=nb * 8)
        if j + 1 < n:
            update((blocks,), (threads,), (S, q, resid, *args, np.int32(1), cand_v, cand_i))
    out = cupy.concatenate([picks[:n].astype(cupy.float64), best[:n]]).get()
    return out[:n].astype(np.int64), out[n:]


def check_undesired_apart(targets, undesired, target_names=None, undesired_names=None) -> None:
    """An :class:`InputError` where a given undesired signature is one of the targets (the same spectrum,
    or a multiple of it): a detector told to suppress the target cannot find it (TCIMF's constraints
    then contradict each other, the RBFN learns the target as background), and its scores would say
    nothing. Similar materials are not refused: only a direction the same to 1e-6. ``target_names`` and
    ``undesired_names`` (as the libraries call them) name the pair in the message."""
    D = np.atleast_2d(np.asarray(to_host(targets), np.float64))
    U = np.atleast_2d(np.asarray(to_host(undesired), np.float64))
    if not D.size or not U.size or D.shape[1] != U.shape[1]:
        return
    for i, t in enumerate(D):
        tt = float(t @ t)
        if not tt > 0:
            continue
        for j, u in enumerate(U):
            resid = u - (float(u @ t) / tt) * t
            if float(np.linalg.norm(resid)) <= 1e-6 * float(np.linalg.norm(u)):
                which = f"target spectrum {i + 1}" if len(D) > 1 else "the target"
                if target_names is not None and i < len(target_names):
                    which += f" {target_names[i]!r}"
                und = f"undesired signature {j + 1}"
                if undesired_names is not None and j < len(undesired_names):
                    und += f" {undesired_names[j]!r}"
                raise InputError(f"{und} is {which} (the same spectrum, up to scale): a "
                                 "detector told to suppress it cannot find it; leave it out of the undesired "
                                 "signatures")


def _signature_matrix(target, undesired, nb: int, xp_host=np):
    """(bands, p) targets and (bands, q) undesired signatures as float64 host arrays, checked."""
    D = np.atleast_2d(np.asarray(to_host(target), np.float64))
    U = np.zeros((0, nb)) if undesired is None else np.atleast_2d(np.asarray(to_host(undesired), np.float64))
    for name, A in (("target", D), ("undesired", U)):
        if A.size and A.shape[1] != nb:
            raise InputError(f"{name} signatures have {A.shape[1]} bands, the image has {nb}")
        if A.size and not np.isfinite(A).all():
            raise InputError(f"{name} signatures hold NaN or Inf values")
    check_undesired_apart(D, U)
    return D.T, U.T


#: the subspace detectors' ATGP count (OSP, TCIMF and MTTCIMF declare it)
N_UNDESIRED = Param("n_undesired", int, help="Undesired (background) signatures found automatically by ATGP, started from the target, when none are given from a library or ROI classes; 0 uses none.", minimum=0, maximum=64, label="Undesired found (ATGP)")


class _SignatureDetector(PixelDetector):
    """Shared fitting of the detectors that take a target and undesired signatures.

    ``fit(X, y)`` takes the target from the clicks' mean; :meth:`fit_signature` from a spectrum (a
    library's). Undesired signatures come from the caller (a library, ROI class means) or, when none are
    given, from ATGP started at the target (``n_undesired`` of them; 0 uses none).
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (N_UNDESIRED,)

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
            undesired, self.undesired_pixels_ = atgp(P, n, start=to_host(target), exclude=exclude) if n else \
                (None, np.zeros(0, np.int64))
            self.undesired_source_ = "ATGP" if n else "none"
        else:
            self.undesired_source_ = "given"
        try:
            D, U = _signature_matrix(target, undesired, P.shape[1])
            self.target_ = D[:, 0]
            self.undesired_ = U.T
            self._fit_matrices(P, D, U, float_dtype(P))
        except InputError as exc:
            if self.undesired_source_ != "ATGP":
                raise
            # nobody gave these signatures: the words about leaving one out would mislead
            raise InputError("the image's most distinct spectra (ATGP), taken as the undesired signatures, have "
                             "the target's shape: the pixels hardly differ from it but in brightness (a constant "
                             "cube, or one band), so there is nothing to suppress it from; set Undesired "
                             "signatures to 0 or give them") from exc
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
        R = xp.divide(R_sum, n)  # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators
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
