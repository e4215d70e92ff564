"""The CPU path of every analysis method against its peer in scikit-learn or SciPy, on the same machine
and data: ``hyperapp --headless bench --case cpu-analysis-vs-peers`` (no GPU needed).

The data are the AVIRIS airport scene's spectra (``abu-airport-1.mat`` in ``HYPERAPP_CUBES``, 10,000 x
205) where it is found, else synthetic spectra of the same size. Both sides get the same spectra, the
same parameters and every core; each is timed ``repeats`` times, alternating with the other so that a
change in the machine's load falls on both, and the fastest run counts. Each figure's notes say what
was called, the ratio hyperapp / peer (the goal: at most 1.2) and how the results agree.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from hyperapp.bench import Measurement, bench_case

COMMAND = "hyperapp --headless bench --case cpu-analysis-vs-peers"


def _spectra() -> tuple[np.ndarray, str]:
    """The airport scene's spectra (float32, (10000, 205)) where found, else synthetic ones."""
    where = Path(os.environ.get("HYPERAPP_CUBES", "")) / "abu-airport-1.mat"
    if os.environ.get("HYPERAPP_CUBES") and where.is_file():
        from hyperapp.io import open_cube

        cube = open_cube(where, dataset="data")
        return np.ascontiguousarray(np.asarray(cube.to_float32()).reshape(-1, cube.bands)), f"{where.name} (data)"
    from hyperapp.bench.cases import _spectra as synthetic

    return synthetic(10000, 205)[0] * 1000.0, "synthetic 10000 x 205 (HYPERAPP_CUBES has no abu-airport-1.mat)"


def _race(ours, peer, repeats: int) -> tuple[float, float, object, object]:
    """Fastest of ``repeats`` alternating wall-clock runs of each, in ms, and each one's last result."""
    best = [np.inf, np.inf]
    out = [None, None]
    for _ in range(repeats):
        for i, fn in enumerate((ours, peer)):
            t0 = time.perf_counter()
            out[i] = fn()
            best[i] = min(best[i], (time.perf_counter() - t0) * 1e3)
    return best[0], best[1], out[0], out[1]


def _row(name, ours_ms, peer, peer_ms, data, ours_call, notes) -> Measurement:
    return Measurement(name, None, ours_ms, peer, peer_ms, notes={
        "device": "cpu", "cores": os.cpu_count(), "data": data, "hyperapp": ours_call,
        "hyperapp/peer": round(ours_ms / peer_ms, 3), "command": COMMAND, **notes})


