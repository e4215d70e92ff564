import os, time, sys, json
import cupy
from hyperapp.kernels import get_module
from hyperapp.models import ffbp_gpu as fg
res = {}
for B in (224,):
    for name, defs in [("rbfn", {"NB": B, "K": 16, "NH": 32, "DIAG": 0, "NORM": 1}),
                       ("rbfn-std", {"NB": B, "K": B, "NH": 4, "DIAG": 1, "NORM": 0}),
                       ("kmeans_small", {"D": 16}), ("kmeans_small224", {"D": B}),
                       ("ffbp", fg._stat_defines(B)),
                       ("ffbp-net", {"NB": B, "NF": 2*B+1, "NH": 8, "MEANSTD": 1, "SCALE": 1, "FFBP_TIMING": 0, "SCAN_CH": 16, "WPB": 8})]:
        t = time.perf_counter()
        try:
            get_module(name.split("-")[0].replace("kmeans_small224", "kmeans_small"), defs)
            res[name] = round(time.perf_counter() - t, 2)
        except Exception as e:
            res[name] = str(e)[:200]
print("compile seconds", json.dumps(res))
