"""Whole-path bench cases: from a file on disk to results on disk, in a fresh process each time.

A person feels the time from a file to its results, not a kernel's: these cases write ENVI cubes of
realistic size (2048 x 2048 x 128 float32 in BIL, BSQ and BIP, and uint16 BIL), measure the machine's
page-cache read rate on each (the floor for loading it), and time ``hyperapp --headless detect`` in a
new Python process per run (imports, CUDA start, kernel loading from CuPy's on-disk cache, reading,
fit, score, outputs), on the GPU and on the CPU. The first run of all uses an empty kernel cache, so
the cost of compiling the kernels once per installation shows beside the cached runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from hyperapp.bench import Measurement, bench_case, setting_counts
from hyperapp.io.writers import write_envi_cube

#: sizes and device of the cases (a dry run on a CPU machine sets small ones and "cpu")
FILE_SHAPE = (2048, 2048, 128)
BATCH_CUBES, BATCH_SHAPE = 50, (512, 512, 128)
DEVICE = "gpu"


def page_cache_read(path: Path, repeats: int = 2) -> float:
    """Seconds to read a file (already in the page cache after the first pass) into user memory."""
    buf = bytearray(64 << 20)
    best = float("inf")
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        with open(path, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
        best = min(best, time.perf_counter() - t0)
    return best


def fresh_env(env: dict | None = None) -> dict:
    """The environment of the bench's fresh processes: this one's, with ``env`` over it.

    Python may read and write bytecode as on an installed system, where pip compiled it once: a process
    that recompiles every module it imports would time the interpreter, not hyperapp (0.6-0.7 s on the
    H100 host). So ``PYTHONDONTWRITEBYTECODE`` is dropped, and a ``PYTHONPYCACHEPREFIX`` is set only where
    the package's folder is not writable. A prefix is a trap otherwise: Python then reads bytecode from
    it alone, for every module (the standard library's, NumPy's and CuPy's too), so the first process
    to use it compiles all it imports (SAM, the first-run case's first process after a ``prepare-gpu``
    run outside the prefix, took 2.3-2.4 s against 0.8-0.9 s for its second).
    """
    env = {**os.environ, **(env or {})}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not os.access(Path(__file__).parent, os.W_OK):
        env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "hyperapp-bench-pycache"))
    return env


def fresh_run(args: list[str], env: dict | None = None) -> tuple[float, dict]:
    """Wall seconds of ``hyperapp --headless ARGS`` in a new process (:func:`fresh_env`), and its report."""
    env = fresh_env(env)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "hyperapp", "--headless", *args], capture_output=True, text=True,
                       cwd=tempfile.gettempdir(),
                       env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"hyperapp {' '.join(args)} failed: {r.stderr.strip()[-400:]}")
    out = Path(args[args.index("--out") + 1])
    return wall, json.loads((out / "report.json").read_text())


#: the cubes ``file-to-result-2048x2048x128`` writes and measures (``HYPERAPP_FILE_CUBES="float32-bil"`` to
#: measure fewer); ``HYPERAPP_FILE_CPU_RUNS`` fresh CPU runs each (default 3; 0: the GPU path alone)
FILE_CUBES = ("float32-bil", "float32-bsq", "float32-bip", "uint16-bil")


def _file_settings() -> tuple[tuple[str, ...], int]:
    """The cubes and CPU runs of ``file-to-result-2048x2048x128`` (:data:`FILE_CUBES`); a name it does not
    write is an :class:`~hyperapp.core.errors.InputError` naming the setting."""
    from hyperapp.core.errors import InputError

    raw = os.environ.get("HYPERAPP_FILE_CUBES", "").strip()
    chosen = tuple(v.strip() for v in raw.split(",") if v.strip()) if raw else FILE_CUBES
    unknown = [v for v in chosen if v not in FILE_CUBES]
    if unknown or not chosen:
        raise InputError(f"HYPERAPP_FILE_CUBES={raw!r}: give some of {', '.join(FILE_CUBES)}, separated by commas")
    return chosen, setting_counts("HYPERAPP_FILE_CPU_RUNS", "3", 0)[0]


@bench_case("file-to-result-2048x2048x128")
def file_to_result(ctx) -> list[Measurement]:
    """File -> scores, mask, objects and report on disk, in a fresh process: RBFN and ACE on a 2 GB
    float32 cube in BIL, BSQ and BIP and a 1 GB uint16 one, GPU (median of five) against CPU (median of
    three) on each, load against the page-cache read rate."""
    rng = np.random.default_rng(0)
    rows, cols, bands = FILE_SHAPE
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    ab = rng.dirichlet(np.ones(6), rows * cols).astype(np.float32)
    X = (ab @ ends + rng.normal(0, 0.01, (rows * cols, bands)).astype(np.float32)).reshape(rows, cols, bands)
    del ab
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="hyperapp-bench-") as tmp:
        d = Path(tmp)
        clicks = d / "t.csv"
        pick = rng.choice(rows * cols, 5, replace=False)
        clicks.write_text("row,col\n" + "".join(f"{p // cols},{p % cols}\n" for p in pick))
        chosen, cpu_runs = _file_settings()
        cubes = {f"float32-{il}": write_envi_cube(d / f"f32{il}", X, il) for il in ("bil", "bsq", "bip")
                 if f"float32-{il}" in chosen}
        if "uint16-bil" in chosen:
            cubes["uint16-bil"] = write_envi_cube(d / "u16bil", (X * 10000).astype(np.uint16), "bil")
        del X
        # a Python process that imports CuPy and starts CUDA: what every fresh run pays first
        t0 = time.perf_counter()
        if DEVICE == "gpu":
            subprocess.run([sys.executable, "-c", "import cupy; cupy.zeros(1).sum().get()"], check=True)
        start_s = time.perf_counter() - t0
        cold_cache = {"CUPY_CACHE_DIR": str(d / "kernel-cache")}
        first = True
        for name, hdr in cubes.items():
            read_s = page_cache_read(hdr.with_suffix(".img"))
            size_gb = hdr.with_suffix(".img").stat().st_size / 1e9
            for method in ("rbfn", "ace"):
                args = ["detect", str(hdr), "--method", method, "--targets", str(clicks), "--far", "1e-3"]
                notes = {"file_GB": round(size_gb, 3), "page_cache_read_s": round(read_s, 3),
                         "page_cache_GBps": round(size_gb / read_s, 2), "python+cupy+cuda_start_s": round(start_s, 3)}
                if first:  # empty kernel cache: every kernel compiles in this run
                    wall, _ = fresh_run(args + ["--device", DEVICE, "--out", str(d / "cold")], cold_cache)
                    notes["first_run_empty_kernel_cache_s"] = round(wall, 3)
                    first = False
                fresh_run(args + ["--device", DEVICE, "--out", str(d / "warm")], cold_cache)  # page cache warm
                walls = []
                for _ in range(5):  # a fresh process's start varies by 0.1-0.3 s: the median of five
                    w, rep = fresh_run(args + ["--device", DEVICE, "--out", str(d / "gpu")], cold_cache)
                    walls.append(w)
                gpu_s = float(np.median(walls))
                notes["gpu_walls_s"] = [round(w, 3) for w in walls]
                notes["gpu_stages_s"] = {k: round(v, 3) for k, v in rep["seconds"].items()}
                notes["load_vs_page_cache"] = round(rep["seconds"].get("load", float("nan")) / read_s, 2)
                cpu_walls = []
                for _ in range(cpu_runs):  # the CPU path on every cube, the median of its fresh processes (three unless told)
                    w, crep = fresh_run(args + ["--device", "cpu", "--out", str(d / "cpu")])
                    cpu_walls.append(w)
                cpu_s = float(np.median(cpu_walls)) if cpu_walls else None
                if cpu_walls:
                    notes["cpu_walls_s"] = [round(w, 3) for w in cpu_walls]
                    notes["cpu_stages_s"] = {k: round(v, 3) for k, v in crep["seconds"].items()}
                out.append(Measurement(f"file-to-result-{method}-{name}", gpu_s * 1e3,
                                       None if cpu_s is None else cpu_s * 1e3,
                                       "page-cache read of the file",
                                       read_s * 1e3, notes=notes))
    return out


class GpuBusy:
    """The share of a stretch of time in which the GPU was running a kernel, sampled from NVML
    (``nvidia-ml-py``: the driver's utilisation counter, the percentage of its last sample period with
    a kernel executing) every 20 ms on a thread; ``share`` is None where NVML is not installed."""

    def __init__(self, period: float = 0.02):
        self.period, self.samples, self.share = period, [], None
        self._stop = threading.Event()

    def _run(self, nvml, handle) -> None:
        while not self._stop.wait(self.period):
            self.samples.append(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)

    def __enter__(self):
        try:
            import pynvml as nvml

            nvml.nvmlInit()
            import cupy

            handle = nvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.Device().pci_bus_id.encode())
        except Exception:  # noqa: BLE001  (no NVML: no figure)
            self._thread = None
            return self
        self._thread = threading.Thread(target=self._run, args=(nvml, handle), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self.samples:
                self.share = round(sum(self.samples) / len(self.samples) / 100, 3)
        return False


class GpuBusyOrSmi(GpuBusy):
    """:class:`hyperapp.bench.whole_path.GpuBusy` (NVML), or where ``pynvml`` is missing ``nvidia-smi``'s
    utilisation sampled every 100 ms; ``source`` says which."""

    def __enter__(self):
        super().__enter__()
        self.source = "nvml" if self._thread is not None else None
        self._smi = None
        if self._thread is None:
            self._start_smi()
        return self

    def _start_smi(self) -> None:
        import shutil

        if shutil.which("nvidia-smi") is None:
            return
        try:
            import cupy

            bus = cupy.cuda.Device().pci_bus_id
        except Exception:  # noqa: BLE001  (no GPU: no figure)
            return
        self._smi = subprocess.Popen(["nvidia-smi", f"--id={bus}", "--query-gpu=utilization.gpu",
                                      "--format=csv,noheader,nounits", "-lms", "100"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

        def pump() -> None:
            for line in self._smi.stdout:
                try:
                    self.samples.append(float(line.strip()))
                except ValueError:
                    pass

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()
        self.source = "nvidia-smi"

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self._smi is not None:
            self._smi.terminate()
            self._smi.wait()
            self._reader.join(timeout=2)
            if self.samples:
                self.share = round(sum(self.samples) / len(self.samples) / 100, 3)
        return False


#: the large-file case: 10240 x 4096 x 128 float32, 21.5 GB
LARGE_SHAPE = (10240, 4096, 128)


@bench_case("file-to-result-20gb")
def large_file(ctx) -> list[Measurement]:
    """A 21.5 GB float32 BIL cube (10240 x 4096 x 128), written a block of rows at a time: RBFN in a
    fresh process held on the GPU (it fits the default budgets), then ACE and RBFN streamed in two
    passes under ``--memory 4``, with each process's peak resident memory."""
    import resource

    rows, cols, bands = LARGE_SHAPE
    rng = np.random.default_rng(2)
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="hyperapp-large-") as tmp:
        d = Path(tmp)
        img = d / "large.img"
        with open(img, "wb") as fh:
            for r0 in range(0, rows, 256):
                n = min(256, rows - r0)
                ab = rng.dirichlet(np.ones(6), n * cols).astype(np.float32)
                block = (ab @ ends).reshape(n, cols, bands)
                np.ascontiguousarray(block.transpose(0, 2, 1)).tofile(fh)  # BIL
        hdr = img.with_suffix(".hdr")
        hdr.write_text(f"ENVI\nsamples = {cols}\nlines = {rows}\nbands = {bands}\nheader offset = 0\n"
                       "file type = ENVI Standard\ndata type = 4\ninterleave = bil\nbyte order = 0\n")
        (d / "t.csv").write_text(f"row,col\n10,10\n{rows // 2},{cols // 2}\n{rows - 10},{cols // 9}\n")
        read_s = page_cache_read(img, repeats=1)
        size_gb = img.stat().st_size / 1e9
        small = str(min(4.0, size_gb / 4 / 1.074))  # GB: a quarter of the cube at most
        for name, method, extra in (("streamed-ace", "ace", ["--memory", small]),
                                    ("streamed-rbfn", "rbfn", ["--memory", small]),
                                    ("on-gpu-rbfn", "rbfn", [])):
            args = ["detect", str(hdr), "--method", method, "--targets", str(d / "t.csv"), "--device", DEVICE,
                    "--out", str(d / name), *extra]
            wall, rep = fresh_run(args)
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # GB, max over runs so far
            notes = {"file_GB": round(size_gb, 2), "streamed": rep["streamed"], "peak_rss_GB_so_far": round(peak, 2),
                     "stages_s": {k: round(v, 2) for k, v in rep["seconds"].items()}, "detections": rep["detections"]}
            out.append(Measurement(f"file-to-result-20gb-{name}", wall * 1e3, None, "page-cache read of the file",
                                   read_s * 1e3, notes=notes))
    return out


