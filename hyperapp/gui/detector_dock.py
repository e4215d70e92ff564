"""The detector page: method, its parameters (a form built from the registry), device, and Train & Run,
Cancel and progress in a strip that never scrolls away (:func:`hyperapp.gui.run_controls.tool_page`)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from hyperapp.core.backend import gpu_available, gpu_status
from hyperapp.gui.marking_bar import MarkingBar
from hyperapp.gui.param_form import FloatBox, ParamForm
from hyperapp.gui.run_controls import method_row, set_busy, show_progress, tool_page
from hyperapp.models.registry import METHODS

#: the detectors whose Run trains a network on the marked pixels first
TRAINED = ("rbfn", "ffbp")


class DetectorDock(QWidget):
    run_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        body = QWidget()
        lay = QVBoxLayout(body)
        # what a click on the image does, first: a detector learns from the marked pixels
        self.marking = MarkingBar()
        lay.addWidget(self.marking)
        form = QFormLayout()
        self.method = QComboBox()
        for name, m in METHODS.items():
            self.method.addItem(m.title, name)
            self.method.setItemData(self.method.count() - 1, m.help or m.title, Qt.ItemDataRole.ToolTipRole)
        method_row(form, self.method)
        self.device = QComboBox()
        self.device.addItem("auto", "auto")
        gpu = gpu_available()
        self.device.addItem(f"GPU: {gpu_status()}" if gpu else f"GPU (none: {gpu_status()})", "gpu")
        self.device.addItem("CPU (NumPy)", "cpu")
        if not gpu:
            self.device.model().item(1).setEnabled(False)
        form.addRow("Device", self.device)
        self.far = FloatBox()
        self.far.setRange(1e-5, 0.5)
        self.far.setValue(1e-3)
        self.far.setToolTip("The share of background pixels allowed above the threshold: it sets the mask.")
        form.addRow("False-alarm rate", self.far)
        lay.addLayout(form)
        self.param_form = ParamForm()
        self.param_form.watch(self.far, "False-alarm rate")  # refusals said under the parameters; range in tooltip
        lay.addWidget(QLabel("<b>Parameters</b> (hover a name for what it does)"))
        lay.addWidget(self.param_form)
        self.model_label = QLabel("")
        lay.addWidget(self.model_label)
        lay.addStretch(1)
        tool_page(self, body, "Train && Run")
        self.run_button.setToolTip("Train the method on the marked pixels (where it learns) and score every pixel "
                                   "(F5 or Ctrl+R)")  # (the window's Run menu holds both keys)
        self.method.currentIndexChanged.connect(self._rebuild)
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self._rebuild()

    def _rebuild(self) -> None:
        m = METHODS[self.method_name()]
        self.param_form.set_params(m.params)
        # "Train & Run" only for the methods that learn from the marked pixels (the networks); the
        # statistical detectors estimate from the image and the marks, and train nothing
        self.run_button.setText("Train && Run" if m.name in TRAINED else "Run")
        self.status.setText("")  # the last run's line belongs to the method it ran
        self.progress.setValue(0)

    # ------------------------------------------------------------------ public API
    def method_name(self) -> str:
        return self.method.currentData()

    def set_method(self, name: str) -> None:
        self.method.setCurrentIndex(self.method.findData(name))

    def params(self) -> dict:
        return self.param_form.values()

    def set_params(self, values: dict) -> None:
        self.param_form.set_values(values)

    def device_name(self) -> str:
        return self.device.currentData()

    def set_busy(self, busy: bool) -> None:
        set_busy(self, busy)

    def show_progress(self, fraction: float, message: str) -> None:
        show_progress(self, fraction, message)
