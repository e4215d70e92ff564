"""Reading a raw file's ranges in a helper process, into a ring of shared (page-locked) memory.

Why a second process: a batch reads cube n+1 while the compute stage runs cube n's Python on another
thread. A tile's read is a few dozen ``preadv`` calls on the copy threads (one per thread and range),
and each of them, and each future it completes, needs the interpreter for a moment on its way back.
Beside a thread running Python, those moments wait their turn: a 2 GB cube came onto the GPU at 15-20
GB/s where alone it came at 30-33 GB/s (``scripts/profile_reading.py``, H100 hosts), and the compute
stage slowed by as much. The helper process has an interpreter of its own. It does every system call of
a tile there, and this process meets it twice a tile: one message out, one back.

For a GPU reader the ring is on the GPU: one allocation of this process, shared with the helper by a
CUDA IPC handle, into which the helper's threads copy each tile themselves, a few MB at a time through
small page-locked buffers of their own (:mod:`hyperapp.reading.helper_gpu`, which says why: those buffers stay
in the CPU's cache until the GPU has copied them). Where that cannot be set up (no CUDA IPC, say, or
``HYPERAPP_READ_TO_GPU=0``), and for the CPU, the ring is one ``memfd`` (anonymous shared memory, Linux),
mapped by both processes; for the GPU this process pins it (``cudaHostRegister``), so the tiles the
helper writes go to the device on asynchronous copies, as the page-locked ring of
:class:`hyperapp.reading.tiles.TileReader` does. A helper is started on the first
cube that needs it and ends with this process (it reads until its socket closes). A process keeps up to
two, each with its ring: while this cube's last tiles go to the GPU from one, the next cube's first
tiles are read into the other.

The helper runs ``python -m hyperapp.reading.reader_process`` and imports nothing but the standard library (the
CUDA driver through ``ctypes``): its start costs about 50 ms, once, and on the GPU a context of its own.
Where it cannot run (not Linux, a frozen application, a start that fails, ``HYPERAPP_READ_PROCESS=0``)
readers read in this process, as before.

The wire format is :mod:`multiprocessing.connection`'s pickled messages over a socket pair:

- request ``(id, path, [(ring offset, file offset, bytes), ...])``;
- first, for a ring on the GPU: the ring's CUDA IPC handle (64 bytes); the helper answers ``("ready",
  threads)``, or ``("failed", why)`` and ends;
- reply ``(id, None)`` when every byte was read (and, on the GPU, copied there), else
  ``(id, (kind, errno, text))`` with kind ``"short"`` (the file ended early) or ``"os"`` (the system
  refused; errno and text from it).

Replies come in the order of the requests.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from hyperapp.reading import helper_process
from hyperapp.reading.ranges import ShortRead, ended_early, read_ranges, split_ranges  # noqa: F401

#: seconds a new helper has to say it is ready before this process reads without it
START_TIMEOUT = 20.0


def _to_device(drv, piece: int, fd: int, base: int, ranges: list[tuple[int, int, int]]) -> None:
    """``read_ranges`` into the parent's GPU memory at ``base`` (this thread's pieces and buffers)."""
    from hyperapp.reading.helper_gpu import copier

    copier(drv, piece).copy(fd, base, ranges)


def _failure(exc: BaseException) -> tuple[str, int, str]:
    """A reply's description of a failed read (what crosses the socket: no exception objects)."""
    if isinstance(exc, ShortRead):
        return "short", 0, ""
    if isinstance(exc, OSError):
        return "os", exc.errno or 0, exc.strerror or str(exc)
    return "other", 0, f"{exc.__class__.__name__}: {exc}"


