"""Inspecting a detection: the result list, the threshold slider (live mask, pixel and object counts),
the score histogram, the ROC with AUC and the threshold's operating point, and the object table as a review list
(:mod:`hyperapp.gui.review_panel`).

Every number comes from the service layer (:func:`hyperapp.detect.finish.count_at`,
:func:`~hyperapp.detect.finish.objects_at`, :func:`~hyperapp.detect.finish.operating_point`): the panel only shows.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from hyperapp.core.words import counted
from hyperapp.gui.param_form import FloatBox, allowed_text

STEPS = 1000
#: milliseconds the object count waits for the slider to rest (the mask itself follows at once)
COUNT_DELAY_MS = 60


class ResultsPanel(QWidget):
    threshold_changed = Signal(float)
    run_selected = Signal(int)
    show_detection_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        side = QWidget()
        side.setFixedWidth(300)
        lay = QVBoxLayout(side)
        lay.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        self.runs = QComboBox()
        self.runs.setToolTip("The detection runs of this cube; the chosen one is drawn on the image")
        top.addWidget(QLabel("Result"))
        top.addWidget(self.runs, 1)
        lay.addLayout(top)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, STEPS)
        self.slider.setToolTip("Pixels scoring above the threshold form the mask (green on the image)")
        self.slider_label = QLabel("Threshold")
        # the threshold as a number too: typed, as in ENVI, where the slider's 1000 steps are too coarse or
        # a value is known from another run
        self.value_box = FloatBox()
        self.value_box.setToolTip("The threshold: type a score, or move the slider below. Pixels scoring above "
                                  "it form the mask")
        self.value_box.setEnabled(False)
        self.value_box.valueChanged.connect(self._typed)
        # a refused value said on a line of its own, under the box: it replaced the pixel count, which
        # came back only with the next move
        self.refusal = QLabel("")
        self.refusal.setWordWrap(True)
        self.refusal.setStyleSheet("color: #c03030;")
        self.refusal.hide()
        self.value_box.refused.connect(self._refused)
        row = QHBoxLayout()
        row.addWidget(self.slider_label)
        row.addWidget(self.value_box, 1)
        lay.addLayout(row)
        lay.addWidget(self.refusal)
        lay.addWidget(self.slider)
        self.counts = QLabel("no result yet: mark targets, then run the detector (F5)")
        self.counts.setWordWrap(True)
        lay.addWidget(self.counts)
        self._asked = None  # (the run's threshold, the false-alarm rate it was set for)
        self.origin = QLabel("")
        self._origin_at: float | None = None  # the threshold the origin line explains
        self.origin.setWordWrap(True)
        self.origin.setToolTip("How the default threshold was chosen (hyperapp.detect.finish.threshold_origin); "
                               "moving the slider replaces it")
        lay.addWidget(self.origin)
        from hyperapp.gui.threshold_hint import ThresholdHint

        self.hint = ThresholdHint(self)  # where the default rate keeps few of the clicked targets
        lay.addWidget(self.hint)
        self.shown_note = QLabel("")
        self.shown_note.setWordWrap(True)
        self.show_button = QPushButton("Show the detection on the image")
        self.show_button.setToolTip("Draw the chosen detection's scores and mask again (the image shows an "
                                    "analysis's map now)")
        lay.addWidget(self.shown_note)
        lay.addWidget(self.show_button)
        lay.addStretch(1)
        outer.addWidget(side)
        tabs = QTabWidget()
        self.hist = pg.PlotWidget()
        self.hist.setMinimumHeight(180)
        self.hist.showGrid(x=True, y=True, alpha=0.3)
        self.hist.setLabel("bottom", "score (higher = more target-like; for RX, more anomalous)")
        self.hist.setLabel("left", "log10(pixels + 1)")
        self.hist.getAxis("bottom").enableAutoSIPrefix(False)
        self.hist_curve = self.hist.plot(stepMode="center", fillLevel=0, brush=(100, 100, 255, 120))
        self.hist_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("y", width=2))
        self.hist.addItem(self.hist_line)
        self.roc = pg.PlotWidget()
        self.roc.setMinimumHeight(180)
        self.roc.showGrid(x=True, y=True, alpha=0.3)
        self.roc.setLabel("bottom", "false-alarm rate (share of background pixels, log scale)")
        self.roc.setLabel("left", "detection rate")
        self.roc.setLogMode(x=True, y=False)
        self.roc.setYRange(-0.02, 1.05, padding=0)  # room for the 0 and 1.0 tick labels
        self.roc.getViewBox().setLimits(yMin=-0.02, yMax=1.05)
        self.roc.getViewBox().enableAutoRange(y=False)
        self.roc_curve = self.roc.plot(pen=pg.mkPen("c", width=2))
        self.roc_point = self.roc.plot([], [], pen=None, symbol="o", symbolSize=11,
                                       symbolBrush=pg.mkBrush(255, 230, 0), symbolPen=pg.mkPen("k", width=1))
        # the object table as a review list (statuses, next/previous, library matches): its own module
        from hyperapp.gui.review_panel import ReviewPanel

        self.review = ReviewPanel()
        self.table = self.review.table
        tabs.addTab(self.hist, "Histogram")
        tabs.addTab(self.roc, "ROC")
        tabs.addTab(self.review, "Objects")
        tabs.setTabToolTip(2, "The objects at the threshold as a review list: mark each Good or Bad (G, B), move with "
                           "N and Shift+N; the Good ones export alone")
        self.tabs = tabs
        outer.addWidget(tabs, 1)
        self._table_threshold: float | None = None
        self._counted: float | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(COUNT_DELAY_MS)
        self._timer.timeout.connect(self._follow)
        tabs.currentChanged.connect(lambda _: self._refresh_table())
        self.scores: np.ndarray | None = None
        self.filters: dict = {}
        self.truth: np.ndarray | None = None
        self.exclude: np.ndarray | None = None
        self._auc: float | None = None
        self._lo, self._hi = 0.0, 1.0
        self._threshold = 0.0
        self.slider.valueChanged.connect(self._slider_moved)
        self.runs.currentIndexChanged.connect(self.run_selected)
        self.show_button.clicked.connect(self.show_detection_requested)
        self._objects: list[dict] = []
        self.geo = None  # the cube's location (MapGrid or Swath): the table's lon/lat columns where set
        self.clear()

    @property
    def auc(self) -> float | None:
        """The shown run's AUC against the truth loaded now (the ROC tab's), or None without a truth."""
        return self._auc

    # ------------------------------------------------------------------ showing a result
    def show_result(self, scores: np.ndarray, threshold: float, truth: np.ndarray | None,
                    exclude: np.ndarray | None = None, origin: str = "", far_asked: float | None = None,
                    report: dict | None = None, filters: dict | None = None,
                    clicked: np.ndarray | None = None) -> None:
        """Show a run's scores at ``threshold``; ``origin`` says how that threshold was chosen, and
        ``far_asked`` the false-alarm rate it was set for (while the threshold is there, the ROC's title
        says when the truth counts many more); ``filters``: the run's target filter (its mask and objects
        go through it); ``clicked``: the target pixels marked for the run, where known (the object list says
        which objects hold them)."""
        self.scores = np.asarray(scores, dtype=np.float32)
        self.filters = dict(filters or {})
        self.clicked = clicked
        self._asked = (float(threshold), far_asked) if far_asked else None
        self.truth, self.exclude = truth, exclude
        self.origin.setText(origin)
        self.origin.setVisible(bool(origin))
        self._origin_at = float(threshold)  # the threshold ``origin`` explains; any other hides it
        self._table_threshold = None
        self._counted = None
        finite = self.scores[np.isfinite(self.scores)]
        self._lo, self._hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if self._hi <= self._lo:
            self._hi = self._lo + 1.0
        counts, edges = np.histogram(finite, bins=200, range=(self._lo, self._hi))
        self.hist_curve.setData(edges, np.log10(counts + 1.0))
        self.hist_line.show()
        self.hist.setTitle("")
        self._auc = None
        if truth is not None:
            from hyperapp.models.evaluation import auc, roc_curve

            fpr, tpr = roc_curve(self.scores, truth, exclude)
            keep = fpr > 0
            self.roc_curve.setData(fpr[keep], tpr[keep])
            self.roc.setYRange(-0.02, 1.05, padding=0)  # room for the 0 and 1.0 tick labels
            self._auc = auc(self.scores, truth, exclude)
            self._min_far = float(fpr[keep].min()) if keep.any() else 1e-6
            # a tick a decade (0.001, 0.01, ...): a wide log axis otherwise labels every minor tick,
            # and 0.0003 0.0004 0.0005 ... run into each other
            self._decade_ticks(int(np.floor(np.log10(self._min_far))))
            self.roc.getPlotItem().enableAutoRange(x=True)  # (an empty ROC fixed the range: _empty_roc_axis)
        else:
            self.roc_curve.setData([], [])
            self.roc_point.setData([], [])
            self._empty_roc_axis()
            self.roc.setTitle("load a truth mask (File > Load truth mask) for the ROC curve")
        self.set_detection_shown(True)
        self.value_box.blockSignals(True)
        self.value_box.setRange(self._lo, self._hi)
        self.value_box.blockSignals(False)
        self.value_box.setEnabled(True)
        self.set_threshold(threshold)
        self.hint.show_for(report, threshold)  # (the run's report: its suggested threshold, if any)

    def set_threshold(self, value: float) -> None:
        """Move the slider (and everything that follows it) to ``value``, counted at once. The line saying
        how the run's threshold was chosen shows only while that threshold is the one in use. A value that is
        not a number is passed over (the box refuses it before it comes here)."""
        if not np.isfinite(value):
            return
        self._threshold = float(value)
        self.origin.setVisible(bool(self.origin.text()) and self._threshold == self._origin_at)
        pos = int(round((value - self._lo) / (self._hi - self._lo) * STEPS))
        self.slider.blockSignals(True)
        self.slider.setValue(min(max(pos, 0), STEPS))
        self.slider.blockSignals(False)
        self._show_value(self._threshold)
        self._apply(self._threshold)
        self._follow()

    def _show_value(self, t: float) -> None:
        self.value_box.blockSignals(True)
        self.value_box.setValue(t)
        self.value_box.blockSignals(False)

    def _refused(self, text: str, kept: str) -> None:
        self.refusal.setText(f"threshold {text!r} is not allowed ({allowed_text(self.value_box)}: the run's lowest "
                             f"and highest score); kept {kept}")
        self.refusal.show()

    def _typed(self, value: float) -> None:
        if self.scores is None:
            return
        self.origin.setVisible(False)  # the person's threshold now, not the default's
        self.set_threshold(value)

    def threshold(self) -> float:
        return self._threshold

    def _slider_moved(self, pos: int) -> None:
        self.origin.setVisible(False)  # the person's threshold now, not the default's
        self._threshold = self._lo + (self._hi - self._lo) * pos / STEPS
        self._show_value(self._threshold)
        self._apply(self._threshold)
        self._timer.start()  # the counts once the slider rests

    def _apply(self, t: float) -> None:
        self.refusal.hide()  # a value taken: the refusal is old
        if self.scores is None:
            return
        self.hist_line.setValue(t)
        self.threshold_changed.emit(t)

    def _decade_ticks(self, lo: int) -> None:
        """The ROC's false-alarm axis labelled a tick a decade from 10^lo to 1 (0.001, 0.01, ...): a wide log
        axis otherwise labels every minor tick, and 0.0003 0.0004 0.0005 ... run into each other."""
        self.roc.getAxis("bottom").setTicks([[(float(d), f"{10.0 ** d:g}") for d in range(lo, 1)], []])

    def _empty_roc_axis(self) -> None:
        """An empty ROC keeps the axis a curve would have (1e-4 to 1, by decades), not bare minor ticks
        ("2 ... 9" of a log axis from 1 to 10, which a first-time user could not read)."""
        self._decade_ticks(-4)
        self.roc.getPlotItem().setRange(xRange=(-4, 0), yRange=(-0.02, 1.05), padding=0.02)

    def flush(self) -> None:
        """Count now what a resting slider would count (tests, exports)."""
        self._timer.stop()
        self._follow()

    def _follow(self) -> None:
        """The counts, the ROC's operating point and the table at the current threshold."""
        from hyperapp.detect.finish import count_at, operating_point

        if self.scores is None or self._counted == self._threshold:
            return
        t = self._threshold
        pixels, n_obj = count_at(self.scores, t, self.filters)
        self.counts.setText(f"threshold {t:.5g}: {counted(pixels, 'pixel')}, {counted(n_obj, 'object')}")
        if self.truth is not None:
            far, pd = operating_point(self.scores, self.truth, t, self.exclude)
            self.roc_point.setData([max(far, self._min_far)], [pd])
            # two short lines (one ran past a 1366-pixel screen's plot): a log axis has no 0, so a
            # threshold with no false alarm is drawn at the axis' left end, and says so; and a threshold
            # set for a false-alarm rate says when the truth counts far more than was asked
            second = "(no false alarm: drawn at the axis' left end)" if far < self._min_far else ""
            if self._asked and self._asked[0] == t and far > 2 * self._asked[1]:
                second = f"{far / self._asked[1]:.1f}x the {self._asked[1]:g} asked: some pixels taken as targets are not"
            # (a title wider than the plot wraps: hyperapp.gui.plot_labels)
            self.roc.setTitle(f"AUC {self._auc:.4f}; at the threshold (dot): detection {pd:.3f}, "
                              f"false alarms {far:.2g}" + (f"<br>{second}" if second else ""))
            self.operating_point = (far, pd)
        else:
            self.operating_point = None
        self._counted = t
        self._refresh_table()

    def _refresh_table(self) -> None:
        """The object table for the current threshold, built only when it is shown (the count is live)."""
        if self.scores is None or self.tabs.currentWidget() is not self.review:
            return
        if self._table_threshold == self._threshold:
            return
        self._objects = self.review.show_at(self.scores, self._threshold, getattr(self, "filters", None),
                                            getattr(self, "geo", None), getattr(self, "clicked", None)).objects
        self._table_threshold = self._threshold

    def refresh_objects(self) -> None:
        """Build the object table again (a run's review restored) when its tab is shown."""
        self._table_threshold = None
        self._refresh_table()

    def set_detection_shown(self, shown: bool, what: str = "") -> None:
        """Whether the image shows the chosen detection; when an analysis's map replaced it, the slider
        is disabled (it would move a mask no one sees) and a button brings the detection back."""
        has = self.scores is not None
        self.slider.setEnabled(shown and has)
        self.shown_note.setVisible(not shown and has)
        self.show_button.setVisible(not shown and has)
        if not shown:
            self.shown_note.setText(f"The image shows {what}, not this detection." if what else
                                    "The image does not show this detection.")

    def clear(self) -> None:
        """Forget the shown result (another cube was opened)."""
        self._timer.stop()
        self.refusal.hide()
        self.scores = None
        self.truth = self.exclude = self.clicked = None
        self.operating_point = None
        self._objects = []
        self._table_threshold = None
        self._counted = None
        self.value_box.setEnabled(False)
        self.value_box.lineEdit().clear()  # no number of the last cube's run (the next result sets one)
        self.runs.blockSignals(True)
        self.runs.clear()
        self.runs.blockSignals(False)
        self.review.adopt(None)
        self.hist_curve.setData([], [])
        self.hist_line.hide()
        self.hist.setTitle("no result yet: the score histogram appears after a run")
        for plot in (self.hist, self.roc):  # not the last cube's ranges; the next result sets its own
            plot.getPlotItem().setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
            plot.getPlotItem().enableAutoRange()
        self.roc_curve.setData([], [])
        self.roc_point.setData([], [])
        self._empty_roc_axis()
        self.roc.setTitle("")
        self.slider.blockSignals(True)
        self.slider.setValue(0)  # not where the last cube's threshold left it
        self.slider.blockSignals(False)
        self.origin.setVisible(False)
        self.hint.show_for(None, 0.0)
        self.counts.setText("no result yet: mark targets, then run the detector (F5)")
        self.set_detection_shown(True)
