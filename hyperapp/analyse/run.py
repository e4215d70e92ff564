"""The one analysis path: cube + a spectra selection -> fitted model -> labels, tables -> report.

Beside :mod:`hyperapp.detect.run` (the one detection path), the side panels, ``hyperapp --headless
analyse`` and the batch runner all call :func:`run_analysis`; no panel computes anything itself.

A :class:`Selection` says which spectra the model is fitted on: the whole image, a seeded random sample
of N pixels, the pixels of one ROI class, of all ROIs, or of the detected objects. Pixels are read tile
by tile from the cube (or taken from the pixels already on the device), so a sample of a large file
never loads the whole file. Where the method can (``Method.labels_image``), the fitted model then
labels every pixel of the image, tile by tile; pixels with NaN or Inf values get -1.
"""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from hyperapp.core.backend import Timer, get_backend, to_host
from hyperapp.core.cube import Cube, provenance
from hyperapp.core.errors import InputError, ModelError
from hyperapp.core.progress import NULL_PROGRESS, Progress
from hyperapp.models.registry import get_analysis
from hyperapp.request import AnalyseRequest
from hyperapp.request.checks import DEFAULT_SAMPLE, SELECTIONS

#: what one label of a method's map is called (default "cluster")
UNIT_NAMES = {"gmm": "component", "band-subsets": "code"}
#: analyses whose outputs hold each component's posterior probability per pixel (``posterior.hdr``)
POSTERIOR_METHODS = ("gmm",)


def selection_of(request: AnalyseRequest) -> Selection:
    """The spectra ``request`` fits on, as :func:`run_analysis` selects them."""
    return Selection(request.select, request.sample, request.seed, request.roi_class)


@dataclass
class Selection:
    """Which spectra a model is fitted on.

    Attributes
    ----------
    kind : {"sample", "image", "roi", "rois", "objects"}
        ``sample``: ``n`` pixels drawn at random (seeded), plus every ROI pixel when ROIs are given so
        that class-aware methods see the classes; ``image``: every pixel; ``roi``: the pixels of ROI
        class ``roi_class``; ``rois``: the pixels of every ROI class; ``objects``: the pixels of the
        detected objects (a mask).
    n : int
        Sample size (``sample``).
    seed : int
    roi_class : int
        The class (``roi``).
    """

    kind: str = "sample"
    n: int = DEFAULT_SAMPLE
    seed: int = 0
    roi_class: int = 1

    def __post_init__(self):
        from hyperapp.request import checks as options
        self.kind = options.select(self.kind)
        self.n = options.sample(self.n)
        self.seed = options.seed(self.seed)
        self.roi_class = options.roi_class(self.roi_class)

    def indices(self, shape: tuple[int, int], roi: np.ndarray | None = None,
                objects: np.ndarray | None = None) -> np.ndarray:
        """Flat (row-major) indices of the selected pixels, sorted."""
        npx = shape[0] * shape[1]
        if self.kind not in SELECTIONS:
            raise InputError(f"unknown selection {self.kind!r}; choose one of {', '.join(SELECTIONS)}")
        roi_flat = None if roi is None else np.asarray(roi).reshape(-1)
        if roi_flat is not None and roi_flat.shape[0] != npx:
            raise InputError(f"the ROI map is {np.asarray(roi).shape}, the image is {tuple(shape)}")
        if self.kind == "image":
            return np.arange(npx)
        if self.kind == "sample":
            if int(self.n) < 1:
                raise InputError(f"the sample needs at least 1 pixel, got {self.n}")
            rng = np.random.default_rng(self.seed)
            idx = rng.choice(npx, min(int(self.n), npx), replace=False)
            if roi_flat is not None:
                idx = np.union1d(idx, np.flatnonzero(roi_flat > 0))
            return np.sort(idx)
        if self.kind == "objects":
            if objects is None:
                raise InputError("no detected objects to analyse: run a detector first")
            o = np.asarray(objects).reshape(-1)
            if o.shape[0] != npx:
                raise InputError(f"the object mask is {np.asarray(objects).shape}, the image is {tuple(shape)}")
            idx = np.flatnonzero(o > 0)
            if not idx.size:
                raise InputError("the detection mask is empty: no object pixels to analyse")
            return idx
        if roi_flat is None:
            raise InputError("no ROIs given: mark pixels or pass --roi")
        idx = np.flatnonzero(roi_flat == self.roi_class) if self.kind == "roi" else np.flatnonzero(roi_flat > 0)
        if not idx.size:
            what = f"ROI class {self.roi_class}" if self.kind == "roi" else "the ROIs"
            raise InputError(f"{what} {'hold' if self.kind != 'roi' else 'holds'} no pixels: the selection is empty")
        return idx

    def describe(self) -> dict:
        return asdict(self)


