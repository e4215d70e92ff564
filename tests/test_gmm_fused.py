"""The GMM's fused full-covariance path (the GPU's: one GEMM per block for every component's E-step and one
for the M-step's sums, models/gmm.py) and em-EM's choice among starts.

The fused path's array code is the same on NumPy (its two kernels have NumPy twins), so the CPU tests
force it there and hold it to the direct float64 sums it replaced on the GPU; the GPU tests run it
natively."""

from __future__ import annotations

import numpy as np
import pytest

import hyperapp.models.gmm as gmm
from hyperapp.models.gmm import GaussianMixtureEM

from .test_gmm_real import _airport_pixels, _sklearn_ll, radiance_like


def _force(monkeypatch, path: str) -> None:
    monkeypatch.setattr(GaussianMixtureEM, "_path", lambda self, xp: path)


def _reference_covariances(Xc, resp):
    """The covariances of the responsibilities ``resp`` about their own means, in long double."""
    XL, RL = Xc.astype(np.longdouble), resp.astype(np.longdouble)
    nk = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
    mu = (RL.T @ XL) / nk[:, None]
    return np.stack([((RL[:, j:j + 1] * (XL - mu[j])).T @ (XL - mu[j])) / nk[j] for j in range(resp.shape[1])])


def _fused_covariances(g, Xc, resp, shift):
    """The fused M-step's covariances (without the floor) of ``resp`` summed about ``shift``."""
    g.reg_covar = 0.0
    stats = g._fused_pass(Xc, resp=resp, shift=shift)[1]
    nk, gsum, S, s, _ = stats
    k, d = s.shape
    nk = nk + 10 * np.finfo(np.float64).eps
    delta = gsum / nk[:, None]
    T = S.reshape(d, k, d).transpose(1, 0, 2) - s[:, :, None] * gsum[:, None, :]
    cov = T / nk[:, None, None] - delta[:, :, None] * delta[:, None, :]
    return 0.5 * (cov + cov.transpose(0, 2, 1))


def _soft_responsibilities(X, k, monkeypatch):
    """Responsibilities of a short direct fit (soft, every component used) and its means (centred)."""
    _force(monkeypatch, "direct")
    g = GaussianMixtureEM(k=k, n_init=1, max_iter=5, tol=0.0).fit(X)
    resp = np.asarray(g.predict_proba(X), np.float64)
    return resp / resp.sum(axis=1, keepdims=True), np.asarray(g._means_c)


@pytest.mark.parametrize("scene", ["radiance", "airport"])
def test_fused_sums_are_as_accurate_as_float64_allows(scene, monkeypatch, request):
    """The M-step's sums about the E-step's means (S - s g^T, g summed from the very products): within
    1e-13 of the largest covariance entry of long double's centred sums, on radiance in the thousands and on
    the airport scene; the uncentred moments S / n - mu mu^T lose up to 10x more (measured 1.5e-13 on the
    airport, 2.9e-14 on radiance, against 2.9e-14 and 7e-16 here)."""
    if scene == "radiance":
        X, k = radiance_like(4000, 120), 4
    else:
        X, k = _airport_pixels(request.getfixturevalue("abu"))[::8], 8  # every 8th spectrum: 1,250 (CI's time)
    Xc = X.astype(np.float64) - X.mean(axis=0, dtype=np.float64)
    resp, means = _soft_responsibilities(X, k, monkeypatch)
    ref = _reference_covariances(Xc, resp)
    top = np.abs(ref).max(axis=(1, 2))
    cov = _fused_covariances(GaussianMixtureEM(k=k), Xc, resp, means)
    err = (np.abs(cov - ref).max(axis=(1, 2)) / top).max()
    assert err < 1e-13, err
    # summed about the global centre instead (no shift), the offset cancels: visibly worse
    err0 = (np.abs(_fused_covariances(GaussianMixtureEM(k=k), Xc, resp, np.zeros_like(means)) - ref).max(axis=(1, 2))
            / top).max()
    assert err0 > 3 * err, (err0, err)


