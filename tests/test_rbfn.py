"""The RBFN detector: the issue's accuracy protocol, persistence, post-processing and bad input."""

import numpy as np
import pytest

from hyperapp.core.errors import InputError, ModelError
from hyperapp.detect.model_files import load_model, save_model
from hyperapp.io import open_cube, read_mask
from hyperapp.models import classic
from hyperapp.models.evaluation import auc
from hyperapp.models.postprocess import object_table
from hyperapp.models.rbfn import RBFN

from .conftest import ABU, ABU_MISSING, SAMPLES, random_clicks

CLASSIC = {"mf": classic.MatchedFilter, "ace": classic.ACE, "cem": classic.CEM, "sam": classic.SAM, "rx": classic.RX}


def _scene(name):
    from hyperapp.io.samples import BACKGROUNDS, make_background_scene

    if name in BACKGROUNDS:
        sc = make_background_scene(name)
        return sc.cube.astype(np.float32), sc.truth > 0
    if name == "abu":
        if not ABU.is_file():
            pytest.skip(ABU_MISSING)
        return open_cube(ABU, "data").read(), read_mask(ABU, variable="map") > 0
    return open_cube(SAMPLES / f"{name}.hdr").read(), read_mask(SAMPLES / f"{name}_truth.hdr") > 0


@pytest.mark.parametrize("name", ["abu", "land", "sea", "beach", "urban", "vegetation"])
def test_rbfn_beats_classic_detectors(name):
    """5 random clicks from the truth, AUC over all other pixels, averaged over 10 seeds
    (scripts/quality.py's protocol), on the airport scene, the bundled scenes and the generated background types."""
    X, truth = _scene(name)
    aucs = {k: [] for k in [*CLASSIC, "rbfn"]}
    for seed in range(10):
        clicks = random_clicks(truth, 5, seed)
        y = np.where(clicks, 1, -1).astype(np.int8)
        for k, cls in CLASSIC.items():
            aucs[k].append(auc(cls().fit(X, y).decision_function(X), truth, clicks))
        aucs["rbfn"].append(auc(RBFN(seed=seed).fit(X, y).decision_function(X), truth, clicks))
    mean = {k: float(np.mean(v)) for k, v in aucs.items()}
    best = max(v for k, v in mean.items() if k != "rbfn")
    # 1e-4: on the land scene the default (0.99997; its anomaly input counts there, the clicks being
    # strong anomalies) trails ACE (0.99999997) by about a hundred of its 3.5 million target-background pairs
    assert mean["rbfn"] >= best - 1e-4, mean
    if name == "abu":
        assert mean["rbfn"] >= 0.95, mean


def test_forward_pass_is_the_thesis_formula():
    rng = np.random.default_rng(0)
    X = rng.random((20, 30, 10)).astype(np.float32) + 0.1
    y = -np.ones((20, 30), np.int8)
    y[3, 3] = y[10, 20] = 1
    m = RBFN(n_hidden=5, coherence=0).fit(X, y)
    x = X[7, 9].astype(np.float64)
    z = (x / np.linalg.norm(x) - m.mean_) @ m.proj_
    h = np.exp(-((z - m.centres_) ** 2).sum(axis=1) * m.gamma_)
    np.testing.assert_allclose(m.decision_function(X)[7, 9], h @ m.weights_ + m.bias_, rtol=1e-5)
    # with the coherence input: plus v times ACE of the normalised spectrum in the whitened space
    m = RBFN(n_hidden=5).fit(X, y)
    assert m.coherence_weight_ == 1.0
    xn = x / np.linalg.norm(x)
    z = (xn - m.mean_) @ m.proj_
    h = np.exp(-((z - m.centres_) ** 2).sum(axis=1) * m.gamma_)
    zf = (xn - m.mean_) @ m.coherence_w_.astype(np.float64)
    s = m.coherence_s_.astype(np.float64)
    ace = (zf @ s) ** 2 / ((s @ s) * (zf @ zf))
    np.testing.assert_allclose(m.decision_function(X)[7, 9], h @ m.weights_ + m.bias_ + m.coherence_v_ * ace,
                               rtol=1e-4)


