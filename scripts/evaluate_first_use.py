"""``detect --truth`` on a 2 GB file in fresh processes: the seconds of the evaluation stage
(it paid 0.28-0.45 s on the GPU for an import on first use; the goal is <= 0.1 s).

    python scripts/evaluate_first_use.py [--device gpu] [--runs 3]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hyperapp.bench.whole_path import write_envi_raw

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="gpu")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--shape", type=int, nargs=3, default=[2048, 2048, 128])
a = ap.parse_args()
rows, cols, bands = a.shape
with tempfile.TemporaryDirectory(prefix="hyperapp-eval-") as tmp:
    d = Path(tmp)
    rng = np.random.default_rng(0)
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    X = np.empty((rows, cols, bands), np.float32)
    for r0 in range(0, rows, 256):
        r1 = min(rows, r0 + 256)
        X[r0:r1] = (rng.dirichlet(np.ones(6), (r1 - r0) * cols).astype(np.float32) @ ends).reshape(r1 - r0, cols, bands)
    truth = np.zeros((rows, cols), np.uint8)
    for r, c in rng.integers(20, min(rows, cols) - 20, (40, 2)):
        X[r:r + 3, c:c + 3] = ends[0] * 1.3
        truth[r:r + 3, c:c + 3] = 1
    hdr = write_envi_raw(d / "cube", X, "bil")
    del X
    truth.tofile(d / "truth.img")
    (d / "truth.hdr").write_text(f"ENVI\nsamples = {cols}\nlines = {rows}\nbands = 1\nheader offset = 0\n"
                                 "file type = ENVI Standard\ndata type = 1\ninterleave = bsq\nbyte order = 0\n")
    r0, c0 = np.argwhere(truth)[0]
    (d / "t.csv").write_text(f"row,col\n{r0},{c0}\n")
    for method in ("rbfn", "ace"):
        for i in range(a.runs):
            out = d / f"out-{method}-{i}"
            r = subprocess.run([sys.executable, "-m", "hyperapp", "--headless", "detect", str(hdr), "--method", method,
                                "--targets", str(d / "t.csv"), "--truth", str(d / "truth.hdr"), "--device", a.device,
                                "--out", str(out)], capture_output=True, text=True, cwd=tempfile.gettempdir())
            if r.returncode:
                sys.exit(r.stderr)
            sec = json.loads((out / "report.json").read_text())["seconds"]
            print(f"{method} run {i + 1}: evaluate {sec.get('evaluate', float('nan')):.3f} s, total {sec['total']:.3f} s")
