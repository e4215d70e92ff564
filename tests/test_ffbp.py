"""The FFBP window detector: recall on sea and land scenes, the tree, persistence and bad input."""

import numpy as np
import pytest

from hyperapp.core.errors import InputError, ModelError
from hyperapp.detect.model_files import load_model, save_model
from hyperapp.io.samples import make_land_scene, make_sea_scene
from hyperapp.models.ffbp import FFBP, WindowStats, box_recall, component_boxes, merge_boxes, quadtree, split


def _boxes(bs):
    return np.array([[b["row"], b["col"], b["row"] + b["height"], b["col"] + b["width"]] for b in bs]).reshape(-1, 4)


@pytest.fixture(scope="module")
def sea_model():
    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    return FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0) for s in train])


def test_sea_sample_scene_recall(sea_model, sea_hdr):
    from hyperapp.io import open_cube, read_mask

    X = open_cube(sea_hdr).read()
    truth = read_mask(sea_hdr.with_name("sea_truth.hdr")) > 0
    recall, false = box_recall(_boxes(sea_model.detect(X)), truth)
    assert recall == 1.0
    assert false < len(component_boxes(truth))


@pytest.mark.slow
def test_sea_1024_scene_recall(sea_model):
    test = make_sea_scene(1024, 1024, seed=998)
    boxes = sea_model.detect(test.cube.astype(np.float32))
    recall, false = box_recall(_boxes(boxes), test.truth > 0)
    n = len(component_boxes(test.truth > 0))
    assert recall == 1.0 and false < n, (recall, false, n)
    lv = sea_model.windows_per_level_
    assert lv[:3] == [1, 4, 16] and sum(lv) < sum(4 ** i for i in range(len(lv)))  # pruned


def test_land_recall():
    train = [make_land_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    m = FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0) for s in train])
    test = make_land_scene()
    recall, _ = box_recall(_boxes(m.detect(test.cube.astype(np.float32))), test.truth > 0)
    assert recall >= 0.9


def test_window_statistics_are_exact():
    rng = np.random.default_rng(0)
    X = rng.random((37, 29, 5)).astype(np.float32) + 3
    st = WindowStats(X, 8)
    W = np.array([[0, 0, 5, 4], [1, 2, 3, 4], [4, 3, 5, 4]])
    mean, std = st.mean_std(W)
    for (r0, c0, r1, c1), m, s in zip(W, mean, std):
        block = X[r0 * 8:min(r1 * 8, 37), c0 * 8:min(c1 * 8, 29)].reshape(-1, 5).astype(np.float64)
        np.testing.assert_allclose(m, block.mean(0), rtol=1e-5)
        np.testing.assert_allclose(s, block.std(0), rtol=1e-3, atol=1e-5)


def test_tree_of_any_size():
    W = quadtree(5, 3, shifted=False)
    leaves = W[((W[:, 2] - W[:, 0]) == 1) & ((W[:, 3] - W[:, 1]) == 1)]
    assert len(leaves) == 15  # every block is a leaf of the tree exactly once
    kids, parent = split(np.array([[0, 0, 5, 3]]))
    assert sorted(map(tuple, kids)) == [(0, 0, 3, 2), (0, 2, 3, 3), (3, 0, 5, 2), (3, 2, 5, 3)]


def test_merge_joins_a_cut_target_but_not_a_chain():
    P = np.array([[0, 0, 8, 8], [0, 8, 8, 16], [40, 40, 48, 48]])
    assert merge_boxes(P).tolist() == [[0, 0, 8, 16], [40, 40, 48, 48]]
    chain = np.array([[0, 8 * i, 8, 8 * i + 8] for i in range(10)])
    assert len(merge_boxes(chain)) >= 5


def test_save_load_and_band_check(sea_model, tmp_path):
    p = save_model(sea_model, tmp_path / "f.npz", "ffbp")
    m = load_model(p, n_bands=64, method="ffbp")
    X = make_sea_scene(64, 64, seed=5).cube.astype(np.float32)
    assert m.detect(X) == sea_model.detect(X)
    with pytest.raises(ModelError, match="trained on 64 bands"):
        load_model(p, n_bands=32)
    with pytest.raises(ModelError, match="trained on 64"):
        sea_model.detect(X[:, :, :32])


def test_bad_input(sea_model):
    with pytest.raises(InputError, match="smaller than the minimum window"):
        sea_model.detect(np.ones((6, 50, 64), np.float32))
    s = make_sea_scene(64, 64, seed=3)
    with pytest.raises(ModelError, match="no target pixels"):
        FFBP().fit_scenes([(s.cube.astype(np.float32), np.zeros((64, 64), bool))])
    with pytest.raises(ModelError, match="different band counts"):
        FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0), (np.ones((64, 64, 3), np.float32), s.truth > 0)])


def test_cli_ffbp_trains_on_another_scene(tmp_path, capsys, sea_hdr):
    import json

    from hyperapp.cli import main
    from hyperapp.io.samples import write_scene

    sc = make_sea_scene(256, 256, seed=101)
    sc.name = "train"
    write_scene(sc, tmp_path / "train")
    code = main(["--headless", "detect", str(sea_hdr), "--method", "ffbp", "--train-from",
                 str(tmp_path / "train/train.hdr"), "--train-truth", str(tmp_path / "train/train_truth.hdr"),
                 "--out", str(tmp_path / "o"), "--save-model", str(tmp_path / "o/ffbp.npz")])
    assert code == 0, capsys.readouterr().err
    rep = json.loads((tmp_path / "o/report.json").read_text())
    assert rep["boxes"] > 0 and rep["windows_per_level"][0] == 1
    printed = "windows per level " + "/".join(map(str, rep["windows_per_level"]))
    assert printed in capsys.readouterr().out
    assert (tmp_path / "o/boxes.csv").read_text().startswith("row,col,height,width,level,ann1,ann2")
    gj = json.loads((tmp_path / "o/boxes.geojson").read_text())
    assert len(gj["features"]) == rep["boxes"]
    code = main(["--headless", "detect", str(sea_hdr), "--method", "ffbp", "--out", str(tmp_path / "p")])
    assert code == 2 and "ffbp needs a model" in capsys.readouterr().err


@pytest.mark.parametrize("nbr,nbc", [(128, 128), (3, 100), (1, 1), (2, 3), (37, 129), (300, 7), (513, 64)])
def test_gpu_search_tables_cover_every_tree_window(nbr, nbc):
    """The persistent GPU search sums a window from the coarse table when it sits at or above the coarse
    level (its edges must then be coarse boundaries) and from the block sums below (at most 2 x 2)."""
    from hyperapp.models.ffbp import is_leaf
    from hyperapp.models.ffbp_gpu import _inverse, _levels, coarse_level, partition

    levels = _levels(nbr, nbc)
    lc = coarse_level(levels)
    inv_r, inv_c = _inverse(partition(nbr, lc), nbr), _inverse(partition(nbc, lc), nbc)
    W, level = np.array([[0, 0, nbr, nbc]]), 0
    while len(W):
        if level <= lc:
            assert (inv_r[W[:, [0, 2]]] >= 0).all() and (inv_c[W[:, [1, 3]]] >= 0).all()
        else:
            assert (W[:, 2] - W[:, 0]).max() <= 2 and (W[:, 3] - W[:, 1]).max() <= 2
        W, level = split(W[~is_leaf(W)])[0], level + 1
    assert level <= levels
