"""The error hierarchy of hyperapp.

Every error a user can cause (a bad file, a bad option, a model that does not fit the cube) is a
:class:`HyperappError`. Each class also inherits the builtin that a caller would expect
(``FileNotFoundError``, ``ValueError``, ``OSError``), so code that does not know hyperapp can still
catch it. The message is one line that names the file (when there is one) and the problem: the CLI
prints it and exits 2, the GUI shows it in a dialog.
"""

from __future__ import annotations

import os
from contextlib import contextmanager


def one_line(text: str) -> str:
    """``text`` as one printable line: a character that is not printable (a newline in a file's name, a
    control byte or undecodable bytes quoted from a binary file) is written as its escape (``\\n``,
    ``\\x19``), so an error can neither break over lines nor send control codes to a terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class HyperappError(Exception):
    """Base of every error hyperapp reports to a user as one line (:func:`one_line`)."""

    def __init__(self, message: str, path: str | os.PathLike | None = None):
        self.path = None if path is None else os.fspath(path)
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:  # OSError subclasses would otherwise format errno/filename
        return one_line(f"{self.path}: {self.message}" if self.path else self.message)


class CubeNotFoundError(HyperappError, FileNotFoundError):
    """A cube, header, data file, mask or model file that does not exist."""


class CubeFormatError(HyperappError, ValueError):
    """A file that exists but cannot be read as what it claims to be."""


class InputError(HyperappError, ValueError):
    """Bad user input: masks of the wrong shape, pixels outside the image, bad options."""


class OutputError(HyperappError, OSError):
    """An output that cannot be written (folder not writable, disk full)."""


class BackendError(HyperappError, RuntimeError):
    """The requested compute device is not available."""


class ModelError(HyperappError, ValueError):
    """A model that cannot be trained or applied (no targets, wrong band count, bad saved file)."""


class Cancelled(Exception):
    """Raised inside long work when the user cancelled it. Not an error: nothing is written."""


@contextmanager
def about(path: str | os.PathLike | None, kinds: tuple | None = None):
    """Errors raised inside about the data (an :class:`InputError` or :class:`ModelError`, or only the
    ``kinds`` given, with no file of its own) are about ``path``, the cube the work reads: the CLI's line
    then names it ("the mean target spectrum is all zeros" said nothing of which cube)."""
    caught = kinds if kinds is not None else (InputError, ModelError)
    try:
        yield
    except caught as exc:
        if exc.path is None and path:
            exc.path = os.fspath(path)
        raise
