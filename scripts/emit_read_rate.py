"""An EMIT-sized L2A file, read by hyperapp's streamed read path against h5py's own read, and detected.

Writes a synthetic EMIT L2A RFL NetCDF4 file in EMIT's layout (``tests/product_files.write_emit``) at full size:
1280 downtrack x 1242 crosstrack x 285 bands float32 (1.81 GB), chunked uncompressed by netCDF-C's default
rule (chunks of about 4 MiB, every dimension cut by the same factor), as a netCDF4 writer leaves it. Then:

* h5py's own read of the dataset, the whole of it (``ds[()]``) and in hyperapp's tiles of rows (``ds[r0:r1]``);
* hyperapp's read path: :func:`hyperapp.reading.tiles.iter_float_tiles` on the CPU (the tile reader and the
  float32 conversion with the no-data test: what ``detect``'s streamed passes do per tile);
* ``hyperapp --headless detect FILE --method ace --targets T --memory GB`` (streamed, as the budget is below
  the cube), with its wall time and report.

Each read is timed ``--reps`` times, alternating, from the page cache (the file was just written: the machine
holds it); best and median printed as GB/s of stored bytes. Results as JSON to ``--out``.

Usage: ``python scripts/emit_read_rate.py FOLDER [--rows 1280] [--memory 0.5] [--device gpu] [--out r.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Synthetic:
    """A (rows, cols, bands) scene made a block of rows at a time (a mixture of smooth spectra, targets
    planted on a grid), so the 1.8 GB file is written without holding it."""

    def __init__(self, rows, cols, wl, targets):
        from tests.product_files import _bg, target_spectrum

        self.shape = (rows, cols, wl.size)
        self.bg = _bg(wl).astype(np.float32)
        self.t = target_spectrum(wl).astype(np.float32)
        self.targets = targets

    def __getitem__(self, rows: slice) -> np.ndarray:
        r0, r1, _ = rows.indices(self.shape[0])
        rng = np.random.default_rng(r0)
        n, c = r1 - r0, self.shape[1]
        ab = rng.dirichlet([2.0, 2.0, 2.0], size=(n, c)).astype(np.float32)
        x = ab @ self.bg
        x += 0.002 * rng.standard_normal(x.shape, dtype=np.float32)
        for r, cc in self.targets:
            if r0 <= r < r1:
                x[r - r0, cc] = 0.85 * self.t + 0.15 * x[r - r0, cc]
        return x


def default_chunks(shape, itemsize=4, target=4 << 20):
    """netCDF-C's default chunk sizes for a variable without unlimited dimensions (about ``target`` bytes)."""
    total = np.prod(shape) * itemsize
    f = (target / total) ** (1.0 / len(shape))
    return tuple(max(1, int(s * f - 0.5)) for s in shape)


