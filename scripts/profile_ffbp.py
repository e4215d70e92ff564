"""Time the stages of the GPU FFBP search separately (CUDA events, median of 20): block statistics,
summed-area scans, and the level launches. Run on the GPU machine: PYTHONPATH=. python3 scripts/profile_ffbp.py"""

import numpy as np


def main():
    import cupy

    from hyperapp.bench import gpu_time_ms
    from hyperapp.models.ffbp import FFBP
    from hyperapp.models.ffbp_gpu import (
        _block_stats_into,
        _launch_levels,
        _launch_stats,
        _scan_into,
        _stat_defines,
        _Stats,
    )
    from hyperapp.samples import make_sea_scene

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
    print(f"block stats  {gpu_time_ms(stats_only):.4f} ms")
    print(f"SAT scans    {gpu_time_ms(sat_only):.4f} ms")
    print(f"all stats    {gpu_time_ms(lambda: _launch_stats(X, st)):.4f} ms")
    print(f"levels       {gpu_time_ms(lambda: _launch_levels(m, st)):.4f} ms")


if __name__ == "__main__":
    main()