def test_fused_path_follows_the_direct_float64_path(monkeypatch):
    """From the same k-means start, the fused E- and M-steps give the direct per-component float64 path's
    likelihood curve, parameters and posteriors (the same arithmetic in another order)."""
    X = radiance_like(3000, 60)
    fits = {}
    for path in ("direct", "fused"):
        _force(monkeypatch, path)
        fits[path] = GaussianMixtureEM(k=4, n_init=1, max_iter=15, tol=0.0).fit(X)
    a, b = fits["direct"], fits["fused"]
    np.testing.assert_allclose(b.ll_curve_, a.ll_curve_, rtol=1e-9)
    np.testing.assert_allclose(b.means_, a.means_, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-7, atol=1e-8 * np.abs(a.covariances_).max())
    np.testing.assert_allclose(b.weights_, a.weights_, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(b.predict_proba(X)), np.asarray(a.predict_proba(X)), atol=1e-5)
    assert b.score(X) == pytest.approx(a.score(X), rel=1e-9)
    assert b.score(X) == pytest.approx(b.log_likelihood_[0], rel=1e-9)


def test_fused_path_blocks_and_floors(monkeypatch):
    """Several blocks give what one block gives; a component of identical spectra gets the same reported
    floor as on the direct path (its sums about its own mean come out near zero, not rounding noise of
    the offset)."""
    X = radiance_like(3000, 60)
    _force(monkeypatch, "fused")
    one = GaussianMixtureEM(k=3, n_init=1, max_iter=8, tol=0.0).fit(X)
    monkeypatch.setattr(gmm, "FUSED_BYTES", 8 * 3 * 60 * 700)  # blocks of 700 spectra
    assert gmm._fused_rows(3000, 3, 60) == 700
    many = GaussianMixtureEM(k=3, n_init=1, max_iter=8, tol=0.0).fit(X)
    np.testing.assert_allclose(many.ll_curve_, one.ll_curve_, rtol=1e-11)
    monkeypatch.setattr(gmm, "M_SPLIT", 4)  # the M-step's GEMM split over row slices
    split = GaussianMixtureEM(k=3, n_init=1, max_iter=8, tol=0.0).fit(X)
    np.testing.assert_allclose(split.ll_curve_, one.ll_curve_, rtol=1e-11)
    monkeypatch.setattr(gmm, "FUSED_BYTES", 512 << 20)
    rng = np.random.default_rng(1)
    Y = np.concatenate([rng.normal(0, 1, (500, 30)), np.tile(rng.normal(5000, 1, 30), (40, 1))]).astype(np.float32)
    floors = {}
    for path in ("direct", "fused"):
        _force(monkeypatch, path)
        g = GaussianMixtureEM(k=2, covariance="full", reg_covar=0.0, n_init=1).fit(Y)
        assert g.regularised_, path
        floors[path] = g
        labels = g.predict(Y)
        assert len(np.unique(labels[-40:])) == 1 and labels[-1] != np.bincount(labels[:500]).argmax()
    assert set(floors["fused"].regularised_) == set(floors["direct"].regularised_)


