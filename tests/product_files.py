"""Tiny synthetic files in the exact layouts of the products hyperapp reads (for tests; reusable).

Each ``write_*`` builds one product file (or folder of files) with h5py / rasterio that copies the
product's structure: dataset paths, attributes, axis order, data types, fill values and scale attributes.
Every scene is the same :class:`Scene`: a background of three smooth spectra mixed per pixel, a target
spectrum planted at :data:`TARGETS`, no-data (the fill value) at :data:`FILL`, and a known place on
Earth for every pixel. Each writer returns the path to open and a dict of the truth (``wavelengths`` in
ascending order as the cube must give them, ``reflectance`` (rows, cols, bands) of those wavelengths,
``bad`` (bool per band), ``lonlat`` (a function of row, col)).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hyperapp.bench.products import EMIT_WKT, emit_wavelengths  # noqa: F401  (re-exported for the tests)
from hyperapp.bench.products import netcdf_dims as _netcdf_dims

ROWS, COLS = 40, 50
#: planted target pixels (row, col): the first two are given as targets, the rest must rank on top
TARGETS = [(5, 7), (12, 30), (20, 15), (28, 40), (33, 8), (36, 25), (8, 44), (24, 3)]
#: pixels holding the fill value in every band
FILL = [(0, 0), (0, 1), (1, 0), (39, 49)]

#: WGS84 UTM zone 11N
UTM11 = "EPSG:32611"
X0, Y0, PIXEL = 400000.0, 3760000.0, 30.0


def _bg(wl):
    w = np.asarray(wl, dtype=float)
    return np.stack([0.20 + 0.10 * np.sin(w / 150.0),
                     0.30 + 0.15 * np.exp(-(((w - 1200.0) / 400.0) ** 2)),
                     0.10 + 0.0001 * (w - 400.0)])


def target_spectrum(wl) -> np.ndarray:
    w = np.asarray(wl, dtype=float)
    return 0.30 + 0.15 * np.sin(w / 60.0) + 0.05 * np.cos(w / 23.0)


def scene(wl, seed: int = 0) -> np.ndarray:
    """Reflectance (rows, cols, bands) on wavelengths ``wl`` (nm): the same scene for any band set."""
    rng = np.random.default_rng(seed)
    ab = rng.dirichlet([2.0, 2.0, 2.0], size=(ROWS, COLS))
    x = ab @ _bg(wl)
    # noise that depends on the pixel only through a fixed field, so any band set sees the same scene
    x += 0.004 * rng.standard_normal((ROWS, COLS, 1)) * np.sin(np.asarray(wl, dtype=float) / 37.0)
    x += 0.002 * rng.standard_normal(x.shape)  # sensor noise, band by band
    t = target_spectrum(wl)
    for r, c in TARGETS:
        x[r, c] = 0.85 * t + 0.15 * x[r, c]
    return x


def swath_latlon() -> tuple[np.ndarray, np.ndarray]:
    """A swath's lat/lon per pixel (a tilted track, degrees): smooth, so bilinear is exact."""
    r, c = np.mgrid[0:ROWS, 0:COLS].astype(np.float64)
    lat = 41.90 - 0.00025 * r + 0.00004 * c
    lon = 12.40 + 0.00033 * c + 0.00005 * r
    return lat, lon


def swath_truth(r, c):
    lat = 41.90 - 0.00025 * np.asarray(r, float) + 0.00004 * np.asarray(c, float)
    lon = 12.40 + 0.00033 * np.asarray(c, float) + 0.00005 * np.asarray(r, float)
    return lon, lat


def utm_truth(r, c, x0=X0, y0=Y0, pixel=PIXEL, crs=UTM11):
    from pyproj import Transformer

    x = x0 + (np.asarray(c, float) + 0.5) * pixel
    y = y0 - (np.asarray(r, float) + 0.5) * pixel
    return Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(x, y)


def utm_wkt(crs=UTM11) -> str:
    from pyproj import CRS

    return CRS(crs).to_wkt()


def _fill(a, value, band_axis):
    for r, c in FILL:
        idx = [r, c]
        idx.insert(band_axis, slice(None))
        a[tuple(idx)] = value


def _truth(wl, bad, lonlat, refl=None, **more):
    wl = np.asarray(wl, dtype=float)
    order = np.argsort(wl)
    out = {"wavelengths": wl[order], "reflectance": (scene(wl) if refl is None else refl)[:, :, order],
           "bad": np.asarray(bad, bool)[order], "lonlat": lonlat, "targets": TARGETS, "fill": FILL}
    out.update(more)
    return out


