"""Inputs that end in one line naming the culprit (exit 2, nothing written), each a class of its own:
a link to a missing HDF5 file, a library with no number, a budget too large to count, a target mask that
marks nothing, a model file named as an image; and a Latin-1 header simply opens."""

import shutil

import numpy as np
import pytest

from hyperapp.cli import main

from .refusal_helpers import _cli
from .refusal_helpers import _one_clean_line as _one_line


@pytest.mark.parametrize("named", [False, True])
def test_an_hdf5_link_to_a_missing_file_is_named(tmp_path, capsys, named):
    h5py = pytest.importorskip("h5py")
    p = tmp_path / "linked.h5"
    with h5py.File(p, "w") as f:
        f["cube"] = h5py.ExternalLink("gone.h5", "/data")
        f["soft"] = h5py.SoftLink("/nowhere")
    rc, err = _cli(["info", p, *(["--dataset", "cube"] if named else [])], capsys)
    _one_line(rc, err, "linked.h5", *(["gone.h5", "external link"] if named else []))


@pytest.mark.parametrize("text", ["wavelength,a\n400,nan\n500,nan\n600,nan\n", "400 nan\n500 nan\n600 nan\n",
                                  "nan nan\nnan nan\n"])
def test_a_library_of_nan_is_refused_naming_it(tmp_path, capsys, land_hdr, text):
    lib = tmp_path / "empty.txt"
    lib.write_text(text)
    rc, err = _cli(["detect", land_hdr, "--method", "sam", "--target-spectra", lib, "--out", tmp_path / "o"],
                   capsys)
    _one_line(rc, err, "empty.txt")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("gb", ["1e308", "1e7"])
def test_a_memory_budget_beyond_counting_is_refused(tmp_path, capsys, land_hdr, gb):
    targets = land_hdr.with_name("land_targets.csv")
    rc, err = _cli(["detect", land_hdr, "--method", "ace", "--targets", targets, "--memory", gb,
                    "--out", tmp_path / "o"], capsys)
    _one_line(rc, err, "--memory")
    assert not (tmp_path / "o").exists()


def test_a_latin1_header_opens(tmp_path, capsys, land_hdr):
    raw = land_hdr.read_bytes()
    i = raw.index(b"description = {") + len(b"description = {")
    hdr = tmp_path / "latin.hdr"
    hdr.write_bytes(raw[:i] + "units \xb5m; ".encode("latin-1") + raw[i:])
    shutil.copy(land_hdr.with_suffix(".img"), tmp_path / "latin.img")
    rc = main(["--headless", "info", str(hdr)])
    assert rc == 0 and "128 rows" in capsys.readouterr().out
    from hyperapp.io import open_cube

    assert open_cube(hdr).bands == 64


def test_an_empty_target_mask_is_named_not_the_cube(tmp_path, capsys, land_hdr):
    np.save(tmp_path / "none.npy", np.zeros((128, 128), np.uint8))
    rc, err = _cli(["detect", land_hdr, "--method", "rbfn", "--targets", tmp_path / "none.npy",
                    "--out", tmp_path / "o"], capsys)
    _one_line(rc, err, "none.npy", "marks no target pixel")
    assert "land.hdr" not in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["model.img", "model.hdr", "model.tif"])
def test_a_model_file_named_as_an_image_is_refused(tmp_path, capsys, land_hdr, name):
    targets = land_hdr.with_name("land_targets.csv")
    rc, err = _cli(["detect", land_hdr, "--method", "sam", "--targets", targets, "--save-model",
                    tmp_path / name, "--out", tmp_path / "o"], capsys)
    _one_line(rc, err, name, ".npz")
    assert list(tmp_path.iterdir()) == []


def test_a_model_name_without_extension_gets_npz(tmp_path, capsys, land_hdr):
    targets = land_hdr.with_name("land_targets.csv")
    rc = main(["--headless", "detect", str(land_hdr), "--method", "sam", "--targets", str(targets),
               "--save-model", str(tmp_path / "model"), "--out", str(tmp_path / "o")])
    assert rc == 0 and (tmp_path / "model.npz").is_file()
    assert "model.npz" in capsys.readouterr().out
