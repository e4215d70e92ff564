"""Times issue 51's model functions on one device: mask filtering (clump + sieve), SID scores and continuum
removal (the kernel and the vectorised march). Prints one JSON object; the figures go to docs/performance.md.

    python scripts/time_filter_continuum.py [cpu|gpu] [OUT.json]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "gpu"
    from hyperapp.models import classic
    from hyperapp.models.continuum import _continuum
    from hyperapp.models.postprocess import filter_mask

    if device == "gpu":
        import cupy as xp

        def sync():
            xp.cuda.Device().synchronize()
    else:
        xp = np

        def sync():
            pass

    big = device == "gpu"

    def best(fn, reps=5):
        fn()
        sync()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t)
        return round(min(times) * 1e3, 2)

    rng = np.random.default_rng(0)
    side = 4096 if big else 1024
    m = xp.asarray(rng.random((side, side)) < 0.02)
    out = {"device": device, "mask": f"{side}x{side}, 2% random pixels"}
    for clump, sieve, conn in ((0, (5, 500), 8), (5, None, 8), (5, (5, 500), 8), (5, (5, 500), 4), (15, (5, None), 8)):
        out[f"filter clump={clump} sieve={sieve} conn={conn} ms"] = best(
            lambda c=clump, s=sieve, k=conn: filter_mask(m, clump=c, sieve=s, connectivity=k))
    n, B = (1 << 20, 224) if big else (1 << 14, 224)
    t = np.linspace(0, 1, B)
    base = 0.2 + 0.5 * np.sqrt(t) - 0.2 * t ** 2
    P = (base * rng.uniform(0.5, 2, (n, 1)) + rng.normal(0, 0.003, (n, B))).astype(np.float32)
    X = xp.asarray(P)
    wl = np.linspace(400, 2500, B)
    out["spectra"] = f"{n} x {B} float32"
    y = -np.ones(n, np.int8)
    y[:5] = 1
    sid = classic.SID().fit(X, xp.asarray(y))
    out["sid ms"] = best(lambda: sid.decision_function(X))
    sam = classic.SAM().fit(X, xp.asarray(y))
    out["sam ms (for comparison)"] = best(lambda: sam.decision_function(X))
    if big:
        out["continuum kernel ms"] = best(lambda: _continuum(X, wl, kernel=True))
    out["continuum vectorised ms"] = best(lambda: _continuum(X, wl, kernel=False), reps=2)
    text = json.dumps(out, indent=1)
    print(text)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
