"""NASA EMIT L1B radiance and L2A reflectance (NetCDF4, read with h5py).

Layout (nasa/EMIT-Data-Resources ``emit_tools.py``; emit-sds SpectralUtil ``spec_io.py``): the cube is the
root variable ``reflectance`` (L2A RFL) or ``radiance`` (L1B RAD), (downtrack, crosstrack, bands) float32
with ``_FillValue`` -9999; the bands' centres, widths and a good-band flag are in the group
``sensor_band_parameters`` (``wavelengths``, ``fwhm``, ``good_wavelengths``), not beside the cube; the
pixels' places in the group ``location`` (``lat``, ``lon``, ``elev`` per swath pixel, and the geometry
lookup table ``glt_x``/``glt_y``, 1-based, 0 = none) with the orthorectified grid in the global attributes
``geotransform`` (GDAL order) and ``spatial_ref`` (WKT). The cube stays an h5py dataset: read as stored,
it streams at h5py's own rate.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid, Swath
from hyperapp.io.h5direct import direct_source
from hyperapp.io.h5util import dim_names, fill_value, holds, numbers, text

VARIABLES = {"reflectance": ("EMIT L2A surface reflectance", "reflectance (0-1)"),
             "radiance": ("EMIT L1B at-sensor radiance", None),
             "reflectance_uncertainty": ("EMIT L2A reflectance uncertainty", "reflectance (0-1), one standard deviation")}
BANDS = "sensor_band_parameters"


def _variable(f):
    for name in VARIABLES:
        if name in f and getattr(f[name], "ndim", 0) == 3:
            return name
    return None


def _mask_file(f) -> bool:
    """EMIT's L2A MASK: per-pixel flags (``mask``, with ``sensor_band_parameters/mask_bands``) and the packed
    ``band_mask``: no spectra."""
    return "mask" in f and BANDS in f and "mask_bands" in f[BANDS]


def can_open(path: str | os.PathLike) -> bool:
    """An HDF5 file with a root 3-D ``reflectance``/``radiance`` and a ``sensor_band_parameters`` group (or
    EMIT's L2A MASK file, to be refused as what it is)."""
    return holds(path, lambda f: (_variable(f) is not None and BANDS in f and "wavelengths" in f[BANDS])
                 or _mask_file(f))


def open_emit(path: str | os.PathLike) -> Cube:
    """Open an EMIT L1B/L2A NetCDF4 file lazily (see the module's text)."""
    import h5py

    p = Path(path)
    f = h5py.File(p, "r")
    if _mask_file(f) and _variable(f) is None:  # downloaded beside the RFL file, matched by a batch's glob
        f.close()
        raise CubeFormatError("an EMIT L2A MASK file (cloud, water and other flags per pixel), not spectra: "
                              "open the scene's EMIT_L2A_RFL file", p)
    name = _variable(f)
    if name is None:
        raise CubeFormatError("no 3-D reflectance or radiance variable at the file's root (EMIT layout)", p)
    ds = f[name]
    sbp = f[BANDS]
    wl = numbers(sbp["wavelengths"])
    nb = wl.size
    if ds.shape[2] != nb:
        raise CubeFormatError(f"{name} is {ds.shape}, and {BANDS}/wavelengths lists {nb} bands: EMIT's cube is "
                              "(downtrack, crosstrack, bands)", p)
    dims = dim_names(ds)
    if dims[2] is not None and dims[2] not in ("bands", "band", "wavelength", "wavelengths"):
        raise CubeFormatError(f"{name}'s last dimension is {dims[2]!r}, not bands", p)
    fwhm = numbers(sbp["fwhm"]) if "fwhm" in sbp else None
    good = numbers(sbp["good_wavelengths"]) if "good_wavelengths" in sbp else None
    units = text(sbp["wavelengths"].attrs.get("units", "nm")) or "nm"
    product, vunits = VARIABLES[name]
    if vunits is None:
        vunits = f"radiance ({text(ds.attrs['units'])})" if "units" in ds.attrs else "radiance"
    notes: list[str] = []
    order = np.argsort(wl, kind="stable")
    if not np.array_equal(order, np.arange(nb)):  # EMIT's are ascending; never seen otherwise
        raise CubeFormatError(f"{BANDS}/wavelengths are not in ascending order", p)
    return Cube(
        StoredArray(direct_source(ds, p), (0, 1, 2)),
        name=p.stem,
        path=str(p),
        wavelengths=wl,
        wavelength_units=units,
        fwhm=fwhm if fwhm is not None and fwhm.size == nb else None,
        bad_bands=(good == 0) if good is not None and good.size == nb else None,
        nodata=fill_value(ds),
        interleave="hdf5",
        geo=_geo(f, ds.shape[:2], notes),
        product=product,
        value_units=vunits,
        notes=tuple(notes),
    )


def grid_of(f) -> MapGrid | None:
    """The orthorectified grid of the global attributes ``geotransform`` and ``spatial_ref``."""
    if "geotransform" not in f.attrs or "spatial_ref" not in f.attrs:
        return None
    gt = numbers(f.attrs["geotransform"])
    if gt.size != 6:
        return None
    return MapGrid(tuple(gt), text(f.attrs["spatial_ref"]))


def _geo(f, shape, notes: list[str]) -> Swath | MapGrid | None:
    """The swath's lat/lon (and its GLT where usable); where the file has a location that cannot be used,
    ``notes`` says why (``info`` and the report then do not read as if the file had none)."""
    loc = f.get("location")
    if loc is None:
        return None
    if "lat" not in loc or "lon" not in loc:
        notes.append("location: the group 'location' has no lat/lon: the pixels are not placed")
        return None
    lat, lon = loc["lat"], loc["lon"]
    if tuple(lat.shape) != tuple(shape) or tuple(lon.shape) != tuple(shape):
        notes.append(f"location: lat {tuple(lat.shape)} / lon {tuple(lon.shape)} do not match the cube's "
                     f"{shape[0]} x {shape[1]} pixels: the pixels are not placed")
        return None
    glt = (loc["glt_x"], loc["glt_y"]) if "glt_x" in loc and "glt_y" in loc else None
    grid = grid_of(f) if glt is not None else None
    if glt is not None:
        why = glt_problem(glt, shape) or (None if grid is not None else "no geotransform/spatial_ref for its grid")
        if why:
            notes.append(f"location: the GLT is left out ({why}): the swath cannot be orthorectified")
            glt, grid = None, None
    return Swath(lat, lon, glt, grid)


def glt_problem(glt, shape) -> str | None:
    """Why a GLT (``glt_x``, ``glt_y``: 1-based swath columns and rows, 0 = no pixel, negative = a filled
    cell, by its magnitude) cannot map the grid onto a swath of ``shape``, or None when it can."""
    gx, gy = np.asarray(glt[0]), np.asarray(glt[1])
    if gx.ndim != 2 or gx.shape != gy.shape:
        return f"glt_x {gx.shape} and glt_y {gy.shape} are not one 2-D grid"
    ax, ay = np.abs(gx.astype(np.int64)), np.abs(gy.astype(np.int64))
    used = (ax > 0) & (ay > 0)
    if not used.any():
        return "it places no swath pixel (every cell is 0)"
    if ax.max() > shape[1] or ay.max() > shape[0]:
        return (f"it points outside the swath (columns up to {int(ax.max())}, rows up to {int(ay.max())} for "
                f"{shape[1]} x {shape[0]})")
    return None
