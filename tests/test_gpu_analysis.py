"""The analysis models' CuPy paths agree with their NumPy paths (GPU machine; skipped elsewhere)."""

import numpy as np
import pytest

from hyperapp.io.samples import make_classes_scene
from hyperapp.models.band_selection import BandClustering, BandSubsetSearch
from hyperapp.models.kmeans import MultiKMeans, davies_bouldin, silhouette

from .conftest import hac_reference, stratified_split

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def scene():
    s = make_classes_scene(96, 96, 48)
    return s.cube.reshape(-1, 48).astype(np.float32), s.labels.ravel().astype(np.int64)


def test_multik_gpu_matches_numpy(cp, scene):
    P, _ = scene
    cpu = MultiKMeans(k="2..10", n_init=4).fit(P)
    gpu = MultiKMeans(k="2..10", n_init=4).fit(cp.asarray(P))
    np.testing.assert_allclose(gpu.inertia_, cpu.inertia_, rtol=2e-3)
    assert gpu.chosen_k_ == cpu.chosen_k_
    agree = (cp.asnumpy(gpu.labels_) == cpu.labels_).mean()
    assert agree > 0.995
    np.testing.assert_allclose(gpu.silhouette_, cpu.silhouette_, rtol=1e-3)
    lab = gpu.predict(cp.asarray(P))
    assert isinstance(lab, cp.ndarray) and (cp.asnumpy(lab) == cpu.predict(P)).mean() > 0.995


def test_choice_metrics_gpu(cp, scene):
    P, y = scene
    lab = (y[:3000] - 1).astype(np.int64)
    s_cpu = silhouette(P[:3000], lab, 6)
    s_gpu = silhouette(cp.asarray(P[:3000]), cp.asarray(lab), 6)
    assert s_gpu == pytest.approx(s_cpu, rel=1e-6)
    C = np.stack([P[:3000][lab == j].mean(axis=0) for j in range(6)])
    assert davies_bouldin(cp.asarray(P[:3000]), cp.asarray(lab), cp.asarray(C)) == pytest.approx(
        davies_bouldin(P[:3000], lab, C), rel=1e-6)


@pytest.mark.parametrize("k,r,classes", [(8, 3, True), (4, 2, False), (16, 5, True)])
def test_band_subsets_kernel_matches_numpy(cp, scene, k, r, classes):
    P, y = scene
    yy = y if classes else None
    cpu = BandSubsetSearch(n_subsets=150, subset_size=r, k=k, seed=3).fit(P, yy)
    gpu = BandSubsetSearch(n_subsets=150, subset_size=r, k=k, seed=3).fit(cp.asarray(P), yy)
    assert cpu.score_kind_ == gpu.score_kind_
    close = np.isclose(gpu.scores_, cpu.scores_, rtol=1e-3, atol=1e-3)
    assert close.mean() > 0.97  # an assignment tie broken otherwise can move a subset to another minimum
    assert len(set(map(tuple, gpu.best_subsets_[:5])) & set(map(tuple, cpu.best_subsets_[:10]))) >= 4


def test_band_clusters_gpu(cp, scene):
    P, _ = scene
    cpu = BandClustering(6).fit(P)
    gpu = BandClustering(6).fit(cp.asarray(P))
    np.testing.assert_array_equal(gpu.representatives_, cpu.representatives_)


def test_analysis_path_gpu(cp, land_hdr):
    from hyperapp.analyse.run import run_analysis
    from hyperapp.io import open_cube
    from hyperapp.request import AnalyseRequest

    cube = open_cube(land_hdr).good_bands()
    a = run_analysis(cube, AnalyseRequest("kmeans", params={"k": "2..6"}, select="sample", sample=5000, device="cpu"))
    b = run_analysis(cube, AnalyseRequest("kmeans", params={"k": "2..6"}, select="sample", sample=5000, device="gpu"))
    assert b.report["device"] == "gpu" and a.report["results"]["chosen_k"] == b.report["results"]["chosen_k"]
    assert (a.labels == b.labels).mean() > 0.995


def test_som_gpu_matches_numpy(cp, scene):
    from hyperapp.models.som import SOM

    P, _ = scene
    cpu = SOM(12, 10, epochs=6).fit(P)
    gpu = SOM(12, 10, epochs=6).fit(cp.asarray(P))
    np.testing.assert_allclose(gpu.quantization_error_, cpu.quantization_error_, rtol=1e-3)
    np.testing.assert_allclose(cp.asnumpy(gpu.codebook_), np.asarray(cpu.codebook_), rtol=1e-3, atol=1e-2)
    big = SOM(64, 64, epochs=2).fit(cp.asarray(P))  # no cap on the map
    assert big.codebook_.shape[0] == 4096


