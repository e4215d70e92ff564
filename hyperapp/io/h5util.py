"""Small readers of HDF5/NetCDF4 metadata shared by the product readers (h5py only, no netCDF4 library)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_hdf5(path: str | os.PathLike) -> bool:
    """Whether the file is HDF5 (NetCDF4 and HDF-EOS5 are), by its signature (at 0, or at 512 after a
    user block, as MATLAB v7.3 writes)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(520)
    except OSError:
        return False
    return head[:8] == HDF5_SIGNATURE or head[512:520] == HDF5_SIGNATURE


def open_h5(path: str | os.PathLike):
    """The file opened read-only with h5py, or None where it is not HDF5 or cannot be read."""
    if not Path(path).is_file() or not is_hdf5(path):
        return None
    import h5py

    try:
        return h5py.File(path, "r")
    except OSError:
        return None


def holds(path: str | os.PathLike, test) -> bool:
    """Whether ``path`` is an HDF5 file for which ``test(file)`` is true: a product reader's ``can_open``,
    looking at the file's structure (never its name); the file is closed again."""
    f = open_h5(path)
    if f is None:
        return False
    with f:
        return bool(test(f))


def text(v) -> str:
    """An attribute as text (bytes, 1-element arrays and lists of one unwrapped)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        if v.size == 1:
            return text(v.reshape(-1)[0])
        return " ".join(text(x) for x in v.reshape(-1))
    return str(v)


def number(v) -> float | None:
    """An attribute as one float (None when absent)."""
    if v is None:
        return None
    a = np.asarray(v).reshape(-1)
    if a.size == 0:
        return None
    if a.dtype.kind in "SUO":
        return float(text(a[0]))
    return float(a[0])


def numbers(v) -> np.ndarray:
    """An attribute (or dataset) as a 1-D float array. An attribute comes as h5py gives it: a NumPy array, a
    NumPy scalar (``np.bytes_`` for the fixed-length text netCDF-C and HDF-EOS5 write, ``np.float32``...), a
    ``str`` (variable-length text) or a list; only a dataset is read."""
    import h5py

    a = np.asarray(v[()] if isinstance(v, h5py.Dataset) else v)
    if a.dtype.kind in "SUO":
        a = np.asarray([float(x) for x in text(a).replace(",", " ").split()])
    return a.astype(np.float64).reshape(-1)


def fill_value(ds) -> float | None:
    """A NetCDF/HDF5 variable's ``_FillValue`` (or ``missing_value``) attribute, else None."""
    for key in ("_FillValue", "missing_value", "fill_value", "FillValue"):
        if key in ds.attrs:
            try:
                return number(ds.attrs[key])
            except (TypeError, ValueError):
                return None
    return None


def dim_names(ds) -> list[str | None]:
    """The NetCDF4 dimension names of a dataset's axes (its attached dimension scales), None where unnamed."""
    names: list[str | None] = []
    try:
        for d in ds.dims:
            if len(d):
                n = d[0].name.rsplit("/", 1)[-1]
                label = d.label
                names.append(label or n)
            else:
                names.append(d.label or None)
    except Exception:  # noqa: BLE001  (dimension scales are a hint only)
        return [None] * ds.ndim
    return names