def gpu_count() -> int:
    """GPUs this process sees (0 without CuPy or a driver)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001  (no CuPy or no driver: none)
        return 0


def _timed_run(job_path: Path, output: str, inputs: int | None = None, **kw) -> float:
    """Wall seconds of :func:`hyperapp.batch.runner.run_job` on the job of ``job_path`` into folder ``output``
    (of its first ``inputs`` cubes where given); ``kw``: ``workers`` or ``scheduler``. A failed cube
    fails the measurement."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job

    job = load_job(job_path)
    job.inputs = job.inputs[:inputs] if inputs else job.inputs
    job.output = str(job_path.parent / output)
    t0 = time.perf_counter()
    if run_job(job, device=DEVICE, **kw) != 0:
        raise RuntimeError(f"the run into {job.output} failed; see its hyperapp-batch.log")
    return time.perf_counter() - t0


def _on_warm_cluster(job_path: Path, tag: str, workers: int, warm_cubes: int, gpus: int | None = None) -> float:
    """Wall seconds of the job on a local cluster of ``workers`` processes (over the first ``gpus`` GPUs,
    default all), as ``--scheduler`` runs it on a cluster started beforehand: the cluster's start and
    each worker's first cubes are left out (a warm-up job of ``warm_cubes`` cubes runs first)."""
    from hyperapp.batch.runner import _local_cluster

    cluster = _local_cluster(workers, gpus=gpus)
    try:
        addr = cluster.scheduler_address
        _timed_run(job_path, f"out-warm-{tag}", warm_cubes, scheduler=addr)
        return _timed_run(job_path, f"out-{tag}", scheduler=addr)
    finally:
        cluster.close()