@dataclass
class AnalysisResult:
    """What an analysis produced: the fitted model, its labels of the image, and the report."""

    method: str
    model: object
    labels: np.ndarray | None  # (rows, cols) int16 (int32 where a label exceeds 32767), -1 where none
    indices: np.ndarray  # flat indices of the fitted spectra
    report: dict
    extra: object = None  # what a panel computed beside (a GMM's posterior maps)
    #: images the method makes of the whole cube (MNF's component images), host (rows, cols, k) arrays
    images: dict = field(default_factory=dict)


def gather_pixels(cube: Cube, idx: np.ndarray, backend, image=None, progress: Progress = NULL_PROGRESS):
    """Spectra (len(idx), bands) of the pixels at flat indices ``idx``, on the backend.

    From ``image`` (the pixels already on the device) when given, else read tile by tile from the cube,
    keeping only the selected pixels of each tile.
    """
    xp = backend.xp
    if image is not None:
        return image.reshape(-1, image.shape[-1])[xp.asarray(idx)]
    from hyperapp.reading.tiles import iter_float_tiles

    out = np.empty((idx.size, cube.bands), np.float32)
    done = 0
    for r0, r1, tile in iter_float_tiles(cube):  # no-data pixels NaN
        progress(r0 / max(cube.rows, 1), "reading spectra")
        lo, hi = r0 * cube.cols, r1 * cube.cols
        a, b = np.searchsorted(idx, [lo, hi])
        if b > a:
            out[done:done + b - a] = tile.reshape(-1, cube.bands)[idx[a:b] - lo]
            done += b - a
    return backend.asarray(out)


