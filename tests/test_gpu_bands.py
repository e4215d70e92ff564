"""No GPU kernel depends on the cube's band count, and the fused RX / ACE kernel agrees with NumPy (run on
the GPU machine; skipped elsewhere)."""

import copy

import numpy as np
import pytest

from hyperapp.models import classic
from hyperapp.models.rbfn import RBFN

pytestmark = pytest.mark.gpu


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


def test_rbfn_passes_started_during_the_fit_give_the_scores_of_a_later_score(cp):
    """A fit told it scores its image next (the live click) starts the coherence and anomaly passes on a
    second stream beside its own work: the scores are those of the same model scoring later, to the bit, a
    refit drops the passes it did not score, and another image is scored afresh."""
    X, y = _data(300, 280, 72)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    m = RBFN(anomaly=1.0).fit(Xd, yd, score_next=True)
    assert m.anomaly_v_ and m.coherence_v_ and "_early" in m.__dict__
    early = m.decision_function(Xd).get()
    assert "_early" not in m.__dict__
    later = m.decision_function(Xd).get()
    assert np.array_equal(early, later)
    other = cp.asarray(X[::-1].copy())
    m.fit(Xd, yd, score_next=True)
    m.fit(Xd, yd, score_next=True)  # the first refit's passes are dropped, never taken
    got = m.decision_function(other).get()
    assert np.array_equal(got, m.decision_function(other).get())
    assert np.array_equal(m.decision_function(Xd).get(), later)
    host = m.to_host().decision_function(X)
    assert np.abs(early - host).max() <= 1e-3 * np.abs(host).max()
