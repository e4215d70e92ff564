"""``hyperapp --headless run JOB``: a job's steps over many cubes, resumable, on one machine or a cluster.

Each cube is read, computed (every step through the one detection or analysis path) and written (each
step's outputs all or nothing) by a :class:`hyperapp.pipeline.CubePipeline`, whose three stages run on
threads of their own: cube n+1 is read while cube n is computed and cube n-1 written. A broken cube
fails alone; its error is one line in the summary and the log. Cubes run

- in this process, through one pipeline (the default);
- on a local Dask cluster of ``--workers N`` processes (one per GPU where there are several, pinned
  with ``CUDA_VISIBLE_DEVICES``), or on an existing Dask cluster (``--scheduler ADDRESS``): each cube is a
  task, and each worker process feeds its tasks' cubes through a pipeline of its own.

Each cube streams through the bounded-memory path when it does not fit (:func:`hyperapp.detect.run_detection`),
so a worker's memory stays bounded. ``manifest.json`` in the output folder records, per cube, its size and
modification time, the steps' fingerprint, the hyperapp version, the outputs and the seconds of each
stage; a second run skips the cubes whose entry matches and whose outputs exist, so a killed run resumes
where it stopped. The summary ends with the run's cubes per second, GB/s and each stage's median time.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import asdict
from pathlib import Path

from hyperapp import __version__
from hyperapp.errors import HyperappError, InputError
from hyperapp.jobfile import Job
from hyperapp.pipeline import CubePipeline, cube_folder  # noqa: F401  (cube_folder: part of this module's API)

MANIFEST = "manifest.json"
LOG = "hyperapp-batch.log"
#: the manifest is rewritten at most this often while cubes finish (and at the end)
FLUSH_SECONDS = 0.5
#: the summary lists every cube up to this many; beyond, the failed ones and the totals
TABLE_ROWS = 100
#: seconds to wait for a Dask scheduler given with ``--scheduler``
SCHEDULER_TIMEOUT = 20
#: threads of a Dask worker: each task waits on the worker's pipeline while its cube is in a stage
WORKER_THREADS = 4


def cube_key(path: str) -> dict:
    """What identifies a cube's contents cheaply: size and modification time of its data files."""
    p = Path(path)
    files = [p]
    if p.suffix.lower() == ".hdr":
        files += [f for f in (p.with_suffix(".img"), p.with_suffix(".raw"), p.with_suffix(".dat"), p.with_suffix(""))
                  if f.is_file() and f != p]
    stats = [f.stat() for f in files if f.is_file()]
    if not stats:
        raise FileNotFoundError(f"no such cube: {path}")
    return {"size": sum(s.st_size for s in stats), "mtime": max(s.st_mtime for s in stats)}


def process_cube(path: str, steps: list[dict], out: str, dataset: str | None, device: str, memory: float | None,
                 progress=None) -> dict:
    """Every step on one cube, read, computed and written in this thread (a cube alone: no overlap);
    returns its summary row (an ``error`` line instead of raising). ``progress`` is accepted for
    callers of earlier versions and unused: a cube's stages are timed in the row instead."""
    return CubePipeline(steps, out, dataset, device, memory).run_one(path)


