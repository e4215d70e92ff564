"""Line by line, where the batch compute stage's time goes on one campaign cube (2048 x 2048 x 128
float32, on the GPU): the stage's own calls (``run_detection`` with the job's clicks, then the object
table), for each method, with the per-stage seconds of the run's report beside them.

    python3 scripts/profile_compute.py [--dir DIR] [--methods rbfn,ace] [--runs 5] [--contend read16,h2d,...]

line_profiler times wall per line, so a line that waits for the GPU carries that wait.

``--contend`` instead times the stage (wall and this thread's CPU) beside what a batch's read stage does
to the machine meanwhile, each in a process of its own: ``readN`` (N threads copying the cube's file out
of the page cache, as the reading helper does), ``h2d`` (page-locked 256 MB copies to the GPU, back to
back), or ``readN+h2d``; or ``h2dtN``, N MB copies from a thread of this process (the same CUDA context,
as the read stage's are); or ``ringN``, N threads reading the file in 4 MB pieces and copying each to
the GPU (``ring_in_cache.py``, as the reading helper does); and alone. ``--lines-beside h2dtN`` or
``ringN`` takes the line profile beside those.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cupy
import numpy as np
from line_profiler import LineProfiler

from hyperapp.bench.campaign import CAMPAIGN_SHAPE, _write_campaign
from hyperapp.core.backend import get_backend, to_host_pinned
from hyperapp.core.progress import Progress
from hyperapp.detect.run import run as detect
from hyperapp.io import open_cube, read_labels
from hyperapp.models import evaluation, postprocess, rbfn, rbfn_gpu, stats

ap = argparse.ArgumentParser()
ap.add_argument("--dir", default="/tmp/hyperapp-compute-profile")
ap.add_argument("--methods", default="rbfn,ace")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--contend", default="")
ap.add_argument("--lines-beside", default="", help="h2dN: the line profile taken beside a thread of this process "
                "copying N MB tiles to the GPU back to back, as a batch's read stage does (same CUDA context)")
a = ap.parse_args()
d = Path(a.dir)
d.mkdir(parents=True, exist_ok=True)
hdrs = sorted(d.glob("c*.hdr")) or _write_campaign(d, 1, CAMPAIGN_SHAPE)
rows, cols, _ = CAMPAIGN_SHAPE
(d / "t.csv").write_text(f"row,col\n{rows // 3},{cols // 3}\n{rows // 2},{cols // 2}\n")
cube = open_cube(hdrs[0])
backend = get_backend("gpu")
X = detect.load_pixels(cube, backend, Progress())
cupy.cuda.get_current_stream().synchronize()
targets = read_labels(str(d / "t.csv"), (rows, cols))


def compute(method):
    res = detect.run_detection(cube, method, targets, None, device="gpu", image=X, progress=Progress())
    res.objects  # noqa: B018
    return res


READER = """
import sys, threading, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
def run():
    buf = memoryview(np.ones(64 << 20, np.uint8)).cast("B")
    with open(path, "rb", buffering=0) as fh:
        while True:
            fh.seek(0)
            while fh.readinto(buf):
                pass
for _ in range(n):
    threading.Thread(target=run, daemon=True).start()
threading.Event().wait()
"""
RING = """
import sys
sys.path.insert(0, sys.argv[1])
import ring_in_cache
while True:
    ring_in_cache.run([sys.argv[2]] * 4, int(sys.argv[3]), 4, 2, True)
"""
COPIER = """
import cupy, numpy as np, threading
h = cupy.cuda.alloc_pinned_memory(256 << 20)
a = np.frombuffer(h, np.uint8, 256 << 20)
d = cupy.empty(256 << 20, cupy.uint8)
s = cupy.cuda.Stream(non_blocking=True)
while True:
    d.set(a, stream=s)
    s.synchronize()
