"""The review list in the window (pytest-qt, offscreen): on the airport scene, RBFN from five clicks on
aircraft, objects marked Good and Bad with the keys, next/previous centring the image, the object's mean
spectrum in the Spectrum dock, its library matches, the project saved and reopened with its statuses,
the export of the Good objects only, and a batch run's folder opened for review."""

import csv
import io

import numpy as np
import pytest

from .conftest import random_clicks, run_detector

pytest.importorskip("pytestqt")


@pytest.fixture
def airport(qtbot, win, abu, tmp_path):
    """The airport scene in the window, five clicks on aircraft, a library of the aircraft's and the
    background's mean spectra open, RBFN run at a false-alarm rate of 0.01; the review list shown."""
    from hyperapp.io.speclib import SpectralLibrary, write_library

    assert win.open_cube(abu, "data"), win.last_error
    assert win.load_truth(abu, "map")
    truth = win.session.truth > 0
    win.session.roi.mark_pixels(np.argwhere(random_clicks(truth, 5, 0)), "target")
    X = win.session.cube.read()
    lib = SpectralLibrary(["aircraft", "runway and apron"], [X[truth].mean(axis=0), X[~truth].mean(axis=0)])
    path = write_library(lib, tmp_path / "airport.sli")
    assert win.library_dock.open_library(path)
    win.detector.far.setValue(0.01)
    run = run_detector(qtbot, win, "rbfn")
    assert run is not None, win.last_error
    win.results.tabs.setCurrentWidget(win.results.review)
    return run


def _statuses(panel):
    return [panel.table.item(i, 1).text() for i in range(panel.table.rowCount())]


def test_review_keys_spectrum_matches_project_and_export(qtbot, win, airport, tmp_path):
    from PySide6.QtCore import Qt

    panel = win.results.review
    rv = panel.review
    assert rv is not None and airport.review is rv
    assert panel.table.rowCount() == len(rv) >= 5
    # the table's objects are the run's at its threshold
    assert rv.ids.tolist() == [o["label"] for o in airport.result.objects_at(airport.threshold)]
    panel.select(0)
    panel.table.setFocus()
    # G, G, G then B, B: each marks the chosen object and moves on ("then next"); B is Bad here, not
    # the window's Mark background
    for key in (Qt.Key.Key_G, Qt.Key.Key_G, Qt.Key.Key_G, Qt.Key.Key_B, Qt.Key.Key_B):
        qtbot.keyClick(panel.table, key)
    assert _statuses(panel)[:5] == ["Good"] * 3 + ["Bad"] * 2
    assert set(_statuses(panel)[5:]) <= {"Pending"}
    assert win.roi_class == "target" and not win.class_actions["background"].isChecked()
    assert "3 Good, 2 Bad" in panel.counts.text()
    assert panel.current() == min(5, len(rv) - 1)
    # N and Shift+N move and centre the image on the object
    qtbot.keyClick(panel.table, Qt.Key.Key_N, Qt.KeyboardModifier.ShiftModifier)
    i = panel.current()
    assert i == min(5, len(rv) - 1) - 1
    o = rv.objects[i]
    (x0, x1), (y0, y1) = win.view.vb.viewRange()
    assert abs((x0 + x1) / 2 - (o["col0"] + o["col1"]) / 2) < 1 and abs((y0 + y1) / 2 - (o["row0"] + o["row1"]) / 2) < 1
    assert x1 - x0 < 0.9 * win.session.cube.cols or y1 - y0 < 0.9 * win.session.cube.rows  # zoomed to it
    qtbot.keyClick(panel.table, Qt.Key.Key_N)
    assert panel.current() == i + 1
    # its mean spectrum in the Spectrum dock (beside the target mean), and its best match dotted
    curve = win.spectrum.review_items[0]
    np.testing.assert_allclose(curve.yData, rv.means[i + 1])
    lab = rv.labels
    X = win.session.base_cube.read()
    np.testing.assert_allclose(rv.means[i + 1], X[lab == rv.ids[i + 1]].mean(axis=0), rtol=1e-6)
    assert any("target mean" in it.opts.get("name", "") for it in win.spectrum.roi_items if hasattr(it, "opts"))
    assert len(win.spectrum.review_items) == 2 and win.spectrum.review_items[1].opts["name"].startswith("match: ")
    assert not win.spec_dock.visibleRegion().isEmpty() and not win.results_dock.visibleRegion().isEmpty()
    # the library's matches by SID and SAM, with their scores, in the list and under it
    best = rv.found.best(0)
    assert panel.table.item(0, 3).text().startswith(best["sid_match"])
    assert f"{best['sam_angle']:.3g}" in panel.table.item(0, 4).text()
    assert "SID (divergence)" in panel.detail.text() and "SAM (radians)" in panel.detail.text()
    # the project keeps the statuses: saved, reopened in the window, the same marks
    project = tmp_path / "review.hyperapp.json"
    assert win.save_project(project), win.last_error
    kept = list(rv.status)
    with qtbot.waitSignal(win.run_finished, timeout=120000):  # the project's runs re-run in a worker
        assert win.open_project(project), win.last_error
    panel = win.results.review
    win.results.tabs.setCurrentWidget(panel)
    assert panel.review is not rv and panel.review.status == kept
    assert _statuses(panel)[:5] == ["Good"] * 3 + ["Bad"] * 2
    assert win.current_run().review is panel.review
    # the export: the Good objects only, with their library match; review.csv every object's status
    from hyperapp.gui.review_panel import export_confirmed

    paths = export_confirmed(win, tmp_path / "confirmed")
    assert paths is not None, win.last_error
    good = list(csv.DictReader(io.StringIO(paths["confirmed"].read_text())))
    assert [int(r["id"]) for r in good] == panel.review.ids[:3].tolist()
    assert {r["status"] for r in good} == {"Good"}
    assert all(r["sid_match"] in ("aircraft", "runway and apron") and float(r["sid_divergence"]) >= 0 for r in good)
    every = list(csv.DictReader(io.StringIO(paths["review"].read_text())))
    assert len(every) == len(panel.review) and [r["status"] for r in every][:5] == ["Good"] * 3 + ["Bad"] * 2
    # a moved threshold numbers the objects anew: the objects both thresholds hold keep their marks
    before = {(o["row0"], o["col0"], o["row1"], o["col1"], o["pixels"]): s
              for o, s in zip(panel.review.objects, panel.review.status)}
    scores = airport.result.scores
    t2 = float(np.sort(scores[scores > airport.threshold])[2])  # the two lowest object pixels drop out
    win.results.set_threshold(t2)
    after = win.current_run().review
    assert after is panel.review and after.threshold == t2 and len(after) < len(before) + 1
    both = [(k, s) for o, s in zip(after.objects, after.status)
            if (k := (o["row0"], o["col0"], o["row1"], o["col1"], o["pixels"])) in before]
    assert both and all(before[k] == s for k, s in both)
    assert sum(s != "pending" for _, s in both) >= 3


