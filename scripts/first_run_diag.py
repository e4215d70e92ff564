"""Why a first fresh run after ``prepare-gpu`` is slower than its second: as the first-run bench case
does it (an empty kernel cache, ``prepare-gpu`` in a child, the parent holding a CUDA context), run
``detect`` three times in fresh processes with ``-X importtime``, and print each run's wall time, its
report's stage times and the slowest imports.

    python3 scripts/first_run_diag.py [METHOD ...]
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cupy

from hyperapp.io.samples import sample_path

(cupy.zeros(1) + 1).get()  # the parent holds a context, as the bench does
hdr = sample_path("land")
d = Path(tempfile.mkdtemp(prefix="hyperapp-diag-"))
env = {**os.environ, "CUPY_CACHE_DIR": str(d / "cache")}
t0 = time.perf_counter()
subprocess.run([sys.executable, "-m", "hyperapp", "--headless", "prepare-gpu"], env=env, check=True,
               capture_output=True, cwd=tempfile.gettempdir())
print(f"prepare-gpu {time.perf_counter() - t0:.1f} s")
for m in sys.argv[1:] or ["sam"]:
    for i in range(3):
        out = d / f"{m}-{i}"
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-X", "importtime", "-m", "hyperapp", "--headless", "detect", str(hdr),
                            "--method", m, "--targets", str(hdr.with_name("land_targets.csv")), "--device", "gpu",
                            "--out", str(out)], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
        w = time.perf_counter() - t0
        rep = json.loads((out / "report.json").read_text()) if r.returncode == 0 else {}
        secs = {k: round(v, 3) for k, v in rep.get("seconds", {}).items()}
        imports = []
        for line in r.stderr.splitlines():
            g = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s+(.*)", line)
            if g:
                imports.append((int(g.group(1)), g.group(2).strip()))
        top = sorted(imports, reverse=True)[:6]
        total_imports = max((us for us, _ in imports), default=0)
        print(f"{m} run {i}: {w:.2f} s wall; stages {secs}; slowest cumulative imports (ms) "
              f"{[(name, round(us / 1e3)) for us, name in top]} (largest {total_imports / 1e3:.0f} ms)")
        if r.returncode:
            print(r.stderr[-400:])