# ----------------------------------------------------------------------------- EMIT

def write_emit(folder, level: str = "L2A", chunks=True, rows: int = ROWS, cols: int = COLS,
               wl: np.ndarray | None = None):
    """An EMIT L2A RFL (or L1B RAD) NetCDF4 file (:func:`hyperapp.bench.products.write_emit_file`, the layout
    the full-size bench case writes too) of the scene, with its truth."""
    from hyperapp.bench.products import write_emit_file

    wl = emit_wavelengths() if wl is None else wl
    kind = "RFL" if level == "L2A" else "RAD"
    refl = scene(wl)
    arr = (refl if level == "L2A" else refl * 10.0).astype(np.float32)
    _fill(arr, -9999.0, 2)
    lon0, lat0, px = -118.0, 34.0, 0.0005
    p = write_emit_file(Path(folder) / f"EMIT_{level}_{kind}_001_20230316T045133_2307503_005.nc", level, wl, rows, cols,
                        arr, chunks, (lon0, lat0), px)
    good = ~(((wl > 1320) & (wl < 1440)) | ((wl > 1770) & (wl < 1970)))

    def lonlat(r, c):
        return lon0 + (np.asarray(c, float) + 1.5) * px, lat0 - (np.asarray(r, float) + 1.5) * px

    truth = _truth(wl, ~good, lonlat, refl)
    truth["scale"] = 1.0 if level == "L2A" else 10.0
    gx = np.zeros((rows + 2, cols + 2), np.int32)
    gy = np.zeros((rows + 2, cols + 2), np.int32)
    rr, cc = np.mgrid[0:rows, 0:cols]
    gx[1:-1, 1:-1] = cc + 1
    gy[1:-1, 1:-1] = rr + 1
    truth["glt"] = (gx, gy)
    return p, truth


# ----------------------------------------------------------------------------- PRISMA

def prisma_wavelengths():
    """VNIR (with 2 unused bands at 0) and SWIR centres as PRISMA lists them: descending."""
    vnir = np.linspace(1010.0, 402.0, 20)
    swir = np.linspace(2495.0, 920.0, 24)
    vnir = np.concatenate([vnir, [0.0, 0.0]])
    swir = np.concatenate([[0.0], swir])
    return vnir, swir


