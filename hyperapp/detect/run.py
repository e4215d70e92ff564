"""The one detection path: cube + marked pixels -> scores, mask, objects and a report.

The CLI's ``detect``, the GUI's Train & Run and the batch runner all call :func:`run_detection`; none
of them computes anything another way. It reads the cube in tiles (with progress), moves it to the
chosen backend, fits the method from the marked pixels, scores every pixel, thresholds (a value, or
the score that lets through a given false-alarm rate of the non-target pixels), labels objects and,
with a truth mask, evaluates AUC and Pd. Every stage is timed.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hyperapp.core.backend import Timer, get_backend, get_namespace, serial_host_blas, to_host, to_host_pinned
from hyperapp.core.cube import Cube, provenance
from hyperapp.core.errors import InputError, ModelError
from hyperapp.core.progress import NULL_PROGRESS, Progress
from hyperapp.models.base import BACKGROUND, NODATA, TARGET, UNLABELLED, fitted_on, sparse_flatnonzero
from hyperapp.models.evaluation import MODE_SCORES, NO_FINITE_SCORE, evaluate, far_threshold
from hyperapp.models.postprocess import label_objects, object_columns, object_table, objects_csv, table_rows
from hyperapp.models.registry import get_method

DEFAULT_FAR = 1e-3
#: a cube whose float32 pixels exceed this fraction of the GPU's free memory is scored in tiles
GPU_FRACTION = 0.5


def needs_tiling(cube: Cube, backend) -> bool:
    """Whether the cube is too large to hold on the GPU at once."""
    if not backend.is_gpu:
        return False
    from hyperapp.core.backend import gpu_free_bytes

    return cube.rows * cube.cols * cube.bands * 4 > GPU_FRACTION * gpu_free_bytes(backend.xp)


@dataclass
class DetectionResult:
    """What a detection run produced (host arrays), plus the fitted model and the report.

    The object table is built on first use (the CLI's ``objects.csv``, the GUI's Objects tab): the
    live path keeps only the object count, computed on the device.
    """

    method: str
    scores: np.ndarray
    mask: np.ndarray
    threshold: float
    report: dict
    model: object = None
    boxes: list[dict] = field(default_factory=list)
    #: further per-pixel maps the detector gives beside its scores (MTMF's "infeasibility"), host arrays
    maps: dict = field(default_factory=dict)
    _objects: list[dict] | None = None
    _columns: dict | None = None
    #: (labels, scores, object count) on the run's device, kept until the table is built from them
    _device: tuple | None = None

    @property
    def object_columns(self) -> dict:
        """The object table as columns (:func:`hyperapp.models.postprocess.object_columns`)."""
        if self._columns is None:
            if self._device is not None:
                labels, scores, n = self._device
                self._columns = object_columns(None, scores, labels=labels, n=n)
                self._device = None
            else:
                self._columns = object_columns(self.mask, self.scores)
        return self._columns

    @property
    def objects(self) -> list[dict]:
        """The object table's rows, highest peak score first."""
        if self._objects is None:
            self._objects = table_rows(self.object_columns)
        return self._objects

    def remask(self, threshold: float) -> np.ndarray:
        """Mask for another threshold (the GUI's slider) without recomputing scores."""
        return mask_at(self.scores, threshold)

    def objects_at(self, threshold: float) -> list[dict]:
        """The object table at ``threshold`` (the run's own table at its own threshold)."""
        return self.objects if threshold == self.threshold else objects_at(self.scores, threshold)


# ---------------------------------------------------------------------- threshold -> mask -> objects
# The one home of these steps for every caller: the run's end (finish_detection, on the device), the
# window's threshold slider, its exports and the batch job's outputs.
def mask_at(scores, threshold: float) -> np.ndarray:
    """uint8 (rows, cols) mask of the pixels scoring above ``threshold`` (NaN, no data: never)."""
    s = np.asarray(scores)
    with np.errstate(invalid="ignore"):
        return np.greater(s, np.float32(threshold) if s.dtype == np.float32 else threshold).view(np.uint8)


def count_at(scores, threshold: float) -> tuple[int, int]:
    """(pixels, objects) above ``threshold`` (8-connected objects, as :func:`objects_at` labels them)."""
    m = mask_at(scores, threshold)
    _, n = label_objects(m.astype(bool))
    return int(m.sum()), int(n)


def objects_at(scores, threshold: float) -> list[dict]:
    """The object table (label, size, centroid, peak score, bounding box) at ``threshold``."""
    return object_table(mask_at(scores, threshold).astype(bool), np.asarray(scores))


