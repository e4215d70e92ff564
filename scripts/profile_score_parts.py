"""Where the live click's score time goes: the RBFN's network, coherence and anomaly parts, ACE and RX.

    python3 scripts/profile_score_parts.py [--size ROWS COLS BANDS ...] [--clicks]

For each size: the median CUDA-event time of each part of the RBFN's scoring (the fused network
kernel, the coherence input, the anomaly input) and of ACE's and RX's scoring on a resident cube
(:func:`hyperapp.bench.live.scene`); with ``--clicks`` also each method's click to result (wall, median of
10) and its stage medians.
"""

import argparse
import json
import statistics

import cupy
import numpy as np

from hyperapp.bench import gpu_time_ms
from hyperapp.bench.live import _wall, scene
from hyperapp.cube import cube_from_array
from hyperapp.detect import run_detection

ap = argparse.ArgumentParser()
ap.add_argument("--size", nargs=3, type=int, action="append")
ap.add_argument("--clicks", action="store_true")
ap.add_argument("--json")
a = ap.parse_args()
sizes = a.size or [(1024, 1024, 64), (2048, 2048, 128)]


def profile(rows, cols, bands, clicks_too):
    X, truth, clicks = scene(rows, cols, bands)
    cube = cube_from_array(X, "profile")
    Xd = cupy.asarray(X)
    P = Xd.reshape(-1, bands)
    key = f"{rows}x{cols}x{bands}"
    res = {}
    models = {}
    for method in ("rbfn", "ace", "rx"):
        r = run_detection(cube, method, clicks, device="gpu", truth=truth, image=Xd)
        models[method] = r.model
        res[f"{method}_score_ms"] = round(gpu_time_ms(lambda m=r.model: m.decision_function(Xd), 10), 3)
        if clicks_too:
            seconds = []
            res[f"{method}_click_ms"] = round(_wall(lambda m=method, seconds=seconds: seconds.append(run_detection(
                cube, m, clicks, device="gpu", truth=truth, image=Xd).report["seconds"]), 10), 2)
            res[f"{method}_stages_ms"] = {k: round(statistics.median(s[k] for s in seconds) * 1e3, 2)
                                          for k in seconds[0]}
    m = models["rbfn"]
    from hyperapp.models.rbfn_gpu import score_fused

    res["rbfn_network_ms"] = round(gpu_time_ms(lambda: score_fused(m, P), 10), 3)
    res["rbfn_anomaly_v"] = float(getattr(m, "anomaly_v_", 0.0))
    res["rbfn_coherence_v"] = float(getattr(m, "coherence_v_", 0.0))
    buf = cupy.zeros(P.shape[0], cupy.float32)
    av, m.anomaly_v_ = getattr(m, "anomaly_v_", 0.0), 0.0
    res["rbfn_coherence_ms"] = round(gpu_time_ms(lambda: m._add_coherence(P, buf), 10), 3)
    if not av:  # the scene's clicks left the anomaly input out: time it with a stand-in whitening
        av = 0.5
        m.anomaly_mu_ = P[:4096].mean(axis=0)
        m.anomaly_w_ = cupy.asarray(np.triu(np.random.default_rng(0).normal(size=(bands, bands))), cupy.float32)
    m.anomaly_v_ = av
    if av:
        cv, m.coherence_v_ = m.coherence_v_, 0.0
        res["rbfn_anomaly_ms"] = round(gpu_time_ms(lambda: m._add_coherence(P, buf), 10), 3)
        m.coherence_v_ = cv
    res["floor_ms"] = round(X.nbytes / 4.8e12 * 1e3, 3)
    return key, res


out = {}
for rows, cols, bands in sizes:
    key, res = profile(rows, cols, bands, a.clicks)
    out[key] = res
    print(key, json.dumps(res), flush=True)
if a.json:
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
