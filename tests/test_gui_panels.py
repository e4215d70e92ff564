"""The analysis panels, driven through the window (pytest-qt, offscreen)."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")  # (before pyqtgraph: a machine without Qt, the GPU host, skips the module)
import pyqtgraph as pg  # noqa: E402


@pytest.fixture
def win(win, land_hdr):
    assert win.open_cube(land_hdr)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    return win


def test_panels_are_tools_of_one_toolbox_with_human_labels(win):
    titles = {"k-means", "Band reduction", "SOM", "Gaussian mixture", "Forest classification",
              "Hierarchical clustering"}
    assert set(win.panels) == titles
    assert set(win.toolbox.titles()) == titles | {"Detect targets", "Spectral library"}
    # in front at the start: the detector on the right, the spectrum at the bottom
    assert win.toolbox.current() == "Detect targets"
    assert not win.spec_dock.visibleRegion().isEmpty() and not win.tools_dock.visibleRegion().isEmpty()
    assert win.plots_dock.visibleRegion().isEmpty()
    # choosing a tool shows its form and its plots
    win.toolbox.choose("Hierarchical clustering")
    assert win.toolbox.pages.currentWidget() is win.panels["Hierarchical clustering"]
    assert win.toolbox.plots.currentWidget() is win.panels["Hierarchical clustering"].plots
    km = win.panels["k-means"]
    assert "Clusters (k or range)" in km.form.labels() and "k" not in km.form.labels()
    # detector forms read as words too
    win.detector.set_method("rbfn")
    labels = win.detector.param_form.labels()
    assert "Neurons" in labels and "n_hidden" not in labels and "width_scale" not in labels
    # the View menu reopens a closed dock
    view = next(a.menu() for a in win.menuBar().actions() if a.text() == "&View")
    assert any(a.text() == "Tools" for a in view.actions())


def test_kmeans_panel_runs_off_the_ui_thread(qtbot, win):
    km = win.panels["k-means"]
    km.form.set_values({"k": "2..6"})
    km.sample.setValue(3000)
    # its cost up front, as the mixture's and the tree's (k = 10,000 ran 269 s with nothing said)
    assert "k = 2..6 (5 fits)" in km.cost.text()
    km.form.set_values({"k": "1000"})
    km.form.changed.emit()
    assert "leaves about 3.0 spectra a cluster" in km.cost.text()
    km.form.set_values({"k": "2..6"})
    with qtbot.waitSignal(km.finished, timeout=120000) as blocker:
        w = km.run()
        assert w is not None and not km.run_button.isEnabled()  # the UI thread returned at once
    res = blocker.args[0]
    assert res is not None and res.labels.shape == (128, 128)
    k = res.model.chosen_k_
    assert len(km.inertia_curve.getData()[0]) == 5
    # the inertia in the spectra's units (reflectance², the land header's scale 10000 squared)
    y = km.inertia_curve.getData()[1]
    p = {"": 0, "(x 10^3)": 3, "(x 10^6)": 6}[km.inertia_plot.getAxis("left").labelText.replace("inertia", "").strip()]
    np.testing.assert_allclose(y * 10.0**p, np.asarray(res.model.inertia_) / 1e8, rtol=1e-6)
    assert "(reflectance, squared;" in km.inertia_plot.plotItem.titleLabel.text
    assert len(km.spectrum_items) == k
    assert "chosen k" in km.quality_plot.plotItem.titleLabel.text
    assert win.view.overlay.image is not None and win.view.overlay.image.shape == (128, 128, 4)
    qtbot.waitUntil(lambda: km.run_button.isEnabled(), timeout=5000)


def test_kmeans_panel_cancel_and_bad_input(qtbot, win):
    km = win.panels["k-means"]
    km.set_source("roi", 1)  # no ROI marked: a clear error, no crash
    with qtbot.waitSignal(km.finished, timeout=30000) as blocker:
        km.run()
    assert blocker.args == [None] and "ROI" in win.last_error
    km.set_source("image")
    km.form.set_values({"k": "2..16", "max_iter": 10000, "tol": 0.0})
    with qtbot.waitSignal(km.finished, timeout=60000) as blocker:
        km.run(confirmed=True)  # (estimated above a minute: Run asks first, test_long_run_asks_first)
        km.cancel()
    assert blocker.args == [None] and km.status.text() == "k-means (one k or a range) cancelled"
    assert km.progress.value() == 0 and km.run_button.isEnabled()


def test_band_panel_feeds_the_detectors(qtbot, win, land_hdr):
    from hyperapp.io import read_labels

    # no more bands kept, or per subset, than the cube's 64 (the boxes took up to 1024, then refused)
    bp0 = win.panels["Band reduction"]
    bp0.set_method("band-clusters")
    box = bp0.form.editors["n_clusters"]
    assert box.maximum() == 64 and "Allowed: from 1 to 64" in box.toolTip()

    clicks = read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    bp = win.panels["Band reduction"]
    bp.set_method("band-subsets")
    bp.form.set_values({"n_subsets": 40})
    bp.sample.setValue(2000)
    with qtbot.waitSignal(bp.finished, timeout=120000) as blocker:
        bp.run()
    res = blocker.args[0]
    assert res is not None and bp.table.rowCount() == 20
    tied = int(np.count_nonzero(res.model.scores_ >= res.model.best_scores_[0]))
    assert (f"{tied} subsets tie at the best score" in bp.status.text()) == (tied > 1)
    best = bp.selected_bands()
    assert len(best) == 3 and len(bp.band_items) == 4  # mean spectrum + three band markers
    assert win.legend.title.startswith("Subset 1 codes, bands ")
    # the map follows the chosen row: the codes of subset 3, named on the legend (it stayed the best one's)
    before = res.labels.copy()
    bp.table.selectRow(2)
    qtbot.waitUntil(lambda: bp.relabel_worker is None and getattr(res, "shown_rank", 0) == 2, timeout=60000)
    want = np.asarray(res.model.predict(win.session.cube.to_float32(), rank=2))
    np.testing.assert_array_equal(res.labels, want)
    assert not np.array_equal(before, want) and win.legend.title.startswith("Subset 3 codes, bands ")
    bp.table.selectRow(0)
    qtbot.waitUntil(lambda: bp.relabel_worker is None and res.shown_rank == 0, timeout=60000)
    np.testing.assert_array_equal(res.labels, before)
    bp.use_selected()
    assert win.session.cube.bands == 3 and "3 of 64 bands" in win.windowTitle()
    win.detector.set_method("sam")
    with qtbot.waitSignal(win.run_finished, timeout=60000) as blocker:
        win.run_detector()
    assert blocker.args[0].result.report["shape"][2] == 3
    bp.all_button.click()
    assert win.session.cube.bands == 64
    # band clustering keeps one band per cluster; it draws no map, so the band subsets' map goes
    bp.show_labels(res)
    assert win.shown == "Band reduction" and win.legend.entries()
    bp.set_method("band-clusters")
    bp.form.set_values({"n_clusters": 5})
    with qtbot.waitSignal(bp.finished, timeout=60000) as blocker:
        bp.run()
    assert len(bp.selected_bands()) == 5
    assert win.shown == "detection" and not win.legend.isVisibleTo(win) and bp.table.isColumnHidden(1)
    assert "classes shown" not in win.statusBar().currentMessage()


def test_som_panel(qtbot, win):
    som = win.panels["SOM"]
    som.form.set_values({"rows": 8, "cols": 7, "epochs": 4})
    som.sample.setValue(3000)
    with qtbot.waitSignal(som.finished, timeout=120000) as blocker:
        som.run()
    res = blocker.args[0]
    assert res is not None, win.last_error
    assert som.umat_img.image.shape == (8, 7) and som.hits_img.image.sum() == 3000
    assert len(som.qe_curve.getData()[0]) == 4
    som.band.setValue(10)
    np.testing.assert_allclose(som.plane_img.image, np.asarray(res.model.codebook_)[:, 10].reshape(8, 7) / 10000.0,
                               rtol=1e-5)
    som.show_neuron(9)
    # on the Spectrum dock's reflectance scale (the land header's scale factor 10000), wavelengths on x
    np.testing.assert_allclose(som.neuron_curve.getData()[1], np.asarray(res.model.codebook_)[9] / 10000.0, rtol=1e-5)
    assert som.neuron_plot.getAxis("left").labelText == "reflectance"
    assert res.labels.max() < 56
    # the codebook clusters outlined on the U-matrix and the hit map in their colours on the image
    from hyperapp.io.writers import class_colour

    k = int(np.max(res.model.cluster_of_unit_)) + 1
    on_umat = [it for plot, it in som._cluster_lines if plot is som.umat_plot]
    assert {it.opts["pen"].color().getRgb()[:3] for it in on_umat} == {class_colour(j) for j in range(k)}
    # the three maps side by side, each a grid of square neurons filling its plot, axes counting neurons
    som.tabs.setCurrentWidget(som.maps)
    qtbot.wait(50)
    for plot, img in ((som.umat_plot, som.umat_img), (som.hits_plot, som.hits_img), (som.plane_plot, som.plane_img)):
        assert img.image.shape == (8, 7)
        vb = plot.getPlotItem().vb
        assert vb.state["aspectLocked"] == 1.0 and plot.isVisible()
        (x0, x1), (y0, y1) = vb.viewRange()
        # the plot is sized to the image: its axes span the neurons, not a wide margin of nothing
        assert x0 <= 0.01 and x1 >= 6.99 and y0 <= 0.01 and y1 >= 7.99
        assert min(7 / (x1 - x0), 8 / (y1 - y0)) > 0.9
        img_px = vb.mapViewToScene(pg.QtCore.QPointF(7, 8)) - vb.mapViewToScene(pg.QtCore.QPointF(0, 0))
        assert img_px.y() > 0.8 * vb.height() or img_px.x() > 0.8 * vb.width()  # fills the plot's height or width
        assert abs(img_px.x() / 7 - img_px.y() / 8) < 0.5  # square neurons
        assert plot.getAxis("bottom").labelText == "neuron column" and plot.getAxis("left").labelText == "neuron row"
    ticks = som.umat_plot.getAxis("left")._tickLevels[0]
    assert [t for t in ticks] == [(i + 0.5, str(i)) for i in range(0, 8, 2)]  # neuron rows at their centres
    # the image's legend says its colours are clusters of the codebook, not clusters of pixels
    names = win.legend.entries()
    assert names and all(n.startswith("codebook cluster ") for n in names)
    assert "codebook" in win.legend.toolTip() and "best-matching neuron" in win.legend.item(1).toolTip()


def test_gmm_panel_with_cancel(qtbot, win):
    gp = win.panels["Gaussian mixture"]
    gp.form.set_values({"k": "2..4", "covariance": "diag"})
    gp.sample.setValue(3000)
    with qtbot.waitSignal(gp.finished, timeout=120000) as blocker:
        gp.run()
    res = blocker.args[0]
    assert res is not None, win.last_error
    assert len(gp.bic_curve.getData()[0]) == 3 and len(gp.mean_items) == res.model.chosen_k_
    assert gp.chosen_line.isVisible() and gp.chosen_line.value() == res.model.chosen_k_  # dashed at the chosen k
    # a k at the top of the range says a larger one may be better
    assert ("largest tried" in gp.bic_plot.plotItem.titleLabel.text) == (res.model.chosen_k_ == 4)
    assert res.extra.shape == (128, 128, res.model.chosen_k_)
    gp.component.setValue(1)
    assert gp.post_img.image.shape == (128, 128) and 0 <= gp.post_img.image.min() <= gp.post_img.image.max() <= 1
    # the posterior map is sized to the scene (axes 0..128, not -400..600 in a wide plot), its
    # component's mean spectrum beside it
    gp.tabs.setCurrentIndex(gp.tabs.count() - 1)
    qtbot.wait(50)
    (x0, x1), (y0, y1) = gp.post_plot.getPlotItem().vb.viewRange()
    assert -1 <= x0 and x1 <= 141 and -1 <= y0 and y1 <= 141 and gp.post_plot.isVisible()
    np.testing.assert_allclose(gp.post_curve.getData()[1], np.asarray(res.model.means_[1]) / 10000.0, rtol=1e-5)
    assert gp.stale.text() == ""
    gp.form.set_values({"k": "2..12", "covariance": "full", "max_iter": 10000, "tol": 0.0})
    gp.set_source("image")
    assert "last run" in gp.stale.text()  # the plots are not of the form's options: said beside their tabs
    with qtbot.waitSignal(gp.finished, timeout=60000) as blocker:
        gp.run(confirmed=True)
        gp.cancel()
    assert blocker.args == [None]
    assert gp.status.text() == "Gaussian mixture (EM) cancelled; the plots still show the last finished run"
    assert "last run" in gp.stale.text() and gp.result is res
    gp.form.set_values({"k": "2..4", "covariance": "diag", "max_iter": 100, "tol": 0.001})
    gp.set_source("sample")
    assert gp.stale.text() == ""  # the form is back at the shown run's options


def _three_classes(win):
    """Target, background and a user class 'road' marked as blocks of the land scene."""
    panel = win.panels["Forest classification"]
    k = panel.add_class("road")
    assert k == 3 and win.roi_class == 3
    lab = np.zeros((128, 128), np.uint8)
    lab[5:15, 5:25] = 1
    lab[40:60, 40:60] = 2
    lab[100:110, 80:120] = 3
    win.session.roi.set_labels(lab)
    return panel


def test_forest_panel_trains_on_named_classes(qtbot, win, tmp_path):
    panel = _three_classes(win)
    assert panel.class_table.rowCount() == 3 and panel.class_table.item(2, 1).text() == "road"
    assert panel.class_table.item(2, 2).text() == "400"
    panel.set_method("forest")
    assert panel.source.currentText() == "All ROIs"
    assert not panel.sample.isEnabled()  # the sample size counts only for a random sample
    panel.set_source("sample")
    assert panel.sample.isEnabled()
    panel.set_source("rois")
    panel.form.set_values({"n_trees": 10, "max_depth": 8})
    with qtbot.waitSignal(panel.finished, timeout=120000) as blocker:
        assert panel.run() is not None
    res = blocker.args[0]
    assert res is not None and res.labels.shape == (128, 128)
    assert set(np.unique(res.labels)) <= {1, 2, 3}
    assert panel.confusion.rowCount() == 3 and panel.confusion.verticalHeaderItem(2).text() == "true road"
    assert panel.confusion.horizontalHeaderItem(2).text() == "predicted road"
    fm = panel.confusion.horizontalHeader().fontMetrics()
    for j in range(3):  # every header whole
        assert panel.confusion.columnWidth(j) >= fm.horizontalAdvance(panel.confusion.horizontalHeaderItem(j).text())
    assert "held-out accuracy" in panel.accuracy.text()
    assert len(panel.importance_bars.opts["height"]) == win.session.cube.bands
    # a short title, naming only bands that split (a long one widened the plot past the dock at 1366 x 768)
    title = panel.importance_plot.getPlotItem().titleLabel.text
    assert len(res.report["results"]["top_bands"]) <= 10 and title.count(",") <= 2 and len(title) < 120
    assert "deepest" in panel.accuracy.text() and "leaves in all" in panel.accuracy.text()
    # the overlay draws the classes in their colours
    over = win.view.overlay.image
    road = res.labels == 3
    assert road.any() and tuple(over[road][0, :3]) == win.session.roi.classes[2][1]
    for fmt, ext in (("envi", ".hdr"), ("png", ".png"), ("tiff", ".tif")):
        out = panel.export_class_map(str(tmp_path / "classes"), fmt)
        assert out.suffix == ext and out.is_file()
    assert "road" in (tmp_path / "classes.hdr").read_text()


def test_forest_panel_needs_two_classes(qtbot, win):
    panel = win.panels["Forest classification"]
    lab = np.zeros((128, 128), np.uint8)
    lab[5:15, 5:25] = 1
    win.session.roi.set_labels(lab)
    with qtbot.waitSignal(panel.finished, timeout=30000) as blocker:
        panel.run()
    assert blocker.args == [None] and "two or more" in win.last_error


def test_hac_panel_dendrogram_and_cut(qtbot, win):
    _three_classes(win)
    panel = win.panels["Hierarchical clustering"]
    panel.set_source("rois")
    panel.form.set_values({"n_clusters": 4, "linkage": "average"})
    with qtbot.waitSignal(panel.finished, timeout=120000) as blocker:
        panel.run()
    res = blocker.args[0]
    assert res is not None and res.model.linkage_.shape == (999, 4)
    assert panel.lines and panel.cut_line.isVisible() and panel.n_clusters.value() == 4
    assert len(panel.mean_items) == 4
    # merge distances in the Spectrum dock's units (reflectance: the stored values / 10000), labelled so
    axis = panel.dendro.getAxis("left").labelText
    assert axis == "merge distance<br>(reflectance)" and "average linkage" in panel.dendro.getPlotItem().titleLabel.text
    y = panel.lines[0].getData()[1]
    assert np.nanmax(y) == pytest.approx(res.model.linkage_[:, 2].max() / 10000.0)
    # the branches below the cut in their cluster's map colour, those above grey (a cluster whose merges
    # fall below the drawn ones, or of one spectrum, has none drawn)
    from hyperapp.io.writers import class_colour

    pens = {it.opts["pen"].color().getRgb()[:3] for it in panel.lines}
    assert (200, 200, 200) in pens and len(pens) >= 3
    assert pens <= {(200, 200, 200)} | {class_colour(j) for j in range(4)}
    h = res.model.linkage_[:, 2]
    assert h[995] / 1e4 < panel.cut_line.value() < h[996] / 1e4  # the line between the 4- and 3-cluster merges
    assert f"{h[995] / 1e4:.4g}" in panel.cut_label.text() and "stored" not in panel.cut_label.text()
    # the Cut height option takes the dendrogram's scale (reflectance), named on its row; the service
    # layer gets it as stored
    assert "Cut height (reflectance; 0 = by count)" in panel.form.labels()
    mid = (h[995] + h[996]) / 2 / 1e4
    panel.form.set_values({"height": mid})
    assert panel.params()["height"] == pytest.approx(mid * 1e4)
    with qtbot.waitSignal(panel.finished, timeout=120000) as blocker:
        panel.run()
    assert blocker.args[0].model.n_clusters_ == 4
    panel.form.set_values({"height": 0.0})
    leaves = panel.dendro.getAxis("bottom")._tickLevels[0]
    assert leaves and all(t.startswith("(") and t.endswith(")") for _, t in leaves)  # spectra per leaf
    assert panel.recut(n_clusters=2) is not None  # relabels the image in a worker
    qtbot.waitUntil(lambda: panel.relabel_worker is None, timeout=60000)
    assert int(panel.result.labels.max()) == 1 and panel.n_clusters.value() == 2
    assert {it.opts["pen"].color().getRgb()[:3] for it in panel.lines} <= {(200, 200, 200), class_colour(0),
                                                                          class_colour(1)}  # recoloured
    # the form follows the cut: Run again keeps two clusters (it went back to the form's four)
    assert panel.form.values()["n_clusters"] == 2 and panel.form.values()["height"] == 0
    with qtbot.waitSignal(panel.finished, timeout=120000) as blocker:
        panel.run()
    assert blocker.args[0].model.n_clusters_ == 2
    # too many clusters: a clear error, no crash
    panel.form.set_values({"n_clusters": 5000})
    with qtbot.waitSignal(panel.finished, timeout=60000) as blocker:
        panel.run()
    assert blocker.args == [None] and "clusters asked of 1000 spectra" in win.last_error


def test_large_values_tick_short_with_the_power_on_the_label(qtbot):
    """A dendrogram of values as stored (300000) ticks 0..300 with "x 10^3" on its label's second line,
    so the ticks do not run into a two-line label, nor its first line past the plot."""
    import pyqtgraph as pg

    from hyperapp.gui.panels import scaled, tick_power

    p = pg.PlotWidget()
    qtbot.addWidget(p)
    v = scaled(p, [1.0, 3e5], "merge distance<br>(as stored)")
    assert p.getAxis("left").labelText == "merge distance<br>(as stored, x 10^3)" and v[1] == pytest.approx(300)
    # a second line that the power would make too long for a low plot: the power on a third
    scaled(p, [1.0, 3e5], "Ward merge cost<br>(as stored x size)")
    assert p.getAxis("left").labelText == "Ward merge cost<br>(as stored x size)<br>(x 10^3)"
    assert tick_power([0.5, 40.0]) == 0 and tick_power([2e7]) == 6


def _cielab(rgb) -> np.ndarray:
    """sRGB (0-255) to CIELAB (D65)."""
    c = np.asarray(rgb, float) / 255
    c = np.where(c > 0.04045, ((c + 0.055) / 1.055) ** 2.4, c / 12.92)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ c / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_class_palette_is_well_separated(win):
    """Every class map's colours come from one palette whose first eight are far apart, and far from the
    overlays' own colours (target red, truth cyan, mask green, background blue)."""
    from itertools import combinations

    from hyperapp.gui.image_view import (
        FALSE_ALARM_COLOUR,
        MASK_COLOUR,
        ROI_COLOURS,
        TRUTH_COLOUR,
        colourise_labels,
    )
    from hyperapp.io.writers import CLASS_COLOURS, class_colour

    first = [_cielab(c) for c in CLASS_COLOURS[:8]]
    assert min(np.linalg.norm(a - b) for a, b in combinations(first, 2)) >= 40
    # and far from the false alarms' magenta (cluster 0 was magenta: a newcomer read it as one)
    assert min(np.linalg.norm(c - _cielab(FALSE_ALARM_COLOUR[:3])) for c in first) >= 50
    for other in (ROI_COLOURS[1], ROI_COLOURS[2], TRUTH_COLOUR, MASK_COLOUR):
        assert min(np.linalg.norm(_cielab(c) - _cielab(other[:3])) for c in CLASS_COLOURS) >= 40
    # the maps draw from it, cluster j in colour j
    rgba = colourise_labels(np.arange(8).reshape(2, 4), 1.0)
    assert [tuple(rgba.reshape(-1, 4)[j, :3]) for j in range(8)] == [class_colour(j) for j in range(8)]
    # past the twelve chosen by hand the palette goes on, never repeating: 200 clusters, 200 colours, each
    # at least 10 (CIELAB delta E) from the others and from the overlays (it repeated every 12)
    rgba = colourise_labels(np.arange(200).reshape(10, 20), 1.0).reshape(-1, 4)[:, :3]
    lab = [_cielab(c) for c in rgba]
    assert len({tuple(c) for c in rgba}) == 200
    assert min(np.linalg.norm(a - b) for a, b in combinations(lab, 2)) >= 10
    for other in (ROI_COLOURS[1], ROI_COLOURS[2], TRUTH_COLOUR, MASK_COLOUR, FALSE_ALARM_COLOUR):
        assert min(np.linalg.norm(c - _cielab(other[:3])) for c in lab) >= 10


