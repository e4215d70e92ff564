"""``hyperapp --headless run JOB``: a job's steps over many cubes, resumable, on one machine or a cluster.

Each cube is one task (:class:`hyperapp.batch.pipeline.CubePipeline`): open it, run every step through the one
detection or analysis path, write each step's outputs all or nothing. A broken cube fails alone; its error is one
line in the summary and the log. Tasks run

- in this process on two threads (the default), so reading the next cube overlaps the work on the
  current one;
- on a local Dask cluster of ``--workers N`` processes (one per GPU where there are several, pinned
  with ``CUDA_VISIBLE_DEVICES``; two threads each, for the same overlap), or
- on an existing Dask cluster (``--scheduler ADDRESS``).

Each cube streams through the bounded-memory path when it does not fit (:func:`hyperapp.detect.run.run_detection`),
so a worker's memory stays bounded. ``manifest.json`` in the output folder records, per cube, its size and
modification time, the hyperapp version and, per step, the hash of its settings and its output folder; a
second run skips the cubes whose every step matches and whose outputs exist, so a killed run resumes where
it stopped, and a failing run never erases an earlier run's records of the outputs it did not rewrite.
Each cube writes into its own folder (its file name's stem, made unique where two inputs share one), each
step into a folder of its name inside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path

from hyperapp import __version__
from hyperapp.batch.folders import cube_folder, step_folder  # noqa: F401
from hyperapp.batch.jobfile import LOCK, LOG, MANIFEST, MODELS, Job, Step
from hyperapp.batch.pipeline import CubePipeline
from hyperapp.core.errors import HyperappError, InputError

#: the manifest (and the log) are rewritten at most this often while cubes finish, and at the end
FLUSH_SECONDS = 0.5
#: the summary lists every cube up to this many; beyond, the failed ones and the totals
TABLE_ROWS = 100
#: threads of a Dask worker: each task waits on the worker's pipeline while its cube is in a stage
WORKER_THREADS = 4
#: seconds to wait for a ``--scheduler`` to answer
CONNECT_TIMEOUT = 10


def cube_key(path: str) -> dict:
    """What identifies a cube's contents cheaply: size and modification time of its data files."""
    p = Path(path)
    files = [p]
    if p.suffix.lower() == ".hdr":
        files += [f for f in (p.with_suffix(".img"), p.with_suffix(".raw"), p.with_suffix(".dat"), p.with_suffix(""))
                  if f.is_file() and f != p]
    files = [f for f in files if f.is_file()]
    if not files:
        raise FileNotFoundError(path)
    return {"size": sum(f.stat().st_size for f in files), "mtime": max(f.stat().st_mtime for f in files)}


def detections_text(detections) -> str:
    """A summary cell: each detect step's pixel count ("sam 12, rbfn 30"), never their sum."""
    if not detections:
        return ""
    if isinstance(detections, dict):
        return ", ".join(f"{k} {v}" for k, v in detections.items())
    return str(detections)


