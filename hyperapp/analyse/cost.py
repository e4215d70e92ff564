"""What an analysis run will cost, in seconds on this machine, before it runs.

Each analysis method has a scaling model: the work a fit (and the labelling of the image) does, in
"units" that grow as its algorithm does with the spectra, the bands, the pixels and the options
(:data:`MODELS`). The seconds a unit takes are measured once per method, backend and band count in a
session: the method is fitted twice on small synthetic spectra (a few clusters of smooth spectra with
noise) with small options, timed, and ``seconds = overhead + rate x units`` is solved from the two
fits (:func:`calibrate`). :func:`estimate` then scales that to the run asked for. The window's analysis
panels write it in their cost line and ask before a run estimated above :data:`ASK_ABOVE` seconds; the
CLI prints it before a long run.

The calibration fits run all their iterations (``tol`` 0 or below), so that the rate is a rate per
iteration. k-means and EM stop when they converge, usually well before ``max_iter``: their estimate
counts the iterations seen on real scenes (:data:`KMEANS_ITERATIONS_SEEN`, :data:`EM_ITERATIONS_SEEN`)
and :attr:`Estimate.longest` every iteration allowed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hyperapp.models.base import unchecked_parameters

#: a run estimated above this many seconds (its :attr:`Estimate.longest`) asks first in the window (and is
#: announced by the CLI)
ASK_ABOVE = 60.0

#: Lloyd iterations a k-means range runs before every restart and k has settled (tol 1e-4), for the
#: estimate: 55 and 81 of 100 on the land sample at 2,000 and 5,000 spectra
KMEANS_ITERATIONS_SEEN = 60

#: k-means iterations the band clustering runs before it settles (its tolerance is k-means' default): 4 to 13
#: on the land and airport scenes' bands
BAND_CLUSTER_ITERATIONS = 15

#: EM iterations a Gaussian mixture runs before its log-likelihood settles (tol 1e-3), for the estimate:
#: 20 to 49 of 100 on the land sample at 2,000 and 5,000 spectra
EM_ITERATIONS_SEEN = 30


@dataclass(frozen=True)
class Estimate:
    """A run's cost: ``seconds`` expected, ``longest`` where iterations may run longer (else equal)."""

    seconds: float
    longest: float
    method: str
    backend: str

    def words(self) -> str:
        """The cost in words: "about 40 s", "about 3 min (up to 7 min)"."""
        if self.longest < 1:
            return "under a second"
        about, most = seconds_words(self.seconds), seconds_words(self.longest)
        out = about if about == "over a year" else f"about {about}"
        if self.longest > 1.5 * self.seconds and most != about:
            out += f" (up to {most})"
        return out


def seconds_words(s: float) -> str:
    """Seconds as a person reads a duration: "under a second", "12 s", "4 min", "2.5 h"."""
    if s < 1:
        return "under a second"
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        return f"{s / 60:.0f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h"
    if s < 365 * 86400:
        return f"{s / 86400:.0f} days"
    return "over a year"


# ---------------------------------------------------------------------------------------- work models
def _ks(p: dict) -> tuple[int, ...]:
    from hyperapp.models.kmeans import parse_k

    return parse_k(p.get("k", "8"))


def _kmeans_units(p: dict, n: int, d: int, npx: int, iters: int | None = None) -> float:
    """Lloyd: two GEMMs per iteration over every restart's centres together, k-means++ seeding, the
    silhouette's pairwise distances on its sample, and the image labelled by the chosen centres."""
    ks = _ks(p)
    runs = int(p.get("n_init", 4))
    M = runs * sum(ks)
    iters = int(p.get("max_iter", 100)) if iters is None else min(iters, int(p.get("max_iter", 100)))
    seed = runs * sum(k * (2 + math.log(max(k, 1))) for k in ks)
    s = min(int(p.get("silhouette_sample", 2000)), n) if len(ks) > 1 else 0
    fit = 4.0 * n * d * M * iters + 2.0 * n * d * seed + s * s * (d + len(ks)) + 4.0 * n * d * M
    return fit + 2.0 * npx * d * (sum(ks) / len(ks))


