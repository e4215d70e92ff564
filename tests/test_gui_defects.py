"""The window as a new user finds it: each defect a first walk found, driven through the window (pytest-qt)."""

import json

import numpy as np
import pytest

from .conftest import mark_clicks, run_detector

pytest.importorskip("pytestqt")




# 1 ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["ace", "mf", "rx", "cem", "sam", "lrx"])
def test_save_and_reopen_a_project_with_each_classic_model(qtbot, win, land_hdr, tmp_path, method):
    from hyperapp.gui.main_window import MainWindow

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run = run_detector(qtbot, win, method, **({"outer": 9} if method == "lrx" else {}))
    assert run is not None, win.last_error
    p = tmp_path / "p.hyperapp.json"
    assert win.save_project(p), win.last_error
    assert "saved" in win.statusBar().currentMessage()
    w2 = MainWindow()
    qtbot.addWidget(w2)
    assert w2.open_project(p), w2.last_error
    qtbot.waitUntil(lambda: w2.worker is None, timeout=120000)
    np.testing.assert_allclose(w2.session.runs[0].result.scores, run.result.scores, rtol=1e-4, atol=1e-5)
    assert w2.detector.method_name() == method  # 7: the method box shows the reopened run's method


def test_a_failing_save_shows_a_dialog_and_leaves_nothing(qtbot, win, land_hdr, tmp_path, monkeypatch):
    import hyperapp.project.session as session_mod

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run_detector(qtbot, win, "sam")
    run_detector(qtbot, win, "ace")

    def broken(*a, **k):
        raise TypeError("Object of type Thing is not JSON serializable")

    monkeypatch.setattr(session_mod.json, "dumps", broken)
    p = tmp_path / "p.hyperapp.json"
    assert not win.save_project(p)
    assert win.error_box is not None and "could not save" in win.error_box.text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["settings.ini"]  # no project, no models folder


