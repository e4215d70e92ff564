"""Products damaged the way downloads are (from a tired user's sweep): each class ends in one line naming
the file, or opens with a note saying what could not be used, never an internal error or a silent
downgrade."""

import numpy as np
import pytest

from hyperapp.core.errors import CubeFormatError
from hyperapp.io import open_cube

from .product_files import write_desis, write_emit, write_prisma

h5py = pytest.importorskip("h5py")


def _edit(path, fn):
    with h5py.File(path, "r+") as f:
        fn(f)
    return path


@pytest.mark.parametrize("values", [0.0, np.nan, 500.0])
def test_emit_wavelengths_that_place_no_band_are_refused(tmp_path, values):
    path, _ = write_emit(tmp_path)
    _edit(path, lambda f: f["sensor_band_parameters/wavelengths"].__setitem__(slice(None), values))
    with pytest.raises(CubeFormatError, match="wavelengths") as e:
        open_cube(path)
    assert e.value.path and str(path) in str(e.value.path)


def test_prisma_pieces_of_different_sizes_are_a_format_error_not_an_internal_one(tmp_path):
    path, _ = write_prisma(tmp_path)

    def shrink(f):
        sw = [k for k in f["HDFEOS/SWATHS"]][0]
        g = f[f"HDFEOS/SWATHS/{sw}/Data Fields"]
        a = g["SWIR_Cube"][:30]
        del g["SWIR_Cube"]
        g["SWIR_Cube"] = a
    _edit(path, shrink)
    with pytest.raises(CubeFormatError):
        open_cube(path)


def test_prisma_without_swir_says_so(tmp_path):
    path, _ = write_prisma(tmp_path)
    _edit(path, lambda f: f[f"HDFEOS/SWATHS/{list(f['HDFEOS/SWATHS'])[0]}/Data Fields"].__delitem__("SWIR_Cube"))
    cube = open_cube(path)
    assert any("SWIR bands are missing" in n for n in cube.notes)


@pytest.mark.parametrize("how", ["outside", "zero"])
def test_an_unusable_glt_is_left_out_with_a_note(tmp_path, how):
    path, _ = write_emit(tmp_path)
    _edit(path, lambda f: f["location/glt_x"].__setitem__(slice(None), 10_000 if how == "outside" else 0))
    cube = open_cube(path)
    assert cube.geo is not None and cube.geo.glt is None
    assert any("GLT is left out" in n for n in cube.notes)


def test_lat_lon_of_another_shape_are_said_not_silently_dropped(tmp_path):
    path, _ = write_emit(tmp_path)

    def reshape(f):
        del f["location/lat"]
        f["location/lat"] = np.zeros((10, 7))
    _edit(path, reshape)
    cube = open_cube(path)
    assert cube.geo is None and any("do not match" in n for n in cube.notes)


def test_a_desis_header_with_a_wavelength_list_of_another_length_is_refused(tmp_path):
    path, _ = write_desis(tmp_path)
    hdr = next(p for p in tmp_path.rglob("*.hdr"))
    text = hdr.read_text()
    start = text.index("wavelength = {") + len("wavelength = {")
    hdr.write_text(text[:start] + text[start:].split(",", 1)[1])  # one value fewer
    with pytest.raises(CubeFormatError, match="wavelength"):
        open_cube(path)