def class_statistics(cube: Cube, labels: np.ndarray, max_pixels: int = 500,
                     seed: int = 0) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{class value: (mean, std)}`` spectra of every marked class of ``labels`` (0 = unmarked), from at
    most ``max_pixels`` of its pixels drawn at random (seeded): only those pixels are read, never the
    whole cube. No-data pixels are left out."""
    rng = np.random.default_rng(seed)
    lab = np.asarray(labels)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k in np.unique(lab[lab > 0]):
        idx = np.argwhere(lab == k)
        if len(idx) > max_pixels:
            idx = idx[np.sort(rng.choice(len(idx), max_pixels, replace=False))]
        px = np.stack([np.asarray(cube.spectrum(int(r), int(c)), np.float64) for r, c in idx])
        px = px[np.isfinite(px).all(axis=1)]
        if len(px):
            out[int(k)] = (px.mean(axis=0), px.std(axis=0))
    return out


def label_image(model, cube: Cube, backend, image=None, progress: Progress = NULL_PROGRESS) -> np.ndarray:
    """``model.predict`` over every pixel, tile by tile; -1 where a pixel has no data (NaN, Inf or the
    cube's no-data value)."""
    xp = backend.xp
    # labelled in int32, kept as int16 unless a label exceeds it (a class map's ids above 32767, a map
    # of more neurons)
    dtype = np.int32
    labels = np.full((cube.rows, cube.cols), -1, dtype)

    def one(P):
        ok = xp.isfinite(P).all(axis=1)
        lab = xp.full(P.shape[0], -1, xp.int32)
        if bool(ok.all()):
            lab = model.predict(P).astype(xp.int32)
        elif bool(ok.any()):
            lab[ok] = model.predict(P[ok]).astype(xp.int32)
        return to_host(lab).astype(dtype)

    if image is not None:
        labels[:] = one(image.reshape(-1, image.shape[-1])).reshape(cube.rows, cube.cols)
    else:
        from hyperapp.reading.tiles import iter_float_tiles

        for r0, r1, tile in iter_float_tiles(cube, backend.xp):
            progress(r0 / max(cube.rows, 1), "labelling the image")
            labels[r0:r1] = one(tile.reshape(-1, cube.bands)).reshape(-1, cube.cols)
    return labels.astype(np.int16) if labels.max(initial=-1) <= np.iinfo(np.int16).max else labels


def posterior_image(model, cube: Cube, backend, image=None, progress: Progress = NULL_PROGRESS) -> np.ndarray:
    """``model.predict_proba`` over every pixel, tile by tile: float32 (rows, cols, components) on the host,
    NaN where a pixel has no data. The GUI's Posterior tab and the CLI's ``posterior.hdr`` both come from
    here."""
    xp = backend.xp
    out = None

    def one(P):
        ok = xp.isfinite(P).all(axis=1)
        if bool(ok.all()):
            return to_host(model.predict_proba(P)).astype(np.float32)
        k = None if out is None else out.shape[2]
        probs = model.predict_proba(P[ok]) if bool(ok.any()) else None
        k = k or (probs.shape[1] if probs is not None else int(getattr(model, "chosen_k_", 1)))
        full = np.full((P.shape[0], k), np.nan, np.float32)
        if probs is not None:
            full[to_host(ok)] = to_host(probs)
        return full

    if image is not None:
        p = one(image.reshape(-1, image.shape[-1]))
        return p.reshape(cube.rows, cube.cols, -1)
    from hyperapp.reading.tiles import iter_float_tiles

    for r0, r1, tile in iter_float_tiles(cube, backend.xp):
        progress(r0 / max(cube.rows, 1), "posterior probabilities")
        p = one(tile.reshape(-1, cube.bands))
        if out is None:
            out = np.empty((cube.rows, cube.cols, p.shape[1]), np.float32)
        out[r0:r1] = p.reshape(r1 - r0, cube.cols, -1)
    return out


def run_analysis(
    cube: Cube,
    request: AnalyseRequest,
    *,
    roi: np.ndarray | None = None,
    objects: np.ndarray | None = None,
    image=None,
    class_names: dict[int, str] | None = None,
    class_colours: dict[int, tuple] | None = None,
    progress: Progress = NULL_PROGRESS,
) -> AnalysisResult:
    """Fit analysis ``method`` on the selected spectra and, where it can, label the whole image.

    Parameters
    ----------
    cube : Cube
    request : AnalyseRequest
        The method, its options (``{"k": "2..16"}``), the device and which spectra
        (:func:`selection_of`; default: a random sample of 20,000 pixels,
        plus the ROI pixels).
    roi : int (rows, cols) array, optional
        Class map (0 = none, 1.. classes): the ROI selections, and the classes class-aware methods use.
    objects : bool (rows, cols) array, optional
        Detected objects' pixels (the ``objects`` selection).
    image : backend array, optional
        The cube's pixels already on the device (the GUI keeps them there).
    class_names, class_colours : dict, optional
        Names and RGB colours of the ROI classes (by class value), for the report and the class map.
    """
    method, params, selection = request.method, request.params, selection_of(request)
    m = get_analysis(method)
    backend = get_backend(request.device)
    timer = Timer(backend)
    shape = (cube.rows, cube.cols)
    t0 = time.perf_counter()
    est = m.build(**(params or {}))
    if m.needs_image:
        return _run_on_image(cube, method, m, est, backend, timer, image, progress, t0)
    with timer.stage("select"):
        idx = selection.indices(shape, roi, objects)
        if m.needs_classes and roi is None:
            raise InputError(f"{method} needs classes: mark ROIs or pass --roi")
        X = gather_pixels(cube, idx, backend, image, progress.sub(0.0, 0.2))
        y = None
        if roi is not None:
            cls = np.asarray(roi).reshape(-1)[idx].astype(np.int64)
            y = np.where(cls > 0, cls, -1)
    from hyperapp.reading.tiles import check_magnitude, extremes, no_data_error

    n_nodata = 0
    ext = extremes(X)  # both finite: every value is (and the magnitude check's answer)
    if not np.isfinite(ext).all():
        # no-data pixels (NaN, or the cube's no-data value) are left out of the selection
        ok = to_host(backend.xp.isfinite(X).all(axis=1))
        n_nodata = int((~ok).sum())
        if not ok.any():
            raise no_data_error(cube, "every selected pixel is no data (NaN or the cube's no-data value)")
        X, idx = X[backend.xp.asarray(np.flatnonzero(ok))], idx[ok]
        y = None if y is None else y[ok]
        ext = None
    check_magnitude(cube, X, ext)
    progress(0.2, f"fitting {m.title}")
    with timer.stage("fit"):
        kw = {"progress": progress.sub(0.2, 0.85)} if getattr(est, "accepts_progress", False) else {}
        est.fit(X, y, **kw)
    summary = est.summary()
    _require_finite(summary, m.title)
    labels = None
    if m.labels_image:
        with timer.stage("label"):
            labels = label_image(est, cube, backend, image, progress.sub(0.85, 0.99))
    report = {
        "method": method,
        "params": {**est.get_params()},
        "selection": {**selection.describe(), "n_spectra": int(idx.size), "nodata_left_out": n_nodata},
        "device": backend.name,
        "device_name": backend.device_name,
        "cube": cube.path,
        "shape": list(cube.shape),
        **provenance(cube),
        "results": summary,
    }
    if labels is not None:
        lab, cnt = np.unique(labels[labels >= 0], return_counts=True)
        report["label_counts"] = {str(int(a)): int(b) for a, b in zip(lab, cnt)}
    if class_names:
        report["class_names"] = {str(int(k)): str(v) for k, v in class_names.items()}
    if class_colours:
        report["class_colours"] = {str(int(k)): [int(c) for c in v] for k, v in class_colours.items()}
    report["seconds"] = {k: round(v, 6) for k, v in timer.seconds.items()}
    report["seconds"]["total"] = round(time.perf_counter() - t0, 6)
    progress(1.0, "done")
    return AnalysisResult(method, est, labels, idx, report)


def _non_finite(value, path: str = ""):
    """(path, value) of every NaN or infinite number in a nested summary."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _non_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _non_finite(v, f"{path}[{i}]")
    elif isinstance(value, (float, np.floating)) and not np.isfinite(value):
        yield path, float(value)


def _require_finite(summary: dict, title: str) -> None:
    """A fit whose objective (likelihood, inertia, error, heights) is not finite is an error, not a
    result: no report or label map is written from it."""
    bad = next(_non_finite(summary), None)
    if bad is not None:
        raise ModelError(f"{title} did not converge: its {bad[0].replace('_', ' ')} is {bad[1]} on these "
                         "spectra (try fewer clusters or components, or other bands)")


def _run_on_image(cube, method, m, est, backend, timer, image, progress, t0) -> AnalysisResult:
    """A method fitted on the whole image (MNF: its noise comes from neighbouring pixels), then its images
    (the component images) made from it."""
    from hyperapp.detect.run import load_pixels
    from hyperapp.reading.tiles import check_magnitude, extremes, finite_pixels, no_data_error

    xp = backend.xp
    with timer.stage("load"):
        X = image if image is not None else load_pixels(cube, backend, progress.sub(0.0, 0.3))
    n_nodata = 0
    ext = extremes(X)  # both finite: every value is (and the magnitude check's answer)
    if not np.isfinite(ext).all():
        ext = None
        valid = finite_pixels(X)
        n_nodata = int(valid.size - int(valid.sum()))
        if n_nodata == valid.size:
            raise no_data_error(cube, "every pixel is no data (NaN or the cube's no-data value)")
        fill = X.reshape(-1, X.shape[2])[xp.flatnonzero(valid.reshape(-1))].mean(axis=0)
        X = xp.where(valid[:, :, None], X, fill[None, None, :]).astype(xp.float32)
    check_magnitude(cube, X, ext)
    progress(0.3, f"fitting {m.title}")
    with timer.stage("fit"):
        est.fit(X)
    with timer.stage("images"):
        images = {k: to_host(v) for k, v in est.images(X).items()}
        if n_nodata:  # the pixels without data stood in as the mean for the noise estimate: no component of theirs
            gone = ~to_host(valid)
            for img in images.values():
                img[gone] = np.nan
    report = {
        "method": method,
        "params": {**est.get_params()},
        "selection": {"kind": "image", "n_spectra": int(cube.rows * cube.cols) - n_nodata,
                      "nodata_left_out": n_nodata},
        "device": backend.name,
        "device_name": backend.device_name,
        "cube": cube.path,
        "shape": list(cube.shape),
        **provenance(cube),
        "results": est.summary(),
    }
    _require_finite(report["results"], m.title)
    report["seconds"] = {k: round(v, 6) for k, v in timer.seconds.items()}
    report["seconds"]["total"] = round(time.perf_counter() - t0, 6)
    progress(1.0, "done")
    return AnalysisResult(method, est, None, np.arange(cube.rows * cube.cols), report, images=images)


def _with_wavelengths(header: list, cube) -> list:
    """A table's ``band_N`` columns named with their wavelengths too ("band_12 (650.3 nm)") where they are
    the cube's bands, one column each (k-means centres, GMM means, SOM codebooks): after bands are left
    out, a band's number alone no longer says which wavelength it is. Other headers are kept."""
    import re

    from hyperapp.core.cube import units_text

    cols = [i for i, h in enumerate(header) if re.fullmatch(r"band_\d+", str(h))]
    wl = cube.wavelengths
    if not cols or wl is None or len(cols) != cube.bands or len(wl) != cube.bands:
        return header
    unit = units_text(cube.wavelength_units)
    out = list(header)
    for i in cols:
        b = int(str(header[i])[5:])
        if b >= cube.bands:
            return header
        out[i] = f"band_{b} ({float(wl[b]):.6g}{' ' + unit if unit else ''})"
    return out


def _csv(header: list, rows: list) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else (f"{v:.9g}" if isinstance(v, float) else v) for v in r])
    return buf.getvalue()


