"""The forest panel: training classes from ROIs (any number, named and coloured), a random forest or a
CART tree trained on them, the class map on the image, the confusion matrix and accuracy on held-out
pixels, the out-of-bag accuracy, band importance against wavelength, and the class map's export."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QColorDialog,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hyperapp.core.errors import HyperappError
from hyperapp.gui.panels import AnalysisPanel, band_name, plot_widget, wavelength_axis

#: file-dialog filters of the class map's formats
EXPORT_FILTERS = {"ENVI classification (*.hdr)": "envi", "TIFF / GeoTIFF (*.tif)": "tiff", "PNG (*.png)": "png"}


class ForestPanel(AnalysisPanel):
    methods = ("forest", "cart")
    title = "Forest classification"

    # ------------------------------------------------------------------ controls: the classes

    def cost_words(self, n: int, v: dict) -> str:
        trees = "one tree" if self.method_name() == "cart" else f"{v['n_trees']} trees"
        return f"{n:,} marked pixels, {trees}, then every pixel of the image classified"

    def build_controls(self, layout) -> None:
        box = QGroupBox("Training classes (ROIs)")
        lay = QVBoxLayout(box)
        self.class_table = QTableWidget(0, 3)
        self.class_table.setHorizontalHeaderLabels(["Colour", "Class", "Pixels"])
        self.class_table.verticalHeader().setVisible(False)
        self.class_table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.class_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.class_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._fit_table()
        self.class_table.setToolTip("Each marked class trains the forest. Double-click a name to rename it, a "
                                    "colour to change it; select a class and press Mark to draw it on the image.")
        lay.addWidget(self.class_table)
        said = QLabel("Every marked class trains the classifier, the detector's target and background marks "
                      "included; remove a class or clear its marks to leave it out.")
        said.setWordWrap(True)
        lay.addWidget(said)
        row = QHBoxLayout()
        self.add_button = QPushButton("Add class")
        self.add_button.setToolTip("A new class to mark on the image (target and background are the first two)")
        self.mark_button = QPushButton("Mark")
        self.mark_button.setToolTip("Draw the selected class with the current ROI tool")
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Remove the selected class and unmark its pixels")
        for b in (self.add_button, self.mark_button, self.remove_button):
            row.addWidget(b)
        lay.addLayout(row)
        layout.addWidget(box)
        self.add_button.clicked.connect(self.add_class)
        self.mark_button.clicked.connect(self.mark_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.class_table.cellChanged.connect(self._renamed)
        self.class_table.cellDoubleClicked.connect(self._double_clicked)

    def roi(self):
        return None if self.host.session is None else self.host.session.roi

    def refresh_classes(self) -> None:
        roi = self.roi()
        if roi is None:
            return
        counts = roi.class_counts()
        t = self.class_table
        t.blockSignals(True)
        t.setRowCount(len(roi.classes))
        for k, (name, colour) in enumerate(roi.classes):
            sw = QTableWidgetItem("")
            sw.setBackground(QBrush(QColor(*colour)))
            sw.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
            t.setItem(k, 0, sw)
            # the swatch also drawn over the cell: a selected row's highlight painted over the item's colour
            chip = QLabel()
            chip.setStyleSheet(f"background-color: rgb({colour[0]}, {colour[1]}, {colour[2]}); margin: 3px;")
            chip.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)  # clicks reach the table
            t.setCellWidget(k, 0, chip)
            t.setItem(k, 1, QTableWidgetItem(name))
            n = QTableWidgetItem(str(int(counts[k])))
            n.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
            n.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            t.setItem(k, 2, n)
        t.blockSignals(False)
        self._fit_table()

    def _fit_table(self) -> None:
        """The class table as tall as its rows (two to six; more scroll inside it): a fixed 140+ px table
        left the form's last fields below the fold at 1366 x 768."""
        t = self.class_table
        rows = min(max(t.rowCount(), 2), 6)
        t.setFixedHeight(t.horizontalHeader().sizeHint().height() + rows * t.verticalHeader().defaultSectionSize()
                         + 2 * t.frameWidth())

    def add_class(self, name: str | None = None) -> int | None:
        roi = self.roi()
        if roi is None:
            self.host.show_error("open a cube first")
            return None
        name = name or f"class {len(roi.classes) + 1}"
        try:
            k = roi.add_class(name)
        except HyperappError as exc:
            self.host.show_error(str(exc))
            return None
        self.class_table.selectRow(k - 1)
        self.mark_selected()
        item = self.class_table.item(k - 1, 1)
        if item is not None and self.isVisible():
            self.class_table.editItem(item)  # name it now (double-click renames it later)
        return k

    def selected_class(self) -> int | None:
        rows = self.class_table.selectionModel().selectedRows()
        return rows[0].row() + 1 if rows else None

    def mark_selected(self) -> None:
        k = self.selected_class()
        if k is not None:
            self.host.set_roi_class(k)

    def remove_selected(self) -> None:
        k = self.selected_class()
        if k is None or self.roi() is None:
            return
        try:
            self.roi().remove_class(k)
        except HyperappError as exc:
            self.host.show_error(str(exc))

    def _renamed(self, row: int, col: int) -> None:
        if col != 1 or self.roi() is None:
            return
        try:
            self.roi().rename_class(row + 1, self.class_table.item(row, 1).text())
        except HyperappError as exc:
            self.host.show_error(str(exc))
            self.refresh_classes()

    def _double_clicked(self, row: int, col: int) -> None:
        if col != 0 or self.roi() is None:
            return
        c = QColorDialog.getColor(QColor(*self.roi().classes[row][1]), self, "Class colour")
        if c.isValid():
            self.roi().set_class_colour(row + 1, (c.red(), c.green(), c.blue()))

    def reset(self) -> None:
        super().reset()
        roi = self.roi()
        if roi is not None:
            roi.listeners.append(self.refresh_classes)
            self.refresh_classes()

    # ------------------------------------------------------------------ plots
    def build_plots(self, tabs) -> None:
        box = QWidget()
        lay = QVBoxLayout(box)
        self.accuracy = QLabel("Mark two or more classes, then Run.")
        self.accuracy.setWordWrap(True)
        lay.addWidget(self.accuracy)
        self.confusion = QTableWidget(0, 0)
        self.confusion.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.confusion.setToolTip("Held-out pixels: rows are the true class, columns the predicted one")
        self.confusion.setMinimumSize(320, 160)
        lay.addWidget(self.confusion, 1)
        self.export_button = QPushButton("Export class map…")
        self.export_button.setToolTip("Write the class map with its class names and colours: ENVI "
                                      "classification, TIFF (GeoTIFF when the cube has map info) or PNG")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self._export_dialog)
        lay.addWidget(self.export_button)
        self.importance_plot = plot_widget("wavelength", "importance",
                                           "band importance")
        self.importance_bars = pg.BarGraphItem(x=[], height=[], width=1.0, brush=pg.mkBrush(80, 170, 255))
        self.importance_plot.addItem(self.importance_bars)
        tabs.addTab(box, "Accuracy")
        tabs.addTab(self.importance_plot, "Band importance")

    def show_result(self, result) -> None:
        from hyperapp.analyse.run import class_accuracy_words, class_table, forest_shape

        m = result.model
        res = result.report["results"]
        _, names, colours = class_table(result)
        parts = [f"{forest_shape(res)}; trained on {res['n_train']} pixels"]
        caveats = []
        if res["test_accuracy"] is not None:
            parts.append(f"held-out accuracy {res['test_accuracy']:.1%} on {res['n_test']} pixels")
            caveats = class_accuracy_words(res, names)
        if res.get("oob_accuracy") is not None:
            parts.append(f"out-of-bag accuracy {res['oob_accuracy']:.1%}")
        # what the overall accuracy hides (a class barely tested, or badly predicted) on a line of its own,
        # in bold: in the middle of one long line it read as a footnote to "100.0 %"
        import html

        self.accuracy.setTextFormat(Qt.TextFormat.RichText)  # (class names escaped: a name may hold "<")
        self.accuracy.setText(html.escape("; ".join(parts))
                              + ("<br><b>But: " + html.escape("; ".join(caveats)) + "</b>" if caveats else ""))
        C = m.confusion_
        t = self.confusion
        k = len(names)
        t.setRowCount(k if C is not None else 0)
        t.setColumnCount(k if C is not None else 0)
        if C is not None:
            # what the rows and columns are, on the headers a person reads (not only in a tooltip)
            t.setHorizontalHeaderLabels([f"predicted {n}" for n in names])
            t.setVerticalHeaderLabels([f"true {n}" for n in names])
            for i in range(k):
                for j in range(k):
                    it = QTableWidgetItem(str(int(C[i, j])))
                    it.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                    if i == j:
                        it.setBackground(QBrush(QColor(*colours[i], 90)))
                    t.setItem(i, j, it)
            t.resizeColumnsToContents()  # "predicted background" whole, not cut to the default width
        x, label = wavelength_axis(self.host.session.cube)
        width = float(np.median(np.diff(x))) * 0.8 if len(x) > 1 else 0.8
        self.importance_plot.setLabel("bottom", label)
        self.importance_bars.setOpts(x=x, height=m.feature_importances_, width=width)
        top = ", ".join(band_name(self.host.session.cube, int(b)) for b in res["top_bands"][:3])
        # the axis says "importance" (a low plot has no room for more), the title what it is a share of;
        # short, so it fits the dock at 1366 x 768 (a long title widened the plot past the dock's edge)
        self.importance_plot.setTitle(f"band importance (share of the impurity decrease); top: {top}", size="9pt")
        self.export_button.setEnabled(result.labels is not None)
        self.tabs.setCurrentIndex(0)

    # ------------------------------------------------------------------ export
    def export_class_map(self, path: str, fmt: str):
        """Write the last result's class map (``fmt``: envi, tiff or png); returns the path."""
        from hyperapp.analyse.run import write_class_map
        from hyperapp.request import checks as options

        options.out_file(str(path), make_folder=False)
        return write_class_map(self.result, path, self.host.session.cube, fmt)

    def _export_dialog(self) -> None:
        if self.result is None:
            return
        path, filt = QFileDialog.getSaveFileName(self, "Export class map", "classes", ";;".join(EXPORT_FILTERS))
        if not path:
            return
        try:
            out = self.export_class_map(path, EXPORT_FILTERS.get(filt, "envi"))
        except HyperappError as exc:
            self.status.setText("the class map was not exported (see the message)")  # not an earlier "wrote"
            self.host.show_error(str(exc))
            return
        self.status.setText(f"wrote {out}")
