"""ENVI cubes (``.hdr`` + raw data) read through Spectral Python and memory-mapped.

Spectral Python parses the header and knows every interleave, data type and byte order; this module
adds what a user needs on top: finding the data file beside the header (``.img``, ``.dat``, ``.raw``,
``.bsq``, ``.bil``, ``.bip`` or no extension), checking its size against the header before mapping it
(a truncated file is an error, not a crash later), and one-line errors that name the file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube, StoredArray
from hyperapp.core.errors import CubeFormatError, CubeNotFoundError
from hyperapp.core.geo import geo_from_map_info

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
            f"no data file beside the header (looked for {', '.join(stem.name + e for e in DATA_EXTENSIONS)})", hdr
        )
    if not p.is_file():
        raise CubeNotFoundError("file not found", p)
    for cand in (p.with_name(p.name + ".hdr"), p.with_suffix(".hdr"), p.with_suffix(".HDR")):
        if cand.is_file():
            return cand, p
    raise CubeNotFoundError("no ENVI header (.hdr) found beside this data file", p)


def _whole(h: dict, key: str, hdr: Path, default=None, lo: int | None = None, hi: int | None = None) -> int:
    """Header field ``key`` as a whole number within [lo, hi]; a missing required field, text, a
    fraction or a value out of range is a :class:`CubeFormatError` naming the field."""
    if key not in h or h[key] is None:
        if default is None:
            raise CubeFormatError(f"header lacks the required field {key!r}", hdr)
        return default
    raw = h[key]
    try:
        f = float(str(raw).strip())
        v = int(f)
        ok = f == v
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise CubeFormatError(f"header field {key!r} must be a whole number, got {raw!r}", hdr)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = (f"{lo} or {hi}" if hi == lo + 1 else f"from {lo} to {hi}") if hi is not None else f"{lo} or more"
        raise CubeFormatError(f"header field {key!r} must be {rng}, got {raw!r}", hdr)
    return v


def _number(h: dict, key: str, hdr: Path, allow_nan: bool = False) -> float | None:
    """Header field ``key`` as a number (None when absent); text is a :class:`CubeFormatError`."""
    raw = h.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        v = float(str(raw).strip())
    except ValueError:
        v = None
    if v is None or (not allow_nan and not np.isfinite(v)):
        raise CubeFormatError(f"header field {key!r} must be a number, got {raw!r}", hdr)
    return v


def _per_band(h: dict, key: str, hdr: Path, bands: int) -> np.ndarray | None:
    """A per-band header list (``wavelength``, ``fwhm``, ``bbl``) as numbers, one per band; a list of
    another length or of text is a :class:`CubeFormatError` (it describes other bands than these)."""
    raw = h.get(key)
    if raw is None:
        return None
    vals = raw if isinstance(raw, list) else [raw]
    if any("=" in str(v) for v in vals):  # '{400, 500, 600' then 'fwhm = {...}': the list ran on
        raise CubeFormatError(f"header field {key!r}: its list is not closed with '}}' before the next field", hdr)
    try:
        a = np.asarray([float(str(v).strip()) for v in vals], dtype=np.float64)
    except ValueError:
        raise CubeFormatError(f"header field {key!r} must list numbers, got {raw!r:.60}", hdr) from None
    if a.size != bands:
        raise CubeFormatError(f"header lists {a.size} {key} value(s) for {bands} bands", hdr)
    if not np.isfinite(a).all():
        raise CubeFormatError(f"header field {key!r} holds NaN or Inf", hdr)
    return a


@contextlib.contextmanager
def spectral_header(hdr: Path) -> Iterator[str]:
    """The path Spectral Python reads ``hdr`` through: the header itself, or where it is not UTF-8 (ENVI
    writes Latin-1: ``µm`` in a description) a UTF-8 copy of it in a temporary folder, since Spectral
    Python decodes headers as UTF-8 and calls any other text a binary file."""
    raw = Path(hdr).read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        if b"\0" in raw[:4096]:  # a binary file stays one
            yield str(hdr)
            return
        with tempfile.TemporaryDirectory(prefix="hyperapp-hdr-") as d:
            copy = Path(d) / Path(hdr).name
            copy.write_text(raw.decode("latin-1"), encoding="utf-8")
            yield str(copy)
        return
    yield str(hdr)


def read_header(hdr: Path) -> dict:
    """Parse an ENVI header with Spectral Python, as a dict of lower-case keys."""
    import spectral.io.envi as envi

    try:
        with spectral_header(hdr) as readable:
            h = envi.read_envi_header(readable)
    except Exception as exc:  # spectral raises its own classes or bare exceptions on bad headers
        said = " ".join(str(exc).split())  # (Spectral Python's words run over several spaced-out lines)
        if "missing \"ENVI\"" in said or "does not appear to be an ENVI header" in said:
            said = "its first line is not ENVI"
        raise CubeFormatError(f"not a valid ENVI header ({said})", hdr) from exc
    return {k.lower(): v for k, v in h.items()}


def check_size(data: Path, need: int, sizes: str, unit: int, unit_name: tuple[str, str]) -> None:
    """The data file holds what its header describes (``need`` bytes: ``sizes`` in words), neither less
    (truncated) nor ``unit`` bytes or more beyond it (one of ``unit_name``, singular and plural: a band of
    a cube, a spectrum of a library): a header that says 60 bands of a 64-band file, or int16 for float32
    data, was read without a word into scores of nothing (AUC 0.48 where the right header gives 1.0)."""
    have = data.stat().st_size
    if have < need:
        raise CubeFormatError(f"data file is truncated or the header's sizes are wrong: {have} bytes, "
                              f"header needs {need} ({sizes})", data)
    if unit and have - need >= unit:
        more = (have - need) / unit
        what = unit_name[0] if more == 1 else unit_name[1]
        raise CubeFormatError(f"data file holds {have} bytes, {more:.3g} {what} more than its header describes "
                              f"({sizes}: {need} bytes); check the header's sizes and data type", data)


def check_library_size(hdr: Path, data: Path) -> None:
    """:func:`check_size` for an ENVI spectral library: ``lines`` spectra of ``samples`` values. Its
    header's fields are checked where they can be read (Spectral Python says the rest)."""
    import spectral.io.envi as envi

    h = read_header(hdr)
    try:
        n, m = int(h["lines"]), int(h["samples"])
        itemsize = np.dtype(envi.envi_to_dtype[str(int(h["data type"]))]).itemsize
        offset = int(h.get("header offset", 0))
    except (KeyError, ValueError, TypeError):
        return
    check_size(data, offset + n * m * itemsize, f"{n} spectra of {m} values, {itemsize}-byte, offset {offset}",
               m * itemsize, ("spectrum", "spectra"))


