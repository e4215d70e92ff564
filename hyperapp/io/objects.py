"""Detected objects and boxes written out: the one CSV formatter of every object table, their
longitude/latitude, the box mask and the boxes' GeoJSON.

A box (the window detector's, and a cascade's) is a dict with ``row, col, height, width`` (pixels,
top-left origin), ``level`` (its size class: log2 of its larger side in blocks), the two network scores
``ann1`` and ``ann2``, and, in a cascade's result, ``source``: ``"ffbp"`` for a window the networks chose,
``"rbfn"`` for an object of the pixel mask no window covered.

Coordinates: where the cube has a location (:func:`hyperapp.io.georef.geo_of`), each object and box gains
``lon`` and ``lat``, WGS84 degrees of its centre (an object's centroid pixel centre, a box's middle), and
the GeoJSON is in longitude/latitude (RFC 7946: WGS84, no ``crs`` member, exterior rings counter-clockwise).
Without one the GeoJSON stays in pixel coordinates (x = column, y = row, of pixel corners) and says so in
its ``hyperapp_coordinates`` member and each feature's ``coordinates`` property.
"""

from __future__ import annotations

import json
from itertools import repeat

import numpy as np

FIELDS = ("row", "col", "height", "width", "level", "ann1", "ann2", "source")
#: the columns each object or box gains where the cube has a location: WGS84 longitude, latitude (degrees)
GEO_FIELDS = ("lon", "lat")
#: how columns print: floats to six significant digits, longitude/latitude to 7 decimals (about 1 cm)
_FLOAT_FORMAT = {"lon": ".7f", "lat": ".7f"}
PIXEL_WORDS = "pixel (x = column, y = row, of pixel corners; the cube has no location: not longitude/latitude)"


def table_csv(table: list[dict] | dict, fields) -> str:
    """A table (rows as dicts, or columns as a dict of arrays) as CSV text with the columns ``fields``,
    followed by ``lon``/``lat`` where the table holds them: the one formatter of ``objects.csv`` and
    ``boxes.csv``. Floats to six significant digits (longitude/latitude to 7 decimals), missing values
    empty, others as they print.

    Formatted a column at a time with ``map`` (C loops), not a cell at a time in Python: a batch's write
    stage formats thousands of objects a cube while its compute stage needs the interpreter (a quarter
    of the write stage's own time went here)."""
    is_columns = isinstance(table, dict)
    present = table if is_columns else (table[0] if table else {})
    cols = [*fields, *(g for g in GEO_FIELDS if g in present and g not in fields)]
    text = []
    for c in cols:
        if is_columns:
            values = np.asarray(table[c]).tolist() if c in table else []
        else:
            values = [r.get(c) for r in table]
        kinds = set(map(type, values))
        fmt = _FLOAT_FORMAT.get(c, ".6g")
        if kinds <= {float}:
            text.append(list(map(format, values, repeat(fmt))))
        elif kinds <= {int}:
            text.append(list(map(str, values)))
        else:
            text.append([format(v, fmt) if isinstance(v, float) else "" if v is None else str(v) for v in values])
    return "\n".join([",".join(cols), *map(",".join, zip(*text))]) + "\n"


def with_lonlat(table: list[dict] | dict, geo, rows_key: str = "centroid_row",
                cols_key: str = "centroid_col") -> list[dict] | dict:
    """``table`` (rows or columns) with ``lon``/``lat`` of the pixel positions in its columns ``rows_key``,
    ``cols_key`` (0-based, fractions allowed: a centroid) added; the table itself where ``geo`` is None."""
    if geo is None:
        return table
    from hyperapp.core.geo import lonlat

    if isinstance(table, dict):
        lon, lat = lonlat(geo, table[rows_key], table[cols_key]) if len(table[rows_key]) else ((), ())
        return {**table, "lon": np.asarray(lon, np.float64), "lat": np.asarray(lat, np.float64)}
    if not table:
        return table
    lon, lat = lonlat(geo, [r[rows_key] for r in table], [r[cols_key] for r in table])
    return [{**r, "lon": float(x), "lat": float(y)} for r, x, y in zip(table, lon, lat)]


def _box_centres(boxes: list[dict]) -> list[dict]:
    """Each box's middle in pixel-centre coordinates (0.0 is the first pixel's centre)."""
    return [{"r": b["row"] + b["height"] / 2 - 0.5, "c": b["col"] + b["width"] / 2 - 0.5} for b in boxes]


def boxes_with_lonlat(boxes: list[dict], geo) -> list[dict]:
    """``boxes`` with ``lon``/``lat`` of their middles where ``geo`` places them."""
    if geo is None or not boxes:
        return boxes
    centres = with_lonlat(_box_centres(boxes), geo, "r", "c")
    return [{**b, "lon": m["lon"], "lat": m["lat"]} for b, m in zip(boxes, centres)]


def box_mask(boxes: list[dict], shape: tuple[int, int]) -> np.ndarray:
    m = np.zeros(shape, np.uint8)
    for b in boxes:
        m[b["row"]:b["row"] + b["height"], b["col"]:b["col"] + b["width"]] = 1
    return m


