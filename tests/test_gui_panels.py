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

    assert set(win.panels) == {"k-means", "Band reduction", "SOM", "Gaussian mixture"}
    det = win.findChild(QDockWidget, "Detector")
    tabbed = {d.windowTitle() for d in win.tabifiedDockWidgets(det)}
    assert {"k-means", "Band reduction", "SOM", "Gaussian mixture"} <= tabbed
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
    np.testing.assert_allclose(som.plane_img.image, np.asarray(res.model.codebook_)[:, 10].reshape(8, 7))
    som.show_neuron(9)
    np.testing.assert_allclose(som.neuron_curve.getData()[1], np.asarray(res.model.codebook_)[9])
    assert res.labels.max() < 56


def test_gmm_panel_with_cancel(qtbot, win):
    gp = win.panels["Gaussian mixture"]
    gp.form.set_values({"k": "2..4", "covariance": "diag"})
    gp.sample.setValue(3000)
    with qtbot.waitSignal(gp.finished, timeout=120000) as blocker:
        gp.run()
    res = blocker.args[0]
    assert res is not None, win.last_error
    assert len(gp.bic_curve.getData()[0]) == 3 and len(gp.mean_items) == res.model.chosen_k_
    assert res.extra.shape == (128, 128, res.model.chosen_k_)
    gp.component.setValue(1)
    assert gp.post_img.image.shape == (128, 128) and 0 <= gp.post_img.image.min() <= gp.post_img.image.max() <= 1
    gp.form.set_values({"k": "2..12", "covariance": "full", "max_iter": 10000, "tol": 0.0})
    gp.set_source("image")
    with qtbot.waitSignal(gp.finished, timeout=60000) as blocker:
        gp.run()
        gp.cancel()
    assert blocker.args == [None] and gp.status.text() == "cancelled"