def operating_point(scores, truth, threshold: float, exclude=None) -> tuple[float, float]:
    """(false-alarm rate, detection rate) of ``threshold`` against a truth mask, counted as the ROC
    counts them (pixels with data; ``exclude``: the clicked targets)."""
    from hyperapp.models.evaluation import _split

    pos, neg = _split(np.asarray(scores), np.asarray(truth) > 0, exclude)
    far = float((neg > threshold).sum()) / max(int(neg.size), 1)
    pd = float((pos > threshold).sum()) / max(int(pos.size), 1)
    return far, pd


#: what :func:`write_detection_item` writes
DETECTION_ITEMS = ("scores", "mask", "objects", "boxes", "report")


def write_detection_item(result: DetectionResult, kind: str, path: str | Path, cube: Cube,
                         threshold: float | None = None, fmt: str = "envi") -> Path:
    """Write one output of a run at ``threshold`` (default: the run's own): ``scores`` or ``mask`` as an
    image in ``fmt`` (:func:`hyperapp.io.writers.write_image`), ``objects`` (CSV), ``boxes`` (CSV and
    GeoJSON beside it) or ``report`` (JSON, with the threshold used). Returns the path written."""
    from hyperapp.io.atomic import atomic_write_text
    from hyperapp.io.writers import MASK_CLASSES, write_envi, write_image

    t = result.threshold if threshold is None else float(threshold)
    p = Path(path)
    if kind == "scores":
        data = result.scores.astype(np.float32, copy=False)
        if fmt == "envi":
            return write_envi(p, data, cube, f"hyperapp {result.method} scores (higher = more target-like)",
                              nan_is_nodata=bool(result.report.get("nodata_pixels")))
        return write_image(p, data, fmt, cube)
    if kind == "mask":
        data = result.mask.astype(np.uint8) if t == result.threshold else mask_at(result.scores, t)
        if fmt == "envi":
            return write_envi(p, data, cube, f"hyperapp {result.method} detection mask, threshold {t:.6g}",
                              classes=MASK_CLASSES)
        return write_image(p, data, fmt, cube)
    if kind == "objects":
        table = result.object_columns if t == result.threshold else result.objects_at(t)
        atomic_write_text(p, objects_csv(table))
        return p
    if kind == "boxes":
        from hyperapp.io.objects import boxes_csv, boxes_geojson

        if not result.boxes:
            raise InputError("no boxes to export: run the FFBP detector first")
        atomic_write_text(p.with_suffix(".csv"), boxes_csv(result.boxes))
        atomic_write_text(p.with_suffix(".geojson"), boxes_geojson(result.boxes, cube.map_info))
        return p.with_suffix(".csv")
    if kind == "report":
        rep = dict(result.report)
        if t != result.threshold:
            pixels, n = count_at(result.scores, t)
            rep.update({"threshold": t, "far": None, "detections": pixels, "objects": n})
        atomic_write_text(p, json.dumps(rep, indent=2) + "\n")
        return p
    raise InputError(f"unknown detection output {kind!r}; choose one of {', '.join(DETECTION_ITEMS)}")


def labels_from_masks(shape: tuple[int, int], targets: np.ndarray, background: np.ndarray | None) -> np.ndarray:
    """Label map (1 target, 0 background, -1 unlabelled) from boolean masks."""
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
    flat[sparse_flatnonzero(t)] = TARGET
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


def memory_budget(limit: float | None = None) -> int:
    """Bytes of host memory a run may hold: ``limit`` (GB) when given, else half of the memory
    available now (``MemAvailable``; 4 GB where it cannot be read)."""
    if limit is not None:
        if limit <= 0:
            raise InputError(f"--memory must be a positive number of GB, got {limit}")
        return int(limit * 2**30)
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 4 << 30


def whole_image_error(cube: Cube, what: str) -> InputError:
    """The one-line refusal of a method that needs every pixel at once (a window or local detector, a
    detector in MNF space) on a cube whose float32 pixels exceed the memory budget."""
    return InputError(f"{what} needs the whole image in memory, and this cube's "
                      f"{cube.rows * cube.cols * cube.bands * 4 / 2**30:.1f} GB of pixels exceed the memory budget: "
                      "raise --memory, or crop the cube", cube.path)


def _refuse_whole_image_over_budget(cube: Cube, m, mnf, memory: float | None) -> None:
    """A window detector, or any detector in MNF space, cannot stream: over the host budget it is refused
    before the load rather than exhausting the host's memory."""
    if (m.kind != "pixel" or mnf is not None) and cube.rows * cube.cols * cube.bands * 4 > memory_budget(memory):
        raise whole_image_error(cube, f"{m.name} in MNF space (--mnf)" if mnf is not None else m.name)


