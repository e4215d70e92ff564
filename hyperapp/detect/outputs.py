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
                              nan_is_nodata=bool(result.report.get("nodata_pixels")))
        return write_image(p, data, fmt, cube)
    if kind == "mask":
        data = result.mask.astype(np.uint8) if t == result.threshold else result.remask(t)
        if fmt == "envi":
            return write_envi(p, data, cube, f"hyperapp {result.method} detection mask, threshold {t:.6g}",
                              classes=MASK_CLASSES)
        return write_image(p, data, fmt, cube)
    if kind == "objects":
        table = result.object_columns if t == result.threshold else result.objects_at(t)
        atomic_write_text(p, objects_csv(table))
        return p
    if kind == "boxes":
        from hyperapp.io.objects import boxes_csv, boxes_geojson

        if not result.boxes:
            raise InputError("no boxes to export: run the FFBP detector first")
        atomic_write_text(p.with_suffix(".csv"), boxes_csv(result.boxes))
        atomic_write_text(p.with_suffix(".geojson"), boxes_geojson(result.boxes, cube.map_info))
        return p.with_suffix(".csv")
    if kind == "report":
        rep = dict(result.report)
        if t != result.threshold:
            pixels, n = result.count_at(t)
            rep.update({"threshold": t, "far": None, "detections": pixels, "objects": n})
        atomic_write_text(p, json.dumps(rep, indent=2) + "\n")
        return p
    raise InputError(f"unknown detection output {kind!r}; choose one of {', '.join(DETECTION_ITEMS)}")


def write_detection(result: DetectionResult, out_dir: str | Path, cube: Cube) -> dict[str, Path]:
    """The outputs of a finished :func:`run_detection` in ``out_dir``, all or nothing (the batch
    pipeline's write stage); returns the output paths."""
    from hyperapp.io.atomic import staged_folder

    with staged_folder(out_dir) as stage:
        paths = _write_detection(result, stage, cube)
    return {k: Path(out_dir) / p.name for k, p in paths.items()}


def _write_detection(result: DetectionResult, out: Path, cube: Cube) -> dict[str, Path]:
    from hyperapp.detect.format_process import objects_csv_later
    from hyperapp.io.atomic import atomic_write_bytes
    from hyperapp.io.writers import write_envi

    # the object table's CSV is formatted while the images are written (in a batch's formatting helper,
    # where one runs: it is the stage's one long stretch of Python)
    csv = objects_csv_later(result.object_columns)
    paths = {k: write_detection_item(result, k, out / k, cube) for k in ("scores", "mask")}
    paths["objects"] = out / "objects.csv"
    atomic_write_bytes(paths["objects"], csv())
    for name, arr in result.maps.items():
        what = {"infeasibility": "mixture-tuning infeasibility (noise sigma units; lower = more feasible)",
                "target_index": "which target spectrum gave the highest score (0-based)"}.get(name, name)
        paths[name] = write_envi(out / name, arr, cube, f"hyperapp {result.method} {what}",
                                 nan_is_nodata=bool(result.report.get("nodata_pixels")) and arr.dtype.kind == "f")
    if result.boxes:
        paths["boxes"] = write_detection_item(result, "boxes", out / "boxes.csv", cube)
    paths["report"] = write_detection_item(result, "report", out / "report.json", cube)
    return paths
