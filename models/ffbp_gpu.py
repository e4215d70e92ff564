"""GPU side of the FFBP detector: the block-statistics pass and the level-by-level search kernels.

The whole search is a fixed sequence of launches with every count kept on the device: block statistics,
two summed-area scans, then one ``hyperapp_ffbp_level`` launch per tree level, each sized for the
largest level possible (4^level windows, at most the number of minimum windows) and reading the live
count from device memory. The host reads back once at the end: the boxes and the per-level counts.
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.kernels import get_kernel


def block_stats_gpu(X, bs: int, ref):
    import cupy

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    R, C, B = X.shape
    nbr, nbc = -(-R // bs), -(-C // bs)
    total = nbr * nbc * B
    S1 = cupy.empty((nbr, nbc, B), cupy.float32)
    S2 = cupy.empty_like(S1)
    k = get_kernel("ffbp", "hyperapp_ffbp_block_stats", {"NB": B, "NF": 1, "NH": 1, "MEANSTD": 0, "SCALE": 0})
    threads = 256
    k(((total + threads - 1) // threads,), (threads,),
      (X, np.int32(R), np.int32(C), np.int32(B), np.int32(bs), np.int32(nbc), np.int64(total),
       cupy.ascontiguousarray(ref, dtype=cupy.float32), S1, S2))
    return S1, S2


def _pack(ann):
    import cupy

    return cupy.asarray(np.concatenate([np.asarray(ann.U_, np.float32).ravel(), np.asarray(ann.b_, np.float32),
                                        np.asarray(ann.w_, np.float32), np.asarray(ann.b0_, np.float32).ravel()]))


def search_gpu(model, stats):
    """Run the window-tree search on the GPU; returns (windows, ann1, ann2, windows per level)."""
    import cupy

    nbr, nbc = stats.nb
    B = int(model.n_bands_)
    nf = (2 * B if model.features == "meanstd" else B) + (1 if model.use_scale else 0)
    nh = int(model.n_hidden)
    k = get_kernel("ffbp", "hyperapp_ffbp_level", {"NB": B, "NF": nf, "NH": nh,
                                                   "MEANSTD": int(model.features == "meanstd"),
                                                   "SCALE": int(model.use_scale)})
    cache = model.__dict__.setdefault("_gpu_cache", {})
    if "nets" not in cache:
        cache["nets"] = (_pack(model.ann1_), _pack(model.ann2_), cupy.asarray(model.fmin_, cupy.float32),
                         cupy.asarray(model.fmax_, cupy.float32), cupy.asarray(model.t1_, cupy.float32))
    net1, net2, fmin, fmax, t1 = cache["nets"]
    n_leaves = nbr * nbc
    levels = int(math.ceil(math.log2(max(nbr, nbc)))) + 1 if max(nbr, nbc) > 1 else 1
    cap = max(4, n_leaves)  # no level holds more windows than there are minimum windows
    bufs = [cupy.zeros((cap, 4), cupy.int32), cupy.zeros((cap, 4), cupy.int32)]
    bufs[0][0] = cupy.asarray([0, 0, nbr, nbc], cupy.int32)
    counts = cupy.zeros(levels + 2, cupy.int32)  # live windows per level (counts[0] = 1)
    counts[0] = 1
    box_cap = n_leaves + 4 * levels
    boxes = cupy.empty((box_cap, 4), cupy.int32)
    s1 = cupy.empty(box_cap, cupy.float32)
    s2 = cupy.empty(box_cap, cupy.float32)
    n_boxes = cupy.zeros(1, cupy.int32)
    threads = 128
    for lev in range(levels + 1):
        most = min(4 ** lev, cap)
        k(((most + threads - 1) // threads,), (threads,),
          (stats.T1, stats.T2, stats.TN, np.int32(nbc + 1), stats.ref, bufs[lev % 2], counts[lev:lev + 1],
           net1, net2, fmin, fmax, t1, np.int32(model.max_class_), np.float32(model.t2_),
           bufs[(lev + 1) % 2], counts[lev + 1:lev + 2], np.int32(cap), boxes, s1, s2, n_boxes, np.int32(box_cap)))
    nb = int(n_boxes.get()[0])
    c = counts.get()
    evaluated = [int(v) for v in c if v > 0]
    return boxes[:nb].astype(cupy.int64), s1[:nb], s2[:nb], evaluated