def needs_streaming(cube: Cube, backend, memory: float | None = None) -> bool:
    """Whether the cube's float32 pixels exceed the host budget (or half the GPU's free memory): then
    :func:`run_detection` streams it in two passes instead of holding it."""
    nbytes = cube.rows * cube.cols * cube.bands * 4
    if nbytes > memory_budget(memory):
        return True
    return needs_tiling(cube, backend)


def run_detection(
    cube: Cube,
    method: str,
    targets: np.ndarray | None = None,
    background: np.ndarray | None = None,
    *,
    params: dict | None = None,
    device: str = "auto",
    truth: np.ndarray | None = None,
    far: float | None = None,
    threshold: float | None = None,
    model=None,
    image=None,
    memory: float | None = None,
    progress: Progress = NULL_PROGRESS,
    scores_file=None,
    target_spectra=None,
    undesired_spectra=None,
    signature_info: dict | None = None,
    mnf: int | None = None,
) -> DetectionResult:
    """Fit ``method`` from the marked pixels (or use a fitted ``model``) and score the cube.

    A cube whose pixels do not fit the memory budget (``memory`` GB of host memory, default half of
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
    method : str
        A name from :data:`hyperapp.models.registry.METHODS`.
    targets, background : bool (rows, cols) arrays
        Marked pixels. ``targets`` may be None only for methods that do not use targets (RX) or when
        a fitted ``model`` is given.
    params : dict
        Method options (``{"n_hidden": 8}``).
    truth : bool (rows, cols), optional
        Ground truth; the report then carries AUC and Pd (target clicks excluded).
    far, threshold :
        How to threshold; default ``far=1e-3``.
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
    mnf : int, optional
        Run the detector in MNF space: on the image's leading ``mnf`` MNF components (0: those with an SNR
        of at least 1), targets and undesired spectra transformed alike (:class:`~hyperapp.models.mnf.InMNF`).
    """
    m = get_method(method)
    backend = get_backend(device)
    timer = Timer(backend)
    y, target_spectra, undesired_spectra = _check_inputs(m, cube, targets, background, truth=truth, far=far,
                                                         threshold=threshold, model=model, mnf=mnf,
                                                         target_spectra=target_spectra,
                                                         undesired_spectra=undesired_spectra,
                                                         signature_info=signature_info)
    t0 = time.perf_counter()
    if image is None:
        _refuse_whole_image_over_budget(cube, m, mnf, memory)
    if image is None and m.kind == "pixel" and mnf is None and needs_streaming(cube, backend, memory):
        return _run_streamed(cube, m, y, backend, params=params, truth=truth, far=far, threshold=threshold,
                             model=model, progress=progress, scores_file=scores_file, target_spectra=target_spectra,
                             undesired_spectra=undesired_spectra, signature_info=signature_info)
    px = _load_labelled(cube, y, backend, timer, image, progress)
    if m.kind == "window":  # (a pixel detector's constant scores say it after scoring: _refuse_constant_scores)
        _refuse_one_spectrum(px.X, backend.xp)
    if model is None and m.uses_background and px.n_targets and px.n_background:
        _refuse_contradictory_marks(px, cube.cols)
    est, params = _estimator(m, model, params, target_spectra, mnf, px, timer)
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
    # a cascade scores every pixel (its RBFN's, lifted in the boxes): its false-alarm threshold leaves out
    # the targets nobody clicked as a pixel detector's does (a plain quantile counted them as false alarms,
    # and at 1e-3 on land kept 20 of 218 target pixels where the ROC gave 0.98 of them)
    result = finish_detection(method, scores_dev, px.y_dev, report, timer, truth=truth, far=far,
                              threshold=threshold, progress=progress, mode_scores=mode,
                              separate_targets=True if refine else None)
    if rbfn_dev is not None:
        boxes = _cascade_boxes(boxes, result, rbfn_dev, px.y_dev, far, threshold, mode)
    result.model, result.boxes = est, boxes
    _complete_result(result, est, px, maps_dev, timer, mnf=mnf, target_spectra=target_spectra,
                     undesired_spectra=undesired_spectra, signature_info=signature_info)
    result.report["seconds"]["total"] = round(time.perf_counter() - t0, 6)
    progress(1.0, "done")
    return result


