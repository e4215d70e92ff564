"""The detector dock: method, its parameters (a form built from the registry), device, Train & Run."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from hyperapp.backend import gpu_available, gpu_status
from hyperapp.models.registry import METHODS, Param


def _editor(p: Param):
    if p.choices:
        w = QComboBox()
        w.addItems([str(c) for c in p.choices])
        w.setCurrentText(str(p.default))
        return w, (lambda: w.currentText()), (lambda v: w.setCurrentText(str(v)))
    if p.type is bool:
        w = QCheckBox()
        w.setChecked(bool(p.default))
        return w, w.isChecked, (lambda v: w.setChecked(bool(v)))
    if p.type is int:
        w = QSpinBox()
        w.setRange(int(p.minimum if p.minimum is not None else -10**9), int(p.maximum if p.maximum is not None else 10**9))
        w.setValue(int(p.default))
        return w, w.value, (lambda v: w.setValue(int(v)))
    w = QDoubleSpinBox()
    w.setDecimals(4)
    w.setRange(float(p.minimum if p.minimum is not None else -1e9), float(p.maximum if p.maximum is not None else 1e9))
    w.setValue(float(p.default))
    return w, w.value, (lambda v: w.setValue(float(v)))


class DetectorDock(QWidget):
    run_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        form = QFormLayout()
        self.method = QComboBox()
        for name, m in METHODS.items():
            self.method.addItem(m.title, name)
        form.addRow("Method", self.method)
        self.device = QComboBox()
        self.device.addItem("auto", "auto")
        gpu = gpu_available()
        self.device.addItem(f"GPU: {gpu_status()}" if gpu else f"GPU (none: {gpu_status()})", "gpu")
        self.device.addItem("CPU (NumPy)", "cpu")
        if not gpu:
            self.device.model().item(1).setEnabled(False)
        form.addRow("Device", self.device)
        self.far = QDoubleSpinBox()
        self.far.setDecimals(5)
        self.far.setRange(1e-5, 0.5)
        self.far.setSingleStep(1e-3)
        self.far.setValue(1e-3)
        form.addRow("False-alarm rate", self.far)
        lay.addLayout(form)
        self.param_box = QWidget()
        self.param_form = QFormLayout(self.param_box)
        lay.addWidget(QLabel("Parameters"))
        lay.addWidget(self.param_box)
        self.model_label = QLabel("")
        lay.addWidget(self.model_label)
        row = QHBoxLayout()
        self.run_button = QPushButton("Train && Run")
        self.run_button.setShortcut("Ctrl+R")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        lay.addLayout(row)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addStretch(1)
        self._getters: dict = {}
        self._setters: dict = {}
        self.method.currentIndexChanged.connect(self._rebuild)
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self._rebuild()

    def _rebuild(self) -> None:
        while self.param_form.rowCount():
            self.param_form.removeRow(0)
        self._getters, self._setters = {}, {}
        for p in METHODS[self.method_name()].params:
            w, get, set_ = _editor(p)
            w.setToolTip(p.help)
            self.param_form.addRow(p.name, w)
            self._getters[p.name], self._setters[p.name] = get, set_

    # ------------------------------------------------------------------ public API
    def method_name(self) -> str:
        return self.method.currentData()

    def set_method(self, name: str) -> None:
        self.method.setCurrentIndex(self.method.findData(name))

    def params(self) -> dict:
        return {k: g() for k, g in self._getters.items()}

    def set_params(self, values: dict) -> None:
        for k, v in values.items():
            if k in self._setters:
                self._setters[k](v)

    def device_name(self) -> str:
        return self.device.currentData()

    def set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        if busy:
            self.progress.setValue(0)

    def show_progress(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.status.setText(message)
