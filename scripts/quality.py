"""Detection quality over seeds of random clicks: mean AUC and Pd at FAR 1e-3 / 1e-2 per detector and scene.

The protocol of issue 12: ``--seeds`` runs, each with ``--clicks`` target pixels drawn at random (seeded)
from the truth; AUC and Pd over every other pixel (the clicks are left out). Scenes: the AVIRIS airport
scene in ``../shared/cubes`` (when present), the bundled land and sea scenes, and generated beach, urban and
vegetation scenes (``hyperapp.samples.make_background_scene``). ``--param NAME=VALUE`` sets RBFN options,
so a change to the default can be measured against it before it is made.

    python3 scripts/quality.py [--seeds 10] [--methods rbfn,ace,...] [--param n_hidden=8]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from hyperapp.cube import cube_from_array
from hyperapp.detect import run_detection
from hyperapp.samples import BACKGROUNDS, make_background_scene, make_land_scene, make_sea_scene

ROOT = Path(__file__).resolve().parents[1]
AIRPORT = ROOT.parent / "shared" / "cubes" / "abu-airport-1.mat"
METHODS = ("rbfn", "ace", "mf", "cem", "sam", "rx")


def scenes(names):
    out = {}
    for name in names:
        if name == "airport":
            if not AIRPORT.is_file():
                continue
            from scipy.io import loadmat

            m = loadmat(AIRPORT)
            out[name] = (np.ascontiguousarray(m["data"], np.float32), np.ascontiguousarray(m["map"]) > 0)
        elif name == "land":
            s = make_land_scene()
            out[name] = (s.cube.astype(np.float32), s.truth > 0)
        elif name == "sea":
            s = make_sea_scene()
            out[name] = (s.cube.astype(np.float32), s.truth > 0)
        else:
            s = make_background_scene(name)
            out[name] = (s.cube.astype(np.float32), s.truth > 0)
    return out


def clicks_for(truth, n, seed):
    rng = np.random.default_rng(seed)
    m = np.zeros(truth.shape, bool)
    m.reshape(-1)[rng.choice(np.flatnonzero(truth), n, replace=False)] = True
    return m


def evaluate(names, methods, seeds, n_clicks, params, far=1e-3):
    table = {}
    for name, (X, truth) in scenes(names).items():
        cube = cube_from_array(X, name)
        for method in methods:
            rows = []
            for seed in range(seeds):
                clicks = clicks_for(truth, n_clicks, seed)
                r = run_detection(cube, method, clicks, device="cpu", truth=truth, far=far,
                                  params=params if method == "rbfn" else None)
                e = r.report["evaluation"]
                keep = ~clicks
                mask = r.mask.astype(bool)
                t, b = truth & keep, ~truth
                rows.append((e["auc"], e["pd_at_far_1e-3"], e["pd_at_far_1e-2"],
                             float((mask & t).sum() / max(t.sum(), 1)), float((mask & b).sum() / max(b.sum(), 1))))
            a = np.array(rows)
            table[(name, method)] = a.mean(axis=0)
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", default="airport,land,sea," + ",".join(BACKGROUNDS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--clicks", type=int, default=5)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    params = {}
    for p in a.param:
        k, v = p.split("=", 1)
        params[k] = json.loads(v) if v[:1] in "0123456789-[{tf" and v not in ("pca", "cov", "std") else v
    t0 = time.perf_counter()
    names, methods = a.scenes.split(","), a.methods.split(",")
    table = evaluate(names, methods, a.seeds, a.clicks, params)
    print(f"{'scene':12s} {'method':6s} {'AUC':>7s} {'Pd@1e-3':>8s} {'Pd@1e-2':>8s} {'mask Pd':>8s} {'mask FAR':>9s}")
    for (name, method), v in table.items():
        print(f"{name:12s} {method:6s} {v[0]:8.5f} {v[1]:8.3f} {v[2]:8.3f} {v[3]:8.3f} {v[4]:9.2e}")
    print(f"({time.perf_counter() - t0:.0f} s; RBFN params {params or 'default'})", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps({f"{k[0]}/{k[1]}": list(map(float, v)) for k, v in table.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
