"""Inspecting a result: threshold slider (live mask and counts), score histogram, ROC with AUC, the
object table (click a row to zoom there)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSlider,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from hyperapp.models.postprocess import label_objects

STEPS = 1000


class ResultsPanel(QWidget):
    threshold_changed = Signal(float)
    object_selected = Signal(int, int, int, int)
    run_selected = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.runs = QComboBox()
        top.addWidget(QLabel("Result"))
        top.addWidget(self.runs, 1)
        lay.addLayout(top)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, STEPS)
        lay.addWidget(QLabel("Threshold"))
        lay.addWidget(self.slider)
        self.counts = QLabel("no result yet")
        lay.addWidget(self.counts)
        self.origin = QLabel("")
        self.origin.setWordWrap(True)
        self.origin.setToolTip("How the default threshold was chosen (hyperapp.detect.threshold_origin); "
                               "moving the slider replaces it")
        lay.addWidget(self.origin)
        tabs = QTabWidget()
        self.hist = pg.PlotWidget()
        self.hist.setMinimumHeight(220)
        self.hist.showGrid(x=True, y=True, alpha=0.3)
        self.hist.setLabel("bottom", "score (higher = more target-like)")
        self.hist.setLabel("left", "log10(pixels + 1)")
        self.hist.getAxis("bottom").enableAutoSIPrefix(False)
        self.hist_curve = self.hist.plot(stepMode="center", fillLevel=0, brush=(100, 100, 255, 120))
        self.hist_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("y", width=2))
        self.hist.addItem(self.hist_line)
        self.roc = pg.PlotWidget()
        self.roc.setMinimumHeight(220)
        self.roc.showGrid(x=True, y=True, alpha=0.3)
        self.roc.setLabel("bottom", "false-alarm rate (share of background pixels, log scale)")
        self.roc.setLabel("left", "detection rate")
        self.roc.setLogMode(x=True, y=False)
        self.roc.setYRange(0.0, 1.02, padding=0)
        self.roc.getViewBox().setLimits(yMin=-0.02, yMax=1.05)
        self.roc.getViewBox().enableAutoRange(y=False)
        self.roc_curve = self.roc.plot(pen=pg.mkPen("c", width=2))
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(["label", "pixels", "row", "col", "peak", "bbox"])
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        tabs.addTab(self.hist, "Histogram")
        tabs.addTab(self.roc, "ROC")
        tabs.addTab(self.table, "Objects")
        tabs.setMinimumHeight(260)
        self.tabs = tabs
        self._table_threshold: float | None = None
        tabs.currentChanged.connect(lambda _: self._refresh_table())
        lay.addWidget(tabs, 1)
        self.scores: np.ndarray | None = None
        self._lo, self._hi = 0.0, 1.0
        self.slider.valueChanged.connect(self._slider_moved)
        self.table.cellClicked.connect(self._row_clicked)
        self.runs.currentIndexChanged.connect(self.run_selected)
        self._objects: list[dict] = []

    # ------------------------------------------------------------------ showing a result
    def show_result(self, scores: np.ndarray, threshold: float, truth: np.ndarray | None,
                    exclude: np.ndarray | None = None, origin: str = "") -> None:
        """Show a run's scores at ``threshold``; ``origin`` says how that threshold was chosen."""
        self.scores = np.asarray(scores, dtype=np.float32)
        self.origin.setText(origin)
        self.origin.setVisible(bool(origin))
        self._table_threshold = None
        finite = self.scores[np.isfinite(self.scores)]
        self._lo, self._hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if self._hi <= self._lo:
            self._hi = self._lo + 1.0
        counts, edges = np.histogram(finite, bins=200, range=(self._lo, self._hi))
        self.hist_curve.setData(edges, np.log10(counts + 1.0))
        if truth is not None:
            from hyperapp.models.evaluation import auc, roc_curve

            fpr, tpr = roc_curve(self.scores, truth, exclude)
            keep = fpr > 0
            self.roc_curve.setData(fpr[keep], tpr[keep])
            self.roc.setYRange(0.0, 1.02, padding=0)
            self.roc.setTitle(f"AUC {auc(self.scores, truth, exclude):.4f}")
        else:
            self.roc_curve.setData([], [])
            self.roc.setTitle("load a truth mask for the ROC curve")
        self.set_threshold(threshold)

    def set_threshold(self, value: float) -> None:
        """Move the slider (and everything that follows it) to ``value``."""
        self._threshold = float(value)
        pos = int(round((value - self._lo) / (self._hi - self._lo) * STEPS))
        self.slider.blockSignals(True)
        self.slider.setValue(min(max(pos, 0), STEPS))
        self.slider.blockSignals(False)
        self._apply(self._threshold)

    def threshold(self) -> float:
        return self._threshold

    def _slider_moved(self, pos: int) -> None:
        self.origin.setVisible(False)  # the person's threshold now, not the default's
        self._threshold = self._lo + (self._hi - self._lo) * pos / STEPS
        self._apply(self._threshold)

    def _apply(self, t: float) -> None:
        if self.scores is None:
            return
        mask = self.scores > t
        _, n_obj = label_objects(mask)
        self.counts.setText(f"threshold {t:.5g}: {int(mask.sum())} pixels, {n_obj} objects")
        self.hist_line.setValue(t)
        self._refresh_table()
        self.threshold_changed.emit(t)

    def _refresh_table(self) -> None:
        """The object table for the current threshold, built only when it is shown (the count is live)."""
        if self.scores is None or self.tabs.currentWidget() is not self.table:
            return
        if self._table_threshold == self._threshold:
            return
        from hyperapp.models.postprocess import object_table

        self._fill_table(object_table(self.scores > self._threshold, self.scores))
        self._table_threshold = self._threshold

    def clear(self) -> None:
        """Forget the shown result (another cube was opened)."""
        self.scores = None
        self._objects = []
        self._table_threshold = None
        self.runs.blockSignals(True)
        self.runs.clear()
        self.runs.blockSignals(False)
        self.table.setRowCount(0)
        self.hist_curve.setData([], [])
        self.roc_curve.setData([], [])
        self.roc.setTitle("")
        self.counts.setText("no result yet")

    def show_objects(self, rows: list[dict]) -> None:
        """Show a run's object table (at its own threshold)."""
        self._fill_table(rows)
        self._table_threshold = getattr(self, "_threshold", None)

    def _fill_table(self, rows: list[dict]) -> None:
        self._objects = rows
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            vals = [r["label"], r["pixels"], f"{r['centroid_row']:.1f}", f"{r['centroid_col']:.1f}",
                    f"{r['peak_score']:.4g}", f"{r['row0']}:{r['row1']}, {r['col0']}:{r['col1']}"]
            for j, v in enumerate(vals):
                self.table.setItem(i, j, QTableWidgetItem(str(v)))

    def _row_clicked(self, i: int, _col: int) -> None:
        r = self._objects[i]
        self.object_selected.emit(r["row0"], r["col0"], r["row1"], r["col1"])
