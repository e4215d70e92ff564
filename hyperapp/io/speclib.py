"""Spectral libraries: read and write them, and bring their spectra onto a cube's bands.

Formats (:func:`read_library` picks by the file):

* **ENVI spectral library** (``.sli`` + ``.hdr``: ``spectra names``, ``wavelength``, ``wavelength units``,
  ``fwhm``), read and written through Spectral Python (``spectral.envi.open``,
  ``spectral.io.envi.SpectralLibrary``), as ENVI and Spectral Python users exchange them.
* **CSV**: a header row, then a wavelength column and one column per spectrum (the header's names);
  the wavelength column's header may carry the units (``wavelength (um)``, ``Wavelength_nm``).
* **Two-column ASCII**, as the USGS (splib06) and ECOSTRESS libraries ship one spectrum per file: header
  lines, then ``wavelength value [more columns]`` rows. ECOSTRESS's ``Name:``, ``X Units:`` and
  ``Y Units:`` lines are read; USGS's deleted channels (-1.23e34) are dropped.
* **Spectral Python database**: the SQLite file ``spectral.EcostressDatabase.create`` (also the older
  ``AsterDatabase``) or ``spectral.USGSDatabase.create`` builds from the ECOSTRESS or USGS splib07 ASCII
  files (recognised by its first bytes, any extension), read through those classes. It holds thousands of
  spectra on many wavelength grids, so the caller names the ones to read (:func:`read_database`).

:func:`resample_to_cube` converts units (nm, µm) and resamples each spectrum to the cube's band centres
and FWHM with ``spectral.BandResampler``; :func:`match_scale` reconciles a reflectance scale (0-1,
percent, 0-10000) with the cube's. Every error is one line that names the file.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hyperapp.core.errors import CubeFormatError, CubeNotFoundError, HyperappError, InputError, OutputError

#: values at or below this are missing channels (USGS writes -1.23e34)
MISSING_BELOW = -1e30
ASCII_EXTENSIONS = (".txt", ".asc", ".ascii", ".dat")
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class SpectralLibrary:
    """Spectra (n, samples) with their names and sampling.

    Attributes
    ----------
    names : list of str
    spectra : (n, samples) float64 array
    wavelengths : (samples,) array or None
        Sample centres in ``units``; None when the library gives none (then it only fits a cube band for
        band).
    units : str or None
        "nm", "um" or what the file said.
    fwhm : (samples,) array or None
    path : str or None
        The file it came from.
    scale_note : str
        How the values were scaled on reading (an ECOSTRESS library in percent, for one).
    """

    names: list[str]
    spectra: np.ndarray
    wavelengths: np.ndarray | None = None
    units: str | None = None
    fwhm: np.ndarray | None = None
    path: str | None = None
    description: str = ""
    scale_note: str = field(default="")

    def __post_init__(self):
        self.spectra = np.atleast_2d(np.asarray(self.spectra, dtype=np.float64))
        if len(self.names) != self.spectra.shape[0]:
            raise InputError(f"{len(self.names)} names for {self.spectra.shape[0]} spectra", self.path)
        for attr in ("wavelengths", "fwhm"):
            v = getattr(self, attr)
            if v is not None:
                v = np.asarray(v, dtype=np.float64).reshape(-1)
                if v.size != self.spectra.shape[1]:
                    raise InputError(f"{v.size} {attr} values for spectra of {self.spectra.shape[1]} samples",
                                     self.path)
                setattr(self, attr, v)

    def __len__(self) -> int:
        return len(self.names)

    def select(self, names: list[str] | str | None) -> SpectralLibrary:
        """The library's spectra named in ``names`` (a list, or one comma-separated string), in that
        order; exact names first, then ignoring case, or ``"#N"`` for the N-th spectrum. None or empty:
        all of them. Names the library repeats become labels (:func:`spectrum_labels`, ``"NAME #N"``):
        picking the repeated name itself is refused, as a spectral database refuses it."""
        ids = list(range(1, len(self.names) + 1))
        labels = spectrum_labels(self.names, ids)
        if names is None or names == "" or names == []:
            if labels == self.names:
                return self
            idx = list(range(len(self.names)))
        else:
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",") if n.strip()]
            idx = [pick_spectrum(n, ids, self.names, labels, self.path, "library") for n in names]
        return SpectralLibrary([labels[i] for i in idx], self.spectra[idx], self.wavelengths, self.units,
                               self.fwhm, self.path, self.description, self.scale_note)

    def wavelengths_nm(self) -> np.ndarray | None:
        return None if self.wavelengths is None else self.wavelengths * unit_factor(self.units, self.wavelengths)

    def fwhm_nm(self) -> np.ndarray | None:
        return None if self.fwhm is None else self.fwhm * unit_factor(self.units, self.wavelengths)


def no_such_spectrum(name: str, names: list[str], where: str) -> str:
    """The message for a spectrum ``name`` missing from ``names`` (those of a library or database): the
    closest names (``difflib``, else those containing it, case ignored) and a few of the others."""
    import difflib

    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if not close:  # then ignoring case
        lower = {n.lower(): n for n in names}
        close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.6)]
    if not close:
        close = [n for n in names if name.lower() in n.lower()][:3]
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    return f"no spectrum named {name!r} in the {where} ({hint}it holds {few_names(names)})"


def few_names(names: list[str], n: int = 8) -> str:
    """The first ``n`` of ``names`` for a message: ``'a', 'b', ...``."""
    if not names:
        return "no spectra"
    return ", ".join(repr(x) for x in names[:n]) + (f", ... ({len(names)} in all)" if len(names) > n else "")


def unit_factor(units: str | None, values: np.ndarray | None = None) -> float:
    """Factor to nanometres for wavelength ``units`` (nm, um/µm/micrometers, mm?), guessed from the
    values (below 30: micrometres) when the units are missing or unknown."""
    u = (units or "").strip().lower()
    if u in ("nm", "nanometers", "nanometres", "nanometer", "nanometre"):
        return 1.0
    if u in ("um", "µm", "μm", "micrometers", "micrometres", "micrometer", "micrometre", "microns", "micron"):
        return 1000.0
    if u in ("mm", "millimeters", "millimetres"):
        return 1e6
    if values is not None and np.size(values) and np.nanmax(values) < 30:
        return 1000.0
    return 1.0


def _units_in(text: str) -> str | None:
    t = text.lower()
    if re.search(r"(micro|µm|μm|\bum\b|_um\b|\(um\)|microns?)", t):
        return "um"
    if re.search(r"(nano|\bnm\b|_nm\b|\(nm\))", t):
        return "nm"
    return None


# ---------------------------------------------------------------------------------------- reading
def read_library(path: str | os.PathLike, names: list[str] | str | None = None) -> SpectralLibrary:
    """Read an ENVI spectral library (``.sli`` or its ``.hdr``), a CSV, a two-column ASCII spectrum or a
    Spectral Python spectral database, keeping the spectra ``names`` (a list, or one comma-separated
    string; all when None, which a database refuses: :func:`read_database`)."""
    p = Path(path)
    if not p.exists():
        raise CubeNotFoundError("spectral library not found", p)
    if p.is_dir():
        raise CubeFormatError("is a folder, not a spectral library", p)
    if is_sqlite(p):
        return read_database(p, names)
    ext = p.suffix.lower()
    if ext in (".sli", ".hdr"):
        return checked_library(_read_envi(p), names)
    if ext == ".csv":
        return checked_library(_read_csv(p), names)
    if ext in ASCII_EXTENSIONS or ext == "":
        return checked_library(_read_ascii(p), names)
    raise CubeFormatError("unknown spectral library format: expected an ENVI .sli/.hdr, a .csv, a two-column "
                          ".txt or a Spectral Python database (.db)", p)


def is_sqlite(p: Path) -> bool:
    """Whether the file starts with SQLite's magic bytes."""
    try:
        with open(p, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


class _QuietFilter(logging.Filter):
    """Drops Spectral Python's records below WARNING in a thread inside :func:`quiet_spectral`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not getattr(_QUIET, "depth", 0)


_QUIET = threading.local()
_QUIET_FILTER = _QuietFilter()


@contextmanager
def quiet_spectral():
    """Inside: Spectral Python's INFO logging (``No overlap for target band N``, one line a band) is
    dropped in this thread, and NumPy's divide and invalid warnings ignored; its warnings and errors stay.
    The callers check what comes out and say what is wrong in one line."""
    logger = logging.getLogger("spectral")
    if _QUIET_FILTER not in logger.filters:
        logger.addFilter(_QUIET_FILTER)
    _QUIET.depth = getattr(_QUIET, "depth", 0) + 1
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            yield
    finally:
        _QUIET.depth -= 1


def _at(wavelengths: np.ndarray | None, units: str | None, j: int) -> str:
    """Where sample ``j`` is, for a message: ``"at wavelength 400 nm"``, or ``"at sample 3"`` without
    wavelengths."""
    if wavelengths is None:
        return f"at sample {j + 1}"
    return f"at wavelength {wavelengths[j]:g}" + (f" {units}" if units else "")


def refuse_unusable(names: list[str], spectra: np.ndarray, where, wavelengths: np.ndarray | None = None,
                    units: str | None = None, across: str = "wavelength") -> None:
    """Refuse, in one line naming ``where`` (the library's file) and the spectrum, a spectrum with a
    value that is not finite in float32 (infinite, or beyond about 3.4e38: the detectors compute in
    float32) or one that is zero at every ``across`` (``"wavelength"``, ``"band of the cube"``). NaN is
    a missing sample, not refused here."""
    s = np.asarray(spectra, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s32 = s.astype(np.float32)
    for i, name in enumerate(names):
        big = np.flatnonzero(np.isinf(s32[i]))
        if big.size:
            j = int(big[0])
            raise InputError(f"spectrum {name!r} has a value that is not finite in float32 ({s[i, j]:g} "
                             f"{_at(wavelengths, units, j)})", where)
        ok = np.isfinite(s32[i])
        if not ok.any():
            raise InputError(f"spectrum {name!r} holds no number (every value is NaN or missing)", where)
        if not s32[i][ok].any():
            raise InputError(f"spectrum {name!r} is zero at every {across}", where)
        if ok.any() and float(np.median(s[i][ok])) < 0:
            # reflectance and radiance are not negative: an offset or a wrong column; its angle and its
            # matched filter against a cube's spectra mean nothing (SAM scored -0.95..-0.85, AUC 0.51)
            many = {"band of the cube": "bands of the cube"}.get(across, across + "s")
            raise InputError(f"spectrum {name!r} is below 0 at most of its {many} (median "
                             f"{float(np.median(s[i][ok])):.4g}): a library's spectra are reflectance or "
                             "radiance, never negative; check its values (an offset, another column?)", where)


def checked_library(lib: SpectralLibrary, names: list[str] | str | None = None) -> SpectralLibrary:
    """The spectra ``names`` of ``lib`` as a file gave it (:meth:`SpectralLibrary.select`), checked.

    Its wavelengths are put in increasing order (ECOSTRESS files decrease; a library saved from a cube
    whose spectrometers overlap goes back and forth) and must be distinct; the picked spectra's values
    must be finite in float32 and none zero throughout (:func:`refuse_unusable`). Anything else is
    refused in one line naming the file.
    """
    wl = lib.wavelengths
    if wl is not None and wl.size > 1:
        order = np.argsort(wl, kind="stable")  # a NaN wavelength (last) is a sample resampling drops
        w = wl[order]
        repeat = np.flatnonzero(np.diff(w) == 0)
        if repeat.size:
            j = int(repeat[0])
            unit = f" {lib.units}" if lib.units else ""
            first, second = sorted((int(order[j]) + 1, int(order[j + 1]) + 1))
            raise InputError(f"wavelength {w[j]:g}{unit} repeats (samples {first} and {second}): a library's "
                             "wavelengths must be distinct", lib.path)
        if (order != np.arange(wl.size)).any():
            lib = SpectralLibrary(lib.names, lib.spectra[:, order], w, lib.units,
                                  None if lib.fwhm is None else lib.fwhm[order], lib.path, lib.description,
                                  lib.scale_note)
    lib = lib.select(names)
    refuse_unusable(lib.names, lib.spectra, lib.path, lib.wavelengths, lib.units)
    return lib


def _read_envi(p: Path) -> SpectralLibrary:
    from spectral.io import envi

    hdr = p if p.suffix.lower() == ".hdr" else p.with_suffix(".hdr")
    data = p.with_suffix(".sli") if p.suffix.lower() == ".hdr" else p
    if not hdr.is_file():
        raise CubeNotFoundError("the library's header (.hdr) is missing", hdr)
    if _is_image_header(hdr):
        raise CubeFormatError("this is an image cube's header, not a spectral library (no 'spectra names'; "
                              "a library's header has them, file type = ENVI Spectral Library and bands = 1)", hdr)
    if not data.is_file():
        raise CubeNotFoundError("the library's data file (.sli) is missing", data)
    from hyperapp.io.envi import check_library_size, check_readable, spectral_header

    check_library_size(hdr, data)
    check_readable(data)
    try:
        with quiet_spectral(), spectral_header(hdr) as readable:
            lib = envi.open(readable, str(data))
    except Exception as exc:  # Spectral Python raises bare Exceptions on bad headers
        raise CubeFormatError(f"cannot read the ENVI spectral library ({exc})", hdr) from exc
    if not hasattr(lib, "names") or not hasattr(lib, "spectra"):
        raise CubeFormatError("not an ENVI spectral library (file type is not 'ENVI Spectral Library')", hdr)
    units = lib.bands.band_unit
    units = None if units in (None, "<unspecified>", "Unknown") else str(units)
    centres = None if lib.bands.centers is None else np.asarray(lib.bands.centers, float)
    fwhm = None if lib.bands.bandwidths is None else np.asarray(lib.bands.bandwidths, float)
    spectra = np.asarray(lib.spectra, dtype=np.float64)
    scale = lib.metadata.get("reflectance scale factor")
    note = ""
    if scale:
        try:
            spectra = spectra / float(scale)
            note = f"divided by the header's reflectance scale factor {float(scale):g}"
        except ValueError:
            pass
    return SpectralLibrary([str(n) for n in lib.names], spectra, centres, units, fwhm, str(data),
                           str(lib.metadata.get("description", "")).strip("{} "), note)


def _is_image_header(hdr: Path) -> bool:
    """Whether the ENVI header ``hdr`` describes an image cube: no ``spectra names``, and a file type other
    than ENVI Spectral Library or more than one band. False when it cannot be read (``envi.open`` then
    says why)."""
    from spectral.io.envi import read_envi_header

    try:
        with quiet_spectral():
            h = read_envi_header(str(hdr))
        bands = int(h.get("bands", 1))
    except Exception:  # Spectral Python raises bare Exceptions on bad headers
        return False
    if "spectra names" in h:
        return False
    return str(h.get("file type", "")).strip().lower() != "envi spectral library" or bands > 1


def _read_csv(p: Path) -> SpectralLibrary:
    try:
        text = p.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise CubeFormatError(f"cannot read ({exc.strerror or exc})", p) from exc
    if any(ch < " " and ch not in "\t\r\n\f" for ch in text[:65536]):  # (a text file has no control bytes)
        raise CubeFormatError("not a text CSV of spectra: the file holds binary bytes", p)
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        raise CubeFormatError("the CSV is empty", p)

    def numeric(row):
        try:
            return [float(c) if c.strip() else np.nan for c in row]
        except ValueError:
            return None

    head = rows[0] if numeric(rows[0]) is None else None
    body = rows[1:] if head is not None else rows
    vals = []
    for i, r in enumerate(body, start=2 if head is not None else 1):
        v = numeric(r)
        if v is None:
            raise CubeFormatError(f"line {i}: not a row of numbers ({','.join(r)[:60]!r})", p)
        vals.append(v)
    if not vals:
        raise CubeFormatError("the CSV holds no spectra: a header row and no rows of values", p)
    width = {len(v) for v in vals}
    if len(width) != 1:
        raise CubeFormatError(f"rows have different numbers of columns ({sorted(width)})", p)
    A = np.array(vals, dtype=np.float64)
    if A.shape[1] < 2:
        raise CubeFormatError("a library CSV needs a wavelength column and at least one spectrum column", p)
    by_band = False
    if head is not None:
        first = head[0].strip().lower()
        # the first column holds the wavelengths, or band numbers (a library band for band, as one saved
        # from a cube without wavelengths); one named otherwise was taken for wavelengths (band numbers
        # read as nanometres, a spectrum's values as wavelengths that "repeat")
        by_band = bool(re.fullmatch(r"(band|bands|channel|band number|band_number|#)(\s*\(.*\))?", first))
        if not by_band and not (_units_in(first) or re.search(r"wave|wl|lambda|^x$", first)):
            raise CubeFormatError(f"the first column must hold the wavelengths (a header like 'wavelength (nm)') "
                                  f"or band numbers ('band'), got {head[0].strip()!r}: put them first", p)
    names = [h.strip() or f"spectrum {j}" for j, h in enumerate(head[1:], 1)] if head is not None else \
        [f"spectrum {j}" for j in range(1, A.shape[1])]
    units = _units_in(head[0]) if head is not None and not by_band else None
    wl = None if by_band else A[:, 0]
    if wl is not None:  # wavelengths run one way (a library from overlapping spectrometers steps back a few times)
        steps = np.diff(wl[np.isfinite(wl)])
        back, ahead = int((steps < 0).sum()), int((steps > 0).sum())
        why = ("some are 0 or below" if (np.isfinite(wl) & (wl <= 0)).any() else
               f"it goes up and down: {back} of {steps.size} steps back"
               if min(back, ahead) > max(2, 0.2 * steps.size) else "")
        if why:
            raise CubeFormatError(f"the first column does not read as wavelengths ({why}): a library's first column "
                                  "holds its wavelengths, in order (or band numbers, named 'band')", p)
    spectra = A[:, 1:].T
    spectra = np.where(spectra <= MISSING_BELOW, np.nan, spectra)
    return SpectralLibrary(names, spectra, wl, units, None, str(p))


def _read_ascii(p: Path) -> SpectralLibrary:
    try:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise CubeFormatError(f"cannot read ({exc.strerror or exc})", p) from exc
    name, units, yunits, data = None, None, "", []
    for line in lines:
        parts = line.replace(",", " ").split()
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            nums = None
        if nums and len(nums) >= 2:
            data.append(nums[:2])
            continue
        if nums and len(nums) == 1:
            continue  # a count, or a value without its wavelength
        low = line.strip().lower()
        if low.startswith("name:") and name is None:
            name = line.split(":", 1)[1].strip()
        elif low.startswith("x units:"):
            units = _units_in(line)
        elif low.startswith("y units:"):
            yunits = low
        elif name is None and line.strip() and not data:
            name = line.strip()  # USGS: the title line
    if not data:
        raise CubeFormatError("no two-column (wavelength, value) rows found: a spectrum file needs its "
                              "wavelengths beside the values", p)
    A = np.array(data, dtype=np.float64)
    keep = A[:, 1] > MISSING_BELOW
    A = A[keep]  # (in wavelength order: checked_library)
    spectrum, note = A[:, 1], ""
    if "percent" in yunits:
        spectrum = spectrum / 100.0
        note = "reflectance in percent, divided by 100"
    return SpectralLibrary([name or p.stem], spectrum[None, :], A[:, 0], units, None, str(p), "", note)


# ------------------------------------------------------------------------------ Spectral Python databases
#: per database layout: the Spectral Python class that reads it, the tables that tell it, its catalogue (every
#: spectrum's id, name, wavelength units, shortest and longest wavelength, sample count and a few words on
#: what it is), and a spectrum's (wavelength units, value units)
_DATABASES = (
    ("ECOSTRESS/ASTER", "EcostressDatabase", {"Samples", "Spectra"},
     "SELECT Spectra.SpectrumID, Samples.Name, Spectra.XUnit, Spectra.MinWavelength, Spectra.MaxWavelength, "
     "Spectra.NumValues, Samples.Type, Samples.Class FROM Samples, Spectra "
     "WHERE Samples.SampleID = Spectra.SampleID ORDER BY Spectra.SpectrumID",
     "SELECT XUnit, YUnit FROM Spectra WHERE SpectrumID = ?"),
    ("USGS", "USGSDatabase", {"Samples", "SpectrometerData"},
     "SELECT Samples.SampleID, Samples.Description, SpectrometerData.Unit, SpectrometerData.MinValue, "
     "SpectrometerData.MaxValue, Samples.NumValues, Samples.Chapter, Samples.Spectrometer FROM Samples "
     "LEFT JOIN SpectrometerData ON Samples.AssumedWLSpmeterDataID = SpectrometerData.SpectrometerDataID "
     "ORDER BY Samples.SampleID",
     "SELECT SpectrometerData.Unit, '' FROM Samples, SpectrometerData WHERE Samples.SampleID = ? AND "
     "Samples.AssumedWLSpmeterDataID = SpectrometerData.SpectrometerDataID"),
)


@contextmanager
def _database(p: Path):
    """The open Spectral Python database at ``p`` (closed on leaving): (database, kind, units query,
    catalogue rows, names, labels), a label being the spectrum's name, ``"NAME #ID"`` where several share it.
    SQLite errors inside become one line naming the file; Spectral Python's chatter is dropped
    (:func:`quiet_spectral`)."""
    with quiet_spectral(), _open_database(p) as found:
        yield found


@contextmanager
def _open_database(p: Path):
    """:func:`_database`'s work."""
    import sqlite3

    import spectral

    try:
        db = spectral.EcostressDatabase(str(p))
        tables = {r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise CubeFormatError(f"cannot read the SQLite database ({exc})", p) from exc
    layout = next((d for d in _DATABASES if d[2] <= tables), None)
    if layout is None:
        db.db.close()
        raise CubeFormatError("an SQLite file, but not a spectral database built by Spectral Python "
                              "(EcostressDatabase, AsterDatabase or USGSDatabase): its tables are "
                              f"{', '.join(sorted(tables)) or 'none'}", p)
    kind, cls, _, catalogue, units_sql = layout
    if cls != "EcostressDatabase":
        db.db.close()
        db = getattr(spectral, cls)(str(p))
    try:
        rows = db.query(catalogue).fetchall()
        raw = [str(r[1] if r[1] is not None else f"#{r[0]}").strip() for r in rows]
        labels = spectrum_labels(raw, [r[0] for r in rows])
        yield db, kind, units_sql, rows, raw, labels
    except sqlite3.Error as exc:
        raise CubeFormatError(f"cannot read the {kind} spectral database ({exc})", p) from exc
    except HyperappError:
        raise
    except Exception as exc:  # Spectral Python raises bare Exceptions for records it cannot find
        raise CubeFormatError(f"cannot read the {kind} spectral database ({exc})", p) from exc
    finally:
        db.db.close()


def database_entries(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Every spectrum of a Spectral Python spectral database, for a picker: (name, description) pairs.

    The name is what :func:`read_library` takes for that spectrum (``"NAME"``, or ``"NAME #ID"`` where
    several spectra share the name); the description says what it is, its wavelength range and units and
    its sample count, as the database's catalogue gives them (no spectrum is read).

    Parameters
    ----------
    path : path of the database

    Returns
    -------
    list of (str, str)
    """
    p = Path(path)
    if not p.is_file():
        raise CubeNotFoundError("spectral database not found", p)
    if not is_sqlite(p):
        raise CubeFormatError("not an SQLite file, so not a Spectral Python spectral database", p)
    with _database(p) as (_, _, _, rows, _, labels):
        return [(label, _entry_description(label, *r[2:])) for label, r in zip(labels, rows)]


def _entry_description(label: str, xunit, lo, hi, count, *what) -> str:
    """``label`` (what it is): ``lo``-``hi`` units, ``count`` samples; for :func:`database_entries`."""
    words = [str(w).strip() for w in what if w is not None and str(w).strip()]
    head = label + (f" ({', '.join(words)})" if words else "")
    units = _units_in(str(xunit or ""))
    if lo is None or hi is None:
        span = "wavelengths unknown"
    else:
        lo, hi = sorted((float(lo), float(hi)))
        if units is None:  # guessed from the values, as the reader does
            units = "um" if unit_factor(None, np.array([lo, hi])) == 1000.0 else "nm"
        span = f"{lo:g}-{hi:g} {'µm' if units == 'um' else units}"
    samples = f", {int(count)} samples" if count else ""
    return f"{head}: {span}{samples}"


def read_database(path: str | os.PathLike, names: list[str] | str | None) -> SpectralLibrary:
    """The spectra ``names`` of a Spectral Python spectral database, each on its own wavelengths.

    The SQLite file that ``spectral.EcostressDatabase.create`` (or ``AsterDatabase.create``) or
    ``spectral.USGSDatabase.create`` builds is opened with that class and each spectrum read with its
    ``get_spectrum``. A name is the sample's (ECOSTRESS ``Name:``, the USGS record's description), exact
    or ignoring case; a name the database gives several spectra is picked as ``"NAME #ID"``, and any
    spectrum as ``"#ID"`` (its SpectrumID, or the USGS SampleID). Without names the database is refused,
    rather than loading thousands of spectra.

    The spectra keep their own samples: the library's wavelengths (nm) are all of theirs together, each
    spectrum NaN where it has no sample, which :func:`resample_to_cube` drops spectrum by spectrum.
    Deleted channels (-1.23e34) are dropped too, and percent values divided by 100.

    Parameters
    ----------
    path : path of the database
    names : list of str, or one comma-separated str
        The spectra to read, in that order.

    Returns
    -------
    SpectralLibrary
    """
    p = Path(path)
    with _database(p) as (db, kind, units_sql, rows, raw, labels):
        ids = [int(r[0]) for r in rows]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        if not names:
            if not labels:
                raise InputError(f"the {kind} spectral database holds no spectra", p)
            raise InputError(f"the {kind} spectral database holds {len(labels)} spectra: pick some with --spectra "
                             f"\"name,name\" (such as {few_names(labels, 4)})", p)
        picked = [pick_spectrum(n, ids, raw, labels, p) for n in names]
        spectra, notes = [], []
        for k in picked:
            x, y = db.get_spectrum(ids[k])
            xunit, yunit = db.query(units_sql, (ids[k],)).fetchone() or (None, None)
            x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
            ok = np.isfinite(x) & np.isfinite(y) & (y > MISSING_BELOW)
            if ok.sum() < 2:
                raise InputError(f"spectrum {labels[k]!r} in the database is empty ({int(ok.sum())} valid samples)", p)
            if "percent" in str(yunit or "").lower():
                y = y / 100.0
                notes.append(labels[k])
            spectra.append((x[ok] * unit_factor(_units_in(str(xunit or "")), x[ok]), y[ok]))
    grid = np.unique(np.concatenate([x for x, _ in spectra]))
    out = np.full((len(spectra), grid.size), np.nan)
    for row, (x, y) in zip(out, spectra):
        row[np.searchsorted(grid, x)] = y
    note = ""
    if notes:
        note = "reflectance in percent, divided by 100" + ("" if len(notes) == len(picked) else
                                                            f" ({', '.join(notes)})")
    names = [labels[k] for k in picked]
    refuse_unusable(names, out, p, grid, "nm")
    return SpectralLibrary(names, out, grid, "nm", None, str(p), f"{kind} spectral database", note)


def spectrum_labels(raw: list[str], ids: list[int]) -> list[str]:
    """Each spectrum's label: its name ``raw``, or ``"NAME #ID"`` where several spectra share the name
    (``ids``: a database's record ids, a library's positions from 1)."""
    count = Counter(raw)
    return [n if count[n] == 1 else f"{n} #{i}" for i, n in zip(ids, raw)]


def pick_spectrum(name: str, ids: list[int], raw: list[str], labels: list[str], p, where: str = "database") -> int:
    """The index of the spectrum ``name`` (a label, a name ignoring case, or ``#ID``) in the ``where``
    (a database or a library, at ``p``); a name several spectra share is refused, naming their labels."""
    m = re.fullmatch(r"#\s*(\d+)", name)
    if m:
        if int(m.group(1)) in ids:
            return ids.index(int(m.group(1)))
        raise InputError(f"no spectrum #{m.group(1)} in the {where} (it holds {few_names(labels)})", p)
    for same in (lambda a, b: a == b, lambda a, b: a.lower() == b.lower()):
        hits = [k for k, label in enumerate(labels) if same(label, name)]
        if hits:
            return hits[0]
        hits = [k for k, n in enumerate(raw) if same(n, name)]
        if hits:
            raise InputError(f"{len(hits)} spectra in the {where} are named {name!r}: pick one as "
                             f"{few_names([labels[k] for k in hits], 4)}", p)
    raise InputError(no_such_spectrum(name, labels, where), p)


# ---------------------------------------------------------------------------------------- writing
def write_library(lib: SpectralLibrary, path: str | os.PathLike, description: str | None = None) -> Path:
    """Write ``lib`` as an ENVI spectral library (``.sli`` + ``.hdr``, through Spectral Python) or, for a
    ``.csv`` path, as CSV; all or nothing (both files appear together, or neither). Returns the data
    file's path."""
    from spectral.io.envi import SpectralLibrary as SpyLibrary

    from hyperapp.io.atomic import out_file

    p = Path(out_file(str(path)))  # not a folder, in a folder that takes files: before any write
    refuse_unusable(lib.names, lib.spectra, p, lib.wavelengths, lib.units)  # what the reader refuses
    if p.suffix.lower() == ".csv":
        from hyperapp.io.atomic import atomic_write_text

        if lib.wavelengths is None:
            raise InputError("a CSV library needs wavelengths: this library has none (save it as .sli)", p)
        unit = lib.units or "nm"
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([f"wavelength ({unit})"] + list(lib.names))
        for j, wl in enumerate(lib.wavelengths):
            w.writerow([f"{wl:.9g}"] + [f"{v:.9g}" for v in lib.spectra[:, j]])
        atomic_write_text(p, buf.getvalue())
        return p
    base = p.with_suffix("") if p.suffix.lower() in (".sli", ".hdr") else p
    final_sli, final_hdr = base.with_name(base.name + ".sli"), base.with_name(base.name + ".hdr")
    from hyperapp.io.atomic import ensure_dir

    ensure_dir(base.parent)
    header = {"spectra names": list(lib.names), "file type": "ENVI Spectral Library"}
    if lib.wavelengths is not None:
        header["wavelength"] = [float(v) for v in lib.wavelengths]
        header["wavelength units"] = lib.units or "Unknown"
    if lib.fwhm is not None:
        header["fwhm"] = [float(v) for v in lib.fwhm]
    stage = Path(tempfile.mkdtemp(prefix=".speclib-", dir=base.parent))
    try:
        spy = SpyLibrary(np.asarray(lib.spectra, np.float32), header)
        if lib.wavelengths is None:
            spy.bands.band_unit = "Unknown"
        with quiet_spectral():
            spy.save(str(stage / base.name), description or lib.description or "hyperapp spectral library")
        os.replace(stage / (base.name + ".sli"), final_sli)
        os.replace(stage / (base.name + ".hdr"), final_hdr)
    except OSError as exc:
        raise OutputError(f"cannot write the spectral library ({exc.strerror or exc})", final_sli) from exc
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final_sli


def append_spectrum(lib: SpectralLibrary | None, name: str, spectrum: np.ndarray, wavelengths=None,
                    units=None, fwhm=None) -> SpectralLibrary:
    """``lib`` with one more spectrum (a new library sampled like the cube when ``lib`` is None); a name
    already present gets a number."""
    spectrum = np.asarray(spectrum, np.float64).reshape(1, -1)
    if lib is None or len(lib) == 0:
        return SpectralLibrary([name], spectrum, wavelengths, units, fwhm)
    if lib.spectra.shape[1] != spectrum.shape[1]:
        raise InputError(f"the library's spectra have {lib.spectra.shape[1]} samples, this one {spectrum.shape[1]}: "
                         "save it to a new library", lib.path)
    base, k = name, 2
    while name in lib.names:
        name, k = f"{base} ({k})", k + 1
    return SpectralLibrary(lib.names + [name], np.concatenate([lib.spectra, spectrum]), lib.wavelengths, lib.units,
                           lib.fwhm, lib.path, lib.description)


# ---------------------------------------------------------------------------------------- onto a cube
def resample_to_cube(lib: SpectralLibrary, cube) -> tuple[np.ndarray, str]:
    """The library's spectra on the cube's bands: ((n, cube bands) float64, how it was done).

    With wavelengths on both sides, each spectrum is resampled with ``spectral.BandResampler`` (the
    cube's FWHM where its header gives them; the library's too), both in nanometres. Missing library
    samples (NaN) are dropped first. A cube without wavelengths takes a library of exactly its band
    count band for band (a library saved from this cube); anything else is refused, as is a library
    that does not cover every cube band.
    """
    from spectral import BandResampler

    nb = cube.bands
    where = lib.path
    if nb < 2:
        raise InputError(f"the cube has {nb} band: a library spectrum is matched over at least 2 bands (one band "
                         "cannot tell spectra apart)", where)
    cwl = None if cube.wavelengths is None else np.asarray(cube.wavelengths, float)
    if cwl is not None and cwl.size != nb:
        cwl = None
    if cwl is None or lib.wavelengths is None:
        if lib.spectra.shape[1] == nb:
            return lib.spectra.copy(), "band for band (the same band count; no wavelengths to resample by)"
        if cwl is None:
            raise InputError(f"the cube has no wavelengths, so a library of {lib.spectra.shape[1]} samples cannot "
                             f"be resampled to its {nb} bands (only a library of exactly {nb} bands fits)", where)
        raise InputError(f"the library has no wavelengths and {lib.spectra.shape[1]} samples, the cube {nb} bands",
                         where)
    cf = unit_factor(cube.wavelength_units, cwl)
    c_nm = cwl * cf
    c_fwhm = None if cube.fwhm is None or np.size(cube.fwhm) != nb else np.asarray(cube.fwhm, float) * cf
    if (np.diff(c_nm) < 0).any():  # bands listed in descending or mixed order: resampled onto them sorted
        from types import SimpleNamespace

        back = np.argsort(c_nm, kind="stable")
        ordered = SimpleNamespace(bands=nb, wavelengths=c_nm[back], wavelength_units="nm",
                                  fwhm=None if c_fwhm is None else c_fwhm[back])
        out, how = resample_to_cube(lib, ordered)
        undo = np.empty_like(back)
        undo[back] = np.arange(nb)
        return out[:, undo], how + " (the cube's bands taken in wavelength order and put back in its own)"
    l_nm, l_fwhm = lib.wavelengths_nm(), lib.fwhm_nm()
    if not np.isfinite(l_nm).any():
        raise InputError("the library holds no wavelength (every one is NaN or missing)", where)
    lo, hi = float(np.nanmin(l_nm)), float(np.nanmax(l_nm))
    if hi < c_nm.min() or lo > c_nm.max():
        raise InputError(f"the library ({lo:g}-{hi:g} nm) and the cube ({c_nm.min():g}-{c_nm.max():g} nm) do not "
                         "overlap in wavelength", where)
    if l_nm.shape == c_nm.shape and np.allclose(l_nm, c_nm, rtol=1e-6, atol=1e-6) and np.isfinite(lib.spectra).all():
        # on the cube's own band centres already (spectra saved from this cube or its twin): taken band for
        # band, as they are (a resampling of identical centres would still smooth them by the FWHM)
        out = lib.spectra.astype(np.float64)
        refuse_unusable(lib.names, out, where, c_nm, "nm", across="band of the cube")
        return out, f"on the cube's own {nb} band centres (taken band for band)"
    out = np.empty((len(lib), nb))
    for i in range(len(lib)):
        s = lib.spectra[i]
        ok = np.isfinite(s) & np.isfinite(l_nm)
        if ok.sum() < 2:
            raise InputError(f"spectrum {lib.names[i]!r} has fewer than 2 valid samples", where)
        order = np.argsort(l_nm[ok], kind="stable")
        centres = l_nm[ok][order]
        fw = None if l_fwhm is None else l_fwhm[ok][order]
        with quiet_spectral():  # its "No overlap for target band N" lines: the check below says it once
            r = BandResampler(list(centres), list(c_nm), None if fw is None else list(fw),
                              None if c_fwhm is None else list(c_fwhm))
            out[i] = r(s[ok][order])
    bad = ~np.isfinite(out)
    if bad.any():
        i = int(np.flatnonzero(bad.any(axis=1))[0])
        b = np.flatnonzero(bad[i])
        own = l_nm[np.isfinite(lib.spectra[i])]
        lo, hi = float(own.min()), float(own.max())
        gap = l_nm[~np.isfinite(lib.spectra[i]) & (l_nm > lo) & (l_nm < hi)]
        if gap.size and lo <= c_nm[b].min() and c_nm[b].max() <= hi:  # inside its range: missing samples
            raise InputError(f"the library's spectrum {lib.names[i]!r} has missing values (NaN) at "
                             f"{gap.min():g}-{gap.max():g} nm, where {b.size} of the cube's {nb} bands lie "
                             f"({c_nm[b].min():g}-{c_nm[b].max():g} nm): fill them, or leave that spectrum or "
                             "those bands out", where)
        which = "" if (bad == bad[i]).all() else f"'s spectrum {lib.names[i]!r}"
        raise InputError(f"the library{which} ({lo:g}-{hi:g} nm) does not cover {b.size} of the cube's {nb} bands "
                         f"({c_nm[b].min():g}-{c_nm[b].max():g} nm): drop those bands (--bands) or use a wider "
                         "library", where)
    refuse_unusable(lib.names, out, where, c_nm, "nm", across="band of the cube")
    own = np.isfinite(lib.spectra).sum(axis=1)  # a database's spectra: each on its own samples
    if (own == lib.spectra.shape[1]).all():
        src = f"{lib.spectra.shape[1]} samples"
    elif own.min() == own.max():
        src = f"each spectrum's own {own.min()} samples"
    else:
        src = f"each spectrum's own samples ({own.min()}-{own.max()})"
    how = f"resampled from {src} to the cube's {nb} band centres"
    how += " and FWHM" if c_fwhm is not None else " (FWHM from the band spacing)"
    return out, how


def cube_level(cube, rows: int = 64) -> float:
    """A typical absolute pixel value of the cube (median over a few evenly spread rows)."""
    step = max(1, cube.rows // max(1, rows))
    sample = cube.read(slice(0, cube.rows, step))
    v = np.abs(sample[np.isfinite(sample)])
    return float(np.median(v)) if v.size else 1.0


def match_scale(spectra: np.ndarray, level: float) -> tuple[np.ndarray, float]:
    """Spectra rescaled by the power of 100 (1e-4 .. 1e4) that brings their median nearest the cube's
    typical value ``level``, when they are more than 10 times apart (a 0-1 reflectance library on a
    cube scaled 0-10000, or percent): (spectra, factor)."""
    med = float(np.median(np.abs(spectra[np.isfinite(spectra)]))) if np.isfinite(spectra).any() else 0.0
    if med <= 0 or level <= 0:
        return spectra, 1.0
    ratio = level / med
    if 0.1 <= ratio <= 10:
        return spectra, 1.0
    factor = 10.0 ** (2 * round(np.log10(ratio) / 2))
    factor = float(min(max(factor, 1e-4), 1e4))
    return spectra * factor, factor


@dataclass
class LibraryTargets:
    """Target (and undesired) spectra on a cube's bands, and a note of how they got there."""

    names: list[str]
    spectra: np.ndarray
    notes: list[str]


def resample_library(path_or_lib, cube, names=None) -> LibraryTargets:
    """Read a library (a path, or a :class:`SpectralLibrary`), keep the spectra ``names`` (all when None)
    and resample them to ``cube``'s bands: :func:`library_targets` before the scale match."""
    lib = path_or_lib if isinstance(path_or_lib, SpectralLibrary) else read_library(path_or_lib, names)
    if len(lib) == 0:
        raise InputError("the spectral library holds no spectra", lib.path)
    if isinstance(path_or_lib, SpectralLibrary):
        lib = lib.select(names)
    spectra, how = resample_to_cube(lib, cube)
    return LibraryTargets(list(lib.names), spectra, [how] + ([lib.scale_note] if lib.scale_note else []))


def library_targets(path_or_lib, cube, names=None, level: float | None = None,
                    resampled=resample_library) -> LibraryTargets:
    """Read a library (a path, or a :class:`SpectralLibrary`), keep the spectra ``names`` (all when None),
    resample them to ``cube``'s bands and match the cube's scale: what ``detect --target-spectra`` and the
    window's library dock pass to :func:`hyperapp.detect.run.run_detection`. ``resampled`` does the reading and
    resampling (:class:`ResampledLibraries`: once for a job's many cubes)."""
    t = resampled(path_or_lib, cube, names)
    spectra, factor = match_scale(t.spectra, cube_level(cube) if level is None else level)
    refuse_unusable(t.names, spectra, getattr(path_or_lib, "path", path_or_lib), across="band of the cube")
    notes = list(t.notes)
    if factor != 1.0:
        notes.append(f"multiplied by {factor:g} to match the cube's scale")
    return LibraryTargets(list(t.names), spectra, notes)


def wavelength_grid(cube) -> tuple:
    """What resampling a library to ``cube`` depends on: its band count, wavelengths, FWHM and their unit."""
    def values(v):
        return None if v is None else tuple(np.asarray(v, float).ravel().tolist())

    return cube.bands, values(cube.wavelengths), values(cube.fwhm), cube.wavelength_units


class ResampledLibraries:
    """:func:`resample_library` once per library, spectrum names and wavelength grid (:func:`wavelength_grid`),
    for a batch job's many cubes: each cube gets a copy; the scale match stays per cube
    (:func:`library_targets`). Safe to call from several threads."""

    def __init__(self):
        self._done: dict = {}
        self._lock = threading.Lock()

    def __call__(self, path_or_lib, cube, names=None) -> LibraryTargets:
        key = (str(getattr(path_or_lib, "path", None) or path_or_lib), str(names), wavelength_grid(cube))
        with self._lock:
            if key not in self._done:
                self._done[key] = resample_library(path_or_lib, cube, names)
            t = self._done[key]
        return LibraryTargets(list(t.names), t.spectra.copy(), list(t.notes))
