"""Compile every GPU kernel ahead of use: ``hyperapp --headless prepare-gpu`` and the window's warm-up.

A method's first GPU run compiles its kernels: hyperapp's own CUDA modules (``kernels/*.cu``, built by
:func:`hyperapp.kernels.get_module` for the ``#define`` set a run needs), its ``ElementwiseKernel`` and
``ReductionKernel`` objects, and the many kernels CuPy generates for the array operations a method
uses (each ufunc, reduction, sort, index and copy, per data type and number of dimensions). NVRTC
takes 0.1-1 s a kernel, so a first k-means took 30 s on a fresh H100 against 0.5 s after. CuPy keeps
each compiled kernel in its on-disk cache (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``), so
compiling once per installation is enough: :func:`prepare_gpu` runs every path on small scenes that
have what real ones have, and fills that cache:

- reading: ENVI files of each stored type (float32, uint16, int16, byte-swapped float32) and interleave
  to float32 on the GPU, whole and in tiles;
- every detector on the bundled land scene (clicks, truth, the default false-alarm threshold, objects,
  evaluation), in memory and streamed in two passes (the large-file path); RBFN also as the thesis
  scales it; FFBP trained from the clicks;
- every analysis method on the same scene (class-aware ones on two ROI classes);
- every instantiation of hyperapp's own kernels that a run with the default parameters may launch on any
  cube (:func:`kernel_variants`). No kernel depends on the cube's shape: the band count and the sizes are
  runtime arguments, or pick one of a small fixed set of template instantiations (the RBFN's padded
  whitened dimensions and neurons, the small k-means' register tile), and CuPy's reductions run without
  its CUB block reductions (``hyperapp/__init__.py``), which compiled one kernel per class of the length
  reduced, so a cube of a new sensor (224, 285 or 430 bands) compiles nothing on its first click. ``prepare-gpu CUBE ...`` still runs every method on
  a window of each cube named, which is no longer needed.

Afterwards a stamp file in the cache folder records the hyperapp and CuPy versions and the device's
compute capability; the window's warm-up (:func:`start_background`) does nothing when it is there.
Where there is no GPU, :func:`prepare_gpu` says so in one line and does nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hyperapp.core.errors import BackendError
from hyperapp.core.progress import NULL_PROGRESS, Progress

#: rows and columns of a person's cube used by ``prepare-gpu CUBE``
WINDOW = 96
#: analysis options of the warm-ups, where the defaults would only take longer: the number of random band
#: subsets is a launch size, not a kernel's specialisation (its ``#define``s are k and bands per subset,
#: left at their defaults; the classes are a runtime argument)
ANALYSIS_PARAMS = {"band-subsets": {"n_subsets": 64}}
#: analyses warmed on a sample only (their cost grows as the square of the spectra: HAC's distances)
SAMPLE_ONLY = ("hac",)


def cache_dir() -> Path:
    """CuPy's on-disk kernel cache (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``)."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def kernels_digest() -> str:
    """A short digest of every ``kernels/*.cu`` source and ``kernels/*.cuh`` header they include: a stamp
    names it, so changed kernels (a new checkout of the same version) are prepared again instead of
    compiling on their first use."""
    import hashlib
    from importlib import resources

    h = hashlib.sha256()
    for f in sorted((p for p in resources.files("hyperapp.kernels").iterdir()
                     if p.name.endswith((".cu", ".cuh"))), key=lambda p: p.name):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def stamp_path() -> Path:
    """The file that says this installation's kernels were prepared (per hyperapp and CuPy version,
    compute capability and kernel sources; a change of any prepares again)."""
    import cupy

    from hyperapp import __version__
    cc = cupy.cuda.Device().compute_capability
    return cache_dir() / f"hyperapp-prepared-{__version__}-cupy{cupy.__version__}-sm{cc}-k{kernels_digest()}.json"


def is_prepared() -> bool:
    """Whether :func:`prepare_gpu` finished on this installation (False where there is no GPU)."""
    from hyperapp.core.backend import gpu_available

    return gpu_available() and stamp_path().is_file()


def _land():
    from hyperapp.io import open_cube, read_labels
    from hyperapp.io.samples import sample_path

    hdr = sample_path("land")
    cube = open_cube(hdr).good_bands()
    shape = (cube.rows, cube.cols)
    return cube, read_labels(hdr.with_name("land_targets.csv"), shape), read_labels(hdr.with_name("land_truth.hdr"),
                                                                                   shape)



