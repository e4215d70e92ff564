"""No GPU kernel depends on the cube's band count, and the fused RX / ACE kernel agrees with NumPy (run on
the GPU machine; skipped elsewhere)."""

import copy

import numpy as np
import pytest

from hyperapp.models import classic
from hyperapp.models.rbfn import RBFN

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _early_passes_at_every_size(monkeypatch):
    """These tests start the RBFN's early passes on small images (by default only large ones start them)."""
    from hyperapp.models import rbfn_gpu

    monkeypatch.setattr(rbfn_gpu, "EARLY_MIN_VALUES", 0)


def _data(rows, cols, bands, seed=0):
    """A mixed cube and 5 clicks on pixels of a material of their own (anomalies: the RBFN's anomaly input
    then counts)."""
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.05, 0.6, size=(5, bands))
    ab = rng.dirichlet(np.ones(5), size=rows * cols)
    X = (ab @ ends + rng.normal(0, 0.01, (rows * cols, bands))).astype(np.float32).reshape(rows, cols, bands)
    y = -np.ones((rows, cols), np.int8)
    y.reshape(-1)[rng.choice(rows * cols, 5, replace=False)] = 1
    X[y > 0] = rng.uniform(0.6, 0.9, bands) + rng.normal(0, 0.01, (5, bands))
    return X, y


def _every_band_dependent_path(cp, bands):
    """The RBFN (default, thesis scaling, anomaly input at full weight, the small k-means of each whitening), ACE
    and RX on a cube of ``bands`` bands; each GPU result checked against the host model's."""
    X, y = _data(40, 36, bands, seed=bands)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    for params in ({}, {"whiten": "std", "normalize": False}, {"anomaly": 1.0}):
        m = RBFN(**params).fit(Xd, yd)
        cpu = m.to_host().decision_function(X)
        assert np.abs(m.decision_function(Xd).get() - cpu).max() <= 1e-4 * np.abs(cpu).max(), params
    for cls in (classic.ACE, classic.RX):
        m = cls().fit(Xd, yd)
        cpu = m.to_host().decision_function(X) if hasattr(m, "to_host") else cls().fit(X, y).decision_function(X)
        assert np.abs(m.decision_function(Xd).get() - cpu).max() <= 1e-4 * np.abs(cpu).max(), cls.__name__


def test_new_band_counts_compile_no_kernel(cp):
    """After ``prepare-gpu``'s kernel task, cubes of band counts never seen before (odd, not a multiple of 4,
    above 128) build no new module of ``kernels/*.cu``: each used to compile its own (seconds each)."""
    from hyperapp.batch.prepare_gpu import compile_kernel_variants
    from hyperapp.kernels import _module

    compile_kernel_variants()
    _every_band_dependent_path(cp, 64)
    before = _module.cache_info().currsize
    for bands in (57, 61, 132, 224, 285):
        _every_band_dependent_path(cp, bands)
    assert _module.cache_info().currsize == before


@pytest.mark.parametrize("bands", [7, 57, 64, 130, 224, 285])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("tensor", [True, False])
def test_fused_quad_rows_match_numpy(cp, bands, normalize, tensor, monkeypatch):
    """RX and ACE of (x [/ ||x||] - mu) U in one kernel against float64 NumPy, for full and upper-triangular
    U, band counts below, across and above the kernels' 128-column tile, and row counts off their tiles:
    the tensor cores' 3xTF32 kernel and the float32 SIMT one."""
    monkeypatch.setattr(classic, "TENSOR_QUAD", tensor)
    rng = np.random.default_rng(bands)
    n = 1000 + bands
    X = rng.uniform(0.1, 1.0, (n, bands)).astype(np.float32)
    mu = X.mean(axis=0) / (np.linalg.norm(X, axis=1).mean() if normalize else 1.0)
    A = rng.normal(size=(bands, bands)) / np.sqrt(bands)
    s = rng.normal(size=bands)
    D = (X.astype(np.float64) / (np.linalg.norm(X, axis=1, keepdims=True) if normalize else 1.0)) - mu
    for U in (A, np.triu(A)):
        Z = D @ U
        rx = (Z * Z).sum(axis=1)
        ace = np.clip((Z @ s) ** 2 / ((s @ s) * rx), 0, 1)
        Ud = cp.asarray(U, dtype=cp.float32)
        tri = classic.upper_triangular(U)
        assert tri == (U is not A)
        got = classic.quad_rows(cp.asarray(X), cp.asarray(mu, dtype=cp.float32), Ud, classic.RX_MODE,
                                normalize=normalize, tri=tri).get()
        np.testing.assert_allclose(got, rx, rtol=2e-4, atol=1e-5 * rx.max())
        got = classic.quad_rows(cp.asarray(X), cp.asarray(mu, dtype=cp.float32), Ud, classic.ACE_MODE,
                                v=cp.asarray(U @ s, dtype=cp.float32), ss=float(s @ s), normalize=normalize,
                                tri=tri).get()
        np.testing.assert_allclose(got, ace, rtol=2e-3, atol=2e-5)


