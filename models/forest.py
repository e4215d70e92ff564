"""Decision trees (CART) and random forests for spectra of any number of classes (seed 000), NumPy or CuPy.

The seed grows binary-class CART trees on the GPU after CUDT: for every candidate threshold, prefix
sums of the class counts give the Gini impurity of both sides, and a reduction picks the best. Here
every class count is kept (any number of classes), and trees grow level by level with every node of
a level -- and every tree of a forest -- handled together:

1. Each band is quantised once into ``n_bins`` bins whose edges are midpoints between quantiles of
   the training spectra (so the candidate thresholds of a node are its bins' edges, as in LightGBM and
   scikit-learn's histogram trees; with fewer distinct values than bins, every midpoint is a candidate,
   as in exact CART).
2. Per level: a class-count histogram of every node over its candidate bands (all bands for CART, a
   random ``max_features`` subset per node for a forest), the split that most lowers the weighted Gini
   impurity per node (a prefix sum over bins per band, a reduction over bands), then every spectrum is
   routed to its child.
3. A node becomes a leaf when it is pure, holds fewer than ``min_samples_split`` spectra, reaches
   ``max_depth``, or no split leaves ``min_samples_leaf`` on both sides.

On the GPU steps 1-2 are the kernels of ``kernels/forest.cu`` (one launch per step per level, for all
trees); on the CPU the same steps are ``bincount``/``cumsum`` array code. A forest draws a bootstrap
sample per tree (counts as weights), so the spectra a tree never saw give the out-of-bag accuracy; band
importance is the impurity decrease per band, normalised per tree and averaged (scikit-learn's
``feature_importances_``). ``test_fraction`` of each class is held out before training: the confusion
matrix and accuracy on those spectra are what the panel and the report show.
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import InputError
from hyperapp.models.base import Estimator, Param

#: classes the GPU kernels hold per node at most
MAX_CLASSES = 64
#: device memory one level's histograms may take before the level is split into node chunks
HIST_BYTES = 1 << 30


def _maxc(c: int) -> int:
    """The kernels' class capacity for ``c`` classes: 8, 16, 32 or 64 (few compiled variants)."""
    return max(8, 1 << (max(c, 2) - 1).bit_length())


def bin_edges(X, n_bins: int, max_rows: int = 200_000, seed: int = 0):
    """(bands, n_bins - 1) ascending thresholds per band, padded with +inf.

    Quantiles of (a sample of) the spectra, each edge the midpoint between the two sorted values it
    falls between, so an edge never coincides with a value unless the values are equal.
    """
    xp = get_namespace(X)
    n = X.shape[0]
    if n > max_rows:
        idx = np.sort(np.random.default_rng(seed).choice(n, max_rows, replace=False))
        X = X[xp.asarray(idx)]
        n = max_rows
    S = xp.sort(X.astype(xp.float32), axis=0)
    pos = np.unique(np.round(np.arange(1, n_bins) * n / n_bins).astype(np.int64).clip(1, n - 1))
    pos_d = xp.asarray(pos)
    edges = (0.5 * (S[pos_d - 1] + S[pos_d])).T  # (bands, len(pos))
    out = xp.full((X.shape[1], n_bins - 1), np.inf, xp.float32)
    out[:, : edges.shape[1]] = edges
    # the same value repeated gives equal edges: keep them (their bins stay empty)
    return xp.ascontiguousarray(out)


