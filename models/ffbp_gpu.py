"""GPU side of the FFBP detector: the block-statistics pass and the level-by-level search kernels.

The whole search is a fixed sequence of launches with every count kept on the device: block statistics,
two summed-area scans per table, then one ``hyperapp_ffbp_level`` launch per tree level, each sized for
the largest level possible (4^level windows, at most the number of minimum windows) and reading the
live count from device memory. The host reads back once at the end: the boxes and the per-level counts.

:func:`search_gpu_graph` runs the block statistics and then ``hyperapp_ffbp_search``, one persistent
launch that does the scans and every level with grid barriers in between, and captures the two as a
CUDA graph once per (cube buffer, shape), so a search is one graph launch and one read-back. Measured
on an H100 for the 1024 x 1024 x 64 sea scene: 1.23 ms with a thread per window and cupy scans, 0.91 ms
with kernel scans and one read-back, 0.73 ms as a graph, 0.31 ms with a warp per window, 0.27 ms as one
persistent launch, 0.21 ms with unrolled band passes, views instead of copies, the count read-back inside
the graph and 16-byte loads in the block statistics (the read floor is 0.09 ms). The persistent grid's
size hardly matters (1-4 blocks per SM: 0.230/0.216/0.217/0.215 ms).
:func:`search_gpu` keeps the launch-per-level form for comparison.
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.kernels import get_kernel

WPB = 4  # windows (warps) per block of the level kernel
PERSISTENT_BLOCKS_PER_SM = 2


def _block_stats_into(X, bs: int, ref, S1, S2, defs: dict) -> None:
    """Launch the block-statistics kernel (16-byte loads when the band count allows)."""
    R, C, B = X.shape
    nbc = S1.shape[1]
    vec = B % 4 == 0
    total = S1.shape[0] * nbc * (B // 4 if vec else B)
    k = get_kernel("ffbp", "hyperapp_ffbp_block_stats4" if vec else "hyperapp_ffbp_block_stats", defs)
    k(((total + 255) // 256,), (256,),
      (X, np.int32(R), np.int32(C), np.int32(B), np.int32(bs), np.int32(nbc), np.int64(total), ref, S1, S2))


def block_stats_gpu(X, bs: int, ref):
    import cupy

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    R, C, B = X.shape
    nbr, nbc = -(-R // bs), -(-C // bs)
    S1 = cupy.empty((nbr, nbc, B), cupy.float32)
    S2 = cupy.empty_like(S1)
    _block_stats_into(X, bs, cupy.ascontiguousarray(ref, dtype=cupy.float32), S1, S2, _stat_defines(B))
    return S1, S2


def _pack(ann):
    import cupy

    return cupy.asarray(np.concatenate([np.asarray(ann.U_, np.float32).ravel(), np.asarray(ann.b_, np.float32),
                                        np.asarray(ann.w_, np.float32), np.asarray(ann.b0_, np.float32).ravel()]))


def _stat_defines(B: int) -> dict:
    """Compile-time constants of the statistics kernels (the network sizes do not matter to them)."""
    return {"NB": B, "NF": 1, "NH": 1, "MEANSTD": 0, "SCALE": 0}


def _scan_into(S, T) -> None:
    """Summed-area table T (nbr+1, nbc+1, B, float64) of block sums S (nbr, nbc, B): two scan kernels."""
    nbr, nbc, B = S.shape
    defs = _stat_defines(B)
    rows = get_kernel("ffbp", "hyperapp_ffbp_sat_rows", defs)
    cols = get_kernel("ffbp", "hyperapp_ffbp_sat_cols", defs)
    rows((((nbr + 1) * B + 127) // 128,), (128,), (S, np.int32(nbr), np.int32(nbc), np.int32(B), T))
    cols((((nbc + 1) * B + 127) // 128,), (128,), (np.int32(nbr), np.int32(nbc), np.int32(B), T))


def summed_area_gpu(S):
    """Summed-area table of (nbr, nbc, B) float32 block sums, float64."""
    import cupy

    nbr, nbc, B = S.shape
    T = cupy.empty((nbr + 1, nbc + 1, B), cupy.float64)
    _scan_into(S, T)
    return T


def _levels(nbr: int, nbc: int) -> int:
    """Depth of the window tree over an nbr x nbc grid of blocks."""
    return int(math.ceil(math.log2(max(nbr, nbc)))) + 1 if max(nbr, nbc) > 1 else 1


def _buffers(model, nbr: int, nbc: int, levels: int):
    """Work buffers of the search, allocated once per tree shape and reused."""
    import cupy

    cache = model.__dict__.setdefault("_gpu_cache", {})
    key = ("bufs", nbr, nbc)
    if key not in cache:
        cap = max(4, nbr * nbc)  # no level holds more windows than there are minimum windows
        box_cap = nbr * nbc + 4 * levels
        cache[key] = {
            "cap": cap, "box_cap": box_cap,
            "bufs": [cupy.zeros((cap, 4), cupy.int32), cupy.zeros((cap, 4), cupy.int32)],
            # counts[1..levels+1]: live windows per level; counts[levels+2]: accepted boxes;
            # counts[levels+3]: the persistent kernel's grid-barrier counter
            "counts": cupy.zeros(levels + 4, cupy.int32),
            "boxes": cupy.empty((box_cap, 4), cupy.int32),
            "s1": cupy.empty(box_cap, cupy.float32), "s2": cupy.empty(box_cap, cupy.float32),
        }
    return cache[key]


def _read_back(wb, levels):
    """Read the counts back to the host (the one read-back of an eager search)."""
    return _result(wb, levels, wb["counts"].get())


def _result(wb, levels, c):
    """(boxes, ann1, ann2, windows per level) from the host copy ``c`` of the counts; the box arrays are
    views into the search's buffers, valid until the next search."""
    nb = int(c[levels + 2])
    evaluated = [1] + [int(v) for v in c[1:levels + 2] if v > 0]
    return wb["boxes"][:nb], wb["s1"][:nb], wb["s2"][:nb], evaluated


