"""Progress and cancellation for long work, shared by the GUI workers and the headless CLI.

Long computations take a :class:`Progress` and call it between units of work (a tile, an epoch, a
level of the window tree). The GUI's worker passes one that emits Qt signals and whose ``cancel()`` is
wired to the Cancel button; the CLI passes one that draws a text bar. Calling it after ``cancel()``
raises :class:`~hyperapp.errors.Cancelled`, so the work stops at the next unit and writes nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from hyperapp.errors import Cancelled


class Progress:
    """A progress sink with a cancel flag.

    Parameters
    ----------
    callback : callable(fraction, message), optional
        Receives each update; ``fraction`` is in [0, 1].
    """

    def __init__(self, callback: Callable[[float, str], None] | None = None):
        self.callback = callback
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` if the user cancelled."""
        if self._cancel.is_set():
            raise Cancelled()

    def __call__(self, fraction: float, message: str = "") -> None:
        self.check()
        if self.callback is not None:
            self.callback(min(max(float(fraction), 0.0), 1.0), message)

    def sub(self, start: float, stop: float) -> Progress:
        """A child whose [0, 1] maps onto [start, stop] of this one, sharing the cancel flag."""
        parent = self
        child = Progress(lambda f, m: parent(start + (stop - start) * f, m))
        child._cancel = parent._cancel
        return child


NULL_PROGRESS = Progress()


def text_progress(stream=None) -> Progress:
    """A Progress that draws a one-line bar on a terminal; elsewhere nothing, or one line per stage when
    ``HYPERAPP_PROGRESS=lines`` (for logs, and for whoever watches a batch run)."""
    import os

    stream = sys.stderr if stream is None else stream
    tty = hasattr(stream, "isatty") and stream.isatty()
    lines = os.environ.get("HYPERAPP_PROGRESS") == "lines"
    last = [""]

    def draw(fraction: float, message: str) -> None:
        if not tty:
            if lines and message != last[0]:
                last[0] = message
                stream.write(f"hyperapp: {fraction * 100:5.1f}% {message}\n")
                stream.flush()
            return
        n = int(fraction * 30)
        stream.write(f"\r[{'#' * n}{'.' * (30 - n)}] {fraction * 100:5.1f}% {message[:40]:<40}")
        if fraction >= 1.0:
            stream.write("\n")
        stream.flush()

    return Progress(draw)