class Manifest:
    """``manifest.json``: per cube, what was done with which settings and how long each stage took.

    Written atomically, at most every :data:`FLUSH_SECONDS` while cubes finish and once at the end
    (also when the run is stopped): rewriting the whole file after every cube costs a run of many
    cubes time that grows with their number. A run killed outright (``kill -9``) redoes the cubes of
    its last :data:`FLUSH_SECONDS`; their outputs, written all or nothing, are simply written again.
    """

    def __init__(self, out: Path, fingerprint: str):
        self.path = out / MANIFEST
        self.fingerprint = fingerprint
        self.lock = threading.Lock()
        self._dirty = False
        self._flushed = time.monotonic()
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
        """Enter a finished cube; the file is rewritten when the last write is old enough."""
        path = row["cube"]
        try:
            key = cube_key(path)
        except OSError:
            key = {}
        with self.lock:
            self.data["cubes"][path] = {**key, "fingerprint": self.fingerprint, "version": __version__,
                                        "status": "failed" if row["error"] else "done",
                                        "seconds": row["seconds"], "stages": row.get("stages", {}),
                                        "detections": row["detections"], "outputs": row["outputs"],
                                        "error": row["error"]}
            self._dirty = True
            if time.monotonic() - self._flushed >= FLUSH_SECONDS:
                self._write()

    def flush(self) -> None:
        """Write the file now if a cube was entered since the last write."""
        with self.lock:
            if self._dirty:
                self._write()

    def _write(self) -> None:
        from hyperapp.io.atomic import atomic_write_text

        atomic_write_text(self.path, json.dumps(self.data, indent=1) + "\n")
        self._dirty = False
        self._flushed = time.monotonic()


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
    """A local Dask cluster of ``workers`` processes of :data:`WORKER_THREADS` threads each (one cube in
    each stage of the worker's pipeline, and one waiting); with several GPUs each worker sees one
    (``CUDA_VISIBLE_DEVICES``); dask-cuda's cluster where it is installed."""
    from hyperapp.backend import gpu_available

    n_gpu = 0
    if gpu_available():
        import cupy

        n_gpu = cupy.cuda.runtime.getDeviceCount()
    if n_gpu > 1:
        try:
            from dask_cuda import LocalCUDACluster

            return LocalCUDACluster(n_workers=min(workers, n_gpu), threads_per_worker=WORKER_THREADS)
        except ImportError:
            pass
    from distributed import Nanny, Scheduler, SpecCluster

    specs = {}
    for i in range(workers):
        env = {"CUDA_VISIBLE_DEVICES": str(i % n_gpu)} if n_gpu > 1 else {}
        specs[f"hyperapp-{i}"] = {"cls": Nanny, "options": {"nthreads": WORKER_THREADS, "env": env, "memory_limit": 0}}
    return SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                       silence_logs=40)