def train_on_scene(scene: str | Path, method: str, targets: str | Path, background: str | Path | None = None, *,
                   dataset: str | None = None, bands=None, all_bands: bool = False, params: dict | None = None,
                   device: str = "auto", expected_bands: int | None = None, memory: float | None = None,
                   progress: Progress = NULL_PROGRESS):
    """``method`` fitted on another scene, to score other cubes with: the one meaning of "train on another
    scene" (the CLI's ``--train-from``, a job step's ``train``).

    The scene is opened as a run opens its cube (less the header's bad bands unless ``all_bands``, on
    ``bands``), its marked pixels read, and the model fitted as :func:`run_detection` fits it (streamed
    for a pixel detector when the scene exceeds the memory budget); nothing is scored.

    Parameters
    ----------
    scene : path
        The training scene.
    method : str
        A name from :data:`hyperapp.models.registry.METHODS`.
    targets, background : path
        The scene's marked pixels (a mask or ``row,col`` clicks; for FFBP, the truth mask its window
        networks learn from) and, optionally, background clicks.
    dataset : str, optional
        The HDF5 dataset or MATLAB variable of ``scene``.
    bands, all_bands :
        Which bands train (:meth:`hyperapp.core.cube.Cube.run_bands`): those of the cubes the model scores.
    params : dict, optional
        Method options.
    device : str
        Where to fit (``auto``, ``cpu``, ``gpu``).
    expected_bands : int, optional
        The band count of the cube the model will score: a scene with another count is an
        :class:`InputError` naming it.
    memory : float, optional
        Host memory budget in GB (:func:`memory_budget`).
    progress : Progress

    Returns
    -------
    The fitted model.
    """
    from hyperapp.io import open_cube, read_labels
    from hyperapp.io.masks import check_background, require_marks

    cube = open_cube(scene, dataset).run_bands(all_bands, bands)
    if expected_bands is not None and cube.bands != expected_bands:
        raise InputError(f"the training scene has {cube.bands} bands, the cube has {expected_bands}", scene)
    shape = (cube.rows, cube.cols)
    m = get_method(method)
    backend = get_backend(device)
    marked = read_labels(targets, shape)
    require_marks(marked, targets)
    bg = read_labels(background, shape) if background else None
    check_background(bg, marked, background)
    y, _, _ = _check_inputs(m, cube, marked, bg,
                            truth=None, far=None, threshold=None, model=None, mnf=None, target_spectra=None,
                            undesired_spectra=None)
    _refuse_whole_image_over_budget(cube, m, None, memory)
    if m.kind == "pixel" and needs_streaming(cube, backend, memory):
        from hyperapp.detect.streamed import fit_streamed

        return fit_streamed(cube, method, y, params=params, backend=backend, progress=progress)
    timer = Timer(backend)
    px = _load_labelled(cube, y, backend, timer, None, progress)
    est, params = _estimator(m, None, params, None, None, px, timer)
    est = _fit(m, est, px, params, None, None, timer, progress.sub(0.45, 1.0))
    progress(1.0, "trained")
    return est


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


