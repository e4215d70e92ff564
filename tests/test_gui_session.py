"""The window shows what is true now and computes nothing itself. A batch job saved from it
reproduces its masks; every plot, status line and legend tied to a cube or a run goes when they change;
class maps have legends and the score overlay a colour bar (pytest-qt, offscreen)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from .conftest import mark_clicks, run_detector

pytest.importorskip("pytestqt")


def _run(qtbot, win, method, **params):
    run = run_detector(qtbot, win, method, **params)
    assert run is not None, win.last_error
    return run


def _analyse(qtbot, win, title, **params):
    panel = win.panels[title]
    win.toolbox.choose(title)
    panel.form.set_values(params)
    panel.sample.setValue(2000)
    with qtbot.waitSignal(panel.finished, timeout=120000) as blocker:
        panel.run()
    assert blocker.args[0] is not None, win.last_error
    return panel, blocker.args[0]


@pytest.fixture
def scenes(tmp_path, land_hdr):
    """The land scene, its truth mask and its clicks copied into a folder of their own."""
    d = tmp_path / "scenes"
    d.mkdir()
    for name in ("land.hdr", "land.img", "land_truth.hdr", "land_truth.img", "land_targets.csv"):
        shutil.copy(land_hdr.with_name(name), d / name)
    return d / "land.hdr"


def test_a_saved_batch_job_reproduces_the_windows_masks(qtbot, win, scenes, tmp_path):
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job
    from hyperapp.io import open_cube

    assert win.open_cube(scenes)
    assert win.load_truth(scenes.with_name("land_truth.hdr"))
    mark_clicks(win, scenes)
    sam = _run(qtbot, win, "sam")
    ace = _run(qtbot, win, "ace")
    win.detector.far.setValue(0.01)
    ace2 = _run(qtbot, win, "ace")  # the latest ACE run, at its own false-alarm rate
    # the person moves SAM's threshold
    win.results.runs.setCurrentIndex(0)
    t = float(np.percentile(sam.result.scores, 97.0))
    win.results.set_threshold(t)
    assert win.session.runs[0].threshold == pytest.approx(t)
    sam_mask = win.current_mask().copy()
    win.results.runs.setCurrentIndex(2)
    ace_mask = win.current_mask().copy()
    assert ace.result.threshold != ace2.result.threshold
    (tmp_path / "job").mkdir()
    assert win.save_batch_job(tmp_path / "job" / "campaign"), win.last_error
    job = load_job(tmp_path / "job" / "campaign.toml")
    # only the real cube: the truth mask is no input
    assert [Path(c).name for c in job.inputs] == ["land.hdr"]
    assert list(job.truth.values()) == [str(scenes.with_name("land_truth.hdr").resolve())]
    steps = {s.method: s for s in job.steps}
    assert set(steps) == {"sam", "ace"}
    assert steps["sam"].request.threshold == pytest.approx(t) and steps["sam"].request.far is None
    assert steps["ace"].request.far == pytest.approx(0.01) and steps["ace"].request.threshold is None
    assert run_job(job, device="cpu") == 0
    out = Path(job.output) / "land"
    for s, mask in ((steps["sam"], sam_mask), (steps["ace"], ace_mask)):
        got = open_cube(out / s.name / "mask.hdr").read()[:, :, 0]
        np.testing.assert_array_equal(got, mask)  # pixel for pixel
        rep = json.loads((out / s.name / "report.json").read_text())
        assert "auc" in rep["evaluation"]  # the truth came along
    manifest = json.loads((Path(job.output) / "manifest.json").read_text())
    dets = next(iter(manifest["cubes"].values()))["detections"]
    assert dets == {steps["sam"].name: int(sam_mask.sum()), steps["ace"].name: int(ace_mask.sum())}


def test_the_window_thresholds_through_the_service_layer(qtbot, win, land_hdr, monkeypatch, tmp_path):
    """Replace hyperapp.detect.run's mask with a recognisable one: whatever the window shows and exports
    must be it (a window that thresholds on its own fails)."""
    import hyperapp.detect.finish as finish
    from hyperapp.io import open_cube

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    _run(qtbot, win, "sam")
    checker = (np.indices((128, 128)).sum(axis=0) % 2).astype(np.uint8)
    calls = []

    def fake_mask(scores, threshold, filters=None):
        calls.append(threshold)
        return checker.copy()

    # the window's masks, counts and exports (DetectionResult.remask, count_at)
    monkeypatch.setattr(finish, "mask_at", fake_mask)
    win.results.set_threshold(float(np.median(win.current_run().result.scores)))
    assert calls
    np.testing.assert_array_equal(win.view.mask_item.image[..., 3] > 0, checker.astype(bool))
    np.testing.assert_array_equal(win.current_mask(), checker)
    out = win.export("mask", tmp_path / "m", "envi")
    np.testing.assert_array_equal(open_cube(out).read()[:, :, 0], checker)
    # the counts come from the service too
    assert f"{int(checker.sum())} pixels" in win.results.counts.text()


def test_nothing_stale_after_another_cube_or_project(qtbot, win, land_hdr, sea_hdr, tmp_path):
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    _run(qtbot, win, "sam")
    assert win.save_project(tmp_path / "p.hyperapp.json")
    km, res = _analyse(qtbot, win, "k-means", k="3")
    assert "k-means" in win.statusBar().currentMessage()
    assert win.legend.isVisibleTo(win) and len(win.legend.entries()) == 3
    assert len(km.spectrum_items) == 3 and len(km.inertia_curve.getData()[0]) == 1
    # after an analysis the Results dock no longer offers the detection's slider; a button brings it back
    assert not win.results.slider.isEnabled() and win.results.show_button.isVisibleTo(win)
    assert win.view.mask_item.image is None or not (win.view.mask_item.image[..., 3] > 0).any()
    win.results.show_button.click()
    assert win.results.slider.isEnabled() and not win.legend.isVisibleTo(win)
    assert win.view.colour_bar.isVisible() and (win.view.mask_item.image[..., 3] > 0).any()
    hac, _ = _analyse(qtbot, win, "Hierarchical clustering", n_clusters=4)
    assert hac.lines
    # another cube: every plot, legend and status line of the old one is gone
    win.results.show_button.click()
    win.results.slider.setValue(win.results.slider.maximum() // 3)
    assert win.open_cube(sea_hdr)
    assert win.results.slider.value() == 0  # the threshold slider and the histogram's axis start afresh
    assert tuple(win.results.hist.getPlotItem().viewRange()[0]) == pytest.approx((0, 1))
    assert win.statusBar().currentMessage() == ""
    assert not win.legend.isVisibleTo(win) and not win.view.colour_bar.isVisible()
    for panel in win.panels.values():
        assert panel.result is None and panel.status.text() == ""
    km = win.panels["k-means"]
    assert km.spectrum_items == [] and km.inertia_curve.getData()[0] is None
    assert "chosen" not in km.quality_plot.plotItem.titleLabel.text
    assert win.panels["Hierarchical clustering"].lines == []
    assert win.detector.status.text() == "" or "marked" in win.detector.status.text()
    # reopening a project drops the HAC plots of the session before it
    hac, _ = _analyse(qtbot, win, "Hierarchical clustering", n_clusters=3)
    assert win.open_project(tmp_path / "p.hyperapp.json"), win.last_error
    qtbot.waitUntil(lambda: win.worker is None, timeout=120000)
    assert win.panels["Hierarchical clustering"].lines == []
    assert win.results.runs.count() == 1


def test_legends_colour_bar_and_operating_point(qtbot, win, land_hdr):
    from hyperapp.detect.finish import operating_point

    assert win.open_cube(land_hdr)
    # before any run: no histogram, no threshold line
    assert not win.results.hist_line.isVisible() and "no result" in win.results.hist.plotItem.titleLabel.text
    win.load_truth(land_hdr.with_name("land_truth.hdr"))
    mark_clicks(win, land_hdr)
    run = _run(qtbot, win, "rbfn")
    bar = win.view.colour_bar
    assert bar.isVisible()
    # its label stands beside the tick values, not over the gradient
    assert bar.getAxis("right").labelText.startswith("score") and not bar.getAxis("left").labelText
    assert "99.9th p" in bar.getAxis("right").labelText  # the colours saturate beyond the bar's ends
    lo, hi = bar.levels()
    assert lo < hi and lo >= float(np.nanmin(run.result.scores)) - 1e-6
    # the ROC's dot sits at the threshold's (false-alarm rate, detection rate) and follows the slider
    t = float(np.percentile(run.result.scores, 99.0))
    win.results.set_threshold(t)
    far, pd = operating_point(run.result.scores, win.session.truth, t, win.session.roi.targets)
    x, y = win.results.roc_point.getData()
    assert y[0] == pytest.approx(pd) and 10 ** x[0] == pytest.approx(max(far, win.results._min_far), rel=1e-6)
    assert f"{pd:.3f}" in win.results.roc.plotItem.titleLabel.text
    # and on the colour bar: a line at its share of the bar, or at the bar's end when beyond it, said
    lo, hi = bar.levels()
    assert win.view.bar_mark.isVisible()
    assert win.view.bar_mark.value() == pytest.approx(256 * (min(max(t, lo), hi) - lo) / (hi - lo), rel=1e-6)
    win.results.set_threshold(float(np.nanmax(run.result.scores)))
    win.results.flush()
    assert win.view.bar_mark.value() == pytest.approx(256.0) and "above" in bar.getAxis("right").labelText
    # class maps: a legend naming each class in its colour (forest: the ROI classes' names)
    from hyperapp.models.registry import ANALYSES

    for title, params in (("Gaussian mixture", {"k": "3", "covariance": "diag"}), ("SOM", {"epochs": 3})):
        panel, res = _analyse(qtbot, win, title, **params)
        # headed by the method that drew it, and the tool that drew it is remembered
        assert win.legend.isVisibleTo(win) and win.legend.title == ANALYSES[res.method].title and win.shown == title
        n = len(np.unique(res.labels[res.labels >= 0]))
        assert len(win.legend.entries()) >= n and not bar.isVisible()
        assert len(win.legend.entries()) <= 12  # a readable number of classes (SOM: 8 codebook clusters)


def test_units_and_band_names(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    assert win.spectrum.getAxis("bottom").labelText == "wavelength (nm)"  # the header's "Nanometers"
    assert "Nanometers" not in win.spectrum.getAxis("bottom").labelText
    km, res = _analyse(qtbot, win, "k-means", k="2")
    # the cluster spectra on the Spectrum dock's reflectance scale
    y = km.spectrum_items[0].getData()[1]
    assert y.max() < 2.0 and km.spectra_plot.getAxis("left").labelText == "reflectance"
    bp, res = _analyse(qtbot, win, "Band reduction", n_subsets=30)
    cell = bp.table.item(0, 0).text()
    assert "nanometers" in cell.lower() or "nm" in cell  # bands named with their wavelengths


def test_analysis_plots_say_run_until_the_tool_has_a_result(qtbot, win, land_hdr, sea_hdr):
    assert win.open_cube(land_hdr)
    for title, panel in win.panels.items():
        win.toolbox.choose(title)
        shown = win.toolbox.plots.currentWidget()
        # a plain line instead of empty plots before the tool's first run
        assert shown is panel.plots and not panel.has_plots(), title
        assert panel.plots.currentWidget().text() == f"Run {title} to see its plots here."
    som, res = _analyse(qtbot, win, "SOM", rows=4, cols=4, epochs=2)
    assert som.has_plots() and som.plots.currentWidget() is som.tabs
    km = win.panels["k-means"]
    assert not km.has_plots()  # another tool's run leaves this one's line
    # a new cube: the line again, nothing of the old cube's map
    assert win.open_cube(sea_hdr)
    win.toolbox.choose("SOM")
    assert not som.has_plots() and som.plots.currentWidget().text() == "Run SOM to see its plots here."


def test_som_planes_and_errors_on_the_spectrum_docks_scale(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    som, res = _analyse(qtbot, win, "SOM", rows=4, cols=5, epochs=2)
    m = res.model
    som.band.setValue(7)
    # the land header's reflectance scale factor (10000) applied, as the Spectrum dock does
    plane = np.asarray(som.plane_img.image, float)
    np.testing.assert_allclose(plane, np.asarray(m.codebook_)[:, 7].reshape(4, 5) / 10000.0, rtol=1e-5)
    assert plane.max() < 2.0 and som.plane_bar.getAxis("right").labelText == "reflectance"
    assert "reflectance" in som.umat_bar.getAxis("right").labelText
    np.testing.assert_allclose(som.umat_img.image, np.asarray(m.umatrix_) / 10000.0, rtol=1e-5)
    np.testing.assert_allclose(som.qe_curve.getData()[1], m.quantization_error_ / 10000.0, rtol=1e-5)
    assert "reflectance" in som.err_plot.getAxis("left").labelText
    # the topographic error (a share of spectra) on its own axis, as computed
    np.testing.assert_allclose(som.te_curve.getData()[1], m.topographic_error_)
    # the band named by its wavelength, with units
    w = win.session.cube.wavelengths[7]
    assert f"{w:.4g} nm" in som.band_label.text() and f"{w:.4g} nm" in som.plane_plot.getPlotItem().titleLabel.text


def test_marks_status_and_costs(qtbot, win, land_hdr):
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    # each click ringed at a fixed screen size in its class colour, visible at any zoom
    assert len(win.view.marks.data) == 5
    # the detector's status line belongs to the method it ran
    _run(qtbot, win, "sam")
    assert win.detector.status.text().startswith("sam #1")
    # the status bar says the total in words, the stages in its tooltip
    msg = win.statusBar().currentMessage()
    assert msg.startswith("sam #1 finished in ") and "click to result" not in msg and "(" not in msg
    assert "fit:" in win.statusBar().toolTip() and " ms" in win.statusBar().toolTip()
    win.statusBar().showMessage("something else")
    assert win.statusBar().toolTip() == ""
    win.detector.set_method("ace")  # the line names the run still shown as another method's, not ACE's
    assert win.detector.status.text().startswith("Shown: sam #1 finished:")
    assert win.detector.status.text().endswith("(the form above holds the next run's method)")
    # the costly analyses say their cost, or start CPU-sized
    hac = win.panels["Hierarchical clustering"]
    assert hac.sample.value() == 3000 and "pairwise distances" in hac.cost.text()
    bands = win.panels["Band reduction"]
    bands.set_method("band-subsets")
    assert bands.form.values()["n_subsets"] == 500 and "CPU" in bands.note.text()
    # the mixture too: a smaller sample and one start on the CPU, and its cost up front, following the form
    gmm = win.panels["Gaussian mixture"]
    assert gmm.sample.value() == 5000 and gmm.form.values()["n_init"] == 1
    assert "Sample size 5,000" in gmm.note.text() and "Starts 1" in gmm.note.text()
    assert "palette(mid)" not in gmm.note.styleSheet()  # readable, not pale grey
    # the note says only what still holds the CPU's value (it went on saying "Starts 1" after 3 was set)
    gmm.form.set_values({"n_init": 3})
    gmm.form.changed.emit()
    assert "Sample size 5,000" in gmm.note.text() and "Starts" not in gmm.note.text()
    gmm.sample.setValue(20000)
    assert gmm.note.text() == ""
    gmm.sample.setValue(5000)
    gmm.form.set_values({"n_init": 1})
    gmm.form.changed.emit()
    assert "Sample size 5,000" in gmm.note.text() and "Starts 1" in gmm.note.text()
    from hyperapp.analyse.run import Selection

    # the sample and the 5 clicks, each pixel once: what the run takes
    taken = Selection("sample", 5000, 0).indices((128, 128), win.session.roi.labels).size
    assert f"{taken:,} spectra" in gmm.cost.text() and "1 start" in gmm.cost.text()
    win.session.roi.rectangle(100, 100, 110, 115, "background")  # the sample takes marked pixels too
    gmm.form.changed.emit()
    taken = Selection("sample", 5000, 0).indices((128, 128), win.session.roi.labels).size
    assert gmm.spectra_count() == taken and f"{taken:,} spectra" in gmm.cost.text()
    gmm.form.set_values({"k": "2..4"})
    assert "k = 2..4 (3 fits)" in gmm.cost.text()


def test_a_run_with_no_targets_says_what_to_do_in_the_windows_words(qtbot, win, land_hdr):
    """Nothing marked and no library target: the dialog names what to click, not the command line's
    options (it said "--targets")."""
    assert win.open_cube(land_hdr)
    for method in ("ace", "ffbp"):
        win.detector.set_method(method)
        assert win.run_detector() is None
        assert "click target pixels on the image" in win.last_error and "--" not in win.last_error
    assert "Train FFBP on another scene" in win.last_error
    assert run_detector(qtbot, win, "rx") is not None  # takes no targets: it runs


def test_the_roc_title_says_when_the_truth_counts_more_false_alarms_than_asked(qtbot):
    """At the run's threshold, set for a false-alarm rate, the ROC's title says when the truth counts many
    more false alarms than asked (the RBFN's threshold leaves out its network's top mode as likely targets;
    bright non-targets among them gave 0.0043 for 0.001, said nowhere); a threshold with none says where
    its dot is drawn. Two short lines: one ran past the plot at 1366 x 768."""
    from hyperapp.gui.results_panel import ResultsPanel

    panel = ResultsPanel()
    qtbot.addWidget(panel)
    scores = np.arange(1000, dtype=np.float32).reshape(25, 40)
    truth = np.zeros((25, 40), bool)
    truth.reshape(-1)[-5:] = True
    t = 979.5  # above it: 5 targets and 15 of 995 background pixels, 0.015
    panel.show_result(scores, t, truth, None, "", far_asked=0.001)
    panel.flush()
    title = panel.roc.plotItem.titleLabel.text
    assert "false alarms 0.015<br>15.1x the 0.001 asked" in title, title
    # no line wider than the ROC plot of the Results dock at 1366 x 768 (about 660 pixels): a longer one
    # widened the plot's layout past the dock, which then cut the curve's right end off too
    panel.resize(660, 320)
    panel.show()
    qtbot.wait(50)
    assert panel.roc.plotItem.titleLabel.minimumWidth() <= panel.roc.width(), title
    panel.set_threshold(995.5)
    panel.flush()
    assert "no false alarm: drawn at the axis' left end" in panel.roc.plotItem.titleLabel.text
    panel.show_result(scores, t, truth, None, "", far_asked=0.01)
    panel.flush()
    assert "<br>" not in panel.roc.plotItem.titleLabel.text  # 1.5x the rate asked: nothing to say


def test_a_cancelled_run_of_the_last_cube_says_nothing_on_the_new_one(qtbot, win, land_hdr, sea_hdr):
    """A run of the last cube, cancelled when another opened, said "cancelled" on the new cube's status line
    (found by a first-time walk): a worker's signals reach the window only while its cube is shown."""
    import time

    from hyperapp.gui.worker import wait_for_workers

    assert win.open_cube(land_hdr)
    started = []

    def slow(progress):
        started.append(1)
        while True:
            progress(0.5, "working")  # raises Cancelled once the run is cancelled
            time.sleep(0.01)

    win._start_worker(slow, lambda result: None, "ffbp")
    qtbot.waitUntil(lambda: bool(started))
    assert win.open_cube(sea_hdr)
    wait_for_workers()
    qtbot.waitUntil(lambda: win.worker is None)
    assert "cancelled" not in win.detector.status.text()
    assert "pixels marked" in win.detector.status.text()


