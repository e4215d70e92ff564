"""The window on a located cube: longitude/latitude under the cursor and in the object table."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")

UTM = ["UTM", "1.000", "1.000", "500000.0", "4100000.0", "30.0", "30.0", "11", "North", "WGS-84", "units=Meters"]


def _utm_cube(tmp_path):
    import spectral.io.envi as envi

    rng = np.random.default_rng(0)
    data = (0.3 + 0.02 * rng.standard_normal((40, 50, 16))).astype(np.float32)
    target = np.linspace(0.9, 0.1, 16, dtype=np.float32)
    for r, c in ((5, 6), (20, 30), (33, 40)):
        data[r:r + 2, c:c + 2] = target
    hdr = tmp_path / "utm.hdr"
    envi.save_image(str(hdr), data, dtype=np.float32, force=True, ext=".img", interleave="bsq",
                    metadata={"map info": "{" + ", ".join(UTM) + "}"})
    return hdr


def _truth(r, c):
    from pyproj import Transformer

    return Transformer.from_crs("EPSG:32611", "EPSG:4326", always_xy=True).transform(
        500000.0 + (c + 0.5) * 30.0, 4100000.0 - (r + 0.5) * 30.0)


def test_status_bar_and_object_table_show_lon_lat(qtbot, win, tmp_path):
    assert win.open_cube(_utm_cube(tmp_path))
    win._hover(12, 17)
    lon, lat = _truth(12, 17)
    msg = win.statusBar().currentMessage()
    assert "row 12, col 17" in msg and f"lon {lon:.6f}, lat {lat:.6f}" in msg
    # the object table gains lon/lat columns, the objects' centroids
    win.session.roi.mark_pixels(np.array([[5, 6], [5, 7], [6, 6], [6, 7]]), "target")
    win.detector.set_method("ace")
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    with qtbot.waitSignal(win.run_finished, timeout=60000):
        win.run_detector()
    win.results.set_threshold(0.5)
    win.results.tabs.setCurrentWidget(win.results.review)
    t = win.results.table
    heads = [t.horizontalHeaderItem(j).text() for j in range(t.columnCount())]
    assert heads[heads.index("pixels") + 1:heads.index("pixels") + 3] == ["lon", "lat"] and t.rowCount() >= 3
    row, col, lon_at = heads.index("centre row"), heads.index("centre col"), heads.index("lon")
    for i in range(t.rowCount()):
        r, c = float(t.item(i, row).text()), float(t.item(i, col).text())
        lon, lat = _truth(r, c)
        assert abs(float(t.item(i, lon_at).text()) - lon) < 2e-6 and abs(float(t.item(i, lon_at + 1).text()) - lat) < 2e-6
    # the review's review.csv gives them too
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(win.results.review.review.csv_text())))
    assert len(rows) == t.rowCount()
    for r in rows:
        lon, lat = _truth(float(r["centroid_row"]), float(r["centroid_col"]))
        assert abs(float(r["lon"]) - lon) < 2e-6 and abs(float(r["lat"]) - lat) < 2e-6
    # the mask as GeoTIFF: offered, and written with the cube's CRS and transform
    import rasterio

    assert win.mask_filters()["GeoTIFF (*.tif)"] == "tiff"
    out = win.export("mask", tmp_path / "mask.tif", "tiff")
    assert "georeferenced: WGS 84 / UTM zone 11N" in win.statusBar().currentMessage()
    with rasterio.open(out) as src:
        assert src.crs.to_epsg() == 32611 and src.transform.to_gdal() == (500000.0, 30.0, 0.0, 4100000.0, 0.0, -30.0)
        assert src.read(1).sum() == win.current_mask().sum() > 0


def test_no_location_no_lon_lat(win, land_hdr):
    assert win.open_cube(land_hdr)
    win._hover(5, 7)
    assert "lon" not in win.statusBar().currentMessage()
    assert win.results.geo is None and "GeoTIFF (*.tif)" not in win.mask_filters()


def test_orthorectify_an_emit_swath_in_the_window(qtbot, win, tmp_path):
    from .product_files import write_emit

    path, truth = write_emit(tmp_path)
    assert win.open_cube(path)
    assert win.ortho_action.isEnabled()
    win._hover(12, 30)
    lon, lat = truth["lonlat"](12, 30)
    assert f"lon {lon:.6f}, lat {lat:.6f}" in win.statusBar().currentMessage()
    rows, cols = win.session.cube.rows, win.session.cube.cols
    win.ortho_action.trigger()  # from the menu, as a person does (its `checked` once reached `then`)
    assert "orthorectifying" in win.detector.status.text()  # a worker thread: the window stays live
    qtbot.waitUntil(lambda: win.session.ortho, timeout=20000)
    cube = win.session.cube
    assert (cube.rows, cube.cols) == (rows + 2, cols + 2) and "orthorectified" in cube.name
    assert win.view.base.image.shape[:2] == (rows + 2, cols + 2)
    win._hover(13, 31)  # the grid cell of swath pixel (12, 30): the same place
    assert f"lon {lon:.6f}, lat {lat:.6f}" in win.statusBar().currentMessage()
    assert not win.ortho_action.isEnabled()  # (a map grid now)
    # a project saved on the grid reopens on the grid, its marks where they were
    win.session.roi.mark_pixels(np.array([[13, 31]]), "target")
    assert win.save_project(tmp_path / "p.json")
    assert win.open_project(tmp_path / "p.json")
    assert win.session.ortho and win.session.cube.rows == rows + 2 and win.session.roi.targets[13, 31]
    # bad bands kept or not: still on the grid
    win.keep_bad_bands.setChecked(True)
    qtbot.waitUntil(lambda: win.session.ortho and win.session.all_bands, timeout=20000)
    assert win.session.ortho and win.session.cube.rows == rows + 2 and win.session.roi.targets[13, 31]
    from hyperapp.core.errors import InputError

    with pytest.raises(InputError, match="orthorectified"):
        win.session.save_batch_job(tmp_path / "job.toml")


def test_orthorectifying_can_be_cancelled_and_leaves_the_swath(qtbot, win, tmp_path):
    """The orthorectification runs in a worker (a real swath is gigabytes): Cancel stops it between blocks
    and the swath stays open, its marks kept."""
    from .product_files import write_emit

    path, _ = write_emit(tmp_path)
    assert win.open_cube(path)
    swath = win.session
    swath.roi.mark_pixels(np.array([[12, 30]]), "target")
    import hyperapp.io.georef as georef

    real = georef.ortho_cube
    seen = []

    def cancelled_at_once(cube, progress, **kw):  # as the Cancel button does (its thread-safe part), at once
        seen.append(win.worker)
        win.worker.cancel()
        return real(cube, progress=progress, **kw)

    georef.ortho_cube = cancelled_at_once
    try:
        assert win.orthorectify()
        qtbot.waitUntil(lambda: win.worker is None, timeout=20000)
    finally:
        georef.ortho_cube = real
    started = seen and "orthorectification run cancelled" in win.detector.status.text()
    assert started and win.session is swath and not win.session.ortho and win.session.roi.targets[12, 30]


def test_no_ortho_without_glt(win, tmp_path):
    assert win.open_cube(_utm_cube(tmp_path))
    assert not win.ortho_action.isEnabled()


def test_spectrum_lines_break_across_dropped_bad_bands(win, tmp_path):
    """A product opened without its bad bands leaves a gap in wavelength: the spectrum's line breaks there
    (a straight line across it read as data), and the value axis says what the product's values are."""
    from .product_files import write_emit

    path, truth = write_emit(tmp_path)
    assert win.open_cube(path)
    cube = win.session.cube
    assert truth["bad"].any() and cube.bands < truth["bad"].size  # the bad bands were left out
    connect = win.spectrum.connect
    assert isinstance(connect, np.ndarray) and connect.size == cube.bands
    wl = np.asarray(cube.wavelengths, float)
    gaps = np.flatnonzero(~connect[:-1])
    assert gaps.size >= 1 and np.all(np.diff(wl)[gaps] > 2 * np.median(np.diff(wl)))
    assert win.spectrum.getAxis("left").labelText == (cube.value_units or "value (as stored)")


def test_runs_one_after_another_on_a_georeferenced_product(qtbot, win, tmp_path):
    """Each run describes the cube's place on Earth (pyproj) on its worker thread: on Qt's pooled threads
    pyproj 3.7 crashed the window on the second run (a segmentation fault); workers are Python threads."""
    from .product_files import write_emit

    path, _ = write_emit(tmp_path)
    assert win.open_cube(path)
    win.session.roi.mark_pixels(np.array([[5, 7], [12, 30]]), "target")
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    for i, method in enumerate(("ace", "rbfn", "ace", "sam")):
        win.detector.set_method(method)
        with qtbot.waitSignal(win.run_finished, timeout=60000):
            win.run_detector()
        assert len(win.session.runs) == i + 1 and win.session.runs[-1].request.method == method
