"""Forest classification and hierarchical clustering: agreement with scikit-learn and SciPy,
the analysis path and CLI, and clear errors on bad input."""

import json

import numpy as np
import pytest

from hyperapp.analyse.run import run_analysis
from hyperapp.cli import main
from hyperapp.core.cube import cube_from_array
from hyperapp.core.errors import InputError
from hyperapp.io.samples import make_classes_scene
from hyperapp.models.forest import RandomForest, cart
from hyperapp.models.hac import HierarchicalClustering
from hyperapp.request import AnalyseRequest

from .conftest import hac_reference, stratified_split


@pytest.fixture(scope="module")
def classes_scene():
    s = make_classes_scene(96, 96, 48, n_classes=6)
    return s.cube.reshape(-1, 48).astype(np.float32), s.labels.ravel().astype(np.int64), s




def test_forest_matches_sklearn_multiclass(classes_scene):
    from sklearn.ensemble import RandomForestClassifier

    X, y, _ = classes_scene
    tr = stratified_split(y, 0.10)
    ours = RandomForest(n_trees=30, max_depth=10, test_fraction=0).fit(X[tr], y[tr])
    ref = RandomForestClassifier(30, max_depth=10, random_state=0, oob_score=True).fit(X[tr], y[tr])
    acc, acc_ref = ours.score(X[~tr], y[~tr]), ref.score(X[~tr], y[~tr])
    assert acc >= acc_ref - 0.01, (acc, acc_ref)
    assert acc > 0.5
    assert ours.oob_score_ == pytest.approx(ref.oob_score_, abs=0.03)


def test_band_importance_matches_sklearn(classes_scene):
    from sklearn.ensemble import RandomForestClassifier

    X, y, _ = classes_scene
    tr = stratified_split(y, 0.10)
    ours = RandomForest(n_trees=200, max_depth=6, test_fraction=0).fit(X[tr], y[tr]).feature_importances_
    ref = RandomForestClassifier(200, max_depth=6, random_state=0).fit(X[tr], y[tr]).feature_importances_
    assert ours.sum() == pytest.approx(1.0)
    assert np.corrcoef(ours, ref)[0, 1] > 0.8


def test_cart_matches_sklearn_tree(classes_scene):
    from sklearn.tree import DecisionTreeClassifier

    X, y, _ = classes_scene
    tr = stratified_split(y, 0.10, seed=1)
    ours = cart(max_depth=8, test_fraction=0).fit(X[tr], y[tr])
    ref = DecisionTreeClassifier(max_depth=8, random_state=0).fit(X[tr], y[tr])
    assert ours.score(X[~tr], y[~tr]) >= ref.score(X[~tr], y[~tr]) - 0.01
    assert ours.depth_ <= 8 and ours.oob_score_ is None


def test_forest_matches_sklearn_airport(abu):
    from sklearn.ensemble import RandomForestClassifier

    from hyperapp.io import open_cube
    from hyperapp.io.masks import read_mask

    cube = open_cube(abu, "data")
    X = cube.read().reshape(-1, cube.bands).astype(np.float32)
    y = (read_mask(abu, variable="map") > 0).ravel().astype(np.int64)
    tr = stratified_split(y, 0.10, seed=2)
    ours = RandomForest(n_trees=30, max_depth=12, test_fraction=0).fit(X[tr], y[tr])
    ref = RandomForestClassifier(30, max_depth=12, random_state=0).fit(X[tr], y[tr])
    assert ours.score(X[~tr], y[~tr]) >= ref.score(X[~tr], y[~tr]) - 0.01


def test_forest_held_out_confusion(classes_scene):
    X, y, _ = classes_scene
    f = RandomForest(n_trees=10, max_depth=6, test_fraction=0.3).fit(X[::7], y[::7])
    C = f.confusion_
    assert C.shape == (6, 6) and C.sum() == f.n_test_
    assert f.test_accuracy_ == pytest.approx(np.trace(C) / C.sum())
    assert f.n_train_ + f.n_test_ == X[::7].shape[0]
    # unlabelled spectra (< 0) are left out
    y2 = y[::7].copy()
    y2[:50] = -1
    f2 = RandomForest(n_trees=3, max_depth=3).fit(X[::7], y2)
    assert f2.n_train_ + f2.n_test_ == int((y2 >= 0).sum())


@pytest.mark.parametrize("bad, message", [
    (lambda y: np.ones_like(y), "two or more"),
    (lambda y: np.r_[[2], np.ones(y.size - 1, int)], "class 2 has 1 pixel"),
])
def test_forest_bad_classes(classes_scene, bad, message):
    X, y, _ = classes_scene
    with pytest.raises(InputError, match=message):
        RandomForest(n_trees=2).fit(X[:500], bad(y[:500]))


