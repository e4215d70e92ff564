"""ACE, MF, RX and local RX agree with Spectral Python to 1e-4 relative on float64 input; CEM and
SAM against their closed forms; evaluation helpers against scikit-learn."""

import numpy as np
import pytest
import spectral
from sklearn.metrics import roc_auc_score, roc_curve

from hyperapp.core.errors import InputError, ModelError
from hyperapp.models import classic
from hyperapp.models.evaluation import auc, evaluate
from hyperapp.models.evaluation import roc_curve as our_roc


@pytest.fixture
def scene():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((30, 40, 12)) @ rng.standard_normal((12, 12)) + 3.0
    y = -np.ones((30, 40), np.int8)
    y[5, 6] = y[20, 30] = y[7, 7] = 1
    return X, y


def rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def test_ace_mf_rx_lrx_match_spectral(scene):
    X, y = scene
    t = X[y == 1].mean(axis=0)
    bg = spectral.calc_stats(X[y != 1].reshape(-1, 1, X.shape[2]))
    assert rel(classic.ACE().fit(X, y).decision_function(X), spectral.ace(X, t, bg)) < 1e-4
    assert rel(classic.MatchedFilter().fit(X, y).decision_function(X), spectral.matched_filter(X, t, bg)) < 1e-4
    assert rel(classic.RX().fit(X).decision_function(X), spectral.rx(X)) < 1e-4
    cov = spectral.calc_stats(X).cov
    assert rel(classic.LocalRX(3, 11).fit(X).decision_function(X), spectral.rx(X, window=(3, 11), cov=cov)) < 1e-4


def test_cem_and_sam_closed_forms(scene):
    X, y = scene
    P = X.reshape(-1, X.shape[2])
    d = P[y.reshape(-1) == 1].mean(axis=0)
    R = P.T @ P / P.shape[0]
    w = np.linalg.solve(R, d) / (d @ np.linalg.solve(R, d))
    assert rel(classic.CEM().fit(X, y).decision_function(X), (P @ w).reshape(30, 40)) < 1e-8
    s = classic.SAM().fit(X, y).decision_function(X)
    ref = spectral.spectral_angles(X, d[None, :])[:, :, 0]
    assert rel(classic.SAM.angle(s), ref) < 1e-6


def test_cem_on_float32_radiance_matches_float64():
    """CEM's correlation from the sums of float32 rows about a rough mean (correlation_from_sums) scores a
    radiance-like float32 cube (values near 1000, a correlation conditioned 5e6) as the float64
    closed form does."""
    rng = np.random.default_rng(4)
    X = (rng.standard_normal((200, 150, 24)) @ rng.standard_normal((24, 24)) * 10 + 1000
         + rng.uniform(0, 50, 24)).astype(np.float32)
    y = -np.ones((200, 150), np.int8)
    y[5, 6] = y[20, 30] = y[7, 7] = 1
    P = X.reshape(-1, 24).astype(np.float64)
    d = P[y.reshape(-1) == 1].mean(axis=0)
    R = P.T @ P / P.shape[0]
    w = np.linalg.solve(R, d) / (d @ np.linalg.solve(R, d))
    assert rel(classic.CEM().fit(X, y).decision_function(X).reshape(-1), P @ w) < 1e-5


def test_float32_input_computes_in_float32(scene):
    X, y = scene
    s = classic.ACE().fit(X.astype(np.float32), y).decision_function(X.astype(np.float32))
    assert s.dtype == np.float32


