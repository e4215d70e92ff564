"""The window at a laptop's 1366 x 768 and at 1920 x 1080: every tool's Run, Cancel and progress fully on
screen, without scrolling, once the tool is chosen (issue 30)."""

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
