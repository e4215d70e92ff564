"""Detection on a cube larger than memory: two passes over the file, tile by tile.

Pass 1 gathers what the detector's fit needs (:attr:`~hyperapp.models.base.PixelDetector.stream_stats`):
the sums of the background statistics (ACE, MF, RX) or of the correlation (CEM) over every pixel with
data, those of the image and of its neighbour differences for an MNF (MTMF, MTTCIMF: the pairs across
tile boundaries included), the target pixels (every method), or exactly the pixels the RBFN's
sampling names (read in a pass of their own, after a pass that finds the no-data pixels when the file
can hold any). The fit is then the same function the in-memory path calls, so the scores agree with
it. Pass 2 streams the tiles through the scoring; only the (rows, cols) score map (and MTMF's
infeasibility map) is kept, so memory is bounded by one ring of tiles plus the 2-D maps, whatever the
number of bands; given a file, pass 2 writes each tile's scores straight into it. Thresholding,
objects (connected components over the whole mask, so objects across tile borders are whole) and
evaluation are :func:`hyperapp.detect.finish.finish_detection`, as in memory.
"""

from __future__ import annotations

import time

import numpy as np

from hyperapp.core.backend import Timer, to_host
from hyperapp.core.cube import Cube
from hyperapp.core.errors import InputError
from hyperapp.core.progress import NULL_PROGRESS, Progress
from hyperapp.models.base import NODATA, TARGET
from hyperapp.models.evaluation import MODE_SCORES
from hyperapp.models.registry import get_method
from hyperapp.models.stats import BackgroundStats, ScatterSums, correlation_from_sums, scatter
from hyperapp.reading.tiles import finite_pixels, iter_float_tiles, no_data_error


def _flat_valid(tile):
    """Pixels (n, bands) of a tile and which of them hold data."""
    return tile.reshape(-1, tile.shape[2]), finite_pixels(tile).reshape(-1)


def run_streamed(cube: Cube, method: str, y: np.ndarray, *, params: dict | None, backend, truth=None, far=None,
                 threshold=None, model=None, progress: Progress = NULL_PROGRESS, tile_bytes: int | None = None,
                 scores_file=None, target_mean=None, undesired=None, filters: dict | None = None):
    """Fit and score ``method`` on ``cube`` in two passes (see the module); ``y`` is the label map
    (1 target, 0 background, -1 unlabelled; host int8). Returns a :class:`hyperapp.detect.finish.DetectionResult`.

    ``scores_file``: pass 2 writes each tile's scores straight into this file (float32, row-major: an
    ENVI BSQ data file), which the result's ``scores`` then maps, instead of holding them in memory.

    The stages: build the model and check it can stream (:func:`_streaming_estimator`), pass 1 fits it
    (:func:`_fit_passes`; none with a fitted ``model``), pass 2 scores (:func:`_score_pass`), then
    threshold, objects and evaluation (:func:`hyperapp.detect.finish.finish_detection`).
    """
    from hyperapp.detect.finish import finish_detection, run_report

    timer = Timer(backend)
    t0 = time.perf_counter()
    est = _streaming_estimator(cube, method, params, model, target_mean, undesired)
    y = np.array(y, dtype=np.int8)
    n_targets = int(np.count_nonzero(y == TARGET))
    # which pixels hold data: found by pass 1 when it fits, else by pass 2
    valid_map = np.ones((cube.rows, cube.cols), bool)
    if model is None:
        _fit_passes(est, cube, y, valid_map, backend.xp, timer, progress, tile_bytes, target_mean, undesired)
    scores, maps = _score_pass(est, cube, valid_map if model is not None else None, backend.xp, timer, progress,
                               tile_bytes, scores_file)
    n_nodata = int(valid_map.size - valid_map.sum())
    y[~valid_map] = NODATA
    report = run_report(method, params, backend, cube, True, n_targets, int((y == 0).sum()), n_nodata)
    # the 2-D maps are small: threshold, objects and evaluation run on the host
    result = finish_detection(method, scores, y, report, timer, truth=truth, far=far, threshold=threshold,
                              progress=progress, mode_scores=maps.pop(MODE_SCORES, None), filters=filters)
    result.model = est
    result.maps = maps
    result.scores = scores  # the file's map itself, so writing the outputs only adds its header
    result.report["seconds"] = {k: round(v, 6) for k, v in timer.seconds.items()}
    result.report["seconds"]["total"] = round(time.perf_counter() - t0, 6)
    progress(1.0, "done")
    return result


