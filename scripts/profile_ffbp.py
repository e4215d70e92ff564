"""Time the stages of the GPU FFBP search separately (CUDA events, median of 20): block statistics,
summed-area scans, and the level launches. Run on the GPU machine: PYTHONPATH=. python3 scripts/profile_ffbp.py"""

import numpy as np


def main():
    import cupy

    from hyperapp.bench import gpu_time_ms
    from hyperapp.kernels import get_kernel
    from hyperapp.models.ffbp import FFBP
    from hyperapp.models.ffbp_gpu import _launch_levels, _launch_stats, _Stats
    from hyperapp.samples import make_sea_scene

    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    m = FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0) for s in train])
    X = cupy.asarray(make_sea_scene(1024, 1024, seed=998).cube.astype(np.float32))
    st = _Stats(X, 8)
    R, C, B = X.shape
    nbr, nbc = st.nb
    defs = {"NB": B, "NF": 1, "NH": 1, "MEANSTD": 0, "SCALE": 0}
    bstats = get_kernel("ffbp", "hyperapp_ffbp_block_stats", defs)
    rows = get_kernel("ffbp", "hyperapp_ffbp_sat_rows", defs)
    cols = get_kernel("ffbp", "hyperapp_ffbp_sat_cols", defs)
    total = nbr * nbc * B

    def stats_only():
        bstats(((total + 255) // 256,), (256,), (X, np.int32(R), np.int32(C), np.int32(B), np.int32(8),
                                                 np.int32(nbc), np.int64(total), st.ref, st.S1, st.S2))

    def sat_only():
        for S, T in ((st.S1, st.T1), (st.S2, st.T2)):
            rows((((nbr + 1) * B + 127) // 128,), (128,), (S, np.int32(nbr), np.int32(nbc), np.int32(B), T))
            cols((((nbc + 1) * B + 127) // 128,), (128,), (np.int32(nbr), np.int32(nbc), np.int32(B), T))

    _launch_stats(X, st)
    print(f"block stats  {gpu_time_ms(stats_only):.4f} ms")
    print(f"SAT scans    {gpu_time_ms(sat_only):.4f} ms")
    print(f"all stats    {gpu_time_ms(lambda: _launch_stats(X, st)):.4f} ms")
    print(f"levels       {gpu_time_ms(lambda: _launch_levels(m, st)):.4f} ms")


if __name__ == "__main__":
    main()
