"""The spectral-library dock and the MTMF scatter, driven through their public API (pytest-qt, offscreen)."""

import numpy as np
import pytest

from .conftest import ecostress_db, run_detector

pytest.importorskip("pytestqt")


def _run(qtbot, win, method, **params):
    return run_detector(qtbot, win, method, timeout=60000, **params)


def test_library_targets_run_without_clicks_and_scatter_selects(qtbot, win, land_hdr, tmp_path):
    from hyperapp.io import read_labels
    from hyperapp.io.speclib import SpectralLibrary, read_library, write_library

    assert win.open_cube(land_hdr)
    cube = win.session.cube
    truth = read_labels(land_hdr.with_name("land_truth.hdr"), (cube.rows, cube.cols)) > 0
    X = cube.to_float32()
    # a library in micrometres and reflectance 0-1: resampled and rescaled onto the cube by the dock
    wl = np.asarray(cube.wavelengths) / 1000.0
    write_library(SpectralLibrary(["metal", "grass"], np.stack([X[truth].mean(0), X[~truth].mean(0)]) / 1e4, wl,
                                  "micrometers"), tmp_path / "lib.sli")
    dock = win.library_dock
    assert dock.open_library(tmp_path / "lib.sli")
    assert dock.tree.topLevelItemCount() == 2
    assert "multiplied by 10000" in dock.status.text()
    assert dock.plot.getAxis("bottom").labelText.startswith("wavelength")
    # drawn on the Spectrum dock's scale (reflectance), the list the legend: a swatch of each curve's colour
    assert dock.plot.getAxis("left").labelText == "reflectance"
    curves = dock.plot.getPlotItem().listDataItems()
    np.testing.assert_allclose(curves[0].getData()[1], X[truth].mean(0) / 1e4, rtol=1e-3)
    assert dock.plot.getPlotItem().legend is None and not dock.tree.topLevelItem(0).icon(0).isNull()
    assert not dock.use.isChecked()
    dock.set_role(["metal"], "target")
    assert dock.use.isChecked() and dock.names_with("target") == ["metal"]
    win.session.truth = truth
    run = _run(qtbot, win, "ace")
    rep = run.result.report
    assert rep["n_target_pixels"] == 0 and rep["signatures"]["target_names"] == ["metal"]
    assert rep["evaluation"]["auc"] > 0.99
    # the run's line says which library spectrum it ran from (a walker could not tell)
    assert win.detector.status.text().startswith(f"{run.name} from the library's metal finished")
    # MTMF: the scatter shows score against infeasibility; a drawn polygon selects pixels on the image
    run = _run(qtbot, win, "mtmf")
    sc = dock.scatter
    assert sc.score is not None and sc.score.size == cube.rows * cube.cols
    # brought forward: the plots dock in front, showing the scatter
    assert win.toolbox.plots.currentWidget() is sc and not win.plots_dock.visibleRegion().isEmpty()
    mask = sc.set_polygon([(0.5, -1.0), (10.0, -1.0), (10.0, 100.0), (0.5, 100.0)])
    expect = (run.result.scores > 0.5) & (run.result.maps["infeasibility"] < 100.0)
    assert mask.shape == (cube.rows, cube.cols) and (mask == expect).all() and mask.any()
    sc.clear_selection()
    assert sc.mask is None
    assert "pixels" in sc.info.text() and sc.plot.getPlotItem().titleLabel.text
    # undesired for a method that takes none: one dialog before any worker starts, in the CLI's words
    dock.set_role(["grass"], "undesired")
    win.detector.set_method("ace")
    assert win.run_detector() is None and win.worker is None
    assert "does not use undesired" in (win.last_error or "")
    # the clicked targets' mean and the ROI class means become entries, and the library saves
    win.session.roi.mark_pixels(np.argwhere(truth)[:3], "target")
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    n0 = len(dock.library)
    dock.library = None  # a new library sampled like the cube
    name = dock.add_clicked_mean()
    added = dock.add_roi_means()
    # the target class's mean is the clicked targets' mean, already held: only the background is added
    assert name in dock.library.names and len(added) == 1 and n0 == 2
    assert "Not added again" in dock.status.text() and "target" in dock.status.text()
    np.testing.assert_allclose(dock.library.spectra[0],
                               np.stack([X[r, c] for r, c in np.argwhere(truth)[:3]]).mean(0), rtol=1e-5)
    assert dock.save_library(tmp_path / "mine.sli")
    assert read_library(tmp_path / "mine.sli").names == dock.library.names
    # another cube: nothing of the old run's scatter, its title or its pixel count stays; the library is
    # kept, but Train & Run no longer takes its targets (unticked, and the status line says so)
    dock.set_role([name], "target")
    assert dock.use.isChecked()
    assert win.open_cube(land_hdr)
    assert not dock.use.isChecked() and dock.tree.topLevelItemCount() == len(dock.library)
    assert "no longer uses the library's targets" in dock.status.text()
    assert sc.score is None and sc.info.text().startswith("Run MTMF") and not sc.plot.getPlotItem().titleLabel.isVisible()


