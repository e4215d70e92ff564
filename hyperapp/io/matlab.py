"""MATLAB ``.mat`` cubes and masks, v5 (SciPy) and v7.3 (HDF5, through h5py).

The public benchmark scenes (ABU, San Diego, ...) ship as ``.mat`` files with the cube in a variable
such as ``data`` and the truth in one such as ``map``. The user may name the variable; otherwise the
only 3-D numeric array is the cube (the only 2-D one the mask). MATLAB v7.3 files store arrays in
column-major order, so h5py sees them with their axes reversed; they are turned back here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError, CubeNotFoundError

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _is_v73(p: Path) -> bool:
    with open(p, "rb") as fh:
        head = fh.read(520)
    return HDF5_SIGNATURE in head[:8] or head[512:520] == HDF5_SIGNATURE


def load_variables(path: str | os.PathLike, ndim: int) -> dict:
    """Numeric variables of ``ndim`` dimensions, in MATLAB's (row, col, ...) order.

    v7.3 arrays are returned as lazy h5py datasets wrapped in a transposing view when ``ndim == 3``.
    """
    p = Path(path)
    if not p.is_file():
        raise CubeNotFoundError("file not found", p)
    if _is_v73(p):
        import h5py

        f = h5py.File(p, "r")
        out = {}
        for k, v in f.items():
            if isinstance(v, h5py.Dataset) and v.ndim == ndim and np.issubdtype(v.dtype, np.number):
                out[k] = v
        return {"__v73__": True, **out}
    import scipy.io

    try:
        d = scipy.io.loadmat(p)
    except Exception as exc:
        raise CubeFormatError(f"not a readable MATLAB file ({exc})", p) from exc
    return {
        k: v
        for k, v in d.items()
        if not k.startswith("__") and isinstance(v, np.ndarray) and v.ndim == ndim and np.issubdtype(v.dtype, np.number)
    }


def pick_variable(found: dict, name: str | None, what: str, path) -> tuple[str, object]:
    names = [k for k in found if k != "__v73__"]
    if name is not None:
        if name not in names:
            raise CubeFormatError(
                f"no {what} variable {name!r} (found: {', '.join(names) or 'none'})", path
            )
        return name, found[name]
    if len(names) == 1:
        return names[0], found[names[0]]
    if not names:
        raise CubeFormatError(f"no {what} variable in the file", path)
    raise CubeFormatError(f"several {what} variables ({', '.join(names)}): name one", path)


def open_mat(path: str | os.PathLike, variable: str | None = None) -> Cube:
    """Open a cube from a ``.mat`` file (variable named, or the only 3-D array)."""
    p = Path(path)
    found = load_variables(p, 3)
    v73 = bool(found.pop("__v73__", False))
    name, arr = pick_variable(found, variable, "3-D cube", p)
    # v7.3: h5py shape is MATLAB's reversed: (bands, cols, rows) -> rows=axis 2, cols=axis 1, bands=0
    if v73:
        from hyperapp.io.h5direct import direct_source

        store = StoredArray(direct_source(arr, p), (2, 1, 0))
    else:
        store = StoredArray(np.asarray(arr))
    return Cube(store, name=f"{p.stem}:{name}", path=str(p), interleave="mat")


def read_mat_mask(path: str | os.PathLike, variable: str | None = None) -> np.ndarray:
    """A 2-D mask variable from a ``.mat`` file, as (rows, cols)."""
    p = Path(path)
    found = load_variables(p, 2)
    v73 = bool(found.pop("__v73__", False))
    _, arr = pick_variable(found, variable, "2-D mask", p)
    a = np.asarray(arr[()] if v73 else arr)
    return a.T if v73 else a
