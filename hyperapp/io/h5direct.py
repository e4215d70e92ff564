"""Reading an unfiltered HDF5 dataset's bytes straight from the file, in parallel, with the GIL released.

h5py holds Python's interpreter lock for the whole of each read, so a tile read by h5py on the reader's
thread stops the consumer's conversion, and the two run one after the other instead of side by side (an
EMIT-sized file: 0.34 GB/s through ``iter_float_tiles`` where h5py alone reads 0.84-1.38 GB/s; see
docs/performance.md). Where the dataset is stored plainly (no compression or other filter, not external or
virtual), its bytes can be read without HDF5 (HDF5 gives their file offsets: ``get_offset``, ``get_chunk_info``,
which count a user block, as MATLAB v7.3 files have, already):

* a **contiguous** dataset is one range of the file: :func:`direct_source` maps it (``np.memmap``), and the
  tile reader's ``preadv`` path (its threads and reading helper) serves it as it serves ENVI files;
* a **chunked** one is read by :class:`ChunkedDirect`: the chunk index is taken once from HDF5
  (``get_chunk_info``/``chunk_iter``), then each read takes, from every chunk it meets, the rows it needs
  (one contiguous range of that chunk) with ``os.preadv`` on a pool of threads, and copies them into place.

Anything else (compressed, shuffled, external, virtual, or an h5py too old to list chunks) stays the h5py
dataset.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            n = min(16, max(4, os.cpu_count() or 4))
            _POOL = ThreadPoolExecutor(n, thread_name_prefix="hyperapp-h5read")
        return _POOL


def direct_source(ds, path: str | os.PathLike) -> Any:
    """The fastest faithful reader of h5py dataset ``ds`` of file ``path``: a memory map (contiguous), a
    :class:`ChunkedDirect` (chunked, unfiltered), or ``ds`` itself."""
    try:
        import h5py

        if ds.ndim != 3 or ds.dtype.kind not in "biuf" or ds.is_virtual or ds.external or not hasattr(os, "preadv"):
            return ds
        plist = ds.id.get_create_plist()
        if plist.get_nfilters() != 0:
            return ds
        layout = plist.get_layout()
        if layout == h5py.h5d.CONTIGUOUS:
            off = ds.id.get_offset()
            if off is None:  # never written: h5py gives its fill value
                return ds
            return np.memmap(path, dtype=ds.dtype, mode="r", offset=int(off), shape=ds.shape)
        if layout == h5py.h5d.CHUNKED:
            return ChunkedDirect(ds, str(path))
    except (AttributeError, TypeError, ValueError, OSError, RuntimeError):
        pass
    return ds


def _parts(sl: slice, n: int, chunk: int):
    """For one axis: (chunk start, first, stop, step in the chunk's coordinates, out start, out stop) of each
    chunk that slice ``sl`` of an axis of ``n`` meets."""
    start, stop, step = sl.indices(n)
    if step < 1:
        raise ValueError("direct HDF5 reads take slices with a positive step")
    m = len(range(start, stop, step))
    if m == 0:
        return
    last = start + (m - 1) * step
    c = (start // chunk) * chunk
    o = 0
    while c <= last:
        first = start if start >= c else start + -(-(c - start) // step) * step
        if first < c + chunk and first <= last:
            hi = min(last, c + chunk - 1)
            k = (hi - first) // step + 1
            yield c, first - c, first - c + (k - 1) * step + 1, step, o, o + k
            o += k
        c += chunk


class ChunkedDirect:
    """An unfiltered chunked 3-D HDF5 dataset read with ``os.preadv`` in parallel (see the module's text).

    Presents ``shape``, ``dtype``, ``ndim``, NumPy slicing (three slices) and h5py's ``read_direct``.
    """

    def __init__(self, ds, path: str):
        self.path = path
        self.shape = tuple(int(s) for s in ds.shape)
        self.dtype = np.dtype(ds.dtype)
        self.ndim = len(self.shape)
        self.chunks = tuple(int(c) for c in ds.chunks)
        fill = ds.fillvalue
        self.fill = np.zeros((), self.dtype) if fill is None else np.asarray(fill, self.dtype)
        index: dict[tuple, int] = {}
        sid = ds.id

        def visit(info):
            index[tuple(int(v) for v in info.chunk_offset)] = int(info.byte_offset)

        if hasattr(sid, "chunk_iter"):
            try:
                sid.chunk_iter(visit)
            except (AttributeError, RuntimeError, TypeError):
                index.clear()
        if not index:
            for i in range(sid.get_num_chunks()):
                visit(sid.get_chunk_info(i))
        self.index = index
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

    def __del__(self):
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def __len__(self) -> int:
        return self.shape[0]

    def _selection(self, idx) -> tuple[slice, ...]:
        if idx is None:
            idx = ()
        if not isinstance(idx, tuple):
            idx = (idx,)
        idx = tuple(idx) + (slice(None),) * (self.ndim - len(idx))
        if len(idx) != self.ndim or not all(isinstance(s, slice) for s in idx):
            raise TypeError("a direct HDF5 read takes one slice per axis")
        return idx

    def __getitem__(self, idx) -> np.ndarray:
        sel = self._selection(idx)
        out = np.empty(tuple(len(range(*s.indices(n))) for s, n in zip(sel, self.shape)), self.dtype)
        self._read_into(out, sel)
        return out

    def read_direct(self, dest: np.ndarray, source_sel=None, dest_sel=None) -> None:
        """h5py's ``Dataset.read_direct``: the selection read into ``dest`` (or ``dest[dest_sel]``)."""
        target = dest if dest_sel is None else dest[dest_sel]
        self._read_into(target, self._selection(source_sel))

    def _read_into(self, out: np.ndarray, sel: tuple[slice, ...]) -> None:
        want = tuple(len(range(*s.indices(n))) for s, n in zip(sel, self.shape))
        if out.shape != want:
            raise ValueError(f"destination shape {out.shape} is not the selection's {want}")
        if 0 in want:
            return
        axes = [list(_parts(s, n, c)) for s, n, c in zip(sel, self.shape, self.chunks)]
        tasks = []
        for p0 in axes[0]:
            for p1 in axes[1]:
                for p2 in axes[2]:
                    tasks.append((p0, p1, p2))
        if len(tasks) == 1:
            self._one(out, *tasks[0])
            return
        futs = [_pool().submit(self._one, out, *t) for t in tasks]
        for f in futs:
            f.result()

    def _one(self, out: np.ndarray, p0, p1, p2) -> None:
        (c0, a0, b0, s0, o0, e0), (c1, a1, b1, s1, o1, e1), (c2, a2, b2, s2, o2, e2) = p0, p1, p2
        offset = self.index.get((c0, c1, c2))
        dst = out[o0:e0, o1:e1, o2:e2]
        if offset is None:  # a chunk never written holds the fill value
            dst[...] = self.fill
            return
        ch = self.chunks
        row_items = ch[1] * ch[2]
        buf = np.empty((b0 - a0) * row_items, self.dtype)
        mv = memoryview(buf.view(np.uint8)).cast("B")
        pos, want = 0, buf.nbytes
        at = offset + a0 * row_items * self.dtype.itemsize
        while pos < want:
            n = os.preadv(self._fd, [mv[pos:]], at + pos)
            if n <= 0:
                raise OSError(f"{self.path}: the file ends inside an HDF5 chunk (at byte {at + pos})")
            pos += n
        block = buf.reshape(b0 - a0, ch[1], ch[2])
        dst[...] = block[::s0, a1:b1:s1, a2:b2:s2]
