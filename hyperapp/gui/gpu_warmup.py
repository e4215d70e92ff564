"""The window's GPU warm-up: every kernel compiled in the background when the window opens, with a line
in the status bar until it is done (:func:`hyperapp.batch.prepare_gpu.start_background`, the same work as
``hyperapp --headless prepare-gpu``). Nothing happens without a GPU, once the installation's kernels
are prepared, or with ``HYPERAPP_GPU_WARMUP=0`` (the test suite sets it)."""

from __future__ import annotations

import os
import threading

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QLabel, QMainWindow


class GpuWarmup(QObject):
    """Carries the warm-up thread's progress to a label in the window's status bar (queued signals)."""

    progress = Signal(float, str)
    done = Signal(str)

    def __init__(self, window: QMainWindow):
        super().__init__(window)
        self.window = window
        self.label = QLabel("")
        self.finished = False
        self.progress.connect(self._show)
        self.done.connect(self._finish)

    def _show(self, share: float, task: str) -> None:
        if not self.label.parent():
            self.window.statusBar().addPermanentWidget(self.label)
        self.label.setText(f"Preparing GPU kernels (once per installation): {share * 100:.0f}%, {task}")

    def _finish(self, line: str) -> None:
        self.finished = True
        if not line:
            return
        if not self.label.parent():
            self.window.statusBar().addPermanentWidget(self.label)
        self.label.setText(line)
        QTimer.singleShot(15000, lambda: self.window.statusBar().removeWidget(self.label))


def start_gpu_warmup(window: QMainWindow) -> GpuWarmup | None:
    """Start the warm-up for ``window`` (see the module); returns its signal carrier, or None when off."""
    if os.environ.get("HYPERAPP_GPU_WARMUP", "1") == "0":
        return None
    from hyperapp.batch.prepare_gpu import start_background

    w = GpuWarmup(window)
    w.thread = start_background(w.progress.emit, w.done.emit)
    return w


def prepare_session(window: QMainWindow, session, device: str) -> threading.Thread | None:
    """The open cube's preparation on the GPU (:func:`hyperapp.project.session.prepare_in_background`: its
    pixels onto the device, every method's modules loaded into this process), once the installation's
    warm-up, where one runs, is done. Nothing on the CPU or with ``HYPERAPP_GPU_WARMUP=0``."""
    if os.environ.get("HYPERAPP_GPU_WARMUP", "1") == "0" or device == "cpu":
        return None
    from hyperapp.project.session import prepare_in_background

    return prepare_in_background(session, device, getattr(getattr(window, "gpu_warmup", None), "thread", None))
