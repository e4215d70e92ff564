"""The SOM panel: U-matrix, hit map, a component plane per band, the error curves, and a neuron's
spectrum on click; the image is coloured by best-matching neuron or by codebook cluster.

Every value drawn from the codebook (the planes, the neuron spectra, the U-matrix's and the quantisation
error's distances) is on the Spectrum dock's scale (:func:`~hyperapp.gui.panels.value_axis`: reflectance
where the header gives a reflectance scale factor), and bands are named by their wavelength."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from hyperapp.core.backend import to_host
from hyperapp.gui.panels import (
    AnalysisPanel,
    band_name,
    band_wavelength,
    fit_image,
    image_plot,
    integer_ticks,
    plot_widget,
    set_bar_label,
    side_legend,
    value_axis,
    value_unit,
    wavelength_axis,
)

#: the axes of a map of the neurons
NEURON_AXES = ("neuron column", "neuron row")


class SOMPanel(AnalysisPanel):
    methods = ("som",)
    title = "SOM"

    def cost_words(self, n: int, v: dict) -> str:
        return (f"{n:,} spectra, {v['rows']} x {v['cols']} neurons, {v['epochs']} epoch(s) of "
                f"{v['training']} training")

    def build_plots(self, tabs) -> None:
        # the three maps of the neurons side by side in one tab, each a square grid filling its plot: the
        # wide, low plots dock gives each its own third, and a person reads them together
        self.maps = QWidget()
        lay = QVBoxLayout(self.maps)
        lay.setContentsMargins(2, 2, 2, 2)
        row = QHBoxLayout()
        row.addWidget(QLabel("Component plane of band"))
        self.band = QSpinBox()
        self.band.setToolTip("The band whose codebook values the right-hand map shows")
        row.addWidget(self.band)
        self.band_label = QLabel("")
        row.addWidget(self.band_label)
        row.addStretch(1)
        row.addWidget(QLabel("Click a neuron for its spectrum."))
        lay.addLayout(row)
        maps = QHBoxLayout()
        self.umat_plot, self.umat_img, self.umat_bar = image_plot("U-matrix", *NEURON_AXES, min_width=200)
        self.hits_plot, self.hits_img, self.hits_bar = image_plot("hits", *NEURON_AXES, min_width=200)
        self.plane_plot, self.plane_img, self.plane_bar = image_plot("component plane", *NEURON_AXES,
                                                                     min_width=200)
        self.umat_plot.setToolTip("U-matrix: each neuron's mean distance to its neighbours in the codebook; "
                                  "high ridges part the clusters of the map")
        self.hits_plot.setToolTip("Hit map: how many of the fitted spectra each neuron is the best match of")
        self.plane_plot.setToolTip("Component plane: each neuron's codebook value in the chosen band")
        for plot in (self.umat_plot, self.hits_plot, self.plane_plot):
            maps.addWidget(plot.frame, 1)
        lay.addLayout(maps, 1)
        self.err_plot = plot_widget("epoch", "quantisation error")
        # (a rise in the first epochs read as a broken run: the neighbourhood is still wide then)
        self.err_plot.setToolTip("Each epoch's errors are measured before its update. While the neighbourhood is "
                                 "wide (the first epochs) every neuron is pulled towards the mean of many spectra, "
                                 "so the quantisation error can rise before it falls as the radius shrinks.")
        side_legend(self.err_plot)
        self.qe_curve = self.err_plot.plot(pen=pg.mkPen("c", width=2), symbol="o", symbolSize=5,
                                           name="quantisation error (mean distance to the neuron)")
        # the topographic error is a share of spectra (0..1): its own axis on the right, not QE's scale
        pi = self.err_plot.getPlotItem()
        self.te_plot = pg.ViewBox()
        pi.showAxis("right")
        pi.scene().addItem(self.te_plot)
        pi.getAxis("right").linkToView(self.te_plot)
        pi.getAxis("right").setLabel("topographic error")
        pi.getAxis("right").enableAutoSIPrefix(False)
        pi.getAxis("right").setWidth(60)
        self.te_plot.enableAutoRange(axis=pg.ViewBox.XAxis, enable=False)  # x follows the QE's plot
        self.te_plot.setXLink(pi)
        self.te_curve = pg.PlotDataItem(pen=pg.mkPen("y", width=2), symbol="t", symbolSize=5)
        self.te_plot.addItem(self.te_curve)
        pi.legend.addItem(self.te_curve, "topographic error (right axis)")

        def follow() -> None:
            self.te_plot.setGeometry(pi.vb.sceneBoundingRect())
            self.te_plot.linkedViewChanged(pi.vb, self.te_plot.XAxis)

        pi.vb.sigResized.connect(follow)
        self.neuron_plot = plot_widget("wavelength", "codebook value", "neuron spectrum")
        self.neuron_curve = self.neuron_plot.plot(pen=pg.mkPen("w", width=2))
        self._m = None
        tabs.addTab(self.maps, "U-matrix, hits, planes")
        tabs.addTab(self.err_plot, "Errors per epoch")
        tabs.addTab(self.neuron_plot, "Neuron spectrum")
        self.band.valueChanged.connect(self._plane)
        for plot in (self.umat_plot, self.hits_plot, self.plane_plot):
            plot.scene().sigMouseClicked.connect(lambda ev, plot=plot: self._clicked(ev, plot))

    def legend_tip(self, result) -> str:
        m = result.model
        n = int(m.rows) * int(m.cols)
        if m.cluster_of_unit_ is None:
            return (f"Each colour is one of the map's {n} neurons: every pixel takes the neuron whose "
                    "codebook spectrum is nearest to it (its best-matching neuron).")
        k = int(np.max(m.cluster_of_unit_)) + 1
        return (f"Each colour is a cluster of the SOM's codebook: its {n} neurons' spectra grouped into {k} "
                "clusters (k-means), and every pixel takes the cluster of its best-matching neuron.")

    def _scale(self) -> tuple[float, str]:
        """(divisor, name) of the values: the Spectrum dock's ("reflectance", or "as stored")."""
        return value_unit(self.host.session.cube)

    def show_result(self, result) -> None:
        m = result.model
        R, C = int(m.rows), int(m.cols)
        self._m = m
        scale, unit = self._scale()
        umat = np.asarray(m.umatrix_, float) / scale
        self.umat_img.setImage(umat, autoLevels=True)
        self.umat_bar.setLevels((float(umat.min()), float(umat.max()) + 1e-12))
        self.umat_plot.setTitle("U-matrix", size="9pt")
        set_bar_label(self.umat_bar, f"distance<br>({unit})")
        hits = m.hits_.reshape(R, C).astype(float)
        self.hits_img.setImage(hits, autoLevels=True)
        self.hits_bar.setLevels((0.0, float(hits.max()) + 1e-12))
        self.hits_plot.setTitle("hit map", size="9pt")
        set_bar_label(self.hits_bar, "spectra<br>per neuron")
        fit_image(self.umat_plot, umat, cells=True)
        fit_image(self.hits_plot, hits, cells=True)
        self._outline_clusters(m)
        self.band.setRange(0, m.codebook_.shape[1] - 1)
        self._plane()
        ep = np.arange(1, len(m.quantization_error_) + 1, dtype=float)
        qe = np.asarray(m.quantization_error_, float) / scale
        self.qe_curve.setData(ep, qe)
        self.te_curve.setData(ep, np.asarray(m.topographic_error_, float))
        self.te_plot.setYRange(0.0, max(float(np.max(m.topographic_error_)) * 1.1, 0.01), padding=0)
        self.err_plot.enableAutoRange()
        integer_ticks(self.err_plot, ep)
        self.err_plot.setLabel("left", f"quantisation error ({unit})")
        self.err_plot.setTitle(f"final: quantisation {qe[-1]:.4g} ({unit}), "
                               f"topographic {m.topographic_error_[-1]:.3f}")
        self.show_neuron(0)
        self.tabs.setCurrentWidget(self.maps)

    def _outline_clusters(self, m) -> None:
        """The codebook clusters outlined on the U-matrix and the hit map, each in its colour on the image,
        so a colour of the map can be found among the neurons (nothing tied them together)."""
        from hyperapp.gui.image_view import class_outlines
        from hyperapp.io.writers import class_colour

        for plot, item in getattr(self, "_cluster_lines", []):
            plot.removeItem(item)
        self._cluster_lines = []
        if m.cluster_of_unit_ is None:
            return
        grid = np.asarray(m.cluster_of_unit_).reshape(int(m.rows), int(m.cols)) + 1
        for v, (xs, ys) in class_outlines(grid).items():
            for plot in (self.umat_plot, self.hits_plot):
                item = pg.PlotCurveItem(xs, ys, pen=pg.mkPen(class_colour(v - 1), width=2.5), connect="pairs")
                item.setZValue(10)
                plot.addItem(item)
                self._cluster_lines.append((plot, item))
        tip = "; outlined: the codebook clusters, in their colours on the image"
        for plot in (self.umat_plot, self.hits_plot):
            if tip not in plot.toolTip():
                plot.setToolTip(plot.toolTip() + tip)

    def _plane(self) -> None:
        m = getattr(self, "_m", None)
        if m is None:
            return
        scale, _ = self._scale()
        cube, b = self.host.session.cube, self.band.value()
        W = to_host(m.codebook_)
        plane = np.asarray(W[:, b], float).reshape(int(m.rows), int(m.cols)) / scale
        self.plane_img.setImage(plane, autoLevels=True)
        self.plane_bar.setLevels((float(plane.min()), float(plane.max()) + 1e-12))
        self.band_label.setText(band_wavelength(cube, b))
        # title and bar label first: the plot is sized to the map around them
        self.plane_plot.setTitle(f"band {band_name(cube, b)}", size="9pt")
        set_bar_label(self.plane_bar, value_axis(cube)[1])
        fit_image(self.plane_plot, plane, cells=True)

    def show_neuron(self, unit: int) -> None:
        m = getattr(self, "_m", None)
        if m is None:
            return
        x, label = wavelength_axis(self.host.session.cube)
        scale, ylabel = value_axis(self.host.session.cube)
        self.neuron_plot.setLabel("bottom", label)
        self.neuron_plot.setLabel("left", ylabel)
        self.neuron_curve.setData(x, np.asarray(to_host(m.codebook_)[unit], float) / scale)
        self.neuron_plot.setTitle(f"neuron {unit} (row {unit // int(m.cols)}, col {unit % int(m.cols)}), "
                                  f"{int(m.hits_[unit])} spectra")

    def _clicked(self, ev, plot) -> None:
        m = getattr(self, "_m", None)
        if m is None:
            return
        p = plot.getPlotItem().vb.mapSceneToView(ev.scenePos())
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        if 0 <= r < int(m.rows) and 0 <= c < int(m.cols):
            self.show_neuron(r * int(m.cols) + c)
            self.tabs.setCurrentWidget(self.neuron_plot)
