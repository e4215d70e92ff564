"""Byte ranges of a file read into a buffer: the one primitive the tile reader and its helper processes
share. Standard library only, so a helper process starts without NumPy."""

from __future__ import annotations

import os


class ShortRead(Exception):
    """The file ended before a range did."""


def ended_early(path: str):
    """The cube's one-line error for a data file shorter than its header says (cut while being read)."""
    from hyperapp.core.errors import CubeFormatError

    return CubeFormatError("the data file ended early (was it truncated while being read?)", path)


def read_ranges(fd: int, buf: memoryview, ranges: list[tuple[int, int, int]]) -> None:
    """``buf[b:b + n] = file[f:f + n]`` for each ``(b, f, n)`` of ``ranges``, through ``os.preadv``
    (which releases the interpreter while the kernel copies). Raises :class:`ShortRead` where the file
    ends early."""
    for b, f, n in ranges:
        while n > 0:
            got = os.preadv(fd, [buf[b:b + n]], f)
            if got <= 0:
                raise ShortRead
            b, f, n = b + got, f + got, n - got


def split_ranges(ranges: list[tuple[int, int, int]], parts: int) -> list[list[tuple[int, int, int]]]:
    """``ranges`` (buffer offset, file offset, bytes) cut into ``parts`` lists of about equal bytes."""
    total = sum(n for _, _, n in ranges)
    share = max(1 << 20, -(-total // max(parts, 1)))
    groups: list[list[tuple[int, int, int]]] = [[]]
    room = share
    for b, f, n in ranges:
        while n > 0:
            take = min(n, room)
            groups[-1].append((b, f, take))
            b, f, n, room = b + take, f + take, n - take, room - take
            if room == 0:
                groups.append([])
                room = share
    return [g for g in groups if g]
