"""Each sensor product opened in the window as File > Open does (issue 50): the Spectrum dock's axes in
wavelength and in the product's units, the bands left out shown as breaks, the place under the cursor, what
the product is; and nothing of one product left when the next opens."""

import re

import numpy as np
import pytest

pytest.importorskip("pytestqt")
# (by its message: a category named by its import path would import rasterio to resolve it, and a host without
# rasterio then stops the whole session, not just these tests)
pytestmark = pytest.mark.filterwarnings("ignore:Dataset has no geotransform")

from . import product_files as pf  # noqa: E402
from .gui_actions import move_mouse_to_pixel, open_from_menu  # noqa: E402

#: name -> (writer, its keywords, words the window must name the product by, the value axis's label or None)
PRODUCTS = {
    "emit-l2a": (pf.write_emit, {}, "EMIT L2A", "reflectance (0-1)"),
    "emit-l1b": (pf.write_emit, {"level": "L1B"}, "EMIT L1B", "radiance (uW/cm^2/SR/nm)"),
    "prisma-l2d": (pf.write_prisma, {}, "PRISMA L2D", "reflectance (0-1)"),
    "prisma-l1": (pf.write_prisma, {"level": "L1"}, "PRISMA L1", "radiance (W m-2 sr-1 um-1)"),
    "enmap-l2a": (pf.write_enmap, {}, "EnMAP L2A", "reflectance (0-1)"),
    "enmap-l1b": (pf.write_enmap, {"level": "L1B"}, "EnMAP L1B", "radiance (GainOfBand units)"),
    "aviris-nc": (pf.write_aviris_nc, {}, "AVIRIS", "reflectance (0-1)"),
    "tanager": (pf.write_tanager, {}, "Tanager", "reflectance (0-1)"),
    "desis": (pf.write_desis, {}, "DESIS", "reflectance (0-1)"),
    "geotiff": (pf.write_geotiff, {}, "GeoTIFF", None),
}
PIXEL = (12, 30)


def _lonlat_said(text: str) -> tuple[float, float]:
    m = re.search(r"lon (-?[\d.]+), lat (-?[\d.]+)", text)
    assert m, text
    return float(m.group(1)), float(m.group(2))


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_each_product_opens_with_its_wavelengths_units_place_and_name(qtbot, win, tmp_path, name):
    write, kw, words, ylabel = PRODUCTS[name]
    path, truth = write(tmp_path, **kw)
    win.resize(1366, 768)
    open_from_menu(win, path)
    assert win.session is not None, win.last_error
    cube = win.session.base_cube
    r, c = PIXEL
    move_mouse_to_pixel(win.view, r, c)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith(f"row {r}, col {c}"), timeout=3000)
    sp = win.spectrum
    # x: the product's wavelengths (the good bands, ascending), in nm; the cursor's spectrum drawn on them
    assert sp.getAxis("bottom").labelText == "wavelength (nm)"  # "nanometers" in a header too (DESIS)
    good = truth["wavelengths"][~truth["bad"]]
    np.testing.assert_allclose(sp.x, good, atol=1e-3)
    xs, ys = sp.cursor_curve.getData()
    np.testing.assert_allclose(xs, good, atol=1e-3)
    want = (truth["reflectance"] * truth.get("scale", 1.0))[r, c][~truth["bad"]]
    np.testing.assert_allclose(ys, want, rtol=1e-4, atol=1e-4)
    # y: what the values are, said alike on the axis and in the status line's mean
    label = sp.getAxis("left").labelText
    assert label == (ylabel or "value (as stored)")
    msg = win.statusBar().currentMessage()
    assert f"mean {label} " in msg
    # the place under the cursor: the file's truth for that pixel (PRISMA's float32 arrays: 1e-6 degrees)
    lon, lat = _lonlat_said(msg)
    tl, ta = truth["lonlat"](r, c)
    assert abs(lon - float(tl)) < 2e-6 and abs(lat - float(ta)) < 2e-6
    # what the product is, where the window shows it (the status bar's right, the title)
    assert words in win.cube_info.text() and words in win.windowTitle()
    assert re.search(rf"\b{cube.bands} (of \d+ )?bands", win.cube_info.text())
    if truth["bad"].any():
        assert f"{int(truth['bad'].sum())} bad, File > Keep bad bands" in win.cube_info.text()
    if "dropped" in truth:  # the overlap's copies, counted too: the line's bands add up to the file's
        assert f"{cube.bands} of " in win.cube_info.text()
        assert f"{sum(truth['dropped'])} overlap copies" in win.cube_info.text()
    # the cube's line never takes the cursor's room (a long one cut the latitude off at 1366 x 768)
    assert win.cube_info.maximumWidth() <= 0.45 * win.width() + 1


def _breaks(win) -> np.ndarray:
    """Indices of the bands after which the Spectrum dock's line stops."""
    connect = win.spectrum.connect
    return np.zeros(0, int) if isinstance(connect, str) else np.flatnonzero(~np.asarray(connect)[:-1])