def test_a_batch_runs_folder_opens_for_review_and_keeps_review_csv(qtbot, win, land_hdr, tmp_path):
    from hyperapp.cli import main
    from hyperapp.gui.review_panel import open_results

    out = tmp_path / "run"
    assert main(["--headless", "detect", str(land_hdr), "--method", "sam", "--targets",
                 str(land_hdr.with_name("land_targets.csv")), "--far", "0.01", "--device", "cpu",
                 "--out", str(out)]) == 0
    objects = list(csv.DictReader(io.StringIO((out / "objects.csv").read_text())))
    assert win.open_cube(land_hdr)
    assert open_results(win, out), win.last_error
    panel = win.results.review
    assert win.results.tabs.currentWidget() is panel
    assert [int(panel.table.item(i, 0).text()) for i in range(panel.table.rowCount())] == \
        [int(o["label"]) for o in objects]
    assert win.current_run().name == f"sam ({out.name})" and win.current_run().results_folder == str(out)
    assert f"from {out.name}" in panel.counts.text()
    panel.select(1)
    panel.mark("good")
    rows = list(csv.DictReader(io.StringIO((out / "review.csv").read_text())))
    assert [r["status"] for r in rows][:2] == ["Pending", "Good"] and len(rows) == len(objects)
    assert len(win.spectrum.review_items) == 1  # its mean (no library open: no match)
    # reopened later, the folder's review.csv gives its marks back; the last object's curve is gone
    assert win.open_cube(land_hdr)
    assert win.spectrum.review_items == []
    assert open_results(win, out)
    assert win.results.review.review.status[1] == "good"
    # a project keeps the folder's run as such: reopened, it is read from the folder, with its marks
    win.results.review.mark("bad", 0)
    assert win.save_project(tmp_path / "p.hyperapp.json"), win.last_error
    assert win.open_project(tmp_path / "p.hyperapp.json"), win.last_error
    run = win.current_run()
    assert run.results_folder == str(out) and run.review.status[:2] == ["bad", "good"]
    assert win.results.review.pending == []
    # another cube's folder is refused in one line
    (tmp_path / "bad").mkdir()
    assert not open_results(win, tmp_path / "bad")
    assert "no objects.csv" in win.last_error