class Manifest:
    """``manifest.json``: per cube, what each step's output folder holds (the hash of the step's
    settings) and the last run's status; written atomically.

    Records are per step: a run that fails on a cube keeps the earlier runs' records of the steps it did
    not rewrite, so a rerun of an earlier job still finds its finished outputs.
    """

    def __init__(self, out: Path, steps: dict[str, str]):
        self.path = out / MANIFEST
        self.steps = steps
        self.lock = threading.Lock()
        self._dirty = False
        self._flushed = time.monotonic()
        try:
            self.data = json.loads(self.path.read_text())
            if not isinstance(self.data, dict) or not isinstance(self.data.get("cubes", {}), dict):
                self.data = {}
        except (OSError, ValueError):
            self.data = {}
        self.data.setdefault("cubes", {})

    def _same_cube(self, e: dict, key: dict) -> bool:
        return (e.get("version") == __version__ and e.get("size") == key.get("size")
                and e.get("mtime") == key.get("mtime"))

    def done(self, path: str) -> bool:
        """Whether every step of this job has its output for ``path``, made from the same cube by this
        hyperapp with the same settings."""
        e = self.data["cubes"].get(path)
        if not isinstance(e, dict):
            return False
        try:
            key = cube_key(path)
        except OSError:
            return False
        rec = e.get("steps") if isinstance(e.get("steps"), dict) else {}
        return self._same_cube(e, key) and all(
            isinstance(rec.get(name), dict) and rec[name].get("fingerprint") == fp
            and (Path(str(rec[name].get("output"))) / "report.json").is_file()
            for name, fp in self.steps.items())

    def detections(self, path: str) -> dict:
        """This job's steps' detection counts recorded for ``path`` (a cube a rerun skips): only its own
        steps' records, made with its settings, so another job writing into the same folder does not
        lend its counts."""
        e = self.data["cubes"].get(path)
        rec = e.get("steps") if isinstance(e, dict) and isinstance(e.get("steps"), dict) else {}
        return {name: rec[name]["detections"] for name, fp in self.steps.items()
                if isinstance(rec.get(name), dict) and rec[name].get("fingerprint") == fp
                and "detections" in rec[name]}

    def record(self, row: dict) -> None:
        """Enter a finished cube (with its seconds per stage); the file is rewritten when its last
        write is :data:`FLUSH_SECONDS` old (rewriting it after every cube costs a run of many cubes
        time that grows with their number; a ``kill -9`` redoes at most that last half second's cubes,
        whose outputs, all or nothing, are simply written again) and by :meth:`flush`."""
        path = row["cube"]
        try:
            key = cube_key(path)
        except OSError:
            key = {}
        with self.lock:
            old = self.data["cubes"].get(path)
            old = old if isinstance(old, dict) and self._same_cube(old, key) else {}
            steps = dict(old.get("steps") or {})
            found = row.get("detections") or {}
            for name, folder in row.get("steps", {}).items():  # the folders this run rewrote
                steps[name] = {"fingerprint": self.steps.get(name), "output": folder}
                if isinstance(found, dict) and name in found:  # each step's own count, for a later summary
                    steps[name]["detections"] = found[name]
            ours = [steps[n]["output"] for n in self.steps if n in steps]
            outputs = ours + [v["output"] for n, v in steps.items() if n not in self.steps]
            entry = {**key, "version": __version__, "seconds": row["seconds"], "detections": row["detections"],
                     "outputs": outputs, "steps": steps, "stages": row.get("stages", {})}
            if not row["error"]:
                entry.update(status="done", error=None)
            elif old.get("status") == "done":
                # an earlier run's finished outputs stay recorded; this run's failure is noted beside them
                entry.update(status="done", error=None, seconds=old.get("seconds"),
                             detections=old.get("detections"), last_failure=row["error"])
            else:
                entry.update(status="failed", error=row["error"])
            self.data["cubes"][path] = entry
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


def _train_models(job: Job, device: str) -> dict[str, object]:
    """Steps with ``train``: fit once on that cube (on the step's bands,
    :func:`hyperapp.detect.training.train_on_scene`) and return the models by step name; :func:`_save_models`
    writes them where every cube then loads them."""
    from hyperapp.detect.training import train_on_scene

    return {s.name: train_on_scene(r.train, r.method, r.train_truth, r.background, dataset=job.dataset,
                                   bands=r.bands, all_bands=r.all_bands, params=r.params, device=device)
            for s, r in ((s, s.request) for s in job.steps) if s.kind == "detect" and r.train}


def _save_models(job: Job, models: dict, out: Path) -> list[dict]:
    """The steps as :class:`hyperapp.batch.pipeline.CubePipeline` takes them, the trained ones pointing at their
    saved model."""
    from hyperapp.detect.model_files import save_model

    steps = []
    for s in job.steps:
        if s.name in models:
            # ``train`` stays: errors name the scene, not the cache
            model = str(save_model(models[s.name], out / MODELS / f"{s.name}.npz", method=s.method))
            s = Step(s.kind, s.name, s.request.replace(model=model, train_truth=None, background=None))
        steps.append(s.to_dict())
    return steps


