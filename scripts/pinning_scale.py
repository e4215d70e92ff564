"""Aggregate rate of page-locking files in the page cache and copying them to the GPU, from 1 to 6 processes.

    python3 scripts/pinning_scale.py DIR

Reads the ``*.img`` files of DIR (a campaign's cubes, for example ``profile_stages.py``'s) into the page
cache, then has P processes each map its share read-only, page-lock it a chunk at a time, copy each
chunk to the GPU and unlock it, and prints the aggregate GB/s. Measured on an H200 host
(docs/performance.md, 2026-11-26): 24 GB/s from one process, 28 from three, 35 from six: the locking
does not scale over processes.
"""
import glob
import mmap
import multiprocessing as mp
import os
import sys
import time

import numpy as np
from page_cache_paths import run_together


def worker(paths, chunk, lag, q, go):
    import cupy
    rt = cupy.cuda.runtime
    size = os.path.getsize(paths[0])
    d = cupy.empty(size, np.uint8)
    s = cupy.cuda.Stream(non_blocking=True)
    q.put("ready")
    go.wait()
    t0 = time.perf_counter()
    reg = unreg = 0.0
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        a = np.frombuffer(m, np.uint8)
        base = a.ctypes.data
        pend = []
        for o in range(0, size, chunk):
            n = min(chunk, size - o)
            t = time.perf_counter()
            rt.hostRegister(base + o, n, 8)
            reg += time.perf_counter() - t
            rt.memcpyAsync(d.data.ptr + o, base + o, n, rt.memcpyHostToDevice, s.ptr)
            ev = cupy.cuda.Event(disable_timing=True)
            ev.record(s)
            pend.append((ev, base + o))
            while len(pend) > lag:
                e, b = pend.pop(0)
                e.synchronize()
                t = time.perf_counter()
                rt.hostUnregister(b)
                unreg += time.perf_counter() - t
        s.synchronize()
        for _, b in pend:
            t = time.perf_counter()
            rt.hostUnregister(b)
            unreg += time.perf_counter() - t
        del a
        m.close()
        os.close(fd)
    q.put((time.perf_counter() - t0, len(paths) * size, reg, unreg))


if __name__ == "__main__":
    files = sorted(glob.glob(os.path.join(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ps/cubes", "*.img")))[:12]
    buf = np.ones(64 << 20, np.uint8)
    for f in files:  # into the page cache
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
    ctx = mp.get_context("spawn")
    for procs, chunk, lag in ((1, 64 << 20, 0), (1, 64 << 20, 2), (1, 256 << 20, 1), (2, 64 << 20, 2),
                              (3, 64 << 20, 2), (4, 64 << 20, 2), (6, 32 << 20, 2)):
        res, wall = run_together(ctx, worker, [(files[i::procs], chunk, lag) for i in range(procs)])
        total = sum(r[1] for r in res)
        print(f"{procs} processes, chunk {chunk >> 20} MB, unlock lag {lag}: {total / wall / 1e9:.1f} GB/s aggregate; "
              f"per process register {np.mean([r[2] for r in res]) / (total / procs / 2.147e9) * 1e3:.0f} ms, "
              f"unregister {np.mean([r[3] for r in res]) / (total / procs / 2.147e9) * 1e3:.0f} ms per 2.1 GB", flush=True)