@pytest.fixture(scope="module")
def spectra_2000(classes_scene):
    """2,000 spectra of the scene; a little float noise on its whole-number values, so no two distances
    tie (with ties, equal-height merges may come in another order than SciPy's)."""
    X, _, _ = classes_scene
    rng = np.random.default_rng(3)
    S = X[rng.choice(X.shape[0], 2000, replace=False)].astype(np.float64)
    return (S + rng.uniform(-0.5, 0.5, S.shape)).astype(np.float32)


@pytest.mark.parametrize("method", ["single", "average"])
def test_hac_with_tied_distances_gives_scipys_tree(classes_scene, method):
    """Whole-number spectra tie often; the merge order of ties may differ, the tree (cophenetic
    distances) does not."""
    from scipy.cluster.hierarchy import cophenet

    X, _, _ = classes_scene
    S = X[np.random.default_rng(4).choice(X.shape[0], 600, replace=False)]
    Z = HierarchicalClustering(method).fit(S).linkage_
    np.testing.assert_allclose(cophenet(Z), cophenet(hac_reference(S, method, "euclidean")), rtol=1e-9)


@pytest.mark.parametrize("metric", ["euclidean", "sam"])
@pytest.mark.parametrize("method", ["single", "complete", "average", "ward"])
def test_hac_matches_scipy(spectra_2000, method, metric):
    Z = HierarchicalClustering(method, metric, n_clusters=5).fit(spectra_2000).linkage_
    ref = hac_reference(spectra_2000, method, metric)
    np.testing.assert_array_equal(Z[:, :2], ref[:, :2])
    np.testing.assert_array_equal(Z[:, 3], ref[:, 3])
    np.testing.assert_allclose(Z[:, 2], ref[:, 2], rtol=1e-5)


def test_hac_cut_and_predict(spectra_2000):
    from scipy.cluster.hierarchy import fcluster

    h = HierarchicalClustering("ward", n_clusters=6).fit(spectra_2000)
    assert h.n_clusters_ == 6 and h.means_.shape == (6, spectra_2000.shape[1])
    ref = fcluster(h.linkage_, 6, "maxclust") - 1
    np.testing.assert_array_equal(h.labels_, ref)
    lab = h.cut(height=float(h.linkage_[-3, 2]) + 1e-9, X=spectra_2000)
    assert lab.max() + 1 == 3 == h.n_clusters_
    # predict: the nearest cluster mean; most fitted spectra keep their cluster
    assert (h.predict(spectra_2000) == lab).mean() > 0.8


def test_hac_bad_input(spectra_2000):
    with pytest.raises(InputError, match="clusters asked of 10 spectra"):
        HierarchicalClustering(n_clusters=11).fit(spectra_2000[:10])
    with pytest.raises(InputError, match="at least 2 spectra"):
        HierarchicalClustering(n_clusters=1).fit(spectra_2000[:1])
    with pytest.raises(InputError, match=r"option linkage \(Linkage\) must be one of ward, average, complete, single"):
        HierarchicalClustering(linkage="centroid").fit(spectra_2000[:10])


def test_hac_refuses_a_matrix_that_does_not_fit(monkeypatch, spectra_2000):
    import hyperapp.models.hac as hac

    monkeypatch.setattr(hac, "MATRIX_SHARE", 1e-9)
    with pytest.raises(InputError, match="distance matrix"):
        HierarchicalClustering().fit(spectra_2000[:100])


def _cube(scene):
    return cube_from_array(scene.cube.astype(np.float32), "classes", wavelengths=np.asarray(scene.wavelengths))


def test_forest_through_the_analysis_path(classes_scene):
    _, _, s = classes_scene
    roi = np.where(stratified_split(s.labels.ravel(), 0.1).reshape(s.labels.shape), s.labels, 0)
    res = run_analysis(_cube(s), AnalyseRequest("forest", params={"n_trees": "20", "max_depth": "10"}, select="rois"), roi=roi, class_names={int(k): n for k, n in enumerate(s.classes, 1)})
    acc = (res.labels == s.labels).mean()
    assert acc > 0.8
    assert res.report["results"]["test_accuracy"] > 0.8
    assert res.report["class_names"]["1"] == s.classes[0]


