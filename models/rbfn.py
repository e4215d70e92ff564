"""Pixel-level RBFN target detector (seed 002, sections 2.2 and 4.2), trained from a few clicks.

Forward pass, as the thesis (eqs. 2.1-2.2), in a whitened space z = (x - μ) A:

    h_i = exp(-||z - u_i||² / (2 σ_i²)),    y = Σ_i w_i h_i + v·c(x) + th

where c(x) is the *coherence input* (beyond the thesis): ACE of the normalised spectrum against the
clicks' mean in the background's full whitened space, the geometry ACE and RX see. The hidden layer
works in the leading principal components, which carry the background's variation; a weak or
sub-pixel target's signature often lies in the components left out, where ACE finds it.

The thesis ran a network trained elsewhere; here :meth:`RBFN.fit` trains it from what the user
marked, in a few milliseconds:

1. **Whitening** fitted on background pixels (every non-target pixel, sub-sampled to 50 000):
   ``"pca"`` (default) keeps the leading ``n_components`` principal components, each scaled to unit
   variance; ``"cov"`` whitens with the full Σ^{-1/2}; ``"std"`` standardises each band. Distances then
   mean what they mean for ACE and the matched filter.
2. **Training set.** Targets: the clicked pixels, plus ``n_augment`` synthetic sub-pixel targets
   z = f z_t + (1 - f) z_b mixing a random click with a random background pixel at fill f in
   [``min_fill``, 1] (linear mixing holds in the whitened space because the whitening is affine).
   Background: pixels the user marked as background plus a random sample of ``n_background`` pixels
   that excludes the targets and their ``guard``-pixel neighbourhood.
3. **Centres** by k-means inside each class: ``n_target_centres`` (default 1, at most the number
   of clicks) on the clicks, the rest on the background sample (:func:`~hyperapp.models.kmeans.kmeans_small`:
   on the GPU one thread block, ``kernels/kmeans_small.cu``: 0.5 ms on an H100, where NumPy on the
   host took 7-9 ms).
4. **Widths** from centre spacing: a background centre's σ² is the mean squared distance of its
   members; a target centre's σ² is a quarter of the squared distance to the nearest background
   centre (so the response ramps along the mixing line), at least the member spread.
5. **Output weights and threshold** by class-balanced ridge regression on the hidden activations
   and the coherence input (each class carries half the weight; ``ridge`` times the mean diagonal as
   the penalty). A click's own coherence is taken against the mean of the *other* clicks: against a
   mean it is part of, every click looks coherent and the regression would trust the input more than
   it earns on targets nobody clicked. So the weight v is large where ACE generalises across the
   clicks (weak, sub-pixel targets) and small where it does not (abu-airport-1's aircraft).
6. **Anomaly input.** RX of the raw spectra (the classic detector's squared Mahalanobis distance to the
   background, from the same whitening sample; taken as log(1 + RX / bands)) and the network's output
   are each standardised over the background rows, and the score is the **larger** of the two, RX
   weighted by the clicks' evidence that the targets are anomalies (:func:`_fuse`): the share of the
   background below the *median* click's RX, ramped from 0.8 to 0.9. Where the clicks are strong
   anomalies, a pixel is a target if either the network or RX says so: targets of materials nobody
   clicked, which the network has no reason to recognise, are found by RX, and the network's own
   targets keep their rank. Where the clicks are ordinary (the airport's aircraft: RX AUC 0.83) the
   weight is 0 and the network is alone, with no extra GEMM at scoring. The background statistics leave
   the clicks out (on images of up to 2^18 pixels their neighbourhoods too), so a click's RX is what it
   would be unclicked.

On a resident image (the window's, between clicks) a fit takes from the last click's fit whatever follows
from the same sampled pixels: the whitenings, the training background's centres and the anomaly input's RX
map (:mod:`~hyperapp.models.rbfn_reuse`).

Measured design choices: 5 random clicks from the truth, AUC over all other pixels, mean of 10 seeds
(the protocol of ``tests/test_rbfn.py::test_rbfn_beats_classic_detectors``), CPU, 2026-11-22:

======================================================  ======  ======  ======
variant                                                  abu-1   land    sea
======================================================  ======  ======  ======
matched filter / CEM / ACE / SAM (best of them)          0.859   1.000   1.000
pca16, 8 neurons, σ x1, 1000 synthetic targets           0.793   0.999   0.972
same, no synthetic targets                               0.915   0.985   0.899
same, σ x2                                               0.925   1.000   0.975
same, spectra normalised to unit norm                    0.937   1.000   1.000
normalised, σ x2, 4 neurons (the default until 11-23)   0.941   1.000   1.000
normalised, 64 neurons, 1 target centre                  0.956   0.99998 1.000
normalised, 64 neurons, 16 target centres                0.905   0.906   0.957
cov (full whitening) instead of pca16                    0.559   0.967   0.882
pca 8 / pca 24 / pca 32 components                       0.907   0.904   0.904
ridge 0.1 (32 neurons, 1 target centre)                  0.944   0.998   1.000
======================================================  ======  ======  ======

2026-11-23, ``scripts/quality.py`` (10 seeds x 5 clicks; generated beach, urban and vegetation
scenes added), mean AUC:

=========================================================  =======  =======  =======  =======
variant                                                     abu-1    beach    veg.     land
=========================================================  =======  =======  =======  =======
best of ACE / MF / CEM / SAM / RX                           0.8588   0.99995  0.99995  1.00000
4 neurons, σ x2 (the previous default)                      0.9415   0.9578   0.9999   1.0000
32 neurons, σ x3                                            0.9532   0.9961   0.9999   1.0000
4 neurons + MF input (clicks scored against their own mean) 0.8849   0.9839
4 neurons + ACE input, same                                 0.8610   1.0000
4 neurons + ACE input, each click against the others        0.9413   1.0000   0.9999   1.0000
32 neurons, σ x3, ACE input, clicks held out, ridge 1e-3   0.95378  0.99999  0.99987  1.00000
**default**: the same with ridge 3e-3                       0.95477  0.99998  0.99996  1.00000
=========================================================  =======  =======  =======  =======

So: normalising spectra (brightness invariance, what makes SAM strong on the sea scene) and wide
RBFs help everywhere; synthetic sub-pixel targets help the synthetic scenes but hurt the real one
(its aircraft are not linear mixtures of five clicks), so they are off by default; a single target
centre generalises from five clicks where several over-fit. With the coherence input, 32 background
centres and σ x3 gain on abu-airport-1 without the loss on the generated scenes they had alone; a
ridge of 3e-3 rather than 1e-3 lifts the vegetation scene above MF and CEM (0.99996 against 0.99995) at
the cost of Pd at 1e-3 on abu-airport-1 (0.196 against 0.235; its AUC rises, 0.9548 against 0.9538).

2026-11-24/25: four held-back real anomaly-benchmark scenes showed the network below global RX where
the targets are the scene's anomalies (coastal 0.84-0.92 against RX 0.99). Scenes made from the
airport's real background with real spectra implanted (:mod:`hyperapp.bench.implanted`; full tables and
commands in ``docs/quality.md``), ``scripts/quality.py``, 10 seeds, mean / worst seed:

=====================================================  =============  =============  =============  =======
variant                                                 airport        rare-material  aircraft-full  land
=====================================================  =============  =============  =============  =======
global RX (no clicks)                                   0.832 / 0.827  0.967 / 0.956  0.715 / 0.707  0.952
best of ACE / MF / CEM / SAM                            0.858 / 0.811  0.756 / 0.559  0.880 / 0.804  1.0000
network alone (anomaly 0)                               0.955 / 0.943  0.855 / 0.388  0.918 / 0.864  1.0000
sum, gated by every click and held-out misses           0.954 / 0.939  0.894 / 0.388  0.918 / 0.864  1.0000
sum, gated by the median click                          0.954 / 0.935  0.962 / 0.859  0.917 / 0.880  0.9994
sum, RX capped at the median click's                    0.949 / 0.934  0.974 / 0.920  0.914 / 0.866  0.9996
the larger of the two, median-click gate                0.955 / 0.933  0.985 / 0.972  0.916 / 0.877  0.9987
**default**: the same, RX at half weight (anomaly 0.5)  0.959 / 0.938  0.980 / 0.960  0.918 / 0.881  0.99997
=====================================================  =============  =============  =============  =======

Held-out gating (RX only where the network fails on a clicked object held out) cannot see that the
unclicked targets are other materials when five clicks land on one: its worst seed stays at 0.388. The
median click's RX is the evidence that holds: where the clicks are anomalies, RX counts. Summing lets
the background's strongest anomalies climb between the targets; taking the larger score keeps the
network's targets where they were and adds RX's. At full weight the background's strongest anomalies
still pass the weaker targets the network alone ranks first (Pd at a false-alarm rate of 1e-3: airport
0.041 against the network's 0.196, generated land 0.61 against 1.0); at half weight they stay below
them (airport 0.154, land 0.992) and the AUC is at least the network's on every scene but the generated
land and the implanted sub-pixel aircraft (-0.00003, -0.004). Where the clicks are anomalies the
default mask took the scene's strongest anomalies as targets nobody clicked (generated land: false-alarm
rate 4.6e-3 at a requested 1e-3; beach 4.3e-3): :meth:`RBFN.score_maps` gives the network's own output
beside the score, and the default threshold takes its separate mode of targets from that
(:func:`~hyperapp.models.evaluation.far_threshold`): land 0.99e-3, Pd 0.992; beach 0.93e-3, Pd 0.995.

Inference is a hand-written CUDA kernel (``kernels/rbfn.cu``, see its header for the thread
mapping) that reads the cube once; the NumPy path computes the same numbers in chunks.
"""