def _connect(scheduler: str):
    """A client of the Dask cluster at ``scheduler``; one that cannot be reached in
    :data:`CONNECT_TIMEOUT` seconds, or that does not answer as a Dask scheduler (an HTTP server on the
    dashboard's port, a silent one), is an :class:`InputError` (before anything is written).

    The client is made on a thread of its own with a deadline: Dask's own timeout did not cover a
    listener that accepts and never answers (a run waited minutes without a word), and a listener that
    answers in another protocol made Dask read its first bytes as a message length (a MemoryError)."""
    import threading

    from distributed import Client

    got: dict = {}

    def connect() -> None:
        try:
            got["client"] = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except BaseException as exc:  # noqa: BLE001  (said below, in the caller's thread)
            got["error"] = exc

    t = threading.Thread(target=connect, name="hyperapp-connect", daemon=True)  # (never joined at exit)
    t.start()
    t.join(CONNECT_TIMEOUT + 5)
    if t.is_alive():
        raise InputError(f"the Dask scheduler at {scheduler} did not answer within {CONNECT_TIMEOUT} s: is it a "
                         "Dask scheduler's address (not its dashboard's)?")
    exc = got.get("error")
    if exc is None:
        return got["client"]
    if isinstance(exc, (ValueError, TypeError)):  # refused at once: not a matter of waiting
        why = ("a tls:// address needs Dask's TLS settings (distributed.comm.tls: certificates)"
               if scheduler.startswith("tls://") else f"{exc.__class__.__name__}: {exc}")
        raise InputError(f"cannot connect to the Dask scheduler at {scheduler}: {why}") from None
    if isinstance(exc, (OSError, TimeoutError)):
        raise InputError(f"cannot reach the Dask scheduler at {scheduler} within {CONNECT_TIMEOUT} s "
                         f"({exc.__class__.__name__})") from None
    if isinstance(exc, Exception):  # something answered, not as a Dask scheduler does
        raise InputError(f"what answers at {scheduler} is not a Dask scheduler ({exc.__class__.__name__}); give "
                         "the address `dask scheduler` printed") from None
    raise exc


