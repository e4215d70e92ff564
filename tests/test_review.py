"""The review of a detection's objects without Qt (hyperapp.detect.review): statuses, mean spectra, the
library's best matches by SAM and SID against plain formulas, review.csv, the confirmed-only export, the
project's dict and a batch run's folder; the issue's airport session (3 Good, 2 Bad, saved, reopened)."""

import csv
import io
import json

import numpy as np
import pytest

from hyperapp.core.errors import HyperappError, InputError
from hyperapp.detect.review import BAD, GOOD, PENDING, Review, parse_status
from hyperapp.request import DetectRequest


# ------------------------------------------------------------------ the formulas
def _sam_ref(a, b):
    return float(np.arccos(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1, 1)))


def _sid_ref(a, b, eps=1e-12):
    p = np.maximum(a, eps)
    q = np.maximum(b, eps)
    p, q = p / p.sum(), q / q.sum()
    return float(np.sum(p * np.log(p / q)) + np.sum(q * np.log(q / p)))


def test_pairwise_sam_and_sid_agree_with_their_formulas_pair_by_pair():
    from hyperapp.models.spectral_match import best_matches, sam_angles, sid_divergences

    rng = np.random.default_rng(0)
    A = rng.uniform(0.01, 1.0, (7, 30))
    A[2, :5] = 0.0  # zeros and negative noise: floored, as the SID detector reads them
    A[3, 10] = -0.02
    B = rng.uniform(0.01, 1.0, (5, 30))
    B[1] = 3.0 * A[0]  # the same shape as object 0: angle 0, divergence 0
    sam, sid = sam_angles(A, B), sid_divergences(A, B)
    assert sam.shape == sid.shape == (7, 5)
    for i in range(7):
        for j in range(5):
            assert sam[i, j] == pytest.approx(_sam_ref(A[i], B[j]), abs=1e-7)
            assert sid[i, j] == pytest.approx(_sid_ref(A[i], B[j]), rel=1e-9, abs=1e-12)
    assert sam[0, 1] == pytest.approx(0.0, abs=1e-7) and sid[0, 1] == pytest.approx(0.0, abs=1e-12)
    idx, val = best_matches(sid, 3)
    assert idx.shape == (7, 3) and idx[0, 0] == 1
    np.testing.assert_array_equal(idx, np.argsort(sid, axis=1)[:, :3])
    assert (np.diff(val, axis=1) >= 0).all()


def test_pairwise_sid_is_minus_the_sid_detectors_score():
    """One formula: the review's divergence of a pixel from a spectrum is the SID detector's score, negated."""
    from hyperapp.models.classic import SID
    from hyperapp.models.spectral_match import sid_divergences

    rng = np.random.default_rng(5)
    X = rng.uniform(0.0, 1.0, (50, 24))
    X[3, :4] = -0.01
    t = rng.uniform(0.1, 1.0, 24)
    score = SID().fit_signature(X.astype(np.float32), t).decision_function(X.astype(np.float32))
    np.testing.assert_allclose(sid_divergences(X, t[None, :])[:, 0], -score, rtol=2e-4, atol=1e-6)


# ------------------------------------------------------------------ a small scene with planted objects
@pytest.fixture
def planted():
    """A 40 x 50 x 12 image with four objects of known pixels, each of its own spectrum plus noise."""
    rng = np.random.default_rng(3)
    img = rng.uniform(100, 200, (40, 50, 12)).astype(np.float32)
    mask = np.zeros((40, 50), bool)
    mask[2:5, 3:6] = True          # 9 px
    mask[10, 20:24] = True         # 4 px
    mask[30:33, 40] = True         # 3 px
    mask[20:22, 10:12] = True      # 4 px
    scores = np.where(mask, rng.uniform(1, 2, mask.shape), rng.uniform(0, 0.5, mask.shape)).astype(np.float32)
    return img, mask, scores


def test_mean_spectra_are_each_objects_pixel_mean_from_an_array_or_a_cube(planted):
    from hyperapp.core.cube import cube_from_array
    from hyperapp.models.postprocess import label_objects

    img, mask, scores = planted
    rv = Review.from_mask(mask, scores, threshold=0.9)
    assert len(rv) == 4 and rv.status == [PENDING] * 4
    lab, _ = label_objects(mask)
    means = rv.mean_spectra(img)
    for i, oid in enumerate(rv.ids):
        np.testing.assert_allclose(means[i], img[lab == oid].astype(np.float64).mean(axis=0), rtol=1e-12)
    again = Review.from_mask(mask, scores).mean_spectra(cube_from_array(img))
    np.testing.assert_allclose(again, means, rtol=1e-12)
    with pytest.raises(InputError, match="image is 10 x 50"):
        Review.from_mask(mask, scores).mean_spectra(img[:10])