def fit_streamed(cube: Cube, method: str, y: np.ndarray, *, params: dict | None, backend,
                 progress: Progress = NULL_PROGRESS, tile_bytes: int | None = None):
    """Pass 1 of :func:`run_streamed` alone: ``method`` fitted on ``cube`` from the label map ``y``, nothing
    scored (:func:`hyperapp.detect.training.train_on_scene` on a scene larger than memory). Returns the model."""
    est = _streaming_estimator(cube, method, params, None, None, None)
    valid_map = np.ones((cube.rows, cube.cols), bool)
    _fit_passes(est, cube, np.array(y, dtype=np.int8), valid_map, backend.xp, Timer(backend), progress, tile_bytes,
                None, None)
    return est


def _streaming_estimator(cube: Cube, method: str, params: dict | None, model, target_mean, undesired):
    """The model to fit (or the fitted ``model``); a method that needs the whole image (a window
    detector, a local one), a library spectrum it cannot fit from sums, or ATGP's undesired signatures
    (OSP, TCIMF, MTTCIMF with none given) is an :class:`InputError`, before any pass."""
    m = get_method(method)
    est = model if model is not None else m.build(**(params or {}))
    kind = getattr(est, "stream_stats", None)
    if m.kind != "pixel" or kind is None:
        from hyperapp.detect.budget import whole_image_error

        raise whole_image_error(cube, f"{method} (it looks at windows of pixels)")
    if target_mean is not None and kind not in ("background", "correlation", "none", "mnf"):
        raise InputError(f"{method} trained from a library spectrum needs the cube in memory, and it exceeds the "
                         "memory budget: raise --memory, or crop the cube", cube.path)
    if model is None and getattr(est, "uses_undesired", False):
        from hyperapp.models.subspace import streamed_undesired_given

        streamed_undesired_given(est, undesired, cube.path)
    return est


def _fit_passes(est, cube: Cube, y: np.ndarray, valid_map: np.ndarray, xp, timer, progress: Progress,
                tile_bytes, target_mean, undesired) -> None:
    """Pass 1: fit ``est`` from sums over the pixels (:func:`_fit_from_sums`) or from the pixels its own
    sampling names (:func:`_fit_from_sampled_pixels`); ``valid_map`` is filled with the pixels holding data."""
    kind = est.stream_stats
    if kind in ("background", "correlation", "none"):
        # the detectors that suppress undesired signatures take them (given, or none: OSP, TCIMF)
        und = {"undesired": undesired} if getattr(est, "uses_undesired", False) else {}
        _fit_from_sums(est, kind, cube, y, valid_map, xp, timer, progress, tile_bytes, target_mean, und)
    elif kind == "mnf":
        _fit_mnf(est, cube, y, valid_map, xp, timer, progress, tile_bytes, target_mean, undesired)
    else:
        _fit_from_sampled_pixels(est, cube, y, valid_map, xp, timer, progress, tile_bytes)


def _fit_from_sums(est, kind: str, cube: Cube, y: np.ndarray, valid_map: np.ndarray, xp, timer,
                   progress: Progress, tile_bytes, target_mean, und: dict) -> None:
    """Pass 1 of a statistics-based detector: the background scatter (ACE, MF, RX) or the correlation
    (CEM) summed over every pixel with data, and the target pixels; then the fit from the sums."""
    cols, nb = cube.cols, cube.bands
    tgt_flat = np.flatnonzero(y.reshape(-1) == TARGET)
    with timer.stage("pass 1: statistics"):
        acc = shift = None
        n_rows = 0
        T_rows = []
        for r0, r1, tile in iter_float_tiles(cube, xp, tile_bytes):
            progress(0.45 * r1 / cube.rows, "pass 1: statistics")
            P, valid = _flat_valid(tile)
            vh = to_host(valid)
            valid_map[r0:r1] = vh.reshape(r1 - r0, cols)
            t = _target_rows(P, tgt_flat, r0 * cols, r1 * cols, xp)
            if t is not None:
                T_rows.append(t)
            if kind == "none":
                continue
            keep = xp.flatnonzero(valid)
            Pv = P[keep] if int(keep.size) != P.shape[0] else P
            if Pv.shape[0] == 0:
                continue
            if shift is None:
                # both kinds sum about a rough mean, as the in-memory fits do (CEM's correlation is
                # moved back to zero at the end: correlation_from_sums)
                shift = BackgroundStats.shift_of(Pv)
                acc = ScatterSums(shift, nb, xp)
            acc.add(Pv)
            n_rows += int(Pv.shape[0])
        _check_targets(y, valid_map, cube)
        s, G = acc.result() if acc is not None else (None, None)
        T = xp.concatenate(T_rows) if T_rows else None
        t_mean = None if T is None or not T.shape[0] else T.mean(axis=0)
        if target_mean is not None:  # a library's spectrum instead of the clicks' mean
            t_mean = xp.asarray(target_mean, dtype=xp.float64)
    with timer.stage("fit"):
        if kind == "background":
            if T is not None:
                # the background is every pixel with data but the clicks (as in memory)
                ts, tG = scatter(T, shift)
                s, G, n_rows = s - ts, G - tG, n_rows - int(T.shape[0])
            if s is None:
                raise InputError("no pixel has data (NaN or the cube's no-data value)", cube.path)
            est.fit_from_stats(BackgroundStats.from_sums(s, G, n_rows, shift), t_mean)
        elif kind == "correlation":
            est.fit_from_stats(correlation_from_sums(s, G, n_rows, shift), n_rows, t_mean, **und)
        else:
            est.fit_from_stats(t_mean, **und)


