"""OSP, TCIMF, ATGP, MNF, MTMF and MTTCIMF against NumPy references written from the published formulas
(Harsanyi and Chang 1994; Ren and Chang 2000; Ren and Chang 2003; Boardman 1998), MNF against
``spectral.mnf``, library targets on the airport scene, and the GPU against the CPU (marked gpu)."""

import numpy as np
import pytest

from hyperapp.models.mnf import MNF, MTMF, MTTCIMF
from hyperapp.models.subspace import OSP, TCIMF, atgp


def _scene(seed=0, rows=24, cols=20, bands=12):
    """A smooth, spatially correlated background of three materials, sensor noise, and a sub-pixel target."""
    rng = np.random.default_rng(seed)
    E = rng.uniform(0.1, 1.0, (4, bands)) * 1000
    a = rng.dirichlet(np.ones(3), (rows, cols))
    # spatial correlation: abundances smoothed along rows and columns
    a = (a + np.roll(a, 1, 0) + np.roll(a, 1, 1)) / 3
    X = a @ E[:3] + rng.normal(0, 5, (rows, cols, bands))
    f = np.zeros((rows, cols))
    f[5:8, 4:7] = rng.uniform(0.2, 0.9, (3, 3))
    X = (1 - f[..., None]) * X + f[..., None] * E[3]
    return X.astype(np.float64), E, f > 0


def test_osp_matches_harsanyi_chang():
    X, E, _ = _scene()
    d, U = E[3], E[:3]
    P = X.reshape(-1, X.shape[2])
    est = OSP().fit_signature(X, d, undesired=U)
    Ut = U.T
    Pperp = np.eye(Ut.shape[0]) - Ut @ np.linalg.inv(Ut.T @ Ut) @ Ut.T
    ref = (P @ Pperp @ d) / (d @ Pperp @ d)
    np.testing.assert_allclose(est.decision_function(X).reshape(-1), ref, rtol=1e-8, atol=1e-10)
    # a pure undesired signature scores 0, the pure target 1
    np.testing.assert_allclose(est.decision_function(np.vstack([U, d])), [0, 0, 0, 1], atol=1e-8)