def test_cli_forest_and_hac(tmp_path, classes_scene, capsys):
    from hyperapp.io.writers import write_envi

    _, _, s = classes_scene
    cube_hdr = write_envi(tmp_path / "scene", s.cube, None)
    lab = np.where(stratified_split(s.labels.ravel(), 0.1).reshape(s.labels.shape), s.labels, 0).astype(np.int16)
    lab_hdr = write_envi(tmp_path / "classes", lab, None)
    out = tmp_path / "forest"
    code = main(["--headless", "analyse", str(cube_hdr), "--method", "forest", "--labels", str(lab_hdr),
                 "--param", "n_trees=10", "--param", "max_depth=8", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "held-out accuracy" in text
    rep = json.loads((out / "report.json").read_text())
    assert rep["results"]["n_trees"] == 10
    assert (out / "classes.hdr").is_file() and (out / "confusion.csv").is_file()
    hdr = (out / "classes.hdr").read_text()
    assert "ENVI Classification" in hdr and "class names" in hdr
    out2 = tmp_path / "hac"
    code = main(["--headless", "analyse", str(cube_hdr), "--method", "hac", "--param", "linkage=average",
                 "--param", "metric=sam", "--param", "n_clusters=4", "--roi", str(lab_hdr), "--out", str(out2)])
    assert code == 0
    rows = (out2 / "linkage.csv").read_text().splitlines()
    n = int((lab > 0).sum())
    assert rows[0] == "a,b,height,size" and len(rows) == n  # header + n - 1 merges
    # bad input: labels of the wrong shape
    bad = write_envi(tmp_path / "bad", np.ones((5, 5), np.int16), None)
    code = main(["--headless", "analyse", str(cube_hdr), "--method", "forest", "--labels", str(bad),
                 "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "5x5" in err and "Traceback" not in err


def test_forest_summary_of_stumps(classes_scene):
    """A forest of stumps: depth 1 is the deepest tree's, the leaves are counted over every tree (at most
    two a tree), the words say both, and only bands that split are listed as the top bands."""
    from hyperapp.analyse.run import forest_shape

    X, y, _ = classes_scene
    keep = y > 0
    m = RandomForest(n_trees=20, max_depth=1, seed=0).fit(X[keep][::4], y[keep][::4])
    res = m.summary()
    assert res["depth"] == 1 and res["n_trees"] + 1 <= res["n_leaves"] <= 2 * res["n_trees"]
    assert all(m.feature_importances_[b] > 0 for b in res["top_bands"])
    assert len(res["top_bands"]) == min(10, int((m.feature_importances_ > 0).sum()))
    text = forest_shape(res)
    assert text.startswith("20 trees, the deepest 1 level(s) deep") and f"{res['n_leaves']} leaves in all" in text
    one = cart(max_depth=1).fit(X[keep][::4], y[keep][::4]).summary()
    assert forest_shape(one) == "one tree, 1 level(s) deep, 2 leaves" and len(one["top_bands"]) == 1


def test_one_tree_is_named_as_a_tree_in_its_messages():
    X = np.random.default_rng(0).random((20, 4))
    y = np.zeros(20, int)
    with pytest.raises(InputError, match="the decision tree learns to tell classes apart.*the background, say"):
        cart().fit(X, y)
    with pytest.raises(InputError, match="the forest learns to tell classes apart and needs pixels of two or more"):
        RandomForest(n_trees=3).fit(X, y)


def test_a_class_the_forest_misses_is_said_beside_the_overall_accuracy():
    """Two target pixels held out and both missed hide under a 98 % overall accuracy: the summary carries
    each class's recall and the balanced accuracy, and the words the CLI and the panel print say it."""
    from hyperapp.analyse.run import class_accuracy_words
    from hyperapp.models.forest import RandomForest

    rng = np.random.default_rng(0)
    X = rng.normal(0, 1, (300, 6))
    y = np.ones(300, int)
    y[:6] = 2  # six "targets" that look like the background: the forest cannot learn them
    res = RandomForest(n_trees=10, test_fraction=0.34, seed=1).fit(X, y).summary()
    C = np.asarray(res["confusion"])
    recall = [C[i, i] / C[i].sum() for i in range(2)]
    assert res["class_recall"] == pytest.approx(recall)
    assert res["balanced_accuracy"] == pytest.approx(np.mean(recall))
    words = class_accuracy_words(res, ["background", "target"])
    assert res["test_accuracy"] > 0.9 and recall[1] < 0.5
    assert any(w.startswith("balanced accuracy") for w in words)
    assert f"target: {int(C[1, 1])} of {int(C[1].sum())} held-out pixels right" in words
    assert class_accuracy_words({**res, "class_recall": [1.0, 1.0], "balanced_accuracy": 1.0,
                                 "test_accuracy": 1.0, "confusion": [[50, 0], [0, 50]]}) == []