def worker_envs(workers: int, n_gpu: int, gpus: int | None, cores: int) -> list[dict[str, str]]:
    """The environment of each of a local cluster's ``workers`` processes on a machine of ``n_gpu`` GPUs
    and ``cores`` cores: each sees one GPU (``CUDA_VISIBLE_DEVICES``, the workers dealt out over the first
    ``gpus`` GPUs, default all) and reads with its share of the cores."""
    use = min(n_gpu, max(1, gpus)) if gpus is not None else n_gpu
    envs = []
    for i in range(workers):
        # the machine's cores shared out: each worker's readers would otherwise start a thread per core,
        # and four workers' 64 threads slowed a campaign's reads fourfold; each worker's reading helper
        # leaves some of its share to the worker's stages (hyperapp.reading.tiles._helper_threads)
        env = {"HYPERAPP_CORES": str(max(2, cores // max(workers, 1)))}
        if use > 1 or use < n_gpu:  # several GPUs, or fewer than the machine has: the worker's own
            env["CUDA_VISIBLE_DEVICES"] = str(i % use)
        envs.append(env)
    return envs


def _local_cluster(workers: int, gpus: int | None = None):
    """:func:`_make_local_cluster`, its worker processes started with Ctrl-C ignored (see
    :func:`_workers_ignore_interrupts`)."""
    with _workers_ignore_interrupts():
        return _make_local_cluster(workers, gpus)


@contextlib.contextmanager
def _workers_ignore_interrupts():
    """SIGINT ignored in this process while a local cluster's worker processes are started, so that
    they start ignoring it: a child inherits an ignored signal across ``exec``, and Python then leaves it
    ignored. Ctrl-C in a terminal goes to every process of its group, and each worker printed its own
    tracebacks under this process's one line; this process stops them itself (the cluster's close). A
    Ctrl-C in the few seconds of the start is ignored too (press it again once the run shows progress).

    Only from the main thread (where signals are handled); elsewhere nothing changes."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _make_local_cluster(workers: int, gpus: int | None = None):
    """A local Dask cluster of ``workers`` processes of :data:`WORKER_THREADS` threads each (one cube in
    each stage of the worker's pipeline, and one waiting); with several GPUs each worker sees one
    (``CUDA_VISIBLE_DEVICES``, the workers dealt out over the first ``gpus`` of them, default all);
    dask-cuda's cluster where it is installed."""
    from hyperapp.core.backend import gpu_available

    n_gpu = 0
    if gpu_available():
        import cupy

        n_gpu = cupy.cuda.runtime.getDeviceCount()
    pinned = gpus is not None and gpus < n_gpu  # workers on fewer GPUs than the machine has
    if n_gpu > 1 and not pinned:
        try:
            from dask_cuda import LocalCUDACluster

            return LocalCUDACluster(n_workers=min(workers, n_gpu), threads_per_worker=WORKER_THREADS)
        except ImportError:
            pass
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    specs = {f"hyperapp-{i}": {"cls": Nanny, "options": {"nthreads": WORKER_THREADS, "env": env, "memory_limit": 0}}
             for i, env in enumerate(worker_envs(workers, n_gpu, gpus, os.cpu_count() or 2))}
    # a worker reads its logging settings when it imports Dask, before the nanny's ``env`` reaches it:
    # only an environment set before the process is spawned quiets its INFO lines (dozens a run)
    quiet = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), "DASK_LOGGING__DISTRIBUTED": "error"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": quiet}):
        return SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                           silence_logs=40)


def run_job(job: Job, workers: int = 0, scheduler: str | None = None, device: str = "auto",
            memory: float | None = None, console=None) -> int:
    """Run ``job``; prints progress and a summary; returns 0 (all cubes done), 1 (some failed)."""
    from rich.console import Console

    from hyperapp.core.progress import ProgressDisplay
    from hyperapp.io.atomic import ensure_dir
    from hyperapp.request import checks as options

    workers = options.workers(workers, "--workers")
    memory = options.memory(memory, "--memory") if memory is not None else None
    scheduler = options.scheduler(scheduler, "--scheduler") if scheduler is not None else None
    console = console or Console(stderr=True)
    for own, what in ((MANIFEST, "manifest"), (LOG, "log")):  # before anything is read or written
        p = Path(job.output) / own
        if p.exists() and not p.is_file():
            raise _folder_error(job, f"{p} is not a file: the run keeps its {what} under this name; move it away")
    manifest = Manifest(Path(job.output), job.step_fingerprints())
    todo = [c for c in job.inputs if not manifest.done(c)]
    skipped = [c for c in job.inputs if c not in todo]
    if todo and scheduler is None and device == "gpu":
        from hyperapp.core.backend import get_backend

        get_backend("gpu")  # no GPU on this machine (or its local workers'): one line, before anything is written
    client = _connect(scheduler) if scheduler and todo else None  # before anything is written
    if todo and scheduler is None and device != "cpu":  # (local workers share this kernel cache)
        note = unprepared_note()
        if note:
            console.print(note, markup=False, highlight=False, soft_wrap=True)
    try:
        models = _train_models(job, device) if todo else {}
    except HyperappError as exc:
        if client is not None:
            client.close()
        raise InputError(f"training a step's model failed: {exc}", job.path) from exc
    except BaseException:
        if client is not None:
            client.close()
        raise
    try:
        out = ensure_dir(job.output)
        lock = _lock_output(out)  # held to the end: a second run into this folder is refused, not interleaved
    except HyperappError as exc:
        if client is not None:
            client.close()
        raise _folder_error(job, str(exc)) from None
    steps = _save_models(job, models, out)
    log = open(out / LOG, "a", encoding="utf-8")  # noqa: SIM115  (closed below)

    def say(msg: str) -> None:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")

    say(f"job {job.path}: {len(job.inputs)} cube(s), {len(job.steps)} step(s), hyperapp {__version__}")
    if job.skipped:
        why = sorted(set(job.skipped.values()))
        line = f"left out {len(job.skipped)} file(s) the inputs matched that are not cubes: {'; '.join(why)}"
        console.print(line, markup=False, highlight=False, soft_wrap=True)
        say(line)
    if job.twice:
        line = (f"left out {len(job.twice)} input(s) that are the same file as one listed before (the path again, "
                f"or a link to it): {', '.join(Path(f).name for f in job.twice[:5])}; each cube runs once")
        console.print(line, markup=False, highlight=False, soft_wrap=True)
        say(line)
    for c in skipped:
        say(f"skip {c}: done by an earlier run with the same steps")
    rows: dict[str, dict] = {}
    pipe = None
    futs: list = []
    bars = ProgressDisplay(max(len(todo), 1), console, counted=True, enabled=bool(todo))
    flushed = [time.monotonic()]

    def finished(row: dict) -> None:
        c = row["cube"]
        rows[c] = row
        manifest.record(row)
        st = row.get("stages", {})
        say(f"{'FAILED' if row['error'] else 'done'} {c} in {row['seconds']:.3f} s (read {st.get('read', 0):.3f}, "
            f"compute {st.get('compute', 0):.3f}, write {st.get('write', 0):.3f})"
            + (f": {row['error']}" if row["error"] else f", detections {detections_text(row['detections'])}"))
        if time.monotonic() - flushed[0] >= FLUSH_SECONDS:  # the log as often as the manifest, not per cube
            log.flush()
            flushed[0] = time.monotonic()

    t_start = time.perf_counter()
    stopped: KeyboardInterrupt | None = None
    ended = False
    try:
        with bars:
            bars.show(0, f"{len(todo)} cube(s)")
            if (scheduler or workers > 0) and todo:
                from distributed import Client
                from distributed import as_completed as dask_completed

                from hyperapp.batch.pipeline import run_on_worker

                if client is None:
                    client = Client(_local_cluster(workers))
                futs = [client.submit(run_on_worker, c, steps, str(out), job.dataset, device, memory, job.folder_of(c),
                                      job.truth.get(c), job.band_axis, pure=False, key=f"cube-{job.folder_of(c)}-{time.time_ns()}")
                        for c in todo]
                say(f"submitted {len(todo)} cube(s) to {scheduler or f'{workers} local worker(s)'}")
                done_iter = (f.result() for f in dask_completed(futs))
            else:
                pipe = CubePipeline(steps, str(out), job.dataset, device, memory, band_axis=job.band_axis)
                futs = [pipe.submit(c, job.folder_of(c), job.truth.get(c)) for c in todo]
                done_iter = (f.result() for f in futs)  # they finish in this order
            for row in done_iter:
                finished(row)
                bars.show(len(rows), f"{job.folder_of(row['cube'])} " + ("failed" if row["error"] else "done"))
        ended = True
    except KeyboardInterrupt as exc:  # the finished cubes' folders stay: the CLI says how many
        stopped = exc
        say(f"{'terminated' if exc.__class__.__name__ == 'Terminated' else 'interrupted'}: "
            f"{sum(not r['error'] for r in rows.values())} cube(s) done in this run are kept")
        raise
    finally:
        if pipe is not None:
            try:
                pipe.close()  # the cube being computed stops at its next check; the one being written finishes
            except KeyboardInterrupt:
                # a second interrupt while the stages stop (seen in one run of five, in the threads' join):
                # they stop on their own (the pipeline is closed), and the first interrupt, which says how
                # many cubes are kept, is the one that goes on (this one said "nothing written")
                pass
        # cubes written (by this pipeline, or the cluster's workers) while the run was being stopped: in the
        # manifest too (before the client closes, while the cluster's results can still be asked for)
        for row in _finished_rows(futs) if not ended else ():
            if row["cube"] not in rows:
                finished(row)
        if client is not None:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()
        manifest.flush()
        log.flush()
        if stopped is not None:  # counted once the pipeline has closed: cubes written while it stopped too
            stopped.kept = len(skipped) + sum(not r["error"] for r in rows.values())
        if not ended:
            _unlock(lock)
    wall = time.perf_counter() - t_start
    failed = _summary(console, job, rows, manifest, skipped)
    stats = stage_summary(list(rows.values()), wall)
    if stats:
        console.print(stats)
        say(stats)
    say(f"finished: {len(rows) - failed} done, {failed} failed, {len(skipped)} skipped")
    log.close()
    _unlock(lock)
    return 1 if failed else 0


def _finished_rows(futs: list):
    """The summary rows of the futures in ``futs`` already finished (a pipeline's or a Dask cluster's),
    without waiting; a cancelled or failed one (a worker's failure, a cluster already gone) gives none."""
    for f in futs:
        try:
            row = f.result(timeout=0) if f.done() and not f.cancelled() else None
        except Exception:  # noqa: BLE001  (not kept: its cube runs again next time)
            row = None
        if row is not None:
            yield row


def unprepared_note() -> str | None:
    """A line for a batch about to run on this machine's GPU whose kernels were never prepared: each
    kernel's first use then compiles it in the middle of the run (0.35-0.45 s on one cube of a 50-cube RBFN
    batch on a fresh H200, seconds for others); None where they were, or there is no GPU."""
    from hyperapp.batch.prepare_gpu import is_prepared
    from hyperapp.core.backend import gpu_available

    try:
        if not gpu_available() or is_prepared():
            return None
    except Exception:  # noqa: BLE001  (a device that cannot say its compute capability: no note, the run goes on)
        return None
    return ("note: this installation's GPU kernels are not prepared: each is compiled on its first use, in the "
            "middle of this run; `hyperapp --headless prepare-gpu` compiles them all once, ahead")


def _folder_error(job: Job, what: str) -> InputError:
    """A problem with the job's output folder found when the run starts (the system's answer, another
    run), named as the job file's key, as the job's own checks name theirs."""
    from hyperapp.batch.jobfile import _err

    return _err(Path(job.path), "output.folder", what)


def _lock_output(out: Path):
    """An exclusive lock on the job's output folder (``flock`` on :data:`LOCK` in it), held by the open file
    this returns until :func:`_unlock`: two runs into one folder would rewrite each other's manifest (a
    finished cube's record lost, so the next run computes it again) and interleave their outputs and log.
    Another run holding it is one line; None where files cannot be locked (not POSIX)."""
    try:
        import fcntl
    except ImportError:
        return None
    fh = open(out / LOCK, "a")  # noqa: SIM115  (held open: the lock lasts as long as the file)
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise InputError(f"{out}: another hyperapp run is writing into this folder: wait for it to end, or give "
                         "the job another folder") from None
    return fh


def _unlock(lock) -> None:
    if lock is not None:
        lock.close()


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
        # an error wraps, whole: cut with an ellipsis, a long path lost the file's name the line was about
        table.add_column(col, justify="right" if col in ("seconds", "detections") else "left",
                         overflow="fold" if col == "error" else "ellipsis")
    failed = sum(bool(r["error"]) for r in rows.values())
    every = len(job.inputs) <= TABLE_ROWS
    for c in job.inputs:
        r = rows.get(c)
        if r is None:
            if every:
                table.add_row(job.folder_of(c), "skipped" if c in skipped else "not run",
                              detections_text(manifest.detections(c)), "")
            continue
        if every or r["error"]:
            table.add_row(job.folder_of(c), f"{r['seconds']:.2f}",
                          detections_text(r["detections"]), r["error"] or "")
    console.print(table)
    if not every:
        console.print(f"{len(rows) - failed} done, {failed} failed, {len(skipped)} skipped "
                      f"(earlier runs); per cube: {manifest.path}")
    return failed