def run_job(job: Job, workers: int = 0, scheduler: str | None = None, device: str = "auto",
            memory: float | None = None, console=None) -> int:
    """Run ``job``; prints progress and a summary; returns 0 (all cubes done), 1 (some failed).

    In this process the cubes go through one :class:`hyperapp.pipeline.CubePipeline` (read, compute
    and write overlapped); with ``workers`` or ``scheduler`` each cube is a Dask task that feeds its
    worker's own pipeline (:func:`hyperapp.pipeline.run_on_worker`).
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hyperapp.io.atomic import ensure_dir

    console = console or Console(stderr=True)
    out = ensure_dir(job.output)
    manifest = Manifest(out, job.fingerprint())
    log = open(out / LOG, "a", encoding="utf-8")  # noqa: SIM115  (closed below)

    def say(msg: str) -> None:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")

    say(f"job {job.path}: {len(job.inputs)} cube(s), {len(job.steps)} step(s), hyperapp {__version__}")
    todo = [c for c in job.inputs if not manifest.done(c)]
    skipped = [c for c in job.inputs if c not in todo]
    for c in skipped:
        say(f"skip {c}: done by an earlier run with the same steps")
    log.flush()
    rows: dict[str, dict] = {}
    try:
        steps = _train_models(job, out, device) if todo else []
    except HyperappError as exc:
        log.close()
        raise InputError(f"training a step's model failed: {exc}", job.path) from exc
    client = pipe = None
    futs: list = []
    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False, disable=not todo)

    flushed = [time.monotonic()]

    def finished(row: dict) -> None:
        c = row["cube"]
        rows[c] = row
        manifest.record(row)
        st = row.get("stages", {})
        say(f"{'FAILED' if row['error'] else 'done'} {c} in {row['seconds']:.3f} s (read {st.get('read', 0):.3f}, "
            f"compute {st.get('compute', 0):.3f}, write {st.get('write', 0):.3f})"
            + (f": {row['error']}" if row["error"] else f", {row['detections']} detections"))
        if time.monotonic() - flushed[0] >= FLUSH_SECONDS:  # the log as often as the manifest, not per cube
            log.flush()
            flushed[0] = time.monotonic()

    t_start = time.perf_counter()
    try:
        with bars:
            overall = bars.add_task(f"{len(todo)} cube(s)", total=max(len(todo), 1))
            if scheduler or workers > 0:
                from distributed import Client
                from distributed import as_completed as dask_completed

                from hyperapp.pipeline import run_on_worker

                if scheduler:
                    try:
                        client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
                    except (OSError, TimeoutError) as exc:
                        raise InputError(f"cannot reach the Dask scheduler at {scheduler} ({exc}); start it with "
                                         "dask scheduler, and one dask worker per GPU", job.path) from exc
                else:
                    client = Client(_local_cluster(workers))
                futs = [client.submit(run_on_worker, c, steps, str(out), job.dataset, device, memory, pure=False,
                                      key=f"cube-{Path(c).stem}-{time.time_ns()}") for c in todo]
                say(f"submitted {len(todo)} cube(s) to {scheduler or f'{workers} local worker(s)'}")
                done_iter = (f.result() for f in dask_completed(futs))
            else:
                pipe = CubePipeline(steps, str(out), job.dataset, device, memory)
                futs = [pipe.submit(c) for c in todo]
                done_iter = (f.result() for f in futs)  # they finish in this order
            for row in done_iter:
                finished(row)
                bars.update(overall, advance=1, description=f"{Path(row['cube']).stem} "
                            + ("failed" if row["error"] else "done"))
    finally:
        if pipe is not None:
            pipe.close()
            for f in futs:  # cubes written while the run was being stopped: in the manifest too
                if f.done() and not f.cancelled() and f.result()["cube"] not in rows:
                    finished(f.result())
        if client is not None:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()
        manifest.flush()
        log.flush()
    wall = time.perf_counter() - t_start
    failed = _summary(console, job, rows, manifest, skipped)
    stats = stage_summary(list(rows.values()), wall)
    if stats:
        console.print(stats)
        say(stats)
    say(f"finished: {len(rows) - failed} done, {failed} failed, {len(skipped)} skipped")
    log.close()
    return 1 if failed else 0


def stage_summary(rows: list[dict], wall: float) -> str:
    """One line: cubes per second and GB/s of the run, and each stage's median seconds per cube."""
    import statistics

    ok = [r for r in rows if not r["error"]]
    if not ok or wall <= 0:
        return ""
    gb = 0.0
    for r in ok:
        with contextlib.suppress(OSError):
            gb += cube_key(r["cube"])["size"] / 1e9
    med = {s: statistics.median(r.get("stages", {}).get(s, 0.0) for r in ok) for s in ("read", "compute", "write")}
    return (f"{len(ok)} cube(s) in {wall:.2f} s: {len(ok) / wall:.2f} cubes/s, {gb / wall:.2f} GB/s; per cube "
            f"(median): read {med['read'] * 1e3:.1f} ms, compute {med['compute'] * 1e3:.1f} ms, "
            f"write {med['write'] * 1e3:.1f} ms")


def _summary(console, job: Job, rows: dict, manifest: Manifest, skipped: list) -> int:
    """The summary table (every cube up to :data:`TABLE_ROWS`, else the failed ones); returns the
    number of failed cubes."""
    from rich.table import Table

    table = Table(title=f"hyperapp run {Path(job.path).name}")
    for col in ("cube", "seconds", "detections", "error"):
        table.add_column(col, justify="right" if col in ("seconds", "detections") else "left")
    failed = sum(bool(r["error"]) for r in rows.values())
    every = len(job.inputs) <= TABLE_ROWS
    for c in job.inputs:
        r = rows.get(c)
        if r is None:
            if every:
                e = manifest.data["cubes"].get(c, {})
                table.add_row(Path(c).name, "skipped" if c in skipped else "not run", str(e.get("detections", "")), "")
            continue
        if every or r["error"]:
            table.add_row(Path(c).name, f"{r['seconds']:.2f}",
                          "" if r["detections"] is None else str(r["detections"]), r["error"] or "")
    console.print(table)
    if not every:
        console.print(f"{len(rows) - failed} done, {failed} failed, {len(skipped)} skipped "
                      f"(earlier runs); per cube: {manifest.path}")
    return failed
