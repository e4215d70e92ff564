"""Export formatting of detected boxes (the window detector's, and a cascade's): the box mask, CSV and GeoJSON.

A box is a dict with ``row, col, height, width`` (pixels, top-left origin), ``level`` (its size
class: log2 of its larger side in blocks), the two network scores ``ann1`` and ``ann2``, and, in a cascade's
result, ``source``: ``"ffbp"`` for a window the networks chose, ``"rbfn"`` for an object of the pixel mask
no window covered.
"""

from __future__ import annotations

import json

import numpy as np

FIELDS = ("row", "col", "height", "width", "level", "ann1", "ann2", "source")


def box_mask(boxes: list[dict], shape: tuple[int, int]) -> np.ndarray:
    m = np.zeros(shape, np.uint8)
    for b in boxes:
        m[b["row"]:b["row"] + b["height"], b["col"]:b["col"] + b["width"]] = 1
    return m


def boxes_csv(boxes: list[dict]) -> str:
    lines = [",".join(FIELDS)]
    for b in boxes:
        lines.append(",".join(f"{b.get(f, '')!s}" if not isinstance(b.get(f), float) else f"{b[f]:.6g}"
                              for f in FIELDS))
    return "\n".join(lines) + "\n"


def _pixel_to_map(map_info, row, col):
    """ENVI map info: (x, y) of a pixel corner; pixel coordinates when there is none."""
    if not map_info:
        return float(col), float(row)
    ref_x, ref_y = float(map_info[1]) - 1, float(map_info[2]) - 1
    e, n = float(map_info[3]), float(map_info[4])
    dx, dy = float(map_info[5]), float(map_info[6])
    return e + (col - ref_x) * dx, n - (row - ref_y) * dy


def boxes_geojson(boxes: list[dict], map_info=None) -> str:
    """A FeatureCollection of box polygons, in map coordinates when the cube has map info
    (else in pixel coordinates, x = column, y = row)."""
    feats = []
    for b in boxes:
        r0, c0, r1, c1 = b["row"], b["col"], b["row"] + b["height"], b["col"] + b["width"]
        ring = [_pixel_to_map(map_info, r, c) for r, c in ((r0, c0), (r0, c1), (r1, c1), (r1, c0), (r0, c0))]
        feats.append({"type": "Feature", "properties": {k: b[k] for k in FIELDS if k in b},
                      "geometry": {"type": "Polygon", "coordinates": [[list(p) for p in ring]]}})
    crs = "map" if map_info else "pixel"
    return json.dumps({"type": "FeatureCollection", "hyperapp_coordinates": crs, "features": feats}, indent=1) + "\n"
