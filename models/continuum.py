"""Continuum removal: every spectrum divided by its upper convex hull over wavelength (ENVI's Continuum Removal).

The continuum of a spectrum is the least concave function above it: the upper convex hull of its points
(wavelength, value), joined by straight lines. Dividing by it leaves 1 where the spectrum touches its hull and
the depth of each absorption feature below 1 elsewhere, so detectors compare absorption shapes rather than
brightness and slope. Pixel detectors take it as a transform of the pixels and of the target spectra alike.

On the GPU one thread finds one spectrum's hull by Andrew's monotone chain (``kernels/continuum.cu``). On the
CPU (and as the GPU's reference) the hulls are found for every spectrum at once, with no loop over pixels: from
the first band, each step jumps every spectrum to its next hull vertex, the band of largest slope from the
current vertex (the farthest such band where slopes tie: collinear points lie on the hull's segment either
way). That loop runs once per vertex of the spectrum with the most, over the spectra not yet at the last band
(15 steps at most on abu-airport-1's 205 bands). The vertices then give each band its segment's two ends, and
the continuum is their straight line.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace
from hyperapp.core.errors import InputError
from hyperapp.models.base import TransformedDetector, as_pixels, check_finite, float_dtype

#: spectra per step on the CPU and on the GPU: bounds the (spectra, bands) temporaries (a few of float64 and
#: int64 each, about 50 MB at 224 bands on the CPU, 1.8 GB on the GPU)
CHUNK = 1 << 14
GPU_CHUNK = 1 << 17


def band_positions(wavelengths, bands: int) -> np.ndarray:
    """The abscissa of each band (float64, host): the wavelengths, or the band index 0, 1, ... when there
    are none (``None``). Raises :class:`~hyperapp.core.errors.InputError` for a count that is not ``bands``, a
    value that is not finite, or a wavelength given twice."""
    if wavelengths is None:
        return np.arange(bands, dtype=np.float64)
    try:
        x = np.asarray(wavelengths, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"continuum removal needs numeric wavelengths, got {wavelengths!r}") from exc
    if x.size != bands:
        raise InputError(f"continuum removal got {x.size} wavelengths for {bands} bands")
    if not np.isfinite(x).all():
        raise InputError("continuum removal needs finite wavelengths; a band's wavelength is NaN or infinite")
    s = np.sort(x)
    if bands > 1 and not (np.diff(s) > 0).all():
        dup = s[:-1][np.diff(s) <= 0][0]
        raise InputError(f"continuum removal needs distinct wavelengths: {dup:g} is given to more than one band")
    return x


def _hull_chunk(Y, x):
    """The continuum (float64) of spectra ``Y`` (n, B) over increasing positions ``x`` (B,), on Y's device."""
    xp = get_namespace(Y)
    n, B = Y.shape
    ar = xp.arange(B)
    last = B - 1
    V = xp.zeros((n, B), dtype=bool)  # hull vertices
    V[:, 0] = True
    V[:, last] = True
    # the march, over the spectra still short of the last band (ufuncs where an operand is a scalar:
    # hyperapp.core.backend, scalar operators)
    rows = xp.arange(n)
    cur = xp.zeros(n, dtype=ar.dtype)
    Ya = Y
    while B > 2 and rows.size:
        yc = xp.take_along_axis(Ya, cur[:, None], axis=1)
        ahead = ar[None, :] > cur[:, None]
        dx = xp.where(ahead, x[None, :] - x[cur][:, None], 1.0)
        slope = xp.where(ahead, (Ya - yc) / dx, -xp.inf)
        nxt = xp.subtract(last, xp.argmax(slope[:, ::-1], axis=1))  # the farthest of tied slopes
        V[rows, nxt] = True
        go = xp.flatnonzero(xp.less(nxt, last))
        if int(go.size) != int(rows.size):
            rows, cur, Ya = rows[go], nxt[go], Ya[go]
        else:
            cur = nxt
    # each band's segment: its last vertex at or before it (L) and the next one after it (R; R = L at a vertex)
    c = xp.subtract(xp.cumsum(V, axis=1), 1)  # the rank of the last vertex at or before each band
    vr, vc = xp.nonzero(V)
    VI = xp.zeros((n, B), dtype=c.dtype)  # the vertices' bands, in order, per spectrum
    VI[vr, c[vr, vc]] = vc
    L = xp.take_along_axis(VI, c, axis=1)
    R = xp.take_along_axis(VI, xp.where(V, c, xp.add(c, 1)), axis=1)
    xL, xR = x[L], x[R]
    yL, yR = xp.take_along_axis(Y, L, axis=1), xp.take_along_axis(Y, R, axis=1)
    span = xR - xL
    seg = xp.greater(span, 0)
    t = xp.where(seg, (x[None, :] - xL) / xp.where(seg, span, 1.0), 0.0)
    return yL + (yR - yL) * t  # exactly the spectrum's value at a vertex (t = 0)


