"""``hyperapp --headless run JOB``: a job's steps over many cubes, resumable, on one machine or a cluster.

Each cube is one task (:func:`process_cube`): open it, run every step through the one detection or
analysis path, write each step's outputs all or nothing. A broken cube fails alone; its error is one
line in the summary and the log. Tasks run

- in this process on two threads (the default), so reading the next cube overlaps the work on the
  current one;
- on a local Dask cluster of ``--workers N`` processes (one per GPU where there are several, pinned
  with ``CUDA_VISIBLE_DEVICES``; two threads each, for the same overlap), or
- on an existing Dask cluster (``--scheduler ADDRESS``).

Each cube streams through the bounded-memory path when it does not fit (:func:`hyperapp.detect.run_detection`),
so a worker's memory stays bounded. ``manifest.json`` in the output folder records, per cube, its size and
modification time, the steps' fingerprint, the hyperapp version and the outputs; a second run skips the
cubes whose entry matches and whose outputs exist, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from hyperapp import __version__
from hyperapp.errors import HyperappError, InputError
from hyperapp.jobfile import Job, Step

MANIFEST = "manifest.json"
LOG = "hyperapp-batch.log"


def cube_key(path: str) -> dict:
    """What identifies a cube's contents cheaply: size and modification time of its data files."""
    p = Path(path)
    files = [p]
    if p.suffix.lower() == ".hdr":
        files += [f for f in (p.with_suffix(".img"), p.with_suffix(".raw"), p.with_suffix(".dat"), p.with_suffix(""))
                  if f.is_file() and f != p]
    return {"size": sum(f.stat().st_size for f in files if f.is_file()),
            "mtime": max(f.stat().st_mtime for f in files if f.is_file())}


def cube_folder(out: str, path: str) -> Path:
    """The output subfolder of a cube, named after it."""
    return Path(out) / Path(path).stem


