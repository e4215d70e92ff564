"""Where a campaign's per-cube time goes, stage by stage, in one process on the GPU.

    python3 scripts/profile_stages.py [--cubes N] [--dir DIR] [--methods rbfn,ace] [--modes helper,local]
                                      [--repeats 2] [--cprofile]

Writes ``N`` campaign cubes (2048 x 2048 x 128 float32, as the bench case does) into ``DIR`` unless they
are there, then runs the job (one detect step per method) ``--repeats`` times per reading mode
(``helper``: the read stage reads through the reading helper process; ``local``: its own copy threads)
and prints, per run:

- GB/s and the share of the parallel page-cache read rate (the bench's reference);
- each stage's median wall and thread CPU seconds per cube (CPU time in a stage's own thread: Python,
  and system calls made there; CUDA waits that spin count too);
- the process's CPU seconds per cube (every thread, the kernel's share included);
- how late a probe thread that sleeps 1 ms wakes, on average: the time it waits for the interpreter
  lock, a direct measure of the lock's contention.

``--cprofile compute,write`` also profiles those stages' threads (cProfile across the cubes; one run per
stage, as Python 3.12 lets one profiler run at a time) per method, and prints the top functions by own
time.
"""

import argparse
import cProfile
import importlib
import io
import os
import pstats
import statistics
import sys
import threading
import time
from pathlib import Path

from hyperapp.batch import pipeline
from hyperapp.batch.jobfile import load_job
from hyperapp.batch.runner import run_job
from hyperapp.bench.campaign import CAMPAIGN_SHAPE, _job, campaign_files, parallel_read_s
from hyperapp.detect import outputs as detect
from hyperapp.reading import tiles as stream

ap = argparse.ArgumentParser()
ap.add_argument("--cubes", type=int, default=8)
ap.add_argument("--dir", default="/tmp/hyperapp-stage-profile")
ap.add_argument("--methods", default="rbfn,ace")
ap.add_argument("--modes", default="helper,local")
ap.add_argument("--repeats", type=int, default=2)
ap.add_argument("--vary", default="", help="an environment variable's values to alternate between runs, as "
                "NAME=a,b (HYPERAPP_CUDA_WAITS=spin,block; HYPERAPP_READ_PROCESS is --modes)")
ap.add_argument("--layouts", default="", help="the read stage's tiles to alternate, as MBxRING (256x4,128x8)")
ap.add_argument("--attrs", default="", help="a module attribute's values to alternate between runs, as "
                "module.NAME=a,b (whole numbers; for example stream.COPY_PIECE_BYTES=16777216,0)")
ap.add_argument("--sched", default="", help="how the host's scheduler treats the reading helper against this "
                "process, alternated between runs: none, niceN (the helper's threads at nice N), split (the "
                "helper's threads on the first cores less HELPER_SPARE_CORES, this process's on the rest), "
                "split-niceN")
ap.add_argument("--writes", default="on", help="comma-separated: on; off (the write stage a no-op: what the "
                "writes cost the other stages); nodata (no score or mask files); nocsv (the object table not "
                "formatted)")
ap.add_argument("--cprofile", default="", help="stages to profile (read,compute,write), one run each")
ap.add_argument("--device", default="gpu")
ap.add_argument("--label", default="", help="prefix of the runs' output folders (a second version's runs start afresh)")
ap.add_argument("--shape", default="x".join(map(str, CAMPAIGN_SHAPE)), help="rows x cols x bands of each cube")
a = ap.parse_args()

d = Path(a.dir)
hdrs, gb = campaign_files(d, a.cubes, tuple(int(v) for v in a.shape.split("x")))
imgs = [h.with_suffix(".img") for h in hdrs]
ref = parallel_read_s(imgs)
print(f"{len(imgs)} cubes, {gb:.1f} GB, {os.cpu_count()} cores; parallel page-cache read {gb / ref:.1f} GB/s; "
      f"copy threads {stream.COPY_THREADS}", flush=True)

CPU: dict[str, list[float]] = {}
PROFILES: dict[str, cProfile.Profile] | None = None
PROFILED = ""
timed = pipeline.CubePipeline._timed


def _timed(self, fn, item):
    """The pipeline's stage timer, with the stage thread's CPU seconds (and its profile) beside it."""
    name = fn.__name__.lstrip("_")
    c0 = time.thread_time()
    prof = PROFILES.setdefault(name, cProfile.Profile()) if PROFILES is not None and name == PROFILED else None
    if prof is not None:
        prof.enable()
    try:
        timed(self, fn, item)
    finally:
        if prof is not None:
            prof.disable()
        CPU.setdefault(name, []).append(time.thread_time() - c0)


pipeline.CubePipeline._timed = _timed
WRITE = pipeline.CubePipeline._write


def _write(self, item):
    """The write stage as a no-op (``--writes off``): the outputs are dropped."""
    item.results = []


_write.__name__ = "_write"
ITEM, CSV = detect.write_detection_item, detect.objects_csv


def _item(result, kind, path, cube, *args, **kwargs):
    """``--writes nodata``: the score and mask images are not written."""
    return Path(path) if kind in ("scores", "mask") else ITEM(result, kind, path, cube, *args, **kwargs)


def writes_as(how: str) -> None:
    pipeline.CubePipeline._write = _write if how == "off" else WRITE
    detect.write_detection_item = _item if how == "nodata" else ITEM
    detect.objects_csv = (lambda table: "") if how == "nocsv" else CSV


