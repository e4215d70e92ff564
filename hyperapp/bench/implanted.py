"""Test scenes made by implanting real target spectra into a real scene's background.

The detectors' wider quality check: a generated scene says how a detector does on the
generator's materials, one real scene on one kind of target. Here the background is a real scene's
(the AVIRIS airport scene, ``abu-airport-1.mat``) with its own targets removed, and the targets are
real spectra from it, implanted at known places with known fill, so one real background yields scenes
of several kinds:

``aircraft-full``
    Rare, anomalous targets: 12 objects of 1x1 to 3x3 pixels, each pixel a real aircraft spectrum
    (from the scene's truth) at full fill, the objects' border pixels mixed at 50 % with the background.
``aircraft-sub``
    Rare sub-pixel targets: 16 single pixels, each an aircraft spectrum at fill 0.15-0.5.
``rare-material``
    Rare real materials of the background (its 0.2 % of pixels farthest from the background's mean in
    the Mahalanobis sense, outside the truth; several materials): 10 objects of 1x1 to 2x2 pixels, each
    one of those spectra, and 8 sub-pixel ones at fill 0.2-0.6. Five clicks see a few of the materials;
    an anomaly detector sees them all.
``common-material``
    Targets that are no anomaly: spectra that are mostly (60 %) a common background material (a pixel of
    a k-means cluster of the background covering 5-20 % of it) and 40 % an aircraft's, implanted into
    places of *other* materials, full pixel and sub-pixel: within the background's spread, so RX sees
    little, while the material's own pixels elsewhere, which are not targets, confuse a detector that
    follows the clicks loosely. (Pure material would make every detector a coin toss: its own pixels
    are the same spectrum.)
``many-targets``
    Targets that are not rare: 400 pixels (4 % of the scene) of aircraft spectra at fill 0.3-1, in
    objects of 1x1 to 3x3, enough to pull the background statistics towards them.

Removing the scene's own targets: each truth pixel (and its 1-pixel rim, which holds mixed pixels)
takes the spectrum of the nearest pixel outside (:func:`scipy.ndimage.distance_transform_edt`).
Mixing is linear in radiance: x = f t + (1 - f) b + sqrt(1 - f² - (1 - f)²) n, with b the background
pixel at that place and n a draw of the sensor's noise (its covariance estimated from differences of
horizontally adjacent pixels, as MNF estimates it). Without n a mixed pixel would carry less noise than
any real one (half the variance at f = 0.5), and on a noise-dominated scene (the airport's RX is about
its band count, a chi-square's) that alone would make implanted targets look *less* anomalous than the
background. The truth marks pixels with fill >= 0.2 (as :mod:`hyperapp.io.samples`).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from hyperapp.io.samples import Scene

KINDS = ("aircraft-full", "aircraft-sub", "rare-material", "common-material", "many-targets")


def clean_background(cube: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The cube with its truth pixels and their 1-pixel rim replaced by the nearest pixel outside."""
    remove = ndimage.binary_dilation(truth > 0, np.ones((3, 3), bool))
    _, (ri, ci) = ndimage.distance_transform_edt(remove, return_indices=True)
    return cube[ri, ci].astype(np.float32)


def noise_covariance(cube: np.ndarray) -> np.ndarray:
    """The sensor noise's covariance, from differences of horizontally adjacent pixels (var(a - b) / 2)."""
    D = (cube[:, 1:] - cube[:, :-1]).reshape(-1, cube.shape[2]).astype(np.float64)
    return np.cov(D, rowvar=False) / 2.0


def _noise(cube: np.ndarray, rng, n: int) -> np.ndarray:
    """``n`` draws of the sensor noise (:func:`noise_covariance`), (n, bands) float32."""
    w, V = np.linalg.eigh(noise_covariance(cube))
    return (rng.standard_normal((n, cube.shape[2])) @ (V * np.sqrt(np.maximum(w, 0))).T).astype(np.float32)


def _free_places(rng, taken: np.ndarray, size: int, avoid: np.ndarray | None = None) -> tuple[int, int] | None:
    rows, cols = taken.shape
    for _ in range(500):
        r, c = int(rng.integers(2, rows - size - 2)), int(rng.integers(2, cols - size - 2))
        win = (slice(r - 2, r + size + 2), slice(c - 2, c + size + 2))
        if taken[win].any() or (avoid is not None and avoid[r:r + size, c:c + size].any()):
            continue
        taken[win] = True
        return r, c
    return None


