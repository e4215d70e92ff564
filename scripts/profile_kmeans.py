"""Where the multi-k k-means fit spends its time on the GPU (seeding, Lloyd, choosing k), by stage.

Run on the GPU machine: ``python3 scripts/profile_kmeans.py``.
"""

import time

import cupy

import hyperapp.models.kmeans as K
from hyperapp.bench.cases import _spectra

stages: dict[str, float] = {}


def timed(name, fn):
    def wrap(*a, **kw):
        cupy.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        out = fn(*a, **kw)
        cupy.cuda.get_current_stream().synchronize()
        stages[name] = stages.get(name, 0.0) + (time.perf_counter() - t0) * 1e3
        return out
    return wrap


for name in ("kmeans_pp", "lloyd_segments", "silhouette", "davies_bouldin"):
    setattr(K, name, timed(name, getattr(K, name)))

X, _ = _spectra(262144, 128)
Xd = cupy.asarray(X)
K.MultiKMeans(k="2..16").fit(Xd)
for n_init in (1, 4):
    stages.clear()
    cupy.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    m = K.MultiKMeans(k="2..16", n_init=n_init).fit(Xd)
    total = (time.perf_counter() - t0) * 1e3
    print(f"n_init={n_init}: total {total:.1f} ms, iterations {m.n_iter_}; "
          + ", ".join(f"{k} {v:.1f} ms" for k, v in stages.items()), flush=True)
