"""A resident image's background sums and no-data test, taken once and reused by every click
(hyperapp.detect.resident): the statistics equal the uncached fit's, and an entry never outlives its image."""

import gc

import numpy as np
import pytest

from hyperapp.core.cube import cube_from_array
from hyperapp.detect import resident as res
from hyperapp.detect.run import run_detection
from hyperapp.models.stats import BackgroundStats, PixelSums
from hyperapp.request import DetectRequest

STATS_METHODS = ("ace", "rx", "mf", "cem")


def _scene(rows=48, cols=40, bands=24, seed=0, nodata=False):
    rng = np.random.default_rng(seed)
    ends = rng.uniform(100, 600, size=(4, bands))
    ab = rng.dirichlet(np.ones(4), size=rows * cols)
    X = (ab @ ends + rng.normal(0, 3, (rows * cols, bands))).astype(np.float32).reshape(rows, cols, bands)
    truth = np.zeros((rows, cols), bool)
    truth[5:8, 6:9] = True
    truth[30:32, 20:23] = True
    X[truth] = 0.5 * X[truth] + 0.5 * rng.uniform(100, 600, bands).astype(np.float32)
    if nodata:
        X[0, :7] = np.nan  # a fill border
        X[20, 3] = np.nan
    return X, truth


def _clicks(shape, *cells):
    c = np.zeros(shape, bool)
    for r, k in cells:
        c[r, k] = True
    return c


