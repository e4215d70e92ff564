"""Benchmark cases. Each builds its inputs on the device, checks the GPU result against NumPy, then
times the GPU path, the NumPy path and a named peer."""

from __future__ import annotations

import numpy as np

from hyperapp.bench import Measurement, bench_case, cpu_time_ms, gpu_time_ms


def _cube(rows, cols, bands, seed=0):
    """A realistic-looking float32 cube: a few spectra mixed with noise (never zeros)."""
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.05, 0.6, size=(6, bands)).astype(np.float32)
    ab = rng.dirichlet(np.ones(6), size=rows * cols).astype(np.float32)
    x = ab @ ends + rng.normal(0, 0.01, size=(rows * cols, bands)).astype(np.float32)
    return x.reshape(rows, cols, bands)


def _labels(rows, cols, n=5, seed=1):
    rng = np.random.default_rng(seed)
    y = -np.ones((rows, cols), np.int8)
    y.reshape(-1)[rng.choice(rows * cols, n, replace=False)] = 1
    return y


@bench_case("sam-1024x1024x64")
def sam_case(ctx) -> Measurement:
    """SAM scoring of a 1024x1024x64 float32 cube (cuBLAS GEMV + norms) vs NumPy and Spectral Python."""
    import cupy

    from hyperapp.models.classic import SAM

    X = _cube(1024, 1024, 64)
    y = _labels(1024, 1024)
    Xd = cupy.asarray(X)
    m_cpu = SAM().fit(X, y)
    m_gpu = SAM().fit(Xd, cupy.asarray(y))
    np.testing.assert_allclose(m_gpu.decision_function(Xd).get(), m_cpu.decision_function(X), atol=1e-5)
    gpu = gpu_time_ms(lambda: m_gpu.decision_function(Xd), ctx.repeats)
    cpu = cpu_time_ms(lambda: m_cpu.decision_function(X))
    try:
        import spectral

        t = X[y == 1].mean(axis=0)
        peer = cpu_time_ms(lambda: spectral.spectral_angles(X, t[None, :]), repeats=1)
        peer_name = "spectral.spectral_angles"
    except ImportError:
        peer, peer_name = None, None
    return Measurement("sam-1024x1024x64", gpu, cpu, peer_name, peer, bytes_moved=X.nbytes + X.nbytes / 64)
