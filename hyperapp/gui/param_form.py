"""A form built from a method's parameter schema (:class:`hyperapp.models.registry.Param`).

Every detector and analysis method describes its options once, in the registry; this form shows each
with its human label, its help as the tooltip, and an editor of the right kind (number box with the
parameter's range, check box, choice list, or a text field for values such as a range of k). Adding a
method adds no hand-built form.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QPoint, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QToolTip,
    QWidget,
)

from hyperapp.models.registry import Param

#: the words a choice list shows for an option's values (the values stay what the command line and job
#: files take, in each item's tooltip); a value without words here is shown as it is
CHOICE_WORDS = {  # short: a form's list is a third of a 1366-pixel screen wide (the option's help says more)
    "std": "std devs", "meanstd": "means and std devs", "full": "full", "diag": "diagonal",
    "ward": "Ward", "average": "average", "complete": "complete", "single": "single",
    "euclidean": "Euclidean", "sam": "spectral angle", "silhouette": "silhouette",
    "davies_bouldin": "Davies-Bouldin", "elbow": "elbow of inertia", "lowerright": "below-right",
    "lowerleft": "below-left", "right": "right", "lower": "below", "pca": "PCA", "cov": "covariance",
    "random": "random", "batch": "batch", "online": "online",
}


def choice_words(value) -> str:
    """What a choice list shows for ``value`` (:data:`CHOICE_WORDS`)."""
    return CHOICE_WORDS.get(str(value), str(value))


def editor(p: Param):
    """(widget, getter, setter) for one parameter."""
    if p.choices:
        w = QComboBox()
        for c in p.choices:
            w.addItem(choice_words(c), str(c))
            w.setItemData(w.count() - 1, f"option value: {c}", 3)  # Qt.ToolTipRole: what the CLI takes
        w.setCurrentIndex(max(0, w.findData(str(p.default))))

        def set_choice(v) -> None:
            i = w.findData(str(v))
            if i >= 0:
                w.setCurrentIndex(i)

        return w, (lambda: w.currentData()), set_choice
    if p.type is bool:
        w = QCheckBox()
        w.setChecked(bool(p.default))
        return w, w.isChecked, (lambda v: w.setChecked(bool(v)))
    if p.type is int:
        w = IntBox()
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


def allowed_text(box) -> str:
    """The range a number box takes, as a person reads it ("from 1 to 1024")."""
    fmt = float_text if isinstance(box, QDoubleSpinBox) else str
    return f"from {fmt(box.minimum())} to {fmt(box.maximum())}"


class _Refusing:
    """What a number box does with text it cannot take (out of its range, or not a number) when editing
    ends: Qt's boxes put the last value back without a word, and a person who typed -5, 0 or nan then runs
    with a value they did not type. This one puts the last value back too, and sends :attr:`refused`
    (the text typed, the value kept) for the form to say so."""

    def fixup(self, text: str) -> str:  # Qt calls it with text it could not take, as editing ends
        kept = self.textFromValue(self.value())
        if text.strip() and text.strip() != kept:
            self.refused.emit(text.strip(), kept)
        return kept


class FloatBox(_Refusing, QDoubleSpinBox):
    """A number box that shows a float the way a person types it (:func:`float_text`), accepts the forms
    Python reads ("1e-6", ".5") and steps by a tenth of the value's leading digit (0.003 -> 0.0031)."""

    #: (text typed, value kept): see :class:`_Refusing`
    refused = Signal(str, str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setKeyboardTracking(False)  # the value changes when editing ends, not at each key (_Refusing)
        self.setDecimals(12)  # what the value keeps; the text shows only the digits it needs
        self.setStepType(QAbstractSpinBox.StepType.AdaptiveDecimalStepType)

    def textFromValue(self, value: float) -> str:
        return float_text(value)

    def valueFromText(self, text: str) -> float:
        t = text.strip()
        if t == self.textFromValue(self.value()):
            # the text shown, read back as editing ends (Enter, or a refused word put back): the value itself,
            # not its 10-digit form, which moved a threshold of 3.7407748699 to 3.74077487 on Enter
            return self.value()
        try:
            return float(t)
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):
        t = text.strip()
        try:
            v = float(t)
        except ValueError:  # a number being typed ("-", "1e", "2.") is on its way; words are refused at the end
            return QValidator.State.Intermediate, text, pos
        ok = self.minimum() <= v <= self.maximum()  # (NaN is not)
        return (QValidator.State.Acceptable if ok else QValidator.State.Intermediate), text, pos


