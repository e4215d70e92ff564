"""A run's request: what one detection or analysis asks for, in one shape for every front end.

The CLI's options, a job step's keys and the window's fields all name the same settings: the
:data:`VOCABULARY` maps each request key to its command-line option, its job key and the window's
words (the one translator of names, used by messages too). :meth:`DetectRequest.from_mapping` builds a
request from any front end's values and checks it once (:meth:`DetectRequest.check`: types, ranges,
files that must exist, combinations a run would refuse or drop without a word); :meth:`to_dict` and
:meth:`from_dict` are what a job step and a project file hold. Nothing here reads pixels or imports Qt.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import ClassVar

from hyperapp.core import values
from hyperapp.core.errors import InputError
from hyperapp.request import checks

#: the front ends that name a request's keys
FRONTS = ("cli", "job", "window")


@dataclass(frozen=True)
class Word:
    """How each front end names one request key: the CLI's option, a job step's key (None: a step does
    not take it) and the window's words."""

    cli: str
    job: str | None
    window: str


def _word(key: str, window: str, cli: str | None = None, job: str | None | bool = True) -> Word:
    return Word(cli or "--" + key.replace("_", "-"), key if job is True else (job or None), window)


#: every request key and how the CLI, a job and the window name it
VOCABULARY: dict[str, Word] = {
    "method": _word("method", "the method", job=False),  # a job step: detect = "..." / analyse = "..."
    "params": _word("params", "the method's options", cli="--param"),
    "device": _word("device", "the device", job=False),  # a job: the run's --device
    "memory": _word("memory", "the memory budget", job=False),  # a job: the run's --memory
    "bands": _word("bands", "the bands"),
    "all_bands": _word("all_bands", "Keep bad bands"),
    # detect
    "far": _word("far", "the false-alarm rate"),
    "threshold": _word("threshold", "the threshold"),
    "targets": _word("targets", "the target clicks"),
    "background": _word("background", "the background clicks"),
    "truth": _word("truth", "the truth mask", job=False),  # a job: [inputs.truth]
    "truth_var": _word("truth_var", "the truth's variable", job=False),
    "model": _word("model", "the saved model"),
    "train": _word("train", "the training scene", cli="--train-from"),
    # a job step's targets are the training scene's when it has train
    "train_truth": _word("train_truth", "the training scene's targets", job="targets"),
    "target_spectra": _word("target_spectra", "the library's target spectra"),
    "spectra": _word("spectra", "the library's target names"),
    "undesired_spectra": _word("undesired_spectra", "the library's undesired spectra"),
    "undesired_names": _word("undesired_names", "the library's undesired names"),
    "undesired_rois": _word("undesired_rois", "the undesired ROI classes", job=False),
    "mnf": _word("mnf", "MNF components"),
    "clump": _word("clump", "Clump"),
    "sieve": _word("sieve", "Sieve"),
    "connectivity": _word("connectivity", "Connectivity"),
    "continuum_removed": _word("continuum_removed", "Continuum removed"),
    # analyse
    "select": _word("select", "the selection"),
    "sample": _word("sample", "the sample size"),
    "seed": _word("seed", "the sample's seed"),
    "roi": _word("roi", "the ROI classes", cli="--roi"),
    "roi_class": _word("roi_class", "the ROI class"),
    "objects": _word("objects", "the detection mask", job=False),  # a job has no detection mask
}


def labeller(front: str):
    """``key -> words`` for messages: how ``front`` ("cli", "job" or "window") names each request key."""
    if front not in FRONTS:
        raise ValueError(f"front must be one of {FRONTS}, got {front!r}")

    def label(key: str) -> str:
        w = VOCABULARY.get(key)
        if w is None:
            return key
        return {"cli": w.cli, "job": w.job or key, "window": w.window}[front]

    return label


def job_keys(kind: str) -> set[str]:
    """The keys a job step of ``kind`` ("detect" or "analyse") takes (besides ``name``)."""
    cls = DetectRequest if kind == "detect" else AnalyseRequest
    return {kind} | {VOCABULARY[f.name].job for f in fields(cls) if VOCABULARY[f.name].job}


def _given(v) -> bool:
    return v is not None and not (isinstance(v, (list, tuple)) and not v)


