"""Saving and loading fitted models as versioned ``.npz`` files.

A saved model holds its method name, its hyperparameters (JSON), every fitted array (attributes ending
in ``_``, moved to the host) and a format version. Loading checks the version, the method and the band
count against the cube, and says which of them is wrong.
"""

from __future__ import annotations

import inspect
import io
import json
import os
from pathlib import Path

import numpy as np

from hyperapp import __version__
from hyperapp.core.backend import to_host
from hyperapp.core.errors import HyperappError, InputError, ModelError
from hyperapp.models.mlp import TansigMLP
from hyperapp.models.mnf import MNF
from hyperapp.models.stats import BackgroundStats

NESTED = (TansigMLP, MNF)
#: value objects saved as their defining arrays and rebuilt from them (``stats_`` of ACE, MF, RX, ...)
VALUE_OBJECTS = {BackgroundStats: (("mean", "cov"), ("n",))}

FORMAT = "hyperapp-model"
FORMAT_VERSION = 1


def save_model(model, path: str | os.PathLike, method: str) -> Path:
    """Write ``model`` to ``path`` (``.npz``) atomically."""
    from hyperapp.io.atomic import atomic_write_bytes

    check_savable(method, hasattr(model, "detector_"), isinstance(getattr(model, "estimators_", None), list), path)
    arrays, scalars, nested = {}, {}, {}
    for k, v in vars(model).items():
        if not k.endswith("_") or k.startswith("_"):
            continue
        if hasattr(v, "shape"):
            arrays[k] = to_host(v)
        elif type(v) in VALUE_OBJECTS:  # background statistics: mean, covariance and count
            arr_names, scalar_names = VALUE_OBJECTS[type(v)]
            for a in arr_names:
                arrays[f"{k}.{a}"] = to_host(getattr(v, a))
            nested[k] = {"class": type(v).__name__, "value": {a: int(getattr(v, a)) for a in scalar_names}}
        elif isinstance(v, NESTED):  # a fitted sub-network (the FFBP's ANN-1 and ANN-2)
            sub_scalars = {}
            for sk, sv in vars(v).items():
                if sk.endswith("_") and hasattr(sv, "shape"):
                    arrays[f"{k}.{sk}"] = to_host(sv)
                elif sk.endswith("_"):
                    sub_scalars[sk] = sv.item() if hasattr(sv, "item") else sv
            params = {p: getattr(v, p) for p in inspect.signature(type(v).__init__).parameters if p != "self"}
            nested[k] = {"class": type(v).__name__, "params": params, "scalars": sub_scalars}
        else:
            scalars[k] = v.item() if hasattr(v, "item") else v
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "hyperapp": __version__, "method": method,
            "class": type(model).__name__, "params": model.get_params(), "scalars": scalars, "nested": nested}
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    p = model_path(path)
    atomic_write_bytes(p, buf.getvalue())
    return p


def check_savable(method: str, mnf: bool, several_targets: bool, path: str | os.PathLike) -> None:
    """A :class:`ModelError` where a model of ``method`` cannot be saved: one fitted in MNF space, or to
    several library targets (known from the run's options, so the CLI refuses before any work)."""
    if mnf:
        raise ModelError(f"a {method} model fitted in MNF space cannot be saved yet: run it without --mnf to save it",
                         path)
    if several_targets:
        raise ModelError(f"a {method} model fitted to several library targets cannot be saved: run it with one "
                         "target spectrum (--spectra NAME) to save it", path)


def model_path(path: str | os.PathLike) -> Path:
    """The file :func:`save_model` writes for ``path``: ``.npz`` added to a name without an extension (which
    ``--model`` then takes); a name with another extension (``x.img``, ``x.hdr``) is refused, naming it: a
    model is no image, and ``x.img.npz`` written beside it would be a surprise."""
    p = Path(path)
    if p.suffix.lower() == ".npz":
        return p
    if p.suffix and not p.suffix[1:].isdigit():  # "run.1" keeps its numbered name
        raise InputError(f"a model file ends in .npz, not {p.suffix}: name it {p.with_suffix('.npz').name}", p)
    return p.with_name(p.name + ".npz")