@pytest.mark.parametrize("bands", [57, 128, 224, 285])
@pytest.mark.parametrize("chunk", [32, 16])
def test_tensor_quad_rows_over_many_tiles(cp, bands, chunk, monkeypatch):
    """The tensor-core kernel where each block takes several pixel tiles (its copies run ahead across
    tiles, and the next tile's rows are fetched early), with chunks of 32 bands and of 16 (GPUs with less
    shared memory), each row's pass in registers (<= 128 bands) or in two passes, 16-byte copies or (57 and
    285 bands) 4-byte ones: RX of the raw rows and ACE of the normalised ones, for an upper-triangular U,
    against float64 NumPy."""
    monkeypatch.setattr(classic, "_tensor_chunk", lambda attrs: chunk)
    rng = np.random.default_rng(bands + chunk)
    n = 150_001  # over a thousand tiles of 128 pixels: several per block
    X = rng.uniform(0.1, 1.0, (n, bands)).astype(np.float32)
    U = np.triu(rng.normal(size=(bands, bands)) / np.sqrt(bands))
    s = rng.normal(size=bands)
    Ud = cp.asarray(U, dtype=cp.float32)
    for normalize, mode in ((False, classic.RX_MODE), (True, classic.ACE_MODE)):
        D = X.astype(np.float64) / (np.linalg.norm(X, axis=1, keepdims=True) if normalize else 1.0)
        mu = D[:5000].mean(axis=0)
        Z = (D - mu) @ U
        rx = (Z * Z).sum(axis=1)
        want = rx if mode == classic.RX_MODE else np.clip((Z @ s) ** 2 / ((s @ s) * rx), 0, 1)
        got = classic.quad_rows(cp.asarray(X), cp.asarray(mu, dtype=cp.float32), Ud, mode,
                                v=cp.asarray(U @ s, dtype=cp.float32), ss=float(s @ s), normalize=normalize,
                                tri=True).get()
        if mode == classic.RX_MODE:
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5 * want.max())
        else:
            np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-5)


def test_fused_rbfn_and_classic_scores_match_the_gemm_path(cp):
    """The fused path gives the cuBLAS path's scores (RBFN with both extra inputs, ACE, RX)."""
    X, y = _data(48, 44, 96)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    models = [RBFN(anomaly=1.0).fit(Xd, yd), classic.ACE().fit(Xd, yd), classic.RX().fit(Xd, yd)]
    assert models[0].anomaly_v_ and models[0].anomaly_tri_
    for m in models:
        fused = m.decision_function(Xd).get()
        classic.FUSED_QUAD = False
        try:
            gemm = copy.copy(m).decision_function(Xd).get()
        finally:
            classic.FUSED_QUAD = True
        assert np.abs(fused - gemm).max() <= 1e-4 * np.abs(gemm).max(), type(m).__name__


def _counting_quad_rows(monkeypatch):
    """Count the score's own quad passes (the early ones run through ``classic.quad_rows``)."""
    from hyperapp.models import rbfn as rbfn_module

    calls = []

    def counted(*a, **k):
        calls.append(1)
        return classic.quad_rows(*a, **k)

    monkeypatch.setattr(rbfn_module, "quad_rows", counted)
    return calls


