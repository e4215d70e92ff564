"""The Gaussian-mixture panel: BIC over k, the log-likelihood per EM iteration, each component's mean
spectrum and weight, and the posterior of a chosen component as an image."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from hyperapp.gui.panels import (
    AnalysisPanel,
    fit_image,
    image_plot,
    integer_ticks,
    plot_spectra,
    plot_widget,
    scaled,
    side_legend,
    value_axis,
    wavelength_axis,
)


class GMMPanel(AnalysisPanel):
    methods = ("gmm",)
    title = "Gaussian mixture"
    #: the GPU defaults (20,000 spectra, 3 starts) took 106 s on the CPU on the 128 x 128 x 64 sample
    #: scene; a quarter of the spectra and one start take seconds
    cpu_defaults = {"gmm": {"n_init": 1}}
    cpu_sample = 5000

    def cost_words(self, n: int, v: dict) -> str:
        """EM's run in words: every iteration weighs each spectrum against each component's covariance
        (bands squared for full matrices), for every k tried and every start."""
        from hyperapp.models.kmeans import parse_k

        ks = parse_k(v["k"])
        tried = f"{ks[0]} components" if len(ks) == 1 else f"k = {ks[0]}..{ks[-1]} ({len(ks)} fits)"
        return (f"{n:,} spectra, {tried}, {v['n_init']} start(s), up to {v['max_iter']} EM iterations on "
                f"{self.host.session.cube.bands} bands")

    def build_plots(self, tabs) -> None:
        self.bic_plot = plot_widget("number of components k", "BIC")
        self.bic_curve = self.bic_plot.plot(pen=pg.mkPen("c", width=2), symbol="o", symbolSize=6)
        # the chosen k, dashed, as the k-means panel marks its own
        self.chosen_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("w", style=pg.QtCore.Qt.PenStyle.DashLine))
        self.bic_plot.addItem(self.chosen_line)
        self.chosen_line.hide()
        self.ll_plot = plot_widget("EM iteration", "log-likelihood",
                                   "average log-likelihood per spectrum at each EM iteration (higher fits better)")
        self.ll_curve = self.ll_plot.plot(pen=pg.mkPen("y", width=2), symbol="o", symbolSize=4)
        self.mean_plot = plot_widget("wavelength", "mean value", "component means")
        side_legend(self.mean_plot)
        box = QWidget()
        lay = QHBoxLayout(box)
        self.component = QSpinBox()
        self.component.setToolTip("The component whose posterior probability the image shows")
        self.post_plot, self.post_img, self.post_bar = image_plot("posterior", min_width=220, bar_label="probability")
        self.post_bar.setLevels((0.0, 1.0))
        # the scene's map at its own aspect, the dock's whole height (a low dock leaves it little); beside it,
        # in the width left, the component picker over the component's mean spectrum
        lay.addWidget(self.post_plot.frame, 1)
        side = QVBoxLayout()
        row = QHBoxLayout()
        row.addWidget(QLabel("Component"))
        row.addWidget(self.component)
        row.addStretch(1)
        side.addLayout(row)
        self.post_spectrum = plot_widget("wavelength", "mean value", "the component's mean spectrum")
        self.post_curve = self.post_spectrum.plot(pen=pg.mkPen("w", width=2))
        side.addWidget(self.post_spectrum, 1)
        lay.addLayout(side, 1)
        tabs.addTab(self.bic_plot, "BIC")
        tabs.addTab(self.ll_plot, "Log-likelihood")
        tabs.addTab(self.mean_plot, "Component spectra")
        tabs.addTab(box, "Posterior")
        self.mean_items: list = []
        self._post = None
        self._m = None
        self.component.valueChanged.connect(self._posterior)

    def after_fit(self, result, image):
        """Every component's posterior over the whole image: :func:`hyperapp.analyse.run.posterior_image`, the
        function ``hyperapp --headless analyse`` writes ``posterior.hdr`` with (float16 here, for the tab)."""
        from hyperapp.analyse.run import posterior_image
        from hyperapp.core.backend import backend_of

        backend = backend_of(image)
        return posterior_image(result.model, self.host.session.cube, backend, image).astype(np.float16)

    def show_result(self, result) -> None:
        m = result.model
        self._post, self._m = result.extra, m
        ks = np.asarray(m.k_values_, float)
        bic = np.asarray(m.bic_, float)
        bic = scaled(self.bic_plot, bic, "BIC")
        self.bic_curve.setData(ks, bic)
        integer_ticks(self.bic_plot, ks)
        self.chosen_line.setValue(m.chosen_k_)
        self.chosen_line.setVisible(len(ks) > 1)
        if len(ks) == 1:  # one k: one point, and a y range around it rather than a zero-height one
            pad = max(abs(bic[0]) * 0.01, 1e-9)
            self.bic_plot.setYRange(bic[0] - pad, bic[0] + pad, padding=0)
            self.bic_plot.setTitle(f"k = {m.chosen_k_} ({m.covariance} covariances): BIC {m.bic_[0]:.6g}; "
                                   "give a range (2..10) to compare k")
        else:
            self.bic_plot.enableAutoRange()
            from hyperapp.analyse.run import range_edge_words

            edge = range_edge_words(m.k_values_, m.chosen_k_, "bic")
            self.bic_plot.setTitle(f"chosen k = {m.chosen_k_} (dashed): the lowest BIC ({m.covariance} covariances)"
                                   + (f"<br>{edge}" if edge else ""))
        its = np.arange(1, len(m.ll_curve_) + 1, dtype=float)
        self.ll_curve.setData(its, m.ll_curve_)
        integer_ticks(self.ll_plot, its)
        self.mean_items = plot_spectra(self.mean_plot, self.host.session.cube, m.means_,
                                       [f"component {j} (weight {m.weights_[j]:.3f})" for j in range(m.chosen_k_)],
                                       self.mean_items)
        self.component.setRange(0, m.chosen_k_ - 1)
        self._posterior()
        self.tabs.setCurrentWidget(self.bic_plot if len(m.k_values_) > 1 else self.mean_plot)

    def _posterior(self) -> None:
        post = getattr(self, "_post", None)
        if post is None:
            return
        j = min(self.component.value(), post.shape[2] - 1)
        self.post_img.setImage(post[:, :, j].astype(np.float32), autoLevels=False, levels=(0.0, 1.0))
        self.post_plot.setTitle(f"component {j}", size="9pt")  # short: the plot is as narrow as the map
        fit_image(self.post_plot, post)
        if self._m is not None:
            from hyperapp.io.writers import class_colour

            cube = self.host.session.cube
            x, xlabel = wavelength_axis(cube)
            scale, ylabel = value_axis(cube)
            self.post_curve.setData(x, np.asarray(self._m.means_[j], float) / scale)
            self.post_curve.setPen(pg.mkPen(class_colour(j), width=2))
            self.post_spectrum.setLabel("bottom", xlabel)
            self.post_spectrum.setLabel("left", ylabel)
            self.post_spectrum.setTitle(f"mean spectrum of component {j} (weight {self._m.weights_[j]:.3f})")
