"""Run options checked once: the CLI's options, a job file's keys and the window's fields.

The value parsers are :mod:`hyperapp.core.values` (re-exported here for the services); this module adds
what depends on the method: each method's parameters (through its schema,
:meth:`hyperapp.models.registry.Method.check_params`), its input files and library settings.
"""

from __future__ import annotations

import re

from hyperapp.core.errors import HyperappError, InputError
from hyperapp.core.values import (  # noqa: F401  (the services' one place to import the checks from)
    DEFAULT_SAMPLE,
    SEED_MAX,
    SELECTIONS,
    band_indices,
    band_spec,
    far,
    flag,
    folder_name,
    memory,
    number,
    out_folder,
    roi_class,
    sample,
    seed,
    select,
    text,
    threshold,
    whole,
    workers,
)
from hyperapp.io.atomic import out_file  # noqa: F401


def scheduler(value, name: str = "--scheduler") -> str:
    """A Dask scheduler address: ``tcp://HOST:PORT``, ``HOST:PORT`` or another protocol's address."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be an address like tcp://HOST:8786, got {value!r}")
    t = value.strip()
    m = re.fullmatch(r"(?:(tcp|tls|ucx|ws|wss|inproc)://)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+)(?::(\d+))?/?", t)
    if not m or (m.group(1) in (None, "tcp", "tls", "ws", "wss") and m.group(3) is None):
        raise InputError(f"{name} must be an address like tcp://HOST:8786, got {value!r}")
    if m.group(3) is not None and not 1 <= int(m.group(3)) <= 65535:
        raise InputError(f"{name} port must be from 1 to 65535, got {value!r}")
    return t


# ------------------------------------------------------------------ a run's settings, checked at once
#: files a detect or analyse run may name, and what each must be
FILES = {"targets": "mask or pixel list", "background": "mask or pixel list", "truth": "mask file",
         "roi": "class map or pixel list", "objects": "mask file", "model": "saved model file",
         "train": "cube file", "train_truth": "mask file", "target_spectra": "spectral library", "undesired_rois": "class map or pixel list"}
#: a detect run's keys that list files: each entry must be a file of this kind
FILE_LISTS = {"undesired_spectra": "spectral library"}


def names(value, name: str) -> str:
    """Spectrum names of a library (``"a,b"`` or a list of names) as ``"a,b"``; which exist is checked
    against the library itself (:func:`hyperapp.io.speclib.library_targets`)."""
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, str) for v in value):
            raise InputError(f"{name} must be spectrum names (\"a,b\" or a list of names), got {value!r}")
        value = ",".join(v.strip() for v in value)
    if not isinstance(value, str) or not [t for t in value.split(",") if t.strip()]:
        raise InputError(f"{name} must be spectrum names (\"a,b\" or a list of names), got {value!r}")
    return value.strip()


def mnf_components(value, name: str = "mnf") -> int:
    """``--mnf``: MNF components a pixel detector runs on, 0 for those with an SNR of at least 1."""
    return whole(value, name, 0, None, "a number of MNF components (0: those with SNR >= 1)")


def _fail(key: str, message: str):
    e = InputError(message)
    e.key = key
    raise e


def file_list(value, name: str, what: str) -> list[str]:
    """One path or a list of paths, each an existing file (a folder or nothing there is an error)."""
    from hyperapp.io.masks import need_file

    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise InputError(f"{name} must be a path or a list of paths, got {value!r}")
    out = []
    for v in items:
        p = text(v, name, what="a path (text)")
        need_file(p, what)
        out.append(p)
    return out


def library_window_error(method: str, option: str) -> str:
    """Why a window detector refuses a library target (one line)."""
    return (f"method {method} (the window detector) learns from clicked target pixels, not from a library "
            f"spectrum: drop {option} and click targets, or pick a pixel detector (ACE, MF, CEM, SAM, OSP, "
            "TCIMF, MTMF, MTTCIMF or the RBFN)")


def library_use(method: str, targets: bool, undesired: str | None, label=lambda key: key) -> None:
    """Whether detector ``method`` takes target spectra (``targets``) and undesired signatures (given
    under the key ``undesired``, None when there are none); the window's library dock asks this too."""
    from hyperapp.models.registry import get_method

    m = _keyed("detect", get_method, method)
    if targets and not m.uses_targets:
        _fail("target_spectra", f"method {method} takes no target: drop {label('target_spectra')}")
    if targets and m.kind != "pixel":
        _fail("target_spectra", library_window_error(method, label("target_spectra")))
    if undesired and not m.uses_undesired:
        _fail(undesired, f"method {method} does not use undesired signatures; OSP, TCIMF, MTTCIMF and the RBFN do")