# ---------------------------------------------------------------------------------------- the helper
def serve(sock_fd: int, ring_fd: int, size: int, threads: int, device: int = -1, piece: int = 0) -> None:
    """The helper's loop: read each request's ranges into the ring on ``threads`` threads, and answer
    in order; return when the socket closes (this process's parent ended or let the helper go).

    With ``device`` (a GPU's ordinal, not -1) the ring is the parent's GPU memory, whose CUDA IPC handle
    is the first message: the threads copy each range to it in pieces of ``piece`` bytes
    (:mod:`hyperapp.reading.helper_gpu`). Where that cannot be set up, the helper says why and ends."""
    from multiprocessing.connection import Connection
    from queue import Queue

    conn = Connection(sock_fd)
    ring = drv = None
    if device >= 0:
        try:
            from hyperapp.reading.helper_gpu import Driver

            drv = Driver(device)
            base = drv.open_shared(conn.recv())
        except Exception as exc:  # noqa: BLE001  (told to the parent, which reads without the GPU copies)
            conn.send(("failed", f"{exc.__class__.__name__}: {exc}"))
            return
    else:
        ring = memoryview(mmap.mmap(ring_fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)))
        os.close(ring_fd)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="hyperapp-helper-read")
    answers: Queue = Queue()  # (request id, futures, fd or None, error): answered in order

    def answer() -> None:
        while (job := answers.get()) is not None:
            rid, futures, fd, error = job
            for f in futures:
                exc = f.exception()
                if exc is not None and error is None:
                    error = _failure(exc)
            if fd is not None:
                os.close(fd)
            try:
                conn.send((rid, error))
            except OSError:  # the parent is gone
                return

    replier = threading.Thread(target=answer, daemon=True)
    replier.start()
    conn.send(("ready", threads))
    while True:
        try:
            rid, path, ranges = conn.recv()
        except (EOFError, OSError):
            break
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            answers.put((rid, [], None, _failure(exc)))
            continue
        groups = split_ranges(ranges, threads)
        if drv is not None:
            futures = [pool.submit(_to_device, drv, piece, fd, base, g) for g in groups]
        else:
            futures = [pool.submit(read_ranges, fd, ring, g) for g in groups]
        answers.put((rid, futures, fd, None))
    answers.put(None)
    replier.join()
    pool.shutdown(wait=True)


# ---------------------------------------------------------------------------------------- this side
def _stopped_error(message: str, path: str | None = None):
    """The one-line error of a helper that ended (or never started) while a read was owed."""
    from hyperapp.core.errors import BackendError

    return BackendError(message, path)


class _Reply:
    """One request's outcome, future-like (``done``, ``result``, ``exception``) for the reader thread
    that made it: waiting reads replies off the socket, in order."""

    def __init__(self, helper: ReaderProcess, rid: int, path: str):
        self.helper, self.rid, self.path = helper, rid, path

    def done(self) -> bool:
        return self.helper._poll(self.rid)

    def exception(self) -> BaseException | None:
        try:
            self.result()
        except BaseException as exc:  # noqa: BLE001  (what result() raises, handed over)
            return exc
        return None

    def result(self) -> None:
        error = self.helper._wait(self.rid)
        if error is None:
            return
        kind, errno, text = error
        if kind == "short":
            raise ended_early(self.path)
        if kind == "os":
            raise OSError(errno, text, self.path)
        raise _stopped_error(f"the reading helper failed: {text}", self.path)


