"""Planet Tanager orthorectified products (HDF-EOS5, read with h5py).

Layout: the grid ``HDFEOS/GRIDS/HYP`` holds ``Data Fields/surface_reflectance`` (or ``toa_radiance``), (band,
y, x), with the attributes ``wavelengths``, ``fwhm`` and ``good_wavelengths`` (and ``_FillValue``); the
grid's place is HDF-EOS5's ``HDFEOS INFORMATION/StructMetadata.0`` text (``XDim``, ``YDim``,
``UpperLeftPointMtrs``, ``LowerRightMtrs``, ``Projection``, ``ZoneCode``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid
from hyperapp.io.h5direct import direct_source
from hyperapp.io.h5util import fill_value, holds, numbers, text

GRID = "HDFEOS/GRIDS/HYP/Data Fields"
VARIABLES = {"surface_reflectance": ("Planet Tanager surface reflectance", "reflectance (0-1)"),
             "toa_radiance": ("Planet Tanager top-of-atmosphere radiance", None)}


def _variable(f):
    if GRID not in f:
        return None
    for name in VARIABLES:
        if name in f[GRID] and f[GRID][name].ndim == 3:
            return name
    return None


def can_open(path: str | os.PathLike) -> bool:
    """An HDF-EOS5 file with ``HDFEOS/GRIDS/HYP/Data Fields/surface_reflectance`` (or ``toa_radiance``)."""
    return holds(path, lambda f: _variable(f) is not None)


def _dms(v: float) -> float:
    """HDF-EOS's packed degrees (DDDMMMSSS.SS) as decimal degrees."""
    sign = -1.0 if v < 0 else 1.0
    v = abs(v)
    d = int(v // 1_000_000)
    m = int((v - d * 1_000_000) // 1000)
    s = v - d * 1_000_000 - m * 1000
    return sign * (d + m / 60.0 + s / 3600.0)


def grid_from_struct(meta: str, name: str = "HYP") -> MapGrid | None:
    """The :class:`MapGrid` of grid ``name`` in an HDF-EOS5 ``StructMetadata.0`` (UTM or geographic)."""
    m = re.search(r'GridName="' + re.escape(name) + r'"(.*?)END_GROUP=GRID_', meta, re.S)
    if m is None:
        return None
    g = m.group(1)

    def field(key):
        r = re.search(r"\b" + key + r"=([^\n]+)", g)
        return r.group(1).strip() if r else None

    try:
        nx, ny = int(field("XDim")), int(field("YDim"))
        ul = [float(v) for v in field("UpperLeftPointMtrs").strip("()").split(",")]
        lr = [float(v) for v in field("LowerRightMtrs").strip("()").split(",")]
    except (TypeError, ValueError, AttributeError):
        return None
    proj = (field("Projection") or "").upper()
    if "UTM" in proj:
        zone = int(field("ZoneCode") or 0)
        if zone == 0:
            return None
        crs = f"EPSG:{(32700 if zone < 0 else 32600) + abs(zone)}"
    elif "GEO" in proj:
        ul, lr = [_dms(v) for v in ul], [_dms(v) for v in lr]
        crs = "EPSG:4326"
    else:
        return None
    dx, dy = (lr[0] - ul[0]) / nx, (lr[1] - ul[1]) / ny
    return MapGrid((ul[0], dx, 0.0, ul[1], 0.0, dy), crs)


def open_tanager(path: str | os.PathLike) -> Cube:
    """Open a Tanager HDF-EOS5 grid product lazily (see the module's text)."""
    import h5py

    p = Path(path)
    f = h5py.File(p, "r")
    name = _variable(f)
    if name is None:
        raise CubeFormatError(f"no 3-D surface_reflectance or toa_radiance in {GRID}", p)
    ds = f[GRID][name]
    if "wavelengths" not in ds.attrs:
        raise CubeFormatError(f"{name} has no wavelengths attribute (Tanager's band centres)", p)
    wl = numbers(ds.attrs["wavelengths"])
    if wl.size != ds.shape[0]:
        raise CubeFormatError(f"{name} is {ds.shape} (band, y, x), and its wavelengths list {wl.size} bands", p)
    fwhm = numbers(ds.attrs["fwhm"]) if "fwhm" in ds.attrs else None
    good = numbers(ds.attrs["good_wavelengths"]) if "good_wavelengths" in ds.attrs else None
    if np.any(np.diff(wl) <= 0):
        raise CubeFormatError(f"{name}'s wavelengths are not ascending", p)
    meta = f.get("HDFEOS INFORMATION/StructMetadata.0")
    geo = grid_from_struct(text(meta[()])) if meta is not None else None
    if geo is not None and not re.search(rf"XDim={ds.shape[2]}\b", text(meta[()])):
        geo = None
    product, vunits = VARIABLES[name]
    if vunits is None:
        vunits = f"radiance ({text(ds.attrs['units'])})" if "units" in ds.attrs else "radiance"
    return Cube(
        StoredArray(direct_source(ds, p), (1, 2, 0)),
        name=p.stem,
        path=str(p),
        wavelengths=wl,
        wavelength_units="nm",
        fwhm=fwhm if fwhm is not None and fwhm.size == wl.size else None,
        bad_bands=(good == 0) if good is not None and good.size == wl.size else None,
        nodata=fill_value(ds),
        interleave="hdf5",
        geo=geo,
        product=product,
        value_units=vunits,
    )
