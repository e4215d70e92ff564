"""A lazy (rows, cols, bands) float32 array made of a product's stored images.

Products store what a detector wants in pieces: PRISMA keeps VNIR and SWIR apart, in descending
wavelength order, as integers to scale per detector; EnMAP L1B keeps VNIR and SWIR in two GeoTIFFs with a
gain and an offset per band. A :class:`BandStack` presents them as one float32 array in physical units
and ascending wavelength, read on demand: indexing it with three slices reads only that hyperslab of each
piece, scales it, marks fill values NaN, and orders the bands. It is the ``source`` of a
:class:`hyperapp.core.cube.StoredArray` (axes (0, 1, 2)), so :meth:`Cube.read` and the streamed tile
reader (:class:`hyperapp.reading.tiles.TileReader`, through its memory-map-less path) both read through it,
a block of rows at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Piece:
    """One stored image's share of a :class:`BandStack`.

    Attributes
    ----------
    source : array-like
        Anything NumPy-sliceable: an h5py dataset, a :class:`RasterBands` over a GeoTIFF, an ndarray.
    axes : tuple of 3 int
        The stored axis of (rows, cols, bands).
    bands : ndarray of int
        Stored band indices this piece gives, in the stack's order.
    gain, offset : ndarray of float or None
        Per stack band: value = stored * gain + offset (None: 1 and 0).
    fill : float or None
        Stored value meaning "no data": read as NaN.
    """

    source: Any
    axes: tuple[int, int, int]
    bands: np.ndarray
    gain: np.ndarray | None = None
    offset: np.ndarray | None = None
    fill: float | None = None


class BandStack:
    """Pieces joined along the band axis, read lazily as float32 (see the module's text).

    ``empty_pixel``: a stored value that, held by a pixel in every band read, makes the pixel no data (NaN
    in all its bands): PRISMA L2D leaves the grid outside its swath at DN 0 in every band, a value a real
    pixel has in some bands only.
    """

    dtype = np.dtype(np.float32)
    ndim = 3

    def __init__(self, pieces: list[Piece], empty_pixel: float | None = None):
        self.empty_pixel = empty_pixel
        if not pieces:
            raise ValueError("a band stack needs at least one piece")
        shapes = set()
        for p in pieces:
            s = p.source.shape
            shapes.add((s[p.axes[0]], s[p.axes[1]]))
            p.bands = np.asarray(p.bands, dtype=np.intp)
        if len(shapes) != 1:
            raise ValueError(f"the pieces' images differ in size: {sorted(shapes)}")
        (rows, cols), = shapes
        self.pieces = pieces
        self.starts = np.cumsum([0] + [len(p.bands) for p in pieces])
        self.shape = (int(rows), int(cols), int(self.starts[-1]))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx) -> np.ndarray:
        if not isinstance(idx, tuple):
            idx = (idx,)
        idx = tuple(idx) + (slice(None),) * (3 - len(idx))
        rows, cols, bands = idx
        if not all(isinstance(s, slice) for s in (rows, cols)):
            raise TypeError("a band stack is indexed with slices of rows and columns")
        nr = len(range(*rows.indices(self.shape[0])))
        nc = len(range(*cols.indices(self.shape[1])))
        want = np.arange(self.shape[2])[bands] if isinstance(bands, slice) else np.asarray(bands, dtype=np.intp)
        out = np.empty((nr, nc, want.size), np.float32)
        if nr == 0 or nc == 0 or want.size == 0:
            return out
        empty = None  # pixels holding empty_pixel in every band read so far
        for k, p in enumerate(self.pieces):
            a, b = self.starts[k], self.starts[k + 1]
            sel = np.flatnonzero((want >= a) & (want < b))
            if sel.size == 0:
                continue
            local = want[sel] - a  # positions within this piece
            stored = p.bands[local]
            lo, hi = int(stored.min()), int(stored.max()) + 1
            sidx: list[Any] = [None, None, None]
            sidx[p.axes[0]], sidx[p.axes[1]], sidx[p.axes[2]] = rows, cols, slice(lo, hi)
            block = np.asarray(p.source[tuple(sidx)])
            if tuple(p.axes) != (0, 1, 2):
                block = np.transpose(block, p.axes)
            pick = stored - lo
            if not (pick.size == block.shape[2] and np.array_equal(pick, np.arange(pick.size))):
                block = block[:, :, pick]
            if self.empty_pixel is not None:
                e = (block == self.empty_pixel).all(axis=2)
                empty = e if empty is None else empty & e
            vals = block.astype(np.float32)
            if p.gain is not None:
                vals *= p.gain[local].astype(np.float32)
            if p.offset is not None:
                vals += p.offset[local].astype(np.float32)
            if p.fill is not None:
                vals[block == p.fill] = np.nan
            if sel.size == want.size and np.array_equal(sel, np.arange(sel.size)):
                out = vals if vals.flags.c_contiguous else np.ascontiguousarray(vals)
            else:
                out[:, :, sel] = vals
        if empty is not None and empty.any():
            out[empty] = np.nan
        return out


def _sample_pixels(stack: BandStack, side: int):
    """(pixels, bands) bool: which values are data, at pixels spread over the image: for GeoTIFF pieces one
    decimated read each (rasterio takes a COG's overviews: a row of a COG's large tiles would decompress
    whole tiles of every band), else ``side`` rows spread over the image."""
    rows, cols, nb = stack.shape
    if all(isinstance(p.source, RasterBands) and tuple(p.axes) == (1, 2, 0) for p in stack.pieces):
        from rasterio.enums import Resampling

        h, w = min(rows, side), min(cols, side)
        parts = []
        for p in stack.pieces:
            a = p.source.ds.read([int(b) + 1 for b in p.bands], out_shape=(len(p.bands), h, w),
                                 resampling=Resampling.nearest)
            ok = np.isfinite(a) if a.dtype.kind == "f" else np.ones(a.shape, bool)
            if p.fill is not None:
                ok &= a != p.fill
            parts.append(ok.reshape(len(p.bands), -1).T)
        return np.concatenate(parts, axis=1)
    picks = np.unique(np.linspace(0, rows - 1, min(rows, side)).round().astype(int))
    return np.concatenate([np.isfinite(stack[int(r):int(r) + 1, :, :].reshape(-1, nb)) for r in picks])


def empty_bands(stack: BandStack, side: int = 64) -> tuple[np.ndarray, int]:
    """Bands that hold no value where the other bands do: a product's way of saying a band is bad by
    filling it with its no-data value (EnMAP L2A fills the bands at the edge of the 1.4 um water vapour
    absorption so). Read from pixels spread over the image (about ``side`` x ``side`` of them, or ``side``
    rows; the whole image would be read otherwise): a band is empty when it has no value in any sampled
    pixel where half the bands or more have one. Returns (bool per band, the number of such pixels sampled;
    0: nothing could be said)."""
    nb = stack.shape[2]
    ok = _sample_pixels(stack, side)
    pix = ok.sum(axis=1) * 2 >= nb
    if not pix.any():
        return np.zeros(nb, bool), 0
    return ~ok[pix].any(axis=0), int(pix.sum())


class RasterBands:
    """A rasterio dataset as a lazy (bands, rows, cols) array: slicing reads a window of some bands.

    The file is opened once and kept open; each read takes rasterio's window read of the listed bands.
    """

    def __init__(self, path: str, dataset=None):
        import rasterio

        self.path = path
        self.ds = dataset if dataset is not None else rasterio.open(path)
        self.shape = (self.ds.count, self.ds.height, self.ds.width)
        self.dtype = np.dtype(self.ds.dtypes[0])
        self.ndim = 3

    def __getitem__(self, idx) -> np.ndarray:
        from rasterio.windows import Window

        bands, rows, cols = idx
        br = range(*bands.indices(self.shape[0])) if isinstance(bands, slice) else list(bands)
        r0, r1, rs = rows.indices(self.shape[1])
        c0, c1, cs = cols.indices(self.shape[2])
        if len(br) == 0 or r1 <= r0 or c1 <= c0:
            return np.empty((len(br), max(0, len(range(r0, r1, rs))), max(0, len(range(c0, c1, cs)))),
                            self.dtype)
        win = Window(c0, r0, c1 - c0, r1 - r0)
        from rasterio.errors import RasterioError

        try:
            a = self.ds.read([b + 1 for b in br], window=win)
        except RasterioError as exc:  # a TIFF cut short or damaged: said for the file, not in GDAL's words
            from hyperapp.core.errors import CubeFormatError

            raise CubeFormatError(f"cannot read rows {r0}-{r1 - 1} (the file is cut short or damaged: "
                                  f"{' '.join(str(exc).split())[:120]})", self.path) from exc
        if rs != 1 or cs != 1:
            a = a[:, ::rs, ::cs]
        return a


#: what :func:`split_overlap`'s left-out bands are, as :attr:`hyperapp.core.cube.Cube.file_bands_left_out` says
OVERLAP_COPIES = "overlap copies"


def overlap_left_out(vnir_wl, swir_wl, kv, ks) -> tuple[tuple[int, str], ...]:
    """:attr:`~hyperapp.core.cube.Cube.file_bands_left_out`'s entry for :func:`split_overlap`'s choice (none where
    it kept every band): the VNIR and SWIR bands left out where the two detectors overlap."""
    n = len(vnir_wl) - len(kv) + len(swir_wl) - len(ks)
    return ((n, OVERLAP_COPIES),) if n else ()


def split_overlap(vnir_wl: np.ndarray, swir_wl: np.ndarray, units: str = "nm") -> tuple[np.ndarray, np.ndarray, str | None]:
    """Which bands of two detectors to keep where their wavelengths overlap: one copy of each wavelength.

    The overlap (SWIR's shortest wavelength to VNIR's longest) is cut at its middle: VNIR's bands below the
    cut and SWIR's from it on are kept, each detector's where it is farther from its edge (a detector is
    least sensitive at the ends of its range). Returns (VNIR indices kept, SWIR indices kept, the note to
    say, None where the two do not overlap).
    """
    v = np.asarray(vnir_wl, dtype=float)
    s = np.asarray(swir_wl, dtype=float)
    if v.size == 0 or s.size == 0 or s.min() > v.max():
        return np.arange(v.size), np.arange(s.size), None
    cut = (s.min() + v.max()) / 2.0
    kv, ks = np.flatnonzero(v < cut), np.flatnonzero(s >= cut)
    note = (f"VNIR and SWIR overlap at {s.min():g}-{v.max():g} {units}: kept VNIR below {cut:g} {units} and "
            f"SWIR from {cut:g} {units} on (left out {v.size - kv.size} VNIR and {s.size - ks.size} SWIR bands)")
    return kv, ks, note
