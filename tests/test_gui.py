"""The window, driven through its widgets' public API (pytest-qt, offscreen)."""


import numpy as np
import pytest

pytest.importorskip("pytestqt")


def _run(qtbot, win, method, timeout=60000, **params):
    win.detector.set_method(method)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    win.detector.set_params(params)
    with qtbot.waitSignal(win.run_finished, timeout=timeout) as blocker:
        win.run_detector()
    return blocker.args[0]


def test_whole_session(qtbot, win, land_hdr, tmp_path):
    from hyperapp.io import open_cube, read_labels

    assert win.open_cube(land_hdr)
    assert win.view.base.image.shape == (128, 128, 3)
    # hover: spectrum and status bar follow
    win._hover(5, 7)
    assert "row 5, col 7" in win.statusBar().currentMessage()
    assert win.spectrum.cursor_curve.getData()[1].shape == (64,)
    # mark 5 target pixels and a background box, with undo/redo
    clicks = read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    assert win.session.roi.counts() == {"target": 5, "background": 11 * 16}
    win.session.roi.undo()
    assert win.session.roi.counts()["background"] == 0
    win.session.roi.redo()
    assert win.session.roi.counts()["background"] == 176
    win.load_truth(land_hdr.with_name("land_truth.hdr"))
    # SAM, then RBFN
    sam = _run(qtbot, win, "sam")
    assert sam is not None and sam.result.report["method"] == "sam"
    rbfn = _run(qtbot, win, "rbfn", n_hidden=4)
    assert rbfn.result.report["evaluation"]["auc"] > 0.95
    assert win.results.runs.count() == 2 and "AUC" in win.results.roc.plotItem.titleLabel.text
    # the Tools dock's line follows the run picked in the Results dock, not the last run made
    win.results.runs.setCurrentIndex(0)  # (another method than the form's: said, it read as the form's run)
    assert win.detector.status.text().startswith(f"Shown: {sam.name}")
    assert "the form above holds the next run's method" in win.detector.status.text()
    win.results.runs.setCurrentIndex(1)
    assert win.detector.status.text().startswith(rbfn.name)
    # the default threshold says how it was chosen (land: the unclicked targets stand apart)
    assert rbfn.result.report["threshold_rule"] == "network mode split"  # land's clicks are anomalies
    mode = rbfn.result.report["target_mode_pixels"]
    assert f"the {mode} pixels its network scores highest" in win.results.origin.text()
    assert win.results.origin.isVisibleTo(win)
    win.results.slider.setValue(win.results.slider.value() + 1)  # the person's threshold: no account
    assert not win.results.origin.isVisibleTo(win)
    # move the threshold: mask and counts follow, live
    lo = float(np.percentile(rbfn.result.scores, 90))
    win.results.set_threshold(lo)
    n = int((rbfn.result.scores > lo).sum())
    assert f"{n} pixels" in win.results.counts.text()
    assert int((win.view.mask_item.image[..., 3] > 0).sum()) == n
    # the object table zooms the view
    win.results.set_threshold(float(np.percentile(rbfn.result.scores, 99.5)))
    from hyperapp.detect.finish import objects_at

    win.results.tabs.setCurrentWidget(win.results.review)  # the table is built when its tab is shown
    rows = objects_at(rbfn.result.scores, win.results.threshold())
    assert win.results.table.rowCount() == len(rows) > 0
    win.results.table.cellClicked.emit(0, 0)
    r = win.results.table.item(0, 0)
    assert r is not None and int(r.text()) == rows[0]["label"]
    # the box as the first and last rows and columns it covers (inclusive), not as slices
    b = rows[0]
    first_last = win.results.table.item(0, 8).text().replace("\u2013", " ").replace(",", " ").split()
    assert int(first_last[0]) == b["row0"] and int(first_last[-1]) == b["col1"] - 1
    vr = win.view.vb.viewRange()  # centred on the first object's box, zoomed to it (and a margin)
    assert vr[0][0] <= rows[0]["col0"] and vr[0][1] >= rows[0]["col1"]
    box = rows[0]
    assert min(vr[0][1] - vr[0][0] - (box["col1"] - box["col0"]), vr[1][1] - vr[1][0] - (box["row1"] - box["row0"])) <= 40
    # export the mask and read it back
    p = win.export("mask", tmp_path / "mask", "envi")
    m = open_cube(p).read()[:, :, 0]
    np.testing.assert_array_equal(m, (rbfn.result.scores > win.results.threshold()).astype(np.uint8))
    assert win.export("mask", tmp_path / "mask", "png").is_file()
    assert win.export("screenshot", tmp_path / "shot.png").stat().st_size > 1000
    assert win.export("rois", tmp_path / "rois.csv").is_file()
    # compare view
    win.compare_pick.setCurrentIndex(0)
    assert win.compare_view.overlay.image is not None
    # the project reopens to the same state
    assert win.save_project(tmp_path / "s.hyperapp.json")
    from hyperapp.gui.main_window import MainWindow

    w2 = MainWindow()
    qtbot.addWidget(w2)
    assert w2.open_project(tmp_path / "s.hyperapp.json"), w2.last_error
    assert w2.worker is not None  # the saved runs run again in a worker thread, not on the window's
    qtbot.waitUntil(lambda: w2.worker is None, timeout=120000)
    assert w2.session.roi.counts() == win.session.roi.counts()
    assert [r.name for r in w2.session.runs] == [r.name for r in win.session.runs]
    np.testing.assert_allclose(w2.session.runs[1].result.scores, rbfn.result.scores, rtol=1e-5, atol=1e-6)
    assert w2.session.runs[1].threshold == pytest.approx(rbfn.threshold)
    # the status bar says the project opened (it said only the last run's time, found by a first-time walk)
    assert w2.statusBar().currentMessage() == "project s.hyperapp.json opened: 2 runs shown again at the saved thresholds"


