"""Truth masks, ROI masks and target/background pixel lists.

A mask may come as an ENVI image (first band), PNG (any non-zero pixel), NumPy ``.npy`` or a ``.mat``
variable; a pixel list as a CSV of ``row,col`` (0-based; a header line that names the columns, such as
``col,row`` or ``x,y``, is read by its names). Every reader checks
the result against the cube's shape and says which file and which line is wrong.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from hyperapp.core.errors import CubeFormatError, CubeNotFoundError, InputError

#: the labels of a class map: none, the targets and the background (ROIs and marks store these)
NONE, TARGET, BACKGROUND = 0, 1, 2
CLASSES = {"target": TARGET, "background": BACKGROUND}


def read_mask(path: str | os.PathLike, shape: tuple[int, int] | None = None, variable: str | None = None) -> np.ndarray:
    """Read a label mask as an integer (rows, cols) array (0 = unlabelled).

    Parameters
    ----------
    shape : (rows, cols), optional
        The cube's spatial shape; a mask of another shape is an :class:`InputError`.
    variable : str, optional
        Variable name for ``.mat`` files.
    """
    p = need_file(path, "mask file")
    _no_variable_outside_mat(p, variable)
    ext = p.suffix.lower()
    try:
        if ext == ".npy":
            m = np.load(p, allow_pickle=False)
        elif ext == ".png":
            from PIL import Image

            with Image.open(p) as im:
                m = np.asarray(im)
            if m.ndim == 3:
                m = m[..., :3].max(axis=2) if m.shape[2] >= 3 else m[..., 0]
        elif ext == ".mat":
            from hyperapp.io.matlab import read_mat_mask

            m = read_mat_mask(p, variable)
        elif ext in (".tif", ".tiff"):
            import tifffile

            m = tifffile.imread(p)
        else:
            from hyperapp.io.envi import open_envi

            img = open_envi(p)
            if img.bands != 1:  # a cube given where a mask goes
                raise InputError(f"a mask has one band; this file has {img.bands} (a cube, not a mask?)", p)
            m = img.band(0)
    except (InputError, CubeFormatError, CubeNotFoundError):
        raise
    except Exception as exc:
        raise CubeFormatError(f"cannot read mask ({exc})", p) from exc
    m = np.asarray(m)
    if m.ndim == 3 and m.shape[2] == 1:
        m = m[:, :, 0]
    if m.ndim != 2:
        raise InputError(f"mask must be 2-D, got shape {m.shape}", p)
    if m.dtype == bool:
        m = m.view(np.uint8)
    if m.dtype.kind not in "iuf":
        raise InputError(f"mask must hold numbers (class ids), got {m.dtype} values", p)
    if shape is not None and tuple(m.shape) != tuple(shape):
        raise InputError(f"mask is {m.shape[0]}x{m.shape[1]} but the cube is {shape[0]}x{shape[1]}", p)
    if m.dtype.kind == "f":
        if not np.all(np.isfinite(m)):
            raise InputError("mask holds NaN or Inf values", p)
        frac = m != np.round(m)
        if frac.any():
            raise InputError(f"mask holds non-integer values (e.g. {m[frac].flat[0]:g}): a mask or class map "
                             "holds whole class ids", p)
    if m.size and (m.min() < -(2**31) or m.max() > 2**31 - 1):
        raise InputError(f"mask holds values beyond 32-bit class ids (e.g. {m.max():g})", p)
    return m.astype(np.int32)


def need_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a Path when it names an existing file; a folder or nothing there is an error naming it."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"is a folder; a {what} is needed here", p)
    if not p.is_file():
        raise CubeNotFoundError(f"{what} not found", p)
    return p


def require_marks(mask: np.ndarray, path: str | os.PathLike) -> None:
    """An :class:`InputError` naming ``path`` when ``mask`` (the pixels it marks) holds no target pixel: a
    model cannot learn a target from it."""
    if not np.any(mask):
        raise InputError("marks no target pixel: mark at least one (a nonzero mask pixel or a row,col line)", path)


def check_background(background: np.ndarray | None, targets: np.ndarray | None, path: str | os.PathLike) -> None:
    """An :class:`InputError` naming ``path`` (the background file) when its mask would be dropped without a
    word: it marks no pixel, or only pixels that are targets too (a target wins where both mark a pixel),
    most often the targets' file given twice."""
    if background is None:
        return
    if not np.any(background):
        raise InputError("the background marks no pixel: mark some, or leave the background out", path)
    if targets is not None and not np.any(np.asarray(background, bool) & ~np.asarray(targets, bool)):
        raise InputError("every pixel the background marks is a target pixel too (the targets' file given twice?): "
                         "the background must mark other pixels", path)