def test_a_new_run_after_a_map_is_not_shown_again(qtbot, win, land_hdr):
    """The first run after an analysis's map replaces the map: the status bar says so, not "again"."""
    assert win.open_cube(land_hdr)
    _analyse(qtbot, win, "k-means", k="3")
    mark_clicks(win, land_hdr)
    _run(qtbot, win, "ace")
    said = win.statusBar().currentMessage()
    assert "again" not in said


def test_picking_another_method_during_a_run_keeps_its_progress(qtbot, win, land_hdr):
    """Picking another method while a run goes left a blank line and an empty bar, as if nothing ran (found
    by a first-time walk): the running job's line and bar stay until it ends."""
    import threading

    assert win.open_cube(land_hdr)
    go = threading.Event()

    def slow(progress):
        progress(0.5, "FFBP: training the window networks")
        go.wait(5)

    win._start_worker(slow, lambda result: None, "ffbp")
    qtbot.waitUntil(lambda: win.detector.progress.value() > 0)
    win.detector.set_method("ace")
    assert win.detector.status.text() == "FFBP: training the window networks"
    assert win.detector.progress.value() > 0
    go.set()
    qtbot.waitUntil(lambda: win.worker is None)


def test_an_empty_roc_keeps_a_readable_axis(qtbot):
    """Without a truth mask the ROC's log axis showed bare minor ticks "2 ... 9" (a first-time walk): it keeps
    the decades a curve would have, and a result with a truth takes its own range again."""
    from hyperapp.gui.results_panel import ResultsPanel

    panel = ResultsPanel()
    qtbot.addWidget(panel)
    scores = np.arange(1000, dtype=np.float32).reshape(25, 40)
    panel.show_result(scores, 990.0, None, None, "")
    labels = [t[1] for t in panel.roc.getAxis("bottom")._tickLevels[0]]
    assert labels == ["0.0001", "0.001", "0.01", "0.1", "1"]
    assert panel.roc.getPlotItem().viewRange()[0][0] < -3.9
    truth = np.zeros((25, 40), bool)
    truth.reshape(-1)[-5:] = True
    panel.show_result(scores, 990.0, truth, None, "")
    x0, x1 = panel.roc.getPlotItem().viewRange()[0]
    assert x0 <= np.log10(1 / 995) and x1 >= -0.01  # the whole curve, from its least false-alarm rate to 1


