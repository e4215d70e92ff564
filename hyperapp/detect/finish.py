"""A run's end, shared by the in-memory and the streamed paths: threshold, mask, objects, evaluation and
the report; and the words the window and the CLI use for a threshold."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hyperapp.core.backend import get_namespace, to_host_pinned, total
from hyperapp.core.cube import Cube, provenance
from hyperapp.core.errors import ModelError
from hyperapp.core.progress import NULL_PROGRESS, Progress
from hyperapp.kernels.pack import to_host_numbers, to_host_together
from hyperapp.models.base import NODATA, TARGET, sparse_flatnonzero
from hyperapp.models.evaluation import (
    NO_FINITE_SCORE,
    evaluate,
    evaluation_counts,
    evaluation_report,
    far_threshold,
    labelled_evaluation_counts,
    threshold_pixels,
)
from hyperapp.models.postprocess import filter_objects, label_objects, object_columns, table_rows
from hyperapp.models.registry import get_method

DEFAULT_FAR = 1e-3


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
    #: the target filter the mask went through (:func:`filtered`): {} for none
    filters: dict = field(default_factory=dict)

    @property
    def object_columns(self) -> dict:
        """The object table as columns (:func:`hyperapp.models.postprocess.object_columns`)."""
        if self._columns is None:
            if self._device is not None:
                labels, scores, n = self._device
                self._columns = object_columns(None, scores, labels=labels, n=n)
                self._device = None
            else:
                self._columns = object_columns(self.mask.astype(bool), self.scores,
                                               *_labelled(self.mask.astype(bool), self.filters))
        return self._columns

    @property
    def objects(self) -> list[dict]:
        """The object table's rows, highest peak score first."""
        if self._objects is None:
            self._objects = table_rows(self.object_columns)
        return self._objects

    def remask(self, threshold: float) -> np.ndarray:
        """Mask for another threshold (the GUI's slider) without recomputing scores."""
        return mask_at(self.scores, threshold, self.filters)

    def objects_at(self, threshold: float) -> list[dict]:
        """The object table at ``threshold`` (the run's own table at its own threshold)."""
        return self.objects if threshold == self.threshold else objects_at(self.scores, threshold, self.filters)

    def count_at(self, threshold: float) -> tuple[int, int]:
        """(pixels, objects) of the mask at ``threshold``, filtered as the run's."""
        return count_at(self.scores, threshold, self.filters)


# ---------------------------------------------------------------------- threshold -> mask -> objects
# The one home of these steps for every caller: the run's end (finish_detection, on the device), the
# window's threshold slider, its exports and the batch job's outputs.
def filtered(mask, filters: dict | None, count_on_device: bool = False):
    """``mask`` (bool, on its device) through the run's target filter (clump, sieve, connectivity:
    :func:`hyperapp.models.postprocess.filter_objects`), with its object labels and their number (a 0-d
    array on the GPU with ``count_on_device``, where no filter counted it on the host already)."""
    filters = filters or {}
    if filters.get("clump") or filters.get("sieve") is not None:
        return filter_objects(mask, filters.get("clump", 0), filters.get("sieve"), filters.get("connectivity", 8))
    labels, n = label_objects(mask, filters.get("connectivity", 8), count_on_device)
    return mask, labels, n


def _labelled(mask, filters: dict | None) -> tuple:
    _, labels, n = filtered(mask, filters)
    return labels, n


def mask_at(scores, threshold: float, filters: dict | None = None) -> np.ndarray:
    """uint8 (rows, cols) mask of the pixels scoring above ``threshold`` (NaN, no data: never), through the
    target filter ``filters`` where a run has one (:func:`filtered`)."""
    s = np.asarray(scores)
    with np.errstate(invalid="ignore"):
        m = np.greater(s, np.float32(threshold) if s.dtype == np.float32 else threshold)
    if filters and (filters.get("clump") or filters.get("sieve") is not None):
        m = filtered(m, filters)[0]
    return m.view(np.uint8)


def count_at(scores, threshold: float, filters: dict | None = None) -> tuple[int, int]:
    """(pixels, objects) above ``threshold`` (objects as :func:`objects_at` labels them)."""
    m, _, n = filtered(np.asarray(mask_at(scores, threshold)).astype(bool), filters)
    return int(m.sum()), int(n)


def objects_at(scores, threshold: float, filters: dict | None = None) -> list[dict]:
    """The object table (label, size, centroid, peak score, bounding box) at ``threshold``."""
    m, labels, n = filtered(mask_at(scores, threshold).astype(bool), filters)
    return table_rows(object_columns(m, np.asarray(scores), labels=labels, n=n))


