"""Two Dask workers (one per GPU) on the campaign, with the reading helper's thread count varied: each
worker of a two-worker cluster on a 32-core host reads with 12 threads by default (its 16 cores less
the four its stages keep), one worker alone with 16.

    python3 scripts/two_worker_threads.py [--threads default,14,16] [--dir DIR] [--cubes 16]

Prints, per value, the two workers' GB/s and one worker's (default threads) for the ratio.
"""

import argparse
import os
from pathlib import Path

from hyperapp.bench import whole_path as F
from hyperapp.bench.campaign import CAMPAIGN_SHAPE, _job, campaign_files, stage_medians

if __name__ == "__main__":  # (the Dask workers are spawned: they import this file)
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="default,16")
    ap.add_argument("--dir", default="/tmp/hyperapp-two-workers")
    ap.add_argument("--cubes", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    d = Path(args.dir)
    hdrs, gb = campaign_files(d, args.cubes, CAMPAIGN_SHAPE)
    job = _job(d, "workers", "rbfn", "cubes/*.hdr")
    os.environ.pop("HYPERAPP_READ_THREADS", None)
    one = F._on_warm_cluster(job, "one", 1, 4)
    print(f"one worker (default threads): {gb / one:.1f} GB/s; stages {stage_medians(d / 'out-one')}", flush=True)
    for r in range(args.repeats):
        for v in args.threads.split(","):
            if v == "default":
                os.environ.pop("HYPERAPP_READ_THREADS", None)
            else:
                os.environ["HYPERAPP_READ_THREADS"] = v
            two = F._on_warm_cluster(job, f"two-{v}-{r}", 2, 8)
            print(f"two workers, threads {v}: {gb / two:.1f} GB/s, {one / two:.2f}x one; stages "
              f"{stage_medians(d / f'out-two-{v}-{r}')}", flush=True)
