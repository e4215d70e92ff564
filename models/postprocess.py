"""From a score map to targets: thresholding, connected components and the object table.

The thesis post-processes the RBFN's scores "to know the size and shape of the targets"; this module
does that for every pixel detector. Components are 8-connected by default (a diagonal neighbour belongs
to the same object, as targets are not aligned with the pixel grid); 4-connected on request.

Before the objects are counted, the mask can be cleaned as ENVI's post-classification tools do
(:func:`filter_mask`): clumping (a morphological closing with a square kernel, ENVI's "Clump Classes")
joins nearby detections and fills small gaps, then sieving (ENVI's "Sieve Classes") drops objects
smaller, or larger, than given pixel counts.
"""

from __future__ import annotations

import re

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.io.objects import table_csv

EIGHT = np.ones((3, 3), dtype=bool)
FOUR = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=bool)
#: the pixel connectivities objects are labelled with: 4 (edge neighbours) or 8 (and diagonal ones)
CONNECTIVITIES = (4, 8)


def _check_connectivity(connectivity, name: str = "connectivity") -> int:
    from hyperapp.core.errors import InputError

    if isinstance(connectivity, bool) or connectivity not in CONNECTIVITIES:
        raise InputError(f"{name} must be 4 or 8 (the neighbours that join a pixel to an object), "
                         f"got {connectivity!r}")
    return int(connectivity)


def label_objects(mask, connectivity: int = 8, count_on_device: bool = False) -> tuple:
    """Connected component labels (int32, 0 outside objects, numbered by first pixel in raster order)
    and their number, on the device the mask is on: ``scipy.ndimage.label`` on the host,
    ``kernels/label.cu`` on the GPU (:func:`_label_gpu`).

    ``connectivity`` 8 joins a pixel to its eight neighbours (the default), 4 to the four that share an
    edge with it. ``count_on_device``: on the GPU the number stays there, a 0-d array (for the caller's
    one copy of several numbers, :func:`hyperapp.kernels.pack.to_host_numbers`), where fetching it alone
    is a round trip; on the host it is an int either way."""
    connectivity = _check_connectivity(connectivity)
    xp = get_namespace(mask)
    if xp is np:
        from scipy import ndimage  # imported when first needed: it costs a fresh process ~0.3-0.5 s

        lab, n = ndimage.label(np.asarray(mask).astype(bool), structure=EIGHT if connectivity == 8 else FOUR)
        return lab.astype(np.int32, copy=False), int(n)
    return _label_gpu(mask, connectivity, count_on_device)


