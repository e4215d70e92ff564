"""GPU paths agree with NumPy (run on the GPU machine; skipped elsewhere)."""

import numpy as np
import pytest

from hyperapp.io import read_labels
from hyperapp.models import classic
from hyperapp.models.evaluation import auc, evaluate
from hyperapp.models.rbfn import RBFN

pytestmark = pytest.mark.gpu


def _data(rows, cols, bands, seed=0):
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.05, 0.6, size=(5, bands))
    ab = rng.dirichlet(np.ones(5), size=rows * cols)
    X = (ab @ ends + rng.normal(0, 0.01, (rows * cols, bands))).astype(np.float32).reshape(rows, cols, bands)
    y = -np.ones((rows, cols), np.int8)
    y.reshape(-1)[rng.choice(rows * cols, 5, replace=False)] = 1
    return X, y


@pytest.mark.parametrize("bands,hidden,whiten,normalize", [
    (64, 4, "pca", True), (64, 4, "std", False), (64, 32, "cov", True), (200, 32, "pca", True),
    (205, 8, "pca", False), (61, 6, "std", True), (64, 200, "pca", True),
])
def test_rbfn_fused_kernel_matches_numpy(cp, bands, hidden, whiten, normalize):
    X, y = _data(64, 50, bands)
    m = RBFN(n_hidden=hidden, whiten=whiten, normalize=normalize).fit(cp.asarray(X), cp.asarray(y))
    gpu = m.decision_function(cp.asarray(X)).get()
    cpu = m.to_host().decision_function(X)
    assert np.abs(gpu - cpu).max() <= 1e-4 * np.abs(cpu).max()
    if not m.diagonal_ and bands % 4 == 0 and m.centres_.shape[0] <= 64:
        from hyperapp.models.rbfn_gpu import score_fused

        net = m.to_host()._score_reference(X.reshape(-1, bands)).reshape(cpu.shape)  # without coherence
        for v in ("staged", "direct"):
            got = score_fused(m, cp.asarray(X).reshape(-1, bands), v).get().reshape(cpu.shape)
            assert np.abs(got - net).max() <= 1e-4 * np.abs(net).max(), v
    import copy

    gemm = copy.copy(m)  # the same fitted (device) arrays, scored by the cuBLAS path
    gemm.backend_kernel = "gemm"
    assert np.abs(gemm.decision_function(cp.asarray(X)).get() - cpu).max() <= 1e-4 * np.abs(cpu).max()


def test_rbfn_constant_memory_follows_the_model_scored(cp):
    """The fused kernel's constants (one set per compiled module) are re-uploaded whenever another
    model, or a refit of the same one, is scored: models of one shape fitted one after another (the
    memory pool hands a freed model's blocks to the next, so ids and device pointers repeat), scored in
    alternation, each give their own host reference's scores."""
    from hyperapp.models.rbfn_gpu import score_fused

    X, _ = _data(48, 40, 64)
    P = cp.asarray(X).reshape(-1, 64)
    rng = np.random.default_rng(5)
    models = []
    for i in range(4):
        y = -np.ones((48, 40), np.int8)
        y.reshape(-1)[rng.choice(48 * 40, 5, replace=False)] = 1
        m = RBFN(n_hidden=8, whiten="pca").fit(cp.asarray(X), cp.asarray(y))
        models.append((m, m.to_host()._score_reference(X.reshape(-1, 64))))
        if i == 1:
            del m, models[0]  # the next fit can take this one's blocks
    same = models[-1][0]
    y = -np.ones((48, 40), np.int8)
    y.reshape(-1)[rng.choice(48 * 40, 5, replace=False)] = 1
    same.fit(cp.asarray(X), cp.asarray(y))  # a refit: the same object, new arrays
    models[-1] = (same, same.to_host()._score_reference(X.reshape(-1, 64)))
    for _ in range(2):
        for m, ref in models:
            got = score_fused(m, P, "staged").get()
            assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


def test_rbfn_gpu_training_matches_cpu_training(cp):
    X, y = _data(80, 80, 64)
    a = RBFN().fit(X, y).decision_function(X)
    b = RBFN().fit(cp.asarray(X), cp.asarray(y)).decision_function(cp.asarray(X)).get()
    assert np.abs(a - b).max() <= 1e-3 * np.abs(a).max()


