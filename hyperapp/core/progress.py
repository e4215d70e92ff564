"""Progress and cancellation for long work, shared by the GUI workers and the headless CLI.

Long computations take a :class:`Progress` and call it between units of work (a tile, an epoch, a
level of the window tree). The GUI's worker passes one that emits Qt signals and whose ``cancel()`` is
wired to the Cancel button; the CLI passes one that draws a bar (:class:`ProgressDisplay`, which
batch jobs use for their cubes too). Calling it after ``cancel()``
raises :class:`~hyperapp.core.errors.Cancelled`, so the work stops at the next unit and writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from hyperapp.core.errors import Cancelled


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


class ProgressDisplay:
    """The one progress display of the command line and batch jobs.

    On a terminal (stderr, or the given rich ``console``): rich's bar, redrawn in place (message, bar,
    percent or done-of-total, elapsed time), left on screen when it stops. Elsewhere nothing, or one
    plain line per change of message when ``HYPERAPP_PROGRESS=lines`` (for logs, and for whoever
    watches a run), so a pipe or a test reading stderr sees only what the command itself writes.

    Parameters
    ----------
    total : float
        What "done" counts up to (1.0: a fraction).
    console : rich.console.Console, optional
        Where to draw (default: stderr).
    counted : bool
        Show ``done/total`` (cubes of a batch job) instead of a percentage.
    enabled : bool
        False draws nothing at all (a batch run with no cube to do).

    Used as a context manager: the bar starts on entry and stops on exit; :meth:`progress` gives the
    :class:`Progress` a long computation takes.
    """

    def __init__(self, total: float = 1.0, console=None, counted: bool = False, enabled: bool = True):
        import os
        import sys

        self.total = total
        self.lines = enabled and os.environ.get("HYPERAPP_PROGRESS") == "lines"
        self._out = sys.stderr if console is None else console.file
        self._last: str | None = None
        self._bar = None
        # rich is imported only to draw: a command whose stderr is a pipe starts without it
        tty = console.is_terminal if console is not None else hasattr(self._out, "isatty") and self._out.isatty()
        if enabled and tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn() if counted else TaskProgressColumn(), TimeElapsedColumn(),
                            console=console or Console(stderr=True), transient=False)
            self._task = self._bar.add_task("", total=total)

    def __enter__(self) -> ProgressDisplay:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def show(self, done: float, message: str) -> None:
        """Draw ``done`` (of the total) and ``message``."""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, description=message)
        elif self.lines and message != self._last:
            self._last = message
            self._out.write(f"hyperapp: {100 * done / self.total:5.1f}% {message}\n")
            self._out.flush()

    def progress(self) -> Progress:
        """A :class:`Progress` whose fractions this display draws."""
        return Progress(lambda fraction, message: self.show(fraction * self.total, message))
