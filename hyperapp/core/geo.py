"""Where a cube's pixels lie on Earth.

A cube's ``geo`` is one of two things:

* :class:`MapGrid`: the pixels are a regular grid of a map projection (an ENVI ``map info``, a GeoTIFF,
  an orthorectified EMIT/AVIRIS/Tanager product): an affine transform in GDAL's order and a CRS;
* :class:`Swath`: the pixels are where the sensor saw them (EMIT, PRISMA, DESIS swaths): a latitude and a
  longitude per pixel (arrays, possibly lazy h5py datasets read on demand), and for EMIT a geometry lookup
  table (GLT) that places the swath's pixels on an orthorectified :class:`MapGrid`.

:func:`lonlat` gives WGS84 longitude/latitude at pixel centres for either; :func:`window` follows a
spatial subset (a window shifts a grid's origin and slices a swath); :func:`geo_from_map_info` reads an
ENVI ``map info``; :func:`describe` is the one line ``hyperapp info`` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

WGS84 = "EPSG:4326"


@dataclass(frozen=True)
class MapGrid:
    """A regular map grid.

    Attributes
    ----------
    transform : tuple of 6 float
        GDAL order: ``(x0, pixel width, row rotation, y0, column rotation, pixel height)``; map coordinates
        of pixel (row, col)'s upper-left corner are ``x = x0 + col * t[1] + row * t[2]``,
        ``y = y0 + col * t[4] + row * t[5]`` (``t[5]`` is negative for north-up images).
    crs : str
        Anything :class:`pyproj.CRS` accepts: WKT, ``"EPSG:n"``, a PROJ string.
    """

    transform: tuple[float, float, float, float, float, float]
    crs: str

    def __post_init__(self) -> None:
        t = tuple(float(v) for v in self.transform)
        if len(t) != 6:
            raise ValueError(f"a map grid's transform has 6 numbers (GDAL order), got {len(t)}")
        object.__setattr__(self, "transform", t)

    def xy(self, rows, cols) -> tuple[np.ndarray, np.ndarray]:
        """Map coordinates of the centres of pixels (rows, cols) (floats or arrays, 0-based)."""
        r = np.asarray(rows, dtype=np.float64) + 0.5
        c = np.asarray(cols, dtype=np.float64) + 0.5
        t = self.transform
        return t[0] + c * t[1] + r * t[2], t[3] + c * t[4] + r * t[5]

    def window(self, rows: slice, cols: slice) -> MapGrid:
        """The grid of a window starting at ``rows.start``, ``cols.start`` with those slices' steps: its pixels
        are ``step`` times as large, each centred where the pixel it keeps was."""
        r0, rs = rows.start or 0, rows.step or 1
        c0, cs = cols.start or 0, cols.step or 1
        t = self.transform
        # the new upper-left corner: the kept first pixel's centre less half a new pixel
        c = c0 + 0.5 - 0.5 * cs
        r = r0 + 0.5 - 0.5 * rs
        return MapGrid((t[0] + c * t[1] + r * t[2], t[1] * cs, t[2] * rs,
                        t[3] + c * t[4] + r * t[5], t[4] * cs, t[5] * rs), self.crs)

    @property
    def pixel_size(self) -> tuple[float, float]:
        """(width, height) of a pixel in the CRS's units (positive)."""
        t = self.transform
        return math.hypot(t[1], t[4]), math.hypot(t[2], t[5])