def test_rbfn_anomaly_input_matches_numpy(cp, monkeypatch):
    """With the anomaly input counting, GPU training and scoring give the CPU's weights and
    scores (the RX GEMM and kernels/whitened.cu's RX mode on the device). The fusion's weight is fixed
    here (it is computed on the host from what the device returns), so the term is always exercised."""
    import hyperapp.models.rbfn as rbfn

    monkeypatch.setattr(rbfn, "_fuse", lambda nb, at, ab: (1 / nb[1], -nb[0] / nb[1], 0.5 / ab.std(), -0.5 * ab.mean() / ab.std()))
    X, y = _data(80, 80, 64)
    a = RBFN()
    sa = a.fit(X, y).decision_function(X)
    assert a.anomaly_v_ > 0
    b = RBFN()
    sb = b.fit(cp.asarray(X), cp.asarray(y)).decision_function(cp.asarray(X)).get()
    assert abs(a.anomaly_v_ - b.anomaly_v_) <= 1e-3 * abs(a.anomaly_v_)
    assert np.abs(sa - sb).max() <= 1e-3 * np.abs(sa).max()


@pytest.mark.parametrize("n,k,dim,n_iter", [(4000, 31, 16, 5), (3000, 7, 5, 25), (500, 60, 16, 25), (50, 1, 16, 3),
                                           (1000, 40, 64, 0)])
def test_small_kmeans_kernel_matches_numpy(cp, n, k, dim, n_iter):
    """The one-block CUDA k-means (kernels/kmeans_small.cu) draws the same seeds and ends where NumPy
    does: the same labels and counts, centres and member spreads to float32 rounding."""
    from hyperapp.models.kmeans import kmeans_small

    rng = np.random.default_rng(n + k)
    X = (rng.normal(size=(n, dim)) + 3 * rng.normal(size=(8, dim))[rng.integers(0, 8, n)]).astype(np.float32)
    a = kmeans_small(X, k, n_iter, seed=3)
    b = kmeans_small(cp.asarray(X), k, n_iter, seed=3)
    assert np.array_equal(a.labels, b.labels.get())
    assert np.array_equal(a.counts, b.counts.get())
    assert np.allclose(a.centres, b.centres.get(), rtol=1e-6, atol=1e-6)
    assert np.allclose(a.ssq, b.ssq.get(), rtol=1e-9)


@pytest.mark.parametrize("cls", [classic.ACE, classic.MatchedFilter, classic.CEM, classic.SAM, classic.SID, classic.RX])
def test_classic_detectors_agree(cp, cls):
    X, y = _data(60, 70, 32)
    a = cls().fit(X, y).decision_function(X)
    b = cls().fit(cp.asarray(X), cp.asarray(y)).decision_function(cp.asarray(X)).get()
    assert np.abs(a - b).max() <= 1e-3 * np.abs(a).max()


def test_local_rx_agrees(cp):
    X, _ = _data(40, 45, 16)
    a = classic.LocalRX(3, 9).fit(X).decision_function(X)
    b = classic.LocalRX(3, 9).fit(cp.asarray(X)).decision_function(cp.asarray(X)).get()
    assert np.abs(a - b).max() <= 1e-4 * np.abs(a).max()


def test_evaluation_on_gpu(cp):
    rng = np.random.default_rng(0)
    truth = rng.random(100000) < 0.01
    s = (rng.normal(size=100000) + 2 * truth).astype(np.float32)
    assert auc(cp.asarray(s), cp.asarray(truth)) == pytest.approx(auc(s, truth), abs=1e-9)
    assert evaluate(cp.asarray(s), cp.asarray(truth)) == pytest.approx(evaluate(s, truth))
    s[:50] = np.nan
    ex = rng.random(100000) < 0.01
    assert evaluate(cp.asarray(s), cp.asarray(truth), cp.asarray(ex)) == evaluate(s, truth, ex)