def test_detector_input_errors(scene):
    X, y = scene
    with pytest.raises(ModelError, match="no target pixels"):
        classic.SAM().fit(X, -np.ones_like(y))
    with pytest.raises(ModelError, match="every pixel is marked"):
        classic.ACE().fit(X, np.ones_like(y))
    with pytest.raises(ModelError, match="not fitted"):
        classic.ACE().decision_function(X)
    with pytest.raises(InputError, match="bands"):
        classic.ACE().fit(X, y).decision_function(X[:, :, :5])
    Xn = X.copy()
    Xn[1, 1, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        classic.MatchedFilter().fit(Xn, y)


def test_identical_spectra_singular_covariance_is_handled():
    X = np.tile(np.linspace(1, 2, 8), (10, 10, 1))
    X[2, 2] += np.linspace(0, 1, 8)
    y = -np.ones((10, 10), np.int8)
    y[2, 2] = 1
    s = classic.ACE().fit(X, y).decision_function(X)
    assert np.isfinite(s).all() and s[2, 2] == s.max()


def test_evaluation_without_selections_gives_the_same_numbers():
    """The GPU's evaluate (no boolean selections: sorted non-targets padded with +inf, every pixel looked
    up) computes what the NumPy path does, ties, NaN and left-out pixels included (run here on NumPy)."""
    from hyperapp.models.evaluation import _evaluate_device, evaluate

    rng = np.random.default_rng(3)
    for _ in range(5):
        truth = rng.random(20000) < 0.03
        s = (rng.normal(size=20000) + 2 * truth).astype(np.float32)
        s[:300] = np.round(s[:300], 1)
        s[rng.choice(20000, 50)] = np.nan
        ex = rng.random(20000) < 0.01
        assert _evaluate_device(s, truth, exclude=ex) == evaluate(s, truth, exclude=ex)


def test_evaluation_matches_sklearn():
    rng = np.random.default_rng(0)
    truth = rng.random(5000) < 0.05
    scores = rng.normal(size=5000) + truth * 1.5
    scores[:100] = np.round(scores[:100], 1)  # ties
    assert auc(scores, truth) == pytest.approx(roc_auc_score(truth, scores), abs=1e-12)
    fpr, tpr = our_roc(scores, truth)
    f2, t2, _ = roc_curve(truth, scores)
    assert np.interp(0.1, fpr, tpr) == pytest.approx(np.interp(0.1, f2, t2), abs=0.01)
    neg = np.sort(scores[~truth])[::-1]
    k = int(0.01 * neg.size)
    assert evaluate(scores, truth)["pd_at_far_1e-2"] == pytest.approx((scores[truth] > neg[k]).mean())
    # the counts the rates are over: the truth's targets less the excluded (the clicks), and the rest
    ex = np.zeros(5000, bool)
    ex[np.flatnonzero(truth)[:5]] = True
    got = evaluate(scores, truth, ex)
    assert got["n_target_pixels"] == truth.sum() and got["n_target_pixels_scored"] == truth.sum() - 5
    assert got["n_other_pixels_scored"] == (~truth).sum()


def test_whitening_is_triangular_where_the_floor_moves_nothing():
    """ACE, MF and RX whiten with the inverse transposed Cholesky factor where no eigenvalue would be floored
    (BackgroundStats.whitening): U U^T is the inverse covariance, U is upper triangular, and every score
    equals the symmetric whitening's; a covariance whose eigenvalues the floor lifts keeps the symmetric
    Σ^{-1/2} (the triangular factor of the unfloored matrix would whiten another covariance)."""
    from hyperapp.models.stats import BackgroundStats

    rng = np.random.default_rng(7)
    P = rng.standard_normal((4000, 12)) @ rng.standard_normal((12, 12)) + 3.0
    stats = BackgroundStats.from_pixels(P)
    U, tri = stats.whitening(host=True)
    assert tri and np.abs(np.tril(U, -1)).max() == 0
    np.testing.assert_allclose(U @ U.T, np.linalg.inv(stats.host_cov), rtol=1e-8, atol=1e-10)
    # the detectors' scores with it against those with the symmetric one, for the same statistics
    X = P[:600].reshape(20, 30, 12)
    y = -np.ones((20, 30), np.int8)
    y[3, 4] = y[10, 11] = 1
    for cls in (classic.ACE, classic.MatchedFilter, classic.RX):
        m = cls().fit(X, y)
        assert m.tri_
        sym = cls()
        stats_sym = m.stats_
        stats_sym.__dict__["_tri_whitening_either"] = (stats_sym._sqrt_inv_cov_either, False)
        sym.fit_from_stats(stats_sym, getattr(m, "target_", None), np.float64)
        assert not sym.tri_
        assert rel(m.decision_function(X), sym.decision_function(X)) < 1e-9, cls.__name__
    # rank-deficient: two bands equal, so the floor lifts an eigenvalue: the symmetric whitening
    Q = P.copy()
    Q[:, 5] = Q[:, 4]
    singular = BackgroundStats.from_pixels(Q)
    W, tri = singular.whitening(host=True)
    assert not tri and np.array_equal(W, singular.sqrt_inv_cov_on_host())


def test_float32_pixels_get_float64_statistics():
    """Background statistics of float32 pixels are float64's, as Spectral Python's ``calc_stats``: on a
    covariance spanning nine decades, the Mahalanobis distances they give equal those of the same pixels'
    statistics in float64 to 1e-8 (float32 products, however their sums were blocked, moved them by up to
    per cents, and so ACE's and RX's scores)."""
    from hyperapp.models.stats import BackgroundStats

    rng = np.random.default_rng(7)
    b = 48
    Q, _ = np.linalg.qr(rng.standard_normal((b, b)))
    scale = np.logspace(0, -4.5, b)  # standard deviations: variances over nine decades
    X = ((rng.standard_normal((30_000, b)) * scale) @ Q.T * 100 + 1000).astype(np.float32)
    X64 = X.astype(np.float64)
    clicked = np.array([5, 900, 4000])  # (a fit's targets, subtracted from the sums)
    for exclude in (None, clicked):
        want = BackgroundStats.from_pixels(X64, exclude=exclude)
        got = BackgroundStats.from_pixels(X, exclude=exclude)
        D = X64[:500] - want.mean
        assert rel(np.einsum("ij,jk,ik->i", D, got.inv_cov, D), np.einsum("ij,jk,ik->i", D, want.inv_cov, D)) < 1e-8
    peer = spectral.calc_stats(X.reshape(300, 100, b))
    assert rel(BackgroundStats.from_pixels(X).cov, peer.cov) < 1e-10
