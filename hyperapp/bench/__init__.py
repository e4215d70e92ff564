"""Benchmark harness: ``hyperapp --headless bench``.

Cases register themselves with :func:`bench_case`. Each case returns a :class:`Measurement`: its GPU
time (CUDA events, median of repeats), the NumPy path's time, a named peer's time (scikit-learn, a
plain CuPy formulation, Spectral Python) and the bytes it must move through device memory at least.
The harness measures the device's copy bandwidth once (a large device-to-device copy, bytes read plus
written) and prints, per case, the ratios: NumPy / GPU, peer / GPU and GPU / floor, where the floor
is the minimum bytes over that bandwidth.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

CASES: dict[str, Callable] = {}


@dataclass
class Measurement:
    name: str
    gpu_ms: float | None = None
    numpy_ms: float | None = None
    peer: str | None = None
    peer_ms: float | None = None
    bytes_moved: float | None = None
    floor_ms: float | None = None
    notes: dict = field(default_factory=dict)

    def ratios(self) -> dict:
        r = {}
        if self.gpu_ms:
            if self.numpy_ms:
                r["numpy/gpu"] = self.numpy_ms / self.gpu_ms
            if self.peer_ms:
                r["peer/gpu"] = self.peer_ms / self.gpu_ms
            if self.floor_ms:
                r["gpu/floor"] = self.gpu_ms / self.floor_ms
        return r


def bench_case(name: str):
    """Register a case: a function ``(ctx) -> Measurement``."""

    def deco(fn):
        CASES[name] = fn
        return fn

    return deco


def gpu_time_ms(fn: Callable[[], object], repeats: int = 20, warmup: int = 3) -> float:
    """Median time of ``fn`` on the current CUDA stream, by CUDA events, in ms
    (:func:`cupyx.profiler.benchmark`)."""
    from cupyx.profiler import benchmark

    return float(statistics.median(benchmark(fn, n_repeat=repeats, n_warmup=warmup).gpu_times[0])) * 1e3


def cpu_time_ms(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> float:
    """Median wall time of ``fn`` in ms (host code)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def device_bandwidth_gbs(nbytes: int = 2 << 30) -> float:
    """Device copy bandwidth in GB/s (bytes read + written per second)."""
    import cupy

    a = cupy.empty(nbytes // 4, dtype=cupy.float32)
    a[:] = 1.5
    b = cupy.empty_like(a)
    ms = gpu_time_ms(lambda: cupy.copyto(b, a), repeats=10)
    return 2 * nbytes / (ms * 1e-3) / 1e9


@dataclass
class Context:
    repeats: int
    bandwidth_gbs: float
    device: str


def list_cases() -> list[tuple[str, str]]:
    from hyperapp.bench import campaign, cases, library, live, peers, products, whole_path  # noqa: F401  (each registers its cases)

    return [(k, (v.__doc__ or "").strip().splitlines()[0] if v.__doc__ else "") for k, v in CASES.items()]


def _fmt(v, unit=""):
    return "-" if v is None else f"{v:.4g}{unit}"


#: cases that also run on the CPU (with ``--quick`` where there is no GPU): whole runs of the app
CPU_CASES = ("batch-50x512x512x128", "campaign-16x2048x2048x128")
#: cases that measure the CPU path only: they run where there is no GPU, with or without ``--quick``
HOST_CASES = ("cpu-analysis-vs-peers",)


def _kernels_prepared() -> str:
    """Prepare the GPU's kernels where this installation has not yet (``prepare-gpu``, as the README's GPU
    install line does), so that no case's throughput carries a kernel's first compilation: a batch of
    RBFN cubes compiled the anomaly input's kernels on the first cube whose model uses it, 0.35-0.45 s in
    the middle of a 1.3 s run on a fresh H200. The first-run case measures first runs itself, in a cache
    of its own. Returns what was done, for the JSON."""
    from hyperapp.batch.prepare_gpu import is_prepared, prepare_gpu

    if is_prepared():
        return "before the bench"
    print("preparing the GPU's kernels first, as the README's GPU install line does (prepare-gpu)")
    s = prepare_gpu()
    return f"by the bench, {s['seconds']:.0f} s" + (f"; failed: {', '.join(s['failed'])}" if s["failed"] else "")


def bench_command(argv: list[str], environ) -> str | None:
    """The command line that ran the bench, for its JSON, with the ``HYPERAPP_`` settings that chose what a
    case measures (its band counts, its repeats); None where ``argv`` is not the ``hyperapp`` command."""
    import shlex

    if not argv or not argv[0].endswith(("hyperapp", "__main__.py")):
        return None
    settings = [f"{k}={shlex.quote(v)}" for k, v in sorted(environ.items()) if k.startswith("HYPERAPP_")]
    return " ".join([*settings, "hyperapp", *(shlex.quote(a) for a in argv[1:])])


def run_bench(names: list[str] | None = None, repeats: int = 20, json_path: str | None = None,
              quick: bool = False) -> int:
    """Run the cases ``names`` (default: all); ``quick``: small sizes (a smoke test), and without a GPU
    the cases of :data:`CPU_CASES` on the CPU."""
    import sys

    from hyperapp.bench import campaign, cases, library, live, peers, products, whole_path  # noqa: F401  (each registers its cases)
    from hyperapp.core.backend import gpu_available, gpu_status
    from hyperapp.core.errors import BackendError, InputError

    unknown = [n for n in names or [] if n not in CASES]
    if unknown:
        raise InputError(f"unknown bench case(s) {', '.join(unknown)}; see --list")
    if quick:
        from hyperapp.bench.campaign import quick as make_quick

        make_quick()
    gpu = gpu_available()
    if not gpu and names and all(n in HOST_CASES for n in names):
        pass  # the CPU's own cases: nothing to check
    elif not gpu:
        if not quick:
            raise BackendError(f"the benchmark needs a GPU: {gpu_status()} (bench --quick runs the whole-run "
                               f"cases {', '.join(CPU_CASES)} small on the CPU)")
        names = [n for n in names or CPU_CASES if n in CPU_CASES]
        if not names:
            raise BackendError(f"these cases need a GPU: {gpu_status()}")
    # (the first-run cases fill caches of their own, and the host cases need no GPU: nothing to prepare)
    prepared = _kernels_prepared() if gpu and set(names or CASES) - {"first-run-every-method", "first-run-new-bands",
                                                                     *HOST_CASES} else None
    bw = device_bandwidth_gbs() if gpu else 0.0
    ctx = Context(repeats, bw, gpu_status())
    command = bench_command(sys.argv, os.environ)
    print(f"device: {ctx.device}; measured copy bandwidth {bw:.0f} GB/s (read + write)")
    results: list = []
    written = 0  # measurements in the JSON file so far
    try:
        for name in names or list(CASES):
            got = CASES[name](ctx)
            for m in got if isinstance(got, list) else [got]:  # a case may measure several variants
                _report(m, bw, results)
            if json_path:  # after every case (atomically), so a run cut short keeps what it measured
                from hyperapp.io.atomic import atomic_write_text

                atomic_write_text(json_path, json.dumps(
                    {"device": ctx.device, "bandwidth_gbs": bw, "command": command, "quick": quick,
                     "kernels_prepared": prepared,
                     "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                     "cases": [dict(asdict(m), ratios=m.ratios()) for m in results]}, indent=2))
                written = len(results)
    except KeyboardInterrupt as exc:  # say what the cut-short run left, in the bench's words, not a batch's
        exc.kept = None
        exc.note = f"the {written} measurement(s) made before are in {json_path}" if written else "nothing written"
        raise
    return 0


def _report(m: Measurement, bw: float, results: list) -> None:
    if m.bytes_moved and m.floor_ms is None:
        m.floor_ms = m.bytes_moved / (bw * 1e9) * 1e3
    results.append(m)
    r = m.ratios()
    where = "cpu" if (m.notes or {}).get("device") == "cpu" else "gpu"  # bench --quick runs some cases on the CPU
    print(
        f"{m.name:<34} {where} {_fmt(m.gpu_ms, ' ms'):>11}  numpy {_fmt(m.numpy_ms, ' ms'):>11}  "
        f"{(m.peer or 'peer')} {_fmt(m.peer_ms, ' ms')}  floor {_fmt(m.floor_ms, ' ms')}  | "
        + "  ".join(f"{k} {v:.2f}x" for k, v in r.items())
        + ("  " + " ".join(f"{k}={v}" for k, v in m.notes.items()) if m.notes else ""),
        flush=True,
    )


def setting_counts(name: str, default: str, smallest: int) -> tuple[int, ...]:
    """The whole numbers (comma-separated) of the setting ``name`` (``default`` where unset), each at least
    ``smallest``; anything else is an :class:`~hyperapp.core.errors.InputError` naming the setting."""
    from hyperapp.core.errors import InputError

    raw = os.environ.get(name, "").strip() or default
    try:
        got = tuple(int(v) for v in raw.split(",") if v.strip())
    except ValueError:
        got = ()
    if not got or min(got) < smallest:
        raise InputError(f"{name}={raw!r}: give whole numbers of {smallest} or more, separated by commas")
    return got
