"""The product readers (issue 50): each product's layout, built tiny by tests/product_files.py, opens with the
right axes, ascending wavelengths, physical values, no-data, bad bands and place on Earth, with no --dataset;
the CLI's info says it and detect finds the planted targets."""

import importlib.util
import json

import numpy as np
import pytest

from hyperapp.cli import main
from hyperapp.core.geo import MapGrid, Swath, lonlat
from hyperapp.io import open_cube
from hyperapp.io.band_stack import OVERLAP_COPIES
from hyperapp.reading.tiles import iter_float_tiles, read_float32

from . import product_files as pf

# (by its message: a category named by its import path would import rasterio to resolve it, and a host without
# rasterio then stops the whole session, not just these tests)
pytestmark = pytest.mark.filterwarnings("ignore:Dataset has no geotransform")

PRODUCTS = {
    "emit-l2a": (pf.write_emit, {}, "EMIT L2A", "reflectance (0-1)"),
    "emit-l1b": (pf.write_emit, {"level": "L1B"}, "EMIT L1B", "radiance (uW/cm^2/SR/nm)"),
    "prisma-l2d": (pf.write_prisma, {}, "PRISMA L2D", "reflectance (0-1)"),
    "prisma-l1": (pf.write_prisma, {"level": "L1"}, "PRISMA L1", "radiance"),
    "tanager": (pf.write_tanager, {}, "Tanager", "reflectance (0-1)"),
    "aviris-nc": (pf.write_aviris_nc, {}, "AVIRIS", "reflectance (0-1)"),
    "enmap-l2a": (pf.write_enmap, {}, "EnMAP L2A", "reflectance (0-1)"),
    "enmap-l1b": (pf.write_enmap, {"level": "L1B"}, "EnMAP L1B", "radiance"),
    "desis": (pf.write_desis, {}, "DESIS", "reflectance (0-1)"),
    "geotiff": (pf.write_geotiff, {}, "GeoTIFF", None),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each product written once for the module: name -> (path, truth)."""
    out = {}
    for name, (write, kw, _, _) in PRODUCTS.items():
        d = tmp_path_factory.mktemp(name)
        out[name] = write(d, **kw)
    return out


def run(capsys, *args):
    code = main(["--headless", *map(str, args)])
    o = capsys.readouterr()
    return code, o.out, o.err


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_product_opens_right(built, name):
    path, truth = built[name]
    cube = open_cube(path)
    wl = truth["wavelengths"]
    assert cube.shape == (pf.ROWS, pf.COLS, wl.size)
    assert np.all(np.diff(cube.wavelengths) > 0)
    np.testing.assert_allclose(cube.wavelengths, wl, atol=1e-3)
    assert PRODUCTS[name][2] in cube.product
    if PRODUCTS[name][3] is not None:
        assert cube.value_units.startswith(PRODUCTS[name][3])
    x = read_float32(cube)  # no-data pixels NaN, as every run reads them
    good = np.isfinite(x).all(axis=2)
    for r, c in truth["fill"]:
        assert not good[r, c], (r, c)
    assert good.sum() == pf.ROWS * pf.COLS - len(truth["fill"])
    want = truth["reflectance"] * truth.get("scale", 1.0)
    np.testing.assert_allclose(x[good], want[good], rtol=1e-5, atol=1e-5)
    bad = cube.bad_bands if cube.bad_bands is not None else np.zeros(cube.bands, bool)
    np.testing.assert_array_equal(bad, truth["bad"])
    if truth["bad"].any():
        assert cube.good_bands().bands == wl.size - truth["bad"].sum()  # kept out by default, as ENVI's bbl


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_product_location_within_half_a_pixel(built, name):
    path, truth = built[name]
    cube = open_cube(path)
    assert isinstance(cube.geo, (MapGrid, Swath))
    rows, cols = np.array([0, 17, 39, 3]), np.array([0, 23, 49, 41])
    lon, lat = lonlat(cube.geo, rows, cols)
    tlon, tlat = truth["lonlat"](rows, cols)
    # half a pixel, in degrees, from the truth's own neighbours
    nlon, nlat = truth["lonlat"](rows + 1, cols + 1)
    half = 0.5 * np.minimum(np.hypot(nlon - tlon, nlat - tlat), 1.0) / np.sqrt(2)
    assert np.all(np.hypot(lon - tlon, lat - tlat) < half)
    # a window keeps its place: its first pixel is the scene's (10, 5)
    w = cube.subset(slice(10, 30), slice(5, 45, 2))
    wlon, wlat = lonlat(w.geo, [0, 3], [0, 4])
    tlon, tlat = truth["lonlat"](np.array([10, 13]), np.array([5, 13]))
    assert np.all(np.hypot(wlon - tlon, wlat - tlat) < half[:2].min())


def test_overlaps_keep_one_copy_and_say_which(built):
    for name in ("prisma-l2d", "enmap-l2a", "enmap-l1b"):
        path, truth = built[name]
        cube = open_cube(path)
        note = next(n for n in cube.notes if "overlap" in n)
        dv, ds = truth["dropped"]
        assert f"kept VNIR below {truth['cut']:g} nm" in note and f"left out {dv} VNIR and {ds} SWIR" in note
        assert len(np.unique(cube.wavelengths)) == cube.bands
        # counted where the window's status bar and info read it, and kept by a window of the cube
        assert (dv + ds, OVERLAP_COPIES) in cube.file_bands_left_out
        assert cube.subset(slice(0, 4), slice(0, 4)).good_bands().file_bands_left_out == cube.file_bands_left_out
        assert cube.describe()["file_bands_left_out"][OVERLAP_COPIES] == dv + ds


def test_prisma_leaves_unused_bands_out(built):
    cube = open_cube(built["prisma-l2d"][0])
    assert cube.wavelengths.min() > 0
    assert any("unused VNIR" in n for n in cube.notes)
    assert any(what == "unused" and n > 0 for n, what in cube.file_bands_left_out)


def test_emit_layout_is_not_misread(built):
    """Issue 50: an EMIT file (40 lines, 50 samples, 48 bands) opened as 50 x 48 with 40 "bands" and no
    wavelengths; the GLT and the ortho grid come along."""
    cube = open_cube(built["emit-l2a"][0])
    assert cube.shape == (40, 50, 48) and cube.wavelengths is not None and cube.nodata == -9999.0
    assert cube.geo.glt is not None and cube.geo.grid is not None
    gx, gy = cube.geo.glt
    tx, ty = built["emit-l2a"][1]["glt"]
    np.testing.assert_array_equal(gx[()], tx)
    np.testing.assert_array_equal(gy[()], ty)
    # the GLT's ortho pixel of swath pixel (r, c) is where lat/lon say it is
    r, c = 12, 31
    oy, ox = np.argwhere((gy[()] == r + 1) & (gx[()] == c + 1))[0]
    glon, glat = lonlat(cube.geo.grid, oy, ox)
    slon, slat = lonlat(cube.geo, r, c)
    assert abs(glon - slon) < 1e-9 and abs(glat - slat) < 1e-9


def test_streamed_tiles_equal_the_whole_read(built):
    """The scaled products read through BandStack in tiles as in one read (the streamed path)."""
    for name in ("prisma-l2d", "enmap-l1b", "desis"):
        cube = open_cube(built[name][0]).good_bands()
        whole = read_float32(cube)
        tiles = np.concatenate([t.copy() for _, _, t in iter_float_tiles(cube, np, tile_bytes=cube.cols * cube.bands * 4 * 3)])
        np.testing.assert_array_equal(np.isnan(tiles), np.isnan(whole))
        np.testing.assert_allclose(np.nan_to_num(tiles), np.nan_to_num(whole))
        # a window of some bands reads the same values as the whole read's
        sub = cube.subset(slice(7, 19), slice(3, 40, 3)).subset_bands([0, 5, 2, cube.bands - 1])
        np.testing.assert_allclose(np.nan_to_num(sub.read()),
                                   np.nan_to_num(whole[7:19, 3:40:3][:, :, [0, 5, 2, cube.bands - 1]]))


def test_desis_tiff_is_not_read_as_raw_bytes(built):
    path, _ = built["desis"]
    for given in (path, path.with_suffix(".hdr")):  # the TIFF or its header
        cube = open_cube(given)
        assert cube.interleave == "tiff" and "DESIS" in cube.product and cube.bands == 60


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_info_says_product_values_location(built, capsys, name):
    path, _ = built[name]
    code, out, err = run(capsys, "info", path)
    assert code == 0, err
    assert f"{pf.ROWS} rows x {pf.COLS} cols" in out
    assert "product: " in out and PRODUCTS[name][2] in out
    assert "values: " in out
    loc = next(line for line in out.splitlines() if line.startswith("location: "))
    assert "none" not in loc


def _targets_csv(tmp_path):
    p = tmp_path / "targets.csv"
    p.write_text("row,col\n" + "".join(f"{r},{c}\n" for r, c in pf.TARGETS[:2]))
    return p


@pytest.mark.parametrize("name,method", [("emit-l2a", "ace"), ("prisma-l2d", "ace"), ("enmap-l2a", "ace"),
                                         ("tanager", "ace"), ("aviris-nc", "ace"), ("desis", "ace"),
                                         ("geotiff", "ace"), ("enmap-l1b", "ace"), ("emit-l2a", "rbfn"),
                                         ("prisma-l2d", "rbfn")])
def test_detect_ranks_the_planted_targets_on_top(built, tmp_path, capsys, name, method):
    path, truth = built[name]
    code, out, err = run(capsys, "detect", path, "--method", method, "--targets", _targets_csv(tmp_path),
                         "--device", "cpu", "--out", tmp_path / "o")
    assert code == 0, err
    s = open_cube(tmp_path / "o/scores.hdr").read()[:, :, 0].astype(float)
    s[np.isnan(s)] = -np.inf
    for r, c in pf.TARGETS[:2]:
        s[r, c] = -np.inf  # the given ones are not ranked
    others = pf.TARGETS[2:]
    top = np.argsort(s.ravel())[::-1][: len(others)]
    assert {tuple(np.unravel_index(i, s.shape)) for i in top} == set(others)
    rep = json.loads((tmp_path / "o/report.json").read_text())
    assert PRODUCTS[name][2] in rep["product"] and "wavelength_range" in rep


# ----------------------------------------------------------------------------- generic HDF5 band axis

def _generic_h5(path, shape=(40, 48, 50)):
    import h5py

    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f.create_dataset("cube", data=rng.random(shape, dtype=np.float32))


def test_generic_hdf5_band_axis_is_said_and_settable(tmp_path, capsys):
    p = tmp_path / "g.h5"
    _generic_h5(p)
    cube = open_cube(p)
    assert any(n.startswith("WARNING") and "--band-axis" in n for n in cube.notes)
    code, out, _ = run(capsys, "info", p)
    assert code == 0 and "note: WARNING: nothing in the file says which axis" in out
    code, out, _ = run(capsys, "info", p, "--band-axis", "1")
    assert code == 0 and "40 rows x 50 cols x 48 bands" in out and "as given (--band-axis)" in out
    assert open_cube(p, band_axis=1).read()[3, 7, 5] == open_cube(p, band_axis=1).store.source[3, 5, 7]


def test_band_axis_refused_where_the_file_states_it(built, tmp_path, capsys):
    code, _, err = run(capsys, "info", built["emit-l2a"][0], "--band-axis", "0")
    assert code == 2 and "--band-axis" in err and "leave --band-axis out" in err
    code, _, err = run(capsys, "info", built["geotiff"][0], "--band-axis", "2")
    assert code == 2 and "--band-axis" in err


def test_job_band_axis(tmp_path):
    from hyperapp.batch.jobfile import load_job

    p = tmp_path / "g.h5"
    _generic_h5(p)
    (tmp_path / "t.csv").write_text("row,col\n1,1\n2,2\n")
    job = tmp_path / "job.toml"
    job.write_text(f'[inputs]\npaths = ["{p}"]\nband_axis = 1\n[[steps]]\ndetect = "sam"\n'
                   f'targets = "{tmp_path / "t.csv"}"\n[output]\nfolder = "{tmp_path / "out"}"\n')
    assert load_job(job).band_axis == 1
    job.write_text(job.read_text().replace("band_axis = 1", "band_axis = 3"))
    with pytest.raises(Exception, match="band_axis"):
        load_job(job)


def test_a_product_dataset_named_generically_says_so(built, capsys):
    """Issue 50: PRISMA with --dataset .../VNIR_Cube opened as 20 x 50 with 40 "bands", silently."""
    path, _ = built["prisma-l2d"]
    code, out, _ = run(capsys, "info", path, "--dataset", "HDFEOS/SWATHS/PRS_L2D_HCO/Data Fields/VNIR_Cube")
    assert code == 0
    assert "note: WARNING: nothing in the file says which axis" in out and "PRISMA product" in out
    code, out, _ = run(capsys, "info", path, "--dataset", "HDFEOS/SWATHS/PRS_L2D_HCO/Data Fields/VNIR_Cube",
                       "--band-axis", "1")
    assert code == 0 and "40 rows x 50 cols x 22 bands" in out


def test_enmap_opens_from_its_image_or_its_zip(built, tmp_path):
    import zipfile

    xml, truth = built["enmap-l2a"]
    tif = next(xml.parent.glob("*-SPECTRAL_IMAGE.TIF"))
    a = open_cube(tif)
    z = tmp_path / "ENMAP01-L2A.ZIP".lower()
    with zipfile.ZipFile(z, "w") as zf:
        for f in xml.parent.iterdir():
            zf.write(f, f"product/{f.name}")
    b = open_cube(z)
    np.testing.assert_array_equal(a.wavelengths, b.wavelengths)
    np.testing.assert_array_equal(read_float32(a), read_float32(b))
    assert b.bands == truth["wavelengths"].size and isinstance(b.geo, MapGrid)


def test_classic_netcdf_says_what_it_is(tmp_path, capsys):
    p = tmp_path / "old.nc"
    p.write_bytes(b"CDF\x01" + bytes(200))
    code, _, err = run(capsys, "info", p)
    assert code == 2 and "classic NetCDF" in err and "old.nc" in err


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_a_job_over_a_folder_mixing_products_runs_each_once(tmp_path, device):
    """A glob over a folder of downloads matches several files of one product (DESIS's TIFF and its
    header, EnMAP's spectral image and its METADATA.XML): each product is one input, and every product
    in the folder runs, on the CPU and the GPU, each with detections."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job

    writers = {"emit": pf.write_emit, "prisma": pf.write_prisma, "tanager": pf.write_tanager,
               "aviris": pf.write_aviris_nc}
    if importlib.util.find_spec("rasterio") is not None:  # (the GPU host's Python has no rasterio)
        writers.update(desis=pf.write_desis, enmap=pf.write_enmap)
    elif device == "cpu":
        pytest.fail("rasterio, a dependency, is missing")
    d = tmp_path / "downloads"
    made = []
    for sub, write in writers.items():
        (d / sub).mkdir(parents=True)
        made.append(write(d / sub)[0])
    (tmp_path / "t.csv").write_text("row,col\n5,7\n12,30\n")
    job = tmp_path / "job.toml"
    job.write_text(f'[inputs]\npaths = ["{d}/**/*"]\n[[steps]]\ndetect = "ace"\ntargets = "{tmp_path / "t.csv"}"\n'
                   f'[output]\nfolder = "{tmp_path / "out"}"\n')
    inputs = load_job(job).inputs
    assert len(inputs) == len(writers), inputs  # one per product, whichever of its files the glob met
    assert run_job(load_job(job), device=device) == 0
    reports = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").rglob("report.json"))]
    assert len(reports) == len(made) and {r["device"] for r in reports} == {device}
    assert all(r["detections"] > 0 for r in reports)
