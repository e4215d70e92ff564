"""GeoTIFF / COG cubes through rasterio, with an ENVI header beside them where there is one (DESIS).

A GeoTIFF's bands are the cube's bands; rasterio reads windows of them on demand, so a large scene stays on
disk. What the bands are comes from, in order: an ENVI-style ``.hdr`` beside the TIFF (DESIS L2A ships its
compressed TIFF with one: ``wavelength``, ``fwhm``, ``bbl``, ``data gain values`` / ``data offset values``,
``data ignore value``; the header describes the TIFF, whose bytes are never read as raw ENVI data; the
product's ``*-METADATA.xml`` opens its ``*-SPECTRAL_IMAGE.tif``), else GDAL's ``ENVI`` metadata domain
(``wavelength``, ``bbl``), else per-band ``wavelength`` tags. Values are scaled by the header's gains/offsets
or the TIFF's own scales/offsets, lazily as they are read; where the header's description says reflectance and
gains scale it, the values are said to be reflectance (0-1). The grid is the TIFF's transform and CRS.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid, geo_from_map_info
from hyperapp.io.band_stack import BandStack, Piece, RasterBands

TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


def is_tiff(path: str | os.PathLike) -> bool:
    """Whether the file begins as a TIFF or BigTIFF does."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) in TIFF_MAGIC
    except OSError:
        return False


def tiff_beside(hdr: Path) -> Path | None:
    """The TIFF an ENVI header describes (same stem, ``.tif``/``.tiff`` in any case), if any."""
    stem = hdr.with_suffix("")  # x.hdr -> x; x.tif.hdr -> x.tif
    cands = [stem.with_name(stem.name + ext) for ext in (".tif", ".TIF", ".tiff", ".TIFF")]
    if stem.suffix.lower() in (".tif", ".tiff"):
        cands.insert(0, stem)
    return next((c for c in cands if c.is_file() and is_tiff(c)), None)


def image_of_metadata(xml: Path) -> Path | None:
    """The spectral image a product's ``<prefix>-METADATA.xml`` describes: a TIFF ``<prefix>-SPECTRAL_IMAGE.tif``
    beside it (DESIS ships its L1/L2 products so; EnMAP-Box imports DESIS from the XML), else None."""
    m = re.match(r"^(?P<prefix>.+)-METADATA\.xml$", xml.name, re.IGNORECASE)
    if m is None:
        return None
    for ext in (".tif", ".TIF", ".tiff", ".TIFF"):
        cand = xml.with_name(f"{m.group('prefix')}-SPECTRAL_IMAGE{ext}")
        if cand.is_file() and is_tiff(cand):
            return cand
    return None


def header_beside(tif: Path) -> Path | None:
    """An ENVI header beside a TIFF (``x.hdr`` or ``x.tif.hdr``) that begins with ``ENVI``."""
    for cand in (tif.with_suffix(".hdr"), tif.with_suffix(".HDR"), tif.with_name(tif.name + ".hdr")):
        if cand.is_file():
            with open(cand, "rb") as fh:
                if fh.read(4).upper().startswith(b"ENVI"):
                    return cand
    return None


def _list(raw) -> np.ndarray | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [v for v in re.split(r"[,\s{}]+", raw) if v]
    try:
        return np.asarray([float(str(v).strip()) for v in raw], dtype=np.float64)
    except ValueError:
        return None


