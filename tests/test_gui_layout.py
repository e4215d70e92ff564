"""The window at a laptop's 1366 x 768 and at 1920 x 1080: every tool's Run, Cancel and progress fully on
screen, without scrolling, once the tool is chosen."""

import pytest

pytest.importorskip("pytestqt")

SIZES = [(1366, 768), (1920, 1080)]


def fully_shown(widget, window) -> bool:
    """The widget is shown, none of it clipped by a scroll area or a dock, and inside the window."""
    from PySide6.QtCore import QPoint, QRect

    if not widget.isVisible():
        return False
    if widget.visibleRegion().boundingRect() != widget.rect():
        return False
    top_left = widget.mapTo(window, QPoint(0, 0))
    return QRect(QPoint(0, 0), window.size()).contains(QRect(top_left, widget.size()))


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_tools_run_strip_is_on_screen(qtbot, win, land_hdr, size):
    win.resize(*size)
    assert win.open_cube(land_hdr)
    qtbot.wait(50)
    assert win.width() == size[0] and win.height() == size[1]
    from hyperapp.gui.library_dock import LIBRARY_TOOL

    # the spectral library has no Run of its own: its targets feed the detector's
    titles = [t for t in win.toolbox.titles() if t != LIBRARY_TOOL]
    assert len(titles) == 1 + len(win.panels)
    for title in titles:
        win.toolbox.choose(title)
        qtbot.wait(20)
        page = win.toolbox.pages.currentWidget()
        for name in ("run_button", "cancel_button", "progress"):
            assert fully_shown(getattr(page, name), win), f"{title}: {name} not fully on screen at {size}"
        # every method of the tool, whatever its form's length
        method = getattr(page, "method", None)
        for i in range(method.count() if method is not None else 0):
            method.setCurrentIndex(i)
            qtbot.wait(10)
            assert fully_shown(page.run_button, win), f"{title} / {method.itemText(i)} at {size}"
    # the forest's class buttons are in view too
    forest = win.panels["Forest classification"]
    win.toolbox.choose(forest.title)
    qtbot.wait(20)
    for b in (forest.add_button, forest.mark_button, forest.remove_button):
        assert fully_shown(b, win), f"{b.text()} not on screen at {size}"
    # the library tool fits its column: its plot (and the plot's axis) in view without scrolling
    win.toolbox.choose(LIBRARY_TOOL)
    qtbot.wait(20)
    assert fully_shown(win.library_dock.plot.viewport(), win) and fully_shown(win.library_dock.status, win), size
    # the image keeps most of the window, and the results' plots stay readable
    assert win.view.width() >= 0.45 * size[0] and win.view.height() >= 0.4 * size[1]
    win.results_dock.raise_()
    qtbot.wait(20)
    assert win.results.hist.height() >= 150 and fully_shown(win.results.slider, win)


def test_one_tool_list_no_overflowing_tabs(win):
    from PySide6.QtWidgets import QDockWidget

    docks = [d.windowTitle() for d in win.findChildren(QDockWidget)]
    assert sorted(docks) == ["Analysis plots", "Compare", "Results", "Spectrum", "Tools"]
    assert win.toolbox.titles()[0] == "Detect targets"
    assert set(win.toolbox.titles()[1:]) == set(win.panels) | {"Spectral library"}


def test_float_options_read_as_typed(qtbot, win):
    """A float option shows the digits it needs ("0.001", "1e-06"), not five fixed decimals ("0.00100",
    "0.00000" for 1e-6), and takes what a person types ("2.5e-3")."""
    assert win.detector.far.text() == "0.001"
    win.detector.set_method("rbfn")
    texts = {k: w.text() for k, w in win.detector.param_form.editors.items() if hasattr(w, "text")}
    assert texts["ridge"] == "0.003" and texts["width_scale"] == "3" and texts["min_fill"] == "0.3"
    gmm = win.panels["Gaussian mixture"]
    gmm.set_method("gmm")
    box = gmm.form.editors["reg_covar"]
    assert box.text() == "1e-06" and gmm.form.values()["reg_covar"] == pytest.approx(1e-6)
    box.lineEdit().setText("2.5e-3")
    box.interpretText()
    assert gmm.form.values()["reg_covar"] == pytest.approx(2.5e-3) and box.text() == "0.0025"


def cut_axis_labels(root) -> list[str]:
    """The axis labels of the plots shown under ``root`` that run past their plot's edges (cut off)."""
    import pyqtgraph as pg
    from PySide6.QtCore import QRectF

    cut = []
    for plot in root.findChildren(pg.PlotWidget):
        if not plot.isVisible():
            continue
        # a text item pads its text by 4 px: a label is cut when it runs further than that past the plot
        shown = QRectF(plot.mapToScene(plot.viewport().rect()).boundingRect()).adjusted(-5, -5, 5, 5)
        for name, axis in plot.getPlotItem().axes.items():
            axis = axis["item"]
            if not axis.isVisible() or not axis.label.isVisible() or not axis.labelText:
                continue
            if not shown.contains(axis.label.sceneBoundingRect()):
                cut.append(f"{plot.getPlotItem().titleLabel.text!r} {name}: {axis.labelText!r}")
    return cut


def test_no_axis_label_is_cut_at_a_laptop(qtbot, win, land_hdr):
    """At 1366 x 768 every plot of every tool, after a run, shows its axis labels whole."""
    from .conftest import mark_clicks, run_detector

    win.resize(1366, 768)
    assert win.open_cube(land_hdr)
    win.load_truth(land_hdr.with_name("land_truth.hdr"))
    mark_clicks(win, land_hdr)
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    assert run_detector(qtbot, win, "sam") is not None
    for i in range(win.results.tabs.count()):
        win.results.tabs.setCurrentIndex(i)
        qtbot.wait(20)
        assert not cut_axis_labels(win.results)
    light = {"k-means": ("kmeans", {"k": "2..4"}), "Band reduction": ("band-subsets", {"n_subsets": 20}),
             "SOM": ("som", {"rows": 4, "cols": 4, "epochs": 2}), "Gaussian mixture": ("gmm", {"k": "3", "max_iter": 10}),
             "Forest classification": ("forest", {"n_trees": 5}), "Hierarchical clustering": ("hac", {})}
    for title, (method, params) in light.items():
        panel = win.panels[title]
        win.toolbox.choose(title)
        panel.set_method(method)
        panel.form.set_values(params)
        panel.sample.setValue(500)
        with qtbot.waitSignal(panel.finished, timeout=60000) as blocker:
            panel.run()
        assert blocker.args[0] is not None, win.last_error
        for i in range(panel.tabs.count()):
            panel.tabs.setCurrentIndex(i)
            qtbot.wait(20)
            assert not cut_axis_labels(panel.tabs), f"{title}, tab {panel.tabs.tabText(i)}"


def test_the_empty_spectrum_says_what_it_is_for(win, land_hdr):
    """Before a cube, and after one opens, the Spectrum plot says what shows there, not bare 0..1 axes."""
    assert win.spectrum.getPlotItem().titleLabel.text.startswith("Open a cube")
    assert win.spectrum.getAxis("bottom").labelText == "wavelength"
    assert win.open_cube(land_hdr)
    assert win.spectrum.getPlotItem().titleLabel.text.startswith("Hover the image")
    win._hover(3, 3)
    assert win.spectrum.getPlotItem().titleLabel.text == "pixel (3, 3)"