def test_evaluation_kernel_counts_as_numpy(cp):
    """kernels/evaluate.cu gives the NumPy path's numbers to the bit: float32 and float64 scores, tied
    scores (the binary searches' two sides), no data, clicked pixels left out and the truth's pixels
    looked up alone."""
    rng = np.random.default_rng(1)
    n = 300000
    truth = rng.random(n) < 0.02
    for dtype in (np.float32, np.float64):
        s = np.round(rng.normal(size=n) + 1.5 * truth, 2).astype(dtype)  # many ties
        s[rng.random(n) < 0.001] = np.nan
        ex = rng.random(n) < 0.005
        want = evaluate(s, truth, ex)
        assert evaluate(cp.asarray(s), cp.asarray(truth), cp.asarray(ex)) == want
        assert evaluate(cp.asarray(s), cp.asarray(truth), cp.asarray(ex), positives=np.flatnonzero(truth)) == want


def test_detect_pipeline_on_gpu(land_hdr):
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube, read_labels, read_mask
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr)
    t = read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))
    truth = read_mask(land_hdr.with_name("land_truth.hdr")) > 0
    g = run_detection(cube, DetectRequest("rbfn", device="gpu"), t, truth=truth)
    c = run_detection(cube, DetectRequest("rbfn", device="cpu"), t, truth=truth)
    assert g.report["device"] == "gpu"
    assert g.report["evaluation"]["auc"] == pytest.approx(c.report["evaluation"]["auc"], abs=1e-3)


def test_object_table_on_the_gpu_equals_the_host(cp):
    from hyperapp.models.postprocess import label_objects, object_table

    rng = np.random.default_rng(4)
    scores = rng.random((1000, 900)).astype(np.float32)
    mask = scores > 0.995
    mask[10:30, 10:50] = True
    lab, n = label_objects(cp.asarray(mask))
    assert n == label_objects(mask)[1]
    def drop_label(rows):
        return [{k: v for k, v in r.items() if k != "label"} for r in rows]

    assert drop_label(object_table(None, cp.asarray(scores), labels=lab, n=n)) == \
        drop_label(object_table(mask, scores))


def _same_ffbp_boxes(cp, m, X):
    g = m.detect(cp.asarray(X))
    lv = m.windows_per_level_
    c = m.detect(X)
    geom = ("row", "col", "height", "width", "level")
    assert [tuple(b[k] for k in geom) for b in g] == [tuple(b[k] for k in geom) for b in c]
    np.testing.assert_allclose([b["ann1"] for b in g], [b["ann1"] for b in c], atol=1e-4)
    assert lv == m.windows_per_level_  # the same live windows per level
    return lv


def test_ffbp_gpu_gives_the_cpu_boxes(cp):
    from hyperapp.io.samples import make_land_scene, make_sea_scene
    from hyperapp.models.ffbp import FFBP

    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102)]
    m = FFBP().fit_scenes([(cp.asarray(s.cube.astype(np.float32)), s.truth > 0) for s in train])
    for seed, size in ((998, 512), (5, 200), (11, 40)):  # 40 x 64: a tree shallower than the judged top
        _same_ffbp_boxes(cp, m, make_sea_scene(size, size + 24, seed=seed).cube.astype(np.float32))
    # a land model drops windows in the top levels, which the GPU judges before knowing they are live
    train = [make_land_scene(256, 256, seed=s) for s in (101, 102)]
    m = FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0) for s in train])
    pruned = 0
    for X in (make_land_scene(128, 128, seed=7).cube, make_land_scene(300, 260, seed=7).cube,
              make_sea_scene(300, 260, seed=7).cube):
        lv = _same_ffbp_boxes(cp, m, X.astype(np.float32))
        pruned += sum(4 ** i - n for i, n in enumerate(lv[:5]))
    assert pruned > 0  # the top-level pruning was exercised
    # 30 bands (not a multiple of 4 or 8: the scalar statistics kernel, masked scan lanes) and the
    # mean + std features
    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102)]
    m = FFBP(features="meanstd").fit_scenes([(s.cube[..., :30].astype(np.float32), s.truth > 0) for s in train])
    _same_ffbp_boxes(cp, m, make_sea_scene(300, 260, seed=7).cube[..., :30].astype(np.float32))