def process_cube(path: str, steps: list[dict], out: str, dataset: str | None, device: str, memory: float | None,
                 progress=None, truth: str | None = None) -> dict:
    """Every step on one cube; returns its summary row (an ``error`` line instead of raising). ``truth``:
    the cube's truth mask (its detections' reports then carry AUC and Pd). The row's ``detections``
    holds each detect step's count by step name."""
    from hyperapp.analyse import Selection, parse_bands, run_analysis, write_analysis
    from hyperapp.cli import read_class_map
    from hyperapp.detect import detect_to_folder
    from hyperapp.io import open_cube, read_labels
    from hyperapp.jobs import NULL_PROGRESS

    t0 = time.perf_counter()
    row = {"cube": path, "seconds": 0.0, "detections": None, "outputs": [], "error": None}
    prog = progress or NULL_PROGRESS
    try:
        base = open_cube(path, dataset).good_bands()
        truth_mask = read_labels(truth, (base.rows, base.cols)) if truth else None
        n = len(steps)
        for i, d in enumerate(steps):
            s = Step(**d)
            cube = base.subset_bands(parse_bands(s.bands, base.bands)) if s.bands else base
            shape = (cube.rows, cube.cols)
            folder = cube_folder(out, path) / s.name
            sub = prog.sub(i / n, (i + 1) / n)
            if s.kind == "detect":
                model = None
                if s.model:
                    from hyperapp.io.models import load_model

                    model = load_model(s.model, n_bands=cube.bands, method=s.method)
                targets = read_labels(s.targets, shape) if s.targets and model is None else None
                background = read_labels(s.background, shape) if s.background and model is None else None
                res, _ = detect_to_folder(cube, s.method, targets, background, folder, params=s.params,
                                          device=device, far=s.far, threshold=s.threshold, model=model,
                                          memory=memory, progress=sub, truth=truth_mask)
                row["detections"] = {**(row["detections"] or {}), s.name: int(res.report["detections"])}
            else:
                roi = read_class_map(s.roi, shape) if s.roi else None
                kind = s.select or ("rois" if roi is not None and s.sample is None else "sample")
                sel = Selection(kind, s.sample or 20000, s.seed)
                res = run_analysis(cube, s.method, s.params, sel, roi=roi, device=device, progress=sub)
                write_analysis(res, folder, cube)
            row["outputs"].append(str(folder))
    except HyperappError as exc:
        row["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001  (one broken cube fails alone, with one line)
        row["error"] = f"internal error: {exc.__class__.__name__}: {exc}"
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def detections_text(detections) -> str:
    """A summary cell: each detect step's pixel count ("sam 12, rbfn 30"), never their sum."""
    if not detections:
        return ""
    if isinstance(detections, dict):
        return ", ".join(f"{k} {v}" for k, v in detections.items())
    return str(detections)


class Manifest:
    """``manifest.json``: per cube, what was done with which settings (written atomically)."""

    def __init__(self, out: Path, fingerprint: str):
        self.path = out / MANIFEST
        self.fingerprint = fingerprint
        self.lock = threading.Lock()
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}
        self.data.setdefault("cubes", {})

    def done(self, path: str) -> bool:
        e = self.data["cubes"].get(path)
        if not e or e.get("status") != "done":
            return False
        try:
            key = cube_key(path)
        except OSError:
            return False
        return (e.get("fingerprint") == self.fingerprint and e.get("version") == __version__
                and e.get("size") == key["size"] and e.get("mtime") == key["mtime"]
                and all((Path(o) / "report.json").is_file() for o in e.get("outputs", [])))

    def record(self, row: dict) -> None:
        from hyperapp.io.atomic import atomic_write_text

        path = row["cube"]
        try:
            key = cube_key(path)
        except OSError:
            key = {}
        with self.lock:
            self.data["cubes"][path] = {**key, "fingerprint": self.fingerprint, "version": __version__,
                                        "status": "failed" if row["error"] else "done",
                                        "seconds": row["seconds"], "detections": row["detections"],
                                        "outputs": row["outputs"], "error": row["error"]}
            atomic_write_text(self.path, json.dumps(self.data, indent=1) + "\n")


def _train_models(job: Job, out: Path, device: str) -> list[dict]:
    """Steps with ``train``: fit once on that cube and save the model; every cube then loads it."""
    from hyperapp.detect import run_detection
    from hyperapp.io import open_cube, read_labels
    from hyperapp.io.models import save_model

    steps = []
    for s in job.steps:
        d = asdict(s)
        if s.kind == "detect" and s.train:
            cube = open_cube(s.train, job.dataset).good_bands()
            shape = (cube.rows, cube.cols)
            res = run_detection(cube, s.method, read_labels(s.targets, shape),
                                read_labels(s.background, shape) if s.background else None, params=s.params,
                                device=device)
            d["model"] = str(save_model(res.model, out / ".models" / f"{s.name}.npz", method=s.method))
            d["targets"] = d["background"] = d["train"] = None
        steps.append(d)
    return steps


def _local_cluster(workers: int):
    """A local Dask cluster of ``workers`` processes, two threads each; with several GPUs each worker
    sees one (``CUDA_VISIBLE_DEVICES``); dask-cuda's cluster where it is installed."""
    from hyperapp.backend import gpu_available

    n_gpu = 0
    if gpu_available():
        import cupy

        n_gpu = cupy.cuda.runtime.getDeviceCount()
    if n_gpu > 1:
        try:
            from dask_cuda import LocalCUDACluster

            return LocalCUDACluster(n_workers=min(workers, n_gpu), threads_per_worker=2)
        except ImportError:
            pass
    from distributed import Nanny, Scheduler, SpecCluster

    specs = {}
    for i in range(workers):
        env = {"CUDA_VISIBLE_DEVICES": str(i % n_gpu)} if n_gpu > 1 else {}
        specs[f"hyperapp-{i}"] = {"cls": Nanny, "options": {"nthreads": 2, "env": env, "memory_limit": 0}}
    return SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                       silence_logs=40)


