"""Batch job files (TOML): what to run over which cubes, validated before any work starts.

A job names its inputs (paths and globs, relative to the job file), its steps (detectors with a saved
model or training clicks, analysis methods of the analysis path) and its output folder::

    [inputs]
    paths = ["scenes/*.hdr"]
    # dataset = "data"          # HDF5 dataset / .mat variable

    # [inputs.truth]            # a truth mask per cube: its detections' reports carry AUC and Pd
    # "scenes/scene-01.hdr" = "scenes/scene-01_truth.hdr"

    [[steps]]
    detect = "sam"
    targets = "clicks.csv"      # row,col pixels (or a mask), applied to every cube...
    # train = "scene-01.hdr"    # ...or to this cube only: the model it trains scores every cube
    # model = "sam.npz"         # or a saved model
    # far = 1e-3 / threshold = 0.9, params = { n_hidden = 8 }, background = "bg.csv"

    [[steps]]
    analyse = "kmeans"
    params = { k = "2..8" }
    # select = "sample", sample = 20000, roi = "classes.hdr"

    [output]
    folder = "out"

Every problem is a :class:`~hyperapp.errors.InputError` naming the file, the key and what is wrong.
"""

from __future__ import annotations

import glob
import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hyperapp.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DETECT_KEYS = {"detect", "targets", "background", "train", "model", "params", "far", "threshold", "bands", "name"}
ANALYSE_KEYS = {"analyse", "params", "select", "sample", "seed", "roi", "bands", "name"}


@dataclass
class Step:
    """One step: ``kind`` "detect" or "analyse", the method, and its settings (paths absolute)."""

    kind: str
    method: str
    name: str
    params: dict = field(default_factory=dict)
    targets: str | None = None
    background: str | None = None
    train: str | None = None
    model: str | None = None
    far: float | None = None
    threshold: float | None = None
    select: str | None = None
    sample: int | None = None
    seed: int = 0
    roi: str | None = None
    bands: str | None = None