def write_prisma(folder, level: str = "L2D"):
    """A PRISMA L2D (or L1) ``.he5``: ``HDFEOS/SWATHS/PRS_<level>_HCO/Data Fields/VNIR_Cube``/``SWIR_Cube``
    (rows, bands, cols) uint16, root ``List_Cw_*`` (descending, unused 0), ``List_Fwhm_*``, ``List_Cw_*_Flags``,
    L2 scale (``L2ScaleVnirMin``/``Max``) or L1 (``ScaleFactor_Vnir``, ``Offset_Vnir``), and
    ``Geolocation Fields/Latitude``/``Longitude``."""
    import h5py

    vnir, swir = prisma_wavelengths()
    p = Path(folder) / f"PRS_{level}_STD_20200209102459_20200209102503_0001.he5"
    l2 = level.startswith("L2")
    sw = f"PRS_{level}_HCO"
    flags_v = (vnir > 0).astype(np.int8)
    flags_s = (swir > 0).astype(np.int8)
    bad_swir = np.flatnonzero((swir > 1340) & (swir < 1450))  # flagged bad though used
    flags_s[bad_swir] = 0
    scales = {}
    with h5py.File(p, "w") as f:
        f.attrs["Product_ID"] = np.bytes_(f"{level}_STD")
        f.attrs["Processing_Level"] = np.bytes_(level[1:])
        for key, cw, fl in (("Vnir", vnir, flags_v), ("Swir", swir, flags_s)):
            f.attrs[f"List_Cw_{key}"] = cw.astype(np.float32)
            f.attrs[f"List_Fwhm_{key}"] = np.where(cw > 0, 10.0 if key == "Vnir" else 11.0, 0.0).astype(np.float32)
            f.attrs[f"List_Cw_{key}_Flags"] = fl
        df = f.create_group(f"HDFEOS/SWATHS/{sw}/Data Fields")
        gf = f.create_group(f"HDFEOS/SWATHS/{sw}/Geolocation Fields")
        info = f.create_group("HDFEOS INFORMATION")
        info.create_dataset("StructMetadata.0", data=np.bytes_(
            f'GROUP=SwathStructure\n\tGROUP=SWATH_1\n\t\tSwathName="{sw}"\n\tEND_GROUP=SWATH_1\nEND_GROUP=SwathStructure\n'))
        for det, key, cw in (("VNIR", "Vnir", vnir), ("SWIR", "Swir", swir)):
            refl = scene(np.where(cw > 0, cw, 500.0))
            if l2:
                lo, hi = 0.0, 1.2 if key == "Vnir" else 0.9
                f.attrs[f"L2Scale{key}Min"] = np.float32(lo)
                f.attrs[f"L2Scale{key}Max"] = np.float32(hi)
                dn = np.clip(np.rint((refl - lo) / (hi - lo) * 65535), 0, 65535)
                back = lo + dn * (hi - lo) / 65535
            else:
                sf, off = (100.0, -0.5) if key == "Vnir" else (120.0, -0.25)
                f.attrs[f"ScaleFactor_{key}"] = np.float32(sf)
                f.attrs[f"Offset_{key}"] = np.float32(off)
                rad = refl * 20.0
                dn = np.clip(np.rint((rad - off) * sf), 0, 65535)
                back = dn / sf + off
            dn[:, :, cw == 0] = 0
            df.create_dataset(f"{det}_Cube", data=np.transpose(dn, (0, 2, 1)).astype(np.uint16), chunks=True,
                              compression="gzip")
            scales[det] = (cw, back)
        lat, lon = swath_latlon()
        gf.create_dataset("Latitude", data=lat.astype(np.float32))
        gf.create_dataset("Longitude", data=lon.astype(np.float32))
    # the truth: ascending, unused left out, overlap cut at its middle
    vcw, vval = scales["VNIR"]
    scw, sval = scales["SWIR"]
    cut = (scw[scw > 0].min() + vcw.max()) / 2.0
    kv = np.flatnonzero((vcw > 0) & (vcw < cut))
    ks = np.flatnonzero((scw > 0) & (scw >= cut))
    kv, ks = kv[np.argsort(vcw[kv])], ks[np.argsort(scw[ks])]
    wl = np.concatenate([vcw[kv], scw[ks]])
    values = np.concatenate([vval[:, :, kv], sval[:, :, ks]], axis=2)
    bad = np.concatenate([flags_v[kv] == 0, flags_s[ks] == 0])
    return p, {"wavelengths": wl, "reflectance": values, "bad": bad, "lonlat": swath_truth, "targets": TARGETS,
               "fill": [], "cut": cut, "dropped": (int(((vcw > 0) & (vcw >= cut)).sum()),
                                                   int(((scw > 0) & (scw < cut)).sum()))}


# ----------------------------------------------------------------------------- Tanager

def write_tanager(folder):
    """A Planet Tanager ortho product: ``HDFEOS/GRIDS/HYP/Data Fields/surface_reflectance`` (band, y, x) float32
    with attributes ``wavelengths``, ``fwhm``, ``good_wavelengths``, ``_FillValue``; ``StructMetadata.0``."""
    import h5py

    wl = np.linspace(376.0, 2499.0, 42)
    good = ~(((wl > 1330) & (wl < 1450)) | ((wl > 1790) & (wl < 1960)))
    refl = scene(wl)
    cube = np.transpose(refl, (2, 0, 1)).astype(np.float32)
    _fill(cube, -9999.0, 0)
    x0, y0 = 350000.0, 3800000.0
    struct = (
        "GROUP=SwathStructure\nEND_GROUP=SwathStructure\nGROUP=GridStructure\n\tGROUP=GRID_1\n"
        '\t\tGridName="HYP"\n'
        f"\t\tXDim={COLS}\n\t\tYDim={ROWS}\n"
        f"\t\tUpperLeftPointMtrs=({x0:.6f},{y0:.6f})\n"
        f"\t\tLowerRightMtrs=({x0 + COLS * PIXEL:.6f},{y0 - ROWS * PIXEL:.6f})\n"
        "\t\tProjection=HE5_GCTP_UTM\n\t\tZoneCode=11\n\t\tSphereCode=12\n\t\tGridOrigin=HE5_HDFE_GD_UL\n"
        "\t\tGROUP=Dimension\n\t\tEND_GROUP=Dimension\n\tEND_GROUP=GRID_1\nEND_GROUP=GridStructure\n"
        "GROUP=PointStructure\nEND_GROUP=PointStructure\nEND\n")
    p = Path(folder) / "20250512_181103_64_4001_basic_sr_hdf5.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("HDFEOS INFORMATION/StructMetadata.0", data=np.bytes_(struct))
        ds = f.create_dataset("HDFEOS/GRIDS/HYP/Data Fields/surface_reflectance", data=cube, chunks=True,
                              compression="gzip")
        ds.attrs["wavelengths"] = wl.astype(np.float32)
        ds.attrs["fwhm"] = np.full(wl.size, 5.5, np.float32)
        ds.attrs["good_wavelengths"] = good.astype(np.uint8)
        ds.attrs["_FillValue"] = np.float32(-9999.0)
    return p, _truth(wl, ~good, lambda r, c: utm_truth(r, c, x0, y0), refl)


