"""The classic target and anomaly detectors users compare against: SAM, SID, ACE, MF, CEM, RX, local RX.

Each is written once against the input's array module (NumPy or CuPy). ACE, MF and RX work in the
background-whitened space: with z = Σ^{-1/2}(x - μ) and s = Σ^{-1/2}(t - μ), one cuBLAS/BLAS GEMM
whitens a chunk of pixels and the scores are row dot products:

* MF   = zᵀs / sᵀs                     (``spectral.matched_filter``)
* ACE  = (zᵀs)² / (sᵀs · zᵀz)          (``spectral.ace``, clipped to [0, 1] as there)
* RX   = zᵀz                           (``spectral.rx``; squared Mahalanobis distance)
* CEM  = xᵀR⁻¹d / dᵀR⁻¹d with R the autocorrelation matrix of all pixels (Harsanyi 1993)
* SAM  = cos∠(x, t): higher = smaller spectral angle
* SID  = -(Σ p log(p/q) + Σ q log(q/p)) with p, q the pixel's and the target's spectra scaled to sum 1
  (Chang 2000; ENVI's Spectral Information Divergence): higher = smaller divergence
* LRX  = (x - m_local)ᵀ Σ⁻¹ (x - m_local) with m_local the mean of the outer window minus the inner
  one, windows placed as ``spectral.rx(window=(inner, outer), cov=Σ)`` places them (both shifted to
  stay whole at the borders).

Background statistics come from every pixel not marked as target (the standard global estimate).
The target signature is the mean spectrum of the marked target pixels.
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
    check_target_apart,
    float_dtype,
    labelled_target_mean,
)
from hyperapp.models.stats import BackgroundStats, PixelSums, correlation_from_sums

CHUNK = 1 << 18  # pixels per chunk: bounds the temporaries on the CPU
#: pixels per chunk on the GPU: fewer, larger GEMMs (the temporaries are 0.5 GB at 128 bands)
GPU_CHUNK = 1 << 20
ACE_MODE, RX_MODE = 0, 1


def _launch(function: str, n: int, *args):
    """Launch a ``kernels/whitened.cu`` kernel: one warp per row, a grid of 8 blocks of 8 warps per
    SM, striding over the rows."""
    import cupy

    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import get_kernel

    out = cupy.empty(n, cupy.float32)
    blocks = max(1, min(8 * int(device_attributes().get("MultiProcessorCount", 80)), -(-n // 8)))
    get_kernel("whitened", function)((blocks,), (256,), (*args, out))
    return out


def whitened_rows(z, s, mode: int):
    """ACE (``mode`` 0) or RX (1) of whitened pixels ``z`` (n, k) against the whitened target ``s``
    (a host copy, or None for RX): on the GPU one kernel reads z once (``kernels/whitened.cu``);
    NumPy evaluates the same formula."""
    xp = get_namespace(z)
    if xp is not np and z.dtype == xp.float32:
        z = xp.ascontiguousarray(z)
        ss = 0.0 if s is None else float(np.dot(s.astype(np.float64), s))
        s = xp.zeros(z.shape[1], xp.float32) if s is None else xp.asarray(s, dtype=xp.float32)
        return _launch("hyperapp_whitened_rows", z.shape[0], z, s, np.float32(ss), np.int64(z.shape[0]),
                       np.int32(z.shape[1]), np.int32(mode))
    sq = (z * z).sum(axis=1)
    if mode == RX_MODE:
        return sq
    s = xp.asarray(s)
    return ace_from_products(z @ s, sq, s @ s)


#: ACE and RX on the GPU through :func:`quad_rows` (one kernel reading the cube once); False: the cuBLAS GEMM
#: into a whitened copy, then :func:`whitened_rows` (kept for comparison)
FUSED_QUAD = True


#: :func:`quad_rows` on the tensor cores (``kernels/quadform_tc.cu``, 3xTF32: float32's accuracy) where the GPU
#: has them; False: the float32 SIMT kernel (``kernels/quadform.cu``) everywhere
TENSOR_QUAD = True

#: warps along the pixels in a block of :func:`quad_rows`' tensor-core kernel (32 of them per tile)
TENSOR_QUAD_WARPS = 4

#: n-tiles per branch-free group of products in that kernel
TENSOR_QUAD_GROUP = 2


def quad_rows(P, mu, U, mode: int, v=None, ss: float = 0.0, normalize: bool = False, tri: bool = False,
              spare_sms: int = 0, out=None):
    """RX (``mode`` 1: z.z) or ACE (0: (d.v)^2 / (ss z.z), clipped to [0, 1]) of the rows d = x / ||x|| - mu
    (``normalize``) or x - mu of CuPy float32 pixels ``P`` (n, bands), z = d U, with v = U s and ss = s.s
    for the whitened target s: one kernel (``kernels/quadform_tc.cu`` on the tensor cores, else
    ``kernels/quadform.cu``) reads each pixel once, the whitened rows never stored; ``tri``: U is upper
    triangular (an inverse Cholesky factor), half the FMAs. Its grid is persistent (a few blocks a
    multiprocessor, each looping over tiles), so a pass started on a second stream holds every
    multiprocessor until it ends; ``spare_sms`` sizes it for fewer multiprocessors, leaving room for other
    work (:class:`~hyperapp.models.rbfn_gpu.EarlyPasses`); ``out``: an (n,) float32 array to write into."""
    import cupy

    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import allow_shared, get_kernel

    P = cupy.ascontiguousarray(P, dtype=cupy.float32)
    n, nb = P.shape
    out = cupy.empty(n, cupy.float32) if out is None else out
    if n == 0 or nb == 0:  # (no bands: z is empty, and RX and ACE are 0)
        out.fill(0)
        return out
    U = cupy.ascontiguousarray(U, dtype=cupy.float32)
    v = U[0] if v is None else cupy.ascontiguousarray(v, dtype=cupy.float32)  # (not read in mode 1)
    P, mu, v = (_aligned(a) for a in (P, cupy.ascontiguousarray(mu, dtype=cupy.float32), v))
    attrs = device_attributes()
    sms = max(1, int(attrs.get("MultiProcessorCount", 80)) - int(spare_sms))
    chunk = _tensor_chunk(attrs) if TENSOR_QUAD else 0
    if chunk:  # the tensor cores' 3xTF32 product (compute capability 8.0 on, shared memory permitting)
        Up = _padded(U, chunk)
        wm = TENSOR_QUAD_WARPS
        kernel = get_kernel("quadform_tc", "hyperapp_quad_rows_tc", _tensor_defines(chunk))
        smem = _tensor_smem(chunk, wm)
        allow_shared(kernel, smem)
        blocks = max(1, min(-(-n // (32 * wm)), 8 // wm * sms))
        kernel((blocks,), (64 * wm,), (P, np.int64(n), np.int32(nb), np.int32(bool(normalize)),
                                   mu, Up,
                                   np.int32(Up.shape[1]), np.int32(bool(tri)), v, np.float32(ss),
                                   np.int32(mode), out), shared_mem=smem)
        return out
    blocks = max(1, min(-(-n // 128), 8 * sms))
    get_kernel("quadform", "hyperapp_quad_rows")(
        (blocks,), (256,), (P, np.int64(n), np.int32(nb), np.int32(bool(normalize)),
                            mu, U, np.int32(bool(tri)), v,
                            np.float32(ss), np.int32(mode), out))
    return out


def _aligned(a):
    """``a`` (contiguous float32, rows of ``a.shape[-1]`` values), copied where its rows have a multiple of
    four values but it does not start on 16 bytes: the kernels then read it in 16-byte loads (a view at an
    odd offset of a larger buffer would fault)."""
    return a.copy() if a.shape[-1] % 4 == 0 and a.data.ptr % 16 else a


def _tensor_defines(chunk: int) -> dict:
    """The tensor-core quad kernel's compile-time tunables (``kernels/quadform_tc.cu``; none is the data's shape)."""
    return {"KC": chunk, "WM": TENSOR_QUAD_WARPS, "JG": TENSOR_QUAD_GROUP}


def _tensor_smem(chunk: int, wm: int) -> int:
    """Dynamic shared memory of ``kernels/quadform_tc.cu`` for chunks of ``chunk`` bands and 32 ``wm``
    pixels a tile: two buffers of the pixels' chunk (rows of ``chunk`` + 4 floats) and U's chunk rows
    (136 floats each)."""
    return 2 * (32 * wm * (chunk + 4) + chunk * 136) * 4


def _tensor_chunk(attrs: dict) -> int:
    """Bands per chunk of the tensor-core quad kernel on this device: 32 where a block of them fits the shared
    memory a block may have, else 16; 0 where the kernel cannot run (compute capability below 8.0, or too
    little shared memory): the SIMT kernel then."""
    major = attrs.get("ComputeCapabilityMajor")
    if major is None:
        import cupy

        major = cupy.cuda.Device().compute_capability[:-1]
    major = int(major)
    optin = int(attrs.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))
    static = 4 * 32 * TENSOR_QUAD_WARPS * 4  # the kernel's own arrays
    if major < 8:
        return 0
    return next((kc for kc in (32, 16) if _tensor_smem(kc, TENSOR_QUAD_WARPS) + static <= optin), 0)


def _padded(U, chunk: int):
    """U (nb x nb) zero-padded to whole ``chunk``-band rows and 128-column tiles (float32), what
    ``kernels/quadform_tc.cu`` copies without bounds or alignment checks."""
    import cupy

    from hyperapp.kernels import get_kernel

    nb = U.shape[0]
    rows, cols = -(-nb // chunk) * chunk, -(-nb // 128) * 128
    out = cupy.empty((rows, cols), cupy.float32)
    threads = 256
    blocks = max(1, min(-(-(rows * cols) // threads), 1024))
    get_kernel("quadform_tc", "hyperapp_quad_pad", _tensor_defines(chunk))(
        (blocks,), (threads,), (U, np.int32(nb), np.int32(rows), np.int32(cols), out))
    return out


def upper_triangular(W) -> bool:
    """Whether the (host) matrix is upper triangular to rounding (what :func:`quad_rows`' ``tri`` needs)."""
    W = np.asarray(W)
    return W.ndim == 2 and W.shape[0] == W.shape[1] and \
        float(np.abs(np.tril(W, -1)).max(initial=0.0)) <= 1e-12 * float(np.abs(W).max(initial=0.0))


def _fused(P, W) -> bool:
    xp = get_namespace(P)
    return FUSED_QUAD and xp is not np and P.dtype == xp.float32 and W.dtype == xp.float32


def ace_from_products(dot, sq, ss):
    """ACE from a whitened pixel's product with the whitened target (``dot`` = z.s), its own z.z
    (``sq``) and the target's s.s (``ss``), as ``spectral.ace``: dot^2 / (ss sq), clipped to [0, 1],
    and 0 where the denominator is 0 (``kernels/whitened.cu`` computes the same on the GPU)."""
    xp = get_namespace(dot)
    den = ss * sq
    return xp.clip(xp.where(den > 0, dot ** 2 / xp.where(den > 0, den, 1), 0), 0, 1)


def centred_dot(P, mu, w):
    """(P - mu) @ w, the mean subtracted inside each sum; on the GPU one kernel reads P once."""
    xp = get_namespace(P)
    if xp is not np and P.dtype == xp.float32 and w.dtype == xp.float32:
        P = xp.ascontiguousarray(P)
        return _launch("hyperapp_centred_dot", P.shape[0], P, xp.ascontiguousarray(mu), xp.ascontiguousarray(w),
                       np.int64(P.shape[0]), np.int32(P.shape[1]))
    return (P.astype(w.dtype, copy=False) - mu) @ w


def _map_chunks(X, fn, xp, dtype, gpu_step: int = GPU_CHUNK):
    out = xp.empty(X.shape[0], dtype=dtype)
    step = CHUNK if xp is np else gpu_step
    for i in range(0, X.shape[0], step):
        out[i:i + step] = fn(X[i:i + step])
    return out


def _pixels_less_clicks(X, y, check_input: bool):
    """(pixels, array module, rows to leave out of the background): the image as (n, bands) rows, checked
    for NaN and Inf where asked, and the clicked targets' rows of ``y`` (None without labels)."""
    P, _ = as_pixels(X)
    if check_input:
        check_finite(P)
    xp = get_namespace(P)
    return P, xp, None if y is None else xp.flatnonzero(xp.equal(xp.asarray(y).reshape(-1), TARGET))


class _WhitenedDetector(PixelDetector):
    """Shared fit for detectors that need background statistics and a target signature."""

    accepts_check_input = True
    accepts_sums = True

    def fit(self, X, y=None, check_input: bool = True, sums=None):
        """Fit from labelled pixels (1 target; the background is every other pixel). ``sums``: the
        :class:`~hyperapp.models.stats.PixelSums` of the rows of ``X`` that count, taken before (a
        resident image's); ``y`` then labels the rows outside them no data (-2)."""
        if self.uses_targets:
            P, xp, y, self.target_, exclude = labelled_target_mean(X, y, check_input, with_targets=True)
        else:
            P, xp, exclude = _pixels_less_clicks(X, y, check_input)
        # the background is every pixel but the clicks: their rows are subtracted from the sums
        return self.fit_from_stats(BackgroundStats.from_pixels(P, exclude, sums=sums),
                                   self.target_ if self.uses_targets else None, float_dtype(P))

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True, sums=None):
        """Fit from a target spectrum (a library's, resampled to the image's bands) instead of clicks:
        the background is every pixel but any clicked targets in ``y`` (``sums``: as :meth:`fit`'s)."""
        P, xp, exclude = _pixels_less_clicks(X, y, check_input)
        return self.fit_from_stats(BackgroundStats.from_pixels(P, exclude, sums=sums),
                                   xp.asarray(target, dtype=xp.float64), float_dtype(P))

    #: what the streamed (two-pass) path accumulates for :meth:`fit_from_stats`
    stream_stats = "background"

    def fit_from_stats(self, stats: BackgroundStats, target_mean=None, dtype=np.float32):
        """Fit from background statistics and the mean target spectrum (float64), however they were
        gathered: from the pixels in memory (:meth:`fit`) or tile by tile from a file."""
        if self.uses_targets:
            if target_mean is None:
                raise InputError("no target pixels marked: click at least one target pixel")
            self.target_ = target_mean
        self.stats_ = stats
        # any W with W W^T = Σ^{-1} gives the same scores; a triangular one (where exact) halves the fused
        # kernel's FMAs and needs no eigendecomposition (BackgroundStats.whitening)
        W, self.tri_ = stats.whitening()
        self.W_ = W.astype(dtype)
        self.mu_ = stats.mean.astype(dtype)
        if self.uses_targets:
            s = (self.target_ - stats.mean) @ W
            check_target_apart(float(s @ s), int(s.shape[0]), {"MatchedFilter": "the matched filter"}.get(
                type(self).__name__, type(self).__name__))
            self.s_ = s.astype(dtype)
            self.s_host_ = to_host(self.s_)  # the kernel takes s.s as a host scalar
            self.v_ = (W @ s).astype(dtype)  # W s: ACE's z.s = (x - mu) . v
            # MF's filter folded into one vector: z.s / s.s = (x - mu) . (W s / s.s)
            self.w_mf_ = (W @ s / (s @ s)).astype(dtype)
        return self

    def _whiten(self, P):
        return (P.astype(self.W_.dtype, copy=False) - self.mu_) @ self.W_

    def decision_function(self, X):
        self._check_fitted()
        P, lead = as_pixels(X)
        if P.shape[1] != self.W_.shape[0]:
            raise InputError(f"image has {P.shape[1]} bands, the detector was fitted on {self.W_.shape[0]}")
        xp = get_namespace(P)
        return _map_chunks(P, self._score_chunk, xp, self.W_.dtype).reshape(lead)


