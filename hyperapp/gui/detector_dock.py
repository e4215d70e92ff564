"""The detector page: method, its parameters (a form built from the registry), device, and Train & Run,
Cancel and progress in a strip that never scrolls away (:func:`hyperapp.gui.run_controls.tool_page`)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QSpinBox,
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
        # the target filter (clump, then sieve) and continuum removal: the request's, as the CLI's options
        self.clump = QSpinBox()
        self.clump.setRange(0, 99)
        self.clump.setSingleStep(2)
        self.clump.setToolTip("Close the mask with a square of this odd side (pixels): fills gaps narrower than it "
                              "inside and between detections; 0 = off")
        form.addRow("Clump", self.clump)
        self.sieve_min, self.sieve_max = QSpinBox(), QSpinBox()
        self.sieve_min.setRange(0, 10**8)
        self.sieve_max.setRange(0, 10**8)
        self.sieve_min.setToolTip("Remove objects of fewer pixels than this (after clumping); 0 = no sieve")
        self.sieve_max.setToolTip("Remove objects of more pixels than this; 0 = no upper bound")
        form.addRow("Sieve: min pixels", self.sieve_min)
        form.addRow("Sieve: max pixels", self.sieve_max)
        self.connectivity = QComboBox()
        self.connectivity.addItem("8 (corners join)", 8)
        self.connectivity.addItem("4 (edges only)", 4)
        self.connectivity.setToolTip("Which neighbours join pixels into one object")
        form.addRow("Connectivity", self.connectivity)
        self.continuum_removed = QCheckBox("Continuum removed")
        self.continuum_removed.setToolTip("Detect on continuum-removed spectra (each divided by its upper convex "
                                          "hull over wavelength), the targets' too")
        form.addRow("", self.continuum_removed)
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
        if not self.cancel_button.isEnabled():  # (a run going keeps its progress line and bar: it is not done)
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

    def settings(self) -> dict:
        """The page's fields under the request's keys (:class:`hyperapp.request.DetectRequest`); the
        options are those set away from the method's defaults, as the CLI's ``--param`` gives them."""
        lo, hi = self.sieve_min.value(), self.sieve_max.value()
        defaults = METHODS[self.method_name()].factory().get_params()
        params = {k: v for k, v in self.params().items() if k not in defaults or defaults[k] != v}
        return {"method": self.method_name(), "params": params, "device": self.device_name(),
                "far": self.far.value(), "clump": self.clump.value(),
                "sieve": None if not lo else (lo, hi or None), "connectivity": self.connectivity.currentData(),
                "continuum_removed": self.continuum_removed.isChecked()}

    def set_settings(self, request) -> None:
        """Show ``request``'s method, options and filter (a reopened project's run)."""
        self.set_method(request.method)
        self.set_params(request.params)
        if request.far is not None:
            self.far.setValue(request.far)
        self.clump.setValue(request.clump)
        lo, hi = request.sieve or (0, None)
        self.sieve_min.setValue(lo)
        self.sieve_max.setValue(hi or 0)
        self.connectivity.setCurrentIndex(self.connectivity.findData(request.connectivity))
        self.continuum_removed.setChecked(request.continuum_removed)

    def set_busy(self, busy: bool) -> None:
        set_busy(self, busy)

    def show_progress(self, fraction: float, message: str) -> None:
        show_progress(self, fraction, message)
