"""A threshold that keeps what was clicked, where the requested false-alarm rate keeps few objects.

A false-alarm rate sets the threshold from the background's scores alone. On a scene whose targets
score near the background's tail it keeps almost nothing: on the airport scene, RBFN after five clicks
on aircraft scores an AUC of 0.956-0.968, but its threshold for a false-alarm rate of 1e-3 keeps 10
pixels in 4-7 objects, one of the five clicked aircraft among them (Pd 0.03-0.04). An analyst who
clicked five aircraft of thirteen expects the aircraft, or to be told how to get them.

The pixels clicked as targets say what a target scores: a threshold just below the lowest clicked
target's score keeps every pixel that scores at least like each of them, the clicked objects' kind (on
the airport: 180 pixels in 43 objects, all 13 aircraft among them, Pd 0.51). The same logic as the
network-mode split of :func:`hyperapp.models.evaluation.far_threshold`, which takes the pixels that stand
apart with the targets as targets, from the other side: from the targets' own scores rather than from
a gap in the top of the distribution. :func:`clicked_kind` computes it on the scores' device at a
run's end (:func:`hyperapp.detect.finish.finish_detection` puts it in the report as
``"suggested_threshold"``), :func:`suggestion_words` says it; the window's Results dock offers it in one
click and the CLI's summary prints it.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host, total
from hyperapp.core.words import counted
from hyperapp.kernels.pack import to_host_numbers

#: clicked pixels up to this many are grouped into objects on the host (:func:`clicked_objects`); more (a
#: whole ROI painted as targets) are labelled on the scores' device
HOST_CLICKS = 4096


def clicks_on_host(clicked: np.ndarray | None) -> bool:
    """Whether :func:`clicked_kind` groups the clicked pixels ``clicked`` (sorted flat indices, or None) on
    the host: up to :data:`HOST_CLICKS` of them; it then needs no map of them on the device."""
    return clicked is not None and clicked.size <= HOST_CLICKS


def clicked_objects(pixels: np.ndarray, cols: int) -> tuple[np.ndarray, int]:
    """The 8-connected objects the clicked pixels form among themselves: each pixel's object number (0 ..
    n - 1, in the order of the sorted flat indices ``pixels``) and n, as ``scipy.ndimage.label`` of
    their mask numbers them. A few clicks are grouped by their neighbours' positions in the sorted list
    (one ``searchsorted`` for the 8 neighbours of every pixel, then the smallest index spread along the
    edges until it settles), where labelling the whole mask on the GPU took two launches and a copy
    per click."""
    p = np.asarray(pixels, np.int64)
    n = p.size
    if n == 0:
        return np.zeros(0, np.int64), 0
    r, c = np.divmod(p, cols)
    dr = np.array([-1, -1, -1, 0, 0, 1, 1, 1])
    dc = np.array([-1, 0, 1, -1, 1, -1, 0, 1])
    cc = c[:, None] + dc
    key = (r[:, None] + dr) * cols + cc
    j = np.minimum(np.searchsorted(p, key), n - 1)
    hit = (p[j] == key) & (cc >= 0) & (cc < cols)
    a, b = np.nonzero(hit)[0], j[hit]
    lab = np.arange(n)
    while True:  # each pass takes the smaller label across every edge (both ways: the edges are symmetric)
        new = lab.copy()
        np.minimum.at(new, a, lab[b])
        new = new[new]  # pointer jumping: converges in O(log n) passes
        if np.array_equal(new, lab):
            break
        lab = new
    roots, number = np.unique(lab, return_inverse=True)
    return number.reshape(-1), int(roots.size)


def clicked_kind(scores, targets, threshold: float, clicked: np.ndarray | None = None,
                 now: tuple[int, int] | None = None, clicked_values: np.ndarray | None = None) -> dict | None:
    """The threshold that keeps every clicked target, where the run's ``threshold`` misses half of them
    or more; else None.

    Parameters
    ----------
    scores : (rows, cols) array (NumPy or CuPy)
        The run's scores (NaN: no data).
    targets : bool (rows, cols) array on the same device
        The pixels clicked as targets.
    threshold : float
        The run's threshold (the mask holds the scores above it).
    clicked : int array, optional
        The same pixels as sorted flat indices on the host, where the caller has them: up to
        :data:`HOST_CLICKS` of them, their scores come to the host in one copy and they are grouped
        into objects there (:func:`clicked_objects`), and nothing is labelled on the device unless a
        suggestion is made.
    now : (int, int), optional
        The pixels and the 8-connected objects of the run's mask (the scores above ``threshold``), where
        the caller counted them already (the run's objects stage): they are not labelled again.
    clicked_values : float array, optional
        The scores at ``clicked`` on the host, where the caller fetched them (a run's end fetches them with
        its first numbers): they are not copied again.

    Returns
    -------
    dict or None
        ``threshold`` (just below the lowest clicked target's score), ``pixels`` and ``objects`` it keeps,
        and at the run's threshold: ``pixels_now``, ``objects_now``, ``clicked`` (clicked objects,
        8-connected) and ``clicked_kept_now`` (those the mask touches). None where nothing is clicked,
        the clicked pixels have no finite score, half or more of the clicked objects are kept already, or
        the suggestion would not lower the threshold.
    """
    pending = suggestion_pending(scores, targets, threshold, clicked, now is None, clicked_values)
    return None if pending is None else pending.report(to_host_numbers(pending.device), now)


class Suggestion:
    """A suggested threshold whose counts are still on the scores' device (:func:`suggestion_pending`): a
    run's end fetches them with its own numbers, in one copy."""

    def __init__(self, threshold: float, clicked: int, kept_now: int, device: list):
        self.threshold, self.clicked, self.kept_now = threshold, clicked, kept_now
        #: the device numbers, in this order: the pixels and the objects the suggestion keeps, then (where the
        #: caller did not count them) the pixels and the objects of the run's own mask
        self.device = device

    def report(self, numbers: list, now: tuple[int, int] | None = None) -> dict:
        """:func:`clicked_kind`'s answer from ``numbers``, which begin with :attr:`device`'s values on the host
        (any after them are not read); ``now``: the run's (pixels, objects), where the caller counted them."""
        pixels, objects = numbers[:2]
        pixels_now, objects_now = now if now is not None else numbers[2:4]
        return {"threshold": self.threshold, "pixels": int(pixels), "objects": int(objects),
                "pixels_now": int(pixels_now), "objects_now": int(objects_now), "clicked": self.clicked,
                "clicked_kept_now": self.kept_now}


def suggestion_pending(scores, targets, threshold: float, clicked: np.ndarray | None = None,
                       count_now: bool = True, clicked_values: np.ndarray | None = None) -> Suggestion | None:
    """:func:`clicked_kind` up to its last copy: None where it suggests nothing, else the suggestion with its
    counts launched on the scores' device (``count_now``: the run's own mask's counts too)."""
    from hyperapp.models.postprocess import label_objects

    xp = get_namespace(scores)
    host = clicks_on_host(clicked)
    if host:
        vals = clicked_values if clicked_values is not None else \
            to_host(scores.reshape(-1)[xp.asarray(clicked)]).astype(np.float64)
        finite = vals[np.isfinite(vals)]
        low = float(finite.min()) if finite.size else np.inf
    else:
        t = targets.astype(bool) if targets.dtype != bool else targets
        # the lowest finite clicked score in one reduction and one copy (two boolean selections were a round
        # trip each on the GPU); +inf where no clicked pixel has a finite score
        low = float(to_host(xp.min(xp.where(xp.logical_and(t, xp.isfinite(scores)), scores, xp.inf))))
    if not np.isfinite(low):
        return None
    dtype = np.float32 if scores.dtype == np.float32 else np.float64
    suggested = float(np.nextafter(dtype(low), dtype(-np.inf)))  # the mask takes the scores above it
    if suggested >= float(threshold):
        return None
    if host:
        groups, n_clicked = clicked_objects(clicked, scores.shape[-1])
        kept_now = int(np.unique(groups[vals > float(threshold)]).size)
    else:
        lab, n_clicked = label_objects(t)
        kept_now = int(xp.unique(lab[xp.logical_and(xp.greater(scores, threshold), t)]).size)
    if n_clicked == 0 or 2 * kept_now > n_clicked:
        return None
    new = xp.greater(scores, suggested)
    _, objects = label_objects(new, count_on_device=True)
    device = [total(new, np.int64), objects]
    if count_now:
        mask = xp.greater(scores, threshold)
        device += [total(mask, np.int64), label_objects(mask, count_on_device=True)[1]]
    return Suggestion(suggested, int(n_clicked), kept_now, device)


def suggestion_words(report: dict) -> str:
    """The report's ``suggested_threshold`` in words (the Results dock and the CLI's summary), or ""."""
    s = report.get("suggested_threshold")
    if not s:
        return ""
    far = report.get("far")
    asked = f"The false-alarm rate of {far:g}" if far else "The threshold"
    # clicked pixels that touch make one target (report["n_target_pixels"]: the clicked pixels)
    touch = " (clicked pixels that touch make one)" if report.get("n_target_pixels", 0) > s["clicked"] else ""
    return (f"{asked} keeps only {counted(s['objects_now'], 'object')} ({counted(s['pixels_now'], 'pixel')}), "
            f"{s['clicked_kept_now']} of the {s['clicked']} clicked targets{touch} among "
            f"them. A threshold of {s['threshold']:.4g}, just below the lowest clicked target's score, keeps "
            f"everything that scores like every clicked target: {counted(s['objects'], 'object')} "
            f"({counted(s['pixels'], 'pixel')}), to review.")
