"""Reading and writing cubes, masks and results.

:func:`open_cube` picks the reader by what the file is (a small registry tried in order), so the CLI,
the GUI and the tests open files one way.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube
from hyperapp.core.errors import CubeFormatError, CubeNotFoundError, HyperappError, InputError
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


def holds_datasets(path: str | os.PathLike) -> bool:
    """Whether the file's format holds several arrays a dataset name chooses among (HDF5, MATLAB .mat)."""
    return Path(path).suffix.lower() in (".mat", *HDF5_EXTENSIONS)


def check_dataset_applies(path: str | os.PathLike, dataset: str | None) -> None:
    """Refuse a ``--dataset`` that the cube's format would ignore: only HDF5 and ``.mat`` files hold several
    arrays to choose from, and a dataset name given with another cube is a mistake (perhaps of file).
    :func:`open_named_cube` checks it for the command line and the window; a job's ``dataset`` applies to
    its HDF5 and ``.mat`` inputs among others, and is not checked here."""
    if dataset is not None and not holds_datasets(path):
        raise InputError(f"--dataset ({dataset!r}) names an HDF5 dataset or a .mat variable; this cube is not HDF5 "
                         "or .mat, and holds one image: leave --dataset out", path)


#: product readers tried in order on an HDF5 file (NetCDF4, HDF-EOS5): (module, function), each module's
#: ``can_open(path)`` looking at the file's structure, never its name
HDF5_PRODUCTS = (("hyperapp.io.emit", "open_emit"), ("hyperapp.io.prisma", "open_prisma"),
                 ("hyperapp.io.tanager", "open_tanager"), ("hyperapp.io.aviris", "open_aviris_nc"))


def open_cube(path: str | os.PathLike, dataset: str | None = None, band_axis: int | None = None) -> Cube:
    """Open a cube without reading its pixels: ENVI, a product (EMIT, PRISMA, EnMAP, AVIRIS NetCDF, Tanager,
    DESIS), a GeoTIFF/COG, a generic HDF5/NetCDF4 dataset or MATLAB ``.mat``.

    The reader is found from what the file is (its signature and structure, :data:`HDF5_PRODUCTS`), not its
    name; a product's reader knows its axes, wavelengths, scaling, no-data and bad bands.

    Parameters
    ----------
    path : path
        ``.hdr`` or ENVI data file, a product file (or an EnMAP METADATA.XML, spectral image or zip), a
        GeoTIFF, ``.h5``/``.nc``/``.he5``, or ``.mat``.
    dataset : str, optional
        HDF5 dataset path or MATLAB variable holding the cube (guessed when there is one 3-D array). Naming one
        reads that dataset generically, not as a product.
    band_axis : int, optional
        The stored axis (0, 1 or 2) of a generic HDF5 dataset that holds the bands, where the file does not say.
    """
    if not str(path).strip():  # Path("") is "." (a folder): say what was given instead
        raise CubeNotFoundError("no cube file given (the path is empty)")
    p = Path(path)
    if not p.exists():
        raise CubeNotFoundError("file not found", p)
    if p.is_dir():
        raise CubeFormatError("is a folder, not a cube file", p)
    if band_axis is not None and band_axis not in (0, 1, 2):
        raise InputError(f"--band-axis must be 0, 1 or 2 (a stored axis of the 3-D dataset), got {band_axis!r}", p)
    try:
        cube = _open_by_format(p, dataset, band_axis)
    except HyperappError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, OSError) as exc:
        # a reader meeting a file laid out otherwise than its format says (a product with pieces of different
        # sizes, an attribute that is no number): the file is bad, said in one line, never an internal error
        said = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise CubeFormatError(f"cannot read it as its format says ({said})", p) from exc
    return _usable(cube, p)


def _hdf5_product(p: Path):
    from importlib import import_module

    for mod, fn in HDF5_PRODUCTS:
        m = import_module(mod)
        if m.can_open(p):
            return getattr(m, fn)
    return None


def _band_axis_known(p: Path, band_axis: int, what: str) -> None:
    raise InputError(f"--band-axis ({band_axis}) is for a generic HDF5/NetCDF dataset whose band axis the file does not "
                     f"state; this file ({what}) states its layout: leave --band-axis out", p)


