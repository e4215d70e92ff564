"""What a GUI session holds, without Qt: the cube, its ROIs, the truth, the runs, and the project file.

The window edits a :class:`Session` and redraws from it; saving a project writes this state as JSON
(cube path, ROIs, truth path, each run's method, parameters, threshold and saved model), and opening
one restores it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube
from hyperapp.core.errors import CubeFormatError, InputError
from hyperapp.io.roi import RoiSet
from hyperapp.request import DetectRequest

PROJECT_FORMAT = "hyperapp-project"
PROJECT_VERSION = 1


@dataclass
class Run:
    """One detector run shown in the window: its request, its result and the threshold the person left it at."""

    name: str
    request: DetectRequest
    result: object  # hyperapp.detect.finish.DetectionResult
    threshold: float
    model_path: str | None = None
    #: the review of its objects (hyperapp.detect.review.Review), once the Objects tab showed them
    review: object = None
    #: the results folder it was read from (File > Open results for review), or None for a run made here
    results_folder: str | None = None
    #: the target pixels marked when it ran (host bool map), or None: its review says which objects hold
    #: them (the detector was trained on them, so they are no find)
    clicked: np.ndarray | None = None
    #: the library spectra it ran from that no file held (added in the window, not saved): a batch job
    #: cannot name them
    unsaved_spectra: tuple[str, ...] = ()

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def params(self) -> dict:
        return self.request.params


def prepare_in_background(session: Session, device: str, after: threading.Thread | None = None) -> threading.Thread:
    """:meth:`Session.prepare_device` on a thread of its own, once ``after`` (the installation's warm-up, where
    one runs) has finished: what the window starts when a cube opens (``hyperapp.gui.gpu_warmup``), and the
    bench's window lane too. A failure is logged, never raised (a person's Run says what is wrong); the
    thread's ``prepared`` holds what :meth:`Session.prepare_device` returned."""
    import logging

    log = logging.getLogger(__name__)

    def work() -> None:
        try:
            if after is not None:
                after.join()
            thread.prepared = session.prepare_device(device)
            log.info("cube prepared on the GPU: %s", thread.prepared)
        except Exception:  # noqa: BLE001
            log.debug("the cube's GPU preparation stopped", exc_info=True)

    thread = threading.Thread(target=work, name="hyperapp-cube-preparation", daemon=True)
    thread.prepared = {}
    thread.start()
    return thread


