"""GPU side of the FFBP detector: the block-statistics pass and the level-by-level search kernels.

The eager search (:func:`search_gpu`) is a fixed sequence of launches with every count kept on the
device: block statistics, two summed-area scans per table, then one ``hyperapp_ffbp_level`` launch per
tree level, each sized for the largest level possible (4^level windows, at most the number of minimum
windows) and reading the live count from device memory. The host reads back once at the end.

:func:`search_gpu_graph` is the one the detector uses: the block statistics (which also zero the
search's counters), then ``hyperapp_ffbp_search``, one persistent launch with grid barriers between its
phases. It sums the blocks into the cells of the tree's partition three levels above the leaves and
builds a small summed-area table over those cells (every window at or above that level has its edges on
cell boundaries; the windows below span at most 2 x 2 blocks and are summed from the blocks directly),
judges the top five levels at once (at most 341 windows, fewer than a grid barrier per level would
cost), settles which of them were live, then takes each lower level from its compacted list. The two
launches are captured as a CUDA graph once per cube buffer; the kernel writes the boxes and counts
straight into device-mapped host memory, so a search is one graph launch and one synchronisation.

Measured on an H100 for the 1024 x 1024 x 64 sea scene (bench case ``ffbp-search-1024x1024x64``, host
call included): 1.23 ms with a thread per window and cupy scans, 0.91 ms with kernel scans and one
read-back, 0.73 ms as a graph, 0.31 ms with a warp per window, 0.27 ms as one persistent launch, 0.21 ms
with unrolled band passes and 16-byte loads, 0.19 ms without the graph's fill, copy and read-back nodes,
0.17 ms with the top levels judged at once, warp scans and streaming loads, 0.15 ms with the coarse
table instead of the full ones (whose 34 MB of write-back had also slowed the next statistics pass).
``scripts/profile_ffbp.py`` splits it: block statistics 90 us (the copy-bandwidth floor), coarse table
13 us, levels 33 us, graph launch 4 us, host call 6-12 us (depending on the host's CPU).
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.kernels import allow_shared, get_kernel

WPB = 8  # windows (warps) per block of the level and search kernels
# measured best on an H100 (scripts/profile_ffbp.py): 8 warps x 2 blocks 0.140 ms, 4 x 4 0.142, 4 x 2 0.151
PERSISTENT_BLOCKS_PER_SM = 2
SCAN_CH = 16  # values per lane and round of the warp scans (32 would cost the search kernel ~40 registers)
TOP_LEVELS = 5  # levels 0-4 (341 windows at most) judged at once by the persistent search


def _block_stats_into(X, bs: int, ref, S1, S2, defs: dict, zero=None) -> None:
    """Launch the block-statistics kernel (16-byte loads when the band count allows); it also zeroes the
    int32 array ``zero`` (the search's counters), which saves the graph a launch."""
    R, C, B = X.shape
    nbc = S1.shape[1]
    vec = B % 4 == 0
    total = S1.shape[0] * nbc * (B // 4 if vec else B)
    k = get_kernel("ffbp", "hyperapp_ffbp_block_stats4" if vec else "hyperapp_ffbp_block_stats", defs)
    nzero = 0 if zero is None else zero.size
    k(((max(total, nzero) + 255) // 256,), (256,),
      (X, np.int32(R), np.int32(C), np.int32(B), np.int32(bs), np.int32(nbc), np.int64(total), ref, S1, S2,
       zero if zero is not None else np.uint64(0), np.int32(nzero)))


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


TIMING = False  # a profiling build: the kernels stamp each phase's start (scripts/profile_ffbp.py)


def _stat_defines(B: int | None = None) -> dict:
    """Compile-time constants of ``kernels/ffbp.cu``: tunables only, the same for every cube and network
    (``B`` is ignored: the band count, like the networks' shape, is a runtime argument), so one module
    serves every search and ``prepare-gpu`` compiles it once."""
    return {"FFBP_TIMING": int(TIMING), "SCAN_CH": SCAN_CH, "WPB": WPB}


def kernel_variants() -> list[tuple[str, dict]]:
    """(module, defines) of ``kernels/ffbp.cu`` as the searches build it: what ``prepare-gpu`` compiles."""
    return [("ffbp", _stat_defines())]


def _scan_into(S, T) -> None:
    """Summed-area table T (nbr+1, nbc+1, B, float64) of block sums S (nbr, nbc, B): two scan kernels."""
    nbr, nbc, B = S.shape
    defs = _stat_defines(B)
    rows = get_kernel("ffbp", "hyperapp_ffbp_sat_rows", defs)
    cols = get_kernel("ffbp", "hyperapp_ffbp_sat_cols", defs)
    groups = -(-B // 8)  # a warp per (line, 8 bands), 4 warps per block
    rows((-(-(nbr + 1) * groups // 4),), (128,), (S, np.int32(nbr), np.int32(nbc), np.int32(B), T))
    cols((-(-(nbc + 1) * groups // 4),), (128,), (np.int32(nbr), np.int32(nbc), np.int32(B), T))


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


def _top(levels: int) -> int:
    """Levels judged at once at the top of the persistent search."""
    return min(TOP_LEVELS, levels)


def _dense_size(levels: int) -> int:
    """Windows in the top levels' dense index space: 1 + 4 + ... + 4^(top-1)."""
    return (4 ** _top(levels) - 1) // 3


def blocks_per_sm(model) -> int:
    """Blocks per SM of the persistent search: all must be resident at once for its grid barrier, so
    PERSISTENT_BLOCKS_PER_SM, capped by what the occupancy calculator allows for this build of the kernel."""
    import cupy

    kernel, smem = _net_kernel("hyperapp_ffbp_search", model)
    function = getattr(kernel, "kernel", kernel)  # a RawKernel's driver function
    fits = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, WPB * 32, smem)
    if fits < 1:
        raise RuntimeError("the FFBP search kernel cannot be resident on this GPU")
    return min(PERSISTENT_BLOCKS_PER_SM, fits)


def coarse_level(levels: int) -> int:
    """The persistent search's coarse level: three above the leaves, so the windows below it span at most
    2 x 2 blocks (summed straight from the block sums) and its cells at most 4 x 4 blocks."""
    return max(levels - 3, 0)


def partition(n: int, level: int) -> np.ndarray:
    """Boundaries (2^level + 1 of them, repeated where a part is empty) of the tree's partition of n block
    rows (or columns) at ``level``: each part is halved as FFBP's ``split`` does, the first half taking
    the odd block."""
    bounds = [0, n]
    for _ in range(level):
        halves = [0]
        for x, z in zip(bounds[:-1], bounds[1:]):
            halves += [x + (z - x + 1) // 2, z]
        bounds = halves
    return np.asarray(bounds, np.int32)


def _inverse(bounds: np.ndarray, n: int) -> np.ndarray:
    """Index of each boundary among ``bounds`` (any of a repeated one: they share a table row), -1 else."""
    inv = np.full(n + 1, -1, np.int32)
    inv[bounds] = np.arange(len(bounds), dtype=np.int32)
    return inv


def _buffers(model, nbr: int, nbc: int, levels: int):
    """Work buffers of the search, allocated once per tree shape and reused."""
    import cupy

    cache = model.__dict__.setdefault("_gpu_cache", {})
    key = ("bufs", nbr, nbc)
    if key not in cache:
        cap = max(4, nbr * nbc)  # no level holds more windows than there are minimum windows
        box_cap = nbr * nbc + 4 * levels
        lc = coarse_level(levels)
        rb, cb = partition(nbr, lc), partition(nbc, lc)
        nc1 = (1 << lc) + 1
        cache[key] = {
            # the persistent search's coarse summed-area tables (first row and column stay zero) and the
            # coarse partition with its inverse
            "lc": lc, "C1": cupy.zeros((nc1, nc1, int(model.n_bands_))),
            "C2": cupy.zeros((nc1, nc1, int(model.n_bands_))),
            "rb": cupy.asarray(rb), "cb": cupy.asarray(cb),
            "inv_r": cupy.asarray(_inverse(rb, nbr)), "inv_c": cupy.asarray(_inverse(cb, nbc)),
            "cap": cap, "box_cap": box_cap,
            "bufs": [cupy.zeros((cap, 4), cupy.int32), cupy.zeros((cap, 4), cupy.int32)],
            # counts[1..levels+1]: live windows per level; counts[levels+2]: accepted boxes;
            # counts[levels+3]: the persistent kernel's grid-barrier counter
            "counts": cupy.zeros(levels + 4, cupy.int32),
            # the persistent search's decisions and scores for every window of the top levels
            "dec": cupy.zeros(_dense_size(levels), cupy.int32),
            "p_top": cupy.zeros((_dense_size(levels), 2), cupy.float32),
            "boxes": cupy.empty((box_cap, 4), cupy.int32),
            "s1": cupy.empty(box_cap, cupy.float32), "s2": cupy.empty(box_cap, cupy.float32),
        }
    return cache[key]


def _read_back(wb, levels):
    """Read the counts back to the host (the one read-back of an eager search)."""
    return _result(wb, levels, wb["counts"].get())


def _result(buf, levels, c):
    """(boxes, ann1, ann2, windows per level) from the host copy ``c`` of the counts and the result
    buffers ``buf`` (device work buffers or host-mapped memory); the box arrays are views into them,
    valid until the next search."""
    c = c.tolist()  # Python ints: cheaper to pick from than NumPy scalars
    nb = c[levels + 2]
    evaluated = [1] + [v for v in c[1:levels + 2] if v > 0]
    return buf["boxes"][:nb], buf["s1"][:nb], buf["s2"][:nb], evaluated


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
    """Preallocated statistics buffers of a search over one cube shape: block sums (both searches) and
    the full summed-area tables (the eager one only)."""

    def __init__(self, X, bs: int):
        import cupy

        R, C, B = X.shape
        self.shape, self.bs = (R, C), bs
        self.nb = (-(-R // bs), -(-C // bs))
        nbr, nbc = self.nb
        # the reference spectrum subtracted before summing is pixel (0, 0), as in WindowStats: the kernels
        # read the first B floats of the cube itself, so no copy (and no graph node) is needed
        self.ref = X
        self.S1 = cupy.empty((nbr, nbc, B), cupy.float32)
        self.S2 = cupy.empty_like(self.S1)
        self.T1 = self.T2 = None  # the full tables: only the eager search needs them (_launch_stats)


def _launch_stats(X, st: _Stats) -> None:
    """Block statistics and summed-area tables into preallocated buffers."""
    import cupy

    if st.T1 is None:
        nbr, nbc = st.nb
        st.T1 = cupy.empty((nbr + 1, nbc + 1, X.shape[2]), cupy.float64)
        st.T2 = cupy.empty_like(st.T1)
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


def _defines(model=None) -> dict:
    """The module's compile-time constants (:func:`_stat_defines`; the model's shape is not among them)."""
    return _stat_defines()


def _shape(model) -> tuple[np.int32, ...]:
    """The kernels' runtime network shape: bands, features, hidden neurons, mean-and-std, size class."""
    B = int(model.n_bands_)
    nf = (2 * B if model.features == "meanstd" else B) + (1 if model.use_scale else 0)
    return tuple(np.int32(v) for v in (B, nf, int(model.n_hidden), int(model.features == "meanstd"),
                                       int(model.use_scale)))


def _net_smem(model) -> int:
    """Dynamic shared memory of the level and search kernels: both networks and each warp's features."""
    _, nf, nh, _, _ = (int(v) for v in _shape(model))
    return (2 * (nf * nh + 2 * nh + 1) + WPB * nf) * 4


def _net_kernel(name: str, model):
    """The level or search kernel, allowed the dynamic shared memory this model's networks need."""
    kernel = get_kernel("ffbp", name, _defines())
    smem = _net_smem(model)
    allow_shared(kernel, smem)
    return kernel, smem


def _launch_persistent(model, X, st, out=None) -> tuple[dict, int]:
    """Block statistics, then scans and every level in one persistent launch (no allocation). ``out``:
    (boxes, ann1, ann2, counts) device pointers to write the result to instead of the work buffers (the
    graph passes host-mapped memory)."""
    from hyperapp.core.backend import device_attributes

    R, C, B = X.shape
    nbr, nbc = st.nb
    search, smem = _net_kernel("hyperapp_ffbp_search", model)
    net1, net2, fmin, fmax, t1 = _nets(model)
    levels = _levels(nbr, nbc)
    wb = _buffers(model, nbr, nbc, levels)
    boxes, s1, s2, out_counts = out or (wb["boxes"], wb["s1"], wb["s2"], np.uint64(0))
    _block_stats_into(X, st.bs, st.ref, st.S1, st.S2, _stat_defines(B), zero=wb["counts"])
    grid = int(device_attributes()["MultiProcessorCount"]) * blocks_per_sm(model)
    search((grid,), (WPB * 32,),
           (*_shape(model), st.S1, st.S2, wb["C1"], wb["C2"], np.int32(wb["lc"]), wb["rb"], wb["cb"], wb["inv_r"], wb["inv_c"],
            np.int32(nbr), np.int32(nbc), np.int32(R), np.int32(C),
            np.int32(st.bs), st.ref, np.int32(levels), np.int32(_top(levels)), wb["bufs"][0], wb["bufs"][1],
            wb["counts"], np.int32(wb["cap"]), wb["dec"], wb["p_top"], net1, net2, fmin, fmax, t1,
            np.int32(model.max_class_), np.float32(model.t2_), boxes, s1, s2, np.int32(wb["box_cap"]),
            out_counts), shared_mem=smem)
    return wb, levels


def _launch_levels(model, st) -> tuple[dict, int]:
    """Every level of the tree, one launch each (the eager form kept for comparison)."""
    nbr, nbc = st.nb
    R, C = st.shape
    k, smem = _net_kernel("hyperapp_ffbp_level", model)
    net1, net2, fmin, fmax, t1 = _nets(model)
    levels = _levels(nbr, nbc)
    wb = _buffers(model, nbr, nbc, levels)
    cap, box_cap, bufs, counts = wb["cap"], wb["box_cap"], wb["bufs"], wb["counts"]
    counts.fill(0)
    for lev in range(levels + 1):
        most = min(4 ** lev, cap)
        k(((most + WPB - 1) // WPB,), (WPB * 32,),
          (*_shape(model), st.T1, st.T2, np.int32(R), np.int32(C), np.int32(st.bs), np.int32(nbc + 1), st.ref,
           np.int32(lev == 0), bufs[lev % 2], counts[lev:lev + 1],
           net1, net2, fmin, fmax, t1, np.int32(model.max_class_), np.float32(model.t2_),
           bufs[(lev + 1) % 2], counts[lev + 1:lev + 2], np.int32(cap), wb["boxes"], wb["s1"], wb["s2"],
           counts[levels + 2:levels + 3], np.int32(box_cap)), shared_mem=smem)
    return wb, levels


class _MappedResult:
    """The graph's result buffers in pinned, device-mapped host memory: the search kernel writes the boxes,
    their scores and the counts straight into them, so the graph needs no copy node and the host reads
    them with no read-back (the pointer is the same on both sides under unified addressing)."""

    def __init__(self, box_cap: int, n_counts: int):
        import cupy

        sizes = (box_cap * 16, box_cap * 4, box_cap * 4, n_counts * 4)
        flags = cupy.cuda.runtime.hostAllocMapped | cupy.cuda.runtime.hostAllocPortable
        self._mem = cupy.cuda.PinnedMemory(sum(sizes), flags)
        host = np.frombuffer(cupy.cuda.PinnedMemoryPointer(self._mem, 0), np.uint8, sum(sizes))
        offs = np.cumsum((0,) + sizes)
        self.boxes = host[offs[0]:offs[1]].view(np.int32).reshape(box_cap, 4)
        self.s1 = host[offs[1]:offs[2]].view(np.float32)
        self.s2 = host[offs[2]:offs[3]].view(np.float32)
        self.counts = host[offs[3]:offs[4]].view(np.int32)
        self.arrays = {"boxes": self.boxes, "s1": self.s1, "s2": self.s2}
        self.pointers = tuple(np.uint64(self._mem.ptr + int(o)) for o in offs[:4])


def _graph_key(X) -> tuple:
    """Cache key of the graph for cube buffer X (the graph reads X's memory, so layout and type count)."""
    return ("graph", X.data.ptr, X.shape, X.strides, X.dtype.char)


def search_gpu_graph(model, X):
    """The whole GPU search (statistics included) as a CUDA graph, captured once per cube buffer.

    Returns host arrays (windows, ann1, ann2) and the windows evaluated per level."""
    import cupy

    cache = model.__dict__.setdefault("_gpu_cache", {})
    entry = cache.get(_graph_key(X))
    if entry is None:
        X = cupy.ascontiguousarray(X, dtype=cupy.float32)
        key = _graph_key(X)
        for k in [k for k in cache if isinstance(k, tuple) and k[0] == "graph"]:
            del cache[k]  # one cube at a time: drop graphs of buffers that may be freed
        st = _Stats(X, model.min_window)
        wb, levels = _launch_persistent(model, X, st)  # compile and warm every kernel outside the capture
        # the warm-up must finish before the graph can run: both use the same buffers and grid barrier,
        # and two persistent grids at once would not both be resident (a deadlock)
        cupy.cuda.Device().synchronize()
        out = _MappedResult(wb["box_cap"], levels + 3)
        # a blocking stream: ordered with the legacy default stream, where the eager paths run on the same
        # buffers
        stream = cupy.cuda.Stream(non_blocking=False)
        with stream:
            stream.begin_capture()
            _launch_persistent(model, X, st, out.pointers)
            graph = stream.end_capture()
        entry = cache[key] = (graph, stream, st, wb, levels, X, out)
    graph, stream, st, wb, levels, _, out = entry
    graph.launch(stream)
    stream.synchronize()
    W, s1, s2, evaluated = _result(out.arrays, levels, out.counts)
    return W.copy(), s1.copy(), s2.copy(), evaluated  # copies: the next search overwrites the buffers