from __future__ import annotations

import threading

import numpy as np

from hyperapp.core.backend import get_namespace, to_device_together, to_host
from hyperapp.core.errors import InputError, ModelError
from hyperapp.kernels.pack import to_host_together
from hyperapp.models import classic
from hyperapp.models.base import (
    Param,
    PixelDetector,
    as_pixels,
    check_finite,
    check_target_count,
    label_lists,
)
from hyperapp.models.classic import (
    ACE_MODE,
    GPU_CHUNK,
    RX_MODE,
    ace_from_products,
    quad_rows,
    upper_triangular,
    whitened_rows,
)
from hyperapp.models.kmeans import kmeans, kmeans_small, sq_distances
from hyperapp.models.rbfn_reuse import Reuse, TrainingBackground, Whitening
from hyperapp.models.stats import BackgroundStats

WHITENINGS = ("pca", "cov", "std")
CHUNK = 1 << 17
STATS_SAMPLE = 50_000
#: Lloyd iterations placing the background centres: 5 and 25 measure the same mean AUC on every scene
#: of ``scripts/quality.py`` (abu-airport-1 0.9538 / 0.9537), and each costs ~0.2 ms on the host
CENTRE_ITERATIONS = 5


def _hidden_t(Z, centres, gamma):
    """Hidden-layer outputs exp(-gamma ||z - c||^2), transposed: (centres, rows) float32.

    Distances are float64, since the expansion ||z||^2 - 2 z.c + ||c||^2 cancels badly in float32;
    they are laid out (centres, rows), the rows along the fast axis, where NumPy's broadcasts and
    reductions over a centre-wide last axis cost several times the GEMM (CPU scoring 1.6x faster)."""
    xp = get_namespace(Z)
    ZT = Z.T.astype(xp.float64)
    C = centres.astype(xp.float64)
    d = (-2.0 * C) @ ZT
    d += (C * C).sum(axis=1)[:, None]
    d += (ZT * ZT).sum(axis=0)[None, :]
    xp.maximum(d, 0, out=d)
    d *= -gamma.astype(xp.float64)[:, None]
    return xp.exp(d, out=d).astype(xp.float32)


_GPU_KERNELS: dict = {}


def _centred_normalised(P, mean, normalize: bool):
    """CuPy: ``P / ||P|| - mean`` row by row (or ``P - mean``; ``mean`` None: no centring), as
    :meth:`RBFN._normalized` then the centring: one reduction for the norms and one elementwise pass,
    instead of a pass per operator."""
    import cupy

    if not normalize:
        return P if mean is None else P - mean
    k = _gpu_kernels()
    return k["centre"](P, cupy.sqrt(k["sq"](P, axis=1))[:, None], np.float32(0) if mean is None else mean[None, :])


def _gpu_kernels() -> dict:
    """The fit's and the scoring's small CuPy kernels, made once (all at once: the GUI's worker threads
    may both be here)."""
    import cupy

    if not _GPU_KERNELS:
        _GPU_KERNELS.update(
            sq=cupy.ReductionKernel("float32 x", "float32 y", "x * x", "a + b", "y = a", "0", "hyperapp_row_sq"),
            centre=cupy.ElementwiseKernel("float32 x, float32 n, float32 mu", "float32 d",
                                          "d = (n > 0 ? x / n : x) - mu", "hyperapp_centred_normalised"),
            # the training rows' hidden outputs, (centres, rows) float64: element i is centre i / n and row
            # i % n, so a warp's threads read consecutive rows of Z (k floats each, cached) and one centre
            hidden=cupy.ElementwiseKernel(
                "raw float32 Z, raw float32 C, raw float32 gamma, int32 k, int32 n", "float64 h",
                """
                const int c = i / n, r = i % n;
                double d = 0.0;
                for (int j = 0; j < k; ++j) {
                    const double t = (double)Z[(long long)r * k + j] - (double)C[c * k + j];
                    d += t * t;
                }
                h = exp(-(double)gamma[c] * d);
                """, "hyperapp_rbfn_hidden"))
    return _GPU_KERNELS


def _hidden_design(Z, centres, gamma):
    """The output layer's hidden rows, (centres, rows) float64: :func:`_hidden_t` (NumPy), or on the GPU
    one kernel computing the same distances directly in float64 (instead of the expansion's dozen
    operations, then two casts)."""
    xp = get_namespace(Z)
    if xp is np:
        return _hidden_t(Z, centres, gamma).astype(np.float64)
    Z = xp.ascontiguousarray(Z, dtype=xp.float32)
    nc, (n, k) = centres.shape[0], Z.shape
    h = xp.empty((nc, n), xp.float64)
    _gpu_kernels()["hidden"](Z, xp.ascontiguousarray(centres, dtype=xp.float32),
                             xp.ascontiguousarray(gamma, dtype=xp.float32), np.int32(k), np.int32(n), h)
    return h


def _ace_direction(W, s):
    """W s / ||s|| (float32, on W's device): :func:`~hyperapp.models.classic.quad_rows`' ACE vector for the
    whitened target ``s`` with ``ss`` = 1, the same ACE as W s with ss = s.s. Made on the device from the
    fit's own target, so the score's passes can start before the target reaches the host."""
    xp = get_namespace(W)
    s = xp.asarray(s, dtype=xp.float32)
    return W @ (s / xp.maximum(xp.sqrt(s @ s), xp.float32(1e-30)))


class _Coherence:
    """The coherence input on the training rows (the clicks ``T`` and the background sample ``B``,
    normalised spectra): ACE in the background's full whitened space against the mean whitened click.

    The target is the mean whitened click, so each row's dot product with it is the mean of its dot
    products with the clicks: one product with every click (on the device the pixels are on) also
    gives each click's value against the mean of the others (:meth:`scores`).
    """

    def __init__(self, W, mu, TB, m: int, kind: str = "ace", background=None):
        """``TB``: the clicks' normalised spectra (its first ``m`` rows), then the background rows'; or the
        clicks' alone with ``background``, the background rows' whitened coordinates (device) and their
        squared norms (host) as an earlier fit made them (:class:`~hyperapp.models.rbfn_reuse.TrainingBackground`)."""
        self.kind = kind
        xp = get_namespace(TB)
        self.W = W = W.astype(xp.float32, copy=False)  # the scoring uses the same whitening
        self.m = m
        z = (TB - mu.astype(xp.float32, copy=False)) @ W
        zt = z[:self.m]
        #: the background rows' whitened coordinates (device), which a later fit may take
        self.z_b = z[self.m:] if background is None else background[0]
        self._sq_b = None if background is None else background[1]
        #: the whitened target, the mean whitened click (float32, where the pixels are): the scoring's
        #: target is this very vector (:meth:`target` is its host copy)
        self.s = zt.mean(axis=0)
        # what the scores need of the products of every row with every click, reduced on the device
        # (a library's thousand synthetic targets would make that matrix millions of numbers to copy):
        # each background row's product with the mean click, each click's products summed over the
        # clicks (its row of the Gram matrix G) and with itself, and every row's z.z (the clicks' alone where
        # the background's are known); they reach the host in the fit's one copy (:meth:`take`), with the target
        self.device = [zt, self.z_b @ self.s, zt @ zt.sum(axis=0), (z * z).sum(axis=1), self.s]

    def take(self, zt, dot_b, row_sums, sq, s) -> None:
        """The host copies of :attr:`device`, in that order."""
        self.device = None
        self.zt = zt
        self.dot_b = dot_b  # background rows . mean click
        self.row_sums = row_sums  # sum over clicks j of zt_i . zt_j
        self.sq = {"T": sq[:self.m], "B": sq[self.m:] if self._sq_b is None else self._sq_b}
        self.s_host = np.asarray(s, np.float32)  # (float32 values: exact through the float64 copy)

    def target(self):
        """The whitened target, the mean whitened click: the host copy of :attr:`s`, float32."""
        return self.s_host

    def scores(self) -> tuple[np.ndarray, np.ndarray]:
        """(clicks, background rows): ACE against the mean whitened click, as ``spectral.ace``.

        A click's own value is against the mean of the *other* clicks: against a mean it is part of,
        every click looks coherent, and the output layer would trust the input more than it deserves on
        targets it has not seen. (With one click, against itself.)
        """
        m = self.row_sums.shape[0]
        if self.kind == "mf":  # the matched filter z.s / s.s instead
            def score(dot, sq, ss):
                return dot / ss
        else:
            score = ace_from_products
        tot, own = self.row_sums, self.sq["T"]
        total = float(tot.sum())
        background = score(self.dot_b, self.sq["B"], total / m ** 2)
        # the mean of the other clicks and its squared norm, for every click at once from G's row sums:
        # (sum - own) / (m - 1) and (total - 2 row sum + own) / (m - 1)^2
        if m == 1:
            d_own, ss_own = tot, np.full(1, total)
        else:
            d_own, ss_own = (tot - own) / (m - 1), (total - 2 * tot + own) / (m - 1) ** 2
        return score(d_own, self.sq["T"], ss_own), background