def _objects(rng, fill: np.ndarray, source: np.ndarray, taken: np.ndarray, n: int, sizes, fills,
             avoid=None, per_object: bool = False) -> None:
    """Place ``n`` square objects (side from ``sizes``) into ``fill``/``source`` (the index of the
    target spectrum each pixel takes): full fill inside, 50 % on the border of objects of side 3, a
    fill drawn from ``fills`` (lo, hi) for objects of side 1 when given; one spectrum per object when
    ``per_object``, else one per pixel."""
    for _ in range(n):
        s = int(rng.choice(sizes))
        at = _free_places(rng, taken, s, avoid)
        if at is None:
            continue
        r, c = at
        f = np.ones((s, s))
        if s >= 3:
            f[[0, -1], :] = 0.5
            f[:, [0, -1]] = 0.5
            f[1:-1, 1:-1] = 1.0
        if s == 1 and fills is not None:
            f[:] = rng.uniform(*fills)
        fill[r:r + s, c:c + s] = f
        source[r:r + s, c:c + s] = rng.integers(0, 1 << 30, 1 if per_object else (s, s))


def implanted_scene(cube: np.ndarray, truth: np.ndarray, kind: str, seed: int = 0) -> Scene:
    """A scene of ``kind`` (:data:`KINDS`) built on the background of ``cube`` (rows, cols, bands),
    whose own targets ``truth`` are removed and whose target pixels give the implanted spectra."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    rng = np.random.default_rng(seed + 1000 * KINDS.index(kind))
    cube = np.asarray(cube, np.float32)
    t = np.asarray(truth) > 0
    back = clean_background(cube, t)
    rows, cols, bands = back.shape
    P = back.reshape(-1, bands)
    # real target spectra: the aircraft's inner pixels (their rim is mixed with the tarmac)
    inner = ndimage.binary_erosion(t, np.ones((3, 3), bool))
    aircraft = cube[inner if inner.sum() >= 10 else t].astype(np.float32)
    fill = np.zeros((rows, cols))
    source = np.zeros((rows, cols), np.int64)
    taken = np.zeros((rows, cols), bool)
    avoid = None
    if kind == "aircraft-full":
        spectra = aircraft
        _objects(rng, fill, source, taken, 12, (1, 2, 3), None)
    elif kind == "aircraft-sub":
        spectra = aircraft
        _objects(rng, fill, source, taken, 16, (1,), (0.15, 0.5))
    elif kind == "many-targets":
        spectra = aircraft
        while (fill > 0).sum() < 400:
            before = (fill > 0).sum()
            _objects(rng, fill, source, taken, 1, (1, 2, 3), (0.3, 1.0))
            if (fill > 0).sum() == before:
                break
    else:
        mu, C = P.mean(axis=0), np.cov(P, rowvar=False)
        w, V = np.linalg.eigh(C)
        W = V / np.sqrt(np.maximum(w, w.max() * 1e-9))
        Z = (P - mu) @ W
        if kind == "rare-material":
            rx = (Z * Z).sum(axis=1)
            spectra = P[np.argsort(rx)[-max(10, P.shape[0] // 500):]]
            _objects(rng, fill, source, taken, 10, (1, 2), None, per_object=True)
            _objects(rng, fill, source, taken, 8, (1,), (0.2, 0.6))
        else:
            from hyperapp.models.kmeans import kmeans

            centres, lab = kmeans(Z[:, :16].astype(np.float32), 8, seed=seed)
            share = np.bincount(lab, minlength=8) / lab.size
            ok = np.flatnonzero((share >= 0.05) & (share <= 0.2))
            k = int(ok[np.argmax(share[ok])]) if ok.size else int(np.argsort(share)[len(share) // 2])
            own = P[lab == k]
            i, j = rng.integers(0, own.shape[0], 2000), rng.integers(0, aircraft.shape[0], 2000)
            spectra = 0.6 * own[i] + 0.4 * aircraft[j] + np.sqrt(1 - 0.36 - 0.16) * _noise(back, rng, 2000)
            avoid = (lab == k).reshape(rows, cols)
            _objects(rng, fill, source, taken, 12, (1, 2, 3), None, avoid)
            _objects(rng, fill, source, taken, 8, (1,), (0.3, 0.7), avoid)
    spec = spectra[source % spectra.shape[0]]
    out = back * (1 - fill[..., None]) + fill[..., None] * spec
    mixed = (fill > 0) & (fill < 1)
    if mixed.any():
        f = fill[mixed][:, None]
        out[mixed] += np.sqrt(np.clip(1 - f ** 2 - (1 - f) ** 2, 0, 1)) * _noise(back, rng, f.shape[0])
    out = out.astype(np.float32)
    truth_out = (fill >= 0.2).astype(np.uint8)
    wl = np.arange(bands, dtype=float)
    return Scene(kind, out, truth_out, wl, np.ones(bands), np.argwhere(truth_out)[:5], np.zeros((rows, cols), bool),
                 fill)
