"""DLR EnMAP L1B / L1C / L2A products: spectral images (GeoTIFF, COG or ENVI BSQ/BIL/BIP; read through
rasterio) with their ``*-METADATA.XML``.

The XML's ``specific/bandCharacterisation/bandID`` (one per band, numbered from 1, VNIR's first) gives
``wavelengthCenterOfBand``, ``FWHMOfBand``, ``GainOfBand`` and ``OffsetOfBand`` (value = DN x gain + offset);
``vnirProductQuality/expectedChannelsList`` and ``swirProductQuality/expectedChannelsList`` list each
detector's bands (bandID numbers; EnMAP-Box finds the overlap from them): a band in neither is bad. L1B keeps VNIR and SWIR in two images
(``*-SPECTRAL_IMAGE_VNIR``, ``*-SPECTRAL_IMAGE_SWIR``); L1C and L2A one (``*-SPECTRAL_IMAGE``) of VNIR's bands
then SWIR's; the cloud-optimised delivery names them ``*-SPECTRAL_IMAGE_COG.TIF`` (and keeps its quality
layers beside, ``*-QL_QUALITY_CLOUD_COG.TIF``...). In both the detectors overlap near 900-1000 nm: one copy is
kept (:func:`hyperapp.io.band_stack.split_overlap`). Bands L2A fills wholly with its no-data value (the edge
of the 1.4 um water vapour absorption) are bad too (:func:`band_stack.empty_bands`). L1C/L2A images are map
grids (their GeoTIFF transform); L1B is in sensor geometry: its location is bilinear between the four corners
of ``base/spatialCoverage`` (approximate; the RPCs are not applied). (Layout after the EnMAP-Box importers,
read only.) A zipped product is read inside the zip (GDAL's ``/vsizip/``).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError
from hyperapp.core.geo import MapGrid, corner_swath
from hyperapp.io.band_stack import BandStack, Piece, RasterBands, empty_bands, overlap_left_out, split_overlap

# the spectral image: GeoTIFF, ENVI, or the cloud-optimised delivery's ``-SPECTRAL_IMAGE_COG.TIF``
IMAGE = re.compile(r"^(?P<prefix>.*)-SPECTRAL_IMAGE(?P<det>_VNIR|_SWIR)?(?:_COG)?\.(?P<ext>[A-Za-z]+)$")
# the product's other rasters: quality layers and quicklooks (``-QL_QUALITY_CLOUD_COG.TIF``, ``-QL_VNIR.TIF``...)
SIDECAR = re.compile(r"^(?P<prefix>.*)-QL_[A-Za-z0-9_]+\.(?P<ext>[A-Za-z]+)$")
IMAGE_EXTS = ("TIF", "TIFF", "BSQ", "BIL", "BIP")


def _is_metadata(text: bytes) -> bool:
    return b"bandCharacterisation" in text and b"wavelengthCenterOfBand" in text


def metadata_of(path: Path) -> Path | None:
    """The ``*-METADATA.XML`` of an EnMAP spectral image (or the XML itself), when it describes bands."""
    if path.suffix.upper() == ".XML":
        cand = path
    else:
        m = IMAGE.match(path.name)
        if m is None:
            return None
        cand = path.with_name(m.group("prefix") + "-METADATA.XML")
    if not cand.is_file():
        return None
    with open(cand, "rb") as fh:
        return cand if _is_metadata(fh.read(1 << 22)) else None


def product_metadata(path: Path) -> Path | None:
    """The METADATA.XML of the EnMAP product any of its files belongs to (the XML, a spectral image, a
    quality layer or quicklook), for counting a product once however many of its files a glob meets."""
    m = SIDECAR.match(path.name)
    if m is not None and m.group("ext").upper() in IMAGE_EXTS:
        cand = path.with_name(m.group("prefix") + "-METADATA.XML")
        if cand.is_file():
            with open(cand, "rb") as fh:
                return cand if _is_metadata(fh.read(1 << 22)) else None
    return metadata_of(path)


def _zip_members(path: Path) -> tuple[str, list[str]] | None:
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            xml = [n for n in names if n.upper().endswith("-METADATA.XML")]
            if len(xml) != 1 or not _is_metadata(z.read(xml[0])[: 1 << 22]):
                return None
            return xml[0], names
    except (zipfile.BadZipFile, OSError):
        return None


def can_open(path: str | os.PathLike) -> bool:
    """An EnMAP METADATA.XML, a spectral image beside one, or a zip holding a product."""
    p = Path(path)
    if p.suffix.lower() == ".zip":
        return _zip_members(p) is not None
    return metadata_of(p) is not None


def _bands(root) -> dict:
    bc = root.find(".//bandCharacterisation")
    if bc is None:
        raise ValueError("no bandCharacterisation")
    rows = []
    for b in bc.findall("bandID"):
        rows.append((int(b.get("number")), float(b.findtext("wavelengthCenterOfBand")),
                     float(b.findtext("FWHMOfBand") or "nan"), float(b.findtext("GainOfBand") or 1.0),
                     float(b.findtext("OffsetOfBand") or 0.0)))
    rows.sort()
    a = np.asarray(rows, dtype=float)
    out = {"number": a[:, 0].astype(int), "wl": a[:, 1], "fwhm": a[:, 2], "gain": a[:, 3], "offset": a[:, 4]}
    expected: set[int] = set()
    found = False
    for q in ("vnirProductQuality", "swirProductQuality"):
        t = root.findtext(f".//{q}/expectedChannelsList")
        if t and t.strip():
            found = True
            expected.update(int(v) for v in re.split(r"[,\s]+", t.strip()) if v)
    out["bad"] = np.asarray([n not in expected for n in out["number"]]) if found else None
    lv = root.findtext(".//processingLevel") or root.findtext(".//level") or ""
    out["level"] = lv.strip()
    return out


def _corners(root) -> dict | None:
    """``base/spatialCoverage/boundingPolygon/point``: frame -> (lon, lat) of the four corners, or None."""
    out = {}
    for pt in root.findall(".//spatialCoverage/boundingPolygon/point"):
        try:
            out[(pt.findtext("frame") or "").strip()] = (float(pt.findtext("longitude")),
                                                         float(pt.findtext("latitude")))
        except (TypeError, ValueError):
            return None
    keys = ("upper_left", "upper_right", "lower_left", "lower_right")
    return {k: out[k] for k in keys} if all(k in out for k in keys) else None


def _raster(path: str):
    """rasterio's dataset of ``path`` (an L1B image has no grid: the cube's notes say so, not a warning)."""
    import warnings

    import rasterio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        return rasterio.open(path)


def open_enmap(path: str | os.PathLike) -> Cube:
    """Open an EnMAP product lazily as one (rows, cols, bands) float32 cube (see the module's text)."""
    p = Path(path)
    if p.suffix.lower() == ".zip":
        found = _zip_members(p)
        if found is None:
            raise CubeFormatError("no EnMAP *-METADATA.XML with bandCharacterisation in the zip", p)
        xml_name, names = found
        with zipfile.ZipFile(p) as z:
            xml_bytes = z.read(xml_name)
        prefix = xml_name[: -len("-METADATA.XML")]
        images = [n for n in names if IMAGE.match(n.rsplit("/", 1)[-1]) and n.startswith(prefix)
                  and n.rsplit(".", 1)[-1].upper() in IMAGE_EXTS]
        images = [f"/vsizip/{p}/{n}" for n in images]
        xml_path = p
    else:
        xml_path = metadata_of(p)
        if xml_path is None:
            raise CubeFormatError("no EnMAP *-METADATA.XML describing bands beside this image", p)
        xml_bytes = xml_path.read_bytes()
        prefix = xml_path.name[: -len("-METADATA.XML")]
        images = sorted(str(c) for c in xml_path.parent.iterdir()
                        if c.name.startswith(prefix) and IMAGE.match(c.name)
                        and c.suffix.lstrip(".").upper() in IMAGE_EXTS)
    try:
        meta = _bands(ElementTree.fromstring(xml_bytes))
    except (ElementTree.ParseError, ValueError, TypeError) as exc:
        raise CubeFormatError(f"the EnMAP metadata cannot be read ({exc})", xml_path) from exc
    det = {IMAGE.match(i.rsplit("/", 1)[-1]).group("det") or "": i for i in images}
    nb = meta["wl"].size
    notes: list[str] = []
    if "_VNIR" in det and "_SWIR" in det:  # L1B: two images
        vn, sw = _raster(det["_VNIR"]), _raster(det["_SWIR"])
        if vn.count + sw.count != nb:
            raise CubeFormatError(f"the VNIR and SWIR images hold {vn.count} + {sw.count} bands, the metadata "
                                  f"describes {nb}", xml_path)
        srcs = [(RasterBands(det["_VNIR"], vn), np.arange(vn.count), 0),
                (RasterBands(det["_SWIR"], sw), np.arange(vn.count, nb), vn.count)]
        ref = vn
    elif "" in det:
        ds = _raster(det[""])
        if ds.count != nb:
            raise CubeFormatError(f"the spectral image holds {ds.count} bands, the metadata describes {nb}",
                                  xml_path)
        brk = np.flatnonzero(np.diff(meta["wl"]) < 0)  # where SWIR's bands begin again below VNIR's last
        cut = int(brk[0]) + 1 if brk.size else nb
        src = RasterBands(det[""], ds)
        srcs = [(src, np.arange(cut), 0), (src, np.arange(cut, nb), 0)] if cut < nb else [(src, np.arange(nb), 0)]
        ref = ds
    else:
        raise CubeFormatError(f"no spectral image ({prefix}-SPECTRAL_IMAGE*.TIF/BSQ/BIL/BIP) beside the "
                              "metadata", xml_path)
    keep = [np.arange(len(b)) for _, b, _ in srcs]
    left_out: tuple[tuple[int, str], ...] = ()
    if len(srcs) == 2:
        kv, ks, note = split_overlap(meta["wl"][srcs[0][1]], meta["wl"][srcs[1][1]])
        keep = [kv, ks]
        left_out = overlap_left_out(srcs[0][1], srcs[1][1], kv, ks)
        if note:
            notes.append(note)
    pieces, idx_all = [], []
    for (src, bands, base), k in zip(srcs, keep):
        idx = bands[k]  # metadata band indices (0-based)
        idx = idx[np.argsort(meta["wl"][idx], kind="stable")]
        local = idx - base  # the image's own band indices
        fill = src.ds.nodata
        pieces.append(Piece(src, (1, 2, 0), local, meta["gain"][idx], meta["offset"][idx], fill))
        idx_all.append(idx)
    idx = np.concatenate(idx_all)
    stack = BandStack(pieces)
    level = meta["level"] or next((lv for lv in ("L1B", "L1C", "L2A") if lv in Path(images[0]).name), "")
    refl = "L2" in level.upper()
    notes.append("values = DN x GainOfBand + OffsetOfBand (METADATA.XML)")
    geo = MapGrid(tuple(ref.transform.to_gdal()), ref.crs.to_wkt()) if ref.crs is not None else None
    if geo is None:
        corners = _corners(ElementTree.fromstring(xml_bytes))
        if corners is not None:
            geo = corner_swath(ref.height, ref.width, corners)
            notes.append("location approximate: bilinear between the four corners of METADATA.XML's "
                         "spatialCoverage (L1B is in sensor geometry; its RPC coefficients are not applied)")
        else:
            notes.append("no location: the image has no map grid and METADATA.XML no corner coordinates")
    fw = meta["fwhm"][idx]
    bad = np.zeros(idx.size, bool) if meta["bad"] is None else meta["bad"][idx].copy()
    empty, seen = empty_bands(stack)
    if (empty & ~bad).any():  # L2A fills its bad bands with the no-data value, flagged nowhere else
        wl_empty = meta["wl"][idx][empty & ~bad]
        notes.append(f"{wl_empty.size} band(s) at {', '.join(f'{w:g}' for w in wl_empty[:6])}"
                     f"{' ...' if wl_empty.size > 6 else ''} nm hold only the no-data value (in {seen} pixels "
                     "sampled over the image): marked bad")
        bad |= empty
    return Cube(
        StoredArray(stack, (0, 1, 2)),
        name=Path(prefix).name,
        path=str(p),
        wavelengths=meta["wl"][idx],
        wavelength_units="nm",
        fwhm=None if np.isnan(fw).any() else fw,
        bad_bands=bad if (meta["bad"] is not None or bad.any()) else None,
        interleave="tiff",
        geo=geo,
        product=f"EnMAP {level or '(level not stated)'}",
        value_units="reflectance (0-1)" if refl else "radiance (GainOfBand units)",
        notes=tuple(notes),
        file_bands_left_out=left_out,
    )