def test_cancel_a_long_run(qtbot, win, tmp_path):
    import spectral.io.envi as envi

    rng = np.random.default_rng(0)
    data = rng.random((1024, 512, 64), dtype=np.float32)
    envi.save_image(str(tmp_path / "big.hdr"), data, force=True, ext=".img")
    assert win.open_cube(tmp_path / "big.hdr")
    win.session.roi.mark_pixels([(3, 3), (500, 200)])
    win.detector.set_method("lrx")
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    with qtbot.waitSignal(win.run_finished, timeout=60000) as blocker:
        w = win.run_detector()
        qtbot.waitUntil(lambda: win.detector.progress.value() > 0, timeout=30000)  # running, then cancelled
        win.cancel_run()
    assert blocker.args == [None]
    assert win.detector.status.text() == "lrx run cancelled"
    assert w.progress.cancelled
    qtbot.waitUntil(lambda: win.worker is None, timeout=10000)
    assert win.detector.run_button.isEnabled()
    assert win.detector.progress.value() == 0  # an ended run leaves no full (or half) bar behind
    assert not win.session.runs


def test_broken_file_shows_a_dialog_and_the_app_stays_usable(qtbot, win, tmp_path, land_hdr):
    bad = tmp_path / "broken.hdr"
    bad.write_text("ENVI\nsamples = 10\nlines = 10\nbands = 3\ndata type = 4\ninterleave = bsq\n")
    (tmp_path / "broken.img").write_bytes(b"\0" * 17)
    assert not win.open_cube(bad)
    assert win.error_box is not None and win.error_box.isVisible()
    assert "truncated" in win.error_box.text() and "broken.img" in win.error_box.text()
    win.error_box.close()
    assert win.open_cube(land_hdr)  # still usable
    assert win.session.cube.shape == (128, 128, 64)
    # a run with no marked targets is an error dialog, not a crash
    out = _run(qtbot, win, "sam")
    assert out is None and "target" in win.last_error


def test_recent_files_and_saved_parameters(qtbot, win, land_hdr, sea_hdr):
    from hyperapp.gui.main_window import settings

    win.open_cube(land_hdr)
    win.open_cube(sea_hdr)
    assert settings().value("recent")[:2] == [str(sea_hdr), str(land_hdr)]
    assert [a.text() for a in win.recent_menu.actions()][:2] == [str(sea_hdr), str(land_hdr)]
    win.session.roi.mark_pixels([(1, 1)])
    _run(qtbot, win, "rbfn", n_hidden=6)
    assert win._saved_params("rbfn")["n_hidden"] == 6


def test_roi_tools():
    from hyperapp.core.errors import InputError
    from hyperapp.io.roi import RoiSet

    r = RoiSet((20, 30))
    r.polygon([(2, 2), (2, 10), (10, 10), (10, 2)], "target")
    assert 60 <= r.counts()["target"] <= 81
    r.brush(15, 15, 2, "background")
    assert r.counts()["background"] == 13
    with pytest.raises(InputError, match="outside"):
        r.mark_pixels([(25, 1)])
    r.clear()
    assert r.counts() == {"target": 0, "background": 0}


def test_no_python_bool_leak_while_hovering(win, land_hdr):
    """PySide6 6.12.0 over-released bools on every call through pyqtgraph (an abort at exit on 3.11):
    hovering must leave True's reference count alone (trivially so where bools are immortal)."""
    import sys

    win.open_cube(land_hdr)
    win._hover(1, 1)
    before = sys.getrefcount(True)
    for i in range(50):
        win._hover(i % 128, (3 * i) % 128)
    assert sys.getrefcount(True) >= before - 5


