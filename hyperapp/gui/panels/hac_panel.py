"""The hierarchical clustering panel: the dendrogram, cut by dragging its height line or by a cluster
count, the cluster map on the image and each cluster's mean spectrum.

The spectra come from an ROI, a random sample or the detected objects (the panel's "Spectra" list).
A new cut is the model's :meth:`~hyperapp.models.hac.HierarchicalClustering.cut` and the image is
relabelled by :func:`hyperapp.analyse.run.label_image` in a worker thread: the same functions the CLI runs.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from hyperapp.core.backend import to_host
from hyperapp.gui.panels import (
    AnalysisPanel,
    plot_spectra,
    plot_widget,
    scaled,
    side_legend,
    tick_power,
    value_unit,
)

#: merges the dendrogram draws at most (the last ones; smaller clusters are folded into their leaves)
DENDROGRAM_LEAVES = 48


class HACPanel(AnalysisPanel):
    methods = ("hac",)
    title = "Hierarchical clustering"
    #: the tree over n spectra costs n^2 time and memory: a few thousand spectra, not the whole image
    sample_default = 3000

    def build_controls(self, layout) -> None:
        self.form.changed.connect(self._height_label)

    def cost_words(self, n: int, v: dict) -> str:
        """The tree's size in words: its pairwise distances grow with the square of the spectra."""
        mb = n * (n - 1) / 2 * 8 / 2**20
        return f"{n:,} spectra, {n * (n - 1) // 2:,} pairwise distances ({mb:,.0f} MB)"

    def build_plots(self, tabs) -> None:
        box = QWidget()
        lay = QVBoxLayout(box)
        row = QHBoxLayout()
        row.addWidget(QLabel("Clusters"))
        self.n_clusters = QSpinBox()
        self.n_clusters.setRange(1, 1)
        self.n_clusters.setToolTip("Cut the tree into this many clusters (or drag the dashed line)")
        row.addWidget(self.n_clusters)
        self.cut_label = QLabel("")
        row.addWidget(self.cut_label, 1)
        lay.addLayout(row)
        self.dendro = plot_widget("clusters (leaf: spectra it holds)", "merge distance")
        self.cut_line = pg.InfiniteLine(angle=0, movable=True, pen=pg.mkPen((255, 200, 0), width=2, style=pg.QtCore.Qt.PenStyle.DashLine))
        self.cut_line.setToolTip("Cut height: drag to cut the tree elsewhere")
        self.dendro.addItem(self.cut_line)
        self.cut_line.hide()
        lay.addWidget(self.dendro, 1)
        self.means_plot = plot_widget("wavelength", "mean value", "cluster mean spectra")
        side_legend(self.means_plot)
        tabs.addTab(box, "Dendrogram")
        tabs.addTab(self.means_plot, "Cluster spectra")
        self.lines: list = []
        self.mean_items: list = []
        self._height_scale = 1.0  # the tree's heights divided by this are in the spectra's units
        self._tick_scale = 1.0  # and those divided by this are the dendrogram's y values
        self.n_clusters.valueChanged.connect(self._count_changed)
        self.cut_line.sigPositionChangeFinished.connect(self._line_moved)

    def after_fit(self, result, image):
        """The fitted spectra on the host (a new cut recomputes the cluster means from them)."""
        from hyperapp.analyse.run import gather_pixels
        from hyperapp.core.backend import backend_of

        s = self.host.session
        backend = backend_of(image)
        return to_host(gather_pixels(s.cube, result.indices, backend, image))

    def show_result(self, result) -> None:
        from scipy.cluster.hierarchy import dendrogram

        m = result.model
        Z = m.linkage_
        n = Z.shape[0] + 1
        p = min(DENDROGRAM_LEAVES, n)
        # link_color_func names each drawn merge by its node id, so its branch can take its cluster's colour
        d = dendrogram(Z, no_plot=True, truncate_mode="lastp" if n > p else None, p=p, show_leaf_counts=True,
                       link_color_func=str)
        self._height_scale, label = self.height_units(m)
        heights = Z[:, 2] / self._height_scale
        self._tick_scale = 10.0 ** tick_power(heights)  # short tick labels, the power in the axis label
        scaled(self.dendro, heights, label)
        # one path of (x, y) per merge, and the merge it draws
        self._paths = (np.asarray(d["icoord"], float).reshape(-1, 4),
                       np.asarray(d["dcoord"], float).reshape(-1, 4) / (self._height_scale * self._tick_scale),
                       np.asarray([int(c) for c in d["color_list"]]) - n)
        self._draw_branches(m)
        # a leaf reads "(spectra it holds)"; SciPy names a leaf of one spectrum by its index instead
        ticks = [(5 + 10 * i, lab if lab.startswith("(") else "(1)") for i, lab in enumerate(d["ivl"])]
        self.dendro.getAxis("bottom").setTicks([ticks if len(ticks) <= 24 else ticks[::max(1, len(ticks) // 24)]])
        link = {"ward": "Ward"}.get(m.linkage, m.linkage)
        metric = {"sam": "spectral angle"}.get(m.metric, m.metric)
        self.dendro.setTitle(f"{link} linkage of {metric} distances, {n} spectra"
                             + (f" (last {p - 1} merges)" if n > p else ""))
        self.cut_line.show()
        self.n_clusters.blockSignals(True)
        self.n_clusters.setRange(1, n)
        self.n_clusters.setValue(m.n_clusters_)
        self.n_clusters.blockSignals(False)
        self._place_line(m)
        self._show_means(m)
        self.tabs.setCurrentIndex(0)

    def _draw_branches(self, m) -> None:
        """The dendrogram's merges, each below the cut in the colour of its cluster on the map (the
        merges above it grey), a curve a colour with breaks between paths."""
        from hyperapp.io.writers import class_colour

        for it in self.lines:
            self.dendro.removeItem(it)
        xs, ys, merge = self._paths
        Z = m.linkage_
        n = Z.shape[0] + 1
        # a spectrum under each merge, merges in order (a merge's children come before it)
        leaf = np.empty(n - 1, np.int64)
        for i, a in enumerate(Z[:, 0].astype(np.int64)):
            leaf[i] = a if a < n else leaf[a - n]
        below = merge < n - m.n_clusters_  # the first n - k merges make the k clusters
        cluster = np.where(below, np.asarray(m.labels_)[leaf[merge]], -1)
        self.lines = []
        for c in np.unique(cluster):
            sel = cluster == c
            x = np.concatenate([xs[sel], np.full((sel.sum(), 1), np.nan)], axis=1).reshape(-1)
            y = np.concatenate([ys[sel], np.full((sel.sum(), 1), np.nan)], axis=1).reshape(-1)
            colour = (200, 200, 200) if c < 0 else class_colour(int(c))
            item = pg.PlotDataItem(x, y, pen=pg.mkPen(colour, width=1.5), connect="finite")
            self.dendro.addItem(item)
            self.lines.append(item)

    def height_units(self, m) -> tuple[float, str]:
        """(divisor, axis label) of the tree's merge heights: a Euclidean tree's are distances between
        spectra, shown on the Spectrum dock's scale (reflectance where the header says so); a spectral
        angle tree's are angles, in radians. Two short lines, so a low plot does not cut the label."""
        if m.metric == "sam":
            return 1.0, "merge distance<br>(spectral angle, rad)"
        scale, unit = value_unit(self.host.session.cube)
        if getattr(m, "linkage", "") == "ward":  # Ward's height grows with the clusters' sizes
            return scale, f"Ward merge cost<br>({unit} x size)"
        return scale, f"merge distance<br>({unit})"

    def height_scale(self) -> tuple[float, str]:
        """(divisor, unit) of the Cut height option as the form takes it: the dendrogram's scale
        (reflectance where the header says so; angles as they are)."""
        if self.host.session is None or self.form.values().get("metric") == "sam":
            return 1.0, "rad" if self.host.session is not None else ""
        return value_unit(self.host.session.cube)

    def _height_label(self) -> None:
        """Name the Cut height's scale on its row: the one the dendrogram's axis shows."""
        w = self.form.editors.get("height")
        label = self.form.form.labelForField(w) if w is not None else None
        if label is not None:
            unit = self.height_scale()[1]
            label.setText(f"Cut height ({unit}; 0 = by count)" if unit else "Cut height (0 = by count)")

    def params(self) -> dict:
        """The form's options, the Cut height back in the values as stored (the service layer's)."""
        v = super().params()
        if v.get("height"):
            v["height"] = float(v["height"]) * self.height_scale()[0]
        return v

    def _place_line(self, m) -> None:
        h = m.linkage_[:, 2]
        k = m.n_clusters_
        n = h.size + 1
        lo = h[n - k - 1] if n - k - 1 >= 0 else 0.0  # the last merge below the cut
        hi = h[n - k] if n - k < h.size else lo * 1.05 + 1e-12
        f = self._height_scale
        self.cut_line.blockSignals(True)
        self.cut_line.setValue(0.5 * (lo + hi) / (f * self._tick_scale))
        self.cut_line.blockSignals(False)
        # on the dendrogram's scale, which the form's Cut height takes too, named as its axis names it
        what = ("merge costs" if getattr(m, "linkage", "") == "ward" else "merge distances",
                " rad" if m.metric == "sam" else "")
        self.cut_label.setText(f"cut between {what[0]} {lo / f:.4g} and {hi / f:.4g}{what[1]}")

    def _show_means(self, m) -> None:
        k = min(m.n_clusters_, 20)
        self.mean_items = plot_spectra(self.means_plot, self.host.session.cube, m.means_[:k],
                                       [f"cluster {j} ({int(m.counts_[j])} spectra)" for j in range(k)],
                                       self.mean_items)

    # ------------------------------------------------------------------ cutting
    def _count_changed(self, k: int) -> None:
        self.recut(n_clusters=k)

    def _line_moved(self) -> None:
        self.recut(height=float(self.cut_line.value()) * self._height_scale * self._tick_scale)

    def recut(self, n_clusters: int | None = None, height: float | None = None):
        """Cut the fitted tree again and relabel the image in a worker; returns the worker."""
        res = self.result
        if res is None or res.extra is None or self.relabel_worker is not None:
            return None
        m = res.model
        m.cut(n_clusters, height, X=res.extra)
        self.n_clusters.blockSignals(True)
        self.n_clusters.setValue(m.n_clusters_)
        self.n_clusters.blockSignals(False)
        # the form follows the cut, so Run again keeps it (a cut by height is the same partition as one
        # into the count it gave)
        self.form.set_values({"n_clusters": m.n_clusters_, "height": 0.0})
        self._shown_options = self.options()  # the plots are of this cut: not stale
        self._mark_stale()
        self._draw_branches(m)
        self._place_line(m)
        self._show_means(m)
        return self.relabel(m, f"cutting into {m.n_clusters_} clusters…", f"{m.n_clusters_} clusters")

    def reset(self) -> None:
        super().reset()
        self._height_label()