def one_worker_per_gpu(job_path: Path, name: str, gb: float, rate: str) -> Measurement:
    """The job on two Dask workers, one per GPU, against one worker: each cluster started by hand and
    warmed first (as ``--scheduler`` runs it on a cluster of ``dask worker`` processes started with
    ``CUDA_VISIBLE_DEVICES``: the figure of a long campaign); the same job through ``--workers N``,
    whose wall time includes the cluster's start and each worker's first cubes, goes into the notes.

    ``rate``: the notes' name of the figure per second (``cubes_per_s`` or ``GBps``)."""
    from hyperapp.batch.jobfile import load_job

    warm_walls = {w: _on_warm_cluster(job_path, f"w{w}", w, 4 * w) for w in (1, 2)}
    cold_walls = {w: _timed_run(job_path, f"out-cold-w{w}", workers=w) for w in (1, 2)}
    n = len(load_job(job_path).inputs)

    def per_s(wall: float) -> float:
        return float(f"{(n if rate == 'cubes_per_s' else gb) / wall:.3g}")  # a --quick run's few MB stay above 0

    return Measurement(f"{name}-two-workers", warm_walls[2] * 1e3, None, "one worker", warm_walls[1] * 1e3,
                       notes={"speedup": round(warm_walls[1] / warm_walls[2], 2), f"{rate}_two": per_s(warm_walls[2]),
                              f"{rate}_one": per_s(warm_walls[1]),
                              "with_cluster_start": {"speedup": round(cold_walls[1] / cold_walls[2], 2),
                                                     "seconds_one": round(cold_walls[1], 2),
                                                     "seconds_two": round(cold_walls[2], 2)},
                              "clusters": "one Dask worker per GPU, started and warmed before timing"})


