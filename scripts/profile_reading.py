"""Why one cube's read stays below the page cache's rate: host-only read rates of the same cached files
by several strategies, to tell the file, the destination memory, the piece size and the thread count
apart.

    python3 scripts/profile_reading.py [--cubes N] [--dir DIR]

Writes ``N`` campaign cubes (2048 x 2048 x 128 float32, as the campaign bench case does) into ``DIR``
unless they are there, brings them into the page cache, then prints GB/s of:

- every file at once, a thread each, into a 64 MB pageable buffer per thread (the bench's reference), and
  into page-locked buffers;
- one file at a time, its 16 stripes on 16 threads in 64 MB pieces, into pageable and page-locked buffers;
- :class:`hyperapp.stream.TileReader` (raw tiles into its page-locked ring) with several tile sizes and
  thread counts.
"""

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hyperapp import stream
from hyperapp.backend import empty_pinned
from hyperapp.bench.campaign import CAMPAIGN_SHAPE, _write_campaign, parallel_read_s, settle_writes
from hyperapp.io import open_cube

ap = argparse.ArgumentParser()
ap.add_argument("--cubes", type=int, default=8)
ap.add_argument("--dir", default="/tmp/hyperapp-reading-profile")
a = ap.parse_args()
d = Path(a.dir)
(d / "cubes").mkdir(parents=True, exist_ok=True)
hdrs = sorted((d / "cubes").glob("*.hdr"))[: a.cubes]
if len(hdrs) < a.cubes:
    hdrs = _write_campaign(d / "cubes", a.cubes, CAMPAIGN_SHAPE)
settle_writes()
imgs = [h.with_suffix(".img") for h in hdrs]
gb = sum(p.stat().st_size for p in imgs) / 1e9
THREADS, PIECE = 16, 64 << 20


def rate(label: str, fn, repeats: int = 2) -> None:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    print(f"{label}: {gb / best:.1f} GB/s", flush=True)


print(f"{len(imgs)} cubes, {gb:.1f} GB, {os.cpu_count()} cores")
rate("every file at once, pageable 64 MB buffers (the bench's reference)", lambda: parallel_read_s(imgs, repeats=1), 1)
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
