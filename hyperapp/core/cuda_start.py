"""A fresh process's GPU start, begun before anything heavy is imported.

A ``hyperapp --headless detect`` process pays about a second of one-time GPU costs (the CUDA driver,
CuPy's import, page-locked buffers, the first kernels), more than reading a 2 GB cube from the page
cache. :func:`prewarm` starts them on background threads so that they overlap the main thread's own
imports and the opening of the file. This module imports neither NumPy nor CuPy at the top, so that
the command line can call it before NumPy's import (60-80 ms) and the driver starts that much
earlier: the driver's start is the longest of these costs, and the first on the critical path.
"""

from __future__ import annotations

import functools
import threading

_PREWARM: threading.Thread | None = None
#: set once the prewarm thread has the CUDA context and the page-locked ring (or found no GPU): all
#: that reading a cube onto the GPU needs
_CUDA_READY = threading.Event()


def _start_driver() -> None:
    """``cuInit`` and device 0's primary context, straight through the driver library.

    Called through ctypes, which lets go of the GIL for the call: the driver's ~0.3 s of start-up then
    runs while another thread imports CuPy (0.2 s of Python holding the GIL), instead of after it.
    CuPy's runtime later finds the context made and uses it. Any failure is left for CuPy's own probe
    to meet and report.
    """
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuInit(0) != 0:
            return
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # held until the process ends
    except (OSError, AttributeError):  # no driver library (or not Linux): CuPy's probe says why
        pass


#: bytes of stored data per tile of the tile reader (:mod:`hyperapp.reading.tiles`). Small tiles keep the
#: page-locked ring small: pinning host memory is slow, and a fresh process pays it before reading.
TILE_BYTES = 16 << 20
#: buffers in the tile reader's ring: one being filled, the others converted or in flight to the device
RING = 4


_PROBE_LOCK = threading.Lock()


def _probe_gpu() -> tuple[bool, str]:
    """Try CuPy and the first CUDA device once (thread-safe: :func:`prewarm` may be probing)."""
    with _PROBE_LOCK:
        return _probe_gpu_once()