class ReaderProcess:
    """A helper process reading file ranges into ``slots`` shared slots of ``slot_bytes`` each.

    One reader at a time uses it (:meth:`lease`); :meth:`slot` gives slot ``k`` as a NumPy byte array
    of this process, and :meth:`read` starts filling it.
    """

    def __init__(self, slot_bytes: int, slots: int, threads: int, device: int | None = None):
        import numpy as np

        self.slot_bytes, self.slots, self.size = int(slot_bytes), int(slots), int(slot_bytes) * int(slots)
        self.device = device
        self._mm = self._dmem = None
        self._pinned = False
        self.broken = False
        handle = None
        if device is not None:  # the ring is on the GPU: an allocation of its own (IPC shares whole ones)
            import cupy

            self._dmem = cupy.cuda.runtime.malloc(self.size)
            try:
                handle = cupy.cuda.runtime.ipcGetMemHandle(self._dmem)
            except Exception:
                cupy.cuda.runtime.free(self._dmem)
                self._dmem = None
                raise
            ring_fd = -1
        else:
            ring_fd = os.memfd_create("hyperapp-read-ring")
        try:
            if ring_fd >= 0:
                os.ftruncate(ring_fd, self.size)
                self._mm = mmap.mmap(ring_fd, self.size)
            self._proc, self._conn = helper_process.start(
                "hyperapp.reading.reader_process",
                [str(ring_fd), str(self.size), str(threads), str(-1 if device is None else device), str(GPU_PIECE_BYTES)],
                (ring_fd,) if ring_fd >= 0 else ())
        except BaseException:
            self._free_device()
            raise
        finally:
            if ring_fd >= 0:
                os.close(ring_fd)
        self._next = 0
        self._replies: dict[int, object] = {}
        self._lease = threading.Lock()
        try:
            if handle is not None:
                self._conn.send(handle)
            if not self._conn.poll(START_TIMEOUT):
                raise OSError("the reading helper did not start")
            msg = self._conn.recv()  # ("ready", threads), or ("failed", why) where the GPU copies cannot be set up
        except (EOFError, OSError) as exc:
            self.close()
            raise OSError("the reading helper did not start") from exc
        if msg[0] != "ready":
            self.close()
            raise OSError(f"the reading helper cannot copy to the GPU: {msg[1]}")
        if device is not None:
            import cupy

            mem = cupy.cuda.UnownedMemory(self._dmem, self.size, self, device)
            self._ring = cupy.ndarray((self.size,), cupy.uint8, cupy.cuda.MemoryPointer(mem, 0))
        else:
            self._ring = np.frombuffer(self._mm, np.uint8)

    def pin(self) -> None:
        """Page-lock the ring for asynchronous copies to the GPU (once; slow, like any pinning). A ring
        on the GPU needs none."""
        if not self._pinned and self.device is None:
            import cupy

            cupy.cuda.runtime.hostRegister(self._ring.ctypes.data, self.size, 0)
            self._pinned = True

    def _free_device(self) -> None:
        if self._dmem is not None:
            import cupy

            try:
                cupy.cuda.runtime.free(self._dmem)
            except Exception:  # noqa: BLE001  (a context already gone at exit)
                pass
            self._dmem = None

    def serves(self, slot_bytes: int, slots: int, device: int | None) -> bool:
        """Whether this helper can serve a reader of ``slots`` slots of ``slot_bytes`` for ``device``
        (None: a ring in host memory): not stopped, its ring as large, and where that reader wants it."""
        return not self.broken and self.slot_bytes >= slot_bytes and self.slots >= slots and self.device == device

    def lease(self) -> bool:
        """Take the helper for one reader (False when another reader has it)."""
        return self._lease.acquire(blocking=False)

    def release(self) -> None:
        self._lease.release()

    def slot(self, k: int):
        """Slot ``k`` of the ring: a byte array shared with the helper (NumPy, or CuPy on the GPU)."""
        return self._ring[k * self.slot_bytes:(k + 1) * self.slot_bytes]

    def read(self, k: int, path: str, ranges: list[tuple[int, int, int]]) -> _Reply:
        """Start reading ``ranges`` ((offset in slot k, file offset, bytes)) of file ``path`` into slot
        ``k``; the reply says when the bytes are there."""
        rid, self._next = self._next, self._next + 1
        base = k * self.slot_bytes
        try:
            self._conn.send((rid, path, [(base + b, f, n) for b, f, n in ranges]))
        except OSError as exc:
            self._stopped(exc)
        return _Reply(self, rid, path)

    def _take_one(self) -> None:
        try:
            rid, error = self._conn.recv()
        except (EOFError, OSError) as exc:
            self._stopped(exc)
        self._replies[rid] = error

    def _wait(self, rid: int):
        while rid not in self._replies:
            self._take_one()
        return self._replies.pop(rid)

    def _poll(self, rid: int) -> bool:
        while rid not in self._replies:
            if self.broken or not self._conn.poll(0):
                return self.broken
            self._take_one()
        return True

    def _stopped(self, exc: BaseException | None = None):
        self.broken = True
        raise _stopped_error("the reading helper process stopped (was it killed, or out of memory?)") from exc

    def close(self) -> None:
        """End the helper (it sees its socket close) and let the ring go."""
        self.broken = True
        helper_process.end(self._proc, self._conn)
        if self._pinned:
            import cupy

            try:
                cupy.cuda.runtime.hostUnregister(self._ring.ctypes.data)
            except Exception:  # noqa: BLE001
                pass
            self._pinned = False
        # the helper has ended (or was killed) and its mapping of the ring with it; nothing of this process
        # uses a helper's ring once its lease is given back
        self._free_device()


