"""Formatting a batch's object tables as CSV in a helper process, while the write stage writes the images.

Why a second process: a batch's write stage runs beside its compute stage in one process, and the
object table's CSV is the write stage's one long stretch of Python: thousands of objects a cube, nine
numbers each, formatted while the interpreter is held. Beside it the compute stage waits for the
interpreter. On a campaign of 2 GB cubes (about 5,000 objects a cube) the CSV took 11-14 ms of the write
stage's 19-25 ms of CPU a cube, and the campaign ran at 35.0-37.8 GB/s (RBFN) with it and 39.8-41.8 GB/s
with the table left unformatted (``scripts/profile_stages.py --writes on,nocsv``, one-H200 host).

Here the write stage sends the table's columns (a few hundred KB of NumPy arrays) to the helper first,
writes the score and mask images meanwhile, and then takes the CSV's bytes back and writes them itself:
every file is written in this process, atomically, with the same errors as before. The text is
:func:`hyperapp.models.postprocess.objects_csv`'s, made by the same function there.

The helper is started by a batch (:func:`start`, without waiting for it) and ends with this process.
Until it has said it is ready, and wherever it cannot run or stopped (not Linux, a frozen application,
``HYPERAPP_FORMAT_PROCESS=0``, a killed helper, one that has not answered in :data:`REPLY_TIMEOUT`), the
table is formatted here, as it always was: nothing is lost.

Wire format: request ``(id, columns)``; reply ``(id, bytes)`` (the CSV, UTF-8), or ``(id, None)`` where
formatting failed there (then it is formatted here, and fails here with its own error).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

from hyperapp.reading import helper_process

#: seconds the write stage waits for the helper's next reply before it formats the table itself and lets
#: the helper go (a helper stopped or stuck must not hold a batch up; a table of a million objects takes
#: a few seconds)
REPLY_TIMEOUT = 60.0


def serve(sock_fd: int) -> None:
    """The helper's loop: format each request's table, answer with its bytes; return when the socket
    closes."""
    from multiprocessing.connection import Connection

    from hyperapp.models.postprocess import objects_csv

    conn = Connection(sock_fd)
    conn.send(("ready",))
    while True:
        try:
            rid, table = conn.recv()
        except (EOFError, OSError):
            return
        try:
            text = objects_csv(table).encode("utf-8")
        except Exception:  # noqa: BLE001  (formatted again in the parent, which raises its own error)
            text = None
        try:
            conn.send((rid, text))
        except OSError:
            return


class FormatProcess:
    """A started helper: :meth:`submit` a table, then take its CSV from what it returns."""

    def __init__(self):
        self._proc, self._conn = helper_process.start("hyperapp.detect.format_process")
        self.ready = False
        self.broken = False
        self._next = 0
        self._replies: dict[int, bytes | None] = {}
        self._send = threading.Lock()
        self._recv = threading.Lock()

    def usable(self) -> bool:
        """Whether the helper has said it is ready (without waiting for it) and has not stopped."""
        if self.ready or self.broken:
            return self.ready and not self.broken
        with self._recv:
            try:
                if self._conn.poll(0):
                    self.ready = self._conn.recv() == ("ready",)
            except (EOFError, OSError):
                self.broken = True
        return self.ready and not self.broken

    def submit(self, table) -> int:
        with self._send:
            rid, self._next = self._next, self._next + 1
            self._conn.send((rid, table))
        return rid

    def take(self, rid: int) -> bytes | None:
        """The CSV of request ``rid``; None where the helper stopped or could not format it."""
        with self._recv:
            while rid not in self._replies:
                if self.broken:
                    return None
                try:
                    if not self._conn.poll(REPLY_TIMEOUT):
                        raise TimeoutError
                    got, text = self._conn.recv()
                except (EOFError, OSError):  # TimeoutError is an OSError
                    self.broken = True
                    return None
                self._replies[got] = text
            return self._replies.pop(rid)

    def close(self) -> None:
        self.broken = True
        helper_process.end(self._proc, self._conn)


_HELPER: FormatProcess | None = None
_LOCK = threading.Lock()


def available() -> bool:
    """Whether a formatting helper may run here (not turned off by ``HYPERAPP_FORMAT_PROCESS=0``)."""
    return (os.environ.get("HYPERAPP_FORMAT_PROCESS", "1").strip() != "0" and sys.platform.startswith("linux")
            and helper_process.can_start())


def start() -> None:
    """Start this process's helper unless it runs or cannot (not waiting for it to be ready)."""
    global _HELPER
    if not available():
        return
    with _LOCK:
        if _HELPER is None or _HELPER.broken:
            try:
                _HELPER = FormatProcess()
            except OSError:
                _HELPER = None


def stop() -> None:
    """End this process's helper (tests; it otherwise ends with the process)."""
    global _HELPER
    with _LOCK:
        if _HELPER is not None:
            _HELPER.close()
            _HELPER = None


def objects_csv_later(table) -> Callable[[], bytes]:
    """Start formatting the object table ``table`` (:func:`hyperapp.models.postprocess.objects_csv`,
    columns or rows) as CSV; the function returned gives its UTF-8 bytes. In the helper where one is
    ready, else here when called."""
    from hyperapp.models.postprocess import objects_csv

    helper = _HELPER
    if helper is not None and available() and helper.usable():
        try:
            rid = helper.submit(table)
        except (OSError, ValueError):
            helper.broken = True
        else:
            def done() -> bytes:
                text = helper.take(rid)
                return objects_csv(table).encode("utf-8") if text is None else text

            return done
    return lambda: objects_csv(table).encode("utf-8")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
