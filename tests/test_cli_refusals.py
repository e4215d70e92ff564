"""The command line's refusals: one line naming the file and the problem, exit 2, nothing under the final
names, earlier results intact; detect and analyse on degenerate data."""

import json

import numpy as np
import pytest

from hyperapp.cli import main
from hyperapp.core.errors import InputError

pytest.importorskip("distributed")
from .refusal_helpers import _cli, _cube, _one_clean_line  # noqa: F401


def test_cli_refuses_each_class_of_bad_value_in_one_line(tmp_path, capsys):
    cube = _cube(tmp_path / "c.hdr")
    np.save(tmp_path / "letters.npy", np.full((24, 24), "a"))
    np.save(tmp_path / "halves.npy", np.tile(np.array([0.5, 1.5, 2.5, 0.0]), (24, 6)))
    (tmp_path / "folder").mkdir()
    out = tmp_path / "new" / "out"
    cases = [
        (["analyse", cube, "--method", "forest", "--roi", tmp_path / "letters.npy"], ["letters.npy", "numbers"]),
        (["detect", cube, "--method", "sam", "--targets", tmp_path / "letters.npy"], ["letters.npy", "numbers"]),
        (["analyse", cube, "--method", "forest", "--roi", tmp_path / "halves.npy"], ["halves.npy", "non-integer"]),
        (["analyse", cube, "--method", "kmeans", "--seed", "-1"], ["--seed"]),
        (["analyse", cube, "--method", "kmeans", "--sample", "0"], ["--sample"]),
        (["analyse", cube, "--method", "kmeans", "--sample", "2.5"], ["--sample"]),
        (["analyse", cube, "--method", "kmeans", "--roi-class", "0", "--roi", tmp_path / "halves.npy"],
         ["--roi-class"]),
        (["analyse", cube, "--method", "kmeans", "--bands", ""], ["--bands"]),
        (["analyse", cube, "--method", "kmeans", "--bands", "5-3"], ["--bands", "backwards"]),
        (["analyse", cube, "--method", "kmeans", "--param", "k=0"], ["k must be"]),
        (["analyse", cube, "--method", "gmm", "--param", "covariance=banana"], ["covariance"]),
        (["analyse", cube, "--method", "hac", "--param", "linkage=foo"], ["linkage"]),
        (["analyse", cube, "--method", "kmeans", "--param", "tol=nan"], ["tol"]),
        (["detect", cube, "--method", "rx", "--memory", "nan"], ["--memory"]),
        (["detect", cube, "--method", "rx", "--memory", "0"], ["--memory"]),
        (["detect", cube, "--method", "rx", "--threshold", "nan"], ["--threshold"]),
        (["detect", cube, "--method", "rx", "--threshold", "inf"], ["--threshold"]),
        (["detect", cube, "--method", "rx", "--far", "nan"], ["--far"]),
        (["detect", cube, "--method", "rbfn", "--targets", tmp_path / "folder"], ["folder"]),
        (["detect", cube, "--method", "rbfn", "--hidden", "1", "--targets", tmp_path / "halves.npy"], ["n_hidden"]),
    ]
    for argv, words in cases:
        rc, err = _cli([*argv, "--out", out], capsys)
        _one_clean_line(rc, err, *words)
        assert not (tmp_path / "new").exists(), argv  # a refused run leaves no folder
    rc, err = _cli(["detect", cube, "--method", "rx", "--out", ""], capsys)
    _one_clean_line(rc, err, "folder")
    rc, err = _cli(["run", tmp_path / "folder"], capsys)
    _one_clean_line(rc, err, "folder")


