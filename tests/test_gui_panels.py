"""The analysis panels, driven through the window (pytest-qt, offscreen)."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")


@pytest.fixture
def win(win, land_hdr):
    assert win.open_cube(land_hdr)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    return win


def test_panels_are_tabbed_docks_with_human_labels(win):
    from PySide6.QtWidgets import QDockWidget

    assert set(win.panels) == {"k-means", "Band reduction"}
    det = win.findChild(QDockWidget, "Detector")
    tabbed = {d.windowTitle() for d in win.tabifiedDockWidgets(det)}
    assert {"k-means", "Band reduction"} <= tabbed
    km = win.panels["k-means"]
    assert "Clusters (k or range)" in km.form.labels() and "k" not in km.form.labels()
    # detector forms read as words too
    win.detector.set_method("rbfn")
    labels = win.detector.param_form.labels()
    assert "Neurons" in labels and "n_hidden" not in labels and "width_scale" not in labels
    # the View menu reopens a closed dock
    view = next(a.menu() for a in win.menuBar().actions() if a.text() == "&View")
    assert any(a.text() == "k-means" for a in view.actions())


def test_kmeans_panel_runs_off_the_ui_thread(qtbot, win):
    km = win.panels["k-means"]
    km.form.set_values({"k": "2..6"})
    km.sample.setValue(3000)
    with qtbot.waitSignal(km.finished, timeout=120000) as blocker:
        w = km.run()
        assert w is not None and not km.run_button.isEnabled()  # the UI thread returned at once
    res = blocker.args[0]
    assert res is not None and res.labels.shape == (128, 128)
    k = res.model.chosen_k_
    assert len(km.inertia_curve.getData()[0]) == 5
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
        km.run()
        km.cancel()
    assert blocker.args == [None] and km.status.text() == "cancelled"


def test_band_panel_feeds_the_detectors(qtbot, win, land_hdr):
    from hyperapp.io import read_labels

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
    best = bp.selected_bands()
    assert len(best) == 3 and len(bp.band_items) == 4  # mean spectrum + three band markers
    bp.use_selected()
    assert win.session.cube.bands == 3 and "3 of 64 bands" in win.windowTitle()
    win.detector.set_method("sam")
    with qtbot.waitSignal(win.run_finished, timeout=60000) as blocker:
        win.run_detector()
    assert blocker.args[0].result.report["shape"][2] == 3
    bp.all_button.click()
    assert win.session.cube.bands == 64
    # band clustering keeps one band per cluster
    bp.set_method("band-clusters")
    bp.form.set_values({"n_clusters": 5})
    with qtbot.waitSignal(bp.finished, timeout=60000) as blocker:
        bp.run()
    assert len(bp.selected_bands()) == 5