class MatchedFilter(_WhitenedDetector):
    """Matched filter (MF), as ``spectral.matched_filter``."""

    def __init__(self):
        pass

    def _score_chunk(self, P):
        # no whitening GEMM: the filter is one vector (see fit_from_stats)
        return centred_dot(P, self.mu_, self.w_mf_)


class ACE(_WhitenedDetector):
    """Adaptive coherence estimator, as ``spectral.ace`` (squared form, in [0, 1])."""

    def __init__(self):
        pass

    def _score_chunk(self, P):
        if _fused(P, self.W_):
            s = self.s_host_.astype(np.float64)
            v = getattr(self, "v_", None)  # (models saved before it have none)
            return quad_rows(P, self.mu_, self.W_, ACE_MODE, v=self.W_ @ get_namespace(P).asarray(self.s_host_)
                             if v is None else v, ss=float(s @ s), tri=getattr(self, "tri_", False))
        return whitened_rows(self._whiten(P), self.s_host_, ACE_MODE)


class RX(_WhitenedDetector):
    """Global RX anomaly detector (squared Mahalanobis distance), as ``spectral.rx``."""

    uses_targets = False

    def __init__(self):
        pass

    def _score_chunk(self, P):
        if _fused(P, self.W_):
            return quad_rows(P, self.mu_, self.W_, RX_MODE, tri=getattr(self, "tri_", False))
        return whitened_rows(self._whiten(P), None, RX_MODE)