@dataclass
class Job:
    path: str
    inputs: list[str]
    dataset: str | None
    steps: list[Step]
    output: str
    #: absolute cube path -> its truth mask (absolute)
    truth: dict[str, str] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """A hash of the steps' settings (and the truth masks): a finished cube is redone when they change."""
        blob = json.dumps([asdict(s) for s in self.steps] + ([self.truth] if self.truth else []),
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _err(path: Path, key: str, what: str) -> InputError:
    return InputError(f"[{key}] {what}", path)


def _expect(path, key, value, types, what):
    if not isinstance(value, types):
        raise _err(path, key, f"must be {what}, got {type(value).__name__} {value!r}")
    return value


def load_job(path: str | Path) -> Job:
    """Read and check a job file; every relative path is taken from the job file's folder."""
    from hyperapp.models.registry import ANALYSES, METHODS

    p = Path(path)
    if not p.is_file():
        raise InputError("job file not found", p)
    try:
        d = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid TOML: {exc}", p) from exc
    base = p.resolve().parent
    unknown = set(d) - {"inputs", "steps", "output"}
    if unknown:
        raise _err(p, sorted(unknown)[0], "unknown section; a job has [inputs], [[steps]] and [output]")

    def rel(v, key):
        _expect(p, key, v, str, "a path (text)")
        return str((base / v).resolve()) if not Path(v).is_absolute() else v

    inp = _expect(p, "inputs", d.get("inputs"), dict, "a table: [inputs] paths = [...]")
    pats = inp.get("paths")
    if isinstance(pats, str):
        pats = [pats]
    _expect(p, "inputs.paths", pats, list, "a list of paths or globs")
    files: list[str] = []
    for i, pat in enumerate(pats):
        full = rel(pat, f"inputs.paths[{i}]")
        hits = sorted(glob.glob(full)) if any(ch in pat for ch in "*?[") else ([full] if Path(full).exists() else [])
        if not hits:
            raise _err(p, f"inputs.paths[{i}]", f"{pat!r} matches no file")
        files.extend(h for h in hits if not h.lower().endswith((".img", ".raw", ".dat")) or
                     not Path(h).with_suffix(".hdr").exists())
    files = list(dict.fromkeys(files))  # each cube once, in order
    dataset = inp.get("dataset")
    if dataset is not None:
        _expect(p, "inputs.dataset", dataset, str, "a dataset name")
    truth: dict[str, str] = {}
    for cube_rel, truth_rel in _expect(p, "inputs.truth", inp.get("truth", {}), dict,
                                       "a table: [inputs.truth] \"CUBE\" = \"TRUTH MASK\"").items():
        cube_abs, truth_abs = rel(cube_rel, "inputs.truth"), rel(truth_rel, f"inputs.truth.{cube_rel}")
        if not Path(truth_abs).exists():
            raise _err(p, f"inputs.truth.{cube_rel}", f"{truth_rel!r} not found")
        if cube_abs not in files:
            raise _err(p, f"inputs.truth.{cube_rel}", "names a cube that is not among the inputs")
        if truth_abs in files:
            raise _err(p, "inputs.paths", f"{truth_rel!r} is a truth mask, not a cube: leave it out of the inputs")
        truth[cube_abs] = truth_abs
    raw_steps = _expect(p, "steps", d.get("steps"), list, "a list of [[steps]] tables")
    if not raw_steps:
        raise _err(p, "steps", "the job has no step")
    steps: list[Step] = []
    for i, st in enumerate(raw_steps):
        key = f"steps[{i}]"
        _expect(p, key, st, dict, "a table")
        if ("detect" in st) == ("analyse" in st):
            raise _err(p, key, "a step has either detect = \"METHOD\" or analyse = \"METHOD\"")
        kind = "detect" if "detect" in st else "analyse"
        allowed = DETECT_KEYS if kind == "detect" else ANALYSE_KEYS
        extra = set(st) - allowed
        if extra:
            raise _err(p, f"{key}.{sorted(extra)[0]}", f"unknown key for a {kind} step; it takes "
                       f"{', '.join(sorted(allowed))}")
        method = _expect(p, f"{key}.{kind}", st[kind], str, "a method name")
        table = METHODS if kind == "detect" else ANALYSES
        if method not in table:
            raise _err(p, f"{key}.{kind}", f"unknown method {method!r}; choose one of {', '.join(table)}")
        params = _expect(p, f"{key}.params", st.get("params", {}), dict, "a table of method options")
        try:
            table[method].build(**params)
        except InputError as exc:
            raise _err(p, f"{key}.params", str(exc)) from None
        s = Step(kind, method, st.get("name") or f"{kind}-{method}" + (f"-{i}" if any(
            x.get(kind) == method for x in raw_steps[:i]) else ""), dict(params))
        for k in ("targets", "background", "train", "model", "roi"):
            if k in st:
                v = rel(st[k], f"{key}.{k}")
                if not Path(v).exists():
                    raise _err(p, f"{key}.{k}", f"{st[k]!r} not found")
                setattr(s, k, v)
        for k in ("far", "threshold"):
            if k in st:
                setattr(s, k, float(_expect(p, f"{key}.{k}", st[k], (int, float), "a number")))
        if s.far is not None and s.threshold is not None:
            raise _err(p, key, "give far or threshold, not both")
        if s.far is not None and not 0 < s.far < 1:
            raise _err(p, f"{key}.far", f"a false-alarm rate is in (0, 1), got {s.far}")
        if "select" in st:
            s.select = _expect(p, f"{key}.select", st["select"], str, "sample, image, roi or rois")
        if "sample" in st:
            s.sample = int(_expect(p, f"{key}.sample", st["sample"], int, "a pixel count"))
        if "seed" in st:
            s.seed = int(_expect(p, f"{key}.seed", st["seed"], int, "a whole number"))
        if "bands" in st:
            s.bands = str(st["bands"])
        if kind == "detect" and METHODS[method].uses_targets and not (s.targets or s.model):
            raise _err(p, key, f"{method} needs targets = \"CLICKS\" (training clicks) or model = \"SAVED\"")
        if s.train and not s.targets:
            raise _err(p, f"{key}.train", "train names the cube the clicks are on: give targets too")
        steps.append(s)
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise _err(p, "steps", "two steps share a name; give one of them name = \"...\"")
    out = _expect(p, "output", d.get("output"), dict, "a table: [output] folder = \"...\"")
    folder = rel(out.get("folder"), "output.folder") if out.get("folder") is not None else None
    if folder is None:
        raise _err(p, "output.folder", "the job needs an output folder")
    return Job(str(p), files, dataset, steps, folder, truth)


def toml_value(v) -> str:
    """A Python value as TOML (the values a job holds: text, numbers, booleans, lists, tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} to TOML")


def job_text(inputs: list[str], steps: list[dict], folder: str, dataset: str | None = None,
             truth: dict[str, str] | None = None) -> str:
    """A job file's text (the GUI's File > Save as batch job); ``truth``: cube -> truth mask."""
    lines = ["[inputs]", f"paths = {toml_value(inputs)}"]
    if dataset:
        lines.append(f"dataset = {toml_value(dataset)}")
    if truth:
        lines += ["", "[inputs.truth]"] + [f"{toml_value(c)} = {toml_value(t)}" for c, t in truth.items()]
    for st in steps:
        lines += ["", "[[steps]]"] + [f"{k} = {toml_value(v)}" for k, v in st.items() if v is not None]
    lines += ["", "[output]", f"folder = {toml_value(folder)}", ""]
    return "\n".join(lines)