def test_click_coherence_is_left_out():
    """Each click's coherence input is its ACE against the mean of the other clicks."""
    from hyperapp.kernels.pack import to_host_together
    from hyperapp.models.rbfn import _Coherence
    from hyperapp.models.stats import BackgroundStats

    rng = np.random.default_rng(1)
    B = rng.normal(size=(500, 6))
    T = rng.normal(size=(4, 6)) + 2
    stats = BackgroundStats.from_pixels(B)
    W = stats.sqrt_inv_cov
    c = _Coherence(W, stats.mean, np.concatenate([T, B]), len(T))
    c.take(*to_host_together(c.device))
    zt = (T - stats.mean) @ W
    got, background = c.scores()
    for j in range(4):
        s = zt[[i for i in range(4) if i != j]].mean(axis=0)
        want = (zt[j] @ s) ** 2 / ((s @ s) * (zt[j] @ zt[j]))
        np.testing.assert_allclose(got[j], min(want, 1.0), rtol=1e-6)
    s = zt.mean(axis=0)
    np.testing.assert_allclose(c.target(), s, rtol=1e-5)
    zb = (B[:3] - stats.mean) @ W
    np.testing.assert_allclose(background[:3], (zb @ s) ** 2 / ((s @ s) * (zb * zb).sum(axis=1)), rtol=1e-6)


@pytest.mark.parametrize("whiten,floor", [("pca", 0.95), ("cov", 0.9), ("std", 0.75)])
def test_whitenings_and_many_neurons_train(whiten, floor):
    X, truth = _scene("land")
    clicks = random_clicks(truth, 5, 0)
    y = np.where(clicks, 1, -1).astype(np.int8)
    m = RBFN(n_hidden=64, whiten=whiten).fit(X, y)
    assert m.centres_.shape[0] == 64
    assert auc(m.decision_function(X), truth, clicks) > floor  # measured: std is the weakest


def test_save_and_load(tmp_path):
    X, truth = _scene("sea")
    y = np.where(random_clicks(truth, 5, 1), 1, -1).astype(np.int8)
    m = RBFN(n_hidden=6).fit(X, y)
    p = save_model(m, tmp_path / "m.npz", "rbfn")
    m2 = load_model(p, n_bands=64, method="rbfn")
    np.testing.assert_array_equal(m2.decision_function(X), m.decision_function(X))
    with pytest.raises(ModelError, match="trained on 64 bands, the cube has 10"):
        load_model(p, n_bands=10)
    with pytest.raises(ModelError, match="rbfn model, not ffbp"):
        load_model(p, method="ffbp")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelError, match="not a hyperapp model"):
        load_model(tmp_path / "junk.npz")


