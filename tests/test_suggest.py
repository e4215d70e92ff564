"""The threshold that keeps the clicked objects' kind, where the false-alarm rate keeps few of them
(hyperapp.detect.suggest)."""

from __future__ import annotations

import numpy as np

from hyperapp.detect.finish import count_at
from hyperapp.detect.suggest import clicked_kind, suggestion_words


def _scene():
    """Background N(0, 1); five 3 x 3 targets scoring 2.5..4.5; one pixel of each clicked."""
    rng = np.random.default_rng(0)
    s = rng.normal(0, 1, (120, 120)).astype(np.float32)
    clicks = np.zeros(s.shape, bool)
    for i, level in enumerate((2.5, 3.0, 3.5, 4.0, 4.5)):
        r, c = 10 + 20 * i, 30
        s[r:r + 3, c:c + 3] = level + rng.uniform(0, 0.2, (3, 3))
        clicks[r + 1, c + 1] = True
    return s, clicks


def test_suggests_the_lowest_clicked_score_where_the_rate_misses_the_clicks():
    s, clicks = _scene()
    got = clicked_kind(s, clicks, 4.0)  # keeps the two brightest targets of five (and a little background)
    assert got is not None
    low = float(s[clicks].min())
    assert got["threshold"] < low and np.nextafter(np.float32(got["threshold"]), np.float32(np.inf)) == np.float32(low)
    assert (got["pixels"], got["objects"]) == count_at(s, got["threshold"])  # as the window and exports count
    assert (got["pixels_now"], got["objects_now"]) == count_at(s, 4.0)
    assert got["clicked"] == 5 and got["clicked_kept_now"] == 2
    assert (s[clicks] > got["threshold"]).all()  # every clicked target kept
    words = suggestion_words({"far": 1e-3, "suggested_threshold": got})
    assert "1 of the 5" not in words and "2 of the 5 clicked targets among" in words
    assert f"{got['objects']} objects ({got['pixels']} pixels)" in words
    # more clicked pixels than clicked targets: those that touch made one, and the words say so
    words = suggestion_words({"far": 1e-3, "suggested_threshold": got, "n_target_pixels": 7})
    assert "2 of the 5 clicked targets (clicked pixels that touch make one) among" in words


def test_no_suggestion_where_the_rate_keeps_the_clicks_or_nothing_is_clicked():
    s, clicks = _scene()
    assert clicked_kind(s, clicks, 2.0) is None  # every clicked target is kept
    assert clicked_kind(s, clicks, 3.4) is None  # 3 of 5 kept: more than half
    assert clicked_kind(s, np.zeros_like(clicks), 4.0) is None
    nan = s.copy()
    nan[clicks] = np.nan
    assert clicked_kind(nan, clicks, 4.0) is None
    assert suggestion_words({"suggested_threshold": None}) == ""


def aircraft_clicks(abu) -> tuple[np.ndarray, np.ndarray]:
    """(one clicked pixel on each of five of the airport's 13 aircraft, seeded; the aircraft's labels)."""
    from scipy import ndimage

    from hyperapp.io.masks import read_mask

    truth = read_mask(abu, variable="map") > 0
    lab, n = ndimage.label(truth, structure=np.ones((3, 3)))
    assert n == 13
    rng = np.random.default_rng(1)
    clicks = np.zeros_like(truth)
    for k in rng.choice(np.arange(1, n + 1), 5, replace=False):
        rr, cc = np.nonzero(lab == k)
        i = rng.integers(len(rr))
        clicks[rr[i], cc[i]] = True
    return clicks, lab


def test_airport_rbfn_five_clicks_offers_the_aircraft(abu, tmp_path, capsys):
    """The first-time walk's case: RBFN after five clicks on five aircraft of thirteen. The rate of 1e-3
    keeps a handful; the suggestion keeps every aircraft, and the CLI's summary says so."""
    from hyperapp.cli import main

    clicks, lab = aircraft_clicks(abu)
    np.save(tmp_path / "clicks.npy", clicks)
    assert main(["--headless", "detect", str(abu), "--dataset", "data", "--method", "rbfn", "--targets",
                 str(tmp_path / "clicks.npy"), "--device", "cpu", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    import json

    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    got = rep["suggested_threshold"]
    assert got["objects_now"] == rep["objects"] and got["clicked_kept_now"] <= 2
    assert suggestion_words(rep) in out
    from hyperapp.detect.finish import mask_at
    from hyperapp.io import open_cube

    scores = np.asarray(open_cube(tmp_path / "o" / "scores.hdr").read())[..., 0]
    kept = mask_at(scores, got["threshold"]).astype(bool)
    found = len(set(np.unique(lab[kept])) - {0})
    assert found >= 12 and got["objects"] < 100  # most of the 13 aircraft, in a list one can review


def test_clicked_objects_are_the_8_connected_objects_of_the_clicks():
    """The host grouping of a few clicked pixels gives scipy.ndimage.label's objects (8-connected), across
    rows and at the image's left and right edges (a pixel at the end of a row is no neighbour of the next
    row's first)."""
    from scipy import ndimage

    from hyperapp.detect.suggest import clicked_objects

    rng = np.random.default_rng(4)
    for trial in range(40):
        rows, cols = rng.integers(1, 30, 2)
        m = rng.random((rows, cols)) < rng.uniform(0.02, 0.5)
        m[:, -1] |= trial % 3 == 0  # columns at both edges
        m[:, 0] |= trial % 3 == 0
        lab, n = ndimage.label(m, structure=np.ones((3, 3)))
        groups, k = clicked_objects(np.flatnonzero(m), int(cols))
        assert k == n
        # the same partition: each object's pixels share one number, and no two objects share one
        ref = lab.reshape(-1)[np.flatnonzero(m)]
        assert len(set(zip(ref.tolist(), groups.tolist()))) == n


def test_the_host_path_of_the_clicked_kind_is_the_mask_path():
    """With the clicked pixels listed on the host, :func:`clicked_kind` answers as it does from the
    mask (a click of two pixels on one target counts once)."""
    s, clicks = _scene()
    clicks[11, 32] = True  # a second pixel of the first target
    for threshold in (2.0, 3.4, 4.0, 4.4):
        want = clicked_kind(s, clicks, threshold)
        assert clicked_kind(s, clicks, threshold, np.flatnonzero(clicks)) == want
    assert clicked_kind(s, clicks, 4.0)["clicked"] == 5
    nan = s.copy()
    nan[clicks] = np.nan
    assert clicked_kind(nan, clicks, 4.0, np.flatnonzero(clicks)) is None
    assert clicked_kind(s, np.zeros_like(clicks), 4.0, np.zeros(0, np.int64)) is None


def test_counts_in_words_say_one_thing_in_the_singular():
    """The window's counts, the CLI's summary and the suggestion say "1 object", "1 pixel" (a walk of the
    window read "16383 pixels, 1 objects" with the threshold at its lowest)."""
    from hyperapp.core.words import counted

    assert [counted(n, "object") for n in (0, 1, 2)] == ["0 objects", "1 object", "2 objects"]
    words = suggestion_words({"far": 1e-3, "suggested_threshold": {
        "threshold": 0.5, "pixels": 1, "objects": 1, "pixels_now": 0, "objects_now": 0, "clicked": 2,
        "clicked_kept_now": 0}})
    assert "keeps only 0 objects (0 pixels)" in words and ": 1 object (1 pixel), to review" in words
