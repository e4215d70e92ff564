"""Planet Tanager products, ortho and basic (HDF-EOS5, read with h5py).

Layout: the grid ``HDFEOS/GRIDS/HYP`` (ortho products) or the swath ``HDFEOS/SWATHS/HYP`` (basic products,
in sensor geometry) holds ``Data Fields/surface_reflectance`` (or ``toa_radiance``), (band, y, x), with the
attributes ``wavelengths``, ``fwhm`` and ``good_wavelengths`` (and ``_FillValue``, ``Unit``); the grid's
place is HDF-EOS5's ``HDFEOS INFORMATION/StructMetadata.0`` text (``XDim``, ``YDim``,
``UpperLeftPointMtrs``, ``LowerRightMtrs``, ``Projection``, ``ZoneCode``), the swath's its ``Geolocation
Fields/Latitude`` and ``Longitude`` (y, x). (HyperCoast's ``tanager.py`` reads the four products so.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid, Swath
from hyperapp.io.h5direct import direct_source
from hyperapp.io.h5util import fill_value, holds, numbers, text

GRID = "HDFEOS/GRIDS/HYP/Data Fields"
SWATH = "HDFEOS/SWATHS/HYP/Data Fields"
VARIABLES = {"surface_reflectance": ("Planet Tanager surface reflectance", "reflectance (0-1)"),
             "toa_radiance": ("Planet Tanager top-of-atmosphere radiance", None)}


def _variable(f) -> tuple[str, str] | None:
    """(the Data Fields group, the cube's name): the ortho grid's first, else the basic swath's."""
    for where in (GRID, SWATH):
        if where in f:
            for name in VARIABLES:
                if name in f[where] and f[where][name].ndim == 3:
                    return where, name
    return None


def can_open(path: str | os.PathLike) -> bool:
    """An HDF-EOS5 file with ``HDFEOS/GRIDS/HYP/Data Fields/surface_reflectance`` (or ``toa_radiance``), or
    the same under ``HDFEOS/SWATHS/HYP``."""
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
    found = _variable(f)
    if found is None:
        raise CubeFormatError(f"no 3-D surface_reflectance or toa_radiance in {GRID} or {SWATH}", p)
    where, name = found
    ds = f[where][name]
    if "wavelengths" not in ds.attrs:
        raise CubeFormatError(f"{name} has no wavelengths attribute (Tanager's band centres)", p)
    wl = numbers(ds.attrs["wavelengths"])
    if wl.size != ds.shape[0]:
        raise CubeFormatError(f"{name} is {ds.shape} (band, y, x), and its wavelengths list {wl.size} bands", p)
    fwhm = numbers(ds.attrs["fwhm"]) if "fwhm" in ds.attrs else None
    good = numbers(ds.attrs["good_wavelengths"]) if "good_wavelengths" in ds.attrs else None
    if np.any(np.diff(wl) <= 0):
        raise CubeFormatError(f"{name}'s wavelengths are not ascending", p)
    notes: list[str] = []
    if where == GRID:
        meta = f.get("HDFEOS INFORMATION/StructMetadata.0")
        geo = grid_from_struct(text(meta[()])) if meta is not None else None
        if geo is not None and not re.search(rf"XDim={ds.shape[2]}\b", text(meta[()])):
            geo = None
    else:  # basic product: sensor geometry, a latitude and longitude per pixel
        geo = None
        g = f[where].parent.get("Geolocation Fields")
        if g is not None and "Latitude" in g and "Longitude" in g:
            if g["Latitude"].shape == ds.shape[1:] and g["Longitude"].shape == ds.shape[1:]:
                geo = Swath(g["Latitude"], g["Longitude"])
            else:
                notes.append(f"location: Latitude {g['Latitude'].shape} does not match the cube's "
                             f"{ds.shape[1]} x {ds.shape[2]} pixels: the pixels are not placed")
    product, vunits = VARIABLES[name]
    if where == SWATH:
        product += " (basic, sensor geometry)"
    if vunits is None:  # Planet writes the unit as "Unit"
        unit = next((ds.attrs[k] for k in ("units", "Unit", "Units") if k in ds.attrs), None)
        vunits = f"radiance ({text(unit)})" if unit is not None else "radiance"
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
        notes=tuple(notes),
    )