def check_truth_beside_clicks(truth: np.ndarray, targets: np.ndarray, path: str | os.PathLike | None = None, *,
                              truth_pixels: np.ndarray | None = None, clicked: np.ndarray | None = None) -> None:
    """An :class:`InputError` when the truth has no target pixels, or no other pixels, besides the clicked
    targets: AUC and Pd leave the clicked pixels out, so such a truth cannot score the run.
    ``truth_pixels`` and ``clicked``: the flat indices of the truth's and the clicks' pixels where the
    caller has listed them (:func:`hyperapp.core.backend.sparse_flatnonzero`); each is a pass over a
    full-size map otherwise."""
    # counted, not combined: the clicks are few, and a live click on a 2048 x 2048 image paid 2-6 ms on the
    # host for the three full-size boolean maps the combination made
    t = np.asarray(truth, bool).reshape(-1)
    from hyperapp.core.backend import sparse_flatnonzero

    if clicked is None:
        clicked = sparse_flatnonzero(np.asarray(targets, bool))
    in_truth = int(np.count_nonzero(t[clicked]))
    n_t = int(np.count_nonzero(t)) if truth_pixels is None else int(truth_pixels.size)
    no_targets = n_t == in_truth  # every truth pixel is clicked
    no_others = n_t + (clicked.size - in_truth) == t.size  # every pixel is a truth pixel or clicked
    if no_targets or no_others:
        raise InputError("the truth mask has no " + ("target pixels" if no_targets else "non-target pixels")
                         + " besides the clicked targets, which AUC and Pd leave out", path)


#: the rows and columns of "no image yet": a pixel list read to check its syntax before any cube is opened
NO_SHAPE = 2**62


def check_labels_file(path: str | os.PathLike, targets: bool = False, classes: bool = False) -> None:
    """Read a pixel list or mask once, without a cube to check its shape against: what makes it unreadable
    (text in a CSV, letters or fractions in a mask) is an error now, before any work (a job's check);
    with ``targets``, so is a mask that marks no pixel (a pixel list with no row always is); without
    ``classes`` (ROI classes), so is a pixel list of several classes (:func:`one_class`)."""
    if Path(path).suffix.lower() in (".csv", ".txt"):
        _, names = read_pixel_classes(path, (NO_SHAPE, NO_SHAPE))
        if not classes:
            one_class(path, names)
    else:
        mask = read_mask(path, None)
        if targets:
            require_marks(mask > 0, path)


def read_class_map(path: str | os.PathLike, shape: tuple[int, int]) -> np.ndarray:
    """ROI classes (``analyse --roi``, a job's ``roi``): an integer class map as it is (values below 0
    count as no class, 0); a CSV pixel list with a class column (the window's ROI export) by its classes
    (:func:`class_numbers`), one without as class 1. A map that marks no pixel is refused, naming the file:
    every use (pixels to analyse, objects, classes to train on, undesired signatures) needs one."""
    if Path(path).suffix.lower() in (".csv", ".txt"):
        pts, names = read_pixel_classes(path, shape)
        m = np.zeros(shape, np.int32)
        m[pts[:, 0], pts[:, 1]] = 1 if names is None else class_numbers(names)
    else:
        m = read_mask(path, shape)
        if (m < 0).any():
            m = m.copy()
            m[m < 0] = 0
    if not (m > 0).any():
        raise InputError("marks no pixel: every value is 0 (no class); mark some pixels", path)
    return m


