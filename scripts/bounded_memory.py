"""Peak memory on a file larger than the memory budget: a 7.5 GB uint16 BIL cube (4096 x 4096 x
224, 15 GB as float32), written a block of rows at a time into ``$TMPDIR/hyperapp-7gb`` (kept for reruns);
``hyperapp --headless detect`` with default settings on the CPU for each method named (default: SAM, ACE,
RBFN), printing wall time and the process's peak resident memory (``/usr/bin/time -v``).

    python3 scripts/bounded_memory.py [sam ace rbfn]
"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

d = Path(tempfile.gettempdir()) / "hyperapp-7gb"
d.mkdir(exist_ok=True)
rows, cols, bands = 4096, 4096, 224
img = d / "c.img"
if not img.exists() or img.stat().st_size != rows * cols * bands * 2:
    rng = np.random.default_rng(0)
    ends = rng.uniform(500, 6000, (6, bands)).astype(np.float32)
    with open(img, "wb") as fh:
        for _ in range(0, rows, 128):
            ab = rng.dirichlet(np.ones(6), 128 * cols).astype(np.float32)
            block = (ab @ ends).reshape(128, cols, bands).astype(np.uint16)
            np.ascontiguousarray(block.transpose(0, 2, 1)).tofile(fh)
    (d / "c.hdr").write_text(f"ENVI\nsamples = {cols}\nlines = {rows}\nbands = {bands}\nheader offset = 0\n"
                             "file type = ENVI Standard\ndata type = 12\ninterleave = bil\nbyte order = 0\n")
(d / "t.csv").write_text("row,col\n100,100\n2000,3000\n4000,50\n")
print("file GB", img.stat().st_size / 1e9, flush=True)
for m in sys.argv[1:] or ["sam", "ace", "rbfn"]:
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "hyperapp", "--headless", "detect", str(d / "c.hdr"),
                        "--method", m, "--targets", str(d / "t.csv"), "--device", "cpu", "--out", str(d / f"out-{m}")],
                       capture_output=True, text=True)
    rss = [line for line in r.stderr.splitlines() if "Maximum resident" in line]
    print(m, f"wall {time.perf_counter() - t:.1f} s", r.stdout.strip().splitlines()[:1], rss, r.returncode,
          r.stderr.strip().splitlines()[-1] if r.returncode else "", flush=True)
