"""SOM and Gaussian-mixture EM on the CPU: agreement with a plain NumPy SOM and scikit-learn."""

import numpy as np
import pytest

from hyperapp.core.errors import InputError, ModelError
from hyperapp.io import open_cube
from hyperapp.io.samples import make_classes_scene
from hyperapp.models.gmm import GaussianMixtureEM
from hyperapp.models.som import SOM, grid_coords


def _pixels(path, n=None, scale=1.0, **kw):
    P = open_cube(path, **kw).good_bands().to_float32()
    P = P.reshape(-1, P.shape[-1]) / scale
    if n is not None and n < P.shape[0]:
        P = P[np.sort(np.random.default_rng(0).choice(P.shape[0], n, replace=False))]
    return P


def plain_batch_som(X, W0, rows, cols, sigmas):
    """The textbook batch SOM, written plainly for the test: BMUs, then neighbourhood-weighted means."""
    g = grid_coords(rows, cols)
    W = W0.astype(np.float64).copy()
    X = X.astype(np.float64)
    for s in sigmas:
        d = ((X[:, None, :] - W[None, :, :]) ** 2).sum(axis=2)
        bmu = d.argmin(axis=1)
        h = np.exp(-((g[bmu][:, None, :] - g[None, :, :]) ** 2).sum(axis=2) / (2 * s * s))  # (n, M)
        W = (h.T @ X) / h.sum(axis=0)[:, None]
    d = ((X[:, None, :] - W[None, :, :]) ** 2).sum(axis=2)
    return W, float(np.sqrt(d.min(axis=1)).mean())


@pytest.mark.parametrize("init", ["pca", "random"])
def test_som_matches_a_plain_batch_som(land_hdr, init):
    X = _pixels(land_hdr, 3000, 10000.0)
    m = SOM(8, 6, epochs=8, init=init, seed=1).fit(X)
    sig, _ = m.schedule()
    _, qe = plain_batch_som(X, np.asarray(m.initial_codebook(X)), 8, 6, sig)
    # the model's error of epoch e is measured before that epoch's update: compare the final codebook's
    final = float(np.sqrt(((X[:, None, :] - m.codebook_[None]) ** 2).sum(axis=2).min(axis=1)).mean())
    assert final == pytest.approx(qe, rel=0.05)
    assert len(m.quantization_error_) == 8 and (m.topographic_error_ >= 0).all() and (m.topographic_error_ <= 1).all()
    assert m.hits_.sum() == 3000 and m.umatrix_.shape == (8, 6)


def test_som_64x64_and_codebook_clusters():
    s = make_classes_scene(64, 64, 24)
    X = s.cube.reshape(-1, 24).astype(np.float32)
    m = SOM(64, 64, epochs=3).fit(X)
    assert m.codebook_.shape == (4096, 24) and m.hits_.sum() == X.shape[0]
    m = SOM(10, 10, epochs=5, codebook_clusters=6).fit(X)
    lab = np.asarray(m.predict(X))
    assert set(np.unique(lab)) <= set(range(6))
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(s.labels.ravel(), lab) > 0.5


@pytest.mark.parametrize("cov", ["full", "diag"])
def test_gmm_matches_sklearn_on_sample_scenes(land_hdr, sea_hdr, cov):
    from sklearn.mixture import GaussianMixture

    for path in (land_hdr, sea_hdr):
        X = _pixels(path, 6000, 10000.0)
        m = GaussianMixtureEM(k=4, covariance=cov, n_init=2).fit(X)
        ref = GaussianMixture(4, covariance_type=cov, reg_covar=1e-6, n_init=2, random_state=0).fit(X).score(X)
        assert m.log_likelihood_[0] >= ref - 0.005 * abs(ref), (path.name, m.log_likelihood_[0], ref)
        assert m.score(X) == pytest.approx(m.log_likelihood_[0], rel=1e-6)


def _sklearn_from_labels(X, labels, k, cov, reg):
    """scikit-learn's mixture started from a hard partition: the same start the model's k-means gives its EM."""
    from sklearn.mixture import GaussianMixture

    X = X.astype(np.float64)
    w = np.array([(labels == j).mean() for j in range(k)])
    mu = np.stack([X[labels == j].mean(axis=0) for j in range(k)])
    if cov == "diag":
        prec = np.stack([1.0 / (X[labels == j].var(axis=0) + reg) for j in range(k)])
    else:
        prec = np.stack([np.linalg.inv(np.cov(X[labels == j].T, bias=True) + reg * np.eye(X.shape[1]))
                         for j in range(k)])
    return GaussianMixture(k, covariance_type=cov, reg_covar=reg, weights_init=w, means_init=mu,
                           precisions_init=prec, max_iter=100, tol=1e-3).fit(X)


#: scikit-learn's best of three starts on 4,000 airport spectra, ``GaussianMixture(5, covariance_type=cov,
#: reg_covar=1e-4, n_init=3, random_state=0).fit(X).score(X)`` with ``X = _pixels(abu, 4000, 1000.0,
#: dataset="data")``: a function of the fixed scene and scikit-learn alone, recorded with scikit-learn 1.9.1
#: (the full fit took 13 s of CI's time a run); the classes scene's are fitted live, and so is the diagonal
#: one here, which also checks the record still is scikit-learn's
SKLEARN_AIRPORT_BEST_OF_THREE = {"full": 709.3218994140625, "diag": 315.96856689453125}


