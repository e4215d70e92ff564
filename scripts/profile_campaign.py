"""Where a campaign's time goes on the GPU: the read stage alone (raw tiles, and onto the GPU), then the
whole job, each with the tiles read through ``preadv`` and through the memory map.

    python3 scripts/profile_campaign.py [--cubes N] [--dir DIR] [--methods rbfn,ace]

Writes ``N`` cubes of 2048 x 2048 x 128 float32 (as the campaign bench case does) into ``DIR`` (kept for
a second run), reads them in parallel for the page-cache rate, then for each reader: every cube's raw
tiles through one :class:`hyperapp.reading.tiles.TileReader` (host only), every cube onto the GPU
(:func:`hyperapp.detect.run.load_pixels`), and the job (:func:`hyperapp.batch.runner.run_job`) with its stage medians.
"""

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hyperapp.batch.jobfile import load_job
from hyperapp.batch.runner import pipeline, run_job
from hyperapp.bench.campaign import (
    _job,
    campaign_files,
    parallel_read_s,
    stage_medians,
)
from hyperapp.core.backend import get_backend
from hyperapp.core.progress import Progress
from hyperapp.detect.run import load_pixels
from hyperapp.io import open_cube
from hyperapp.reading import tiles as stream

ap = argparse.ArgumentParser()
ap.add_argument("--cubes", type=int, default=6)
ap.add_argument("--dir", default="/tmp/hyperapp-campaign-profile")
ap.add_argument("--methods", default="rbfn,ace")
ap.add_argument("--readers", default="pread,mmap", help="pread, mmap or both")
ap.add_argument("--tiles", default="16", help="the read stage's tile sizes (MB) to try, comma-separated")
ap.add_argument("--switch", default="0.0005", help="interpreter switch intervals (s) to try, comma-separated")
a = ap.parse_args()

d = Path(a.dir)
t0 = time.perf_counter()
hdrs, gb = campaign_files(d, a.cubes)
print(f"{a.cubes} cubes ready in {time.perf_counter() - t0:.1f} s")
imgs = [h.with_suffix(".img") for h in hdrs]
ref = parallel_read_s(imgs)
print(f"{len(imgs)} cubes, {gb:.1f} GB; parallel page-cache read {gb / ref:.1f} GB/s; copy threads {stream.COPY_THREADS}")
backend = get_backend("gpu")
prog = Progress()
load_pixels(open_cube(hdrs[0]), backend, prog)
backend.synchronize()

for mode in a.readers.split(","):
    layout = stream.TileReader._file_layout
    if mode == "mmap":
        stream.TileReader._file_layout = lambda self: None
    try:
        for pinned in (False, True):
            t0 = time.perf_counter()
            for h in hdrs:
                r = stream.TileReader(open_cube(h), pinned=pinned)
                for t in r:
                    r.release(t)
            w = time.perf_counter() - t0
            print(f"{mode}: raw tiles, {'pinned' if pinned else 'pageable'} ring: {gb / w:.1f} GB/s")

        def raw(h):
            r = stream.TileReader(open_cube(h), pinned=True)
            for t in r:
                r.release(t)

        def onto_gpu(h):
            X = load_pixels(open_cube(h), backend, prog)
            backend.synchronize()
            del X

        for what, fn in (("raw tiles, pinned ring", raw), ("onto the GPU", onto_gpu)):
            with ThreadPoolExecutor(2) as two:
                t0 = time.perf_counter()
                list(two.map(fn, hdrs))
                w = time.perf_counter() - t0
            print(f"{mode}: {what}, two cubes at once: {gb / w:.1f} GB/s")
        t0 = time.perf_counter()
        per = []
        for h in hdrs:
            t1 = time.perf_counter()
            X = load_pixels(open_cube(h), backend, prog)
            backend.synchronize()
            per.append(time.perf_counter() - t1)
            del X
        w = time.perf_counter() - t0
        print(f"{mode}: onto the GPU: {gb / w:.1f} GB/s, {statistics.median(per) * 1e3:.0f} ms a cube")
        for tile_mb, switch in ((float(t), float(sw)) for t in a.tiles.split(",") for sw in a.switch.split(",")):
            pipeline.READ_TILE_BYTES = int(tile_mb * (1 << 20))
            pipeline.SWITCH_INTERVAL = switch
            sys.setswitchinterval(switch)
            for method in a.methods.split(","):
                tag = f"{mode}-{tile_mb:g}-{switch:g}-{method}"
                warm = load_job(_job(d, f"warm-{tag}", method, "cubes/c0[01].hdr"))
                run_job(warm, device="gpu")
                job = load_job(_job(d, f"out-{tag}", method, "cubes/c*.hdr"))
                job.inputs = job.inputs[:a.cubes]
                t0 = time.perf_counter()
                run_job(job, device="gpu")
                w = time.perf_counter() - t0
                steps = [json.loads(p.read_text()).get("seconds", {})
                         for p in Path(job.output).glob("*/*/report.json")]
                inside = {k: round(statistics.median(s.get(k, 0.0) for s in steps) * 1e3, 1)
                          for k in steps[0]} if steps else {}
                print(f"{mode}: job {method}, tiles {tile_mb:g} MB, switch interval {switch:g} s: "
                      f"{gb / w:.1f} GB/s ({ref / w:.0%} of the page-cache rate), "
                      f"{w / len(hdrs) * 1e3:.0f} ms a cube; stage medians {stage_medians(Path(job.output))}; "
                      f"inside the compute stage (median ms) {inside}")
    finally:
        stream.TileReader._file_layout = layout