class CEM(PixelDetector):
    """Constrained energy minimisation: a FIR filter passing the target with gain 1 and least energy."""

    def __init__(self):
        pass

    accepts_check_input = True
    accepts_sums = True

    def fit(self, X, y, check_input: bool = True, sums=None):
        """Fit from labelled pixels (R over every pixel). ``sums``: the
        :class:`~hyperapp.models.stats.PixelSums` of the rows of ``X`` that count, taken before (a
        resident image's); ``y`` then labels the rows outside them no data (-2)."""
        P, xp, _, d = labelled_target_mean(X, y, check_input)
        return self._fit_correlation(P, d, sums)

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True, sums=None):
        """Fit from a target spectrum (a library's) instead of clicks; R is over every pixel (``sums``:
        as :meth:`fit`'s)."""
        P, _ = as_pixels(X)
        if check_input:
            check_finite(P)
        xp = get_namespace(P)
        return self._fit_correlation(P, xp.asarray(target, dtype=xp.float64), sums)

    def _fit_correlation(self, P, d, sums):
        # the uncentred correlation, summed about a rough mean and moved back (correlation_from_sums)
        if sums is None:
            sums = PixelSums.of(P)
        elif sums.bands != P.shape[1]:
            raise InputError(f"sums of {sums.bands} bands for an image of {P.shape[1]}")
        return self.fit_from_stats(correlation_from_sums(sums.s, sums.G, sums.n, sums.shift), sums.n, d,
                                   float_dtype(P))

    #: the streamed path accumulates the uncentred correlation (sums about a rough mean, moved back to
    #: zero by correlation_from_sums)
    stream_stats = "correlation"

    def fit_from_stats(self, R_sum, n: int, target_mean, dtype=np.float32):
        """Fit from the sum of x x^T over ``n`` pixels and the mean target spectrum (float64)."""
        xp = get_namespace(R_sum)
        if target_mean is None:
            raise InputError("no target pixels marked: click at least one target pixel")
        d = target_mean
        # its floored inverse reused; a ufunc where an operand is a scalar: hyperapp.core.backend, scalar operators
        stats = BackgroundStats(xp.zeros_like(d), xp.divide(R_sum, n), n)
        Rd = stats.inv_cov @ d
        self.w_ = (Rd / (d @ Rd)).astype(dtype)
        self.target_ = d
        return self

    def decision_function(self, X):
        self._check_fitted()
        P, lead = as_pixels(X)
        return (P.astype(self.w_.dtype) @ self.w_).reshape(lead)


