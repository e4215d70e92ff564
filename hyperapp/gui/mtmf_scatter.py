"""MTMF / MTTCIMF scatter: each pixel's score against its infeasibility, with a selection a person draws.

As in ENVI's MTMF workflow, real targets sit at a high score and a low infeasibility (the lower right);
a false positive scores high but is infeasible. Left clicks on the plot add the vertices of a polygon
(a double click closes it); the pixels inside it are the selection, shown on the image.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

#: what the scatter says before a mixture-tuned run (and after the cube changes)
EMPTY_TEXT = "Run MTMF or MTTCIMF to plot score against infeasibility."

#: points drawn at most (every pixel takes part in the selection; the plot shows an even sample)
MAX_POINTS = 40_000


def points_in_polygon(x: np.ndarray, y: np.ndarray, poly: list[tuple[float, float]]) -> np.ndarray:
    """Boolean mask of the points (x, y) inside the polygon (even-odd rule), vectorised over points."""
    inside = np.zeros(x.shape, bool)
    n = len(poly)
    if n < 3:
        return inside
    for i in range(n):  # a loop over the polygon's few edges, not the pixels
        (x0, y0), (x1, y1) = poly[i], poly[(i + 1) % n]
        crosses = (y0 > y) != (y1 > y)
        with np.errstate(divide="ignore", invalid="ignore"):
            xc = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
        inside ^= crosses & (x < xc)
    return inside


class InfeasibilityScatter(QWidget):
    """Score (x) against infeasibility (y) of the last mixture-tuned run; emits the selected pixels."""

    selection_changed = Signal(object)  # (rows, cols) bool mask, or None when cleared

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        self.plot = pg.PlotWidget()
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.plot.setLabel("bottom", "MF score (abundance estimate)")
        self.plot.setLabel("left", "infeasibility (noise σ)")
        for ax in ("left", "bottom"):
            self.plot.getAxis(ax).enableAutoSIPrefix(False)
        self.points = pg.ScatterPlotItem(size=3, pen=None, brush=pg.mkBrush(120, 180, 255, 90), pxMode=True)
        self.chosen = pg.ScatterPlotItem(size=4, pen=None, brush=pg.mkBrush(255, 210, 0, 220), pxMode=True)
        self.outline = pg.PlotCurveItem(pen=pg.mkPen((255, 210, 0), width=2))
        for it in (self.points, self.chosen, self.outline):
            self.plot.addItem(it)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        lay.addWidget(self.plot, 1)
        row = QHBoxLayout()
        self.info = QLabel(EMPTY_TEXT)
        self.info.setWordWrap(True)
        self.clear_button = QPushButton("Clear selection")
        self.clear_button.clicked.connect(self.clear_selection)
        row.addWidget(self.info, 1)
        row.addWidget(self.clear_button)
        lay.addLayout(row)
        self.score = self.infeas = None
        self.shape: tuple[int, int] | None = None
        self.poly: list[tuple[float, float]] = []
        self.closed = False
        self.mask: np.ndarray | None = None

    def set_data(self, score: np.ndarray, infeasibility: np.ndarray, title: str = "",
                 xlabel: str = "MF score (abundance estimate)") -> None:
        """Plot a run's two maps (rows, cols); a new run clears the selection. ``xlabel``: what the score
        is (MTTCIMF's is TCIMF's)."""
        self.plot.setLabel("bottom", xlabel)
        self.shape = score.shape
        self.score = np.asarray(score, np.float64).reshape(-1)
        self.infeas = np.asarray(infeasibility, np.float64).reshape(-1)
        ok = np.flatnonzero(np.isfinite(self.score) & np.isfinite(self.infeas))
        step = max(1, ok.size // MAX_POINTS)
        show = ok[::step]
        self.points.setData(self.score[show], self.infeas[show])
        self.plot.setTitle(title)
        self.clear_selection()
        drawn = f" (every {step}-th drawn)" if step > 1 else ""
        self.info.setText(f"{ok.size} pixels{drawn}. Click to draw "
                          "a polygon around the targets (high score, low infeasibility); double-click closes it.")

    def clear(self) -> None:
        """Forget the run (a new cube): no points, and no title or count of the old run's pixels."""
        self.score = self.infeas = None
        self.shape = None
        self.points.setData([], [])
        self.plot.setTitle(None)
        self.info.setText(EMPTY_TEXT)
        self.clear_selection()

    def clear_selection(self) -> None:
        self.poly, self.closed, self.mask = [], False, None
        self.outline.setData([], [])
        self.chosen.setData([], [])
        self.selection_changed.emit(None)

    def set_polygon(self, poly: list[tuple[float, float]]) -> np.ndarray | None:
        """Select the pixels inside ``poly`` (score, infeasibility vertices); returns the mask."""
        self.poly, self.closed = [tuple(map(float, p)) for p in poly], True
        return self._apply()

    def _clicked(self, ev) -> None:
        if self.score is None or ev.button() != pg.QtCore.Qt.MouseButton.LeftButton:
            return
        p = self.plot.getPlotItem().vb.mapSceneToView(ev.scenePos())
        if self.closed:
            self.poly, self.closed = [], False
        if ev.double():
            self.closed = len(self.poly) >= 3
            if self.closed:
                self._apply()
            return
        self.poly.append((p.x(), p.y()))
        xs, ys = zip(*self.poly)
        self.outline.setData(list(xs), list(ys))

    def _apply(self) -> np.ndarray | None:
        xs, ys = zip(*(self.poly + self.poly[:1]))
        self.outline.setData(list(xs), list(ys))
        sel = points_in_polygon(self.score, self.infeas, self.poly)
        self.mask = sel.reshape(self.shape)
        idx = np.flatnonzero(sel)[:MAX_POINTS]
        self.chosen.setData(self.score[idx], self.infeas[idx])
        self.info.setText(f"{int(sel.sum())} pixels selected (shown on the image).")
        self.selection_changed.emit(self.mask)
        return self.mask
