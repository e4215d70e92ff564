"""Detection scoring: ROC curve, AUC, Pd at a false-alarm rate, thresholds for a false-alarm rate.

All functions take NumPy or CuPy arrays and compute on that device, so a full-size score map is
evaluated on the GPU without a host copy. AUC is the Mann-Whitney statistic with tied scores given
their average rank, which is what ``sklearn.metrics.roc_auc_score`` computes.
"""

from __future__ import annotations

import numpy as np

from hyperapp.backend import get_namespace, to_host
from hyperapp.errors import InputError


def _split(scores, truth, exclude=None):
    xp = get_namespace(scores)
    s = scores.reshape(-1)
    t = xp.asarray(truth).reshape(-1).astype(bool)
    if s.shape != t.shape:
        raise InputError(f"truth has {t.size} pixels, scores have {s.size}")
    keep = xp.isfinite(s)
    if exclude is not None:
        keep &= ~xp.asarray(exclude).reshape(-1).astype(bool)
    return s[keep & t], s[keep & ~t]


def auc(scores, truth, exclude=None) -> float:
    """Area under the ROC curve of ``scores`` against a boolean ``truth`` mask.

    Parameters
    ----------
    exclude : bool mask, optional
        Pixels left out (the training clicks).
    """
    return _auc(*_split(scores, truth, exclude))


def _auc(pos, neg, neg_sorted=None) -> float:
    """Mann-Whitney U / (n_pos n_neg): for each target score, the non-targets below it plus half the
    ones equal to it, counted by two binary searches in the sorted non-target scores (one sort of the
    non-targets, which the Pd figures need anyway, instead of ranking every pixel)."""
    xp = get_namespace(pos)
    n_p, n_n = int(pos.size), int(neg.size)
    if n_p == 0 or n_n == 0:
        raise InputError("AUC needs both target and non-target pixels in the truth mask")
    srt = xp.sort(neg) if neg_sorted is None else neg_sorted
    below = xp.searchsorted(srt, pos, side="left")
    not_above = xp.searchsorted(srt, pos, side="right")
    u2 = int((below.astype(xp.int64) + not_above.astype(xp.int64)).sum())  # 2U, exact in integers
    return u2 / 2.0 / (n_p * n_n)


def threshold_for_far(background_scores, far: float) -> float:
    """Score threshold at which a fraction ``far`` of the given background scores lies above it."""
    xp = get_namespace(background_scores)
    s = background_scores.reshape(-1)
    s = s[xp.isfinite(s)]
    if s.size == 0:
        raise InputError("no finite background scores to set a threshold from")
    if not 0.0 < far < 1.0:
        raise InputError(f"false-alarm rate must be in (0, 1), got {far}")
    return float(_at_far(xp.sort(s), far))


def _at_far(ascending, far: float):
    """The score in sorted (ascending) background scores above which lies a fraction ``far`` of them."""
    n = ascending.size
    return ascending[n - 1 - min(int(np.floor(far * n)), n - 1)]


def pd_at_far(scores, truth, far: float, exclude=None) -> float:
    """Probability of detection when the threshold lets through a fraction ``far`` of non-targets."""
    pos, neg = _split(scores, truth, exclude)
    if pos.size == 0:
        raise InputError("Pd needs target pixels in the truth mask")
    t = threshold_for_far(neg, far)
    return float((pos > t).sum()) / int(pos.size)


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


def evaluate(scores, truth, exclude=None) -> dict:
    """AUC and Pd at 1e-2 and 1e-3 false-alarm rate, as the report records them (one split of the
    pixels and one sort of the non-target scores serve all three)."""
    xp = get_namespace(scores)
    pos, neg = _split(scores, truth, exclude)
    srt = xp.sort(neg)  # ascending
    out = {"auc": _auc(pos, neg, srt)}
    for far, key in ((1e-2, "pd_at_far_1e-2"), (1e-3, "pd_at_far_1e-3")):
        t = _at_far(srt, far)
        out[key] = float((pos > t).sum()) / int(pos.size)
    out["n_target_pixels"] = int(to_host(xp.asarray(truth).astype(bool).sum()))
    return out
