"""Reading a cube at the disk's speed, tile by tile, with bounded memory.

:class:`TileReader` reads bands of rows *as stored* (the file's data type, byte order and interleave)
on a background thread, into a small ring of reusable buffers (page-locked ones when they go to the
GPU), while the caller converts the previous tile. Conversion -- byte swap, de-interleave to
(rows, cols, bands), the good bands, the cast to float32 and the no-data test -- is
:func:`convert_tile`, one function for both array modules: on the GPU it runs on the device, after the
raw bytes crossed the bus (fewer bytes than float32 for integer cubes).

No-data pixels become NaN in every band: pixels equal to the cube's no-data value (ENVI ``data ignore
value``, HDF5 fill value) in any band, or NaN/Inf in any band. Every consumer then tests ``isfinite``.

Raw files (ENVI) are read with ``preadv`` straight into the ring's buffers, split over the copy threads:
the system call copies from the page cache and releases the interpreter, where copying out of a memory
map takes a page fault every 4 KB (measured 16x slower on a 2-core host, and the faults of parallel
copies contend for the process's address-space lock). What ``preadv`` cannot reach in one range per row
block (a window of columns, every other row, HDF5) is copied out of the memory map, and after each tile
the reader drops the pages it mapped (``madvise(MADV_DONTNEED)``), so the process's resident memory does
not grow with the file (the data stay in the page cache for the next reader).
"""

from __future__ import annotations

import mmap
import os
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from hyperapp.core.cube import Cube
from hyperapp.core.cuda_start import RING, TILE_BYTES
from hyperapp.reading import reader_process
from hyperapp.reading.ranges import ShortRead, ended_early, read_ranges, split_ranges
from hyperapp.reading.reader_process import env_count as _env_count


def _cores() -> int:
    """This process's share of the machine's cores: ``HYPERAPP_CORES`` where it is a positive whole number
    (a local cluster's workers share the machine out this way, :func:`hyperapp.batch.runner.worker_envs`), else
    every core."""
    return _env_count("HYPERAPP_CORES") or os.cpu_count() or 2


def _read_threads() -> int:
    """:data:`COPY_THREADS`: ``HYPERAPP_READ_THREADS`` where it is a positive whole number, else one per
    core of this process's share (:func:`_cores`) up to 16."""
    return _env_count("HYPERAPP_READ_THREADS") or max(2, min(16, _cores()))


#: host threads reading one tile (``preadv`` and NumPy's copy both release the interpreter): one per
#: core up to 16. A kernel copy out of the page cache runs at 1-2 GB/s a core on the H100 hosts, so the
#: rate of the machine's page cache (16-25 GB/s read by 16 threads) needs as many; eight read 10 GB/s.
#: ``HYPERAPP_READ_THREADS`` sets it.
COPY_THREADS = _read_threads()
#: cores the reading helper process leaves to this one (its three stage threads, the tile reader's): a
#: batch's campaign of 2 GB cubes on a 16-core H100 host ran at 28.3-29.3 GB/s with 12 helper threads
#: against 25.3-28.7 with 16 (the stage threads then waited for a core: a probe thread woke 1.2-1.5 ms
#: late against 0.3) and 21.6-23.2 with 8; on a 32-core host 16 and 24 ran alike (``profile_stages.py``,
#: ``HYPERAPP_READ_THREADS``)
HELPER_SPARE_CORES = 4


def _helper_threads() -> int:
    """Threads of the reading helper process: ``HYPERAPP_READ_THREADS`` where given, else
    :data:`COPY_THREADS` less than the :data:`HELPER_SPARE_CORES` this process's stages need out of its
    share of the cores (a local cluster's worker given 16 of 32 cores reads with 12, and leaves 4 to its
    stages: given its share as ``HYPERAPP_READ_THREADS``, one worker alone on a 32-core H200 host read
    with 32 threads and ran a campaign at 27.0 GB/s, where one process reading with 16 ran it at 37.5)."""
    if _env_count("HYPERAPP_READ_THREADS"):
        return COPY_THREADS
    return max(2, min(COPY_THREADS, _cores() - HELPER_SPARE_CORES))