@bench_case("cpu-analysis-vs-peers")
def cpu_vs_peers(ctx) -> list[Measurement]:
    """Every analysis method's CPU path vs scikit-learn / SciPy on the same spectra (goal: within 1.2x)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from sklearn.cluster import KMeans
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.mixture import GaussianMixture
    from sklearn.tree import DecisionTreeClassifier

    from hyperapp.models.forest import RandomForest, cart
    from hyperapp.models.gmm import GaussianMixtureEM
    from hyperapp.models.hac import HierarchicalClustering
    from hyperapp.models.kmeans import MultiKMeans

    X, data = _spectra()
    fast = max(1, min(int(ctx.repeats), 3))
    out = []

    a, b, km, sk = _race(lambda: MultiKMeans(k=8, n_init=4, silhouette_sample=0).fit(X),
                         lambda: KMeans(8, n_init=4, random_state=0).fit(X), fast)
    out.append(_row("cpu-kmeans-k8-4starts", a, "sklearn KMeans(8, n_init=4)", b, data,
                    "MultiKMeans(k=8, n_init=4, silhouette_sample=0)",
                    {"inertia/sklearn": round(float(km.inertia_[0]) / float(sk.inertia_), 5)}))

    def sklearn_every_k():
        return [KMeans(k, n_init=8, random_state=0).fit(X) for k in range(2, 11)]

    a, b, mk, sks = _race(lambda: MultiKMeans(k="2..10", n_init=8, silhouette_sample=0).fit(X), sklearn_every_k, fast)
    out.append(_row("cpu-kmeans-every-k-2..10-8starts", a, "sklearn KMeans(k, n_init=8) for k = 2..10", b, data,
                    "MultiKMeans(k='2..10', n_init=8, silhouette_sample=0)",
                    {"inertia/sklearn_worst": round(max(float(mk.inertia_[i]) / float(r.inertia_)
                                                        for i, r in enumerate(sks)), 5)}))

    X64 = X.astype(np.float64)  # scikit-learn's mixture fails on float32 radiance (an indefinite covariance)
    for cov, repeats in (("full", 1), ("diag", fast)):  # (the full fit takes tens of seconds on a CPU)
        a, b, gm, sk = _race(lambda cov=cov: GaussianMixtureEM(k=8, covariance=cov, n_init=3).fit(X),
                             lambda cov=cov: GaussianMixture(8, covariance_type=cov, n_init=3, random_state=0).fit(X64),
                             repeats)
        ll, ref = float(gm.log_likelihood_[0]), float(sk.score(X64))
        out.append(_row(f"cpu-gmm-k8-{cov}-3starts", a, f"sklearn GaussianMixture(8, '{cov}', n_init=3) on float64", b,
                        data, f"GaussianMixtureEM(k=8, covariance='{cov}', n_init=3)",
                        {"loglik": round(ll, 4), "sklearn_loglik": round(ref, 4),
                         "loglik_rel_diff": f"{(ll - ref) / abs(ref):.2e}", "iterations": int(gm.n_iter_),
                         "sklearn_iterations": int(sk.n_iter_)}))

    # classes for the trees: the spectra's 8-means clusters (the scene has no class map)
    y = np.asarray(km.labels_).reshape(-1)
    a, b, rf, sk = _race(lambda: RandomForest(n_trees=100, test_fraction=0).fit(X, y),
                         lambda: RandomForestClassifier(100, oob_score=True, n_jobs=-1, random_state=0).fit(X, y), 1)
    out.append(_row("cpu-forest-100trees", a, "sklearn RandomForestClassifier(100, oob_score=True, n_jobs=-1)", b,
                    data, "RandomForest(n_trees=100, test_fraction=0) (out-of-bag accuracy included, as the peer's)",
                    {"oob_accuracy": round(float(rf.oob_score_), 4), "sklearn_oob_accuracy": round(float(sk.oob_score_), 4),
                     "depth": rf.depth_, "sklearn_depth": max(t.get_depth() for t in sk.estimators_)}))
    a, b, lab, ref = _race(lambda: rf.predict(X), lambda: sk.predict(X), fast)
    out.append(_row("cpu-forest-100trees-predict", a, "sklearn RandomForestClassifier.predict", b, data,
                    "RandomForest.predict (every spectrum)", {"same_labels": round(float((lab == ref).mean()), 4)}))

    a, b, ct, sk = _race(lambda: cart(test_fraction=0).fit(X, y),
                         lambda: DecisionTreeClassifier(random_state=0).fit(X, y), fast)
    out.append(_row("cpu-cart", a, "sklearn DecisionTreeClassifier()", b, data, "cart(test_fraction=0)",
                    {"depth": ct.depth_, "sklearn_depth": sk.get_depth(), "leaves": ct.n_leaves_,
                     "sklearn_leaves": int(sk.get_n_leaves())}))

    sub = X[:5000]

    def scipy_ward():
        Z = linkage(sub, "ward")
        return Z, fcluster(Z, 8, criterion="maxclust")

    a, b, hc, (Z, _) = _race(lambda: HierarchicalClustering("ward", n_clusters=8).fit(sub), scipy_ward, fast)
    out.append(_row("cpu-hac-ward-5000", a, "scipy linkage(X, 'ward') + fcluster", b, data + ", first 5000",
                    "HierarchicalClustering('ward', n_clusters=8)",
                    {"same_heights": bool(np.allclose(hc.linkage_[:, 2], Z[:, 2], rtol=1e-9))}))
    return out