def test_matches_rank_the_library_by_sam_and_by_sid(planted):
    from hyperapp.io.speclib import SpectralLibrary

    img, mask, scores = planted
    rv = Review.from_mask(mask, scores)
    means = rv.mean_spectra(img)
    # a library holding object 2's mean (scaled: both measures ignore the scale) and two others
    lib = SpectralLibrary(["flat", "object 2", "ramp"], [np.full(12, 150.0), 0.01 * means[2], np.linspace(1, 300, 12)])
    found = rv.matches(lib, k=2)
    assert found.sam_index.shape == (4, 2)
    assert found.best(2)["sam_match"] == "object 2" and found.best(2)["sid_match"] == "object 2"
    assert found.best(2)["sam_angle"] == pytest.approx(0.0, abs=1e-6)
    assert found.best(2)["sid_divergence"] == pytest.approx(0.0, abs=1e-9)
    for i in range(4):  # the scores are the formulas' for the names given
        ranked = found.ranked(i)
        for sam_name, angle, sid_name, div in ranked:
            assert angle == pytest.approx(_sam_ref(means[i], lib.spectra[lib.names.index(sam_name)]), abs=1e-7)
            assert div == pytest.approx(_sid_ref(means[i], lib.spectra[lib.names.index(sid_name)]), abs=1e-10)
    with pytest.raises(InputError, match="bands"):
        rv.matches_for(["x"], np.ones((1, 5)))


def test_statuses_csv_dict_and_the_confirmed_export(planted, tmp_path):
    from hyperapp.io import open_cube
    from hyperapp.io.speclib import SpectralLibrary

    img, mask, scores = planted
    rv = Review.from_mask(mask, scores, threshold=0.9)
    rv.mean_spectra(img)
    rv.matches(SpectralLibrary(["a", "b"], [np.linspace(1, 2, 12), np.linspace(2, 1, 12)]))
    ids = rv.ids.tolist()
    rv.set_status(ids[0], "G")
    rv.set_status(ids[1], "good")
    rv.set_status(ids[2], "b")
    assert rv.counts() == {PENDING: 1, GOOD: 2, BAD: 1}
    with pytest.raises(InputError, match="no object 99"):
        rv.set_status(99, "good")
    with pytest.raises(InputError, match="unknown review status"):
        parse_status("maybe")
    assert [r["id"] for r in rv.confirmed()] == ids[:2]
    rows = list(csv.DictReader(io.StringIO(rv.csv_text())))
    assert [int(r["id"]) for r in rows] == ids
    assert [r["status"] for r in rows] == ["Good", "Good", "Bad", "Pending"]
    assert all(r["sam_match"] in ("a", "b") and float(r["sid_divergence"]) >= 0 for r in rows)
    assert "lon" not in rows[0]  # no geolocation: no lon/lat columns
    # the project's dict: JSON and back, statuses and spectra alike
    back = Review.from_dict(json.loads(json.dumps(rv.to_dict())), mask.shape)
    assert back.status == rv.status and back.ids.tolist() == ids and back.threshold == pytest.approx(0.9)
    np.testing.assert_array_equal(back.labels, rv.labels)
    np.testing.assert_allclose(back.mean_spectra(img), rv.means)
    with pytest.raises(InputError, match="image"):
        Review.from_dict(rv.to_dict(), (10, 10))
    # the confirmed objects only: their lines, their mask; review.csv beside them holds every object
    paths = rv.export_confirmed(tmp_path / "out")
    good = list(csv.DictReader(io.StringIO(paths["confirmed"].read_text())))
    assert [int(r["id"]) for r in good] == ids[:2] and {r["status"] for r in good} == {"Good"}
    assert all(r["sam_match"] and r["sid_match"] for r in good)
    gm = open_cube(paths["mask"]).read()[:, :, 0]
    np.testing.assert_array_equal(gm > 0, np.isin(rv.labels, ids[:2]))
    assert len(list(csv.DictReader(io.StringIO(paths["review"].read_text())))) == 4
    rv.status = [PENDING] * 4
    with pytest.raises(InputError, match="no object is marked Good"):
        rv.export_confirmed(tmp_path / "none")


