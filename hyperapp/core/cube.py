"""The hyperspectral cube model.

A :class:`Cube` is a (rows, cols, bands) view onto data that stays where it is until asked for: an
ENVI file is memory-mapped, an HDF5 dataset is read lazily, and subsetting (bands or a window) makes a
new Cube that still reads nothing. :meth:`Cube.read` and :meth:`Cube.iter_tiles` bring pixels into
memory as float32, a block of rows at a time, so a cube larger than RAM can still be scored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hyperapp.core.errors import InputError

#: Bytes of float32 pixels read per tile by :meth:`Cube.iter_tiles` (64 MiB).
TILE_BYTES = 64 * 2**20


class StoredArray:
    """A lazily read 3-D array presented as (rows, cols, bands).

    Wraps anything that supports NumPy basic slicing (``np.memmap``, ``h5py.Dataset``, an ndarray),
    with ``axes`` saying where rows, cols and bands sit in the stored order. Reads only the
    requested hyperslab.
    """

    def __init__(self, source: Any, axes: tuple[int, int, int] = (0, 1, 2)):
        self.source = source
        self.axes = axes  # stored axis of (rows, cols, bands)
        s = source.shape
        self.shape = (s[axes[0]], s[axes[1]], s[axes[2]])
        self.dtype = np.dtype(source.dtype)

    def read(self, rows: slice, cols: slice, bands: np.ndarray | slice) -> np.ndarray:
        """Read a block; returns an in-memory (r, c, b) array of the stored dtype."""
        idx: list[Any] = [None, None, None]
        idx[self.axes[0]], idx[self.axes[1]] = rows, cols
        # h5py wants sorted, unique fancy indices: read the covering slice, then pick bands.
        if isinstance(bands, slice):
            idx[self.axes[2]] = bands
            pick = None
        else:
            b = np.asarray(bands)
            lo, hi = int(b.min()), int(b.max()) + 1
            idx[self.axes[2]] = slice(lo, hi)
            pick = b - lo
        block = np.asarray(self.source[tuple(idx)])
        # stored order -> (rows, cols, bands)
        # output axis i is stored axis axes[i]
        if tuple(self.axes) != (0, 1, 2):
            block = np.transpose(block, self.axes)
        if pick is not None and not (len(pick) == block.shape[2] and np.all(pick == np.arange(len(pick)))):
            block = block[:, :, pick]
        return block


#: wavelength units as every label and line writes them (:func:`units_text`)
SHORT_UNITS = {"nanometers": "nm", "nanometer": "nm", "nanometres": "nm", "nanometre": "nm", "micrometers": "µm",
               "micrometer": "µm", "micrometres": "µm", "micrometre": "µm", "microns": "µm", "um": "µm"}


def units_text(units: str | None) -> str:
    """Wavelength units as every label writes them, whatever the file said: "nm" for ENVI's "Nanometers"
    and a product's "nm" alike (:data:`SHORT_UNITS`), other words in lower case ("Index" -> "index")."""
    if not units:
        return ""
    u = units.lower() if units[:1].isupper() and units[1:].islower() else units
    return SHORT_UNITS.get(u.lower(), u)