def forest_shape(res: dict) -> str:
    """The trees of a forest or CART summary in words: the depth is the deepest tree's, the leaves are
    counted over every tree ("100 trees, the deepest 1 level deep; 199 leaves in all, 2.0 a tree")."""
    t, d, leaves = int(res["n_trees"]), int(res["depth"]), int(res["n_leaves"])
    if t == 1:
        return f"one tree, {d} level(s) deep, {leaves} leaves"
    return f"{t} trees, the deepest {d} level(s) deep; {leaves} leaves in all, {leaves / t:.1f} a tree"


def class_accuracy_words(res: dict, names: list[str] | None = None) -> list[str]:
    """A classifier's per-class accuracy in words, where the overall accuracy hides it: the balanced
    accuracy (the mean of each class's held-out recall) when it is lower, and each class the held-out
    pixels show badly predicted (under half right) or barely tested (under 5 pixels held out). ``names``:
    the classes' names (default "class <value>")."""
    recall, C = res.get("class_recall"), res.get("confusion")
    if not recall or C is None:
        return []
    names = names or [f"class {c}" for c in res.get("classes", range(len(recall)))]
    out = []
    bal = res.get("balanced_accuracy")
    if bal is not None and res.get("test_accuracy") is not None and bal < res["test_accuracy"] - 0.005:
        out.append(f"balanced accuracy {bal:.1%} (mean over the classes)")
    for name, r, row in zip(names, recall, C):
        n = int(sum(row))
        if r is not None and r < 0.5:
            out.append(f"{name}: {int(round(r * n))} of {n} held-out pixels right")
        elif 0 < n < 5:
            out.append(f"{name}: only {n} pixel{'s' if n != 1 else ''} held out")
    return out