def _label_gpu(mask, connectivity: int = 8, count_on_device: bool = False) -> tuple:
    """:func:`label_objects` on CuPy: union-find in ``kernels/label.cu``, then the roots numbered by a
    prefix sum; the same labels as ``scipy.ndimage.label`` with the 8-connected (or 4-connected)
    structure.

    ``cupyx.scipy.ndimage.label`` gives them too, but importing ``cupyx.scipy.ndimage`` takes a fresh
    process 0.2-0.4 s (it pulls in SciPy's sparse module and, through it, ``numpy.f2py``), a quarter of
    a whole file-to-result run on a 2 GB cube, and holds the interpreter lock while the cube is read.
    Here: five launches and one copy of the object count to the host (none with ``count_on_device``).
    """
    import cupy

    from hyperapp.core.backend import device_attributes
    from hyperapp.kernels import get_module

    rows, cols = mask.shape
    n = rows * cols
    if n >= 2**31:
        raise ValueError(f"labelling needs fewer than 2^31 pixels, got {rows} x {cols}")
    if n == 0:
        return cupy.zeros((rows, cols), cupy.int32), cupy.zeros((), cupy.int32) if count_on_device else 0
    mod = get_module("label")
    m = cupy.ascontiguousarray(mask.astype(bool, copy=False)).view(cupy.uint8)
    L = cupy.empty(n, cupy.int32)
    root = cupy.empty(n, cupy.int32)
    threads = 256
    blocks = (int(min((n + threads - 1) // threads, 32 * device_attributes()["MultiProcessorCount"])),)
    mod.get_function("hyperapp_label_init")(blocks, (threads,), (m, L, np.int32(n)))
    merge = "hyperapp_label_merge" if connectivity == 8 else "hyperapp_label_merge4"
    mod.get_function(merge)(blocks, (threads,), (L, np.int32(rows), np.int32(cols)))
    mod.get_function("hyperapp_label_compress")(blocks, (threads,), (L, root, np.int32(n)))
    rank = cupy.cumsum(root, dtype=cupy.int32)
    out = root  # the flags are spent: their buffer takes the labels
    mod.get_function("hyperapp_label_number")(blocks, (threads,), (L, rank, out, np.int32(n)))
    return out.reshape(rows, cols), rank[-1] if count_on_device else int(rank[-1])


def count_objects(mask, connectivity: int = 8) -> int:
    """Number of objects (8-connected unless told), on the device the mask is on, so a live count never
    copies the mask to the host."""
    return label_objects(mask, connectivity)[1]


# ------------------------------------------------------------------ clumping and sieving (ENVI's post-classification)
def parse_clump(value, name: str = "clump") -> int:
    """The clump kernel's side in pixels (the CLI's ``--clump N``, a job's ``clump``): 0 (or None, or
    empty text) for no clumping, else an odd whole number (the square kernel is centred on each pixel;
    1 leaves the mask as it is). Raises :class:`~hyperapp.core.errors.InputError` in one line."""
    from hyperapp.core import values as options
    from hyperapp.core.errors import InputError

    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    n = options.whole(value, name, what="0 (no clumping) or an odd whole number of pixels")
    if n < 0 or (n and n % 2 == 0):
        raise InputError(f"{name} must be 0 (no clumping) or an odd whole number of pixels (the square kernel is "
                         f"centred on each pixel), got {value!r}")
    return n


def parse_sieve(value, name: str = "sieve") -> tuple[int, int | None] | None:
    """The sieve's pixel counts (the CLI's ``--sieve MIN[..MAX]``, a job's ``sieve``): ``"5"`` or ``5`` ->
    (5, None), ``"5..500"`` or ``[5, 500]`` -> (5, 500); None or empty text -> None (no sieving).

    Objects with fewer than MIN or more than MAX pixels are removed: MIN is 1 or more (1 keeps every
    small object), MAX at least MIN. Raises :class:`~hyperapp.core.errors.InputError` in one line."""
    from hyperapp.core import values as options
    from hyperapp.core.errors import InputError

    shape = f"{name} must be MIN or MIN..MAX, whole numbers of pixels (objects with fewer than MIN or more than " \
            f"MAX pixels are removed), got {value!r}"
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (list, tuple)):
        if len(value) not in (1, 2):
            raise InputError(shape)
        lo, hi = value[0], (value[1] if len(value) == 2 else None)
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            lo, hi = text, None
        else:
            m = re.fullmatch(r"([+-]?\d+)\s*\.\.\s*([+-]?\d+)", text)
            if m is None:
                raise InputError(shape)
            lo, hi = m.groups()
    else:
        lo, hi = value, None
    lo = options.whole(lo, f"{name}'s MIN", 1, None, "a whole number of pixels")
    if hi is None:
        return lo, None
    hi = options.whole(hi, f"{name}'s MAX", 1, None, "a whole number of pixels")
    if hi < lo:
        raise InputError(f"{name}'s MAX ({hi}) is below its MIN ({lo}): it would remove every object, got {value!r}")
    return lo, hi


def parse_connectivity(value, name: str = "connectivity") -> int:
    """4 or 8 (the CLI's ``--connectivity``, a job's ``connectivity``): which neighbours join a pixel to an
    object when the sieve counts objects (and when objects are labelled). Raises
    :class:`~hyperapp.core.errors.InputError` in one line."""
    from hyperapp.core import values as options

    if isinstance(value, bool):
        return _check_connectivity(value, name)
    return _check_connectivity(options.whole(value, name, what="4 or 8"), name)


def _window_counts(a, size: int):
    """Set entries of every run of ``size`` consecutive entries along the last axis (valid mode: the axis
    shrinks by size - 1), as int32 from one cumulative sum."""
    xp = get_namespace(a)
    c = xp.cumsum(a, axis=-1, dtype=xp.int32)
    out = c[..., size - 1:].copy()
    out[..., 1:] -= c[..., :-size]
    return out


def clump_mask(mask, size: int):
    """The morphological closing of a boolean ``mask`` (rows, cols) with a ``size`` x ``size`` square:
    ENVI's clumping (a dilation, then an erosion), on the mask's device.

    The closing is that of the mask in the plane with every pixel outside the image unmarked, so it
    keeps every marked pixel (``scipy.ndimage.binary_closing``'s default border erodes marked pixels
    within ``size // 2`` of the edge; padding the mask by ``size // 2`` unmarked pixels first gives
    this). Dilation and erosion are separable for a square: each is a sliding count along the rows,
    then along the columns, from cumulative sums, whatever the size (one code for NumPy and CuPy, and
    no ``cupyx.scipy.ndimage`` import on the GPU).

    Parameters
    ----------
    mask : array of bool, (rows, cols)
    size : int
        Odd, 1 or more; 1 returns the mask unchanged.
    """
    xp = get_namespace(mask)
    m = xp.asarray(mask).astype(bool)
    size = int(size)
    if size <= 1:
        return m.copy()
    r = size // 2
    rows, cols = m.shape
    p = xp.zeros((rows + 4 * r, cols + 4 * r), dtype=xp.uint8)
    p[2 * r:2 * r + rows, 2 * r:2 * r + cols] = m
    # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators
    dil = xp.greater(_window_counts(xp.greater(_window_counts(p, size), 0).T, size), 0)  # (cols+2r, rows+2r)
    ero = xp.equal(_window_counts(xp.equal(_window_counts(dil, size), size).T, size), size)  # (rows, cols)
    return ero


def _check_mask(mask):
    from hyperapp.core.errors import InputError

    if getattr(mask, "ndim", None) != 2:
        raise InputError(f"the mask to filter must be an image (rows, cols), got shape {getattr(mask, 'shape', None)}")


def filter_objects(mask, clump: int = 0, sieve: tuple[int, int | None] | None = None,
                   connectivity: int = 8) -> tuple:
    """:func:`filter_mask`, with the filtered mask's object labels and their number: ``(mask, labels,
    n)``, the labels being those :func:`label_objects` gives the filtered mask with ``connectivity``
    (so the object table need not label it again)."""
    mask, labels, n = _filter(mask, clump, sieve, connectivity, True)
    return mask, labels, n


def filter_mask(mask, clump: int = 0, sieve: tuple[int, int | None] | None = None, connectivity: int = 8):
    """A detection mask cleaned as ENVI's post-classification tools do: clumping first, then sieving.

    Parameters
    ----------
    mask : array of bool, (rows, cols)
        NumPy or CuPy; the result is on the same device.
    clump : int
        0 for none, else the odd side of the square kernel of a morphological closing
        (:func:`clump_mask`): gaps narrower than the kernel inside and between detections are filled.
    sieve : (int, int or None) or None
        ``(MIN, MAX)``: connected objects with fewer than MIN or more than MAX pixels are removed (MAX
        None: no upper bound). None for no sieving. Text ("5..500") goes through :func:`parse_sieve`.
    connectivity : {8, 4}
        Neighbours that join pixels into one object, for the sieve's counts.

    Returns
    -------
    array of bool, (rows, cols)

    Raises
    ------
    InputError
        (a ValueError) a clump size that is even or negative, a sieve whose MIN is below 1 or MAX below
        MIN, a connectivity other than 4 or 8, or a mask that is not 2-D.
    """
    return _filter(mask, clump, sieve, connectivity, False)[0]


def _filter(mask, clump, sieve, connectivity, want_labels: bool) -> tuple:
    clump = parse_clump(clump)
    sieve = parse_sieve(sieve)
    connectivity = parse_connectivity(connectivity)
    _check_mask(mask)
    xp = get_namespace(mask)
    m = clump_mask(mask, clump) if clump > 1 else xp.asarray(mask).astype(bool)
    if sieve is None or (sieve == (1, None) and not want_labels):
        if not want_labels:
            return m, None, None
        labels, n = label_objects(m, connectivity)
        return m, labels, n
    lo, hi = sieve
    labels, n = label_objects(m, connectivity)
    sizes = xp.bincount(labels.reshape(-1), minlength=n + 1)
    keep = xp.greater_equal(sizes, lo)
    if hi is not None:
        keep &= xp.less_equal(sizes, hi)
    keep[0] = False  # the background
    if not want_labels:
        return keep[labels], None, None
    new = xp.cumsum(keep, dtype=xp.int32) * keep  # kept objects renumbered in order, removed ones 0
    return keep[labels], new[labels], int(new.max()) if new.size else 0


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