def quantise(X, edges):
    """uint8 bin index of every value: the number of its band's edges below it."""
    xp = get_namespace(X)
    n, F = X.shape
    if xp is np:
        Xb = np.empty((n, F), np.uint8)
        for f in range(F):  # F searchsorted calls, each over all spectra
            Xb[:, f] = np.searchsorted(edges[f], X[:, f], side="left")
        return Xb
    from hyperapp.kernels import get_kernel

    Xc = xp.ascontiguousarray(X, dtype=xp.float32)
    Xb = xp.empty((n, F), xp.uint8)
    total = n * F
    get_kernel("forest", "forest_bin", {"NBINS": edges.shape[1] + 1})(
        ((total + 255) // 256,), (256,), (Xc, edges, Xb, np.int64(total), np.int32(F), np.int32(edges.shape[1])))
    return Xb


def _split_numpy(Xb, y, w, node_of, feats, n_nodes, n_bins, C, min_leaf, max_entries=8_000_000):
    """The CPU path of one level: every node's class totals and best (score, slot, bin).

    The same splits as the GPU's histograms, found from sorted lists as in SPRINT/CUDT (the seed's
    attribute lists): every (spectrum, candidate band) entry is sorted by (node, band, bin); running
    class counts along each (node, band) run are the left side of the split after each bin, and the
    best score per node is a segmented maximum. Work scales with the spectra, not the bins, so the
    deep levels of many small nodes stay cheap on the CPU. Nodes go in chunks of ``max_entries``.
    """
    n, F = Xb.shape
    m = feats.shape[1]
    flat_nodes = node_of.reshape(-1)
    s_all = np.flatnonzero(flat_nodes >= 0)
    node_all = flat_nodes[s_all]
    order = np.argsort(node_all, kind="stable")
    s_all, node_all = s_all[order], node_all[order].astype(np.int64)
    totals = np.zeros((n_nodes, C), np.int64)
    best = np.full(n_nodes, -1.0)
    slot = np.full(n_nodes, -1, np.int64)
    b_out = np.full(n_nodes, -1, np.int64)
    bounds = np.searchsorted(node_all, np.arange(n_nodes + 1))
    lo = 0
    while lo < n_nodes:
        hi = lo + 1  # grow the chunk while its entries fit
        while hi < n_nodes and (bounds[hi + 1] - bounds[lo]) * m <= max_entries:
            hi += 1
        s, node = s_all[bounds[lo]:bounds[hi]], node_all[bounds[lo]:bounds[hi]]
        i = s % n
        wt = w.reshape(-1)[s].astype(np.int64)
        b = Xb[i[:, None], feats[node]].astype(np.int64)  # (samples, m)
        key = (((node[:, None] * m) + np.arange(m)) * n_bins + b).reshape(-1)
        order = np.argsort(key, kind="stable")
        key = key[order]
        ent = order // m  # entry -> its sample (row of s)
        # runs of equal (node, band, bin): one row of class counts per occupied bin
        new_run = np.r_[True, key[1:] != key[:-1]]
        run_of = np.cumsum(new_run) - 1
        key = key[new_run]
        cnt = np.bincount(run_of * C + y[i[ent]], weights=wt[ent], minlength=key.size * C)
        cnt = cnt.astype(np.int64).reshape(key.size, C)
        seg = key // n_bins  # node * m + slot, per run
        cum = np.cumsum(cnt, axis=0)
        new_seg = np.r_[True, seg[1:] != seg[:-1]]
        start = np.flatnonzero(new_seg)
        seg_of = np.cumsum(new_seg) - 1
        before = np.vstack([np.zeros((1, C), np.int64), cum[start[1:] - 1]])
        left = cum - before[seg_of]
        end = np.r_[start[1:], key.size] - 1
        seg_tot = left[end]  # (segments, C)
        seg_node = seg[start] // m
        first = np.r_[True, seg_node[1:] != seg_node[:-1]]
        totals[seg_node[first]] = seg_tot[first]
        # a split after each run whose band continues
        cand = np.flatnonzero(seg[:-1] == seg[1:])
        if cand.size:
            L = left[cand].astype(np.float64)
            R = seg_tot[seg_of[cand]] - L
            nl, nr = L.sum(axis=1), R.sum(axis=1)
            sc = (L**2).sum(axis=1) / np.maximum(nl, 1) + (R**2).sum(axis=1) / np.maximum(nr, 1)
            ok = (nl >= min_leaf) & (nr >= min_leaf)
            cand, sc = cand[ok], sc[ok]
        if cand.size:
            cn = seg[cand] // m
            starts = np.flatnonzero(np.r_[True, cn[1:] != cn[:-1]])
            mx = np.maximum.reduceat(sc, starts)
            top = sc == np.repeat(mx, np.diff(np.r_[starts, cn.size]))
            nodes_u, first_top = np.unique(cn[top], return_index=True)  # the lowest (slot, bin) of the ties
            e = cand[np.flatnonzero(top)[first_top]]
            best[nodes_u] = sc[np.flatnonzero(top)[first_top]]
            slot[nodes_u] = seg[e] % m
            b_out[nodes_u] = key[e] % n_bins
        lo = hi
    return totals, best, slot, b_out


#: the parameters of one tree, declared once (CART declares the same)
TREE_PARAMETERS = (
    Param("max_depth", int, help="Levels below the root at most; 0 grows every tree until its leaves are pure or too small to split.", minimum=0, maximum=64, label="Depth at most (0 = no limit)"),
    Param("min_samples_leaf", int, help="No split may leave fewer training spectra than this on a side.", minimum=1, maximum=100000, label="Spectra per leaf at least"),
    Param("min_samples_split", int, help="A node with fewer training spectra stays a leaf.", minimum=2, maximum=100000, label="Spectra to split at least"),
    Param("n_bins", int, help="Candidate thresholds per band + 1: each band is cut into this many bins at quantiles of the training spectra.", minimum=2, maximum=256, label="Thresholds per band"),
    Param("test_fraction", float, help="Share of each class's marked pixels kept out of training, to measure the accuracy and the confusion matrix on.", minimum=0.0, maximum=0.9, label="Held out for testing"),
    Param("seed", int, help="Seed of the held-out split, the bootstrap samples and the bands drawn per split.", minimum=0, maximum=2**31 - 1, label="Random seed"),
)


class RandomForest(Estimator):
    """Random forest of CART trees (Gini), any number of classes; ``n_trees=1, max_features="all",
    bootstrap=False`` is one CART tree.

    Parameters
    ----------
    n_trees : int
    max_depth : int
        Levels below the root at most (0: grow until the leaves are pure or too small).
    max_features : {"sqrt", "log2", "all"} or int
        Bands drawn at random as candidates at every node.
    min_samples_split, min_samples_leaf : int
        A node with fewer spectra stays a leaf; no split leaves fewer on a side.
    bootstrap : bool
        Draw each tree's spectra with replacement (out-of-bag accuracy needs it).
    n_bins : int
        Candidate thresholds per band + 1 (2..256).
    test_fraction : float
        Share of each class's spectra held out for the accuracy and confusion matrix (0: none).
    seed : int

    Attributes
    ----------
    classes_ : host array of the class values (labels >= 0 of ``y``)
    feature_, threshold_, left_, value_ : all trees' nodes (host arrays; ``left_ < 0`` at a leaf, the
        right child is ``left_ + 1``; ``value_`` the class shares of a leaf's training spectra)
    roots_ : the first node of each tree
    feature_importances_ : (bands,) impurity decrease per band, summing to 1
    oob_score_ : out-of-bag accuracy (bootstrap forests), else None
    test_accuracy_, confusion_ : on the held-out spectra (rows true class, columns predicted)
    depth_, n_leaves_ : of the deepest tree / over all trees
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("n_trees", int, help="Trees grown together, each on its own bootstrap sample; the class is their majority (mean probability).", minimum=1, maximum=10000, label="Trees"),
        Param("max_features", str, help="Bands drawn at random as candidates at each split: sqrt or log2 of the band count, all, or a number.", label="Bands tried per split"),
        Param("bootstrap", bool, help="Train each tree on a sample drawn with replacement (gives the out-of-bag accuracy).", label="Bootstrap samples"),
    ) + TREE_PARAMETERS

    accepts_progress = True

    def __init__(self, n_trees: int = 100, max_depth: int = 0, max_features="sqrt", min_samples_split: int = 2,
                 min_samples_leaf: int = 1, bootstrap: bool = True, n_bins: int = 256, test_fraction: float = 0.3,
                 seed: int = 0):
        self.n_trees = n_trees
        self.max_depth = max_depth
        self.max_features = max_features
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.bootstrap = bootstrap
        self.n_bins = n_bins
        self.test_fraction = test_fraction
        self.seed = seed

    # ------------------------------------------------------------------ checks
    def _n_features(self, F: int) -> int:
        mf = self.max_features
        if isinstance(mf, str):
            s = mf.strip().lower()
            if s in ("all", "none", ""):
                return F
            if s == "sqrt":
                return max(1, int(math.sqrt(F)))
            if s == "log2":
                return max(1, int(math.log2(F)))
            try:
                mf = int(s)
            except ValueError:
                raise InputError("max_features (Bands tried per split) must be sqrt, log2, all or a number of "
                                 f"bands, got {mf!r}") from None
        if not 1 <= int(mf) <= F:
            raise InputError(f"max_features (Bands tried per split) must be between 1 and the {F} bands, got {mf}")
        return int(mf)

    def _split_classes(self, y: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the training and held-out spectra, stratified by class."""
        train, test = [], []
        for c in range(len(self.classes_)):
            idx = np.flatnonzero(y == c)
            idx = idx[rng.permutation(idx.size)]
            k = int(round(idx.size * float(self.test_fraction)))
            k = min(k, idx.size - 1)
            test.append(idx[:k])
            train.append(idx[k:])
        return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))

    def _what(self) -> str:
        """How messages name this model: one tree (CART) or a forest."""
        return "the decision tree" if int(self.n_trees) == 1 else "the forest"

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, progress=None):
        """Grow the trees on spectra ``X`` (n, bands) with class labels ``y`` (n,; < 0 = unlabelled)."""
        xp = get_namespace(X)
        if X.ndim != 2:
            raise InputError(f"expected spectra (n, bands), got shape {X.shape}")
        what = self._what()
        if y is None:
            raise InputError(f"{what} needs classes: mark ROIs of two or more classes, or pass --labels")
        y = np.asarray(to_host(y)).reshape(-1)
        if y.shape[0] != X.shape[0]:
            raise InputError(f"{y.shape[0]} labels for {X.shape[0]} spectra")
        keep = np.flatnonzero(y >= 0)
        classes, yi, counts = np.unique(y[keep], return_inverse=True, return_counts=True)
        if classes.size < 2:
            held = f"one (class {classes[0]})" if classes.size else "none"
            raise InputError(f"{what} learns to tell classes apart and needs pixels of two or more; the labels "
                             f"hold {held}: mark pixels of another class too (the background, say)")
        if classes.size > MAX_CLASSES:
            raise InputError(f"{classes.size} classes: {what} handles {MAX_CLASSES} at most")
        need = 2 if float(self.test_fraction) > 0 else 1
        few = classes[counts < need]
        if few.size:
            raise InputError(f"class {few[0]} has {counts[counts < need][0]} pixel(s): mark at least {need} per class"
                             + (" (one is held out for testing)" if need == 2 else ""))
        self.classes_ = classes
        rng = np.random.default_rng(self.seed)
        train, test = self._split_classes(yi, rng)
        Xk = X[xp.asarray(keep)] if keep.size != X.shape[0] else X
        from hyperapp.models.base import check_not_identical

        check_not_identical(Xk, "classify")
        Xtr = Xk[xp.asarray(train)]
        ytr = yi[train].astype(np.int32)
        self.n_train_, self.n_test_ = int(train.size), int(test.size)
        self._grow(Xtr, ytr, rng, progress)
        if test.size:
            pred = to_host(self.predict_index(Xk[xp.asarray(test)]))
            C = classes.size
            self.confusion_ = np.bincount(yi[test] * C + pred, minlength=C * C).reshape(C, C)
            self.test_accuracy_ = float(np.trace(self.confusion_) / test.size)
        else:
            self.confusion_, self.test_accuracy_ = None, None
        return self

    def _grow(self, X, y, rng, progress) -> None:
        xp = get_namespace(X)
        gpu = xp is not np
        n, F = X.shape
        C = len(self.classes_)
        T = int(self.n_trees)
        B = int(self.n_bins)
        m = self._n_features(F)
        max_depth = int(self.max_depth) if int(self.max_depth) > 0 else 10**6
        min_leaf = max(1, int(self.min_samples_leaf))
        min_split = max(2, int(self.min_samples_split))
        edges = bin_edges(X, B, seed=self.seed)
        Xb = quantise(X, edges)
        edges_h = to_host(edges)
        yd = xp.asarray(y)
        dev_rng = xp.random.default_rng(self.seed)
        if self.bootstrap:
            draw = dev_rng.integers(0, n, size=(T, n)) + xp.arange(T)[:, None] * n
            w = xp.bincount(draw.reshape(-1), minlength=T * n).reshape(T, n).astype(xp.int32)
            del draw
        else:
            w = xp.ones((T, n), xp.int32)
        self._inbag = w  # for the out-of-bag estimate; dropped after fit
        node_of = xp.where(w > 0, xp.arange(T, dtype=xp.int32)[:, None], -1).astype(xp.int32)
        # the level's nodes: tree of each, global node id = offset + local index
        tree_of = np.arange(T)
        offset = 0
        feature, threshold, left, value, imp = [], [], [], [], np.zeros((T, F))
        depth = 0
        root_n = None
        while tree_of.size:
            nn = tree_of.size
            if m == F:
                feats = xp.broadcast_to(xp.arange(F, dtype=xp.int32), (nn, F))
            else:  # m random bands per node: the first m of a random permutation
                feats = xp.argsort(dev_rng.random((nn, F), dtype=xp.float32), axis=1)[:, :m]
            feats = xp.ascontiguousarray(feats.astype(xp.int32))
            if gpu:
                totals, score, slot, b = self._level_gpu(Xb, yd, w, node_of, feats, nn, B, C, min_leaf)
            else:
                totals, score, slot, b = _split_numpy(Xb, y, w, node_of, feats, nn, B, C, min_leaf)
            feats_h = to_host(feats)
            n_node = totals.sum(axis=1)
            if root_n is None:
                root_n = n_node.astype(np.float64)
            sq = (totals.astype(np.float64) ** 2).sum(axis=1) / np.maximum(n_node, 1)
            gain = score - sq
            split = ((slot >= 0) & (depth < max_depth) & (n_node >= min_split)
                     & ((totals > 0).sum(axis=1) > 1) & (gain > 1e-12 * np.maximum(n_node, 1)))
            f = np.where(split, feats_h[np.arange(nn), np.maximum(slot, 0)], -1).astype(np.int32)
            bins = np.where(split, b, -1).astype(np.int32)
            n_split = int(split.sum())
            child = np.full(nn, -1, np.int32)
            child[split] = 2 * np.arange(n_split, dtype=np.int32)
            glob_child = np.where(split, offset + nn + child, -1)
            feature.append(f)
            threshold.append(np.where(split, edges_h[np.maximum(f, 0), np.maximum(bins, 0)], np.nan).astype(np.float32))
            left.append(glob_child.astype(np.int32))
            value.append((totals / np.maximum(n_node, 1)[:, None]).astype(np.float32))
            np.add.at(imp, (tree_of[split], f[split]), gain[split])
            if n_split:
                if gpu:
                    self._route_gpu(Xb, node_of, f, bins, child)
                else:
                    fd = f[np.maximum(node_of, 0)]
                    go = (node_of >= 0) & (fd >= 0)
                    t_i, s_i = np.nonzero(go)
                    nd = node_of[t_i, s_i]
                    node_of[~go] = -1
                    node_of[t_i, s_i] = child[nd] + (Xb[s_i, f[nd]] > bins[nd])
            offset += nn
            tree_of = np.repeat(tree_of[split], 2)
            depth += 1
            if progress is not None:
                progress(min(0.95, depth / max(min(max_depth, 40), 1)), f"level {depth}: {tree_of.size} nodes")
        self.feature_ = np.concatenate(feature)
        self.threshold_ = np.concatenate(threshold)
        self.left_ = np.concatenate(left)
        self.value_ = np.ascontiguousarray(np.concatenate(value))
        self.roots_ = np.arange(T, dtype=np.int32)
        self.depth_ = depth - 1
        self.n_leaves_ = int((self.left_ < 0).sum())
        tot = imp.sum(axis=1, keepdims=True)
        per_tree = np.divide(imp, tot, out=np.zeros_like(imp), where=tot > 0)
        fi = per_tree.mean(axis=0)
        self.feature_importances_ = fi / fi.sum() if fi.sum() > 0 else fi
        self._device = None
        self.oob_score_ = None
        if self.bootstrap:
            proba, votes = self._predict(X, inbag=w)
            ok = to_host(votes) > 0
            if ok.any():
                pred = to_host(proba.argmax(axis=1))
                self.oob_score_ = float((pred[ok] == y[ok]).mean())
        del self._inbag

    # ------------------------------------------------------------------ GPU steps of a level
    def _level_gpu(self, Xb, y, w, node_of, feats, nn, B, C, min_leaf):
        import cupy as cp

        from hyperapp.kernels import get_kernel

        n, F = Xb.shape
        m = feats.shape[1]
        T = w.shape[0]
        total = T * n
        defs = {"NBINS": B, "MAXC": _maxc(C)}
        hist_k = get_kernel("forest", "forest_hist", defs)
        split_k = get_kernel("forest", "forest_split", defs)
        per_node = B * C * m * 4
        chunk = max(1, min(nn, HIST_BYTES // per_node))
        totals = cp.empty((nn, C), cp.int32)
        score = cp.empty(nn, cp.float64)
        slot = cp.empty(nn, cp.int32)
        bins = cp.empty(nn, cp.int32)
        hist = cp.empty(chunk * per_node // 4, cp.int32)
        bd = 32 if m <= 32 else 64 if m <= 64 else 128 if m <= 128 else 256
        for lo in range(0, nn, chunk):
            hi = min(nn, lo + chunk)
            h = hist[: (hi - lo) * per_node // 4]
            h.fill(0)
            hist_k(((total + 255) // 256,), (256,),
                   (Xb, y, w, node_of, feats, h, np.int64(total), np.int32(n), np.int32(F), np.int32(m),
                    np.int32(C), np.int32(lo), np.int32(hi)))
            split_k((hi - lo,), (bd,), (h, np.int32(m), np.int32(C), np.int32(min_leaf), score[lo:hi],
                                       slot[lo:hi], bins[lo:hi], totals[lo:hi]))
        return (to_host(totals).astype(np.int64), to_host(score), to_host(slot), to_host(bins))

    @staticmethod
    def _route_gpu(Xb, node_of, f, bins, child) -> None:
        import cupy as cp

        from hyperapp.kernels import get_kernel

        n, F = Xb.shape
        total = node_of.size
        get_kernel("forest", "forest_route", {"NBINS": 256})(
            ((total + 255) // 256,), (256,),
            (Xb, node_of, cp.asarray(f), cp.asarray(bins), cp.asarray(child), np.int64(total), np.int32(n),
             np.int32(F)))

    # ------------------------------------------------------------------ use
    def _trees_on(self, xp):
        if xp is np:
            return self.feature_, self.threshold_, self.left_, self.value_, self.roots_
        if self._device is None:
            self._device = tuple(xp.asarray(a) for a in (self.feature_, self.threshold_, self.left_,
                                                         self.value_, self.roots_))
        return self._device

    def _predict(self, X, inbag=None):
        """(class shares averaged over the trees (n, C), trees that voted (n,))."""
        xp = get_namespace(X)
        n = X.shape[0]
        C = len(self.classes_)
        T = len(self.roots_)
        feature, thr, left, value, roots = self._trees_on(xp)
        if xp is np:
            proba = np.zeros((n, C), np.float32)
            votes = np.zeros(n, np.int32)
            rows = np.arange(n)
            for t in range(T):  # trees, each walked for all spectra at once, a level per step
                node = np.full(n, roots[t], np.int64)
                use = rows if inbag is None else np.flatnonzero(inbag[t] == 0)
                node = node[use]
                while True:
                    lf = left[node]
                    go = lf >= 0
                    if not go.any():
                        break
                    g = np.flatnonzero(go)
                    nd = node[g]
                    node[g] = left[nd] + (X[use[g], feature[nd]] > thr[nd])
                proba[use] += value[node]
                votes[use] += 1
            proba /= np.maximum(votes, 1)[:, None]
            return proba, votes
        from hyperapp.kernels import get_kernel

        Xc = xp.ascontiguousarray(X, dtype=xp.float32)
        proba = xp.empty((n, C), xp.float32)
        votes = xp.empty(n, xp.int32)
        fn = get_kernel("forest", "forest_predict", {"NBINS": 256, "MAXC": _maxc(C)})
        fn(((n + 127) // 128,), (128,),
           (Xc, np.int64(n), np.int32(X.shape[1]), roots, np.int32(T), feature, thr, left, value, np.int32(C),
            inbag if inbag is not None else np.uint64(0), proba, votes))
        return proba, votes

    def predict_proba(self, X):
        """Class shares (n, classes) averaged over the trees."""
        self._check_fitted()
        if X.shape[1] != self.feature_importances_.shape[0]:
            raise InputError(f"the forest was trained on {self.feature_importances_.shape[0]} bands, "
                             f"these spectra have {X.shape[1]}")
        return self._predict(X)[0]

    def predict_index(self, X):
        """Index into :attr:`classes_` of each spectrum's most voted class."""
        return self.predict_proba(X).argmax(axis=1)

    def predict(self, X):
        """Class value of every spectrum (the label map's values)."""
        xp = get_namespace(X)
        return xp.asarray(self.classes_)[self.predict_index(X)]

    def score(self, X, y) -> float:
        """Accuracy on spectra ``X`` with class values ``y``."""
        return float((to_host(self.predict(X)) == np.asarray(to_host(y))).mean())

    # ------------------------------------------------------------------ report
    def summary(self) -> dict:
        self._check_fitted()
        return {
            "classes": [int(c) for c in self.classes_],
            "n_train": self.n_train_,
            "n_test": self.n_test_,
            "test_accuracy": self.test_accuracy_,
            "oob_accuracy": self.oob_score_,
            "confusion": None if self.confusion_ is None else self.confusion_.tolist(),
            # per class, the held-out share predicted right, and their mean (balanced accuracy): the overall
            # accuracy of a scene of 100 background pixels and 2 targets is 98 % with every target missed
            "class_recall": self._class_recall(),
            "balanced_accuracy": self._balanced_accuracy(),
            "n_trees": len(self.roots_),
            "depth": int(self.depth_),
            "n_leaves": self.n_leaves_,
            # the ten most important bands, of those that split at all (a stump's forest has few)
            "top_bands": [int(b) for b in np.argsort(-self.feature_importances_)[:10]
                          if self.feature_importances_[b] > 0],
        }

    def _class_recall(self) -> list[float | None] | None:
        """Each class's held-out pixels predicted as that class (None for a class with none held out)."""
        if self.confusion_ is None:
            return None
        C = np.asarray(self.confusion_)
        return [float(C[i, i] / C[i].sum()) if C[i].sum() else None for i in range(len(C))]

    def _balanced_accuracy(self) -> float | None:
        r = [v for v in self._class_recall() or [] if v is not None]
        return float(np.mean(r)) if r else None

    def tables(self) -> dict:
        self._check_fitted()
        imp = [[b, float(v)] for b, v in enumerate(self.feature_importances_)]
        out = {"band_importance": (["band", "importance"], imp)}
        if self.confusion_ is not None:
            C = self.confusion_
            out["confusion"] = (["true \\ predicted"] + [int(c) for c in self.classes_],
                                [[int(self.classes_[i])] + [int(v) for v in C[i]] for i in range(len(C))])
        return out

    def arrays(self) -> dict:
        self._check_fitted()
        return {"trees_feature": self.feature_, "trees_threshold": self.threshold_, "trees_left": self.left_,
                "trees_value": self.value_}


def cart(**kw) -> RandomForest:
    """One CART tree: every band a candidate at every node, no bootstrap."""
    return RandomForest(**{"n_trees": 1, "max_features": "all", "bootstrap": False, **kw})


__all__ = ["RandomForest", "bin_edges", "quantise", "cart"]
