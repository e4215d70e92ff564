"""Multi-resolution FFBP window detector (seed 002, sections 2.3 and 4.3), trained and searched on the GPU.

Two feed-forward back-propagation networks judge windows of the image. ANN-1: "may this window hold a
target?" ANN-2: "is this the right scale?" The search starts with the whole image; a window ANN-1
rejects is dropped, one ANN-1 accepts and ANN-2 accepts is a detected box, and the rest are split in
four and judged again, down to the minimum window (8 x 8 pixels by default), where an ANN-1 accept is
a box. Any image size works: a window of h x w blocks splits at ceil(h/2), ceil(w/2).

Features (eqs. 2.3-2.4): the per-band standard deviation of the window, scaled to [-1, 1] with per-band
minima and maxima fixed at training; ``features="meanstd"`` adds the per-band mean. Both are read in
O(1) per window from summed-area tables of per-block sums and sums of squares (blocks of
``min_window`` pixels), built in one pass over the cube (``kernels/ffbp.cu``). ``use_scale`` adds the
window's size class (log2 of its larger side in blocks) as one more input, so one pair of networks
serves every level.

Training (which the thesis did not ship): every window of the quadtree of each training scene, plus
the same windows shifted by half their size (so targets cut by window edges are learned). ANN-1's label:
the window holds target pixels. ANN-2's label: the window holds target pixels and none of its four
children holds a whole target component (splitting further would cut the target), or it is a
minimum window. Both networks train by back-propagation with Adam, class-balanced, with early stopping
on a held-out split (:mod:`hyperapp.models.mlp`), on the device the scenes are on (on the GPU, the
whole training is one launch of ``kernels/mlp.cu``). ANN-1's threshold is then set per size class to just
below the lowest score of any target window of that class in training (recall first: a window missed
near the top loses every target inside it), and for minimum windows at a low quantile of those scores;
ANN-2's is 0.5. Windows larger than any seen in training
are not judged: they are split.

After the search, boxes that touch or overlap are merged into their bounding box (up to twice the larger
box's size), so a target that a split cut in two still ends up inside one box.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import InputError, ModelError
from hyperapp.io.objects import box_mask
from hyperapp.models.base import TARGET, Param, PixelDetector, check_finite
from hyperapp.models.mlp import TansigMLP

FEATURES = ("std", "meanstd")


# ---------------------------------------------------------------------------------------------- stats
def block_stats(X, bs: int, ref):
    """Per-block sums and sums of squares of (X - ref), as float32 (nbr, nbc, B), and pixel counts.

    Shifting by a per-band reference (the first pixel) keeps the float32 sums of squares accurate.
    """
    xp = get_namespace(X)
    R, C, B = X.shape
    nbr, nbc = -(-R // bs), -(-C // bs)
    if xp is not np:
        from hyperapp.models.ffbp_gpu import block_stats_gpu

        S1, S2 = block_stats_gpu(X, bs, ref)
    else:
        D = np.zeros((nbr * bs, nbc * bs, B), np.float32)
        D[:R, :C] = X - ref
        V = D.reshape(nbr, bs, nbc, bs, B)
        S1 = V.sum(axis=(1, 3), dtype=np.float64).astype(np.float32)
        S2 = (V * V).sum(axis=(1, 3), dtype=np.float64).astype(np.float32)
    rr = np.minimum(bs, R - np.arange(nbr) * bs)
    cc = np.minimum(bs, C - np.arange(nbc) * bs)
    N = np.outer(rr, cc).astype(np.float64)  # host: the GPU kernels count pixels in closed form
    return S1, S2, N


def summed_area(S):
    """Summed-area table with a zero first row/column, float64: T[i, j] = sum of S[:i, :j]."""
    xp = get_namespace(S)
    shape = (S.shape[0] + 1, S.shape[1] + 1) + S.shape[2:]
    T = xp.zeros(shape, xp.float64)
    T[1:, 1:] = S.astype(xp.float64).cumsum(axis=0).cumsum(axis=1)
    return T


class WindowStats:
    """O(1) mean and standard deviation of any block-aligned window, from summed-area tables."""

    def __init__(self, X, bs: int):
        xp = get_namespace(X)
        R, C, _ = X.shape
        self.shape, self.bs = (R, C), bs
        self.ref = X[0, 0].astype(xp.float32).copy()
        S1, S2, N = block_stats(X, bs, self.ref)
        if xp is np:
            self.T1, self.T2 = summed_area(S1), summed_area(S2)
        else:
            from hyperapp.models.ffbp_gpu import summed_area_gpu

            self.T1, self.T2 = summed_area_gpu(S1), summed_area_gpu(S2)
        self.TN = summed_area(N)
        self.nb = (S1.shape[0], S1.shape[1])

    @staticmethod
    def _box(T, W):
        r0, c0, r1, c1 = W[:, 0], W[:, 1], W[:, 2], W[:, 3]
        return T[r1, c1] - T[r0, c1] - T[r1, c0] + T[r0, c0]

    def mean_std(self, W):
        xp = get_namespace(W)
        n = xp.asarray(self._box(self.TN, to_host(W)))[:, None]
        m = self._box(self.T1, W) / n
        var = self._box(self.T2, W) / n - m * m
        xp = get_namespace(var)
        return (m + self.ref).astype(xp.float32), xp.sqrt(xp.maximum(var, 0)).astype(xp.float32)


# ---------------------------------------------------------------------------------------------- windows
def size_class(W):
    """log2 of the larger side of each window, in blocks (0 for a minimum window)."""
    xp = get_namespace(W)
    side = xp.maximum(W[:, 2] - W[:, 0], W[:, 3] - W[:, 1]).astype(xp.float64)
    return xp.ceil(xp.log2(side)).astype(xp.int32)


def split(W):
    """The (up to) four children of each window; returns (children, parent index)."""
    xp = get_namespace(W)
    r0, c0, r1, c1 = W[:, 0], W[:, 1], W[:, 2], W[:, 3]
    rm = r0 + (r1 - r0 + 1) // 2
    cm = c0 + (c1 - c0 + 1) // 2
    kids = xp.stack([
        xp.stack([r0, c0, rm, cm], 1), xp.stack([r0, cm, rm, c1], 1),
        xp.stack([rm, c0, r1, cm], 1), xp.stack([rm, cm, r1, c1], 1),
    ], 1)  # (n, 4, 4)
    parent = xp.repeat(xp.arange(W.shape[0]), 4)
    kids = kids.reshape(-1, 4)
    ok = (kids[:, 2] > kids[:, 0]) & (kids[:, 3] > kids[:, 1])
    return kids[ok], parent[ok]


def is_leaf(W):
    return ((W[:, 2] - W[:, 0]) <= 1) & ((W[:, 3] - W[:, 1]) <= 1)


def quadtree(nbr: int, nbc: int, shifted: bool) -> np.ndarray:
    """Every window of the quadtree (and, if asked, each shifted by half its size), host int64."""
    levels = [np.array([[0, 0, nbr, nbc]], np.int64)]
    while True:
        W = levels[-1]
        W = W[~is_leaf(W)]
        if W.size == 0:
            break
        kids, _ = split(W)
        levels.append(kids)
    out = [np.concatenate(levels)]
    if shifted:
        for W in levels:
            h, w = W[:, 2] - W[:, 0], W[:, 3] - W[:, 1]
            S = W + np.stack([h // 2, w // 2, h // 2, w // 2], 1)
            S[:, 2] = np.minimum(S[:, 2], nbr)
            S[:, 3] = np.minimum(S[:, 3], nbc)
            keep = (S[:, 2] > S[:, 0]) & (S[:, 3] > S[:, 1]) & ((h > 1) | (w > 1))
            out.append(S[keep])
    return np.unique(np.concatenate(out), axis=0)


def to_pixels(W, bs: int, shape) -> np.ndarray:
    """Window (block units) -> pixel extents (r0, c0, r1, c1), clipped to the image."""
    P = np.asarray(W) * bs
    P[:, 2] = np.minimum(P[:, 2], shape[0])
    P[:, 3] = np.minimum(P[:, 3], shape[1])
    return P


def merge_boxes(P: np.ndarray) -> np.ndarray:
    """Merge boxes (pixel r0, c0, r1, c1) that touch or overlap into their bounding boxes.

    A merged box may grow to at most twice the side of the largest box that went into it, so a target
    cut by splits (up to a 2 x 2 group of minimum windows) is joined again, while a run of false boxes
    does not chain into one box over the whole image.
    """
    boxes = [[*map(int, b), max(int(b[2] - b[0]), int(b[3] - b[1]))] for b in P]  # r0, c0, r1, c1, base
    changed = True
    while changed and len(boxes) > 1:
        changed = False
        out: list[list[int]] = []
        for b in boxes:
            for o in out:
                touch = b[0] <= o[2] and o[0] <= b[2] and b[1] <= o[3] and o[1] <= b[3]
                base = max(o[4], b[4])
                u = [min(o[0], b[0]), min(o[1], b[1]), max(o[2], b[2]), max(o[3], b[3])]
                if touch and u[2] - u[0] <= 2 * base and u[3] - u[1] <= 2 * base:
                    o[:4], o[4] = u, base
                    changed = True
                    break
            else:
                out.append(list(b))
        boxes = out
    return np.asarray([b[:4] for b in boxes], np.int64).reshape(-1, 4)


def component_boxes(truth: np.ndarray) -> np.ndarray:
    """Pixel bounding boxes (r0, c0, r1, c1) of the 8-connected target components."""
    lab, n = ndimage.label(truth, structure=np.ones((3, 3), bool))
    objs = ndimage.find_objects(lab)
    return np.asarray([[s[0].start, s[1].start, s[0].stop, s[1].stop] for s in objs], np.int64).reshape(-1, 4)


def box_recall(boxes: np.ndarray, truth: np.ndarray) -> tuple[float, int]:
    """(fraction of target components wholly inside one box, number of boxes holding no target)."""
    comps = component_boxes(truth)
    if len(comps) == 0:
        return 1.0, len(boxes)
    if len(boxes) == 0:
        return 0.0, 0
    b = np.asarray(boxes)[:, None, :]
    c = comps[None, :, :]
    inside = (b[..., 0] <= c[..., 0]) & (b[..., 1] <= c[..., 1]) & (b[..., 2] >= c[..., 2]) & (b[..., 3] >= c[..., 3])
    recall = float(inside.any(axis=0).mean())
    false = int(sum(not truth[r0:r1, c0:c1].any() for r0, c0, r1, c1 in np.asarray(boxes)))
    return recall, false


# ---------------------------------------------------------------------------------------------- model
class FFBP(PixelDetector):
    """Two FFBP networks searching a window quadtree for targets of any size.

    Parameters
    ----------
    features : {"std", "meanstd"}
        Per-band standard deviation (the thesis), or mean and standard deviation.
    n_hidden : int
        Hidden tansig neurons of each network.
    min_window : int
        Smallest window side in pixels (the block size of the statistics).
    use_scale : bool
        Give the networks the window's size class as an input.
    shifted : bool
        Train on half-shifted windows too.
    margin : float
        ANN-1's per-size-class threshold sits this far below its lowest target-window score.
    leaf_quantile : float
        For minimum windows only, the threshold sits at this quantile of the target windows' scores
        instead (a missed minimum window loses a few pixels, not a subtree; faint sub-pixel targets
        would otherwise pull the threshold to zero on cluttered scenes).
    merge : bool
        Merge touching boxes after the search.
    pad : int
        Pixels added around each final box (targets' mixed border pixels that fell in a rejected
        neighbouring window).
    epochs, seed :
        Training settings.
    refine : bool
        In :func:`hyperapp.detect.run.run_detection`: score the pixels inside the boxes with an RBFN
        trained from the clicks (coarse windows first, pixels last) for a pixel mask.
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("features", str, help="What describes a window: the standard deviation of each band (std) or its mean and standard deviation (meanstd).", choices=("std", "meanstd"), label="Window features"),
        Param("n_hidden", int, help="Hidden neurons of each of the two window networks.", minimum=2, maximum=256, label="Neurons per network"),
        Param("min_window", int, help="The search stops at windows of this side.", minimum=2, maximum=256, label="Smallest window (px)"),
        Param("pad", int, help="Pixels added around each detected box.", minimum=0, maximum=32, label="Box margin (px)"),
        Param("epochs", int, help="Training epochs at most (training stops early when the validation error stops falling).", minimum=1, maximum=10000, label="Training epochs"),
    )

    accepts_progress = True
    kind = "window"

    def __init__(self, features: str = "std", n_hidden: int = 16, min_window: int = 8,
                 use_scale: bool = True, shifted: bool = True, margin: float = 0.02, merge: bool = True,
                 leaf_quantile: float = 0.05, pad: int = 3, epochs: int = 300, seed: int = 0,
                 refine: bool = False):
        self.features = features
        self.n_hidden = n_hidden
        self.min_window = min_window
        self.use_scale = use_scale
        self.shifted = shifted
        self.margin = margin
        self.merge = merge
        self.leaf_quantile = leaf_quantile
        self.pad = pad
        self.refine = refine
        self.epochs = epochs
        self.seed = seed

    # ------------------------------------------------------------------ features
    def _raw_features(self, stats: WindowStats, W):
        xp = get_namespace(W)
        mean, std = stats.mean_std(W)
        parts = [std] if self.features == "std" else [mean, std]
        if self.use_scale:
            parts.append(size_class(W).astype(xp.float32)[:, None])
        return xp.concatenate(parts, axis=1)

    def _scaled(self, F):
        xp = get_namespace(F)
        lo, hi = xp.asarray(self.fmin_), xp.asarray(self.fmax_)
        # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators
        return xp.subtract(xp.divide(xp.multiply(2.0, F - lo), xp.maximum(hi - lo, 1e-12)), 1.0).astype(xp.float32)

    def _check_image(self, X):
        if X.ndim != 3:
            raise InputError("the FFBP detector needs an image (rows, cols, bands)")
        if min(X.shape[:2]) < self.min_window:
            raise InputError(f"the image ({X.shape[0]}x{X.shape[1]}) is smaller than the minimum window "
                             f"{self.min_window}x{self.min_window}")

    # ------------------------------------------------------------------ training
    def _training_windows(self, X, truth):
        xp = get_namespace(X)
        self._check_image(X)
        check_finite(X)
        stats = WindowStats(X, self.min_window)
        W = quadtree(*stats.nb, self.shifted)
        Wd = xp.asarray(W)
        F = to_host(self._raw_features(stats, Wd))
        P = to_pixels(W, self.min_window, X.shape[:2])
        t = np.asarray(truth, bool)
        cnt = np.zeros((t.shape[0] + 1, t.shape[1] + 1), np.int64)
        cnt[1:, 1:] = t.cumsum(0).cumsum(1)
        n_t = cnt[P[:, 2], P[:, 3]] - cnt[P[:, 0], P[:, 3]] - cnt[P[:, 2], P[:, 1]] + cnt[P[:, 0], P[:, 1]]
        y1 = n_t > 0
        # ANN-2: no child wholly holds a component (or a minimum window)
        comps = component_boxes(t)
        kids, parent = split(W)
        KP = to_pixels(kids, self.min_window, X.shape[:2])
        if len(comps):
            inside = ((KP[:, None, 0] <= comps[None, :, 0]) & (KP[:, None, 1] <= comps[None, :, 1])
                      & (KP[:, None, 2] >= comps[None, :, 2]) & (KP[:, None, 3] >= comps[None, :, 3])).any(axis=1)
        else:
            inside = np.zeros(len(KP), bool)
        child_holds = np.zeros(len(W), bool)
        np.logical_or.at(child_holds, parent, inside)
        y2 = y1 & (is_leaf(W) | ~child_holds)
        return F, y1, y2, size_class(W)

    def fit(self, X, y, progress=None):
        """Train on one scene whose target pixels are ``y == 1`` (a truth mask or drawn target boxes)."""
        xp = get_namespace(X)
        truth = to_host(xp.asarray(y)).reshape(X.shape[:2]) == TARGET
        return self.fit_scenes([(X, truth)], progress)

    def fit_scenes(self, scenes, progress=None):
        """Train on several ``(image, truth mask)`` scenes of the same band count."""
        if not scenes:
            raise ModelError("no training scenes given")
        nb = {s[0].shape[2] for s in scenes}
        if len(nb) != 1:
            raise ModelError(f"training scenes have different band counts: {sorted(nb)}")
        parts = [self._training_windows(X, t) for X, t in scenes]
        F = np.concatenate([p[0] for p in parts])
        y1 = np.concatenate([p[1] for p in parts])
        y2 = np.concatenate([p[2] for p in parts])
        sc = np.concatenate([to_host(p[3]) for p in parts])
        if not y1.any():
            raise ModelError("the training scenes hold no target pixels: the FFBP networks need targets to learn")
        if y1.all():
            raise ModelError("every training window holds a target: add scenes with target-free areas")
        self.fmin_, self.fmax_ = F.min(axis=0), F.max(axis=0)
        Fs = self._scaled(F)
        self.n_bands_ = int(next(iter(nb)))
        xp = get_namespace(scenes[0][0])  # train where the scenes are (kernels/mlp.cu on the GPU)
        sub = None if progress is None else progress.sub(0.0, 0.6)
        self.ann1_ = TansigMLP(self.n_hidden, epochs=self.epochs, seed=self.seed).fit(xp.asarray(Fs), xp.asarray(y1), sub)
        pos = np.flatnonzero(y1)
        y2p = y2[pos]
        if y2p.all() or not y2p.any():
            raise ModelError("the training targets all sit at one scale: ANN-2 cannot learn when to stop; "
                             "add scenes with targets of other sizes")
        sub = None if progress is None else progress.sub(0.6, 1.0)
        self.ann2_ = TansigMLP(self.n_hidden, epochs=self.epochs, seed=self.seed + 1).fit(
            xp.asarray(Fs[pos]), xp.asarray(y2p), sub)
        p1 = to_host(self.ann1_.forward(xp.asarray(Fs)))
        n_cls = int(sc.max()) + 1
        self.t1_ = np.full(n_cls, 0.5, np.float32)
        for s in range(n_cls):
            m = (sc == s) & y1
            if m.any():
                low = float(np.quantile(p1[m], self.leaf_quantile)) if s == 0 else float(p1[m].min())
                self.t1_[s] = min(0.5, low - self.margin)
        self.t2_ = 0.5
        self.max_class_ = n_cls - 1
        self._to_host_networks()
        return self

    def _to_host_networks(self):
        for ann in (self.ann1_, self.ann2_):
            for k in ("U_", "b_", "w_", "b0_"):
                setattr(ann, k, to_host(getattr(ann, k)))

    # ------------------------------------------------------------------ search
    def _net(self, ann, xp):
        return tuple(xp.asarray(getattr(ann, k)) for k in ("U_", "b_", "w_", "b0_"))

    def detect(self, X, progress=None) -> list[dict]:
        """Search the window tree; returns the detected boxes (and keeps per-level counts)."""
        self._check_fitted()
        self._check_image(X)
        if X.shape[2] != self.n_bands_:
            raise ModelError(f"image has {X.shape[2]} bands, the FFBP networks were trained on {self.n_bands_}")
        xp = get_namespace(X)
        if xp is not np:
            from hyperapp.models.ffbp_gpu import search_gpu_graph

            W, s1, s2, evaluated = search_gpu_graph(self, X)
        else:
            W, s1, s2, evaluated = self._search(WindowStats(X, self.min_window), np)
        P = to_pixels(to_host(W).astype(np.int64), self.min_window, X.shape[:2])
        s1, s2 = to_host(s1), to_host(s2)
        self.windows_per_level_ = evaluated
        order = np.lexsort((P[:, 1], P[:, 0]))
        P, s1, s2 = P[order], s1[order], s2[order]
        self.raw_boxes_ = P
        if self.merge and len(P):
            M = merge_boxes(P)
            inside = lambda m: ((P[:, 0] >= m[0]) & (P[:, 1] >= m[1]) & (P[:, 2] <= m[2]) & (P[:, 3] <= m[3]))  # noqa: E731
            a1 = np.array([s1[inside(m)].max() for m in M])
            a2 = np.array([s2[inside(m)].max() for m in M])
            P, s1, s2 = M, a1, a2
            order = np.lexsort((P[:, 1], P[:, 0]))
            P, s1, s2 = P[order], s1[order], s2[order]
        if self.pad and len(P):
            P = P + np.array([-self.pad, -self.pad, self.pad, self.pad])
            P = np.clip(P, 0, [X.shape[0], X.shape[1], X.shape[0], X.shape[1]])
        bs = self.min_window
        boxes = []
        for (r0, c0, r1, c1), a, b in zip(P, s1, s2):
            side = max(-(-(r1 - r0) // bs), -(-(c1 - c0) // bs))
            boxes.append({"row": int(r0), "col": int(c0), "height": int(r1 - r0), "width": int(c1 - c0),
                          "level": int(math.ceil(math.log2(side))) if side > 0 else 0,
                          "ann1": float(a), "ann2": float(b)})
        self.boxes_ = boxes
        return boxes

    def _search(self, stats: WindowStats, xp):
        """Level by level, all live windows at once (the NumPy path; the GPU path is ffbp_gpu)."""
        net1, net2 = self._net(self.ann1_, xp), self._net(self.ann2_, xp)
        t1 = xp.asarray(self.t1_)
        live = xp.asarray([[0, 0, stats.nb[0], stats.nb[1]]], dtype=xp.int64)
        acc, a1, a2, evaluated = [], [], [], []
        while live.shape[0]:
            evaluated.append(int(live.shape[0]))
            F = self._scaled(self._raw_features(stats, live))
            p1 = _forward(F, *net1, xp)
            p2 = _forward(F, *net2, xp)
            cls = size_class(live)
            untrained = cls > self.max_class_
            pos = (p1 > t1[xp.minimum(cls, self.max_class_)]) | untrained
            stop = pos & ~untrained & ((p2 > self.t2_) | is_leaf(live))
            acc.append(live[stop])
            a1.append(p1[stop])
            a2.append(p2[stop])
            go = pos & ~stop
            live = split(live[go])[0] if bool(go.any()) else live[:0]
        return xp.concatenate(acc), xp.concatenate(a1), xp.concatenate(a2), evaluated

    def decision_function(self, X):
        """Per-pixel score map: each pixel inside a detected box gets the box's ANN-1 score, else 0."""
        boxes = self.detect(X)
        xp = get_namespace(X)
        out = np.zeros(X.shape[:2], np.float32)
        for b in sorted(boxes, key=lambda b: b["ann1"]):
            out[b["row"]:b["row"] + b["height"], b["col"]:b["col"] + b["width"]] = max(b["ann1"], 1e-6)
        return xp.asarray(out)

    def box_mask(self, shape) -> np.ndarray:
        return box_mask(self.boxes_, shape)


def _forward(F, U, b, w, b0, xp):
    h = xp.tanh(F @ U + b)
    return xp.multiply(xp.add(xp.tanh(h @ w + b0), 1.0), 0.5)  # ufuncs: see _scaled
