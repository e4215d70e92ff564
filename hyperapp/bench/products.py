"""A sensor product at full size: an EMIT L2A scene read by hyperapp against h5py's own read, then detected.

``emit-l2a-1280x1242x285`` writes a synthetic EMIT L2A RFL NetCDF4 file of a real scene's size (1280
downtrack x 1242 crosstrack x 285 bands float32, 1.8 GB of reflectance) in EMIT's layout
(:func:`write_emit_file`, the layout ``tests/product_files.py`` also writes its small files with), chunked
as netCDF-C's default chunking leaves an uncompressed variable (about 4 MiB a chunk, every dimension cut
by the same factor). It then times, from the page cache, alternating:

- h5py's own read of the whole dataset (``ds[()]``, the peer) and in hyperapp's tiles of rows;
- hyperapp's read path onto the GPU (:func:`hyperapp.reading.tiles.iter_float_tiles`: the tile reader,
  page-locked copies, float32 conversion and the no-data test on the device), what ``detect``'s streamed
  passes do per tile;
- ``hyperapp --headless detect FILE --method ace --memory 0.5 --device gpu`` in a fresh process: the
  cube (2.1 GB on disk) is over the memory budget, so it streams in two passes; each pass's read rate
  is the file's bytes over that pass's seconds, and the planted targets must rank on top.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hyperapp.bench import Measurement, bench_case

#: EMIT's ``spatial_ref`` (GDAL's WKT1 of WGS84, as the files hold it)
EMIT_WKT = ('GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,AUTHORITY["EPSG","7030"]],'
            'AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,'
            'AUTHORITY["EPSG","9122"]],AXIS["Latitude",NORTH],AXIS["Longitude",EAST],AUTHORITY["EPSG","4326"]]')
#: the real scene's size: downtrack, crosstrack, bands
FULL = (1280, 1242, 285)


def emit_wavelengths(n: int = 48) -> np.ndarray:
    """EMIT's wavelength range (381-2493 nm) in ``n`` bands."""
    return np.linspace(381.0, 2493.0, n)


def netcdf_dims(f, names_sizes) -> None:
    """NetCDF4's dimensions without variables: dimension-scale datasets the variables' axes attach to."""
    for name, n in names_sizes:
        d = f.create_dataset(name, shape=(n,), dtype="f4")
        d.make_scale("This is a netCDF dimension but not a netCDF variable." + " " * 9 + str(n))


def netcdf_default_chunks(shape, itemsize: int = 4, target: int = 4 << 20) -> tuple[int, ...]:
    """netCDF-C's default chunk sizes for a variable without unlimited dimensions (about ``target`` bytes,
    every dimension cut by the same factor)."""
    f = (target / (np.prod(shape) * itemsize)) ** (1.0 / len(shape))
    return tuple(max(1, int(s * f - 0.5)) for s in shape)