# ----------------------------------------------------------------------------- AVIRIS NetCDF

def write_aviris_nc(folder):
    """An AVIRIS-3 ``*_RFL_ORT.nc``: group ``reflectance`` with ``reflectance`` (bands, y, x) float32
    (_FillValue -9999), ``wavelength``, ``fwhm``; root ``transverse_mercator`` with ``spatial_ref`` and
    ``GeoTransform``."""
    import h5py

    wl = np.linspace(390.0, 2490.0, 45)
    refl = scene(wl)
    cube = np.transpose(refl, (2, 0, 1)).astype(np.float32)
    _fill(cube, -9999.0, 0)
    p = Path(folder) / "AV320230915t210439_005_L2A_OE_main_27577724_RFL_ORT.nc"
    x0, y0 = 420000.0, 3750000.0
    with h5py.File(p, "w") as f:
        _netcdf_dims(f, [("wavelength_dim", wl.size), ("northing", ROWS), ("easting", COLS)])
        tm = f.create_dataset("transverse_mercator", data=np.int8(0))
        tm.attrs["grid_mapping_name"] = "transverse_mercator"
        tm.attrs["spatial_ref"] = utm_wkt()
        tm.attrs["GeoTransform"] = f"{x0} {PIXEL} 0 {y0} 0 {-PIXEL}"
        g = f.create_group("reflectance")
        ds = g.create_dataset("reflectance", data=cube, chunks=True, fillvalue=-9999.0)
        ds.attrs["_FillValue"] = np.float32(-9999.0)
        ds.attrs["grid_mapping"] = "transverse_mercator"
        g.create_dataset("wavelength", data=wl.astype(np.float32)).attrs["units"] = "nm"
        g.create_dataset("fwhm", data=np.full(wl.size, 7.5, np.float32))
    return p, _truth(wl, np.zeros(wl.size, bool), lambda r, c: utm_truth(r, c, x0, y0), refl)


# ----------------------------------------------------------------------------- EnMAP

#: EnMAP L1B's corner coordinates (lon, lat) of the corner pixels (its METADATA.XML's spatialCoverage)
ENMAP_CORNERS = {"upper_left": (13.10, 52.60), "upper_right": (13.55, 52.55), "lower_left": (13.05, 52.30),
                 "lower_right": (13.50, 52.25)}


def enmap_l1b_truth(r, c):
    a = np.asarray(r, float) / (ROWS - 1)
    b = np.asarray(c, float) / (COLS - 1)
    k = ENMAP_CORNERS

    def bil(i):
        return ((1 - a) * ((1 - b) * k["upper_left"][i] + b * k["upper_right"][i])
                + a * ((1 - b) * k["lower_left"][i] + b * k["lower_right"][i]))

    return bil(0), bil(1)


