"""Tiny sensor-product files built independently of ``tests/product_files.py`` (issue 50).

Each builder copies one real product's structure as its producers' own writers and the public reference
readers describe it, with h5py (NetCDF4/HDF-EOS5 written the way netCDF-C and the HDF-EOS5 library leave
them: dimension scales, 1-element numeric attribute arrays, fixed-length byte-string text attributes, a
variable-length UTF-8 one where the text is not ASCII, chunked and deflated variables where the producer
compresses) and rasterio (GeoTIFF). Where each detail comes from:

- EMIT L2A RFL: emit-sds/emit-utils ``daac_converter.py`` (dimensions ``downtrack``/``crosstrack``/``bands``/
  ``ortho_y``/``ortho_x``; ``location/lat,lon,elev`` float64; ``location/glt_x,glt_y`` int32, zlib level 9;
  every variable with ``_FillValue`` -9999; global ``geotransform`` (GDAL's 6-tuple) and ``spatial_ref`` (WKT)),
  emit-sds L2A output (``sensor_band_parameters/wavelengths,fwhm`` f4 and ``good_wavelengths`` u1, bad where
  1325-1435 and 1770-1962 nm), nasa/EMIT-Data-Resources ``emit_tools.py`` (GLT 1-based, 0 = no data;
  pixel-centre coordinates from the geotransform).
- PRISMA L2D: HyperCoast ``prisma.py`` and acolite ``prisma/`` (``HDFEOS/SWATHS/PRS_L2D_HCO/Data Fields/
  VNIR_Cube,SWIR_Cube`` as (rows, bands, cols) uint16; root attributes ``List_Cw_Vnir/Swir`` (descending,
  0 for unused bands, with ``*_Flags``), ``List_Fwhm_*``, ``L2ScaleVnirMin/Max``, ``Epsg_Code``, the UL/LR
  product corners in metres; ``Geolocation Fields/Latitude,Longitude``), plus the error matrices beside the
  cubes (3-D, same shape) and the PAN swath.
- EnMAP L2A: ``*-SPECTRAL_IMAGE.TIF`` (int16, band-interleaved GeoTIFF, nodata -32768, the 6 bad bands of
  the water-vapour edge filled with nodata) and ``*-METADATA.XML`` (``level_X/specific/bandCharacterisation/
  bandID[@number]`` with ``wavelengthCenterOfBand``, ``FWHMOfBand``, ``GainOfBand``, ``OffsetOfBand``; the
  schema reuses ``bandID`` elsewhere with other children).
- AVIRIS-3 ORT: HyperCoast ``aviris.py`` (root ``easting``/``northing`` coordinates and a
  ``transverse_mercator`` grid mapping with ``spatial_ref`` and GDAL's ``GeoTransform`` text; group
  ``reflectance`` with ``reflectance`` (wavelength, northing, easting), ``wavelength``, ``fwhm``; -9999 fill).
- Planet Tanager ortho SR: HyperCoast ``tanager.py`` and public users of the product
  (``HDFEOS/GRIDS/HYP/Data Fields/surface_reflectance`` (band, y, x) float32 with attributes ``wavelengths``,
  ``fwhm``, ``good_wavelengths``, ``Unit``, ``_FillValue`` -9999; ``surface_reflectance_uncertainty`` of the
  same shape; ``nodata_pixels`` and cloud masks; ``HYP`` attribute ``epsg_code``; the grid in
  ``HDFEOS INFORMATION/StructMetadata.0``).
- DESIS L2A: ``*-SPECTRAL_IMAGE.TIF`` band-interleaved-by-pixel and compressed, int16 reflectance x 10000,
  with ``*-SPECTRAL_IMAGE.hdr`` beside it (wavelength, fwhm, data gain values, data offset values; map info)
  that describes the TIFF and not raw bytes, and ``*-METADATA.xml`` (EnMAP-Box's DESIS L2A importer opens the
  product from that XML and reads wavelengths and gains from the header). The header's description text is
  this builder's guess.

Every file holds a known scene: background spectra mixed from four smooth endmembers plus noise, one target
spectrum planted (90 %) at six pixels, fill values at known pixels, the product's own bad bands, and a known
place on Earth per pixel (:attr:`Product.lonlat`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
from pyproj import CRS, Transformer

ROWS, COLS = 40, 50
#: (row, col) of the planted target; the first two are the clicks, the rest must rank on top
TARGETS = ((6, 9), (31, 40), (12, 35), (27, 14), (20, 24), (34, 29))
NC_PROPERTIES = np.bytes_("version=2,netcdf=4.9.2,hdf5=1.14.2")


@dataclass
class Product:
    """What a built product file holds, in the order a reader should present it."""

    path: Path  # the file to open
    kind: str  # "emit", "prisma", ...
    wavelengths: np.ndarray  # every real band of the file, ascending (nm)
    good: np.ndarray  # bool per band: not flagged bad by the product
    values: np.ndarray  # (rows, cols, bands) physical values in that band order
    nodata: np.ndarray  # (rows, cols) bool: fill
    lon: np.ndarray  # (rows, cols) pixel-centre longitude (WGS84)
    lat: np.ndarray  # (rows, cols) pixel-centre latitude
    units: str = "reflectance"
    atol: float = 1e-6  # quantisation of the stored values
    targets: tuple = TARGETS
    extra: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape[:2]


# ------------------------------------------------------------------------------------------ the scene
def _endmembers(wl: np.ndarray) -> np.ndarray:
    """Four smooth background reflectances (soil, vegetation, water, dry grass) at ``wl`` nm."""
    x = (wl - 400.0) / 2100.0
    soil = 0.12 + 0.28 * x - 0.08 * x**2
    veg = 0.04 + 0.38 / (1 + np.exp(-(wl - 715.0) / 12.0)) - 0.2 * np.clip(x - 0.45, 0, None)
    veg = veg + 0.03 * np.exp(-(((wl - 550.0) / 40.0) ** 2))
    water = 0.06 * np.exp(-(wl - 400.0) / 250.0) + 0.005
    grass = 0.1 + 0.22 * np.sqrt(np.clip(x, 0, None)) - 0.05 * np.exp(-(((wl - 2100.0) / 80.0) ** 2))
    return np.stack([soil, veg, water, grass])


def _target(wl: np.ndarray) -> np.ndarray:
    """The planted material: bright, with two absorption bands of its own."""
    return (
        0.55
        - 0.25 * np.exp(-(((wl - 620.0) / 35.0) ** 2))
        - 0.2 * np.exp(-(((wl - 1700.0) / 60.0) ** 2))
        - 0.1 * np.exp(-(((wl - 2300.0) / 50.0) ** 2))
        + 0.03 * np.sin(wl / 90.0)
    )


def scene(wl: np.ndarray, seed: int, rows: int = ROWS, cols: int = COLS) -> np.ndarray:
    """(rows, cols, bands) reflectance at ``wl`` (any order) with the target planted at :data:`TARGETS`."""
    rng = np.random.default_rng(seed)
    ab = rng.dirichlet([0.8, 0.8, 0.5, 0.8], size=(rows, cols))
    refl = ab @ _endmembers(wl) + rng.normal(0, 0.004, (rows, cols, wl.size))
    for r, c in TARGETS:
        refl[r, c] = 0.9 * _target(wl) + 0.1 * refl[r, c]
    return np.clip(refl, 0.001, 0.95)


def bad_water(wl: np.ndarray) -> np.ndarray:
    """EMIT's own rule for bands not usable (water vapour)."""
    return ((wl > 1325) & (wl < 1435)) | ((wl > 1770) & (wl < 1962))


