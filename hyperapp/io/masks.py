"""Truth masks, ROI masks and target/background pixel lists.

A mask may come as an ENVI image (first band), PNG (any non-zero pixel), NumPy ``.npy`` or a ``.mat``
variable; a pixel list as a CSV of ``row,col`` (0-based, an optional header line). Every reader checks
the result against the cube's shape and says which file and which line is wrong.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from hyperapp.errors import CubeFormatError, CubeNotFoundError, InputError


def read_mask(path: str | os.PathLike, shape: tuple[int, int] | None = None, variable: str | None = None) -> np.ndarray:
    """Read a label mask as an integer (rows, cols) array (0 = unlabelled).

    Parameters
    ----------
    shape : (rows, cols), optional
        The cube's spatial shape; a mask of another shape is an :class:`InputError`.
    variable : str, optional
        Variable name for ``.mat`` files.
    """
    p = Path(path)
    if not p.exists():
        raise CubeNotFoundError("mask file not found", p)
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

            m = open_envi(p).band(0)
    except (InputError, CubeFormatError, CubeNotFoundError):
        raise
    except Exception as exc:
        raise CubeFormatError(f"cannot read mask ({exc})", p) from exc
    m = np.asarray(m)
    if m.ndim == 3 and m.shape[2] == 1:
        m = m[:, :, 0]
    if m.ndim != 2:
        raise InputError(f"mask must be 2-D, got shape {m.shape}", p)
    if not np.all(np.isfinite(m)):
        raise InputError("mask holds NaN or Inf values", p)
    if shape is not None and tuple(m.shape) != tuple(shape):
        raise InputError(f"mask is {m.shape[0]}x{m.shape[1]} but the cube is {shape[0]}x{shape[1]}", p)
    return m.astype(np.int32)


def read_pixels(path: str | os.PathLike, shape: tuple[int, int]) -> np.ndarray:
    """Read a CSV of ``row,col`` pixels (0-based) as an (n, 2) int array, checked against ``shape``."""
    p = Path(path)
    if not p.exists():
        raise CubeNotFoundError("pixel list not found", p)
    pts: list[tuple[int, int]] = []
    with open(p, newline="", encoding="utf-8") as fh:
        for lineno, row in enumerate(csv.reader(fh), start=1):
            cells = [c.strip() for c in row if c.strip()]
            if not cells or cells[0].startswith("#"):
                continue
            if lineno == 1 and not cells[0].lstrip("-").isdigit():
                continue  # header line ("row,col")
            if len(cells) < 2:
                raise InputError(f"line {lineno}: expected 'row,col', got {','.join(row)!r}", p)
            try:
                r, c = int(cells[0]), int(cells[1])
            except ValueError as exc:
                raise InputError(f"line {lineno}: row and col must be integers, got {','.join(row)!r}", p) from exc
            if not (0 <= r < shape[0] and 0 <= c < shape[1]):
                raise InputError(
                    f"line {lineno}: pixel ({r}, {c}) is outside the {shape[0]}x{shape[1]} image", p
                )
            pts.append((r, c))
    if not pts:
        raise InputError("no pixels listed", p)
    return np.asarray(pts, dtype=np.int64)


def read_labels(path: str | os.PathLike, shape: tuple[int, int], variable: str | None = None) -> np.ndarray:
    """Pixels marked by a CSV pixel list or a mask image, as a boolean (rows, cols) mask."""
    p = Path(path)
    if p.suffix.lower() in (".csv", ".txt"):
        pts = read_pixels(p, shape)
        m = np.zeros(shape, dtype=bool)
        m[pts[:, 0], pts[:, 1]] = True
        return m
    return read_mask(p, shape, variable) > 0


def write_pixels(path: str | os.PathLike, mask: np.ndarray) -> None:
    """Write the pixels of a boolean mask as a ``row,col`` CSV (atomically)."""
    from hyperapp.io.atomic import atomic_write_text

    rr, cc = np.nonzero(mask)
    atomic_write_text(path, "row,col\n" + "".join(f"{r},{c}\n" for r, c in zip(rr, cc)))