@dataclass(frozen=True, eq=False)
class Swath:
    """Pixels located by latitude/longitude arrays (WGS84 degrees), one value per pixel.

    Attributes
    ----------
    lat, lon : array-like (rows, cols)
        NumPy arrays or lazy h5py datasets (read only where asked).
    glt : tuple (glt_x, glt_y) or None
        EMIT's geometry lookup table on ``grid``: for each output map pixel, the 1-based column (x) and row
        (y) of the swath pixel seen there, 0 where none. It always refers to the whole swath.
    grid : MapGrid or None
        The orthorectified grid ``glt`` is on.
    rows, cols : slice
        The window of ``lat``/``lon`` this swath is (see :meth:`window`); the whole arrays by default.
    """

    lat: Any
    lon: Any
    glt: tuple[Any, Any] | None = None
    grid: MapGrid | None = None
    rows: slice = field(default_factory=lambda: slice(None))
    cols: slice = field(default_factory=lambda: slice(None))

    @property
    def full_shape(self) -> tuple[int, int]:
        return int(self.lat.shape[0]), int(self.lat.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of this swath (its window)."""
        n, m = self.full_shape
        return len(range(*self.rows.indices(n))), len(range(*self.cols.indices(m)))

    def window(self, rows: slice, cols: slice) -> Swath:
        """The swath of a window of this one (slices relative to this swath)."""
        n, m = self.full_shape
        br = range(*self.rows.indices(n))[rows]
        bc = range(*self.cols.indices(m))[cols]
        return Swath(self.lat, self.lon, self.glt, self.grid, slice(br.start, br.stop, br.step),
                     slice(bc.start, bc.stop, bc.step))

    def full_index(self, rows, cols) -> tuple[np.ndarray, np.ndarray]:
        """(row, col) in the whole lat/lon arrays of this swath's pixels (rows, cols) (floats allowed)."""
        n, m = self.full_shape
        r0, _, rs = self.rows.indices(n)
        c0, _, cs = self.cols.indices(m)
        return r0 + np.asarray(rows, dtype=np.float64) * rs, c0 + np.asarray(cols, dtype=np.float64) * cs


class CornerField:
    """A lazy 2-D field (rows, cols) bilinear between four values at the corner pixels' centres: a swath's lat
    or lon where a product gives only its corners (EnMAP L1B). Sliced like an array."""

    def __init__(self, shape: tuple[int, int], ul: float, ur: float, ll: float, lr: float):
        self.shape = (int(shape[0]), int(shape[1]))
        self.corners = (float(ul), float(ur), float(ll), float(lr))
        self.dtype = np.dtype(np.float64)
        self.ndim = 2

    def __getitem__(self, idx) -> np.ndarray:
        rs, cs = idx
        n, m = self.shape
        r = np.arange(n, dtype=np.float64)[rs] / max(n - 1, 1)
        c = np.arange(m, dtype=np.float64)[cs] / max(m - 1, 1)
        ul, ur, ll, lr = self.corners
        a, b = r[:, None], c[None, :]
        return (1 - a) * ((1 - b) * ul + b * ur) + a * ((1 - b) * ll + b * lr)


def corner_swath(rows: int, cols: int, corners: dict) -> Swath:
    """A :class:`Swath` bilinear between the (lon, lat) of its four corner pixels' centres, given as
    ``{"upper_left": (lon, lat), "upper_right": ..., "lower_left": ..., "lower_right": ...}``: an
    approximation (straight edges) for products that give only their corners."""
    k = ("upper_left", "upper_right", "lower_left", "lower_right")
    lon = CornerField((rows, cols), *(corners[x][0] for x in k))
    lat = CornerField((rows, cols), *(corners[x][1] for x in k))
    return Swath(lat, lon)


@lru_cache(maxsize=32)
def _to_wgs84(crs: str):
    from pyproj import Transformer

    return Transformer.from_crs(crs, WGS84, always_xy=True)


@lru_cache(maxsize=32)
def _from_wgs84(crs: str):
    from pyproj import Transformer

    return Transformer.from_crs(WGS84, crs, always_xy=True)


def _block(a, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    return np.asarray(a[r0:r1, c0:c1], dtype=np.float64)


def _swath_lonlat(geo: Swath, rows, cols, nearest: bool) -> tuple[np.ndarray, np.ndarray]:
    fr, fc = geo.full_index(rows, cols)
    n, m = geo.full_shape
    fr = np.clip(fr, 0, n - 1)
    fc = np.clip(fc, 0, m - 1)
    if nearest or fr.size == 0:
        ir, ic = np.rint(fr).astype(np.intp), np.rint(fc).astype(np.intp)
        if fr.size == 0:
            return np.zeros(fr.shape), np.zeros(fr.shape)
        r0, r1, c0, c1 = int(ir.min()), int(ir.max()) + 1, int(ic.min()), int(ic.max()) + 1
        lat, lon = _block(geo.lat, r0, r1, c0, c1), _block(geo.lon, r0, r1, c0, c1)
        return lon[ir - r0, ic - c0], lat[ir - r0, ic - c0]
    # bilinear between the four pixel centres around each point (only their bounding box is read)
    i0 = np.minimum(np.floor(fr).astype(np.intp), max(n - 2, 0))
    j0 = np.minimum(np.floor(fc).astype(np.intp), max(m - 2, 0))
    r0, r1 = int(i0.min()), min(n, int(i0.max()) + 2)
    c0, c1 = int(j0.min()), min(m, int(j0.max()) + 2)
    lat, lon = _block(geo.lat, r0, r1, c0, c1), _block(geo.lon, r0, r1, c0, c1)
    a, b = fr - i0, fc - j0
    i1, j1 = np.minimum(i0 + 1, n - 1), np.minimum(j0 + 1, m - 1)

    def interp(v):
        v00, v01 = v[i0 - r0, j0 - c0], v[i0 - r0, j1 - c0]
        v10, v11 = v[i1 - r0, j0 - c0], v[i1 - r0, j1 - c0]
        return (1 - a) * ((1 - b) * v00 + b * v01) + a * ((1 - b) * v10 + b * v11)

    # longitudes across the antimeridian: interpolate on the unwrapped values
    lon = np.where(lon - lon.flat[0] > 180, lon - 360, np.where(lon - lon.flat[0] < -180, lon + 360, lon))
    out_lon = interp(lon)
    return (out_lon + 180.0) % 360.0 - 180.0, interp(lat)


def lonlat(geo: MapGrid | Swath, rows, cols, nearest: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """WGS84 (longitude, latitude) in degrees of the centres of pixels (rows, cols).

    Parameters
    ----------
    geo : MapGrid or Swath
        The cube's ``geo``.
    rows, cols : float or array-like
        0-based pixel positions in the cube (fractions allowed: 0.0 is the first pixel's centre).
    nearest : bool
        For a :class:`Swath`: take the nearest pixel's lat/lon instead of interpolating bilinearly.

    Returns
    -------
    (lon, lat) : arrays of the broadcast shape of ``rows`` and ``cols`` (0-d for scalars).
    """
    rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=np.float64), np.asarray(cols, dtype=np.float64))
    if isinstance(geo, MapGrid):
        x, y = geo.xy(rows, cols)
        if _is_wgs84(geo.crs):
            return np.asarray(x), np.asarray(y)
        lon, lat = _to_wgs84(geo.crs).transform(x, y)
        return np.asarray(lon), np.asarray(lat)
    if isinstance(geo, Swath):
        return _swath_lonlat(geo, rows, cols, nearest)
    raise TypeError(f"no location kind {type(geo).__name__}")


def map_xy(geo: MapGrid, lon, lat) -> tuple[np.ndarray, np.ndarray]:
    """The map coordinates in ``geo.crs`` of WGS84 (lon, lat)."""
    if _is_wgs84(geo.crs):
        return np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    x, y = _from_wgs84(geo.crs).transform(np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64))
    return np.asarray(x), np.asarray(y)