def test_tcimf_matches_ren_chang_and_reduces_to_cem():
    from hyperapp.models.classic import CEM

    X, E, t = _scene()
    P = X.reshape(-1, X.shape[2])
    d, U = E[3], E[:2]
    est = TCIMF().fit_signature(X, d, undesired=U)
    R = P.T @ P / P.shape[0]
    M = np.column_stack([d, *U])
    Ri = np.linalg.inv(R)
    w = Ri @ M @ np.linalg.inv(M.T @ Ri @ M) @ np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(est.decision_function(X).reshape(-1), P @ w, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(est.decision_function(np.vstack([d, U])), [1, 0, 0], atol=1e-6)
    y = np.where(t, 1, -1).reshape(-1)
    no_u = TCIMF(n_undesired=0).fit(X, y)
    np.testing.assert_allclose(no_u.decision_function(X), CEM().fit(X, y).decision_function(X), rtol=1e-6)


def test_atgp_follows_ren_chang():
    X, E, _ = _scene()
    P = X.reshape(-1, X.shape[2])
    sig, idx = atgp(P, 3, start=E[3])
    # the reference: each pick maximises ||P_U_perp x|| with U = [target, picks so far]
    U = [E[3]]
    for k in range(3):
        A = np.array(U).T
        Pp = np.eye(A.shape[0]) - A @ np.linalg.pinv(A)
        r = np.linalg.norm(P @ Pp, axis=1)
        r[idx[:k]] = -1
        assert idx[k] == int(r.argmax())
        U.append(P[idx[k]])
    np.testing.assert_allclose(sig, P[idx])


def test_atgp_stops_when_nothing_is_left_and_never_picks_excluded_pixels():
    rng = np.random.default_rng(2)
    P = rng.uniform(0.1, 1.0, (6, 9)).astype(np.float32)
    sig, idx = atgp(P, 10, exclude=np.array([0, 3]))
    # four pixels may be picked, each once; none of the excluded ones
    assert sorted(idx.tolist()) == [1, 2, 4, 5] and sig.shape == (4, 9)
    np.testing.assert_allclose(sig, P[idx])


def test_undesired_found_by_atgp_when_none_given():
    X, E, t = _scene()
    est = OSP(n_undesired=3).fit_signature(X, E[3])
    assert est.undesired_source_ == "ATGP" and est.undesired_.shape == (3, X.shape[2])
    from hyperapp.models.evaluation import evaluate

    assert evaluate(est.decision_function(X), t)["auc"] > 0.95


def test_mnf_matches_spectral_mnf():
    import spectral

    X, _, _ = _scene(bands=10)
    signal = spectral.calc_stats(X)
    noise = spectral.noise_from_diffs(X)
    ref = spectral.mnf(signal, noise)
    est = MNF(n_components=4).fit(X.astype(np.float64))
    np.testing.assert_allclose(est.eigenvalues_, np.real(ref.napc.eigenvalues), rtol=1e-6)
    ours = est.transform(X)
    theirs = ref.reduce(X, num=4)
    for k in range(4):  # each component up to its sign
        s = np.sign(np.dot(ours[..., k].ravel(), theirs[..., k].ravel()))
        np.testing.assert_allclose(ours[..., k], s * theirs[..., k], rtol=1e-4, atol=1e-4 * np.abs(theirs).max())
    assert MNF(snr_min=1.0).fit(X).n_components_ == max(2, int((np.real(ref.napc.eigenvalues) - 1 >= 1).sum()))


def _mnf_space(X, k):
    """Reference MNF coordinates and eigenvalues from Spectral Python."""
    import spectral

    ref = spectral.mnf(spectral.calc_stats(X), spectral.noise_from_diffs(X))
    lam = np.real(ref.napc.eigenvalues)[:k]
    f = ref.get_reduction_transform(num=k)
    return f, lam


def _infeasibility_ref(y, s, a, lam):
    """Boardman: distance from the background-target mixture at abundance a, in the interpolated sigma."""
    ac = min(max(a, 0.0), 1.0)
    sigma = (1 - ac) * np.sqrt(lam) + ac
    return np.linalg.norm((y - a * s) / sigma)


def _fix_signs(f_y, ours_s, s):
    # the reference's components may be flipped against ours: align on the target's coordinates
    return np.where(np.sign(ours_s) == np.sign(s), 1.0, -1.0)


def test_mtmf_matches_boardman():
    X, E, t = _scene()
    k = 6
    est = MTMF(n_components=k).fit_signature(X, E[3])
    f, lam = _mnf_space(X, k)
    s = np.real(f(E[3][None, :]))[0]
    sign = _fix_signs(None, est.s_, s)
    s = s * sign
    P = X.reshape(-1, X.shape[2])
    Y = np.real(f(P)) * sign
    score, maps = est.score_maps(X)
    score, inf = score.reshape(-1), maps["infeasibility"].reshape(-1)
    for i in range(0, P.shape[0], 7):  # pixel by pixel, as the formula reads
        a = (Y[i] / lam) @ s / ((s / lam) @ s)
        np.testing.assert_allclose(score[i], a, rtol=1e-4, atol=1e-5)  # float32 transform
        np.testing.assert_allclose(inf[i], _infeasibility_ref(Y[i], s, a, lam), rtol=1e-4, atol=1e-4)
    # the implanted sub-pixel target: high score, and feasible
    from hyperapp.models.evaluation import evaluate

    assert evaluate(score, t.reshape(-1))["auc"] > 0.95


def test_mttcimf_matches_tcimf_in_mnf_space():
    X, E, t = _scene()
    k = 6
    U = E[:2]
    est = MTTCIMF(n_components=k).fit_signature(X, E[3], undesired=U)
    f, lam = _mnf_space(X, k)
    s = np.real(f(E[3][None, :]))[0]
    sign = _fix_signs(None, est.s_, s)
    s = s * sign
    Uy = np.real(f(U)) * sign
    M = np.column_stack([s, *Uy])
    Li = np.diag(1 / lam)  # the centred data's correlation in MNF space is diag(lambda)
    w = Li @ M @ np.linalg.inv(M.T @ Li @ M) @ np.array([1.0, 0.0, 0.0])
    P = X.reshape(-1, X.shape[2])
    Y = np.real(f(P)) * sign
    score, maps = est.score_maps(X)
    np.testing.assert_allclose(score.reshape(-1), Y @ w, rtol=1e-4, atol=1e-6)
    i = int(np.argmax(score))
    a = float(Y[i] @ w)
    np.testing.assert_allclose(maps["infeasibility"].reshape(-1)[i], _infeasibility_ref(Y[i], s, a, lam), rtol=1e-5)
    assert est.undesired_source_ == "given"


def test_mttcimf_keeps_more_components_than_signatures(land_hdr):
    """TCIMF in MNF space solves with MᵀΛ⁻¹M, singular when fewer components are kept than signatures:
    the automatic choice keeps one more than the target plus ATGP's undesired, and a fixed count that is
    too small is refused, so the scores stay abundances (not the thousands a singular solve gives)."""
    from hyperapp.core.errors import InputError
    from hyperapp.io import open_cube

    cube = open_cube(land_hdr).good_bands()
    X = cube.to_float32()
    t = X[40:43, 50:53].reshape(-1, cube.bands).mean(0)
    est = MTTCIMF(n_undesired=8).fit_signature(X, t)
    assert MNF().fit(X).n_components_ <= 9 < est.mnf_.n_components_  # the SNR cut alone keeps too few
    score = est.decision_function(X)
    assert np.isfinite(score).all() and np.abs(score).max() < 10
    with pytest.raises(InputError, match="MNF components"):
        MTTCIMF(n_components=5, n_undesired=8).fit_signature(X, t)


def test_mnf_analysis_writes_eigenvalues_and_component_images(land_hdr, tmp_path):
    from hyperapp.analyse.run import run_analysis, write_analysis
    from hyperapp.io import open_cube
    from hyperapp.request import AnalyseRequest

    cube = open_cube(land_hdr)
    res = run_analysis(cube, AnalyseRequest("mnf", params={"n_components": 5}, device="cpu"))
    paths = write_analysis(res, tmp_path, cube)
    assert res.images["components"].shape == (cube.rows, cube.cols, 5)
    lam = res.report["results"]["eigenvalues"]
    assert len(lam) == cube.bands and lam == sorted(lam, reverse=True)
    assert paths["components"].is_file() and paths["eigenvalues"].is_file()


def test_airport_library_spectrum_rbfn_matches_best_classic(abu, tmp_path):
    """The issue's protocol: the truth targets' mean spectrum written to an .sli and read back; no clicks."""
    import scipy.io as sio

    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.io.signatures import signature_kwargs
    from hyperapp.io.speclib import SpectralLibrary, write_library
    from hyperapp.request import DetectRequest

    cube = open_cube(abu)
    truth = sio.loadmat(abu)["map"] > 0
    X = cube.to_float32()
    write_library(SpectralLibrary(["aircraft"], X[truth].astype(np.float64).mean(0)[None]), tmp_path / "air.sli")
    sig = signature_kwargs(cube, tmp_path / "air.sli")
    auc = {}
    for m in ("ace", "mf", "cem", "sam"):
        r = run_detection(cube, DetectRequest(m, device="cpu"), truth=truth, image=X, **sig)
        auc[m] = r.report["evaluation"]["auc"]
        assert r.report["n_target_pixels"] == 0
    # the RBFN samples its training set: the mean over five seeds (scripts/library_auc.py's protocol)
    auc["rbfn"] = np.mean([run_detection(cube, DetectRequest("rbfn", device="cpu", params={"seed": s}), truth=truth, image=X, **sig).report["evaluation"]["auc"] for s in range(5)])
    best = max(v for k, v in auc.items() if k != "rbfn")
    assert auc["rbfn"] >= best, auc


# ---------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("method", ["osp", "tcimf", "mtmf", "mttcimf", "ace", "mf", "cem", "sam", "rbfn"])
def test_library_detectors_gpu_agree_with_cpu(cp, land_hdr, method):
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr).good_bands()
    X = cube.to_float32()
    t = X[40:43, 50:53].reshape(-1, cube.bands).mean(0)[None].astype(np.float64)
    out = [run_detection(cube, DetectRequest(method, device=d, far=1e-2), target_spectra=t) for d in ("cpu", "gpu")]
    a, b = out[0].scores, out[1].scores
    scale = np.abs(a).max()
    # float32 GEMMs on the GPU against NumPy's: a few scores near 0 differ by up to 2e-4 of the range
    np.testing.assert_allclose(b, a, rtol=1e-3, atol=3e-4 * scale)
    for k in out[0].maps:
        np.testing.assert_allclose(out[1].maps[k], out[0].maps[k], rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_atgp_gpu_picks_as_the_cpu(cp):
    # more pixels than ATGP looks at (sampled every 2nd), a start signature and excluded pixels
    from hyperapp.models.subspace import ATGP_MAX_PIXELS

    rng = np.random.default_rng(4)
    m = ATGP_MAX_PIXELS + 5000
    E = rng.uniform(0.05, 0.9, (12, 40))
    P = (rng.dirichlet(np.ones(12) * 0.3, m) @ E + rng.normal(0, 0.005, (m, 40))).astype(np.float32)
    ex = rng.choice(m, 50, replace=False)
    a_sig, a_idx = atgp(P, 9, start=E[0], exclude=ex)
    b_sig, b_idx = atgp(cp.asarray(P), 9, start=E[0], exclude=cp.asarray(ex))
    np.testing.assert_array_equal(b_idx, a_idx)
    np.testing.assert_allclose(b_sig, a_sig)
    assert a_idx.size == 9 and not np.isin(a_idx // 2, ex // 2).any()


@pytest.mark.gpu
def test_mnf_gpu_agrees_with_cpu(cp):
    X, _, _ = _scene(bands=10)
    a = MNF(n_components=4).fit(X.astype(np.float32))
    b = MNF(n_components=4).fit(cp.asarray(X, dtype=cp.float32))
    np.testing.assert_allclose(b.eigenvalues_, a.eigenvalues_, rtol=1e-4)
    np.testing.assert_allclose(cp.asnumpy(b.transform(cp.asarray(X, cp.float32))), a.transform(X.astype(np.float32)),
                               rtol=1e-3, atol=1e-3)


def test_mixture_tuned_model_saves_and_scores_the_same(land_hdr, tmp_path):
    from hyperapp.detect.model_files import load_model, save_model
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr).good_bands()
    t = cube.read(slice(40, 43), slice(50, 53)).reshape(-1, cube.bands).mean(0)[None]
    r = run_detection(cube, DetectRequest("mttcimf", device="cpu"), target_spectra=t)
    model = load_model(save_model(r.model, tmp_path / "m.npz", method="mttcimf"), n_bands=cube.bands)
    again = run_detection(cube, DetectRequest("mttcimf", device="cpu"), model=model)
    np.testing.assert_array_equal(again.scores, r.scores)
    np.testing.assert_array_equal(again.maps["infeasibility"], r.maps["infeasibility"])


def test_library_targets_leave_no_data_pixels_out(land_hdr):
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    c = open_cube(land_hdr).good_bands()
    X = c.to_float32()
    X[:3] = np.nan
    cube = cube_from_array(X, "holes", wavelengths=c.wavelengths)
    t = X[40:43, 50:53].reshape(-1, c.bands).mean(0)[None]
    for m in ("ace", "cem", "osp", "mtmf", "rbfn"):
        r = run_detection(cube, DetectRequest(m, device="cpu"), target_spectra=t)
        assert r.report["nodata_pixels"] == 3 * c.cols
        assert np.isnan(r.scores[:3]).all() and np.isfinite(r.scores[3:]).all(), m


def test_several_library_targets_keep_the_highest_score(land_hdr):
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr).good_bands()
    X = cube.to_float32()
    t = np.stack([X[40, 50], X[10, 10]]).astype(np.float64)
    both = run_detection(cube, DetectRequest("ace", device="cpu"), target_spectra=t)
    one = [run_detection(cube, DetectRequest("ace", device="cpu"), target_spectra=t[i:i + 1]).scores for i in range(2)]
    np.testing.assert_allclose(both.scores, np.maximum(*one), rtol=1e-6)
    np.testing.assert_array_equal(both.maps["target_index"], (one[1] > one[0]).astype(np.int16))