def test_bad_input():
    X, truth = _scene("land")
    with pytest.raises(ModelError, match="no target pixels"):
        RBFN().fit(X, -np.ones(truth.shape, np.int8))
    with pytest.raises(ModelError, match="every pixel is marked as target"):
        RBFN().fit(X, np.ones(truth.shape, np.int8))
    Xn = X.copy()
    Xn[0, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        RBFN().fit(Xn, np.where(truth, 1, -1).astype(np.int8))
    m = RBFN().fit(X, np.where(random_clicks(truth, 5, 0), 1, -1).astype(np.int8))
    with pytest.raises(ModelError, match="trained on 64"):
        m.decision_function(X[:, :, :10])
    with pytest.raises(InputError, match="whiten"):
        RBFN(whiten="zca").fit(X, np.where(truth, 1, -1).astype(np.int8))


def test_identical_spectra_do_not_break_training():
    """A flat scene (singular covariance) trains and scores finitely: the eigenvalue floor at work."""
    X = np.tile(np.linspace(0.2, 0.4, 16, dtype=np.float32), (12, 12, 1))
    X[4, 4] *= np.linspace(0.5, 1.5, 16, dtype=np.float32)
    y = -np.ones((12, 12), np.int8)
    y[4, 4] = 1
    s = RBFN().fit(X, y).decision_function(X)
    assert np.isfinite(s).all() and s[4, 4] == s.max()


def test_object_table():
    mask = np.zeros((10, 10), bool)
    mask[1:3, 1:3] = True
    mask[7, 7] = mask[8, 8] = True  # diagonal neighbours: one object
    scores = np.arange(100, dtype=np.float32).reshape(10, 10)
    rows = object_table(mask, scores)
    assert len(rows) == 2
    assert rows[0]["pixels"] == 2 and rows[0]["peak_score"] == 88 and (rows[0]["row0"], rows[0]["row1"]) == (7, 9)
    assert rows[1]["pixels"] == 4 and rows[1]["centroid_row"] == pytest.approx(1.5)


def test_object_table_matches_scipy_measurements():
    """The sort-based table gives what SciPy's per-label measurements give, on thousands of objects of
    every shape (single pixels, blocks, diagonal chains, objects wrapping around others)."""
    from scipy import ndimage

    from hyperapp.models.postprocess import EIGHT

    rng = np.random.default_rng(3)
    scores = rng.random((300, 257)).astype(np.float32)
    mask = scores > 0.97
    mask[40:60, 10:90] = True
    mask[45:55, 30:40] = False  # a ring
    mask[100 + np.arange(50), 100 + np.arange(50)] = True  # a diagonal chain
    rows = object_table(mask, scores)
    lab, n = ndimage.label(mask, structure=EIGHT)
    idx = np.arange(1, n + 1)
    counts = ndimage.sum_labels(np.ones_like(scores), lab, idx)
    cents = ndimage.center_of_mass(np.ones_like(scores), lab, idx)
    peaks = ndimage.maximum(scores, lab, idx)
    boxes = ndimage.find_objects(lab)
    assert len(rows) == n > 1000
    for r in rows:
        i = r["label"] - 1
        sl = boxes[i]
        assert r["pixels"] == counts[i] and r["peak_score"] == peaks[i]
        assert (r["centroid_row"], r["centroid_col"]) == pytest.approx(cents[i])
        assert (r["row0"], r["col0"], r["row1"], r["col1"]) == (sl[0].start, sl[1].start, sl[0].stop, sl[1].stop)
    assert [r["peak_score"] for r in rows] == sorted((r["peak_score"] for r in rows), reverse=True)
    assert object_table(np.zeros((5, 5), bool), np.zeros((5, 5))) == []
    # the table's columns (what a batch builds and writes) give the rows' CSV, byte for byte, also empty
    from hyperapp.models.postprocess import object_columns, objects_csv

    assert objects_csv(object_columns(mask, scores)) == objects_csv(rows)
    empty = object_columns(np.zeros((5, 5), bool), np.zeros((5, 5)))
    assert objects_csv(empty) == objects_csv([]) == "label,pixels,centroid_row,centroid_col,row0,col0,row1,col1,peak_score\n"


@pytest.mark.parametrize("name,method", [
    ("land", "rbfn"),  # the clicks are strong anomalies: the anomaly input counts, its mode is the network's
    *[(s, m) for s in ("land", "sea") for m in ("ace", "mf", "cem")], ("sea", "rbfn"),
    pytest.param("abu", "rbfn", marks=pytest.mark.xfail(
        strict=True, reason="targets and background overlap there: no separate mode shows, and the quantile of "
                            "every unclicked pixel lets through 0.2x the requested false alarms")),
])
def test_default_mask_finds_what_the_roc_says(name, method):
    """With no truth given, the default mask (false-alarm rate 1e-3 over the unclicked pixels)
    detects within 0.1 of the ROC's Pd at that rate, at a true false-alarm rate within 3x of it."""
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.finish import DEFAULT_FAR
    from hyperapp.detect.run import run_detection
    from hyperapp.models.evaluation import evaluate
    from hyperapp.request import DetectRequest

    X, truth = _scene(name)
    cube = cube_from_array(X, name)
    for seed in range(3):
        clicks = random_clicks(truth, 5, seed)
        r = run_detection(cube, DetectRequest(method, device="cpu"), clicks)
        keep = ~clicks
        assert DEFAULT_FAR == 1e-3  # the rate evaluate's "pd_at_far_1e-3" is taken at
        roc_pd = evaluate(r.scores[keep], truth[keep])["pd_at_far_1e-3"]
        mask_pd = r.mask[keep & truth].mean()
        far = r.mask[keep & ~truth].mean()
        assert abs(mask_pd - roc_pd) <= 0.1, (seed, mask_pd, roc_pd)
        assert DEFAULT_FAR / 3 <= far <= 3 * DEFAULT_FAR, (seed, far)
        assert r.report["target_mode_pixels"] >= 0.9 * truth[keep].sum()  # the report says what was left out


def test_target_mode_is_split_off_only_when_separate():
    """The default threshold's mode test: a block of high scores far above an exponential background is
    split off whole; a plain exponential tail, or targets inside it, are not split."""
    from hyperapp.models.evaluation import far_threshold, target_mode_size, threshold_for_far

    rng = np.random.default_rng(0)
    bg = rng.exponential(1.0, 20000)
    for tail in (bg, np.concatenate([bg, rng.exponential(1.0, 300) + 2.0])):
        assert target_mode_size(np.sort(tail), 1e-3) == 0
    high = rng.normal(40.0, 1.0, 300)
    s = np.sort(np.concatenate([bg, high]))
    assert target_mode_size(s, 1e-3) == 300
    t = far_threshold(s, 1e-3, separate_targets=True)[0]
    assert (bg > t).mean() == pytest.approx(1e-3, abs=1e-4) and (high > t).all()
    assert threshold_for_far(s, 1e-3) > bg.max()  # the plain quantile lands among the targets
    # float32 scores near 1 (SAM's cosines) tie in many places; their steps are no gaps (the median of
    # every spacing, ties included, took one for a gap here and split off 4% of the pixels)
    near_one = np.sort(np.random.default_rng(0).beta(50, 1, 400_000).astype(np.float32))
    assert (np.diff(near_one[-20_000:]) == 0).mean() > 0.3
    assert target_mode_size(near_one, 1e-3) == 0
    # a block of scores above a floor every other pixel shares (the window detector's, outside its
    # boxes): no background quantile to take below it, so no split
    floored = np.sort(np.concatenate([rng.normal(5.0, 1.0, 300), np.full(15_000, -1.0)]))
    assert target_mode_size(floored, 1e-3) == 0


def test_overlapping_targets_get_the_background_tail_from_the_bulk():
    """Where no target mode shows, the default threshold extrapolates an exponential tail from the bulk
    of the scores: targets inside the tail take the plain quantile's places (fewer false alarms than
    asked), the tail fit gives most of them back; it never sets the threshold above the plain quantile,
    and never lets through much more than the requested rate."""
    from hyperapp.models.evaluation import far_threshold, threshold_for_far

    rng = np.random.default_rng(0)
    far = 1e-3
    bg = rng.exponential(1.0, 50_000)
    tg = rng.normal(6.0, 2.0, 250)  # 0.5 % of the pixels, spread across the background's tail
    s = np.concatenate([bg, tg])
    t, mode, rule = far_threshold(s, far, separate_targets=True)
    assert (mode, rule) == (0, "exponential tail")
    assert 0.6 * far <= (bg > t).mean() <= 1.5 * far
    assert (bg > threshold_for_far(s, far)).mean() < 0.5 * far  # the plain quantile's false alarms
    # never above the plain quantile, never far past the requested rate, wherever the targets sit
    for mu, sd, n in ((3.0, 1.0, 500), (5.0, 1.5, 1000), (7.0, 2.0, 500), (6.0, 2.0, 1000)):
        s = np.concatenate([bg, rng.normal(mu, sd, n)])
        t = far_threshold(s, far, separate_targets=True)[0]
        assert t <= threshold_for_far(s, far) and (bg > t).mean() <= 1.5 * far
    assert far_threshold(s, far)[2] == "quantile"  # without clicks (RX): the plain quantile
    # a Gaussian background, lighter-tailed than the exponential: the extrapolation errs high, so
    # fewer false alarms than asked, but never fewer than the plain quantile lets through
    g = rng.normal(0.0, 1.0, 50_000)
    for s in (g, np.concatenate([g, rng.normal(3.0, 1.0, 600)])):
        t = far_threshold(s, far, separate_targets=True)[0]
        assert t <= threshold_for_far(s, far) and (g > t).mean() <= far
    assert far_threshold(np.zeros(1000), far, separate_targets=True)[2] == "quantile"  # tied: no tail


def test_threshold_origin_names_the_rule():
    """The window's one-line account of the default threshold follows the report's rule."""
    from hyperapp.detect.finish import threshold_origin

    base = {"far": 1e-3, "target_mode_pixels": 0}
    texts = {rule: threshold_origin({**base, "threshold_rule": rule, "target_mode_pixels": 7})
             for rule in ("target mode split", "network mode split", "exponential tail", "quantile")}
    assert "7 highest-scoring" in texts["target mode split"] and "extrapolated" in texts["exponential tail"]
    assert "7 pixels its network scores highest" in texts["network mode split"]
    assert len(set(texts.values())) == 4 and all("0.001" in t for t in texts.values())
    assert threshold_origin({"far": None, "threshold_rule": "quantile"}) == ""  # a threshold that was given


def test_marks_listed_by_words_match_flatnonzero():
    """sparse_flatnonzero (the click path's label scan) lists what np.flatnonzero does, for masks and
    label maps of any length, sparse or dense."""
    from hyperapp.models.base import sparse_flatnonzero

    rng = np.random.default_rng(2)
    for n in (0, 1, 7, 8, 9, 1001, 65543):
        for density in (0.0, 0.001, 0.5, 1.0):
            m = rng.random(n) < density
            assert np.array_equal(sparse_flatnonzero(m), np.flatnonzero(m))
            y = np.where(m, rng.integers(-2, 2, n), -1).astype(np.int8)
            assert np.array_equal(sparse_flatnonzero(y, -1), np.flatnonzero(y != -1))
    m = rng.random((33, 31)) < 0.1  # 2-D, not a multiple of 8
    assert np.array_equal(sparse_flatnonzero(m), np.flatnonzero(m))


def test_pool_draws_are_plain_rejection_sampling():
    """_Pool.choice (remembered draws, excluded pixels found by binary search) returns exactly what
    drawing uniform candidates, rejecting the excluded ones and keeping first copies returns, and
    leaves the generator where that would."""
    from hyperapp.models.rbfn import _Pool

    def reference(n, excluded, k, rng, distinct):
        is_ex = np.zeros(n, bool)
        is_ex[excluded] = True
        out = np.empty(0, np.int64)
        while out.size < k:
            cand = rng.integers(0, n, size=int((k - out.size) * 1.1) + 16)
            out = np.concatenate([out, cand[~is_ex[cand]]])
            if distinct:
                _, first = np.unique(out, return_index=True)
                out = out[np.sort(first)]
        return out[:k]

    rng0 = np.random.default_rng(5)
    for n, n_ex, k in ((300_000, 0, 5000), (300_000, 70, 50_000), (400_000, 150_000, 100_000), (300_000, 30, 140_000)):
        excluded = np.unique(rng0.choice(n, n_ex, replace=False)) if n_ex else np.empty(0, np.int64)
        for distinct in (True, False):
            for _ in range(2):  # a first draw, then the same from memory
                a, b = np.random.default_rng(9), np.random.default_rng(9)
                got = _Pool(n, excluded).choice(k, a, distinct)
                assert np.array_equal(got, reference(n, excluded, k, b, distinct))
                assert a.bit_generator.state == b.bit_generator.state


def test_remembered_draws_change_nothing():
    """A re-fit's first draws come from memory (same seed, same draws): the pixels sampled and the
    generator's state afterwards are those of a first fit."""
    import hyperapp.models.rbfn as rbfn_module

    y = np.full((600, 600), -1, np.int8)
    y[10, 20] = y[300, 301] = y[599, 0] = 1
    y[50:60, 50:60] = 0
    rbfn_module._DRAWS.clear()
    first = RBFN().sample_indices(y, y.shape)
    assert rbfn_module._DRAWS  # a large image draws by rejection, through the memory
    again = RBFN().sample_indices(y, y.shape)
    for a, b in zip(first[:3], again[:3]):
        assert np.array_equal(a, b)
    assert first[3].bit_generator.state == again[3].bit_generator.state


def test_coherence_against_the_other_clicks_matches_the_direct_sums():
    """Each click's coherence against the mean of the *other* clicks, from the product matrix in one
    vectorised step (a library's thousand synthetic targets), equals the direct per-click sums, for ACE
    and the library's matched filter alike; one click is scored against itself."""
    from hyperapp.kernels.pack import to_host_together
    from hyperapp.models.rbfn import _Coherence
    from hyperapp.models.stats import BackgroundStats

    rng = np.random.default_rng(3)
    B = rng.normal(size=(400, 6)).astype(np.float32)
    for m in (7, 1):
        T = (rng.normal(size=(m, 6)) + 2.0).astype(np.float32)
        stats = BackgroundStats.from_pixels(B)
        for kind in ("ace", "mf"):
            coh = _Coherence(stats.sqrt_inv_cov, stats.mean, np.concatenate([T, B]), m, kind)
            coh.take(*to_host_together(coh.device))
            G = coh.zt @ coh.zt.T  # the click-click products
            got = coh.scores()[0]
            want = np.empty(m)
            for j in range(m):
                o = np.arange(m) != j
                o = o if o.any() else np.ones(m, bool)
                d, ss = G[j, o].sum() / o.sum(), G[np.ix_(o, o)].sum() / o.sum() ** 2
                want[j] = d / ss if kind == "mf" else np.clip(d ** 2 / (coh.sq["T"][j] * ss), 0, 1)
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{kind} {m}")


def test_library_training_keeps_its_mf_coherence_without_the_anomaly_input():
    """fit_signature (a library spectrum, synthetic mixtures: no clicks) trains the MF coherence input and
    leaves the clicks' anomaly input out; click training keeps the anomaly input's fit."""
    from hyperapp.models.rbfn import RBFN

    rng = np.random.default_rng(0)
    X = rng.normal(1.0, 0.1, (30, 30, 8)).astype(np.float32)
    t = np.linspace(2.0, 0.5, 8).astype(np.float32)
    X[5:8, 5:8] = 0.5 * X[5:8, 5:8] + 0.5 * t
    est = RBFN(n_hidden=8, n_background=300, n_library_targets=200, seed=0).fit_signature(X, t)
    assert est.coherence_kind_ == "mf" and est.anomaly_weight_ == 0.0 and not est.anomaly_v_
    s = est.decision_function(X)
    assert s[5:8, 5:8].mean() > np.percentile(s, 99)
    y = np.full((30, 30), -1, np.int8)
    y[6, 6] = 1
    est = RBFN(n_hidden=8, n_background=300, seed=0, anomaly=1.0).fit(X, y)
    assert est.coherence_kind_ == "ace" and est.anomaly_weight_ == 1.0


@pytest.mark.parametrize("shape", [(2, 2), (1, 30), (3, 3)])
def test_rbfn_on_an_image_with_fewer_pixels_than_neurons(shape):
    """A background sample with fewer distinct pixels than background neurons places fewer centres; the
    network has those neurons (it indexed its output weights by the number asked, and crashed)."""
    from hyperapp.models.registry import get_method

    rng = np.random.default_rng(0)
    X = rng.uniform(0.1, 1.0, (*shape, 8)).astype(np.float32)
    # the network as a library target fits it (run_detection then refuses a 4-pixel image whose scores
    # tie to float32 precision, which is a result of its own, not this defect's)
    model = RBFN(**get_method("rbfn").library_params).fit_signature(X, rng.uniform(0.1, 1.0, (1, 8)))
    assert np.isfinite(model.decision_function(X)).all() and model.centres_.shape[0] <= 32
    assert model.weights_.shape[0] == model.centres_.shape[0]


def test_score_next_changes_nothing_on_the_cpu():
    """``score_next`` starts passes on the GPU only: on NumPy the fit and its scores are as without it."""
    rng = np.random.default_rng(3)
    X = rng.normal(0.3, 0.05, (40, 40, 12)).astype(np.float32)
    y = -np.ones((40, 40), np.int8)
    y[5, 5:9] = 1
    X[5, 5:9] += 0.2
    a = RBFN(anomaly=1.0).fit(X, y)
    b = RBFN(anomaly=1.0).fit(X, y, score_next=True)
    assert "_early" not in b.__dict__
    assert np.array_equal(a.decision_function(X), b.decision_function(X))


def _kept_scene():
    """A 600 x 600 image (large enough that the samples are drawn by rejection) and label maps of clicks."""
    rng = np.random.default_rng(5)
    X = rng.normal(0.3, 0.05, (600, 600, 6)).astype(np.float32)
    X[100:103, 200:203] += 0.15
    X[400:403, 450:453] += 0.15

    def labels(*pixels):
        y = -np.ones((600, 600), np.int8)
        for r, c in pixels:
            y[r, c] = 1
        return y

    return X, labels


def _clean(labels, r0: int, c0: int, k: int) -> list:
    """``k`` pixels of the 3 x 3 block at (r0, c0) that neither sample of a fit holds, nor (the training
    background) within the guard of: clicks there sample the same pixels as any other such clicks."""
    stat, near = set(), set()
    for y in (labels((r0, c0)), labels((599, 599))):  # (each sample leaves its own click out)
        _, s, bg, _ = RBFN().sample_indices(y, (600, 600))
        stat |= set(s.tolist())
        near |= {int(p + dr * 600 + dc) for p in bg for dr in range(-2, 3) for dc in range(-2, 3)}
    out = [(r, c) for r in range(r0, r0 + 3) for c in range(c0, c0 + 3)
           if r * 600 + c not in stat and r * 600 + c not in near]
    assert len(out) >= k
    return out[:k]


def _counting(monkeypatch):
    import hyperapp.models.rbfn as rbfn_module
    from hyperapp.models.stats import BackgroundStats

    calls = {"stats": 0, "kmeans": 0}
    real_stats, real_km = BackgroundStats.from_pixels.__func__, rbfn_module.kmeans_small

    def stats(cls, *a, **k):
        calls["stats"] += 1
        return real_stats(cls, *a, **k)

    def km(*a, **k):
        calls["kmeans"] += 1
        return real_km(*a, **k)

    monkeypatch.setattr(BackgroundStats, "from_pixels", classmethod(stats))
    monkeypatch.setattr(rbfn_module, "kmeans_small", km)
    return calls


def _same_model(a, b, X):
    for name in ("mean_", "proj_", "centres_", "gamma_", "weights_", "coherence_w_", "anomaly_w_"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-4, atol=1e-4)


def test_a_click_sampling_the_same_pixels_takes_the_last_fits_background(monkeypatch):
    """A fit given the last fit's store (``kept``) takes its whitening and its training background where
    the new clicks sample the same pixels, and makes the model a fresh fit makes; where a click falls in
    the whitening sample, or a parameter changes, it computes them again."""
    X, labels = _kept_scene()
    first, second = labels(*_clean(labels, 100, 200, 2)), labels(*_clean(labels, 400, 450, 3))
    est = RBFN(anomaly=1.0)
    s1, s2 = est.sample_indices(first, (600, 600)), est.sample_indices(second, (600, 600))
    assert np.array_equal(s1[1], s2[1]) and np.array_equal(s1[2], s2[2])  # (the scene's premise)
    kept = {}
    RBFN(anomaly=1.0).fit(X, first, kept=kept)
    calls = _counting(monkeypatch)
    again = RBFN(anomaly=1.0).fit(X, second, kept=kept)
    assert calls == {"stats": 0, "kmeans": 0}
    _same_model(again, RBFN(anomaly=1.0).fit(X, second), X)
    # a click in the whitening sample: that sample changes, so does everything computed from it
    inside = np.unravel_index(int(s1[1][1000]), (600, 600))
    third = labels(*_clean(labels, 400, 450, 1), (int(inside[0]), int(inside[1])))
    calls.update(stats=0, kmeans=0)
    changed = RBFN(anomaly=1.0).fit(X, third, kept=kept)
    assert calls["stats"] == 1 and calls["kmeans"] == 1
    _same_model(changed, RBFN(anomaly=1.0).fit(X, third), X)
    calls.update(stats=0, kmeans=0)
    RBFN(anomaly=1.0, n_hidden=16).fit(X, third, kept=kept)  # other parameters: nothing taken
    assert calls["stats"] == 1 and calls["kmeans"] == 1
    # the next clicks outside the sample take the common whitening and background again
    calls.update(stats=0, kmeans=0)
    assert RBFN(anomaly=1.0).fit(X, first, kept=kept).reused_ == ("whitening", "training background")
    assert calls == {"stats": 0, "kmeans": 0}


def test_clicks_on_a_resident_image_reuse_the_rbfns_background():
    """Two runs on one resident image with different clicks: the second takes the first's store and gives
    the scores and threshold a run on a fresh copy of the image gives."""
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.resident import resident
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    X, labels = _kept_scene()
    cube = cube_from_array(X, "kept")
    image = X.copy()
    req = DetectRequest("rbfn", device="cpu")
    run_detection(cube, req, labels(*_clean(labels, 100, 200, 2)) == 1, image=image)
    assert "rbfn" in resident(image).kept
    clicks = labels(*_clean(labels, 400, 450, 3)) == 1
    got = run_detection(cube, req, clicks, image=image)
    assert got.report["fit_reused"] == ["whitening", "training background"]
    want = run_detection(cube, req, clicks, image=X.copy())
    assert want.report["fit_reused"] == []
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-4, atol=1e-4)
    assert got.threshold == pytest.approx(want.threshold, rel=1e-4)


