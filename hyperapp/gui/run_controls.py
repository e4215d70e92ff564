"""Run and Cancel buttons, a progress bar and a status line: the controls every long-running tool has.

A tool's page is its form in a scroll area with this strip below it, outside the scroll area (QGIS's
``AlgorithmDialogBase``): however tall the form and however small the window, Run, Cancel and the
progress stay on screen once the tool is chosen.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)


def scrolled(widget: QWidget) -> QScrollArea:
    """``widget`` in a frameless scroll area, so a tall form never forces its dock (and the window) taller."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # forms wrap, never scroll sideways
    area.setWidget(widget)
    return area


#: the progress bar's text while no job runs
IDLE = "progress (no job running)"


def run_strip(owner, run_text: str = "Run") -> QWidget:
    """A strip with Run, Cancel, the progress bar and the status line; sets ``owner.run_button``,
    ``cancel_button``, ``progress`` and ``status``."""
    strip = QFrame()
    strip.setFrameShape(QFrame.Shape.StyledPanel)
    lay = QVBoxLayout(strip)
    lay.setContentsMargins(6, 4, 6, 4)
    row = QHBoxLayout()
    owner.run_button = QPushButton(run_text)
    owner.run_button.setDefault(True)
    owner.cancel_button = QPushButton("Cancel")
    owner.cancel_button.setToolTip("Stop the running job (Esc stops every one); nothing of it is kept")
    owner.cancel_button.setEnabled(False)
    owner.progress = QProgressBar()
    owner.progress.setRange(0, 1000)
    owner.progress.setFormat(IDLE)  # says what the bar is while it is empty
    owner.progress.setToolTip("no job running")
    row.addWidget(owner.run_button)
    row.addWidget(owner.cancel_button)
    row.addWidget(owner.progress, 1)
    lay.addLayout(row)
    owner.status = QLabel("")
    owner.status.setWordWrap(True)
    owner.status.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
    lay.addWidget(owner.status)
    strip.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
    owner.run_strip = strip
    return strip


def method_row(form: QFormLayout, combo: QComboBox) -> None:
    """Add the method list to ``form`` under a "Method" line, as wide as the tool: method names are
    long ("TCIMF (target-constrained interference min.)") and a list beside its label would cut them."""
    form.addRow(QLabel("Method"))
    form.addRow(combo)
    combo.currentTextChanged.connect(combo.setToolTip)


def narrow_editors(body: QWidget) -> None:
    """Let the editors of ``body`` (and of forms rebuilt in it later) shrink to the toolbox's width: a
    spin box's size hint comes from its range (a billion is wide), which would clip the form."""
    for w in body.findChildren(QWidget):
        if isinstance(w, (QComboBox, QAbstractSpinBox, QLineEdit)):
            w.setSizePolicy(QSizePolicy.Policy.Ignored, w.sizePolicy().verticalPolicy())
            w.setMinimumWidth(90)


def tool_page(owner: QWidget, body: QWidget, run_text: str = "Run") -> None:
    """Lay ``owner`` out as a tool page: ``body`` scrolled, the run strip fixed below it."""
    narrow_editors(body)
    outer = QVBoxLayout(owner)
    outer.setContentsMargins(0, 0, 0, 0)
    outer.setSpacing(2)
    owner.scroll_area = scrolled(body)
    outer.addWidget(owner.scroll_area, 1)
    outer.addWidget(run_strip(owner, run_text))


def set_busy(owner, busy: bool) -> None:
    """Enable Cancel while a run goes, Run otherwise; the progress bar starts empty and is emptied again
    when the run ends (finished, failed or cancelled), so a full bar never stands for a run long over."""
    owner.run_button.setEnabled(not busy)
    owner.cancel_button.setEnabled(busy)
    owner.progress.setValue(0)
    owner.progress.setFormat("%p %" if busy else IDLE)
    owner.progress.setToolTip("progress of the running job" if busy else "no job running")


def show_progress(owner, fraction: float, message: str) -> None:
    owner.progress.setValue(int(fraction * 1000))
    owner.status.setText(message)
