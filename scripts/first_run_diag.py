"""Why a first fresh run is slower than its second: run ``detect`` twice in fresh processes with
``-X importtime`` off and the report's stage times, after a process that only starts CUDA.

    python3 scripts/first_run_diag.py METHOD [METHOD ...]
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hyperapp.samples import sample_path

hdr = sample_path("land")
d = Path(tempfile.mkdtemp(prefix="hyperapp-diag-"))
for i in range(2):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import cupy; (cupy.zeros(1) + 1).get()"], check=True)
    print(f"cuda start {i}: {time.perf_counter() - t0:.2f} s")
for m in sys.argv[1:]:
    for i in range(3):
        out = d / f"{m}-{i}"
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "hyperapp", "--headless", "detect", str(hdr), "--method", m,
                            "--targets", str(hdr.with_name("land_targets.csv")), "--device", "gpu", "--out", str(out)],
                           capture_output=True, text=True)
        w = time.perf_counter() - t0
        rep = json.loads((out / "report.json").read_text()) if r.returncode == 0 else {}
        secs = {k: round(v, 3) for k, v in rep.get("seconds", {}).items()}
        print(f"{m} run {i}: {w:.2f} s wall, stages {secs}", r.stderr.strip()[-300:])