def _hull_chunk_gpu(Y, x):
    """:func:`_hull_chunk` on CuPy by ``kernels/continuum.cu`` (one thread per spectrum)."""
    import cupy

    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import get_kernel

    Y = cupy.ascontiguousarray(Y, dtype=cupy.float64)
    n, B = Y.shape
    H = cupy.empty_like(Y)
    threads = 128
    blocks = max(1, min(-(-n // threads), 32 * int(device_attributes().get("MultiProcessorCount", 80))))
    get_kernel("continuum", "hyperapp_continuum")((blocks,), (threads,), (
        Y, cupy.ascontiguousarray(x, dtype=cupy.float64), H, np.int64(n), np.int32(B)))
    return H


def continuum(X, wavelengths=None):
    """The continuum of every spectrum of ``X``: its upper convex hull over wavelength, evaluated at each
    band (float64 from float64 input, else float32), on X's device.

    Parameters
    ----------
    X : array (..., bands)
        Spectra along the last axis (a cube's (rows, cols, bands), or pixels (n, bands)); finite values.
    wavelengths : sequence of float, optional
        One per band, in any order (the hull is over the sorted wavelengths; the result keeps X's band
        order) and distinct. None: the band indices 0, 1, ..., as for a cube without wavelengths.
    """
    return _continuum(X, wavelengths, kernel=True)


def _continuum(X, wavelengths, kernel: bool):
    """:func:`continuum`; on CuPy by the kernel, or (``kernel=False``) by the vectorised march NumPy runs."""
    xp = get_namespace(X)
    X = xp.asarray(X)
    if X.ndim < 1:
        raise InputError("continuum removal needs spectra (..., bands), got a scalar")
    B = X.shape[-1]
    out_dtype = float_dtype(X)
    x = band_positions(wavelengths, B)
    P = X.reshape(-1, B)
    out = xp.empty(P.shape, dtype=out_dtype)
    if P.shape[0] == 0 or B == 0:
        return out.reshape(X.shape)
    order = np.argsort(x, kind="stable")
    sorted_ = bool((order == np.arange(B)).all())
    xs = xp.asarray(x[order])
    cols = None if sorted_ else xp.asarray(order)
    step = CHUNK if xp is np else GPU_CHUNK
    hull = _hull_chunk_gpu if kernel and xp is not np else _hull_chunk
    for i in range(0, P.shape[0], step):
        Y = P[i:i + step].astype(xp.float64)
        if cols is None:
            out[i:i + step] = hull(Y, xs)
        else:
            out[i:i + step, cols] = hull(Y[:, cols], xs)
    return out.reshape(X.shape)


def continuum_removed(X, wavelengths=None):
    """``X`` divided by its continuum (:func:`continuum`): 1 where a spectrum touches its upper convex hull
    over wavelength, the relative depth of its absorptions (below 1) elsewhere. ENVI's Continuum Removal.

    Parameters
    ----------
    X : array (..., bands)
        NumPy or CuPy, spectra along the last axis (the cube's pixels (n, bands), or (rows, cols,
        bands)); finite values (no-data pixels filled or left out first).
    wavelengths : sequence of float, optional
        One per band, distinct, in any order; None (a cube without wavelengths): the band index is the
        abscissa, as if the bands were evenly spaced.

    Returns
    -------
    array of X's shape and device: float64 from float64 input, else float32. Where the continuum is not
    positive (a spectrum all zero or negative there) the value is 1: there is no continuum to measure a
    depth against, and a flat spectrum of any level gives 1 too. A spectrum with one band is 1.
    """
    xp = get_namespace(X)
    X = xp.asarray(X)
    hull = continuum(X, wavelengths)
    pos = xp.greater(hull, 0)
    return xp.where(pos, X.astype(hull.dtype) / xp.where(pos, hull, 1), 1).astype(hull.dtype)


class InContinuum(TransformedDetector):
    """Any pixel detector run on continuum-removed spectra: the image's pixels, and any target or undesired
    spectrum (a library's), are divided by their continuum (:func:`continuum_removed`) before the detector
    fits and scores them. The image keeps its shape; a (rows, cols, bands) image stays one for detectors that
    need it (local RX).

    Parameters
    ----------
    detector : PixelDetector
        The unfitted detector (its own parameters as set).
    wavelengths : sequence of float, optional
        The image's band centres, one per band (the cube's ``wavelengths``); None: the band index.

    Notes
    -----
    In memory only (``stream_stats`` None): the two-pass path's statistics would have to be summed over the
    transformed tiles. ``fit``'s ``check_input`` is honoured before the transform (the transform of finite
    spectra is finite).
    """

    accepts_check_input = True
    stream_stats = None

    def __init__(self, detector=None, wavelengths=None):
        self.detector = detector
        self.wavelengths = wavelengths
        self.uses_targets = getattr(detector, "uses_targets", True)
        self.uses_undesired = getattr(detector, "uses_undesired", False)
        self.labels_on_host = getattr(detector, "labels_on_host", False)
        self.accepts_progress = getattr(detector, "accepts_progress", False)

    def _image(self, X, check_input: bool):
        P, _ = as_pixels(X)
        if check_input:
            check_finite(P)
        self.n_bands_ = P.shape[1]
        return continuum_removed(X, self.wavelengths)

    def _spectra(self, S, xp):
        """Spectra (k, bands) or (bands,) continuum-removed on the image's device, float64; None stays None."""
        if S is None:
            return None
        return continuum_removed(xp.asarray(S, dtype=xp.float64), self.wavelengths)

    def _fit_kw(self) -> dict:
        return {"check_input": False} if getattr(self.detector, "accepts_check_input", False) else {}

    def fit(self, X, y=None, check_input: bool = True, **kw):
        self.detector_ = self.detector.fit(self._image(X, check_input), y, **self._fit_kw(), **kw)
        return self

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True, **kw):
        Z = self._image(X, check_input)
        xp = get_namespace(Z)
        self.detector_ = self.detector.fit_signature(Z, self._spectra(target, xp), y=y,
                                                     undesired=self._spectra(undesired, xp), check_input=False,
                                                     **kw)
        return self

    def _transform(self, X):
        self._check_fitted()
        P, _ = as_pixels(X)
        if P.shape[1] != self.n_bands_:
            raise InputError(f"image has {P.shape[1]} bands, the detector was fitted on {self.n_bands_}")
        return continuum_removed(X, self.wavelengths)
