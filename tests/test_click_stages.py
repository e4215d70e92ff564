"""The click's later stages on the GPU path (run here on NumPy where the code is backend-generic, or through a
NumPy namespace that is not ``numpy`` itself, which takes the device branch): the same numbers as before."""

import types

import numpy as np
import pytest

from hyperapp.models.base import BACKGROUND, NODATA, TARGET, UNLABELLED, sparse_flatnonzero
from hyperapp.models.evaluation import _at_far, _evaluate_device, evaluate, far_threshold, target_mode_size

#: NumPy under another name: the functions take their device branch
FAKE_XP = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})


def _argsort_network_split(s, far, ms, keep):
    """far_threshold's network mode split as it was: an argsort of the mode scores and two gathers."""
    use = np.isfinite(s) & keep & np.isfinite(ms)
    n = int(use.sum())
    order = np.argsort(np.where(use, ms, -np.inf))[s.size - n:]
    mode = target_mode_size(ms[order], far)
    if mode and mode < n:
        return float(_at_far(np.sort(s[order[:n - mode]]), far)), mode, "network mode split"
    return None


@pytest.mark.parametrize("seed", range(6))
def test_network_mode_split_without_argsort_gives_the_same_threshold(seed):
    rng = np.random.default_rng(seed)
    n = 50_000
    ms = rng.normal(size=n).astype(np.float32)
    targets = rng.choice(n, 150 + 40 * seed, replace=False)
    ms[targets] += 12.0  # a separate mode of the network's output
    s = np.maximum(ms, rng.exponential(1.0, n).astype(np.float32) * (1 + seed % 3))  # anomalies beside it
    s[rng.choice(n, 30)] = np.nan
    ms[:200] = np.round(ms[:200], 1)  # ties below the mode
    keep = rng.random(n) > 0.01
    ref = _argsort_network_split(s, 1e-3, ms, keep)
    assert ref is not None
    assert far_threshold(s, 1e-3, separate_targets=True, mode_scores=ms, keep=keep) == ref


@pytest.mark.parametrize("seed", range(4))
def test_evaluation_at_the_truth_pixels_gives_the_same_numbers(seed):
    rng = np.random.default_rng(seed)
    truth = rng.random(30000) < 0.02
    s = (rng.normal(size=30000) + 2 * truth).astype(np.float32)
    s[:300] = np.round(s[:300], 1)
    s[rng.choice(30000, 50)] = np.nan
    ex = rng.random(30000) < 0.01
    got = _evaluate_device(s, truth, exclude=ex, positives=np.flatnonzero(truth))
    assert got == evaluate(s, truth, exclude=ex) == _evaluate_device(s, truth, exclude=ex)


def test_the_truth_goes_to_the_device_as_its_pixels():
    from hyperapp.detect.finish import _truth_on

    rng = np.random.default_rng(0)
    sparse = rng.random((300, 200)) < 0.01
    t, idx = _truth_on(sparse.astype(np.uint8) * 3, FAKE_XP)
    np.testing.assert_array_equal(t, sparse)
    np.testing.assert_array_equal(idx, np.flatnonzero(sparse))
    dense = rng.random((300, 200)) < 0.5
    t, idx = _truth_on(dense, FAKE_XP)
    assert idx is None
    np.testing.assert_array_equal(t, dense)
    t, idx = _truth_on(sparse, np)
    assert idx is None and t.dtype == bool


@pytest.mark.parametrize("nodata", [False, True])
def test_labels_go_to_the_device_as_their_marks(nodata):
    from hyperapp.detect.run import _labels_on

    rng = np.random.default_rng(1)
    y = np.full((120, 90), UNLABELLED, np.int8)
    y.reshape(-1)[rng.choice(y.size, 7, replace=False)] = TARGET
    y.reshape(-1)[rng.choice(y.size, 30, replace=False)] = BACKGROUND
    valid = None
    if nodata:
        valid = np.ones(y.shape, bool)
        valid[:5] = False
        valid[y == TARGET] = True
        y[~valid] = NODATA
    marked = sparse_flatnonzero(y, UNLABELLED)
    got = _labels_on(y, marked, y.reshape(-1)[marked], valid, FAKE_XP)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, y)


def test_constant_scores_are_refused():
    from hyperapp.core.errors import ModelError
    from hyperapp.detect.finish import _refuse_constant_scores
    from hyperapp.models.registry import get_method

    m = get_method("ace")
    with pytest.raises(ModelError, match="no pixel a finite score"):
        _refuse_constant_scores(m, np.inf, -np.inf)
    with pytest.raises(ModelError, match="same score"):
        _refuse_constant_scores(m, 1.0, 1.0)
    _refuse_constant_scores(m, 1.0, 2.0)