def test_objects_follow_the_connectivity_of_the_run(tmp_path):
    """Two pixels touching at a corner: one object 8-connected, two 4-connected; a folder whose report names
    4-connectivity is read as such."""
    mask = np.zeros((6, 6), bool)
    mask[1, 1] = mask[2, 2] = True
    scores = mask.astype(np.float32)
    assert len(Review.from_mask(mask, scores)) == 1
    four = Review.from_mask(mask, scores, connectivity=4)
    assert len(four) == 2 and sorted(o["pixels"] for o in four.objects) == [1, 1]
    d = tmp_path / "run"
    d.mkdir()
    from hyperapp.io.writers import write_envi
    from hyperapp.models.postprocess import objects_csv

    write_envi(d / "mask", mask.astype(np.uint8))
    (d / "objects.csv").write_text(objects_csv(four.objects))
    (d / "report.json").write_text(json.dumps({"threshold": 0.5, "filters": {"connectivity": 4}}))
    back = Review.from_folder(d, mask.shape)
    assert back.ids.tolist() == four.ids.tolist() and back.threshold == 0.5
    (d / "report.json").write_text(json.dumps({"threshold": 0.5}))  # 8-connected: one object, two listed
    with pytest.raises(HyperappError, match="objects.csv lists 2 objects"):
        Review.from_folder(d, mask.shape)


def test_a_moved_threshold_keeps_the_marks_of_the_objects_that_overlap():
    """A Good object that grows keeps Good, a Bad one that shrinks keeps Bad; an object merging a Good and a
    Bad one, and a new one, are Pending."""
    s = np.zeros((12, 20), np.float32)
    s[2, 2] = s[2, 3] = 0.9           # A: grows at the lower threshold (2, 4)
    s[2, 4] = 0.5
    s[6, 6:9] = [0.9, 0.4, 0.9]       # B and C, apart at 0.8, one object at 0.3
    s[9, 12:15] = [0.9, 0.9, 0.85]    # D: shrinks at 0.87
    s[0, 18] = 0.5                    # E: new at 0.3
    high = Review.from_mask(s > 0.8, s, 0.8)
    by_pixel = {tuple(map(int, np.argwhere(high.labels == i)[0])): i for i in high.ids.tolist()}
    high.set_status(by_pixel[(2, 2)], GOOD)
    high.set_status(by_pixel[(6, 6)], GOOD)
    high.set_status(by_pixel[(6, 8)], BAD)
    high.set_status(by_pixel[(9, 12)], BAD)
    low = Review.from_mask(s > 0.3, s, 0.3)
    assert low.carry_statuses(high) == 2  # A and D

    def status_at(rv, r, c):
        return rv.status[rv.index_of(int(rv.labels[r, c]))]

    assert status_at(low, 2, 4) == GOOD and status_at(low, 6, 7) == PENDING and status_at(low, 0, 18) == PENDING
    assert status_at(low, 9, 14) == BAD
    higher = Review.from_mask(s > 0.87, s, 0.87)
    assert higher.carry_statuses(high) == 4
    assert status_at(higher, 9, 12) == BAD and status_at(higher, 2, 2) == GOOD and status_at(higher, 6, 8) == BAD


def test_lon_lat_columns_when_the_objects_carry_them(planted):
    img, mask, scores = planted
    rv = Review.from_mask(mask, scores)
    for k, o in enumerate(rv.objects):
        o["lon"], o["lat"] = 10.0 + k, 50.0 - k
    rows = list(csv.DictReader(io.StringIO(rv.csv_text())))
    assert [float(r["lon"]) for r in rows] == [10.0, 11.0, 12.0, 13.0]
    assert float(rows[3]["lat"]) == 47.0


# ------------------------------------------------------------------ a batch run's folder
def _detect_folder(land_hdr, out):
    from hyperapp.detect.outputs import write_detection
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube, read_labels

    cube = open_cube(land_hdr)
    clicks = read_labels(land_hdr.with_name("land_targets.csv"), (cube.rows, cube.cols))
    res = run_detection(cube, DetectRequest("sam", device="cpu", far=0.01), clicks)
    write_detection(res, out, cube)
    return cube, res


def test_a_detect_folder_opens_for_review_and_keeps_its_review_csv(land_hdr, tmp_path):
    cube, res = _detect_folder(land_hdr, tmp_path / "run")
    rv = Review.from_folder(tmp_path / "run", (cube.rows, cube.cols))
    assert len(rv) == len(res.objects) >= 3
    assert rv.ids.tolist() == [o["label"] for o in res.objects]
    assert rv.threshold == pytest.approx(res.threshold)
    for i, o in enumerate(res.objects):  # each id's pixels are its object's
        assert (rv.labels == rv.ids[i]).sum() == o["pixels"]
        rr, cc = np.nonzero(rv.labels == rv.ids[i])
        assert (rr.min(), cc.min(), rr.max() + 1, cc.max() + 1) == (o["row0"], o["col0"], o["row1"], o["col1"])
    rv.set_status(rv.ids[0], GOOD)
    rv.set_status(rv.ids[1], BAD)
    rv.to_csv(tmp_path / "run")
    again = Review.from_folder(tmp_path / "run", (cube.rows, cube.cols))
    assert again.status[:2] == [GOOD, BAD] and set(again.status[2:]) == {PENDING}
    with pytest.raises(InputError, match="mask is"):
        Review.from_folder(tmp_path / "run", (10, 10))