def _subset_units(p: dict, n: int, d: int, npx: int) -> float:
    """One small k-means per subset of bands: distances and sums over n spectra, r bands, k centres."""
    S, r, k, iters = (int(p.get("n_subsets", 10000)), int(p.get("subset_size", 3)), int(p.get("k", 8)),
                      int(p.get("max_iter", 20)))
    return S * (n * k * (4.0 * r + 6.0) * (iters + 1)) + npx * k * r * 2.0


def _band_cluster_units(p: dict, n: int, d: int, npx: int) -> float:
    """k-means (3 restarts, 100 iterations at most) of the bands as vectors over at most max_pixels spectra."""
    m = min(n, int(p.get("max_pixels", 20000)))
    k = min(int(p.get("n_clusters", 8)), d)
    return 3 * k * d * m * 4.0 * 101 + 4.0 * n * d


def _som_units(p: dict, n: int, d: int, npx: int) -> float:
    """Every epoch: each spectrum against every neuron (two best), and the neighbourhood-weighted sums:
    the neighbourhood itself is M x M (its exponentials and its product with the M x d sums), which a
    large map pays (512 x 10 on the airport scene was estimated at 11 s and took 21 s without it)."""
    M = int(p.get("rows", 10)) * int(p.get("cols", 10))
    E = int(p.get("epochs", 10))
    per = n * M * (4.0 * d + 16.0)
    if p.get("training", "batch") == "online":  # one update of every neuron per spectrum, in sequence
        per += n * (M * (4.0 * d + 10.0) + 2000.0)
    else:
        per += M * M * (2.0 * d + 30.0)
    return E * per + npx * M * (2.0 * d + 4.0)


def _gmm_units(p: dict, n: int, d: int, npx: int, iters: int | None = None) -> float:
    """k-means starts, then EM: each spectrum against every component's covariance (d^2 a spectrum
    for full covariances, d for diagonal), and the image's posterior."""
    ks = _ks(p)
    runs = int(p.get("n_init", 3))
    full = p.get("covariance", "full") == "full"
    per = (3.0 * d * d + 6.0 * d) if full else 12.0 * d
    it = int(p.get("max_iter", 100)) if iters is None else min(iters, int(p.get("max_iter", 100)))
    init = runs * sum(ks) * n * d * 4.0 * 30
    # em-EM: every start runs start_iter iterations at most (often fewer), then only the best goes on
    first = int(p.get("start_iter", 20))
    its = runs * first + (it - first) if runs > 1 and first < it else runs * it
    em = sum(k * (n * per + (d ** 3 if full else d)) * its for k in ks)
    return init + em + npx * max(ks) * per


def _trees_units(p: dict, n: int, d: int, npx: int, trees: int) -> float:
    """Level by level: every training spectrum binned on the bands tried at each split, and the image
    walked down every tree."""
    mf = str(p.get("max_features", "sqrt")).strip().lower()
    F = (d if trees == 1 or mf in ("all", "none", "") else max(1, int(math.sqrt(d))) if mf == "sqrt"
         else max(1, int(math.log2(d))) if mf == "log2" else min(d, max(1, int(mf))) if mf.isdigit() else d)
    depth = math.log2(max(n, 2)) + 1
    if int(p.get("max_depth", 0) or 0) > 0:
        depth = min(depth, int(p["max_depth"]))
    bins = int(p.get("n_bins", 256))
    step = 2e5  # a level's Python and launch overhead, in units
    fit = trees * depth * (n * F * 8.0 + (2 ** min(depth, 12)) * F * bins * 0.05 + step) + n * d * 20.0
    return fit + trees * depth * (npx * 4.0 + step)


def _hac_units(p: dict, n: int, d: int, npx: int) -> float:
    """Pairwise distances and the merges over them (n^2, slower per pair once the distances outgrow the
    caches: 1,500 -> 3,000 spectra took 6x as long, not 4x), then the image labelled by nearest cluster mean."""
    return n * n * (d + 12.0) * (1 + n / 2000) + npx * int(p.get("n_clusters", 8)) * d * 2.0


