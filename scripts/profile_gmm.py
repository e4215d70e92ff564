"""The GMM's GPU path timed part by part on the bench case's data (262,144 spectra x 128 bands, k = 8, full
covariances, 3 starts, 100 iterations, tol 0: ``bench --case gmm-262144x128-k8-full-100it``), against the
path main took before the fused one (the per-component float64 loop, every start run to the end), and the
log-likelihoods against that float64 reference.

Figures (JSON, to stdout and ``$OUT/gmm.json`` if ``OUT`` is set; times in ms, GPU events, medians):

- ``fit_ms``: the bench case's fit as the model runs it now (fused path, em-EM: 3 starts of
  at most ``start_iter`` iterations, ``fit_short_runs`` long, the best to 100), ``fit_em_iterations``
  the EM iterations it ran;
  ``fit_all_starts_ms``: the fused path with every start run to 100 (``start_iter=100``);
  ``old_fit_ms``: the path main took (``_path`` forced to ``"direct"``, ``start_iter=100``).
- ``loglik_*``: the average log-likelihoods of those three fits; ``loglik_fused_vs_direct_rel``: the fused
  path against the direct float64 path from the same start and the same iterations (one start, 20
  iterations: the same arithmetic in another order, so about 1e-12); ``loglik_emEM_vs_all_starts_rel``.
- Per iteration: ``e_step_ms`` (the fused E-step alone: one GEMM and one kernel a block),
  ``e_and_m_sums_ms`` (one fused pass: E-step and the M-step's sums), ``m_finish_ms`` (means,
  covariances, Cholesky factors and inverses from the sums), ``iteration_ms`` (their sum); the old path's
  ``old_e_step_ms`` and ``old_m_step_ms``; ``e_and_m_sums_128MB_blocks_ms`` and ``_256MB_`` (the fused
  pass with blocks of 16,384 and 32,768 spectra instead of 65,536), ``e_and_m_sums_split16_ms`` (the
  M-step GEMM as 16 batched GEMMs over row slices, ``M_SPLIT``); one block's parts (``block_*``: the E-step GEMM, the rows
  kernel, the deviations kernel, the M-step GEMM, also split in 4 and 16) with the block's rows; ``kmeans_start_ms``,
  ``first_m_step_ms`` (fused, from the k-means labels) and ``old_first_m_step_ms``; ``kmeans_starts_3_ms`` (the
  three starts' k-means seeded and iterated together, as the fit runs them now), ``kmeans_pp_3_starts_ms`` and
  ``kmeans_pp_1_start_ms`` (their seeding alone).
- The M-step's parts: ``m_covariances_kernel_ms``, ``m_factors_kernel_ms`` (Cholesky factors, inverses, W and b
  for every component in one launch) against ``cholesky_and_inverse_ms`` (the generic path: CuPy's batched
  Cholesky and solve, kept for components that need a floor), ``factors_kernel_vs_lapack_max_rel`` (the
  kernel against LAPACK on the host, largest error over the largest entry), ``weights_gemv_ms`` and
  ``weights_column_sums_ms`` (the weights n_k as a product with ones, as now, or a column reduction).
- With ``HYPERAPP_CUBES`` naming a folder that holds ``abu-airport-1.mat``: the default fit (k = 8, full,
  3 starts) of the airport scene on the GPU (``airport_loglik``) and, with ``--sklearn``, scikit-learn's
  ``GaussianMixture(8, covariance_type="full", n_init=3)`` on the host (``airport_sklearn_loglik``,
  ``airport_rel_to_sklearn``; a minute or more on the host's cores).

Run on the GPU machine with the package installed (no checkout on the path needed):
``python3 scripts/profile_gmm.py [--sklearn]``; under a minute on an H200 without ``--sklearn``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import cupy as cp
import numpy as np

import hyperapp.models.gmm as G
from hyperapp.bench import gpu_time_ms
from hyperapp.bench.cases import _spectra
from hyperapp.models.kmeans import MultiKMeans, kmeans_pp

t_start = time.perf_counter()
out: dict = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "n": 262144, "d": 128, "k": 8,
             "gmm_module": G.__file__}


def save():
    out["script_s"] = round(time.perf_counter() - t_start, 1)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gmm.json"), "w") as f:
            json.dump(out, f, indent=1)


def once_ms(fn):
    """(result, ms) of one call, CUDA events around it (host gaps included)."""
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    res = fn()
    b.record()
    b.synchronize()
    return res, cp.cuda.get_elapsed_time(a, b)


def rel(a, b):
    return float(abs(a - b) / abs(b))


X, _ = _spectra(262144, 128)
Xd = cp.asarray(X)
direct = G.GaussianMixtureEM._path
G.GaussianMixtureEM(k=8, max_iter=2, tol=0).fit(Xd[:8192])  # compile
G.GaussianMixtureEM._path = lambda self, xp: "direct"
G.GaussianMixtureEM(k=8, max_iter=2, tol=0).fit(Xd[:8192])
G.GaussianMixtureEM._path = direct

# ---- the bench case's fit, now and before
count = {"n": 0}
iteration = G.GaussianMixtureEM._iteration


def counted(self, *a):
    count["n"] += 1
    return iteration(self, *a)


G.GaussianMixtureEM._iteration = counted
m, out["fit_first_ms"] = once_ms(lambda: G.GaussianMixtureEM(k=8, max_iter=100, tol=0.0).fit(Xd))
G.GaussianMixtureEM._iteration = iteration
out["fit_em_iterations"] = count["n"]
out["fit_n_iter"] = int(m.n_iter_)
out["fit_start_iter"] = int(m.start_iter)
out["fit_short_runs"] = [int(v) for v in m.start_iterations_]
out["fit_start_logliks"] = [float(v) for v in m.start_log_likelihoods_]
out["fit_best_start"] = int(m.best_start_)
out["loglik_emEM"] = float(m.log_likelihood_[0])
out["fit_ms"] = gpu_time_ms(lambda: G.GaussianMixtureEM(k=8, max_iter=100, tol=0.0).fit(Xd), 3, warmup=0)
save()
allstarts, out["fit_all_starts_ms"] = once_ms(
    lambda: G.GaussianMixtureEM(k=8, max_iter=100, tol=0.0, start_iter=100).fit(Xd))
out["loglik_all_starts"] = float(allstarts.log_likelihood_[0])
out["loglik_emEM_vs_all_starts_rel"] = (out["loglik_emEM"] - out["loglik_all_starts"]) / abs(out["loglik_all_starts"])
save()
G.GaussianMixtureEM._path = lambda self, xp: "direct"
old, out["old_fit_ms"] = once_ms(lambda: G.GaussianMixtureEM(k=8, max_iter=100, tol=0.0, start_iter=100).fit(Xd))
out["loglik_old"] = float(old.log_likelihood_[0])
out["loglik_emEM_vs_old_rel"] = (out["loglik_emEM"] - out["loglik_old"]) / abs(out["loglik_old"])
one_direct = G.GaussianMixtureEM(k=8, n_init=1, max_iter=20, tol=0.0).fit(Xd)
G.GaussianMixtureEM._path = direct
one_fused = G.GaussianMixtureEM(k=8, n_init=1, max_iter=20, tol=0.0).fit(Xd)
out["loglik_fused_vs_direct_rel"] = rel(float(one_fused.log_likelihood_[0]), float(one_direct.log_likelihood_[0]))
out["curve_fused_vs_direct_max_rel"] = float(np.max(np.abs(one_fused.ll_curve_ - one_direct.ll_curve_)
                                                    / np.abs(one_direct.ll_curve_)))
out["cov_fused_vs_direct_max_rel"] = float(np.abs(one_fused.covariances_ - one_direct.covariances_).max()
                                           / np.abs(one_direct.covariances_).max())
out["speedup_fit"] = out["old_fit_ms"] / out["fit_ms"]
save()

# ---- one iteration, part by part
g = G.GaussianMixtureEM(k=8, n_init=1)
Xc = Xd.astype(cp.float64) - Xd.mean(axis=0, dtype=cp.float64)
g._xmax = float(cp.abs(Xc).max())
out["kmeans_start_ms"] = gpu_time_ms(lambda: MultiKMeans(k=8, n_init=1, silhouette_sample=0).fit(Xc.astype(cp.float32)),
                                     3, warmup=1)
lab = MultiKMeans(k=8, n_init=1, silhouette_sample=0).fit(Xc.astype(cp.float32)).labels_
out["first_m_step_ms"] = gpu_time_ms(lambda: g._fused_first_m_step(Xc, lab, 8), 5, warmup=1)
resp = (lab[:, None] == cp.arange(8)[None, :]).astype(cp.float64)
out["old_first_m_step_ms"] = gpu_time_ms(lambda: g._m_step(Xc, resp), 3, warmup=1)
p = g._fused_first_m_step(Xc, lab, 8)
for _ in range(3):  # a few iterations in, as in the fit
    p = g._fused_m_step(Xc, g._fused_pass(Xc, p)[1])
out["e_step_ms"] = gpu_time_ms(lambda: g._fused_pass(Xc, p, stats=False), 10, warmup=2)
out["e_and_m_sums_ms"] = gpu_time_ms(lambda: g._fused_pass(Xc, p), 10, warmup=2)
G.M_SPLIT = 16
out["e_and_m_sums_split16_ms"] = gpu_time_ms(lambda: g._fused_pass(Xc, p), 5, warmup=1)
G.M_SPLIT = 1
chunk = G.FUSED_BYTES
for mb in (128, 256):  # the block's array at other sizes (512 MB: 65,536 spectra, the default)
    G.FUSED_BYTES = mb << 20
    out[f"e_and_m_sums_{mb}MB_blocks_ms"] = gpu_time_ms(lambda: g._fused_pass(Xc, p), 5, warmup=1)
G.FUSED_BYTES = chunk
st = g._fused_pass(Xc, p)[1]
out["m_finish_ms"] = gpu_time_ms(lambda: g._fused_m_step(Xc, st), 10, warmup=2)
out["cholesky_and_inverse_ms"] = gpu_time_ms(lambda: g._precision_factors(p[2].copy()), 10, warmup=2)
# the M-step's parts now: the covariance kernel, the factorisation kernel (one launch for every component)
out["m_covariances_kernel_ms"] = gpu_time_ms(lambda: G._covariances(st[2], st[3], st[1], st[0] + 1e-15, 1e-6), 10,
                                             warmup=2)
out["m_factors_kernel_ms"] = gpu_time_ms(lambda: G._factors(p[2], p[1]), 10, warmup=2)
fac_gpu = [cp.asnumpy(v) for v in G._factors(p[2], p[1])]
fac_cpu = G._factors(cp.asnumpy(p[2]), cp.asnumpy(p[1]))
out["factors_kernel_vs_lapack_max_rel"] = {n: float(np.abs(a - b).max() / np.abs(b).max())
                                           for n, a, b in zip(("L", "U", "W", "b", "info"), fac_gpu, fac_cpu)}
out["weights_gemv_ms"] = gpu_time_ms(lambda: cp.ones(Xc.shape[0]) @ st[4], 10, warmup=2)
out["weights_column_sums_ms"] = gpu_time_ms(lambda: st[4].sum(axis=0), 10, warmup=2)
X32 = Xc.astype(cp.float32)
out["kmeans_starts_3_ms"] = gpu_time_ms(lambda: G.kmeans_starts(X32, 8, 3, 0), 3, warmup=1)
xx32 = (X32 * X32).sum(axis=1)
out["kmeans_pp_3_starts_ms"] = gpu_time_ms(
    lambda: kmeans_pp(X32, [8] * 3, [np.random.default_rng([r, 0, 8]) for r in range(3)], xx32), 3, warmup=1)
out["kmeans_pp_1_start_ms"] = gpu_time_ms(lambda: kmeans_pp(X32, [8], [np.random.default_rng([0, 0, 8])], xx32), 3,
                                          warmup=1)
save()
out["iteration_ms"] = out["e_and_m_sums_ms"] + out["m_finish_ms"]
out["old_e_step_ms"] = gpu_time_ms(lambda: g._e_step(Xc, p[0], p[1], p[3]), 3, warmup=1)
r_old = g._e_step(Xc, p[0], p[1], p[3])[1]
out["old_m_step_ms"] = gpu_time_ms(lambda: g._m_step(Xc, r_old), 3, warmup=1)
out["old_iteration_ms"] = out["old_e_step_ms"] + out["old_m_step_ms"]
# one block's parts
d = Xc.shape[1]
rows = G._fused_rows(Xc.shape[0], 8, d)
Xb = Xc[:rows]
W, b, const, _ = g._stacked_factors(p[0], p[1], p[3], g._xmax)
Y = cp.empty((rows, 8 * d), cp.float64)
out["block_rows"] = rows
out["block_e_gemm_ms"] = gpu_time_ms(lambda: cp.matmul(Xb, W, out=Y), 10, warmup=2)
out["block_rows_kernel_ms"] = gpu_time_ms(lambda: G._estep_rows(Y, b, const, 8, d), 10, warmup=2)
r = G._estep_rows(Y, b, const, 8, d)[0]
shift = cp.ascontiguousarray(p[1])
out["block_deviations_kernel_ms"] = gpu_time_ms(lambda: G._weighted_deviations(Xb, r, shift, Y), 10, warmup=2)
out["block_m_gemm_ms"] = gpu_time_ms(lambda: Xb.T @ Y, 10, warmup=2)
for c in (4, 16):  # the same GEMM split explicitly (G.M_SPLIT): c batched GEMMs over row slices, then a sum
    if rows % c:
        continue
    out[f"block_m_gemm_split{c}_ms"] = gpu_time_ms(
        lambda c=c: cp.matmul(Xb.reshape(c, rows // c, d).transpose(0, 2, 1), Y.reshape(c, rows // c, 8 * d)).sum(axis=0),
        10, warmup=2)
flops = 2.0 * rows * d * 8 * d
out["block_e_gemm_tflops"] = flops / out["block_e_gemm_ms"] / 1e9
out["block_m_gemm_tflops"] = flops / out["block_m_gemm_ms"] / 1e9
out["block_array_gb"] = rows * 8 * d * 8 / 1e9
out["block_rows_kernel_gbs"] = out["block_array_gb"] / out["block_rows_kernel_ms"] * 1e3
out["block_deviations_kernel_gbs"] = out["block_array_gb"] / out["block_deviations_kernel_ms"] * 1e3
save()

# ---- the airport scene (optional)
folder = os.environ.get("HYPERAPP_CUBES")
path = os.path.join(folder, "abu-airport-1.mat") if folder else None
if path and os.path.exists(path):
    from hyperapp.io import open_cube

    A = np.asarray(open_cube(path, dataset="data").to_float32()).reshape(-1, 205)
    ga, out["airport_fit_ms"] = once_ms(lambda: G.GaussianMixtureEM(k=8).fit(cp.asarray(A)))
    out["airport_loglik"] = float(ga.log_likelihood_[0])
    out["airport_n_iter"] = int(ga.n_iter_)
    save()
    if "--sklearn" in sys.argv:
        from sklearn.mixture import GaussianMixture

        t0 = time.perf_counter()
        sk = GaussianMixture(8, covariance_type="full", n_init=3, reg_covar=1e-6, random_state=0).fit(
            A.astype(np.float64))
        out["airport_sklearn_s"] = time.perf_counter() - t0
        out["airport_sklearn_loglik"] = float(sk.score(A.astype(np.float64)))
        out["airport_rel_to_sklearn"] = ((out["airport_loglik"] - out["airport_sklearn_loglik"])
                                         / abs(out["airport_sklearn_loglik"]))
save()
print(json.dumps(out, indent=1))
