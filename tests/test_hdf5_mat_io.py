"""HDF5 and MATLAB cubes and masks: layouts, wavelengths, variable choice and errors."""

import h5py
import numpy as np
import pytest
import scipy.io

from hyperapp.core.errors import CubeFormatError, InputError
from hyperapp.io import open_cube, read_labels, read_mask


@pytest.fixture
def data():
    return np.random.default_rng(3).random((6, 8, 5)).astype(np.float32)


def test_hdf5_bands_last_with_wavelength_attribute(tmp_path, data):
    p = tmp_path / "a.h5"
    with h5py.File(p, "w") as f:
        ds = f.create_dataset("grp/radiance", data=data)
        ds.attrs["wavelength"] = np.arange(5) * 10.0 + 400
    cube = open_cube(p)
    np.testing.assert_array_equal(cube.read(), data)
    assert cube.wavelengths.tolist() == [400, 410, 420, 430, 440]


def test_hdf5_bands_first_detected_from_sibling_wavelengths(tmp_path, data):
    p = tmp_path / "b.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("cube", data=np.transpose(data, (2, 0, 1)))
        f.create_dataset("wavelengths", data=np.arange(5.0))
    cube = open_cube(p)
    assert cube.shape == (6, 8, 5)
    np.testing.assert_array_equal(cube.read(), data)
    np.testing.assert_array_equal(cube.subset_bands([4, 0]).read(slice(1, 3)), data[1:3][:, :, [4, 0]])


def test_hdf5_layout_attribute_wins(tmp_path):
    d = np.random.default_rng(0).random((5, 5, 5)).astype(np.float32)
    p = tmp_path / "c.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("cube", data=np.transpose(d, (2, 0, 1))).attrs["interleave"] = "bsq"
    np.testing.assert_array_equal(open_cube(p).read(), d)


def test_hdf5_named_dataset_and_errors(tmp_path, data):
    p = tmp_path / "d.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("one", data=data)
        f.create_dataset("two", data=data)
    with pytest.raises(CubeFormatError, match="several 3-D datasets"):
        open_cube(p)
    np.testing.assert_array_equal(open_cube(p, "two").read(), data)
    with pytest.raises(CubeFormatError, match="no dataset 'three'"):
        open_cube(p, "three")
    q = tmp_path / "e.h5"
    with h5py.File(q, "w") as f:
        f.create_dataset("flat", data=np.zeros((4, 4)))
    with pytest.raises(CubeFormatError, match="no 3-D numeric dataset"):
        open_cube(q)


def test_sample_scene_hdf5_equals_envi(land_hdr):
    a = open_cube(land_hdr)
    b = open_cube(land_hdr.with_suffix(".h5"))
    np.testing.assert_array_equal(a.read(), b.read())
    np.testing.assert_allclose(a.wavelengths, b.wavelengths, atol=0.01)


def test_mat_v5_guess_and_named(tmp_path, data):
    p = tmp_path / "s.mat"
    truth = (data[:, :, 0] > 0.5).astype(np.uint8)
    scipy.io.savemat(p, {"data": data, "map": truth})
    np.testing.assert_array_equal(open_cube(p).read(), data)
    np.testing.assert_array_equal(read_mask(p, (6, 8), "map"), truth)
    with pytest.raises(CubeFormatError, match="no 3-D cube variable 'cube'"):
        open_cube(p, "cube")
    with pytest.raises(CubeFormatError, match="no 2-D mask variable 'gt'"):
        read_mask(p, (6, 8), "gt")


def test_mat_v73_is_hdf5_transposed(tmp_path, data):
    # MATLAB -v7.3 writes HDF5 after a 512-byte header, arrays in column-major order
    p = tmp_path / "v73.mat"
    with h5py.File(p, "w", userblock_size=512) as f:
        f.create_dataset("data", data=np.transpose(data, (2, 1, 0)))
        f.create_dataset("map", data=(data[:, :, 0] > 0.5).astype(np.uint8).T)
    with open(p, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file".ljust(128, b" "))
    np.testing.assert_array_equal(open_cube(p).read(), data)
    np.testing.assert_array_equal(read_mask(p, (6, 8)), (data[:, :, 0] > 0.5).astype(np.uint8))


def test_masks_png_npy_envi_and_shape_errors(tmp_path, land_hdr):
    from PIL import Image

    m = np.zeros((6, 8), np.uint8)
    m[2, 3] = 1
    np.save(tmp_path / "m.npy", m)
    Image.fromarray(m * 255).save(tmp_path / "m.png")
    assert read_labels(tmp_path / "m.npy", (6, 8)).sum() == 1
    assert read_labels(tmp_path / "m.png", (6, 8))[2, 3]
    assert read_mask(land_hdr.with_name("land_truth.hdr"), (128, 128)).sum() > 0
    with pytest.raises(InputError, match="mask is 6x8 but the cube is 5x5"):
        read_mask(tmp_path / "m.npy", (5, 5))
    np.save(tmp_path / "nan.npy", np.full((6, 8), np.nan))
    with pytest.raises(InputError, match="NaN"):
        read_mask(tmp_path / "nan.npy", (6, 8))


def test_pixel_csv(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("row,col\n1,2\n3,4\n")
    assert read_labels(p, (5, 5)).sum() == 2
    p.write_text("row,col\n1,2\n9,4\n")
    with pytest.raises(InputError, match=r"line 3: pixel \(9, 4\) is outside the 5x5 image"):
        read_labels(p, (5, 5))
    p.write_text("1,x\n")
    with pytest.raises(InputError, match="line 1"):
        read_labels(p, (5, 5))