@pytest.mark.parametrize("field, value, words", [
    ("data ignore value", "banana", ["data ignore value", "banana"]),
    ("byte order", "7", ["byte order", "7"]),
    ("header offset", "-4", ["header offset"]),
    ("lines", "2.5", ["lines"]),
    ("reflectance scale factor", "0", ["reflectance scale factor"]),
    ("wavelength", "{400, 410}", ["2 wavelength value(s) for 8 bands"]),
    # a list whose '}' is missing runs into the next field (its text once filled the line)
    ("wavelength", "{400, 410, 420, 430, 440, 450, 460, 470\nfwhm = {1, 1, 1, 1, 1, 1, 1, 1}",
     ["'wavelength'", "not closed with '}'"]),
    ("bbl", "{1, 1, x, 1, 1, 1, 1, 1}", ["bbl"]),
    ("data type", "99", ["data type 99"]),
])
def test_bad_header_fields_are_refused_naming_the_field(tmp_path, capsys, field, value, words):
    cube = _cube(tmp_path / "c.hdr", header={field: value})
    for argv in (["info", cube], ["detect", cube, "--method", "rx", "--out", tmp_path / "o"]):
        rc, err = _cli(argv, capsys)
        _one_clean_line(rc, err, "c.hdr", *words)
    assert not (tmp_path / "o").exists()


def test_every_band_bad_is_named_as_such(tmp_path, capsys):
    cube = _cube(tmp_path / "c.hdr", bbl=[0] * 8)
    rc, err = _cli(["detect", cube, "--method", "rx", "--out", tmp_path / "o"], capsys)
    _one_clean_line(rc, err, "every band bad", "--all-bands")
    rc, _ = _cli(["detect", cube, "--method", "rx", "--all-bands", "--out", tmp_path / "o"], capsys)
    assert rc == 0


def test_class_ids_beyond_int16_keep_their_values(tmp_path, capsys):
    cube = _cube(tmp_path / "c.hdr")
    m = np.zeros((24, 24), np.int32)
    m[:8] = 70000
    m[12:] = 3
    np.save(tmp_path / "classes.npy", m)
    rc, err = _cli(["analyse", cube, "--method", "cart", "--roi", tmp_path / "classes.npy",
                    "--out", tmp_path / "o"], capsys)
    assert rc == 0, err
    hdr = (tmp_path / "o" / "labels.hdr").read_text()
    assert "data type = 3" in hdr  # int32: 70,000 does not wrap to 4464
    lab = np.fromfile(tmp_path / "o" / "labels.img", np.int32)
    assert set(np.unique(lab)) == {3, 70000}


def test_empty_or_complex_cubes_of_every_format_are_one_line(tmp_path, capsys):
    """An axis of length 0 (HDF5, .mat) or complex data: one line when the cube is opened, by info too
    (an internal error in a detector; complex data was cut to its real part without a word)."""
    import h5py
    import scipy.io

    with h5py.File(tmp_path / "zero.h5", "w") as f:
        f["d"] = np.zeros((32, 32, 0), np.float32)
    with h5py.File(tmp_path / "none.h5", "w") as f:
        f.create_dataset("d", shape=(0, 0, 0), dtype="f4")
    scipy.io.savemat(tmp_path / "zero.mat", {"data": np.zeros((32, 32, 0), np.float32)})
    with h5py.File(tmp_path / "cplx.h5", "w") as f:
        f["d"] = (np.ones((8, 8, 4)) + 1j).astype(np.complex64)
    for name, words in (("zero.h5", ("empty", "0 bands")), ("none.h5", ("empty",)), ("zero.mat", ("empty",)),
                        ("cplx.h5", ("complex",))):
        cube = tmp_path / name
        _one_clean_line(*_cli(["info", cube], capsys), name, *words)
        _one_clean_line(*_cli(["detect", cube, "--method", "rx", "--device", "cpu", "--out", tmp_path / "o"],
                              capsys), name, *words)
        _one_clean_line(*_cli(["analyse", cube, "--method", "kmeans", "--param", "k=2", "--device", "cpu",
                               "--out", tmp_path / "a"], capsys), name, *words)
    assert not (tmp_path / "o").exists() and not (tmp_path / "a").exists()


