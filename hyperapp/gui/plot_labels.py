"""Plot titles and axis labels that stay inside their plot.

- pyqtgraph's title label asks its layout for the width of its text as a minimum, so a long title in a
  narrow dock made the plot wider than the dock: the plot's right end, its last ticks and the end of the
  title were cut off (the Spectrum dock beside the image at 1366 x 768, the ROC). Here the label asks for
  no width: its text wraps at the width the plot gets, and the label grows down instead.
- An axis label is centred when the axis is resized, not when its text changes, so a longer label ("band"
  becoming "wavelength (nanometers)" when another cube opened) ran past the axis' end. Here a new label
  is centred at once.

:func:`install` does both for every plot (``PlotItem.setTitle``, ``AxisItem._updateLabel``); the window's
package calls it once.
"""

from __future__ import annotations

import types

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextOption

#: narrower than this (a label not laid out yet), a title is left unwrapped
MIN_WRAP = 40.0


def _update_min(label) -> None:
    """``LabelItem.updateMin`` that wraps the text at the label's width and asks only for its height."""
    width = label.width()
    label.item.setTextWidth(width if width >= MIN_WRAP else -1)
    h = label.itemRect().height()
    label.setMinimumWidth(0)
    label.setMinimumHeight(h)
    plot = getattr(label, "_plot", None)
    if plot is not None and label.isVisible():  # pyqtgraph holds the title's row at 30 px: room for every line
        label.setMaximumHeight(max(h, 30))
        plot.layout.setRowFixedHeight(0, max(h, 30))
    label._sizeHint = {
        Qt.SizeHint.MinimumSize: (0, h),
        Qt.SizeHint.PreferredSize: (0, h),
        Qt.SizeHint.MaximumSize: (-1, -1),
        Qt.SizeHint.MinimumDescent: (0, 0),
    }
    label.updateGeometry()


def fit_title(plot) -> None:
    """Make ``plot``'s title (a PlotItem or PlotWidget) wrap at the plot's width (see the module)."""
    item = plot.getPlotItem() if hasattr(plot, "getPlotItem") else plot
    label = item.titleLabel
    if getattr(label, "_wraps", False):
        return
    label._wraps = True
    label._plot = item
    option = QTextOption(Qt.AlignmentFlag.AlignHCenter)
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    label.item.document().setDefaultTextOption(option)
    label.updateMin = types.MethodType(_update_min, label)


def install() -> None:
    """Every plot's title wraps, and every axis label is centred when it changes (see the module).
    Idempotent."""
    if getattr(pg.PlotItem.setTitle, "_fits", False):
        return
    set_title_first, update_label_first = pg.PlotItem.setTitle, pg.AxisItem._updateLabel

    def set_title(self, title=None, **args):
        fit_title(self)
        return set_title_first(self, title, **args)

    def update_label(self):
        update_label_first(self)
        self.resizeEvent()  # (where pyqtgraph places the label)

    set_title._fits = True
    pg.PlotItem.setTitle = set_title
    pg.AxisItem._updateLabel = update_label