_ROWS = "".join(f"{w},0.3,0.4\n" for w in range(400, 2600, 100))


@pytest.mark.parametrize("text, names, words", [
    ("wavelength,a\n400,x\n", None, "line 2"),
    ("wavelength,a\n400,0.3\n400,0.3\n", None, "wavelength 400 repeats"),
    ("wavelength,a\n400,1e300\n500,0.3\n", None, "spectrum 'a' has a value that is not finite in float32"),
    ("wavelength,a\n400,0\n500,0\n", None, "spectrum 'a' is zero at every wavelength"),
    ("wavelength,a,a\n" + _ROWS, ["a"], "2 spectra in the library are named 'a'"),
    ("wavelength,a\n", None, "the CSV holds no spectra"),
    (None, None, "this is an image cube's header, not a spectral library"),
])
def test_bad_library_shows_one_error(qtbot, win, land_hdr, tmp_path, text, names, words):
    """The window's library tool reads through read_library: the CLI's refusals, in its error dialog."""
    assert win.open_cube(land_hdr)
    path = land_hdr if text is None else tmp_path / "bad.csv"
    if text is not None:
        path.write_text(text)
    assert not win.library_dock.open_library(path, names)
    assert str(path) in win.last_error and words in win.last_error and "\n" not in win.last_error.strip()


def _drive_picker(qtbot, dock, then):
    """Run ``then(picker)`` on the database picker once the dock has it open (it is modal)."""
    from PySide6.QtCore import QTimer

    from hyperapp.gui.database_picker import DatabasePicker

    def drive():
        picker = dock.findChild(DatabasePicker)
        if picker is None or not picker.isVisible():
            QTimer.singleShot(20, drive)
            return
        then(picker)

    QTimer.singleShot(0, drive)


def test_database_spectra_picked_in_a_dialog_and_detected(qtbot, win, land_hdr, tmp_path):
    db = ecostress_db(tmp_path)
    assert win.open_cube(land_hdr)
    dock = win.library_dock
    seen = {}

    def pick(picker):
        seen["total"] = picker.count.text()
        assert not picker.ok_button.isEnabled()  # nothing chosen yet
        assert picker.set_filter("quartz") == 2
        picker.select(["Quartz SiO2 #2"])
        assert picker.set_filter("  AVENA ") == 1  # the chosen quartz stays chosen while hidden
        picker.list.item(2).setSelected(True)
        seen["count"] = picker.count.text()
        seen["tip"] = picker.list.item(2).toolTip()
        assert picker.list.item(2).text() == seen["tip"]  # the description in the list, not only on hover
        picker.ok_button.click()

    _drive_picker(qtbot, dock, pick)
    assert dock.open_library(db)
    assert seen["total"] == "3 of 3 spectra shown, 0 chosen" and seen["count"] == "1 of 3 spectra shown, 2 chosen"
    assert seen["tip"] == "Avena fatua (mineral, silicate): 0.352-2.6 µm, 563 samples"
    assert dock.library.names == ["Quartz SiO2 #2", "Avena fatua"]
    assert [dock.tree.topLevelItem(i).text(0) for i in range(2)] == dock.library.names
    status = dock.status.text()
    assert status.startswith("eco.db: 2 spectra") and "resampled from each spectrum's own samples (226-563)" in status
    curves = dock.plot.getPlotItem().listDataItems()
    assert len(curves) == 2 and curves[0].getData()[0].size == win.session.cube.bands
    dock.set_role(["Avena fatua"], "target")
    dock.set_role(["Quartz SiO2 #2"], "undesired")
    run = _run(qtbot, win, "osp")
    sig = run.result.report["signatures"]
    assert sig["target_names"] == ["Avena fatua"] and sig["undesired_names"] == ["Quartz SiO2 #2"]
    assert np.isfinite(run.result.scores).all()