def test_a_kept_background_serves_only_as_many_centres_as_it_placed(monkeypatch):
    """With several target centres asked, their count follows the clicks' (up to the number asked), and so
    does the background's: a kept training background placed for another count is not taken."""
    X, labels = _kept_scene()
    two, three = labels(*_clean(labels, 100, 200, 2)), labels(*_clean(labels, 400, 450, 3))
    kept = {}
    RBFN(n_target_centres=3).fit(X, two, kept=kept)
    calls = _counting(monkeypatch)
    got = RBFN(n_target_centres=3).fit(X, three, kept=kept)
    assert got.reused_ == ("whitening",) and calls == {"stats": 0, "kmeans": 1}
    _same_model(got, RBFN(n_target_centres=3).fit(X, three), X)


def test_fits_on_two_threads_share_a_store_safely():
    """The window runs each click on a worker thread: fits on two threads at once with one store each make
    a fresh fit's model, and leave the store whole."""
    import threading

    X, labels = _kept_scene()
    sets = [labels(*_clean(labels, 100, 200, 2)), labels(*_clean(labels, 400, 450, 3))]
    kept, out = {}, [None, None]
    RBFN().fit(X, sets[0], kept=kept)

    def fit(i):
        out[i] = RBFN().fit(X, sets[i], kept=kept)

    threads = [threading.Thread(target=fit, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in (0, 1):
        _same_model(out[i], RBFN().fit(X, sets[i]), X)
    assert len(kept["rbfn"]) == 1 and len(kept["rbfn"][0][3]) == 1
