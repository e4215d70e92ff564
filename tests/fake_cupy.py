"""A stand-in for CuPy where there is no GPU, for the bookkeeping of GPU-only paths: arrays are NumPy's,
copies from host memory are ``ctypes.memmove`` and check that their source lies inside one registered
range (as a copy from page-locked memory needs), and registrations may not overlap (as CUDA's may not).
Enough for :func:`hyperapp.stream.iter_float_tiles` with ``offload``; nothing more."""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np


class CUDARuntimeError(RuntimeError):
    pass


class _Runtime(types.SimpleNamespace):
    memcpyHostToDevice = 1
    CUDARuntimeError = CUDARuntimeError

    def __init__(self):
        super().__init__()
        self.registered: dict[int, bytes] = {}
        self.registrations = 0

    def hostRegister(self, ptr: int, size: int, flags: int) -> None:
        if any(ptr < p + len(b) and p < ptr + size for p, b in self.registered.items()):
            raise CUDARuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        # the pages as pinned: their bytes stay, even if the file under a mapping is cut short later (where
        # reading the mapping itself would be a SIGBUS)
        self.registered[ptr] = ctypes.string_at(ptr, size)
        self.registrations += 1

    def hostUnregister(self, ptr: int) -> None:
        if self.registered.pop(ptr, None) is None:
            raise CUDARuntimeError("cudaErrorHostMemoryNotRegistered")

    def memcpyAsync(self, dst: int, src: int, n: int, kind: int, stream: int) -> None:
        for p, b in self.registered.items():
            if p <= src and src + n <= p + len(b):
                ctypes.memmove(dst, b[src - p:src - p + n], n)
                return
        raise CUDARuntimeError("copy from memory outside one registered range")

    def getDevice(self) -> int:
        return 0


class _Event:
    done = True

    def synchronize(self) -> None:
        pass


class _Stream:
    ptr = 0

    def __init__(self, non_blocking: bool = False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def record(self) -> _Event:
        return _Event()

    def wait_event(self, event: _Event) -> None:
        pass


class ndarray(np.ndarray):
    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self) -> np.ndarray:
        return np.asarray(self)


def install(monkeypatch) -> types.ModuleType:
    """Put the stand-in in ``sys.modules`` as ``cupy`` (undone with the test's monkeypatch)."""
    mod = types.ModuleType("cupy")
    mod.__getattr__ = lambda name: getattr(np, name)
    mod.empty = lambda shape, dtype=float: np.empty(shape, dtype).view(ndarray)
    cuda = types.ModuleType("cupy.cuda")
    cuda.runtime, cuda.Stream, cuda.get_current_stream = _Runtime(), _Stream, _Stream
    mod.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", mod)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    return mod