def test_band_labels_on_the_spectrum_do_not_share_a_row_when_close():
    """Band clustering's labels on the mean spectrum: neighbouring bands go to different rows (one row
    printed them over each other)."""
    from hyperapp.gui.panels.bands_panel import LABEL_SPAN, label_rows

    xs = [466.7, 533.3, 1033.3, 1233.3, 1500.0, 1966.7, 2066.7, 2400.0]
    rows = label_rows(xs, 2100.0)
    last: dict[float, float] = {}
    for x, r in zip(xs, rows):
        assert r not in last or x - last[r] >= LABEL_SPAN * 2100.0
        last[r] = x


def test_ward_tree_heights_are_named_as_what_they_are(monkeypatch):
    """Ward's merge heights grow with the clusters' sizes: not labelled a plain distance in reflectance
    (values up to 40 read as implausible reflectance)."""
    from types import SimpleNamespace

    from hyperapp.gui.panels import hac_panel

    monkeypatch.setattr(hac_panel, "value_unit", lambda cube: (10000.0, "reflectance"))
    fake = SimpleNamespace(host=SimpleNamespace(session=SimpleNamespace(cube=None)))
    for linkage, words in (("ward", "Ward merge cost"), ("average", "merge distance")):
        _, label = hac_panel.HACPanel.height_units(fake, SimpleNamespace(metric="euclidean", linkage=linkage))
        assert label.startswith(words) and "reflectance" in label