def _mnf_units(p: dict, n: int, d: int, npx: int) -> float:
    """Signal and noise covariances of the whole image, two eigendecompositions, the component images."""
    return npx * d * d * 4.0 + 20.0 * d ** 3 + npx * d * d * 2.0


@dataclass(frozen=True)
class Model:
    """A method's scaling model: its work in units, the options of its two calibration fits (the first
    and the second, ``calibration(params, 0 or 1)``) and the spectra each fits (for MNF: the image's side)."""

    units: Callable[[dict, int, int, int], float]
    calibration: Callable[[dict, int], dict]
    sizes: tuple[int, int] = (400, 1600)
    #: the option values that change the rate per unit (they join the calibration's cache key)
    keys: tuple[str, ...] = ()
    #: times a calibration fit (params, spectra, bands, backend) -> seconds, when not the method's own fit
    runner: Callable | None = None


def _band_cluster_run(p: dict, n: int, d: int, backend) -> float:
    """The band clustering's k-means, run for all its iterations (``tol < 0``): real bands, unlike
    synthetic ones, rarely settle before the 100 iterations."""
    from hyperapp.models.kmeans import MultiKMeans

    X, _ = synthetic_spectra(n, d, seed=n)
    B = backend.asarray(np.ascontiguousarray(X.T))
    backend.synchronize()
    t0 = time.perf_counter()
    with unchecked_parameters():  # tol < 0: every iteration runs, which a person may not ask
        MultiKMeans(k=int(p["n_clusters"]), n_init=3, max_iter=int(p["_iters"]), tol=-1.0, silhouette_sample=0).fit(B)
    backend.synchronize()
    return time.perf_counter() - t0


def _band_cluster_units_cal(p: dict, n: int, d: int, npx: int) -> float:
    k = min(int(p.get("n_clusters", 8)), d)
    m = min(n, int(p.get("max_pixels", 20000)))
    return 3 * k * d * m * 4.0 * (int(p.get("_iters", BAND_CLUSTER_ITERATIONS)) + 1) + 4.0 * n * d


MODELS: dict[str, Model] = {
    # every restart's centres iterate together (M = restarts x sum of k): calibrated at the default range's M
    "kmeans": Model(_kmeans_units, lambda p, i: {"k": "2..16", "n_init": 4, "max_iter": 3, "tol": -1.0,
                                                 "silhouette_sample": 200, "criterion": "silhouette"},
                    sizes=(300, 1500)),
    "band-subsets": Model(_subset_units, lambda p, i: {"n_subsets": 24, "subset_size": int(p.get("subset_size", 3)),
                                                       "k": int(p.get("k", 8)), "max_iter": 5},
                          keys=("subset_size", "k")),
    "band-clusters": Model(_band_cluster_units_cal, lambda p, i: {"n_clusters": 4, "max_pixels": 10**7, "_iters": 8},
                           sizes=(500, 2000), runner=_band_cluster_run),
    "som": Model(_som_units, lambda p, i: {"rows": 10, "cols": 10, "epochs": 2,
                                           "training": p.get("training", "batch"), "codebook_clusters": 0},
                 sizes=(500, 2000), keys=("training",)),
    "gmm": Model(_gmm_units, lambda p, i: {"k": "4", "n_init": 1, "max_iter": 4, "tol": 0.0,
                                           "covariance": p.get("covariance", "full")}, keys=("covariance",)),
    # a Python step per tree and level: the two fits differ in trees as well as spectra
    "forest": Model(lambda p, n, d, npx: _trees_units(p, n, d, npx, int(p.get("n_trees", 100))),
                    lambda p, i: {"n_trees": (5, 20)[i], "max_features": p.get("max_features", "sqrt"),
                                  "test_fraction": 0.0},
                    sizes=(300, 1200), keys=("max_features",)),
    "cart": Model(lambda p, n, d, npx: _trees_units(p, n, d, npx, 1), lambda p, i: {"test_fraction": 0.0}),
    "hac": Model(_hac_units, lambda p, i: {"linkage": p.get("linkage", "ward"),
                                           "metric": p.get("metric", "euclidean"), "n_clusters": 4},
                 sizes=(500, 1500), keys=("linkage", "metric")),
    "mnf": Model(_mnf_units, lambda p, i: {"n_components": 0}, sizes=(24, 64)),  # sizes: image sides
}