def test_truth_beside_clicks_is_counted():
    from hyperapp.core.errors import InputError
    from hyperapp.io.masks import check_truth_beside_clicks

    clicks = np.zeros((20, 30), bool)
    clicks[3, 4] = clicks[5, 6] = True
    truth = clicks.copy()
    with pytest.raises(InputError, match="no target pixels besides"):
        check_truth_beside_clicks(truth, clicks)
    truth[7, 7] = True
    check_truth_beside_clicks(truth, clicks)
    check_truth_beside_clicks(truth.astype(np.uint8) * 255, clicks)
    every = ~clicks
    every[0, 0] = False
    check_truth_beside_clicks(every | clicks, clicks)  # (0, 0) is neither
    with pytest.raises(InputError, match="no non-target pixels besides"):
        check_truth_beside_clicks(np.ones((20, 30), bool) & ~clicks, clicks)  # the clicks are the rest
    with pytest.raises(InputError, match="no non-target pixels besides"):
        check_truth_beside_clicks(np.ones((20, 30), bool), clicks)


@pytest.mark.gpu
def test_gpu_stages_give_the_numpy_numbers(cp):
    """The device branches themselves on CuPy: the network mode split, the evaluation at the truth's pixels,
    the truth and the labels built on the device."""
    from hyperapp.detect.finish import _truth_on
    from hyperapp.detect.run import _labels_on

    rng = np.random.default_rng(5)
    n = 200_000
    ms = rng.normal(size=n).astype(np.float32)
    ms[rng.choice(n, 600, replace=False)] += 12.0
    s = np.maximum(ms, rng.exponential(1.0, n).astype(np.float32))
    s[rng.choice(n, 30)] = np.nan
    keep = rng.random(n) > 0.01
    ref = far_threshold(s, 1e-3, separate_targets=True, mode_scores=ms, keep=keep)
    assert ref[2] == "network mode split"
    assert far_threshold(cp.asarray(s), 1e-3, separate_targets=True, mode_scores=cp.asarray(ms),
                         keep=cp.asarray(keep)) == ref
    truth = (rng.random(n) < 0.005).reshape(400, 500)
    ex = rng.random(n) < 0.01
    t_dev, idx = _truth_on(truth, cp)
    assert idx is not None
    cp.testing.assert_array_equal(t_dev, cp.asarray(truth))
    got = evaluate(cp.asarray(s).reshape(400, 500), t_dev, exclude=cp.asarray(ex).reshape(400, 500), positives=idx)
    assert got == evaluate(s.reshape(400, 500), truth, exclude=ex.reshape(400, 500))
    y = np.full((400, 500), UNLABELLED, np.int8)
    y.reshape(-1)[rng.choice(n, 9, replace=False)] = TARGET
    valid = rng.random((400, 500)) > 0.1
    valid[y == TARGET] = True
    y[~valid] = NODATA
    marked = sparse_flatnonzero(y, UNLABELLED)
    cp.testing.assert_array_equal(_labels_on(y, marked, y.reshape(-1)[marked], cp.asarray(valid), cp), cp.asarray(y))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_evaluation_from_the_labels_gives_the_numpy_numbers(cp, dtype):
    """kernels/evaluate.cu's count from the run's labels (clicked targets and no-data pixels left out, NaN
    scores, ties, a truth pixel clicked): :func:`evaluate`'s numbers on the host."""
    from hyperapp.kernels.pack import to_host_numbers
    from hyperapp.models.evaluation import evaluation_report, labelled_evaluation_counts

    for seed in range(4):
        rng = np.random.default_rng(seed)
        shape = (300, 400 + 37 * seed)
        truth = rng.random(shape) < 0.01
        s = (rng.normal(size=shape) + 3 * truth).astype(dtype)
        s.reshape(-1)[:500] = np.round(s.reshape(-1)[:500], 1)
        s.reshape(-1)[rng.choice(s.size, 40)] = np.nan
        y = np.full(shape, UNLABELLED, np.int8)
        y.reshape(-1)[rng.choice(s.size, 9, replace=False)] = TARGET
        y.reshape(-1)[np.flatnonzero(truth)[:3]] = TARGET
        y.reshape(-1)[rng.choice(s.size, 300, replace=False)] = NODATA
        y.reshape(-1)[rng.choice(s.size, 20, replace=False)] = BACKGROUND
        exclude = (y == TARGET) | (y == NODATA)
        want = evaluate(s, truth, exclude=exclude)
        got = evaluation_report(to_host_numbers(labelled_evaluation_counts(
            cp.asarray(s), cp.asarray(y), cp.asarray(np.flatnonzero(truth)))))
        assert got == want


