"""Value parsers every entry point shares: whole numbers, numbers, flags, choices, bands, seeds.

Every value a person types reaches hyperapp as text (the CLI, the window's fields) or as a TOML or
JSON value (job files, ``--param NAME=JSON``). The functions here turn each into the value the
computing path takes, or raise :class:`~hyperapp.core.errors.InputError` with the same words wherever it
came from; only ``name`` (``--sample`` on the command line, ``sample`` in a job) differs.

Nothing here imports NumPy or Qt, so the checks are cheap to run before any work starts.
"""

from __future__ import annotations

import math
import re

from hyperapp.core.errors import InputError

#: the largest seed a method or a sample takes (the registry's seeds share it)
SEED_MAX = 2**31 - 1
#: the spectra selections of an analysis (:class:`hyperapp.analyse.run.Selection`)
SELECTIONS = ("sample", "image", "roi", "rois", "objects")
DEFAULT_SAMPLE = 20000


def _num(x) -> str:
    return str(int(x)) if float(x) == int(x) and abs(x) < 1e15 else f"{x:g}"


def _range_words(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f" from {_num(lo)} to {_num(hi)}"
    if lo is not None:
        return f", {_num(lo)} or more"
    if hi is not None:
        return f", {_num(hi)} or less"
    return ""


def whole(value, name: str, lo: int | None = None, hi: int | None = None, what: str = "a whole number") -> int:
    """``value`` (an int, an integral float, or its text) as an int within [lo, hi]."""
    v = None
    if isinstance(value, bool):
        v = None
    elif isinstance(value, int):
        v = value
    elif isinstance(value, float):
        v = int(value) if math.isfinite(value) and value == int(value) else None
    elif isinstance(value, str):
        t = value.strip()
        if re.fullmatch(r"[+-]?\d+", t):
            v = int(t)
        else:
            try:
                f = float(t)
            except ValueError:
                f = math.nan
            v = int(f) if math.isfinite(f) and f == int(f) else None
    else:  # NumPy integers and the like
        try:
            import operator

            v = operator.index(value)
        except TypeError:
            v = None
    if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InputError(f"{name} must be {what}{_range_words(lo, hi)}, got {value!r}")
    return v


def number(value, name: str, lo: float | None = None, hi: float | None = None, *, open_lo: bool = False,
           open_hi: bool = False, what: str = "a number") -> float:
    """``value`` (a number or its text) as a finite float within the range (ends open where told)."""
    f = math.nan
    if isinstance(value, bool):
        f = math.nan
    elif isinstance(value, (int, float)):
        f = float(value)
    elif isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            f = math.nan
    else:
        try:
            f = float(value)
        except (TypeError, ValueError):
            f = math.nan
    ok = math.isfinite(f)
    if ok and lo is not None:
        ok = f > lo if open_lo else f >= lo
    if ok and hi is not None:
        ok = f < hi if open_hi else f <= hi
    if not ok:
        if lo is not None and hi is not None and (open_lo or open_hi):
            rng = f" in {'(' if open_lo else '['}{_num(lo)}, {_num(hi)}{')' if open_hi else ']'}"
        elif lo is not None and open_lo and hi is None:
            rng = f" above {_num(lo)}"
        else:
            rng = _range_words(lo, hi)
        raise InputError(f"{name} must be {what}{rng}, got {value!r}")
    return f


def flag(value, name: str) -> bool:
    """``value``, a bool (TOML's and JSON's ``true``/``false``); text or a number is refused, so that
    ``"no"`` or ``"false"`` in quotes never reads as a yes."""
    if isinstance(value, bool):
        return value
    raise InputError(f"{name} must be true or false (in a job file without quotes), got {value!r}")


def text(value, name: str, choices: tuple | list = (), what: str = "text") -> str:
    """``value`` as text (a number is taken as its text); one of ``choices`` when given."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"{name} must be {what}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{name} must be {what}, got {value!r}")
    t = value.strip() if isinstance(value, str) else (str(int(value)) if value == int(value) else str(value))
    if choices and t not in [str(c) for c in choices]:
        raise InputError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return t


# ------------------------------------------------------------------ the run options
def sample(value, name: str = "sample") -> int:
    """Pixels in an analysis's random sample: a whole number, 1 or more."""
    return whole(value, name, 1, None, "a whole number of pixels")


def seed(value, name: str = "seed") -> int:
    """A random seed: a whole number from 0 to 2^31 - 1 (as every method's seed)."""
    return whole(value, name, 0, SEED_MAX)


def far(value, name: str = "far") -> float:
    """A false-alarm rate: a number in (0, 1)."""
    return number(value, name, 0.0, 1.0, open_lo=True, open_hi=True, what="a false-alarm rate")


def threshold(value, name: str = "threshold") -> float:
    """A score threshold: any finite number."""
    return number(value, name, what="a finite score")


def memory(value, name: str = "memory") -> float:
    """Host memory in GB a run may hold: a number above 0, at most :data:`MEMORY_MAX_GB` (a budget is
    counted in bytes, so a larger one is no budget at all)."""
    return number(value, name, 0.0, MEMORY_MAX_GB, open_lo=True, what="a number of GB")


#: the largest memory budget taken, in GB (a petabyte: far above any machine, far below an integer's limit)
MEMORY_MAX_GB = 1e6


def roi_class(value, name: str = "roi_class") -> int:
    """The ROI class a ``roi`` selection takes: 1 or more (0 is "no class" in a class map)."""
    return whole(value, name, 1, None, "a class of the ROI map (0 is no class)")


def select(value, name: str = "select", choices: tuple = SELECTIONS) -> str:
    """Which spectra an analysis fits on."""
    return text(value, name, choices)


def workers(value, name: str = "workers") -> int:
    """A number of local worker processes: 0 (none) up to twice this machine's cores (at least 8). More
    only compete for the cores and memory (``--workers 1e3``, read as 1000, started processes for a
    minute and ate 7 GB before anything ran)."""
    import os

    cores = os.cpu_count() or 1
    return whole(value, name, 0, max(8, 2 * cores),
                 f"a number of worker processes (this machine has {cores} core{'s' if cores != 1 else ''})")


def band_spec(value, name: str = "bands") -> str:
    """A band list (``"3,17,40"``, ``"10-20,40"`` or a list of numbers) as its text, checked for syntax
    (which bands exist is checked against each cube by :func:`hyperapp.analyse.run.parse_bands`)."""
    if isinstance(value, (list, tuple)):
        parts = [str(whole(v, name, 0, None, "a list of band indices (0-based)")) for v in value]
        value = ",".join(parts)
    if not isinstance(value, str):
        raise InputError(f"{name} must be band indices like 3,17,40 or 10..20 (0-based), got {value!r}")
    band_indices(value, name)
    return value.strip()


def band_indices(value: str, name: str = "bands") -> list[int]:
    """The band indices a band list names, sorted, each once (not checked against a cube)."""
    out: list[int] = []
    for part in str(value).split(","):
        part = part.strip()
        if not part:
            continue
        # a range as k takes one too (2..16, 2-16, 2:16), ends included
        m = re.fullmatch(r"(\d+)\s*(?:-|\.\.|:)\s*(\d+)", part)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if b < a:
                raise InputError(f"{name} range {part!r} runs backwards")
            if b - a > 100_000:  # no cube has more bands; a slip of the keyboard must not fill the memory
                raise InputError(f"{name} range {part!r} spans {b - a + 1:,} bands: no cube has that many")
            out.extend(range(a, b + 1))
        elif re.fullmatch(r"[+-]?\d+", part):
            v = int(part)
            if v < 0:
                raise InputError(f"{name} holds band {v}: bands are counted from 0")
            out.append(v)
        else:
            raise InputError(f"{name} must be band indices like 3,17,40 or 10..20 (0-based), got {value!r}")
    if not out:
        raise InputError(f"{name} lists no band")
    if len(set(out)) != len(out):  # "3,3,3" is one band: most often a typing slip for other bands
        twice = sorted({b for b in out if out.count(b) > 1})
        raise InputError(f"{name} lists band{'s' if len(twice) > 1 else ''} {', '.join(map(str, twice[:5]))} more "
                         "than once: list each band once")
    return sorted(out)


_BAD_NAME = re.compile(r"[/\\\x00-\x1f<>:\"|?*]")


def folder_name(value, name: str = "name") -> str:
    """A name used as one output folder: no path separators, not ``.`` or ``..``, not hidden."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be text (a folder name), got {value!r}")
    t = value.strip()
    if not t or t != value or t.startswith(".") or _BAD_NAME.search(t) or len(t) > 120:
        raise InputError(f"{name} must be a plain folder name (no / \\ : * ? \" < > |, no leading dot), "
                         f"got {value!r}")
    return t


def out_folder(value, name: str = "--out") -> str:
    """An output folder: non-empty text ("." for the current folder)."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name} must name a folder ('.' for this one), got {value!r}")
    return value
