"""Bench cases of the live path: a click to the mask on screen, a threshold move, a cube to the GPU.

click-to-result is :func:`hyperapp.detect.run.run_detection` with the cube resident on the GPU (as the
window keeps it), new clicks and a truth mask: fit, score, threshold at the false-alarm rate, mask,
object count, AUC and Pd, and the copy of scores and mask to the host, timed by the wall clock (the
result is on the host when it returns). The score kernel alone and the NumPy path's click-to-result
are printed beside it.
"""

from __future__ import annotations

import itertools
import statistics
import time

import numpy as np

from hyperapp.bench import Measurement, bench_case, cpu_time_ms, gpu_time_ms

METHODS = ("rbfn", "ace", "mf", "cem", "sam", "rx")


def scene(rows, cols, bands, n_targets=300, seed=0):
    """A mixed-spectra cube with ``n_targets`` implanted 2x2 targets, their truth and 5 clicks."""
    from hyperapp.bench.cases import _cube

    rng = np.random.default_rng(seed)
    X = _cube(rows, cols, bands, seed)
    t = rng.uniform(0.05, 0.6, bands).astype(np.float32)
    truth = np.zeros((rows, cols), bool)
    r = rng.integers(0, rows - 2, n_targets)
    c = rng.integers(0, cols - 2, n_targets)
    for dr in (0, 1):
        for dc in (0, 1):
            truth[r + dr, c + dc] = True
    X[truth] = 0.4 * X[truth] + 0.6 * t + rng.normal(0, 0.01, (int(truth.sum()), bands)).astype(np.float32)
    clicks = np.zeros_like(truth)
    pick = rng.choice(np.flatnonzero(truth), 5, replace=False)
    clicks.reshape(-1)[pick] = True
    return X, truth, clicks


def click_sets(truth: np.ndarray, clicks: np.ndarray, n: int = 8, seed: int = 1) -> list[np.ndarray]:
    """``clicks`` and ``n - 1`` other sets of as many clicks on ``truth``'s targets: the click cases click
    a new set each time, as a person does (a fit may take what the last click's computed from the same
    sampled pixels, :mod:`hyperapp.models.rbfn_reuse`, and that is worth what new clicks keep of it)."""
    rng = np.random.default_rng(seed)
    out = [clicks]
    for _ in range(n - 1):
        c = np.zeros_like(truth)
        c.reshape(-1)[rng.choice(np.flatnonzero(truth), int(clicks.sum()), replace=False)] = True
        out.append(c)
    return out


def _wall(fn, repeats):
    return statistics.median(_walls(fn, repeats))


def _walls(fn, repeats) -> list[float]:
    """Wall milliseconds of ``repeats`` calls of ``fn``, each from an idle device."""
    import cupy

    times = []
    for _ in range(repeats):
        cupy.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


#: the click cases measure each method in this many rounds, interleaved with the other methods' and a
#: pause of :data:`ROUND_PAUSE_S` apart (a person's clicks are seconds apart too): :func:`_click_cases`
ROUNDS = 8
ROUND_PAUSE_S = 1.0
#: a round whose launch time exceeds the case's fastest round's by this factor ran in one of the host's
#: slow episodes (:func:`launch_us`); the click cases give the median click in each kind of round apart
SLOW_ROUND = 1.3


def cpu_jiffies() -> tuple[int, int] | None:
    """(time stolen by the hypervisor, total) over every CPU of this host so far, in the kernel's ticks
    (``/proc/stat``), or None where the host does not say (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (values[7] if len(values) > 7 else 0), sum(values)


def steal_percent(before, after) -> float | None:
    """The share of CPU time the hypervisor took between two :func:`cpu_jiffies`, in per cent."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100.0 * (after[0] - before[0]) / (after[1] - before[1]), 2)