def test_truth_outline_runs_along_pixel_edges_and_leaves_the_pixels_visible():
    """The truth is drawn as lines between pixels, so a one-pixel target's detection stays visible."""
    from hyperapp.gui.image_view import outline_segments

    def segments(mask):
        xs, ys = outline_segments(np.asarray(mask, bool))
        return sorted({tuple(sorted(((xs[i], ys[i]), (xs[i + 1], ys[i + 1])))) for i in range(0, len(xs), 2)})

    assert len(outline_segments(np.zeros((4, 5), bool))[0]) == 0
    one = np.zeros((3, 4), bool)
    one[1, 2] = True  # pixel (row 1, col 2) spans x 2..3, y 1..2: the four sides of that square
    assert segments(one) == [((2.0, 1.0), (2.0, 2.0)), ((2.0, 1.0), (3.0, 1.0)), ((2.0, 2.0), (3.0, 2.0)),
                             ((3.0, 1.0), (3.0, 2.0))]
    # two pixels side by side: six outer edges, none between them; a region at the image's edge closes there
    two = np.zeros((2, 3), bool)
    two[0, 0:2] = True
    got = segments(two)
    assert len(got) == 6 and ((1.0, 0.0), (1.0, 1.0)) not in got and ((0.0, 0.0), (1.0, 0.0)) in got
    # classes side by side (ROIs): each outlined once in one pass, their shared edge drawn once
    from hyperapp.gui.image_view import class_outlines

    out = class_outlines(np.array([[1, 2, 0]]))
    assert sorted(out) == [1, 2] and len(out[1][0]) == 2 * 3 and len(out[2][0]) == 2 * 4
    assert class_outlines(np.zeros((3, 3), int)) == {}