def test_ffbp_graph_and_eager_searches_agree(cp):
    from hyperapp.io.samples import make_sea_scene
    from hyperapp.models.ffbp import FFBP
    from hyperapp.models.ffbp_gpu import search_gpu, search_gpu_graph

    s = make_sea_scene(256, 256, seed=101)
    m = FFBP().fit_scenes([(s.cube.astype(np.float32), s.truth > 0)])
    # the returned boxes are views into the search's buffers: read each result before the next search
    key = lambda r: (sorted(map(tuple, cp.asnumpy(r[0]).tolist())), r[3])  # noqa: E731
    found = 0
    for shape in ((300, 260), (1000, 24), (24, 40)):
        X = cp.asarray(make_sea_scene(*shape, seed=7).cube.astype(np.float32))
        a = key(search_gpu(m, X))
        p = key(search_gpu(m, X, persistent=True))
        b = key(search_gpu_graph(m, X))
        c = key(search_gpu_graph(m, X))  # a replay
        assert a == p == b == c, shape
        found += len(a[0])
    assert found > 0


def test_cube_larger_than_gpu_memory_is_scored_in_tiles(land_hdr, monkeypatch):
    import hyperapp.detect.budget as budget
    import hyperapp.detect.run as det
    from hyperapp.io import open_cube, read_labels
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr)
    t = read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))
    whole = det.run_detection(cube, DetectRequest("rbfn", device="gpu"), t)
    monkeypatch.setattr(budget, "GPU_FRACTION", 1e-9)  # pretend the GPU is almost full
    tiled = det.run_detection(cube, DetectRequest("rbfn", device="gpu"), t)
    assert tiled.report["streamed"] and not whole.report["streamed"]
    np.testing.assert_allclose(tiled.scores, whole.scores, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("n, features, epochs", [(3000, 65, 40), (2000, 570, 20), (1500, 224, 10)])
def test_mlp_training_kernel_matches_numpy_training(cp, n, features, epochs):
    """Same mini-batches (host RNG), same Adam: the one-launch GPU training ends where NumPy's does. 570
    features (a 285-band cube's windows) do not fit in shared memory beside a 256-window batch: the kernel
    then reads the batch's rows from global memory (it fell back to a Python loop of CuPy operations, 2-3 s
    an FFBP click, compiling kernels on its first run). 224 features need just under 48 KB of dynamic shared
    memory, over 48 KB with the kernel's static part: the launch failed without the opt-in (a 224-band cube's
    FFBP, ``kernels.allow_shared``)."""
    from hyperapp.models import mlp
    from hyperapp.models.mlp import TansigMLP

    staged = mlp._gpu_smem(features, 16, 256, staged=True) <= mlp.GPU_SMEM_LIMIT
    assert mlp._gpu_trainable(features, 16, 256) and staged == (features < 100)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (n, features)).astype(np.float32)
    y = (X[:, :5].sum(axis=1) + 0.3 * rng.normal(size=n)) > 0.8
    a = TansigMLP(16, epochs=epochs, seed=3).fit(X, y)
    b = TansigMLP(16, epochs=epochs, seed=3).fit(cp.asarray(X), cp.asarray(y))
    assert a.epochs_run_ == b.epochs_run_
    pa, pb = a.forward(X), b.forward(cp.asarray(X)).get()
    assert np.abs(pa - pb).max() < 2e-2
    assert abs(a.val_loss_ - b.val_loss_) < 1e-2 * max(a.val_loss_, 1e-3)


def test_ffbp_trained_on_the_gpu_finds_every_sea_target(cp):
    from hyperapp.io.samples import make_sea_scene
    from hyperapp.models.ffbp import FFBP, box_recall, component_boxes

    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    m = FFBP().fit_scenes([(cp.asarray(s.cube.astype(np.float32)), s.truth > 0) for s in train])
    test = make_sea_scene(512, 512, seed=998)
    boxes = m.detect(cp.asarray(test.cube.astype(np.float32)))
    P = np.array([[b["row"], b["col"], b["row"] + b["height"], b["col"] + b["width"]] for b in boxes])
    recall, false = box_recall(P, test.truth > 0)
    assert recall == 1.0 and false < len(component_boxes(test.truth > 0))


