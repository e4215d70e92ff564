"""Compute backend: NumPy on the CPU or CuPy on a CUDA GPU, chosen once and said out loud.

Every model is written once against an array module ``xp``; :func:`get_backend` picks it.
``device="auto"`` takes the GPU when CuPy imports *and* a CUDA device answers, else NumPy;
``device="gpu"`` without a usable GPU is a :class:`~hyperapp.core.errors.BackendError`, never a silent
fall-back. CuPy is imported lazily, so the CPU path (and CI) never needs it.

Scalar operators. CuPy 14 sends an operator between an array and a Python or NumPy scalar
(``a > 0``, ``a * 2.0``) through ``ndarray.__array_ufunc__``, whose first call imports
``cupyx.scipy.special`` and with it SciPy's sparse module and array-API layer: 0.3-0.4 s of a fresh
process on the H100 machine. The ufunc called directly (``xp.greater(a, 0)``) computes the same thing
under the same promotion rules without it, so the code a fresh ``hyperapp --headless detect`` runs
(RBFN and ACE: reading, fit, score, threshold, objects) calls ufuncs wherever an operand is a scalar;
a GPU test holds it to that.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hyperapp.core.cuda_start import _probe_gpu, wait_for_cuda
from hyperapp.core.errors import BackendError

DEVICES = ("auto", "gpu", "cpu")


@dataclass(frozen=True)
class Backend:
    """Which array module runs the work, and on what.

    Attributes
    ----------
    name : {"cpu", "gpu"}
    xp : module
        ``numpy`` or ``cupy``.
    device_name : str
        Human-readable device ("NVIDIA H100 80GB HBM3", or the CPU description).
    """

    name: str
    xp: Any
    device_name: str

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    def asarray(self, a, dtype=None):
        """Move ``a`` to this backend (host -> device copy on the GPU)."""
        return self.xp.asarray(a, dtype=dtype)

    def synchronize(self) -> None:
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()

    def describe(self) -> str:
        return f"{self.name} ({self.device_name})"


def to_host(a) -> np.ndarray:
    """Return ``a`` as a NumPy array, copying from the GPU when it is a CuPy array."""
    if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
        return a.get()
    return np.asarray(a)


def to_device_together(xp, arrays: list, dtype=np.float32) -> list:
    """Host arrays onto ``xp``'s device through one copy (cast to ``dtype``); arrays already there are
    only cast."""
    host = [a for a in arrays if isinstance(a, np.ndarray)]
    flat = xp.asarray(np.concatenate([a.astype(dtype, copy=False).ravel() for a in host])) if host else None
    out, i = [], 0
    for a in arrays:
        if isinstance(a, np.ndarray):
            out.append(flat[i:i + a.size].reshape(a.shape))
            i += a.size
        else:
            out.append(a.astype(dtype, copy=False))
    return out


def empty_pinned(shape, dtype) -> np.ndarray:
    """A NumPy array in page-locked host memory from CuPy's pinned-memory pool (what
    ``cupyx.empty_pinned`` does, without importing ``cupyx``, whose import pulls in SciPy's sparse
    module: 0.2-0.5 s of a fresh process)."""
    import cupy

    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    mem = cupy.cuda.alloc_pinned_memory(max(n * dtype.itemsize, 1))
    return np.frombuffer(mem, dtype, n).reshape(shape)


def to_host_pinned(a) -> np.ndarray:
    """Like :func:`to_host`, but a CuPy array lands in page-locked memory (from CuPy's pinned pool):
    the copy runs at the bus's speed instead of through a pageable bounce buffer."""
    if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
        out = empty_pinned(a.shape, a.dtype)
        a.get(out=out)
        return out
    return np.asarray(a)


def gpu_free_bytes(xp) -> int:
    """Bytes of the current GPU free for new arrays: the driver's free memory plus the blocks CuPy's pool
    holds unused (freed arrays stay in the pool, which the driver counts as used: after a few large
    cubes, the driver alone would call the GPU nearly full)."""
    free, _ = xp.cuda.runtime.memGetInfo()
    return int(free) + int(xp.get_default_memory_pool().free_bytes())


def get_namespace(*arrays):
    """Array module of the inputs (``cupy`` if any is a CuPy array, else ``numpy``)."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            import cupy

            return cupy
    return np


_ATTRS: dict[int, dict] = {}


def device_attributes() -> dict:
    """The current CUDA device's attributes, read once per device (the query costs tens of
    microseconds, which a 0.1 ms kernel launch cannot hide)."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    if dev not in _ATTRS:
        _ATTRS[dev] = dict(cupy.cuda.Device(dev).attributes)
    return _ATTRS[dev]


