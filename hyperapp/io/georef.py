"""Where outputs lie on Earth: a cube's location for writers, and a swath orthorectified through its GLT.

The cube model (:mod:`hyperapp.core.geo`) says where a cube's pixels are; this module is what the writers
need of it:

* :func:`geo_of`: a cube's location (its ``geo``, or one made from its ENVI ``map info`` where the reader
  set only that);
* :func:`glt_index` and :func:`orthorectify`: EMIT's geometry lookup table (GLT) applied to any image on
  the swath's pixels (scores, a mask, a class map, the cube's bands): for each cell of the orthorectified
  grid, the swath pixel seen there, ``out[i, j] = image[glt_y[i, j] - 1, glt_x[i, j] - 1]`` where both are
  non-zero (0: no swath pixel there), the fill value elsewhere. EMIT marks grid cells filled from a
  neighbouring pixel with negative indices; their magnitude is the pixel, as for the others. Vectorised
  (one fancy index), as NASA's ``emit_tools.apply_glt`` does;
* :class:`Placement`: what a writer georeferences an image with (a map grid, its ENVI map info), for
  outputs not on the cube's own pixels (a ``--ortho`` run's, on the GLT's grid);
* :func:`geotiff_placement`: one line saying how a GeoTIFF export of a cube is placed.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from hyperapp.core.errors import InputError
from hyperapp.core.geo import MapGrid, Swath, crs_name, geo_from_map_info
from hyperapp.core.progress import NULL_PROGRESS, Progress


def geo_of(cube: Any) -> MapGrid | Swath | None:
    """The location of ``cube`` (a :class:`~hyperapp.core.cube.Cube` or a :class:`Placement`): its ``geo``,
    else the grid of its ENVI ``map info`` and ``coordinate system string`` (a cube built in memory with map
    info only), else None."""
    if cube is None:
        return None
    geo = getattr(cube, "geo", None)
    if geo is not None:
        return geo
    mi = getattr(cube, "map_info", None)
    return geo_from_map_info(mi, getattr(cube, "coordinate_system", None)) if mi else None


def has_glt(geo: Any) -> bool:
    """Whether ``geo`` is a swath with a GLT onto a map grid (it can be orthorectified)."""
    return isinstance(geo, Swath) and geo.glt is not None and geo.grid is not None


def glt_index(swath: Swath) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each cell of ``swath.grid``: (row, col) of the pixel of this swath (0-based, in the swath's own
    window) seen there, and whether there is one.

    Returns ``(rows, cols, valid)``, three arrays of the GLT's shape; ``rows``/``cols`` are 0 where
    ``valid`` is False. Grid cells whose swath pixel lies outside this swath's window (a cube opened on a
    spatial subset) are not valid.
    """
    cells, rows, cols, shape = glt_cells(swath)
    valid = np.zeros(shape, bool)
    r = np.zeros(shape, np.int64)
    c = np.zeros(shape, np.int64)
    valid.reshape(-1)[cells] = True
    r.reshape(-1)[cells] = rows
    c.reshape(-1)[cells] = cols
    return r, c, valid


#: :func:`glt_cells` of each swath alive (a run orthorectifies its scores, mask and maps through one)
_CELLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def glt_cells(swath: Swath) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """The GLT of ``swath`` as the flat indices of the grid cells a pixel of this swath is seen in, that
    pixel's (row, col) in the swath's window, and the grid's shape: what :func:`orthorectify` scatters
    by. Kept while the swath lives."""
    got = _CELLS.get(swath)
    if got is None:
        got = _CELLS[swath] = _glt_cells(swath)
    return got


def _glt_cells(swath: Swath) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    if not has_glt(swath):
        raise InputError("the swath has no geometry lookup table (GLT): it cannot be orthorectified")
    gx = np.asarray(swath.glt[0])
    gy = np.asarray(swath.glt[1])
    if gx.shape != gy.shape or gx.ndim != 2:
        raise InputError(f"the GLT's glt_x {gx.shape} and glt_y {gy.shape} are not two arrays of one 2-D shape")
    cells = np.flatnonzero((gx != 0) & (gy != 0))
    # whole-swath indices (EMIT's negative ones: a cell filled from a neighbour, by their magnitude)
    fr = np.abs(gy.reshape(-1)[cells].astype(np.int64)) - 1
    fc = np.abs(gx.reshape(-1)[cells].astype(np.int64)) - 1
    n, m = swath.full_shape
    r0, r1, rs = swath.rows.indices(n)
    c0, c1, cs = swath.cols.indices(m)
    wr, wc = fr - r0, fc - c0
    inside = (fr < n) & (fc < m)
    inside &= ((fr >= r0) & (fr < r1)) if rs > 0 else ((fr <= r0) & (fr > r1))
    inside &= ((fc >= c0) & (fc < c1)) if cs > 0 else ((fc <= c0) & (fc > c1))
    if rs != 1:
        inside &= wr % rs == 0
    if cs != 1:
        inside &= wc % cs == 0
    if not inside.all():
        cells, wr, wc = cells[inside], wr[inside], wc[inside]
    rows = wr if rs == 1 else wr // rs
    cols = wc if cs == 1 else wc // cs
    return cells, rows, cols, gx.shape