def open_geotiff(path: str | os.PathLike, header: str | os.PathLike | None = None) -> Cube:
    """Open a GeoTIFF/COG cube lazily (see the module's text)."""
    import warnings

    import rasterio

    p = Path(path)
    try:
        with warnings.catch_warnings():  # a TIFF without a grid has no location: Cube.geo None says it
            warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
            ds = rasterio.open(p)
    except rasterio.errors.RasterioIOError as exc:
        raise CubeFormatError(f"not a readable GeoTIFF ({exc})", p) from exc
    n = ds.count
    hdr = Path(header) if header is not None else header_beside(p)
    h: dict = {}
    if hdr is not None:
        from hyperapp.io.envi import read_header

        h = read_header(hdr)
    envi_tags = ds.tags(ns="ENVI")
    notes: list[str] = []

    def per_band(key: str) -> np.ndarray | None:
        if h.get(key) is not None:  # an ENVI header's list: the ENVI reader's rule (numbers, one a band)
            from hyperapp.io.envi import _per_band

            return _per_band(h, key, hdr, n)
        v = _list(envi_tags.get(key))
        if v is not None and v.size != n:
            notes.append(f"the {key} list has {v.size} values for {n} bands: left out")
            return None
        return v

    wl = per_band("wavelength")
    units = h.get("wavelength units") or envi_tags.get("wavelength_units") or envi_tags.get("wavelength units")
    if wl is None:
        tags = [ds.tags(b + 1) for b in range(n)]
        vals = [t.get("wavelength") or t.get("WAVELENGTH") for t in tags]
        if all(v is not None for v in vals):
            wl = _list(vals)
            units = units or tags[0].get("wavelength_units") or tags[0].get("WAVELENGTH_UNITS")
    fwhm = per_band("fwhm")
    bbl = per_band("bbl")
    gain = per_band("data gain values")
    offset = per_band("data offset values")
    fill = h.get("data ignore value")
    fill = float(fill) if fill not in (None, "") else ds.nodata
    if gain is None and any(s != 1.0 for s in ds.scales):
        gain = np.asarray(ds.scales, dtype=float)
    if offset is None and any(o != 0.0 for o in ds.offsets):
        offset = np.asarray(ds.offsets, dtype=float)
    order = np.arange(n)
    if wl is not None and np.any(np.diff(wl) < 0):
        order = np.argsort(wl, kind="stable")
        notes.append("bands put in ascending wavelength order")
    src = RasterBands(str(p), ds)
    if gain is not None or offset is not None or not np.array_equal(order, np.arange(n)):
        stack = BandStack([Piece(src, (1, 2, 0), order, None if gain is None else gain[order],
                                 None if offset is None else offset[order], fill)])
        store, nodata = StoredArray(stack, (0, 1, 2)), None
        if gain is not None or offset is not None:
            notes.append("values scaled by the " + ("header's data gain/offset values" if "data gain values" in h
                                                    or "data offset values" in h else "TIFF's scales/offsets"))
    else:
        store, nodata = StoredArray(src, (1, 2, 0)), fill
    geo = None
    if ds.crs is not None:
        geo = MapGrid(tuple(ds.transform.to_gdal()), ds.crs.to_wkt())
    elif isinstance(h.get("map info"), list):
        css = h.get("coordinate system string")
        geo = geo_from_map_info(h["map info"], css if isinstance(css, str) else None)
    sensor = h.get("sensor type") or h.get("description") or ""
    product = "GeoTIFF" + (" + ENVI header" if hdr is not None else "")
    if "desis" in str(sensor).lower():
        product = "DESIS (GeoTIFF + ENVI header)" if hdr is not None else "DESIS GeoTIFF"
    scale = h.get("reflectance scale factor")
    value_units = None
    if gain is not None or offset is not None:
        # what the scaled values are: reflectance where the header says so, or names level L2A (DESIS L2A's
        # gains 1e-4 make 0-1 of the stored integers); else said to be scaled, never "as stored"
        said = " ".join(str(h.get(k) or "") for k in ("description", "sensor type", "data units", "product type"))
        low = said.lower()
        if ("reflectance" in low and "radiance" not in low) or re.search(r"(?<![A-Za-z0-9])L2A(?![A-Za-z0-9])", said):
            value_units = "reflectance (0-1)"
            notes.append("values are surface reflectance, as the header says")
        else:
            value_units = "scaled value"
    return Cube(
        store,
        name=p.stem,
        path=str(p),
        wavelengths=None if wl is None else wl[order],
        wavelength_units=units,
        fwhm=None if fwhm is None else fwhm[order],
        bad_bands=None if bbl is None else (bbl[order] == 0),
        nodata=nodata,
        scale_factor=float(scale) if scale not in (None, "") and gain is None else None,
        interleave="tiff",
        geo=geo,
        product=product,
        value_units=value_units,
        notes=tuple(notes),
    )
