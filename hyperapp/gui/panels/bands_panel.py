"""The band-reduction panel: the best random band subsets (k-means code search) or one band per band
cluster, marked on the mean spectrum; a chosen set of bands becomes the cube the detectors run on."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from hyperapp.gui.panels import AnalysisPanel, band_name, plot_widget, value_axis, wavelength_axis

#: heights (share of the plot from the bottom) of the rows the band labels are staggered over
LABEL_ROWS = (0.93, 0.8, 0.67, 0.54)
#: the share of the wavelength range a label such as "25 (1233.3 nm)" takes at the dock's usual width
LABEL_SPAN = 0.14


def label_rows(xs: list[float], span: float) -> list[float]:
    """A height for each of the sorted positions ``xs``: the first row whose last label is far enough to the
    left, so neighbouring bands' labels do not print over each other (they did, one row for all)."""
    last = [-np.inf] * len(LABEL_ROWS)
    out = []
    for x in xs:
        row = next((i for i, lx in enumerate(last) if x - lx >= LABEL_SPAN * span), int(np.argmin(last)))
        last[row] = x
        out.append(LABEL_ROWS[row])
    return out


class BandsPanel(AnalysisPanel):
    methods = ("band-subsets", "band-clusters")
    title = "Band reduction"
    #: 10,000 subsets took 198 s on the CPU on the 128 x 128 x 64 sample scene; 500 take seconds
    cpu_defaults = {"band-subsets": {"n_subsets": 500}}

    def cost_words(self, n: int, v: dict) -> str:
        if self.method_name() == "band-subsets":
            return (f"{n:,} spectra, {v['n_subsets']:,} subsets of {v['subset_size']} bands, each a k-means "
                    f"of {v['k']} clusters")
        return f"{min(n, v['max_pixels']):,} spectra, {v['n_clusters']} band clusters"

    def build_plots(self, tabs) -> None:
        box = QWidget()
        lay = QVBoxLayout(box)
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["bands", "score"])
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        from PySide6.QtWidgets import QHeaderView

        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(160)
        lay.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.use_button = QPushButton("Detect on these bands")
        self.use_button.setToolTip("Run the detectors on the selected subset (or the kept bands) only")
        self.all_button = QPushButton("All bands")
        self.all_button.setToolTip("Run the detectors on every band again")
        row.addWidget(self.use_button)
        row.addWidget(self.all_button)
        lay.addLayout(row)
        self.spectrum_plot = plot_widget("wavelength", "mean value", "bands on the mean spectrum")
        self.score_plot = plot_widget("score", "subsets")
        self.score_curve = self.score_plot.plot(stepMode="center", fillLevel=0, brush=(100, 180, 255, 140))
        tabs.addTab(box, "Best bands")
        tabs.addTab(self.spectrum_plot, "On the spectrum")
        tabs.addTab(self.score_plot, "Score distribution")
        self.band_items: list = []
        self._rows: list[list[int]] = []
        self.table.itemSelectionChanged.connect(self._mark_selected)
        self.use_button.clicked.connect(self.use_selected)
        self.all_button.clicked.connect(lambda: self.host.use_bands(None))

    def _rebuild(self) -> None:
        super()._rebuild()
        self._cap_to_cube()

    def reset(self) -> None:
        super().reset()
        self._cap_to_cube()

    def _cap_to_cube(self) -> None:
        """No more bands kept, or per subset, than the cube has: the boxes went to 1024 on a 64-band cube,
        and the run then refused what they took."""
        s = self.host.session
        if s is not None:
            for name in ("n_clusters", "subset_size"):
                self.form.set_maximum(name, s.cube.bands)

    def selected_bands(self) -> list[int] | None:
        i = self._selected_rank()
        return self._rows[i] if 0 <= i < len(self._rows) else None

    def use_selected(self) -> None:
        bands = self.selected_bands()
        if bands is None:
            self.host.show_error("run a band reduction first")
            return
        self.host.use_bands(bands)

    def show_result(self, result) -> None:
        m = result.model
        if result.method == "band-subsets":
            self._rows = [list(map(int, s)) for s in m.best_subsets_]
            scores = list(m.best_scores_)
            self.table.setHorizontalHeaderLabels(["bands", m.score_kind_])
            counts, edges = np.histogram(m.scores_, bins=60)
            self.score_curve.setData(edges, counts)
            self.score_plot.setLabel("bottom", m.score_kind_)
            # subsets tied at the best score: the first listed is one of them, not the best (27 of 40 tied at
            # 1.0, row 1 marked best without a word)
            tied = int(np.count_nonzero(m.scores_ >= m.best_scores_[0]))
            said = (f"; {tied} subsets tie at the best score {m.best_scores_[0]:.4f}: the first listed is one of "
                    "them, any would do" if tied > 1 else "")
            self.score_plot.setTitle(f"{len(m.scores_)} subsets explored{said}")
            if said:
                self.status.setText(self.status.text() + said)
        else:
            self._rows = [list(map(int, m.representatives_))]
            scores = [None]
            self.table.setHorizontalHeaderLabels(["bands kept", ""])
            self.score_curve.setData([0, 1], [0])
            self.score_plot.setTitle("")  # nothing of an earlier band-subset search stays behind the hidden tab
        # band clustering scores no subsets: no empty "Score distribution" tab
        self.tabs.setTabVisible(self.tabs.indexOf(self.score_plot), result.method == "band-subsets")
        self.table.setColumnHidden(1, result.method != "band-subsets")  # nor an empty score column
        self.table.setRowCount(len(self._rows))
        for i, (bands, sc) in enumerate(zip(self._rows, scores)):
            self.table.setItem(i, 0, QTableWidgetItem(", ".join(band_name(self.host.session.cube, b) for b in bands)))
            self.table.setItem(i, 1, QTableWidgetItem("" if sc is None else f"{sc:.4f}"))
        self.table.selectRow(0)
        self._mark_selected()

    def _selected_rank(self) -> int:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        return rows[0].row() if rows else 0

    def map_heading(self, result) -> str:
        """The code map's legend names the subset whose codes it shows (the best, or the row chosen)."""
        if result.method != "band-subsets":
            return super().map_heading(result)
        rank = getattr(result, "shown_rank", 0)
        # the bands' numbers only (the table beside gives their wavelengths): the legend is 190 px wide
        bands = ", ".join(band_name(self.host.session.cube, b).split(" (")[0] for b in result.model.best_subsets_[rank])
        return f"Subset {rank + 1} codes, bands {bands}"

    def _mark_selected(self) -> None:
        s = self.host.session
        bands = self.selected_bands()
        if s is None or bands is None:
            return
        for it in self.band_items:
            self.spectrum_plot.removeItem(it)
        cube = s.cube
        x, label = wavelength_axis(cube)
        scale, ylabel = value_axis(cube)
        self.spectrum_plot.setLabel("bottom", label)
        self.spectrum_plot.setLabel("left", ylabel)
        mean = np.asarray(s.mean_spectrum(), float) / scale
        self.band_items = [self.spectrum_plot.plot(x, mean, pen=pg.mkPen("w", width=2))]
        kept = sorted((float(x[b]), b) for b in bands if b < len(x))
        for (xb, b), pos in zip(kept, label_rows([xb for xb, _ in kept], float(np.ptp(x)) if len(x) > 1 else 1.0)):
            line = pg.InfiniteLine(xb, angle=90, pen=pg.mkPen((255, 180, 0), width=2),
                                   label=band_name(cube, b), labelOpts={"position": pos, "color": (255, 180, 0)})
            self.spectrum_plot.addItem(line)
            self.band_items.append(line)
        self._follow_row()

    def _follow_row(self) -> None:
        """The map follows the chosen row of the ranking: the codes of that subset (it stayed the best
        one's). A row chosen while another is being mapped is mapped next."""
        res, rank = self.result, self._selected_rank()
        if res is None or res.method != "band-subsets" or res.labels is None or getattr(res, "shown_rank", 0) == rank:
            return
        model = res.model

        class Ranked:  # the model's predict for this row of the ranking
            @staticmethod
            def predict(P):
                return model.predict(P, rank=rank)

        self.relabel(Ranked(), f"mapping the codes of subset {rank + 1}…", f"codes of subset {rank + 1} on the image",
                     shown=lambda: setattr(res, "shown_rank", rank))

    def relabel_finished(self) -> None:
        self._follow_row()
