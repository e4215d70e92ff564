"""Moving a cube onto the GPU at the bus's speed: tiles staged through pinned buffers.

The host reads (or converts) a tile of rows into one of two page-locked buffers while the previous
buffer's asynchronous copy to the device runs, so reading and the PCIe transfer overlap; the host copy
of each tile is split over a few threads (NumPy's copy releases the GIL). The NaN/Inf check then runs
on the device, over the resident array, instead of on the host.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hyperapp.errors import InputError
from hyperapp.jobs import NULL_PROGRESS, Progress

STAGE_BYTES = 64 << 20
COPY_THREADS = 4


def _copy_rows(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor) -> None:
    """``dst[:] = src`` (with conversion), split by rows over the pool's threads."""
    parts = np.array_split(np.arange(src.shape[0]), COPY_THREADS)
    futs = [pool.submit(np.copyto, dst[p[0]:p[-1] + 1], src[p[0]:p[-1] + 1], "unsafe") for p in parts if p.size]
    for f in futs:
        f.result()


def cube_to_device(cube, progress: Progress = NULL_PROGRESS):
    """The cube's pixels as a float32 (rows, cols, bands) CuPy array, staged through pinned memory.

    Raises
    ------
    InputError
        When a pixel holds NaN or Inf (checked on the device).
    """
    import cupy
    import cupyx

    out = cupy.empty(cube.shape, cupy.float32)
    rows_per = max(1, STAGE_BYTES // max(1, cube.cols * cube.bands * 4))
    bufs = [cupyx.empty_pinned((rows_per, cube.cols, cube.bands), np.float32) for _ in range(2)]
    done = [None, None]
    stream = cupy.cuda.Stream(non_blocking=True)
    with ThreadPoolExecutor(COPY_THREADS) as pool:
        for i, r0 in enumerate(range(0, cube.rows, rows_per)):
            r1 = min(r0 + rows_per, cube.rows)
            progress(r0 / cube.rows, "moving the cube to the GPU")
            k = i % 2
            if done[k] is not None:
                done[k].synchronize()  # this buffer's last copy has left
            block = cube.read(slice(r0, r1), dtype=None)  # stored values; converted once, into the buffer
            _copy_rows(bufs[k][: r1 - r0], block, pool)
            out[r0:r1].set(bufs[k][: r1 - r0], stream=stream)
            done[k] = stream.record()
    stream.synchronize()
    check_pixels_finite(out, cube.path)
    return out


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

