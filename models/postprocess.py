"""From a score map to targets: thresholding, connected components and the object table.

The thesis post-processes the RBFN's scores "to know the size and shape of the targets"; this module
does that for every pixel detector. Components are 8-connected (a diagonal neighbour belongs to the
same object, as targets are not aligned with the pixel grid).
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.io.objects import table_csv

EIGHT = np.ones((3, 3), dtype=bool)


def label_objects(mask) -> tuple:
    """8-connected component labels (int32, 0 outside objects, numbered by first pixel in raster order)
    and their number, on the device the mask is on: ``scipy.ndimage.label`` on the host,
    ``kernels/label.cu`` on the GPU (:func:`_label_gpu`)."""
    xp = get_namespace(mask)
    if xp is np:
        from scipy import ndimage  # imported when first needed: it costs a fresh process ~0.3-0.5 s

        lab, n = ndimage.label(np.asarray(mask).astype(bool), structure=EIGHT)
        return lab.astype(np.int32, copy=False), int(n)
    return _label_gpu(mask)


def _label_gpu(mask) -> tuple:
    """:func:`label_objects` on CuPy: union-find in ``kernels/label.cu``, then the roots numbered by a
    prefix sum; the same labels as ``scipy.ndimage.label`` with the 8-connected structure.

    ``cupyx.scipy.ndimage.label`` gives them too, but importing ``cupyx.scipy.ndimage`` takes a fresh
    process 0.2-0.4 s (it pulls in SciPy's sparse module and, through it, ``numpy.f2py``), a quarter of
    a whole file-to-result run on a 2 GB cube, and holds the interpreter lock while the cube is read.
    Here: five launches and one copy of the object count to the host.
    """
    import cupy

    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import get_module

    rows, cols = mask.shape
    n = rows * cols
    if n >= 2**31:
        raise ValueError(f"labelling needs fewer than 2^31 pixels, got {rows} x {cols}")
    if n == 0:
        return cupy.zeros((rows, cols), cupy.int32), 0
    mod = get_module("label")
    m = cupy.ascontiguousarray(mask.astype(bool, copy=False)).view(cupy.uint8)
    L = cupy.empty(n, cupy.int32)
    root = cupy.empty(n, cupy.int32)
    threads = 256
    blocks = (int(min((n + threads - 1) // threads, 32 * device_attributes()["MultiProcessorCount"])),)
    mod.get_function("hyperapp_label_init")(blocks, (threads,), (m, L, np.int32(n)))
    mod.get_function("hyperapp_label_merge")(blocks, (threads,), (L, np.int32(rows), np.int32(cols)))
    mod.get_function("hyperapp_label_compress")(blocks, (threads,), (L, root, np.int32(n)))
    rank = cupy.cumsum(root, dtype=cupy.int32)
    out = root  # the flags are spent: their buffer takes the labels
    mod.get_function("hyperapp_label_number")(blocks, (threads,), (L, rank, out, np.int32(n)))
    return out.reshape(rows, cols), int(rank[-1])


def count_objects(mask) -> int:
    """Number of 8-connected objects, on the device the mask is on, so a live count never copies the
    mask to the host."""
    return label_objects(mask)[1]


TABLE_COLUMNS = ("label", "pixels", "centroid_row", "centroid_col", "row0", "col0", "row1", "col1", "peak_score")


def object_table(mask, scores, labels=None, n: int | None = None) -> list[dict]:
    """One row per connected object: label, pixel count, centroid, bounding box and peak score.

    Bounding boxes are ``row0, col0, row1, col1`` with exclusive ends (Python slices); rows are sorted
    by peak score, highest first. ``labels``/``n`` (from :func:`label_objects`) skip the labelling.
    The rows of :func:`object_columns`.
    """
    return table_rows(object_columns(mask, scores, labels, n))


def table_rows(columns: dict) -> list[dict]:
    """The object table's rows (dicts of Python numbers) from its columns (:func:`object_columns`)."""
    return [dict(zip(TABLE_COLUMNS, vals)) for vals in zip(*(columns[k].tolist() for k in TABLE_COLUMNS))]


def object_columns(mask, scores, labels=None, n: int | None = None) -> dict:
    """The object table (:func:`object_table`) as host NumPy arrays, one per column of
    :data:`TABLE_COLUMNS`, in the table's order: a batch builds and writes thousands of objects a cube
    without making a dict for each (a few ms of the interpreter a cube, which the next cube's compute
    stage waits for).

    Every statistic comes from the object pixels alone, on the device the arrays are on, by sorting
    instead of per-label loops: the pixels are ordered by label (a stable sort keeps raster order
    inside each object, so an object's first and last pixels hold its first and last rows), segment
    sums come from cumulative sums, and the column range and peak score from sorting composite keys
    ``label * k + value`` (the first and last key of each label's run hold the minimum and maximum).
    """
    xp = get_namespace(mask, scores, labels)
    if labels is None:
        labels, n = label_objects(xp.asarray(mask))
    if n is None:
        n = int(labels.max()) if labels.size else 0
    if n == 0:
        return {k: np.empty(0, np.float64 if k in ("centroid_row", "centroid_col", "peak_score") else np.int64)
                for k in TABLE_COLUMNS}
    cols = labels.shape[1]
    flat = xp.flatnonzero(labels.reshape(-1))  # raster order
    lab = labels.reshape(-1)[flat].astype(xp.int64)
    order = xp.argsort(lab, kind="stable") if xp is np else xp.argsort(lab)  # CuPy's radix sort is stable
    lab, flat = lab[order], flat[order]
    ids = xp.arange(1, n + 1, dtype=xp.int64)
    start = xp.searchsorted(lab, ids, side="left")
    end = xp.searchsorted(lab, ids, side="right")
    count = end - start
    # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators
    last = xp.subtract(end, 1)
    r, c = xp.divmod(flat, cols)

    def seg_sum(v):
        cs = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(v)])
        return cs[end] - cs[start]

    def seg_range(v, k):  # min and max of integer v (0 <= v < k) per label
        base = xp.multiply(ids, k)
        key = xp.sort(xp.multiply(lab, k) + v)
        return key[start] - base, key[last] - base

    col0, col1 = seg_range(c, cols)
    s = xp.asarray(scores).reshape(-1)[flat].astype(xp.float64)
    rank = xp.empty(s.size, xp.int64)
    by_score = xp.argsort(s)
    rank[by_score] = xp.arange(s.size, dtype=xp.int64)
    _, top = seg_range(rank, s.size)
    table = {
        "label": ids, "pixels": count,
        "centroid_row": seg_sum(r) / count, "centroid_col": seg_sum(c) / count,
        "row0": r[start], "col0": col0, "row1": xp.add(r[last], 1), "col1": xp.add(col1, 1),
        "peak_score": s[by_score[top]],
    }
    host = {k: np.asarray(to_host(v)) for k, v in table.items()}
    order = np.argsort(-host["peak_score"], kind="stable")  # highest peak first, ties in label order
    return {k: host[k][order] for k in TABLE_COLUMNS}


def objects_csv(table: list[dict] | dict) -> str:
    """The object table (its rows, or its columns from :func:`object_columns`) as CSV text: the columns of
    :data:`TABLE_COLUMNS`, then ``lon``/``lat`` where the table holds them
    (:func:`hyperapp.io.objects.with_lonlat`); formatted by :func:`hyperapp.io.objects.table_csv`, the one
    formatter of every object table."""
    return table_csv(table, TABLE_COLUMNS)