@dataclass(frozen=True)
class _Request:
    """What :class:`DetectRequest` and :class:`AnalyseRequest` share: the method and its options, where it
    runs and on which bands (their first fields), building, dicts, copies."""

    kind: ClassVar[str]

    method: str
    params: dict = field(default_factory=dict)
    device: str = "auto"
    memory: float | None = None
    bands: str | None = None
    all_bands: bool = False

    @classmethod
    def _translate(cls, mapping: dict, front: str) -> dict:
        """``mapping`` (a front end's names) as request keys, values as given; None values dropped."""
        raw = dict(mapping)
        if front == "job":
            if cls.kind in raw:
                raw["method"] = raw.pop(cls.kind)
            if cls.kind == "detect" and _given(raw.get("train")) and "train_truth" not in raw:
                if "targets" in raw:  # a training step's targets are its scene's
                    raw["train_truth"] = raw.pop("targets")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(raw) - known)
        if extra:
            label = labeller(front)
            raise InputError(f"a {cls.kind} run takes no {label(extra[0])}")
        return {k: v for k, v in raw.items() if v is not None}

    @classmethod
    def from_mapping(cls, mapping: dict, front: str = "job", *, need_targets: bool = True):
        """The checked request of ``mapping``: a front end's values under its names (a job step's
        ``detect``/``analyse`` is the method; else the request's keys), checked as :meth:`check` does."""
        raw = cls._translate(mapping, front)
        if "method" not in raw:
            raise InputError(f"a {cls.kind} run needs {labeller(front)('method')}")
        return cls._checked(raw, labeller(front), need_targets)

    def check(self, front: str = "job", *, need_targets: bool = True):
        """This request checked and converted (``"1e-3"`` -> 0.001): a new request, or an
        :class:`~hyperapp.core.errors.InputError` naming the setting as ``front`` names it (its ``key``
        attribute is the request key)."""
        return type(self)._checked(self.to_dict(defaults=False), labeller(front), need_targets)

    def to_dict(self, defaults: bool = True) -> dict:
        """The request as JSON and TOML take it (tuples as lists); ``defaults=False`` leaves out the keys at
        their default."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if not defaults and f.name != "method" and v == _default(f):
                continue
            out[f.name] = _plain(v)
        return out

    @classmethod
    def from_dict(cls, d: dict):
        """The request :meth:`to_dict` gave (not checked again: :meth:`check` does that)."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise InputError(f"a stored {cls.kind} request has an unknown key {extra[0]!r}")
        return cls(**{k: _frozen(k, v) for k, v in d.items()})

    def replace(self, **changes):
        """A copy with ``changes`` (not checked again)."""
        return replace(self, **changes)

    def job_table(self) -> dict:
        """This request as a job step's table: ``detect``/``analyse`` = method, then each key a step takes
        that is not at its default, under its job name."""
        out = {self.kind: self.method}
        for k, v in self.to_dict(defaults=False).items():
            w = VOCABULARY[k].job
            if k != "method" and w:
                out[w] = v
        return out


def _default(f):
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _plain(v):
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _frozen(key: str, v):
    if key in ("undesired_spectra", "sieve") and isinstance(v, list):
        return tuple(v)
    return v


@dataclass(frozen=True)
class DetectRequest(_Request):
    """One detection run: the method and its options, where it runs, how it thresholds, its inputs
    (files: clicks, truth, saved model, training scene, spectral libraries), MNF and the target filters."""

    kind: ClassVar[str] = "detect"

    far: float | None = None
    threshold: float | None = None
    targets: str | None = None
    background: str | None = None
    truth: str | None = None
    truth_var: str | None = None
    model: str | None = None
    train: str | None = None
    train_truth: str | None = None
    target_spectra: str | None = None
    spectra: str | None = None
    undesired_spectra: tuple = ()
    undesired_names: str | None = None
    undesired_rois: str | None = None
    mnf: int | None = None
    clump: int = 0
    sieve: tuple | None = None
    connectivity: int = 8
    continuum_removed: bool = False

    @property
    def filters(self) -> dict:
        """The target filter's settings (:func:`hyperapp.models.postprocess.filter_mask`); {} when it is off."""
        if not self.clump and self.sieve is None and self.connectivity == 8:
            return {}
        return {"clump": self.clump, "sieve": self.sieve, "connectivity": self.connectivity}

    @classmethod
    def _checked(cls, got: dict, label, need_targets: bool) -> DetectRequest:
        from hyperapp.models.registry import get_method

        method = checks._keyed("method", values.text, got["method"], label("method"), (), "a method name")
        method = method.strip().lower()
        m = checks._keyed("method", get_method, method)
        out: dict = {"method": method}
        _common(out, got, m, label)
        if "far" in got and "threshold" in got:
            checks._fail("far", f"give {label('far')} or {label('threshold')}, not both")
        for key, parse in (("far", values.far), ("threshold", values.threshold)):
            if key in got:
                out[key] = checks._keyed(key, parse, got[key], label(key))
        if "memory" in got:
            out["memory"] = checks._keyed("memory", values.memory, got["memory"], label("memory"))
        if "truth_var" in got:
            out["truth_var"] = checks._keyed("truth_var", values.text, got["truth_var"], label("truth_var"))
            if "truth" not in out:
                checks._fail("truth_var", f"{label('truth_var')} names the truth's variable in a .mat file: give "
                                          f"{label('truth')} too")
        checks.signature_settings(m, method, got, out, label)
        _filter_settings(m, method, got, out, label)
        if "train" in out and "model" in out:
            checks._fail("train", f"give {label('train')} (a scene to train on) or {label('model')} (a saved "
                                  "model), not both")
        if "model" in out and "targets" in out:
            checks._fail("targets", f"give {label('model')} (a saved model scores the cube) or {label('targets')} "
                                    "(clicks to train on), not both")
        if "train_truth" in out:
            if "train" not in out:
                checks._fail("train_truth", f"{label('train_truth')} marks the targets of {label('train')}: give "
                                            f"{label('train')} too")
            if "targets" in out:
                checks._fail("targets", f"give {label('targets')} (clicks on this cube) or {label('train')} with "
                                        f"{label('train_truth')} (targets on another scene), not both")
        if "train" in out and "train_truth" not in out:
            checks._fail("train", f"{label('train')} needs {label('train_truth')} (the training scene's targets: a "
                                  "truth mask or clicks)")
        if need_targets and m.uses_targets and not {"targets", "model", "target_spectra", "train"} & set(out):
            if m.kind == "window":
                checks._fail("targets", f"{method} needs a model: {label('model')} FILE, {label('train')} SCENE "
                                        f"{label('train_truth')} MASK, or {label('targets')} marking the targets "
                                        "of this scene")
            checks._fail("targets", f"{method} needs {label('targets')} (training clicks), "
                                    f"{label('target_spectra')} (a spectral library) or {label('model')} (a saved "
                                    "model)")
        checks.idle_detect_inputs(m, method, out, label)
        checks.idle_params(m, out, label)
        return cls.from_dict(out)


