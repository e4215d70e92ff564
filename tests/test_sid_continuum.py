"""SID (models/classic.py) against the formula, and continuum removal (models/continuum.py) against a
per-spectrum monotone-chain hull; both on the GPU against NumPy."""

import numpy as np
import pytest

from hyperapp.core.errors import InputError
from hyperapp.models import classic
from hyperapp.models.continuum import InContinuum, _continuum, continuum, continuum_removed
from hyperapp.models.registry import get_method


def _scene(rows=30, cols=40, bands=24, seed=0):
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.05, 0.6, size=(4, bands))
    ab = rng.dirichlet(np.ones(4), size=rows * cols)
    X = (ab @ ends + rng.normal(0, 0.01, (rows * cols, bands))).astype(np.float32).reshape(rows, cols, bands)
    y = -np.ones((rows, cols), np.int8)
    y.reshape(-1)[rng.choice(rows * cols, 4, replace=False)] = 1
    return X, y


def sid_reference(P, t, eps=classic.SID_EPS):
    """SID = sum p log(p/q) + sum q log(q/p), p and q the spectra clipped to eps and scaled to sum 1."""
    P = np.maximum(P.astype(np.float64), eps)
    q = np.maximum(t.astype(np.float64), eps)
    q = q / q.sum()
    out = np.empty(P.shape[0])
    for i, x in enumerate(P):
        p = x / x.sum()
        out[i] = np.sum(p * np.log(p / q)) + np.sum(q * np.log(q / p))
    return out


def test_sid_matches_the_formula():
    X, y = _scene()
    X[0, 0, :3] = 0.0  # zeros and negative noise: clipped to the floor in pixels and target alike
    X[0, 1, 5] = -0.02
    m = classic.SID().fit(X, y)
    s = m.decision_function(X)
    P = X.reshape(-1, X.shape[2])
    t = P[(y.reshape(-1) == 1)].astype(np.float64).mean(axis=0)
    ref = sid_reference(P, t)
    assert s.shape == X.shape[:2] and s.dtype == np.float32
    assert np.all(np.isfinite(s))
    assert np.abs(classic.SID.divergence(s).reshape(-1) - ref).max() <= 1e-5 * ref.max() + 1e-7
    # higher = more target-like: the target pixels' own spectra score near the top, the mean's shape at 0
    assert classic.SID().fit_signature(X, t).decision_function(t[None].astype(np.float32))[0] == \
        pytest.approx(0.0, abs=1e-6)
    assert np.allclose(classic.SID().fit_signature(X, t).decision_function(X), s)
    # brightness does not change the score (but for the clipped values: the floor is absolute)
    assert np.allclose(m.decision_function(3.0 * X).reshape(-1)[2:], s.reshape(-1)[2:], atol=1e-6)


def test_sid_float64_and_refusals():
    X, y = _scene()
    s64 = classic.SID().fit(X.astype(np.float64), y).decision_function(X.astype(np.float64))
    assert s64.dtype == np.float64
    P = X.reshape(-1, X.shape[2]).astype(np.float64)
    ref = sid_reference(P, P[y.reshape(-1) == 1].mean(axis=0))
    assert np.abs(-s64.reshape(-1) - ref).max() <= 1e-12
    with pytest.raises(InputError, match="no positive value"):
        classic.SID().fit(-X, y)
    with pytest.raises(InputError, match="bands"):
        classic.SID().fit(X, y).decision_function(X[..., :5])


def test_sid_is_registered_and_runs_the_detection_path():
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    m = get_method("sid")
    assert m.min_bands == 2 and m.kind == "pixel" and m.uses_targets
    assert isinstance(m.build(), classic.SID)
    X, y = _scene(40, 40, 16)
    truth = np.zeros((40, 40), np.int8)
    material = X.reshape(-1, 16).mean(axis=0) * np.linspace(0.5, 1.5, 16, dtype=np.float32)
    bright = np.random.default_rng(1).uniform(0.5, 2.0, (4, 4, 1)).astype(np.float32)
    X[10:14, 10:14] = 0.1 * X[10:14, 10:14] + 0.9 * bright * material  # a planted material, at any brightness
    truth[10:14, 10:14] = 1
    targets = np.zeros((40, 40), bool)
    targets[11, 11] = True
    res = run_detection(cube_from_array(X, "probe"), DetectRequest("sid", device="cpu"), targets, truth=truth)
    assert res.scores.shape == (40, 40)
    assert np.isfinite(res.scores).all()
    assert res.report["evaluation"]["auc"] > 0.99


