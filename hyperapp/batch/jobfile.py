"""Batch job files (TOML): what to run over which cubes, validated before any work starts.

A job names its inputs (paths and globs, relative to the job file), its steps (detectors with a saved
model or training clicks, analysis methods of the analysis path) and its output folder::

    [inputs]
    paths = ["scenes/*.hdr"]
    # dataset = "data"          # HDF5 dataset / .mat variable
    # band_axis = 0             # the stored axis holding the bands of generic HDF5/NetCDF inputs that do not say

    # [inputs.truth]            # a truth mask per cube: its detections' reports carry AUC and Pd
    # "scenes/scene-01.hdr" = "scenes/scene-01_truth.hdr"

    [[steps]]
    detect = "sam"
    targets = "clicks.csv"      # row,col pixels (or a mask), applied to every cube...
    # train = "scene-01.hdr"    # ...or to this cube only: the model it trains scores every cube
    # model = "sam.npz"         # or a saved model
    # far = 1e-3 / threshold = 0.9, params = { n_hidden = 8 }, background = "bg.csv"
    # target_spectra = "lib.sli", spectra = "name,name", undesired_spectra = ["soils.sli"]: no clicks

    [[steps]]
    analyse = "kmeans"
    params = { k = "2..8" }
    # select = "sample", sample = 20000, roi = "classes.hdr", roi_class = 1
    # every step: bands = "3,17,40", all_bands = true (keep the header's bad bands), name = "folder-name"

    [output]
    folder = "out"

Every problem is a :class:`~hyperapp.core.errors.InputError` naming the file, the key and what is wrong, found
by the checks the CLI's options go through (:meth:`hyperapp.request.DetectRequest.check`): a step is a
request (:class:`Step`).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hyperapp.core.errors import HyperappError, InputError
from hyperapp.request import AnalyseRequest, DetectRequest, job_keys, labeller

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the keys a step takes: the request's, as a job names them (:data:`hyperapp.request.VOCABULARY`), and its name
DETECT_KEYS = job_keys("detect") | {"name"}
ANALYSE_KEYS = job_keys("analyse") | {"name"}
#: the selections a job step can make (a job has no detection mask to take ``objects`` from)
JOB_SELECTIONS = ("sample", "image", "roi", "rois")
#: data files of an ENVI pair: left out of a glob when their header is matched too
_DATA_SUFFIXES = (".img", ".raw", ".dat", ".bsq", ".bil", ".bip")


@dataclass
class Step:
    """One step: ``kind`` "detect" or "analyse", its output folder's ``name``, and its request (paths
    absolute; the run's device and memory are the batch run's)."""

    kind: str
    name: str
    request: DetectRequest | AnalyseRequest

    @property
    def method(self) -> str:
        return self.request.method

    def to_dict(self) -> dict:
        """The step as plain values (what a Dask worker and the fingerprint take)."""
        return {"kind": self.kind, "name": self.name, "request": self.request.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> Step:
        req = (DetectRequest if d["kind"] == "detect" else AnalyseRequest).from_dict(d["request"])
        return cls(d["kind"], d["name"], req)

    def library_kwargs(self, cube, libraries=None) -> dict:
        """``run_detection`` arguments for this step's library targets and undesired signatures on
        ``cube`` (resampled to its bands; by ``libraries``, a
        :class:`~hyperapp.io.speclib.ResampledLibraries`, once for many cubes); empty when the step names none."""
        from hyperapp.io.signatures import signature_kwargs

        r = self.request
        return signature_kwargs(cube, r.target_spectra, r.spectra, r.undesired_spectra, r.undesired_names,
                                libraries=libraries)

    def fingerprint(self) -> str:
        """A hash of this step's settings: its output is redone when they change."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class Job:
    path: str
    inputs: list[str]
    dataset: str | None
    steps: list[Step]
    output: str
    #: each input's output subfolder name (its file name's stem; made unique where two share one)
    folders: dict[str, str] = field(default_factory=dict)
    #: absolute cube path -> its truth mask (absolute)
    truth: dict[str, str] = field(default_factory=dict)
    #: files the inputs' paths matched that are not cubes (masks, tables, images) -> why each was left out
    skipped: dict[str, str] = field(default_factory=dict)
    #: inputs left out as the same file as one listed before (the path again, or a link to it)
    twice: list[str] = field(default_factory=list)
    #: the stored axis holding the bands of generic HDF5/NetCDF inputs (``band_axis``), where they do not say
    band_axis: int | None = None

    def fingerprint(self) -> str:
        """A hash of the steps' settings (and the truth masks): a finished cube is redone when they change."""
        blob = json.dumps([s.to_dict() for s in self.steps] + ([self.truth] if self.truth else []),
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def step_fingerprints(self) -> dict[str, str]:
        """Each step's name and the hash of its settings (a detect step's with the truth masks too: its
        report's AUC and Pd come from them)."""
        out = {}
        for s in self.steps:
            fp = s.fingerprint()
            if self.truth and s.kind == "detect":
                blob = json.dumps([fp, self.truth], sort_keys=True)
                fp = hashlib.sha256(blob.encode()).hexdigest()[:16]
            out[s.name] = fp
        return out

    def folder_of(self, cube: str) -> str:
        """The output subfolder (a name, not a path) of input ``cube``."""
        return self.folders.get(cube) or Path(cube).stem


#: a job's output folder's own files: the manifest, the log, the trained models' folder
MANIFEST, LOG, MODELS, LOCK = "manifest.json", "hyperapp-batch.log", ".models", ".hyperapp-run.lock"
#: names no cube's output folder may take
RESERVED_NAMES = (MANIFEST, LOG, MODELS, LOCK)


def _own_output(table, base: Path) -> Path | None:
    """The job's output folder, resolved, where ``[output]`` names one at all (its checks come later,
    in their turn); None otherwise."""
    folder = table.get("folder") if isinstance(table, dict) else None
    if not isinstance(folder, str) or not folder.strip() or "\0" in folder:
        return None
    try:
        return (base / folder).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def output_names(inputs: list[str]) -> dict[str, str]:
    """One output folder name per input: its file name's stem, or where two inputs share a stem (in any
    case: folders on case-insensitive disks), their paths below the folder they share, joined with
    ``-``; any name still taken, or one of the run's own files' (:data:`RESERVED_NAMES`), gets ``-2``,
    ``-3``... Deterministic for a given list of inputs."""
    from collections import defaultdict

    stems: dict[str, list[str]] = defaultdict(list)
    for c in inputs:
        stems[Path(c).stem.casefold()].append(c)
    names: dict[str, str] = {}
    for group in stems.values():
        if len(group) == 1:
            names[group[0]] = Path(group[0]).stem
            continue
        common = os.path.commonpath([str(Path(c).parent) for c in group])
        rel = {c: Path(os.path.relpath(c, common)) for c in group}
        plain = {c: "-".join((*r.parent.parts, r.stem)) for c, r in rel.items()}
        if len({v.casefold() for v in plain.values()}) < len(group):  # same folder: x.hdr and x.h5
            plain = {c: "-".join((*r.parent.parts, r.name)) for c, r in rel.items()}
        names.update(plain)
    taken: set[str] = {r.casefold() for r in RESERVED_NAMES}
    for c in inputs:
        n, base, i = names[c], names[c], 1
        while n.casefold() in taken:
            i += 1
            n = f"{base}-{i}"
        taken.add(n.casefold())
        names[c] = n
    return names


def _err(path: Path, key: str, what: str) -> InputError:
    return InputError(f"[{key}] {what}", path)


def _expect(path, key, value, types, what):
    if value is None:  # (said "got NoneType None" of a section left out)
        raise _err(path, key, f"is missing: it must be {what}")
    if not isinstance(value, types):
        raise _err(path, key, f"must be {what}, got {type(value).__name__} {value!r}")
    return value


def is_class_file(path: str) -> bool:
    """Whether ``path`` is an ENVI classification file (``file type = ENVI Classification`` in its
    header, as truth and detection masks and class maps are written): a mask, never a cube."""
    from hyperapp.io.envi import read_header

    hdr = Path(path).with_suffix(".hdr")
    if not hdr.is_file():
        return False
    try:
        return "classification" in str(read_header(hdr).get("file type", "")).lower()
    except HyperappError:  # a broken header is the cube's own failure when it runs
        return False


class _Reads:
    """The job checks' reads, each done once: cube headers (:func:`hyperapp.io.open_cube`, no pixels) and
    masks on an image size. A read that fails raises its error again each time it is asked for."""

    def __init__(self, dataset: str | None, band_axis: int | None = None):
        self.dataset = dataset
        self.band_axis = band_axis
        self._done: dict = {}

    def _once(self, key, read):
        if key not in self._done:
            try:
                self._done[key] = read()
            except HyperappError as exc:
                self._done[key] = exc
        got = self._done[key]
        if isinstance(got, HyperappError):
            raise got
        return got

    def cube(self, path: str):
        from hyperapp.io import open_cube

        return self._once(("cube", path), lambda: open_cube(path, self.dataset, self.band_axis))

    def mask(self, path: str, shape: tuple[int, int], reader=None):
        """``reader(path, shape)`` (:func:`hyperapp.io.read_labels` by default)."""
        from hyperapp.io import read_labels

        reader = reader or read_labels
        return self._once((reader, path, shape), lambda: reader(path, shape))


def _check_train_bands(p: Path, steps: list, files: list[str], reads: _Reads) -> None:
    """Each ``train`` scene against every input's header, on the step's bands as the run takes them: a
    model trained on another band count could score no cube. Headers only; an input that cannot be
    opened fails alone when it runs."""
    for i, step in enumerate(steps):
        s = step.request
        if step.kind != "detect" or not s.train:
            continue
        key = f"steps[{i}].train"
        try:
            n = reads.cube(s.train).run_bands(s.all_bands, s.bands, "bands").bands
        except HyperappError as exc:
            raise _err(p, key, str(exc)) from None
        for f in files:
            try:
                count = reads.cube(f).run_bands(s.all_bands, s.bands, "bands").bands
            except HyperappError:
                continue
            if count != n:
                raise _err(p, key, f"the training scene {s.train} has {n} bands on this step's bands, the input "
                           f"{f} has {count}: the model it trains could not score it")


def _check_steps_fit_some_cube(p: Path, steps: list, files: list[str], reads: _Reads,
                               truth: dict[str, str]) -> None:
    """What the job's values need of each input, checked on the inputs' headers before any work: the
    dataset, each step's bands, its pixel lists and masks on the image's size, its background against its
    targets, its ROI class, each truth against the clicks. A value that fits no input is the job's error
    (every cube would fail on it), naming the key and the first input's problem; one that fits some fails
    only the others, alone, when they run (a batch's inputs may differ). Masks are read once per distinct
    image size (:class:`_Reads`)."""
    from hyperapp.io import read_truth
    from hyperapp.io.masks import check_background, check_truth_beside_clicks, read_class_map
    from hyperapp.io.speclib import ResampledLibraries, wavelength_grid

    libraries = ResampledLibraries()
    cubes, failed = [], None
    for f in files:
        try:
            cubes.append((f, reads.cube(f)))
        except HyperappError as exc:
            failed = failed or exc
    if not cubes:  # (an input that opens alone is checked below; those that do not fail alone when run)
        raise _err(p, "inputs.dataset" if reads.dataset is not None else "inputs.paths", str(failed)) from None
    done: dict = {}

    def fits(i: int, step, cube) -> tuple[str, HyperappError] | None:
        """The first (key, problem) of step ``step`` on ``cube``, None when it fits."""
        s, detect = step.request, step.kind == "detect"
        shape = (cube.rows, cube.cols)
        checks = [("bands", lambda: cube.run_bands(s.all_bands, s.bands, "bands"))]
        if detect and s.targets:
            checks.append(("targets", lambda: reads.mask(s.targets, shape)))
        if detect and s.background:
            checks.append(("background", lambda: check_background(
                reads.mask(s.background, shape), reads.mask(s.targets, shape) if s.targets else None,
                s.background)))
        if not detect and s.roi:
            def roi_class():
                m = reads.mask(s.roi, shape, read_class_map)
                if s.select == "roi" and not (m == s.roi_class).any():
                    raise InputError(f"ROI class {s.roi_class} holds no pixels", s.roi)
            checks.append(("roi", roi_class))
        # libraries on each input's wavelengths (a library of 5-7 um against cubes of 0.4-2.5 um failed every
        # cube after the job began, exit 1); resampled once per grid (ResampledLibraries)
        on_bands = lambda: cube.run_bands(s.all_bands, s.bands, "bands")  # noqa: E731
        if detect and s.target_spectra:
            checks.append(("target_spectra", lambda: libraries(s.target_spectra, on_bands(), s.spectra)))
        for j, u in enumerate(s.undesired_spectra if detect else ()):
            checks.append((f"undesired_spectra[{j}]", lambda u=u: libraries(u, on_bands(), s.undesired_names)))
        for key, check in checks:
            memo = (i, key, shape, cube.store.shape[2]) + ((wavelength_grid(cube),) if "spectra" in key else ())
            if memo not in done:
                try:
                    check()
                    done[memo] = None
                except HyperappError as exc:
                    done[memo] = (key, exc)
            if done[memo] is not None:
                return done[memo]
        return None

    for i, s in enumerate(steps):
        problems = [fits(i, s, cube) for _, cube in cubes]
        if all(problems):
            key, exc = problems[0]
            raise _err(p, f"steps[{i}].{key}", f"fits no input: {exc} (as in {Path(cubes[0][0]).name})") from None
    marks = [s.request.targets for s in steps if s.kind == "detect" and s.request.targets]
    for cube_path, truth_path in truth.items():
        cube = dict(cubes).get(cube_path)
        if cube is None:
            continue
        shape = (cube.rows, cube.cols)
        for tg in marks:
            try:
                clicks = reads.mask(tg, shape)
            except HyperappError:
                continue
            try:
                check_truth_beside_clicks(reads.mask(truth_path, shape, read_truth), clicks, truth_path)
            except HyperappError as exc:
                raise _err(p, f"inputs.truth.{Path(cube_path).name}", str(exc)) from None


def load_job(path: str | Path) -> Job:
    """Read and check a job file, every step's values as the CLI's options are checked (a step's request,
    :meth:`hyperapp.request.DetectRequest.from_mapping`), and every file it names; relative paths are
    taken from the job file's folder."""
    from hyperapp.io.atomic import check_out_dir
    from hyperapp.io.masks import check_labels_file, need_file
    from hyperapp.request import checks as options

    if not str(path).strip():  # Path("") is "." (a folder): say what was given instead
        raise InputError("no job file given: name the job's TOML file")
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder; a job file (TOML) is needed here", p)
    if not p.is_file():
        raise InputError("job file not found", p)
    try:
        d = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # the byte-order mark some editors write, skipped
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid TOML: {exc}", p) from exc
    if not d:
        raise InputError("is empty: a job has [inputs] paths = [...], [[steps]] detect = \"METHOD\" (or analyse) "
                         "and [output] folder = \"...\"", p)
    base = p.resolve().parent
    unknown = set(d) - {"inputs", "steps", "output"}
    if unknown:
        raise _err(p, sorted(unknown)[0], "unknown section; a job has [inputs], [[steps]] and [output]")

    def rel(v, key):
        _expect(p, key, v, str, "a path (text)")
        if not v.strip() or "\0" in v:
            raise _err(p, key, f"must be a path, got {v!r}")
        return str((base / v).resolve()) if not Path(v).is_absolute() else v

    def only(table: dict, key: str, allowed: set) -> None:
        extra = set(table) - allowed
        if extra:
            raise _err(p, f"{key}.{sorted(extra)[0]}", f"unknown key; [{key}] takes {', '.join(sorted(allowed))}")

    inp = _expect(p, "inputs", d.get("inputs"), dict, "a table: [inputs] paths = [...]")
    only(inp, "inputs", {"paths", "dataset", "truth", "band_axis"})
    pats = inp.get("paths")
    if isinstance(pats, str):
        pats = [pats]
    _expect(p, "inputs.paths", pats, list, "a list of paths or globs")
    if not pats:
        raise _err(p, "inputs.paths", "lists no cube")
    from hyperapp.io import NOT_CUBES

    files: list[str] = []
    not_cubes: dict[str, str] = {}  # files a glob matched that are no cube, by their kind (left out)
    # the job's own output folder (checked as [output] folder below): a glob never takes its outputs as
    # cubes ('**/*.hdr' would take the score maps of the run before)
    own, own_hits = _own_output(d.get("output"), base), {}
    for i, pat in enumerate(pats):
        key = f"inputs.paths[{i}]"
        full = rel(pat, key)
        if any(ch in pat for ch in "*?["):
            # '**' is any depth of folders, as in a shell with globstar
            hits = [h for h in sorted(glob.glob(full, recursive=True)) if Path(h).is_file()]  # files, not folders
            mine = {h for h in hits if own is not None and Path(h).resolve().is_relative_to(own)}
            own_hits.update(dict.fromkeys(mine, "files in the job's own output folder"))
            hits = [h for h in hits if h not in mine]
            if not hits and mine:
                raise _err(p, key, f"{pat!r} matches only files in the job's own output folder")
            not_cubes.update({h: f"a {NOT_CUBES[Path(h).suffix.lower()]} file, not a cube"
                              for h in hits if Path(h).suffix.lower() in NOT_CUBES})
        elif Path(full).is_dir():
            raise _err(p, key, f"{pat!r} is a folder; name cube files (a glob like '{pat.rstrip('/')}/*.hdr' "
                       "takes a folder's cubes)")
        else:
            hits = [full] if Path(full).is_file() else []
            if hits and Path(full).suffix.lower() in NOT_CUBES:  # named as an input: a mistake, not a glob's catch
                raise _err(p, key, f"{pat!r} is a {NOT_CUBES[Path(full).suffix.lower()]} file, not a cube: a cube is "
                                   "ENVI (.hdr + data), HDF5 or MATLAB .mat")
        if not hits:
            raise _err(p, key, f"{pat!r} matches no file")
        # an ENVI data file whose header is beside it is the cube of that header
        files.extend(str(Path(h).with_suffix(".hdr")) if h.lower().endswith(_DATA_SUFFIXES) and
                     Path(h).with_suffix(".hdr").is_file() else h for h in hits)
    # each cube once, in order: a path listed twice, or a link to a file listed already, runs once, said
    seen: dict[str, str] = {}
    twice: list[str] = []
    from hyperapp.io import product_file

    for f in files:
        real = product_file(f)  # a product opened by several of its files (DESIS .tif + .hdr) runs once
        if real in seen:
            twice.append(f)
        else:
            seen[real] = f
    files = list(seen.values())
    skipped = {f: "an ENVI classification file (a mask)" for f in files if f not in not_cubes and is_class_file(f)}
    skipped.update({f: kind for f, kind in not_cubes.items() if f in files})
    skipped.update(own_hits)
    dataset = inp.get("dataset")
    if dataset is not None:
        _expect(p, "inputs.dataset", dataset, str, "a dataset name")
    band_axis = inp.get("band_axis")
    if band_axis is not None and (isinstance(band_axis, bool) or band_axis not in (0, 1, 2)):
        raise _err(p, "inputs.band_axis", f"must be 0, 1 or 2 (the stored axis holding the bands), got {band_axis!r}")
    truth: dict[str, str] = {}
    reads = _Reads(dataset, band_axis)
    for cube_rel, truth_rel in _expect(p, "inputs.truth", inp.get("truth", {}), dict,
                                       "a table: [inputs.truth] \"CUBE\" = \"TRUTH MASK\"").items():
        key = f"inputs.truth.{cube_rel}"
        cube_abs, truth_abs = rel(cube_rel, "inputs.truth"), rel(truth_rel, key)
        if cube_abs.lower().endswith(_DATA_SUFFIXES) and Path(cube_abs).with_suffix(".hdr").is_file():
            cube_abs = str(Path(cube_abs).with_suffix(".hdr"))
        if cube_abs not in files:
            raise _err(p, key, "names a cube that is not among the inputs")
        if truth_abs in files and truth_abs != cube_abs:  # (a .mat file may hold a cube and its own truth)
            skipped.setdefault(truth_abs, "a truth mask of [inputs.truth]")
        try:  # read once now, as a step's masks are: a bad truth mask stops the job before the first cube
            options._keyed("truth", need_file, truth_abs, options.FILES["truth"])
            check_labels_file(truth_abs)
            from hyperapp.io import read_truth

            c = reads.cube(cube_abs)  # the header only: the mask must be the cube's size
            reads.mask(truth_abs, (c.rows, c.cols), read_truth)
        except HyperappError as exc:
            raise _err(p, key, str(exc)) from None
        truth[cube_abs] = truth_abs
    matched = files
    files = [f for f in files if f not in skipped]
    truth = {c: t for c, t in truth.items() if c not in skipped}
    if not files:
        raise _err(p, "inputs.paths", f"matches no cube, only {len(skipped)} other file(s): "
                                      f"{'; '.join(sorted(set(skipped.values())))}")
    raw_steps = _expect(p, "steps", d.get("steps"), list, "a list of [[steps]] tables")
    if not raw_steps:
        raise _err(p, "steps", "the job has no step")
    steps: list[Step] = []
    for i, st in enumerate(raw_steps):
        key = f"steps[{i}]"
        _expect(p, key, st, dict, "a table")
        if ("detect" in st) == ("analyse" in st):
            import difflib

            near = [k for k in st if difflib.get_close_matches(k, ["detect", "analyse", "analyze"], 1, 0.6)]
            said = f"; it has {near[0]!r}, spelt otherwise" if near and "detect" not in st else ""
            raise _err(p, key, "a step has either detect = \"METHOD\" or analyse = \"METHOD\"" + said)
        kind = "detect" if "detect" in st else "analyse"
        allowed = DETECT_KEYS if kind == "detect" else ANALYSE_KEYS
        extra = set(st) - allowed
        if extra:
            raise _err(p, f"{key}.{sorted(extra)[0]}", f"unknown key for a {kind} step; it takes "
                       f"{', '.join(sorted(allowed))}")
        method = _expect(p, f"{key}.{kind}", st[kind], str, "a method name")
        raw = {k: v for k, v in st.items() if k not in (kind, "name")}
        for k in options.FILES:
            if k in raw:
                raw[k] = rel(raw[k], f"{key}.{k}")
        for k in options.FILE_LISTS:  # one path or a list of paths
            if k in raw:
                v = raw[k]
                _expect(p, f"{key}.{k}", v, (str, list), "a path or a list of paths")
                raw[k] = [rel(u, f"{key}.{k}[{j}]") for j, u in enumerate([v] if isinstance(v, str) else v)]
        cls = DetectRequest if kind == "detect" else AnalyseRequest
        try:
            if "select" in raw:
                options._keyed("select", options.select, raw["select"], "select", JOB_SELECTIONS)
            req = cls.from_mapping({kind: method, **raw}, "job")
            name = options._keyed("name", options.folder_name, st["name"], "name") if "name" in st else None
        except HyperappError as exc:  # a missing file too, named with its key
            k = getattr(exc, "key", None)
            k = kind if k == "method" else labeller("job")(k) if k else None
            raise _err(p, f"{key}.{k}" if k and k != kind else (f"{key}.{kind}" if k else key), str(exc)) from None
        default = f"{kind}-{method}" + (f"-{i}" if any(x.get(kind) == method for x in raw_steps[:i]) else "")
        s = Step(kind, name or default, req)
        try:  # the files a step reads on every cube are read once now
            for k, path in (("targets", getattr(req, "targets", None)), ("targets", getattr(req, "train_truth", None)),
                            ("background", getattr(req, "background", None)), ("roi", getattr(req, "roi", None))):
                if path:
                    check_labels_file(path, targets=k == "targets", classes=k == "roi")
            if kind == "detect" and req.model:
                from hyperapp.detect.model_files import load_model

                k = "model"
                load_model(req.model, method=req.method)
            if kind == "detect" and (req.target_spectra or req.undesired_spectra):
                from hyperapp.io.speclib import (
                    read_library,  # libraries read, and the names picked found in them
                )

                if req.target_spectra:
                    k = "target_spectra"
                    read_library(req.target_spectra, req.spectra)
                for j, u in enumerate(req.undesired_spectra):
                    k = f"undesired_spectra[{j}]"
                    read_library(u, req.undesired_names)
        except HyperappError as exc:
            raise _err(p, f"{key}.{k}", str(exc)) from None
        steps.append(s)
    names = [s.name.casefold() for s in steps]
    if len(set(names)) != len(names):
        clash = next(s.name for i, s in enumerate(steps) if names.index(names[i]) != i)
        raise _err(p, "steps", f"two steps share the name {clash!r} (their output folder; a name may be given or "
                               "made from the method); give one of them name = \"...\"")
    out = _expect(p, "output", d.get("output"), dict, "a table: [output] folder = \"...\"")
    only(out, "output", {"folder"})
    if out.get("folder") is None:
        raise _err(p, "output.folder", "the job needs an output folder")
    if isinstance(out["folder"], str) and not out["folder"].strip():
        raise _err(p, "output.folder", "is empty: name a folder ('.' for the job file's own)")
    folder = rel(out["folder"], "output.folder")
    try:
        check_out_dir(folder)
    except InputError as exc:
        raise _err(p, "output.folder", str(exc)) from None
    except OSError as exc:
        raise _err(p, "output.folder", str(exc)) from None
    if Path(folder).is_dir() and any(Path(f).resolve() == Path(folder).resolve() for f in files):
        raise _err(p, "output.folder", "is one of the inputs")
    for f in files:  # every input is a file (a glob's folders were left out above)
        need_file(f, "cube file")
    from hyperapp.io import holds_datasets

    if dataset is not None and not any(holds_datasets(f) for f in matched):
        # (among HDF5 or .mat inputs, the other cubes simply hold one image)
        raise _err(p, "inputs.dataset", f"names an HDF5 dataset or .mat variable ({dataset!r}), and no input is HDF5 "
                                        "or .mat: leave it out")
    if truth and not any(s.kind == "detect" for s in steps):
        raise _err(p, "inputs.truth", "scores detections (AUC, Pd), and the job has no detect step: leave it out")
    _check_train_bands(p, steps, files, reads)
    _check_steps_fit_some_cube(p, steps, files, reads, truth)
    return Job(str(p), files, dataset, steps, folder, output_names(files), truth, skipped, twice, band_axis)


def job_text(inputs: list[str], steps: list[dict], folder: str, dataset: str | None = None,
             truth: dict[str, str] | None = None) -> str:
    """A job file's text (the GUI's File > Save as batch job); ``truth``: cube -> truth mask."""
    import tomli_w

    head: dict = {"paths": list(inputs)}
    if dataset:
        head["dataset"] = dataset
    if truth:
        head["truth"] = dict(truth)
    doc = {"inputs": head, "steps": [{k: v for k, v in st.items() if v is not None} for st in steps],
           "output": {"folder": folder}}
    if not steps:
        del doc["steps"]
    return tomli_w.dumps(doc)