def check_readable(data: Path) -> None:
    """One line where the data file cannot be opened for reading (no permission, say): Spectral Python's
    half-made file object otherwise printed a traceback of its own (``SpyFile.__del__``) when it was
    collected, under the one-line error."""
    try:
        with open(data, "rb"):
            pass
    except OSError as exc:
        raise CubeFormatError(f"cannot read the data file ({exc.strerror or exc})", data) from None


def open_envi(path: str | os.PathLike) -> Cube:
    """Open an ENVI cube as a memory-mapped :class:`Cube` (nothing is read yet)."""
    import spectral.io.envi as envi

    hdr, data = find_pair(path)
    h = read_header(hdr)
    rows, cols, bands = (_whole(h, k, hdr, lo=1) for k in ("lines", "samples", "bands"))
    dtype_code = _whole(h, "data type", hdr)
    offset = _whole(h, "header offset", hdr, default=0, lo=0)
    byte_order = _whole(h, "byte order", hdr, default=0, lo=0, hi=1)  # 0 little-endian, 1 big-endian
    if "interleave" not in h:  # (Spectral Python needs it; a header cut short loses it among the last lines)
        raise CubeFormatError("header lacks the required field 'interleave' (bsq, bil or bip)", hdr)
    interleave = str(h["interleave"]).strip().lower()
    if dtype_code not in SUPPORTED_DTYPES:
        raise CubeFormatError(f"unsupported ENVI data type {dtype_code}", hdr)
    if interleave not in INTERLEAVE_AXES:
        raise CubeFormatError(f"unknown interleave {interleave!r}", hdr)
    dtype = np.dtype(envi.envi_to_dtype[str(dtype_code)]).newbyteorder(">" if byte_order == 1 else "<")
    wl = _per_band(h, "wavelength", hdr, bands)
    fwhm = _per_band(h, "fwhm", hdr, bands)
    bbl = _per_band(h, "bbl", hdr, bands)
    nodata = _number(h, "data ignore value", hdr, allow_nan=True)
    scale = _number(h, "reflectance scale factor", hdr)
    if scale is not None and scale <= 0:
        raise CubeFormatError(f"header field 'reflectance scale factor' must be above 0, got {scale:g}", hdr)
    check_size(data, offset + rows * cols * bands * dtype.itemsize,
               f"{rows}x{cols}x{bands} {dtype.name}, offset {offset}", rows * cols * dtype.itemsize, ("band", "bands"))
    check_readable(data)
    try:
        with spectral_header(hdr) as readable:
            img = envi.open(readable, str(data))
        mm = img.open_memmap(interleave="source")
    except Exception as exc:
        raise CubeFormatError(f"cannot map the data file ({exc})", data) from exc

    bad = None if bbl is None else bbl == 0
    map_info = list(h["map info"]) if isinstance(h.get("map info"), list) else None
    css = h.get("coordinate system string")
    css = css if isinstance(css, str) else None
    default = h.get("default bands")
    default_bands = None
    if isinstance(default, list) and len(default) >= 3:
        try:
            default_bands = tuple(int(float(v)) - 1 for v in default[:3])  # ENVI counts from 1
        except ValueError:
            default_bands = None  # a display hint only: a bad one is left out
        if default_bands is not None and not all(0 <= b < bands for b in default_bands):
            default_bands = None
    return Cube(
        StoredArray(mm, INTERLEAVE_AXES[interleave]),
        name=hdr.stem,
        path=str(hdr),
        wavelengths=wl,
        wavelength_units=h.get("wavelength units"),
        fwhm=fwhm,
        bad_bands=bad,
        default_bands=default_bands,  # type: ignore[arg-type]
        map_info=map_info,
        coordinate_system=css,
        geo=geo_from_map_info(map_info, css),
        nodata=nodata,
        scale_factor=scale,
        interleave=interleave,
        byte_order="big" if byte_order == 1 else "little",
    )


def is_envi(path: Path) -> bool:
    if path.suffix.lower() == ".hdr":
        return True
    return any(c.is_file() for c in (path.with_name(path.name + ".hdr"), path.with_suffix(".hdr")))