def test_default_threshold_rules_agree_on_both_backends(cp):
    """far_threshold on CuPy scores: the same rule and threshold as on NumPy, for a separate target
    mode, for targets inside an exponential tail (the tail fit) and without clicks (the quantile)."""
    from hyperapp.models.evaluation import far_threshold

    rng = np.random.default_rng(0)
    bg = rng.exponential(1.0, 50_000).astype(np.float32)
    cases = ((rng.normal(40.0, 1.0, 300), True, "target mode split"),
             (rng.normal(6.0, 2.0, 250), True, "exponential tail"), (None, False, "quantile"))
    for tg, sep, rule in cases:
        s = bg if tg is None else np.concatenate([bg, tg.astype(np.float32)])
        a = far_threshold(s, 1e-3, separate_targets=sep)
        b = far_threshold(cp.asarray(s), 1e-3, separate_targets=sep)
        assert a[2] == rule and b[1:] == a[1:] and b[0] == pytest.approx(a[0], rel=1e-6)


@pytest.mark.parametrize("method", ["rbfn", "ace", "mf", "cem", "sam", "rx"])
def test_click_to_result_cpu_and_gpu_agree(cp, method):
    """The live path on both backends: the same scores to float32's reach, the same mask but for
    pixels whose scores tie with the threshold within rounding, and the same object count to one.

    Measured on an H100: SAM agrees to 4e-7, ACE and the RBFN to 2.6e-4 of the score range (their
    covariance is inverted, which magnifies float32 rounding by its condition number); masks differ
    in at most one pixel of 65,536 (SAM, where scores crowd near 1 at the threshold)."""
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.io.samples import make_land_scene
    from hyperapp.request import DetectRequest

    # a scene with a realistic (non-degenerate) background spectrum: with isotropic noise the PCA
    # whitening would pick among equal eigenvalues, differently on each backend
    s = make_land_scene(256, 256, 48, seed=3)
    X = s.cube.astype(np.float32) / 10000.0
    truth = s.truth > 0
    clicks = np.zeros_like(truth)
    clicks[tuple(s.clicks.T)] = True
    cube = cube_from_array(X, "agree")
    a = run_detection(cube, DetectRequest(method, device="cpu"), clicks, truth=truth, image=X)
    b = run_detection(cube, DetectRequest(method, device="gpu"), clicks, truth=truth, image=cp.asarray(X))
    scale = float(np.abs(a.scores).max())
    np.testing.assert_allclose(b.scores, a.scores, rtol=0, atol=1e-3 * scale)
    assert int((b.mask != a.mask).sum()) <= 2
    assert abs(b.report["objects"] - a.report["objects"]) <= 1 and a.report["objects"] == len(a.objects)
    assert b.report["evaluation"]["auc"] == pytest.approx(a.report["evaluation"]["auc"], abs=1e-4)
    assert set(b.report["seconds"]) >= {"fit", "score", "threshold", "objects", "copy", "evaluate"}


def test_reader_converts_on_the_gpu(cp, tmp_path):
    """Raw tiles of every interleave, type and byte order, converted on the device: the same float32
    pixels as the CPU reader, no-data pixels NaN."""
    import spectral.io.envi as envi

    from hyperapp.io import open_cube
    from hyperapp.reading.tiles import read_float32

    rng = np.random.default_rng(0)
    for il in ("bil", "bsq", "bip"):
        for dt, order in ((np.int16, 1), (np.uint16, 0), (np.float32, 1), (np.float64, 0)):
            data = (rng.random((70, 41, 13)) * 3000 + 10).astype(dt)
            data[50, 3, 7] = 5
            hdr = tmp_path / f"c{il}{np.dtype(dt).name}{order}.hdr"
            envi.save_image(str(hdr), data, dtype=dt, interleave=il, byteorder=order, force=True,
                            metadata={"data ignore value": 5, "bbl": [1] * 12 + [0]})
            cube = open_cube(hdr).good_bands()
            ref = read_float32(cube, tile_bytes=9 * 41 * 13 * 8)
            for helper in (False, True):  # read here, and by the reading helper into its pinned ring
                got = read_float32(cube, cp, tile_bytes=9 * 41 * 13 * 8, helper=helper).get()
                np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
                np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(ref))
                assert np.isnan(got[50, 3]).all()
            assert read_float32(cube, cp).shape == (70, 41, 12)
    from hyperapp.reading import reader_process
    from hyperapp.reading.tiles import TileReader

    # a reader chained to the next cube's (a batch's read stage): the second reads into its own pinned ring
    # while the first one's last tiles go to the device
    first, second = (TileReader(cube, 9 * 41 * 13 * 8, pinned=True, helper=True) for _ in range(2))
    first.then(second)
    a = read_float32(cube, cp, reader=first).get()
    b = read_float32(cube, cp, reader=second).get()
    np.testing.assert_array_equal(np.nan_to_num(a), np.nan_to_num(ref))
    np.testing.assert_array_equal(np.nan_to_num(b), np.nan_to_num(ref))
    # the helpers copied the tiles to the GPU themselves, into rings on the device
    assert not reader_process.available() or all(h.device == 0 and not h._pinned for h in reader_process._HELPERS)