# ---------------------------------------------------------------------------------------- calibration
#: (method, backend, bands, key values) -> (overhead seconds, seconds per unit), for the session
_CALIBRATED: dict[tuple, tuple[float, float]] = {}


def synthetic_spectra(n: int, d: int, seed: int = 0, classes: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """``n`` smooth spectra of ``d`` bands in ``classes`` clusters with noise, and their class (0..):
    what the calibration fits run on (a scene's spectra, without needing one)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, d)
    shapes = np.stack([0.3 + 0.2 * np.sin(2 * np.pi * (f * t + ph)) + 0.1 * c
                       for c, (f, ph) in enumerate(zip(rng.uniform(0.5, 2, classes), rng.uniform(0, 1, classes)))])
    y = rng.integers(0, classes, n)
    X = shapes[y] * rng.uniform(0.8, 1.2, (n, 1)) + rng.normal(0, 0.02, (n, d))
    return X.astype(np.float32), y


def _fit_once(method: str, params: dict, n: int, d: int, backend) -> float:
    """Seconds to fit ``method`` on ``n`` synthetic spectra (an n x n image for MNF) and label them."""
    from hyperapp.models.registry import get_analysis

    m = get_analysis(method)
    if m.needs_image:
        X, _ = synthetic_spectra(n * n, d, seed=n)
        X = backend.asarray(X.reshape(n, n, d))
    else:
        Xh, y = synthetic_spectra(n, d, seed=n)
        X = backend.asarray(Xh)
    est = m.factory()  # unchecked: a calibration may run every iteration (tol < 0), which a person may not ask
    for k, v in params.items():
        setattr(est, k, v)
    backend.synchronize()
    t0 = time.perf_counter()
    with unchecked_parameters():
        if m.needs_image:
            est.fit(X)
            est.images(X)
        else:
            est.fit(X, backend.asarray(y.astype(np.int64)) if m.needs_classes else None)
            if m.labels_image:
                est.predict(X)
    backend.synchronize()
    return time.perf_counter() - t0


def _key(method: str, params: dict, n_bands: int, backend) -> tuple:
    from hyperapp.models.registry import get_analysis

    p = {q.name: q.default for q in get_analysis(method).params}
    p.update(params)
    return (method, backend.name, int(n_bands), tuple(str(p.get(k)) for k in MODELS[method].keys))


def is_calibrated(method: str, params: dict, n_bands: int, backend) -> bool:
    """Whether :func:`estimate` of these answers at once (its calibration is done this session)."""
    from hyperapp.core.backend import get_backend

    backend = get_backend(backend) if isinstance(backend, str) else backend
    return _key(method, params, n_bands, backend) in _CALIBRATED


def calibrate(method: str, params: dict, n_bands: int, backend) -> tuple[float, float]:
    """(overhead seconds, seconds per unit) of ``method`` on ``backend`` with ``n_bands`` bands: two
    small timed fits, once per session (cached by method, backend, bands and the options that change
    the rate)."""
    from hyperapp.core.backend import get_backend

    backend = get_backend(backend) if isinstance(backend, str) else backend
    model = MODELS[method]
    key = _key(method, params, n_bands, backend)
    if key in _CALIBRATED:
        return _CALIBRATED[key]
    pa, pb = model.calibration(params, 0), model.calibration(params, 1)
    a, b = model.sizes
    image = method == "mnf"
    run = model.runner or (lambda p, n, d, be: _fit_once(method, p, n, d, be))
    run(pa, a, n_bands, backend)  # warm: imports, kernels, caches
    # the quicker of two: a machine shared with other work slows a fit now and then, never speeds it
    ta = min(run(pa, a, n_bands, backend) for _ in range(2))
    tb = min(run(pb, b, n_bands, backend) for _ in range(2))
    ua = model.units(pa, a * a if image else a, n_bands, a * a if image else a)
    ub = model.units(pb, b * b if image else b, n_bands, b * b if image else b)
    rate = max((tb - ta) / max(ub - ua, 1.0), tb / ub / 4)  # timing noise must not make it ~0 or negative
    over = max(ta - rate * ua, 0.0)
    _CALIBRATED[key] = (over, rate)
    return over, rate


def clear_calibration() -> None:
    """Forget every calibration (a test, or another device)."""
    _CALIBRATED.clear()


def estimate(method: str, params: dict | None, n_spectra: int, n_bands: int, backend="cpu",
             n_pixels: int | None = None) -> Estimate:
    """Seconds a run of analysis ``method`` will take on this machine.

    Parameters
    ----------
    method : str
        A name of :data:`hyperapp.models.registry.ANALYSES`.
    params : dict
        The run's options (missing ones take the registry's defaults).
    n_spectra : int
        Spectra the method is fitted on (for MNF: ignored, it fits the whole image).
    n_bands : int
    backend : str or Backend
        ``"cpu"``, ``"gpu"``, ``"auto"`` or a backend from :func:`hyperapp.core.backend.get_backend`.
    n_pixels : int, optional
        Pixels of the image the fitted model labels (default: ``n_spectra``).

    Returns
    -------
    Estimate
    """
    from hyperapp.core.backend import get_backend
    from hyperapp.models.registry import get_analysis

    m = get_analysis(method)
    if isinstance(backend, str):
        backend = get_backend(backend)
    p = {q.name: q.default for q in m.params}
    p.update(params or {})
    npx = int(n_pixels if n_pixels is not None else n_spectra)
    n = npx if m.needs_image else int(n_spectra)
    if not m.labels_image and not m.needs_image:
        npx = 0
    over, rate = calibrate(method, p, n_bands, backend)
    model = MODELS[method]
    longest = over + rate * model.units(p, n, int(n_bands), npx)
    seconds = longest
    if method == "gmm":
        seconds = over + rate * _gmm_units(p, n, int(n_bands), npx, EM_ITERATIONS_SEEN)
    elif method == "kmeans":
        seconds = over + rate * _kmeans_units(p, n, int(n_bands), npx, KMEANS_ITERATIONS_SEEN)
    return Estimate(seconds, longest, method, backend.name)


def k_beyond_spectra(params: dict, n: int) -> str:
    """The refusal of a run whose largest k (clusters or components) exceeds the ``n`` spectra it fits,
    else "": said before any estimate, since the run refuses it at once (the window's long-run question
    offered "84398.1 h" for k = 2..100000 on 10,000 spectra)."""
    from hyperapp.core.errors import HyperappError
    from hyperapp.models.kmeans import parse_k

    if "k" not in params:
        return ""
    try:
        k = max(parse_k(params["k"]))
    except HyperappError:
        return ""
    return f"k = {k} is larger than the number of spectra ({n}): choose a k of {n} or less" if k > n else ""


def long_run_words(cube, method: str, params: dict | None, selection, roi=None, objects=None,
                   device: str = "auto") -> str | None:
    """A line announcing a run estimated above :data:`ASK_ABOVE` seconds at the longest (what the CLI
    prints before it starts, without asking), or None for a shorter one."""
    from hyperapp.core.backend import get_backend
    from hyperapp.models.registry import get_analysis

    m = get_analysis(method)
    npx = cube.rows * cube.cols
    n = npx if m.needs_image else int(selection.indices((cube.rows, cube.cols), roi, objects).size)
    if k_beyond_spectra(params or {}, n):  # the run refuses it at once: nothing long to announce
        return None
    backend = get_backend(device)
    est = estimate(method, params, n, cube.bands, backend, npx)
    if est.longest <= ASK_ABOVE:
        return None
    return (f"{m.title} on {n:,} spectra is estimated to take {est.words()} on this machine's "
            f"{'GPU' if backend.is_gpu else 'CPU'}")