@dataclass
class Session:
    cube: Cube
    dataset: str | None = None
    roi: RoiSet = None  # type: ignore[assignment]
    truth: np.ndarray | None = None
    truth_path: str | None = None
    runs: list[Run] = field(default_factory=list)
    _device_cache: dict = field(default_factory=dict)
    #: the cube as opened (less its bad bands); ``cube`` is it, or the subset of ``bands`` of it
    base_cube: Cube | None = None
    bands: list[int] | None = None
    _mean: np.ndarray | None = None
    #: whether the header's bad bands are kept (the CLI's --all-bands, a job's all_bands)
    all_bands: bool = False
    #: whether the cube is a swath orthorectified through its GLT (:func:`hyperapp.io.georef.ortho_cube`)
    ortho: bool = False
    #: guards the pixels held on the device (:meth:`pixels_on`: a Run waits for the preparation's load)
    _device_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: set once a run starts or another cube replaces this one: :meth:`prepare_device` stops between runs
    _yield: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def __post_init__(self):
        if self.roi is None:
            self.roi = RoiSet((self.cube.rows, self.cube.cols))
        if self.base_cube is None:
            self.base_cube = self.cube

    def use_bands(self, bands: list[int] | None) -> None:
        """Run on these bands of the current cube from now on (a band reduction's choice); None: all.

        Indices refer to the current cube, so a reduction of a reduced cube composes.
        """
        if bands is None:
            self.cube, self.bands = self.base_cube, None
        else:
            current = self.bands if self.bands is not None else list(range(self.base_cube.bands))
            bad = [b for b in bands if not 0 <= int(b) < len(current)]
            if bad or not bands:
                raise InputError(f"band {bad[0] if bad else '(none)'} is not among the cube's {len(current)} bands")
            self.bands = sorted({current[int(b)] for b in bands})
            self.cube = self.base_cube.subset_bands(self.bands)
        self._device_cache.clear()
        self._mean = None

    def mean_spectrum(self, max_pixels: int = 4096) -> np.ndarray:
        """Mean spectrum of the cube, from an evenly strided set of about ``max_pixels`` pixels' rows;
        computed once per band selection (the band panel redraws it on every row it selects)."""
        if self._mean is None:
            step = max(1, self.cube.rows * self.cube.cols // max_pixels // max(self.cube.cols, 1))
            block = self.cube.read(slice(0, self.cube.rows, step))
            self._mean = block.reshape(-1, self.cube.bands).mean(axis=0)
        return self._mean

    @classmethod
    def open(cls, path: str | os.PathLike, dataset: str | None = None, all_bands: bool = False,
             ortho: bool = False) -> Session:
        """The cube at ``path`` less the header's bad bands (unless ``all_bands``), as the CLI and a job
        open it (:meth:`hyperapp.core.cube.Cube.run_bands`); ``ortho``: orthorectified through its GLT."""
        from hyperapp.io import open_named_cube

        cube = open_named_cube(path, dataset).run_bands(bool(all_bands))
        if ortho:
            from hyperapp.io.georef import ortho_cube

            cube = ortho_cube(cube)
        return cls(cube, dataset, all_bands=bool(all_bands), ortho=bool(ortho))

    def load_truth(self, path: str | os.PathLike, variable: str | None = None) -> None:
        from hyperapp.io import read_truth

        self.truth = read_truth(path, (self.cube.rows, self.cube.cols), variable)
        self.truth_path = str(path)

    def pixels_on(self, device: str, progress=None):
        """The cube's float32 pixels on the device, read once per device and kept for later runs. On the
        GPU their no-data test and background sums are taken at once, in the same (worker) thread
        (:func:`hyperapp.detect.resident.warm`: milliseconds after a load of seconds), so every click
        reuses them, the first one too. A person's run (a detector's, an analysis panel's) takes its
        pixels here: the cube's preparation (:meth:`prepare_device`) stops at its next run."""
        self._yield.set()
        return self._hold(device, progress)

    def _hold(self, device: str, progress=None):
        """:meth:`pixels_on`'s load, for the preparation too (one load, whichever thread asks first)."""
        from hyperapp.core.backend import get_backend
        from hyperapp.core.progress import NULL_PROGRESS
        from hyperapp.detect.run import load_pixels

        backend = get_backend(device)
        with self._device_lock:
            if backend.name not in self._device_cache:
                image = load_pixels(self.cube, backend, progress or NULL_PROGRESS)
                if backend.is_gpu:
                    from hyperapp.detect.resident import warm

                    warm(image)
                self._device_cache[backend.name] = image
            return self._device_cache[backend.name]

    def held_pixels(self):
        """The pixels a run left on a device (:meth:`pixels_on`), or None when none is held."""
        return next(iter(self._device_cache.values()), None)

    def pixels_for(self, method: str, device: str, progress=None):
        """The pixels a run of ``method`` takes: held on the device (:meth:`pixels_on`), or None when a
        pixel detector must stream this cube from its file (its float32 pixels exceed the memory
        budget, :func:`hyperapp.detect.budget.needs_streaming`): :func:`hyperapp.detect.run.run_detection` then
        reads it in two passes and nothing is kept, as the CLI does."""
        if self._streams(method, device):
            return None
        return self.pixels_on(device, progress)

    def _streams(self, method: str, device: str) -> bool:
        """Whether a run of ``method`` streams this cube from its file (see :meth:`pixels_for`)."""
        from hyperapp.core.backend import get_backend
        from hyperapp.detect.budget import needs_streaming
        from hyperapp.models.registry import get_method

        return get_method(method).kind == "pixel" and needs_streaming(self.cube, get_backend(device))

    def prepare_device(self, device: str = "gpu") -> dict:
        """What the window does in a background thread once a cube is open on a GPU: the cube's pixels onto
        the device, held for the runs (a run started meanwhile waits for this load instead of making its
        own), then every detector once on them as a click runs it, and every analysis on a small scene of
        the cube's band count (:func:`hyperapp.batch.prepare_gpu.warm_process`), so the first click loads
        nothing the second would not. It stops between those runs once a person's run takes the pixels (:meth:`pixels_on`,
        :meth:`detect`) or another cube replaces this one (:meth:`release`). Returns the seconds of each
        part and the runs made; nothing where the device is no GPU."""
        from hyperapp.batch.prepare_gpu import warm_process
        from hyperapp.core.backend import get_backend

        backend = get_backend(device)
        if not backend.is_gpu:
            return {}
        t0 = time.perf_counter()
        held = None
        if not self._streams("ace", backend.name):  # (where the cube must be streamed, nothing is held)
            held = (self.cube, self._hold(backend.name))
        t1 = time.perf_counter()
        runs = warm_process(self.cube.bands, backend.name, self._yield.is_set, held)
        return {"load_s": t1 - t0, "warm_s": time.perf_counter() - t1, "runs": runs}

    def release(self) -> None:
        """This session is no longer shown: its :meth:`prepare_device` stops at its next run."""
        self._yield.set()

    def detect(self, request: DetectRequest, targets, background, *, truth=None, model=None, progress=None,
               **signatures):
        """A detection run as the window's Run makes it (in its worker thread): the cube's pixels held on the
        device (:meth:`pixels_for`, read on the first run), then :func:`hyperapp.detect.run.run_detection`
        with ``targets`` and ``background`` (the marks, copied by the caller when the run starts),
        ``truth``, a ``model`` trained elsewhere and the library's ``signatures`` (target and undesired
        spectra). The bench's window-click lane calls it too."""
        from hyperapp.core.progress import NULL_PROGRESS
        from hyperapp.detect.run import run_detection

        progress = progress or NULL_PROGRESS
        self._yield.set()  # a person's run goes first (streamed too): the preparation stops at its next run
        image = self.pixels_for(request.method, request.device, progress.sub(0.0, 0.4))  # None: streamed
        return run_detection(self.cube, request, targets if targets.any() else None, background, truth=truth,
                             model=model, image=image, progress=progress.sub(0.4, 1.0), **signatures)

    def unique_run_name(self, method: str) -> str:
        n = sum(r.method == method for r in self.runs) + 1
        return f"{method} #{n}"

    # ------------------------------------------------------------------ project files
    def to_project(self, folder: Path, model_paths: list | None = None) -> dict:
        rr, cc = np.nonzero(self.roi.labels)
        runs = []
        model_paths = model_paths or [r.model_path for r in self.runs]
        for r, mp in zip(self.runs, model_paths):
            runs.append({"name": r.name, "request": r.request.to_dict(defaults=False),
                         "threshold": float(r.threshold), "model": os.path.relpath(mp, folder) if mp else None})
            if r.results_folder:
                runs[-1]["results"] = os.path.relpath(r.results_folder, folder)
            if r.review is not None:
                runs[-1]["review"] = r.review.to_dict()
        return {
            "format": PROJECT_FORMAT, "format_version": PROJECT_VERSION,
            "cube": os.path.relpath(self.cube.path, folder) if self.cube.path else None,
            "dataset": self.dataset,
            "roi": {"rows": rr.tolist(), "cols": cc.tolist(), "labels": self.roi.labels[rr, cc].tolist(),
                    "classes": [{"name": n, "colour": list(c)} for n, c in self.roi.classes]},
            "truth": os.path.relpath(self.truth_path, folder) if self.truth_path else None,
            "bands": self.bands,
            "all_bands": self.all_bands,
            "runs": runs,
            **({"ortho": True} if self.ortho else {}),
        }

    def save_project(self, path: str | os.PathLike) -> None:
        """Write the project (JSON) and each run's fitted model beside it (``<project>.models/``).

        All or nothing: the models go to a temporary folder first and the project file is written
        atomically; on any failure both are removed and an :class:`OutputError` says why.
        """
        import shutil
        import tempfile

        from hyperapp.core.errors import OutputError
        from hyperapp.detect.model_files import save_model
        from hyperapp.io.atomic import atomic_write_text, check_replaceable, usual_mode
        from hyperapp.request import checks as options

        p = Path(options.out_file(str(path)))  # not a folder, in a folder that takes files
        check_replaceable(p)  # a read-only project is kept: refused before its models' folder is replaced
        mdir = p.with_suffix(".models")
        tmp = Path(tempfile.mkdtemp(prefix=f".{mdir.name}.", dir=p.parent)) if p.parent.is_dir() else None
        if tmp is None:
            raise OutputError("the project's folder does not exist", p.parent)
        os.chmod(tmp, usual_mode(folder=True))  # mkdtemp makes 0700; the project beside it is 0644
        paths = []
        try:
            for i, r in enumerate(self.runs):
                model = getattr(r.result, "model", None)
                final = None
                if model is not None and hasattr(model, "get_params"):  # save_model moves arrays to the host
                    saved = save_model(model, tmp / f"run{i}-{r.method}.npz", r.method)
                    final = str(mdir / saved.name)
                paths.append(final)
            text = json.dumps(self.to_project(p.parent, paths), indent=2) + "\n"
            if mdir.exists():
                shutil.rmtree(mdir)
            tmp.rename(mdir)
            tmp = None
            atomic_write_text(p, text)
        except Exception as exc:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise OutputError(f"could not save the project ({exc.__class__.__name__}: {exc})", p) from exc
        finally:
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        for r, final in zip(self.runs, paths):
            r.model_path = final

    @staticmethod
    def read_project(path: str | os.PathLike) -> dict:
        p = Path(path)
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CubeFormatError(f"not a readable project file ({exc})", p) from exc
        if d.get("format") != PROJECT_FORMAT:
            raise CubeFormatError("not a hyperapp project file", p)
        if d.get("format_version", 0) > PROJECT_VERSION:
            raise CubeFormatError("project written by a newer hyperapp", p)
        base = p.parent
        for key in ("cube", "truth"):
            if d.get(key):
                d[key] = str((base / d[key]).resolve())
        for r in d.get("runs", []):
            for key in ("model", "results"):
                if r.get(key):
                    r[key] = str((base / r[key]).resolve())
            if "request" not in r:  # written before runs held their request: the method and its options
                r["request"] = {"method": r.get("method"), "params": r.get("params") or {}}
            try:
                r["request"] = DetectRequest.from_dict(r["request"])
            except (TypeError, InputError) as exc:
                raise CubeFormatError(f"a run of the project is not a detection request ({exc})", p) from exc
        return d

    def batch_inputs(self) -> list[Path]:
        """The cubes a batch job saved from this session runs on: the open cube, then every other cube of
        its folder with its extension and its band count; truth masks, label maps and single-band images
        are left out (a file that does not open as such a cube is not a cube for this job)."""
        from hyperapp.core.errors import HyperappError
        from hyperapp.io import open_cube

        src = Path(self.cube.path)
        out = [src]
        skip = {src.resolve()}
        if self.truth_path:
            skip.add(Path(self.truth_path).resolve())
        for f in sorted(src.parent.glob(f"*{src.suffix}")):
            if f.resolve() in skip:
                continue
            try:
                c = open_cube(f, self.dataset).run_bands(self.all_bands)
            except (HyperappError, OSError, ValueError):
                continue
            if c.bands == self.base_cube.bands and c.bands > 1:
                out.append(f)
        return out

    def save_batch_job(self, path) -> Path:
        """Write this session as a batch job (``hyperapp --headless run``) that reproduces it: the open
        cube and the other cubes of its folder (:meth:`batch_inputs`), one detect step per method run in
        the window (its latest run: its parameters, and its threshold as the person left it, or the
        false-alarm rate it ran at), the marked pixels saved beside the job as the steps' clicks, the
        loaded truth mask (the reports then carry AUC), its output folder beside the job. Returns the
        job's path."""
        from hyperapp.batch.jobfile import job_text
        from hyperapp.io.atomic import atomic_write_text
        from hyperapp.models.registry import get_method

        p = Path(path)
        if p.suffix.lower() != ".toml":
            p = p.with_suffix(".toml")
        if not self.cube.path:
            raise InputError("the cube was not opened from a file: a batch job needs files")
        if self.ortho:
            raise InputError("the cube is orthorectified: a batch job runs on the swath's pixels, where these "
                             "marks are not (run detect --ortho on the swath instead)")
        if not self.runs:
            raise InputError("run a detector first: the job repeats the window's runs")
        latest: dict[str, Run] = {}
        for run in self.runs:  # the latest run of each method, in the order the methods first ran
            latest[run.method] = run
        for run in latest.values():  # (before any file is written)
            if run.unsaved_spectra:
                raise InputError(f"{run.name} ran from library spectra no file holds "
                                 f"({', '.join(run.unsaved_spectra)}): save the library (the Spectral library "
                                 "tool's Save as…), run it again, then save the job")
        clicks = p.with_name(p.stem + "-clicks.csv")
        bg = p.with_name(p.stem + "-background.csv")
        rows = [(r, c) for r, c in zip(*np.nonzero(self.roi.targets))]
        atomic_write_text(clicks, "row,col\n" + "".join(f"{r},{c}\n" for r, c in rows))
        has_bg = self.roi.background is not None
        if has_bg:
            rr, cc = np.nonzero(self.roi.background)
            atomic_write_text(bg, "row,col\n" + "".join(f"{r},{c}\n" for r, c in zip(rr, cc)))
        steps = []
        for run in latest.values():
            m = get_method(run.method)
            defaults = m.factory().get_params()
            # the options the run set, less those it did not use (a job refuses those, as the CLI does)
            params = {k: v for k, v in (run.params or {}).items() if k not in defaults or defaults[k] != v}
            for k, _ in m.idle_options(params, {}):
                params.pop(k, None)
            req = run.request.replace(params=params, device="auto", memory=None, targets=None, background=None,
                                      bands=",".join(map(str, self.bands)) if self.bands is not None else None,
                                      all_bands=self.all_bands, far=None, threshold=None)
            if m.uses_targets and (rows or req.target_spectra is None):
                req = req.replace(targets=clicks.name)
                if has_bg and m.uses_background:  # the other detectors do not learn from background marks
                    req = req.replace(background=bg.name)
            res = run.result
            far = res.report.get("far")
            if run.threshold != res.threshold or far is None:
                # the threshold the person moved to (or was given)
                req = req.replace(threshold=float(run.threshold))
            else:
                req = req.replace(far=float(far))
            steps.append(req.job_table())

        def rel(f) -> str:
            return Path(os.path.relpath(Path(f).resolve(), p.parent.resolve())).as_posix()

        inputs = [rel(f) for f in self.batch_inputs()]
        truth = {rel(self.cube.path): rel(self.truth_path)} if self.truth_path else None
        atomic_write_text(p, job_text(inputs, steps, p.stem + "-out", self.dataset, truth))
        return p

    def restore_rois(self, d: dict) -> None:
        roi = d.get("roi") or {}
        classes = roi.get("classes")
        if classes:
            self.roi.classes = [(str(c["name"]), tuple(int(v) for v in c["colour"][:3])) for c in classes]
        lab = np.zeros(self.roi.shape, np.uint8)
        rows, cols, labels = roi.get("rows", []), roi.get("cols", []), roi.get("labels", [])
        if rows:
            r, c = np.asarray(rows), np.asarray(cols)
            if r.max() >= self.roi.shape[0] or c.max() >= self.roi.shape[1]:
                raise InputError("the project's ROIs do not fit the cube")
            lab[r, c] = np.asarray(labels, np.uint8)
        self.roi.set_labels(lab)