def test_the_reading_helper_copies_to_the_gpu_or_into_page_locked_memory(cp, tmp_path, monkeypatch):
    """A helper for a GPU reader copies the tiles to the device itself (its ring there), in pieces smaller
    than a tile; ``HYPERAPP_READ_TO_GPU=0`` keeps the ring in page-locked host memory; both give the
    pixels read here, and a file cut short is the cube's one line either way."""
    import spectral.io.envi as envi

    from hyperapp.core.errors import CubeFormatError
    from hyperapp.io import open_cube
    from hyperapp.reading import reader_process
    from hyperapp.reading.tiles import TileReader, read_float32

    if not reader_process.available():
        pytest.skip("no reading helper here")
    monkeypatch.setattr(reader_process, "GPU_PIECE_BYTES", 4096)  # several pieces a tile and thread
    data = np.random.default_rng(1).random((90, 37, 11)).astype(np.float32)
    envi.save_image(str(tmp_path / "c.hdr"), data, interleave="bil", force=True)
    cube = open_cube(tmp_path / "c.hdr")
    tile = 10 * 37 * 11 * 4
    for to_gpu in ("1", "0"):
        monkeypatch.setenv("HYPERAPP_READ_TO_GPU", to_gpu)
        for h in list(reader_process._HELPERS):  # helpers of the other kind go when free
            assert h.lease()
            h.release()
        reader = TileReader(cube, tile, pinned=True, helper=True, ring=6)
        np.testing.assert_array_equal(read_float32(cube, cp, reader=reader).get(), data)
        held = [h for h in reader_process._HELPERS if h.slots == 6]
        assert held and all((h.device is not None) == (to_gpu == "1") for h in held)
        assert all(isinstance(h.slot(0), cp.ndarray) == (to_gpu == "1") for h in held)
        envi.save_image(str(tmp_path / f"cut{to_gpu}.hdr"), data, interleave="bil", force=True)
        cut = open_cube(tmp_path / f"cut{to_gpu}.hdr")
        reader = TileReader(cut, tile, pinned=True, helper=True, ring=6)
        with open(tmp_path / f"cut{to_gpu}.img", "r+b") as fh:
            fh.truncate(45 * 37 * 11 * 4 + 100)
        with pytest.raises(CubeFormatError, match="ended early"):
            read_float32(cut, cp, reader=reader)


@pytest.mark.parametrize("method", ["sam", "ace", "rx", "cem", "rbfn", "mtmf"])
def test_streamed_gpu_equals_in_memory(cp, land_hdr, method, monkeypatch):
    import hyperapp.reading.tiles as stream
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    monkeypatch.setattr(stream, "TILE_BYTES", 9 * 128 * 64 * 2)
    cube = open_cube(land_hdr).good_bands()
    t = read_labels(land_hdr.with_name("land_targets.csv"), (cube.rows, cube.cols)) > 0
    mem = run_detection(cube, DetectRequest(method, device="gpu"), t)
    st = run_detection(cube, DetectRequest(method, device="gpu", memory=1e-4), t)
    cpu = run_detection(cube, DetectRequest(method, device="cpu", memory=1e-4), t)
    assert st.report["streamed"] and st.report["device"] == "gpu"
    scale = float(np.nanmax(np.abs(cpu.scores)))
    np.testing.assert_allclose(st.scores, mem.scores, atol=1e-3 * scale)
    np.testing.assert_allclose(st.scores, cpu.scores, atol=1e-3 * scale)