# ------------------------------------------------------------------ continuum removal
def hull_reference(y, x):
    """The upper convex hull of (x, y) by Andrew's monotone chain, one spectrum at a time, interpolated at x."""
    order = np.argsort(x)
    xs, ys = x[order].astype(np.float64), y[order].astype(np.float64)
    hull = []
    for i in range(len(xs)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (xs[b] - xs[a]) * (ys[i] - ys[a]) - (ys[b] - ys[a]) * (xs[i] - xs[a]) >= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    out = np.empty(len(xs))
    out[order] = np.interp(xs, xs[hull], ys[hull])
    return out


def _spectra(n, bands, seed):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, bands)
    base = 0.2 + 0.5 * np.sqrt(t) - 0.2 * t ** 2  # concave: many hull vertices
    dips = 1 - 0.4 * np.exp(-((t[None, :] - rng.uniform(0, 1, (n, 1))) / 0.05) ** 2)
    return base[None, :] * dips * rng.uniform(0.5, 2, (n, 1)) + rng.normal(0, 0.003, (n, bands))


@pytest.mark.parametrize("bands,shuffle", [(2, False), (3, False), (24, False), (205, False), (64, True)])
def test_continuum_matches_a_per_spectrum_hull(bands, shuffle):
    rng = np.random.default_rng(bands)
    P = _spectra(300, bands, bands)
    P[0] = 0.5  # flat: its own continuum
    x = np.sort(rng.uniform(400, 2500, bands))
    P[1] = 0.1 + 0.8 * (x - x[0]) / (x[-1] - x[0])  # a straight line over wavelength: every point on the hull
    if shuffle:  # bands listed out of wavelength order: the hull is over wavelength, the result in band order
        perm = rng.permutation(bands)
        P, x = P[:, perm], x[perm]
    ref = np.array([hull_reference(p, x) for p in P])
    got = continuum(P, x)
    assert got.dtype == np.float64 and np.abs(got - ref).max() <= 1e-12
    cr = continuum_removed(P, x)
    assert np.abs(cr - P / ref).max() <= 1e-12
    assert cr.max() <= 1 + 1e-12 and np.allclose(cr[0], 1) and np.allclose(cr[1], 1)
    on_hull = np.isclose(P, ref, rtol=0, atol=0)
    assert np.abs(cr[on_hull] - 1).max() <= 1e-12  # 1 where the spectrum touches its hull
    ends = np.argsort(x)[[0, -1]]
    assert np.all(cr[:, ends] == 1.0)  # the first and last wavelengths are vertices: exactly 1


def test_continuum_without_wavelengths_uses_the_band_index_and_keeps_the_shape():
    P = _spectra(60, 30, 1).astype(np.float32).reshape(6, 10, 30)
    got = continuum_removed(P)
    assert got.shape == P.shape and got.dtype == np.float32
    flat = P.reshape(-1, 30)
    ref = np.array([p / hull_reference(p, np.arange(30.0)) for p in flat.astype(np.float64)])
    assert np.abs(got.reshape(-1, 30) - ref).max() <= 1e-6
    # uneven wavelengths change the hull; the band index treats the bands as evenly spaced
    x = np.cumsum(np.linspace(1, 20, 30))
    assert not np.allclose(continuum_removed(flat, x), continuum_removed(flat))