def _signature_settings(m, method: str, got: dict, out: dict, label) -> None:
    """The library keys of a detect run (target and undesired spectra, ``--mnf``), checked into ``out``."""
    for key, what in FILE_LISTS.items():
        if got.get(key):
            out[key] = _keyed(key, file_list, got[key], label(key), what)
    for key, lib in (("spectra", "target_spectra"), ("undesired_names", "undesired_spectra")):
        if key in got:
            out[key] = _keyed(key, names, got[key], label(key))
            if lib not in out:
                _fail(key, f"{label(key)} picks spectra of a library: give {label(lib)} too")
    und = [k for k in ("undesired_spectra", "undesired_rois") if k in out]
    library_use(method, "target_spectra" in out, und[0] if und else None, label)
    if "mnf" in got:
        out["mnf"] = _keyed("mnf", mnf_components, got["mnf"], label("mnf"))
        if m.kind != "pixel":
            _fail("mnf", f"{label('mnf')} runs a pixel detector it trains in MNF space; {method} is not a "
                         "pixel detector")
        if "model" in out:
            _fail("mnf", f"{label('mnf')} runs a pixel detector it trains in MNF space; give "
                         f"{label('mnf')} or {label('model')}, not both")


def _keyed(key: str, fn, *args):
    """Run a check; an InputError it raises carries ``key`` (a job file names ``[steps[i].key]``)."""
    try:
        return fn(*args)
    except HyperappError as exc:  # a missing file too: a job names its key
        exc.key = key
        raise


def run_settings(kind: str, method: str, raw: dict, label=lambda key: key, *, need_targets: bool = True) -> dict:
    """The settings of one detect or analyse run, checked as the CLI, a job step and the window share them.

    Parameters
    ----------
    kind : {"detect", "analyse"}
    method : str
        A detector or analysis method name.
    raw : dict
        Any of ``params`` (a table of method options), ``far``, ``threshold``, ``sample``, ``seed``,
        ``select``, ``roi_class``, ``bands``, ``all_bands``, the files of :data:`FILES` and the file
        lists of :data:`FILE_LISTS` (paths as given; relative ones are the caller's to resolve), and
        for a detector ``spectra``, ``undesired_names`` (names in those libraries) and ``mnf``. Absent
        or None: the default.
    label : callable
        How a key is named in messages (``"--roi-class"`` on the command line, ``"roi_class"`` in a job).
    need_targets : bool
        Whether a detector that uses targets must be given ``targets`` or a ``model`` here.

    Returns
    -------
    dict
        The same keys, checked and converted, plus the analysis's resolved ``select``. An
        :class:`~hyperapp.core.errors.InputError` says what is wrong (its ``key`` attribute names the key).
    """
    from hyperapp.models.registry import get_analysis, get_method

    m = _keyed(kind, get_method if kind == "detect" else get_analysis, method)
    got = {k: v for k, v in raw.items() if v is not None}
    out: dict = {"method": method}
    out["params"] = _keyed("params", m.check_params, got.get("params", {}))
    for key, what in FILES.items():
        if key in got:
            from hyperapp.io.masks import need_file

            p = text(got[key], label(key), what="a path (text)")
            _keyed(key, need_file, p, what)
            out[key] = p
    if "bands" in got:
        out["bands"] = _keyed("bands", band_spec, got["bands"], label("bands"))
    out["all_bands"] = _keyed("all_bands", flag, got.get("all_bands", False), label("all_bands"))
    if kind == "detect":
        if "far" in got and "threshold" in got:
            e = InputError(f"give {label('far')} or {label('threshold')}, not both")
            e.key = "far"
            raise e
        if "far" in got:
            out["far"] = _keyed("far", far, got["far"], label("far"))
        if "threshold" in got:
            out["threshold"] = _keyed("threshold", threshold, got["threshold"], label("threshold"))
        _signature_settings(m, method, got, out, label)
        if "train" in out and "model" in out:
            _fail("train", f"give {label('train')} (a scene to train on) or {label('model')} (a saved model), not both")
        if "model" in out and "targets" in out:
            _fail("targets", f"give {label('model')} (a saved model scores the cube) or {label('targets')} "
                             "(clicks to train on), not both")
        if "train_truth" in out:
            if "train" not in out:
                _fail("train_truth", f"{label('train_truth')} marks the targets of {label('train')}: give "
                                     f"{label('train')} too")
            if "targets" in out:
                _fail("targets", f"give {label('targets')} (clicks on this cube) or {label('train')} with "
                                 f"{label('train_truth')} (targets on another scene), not both")
        if need_targets and m.uses_targets and not {"targets", "model", "target_spectra"} & set(out):
            _fail("targets", f"{method} needs {label('targets')} (training clicks), {label('target_spectra')} "
                             f"(a spectral library) or {label('model')} (a saved model)")
        _idle_detect_inputs(m, method, out, label)
        _idle_params(m, out, label)
        return out
    if "sample" in got:
        out["sample"] = _keyed("sample", sample, got["sample"], label("sample"))
    out["seed"] = _keyed("seed", seed, got.get("seed", 0), label("seed"))
    out["roi_class"] = _keyed("roi_class", roi_class, got.get("roi_class", 1), label("roi_class"))
    sel = _keyed("select", select, got["select"], label("select")) if "select" in got else None
    if sel is None:
        sel = ("objects" if "objects" in out else
               "rois" if "roi" in out and "sample" not in out else "sample")
    need = {"roi": "roi", "rois": "roi", "objects": "objects"}.get(sel)
    if need and need not in out:
        e = InputError(f"{label('select')} {sel} needs {label(need)}")
        e.key = "select"
        raise e
    if m.needs_classes and "roi" not in out:
        e = InputError(f"{method} needs classes: give {label('roi')} (a class map or ROI pixels)")
        e.key = "roi"
        raise e
    out["select"] = sel
    _idle_selection(m, method, got, out, label)
    _idle_params(m, out, label)
    return out