def class_table(result: AnalysisResult) -> tuple[np.ndarray, list[str], list[tuple[int, int, int]]]:
    """(label values, names, colours) of an analysis's class map: a classifier's classes with their ROI
    names and colours, or one "cluster k" per cluster (a SOM's: "codebook cluster k", a cluster of its
    neurons, or "neuron k")."""
    from hyperapp.io.writers import class_colour

    classes = getattr(result.model, "classes_", None) if get_analysis(result.method).needs_classes else None
    names = result.report.get("class_names", {})
    colours = result.report.get("class_colours", {})
    if classes is not None:
        values = np.asarray(classes)
        return (values, [names.get(str(int(v)), f"class {int(v)}") for v in values],
                [tuple(colours.get(str(int(v)), class_colour(int(v) - 1))) for v in values])
    values = np.unique(result.labels[result.labels >= 0]) if result.labels is not None else np.zeros(0, int)
    if values.size:
        values = np.arange(int(values.max()) + 1)
    word = UNIT_NAMES.get(result.method, "cluster")
    if result.method == "som":  # the pixels take their best-matching neuron's class: a neuron, or its cluster
        word = "codebook cluster" if int(getattr(result.model, "codebook_clusters", 0) or 0) else "neuron"
    return values, [f"{word} {int(v)}" for v in values], [class_colour(int(v)) for v in values]