class IntBox(_Refusing, QSpinBox):
    """A whole-number box that lets a person type what they mean (a minus sign, a number out of range)
    and, when editing ends, keeps its last value and says so (:class:`_Refusing`) instead of dropping
    the keys it did not like while they typed (Qt's box turned "-5" into 5 in a box from 1 up)."""

    refused = Signal(str, str)

    def __init__(self, parent=None):
        super().__init__(parent)
        # the value changes when editing ends: typing 99999 in a box up to 1024 passed through 999, which
        # the box took on the way and kept
        self.setKeyboardTracking(False)

    def validate(self, text: str, pos: int):
        t = text.strip()
        if re.fullmatch(r"[+-]?\d+", t) and self.minimum() <= int(t) <= self.maximum():
            return QValidator.State.Acceptable, text, pos
        return QValidator.State.Intermediate, text, pos


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
        # what was refused last ("Neurons: -5 is not allowed (from 1 to 1024); kept 32"), under the fields
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #c0392b")
        self.note.hide()

    def set_params(self, params: tuple[Param, ...]) -> None:
        """Rebuild the form for another method's parameters."""
        if self.form.rowCount():
            self.form.takeRow(self.form.rowCount() - 1)  # the note row: kept, not deleted
        while self.form.rowCount():
            self.form.removeRow(0)
        self._get, self._set, self.editors = {}, {}, {}
        self.note.hide()
        for p in params:
            w, get, set_ = editor(p)
            if not isinstance(w, QCheckBox):  # as wide as the form gives, never wider (run_controls)
                w.setSizePolicy(QSizePolicy.Policy.Ignored, w.sizePolicy().verticalPolicy())
                w.setMinimumWidth(90)
            w.setToolTip(p.help)
            if isinstance(w, _Refusing):
                self.watch(w, p.title)  # (its range joins its tooltip)
            edited(w).connect(lambda *_: self.changed.emit())
            label = QLabel(p.title)
            label.setToolTip(f"{w.toolTip()}\n(option name: {p.name})")
            self.form.addRow(label, w)
            self._get[p.name], self._set[p.name], self.editors[p.name] = get, set_, w
        if not params:  # a method without options: said, not an empty space under the heading
            self.form.addRow(QLabel("none: this method takes no options"))
        self.form.addRow(self.note)

    def set_maximum(self, name: str, value) -> None:
        """Cap option ``name``'s box at ``value`` (what the cube allows: no more bands kept than it has),
        its tooltip's allowed range following."""
        box = self.editors.get(name)
        if box is None or not hasattr(box, "setMaximum"):
            return
        before = allowed_text(box)
        box.setMaximum(max(value, box.minimum()))
        box.setToolTip(box.toolTip().replace(f"Allowed: {before}", f"Allowed: {allowed_text(box)}"))

    def watch(self, box, title: str) -> None:
        """Say under the fields when number box ``box`` (labelled ``title``) refused what was typed; the
        next accepted edit of it clears that. Its range joins its tooltip."""
        box.setToolTip(f"{box.toolTip()}\nAllowed: {allowed_text(box)}".lstrip("\n"))

        def refused(text: str, kept: str) -> None:
            said = f"{title}: {text!r} is not allowed ({allowed_text(box)}); kept {kept}"
            self.note.setText(said)
            self.note.setProperty("box", (title, kept))
            self.note.show()
            # said where the person typed too, and the note scrolled into view where the form scrolls
            QToolTip.showText(box.mapToGlobal(QPoint(0, box.height())), said, box)
            area = self.parentWidget()
            while area is not None and not isinstance(area, QScrollArea):
                area = area.parentWidget()
            if area is not None:
                area.ensureWidgetVisible(self.note)

        def accepted(value) -> None:
            # (the box says its kept value again as it puts it back: not a new edit)
            if self.note.property("box") == (title, box.textFromValue(value)):
                return
            if (self.note.property("box") or ("",))[0] == title:
                self.note.hide()

        box.refused.connect(refused)
        box.valueChanged.connect(accepted)

    def clear_refusal(self) -> None:
        """Forget what was refused last (a run with the kept values succeeded: the red line under the form
        stayed through later runs, reading as a problem of theirs)."""
        self.note.hide()
        self.note.setProperty("box", None)

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