_KEPT_STREAMS: dict = {}
_KEPT_LOCK = threading.Lock()
_KEPT_LOCAL = threading.local()


def kept_stream(role: str, per_thread: bool):
    """A non-blocking CuPy stream for ``role`` on the current device, made once and kept (for each thread
    with ``per_thread``, else one for the process): CuPy's memory pool reuses a freed block only on the
    stream it was allocated on, so a stream made afresh per use would allocate its buffers afresh too."""
    import cupy

    key = (role, cupy.cuda.runtime.getDevice())
    if per_thread:
        streams = _KEPT_LOCAL.__dict__.setdefault("streams", {})
        if key not in streams:
            streams[key] = cupy.cuda.Stream(non_blocking=True)
        return streams[key]
    with _KEPT_LOCK:
        if key not in _KEPT_STREAMS:
            _KEPT_STREAMS[key] = cupy.cuda.Stream(non_blocking=True)
        return _KEPT_STREAMS[key]


def gpu_available() -> bool:
    """Whether CuPy and a working CUDA device are present."""
    return _probe_gpu()[0]


def gpu_status() -> str:
    """The GPU's name, or why there is none (for the GUI's device menu and ``info``)."""
    return _probe_gpu()[1]


def _cpu_name() -> str:
    import platform

    return platform.processor() or platform.machine() or "CPU"


def backend_of(array) -> Backend:
    """The backend an array already lives on: the GPU's for a CuPy array, else the CPU's (``None``, an
    image not loaded, is the CPU's too)."""
    return get_backend("gpu" if array is not None and not isinstance(array, np.ndarray) else "cpu")


def get_backend(device: str = "auto") -> Backend:
    """Pick the compute backend.

    Parameters
    ----------
    device : {"auto", "gpu", "cpu"}
        ``auto`` takes the GPU when one is usable, else the CPU.

    Raises
    ------
    BackendError
        ``device="gpu"`` and no usable GPU, or an unknown device name.
    """
    if device not in DEVICES:
        raise BackendError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    if device != "cpu":
        wait_for_cuda()
    return _backend(device)


@functools.lru_cache(maxsize=4)
def _backend(device: str) -> Backend:
    if device in ("auto", "gpu"):
        ok, what = _probe_gpu()
        if ok:
            import cupy

            return Backend("gpu", cupy, what)
        if device == "gpu":
            raise BackendError(f"--device gpu asked for, but {what}; use --device cpu or auto")
    return Backend("cpu", np, _cpu_name())