@pytest.mark.parametrize("cov", ["full", "diag"])
def test_gmm_gpu_matches_numpy(cp, scene, cov):
    from hyperapp.models.gmm import GaussianMixtureEM

    P, _ = scene
    P = P / 10000.0
    cpu = GaussianMixtureEM(k=5, covariance=cov, reg_covar=1e-4).fit(P)
    gpu = GaussianMixtureEM(k=5, covariance=cov, reg_covar=1e-4).fit(cp.asarray(P))
    assert gpu.log_likelihood_[0] == pytest.approx(cpu.log_likelihood_[0], rel=1e-3)
    assert (cp.asnumpy(gpu.predict(cp.asarray(P))) == cpu.predict(P)).mean() > 0.99


def test_online_som_kernel_matches_numpy(cp, scene):
    from hyperapp.models.som import SOM

    P, _ = scene
    P = P[::8] / 10000.0
    kw = dict(epochs=3, training="online", learning_rate_start=0.5, learning_rate_end=0.01)
    cpu = SOM(7, 9, **kw).fit(P)
    gpu = SOM(7, 9, **kw).fit(cp.asarray(P))
    np.testing.assert_allclose(gpu.quantization_error_, cpu.quantization_error_, rtol=2e-2)


# ------------------------------------------------------------------ forest and HAC


def test_cart_gpu_matches_numpy(cp, scene):
    from hyperapp.models.forest import cart

    P, y = scene
    tr = stratified_split(y, 0.2)
    cpu = cart(max_depth=10, test_fraction=0).fit(P[tr], y[tr])
    gpu = cart(max_depth=10, test_fraction=0).fit(cp.asarray(P[tr]), y[tr])
    # the same histograms and the same tie rule: the same tree, level by level
    assert gpu.depth_ == cpu.depth_
    np.testing.assert_array_equal(gpu.feature_[:63], cpu.feature_[:63])
    agree = (cp.asnumpy(gpu.predict(cp.asarray(P))) == cpu.predict(P)).mean()
    assert agree > 0.995


def test_forest_gpu_matches_sklearn(cp, scene, abu):
    from sklearn.ensemble import RandomForestClassifier

    from hyperapp.io import open_cube
    from hyperapp.io.masks import read_mask
    from hyperapp.models.forest import RandomForest

    P, y = scene
    cube = open_cube(abu, "data")
    A = cube.read().reshape(-1, cube.bands).astype(np.float32)
    ya = (read_mask(abu, variable="map") > 0).ravel().astype(np.int64)
    for X, lab in ((P, y), (A, ya)):
        tr = stratified_split(lab, 0.10, seed=2)
        ours = RandomForest(n_trees=100, max_depth=12, test_fraction=0).fit(cp.asarray(X[tr]), lab[tr])
        ref = RandomForestClassifier(100, max_depth=12, random_state=0, n_jobs=-1).fit(X[tr], lab[tr])
        acc = float((cp.asnumpy(ours.predict(cp.asarray(X[~tr]))) == lab[~tr]).mean())
        assert acc >= ref.score(X[~tr], lab[~tr]) - 0.01
        assert ours.oob_score_ > 0.5


@pytest.mark.parametrize("metric", ["euclidean", "sam"])
def test_hac_gpu_matches_scipy(cp, scene, metric):
    from hyperapp.models.hac import HierarchicalClustering

    P, _ = scene
    rng = np.random.default_rng(3)
    S = P[rng.choice(P.shape[0], 2000, replace=False)].astype(np.float64)
    S = (S + rng.uniform(-0.5, 0.5, S.shape)).astype(np.float32)  # no tied distances
    for method in ("single", "complete", "average", "ward"):
        h = HierarchicalClustering(method, metric, n_clusters=6).fit(cp.asarray(S))
        ref = hac_reference(S, method, metric)
        np.testing.assert_array_equal(h.linkage_[:, :2], ref[:, :2])
        np.testing.assert_array_equal(h.linkage_[:, 3], ref[:, 3])
        np.testing.assert_allclose(h.linkage_[:, 2], ref[:, 2], rtol=1e-5)
        lab = h.predict(cp.asarray(S))
        assert isinstance(lab, cp.ndarray)
