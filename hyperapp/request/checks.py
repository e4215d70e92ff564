"""The method-aware checks a request makes (:meth:`hyperapp.request.requests.DetectRequest.check`).

The value parsers are :mod:`hyperapp.core.values` (re-exported here for the services); this module adds
what depends on the method: its input files, library settings, and the inputs or options a run would
drop without a word.
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


# ------------------------------------------------------------------ what a request's check uses
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
    under the key ``undesired``, None when there are none)."""
    from hyperapp.models.registry import get_method

    m = _keyed("detect", get_method, method)
    if targets and not m.uses_targets:
        _fail("target_spectra", f"method {method} takes no target: drop {label('target_spectra')}")
    if targets and m.kind != "pixel":
        _fail("target_spectra", library_window_error(method, label("target_spectra")))
    if undesired and not m.uses_undesired:
        _fail(undesired, f"method {method} does not use undesired signatures; OSP, TCIMF, MTTCIMF and the RBFN do")


def signature_settings(m, method: str, got: dict, out: dict, label) -> None:
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


def idle_detect_inputs(m, method: str, out: dict, label) -> None:
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


def idle_params(m, out: dict, label) -> None:
    """Refuse method options the user gave that the run would not use (:attr:`Method.idle`)."""
    for key, why in m.idle_options(out["params"], out):
        _fail("params", f"{label('params')} {key} {why}: leave it out")


def idle_selection(m, method: str, got: dict, out: dict, label) -> None:
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