@dataclass(frozen=True)
class AnalyseRequest(_Request):
    """One analysis run: the method and its options, where it runs, the bands, and which spectra it fits
    on (a random sample, the image, ROI pixels, the objects of a detection mask)."""

    kind: ClassVar[str] = "analyse"

    select: str = "sample"
    sample: int = values.DEFAULT_SAMPLE
    seed: int = 0
    roi: str | None = None
    roi_class: int = 1
    objects: str | None = None

    @classmethod
    def _checked(cls, got: dict, label, need_targets: bool = True) -> AnalyseRequest:
        from hyperapp.models.registry import get_analysis

        method = checks._keyed("method", values.text, got["method"], label("method"), (), "a method name")
        method = method.strip().lower()
        m = checks._keyed("method", get_analysis, method)
        out: dict = {"method": method}
        _common(out, got, m, label)
        if "memory" in got:
            out["memory"] = checks._keyed("memory", values.memory, got["memory"], label("memory"))
        if "sample" in got:
            out["sample"] = checks._keyed("sample", values.sample, got["sample"], label("sample"))
        out["seed"] = checks._keyed("seed", values.seed, got.get("seed", 0), label("seed"))
        out["roi_class"] = checks._keyed("roi_class", values.roi_class, got.get("roi_class", 1), label("roi_class"))
        sel = checks._keyed("select", values.select, got["select"], label("select")) if "select" in got else None
        if sel is None:
            sel = ("objects" if "objects" in out else
                   "rois" if "roi" in out and "sample" not in out else "sample")
        need = {"roi": "roi", "rois": "roi", "objects": "objects"}.get(sel)
        if need and need not in out:
            checks._fail("select", f"{label('select')} {sel} needs {label(need)}")
        if m.needs_classes and "roi" not in out:
            checks._fail("roi", f"{method} needs classes: give {label('roi')} (a class map or ROI pixels)")
        out["select"] = sel
        checks.idle_selection(m, method, got, out, label)
        checks.idle_params(m, out, label)
        return cls.from_dict(out)


def _common(out: dict, got: dict, m, label) -> None:
    """The keys every run has: options, device, bands, and the files it names (each must exist)."""
    from hyperapp.io.masks import need_file

    out["params"] = checks._keyed("params", m.check_params, got.get("params", {}))
    if "device" in got:
        out["device"] = checks._keyed("device", values.text, got["device"], label("device"), ("auto", "gpu", "cpu"))
    for key, what in checks.FILES.items():
        if key in got:
            p = checks._keyed(key, values.text, got[key], label(key), (), "a path (text)")
            checks._keyed(key, need_file, p, what)
            out[key] = p
    if "bands" in got:
        out["bands"] = checks._keyed("bands", values.band_spec, got["bands"], label("bands"))
    out["all_bands"] = checks._keyed("all_bands", values.flag, got.get("all_bands", False), label("all_bands"))


def _filter_settings(m, method: str, got: dict, out: dict, label) -> None:
    """The target filter (clump, sieve, connectivity) and continuum removal, checked into ``out``."""
    from hyperapp.models.postprocess import parse_clump, parse_connectivity, parse_sieve

    for key, parse in (("clump", parse_clump), ("sieve", parse_sieve), ("connectivity", parse_connectivity)):
        if key in got:
            v = checks._keyed(key, parse, got[key], label(key))
            if v is not None:
                out[key] = v
    if "continuum_removed" in got:
        out["continuum_removed"] = checks._keyed("continuum_removed", values.flag, got["continuum_removed"],
                                                 label("continuum_removed"))
        if out["continuum_removed"] and m.kind != "pixel":
            checks._fail("continuum_removed", f"{label('continuum_removed')} runs a pixel detector on continuum-removed "
                                              f"spectra; {method} is not a pixel detector")
        if out["continuum_removed"] and ("model" in out or "train" in out):
            which = "model" if "model" in out else "train"
            checks._fail("continuum_removed", f"a model from {label(which)} scores as it was trained: give "
                                              f"{label('continuum_removed')} or {label(which)}, not both")
