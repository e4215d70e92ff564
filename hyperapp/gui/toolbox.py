"""One toolbox dock instead of a tab per tool (QGIS's Processing Toolbox, ENVI's Toolbox).

A list at the top picks the tool (the detector, then each analysis panel); below it the chosen tool's
page (its form scrolled, its Run/Cancel/progress strip fixed). Each tool's plots sit in a stack of their
own (:attr:`ToolBox.plots`), which the window docks at the bottom beside the spectrum: choosing a tool
shows its plots too. Adding a tool is one :meth:`ToolBox.add_tool` call.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QStackedWidget, QVBoxLayout, QWidget


class ToolBox(QWidget):
    """The tool list and the chosen tool's page; :attr:`plots` holds the tools' plot widgets."""

    tool_changed = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 0)
        top = QFormLayout()
        self.picker = QComboBox()
        self.picker.setToolTip("The tool to use: detect targets, or one of the analyses")
        top.addRow("<b>Tool</b>", self.picker)
        lay.addLayout(top)
        self.pages = QStackedWidget()
        lay.addWidget(self.pages, 1)
        self.plots = QStackedWidget()
        self._empty_plots = QLabel("This tool draws its results on the image and in the Results dock.")
        self._empty_plots.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.plots.addWidget(self._empty_plots)
        self._titles: list[str] = []
        self._plots: dict[str, QWidget] = {}
        self.picker.currentIndexChanged.connect(self._picked)

    def add_tool(self, title: str, page: QWidget, plots: QWidget | None = None, tip: str = "") -> None:
        """Add a tool: its ``page`` (form and run strip) and optionally its ``plots``."""
        self._titles.append(title)
        self.pages.addWidget(page)
        if plots is not None:
            self.plots.addWidget(plots)
            self._plots[title] = plots
        self.picker.addItem(title)
        if tip:
            self.picker.setItemData(self.picker.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)

    def titles(self) -> list[str]:
        return list(self._titles)

    def current(self) -> str:
        return self._titles[self.picker.currentIndex()] if self._titles else ""

    def choose(self, title: str) -> None:
        """Show tool ``title`` (its page and its plots)."""
        self.picker.setCurrentIndex(self._titles.index(title))

    def show_plots(self, title: str) -> None:
        """Bring tool ``title``'s plots to the front of the plot stack."""
        self.plots.setCurrentWidget(self._plots.get(title, self._empty_plots))

    def _picked(self, i: int) -> None:
        if not 0 <= i < len(self._titles):
            return
        self.pages.setCurrentIndex(i)
        self.show_plots(self._titles[i])
        self.tool_changed.emit(self._titles[i])
