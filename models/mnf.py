"""Minimum noise fraction (MNF), and the mixture-tuned detectors that work in its space: MTMF, MTTCIMF.

**MNF** (Green et al. 1988; Lee, Woodyatt and Berman 1990), as ``spectral.mnf``: the noise covariance
Σn comes from differences of neighbouring pixels (``spectral.noise_from_diffs``: half the covariance of
x(r, c) - x(r+1, c+1)), the signal covariance Σ from every pixel; with Wn = Σn^{-1/2}, the eigenvectors
V of Wn Σ Wn (eigenvalues λ, descending) give the components y = Vᵀ Wn (x - μ). In that space the
noise is white with unit variance and the image's covariance is diag(λ): λ = 1 + SNR per component.

**MTMF** (Boardman 1998, "Leveraging the high dimensionality of AVIRIS data for improved sub-pixel
target unmixing and rejection of false positives: mixture tuned matched filtering"): in the leading
``n_components`` MNF components, with s = Vᵀ Wn (t - μ) the target:

* the matched-filter score (the abundance estimate) α = yᵀΛ⁻¹s / sᵀΛ⁻¹s;
* the **infeasibility**: how far, in noise-sigma units, y lies from the mixture of background and
  target at that abundance. A mixture with abundance α has mean αs and, component by component, the
  standard deviation interpolated between the background's (√λ, at α = 0) and the pure target's
  (the noise: 1, at α = 1): σ_α = (1 - α)√λ + α, with α clipped to [0, 1] there. Infeasibility
  = ||(y - αs) / σ_α||. A real sub-pixel target has a high score *and* a low infeasibility; a false
  positive (a pixel merely bright along s) has a high infeasibility.

**MTTCIMF** (Jin, Paswaters and Cline 2009): the same with the abundance from TCIMF in MNF space (the
centred data's correlation there is Λ, so w = Λ⁻¹M (MᵀΛ⁻¹M)⁻¹ [1; 0]), suppressing undesired
signatures given from a library, ROI classes, or found by ATGP.

The transform is one GEMM over the pixels (cuBLAS on the GPU); the scores and the infeasibility are
element-wise over the kept components (Λ is diagonal), chunked.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import InputError, ModelError
from hyperapp.models.base import (
    TARGET,
    Estimator,
    Param,
    PixelDetector,
    TransformedDetector,
    as_pixels,
    check_finite,
    check_not_identical,
    check_target_apart,
    float_dtype,
    labelled_target_mean,
)
from hyperapp.models.stats import BackgroundStats
from hyperapp.models.subspace import N_UNDESIRED, _signature_matrix, _streamed_signatures, atgp, tcimf_weights

DIRECTIONS = ("lowerright", "lowerleft", "right", "lower")
CHUNK = 1 << 18
GPU_CHUNK = 1 << 20


def shift_differences(X, direction: str = "lowerright"):
    """Differences of neighbouring pixels of an image (rows, cols, bands), flattened to (n, bands), as
    ``spectral.noise_from_diffs`` takes them."""
    if X.ndim != 3:
        raise InputError("MNF needs the image as (rows, cols, bands): the noise comes from neighbouring pixels")
    d = neighbour_differences(X, direction)
    if d.shape[0] < 2:
        raise InputError(f"the image ({X.shape[0]} x {X.shape[1]}) is too small to estimate the noise")
    return d


def neighbour_differences(X, direction: str = "lowerright"):
    """:func:`shift_differences` of any block of rows (rows, cols, bands), however few: (n, bands), n
    possibly 0. The streamed fit feeds it each tile, and the two rows across each tile boundary."""
    if direction not in DIRECTIONS:
        raise InputError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if direction == "lowerright":
        d = X[:-1, :-1, :] - X[1:, 1:, :]
    elif direction == "lowerleft":
        d = X[:-1, 1:, :] - X[1:, :-1, :]
    elif direction == "right":
        d = X[:, :-1, :] - X[:, 1:, :]
    else:
        d = X[:-1, :, :] - X[1:, :, :]
    return d.reshape(-1, X.shape[2])


def _snr(eigenvalue: float) -> float:
    """A component's signal-to-noise ratio from its MNF eigenvalue ((signal + noise) / noise): never below
    0, where estimation put the eigenvalue under 1 (a reported SNR of -1 read as a sentinel)."""
    return max(float(eigenvalue) - 1.0, 0.0)


class MNF(Estimator):
    """Minimum noise fraction transform (noise from shift differences), as ``spectral.mnf``.

    Parameters
    ----------
    n_components : int
        Components :meth:`transform` keeps; 0 keeps those whose SNR (eigenvalue - 1) is at least
        ``snr_min`` (at least 2).
    snr_min : float
        The SNR the automatic choice keeps components down to.
    direction : {"lowerright", "lowerleft", "right", "lower"}
        Which neighbour the noise differences are taken with.
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("n_components", int, help="Component images written; 0 keeps those whose signal-to-noise ratio (eigenvalue - 1) is at least the SNR below.", minimum=0, maximum=1024, label="Components (0 = by SNR)"),
        Param("snr_min", float, help="With 0 components: the smallest signal-to-noise ratio kept.", minimum=0.0, maximum=1e6, label="SNR kept down to"),
        Param("direction", str, help="Which neighbour the noise is estimated from (shift differences).", choices=("lowerright", "lowerleft", "right", "lower"), label="Noise from neighbour"),
    )

    def __init__(self, n_components: int = 0, snr_min: float = 1.0, direction: str = "lowerright"):
        self.n_components = n_components
        self.snr_min = snr_min
        self.direction = direction

    def fit(self, X, y=None):
        """Fit on an image (rows, cols, bands); ``y`` is ignored (MNF needs no labels)."""
        xp = get_namespace(X)
        check_finite(X)
        # a constant cube has no signal and no noise: every eigenvalue 0, components of zeros, said as a
        # result ("2 of 16 kept, SNR 0") where every other analysis refuses it
        check_not_identical(X.reshape(-1, X.shape[-1]), "separate signal from noise in")
        work = xp.float64 if X.dtype == xp.float64 else xp.float32
        X = X.astype(work, copy=False)
        # (the sums are float64, as every background statistic's: the components past the SNR cut have
        # eigenvalues within a few per cent of each other, and TCIMF in MNF space weighs them)
        noise = BackgroundStats.from_pixels(shift_differences(X, self.direction))
        signal = BackgroundStats.from_pixels(X.reshape(-1, X.shape[2]))
        return self.fit_from_stats(signal, noise)

    def fit_from_stats(self, signal: BackgroundStats, noise: BackgroundStats):
        """Fit from the image's statistics and its neighbour differences' (:func:`shift_differences`);
        the noise covariance is half the differences' (the streamed path sums both tile by tile)."""
        # a ufunc where an operand is a scalar: hyperapp.core.backend, scalar operators
        noise = BackgroundStats(noise.mean, get_namespace(noise.cov).divide(noise.cov, 2.0), noise.n)
        Wn = np.asarray(to_host(noise.sqrt_inv_cov), np.float64)
        S = np.asarray(to_host(signal.cov), np.float64)
        C = Wn @ S @ Wn
        lam, V = np.linalg.eigh((C + C.T) / 2)
        order = np.argsort(lam)[::-1]
        lam, V = lam[order], V[:, order]
        # signs fixed so each component's largest loading is positive (eigenvectors are unique up to sign)
        big = np.abs(V).argmax(axis=0)
        V = V * np.sign(V[big, np.arange(V.shape[1])])
        k = int(self.n_components)
        if k > lam.size:  # as --mnf refuses it (it was cut to the band count without a word)
            raise InputError(f"n_components {k} is more than the {lam.size} bands")
        if k == 0:
            k = max(2, int(np.count_nonzero(lam - 1.0 >= float(self.snr_min))))
        xp = get_namespace(signal.cov)
        self.eigenvalues_ = lam
        self.mean_ = signal.mean
        self.noise_cov_ = noise.cov
        self.transform_full_ = Wn @ V  # (bands, bands): columns are the components
        self.mean32_ = xp.asarray(to_host(signal.mean).astype(np.float32))
        return self.keep(k)

    def keep(self, k: int):
        """Keep the leading ``k`` components (at most the bands) for :meth:`transform`; returns self."""
        k = min(int(k), self.transform_full_.shape[1])
        self.n_components_ = k
        xp = get_namespace(self.mean32_)
        self.components_ = xp.asarray(self.transform_full_[:, :k].astype(np.float32))
        return self

    def transform(self, X, n_components: int | None = None):
        """MNF components of the pixels of ``X`` (image or (n, bands)): (..., k) float32, one GEMM."""
        self._check_fitted()
        P, lead = as_pixels(X)
        xp = get_namespace(P)
        A = self.components_ if n_components is None else xp.asarray(
            self.transform_full_[:, :int(n_components)].astype(np.float32))
        out = xp.empty((P.shape[0], A.shape[1]), xp.float32)
        step = CHUNK if xp is np else GPU_CHUNK
        for i in range(0, P.shape[0], step):
            out[i:i + step] = (P[i:i + step].astype(xp.float32, copy=False) - self.mean32_) @ A
        return out.reshape(*lead, A.shape[1])

    # ---------------------------------------------------------------- analysis output
    def summary(self) -> dict:
        lam = self.eigenvalues_
        return {"n_components": int(self.n_components_), "eigenvalues": [float(v) for v in lam],
                "snr": [_snr(v) for v in lam], "direction": self.direction}

    def tables(self) -> dict:
        rows = [[i + 1, float(v), _snr(v), "yes" if i < self.n_components_ else "no"]
                for i, v in enumerate(self.eigenvalues_)]
        return {"eigenvalues": (["component", "eigenvalue", "snr", "kept"], rows)}

    def arrays(self) -> dict:
        return {"transform": self.transform_full_, "mean": to_host(self.mean_)}

    def images(self, X) -> dict:
        """The kept components as an image (rows, cols, k): the analysis's component images."""
        return {"components": self.transform(X)}


