"""Counts in words for people: the window, the command line's summary and the reports' lines say
"1 object" and "2 objects" with one function."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``counted(1, "object")`` is "1 object",
    ``counted(0, "pixel")`` "0 pixels" (``plural``: where adding an s is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