def run_job(job: Job, workers: int = 0, scheduler: str | None = None, device: str = "auto",
            memory: float | None = None, console=None) -> int:
    """Run ``job``; prints progress and a summary; returns 0 (all cubes done), 1 (some failed)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from hyperapp.io.atomic import ensure_dir
    from hyperapp.jobs import Progress as HProgress

    console = console or Console(stderr=True)
    out = ensure_dir(job.output)
    manifest = Manifest(out, job.fingerprint())
    log = open(out / LOG, "a", encoding="utf-8")  # noqa: SIM115  (closed below)

    def say(msg: str) -> None:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")
        log.flush()

    say(f"job {job.path}: {len(job.inputs)} cube(s), {len(job.steps)} step(s), hyperapp {__version__}")
    todo = [c for c in job.inputs if not manifest.done(c)]
    skipped = [c for c in job.inputs if c not in todo]
    for c in skipped:
        say(f"skip {c}: done by an earlier run with the same steps")
    rows: dict[str, dict] = {}
    try:
        steps = _train_models(job, out, device) if todo else []
    except HyperappError as exc:
        log.close()
        raise InputError(f"training a step's model failed: {exc}", job.path) from exc
    client = executor = None
    bars = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                    TimeElapsedColumn(), console=console, transient=False, disable=not todo)
    try:
        with bars:
            overall = bars.add_task(f"{len(todo)} cube(s)", total=max(len(todo), 1))
            if scheduler or workers > 0:
                from distributed import Client
                from distributed import as_completed as dask_completed

                client = Client(scheduler) if scheduler else Client(_local_cluster(workers))
                futs = {}
                for c in todo:
                    f = client.submit(process_cube, c, steps, str(out), job.dataset, device, memory, None,
                                      job.truth.get(c), pure=False,
                                      key=f"cube-{Path(c).stem}-{time.time_ns()}")
                    futs[f] = (c, bars.add_task(Path(c).stem, total=1))
                    say(f"submit {c}")
                done_iter = ((f.result(), futs[f]) for f in dask_completed(futs))
            else:
                executor = ThreadPoolExecutor(2, thread_name_prefix="hyperapp-cube")
                futs = {}
                for c in todo:
                    task = bars.add_task(Path(c).stem, total=1)
                    prog = HProgress(lambda fr, msg, task=task: bars.update(task, completed=fr))
                    futs[executor.submit(process_cube, c, steps, str(out), job.dataset, device, memory, prog,
                                         job.truth.get(c))] = (c, task)
                    say(f"start {c}")
                done_iter = ((f.result(), futs[f]) for f in as_completed(futs))
            for row, (c, task) in done_iter:
                rows[c] = row
                manifest.record(row)
                bars.update(task, completed=1, description=f"{Path(c).stem} " + ("failed" if row["error"] else "done"))
                bars.advance(overall)
                say(f"{'FAILED' if row['error'] else 'done'} {c} in {row['seconds']:.2f} s"
                    + (f": {row['error']}" if row["error"] else f", detections {detections_text(row['detections'])}"))
    finally:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        if client is not None:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()
    table = Table(title=f"hyperapp run {Path(job.path).name}")
    for col in ("cube", "seconds", "detections", "error"):
        table.add_column(col, justify="right" if col in ("seconds", "detections") else "left")
    failed = 0
    for c in job.inputs:
        r = rows.get(c)
        if r is None:
            e = manifest.data["cubes"].get(c, {})
            table.add_row(Path(c).name, "skipped", detections_text(e.get("detections")), "")
            continue
        failed += bool(r["error"])
        table.add_row(Path(c).name, f"{r['seconds']:.2f}", detections_text(r["detections"]),
                      r["error"] or "")
    console.print(table)
    say(f"finished: {len(rows) - failed} done, {failed} failed, {len(skipped)} skipped")
    log.close()
    return 1 if failed else 0


