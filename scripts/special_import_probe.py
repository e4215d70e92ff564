"""Which detectors' GPU runs import ``cupyx.scipy.special`` (an operator between a CuPy array and a scalar
does; 0.4-0.5 s of a fresh process): each method in a fresh process, with the line that first imported it.

    python3 scripts/special_import_probe.py [METHOD ...]
"""

import subprocess
import sys

PROBE = r"""
import sys, traceback
import numpy as np
import importlib.abc

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "cupyx.scipy.special":
            stack = [f for f in traceback.extract_stack() if "hyperapp" in f.filename]
            print("IMPORTED BY", " <- ".join(f"{f.filename.split('site-packages/')[-1]}:{f.lineno} {f.line}" for f in stack[-3:]))
            sys.meta_path.remove(self)
        return None

from hyperapp.detect.run import run_detection
from hyperapp.core.cube import cube_from_array
rng = np.random.default_rng(0)
X = rng.uniform(0.1, 0.9, (64, 64, 16)).astype(np.float32)
t = np.zeros((64, 64), bool); t[10:12, 10:12] = True
truth = np.zeros((64, 64), np.int8); truth[10:14, 10:14] = 1
cube = cube_from_array(X, "probe")
sys.meta_path.insert(0, Finder())
run_detection(cube, sys.argv[1], t, device="gpu", truth=truth)
print("special imported:", "cupyx.scipy.special" in sys.modules)
"""

if __name__ == "__main__":
    from hyperapp.models.registry import METHODS

    for m in sys.argv[1:] or list(METHODS):
        r = subprocess.run([sys.executable, "-c", PROBE, m], capture_output=True, text=True)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "IMPORTED BY" in ln or "special imported" in ln
                 or "Error" in ln]
        print(m, "|", " / ".join(lines))