def launch_us(n: int = 2000) -> float:
    """This host's time for one small CuPy operation, in microseconds: the launch overhead each of a click's
    few hundred small operations pays. It differs between hosts of the same kind, and on one host from one
    few seconds to the next (8.5 against 13.5 us on one core of one H200 host), and sets most of the RBFN
    click's host time, so the click cases note it beside their figures, round by round
    (``notes.launch_us_rounds``)."""
    import cupy

    small = cupy.ones(16, cupy.float32)
    for _ in range(200):
        small += 1
    cupy.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        small += 1
    cupy.cuda.get_current_stream().synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def clicks_in_rounds(clicks: dict, repeats: int) -> dict:
    """Each of ``clicks`` (name -> a function running one click and returning its result) timed in
    :data:`ROUNDS` rounds a second apart, interleaved with the others, with each round's host launch time
    beside them. Returns, per name, the median wall milliseconds and the notes: the stage medians, the launch
    times, each round's median, the medians in and out of the host's slow episodes, and the hypervisor's
    share of CPU time.

    The hosts' CPUs (virtual) pass through episodes of a few seconds in which every small operation costs
    1.4-1.6x (the same core, the same process: 8.5 against 13.5 us a launch, a click 10 against 14 ms), so
    clicks measured in one stretch gave one method's median from whichever episode it fell in. Each result
    is dropped at once, as the GUI drops the last one (results kept alive would make every click allocate
    fresh pinned and device memory, which the steady state does not).
    """
    per_round = max(3, repeats // ROUNDS)
    walls = {name: [] for name in clicks}
    seconds = {name: [] for name in clicks}
    reused = {name: [] for name in clicks}
    launches = []
    jiffies = cpu_jiffies()
    for r in range(ROUNDS):
        if r:
            time.sleep(ROUND_PAUSE_S)
        launches.append(round(launch_us(500), 2))
        for name, click in clicks.items():
            walls[name] += _walls(lambda name=name, click=click: _note(click().report, seconds[name], reused[name]),
                                  per_round)
    steal = steal_percent(jiffies, cpu_jiffies())
    slow = [v > SLOW_ROUND * min(launches) for v in launches]
    out = {}
    for name, w in walls.items():
        rounds = [w[i:i + per_round] for i in range(0, len(w), per_round)]
        by_state = {}
        for state, in_slow in (("normal", False), ("slow episode", True)):
            kept = [v for r, is_slow in zip(rounds, slow) if is_slow == in_slow for v in r]
            by_state[state] = round(statistics.median(kept), 2) if kept else None
        out[name] = (statistics.median(w), {
            "stages_ms": {k: round(statistics.median(s[k] for s in seconds[name]) * 1e3, 2)
                          for k in seconds[name][0] if k != "total"},
            "launch_us": round(statistics.median(launches), 2), "launch_us_rounds": launches,
            "round_medians_ms": [round(statistics.median(r), 2) for r in rounds],
            "click_ms_by_host_state": by_state, "host_steal_percent": steal})
        if any(reused[name]):  # how many clicks' fits took what (hyperapp.models.rbfn_reuse)
            out[name][1]["fit_reused"] = {", ".join(k) or "nothing": reused[name].count(k) for k in set(reused[name])}
    return out


def _note(report: dict, seconds: list, reused: list) -> None:
    seconds.append(report["seconds"])
    reused.append(tuple(report.get("fit_reused", ())))


def _click_cases(ctx, rows, cols, bands, with_cpu: bool) -> list[Measurement]:
    import cupy

    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    X, truth, clicks = scene(rows, cols, bands)
    sets = click_sets(truth, clicks)
    cube = cube_from_array(X, "bench")
    Xd = cupy.asarray(X)
    clicks_of, first = {}, {}
    for method in METHODS:
        turn = itertools.count()

        def click(dev="gpu", image=Xd, method=method, turn=turn, given=None):
            marks = sets[next(turn) % len(sets)] if given is None else given
            return run_detection(cube, DetectRequest(method, device=dev), marks, truth=truth, image=image)

        res = click(given=clicks)  # compile and warm; what the figures need of it kept, the result itself dropped
        clicks_of[method], first[method] = click, (res.model, res.report["evaluation"]["auc"], res.report["objects"])
        del res
    measured = clicks_in_rounds(clicks_of, ctx.repeats)
    out = []
    for method in METHODS:
        (model, auc, objects), (gpu, notes) = first[method], measured[method]
        score = gpu_time_ms(lambda est=model: est.decision_function(Xd), max(3, ctx.repeats // 4))
        cpu = None
        if with_cpu:
            cpu = cpu_time_ms(lambda method=method: clicks_of[method]("cpu", X, given=clicks), repeats=1, warmup=0)
        notes.update(auc=round(auc, 4), objects=objects)
        out.append(Measurement(f"click-{method}-{rows}x{cols}x{bands}", gpu, cpu, "score kernel alone", score,
                               bytes_moved=X.nbytes * 2, notes=notes))
    return out


@bench_case("click-to-result-1024x1024x64")
def click_1024(ctx):
    """New clicks -> fit -> score -> threshold -> mask + object count + AUC on the host, each method."""
    return _click_cases(ctx, 1024, 1024, 64, with_cpu=True)


@bench_case("click-to-result-2048x2048x128")
def click_2048(ctx):
    """The same at 2048 x 2048 x 128 (GPU only)."""
    return _click_cases(ctx, 2048, 2048, 128, with_cpu=False)


@bench_case("threshold-change-2048x2048")
def threshold_change(ctx) -> Measurement:
    """A threshold move on resident scores: remask, pixel count and object count (8-connected)."""
    import cupy

    from hyperapp.models.postprocess import count_objects

    rng = np.random.default_rng(0)
    s = rng.normal(size=(2048, 2048)).astype(np.float32)
    sd = cupy.asarray(s)
    t = float(np.quantile(s, 0.999))

    def move():
        m = sd > t
        return int(m.sum()), count_objects(m)

    gpu = _wall(move, ctx.repeats)

    def move_cpu():
        from hyperapp.models.postprocess import label_objects

        m = s > t
        return int(m.sum()), label_objects(m)[1]

    cpu = cpu_time_ms(move_cpu, repeats=3)
    return Measurement("threshold-change-2048x2048", gpu, cpu, None, None, bytes_moved=s.nbytes + s.size,
                       notes={"objects": move()[1]})


@bench_case("resident-load-2048x2048x128")
def resident_load(ctx) -> Measurement:
    """A float32 cube in host memory onto the GPU (pinned staging, conversion and no-data test on the
    device)."""
    import cupy

    from hyperapp.bench.cases import _cube
    from hyperapp.core.backend import empty_pinned
    from hyperapp.core.cube import cube_from_array
    from hyperapp.reading.tiles import read_float32

    X = _cube(2048, 2048, 128)
    cube = cube_from_array(X, "bench")
    read_float32(cube, cupy)
    gpu = _wall(lambda: read_float32(cube, cupy), 3)
    naive = _wall(lambda: cupy.asarray(X), 2)
    # the floor: the bus's pinned host-to-device rate
    h = empty_pinned((256 << 20) // 4, np.float32)
    d = cupy.empty(h.shape, cupy.float32)
    bus_ms = gpu_time_ms(lambda: d.set(h), 5)
    bus = h.nbytes / (bus_ms * 1e-3)
    floor = X.nbytes / bus * 1e3
    return Measurement("resident-load-2048x2048x128", gpu, None, "cupy.asarray (pageable)", naive,
                       floor_ms=floor, notes={"pinned_h2d_GBps": round(bus / 1e9, 1)})