def write_class_map(result: AnalysisResult, path: str | Path, cube: Cube, fmt: str = "envi") -> Path:
    """The labels as a class map file (ENVI classification, palette TIFF/GeoTIFF or PNG) with the class
    names and colours of :func:`class_table`."""
    from hyperapp.io.writers import write_classification
    from hyperapp.request import checks as options

    options.out_file(str(path))  # not a folder, in a folder that takes files: before any write
    if result.labels is None:
        raise InputError(f"{result.method} does not label the image: there is no class map to export")
    values, names, colours = class_table(result)
    index = np.full(int(max(values.max(initial=0), result.labels.max(initial=0))) + 2, -1, np.int64)
    index[values.astype(np.int64)] = np.arange(values.size)
    lab = np.where(result.labels >= 0, index[np.maximum(result.labels, 0)], -1)
    return write_classification(path, lab, names, colours, cube, fmt)


def write_analysis(result: AnalysisResult, out_dir: str | Path, cube: Cube, ortho: bool = False) -> dict[str, Path]:
    """Write ``labels.hdr/.img`` (int16, -1 none; when the method labels the image) and the same map as
    an ENVI classification file (``classes.hdr``, with class names and colours), the method's tables
    (CSV) and ``report.json`` into ``out_dir``, each atomically. ``ortho``: the per-pixel maps go onto
    the orthorectified grid of the cube's swath (:func:`orthorectified_analysis`), as ``detect --ortho``'s."""
    from hyperapp.io.atomic import staged_folder

    place = cube
    if ortho:
        result, place = orthorectified_analysis(result, cube)
    with staged_folder(out_dir) as stage:
        paths = _write_analysis(result, stage, cube, place)
    return {k: Path(out_dir) / p.name for k, p in paths.items()}


def _posterior(result: AnalysisResult, cube: Cube):
    """The posterior maps (rows, cols, k) float32 of a GMM's result: the panel's, or computed for the cube."""
    post = result.extra if isinstance(result.extra, np.ndarray) and result.extra.ndim == 3 else None
    if post is None:
        post = posterior_image(result.model, cube, get_backend("cpu"))
    return np.asarray(post, np.float32)


def orthorectified_analysis(result: AnalysisResult, cube: Cube):
    """``result``'s per-pixel maps on the orthorectified grid of ``cube``'s swath (through its GLT: labels
    -1, images and posterior NaN where no swath pixel is seen), and the grid's placement for the writers;
    the report gains ``orthorectified`` (the grid and its size). The tables stay as they are."""
    from dataclasses import replace

    from hyperapp.io.georef import Placement, geo_of, ortho_grid, orthorectify

    swath = geo_of(cube)
    labels = None if result.labels is None else orthorectify(result.labels, swath, fill=-1)
    images = {k: orthorectify(np.asarray(v, np.float32), swath) for k, v in result.images.items()}
    extra = orthorectify(_posterior(result, cube), swath) if result.method in POSTERIOR_METHODS else result.extra
    rep = dict(result.report)
    rep["orthorectified"] = ortho_grid(swath, "labels, classes and maps on the GLT's grid; tables as fitted")
    result.report["orthorectified"] = rep["orthorectified"]  # (the run's summary says where its outputs went)
    return replace(result, labels=labels, images=images, extra=extra, report=rep), Placement(swath.grid, cube.path)