# 2 ------------------------------------------------------------------------------------------------
def test_object_table_follows_the_threshold(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run = run_detector(qtbot, win, "rbfn")
    win.results.tabs.setCurrentWidget(win.results.review)
    for q in (99.0, 99.8, 95.0):
        t = float(np.percentile(run.result.scores, q))
        win.results.set_threshold(t)
        n_obj = int(win.results.counts.text().split(",")[1].split()[0])
        assert win.results.table.rowCount() == n_obj


# 3 ------------------------------------------------------------------------------------------------
def test_open_recent_survives_a_second_launch(qtbot, tmp_path, monkeypatch, land_hdr):
    # what the first launch left on disk: QSettings writes a one-element list as a plain value, and a
    # later process reads it back as a string
    ini = tmp_path / "second.ini"
    ini.write_text(f"[General]\nrecent={land_hdr}\nlast_dir={land_hdr.parent}\n")
    monkeypatch.setenv("HYPERAPP_SETTINGS", str(ini))
    from hyperapp.gui.main_window import MainWindow

    w2 = MainWindow()
    qtbot.addWidget(w2)
    assert [a.text() for a in w2.recent_menu.actions()] == [str(land_hdr)]
    w2.recent_menu.actions()[0].trigger()
    assert w2.session is not None and w2.last_error is None


# 4 ------------------------------------------------------------------------------------------------
def test_ffbp_from_clicks_honours_the_false_alarm_rate(sea_hdr, tmp_path, capsys):
    from hyperapp.cli import main

    out = tmp_path / "o"
    assert main(["--headless", "detect", str(sea_hdr), "--method", "ffbp", "--targets",
                 str(sea_hdr.with_name("sea_targets.csv")), "--truth", str(sea_hdr.with_name("sea_truth.hdr")),
                 "--device", "cpu", "--out", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["threshold"] != 0 and rep["far"] == pytest.approx(1e-3)
    assert rep["detections"] < 0.05 * 128 * 128
    assert rep["evaluation"]["pd_at_far_1e-3"] > 0.3


# 5 ------------------------------------------------------------------------------------------------
def test_opening_another_cube_resets_the_window(qtbot, win, land_hdr, sea_hdr, tmp_path):
    import spectral.io.envi as envi

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    assert "none yet" in win.compare_pick.placeholderText()
    run_detector(qtbot, win, "sam")
    # the Compare picker's line follows the runs it lists
    assert "none yet" not in win.compare_pick.placeholderText() and "1 run" in win.compare_pick.placeholderText()
    win._hover(3, 3)
    assert "pick a run" in win.compare_note.text()  # the empty view below says what it is for
    win.compare_pick.setCurrentIndex(0)
    assert win.compare_note.text().startswith(win.session.runs[0].name)
    # its numbers, its colour bar and the overlay's opacity, as the image draws them (80 % fixed, no bar)
    run = win.session.runs[0]
    assert f"at threshold {run.threshold:.4g}: " in win.compare_note.text()
    assert win.compare_view.colour_bar.isVisible()
    win.opacity.setValue(30)
    assert int(win.compare_view.overlay.image[..., 3].max()) == round(0.3 * 255)
    # the overlay's opacity grows with the score: the lowest scores leave the scene visible (one opacity
    # for all covered it in the colour map's dark purple)
    low = run.result.scores <= np.percentile(run.result.scores, 1)
    assert int(win.compare_view.overlay.image[..., 3][low].max()) <= 0.1 * 255
    win.results.set_threshold(float(np.percentile(run.result.scores, 99.5)))
    win.results.flush()
    pixels = int((run.result.scores > run.threshold).sum())
    assert f": {pixels} pixels" in win.compare_note.text()  # the compared run's mask follows its threshold
    assert win.compare_view.key_entries()[-1] == "target marks"  # the marks, as on the image
    wide = tmp_path / "wide.hdr"
    envi.save_image(str(wide), np.random.default_rng(0).random((40, 300, 8), dtype=np.float32), ext=".img")
    assert win.open_cube(wide)
    assert win.results.scores is None and win.results.table.rowCount() == 0
    assert win.results.counts.text().startswith("no result yet")
    assert win.results.hist_curve.getData()[0] is None or len(win.results.hist_curve.getData()[0]) == 0
    assert win.compare_view.overlay.image is None and win.compare_pick.count() == 0
    assert "none yet" in win.compare_pick.placeholderText() and "pick a run" in win.compare_note.text()
    assert win.compare_view.base.image is None  # not the last cube's picture either
    assert win.spectrum.cursor_curve.getData()[0] is None or len(win.spectrum.cursor_curve.getData()[0]) == 0
    (x0, x1), (y0, y1) = win.view.vb.viewRange()
    assert x0 <= 0 and x1 >= 300  # fitted to the new cube
    # and back to the small cube: framed on it, not kept in the corner of the wide one's frame (the last
    # cube's ROIs, redrawn after its picture, held the old frame); the spectrum's x on its bands at once
    assert win.open_cube(land_hdr)
    (x0, x1), (y0, y1) = win.view.vb.viewRange()
    assert x0 <= 0 and x1 >= 128 and -5 <= y0 <= 0 and 128 <= y1 <= 140
    assert x1 - x0 < 300  # widened only to the view's aspect, not to the wide cube's 300 columns
    sx0, sx1 = win.spectrum.getViewBox().viewRange()[0]
    assert sx0 >= 300 and sx1 <= 2700  # land's wavelengths (400-2500 nm), not the wide cube's bands 0-7


def test_a_run_keeps_the_users_zoom(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    win.view.zoom_to(20, 20, 40, 40, margin=0)
    before = win.view.vb.viewRange()
    run_detector(qtbot, win, "sam")
    win.compare_pick.setCurrentIndex(0)
    run_detector(qtbot, win, "ace")
    after = win.view.vb.viewRange()
    np.testing.assert_allclose(np.asarray(after), np.asarray(before), atol=1.0)


# 6 ------------------------------------------------------------------------------------------------
def test_results_plots_are_readable(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    win.load_truth(land_hdr.with_name("land_truth.hdr"))
    mark_clicks(win, land_hdr)
    run_detector(qtbot, win, "rbfn")
    qtbot.wait(50)
    # the run is over: the bar is empty again and the status line says which run finished
    assert win.detector.progress.value() == 0 and win.detector.status.text().startswith("rbfn #1 finished:")
    for plot in (win.results.hist, win.results.roc):
        win.results.tabs.setCurrentWidget(plot)
        qtbot.wait(20)
        assert plot.height() >= 200, plot.height()
    lo, hi = win.results.roc.getViewBox().viewRange()[1]
    assert lo >= -0.05 and hi <= 1.1
    assert hi >= 1.03 and lo < 0  # room above 1.0 and below 0: neither tick label falls off the axis
    # the log FAR axis ticks decades only (a wide plot labelled every minor tick, overlapping)
    major, minor = win.results.roc.getAxis("bottom")._tickLevels
    assert not minor and [v for v, _ in major] == list(range(int(major[0][0]), 1))
    assert major[-1][1] == "1" and major[-2][1] == "0.1"
    assert win.compare_view.minimumHeight() >= 200


# 7 ------------------------------------------------------------------------------------------------
def test_smaller_items(qtbot, win, land_hdr, tmp_path):
    from hyperapp.io import open_cube

    # the detector list starts on the network the app is built around
    assert win.detector.method_name() == "rbfn"
    assert win.open_cube(land_hdr)
    # an inspect tool: clicks pan and inspect, they mark nothing
    win.set_tool("inspect")

    class Ev:
        def button(self):
            from PySide6.QtCore import Qt

            return Qt.MouseButton.LeftButton

        def double(self):
            return False

    win._click(5, 5, Ev())
    assert win.session.roi.counts()["target"] == 0
    win.set_tool("pixel")
    win._click(5, 5, Ev())
    assert win.session.roi.counts()["target"] == 1
    # loading a truth mask shows its outline and says so
    assert win.load_truth(land_hdr.with_name("land_truth.hdr"))
    xs, _ = win.view.truth_item.getData()
    assert xs is not None and len(xs) > 0
    assert "truth" in win.statusBar().currentMessage()
    # the header's reflectance scale factor is applied to the spectrum axis
    win._hover(10, 10)
    raw = open_cube(land_hdr).spectrum(10, 10)
    np.testing.assert_allclose(win.spectrum.cursor_curve.getData()[1], raw / 10000.0, rtol=1e-6)
    assert "reflectance" in win.spectrum.getAxis("left").labelText
    # one band shown: named as the tables name bands ("5 (460 nm)", not "5 (460.0 Nanometers)")
    win.mode.setCurrentText("Band")
    win.band.setValue(5)
    w = win.session.cube.wavelengths[5]
    assert win.band_label.text() == f"5 ({w:.4g} nm)"
    win.mode.setCurrentText("RGB")
    # and the status bar's mean is on the same scale, named so
    assert f"mean reflectance {raw.mean() / 10000.0:.4g}" in win.statusBar().currentMessage()
    # GeoTIFF only for cubes with map info
    assert "GeoTIFF (*.tif)" not in win.mask_filters()
    # a status message after an export
    mark_clicks(win, land_hdr)
    k = win.session.roi.add_class("field")
    win.session.roi.rectangle(20, 60, 24, 69, k)
    n_target = int(win.session.roi.targets.sum())
    # the marks of every class, the user's own included
    assert win.detector.status.text() == f"pixels marked: {n_target} target, 0 background, 50 field"
    run_detector(qtbot, win, "sam")
    assert win.export("mask", tmp_path / "m", "envi") is not None
    assert "exported" in win.statusBar().currentMessage()
    # a text file renamed .hdr
    fake = tmp_path / "notes.hdr"
    fake.write_text("shopping list\nmilk\n")
    assert not win.open_cube(fake)
    assert "not an ENVI header" in win.last_error


def test_overlays_are_told_apart_and_named(qtbot, win, land_hdr):
    """The mask's colour is none of the score map's; a marked area is outlined, not filled; a key under
    the image names every overlay drawn."""
    import pyqtgraph as pg

    from hyperapp.gui.image_view import FALSE_ALARM_COLOUR, MASK_COLOUR, ROI_COLOURS, SCORE_CMAP

    assert win.open_cube(land_hdr)
    assert win.view.key_entries() == []
    mark_clicks(win, land_hdr)
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    # the clicks ringed, the rectangle not (its outline shows it): the image inside stays visible
    assert len(win.view.marks.data) == 5
    # a patch of a few pixels (an imported truth's 3 x 3 target) is ringed once, at its centre: a ring a
    # pixel drew nine overlapping rings, a solid blob over the target
    win.session.roi.rectangle(60, 60, 62, 62, "target")
    d = win.view.marks.data
    assert len(d) == 6 and any(x == 61.5 and y == 61.5 for x, y in zip(d["x"], d["y"]))
    assert win.session.roi.undo()
    rgba = win.view.roi_item.image
    assert rgba[105, 107, 3] < 64 and rgba[100, 107, 3] < 64  # a faint tint, border pixels too
    # outlined along the pixels' edges, a line a class in its colour: the rectangle's (rows 100-110, cols
    # 100-115) runs along y = 100 and y = 111 from x = 100 to 116
    bg = [it for it in win.view.roi_lines if it.opts["pen"].color().getRgb()[:3] == ROI_COLOURS[2][:3]]
    xs, ys = bg[0].getData()
    top = {(x0, x1) for x0, x1, y0 in zip(xs[::2], xs[1::2], ys[::2]) if y0 == 100}
    assert {(float(c), float(c + 1)) for c in range(100, 116)} <= top
    assert win.view.key_entries() == ["target marks", "background marks"]
    win.load_truth(land_hdr.with_name("land_truth.hdr"))
    assert run_detector(qtbot, win, "sam") is not None
    # over a truth, the mask shows its hits and its false alarms apart, and the key names both
    assert win.view.key_entries() == ["truth outline", "detection on the truth", "false alarm", "target marks",
                                      "background marks"]
    assert "false alarm" in win.view.key.text
    mask = win.view.mask_item.image[..., 3] > 0
    truth = win.session.truth > 0
    rgb = win.view.mask_item.image[..., :3]
    assert (rgb[mask & truth] == MASK_COLOUR[:3]).all() and (rgb[mask & ~truth] == FALSE_ALARM_COLOUR[:3]).all()
    win.view.set_truth(None)  # no truth: one colour again
    assert "detection mask" in win.view.key_entries()
    rgb = win.view.mask_item.image[..., :3]
    assert (rgb[win.view.mask_item.image[..., 3] > 0] == MASK_COLOUR[:3]).all()
    # far from every colour of the score map
    lut = pg.colormap.get(SCORE_CMAP).getLookupTable(0.0, 1.0, 256, alpha=False).astype(int)
    for colour in (MASK_COLOUR, FALSE_ALARM_COLOUR):
        assert np.abs(lut - np.asarray(colour[:3])).sum(axis=1).min() > 200


def test_exports_and_projects_name_what_they_wrote_and_refuse_folders(qtbot, win, land_hdr, tmp_path):
    """An export names the file it wrote; a folder, or a path under a file, is one clear message and
    writes nothing; errors do not pile up; a truth mask needs a cube first."""
    assert not win.load_truth(land_hdr.with_name("land_truth.hdr"))  # no cube yet: said, not a crash
    assert "open a cube first" in win.last_error
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run_detector(qtbot, win, "sam")
    out = tmp_path / "exp"
    out.mkdir()
    assert win.export("rois", out / "r.txt") == out / "r.hdr"  # an ENVI class map: the file it wrote
    assert (out / "r.hdr").is_file() and not (out / "r.txt").exists()
    (tmp_path / "afile").write_text("")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert win.export("mask", out) is None and "is a folder" in win.last_error
    assert win.export("scores", tmp_path / "afile" / "s") is None and "is a file" in win.last_error
    assert not win.save_project(out) and "is a folder" in win.last_error
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing beside the folder
    from PySide6.QtWidgets import QMessageBox

    boxes = [w for w in win.findChildren(QMessageBox) if w.isVisible()]
    assert len(boxes) == 1  # the last error's box; the earlier ones closed


def test_the_windows_saves_refuse_a_folder_that_does_not_exist_and_make_none(qtbot, win, land_hdr, tmp_path):
    """A path typed into a save dialog whose folder is not there (a typo) is one clear message: no
    folder tree is made for it, by any of the window's saves."""
    from hyperapp.core.errors import HyperappError

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run_detector(qtbot, win, "sam")
    missing = tmp_path / "no-such-folder" / "deeper"
    assert win.export("mask", missing / "m.hdr") is None and "does not exist" in win.last_error
    assert win.export("screenshot", missing / "s.png") is None and "does not exist" in win.last_error
    assert not win.save_project(missing / "p.hyperapp.json") and "does not exist" in win.last_error
    assert not win.save_batch_job(missing / "j.toml") and "does not exist" in win.last_error
    with pytest.raises(HyperappError, match="does not exist"):
        win.panels["Forest classification"].export_class_map(str(missing / "c.hdr"), "envi")
    assert not (tmp_path / "no-such-folder").exists()
    assert win.export("mask", tmp_path / "m.hdr") is not None  # an existing folder still takes it


def test_the_cascades_mask_boxes_are_not_drawn_as_dots(qtbot):
    """The window detector's boxes are drawn dashed; those a cascade adds around its RBFN's mask objects
    (most one pixel: dozens of unexplained dots beside the boxes) are not: the mask shows those pixels."""
    from hyperapp.gui.image_view import ImageView

    view = ImageView()
    qtbot.addWidget(view)
    view.set_image(np.zeros((30, 30, 3), np.uint8))
    view.set_boxes([{"row": 0, "col": 0, "height": 8, "width": 8, "level": 0, "source": "ffbp"},
                    {"row": 20, "col": 25, "height": 1, "width": 1, "level": 0, "source": "rbfn"},
                    {"row": 10, "col": 10, "height": 4, "width": 4, "level": 1}])
    assert len(view.box_items) == 2 and view.key_entries() == ["window boxes"]


def test_a_cube_without_data_in_the_bands_shown_is_said(qtbot, win, tmp_path):
    """A cube of NaN opened to a black picture with nothing said until a run refused it."""
    import spectral.io.envi as envi

    envi.save_image(str(tmp_path / "nan.hdr"), np.full((16, 16, 6), np.nan, np.float32), dtype=np.float32,
                    force=True, ext=".img")
    assert win.open_cube(tmp_path / "nan.hdr")
    assert "hold no data at any pixel" in win.statusBar().currentMessage()


def test_a_truth_loaded_after_a_run_gives_its_line_the_auc_its_roc_shows(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run = run_detector(qtbot, win, "sam")
    assert "AUC" not in win.detector.status.text() and "evaluation" not in run.result.report
    assert win.load_truth(land_hdr.with_name("land_truth.hdr"))
    line = win.detector.status.text()
    assert win.results.auc is not None
    assert line.startswith("sam #1 finished:") and f"AUC {win.results.auc:.4f} against the truth loaded since" in line
    assert f"AUC {win.results.auc:.4f}" in win.results.roc.getPlotItem().titleLabel.text  # the ROC tab's own
    # the line keeps it when the threshold moves
    t = float(np.percentile(run.result.scores, 99.0))
    win.results.set_threshold(t)
    assert "threshold moved" in win.detector.status.text() and f"AUC {win.results.auc:.4f}" in win.detector.status.text()


def test_marking_over_another_class_says_so_and_how_to_undo(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)

    class Ev:
        def button(self):
            from PySide6.QtCore import Qt

            return Qt.MouseButton.LeftButton

        def double(self):
            return False

    win.set_tool("pixel")
    win.set_roi_class("target")
    win._click(5, 5, Ev())
    win._click(5, 6, Ev())
    win.statusBar().clearMessage()
    win.set_roi_class("background")
    win._click(7, 7, Ev())  # a free pixel: nothing to say
    assert "re-marked" not in win.statusBar().currentMessage()
    win._click(5, 5, Ev())
    said = win.statusBar().currentMessage()
    assert said.startswith("1 target pixel re-marked as background") and "Undo" in said
    assert win.session.roi.counts()["target"] == 1
    win.set_tool("brush")  # a brush over both targets' place: the one left is said
    win._click(5, 6, Ev())
    assert win.statusBar().currentMessage().startswith("1 target pixel re-marked as background")
    win.set_roi_class("erase")  # erasing is what it says: no notice
    win.statusBar().clearMessage()
    win._click(5, 6, Ev())
    assert "re-marked" not in win.statusBar().currentMessage()


def test_what_a_second_walk_found_stale_or_moved(qtbot, win, land_hdr, sea_hdr, tmp_path):
    from PySide6.QtCore import Qt

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    sam = run_detector(qtbot, win, "sam")
    run_detector(qtbot, win, "rbfn")
    # Enter in the threshold box, the text unchanged, moves nothing (its 10-digit form was read back)
    box = win.results.value_box
    kept = win.results.threshold()
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert win.results.threshold() == kept and "threshold moved" not in win.detector.status.text()
    # a word typed there is refused, said, and moves nothing either
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), "banana")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert win.results.threshold() == kept and win.results.refusal.isVisibleTo(win.results)
    win.results.set_threshold(float("nan"))  # passed over, not a ValueError
    assert win.results.threshold() == kept
    # a run shown again: its line ("Shown: ...") follows the threshold as the last run's does
    win.results.runs.setCurrentIndex(win.session.runs.index(sam))
    assert win.detector.status.text().startswith("Shown: sam #1 finished:")
    t = float(np.percentile(sam.result.scores, 97.0))
    win.results.set_threshold(t)
    assert f"threshold moved to {t:.4g}" in win.detector.status.text()
    # the Compare note gives the AUC of a truth loaded after the run, as the line and the ROC do
    win.compare_pick.setCurrentIndex(win.session.runs.index(sam))
    assert "AUC" not in win.compare_note.text()
    assert win.load_truth(land_hdr.with_name("land_truth.hdr"))
    assert f"AUC {win.results.auc:.4f} against the truth loaded since" in win.compare_note.text()
    shown = win.compare_view._mask  # and its mask, at its threshold, beside the image
    assert shown is not None and int(shown.sum()) == sam.result.count_at(sam.threshold)[0] > 0
    # another method in the form: the line still names the run shown, as another method's
    win.results.runs.setCurrentIndex(win.session.runs.index(sam))
    win.detector.set_method("ace")
    assert win.detector.status.text().startswith("Shown: sam #1 finished:")
    # Undo says what it did; with nothing left to undo, says that
    win.session.roi.mark_pixels([(1, 1)], "background")
    assert win.undo_marks() and win.statusBar().currentMessage() == "marks: last change undone"
    while win.session.roi.undo():
        pass
    assert not win.undo_marks() and win.statusBar().currentMessage() == "marks: nothing to undo"
    # an error's box closes once a new cube is open
    assert win.export("mask", tmp_path / "nope" / "mask.hdr") is None
    assert win.error_box is not None and win.error_box.isVisible()
    box_before = win.error_box
    assert win.open_cube(sea_hdr)
    assert win.error_box is None and not box_before.isVisible()
    # and the Compare view keeps nothing of the last cube: no picture, run, truth or marks
    cv = win.compare_view
    assert cv.base.image is None and cv._mask is None and cv.roi_item.image is None and not cv.roi_lines