def anomaly_input(sq, k: int):
    """The anomaly input: log(1 + RX / k) of the squared Mahalanobis distance ``sq`` in ``k`` whitened
    dimensions (RX is near k on a Gaussian background; the logarithm tames its heavy tail, so a few
    extreme pixels do not set the input's scale)."""
    xp = get_namespace(sq)
    return xp.log1p(xp.divide(sq, k))  # a ufunc, not ``/``: see hyperapp.core.backend on scalar operators


def _rx_whitening(stats) -> np.ndarray:
    """A whitening W (host, float64) with ||(x - mu) W||^2 = RX: the inverse transposed Cholesky factor
    of the covariance (a few microseconds at 64 bands, where the eigendecomposition of
    ``stats.sqrt_inv_cov`` costs a millisecond on the live path), or that where the covariance is not
    positive definite (its floored eigenvalues then)."""
    Li = stats.inverse_cholesky
    return np.asarray(to_host(stats.sqrt_inv_cov_on_host()), np.float64) if Li is None else Li.T


#: the coherence input whitens with an inverse Cholesky factor of the floored covariance (upper triangular:
#: the scoring kernel skips half its FMAs); False: the symmetric Σ^{-1/2} (the same ACE to rounding)
COHERENCE_TRI = True


def _coherence_whitening(stats):
    """The coherence input's whitening U (host float64 where the covariance is decomposed there), with
    U U^T the inverse of the covariance with its eigenvalues floored (:class:`BackgroundStats`): ACE's
    products (z.z, z.s, and the matched filter's) are the same for every such U, the symmetric
    Σ^{-1/2} or, with :data:`COHERENCE_TRI`, the upper triangular one (the inverse transposed Cholesky
    factor of the floored covariance, positive definite by the floor), whose zero lower half the scoring
    kernel skips. Where the floor moves no eigenvalue that is the inverse transposed Cholesky factor of
    the covariance itself (:attr:`~hyperapp.models.stats.BackgroundStats.exact_triangular_whitening`,
    which tells without an eigendecomposition), so the score's passes can start before the network's eigendecomposition
    (:class:`~hyperapp.models.rbfn_gpu.EarlyPasses`). Otherwise it is the Cholesky factor of the floored
    inverse with its rows and columns reversed (J chol(J A J) J is upper triangular, and its product with
    its transpose is A): one Cholesky of the inverse the eigendecomposition gives, 0.4 ms at 128 bands
    where a Cholesky and NumPy's triangular solve took 1.5 ms (2-core host)."""
    if not COHERENCE_TRI or not stats._small:  # (a covariance over HOST_EIGH_MAX bands: on the device)
        return stats.sqrt_inv_cov_on_host()
    U = stats.exact_triangular_whitening
    if U is not None:
        return U
    w, v = stats._eig_host  # floored: the same decomposition the network's whitening takes
    try:
        return np.linalg.cholesky(((v / w) @ v.T)[::-1, ::-1])[::-1, ::-1].copy()
    except np.linalg.LinAlgError:
        return stats.sqrt_inv_cov_on_host()


#: the anomaly input counts where the median click lies above this share of the background's RX values,
#: ramped to fully at the second (:func:`_fuse`)
ANOMALY_GATE = (0.8, 0.9)


def _fuse(net_b: tuple[float, float], an_t, an_b) -> tuple[float, float, float, float]:
    """How the network's output and the anomaly input combine: (scale and shift of the network's
    output, weight and shift of the anomaly input), from the network's mean and standard deviation over
    the background rows ``net_b`` and the anomaly input's values on the clicks and the background rows.
    Each is standardised by the background rows and
    the score is the larger of the two, the anomaly input weighted by the clicks' evidence that the
    targets are anomalies (see the module's docstring): the share of the background below the
    *median* click's RX, ramped over :data:`ANOMALY_GATE`. So RX counts where the clicks are mostly
    strong anomalies (one odd click, a sub-pixel one, does not switch it off) and not at all where they
    are ordinary."""
    mn, sn = float(net_b[0]), float(net_b[1]) + 1e-12
    ma, sa = float(an_b.mean()), float(an_b.std()) + 1e-12
    lo, hi = ANOMALY_GATE
    share = float(np.median((an_b[None, :] < np.asarray(an_t)[:, None]).mean(axis=1)))
    wa = float(np.clip((share - lo) / (hi - lo), 0, 1))
    return 1.0 / sn, -mn / sn, wa / sa, -wa * ma / sa


_DRAWS: dict = {}
_DRAWS_KEPT = 8
_DRAWS_LOCK = threading.Lock()  # the GUI's worker threads may fit at once


class _Draw:
    """One draw of candidate pixels, ``rng.integers(0, high, size)``, with what rejecting the excluded
    ones from it needs: the draw sorted (so an excluded pixel's copies are found by two binary searches
    instead of a gather per candidate) and the positions of each value's first copy, in draw order."""

    def __init__(self, values: np.ndarray, state: dict):
        values.flags.writeable = False
        self.values, self.state = values, state
        self._order = self._sorted = self._first = None

    def kept(self, excluded: np.ndarray, distinct: bool) -> np.ndarray:
        """The draw less every copy of the (sorted) ``excluded`` pixels, in draw order, each value
        once when ``distinct``: what rejecting them one by one and then keeping first copies gives."""
        if self._order is None:
            self._order = np.argsort(self.values, kind="stable")
            self._sorted = self.values[self._order]
            _, first = np.unique(self.values, return_index=True)
            self._first = np.sort(first)
        lo = np.searchsorted(self._sorted, excluded, "left")
        hi = np.searchsorted(self._sorted, excluded, "right")
        hit = lo < hi
        drop = np.zeros(self.values.size, bool)
        for a, b in zip(lo[hit], hi[hit]):  # the few excluded pixels that were drawn
            drop[self._order[a:b]] = True
        if distinct:
            pos = self._first[~drop[self._first]]
            return self.values[pos]
        return self.values[~drop]


def _draw(rng, high: int, size: int) -> _Draw:
    """``rng.integers(0, high, size)`` as a :class:`_Draw`, remembered by the generator's state: every
    click re-trains from the same seed, so its first draws repeat exactly (55,000 of them cost 0.37 ms
    on the host and their rejection 0.5 ms more; from memory, a few microseconds). The generator is
    left in the state the draw itself would leave."""
    st = rng.bit_generator.state
    key = (st["bit_generator"], repr(st["state"]), st.get("has_uint32"), st.get("uinteger"), high, size)
    with _DRAWS_LOCK:
        hit = _DRAWS.get(key)
    if hit is not None:
        rng.bit_generator.state = hit.state
        return hit
    d = _Draw(rng.integers(0, high, size=size), None)
    d.state = rng.bit_generator.state
    with _DRAWS_LOCK:
        while len(_DRAWS) >= _DRAWS_KEPT:
            _DRAWS.pop(next(iter(_DRAWS)))
        _DRAWS[key] = d
    return d