def test_outputs_never_replace_the_runs_own_inputs(tmp_path, capsys):
    """An output folder holding this run's cube, clicks or truth under an output's name: refused, the
    input untouched (the scores replaced the cube, objects.csv the clicks, and the run said it succeeded)."""
    import shutil

    src = _cube(tmp_path / "src" / "c.hdr")
    out = tmp_path / "out"
    out.mkdir()
    for ext in (".hdr", ".img"):
        shutil.copy(src.with_suffix(ext), out / f"scores{ext}")
    (out / "objects.csv").write_text("row,col\n5,5\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _one_clean_line(*_cli(["detect", out / "scores.hdr", "--method", "ace", "--targets", out / "objects.csv",
                           "--device", "cpu", "--out", out], capsys), "would overwrite an input", "another folder")
    _one_clean_line(*_cli(["detect", src, "--method", "ace", "--targets", out / "objects.csv", "--device", "cpu",
                           "--out", out], capsys), "objects.csv", "would overwrite an input")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _cli(["detect", out / "scores.hdr", "--method", "ace", "--targets", out / "objects.csv",
                 "--device", "cpu", "--out", tmp_path / "elsewhere"], capsys)[0] == 0


def test_models_and_options_that_would_be_ignored_or_misfit_are_refused(tmp_path, capsys):
    """A saved ACE model for another band count names its file; --save-model '' is not silently no
    model; FFBP trained on another scene refuses --far as a saved one does (it was ignored, and a threshold
    of 0 marked every pixel); a batch command without --headless says how to run it."""
    from hyperapp.io.samples import sample_path

    land = sample_path("land")
    cube = _cube(tmp_path / "c.hdr", bands=8)
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    assert _cli(["detect", land, "--method", "ace", "--targets", land.with_name("land_targets.csv"), "--device",
                 "cpu", "--save-model", tmp_path / "ace", "--out", tmp_path / "o1"], capsys)[0] == 0
    _one_clean_line(*_cli(["detect", cube, "--method", "ace", "--model", tmp_path / "ace.npz", "--device", "cpu",
                           "--out", tmp_path / "o2"], capsys), "ace.npz", "64 bands", "8")
    _one_clean_line(*_cli(["detect", cube, "--method", "ace", "--targets", tmp_path / "t.csv", "--save-model", "",
                           "--device", "cpu", "--out", tmp_path / "o3"], capsys), "--save-model")
    _one_clean_line(*_cli(["detect", land.with_name("sea.hdr"), "--method", "ffbp", "--train-from", land,
                           "--train-truth", land.with_name("land_truth.hdr"), "--far", "1e-3", "--device", "cpu",
                           "--out", tmp_path / "o4"], capsys), "--far", "--threshold", "--train-from")
    rc = main(["detect", str(cube), "--method", "ace"])
    err = capsys.readouterr().err
    _one_clean_line(rc, err, "--headless detect")
    assert not any((tmp_path / f"o{i}").exists() for i in (2, 3, 4))


def test_k_means_says_how_k_was_chosen_when_the_silhouette_cannot_say(tmp_path, capsys):
    from hyperapp.io.samples import sample_path

    land = sample_path("land")
    for sample, said in (("1", "elbow (silhouette undefined for every k)"),
                         ("3", "undefined for k = 3, 4: the sample is too small")):
        out = tmp_path / f"k{sample}"
        assert _cli(["analyse", land, "--method", "kmeans", "--param", "k=2..4", "--param",
                     f"silhouette_sample={sample}", "--device", "cpu", "--out", out], capsys)[0] == 0
        assert said in json.loads((out / "report.json").read_text())["results"]["criterion"]


