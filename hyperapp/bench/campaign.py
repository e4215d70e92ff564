"""Bench cases of a campaign and of a fresh installation.

``campaign-16x2048x2048x128``: 16 cubes of 2048 x 2048 x 128 float32 (34 GB) through a job on one GPU,
in GB/s against the machine's page-cache read rate of the same files read in parallel (as the job's
reader may), with the share of the run the GPU was busy and each stage's median time per cube.

``first-run-every-method``: with an empty kernel cache (``CUPY_CACHE_DIR``), ``prepare-gpu`` once (the
README's GPU install line), then the first and the second run of every detector and analysis method,
each in a fresh process: the first run should cost no more than 1.5x the second.

``first-run-new-bands``: the same with cubes of band counts no warm-up ever saw (57, 224, 285 and 430:
the land scene resampled along its spectra), each band count in a copy of the prepared cache of its own,
and the kernels each first run still compiled named (``CUPY_CACHE_SAVE_CUDA_SOURCE``); then each detector's
first and second click as the window runs them, in a fresh process each (:mod:`hyperapp.bench.window_click`):
the first click's time less its one load of the pixels to the GPU, against the second's.

``bench --quick`` makes both small (and the campaign runs on the CPU where there is no GPU), to smoke-test
them anywhere.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hyperapp.bench import Measurement, bench_case, setting_counts
from hyperapp.bench import whole_path as F
from hyperapp.bench.settle import settle_writes, stage_medians  # noqa: F401
from hyperapp.io.writers import write_envi_cube

CAMPAIGN_CUBES, CAMPAIGN_SHAPE = 16, (2048, 2048, 128)
#: the threads reading the files in parallel for the page-cache floor
READ_THREADS = 16


def quick() -> None:
    """Small sizes for a smoke test (``bench --quick``), on the CPU where there is no GPU."""
    from hyperapp.core.backend import gpu_available

    global CAMPAIGN_CUBES, CAMPAIGN_SHAPE
    CAMPAIGN_CUBES, CAMPAIGN_SHAPE = 4, (96, 80, 16)
    F.FILE_SHAPE = (128, 96, 16)
    F.BATCH_CUBES, F.BATCH_SHAPE = 6, (64, 48, 16)
    if not gpu_available():
        F.DEVICE = "cpu"


def parallel_read_s(paths: list[Path], threads: int = READ_THREADS, repeats: int = 2) -> float:
    """Seconds to read every file into user memory, ``threads`` files at a time (the best of
    ``repeats`` passes after one that brings them into the page cache).

    Each thread reads into one 64 MB buffer of its own, made in the first pass: a fresh buffer per file
    would time the kernel's page faults, which the threads of one process take in turn (a rate of 6-25
    GB/s on the H100 hosts where the same reads into buffers made beforehand ran at 24-32 GB/s).
    """
    local = threading.local()

    def read(p: Path) -> int:
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = memoryview(np.ones(64 << 20, np.uint8)).cast("B")  # touched: no faults later
        n = 0
        with open(p, "rb", buffering=0) as fh:
            while k := fh.readinto(buf):
                n += k
        return n

    best = float("inf")
    with ThreadPoolExecutor(max(1, min(threads, len(paths)))) as pool:
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            list(pool.map(read, paths))
            if i or not repeats:
                best = min(best, time.perf_counter() - t0)
    return best




def _write_campaign(d: Path, n: int, shape: tuple[int, int, int]) -> list[Path]:
    """``n`` float32 BIL cubes: one synthetic scene, each cube its rows rolled by a different amount."""
    rows, cols, bands = shape
    rng = np.random.default_rng(5)
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    X = np.empty((rows, cols, bands), np.float32)
    for r0 in range(0, rows, 256):  # in blocks of rows: a few GB of temporaries at most
        r1 = min(rows, r0 + 256)
        ab = rng.dirichlet(np.ones(6), (r1 - r0) * cols).astype(np.float32)
        X[r0:r1] = (ab @ ends).reshape(r1 - r0, cols, bands)
        X[r0:r1] += rng.normal(0, 0.01, (r1 - r0, cols, bands)).astype(np.float32)
    bil = np.ascontiguousarray(X.transpose(0, 2, 1))  # (rows, bands, cols)
    del X
    out = []
    for i in range(n):
        stem = d / f"c{i:02d}"
        np.roll(bil, i * 7, axis=0).tofile(stem.with_suffix(".img"))
        stem.with_suffix(".hdr").write_text(
            f"ENVI\nsamples = {cols}\nlines = {rows}\nbands = {bands}\nheader offset = 0\n"
            "file type = ENVI Standard\ndata type = 4\ninterleave = bil\nbyte order = 0\n")
        out.append(stem.with_suffix(".hdr"))
    settle_writes()
    return out


def campaign_files(d: Path, n: int, shape: tuple[int, int, int] = CAMPAIGN_SHAPE) -> tuple[list[Path], float]:
    """``n`` campaign cubes of ``shape`` in ``d/cubes`` (written unless that many are there, as a profiling
    script's second run finds them), settled on disk, and the campaign's clicks in ``d/t.csv`` (two pixels,
    the jobs' ``targets``): (the cubes' headers, their data's GB)."""
    (d / "cubes").mkdir(parents=True, exist_ok=True)
    hdrs = sorted((d / "cubes").glob("*.hdr"))
    if len(hdrs) < n:
        hdrs = _write_campaign(d / "cubes", n, shape)
    hdrs = hdrs[:n]
    settle_writes()
    rows, cols, _ = shape
    (d / "t.csv").write_text(f"row,col\n{rows // 3},{cols // 3}\n{rows // 2},{cols // 2}\n")
    return hdrs, sum(h.with_suffix(".img").stat().st_size for h in hdrs) / 1e9


def _job(d: Path, folder: str, method: str, pattern: str) -> Path:
    p = d / f"{folder}.toml"
    p.write_text(f'[inputs]\npaths = ["{pattern}"]\n[[steps]]\ndetect = "{method}"\ntargets = "t.csv"\n'
                 f'[output]\nfolder = "{folder}"\n')
    return p


@bench_case("campaign-16x2048x2048x128")
def campaign(ctx) -> list[Measurement]:
    """16 cubes of 2048 x 2048 x 128 float32 (34 GB) through a job on one GPU (RBFN from clicks, then
    ACE): GB/s against the parallel page-cache read rate of the same files, and the GPU busy share; with
    two GPUs, two Dask workers against one."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.pipeline import DEPTH
    from hyperapp.batch.runner import run_job

    rows, cols, bands = CAMPAIGN_SHAPE
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="hyperapp-campaign-") as tmp:
        d = Path(tmp)
        hdrs, gb = campaign_files(d, CAMPAIGN_CUBES, CAMPAIGN_SHAPE)
        imgs = [h.with_suffix(".img") for h in hdrs]
        # the page cache's rate moves by up to a fifth within minutes on one host: it is measured before
        # and after each run, and each run is held against the best of all (the most the files were read at)
        # and, in the notes, against the mean of the two around it
        refs = [parallel_read_s(imgs)]
        runs = []
        for method in ("rbfn", "ace"):
            # the first depth + 2 cubes first, as a job of their own: kernels, the reading helper and memory
            # pools as a campaign's later cubes find them (the pipeline holds up to depth + 2 cubes on the
            # GPU; after one cube alone, the measured run grew the pool by three cubes' worth, a few
            # hundred ms that a long campaign pays once)
            warm = load_job(_job(d, f"warm-{method}", method, f"cubes/c0[0-{min(DEPTH + 1, 9)}].hdr"))
            run_job(warm, device=F.DEVICE)
            job = load_job(_job(d, f"out-{method}", method, "cubes/*.hdr"))
            before = parallel_read_s(imgs)
            with F.GpuBusyOrSmi() as busy:
                t0 = time.perf_counter()
                if run_job(job, device=F.DEVICE) != 0:
                    raise RuntimeError(f"the campaign run failed; see {job.output}/hyperapp-batch.log")
                wall = time.perf_counter() - t0
            after = parallel_read_s(imgs)
            refs += [before, after]
            runs.append((method, wall, before, after, busy, job))
        read_s = min(refs)
        for method, wall, before, after, busy, job in runs:
            around = (before + after) / 2
            notes = {"cubes": CAMPAIGN_CUBES, "shape": list(CAMPAIGN_SHAPE), "GB": round(gb, 2),
                     "GBps": _rate(gb, wall), "page_cache_GBps": _rate(gb, read_s),
                     "share_of_page_cache_rate": round(read_s / wall, 3),
                     "page_cache_GBps_before_after": [_rate(gb, before), _rate(gb, after)],
                     "share_of_page_cache_rate_around_run": round(around / wall, 3),
                     "page_cache_GBps_all_measures": [_rate(gb, r) for r in refs], "read_threads": READ_THREADS,
                     "gpu_busy_share": busy.share, "busy_source": getattr(busy, "source", None),
                     "stage_median_s": stage_medians(Path(job.output)), "device": F.DEVICE}
            out.append(Measurement(f"campaign-{CAMPAIGN_CUBES}x{rows}x{cols}x{bands}-{method}", wall * 1e3, None,
                                   "parallel page-cache read of the files (the best measured)", read_s * 1e3,
                                   notes=notes))
        # the same job through worker processes sharing the one GPU (the reads of one process are bound
        # by its one interpreter; several overlap them)
        m = F._processes_on_one_device(_job(d, "procs", "rbfn", "cubes/*.hdr"),
                                       f"campaign-{CAMPAIGN_CUBES}x{rows}x{cols}x{bands}", gb,
                                       warm_cubes=F.SHARED_DEVICE_WORKERS)
        m.peer, m.peer_ms = "parallel page-cache read of the files (the best measured)", read_s * 1e3
        m.notes.update({"page_cache_GBps": _rate(gb, read_s), "share_of_page_cache_rate": round(read_s * 1e3 / m.gpu_ms, 3)})
        out.append(m)
        if F.gpu_count() >= 2:  # one Dask worker per GPU: two against one
            m = F.one_worker_per_gpu(_job(d, "workers", "rbfn", "cubes/*.hdr"),
                                     f"campaign-{CAMPAIGN_CUBES}x{rows}x{cols}x{bands}-rbfn", gb, "GBps")
            # what two workers' readers could have together: the files read by twice the threads (each
            # worker's reader has its own); the two workers' rate against it, and one worker's against the
            # reference of one
            both = parallel_read_s(imgs, threads=2 * READ_THREADS)
            m.notes.update({"page_cache_GBps": _rate(gb, read_s), f"page_cache_GBps_{2 * READ_THREADS}_threads":
                            _rate(gb, both), "two_workers_share_of_that": round(both * 1e3 / m.gpu_ms, 3),
                            "one_worker_share_of_page_cache_rate": round(read_s * 1e3 / m.peer_ms, 3)})
            out.append(m)
    return out


def _class_map(d: Path, truth: np.ndarray) -> Path:
    """Two ROI classes for the class-aware methods: the truth's pixels and a block of background."""
    from hyperapp.io.writers import write_envi

    roi = np.zeros(truth.shape, np.int16)
    roi[:16, :16] = 2
    roi[truth > 0] = 1
    return write_envi(d / "classes", roi)


def _prepare_gpu_fresh(env: dict) -> tuple[float, subprocess.CompletedProcess]:
    """``hyperapp --headless prepare-gpu`` in a fresh process with ``env`` (its kernel cache): wall seconds
    and the finished process; a failure raises with the end of its output."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "hyperapp", "--headless", "prepare-gpu"], capture_output=True,
                       text=True, cwd=tempfile.gettempdir(), env=F.fresh_env(env))
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"prepare-gpu failed: {(r.stdout + r.stderr).strip()[-600:]}")
    return seconds, r


@bench_case("first-run-every-method")
def first_runs(ctx) -> list[Measurement]:
    """Empty kernel cache, ``prepare-gpu``, then the first and second run of every method in fresh
    processes (the land scene): first / second should be within 1.5x."""
    from hyperapp.io import read_labels
    from hyperapp.io.samples import sample_path
    from hyperapp.models.registry import ANALYSES, METHODS

    out: list[Measurement] = []
    hdr = sample_path("land")
    with tempfile.TemporaryDirectory(prefix="hyperapp-first-") as tmp:
        d = Path(tmp)
        env = {"CUPY_CACHE_DIR": str(d / "kernel-cache")}
        prep_s, r = _prepare_gpu_fresh(env)
        fresh = [ln.strip() for ln in r.stdout.splitlines() if "fresh command-line run" in ln]
        out.append(Measurement("prepare-gpu-empty-cache", prep_s * 1e3, None,
                               notes={"summary": r.stdout.strip().splitlines()[-1],
                                      "fresh_run": fresh[0] if fresh else None}))
        from hyperapp.io import open_cube

        land = open_cube(hdr)
        roi = _class_map(d, read_labels(hdr.with_name("land_truth.hdr"), (land.rows, land.cols)))
        runs = [(f"detect-{m}", ["detect", str(hdr), "--method", m, "--targets", str(hdr.with_name("land_targets.csv"))])
                for m in METHODS]
        runs += [(f"analyse-{m}", ["analyse", str(hdr), "--method", m] + (["--roi", str(roi)] if a.needs_classes else []))
                 for m, a in ANALYSES.items()]
        for name, args in runs:
            walls = []
            for i in range(2):
                w, rep = F.fresh_run(args + ["--device", "gpu", "--out", str(d / f"{name}-{i}")], env)
                walls.append(w)
            ratio = walls[0] / walls[1]
            out.append(Measurement(f"first-run-{name}", walls[1] * 1e3, None, "first run after prepare-gpu",
                                   walls[0] * 1e3, notes={"first_over_second": round(ratio, 2),
                                                          "within_1.5x": ratio <= 1.5}))
    return out


#: band counts of ``first-run-new-bands`` (``HYPERAPP_FIRST_RUN_BANDS="57,224"`` to choose others): a
#: multispectral-like count, AVIRIS / EnMAP, EMIT, and a wide imager's
NEW_BANDS = (57, 224, 285, 430)


def _resampled_land(d: Path, bands: int) -> tuple[Path, Path, Path]:
    """The land scene resampled to ``bands`` bands (linear interpolation along each spectrum): its header,
    its targets CSV and a two-class ROI map, in folder ``d``."""
    from hyperapp.batch.prepare_gpu import resampled_bands
    from hyperapp.io import open_cube, read_labels
    from hyperapp.io.masks import write_pixels
    from hyperapp.io.samples import sample_path

    hdr = sample_path("land")
    cube = open_cube(hdr)
    d.mkdir(parents=True, exist_ok=True)
    out = write_envi_cube(d / f"land-{bands}", resampled_bands(cube.to_float32(), bands), "bil")
    shape = (cube.rows, cube.cols)
    targets = d / "targets.csv"
    write_pixels(targets, read_labels(hdr.with_name("land_targets.csv"), shape))
    roi = _class_map(d, read_labels(hdr.with_name("land_truth.hdr"), shape))
    return out, targets, roi


_GLOBAL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)")


def _compiled(cache: Path, before: set[str]) -> list[str]:
    """The kernels in the CUDA sources CuPy saved to ``cache`` since ``before`` (its file names then)."""
    names: list[str] = []
    for p in sorted(cache.iterdir()):
        if p.name not in before and p.suffix == ".cu":
            names += _GLOBAL.findall(p.read_text(errors="replace"))
    return names


def _band_lane(d: Path, bands: int, prepared: Path) -> list[Measurement]:
    """Every method's first and second fresh run on the land scene at ``bands`` bands, in a copy of the
    prepared kernel cache (so each band count's first runs compile only what they themselves need)."""
    import shutil

    from hyperapp.models.registry import ANALYSES, METHODS

    lane = d / f"bands-{bands}"
    cache = lane / "kernel-cache"
    shutil.copytree(prepared, cache)
    env = {"CUPY_CACHE_DIR": str(cache), "CUPY_CACHE_SAVE_CUDA_SOURCE": "1"}
    hdr, targets, roi = _resampled_land(lane, bands)
    runs = [(f"detect-{m}", ["detect", str(hdr), "--method", m, "--targets", str(targets)]) for m in METHODS]
    runs += [(f"analyse-{m}", ["analyse", str(hdr), "--method", m] + (["--roi", str(roi)] if a.needs_classes else []))
             for m, a in ANALYSES.items()]
    out = []
    for name, args in runs:
        walls, compiled = [], []
        for i in range(2):
            before = {p.name for p in cache.iterdir()}
            w, _ = F.fresh_run(args + ["--device", "gpu", "--out", str(lane / f"{name}-{i}")], env)
            walls.append(w)
            compiled.append(_compiled(cache, before))
        ratio = walls[0] / walls[1]
        print(f"  {bands} bands, {name}: first {walls[0]:.2f} s, second {walls[1]:.2f} s ({ratio:.2f}x); "
              f"compiled by the first: {len(compiled[0])} {sorted(set(compiled[0]))[:6]}", flush=True)
        out.append(Measurement(f"first-run-{bands}b-{name}", walls[1] * 1e3, None, "first run after prepare-gpu",
                               walls[0] * 1e3, notes={"bands": bands, "first_over_second": round(ratio, 2),
                                                      "within_1.5x": ratio <= 1.5,
                                                      "kernels_compiled_first": len(compiled[0]),
                                                      "kernels_compiled_second": len(compiled[1]),
                                                      "compiled": sorted(set(compiled[0]))[:12]}))
    out += _window_lane(lane, bands, hdr, targets, cache, env)
    return out


def _window_lane(lane: Path, bands: int, hdr: Path, targets: Path, cache: Path, env: dict) -> list[Measurement]:
    """Each detector's first and second click in a fresh process, as the window runs them
    (:mod:`hyperapp.bench.window_click`), and the kernels the first process's first click compiled. With
    ``HYPERAPP_WINDOW_REPEATS`` = n (1 unless set), n fresh processes per method: the figures are the
    process of the median ratio, and every ratio is kept (a first click 10-20 ms slower than its second
    on one process may be the host's, not the first use's)."""
    import json
    import statistics

    from hyperapp.bench.window_click import PAUSE_S
    from hyperapp.models.registry import METHODS

    repeats = setting_counts("HYPERAPP_WINDOW_REPEATS", "1", 1)[0]
    out = []
    for m in METHODS:
        procs = []
        for _ in range(repeats):
            before = {p.name for p in cache.iterdir()}
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "hyperapp.bench.window_click", str(hdr), str(targets), m,
                                "--device", "gpu"], capture_output=True, text=True, cwd=str(lane),
                               env=F.fresh_env(env))
            wall = time.perf_counter() - t0
            if r.returncode != 0:
                raise RuntimeError(f"the window's click of {m} failed: {r.stderr.strip()[-400:]}")
            got = json.loads(r.stdout.strip().splitlines()[-1])
            first, second = (c["seconds"] for c in got["clicks"][:2])
            load = first - got["clicks"][0]["stages"].get("total", first)
            procs.append({"got": got, "wall": wall, "first": first, "second": second, "load": load,
                          "ratio": (first - load) / second, "compiled": _compiled(cache, before)})
        ratios = [p["ratio"] for p in procs]
        pick = sorted(procs, key=lambda p: p["ratio"])[(len(procs) - 1) // 2]
        got, first, second, load, ratio = pick["got"], pick["first"], pick["second"], pick["load"], pick["ratio"]
        compiled = procs[0]["compiled"]
        prep = got.get("prepared") or {}
        print(f"  {bands} bands, window {m}: start {got['start_s']:.2f} s, the cube's preparation "
              f"{prep.get('wall_s', 0):.2f} s, first click {first * 1e3:.0f} ms "
              f"(of which the pixels' load {load * 1e3:.0f} ms), second {second * 1e3:.0f} ms; first less load "
              f"/ second {ratio:.2f}x" + (f" (median of {', '.join(f'{x:.2f}' for x in ratios)})"
                                          if repeats > 1 else "") + f"; compiled {len(compiled)}", flush=True)
        out.append(Measurement(f"window-click-{bands}b-{m}", second * 1e3, None, "first click (less the load)",
                               (first - load) * 1e3, notes={
                                   "bands": bands, "process_wall_s": round(pick["wall"], 2),
                                   "pause_s": PAUSE_S,
                                   "start_s": got["start_s"], "preparation": prep,
                                   "first_click_s": round(first, 4), "load_s": round(load, 4),
                                   "first_over_second": round(ratio, 2),
                                   "processes": repeats, "ratios": [round(x, 2) for x in ratios],
                                   "median_ratio": round(statistics.median_low(ratios), 2),  # the picked process
                                   "first_second_ms": [[round((q["first"] - q["load"]) * 1e3, 1),
                                                        round(q["second"] * 1e3, 1)] for q in procs],
                                   "first_stages_ms": [{k: round(v * 1e3, 1) for k, v in
                                                        q["got"]["clicks"][0]["stages"].items() if v >= 5e-4}
                                                       for q in procs],
                                   "kernels_compiled_first": len(compiled),
                                   "compiled": sorted(set(compiled))[:12],
                                   "first_stages": got["clicks"][0]["stages"],
                                   "second_stages": got["clicks"][1]["stages"]}))
    return out


@bench_case("first-run-new-bands")
def first_runs_new_bands(ctx) -> list[Measurement]:
    """Empty kernel cache, ``prepare-gpu`` (no argument), then the first and second fresh run of every
    method on cubes of band counts it never saw (57, 224, 285, 430): first / second should be within
    1.5x, and the first should compile nothing; and each detector's first and second window click
    (``HYPERAPP_WINDOW_REPEATS`` fresh processes each: :func:`_window_lane`)."""
    bands = setting_counts("HYPERAPP_FIRST_RUN_BANDS", ",".join(map(str, NEW_BANDS)), 3)
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="hyperapp-first-bands-") as tmp:
        d = Path(tmp)
        prepared = d / "kernel-cache"
        env = {"CUPY_CACHE_DIR": str(prepared), "CUPY_CACHE_SAVE_CUDA_SOURCE": "1"}
        prep_s, r = _prepare_gpu_fresh(env)
        out.append(Measurement("prepare-gpu-empty-cache", prep_s * 1e3, None,
                               notes={"summary": r.stdout.strip().splitlines()[-1],
                                      "cache_files": len(list(prepared.iterdir()))}))
        # a lane per band count, each in its own copy of the prepared cache; one at a time unless
        # HYPERAPP_FIRST_RUN_LANES says more (four at once on a 16-core H200 host took a quarter of the time,
        # but moved ratios both ways by up to 2x where nothing was compiled)
        lanes_at_once = setting_counts("HYPERAPP_FIRST_RUN_LANES", "1", 1)[0]
        with ThreadPoolExecutor(max_workers=min(lanes_at_once, len(bands))) as pool:
            lanes = list(pool.map(lambda b: _band_lane(d, b, prepared), bands))
        for lane in lanes:
            out += lane
        every = [m for lane in lanes for m in lane]
        for kind, prefix in (("command line", "first-run-"), ("window", "window-click-")):
            runs = [m for m in every if m.name.startswith(prefix)]
            ratios = [m.notes["first_over_second"] for m in runs]
            out.append(Measurement(f"first-run-new-bands-summary{'' if prefix == 'first-run-' else '-window'}",
                                   None, None, notes={
                                       "from": kind, "bands": list(bands), "runs": len(ratios),
                                       "within_1.5x": sum(r <= 1.5 for r in ratios),
                                       "worst_first_over_second": max(ratios, default=None),
                                       "first_runs_that_compiled": sum(m.notes["kernels_compiled_first"] > 0
                                                                       for m in runs)}))
    return out


def _rate(gb: float, seconds: float) -> float:
    """GB/s to three significant digits: a ``--quick`` campaign's few MB keep a rate above zero."""
    return float(f"{gb / seconds:.3g}")