@pytest.mark.parametrize("name", ["prisma-l2d", "enmap-l2a", "enmap-l1b", "tanager"])
def test_spectrum_breaks_exactly_where_bad_bands_were_left_out(win, tmp_path, name):
    """A single bad band left out doubles a step of wavelength, which the old rule (a step wider than 2.5
    median steps) drew across as data: PRISMA's 1399 nm band, EnMAP's bands 5 and 35."""
    write, kw, _, _ = PRODUCTS[name]
    path, truth = write(tmp_path, **kw)
    assert win.open_cube(path)
    bad = truth["bad"]
    kept = np.flatnonzero(~bad)
    # a break after kept band i where a bad band lies between it and the next kept one
    want = [i for i in range(kept.size - 1) if kept[i + 1] - kept[i] > 1]
    assert want, "the product must leave out a band inside its range"
    np.testing.assert_array_equal(_breaks(win), want)
    # with the bad bands kept the line runs through them (no band is left out)
    win.keep_bad_bands.setChecked(True)
    assert win.session.base_cube.bands == bad.size
    assert _breaks(win).size == 0 and " bad, " not in win.cube_info.text()


def test_orthorectified_swath_keeps_its_breaks(qtbot, win, tmp_path):
    """The grid's cube holds the swath's good bands in memory and no longer knows which were left out:
    its spectrum breaks where the swath's did (one bad band at 1381 nm, a step of 2x the others)."""
    wl = np.linspace(381.0, 2493.0, 20)
    path, truth = pf.write_emit(tmp_path, wl=wl)
    assert win.open_cube(path)
    before = _breaks(win)
    kept = np.flatnonzero(~truth["bad"])
    assert before.tolist() == [i for i in range(kept.size - 1) if kept[i + 1] - kept[i] > 1]
    assert win.orthorectify()  # (a worker thread)
    qtbot.waitUntil(lambda: win.session.ortho, timeout=20000)
    np.testing.assert_array_equal(_breaks(win), before)
    assert "orthorectified (GLT)" in win.cube_info.text() and "bad, File > Keep bad bands" in win.cube_info.text()


def test_next_product_shows_nothing_of_the_last(qtbot, win, tmp_path):
    """EMIT L1B (radiance, 381-2493 nm, a map grid) hovered and a spectrum pinned, then PRISMA L2D opened
    from the menu: before any hover the plot holds no curve of EMIT's, its axes are PRISMA's (reflectance on
    PRISMA's range, not EMIT's 1-4 radiance), the status bar names PRISMA; a hover gives PRISMA's place."""
    (tmp_path / "e").mkdir()
    (tmp_path / "p").mkdir()
    emit, _ = pf.write_emit(tmp_path / "e", level="L1B")
    prisma, truth = pf.write_prisma(tmp_path / "p")
    open_from_menu(win, emit)
    move_mouse_to_pixel(win.view, 5, 5)
    win.pin_spectrum()
    assert win.spectrum.pins
    open_from_menu(win, prisma)
    sp = win.spectrum
    assert sp.cursor_curve.getData()[0] is None or len(sp.cursor_curve.getData()[0]) == 0
    assert not sp.pins and win.statusBar().currentMessage() == ""
    assert sp.getAxis("left").labelText == "reflectance (0-1)"
    lo, hi = sp.getViewBox().viewRange()[1]
    assert 0.0 <= lo < hi <= 1.0  # PRISMA's reflectance, not the radiance's range of the last cube
    assert sp.getViewBox().viewRange()[0][0] < 450 and "PRISMA L2D" in win.cube_info.text()
    assert "EMIT" not in win.windowTitle()
    move_mouse_to_pixel(win.view, 20, 15)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith("row 20, col 15"), timeout=3000)
    lon, lat = _lonlat_said(win.statusBar().currentMessage())
    tl, ta = truth["lonlat"](20, 15)
    assert abs(lon - tl) < 2e-6 and abs(lat - ta) < 2e-6


def test_project_reopened_with_a_band_subset_shows_every_band(qtbot, win, tmp_path):
    """A project saved after a band reduction reopens with the subset for runs, and the image, the band
    slider and the Spectrum dock on the cube as opened: the axis took the subset's bands while the spectra
    under the cursor came from the whole cube."""
    path, truth = pf.write_emit(tmp_path)
    assert win.open_cube(path)
    n = win.session.base_cube.bands
    win.use_bands([0, 5, 10, 20])
    assert win.save_project(tmp_path / "p.hyperapp.json")
    assert win.open_project(tmp_path / "p.hyperapp.json")
    assert win.session.cube.bands == 4 and win.session.base_cube.bands == n
    assert win.spectrum.x.size == n and win.band.maximum() == n - 1
    move_mouse_to_pixel(win.view, 12, 30)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith("row 12, col 30"), timeout=3000)
    xs, ys = win.spectrum.cursor_curve.getData()
    assert len(xs) == len(ys) == n