def class_names_of(path: str | os.PathLike) -> dict[int, str] | None:
    """Class names of an ENVI classification file (value -> name, Unclassified left out), or of a pixel
    list's class column where it names its classes (:func:`class_numbers`), else None."""
    p = Path(path)
    if p.suffix.lower() in (".csv", ".txt"):
        _, names = read_pixel_classes(p, (NO_SHAPE, NO_SHAPE))
        if names is None or _numbered(names):
            return None
        return dict(sorted(zip(class_numbers(names).tolist(), names)))
    hdr = p if p.suffix.lower() == ".hdr" else p.with_suffix(".hdr")
    if not hdr.is_file():
        return None
    from hyperapp.io.envi import read_header

    names = read_header(hdr).get("class names")
    if not names:
        return None
    return {k: str(n) for k, n in enumerate(names) if k > 0}


#: header names of a pixel list's row and column (ENVI's ROI exports and spreadsheets use these)
ROW_NAMES = ("row", "rows", "line", "lines", "r", "y")
COL_NAMES = ("col", "cols", "column", "columns", "sample", "samples", "c", "x")


#: header names of a pixel list's class column (the window's ROI export writes ``row,col,class``)
CLASS_NAMES = ("class", "classes", "label", "roi")


def read_pixels(path: str | os.PathLike, shape: tuple[int, int]) -> np.ndarray:
    """Read a CSV of ``row,col`` pixels (0-based) as an (n, 2) int array, checked against ``shape``."""
    return read_pixel_classes(path, shape)[0]


def one_class(path, names: list[str] | None) -> None:
    """Refuse a pixel list of several classes where one set of pixels is read (targets, background,
    truth): every listed pixel would count, whatever its class (the window's ROI export lists targets
    and background in one file)."""
    kinds = sorted(set(names or ()))
    if len(kinds) > 1:
        shown = ", ".join(kinds[:4]) + (", ..." if len(kinds) > 4 else "")
        raise InputError(f"lists pixels of {len(kinds)} classes in its class column ({shown}): it is an ROI file, "
                         "read here as one set of pixels; give it where classes are read (analyse --roi, a job's "
                         "roi), or keep one class's rows", path)


def class_numbers(names: list[str]) -> np.ndarray:
    """Class numbers of a pixel list's class column: the numbers themselves where every value is a whole
    number (below 1: no class, 0), else the window's classes by name (target 1, background 2, as its ROI
    import reads them) and other names from 3 in the order they first appear."""
    if _numbered(names):
        return np.maximum(np.asarray([int(n) for n in names], np.int64), 0)
    numbers = dict(CLASSES)
    for n in names:
        numbers.setdefault(n, max(numbers.values()) + 1)
    return np.asarray([numbers[n] for n in names], np.int64)


def _numbered(names: list[str]) -> bool:
    """Whether a class column holds whole numbers (the classes' own numbers) rather than names."""
    return all(n.lstrip("-").isdigit() for n in names)


