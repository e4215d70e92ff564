"""The reading helper's side of the GPU: the CUDA driver through ``ctypes``, enough to copy a file's bytes
into GPU memory that the parent process shares with it.

Each copy thread reads a few MB into a small buffer of its own and the GPU copies that buffer while it
is still in the CPU's cache, into the parent's ring of tiles on the device (a CUDA IPC handle); the
helper answers once per tile. Why, with the measurements: docs/performance.md, "Reading to the GPU".

Hand-written on purpose: ``ctypes`` on the driver starts in a fraction of a second without importing
CuPy (whose import costs the helper 0.2-0.4 s), and releases the interpreter while each call runs.
"""

from __future__ import annotations

import ctypes
import threading

CU_STREAM_NON_BLOCKING = 1
CU_EVENT_DISABLE_TIMING = 2
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


class DriverError(OSError):
    """A CUDA driver call failed (its name and error code)."""


class IpcHandle(ctypes.Structure):
    """``CUipcMemHandle``: 64 opaque bytes, passed by value."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


def _fn(lib, *names):
    for n in names:
        f = getattr(lib, n, None)
        if f is not None:
            return f
    raise DriverError(f"the CUDA driver has no {names[0]}")


class Driver:
    """The primary context of device ``ordinal`` (as this process sees it: ``CUDA_VISIBLE_DEVICES`` is
    the parent's), made current on each thread that uses it."""

    def __init__(self, ordinal: int):
        lib = ctypes.CDLL("libcuda.so.1")
        self.lib = lib
        vp, u64, size = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
        self._memcpy = _fn(lib, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync")
        self._memcpy.argtypes = [u64, vp, size, vp]
        self._open = _fn(lib, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
        self._open.argtypes = [ctypes.POINTER(u64), IpcHandle, ctypes.c_uint]
        self._host_alloc = _fn(lib, "cuMemHostAlloc")
        self._host_alloc.argtypes = [ctypes.POINTER(vp), size, ctypes.c_uint]
        for name in ("cuEventRecord", "cuEventSynchronize", "cuStreamSynchronize", "cuCtxSetCurrent"):
            getattr(lib, name).argtypes = [vp] * (2 if name == "cuEventRecord" else 1)
        self._check(lib.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self._check(lib.cuDeviceGet(ctypes.byref(dev), int(ordinal)), "cuDeviceGet")
        self.ctx = vp()
        self._check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")
        self.current()

    @staticmethod
    def _check(code: int, name: str) -> None:
        if code != 0:
            raise DriverError(f"{name} failed (CUDA error {code})")

    def current(self) -> None:
        """Make the context current on the calling thread."""
        self._check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def open_shared(self, handle: bytes) -> int:
        """The device address, in this process, of the parent's allocation behind ``handle``."""
        h = IpcHandle()
        ctypes.memmove(ctypes.byref(h), handle, 64)
        ptr = ctypes.c_uint64()
        self._check(self._open(ctypes.byref(ptr), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle")
        return ptr.value


class PieceCopier:
    """One copy thread's two page-locked buffers of ``piece`` bytes, its stream and their events."""

    def __init__(self, drv: Driver, piece: int):
        drv.current()
        lib = drv.lib
        self.drv, self.piece = drv, int(piece)
        self.ptrs, self.views, self.events, self.used = [], [], [], [False, False]
        for _ in range(2):
            p = ctypes.c_void_p()
            drv._check(drv._host_alloc(ctypes.byref(p), self.piece, 0), "cuMemHostAlloc")
            self.ptrs.append(p.value)
            self.views.append(memoryview((ctypes.c_char * self.piece).from_address(p.value)).cast("B"))
            e = ctypes.c_void_p()
            drv._check(lib.cuEventCreate(ctypes.byref(e), CU_EVENT_DISABLE_TIMING), "cuEventCreate")
            self.events.append(e)
        self.stream = ctypes.c_void_p()
        drv._check(lib.cuStreamCreate(ctypes.byref(self.stream), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self.k = 0

    def copy(self, fd: int, dst: int, ranges: list[tuple[int, int, int]]) -> None:
        """``device[dst + b:dst + b + n] = file[f:f + n]`` for each ``(b, f, n)`` of ``ranges``: each piece
        read into one buffer (:func:`hyperapp.reading.ranges.read_ranges`) while the GPU copies the other.
        Returns once the GPU has every byte; raises ``ShortRead`` where the file ends early."""
        from hyperapp.reading.ranges import read_ranges

        drv, lib = self.drv, self.drv.lib
        try:
            for b, f, n in ranges:
                while n > 0:
                    k = self.k
                    self.k ^= 1
                    if self.used[k]:  # its last copy to the GPU is done before the buffer is written again
                        drv._check(lib.cuEventSynchronize(self.events[k]), "cuEventSynchronize")
                    m = min(n, self.piece)
                    read_ranges(fd, self.views[k], [(0, f, m)])
                    drv._check(drv._memcpy(dst + b, self.ptrs[k], m, self.stream), "cuMemcpyHtoDAsync")
                    drv._check(lib.cuEventRecord(self.events[k], self.stream), "cuEventRecord")
                    self.used[k] = True
                    b, f, n = b + m, f + m, n - m
        finally:
            drv._check(lib.cuStreamSynchronize(self.stream), "cuStreamSynchronize")


_LOCAL = threading.local()


def copier(drv: Driver, piece: int) -> PieceCopier:
    """The calling thread's :class:`PieceCopier` (made on its first call)."""
    c = getattr(_LOCAL, "copier", None)
    if c is None:
        c = _LOCAL.copier = PieceCopier(drv, piece)
    return c
