"""Where a batch's time goes, per stage: a job of N synthetic cubes, each stage thread under cProfile.

    python scripts/profile_batch.py [N ROWS COLS BANDS] [--device gpu|cpu] [--method rbfn]

Prints the run's summary line (cubes/s, GB/s, each stage's median per cube) and, per stage (read,
compute, write), the functions that took the most time on that stage's thread.
"""

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from hyperapp.batch.jobfile import load_job
from hyperapp.batch.pipeline import CubePipeline
from hyperapp.batch.runner import run_job
from hyperapp.bench.whole_path import write_envi_raw

ap = argparse.ArgumentParser()
ap.add_argument("shape", nargs="*", type=int, default=[50, 512, 512, 128])
ap.add_argument("--device", default="auto")
ap.add_argument("--method", default="rbfn")
ap.add_argument("--top", type=int, default=15)
a = ap.parse_args()
n, rows, cols, bands = a.shape
profiles: dict[str, cProfile.Profile] = {}
loop = CubePipeline._loop


def profiled(self, fn, src, dst):
    pr = profiles.setdefault(fn.__name__.lstrip("_"), cProfile.Profile())
    pr.enable()
    try:
        loop(self, fn, src, dst)
    finally:
        pr.disable()


CubePipeline._loop = profiled
with tempfile.TemporaryDirectory(prefix="hyperapp-profile-") as tmp:
    d = Path(tmp)
    (d / "cubes").mkdir()
    rng = np.random.default_rng(1)
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    for i in range(n):
        ab = rng.dirichlet(np.ones(6), rows * cols).astype(np.float32)
        X = (ab @ ends).reshape(rows, cols, bands) + rng.normal(0, 0.01, (rows, cols, bands)).astype(np.float32)
        write_envi_raw(d / "cubes" / f"c{i:03d}", X, "bil")
    (d / "t.csv").write_text(f"row,col\n10,10\n{rows // 2},{cols // 2}\n")
    for name in ("warm", "job"):
        pattern = "cubes/c000.hdr" if name == "warm" else "cubes/*.hdr"
        (d / f"{name}.toml").write_text(f'[inputs]\npaths = ["{pattern}"]\n[[steps]]\ndetect = "{a.method}"\n'
                                        f'targets = "t.csv"\n[output]\nfolder = "out-{name}"\n')
    run_job(load_job(d / "warm.toml"), device=a.device)  # kernels and pools, as later cubes find them
    profiles.clear()
    t0 = time.perf_counter()
    run_job(load_job(d / "job.toml"), device=a.device)
    print(f"wall {time.perf_counter() - t0:.2f} s for {n} cubes")
for stage in ("read", "compute", "write"):
    if stage in profiles:
        s = io.StringIO()
        pstats.Stats(profiles[stage], stream=s).sort_stats("tottime").print_stats(a.top)
        print(f"==================== {stage} thread\n{s.getvalue()}")