def write_emit_file(path, level: str, wl: np.ndarray, rows: int, cols: int, data, chunks=True,
                    lonlat0=(-118.0, 34.0), pixel: float = 0.0005) -> Path:
    """An EMIT L2A RFL (``level="L2A"``) or L1B RAD NetCDF4 file in EMIT's layout: root
    ``reflectance``/``radiance`` (downtrack, crosstrack, bands) float32 with _FillValue -9999, groups
    ``sensor_band_parameters`` (wavelengths, fwhm, good_wavelengths) and ``location`` (lat, lon, elev,
    a GLT onto a geographic grid with a one-pixel border of no data), global ``geotransform`` and
    ``spatial_ref``.

    ``data``: the (rows, cols, bands) values, an array or anything sliced by rows (``data[r0:r1]``, so a
    scene of gigabytes is written a block of rows at a time without being held).
    """
    import h5py

    nb = wl.size
    name = "reflectance" if level == "L2A" else "radiance"
    good = ~(((wl > 1320) & (wl < 1440)) | ((wl > 1770) & (wl < 1970)))
    lon0, lat0 = lonlat0
    with h5py.File(path, "w") as f:
        netcdf_dims(f, [("downtrack", rows), ("crosstrack", cols), ("bands", nb), ("ortho_y", rows + 2),
                        ("ortho_x", cols + 2)])
        ds = f.create_dataset(name, shape=(rows, cols, nb), dtype="f4", chunks=chunks, fillvalue=-9999.0)
        step = max(1, (64 << 20) // (cols * nb * 4))
        for r0 in range(0, rows, step):
            ds[r0:r0 + step] = data[r0:r0 + step]
        ds.attrs["_FillValue"] = np.float32(-9999.0)
        ds.attrs["long_name"] = "Surface Reflectance" if level == "L2A" else "Radiance Data"
        ds.attrs["units"] = "unitless" if level == "L2A" else "uW/cm^2/SR/nm"
        for i, dim in enumerate(("downtrack", "crosstrack", "bands")):
            ds.dims[i].attach_scale(f[dim])
        g = f.create_group("sensor_band_parameters")
        w = g.create_dataset("wavelengths", data=wl.astype(np.float32))
        w.attrs["long_name"] = "Wavelength Centers"
        w.attrs["units"] = "nm"
        g.create_dataset("fwhm", data=np.full(nb, 8.5, np.float32)).attrs["units"] = "nm"
        g.create_dataset("good_wavelengths", data=good.astype(np.float32))
        loc = f.create_group("location")
        rr, cc = np.mgrid[0:rows, 0:cols].astype(np.float64)
        loc.create_dataset("lat", data=lat0 - (rr + 1.5) * pixel)
        loc.create_dataset("lon", data=lon0 + (cc + 1.5) * pixel)
        loc.create_dataset("elev", data=np.full((rows, cols), 250.0))
        gx = np.zeros((rows + 2, cols + 2), np.int32)
        gy = np.zeros((rows + 2, cols + 2), np.int32)
        gx[1:-1, 1:-1] = cc.astype(np.int32) + 1
        gy[1:-1, 1:-1] = rr.astype(np.int32) + 1
        loc.create_dataset("glt_x", data=gx)
        loc.create_dataset("glt_y", data=gy)
        f.attrs["geotransform"] = np.array([lon0, pixel, 0.0, lat0, 0.0, -pixel])
        f.attrs["spatial_ref"] = EMIT_WKT
        f.attrs["title"] = f"EMIT {level} {'RFL' if level == 'L2A' else 'RAD'}"
    return Path(path)


class RowBlocks:
    """A (rows, cols, bands) reflectance scene made a block of rows at a time: three smooth spectra mixed
    per pixel, sensor noise, and a target spectrum planted at ``targets``."""

    def __init__(self, rows: int, cols: int, wl: np.ndarray, targets):
        w = wl.astype(np.float64)
        self.shape = (rows, cols, wl.size)
        self.bg = np.stack([0.20 + 0.10 * np.sin(w / 150.0), 0.30 + 0.15 * np.exp(-(((w - 1200.0) / 400.0) ** 2)),
                            0.10 + 0.0001 * (w - 400.0)]).astype(np.float32)
        self.t = (0.30 + 0.15 * np.sin(w / 60.0) + 0.05 * np.cos(w / 23.0)).astype(np.float32)
        self.targets = targets

    def __getitem__(self, rows: slice) -> np.ndarray:
        r0, r1, _ = rows.indices(self.shape[0])
        rng = np.random.default_rng(r0)
        x = rng.dirichlet([2.0, 2.0, 2.0], size=(r1 - r0, self.shape[1])).astype(np.float32) @ self.bg
        x += 0.002 * rng.standard_normal(x.shape, dtype=np.float32)
        for r, c in self.targets:
            if r0 <= r < r1:
                x[r - r0, c] = 0.85 * self.t + 0.15 * x[r - r0, c]
        return x


def _seconds(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


@bench_case("emit-l2a-1280x1242x285")
def emit_full(ctx) -> list[Measurement]:
    """A full-size EMIT L2A file: hyperapp's read onto the GPU against h5py's own read, then a streamed
    ``detect`` in a fresh process (each pass's read rate; the planted targets on top)."""
    import cupy
    import h5py

    from hyperapp.bench.whole_path import fresh_env
    from hyperapp.io import open_cube
    from hyperapp.reading.tiles import iter_float_tiles

    rows, cols, nb = FULL
    wl = emit_wavelengths(nb)
    targets = [(r, c) for r in range(40, rows, 97) for c in range(50, cols, 173)]
    with tempfile.TemporaryDirectory(prefix="hyperapp-emit-") as tmp:
        d = Path(tmp)
        chunks = netcdf_default_chunks((rows, cols, nb))
        path = write_emit_file(d / "EMIT_L2A_RFL_001_20230316T045133_2307503_005.nc", "L2A", wl, rows, cols,
                               RowBlocks(rows, cols, wl, targets), chunks)
        nbytes = rows * cols * nb * 4

        def h5py_whole():
            with h5py.File(path, "r") as f:
                f["reflectance"][()]

        def ours():
            for _ in iter_float_tiles(open_cube(path), cupy):
                pass
            cupy.cuda.runtime.deviceSynchronize()

        h5py_whole()
        ours()
        times = {"h5py": [], "hyperapp": []}
        for _ in range(3):  # alternating, so both meet the same state of the machine
            times["h5py"] += _seconds(h5py_whole, 1)
            times["hyperapp"] += _seconds(ours, 1)
        ours_s, peer_s = float(np.median(times["hyperapp"])), float(np.median(times["h5py"]))
        read = Measurement("emit-l2a-read-to-gpu", ours_s * 1e3, None, "h5py ds[()] of the same dataset",
                           peer_s * 1e3, notes={
                               "hyperapp_GBps": round(nbytes / ours_s / 1e9, 3), "h5py_GBps": round(nbytes / peer_s / 1e9, 3),
                               "hyperapp_share_of_h5py_rate": round(peer_s / ours_s, 3), "chunks": list(chunks),
                               "file_GB": round(path.stat().st_size / 1e9, 3)})
        (d / "t.csv").write_text("row,col\n" + "".join(f"{r},{c}\n" for r, c in targets[:2]))
        out = d / "det"
        cmd = [sys.executable, "-m", "hyperapp", "--headless", "detect", str(path), "--method", "ace", "--targets",
               str(d / "t.csv"), "--memory", "0.5", "--device", "gpu", "--out", str(out)]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=fresh_env(), cwd=tempfile.gettempdir())
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"detect failed: {p.stderr.strip()[-400:]}")
        rep = json.loads((out / "report.json").read_text())
        sec = rep["seconds"]
        s = open_cube(out / "scores.hdr").read()[:, :, 0]
        s = np.where(np.isnan(s), -np.inf, s)
        for r, c in targets[:2]:
            s[r, c] = -np.inf
        top = {tuple(int(v) for v in np.unravel_index(i, s.shape)) for i in np.argsort(s.ravel())[::-1][:len(targets) - 2]}
        passes = {k: v for k, v in sec.items() if k.startswith("pass")}
        detect = Measurement("emit-l2a-detect-streamed", wall * 1e3, None, "h5py ds[()] of the same dataset, twice",
                             2 * peer_s * 1e3, notes={
                                 "command": " ".join(["hyperapp", *cmd[3:]]), "streamed": rep.get("streamed"),
                                 "seconds": sec, "pass_read_GBps": {k: round(nbytes / v / 1e9, 3) for k, v in passes.items()},
                                 "pass_share_of_h5py_rate": {k: round(peer_s / v, 3) for k, v in passes.items()},
                                 "planted_on_top": f"{len(top & set(targets[2:]))} of {len(targets) - 2}",
                                 "product": rep.get("product")})
    return [read, detect]