def test_fill_border_in_the_window(qtbot, win, land_hdr, tmp_path):
    """A flight line with a -9999 fill border: the window opens it, the display ignores the fill, and a
    detector run leaves the border out (NaN scores, nothing in the mask)."""
    import spectral.io.envi as envi

    from hyperapp.io import open_cube, read_labels

    cube = open_cube(land_hdr)
    X = cube.read()
    X[:, :20] = -9999
    hdr = tmp_path / "swath.hdr"
    envi.save_image(str(hdr), X, dtype=np.float32, force=True, ext=".img", metadata={"data ignore value": -9999})
    assert win.open_cube(hdr)
    assert (win.view.base.image[:, :20] == 0).all() and win.view.base.image[:, 30:].any()
    clicks = read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))
    clicks[:, :20] = 0
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    run = _run(qtbot, win, "ace")
    assert run is not None
    res = run.result
    assert np.isnan(res.scores[:, :20]).all() and np.isfinite(res.scores[:, 20:]).all()
    assert not res.mask[:, :20].any() and res.report["nodata_pixels"] == 128 * 20


def test_a_cube_over_the_memory_budget_is_streamed(qtbot, win, land_hdr, monkeypatch):
    """A pixel detector on a cube whose pixels exceed the memory budget streams it from the file, as
    the CLI does: the window never holds the cube, and the scores equal the in-memory run's."""
    import hyperapp.detect.budget as budget
    from hyperapp.io import read_labels

    assert win.open_cube(land_hdr)
    clicks = read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    held = _run(qtbot, win, "ace").result
    assert not held.report.get("streamed")
    win.session._device_cache.clear()
    monkeypatch.setattr(budget, "memory_budget", lambda limit=None: 1 << 16)  # 64 KB: every cube streams
    streamed = _run(qtbot, win, "ace").result
    assert streamed.report["streamed"]
    assert not win.session._device_cache  # nothing was read into the window's memory
    np.testing.assert_allclose(streamed.scores, held.scores, rtol=1e-5, atol=1e-6)


def test_ffbp_trained_on_another_scene_scores_this_one(qtbot, win, sea_hdr, tmp_path):
    """File > Train FFBP on another scene: the CLI's --train-from (hyperapp.detect.training.train_on_scene) in a
    worker; the model then scores this cube's FFBP runs."""
    from hyperapp.io.samples import make_sea_scene, write_scene

    from .conftest import run_detector

    sc = make_sea_scene(256, 256, seed=101)
    sc.name = "train"
    write_scene(sc, tmp_path / "train")
    assert win.open_cube(sea_hdr)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    with qtbot.waitSignal(win.run_finished, timeout=120000):
        win.train_ffbp_model(str(tmp_path / "train/train.hdr"), str(tmp_path / "train/train_truth.hdr"))
    assert win.ffbp_model is not None and "trained on train.hdr" in win.detector.model_label.text()
    run = run_detector(qtbot, win, "ffbp")
    assert run is not None and run.result.report["boxes"] > 0
    # a training mask that is not there: one line in a dialog, the model kept
    errors = []
    win.show_error = errors.append
    model = win.ffbp_model
    with qtbot.waitSignal(win.run_finished, timeout=60000):
        win.train_ffbp_model(str(tmp_path / "train/train.hdr"), str(tmp_path / "nothing.hdr"))
    assert len(errors) == 1 and "nothing.hdr" in errors[0] and win.ffbp_model is model


def test_a_dataset_name_with_an_envi_cube_is_a_dialog_not_ignored(win, land_hdr):
    """``hyperapp CUBE --dataset X`` with an ENVI cube: the window says the name does not apply (as the
    command line does) and keeps the cube it had, instead of opening the cube as if it were not given."""
    errors = []
    win.show_error = errors.append
    before = win.session
    assert win.open_cube(str(land_hdr), "data") is False
    assert len(errors) == 1 and "leave --dataset out" in errors[0] and "land.hdr" in errors[0]
    assert win.session is before


def test_exporting_rois_with_none_marked_says_so(win, land_hdr, tmp_path):
    """File > Export ROIs before any pixel is marked: a message, and no empty file that would pass for
    ROIs."""
    errors = []
    win.show_error = errors.append
    assert win.open_cube(str(land_hdr))
    assert win.export("rois", tmp_path / "rois.csv") is None
    assert len(errors) == 1 and "no pixels are marked" in errors[0] and not (tmp_path / "rois.csv").exists()