def _same_fit(a, b, method, exact: bool = True):
    """Two runs' fits: the same statistics to the bit (CEM: the same filter), the same scores; on the GPU
    (``exact`` False) within float64's and float32's rounding: cuBLAS may order a GEMM's sums otherwise for
    another operand's address."""
    same = np.testing.assert_array_equal if exact else (lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-11,
                                                                                              atol=1e-14))
    if method == "cem":
        same(_host(a.model.w_), _host(b.model.w_))
    else:
        same(_host(a.model.stats_.mean), _host(b.model.stats_.mean))
        same(_host(a.model.stats_.cov), _host(b.model.stats_.cov))
        assert a.model.stats_.n == b.model.stats_.n
    if exact:
        np.testing.assert_array_equal(a.scores, b.scores)
    else:
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-6 * float(np.nanmax(np.abs(b.scores))))


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def test_sums_give_the_uncached_statistics_exactly():
    X, _ = _scene()
    P = X.reshape(-1, X.shape[2])
    exclude = np.array([3, 17, 400, 1201])
    plain = BackgroundStats.from_pixels(P, exclude)
    sums = PixelSums.of(P)
    cached = BackgroundStats.from_pixels(P, exclude, sums=sums)
    np.testing.assert_array_equal(cached.mean, plain.mean)
    np.testing.assert_array_equal(cached.cov, plain.cov)
    assert cached.n == plain.n == P.shape[0] - 4
    # and they are the statistics of the rows left, as float64 computes them directly
    keep = np.setdiff1d(np.arange(P.shape[0]), exclude)
    ref = P[keep].astype(np.float64)
    np.testing.assert_allclose(cached.mean, ref.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(cached.cov, np.cov(ref, rowvar=False), rtol=1e-5, atol=1e-6 * np.abs(ref).max())
    # the sums are read, never written: a second downdate from them gives the same again
    again = BackgroundStats.from_pixels(P, exclude, sums=sums)
    np.testing.assert_array_equal(again.cov, plain.cov)
    np.testing.assert_array_equal(sums.s, PixelSums.of(P).s)
    np.testing.assert_array_equal(sums.G, PixelSums.of(P).G)


def test_sums_of_another_band_count_are_refused():
    X, _ = _scene()
    P = X.reshape(-1, X.shape[2])
    with pytest.raises(Exception, match="bands"):
        BackgroundStats.from_pixels(P, None, sums=PixelSums.of(P[:, :10]))


def _runs(X, truth, method, clicks, image):
    cube = cube_from_array(X if isinstance(X, np.ndarray) else X.get(), "resident")
    req = DetectRequest(method, device="cpu" if isinstance(image, np.ndarray) else "gpu")
    cached = run_detection(cube, req, clicks, truth=truth, image=image)
    plain = run_detection(cube, req, clicks, truth=truth)  # read from the cube: no resident entry
    return cached, plain


@pytest.mark.parametrize("nodata", [False, True])
@pytest.mark.parametrize("method", STATS_METHODS)
def test_clicks_on_a_resident_image_fit_as_without_it(method, nodata):
    X, truth = _scene(nodata=nodata)
    image = X.copy()
    res.forget(image)
    first, plain = _runs(X, truth, method, _clicks(truth.shape, (6, 7), (31, 21)), image)
    assert first.report["background_sums"] == "computed"
    assert "background_sums" not in plain.report
    assert first.report["nodata_pixels"] == plain.report["nodata_pixels"] == (8 if nodata else 0)
    _same_fit(first, plain, method)
    # other clicks on the same image reuse its sums, and still fit as a fresh uncached run
    second, plain2 = _runs(X, truth, method, _clicks(truth.shape, (5, 6), (7, 8), (30, 20)), image)
    assert second.report["background_sums"] == "reused"
    _same_fit(second, plain2, method)
    assert first.report["evaluation"] == plain.report["evaluation"]
    if method != "cem":  # (CEM's correlation is over every pixel: no click leaves it)
        assert second.model.stats_.n == first.model.stats_.n - 1
    res.forget(image)


def test_library_target_on_a_resident_image():
    X, truth = _scene(nodata=True)
    image = X.copy()
    cube = cube_from_array(X, "resident")
    t = X[truth].astype(np.float64).mean(axis=0)[None]
    for method in ("ace", "cem"):
        req = DetectRequest(method, device="cpu")
        clicks = _clicks(truth.shape, (6, 7))
        a = run_detection(cube, req, clicks, truth=truth, image=image, target_spectra=t)
        b = run_detection(cube, req, clicks, truth=truth, target_spectra=t)
        assert a.report["background_sums"] in ("computed", "reused")
        _same_fit(a, b, method)
    res.forget(image)


def test_an_entry_dies_with_its_image():
    X, truth = _scene()
    cube = cube_from_array(X, "resident")
    image = X.copy()
    run_detection(cube, DetectRequest("rx", device="cpu"), truth=truth, image=image)
    key = id(image)
    assert res._ENTRIES[key].image is image and res._ENTRIES[key].has_sums
    del image
    gc.collect()
    assert key not in res._ENTRIES
    # a new image, whatever its address or id, starts afresh: other pixels, other statistics
    other = (X * np.float32(2.0)).copy()
    r = run_detection(cube_from_array(other, "other"), DetectRequest("rx", device="cpu"), truth=truth, image=other)
    assert r.report["background_sums"] == "computed"
    np.testing.assert_allclose(r.model.stats_.mean, 2 * X.reshape(-1, X.shape[2]).astype(np.float64).mean(axis=0),
                               rtol=1e-6)
    res.forget(other)


def test_an_entry_is_keyed_on_the_object_not_its_memory():
    X, _ = _scene()
    a = X.copy()
    view = a[:]  # another array object over the same memory: another entry
    assert res.resident(a) is res.resident(a)
    assert res.resident(view) is not res.resident(a)
    res.forget(a)
    res.forget(view)


def test_warm_takes_the_sums_before_the_first_click():
    X, truth = _scene(nodata=True)
    image = X.copy()
    res.warm(image)
    assert res.resident(image).has_sums
    r = run_detection(cube_from_array(X, "resident"), DetectRequest("ace", device="cpu"),
                      _clicks(truth.shape, (6, 7)), truth=truth, image=image)
    assert r.report["background_sums"] == "reused"
    res.forget(image)


@pytest.mark.gpu
@pytest.mark.parametrize("nodata", [False, True])
@pytest.mark.parametrize("method", STATS_METHODS)
def test_gpu_clicks_on_a_resident_image_fit_as_without_it(cp, method, nodata):
    X, truth = _scene(rows=300, cols=260, bands=64, nodata=nodata)  # 78,000 pixels: a full GPU block and a rest
    image = cp.asarray(X)
    for cells in (((6, 7), (31, 21)), ((5, 6), (7, 8), (30, 20))):
        cached, plain = _runs(X, truth, method, _clicks(truth.shape, *cells), image)
        _same_fit(cached, plain, method, exact=False)
    assert cached.report["background_sums"] == "reused"
    key = id(image)
    del image, cached
    gc.collect()
    assert key not in res._ENTRIES


@pytest.mark.gpu
def test_the_window_session_warms_its_resident_image(cp):
    from hyperapp.project.session import Session

    X, truth = _scene(nodata=True)
    s = Session(cube_from_array(X, "resident"))
    image = s.pixels_on("gpu")
    assert res.resident(image).has_sums
    r = run_detection(s.cube, DetectRequest("ace", device="gpu"), _clicks(truth.shape, (6, 7)), truth=truth,
                      image=image)
    assert r.report["background_sums"] == "reused"