HELPER_THREADS = _helper_threads()
#: tiles the GPU's consumer holds while their copies to the device run
HELD = 2
#: the most bytes of one host-to-device copy: a tile's copy is queued as pieces of this size (see
#: :func:`copy_to_device`)
COPY_PIECE_BYTES = 16 << 20
#: tiles being read at once (at most a ring's buffers less the :data:`HELD` ones)
AHEAD = RING - HELD


def _mmap_of(a) -> mmap.mmap | None:
    """The ``mmap`` object under a NumPy memory map (or a view of one), if any."""
    while a is not None:
        m = getattr(a, "_mmap", None)
        if m is not None:
            return m
        a = getattr(a, "base", None)
    return None


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def copy_pool() -> ThreadPoolExecutor:
    """The process's one pool of copy threads (created on first use, shared by every reader)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="hyperapp-copy")
        return _POOL


def copy_parallel(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor | None = None) -> None:
    """``dst[:] = src`` (with conversion), split over the shared copy threads along the first axis."""
    if src.shape[0] < COPY_THREADS or src.size < 1 << 20:
        np.copyto(dst, src, casting="unsafe")
        return
    pool = pool or copy_pool()
    parts = np.array_split(np.arange(src.shape[0]), COPY_THREADS)
    futs = [pool.submit(np.copyto, dst[p[0]:p[-1] + 1], src[p[0]:p[-1] + 1], "unsafe") for p in parts if p.size]
    for f in futs:
        f.result()


def _read_ranges(fd: int, buf: memoryview, ranges: list[tuple[int, int, int]], name: str) -> None:
    """:func:`hyperapp.reading.ranges.read_ranges` in this process; a file that ends early is the cube's
    one-line error."""
    try:
        read_ranges(fd, buf, ranges)
    except ShortRead:
        raise ended_early(name) from None


@dataclass
class Tile:
    """Rows ``r0:r1`` of the cube as stored (``raw``: stored axis order and data type, a view of a ring
    buffer that stays valid until :meth:`TileReader.release`)."""

    r0: int
    r1: int
    raw: np.ndarray
    slot: int


class TileReader:
    """Iterate over a cube's tiles of rows, read ahead on a background thread.

    Parameters
    ----------
    cube : Cube
    tile_bytes : int
        Stored bytes per tile (the last one is shorter).
    pinned : bool
        Page-locked buffers (for asynchronous copies to the GPU).
    helper : bool
        Read in the process's reading helper (:mod:`hyperapp.reading.reader_process`), into its shared ring,
        where the file allows ``preadv`` and the helper can be had: for a batch's read stage, whose
        copy threads would otherwise wait on the compute stage's Python for the interpreter. Else, and
        where it cannot, this process's copy threads read.
    ring : int
        Buffers in the ring (at least :data:`RING`): all but the :data:`HELD` ones a GPU consumer holds are
        read at once (``ahead``). A batch's large cubes use more, for the reading helper to have work while
        its replies and the next requests cross between the processes.
    """

    def __init__(self, cube: Cube, tile_bytes: int = TILE_BYTES, pinned: bool = False, helper: bool = False,
                 ring: int = RING):
        self.cube = cube
        st = cube.store
        self.stored_shape = list(st.source.shape)
        c = len(range(*cube.cols_sel.indices(st.shape[1])))
        row_bytes = max(1, c * st.shape[2] * st.dtype.itemsize)
        self.rows_per = int(max(1, min(cube.rows, tile_bytes // row_bytes)))
        shape = list(self.stored_shape)
        shape[st.axes[0]] = self.rows_per
        shape[st.axes[1]] = c
        self.buf_shape = tuple(shape)
        # flat buffers of at least tile_bytes: page-locked ones of exactly TILE_BYTES come back from
        # CuPy's pinned pool (which reuses equal sizes), where cuda_start.prewarm put them
        self._ring_items = max(tile_bytes, int(np.prod(self.buf_shape)) * st.dtype.itemsize) // st.dtype.itemsize
        self._pinned, self._want_helper = pinned, helper
        self._mm = _mmap_of(st.source)
        self._file = self._file_layout()
        self._fd: int | None = None
        self._helper = None
        self._bufs: list[np.ndarray] | None = None
        self._free: queue.Queue = queue.Queue()
        self.ring = max(RING, int(ring))  # buffers; tiles in flight: all but the ones the consumer holds
        self.ahead = self.ring - HELD
        for k in range(self.ring):
            self._free.put(k)
        self._ready: queue.Queue = queue.Queue(maxsize=self.ring)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held: set[int] = set()  # slots handed to the consumer and not given back
        self._closed = False
        self._chain_lock = threading.Lock()
        self._next: TileReader | None = None  # started once this reader's reads are all done (then())
        self._read_all = False

    @property
    def helper_can_read(self) -> bool:
        """Whether the reading helper can read this cube's file (a raw file it can ``preadv``)."""
        return self._file is not None

    @property
    def slot_bytes(self) -> int:
        """Bytes of each of the ring's buffers."""
        return self._ring_items * self.cube.store.dtype.itemsize

    @property
    def bufs(self) -> list[np.ndarray]:
        """The ring's buffers, made when the reading starts (so that a reader made and never read
        leases no helper): the reading helper's shared slots where it was asked for and can be had (on
        the GPU, for a ``pinned`` reader whose helper copies there itself), else page-locked buffers from
        CuPy's pool (``pinned``), else plain ones."""
        if self._bufs is None:
            dtype, n = self.cube.store.dtype, self._ring_items
            if self._want_helper and self._file is not None:
                device = None
                if self._pinned:  # for the GPU: the helper may copy the tiles there itself
                    import cupy

                    device = cupy.cuda.runtime.getDevice()
                self._helper = reader_process.lease(self.slot_bytes, self.ring, self._pinned, HELPER_THREADS, device)
            if self._helper is not None:
                # a ring on the GPU holds the raw bytes as the GPU takes them (device_dtype)
                dt = dtype if self._helper.device is None else device_dtype(dtype)
                self._bufs = [self._helper.slot(k)[: n * dtype.itemsize].view(dt) for k in range(self.ring)]
            elif self._pinned:
                from hyperapp.core.backend import empty_pinned

                self._bufs = [empty_pinned((n * dtype.itemsize,), np.uint8).view(dtype) for _ in range(self.ring)]
            else:
                self._bufs = [np.empty(n, dtype) for _ in range(self.ring)]
        return self._bufs

    def _file_layout(self) -> tuple[str, int, int, int, int, int] | None:
        """Where ``preadv`` can read a tile's stored bytes straight from the file: ``(file name, byte
        offset of the data, first stored row, bytes of one stored row inside one outer index, outer
        indices, stored rows)``; None where it cannot (not a whole-file C-ordered memory map, or the
        cube a window of columns or every n-th row: then a tile is no longer one range per outer
        index, and the memory map serves)."""
        cube, st = self.cube, self.cube.store
        src = st.source
        if not (isinstance(src, np.memmap) and isinstance(getattr(src, "base", None), mmap.mmap)
                and src.flags.c_contiguous and getattr(src, "filename", None) and hasattr(os, "preadv")):
            return None
        rs = range(*cube.rows_sel.indices(st.shape[0]))
        cs = range(*cube.cols_sel.indices(st.shape[1]))
        if rs.step != 1 or cs.step != 1 or len(cs) != st.shape[1]:
            return None
        ax = st.axes[0]
        shape = src.shape
        # the stored axes after the rows axis are whole (every column, every band): rows r0:r1 of one
        # index of the axes before it (BSQ's band) are one range of the file
        inner = int(np.prod(shape[ax + 1:], dtype=np.int64)) * src.dtype.itemsize
        outer = int(np.prod(shape[:ax], dtype=np.int64))
        return str(src.filename), int(src.offset), rs.start, inner, outer, int(shape[ax])

    def _fill(self, k: int, r0: int, r1: int, pool: ThreadPoolExecutor | None = None) -> np.ndarray:
        """Ring buffer ``k`` holding cube rows r0:r1 as stored; returns its view."""
        view, futures = self._start(k, r0, r1, pool)
        for f in futures:
            f.result()
        return view

    def _start(self, k: int, r0: int, r1: int, pool: ThreadPoolExecutor | None = None) -> tuple[np.ndarray, list]:
        """Start filling ring buffer ``k`` with cube rows r0:r1 as stored: (its view, the futures of the
        reads still running; the buffer holds the rows once they are done). From the memory map the copy
        is done before this returns."""
        view = self.view(k, r1 - r0)
        if self._file is None:
            src = self.cube.store.source
            if hasattr(src, "read_direct") and src.dtype == view.dtype:
                # an HDF5 dataset (EMIT, Tanager, AVIRIS NetCDF, generic HDF5): h5py reads the hyperslab
                # straight into the ring's buffer, with no second copy
                src.read_direct(view, source_sel=self._selection(r0, r1))
                return view, []
            ax = self.cube.store.axes[0]
            copy_parallel(np.moveaxis(view, ax, 0), np.moveaxis(np.asarray(self._block(r0, r1)), ax, 0), pool)
            if self._mm is not None:  # drop the mapped pages: resident memory stays one ring
                try:
                    self._mm.madvise(mmap.MADV_DONTNEED)
                except (OSError, ValueError, AttributeError):
                    pass
            return view, []
        name, offset, first, inner, outer, stored_rows = self._file
        n = r1 - r0
        ranges = [(o * n * inner, offset + (o * stored_rows + first + r0) * inner, n * inner) for o in range(outer)]
        if self._helper is not None:  # one message to the helper, one reply (see hyperapp.reading.reader_process)
            return view, [self._helper.read(k, name, ranges)]
        if self._fd is None:
            self._fd = os.open(name, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        buf = memoryview(self.bufs[k].view(np.uint8)).cast("B")
        groups = split_ranges(ranges, COPY_THREADS)
        if len(groups) == 1 and pool is None:
            _read_ranges(self._fd, buf, groups[0], name)
            return view, []
        pool = pool or copy_pool()
        return view, [pool.submit(_read_ranges, self._fd, buf, g, name) for g in groups]

    def _selection(self, r0: int, r1: int) -> tuple:
        """The stored hyperslab of cube rows r0:r1, as slices in the stored axis order."""
        cube, st = self.cube, self.cube.store
        base_r = range(*cube.rows_sel.indices(st.shape[0]))[r0:r1]
        idx: list = [slice(None)] * 3
        idx[st.axes[0]] = slice(base_r.start, base_r.stop, base_r.step)
        idx[st.axes[1]] = cube.cols_sel
        return tuple(idx)

    def _block(self, r0: int, r1: int):
        """The stored hyperslab of cube rows r0:r1 (a view of the memory map, or a read)."""
        return self.cube.store.source[self._selection(r0, r1)]

    def start(self) -> None:
        """Start reading ahead now, before the consumer asks for the first tile: the ring is made and the
        first tiles read into it (as many as it holds) while the consumer is still busy elsewhere. A
        cube of one tile is read when it is iterated."""
        with self._chain_lock:
            if self._thread is not None or self._stop.is_set() or self.rows_per >= self.cube.rows:
                return
            self.bufs  # noqa: B018  (the ring made here, before the reading thread starts)
            thread = threading.Thread(target=self._produce, name="hyperapp-tile-reader", daemon=True)
            try:
                thread.start()
            except BaseException:
                # no thread, so nothing reads into the ring: the helper goes back, and a later start tries again
                helper, self._helper, self._bufs = self._helper, None, None
                if helper is not None:
                    helper.release()
                raise
            self._thread = thread

    def then(self, nxt: TileReader) -> None:
        """Start reader ``nxt`` (the next cube's) as soon as this one's reads are all done, so that the
        file system stays busy while this cube's last tiles still go to the GPU and its consumer
        finishes: a batch's read stage then has no gap between two cubes. Its ring is another one (the
        process's second reading helper, or page-locked buffers of its own)."""
        with self._chain_lock:
            if not self._read_all:
                self._next = nxt
                return
        _start_quietly(nxt)

    def _all_read(self) -> TileReader | None:
        """Every tile is read: the next reader waiting to start (:meth:`then`), if any (the caller starts
        it with :func:`_start_quietly` once its own consumer has all it needs)."""
        with self._chain_lock:
            self._read_all = True
            nxt, self._next = self._next, None
        return nxt

    def _produce(self) -> None:
        """Read the tiles into the ring, up to ``ahead`` at once: the copy threads start on the next
        tile's reads while the last ones of the tile before finish, instead of all waiting for the
        slowest at the end of every tile. Tiles are handed over in order, each once all of its reads
        are done; a buffer is never waited for while a finished tile is held back (the consumer may
        need it to give one back)."""
        pool = copy_pool()
        inflight: deque = deque()  # (Tile, futures of its reads)

        def hand_over() -> None:
            tile, futures = inflight.popleft()
            for f in futures:
                f.result()
            self._ready.put(tile)

        try:
            for r0 in range(0, self.cube.rows, self.rows_per):
                r1 = min(r0 + self.rows_per, self.cube.rows)
                while True:
                    try:
                        k = self._free.get_nowait()
                        break
                    except queue.Empty:
                        if not inflight:
                            k = self._free.get()
                            break
                        hand_over()
                if self._stop.is_set() or k is None:
                    return
                view, futures = self._start(k, r0, r1, pool)
                inflight.append((Tile(r0, r1, view, k), futures))
                while inflight and (len(inflight) > self.ahead or all(f.done() for f in inflight[0][1])):
                    hand_over()
            while inflight:
                hand_over()
            nxt = self._all_read()
        except BaseException as exc:  # noqa: BLE001  (handed to the consumer, which raises it)
            self._ready.put(exc)
            return
        finally:
            for _, futures in inflight:  # no read may still write into the ring once the reader stops
                for f in futures:
                    f.exception()
        self._ready.put(None)
        _start_quietly(nxt)  # after the end is handed over: the next reader's set-up never delays this cube

    def _one_tile(self) -> Iterator[Tile]:
        k = self._free.get()
        try:
            view = self._fill(k, 0, self.cube.rows)
        finally:
            self._close_file()
        _start_quietly(self._all_read())
        yield Tile(0, self.cube.rows, view, k)

    def view(self, k: int, n_rows: int) -> np.ndarray:
        """Ring buffer ``k`` as a contiguous array of ``n_rows`` rows (along the stored rows axis)."""
        shape = list(self.buf_shape)
        shape[self.cube.store.axes[0]] = n_rows
        return self.bufs[k].reshape(-1)[: int(np.prod(shape))].reshape(shape)

    def release(self, tile: Tile) -> None:
        """Give the tile's buffer back for the reader to fill again."""
        self._held.discard(tile.slot)
        self._free.put(tile.slot)
        self._let_helper_go()

    def __iter__(self) -> Iterator[Tile]:
        try:
            if self.rows_per >= self.cube.rows:
                # one tile: nothing to read ahead of, so no thread (its start and hand-off would be all the
                # overlap there is; a batch of small cubes pays them per cube)
                for tile in self._one_tile():
                    self._held.add(tile.slot)
                    yield tile
                return
            self.start()
            while True:
                item = self._ready.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                self._held.add(item.slot)
                yield item
        finally:
            self.close()

    def close(self) -> None:
        with self._chain_lock:  # a reader that stops early starts no next one (its consumer may be gone)
            self._stop.set()
            self._next = None
        self._free.put(None)
        if self._thread is not None:
            while self._thread.is_alive():
                try:  # unblock a producer waiting to hand over a tile
                    self._ready.get_nowait()
                except queue.Empty:
                    pass
                self._thread.join(timeout=0.05)
        self._close_file()
        self._closed = True
        self._let_helper_go()

    def _let_helper_go(self) -> None:
        """Give the helper back once the reader is closed (every read asked of it has been answered: the
        producer waits for them) and the consumer has given back every tile it was handed (a copy to the
        GPU may still read a slot the consumer holds)."""
        if self._closed and not self._held and self._helper is not None:
            helper, self._helper = self._helper, None
            helper.release()

    def _close_file(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _start_quietly(reader: TileReader | None) -> None:
    """Start a chained reader early (if there is one); where that fails, its own consumer starts it again
    in its turn and meets the error as its own (the cube before it is not failed by it)."""
    if reader is None:
        return
    try:
        reader.start()
    except Exception:  # noqa: BLE001  (see above)
        pass


def convert_tile(raw, cube: Cube, xp=np, out=None, mark: bool = True):
    """Raw stored tile -> float32 (rows, cols, bands) on ``xp``'s device, no-data pixels NaN.

    ``raw`` is in the stored axis order and data type; on the GPU it is the raw bytes after the
    copy, and every step here (byte swap, de-interleave, band selection, cast, no-data test) runs on
    the device. Returns ``out`` (allocated when not given). ``mark=False`` leaves the no-data test
    to the caller (once over the whole cube instead of once per tile).
    """
    st = cube.store
    dt = st.dtype
    a = raw
    if xp is not np and not dt.isnative:
        # CuPy holds native byte order only: the raw bytes arrive as unsigned integers (see
        # :func:`device_dtype`) and are swapped on the device
        b = raw.view(xp.uint8).reshape(raw.shape + (dt.itemsize,))[..., ::-1]
        a = xp.ascontiguousarray(b).view(dt.newbyteorder("=")).reshape(raw.shape)
    a = xp.transpose(a, st.axes)  # output axis i is stored axis axes[i]
    if cube.bands_sel is not None:
        a = a[:, :, xp.asarray(cube.bands_sel)]
    if out is None:
        out = xp.empty(a.shape, xp.float32)
    if xp is np:
        copy_parallel(out, a)
    else:
        out[...] = a
    if mark:
        mark_nodata(out, cube.nodata)
    return out


def device_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype raw bytes of ``dtype`` travel to the GPU as: itself, or an unsigned integer of its
    size when it is not in native byte order."""
    return dtype if dtype.isnative else np.dtype(f"u{dtype.itemsize}")


_ALL_FINITE = None


#: the largest value hyperapp computes with: a spectrum's squares summed over its bands, and a covariance's over
#: the pixels, stay within float32 (3.4e38) below it (1e30 values gave SAM and the RBFN scores of all 0 or 0.5)
MAX_MAGNITUDE = 1e15


def extremes(X) -> tuple[float, float]:
    """(largest, smallest) value of ``X``: two reductions on its device. NaN propagates through both and
    Inf shows in one, so both finite means every value is: the loaders' finiteness test, which then also
    serves :func:`check_magnitude`."""
    return float(X.max()), float(X.min())


def check_magnitude(cube: Cube, X, extremes_: tuple[float, float] | None = None) -> None:
    """An :class:`InputError` where ``X``'s finite values reach :data:`MAX_MAGNITUDE`: from its
    :func:`extremes` (``extremes_`` where the caller has them), or where NaN or Inf are among them, from
    the largest magnitude of the finite ones."""
    from hyperapp.core.backend import get_namespace
    from hyperapp.core.errors import InputError

    xp = get_namespace(X)
    if X.size == 0:
        return
    hi, lo = extremes(X) if extremes_ is None else extremes_
    if np.isfinite(hi) and np.isfinite(lo):
        big = max(abs(hi), abs(lo))
    else:
        big = float(xp.abs(xp.where(xp.isfinite(X), X, 0)).max())
    if big >= MAX_MAGNITUDE:
        raise InputError(f"values up to {big:.3g}: hyperapp computes in float32, where spectra this large overflow "
                         f"(values below {MAX_MAGNITUDE:.0e} work): rescale the cube (or give its header a "
                         "reflectance scale factor)", cube.path)


def no_data_error(cube: Cube, message: str):
    """The InputError for pixels with no data: ``message``, unless some bands of the cube hold no finite
    value in any pixel; then those bands are named, since one all-NaN band makes every pixel count as no
    data and the clicks or the pixels were not the problem. Reads the cube again, as stored (only on this
    error's path: the loaded pixels have their no-data pixels blanked whole)."""
    from hyperapp.core.errors import InputError

    finite = np.zeros(cube.bands, bool)
    big = 0.0  # the largest finite value as stored: beyond float32's range it became Inf, so no data
    step = max(1, (64 << 20) // max(1, cube.cols * cube.bands * 4))  # rows of about 64 MB as stored
    for r0 in range(0, cube.rows, step):  # the values as stored (the float tiles blank no-data pixels whole)
        rows = np.asarray(cube.read(slice(r0, min(r0 + step, cube.rows)), dtype=None))  # as stored
        ok = np.isfinite(rows)
        finite |= ok.reshape(-1, cube.bands).any(axis=0)
        if ok.any():
            big = max(big, float(np.abs(rows[ok]).max()))
    if big > float(np.finfo(np.float32).max):
        return InputError(f"values up to {big:.3g} exceed the float32 range hyperapp computes in (up to 3.4e38): "
                          "rescale the cube (or give its header a reflectance scale factor)", cube.path)
    dead = np.flatnonzero(~finite)
    if 0 < dead.size < cube.bands:
        wl = cube.wavelengths
        names = [f"{b}" + (f" at {float(wl[b]):g} {cube.wavelength_units or ''}".rstrip()
                           if wl is not None and b < len(wl) else "") for b in dead[:6]]
        message = (f"band{'s' if dead.size > 1 else ''} {', '.join(names)}{' ...' if dead.size > 6 else ''} "
                   f"(counted from 0) hold{'s' if dead.size == 1 else ''} no finite value in any pixel, so every pixel "
                   f"counts as no data: leave {'it' if dead.size == 1 else 'them'} out (--bands or a job's "
                   "bands; in the window, Band reduction's 'Detect on these bands'; or the header's bad band list)")
    return InputError(message, cube.path)


def finite_pixels(X):
    """Boolean (rows, cols): pixels whose every band is finite. On the GPU one reduction kernel
    reads the cube once (``isfinite(X).all(axis=2)`` writes and rereads a cube-sized temporary)."""
    from hyperapp.core.backend import get_namespace

    xp = get_namespace(X)
    if xp is np:
        return np.isfinite(X).all(axis=2)
    global _ALL_FINITE
    if _ALL_FINITE is None:
        _ALL_FINITE = xp.ReductionKernel("T x", "bool y", "isfinite(x)", "a && b", "y = a", "true",
                                         "hyperapp_all_finite")
    return _ALL_FINITE(X, axis=2)


def mark_nodata(tile, nodata: float | None) -> None:
    """Set every band of a pixel to NaN where a band holds ``nodata`` or NaN/Inf (in place)."""
    from hyperapp.core.backend import get_namespace

    xp = get_namespace(tile)
    if nodata is None and tile.dtype.kind == "f":
        # one reduction tells whether any value is non-finite (the common case: none)
        if bool(xp.isfinite(tile.sum(dtype=xp.float64))):
            return
    bad = ~finite_pixels(tile)
    if nodata is not None:
        bad |= (tile == np.float32(nodata)).any(axis=2)
    if bool(bad.any()):
        tile[bad] = np.nan


def iter_float_tiles(cube: Cube, xp=np, tile_bytes: int | None = None, out=None, helper: bool = False,
                     reader: TileReader | None = None):
    """Yield ``(r0, r1, tile)``: float32 (rows, cols, bands) tiles on ``xp``'s device, no-data pixels NaN.

    Tiles are read ahead on a thread; on the GPU each tile's raw bytes go through page-locked memory on
    an asynchronous copy and are converted on the device while the next tile is read. A tile is valid
    until the next one is asked for, unless ``out`` (the whole cube's array) is given: then each tile is
    converted straight into ``out[r0:r1]``, with no second copy. ``reader``: the cube's
    :class:`TileReader`, made (and perhaps started) by the caller, page-locked on the GPU; by default
    one of ``tile_bytes`` tiles (``helper``: see :class:`TileReader`).
    """
    gpu = xp is not np
    reader = reader or TileReader(cube, tile_bytes or TILE_BYTES, pinned=gpu, helper=helper)
    if not gpu:
        for t in reader:
            try:
                tile = convert_tile(t.raw, cube, np, None if out is None else out[t.r0:t.r1])
            finally:
                reader.release(t)
            yield t.r0, t.r1, tile
        return
    import cupy

    stream = copy_stream()
    ddt = device_dtype(cube.store.dtype)
    pending: list = []  # (tile, event) whose host buffer may still be being copied
    try:
        for t in reader:
            with stream:
                try:
                    if isinstance(t.raw, cupy.ndarray):  # the reading helper copied it to the device
                        d = t.raw.view(ddt)
                    else:
                        d = cupy.empty(t.raw.shape, ddt)  # from CuPy's pool: no allocation after the first tiles
                        copy_to_device(d, t.raw.view(ddt), stream)
                except BaseException:
                    reader.release(t)  # not yet pending: given back here, or the reader's helper never goes back
                    raise
                pending.append((t, stream.record()))
                # queued on the same stream, after the copy; the no-data test of a whole cube runs once
                # in read_float32, so no tile waits on the host for it
                tile = convert_tile(d, cube, cupy, None if out is None else out[t.r0:t.r1], mark=out is None)
            # the caller's stream waits for the tile on the device; the host only waits to hand a buffer
            # back to the reader, keeping one free for it to fill
            cupy.cuda.get_current_stream().wait_event(stream.record())
            while len(pending) > HELD:
                pt, ev = pending.pop(0)
                ev.synchronize()
                reader.release(pt)
            yield t.r0, t.r1, tile
    finally:
        for pt, ev in pending:
            ev.synchronize()
            reader.release(pt)


def copy_to_device(d, h: np.ndarray, stream) -> None:
    """``d[...] = h`` (a device array from a host one of its shape) queued on ``stream``, in pieces of
    at most :data:`COPY_PIECE_BYTES` (asynchronous where ``h`` is page-locked).

    Why pieces: the GPU's copy engine takes the copies queued by a process's streams in turn, one copy at
    a time. The compute stage's own small copies (sample indices, whitening matrices) it then waits for
    queue behind the read stage's: behind a whole 128 MB tile, 2.4 ms each time, behind a piece, 0.3 ms.
    A campaign cube's RBFN compute stage took 29-38 ms alone, 45-49 ms beside a thread of the same
    process copying 128 MB tiles back to back and 33-35 ms beside 16 MB ones (16-core H200 host,
    ``scripts/profile_compute.py --contend h2dt128,h2dt16``). A batch's large cubes come through the
    reading helper, which copies them to the GPU from its own context (:mod:`hyperapp.reading.helper_gpu`); this
    serves where it cannot and the ring is in host memory.
    """
    import cupy

    n = h.nbytes
    piece = COPY_PIECE_BYTES
    if piece <= 0 or n <= piece or not (h.flags.c_contiguous and d.flags.c_contiguous) or d.nbytes != n:
        d.set(h, stream=stream)
        return
    rt = cupy.cuda.runtime
    src, dst = h.ctypes.data, d.data.ptr
    for o in range(0, n, piece):
        rt.memcpyAsync(dst + o, src + o, min(piece, n - o), rt.memcpyHostToDevice, stream.ptr)


def copy_stream():
    """This thread's stream for copying tiles to the current GPU, made once and kept
    (:func:`~hyperapp.core.backend.kept_stream`): a new stream per cube (a batch reads thousands) would
    allocate every tile buffer afresh."""
    from hyperapp.core.backend import kept_stream

    return kept_stream("tile copies", per_thread=True)


def read_float32(cube: Cube, xp=np, progress=None, tile_bytes: int | None = None, helper: bool = False,
                 reader: TileReader | None = None):
    """The whole cube as float32 (rows, cols, bands) on ``xp``'s device (NumPy or CuPy), no-data pixels
    NaN, read with :func:`iter_float_tiles` (``helper``, ``reader``: see there)."""
    out = xp.empty(cube.shape, xp.float32)
    for _, r1, _ in iter_float_tiles(cube, xp, tile_bytes, out, helper, reader):
        if progress is not None:
            progress(r1 / max(cube.rows, 1), "reading the cube" if xp is np else "moving the cube to the GPU")
    if xp is not np:
        mark_nodata(out, cube.nodata)  # the tiles were converted unmarked: one test over the whole cube
    return out
