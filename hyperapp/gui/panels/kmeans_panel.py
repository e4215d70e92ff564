"""The k-means panel: choose k from the inertia, silhouette and Davies-Bouldin curves, see the cluster
map on the image and each cluster's mean spectrum."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from hyperapp.core.backend import to_host
from hyperapp.gui.panels import AnalysisPanel, integer_ticks, plot_spectra, plot_widget, scaled, side_legend


class KMeansPanel(AnalysisPanel):
    methods = ("kmeans",)
    title = "k-means"

    def cost_words(self, n: int, v: dict) -> str:
        """Lloyd's run in words: every iteration measures each spectrum against each centre, for every k
        tried and every restart (k = 10,000 on 20,000 spectra ran 269 s on the CPU with nothing said)."""
        from hyperapp.models.kmeans import parse_k

        ks = parse_k(v["k"])
        tried = f"{ks[0]} clusters" if len(ks) == 1 else f"k = {ks[0]}..{ks[-1]} ({len(ks)} fits)"
        few = f"; k = {ks[-1]} leaves about {n / ks[-1]:.1f} spectra a cluster" if ks[-1] * 10 > n else ""
        return (f"{n:,} spectra, {tried}, {v['n_init']} restart(s), up to {v['max_iter']} iterations on "
                f"{self.host.session.cube.bands} bands{few}")

    def build_plots(self, tabs) -> None:
        self.inertia_plot = plot_widget("number of clusters k", "inertia")
        self.inertia_plot.setTitle("inertia: sum of squared distances to the centres (lower is tighter)")
        self.inertia_curve = self.inertia_plot.plot(pen=pg.mkPen("c", width=2), symbol="o", symbolSize=6)
        self.quality_plot = plot_widget("number of clusters k", "score")
        side_legend(self.quality_plot)
        self.sil_curve = self.quality_plot.plot(pen=pg.mkPen("y", width=2), symbol="o", symbolSize=6,
                                                name="silhouette (higher is better)")
        self.db_curve = self.quality_plot.plot(pen=pg.mkPen("m", width=2), symbol="t", symbolSize=6,
                                               name="Davies-Bouldin (lower is better)")
        self.chosen_lines = [pg.InfiniteLine(angle=90, pen=pg.mkPen("w", style=pg.QtCore.Qt.PenStyle.DashLine))
                             for _ in range(2)]
        self.inertia_plot.addItem(self.chosen_lines[0])
        self.quality_plot.addItem(self.chosen_lines[1])
        self.spectra_plot = plot_widget("wavelength", "mean value", "cluster mean spectra")
        side_legend(self.spectra_plot)
        tabs.addTab(self.inertia_plot, "Inertia (elbow)")
        tabs.addTab(self.quality_plot, "Silhouette / Davies-Bouldin")
        tabs.addTab(self.spectra_plot, "Cluster spectra")
        self.spectrum_items: list = []

    def show_result(self, result) -> None:
        m = result.model
        ks = np.asarray(m.k_values_, float)
        from hyperapp.gui.panels import value_unit

        # squared distances on the Spectrum dock's scale (reflectance where the header says so)
        scale, unit = value_unit(self.host.session.cube)
        inertia = np.asarray(m.inertia_, float) / scale**2
        self.inertia_curve.setData(ks, scaled(self.inertia_plot, inertia, "inertia"))
        self.inertia_plot.setTitle(f"inertia: sum of squared distances to the centres ({unit}, squared; lower "
                                   f"is tighter); dashed: chosen k = {m.chosen_k_}")
        ok = np.isfinite(m.silhouette_)
        self.sil_curve.setData(ks[ok], m.silhouette_[ok])
        ok = np.isfinite(m.davies_bouldin_)
        self.db_curve.setData(ks[ok], m.davies_bouldin_[ok])
        for line in self.chosen_lines:
            line.setValue(m.chosen_k_)
        for plot in (self.inertia_plot, self.quality_plot):
            integer_ticks(plot, ks)
        by = getattr(m, "criterion_used_", m.criterion).replace("_", "-")
        from hyperapp.analyse.run import range_edge_words

        edge = range_edge_words(m.k_values_, m.chosen_k_, getattr(m, "criterion_used_", m.criterion))
        self.quality_plot.setTitle(f"chosen k = {m.chosen_k_} (by {by})" + (f"<br>{edge}" if edge else ""))
        C = to_host(m.centres_for())
        counts = np.bincount(result.labels[result.labels >= 0], minlength=C.shape[0]) if result.labels is not None \
            else np.zeros(C.shape[0], int)
        self.spectrum_items = plot_spectra(self.spectra_plot, self.host.session.cube, C,
                                           [f"cluster {i} ({counts[i]} px)" for i in range(C.shape[0])],
                                           self.spectrum_items)
        self.tabs.setCurrentWidget(self.quality_plot if len(ks) > 1 else self.spectra_plot)
