"""The headless CLI contract: info, detect (SAM end to end), reports checked against scikit-learn,
and every bad-input case: one line, exit 2, nothing written under the final names."""

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from hyperapp.cli import main
from hyperapp.core.errors import InputError
from hyperapp.io import open_cube, read_labels, read_mask

from .conftest import random_clicks


def run(capsys, *args):
    code = main(["--headless", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_info(capsys, land_hdr):
    code, out, _ = run(capsys, "info", land_hdr)
    assert code == 0
    assert "128 rows x 128 cols x 64 bands, int16, interleave bil" in out
    assert "400 - 2500 nm" in out  # the header's Nanometers, written as every label writes it
    assert "2.0 MiB" in out


@pytest.mark.parametrize("scene", ["land", "sea"])
def test_detect_sam_on_sample_scenes(tmp_path, capsys, scene):
    from .conftest import SAMPLES

    hdr = SAMPLES / f"{scene}.hdr"
    code, out, err = run(capsys, "detect", hdr, "--method", "sam", "--targets", SAMPLES / f"{scene}_targets.csv",
                         "--truth", SAMPLES / f"{scene}_truth.hdr", "--device", "cpu", "--out", tmp_path / "o")
    assert code == 0, err
    rep = json.loads((tmp_path / "o/report.json").read_text())
    scores = open_cube(tmp_path / "o/scores.hdr")
    mask = open_cube(tmp_path / "o/mask.hdr")
    assert scores.dtype == np.float32 and mask.dtype == np.uint8
    s = scores.read()[:, :, 0]
    m = mask.read()[:, :, 0]
    assert rep["method"] == "sam" and rep["device"] == "cpu"
    assert set(rep["seconds"]) >= {"load", "fit", "score", "threshold", "total"}
    assert rep["detections"] == int(m.sum()) == int((s > rep["threshold"]).sum())
    truth = read_mask(SAMPLES / f"{scene}_truth.hdr") > 0
    clicks = read_labels(SAMPLES / f"{scene}_targets.csv", truth.shape)
    keep = ~clicks
    assert rep["evaluation"]["auc"] == pytest.approx(roc_auc_score(truth[keep], s[keep]), abs=1e-9)
    assert rep["evaluation"]["auc"] > 0.9
    assert (tmp_path / "o/objects.csv").read_text().startswith("label,pixels")


def test_detect_sam_on_real_aviris_scene_matches_sklearn(tmp_path, capsys, abu):
    truth = read_mask(abu, variable="map") > 0
    clicks = random_clicks(truth, 5, seed=0)
    np.save(tmp_path / "clicks.npy", clicks.astype(np.uint8))
    code, out, err = run(capsys, "detect", abu, "--dataset", "data", "--method", "sam", "--targets",
                         tmp_path / "clicks.npy", "--truth", abu, "--truth-var", "map", "--out", tmp_path / "o",
                         "--device", "cpu")
    assert code == 0, err
    rep = json.loads((tmp_path / "o/report.json").read_text())
    s = open_cube(tmp_path / "o/scores.hdr").read()[:, :, 0]
    assert rep["evaluation"]["auc"] == pytest.approx(roc_auc_score(truth[~clicks], s[~clicks]), abs=1e-9)
    assert "AUC" in out


def test_far_and_threshold(tmp_path, capsys, land_hdr):
    base = ["detect", land_hdr, "--method", "sam", "--targets", land_hdr.with_name("land_targets.csv")]
    code, _, _ = run(capsys, *base, "--far", "0.01", "--out", tmp_path / "a")
    rep = json.loads((tmp_path / "a/report.json").read_text())
    assert code == 0 and rep["far"] == 0.01
    # the false alarms are 1% of the background (within 3x); the 218 targets come on top of them
    assert 0.005 * 128 * 128 <= rep["detections"] <= 0.03 * 128 * 128 + 218
    code, _, _ = run(capsys, *base, "--threshold", "0.5", "--out", tmp_path / "b")
    assert json.loads((tmp_path / "b/report.json").read_text())["threshold"] == 0.5


def _bad(capsys, tmp_path, *args):
    out = tmp_path / "out"
    code, stdout, err = run(capsys, *args, "--out", out) if args[0] == "detect" else run(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hyperapp: error:"), err
    assert "Traceback" not in err
    for name in ("scores.hdr", "scores.img", "mask.hdr", "mask.img", "report.json"):
        assert not (out / name).exists()
    return lines[0]


def _copy_scene(tmp_path, land_hdr):
    import shutil

    for ext in (".hdr", ".img"):
        shutil.copy(land_hdr.with_suffix(ext), tmp_path / f"c{ext}")
    return tmp_path / "c.hdr"


def test_error_truncated_file(tmp_path, capsys, land_hdr):
    hdr = _copy_scene(tmp_path, land_hdr)
    img = hdr.with_suffix(".img")
    img.write_bytes(img.read_bytes()[:1000])
    line = _bad(capsys, tmp_path, "detect", hdr, "--method", "sam", "--targets", land_hdr.with_name("land_targets.csv"))
    assert "c.img" in line and "truncated" in line


def test_error_wrong_sizes_unknown_type_missing_header(tmp_path, capsys, land_hdr):
    hdr = _copy_scene(tmp_path, land_hdr)
    text = hdr.read_text()
    hdr.write_text(text.replace("samples = 128", "samples = 129"))
    assert "header's sizes" in _bad(capsys, tmp_path, "info", hdr)
    hdr.write_text(text.replace("data type = 2", "data type = 7"))
    assert "unsupported ENVI data type 7" in _bad(capsys, tmp_path, "info", hdr)
    hdr.unlink()
    assert "no ENVI header" in _bad(capsys, tmp_path, "info", hdr.with_suffix(".img"))


def test_error_hdf5_and_mat(tmp_path, capsys):
    import h5py
    import scipy.io

    with h5py.File(tmp_path / "none.h5", "w") as f:
        f.create_dataset("x", data=np.zeros((3, 3)))
    assert "no 3-D numeric dataset" in _bad(capsys, tmp_path, "info", tmp_path / "none.h5")
    with h5py.File(tmp_path / "two.h5", "w") as f:
        f.create_dataset("a", data=np.zeros((3, 3, 3)))
        f.create_dataset("b", data=np.zeros((3, 3, 3)))
    assert "several 3-D datasets" in _bad(capsys, tmp_path, "info", tmp_path / "two.h5")
    scipy.io.savemat(tmp_path / "m.mat", {"cube": np.ones((3, 3, 3))})
    assert "no 3-D cube variable 'data'" in _bad(capsys, tmp_path, "info", tmp_path / "m.mat", "--dataset", "data")


def test_nan_pixels_are_no_data(tmp_path, capsys):
    """A NaN pixel no longer refuses the cube: it is no data (NaN score, never in the mask); a target
    clicked on it is a clear error."""
    import spectral.io.envi as envi

    from hyperapp.io import read_mask

    d = np.random.default_rng(0).random((10, 10, 4)).astype(np.float32)
    d[3, 4, 2] = np.nan
    envi.save_image(str(tmp_path / "n.hdr"), d, force=True, ext=".img")
    (tmp_path / "t.csv").write_text("row,col\n1,1\n")
    code, _, _ = run(capsys, "detect", tmp_path / "n.hdr", "--method", "ace", "--targets", tmp_path / "t.csv",
                     "--far", "0.05", "--out", tmp_path / "out")
    assert code == 0
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["nodata_pixels"] == 1
    scores = open_cube(tmp_path / "out" / "scores.hdr").read()[:, :, 0]
    assert np.isnan(scores[3, 4]) and np.isfinite(np.delete(scores.ravel(), 34)).all()
    assert read_mask(tmp_path / "out" / "mask.hdr")[3, 4] == 0
    (tmp_path / "t2.csv").write_text("row,col\n3,4\n")
    line = _bad(capsys, tmp_path / "second", "detect", tmp_path / "n.hdr", "--method", "sam", "--targets",
                tmp_path / "t2.csv")
    assert "target pixel has no data" in line and "pixel (3, 4)" in line  # which click: the one to move


def test_error_mask_shape_and_pixels_outside(tmp_path, capsys, land_hdr):
    np.save(tmp_path / "small.npy", np.ones((10, 10), np.uint8))
    line = _bad(capsys, tmp_path, "detect", land_hdr, "--method", "sam", "--targets", tmp_path / "small.npy")
    assert "small.npy" in line and "10x10 but the cube is 128x128" in line
    (tmp_path / "t.csv").write_text("row,col\n5,5\n130,2\n")
    line = _bad(capsys, tmp_path, "detect", land_hdr, "--method", "sam", "--targets", tmp_path / "t.csv")
    assert "outside the 128x128 image" in line
    # a negative row is wrong whatever the image: said so, by the CLI and by a job's check alike
    (tmp_path / "neg.csv").write_text("row,col\n-1,5\n")
    line = _bad(capsys, tmp_path, "detect", land_hdr, "--method", "sam", "--targets", tmp_path / "neg.csv")
    assert "neg.csv" in line and "negative row or column" in line
    from hyperapp.io.masks import check_labels_file

    with pytest.raises(InputError, match="negative row or column"):
        check_labels_file(tmp_path / "neg.csv")


def test_error_output_folder_not_writable(tmp_path, capsys, land_hdr):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run(capsys, "detect", land_hdr, "--method", "sam", "--targets",
                       land_hdr.with_name("land_targets.csv"), "--out", blocker / "sub")
    assert code == 2 and "cannot create output folder" in err and len(err.strip().splitlines()) == 1


def test_error_bad_usage(tmp_path, capsys, land_hdr):
    assert "unknown method 'nope'" in _bad(capsys, tmp_path, "detect", land_hdr, "--method", "nope",
                                           "--targets", land_hdr.with_name("land_targets.csv"))
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "detect", land_hdr, "--method", "sam", "--device", "gpu",
                       "--targets", land_hdr.with_name("land_targets.csv"), "--out", tmp_path / "g")
    from hyperapp.core.backend import gpu_available

    if not gpu_available():
        assert code == 2 and "--device gpu" in err


def test_one_progress_display_bar_on_a_terminal_lines_on_request(monkeypatch):
    """The CLI's and batch's progress display: rich's bar on a terminal; elsewhere silent, or one plain
    line per stage with HYPERAPP_PROGRESS=lines."""
    import io

    from rich.console import Console

    from hyperapp.core.progress import ProgressDisplay

    term = Console(file=io.StringIO(), force_terminal=True, width=100)
    with ProgressDisplay(console=term) as shown:
        p = shown.progress()
        p(0.5, "pass 1: statistics")
        p(1.0, "done")
    assert "done" in term.file.getvalue() and "100%" in term.file.getvalue()
    for lines, want in ((False, ""), (True, "hyperapp:  50.0% scoring\nhyperapp: 100.0% done\n")):
        monkeypatch.setenv("HYPERAPP_PROGRESS", "lines" if lines else "")
        pipe = Console(file=io.StringIO(), force_terminal=False)
        with ProgressDisplay(console=pipe) as shown:
            p = shown.progress()
            p(0.5, "scoring")
            p(0.6, "scoring")
            p(1.0, "done")
        assert pipe.file.getvalue() == want


@pytest.mark.parametrize("args, words", [
    (["--method", "ace", "--targets", "T", "--mnf", "65"], ["--mnf 65", "64 bands"]),
    (["--method", "rbfn", "--targets", "T", "--mnf", "100"], ["--mnf 100", "64 bands"]),
    (["--method", "ace", "--train-from", "S", "--train-truth", "E"], ["empty.npy", "marks no target pixel"]),
    (["--method", "ace", "--train-from", "S", "--train-truth", "T", "--targets", "T"],
     ["--targets", "--train-from", "not both"]),
    (["--method", "ace", "--train-truth", "T"], ["--train-truth", "give --train-from too"]),
    (["--method", "ace", "--targets", "T", "--model", "M"], ["--model", "--targets", "not both"]),
    (["--method", "rbfn", "--targets", "T", "--param", "n_hidden=20", "--hidden", "10"],
     ["--hidden 10", "n_hidden=20", "disagree"]),
    (["--method", "rbfn", "--targets", "T", "--param", "anomaly=1", "--param", "anomaly=2"],
     ["--param anomaly", "twice"]),
    (["--method", "rbfn", "--targets", "T", "--param", "normalize=yes"], ["normalize", "true or false"]),
])
def test_conflicting_or_impossible_options_are_refused_in_one_line(tmp_path, capsys, land_hdr, args, words):
    clicks = land_hdr.parent / "land_targets.csv"
    np.save(tmp_path / "empty.npy", np.zeros((128, 128), np.uint8))
    model = tmp_path / "m.npz"  # the combination is refused before the model is read
    model.write_bytes(b"")
    sub = {"T": clicks, "S": land_hdr.parent / "sea.hdr", "E": tmp_path / "empty.npy", "M": model}
    line = _bad(capsys, tmp_path, "detect", land_hdr, *[sub.get(a, a) for a in args], "--device", "cpu")
    for w in words:
        assert w in line, (w, line)
    assert not (tmp_path / "out").exists()


def test_method_names_as_typed(tmp_path, capsys, land_hdr):
    """RBFN, Ace, " sam ": the method names are lower case, whatever the user types."""
    rc = main(["--headless", "detect", str(land_hdr), "--method", "SAM", "--targets",
               str(land_hdr.with_name("land_targets.csv")), "--device", "cpu", "--out", str(tmp_path / "o")])
    assert rc == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "o" / "report.json").read_text())["method"] == "sam"
