"""Where a click's time goes on the GPU: cProfile of run_detection with the cube resident, per method.

    python3 scripts/profile_click.py [rows cols bands]
"""

import cProfile
import pstats
import sys

import cupy

from hyperapp.bench.live import scene
from hyperapp.cube import cube_from_array
from hyperapp.detect import run_detection

rows, cols, bands = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (1024, 1024, 64)
X, truth, clicks = scene(rows, cols, bands)
cube = cube_from_array(X, "profile")
Xd = cupy.asarray(X)
for method in ("rbfn", "ace", "sam"):
    for _ in range(2):
        r = run_detection(cube, method, clicks, device="gpu", truth=truth, image=Xd)
    print(method, {k: round(v * 1e3, 2) for k, v in r.report["seconds"].items()})
    pr = cProfile.Profile()
    pr.enable()
    run_detection(cube, method, clicks, device="gpu", truth=truth, image=Xd)
    cupy.cuda.get_current_stream().synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(12)