def test_a_folder_whose_objects_are_not_its_masks_is_refused(land_hdr, tmp_path):
    _detect_folder(land_hdr, tmp_path / "run")
    lines = (tmp_path / "run" / "objects.csv").read_text().splitlines()
    (tmp_path / "run" / "objects.csv").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(HyperappError, match="objects.csv lists"):
        Review.from_folder(tmp_path / "run")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HyperappError, match="no objects.csv"):
        Review.from_folder(tmp_path / "empty")


# ------------------------------------------------------------------ the airport session
def test_airport_review_three_good_two_bad_saved_and_reopened(abu, tmp_path):
    """RBFN from five clicks on aircraft; 3 objects Good, 2 Bad; the review through the project's JSON and
    back; the export holds the Good ones with their library match; review.csv every object's status."""
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_named_cube, read_truth
    from hyperapp.io.speclib import SpectralLibrary

    from .conftest import random_clicks

    cube = open_named_cube(abu, "data")
    truth = read_truth(abu, (cube.rows, cube.cols), "map") > 0
    res = run_detection(cube, DetectRequest("rbfn", device="cpu", far=0.01), random_clicks(truth, 5, 0))
    rv = Review.from_mask(res.mask, res.scores, res.threshold)
    assert len(rv) >= 5
    X = cube.read()
    lib = SpectralLibrary(["aircraft", "background"], [X[truth].mean(axis=0), X[~truth].mean(axis=0)])
    rv.mean_spectra(X)
    rv.matches(lib, k=2)
    ids = rv.ids.tolist()
    for i in ids[:3]:
        rv.set_status(i, "G")
    for i in ids[3:5]:
        rv.set_status(i, "B")
    saved = json.loads(json.dumps({"review": rv.to_dict()}))
    back = Review.from_dict(saved["review"], (cube.rows, cube.cols))
    assert back.status[:5] == [GOOD] * 3 + [BAD] * 2 and set(back.status[5:]) <= {PENDING}
    back.mean_spectra(cube)
    back.matches(lib, k=2)
    paths = back.export_confirmed(tmp_path / "confirmed", cube)
    good = list(csv.DictReader(io.StringIO(paths["confirmed"].read_text())))
    assert [int(r["id"]) for r in good] == ids[:3]
    assert all(r["sam_match"] in lib.names and r["sid_match"] in lib.names for r in good)
    every = list(csv.DictReader(io.StringIO(paths["review"].read_text())))
    assert [int(r["id"]) for r in every] == ids
    assert [r["status"] for r in every][:5] == ["Good"] * 3 + ["Bad"] * 2
    # the aircraft pixels' objects match the aircraft spectrum better than the background's, by SID
    hits = [i for i, oid in enumerate(back.ids) if truth[back.labels == oid].all()]
    assert hits and all(back.found.best(i)["sid_match"] == "aircraft" for i in hits)


@pytest.mark.gpu
def test_the_gpu_review_agrees_with_numpy(planted, cp):
    from hyperapp.io.speclib import SpectralLibrary

    img, mask, scores = planted
    lib = SpectralLibrary(["a", "b", "c"], np.random.default_rng(1).uniform(1, 2, (3, 12)))
    cpu = Review.from_mask(mask, scores)
    cpu.mean_spectra(img)
    cpu.matches(lib, k=3)
    gpu = Review.from_mask(cp.asarray(mask), cp.asarray(scores))
    gpu.mean_spectra(cp.asarray(img))
    gpu.matches(lib, k=3)
    np.testing.assert_allclose(gpu.means, cpu.means, rtol=1e-12)
    np.testing.assert_array_equal(gpu.found.sam_index, cpu.found.sam_index)
    np.testing.assert_allclose(gpu.found.sid_divergence, cpu.found.sid_divergence, rtol=1e-9, atol=1e-14)


def test_a_filtered_4_connected_detect_folder_opens_for_review(land_hdr, tmp_path):
    """``detect --clump 3 --sieve 2..500 --connectivity 4``: the folder's objects are its filtered mask's
    4-connected objects, each id on its own pixels."""
    from hyperapp.cli import main

    out = tmp_path / "f4"
    assert main(["--headless", "detect", str(land_hdr), "--method", "sam", "--targets",
                 str(land_hdr.with_name("land_targets.csv")), "--far", "0.02", "--clump", "3", "--sieve", "2..500",
                 "--connectivity", "4", "--device", "cpu", "--out", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO((out / "objects.csv").read_text())))
    rv = Review.from_folder(out, (128, 128))
    assert rv.ids.tolist() == [int(r["label"]) for r in rows] and len(rv) > 3
    for i, r in zip(rv.ids.tolist(), rows):
        assert (rv.labels == i).sum() == int(r["pixels"]) >= 2
