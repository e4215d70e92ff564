"""Run and Cancel buttons, a progress bar and a status line: the controls every long-running dock has."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout


def add_run_controls(owner, layout: QVBoxLayout, run_text: str = "Run") -> None:
    """Give ``owner`` ``run_button``, ``cancel_button``, ``progress`` and ``status``, laid out at the end
    of ``layout``."""
    row = QHBoxLayout()
    owner.run_button = QPushButton(run_text)
    owner.cancel_button = QPushButton("Cancel")
    owner.cancel_button.setEnabled(False)
    row.addWidget(owner.run_button)
    row.addWidget(owner.cancel_button)
    layout.addLayout(row)
    owner.progress = QProgressBar()
    owner.progress.setRange(0, 1000)
    owner.status = QLabel("")
    owner.status.setWordWrap(True)
    layout.addWidget(owner.progress)
    layout.addWidget(owner.status)
    layout.addStretch(1)


def set_busy(owner, busy: bool) -> None:
    owner.run_button.setEnabled(not busy)
    owner.cancel_button.setEnabled(busy)
    if busy:
        owner.progress.setValue(0)


def show_progress(owner, fraction: float, message: str) -> None:
    owner.progress.setValue(int(fraction * 1000))
    owner.status.setText(message)
