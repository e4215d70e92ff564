"""Two Dask workers (one per GPU) on the campaign against one, with an environment variable varied in
both (the workers inherit it): the reading helper's threads (``HYPERAPP_READ_THREADS``; each worker of a
two-worker cluster on a 32-core host reads with 12 by default, its 16 cores less the four its stages
keep, one worker alone with 16) or its pieces (``HYPERAPP_GPU_PIECE_KB``).

    python3 scripts/two_worker_threads.py [--env HYPERAPP_READ_THREADS=default,14,16] [--dir DIR]
                                          [--cubes 16] [--repeats 1] [--one-each]

Prints, per value, the two workers' GB/s against one worker's (with the default, or with the same value
under ``--one-each``) and each run's median stage times.
"""

import argparse
import os
from pathlib import Path

from hyperapp.bench import whole_path as F
from hyperapp.bench.campaign import CAMPAIGN_SHAPE, _job, campaign_files, stage_medians


def setenv(name: str, v: str) -> None:
    if v == "default":
        os.environ.pop(name, None)
    else:
        os.environ[name] = v


if __name__ == "__main__":  # (the Dask workers are spawned: they import this file)
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="HYPERAPP_READ_THREADS=default,16")
    ap.add_argument("--dir", default="/tmp/hyperapp-two-workers")
    ap.add_argument("--cubes", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--one-each", action="store_true", help="one worker measured with each value too")
    args = ap.parse_args()

    name, values = args.env.split("=", 1)
    d = Path(args.dir)
    hdrs, gb = campaign_files(d, args.cubes, CAMPAIGN_SHAPE)
    job = _job(d, "workers", "rbfn", "cubes/*.hdr")
    one = None
    if not args.one_each:
        setenv(name, "default")
        one = F._on_warm_cluster(job, "one", 1, 4)
        print(f"one worker ({name} default): {gb / one:.1f} GB/s; stages {stage_medians(d / 'out-one')}", flush=True)
    for r in range(args.repeats):
        for v in values.split(","):
            setenv(name, v)
            if args.one_each:
                one = F._on_warm_cluster(job, f"one-{v}-{r}", 1, 4)
                print(f"one worker, {name} {v}: {gb / one:.1f} GB/s; stages {stage_medians(d / f'out-one-{v}-{r}')}",
                      flush=True)
            two = F._on_warm_cluster(job, f"two-{v}-{r}", 2, 8)
            print(f"two workers, {name} {v}: {gb / two:.1f} GB/s, {one / two:.2f}x one; stages "
                  f"{stage_medians(d / f'out-two-{v}-{r}')}", flush=True)