def test_a_long_title_wraps_inside_its_plot_and_axis_labels_stay_centred(qtbot):
    """A long title made a plot in a narrow dock wider than the dock (its axis' end cut off), and a longer
    axis label ran past the axis' end until the next resize (two first-time walks, the Spectrum dock at
    1366 x 768): the title wraps at the plot's width, the label is centred when it changes."""
    import pyqtgraph as pg

    import hyperapp.gui  # noqa: F401  (installs hyperapp.gui.plot_labels)

    w = pg.PlotWidget()
    qtbot.addWidget(w)
    w.resize(320, 300)
    w.show()
    w.setLabel("bottom", "band")
    qtbot.wait(30)
    w.setTitle("Hover the image: the spectrum under the cursor shows here (P pins it)")
    w.setLabel("bottom", "wavelength (nanometers)")
    qtbot.wait(50)
    item, title = w.getPlotItem(), w.getPlotItem().titleLabel
    assert item.size().width() <= w.width() + 1
    assert title.itemRect().width() <= item.size().width() + 1 and title.itemRect().height() > 30  # wrapped
    assert title.size().height() >= title.itemRect().height() - 1  # every line in its row
    axis = item.getAxis("bottom")
    centre = axis.label.pos().x() + axis.label.boundingRect().width() / 2
    assert abs(centre - axis.size().width() / 2) <= 2


