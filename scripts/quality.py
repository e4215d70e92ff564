"""Detection quality over seeds of random clicks: mean AUC and Pd at FAR 1e-3 / 1e-2 per detector and scene.

The protocol: ``--seeds`` runs, each with ``--clicks`` target pixels drawn at random (seeded)
from the truth; AUC and Pd over every other pixel (the clicks are left out). Scenes: the AVIRIS airport
scene in ``../shared/cubes`` (when present), the bundled land and sea scenes, and generated beach, urban and
vegetation scenes (``hyperapp.io.samples.make_background_scene``), and scenes made by implanting real
target spectra into the airport scene's real background (``implant:KIND``, :mod:`hyperapp.bench.implanted`).
``--param NAME=VALUE`` sets RBFN options, so a change to the default can be measured against it before it
is made. Each row gives the mean over seeds and the worst seed's AUC; for the window detector (``ffbp``,
trained from the same clicks, refined by the RBFN as ``hyperapp --headless detect`` runs it) also its
boxes' object recall (truth components a box touches; in brackets, of the components the RBFN's default
mask finds) and its false boxes (boxes touching no target).

    python3 scripts/quality.py [--seeds 10] [--methods rbfn,ace,...] [--param n_hidden=8]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from hyperapp.bench.implanted import KINDS, implanted_scene
from hyperapp.core.cube import cube_from_array
from hyperapp.detect.run import run_detection
from hyperapp.io.samples import BACKGROUNDS, make_background_scene, make_land_scene, make_sea_scene
from hyperapp.request import DetectRequest

ROOT = Path(__file__).resolve().parents[1]
AIRPORT = ROOT.parent / "shared" / "cubes" / "abu-airport-1.mat"
METHODS = ("rbfn", "ace", "mf", "cem", "sam", "rx")


def airport():
    from scipy.io import loadmat

    m = loadmat(AIRPORT)
    return np.ascontiguousarray(m["data"], np.float32), np.ascontiguousarray(m["map"]) > 0


def scenes(names):
    out = {}
    for name in names:
        if name == "airport" or name.startswith("implant:"):
            if not AIRPORT.is_file():
                continue
            X, truth = airport()
            if name != "airport":
                s = implanted_scene(X, truth, name.split(":", 1)[1])
                X, truth = s.cube, s.truth > 0
            out[name] = (X, truth)
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


def object_recall(boxes, truth, found=None):
    """(fraction of the truth's 8-connected components a box touches, the same over the components
    ``found`` touches (None: nan), boxes touching no target pixel)."""
    from scipy import ndimage

    lab, n = ndimage.label(truth, np.ones((3, 3), bool))
    inbox = np.zeros(truth.shape, bool)
    false = 0
    for b in boxes:
        win = (slice(b["row"], b["row"] + b["height"]), slice(b["col"], b["col"] + b["width"]))
        inbox[win] = True
        false += not truth[win].any()
    hit = np.zeros(n + 1, bool)
    hit[np.unique(lab[inbox])] = True
    recall = float(hit[1:].mean()) if n else 1.0
    if found is None:
        return recall, float("nan"), false
    f = np.zeros(n + 1, bool)
    f[np.unique(lab[found & truth])] = True
    f[0] = False
    return recall, float(hit[f].mean()) if f.any() else 1.0, false


def evaluate(names, methods, seeds, n_clicks, params, far=1e-3):
    """{(scene, method): (mean row, worst seed's AUC)}; rows: AUC, Pd at 1e-3 and 1e-2, the default
    mask's Pd and false-alarm rate, and for ffbp object recall, recall of the RBFN mask's objects and
    false boxes."""
    table = {}
    for name, (X, truth) in scenes(names).items():
        cube = cube_from_array(X, name)
        rbfn_masks = {}
        for method in methods:
            rows = []
            for seed in range(seeds):
                clicks = clicks_for(truth, n_clicks, seed)
                r = run_detection(cube, DetectRequest(method, device="cpu", far=far, params=params if method == "rbfn" else None), clicks, truth=truth)
                e = r.report["evaluation"]
                keep = ~clicks
                mask = r.mask.astype(bool)
                if method == "rbfn":
                    rbfn_masks[seed] = mask
                t, b = truth & keep, ~truth
                row = [e["auc"], e["pd_at_far_1e-3"], e["pd_at_far_1e-2"],
                       float((mask & t).sum() / max(t.sum(), 1)), float((mask & b).sum() / max(b.sum(), 1))]
                if method == "ffbp":
                    row += object_recall(r.boxes, truth & keep, rbfn_masks.get(seed))
                rows.append(row)
            a = np.array(rows)
            table[(name, method)] = (np.nanmean(a, axis=0), float(a[:, 0].min()))
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", default=",".join(["airport", *(f"implant:{k}" for k in KINDS), "land", "sea",
                                                   *BACKGROUNDS]))
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
    print(f"{'scene':22s} {'method':6s} {'AUC':>8s} {'worst':>8s} {'Pd@1e-3':>8s} {'Pd@1e-2':>8s} {'mask Pd':>8s} "
          f"{'mask FAR':>9s}")
    for (name, method), (v, worst) in table.items():
        line = (f"{name:22s} {method:6s} {v[0]:8.5f} {worst:8.5f} {v[1]:8.3f} {v[2]:8.3f} {v[3]:8.3f} {v[4]:9.2e}")
        if len(v) > 5:
            line += f"  objects {v[5]:.3f} ({v[6]:.3f} of the RBFN's) false boxes {v[7]:.1f}"
        print(line)
    print(f"({time.perf_counter() - t0:.0f} s; RBFN params {params or 'default'})", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps({f"{k[0]}/{k[1]}": [*map(float, v), w] for k, (v, w) in table.items()},
                                           indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
