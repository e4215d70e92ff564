"""ASI PRISMA L1 radiance and L2B/L2C/L2D reflectance (HDF-EOS5 ``.he5``, read with h5py).

Layout (opengeos/HyperCoast ``hypercoast/prisma.py``; acolite ``acolite/prisma/``): the swath
``HDFEOS/SWATHS/PRS_<level>_HCO`` holds ``Data Fields/VNIR_Cube`` and ``Data Fields/SWIR_Cube``, each
(rows, bands, cols) uint16 DN; the bands' centres are the root attributes ``List_Cw_Vnir`` /
``List_Cw_Swir`` (widths ``List_Fwhm_Vnir`` / ``List_Fwhm_Swir``, flags ``List_Cw_Vnir_Flags`` /
``List_Cw_Swir_Flags``), in the cube's band order: descending wavelength, with unused bands at 0 nm. Values:
reflectance (L2) = ``L2ScaleVnirMin`` + DN (``L2ScaleVnirMax`` - ``L2ScaleVnirMin``) / 65535, radiance
(L1) = DN / ``ScaleFactor_Vnir`` + ``Offset_Vnir`` (and the same with Swir). Places: ``Geolocation
Fields/Latitude`` and ``Longitude`` (L1: ``Latitude_VNIR``/``Longitude_VNIR``); L2D, a map grid, also by
``Epsg_Code`` and its corners ``Product_ULcorner_*``/``Product_LRcorner_*`` (used where they agree with the
Latitude/Longitude, see :func:`_l2d_grid`).

The cube hyperapp sees is VNIR and SWIR joined in ascending wavelength, the unused bands left out, one copy
of the VNIR/SWIR overlap (:func:`hyperapp.io.band_stack.split_overlap`), scaled lazily as it is read.
No data (L2): a pixel at DN 0 in every band, as the grid outside an L2D swath is (EnMAP-Box's PRISMA L2D
importer masks it so); the product has no fill value of its own.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid, Swath, lonlat
from hyperapp.io.band_stack import BandStack, Piece, overlap_left_out, split_overlap
from hyperapp.io.h5direct import direct_source
from hyperapp.io.h5util import holds, number, numbers

SWATHS = "HDFEOS/SWATHS"


def _swath(f) -> str | None:
    """The swath holding the co-registered cubes (``PRS_L2D_HCO``...), preferring HCO."""
    if SWATHS not in f:
        return None
    names = [n for n in f[SWATHS] if n.startswith("PRS_") and "Data Fields" in f[SWATHS][n]
             and ("VNIR_Cube" in f[SWATHS][n]["Data Fields"] or "SWIR_Cube" in f[SWATHS][n]["Data Fields"])]
    names.sort(key=lambda n: (not n.endswith("_HCO"), n))
    return names[0] if names else None


def can_open(path: str | os.PathLike) -> bool:
    """An HDF-EOS5 file with a ``PRS_*`` swath holding ``VNIR_Cube``/``SWIR_Cube``."""
    return holds(path, lambda f: _swath(f) is not None and ("List_Cw_Vnir" in f.attrs or "List_Cw_Swir" in f.attrs))


def _level(swath: str) -> str:
    m = re.match(r"PRS_(L[0-9][A-Z]?)_", swath)
    return m.group(1) if m else "L?"


def _attr(f, key: str, p) -> float:
    v = number(f.attrs.get(key))
    if v is None:
        raise CubeFormatError(f"the root attribute {key} is missing (PRISMA's scaling of the cube)", p)
    return v


def open_prisma(path: str | os.PathLike) -> Cube:
    """Open a PRISMA ``.he5`` lazily as one (rows, cols, bands) float32 cube (see the module's text)."""
    import h5py

    p = Path(path)
    f = h5py.File(p, "r")
    sw = _swath(f)
    if sw is None:
        raise CubeFormatError("no PRS_* swath with VNIR_Cube or SWIR_Cube under HDFEOS/SWATHS", p)
    level = _level(sw)
    l2 = level.startswith("L2")
    fields = f[SWATHS][sw]["Data Fields"]
    parts = []  # (name, dataset, wavelengths, fwhm, flags, gain, offset)
    for det, key in (("VNIR", "Vnir"), ("SWIR", "Swir")):
        if f"{det}_Cube" not in fields:
            continue
        ds = fields[f"{det}_Cube"]
        if ds.ndim != 3:
            raise CubeFormatError(f"{det}_Cube is not 3-D: {ds.shape}", p)
        if f"List_Cw_{key}" not in f.attrs:
            raise CubeFormatError(f"the root attribute List_Cw_{key} (the {det} wavelengths) is missing", p)
        cw = numbers(f.attrs[f"List_Cw_{key}"])
        if cw.size != ds.shape[1]:
            raise CubeFormatError(f"{det}_Cube is {ds.shape} (rows, bands, cols), and List_Cw_{key} lists "
                                  f"{cw.size} wavelengths", p)
        fw = numbers(f.attrs[f"List_Fwhm_{key}"]) if f"List_Fwhm_{key}" in f.attrs else None
        fl = numbers(f.attrs[f"List_Cw_{key}_Flags"]) if f"List_Cw_{key}_Flags" in f.attrs else None
        if l2:
            lo, hi = _attr(f, f"L2Scale{key}Min", p), _attr(f, f"L2Scale{key}Max", p)
            gain, offset = (hi - lo) / 65535.0, lo
        else:
            sf = _attr(f, f"ScaleFactor_{key}", p)
            gain, offset = 1.0 / sf, number(f.attrs.get(f"Offset_{key}")) or 0.0
        parts.append((det, ds, cw, fw, fl, gain, offset))
    if not parts:
        raise CubeFormatError(f"the swath {sw} holds neither VNIR_Cube nor SWIR_Cube", p)
    notes: list[str] = []
    unused = 0  # bands of wavelength 0, both detectors'
    if len(parts) == 1:  # a PRISMA swath has both: a file missing one is said, not read as the whole
        notes.append(f"only the {parts[0][0]} cube is in the file: the {'SWIR' if parts[0][0] == 'VNIR' else 'VNIR'} "
                     "bands are missing")
    used = []
    for det, ds, cw, fw, fl, gain, offset in parts:
        idx = np.flatnonzero(cw > 0)
        if idx.size < cw.size:
            notes.append(f"{cw.size - idx.size} unused {det} bands (wavelength 0) left out")
            unused += cw.size - idx.size
        idx = idx[np.argsort(cw[idx], kind="stable")]  # ascending (PRISMA stores VNIR descending)
        used.append([det, ds, idx, cw, fw, fl, gain, offset])
    overlap: tuple[tuple[int, str], ...] = ()
    if len(used) == 2:
        v, s = used
        kv, ks, note = split_overlap(v[3][v[2]], s[3][s[2]])
        overlap = overlap_left_out(v[2], s[2], kv, ks)
        v[2], s[2] = v[2][kv], s[2][ks]
        if note:
            notes.append(note)
    pieces, wl, fwhm, bad = [], [], [], []
    for _det, ds, idx, cw, fw, fl, gain, offset in used:
        n = idx.size
        pieces.append(Piece(direct_source(ds, p), (0, 2, 1), idx, np.full(n, gain), np.full(n, offset)))
        wl.append(cw[idx])
        fwhm.append(fw[idx] if fw is not None and fw.size == cw.size else np.full(n, np.nan))
        bad.append(fl[idx] == 0 if fl is not None and fl.size == cw.size else np.zeros(n, bool))
    # L2: the grid outside the swath is DN 0 in every band of both cubes (EnMAP-Box's L2D importer masks
    # these pixels as no data); a pixel of the scene has DN 0 in some bands at most
    stack = BandStack(pieces, empty_pixel=0 if l2 else None)
    fwhm_all = np.concatenate(fwhm)
    geo = _geo(f[SWATHS][sw], stack.shape[:2], notes)
    if level == "L2D":
        geo = _l2d_grid(f, stack.shape[:2], geo, notes) or geo
    if l2:
        notes.append("reflectance = L2ScaleMin + DN (L2ScaleMax - L2ScaleMin) / 65535, per detector; a pixel "
                     "at DN 0 in every band is no data")
    else:
        notes.append("radiance = DN / ScaleFactor + Offset, per detector")
    return Cube(
        StoredArray(stack, (0, 1, 2)),
        name=p.stem,
        path=str(p),
        wavelengths=np.concatenate(wl),
        wavelength_units="nm",
        fwhm=None if np.isnan(fwhm_all).any() else fwhm_all,
        bad_bands=np.concatenate(bad),
        interleave="hdf5",
        geo=geo,
        product=f"PRISMA {level} {'reflectance' if l2 else 'radiance'} ({sw})",
        value_units="reflectance (0-1)" if l2 else "radiance (W m-2 sr-1 um-1)",
        notes=tuple(notes),
        file_bands_left_out=(((unused, "unused"),) if unused else ()) + overlap,
    )


def _l2d_grid(f, shape, swath: Swath | None, notes: list[str]) -> MapGrid | None:
    """L2D's map grid: ``Epsg_Code`` and the corners ``Product_ULcorner_easting``/``_northing`` and
    ``Product_LRcorner_*``. Readers differ on what a corner is (EnMAP-Box's importer: the centre of the
    corner pixel; HyperCoast's: the outer corner), so both are tried against the file's own Latitude and
    Longitude and the one they agree with (within a tenth of a pixel) is used; None (the swath kept) when
    neither agrees, or the file lacks them."""
    keys = ("Product_ULcorner_easting", "Product_ULcorner_northing", "Product_LRcorner_easting",
            "Product_LRcorner_northing")
    epsg = number(f.attrs.get("Epsg_Code"))
    vals = [number(f.attrs.get(k)) for k in keys]
    rows, cols = shape
    if epsg is None or any(v is None for v in vals) or swath is None or rows < 2 or cols < 2:
        return None
    ulx, uly, lrx, lry = vals
    r = np.array([0, 0, rows - 1, rows - 1, rows // 2])
    c = np.array([0, cols - 1, 0, cols - 1, cols // 2])
    want_lon, want_lat = lonlat(swath, r, c, nearest=True)
    for what, px, py, x0, y0 in (
            ("the centres of the corner pixels", (lrx - ulx) / (cols - 1), (uly - lry) / (rows - 1), None, None),
            ("the outer corners", (lrx - ulx) / cols, (uly - lry) / rows, ulx, uly)):
        if px <= 0 or py <= 0:
            continue
        x0 = ulx - px / 2 if x0 is None else x0
        y0 = uly + py / 2 if y0 is None else y0
        grid = MapGrid((x0, px, 0.0, y0, 0.0, -py), f"EPSG:{int(epsg)}")
        try:
            lon, lat = lonlat(grid, r, c)
        except Exception:  # noqa: BLE001  (a code pyproj does not know: the swath stays)
            return None
        step = np.hypot(*[np.diff(v) for v in lonlat(swath, [0, 0], [0, 1], nearest=True)])
        err = np.hypot(lon - want_lon, lat - want_lat)
        if step.size and np.all(err <= 0.1 * float(step[0])):
            notes.append(f"location: the map grid of Epsg_Code {int(epsg)} and the product's corners (read as "
                         f"{what}, as its Latitude/Longitude agree)")
            return grid
    notes.append("location: the Latitude/Longitude per pixel (the product's corners and Epsg_Code do not agree "
                 "with them)")
    return None


def _geo(swath, shape, notes: list[str]) -> Swath | None:
    """The swath's latitude/longitude; where the file has them but they cannot be used, ``notes`` says why."""
    g = swath.get("Geolocation Fields")
    if g is None:
        return None
    seen = []
    for lat, lon in (("Latitude", "Longitude"), ("Latitude_VNIR", "Longitude_VNIR")):
        if lat in g and lon in g:
            if tuple(g[lat].shape) == tuple(shape) and tuple(g[lon].shape) == tuple(shape):
                return Swath(g[lat], g[lon])
            seen.append(f"{lat} {tuple(g[lat].shape)}")
    notes.append("location: " + (f"{', '.join(seen)} do not match the cube's {shape[0]} x {shape[1]} pixels"
                                 if seen else "'Geolocation Fields' holds no Latitude/Longitude")
                 + ": the pixels are not placed")
    return None