def _two_classes(truth: np.ndarray) -> np.ndarray:
    """An ROI map of two classes for the class-aware analyses' warm-ups: the truth's pixels (1) and a block
    of background in the corner (2)."""
    roi = np.zeros(truth.shape, np.int32)
    roi[truth] = 1
    roi[: max(2, truth.shape[0] // 8), : max(2, truth.shape[1] // 8)] = 2
    return roi


def resampled_bands(X: np.ndarray, bands: int) -> np.ndarray:
    """``X`` (rows, cols, b) resampled to ``bands`` bands by linear interpolation along each spectrum (a scene
    of another sensor's band count: the first-run bench's cubes, the window's warm-up)."""
    src = np.linspace(0.0, 1.0, X.shape[2])
    dst = np.linspace(0.0, 1.0, bands)
    j = np.clip(np.searchsorted(src, dst, side="right") - 1, 0, X.shape[2] - 2)
    f = ((dst - src[j]) / (src[j + 1] - src[j])).astype(np.float32)
    return np.ascontiguousarray(X[:, :, j] * (1 - f) + X[:, :, j + 1] * f, np.float32)


#: spectra of the window warm-up's analyses (:func:`warm_process`)
WARM_SAMPLE = 2000


def warm_process(bands: int, device: str = "gpu", stop: Callable[[], bool] = lambda: False, held=None) -> int:
    """Every detector and analysis once, in this process: the window's preparation of an open cube
    (:meth:`hyperapp.project.session.Session.prepare_device`).

    ``held``: the open cube and its pixels held on the device, ``(cube, image)``. The detectors then run on
    them as a click runs (:func:`warm_clicks`), and only the first also on the land scene resampled to
    ``bands`` bands, with a truth mask (the evaluation's kernels); without it, every detector runs there.
    The analyses run on the land scene at ``bands`` bands.

    Once :func:`prepare_gpu` has filled the kernel cache this compiles nothing; it loads into the process
    what each method's first run there would load (its CUDA modules and CuPy's kernels from the cache,
    the library routines its shapes pick, the Python modules a run imports). Stops between runs once
    ``stop()`` is true; returns the runs made.
    """
    from hyperapp.analyse.run import run_analysis
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.models.registry import ANALYSES, METHODS
    from hyperapp.request import AnalyseRequest, DetectRequest

    runs = 0
    if held is not None:
        runs = warm_clicks(*held, device, stop)
        if stop():
            return runs
    land, targets, truth = _land()
    cube = cube_from_array(resampled_bands(land.to_float32(), int(bands)), "warm-up")
    roi = _two_classes(truth)
    for i, name in enumerate(list(METHODS)[:1] if runs else METHODS):
        if stop():
            return runs
        # the first with a truth mask (the evaluation's kernels), each with its object table (the Results dock's)
        res = run_detection(cube, DetectRequest(name, device=device), targets, None, truth=truth if i == 0 else None)
        assert isinstance(res.objects, list)
        runs += 1
    for name, m in ANALYSES.items():
        if stop():
            return runs
        sel = {"select": "rois"} if m.needs_classes else {"select": "sample", "sample": WARM_SAMPLE}
        run_analysis(cube, AnalyseRequest(name, params=ANALYSIS_PARAMS.get(name, {}), device=device, **sel),
                     roi=roi if m.needs_classes else None)
        runs += 1
    return runs


def click_targets(shape: tuple[int, int]) -> np.ndarray:
    """The targets of :func:`warm_clicks`: a block of 3 x 3 pixels at the image's centre, about what a person
    marks (their spectra do not matter: the runs are thrown away)."""
    mask = np.zeros(shape, bool)
    r, c = shape[0] // 2, shape[1] // 2
    mask[max(0, r - 1): r + 2, max(0, c - 1): c + 2] = True
    return mask


def warm_clicks(cube, image, device: str = "gpu", stop: Callable[[], bool] = lambda: False) -> int:
    """Every detector once on ``cube``'s pixels held on the device (``image``), as the window's click runs it
    (:meth:`hyperapp.project.session.Session.detect`: the held pixels, their no-data test and background
    sums taken at the load), with :func:`click_targets`: the first click then takes paths and shapes a run
    has taken in this process. The land scene's runs load their pixels themselves, so their fits never take
    the statistics from the held background sums, as a click's do (the first window click's extra time was
    all in the fit: docs/performance.md). A method that cannot run on these targets (no-data pixels at the
    centre) is passed over. Stops between runs once ``stop()`` is true; returns the runs made."""
    import logging

    from hyperapp.core.errors import HyperappError
    from hyperapp.detect.run import run_detection
    from hyperapp.models.registry import METHODS
    from hyperapp.request import DetectRequest

    targets = click_targets((cube.rows, cube.cols))
    runs = 0
    for name in METHODS:
        if stop():
            break
        try:
            run_detection(cube, DetectRequest(name, device=device), targets, None, image=image)
        except HyperappError as exc:
            logging.getLogger(__name__).debug("warm click of %s passed over: %s", name, exc)
            continue
        runs += 1
    return runs


def _scene(cube):
    """Targets and a truth for a window of a person's cube: its brightest pixels, so every method runs."""
    X = cube.to_float32()
    s = np.nan_to_num(X.sum(axis=2), nan=-np.inf)
    top = np.argsort(s.reshape(-1))[-max(8, s.size // 200):]
    truth = np.zeros(s.shape, bool)
    truth.reshape(-1)[top] = True
    targets = np.zeros_like(truth)
    targets.reshape(-1)[top[-3:]] = True
    return targets, truth


def _reading_tasks(folder: Path, xp) -> list[tuple[str, Callable[[], None]]]:
    """Reading ENVI files of every stored type and interleave onto ``xp``'s device, whole and in tiles."""
    from hyperapp.io.writers import write_envi_cube

    def task(dtype, interleave, swap=False):
        def run():
            from hyperapp.io import open_cube
            from hyperapp.reading.tiles import iter_float_tiles, read_float32

            rng = np.random.default_rng(0)
            X = (rng.uniform(0.1, 0.9, (24, 20, 12)) * (1000 if np.dtype(dtype).kind in "iu" else 1)).astype(dtype)
            stem = folder / f"read-{np.dtype(dtype).name}-{interleave}{'-swapped' if swap else ''}"
            hdr = write_envi_cube(stem, X, interleave, byteorder=int(swap))
            cube = open_cube(hdr)
            read_float32(cube, xp)
            for _ in iter_float_tiles(cube, xp, tile_bytes=X[0].nbytes * 5):
                pass
        return run

    return [(f"reading {np.dtype(d).name} {il}{' big-endian' if sw else ''}", task(d, il, sw)) for d, il, sw in (
        (np.float32, "bil", False), (np.float32, "bsq", False), (np.float32, "bip", False),
        (np.uint16, "bil", False), (np.uint16, "bsq", False), (np.int16, "bil", False),
        (np.float32, "bil", True))]


def _method_tasks(cube, targets, truth, label: str, device: str) -> list[tuple[str, Callable[[], None]]]:
    """Every detector (in memory and streamed) and every analysis method on ``cube``."""
    from hyperapp.analyse.cost import calibrate
    from hyperapp.analyse.run import run_analysis
    from hyperapp.detect.run import run_detection
    from hyperapp.models.registry import ANALYSES, METHODS
    from hyperapp.request import AnalyseRequest, DetectRequest

    tasks: list[tuple[str, Callable[[], None]]] = []
    # undesired signatures for the streamed subspace detectors (which cannot find them by ATGP)
    pixels = np.asarray(cube.to_float32()).reshape(-1, cube.bands)
    undesired = pixels[[0, pixels.shape[0] // 2]].astype(np.float64)
    for name, m in METHODS.items():
        variants = [("", {}, None)]
        if m.kind == "pixel" and getattr(m.build(), "stream_stats", None) is not None:
            variants.append((" streamed", {}, 1e-6))  # a budget of 1 kB: the two-pass large-file path
        if name == "rbfn":
            variants.append((" (thesis scaling)", {"whiten": "std", "normalize": False}, None))
        for suffix, params, memory in variants:
            extra = {"undesired_spectra": undesired} if memory and getattr(m, "uses_undesired", False) else {}

            def run(name=name, params=params, memory=memory, extra=extra, truths=(truth, None)):
                # with a truth mask (the evaluation's kernels) and without (a person's usual run: the
                # threshold and report then take other paths, whose kernels a first fresh run after a
                # prepare of the evaluated runs alone still compiled, about a second of it)
                for t in truths:
                    res = run_detection(cube, DetectRequest(name, params=params, device=device, memory=memory),
                                        targets, None, truth=t, **extra)
                    assert isinstance(res.objects, list)  # the object table: its kernels too
            tasks.append((f"{name}{suffix} on {label}", run))
    roi = _two_classes(truth)
    for name, m in ANALYSES.items():
        def run(name=name, m=m):
            if m.needs_classes:
                sels = [{"select": "rois"}]
            else:
                # a sample of the image, and the default selection (on the land scene the whole image: the
                # GMM's first run there compiled four CuPy kernels the sample's had not)
                sels = [{"select": "sample", "sample": 4000}] + ([{}] if name not in SAMPLE_ONLY else [])
            for sel in sels:
                run_analysis(cube, AnalyseRequest(name, params=ANALYSIS_PARAMS.get(name, {}), device=device, **sel),
                             roi=roi if m.needs_classes else None)
            # and its cost estimate's two small fits (what the command line's analyse and the window's
            # panel take before a run): the GMM's are one start each, whose k-means++ seeding (one run)
            # takes kernels of other shapes than three starts' (four CuPy kernels its first estimate
            # compiled at any band count)
            calibrate(name, ANALYSIS_PARAMS.get(name, {}), cube.bands, device)
        tasks.append((f"{name} on {label}", run))
    return tasks


def _fresh_process_task(folder: Path) -> tuple[str, Callable[[], str]]:
    """The last warm-up: ``detect`` on the land scene in a fresh process without a truth mask, as a person's
    first run starts. A first command-line run after the in-process warm-ups took 2.5-3.6 s
    against 0.95-1.24 s for the next one (H100, ``bench --case first-run-every-method``; whichever method
    ran first paid it); this pays it here. Its line says how many kernels it still had to compile (CuPy's
    cache files it added), which the warm-ups above should leave at none."""
    def run() -> str:
        import subprocess
        import sys

        from hyperapp.io.samples import sample_path

        hdr = sample_path("land")
        before = _cache_files()
        r = subprocess.run([sys.executable, "-m", "hyperapp", "--headless", "detect", str(hdr), "--method", "sam",
                            "--targets", str(hdr.with_name("land_targets.csv")), "--device", "gpu",
                            "--out", str(folder / "fresh")],
                           capture_output=True, text=True, cwd=str(folder))
        if r.returncode != 0:
            said = (r.stderr or r.stdout).strip()
            raise RuntimeError(said.splitlines()[-1] if said else f"exit {r.returncode}")
        return f"{len(_cache_files() - before)} kernels compiled by it"
    return "a fresh command-line run (detect, the land scene)", run


def _cache_files() -> set[str]:
    d = cache_dir()
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def kernel_variants() -> list[tuple[str, dict | None, tuple[str, ...]]]:
    """(module, defines, name expressions) of every instantiation of ``kernels/*.cu`` whose choice depends
    on the data rather than on a method's parameters (the RBFN's staged and direct scoring, the small
    k-means' register tiles, the FFBP module), for the default parameters: compiled by
    :func:`compile_kernel_variants` whatever the band counts of the warm-up scenes."""
    from hyperapp.models import ffbp_gpu, rbfn_gpu
    from hyperapp.models.ffbp import FFBP
    from hyperapp.models.kmeans import small_kernel_variants
    from hyperapp.models.mlp import kernel_variants as mlp_variants

    out = [(name, None, exprs) for name, exprs in rbfn_gpu.kernel_variants() + small_kernel_variants()
           + mlp_variants((int(FFBP().n_hidden),))]
    out += [(name, defines, ()) for name, defines in ffbp_gpu.kernel_variants()]
    return out


def compile_kernel_variants(threads: int = 8) -> str:
    """Compile :func:`kernel_variants` (NVRTC runs outside the GIL: several at once). Returns a note."""
    from concurrent.futures import ThreadPoolExecutor

    from hyperapp.kernels import get_module

    variants = kernel_variants()
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(variants)))) as pool:
        for f in [pool.submit(get_module, name, defines, exprs) for name, defines, exprs in variants]:
            f.result()
    return f"{len(variants)} modules"


def warmup_tasks(folder: Path, cubes: list[str] = (), device: str = "gpu") -> list[tuple[str, Callable[[], None]]]:
    """Every warm-up of :func:`prepare_gpu` as (name, function) pairs, on ``device`` (the CPU runs the
    same paths, which tests them where there is no GPU); temporary files go to ``folder``."""
    from hyperapp.core.backend import get_backend
    from hyperapp.io import open_cube

    tasks = []
    if device != "cpu":
        tasks.append(("every kernel's instantiations (any cube's shape)", compile_kernel_variants))
    tasks += _reading_tasks(folder, get_backend(device).xp)
    land, t, truth = _land()
    tasks += _method_tasks(land, t, truth, "the land scene", device)
    for path in cubes:
        c = open_cube(path).good_bands()
        c = c.subset(slice(0, min(WINDOW, c.rows)), slice(0, min(WINDOW, c.cols)))
        tt, tr = _scene(c)
        tasks += _method_tasks(c, tt, tr, Path(path).name, device)
    return tasks


def prepare_gpu(cubes: list[str] = (), progress: Progress = NULL_PROGRESS,
                report: Callable[[str], None] | None = None) -> dict:
    """Compile every kernel hyperapp uses into CuPy's on-disk cache (see the module).

    Parameters
    ----------
    cubes : list of str
        Cubes whose windows every method also runs on (not needed: no kernel depends on the cube's
        shape; kept for the command line's ``prepare-gpu CUBE ...``).
    progress : Progress
        Receives the share done and the task running.
    report : callable(str), optional
        Receives one line per task done (name, seconds, or why it failed).

    Returns
    -------
    dict
        ``tasks``, ``failed`` (name -> reason), ``seconds`` and ``cache`` (the folder filled).

    Raises
    ------
    BackendError
        No usable GPU (the line says why).
    """
    from hyperapp.core.backend import get_backend, gpu_available, gpu_status

    if not gpu_available():
        raise BackendError(f"no GPU to prepare: {gpu_status()}; nothing to compile (the CPU needs no kernels)")
    backend = get_backend("gpu")
    t_all = time.perf_counter()
    failed: dict[str, str] = {}
    times: dict[str, float] = {}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hyperapp-prepare-") as tmp:
        tasks = warmup_tasks(Path(tmp), cubes, "gpu") + [_fresh_process_task(Path(tmp))]
        for i, (name, fn) in enumerate(tasks):
            progress(i / len(tasks), name)
            t0 = time.perf_counter()
            try:
                note = fn()
                backend.synchronize()
                if isinstance(note, str):
                    notes[name] = note
            except Exception as exc:  # noqa: BLE001  (one failed warm-up is reported, the others go on)
                failed[name] = f"{exc.__class__.__name__}: {exc}"
            times[name] = round(time.perf_counter() - t0, 3)
            if report is not None:
                report(f"{name}: " + (f"FAILED ({failed[name]})" if name in failed else f"{times[name]:.2f} s")
                       + (f" ({notes[name]})" if name in notes else ""))
    summary = {"tasks": len(tasks), "failed": failed, "seconds": round(time.perf_counter() - t_all, 2),
               "task_seconds": times, "notes": notes, "cache": str(cache_dir()), "device": backend.device_name}
    if not failed:
        stamp = stamp_path()
        stamp.parent.mkdir(parents=True, exist_ok=True)
        from hyperapp.io.atomic import atomic_write_text

        atomic_write_text(stamp, json.dumps(summary, indent=1) + "\n")
    # give back the device memory the warm-ups' pools hold now, not at the process's exit (a candidate cause
    # of the first fresh run's extra second after prepare-gpu; with it the bench still measured SAM's first
    # run at 1.96x its second, so that cause is elsewhere; the memory is freed here either way)
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    progress(1.0, "done")
    return summary


def start_background(on_progress: Callable[[float, str], None], on_done: Callable[[str], None]) -> threading.Thread | None:
    """The window's warm-up: :func:`prepare_gpu` on a background thread when there is a GPU whose kernels
    were not prepared yet; ``on_progress(share, task)`` and ``on_done(line)`` are called from that thread.
    Returns the thread, or None when there is nothing to do (no GPU, or already prepared)."""
    from hyperapp.core.backend import gpu_available

    def work() -> None:
        try:
            if not gpu_available() or stamp_path().is_file():
                on_done("")
                return
            s = prepare_gpu(progress=Progress(on_progress))
            line = f"GPU kernels ready ({s['tasks']} warm-ups in {s['seconds']:.0f} s)"
            if s["failed"]:
                line += f"; {len(s['failed'])} failed: {', '.join(s['failed'])}"
            on_done(line)
        except Exception as exc:  # noqa: BLE001  (a warm-up never takes the window down)
            on_done(f"GPU warm-up stopped: {exc.__class__.__name__}: {exc}")

    t = threading.Thread(target=work, name="hyperapp-gpu-warmup", daemon=True)
    t.start()
    return t
