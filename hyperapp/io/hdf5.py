"""HDF5 cubes read lazily with h5py.

The cube dataset is the one the user names, or the single 3-D numeric dataset in the file. Its layout
comes from ``band_axis`` (``--band-axis``) when given, else an ``interleave``/``layout`` attribute, else a NetCDF
dimension named band(s)/wavelength(s), else the one axis whose length matches the wavelengths, else the smaller
end axis is taken as bands. The last two are guesses and the cube's ``notes`` say so (``info`` prints them).
Products whose layout is known (EMIT, PRISMA, Tanager, AVIRIS NetCDF) have their own readers (see
:func:`hyperapp.io.open_cube`).
Wavelengths come from a dataset attribute (``wavelength``/``wavelengths``) or a sibling dataset.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError, CubeNotFoundError

WAVELENGTH_NAMES = ("wavelength", "wavelengths", "Wavelength", "Wavelengths", "wl")
BANDS_FIRST = {"bsq", "bands_first", "brc", "bands,rows,cols"}
BANDS_LAST = {"bip", "bands_last", "rcb", "rows,cols,bands"}


def _h5_object(f, name: str, path: Path):
    """``f[name]``, or a :class:`CubeFormatError` naming the file and the object where it cannot be opened
    (an external or soft link to a file or object that is missing, a damaged object)."""
    try:
        return f[name]
    except (KeyError, OSError, RuntimeError) as exc:
        link = f.get(name, getlink=True)
        what = type(link).__name__.replace("ExternalLink", "an external link").replace("SoftLink", "a soft link")
        if hasattr(link, "filename"):
            what += f" to {link.filename}:{link.path}"
        elif hasattr(link, "path"):
            what += f" to {link.path}"
        said = what if what.startswith("a") else "it"
        raise CubeFormatError(f"cannot open {name!r}: {said} (missing or unreadable: {exc})", path) from exc


def _cube_datasets(f) -> list[str]:
    import h5py

    found: list[str] = []

    def visit(name):
        try:
            obj = f[name]
        except (KeyError, OSError, RuntimeError):  # a link to a missing file or object: not a cube here
            return
        if isinstance(obj, h5py.Dataset) and obj.ndim == 3 and np.issubdtype(obj.dtype, np.number):
            found.append(name)

    f.visit_links(visit) if hasattr(f, "visit_links") else f.visit(visit)
    return found


def _text(v) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.size == 1:
        return _text(v.reshape(-1)[0])
    return str(v)


def _wavelengths(f, ds) -> tuple[np.ndarray | None, str | None]:
    units = None
    for key in ("wavelength_units", "wavelength units", "units"):
        if key in ds.attrs:
            units = _text(ds.attrs[key])
    for name in WAVELENGTH_NAMES:
        if name in ds.attrs:
            return np.asarray(ds.attrs[name], dtype=float).ravel(), units
    parent = ds.parent
    for name in WAVELENGTH_NAMES:
        if name in parent and getattr(parent[name], "ndim", 0) == 1:
            w = parent[name]
            if units is None:
                for key in ("units", "unit"):
                    if key in w.attrs:
                        units = _text(w.attrs[key])
            return np.asarray(w[()], dtype=float), units
    return None, units


BAND_DIM_NAMES = ("band", "bands", "wavelength", "wavelengths", "spectral", "channel", "channels")


def axes_for(band_axis: int) -> tuple[int, int, int]:
    """(rows, cols, bands) stored axes when the bands are on ``band_axis`` (the other two in their order)."""
    rest = [a for a in (0, 1, 2) if a != band_axis]
    return (rest[0], rest[1], band_axis)


def _layout(ds, wl: np.ndarray | None, path, band_axis: int | None = None) -> tuple[tuple[int, int, int], str | None]:
    """The stored axes of (rows, cols, bands), and a note where they were not stated but guessed."""
    if band_axis is not None:
        return axes_for(band_axis), f"band axis {band_axis} as given (--band-axis)"
    for key in ("interleave", "layout", "axes"):
        if key in ds.attrs:
            v = _text(ds.attrs[key]).strip().lower().replace(" ", "")
            if v in BANDS_FIRST:
                return (1, 2, 0), None
            if v in BANDS_LAST:
                return (0, 1, 2), None
            raise CubeFormatError(f"dataset {ds.name}: unknown {key} attribute {v!r}", path)
    from hyperapp.io.h5util import dim_names

    named = [i for i, d in enumerate(dim_names(ds)) if d is not None and d.lower() in BAND_DIM_NAMES]
    if len(named) == 1:
        return axes_for(named[0]), None
    s = ds.shape
    if wl is not None:
        match = [i for i in range(3) if s[i] == wl.size]
        if len(match) == 1:
            return axes_for(match[0]), (f"band axis {match[0]} ({s[match[0]]} values) taken as the one whose length "
                                        f"is the {wl.size} wavelengths' (nothing in the file names it; --band-axis "
                                        "sets it)")
    axis = 0 if s[0] < s[2] else 2
    return axes_for(axis), (f"WARNING: nothing in the file says which axis of {tuple(s)} holds the bands: guessed "
                            f"axis {axis} (the smaller end axis, {s[axis]} values); set it with --band-axis "
                            "(band_axis in a job) if that is wrong")


def open_hdf5(path: str | os.PathLike, dataset: str | None = None, band_axis: int | None = None) -> Cube:
    """Open an HDF5 cube lazily (the file stays open for reads); ``band_axis``: the stored axis holding the
    bands (0, 1 or 2), for a file that does not say."""
    import h5py

    p = Path(path)
    if not p.is_file():
        raise CubeNotFoundError("file not found", p)
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        with open(p, "rb") as fh:
            if fh.read(3) == b"CDF":
                raise CubeFormatError("is classic NetCDF (version 3), which hyperapp does not read: convert it to "
                                      "NetCDF4 (nccopy -k nc4 IN OUT)", p) from exc
        raise CubeFormatError(f"not a readable HDF5 file ({exc})", p) from exc
    if dataset is not None:
        if dataset not in f:
            raise CubeFormatError(f"no dataset {dataset!r} in the file", p)
        ds = _h5_object(f, dataset, p)
        if not isinstance(ds, h5py.Dataset) or ds.ndim != 3:
            raise CubeFormatError(f"{dataset!r} is not a 3-D dataset", p)
    else:
        names = _cube_datasets(f)
        if not names:
            raise CubeFormatError("no 3-D numeric dataset in the file", p)
        if len(names) > 1:
            raise CubeFormatError(
                f"several 3-D datasets ({', '.join(names)}): name the cube with --dataset", p
            )
        ds = _h5_object(f, names[0], p)
    wl, units = _wavelengths(f, ds)
    axes, note = _layout(ds, wl, p, band_axis)
    from hyperapp.io.h5direct import direct_source

    store = StoredArray(direct_source(ds, p), axes)
    if wl is not None and wl.size != store.shape[2]:
        wl = None
    try:
        fwhm = np.asarray(ds.attrs["fwhm"], dtype=float).ravel() if "fwhm" in ds.attrs else None
        nodata = ds.attrs.get("nodata", ds.attrs.get("_FillValue"))
        if nodata is None:
            nodata = _user_fill_value(ds)
        default = ds.attrs.get("default_bands")
        bad = ds.attrs.get("bad_bands")
        map_info = ds.attrs.get("map_info")
        cube = Cube(
            store,
            name=p.stem,
            path=str(p),
            wavelengths=wl,
            wavelength_units=units,
            fwhm=fwhm if fwhm is not None and fwhm.size == store.shape[2] else None,
            bad_bands=np.asarray(bad, dtype=bool) if bad is not None and np.size(bad) == store.shape[2] else None,
            default_bands=tuple(int(b) for b in default[:3]) if default is not None else None,  # type: ignore[arg-type]
            map_info=[_text(m) for m in map_info] if map_info is not None else None,
            nodata=float(np.asarray(nodata).ravel()[0]) if nodata is not None else None,
            scale_factor=float(np.asarray(ds.attrs["reflectance_scale_factor"]).ravel()[0])
            if "reflectance_scale_factor" in ds.attrs else None,
            interleave="hdf5",
            notes=(note,) if note else (),
        )
    except (TypeError, ValueError, IndexError, OverflowError) as exc:
        raise CubeFormatError(f"a metadata attribute of {ds.name} (fwhm, nodata, bad_bands, default_bands, "
                              f"map_info or reflectance_scale_factor) is not usable: {exc}", p) from exc
    return cube


def _user_fill_value(ds):
    """The dataset's fill value when its creator set one (not HDF5's default 0, which is data)."""
    import h5py

    try:
        if ds.id.get_create_plist().fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED:
            v = ds.fillvalue
            return None if v is None else v
    except (AttributeError, ValueError, TypeError):
        pass
    return None
