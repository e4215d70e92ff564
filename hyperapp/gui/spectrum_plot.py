"""Spectra: the one under the cursor (live), pinned ones, each ROI class's mean and spread, and the reviewed
object's mean with its best library match."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

#: the plot's title while it shows no pixel
HINT_NO_CUBE = "Open a cube, then hover the image: the spectrum under the cursor shows here"
HINT_HOVER = "Hover the image: the spectrum under the cursor shows here (P pins it)"
#: the reviewed object's mean and its best library match (apart from the target red, the pins and the cursor)
REVIEW_COLOUR, MATCH_COLOUR = (255, 160, 0), (150, 210, 255)
#: a plot narrower than this (pixels) has its legend under it
LEGEND_BELOW_WIDTH = 520
PIN_COLOURS = [(255, 200, 0), (0, 200, 255), (255, 0, 200), (120, 255, 0), (255, 120, 0), (180, 180, 255)]


class SpectrumPlot(pg.PlotWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        from hyperapp.gui.panels import side_legend

        self.showGrid(x=True, y=True, alpha=0.3)
        side_legend(self)  # beside the plot, never over the curves (the analysis plots' legend)
        # before a cube: what the plot is for, not bare 0..1 axes
        self.setLabel("bottom", "wavelength")
        self.setLabel("left", "value")
        self.setTitle(HINT_NO_CUBE)
        self.cursor_curve = self.plot(pen=pg.mkPen("w", width=2), name="cursor")
        self.pins: list = []
        self.roi_items: list = []
        self.review_items: list = []
        self.x = None
        self.connect = "all"  # or one bool a point: whether its line goes on to the next (False at a gap)
        self.scale = 1.0
        self.nodata = None  # the cube's no-data value: a band holding it is no value, drawn as a gap
        self.setMinimumHeight(180)
        self.getAxis("left").enableAutoSIPrefix(False)
        self._legend_below = False

    def resizeEvent(self, ev) -> None:  # noqa: N802 (Qt's name)
        self._place_legend()  # first: the view sizes the plot to the layout as the legend leaves it
        super().resizeEvent(ev)

    def _place_legend(self) -> None:
        """The legend beside the plot, or under it where the plot is narrower than :data:`LEGEND_BELOW_WIDTH`
        (the review's Spectrum dock beside the image): beside a narrow plot it took half its width."""
        pi = self.getPlotItem()
        legend = getattr(pi, "legend", None)
        below = self.width() < LEGEND_BELOW_WIDTH
        if legend is None or below == getattr(self, "_legend_below", False):
            return
        self._legend_below = below
        pi.layout.removeItem(legend)
        if below:
            pi.layout.addItem(legend, 4, 0, 1, 3)
        else:
            pi.layout.addItem(legend, 1, 3, 3, 1)
        pi.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)

    def set_axis(self, cube, left_out=None) -> None:
        """The axes of ``cube``'s spectra: x its wavelengths with units (or band numbers), y what its values
        are (:func:`hyperapp.gui.panels.value_axis`, the label the status line and the panels use too).
        Lines break where bands were left out between two bands (the product's bad bands,
        :meth:`~hyperapp.core.cube.Cube.bands_left_out`, or ``left_out``: those counts of the cube the
        spectra came from, for a cube made from it that no longer knows them, an orthorectified swath), and
        across a gap in wavelength wider than 2.5 steps (bands cut before the file was written): a straight
        line across a gap reads as data."""
        from hyperapp.gui.panels import value_axis, wavelength_axis

        bands = cube.bands
        self.nodata = cube.nodata
        self.scale, ylabel = value_axis(cube)
        self.setLabel("left", ylabel)
        self.x, xlabel = wavelength_axis(cube)
        self.setLabel("bottom", xlabel)
        self.getAxis("bottom").enableAutoSIPrefix(False)
        joined = np.ones(max(bands - 1, 0), bool)
        gaps = np.asarray(cube.bands_left_out() if left_out is None else left_out)
        if gaps.size == bands:
            joined &= gaps[:-1] == 0
        if xlabel != "band":
            step = np.abs(np.diff(self.x))
            if step.size > 2 and np.median(step) > 0:
                joined &= step <= 2.5 * np.median(step)
        self.connect = "all" if joined.all() else np.append(joined, False)
        # the new cube's range at once (the last cube's stayed under the new label until a hover)
        if self.x.size:
            self.setXRange(float(self.x.min()), float(self.x.max()) if self.x.size > 1 else float(self.x[0]) + 1)
        self.enableAutoRange(axis="y")

    def frame_values(self, values) -> None:
        """The value axis's range while no spectrum is drawn: that of ``values`` (stored values of the new
        cube, the bands the image shows; on this plot's scale), so the last cube's range (a radiance's
        1-4 under a reflectance's label) never stands under the new cube's label until a hover."""
        v = np.asarray(values, dtype=np.float64).ravel() / self.scale
        v = v[np.isfinite(v)]
        if v.size:
            lo, hi = (float(q) for q in np.percentile(v, [0.5, 99.5]))
            self.setYRange(lo, hi if hi > lo else lo + 1.0)
        self.enableAutoRange(axis="y")  # the first spectrum drawn frames itself

    def curve(self, spectrum) -> tuple[np.ndarray, np.ndarray, object]:
        """(x, y, connect) of a spectrum of the cube's bands as this plot draws it: on the plot's scale, the
        no-data value and NaN left out as gaps (a fill pixel drew -9999 and took the axis with it; an
        all-NaN one failed in pyqtgraph's paint), the line broken where bands were left out. Nothing
        (empty arrays) where no band holds a value."""
        raw = np.asarray(spectrum, dtype=np.float64)
        y = raw / self.scale
        if self.nodata is not None:
            y[raw == np.float64(np.float32(self.nodata))] = np.nan
        finite = np.isfinite(y)
        if not finite.any():
            return np.zeros(0), np.zeros(0), "all"
        joined = np.ones(y.size, bool) if isinstance(self.connect, str) else np.asarray(self.connect, bool).copy()
        joined[:-1] &= finite[:-1] & finite[1:]
        joined[-1] = False
        return self.x, y, ("all" if joined[:-1].all() else joined)

    def show_cursor(self, spectrum: np.ndarray, label: str) -> None:
        x, y, connect = self.curve(spectrum)
        self.cursor_curve.setData(x, y, connect=connect)
        self.setTitle(label if x.size else f"{label}: no data (the product's fill value)")

    def clear_cursor(self) -> None:
        self.cursor_curve.setData([], [])
        self.setTitle(HINT_HOVER)

    def pin(self, spectrum: np.ndarray, label: str) -> None:
        colour = PIN_COLOURS[len(self.pins) % len(PIN_COLOURS)]
        x, y, connect = self.curve(spectrum)
        self.pins.append(self.plot(x, y, pen=pg.mkPen(colour, width=1.5), name=label, connect=connect))

    def clear_pins(self) -> None:
        for p in self.pins:
            self.removeItem(p)
        self.pins = []

    def show_rois(self, stats: dict[str, tuple]) -> None:
        """``{name: (mean, std[, colour])}``: mean line with a ±1 std band per ROI class, in its colour."""
        for it in self.roi_items:
            self.removeItem(it)
        self.roi_items = []
        colours = {"target": (255, 60, 60), "background": (60, 140, 255)}
        for name, (mean, std, *colour) in stats.items():
            mean, std = np.asarray(mean, float), np.asarray(std, float)
            c = tuple(int(v) for v in colour[0][:3]) if colour else colours.get(name, (200, 200, 200))
            lo = self._plot(mean - std, pen=pg.mkPen(c + (60,)))
            hi = self._plot(mean + std, pen=pg.mkPen(c + (60,)))
            fill = pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(c + (40,)))
            self.addItem(fill)
            line = self._plot(mean, pen=pg.mkPen(c, width=2, style=pg.QtCore.Qt.PenStyle.DashLine),
                              name=f"{name} mean")
            self.roi_items += [lo, hi, fill, line]

    def show_review(self, mean: np.ndarray, label: str, title: str = "", match=None) -> None:
        """The reviewed object's mean spectrum (``label`` in the legend, ``title`` over the plot) in amber,
        beside the target mean (:meth:`show_rois`), and ``match``: (name, spectrum on the cube's bands, or
        None) of its best library match, dotted. Short texts: the title's width is the plot's narrowest."""
        self.clear_review()
        self.review_items.append(self._plot(mean, pen=pg.mkPen(REVIEW_COLOUR, width=2.5), name=label))
        if match is not None and match[1] is not None:
            self.review_items.append(self._plot(match[1], pen=pg.mkPen(MATCH_COLOUR, width=2,
                                                                       style=pg.QtCore.Qt.PenStyle.DotLine),
                                                name=f"match: {_short(match[0])}"))
        self.setTitle(title or label)

    def _plot(self, values, **kw):
        """Plot a spectrum of the cube's bands (a mean, a library match) as :meth:`curve` draws it."""
        x, y, connect = self.curve(values)
        return self.plot(x, y, connect=connect, **kw)

    def clear_review(self) -> None:
        """No reviewed object: its curves go, and its title with them (it named an object whose number the
        next threshold gives another)."""
        shown = bool(self.review_items)
        for it in self.review_items:
            self.removeItem(it)
        self.review_items = []
        if shown:
            self.setTitle(HINT_HOVER)


def _short(name: str, n: int = 18) -> str:
    """A legend's name, at most ``n`` characters (the legend's width is taken from the plot's)."""
    return name if len(name) <= n else name[:n - 1] + "\u2026"