def pixel_of(geo: MapGrid, lon, lat) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) (floats, 0-based, centre at .0) of WGS84 (lon, lat) on a map grid."""
    x, y = map_xy(geo, lon, lat)
    t = geo.transform
    det = t[1] * t[5] - t[2] * t[4]
    dx, dy = x - t[0], y - t[3]
    col = (t[5] * dx - t[2] * dy) / det
    row = (-t[4] * dx + t[1] * dy) / det
    return row - 0.5, col - 0.5


@lru_cache(maxsize=64)
def _is_wgs84(crs: str) -> bool:
    s = crs.strip().upper()
    if s in ("EPSG:4326", "WGS84", "OGC:CRS84"):
        return True
    try:
        from pyproj import CRS

        c = CRS(crs)
        return c.is_geographic and c.to_epsg() == 4326
    except Exception:  # noqa: BLE001  (an unreadable CRS is not WGS84; lonlat says why when it transforms)
        return False


def window(geo: MapGrid | Swath | None, rows: slice, cols: slice) -> MapGrid | Swath | None:
    """``geo`` of a window (slices relative to the cube's pixels, already resolved: start/step set)."""
    if geo is None:
        return None
    return geo.window(rows, cols)


# ----------------------------------------------------------------------------- ENVI map info

#: ENVI datum names -> PROJ datum / ellipsoid words for UTM without an EPSG code
_DATUMS = {"wgs-84": "+datum=WGS84", "wgs84": "+datum=WGS84", "nad-83": "+datum=NAD83", "nad83": "+datum=NAD83",
           "north america 1983": "+datum=NAD83", "nad-27": "+datum=NAD27", "nad27": "+datum=NAD27",
           "north america 1927": "+datum=NAD27", "etrs-89": "+ellps=GRS80 +towgs84=0,0,0",
           "etrf-89": "+ellps=GRS80 +towgs84=0,0,0"}


def geo_from_map_info(map_info: list[str] | None, coordinate_system: str | None = None) -> MapGrid | None:
    """An ENVI ``map info`` (and ``coordinate system string``) as a :class:`MapGrid`.

    ``map info = {projection, ref x, ref y, easting, northing, pixel x, pixel y, [zone, North|South,]
    datum, [units=..., rotation=...]}``: the reference pixel (1-based, its upper-left corner at 1.0) has
    map coordinates (easting, northing). The CRS is the WKT of ``coordinate system string`` when given,
    else ``UTM`` (zone, hemisphere, datum) or ``Geographic Lat/Lon`` (WGS84). None where the map info
    places nothing (``Arbitrary``, pixel-based, too short, or a projection this does not know without
    WKT).
    """
    if not map_info or len(map_info) < 7:
        return None
    f = [str(v).strip() for v in map_info]
    proj = f[0].lower()
    try:
        ref_x, ref_y, east, north, dx, dy = (float(v) for v in f[1:7])
    except ValueError:
        return None
    rot = 0.0
    for v in f[7:]:
        if v.lower().replace(" ", "").startswith("rotation="):
            try:
                rot = math.radians(float(v.split("=", 1)[1]))
            except ValueError:
                return None
    crs: str | None = None
    if coordinate_system and coordinate_system.strip():
        crs = coordinate_system.strip()
    elif proj.startswith("utm") and len(f) >= 9:
        try:
            zone = int(float(f[7]))
        except ValueError:
            return None
        south = f[8].lower().startswith("s")
        datum = f[9].lower() if len(f) >= 10 else "wgs-84"
        if datum in ("wgs-84", "wgs84"):
            crs = f"EPSG:{(32700 if south else 32600) + zone}"
        elif datum in ("nad-83", "nad83", "north america 1983") and not south and 1 <= zone <= 23:
            crs = f"EPSG:{26900 + zone}"
        elif datum in _DATUMS:
            crs = f"+proj=utm +zone={zone}{' +south' if south else ''} {_DATUMS[datum]} +units=m +no_defs"
        else:
            return None
    elif proj.startswith("geographic"):
        crs = WGS84
    if crs is None:
        return None
    c, s = math.cos(rot), math.sin(rot)
    t1, t2, t4, t5 = c * dx + 0.0, -s * dy + 0.0, -s * dx + 0.0, -c * dy + 0.0
    x0 = east - (ref_x - 1.0) * t1 - (ref_y - 1.0) * t2
    y0 = north - (ref_x - 1.0) * t4 - (ref_y - 1.0) * t5
    return MapGrid((x0, t1, t2, y0, t4, t5), crs)


def map_info_from_grid(grid: MapGrid) -> list[str] | None:
    """ENVI ``map info`` of a north-up grid in a UTM (WGS84) or geographic CRS, else None (write the WKT
    as ``coordinate system string`` with ``map info = {Arbitrary, ...}`` or a GeoTIFF instead)."""
    t = grid.transform
    if t[2] != 0 or t[4] != 0:
        return None
    base = ["1", "1", repr(t[0]), repr(t[3]), repr(t[1]), repr(-t[5])]
    try:
        from pyproj import CRS

        c = CRS(grid.crs)
        epsg = c.to_epsg()
    except Exception:  # noqa: BLE001  (an unreadable CRS has no map info)
        return None
    if epsg == 4326:
        return ["Geographic Lat/Lon", *base, "WGS-84", "units=Degrees"]
    if epsg is not None and (32601 <= epsg <= 32660 or 32701 <= epsg <= 32760):
        return ["UTM", *base, str(epsg % 100), "North" if epsg < 32700 else "South", "WGS-84", "units=Meters"]
    return None


# ----------------------------------------------------------------------------- one line for info

def crs_name(crs: str) -> str:
    """A CRS's name (``WGS 84 / UTM zone 11N``), with its EPSG code where it has one."""
    try:
        from pyproj import CRS

        c = CRS(crs)
        epsg = c.to_epsg()
        return f"{c.name} (EPSG:{epsg})" if epsg else c.name
    except Exception:  # noqa: BLE001  (say what was given rather than fail the info line)
        return crs if len(crs) < 60 else crs[:57] + "..."


def _corners(geo, rows: int, cols: int) -> str:
    # one corner at a time: a swath reads only the pixels around each (not the box of all four)
    pts = [lonlat(geo, r, c) for r, c in ((0, 0), (0, cols - 1), (rows - 1, cols - 1), (rows - 1, 0))]
    return ", ".join(f"({float(x):.5f}, {float(y):.5f})" for x, y in pts)


def describe(geo: MapGrid | Swath | None, rows: int | None = None, cols: int | None = None) -> str:
    """One line for ``hyperapp info``: the CRS, the pixel size and the corners' (lon, lat).

    ``rows``/``cols`` (the cube's size) are needed for a map grid's corners; a swath knows its own.
    """
    if geo is None:
        return "none (the file places its pixels nowhere)"
    try:
        if isinstance(geo, MapGrid):
            w, h = geo.pixel_size
            units = "deg" if _is_wgs84(geo.crs) else "m"
            s = f"map grid {crs_name(geo.crs)}, {w:g} x {h:g} {units} pixels"
            if rows and cols:
                s += f"; corners lon/lat (UL, UR, LR, LL): {_corners(geo, rows, cols)}"
            return s
        n, m = geo.shape
        s = f"swath, lat/lon per pixel ({n} x {m})"
        if geo.glt is not None and geo.grid is not None:
            w, _ = geo.grid.pixel_size
            s += f", GLT onto {crs_name(geo.grid.crs)} at {w:g} {'deg' if _is_wgs84(geo.grid.crs) else 'm'}"
        return s + f"; corners lon/lat (first row first col, ..., clockwise): {_corners(geo, n, m)}"
    except Exception as exc:  # noqa: BLE001  (info says what it could not work out)
        return f"{type(geo).__name__} (cannot be placed: {exc})"