def operating_point(scores, truth, threshold: float, exclude=None) -> tuple[float, float]:
    """(false-alarm rate, detection rate) of ``threshold`` against a truth mask, counted as the ROC
    counts them (pixels with data; ``exclude``: the clicked targets)."""
    from hyperapp.models.evaluation import _split

    pos, neg = _split(np.asarray(scores), np.asarray(truth) > 0, exclude)
    far = float((neg > threshold).sum()) / max(int(neg.size), 1)
    pd = float((pos > threshold).sum()) / max(int(pos.size), 1)
    return far, pd


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
                     separate_targets: bool | None = None, filters: dict | None = None,
                     truth_pixels: np.ndarray | None = None, clicked: np.ndarray | None = None) -> DetectionResult:
    """Scores -> threshold (a value, or the false-alarm rate over non-target pixels with data), mask,
    object count, evaluation and the host copies: the end every detection run shares, in memory or
    streamed. ``y_dev`` holds the labels (no-data pixels -2, their scores NaN); ``mode_scores``, where a
    detector gives them, are the scores the threshold's separate mode of targets is found in
    (:func:`~hyperapp.models.evaluation.far_threshold`); ``filters``, the request's target filter
    (clump, sieve, connectivity: :func:`filtered`), cleans the mask before its objects are counted and
    its detection rate is measured. ``truth_pixels``: the truth's target pixels as flat indices, where the
    caller listed them (:func:`hyperapp.detect.run._check_inputs`); ``clicked``: the clicked targets' flat
    indices on the host, where the caller has them (:func:`~hyperapp.detect.suggest.suggestion_pending`)."""

    xp = get_namespace(scores_dev)
    m = get_method(method)
    from hyperapp.detect.suggest import clicks_on_host, suggestion_pending

    # what the stages below first ask of the device, fetched in one copy: the scores' range (a pixel
    # detector's constant scores are refused), the threshold's pixel count and the clicked targets' scores
    # (the suggested threshold's, where they are few); each was a round trip of its own
    ask = {}
    if m.kind == "pixel":  # (a window detector's constant floor is its "no window holds a target")
        finite = xp.isfinite(scores_dev)
        ask["lowest"] = xp.min(xp.where(finite, scores_dev, xp.inf))
        ask["highest"] = xp.max(xp.where(finite, scores_dev, -xp.inf))
    if threshold is None:
        yf = y_dev.reshape(-1)
        sel = xp.not_equal(yf, TARGET) & xp.not_equal(yf, NODATA)
        # a clicked detector's unclicked pixels hold the targets nobody clicked (far_threshold)
        if separate_targets is None:  # (a cascade says it: its scores are a pixel detector's)
            separate_targets = m.uses_targets and m.kind == "pixel"
        use = threshold_pixels(scores_dev, separate_targets, mode_scores, sel)
        ask["used"] = total(use, xp.int64)
        if m.uses_targets and clicks_on_host(clicked) and clicked.size:
            ask["clicked"] = scores_dev.reshape(-1)[xp.asarray(clicked)]
    progress(0.85, "thresholding")
    with timer.stage("threshold"):
        fetched = dict(zip(ask, to_host_together(list(ask.values()), np.float64)))  # (counts < 2^53: exact)
        if "lowest" in fetched:
            _refuse_constant_scores(m, float(fetched["lowest"]), float(fetched["highest"]))
        if threshold is None:
            far_used = DEFAULT_FAR if far is None else far
            threshold, mode, rule = far_threshold(
                scores_dev.reshape(-1), far_used, separate_targets=separate_targets,
                mode_scores=mode_scores, keep=sel, used=(use, int(fetched["used"])))
            report["target_mode_pixels"] = mode
            report["threshold_rule"] = rule
        else:
            far_used = None
        mask_dev = xp.greater(scores_dev, threshold)  # a ufunc, not `>`: hyperapp.core.backend, scalar operators
        # the pixels scoring exactly the threshold: left out of the mask (scores above it count); where they
        # outnumber it the run says so (384 copies of the target tied at the top gave an empty mask, silently)
        at_threshold = total(xp.equal(scores_dev, threshold), xp.int64)  # (to the host with the mask's count)
    # the suggested threshold's counts and the evaluation's, launched now, come to the host with the objects'
    # (one copy where each was a round trip of its own)
    suggest = far_used is not None and m.uses_targets
    pending = None
    if suggest:  # where the rate keeps few of the clicked targets: the threshold that keeps them
        with timer.stage("threshold"):
            targets = None if clicks_on_host(clicked) else xp.equal(y_dev, TARGET).reshape(scores_dev.shape)
            pending = suggestion_pending(scores_dev, targets, threshold, clicked, bool(filters), fetched.get("clicked"))
    evaluation = []
    if truth is not None:
        with timer.stage("evaluate"):
            # ufuncs, not `>` and `==` with a scalar: on CuPy the operators' first call imports
            # cupyx.scipy.special (0.3-0.4 s of a fresh process; hyperapp.core.backend, scalar operators)
            t_dev, positives = _truth_on(truth, xp, truth_pixels, mask=bool(filters))
            exclude = None
            if xp is not np and positives is not None:  # (the labels and the truth's pixels: two launches)
                evaluation = labelled_evaluation_counts(scores_dev, y_dev, positives)
            else:
                exclude = _left_out(y_dev, xp)
                if xp is not np:
                    evaluation = evaluation_counts(scores_dev, t_dev, exclude=exclude, positives=positives)
    with timer.stage("objects"):
        # on the device; the table is built from these labels when it is asked for
        mask_dev, labels_dev, n_objects = filtered(mask_dev, filters, count_on_device=True)
        numbers = to_host_numbers([total(mask_dev, xp.int64), at_threshold, n_objects]
                                  + (pending.device if pending is not None else []) + evaluation)
        detections, report["pixels_at_threshold"], n_objects = numbers[:3]
        numbers = numbers[3:]
    if suggest:
        # the mask's counts as the objects stage made them, where no target filter changed them (the
        # suggestion counted the unfiltered mask's itself otherwise)
        report["suggested_threshold"] = None if pending is None else \
            pending.report(numbers, now=None if filters else (detections, n_objects))
        numbers = numbers[len(pending.device) if pending is not None else 0:]
    if filters:
        report["filters"] = {"clump": filters.get("clump", 0), "sieve": _plain_sieve(filters.get("sieve")),
                             "connectivity": filters.get("connectivity", 8)}
    with timer.stage("copy"):
        scores = to_host_pinned(scores_dev.astype(xp.float32, copy=False))
        mask = to_host_pinned(mask_dev.view(xp.uint8) if xp is not np else mask_dev.astype(np.uint8))
    report.update({
        "threshold": float(threshold),
        "far": far_used,
        "detections": detections,
        "objects": n_objects,
    })
    if truth is not None:
        with timer.stage("evaluate"):
            report["evaluation"] = evaluation_report(numbers) if evaluation else \
                evaluate(scores_dev, t_dev, exclude=exclude, positives=positives)
            if filters:  # the filtered mask's own detection rate (the ROC's Pd are the scores')
                if exclude is None:
                    exclude = _left_out(y_dev, xp)
                keep = xp.logical_and(t_dev, xp.logical_not(exclude))
                n_t = int(total(keep, xp.int64))
                report["evaluation"]["pd_of_mask"] = (int(total(xp.logical_and(mask_dev, keep), xp.int64)) / n_t
                                                      if n_t else None)
    return DetectionResult(method, scores, mask, float(threshold), report,
                           _device=(labels_dev, scores_dev, n_objects), filters=dict(filters or {}))


