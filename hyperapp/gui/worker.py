"""Run long work off the UI thread, with progress, a Cancel that stops it, and one error route.

A :class:`Worker` wraps a function ``fn(progress)``; ``progress`` is a :class:`hyperapp.core.progress.Progress`
whose callback emits the ``progress`` signal and whose ``cancel()`` makes the function raise
:class:`~hyperapp.core.errors.Cancelled` at its next progress call. Each worker runs on a Python thread of
its own; its signals arrive in the UI thread (queued: they are emitted from another thread).

Not Qt's thread pool: pyproj 3.7 keeps a PROJ context per thread in storage it does not clear for threads
Python did not create, and a second run on a pooled Qt thread placed an object on Earth with the freed
context of the first, a segmentation fault (pyproj issues 1509 and 1541).
"""

from __future__ import annotations

import logging
import threading
import traceback

from PySide6.QtCore import QObject, Signal

from hyperapp.core.errors import Cancelled, HyperappError
from hyperapp.core.progress import Progress

log = logging.getLogger("hyperapp.gui")


class WorkerSignals(QObject):
    progress = Signal(float, str)
    result = Signal(object)
    error = Signal(str)
    cancelled = Signal()
    finished = Signal()


class Worker:
    def __init__(self, fn):
        self.fn = fn
        self.signals = WorkerSignals()
        self.progress = Progress(lambda f, m: self.signals.progress.emit(f, m))
        self.thread: threading.Thread | None = None
        #: the window's session (the cube) it runs on, where it runs on one (:func:`while_shown`)
        self.session = None

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


def while_shown(worker: Worker, host, fn):
    """``fn``, called only while ``host`` (the window) still shows the cube ``worker`` runs on
    (``worker.session``): a run of the last cube, cancelled when another opened, said "cancelled" (or
    drew its result) over the new cube's."""
    return lambda *args: fn(*args) if worker.session is host.session else None


#: the workers started and not yet finished (tests and the window's close wait for them)
RUNNING: set[threading.Thread] = set()


def start(worker: Worker) -> Worker:
    """Run ``worker`` on a new Python thread (see the module for why not Qt's pool)."""
    def run() -> None:
        try:
            worker.run()
        finally:
            RUNNING.discard(threading.current_thread())

    worker.thread = threading.Thread(target=run, name="hyperapp-worker", daemon=True)
    RUNNING.add(worker.thread)
    worker.thread.start()
    return worker


def wait_for_workers(timeout: float = 20.0) -> None:
    """Wait (at most ``timeout`` seconds in all) for the running workers to end."""
    import time

    end = time.monotonic() + timeout
    for t in list(RUNNING):
        t.join(max(0.0, end - time.monotonic()))