def test_a_model_that_cannot_use_the_cube_names_the_cube(tmp_path, capsys):
    """A cube a model cannot fit or score (constant spectra): the line names the cube, where it named
    nothing."""
    import spectral.io.envi as envi

    hdr = tmp_path / "const.hdr"
    envi.save_image(str(hdr), np.full((16, 16, 8), 0.3, np.float32), dtype=np.float32, force=True, ext=".img")
    (tmp_path / "t.csv").write_text("row,col\n3,3\n")
    _one_clean_line(*_cli(["analyse", hdr, "--method", "kmeans", "--param", "k=2", "--device", "cpu", "--out",
                           tmp_path / "a"], capsys), "const.hdr: the selected spectra are all identical")
    _one_clean_line(*_cli(["detect", hdr, "--method", "mf", "--targets", tmp_path / "t.csv", "--device", "cpu",
                           "--out", tmp_path / "d"], capsys), "const.hdr: ", "a constant cube")


def test_degenerate_cubes_are_said_not_scored(tmp_path, capsys):
    """The class of the silent meaningless result: a cube whose pixels are all one spectrum (constant,
    all zeros, saturated) gave every detector a constant score map and an empty mask, exit 0, replacing
    an earlier good result; one band gave SAM and ACE scores of 1 or +-1. Now one line naming the cube,
    exit 2, the earlier output kept; the same cube with variation runs."""
    import spectral.io.envi as envi

    from hyperapp.models.registry import METHODS

    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    out = tmp_path / "out"
    good = _cube(tmp_path / "good.hdr")
    assert _cli(["detect", good, "--method", "ace", "--targets", tmp_path / "t.csv", "--out", out], capsys)[0] == 0
    before = (out / "scores.img").read_bytes()
    detectors = [n for n, m in METHODS.items() if m.kind in ("pixel", "window")]
    for name, value in (("same", 0.3), ("zeros", 0.0), ("saturated", 65535.0)):
        path = tmp_path / f"{name}.hdr"
        envi.save_image(str(path), np.full((24, 24, 8), value, np.float32), dtype=np.float32, force=True, ext=".img")
        for method in detectors:
            rc, err = _cli(["detect", path, "--method", method, "--targets", tmp_path / "t.csv", "--out", out],
                           capsys)
            _one_clean_line(rc, err, f"{name}.hdr: ")
            assert (out / "scores.img").read_bytes() == before, (name, method)  # the good result is kept
    for method in ("sam", "ace", "osp", "tcimf"):
        rc, err = _cli(["detect", good, "--bands", "3", "--method", method, "--targets", tmp_path / "t.csv",
                        "--out", out], capsys)
        _one_clean_line(rc, err, "good.hdr: ", "needs 2 bands or more")
    for method in ("rx", "mf", "cem", "rbfn"):  # in one band these still measure something
        assert _cli(["detect", good, "--bands", "3", "--method", method, "--targets", tmp_path / "t.csv",
                     "--out", tmp_path / method], capsys)[0] == 0


def test_a_target_at_the_background_mean_is_said(tmp_path, capsys):
    """A target whose spectrum is the scene's mean: the matched filter divided by its distance from the
    mean, ~0, and gave scores of +-900 with a mask of random background pixels, exit 0. Now one line
    for each statistical detector that measures from the mean; CEM (uncentred) still runs."""
    import spectral.io.envi as envi

    X = np.random.default_rng(3).uniform(0.1, 0.5, (24, 24, 20)).astype(np.float32)
    X[5, 5] = X.reshape(-1, 20).mean(axis=0)
    envi.save_image(str(tmp_path / "m.hdr"), X, dtype=np.float32, force=True, ext=".img")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    for method in ("mf", "ace", "mtmf", "mttcimf"):
        rc, err = _cli(["detect", tmp_path / "m.hdr", "--method", method, "--targets", tmp_path / "t.csv",
                        "--out", tmp_path / "o"], capsys)
        _one_clean_line(rc, err, "m.hdr: ", "the target spectrum is the background's mean")
        assert not (tmp_path / "o").exists()
    assert _cli(["detect", tmp_path / "m.hdr", "--method", "cem", "--targets", tmp_path / "t.csv",
                 "--out", tmp_path / "o"], capsys)[0] == 0