def search_gpu(model, X, persistent: bool = False):
    """The GPU search with eager launches: one launch per stage and level, or (``persistent``) the
    single-launch kernel that the graph replays; returns (windows, ann1, ann2, windows per level)."""
    import cupy

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    st = _Stats(X, model.min_window)
    if persistent:
        wb, levels = _launch_persistent(model, X, st)
    else:
        _launch_stats(X, st)
        wb, levels = _launch_levels(model, st)
    return _read_back(wb, levels)


class _Stats:
    """Preallocated summed-area tables for the graph (the WindowStats fields the level kernel reads)."""

    def __init__(self, X, bs: int):
        import cupy

        R, C, B = X.shape
        self.shape, self.bs = (R, C), bs
        self.nb = (-(-R // bs), -(-C // bs))
        nbr, nbc = self.nb
        self.ref = cupy.empty(B, cupy.float32)
        self.S1 = cupy.empty((nbr, nbc, B), cupy.float32)
        self.S2 = cupy.empty_like(self.S1)
        self.T1 = cupy.empty((nbr + 1, nbc + 1, B), cupy.float64)
        self.T2 = cupy.empty_like(self.T1)


def _launch_stats(X, st: _Stats) -> None:
    """Block statistics and summed-area tables into preallocated buffers (no allocation: capturable)."""
    st.ref[...] = X[0, 0]
    _block_stats_into(X, st.bs, st.ref, st.S1, st.S2, _stat_defines(X.shape[2]))
    _scan_into(st.S1, st.T1)
    _scan_into(st.S2, st.T2)


def _nets(model):
    import cupy

    cache = model.__dict__.setdefault("_gpu_cache", {})
    if "nets" not in cache:
        cache["nets"] = (_pack(model.ann1_), _pack(model.ann2_), cupy.asarray(model.fmin_, cupy.float32),
                         cupy.asarray(model.fmax_, cupy.float32), cupy.asarray(model.t1_, cupy.float32))
    return cache["nets"]


def _defines(model) -> dict:
    B = int(model.n_bands_)
    nf = (2 * B if model.features == "meanstd" else B) + (1 if model.use_scale else 0)
    return {"NB": B, "NF": nf, "NH": int(model.n_hidden), "MEANSTD": int(model.features == "meanstd"),
            "SCALE": int(model.use_scale)}


def _launch_persistent(model, X, st) -> tuple[dict, int]:
    """Block statistics, then scans and every level in one persistent launch (no allocation)."""
    from hyperapp.backend import device_attributes

    R, C, B = X.shape
    nbr, nbc = st.nb
    search = get_kernel("ffbp", "hyperapp_ffbp_search", _defines(model))
    net1, net2, fmin, fmax, t1 = _nets(model)
    levels = _levels(nbr, nbc)
    wb = _buffers(model, nbr, nbc, levels)
    wb["counts"].fill(0)
    st.ref[...] = X[0, 0]
    _block_stats_into(X, st.bs, st.ref, st.S1, st.S2, _stat_defines(B))
    # every block must be resident for the grid barrier: 2 blocks of 128 threads per SM is well inside
    # the kernel's occupancy (64 registers, 10 KB of shared memory: 8 blocks per SM on sm_80/sm_90)
    sms = int(device_attributes()["MultiProcessorCount"])
    search((sms * PERSISTENT_BLOCKS_PER_SM,), (WPB * 32,),
           (st.S1, st.S2, st.T1, st.T2, np.int32(nbr), np.int32(nbc), np.int32(R), np.int32(C),
            np.int32(st.bs), st.ref, np.int32(levels), wb["bufs"][0], wb["bufs"][1], wb["counts"],
            np.int32(wb["cap"]), net1, net2, fmin, fmax, t1, np.int32(model.max_class_),
            np.float32(model.t2_), wb["boxes"], wb["s1"], wb["s2"], np.int32(wb["box_cap"])))
    return wb, levels


def _launch_levels(model, st) -> tuple[dict, int]:
    """Every level of the tree, one launch each (the eager form kept for comparison)."""
    nbr, nbc = st.nb
    R, C = st.shape
    k = get_kernel("ffbp", "hyperapp_ffbp_level", _defines(model))
    net1, net2, fmin, fmax, t1 = _nets(model)
    levels = _levels(nbr, nbc)
    wb = _buffers(model, nbr, nbc, levels)
    cap, box_cap, bufs, counts = wb["cap"], wb["box_cap"], wb["bufs"], wb["counts"]
    counts.fill(0)
    for lev in range(levels + 1):
        most = min(4 ** lev, cap)
        k(((most + WPB - 1) // WPB,), (WPB * 32,),
          (st.T1, st.T2, np.int32(R), np.int32(C), np.int32(st.bs), np.int32(nbc + 1), st.ref,
           np.int32(lev == 0), bufs[lev % 2], counts[lev:lev + 1],
           net1, net2, fmin, fmax, t1, np.int32(model.max_class_), np.float32(model.t2_),
           bufs[(lev + 1) % 2], counts[lev + 1:lev + 2], np.int32(cap), wb["boxes"], wb["s1"], wb["s2"],
           counts[levels + 2:levels + 3], np.int32(box_cap)))
    return wb, levels


def search_gpu_graph(model, X):
    """The whole GPU search (statistics included) as a CUDA graph, captured once per cube buffer."""
    import cupy

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    cache = model.__dict__.setdefault("_gpu_cache", {})
    key = ("graph", X.data.ptr, X.shape)
    entry = cache.get(key)
    if entry is None:
        for k in [k for k in cache if isinstance(k, tuple) and k[0] == "graph"]:
            del cache[k]  # one cube at a time: drop graphs of buffers that may be freed
        st = _Stats(X, model.min_window)
        wb, levels = _launch_persistent(model, X, st)  # compile and warm every kernel outside the capture
        # the warm-up must finish before the graph can run: both use the same buffers and grid barrier,
        # and two persistent grids at once would not both be resident (a deadlock)
        cupy.cuda.Device().synchronize()
        # the counts come back into pinned host memory by a copy inside the graph
        pinned = cupy.cuda.alloc_pinned_memory(wb["counts"].nbytes)
        host_counts = np.frombuffer(pinned, np.int32, wb["counts"].size)
        # a blocking stream: ordered with the legacy default stream, where the eager paths run on the same
        # buffers
        stream = cupy.cuda.Stream(non_blocking=False)
        with stream:
            stream.begin_capture()
            _launch_persistent(model, X, st)
            # (CuPy refuses .get() while capturing; the runtime call becomes a memcpy node)
            cupy.cuda.runtime.memcpyAsync(pinned.ptr, wb["counts"].data.ptr, wb["counts"].nbytes,
                                          cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            graph = stream.end_capture()
        entry = cache[key] = (graph, stream, st, wb, levels, X, host_counts, pinned)
    graph, stream, st, wb, levels, _, c, _ = entry
    graph.launch(stream)
    stream.synchronize()
    return _result(wb, levels, c)
