"""The one detection path: cube + marked pixels -> scores, mask, objects and a report.

The CLI's ``detect``, the GUI's Train & Run and the batch runner all call :func:`run_detection`; none
of them computes anything another way. It reads the cube in tiles (with progress), moves it to the
chosen backend, fits the method from the marked pixels, scores every pixel, thresholds (a value, or
the score that lets through a given false-alarm rate of the non-target pixels), labels objects and,
with a truth mask, evaluates AUC and Pd. Every stage is timed.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hyperapp.core.backend import Timer, get_backend, get_namespace, serial_host_blas, to_host, total
from hyperapp.core.cube import Cube
from hyperapp.core.errors import InputError, ModelError
from hyperapp.core.progress import NULL_PROGRESS, Progress
from hyperapp.detect.budget import (
    _refuse_whole_image_over_budget,
    memory_budget,
    needs_streaming,
    whole_image_error,
)
from hyperapp.detect.cascade import _cascade_boxes, refine_in_boxes
from hyperapp.detect.finish import (
    DetectionResult,
    finish_detection,
    run_report,
)
from hyperapp.detect.outputs import _write_detection
from hyperapp.models.base import (
    BACKGROUND,
    NODATA,
    TARGET,
    UNLABELLED,
    fitted_on,
    sparse_flatnonzero,
    targets_without_data,
)
from hyperapp.models.evaluation import MODE_SCORES
from hyperapp.models.registry import get_method
from hyperapp.request import DetectRequest


def labels_from_masks(shape: tuple[int, int], targets: np.ndarray, background: np.ndarray | None,
                      target_pixels: np.ndarray | None = None) -> np.ndarray:
    """Label map (1 target, 0 background, -1 unlabelled) from boolean masks (``target_pixels``: the
    targets' flat indices, where the caller has listed them)."""
    t = np.asarray(targets, dtype=bool)
    if t.shape != tuple(shape):
        raise InputError(f"target mask is {t.shape}, the image is {tuple(shape)}")
    y = np.full(shape, UNLABELLED, dtype=np.int8)
    flat = y.reshape(-1)
    # the marks are few: listed in one pass over words, then set by index (sparse_flatnonzero)
    if background is not None:
        b = np.asarray(background, dtype=bool)
        if b.shape != tuple(shape):
            raise InputError(f"background mask is {b.shape}, the image is {tuple(shape)}")
        flat[sparse_flatnonzero(b)] = BACKGROUND
    flat[sparse_flatnonzero(t) if target_pixels is None else target_pixels] = TARGET
    return y


def load_pixels(cube: Cube, backend, progress: Progress, dtype=np.float32, tile_bytes: int | None = None,
                helper: bool = False, reader=None):
    """The cube (good bands) as a (rows, cols, bands) array on the backend, no-data pixels NaN.

    Raw tiles (``tile_bytes`` of stored data each; :data:`hyperapp.reading.tiles.TILE_BYTES` by default) are
    read ahead on a thread (``helper``: in the reading helper process, :mod:`hyperapp.reading.reader_process`)
    and converted where the pixels go (on the GPU after an asynchronous copy through page-locked
    memory): :func:`hyperapp.reading.tiles.read_float32`. ``reader``: the cube's
    :class:`hyperapp.reading.tiles.TileReader`, made by the caller (a batch starts it early).
    """
    from hyperapp.reading.tiles import read_float32

    data = read_float32(cube, backend.xp, progress, tile_bytes, helper, reader)
    return data if dtype == np.float32 else data.astype(dtype)


def run_detection(
    cube: Cube,
    request: DetectRequest,
    targets: np.ndarray | None = None,
    background: np.ndarray | None = None,
    *,
    truth: np.ndarray | None = None,
    model=None,
    image=None,
    progress: Progress = NULL_PROGRESS,
    scores_file=None,
    target_spectra=None,
    undesired_spectra=None,
    signature_info: dict | None = None,
) -> DetectionResult:
    """Run ``request`` (:class:`~hyperapp.request.DetectRequest`: the method, its options, the device,
    the threshold rule, memory, MNF and the target filter) on the cube: fit the method from the marked
    pixels (or use a fitted ``model``) and score every pixel.

    The request names its inputs as files; the arrays here are those inputs read (the window's clicks
    are never files): :func:`read_inputs` reads a request's files into them.

    A cube whose pixels do not fit the memory budget (``request.memory`` GB of host memory, default half of
    what is available; or half the GPU's free memory) is streamed from its file in two passes
    (:func:`hyperapp.detect.streamed.run_streamed`); otherwise it is read once and held (on the GPU for
    the GPU backend). No-data pixels (NaN, or the cube's no-data value) are left out of every fit and
    statistic and get a NaN score, never a detection.

    The stages, in order: check the inputs (:func:`_check_inputs`), load the pixels and find the no-data
    ones (:func:`_load_labelled`), build and fit the model (:func:`_estimator`, :func:`_fit`), score every
    pixel (:func:`_score`), threshold, label objects and evaluate (:func:`finish_detection`), then complete
    the report (:func:`_complete_result`).

    Parameters
    ----------
    cube : Cube
    request : DetectRequest
        What to run (checked by the front end: :meth:`~hyperapp.request.DetectRequest.check`).
    targets, background : bool (rows, cols) arrays
        Marked pixels. ``targets`` may be None only for methods that do not use targets (RX) or when
        a fitted ``model`` is given.
    truth : bool (rows, cols), optional
        Ground truth; the report then carries AUC and Pd (target clicks excluded).
    model : fitted estimator, optional
        Skip training and score with this model.
    image : backend array, optional
        The cube's pixels already on the device (the GUI keeps them there between runs).
    scores_file : path, optional
        Where a streamed run writes its scores tile by tile (:func:`detect_to_folder` names the
        output's own data file); unused in memory.
    target_spectra : (k, bands) array, optional
        Target spectra on the cube's bands (a spectral library's, :func:`hyperapp.io.speclib.library_targets`)
        used instead of the clicks' mean: no clicks needed. Several give one detector each, the score
        the highest of them.
    undesired_spectra : (q, bands) array, optional
        Signatures to suppress (OSP, TCIMF, MTTCIMF) or to train as background (RBFN).
    signature_info : dict, optional
        Where the spectra came from (names, library, notes), copied into the report.
    """
    method, params, far, threshold = request.method, request.params, request.far, request.threshold
    memory, mnf = request.memory, request.mnf
    m = get_method(method)
    backend = get_backend(request.device)
    timer = Timer(backend)
    y, target_spectra, undesired_spectra, truth_pixels, marked = _check_inputs(
        m, cube, targets, background, truth=truth, far=far, threshold=threshold, model=model, mnf=mnf,
        target_spectra=target_spectra, undesired_spectra=undesired_spectra, signature_info=signature_info,
        continuum=request.continuum_removed)
    t0 = time.perf_counter()
    if image is None:
        _refuse_whole_image_over_budget(cube, m, mnf, memory)
        if request.continuum_removed and cube.rows * cube.cols * cube.bands * 4 > memory_budget(memory):
            raise whole_image_error(cube, f"{method} on continuum-removed spectra (--continuum-removed)")
    if image is None and m.kind == "pixel" and mnf is None and not request.continuum_removed \
            and needs_streaming(cube, backend, memory):
        return _run_streamed(cube, m, y, backend, params=params, truth=truth, far=far, threshold=threshold,
                             model=model, progress=progress, scores_file=scores_file, target_spectra=target_spectra,
                             undesired_spectra=undesired_spectra, signature_info=signature_info,
                             filters=request.filters)
    px = _load_labelled(cube, y, backend, timer, image, progress, marked)
    if m.kind == "window":  # (a pixel detector's constant scores say it after scoring: _refuse_constant_scores)
        _refuse_one_spectrum(px.X, backend.xp)
    if model is None and m.uses_background and px.n_targets and px.n_background:
        _refuse_contradictory_marks(px, cube.cols)
    est, params = _estimator(m, model, params, target_spectra, mnf, px, timer,
                             _wavelengths(cube) if request.continuum_removed else False)
    if model is None:
        est = _fit(m, est, px, params, target_spectra, undesired_spectra, timer, progress.sub(0.45, 0.7))
    progress(0.7, "scoring")
    # a window detector trained from this scene's clicks saw a handful of pixels: the boxes say where to
    # look, and an RBFN from the same clicks scores the pixels inside them (:func:`refine_in_boxes`), so
    # the false-alarm rate sets the mask as for every pixel detector
    refine = m.kind == "window" and px.n_targets > 0 and (model is None or bool(getattr(est, "refine", False)))
    scores_dev, maps_dev, boxes, rbfn_dev = _score(est, px, refine, timer)
    # the threshold's, not an output (a cascade's are its RBFN's: its threshold and its boxes' take them)
    mode = maps_dev.pop(MODE_SCORES, None)
    if m.kind == "window" and not refine and threshold is None:
        threshold, far = 0.0, None  # a model from elsewhere and no clicks: the box mask
    report = run_report(method, params, backend, cube, False, px.n_targets, px.n_background, px.n_nodata)
    if px.sums_taken:
        report["background_sums"] = px.sums_taken  # the click's true time: "computed" includes them
    if getattr(est, "reused_", None) is not None and model is None:
        report["fit_reused"] = list(est.reused_)  # what the fit took from the last click's (rbfn_reuse)
    # a cascade scores every pixel (its RBFN's, lifted in the boxes): its false-alarm threshold leaves out
    # the targets nobody clicked as a pixel detector's does (a plain quantile counted them as false alarms,
    # and at 1e-3 on land kept 20 of 218 target pixels where the ROC gave 0.98 of them)
    result = finish_detection(method, scores_dev, px.y_dev, report, timer, truth=truth,
                              truth_pixels=truth_pixels, far=far,
                              threshold=threshold, progress=progress, mode_scores=mode,
                              separate_targets=True if refine else None, filters=request.filters,
                              clicked=px.target_pixels)
    if request.continuum_removed:
        result.report["continuum_removed"] = True
    if rbfn_dev is not None:
        boxes = _cascade_boxes(boxes, result, rbfn_dev, px.y_dev, far, threshold, mode)
    result.model, result.boxes = est, boxes
    _complete_result(result, est, px, maps_dev, timer, mnf=mnf, target_spectra=target_spectra,
                     undesired_spectra=undesired_spectra, signature_info=signature_info)
    result.report["seconds"]["total"] = round(time.perf_counter() - t0, 6)
    progress(1.0, "done")
    return result


@dataclass
class _Pixels:
    """The cube's pixels on the device and their labels, as the fit and the scoring take them."""

    #: (rows, cols, bands) on the backend; no-data pixels NaN (a window detector's: the mean of the rest)
    X: object
    #: host int8 labels (1 target, 0 background, -1 unlabelled, -2 no data)
    y: np.ndarray
    #: the labels on the device: every later count and mask uses them
    y_dev: object
    #: (rows, cols) bool on the device of the pixels with data; None when every pixel has data
    valid: object
    n_nodata: int
    n_targets: int
    n_background: int
    #: what the clicks on a resident image (``image=``) share: its no-data test and background sums
    #: (:mod:`hyperapp.detect.resident`); None for pixels read for this run
    resident: object = None
    #: whether the fit took the resident image's background sums "computed" by this click or "reused"
    sums_taken: str | None = None
    #: the target pixels' flat indices (host, sorted)
    target_pixels: np.ndarray | None = None
    #: the labels' lists as :func:`hyperapp.models.base.label_lists` gives them (targets, marked background,
    #: no data, pixel count)
    label_lists: tuple | None = None


def _check_inputs(m, cube: Cube, targets, background, *, truth, far, threshold, model, mnf, target_spectra,
                  undesired_spectra, signature_info=None, continuum=False):
    """Check the run's inputs against the method and the cube before any pixel is read; returns the label
    map (:func:`labels_from_masks`), the target and undesired spectra as float64 (k, bands) arrays, and
    the truth's target pixels as flat indices (None without a truth): each full-size mask is listed once.
    ``signature_info`` (:func:`hyperapp.io.signatures.signature_kwargs`') names the spectra in messages."""
    method = m.name
    shape = (cube.rows, cube.cols)
    if cube.bands < m.min_bands:
        raise InputError(f"{m.title} compares spectral shapes and needs {m.min_bands} bands or more; the run has "
                         f"{cube.bands}: in one band every spectrum has the same shape (choose more bands, or "
                         "use RX, the matched filter, CEM or the RBFN)")
    if target_spectra is not None:
        target_spectra = np.atleast_2d(np.asarray(target_spectra, np.float64))
        if not m.uses_targets:
            raise InputError(f"method {method} takes no target: drop --target-spectra")
        if m.kind != "pixel":
            from hyperapp.request.checks import library_window_error

            raise InputError(library_window_error(method, "--target-spectra"))
        if target_spectra.shape[1] != cube.bands:
            raise InputError(f"target spectra have {target_spectra.shape[1]} bands, the cube {cube.bands}")
    if undesired_spectra is not None:
        undesired_spectra = np.atleast_2d(np.asarray(undesired_spectra, np.float64))
        if not m.uses_undesired:
            raise InputError(f"method {method} does not use undesired signatures; OSP, TCIMF, MTTCIMF and the "
                             "RBFN do")
        if undesired_spectra.shape[1] != cube.bands:
            raise InputError(f"undesired spectra have {undesired_spectra.shape[1]} bands, the cube {cube.bands}")
        if target_spectra is not None:  # before a pixel is read (clicked targets: at fitting)
            from hyperapp.models.subspace import check_undesired_apart

            info = signature_info or {}
            check_undesired_apart(target_spectra, undesired_spectra, info.get("target_names"),
                                  info.get("undesired_names"))
    if targets is None:
        if m.uses_targets and model is None and target_spectra is None:
            raise InputError(f"method {method} needs target pixels (--targets) or target spectra "
                             "(--target-spectra)")
        targets = np.zeros(shape, dtype=bool)
    clicked = sparse_flatnonzero(np.asarray(targets, bool)) if np.shape(targets) == shape else None
    y = labels_from_masks(shape, targets, background, clicked)
    # the marked pixels (sorted), listed from the masks' lists instead of another pass over the labels
    marked = clicked if background is None else None
    if far is not None and threshold is not None:
        raise InputError("give either a false-alarm rate or a threshold, not both")
    truth_pixels = None
    if truth is not None:
        t = np.asarray(truth, bool)
        if t.shape != shape:
            raise InputError(f"truth mask is {t.shape}, the image is {shape}")
        # the evaluation leaves the clicked pixels out: checked before any work, not after it
        from hyperapp.io.masks import check_truth_beside_clicks

        truth_pixels = sparse_flatnonzero(t)
        check_truth_beside_clicks(t, targets, truth_pixels=truth_pixels, clicked=clicked)
    if mnf is not None and (m.kind != "pixel" or model is not None):
        raise InputError(f"--mnf runs a pixel detector it trains in MNF space; {method} "
                         f"{'is not a pixel detector' if m.kind != 'pixel' else 'is given as a fitted model'}")
    if continuum and (m.kind != "pixel" or model is not None):
        raise InputError(f"--continuum-removed runs a pixel detector it trains on continuum-removed spectra; {method} "
                         f"{'is not a pixel detector' if m.kind != 'pixel' else 'is given as a fitted model'}")
    if mnf is not None and int(mnf) > cube.bands:
        raise InputError(f"--mnf {int(mnf)} asks for more MNF components than the cube's {cube.bands} bands",
                         cube.path)
    return y, target_spectra, undesired_spectra, truth_pixels, marked


def _run_streamed(cube: Cube, m, y, backend, *, params, truth, far, threshold, model, progress, scores_file,
                  target_spectra, undesired_spectra, signature_info, filters) -> DetectionResult:
    """The run of a cube larger than the memory budget: :func:`hyperapp.detect.streamed.run_streamed`."""
    from hyperapp.detect.streamed import run_streamed

    if target_spectra is not None and target_spectra.shape[0] > 1:
        raise InputError(f"{m.name} with several target spectra needs the cube in memory, and it exceeds the "
                         "memory budget: pick one (--spectra NAME), raise --memory, or crop the cube", cube.path)
    result = run_streamed(cube, m.name, y, params=params, backend=backend, truth=truth, far=far,
                          threshold=threshold, model=model, progress=progress, scores_file=scores_file,
                          target_mean=None if target_spectra is None else target_spectra[0],
                          undesired=undesired_spectra, filters=filters)
    _report_signatures(result, result.model, target_spectra, undesired_spectra, signature_info)
    return result


def _load_labelled(cube: Cube, y: np.ndarray, backend, timer, image, progress: Progress,
                   marked: np.ndarray | None = None) -> _Pixels:
    """Load the pixels (or take ``image``, already on the device), find the no-data pixels (labelled
    no data in ``y``) and count the marks (``marked``: the marked pixels' sorted flat indices, where the
    caller listed them; listed here again where no-data pixels join them)."""
    from hyperapp.reading.tiles import check_magnitude, extremes, finite_pixels, no_data_error

    with timer.stage("load"):
        X = image if image is not None else load_pixels(cube, backend, progress.sub(0.0, 0.4))
    if X.shape[2] != cube.bands:
        raise InputError(f"pixels on the device have {X.shape[2]} bands, the cube has {cube.bands}")
    progress(0.45, "training")
    xp = backend.xp
    held = None
    if image is not None:
        from hyperapp.detect.resident import resident

        held = resident(image)
    with timer.stage("no-data"):
        # the largest and smallest value answer the common case (both finite: every value is) and give the
        # magnitude check its answer; only a cube with no-data pixels pays for the per-pixel test. A
        # resident image's answers are its first click's (hyperapp.detect.resident)
        if held is not None:
            ext = held.extremes()
            valid, valid_h, n_nodata = held.valid()
        else:
            ext = extremes(X)
            if np.isfinite(ext).all():
                valid, n_nodata = None, 0
            else:
                valid = finite_pixels(X)
                n_nodata = int(valid.size - int(total(valid, np.int64)))
            valid_h = to_host(valid) if n_nodata else None
        if n_nodata:
            if ((y == TARGET) & ~valid_h).any():
                raise no_data_error(cube, targets_without_data(y, valid_h, cube.cols))
            if n_nodata == valid.size:
                raise no_data_error(cube, "every pixel is no data (NaN or the cube's no-data value)")
            y[~valid_h] = NODATA
        if held is None or not held.magnitude_checked:
            check_magnitude(cube, X, ext)
            if held is not None:
                held.magnitude_checked = True
    # a pixel marked both ways is a target (labels_from_masks): the counts come from the labels' marks
    if marked is None or n_nodata:
        marked = sparse_flatnonzero(y, UNLABELLED)
    marks = y.reshape(-1)[marked]
    targets = marked[marks == TARGET]
    lists = (targets, marked[marks == BACKGROUND], marked[marks == NODATA], int(y.size))
    return _Pixels(X, y, _labels_on(y, marked, marks, valid, xp), valid, n_nodata,
                   int(targets.size), int(lists[1].size), held, target_pixels=targets, label_lists=lists)


def _labels_on(y: np.ndarray, marked: np.ndarray, marks: np.ndarray, valid, xp):
    """The labels ``y`` on ``xp``'s device. On the GPU, where the marks are few (clicks), the map is made
    there from them and the no-data map ``valid`` (a copy of kilobytes, where the map's own is a byte a
    pixel, pageable: 4 MB at 2048 x 2048); same values."""
    if xp is np:
        return xp.asarray(y)
    clicks = marks != NODATA
    if int(np.count_nonzero(clicks)) * 16 > y.size:
        return xp.asarray(y)
    y_dev = xp.full(y.shape, UNLABELLED, xp.int8)
    if clicks.any():
        y_dev.reshape(-1)[xp.asarray(marked[clicks])] = xp.asarray(marks[clicks].astype(np.int8))
    if valid is not None:
        y_dev = xp.where(valid.reshape(y.shape), y_dev, xp.asarray(NODATA, xp.int8))
    return y_dev


def _wavelengths(cube: Cube):
    """The cube's band centres where it has one per band, else None (the band index serves)."""
    wl = cube.wavelengths
    return wl if wl is not None and len(wl) == cube.bands else None


def _estimator(m, model, params: dict | None, target_spectra, mnf, px: _Pixels, timer, continuum=False):
    """The estimator to fit (built from ``params``, a library's defaults under them) or the given
    ``model`` on the run's backend, wrapped in MNF space for ``mnf`` and on continuum-removed spectra
    unless ``continuum`` is False (else the wavelengths, or None:
    :class:`~hyperapp.models.continuum.InContinuum`); returns it and the params used.
    A window detector or an MNF (its noise from neighbouring pixels) needs the image's geometry: its
    no-data pixels take the mean of the pixels with data (their scores are dropped after scoring; the
    streamed MNF fills them alike)."""
    xp = get_namespace(px.X)
    if model is None and target_spectra is not None and m.library_params:
        params = {**m.library_params, **(params or {})}
    est = fitted_on(model, xp) if model is not None else m.build(**(params or {}))
    if mnf is not None:
        from hyperapp.models.mnf import InMNF

        est = InMNF(est, int(mnf))
    if continuum is not False:
        from hyperapp.models.continuum import InContinuum

        est = InContinuum(est, continuum)
    if px.n_nodata and (m.kind != "pixel" or getattr(est, "stream_stats", None) in (None, "mnf")):
        with timer.stage("no-data"):
            X = px.X
            fill = X.reshape(-1, X.shape[2])[xp.flatnonzero(px.valid.reshape(-1))].mean(axis=0)
            px.X = xp.where(px.valid[:, :, None], X, fill[None, None, :]).astype(xp.float32)
    return est, params


def _fit(m, est, px: _Pixels, params, target_spectra, undesired_spectra, timer, progress: Progress):
    """Fit ``est`` on the loaded pixels: from target and undesired spectra (:func:`fit_signatures`) or from
    the marks; a statistics-based pixel detector over the pixels with data only. Returns the fitted model."""
    xp = get_namespace(px.X)
    X = px.X
    kind = getattr(est, "stream_stats", None)
    # a resident image's background sums, taken on its first click and reused (hyperapp.detect.resident):
    # the fit reads the clicked rows alone, and the labels mark the pixels outside the sums no data
    sums = None
    if px.resident is not None and px.resident.image is X and m.kind == "pixel" \
            and getattr(est, "accepts_sums", False) and kind in ("background", "correlation"):
        px.sums_taken = "reused" if px.resident.has_sums else "computed"
        with timer.stage("background sums"):  # (0 but on an image's first click)
            sums = px.resident.sums()
    # statistics over the pixels with data only
    keep = xp.flatnonzero(px.valid.reshape(-1)) \
        if px.n_nodata and sums is None and kind in ("background", "correlation", "none") else None
    # on the GPU the fit's host work is band-sized linear algebra: one BLAS thread (serial_host_blas)
    with timer.stage("fit"), (serial_host_blas if xp is not np else contextlib.nullcontext()):
        if target_spectra is not None or undesired_spectra is not None:
            y_fit = px.y if getattr(est, "labels_on_host", False) else px.y_dev
            X_fit = X
            if keep is not None:
                X_fit, y_fit = X.reshape(-1, X.shape[2])[keep], px.y_dev.reshape(-1)[keep]
            return fit_signatures(m, params, est, X_fit, y_fit, target_spectra, undesired_spectra, px.n_targets,
                                  progress, {} if sums is None else {"sums": sums})
        fit_kwargs = {"progress": progress} if getattr(est, "accepts_progress", False) else {}
        if getattr(est, "accepts_check_input", False):
            fit_kwargs["check_input"] = False  # the no-data stage has just tested every value
        if sums is not None:
            est.fit(X, px.y_dev, sums=sums, **fit_kwargs)
        elif keep is not None and m.kind == "pixel":
            est.fit(X.reshape(-1, X.shape[2])[keep], px.y_dev.reshape(-1)[keep], **fit_kwargs)
        else:
            # a model that sorts the labels on the host (it names the pixels it samples) takes the
            # host copy: the device copy would only travel back; and their lists, where it takes them
            if getattr(est, "accepts_label_lists", False):
                fit_kwargs["label_lists"] = px.label_lists
            if getattr(est, "accepts_score_next", False):
                fit_kwargs["score_next"] = True  # (_score takes these very pixels next)
            if getattr(est, "accepts_kept", False) and px.resident is not None and px.resident.image is X:
                fit_kwargs["kept"] = px.resident.kept  # (what the last click's fit on this image computed)
            est.fit(X, px.y if getattr(est, "labels_on_host", False) else px.y_dev, **fit_kwargs)
    return est


def _score(est, px: _Pixels, refine: bool, timer):
    """Score every pixel (no-data pixels NaN). Returns the scores, further maps (MTMF's infeasibility),
    a window detector's boxes and, with ``refine``, the RBFN's own scores of the cascade (else None)."""
    xp = get_namespace(px.X)
    maps_dev: dict = {}
    with timer.stage("score"):
        if hasattr(est, "score_maps"):
            scores_dev, maps_dev = est.score_maps(px.X)
        else:
            scores_dev = est.decision_function(px.X)
    boxes = list(getattr(est, "boxes_", []))
    rbfn_dev = None
    if refine:
        with timer.stage("refine"):
            scores_dev, rbfn_dev, maps_dev = refine_in_boxes(px.X, px.y_dev, scores_dev > 0, xp)
    if px.n_nodata:
        scores_dev = xp.where(px.valid, scores_dev, xp.float32(np.nan)).astype(scores_dev.dtype)
    return scores_dev, maps_dev, boxes, rbfn_dev


def _complete_result(result: DetectionResult, est, px: _Pixels, maps_dev: dict, timer, *, mnf, target_spectra,
                     undesired_spectra, signature_info) -> None:
    """The rest of the report (MNF components, where the signatures came from, the boxes, the stage
    times) and the further maps' host copies."""
    xp = get_namespace(px.X)
    if mnf is not None:
        first = est.estimators_[0] if hasattr(est, "estimators_") else est  # (several targets: one each)
        if not hasattr(first, "mnf_"):  # on continuum-removed spectra: the MNF-space detector inside
            first = first.detector_
        result.report["mnf_components"] = int(first.mnf_.n_components_)
    if maps_dev:
        with timer.stage("copy"):
            for k, v in maps_dev.items():
                if px.n_nodata and v.dtype.kind == "f":
                    v = xp.where(px.valid, v, xp.float32(np.nan))
                result.maps[k] = to_host(v)
    _report_signatures(result, est, target_spectra, undesired_spectra, signature_info)
    if result.boxes:
        result.report["boxes"] = len(result.boxes)
        result.report["windows_per_level"] = list(getattr(est, "windows_per_level_", []))
    result.report["seconds"] = {k: round(v, 6) for k, v in timer.seconds.items()}


def _report_signatures(result: DetectionResult, est, target_spectra, undesired_spectra, signature_info) -> None:
    """The report's ``signatures``: where the targets and undesired signatures came from (given, ATGP's)."""
    if signature_info or target_spectra is not None or undesired_spectra is not None:
        info = dict(signature_info or {})
        info.setdefault("targets", "library" if target_spectra is not None else "clicks")
        info["n_undesired_given"] = 0 if undesired_spectra is None else int(undesired_spectra.shape[0])
        src = getattr(est, "undesired_source_", None)
        if src is not None:
            info["undesired_source"] = src
            info["n_undesired_used"] = int(np.asarray(getattr(est, "undesired_", np.zeros((0, 1)))).shape[0])
        result.report["signatures"] = info


def fit_signatures(m, params, est, X, y, target_spectra, undesired, n_targets: int, progress=NULL_PROGRESS,
                   fit_kwargs: dict | None = None):
    """Fit ``est`` from target spectra (a library's; or the clicks' mean when only ``undesired`` are given)
    and undesired signatures, through each detector's ``fit_signature``: one detector per target
    spectrum (:class:`~hyperapp.models.base.PerTarget` when there are several). ``fit_kwargs`` go to each
    ``fit_signature`` (a resident image's ``sums``)."""
    from hyperapp.models.base import PerTarget

    xp = get_namespace(X)
    if target_spectra is None:
        if n_targets == 0:
            raise InputError("no target: click target pixels or give target spectra")
        P = X.reshape(-1, X.shape[-1])
        yf = xp.asarray(y).reshape(-1)
        target_spectra = to_host(P[xp.flatnonzero(xp.equal(yf, TARGET))].astype(xp.float64).mean(axis=0))[None, :]
    import copy

    kw = {"progress": progress} if getattr(est, "accepts_progress", False) else {}
    kw.update(fit_kwargs or {})
    proto = copy.deepcopy(est) if len(target_spectra) > 1 else None  # unfitted, for the further targets
    ests = []
    for i, t in enumerate(target_spectra):
        e = est if i == 0 else copy.deepcopy(proto)
        # the labels go along: clicked targets leave the background, no-data pixels every sample
        ests.append(e.fit_signature(X, xp.asarray(t), y=y, undesired=undesired, check_input=False, **kw))
    return ests[0] if len(ests) == 1 else PerTarget(ests)


def _refuse_contradictory_marks(px: _Pixels, cols: int) -> None:
    """A background pixel marked with the very spectrum of a target pixel asks a network to learn one
    spectrum as both: it trained, and marked the background pixel a target, without a word. Only the
    marked pixels come to the host."""
    from hyperapp.models.base import BACKGROUND, TARGET

    y = px.y.reshape(-1)
    it, ib = np.flatnonzero(y == TARGET), np.flatnonzero(y == BACKGROUND)
    flat = px.X.reshape(-1, px.X.shape[-1])
    xp = get_namespace(flat)
    t = np.ascontiguousarray(to_host(flat[xp.asarray(it)]))
    b = np.ascontiguousarray(to_host(flat[xp.asarray(ib)]))
    rows = {row.tobytes(): i for i, row in zip(it, t)}
    for j, row in zip(ib, b):
        i = rows.get(row.tobytes())
        if i is not None:
            raise InputError(f"background pixel (row {j // cols}, col {j % cols}) holds the same spectrum as target "
                             f"pixel (row {i // cols}, col {i % cols}): a network cannot learn it as both; unmark "
                             "one of them")


def _refuse_one_spectrum(X, xp) -> None:
    """Every pixel with data holding the same spectrum (a constant or all-zero cube) leaves a window
    detector nothing to find, and its empty box mask would read as "no target here"; said instead.
    (No-data pixels hold the mean of the rest in a window detector's pixels.) One pass on the device."""
    flat = X.reshape(-1, X.shape[-1])
    lo, hi = flat.min(axis=0), flat.max(axis=0)
    # ufuncs, not operators with a scalar: hyperapp.core.backend, scalar operators
    if bool(xp.all(xp.less_equal(xp.subtract(hi, lo), xp.multiply(xp.maximum(xp.abs(lo), xp.abs(hi)), 1e-6)))):
        raise ModelError("every pixel with data holds the same spectrum (a constant or all-zero cube): "
                         "nothing can stand out")


def detect_to_folder(cube: Cube, request: DetectRequest, targets, background, out_dir: str | Path,
                     ortho: bool = False, **kwargs):
    """:func:`run_detection` and its outputs in ``out_dir``, all or nothing: the run happens inside the
    staging folder, so a streamed run writes its scores straight into the final data file, tile by
    tile. ``ortho``: the outputs on the swath's orthorectified grid (:func:`hyperapp.detect.outputs.orthorectified`;
    the swath's scores are then kept in memory). Returns the result and the output paths."""
    from hyperapp.detect.outputs import check_ortho
    from hyperapp.io.atomic import staged_folder

    check_ortho(cube, ortho)
    with staged_folder(out_dir) as stage:
        result = run_detection(cube, request, targets, background,
                               scores_file=None if ortho else stage / "scores.img", **kwargs)
        paths = _write_detection(result, stage, cube, ortho)
    return result, {k: Path(out_dir) / p.name for k, p in paths.items()}