def test_em_em_continues_the_best_short_run(monkeypatch):
    """em-EM: every start's short run stops where that start alone would (the relative criterion or
    start_iter) and scores what it scores there, the best of them is the one that goes on, and its run
    (curve, iterations, likelihood) is exactly that start's run alone to max_iter; the short runs plus the
    rest of the best one are all the EM iterations run."""
    X = radiance_like(2500, 40, seed=3)
    kw = dict(k=6, covariance="full", tol=0.0, reg_covar=1e-4)
    calls = []
    real = GaussianMixtureEM._iteration
    monkeypatch.setattr(GaussianMixtureEM, "_iteration", lambda self, *a: calls.append(1) or real(self, *a))
    m = GaussianMixtureEM(n_init=4, start_iter=12, max_iter=30, seed=2, **kw).fit(X)
    monkeypatch.setattr(GaussianMixtureEM, "_iteration", real)
    short = m.start_iterations_
    assert len(calls) == short.sum() + 30 - short[m.best_start_]
    for r in range(4):
        alone = GaussianMixtureEM(n_init=1, max_iter=int(short[r]), seed=2 + r, **kw).fit(X).ll_curve_
        assert m.start_log_likelihoods_[r] == pytest.approx(alone[-1], rel=1e-12)
        gains = np.diff(alone) <= gmm.SHORT_RUN_SETTLE * (alone[1:] - alone[0])
        assert not gains[:-1].any() and (gains[-1] or short[r] == 12), (r, alone)  # stopped where it settled
    assert np.ptp(m.start_log_likelihoods_) > 1e-3 * abs(m.start_log_likelihoods_.max()), "the starts do not differ"
    assert m.best_start_ == int(np.argmax(m.start_log_likelihoods_))
    alone = GaussianMixtureEM(n_init=1, max_iter=30, seed=2 + m.best_start_, **kw).fit(X)
    assert m.n_iter_ == alone.n_iter_ == 30
    np.testing.assert_allclose(m.ll_curve_, alone.ll_curve_, rtol=1e-12)
    assert m.log_likelihood_[0] == pytest.approx(alone.log_likelihood_[0], rel=1e-12)
    # a fixed short run (no relative stop): start_iter iterations each
    monkeypatch.setattr(gmm, "SHORT_RUN_SETTLE", None)
    fixed = GaussianMixtureEM(n_init=4, start_iter=5, max_iter=30, seed=2, **kw).fit(X)
    assert list(fixed.start_iterations_) == [5] * 4
    shorts = [GaussianMixtureEM(n_init=1, max_iter=5, seed=2 + r, **kw).fit(X).ll_curve_[-1] for r in range(4)]
    np.testing.assert_allclose(fixed.start_log_likelihoods_, shorts, rtol=1e-12)
    assert fixed.best_start_ == int(np.argmax(shorts))
    # every start to the end (start_iter >= max_iter): the best final likelihood of all starts
    full = GaussianMixtureEM(n_init=4, start_iter=30, max_iter=30, seed=2, **kw).fit(X)
    finals = [GaussianMixtureEM(n_init=1, max_iter=30, seed=2 + r, **kw).fit(X).log_likelihood_[0] for r in range(4)]
    np.testing.assert_allclose(full.start_log_likelihoods_, finals, rtol=1e-12)
    assert full.log_likelihood_[0] == pytest.approx(max(finals), rel=1e-12)


def test_em_em_waits_for_a_start_still_climbing(abu):
    """The case a fixed 10 iterations got wrong: on 4,000 airport spectra with 5 diagonal components, the
    first start settles at 303.9 within 10 iterations while the other two are still climbing (303.0 at 10,
    316.0 at the end). Their short runs go on until they settle, so em-EM keeps a start that ends higher."""
    from .test_som_gmm import _pixels

    X = _pixels(abu, 4000, 1000.0, dataset="data")
    m = GaussianMixtureEM(k=5, covariance="diag", reg_covar=1e-4).fit(X)
    assert m.start_iterations_.max() > 10, m.start_iterations_
    one = [GaussianMixtureEM(k=5, covariance="diag", reg_covar=1e-4, n_init=1, seed=r).fit(X).log_likelihood_[0]
           for r in range(3)]
    assert m.log_likelihood_[0] == pytest.approx(max(one), rel=1e-9), (m.log_likelihood_[0], one)


def test_start_iter_is_a_declared_parameter():
    from hyperapp.core.errors import InputError
    from hyperapp.models.registry import get_analysis

    p = {q.name: q for q in GaussianMixtureEM.parameters}["start_iter"]
    assert p.label and "em-EM" in p.help and GaussianMixtureEM().start_iter == 20
    with pytest.raises(InputError):
        p.check(0)
    assert {q.name: q for q in get_analysis("gmm").params}["start_iter"].default == 20


def test_kmeans_starts_are_the_separate_k_means_fits():
    """The EM starts' k-means, seeded and iterated together, label every spectrum as one MultiKMeans fit
    per start (seed + r) does."""
    from hyperapp.models.kmeans import MultiKMeans

    X = radiance_like(3000, 40, seed=5).astype(np.float32)
    starts = gmm.kmeans_starts(X, 6, 3, 7)
    for r in range(3):
        alone = MultiKMeans(k=6, n_init=1, seed=7 + r, silhouette_sample=0, max_iter=100).fit(X).labels_
        np.testing.assert_array_equal(starts[r], alone)
    assert len({tuple(s[:200]) for s in starts}) > 1, "the starts do not differ"