def timed(fn, reps):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--rows", type=int, default=1280)
    ap.add_argument("--cols", type=int, default=1242)
    ap.add_argument("--bands", type=int, default=285)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--memory", default="0.5")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import h5py

    from hyperapp.core.cube import TILE_BYTES
    from hyperapp.io import open_cube
    from hyperapp.reading.tiles import TileReader, iter_float_tiles
    from tests.product_files import emit_wavelengths, write_emit

    folder = Path(a.folder)
    folder.mkdir(parents=True, exist_ok=True)
    res: dict = {"shape": [a.rows, a.cols, a.bands]}

    def save():
        if a.out:
            Path(a.out).write_text(json.dumps(res, indent=2))

    wl = emit_wavelengths(a.bands)
    step = 97
    targets = [(r, c) for r in range(40, a.rows, step) for c in range(50, a.cols, 173)]
    syn = Synthetic(a.rows, a.cols, wl, targets)
    chunks = default_chunks((a.rows, a.cols, a.bands))
    t = time.perf_counter()
    path, _ = write_emit(folder, rows=a.rows, cols=a.cols, wl=wl, data=syn, chunks=chunks)
    res.update(chunks=list(chunks), write_s=round(time.perf_counter() - t, 2), bytes=os.path.getsize(path))
    print(f"wrote {path} ({res['bytes'] / 1e9:.2f} GB, chunks {chunks}) in {res['write_s']} s", flush=True)
    save()
    (folder / "targets.csv").write_text("row,col\n" + "".join(f"{r},{c}\n" for r, c in targets[:2]))

    cube = open_cube(path)
    rows_per = TileReader(cube, TILE_BYTES).rows_per
    nbytes = cube.nbytes

    def h5_whole():
        with h5py.File(path, "r") as f:
            f["reflectance"][()]

    def h5_tiles():
        with h5py.File(path, "r") as f:
            ds = f["reflectance"]
            for r0 in range(0, a.rows, rows_per):
                ds[r0:r0 + rows_per]

    def reader():  # the read stage alone: raw tiles as stored into the ring
        r = TileReader(open_cube(path), TILE_BYTES)
        try:
            for t in r:
                r.release(t)
        finally:
            r.close()

    def ours():  # read + float32 conversion + no-data test on the CPU
        for _ in iter_float_tiles(open_cube(path), np):
            pass

    runs = [("h5py_whole", h5_whole), ("h5py_tiles", h5_tiles), ("hyperapp_reader", reader), ("hyperapp_tiles", ours)]
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()

        def ours_gpu():  # read into page-locked buffers, copy to the GPU, convert there (detect --device gpu)
            for _ in iter_float_tiles(open_cube(path), cupy):
                pass
            cupy.cuda.runtime.deviceSynchronize()

        runs.append(("hyperapp_tiles_gpu", ours_gpu))
    except Exception as exc:  # noqa: BLE001  (no GPU here: the CPU figures only)
        print(f"no GPU figures: {exc}", flush=True)
    for _name, fn in runs:
        fn()  # once, warm
    times: dict = {name: [] for name, _ in runs}
    for _ in range(a.reps):
        for name, fn in runs:
            times[name] += timed(fn, 1)
    for name, ts in times.items():
        res[name] = {"best_GBps": round(nbytes / min(ts) / 1e9, 3), "median_GBps": round(float(nbytes / np.median(ts)) / 1e9, 3),
                     "seconds": [round(x, 3) for x in ts]}
        print(name, res[name], flush=True)
    res["tile_rows"] = rows_per
    for name in times:
        if name.startswith("hyperapp"):
            res[f"ratio_{name}_vs_h5py_whole"] = round(res[name]["median_GBps"] / res["h5py_whole"]["median_GBps"], 3)
            res[f"ratio_{name}_vs_h5py_tiles"] = round(res[name]["median_GBps"] / res["h5py_tiles"]["median_GBps"], 3)
    print({k: v for k, v in res.items() if k.startswith("ratio")}, flush=True)
    save()

    out = folder / "det"
    cmd = [sys.executable, "-m", "hyperapp", "--headless", "detect", str(path), "--method", "ace", "--targets",
           str(folder / "targets.csv"), "--memory", a.memory, "--device", a.device, "--out", str(out)]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    res["detect"] = {"cmd": " ".join(cmd), "rc": p.returncode, "wall_s": round(time.perf_counter() - t, 2),
                     "stderr_tail": p.stderr[-1500:], "stdout_tail": p.stdout[-1500:]}
    if p.returncode == 0:
        rep = json.loads((out / "report.json").read_text())
        res["detect"]["report"] = {k: rep.get(k) for k in ("streamed", "device", "device_name", "seconds",
                                                           "detections", "product", "nodata_pixels")}
        s = open_cube(out / "scores.hdr").read()[:, :, 0]
        s = np.where(np.isnan(s), -np.inf, s)
        for r, c in targets[:2]:
            s[r, c] = -np.inf
        top = np.argsort(s.ravel())[::-1][: len(targets) - 2]
        got = {tuple(int(v) for v in np.unravel_index(i, s.shape)) for i in top}
        res["detect"]["planted_on_top"] = f"{len(got & set(targets[2:]))} of {len(targets) - 2}"
    print(json.dumps(res["detect"], indent=1)[:3000], flush=True)
    save()


if __name__ == "__main__":
    main()
