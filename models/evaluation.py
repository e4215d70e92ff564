"""Detection scoring: ROC curve, AUC, Pd at a false-alarm rate, thresholds for a false-alarm rate.

All functions take NumPy or CuPy arrays and compute on that device, so a full-size score map is
evaluated on the GPU without a host copy. AUC is the Mann-Whitney statistic with tied scores given
their average rank, which is what ``sklearn.metrics.roc_auc_score`` computes.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host, total
from hyperapp.core.errors import InputError, ModelError
from hyperapp.kernels.pack import to_host_numbers


def _masks(scores, truth, exclude=None):
    """The flat scores, the truth and the masks of the targets and the non-targets that count (finite
    scores, not ``exclude``d)."""
    xp = get_namespace(scores)
    s = scores.reshape(-1)
    t = xp.asarray(truth).reshape(-1).astype(bool)
    if s.shape != t.shape:
        raise InputError(f"truth has {t.size} pixels, scores have {s.size}")
    keep = xp.isfinite(s)
    if exclude is not None:
        keep = xp.logical_and(keep, xp.logical_not(xp.asarray(exclude).reshape(-1).astype(bool)))
    return s, t, xp.logical_and(keep, t), xp.logical_and(keep, xp.logical_not(t))


def _split(scores, truth, exclude=None):
    s, _, is_pos, is_neg = _masks(scores, truth, exclude)
    return s[is_pos], s[is_neg]


def auc(scores, truth, exclude=None) -> float:
    """Area under the ROC curve of ``scores`` against a boolean ``truth`` mask.

    Mann-Whitney U / (n_pos n_neg): for each target score, the non-targets below it plus half the ones
    equal to it, counted by two binary searches in the sorted non-target scores (one sort of the
    non-targets instead of ranking every pixel).

    Parameters
    ----------
    exclude : bool mask, optional
        Pixels left out (the training clicks).
    """
    pos, neg = _split(scores, truth, exclude)
    n_p, n_n = int(pos.size), int(neg.size)
    _check_both(n_p, n_n)
    return int(_twice_u(pos, get_namespace(neg).sort(neg))) / 2.0 / (n_p * n_n)


def _check_both(n_p: int, n_n: int) -> None:
    if n_p == 0 or n_n == 0:
        raise InputError("AUC needs both target and non-target pixels in the truth mask")


def _twice_u(pos, srt):
    """2U on the scores' device, exact in integers: for each target score, the sorted non-target scores
    below it plus those not above it."""
    xp = get_namespace(pos)
    return (xp.searchsorted(srt, pos, side="left").astype(xp.int64)
            + xp.searchsorted(srt, pos, side="right").astype(xp.int64)).sum()


#: the default threshold's test for a separate mode of targets atop the scores (:func:`target_mode_size`):
#: a spacing must exceed the typical one by log(k) + this (a chance of about e^-20 per test under an
#: exponential tail), within the top :data:`MODE_FRACTION` of the scores, and the gap itself must be at
#: least :data:`MODE_GAP` of those scores' spread
MODE_Z = 20.0
MODE_FRACTION = 0.05
MODE_GAP = 0.01


#: the key under which a detector's ``score_maps`` gives the scores the default threshold takes its separate
#: mode of targets from, where they differ from the scores (the RBFN's network output beside its anomaly
#: input, :func:`far_threshold`); a run takes it out of the maps it writes
MODE_SCORES = "threshold mode scores"

#: the default threshold's background tail where no target mode shows: an exponential through these
#: two quantiles of the unclicked pixels' scores (:func:`far_threshold`)
TAIL_FIT = (0.90, 0.97)


def threshold_for_far(background_scores, far: float) -> float:
    """Score threshold at which a fraction ``far`` of the given background scores lies above it."""
    return far_threshold(background_scores, far)[0]


#: what a run whose scores are all NaN or infinite says (the threshold's and the detection's checks)
NO_FINITE_SCORE = ("the detector gave no pixel a finite score, so no threshold can be set: the spectra may not "
                   "vary (a constant or all-zero cube), or the target may hold values far beyond the cube's")


def threshold_pixels(background_scores, separate_targets: bool = False, mode_scores=None, keep=None):
    """The pixels :func:`far_threshold` takes its threshold from (same arguments): those with a finite
    score, in ``keep`` where given, and with a finite ``mode_scores`` where those count; a boolean mask
    of the flat scores on their device."""
    xp = get_namespace(background_scores)
    use = xp.isfinite(background_scores.reshape(-1))
    if keep is not None:
        use = xp.logical_and(use, keep.reshape(-1))
    if mode_scores is not None and separate_targets:
        use = xp.logical_and(use, xp.isfinite(mode_scores.reshape(-1)))
    return use


def far_threshold(background_scores, far: float, separate_targets: bool = False,
                  mode_scores=None, keep=None, used: tuple | None = None) -> tuple[float, int, str]:
    """:func:`threshold_for_far`'s threshold, how many of the highest scores it left out as a separate
    mode of targets (0 without ``separate_targets``), and the rule that set it (``"quantile"``,
    ``"target mode split"`` or ``"exponential tail"``); the report carries all three.

    ``separate_targets``: the scores are every unclicked pixel's, so they hold the targets nobody
    clicked, often more of them than the requested false alarms (the bundled land scene: 213 target
    pixels against 16 false alarms at 1e-3 of 16,379). Their plain quantile falls among the targets:
    the mask finds a few while the ROC says every one is found at that rate. So when the top of the
    scores holds a separate mode (:func:`target_mode_size`), those pixels are taken as targets and the
    quantile is taken over the rest. Where targets and background overlap no such mode shows; the
    plain quantile is then an upper bound of the background's (the targets above it take some of its
    places, so it lets through fewer false alarms than asked), and the background's tail is estimated
    from the bulk of the scores instead, which a few per cent of targets barely move: an exponential
    tail (the model :func:`target_mode_size` tests against) through the quantiles :data:`TAIL_FIT`,
    extrapolated to ``far``. The lower of the two thresholds is taken, so the mask never holds fewer
    pixels than the plain quantile gives. Targets in the fitted range steepen the fit and a tail
    lighter than exponential (a Gaussian's) is overestimated by it: both err towards fewer false
    alarms than asked. A tail heavier than exponential errs the other way (on the airport scene, ACE
    at up to 5.7x the requested rate on one seed of ten; MF and CEM 0.6-3.3x, against 0-0.6x with the
    plain quantile).

    ``mode_scores`` (the same pixels, in the same order): where given, the separate mode is looked for
    in them, and its pixels (the highest of ``mode_scores``) are left out of the quantile of the scores
    (rule ``"network mode split"``; where they show no mode, the scores' own rules follow).
    The RBFN's score is the larger of its network's output and its anomaly input; the anomaly input
    lifts the scene's strongest anomalies into the top of the scores, where a mode found in the scores
    themselves took them for targets (the bundled land scene: 4.4e-3 false alarms at 1e-3). Its network's
    output holds the clicked material's mode alone, and the anomalies then count as what they are, the
    background's tail (land: 0.99e-3, Pd 0.99).

    ``keep`` (a boolean mask of the same pixels): only those count (the unclicked pixels with data).
    ``used``: :func:`threshold_pixels`' mask for these arguments and its count on the host, where the
    caller fetched that count with others (a run's end: one copy, :mod:`hyperapp.detect.finish`).
    """
    xp = get_namespace(background_scores)
    if not 0.0 < far < 1.0:
        raise InputError(f"false-alarm rate must be in (0, 1), got {far}")
    s = background_scores.reshape(-1)
    by_mode = mode_scores is not None and separate_targets
    ms = mode_scores.reshape(-1) if by_mode else None
    # the pixels not used sort below every score (as -inf), so the used ones are the sorted array's top n:
    # one count to the host, where a compaction per mask is a round trip each on the GPU
    if used is None:
        use = threshold_pixels(s, separate_targets, mode_scores, keep)
        n = int(total(use, xp.int64))
    else:
        use, n = used
    if n == 0:
        raise ModelError(NO_FINITE_SCORE)
    low = s.size - n
    if by_mode:
        # the used pixels' ``mode_scores``, ascending: a sort of the values, not of the pixels' order (the
        # mode test reads values only; an argsort and two gathers of every pixel cost the GPU more)
        ms_asc = xp.sort(xp.where(use, ms, -xp.inf))[low:]
        mode, edge, _ = _mode_split(ms_asc, far)
        if mode and mode < n:
            rest = _below_mode(ms, use, ms_asc, mode, xp, edge)
            return float(_at_far(xp.sort(xp.where(rest, s, -xp.inf))[s.size - (n - mode):], far)), mode, \
                "network mode split"
    ascending = xp.sort(xp.where(use, s, -xp.inf))[low:]
    if not separate_targets:
        return float(_at_far(ascending, far)), 0, "quantile"
    # the quantiles either answer may need come to the host with the mode test's numbers: where the first test
    # finds no mode, the tail's three; after a split, the quantile of the scores below it
    mode, _, values = _mode_split(ascending, far, also=lambda start: _tail_indices(n, far) if start == 0
                                  else (_far_index(n - start, far),))
    if mode:
        at = values[0] if values is not None else float(_at_far(ascending[:ascending.size - mode], far))
        return at, mode, "target mode split"
    threshold, rule = _tail_threshold(ascending, far, values)
    return threshold, 0, rule


def _below_mode(ms, use, asc, mode: int, xp, edge: tuple[float, float]):
    """The used pixels (``use``) less the ``mode`` highest of ``ms`` (``asc``: the used ones' ``ms``,
    ascending), a boolean mask. :func:`target_mode_size` splits only at a gap (a positive spacing above the
    typical one), so the mode's lowest score is above every other: the mask is the used pixels scoring
    below it. Checked on the two scores either side of the split (``edge``, as :func:`_mode_split` read
    them); where a tie crossed the split, the pixels would be ranked by a stable sort instead."""
    n = int(asc.size)
    below, cut = edge
    if below < cut:
        return xp.logical_and(use, xp.less(ms, asc[n - mode]))
    order = xp.argsort(xp.where(use, ms, -xp.inf), kind="stable")[ms.size - n:][:n - mode]
    rest = xp.zeros(ms.shape, bool)
    rest[order] = True
    return rest


def target_mode_size(ascending, far: float, z: float = MODE_Z, fraction: float = MODE_FRACTION) -> int:
    """How many of the highest scores form a separate mode: 0 if none.

    Rényi's representation of the upper order statistics: under an exponential tail the normalised
    spacings i (x_(i) - x_(i+1)) of the k highest scores are independent exponentials of one mean,
    estimated from the median of those that are not ties (robust to the mode's own spacings; float32
    cosines near 1, SAM's, tie in almost half the places, which would pull a plain median towards 0
    and make every step look like a gap). The largest normalised spacing is a split when it exceeds
    that mean by log(k) + ``z`` and the gap is at least ``MODE_GAP`` of the window's spread (a step of
    one float32 quantum deep in the window is neither), and the test repeats below the split, always
    within the top ``fraction`` of the scores and never above the top ``far`` of them. It runs where
    the scores are; each test sends ten numbers to the host, in one copy. A split onto tied scores
    (a detector's floor, such as the window detector's score outside its boxes) is not made.
    """
    return _mode_split(ascending, far, z, fraction)[0]


def _mode_split(ascending, far: float, z: float = MODE_Z, fraction: float = MODE_FRACTION, also=None):
    """:func:`target_mode_size`, the two scores either side of its split (the highest left below it, the
    lowest in the mode: :func:`_below_mode` checks them) or None where it made none, and the scores at the
    places of ``ascending`` that ``also(start)`` names (a function of a test's start: the quantiles the
    caller takes where that test ends it), fetched with the last test's numbers (None where no test ran
    at the final start). Each test is one copy of a few numbers to the host (:func:`_mode_tests`)."""
    n = int(ascending.size)
    m = min(n, 2 * max(int(n * fraction), 10) + 1)
    test = _mode_tests(ascending, n, m)
    start, edge = 0, None
    while True:
        rest = n - start
        k = max(int(rest * fraction), 10)
        first = max(int(far * rest), 1)
        if start + k + 1 > m or first >= k:
            return start, edge, None
        # where the largest eligible spacing is, how many are not ties, the median of those (ascending: the
        # ties' zeros come first), the largest eligible spacing and its gap, the window's ends, the scores just
        # below the candidate split and ``first`` places further down, and the lowest score above it
        i, nz, med, dmax, gap, hi, lo, below, further, cut, *values = test(start, k, first,
                                                                          also(start) if also else ())
        scale = med / np.log(2)
        if not scale > 0 or dmax / scale < np.log(k) + z or gap < MODE_GAP * (hi - lo):
            return start, edge, values
        if below == further:  # the scores below tie (a floor, not a background): no quantile to take there
            return start, edge, values
        start += first + i + 1
        edge = (float(below), float(cut))


def _mode_tests(ascending, n: int, m: int):
    """The mode test of :func:`_mode_split` on ``ascending`` (n scores, the top ``m`` read), as a function
    ``test(start, k, first, extra)`` returning its numbers in :func:`_mode_split`'s order, then the scores at
    the places ``extra`` (at most four), on the host: the top, descending, is ``top``, the window
    ``w = top[start:start + k + 1]``, its spacings ``gaps`` and their normalised form ``D = gaps (1..k)``, and
    the numbers are the argmax ``i`` of ``D[first:]``, the count ``nz`` of ``D`` not 0, ``sort(D)[mi]``
    (``mi = min(k - nz + nz // 2, k - 1)``), ``D[j]``, ``gaps[j]``, ``w[first]``, ``w[k]``, ``top[b0]``,
    ``top[b1]`` and ``top[b0 - 1]`` (``j = first + i``, ``b0 = start + j + 1``, ``b1 = min(b0 + first, m - 1)``).
    On the GPU three launches of ``kernels/threshold.cu`` (with CuPy's sort between them) and one copy;
    in NumPy its ufuncs (a partition for the median: the same element as the sort's)."""
    xp = get_namespace(ascending)
    if xp is not np:
        return _device_mode_tests(ascending, n, m)
    top = ascending[n - m:][::-1].astype(np.float64)
    ranks = np.arange(1, m + 1, dtype=np.float64)

    def test(start, k, first, extra):
        w = top[start:start + k + 1]
        gaps = w[:-1] - w[1:]  # >= 0: the window is sorted
        D = gaps * ranks[:k]
        i = int(np.argmax(D[first:]))
        nz = int(np.count_nonzero(D))
        mi = min(k - nz + nz // 2, k - 1)
        j = first + i
        b0, b1 = start + j + 1, min(start + j + 1 + first, m - 1)
        return [i, nz] + [float(v) for v in (np.partition(D, mi)[mi], D[j], gaps[j], w[first], w[k], top[b0],
                                             top[b1], top[b0 - 1])] + [float(ascending[e]) for e in extra]

    return test


#: the threshold module's kernels, compiled together (:func:`_device_mode_tests`)
THRESHOLD_KERNELS = tuple(f"hyperapp_mode_{f}<{t}>" for f in ("spacings", "pick") for t in ("float", "double"))


def _device_mode_tests(ascending, n: int, m: int):
    """:func:`_mode_tests` on the GPU (``kernels/threshold.cu``)."""
    from hyperapp.kernels import get_kernel

    xp = get_namespace(ascending)
    if ascending.dtype not in (xp.float32, xp.float64):
        ascending = ascending.astype(xp.float64)
    asc = xp.ascontiguousarray(ascending)
    name = "float" if asc.dtype == xp.float32 else "double"
    spacings = get_kernel("threshold", f"hyperapp_mode_spacings<{name}>", name_expressions=THRESHOLD_KERNELS)
    pick = get_kernel("threshold", f"hyperapp_mode_pick<{name}>", name_expressions=THRESHOLD_KERNELS)

    def test(start, k, first, extra):
        if len(extra) > 4:
            raise ValueError("at most four further scores come with a mode test")
        D = xp.empty(k, xp.float64)
        spacings((min(-(-k // 256), 1024),), (256,), (asc, np.int64(n), np.int64(start), np.int64(k), D))
        srt = xp.sort(D)
        out = xp.empty(10 + len(extra), xp.float64)
        e = [np.int64(v) for v in extra] + [np.int64(0)] * (4 - len(extra))
        pick((1,), (1024,), (asc, np.int64(n), np.int64(m), np.int64(start), np.int64(k), np.int64(first), D, srt,
                             np.int32(len(extra)), *e, out))
        v = out.get().tolist()
        return [int(v[0]), int(v[1])] + v[2:]

    return test


def _far_index(n: int, far: float) -> int:
    """The place in ``n`` sorted (ascending) scores above which lies a fraction ``far`` of them."""
    return n - 1 - min(int(np.floor(far * n)), n - 1)


def _at_far(ascending, far: float):
    """The score in sorted (ascending) background scores above which lies a fraction ``far`` of them."""
    return ascending[_far_index(int(ascending.size), far)]


def _tail_indices(n: int, far: float) -> tuple[int, ...]:
    """The places in ``n`` sorted scores :func:`_tail_threshold` reads: the :data:`TAIL_FIT` quantiles'
    and the plain quantile's, or the plain quantile's alone where ``far`` lies inside the fitted range."""
    lo, hi = TAIL_FIT
    if far >= 1.0 - hi:
        return (_far_index(n, far),)
    return int(lo * (n - 1)), int(hi * (n - 1)), _far_index(n, far)


def _tail_threshold(ascending, far: float, values=None) -> tuple[float, str]:
    """:func:`far_threshold`'s rule where no target mode shows: the lower of the plain quantile and an
    exponential tail through the :data:`TAIL_FIT` quantiles, extrapolated to ``far``. The plain
    quantile alone where ``far`` lies inside the fitted range, or where the two quantiles tie (a floor).
    ``values``: the scores at :func:`_tail_indices`' places, where the caller fetched them; else one copy
    of them to the host."""
    lo, hi = TAIL_FIT
    n = int(ascending.size)
    if values is None:
        values = to_host_numbers([ascending[i:i + 1] for i in _tail_indices(n, far)])
    if far >= 1.0 - hi:
        return float(values[0]), "quantile"
    q_lo, q_hi, plain = (float(v) for v in values)
    if not q_hi > q_lo:
        return plain, "quantile"
    # exponential survival S(t) = S(q_hi) exp(-(t - q_hi) / b), b from the drop between the two quantiles
    tail = float(q_hi + (q_hi - q_lo) * np.log((1.0 - hi) / far) / np.log((1.0 - lo) / (1.0 - hi)))
    return (tail, "exponential tail") if tail < plain else (plain, "quantile")


def roc_curve(scores, truth, exclude=None, max_points: int = 2048):
    """(false-alarm rate, detection rate) arrays on the host, at most ``max_points`` long."""
    xp = get_namespace(scores)
    pos, neg = _split(scores, truth, exclude)
    allv = xp.concatenate([pos, neg])
    lab = xp.concatenate([xp.ones(pos.size, dtype=bool), xp.zeros(neg.size, dtype=bool)])
    order = xp.argsort(-allv, kind="stable") if xp is np else xp.argsort(-allv)
    lab = lab[order]
    tp = xp.cumsum(lab)
    fp = xp.cumsum(~lab)
    tpr = to_host(tp / max(int(pos.size), 1))
    fpr = to_host(fp / max(int(neg.size), 1))
    if tpr.size > max_points:
        idx = np.unique(np.linspace(0, tpr.size - 1, max_points).astype(int))
        tpr, fpr = tpr[idx], fpr[idx]
    return np.concatenate([[0.0], fpr]), np.concatenate([[0.0], tpr])


def evaluate(scores, truth, exclude=None, positives=None) -> dict:
    """AUC and Pd at 1e-2 and 1e-3 false-alarm rate, as the report records them (one split of the
    pixels and one sort of the non-target scores serve all three), with the truth's target pixels and
    the target and other pixels they count (the ``exclude``d ones, the clicks, and no-data left out). ``positives``: the flat indices of
    the truth's target pixels, where the caller has them (on the GPU only they are looked up)."""
    xp = get_namespace(scores)
    if xp is not np:
        return _evaluate_device(scores, truth, exclude, positives)
    pos, neg = _split(scores, truth, exclude)
    n_p, n_n = int(pos.size), int(neg.size)
    _check_both(n_p, n_n)
    srt = xp.sort(neg)  # ascending
    # every count on the device, then one copy: 2U (as _auc), the targets above each Pd threshold, and
    # the truth's target count
    # ufuncs throughout, never an operator with a scalar: on CuPy the operators' first call imports
    # cupyx.scipy.special, 0.3-0.4 s of a fresh process (hyperapp.core.backend, scalar operators)
    counts = [_twice_u(pos, srt)] + [xp.greater(pos, _at_far(srt, far)).sum(dtype=xp.int64) for far in PD_FARS]
    counts.append(xp.asarray(truth).astype(bool).sum(dtype=xp.int64))
    return evaluation_report([int(v) for v in to_host(xp.stack(counts))] + [n_p, n_n])


#: the false-alarm rates the report gives the detection rate at (:func:`evaluate`)
PD_FARS = (1e-2, 1e-3)


def _auc_counts(srt, n_n, s, is_pos):
    """2U and the targets above each :data:`PD_FARS` threshold, an int64 array of three on the scores'
    device: ``srt`` the non-target scores ascending with every other pixel after them (as +inf), ``n_n``
    their count (a 0-d array on the device), ``s`` the looked-up scores and ``is_pos`` which of them are
    targets. On the GPU one kernel (``kernels/evaluate.cu``) does what the ufuncs below do."""
    xp = get_namespace(s)
    if xp is not np:
        from hyperapp.kernels import get_kernel

        name = "float" if s.dtype == xp.float32 else "double"
        k = get_kernel("evaluate", f"hyperapp_auc_counts<{name}>", name_expressions=EVALUATE_KERNELS)
        srt = srt.astype(s.dtype, copy=False)
        out = xp.zeros(3, xp.uint64)
        m = int(s.size)
        if m:
            k((min(-(-m // 256), 2048),), (256,), (xp.ascontiguousarray(srt), n_n.astype(xp.int64, copy=False),
                                                   xp.ascontiguousarray(s), xp.ascontiguousarray(is_pos),
                                                   np.int64(m), np.float64(PD_FARS[0]), np.float64(PD_FARS[1]), out))
        return out.astype(xp.int64)
    # 2U as _twice_u: for each target, the non-targets below it plus those not above it (the +inf padding
    # is above every finite score)
    both = xp.add(xp.searchsorted(srt, s, side="left"), xp.searchsorted(srt, s, side="right")).astype(xp.int64)
    counts = [total(xp.where(is_pos, both, 0), xp.int64)]
    for far in PD_FARS:
        # _at_far's index, n_n - 1 - min(floor(far n_n), n_n - 1), with the count as an array
        last = xp.maximum(xp.subtract(n_n, 1), 0)
        idx = xp.subtract(last, xp.minimum(xp.floor(xp.multiply(far, n_n)).astype(xp.int64), last))
        counts.append(total(xp.logical_and(is_pos, xp.greater(s, srt[idx])), xp.int64))
    return xp.stack(counts)


def _evaluate_device(scores, truth, exclude=None, positives=None) -> dict:
    """:func:`evaluate` on the GPU with one copy to the host and no compaction: each boolean selection of
    the targets and the non-targets is a round trip for its size there. The non-targets are sorted with
    every other pixel after them (as +inf), and the targets are looked up in them: those at ``positives``
    (the truth's target pixels, listed by the caller on the host, where the truth comes from), else every
    pixel, the targets' counts then summed over their mask (a million binary searches cost the GPU less
    than one round trip). The same numbers as the NumPy path, which selects (its selections cost no round
    trip, its searches would)."""
    return evaluation_report(to_host_numbers(evaluation_counts(scores, truth, exclude, positives)))


def evaluation_counts(scores, truth, exclude=None, positives=None) -> list:
    """:func:`_evaluate_device` up to its copy: the device arrays whose values (on the host, in order:
    :func:`~hyperapp.kernels.pack.to_host_numbers`) :func:`evaluation_report` takes, so that a caller can
    fetch them with its own numbers (a run's end: one copy for its objects and its evaluation)."""
    xp = get_namespace(scores)
    s, t, is_pos, is_neg = _masks(scores, truth, exclude)
    srt = xp.sort(xp.where(is_neg, s, xp.inf))  # the n_n non-targets first, ascending
    n_p, n_n = total(is_pos, xp.int64), total(is_neg, xp.int64)
    if positives is not None:  # the truth's pixels hold every target: the rest count for nothing below
        positives = xp.asarray(positives)
        s, is_pos = s[positives], is_pos[positives]
    return [_auc_counts(srt, n_n, s, is_pos), total(t, xp.int64), n_p, n_n]


#: the evaluation module's kernels, compiled together
EVALUATE_KERNELS = tuple(f"hyperapp_{f}<{t}>" for f in ("auc_counts", "negatives", "auc_labelled")
                         for t in ("float", "double"))


def labelled_evaluation_counts(scores, labels, positives) -> list:
    """:func:`evaluation_counts` at a run's end on the GPU, from the run's ``labels`` (int8, the pixels'
    shape: clicked targets and no-data pixels do not count) and the truth's target pixels ``positives``
    (flat indices on the device, each once), in two launches of ``kernels/evaluate.cu`` beside CuPy's
    sort, where the masks take about thirty: the same numbers."""
    from hyperapp.kernels import get_kernel

    xp = get_namespace(scores)
    s = xp.ascontiguousarray(scores.reshape(-1))
    if s.dtype not in (xp.float32, xp.float64):
        s = s.astype(xp.float64)
    lab = xp.ascontiguousarray(labels.reshape(-1)).astype(xp.int8, copy=False)
    pos = xp.ascontiguousarray(xp.asarray(positives).astype(xp.int64, copy=False))
    name = "float" if s.dtype == xp.float32 else "double"
    n, m = int(s.size), int(pos.size)
    v = xp.empty_like(s)
    get_kernel("evaluate", f"hyperapp_negatives<{name}>", name_expressions=EVALUATE_KERNELS)(
        (min(-(-n // 256), 4096),), (256,), (s, lab, np.int64(n), v))
    v[pos] = xp.inf  # the truth's targets are no non-targets
    srt = xp.sort(v)
    out = xp.zeros(6, xp.uint64)
    get_kernel("evaluate", f"hyperapp_auc_labelled<{name}>", name_expressions=EVALUATE_KERNELS)(
        (max(1, min(-(-m // 256), 2048)),), (256,), (srt, np.int64(n), s, lab, pos, np.int64(m),
                                                      np.float64(PD_FARS[0]), np.float64(PD_FARS[1]),
                                                      np.uint64(m), out))
    return [out]


def evaluation_report(numbers: list) -> dict:
    """:func:`evaluate`'s answer from the values of :func:`evaluation_counts`' arrays."""
    u2, pd2, pd3, n_truth, n_p, n_n = numbers
    _check_both(n_p, n_n)
    return {"auc": u2 / 2.0 / (n_p * n_n), "pd_at_far_1e-2": pd2 / n_p, "pd_at_far_1e-3": pd3 / n_p,
            "n_target_pixels": n_truth, "n_target_pixels_scored": n_p, "n_other_pixels_scored": n_n}