def boxes_csv(boxes: list[dict], geo=None) -> str:
    """The boxes as CSV (:data:`FIELDS`, and ``lon``/``lat`` of each box's middle where ``geo`` places it)."""
    return table_csv(boxes_with_lonlat(boxes, geo), FIELDS)


def _plain(v):
    """A table's value as JSON takes it (NumPy scalars to Python numbers)."""
    return v.item() if isinstance(v, np.generic) else v


def objects_geojson(table: list[dict] | dict, geo=None) -> str:
    """The object table (:func:`hyperapp.models.postprocess.object_columns`' columns or its rows, with the
    ``lon``/``lat`` of :func:`with_lonlat` where ``geo`` places the cube) as a FeatureCollection: each
    object's bounding box (``row0``..``row1``, ``col0``..``col1``, ends exclusive) a polygon, its properties
    the table's columns. In longitude and latitude (RFC 7946) where ``geo`` places the cube, else in pixel
    coordinates, as :func:`boxes_geojson`."""
    if isinstance(table, dict):  # columns to rows of Python numbers
        keys = list(table)
        rows = [dict(zip(keys, vals)) for vals in zip(*(np.asarray(table[k]).tolist() for k in keys))]
    else:
        rows = table
    boxes = [{**r, "row": r["row0"], "col": r["col0"], "height": r["row1"] - r["row0"], "width": r["col1"] - r["col0"]}
             for r in rows]
    keys = [k for k in (rows[0] if rows else {}) if k not in GEO_FIELDS]
    return boxes_geojson(boxes, geo, fields=keys)


def _counter_clockwise(ring: list[list[float]]) -> list[list[float]]:
    """A closed ring turned counter-clockwise (RFC 7946's right-hand rule for exterior rings)."""
    x = np.array([p[0] for p in ring])
    y = np.array([p[1] for p in ring])
    area2 = float(np.sum(x[:-1] * y[1:] - x[1:] * y[:-1]))
    return ring[::-1] if area2 < 0 else ring


def corner_lonlat(geo, rows, cols) -> tuple[np.ndarray, np.ndarray]:
    """WGS84 (lon, lat) of pixel-centre positions (rows, cols) that may lie up to half a pixel outside the
    image (pixel corners on its edge): a map grid's transform reaches them as it is; a swath's lat/lon
    (known at pixel centres only) is extended linearly from the two pixels nearest the edge."""
    from hyperapp.core.geo import Swath, lonlat

    r = np.asarray(rows, np.float64)
    c = np.asarray(cols, np.float64)
    if not isinstance(geo, Swath):
        return lonlat(geo, r, c)
    n, m = geo.shape
    pr, pc = np.clip(r, 0, n - 1), np.clip(c, 0, m - 1)
    base = np.array(lonlat(geo, pr, pc))
    out = base.copy()
    for d, p, size, step in ((r - pr, pr, n, (1, 0)), (c - pc, pc, m, (0, 1))):
        if size < 2 or not d.any():
            continue
        s = np.where(p <= size - 2, 1.0, -1.0)  # towards the inside
        nxt = np.array(lonlat(geo, pr + s * step[0], pc + s * step[1]))
        out += d * (nxt - base) / s
    return out[0], out[1]


def boxes_geojson(boxes: list[dict], geo=None, fields=FIELDS) -> str:
    """A FeatureCollection of box polygons (each box's four pixel corners, a closed ring).

    With ``geo`` (a :class:`~hyperapp.core.geo.MapGrid` or :class:`~hyperapp.core.geo.Swath`) the
    coordinates are WGS84 longitude, latitude (RFC 7946), rings counter-clockwise, and each feature's
    properties hold the box's ``lon``/``lat`` (its middle's, unless the box has its own); without it they
    are pixel coordinates (x = column, y = row), said in ``hyperapp_coordinates`` and in each feature's
    ``coordinates`` property. ``fields``: the boxes' keys the properties keep.
    """
    feats = []
    if not boxes or "lon" not in boxes[0]:
        boxes = boxes_with_lonlat(boxes, geo)
    for b in boxes:
        r0, c0, r1, c1 = b["row"], b["col"], b["row"] + b["height"], b["col"] + b["width"]
        corners = ((r0, c0), (r0, c1), (r1, c1), (r1, c0), (r0, c0))
        props = {k: _plain(b[k]) for k in (*fields, *GEO_FIELDS) if k in b}
        if geo is None:
            ring = [[float(c), float(r)] for r, c in corners]
            props["coordinates"] = "pixel"
        else:
            # corner (r, c) of the pixel grid is pixel-centre position (r - 0.5, c - 0.5)
            lon, lat = corner_lonlat(geo, [r - 0.5 for r, _ in corners], [c - 0.5 for _, c in corners])
            ring = _counter_clockwise([[round(float(x), 8), round(float(y), 8)] for x, y in zip(lon, lat)])
            ring[-1] = ring[0]
        feats.append({"type": "Feature", "properties": props,
                      "geometry": {"type": "Polygon", "coordinates": [ring]}})
    words = PIXEL_WORDS if geo is None else "WGS84 longitude, latitude (degrees)"
    return json.dumps({"type": "FeatureCollection", "hyperapp_coordinates": words, "features": feats},
                      indent=1) + "\n"