def read_pixel_classes(path: str | os.PathLike, shape: tuple[int, int]) -> tuple[np.ndarray, list[str] | None]:
    """A CSV pixel list: ``(n, 2)`` int pixels (0-based, checked against ``shape``) and each one's class as
    written where a header names a class column (:data:`CLASS_NAMES`), else None."""
    p = need_file(path, "pixel list")
    pts: list[tuple[int, int]] = []
    classes: list[str] = []
    ri, ci, ki = 0, 1, None  # the columns holding row, col and class: row,col first, unless a header names them
    try:
        # utf-8-sig: a spreadsheet's CSV often starts with a byte-order mark, which would hide its header
        # ("\ufeffcol" is not a column name) and swap every pixel of a col,row file
        with open(p, newline="", encoding="utf-8-sig") as fh:
            for lineno, row in enumerate(csv.reader(fh), start=1):
                cells = [c.strip() for c in row if c.strip()]
                if not cells or cells[0].startswith("#"):
                    continue
                if lineno == 1 and not cells[0].lstrip("-").isdigit():
                    # a header line: "col,row" is read by its names (it was read as row,col, swapping every
                    # pixel); names it does not know leave the first two columns as row and col
                    names = [c.lower() for c in cells]
                    r_at = [i for i, n in enumerate(names) if n in ROW_NAMES]
                    c_at = [i for i, n in enumerate(names) if n in COL_NAMES]
                    k_at = [i for i, n in enumerate(names) if n in CLASS_NAMES]
                    if r_at and c_at:
                        ri, ci = r_at[0], c_at[0]
                        ki = k_at[0] if k_at else None
                    elif r_at or c_at or len(names) >= 2:  # a header, but not one whose columns are known
                        raise InputError(f"line 1: the header {','.join(cells)!r} names no row and column "
                                         f"columns: name them {ROW_NAMES[0]},{COL_NAMES[0]} (or y,x; line,sample)", p)
                    continue
                if len(cells) <= max(ri, ci):
                    raise InputError(f"line {lineno}: expected 'row,col', got {','.join(row)!r}", p)
                try:
                    r, c = int(cells[ri]), int(cells[ci])
                except ValueError as exc:
                    raise InputError(f"line {lineno}: row and col must be integers, got {','.join(row)!r}", p) from exc
                if r < 0 or c < 0:  # wrong whatever the image (a job's check knows no image yet)
                    raise InputError(f"line {lineno}: pixel ({r}, {c}) has a negative row or column: they "
                                     "count from 0", p)
                if not (r < shape[0] and c < shape[1]):
                    where = (f"the {shape[0]}x{shape[1]} image" if shape[0] < NO_SHAPE else
                             "any image (a row or column too large to be a pixel)")  # (a job's check: no image yet)
                    raise InputError(f"line {lineno}: pixel ({r}, {c}) is outside {where}", p)
                if ki is not None:
                    if len(cells) <= ki:
                        raise InputError(f"line {lineno}: no class in the class column, got {','.join(row)!r}", p)
                    classes.append(cells[ki])
                pts.append((r, c))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"not a text CSV of row,col pixels ({exc.__class__.__name__}: {exc})", p) from exc
    if not pts:
        raise InputError("no pixels listed", p)
    return np.asarray(pts, dtype=np.int64), (classes if ki is not None else None)


def _no_variable_outside_mat(p: Path, variable: str | None) -> None:
    """A variable name picks one array out of a MATLAB ``.mat`` file; given with any other mask it would be
    ignored without a word, so it is refused (the user may have meant another file)."""
    if variable is not None and p.suffix.lower() != ".mat":
        raise InputError(f"a variable name ({variable!r}) picks an array out of a MATLAB .mat file; this "
                         f"{p.suffix or 'extension-less'} file holds one mask: leave the variable out", p)


def read_labels(path: str | os.PathLike, shape: tuple[int, int], variable: str | None = None) -> np.ndarray:
    """Pixels marked by a CSV pixel list or a mask image, as a boolean (rows, cols) mask."""
    p = Path(path)
    _no_variable_outside_mat(p, variable)
    if p.suffix.lower() in (".csv", ".txt"):
        pts, names = read_pixel_classes(p, shape)
        one_class(p, names)
        m = np.zeros(shape, dtype=bool)
        m[pts[:, 0], pts[:, 1]] = True
        return m
    return read_mask(p, shape, variable) > 0


def read_truth(path: str | os.PathLike, shape: tuple[int, int], variable: str | None = None) -> np.ndarray:
    """A truth mask (:func:`read_labels`) that can score a detection: it marks some pixels and leaves
    some unmarked (AUC and Pd need both), else an :class:`InputError` naming the file, before any work."""
    m = read_labels(path, shape, variable)
    if not m.any():
        raise InputError("the truth mask marks no pixel: AUC and Pd need target pixels", path)
    if m.all():
        raise InputError("the truth mask marks every pixel: AUC and Pd need pixels that are not targets", path)
    return m


def write_pixels(path: str | os.PathLike, mask: np.ndarray) -> None:
    """Write the pixels of a boolean mask as a ``row,col`` CSV (atomically)."""
    from hyperapp.io.atomic import atomic_write_text

    rr, cc = np.nonzero(mask)
    atomic_write_text(path, "row,col\n" + "".join(f"{r},{c}\n" for r, c in zip(rr, cc)))
