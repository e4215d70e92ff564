"""A batch job's timeline in a fresh process: when each cube's stages ran, when the reading and
formatting helpers started, when the interpreter was held long (a probe thread sleeping 1 ms wakes
late), and the garbage collector's passes: to find what one slow cube of a run waited for.

    python3 scripts/batch_timeline.py [--cubes 50] [--shape 512x512x128] [--dir DIR] [--warm]

Writes the cubes (as the bench's batch case does) into ``DIR`` unless they are there; ``--warm`` runs one
cube alone and five more before the job (as the bench does). Prints each cube's stages (start and length,
ms from the job's start), then every event in time order around the cubes that took more than twice the
median, with the stacks a sampler thread saw in any stage that ran longer than 60 ms (what it waited for:
a kernel's compilation, a library's start).
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--cubes", type=int, default=50)
ap.add_argument("--shape", default="512x512x128")
ap.add_argument("--dir", default="/tmp/hyperapp-timeline")
ap.add_argument("--warm", action="store_true")
ap.add_argument("--device", default="gpu")
args = ap.parse_args()

T0 = time.perf_counter()
events: list[tuple[float, float, str]] = []  # (start, seconds, what)


def now() -> float:
    return time.perf_counter() - T0


running: dict[int, tuple[float, str]] = {}  # thread id: (start, stage) of the stage it runs now


def wrap(owner, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*a, **k):
        t = now()
        running[threading.get_ident()] = (t, label)
        try:
            return fn(*a, **k)
        finally:
            running.pop(threading.get_ident(), None)
            what = label
            if a and hasattr(a[-1], "path"):
                what += f" {Path(a[-1].path).stem}"
            events.append((t, now() - t, f"{what} [{threading.current_thread().name}]"))

    setattr(owner, name, timed)


from hyperapp import format_process, pipeline, reader_process  # noqa: E402
from hyperapp.batch.jobfile import load_job  # noqa: E402
from hyperapp.batch.runner import run_job  # noqa: E402

for st in ("_read", "_compute", "_write"):
    wrap(pipeline.CubePipeline, st, st.lstrip("_"))
wrap(reader_process.ReaderProcess, "__init__", "reading helper start")
wrap(reader_process, "copies_to_gpu", "copies_to_gpu?")
wrap(format_process.FormatProcess, "__init__", "format helper start")
wrap(pipeline.CubePipeline, "__init__", "pipeline made")

gc_start: dict[int, float] = {}


def on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        gc_start[info["generation"]] = now()
    else:
        t = gc_start.pop(info["generation"], now())
        if now() - t > 0.002 or info["generation"] == 2:
            events.append((t, now() - t, f"gc gen{info['generation']} collected {info['collected']}"))


gc.callbacks.append(on_gc)
stop = threading.Event()


def probe() -> None:
    while not stop.is_set():
        t = now()
        time.sleep(0.001)
        late = now() - t - 0.001
        if late > 0.02:
            events.append((t, late, "probe woke late"))


stacks: dict[str, list] = {}  # a long stage's stack (its last frames): [count, first seen, stage]


def sampler() -> None:
    while not stop.is_set():
        time.sleep(0.01)
        frames = sys._current_frames()
        for ident, (t, label) in list(running.items()):
            if now() - t > 0.06 and ident in frames:
                tb = traceback.extract_stack(frames[ident])[-12:]
                key = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb))
                got = stacks.setdefault(key, [0, now(), label])
                got[0] += 1


rows, cols, bands = (int(v) for v in args.shape.split("x"))
d = Path(args.dir)
(d / "scenes").mkdir(parents=True, exist_ok=True)
if len(list((d / "scenes").glob("*.hdr"))) < args.cubes:
    from hyperapp.bench.campaign import settle_writes
    from hyperapp.bench.whole_path import write_envi_raw

    rng = np.random.default_rng(1)
    ends = rng.uniform(0.05, 0.6, (6, bands)).astype(np.float32)
    for i in range(args.cubes):
        ab = rng.dirichlet(np.ones(6), rows * cols).astype(np.float32)
        X = (ab @ ends).reshape(rows, cols, bands) + rng.normal(0, 0.01, (rows, cols, bands)).astype(np.float32)
        write_envi_raw(d / "scenes" / f"s{i:02d}", X, "bil")
    settle_writes()
(d / "t.csv").write_text(f"row,col\n10,10\n{rows // 2},{cols // 2}\n")
tag = f"out-{time.time_ns()}"
job_path = d / f"job-{tag}.toml"
job_path.write_text('[inputs]\npaths = ["scenes/*.hdr"]\n[[steps]]\ndetect = "rbfn"\n'
                    f'targets = "t.csv"\n[output]\nfolder = "{tag}"\n')
job = load_job(job_path)
job.inputs = job.inputs[:args.cubes]
if args.warm:
    from hyperapp.batch.runner import _save_models, _train_models
    from hyperapp.io.atomic import ensure_dir

    steps = _save_models(job, _train_models(job, args.device), ensure_dir(d / f"single-{tag}"))
    for c in job.inputs[:6]:
        pipeline.CubePipeline(steps, str(d / f"single-{tag}"), None, args.device, None).run_one(c)
threading.Thread(target=probe, daemon=True).start()
threading.Thread(target=sampler, daemon=True).start()
start = now()
events.append((start, 0.0, "job starts"))
rc = run_job(job, device=args.device)
end = now()
stop.set()
print(f"rc {rc}; job {end - start:.3f} s, {len(job.inputs) / (end - start):.1f} cubes/s")

per: dict[str, dict[str, tuple[float, float]]] = {}
for t, s, what in events:
    parts = what.split()
    if parts[0] in ("read", "compute", "write") and len(parts) > 1:
        per.setdefault(parts[1], {})[parts[0]] = (t, s)
spans = {c: max(t + s for t, s in st.values()) - min(t for t, _ in st.values()) for c, st in per.items()}
med = statistics.median(spans.values()) if spans else 0
for c in sorted(per):
    st = per[c]
    print(f"{c}: " + "  ".join(f"{k} {1e3 * (t - start):7.1f}+{1e3 * s:6.1f}" for k, (t, s) in sorted(st.items(), key=lambda kv: kv[1][0]))
          + ("   <-- slow" if spans[c] > 2 * med else ""))
slow = [c for c in per if spans[c] > 2 * med]
windows = [(min(t for t, _ in per[c].values()) - 0.05, max(t + s for t, s in per[c].values()) + 0.02) for c in slow]
print("events (ms from the job's start, length ms):")
for t, s, what in sorted(events):
    parts = what.split()
    stage = parts[0] in ("read", "compute", "write")
    if not stage or any(a <= t <= b for a, b in windows):
        print(f"  {1e3 * (t - start):8.1f} {1e3 * s:7.1f}  {what}")
print("stacks of stages running longer than 60 ms (samples every 10 ms; ms from the job's start):")
for key, (n, t, label) in sorted(stacks.items(), key=lambda kv: kv[1][1]):
    if t >= start:
        print(f"  {n:3d} x at {1e3 * (t - start):7.1f} in {label}: {key}")