def _target_rows(P, tgt_flat: np.ndarray, lo: int, hi: int, xp):
    """The target pixels among the rows ``P`` of the flat pixels ``lo:hi`` (float64), or None."""
    a, b = np.searchsorted(tgt_flat, [lo, hi])
    return P[xp.asarray(tgt_flat[a:b] - lo)].astype(xp.float64) if b > a else None


def _fit_mnf(est, cube: Cube, y: np.ndarray, valid_map: np.ndarray, xp, timer, progress: Progress, tile_bytes,
             target_mean, undesired) -> None:
    """Pass 1 of a detector in MNF space (MTMF, MTTCIMF): the image's statistics and those of its
    neighbour differences (:func:`_mnf_sums`), then its ``fit_from_stats``. As in memory, no-data
    pixels take the mean of the pixels with data; where pass 1 finds any, a second pass sums the
    statistics again with that mean filled in (the differences across them need it)."""
    tgt_flat = np.flatnonzero(y.reshape(-1) == TARGET)
    # a file that can hold no data shares pass 1's progress with the pass that may fill it
    share = 0.25 if cube.nodata is not None or cube.store.dtype.kind == "f" else 0.45
    with timer.stage("pass 1: statistics"):
        signal, noise, t_sum = _mnf_sums(est, cube, xp, tile_bytes, y, tgt_flat, valid_map, None,
                                         progress.sub(0.0, share))
        if not valid_map.all():
            # pass 1's image statistics were over the pixels with data: their mean is the fill
            signal, noise, _ = _mnf_sums(est, cube, xp, tile_bytes, y, tgt_flat, None,
                                         signal.mean.astype(xp.float32), progress.sub(share, 0.45))
    t_mean = t_sum / tgt_flat.size if tgt_flat.size else None
    if target_mean is not None:  # a library's spectrum instead of the clicks' mean
        t_mean = xp.asarray(target_mean, dtype=xp.float64)
    with timer.stage("fit"):
        est.fit_from_stats(signal, noise, t_mean, undesired=undesired)


def _mnf_sums(est, cube: Cube, xp, tile_bytes, y: np.ndarray, tgt_flat: np.ndarray, valid_map, fill,
              progress: Progress):
    """One pass of the sums of :meth:`hyperapp.models.mnf.MNF.fit` (float64): the image's scatter and that
    of its neighbour differences, the pairs across each tile boundary included (the previous tile's
    last row is kept). Without ``fill`` (the spectrum no-data pixels take) the image's sums are over the
    pixels with data and ``valid_map`` is filled (and checked against the labels ``y``). Returns the
    image's and the differences' :class:`BackgroundStats` and the sum of the target pixels; ``progress``
    runs from 0 to 1 over the pass."""
    from hyperapp.models.mnf import neighbour_differences

    cols, nb = cube.cols, cube.bands
    direction = getattr(est, "direction", "lowerright")
    sums: dict = {}  # "signal", "noise": ScatterSums (float64, as MNF.fit)
    t_sum = xp.zeros(nb, xp.float64)
    prev = None

    def add(key, rows):
        if rows.shape[0]:
            if key not in sums:
                sums[key] = ScatterSums(BackgroundStats.shift_of(rows), nb, xp)
            sums[key].add(rows)

    for r0, r1, tile in iter_float_tiles(cube, xp, tile_bytes):
        progress(r1 / cube.rows, "pass 1: statistics" + ("" if fill is None else " (no data filled)"))
        P, valid = _flat_valid(tile)
        if fill is None:
            valid_map[r0:r1] = to_host(valid).reshape(r1 - r0, cols)
            keep = xp.flatnonzero(valid)
            add("signal", P[keep] if int(keep.size) != P.shape[0] else P)
        else:
            tile = xp.where(valid.reshape(r1 - r0, cols, 1), tile, fill)
            P = tile.reshape(-1, nb)
            add("signal", P)
        t = _target_rows(P, tgt_flat, r0 * cols, r1 * cols, xp)
        if t is not None:
            t_sum += t.sum(axis=0)
        if prev is not None and direction != "right":
            add("noise", neighbour_differences(xp.stack([prev, tile[0]]), direction))
        add("noise", neighbour_differences(tile, direction))
        prev = tile[-1].copy()  # the tile is only valid until the next is read
    if fill is None:
        _check_targets(y, valid_map, cube)
    if sums.get("noise") is None or sums["noise"].n < 2:
        raise InputError(f"the image ({cube.rows} x {cube.cols}) is too small to estimate the noise", cube.path)
    signal, noise = (BackgroundStats.from_sums(*sums[k].result(), sums[k].n, sums[k].shift)
                     for k in ("signal", "noise"))
    return signal, noise, t_sum