class _TargetShapeDetector(PixelDetector):
    """A detector scoring each pixel against the mean target spectrum alone (SAM, SID): fitted from the
    clicked targets' mean or a library spectrum; subclasses give :meth:`fit_from_stats` and the score."""

    def __init__(self):
        pass

    accepts_check_input = True

    def fit(self, X, y, check_input: bool = True):
        P, _, _, t = labelled_target_mean(X, y, check_input)
        return self.fit_from_stats(t, float_dtype(P))

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True):
        """Fit from a target spectrum (a library's) instead of clicks."""
        P, _ = as_pixels(X)
        xp = get_namespace(P)
        return self.fit_from_stats(xp.asarray(target, dtype=xp.float64), float_dtype(P))

    #: the streamed path needs only the target pixels
    stream_stats = "none"

    def fit_from_stats(self, target_mean, dtype=np.float32):  # pragma: no cover - each subclass gives it
        raise NotImplementedError


class SAM(_TargetShapeDetector):
    """Spectral angle mapper against the mean target spectrum; score = cos(angle)."""

    def fit_from_stats(self, target_mean, dtype=np.float32):
        """Fit from the mean target spectrum (float64)."""
        xp = get_namespace(target_mean)
        if target_mean is None:
            raise InputError("no target pixels marked: click at least one target pixel")
        norm = float(xp.linalg.norm(target_mean))
        if norm == 0:
            raise InputError("the mean target spectrum is all zeros: SAM needs a non-zero target")
        # ufuncs, not operators, where an operand is a scalar: hyperapp.core.backend, scalar operators (SAM's
        # fresh runs imported cupyx.scipy.special for these two lines, 0.4-0.5 s of each run)
        self.t_ = xp.divide(target_mean, norm).astype(dtype)
        return self

    def decision_function(self, X):
        self._check_fitted()
        P, lead = as_pixels(X)
        xp = get_namespace(P)

        def score(c):
            c = c.astype(self.t_.dtype)
            n = xp.sqrt((c * c).sum(axis=1))
            pos = xp.greater(n, 0)
            return xp.where(pos, (c @ self.t_) / xp.where(pos, n, 1), 0)

        return _map_chunks(P, score, xp, self.t_.dtype).reshape(lead)

    @staticmethod
    def angle(cos):
        """Spectral angle in radians from the score."""
        xp = get_namespace(cos)
        return xp.arccos(xp.clip(cos, -1, 1))