@pytest.mark.parametrize("name, axis, unit", [("emit-l1b", "radiance (uW/cm^2/SR/nm)", "radiance, uW/cm^2/SR/nm"),
                                              ("prisma-l2d", "reflectance (0-1)", "reflectance"),
                                              ("geotiff", "value (as stored)", "as stored")])
def test_panels_name_a_products_values_as_the_spectrum_does(win, tmp_path, name, axis, unit):
    """The analysis panels' value labels (:func:`value_axis`, :func:`value_unit`) are the Spectrum dock's:
    a product's radiance is not "as stored", its reflectance's "(0-1)" is a range, not a unit."""
    from hyperapp.gui.panels import value_axis, value_unit

    write, kw, _, _ = PRODUCTS[name]
    path, _ = write(tmp_path, **kw)
    assert win.open_cube(path)
    cube = win.session.cube
    assert value_axis(cube) == (1.0, axis) == (1.0, win.spectrum.getAxis("left").labelText)
    assert value_unit(cube) == (1.0, unit)
    hac = win.panels["Hierarchical clustering"]

    class Tree:
        metric, linkage = "euclidean", "average"

    assert hac.height_units(Tree()) == (1.0, f"merge distance<br>({unit})")


@pytest.mark.parametrize("name", ["emit-l2a", "enmap-l2a", "geotiff"])
def test_hovering_a_fill_pixel_draws_no_value(qtbot, win, tmp_path, capsys, name):
    """A pixel holding the fill value (EMIT's and the GeoTIFF's -9999, kept as stored) or NaN (EnMAP's,
    made NaN as it is scaled) in every band: the status line says there is no data, the plot draws nothing
    (it drew -9999 and its axis went with it; an all-NaN spectrum with breaks failed in pyqtgraph's paint)."""
    write, kw, _, _ = PRODUCTS[name]
    path, truth = write(tmp_path, **kw)
    open_from_menu(win, path)
    r, c = truth["fill"][0]
    move_mouse_to_pixel(win.view, r, c)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith(f"row {r}, col {c}"), timeout=3000)
    assert "no data at this pixel" in win.statusBar().currentMessage()
    xs, _ = win.spectrum.cursor_curve.getData()
    assert xs is None or len(xs) == 0
    win.grab()  # paint it
    lo, hi = win.spectrum.getViewBox().viewRange()[1]
    assert lo > -100 and "Ignored exception" not in capsys.readouterr().err
    # a pixel with values draws them again
    move_mouse_to_pixel(win.view, *PIXEL)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith(f"row {PIXEL[0]}, col {PIXEL[1]}"))
    assert len(win.spectrum.cursor_curve.getData()[0]) == win.session.base_cube.bands


def test_spectrum_with_some_bands_without_data(qtbot, win, tmp_path, capsys):
    """A pixel with the fill value in three bands, on a cube with a bad band left out: its line breaks around
    those bands and at the bad band, the mean is of the bands with values, and nothing fails to paint."""
    import spectral.io.envi as envi

    rng = np.random.default_rng(1)
    data = (0.2 + 0.05 * rng.random((10, 12, 20))).astype(np.float32)
    data[3, 4, 5:8] = -9999.0
    data[4, 4, :] = np.nan
    hdr = tmp_path / "gaps.hdr"
    bbl = np.ones(20, int)
    bbl[12] = 0
    envi.save_image(str(hdr), data, dtype=np.float32, force=True, ext=".img", interleave="bsq",
                    metadata={"data ignore value": -9999, "wavelength": list(np.linspace(400, 2400, 20)),
                              "wavelength units": "Nanometers", "bbl": list(bbl)})
    assert win.open_cube(hdr)
    assert win.session.base_cube.bands == 19
    move_mouse_to_pixel(win.view, 3, 4)
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith("row 3, col 4"), timeout=3000)
    kept = np.delete(data[3, 4], 12)
    ok = kept != -9999.0
    assert f"19 bands (3 without data), mean value (as stored) {kept[ok].mean():.4g}" in win.statusBar().currentMessage()
    xs, ys = win.spectrum.cursor_curve.getData()
    connect = win.spectrum.cursor_curve.opts["connect"]
    assert len(xs) == len(ys) == len(connect) == 19
    drawn = np.flatnonzero(np.asarray(connect)[:-1])  # segments i -> i + 1 drawn
    assert set(drawn) == set(range(18)) - {4, 5, 6, 7, 11}  # around bands 5-7 and across band 12 left out
    assert np.all(np.isfinite(ys[drawn])) and np.all(np.isfinite(ys[drawn + 1]))
    move_mouse_to_pixel(win.view, 4, 4)  # NaN in every band
    qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith("row 4, col 4"), timeout=3000)
    assert "no data at this pixel" in win.statusBar().currentMessage()
    win.grab()
    assert "Ignored exception" not in capsys.readouterr().err