class _MixtureTuned(PixelDetector):
    """Shared MNF fit, scoring and infeasibility of MTMF and MTTCIMF."""

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("n_components", int, help="MNF components the filter works in; 0 keeps those whose signal-to-noise ratio (eigenvalue - 1) is at least the SNR below.", minimum=0, maximum=1024, label="MNF components (0 = by SNR)"),
        Param("snr_min", float, help="With 0 components: the smallest signal-to-noise ratio of a component kept.", minimum=0.0, maximum=1e6, label="SNR kept down to"),
    )

    accepts_check_input = True
    #: the streamed path sums the image's statistics and its neighbour differences' (:meth:`fit_from_stats`)
    stream_stats = "mnf"

    def fit(self, X, y, check_input: bool = True, undesired=None):
        _, _, y, t = labelled_target_mean(X, y, check_input)
        return self.fit_signature(X, t, y=y, undesired=undesired, check_input=False)

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True):
        """Fit from a target spectrum (bands,), the MNF from the image ``X`` (rows, cols, bands)."""
        if X.ndim != 3:
            raise InputError(f"{type(self).__name__} needs the image as (rows, cols, bands) for its MNF")
        if check_input:
            check_finite(X)
        self.mnf_ = MNF(self.n_components, self.snr_min).fit(X)
        xp = get_namespace(X)
        D, U = _signature_matrix(target, undesired, X.shape[2])
        self.target_ = D[:, 0]
        if self.uses_undesired and U.shape[1] == 0 and int(self.n_undesired) > 0:
            P = X.reshape(-1, X.shape[2])
            exclude = None if y is None else xp.flatnonzero(xp.equal(xp.asarray(y).reshape(-1), TARGET))
            Uf, self.undesired_pixels_ = atgp(P, int(self.n_undesired), start=D.T, exclude=exclude)
            U = Uf.T
            self.undesired_source_ = "ATGP"
        else:
            self.undesired_source_ = "given" if U.shape[1] else "none"
        self.undesired_ = U.T
        return self._fit_filter(D, U, float_dtype(X), xp)

    def fit_from_stats(self, signal: BackgroundStats, noise: BackgroundStats, target_mean, dtype=np.float32,
                       undesired=None):
        """Fit from the image's statistics, its neighbour differences' (:meth:`MNF.fit_from_stats`), the
        target spectrum and given undesired signatures (the streamed path: ATGP needs every pixel)."""
        self.mnf_ = MNF(self.n_components, self.snr_min).fit_from_stats(signal, noise)
        D, U = _streamed_signatures(self, target_mean, undesired if self.uses_undesired else None)
        return self._fit_filter(D, U, dtype, get_namespace(signal.cov))

    def _fit_filter(self, D, U, dtype, xp):
        """The abundance filter in the fitted MNF space from the (bands, p) targets and (bands, q)
        undesired signatures; its arrays on ``xp``'s device."""
        mnf = self.mnf_
        bands = mnf.transform_full_.shape[0]
        n_sig = D.shape[1] + (U.shape[1] if self.uses_undesired else 0)
        if mnf.n_components_ < 2 * n_sig:
            # TCIMF solves with the (p + q) x (p + q) matrix MᵀΛ⁻¹M, singular when the kept components
            # are fewer than the signatures and ill-conditioned when barely more (the filter then
            # amplifies float32 rounding: the GPU and NumPy differed by 2 % with one spare component):
            # keep twice as many components as signatures (the eigenvalues past the SNR cut are still
            # >= 1, so the extra components are noise-whitened, not empty)
            if n_sig >= bands:
                raise InputError(f"{type(self).__name__} needs fewer signatures ({n_sig}: targets and "
                                 f"undesired) than bands ({bands})")
            if int(self.n_components) and int(self.n_components) <= n_sig:
                raise InputError(f"{type(self).__name__} with {n_sig} signatures (targets and undesired) "
                                 f"needs more than {n_sig} MNF components, got {self.n_components}")
            if not int(self.n_components):
                mnf.keep(2 * n_sig)
        k = mnf.n_components_
        A = mnf.transform_full_[:, :k]
        mu = np.asarray(to_host(mnf.mean_), np.float64)
        s = (D[:, 0] - mu) @ A
        lam = mnf.eigenvalues_[:k]
        varies = np.isfinite(lam) & (lam > 1e-9 * max(float(np.max(lam)), 1e-300))
        if not varies.all():
            # a component with no variance (flat, identical or too few spectra): dividing by its eigenvalue
            # gave scores of 1e10 and an infeasibility of NaN
            n_ok = int(np.count_nonzero(varies))
            raise ModelError(f"{type(self).__name__}: the image's spectra vary in only {n_ok} of the {k} MNF "
                             "components it uses (flat or identical spectra, or too few pixels)")
        check_target_apart(float(s @ (s / lam)), k, type(self).__name__)
        if self.uses_undesired:
            Ms = np.concatenate([(D - mu[:, None]).T @ A, (U - mu[:, None]).T @ A]).T  # (k, p + q)
            w = tcimf_weights(np.diag(1.0 / lam), Ms[:, :D.shape[1]], Ms[:, D.shape[1]:])
        else:
            w = (s / lam) / float(s @ (s / lam))
        self.s_ = xp.asarray(s.astype(dtype))
        self.w_ = xp.asarray(w.astype(dtype))
        self.sqrt_lam_ = xp.asarray(np.sqrt(lam).astype(dtype))
        self.n_bands_ = bands
        return self

    def score_maps(self, X):
        """(scores, {"infeasibility": ...}) of every pixel: the abundance estimate and Boardman's
        infeasibility (noise-sigma units), from one MNF transform per chunk."""
        self._check_fitted()
        P, lead = as_pixels(X)
        if P.shape[1] != self.n_bands_:
            raise InputError(f"image has {P.shape[1]} bands, the detector was fitted on {self.n_bands_}")
        xp = get_namespace(P)
        score = xp.empty(P.shape[0], self.w_.dtype)
        infeas = xp.empty(P.shape[0], self.w_.dtype)
        step = CHUNK if xp is np else GPU_CHUNK
        one = self.w_.dtype.type(1)
        for i in range(0, P.shape[0], step):
            Y = self.mnf_.transform(P[i:i + step])
            a = Y @ self.w_
            ac = xp.clip(a, 0, 1)[:, None]
            sigma = xp.subtract(one, ac) * self.sqrt_lam_ + ac  # ufuncs with scalars: hyperapp.core.backend
            r = (Y - a[:, None] * self.s_) / sigma
            score[i:i + step] = a
            infeas[i:i + step] = xp.sqrt((r * r).sum(axis=1))
        return score.reshape(lead), {"infeasibility": infeas.reshape(lead)}

    def decision_function(self, X):
        return self.score_maps(X)[0]

    def infeasibility(self, X):
        return self.score_maps(X)[1]["infeasibility"]


