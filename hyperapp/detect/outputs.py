"""A detection written to disk: scores, mask, objects (CSV and GeoJSON) and the report, all or nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube
from hyperapp.core.errors import InputError
from hyperapp.detect.finish import DetectionResult
from hyperapp.models.postprocess import objects_csv

#: what :func:`write_detection_item` writes
DETECTION_ITEMS = ("scores", "mask", "objects", "boxes", "report")


def write_detection_item(result: DetectionResult, kind: str, path: str | Path, cube: Cube,
                         threshold: float | None = None, fmt: str = "envi") -> Path:
    """Write one output of a run at ``threshold`` (default: the run's own): ``scores`` or ``mask`` as an
    image in ``fmt`` (:func:`hyperapp.io.writers.write_image`), ``objects`` (CSV), ``boxes`` (CSV and
    GeoJSON beside it) or ``report`` (JSON, with the threshold used). Returns the path written."""
    from hyperapp.io.atomic import atomic_write_text
    from hyperapp.io.writers import MASK_CLASSES, write_envi, write_image

    t = result.threshold if threshold is None else float(threshold)
    p = Path(path)
    if kind == "scores":
        data = result.scores.astype(np.float32, copy=False)
        if fmt == "envi":
            return write_envi(p, data, cube, f"hyperapp {result.method} scores (higher = more target-like)",
                              nan_is_nodata=_has_nan(result))
        return write_image(p, data, fmt, cube)
    if kind == "mask":
        data = result.mask.astype(np.uint8) if t == result.threshold else result.remask(t)
        if fmt == "envi":
            return write_envi(p, data, cube, f"hyperapp {result.method} detection mask, threshold {t:.6g}",
                              classes=MASK_CLASSES)
        return write_image(p, data, fmt, cube)
    if kind == "objects":
        from hyperapp.io.georef import geo_of
        from hyperapp.io.objects import objects_geojson, with_lonlat

        geo = geo_of(cube)
        table = with_lonlat(result.object_columns if t == result.threshold else result.objects_at(t), geo)
        # a .geojson name: the objects' boxes, in longitude/latitude where placed; else CSV
        geojson = p.suffix.lower() in (".geojson", ".json")
        atomic_write_text(p, objects_geojson(table, geo) if geojson else objects_csv(table))
        return p
    if kind == "boxes":
        from hyperapp.io.georef import geo_of
        from hyperapp.io.objects import boxes_csv, boxes_geojson

        if not result.boxes:
            raise InputError("no boxes to export: run the FFBP detector first")
        geo = geo_of(cube)
        atomic_write_text(p.with_suffix(".csv"), boxes_csv(result.boxes, geo))
        atomic_write_text(p.with_suffix(".geojson"), boxes_geojson(result.boxes, geo))
        return p.with_suffix(".csv")
    if kind == "report":
        rep = dict(result.report)
        if t != result.threshold:
            pixels, n = result.count_at(t)
            rep.update({"threshold": t, "far": None, "detections": pixels, "objects": n})
        atomic_write_text(p, json.dumps(rep, indent=2) + "\n")
        return p
    raise InputError(f"unknown detection output {kind!r}; choose one of {', '.join(DETECTION_ITEMS)}")


def _has_nan(result: DetectionResult) -> bool:
    """Whether the run's float outputs hold NaN for "no data": pixels without data, or grid cells no swath
    pixel covers (an orthorectified run's)."""
    return bool(result.report.get("nodata_pixels")) or "orthorectified" in result.report


def write_detection(result: DetectionResult, out_dir: str | Path, cube: Cube, ortho: bool = False) -> dict[str, Path]:
    """The outputs of a finished :func:`run_detection` in ``out_dir``, all or nothing (the batch
    pipeline's write stage); returns the output paths. ``ortho``: on the swath's orthorectified grid
    (:func:`orthorectified`)."""
    from hyperapp.io.atomic import staged_folder

    check_ortho(cube, ortho)
    with staged_folder(out_dir) as stage:
        paths = _write_detection(result, stage, cube, ortho)
    return {k: Path(out_dir) / p.name for k, p in paths.items()}


def check_ortho(cube: Cube, ortho: bool) -> None:
    """Refuse ``--ortho`` for a cube without a geometry lookup table, before any work."""
    from hyperapp.io.georef import geo_of, has_glt

    if ortho and not has_glt(geo_of(cube)):
        raise InputError("--ortho needs a swath with a geometry lookup table (an EMIT product's location/glt_x, "
                         "glt_y): this cube has none", cube.path)


def orthorectified(result: DetectionResult, cube: Cube):
    """``result`` on the orthorectified grid of ``cube``'s swath, and that grid's placement for the writers.

    Scores, mask and further maps go through the swath's GLT (:func:`hyperapp.io.georef.orthorectify`:
    each grid cell takes the swath pixel seen there; NaN scores, an empty mask and -1 in integer maps
    where none is); the
    object table is that of the orthorectified mask (rows and columns on the grid); the report gains
    ``orthorectified`` (the grid, its size, and the pixel and object counts on it). Boxes stay on the
    swath's pixels (their GeoJSON is in longitude/latitude either way). Detected swath pixels that no grid
    cell shows are counted (``swath_detections_off_the_grid``): the ortho outputs cannot hold them."""
    from dataclasses import replace

    from hyperapp.io.georef import Placement, geo_of, glt_cells, ortho_grid, orthorectify

    swath = geo_of(cube)
    grid = swath.grid
    # detected swath pixels no grid cell shows (a GLT leaves out some at a swath's edges and overlaps):
    # counted, as the ortho outputs cannot hold them and the swath's outputs do
    seen = np.zeros(swath.shape, bool)
    _, rows, cols, _ = glt_cells(swath)
    seen[rows, cols] = True
    unseen = np.asarray(result.mask, bool) & ~seen
    scores = orthorectify(np.asarray(result.scores, np.float32), swath)
    mask = orthorectify(np.asarray(result.mask, np.uint8), swath, fill=0)
    maps = {k: orthorectify(np.asarray(v), swath, fill=-1 if np.asarray(v).dtype.kind == "i" else None)
            for k, v in result.maps.items()}
    rep = dict(result.report)
    ortho = replace(result, scores=scores, mask=mask, maps=maps, report=rep, _objects=None, _columns=None,
                    _device=None)
    rep["orthorectified"] = ortho_grid(swath, "scores, mask and objects on the GLT's grid; boxes on the swath's pixels",
                                       detections=int(mask.sum()), objects=int(len(ortho.object_columns["label"])),
                                       swath_detections_off_the_grid=int(unseen.sum()))
    result.report["orthorectified"] = rep["orthorectified"]  # (the run's summary says where its outputs went)
    return ortho, Placement(grid, cube.path)


def _write_detection(result: DetectionResult, out: Path, cube: Cube, ortho: bool = False) -> dict[str, Path]:
    from hyperapp.core.geo import Swath
    from hyperapp.detect.format_process import objects_csv_later
    from hyperapp.io.atomic import atomic_write_bytes
    from hyperapp.io.georef import geo_of
    from hyperapp.io.objects import with_lonlat
    from hyperapp.io.writers import write_envi

    # the object table's CSV is formatted while the images are written (in a batch's formatting helper,
    # where one runs: it is the stage's one long stretch of Python); its longitude/latitude columns are
    # worked out here (pyproj), the helper only formats
    swath_result, swath_cube = result, cube
    if ortho:
        result, cube = orthorectified(result, cube)
    geo = geo_of(cube)
    table = with_lonlat(result.object_columns, geo)
    csv = objects_csv_later(table)
    paths = {k: write_detection_item(result, k, out / k, cube) for k in ("scores", "mask")}
    paths["objects"] = out / "objects.csv"
    atomic_write_bytes(paths["objects"], csv())
    if geo is not None:  # a cube placed on Earth: its objects for a GIS too (RFC 7946, longitude/latitude)
        from hyperapp.io.atomic import atomic_write_text
        from hyperapp.io.objects import objects_geojson

        paths["objects_geojson"] = out / "objects.geojson"
        atomic_write_text(paths["objects_geojson"], objects_geojson(table, geo))
    if isinstance(geo, Swath):  # rasters on a swath's pixels: their places beside them (ENVI's IGM)
        from hyperapp.io.writers import write_igm

        paths["igm"] = write_igm(out / "igm", geo, np.asarray(result.mask).shape[:2])
    for name, arr in result.maps.items():
        what = {"infeasibility": "mixture-tuning infeasibility (noise sigma units; lower = more feasible)",
                "target_index": "which target spectrum gave the highest score (0-based)"}.get(name, name)
        paths[name] = write_envi(out / name, arr, cube, f"hyperapp {result.method} {what}",
                                 nan_is_nodata=_has_nan(result) and arr.dtype.kind == "f")
    if result.boxes:
        paths["boxes"] = write_detection_item(swath_result, "boxes", out / "boxes.csv", swath_cube)
    paths["report"] = write_detection_item(result, "report", out / "report.json", cube)
    return paths
