"""Time the GPU FFBP search on the 1024 x 1024 x 64 sea scene, phase by phase.

Three views, on the GPU machine (``python3 scripts/profile_ffbp.py``):

- the stages as separate launches (CUDA events, median of 20): block statistics, summed-area scans, levels;
- the graph as the bench times it (host call included), the graph's replay alone on its stream, and the
  host call's parts; the replay time over the tunables (scan run length, persistent blocks per SM);
- a profiling build (``FFBP_TIMING``) in which block 0 stamps the GPU's global timer at each phase of the
  graph: statistics, coarse table, every level; medians over 30 replays, in microseconds from
  the start of the statistics kernel.
"""

import statistics

import numpy as np


def phase_stamps(m, X, reps: int = 30):
    import cupy

    import hyperapp.models.ffbp_gpu as fg
    from hyperapp.kernels import get_module

    fg.TIMING = True
    m.__dict__.get("_gpu_cache", {}).clear()
    fg.search_gpu_graph(m, X)
    mods = [get_module("ffbp", fg._stat_defines(X.shape[2])), get_module("ffbp", fg._defines(m))]
    bufs = [cupy.ndarray((48,), cupy.uint64, mod.get_global("hyperapp_ffbp_times")) for mod in mods]
    rows = []
    for _ in range(reps):
        for b in bufs:
            b.fill(0)
        cupy.cuda.Device().synchronize()
        fg.search_gpu_graph(m, X)
        stats, search = (b.get().astype(np.int64) for b in bufs)
        t = np.concatenate([stats[:2], search[2:]])
        rows.append(t)
    fg.TIMING = False
    m.__dict__.get("_gpu_cache", {}).clear()
    T = np.array(rows)
    t0 = T[:, :1]
    top = fg._top(fg._levels(*(-(-n // m.min_window) for n in X.shape[:2])))
    names = ["stats start", "stats end (last block)", "search start", "coarse cells summed", "coarse rows scanned",
             "coarse columns scanned", f"levels 0-{top - 1} judged", f"top settled, level {top}"]
    names += [f"level {top + 1 + k} / end" for k in range(T.shape[1] - len(names))]
    out = []
    for j, name in enumerate(names):
        if (T[:, j] > 0).all():
            out.append((name, statistics.median((T[:, j] - t0[:, 0]) / 1e3)))
    return out


def replay_ms(m, X, reps: int = 50) -> float:
    """Median time of the graph's replay alone (CUDA events on its stream: no host work inside)."""
    import cupy

    from hyperapp.models.ffbp_gpu import _graph_key, search_gpu_graph

    search_gpu_graph(m, X)
    graph, stream = m._gpu_cache[_graph_key(X)][:2]
    times = []
    for _ in range(reps):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record(stream)
        graph.launch(stream)
        b.record(stream)
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


def sweep(m, X):
    """Graph replay time over the tunables: scan run length, warps per block, persistent blocks per SM."""
    import hyperapp.models.ffbp_gpu as fg

    default = fg.SCAN_CH, fg.PERSISTENT_BLOCKS_PER_SM, fg.WPB
    print("scan run  warps/block  blocks/SM  replay ms")
    for ch, wpb, bps in ((16, 4, 2), (16, 4, 3), (16, 4, 4), (16, 4, 5), (32, 4, 4), (16, 8, 1), (16, 8, 2),
                         (16, 16, 1)):
        fg.SCAN_CH, fg.WPB, fg.PERSISTENT_BLOCKS_PER_SM = ch, wpb, bps
        m.__dict__.get("_gpu_cache", {}).clear()
        print(f"{ch:8d}  {wpb:11d}  {fg.blocks_per_sm(m):9d}  {replay_ms(m, X):.4f}")
    fg.SCAN_CH, fg.PERSISTENT_BLOCKS_PER_SM, fg.WPB = default
    m.__dict__.get("_gpu_cache", {}).clear()


def host_overhead(m, X):
    """Where the host time of a search goes: launch + synchronise alone, and the whole call."""
    from hyperapp.bench import cpu_time_ms
    from hyperapp.models.ffbp_gpu import _graph_key, _result, search_gpu_graph

    search_gpu_graph(m, X)
    graph, stream = m._gpu_cache[_graph_key(X)][:2]

    def bare():
        graph.launch(stream)
        stream.synchronize()

    whole = cpu_time_ms(lambda: search_gpu_graph(m, X), 200)
    print(f"wall: launch + sync {cpu_time_ms(bare, 200):.4f} ms, whole call {whole:.4f} ms")

    entry = m._gpu_cache[_graph_key(X)]
    out, levels = entry[6], entry[4]

    def key():
        return m.__dict__.setdefault("_gpu_cache", {}).get(_graph_key(X))

    def result():
        W, s1, s2, e = _result(out.arrays, levels, out.counts)
        return W.copy(), s1.copy(), s2.copy(), e

    for name, fn in (("cache key", key), ("result", result)):
        print(f"  {name:12s} {cpu_time_ms(fn, 2000) * 1e3:.2f} us")


def main():
    import cupy

    from hyperapp.bench import gpu_time_ms
    from hyperapp.io.samples import make_sea_scene
    from hyperapp.models.ffbp import FFBP
    from hyperapp.models.ffbp_gpu import (
        _block_stats_into,
        _launch_levels,
        _launch_stats,
        _scan_into,
        _stat_defines,
        _Stats,
        search_gpu_graph,
    )

    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    m = FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0) for s in train])
    X = cupy.asarray(make_sea_scene(1024, 1024, seed=998).cube.astype(np.float32))
    st = _Stats(X, 8)
    defs = _stat_defines(X.shape[2])

    def stats_only():
        _block_stats_into(X, st.bs, st.ref, st.S1, st.S2, defs)

    def sat_only():
        _scan_into(st.S1, st.T1)
        _scan_into(st.S2, st.T2)

    _launch_stats(X, st)
    print(f"block stats       {gpu_time_ms(stats_only):.4f} ms")
    print(f"SAT scans         {gpu_time_ms(sat_only):.4f} ms")
    print(f"all stats         {gpu_time_ms(lambda: _launch_stats(X, st)):.4f} ms")
    print(f"levels            {gpu_time_ms(lambda: _launch_levels(m, st)):.4f} ms")

    print(f"graph (as bench)  {gpu_time_ms(lambda: search_gpu_graph(m, X), 50):.4f} ms")
    print(f"graph replay only {replay_ms(m, X):.4f} ms")
    host_overhead(m, X)
    sweep(m, X)
    print("phases of the graph (profiling build), us from the statistics kernel's start:")
    for name, us in phase_stamps(m, X):
        print(f"  {name:24s} {us:8.1f}")


if __name__ == "__main__":
    main()
