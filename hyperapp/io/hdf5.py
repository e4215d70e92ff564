"""HDF5 cubes read lazily with h5py.

The cube dataset is the one the user names, or the single 3-D numeric dataset in the file. Its layout,
(bands, rows, cols) or (rows, cols, bands), comes from an ``interleave``/``layout`` attribute, else from
which axis matches the number of wavelengths, else the smaller end axis is taken as bands.
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


def _layout(ds, wl: np.ndarray | None, path) -> tuple[int, int, int]:
    for key in ("interleave", "layout", "axes"):
        if key in ds.attrs:
            v = _text(ds.attrs[key]).strip().lower().replace(" ", "")
            if v in BANDS_FIRST:
                return (1, 2, 0)
            if v in BANDS_LAST:
                return (0, 1, 2)
            raise CubeFormatError(f"dataset {ds.name}: unknown {key} attribute {v!r}", path)
    s = ds.shape
    if wl is not None:
        if s[2] == wl.size and s[0] != wl.size:
            return (0, 1, 2)
        if s[0] == wl.size and s[2] != wl.size:
            return (1, 2, 0)
    return (1, 2, 0) if s[0] < s[2] else (0, 1, 2)


def open_hdf5(path: str | os.PathLike, dataset: str | None = None) -> Cube:
    """Open an HDF5 cube lazily (the file stays open for reads)."""
    import h5py

    p = Path(path)
    if not p.is_file():
        raise CubeNotFoundError("file not found", p)
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
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
    axes = _layout(ds, wl, p)
    store = StoredArray(ds, axes)
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
