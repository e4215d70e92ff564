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


def _rbfn_case(ctx, name, rows, cols, bands, hidden, **kw) -> Measurement:
    import cupy

    from hyperapp.models.rbfn import RBFN

    X = _cube(rows, cols, bands)
    y = _labels(rows, cols)
    Xd = cupy.asarray(X)
    yd = cupy.asarray(y)
    m_gpu = RBFN(n_hidden=hidden, **kw).fit(Xd, yd)
    m_cpu = m_gpu.to_host()
    P = Xd.reshape(-1, bands)
    fused = m_gpu.decision_function(P)
    ref = m_cpu.decision_function(X.reshape(-1, bands))
    err = float(np.abs(fused.get() - ref).max() / max(np.abs(ref).max(), 1e-30))
    assert err < 1e-4, f"fused kernel disagrees with NumPy: {err:.2e}"
    gpu = gpu_time_ms(lambda: m_gpu.decision_function(P), ctx.repeats)
    from hyperapp.models.rbfn_gpu import default_variant, score_fused

    variants = {}
    if not m_gpu.diagonal_ and bands % 4 == 0:
        for v in ("staged", "direct"):
            out = score_fused(m_gpu, P, v)
            assert float(cupy.abs(out - fused).max()) <= 1e-4 * float(cupy.abs(fused).max())
            variants[v] = f"{gpu_time_ms(lambda v=v: score_fused(m_gpu, P, v), ctx.repeats):.4f}ms"
    peer = gpu_time_ms(lambda: m_gpu._score_reference(P), max(3, ctx.repeats // 4))
    cpu = cpu_time_ms(lambda: m_cpu.decision_function(X.reshape(-1, bands)), repeats=1)
    return Measurement(name, gpu, cpu, "cupy-gemm", peer, bytes_moved=X.nbytes + rows * cols * 4,
                       notes={"max_rel_err": f"{err:.1e}", "whiten": m_gpu.whiten,
                              "kernel": default_variant(m_gpu), **variants})


@bench_case("rbfn-1024x1024x64-h4")
def rbfn_h4(ctx):
    """RBFN scoring, 1024x1024x64, 4 hidden neurons, default whitening (PCA 16 + norm), fused kernel."""
    return _rbfn_case(ctx, "rbfn-1024x1024x64-h4", 1024, 1024, 64, 4)


@bench_case("rbfn-1024x1024x64-h4-std")
def rbfn_h4_std(ctx):
    """RBFN scoring as the thesis (per-band scaling, no projection), 1024x1024x64, 4 neurons."""
    return _rbfn_case(ctx, "rbfn-1024x1024x64-h4-std", 1024, 1024, 64, 4, whiten="std", normalize=False)


@bench_case("rbfn-1024x1024x200-h32")
def rbfn_h32(ctx):
    """RBFN scoring, 1024x1024x200, 32 hidden neurons (target: within 2x of the read floor)."""
    return _rbfn_case(ctx, "rbfn-1024x1024x200-h32", 1024, 1024, 200, 32)


@bench_case("rbfn-train-1024x1024x64-5clicks")
def rbfn_train(ctx):
    """RBFN training from 5 clicks on a 1024x1024x64 cube (target: under 200 ms)."""
    import time

    import cupy

    from hyperapp.models.rbfn import RBFN

    X = _cube(1024, 1024, 64)
    y = _labels(1024, 1024)
    Xd, yd = cupy.asarray(X), cupy.asarray(y)

    def fit_gpu():
        RBFN().fit(Xd, yd)
        cupy.cuda.get_current_stream().synchronize()

    fit_gpu()
    times = []
    for _ in range(max(3, ctx.repeats // 4)):
        t0 = time.perf_counter()
        fit_gpu()
        times.append((time.perf_counter() - t0) * 1e3)
    gpu = float(np.median(times))
    cpu = cpu_time_ms(lambda: RBFN().fit(X, y), repeats=1)
    return Measurement("rbfn-train-1024x1024x64-5clicks", gpu, cpu, notes={"timer": "wall, synchronised"})


@bench_case("ace-1024x1024x64")
def ace_case(ctx):
    """ACE scoring (one cuBLAS GEMM + row reductions) vs NumPy and spectral.ace."""
    import cupy
    import spectral

    from hyperapp.models.classic import ACE

    X = _cube(1024, 1024, 64)
    y = _labels(1024, 1024)
    Xd = cupy.asarray(X)
    m_gpu = ACE().fit(Xd, cupy.asarray(y))
    m_cpu = ACE().fit(X, y)
    np.testing.assert_allclose(m_gpu.decision_function(Xd).get(), m_cpu.decision_function(X), atol=1e-4)
    gpu = gpu_time_ms(lambda: m_gpu.decision_function(Xd), ctx.repeats)
    cpu = cpu_time_ms(lambda: m_cpu.decision_function(X), repeats=1)
    t = X[y == 1].mean(axis=0)
    bg = spectral.calc_stats(X)
    peer = cpu_time_ms(lambda: spectral.ace(X, t, bg), repeats=1)
    return Measurement("ace-1024x1024x64", gpu, cpu, "spectral.ace", peer, bytes_moved=X.nbytes + X.nbytes / 64)


def _ffbp_setup(xp):
    from hyperapp.io.samples import make_sea_scene
    from hyperapp.models.ffbp import FFBP

    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    scenes = [(xp.asarray(s.cube.astype(np.float32)), s.truth > 0) for s in train]
    return FFBP, scenes


@bench_case("ffbp-search-1024x1024x64")
def ffbp_search(ctx):
    """FFBP window search on a 1024x1024x64 sea scene on the GPU (block statistics included)."""
    import cupy

    from hyperapp.io.samples import make_sea_scene
    from hyperapp.models.ffbp import WindowStats, box_recall
    from hyperapp.models.ffbp_gpu import search_gpu, search_gpu_graph

    FFBP, scenes = _ffbp_setup(cupy)
    m = FFBP().fit_scenes(scenes)
    test = make_sea_scene(1024, 1024, seed=998)
    X = test.cube.astype(np.float32)
    Xd = cupy.asarray(X)
    gpu_boxes = m.detect(Xd)
    cpu_boxes = m.detect(X)
    geom = ("row", "col", "height", "width", "level")
    same = [tuple(b[k] for k in geom) for b in gpu_boxes] == [tuple(b[k] for k in geom) for b in cpu_boxes]
    P = np.array([[b["row"], b["col"], b["row"] + b["height"], b["col"] + b["width"]] for b in gpu_boxes]).reshape(-1, 4)
    recall, false = box_recall(P, test.truth > 0)
    gpu = gpu_time_ms(lambda: search_gpu_graph(m, Xd), ctx.repeats)
    eager = gpu_time_ms(lambda: search_gpu(m, Xd), max(3, ctx.repeats // 4))
    persistent = gpu_time_ms(lambda: search_gpu(m, Xd, persistent=True), max(3, ctx.repeats // 4))
    import hyperapp.models.ffbp_gpu as fg

    per_sm = {}
    default = fg.PERSISTENT_BLOCKS_PER_SM
    for k in (1, 2, 3, 4):  # the persistent grid's size: barrier cost against warps per level
        fg.PERSISTENT_BLOCKS_PER_SM = k
        if fg.blocks_per_sm(m) < k:
            break  # no more blocks fit on an SM
        m.__dict__.get("_gpu_cache", {}).clear()
        per_sm[f"graph_{k}_blocks_per_sm"] = f"{gpu_time_ms(lambda: search_gpu_graph(m, Xd), ctx.repeats):.4f}"
    fg.PERSISTENT_BLOCKS_PER_SM = default
    m.__dict__.get("_gpu_cache", {}).clear()
    cpu = cpu_time_ms(lambda: m._search(WindowStats(X, m.min_window), np), repeats=1)
    return Measurement("ffbp-search-1024x1024x64", gpu, cpu, "per-level launches, eager", eager,
                       bytes_moved=X.nbytes,
                       notes={"windows_per_level": "/".join(map(str, m.windows_per_level_)),
                              "persistent_eager_ms": f"{persistent:.4f}", **per_sm,
                              "boxes": len(gpu_boxes), "recall": recall, "false_boxes": false,
                              "cpu_gpu_same_boxes": same})


@bench_case("ffbp-train-4x256x256x64")
def ffbp_train(ctx):
    """FFBP training (both networks, back-propagation on the GPU) on four 256x256x64 sea scenes."""
    import time

    import cupy

    FFBP, scenes = _ffbp_setup(cupy)
    FFBP().fit_scenes(scenes)
    t0 = time.perf_counter()
    m = FFBP().fit_scenes(scenes)
    cupy.cuda.get_current_stream().synchronize()
    gpu = (time.perf_counter() - t0) * 1e3
    _, host = _ffbp_setup(np)
    cpu = cpu_time_ms(lambda: FFBP().fit_scenes(host), repeats=1, warmup=0)
    return Measurement("ffbp-train-4x256x256x64", gpu, cpu,
                       notes={"epochs": f"{m.ann1_.epochs_run_}/{m.ann2_.epochs_run_}", "timer": "wall"})


# ---------------------------------------------------------------------------------------------- analysis
def _spectra(n, bands, classes=8, seed=3, brightness=0.15, noise=0.02):
    """n spectra of ``classes`` materials with within-class variation (brightness +-``brightness``) and
    noise (a 512 x 512 scene)."""
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.05, 0.6, size=(classes, bands)).astype(np.float32)
    lab = rng.integers(0, classes, n)
    X = ends[lab] * rng.uniform(1 - brightness, 1 + brightness, (n, 1)).astype(np.float32)
    return X + rng.normal(0, noise, (n, bands)).astype(np.float32), lab


@bench_case("kmeans-multik-262144x128-k2..16")
def kmeans_multik(ctx) -> Measurement:
    """Every k in 2..16 (4 restarts each) on 262,144 spectra x 128 bands, vs NumPy, scikit-learn and a
    plain CuPy k-means per k."""
    import cupy

    from hyperapp.models.kmeans import MultiKMeans, kmeans

    X, _ = _spectra(262144, 128)
    Xd = cupy.asarray(X)
    MultiKMeans(k="2..16").fit(Xd)  # compile
    m = MultiKMeans(k="2..16").fit(Xd)
    gpu = gpu_time_ms(lambda: MultiKMeans(k="2..16").fit(Xd), max(3, ctx.repeats // 5), warmup=1)

    def plain():  # the plain CuPy formulation: one k-means per k and restart, GEMM distances
        for k in range(2, 17):
            for r in range(4):
                kmeans(Xd, k, n_iter=m.n_iter_, seed=r)

    peer = gpu_time_ms(plain, 1, warmup=1)
    notes = {"iterations": m.n_iter_, "chosen_k": m.chosen_k_}
    sub = X[:32768]  # NumPy and scikit-learn on an eighth of the spectra, scaled by 8 (both are linear in n)
    cpu = cpu_time_ms(lambda: MultiKMeans(k="2..16").fit(sub), repeats=1, warmup=0) * 8
    try:
        from sklearn.cluster import KMeans

        def sk():
            for k in range(2, 17):
                KMeans(k, n_init=4, random_state=0).fit(sub)

        skl = cpu_time_ms(sk, repeats=1, warmup=0) * 8
        ref = [KMeans(k, n_init=4, random_state=0).fit(X).inertia_ for k in (4, 8)]
        notes["inertia_vs_sklearn_k4_k8"] = [round(float(m.inertia_[k - 2] / r), 5) for k, r in zip((4, 8), ref)]
        notes["sklearn_ms_estimated"] = round(skl, 1)
    except ImportError:
        pass
    notes["plain_cupy_ms"] = round(peer, 2)
    per_iter_bytes = X.nbytes * 2  # each Lloyd iteration reads the spectra twice (distances, sums)
    return Measurement("kmeans-multik-262144x128-k2..16", gpu, cpu, "cupy per-k k-means", peer,
                       bytes_moved=per_iter_bytes * (m.n_iter_ + 1), notes=notes)


@bench_case("band-subsets-10000x3-k8")
def band_subsets(ctx) -> Measurement:
    """10,000 random 3-band subsets, an 8-means each, on 262,144 spectra x 128 bands (one launch)."""
    import cupy

    from hyperapp.models.band_selection import BandSubsetSearch

    X, lab = _spectra(262144, 128)
    Xd = cupy.asarray(X)
    y = np.where(np.arange(lab.size) % 10 == 0, lab, -1)  # a tenth of the spectra labelled
    BandSubsetSearch(n_subsets=50).fit(Xd, y)  # compile
    gpu = gpu_time_ms(lambda: BandSubsetSearch(n_subsets=10000).fit(Xd, y), 3, warmup=1)
    m = BandSubsetSearch(n_subsets=10000).fit(Xd, y)
    cpu = cpu_time_ms(lambda: BandSubsetSearch(n_subsets=40).fit(X[:65536], y[:65536]), repeats=1, warmup=0) \
        * 250 * 4  # NumPy on 40 subsets of a quarter of the spectra, scaled
    iters = float(np.mean(m.iters_))
    return Measurement("band-subsets-10000x3-k8", gpu, cpu, None, None,
                       bytes_moved=10000 * 3 * X.shape[0] * 4 * (iters + 1),
                       notes={"mean_iterations": round(iters, 1), "best_score": round(float(m.best_scores_[0]), 4)})


@bench_case("som-262144x128-32x32-10epochs")
def som_case(ctx) -> list[Measurement]:
    """Batch SOM, 32 x 32 (and 64 x 64) neurons, 10 epochs, 262,144 spectra x 128 bands."""
    import cupy

    from hyperapp.models.som import SOM

    X, _ = _spectra(262144, 128)
    Xd = cupy.asarray(X)
    out = []
    for side in (32, 64):
        SOM(side, side, epochs=1).fit(Xd[:4096])  # compile
        gpu = gpu_time_ms(lambda side=side: SOM(side, side, epochs=10).fit(Xd), 3, warmup=1)
        m = SOM(side, side, epochs=10).fit(Xd)
        cpu = None
        if side == 32:  # NumPy on an eighth of the spectra, scaled by 8 (linear in n)
            cpu = cpu_time_ms(lambda: SOM(32, 32, epochs=10).fit(X[:32768]), repeats=1, warmup=0) * 8
        out.append(Measurement(f"som-262144x128-{side}x{side}-10epochs", gpu, cpu, None, None,
                               bytes_moved=X.nbytes * 2 * 10,
                               notes={"final_qe": round(float(m.quantization_error_[-1]), 4),
                                      "final_te": round(float(m.topographic_error_[-1]), 4)}))
    return out


@bench_case("gmm-262144x128-k8-full-100it")
def gmm_case(ctx) -> Measurement:
    """EM, 8 full-covariance components, 100 iterations, 3 starts (em-EM: 3 short runs, the best goes on
    to 100), 262,144 spectra x 128 bands, vs NumPy and scikit-learn on an eighth of the spectra, scaled:
    NumPy's 3 starts of 10 iterations (every start to the end: ``start_iter`` 10 = ``max_iter``) times
    the EM iterations the GPU fit ran over 30, scikit-learn's 3 starts of 10 iterations times 10 (its
    n_init runs every start to the end)."""
    import cupy

    from hyperapp.models.gmm import GaussianMixtureEM

    X, _ = _spectra(262144, 128)
    Xd = cupy.asarray(X)
    GaussianMixtureEM(k=8, max_iter=2, tol=0).fit(Xd[:8192])  # compile
    gpu = gpu_time_ms(lambda: GaussianMixtureEM(k=8, max_iter=100, tol=0.0).fit(Xd), 2, warmup=1)
    m = GaussianMixtureEM(k=8, max_iter=100, tol=0.0).fit(Xd)
    sub = X[:32768]
    its = int(sum(m.start_iterations_) + m.n_iter_ - m.start_iterations_[m.best_start_])  # EM iterations run
    cpu = cpu_time_ms(lambda: GaussianMixtureEM(k=8, max_iter=10, start_iter=10, tol=0.0).fit(sub), repeats=1,
                      warmup=0) * 8 * its / 30
    notes = {"iterations": m.n_iter_, "em_iterations_run": its, "short_runs": [int(v) for v in m.start_iterations_],
             "avg_loglik": round(float(m.log_likelihood_[0]), 4)}
    peer = None
    try:
        from sklearn.mixture import GaussianMixture

        peer = cpu_time_ms(lambda: GaussianMixture(8, covariance_type="full", max_iter=10, tol=0, n_init=3,
                                                   random_state=0).fit(sub), repeats=1, warmup=0) * 8 * 10
    except ImportError:
        pass
    return Measurement("gmm-262144x128-k8-full-100it", gpu, cpu, "scikit-learn (est.)", peer,
                       bytes_moved=X.nbytes * 4 * 100, notes=notes)


# ------------------------------------------------------------------ forest and HAC
@bench_case("forest-262144x128-depth12")
def forest_case(ctx) -> list[Measurement]:
    """One CART tree and a 100-tree random forest of depth 12 on 262,144 spectra x 128 bands (8
    overlapping classes), vs the NumPy path and scikit-learn (both on 1/16 of the spectra, scaled by 16:
    tree building is about linear in the spectra at a fixed depth)."""
    import cupy

    from hyperapp.models.forest import RandomForest, cart

    # enough noise that the classes overlap, so a tree grows to its full depth (a clean problem is pure
    # after a few levels and measures nothing)
    X, y = _spectra(262144 + 20000, 128, brightness=0.3, noise=0.5)
    X, Xt, y, yt = X[:262144], X[262144:], y[:262144], y[262144:]  # test spectra of the same materials
    Xd = cupy.asarray(X)
    sub, ysub = X[:16384], y[:16384]
    out = []
    cart(max_depth=3, test_fraction=0).fit(Xd[:4096], y[:4096])  # compile
    RandomForest(n_trees=2, max_depth=3, test_fraction=0).fit(Xd[:4096], y[:4096])
    for name, make, sk in (
        ("cart-262144x128-depth12", lambda: cart(max_depth=12, test_fraction=0),
         "DecisionTreeClassifier"),
        ("forest100-262144x128-depth12", lambda: RandomForest(n_trees=100, max_depth=12, test_fraction=0),
         "RandomForestClassifier"),
    ):
        gpu = gpu_time_ms(lambda make=make: make().fit(Xd, y), 3, warmup=0)
        m = make().fit(Xd, y)
        acc = float((cupy.asnumpy(m.predict(cupy.asarray(Xt))) == yt).mean())
        if name.startswith("cart"):
            cpu = cpu_time_ms(lambda: cart(max_depth=12, test_fraction=0).fit(sub, ysub), repeats=1, warmup=0) * 16
        else:  # NumPy: 10 trees on 1/16 of the spectra, scaled by 16 x 10
            cpu = cpu_time_ms(lambda: RandomForest(n_trees=10, max_depth=12, test_fraction=0).fit(sub, ysub),
                              repeats=1, warmup=0) * 160
        notes = {"accuracy": round(acc, 4), "depth": m.depth_, "leaves": m.n_leaves_}
        peer = None
        try:
            from sklearn.ensemble import RandomForestClassifier
            from sklearn.tree import DecisionTreeClassifier

            est = (DecisionTreeClassifier(max_depth=12, random_state=0) if name.startswith("cart")
                   else RandomForestClassifier(100, max_depth=12, random_state=0, n_jobs=-1))
            peer = cpu_time_ms(lambda est=est: est.fit(sub, ysub), repeats=1, warmup=0) * 16
            # accuracy on the same test spectra, both trained on the subset
            mine = (cart(max_depth=12, test_fraction=0) if name.startswith("cart")
                    else RandomForest(n_trees=100, max_depth=12, test_fraction=0)).fit(cupy.asarray(sub), ysub)
            notes["accuracy_1/16"] = round(float((cupy.asnumpy(mine.predict(cupy.asarray(Xt))) == yt).mean()), 4)
            notes["sklearn_accuracy_1/16"] = round(float(est.score(Xt, yt)), 4)
        except ImportError:
            pass
        levels = m.depth_ + 1
        out.append(Measurement(name, gpu, cpu, f"scikit-learn {sk} (est., 1/16 x 16)", peer,
                               bytes_moved=X.shape[0] * 128 * levels, notes=notes))
    return out


@bench_case("hac-ward-20000x128")
def hac_case(ctx) -> Measurement:
    """Ward clustering of 20,000 spectra x 128 bands (distance matrix + every merge), vs the NumPy path
    and scikit-learn's AgglomerativeClustering (both on 5,000 spectra, scaled by 16: quadratic in n)."""
    import cupy

    from hyperapp.models.hac import HierarchicalClustering

    X, _ = _spectra(20000, 128)
    Xd = cupy.asarray(X)
    HierarchicalClustering().fit(Xd[:500])  # compile
    gpu = gpu_time_ms(lambda: HierarchicalClustering("ward").fit(Xd), 3, warmup=0)
    sub = X[:5000]
    ref = HierarchicalClustering("ward").fit(sub).linkage_
    got = HierarchicalClustering("ward").fit(cupy.asarray(sub)).linkage_
    notes = {"same_merges_as_numpy_5000": bool((ref[:, :2] == got[:, :2]).all()),
             "max_rel_height_diff": float(np.max(np.abs(ref[:, 2] - got[:, 2]) / np.maximum(ref[:, 2], 1e-30)))}
    cpu = cpu_time_ms(lambda: HierarchicalClustering("ward").fit(sub), repeats=1, warmup=0) * 16
    peer = None
    try:
        from sklearn.cluster import AgglomerativeClustering

        peer = cpu_time_ms(lambda: AgglomerativeClustering(8, linkage="ward").fit(sub), repeats=1, warmup=0) * 16
        from scipy.cluster.hierarchy import linkage

        notes["scipy_ward_5000_ms"] = round(cpu_time_ms(lambda: linkage(sub, "ward"), repeats=1, warmup=0), 1)
    except ImportError:
        pass
    n = X.shape[0]
    # every merge reads at least its merged rows; the matrix is written once and read once to start
    return Measurement("hac-ward-20000x128", gpu, cpu, "scikit-learn AgglomerativeClustering (est., 5000 x 16)",
                       peer, bytes_moved=2 * n * n * 8, notes=notes)