class MTMF(_MixtureTuned):
    """Mixture-tuned matched filter (Boardman 1998): MF score and infeasibility in MNF space.

    Parameters
    ----------
    n_components : int
        MNF components used (0: those with SNR >= ``snr_min``).
    snr_min : float
    """

    uses_undesired = False

    def __init__(self, n_components: int = 0, snr_min: float = 1.0):
        self.n_components = n_components
        self.snr_min = snr_min
        self.n_undesired = 0


class MTTCIMF(_MixtureTuned):
    """Mixture-tuned TCIMF (Jin, Paswaters and Cline 2009): TCIMF score and infeasibility in MNF space.

    Parameters
    ----------
    n_components : int
    snr_min : float
    n_undesired : int
        Undesired signatures ATGP finds when none are given (0: none).
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = _MixtureTuned.parameters + (N_UNDESIRED,)

    uses_undesired = True

    def __init__(self, n_components: int = 0, snr_min: float = 1.0, n_undesired: int = 8):
        self.n_components = n_components
        self.snr_min = snr_min
        self.n_undesired = n_undesired


class InMNF(TransformedDetector):
    """Any pixel detector run in MNF space: the image's leading MNF components stand in for its bands, and
    a target or undesired spectrum is transformed the same way (ENVI's "run the detector on the MNF
    image"). Fitted on the image (rows, cols, bands), scored on the same bands.

    Parameters
    ----------
    detector : PixelDetector
        The unfitted detector (its own parameters as set).
    n_components : int
        MNF components kept (0: those with SNR >= ``snr_min``).
    snr_min : float
    """

    accepts_check_input = True

    def __init__(self, detector=None, n_components: int = 0, snr_min: float = 1.0):
        self.detector = detector
        self.n_components = n_components
        self.snr_min = snr_min
        self.uses_targets = getattr(detector, "uses_targets", True)
        self.uses_undesired = getattr(detector, "uses_undesired", False)
        self.labels_on_host = getattr(detector, "labels_on_host", False)

    def _space(self, X):
        if X.ndim != 3:
            raise InputError("a detector in MNF space needs the image as (rows, cols, bands)")
        self.mnf_ = MNF(self.n_components, self.snr_min).fit(X)
        self.n_bands_ = X.shape[2]
        return self.mnf_.transform(X)

    def _spectra(self, S):
        """Spectra (k, bands) or (bands,) on the host, in MNF coordinates (host float64)."""
        if S is None:
            return None
        S = np.asarray(to_host(S), np.float64)
        A = self.mnf_.transform_full_[:, :self.mnf_.n_components_]
        return (S - np.asarray(to_host(self.mnf_.mean_), np.float64)) @ A

    def fit(self, X, y=None, check_input: bool = True, **kw):
        Z = self._space(X)
        fit_kw = {"check_input": False} if getattr(self.detector, "accepts_check_input", False) else {}
        self.detector_ = self.detector.fit(Z, y, **fit_kw)
        return self

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True, **kw):
        Z = self._space(X)
        xp = get_namespace(Z)
        self.detector_ = self.detector.fit_signature(Z, xp.asarray(self._spectra(target)), y=y,
                                                     undesired=self._spectra(undesired), check_input=False)
        return self

    def _transform(self, X):
        self._check_fitted()
        P, lead = as_pixels(X)
        if P.shape[1] != self.n_bands_:
            raise InputError(f"image has {P.shape[1]} bands, the detector was fitted on {self.n_bands_}")
        return self.mnf_.transform(X)
