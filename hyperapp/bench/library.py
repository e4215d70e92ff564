"""Benchmark cases of the library-target detectors: OSP, TCIMF, MTMF, MTTCIMF scoring and the
MNF fit on 1024 x 1024 x 64, each checked against NumPy and set against the memory floor (one read of the
cube, one write of each map); and the library-target click-to-result path of the live window."""

from __future__ import annotations

import numpy as np

from hyperapp.bench import Measurement, bench_case, cpu_time_ms, gpu_time_ms

SHAPE = (1024, 1024, 64)


def _setup():
    from hyperapp.bench.live import scene

    X, truth, _ = scene(*SHAPE)
    t = X[truth].astype(np.float64).mean(axis=0)
    return X, truth, t


def _detector_case(ctx, name: str, cls, maps: int) -> Measurement:
    import cupy

    X, _, t = _setup()
    Xd = cupy.asarray(X)
    m_cpu = cls().fit_signature(X, t)
    m_gpu = cls().fit_signature(Xd, cupy.asarray(t))

    def score(m, A):
        return m.score_maps(A) if hasattr(m, "score_maps") else m.decision_function(A)

    a = score(m_cpu, X)
    b = score(m_gpu, Xd)
    a0, b0 = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
    np.testing.assert_allclose(cupy.asnumpy(b0), a0, rtol=1e-3, atol=1e-3 * float(np.abs(a0).max()))
    gpu = gpu_time_ms(lambda: score(m_gpu, Xd), ctx.repeats)
    cpu = cpu_time_ms(lambda: score(m_cpu, X), repeats=1)
    fit = gpu_time_ms(lambda: cls().fit_signature(Xd, cupy.asarray(t)), max(3, ctx.repeats // 4))
    return Measurement(f"{name}-1024x1024x64", gpu, cpu, "GPU fit (from the library spectrum)", fit,
                       bytes_moved=X.nbytes + maps * X.nbytes / SHAPE[2],
                       notes={"undesired": getattr(m_gpu, "undesired_source_", "none")})


@bench_case("osp-1024x1024x64")
def osp_case(ctx):
    """OSP scoring (one cuBLAS GEMV) vs NumPy; the fit includes ATGP (8 GEMMs over the pixels)."""
    from hyperapp.models.subspace import OSP

    return _detector_case(ctx, "osp", OSP, 1)


@bench_case("tcimf-1024x1024x64")
def tcimf_case(ctx):
    """TCIMF scoring (one cuBLAS GEMV) vs NumPy; the fit: the correlation GEMM and ATGP."""
    from hyperapp.models.subspace import TCIMF

    return _detector_case(ctx, "tcimf", TCIMF, 1)


@bench_case("mtmf-1024x1024x64")
def mtmf_case(ctx):
    """MTMF score + infeasibility (MNF transform GEMM, element-wise over the kept components) vs NumPy."""
    from hyperapp.models.mnf import MTMF

    return _detector_case(ctx, "mtmf", MTMF, 2)


@bench_case("mttcimf-1024x1024x64")
def mttcimf_case(ctx):
    """MTTCIMF score + infeasibility vs NumPy."""
    from hyperapp.models.mnf import MTTCIMF

    return _detector_case(ctx, "mttcimf", MTTCIMF, 2)


@bench_case("mnf-fit-1024x1024x64")
def mnf_fit_case(ctx):
    """MNF fit (shift differences, two covariance GEMMs, a 64 x 64 eigenproblem) vs NumPy and spectral.mnf."""
    import cupy
    import spectral

    from hyperapp.models.mnf import MNF

    X, _, _ = _setup()
    Xd = cupy.asarray(X)
    a, b = MNF().fit(X), MNF().fit(Xd)
    np.testing.assert_allclose(b.eigenvalues_, a.eigenvalues_, rtol=1e-3)
    gpu = gpu_time_ms(lambda: MNF().fit(Xd), max(3, ctx.repeats // 4))
    cpu = cpu_time_ms(lambda: MNF().fit(X), repeats=1)
    peer = cpu_time_ms(lambda: spectral.mnf(spectral.calc_stats(X), spectral.noise_from_diffs(X)), repeats=1)
    return Measurement("mnf-fit-1024x1024x64", gpu, cpu, "spectral.mnf + calc_stats + noise_from_diffs", peer,
                       bytes_moved=3 * X.nbytes)


@bench_case("library-click-to-result-1024x1024x64")
def library_click(ctx):
    """A target spectrum from a library (no clicks) -> fit -> score -> threshold -> mask + objects + AUC, on
    the pixels already on the GPU (the window's live path), for each detector that takes one."""
    import cupy

    from hyperapp.bench.live import clicks_in_rounds
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    X, truth, t = _setup()
    cube = cube_from_array(X, "bench")
    Xd = cupy.asarray(X)
    clicks, auc = {}, {}
    for method in ("ace", "mf", "cem", "sam", "osp", "tcimf", "mtmf", "mttcimf", "rbfn"):
        def click(method=method):
            return run_detection(cube, DetectRequest(method, device="gpu"), truth=truth, image=Xd, target_spectra=t[None])

        clicks[method], auc[method] = click, click().report["evaluation"]["auc"]  # compile and warm
    out = []
    for method, (gpu, notes) in clicks_in_rounds(clicks, ctx.repeats).items():
        notes.update(auc=round(auc[method], 4), within_15_ms=bool(gpu <= 15.0))
        out.append(Measurement(f"library-click-{method}-1024x1024x64", gpu, None, None, None,
                               bytes_moved=X.nbytes * 2, notes=notes))
    return out
