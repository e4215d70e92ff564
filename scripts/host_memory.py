"""What a GPU host's memory allows: its NUMA layout, copying in memory, page-cache reads and the GPU's
host-to-device copies, alone and side by side.

    python3 scripts/host_memory.py DIR

DIR holds a campaign's cubes (``*.img``, for example ``profile_stages.py``'s ``/tmp/ps/cubes``). Prints
one line per measure. The question it answers: is a batch's read stage (the page cache copied into a
page-locked ring, the GPU then copying the ring) bound by the host's memory, or by something beside it
(the NUMA node the threads, the ring or the page cache sit on)?
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from page_cache_paths import best_pass_rate

MB = 1 << 20


def nodes() -> dict[int, list[int]]:
    """CPUs of each NUMA node this process may run on."""
    out = {}
    allowed = os.sched_getaffinity(0)
    for d in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        n = int(d.rsplit("node", 1)[1])
        cpus = []
        for part in open(f"{d}/cpulist").read().strip().split(","):
            if part:
                a, _, b = part.partition("-")
                cpus += range(int(a), int(b or a) + 1)
        out[n] = [c for c in cpus if c in allowed]
    return out or {0: sorted(allowed)}


def topology() -> None:
    print("cpus", os.cpu_count(), "allowed", len(os.sched_getaffinity(0)))
    for n, cpus in nodes().items():
        mem = open(f"/sys/devices/system/node/node{n}/meminfo").read().split("\n")[0] if os.path.exists(
            f"/sys/devices/system/node/node{n}/meminfo") else ""
        print(f"node {n}: {len(cpus)} cpus {cpus[:4]}... {mem.split(':', 1)[-1].strip()}")
    for dev in glob.glob("/sys/bus/pci/devices/*"):
        try:
            if open(f"{dev}/vendor").read().strip() == "0x10de" and open(f"{dev}/class").read().startswith("0x03"):
                print("gpu", os.path.basename(dev), "numa_node", open(f"{dev}/numa_node").read().strip())
        except OSError:
            pass
    for cmd in (["lscpu"], ["nvidia-smi", "topo", "-m"]):
        try:
            txt = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
            keep = [ln for ln in txt.splitlines() if cmd[0] != "lscpu" or any(
                k in ln for k in ("Model name", "Socket", "NUMA", "L3", "Thread", "Core"))]
            print("\n".join(keep))
        except (OSError, subprocess.SubprocessError):
            pass


def pinned_to(cpus):
    def set_():
        if cpus:
            os.sched_setaffinity(0, cpus)  # this thread only (Linux: pid 0 is the calling thread)
    return set_


def copy_rate(threads: int, cpus=None, seconds: float = 2.0) -> float:
    """GB/s copied (bytes of destination) by ``threads`` threads, each copying its own 256 MB."""
    def run(_):
        pinned_to(cpus)()
        a = np.ones(256 * MB, np.uint8)
        b = np.ones(256 * MB, np.uint8)
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() < t0 + seconds:
            np.copyto(b, a)
            n += b.nbytes
        return n, time.perf_counter() - t0

    with ThreadPoolExecutor(threads) as pool:
        res = list(pool.map(run, range(threads)))
    return sum(n for n, _ in res) / max(t for _, t in res) / 1e9


def read_rate(paths, threads: int, cpus=None, stop_evt=None) -> float:
    """GB/s of reading ``paths`` from the page cache into a 64 MB buffer per thread (the bench's
    reference)."""
    local = threading.local()

    def read(p):
        buf = getattr(local, "buf", None)
        if buf is None:
            pinned_to(cpus)()
            buf = local.buf = memoryview(np.ones(64 * MB, np.uint8)).cast("B")
        n = 0
        with open(p, "rb", buffering=0) as fh:
            while k := fh.readinto(buf):
                n += k
        return n

    return best_pass_rate(read, paths, threads)


class Dma(threading.Thread):
    """Host-to-device copies of a page-locked 1 GB buffer (first touched on ``cpus``), 128 MB at a
    time, for as long as it runs: its GB/s."""

    def __init__(self, cpus=None, seconds: float = 3.0):
        super().__init__(daemon=True)
        self.cpus, self.seconds, self.rate = cpus, seconds, 0.0
        self.ready = threading.Event()

    def run(self):
        import cupy
        rt = cupy.cuda.runtime
        pinned_to(self.cpus)()
        h = np.ones(1024 * MB, np.uint8)
        rt.hostRegister(h.ctypes.data, h.nbytes, 0)
        d = cupy.empty(h.nbytes, np.uint8)
        s = cupy.cuda.Stream(non_blocking=True)
        self.ready.set()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < self.seconds:
            for o in range(0, h.nbytes, 128 * MB):
                rt.memcpyAsync(d.data.ptr + o, h.ctypes.data + o, 128 * MB, rt.memcpyHostToDevice, s.ptr)
            s.synchronize()
            n += h.nbytes
        self.rate = n / (time.perf_counter() - t0) / 1e9
        rt.hostUnregister(h.ctypes.data)


def dma_rate(cpus=None) -> float:
    d = Dma(cpus, 2.0)
    d.start()
    d.join()
    return d.rate


def page_nodes(path: str) -> str:
    """Which NUMA nodes hold ``path``'s pages in the page cache (from this process's numa_maps of a
    mapping of it, every page touched)."""
    import mmap
    with open(path, "rb") as fh:
        m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        a = np.frombuffer(m, np.uint8)
        int(a[::4096].sum())
        addr = format(a.ctypes.data, "x")
        line = next((ln for ln in open("/proc/self/numa_maps") if ln.startswith(addr)), "")
        del a
        m.close()
    return " ".join(w for w in line.split() if w.startswith("N"))


def main() -> None:
    d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ps/cubes"
    paths = sorted(glob.glob(os.path.join(d, "*.img")))
    topology()
    ns = nodes()
    print("files", len(paths), "page nodes of the first three:", [page_nodes(p) for p in paths[:3]])
    for t in (8, 16):
        print(f"copy in memory, {t} threads: {copy_rate(t):.1f} GB/s")
    print(f"GPU copies from page-locked memory alone: {dma_rate():.1f} GB/s")
    for t in (12, 16):
        print(f"page cache read, {t} threads: {read_rate(paths, t):.1f} GB/s")
    # side by side: the page cache read while the GPU copies from page-locked memory
    dma = Dma(seconds=6.0)
    dma.start()
    dma.ready.wait()
    r = read_rate(paths[: max(4, len(paths) // 2)], 12)
    dma.join()
    print(f"side by side: page cache read (12 threads) {r:.1f} GB/s, GPU copies {dma.rate:.1f} GB/s")
    dma = Dma(seconds=4.0)
    dma.start()
    dma.ready.wait()
    c = copy_rate(12, seconds=3.0)
    dma.join()
    print(f"side by side: copy in memory (12 threads) {c:.1f} GB/s, GPU copies {dma.rate:.1f} GB/s")
    if len(ns) > 1:
        for n, cpus in ns.items():
            print(f"node {n}: copy {copy_rate(8, cpus):.1f} GB/s, page cache read (8 threads) "
                  f"{read_rate(paths, 8, cpus):.1f} GB/s, GPU copies from memory here {dma_rate(cpus):.1f} GB/s")


if __name__ == "__main__":
    main()
