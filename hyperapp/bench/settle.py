"""Waiting for a bench run's writes to reach the disk, and the medians of a batch run's stage timings."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path


def settle_writes() -> None:
    """Wait until the files just written are on disk: the kernel's write-back of gigabytes of dirty
    pages otherwise runs through the measurement and stalls its writes (a write stage of 40 ms a cube
    measured at 420 ms while 21 GB of freshly written cubes were being flushed)."""
    os.sync()


def stage_medians(out: Path) -> dict:
    """Median seconds per cube of each stage, from a run's manifest."""
    cubes = json.loads((out / "manifest.json").read_text())["cubes"].values()
    st = [c.get("stages", {}) for c in cubes if c.get("status") == "done"]
    return {k: round(statistics.median(s.get(k, 0.0) for s in st), 4) for k in ("read", "compute", "write", "wait")} \
        if st else {}