#: worker processes sharing one device in the batch case's last variant
SHARED_DEVICE_WORKERS = 4


def _processes_on_one_device(job_path: Path, name: str, gb: float, warm_cubes: int | None = None) -> Measurement:
    """The from-clicks job through :data:`SHARED_DEVICE_WORKERS` Dask worker processes that share the one
    device (the first GPU), as ``--scheduler`` runs it on a cluster started beforehand
    (:func:`_on_warm_cluster`). A cube's fit and bookkeeping are host Python, one GIL per process: a
    second and third process overlap what threads of one cannot."""
    from hyperapp.batch.jobfile import load_job

    wall = _on_warm_cluster(job_path, "workers", SHARED_DEVICE_WORKERS, warm_cubes or 3 * SHARED_DEVICE_WORKERS,
                            gpus=1)
    n = len(load_job(job_path).inputs)
    return Measurement(f"{name}-rbfn-{SHARED_DEVICE_WORKERS}-processes-one-device", wall * 1e3,
                       notes={"cubes_per_s": round(n / wall, 2), "GBps": round(gb / wall, 2),
                              "workers": SHARED_DEVICE_WORKERS, "device": DEVICE})


@bench_case("batch-50x512x512x128")
def batch_throughput(ctx) -> list[Measurement]:
    """A job of 50 cubes of 512 x 512 x 128 (float32, BIL), RBFN from clicks (fitted on each cube) and
    RBFN trained once (``train``): cubes per second of the whole run against one cube alone (warm, in
    process, no overlap), each stage's median time per cube, and the share of the run the GPU was busy;
    with two GPUs, two workers against one."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.pipeline import CubePipeline
    from hyperapp.batch.runner import _save_models, _train_models, run_job
    from hyperapp.bench.settle import stage_medians
    from hyperapp.io.atomic import ensure_dir

    rng = np.random.default_rng(1)
    rows, cols, bands = BATCH_SHAPE
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    out: list[Measurement] = []
    name = f"batch-{BATCH_CUBES}x{rows}x{cols}x{bands}"
    with tempfile.TemporaryDirectory(prefix="hyperapp-batch-") as tmp:
        d = Path(tmp)
        (d / "scenes").mkdir()
        for i in range(BATCH_CUBES):
            ab = rng.dirichlet(np.ones(6), rows * cols).astype(np.float32)
            X = (ab @ ends).reshape(rows, cols, bands) + rng.normal(0, 0.01, (rows, cols, bands)).astype(np.float32)
            write_envi_cube(d / "scenes" / f"s{i:02d}", X, "bil")
        from hyperapp.bench.settle import settle_writes

        settle_writes()
        (d / "t.csv").write_text(f"row,col\n10,10\n{rows // 2},{cols // 2}\n")
        gb = sum(p.stat().st_size for p in (d / "scenes").glob("*.img")) / 1e9
        variants = {"rbfn": "", "rbfn-trained-once": 'train = "scenes/s00.hdr"\n'}
        for variant, extra in variants.items():
            job_path = d / f"job-{variant}.toml"
            job_path.write_text('[inputs]\npaths = ["scenes/*.hdr"]\n[[steps]]\ndetect = "rbfn"\n'
                                f'targets = "t.csv"\n{extra}[output]\nfolder = "out-{variant}"\n')
            job = load_job(job_path)
            # the steps as the run gets them (a train step's model fitted and saved once)
            steps = _save_models(job, _train_models(job, DEVICE), ensure_dir(d / f"single-{variant}"))

            def one(c, steps=steps):
                # a cube alone: the pipeline's stages one after the other in this thread, no overlap
                row = CubePipeline(steps, str(d / "single"), None, DEVICE, None).run_one(c)
                if row["error"]:
                    raise RuntimeError(f"{c}: {row['error']}")
                return row

            one(job.inputs[0])  # warm: kernels, memory pools
            t0 = time.perf_counter()
            alone = [one(c) for c in job.inputs[:5]]
            single = (time.perf_counter() - t0) / 5
            with GpuBusyOrSmi() as busy:
                t0 = time.perf_counter()
                if run_job(job, device=DEVICE) != 0:
                    raise RuntimeError("the batch run failed; see its log")
                wall = time.perf_counter() - t0
            n = len(job.inputs)
            notes = {"cubes_per_s": round(n / wall, 2), "GBps": round(gb / wall, 2),
                     "single_cube_per_s": round(1 / single, 2), "throughput_vs_single": round((n / wall) * single, 3),
                     "ms_per_cube": round(wall / n * 1e3, 2), "gpu_busy_share": busy.share,
                     "busy_source": getattr(busy, "source", None),
                     "stage_median_s": stage_medians(Path(job.output)),
                     "alone_stage_median_s": {k: round(float(np.median([r["stages"][k] for r in alone])), 4)
                                              for k in ("read", "compute", "write")},
                     "device": DEVICE}
            out.append(Measurement(f"{name}-{variant}", wall * 1e3, None, "one cube alone x 50",
                                   single * n * 1e3, notes=notes))
        out.append(_processes_on_one_device(d / "job-rbfn.toml", name, gb))
        if gpu_count() >= 2:
            out.append(one_worker_per_gpu(d / "job-rbfn.toml", name, gb, "cubes_per_s"))
    return out
