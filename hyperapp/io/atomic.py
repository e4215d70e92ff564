"""Atomic writes: a crash or a cancel never leaves a half-written file under the final name.

Each output is written to a hidden temporary file in the destination folder (so the final rename
stays on one file system) and moved into place with :func:`os.replace` only once it is complete.
"""

from __future__ import annotations

import contextlib
import contextvars
import glob
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hyperapp.core.errors import InputError, OutputError

#: the name of a staging folder starts with this (:func:`staged_folder`)
STAGING_PREFIX = ".staging-"
#: the files the run in this context read (:func:`protect_inputs`): a staged output never replaces one
_INPUTS: contextvars.ContextVar[frozenset[Path]] = contextvars.ContextVar("hyperapp_inputs", default=frozenset())
_UMASK = os.umask(0)
os.umask(_UMASK)


def _nearest_existing(p: Path) -> Path:
    """``p`` or its nearest parent that exists."""
    probe = p.absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe


def refused_in(folder: Path, exc: OSError) -> str:
    """Why nothing can be written in ``folder``, which exists, in words: the system's own ("No such file or
    directory" from /proc, where the folder plainly exists) said as the folder's refusal."""
    return f"the system does not let files be made in {folder} ({exc.strerror or exc})"


def ensure_dir(folder: str | os.PathLike) -> Path:
    """Create ``folder`` (and parents) or raise :class:`OutputError` saying why it cannot be."""
    p = Path(folder)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        check_out_dir(p)  # a file where a folder of the path should be, or one not writable: says which
        raise OutputError(f"cannot create output folder: {refused_in(_nearest_existing(p), exc)}", p) from exc
    if not os.access(p, os.W_OK | os.X_OK):
        raise OutputError("output folder is not writable", p)
    return p


def check_out_dir(folder: str | os.PathLike) -> Path:
    """Check, before any work and without creating anything, that ``folder`` can be made or written:
    it is a writable folder, or its nearest existing parent is one (no part of the path is a file).
    Raises :class:`OutputError` naming the folder; a failing run then leaves no new folder behind."""
    p = Path(folder)
    if not str(folder).strip():
        raise OutputError("the output folder is empty: name a folder ('.' for this one)", p)
    probe = _nearest_existing(p)
    if probe.exists() and not probe.is_dir():
        raise OutputError(f"cannot create output folder: {probe} is a file, not a folder", p)
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "output folder is not writable" if probe == p.absolute() else f"cannot create output folder: {probe} is not writable"
        raise OutputError(what, p)
    return p


def _missing_dirs(folder: Path) -> list[Path]:
    """The folders that :func:`ensure_dir` would create for ``folder``, deepest first."""
    out = []
    p = folder.absolute()
    while not p.exists() and p.parent != p:
        out.append(p)
        p = p.parent
    return out


def remove_if_empty(folders: list[Path]) -> None:
    """Remove each of ``folders`` (deepest first) that is empty: what a failed run created and left."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            break


def usual_mode(folder: bool = False) -> int:
    """The mode a new file (or folder) gets under this process's umask: what temporary files and folders,
    made private (0600, 0700), are given before they move into place."""
    return (0o777 if folder else 0o666) & ~_UMASK


def check_replaceable(final: Path) -> int | None:
    """The permission bits of the file ``final`` replaces (None where there is none), refusing a read-only
    one: a rename replaces any file its folder lets it, and a project or mask set read-only (444) was
    replaced without a word, its mode then 644. Read by its mode bits, as a person set them (root may write
    anything)."""
    try:
        st = final.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if not st.st_mode & 0o222:
        raise OutputError("is read-only: it is kept as it is; choose another name, or make it writable", final)
    return stat.S_IMODE(st.st_mode)


@contextlib.contextmanager
def atomic_paths(*finals: str | os.PathLike) -> Iterator[list[Path]]:
    """Yield temporary paths for ``finals``; on success move each into place, on error delete them.

    Several files (an ENVI header and its data file) are moved only after all were written. Inside a
    staging folder (:func:`staged_folder`) the files are written under their final names at once: the
    folder itself is hidden until its files move into place, and deleted when the writing fails.
    """
    finals_p = [Path(f) for f in finals]
    if all(f.parent.name.startswith(STAGING_PREFIX) for f in finals_p):
        try:
            yield finals_p
        except BaseException:
            for f in finals_p:
                with contextlib.suppress(OSError):
                    f.unlink()
            raise
        return
    temps: list[Path] = []
    modes = [check_replaceable(f) for f in finals_p]  # all checked before any file is written
    try:
        for f, mode in zip(finals_p, modes):
            ensure_dir(f.parent)
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{f.stem}.", suffix=".part" + f.suffix, dir=f.parent)
            except OSError as exc:  # a folder that cannot hold new files (/proc, a read-only mount)
                raise OutputError(f"cannot write ({exc.strerror or exc})", f) from exc
            os.close(fd)
            # mkstemp makes 0600: the replaced file's mode, else the usual one
            os.chmod(tmp, mode if mode is not None else usual_mode())
            temps.append(Path(tmp))
        yield temps
        for tmp, final in zip(temps, finals_p):
            os.replace(tmp, final)
    except BaseException:
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise


def _files_of_report(report: Path) -> list[str]:
    """The ``files`` a run's ``report.json`` lists (what that run staged), [] where there are none."""
    import json

    try:
        files = json.loads(report.read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in files if isinstance(f, str) and f and "/" not in f and "\\" not in f]


