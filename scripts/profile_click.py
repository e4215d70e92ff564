"""Where a click's time goes on the GPU: run_detection with the cube resident, per method and size.

    python3 scripts/profile_click.py [--sizes 2048x2048x128 1024x1024x64] [--clicks 15] [--firsts 3]
                                     [--library] [--profile N] [METHOD ...]

The scene is the click-to-result bench's (:func:`hyperapp.bench.live.scene`). For each size and method:
two clicks to compile and warm, then the **first click on a new resident image** (a fresh copy of the
cube on the device, so nothing the clicks on an image share is known yet: its no-data test and
background sums, :mod:`hyperapp.detect.resident`), ``--firsts`` times on as many copies, then
``--clicks`` **following clicks** on one image. Each is the wall time of ``run_detection`` (the result
on the host when it returns); the stage medians come from the same clicks' reports (CUDA events). A
line first characterises the host: one small CuPy operation's time (launch overhead), which differs by
up to 40 % between hosts of one kind.

With ``OUT`` set, everything printed is also written to ``$OUT/click.json``. ``--profile N``: the
following clicks once more under cProfile, the N functions of most own time printed (with ``OUT``
set, each profile is also written whole to ``$OUT/profile-SIZE-METHOD.prof``). ``--library``:
the scene's mean target spectrum as the target instead of the clicks (the library-click bench case).
It needs only the installed package (``pip install hyperapp[gpu]``), no checkout on the path; the
default run (two sizes, six methods) takes under a minute on an H200, most of it making the scenes.
"""

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
from pathlib import Path

import cupy
import numpy as np

from hyperapp.bench.live import METHODS, launch_us, scene
from hyperapp.core.cube import cube_from_array
from hyperapp.detect.run import run_detection
from hyperapp.request import DetectRequest


def _size(text: str) -> tuple[int, int, int]:
    try:
        r, c, b = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is ROWSxCOLSxBANDS, got {text!r}") from None
    return r, c, b


def _sync():
    cupy.cuda.get_current_stream().synchronize()


def _timed(fn):
    """(wall ms, the run's result) of one click, the device idle before it."""
    _sync()
    t0 = time.perf_counter()
    r = fn()
    return (time.perf_counter() - t0) * 1e3, r


def _median_stages(reports: list[dict]) -> dict:
    keys = [k for k in reports[0]["seconds"] if k != "total"]
    return {k: round(statistics.median(r["seconds"].get(k, 0.0) for r in reports) * 1e3, 3) for k in keys}


def profile_size(size, methods, a) -> dict:
    t0 = time.perf_counter()
    X, truth, clicks = scene(*size)
    cube = cube_from_array(X, "profile")
    Xd = cupy.asarray(X)
    t = X[truth].astype(np.float64).mean(axis=0)[None]
    made = time.perf_counter() - t0
    name = "x".join(map(str, size))
    print(f"\n### {name} (scene made in {made:.1f} s)")
    out = {}
    for method in methods:
        def click(image, method=method):
            if a.library:
                return run_detection(cube, DetectRequest(method, device="gpu"), truth=truth, image=image,
                                     target_spectra=t)
            return run_detection(cube, DetectRequest(method, device="gpu"), clicks, truth=truth, image=image)

        for _ in range(2):  # compile and warm (on the image the following clicks use)
            click(Xd)
        firsts, first_reports = [], []
        for _ in range(a.firsts):
            fresh = Xd.copy()  # a new resident image: (often) the same memory, another object
            ms, r = _timed(lambda fresh=fresh: click(fresh))
            firsts.append(ms)
            first_reports.append(r.report)
            del fresh, r
        walls, reports = [], []
        for _ in range(a.clicks):
            ms, r = _timed(lambda: click(Xd))
            walls.append(ms)
            reports.append(r.report)
            del r  # dropped at once, as the window drops the last result
        rep = reports[-1]
        entry = {
            "first_click_ms": round(statistics.median(firsts), 3),
            "first_clicks_ms": [round(v, 3) for v in firsts],
            "first_click_stages_ms": _median_stages(first_reports),
            "first_click_background_sums": first_reports[-1].get("background_sums"),
            "click_ms": round(statistics.median(walls), 3),
            "clicks_ms": [round(v, 3) for v in walls],
            "stages_ms": _median_stages(reports),
            "background_sums": rep.get("background_sums"),
            "auc": rep.get("evaluation", {}).get("auc"),
            "threshold_rule": rep.get("threshold_rule"),
            "objects": rep.get("objects"),
        }
        out[method] = entry
        print(f"{method}{' (library)' if a.library else ''}: click {entry['click_ms']:.2f} ms (median of {a.clicks}, "
              f"min {min(walls):.2f}), first click on a new image {entry['first_click_ms']:.2f} ms "
              f"(sums {entry['first_click_background_sums']}); AUC {entry['auc']}")
        print(f"    stages (following clicks): {entry['stages_ms']}")
        print(f"    stages (first clicks):     {entry['first_click_stages_ms']}")
        if a.profile:
            pr = cProfile.Profile()
            for _ in range(a.clicks):
                _sync()
                pr.enable()
                click(Xd)
                pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(a.profile)
            if os.environ.get("OUT"):  # the whole profile, to sort another way where it is read
                pr.dump_stats(str(Path(os.environ["OUT"]) / f"profile-{'x'.join(map(str, size))}-{method}.prof"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("methods", nargs="*", default=list(METHODS))
    ap.add_argument("--sizes", nargs="+", type=_size, default=[(2048, 2048, 128), (1024, 1024, 64)])
    ap.add_argument("--size", nargs=3, type=int, help="one size, as ROWS COLS BANDS (instead of --sizes)")
    ap.add_argument("--clicks", type=int, default=15, help="following clicks per method (median)")
    ap.add_argument("--firsts", type=int, default=3, help="first clicks on new images per method (median)")
    ap.add_argument("--library", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    a = ap.parse_args()
    sizes = [tuple(a.size)] if a.size else a.sizes
    t0 = time.perf_counter()
    dev = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    result = {"device": dev["name"].decode() if isinstance(dev["name"], bytes) else str(dev["name"]),
              "launch_us": round(launch_us(), 2), "library": a.library, "clicks": a.clicks, "firsts": a.firsts,
              "sizes": {}}
    print(f"{result['device']}: one small CuPy operation {result['launch_us']:.1f} us")
    for size in sizes:
        result["sizes"]["x".join(map(str, size))] = profile_size(size, a.methods, a)
        cupy.get_default_memory_pool().free_all_blocks()  # the size's cube, freed with its function
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print("\n| size | method | click (median) | first click on a new image | its background sums | fit | score | "
          "threshold | objects | copy | evaluate |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, per in result["sizes"].items():
        for method, e in per.items():
            st = e["stages_ms"]
            sums = e["first_click_stages_ms"].get("background sums")
            print(f"| {name} | {method} | {e['click_ms']:.2f} ms | {e['first_click_ms']:.2f} ms | "
                  f"{'-' if sums is None else f'{sums:.2f}'} | "
                  + " | ".join(f"{st.get(k, 0):.2f}" for k in ("fit", "score", "threshold", "objects", "copy", "evaluate"))
                  + " |")
    print(f"\n{result['seconds']} s in all")
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / "click.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"written: {path}")


if __name__ == "__main__":
    main()