def orthorectify(image: np.ndarray, swath: Swath, fill: float | int | None = None) -> np.ndarray:
    """``image`` (rows, cols[, bands]) on the swath's pixels, placed on the GLT's grid.

    Parameters
    ----------
    image : array (rows, cols) or (rows, cols, bands)
        Values per swath pixel; its first two axes are the swath's (window's) shape.
    swath : Swath
        With a GLT (:func:`has_glt`).
    fill : number, optional
        Value of grid cells no swath pixel covers: NaN for floats, 0 for integers by default.

    Returns
    -------
    array (grid rows, grid cols[, bands]) of ``image``'s dtype.
    """
    a = np.asarray(image)
    if a.shape[:2] != swath.shape:
        raise InputError(f"an image of {a.shape[0]} x {a.shape[1]} pixels is not on this swath "
                         f"({swath.shape[0]} x {swath.shape[1]})")
    cells, rows, cols, shape = glt_cells(swath)
    if fill is None:
        fill = np.nan if a.dtype.kind in "fc" else 0
    out = np.full((shape[0] * shape[1],) + a.shape[2:], fill, dtype=a.dtype)
    out[cells] = a[rows, cols]
    return out.reshape(shape + a.shape[2:])


def ortho_grid(swath: Swath, note: str, **counts) -> dict:
    """A report's ``orthorectified``: the GLT's grid ``detect --ortho`` and ``analyse --ortho`` write on (its
    CRS, GDAL transform and size), what went onto it (``note``) and the run's ``counts`` there."""
    from hyperapp.core.geo import crs_name

    grid = swath.grid
    _, _, _, shape = glt_cells(swath)
    return {"crs": crs_name(grid.crs), "transform_gdal": list(grid.transform), "rows": int(shape[0]),
            "cols": int(shape[1]), **counts, "note": note}


@dataclass(frozen=True)
class Placement:
    """Where an image not on the cube's own pixels lies: what the writers read of a cube (``geo``,
    ``map_info``, ``coordinate_system``, ``path``) for outputs on another grid (a ``--ortho`` run's)."""

    geo: MapGrid
    path: Any = None

    @property
    def map_info(self) -> list[str] | None:
        return envi_map_info(self.geo)[0]

    @property
    def coordinate_system(self) -> str | None:
        return envi_map_info(self.geo)[1]


def envi_map_info(grid: MapGrid) -> tuple[list[str] | None, str | None]:
    """ENVI ``map info`` and ``coordinate system string`` (WKT) of a map grid: UTM/WGS84 or geographic
    grids by name, any other north-up CRS as ``Arbitrary`` with the WKT beside it; (None, None) for a
    rotated grid (ENVI's map info holds no shear)."""
    from pyproj import CRS

    from hyperapp.core.geo import map_info_from_grid

    t = grid.transform
    if t[2] != 0 or t[4] != 0:
        return None, None
    try:
        wkt = CRS(grid.crs).to_wkt("WKT1_ESRI")
    except Exception:  # noqa: BLE001  (an unreadable CRS: no map info rather than a wrong one)
        return None, None
    mi = map_info_from_grid(grid)
    if mi is None:
        mi = ["Arbitrary", "1", "1", repr(t[0]), repr(t[3]), repr(t[1]), repr(-t[5])]
    return mi, wkt


def geotiff_placement(cube: Any) -> str:
    """How a GeoTIFF export of ``cube``'s images is placed, in words (the window's export message, the
    TIFF's description): on its map grid, orthorectified through its GLT, or not georeferenced."""
    geo = geo_of(cube)
    if isinstance(geo, MapGrid):
        return f"georeferenced: {crs_name(geo.crs)}"
    if has_glt(geo):
        return f"orthorectified through the swath's GLT onto {crs_name(geo.grid.crs)}"
    if isinstance(geo, Swath):
        return ("not georeferenced: the swath has a latitude/longitude per pixel but no GLT to place it on a "
                "map grid (objects.csv and the GeoJSON carry longitude/latitude)")
    return "not georeferenced: the cube has no location"


def ortho_cube(cube: Any, block_bytes: int = 256 << 20, progress: Progress = NULL_PROGRESS) -> Any:
    """The whole of ``cube`` (a swath with a GLT) orthorectified onto the GLT's grid, in memory: a new
    :class:`~hyperapp.core.cube.Cube` on that :class:`MapGrid` with the same bands, wavelengths and values
    (float32), the no-data value (NaN where the cube has none) where no swath pixel is.

    The swath is read in blocks of rows (``block_bytes`` of float32 each) and each block's pixels are
    scattered into the grid cells the GLT gives them, so memory holds the grid and one block. The
    window's File > Orthorectify shows, marks and detects on it. ``progress`` hears of each block (and
    stops the work when cancelled).
    """
    from dataclasses import replace

    from hyperapp.core.cube import StoredArray

    swath = geo_of(cube)
    if not has_glt(swath):
        raise InputError("the cube has no geometry lookup table (GLT): it cannot be orthorectified",
                         getattr(cube, "path", None))
    cells, vr, vc, grid_shape = glt_cells(swath)
    nb = cube.bands
    fill = np.float32(np.nan if cube.nodata is None else cube.nodata)
    out = np.full((grid_shape[0] * grid_shape[1], nb), fill, np.float32)
    order = np.argsort(vr, kind="stable")
    cells, vr, vc = cells[order], vr[order], vc[order]
    step = max(1, block_bytes // max(1, cube.cols * nb * 4))
    for a in range(0, cube.rows, step):
        progress(a / cube.rows, "orthorectifying the swath through its GLT")
        b = min(cube.rows, a + step)
        lo, hi = np.searchsorted(vr, [a, b])
        if hi > lo:
            block = cube.read(slice(a, b))
            out[cells[lo:hi]] = block[vr[lo:hi] - a, vc[lo:hi]]
    return replace(cube, store=StoredArray(out.reshape(*grid_shape, nb)), name=f"{cube.name} (orthorectified)",
                   rows_sel=slice(None), cols_sel=slice(None), bands_sel=None, interleave="bip",
                   byte_order="little", geo=swath.grid, map_info=None, coordinate_system=None,
                   notes=(*cube.notes, "orthorectified through the swath's GLT (nearest swath pixel per grid cell)"))
