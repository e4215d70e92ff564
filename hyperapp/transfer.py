"""Moving a cube onto the GPU at the bus's speed, and the pixel checks that run where the pixels are.

The reading itself is :mod:`hyperapp.stream`: raw tiles read ahead into page-locked buffers, copied
asynchronously and converted (byte order, interleave, bands, float32, no data) on the device.
"""

from __future__ import annotations

from hyperapp.jobs import NULL_PROGRESS, Progress


def cube_to_device(cube, progress: Progress = NULL_PROGRESS):
    """The cube's pixels as a float32 (rows, cols, bands) CuPy array, no-data pixels NaN (the raw
    tiles staged through pinned memory and converted on the device: :func:`hyperapp.stream.read_float32`)."""
    import cupy

    from hyperapp.stream import read_float32

    return read_float32(cube, cupy, progress)