def _check_inputs(m, cube: Cube, targets, background, *, truth, far, threshold, model, mnf, target_spectra,
                  undesired_spectra, signature_info=None):
    """Check the run's inputs against the method and the cube before any pixel is read; returns the label
    map (:func:`labels_from_masks`) and the target and undesired spectra as float64 (k, bands) arrays.
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
    y = labels_from_masks(shape, targets, background)
    if far is not None and threshold is not None:
        raise InputError("give either a false-alarm rate or a threshold, not both")
    if truth is not None:
        t = np.asarray(truth, bool)
        if t.shape != shape:
            raise InputError(f"truth mask is {t.shape}, the image is {shape}")
        # the evaluation leaves the clicked pixels out: checked before any work, not after it
        from hyperapp.io.masks import check_truth_beside_clicks

        check_truth_beside_clicks(t, targets)
    if mnf is not None and (m.kind != "pixel" or model is not None):
        raise InputError(f"--mnf runs a pixel detector it trains in MNF space; {method} "
                         f"{'is not a pixel detector' if m.kind != 'pixel' else 'is given as a fitted model'}")
    if mnf is not None and int(mnf) > cube.bands:
        raise InputError(f"--mnf {int(mnf)} asks for more MNF components than the cube's {cube.bands} bands",
                         cube.path)
    return y, target_spectra, undesired_spectra


def _run_streamed(cube: Cube, m, y, backend, *, params, truth, far, threshold, model, progress, scores_file,
                  target_spectra, undesired_spectra, signature_info) -> DetectionResult:
    """The run of a cube larger than the memory budget: :func:`hyperapp.detect.streamed.run_streamed`."""
    from hyperapp.detect.streamed import run_streamed

    if target_spectra is not None and target_spectra.shape[0] > 1:
        raise InputError(f"{m.name} with several target spectra needs the cube in memory, and it exceeds the "
                         "memory budget: pick one (--spectra NAME), raise --memory, or crop the cube", cube.path)
    result = run_streamed(cube, m.name, y, params=params, backend=backend, truth=truth, far=far,
                          threshold=threshold, model=model, progress=progress, scores_file=scores_file,
                          target_mean=None if target_spectra is None else target_spectra[0],
                          undesired=undesired_spectra)
    _report_signatures(result, result.model, target_spectra, undesired_spectra, signature_info)
    return result


def _load_labelled(cube: Cube, y: np.ndarray, backend, timer, image, progress: Progress) -> _Pixels:
    """Load the pixels (or take ``image``, already on the device), find the no-data pixels (labelled
    no data in ``y``) and count the marks."""
    from hyperapp.reading.tiles import check_magnitude, extremes, finite_pixels, no_data_error

    with timer.stage("load"):
        X = image if image is not None else load_pixels(cube, backend, progress.sub(0.0, 0.4))
    if X.shape[2] != cube.bands:
        raise InputError(f"pixels on the device have {X.shape[2]} bands, the cube has {cube.bands}")
    progress(0.45, "training")
    xp = backend.xp
    with timer.stage("no-data"):
        # the largest and smallest value answer the common case (both finite: every value is) and give the
        # magnitude check its answer; only a cube with no-data pixels pays for the per-pixel test
        ext = extremes(X)
        if np.isfinite(ext).all():
            valid, n_nodata = None, 0
        else:
            valid = finite_pixels(X)
            n_nodata = int(valid.size - int(valid.sum()))
        if n_nodata:
            valid_h = to_host(valid)
            if ((y == TARGET) & ~valid_h).any():
                raise no_data_error(cube, "a marked target pixel has no data (NaN or the no-data value)")
            if n_nodata == valid.size:
                raise no_data_error(cube, "every pixel is no data (NaN or the cube's no-data value)")
            y[~valid_h] = NODATA
        check_magnitude(cube, X, ext)
    # a pixel marked both ways is a target (labels_from_masks): the counts come from the labels' marks
    marks = y.reshape(-1)[sparse_flatnonzero(y, UNLABELLED)]
    return _Pixels(X, y, xp.asarray(y), valid, n_nodata, int(np.count_nonzero(marks == TARGET)),
                   int(np.count_nonzero(marks == BACKGROUND)))


def _estimator(m, model, params: dict | None, target_spectra, mnf, px: _Pixels, timer):
    """The estimator to fit (built from ``params``, a library's defaults under them) or the given
    ``model`` on the run's backend, wrapped in MNF space for ``mnf``; returns it and the params used.
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
    # statistics over the pixels with data only
    keep = xp.flatnonzero(px.valid.reshape(-1)) if px.n_nodata and kind in ("background", "correlation", "none") \
        else None
    # on the GPU the fit's host work is band-sized linear algebra: one BLAS thread (serial_host_blas)
    with timer.stage("fit"), (serial_host_blas if xp is not np else contextlib.nullcontext()):
        if target_spectra is not None or undesired_spectra is not None:
            y_fit = px.y if getattr(est, "labels_on_host", False) else px.y_dev
            X_fit = X
            if keep is not None:
                X_fit, y_fit = X.reshape(-1, X.shape[2])[keep], px.y_dev.reshape(-1)[keep]
            return fit_signatures(m, params, est, X_fit, y_fit, target_spectra, undesired_spectra, px.n_targets,
                                  progress)
        fit_kwargs = {"progress": progress} if getattr(est, "accepts_progress", False) else {}
        if getattr(est, "accepts_check_input", False):
            fit_kwargs["check_input"] = False  # the no-data stage has just tested every value
        if keep is not None and m.kind == "pixel":
            est.fit(X.reshape(-1, X.shape[2])[keep], px.y_dev.reshape(-1)[keep], **fit_kwargs)
        else:
            # a model that sorts the labels on the host (it names the pixels it samples) takes the
            # host copy: the device copy would only travel back
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


def _cascade_boxes(boxes: list[dict], result: DetectionResult, rbfn_dev, y_dev, far, threshold,
                   mode_dev=None) -> list[dict]:
    """The cascade's boxes: the RBFN's own default mask, as its run would draw it, adds a box for each of
    its objects that no box touches, so the cascade finds at least what the RBFN alone finds."""
    xp = get_namespace(rbfn_dev)
    yf = y_dev.reshape(-1)
    keep = xp.not_equal(yf, TARGET) & xp.not_equal(yf, NODATA)
    t_rbfn = far_threshold(rbfn_dev, DEFAULT_FAR if far is None else far, separate_targets=True,
                           mode_scores=mode_dev, keep=keep)[0] if threshold is None else threshold
    rbfn_mask = to_host(xp.greater(rbfn_dev, t_rbfn))
    return add_mask_boxes(boxes, rbfn_mask | result.mask.astype(bool), to_host(rbfn_dev))


def _complete_result(result: DetectionResult, est, px: _Pixels, maps_dev: dict, timer, *, mnf, target_spectra,
                     undesired_spectra, signature_info) -> None:
    """The rest of the report (MNF components, where the signatures came from, the boxes, the stage
    times) and the further maps' host copies."""
    xp = get_namespace(px.X)
    if mnf is not None:
        first = est.estimators_[0] if hasattr(est, "estimators_") else est  # (several targets: one each)
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


def fit_signatures(m, params, est, X, y, target_spectra, undesired, n_targets: int, progress=NULL_PROGRESS):
    """Fit ``est`` from target spectra (a library's; or the clicks' mean when only ``undesired`` are given)
    and undesired signatures, through each detector's ``fit_signature``: one detector per target
    spectrum (:class:`~hyperapp.models.base.PerTarget` when there are several)."""
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
    proto = copy.deepcopy(est) if len(target_spectra) > 1 else None  # unfitted, for the further targets
    ests = []
    for i, t in enumerate(target_spectra):
        e = est if i == 0 else copy.deepcopy(proto)
        # the labels go along: clicked targets leave the background, no-data pixels every sample
        ests.append(e.fit_signature(X, xp.asarray(t), y=y, undesired=undesired, check_input=False, **kw))
    return ests[0] if len(ests) == 1 else PerTarget(ests)


def run_report(method: str, params: dict | None, backend, cube: Cube, streamed: bool, n_targets: int,
               n_background: int, n_nodata: int) -> dict:
    """The report's head: what ran, where, on what (the rest comes from :func:`finish_detection`)."""
    return {
        "method": method,
        "params": dict(params or {}),
        "device": backend.name,
        "streamed": streamed,
        "device_name": backend.device_name,
        "cube": cube.path,
        "shape": list(cube.shape),
        **provenance(cube),
        "n_target_pixels": n_targets,
        "n_background_pixels": n_background,
        "nodata_pixels": n_nodata,
    }


def finish_detection(method: str, scores_dev, y_dev, report: dict, timer, *, truth=None, far=None,
                     threshold=None, progress: Progress = NULL_PROGRESS, mode_scores=None,
                     separate_targets: bool | None = None) -> DetectionResult:
    """Scores -> threshold (a value, or the false-alarm rate over non-target pixels with data), mask,
    object count, evaluation and the host copies: the end every detection run shares, in memory or
    streamed. ``y_dev`` holds the labels (no-data pixels -2, their scores NaN); ``mode_scores``, where a
    detector gives them, are the scores the threshold's separate mode of targets is found in
    (:func:`~hyperapp.models.evaluation.far_threshold`)."""
    from hyperapp.core.backend import get_namespace

    xp = get_namespace(scores_dev)
    m = get_method(method)
    if m.kind == "pixel":  # (a window detector's constant floor is its "no window holds a target")
        _refuse_constant_scores(m, scores_dev, xp)
    progress(0.85, "thresholding")
    with timer.stage("threshold"):
        if threshold is None:
            far_used = DEFAULT_FAR if far is None else far
            yf = y_dev.reshape(-1)
            sel = xp.not_equal(yf, TARGET) & xp.not_equal(yf, NODATA)
            # a clicked detector's unclicked pixels hold the targets nobody clicked (far_threshold)
            if separate_targets is None:  # (a cascade says it: its scores are a pixel detector's)
                separate_targets = m.uses_targets and m.kind == "pixel"
            threshold, mode, rule = far_threshold(
                scores_dev.reshape(-1), far_used, separate_targets=separate_targets,
                mode_scores=mode_scores, keep=sel)
            report["target_mode_pixels"] = mode
            report["threshold_rule"] = rule
        else:
            far_used = None
        mask_dev = xp.greater(scores_dev, threshold)  # a ufunc, not `>`: hyperapp.core.backend, scalar operators
        # the pixels scoring exactly the threshold: left out of the mask (scores above it count); where they
        # outnumber it the run says so (384 copies of the target tied at the top gave an empty mask, silently)
        report["pixels_at_threshold"] = int(xp.count_nonzero(xp.equal(scores_dev, threshold)))
    with timer.stage("objects"):
        # on the device; the table is built from these labels when it is asked for
        labels_dev, n_objects = label_objects(mask_dev)
    with timer.stage("copy"):
        scores = to_host_pinned(scores_dev.astype(xp.float32, copy=False))
        mask = to_host_pinned(mask_dev.view(xp.uint8) if xp is not np else mask_dev.astype(np.uint8))
    report.update({
        "threshold": float(threshold),
        "far": far_used,
        "detections": int(mask_dev.sum()),
        "objects": n_objects,
    })
    if truth is not None:
        with timer.stage("evaluate"):
            # ufuncs, not `>` and `==` with a scalar: on CuPy the operators' first call imports
            # cupyx.scipy.special (0.3-0.4 s of a fresh process; hyperapp.core.backend, scalar operators)
            t_dev = xp.asarray(truth)
            t_dev = t_dev if t_dev.dtype == bool else xp.greater(t_dev, 0)
            exclude = xp.logical_or(xp.equal(y_dev, TARGET), xp.equal(y_dev, NODATA))
            report["evaluation"] = evaluate(scores_dev, t_dev, exclude=exclude)
    return DetectionResult(method, scores, mask, float(threshold), report,
                           _device=(labels_dev, scores_dev, n_objects))


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


def _refuse_constant_scores(m, scores_dev, xp) -> None:
    """A pixel detector that gave every pixel with data the same score (to float precision) has found
    nothing to tell them apart by: a constant or all-zero cube, one band (every spectrum the same shape
    to SAM and ACE) or identical bands. Its mask would be empty or everything, said as a result; this
    says why instead. One min and max on the scores' device."""
    finite = xp.isfinite(scores_dev)
    if not bool(finite.any()):
        raise ModelError(NO_FINITE_SCORE)
    lo = float(xp.min(xp.where(finite, scores_dev, xp.inf)))
    hi = float(xp.max(xp.where(finite, scores_dev, -xp.inf)))
    if hi - lo <= 1e-6 * max(abs(lo), abs(hi)):
        raise ModelError(f"{m.title} gave every pixel the same score ({hi:.6g}): in the bands used the pixels do "
                         "not differ in any way it measures (a constant or all-zero cube, a single band, or "
                         "identical bands), so nothing can stand out")


def ties_words(report: dict) -> str:
    """A line where more pixels score exactly the threshold than the mask holds (they are left out: only
    scores above it count), else ""."""
    n = int(report.get("pixels_at_threshold") or 0)
    if not n or n < int(report.get("detections", 0)):
        return ""
    return (f"{n} pixel{'s' if n != 1 else ''} score exactly the threshold ({report['threshold']:.6g}) and are "
            "left out of the mask, which takes only the scores above it: lower the threshold to take them")


def threshold_origin(report: dict) -> str:
    """One line for people on where a run's threshold came from (the report's ``far``,
    ``threshold_rule`` and ``target_mode_pixels``): empty for a threshold that was given. It ends with
    :func:`ties_words` where they apply."""
    ties = ties_words(report)
    line = _origin(report)
    return f"{line}. {ties}" if line and ties else line or ties


def _origin(report: dict) -> str:
    far = report.get("far")
    if far is None:
        return ""
    head = f"Threshold for a false-alarm rate of {far:g} over the background"
    rule = report.get("threshold_rule", "quantile")
    if rule == "network mode split":  # the RBFN with its anomaly input (far_threshold's mode_scores)
        return (f"{head}, counted without the {report.get('target_mode_pixels', 0)} pixels its network scores "
                "highest: they stand apart, likely targets nobody clicked")
    if rule == "target mode split":
        return (f"{head}, counted without the {report.get('target_mode_pixels', 0)} highest-scoring pixels: they "
                "stand apart, likely targets nobody clicked")
    if rule == "exponential tail":
        return (f"{head}: no separate group of targets shows, so the background's tail is extrapolated "
                "from the bulk of the scores")
    return f"{head}: that share of the unclicked pixels scores above it"


#: in the cascade, pixels inside the window detector's boxes are lifted by this many interquartile
#: ranges of the RBFN's scores (:func:`refine_in_boxes`). Measured (3 seeds, pixel AUC of the cascade
#: against the RBFN's alone): 1.0 cost the implanted sub-pixel aircraft 0.067 (0.770 against 0.837),
#: 0.25 costs 0.010 and nothing on the airport (0.958 against 0.958)
BOX_LIFT = 0.25


def refine_in_boxes(X, y, inside, xp):
    """The cascade's last step: an RBFN trained from the clicks scores every pixel, and the pixels
    inside the window detector's boxes are lifted by :data:`BOX_LIFT` interquartile ranges of the
    scores. Returns the cascade's scores, the RBFN's own and its further maps (the network's output,
    which its default mask's threshold takes its target mode from).

    The boxes say where to look first: among pixels the RBFN scores alike, those inside a box rank
    higher. They no longer decide alone: before, every pixel outside the boxes shared one floor score,
    so a box that missed a target lost the whole target, which the RBFN would have found
    (mean pixel AUC 0.904 against the RBFN's 0.960 on four real scenes). A target the RBFN scores well
    above the background still stands out where no box covers it.
    """
    from hyperapp.models.rbfn import RBFN

    P = X.reshape(-1, X.shape[2])
    s, maps = RBFN().fit(X, y).score_maps(P)
    q1, q3 = (float(v) for v in to_host(xp.quantile(s, xp.asarray([0.25, 0.75]))))
    lift = BOX_LIFT * max(q3 - q1, 1e-12)
    out = s + xp.float32(lift) * inside.reshape(-1).astype(xp.float32)
    return (out.astype(xp.float32).reshape(X.shape[:2]), s.reshape(X.shape[:2]),
            {k: v.reshape(X.shape[:2]) for k, v in maps.items()})


def add_mask_boxes(boxes: list[dict], mask: np.ndarray, scores: np.ndarray) -> list[dict]:
    """The window detector's ``boxes`` plus, for every object of the pixel ``mask`` that no box
    touches, its bounding box (``source`` ``"rbfn"``; the network scores ``ann1``, ``ann2`` then hold
    the object's highest pixel score and 0): the cascade's boxes never lose what its pixel mask found."""
    from scipy import ndimage

    out = [dict(b, source=b.get("source", "ffbp")) for b in boxes]
    covered = np.zeros(mask.shape, bool)
    for b in boxes:
        covered[b["row"]:b["row"] + b["height"], b["col"]:b["col"] + b["width"]] = True
    lab, n = ndimage.label(np.asarray(mask, bool), np.ones((3, 3), bool))
    if n == 0:
        return out
    touched = np.zeros(n + 1, bool)
    touched[np.unique(lab[covered])] = True
    for i, sl in enumerate(ndimage.find_objects(lab), start=1):
        if touched[i] or sl is None:
            continue
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        out.append({"row": int(sl[0].start), "col": int(sl[1].start), "height": int(h), "width": int(w),
                    "level": 0, "ann1": float(np.max(scores[sl][lab[sl] == i])), "ann2": 0.0, "source": "rbfn"})
    return out


def detect_to_folder(cube: Cube, method: str, targets, background, out_dir: str | Path, **kwargs):
    """:func:`run_detection` and its outputs in ``out_dir``, all or nothing: the run happens inside the
    staging folder, so a streamed run writes its scores straight into the final data file, tile by
    tile. Returns the result and the output paths."""
    from hyperapp.io.atomic import staged_folder

    with staged_folder(out_dir) as stage:
        result = run_detection(cube, method, targets, background, scores_file=stage / "scores.img", **kwargs)
        paths = _write_detection(result, stage, cube)
    return result, {k: Path(out_dir) / p.name for k, p in paths.items()}


def write_detection(result: DetectionResult, out_dir: str | Path, cube: Cube) -> dict[str, Path]:
    """The outputs of a finished :func:`run_detection` in ``out_dir``, all or nothing (the batch
    pipeline's write stage); returns the output paths."""
    from hyperapp.io.atomic import staged_folder

    with staged_folder(out_dir) as stage:
        paths = _write_detection(result, stage, cube)
    return {k: Path(out_dir) / p.name for k, p in paths.items()}


def _write_detection(result: DetectionResult, out: Path, cube: Cube) -> dict[str, Path]:
    from hyperapp.detect.format_process import objects_csv_later
    from hyperapp.io.atomic import atomic_write_bytes
    from hyperapp.io.writers import write_envi

    # the object table's CSV is formatted while the images are written (in a batch's formatting helper,
    # where one runs: it is the stage's one long stretch of Python)
    csv = objects_csv_later(result.object_columns)
    paths = {k: write_detection_item(result, k, out / k, cube) for k in ("scores", "mask")}
    paths["objects"] = out / "objects.csv"
    atomic_write_bytes(paths["objects"], csv())
    for name, arr in result.maps.items():
        what = {"infeasibility": "mixture-tuning infeasibility (noise sigma units; lower = more feasible)",
                "target_index": "which target spectrum gave the highest score (0-based)"}.get(name, name)
        paths[name] = write_envi(out / name, arr, cube, f"hyperapp {result.method} {what}",
                                 nan_is_nodata=bool(result.report.get("nodata_pixels")) and arr.dtype.kind == "f")
    if result.boxes:
        paths["boxes"] = write_detection_item(result, "boxes", out / "boxes.csv", cube)
    paths["report"] = write_detection_item(result, "report", out / "report.json", cube)
    return paths
