"""The GMM's GPU precision paths, timed and compared on the bench case's data (262,144 spectra x 128 bands,
k = 8, full covariances, 100 iterations): the path a fit takes, the float32 path (float32 E-step GEMMs and
M-step sums in whitened coordinates, the CPU's) forced on the GPU, the float32 E-step with a float64
M-step every iteration, optionally an older ``gmm.py`` (``python3 scripts/profile_gmm.py OLD_GMM.py``),
and where one float32 iteration's time goes. Writes JSON to stdout (and to ``$OUT/gmm.json`` if set).

Run on the GPU machine: ``python3 scripts/profile_gmm.py [path/to/an/older/gmm.py]``.
"""

import importlib.util
import json
import os
import sys

import cupy as cp

import hyperapp.models.gmm as G
from hyperapp.bench import gpu_time_ms
from hyperapp.bench.cases import _spectra
from hyperapp.models.kmeans import MultiKMeans

out: dict = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}


def save():
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gmm.json"), "w") as f:
            json.dump(out, f, indent=1)


def fit(**kw):
    return G.GaussianMixtureEM(k=8, max_iter=100, tol=0.0, **kw).fit(Xd)


X, _ = _spectra(262144, 128)
Xd = cp.asarray(X)
G.GaussianMixtureEM(k=8, max_iter=2, tol=0).fit(Xd[:8192])  # compile
default = fit()
out["default_3starts_ms"] = gpu_time_ms(fit, 2, warmup=0)
out["default_loglik"] = float(default.log_likelihood_[0])
whitened = G.GaussianMixtureEM._whitened
G.GaussianMixtureEM._whitened = lambda self, xp: self.covariance == "full"  # the float32 path on the GPU too
f32 = fit()
out["float32_3starts_ms"] = gpu_time_ms(fit, 2, warmup=0)
out["float32_1start_ms"] = gpu_time_ms(lambda: fit(n_init=1), 2, warmup=0)
out["float32_loglik"] = float(f32.log_likelihood_[0])
out["labels_same"] = float((cp.asnumpy(default.predict(Xd)) == cp.asnumpy(f32.predict(Xd))).mean())
G.WHITENED_PIVOT = float("inf")  # every component 'far from the identity': a float64 M-step every iteration
out["float32_e_float64_m_3starts_ms"] = gpu_time_ms(fit, 1, warmup=0)
G.WHITENED_PIVOT = 1e-3
save()
if len(sys.argv) > 1:
    spec = importlib.util.spec_from_file_location("hyperapp.models.gmm_older", sys.argv[1])
    older = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(older)
    old = older.GaussianMixtureEM(k=8, max_iter=100, tol=0.0).fit(Xd)
    out["older_3starts_ms"] = gpu_time_ms(lambda: older.GaussianMixtureEM(k=8, max_iter=100, tol=0.0).fit(Xd), 1,
                                          warmup=0)
    out["older_loglik"] = float(old.log_likelihood_[0])
    save()
# one float32 iteration, part by part
g = G.GaussianMixtureEM(k=8, n_init=1)
Xc = Xd.astype(cp.float64) - Xd.mean(axis=0, dtype=cp.float64)
g._xmax = float(cp.abs(Xc).max())
Xa = g._augmented(Xc)
out["kmeans_start_ms"] = gpu_time_ms(lambda: MultiKMeans(k=8, n_init=1, silhouette_sample=0).fit(Xc.astype(cp.float32)),
                                     3, warmup=1)
lab = MultiKMeans(k=8, n_init=1, silhouette_sample=0).fit(Xc.astype(cp.float32)).labels_
resp = (lab[:, None] == cp.arange(8)[None, :]).astype(cp.float64)
out["first_m_step_float64_ms"] = gpu_time_ms(lambda: g._m_step(Xc, resp), 3, warmup=1)
p = g._m_step(Xc, resp)
out["e_step_and_sums_ms"] = gpu_time_ms(lambda: g._full_e_step(Xa, p, Xc), 5, warmup=1)
st = g._full_e_step(Xa, p, Xc)[1]
out["m_step_whitened_ms"] = gpu_time_ms(lambda: g._full_m_step(Xc, p, st), 5, warmup=1)
out["cholesky_and_inverse_ms"] = gpu_time_ms(lambda: g._precision_factors(p[2].copy()), 5, warmup=1)
white = g._whitening(p[0], p[1], p[3], g._xmax)
out["one_block_gemms_and_norms_ms"] = gpu_time_ms(lambda: g._full_block(Xa[:65536], white, Xc[:65536]), 5, warmup=1)
G.GaussianMixtureEM._whitened = whitened
save()
print(json.dumps(out, indent=1))