def _same_scores(a, b):
    # (the tensor-core kernel gives the same bits; the SIMT one, on older GPUs, adds in another order)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * float(np.abs(b).max()))


def test_rbfn_passes_started_during_the_fit_are_taken_by_the_next_score(cp, monkeypatch):
    """A fit told it scores its image next (the live click) starts the coherence and anomaly passes on a
    second stream beside its own work: the next score takes them (it runs no pass of its own) and gives the
    scores of a later score of the same model; a refit lets the passes it did not score go, and another image
    is scored afresh; a copy of the model does not take them; the CPU agrees."""
    calls = _counting_quad_rows(monkeypatch)
    X, y = _data(300, 280, 72)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    m = RBFN(anomaly=1.0).fit(Xd, yd, score_next=True)
    assert m.anomaly_v_ and m.coherence_v_ and "_early" in m.__dict__
    assert "_early" not in m.to_host().__dict__ and "_early" in m.__dict__
    early = m.decision_function(Xd).get()
    assert not calls and "_early" not in m.__dict__
    later = m.decision_function(Xd).get()
    assert len(calls) == 2  # ACE and RX, now the score's own
    _same_scores(early, later)
    other = cp.asarray(X[::-1].copy())
    m.fit(Xd, yd, score_next=True)
    m.fit(Xd, yd, score_next=True)  # the first refit's passes are let go of, never taken
    got = m.decision_function(other).get()  # not the image they were started on
    _same_scores(got, m.decision_function(other).get())
    _same_scores(m.decision_function(Xd).get(), later)
    host = m.to_host().decision_function(X)
    assert np.abs(early - host).max() <= 1e-3 * np.abs(host).max()


def test_rbfn_early_passes_are_waited_for(cp):
    """The score waits for the passes: a second stream held busy for a tenth of a second before they start
    still gives the scores of a score without them."""
    from hyperapp.models import rbfn_gpu

    spin = cp.RawKernel(r"""
    extern "C" __global__ void spin(long long cycles) {
        const long long t0 = clock64();
        while (clock64() - t0 < cycles) { }
    }""", "spin")
    X, y = _data(300, 280, 72)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    want = RBFN(anomaly=1.0).fit(Xd, yd).decision_function(Xd).get()
    m = RBFN(anomaly=1.0)
    with rbfn_gpu._side_stream():
        spin((1,), (1,), (np.int64(2 * 10**8),))  # ~0.1 s at 2 GHz
    got = m.fit(Xd, yd, score_next=True).decision_function(Xd).get()
    _same_scores(got, want)


def test_rbfn_early_passes_let_go_where_the_score_needs_neither(cp):
    """Without the coherence input and with ordinary clicks (the anomaly gate shut), the score uses neither
    pass: the model lets them go all the same (they hold the image)."""
    rng = np.random.default_rng(0)
    rows, cols, bands = 120, 100, 40
    ends = rng.uniform(0.05, 0.6, size=(5, bands))
    ab = rng.dirichlet(np.ones(5), size=rows * cols)
    X = (ab @ ends + rng.normal(0, 0.01, (rows * cols, bands))).astype(np.float32).reshape(rows, cols, bands)
    y = -np.ones((rows, cols), np.int8)
    y.reshape(-1)[rng.choice(rows * cols, 5, replace=False)] = 1
    Xd = cp.asarray(X)
    m = RBFN(coherence=0.0).fit(Xd, cp.asarray(y), score_next=True)
    assert m.anomaly_weight_ and not m.anomaly_v_ and "_early" in m.__dict__
    m.decision_function(Xd)
    assert "_early" not in m.__dict__