def fitted_bands(model) -> int | None:
    """The band count a fitted model scores: ``n_bands_`` where the model keeps it, else the length of
    its fitted spectra (a target, a mean, a whitening), as the classic detectors hold them; None where
    nothing says. (Checked on loading, so that a model for another cube is refused naming its file:
    ACE and RX models were refused only when scoring, with a line naming neither file.)"""
    nb = getattr(model, "n_bands_", None)
    if nb is not None:
        return int(nb)
    for name in ("target_", "t_", "mu_", "w_", "W_", "Cinv_", "mean_"):
        a = getattr(model, name, None)
        if a is not None and getattr(a, "ndim", 0) >= 1:
            return int(a.shape[-1])
    return None


def load_model(path: str | os.PathLike, n_bands: int | None = None, method: str | None = None):
    """Read a model saved by :func:`save_model`; check it fits ``n_bands`` and ``method``."""
    from hyperapp.io.masks import need_file
    from hyperapp.models.registry import get_method

    p = need_file(path, "model file")
    try:
        with np.load(p, allow_pickle=False) as z:
            meta = json.loads(bytes(z["__meta__"]).decode())
            arrays = {k: z[k] for k in z.files if k != "__meta__"}
    except Exception as exc:
        # what the file holds instead, in a few words (NumPy's own text advises loading pickles unsafely)
        text = str(exc)
        if "Object arrays" in text:
            why = "it holds Python objects, which hyperapp never loads"
        elif "pickle" in text:  # neither .npy nor .npz: NumPy took it for a pickle
            why = "not a NumPy .npz archive"
        elif isinstance(exc, KeyError) and "__meta__" in text:
            why = "a NumPy archive without hyperapp's model description: saved by another program?"
        else:
            why = f"{exc.__class__.__name__}: {text.splitlines()[0][:120] if text else ''}"
        raise ModelError(f"not a hyperapp model file ({why})", p) from exc
    try:
        if meta.get("format") != FORMAT:
            raise ModelError("not a hyperapp model file", p)
        if meta.get("format_version", 0) > FORMAT_VERSION:
            raise ModelError(f"model format {meta['format_version']} is newer than this hyperapp reads "
                             f"({FORMAT_VERSION}); upgrade hyperapp", p)
        if method is not None and meta["method"] != method:
            raise ModelError(f"the model is a {meta['method']} model, not {method}", p)
        model = get_method(meta["method"]).build(**meta["params"])
        values = {c.__name__: c for c in VALUE_OBJECTS}
        for k, spec in meta.get("nested", {}).items():
            if spec["class"] in values:
                cls = values[spec["class"]]
                fields = {a: arrays.pop(f"{k}.{a}") for a in VALUE_OBJECTS[cls][0]}
                setattr(model, k, cls(**fields, **spec["value"]))
                continue
            cls = {c.__name__: c for c in NESTED}.get(spec["class"])
            if cls is None:
                raise ModelError(f"unknown sub-model class {spec['class']!r}", p)
            sub = cls(**spec["params"])
            for sk, sv in spec["scalars"].items():
                setattr(sub, sk, sv)
            setattr(model, k, sub)
        for k, v in arrays.items():
            if "." in k:
                owner, sk = k.split(".", 1)
                setattr(getattr(model, owner), sk, v)
            else:
                setattr(model, k, v)
        for k, v in meta["scalars"].items():
            setattr(model, k, v)
    except HyperappError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ModelError(f"not a usable hyperapp model file ({exc.__class__.__name__}: {exc})", p) from exc
    nb = fitted_bands(model)
    if n_bands is not None and nb is not None and int(nb) != int(n_bands):
        raise ModelError(f"the model was trained on {nb} bands, the cube has {n_bands}", p)
    return model