"""


class SameContextCopies:
    """A thread of this process copying ``mb`` MB page-locked tiles to the GPU back to back on a stream of its
    own: the read stage's copies as the compute stage meets them (the same context and copy engines)."""

    def __init__(self, mb: int):
        import threading

        self.mb, self.stop = mb, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        n = self.mb << 20
        h = cupy.cuda.alloc_pinned_memory(4 * n)
        src = np.frombuffer(h, np.uint8, 4 * n)
        d = cupy.empty(4 * n, cupy.uint8)
        s = cupy.cuda.Stream(non_blocking=True)
        k = 0
        while not self.stop.is_set():
            o = (k % 4) * n
            d[o:o + n].set(src[o:o + n], stream=s)
            k += 1
            if k % 4 == 0:
                s.synchronize()
        s.synchronize()

    def __enter__(self):
        self.thread.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def timed_runs(method):
    walls, cpus = [], []
    for _ in range(a.runs):
        t0, c0 = time.perf_counter(), time.thread_time()
        compute(method)
        cupy.cuda.get_current_stream().synchronize()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.thread_time() - c0)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


if a.contend:
    for method in a.methods.split(","):
        for _ in range(3):
            compute(method)
        for what in ["alone"] + a.contend.split(","):
            procs = []
            inside = None
            for part in what.split("+"):
                if part.startswith("h2dt"):
                    inside = SameContextCopies(int(part[4:] or 128)).__enter__()
                elif part.startswith("ring"):
                    procs.append(subprocess.Popen([sys.executable, "-c", RING, str(Path(__file__).parent),
                                                   str(hdrs[0].with_suffix(".img")), part[4:] or "12"]))
                elif part.startswith("read"):
                    procs.append(subprocess.Popen([sys.executable, "-c", READER, str(hdrs[0].with_suffix(".img")), part[4:] or "16"]))
                elif part == "h2d":
                    procs.append(subprocess.Popen([sys.executable, "-c", COPIER]))
            time.sleep(3 if procs else 0)
            w, c = timed_runs(method)
            if inside is not None:
                inside.__exit__()
            for p in procs:
                p.kill()
                p.wait()
            print(f"{method} beside {what}: {w:.1f} ms a cube, this thread's CPU {c:.1f} ms", flush=True)
    sys.exit(0)

funcs = [detect.run_detection, detect._fit, detect._score, detect.finish_detection, detect._load_labelled,
         detect._complete_result, detect.DetectionResult.objects.fget, postprocess.object_table,
         evaluation.far_threshold, postprocess.label_objects, to_host_pinned, stats.BackgroundStats.from_pixels,
         rbfn.RBFN.fit, rbfn.RBFN.fit_from_pixels, rbfn.RBFN.decision_function, rbfn_gpu.score_fused]
for method in a.methods.split(","):
    for _ in range(3):
        compute(method)
    walls, secs = [], []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        r = compute(method)
        cupy.cuda.get_current_stream().synchronize()
        walls.append(time.perf_counter() - t0)
        secs.append(r.report["seconds"])
    keys = secs[0].keys()
    print(f"\n######## {method}: {statistics.median(walls) * 1e3:.1f} ms a cube (median of {a.runs}); report seconds "
          f"(ms, median): {json.dumps({k: round(statistics.median(s.get(k, 0) for s in secs) * 1e3, 2) for k in keys})}")
    lp = LineProfiler(*funcs)
    beside = SameContextCopies(int(a.lines_beside[4:] or 128)) if a.lines_beside.startswith("h2dt") else None
    if beside is not None:
        beside.__enter__()
    ring = None
    if a.lines_beside.startswith("ring"):
        ring = subprocess.Popen([sys.executable, "-c", RING, str(Path(__file__).parent),
                                 str(hdrs[0].with_suffix(".img")), a.lines_beside[4:] or "12"])
        time.sleep(3)
    lp.enable_by_count()
    for _ in range(a.runs):
        compute(method)
        cupy.cuda.get_current_stream().synchronize()
    lp.disable_by_count()
    if beside is not None:
        beside.__exit__()
    if ring is not None:
        ring.kill()
        ring.wait()
    lp.print_stats(output_unit=1e-3, stripzeros=True)
