"""The issue-31 protocol on abu-airport-1: the truth targets' mean spectrum written to an ENVI .sli, read back,
and every detector that takes a target run from it alone (no clicks); AUC and Pd over all pixels.

    python scripts/library_auc.py [/work/shared/cubes/abu-airport-1.mat]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np


def main(path: str) -> int:
    import scipy.io as sio

    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.io.signatures import signature_kwargs
    from hyperapp.io.speclib import SpectralLibrary, write_library

    cube = open_cube(path)
    truth = sio.loadmat(path)["map"] > 0
    X = cube.to_float32()
    lib = Path(tempfile.mkdtemp()) / "aircraft.sli"
    write_library(SpectralLibrary(["aircraft (truth mean)"], X[truth].astype(np.float64).mean(0)[None]), lib)
    sig = signature_kwargs(cube, lib)  # read back, resampled (band for band: the scene has no wavelengths)
    print(f"{cube.path}: {int(truth.sum())} target pixels; library {lib.name}: {sig['signature_info']['target_notes']}")
    print("| detector | AUC | Pd@1e-3 | Pd@1e-2 | undesired |")
    print("|---|---|---|---|---|")
    for m in ("ace", "mf", "cem", "sam", "osp", "tcimf", "mtmf", "mttcimf", "rbfn"):
        seeds = range(5) if m == "rbfn" else [None]
        ev = []
        for s in seeds:
            r = run_detection(cube, m, truth=truth, device="cpu", image=X,
                              params=None if s is None else {"seed": s}, **sig)
            ev.append(r.report["evaluation"])
        mean = {k: float(np.mean([e[k] for e in ev])) for k in ("auc", "pd_at_far_1e-3", "pd_at_far_1e-2")}
        und = r.report["signatures"].get("undesired_source", "-")
        tag = f" (mean of seeds 0-4, min AUC {min(e['auc'] for e in ev):.4f})" if len(ev) > 1 else ""
        print(f"| {m}{tag} | {mean['auc']:.4f} | {mean['pd_at_far_1e-3']:.3f} | {mean['pd_at_far_1e-2']:.3f} | {und} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/cubes/abu-airport-1.mat"))