@pytest.mark.parametrize("method", ["osp", "tcimf", "ace"])
def test_streamed_library_run_equals_in_memory(land_hdr, method):
    from hyperapp.core.errors import InputError
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr).good_bands()
    X = cube.to_float32()
    t = X[40:43, 50:53].reshape(-1, cube.bands).mean(0)[None].astype(np.float64)
    U = np.stack([X[5, 5], X[100, 20]]).astype(np.float64) if method != "ace" else None
    mem = run_detection(cube, DetectRequest(method, device="cpu"), target_spectra=t, undesired_spectra=U)
    st = run_detection(cube, DetectRequest(method, device="cpu", memory=1e-4), target_spectra=t, undesired_spectra=U)
    assert st.report["streamed"] and not mem.report["streamed"]
    np.testing.assert_allclose(st.scores, mem.scores, rtol=1e-4, atol=1e-5 * float(np.abs(mem.scores).max()))
    if method != "ace":  # ATGP needs every pixel at once: a streamed run says so
        with pytest.raises(InputError, match="cannot find undesired signatures by ATGP"):
            run_detection(cube, DetectRequest(method, device="cpu", memory=1e-4), target_spectra=t)


def test_detectors_run_in_mnf_space(land_hdr):
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = open_cube(land_hdr).good_bands()
    X = cube.to_float32()
    t = X[40:43, 50:53].reshape(-1, cube.bands).mean(0)[None].astype(np.float64)
    plain = run_detection(cube, DetectRequest("ace", device="cpu"), target_spectra=t)
    # ACE is invariant to an invertible affine map: in the full MNF space it gives the same scores
    full = run_detection(cube, DetectRequest("ace", device="cpu", mnf=cube.bands), target_spectra=t)
    assert full.report["mnf_components"] == cube.bands
    np.testing.assert_allclose(full.scores, plain.scores, atol=2e-3)
    few = run_detection(cube, DetectRequest("tcimf", device="cpu", mnf=6), target_spectra=np.vstack([t, X[5, 5]]))
    assert few.report["mnf_components"] == 6 and np.isfinite(few.scores).all()
    clicks = np.zeros((cube.rows, cube.cols), bool)
    clicks[40:43, 50:53] = True
    rb = run_detection(cube, DetectRequest("rbfn", device="cpu", mnf=0, params={"n_components": 4}), clicks)
    assert rb.report["mnf_components"] >= 2