def test_gmm_matches_sklearn_on_classes_and_airport(abu):
    """EM from one start matches scikit-learn's EM from that start; the default three starts reach
    scikit-learn's best of three. (One start against one start compares two seeds' luck: on the airport
    both libraries find a local optimum 4 % lower from some seeds.)"""
    from sklearn.mixture import GaussianMixture

    from hyperapp.models.kmeans import MultiKMeans

    s = make_classes_scene(64, 64, 24)
    scenes = [s.cube.reshape(-1, 24).astype(np.float32) / 10000.0, _pixels(abu, 4000, 1000.0, dataset="data")]
    for airport, X in enumerate(scenes):
        for cov in ("full", "diag"):
            for seed in (0, 1):
                one = GaussianMixtureEM(k=5, covariance=cov, reg_covar=1e-4, n_init=1, seed=seed).fit(X)
                Xc = X.astype(np.float64) - X.mean(axis=0, dtype=np.float64)
                labels = MultiKMeans(k=5, n_init=1, seed=seed, silhouette_sample=0, max_iter=100).fit(
                    Xc.astype(np.float32)).labels_
                same = _sklearn_from_labels(Xc, np.asarray(labels), 5, cov, 1e-4).score(Xc)
                assert one.log_likelihood_[0] == pytest.approx(same, rel=1e-4), (cov, seed)
            m = GaussianMixtureEM(k=5, covariance=cov, reg_covar=1e-4).fit(X)  # the default: three starts
            if airport and cov == "full":
                ref = SKLEARN_AIRPORT_BEST_OF_THREE[cov]
            else:
                ref = GaussianMixture(5, covariance_type=cov, reg_covar=1e-4, n_init=3, random_state=0).fit(X).score(X)
                if airport:
                    assert ref == pytest.approx(SKLEARN_AIRPORT_BEST_OF_THREE[cov], rel=1e-6)
            assert m.log_likelihood_[0] >= ref - 0.005 * abs(ref), (cov, m.log_likelihood_[0], ref)


def test_gmm_bic_over_k_and_posteriors(land_hdr):
    from sklearn.mixture import GaussianMixture

    X = _pixels(land_hdr, 4000, 10000.0)
    m = GaussianMixtureEM(k="2..5", covariance="diag", n_init=1).fit(X)
    assert list(m.k_values_) == [2, 3, 4, 5] and m.chosen_k_ == int(m.k_values_[np.argmin(m.bic_)])
    sk = GaussianMixture(3, covariance_type="diag", reg_covar=1e-6, random_state=0).fit(X)
    assert m.bic_[1] == pytest.approx(sk.bic(X), rel=0.005)
    p = np.asarray(m.predict_proba(X))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-4)
    assert np.all(np.diff(m.ll_curve_) > -1e-6)  # EM never lowers the likelihood


def test_gmm_and_som_bad_input():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 4)).astype(np.float32)
    with pytest.raises(ModelError, match="more than the number of spectra"):
        GaussianMixtureEM(k=20).fit(X)
    # constant bands: the covariance floor keeps every component invertible (documented regularisation)
    Y = rng.normal(size=(300, 6)).astype(np.float32)
    Y[:, 2] = 5.0
    m = GaussianMixtureEM(k=3, covariance="full").fit(Y)
    assert np.isfinite(m.log_likelihood_[0])
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        GaussianMixtureEM(k=2).fit(bad)
    with pytest.raises(InputError, match="NaN"):
        SOM(3, 3).fit(bad)
    with pytest.raises(ModelError, match="empty"):
        GaussianMixtureEM(k=2).fit(np.empty((0, 4), np.float32))
    with pytest.raises(ModelError, match="empty"):
        SOM(3, 3).fit(np.empty((0, 4), np.float32))
    with pytest.raises(InputError, match="covariance"):
        GaussianMixtureEM(k=2, covariance="tied").fit(X)


def test_cli_analyse_som_and_gmm(land_hdr, tmp_path):
    import json

    from hyperapp.cli import main

    out = tmp_path / "som"
    assert main(["--headless", "analyse", str(land_hdr), "--method", "som", "--param", "rows=6", "--param", "cols=5",
                 "--param", "epochs=4", "--device", "cpu", "--out", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["results"]["quantization_error"]) == 4
    assert np.load(out / "codebook.npy").shape == (30, 64)
    out = tmp_path / "gmm"
    assert main(["--headless", "analyse", str(land_hdr), "--method", "gmm", "--param", "k=2..4", "--param",
                 "covariance=diag", "--sample", "3000", "--device", "cpu", "--out", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["results"]["k"] == [2, 3, 4] and len(rep["results"]["bic"]) == 3
    assert len(rep["results"]["log_likelihood_per_sample"]) == 3


def test_online_som_learns(land_hdr):
    X = _pixels(land_hdr, 2000, 10000.0)
    m = SOM(6, 6, epochs=4, training="online", learning_rate_start=0.5, learning_rate_end=0.01).fit(X)
    start = float(np.sqrt(((X[:, None, :] - np.asarray(m.initial_codebook(X))[None]) ** 2).sum(axis=2)
                          .min(axis=1)).mean())
    assert m.quantization_error_[-1] < 0.8 * start
    assert m.quantization_error_[-1] <= m.quantization_error_[0]
    with pytest.raises(InputError, match="training"):
        SOM(3, 3, training="sometimes").fit(X)


def test_a_one_neuron_map_or_one_cluster_labels_every_spectrum_alike():
    """A 1 x 1 map with codebook clusters said "the selected spectra are all identical" (a k-means of its
    one neuron); one cluster asked of any map is every neuron's."""
    X = np.random.default_rng(0).random((500, 8)).astype(np.float32)
    for rows, cols, k in ((1, 1, 8), (3, 3, 1)):
        m = SOM(rows, cols, epochs=2, codebook_clusters=k).fit(X)
        assert set(np.unique(m.cluster_of_unit_)) == {0} and set(np.unique(np.asarray(m.predict(X)))) == {0}