def test_database_picker_cancel_and_bad_database(qtbot, win, land_hdr, tmp_path):
    from hyperapp.io.speclib import SpectralLibrary

    db = ecostress_db(tmp_path)
    assert win.open_cube(land_hdr)
    dock = win.library_dock
    before = dock.library = SpectralLibrary(["mine"], np.ones((1, win.session.cube.bands)))
    dock.refresh()
    status = dock.status.text()

    def cancel(picker):
        picker.select(["Avena fatua"])
        picker.reject()

    _drive_picker(qtbot, dock, cancel)
    assert not dock.open_library(db)
    assert dock.library is before and dock.tree.topLevelItem(0).text(0) == "mine" and dock.status.text() == status
    assert win.last_error is None
    (tmp_path / "broken.db").write_bytes(b"SQLite format 3\x00" + b"not a database" * 64)
    assert not dock.open_library(tmp_path / "broken.db")
    assert "broken.db: cannot read the SQLite database" in win.last_error and dock.library is before


def test_a_spectrum_not_saved_yet_is_said_and_a_job_waits_for_the_file(qtbot, win, land_hdr, tmp_path):
    """A spectrum added to an open library lives in no file until the library is saved: the tool says so, a
    run from it takes it as an array (its request names no file that lacks it), and a batch job saved then
    is refused in one line, before any file is written; once the library is saved and run again, the job
    names the saved file (a walker's job named the old file, which failed on the missing spectrum)."""
    from hyperapp.io import read_labels
    from hyperapp.io.speclib import SpectralLibrary, write_library

    assert win.open_cube(land_hdr)
    cube = win.session.cube
    truth = read_labels(land_hdr.with_name("land_truth.hdr"), (cube.rows, cube.cols)) > 0
    X = cube.to_float32()
    write_library(SpectralLibrary(["grass"], X[~truth].mean(0)[None, :], np.asarray(cube.wavelengths),
                                  "nanometers"), tmp_path / "lib.sli")
    dock = win.library_dock
    assert dock.open_library(tmp_path / "lib.sli")
    win.session.roi.mark_pixels(np.argwhere(read_labels(land_hdr.with_name("land_targets.csv"),
                                                        (cube.rows, cube.cols))), "target")
    name = dock.add_clicked_mean()
    assert dock.unsaved() == [name] and "(1 not saved yet)" in dock.status.text()
    dock.set_role([name], "target")
    assert dock.settings() == {}  # the file does not hold it: the run takes it as an array
    run = _run(qtbot, win, "ace")
    assert run.unsaved_spectra == (name,) and run.request.target_spectra is None
    job = tmp_path / "jobs" / "job.toml"
    job.parent.mkdir()
    assert not win.save_batch_job(job)
    assert "no file holds" in win.last_error and name in win.last_error and not any(job.parent.iterdir())
    assert dock.save_library(tmp_path / "lib2.sli") and dock.unsaved() == []
    assert dock.settings()["target_spectra"] == str(tmp_path / "lib2.sli")
    run = _run(qtbot, win, "ace")
    assert run.unsaved_spectra == () and run.request.target_spectra == str(tmp_path / "lib2.sli")
    assert win.save_batch_job(job), win.last_error
    text = job.read_text()
    assert "lib2.sli" in text and name in text


def test_a_run_that_did_not_start_says_so_in_the_detect_tools_line(qtbot, win, land_hdr):
    """Run refused (no targets): beside the dialog, the Detect tool's line says the run did not start, where
    the last run's line stayed and read as this one's result (a walker's)."""
    from hyperapp.io import read_labels

    assert win.open_cube(land_hdr)
    shape = (win.session.cube.rows, win.session.cube.cols)
    win.session.roi.mark_pixels(np.argwhere(read_labels(land_hdr.with_name("land_targets.csv"), shape)), "target")
    run = _run(qtbot, win, "ace")
    assert win.detector.status.text().startswith(f"{run.name} finished")
    win.session.roi.clear()
    win.detector.set_method("ace")
    assert win.run_detector() is None
    said = win.detector.status.text()
    assert said.startswith("ACE") and "did not run: " in said and "needs targets" in said