def _utm_lonlat(epsg: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = Transformer.from_crs(CRS.from_epsg(epsg), CRS.from_epsg(4326), always_xy=True)
    return t.transform(x, y)


def _grid_lonlat(epsg: int, x0: float, y0: float, px: float, rows: int = ROWS, cols: int = COLS):
    """Pixel-centre lon/lat of a north-up grid whose outer upper-left corner is (x0, y0)."""
    cc, rr = np.meshgrid(np.arange(cols) + 0.5, np.arange(rows) + 0.5)
    return _utm_lonlat(epsg, x0 + cc * px, y0 - rr * px)


# ---------------------------------------------------------------------- HDF5 as netCDF-C leaves it
def _text(obj, name: str, value: str) -> None:
    """A text attribute as netCDF-C writes NC_CHAR (HDF-EOS5 alike): scalar, fixed-length, ASCII."""
    if all(ord(ch) < 128 for ch in value):
        obj.attrs.create(name, np.bytes_(value.encode()))
    else:  # netCDF4-python writes non-ASCII text as NC_STRING: a 1-element variable-length UTF-8 array
        obj.attrs.create(name, np.array([value], dtype=h5py.string_dtype("utf-8")))


def _num(obj, name: str, value, dtype) -> None:
    """A numeric attribute as netCDF-C writes it: a 1-D array even for one value."""
    obj.attrs.create(name, np.atleast_1d(np.asarray(value, dtype=dtype)))


def _dim(f: h5py.File, name: str, size: int, values: np.ndarray | None = None, dtype="f4"):
    """A netCDF dimension: a coordinate variable when ``values`` is given, else netCDF's phony scale."""
    if values is None:
        ds = f.create_dataset(name, shape=(size,), dtype=dtype)
        ds.make_scale(f"This is a netCDF dimension but not a netCDF variable. {size:>10d}")
    else:
        ds = f.create_dataset(name, data=np.asarray(values, dtype=dtype))
        ds.make_scale(name)
    ds.attrs.create("_Netcdf4Dimid", np.int32(sum(1 for v in f.values() if "CLASS" in v.attrs) - 1))
    return ds


def _var(group, name: str, data, dims, long_name: str, units: str | None, fill=-9999.0, **kw):
    ds = group.create_dataset(name, data=data, **kw)
    _num(ds, "_FillValue", fill, ds.dtype)
    _text(ds, "long_name", long_name)
    if units is not None:
        _text(ds, "units", units)
    for i, d in enumerate(dims):
        ds.dims[i].attach_scale(d)
    return ds


# --------------------------------------------------------------------------------------------- EMIT
def _radiance(refl: np.ndarray, wl: np.ndarray) -> np.ndarray:
    """At-sensor radiance (uW cm-2 sr-1 nm-1) of a reflectance: a solar curve times reflectance plus path."""
    sun = 15.0 * np.exp(-(((wl - 500.0) / 900.0) ** 2)) + 1.0
    return refl * sun / np.pi * 1.8 + 0.3 * np.exp(-(wl - 400.0) / 300.0)


def build_emit(folder: Path, level: str = "L2A") -> Product:
    """EMIT L2A reflectance (or L1B radiance): a rotated ISS swath with its location arrays and GLT."""
    rows, cols = ROWS, COLS
    wl = np.round(np.linspace(381.0, 2493.0, 64), 4).astype(np.float32)
    fwhm = np.full(wl.size, 8.5, np.float32)
    good = ~bad_water(wl.astype(float))
    refl = scene(wl.astype(float), seed=11)
    if level == "L1B":  # radiance: no bad-band list in L1B's sensor_band_parameters
        refl = _radiance(refl, wl.astype(float))
        good = np.ones(wl.size, bool)
    else:
        refl[:, :, ~good] = np.random.default_rng(5).normal(0.02, 0.05, (rows, cols, int((~good).sum())))
    nodata = np.zeros((rows, cols), bool)
    nodata[:3, :4] = True  # the swath's start, never acquired
    nodata[-2:, -6:] = True
    stored = refl.astype(np.float32)
    stored[nodata] = -9999.0

    # swath geometry: ISS track 38 degrees off north, 60 m pixels, near 36.1 N 116.9 W
    lon0, lat0 = -116.92, 36.11
    m_lat = 111_000.0
    m_lon = 111_000.0 * np.cos(np.radians(lat0))
    ang = np.radians(38.0)
    rr, cc = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    east = 60.0 * (cc * np.cos(ang) + rr * np.sin(ang))
    north = 60.0 * (cc * np.sin(ang) - rr * np.cos(ang))
    lon = lon0 + east / m_lon
    lat = lat0 + north / m_lat
    elev = 900.0 + 3.0 * rr - 1.5 * cc

    # the orthorectified grid (WGS84, square pixels in degrees) and its GLT, nearest swath pixel per cell
    step = 0.000542232520256
    gx0 = lon.min() - step
    gy0 = lat.max() + step
    ny = int(np.ceil((gy0 - lat.min()) / step)) + 2
    nx = int(np.ceil((lon.max() - gx0) / step)) + 2
    gcx = gx0 + (np.arange(nx) + 0.5) * step
    gcy = gy0 - (np.arange(ny) + 0.5) * step
    GX, GY = np.meshgrid(gcx, gcy)
    e = (GX - lon0) * m_lon
    n = (GY - lat0) * m_lat
    # invert east/north -> (row, col)
    col_f = (e * np.cos(ang) + n * np.sin(ang)) / 60.0
    row_f = (e * np.sin(ang) - n * np.cos(ang)) / 60.0
    ri, ci = np.rint(row_f).astype(int), np.rint(col_f).astype(int)
    inside = (
        (ri >= 0)
        & (ri < rows)
        & (ci >= 0)
        & (ci < cols)
        & (np.abs(row_f - ri) <= 0.75)
        & (np.abs(col_f - ci) <= 0.75)
    )
    glt_x = np.where(inside, ci + 1, 0).astype(np.int32)
    glt_y = np.where(inside, ri + 1, 0).astype(np.int32)

    path = folder / f"EMIT_{level}_{'RFL' if level == 'L2A' else 'RAD'}_001_20240614T201532_2416613_007.nc"
    var, long_name, units = (
        ("reflectance", "Surface Reflectance", "unitless")
        if level == "L2A"
        else ("radiance", "Radiance Data", "uW/cm^2/SR/nm")
    )
    wkt = CRS.from_epsg(4326).to_wkt("WKT1_GDAL")
    with h5py.File(path, "w", libver="earliest") as f:
        f.attrs.create("_NCProperties", NC_PROPERTIES)
        d_down = _dim(f, "downtrack", rows)
        d_cross = _dim(f, "crosstrack", cols)
        d_bands = _dim(f, "bands", wl.size)
        d_oy = _dim(f, "ortho_y", ny)
        d_ox = _dim(f, "ortho_x", nx)
        for k, v in [
            ("ncei_template_version", "NCEI_NetCDF_Swath_Template_v2.0"),
            (
                "title",
                f"EMIT {level} {'Estimated Surface Reflectance' if level == 'L2A' else 'At-Sensor Calibrated Radiance'} 60 m V001",
            ),
            ("keywords", "Imaging Spectroscopy, minerals, EMIT, dust, radiative forcing"),
            ("Conventions", "CF-1.63"),
            ("sensor", "EMIT (Earth Surface Mineral Dust Source Investigation)"),
            ("instrument", "EMIT"),
            ("platform", "ISS"),
            ("naming_authority", "LPDAAC"),
            ("flight_line", "emit20240614t201532_o16613_s000"),
            ("time_coverage_start", "2024-06-14T20:15:32+0000"),
            ("time_coverage_end", "2024-06-14T20:15:44+0000"),
            ("product_version", "V001"),
            ("day_night_flag", "Day"),
            ("crosstrack_orientation", "as seen on ground"),
            ("spatial_ref", wkt),
        ]:
            _text(f, k, v)
        _text(f, "summary", "EMIT observes the sunlit Earth's dust source regions within +/-52° latitude.")
        f.attrs.create("geotransform", np.array([gx0, step, 0.0, gy0, 0.0, -step], np.float64))
        for k, v in [
            ("easternmost_longitude", lon.max()),
            ("northernmost_latitude", lat.max()),
            ("westernmost_longitude", lon.min()),
            ("southernmost_latitude", lat.min()),
            ("spatialResolution", step),
        ]:
            _num(f, k, v, np.float64)
        _var(f, var, stored, (d_down, d_cross, d_bands), long_name, units)
        sbp = f.create_group("sensor_band_parameters")
        _var(sbp, "wavelengths", wl, (d_bands,), "Wavelength Centers", "nm")
        _var(sbp, "fwhm", fwhm, (d_bands,), "Full Width at Half Max", "nm")
        # netCDF4-python casts the -9999 fill to the variable's type: 241 for u1
        if level == "L2A":
            _var(
                sbp,
                "good_wavelengths",
                good.astype(np.uint8),
                (d_bands,),
                "Wavelengths where reflectance is useable: 1 = good data, 0 = bad data",
                "unitless",
                fill=np.array(-9999).astype(np.int64).astype(np.uint8),
            )
        loc = f.create_group("location")
        _var(loc, "lon", lon, (d_down, d_cross), "Longitude (WGS-84)", "degrees east")
        _var(loc, "lat", lat, (d_down, d_cross), "Latitude (WGS-84)", "degrees north")
        _var(loc, "elev", elev, (d_down, d_cross), "Surface Elevation", "m")
        _var(
            loc,
            "glt_x",
            glt_x,
            (d_oy, d_ox),
            "GLT Sample Lookup",
            "pixel location",
            fill=-9999,
            chunks=True,
            compression="gzip",
            compression_opts=9,
            shuffle=False,
        )
        _var(
            loc,
            "glt_y",
            glt_y,
            (d_oy, d_ox),
            "GLT Line Lookup",
            "pixel location",
            fill=-9999,
            chunks=True,
            compression="gzip",
            compression_opts=9,
        )
    return Product(
        path,
        "emit",
        wl.astype(float),
        good,
        refl.astype(np.float32),
        nodata,
        lon,
        lat,
        units="reflectance" if level == "L2A" else "radiance",
        extra={"glt": (glt_x, glt_y), "geotransform": (gx0, step, gy0)},
    )


# ------------------------------------------------------------------------------------------- PRISMA
def build_prisma(folder: Path, level: str = "L2D") -> Product:
    """PRISMA L2D (or L2C, or L1 radiance): VNIR and SWIR cubes (rows, bands, cols) uint16, descending
    wavelengths, unused bands 0. L2C and L1 are in sensor geometry (a skewed swath placed per pixel)."""
    rows, cols = ROWS, COLS
    vnir = np.linspace(402.4, 1005.0, 26)[::-1]  # descending as stored
    swir = np.linspace(934.5, 2497.0, 38)[::-1]
    vnir_cw = vnir.copy()
    swir_cw = swir.copy()
    vnir_cw[-2:] = 0.0  # unused bands: wavelength 0, flag 0 (VNIR's
    swir_cw[:2] = 0.0  # shortest, SWIR's longest; the overlap stays)
    vnir_flag = (vnir_cw > 0).astype(np.int8)
    swir_flag = (swir_cw > 0).astype(np.int8)
    wl_v = np.where(vnir_cw > 0, vnir_cw, 500.0)
    wl_s = np.where(swir_cw > 0, swir_cw, 1500.0)
    all_wl = np.concatenate([wl_v, wl_s])
    refl = scene(all_wl, seed=22)
    if level == "L1":
        refl = 10.0 * _radiance(refl, all_wl)  # W m-2 sr-1 um-1
    nodata = np.zeros((rows, cols), bool)
    for r in range(rows):  # L2D: the swath's edge leaves a corner empty, DN 0 in every band (EnMAP-Box's
        nodata[r, : max(0, 6 - r // 2)] = True  # importer masks such pixels as no data)
    vmin, vmax, smin, smax = 0.0, 0.7, 0.0, 0.65

    if level != "L2D":
        nodata[:] = False  # a swath has no grid corner to leave empty

    def dn(r, lo, hi):
        return np.clip(np.rint((r - lo) / (hi - lo) * 65535.0), 0, 65535).astype(np.uint16)

    sf_v, sf_s, off_v, off_s = 120.0, 230.0, 0.0, -0.5  # L1: radiance = DN / ScaleFactor + Offset
    if level == "L1":
        dn_v = np.clip(np.rint((refl[:, :, : vnir.size] - off_v) * sf_v), 0, 65535).astype(np.uint16)
        dn_s = np.clip(np.rint((refl[:, :, vnir.size :] - off_s) * sf_s), 0, 65535).astype(np.uint16)
        phys_v, phys_s = dn_v / sf_v + off_v, dn_s / sf_s + off_s
    else:
        dn_v = dn(refl[:, :, : vnir.size], vmin, vmax)
        dn_s = dn(refl[:, :, vnir.size :], smin, smax)
        dn_v[nodata] = 0
        dn_s[nodata] = 0
        phys_v = vmin + dn_v.astype(np.float64) * (vmax - vmin) / 65535.0
        phys_s = smin + dn_s.astype(np.float64) * (smax - smin) / 65535.0

    epsg, x0, y0, px = 32632, 512_000.0, 4_921_020.0, 30.0
    lon, lat = _grid_lonlat(epsg, x0, y0, px)
    if level != "L2D":  # sensor geometry: the rows run along the track, 9 degrees off north
        rr, cc = np.mgrid[:rows, :cols].astype(float)
        a = np.radians(9.0)
        lon, lat = _utm_lonlat(
            epsg, x0 + 30.0 * (cc * np.cos(a) + rr * np.sin(a)), y0 + 30.0 * (cc * np.sin(a) - rr * np.cos(a))
        )
    sw = {"L2D": "PRS_L2D_HCO", "L2C": "PRS_L2C_HCO", "L1": "PRS_L1_HCO"}[level]
    path = (
        folder / f"PRS_{level}_STD{'_OFFL' if level == 'L1' else ''}_20240512101847_20240512101851_0001.he5"
    )
    with h5py.File(path, "w") as f:
        a = f.attrs
        a.create("Processing_Level", np.bytes_(level[1:].encode()))
        a.create("Product_ID", np.bytes_(f"PRS_{level}_STD".encode()))
        a.create("Product_StartTime", np.bytes_(b"2024-05-12T10:18:47.012"))
        a.create("List_Cw_Vnir", vnir_cw.astype(np.float32))
        a.create("List_Cw_Swir", swir_cw.astype(np.float32))
        a.create("List_Fwhm_Vnir", np.where(vnir_cw > 0, 11.0, 0.0).astype(np.float32))
        a.create("List_Fwhm_Swir", np.where(swir_cw > 0, 10.5, 0.0).astype(np.float32))
        a.create("List_Cw_Vnir_Flags", vnir_flag)
        a.create("List_Cw_Swir_Flags", swir_flag)
        if level == "L1":
            a.create("ScaleFactor_Vnir", np.float32(sf_v))
            a.create("ScaleFactor_Swir", np.float32(sf_s))
            a.create("Offset_Vnir", np.float32(off_v))
            a.create("Offset_Swir", np.float32(off_s))
        else:
            a.create("L2ScaleVnirMin", np.float32(vmin))
            a.create("L2ScaleVnirMax", np.float32(vmax))
            a.create("L2ScaleSwirMin", np.float32(smin))
            a.create("L2ScaleSwirMax", np.float32(smax))
        a.create("Epsg_Code", np.int32(epsg))
        # the corners are the centres of the corner pixels (EnMAP-Box's L2D importer widens them by 15 m)
        a.create("Product_ULcorner_easting", np.float64(x0 + px / 2))
        a.create("Product_ULcorner_northing", np.float64(y0 - px / 2))
        a.create("Product_LRcorner_easting", np.float64(x0 + (cols - 0.5) * px))
        a.create("Product_LRcorner_northing", np.float64(y0 - (rows - 0.5) * px))
        a.create("Sun_zenith_angle", np.float32(31.2))
        f.create_group("HDFEOS/ADDITIONAL/FILE_ATTRIBUTES")
        f.create_dataset(
            "HDFEOS INFORMATION/StructMetadata.0",
            data=np.bytes_(
                f'GROUP=SwathStructure\n\tGROUP=SWATH_1\n\t\tSwathName="{sw}"\n\tEND_GROUP=SWATH_1\n'
                "END_GROUP=SwathStructure\nEND\n".encode()
            ),
        )
        hco = f.create_group(f"HDFEOS/SWATHS/{sw}")
        df = hco.create_group("Data Fields")
        df.create_dataset(
            "VNIR_Cube", data=np.transpose(dn_v, (0, 2, 1)), chunks=(1, vnir.size, cols), compression="gzip"
        )
        df.create_dataset(
            "SWIR_Cube", data=np.transpose(dn_s, (0, 2, 1)), chunks=(1, swir.size, cols), compression="gzip"
        )
        err = "L2" if level != "L1" else "L1"
        df.create_dataset(f"VNIR_PIXEL_{err}_ERR_MATRIX", data=np.zeros((rows, vnir.size, cols), np.uint8))
        df.create_dataset(f"SWIR_PIXEL_{err}_ERR_MATRIX", data=np.zeros((rows, swir.size, cols), np.uint8))
        gf = hco.create_group("Geolocation Fields")
        if level == "L1":  # L1 places each detector (acolite reads the SWIR's)
            for det in ("VNIR", "SWIR"):
                gf.create_dataset(f"Latitude_{det}", data=lat.astype(np.float32))
                gf.create_dataset(f"Longitude_{det}", data=lon.astype(np.float32))
        else:
            gf.create_dataset("Latitude", data=lat.astype(np.float32))
            gf.create_dataset("Longitude", data=lon.astype(np.float32))
        geom = hco.create_group("Geometric Fields")
        geom.create_dataset("Solar_Zenith_Angle", data=np.full((rows, cols), 31.2, np.float32))
        pco = f.create_group(f"HDFEOS/SWATHS/{sw[:-3]}PCO")
        pco.create_dataset("Data Fields/Cube", data=np.zeros((rows * 6, cols * 6), np.uint16))
    # what a reader should give: the used bands, ascending (the VNIR/SWIR overlap both present)
    used = np.concatenate([vnir_flag, swir_flag]).astype(bool)
    phys = np.concatenate([phys_v, phys_s], axis=2)[:, :, used]
    wl_used = all_wl[used]
    order = np.argsort(wl_used, kind="stable")
    return Product(
        path,
        "prisma",
        wl_used[order],
        np.ones(order.size, bool),
        phys[:, :, order].astype(np.float32),
        nodata,
        lon,
        lat,
        units="radiance" if level == "L1" else "reflectance",
        atol=(vmax - vmin) / 65535 * 1.01 if level != "L1" else 1e-5,
        extra={"n_unused": int((~used).sum()), "overlap": (swir_cw[swir_cw > 0].min(), vnir_cw.max())},
    )


# -------------------------------------------------------------------------------------------- EnMAP
def _enmap_xml(
    wl,
    fwhm,
    gain,
    offset,
    extra_band_blocks: str,
    n_vnir: int,
    level: str = "L2A",
    corners: dict | None = None,
) -> str:
    bands = "\n".join(
        f'      <bandID number="{i + 1}">\n'
        f"        <wavelengthCenterOfBand>{w:.6f}</wavelengthCenterOfBand>\n"
        f"        <FWHMOfBand>{fw:.4f}</FWHMOfBand>\n"
        f"        <GainOfBand>{g:.8g}</GainOfBand>\n"
        f"        <OffsetOfBand>{o:.8g}</OffsetOfBand>\n"
        f"      </bandID>"
        for i, (w, fw, g, o) in enumerate(zip(wl, fwhm, gain, offset))
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<level_X xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
        f"  <metadata><schema><processingLevel>{level}</processingLevel></schema></metadata>\n"
        "  <base><temporalCoverage><startTime>2024-07-02T10:45:26.000Z</startTime></temporalCoverage>\n"
        + (
            ""
            if corners is None
            else "    <spatialCoverage><boundingPolygon>\n"
            + "".join(
                f"      <point><frame>{k}</frame><latitude>{la:.7f}</latitude><longitude>{lo:.7f}</longitude></point>\n"
                for k, (lo, la) in corners.items()
            )
            + "    </boundingPolygon></spatialCoverage>\n"
        )
        + "  </base>\n"
        "  <product><image><merge><dimension><rows>40</rows><columns>50</columns></dimension>\n"
        f"    <channels>{len(wl)}</channels></merge></image></product>\n"
        f"  <quality>\n    <defectivePixels>\n{extra_band_blocks}\n    </defectivePixels>\n  </quality>\n"
        "  <specific>\n"
        f"    <numberOfBands>{len(wl)}</numberOfBands>\n"
        f"    <numberOfVNIRBands>{n_vnir}</numberOfVNIRBands><numberOfSWIRBands>{len(wl) - n_vnir}"
        "</numberOfSWIRBands>\n"
        f"    <vnirProductQuality><expectedChannelsList>{','.join(str(i) for i in range(1, n_vnir + 1))}"
        "</expectedChannelsList></vnirProductQuality>\n"
        f"    <swirProductQuality><expectedChannelsList>{','.join(str(i) for i in range(n_vnir + 1, len(wl) + 1))}"
        "</expectedChannelsList></swirProductQuality>\n"
        "    <bandCharacterisation>\n" + bands + "\n    </bandCharacterisation>\n"
        "  </specific>\n</level_X>\n"
    )


def build_enmap(folder: Path, cog: bool = False) -> Product:
    """EnMAP L2A: one GeoTIFF (int16 reflectance x 10000) and METADATA.XML, water-vapour edge bands nodata.
    ``cog``: the cloud-optimised delivery (DLR's STAC assets): ``*-SPECTRAL_IMAGE_COG.TIF``, tiled with
    overviews, and the quality masks beside it (``*-QL_QUALITY_CLOUD_COG.TIF``...)."""
    import rasterio
    from rasterio.transform import from_origin

    rows, cols = ROWS, COLS
    # VNIR's bands then SWIR's, the two detectors overlapping at 904-993 nm (EnMAP-Box's importers find the
    # overlap from vnir/swirProductQuality's expectedChannelsList)
    wl = np.concatenate([np.linspace(418.24, 993.0, 30), np.linspace(904.2, 2445.5, 36)])
    fwhm = np.concatenate([np.full(30, 6.5), np.full(36, 11.0)])
    bad = (wl > 1330) & (wl < 1400)
    refl = scene(wl, seed=33)
    nodata = np.zeros((rows, cols), bool)
    nodata[-4:, :7] = True
    dn = np.rint(refl * 10000.0).astype(np.int16)
    dn[nodata] = -32768
    dn[:, :, bad] = -32768
    gain = np.full(wl.size, 1e-4)
    offset = np.zeros(wl.size)
    phys = dn.astype(np.float64) * 1e-4
    defects = "\n".join(
        f'      <bandID number="{i}"><defectivePixelCount>{i % 3}</defectivePixelCount></bandID>'
        for i in (3, 7, 12)
    )
    stem = "ENMAP01-____L2A-DT0000084101_20240702T104526Z_008_V010402_20240705T123001Z"
    d = folder / stem
    d.mkdir()
    (d / f"{stem}-METADATA.XML").write_text(_enmap_xml(wl, fwhm, gain, offset, defects, n_vnir=30))
    epsg, x0, y0, px = 32633, 368_010.0, 5_808_990.0, 30.0
    path = d / f"{stem}-SPECTRAL_IMAGE{'_COG' if cog else ''}.TIF"
    profile = dict(
        width=cols,
        height=rows,
        count=wl.size,
        dtype="int16",
        crs=f"EPSG:{epsg}",
        transform=from_origin(x0, y0, px, px),
        nodata=-32768,
    )
    if cog:
        profile.update(driver="COG", blocksize=16, compress="deflate", overview_resampling="nearest")
    else:
        profile.update(driver="GTiff", interleave="band", tiled=False)
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.transpose(dn, (2, 0, 1)))
    if cog:
        for q in ("CLOUD", "CLOUDSHADOW", "HAZE"):
            with rasterio.open(
                d / f"{stem}-QL_QUALITY_{q}_COG.TIF",
                "w",
                driver="COG",
                width=cols,
                height=rows,
                count=1,
                dtype="uint8",
                crs=f"EPSG:{epsg}",
                transform=from_origin(x0, y0, px, px),
            ) as ds:
                ds.write(np.zeros((1, rows, cols), np.uint8))
    lon, lat = _grid_lonlat(epsg, x0, y0, px)
    order = np.argsort(wl, kind="stable")
    return Product(
        path,
        "enmap",
        wl[order],
        ~bad[order],
        phys[:, :, order].astype(np.float32),
        nodata,
        lon,
        lat,
        atol=1e-4 * 0.51,
        extra={"overlap": (904.2, 993.0)},
    )


def build_enmap_l1b(folder: Path) -> Product:
    """EnMAP L1B: VNIR and SWIR radiance in two GeoTIFFs in sensor geometry (no grid), DN x gain + offset
    per band, the four scene corners in METADATA.XML's ``base/spatialCoverage/boundingPolygon``."""
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    rows, cols = ROWS, COLS
    wl = np.concatenate([np.linspace(418.24, 993.0, 30), np.linspace(904.2, 2445.5, 36)])
    fwhm = np.concatenate([np.full(30, 6.5), np.full(36, 11.0)])
    rad = _radiance(scene(wl, seed=77), wl) * 10.0  # W m-2 sr-1 um-1
    gain = np.where(wl < 1000, 0.0021, 0.0013) * (1 + 0.05 * np.sin(np.arange(wl.size)))
    offset = np.where(wl < 1000, -0.12, -0.05)
    dn = np.rint((rad - offset) / gain).astype(np.int16)
    phys = dn * gain + offset
    # the scene's corners (pixel centres), a track 12 degrees off north near 47.9 N 11.3 E
    lat0, lon0, ang = 47.9, 11.3, np.radians(12.0)
    m_lon = 111_000.0 * np.cos(np.radians(lat0))

    def place(r, c):
        e = 30.0 * (c * np.cos(ang) + r * np.sin(ang))
        n = 30.0 * (c * np.sin(ang) - r * np.cos(ang))
        return lon0 + e / m_lon, lat0 + n / 111_000.0

    corners = {
        "upper_left": place(0, 0),
        "upper_right": place(0, cols - 1),
        "lower_left": place(rows - 1, 0),
        "lower_right": place(rows - 1, cols - 1),
        "center": place((rows - 1) / 2, (cols - 1) / 2),
    }
    rr, cc = np.mgrid[:rows, :cols].astype(float)
    lon, lat = place(rr, cc)
    stem = "ENMAP01-____L1B-DT0000084101_20240702T104526Z_008_V010402_20240705T122311Z"
    d = folder / stem
    d.mkdir()
    (d / f"{stem}-METADATA.XML").write_text(
        _enmap_xml(wl, fwhm, gain, offset, "", n_vnir=30, level="L1B", corners=corners)
    )
    for det, sl in (("VNIR", slice(0, 30)), ("SWIR", slice(30, None))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(
                d / f"{stem}-SPECTRAL_IMAGE_{det}.TIF",
                "w",
                driver="GTiff",
                width=cols,
                height=rows,
                count=dn[:, :, sl].shape[2],
                dtype="int16",
                interleave="band",
            ) as ds:
                ds.write(np.transpose(dn[:, :, sl], (2, 0, 1)))
    order = np.argsort(wl, kind="stable")
    return Product(
        d / f"{stem}-METADATA.XML",
        "enmap",
        wl[order],
        np.ones(wl.size, bool),
        phys[:, :, order].astype(np.float32),
        np.zeros((rows, cols), bool),
        lon,
        lat,
        units="radiance",
        atol=float(gain.max()) * 0.51,
        extra={"overlap": (904.2, 993.0)},
    )


# ------------------------------------------------------------------------------------------- AVIRIS
def build_aviris(folder: Path) -> Product:
    """AVIRIS-3 orthorectified reflectance NetCDF: group ``reflectance`` (wavelength, northing, easting)."""
    rows, cols = ROWS, COLS
    wl = np.linspace(390.9, 2496.3, 62).astype(np.float32)
    refl = scene(wl.astype(float), seed=44)
    nodata = np.zeros((rows, cols), bool)
    nodata[:, -3:] = True  # outside the flight line after orthorectification
    nodata[:5, -8:] = True
    stored = refl.astype(np.float32)
    stored[nodata] = -9999.0
    epsg, x0, y0, px = 32611, 402_117.0, 3_770_403.0, 4.8
    east = x0 + (np.arange(cols) + 0.5) * px
    north = y0 - (np.arange(rows) + 0.5) * px
    path = folder / "AV320240611t190512_007_L2A_OE_main_27577a78_RFL_ORT.nc"
    crs = CRS.from_epsg(epsg)
    with h5py.File(path, "w") as f:
        f.attrs.create("_NCProperties", NC_PROPERTIES)
        _text(f, "Conventions", "CF-1.6")
        _text(f, "title", "AVIRIS-3 L2A orthocorrected surface reflectance")
        d_e = _dim(f, "easting", cols, east, "f8")
        d_n = _dim(f, "northing", rows, north, "f8")
        _text(d_e, "standard_name", "projection_x_coordinate")
        _text(d_e, "units", "m")
        _text(d_n, "standard_name", "projection_y_coordinate")
        _text(d_n, "units", "m")
        tm = f.create_dataset("transverse_mercator", data=np.bytes_(b""), dtype="S1")
        cf = crs.to_cf()
        for k, v in cf.items():
            if isinstance(v, str):
                _text(tm, k, v)
            elif k != "crs_wkt":
                _num(tm, k, v, np.float64)
        _text(tm, "spatial_ref", crs.to_wkt("WKT1_GDAL"))
        _text(tm, "GeoTransform", f"{x0:.15g} {px:.15g} 0 {y0:.15g} 0 {-px:.15g} ")
        g = f.create_group("reflectance")
        d_w = _dim(g, "wavelength", wl.size, wl, "f4")
        _text(d_w, "units", "nm")
        _text(d_w, "long_name", "Wavelength Centers")
        _var(g, "fwhm", np.full(wl.size, 7.4, np.float32), (d_w,), "Full Width at Half Max", "nm")
        ds = _var(
            g,
            "reflectance",
            np.transpose(stored, (2, 0, 1)),
            (d_w, d_n, d_e),
            "Surface hemispherical directional reflectance factor",
            "unitless",
            chunks=(16, 20, 25),
            compression="gzip",
            compression_opts=4,
        )
        _text(ds, "grid_mapping", "transverse_mercator")
    lon, lat = _utm_lonlat(epsg, *np.meshgrid(east, north))
    return Product(
        path, "aviris", wl.astype(float), np.ones(wl.size, bool), refl.astype(np.float32), nodata, lon, lat
    )


# ------------------------------------------------------------------------------------------ Tanager
def _struct_metadata(rows: int, cols: int, ul: tuple, lr: tuple, zone: int) -> bytes:
    return (
        "GROUP=SwathStructure\nEND_GROUP=SwathStructure\nGROUP=GridStructure\n\tGROUP=GRID_1\n"
        '\t\tGridName="HYP"\n'
        f"\t\tXDim={cols}\n\t\tYDim={rows}\n"
        f"\t\tUpperLeftPointMtrs=({ul[0]:.6f},{ul[1]:.6f})\n\t\tLowerRightMtrs=({lr[0]:.6f},{lr[1]:.6f})\n"
        f"\t\tProjection=HE5_GCTP_UTM\n\t\tZoneCode={zone}\n\t\tSphereCode=12\n"
        "\t\tGridOrigin=HE5_HDFE_GD_UL\n\t\tGROUP=Dimension\n\t\tEND_GROUP=Dimension\n"
        '\t\tGROUP=DataField\n\t\t\tOBJECT=DataField_1\n\t\t\t\tDataFieldName="surface_reflectance"\n'
        '\t\t\t\tDataType=H5T_NATIVE_FLOAT\n\t\t\t\tDimList=("Band","YDim","XDim")\n'
        "\t\t\tEND_OBJECT=DataField_1\n\t\tEND_GROUP=DataField\n"
        "\tEND_GROUP=GRID_1\nEND_GROUP=GridStructure\nGROUP=PointStructure\nEND_GROUP=PointStructure\n"
        "GROUP=ZaStructure\nEND_GROUP=ZaStructure\nEND\n"
    ).encode()


def build_tanager(folder: Path, ortho: bool = True, radiance: bool = False) -> Product:
    """Planet Tanager surface reflectance, HDF-EOS5 (band, y, x) float32: the ortho product on a UTM grid
    (``GRIDS/HYP``), or the basic one in sensor geometry (``SWATHS/HYP`` with ``Geolocation Fields``)."""
    rows, cols = ROWS, COLS
    wl = np.linspace(376.4, 2499.1, 70).astype(np.float32)
    good = ~(((wl > 1340) & (wl < 1460)) | ((wl > 1790) & (wl < 1960)) | (wl > 2470))
    refl = scene(wl.astype(float), seed=55)
    if radiance:  # toa_radiance, W m-2 sr-1 um-1 (ten times uW cm-2 sr-1 nm-1); no bad-band list
        refl = 10.0 * _radiance(refl, wl.astype(float))
        good = np.ones(wl.size, bool)
    nodata = np.zeros((rows, cols), bool)
    rr, cc = np.mgrid[:rows, :cols]
    nodata |= cc < (8 - rr // 5)  # the rotated strip leaves the grid's corners empty
    nodata |= cc > cols - 1 - (rr // 6)
    stored = refl.astype(np.float32)
    stored[nodata] = -9999.0
    epsg, zone, x0, y0, px = 32632, 32, 301_020.0, 5_110_980.0, 30.0
    lon, lat = _grid_lonlat(epsg, x0, y0, px)
    if not ortho:  # sensor geometry: a slightly skewed strip, placed by per-pixel latitude/longitude
        rr, cc = np.mgrid[:rows, :cols].astype(float)
        lon, lat = _utm_lonlat(epsg, x0 + (cc + 0.5) * px + 4.0 * rr, y0 - (rr + 0.5) * px + 2.5 * cc)
    cube_name = "toa_radiance" if radiance else "surface_reflectance"
    path = (
        folder
        / f"20250506_103512_02_4001_{'ortho' if ortho else 'basic'}_{'radiance' if radiance else 'sr'}_hdf5.h5"
    )
    with h5py.File(path, "w") as f:
        struct = (
            _struct_metadata(rows, cols, (x0, y0), (x0 + cols * px, y0 - rows * px), zone)
            if ortho
            else b'GROUP=SwathStructure\n\tGROUP=SWATH_1\n\t\tSwathName="HYP"\n\tEND_GROUP=SWATH_1\n'
            b"END_GROUP=SwathStructure\nGROUP=GridStructure\nEND_GROUP=GridStructure\nEND\n"
        )
        f.create_dataset("HDFEOS INFORMATION/StructMetadata.0", data=np.bytes_(struct), dtype="S32000")
        f["HDFEOS INFORMATION"].attrs.create("HDFEOSVersion", np.bytes_(b"HDFEOS_5.1.16"))
        f.create_group("HDFEOS/ADDITIONAL/FILE_ATTRIBUTES")
        hyp = f.create_group("HDFEOS/GRIDS/HYP" if ortho else "HDFEOS/SWATHS/HYP")
        if ortho:
            hyp.attrs.create("epsg_code", np.int64(epsg))
        else:
            gf = hyp.create_group("Geolocation Fields")
            gf.create_dataset("Latitude", data=lat)
            gf.create_dataset("Longitude", data=lon)
        hyp.attrs.create("strip_id", np.bytes_(b"20250506_103512_02_4001"))
        hyp.attrs.create("created_at", np.bytes_(b"2025-05-07T02:11:09Z"))
        df = hyp.create_group("Data Fields")
        sr = df.create_dataset(
            cube_name,
            data=np.transpose(stored, (2, 0, 1)),
            chunks=(1, rows, cols),
            compression="gzip",
            compression_opts=4,
        )
        sr.attrs.create("wavelengths", wl)
        sr.attrs.create("fwhm", np.full(wl.size, 6.05, np.float32))
        if not radiance:  # Planet ships the bad-band flags on the SR product only
            sr.attrs.create("good_wavelengths", good.astype(np.uint8))
        sr.attrs.create("Unit", np.bytes_(b"W/(m^2 sr um)" if radiance else b"Unitless"))
        sr.attrs.create("_FillValue", np.float32(-9999.0))
        unc = np.full_like(np.transpose(stored, (2, 0, 1)), 0.01)
        unc[:, nodata] = -9999.0
        df.create_dataset(f"{cube_name}_uncertainty", data=unc, chunks=(1, rows, cols), compression="gzip")
        df.create_dataset("nodata_pixels", data=nodata.astype(np.uint8))
        df.create_dataset("beta_cloud_mask", data=np.zeros((rows, cols), np.uint8))
        df.create_dataset("beta_cirrus_mask", data=np.zeros((rows, cols), np.uint8))
        df.create_dataset("aerosol_optical_depth", data=np.full((rows, cols), 0.12, np.float32))
    return Product(
        path,
        "tanager",
        wl.astype(float),
        good,
        refl.astype(np.float32),
        nodata,
        lon,
        lat,
        units="radiance (W/(m^2 sr um))" if radiance else "reflectance",
    )


# --------------------------------------------------------------------------------------------- DESIS
def build_desis(folder: Path) -> Product:
    """DESIS L2A: BIP, deflate-compressed int16 GeoTIFF (reflectance x 10000) with an ENVI-style header."""
    import rasterio
    from rasterio.transform import from_origin

    rows, cols = ROWS, COLS
    wl = np.round(np.linspace(401.9, 999.2, 60), 3)
    refl = scene(wl, seed=66)
    nodata = np.zeros((rows, cols), bool)
    nodata[:2, :] = True  # first lines of the tile: no data
    dn = np.rint(refl * 10000.0).astype(np.int16)
    dn[nodata] = -32768
    phys = dn.astype(np.float64) / 10000.0
    epsg, x0, y0, px = 32618, 580_110.0, 4_501_230.0, 30.0
    stem = "DESIS-HSI-L2A-DT0851342560_003-20230810T153015-V0220"
    d = folder / stem
    d.mkdir()
    path = d / f"{stem}-SPECTRAL_IMAGE.TIF"  # upper case, as DLR names it
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=cols,
        height=rows,
        count=wl.size,
        dtype="int16",
        crs=f"EPSG:{epsg}",
        transform=from_origin(x0, y0, px, px),
        nodata=-32768,
        interleave="pixel",
        compress="deflate",
        tiled=False,
    ) as ds:
        ds.write(np.transpose(dn, (2, 0, 1)))
    fmt = ", ".join
    hdr = (
        "ENVI\n"
        "description = {DESIS L2A surface reflectance}\n"
        f"samples = {cols}\nlines = {rows}\nbands = {wl.size}\nheader offset = 0\n"
        "file type = TIFF\ndata type = 2\ninterleave = bip\nbyte order = 0\n"
        f"map info = {{UTM, 1, 1, {x0:.3f}, {y0:.3f}, {px:.1f}, {px:.1f}, 18, North, WGS-84, units=Meters}}\n"
        "data ignore value = -32768\n"
        "wavelength units = Nanometers\n"
        f"wavelength = {{{fmt(f'{w:.3f}' for w in wl)}}}\n"
        f"fwhm = {{{fmt('3.500' for _ in wl)}}}\n"
        f"data gain values = {{{fmt('0.0001' for _ in wl)}}}\n"
        f"data offset values = {{{fmt('0' for _ in wl)}}}\n"
        f"band names = {{{fmt(f'band {i + 1}' for i in range(wl.size))}}}\n"
    )
    (d / f"{stem}-SPECTRAL_IMAGE.hdr").write_text(hdr)
    (d / f"{stem}-METADATA.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<hsi_doc><base><productType>L2A</productType></base></hsi_doc>\n'
    )
    lon, lat = _grid_lonlat(epsg, x0, y0, px)
    return Product(
        path, "desis", wl, np.ones(wl.size, bool), phys.astype(np.float32), nodata, lon, lat, atol=1e-4 * 0.51
    )


BUILDERS = {
    "emit": build_emit,
    "emit_l1b": lambda d: build_emit(d, "L1B"),
    "prisma": build_prisma,
    "prisma_l2c": lambda d: build_prisma(d, "L2C"),
    "prisma_l1": lambda d: build_prisma(d, "L1"),
    "enmap": build_enmap,
    "enmap_cog": lambda d: build_enmap(d, cog=True),
    "enmap_l1b": build_enmap_l1b,
    "aviris": build_aviris,
    "tanager": build_tanager,
    "tanager_basic": lambda d: build_tanager(d, ortho=False),
    "tanager_radiance": lambda d: build_tanager(d, radiance=True),
    "desis": build_desis,
}


def build_all(folder: Path) -> dict[str, Product]:
    out = {}
    for name, fn in BUILDERS.items():
        sub = folder / name
        sub.mkdir(parents=True, exist_ok=True)
        out[name] = fn(sub)
    return out


if __name__ == "__main__":  # build them into a folder to look at: python tests/independent_products.py DIR
    import sys

    built = build_all(Path(sys.argv[1]))
    print(json.dumps({k: str(v.path) for k, v in built.items()}, indent=1))