@functools.lru_cache(maxsize=1)
def _probe_gpu_once() -> tuple[bool, str]:
    """Try CuPy and the first CUDA device once; return (usable, name or reason)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return False, f"CuPy is not installed ({exc.__class__.__name__})"
    _no_block_reductions()
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            return False, "no CUDA device found"
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        cupy.zeros(1).sum().item()  # a real round trip: the driver works
        return True, name
    except Exception as exc:
        return False, f"CUDA device not usable: {exc}"



def _no_block_reductions() -> None:
    """CuPy's reductions without CUB's block reductions, which compile one kernel per thread-block size
    CuPy picks from the length reduced (a cube of a band count never seen compiled on its first run);
    CuPy's own reductions compile once per type. CUB's device-wide routines (sums, extremes, scans, sorts
    of whole arrays) stay: they are compiled into CuPy, not at run time. Nothing changes where the user
    set ``CUPY_ACCELERATORS``."""
    import os

    if "CUPY_ACCELERATORS" in os.environ:
        return
    try:
        from cupy._core import _accelerator

        _accelerator.set_reduction_accelerators([])
    except (ImportError, AttributeError):  # a CuPy without it: its own default stands
        pass


def prewarm(device: str = "auto") -> None:
    """Start the GPU's one-time costs on background threads: the CUDA driver and context
    (:func:`_start_driver`) while CuPy is imported, then the page-locked ring the tile reader copies
    through (pinning memory is slow). That is all a cube's reading needs, and
    :func:`hyperapp.core.backend.get_backend` waits for no more (:func:`wait_for_cuda`); the cuBLAS library
    and its first kernels then load while the cube is read. Does nothing for ``device="cpu"`` or when
    already started.

    Why each overlap, and those measured and left out: docs/performance.md, "A fresh process's GPU start".
    """
    global _PREWARM
    if device == "cpu" or _PREWARM is not None:
        return

    def warm() -> None:
        ok = False
        try:
            import cupy  # noqa: F401  (beside the driver's start; the probe then waits for it)

            ok, _ = _probe_gpu()
            if ok:
                # into CuPy's pinned pool, where the tile reader's ring takes them from
                bufs = [cupy.cuda.alloc_pinned_memory(TILE_BYTES) for _ in range(RING)]
                del bufs
        except Exception:  # noqa: BLE001  (the main thread meets any failure again and reports it)
            ok = False
        finally:
            _CUDA_READY.set()
        if not ok:
            return
        try:
            x = cupy.ones((256, 16), cupy.float32)
            (x.T @ x).sum().item()  # the cuBLAS handle and its first kernels
        except Exception:  # noqa: BLE001
            pass

    threading.Thread(target=_start_driver, name="hyperapp-cuda-driver", daemon=True).start()
    _PREWARM = threading.Thread(target=warm, name="hyperapp-gpu-prewarm", daemon=True)
    _PREWARM.start()


def wait_for_cuda() -> None:
    """Wait until :func:`prewarm` has the context and the ring; return at once when it never ran."""
    if _PREWARM is not None and _PREWARM is not threading.current_thread():
        _CUDA_READY.wait()


#: the driver's ``CU_CTX_SCHED_*`` flags, by the names ``HYPERAPP_CUDA_WAITS`` takes
SCHEDULES = {"auto": 0, "spin": 1, "yield": 2, "block": 4}
_SCHED_MASK = 0x7


def wanted_schedule(default: str = "block") -> str:
    """``HYPERAPP_CUDA_WAITS`` where it names a schedule (:data:`SCHEDULES`), else ``default``."""
    import os

    mode = os.environ.get("HYPERAPP_CUDA_WAITS", "").strip().lower()
    return mode if mode in SCHEDULES else default


def schedule_waits(default: str = "block") -> str | None:
    """Set how this process's threads wait for the GPU, on the current thread's CUDA context.

    By default CUDA *spins*: a thread that waits for a copy or a kernel (a stream's or event's
    ``synchronize``, a copy back to the host) keeps its core busy polling until the GPU is done, since
    the process has fewer contexts than the machine has cores. A batch's read stage waits on every
    tile's copy and its compute stage on every cube's kernels. ``"block"`` makes them sleep until the
    driver's interrupt instead, for a few microseconds more per wait. Measured on a 16-core H200 host
    (``scripts/profile_stages.py --vary HYPERAPP_CUDA_WAITS=spin,block``, three runs each): a campaign
    of 2 GB cubes used 56-65 ms of the host's CPU a cube instead of 77-86 (the compute thread 22-27 ms
    instead of 37-41), at the same rate (RBFN 27.0-28.2 GB/s against 27.2-28.6; ACE 24.6-28.9 against
    25.9-28.9): the cores are left to whatever else runs on the machine.

    ``HYPERAPP_CUDA_WAITS`` (``auto``, ``spin``, ``yield``, ``block``) overrides ``default``. The flags
    are set through the driver (``cuCtxSetFlags``, driver 12.1 and later), as CuPy has no call for
    them; they hold for the whole context, so for every thread of the process.

    Returns
    -------
    str or None
        The schedule now in effect, or None where it could not be read or set (no driver, no current
        context, an older driver): the context then keeps CUDA's own.
    """
    import ctypes

    mode = wanted_schedule(default)
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        flags = ctypes.c_uint()
        if lib.cuCtxGetFlags(ctypes.byref(flags)) != 0:
            return None
        want = (flags.value & ~_SCHED_MASK) | SCHEDULES[mode]
        if want != flags.value and lib.cuCtxSetFlags(ctypes.c_uint(want)) != 0:
            return None
        if lib.cuCtxGetFlags(ctypes.byref(flags)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    now = flags.value & _SCHED_MASK
    return next((k for k, v in SCHEDULES.items() if v == now), None)
