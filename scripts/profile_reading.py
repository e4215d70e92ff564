"""Why one cube's read stays below the page cache's rate: host-only read rates of the same cached files
by several strategies, to tell the file, the destination memory, the piece size and the thread count
apart.

    python3 scripts/profile_reading.py [--cubes N] [--dir DIR]

Writes ``N`` campaign cubes (2048 x 2048 x 128 float32, as the campaign bench case does) into ``DIR``
unless they are there, brings them into the page cache, then prints GB/s of:

- every file at once, a thread each, into a 64 MB pageable buffer per thread (the bench's reference), and
  into page-locked buffers;
- one file at a time, its 16 stripes on 16 threads in 64 MB pieces, into pageable and page-locked buffers;
- :class:`hyperapp.reading.tiles.TileReader` (raw tiles into its page-locked ring) with several tile sizes and
  thread counts;
- where there is a GPU: copies from one page-locked buffer to the GPU, and whole cubes onto the GPU
  (:func:`hyperapp.detect.run.load_pixels`) by tile size, alone and beside a thread running Python (as a
  batch's compute stage does beside its read stage).
"""

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hyperapp.bench.campaign import campaign_files, parallel_read_s
from hyperapp.core.backend import empty_pinned
from hyperapp.io import open_cube
from hyperapp.reading import tiles as stream

ap = argparse.ArgumentParser()
ap.add_argument("--cubes", type=int, default=8)
ap.add_argument("--dir", default="/tmp/hyperapp-reading-profile")
ap.add_argument("--helper", action="store_true",
                help="only whole cubes onto the GPU (256 MB tiles), read in this process against the reading "
                     "helper process, alone and beside a thread running Python")
a = ap.parse_args()
d = Path(a.dir)
hdrs, gb = campaign_files(d, a.cubes)
imgs = [h.with_suffix(".img") for h in hdrs]
THREADS, PIECE = 16, 64 << 20


def rate(label: str, fn, repeats: int = 2) -> None:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    print(f"{label}: {gb / best:.1f} GB/s", flush=True)


print(f"{len(imgs)} cubes, {gb:.1f} GB, {os.cpu_count()} cores")
rate("every file at once, pageable 64 MB buffers (the bench's reference)", lambda: parallel_read_s(imgs), 1)
if a.helper:
    import sys
    import threading

    from hyperapp.core.backend import get_backend
    from hyperapp.core.progress import Progress
    from hyperapp.detect.run import load_pixels

    backend = get_backend("gpu")
    stop = threading.Event()

    def gpu_load(helper: bool) -> None:
        for h in hdrs:
            X = load_pixels(open_cube(h), backend, Progress(), tile_bytes=256 << 20, helper=helper)
            backend.synchronize()
            del X

    def python_work() -> None:
        b = np.ones(64)
        while not stop.is_set():
            for _ in range(1000):
                b = b + 1.0

    sys.setswitchinterval(0.0005)
    for helper in (False, True):
        gpu_load(helper)  # rings pinned, helper started
        rate(f"onto the GPU, 256 MB tiles, helper process {helper}", lambda h=helper: gpu_load(h))
    busy = threading.Thread(target=python_work, daemon=True)
    busy.start()
    for helper in (False, True, False, True):
        rate(f"onto the GPU, 256 MB tiles, helper process {helper}, beside a thread running Python",
             lambda h=helper: gpu_load(h))
    stop.set()
    raise SystemExit(0)
pinned = [empty_pinned((PIECE,), np.uint8) for _ in range(THREADS)]
pageable = [np.empty(PIECE, np.uint8) for _ in range(THREADS)]


def read_range(fd: int, buf: np.ndarray, start: int, stop: int) -> None:
    mv = memoryview(buf).cast("B")
    while start < stop:
        n = os.preadv(fd, [mv[: min(PIECE, stop - start)]], start)
        if n <= 0:
            raise OSError("short read")
        start += n


def whole_files(bufs) -> None:
    def one(k: int) -> None:
        fd = os.open(imgs[k], os.O_RDONLY)
        try:
            read_range(fd, bufs[k % THREADS], 0, imgs[k].stat().st_size)
        finally:
            os.close(fd)
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(one, range(len(imgs))))


def stripes(bufs, threads: int = THREADS) -> None:
    with ThreadPoolExecutor(threads) as pool:
        for p in imgs:
            size = p.stat().st_size
            fd = os.open(p, os.O_RDONLY)
            cuts = np.linspace(0, size, threads + 1).astype(np.int64)
            list(pool.map(lambda k, fd=fd, cuts=cuts: read_range(fd, bufs[k], int(cuts[k]), int(cuts[k + 1])),
                          range(threads)))
            os.close(fd)


rate("every file at once, page-locked 64 MB buffers", lambda: whole_files(pinned))
rate("every file at once, pageable 64 MB buffers (preadv)", lambda: whole_files(pageable))
rate("one file at a time, 16 stripes, pageable", lambda: stripes(pageable))
rate("one file at a time, 16 stripes, page-locked", lambda: stripes(pinned))


def tiles(tile_mb: int) -> None:
    for h in hdrs:
        r = stream.TileReader(open_cube(h), tile_mb << 20, pinned=True)
        for t in r:
            r.release(t)


for threads in (16, 32):
    stream.COPY_THREADS, stream._POOL = threads, ThreadPoolExecutor(threads)
    for tile_mb in (16, 64, 256):
        rate(f"TileReader, {tile_mb} MB tiles, {threads} threads, page-locked ring", lambda t=tile_mb: tiles(t))


stream.COPY_THREADS, stream._POOL = 16, ThreadPoolExecutor(16)
try:
    import cupy
except ImportError:
    cupy = None
if cupy is not None and cupy.cuda.runtime.getDeviceCount() > 0:
    import threading

    from hyperapp.core.backend import get_backend
    from hyperapp.core.progress import Progress
    from hyperapp.detect.run import load_pixels

    dev = cupy.empty(PIECE, np.uint8)
    s = cupy.cuda.Stream(non_blocking=True)
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(32):
            dev.set(pinned[0], stream=s)
        s.synchronize()
        w = time.perf_counter() - t0
    print(f"page-locked 64 MB -> GPU copies: {32 * PIECE / w / 1e9:.1f} GB/s", flush=True)
    del dev
    backend = get_backend("gpu")

    def onto_gpu(tile_mb: int) -> None:
        for h in hdrs:
            X = load_pixels(open_cube(h), backend, Progress(), tile_bytes=tile_mb << 20)
            backend.synchronize()
            del X

    for tile_mb in (16, 64, 256):
        onto_gpu(tile_mb)  # the ring's page-locked buffers pinned once
        rate(f"onto the GPU (load_pixels), {tile_mb} MB tiles", lambda t=tile_mb: onto_gpu(t))
    stop = threading.Event()

    def python_work() -> None:
        a = np.ones(64)
        while not stop.is_set():
            for _ in range(1000):
                a = a + 1.0

    import sys

    busy = threading.Thread(target=python_work, daemon=True)
    busy.start()
    for switch in (0.0005, 0.0001, 0.00002):  # the batch pipeline's interval (0.5 ms), and shorter
        sys.setswitchinterval(switch)
        for tile_mb in (64, 256):
            rate(f"onto the GPU (load_pixels), {tile_mb} MB tiles, beside a thread running Python, switch "
                 f"interval {switch * 1e3:g} ms", lambda t=tile_mb: onto_gpu(t), repeats=1)
    stop.set()
