"""Where a click's time goes on the GPU: cProfile of run_detection with the cube resident, per method.

    python3 scripts/profile_click.py [--size ROWS COLS BANDS] [--library] [--top N] [METHOD ...]

``--library`` takes the mean spectrum of the scene's targets as the target (no clicks), as the
library-click bench case does. Each method is run twice to warm, then ten times under cProfile; the
stage medians of those ten and the functions by own time and by cumulative time are printed. A line
first characterises the host: the time of one small CuPy operation (launch overhead), which differs by
up to 40 % between H100 hosts.
"""

import argparse
import cProfile
import pstats
import statistics
import time

import cupy
import numpy as np

from hyperapp.bench.live import _wall, scene
from hyperapp.core.cube import cube_from_array
from hyperapp.detect.run import run_detection
from hyperapp.request import DetectRequest

ap = argparse.ArgumentParser()
ap.add_argument("methods", nargs="*", default=["rbfn", "ace", "sam"])
ap.add_argument("--size", nargs=3, type=int, default=(1024, 1024, 64))
ap.add_argument("--library", action="store_true")
ap.add_argument("--top", type=int, default=25)
ap.add_argument("--unsynced", action="store_true",
                help="also time the clicks with the stage timer's synchronisations off (what overlap would gain)")
a = ap.parse_args()

X, truth, clicks = scene(*a.size)
cube = cube_from_array(X, "profile")
Xd = cupy.asarray(X)
t = X[truth].astype(np.float64).mean(axis=0)[None]
small = cupy.ones(16, cupy.float32)
for _ in range(200):
    small += 1
cupy.cuda.get_current_stream().synchronize()
t0 = time.perf_counter()
for _ in range(2000):
    small += 1
cupy.cuda.get_current_stream().synchronize()
print(f"host: one small CuPy operation {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us")



for method in a.methods:
    def click(method=method):
        if a.library:
            return run_detection(cube, DetectRequest(method, device="gpu"), truth=truth, image=Xd, target_spectra=t)
        return run_detection(cube, DetectRequest(method, device="gpu"), clicks, truth=truth, image=Xd)

    for _ in range(2):
        click()
    line = f"{method}{' (library)' if a.library else ''}: {_wall(click, 20):.2f} ms median of 20"
    if a.unsynced:
        from hyperapp.core.backend import Backend

        sync = Backend.synchronize
        Backend.synchronize = lambda self: None
        try:
            line += f"; stage timer unsynchronised {_wall(click, 20):.2f} ms"
        finally:
            Backend.synchronize = sync
    print(line)
    walls, stages = [], []
    pr = cProfile.Profile()
    for _ in range(10):
        cupy.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        pr.enable()
        r = click()
        pr.disable()
        walls.append((time.perf_counter() - t0) * 1e3)
        stages.append(r.report["seconds"])
    med = {k: round(statistics.median(s[k] for s in stages) * 1e3, 2) for k in stages[0]}
    print(f"\n=== {method}{' (library)' if a.library else ''}: {statistics.median(walls):.1f} ms under cProfile; "
          f"stages {med}")
    pstats.Stats(pr).sort_stats("tottime").print_stats(a.top)
    pstats.Stats(pr).sort_stats("cumtime").print_stats(a.top)