def _left_out(y_dev, xp):
    """The pixels the evaluation leaves out: the clicked targets and the no-data pixels (labels ``y_dev``)."""
    return xp.logical_or(xp.equal(y_dev, TARGET), xp.equal(y_dev, NODATA))


def _truth_on(truth, xp, idx=None, mask: bool = True) -> tuple:
    """The (host) truth as a boolean mask on ``xp``'s device, and on the GPU where its targets are few (a
    truth mask's usual case), their flat indices there too (None otherwise): the mask is then made on the
    device from them (a copy of a few kilobytes, where the mask's own is megabytes, pageable), and the
    evaluation looks up those pixels alone (:func:`~hyperapp.models.evaluation.evaluate`). ``mask``
    False: where the indices serve, the mask is not made (None)."""
    if xp is np or get_namespace(truth) is not np:  # (on the device already: as it is)
        t = xp.asarray(truth)
        return (t if t.dtype == bool else xp.greater(t, 0)), None
    t = np.asarray(truth)
    t = t if t.dtype == bool else np.greater(t, 0)
    if idx is None:
        idx = sparse_flatnonzero(t)
    if idx.size * 16 > t.size:  # many targets: the mask itself is the smaller copy
        return xp.asarray(t), None
    idx_dev = xp.asarray(idx)
    if not mask:
        return None, idx_dev
    t_dev = xp.zeros(t.shape, bool)
    t_dev.reshape(-1)[idx_dev] = True
    return t_dev, idx_dev


def _plain_sieve(sieve):
    return None if sieve is None else [int(sieve[0]), None if sieve[1] is None else int(sieve[1])]


def _refuse_constant_scores(m, lo: float, hi: float) -> None:
    """A pixel detector that gave every pixel with data the same score (to float precision) has found
    nothing to tell them apart by: a constant or all-zero cube, one band (every spectrum the same shape
    to SAM and ACE) or identical bands. Its mask would be empty or everything, said as a result; this
    says why instead, from the lowest and highest finite scores (``lo`` +inf and ``hi`` -inf where no
    score is finite), which :func:`finish_detection` fetches with its first numbers."""
    if not lo <= hi:
        raise ModelError(NO_FINITE_SCORE)
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
    one = n == 1
    return (f"{n} pixel{'' if one else 's'} score{'s' if one else ''} exactly the threshold "
            f"({report['threshold']:.6g}) and {'is' if one else 'are'} left out of the mask, which takes only the "
            f"scores above it: lower the threshold to take {'it' if one else 'them'}")


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