def test_pixels_without_data_are_said_and_marked_in_the_scores_header(tmp_path, capsys):
    """NaN and Inf pixels score NaN: the summary counts them and the scores' header names NaN its data
    ignore value (NaN sat in scores.img with nothing saying what it meant)."""
    import spectral.io.envi as envi

    X = np.random.default_rng(4).uniform(0.1, 0.5, (24, 24, 8)).astype(np.float32)
    X[20, 20, 3], X[21, 2] = np.nan, np.inf
    envi.save_image(str(tmp_path / "n.hdr"), X, dtype=np.float32, force=True, ext=".img")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    assert main(["--headless", "detect", str(tmp_path / "n.hdr"), "--method", "ace", "--targets",
                 str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    assert "2 pixels without data (NaN, Inf or the no-data value) scored NaN" in capsys.readouterr().out
    assert "data ignore value = NaN" in (tmp_path / "o" / "scores.hdr").read_text()
    s = np.fromfile(tmp_path / "o" / "scores.img", np.float32).reshape(24, 24)
    assert np.isnan(s[20, 20]) and np.isnan(s[21, 2]) and np.isfinite(s).sum() == 24 * 24 - 2
    # MNF fits on the whole image: its component images are NaN there too (it wrote values of ~1e-6, as if
    # they were data), its count leaves them out, and it says so
    assert main(["--headless", "analyse", str(tmp_path / "n.hdr"), "--method", "mnf", "--out",
                 str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "mnf on cpu: 574 spectra" in out and "2 pixel(s) without data" in out
    comp = np.fromfile(tmp_path / "m" / "components.img", np.float32).reshape(-1, 24, 24)
    assert np.isnan(comp[:, 20, 20]).all() and np.isnan(comp[:, 21, 2]).all() and np.isfinite(comp).sum() == comp.shape[0] * 574
    assert "data ignore value = NaN" in (tmp_path / "m" / "components.hdr").read_text()
    rep = json.loads((tmp_path / "m" / "report.json").read_text())
    assert min(rep["results"]["snr"]) >= 0  # an SNR, never the -1 of an eigenvalue under 1
    # MTMF's infeasibility map holds NaN there too, said in its header as the scores' is
    assert main(["--headless", "detect", str(tmp_path / "n.hdr"), "--method", "mtmf", "--targets",
                 str(tmp_path / "t.csv"), "--out", str(tmp_path / "mt")]) == 0
    assert "data ignore value = NaN" in (tmp_path / "mt" / "infeasibility.hdr").read_text()
    # and MNF on a constant cube is refused as every other analysis refuses it (it kept components of zeros)
    import spectral.io.envi as envi2

    envi2.save_image(str(tmp_path / "c.hdr"), np.full((24, 24, 8), 0.3, np.float32), dtype=np.float32, force=True,
                     ext=".img")
    rc = main(["--headless", "analyse", str(tmp_path / "c.hdr"), "--method", "mnf", "--out", str(tmp_path / "cm")])
    assert rc == 2 and "c.hdr: the selected spectra are all identical" in capsys.readouterr().err


def test_one_spectrum_marked_both_target_and_background_is_said(tmp_path, capsys):
    """A background click on a pixel holding exactly a target click's spectrum: the networks trained and
    marked it a target, without a word. Now one line naming both pixels; apart, they train."""
    import spectral.io.envi as envi

    X = np.random.default_rng(5).uniform(0.1, 0.5, (24, 24, 8)).astype(np.float32)
    X[4:7, 4:7] += 0.4
    X[20, 20] = X[5, 5]
    envi.save_image(str(tmp_path / "c.hdr"), X, dtype=np.float32, force=True, ext=".img")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    (tmp_path / "b.csv").write_text("row,col\n20,20\n15,2\n")
    (tmp_path / "b2.csv").write_text("row,col\n15,2\n")
    for method in ("rbfn", "ffbp"):
        rc, err = _cli(["detect", tmp_path / "c.hdr", "--method", method, "--targets", tmp_path / "t.csv",
                        "--background", tmp_path / "b.csv", "--out", tmp_path / "o"], capsys)
        _one_clean_line(rc, err, "c.hdr: ", "background pixel (row 20, col 20)", "target pixel (row 5, col 5)")
        assert _cli(["detect", tmp_path / "c.hdr", "--method", method, "--targets", tmp_path / "t.csv",
                     "--background", tmp_path / "b2.csv", "--out", tmp_path / method], capsys)[0] == 0


def test_band_ranges_take_the_k_range_syntax_too():
    """--bands took 10-20 where k takes 2..16: a tired user types one for the other. Both, and 2:16, name
    the same bands, ends included; a range longer than any cube is refused before it fills the memory."""
    from hyperapp.request import checks as options
    assert options.band_indices("5..9") == options.band_indices("5-9") == options.band_indices("5:9") == [5, 6, 7, 8, 9]
    assert options.band_indices("1, 3..4, 10") == [1, 3, 4, 10]
    with pytest.raises(InputError, match="spans 10,000,000,000 bands"):
        options.band_indices("0..9999999999")


def test_scores_tied_at_the_threshold_are_said(tmp_path, capsys):
    """A cube of three spectra, a quarter of it copies of the target: the 1e-3 threshold fell on their tied
    top score and the mask, taking only scores above it, came out empty, said as "0 pixels". Now the run
    says how many tie there and what to do."""
    import spectral.io.envi as envi

    rng = np.random.default_rng(6)
    spectra = rng.uniform(0.1, 0.6, (3, 12)).astype(np.float32)
    X = spectra[rng.integers(0, 3, (32, 32))]
    X[:8] = spectra[0]
    envi.save_image(str(tmp_path / "three.hdr"), X, dtype=np.float32, force=True, ext=".img")
    (tmp_path / "t.csv").write_text("row,col\n1,1\n")
    assert main(["--headless", "detect", str(tmp_path / "three.hdr"), "--method", "mf", "--targets",
                 str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["pixels_at_threshold"] >= 8 * 32 - 1
    assert f"{rep['pixels_at_threshold']} pixels score exactly the threshold" in out and "lower the threshold" in out
    from hyperapp.detect.finish import ties_words

    one = ties_words({"pixels_at_threshold": 1, "detections": 0, "threshold": 0.5})
    assert one.startswith("1 pixel scores exactly the threshold (0.5) and is left out") and one.endswith("take it")


def test_a_refusal_stays_one_printable_line(tmp_path, capsys):
    """A newline in a file's name, or a binary file's bytes quoted back, neither break the line nor reach the
    terminal as control codes (a spectra CSV of random bytes printed them)."""
    weird = tmp_path / "two\nlines.hdr"
    rc, err = _cli(["info", weird], capsys)
    _one_clean_line(rc, err, "two\\nlines.hdr", "not found")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    rc, err = _cli(["detect", _cube(tmp_path / "c.hdr"), "--method", "sam", "--target-spectra", binary,
                    "--out", tmp_path / "o"], capsys)
    _one_clean_line(rc, err, "binary.csv", "binary bytes")
    assert err.isprintable() or err.rstrip("\n").isprintable()


def test_an_errors_text_is_escaped_where_it_is_not_printable():
    err = InputError("line 2: not a row of numbers ('\x19\x7f\udcff')", "a\nb.csv")
    assert str(err) == "a\\nb.csv: line 2: not a row of numbers ('\\x19\\x7f\\udcff')"
    assert str(InputError("é ok")) == "é ok"