#: SID's floor: values below it (zeros, negative noise in absorption bands) count as it, so every band's
#: share is positive and its logarithm finite
SID_EPS = 1e-12


class SID(_TargetShapeDetector):
    """Spectral information divergence against the mean target spectrum (Chang 2000), as ENVI's SID.

    Each spectrum is read as a probability distribution over the bands, p = x / Σx (and q = t / Σt for
    the target), and the divergence is the symmetric Kullback-Leibler one, Σ (p - q)(log p - log q) =
    Σ p log(p/q) + Σ q log(q/p), 0 for spectra of the same shape. The score is its negative, so higher
    is more target-like as with every detector (``divergence`` gives ENVI's positive value back: its
    default class threshold, a divergence of 0.05, is a score of -0.05).

    Values below :data:`SID_EPS` (zero or negative reflectance, which no distribution holds) are
    clipped to it before the scaling, in the pixels and the target alike: the divergence stays finite
    and such a band counts as (almost) no share of the spectrum.
    """

    def fit_from_stats(self, target_mean, dtype=np.float32):
        """Fit from the mean target spectrum (float64)."""
        if target_mean is None:
            raise InputError("no target pixels marked: click at least one target pixel")
        xp = get_namespace(target_mean)
        if not float(xp.max(target_mean)) > 0:
            raise InputError("the mean target spectrum has no positive value: SID reads spectra as shares of their "
                             "sum over the bands, and needs a target with some positive reflectance")
        q = xp.maximum(target_mean, SID_EPS)  # ufuncs where an operand is a scalar: hyperapp.core.backend
        q = q / q.sum()
        self.q_ = q.astype(dtype)
        self.log_q_ = xp.log(q).astype(dtype)
        return self

    def decision_function(self, X):
        self._check_fitted()
        P, lead = as_pixels(X)
        if P.shape[1] != self.q_.shape[0]:
            raise InputError(f"image has {P.shape[1]} bands, the detector was fitted on {self.q_.shape[0]}")
        xp = get_namespace(P)

        def score(c):
            c = xp.maximum(c.astype(self.q_.dtype), SID_EPS)
            p = c / c.sum(axis=1, keepdims=True)
            return xp.negative(((p - self.q_) * (xp.log(p) - self.log_q_)).sum(axis=1))

        # a chunk's five temporaries of its size: an eighth of the GPU chunk keeps them near 0.6 GB at 224 bands
        return _map_chunks(P, score, xp, self.q_.dtype, GPU_CHUNK // 8).reshape(lead)

    @staticmethod
    def divergence(score):
        """The spectral information divergence (0 or more) from the score."""
        xp = get_namespace(score)
        return xp.negative(score)


class LocalRX(PixelDetector):
    """RX with a local background mean from an (outer minus inner) window and the global covariance.

    Parameters
    ----------
    inner, outer : odd int
        Window widths in pixels (the guard window and the background window).
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("inner", int, help="Width in pixels of the guard window around the pixel under test, left out of the background statistics (odd).", minimum=1, maximum=99, label="Guard window (px)"),
        Param("outer", int, help="Width in pixels of the local window whose pixels (outside the guard window) estimate the background (odd).", minimum=3, maximum=201, label="Background window (px)"),
    )

    uses_targets = False

    def __init__(self, inner: int = 3, outer: int = 15):
        self.inner = inner
        self.outer = outer

    def _validate_params(self):
        """The rule between the two windows (each one's range: :attr:`parameters`)."""
        inner, outer = int(self.inner), int(self.outer)
        if inner % 2 == 0 or outer % 2 == 0 or inner >= outer:
            raise InputError(f"the guard window (option inner, {inner} px) must be smaller than the background "
                             f"window (option outer, {outer} px), and both an odd number of pixels")

    def fit(self, X, y=None):
        if X.ndim != 3:
            raise InputError("local RX needs the image as (rows, cols, bands)")
        self._validate_params()
        if self.outer > min(X.shape[:2]):
            raise InputError(f"outer window {self.outer} is larger than the image {X.shape[0]}x{X.shape[1]}")
        P, _ = as_pixels(X)
        check_finite(P)
        self.stats_ = BackgroundStats.from_pixels(P)
        self.Cinv_ = self.stats_.inv_cov
        return self

    def decision_function(self, X):
        self._check_fitted()
        xp = get_namespace(X)
        R, C, B = X.shape
        # summed-area table with a zero border: S[r, c] = sum of X[:r, :c]
        S = xp.zeros((R + 1, C + 1, B), dtype=xp.float64)
        S[1:, 1:] = X.astype(xp.float64).cumsum(axis=0).cumsum(axis=1)

        def bounds(n, w):
            # both windows keep their full width and shift inside the image at the borders, as
            # spectral's inner_outer_window_mask_creator places them
            lo = xp.clip(xp.subtract(xp.arange(n), w // 2), 0, n - w)
            return lo, xp.add(lo, w)  # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators

        def box(r0, r1, c0, c1):
            return (S[r1][:, c1] - S[r0][:, c1] - S[r1][:, c0] + S[r0][:, c0])

        ro0, ro1 = bounds(R, self.outer)
        co0, co1 = bounds(C, self.outer)
        ri0, ri1 = bounds(R, self.inner)
        ci0, ci1 = bounds(C, self.inner)
        n_out = ((ro1 - ro0)[:, None] * (co1 - co0)[None, :]).astype(xp.float64)
        n_in = ((ri1 - ri0)[:, None] * (ci1 - ci0)[None, :]).astype(xp.float64)
        mean = (box(ro0, ro1, co0, co1) - box(ri0, ri1, ci0, ci1)) / (n_out - n_in)[..., None]
        d = (X.astype(xp.float64) - mean).reshape(-1, B)
        out = ((d @ self.Cinv_) * d).sum(axis=1)
        return out.reshape(R, C).astype(float_dtype(X))