@dataclass
class Cube:
    """A hyperspectral image as (rows, cols, bands), with its metadata.

    Attributes
    ----------
    store : StoredArray
        Where the pixels live (memory map, lazy HDF5 dataset or array).
    name : str
        Short name for titles (file stem).
    path : str or None
        The file it came from.
    wavelengths : ndarray or None
        Band centres, one per band, in ``wavelength_units``.
    wavelength_units : str or None
        "nm", "um", ... as the file says.
    fwhm : ndarray or None
        Band widths.
    bad_bands : ndarray of bool or None
        True where a band is bad (ENVI ``bbl`` = 0).
    default_bands : tuple of int or None
        RGB band indices from the header.
    map_info : list of str or None
        ENVI ``map info`` fields (projection, tie point, pixel size, zone, ...).
    coordinate_system : str or None
        ENVI ``coordinate system string`` (WKT) when present.
    nodata : float or None
        ``data ignore value``.
    scale_factor : float or None
        ``reflectance scale factor``: stored values divided by it are reflectance.
    interleave : str
        "bsq", "bil", "bip" or "hdf5"/"mat" for other formats.
    geo : MapGrid, Swath or None
        Where the pixels lie on Earth (:mod:`hyperapp.core.geo`): ENVI's map info, a GeoTIFF's grid, a
        product's latitude/longitude arrays. Follows window subsetting.
    product : str or None
        What the file is ("EMIT L2A reflectance", "PRISMA L2D", "GeoTIFF", ...), said by ``info``.
    value_units : str or None
        What the values are ("reflectance (0-1)", "radiance (uW cm-2 sr-1 nm-1)", ...), where the file says.
    notes : tuple of str
        What the reader decided that the file did not state (a guessed band axis, a dropped overlap...),
        printed by ``info`` and kept in run reports.
    file_bands_left_out : tuple of (int, str)
        Bands the file holds that the reader left out, with what they are in a few words (``(5, "overlap
        copies")``; the notes say more): the status bar counts them beside the bad bands, so the cube's
        band count adds up to the file's.
    """

    store: StoredArray
    name: str = "cube"
    path: str | None = None
    wavelengths: np.ndarray | None = None
    wavelength_units: str | None = None
    fwhm: np.ndarray | None = None
    bad_bands: np.ndarray | None = None
    default_bands: tuple[int, int, int] | None = None
    map_info: list[str] | None = None
    coordinate_system: str | None = None
    nodata: float | None = None
    scale_factor: float | None = None
    interleave: str = "bip"
    byte_order: str = "little"
    rows_sel: slice = field(default_factory=lambda: slice(None))
    cols_sel: slice = field(default_factory=lambda: slice(None))
    bands_sel: np.ndarray | None = None
    geo: Any = None
    product: str | None = None
    value_units: str | None = None
    notes: tuple[str, ...] = ()
    file_bands_left_out: tuple[tuple[int, str], ...] = ()

    # ------------------------------------------------------------------ geometry
    @property
    def shape(self) -> tuple[int, int, int]:
        r = len(range(*self.rows_sel.indices(self.store.shape[0])))
        c = len(range(*self.cols_sel.indices(self.store.shape[1])))
        b = self.store.shape[2] if self.bands_sel is None else len(self.bands_sel)
        return (r, c, b)

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def bands(self) -> int:
        return self.shape[2]

    @property
    def dtype(self) -> np.dtype:
        return self.store.dtype

    @property
    def nbytes(self) -> int:
        r, c, b = self.shape
        return r * c * b * self.dtype.itemsize

    def _band_index(self) -> np.ndarray:
        return np.arange(self.store.shape[2]) if self.bands_sel is None else self.bands_sel

    # ------------------------------------------------------------------ subsetting
    def subset_bands(self, bands) -> Cube:
        """A Cube of the given bands (indices into this cube, or a boolean mask)."""
        b = np.asarray(bands)
        if b.dtype == bool:
            if b.shape != (self.bands,):
                raise InputError(f"band mask has {b.size} entries, cube has {self.bands} bands", self.path)
            b = np.flatnonzero(b)
        b = b.astype(np.intp)
        if b.size == 0 or b.min() < 0 or b.max() >= self.bands:
            raise InputError(f"band indices must be in 0..{self.bands - 1}", self.path)
        new = replace(self, bands_sel=self._band_index()[b])
        for attr in ("wavelengths", "fwhm", "bad_bands"):
            v = getattr(self, attr)
            if v is not None:
                setattr(new, attr, np.asarray(v)[b])
        new.default_bands = None
        return new

    def bands_left_out(self) -> np.ndarray:
        """Per band of this cube, how many stored bands lie between it and the next one and are not in it
        (left out by :meth:`good_bands` or a band list: a gap in the spectrum); 0 for the last band."""
        idx = self._band_index()
        gaps = np.maximum(np.abs(np.diff(idx)) - 1, 0) if idx.size > 1 else np.zeros(0, np.intp)
        return np.append(gaps, 0).astype(np.intp)[:idx.size]

    def good_bands(self) -> Cube:
        """This cube without its bad bands (the ENVI ``bbl`` list)."""
        if self.bad_bands is None or not self.bad_bands.any():
            return self
        if self.bad_bands.all():
            raise InputError("the header marks every band bad (bbl all 0): keep them with --all-bands "
                             "(all_bands = true in a job, File > Keep bad bands in the window)", self.path)
        return self.subset_bands(~self.bad_bands)

    def run_bands(self, all_bands: bool = False, bands=None, name: str = "--bands") -> Cube:
        """The bands a run takes, as the CLI, a job step and the window choose them: the header's good
        bands (all of them with ``all_bands``), then the listed ``bands`` of those (``"3,17,40"``,
        ``"10-20"`` or a list; 0-based)."""
        cube = self if all_bands else self.good_bands()
        if bands is None:
            return cube
        from hyperapp.core.values import band_indices, band_spec

        idx = band_indices(band_spec(bands, name), name)
        bad = [b for b in idx if b >= cube.bands]
        if bad:
            raise InputError(f"band {bad[0]} is outside the cube's {cube.bands} bands (0-based)", self.path)
        return cube.subset_bands(idx)

    def subset(self, rows: slice, cols: slice) -> Cube:
        """A spatial window (slices with step 1 or more) of this cube; reads nothing."""
        def compose(outer: slice, inner: slice, n: int) -> slice:
            o0, _o1, os_ = outer.indices(n)
            rng = range(*outer.indices(n))[inner]
            if len(rng) == 0:
                raise InputError("empty spatial subset", self.path)
            return slice(rng.start, rng.stop, rng.step) if os_ > 0 else slice(o0, None)

        new = replace(
            self,
            rows_sel=compose(self.rows_sel, rows, self.store.shape[0]),
            cols_sel=compose(self.cols_sel, cols, self.store.shape[1]),
        )
        if self.geo is not None:
            rr = range(self.rows)[rows]
            cr = range(self.cols)[cols]
            new.geo = self.geo.window(slice(rr.start, rr.stop, rr.step), slice(cr.start, cr.stop, cr.step))
        return new

    # ------------------------------------------------------------------ reading
    def read(self, rows: slice = slice(None), cols: slice = slice(None), dtype=np.float32) -> np.ndarray:
        """Read a window as an in-memory (r, c, b) array (float32 unless told; ``dtype=None``: as stored)."""
        base_r = range(*self.rows_sel.indices(self.store.shape[0]))[rows]
        base_c = range(*self.cols_sel.indices(self.store.shape[1]))[cols]
        rs = slice(base_r.start, base_r.stop, base_r.step)
        cs = slice(base_c.start, base_c.stop, base_c.step)
        if len(base_r) == 0 or len(base_c) == 0:
            b = self.bands
            return np.empty((len(base_r), len(base_c), b), dtype=dtype)
        bands = slice(None) if self.bands_sel is None else self.bands_sel
        block = self.store.read(rs, cs, bands)
        return np.ascontiguousarray(block, dtype=dtype)

    def tile_rows(self, tile_bytes: int = TILE_BYTES) -> int:
        """Rows per tile so that one float32 tile is about ``tile_bytes``."""
        return max(1, tile_bytes // max(1, self.cols * self.bands * 4))

    def iter_tiles(self, tile_bytes: int = TILE_BYTES) -> Iterator[tuple[slice, np.ndarray]]:
        """Yield ``(row_slice, float32 block)`` covering the cube, a band of rows at a time."""
        step = self.tile_rows(tile_bytes)
        for r0 in range(0, self.rows, step):
            rs = slice(r0, min(r0 + step, self.rows))
            yield rs, self.read(rs)

    def to_float32(self, progress=None) -> np.ndarray:
        """The whole cube in memory as float32 (read in tiles, with progress)."""
        out = np.empty(self.shape, dtype=np.float32)
        for rs, block in self.iter_tiles():
            out[rs] = block
            if progress is not None:
                progress(rs.stop / self.rows, "reading cube")
        return out

    def spectrum(self, row: int, col: int) -> np.ndarray:
        """One pixel's spectrum as float32."""
        return self.read(slice(row, row + 1), slice(col, col + 1))[0, 0]

    def band(self, index: int) -> np.ndarray:
        """One band as a float32 (rows, cols) image."""
        return self.subset_bands([index]).read()[:, :, 0]

    # ------------------------------------------------------------------ display helpers
    def rgb_bands(self) -> tuple[int, int, int]:
        """Bands for an RGB composite: the header's default bands, else those nearest 640/550/460 nm."""
        if self.default_bands is not None and all(0 <= b < self.bands for b in self.default_bands):
            return tuple(int(b) for b in self.default_bands)  # type: ignore[return-value]
        if self.wavelengths is not None and len(self.wavelengths) == self.bands:
            wl = np.asarray(self.wavelengths, dtype=float)
            scale = 1000.0 if (self.wavelength_units or "").lower().startswith(("u", "µ", "micro")) or wl.max() < 30 else 1.0
            wl_nm = wl * scale
            return tuple(int(np.argmin(np.abs(wl_nm - t))) for t in (640.0, 550.0, 460.0))  # type: ignore[return-value]
        b = self.bands
        return (min(b - 1, (2 * b) // 3), b // 2, b // 4)

    def describe(self) -> dict:
        """Facts for ``hyperapp --headless info``."""
        d = {
            "name": self.name,
            "path": self.path,
            "shape": list(self.shape),
            "dtype": str(self.dtype),
            "interleave": self.interleave,
            "byte_order": self.byte_order,
            "size_bytes": self.nbytes,
        }
        if self.wavelengths is not None:
            wl = np.asarray(self.wavelengths, dtype=float)
            d["wavelength_range"] = [float(wl.min()), float(wl.max())]
            d["wavelength_units"] = self.wavelength_units
        if self.bad_bands is not None:
            d["bad_bands"] = int(np.count_nonzero(self.bad_bands))
        if self.map_info:
            d["map_info"] = self.map_info
        if self.nodata is not None:
            d["nodata"] = self.nodata
        if self.product:
            d["product"] = self.product
        if self.value_units:
            d["value_units"] = self.value_units
        if self.geo is not None:
            from hyperapp.core.geo import describe

            d["location"] = describe(self.geo, self.rows, self.cols)
        if self.notes:
            d["notes"] = list(self.notes)
        if self.file_bands_left_out:
            d["file_bands_left_out"] = {why: n for n, why in self.file_bands_left_out}
        return d


def provenance(cube: Cube) -> dict:
    """What a run's report says of its cube's source: the product, the values' units, the wavelength range, the
    location and the reader's notes (only those the cube has)."""
    d = cube.describe()
    return {k: d[k] for k in ("product", "value_units", "wavelength_range", "wavelength_units", "location", "notes")
            if d.get(k) is not None}


def cube_from_array(data: np.ndarray, name: str = "array", **meta) -> Cube:
    """Wrap an in-memory (rows, cols, bands) array as a Cube."""
    a = np.asarray(data)
    if a.ndim != 3:
        raise InputError(f"a cube must be 3-D (rows, cols, bands), got shape {a.shape}")
    return Cube(StoredArray(a), name=name, **meta)