@pytest.mark.parametrize("method", ["rbfn", "ace"])
def test_fresh_gpu_process_gives_the_in_process_scores(cp, land_hdr, tmp_path, method):
    """``hyperapp --headless detect`` in a fresh process (the CUDA driver started beside CuPy's
    import, the cube read while cuBLAS loads) writes the scores an in-process GPU run gives, and
    never imports ``cupyx.scipy.special`` (an array-scalar operator would, through CuPy 14's
    ``__array_ufunc__``, and cost a fresh process 0.3-0.4 s: hyperapp.core.backend, scalar operators)."""
    import subprocess
    import sys

    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube, read_labels
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr)
    targets = land_hdr.with_name("land_targets.csv")
    want = run_detection(cube, DetectRequest(method, device="gpu"), read_labels(targets, (128, 128)))
    script = (
        "import sys\n"
        "from hyperapp.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print('SPECIAL', 'cupyx.scipy.special' in sys.modules)\n"
        "sys.exit(code)\n"
    )
    r = subprocess.run([sys.executable, "-c", script, "--headless", "detect", str(land_hdr), "--method",
                        method, "--targets", str(targets), "--device", "gpu", "--out", str(tmp_path / "o")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "SPECIAL False" in r.stdout, r.stdout[-2000:]
    got = np.fromfile(tmp_path / "o" / "scores.img", np.float32).reshape(128, 128)
    np.testing.assert_allclose(got, want.scores, rtol=1e-5, atol=1e-6)


def _serpentine(rows, cols):
    """One object winding through the whole image (every other row, joined at alternate ends): the
    longest chains of unions a mask of this size can ask for."""
    m = np.zeros((rows, cols), bool)
    m[::2] = True
    for r in range(1, rows, 2):
        m[r, cols - 1 if (r // 2) % 2 == 0 else 0] = True
    return m


@pytest.mark.parametrize("shape", [(1, 1), (1, 97), (97, 1), (257, 129), (1024, 1024)])
@pytest.mark.parametrize("density", [0.0, 0.05, 0.45, 0.6, 1.0, "serpentine"])
def test_gpu_labels_equal_scipy(cp, shape, density):
    """kernels/label.cu gives scipy.ndimage.label's 8-connected labels, numbering included, from
    scattered specks through percolating clusters to one winding object."""
    from scipy import ndimage

    from hyperapp.models.postprocess import EIGHT, label_objects

    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    m = _serpentine(*shape) if density == "serpentine" else rng.random(shape) < density
    want, n_want = ndimage.label(m, structure=EIGHT)
    got, n_got = label_objects(cp.asarray(m))
    assert n_got == n_want
    np.testing.assert_array_equal(cp.asnumpy(got), want)


def test_arrays_reach_the_host_together_exactly(cp):
    """kernels/pack.cu: every element type, non-contiguous views, empty arrays and more arrays than one
    launch takes come back in one copy as the device holds them (floats as float64, integers exact)."""
    from hyperapp.kernels.pack import to_host_numbers, to_host_together

    rng = np.random.default_rng(3)
    host = [rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=7), np.arange(-4, 4, dtype=np.int8),
            np.arange(250, 256, dtype=np.uint8), np.array([-30000, 30000], np.int16),
            np.array([65535], np.uint16), np.array([-2**31, 2**31 - 1], np.int32), np.array([2**32 - 1], np.uint32),
            np.array([-2**62, 2**62 + 1], np.int64), np.array([2**63 + 5], np.uint64),
            rng.random((4, 4)) > 0.5, np.zeros(0, np.float32), np.float64(2.5)]
    dev = [cp.asarray(a) for a in host]
    dev.append(cp.asarray(rng.normal(size=(6, 8)).astype(np.float32))[:, ::3])  # a strided view
    host.append(dev[-1].get())
    got = to_host_together(dev, None)
    for h, g in zip(host, got):
        assert g.shape == np.shape(h)
        assert np.array_equal(g, np.asarray(h).astype(np.float64 if np.asarray(h).dtype.kind == "f" else g.dtype))
    assert got[8].tolist() == [-2**62, 2**62 + 1] and got[9].dtype == np.uint64
    assert to_host_together(dev[:2], np.float32)[0].dtype == np.float32
    assert to_host_numbers([cp.asarray(3, cp.int64), cp.asarray([1.5, 2.5]), 7]) == [3, 1.5, 2.5, 7]
