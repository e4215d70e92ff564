"""Moving a cube onto the GPU at the bus's speed, and the pixel checks that run where the pixels are.

The reading itself is :mod:`hyperapp.stream`: raw tiles read ahead into page-locked buffers, copied
asynchronously and converted (byte order, interleave, bands, float32, no data) on the device.
"""

from __future__ import annotations

import numpy as np

from hyperapp.errors import InputError
from hyperapp.jobs import NULL_PROGRESS, Progress


def cube_to_device(cube, progress: Progress = NULL_PROGRESS):
    """The cube's pixels as a float32 (rows, cols, bands) CuPy array, no-data pixels NaN (the raw
    tiles staged through pinned memory and converted on the device: :func:`hyperapp.stream.read_float32`)."""
    import cupy

    from hyperapp.stream import read_float32

    return read_float32(cube, cupy, progress)


def check_pixels_finite(data, path=None) -> None:
    """Raise, naming the first bad pixel, when a (rows, cols, bands) array holds NaN or Inf; the test
    runs on the device the array is on."""
    from hyperapp.backend import get_namespace

    xp = get_namespace(data)
    bad = ~xp.isfinite(data).all(axis=2)
    if bool(bad.any()):
        n = int(bad.sum())
        r, c = (int(v) for v in np.unravel_index(int(xp.flatnonzero(bad)[0]), bad.shape))
        raise InputError(f"{n} pixel(s) hold NaN or Inf values (first at row {r}, col {c})", path)