class Probe:
    """A thread that sleeps 1 ms at a time and records how late it wakes (waiting for the GIL)."""

    def __enter__(self):
        self.late: list[float] = []
        self.stop = threading.Event()

        def run():
            while not self.stop.is_set():
                t0 = time.perf_counter()
                time.sleep(0.001)
                self.late.append(time.perf_counter() - t0 - 0.001)

        self.t = threading.Thread(target=run, daemon=True)
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()


ALL_CPUS = sorted(os.sched_getaffinity(0))


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def apply_sched(how: str) -> None:
    """Set the helpers' threads' nice value and both sides' cores (``--sched``) for the next run; the
    helpers live across runs, started by the warm-up run just before."""
    from hyperapp.reading import reader_process
    helpers = [h._proc.pid for h in reader_process._HELPERS if h._proc is not None]
    nice = int(how.split("nice")[1]) if "nice" in how else 0
    n_help = max(2, len(ALL_CPUS) - stream.HELPER_SPARE_CORES)
    split = how.startswith("split")
    for pid in helpers:
        for tid in _tasks(pid):
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                os.sched_setaffinity(tid, ALL_CPUS[:n_help] if split else ALL_CPUS)
            except OSError:
                pass
    for tid in _tasks(os.getpid()):
        try:
            os.sched_setaffinity(tid, ALL_CPUS[n_help:] if split else ALL_CPUS)
        except OSError:
            pass


def one_run(method: str, mode: str, tag: str, value: str = "", sched: str = "") -> None:
    os.environ["HYPERAPP_READ_PROCESS"] = "1" if mode == "helper" else "0"
    if value:
        os.environ[a.vary.split("=")[0]] = value
        tag = f"{tag}-{value}"
    tag = a.label + tag + (f"-{sched}" if sched else "")
    warm = load_job(_job(d, f"warm-{tag}", method, "cubes/c0[0-3].hdr"))
    run_job(warm, device=a.device)
    CPU.clear()
    apply_sched("none")  # the reference reads with every core
    job = load_job(_job(d, f"out-{tag}", method, "cubes/c*.hdr"))
    job.inputs = job.inputs[:a.cubes]
    ref_now = parallel_read_s(imgs, repeats=1)  # the reference just before this run: it moves between runs
    if sched:
        apply_sched(sched)
    t = os.times()
    with Probe() as probe:
        t0 = time.perf_counter()
        run_job(job, device=a.device)
        w = time.perf_counter() - t0
    t1 = os.times()
    proc_cpu = (t1.user + t1.system - t.user - t.system) / len(hdrs)
    import json

    man = json.loads((Path(job.output) / "manifest.json").read_text())["cubes"].values()
    st = [c["stages"] for c in man if c.get("status") == "done"]
    walls = {k: round(statistics.median(s[k] for s in st) * 1e3) for k in ("read", "compute", "write", "wait")}
    reps = [json.loads(p.read_text())["seconds"] for p in Path(job.output).glob("*/*/report.json")]
    inside = {k: round(statistics.median(r.get(k, 0.0) for r in reps) * 1e3, 1) for k in reps[0]} if reps else {}
    cpus = {k: round(statistics.median(v) * 1e3) for k, v in CPU.items()}
    print(f"{tag}: {gb / w:.1f} GB/s ({ref / w:.0%} of page cache; {ref_now / w:.0%} of the {gb / ref_now:.1f} GB/s "
          f"just before), {w / len(hdrs) * 1e3:.0f} ms a cube; "
          f"stage wall ms {walls}; stage thread CPU ms {cpus}; process CPU {proc_cpu * 1e3:.0f} ms a cube; "
          f"probe late {statistics.mean(probe.late) * 1e3:.2f} ms mean, "
          f"{statistics.quantiles(probe.late, n=10)[-1] * 1e3:.2f} ms p90; compute's report seconds (ms, median) "
          f"{inside}", flush=True)


sys.setswitchinterval(pipeline.SWITCH_INTERVAL)
for method in a.methods.split(","):
    for r in range(a.repeats):
        for mode in a.modes.split(","):
            for value in (a.vary.split("=", 1)[1].split(",") if a.vary else [""]):
                for lay in (a.layouts.split(",") if a.layouts else [""]):
                    if lay:
                        mb, ring = (int(v) for v in lay.split("x"))
                        pipeline.READ_TILE_BYTES, pipeline.READ_RING = mb << 20, ring
                    for attr in (a.attrs.split("=", 1)[1].split(",") if a.attrs else [""]):
                        if attr:
                            mod, name = a.attrs.split("=", 1)[0].rsplit(".", 1)
                            setattr(importlib.import_module(f"hyperapp.{mod}"), name, int(attr))
                        for sched in (a.sched.split(",") if a.sched else [""]):
                            for writes in a.writes.split(","):
                                writes_as(writes)
                                one_run(method, mode, f"{method}-{mode}-{r}" + (f"-{lay}" if lay else "")
                                        + (f"-{attr}" if attr else "") + ("" if writes == "on" else f"-{writes}"),
                                        value, sched)
    for stage in filter(None, a.cprofile.split(",")):
        PROFILES, PROFILED = {}, stage
        one_run(method, a.modes.split(",")[0], f"{method}-cprofile-{stage}")
        for name, prof in PROFILES.items():
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
            print(f"--- {method}: {name} stage, by own time (cProfile, {len(hdrs)} cubes)")
            print("\n".join(s.getvalue().splitlines()[6:32]))
        PROFILES = None