def _idle_detect_inputs(m, method: str, out: dict, label) -> None:
    """Refuse a detector's input that this run would drop without a word (the same class as an option given
    twice): background pixels for a method that does not learn from them, or for a saved or trained model;
    a saved model's options or library spectra; a false-alarm rate that a window detector's saved model,
    scoring without clicks, does not use."""
    given_model = "model" in out
    if "background" in out:
        if not m.uses_background:
            from hyperapp.models.registry import METHODS

            users = " and ".join(x.name for x in METHODS.values() if x.uses_background)
            _fail("background", f"{method} does not learn from background pixels (only {users} do; it estimates "
                                f"the background from every pixel but the targets): leave {label('background')} out")
        if given_model or "train" in out:
            why = "is used as it was trained" if given_model else "is trained on that scene's truth"
            _fail("background", f"the model ({label('model' if given_model else 'train')}) {why}, without "
                                f"background pixels from this cube: leave {label('background')} out")
    if given_model:
        for key in ("target_spectra", "undesired_spectra", "undesired_rois"):
            if key in out:
                _fail(key, f"a saved model ({label('model')}) scores with the targets it was trained on: "
                           f"leave {label(key)} out")
        if out["params"]:
            _fail("params", f"a saved model ({label('model')}) scores with the options it was trained with "
                            f"({', '.join(sorted(out['params']))}): leave {label('params')} out")
    # a window detector's model from a file or another scene marks its boxes without this cube's clicks: a
    # false-alarm rate would be ignored (trained on another scene, a threshold of 0 marked every pixel)
    if m.kind == "window" and "far" in out and (given_model or "train" in out):
        whose = (f"a saved {method} model without clicks marks its boxes" if given_model else
                 f"a {method} model trained on another scene ({label('train')}) marks its boxes without clicks here")
        _fail("far", f"{whose}; {label('far')} sets the threshold of an RBFN trained from clicks: give "
                     f"{label('threshold')} instead")


def _idle_params(m, out: dict, label) -> None:
    """Refuse method options the user gave that the run would not use (:attr:`Method.idle`)."""
    for key, why in m.idle_options(out["params"], out):
        _fail("params", f"{label('params')} {key} {why}: leave it out")


def _idle_selection(m, method: str, got: dict, out: dict, label) -> None:
    """Refuse selection inputs the analysis would drop without a word: an MNF fits the whole image, so it
    takes no selection; a forest trains on every pixel of its classes, so a random sample (its size, its
    seed) or the whole image adds only pixels it leaves out; the sample's size and seed are ``select =
    sample``'s, the ROI class ``select = roi``'s, the objects ``select = objects``'s. (ROIs themselves
    are read by every selection: they are the class-aware methods' classes.)"""
    sel = out["select"]
    if m.needs_image:
        chosen = [k for k in ("select", "sample", "seed", "roi_class", "objects", "roi") if k in got]
        if chosen:
            _fail(chosen[0], f"{method} is fitted on the whole image: leave {label(chosen[0])} out")
        return
    if m.needs_classes:
        for k in ("sample", "seed"):
            if k in got:
                _fail(k, f"{method} trains on every pixel of the classes ({label('roi')}), never on a random "
                         f"sample: leave {label(k)} out")
        if "select" in got and sel in ("sample", "image"):
            _fail("select", f"{method} trains on every pixel of the classes ({label('roi')}): {label('select')} "
                            f"{sel} adds only pixels it leaves out; leave {label('select')} out")
    for k, owner in (("sample", "sample"), ("seed", "sample"), ("roi_class", "roi"), ("objects", "objects")):
        if k in got and sel != owner:
            _fail(k, f"{label(k)} is for {label('select')} {owner}, and the selection is {sel}: leave "
                     f"{label(k)} out")