def test_rbfn_early_passes_on_a_worker_thread_in_a_stream_of_its_own(cp):
    """A fit and its score on a worker thread inside a non-blocking stream of their own (the window's jobs run
    on threads; the batch's on streams) give the scores of the plain run."""
    import threading

    X, y = _data(200, 180, 57)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    want = RBFN(anomaly=1.0).fit(Xd, yd).decision_function(Xd).get()
    got = {}

    def job():
        with cp.cuda.Stream(non_blocking=True) as s:
            got["scores"] = RBFN(anomaly=1.0).fit(Xd, yd, score_next=True).decision_function(Xd).get()
            s.synchronize()

    t = threading.Thread(target=job)
    t.start()
    t.join()
    _same_scores(got["scores"], want)


def test_a_run_scores_the_same_with_and_without_early_passes(cp, monkeypatch):
    """``run_detection`` (the click, ``detect``) gives the same scores, mask and threshold whether its fit
    starts the passes early or not."""
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    X, y = _data(256, 240, 64)
    cube = cube_from_array(X, "early")
    Xd = cp.asarray(X)

    def run():  # (each on an image of its own: the second would take the first's whitening, rbfn_reuse)
        return run_detection(cube, DetectRequest("rbfn", device="gpu"), y > 0, image=Xd.copy())

    a = run()
    monkeypatch.setattr(RBFN, "accepts_score_next", False)
    b = run()
    _same_scores(a.scores, b.scores)
    assert a.threshold == b.threshold or abs(a.threshold - b.threshold) <= 1e-6 * abs(b.threshold)


@pytest.mark.parametrize("early", [True, False])
def test_a_click_taking_the_last_fits_background_scores_as_a_fresh_fit(cp, monkeypatch, early):
    """On the GPU, a click on a resident image that samples the pixels the last click sampled takes that
    fit's whitening and training background (:mod:`hyperapp.models.rbfn_reuse`) and its anomaly input's RX
    map (no RX pass), and scores as a run on a fresh copy of the image, which takes nothing. The map is
    kept from the early passes, and where they do not start (``early`` False: a small image's default),
    from the score's own pass."""
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.models import rbfn_gpu
    from hyperapp.request import DetectRequest

    from .test_rbfn import _clean, _kept_scene

    if not early:
        monkeypatch.setattr(rbfn_gpu, "EARLY_MIN_VALUES", 1 << 62)

    X, labels = _kept_scene()
    cube = cube_from_array(X, "kept")
    Xd = cp.asarray(X)
    req = DetectRequest("rbfn", device="gpu")
    assert run_detection(cube, req, labels(*_clean(labels, 100, 200, 2)) == 1, image=Xd).report["fit_reused"] == []
    clicks = labels(*_clean(labels, 400, 450, 3)) == 1
    real, modes = classic.quad_rows, []

    def spy(P, mu, W, mode, *a, **k):
        modes.append(mode)
        return real(P, mu, W, mode, *a, **k)

    import hyperapp.models.rbfn as rbfn_module

    monkeypatch.setattr(classic, "quad_rows", spy)
    monkeypatch.setattr(rbfn_module, "quad_rows", spy)
    got = run_detection(cube, req, clicks, image=Xd)
    assert got.report["fit_reused"] == ["whitening", "training background"]
    assert got.model.anomaly_v_ and classic.RX_MODE not in modes and classic.ACE_MODE in modes
    want = run_detection(cube, req, clicks, image=cp.asarray(X))
    assert classic.RX_MODE in modes
    assert want.report["fit_reused"] == []
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-4, atol=1e-4)
    assert got.threshold == pytest.approx(want.threshold, rel=1e-4)


def test_rbfn_early_passes_start_on_large_images_only(cp, monkeypatch):
    """By default the passes start early only from ``EARLY_MIN_VALUES`` values: a small image's fit starts
    none (its score runs them), and scores the same."""
    from hyperapp.models import rbfn_gpu

    X, y = _data(200, 180, 57)
    Xd = cp.asarray(X)
    early = RBFN().fit(Xd, cp.asarray(y), score_next=True)
    assert "_early" in early.__dict__
    monkeypatch.setattr(rbfn_gpu, "EARLY_MIN_VALUES", X.size + 1)
    late = RBFN().fit(Xd, cp.asarray(y), score_next=True)
    assert "_early" not in late.__dict__
    _same_scores(early.decision_function(Xd).get(), late.decision_function(Xd).get())