def _enmap_xml(wl, fwhm, gain, offset, expected_vnir, expected_swir, level):
    bands = "\n".join(
        f'      <bandID number="{i + 1}">\n        <wavelengthCenterOfBand>{w:.4f}</wavelengthCenterOfBand>\n'
        f"        <FWHMOfBand>{fw:.3f}</FWHMOfBand>\n        <GainOfBand>{g:.8g}</GainOfBand>\n"
        f"        <OffsetOfBand>{o:.8g}</OffsetOfBand>\n      </bandID>"
        for i, (w, fw, g, o) in enumerate(zip(wl, fwhm, gain, offset)))
    points = "".join(f"        <point><frame>{k}</frame><latitude>{v[1]}</latitude><longitude>{v[0]}</longitude>"
                     "</point>\n" for k, v in ENMAP_CORNERS.items())
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<level_X>\n  <metadata>\n    <schema>\n'
            f"      <processingLevel>{level}</processingLevel>\n    </schema>\n  </metadata>\n"
            f"  <base>\n    <spatialCoverage>\n      <boundingPolygon>\n{points}      </boundingPolygon>\n"
            "    </spatialCoverage>\n  </base>\n"
            "  <product>\n    <quality>\n"
            f"      <vnirProductQuality><expectedChannelsList>{','.join(map(str, expected_vnir))}"
            "</expectedChannelsList></vnirProductQuality>\n"
            f"      <swirProductQuality><expectedChannelsList>{','.join(map(str, expected_swir))}"
            "</expectedChannelsList></swirProductQuality>\n"
            "    </quality>\n  </product>\n"
            f"  <specific>\n    <bandCharacterisation>\n{bands}\n    </bandCharacterisation>\n  </specific>\n"
            "</level_X>\n")


def _write_tif(path, data_bands_first, dtype, nodata, x0, y0, crs=UTM11, compress="deflate", **tags):
    import rasterio
    from rasterio.transform import from_origin

    nb, h, w = data_bands_first.shape
    prof = {"driver": "GTiff", "width": w, "height": h, "count": nb, "dtype": dtype, "nodata": nodata,
            "compress": compress, "tiled": True, "blockxsize": 16, "blockysize": 16, "interleave": "pixel"}
    if crs is not None:
        prof.update(crs=crs, transform=from_origin(x0, y0, PIXEL, PIXEL))
    with rasterio.open(path, "w", **prof) as dst:
        dst.write(data_bands_first.astype(dtype))
        if tags:
            dst.update_tags(**tags)


def enmap_wavelengths():
    vnir = np.linspace(418.0, 993.0, 22)
    swir = np.linspace(902.0, 2445.0, 26)
    return vnir, swir


def write_enmap(folder, level: str = "L2A"):
    """An EnMAP L2A (one ``-SPECTRAL_IMAGE.TIF``, int16 reflectance x 10000, nodata -32768) or L1B
    (``-SPECTRAL_IMAGE_VNIR.TIF`` and ``_SWIR.TIF``, uint16 DN) product folder with ``-METADATA.XML``."""
    folder = Path(folder)
    vnir, swir = enmap_wavelengths()
    wl = np.concatenate([vnir, swir])
    nb = wl.size
    nv = vnir.size
    fwhm = np.where(np.arange(nb) < nv, 6.5, 9.0)
    # bands 5 (VNIR) and 35 (SWIR), 1-based, are not expected: bad
    bad_numbers = {5, 35}
    expected_v = [i for i in range(1, nv + 1) if i not in bad_numbers]
    expected_s = [i for i in range(nv + 1, nb + 1) if i not in bad_numbers]
    refl = scene(wl)
    name = f"ENMAP01-____{level}-DT0000004950_20221103T162438Z_001_V010110_20221118T145147Z"
    x0, y0 = 510000.0, 5810000.0
    if level.startswith("L2"):
        gain, offset = np.full(nb, 1e-4), np.zeros(nb)
        dn = np.rint(refl / 1e-4)
        cube = np.transpose(dn, (2, 0, 1))
        _fill(cube, -32768, 0)
        _write_tif(folder / f"{name}-SPECTRAL_IMAGE.TIF", cube, "int16", -32768, x0, y0, "EPSG:32633")
        values = (dn * 1e-4).astype(np.float32)
    else:
        gain = np.where(np.arange(nb) < nv, 0.002, 0.0005)
        offset = np.where(np.arange(nb) < nv, -0.5, -0.25)
        rad = refl * 100.0
        dn = np.clip(np.rint((rad - offset) / gain), 1, 65535)
        cube = np.transpose(dn, (2, 0, 1))
        _fill(cube, 0, 0)
        _write_tif(folder / f"{name}-SPECTRAL_IMAGE_VNIR.TIF", cube[:nv], "uint16", 0, x0, y0, None)
        _write_tif(folder / f"{name}-SPECTRAL_IMAGE_SWIR.TIF", cube[nv:], "uint16", 0, x0, y0, None)
        values = (dn * gain + offset).astype(np.float32)
    (folder / f"{name}-METADATA.XML").write_text(_enmap_xml(wl, fwhm, gain, offset, expected_v, expected_s, level))
    cut = (swir.min() + vnir.max()) / 2.0
    kv = np.flatnonzero(vnir < cut)
    ks = nv + np.flatnonzero(swir >= cut)
    keep = np.concatenate([kv, ks])
    bad = np.asarray([(i + 1) in bad_numbers for i in keep])
    truth = {"wavelengths": wl[keep], "reflectance": values[:, :, keep], "bad": bad, "targets": TARGETS,
             "fill": FILL, "cut": cut, "dropped": (nv - kv.size, swir.size - (ks.size)),
             "lonlat": (lambda r, c: utm_truth(r, c, x0, y0, crs="EPSG:32633")) if level.startswith("L2")
             else enmap_l1b_truth}
    return folder / f"{name}-METADATA.XML", truth


