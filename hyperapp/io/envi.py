"""ENVI cubes (``.hdr`` + raw data) read through Spectral Python and memory-mapped.

Spectral Python parses the header and knows every interleave, data type and byte order; this module
adds what a user needs on top: finding the data file beside the header (``.img``, ``.dat``, ``.raw``,
``.bsq``, ``.bil``, ``.bip`` or no extension), checking its size against the header before mapping it
(a truncated file is an error, not a crash later), and one-line errors that name the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hyperapp.cube import Cube, StoredArray
from hyperapp.errors import CubeFormatError, CubeNotFoundError

DATA_EXTENSIONS = ("", ".img", ".dat", ".raw", ".bsq", ".bil", ".bip")
SUPPORTED_DTYPES = {1, 2, 3, 4, 5, 6, 9, 12, 13, 14, 15}
#: where (rows, cols, bands) sit in each interleave's stored order
INTERLEAVE_AXES = {"bsq": (1, 2, 0), "bil": (0, 2, 1), "bip": (0, 1, 2)}


def find_pair(path: str | os.PathLike) -> tuple[Path, Path]:
    """(header, data file) for a path naming either one."""
    p = Path(path)
    if p.suffix.lower() == ".hdr":
        hdr = p
        if not hdr.is_file():
            raise CubeNotFoundError("header file not found", hdr)
        with open(hdr, "rb") as fh:
            if not fh.read(4).upper().startswith(b"ENVI"):
                raise CubeFormatError("not an ENVI header (it does not begin with 'ENVI')", hdr)
        stem = hdr.with_suffix("")
        for ext in DATA_EXTENSIONS:
            for cand in {stem.with_name(stem.name + ext), stem.with_name(stem.name + ext.upper())}:
                if cand.is_file() and cand != hdr:
                    return hdr, cand
        raise CubeNotFoundError(
            f"no data file beside the header (looked for {', '.join(e or '(none)' for e in DATA_EXTENSIONS)})", hdr
        )
    if not p.is_file():
        raise CubeNotFoundError("file not found", p)
    for cand in (p.with_name(p.name + ".hdr"), p.with_suffix(".hdr"), p.with_suffix(".HDR")):
        if cand.is_file():
            return cand, p
    raise CubeNotFoundError("no ENVI header (.hdr) found beside this data file", p)


def _floats(values, n: int | None = None) -> np.ndarray | None:
    if values is None:
        return None
    try:
        a = np.asarray([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return a if n is None or a.size == n else None


def read_header(hdr: Path) -> dict:
    """Parse an ENVI header with Spectral Python, as a dict of lower-case keys."""
    import spectral.io.envi as envi

    try:
        h = envi.read_envi_header(str(hdr))
    except Exception as exc:  # spectral raises its own classes or bare exceptions on bad headers
        raise CubeFormatError(f"not a valid ENVI header ({exc})", hdr) from exc
    return {k.lower(): v for k, v in h.items()}


def open_envi(path: str | os.PathLike) -> Cube:
    """Open an ENVI cube as a memory-mapped :class:`Cube` (nothing is read yet)."""
    import spectral.io.envi as envi

    hdr, data = find_pair(path)
    h = read_header(hdr)
    try:
        rows, cols, bands = int(h["lines"]), int(h["samples"]), int(h["bands"])
        dtype_code = int(h.get("data type", -1))
        interleave = str(h.get("interleave", "bsq")).strip().lower()
        offset = int(h.get("header offset", 0))
        byte_order = int(h.get("byte order", 0))
    except KeyError as exc:
        raise CubeFormatError(f"header lacks the required field {exc.args[0]!r}", hdr) from exc
    except ValueError as exc:
        raise CubeFormatError(f"header field is not a number ({exc})", hdr) from exc
    if min(rows, cols, bands) < 1:
        raise CubeFormatError(f"header gives an empty cube ({rows} lines, {cols} samples, {bands} bands)", hdr)
    if dtype_code not in SUPPORTED_DTYPES:
        raise CubeFormatError(f"unsupported ENVI data type {dtype_code}", hdr)
    if interleave not in INTERLEAVE_AXES:
        raise CubeFormatError(f"unknown interleave {interleave!r}", hdr)
    dtype = np.dtype(envi.envi_to_dtype[str(dtype_code)]).newbyteorder(">" if byte_order == 1 else "<")
    need = offset + rows * cols * bands * dtype.itemsize
    have = data.stat().st_size
    if have < need:
        raise CubeFormatError(
            f"data file is truncated or the header's sizes are wrong: {have} bytes, "
            f"header needs {need} ({rows}x{cols}x{bands} {dtype.name}, offset {offset})",
            data,
        )
    try:
        img = envi.open(str(hdr), str(data))
        mm = img.open_memmap(interleave="source")
    except Exception as exc:
        raise CubeFormatError(f"cannot map the data file ({exc})", data) from exc

    wl = _floats(h.get("wavelength"), bands)
    bbl = h.get("bbl")
    bad = None
    if bbl is not None and len(bbl) == bands:
        bad = np.asarray([float(v) == 0 for v in bbl], dtype=bool)
    default = h.get("default bands")
    default_bands = None
    if default is not None and len(default) >= 3:
        try:
            default_bands = tuple(int(float(v)) - 1 for v in default[:3])  # ENVI counts from 1
        except ValueError:
            default_bands = None
    nodata = h.get("data ignore value")
    try:
        scale = float(h.get("reflectance scale factor")) if h.get("reflectance scale factor") else None
    except ValueError:
        scale = None
    return Cube(
        StoredArray(mm, INTERLEAVE_AXES[interleave]),
        name=hdr.stem,
        path=str(hdr),
        wavelengths=wl,
        wavelength_units=h.get("wavelength units"),
        fwhm=_floats(h.get("fwhm"), bands),
        bad_bands=bad,
        default_bands=default_bands,  # type: ignore[arg-type]
        map_info=list(h["map info"]) if isinstance(h.get("map info"), list) else None,
        coordinate_system=h.get("coordinate system string"),
        nodata=float(nodata) if nodata is not None else None,
        scale_factor=scale if scale and scale > 0 else None,
        interleave=interleave,
        byte_order="big" if byte_order == 1 else "little",
    )


def is_envi(path: Path) -> bool:
    if path.suffix.lower() == ".hdr":
        return True
    return any(c.is_file() for c in (path.with_name(path.name + ".hdr"), path.with_suffix(".hdr")))
