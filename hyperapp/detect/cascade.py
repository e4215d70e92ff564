"""The FFBP's boxes refined by the RBFN: the cascade's second stage inside and outside the boxes."""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.detect.finish import DEFAULT_FAR, DetectionResult
from hyperapp.models.base import NODATA, TARGET
from hyperapp.models.evaluation import far_threshold


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
