"""A form built from a method's parameter schema (:class:`hyperapp.models.registry.Param`).

Every detector and analysis method describes its options once, in the registry; this form shows each
with its human label, its help as the tooltip, and an editor of the right kind (number box with the
parameter's range, check box, choice list, or a text field for values such as a range of k). Adding a
method adds no hand-built form.
"""

from __future__ import annotations

import re

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from hyperapp.models.registry import Param


def editor(p: Param):
    """(widget, getter, setter) for one parameter."""
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
        w.setRange(int(p.minimum if p.minimum is not None else -10**9),
                   int(min(p.maximum if p.maximum is not None else 10**9, 2**31 - 1)))
        w.setValue(int(p.default))
        return w, w.value, (lambda v: w.setValue(int(v)))
    if p.type is str:
        w = QLineEdit(str(p.default))
        return w, (lambda: w.text().strip()), (lambda v: w.setText(str(v)))
    w = FloatBox()
    w.setRange(float(p.minimum if p.minimum is not None else -1e9), float(p.maximum if p.maximum is not None else 1e9))
    w.setValue(float(p.default))
    return w, w.value, (lambda v: w.setValue(float(v)))


def edited(w):
    """The signal an editor of :func:`editor` sends when its value changes."""
    if isinstance(w, QComboBox):
        return w.currentIndexChanged
    if isinstance(w, QCheckBox):
        return w.toggled
    if isinstance(w, QLineEdit):
        return w.textChanged
    return w.valueChanged


def float_text(value: float) -> str:
    """``value`` as a person types it: the shortest form that reads back the same to 10 significant
    digits ("0.001", "3", "1e-06"), not a fixed number of decimals ("0.00100", "0.00000")."""
    return f"{value:.10g}"


class FloatBox(QDoubleSpinBox):
    """A number box that shows a float the way a person types it (:func:`float_text`), accepts the forms
    Python reads ("1e-6", ".5") and steps by a tenth of the value's leading digit (0.003 -> 0.0031)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setDecimals(12)  # what the value keeps; the text shows only the digits it needs
        self.setStepType(QAbstractSpinBox.StepType.AdaptiveDecimalStepType)

    def textFromValue(self, value: float) -> str:
        return float_text(value)

    def valueFromText(self, text: str) -> float:
        try:
            return float(text.strip())
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):
        t = text.strip()
        try:
            v = float(t)
        except ValueError:  # a number being typed ("-", "1e", "2.") is on its way, anything else is not
            ok = re.fullmatch(r"[+-]?(\d*\.?\d*)([eE][+-]?)?", t) is not None
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        ok = self.minimum() <= v <= self.maximum()
        return (QValidator.State.Acceptable if ok else QValidator.State.Intermediate), text, pos

    def fixup(self, text: str) -> str:
        return float_text(self.value())


class ParamForm(QWidget):
    """The editable options of one method; :meth:`values` returns ``{name: value}``."""

    changed = Signal()  # any option was edited (a panel's cost line follows the values)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.form = QFormLayout(self)
        self.form.setContentsMargins(0, 0, 0, 0)
        # a long label puts its editor on the next line rather than widening the toolbox
        self.form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self._get: dict = {}
        self._set: dict = {}
        self.editors: dict = {}

    def set_params(self, params: tuple[Param, ...]) -> None:
        """Rebuild the form for another method's parameters."""
        while self.form.rowCount():
            self.form.removeRow(0)
        self._get, self._set, self.editors = {}, {}, {}
        for p in params:
            w, get, set_ = editor(p)
            if not isinstance(w, QCheckBox):  # as wide as the form gives, never wider (run_controls)
                w.setSizePolicy(QSizePolicy.Policy.Ignored, w.sizePolicy().verticalPolicy())
                w.setMinimumWidth(90)
            w.setToolTip(p.help)
            edited(w).connect(lambda *_: self.changed.emit())
            label = QLabel(p.title)
            label.setToolTip(f"{p.help}\n(option name: {p.name})")
            self.form.addRow(label, w)
            self._get[p.name], self._set[p.name], self.editors[p.name] = get, set_, w

    def values(self) -> dict:
        return {k: g() for k, g in self._get.items()}

    def set_values(self, values: dict) -> None:
        for k, v in values.items():
            if k in self._set:
                self._set[k](v)

    def labels(self) -> list[str]:
        """The row labels, as a person reads them (for tests and screenshots)."""
        out = []
        for i in range(self.form.rowCount()):
            item = self.form.itemAt(i, QFormLayout.ItemRole.LabelRole)
            if item is not None and item.widget() is not None:
                out.append(item.widget().text())
        return out