def _fit_from_sampled_pixels(est, cube: Cube, y: np.ndarray, valid_map: np.ndarray, xp, timer,
                             progress: Progress, tile_bytes) -> None:
    """Pass 1 of a detector that samples its training pixels (the RBFN): a pass that finds the no-data
    pixels when the file can hold any, a pass that reads exactly the pixels the sampling names, the fit."""
    cols, nb = cube.cols, cube.bands
    if cube.nodata is not None or cube.store.dtype.kind == "f":
        with timer.stage("pass 0: no data"):
            for r0, r1, tile in iter_float_tiles(cube, xp, tile_bytes):
                progress(0.2 * r1 / cube.rows, "pass 0: finding pixels without data")
                valid_map[r0:r1] = to_host(finite_pixels(tile))
        _check_targets(y, valid_map, cube)
    y_fit = y.copy()
    y_fit[~valid_map] = NODATA
    with timer.stage("pass 1: training pixels"):
        t_idx, s_idx, b_idx, rng = est.sample_indices(y_fit, (cube.rows, cube.cols))
        need = np.unique(np.concatenate([t_idx, s_idx, b_idx]))
        rows_of = np.empty((need.size, nb), np.float32)
        for r0, r1, tile in iter_float_tiles(cube, xp, tile_bytes):
            progress(0.2 + 0.25 * r1 / cube.rows, "pass 1: reading the training pixels")
            a, b = np.searchsorted(need, [r0 * cols, r1 * cols])
            if b > a:
                rows_of[a:b] = to_host(tile.reshape(-1, nb)[xp.asarray(need[a:b] - r0 * cols)])
        rows_d = xp.asarray(rows_of)

        def pick(idx):
            return rows_d[xp.asarray(np.searchsorted(need, idx))]
    with timer.stage("fit"):
        est.fit_from_pixels(pick(t_idx), pick(s_idx), pick(b_idx), rng)


def _score_pass(est, cube: Cube, valid_map: np.ndarray | None, xp, timer, progress: Progress, tile_bytes,
                scores_file) -> tuple[np.ndarray, dict]:
    """Pass 2: every tile's scores (no-data pixels NaN) into ``scores_file`` (mapped) or memory, and the
    further maps a detector gives beside them (MTMF's infeasibility: host (rows, cols) arrays, no-data
    pixels NaN as in memory); a given ``valid_map`` records the pixels holding data (a fitted model's
    run has had no pass 1). Returns the scores and the further maps."""
    if scores_file is not None:
        scores = np.memmap(scores_file, np.float32, "w+", shape=(cube.rows, cube.cols))
    else:
        scores = np.empty((cube.rows, cube.cols), np.float32)
    maps: dict = {}
    with timer.stage("pass 2: score"):
        for r0, r1, tile in iter_float_tiles(cube, xp, tile_bytes):
            progress(0.45 + 0.4 * r1 / cube.rows, "pass 2: scoring")
            sc, extra = est.score_maps(tile) if hasattr(est, "score_maps") else (est.decision_function(tile), {})
            valid = finite_pixels(tile)
            scores[r0:r1] = to_host(xp.where(valid, sc, xp.float32(np.nan)))
            for k, v in extra.items():
                if v.dtype.kind == "f":
                    v = xp.where(valid, v, xp.float32(np.nan)).astype(v.dtype)
                if k not in maps:
                    maps[k] = np.empty((cube.rows, cube.cols), v.dtype)
                maps[k][r0:r1] = to_host(v)
            if valid_map is not None:
                valid_map[r0:r1] = to_host(valid)
    return scores, maps


def _check_targets(y: np.ndarray, valid_map: np.ndarray, cube: Cube) -> None:
    if ((y == TARGET) & ~valid_map).any():
        from hyperapp.models.base import targets_without_data

        raise no_data_error(cube, targets_without_data(y, valid_map, cube.cols))
    if not valid_map.any():
        raise no_data_error(cube, "every pixel is no data (NaN or the cube's no-data value)")