def test_exporting_boxes_of_a_run_without_boxes_says_so_before_asking_for_a_file(qtbot, win, land_hdr, monkeypatch):
    """File > Export > Boxes after an RBFN run asked for a file, then said there were no boxes, with the last
    export's line still in the status bar (a first-time walk): it says so at once."""
    from PySide6.QtWidgets import QFileDialog

    asked = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: asked.append(1) or ("", "")))
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    _run(qtbot, win, "ace")
    win.statusBar().showMessage("exported objects to somewhere.csv")
    win._export_dialog("boxes")
    assert not asked and "no boxes to export" in win.last_error
    assert "exported" not in win.statusBar().currentMessage()


def test_a_threshold_move_drops_the_chosen_objects_spectrum_title(qtbot, win, land_hdr):
    """After the threshold moved, the Spectrum dock still said "object 2 (Pending)" where the objects had
    been numbered again (a first-time walk): the chosen object's curves and title go together."""
    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run = _run(qtbot, win, "ace")
    win.results.tabs.setCurrentWidget(win.results.review)
    panel = win.results.review
    assert panel.table.rowCount() > 0
    panel.select(0)
    assert win.spectrum.getPlotItem().titleLabel.text.startswith("object ")
    win.results.set_threshold(run.threshold * 0.5 if run.threshold > 0 else run.threshold - 1.0)
    win.results.flush()
    qtbot.wait(20)
    assert not win.spectrum.review_items
    assert not win.spectrum.getPlotItem().titleLabel.text.startswith("object ")