def _spd(rng, k, d, bad=None):
    """k covariance-like matrices of d bands (eigenvalues over 6 decades), the ``bad`` one indefinite."""
    out = np.empty((k, d, d))
    for j in range(k):
        Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
        out[j] = (Q * np.logspace(-3, 3, d)) @ Q.T
        out[j] = 0.5 * (out[j] + out[j].T)
    if bad is not None:
        out[bad, d // 2, d // 2] = -1.0
    return out


def test_factors_twin_is_the_precision_factors():
    """The NumPy twin of the factorisation kernel: the covariances' and precisions' Cholesky factors of
    _precision_factors, the stacked E-step factors, the pivots (NaN for a matrix that has none)."""
    rng = np.random.default_rng(0)
    cov, mu = _spd(rng, 3, 20, bad=2), rng.normal(0, 10, (3, 20))
    L, U, W, b, info = gmm._factors(cov, mu)
    L0, U0, _ = GaussianMixtureEM._precision_factors(cov[:2].copy())
    np.testing.assert_allclose(L[:2], L0, rtol=1e-9, atol=1e-12 * np.abs(L0).max())
    np.testing.assert_allclose(U[:2], U0, rtol=1e-9, atol=1e-12 * np.abs(U0).max())
    np.testing.assert_allclose(np.einsum("kab,kcb->kac", U[:2], U[:2]), np.linalg.inv(cov[:2]), rtol=1e-8, atol=1e-9)
    np.testing.assert_array_equal(W[:, 20:40], U[1])
    np.testing.assert_allclose(b[:2], np.einsum("ka,kab->kb", mu[:2], U[:2]), rtol=1e-12, atol=1e-12 * np.abs(b[:2]).max())
    np.testing.assert_allclose(info[:2, :20], np.diagonal(L0, axis1=1, axis2=2) ** 2, rtol=1e-9)
    np.testing.assert_allclose(info[:2, 20], -0.5 * np.linalg.slogdet(cov[:2])[1], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(info[:2, 21], np.abs(U[:2]).max(axis=(1, 2)))
    assert not np.isfinite(info[2, :20]).all()


# ------------------------------------------------------------------ on the GPU
@pytest.mark.gpu
def test_gpu_fused_path_matches_numpy_fused_and_direct(cp):
    X = radiance_like(6000, 100)
    cpu, proba = {}, {}
    for path in ("direct", "fused"):
        GaussianMixtureEM._path, old = (lambda self, xp, p=path: p), GaussianMixtureEM._path
        try:
            cpu[path] = GaussianMixtureEM(k=5, n_init=1, max_iter=15, tol=0.0).fit(X)
            # the posteriors on the same path (outside it the CPU takes its float32 whitened products, whose
            # rounding moved a few near-boundary posteriors by up to 6e-4 against the GPU's float64 ones)
            proba[path] = np.asarray(cpu[path].predict_proba(X))
        finally:
            GaussianMixtureEM._path = old
    gpu = GaussianMixtureEM(k=5, n_init=1, max_iter=15, tol=0.0).fit(cp.asarray(X))
    assert gpu._path(cp) == "fused"
    np.testing.assert_allclose(gpu.ll_curve_, cpu["fused"].ll_curve_, rtol=1e-9)
    np.testing.assert_allclose(gpu.ll_curve_, cpu["direct"].ll_curve_, rtol=1e-9)
    np.testing.assert_allclose(gpu.covariances_, cpu["direct"].covariances_, rtol=1e-6,
                               atol=1e-8 * np.abs(cpu["direct"].covariances_).max())
    p = cp.asnumpy(gpu.predict_proba(cp.asarray(X)))
    np.testing.assert_allclose(p, proba["direct"], atol=1e-6)
    assert gpu.score(cp.asarray(X)) == pytest.approx(gpu.log_likelihood_[0], rel=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("k,d,m", [(3, 57, 1000), (8, 128, 4097), (5, 285, 300)])
def test_gpu_kernels_match_their_numpy_twins(cp, k, d, m):
    """The two kernels at band counts never compiled for (k and d are runtime arguments), odd sizes."""
    rng = np.random.default_rng(k)
    Y = rng.normal(0, 1, (m, k * d))
    b = rng.normal(0, 1, (k, d))
    c = rng.normal(0, 10, k)
    r0, l0 = gmm._estep_rows(Y, b, c, k, d)
    r1, l1 = gmm._estep_rows(cp.asarray(Y), cp.asarray(b), cp.asarray(c), k, d)
    np.testing.assert_allclose(cp.asnumpy(l1), l0, rtol=1e-12)
    np.testing.assert_allclose(cp.asnumpy(r1), r0, rtol=1e-9, atol=1e-300)
    X = rng.normal(100, 5, (m, d))
    R = rng.dirichlet(np.ones(k), m)
    s = rng.normal(100, 1, (k, d))
    B0 = np.empty((m, k * d))
    B1 = cp.empty((m, k * d))
    g0 = gmm._weighted_deviations(X, R, s, B0)
    g1 = gmm._weighted_deviations(cp.asarray(X), cp.asarray(R), cp.asarray(s), B1)
    np.testing.assert_allclose(cp.asnumpy(B1), B0, rtol=1e-15)
    np.testing.assert_allclose(cp.asnumpy(g1), g0, rtol=1e-10, atol=1e-9)


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_airport_k8_full_three_starts_within_half_a_percent_of_sklearn(abu, cp):
    X = _airport_pixels(abu)
    ll = float(GaussianMixtureEM(k=8).fit(cp.asarray(X)).log_likelihood_[0])
    ref = _sklearn_ll(X, 8, "full", 3)
    assert ll >= ref - 0.005 * abs(ref), (ll, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("k,d", [(3, 57), (8, 128), (5, 285)])
def test_gpu_m_step_kernels_match_their_numpy_twins(cp, k, d):
    """The covariance and factorisation kernels at odd band counts, in shared memory (57, 128) and in
    global memory (285 bands: the matrix does not fit), an indefinite matrix among them."""
    rng = np.random.default_rng(d)
    S = rng.normal(0, 1e3, (d, k * d))
    s, g, nk = rng.normal(0, 10, (k, d)), rng.normal(0, 1, (k, d)), rng.uniform(10, 1000, k)
    c0, m0 = gmm._covariances(S, s, g, nk, 1e-6)
    c1, m1 = gmm._covariances(*(cp.asarray(v) for v in (S, s, g, nk)), 1e-6)
    np.testing.assert_allclose(cp.asnumpy(c1), c0, rtol=1e-12, atol=1e-12 * np.abs(c0).max())
    np.testing.assert_allclose(cp.asnumpy(m1), m0, rtol=1e-14)
    cov, mu = _spd(rng, k, d, bad=k - 1), rng.normal(0, 10, (k, d))
    ref = gmm._factors(cov, mu)
    got = [cp.asnumpy(v) for v in gmm._factors(cp.asarray(cov), cp.asarray(mu))]
    ok = slice(0, k - 1)
    for name, a, b in zip(("L", "U", "W", "b"), got[:4], ref[:4]):
        if name == "W":
            a, b = a[:, : (k - 1) * d], b[:, : (k - 1) * d]
        else:
            a, b = a[ok], b[ok]
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(b).max(), err_msg=name)
    # pivots, log det U (about 0 here: eigenvalues spread evenly over 1e-3..1e3) and the largest |U|
    np.testing.assert_allclose(got[4][ok], ref[4][ok], rtol=1e-9, atol=1e-9)
    assert not np.isfinite(got[4][k - 1, :d]).all() or got[4][k - 1, :d].min() <= 0


def test_diagonal_log_densities_from_two_gemms_are_the_direct_sums():
    """The diagonal E-step's log densities, x^2 . p - 2 x . (mu p) + mu^2 . p for every component at once,
    equal the direct sum of (x - mu)^2 p per component, on centred spectra whose components sit far
    apart at small spreads (where the expanded form could lose digits)."""
    import math

    rng = np.random.default_rng(11)
    d, k = 30, 5
    means = rng.normal(0, 50, (k, d))
    X = np.concatenate([m + rng.normal(0, 0.05, (400, d)) for m in means])
    X -= X.mean(axis=0)
    means -= means.mean(axis=0)
    chol = 1.0 / rng.uniform(0.03, 0.08, (k, d))
    got = GaussianMixtureEM()._log_gauss(X, means, chol)
    want = np.stack([-0.5 * (d * math.log(2 * math.pi) + (((X - means[j]) * chol[j]) ** 2).sum(axis=1))
                     + np.log(chol[j]).sum() for j in range(k)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-6)
