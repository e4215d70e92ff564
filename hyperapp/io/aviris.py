"""AVIRIS-3 / AVIRIS-NG orthorectified NetCDF4 products (``*_RFL_ORT.nc``, ``*_RDN_ORT.nc``; h5py).

Layout: the group ``reflectance`` (or ``radiance``) holds the variable of its name, (bands, y, x) with
``_FillValue``, and the 1-D ``wavelength`` and ``fwhm``; the grid is a CF grid-mapping variable
(``transverse_mercator``, in the group or at the root) whose attributes ``spatial_ref`` (WKT) and
``GeoTransform`` (GDAL order, as text) place the pixels. Bad bands: a ``good_wavelengths`` or ``bbl``
variable where the file has one (1 good, 0 bad).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid
from hyperapp.io.h5direct import direct_source
from hyperapp.io.h5util import dim_names, fill_value, holds, numbers, text

VARIABLES = {"reflectance": ("AVIRIS orthorectified surface reflectance", "reflectance (0-1)"),
             "radiance": ("AVIRIS orthorectified at-sensor radiance", None)}


def _variable(f):
    for name in VARIABLES:
        g = f.get(name)
        if g is not None and hasattr(g, "keys") and name in g and g[name].ndim == 3 and "wavelength" in g:
            return name
    return None


def can_open(path: str | os.PathLike) -> bool:
    """A NetCDF4 file with a group ``reflectance``/``radiance`` holding that 3-D variable and ``wavelength``."""
    return holds(path, lambda f: _variable(f) is not None)


def _grid(f, group, ds) -> MapGrid | None:
    names = []
    gm = ds.attrs.get("grid_mapping")
    if gm is not None:
        names.append(text(gm).split(":")[0].strip())
    names.append("transverse_mercator")
    for n in names:
        for where in (group, f):
            v = where.get(n)
            if v is not None and "GeoTransform" in v.attrs and ("spatial_ref" in v.attrs or "crs_wkt" in v.attrs):
                gt = numbers(v.attrs["GeoTransform"])
                wkt = text(v.attrs.get("spatial_ref", v.attrs.get("crs_wkt")))
                if gt.size == 6:
                    return MapGrid(tuple(gt), wkt)
    return None


def open_aviris_nc(path: str | os.PathLike) -> Cube:
    """Open an AVIRIS-3/AVIRIS-NG orthorectified NetCDF4 product lazily (see the module's text)."""
    import h5py

    p = Path(path)
    f = h5py.File(p, "r")
    name = _variable(f)
    if name is None:
        raise CubeFormatError("no group reflectance/radiance holding that 3-D variable and wavelength", p)
    g = f[name]
    ds = g[name]
    wl = numbers(g["wavelength"])
    dims = dim_names(ds)
    if ds.shape[0] == wl.size:
        axes = (1, 2, 0)
    elif ds.shape[2] == wl.size and (dims[2] or "").startswith(("band", "wavelength")):
        axes = (0, 1, 2)
    else:
        raise CubeFormatError(f"{name} is {ds.shape}, and wavelength lists {wl.size} bands: expected "
                              "(bands, y, x)", p)
    units = text(g["wavelength"].attrs.get("units", "nm")) or "nm"
    fwhm = numbers(g["fwhm"]) if "fwhm" in g else None
    good = None
    for key in ("good_wavelengths", "bbl"):
        for where in (g, f):
            if key in where:
                good = numbers(where[key])
                break
        if good is not None:
            break
    order = np.argsort(wl, kind="stable")
    if not np.array_equal(order, np.arange(wl.size)):
        raise CubeFormatError("the wavelengths are not in ascending order", p)
    product, vunits = VARIABLES[name]
    if vunits is None:
        vunits = f"radiance ({text(ds.attrs['units'])})" if "units" in ds.attrs else "radiance"
    return Cube(
        StoredArray(direct_source(ds, p), axes),
        name=p.stem,
        path=str(p),
        wavelengths=wl,
        wavelength_units=units,
        fwhm=fwhm if fwhm is not None and fwhm.size == wl.size else None,
        bad_bands=(good == 0) if good is not None and good.size == wl.size else None,
        nodata=fill_value(ds),
        interleave="hdf5",
        geo=_grid(f, g, ds),
        product=product,
        value_units=vunits,
    )