def _arange_without(n: int, excluded: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(np.arange(n), excluded)``, the same sorted array, by a mask: one pass over ``n``
    bytes, where ``setdiff1d`` sorts or hashes the whole range (0.3 s for a 512 x 512 image on a busy
    2-core host, 20 ms on an idle one: a batch of such cubes paid it per cube, the GPU waiting)."""
    keep = np.ones(n, bool)
    ex = np.asarray(excluded).astype(np.intp, copy=False).reshape(-1)
    keep[ex[(ex >= 0) & (ex < n)]] = False
    return np.flatnonzero(keep)


class _Pool:
    """The pixels ``0..n-1`` less a (small, sorted) excluded set, drawn from without listing them all.

    Small images list the pool and draw with ``rng.choice`` (exactly as before); large ones draw
    uniform candidates and reject the excluded ones, which costs O(draws), not O(pixels).
    """

    LIST_BELOW = 1 << 18

    def __init__(self, n: int, excluded: np.ndarray):
        self.n = n
        self.excluded = excluded
        self.size = n - excluded.size
        self._listed = _arange_without(n, excluded) if n <= self.LIST_BELOW else None

    def choice(self, k: int, rng, distinct: bool = True) -> np.ndarray:
        """``k`` pixels of the pool, distinct unless told (statistics from a large pool do not need
        it: a few repeats among tens of thousands of draws change nothing, and skipping the
        de-duplication saves a sort)."""
        k = min(int(k), self.size)
        if self._listed is not None:
            return rng.choice(self._listed, k, replace=False)
        if distinct and k > self.size // 2:
            return rng.choice(_arange_without(self.n, self.excluded), k, replace=False)
        # every round from a remembered draw (_draw); the first is nearly always the only one
        out = _draw(rng, self.n, int(k * 1.1) + 16).kept(self.excluded, distinct)
        while out.size < k:
            out = np.concatenate([out, _draw(rng, self.n, int((k - out.size) * 1.1) + 16).kept(self.excluded, False)])
            if distinct:
                _, first = np.unique(out, return_index=True)  # distinct, in the order drawn
                out = out[np.sort(first)]
        return out[:k]

    def all(self) -> np.ndarray:
        return self._listed if self._listed is not None else _arange_without(self.n, self.excluded)


def _stats_sample(pool: _Pool, explicit: np.ndarray, rng) -> np.ndarray:
    """The whitening sample: :data:`STATS_SAMPLE` pixels of ``pool`` (all of a smaller pool), with the
    marked background ``explicit``."""
    idx = pool.all() if pool.size <= STATS_SAMPLE else pool.choice(STATS_SAMPLE, rng, distinct=False)
    return np.union1d(idx, explicit) if explicit.size else idx


class RBFN(PixelDetector):
    """Radial-basis-function network scoring each pixel's spectrum.

    Parameters
    ----------
    n_hidden : int
        Hidden neurons (the thesis used 4 for 64 bands; 32 measured better, see above). Any number.
    n_target_centres : int, optional
        Neurons placed on the target class (default 1: the clicks' mean; more over-fit a few clicks).
    whiten : {"pca", "cov", "std"}
    n_components : int
        Principal components kept by ``whiten="pca"``.
    n_background : int
        Background pixels sampled for training.
    n_augment : int
        Synthetic sub-pixel targets added to the clicks.
    min_fill : float
        Smallest fill fraction of the synthetic targets.
    guard : int
        Pixels around each target excluded from the background sample (needs a 3-D image).
    ridge : float
        Ridge penalty of the output layer, relative to the mean diagonal.
    width_scale : float
        Multiplies every σ.
    coherence : float
        Weight of the coherence input (ACE in the whitened space) before the regression fits its own
        weight; 0 leaves it out (the thesis's network). Needs ``n_augment`` 0.
    seed : int
        Seed of the sampling and k-means.
    n_library_targets : int
        :meth:`fit_signature`: synthetic sub-pixel targets mixed from a library spectrum and sampled
        background pixels (abundances uniform in [``min_fill``, 1]).
    anomaly : float
        Weight of the anomaly input (log RX of the raw spectra), fused by the clicks' evidence
        (:func:`_fuse`); 0 leaves it out (the network alone). Not used by :meth:`fit_signature`.
    library_coherence : {"mf", "ace"}
        :meth:`fit_signature`: the coherence input against the library spectrum, its matched-filter
        abundance (default, unshrunk by the ridge) or ACE.
    backend_kernel : {"auto", "fused", "gemm"}
        GPU inference path: the fused CUDA kernel (default while its parameters fit in constant
        memory) or the cuBLAS GEMM formulation.
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("n_hidden", int, help="Radial-basis neurons: centres placed by k-means among the target clicks and the background.", minimum=2, maximum=1024, label="Neurons"),
        Param("whiten", str, help="How spectra are whitened before the distances: principal components of the background (pca), its full covariance (cov), or per-band scaling (std).", choices=("pca", "cov", "std"), label="Whitening"),
        Param("n_components", int, help="Principal components of the background kept by the pca whitening.", minimum=1, maximum=512, label="Components kept"),
        Param("width_scale", float, help="Multiplies every neuron's width: larger values give smoother, more tolerant scores.", minimum=0.1, maximum=20.0, label="Width factor"),
        Param("coherence", float, help="Weight of the coherence input: how well each pixel lines up with the clicks in the background-whitened space (ACE), which finds weak and sub-pixel targets; 0 uses the network alone.", minimum=0.0, maximum=100.0, label="Coherence input"),
        Param("anomaly", float, help="Weight of the anomaly input (RX, the distance from the background): where most clicks are strong anomalies, a pixel scores as a target when either the network or RX says so, so targets of materials nobody clicked are found too; where the clicks are ordinary it does not count. 0 uses the network alone.", minimum=0.0, maximum=100.0, label="Anomaly input"),
        Param("normalize", bool, help="Divide every spectrum by its norm, so brightness (shade, slope) does not change the score.", label="Ignore brightness"),
        Param("n_background", int, help="Background pixels sampled from the image (beside any you marked) to train on.", minimum=10, maximum=200000, label="Background samples"),
        Param("n_augment", int, help="Synthetic sub-pixel targets mixed from the clicks and the background, added to the training set.", minimum=0, maximum=100000, label="Synthetic sub-pixel targets"),
        Param("ridge", float, help="Ridge penalty of the output layer's least-squares fit (regularisation).", minimum=0.0, maximum=10.0, label="Regularisation"),
        Param("n_library_targets", int, help="Training from a library spectrum: synthetic sub-pixel targets mixing it with sampled background pixels (abundances from the smallest fill to 1).", minimum=0, maximum=100000, label="Library mixtures"),
        Param("min_fill", float, help="Smallest target abundance of the synthetic sub-pixel targets.", minimum=0.01, maximum=1.0, label="Smallest fill"),
        Param("seed", int, help="Seed of the background sampling and of k-means: the same seed gives the same network.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, n_hidden: int = 32, n_target_centres: int | None = None, whiten: str = "pca",
                 n_components: int = 16, n_background: int = 4000, n_augment: int = 0,
                 min_fill: float = 0.3, guard: int = 2, ridge: float = 3e-3, width_scale: float = 3.0,
                 normalize: bool = True, seed: int = 0, backend_kernel: str = "auto",
                 coherence: float = 1.0, anomaly: float = 0.5, n_library_targets: int = 1024,
                 library_coherence: str = "mf"):
        self.n_hidden = n_hidden
        self.n_target_centres = n_target_centres
        self.whiten = whiten
        self.n_components = n_components
        self.n_background = n_background
        self.n_augment = n_augment
        self.min_fill = min_fill
        self.guard = guard
        self.ridge = ridge
        self.width_scale = width_scale
        self.normalize = normalize
        self.seed = seed
        self.backend_kernel = backend_kernel
        self.coherence = coherence
        self.anomaly = anomaly
        self.n_library_targets = n_library_targets
        self.library_coherence = library_coherence

    # ------------------------------------------------------------------ training
    def _validate_params(self):
        """The rules between parameters (each parameter's type and range: :attr:`parameters`, checked by fit)."""
        c, a = float(self.coherence), float(self.anomaly)
        if (c > 0 or a > 0) and int(self.n_augment) > 0:
            raise InputError("the coherence input needs real clicks only: set n_augment to 0 or coherence to 0")
        if self.library_coherence not in ("mf", "ace"):
            raise InputError(f"library_coherence must be mf or ace, got {self.library_coherence!r}")
        if self.backend_kernel not in ("auto", "fused", "gemm"):
            raise InputError(f"backend_kernel must be auto, fused or gemm, got {self.backend_kernel!r}")

    def _background_pool(self, tgt, marked_bg, nodata, n, shape2d):
        """Pixels eligible as background.

        Takes the (sorted, host) index lists of the targets, the marked background and the no-data
        pixels among ``n``. Returns ``(explicit, stats_pool, pool)``: the pixels the user marked as
        background; a :class:`_Pool` the whitening sample is drawn from; and one of the unmarked pixels with
        data not within ``guard`` pixels of a target, which the background training sample is drawn from
        (a target's edge pixels are mixtures: as training background they would teach the network that
        the target's signature is background).

        The whitening's pool is the training pool on an image of up to ``_Pool.LIST_BELOW`` pixels, whose
        rings weigh in its statistics (5 clicks' are 0.6 % of a 100 x 100 scene: with them in, the mean AUC
        of ``scripts/quality.py``'s common-material scene fell from 0.772 to 0.764). On a larger image it
        leaves out the clicked targets alone: the rings are under 0.03 % of it, and its draw (by rejection
        from candidates that are the same for every click, :class:`_Pool`) is then the same pixels for
        every click that lands outside it, which lets the fit take the last click's whitening
        (:mod:`~hyperapp.models.rbfn_reuse`). Only the marked pixels and the targets' neighbourhoods are
        ever listed (never the whole image), so this costs the same on a 4-megapixel cube as on a small one.
        """
        explicit = np.setdiff1d(marked_bg, tgt)
        if shape2d is not None and self.guard > 0:
            # binary dilation by a cross, ``guard`` times: the diamond |dr| + |dc| <= guard
            rows, cols = shape2d
            g = int(self.guard)
            dr, dc = np.mgrid[-g:g + 1, -g:g + 1]
            keep = np.abs(dr) + np.abs(dc) <= g
            dr, dc = dr[keep], dc[keep]
            r, c = np.divmod(tgt, cols)
            rr, cc = r[:, None] + dr[None, :], c[:, None] + dc[None, :]
            ok = (rr >= 0) & (rr < rows) & (cc >= 0) & (cc < cols)
            near = np.unique((rr * cols + cc)[ok])
        else:
            near = tgt
        # no-data pixels are never drawn; the pool draws by position in the sorted list of the rest,
        # so a cube with a fill border samples the same pixels as its swath cut out
        marked = np.union1d(marked_bg, nodata)
        pool = _Pool(n, np.union1d(near, marked))
        if n <= _Pool.LIST_BELOW:  # (a listed pool's draw changes with every click anyway)
            return explicit, pool, pool
        return explicit, _Pool(n, np.union1d(tgt, marked)), pool

    #: the streamed path gathers the pixels :meth:`sample_indices` names, then calls :meth:`fit_from_pixels`
    stream_stats = "sample"
    labels_on_host = True  # sample_indices lists the marked pixels on the host
    accepts_label_lists = True  # fit takes those lists where the caller has them (label_lists=)

    def sample_indices(self, y, shape2d=None, lists=None):
        """Which pixels training reads: flat indices of the targets, of the background sample the
        whitening is estimated on, and of the background training sample, plus the random generator
        in the state training continues from. They follow from the labels alone (1 target, 0
        background, -1 unlabelled, -2 no data), so a file can be read once for just these pixels.

        The labels come to the host once (a byte per pixel) and are listed in one pass: on the device,
        each list would be a synchronising round trip, and the host work is all on a few pixels.
        ``lists``: :func:`~hyperapp.models.base.label_lists`' answer for ``y``, where the caller has it
        (a run lists the marks once; a pass over a 2048 x 2048 map costs the host 0.3-0.6 ms).
        """
        self._validate_params()
        if lists is None:
            tgt, marked_bg, nodata, n = label_lists(y)
        else:
            tgt, marked_bg, nodata, n = lists
            check_target_count(tgt.size, n)
        rng = np.random.default_rng(self.seed)
        explicit, stats_pool, pool = self._background_pool(tgt, marked_bg, nodata, n, shape2d)
        if pool.size + explicit.size < 2:
            raise ModelError("too few background pixels left after excluding the targets and their neighbours")
        stat_idx = _stats_sample(stats_pool, explicit, rng)
        n_bg = min(int(self.n_background), pool.size)
        bg_idx = np.concatenate([explicit, pool.choice(n_bg, rng)])
        return tgt, stat_idx, bg_idx, rng

    accepts_check_input = True

    #: fit takes ``score_next`` (the run scores the image it fits on next: :meth:`fit`)
    accepts_score_next = True
    #: fit takes ``kept``, a store the caller keeps with the image between fits (:meth:`fit`)
    accepts_kept = True

    def fit(self, X, y, progress=None, check_input: bool = True, label_lists=None, score_next: bool = False,
            kept: dict | None = None):
        """Train from labelled pixels (1 target, 0 background, -1 unlabelled, -2 no data);
        ``check_input=False`` skips the test for NaN and Inf outside the no-data pixels; ``label_lists``:
        the labels' lists, where the caller has them (:meth:`sample_indices`). ``score_next``: the caller
        scores ``X`` itself next, unchanged (the live click): on the GPU the score's passes over the image
        that need the whitening alone then start as soon as it is known, beside the rest of the fit
        (:class:`~hyperapp.models.rbfn_gpu.EarlyPasses`), and the next score of ``X`` takes them.
        ``kept``: a store the caller keeps with ``X`` (unchanged) from one fit to the next; what the last
        fit computed from the same sampled pixels with the same parameters is taken from it
        (:mod:`~hyperapp.models.rbfn_reuse`: a fresh fit's model, to float rounding)."""
        xp = get_namespace(X)
        P, lead = as_pixels(X)
        if check_input:
            check_finite(P, y=y)
        shape2d = lead if len(lead) == 2 else None
        tgt_idx, stat_idx, bg_idx, rng = self.sample_indices(y, shape2d, label_lists)
        reuse = Reuse(kept, self._reuse_key(P), stat_idx, bg_idx, self._background_centres(tgt_idx.size))
        # one gather (one index upload) for the sets not kept
        sets = [tgt_idx] + ([] if reuse.background else [bg_idx]) + ([] if reuse.whitening else [stat_idx])
        R = P[xp.asarray(np.concatenate(sets))]
        a = tgt_idx.size
        b = a + (0 if reuse.background else bg_idx.size)
        # (the passes are keyed on the pixels' memory: P must be X's own, not a copy)
        image = P if score_next and xp is not np and X.flags.c_contiguous else None
        self.fit_from_pixels(R[:a], None if reuse.whitening else R[b:], None if reuse.background else R[a:b], rng,
                             progress, image=image, reuse=reuse)
        return self

    def _background_centres(self, m: int) -> int:
        """How many centres the background's k-means places for ``m`` clicks: the hidden neurons less the
        target centres, of which there are at most as many as clicks."""
        nh = int(self.n_hidden)
        n_tc = self.n_target_centres if self.n_target_centres is not None else 1
        return nh - int(max(1, min(n_tc, m, nh - 1)))

    def _reuse_key(self, P) -> tuple:
        """What a kept :mod:`~hyperapp.models.rbfn_reuse` entry must match besides the sampled pixels:
        every parameter, the pixels' type and the constants the fit's sampling and centres follow."""
        return (type(self).__name__, tuple(sorted((k, repr(v)) for k, v in self.get_params().items())),
                str(P.dtype), STATS_SAMPLE, CENTRE_ITERATIONS)

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True, progress=None):
        """Train from a target spectrum (a spectral library's entry) instead of clicks.

        The target class is the spectrum itself plus ``n_library_targets`` synthetic sub-pixel targets
        f t + (1 - f) b, each mixing it with a background pixel b drawn from the image at an abundance
        f uniform in [``min_fill``, 1] (linear mixing, in the cube's own units), and any clicked
        targets in ``y``; ``undesired`` signatures (q, bands) join the background training sample.
        Everything else (whitening, sampling, centres, widths, output layer) is :meth:`fit`'s.
        """
        from hyperapp.models.base import BACKGROUND, NODATA, TARGET, UNLABELLED, sparse_flatnonzero

        self._validate_params()
        xp = get_namespace(X)
        P, lead = as_pixels(X)
        if check_input:
            check_finite(P, y=y)
        n, nb = P.shape
        t = np.asarray(to_host(target), np.float64).reshape(-1)
        if t.shape[0] != nb:
            raise InputError(f"the target spectrum has {t.shape[0]} bands, the image has {nb}")
        none = np.zeros(0, np.int64)
        tgt = bg = nodata = none
        if y is not None:
            yh = np.asarray(to_host(y)).reshape(-1).astype(np.int8)
            marked = sparse_flatnonzero(yh, UNLABELLED)
            v = yh[marked]
            tgt, bg, nodata = marked[v == TARGET], marked[v == BACKGROUND], marked[v == NODATA]
        rng = np.random.default_rng(self.seed)
        explicit, stats_pool, pool = self._background_pool(tgt, bg, nodata, n, lead if len(lead) == 2 else None)
        if pool.size + explicit.size < 2:
            raise ModelError("too few background pixels to train on")
        stat_idx = _stats_sample(stats_pool, explicit, rng)
        bg_idx = np.concatenate([explicit, pool.choice(min(int(self.n_background), pool.size), rng)])
        m = int(self.n_library_targets)
        if m < 0:
            raise InputError(f"n_library_targets must be 0 or more, got {self.n_library_targets}")
        mix_idx = pool.choice(m, rng, distinct=False) if m else none
        R = P[xp.asarray(np.concatenate([tgt, stat_idx, bg_idx, mix_idx]))].astype(xp.float32)
        a, b, c = tgt.size, tgt.size + stat_idx.size, tgt.size + stat_idx.size + bg_idx.size
        f = xp.asarray(rng.uniform(float(self.min_fill), 1.0, mix_idx.size).astype(np.float32))[:, None]
        t_dev = xp.asarray(t.astype(np.float32))
        T = xp.concatenate([t_dev[None, :], R[:a], f * t_dev[None, :] + xp.subtract(1, f) * R[c:]])
        B = R[b:c]
        if undesired is not None and np.asarray(to_host(undesired)).size:
            U = np.atleast_2d(np.asarray(to_host(undesired), np.float32))
            if U.shape[1] != nb:
                raise InputError(f"undesired signatures have {U.shape[1]} bands, the image has {nb}")
            from hyperapp.models.subspace import check_undesired_apart

            check_undesired_apart(t, U)
            B = xp.concatenate([B, xp.asarray(U)])
        self.library_targets_ = int(T.shape[0])
        self._coherence_kind = self.library_coherence
        try:
            return self.fit_from_pixels(T, R[a:b], B, rng, progress)
        finally:
            del self._coherence_kind

    def fit_from_pixels(self, T, S, B, rng, progress=None, image=None, reuse=None):
        """Train from the spectra :meth:`sample_indices` named: targets ``T``, the whitening sample
        ``S`` and the background sample ``B`` (rows, in that order); ``image``: the (n, bands) pixels the
        caller scores next, whose passes start early (:meth:`fit`'s ``score_next``); ``reuse``: a
        :class:`~hyperapp.models.rbfn_reuse.Reuse` (:meth:`fit`), whose kept whitening stands for ``S``
        and kept training background for ``B`` (each then None), and which keeps what this fit computed.

        On the GPU the fit is a few hundred small operations, and each copy between host and device
        waits for all of them: it makes three round trips (the covariances; every product the
        centres, widths and extra inputs need; the output layer's Gram matrix), and moves what goes
        the other way in one copy each.
        """
        xp = get_namespace(T)
        early = self.__dict__.pop("_early", None)  # (a refit's passes are its own)
        if early is not None:
            early.discard()
        self.__dict__.pop("_rx_kept", None)
        self.__dict__.pop("_rx_home", None)
        wh = reuse.whitening if reuse is not None else None
        bgk = reuse.background if reuse is not None else None
        #: what this fit took from an earlier fit's (:mod:`~hyperapp.models.rbfn_reuse`), for the report
        self.reused_ = tuple(name for name, v in (("whitening", wh), ("training background", bgk)) if v is not None)
        nb = T.shape[1]
        m = T.shape[0]
        # the sets in one array, the clicks and the background rows first (their projections and inner
        # products are then one operation each), normalised once; a kept set is not read
        parts = [T] + ([B] if bgk is None else []) + ([S] if wh is None else [])
        R = xp.concatenate([p.astype(xp.float32, copy=False) for p in parts]) if len(parts) > 1 \
            else T.astype(xp.float32, copy=False)
        Rn = self._normalized(R)
        n_b = int(bgk.Zb.shape[0]) if bgk is not None else int(B.shape[0])
        n_tb = m + (0 if bgk is not None else n_b)  # the rows of R that are clicks or background rows
        TBn = Rn[:n_tb]
        # the anomaly input weighs the clicks' evidence, so a library spectrum's synthetic mixtures, which
        # are no clicks, leave it out
        self.anomaly_weight_ = 0.0 if hasattr(self, "_coherence_kind") else float(self.anomaly)
        self.coherence_weight_ = float(self.coherence)
        kind = getattr(self, "_coherence_kind", "ace")
        if wh is None:
            wh, stats = self._whitenings(Rn[n_tb:], R[n_tb:], nb)
        self.mean_ = wh.mean
        # the coherence input: ACE of the normalised spectra against the clicks' mean, in the full
        # whitened space of the background (what ACE and RX see, which the leading components can miss)
        coh = _Coherence(wh.coh_w, self.mean_, TBn, m, kind, None if bgk is None else (bgk.coh_z, bgk.coh_sq)) \
            if self.coherence_weight_ else None
        if image is not None:  # (before the eigendecomposition: the GPU is idle while the host works on it)
            self._start_early_passes(image, coh if coh is not None and kind != "mf" else None, wh.coh_tri,
                                     (wh.a_mu, wh.a_w, wh.a_tri) if self.anomaly_weight_ else None, wh)
        if wh.proj is None:
            self._network_whitening(wh, stats)
        self.proj_ = wh.proj
        self.diagonal_ = self.whiten == "std"
        if progress:
            progress(0.3, "RBFN: sampling")
        # 2. training set (normalised once: the coherence input below takes the same spectra)
        Ztb = self._project_normalised(TBn)
        Zt = Ztb[:m]
        Zb = Ztb[m:] if bgk is None else bgk.Zb
        if self.n_augment > 0:
            ti = xp.asarray(rng.integers(0, Zt.shape[0], self.n_augment))
            bi = xp.asarray(rng.integers(0, Zb.shape[0], self.n_augment))
            f = xp.asarray(rng.uniform(self.min_fill, 1.0, self.n_augment).astype(np.float32))[:, None]
            Za = f * Zt[ti] + (1 - f) * Zb[bi]
            Ztrain = xp.concatenate([Zt, Za, Zb])  # the training targets, then the background rows
        else:
            Ztrain = Ztb if bgk is None else xp.concatenate([Zt, Zb])
        if progress:
            progress(0.5, "RBFN: centres")
        # 3. centres: k-means inside each class. What touches every training row stays where the
        # pixels are (on the GPU the background's k-means is one thread block, kernels/kmeans_small.cu,
        # whose seeding rounds and iterations would otherwise be host round trips, and the output
        # layer's Gram matrix is one GEMM); what works on a handful of centres and clicks runs in
        # NumPy, identically on both backends.
        k_b = self._background_centres(m)
        n_tc = int(self.n_hidden) - k_b
        km = kmeans_small(Zb, k_b, seed=self.seed + 1, n_iter=CENTRE_ITERATIONS) if bgk is None else None
        k = Zb.shape[1]
        if self.anomaly_weight_:
            # the anomaly input: RX as the classic detector computes it (raw spectra, the background's
            # full covariance), from the whitening sample; its pass over the image counts only where it counts
            z = (R[:n_tb] - wh.a_mu) @ wh.a_w  # the clicks', then the background rows' (raw spectra)
        # one copy to the host: the clicks, the centres, their counts and spreads, the coherence input's
        # products, the anomaly input's squared distances (float64 holds each)
        dev = [Zt] + ([km.centres, km.counts, km.ssq] if km is not None else [])
        if coh is not None:
            dev += coh.device
        if self.anomaly_weight_:
            dev.append((z * z).sum(axis=1))
        host = to_host_together(dev)
        Zt_h = host.pop(0).astype(np.float32)
        if km is not None:
            Cb, cnt, ssq = host.pop(0).astype(np.float32), host.pop(0), host.pop(0)
        else:
            Cb, cnt, ssq = bgk.centres, bgk.counts, bgk.ssq
        if coh is not None:
            coh.take(*host[:5])
        if self.anomaly_weight_:
            an_sq = host[-1] if bgk is None else np.concatenate([host[-1], bgk.an_sq])
        if reuse is not None:
            reuse.keep(wh, bgk if bgk is not None else TrainingBackground(
                Zb, k_b, Cb, cnt, ssq, coh.z_b if coh is not None else None, coh.sq["B"] if coh is not None else None,
                an_sq[m:] if self.anomaly_weight_ else None))
        # each centre's mean squared member distance (k where a centre has no members)
        sb = np.where(cnt > 0, ssq / np.maximum(cnt, 1), float(k)).astype(np.float32)
        gb = 1.0 / (2.0 * np.maximum(sb * float(self.width_scale) ** 2, 1e-6 * float(k)))
        if self.anomaly_weight_:
            an = anomaly_input(an_sq, nb)
            an_t, an_b = an[:m], an[m:]
        if progress:
            progress(0.7, "RBFN: output layer")
        inputs = []
        if self.coherence_weight_:
            inputs.append(tuple(self.coherence_weight_ * v for v in coh.scores()))
        self.centres_, self.gamma_, beta, net_b, cg_h = self._output_layer(Ztrain, Ztrain.shape[0] - n_b, Zt_h, Cb,
                                                                           gb, n_tc, inputs)
        self.n_bands_ = nb
        self.n_target_centres_ = n_tc
        if coh is not None:
            self.coherence_w_ = coh.W
            self.coherence_tri_ = wh.coh_tri
            self.coherence_s_ = coh.target().astype(np.float32)
            self.coherence_kind_ = kind
            if kind == "mf":  # one vector: (x - mean) W s / s.s
                sh = self.coherence_s_.astype(np.float64)
                self.coherence_mf_ = xp.asarray((to_host(coh.W).astype(np.float64) @ sh / (sh @ sh)).astype(np.float32))
        # the hidden layer has as many neurons as centres were placed: fewer than asked where the background
        # sample holds fewer distinct pixels than centres (a tiny image)
        nh = int(self.centres_.shape[0])
        self.coherence_v_ = float(beta[nh]) * self.coherence_weight_ if self.coherence_weight_ else 0.0
        scale, shift, self.anomaly_v_, self.anomaly_shift_ = 1.0, 0.0, 0.0, 0.0
        if self.anomaly_weight_:
            scale, shift, v, a_shift = _fuse(net_b, an_t, an_b)
            if v:
                self.anomaly_v_ = v * self.anomaly_weight_
                self.anomaly_shift_ = a_shift * self.anomaly_weight_
                self.anomaly_mu_, self.anomaly_w_ = wh.a_mu, wh.a_w
                self.anomaly_tri_ = wh.a_tri
            else:  # the network alone: its output as it was
                scale, shift = 1.0, 0.0
        w_h = (scale * beta[:nh]).astype(np.float32)
        self.weights_ = xp.asarray(w_h)
        self.bias_ = scale * float(beta[-1]) + shift
        self.coherence_v_ *= scale
        if xp is not np and wh.proj_h is not None:
            # the host values of what the fused scoring kernel's constants are made of, so its first
            # scoring builds them without a copy back (rbfn_gpu._upload)
            self.__dict__["_host_mirror"] = (
                (self.weights_, self.centres_, self.gamma_, self.mean_, self.proj_),
                (w_h, cg_h[0], cg_h[1], wh.host_mean, wh.proj_h))
        if progress:
            progress(1.0, "RBFN: trained")
        return self

    def _whitenings(self, Sn, S, nb: int):
        """1. The whitening sample's statistics (normalised spectra ``Sn``; where the anomaly input counts,
        the raw spectra ``S`` too, through the same pass: one GEMM over both sets of columns, one host copy)
        and, from the covariances on the host (a band covariance is decomposed there), the coherence
        input's and the anomaly input's whitenings, Cholesky factors where exact, to the device in one
        copy, so that the score's passes that need them alone can start on the GPU
        (:meth:`_start_early_passes`) before the host decomposes the network's
        (:meth:`_network_whitening`). Returns the :class:`~hyperapp.models.rbfn_reuse.Whitening` so far and
        the statistics."""
        xp = get_namespace(Sn)
        if self.anomaly_weight_:
            stats, raw = BackgroundStats.from_pixels(xp.concatenate([Sn, S], axis=1)).split(nb)
        else:
            stats = BackgroundStats.from_pixels(Sn)
        coh_w_h = _coherence_whitening(stats) if self.coherence_weight_ else None
        a_w_h = _rx_whitening(raw) if self.anomaly_weight_ else None
        firsts = to_device_together(xp, [w for w in (coh_w_h, a_w_h) if w is not None], np.float32)
        wh = Whitening(stats.mean.astype(xp.float32))
        if self.coherence_weight_:
            wh.coh_w = firsts.pop(0)
            # an inverse Cholesky factor (_coherence_whitening): the scoring kernel skips its zero half
            wh.coh_tri = isinstance(coh_w_h, np.ndarray) and upper_triangular(coh_w_h)
        if self.anomaly_weight_:
            wh.a_w = firsts.pop(0)
            wh.a_mu = raw.mean.astype(xp.float32)
            wh.a_tri = upper_triangular(a_w_h)  # an inverse Cholesky factor: half the scoring FMAs
        return wh, stats

    def _network_whitening(self, wh, stats) -> None:
        """The network's whitening from ``stats`` into ``wh`` (:meth:`_whitenings`): its projection on the
        device, and with it on the host the projection and the mean the scoring kernel's constants take."""
        xp = get_namespace(stats.cov)
        if self.whiten == "std":
            std = xp.sqrt(xp.maximum(xp.diag(stats.cov), 1e-12 * float(xp.diag(stats.cov).max()) + 1e-30))
            wh.proj = xp.diag(1.0 / std).astype(xp.float32)
            return
        proj = stats.pca_whitening(min(int(self.n_components), stats.cov.shape[0]), host=True) \
            if self.whiten == "pca" else stats.sqrt_inv_cov_on_host()
        wh.proj = xp.asarray(proj, dtype=xp.float32)
        if isinstance(proj, np.ndarray):
            wh.proj_h = proj.astype(np.float32)
            wh.host_mean = stats.host_mean.astype(np.float32)

    def _start_early_passes(self, image, coh, coh_tri: bool, anomaly, wh=None) -> None:
        """Start, on the GPU, the score's passes over ``image`` that need the whitening alone: the coherence
        input's ACE (``coh``, None where it is not ACE) and the anomaly input's RX (``anomaly``: its mean,
        whitening and whether that is triangular; None without it). Whether RX counts is known only at the
        fit's end (:func:`_fuse`); its pass runs beside the fit either way. RX depends on the whitening and
        the image alone: its map is kept with the whitening ``wh`` (:mod:`~hyperapp.models.rbfn_reuse`), and
        a later fit on the same image with the same whitening hands that map to its score instead. Below
        :data:`~hyperapp.models.rbfn_gpu.EARLY_MIN_VALUES` no pass starts, but the kept map is still handed
        on, and where there is none the score keeps the one it computes (``_rx_home``)."""
        xp = get_namespace(image)
        if xp is np or not classic.FUSED_QUAD or image.dtype != xp.float32 or (coh is None and anomaly is None):
            return
        from hyperapp.models import rbfn_gpu
        from hyperapp.models.rbfn_gpu import EarlyPasses, image_key

        key = image_key(image)
        if anomaly is not None and wh is not None:
            if wh.rx_map is not None and wh.rx_map[0] == key:
                self.__dict__["_rx_kept"] = wh.rx_map
                anomaly = None
            else:  # (the score keeps the map it computes with the whitening: _add_coherence_fused)
                self.__dict__["_rx_home"] = (key, wh)
        if image.size < rbfn_gpu.EARLY_MIN_VALUES:  # (small images: the score's own passes cost less)
            return

        jobs = {}  # (an optimisation: where they cannot start, the score computes them as before)
        if coh is not None:
            jobs["ace"] = (self.mean_, coh.W, ACE_MODE, _ace_direction(coh.W, coh.s), 1.0, bool(self.normalize),
                           coh_tri)
        if anomaly is not None:
            jobs["rx"] = (anomaly[0], anomaly[1], RX_MODE, None, 0.0, False, anomaly[2])
        if not jobs:
            return
        try:
            early = self.__dict__["_early"] = EarlyPasses(image, jobs)
        except Exception:  # (out of memory beside the fit, say: the score's own passes then)
            return
        if "rx" in jobs and wh is not None:  # (read only after its event: _add_coherence_fused)
            wh.rx_map = (key, early.result("rx"), early.done)
            self.__dict__.pop("_rx_home", None)

    def _output_layer(self, Ztrain, n_t, Zt, Cb, gb, n_tc, inputs):
        """Target centres and widths from the clicks ``Zt`` (host), then the output weights and
        threshold by class-balanced ridge regression on the hidden activations of the training rows
        ``Ztrain`` (on their device: the ``n_t`` training targets, then the background rows), and the
        extra ``inputs`` (each a pair of the clicks' and the background rows' values, host; the coherence
        input). Returns the centres and gamma on the pixels' device, beta = [w_hidden, w_inputs...,
        bias] on the host, the network's mean and standard deviation over the background rows, and
        (centres, gamma) on the host."""
        xp = get_namespace(Ztrain)
        Ct, lt = (Zt.mean(axis=0, keepdims=True), np.zeros(Zt.shape[0], int)) if n_tc == 1 else \
            kmeans(Zt, n_tc, seed=self.seed)
        dtb = sq_distances(Ct, Cb).min(axis=1)
        st_spread = np.array([((Zt[lt == i] - Ct[i]) ** 2).sum(axis=1).mean() for i in range(Ct.shape[0])])
        st = np.maximum(dtb / 4.0, st_spread) * float(self.width_scale) ** 2
        gt = 1.0 / (2.0 * np.maximum(st, 1e-6 * float(Zt.shape[1])))
        centres = np.concatenate([Ct, Cb]).astype(np.float32)
        gamma = np.concatenate([gt, gb]).astype(np.float32)
        # the design matrix transposed, (inputs, rows): hidden outputs, the coherence input, ones;
        # targets are its first n_t columns, and each class carries half the weight
        n_b = Ztrain.shape[0] - n_t
        # centres, widths and the extra inputs go to the pixels' device in one copy; centres and widths
        # stay as the fitted state
        up = to_device_together(xp, [centres, gamma] + [np.concatenate(e)[None, :] for e in inputs], np.float32)
        rows = [_hidden_design(Ztrain, up[0], up[1])]
        rows += [e.astype(xp.float64) for e in up[2:]]  # (no synthetic targets then: _validate_params)
        rows.append(xp.ones((1, n_t + n_b)))
        AT = xp.concatenate(rows)
        At, Ab = AT[:, :n_t], AT[:, n_t:]
        # one copy of the two classes' small products (the class weights are applied on the host); their last
        # columns, the products with the ones row, are each class's sums (the background's give the network's
        # mean and spread over it from beta on the host)
        Gt, Gb = to_host_together([At @ At.T, Ab @ Ab.T])
        st_, sb_ = Gt[:, -1], Gb[:, -1]
        G = Gt * (0.5 / n_t) + Gb * (0.5 / n_b)
        rhs = st_ * (0.5 / n_t)
        pen = float(self.ridge) * float(np.trace(G[:-1, :-1])) / max(AT.shape[0] - 1, 1) + 1e-12
        reg = np.eye(AT.shape[0]) * pen
        reg[-1, -1] = 0.0
        if inputs and getattr(self, "_coherence_kind", "ace") == "mf":
            reg[-2, -2] = 0.0  # the library's abundance input (MF) is one linear term: not shrunk
        beta = np.linalg.solve(G + reg, rhs)
        # the network's output over the background rows, beta . a: its mean beta . sum(a) / n and its
        # mean square beta^T (sum a a^T / n) beta, from the products already here
        mean = float(beta @ sb_) / n_b
        var = max(float(beta @ Gb @ beta) / n_b - mean * mean, 0.0)
        return up[0], up[1], beta, (mean, float(np.sqrt(var))), (centres, gamma)

    # ------------------------------------------------------------------ forward pass
    def _normalized(self, P):
        xp = get_namespace(P)
        P = P.astype(np.float32, copy=False)
        if not self.normalize:
            return P
        if xp is not np:  # one reduction and one elementwise pass instead of six operations
            return _centred_normalised(P, None, True)
        n = xp.sqrt((P * P).sum(axis=1, keepdims=True))
        return P / xp.where(xp.greater(n, 0), n, 1)  # a ufunc where an operand is a scalar: hyperapp.core.backend, scalar operators

    def _project(self, P):
        return self._project_normalised(self._normalized(P))

    def _project_normalised(self, Pn):
        """Whitened coordinates of spectra :meth:`_normalized` already made."""
        return (Pn - self.mean_) @ self.proj_


    def _score_reference(self, P):
        """The forward pass on whichever array module P lives (NumPy path, and the GPU GEMM path)."""
        xp = get_namespace(P)
        out = xp.empty(P.shape[0], dtype=xp.float32)
        for i in range(0, P.shape[0], CHUNK):
            Z = self._project(P[i:i + CHUNK])
            out[i:i + CHUNK] = self.weights_ @ _hidden_t(Z, self.centres_, self.gamma_) + self.bias_
        return out

    def _add_coherence(self, P, out, network=None, early=None):
        """Add the coherence input's term (ACE in the whitened space of normalised spectra,
        :class:`_Coherence`), then take the larger of that and the anomaly input's (RX of the raw spectra,
        :func:`anomaly_input`), each where its weight is not 0, in place; ``network`` (an array like
        ``out``), if given, receives the network's output before the anomaly input joins it."""
        xp = get_namespace(P)
        if xp is not np and classic.FUSED_QUAD and P.dtype == xp.float32:
            return self._add_coherence_fused(P, out, network, early)
        step = CHUNK if xp is np else GPU_CHUNK
        for i in range(0, P.shape[0], step):
            if self.coherence_v_:
                if xp is np:
                    D = self._normalized(P[i:i + step]) - self.mean_
                else:  # the same numbers in two passes over the chunk instead of six
                    D = _centred_normalised(P[i:i + step].astype(xp.float32, copy=False), self.mean_,
                                            self.normalize)
                if getattr(self, "coherence_kind_", "ace") == "mf":
                    out[i:i + step] += self.coherence_v_ * (D @ self.coherence_mf_)
                else:
                    out[i:i + step] += self.coherence_v_ * whitened_rows(D @ self.coherence_w_, self.coherence_s_,
                                                                         ACE_MODE)
            if network is not None:
                network[i:i + step] = out[i:i + step]
            if getattr(self, "anomaly_v_", 0.0):  # (models saved before it have none)
                Zr = (P[i:i + step].astype(xp.float32, copy=False) - self.anomaly_mu_) @ self.anomaly_w_
                a = xp.multiply(anomaly_input(whitened_rows(Zr, None, RX_MODE), Zr.shape[1]), self.anomaly_v_)
                a = xp.add(a, getattr(self, "anomaly_shift_", 0.0))
                out[i:i + step] = xp.maximum(out[i:i + step], a)  # either input may call a pixel a target
        return out

    def _add_coherence_fused(self, P, out, network=None, early=None):
        """:meth:`_add_coherence` on the GPU with :func:`~hyperapp.models.classic.quad_rows`: the coherence
        input's ACE (normalisation, centring, whitening and the row reductions) in one kernel reading each
        pixel once, and the anomaly input's RX in another (half the FMAs: its whitening is triangular); no
        whitened copy of the cube is made. Where the fit started these passes on ``P`` already
        (``early``, :meth:`_start_early_passes`), their results are taken instead."""
        xp = get_namespace(P)
        early = early.take(P) if early is not None else {}
        if self.coherence_v_:
            if getattr(self, "coherence_kind_", "ace") == "mf":  # one vector: chunks, as the cuBLAS path
                for i in range(0, P.shape[0], GPU_CHUNK):
                    D = _centred_normalised(P[i:i + GPU_CHUNK], self.mean_, self.normalize)
                    out[i:i + GPU_CHUNK] += self.coherence_v_ * (D @ self.coherence_mf_)
            else:
                ace = early.get("ace")
                if ace is None:
                    key = (self.coherence_w_, self.coherence_s_)
                    cached = self.__dict__.get("_quad_v")
                    if cached is None or any(a is not b for a, b in zip(cached[0], key)):
                        self.__dict__["_quad_v"] = cached = (key, _ace_direction(self.coherence_w_,
                                                                                 self.coherence_s_))
                    ace = quad_rows(P, self.mean_, self.coherence_w_, ACE_MODE, v=cached[1], ss=1.0,
                                    normalize=self.normalize, tri=getattr(self, "coherence_tri_", False))
                out += xp.multiply(ace, self.coherence_v_)
        if network is not None:
            network[...] = out
        if getattr(self, "anomaly_v_", 0.0):
            from hyperapp.models.rbfn_gpu import _event_on, image_key

            rx = early.get("rx")
            kept = self.__dict__.get("_rx_kept")
            if rx is None and kept is not None and kept[0] == image_key(P):
                xp.cuda.get_current_stream().wait_event(kept[2])  # (made on another stream: rbfn_reuse)
                rx = kept[1]
            if rx is None:
                rx = quad_rows(P, self.anomaly_mu_, self.anomaly_w_, RX_MODE, tri=getattr(self, "anomaly_tri_", False))
                home = self.__dict__.pop("_rx_home", None)
                if home is not None and home[0] == image_key(P) and home[1].rx_map is None:
                    # kept with the whitening, for the next fit that takes it (rbfn_reuse)
                    home[1].rx_map = (home[0], rx, _event_on(xp.cuda.get_current_stream()))
            a = xp.add(xp.multiply(anomaly_input(rx, self.anomaly_w_.shape[1]), self.anomaly_v_),
                       getattr(self, "anomaly_shift_", 0.0))
            xp.maximum(out, a, out=out)  # either input may call a pixel a target
        return out

    def decision_function(self, X):
        """RBFN output for every pixel (higher = more target-like)."""
        return self._scores(X, None)

    def score_maps(self, X):
        """The scores, and where the anomaly input counts, the network's own output beside them under
        :data:`~hyperapp.models.evaluation.MODE_SCORES` (not an output: the default threshold takes
        its separate mode of targets from it, :func:`~hyperapp.models.evaluation.far_threshold`)."""
        from hyperapp.models.evaluation import MODE_SCORES

        if not getattr(self, "anomaly_v_", 0.0):
            return self.decision_function(X), {}
        xp = get_namespace(X)
        network = xp.empty(X.shape[:-1], xp.float32).reshape(-1)
        scores = self._scores(X, network)
        return scores, {MODE_SCORES: network.reshape(X.shape[:-1])}

    def _scores(self, X, network):
        self._check_fitted()
        P, lead = as_pixels(X)
        if P.shape[1] != self.n_bands_:
            raise ModelError(f"image has {P.shape[1]} bands, the RBFN was trained on {self.n_bands_}")
        # the fit's early passes: taken by this score where they are of P, else let go of (every branch)
        early = self.__dict__.pop("_early", None)
        try:
            return self._scores_with(P, lead, network, early)
        finally:
            if early is not None:
                early.discard()

    def _scores_with(self, P, lead, network, early):
        xp = get_namespace(P)
        out = None
        if xp is not np and self.backend_kernel != "gemm":
            from hyperapp.models.rbfn_gpu import fused_fits, score_fused

            if self.backend_kernel == "fused" or fused_fits(self):
                out = score_fused(self, P)
        if out is None:
            out = self._score_reference(P)
        if getattr(self, "coherence_v_", 0.0) or getattr(self, "anomaly_v_", 0.0):
            self.coherence_v_ = getattr(self, "coherence_v_", 0.0)
            out = self._add_coherence(P, out, network, early)
        return out.reshape(lead)

    def __copy__(self):
        """A shallow copy that does not take this fit's early passes (:meth:`_start_early_passes`)."""
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        new.__dict__.pop("_early", None)
        return new

    # ------------------------------------------------------------------ persistence
    def to_host(self) -> RBFN:
        """A copy whose fitted arrays are NumPy (for saving, or scoring on the CPU)."""
        from hyperapp.models.base import fitted_on

        return fitted_on(self, np)
