"""Reading and writing cubes, masks and results.

:func:`open_cube` picks the reader by what the file is (a small registry tried in order), so the CLI,
the GUI and the tests open files one way.
"""

from __future__ import annotations

import os
from pathlib import Path

from hyperapp.cube import Cube
from hyperapp.errors import CubeFormatError, CubeNotFoundError
from hyperapp.io.masks import read_labels, read_mask, read_pixels, read_truth, write_pixels
from hyperapp.io.writers import write_envi, write_geotiff, write_image, write_npy, write_png

HDF5_EXTENSIONS = (".h5", ".hdf5", ".he5", ".nc", ".hdf")

__all__ = [
    "open_cube", "read_mask", "read_labels", "read_pixels", "read_truth", "write_pixels",
    "write_envi", "write_geotiff", "write_image", "write_npy", "write_png",
]


#: file types that are never a cube's data, by extension: what they are
NOT_CUBES = {".png": "PNG image", ".jpg": "JPEG image", ".jpeg": "JPEG image", ".gif": "GIF image",
             ".bmp": "bitmap image", ".npy": "NumPy array (a mask?)", ".npz": "NumPy archive (a model?)",
             ".csv": "CSV table", ".txt": "text", ".json": "JSON", ".toml": "TOML (a job? use run)"}


def open_cube(path: str | os.PathLike, dataset: str | None = None) -> Cube:
    """Open a cube from ENVI, HDF5 or MATLAB ``.mat`` without reading its pixels.

    Parameters
    ----------
    path : path
        ``.hdr`` or ENVI data file, ``.h5``/``.hdf5``, or ``.mat``.
    dataset : str, optional
        HDF5 dataset path or MATLAB variable holding the cube (guessed when there is one 3-D array).
    """
    p = Path(path)
    if not p.exists():
        raise CubeNotFoundError("file not found", p)
    if p.is_dir():
        raise CubeFormatError("is a folder, not a cube file", p)
    ext = p.suffix.lower()
    if ext == ".mat":
        from hyperapp.io.matlab import open_mat

        return open_mat(p, dataset)
    if ext in HDF5_EXTENSIONS:
        from hyperapp.io.hdf5 import open_hdf5

        return open_hdf5(p, dataset)
    from hyperapp.io.envi import DATA_EXTENSIONS, is_envi, open_envi

    if ext in NOT_CUBES:  # an image, a mask or a table given where a cube goes (even beside a header of its name)
        raise CubeFormatError(f"is a {NOT_CUBES[ext]} file, not a cube: a cube is ENVI (.hdr + data), HDF5 or "
                              "MATLAB .mat", p)
    if is_envi(p) or ext in DATA_EXTENSIONS[1:]:
        return open_envi(p)
    with open(p, "rb") as fh:
        head = fh.read(8)
    if head == b"\x89HDF\r\n\x1a\n":
        from hyperapp.io.hdf5 import open_hdf5

        return open_hdf5(p, dataset)
    raise CubeFormatError("unknown cube format: expected ENVI (.hdr + data), HDF5 or MATLAB .mat", p)