def test_run_while_the_last_cubes_run_stops_says_so(win):
    """A cube opened while a run went on cancels it; until it stops (a fit ends its step), Run did nothing
    for seconds, without a word: it says the last cube's run is still stopping."""
    from types import SimpleNamespace

    stopping = SimpleNamespace(session=object(), cancel=lambda: None)
    km = win.panels["k-means"]
    km.worker = stopping
    assert km.run() is stopping and "still stopping" in km.status.text()
    km.worker = None
    win.worker = stopping
    win.run_detector()
    assert "the run on the last cube is still stopping" in win.detector.status.text()
    win.worker = None


def test_cost_lines_say_seconds_and_a_long_run_asks_first(qtbot, win):
    """Every analysis tool's cost line gives its run's time on this machine once shown (measured by small
    timed fits in a worker thread); a run estimated above a minute asks first, and its Run starts it."""
    from PySide6.QtWidgets import QMessageBox

    from hyperapp.analyse import cost

    for title, panel in win.panels.items():
        assert hasattr(panel, "cost") and panel.cost.text().startswith("Cost: "), title
    km = win.panels["k-means"]
    km.form.set_values({"k": "2..6"})
    km.sample.setValue(1000)
    win.toolbox.choose("k-means")
    qtbot.waitUntil(lambda: "estimated time" in km.cost.text(), timeout=60000)
    est = km.estimate(calibrate=False)
    assert est is not None and f"estimated time {est.words()} on the CPU" in km.cost.text()
    # the first-time walk's k = 2..1000 on the whole image (it ran more than 10 minutes, saying nothing)
    km.set_source("image")
    km.form.set_values({"k": "2..1000"})
    km.form.changed.emit()
    big = km.estimate(calibrate=False)
    assert big.longest > cost.ASK_ABOVE and big.words() in km.cost.text()
    assert km.run() is None and km.worker is None  # nothing started: it asks
    box = km.confirm_box
    assert box.isVisible() and big.words() in box.text()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert km.worker is None and km.confirm_box is None
    assert km.run() is None
    with qtbot.waitSignal(km.finished, timeout=60000) as blocker:
        run = next(b for b in km.confirm_box.buttons() if b.text() == "Run")
        run.click()
        assert km.worker is not None
        km.cancel()
    assert blocker.args == [None]
    # a k above the spectra is refused at once, not asked about (the walk's 2..100000 asked "84398.1 h: Run it?")
    errors = []
    win.show_error = errors.append
    n = km.cost_spectra()
    km.form.set_values({"k": f"2..{n + 1}"})
    km.form.changed.emit()
    assert km.run() is None and km.worker is None and km.confirm_box is None
    assert errors == [f"k = {n + 1} is larger than the number of spectra ({n}): choose a k of {n} or less"]
    del win.show_error