# ----------------------------------------------------------------------------- DESIS

def write_desis(folder):
    """A DESIS L2A: a deflate-compressed GeoTIFF (int16 reflectance x 10000, nodata -32768) beside an
    ENVI-style ``.hdr`` holding ``wavelength``, ``fwhm``, ``bbl``, ``data gain values``, ``data offset values``
    and ``data ignore value``."""
    wl = np.linspace(402.0, 1000.0, 60)
    bad = np.zeros(wl.size, bool)
    bad[[0, 1, 59]] = True
    refl = scene(wl)
    dn = np.rint(refl / 1e-4)
    cube = np.transpose(dn, (2, 0, 1))
    _fill(cube, -32768, 0)
    x0, y0 = 380000.0, 3770000.0
    stem = "DESIS-HSI-L2A-DT0483531728_001-20200816T152209-V0215-SPECTRAL_IMAGE"
    tif = Path(folder) / f"{stem}.tif"
    _write_tif(tif, cube, "int16", -32768, x0, y0, UTM11)

    def lst(v, fmt="{:.6g}"):
        return "{" + ", ".join(fmt.format(x) for x in v) + "}"

    hdr = ("ENVI\ndescription = {DESIS L2A product}\n"
           f"samples = {COLS}\nlines = {ROWS}\nbands = {wl.size}\nheader offset = 0\nfile type = TIFF\n"
           "data type = 2\ninterleave = bsq\nsensor type = DESIS\nbyte order = 0\n"
           f"map info = {{UTM, 1, 1, {x0}, {y0}, {PIXEL}, {PIXEL}, 11, North, WGS-84, units=Meters}}\n"
           f"wavelength units = Nanometers\nwavelength = {lst(wl)}\nfwhm = {lst(np.full(wl.size, 3.5))}\n"
           f"bbl = {lst((~bad).astype(int), '{:d}')}\n"
           f"data gain values = {lst(np.full(wl.size, 1e-4))}\n"
           f"data offset values = {lst(np.zeros(wl.size))}\ndata ignore value = -32768\n")
    (Path(folder) / f"{stem}.hdr").write_text(hdr)
    values = (dn * 1e-4).astype(np.float32)
    return tif, {"wavelengths": wl, "reflectance": values, "bad": bad, "targets": TARGETS, "fill": FILL,
                 "lonlat": lambda r, c: utm_truth(r, c, x0, y0)}


# ----------------------------------------------------------------------------- generic GeoTIFF

def write_geotiff(folder):
    """A plain float32 GeoTIFF cube (COG-like tiles) with per-band ``wavelength`` tags in GDAL's ENVI domain."""
    import rasterio

    wl = np.linspace(450.0, 2400.0, 30)
    refl = scene(wl)
    cube = np.transpose(refl, (2, 0, 1)).astype(np.float32)
    _fill(cube, -9999.0, 0)
    x0, y0 = 400000.0, 3760000.0
    p = Path(folder) / "cube.tif"
    _write_tif(p, cube, "float32", -9999.0, x0, y0, UTM11, compress="lzw")
    with rasterio.open(p, "r+") as dst:
        dst.update_tags(ns="ENVI", wavelength="{" + ", ".join(f"{w:.3f}" for w in wl) + "}",
                        wavelength_units="Nanometers")
    return p, _truth(wl, np.zeros(wl.size, bool), lambda r, c: utm_truth(r, c, x0, y0), refl)
