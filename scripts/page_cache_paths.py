"""Ways of copying files in the page cache into user memory, and their GB/s: ``preadv`` (the bench's
reference and the batch's reader) against mapping the file and copying from the mapping, from threads of
one process and from single-threaded processes.

    python3 scripts/page_cache_paths.py DIR

DIR holds a campaign's cubes (``*.img``). Each way copies every file once to warm up, then is timed over
two passes (best kept). Destination buffers are made and touched beforehand, as the reader's ring is.
"""
from __future__ import annotations

import glob
import mmap
import multiprocessing as mp
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MB = 1 << 20
CHUNK = 64 * MB


def by_preadv(fd: int, size: int, dst: np.ndarray, chunk: int = CHUNK) -> None:
    view = memoryview(dst).cast("B")
    for o in range(0, size, chunk):
        n = min(chunk, size - o)
        got = os.preadv(fd, [view[:n]], o)
        assert got == n


def by_mmap_chunks(fd: int, size: int, dst: np.ndarray, chunk: int = CHUNK) -> None:
    """Each chunk mapped with MAP_POPULATE, copied, unmapped."""
    for o in range(0, size, chunk):
        n = min(chunk, size - o)
        m = mmap.mmap(fd, n, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ, offset=o)
        a = np.frombuffer(m, np.uint8)
        np.copyto(dst[:n], a)
        del a
        m.close()


def by_mmap_whole(fd: int, size: int, dst: np.ndarray, chunk: int = CHUNK, populate: bool = True) -> None:
    """The whole file mapped once (populated, unless ``populate`` is False: then the copy takes the page
    faults), copied a chunk at a time."""
    flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0)
    m = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)
    a = np.frombuffer(m, np.uint8)
    for o in range(0, size, chunk):
        n = min(chunk, size - o)
        np.copyto(dst[:n], a[o:o + n])
    del a
    m.close()


def by_mmap_faulting(fd: int, size: int, dst: np.ndarray, chunk: int = CHUNK) -> None:
    by_mmap_whole(fd, size, dst, chunk, populate=False)


WAYS = {"preadv": by_preadv, "mmap-chunks": by_mmap_chunks, "mmap-whole": by_mmap_whole,
        "mmap-faulting": by_mmap_faulting}


def threads_rate(way: str, paths: list[str], threads: int) -> float:
    local = threading.local()
    f = WAYS[way]

    def one(p):
        dst = getattr(local, "dst", None)
        if dst is None:
            dst = local.dst = np.ones(CHUNK, np.uint8)
        fd = os.open(p, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            f(fd, size, dst)
        finally:
            os.close(fd)
        return size

    return best_pass_rate(one, paths, threads)


def best_pass_rate(one, items: list, threads: int) -> float:
    """GB/s of the best of two passes of ``one`` (which returns bytes) over ``items`` on ``threads``
    threads, after a first pass that warms the page cache and the threads' buffers."""
    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        for i in range(3):
            t0 = time.perf_counter()
            n = sum(pool.map(one, items))
            if i:
                best = max(best, n / (time.perf_counter() - t0) / 1e9)
    return best


def run_together(ctx, target, args_per_process: list[tuple]) -> tuple[list, float]:
    """Start a process of ``target(*args, q, go)`` for each args, let them all go at once when each has
    said it is ready on ``q``, and return (what each put on ``q`` next, wall seconds from the go)."""
    q, go = ctx.Queue(), ctx.Event()
    ps = [ctx.Process(target=target, args=(*args, q, go)) for args in args_per_process]
    for p in ps:
        p.start()
    for _ in ps:
        q.get()
    t0 = time.perf_counter()
    go.set()
    res = [q.get() for _ in ps]
    wall = time.perf_counter() - t0
    for p in ps:
        p.join()
    return res, wall


def _proc(way, paths, q, go):
    dst = np.ones(CHUNK, np.uint8)
    f = WAYS[way]
    q.put("ready")
    go.wait()
    t0 = time.perf_counter()
    n = 0
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        size = os.fstat(fd).st_size
        f(fd, size, dst)
        os.close(fd)
        n += size
    q.put((n, time.perf_counter() - t0))


def procs_rate(way: str, paths: list[str], procs: int) -> float:
    ctx = mp.get_context("fork")
    best = 0.0
    for _ in range(2):
        res, wall = run_together(ctx, _proc, [(way, paths[i::procs]) for i in range(procs)])
        best = max(best, sum(n for n, _ in res) / wall / 1e9)
    return best


def main() -> None:
    d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ps/cubes"
    paths = sorted(glob.glob(os.path.join(d, "*.img")))
    for threads in (12, 16):
        for way in WAYS:
            print(f"{way:14s} {threads:2d} threads: {threads_rate(way, paths, threads):5.1f} GB/s", flush=True)
    for procs in (12, 16):
        for way in ("preadv", "mmap-whole", "mmap-faulting"):
            print(f"{way:14s} {procs:2d} processes: {procs_rate(way, paths, procs):5.1f} GB/s", flush=True)


if __name__ == "__main__":
    main()