def _list_files_in_report(stage: Path, names: list[str]) -> None:
    """Add the staged file names to the staged ``report.json`` (``files``), so the next run into the same
    folder knows what this one wrote."""
    import json

    report = stage / "report.json"
    if report.is_file():
        rep = json.loads(report.read_text())
        if isinstance(rep, dict):
            rep["files"] = names
            report.write_text(json.dumps(rep, indent=1))


def _forget_earlier_outputs(out: Path, earlier: list[str], names: list[str]) -> None:
    """Remove the files an earlier run staged into ``out`` (its report's ``files``) that this one did not
    write: an MTMF run's infeasibility map stayed beside a later RX run's scores. Files hyperapp did not
    write there are never touched."""
    for name in set(earlier) - set(names):
        try:
            (out / name).unlink()
        except OSError:
            pass


@contextlib.contextmanager
def protect_inputs(*paths) -> Iterator[None]:
    """Within this block, :func:`staged_folder` refuses to replace any of ``paths`` (the files a run
    reads; None and "" are skipped) or their siblings of the same name (an ENVI header's data file): a
    run whose output folder holds its own cube, truth or clicks under an output's name (``scores.hdr``,
    ``mask.hdr``, ``objects.csv``) overwrote them, and said it had succeeded."""
    found: set[Path] = set()
    for p in paths:
        if p is None or not str(p).strip():
            continue
        p = Path(p)
        try:
            found.update(q.resolve() for q in p.parent.glob(glob.escape(p.stem) + ".*") if q.is_file())
            if p.is_file():
                found.add(p.resolve())
        except OSError:
            continue
    token = _INPUTS.set(_INPUTS.get() | frozenset(found))
    try:
        yield
    finally:
        _INPUTS.reset(token)


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike) -> Iterator[Path]:
    """Write a set of outputs all or nothing: yield a hidden staging folder inside ``out``; when the
    block succeeds, move every file in it into ``out`` (report last, so a complete report means
    complete outputs); when it fails or is killed (SIGTERM arrives as an exception in the CLI), delete
    it, and the folders it had to create for ``out`` when they are left empty. Staging folders a
    killed process left behind are removed first."""
    import shutil

    created = _missing_dirs(Path(out))
    out = ensure_dir(out)
    for old in out.glob(STAGING_PREFIX + "*"):
        shutil.rmtree(old, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out))
    os.chmod(stage, usual_mode(folder=True))  # mkdtemp makes 0700: a folder moved into place gets the usual mode
    ok = False
    try:
        yield stage
        names = sorted(p.name for p in stage.iterdir())
        names.sort(key=lambda n: n == "report.json")  # the report moves last
        # only a run's outputs (they have a report) replace an earlier run's; other files staged here never
        # remove anything
        inputs = _INPUTS.get()
        for name in names:  # checked for all before any moves: all or nothing
            if inputs and (out / name).resolve() in inputs:
                raise OutputError(f"writing {name} here would overwrite an input of this run ({out / name}): "
                                  "write the results to another folder", out)
            check_replaceable(out / name)  # (a read-only earlier output is refused, not replaced)
        earlier = _files_of_report(out / "report.json") if "report.json" in names else []
        _list_files_in_report(stage, names)
        for name in names:
            os.replace(stage / name, out / name)
        _forget_earlier_outputs(out, earlier, names)
        ok = True
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if not ok:
            remove_if_empty(created)  # a failed run leaves no new, empty folder behind


def atomic_write_bytes(final: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``final`` atomically."""
    with atomic_paths(final) as (tmp,):
        try:
            tmp.write_bytes(data)
        except OSError as exc:
            raise OutputError(f"cannot write ({exc.strerror or exc})", final) from exc


def atomic_write_text(final: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(final, text.encode("utf-8"))


def out_file(value, name: str = "", make_folder: bool = True) -> str:
    """An output file's path, checked before any work: non-empty text, not a folder, in a folder that can
    be made or written (:func:`hyperapp.io.atomic.check_out_dir`). The error names the file, and the
    option ``name`` where one is given (``--json``).

    ``make_folder=False`` (the window's saves): the folder must exist already. A command line's output
    folders are made as ``mkdir -p`` would; a path typed into a save dialog whose folder is not there is a
    typo, and making that folder would leave a tree where the person did not look for it."""
    from pathlib import Path


    said = f"{name}: " if name else ""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name or 'the output'} must name a file, got {value!r}")
    p = Path(value)
    if p.is_dir():
        raise OutputError(f"{said}is a folder; a file name is needed here", p)
    try:
        check_out_dir(p.parent)
    except OutputError as exc:  # its message names the blocking file or folder already
        raise OutputError(f"{said}{exc.message}", p) from None
    if not make_folder and not p.parent.is_dir():
        raise OutputError(f"{said}its folder {p.parent} does not exist; choose an existing folder", p)
    if p.parent.is_dir():  # a folder that says it is writable and is not (/proc, a read-only mount)
        import os
        import tempfile

        try:
            fd, probe = tempfile.mkstemp(prefix=".probe-", dir=p.parent)
        except OSError as exc:
            raise OutputError(f"{said}{refused_in(p.parent, exc)}", p) from None
        os.close(fd)
        os.unlink(probe)
    return value
