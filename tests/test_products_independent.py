"""Sensor products built independently of ``tests/product_files.py`` (issue 50), opened through the public
entry points: :func:`hyperapp.io.open_cube` and the command line's ``info`` and ``detect``.

For each product: the band count and wavelengths (ascending, the product's own bad bands flagged), the
physical values (scale and offset applied), no-data from the fill value, a detection from two planted pixels
that ranks the other planted pixels on top, and objects.csv's longitude/latitude within half a pixel.
"""

from __future__ import annotations

import contextlib
import csv
import io
import subprocess
import sys

import numpy as np
import pytest

from hyperapp.io import open_cube

from .conftest import OUTSIDE, cli_env
from .independent_products import BUILDERS, TARGETS, Product

NAMES = tuple(BUILDERS)


@pytest.fixture(scope="module")
def products(tmp_path_factory) -> dict[str, Product]:
    root = tmp_path_factory.mktemp("independent")
    out = {}
    for name, build in BUILDERS.items():
        sub = root / name
        sub.mkdir()
        out[name] = build(sub)
    return out


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``hyperapp --headless ARGS`` through the command line's ``main``, in this process (a subprocess
    each would double the file's time: see the one below that runs ``python -m hyperapp``)."""
    from hyperapp.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["--headless", *args])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def test_the_installed_command_opens_a_product(products):
    """The same through ``python -m hyperapp`` in a process of its own, from outside the checkout."""
    p = products["emit"]
    r = subprocess.run(
        [sys.executable, "-m", "hyperapp", "--headless", "info", str(p.path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=OUTSIDE,
        env=cli_env(),
    )
    assert r.returncode == 0, r.stderr
    assert f"x {p.wavelengths.size} bands" in r.stdout and "EMIT L2A" in r.stdout, r.stdout


def _matching_bands(cube_wl: np.ndarray, truth_wl: np.ndarray) -> np.ndarray:
    """For each cube band, the index of the truth band of the same wavelength (-1 where none)."""
    d = np.abs(cube_wl[:, None] - truth_wl[None, :])
    idx = d.argmin(axis=1)
    return np.where(d[np.arange(cube_wl.size), idx] < 0.01, idx, -1)


@pytest.mark.parametrize("name", NAMES)
def test_open_bands_values_nodata(products, name):
    p = products[name]
    cube = open_cube(p.path)
    rows, cols = p.shape
    assert (cube.rows, cube.cols) == (rows, cols), f"{name}: {cube.shape}"
    wl = np.asarray(cube.wavelengths, dtype=float)
    assert wl.shape == (cube.bands,)
    units = (cube.wavelength_units or "nm").lower()
    assert units in ("nm", "nanometers", "nanometer"), units
    assert np.all(np.diff(wl) >= 0), f"{name}: wavelengths not in ascending order"
    # every real band of the product is there, none invented
    match = _matching_bands(wl, p.wavelengths)
    assert np.all(match >= 0), f"{name}: bands {wl[match < 0]} not in the product"
    # every band is there; where two detectors overlap, one copy of a wavelength may be left out
    lo, hi = p.extra.get("overlap", (np.inf, -np.inf))
    needed = {i for i, w in enumerate(p.wavelengths) if not lo <= w <= hi}
    assert needed <= set(match.tolist()), (
        f"{name}: bands {p.wavelengths[sorted(needed - set(match))]} missing"
    )
    assert np.unique(match).size == match.size, f"{name}: a band twice"
    # the product's own bad bands, and only those, are flagged
    bad = np.zeros(cube.bands, bool) if cube.bad_bands is None else np.asarray(cube.bad_bands, bool)
    assert np.array_equal(bad, ~p.good[match]), f"{name}: bad bands {wl[bad]} vs {p.wavelengths[~p.good]}"
    assert p.units in (cube.value_units or ""), f"{name}: value units {cube.value_units!r}"

    data = cube.read()
    valid = ~p.nodata
    good = p.good[match]
    got = data[valid][:, good]
    want = p.values[valid][:, match[good]]
    np.testing.assert_allclose(got, want, atol=p.atol + 1e-6, rtol=1e-5, err_msg=f"{name}: physical values")
    if p.units == "reflectance":
        assert 0.0 <= np.nanmin(got) and np.nanmax(got) <= 1.0
    fill = data[p.nodata]
    is_missing = ~np.isfinite(fill)
    if cube.nodata is not None:
        is_missing |= fill == cube.nodata
    assert is_missing.all(), f"{name}: fill pixels read as data"


@pytest.mark.parametrize("name", NAMES)
def test_info_says_bands_range_units_location(products, name):
    p = products[name]
    r = _cli("info", str(p.path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"x {open_cube(p.path).bands} bands" in out, out
    assert f"{p.wavelengths.min():.4g}"[:4] in out and ("nm" in out or "Nanometers" in out), out
    assert p.units in out, out
    assert "location:" in out and "lon/lat" in out, out


def _pixel_error(p: Product, r: int, c: int, lon: float, lat: float) -> np.ndarray:
    """(row, col) offset in pixels of (lon, lat) from pixel (r, c)'s centre, through the local Jacobian."""
    r1 = r + 1 if r + 1 < p.shape[0] else r - 1
    c1 = c + 1 if c + 1 < p.shape[1] else c - 1
    j = np.array(
        [
            [(p.lon[r1, c] - p.lon[r, c]) / (r1 - r), (p.lon[r, c1] - p.lon[r, c]) / (c1 - c)],
            [(p.lat[r1, c] - p.lat[r, c]) / (r1 - r), (p.lat[r, c1] - p.lat[r, c]) / (c1 - c)],
        ]
    )
    return np.linalg.solve(j, [lon - p.lon[r, c], lat - p.lat[r, c]])


def _detect_two_clicks(p, tmp_path, out, *extra):
    """``detect`` with ACE on the CPU from the first two planted pixels (the command line, in-process)."""
    clicks = tmp_path / "clicks.csv"
    clicks.write_text("row,col\n" + "".join(f"{r},{c}\n" for r, c in TARGETS[:2]))
    r = _cli("detect", str(p.path), "--method", "ace", "--targets", str(clicks), "--out", str(out), "--device", "cpu",
             *extra)
    assert r.returncode == 0, r.stderr + r.stdout


@pytest.mark.parametrize("name", NAMES)
def test_detect_ranks_planted_pixels_and_places_them(products, name, tmp_path):
    p = products[name]
    out = tmp_path / "out"
    _detect_two_clicks(p, tmp_path, out)
    scores = open_cube(out / "scores.hdr").read()[:, :, 0]
    assert scores.shape == p.shape
    s = np.where(np.isfinite(scores) & ~p.nodata, scores, -np.inf)
    top = {
        tuple(int(v) for v in np.unravel_index(i, s.shape))
        for i in np.argsort(s, axis=None)[::-1][: len(TARGETS)]
    }
    assert top == set(TARGETS), f"{name}: top pixels {sorted(top)}"
    assert not np.isfinite(scores[p.nodata]).any() or np.all(scores[p.nodata] < s[TARGETS[2]]), name

    from hyperapp.core.geo import MapGrid

    geo = open_cube(p.path).geo
    if isinstance(geo, MapGrid):  # the scores carry the product's grid (ENVI map info)
        sgeo = open_cube(out / "scores.hdr").geo
        assert isinstance(sgeo, MapGrid), f"{name}: scores without the map grid"
        np.testing.assert_allclose(sgeo.transform, geo.transform, atol=1e-6)
    with open(out / "objects.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and "lon" in rows[0] and "lat" in rows[0], rows[:1]
    placed = {}
    for row in rows:
        if row["pixels"] == "1":
            placed[(int(row["row0"]), int(row["col0"]))] = (float(row["lon"]), float(row["lat"]))
    for t in TARGETS:
        assert t in placed, f"{name}: no single-pixel object at {t}"
        err = _pixel_error(p, *t, *placed[t])
        assert np.all(np.abs(err) <= 0.5), f"{name}: object at {t} placed {err} pixels off"


# ------------------------------------------------------------------ regressions of what the files above found
def test_numbers_reads_attributes_as_h5py_gives_them(tmp_path):
    """netCDF-C and HDF-EOS5 write text attributes fixed-length (h5py gives ``np.bytes_``), numbers as
    1-element arrays; h5py writes a ``str`` variable-length. Each reads as the same numbers (AVIRIS-3's
    ``GeoTransform`` as ``np.bytes_`` was indexed as if a dataset, and the product refused)."""
    import h5py

    from hyperapp.io.h5util import numbers

    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.attrs.create("fixed", np.bytes_(b"402117 4.8 0 3770403 0 -4.8 "))
        f.attrs["varlen"] = "402117 4.8 0 3770403 0 -4.8"
        f.attrs.create("array", np.array([402117, 4.8, 0, 3770403, 0, -4.8]))
        f.attrs.create("one", np.array([7.5], np.float32))
        f.attrs.create("scalar", np.float32(7.5))
        f.create_dataset("ds", data=np.arange(3.0))
    with h5py.File(tmp_path / "a.h5", "r") as f:
        want = [402117, 4.8, 0, 3770403, 0, -4.8]
        for key in ("fixed", "varlen", "array"):
            np.testing.assert_allclose(numbers(f.attrs[key]), want, err_msg=key)
        assert numbers(f.attrs["one"]).tolist() == [7.5] and numbers(f.attrs["scalar"]).tolist() == [7.5]
        assert numbers(f["ds"]).tolist() == [0.0, 1.0, 2.0]


def test_a_band_the_product_fills_with_no_data_is_found_bad():
    """EnMAP L2A fills its water-vapour edge bands with the no-data value and flags them nowhere else:
    :func:`empty_bands` finds them from rows sampled over the image, and not a band empty only where every
    band is (outside the footprint)."""
    from hyperapp.io.band_stack import BandStack, Piece, empty_bands

    a = np.random.default_rng(0).integers(1, 1000, (6, 30, 20)).astype(np.int16)  # (bands, rows, cols)
    a[2] = -1  # a band filled with no data
    a[:, :5, :] = -1  # a corner outside the footprint: every band no data
    a[4, 10:, :] = -1  # a band with data in a few rows only is not empty
    stack = BandStack([Piece(a, (1, 2, 0), np.arange(6), None, None, -1)])
    empty, seen = empty_bands(stack, side=8)
    assert empty.tolist() == [False, False, True, False, False, False] and seen > 0
    none = BandStack([Piece(np.full((3, 4, 4), -1, np.int16), (1, 2, 0), np.arange(3), None, None, -1)])
    assert empty_bands(none)[0].tolist() == [False] * 3  # nothing to say from an image without data


def test_a_pixel_at_the_empty_value_in_every_band_is_no_data():
    """PRISMA L2D leaves the grid outside its swath at DN 0 in every band of both cubes: such a pixel reads
    NaN in every band, one with DN 0 in some bands only keeps its values."""
    from hyperapp.io.band_stack import BandStack, Piece

    v = np.full((4, 3, 5), 100, np.uint16)  # (rows, bands, cols) as PRISMA stores them
    s = np.full((4, 2, 5), 200, np.uint16)
    v[0, :, 0] = 0
    s[0, :, 0] = 0  # outside the swath
    v[1, :, 1] = 0  # dark in VNIR only: data
    stack = BandStack(
        [
            Piece(v, (0, 2, 1), np.arange(3), np.full(3, 0.5), None),
            Piece(s, (0, 2, 1), np.arange(2), None, None),
        ],
        empty_pixel=0,
    )
    out = stack[:, :, :]
    assert np.isnan(out[0, 0]).all() and np.isfinite(out[1, 1]).all() and out[1, 1, 3] == 200
    assert np.isfinite(np.delete(out.reshape(-1, 5), 0, axis=0)).all()


def test_emit_detect_orthorectified_through_the_glt(products, tmp_path):
    """``--ortho``: the scores land on EMIT's GLT grid (each cell the score of the swath pixel its GLT names,
    1-based, 0 = none) and the objects' lon/lat are their cells' centres on the grid of ``geotransform``."""
    p = products["emit"]
    glt_x, glt_y = p.extra["glt"]
    x0, step, y0 = p.extra["geotransform"]
    swath, ortho = tmp_path / "swath", tmp_path / "ortho"
    for out, extra in ((swath, ()), (ortho, ("--ortho",))):
        _detect_two_clicks(p, tmp_path, out, *extra)
    s = open_cube(swath / "scores.hdr").read()[:, :, 0]
    o = open_cube(ortho / "scores.hdr").read()[:, :, 0]
    assert o.shape == glt_x.shape
    has = glt_x > 0
    want = np.full(glt_x.shape, np.nan, np.float32)
    want[has] = s[glt_y[has] - 1, glt_x[has] - 1]
    np.testing.assert_allclose(o[has], want[has], rtol=1e-5, atol=1e-6)
    assert not np.isfinite(o[~has]).any()
    with open(ortho / "objects.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    for row in rows:
        r0, c0 = int(row["row0"]), int(row["col0"])
        cy, cx = float(row["centroid_row"]), float(row["centroid_col"])
        lon, lat = x0 + (cx + 0.5) * step, y0 - (cy + 0.5) * step
        assert abs(float(row["lon"]) - lon) <= step / 2 and abs(float(row["lat"]) - lat) <= step / 2, row
        assert has[r0, c0]


def test_a_job_over_a_folder_of_these_downloads_runs_each_product_once(tmp_path):
    """A glob over a folder of the products above meets every file of each (EnMAP's XML and images, DESIS's
    TIFF, header and METADATA.xml): each product is one input and all of them run (DESIS's METADATA.xml was
    an input of its own, refused as 'not an EnMAP product', and the job failed)."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job

    from .independent_products import build_all

    d = tmp_path / "downloads"
    built = build_all(d)
    desis_xml = next(built["desis"].path.parent.glob("*-METADATA.xml"))
    assert open_cube(desis_xml).bands == open_cube(built["desis"].path).bands
    (tmp_path / "t.csv").write_text("row,col\n" + "".join(f"{r},{c}\n" for r, c in TARGETS[:2]))
    job = tmp_path / "job.toml"
    job.write_text(
        f'[inputs]\npaths = ["{d}/**/*"]\n[[steps]]\ndetect = "ace"\ntargets = "{tmp_path / "t.csv"}"\n'
        f'[output]\nfolder = "{tmp_path / "out"}"\n'
    )
    inputs = load_job(job).inputs
    assert len(inputs) == len(built), inputs
    assert run_job(load_job(job), device="cpu") == 0
    assert len(list((tmp_path / "out").rglob("report.json"))) == len(built)


def test_prisma_l2d_is_a_map_grid_checked_against_its_latitude_longitude(products):
    """PRISMA L2D is on a UTM grid: ``Epsg_Code`` and the corner attributes (the corner pixels' centres)
    make a :class:`MapGrid` (so exports carry the CRS) when they agree with the file's Latitude/Longitude;
    L2C, in sensor geometry, keeps its latitude/longitude per pixel."""
    from hyperapp.core.geo import MapGrid, Swath, lonlat

    p = products["prisma"]
    geo = open_cube(p.path).geo
    assert isinstance(geo, MapGrid) and geo.crs == "EPSG:32632"
    rr, cc = np.mgrid[: p.shape[0], : p.shape[1]]
    lon, lat = lonlat(geo, rr, cc)
    np.testing.assert_allclose(lon, p.lon, atol=1e-7)
    np.testing.assert_allclose(lat, p.lat, atol=1e-7)
    assert isinstance(open_cube(products["prisma_l2c"].path).geo, Swath)


def test_emit_mask_file_is_refused_as_what_it_is(tmp_path):
    """EMIT's L2A MASK (downloaded with the RFL: ``mask`` with ``sensor_band_parameters/mask_bands``, and the
    packed ``band_mask``) holds flags, not spectra: refused in one line naming it, not as 'several 3-D
    datasets' (emit-sds's layout; nasa/EMIT-Data-Resources ``quality_mask``/``band_mask``)."""
    import h5py

    from hyperapp.core.errors import CubeFormatError

    p = tmp_path / "EMIT_L2A_MASK_001_20240614T201532_2416613_007.nc"
    with h5py.File(p, "w") as f:
        f.create_dataset("mask", data=np.zeros((40, 50, 8), np.float32))
        f.create_dataset("band_mask", data=np.zeros((40, 50, 36), np.uint8))
        f.create_dataset(
            "sensor_band_parameters/mask_bands",
            data=np.array(
                [
                    b"Cloud flag",
                    b"Cirrus flag",
                    b"Water flag",
                    b"Spacecraft Flag",
                    b"Dilated Cloud Flag",
                    b"AOD550",
                    b"H2O (g cm-2)",
                    b"Aggregate Flag",
                ]
            ),
        )
    with pytest.raises(CubeFormatError, match="EMIT L2A MASK"):
        open_cube(p)
    r = _cli("info", str(p))
    assert r.returncode == 2 and "EMIT L2A MASK" in r.stderr and len(r.stderr.strip().splitlines()) == 1
