"""Does page-locking a file's pages where they lie in the page cache stall the GPU work of the process?

    python3 scripts/pinning_beside_compute.py

Maps a 2 GB file read-only, page-locks it (``cudaHostRegister``, read-only flag), copies it to the GPU and
unlocks it, in a loop; beside it, times a loop of matrix products on the GPU: alone, beside a pinning
thread of the same process, and beside a pinning process. Measured on an H200 host (docs/performance.md,
2026-11-26): 10.7 ms an iteration alone, 114 ms beside a pinning thread, 10.8 ms beside a pinning process.
"""
import mmap
import multiprocessing as mp
import os
import threading
import time

import numpy as np

path = "/tmp/mm.img"
N = 2048 * 2048 * 128 * 4


def ensure():
    if not os.path.exists(path) or os.path.getsize(path) != N:
        blk = np.full(64 << 20, 1.0, np.float32)
        with open(path, "wb") as fh:
            for _ in range(N // blk.nbytes):
                fh.write(blk)
        os.sync()
    buf = np.ones(64 << 20, np.uint8)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(buf):
            pass


def pinner(seconds, out=None, copy=True):
    import cupy
    rt = cupy.cuda.runtime
    fd = os.open(path, os.O_RDONLY)
    m = mmap.mmap(fd, N, prot=mmap.PROT_READ)
    base = np.frombuffer(m, np.uint8).ctypes.data
    d = cupy.empty(N, np.uint8)
    s = cupy.cuda.Stream(non_blocking=True)
    n, reg, unreg, cp = 0, 0.0, 0.0, 0.0
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        a = time.perf_counter()
        rt.hostRegister(base, N, 8)
        b = time.perf_counter()
        if copy:
            rt.memcpyAsync(d.data.ptr, base, N, rt.memcpyHostToDevice, s.ptr)
            s.synchronize()
        c = time.perf_counter()
        rt.hostUnregister(base)
        e = time.perf_counter()
        reg, cp, unreg, n = reg + b - a, cp + c - b, unreg + e - c, n + 1
    msg = f"pinner: {n} cubes, register {1e3 * reg / n:.0f} ms, copy {1e3 * cp / n:.0f}, unregister {1e3 * unreg / n:.0f} a cube"
    if out is not None:
        out.put(msg)
    print(msg, flush=True)


def compute(seconds, label):
    import cupy
    x = cupy.random.rand(4096, 4096, dtype=cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    times = []
    with s:
        x @ x
        s.synchronize()
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            t = time.perf_counter()
            for _ in range(4):
                x @ x
            s.synchronize()
            times.append(time.perf_counter() - t)
    print(f"{label}: {len(times)} iterations, median {1e3 * np.median(times):.2f} ms, mean {1e3 * np.mean(times):.2f}, "
          f"p95 {1e3 * np.percentile(times, 95):.2f}", flush=True)


if __name__ == "__main__":
    ensure()
    import cupy
    cupy.cuda.runtime.setDevice(0)
    compute(3, "compute alone")
    for copy in (False, True):
        t = threading.Thread(target=pinner, args=(4, None, copy))
        t.start()
        time.sleep(0.3)
        compute(3, f"compute beside a pinning thread of this process (copy {copy})")
        t.join()
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=pinner, args=(6, q, copy))
        p.start()
        time.sleep(2.5)  # its CUDA start
        compute(3, f"compute beside a pinning process (copy {copy})")
        p.join()
    compute(3, "compute alone again")