def _threshold_scenes(seeds):
    """Score sets that take each of the default threshold's rules: an exponential tail, a separate mode of
    targets (one, two), ties (rounded scores), a floor, and a network mode beside the scores."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        n = int(rng.integers(200, 300_000))
        s = rng.exponential(size=n).astype(np.float32)
        kind = seed % 5
        if kind == 1:
            s[rng.choice(n, max(1, n // 200), replace=False)] += 15
        elif kind == 2:
            s = np.round(s, 2)
        elif kind == 3:
            s = np.minimum(s, 0.5)
        elif kind == 4:
            s[rng.choice(n, max(1, n // 300), replace=False)] += 30
            s[rng.choice(n, max(1, n // 500), replace=False)] += 60
        ms = s.copy()
        if seed % 2:
            ms = rng.normal(size=n).astype(np.float32)
            ms[rng.choice(n, max(1, n // 250), replace=False)] += 12
        yield s, ms, rng.random(n) > 0.01


def _two_copy_mode_split(ascending, far, z=20.0, fraction=0.05):
    """The mode test as it was, two copies a test: the reference of the test's numbers."""
    n = int(ascending.size)
    m = min(n, 2 * max(int(n * fraction), 10) + 1)
    top = ascending[n - m:][::-1].astype(np.float64)
    ranks = np.arange(1, m + 1, dtype=np.float64)
    start = 0
    while True:
        rest = n - start
        k, first = max(int(rest * fraction), 10), max(int(far * rest), 1)
        if start + k + 1 > m or first >= k:
            return start
        w = top[start:start + k + 1]
        gaps = w[:-1] - w[1:]
        D = gaps * ranks[:k]
        j = first + int(np.argmax(D[first:]))
        nz = int(np.count_nonzero(D))
        med = np.sort(D)[min(k - nz + nz // 2, k - 1)]
        b0, b1 = start + j + 1, min(start + j + 1 + first, m - 1)
        scale = med / np.log(2)
        if not scale > 0 or D[j] / scale < np.log(k) + z or gaps[j] < 0.01 * (w[first] - w[-1]):
            return start
        if top[b0] == top[b1]:
            return start
        start += j + 1


def test_the_mode_test_in_one_copy_gives_the_two_copy_tests_answer():
    sizes = []
    for s, _, keep in _threshold_scenes(range(15)):
        asc = np.sort(s[keep])
        for far in (1e-3, 1e-2, 0.2):
            sizes.append(target_mode_size(asc, far))
            assert sizes[-1] == _two_copy_mode_split(asc, far)
    assert any(sizes) and not all(sizes)


@pytest.mark.gpu
def test_gpu_threshold_gives_the_numpy_threshold(cp):
    """kernels/threshold.cu's mode test: the NumPy path's numbers to the bit, so every rule's threshold."""
    from hyperapp.models.evaluation import _mode_tests

    rules = set()
    for s, ms, keep in _threshold_scenes(range(20)):
        for far in (1e-3, 1e-2, 0.2):
            for kw in ({"separate_targets": True}, {"separate_targets": True, "mode_scores": ms}):
                ref = far_threshold(s, far, keep=keep, **kw)
                dev = {k: cp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
                assert far_threshold(cp.asarray(s), far, keep=cp.asarray(keep), **dev) == ref
                rules.add(ref[2])
        asc = np.sort(s[keep]).astype(np.float64)
        n = asc.size
        m = min(n, 2 * max(int(n * 0.05), 10) + 1)
        k = max(int(n * 0.05), 10)
        if k + 1 <= m:
            for start, first in ((0, 1), (0, max(int(n * 1e-3), 1)), (min(m - k - 1, 7), 2)):
                extra = (0, n - 1, n // 2)
                assert _mode_tests(cp.asarray(asc), n, m)(start, k, first, extra) == \
                    _mode_tests(asc, n, m)(start, k, first, extra)
    assert rules == {"network mode split", "target mode split", "exponential tail", "quantile"}


def test_coherence_whitening_is_triangular_and_gives_the_same_products():
    """The RBFN's coherence input whitens with an inverse Cholesky factor of the floored covariance: the
    products ACE takes (z.z, z.s) are those of the symmetric whitening, singular covariance included."""
    from hyperapp.models.rbfn import _coherence_whitening
    from hyperapp.models.stats import BackgroundStats

    rng = np.random.default_rng(2)
    for rank in (24, 10):  # full rank, and singular (floored)
        S = (rng.normal(size=(3000, rank)) @ rng.normal(size=(rank, 24))).astype(np.float64)
        S /= np.linalg.norm(S, axis=1, keepdims=True)
        stats = BackgroundStats.from_pixels(S)
        U, W = _coherence_whitening(stats), stats.sqrt_inv_cov_on_host()
        assert np.abs(np.tril(U, -1)).max() == 0
        D = S[:50] - stats.host_mean
        zu, zw = D @ U, D @ W
        np.testing.assert_allclose((zu * zu).sum(1), (zw * zw).sum(1), rtol=1e-6)
        t = D[:3].mean(axis=0)
        np.testing.assert_allclose(zu @ (t @ U), zw @ (t @ W), rtol=1e-6, atol=1e-6 * np.abs(zw @ (t @ W)).max())


@pytest.mark.gpu
def test_quad_rows_ace_with_a_triangular_whitening(cp):
    from hyperapp.models.classic import ACE_MODE, ace_from_products, quad_rows
    from hyperapp.models.rbfn import _coherence_whitening
    from hyperapp.models.stats import BackgroundStats

    rng = np.random.default_rng(3)
    for bands in (64, 130, 200):
        X = (rng.normal(size=(20000, bands)) + 4).astype(np.float32)
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        stats = BackgroundStats.from_pixels(Xn.astype(np.float64))
        U = _coherence_whitening(stats)
        mu = stats.host_mean
        s = (Xn[:5] - mu).mean(axis=0) @ U
        z = (Xn.astype(np.float64) - mu) @ U
        ref = ace_from_products(z @ s, (z * z).sum(1), s @ s)
        got = quad_rows(cp.asarray(X), cp.asarray(mu, dtype=cp.float32), cp.asarray(U, dtype=cp.float32), ACE_MODE,
                        v=cp.asarray(U @ s, dtype=cp.float32), ss=float(s @ s), normalize=True, tri=True).get()
        assert np.abs(got - ref).max() <= 1e-3, bands


@pytest.mark.parametrize("n", [1, 7, 32, 33, 64, 128, 205])
def test_lower_inverse(n):
    from hyperapp.models.stats import lower_inverse

    rng = np.random.default_rng(n)
    A = rng.normal(size=(3 * n + 2, n))
    L = np.linalg.cholesky(A.T @ A)
    inv = lower_inverse(L)
    assert np.abs(np.triu(inv, 1)).max(initial=0.0) == 0
    np.testing.assert_allclose(inv @ L, np.eye(n), atol=1e-9)
    np.testing.assert_allclose(inv, np.linalg.solve(L, np.eye(n)), rtol=1e-9, atol=1e-12 * np.abs(inv).max())


@pytest.mark.gpu
@pytest.mark.parametrize("n", [7, 4096, 4097, 2048 * 2048 + 3])
def test_total_counts_on_the_gpu_as_numpy(n):
    """core.backend.total: the two-stage sum of a whole array on the GPU equals NumPy's, counts and floats."""
    import cupy

    from hyperapp.core.backend import total

    rng = np.random.default_rng(n)
    m = rng.random(n) > 0.7
    assert int(total(cupy.asarray(m), np.int64)) == int(m.sum())
    x = rng.random(n)
    assert float(total(cupy.asarray(x))) == pytest.approx(float(x.sum()), rel=1e-12)


def test_arrays_the_pack_kernel_does_not_read_keep_their_kinds():
    """kernels/pack.py's path without the kernel (float16; and NumPy arrays handed to it): each value in its
    8-byte slot, integers exact beside floats, uint64 as it is; host arrays taken as they are."""
    from hyperapp.kernels.pack import _packed_to_host, to_host_numbers, to_host_together

    got = _packed_to_host([np.array([1.5], np.float16), np.array([2**62 + 1], np.int64), np.array([3], np.int32),
                           np.array([2**63 + 5], np.uint64), np.array([[True, False]]), np.zeros(0, np.float32)])
    assert got[0].dtype == np.float64 and got[0].tolist() == [1.5]
    assert got[1].dtype == np.int64 and got[1].tolist() == [2**62 + 1]
    assert got[2].tolist() == [3] and got[3].dtype == np.uint64 and got[3].tolist() == [2**63 + 5]
    assert got[4].tolist() == [1, 0] and got[5].size == 0
    assert to_host_numbers([np.int64(4), np.array([0.5, 1.5]), 7]) == [4, 0.5, 1.5, 7]
    assert to_host_together([np.arange(3, dtype=np.int32)])[0].dtype == np.float64