def test_hyperapp_cube_review_folder_opens_the_window_on_the_folders_objects(qapp, land_hdr, tmp_path, monkeypatch):
    """``hyperapp CUBE --review FOLDER``: the window opens on the cube with the folder's run in the review list."""
    from PySide6.QtWidgets import QApplication

    from hyperapp.cli import main
    from hyperapp.gui.main_window import MainWindow

    monkeypatch.setenv("HYPERAPP_SETTINGS", str(tmp_path / "settings.ini"))
    out = tmp_path / "run"
    assert main(["--headless", "detect", str(land_hdr), "--method", "ace", "--targets",
                 str(land_hdr.with_name("land_targets.csv")), "--far", "0.01", "--device", "cpu",
                 "--out", str(out)]) == 0
    seen = {}
    before = set(QApplication.topLevelWidgets())  # other tests' windows, not yet deleted

    def shown(_app):  # instead of the event loop: what the window shows then
        win = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w not in before)
        seen["runs"] = [r.name for r in win.session.runs]
        seen["rows"] = win.results.review.table.rowCount()
        seen["tab"] = win.results.tabs.currentWidget() is win.results.review
        win.close()
        win.deleteLater()
        return 0

    monkeypatch.setattr(QApplication, "exec", shown)
    assert main([str(land_hdr), "--review", str(out)]) == 0
    n = len((out / "objects.csv").read_text().splitlines()) - 1
    assert seen == {"runs": [f"ace ({out.name})"], "rows": n, "tab": True} and n > 0


def test_review_option_needs_a_cube_and_a_folder(tmp_path, capsys):
    from hyperapp.cli import main

    assert main(["--review", str(tmp_path)]) == 2
    assert "needs the results' cube" in capsys.readouterr().err
    assert main(["cube.hdr", "--review", str(tmp_path / "none")]) == 2
    assert "not a results folder" in capsys.readouterr().err


def test_the_list_shows_lon_lat_where_the_objects_carry_them(qtbot):
    from hyperapp.detect.review import Review
    from hyperapp.gui.review_panel import COLUMNS, GEO_AT, ReviewPanel

    mask = np.zeros((20, 20), bool)
    mask[2:4, 2:4] = mask[10, 12] = True
    rv = Review.from_mask(mask, mask.astype(np.float32))
    panel = ReviewPanel()
    qtbot.addWidget(panel)
    panel.show_review(rv)
    assert panel.table.columnCount() == len(COLUMNS)
    for k, o in enumerate(rv.objects):
        o["lon"], o["lat"] = 7.25 + k, 46.5
    panel.show_review(rv)
    heads = [panel.table.horizontalHeaderItem(j).text() for j in range(panel.table.columnCount())]
    # beside the pixels, where 1366 x 768 shows them without a scroll (at the end they were cut off)
    assert heads == [*COLUMNS[:GEO_AT], "lon", "lat", *COLUMNS[GEO_AT:]] and heads[GEO_AT - 1] == "pixels"
    assert panel.table.item(1, GEO_AT).text() == "8.250000"
    assert panel.table.item(1, heads.index("peak score")).text() != "8.250000"
    assert "WGS84" in panel.table.horizontalHeaderItem(GEO_AT).toolTip()
    assert "Good" in panel.table.horizontalHeaderItem(1).toolTip()
    panel.show_review(None)  # no location: the columns as they were
    assert panel.table.columnCount() == len(COLUMNS)


def test_the_list_says_which_objects_are_the_runs_own_clicks(qtbot, win, land_hdr, tmp_path):
    """An object made of pixels clicked as targets for the run is the detector's training, not a find: the
    list counts them in its pixels column, the detail line says so, and review.csv has clicked_pixels (a
    first-time walker confirmed their own clicks as finds)."""
    from hyperapp.io import read_labels

    assert win.open_cube(land_hdr), win.last_error
    clicks = read_labels(land_hdr.with_name("land_targets.csv"), (win.session.cube.rows, win.session.cube.cols))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    run = run_detector(qtbot, win, "ace")
    assert run is not None and run.clicked is not None and run.clicked.sum() == clicks.sum()
    win.results.tabs.setCurrentWidget(win.results.review)
    panel = win.results.review
    rv = panel.review
    want = np.array([int(clicks[rv.labels == i].sum()) for i in rv.ids])
    assert want.any(), "some object holds a clicked pixel"
    np.testing.assert_array_equal(rv.clicked, want)
    for i in range(len(rv)):
        cell = panel.table.item(i, 2).text()
        assert cell == (f"{rv.objects[i]['pixels']} ({want[i]} clicked)" if want[i] else str(rv.objects[i]["pixels"]))
    i = int(np.flatnonzero(want)[0])
    panel.select(i)
    assert "clicked as targets for this run" in panel.detail.text()
    rows = list(csv.DictReader(io.StringIO(rv.csv_text())))
    assert [int(r["clicked_pixels"]) for r in rows] == want.tolist()
    # marks made after the run do not count: the run's own clicks are kept with it
    win.session.roi.mark_pixels(np.argwhere(~clicks)[:50], "target")
    win.results.refresh_objects()
    np.testing.assert_array_equal(panel.review.clicked, want)