def env_count(name: str) -> int | None:
    """Environment variable ``name`` where it is a positive whole number, else None (the reading knobs:
    ``HYPERAPP_GPU_PIECE_KB`` here, :mod:`hyperapp.reading.tiles`'s threads and cores)."""
    given = os.environ.get(name, "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else None


def _piece_bytes() -> int:
    """:data:`GPU_PIECE_BYTES`: ``HYPERAPP_GPU_PIECE_KB`` KB where it is a positive whole number, else 4 MB."""
    kb = env_count("HYPERAPP_GPU_PIECE_KB")
    return kb * 1024 if kb else 4 << 20


#: the process's helpers: two, so that the next cube's reader can read ahead into a ring of its own while
#: the consumer of this cube's still holds tiles of the first (see :meth:`hyperapp.reading.tiles.TileReader.then`)
MAX_HELPERS = 2
#: a helper could not copy to the GPU in this process (no CUDA IPC here, say): later ones do not try
_GPU_COPIES_FAILED = False
#: bytes of each piece a helper's copy thread reads and copies to the GPU (two buffers of it per thread:
#: small enough for every thread's to stay in the CPU's cache until the GPU has copied them)
GPU_PIECE_BYTES = _piece_bytes()
_HELPERS: list[ReaderProcess] = []
#: helpers being started in the background (:func:`copies_to_gpu`), not yet in :data:`_HELPERS`
_STARTING = 0
_HELPER_LOCK = threading.Lock()


def available() -> bool:
    """Whether readers may use a helper process here (Linux's ``memfd_create`` and ``preadv``, a Python
    to run it with, and not turned off by ``HYPERAPP_READ_PROCESS=0``)."""
    return (os.environ.get("HYPERAPP_READ_PROCESS", "1").strip() != "0" and hasattr(os, "memfd_create")
            and hasattr(os, "preadv") and helper_process.can_start())


def _gpu_copies_off() -> bool:
    """Whether helpers read into host memory even for the GPU: ``HYPERAPP_READ_TO_GPU=0``, or their GPU
    copies failed once in this process."""
    return _GPU_COPIES_FAILED or os.environ.get("HYPERAPP_READ_TO_GPU", "1").strip() == "0"


def copies_to_gpu(device: int, slot_bytes: int, slots: int, threads: int) -> bool:
    """Whether this process's helpers (:data:`MAX_HELPERS` of them) copy tiles to GPU ``device`` themselves.
    Where they do not yet, they are started in the background (``slots`` slots of ``slot_bytes`` each, not
    leased), and this says False meanwhile: the caller reads this cube in the process, and a later cube
    finds them running. Each start costs about 0.6 s (its CUDA context, its ring), which a batch's read
    stage would otherwise wait through, the second one mid-run when the next cube's reader wants it.

    False for good where they cannot run (no helper here, ``HYPERAPP_READ_TO_GPU=0``, or their GPU copies
    failed once in this process, which a start may find): then no host-ring helper is started instead and
    no memory is pinned."""
    global _STARTING
    if not available() or _gpu_copies_off():
        return False
    with _HELPER_LOCK:
        # (a helper with smaller slots counts: the reader's lease replaces it, as for any reader)
        if sum(h.device == device and not h.broken for h in _HELPERS) >= MAX_HELPERS:
            return True
        missing = MAX_HELPERS - len(_HELPERS) - _STARTING
        if missing <= 0:
            return False  # being started, or other helpers in their places (a later lease replaces them)
        _STARTING += missing
    try:
        threading.Thread(target=_start_gpu_helpers, args=(missing, device, slot_bytes, slots, threads),
                         name="hyperapp-reader-start", daemon=True).start()
    except RuntimeError:  # no thread to be had: this cube, and later ones, are read in the process
        with _HELPER_LOCK:
            _STARTING -= missing
    return False


def _on_device(device: int):
    """A context in which CUDA calls go to GPU ``device``."""
    import cupy

    return cupy.cuda.Device(device)


def _start_gpu_helpers(n: int, device: int, slot_bytes: int, slots: int, threads: int) -> None:
    """Start ``n`` helpers copying to GPU ``device`` (:func:`copies_to_gpu`'s background thread)."""
    global _STARTING, _GPU_COPIES_FAILED
    for _ in range(n):
        try:
            with _on_device(device):  # the ring is allocated on that GPU, whatever this thread's default
                h = ReaderProcess(slot_bytes, slots, threads, device)
        except Exception:  # noqa: BLE001  (no GPU copies here: such cubes are read in the process)
            with _HELPER_LOCK:
                _GPU_COPIES_FAILED = True
                _STARTING -= n
            return
        with _HELPER_LOCK:
            _HELPERS.append(h)
            _STARTING -= 1
            n -= 1


def lease(slot_bytes: int, slots: int, pinned: bool, threads: int, device: int | None = None) -> ReaderProcess | None:
    """One of the process's helpers (at most :data:`MAX_HELPERS`), leased to the caller (who must
    :meth:`ReaderProcess.release` it), with ``slots`` slots of at least ``slot_bytes``, page-locked when
    ``pinned``; None where there is none to be had (not :func:`available`, every helper leased by another
    reader, or its start failed): then the caller reads itself. A helper with smaller slots, or a stopped
    one, is replaced when it is free.

    ``device``: the GPU the tiles are for. Its helper then copies them there itself, into a ring on the
    GPU (:mod:`hyperapp.reading.helper_gpu`), unless ``HYPERAPP_READ_TO_GPU=0`` or that failed once in this
    process (then the ring is page-locked host memory, as without ``device``)."""
    global _GPU_COPIES_FAILED
    if not available():
        return None
    if device is not None and _gpu_copies_off():
        device = None
    with _HELPER_LOCK:
        for h in list(_HELPERS):
            if not h.serves(slot_bytes, slots, device) and h.lease():
                h.close()
                h.release()
                _HELPERS.remove(h)
        h = next((h for h in _HELPERS if h.serves(slot_bytes, slots, device) and h.lease()), None)
        if h is None:
            if len(_HELPERS) + _STARTING >= MAX_HELPERS:
                return None  # all in use (or being started): a reader of a cube that does not fit reads itself meanwhile
            try:
                h = ReaderProcess(slot_bytes, slots, threads, device)
            except Exception:  # noqa: BLE001  (no GPU copies here: the host ring, as before)
                if device is None:
                    return None
                _GPU_COPIES_FAILED = True
                try:
                    h = ReaderProcess(slot_bytes, slots, threads)
                except (OSError, ValueError):
                    return None
            _HELPERS.append(h)
            h.lease()
        try:
            if pinned:
                h.pin()
        except Exception:  # noqa: BLE001  (no pinning, no helper: the reader pins its own ring)
            h.release()
            return None
        return h


if __name__ == "__main__":
    # run as the package's module, not as __main__: the GPU copier (hyperapp.reading.helper_gpu) raises the package
    # module's ShortRead, which __main__'s own class would not recognise as a file cut short
    from hyperapp.reading.reader_process import serve as _serve

    _serve(*(int(a) for a in sys.argv[1:7]))
