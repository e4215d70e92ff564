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
    hint.button.click()
    assert run.threshold == pytest.approx(s["threshold"]) and not hint.isVisible()
    win.results.flush()
    assert win.results.counts.text().endswith(f"{s['pixels']} pixels, {s['objects']} objects")
    assert count_at(run.result.scores, run.threshold) == (s["pixels"], s["objects"])
    from hyperapp.detect.finish import mask_at

    assert (win.view._mask == mask_at(run.result.scores, s["threshold"]).astype(bool)).all()  # the image follows