def _write_analysis(result: AnalysisResult, out: Path, cube: Cube, place=None) -> dict[str, Path]:
    """The files of :func:`write_analysis`; ``place``: where the per-pixel maps lie (the cube, or the
    :class:`~hyperapp.io.georef.Placement` of an orthorectified grid)."""
    from hyperapp.io.atomic import atomic_write_bytes, atomic_write_text
    from hyperapp.io.writers import write_envi

    place = cube if place is None else place
    paths: dict[str, Path] = {}
    if result.labels is not None:
        lab = result.labels if result.labels.dtype in (np.int16, np.int32) else result.labels.astype(np.int32)
        paths["labels"] = write_envi(out / "labels", lab, place,
                                     f"hyperapp {result.method} labels (-1 = none)")
        paths["classes"] = write_class_map(result, out / "classes", place)
    for name, img in result.images.items():  # (NaN: the pixels without data)
        img = np.asarray(img, np.float32)
        paths[name] = write_envi(out / name, img, place, f"hyperapp {result.method} {name} (band k = component k)",
                                 nan_is_nodata=bool(np.isnan(img).any()))
    if result.method in POSTERIOR_METHODS:
        post = _posterior(result, cube)
        paths["posterior"] = write_envi(out / "posterior", post, place,
                                        f"hyperapp {result.method} posterior probability per component",
                                        nan_is_nodata=bool(np.isnan(post).any()))
    from hyperapp.core.geo import Swath
    from hyperapp.io.georef import geo_of

    swath = geo_of(place)
    if isinstance(swath, Swath) and (result.labels is not None or result.images or "posterior" in paths):
        from hyperapp.io.writers import write_igm  # maps on a swath's pixels: their places beside them

        paths["igm"] = write_igm(out / "igm", swath, (cube.rows, cube.cols))
    for name, (header, rows) in result.model.tables().items():
        atomic_write_text(out / f"{name}.csv", _csv(_with_wavelengths(header, cube), rows))
        paths[name] = out / f"{name}.csv"
    for name, arr in (result.model.arrays() if hasattr(result.model, "arrays") else {}).items():
        buf = io.BytesIO()
        np.save(buf, np.asarray(arr), allow_pickle=False)
        atomic_write_bytes(out / f"{name}.npy", buf.getvalue())
        paths[name] = out / f"{name}.npy"
    atomic_write_text(out / "report.json", json.dumps(result.report, indent=2) + "\n")
    paths["report"] = out / "report.json"
    return paths


def parse_bands(text, n_bands: int, name: str = "--bands") -> list[int]:
    """``"3,17,40"`` or ``"10-20,40"`` (or a list) -> band indices (0-based, sorted, each once), checked
    against ``n_bands``."""
    from hyperapp.request.checks import band_indices, band_spec

    out = band_indices(band_spec(text, name), name)
    bad = [b for b in out if not 0 <= b < n_bands]
    if bad:
        raise InputError(f"band {bad[0]} is outside the cube's {n_bands} bands (0-based)")
    return out


def range_edge_words(k_values, chosen_k: int, criterion: str) -> str:
    """A word where a k chosen over a range sits at its edge, so a better k may lie outside it: "" when
    it does not, or only one k was tried, or the edge is the smallest k ``criterion`` can score (2 for
    silhouette and Davies-Bouldin, 1 for "bic"), or an elbow chose it (an elbow is never past the range's
    bend). The CLI's summary and the panels' plot titles both say it."""
    ks = [int(k) for k in k_values]
    if len(ks) < 3 or int(chosen_k) not in (ks[0], ks[-1]) or criterion.startswith("elbow"):
        return ""
    if int(chosen_k) == ks[-1]:
        return f"k = {chosen_k} is the largest tried: a larger k may score better (try {ks[0]}..{2 * ks[-1]})"
    lowest = 1 if criterion == "bic" else 2
    if ks[0] > lowest:
        return f"k = {chosen_k} is the smallest tried: a smaller k may score better (try {lowest}..{ks[-1]})"
    return ""
