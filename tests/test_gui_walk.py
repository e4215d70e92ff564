"""The first-time walk's findings (issue 51), each class of problem, driven through the window."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")


def test_results_dock_offers_the_threshold_that_keeps_the_clicked_kind(qtbot, win, abu):
    """RBFN after five clicks on the airport's aircraft: the default rate keeps a few objects; the
    Results dock says so and one click keeps every pixel scoring like the clicked targets."""
    from hyperapp.detect.finish import count_at
    from hyperapp.detect.suggest import suggestion_words

    from .conftest import run_detector
    from .test_suggest import aircraft_clicks

    assert win.open_cube(abu, "data")
    clicks, _ = aircraft_clicks(abu)
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    run = run_detector(qtbot, win, "rbfn")
    assert run is not None
    hint = win.results.hint
    s = run.result.report["suggested_threshold"]
    assert hint.isVisible() and hint.text.text() == suggestion_words(run.result.report)
    assert f"({s['objects']} objects)" in hint.button.text()
    b = hint.button
    assert b.fontMetrics().horizontalAdvance(b.text()) <= b.width() - 8  # whole in the dock's column
    origin_shown = win.results.origin.isVisible()
    default = run.threshold
    hint.button.click()
    assert run.threshold == pytest.approx(s["threshold"])
    # the line saying how the default threshold was chosen no longer describes the one in use; the hint
    # says the suggestion is in use and offers the way back
    assert origin_shown and not win.results.origin.isVisible()
    assert hint.isVisible() and hint.button.text() == f"Back to threshold {default:.4g} (the rate's)"
    assert b.fontMetrics().horizontalAdvance(b.text()) <= b.width() - 8
    win.results.flush()
    assert win.results.counts.text().endswith(f"{s['pixels']} pixels, {s['objects']} objects")
    assert count_at(run.result.scores, run.threshold) == (s["pixels"], s["objects"])
    from hyperapp.detect.finish import mask_at

    assert (win.view._mask == mask_at(run.result.scores, s["threshold"]).astype(bool)).all()  # the image follows
    hint.button.click()  # back to the rate's threshold: its line and the offer again
    assert run.threshold == default and win.results.origin.isVisible()
    assert hint.isVisible() and hint.text.text() == suggestion_words(run.result.report)
    win.results.set_threshold(default * 1.01 + 0.01)  # any other threshold: no hint
    assert not hint.isVisible()


#: a key named in a tooltip or the README: Ctrl+R, Ctrl+Shift+O, F5, Esc
KEY_NAME = r"\b(?:Ctrl\+(?:Shift\+)?[A-Z0-9]\w*|F\d{1,2}|Esc)\b"


def _advertised_keys(win) -> dict[str, str]:
    """{key: where it is named} for every key the window's tooltips, its hint lines and the README's
    window section name, and the marking keys the README lists in backquotes."""
    import re
    from pathlib import Path

    from PySide6.QtWidgets import QAbstractButton, QLabel, QWidget

    out = {}
    for w in win.findChildren(QWidget):
        for text in (w.toolTip(), w.text() if isinstance(w, (QLabel, QAbstractButton)) else ""):
            for k in re.findall(KEY_NAME, str(text)):
                out.setdefault(k, f"{type(w).__name__} {str(text)[:60]!r}")
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    window = readme[readme.index("- **Open**"):readme.index("- **Results**")]  # the window's walk-through
    for k in re.findall(KEY_NAME, window):
        out.setdefault(k, "README")
    for k in re.findall(r"`([0-9TB])`", window) + ["2", "3"]:  # `1`-`4`
        out.setdefault(k, "README (marking keys)")
    return out


def test_every_advertised_shortcut_triggers_its_action_whatever_the_tool_shown(qtbot, win, land_hdr):
    """Ctrl+R did nothing: it sat on the Train & Run button, which has no shortcut while another tool is
    shown. Every key named in a tooltip or the README is a window action, and pressing it triggers it."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QAction, QKeySequence
    from PySide6.QtTest import QTest

    assert win.open_cube(land_hdr)
    keys = _advertised_keys(win)
    assert {"Ctrl+R", "F5", "Esc", "Ctrl+Z", "T", "B", "1", "0"} <= set(keys)
    actions = {}
    for a in win.findChildren(QAction):
        for seq in a.shortcuts():
            actions[seq.toString()] = a
    missing = {k: where for k, where in keys.items() if QKeySequence(k).toString() not in actions}
    assert not missing, f"keys named but bound to no window action: {missing}"
    win.toolbox.choose("k-means")  # the detector's page hidden: its button could not take the key
    win.activateWindow()
    win.setFocus()
    # the actions that would open a dialog are checked by their binding above, not pressed
    for k in ("Ctrl+R", "F5", "Esc", "Ctrl+Z", "T", "B", "1", "0"):
        a = actions[QKeySequence(k).toString()]
        with qtbot.waitSignal(a.triggered, timeout=2000):
            seq = QKeySequence(k)[0]
            QTest.keyClick(win, seq.key(), seq.keyboardModifiers())
        if k in ("Ctrl+R", "F5"):
            win.cancel_everything()
    # Ctrl+R ran the detector, with another tool in front: nothing marked on the land scene, so it says
    # what to click (a run of the k-means panel would have said nothing of targets)
    win.last_error = None
    QTest.keyClick(win, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert win.toolbox.current() == "k-means" and "target" in (win.last_error or "")


def test_a_refusal_line_goes_once_a_run_with_the_kept_values_succeeds(qtbot, win, land_hdr):
    """A refused value's red line stayed under the form through later successful runs: it goes when a
    run succeeds (the detector's form and an analysis panel's), or when the box takes another value."""
    from .conftest import mark_clicks, run_detector

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    win.detector.set_method("sam")
    note = win.detector.param_form.note
    win.detector.far.fixup("-1")  # what Qt calls as editing ends on text it cannot take
    assert not note.isHidden() and "'-1' is not allowed" in note.text()
    assert run_detector(qtbot, win, "sam") is not None
    assert note.isHidden()
    win.detector.far.fixup("2")
    assert not note.isHidden()
    win.detector.far.setValue(0.01)  # another value taken: the refusal is old
    assert note.isHidden()
    km = win.panels["k-means"]
    km.form.set_values({"k": "2..3"})
    km.sample.setValue(500)
    km.sample.fixup("-5")
    assert not km.form.note.isHidden()
    with qtbot.waitSignal(km.finished, timeout=120000) as blocker:
        km.run()
    assert blocker.args[0] is not None and km.form.note.isHidden()


def test_the_status_bar_names_the_run_picked_in_the_results_dock(qtbot, win, land_hdr):
    from .conftest import mark_clicks, run_detector

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    first = run_detector(qtbot, win, "sam")
    second = run_detector(qtbot, win, "ace")
    bar = win.statusBar()
    assert bar.currentMessage().startswith(f"{second.name} finished in ")
    win.results.runs.setCurrentIndex(0)  # the person picks the first run
    assert bar.currentMessage().startswith(f"Shown: {first.name} (it took ")
    assert bar.toolTip().startswith(f"{first.name}, from the click to the result")
    assert second.name not in bar.currentMessage() + bar.toolTip()
    win.results.runs.setCurrentIndex(1)
    assert bar.currentMessage().startswith(f"Shown: {second.name} (it took ")


def _laptop(qtbot, win):
    win.resize(1366, 768)
    win._fit_docks()
    qtbot.wait(100)


def test_at_a_laptop_the_compare_image_is_tall_and_its_bar_label_whole(qtbot, win, land_hdr):
    """At 1366 x 768 the Compare view's image was about 150 pixels tall and its colour bar's label was
    cut: the view keeps most of the dock's height, and a bar's label is the longest form its height
    holds (every image view's: the main one's too)."""
    from PySide6.QtGui import QFontMetrics

    from .conftest import mark_clicks, run_detector

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    _laptop(qtbot, win)
    run = run_detector(qtbot, win, "sam")
    win.compare_dock.raise_()
    win.compare_pick.setCurrentIndex(0)
    qtbot.wait(100)
    vb = win.compare_view.vb.geometry()
    assert vb.height() >= 200, vb.height()  # the (square) image as tall as the view box
    for view in (win.view, win.compare_view):
        axis = view.colour_bar.getAxis("right")
        shown = view.bar_label_shown()
        assert shown and QFontMetrics(axis.label.font()).horizontalAdvance(shown) <= axis.geometry().height()
        assert axis.toolTip().startswith("score (1st-99.9th")  # the whole label, where it was shortened
    assert win.compare_view.bar_label_shown() != axis.toolTip() or vb.height() > 300  # (short here)
    assert run is not None


def test_the_class_legend_lies_under_the_image_as_tall_as_its_lines(qtbot, win, land_hdr):
    """After an analysis the legend took a ~210-pixel column beside the image, mostly empty."""
    from hyperapp.gui.image_view import LEGEND_ROWS

    assert win.open_cube(land_hdr)
    _laptop(qtbot, win)
    km = win.panels["k-means"]
    win.toolbox.choose("k-means")
    km.form.set_values({"k": "3"})
    km.sample.setValue(1000)
    with qtbot.waitSignal(km.finished, timeout=120000):
        km.run()
    qtbot.wait(100)
    legend, view = win.legend, win.view
    assert legend.isVisible() and len(legend.entries()) == 3
    assert legend.geometry().top() >= view.geometry().bottom()  # under the image, not beside it
    assert legend.width() >= view.width() - 4  # the image keeps the window's width
    row = max(legend.sizeHintForRow(0), legend.fontMetrics().lineSpacing() + 4) + 2 * legend.spacing()
    assert legend.height() <= row + 12  # three classes: one line
    # a map of many classes: at most LEGEND_ROWS rows, the rest scrolled
    names = [f"neuron {i}" for i in range(100)]
    legend.show_classes("SOM", names, [(i, i, i) for i in range(100)], list(range(100)))
    assert 2 * row < legend.height() <= LEGEND_ROWS * row + 12


def test_the_compare_view_follows_the_image_and_leads_it_when_used(qtbot, win, land_hdr):
    """Zoomed and panned with the image, both ways; a resize of the Compare view never moves the image."""
    from .conftest import mark_clicks, run_detector

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    run_detector(qtbot, win, "sam")
    win.compare_dock.raise_()
    win.compare_pick.setCurrentIndex(0)
    win.view.zoom_to(20, 20, 40, 40, margin=0)
    (x0, x1), (y0, y1) = win.compare_view.vb.viewRange()
    # the image's range, widened to the view's aspect along one axis only
    assert x0 <= 20.5 and x1 >= 39.5 and y0 <= 20.5 and y1 >= 39.5
    assert min(x1 - x0, y1 - y0) < 21
    before = np.asarray(win.view.vb.viewRange())
    win.compare_view.resize(win.compare_view.width() - 100, win.compare_view.height() - 40)
    qtbot.wait(50)
    np.testing.assert_allclose(np.asarray(win.view.vb.viewRange()), before, atol=1e-6)
    # the person zooms in the Compare view: the image follows
    win.compare_view.vb.setRange(xRange=(60, 70), yRange=(60, 70), padding=0)
    win.compare_view.vb.sigRangeChangedManually.emit([True, True])
    (x0, x1), (y0, y1) = win.view.vb.viewRange()
    assert x0 <= 60.5 and x1 >= 69.5 and y0 <= 60.5 and y1 >= 69.5 and min(x1 - x0, y1 - y0) < 30  # (there, not the whole scene)