def test_continuum_known_case_and_edges():
    y = np.array([1.0, 0.5, 2.0, 1.0, 0.0, 3.0])
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 6.0])
    # hull: (0,1) -> (2,2) -> (6,3); at 1: 1.5; at 3: 2.25; at 4: 2.5
    assert np.allclose(continuum(y[None], x)[0], [1.0, 1.5, 2.0, 2.25, 2.5, 3.0])
    assert np.allclose(continuum_removed(y[None], x)[0], [1.0, 0.5 / 1.5, 1.0, 1.0 / 2.25, 0.0, 1.0])
    assert np.array_equal(continuum_removed(np.array([[4.0]])), [[1.0]])  # one band
    assert np.array_equal(continuum_removed(np.zeros((2, 5))), np.ones((2, 5)))  # no positive continuum
    assert np.allclose(continuum_removed(-np.ones((1, 5))), 1.0)
    assert continuum_removed(np.zeros((0, 5))).shape == (0, 5)
    for bad, words in (([1, 2, 2, 3, 4, 5], "distinct"), ([1, 2, 3], "3 wavelengths for 6 bands"),
                       ([1, 2, np.nan, 4, 5, 6], "finite"), (["a"] * 6, "numeric")):
        with pytest.raises(InputError, match=words):
            continuum_removed(y[None], bad)


@pytest.mark.parametrize("cls", [classic.SAM, classic.SID, classic.ACE, classic.RX])
def test_any_detector_runs_on_continuum_removed_spectra(cls):
    X, y = _scene(20, 25, 30)
    X = X + np.linspace(0.0, 0.3, 30, dtype=np.float32)  # a slope the continuum takes away
    wl = np.sort(np.random.default_rng(3).uniform(400, 2500, 30))
    Z = continuum_removed(X, wl)
    est = InContinuum(cls(), wl)
    assert est.uses_targets == cls.uses_targets
    got = est.fit(X, y).decision_function(X)
    assert np.allclose(got, cls().fit(Z, y).decision_function(Z), rtol=1e-6, atol=1e-6)
    if cls.uses_targets:  # a library's spectrum is transformed as the pixels are
        t = X.reshape(-1, 30)[7].astype(np.float64)
        lib = InContinuum(cls(), wl).fit_signature(X, t).decision_function(X)
        ref = cls().fit_signature(Z, continuum_removed(t[None], wl)[0]).decision_function(Z)
        assert np.allclose(lib, ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(InputError, match="bands"):
        est.decision_function(X[..., :10])


def test_local_rx_on_continuum_removed_spectra_keeps_the_image():
    X, _ = _scene(24, 26, 12)
    Z = continuum_removed(X)
    got = InContinuum(classic.LocalRX(3, 9)).fit(X).decision_function(X)
    assert np.allclose(got, classic.LocalRX(3, 9).fit(Z).decision_function(Z))


@pytest.mark.gpu
def test_sid_on_the_gpu_agrees(cp):
    X, y = _scene(200, 300, 64)
    a = classic.SID().fit(X, y).decision_function(X)
    b = classic.SID().fit(cp.asarray(X), cp.asarray(y)).decision_function(cp.asarray(X))
    assert isinstance(b, cp.ndarray)
    assert np.abs(a - b.get()).max() <= 1e-4 * np.abs(a).max()


@pytest.mark.gpu
@pytest.mark.parametrize("bands", [3, 64, 205, 430])
def test_continuum_on_the_gpu_agrees(cp, bands):
    rng = np.random.default_rng(bands)
    P = _spectra(20000, bands, bands)
    x = rng.permutation(np.sort(rng.uniform(400, 2500, bands)))
    P = P[:, np.argsort(np.argsort(x))]  # any band order
    for dtype in (np.float64, np.float32):
        Q = P.astype(dtype)
        want = continuum_removed(Q, x)
        got = continuum_removed(cp.asarray(Q), x)  # kernels/continuum.cu
        assert isinstance(got, cp.ndarray) and got.dtype == want.dtype
        assert np.abs(got.get() - want).max() <= (1e-12 if dtype == np.float64 else 1e-6), (bands, dtype)
        # the vectorised march on CuPy too (the CPU's algorithm)
        hull = _continuum(cp.asarray(Q), x, kernel=False)
        assert np.abs(hull.get() - continuum(Q, x)).max() <= (1e-12 if dtype == np.float64 else 1e-6), (bands, dtype)
