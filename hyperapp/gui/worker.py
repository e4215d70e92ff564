"""Run long work off the UI thread, with progress, a Cancel that stops it, and one error route.

A :class:`Worker` wraps a function ``fn(progress)``; ``progress`` is a :class:`hyperapp.core.progress.Progress`
whose callback emits the ``progress`` signal and whose ``cancel()`` makes the function raise
:class:`~hyperapp.core.errors.Cancelled` at its next progress call. The worker runs in the global
``QThreadPool``; its signals arrive in the UI thread.
"""

from __future__ import annotations

import logging
import traceback

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from hyperapp.core.errors import Cancelled, HyperappError
from hyperapp.core.progress import Progress

log = logging.getLogger("hyperapp.gui")


class WorkerSignals(QObject):
    progress = Signal(float, str)
    result = Signal(object)
    error = Signal(str)
    cancelled = Signal()
    finished = Signal()


class Worker(QRunnable):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.signals = WorkerSignals()
        self.progress = Progress(lambda f, m: self.signals.progress.emit(f, m))
        self.setAutoDelete(False)

    def cancel(self) -> None:
        self.progress.cancel()

    def run(self) -> None:
        try:
            out = self.fn(self.progress)
        except Cancelled:
            self.signals.cancelled.emit()
        except HyperappError as exc:
            self.signals.error.emit(str(exc))
        except Exception as exc:  # an internal error: logged with its traceback, shown in one line
            log.error("internal error in a worker:\n%s", traceback.format_exc())
            self.signals.error.emit(f"internal error: {exc.__class__.__name__}: {exc}")
        else:
            self.signals.result.emit(out)
        finally:
            self.signals.finished.emit()


def start(worker: Worker) -> Worker:
    QThreadPool.globalInstance().start(worker)
    return worker