def _open_by_format(p: Path, dataset: str | None, band_axis: int | None = None) -> Cube:
    from hyperapp.io import enmap, geotiff
    from hyperapp.io.h5util import is_hdf5

    ext = p.suffix.lower()
    if ext == ".mat":
        from hyperapp.io.matlab import open_mat

        if band_axis is not None:
            _band_axis_known(p, band_axis, "MATLAB .mat, (rows, cols, bands)")

        return open_mat(p, dataset)
    if is_hdf5(p) or (ext in HDF5_EXTENSIONS and ext != ".hdf"):
        opener = _hdf5_product(p) if dataset is None else None
        if opener is not None:
            if band_axis is not None:
                _band_axis_known(p, band_axis, opener.__module__.rsplit(".", 1)[-1])
            return opener(p)
        from hyperapp.io.hdf5 import open_hdf5

        cube = open_hdf5(p, dataset, band_axis)
        product = _hdf5_product(p) if dataset is not None else None
        if product is not None:
            kind = product.__module__.rsplit(".", 1)[-1].upper()
            cube.notes = (*cube.notes, f"this file is a {kind} product: without --dataset it opens as the product's "
                          "cube (its axes, wavelengths, scaling, no-data and bad bands known)")
        return cube
    if band_axis is not None:
        _band_axis_known(p, band_axis, "not HDF5/NetCDF")
    if ext == ".zip" or ext == ".xml" or enmap.can_open(p):
        if enmap.can_open(p):
            return enmap.open_enmap(p)
        image = geotiff.image_of_metadata(p) if ext == ".xml" else None
        if image is not None:  # a DESIS product named by its METADATA.xml
            return geotiff.open_geotiff(image)
        raise CubeFormatError("is not an EnMAP product (no *-METADATA.XML with bandCharacterisation) nor a "
                              "product's METADATA.xml beside its *-SPECTRAL_IMAGE.tif", p)
    if geotiff.is_tiff(p):  # before ENVI: a TIFF beside an ENVI header (DESIS) is read as a TIFF, never raw
        return geotiff.open_geotiff(p)
    if ext == ".hdr":
        tif = geotiff.tiff_beside(p)
        if tif is not None:
            return geotiff.open_geotiff(tif, p)
    from hyperapp.io.envi import DATA_EXTENSIONS, is_envi, open_envi

    if ext in NOT_CUBES:  # an image, a mask or a table given where a cube goes (even beside a header of its name)
        raise CubeFormatError(f"is a {NOT_CUBES[ext]} file, not a cube: a cube is ENVI (.hdr + data), HDF5/NetCDF, "
                              "GeoTIFF or MATLAB .mat", p)
    if is_envi(p) or ext in DATA_EXTENSIONS[1:]:
        return open_envi(p)
    raise CubeFormatError("unknown cube format: expected ENVI (.hdr + data), HDF5/NetCDF (EMIT, PRISMA, Tanager, "
                          "AVIRIS), GeoTIFF (EnMAP, DESIS) or MATLAB .mat", p)


def product_file(path: str | os.PathLike) -> str:
    """The one file that stands for the cube ``path`` opens, as a real path: several files open the same
    product (a DESIS TIFF, the ENVI header and the METADATA.xml beside it; an EnMAP spectral image, its
    quality layers and quicklooks and its METADATA.XML), so a batch's glob that matches them runs it once."""
    from hyperapp.io import enmap, geotiff

    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".hdr":
        tif = geotiff.tiff_beside(p)
        if tif is not None:
            p = tif
    if p.suffix.lower() in (".tif", ".tiff", ".xml"):
        meta = enmap.product_metadata(p)
        if meta is not None:
            p = meta
        elif p.suffix.lower() == ".xml":  # DESIS: the METADATA.xml beside its SPECTRAL_IMAGE.tif
            p = geotiff.image_of_metadata(p) or p
    return os.path.realpath(p)


def _usable(cube: Cube, p: Path) -> Cube:
    """What every format's cube must be, checked once for all of them: at least one row, column and band
    (an HDF5 or .mat array of shape (32, 32, 0) was an internal error deep in a detector, and ``info``
    said "0 bands"), and real numbers (complex data was silently cut to its real part)."""
    if cube.rows < 1 or cube.cols < 1 or cube.bands < 1:
        raise CubeFormatError(f"the cube is empty: {cube.rows} rows x {cube.cols} columns x {cube.bands} bands", p)
    kind = np.dtype(cube.store.dtype).kind
    if kind == "c":
        raise CubeFormatError(f"complex data ({np.dtype(cube.store.dtype).name}) is not spectra hyperapp can use: "
                              "save its magnitude (or its real part) as a real-valued cube first", p)
    if kind not in "biuf":
        raise CubeFormatError(f"data of type {np.dtype(cube.store.dtype).name} is not numbers", p)
    if cube.wavelengths is not None:
        wl = np.asarray(cube.wavelengths, dtype=float)
        if wl.size and not np.isfinite(wl).all():
            raise CubeFormatError(f"the wavelengths hold NaN or Inf ({int((~np.isfinite(wl)).sum())} of {wl.size})", p)
        if wl.size > 1 and np.unique(wl[wl > 0]).size < 2:  # all 0, all the same: no band's place is known
            raise CubeFormatError(f"the wavelengths do not tell the bands apart ({wl.size} bands, "
                                  f"{np.unique(wl[wl > 0]).size} distinct wavelength(s) above 0): fix them in the file",
                                  p)
    return cube


def open_named_cube(path: str | os.PathLike, dataset: str | None = None, band_axis: int | None = None) -> Cube:
    """:func:`open_cube` for a cube a person named (the command line, the window): a ``--dataset`` its
    format would ignore is refused first (:func:`check_dataset_applies`)."""
    check_dataset_applies(path, dataset)
    return open_cube(path, dataset, band_axis)