class _SerialHostBLAS:
    """Context manager: the host's BLAS single-threaded while a GPU model fits.

    A GPU fit's host work is linear algebra on band-sized matrices (a 64 x 64 ``eigh``, a Cholesky
    factor, a ridge solve). OpenBLAS runs them on all its threads, and on a virtual machine of 16 cores
    waking those threads for each of the many small BLAS calls inside one LAPACK routine made a 64 x 64
    ``eigh`` take 2-34 ms instead of 0.3 (cProfile of the live click on three H100 hosts: the spread of
    the click's time between them). One thread answers such a matrix fastest everywhere.

    Nesting and threads: the first entry sets the limit and the last exit restores it (the GUI's worker
    threads may fit at once; per-entry save and restore would let one thread restore a limit another
    still needs, or leave the host single-threaded for the CPU path). Where ``threadpoolctl`` is not
    installed, nothing changes.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._limiter = None
        self._controller = None

    def _limit(self):
        if self._controller is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                self._controller = False
            else:
                self._controller = ThreadpoolController()  # scans the loaded libraries once (~2 ms)
        return self._controller.limit(limits=1, user_api="blas") if self._controller else None

    def __enter__(self):
        with self._lock:
            if self._depth == 0:
                self._limiter = self._limit()
            self._depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None
        return False


#: see :class:`_SerialHostBLAS`
serial_host_blas = _SerialHostBLAS()


class Timer:
    """Stage timer: ``with timer.stage("score"): ...`` adds the stage's seconds to ``timer.seconds``.

    On the CPU a stage is wall-clock time. On the GPU it is the time between two CUDA events recorded on
    the current stream at the stage's start and end: the host is never made to wait for the device
    between stages (a synchronisation per stage boundary cost a live click about 1 ms, the device idle
    while the host waited and the host idle while the device caught up). An event runs when the device
    reaches it, and at once where the device is idle, so a stage the host's work bounds measures that
    work and a stage the device's work bounds measures the device's. ``seconds`` waits for the last
    event the first time it is read after a stage.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self._seconds: dict[str, float] = {}
        self._events: list = []  # (stage, start event, end event) not yet added to _seconds

    @property
    def seconds(self) -> dict[str, float]:
        """Seconds per stage (on the GPU, after waiting for the stages' last event)."""
        if self._events:
            self._events[-1][2].synchronize()
            for name, e0, e1 in self._events:
                dt = self.backend.xp.cuda.get_elapsed_time(e0, e1) / 1e3
                self._seconds[name] = self._seconds.get(name, 0.0) + dt
            self._events.clear()
        return self._seconds

    class _Stage:
        def __init__(self, timer: Timer, name: str):
            self.timer, self.name = timer, name

        def __enter__(self):
            if self.timer.backend.is_gpu:
                self.e0 = self.timer.backend.xp.cuda.Event()
                self.e0.record()
            else:
                self.t0 = time.perf_counter()
            return self

        def __exit__(self, *exc):
            if self.timer.backend.is_gpu:
                e1 = self.timer.backend.xp.cuda.Event()
                e1.record()
                self.timer._events.append((self.name, self.e0, e1))
            else:
                dt = time.perf_counter() - self.t0
                self.timer._seconds[self.name] = self.timer._seconds.get(self.name, 0.0) + dt
            return False

    def stage(self, name: str) -> Timer._Stage:
        return Timer._Stage(self, name)


#: elements per row of :func:`total`'s first stage
_STAGE = 1 << 12


def total(a, dtype=None):
    """The sum of every element of ``a`` (a count, for a boolean map, with an integer ``dtype``), as a 0-d
    array on ``a``'s device: one round trip fewer where several go to the host together.

    On CuPy in two stages, rows of 4096 elements and then their sums: without CUB's block reductions
    (:func:`hyperapp.core.cuda_start._no_block_reductions`) CuPy reduces a whole array that CUB's
    device-wide routines do not take (booleans, integer counts) in a single thread block, milliseconds
    for a 2048 x 2048 map; the first stage spreads it over as many blocks as rows.
    """
    xp = get_namespace(a)
    if xp is np or a.size <= _STAGE:
        return a.sum(dtype=dtype)
    f = a.reshape(-1)
    n = f.size - f.size % _STAGE
    out = f[:n].reshape(-1, _STAGE).sum(axis=1, dtype=dtype).sum(dtype=dtype)
    return xp.add(out, f[n:].sum(dtype=dtype)) if n < f.size else out


def sparse_flatnonzero(a, fill=0) -> np.ndarray:
    """``np.flatnonzero(a != fill)`` for a host array of one-byte values (labels, a boolean mask) that
    are mostly ``fill``, in one pass over 8-byte words: only the words holding another value are
    looked into. A few clicks on a 2048 x 2048 image: 0.1 ms against 0.9 for ``np.flatnonzero``."""
    a = np.ascontiguousarray(a).reshape(-1)
    if a.dtype.itemsize != 1:
        return np.flatnonzero(a != fill)
    b = a.view(np.uint8)
    word = np.uint64(int.from_bytes(bytes([np.array(fill, a.dtype).view(np.uint8).item()]) * 8, "little"))
    n8 = b.size // 8 * 8
    hit = np.flatnonzero(b[:n8].view(np.uint64) != word)
    idx = (hit[:, None] * 8 + np.arange(8)).reshape(-1)
    idx = idx[a[idx] != fill]
    return np.concatenate([idx, n8 + np.flatnonzero(a[n8:] != fill)])
