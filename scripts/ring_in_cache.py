"""Does the GPU read a page-locked buffer from the CPU's cache when it copies it right after it was written?

    python3 scripts/ring_in_cache.py DIR

DIR holds a campaign's cubes (``*.img``). Threads copy the files out of the page cache into page-locked
slots of their own and, each slot once full, copy it to the GPU at once, cycling through K slots of S MB
per thread. When the slots of all threads together fit in the last-level cache, the GPU's copy may find
the bytes there instead of in memory (a batch's reader writes 1 GB of ring before the GPU reads it). Prints
GB/s for several slot sizes against the same reads without the GPU's copies.
"""
from __future__ import annotations

import glob
import os
import sys
import threading
import time

import cupy
import numpy as np

MB = 1 << 20


def run(paths: list[str], threads: int, slot_mb: int, slots: int, gpu: bool) -> float:
    size = os.path.getsize(paths[0])
    s = slot_mb * MB
    work = [(p, o) for p in paths for o in range(0, size, s)]
    shares = [work[i::threads] for i in range(threads)]
    go = threading.Barrier(threads + 1)
    done = []

    def one(share):
        cupy.cuda.Device(0).use()
        host = np.ones(slots * s, np.uint8)
        view = memoryview(host).cast("B")
        rt = cupy.cuda.runtime
        if gpu:
            rt.hostRegister(host.ctypes.data, host.nbytes, 0)
            dev = cupy.empty(slots * s, np.uint8)
            stream = cupy.cuda.Stream(non_blocking=True)
            events = [None] * slots
        fds = {}
        go.wait()
        n = 0
        for i, (p, o) in enumerate(share):
            k = i % slots
            if gpu and events[k] is not None:
                events[k].synchronize()
            fd = fds.get(p) or fds.setdefault(p, os.open(p, os.O_RDONLY))
            got = os.preadv(fd, [view[k * s:(k + 1) * s]], o)
            n += got
            if gpu:
                rt.memcpyAsync(dev.data.ptr + k * s, host.ctypes.data + k * s, got, rt.memcpyHostToDevice, stream.ptr)
                events[k] = stream.record()
        if gpu:
            stream.synchronize()
            rt.hostUnregister(host.ctypes.data)
        for fd in fds.values():
            os.close(fd)
        done.append(n)

    ts = [threading.Thread(target=one, args=(sh,)) for sh in shares]
    for t in ts:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return sum(done) / (time.perf_counter() - t0) / 1e9


def main() -> None:
    d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ps/cubes"
    paths = sorted(glob.glob(os.path.join(d, "*.img")))
    run(paths[:2], 12, 16, 2, True)  # warm-up: contexts, pools, page cache
    for threads, slot_mb, slots in ((12, 4, 2), (12, 8, 2), (12, 16, 2), (12, 32, 2), (12, 64, 2), (12, 8, 4),
                                    (16, 8, 2), (16, 64, 2), (12, 4, 2), (12, 64, 2)):
        ring = threads * slot_mb * slots
        g = run(paths, threads, slot_mb, slots, True)
        c = run(paths, threads, slot_mb, slots, False)
        print(f"{threads} threads, {slots} slots of {slot_mb} MB each ({ring} MB in all): to the GPU {g:.1f} GB/s, "
              f"host only {c:.1f} GB/s", flush=True)


if __name__ == "__main__":
    main()
