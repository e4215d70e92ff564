"""ENVI round trips through Spectral Python, memory mapping, and the ENVI error cases."""


import numpy as np
import pytest
import spectral.io.envi as envi

from hyperapp.core.errors import CubeFormatError, CubeNotFoundError
from hyperapp.io import open_cube

DTYPES = {1: np.uint8, 2: np.int16, 3: np.int32, 4: np.float32, 5: np.float64, 12: np.uint16,
          13: np.uint32, 14: np.int64, 15: np.uint64}


def _write(tmp_path, data, interleave, byteorder, ext=".img", offset=0):
    hdr = tmp_path / "c.hdr"
    envi.save_image(str(hdr), data, dtype=data.dtype, interleave=interleave, byteorder=byteorder, ext=ext,
                    force=True, metadata={"wavelength": [str(400 + 10 * i) for i in range(data.shape[2])],
                                          "wavelength units": "nm", "default bands": ["3", "2", "1"],
                                          "bbl": ["1"] * (data.shape[2] - 1) + ["0"]})
    if offset:
        img = tmp_path / f"c{ext}"
        raw = img.read_bytes()
        img.write_bytes(b"\0" * offset + raw)
        text = hdr.read_text().replace("header offset = 0", f"header offset = {offset}")
        hdr.write_text(text)
    return hdr


@pytest.mark.parametrize("code", sorted(DTYPES))
@pytest.mark.parametrize("interleave", ["bsq", "bil", "bip"])
@pytest.mark.parametrize("byteorder", [0, 1])
def test_roundtrip_every_interleave_dtype_byteorder(tmp_path, code, interleave, byteorder):
    rng = np.random.default_rng(code)
    data = (rng.random((7, 9, 5)) * 100).astype(DTYPES[code])
    hdr = _write(tmp_path, data, interleave, byteorder)
    cube = open_cube(hdr)
    assert cube.shape == (7, 9, 5)
    assert cube.interleave == interleave
    assert cube.byte_order == ("big" if byteorder else "little")
    np.testing.assert_array_equal(cube.read(dtype=data.dtype), data)
    np.testing.assert_array_equal(cube.read(slice(2, 5), slice(1, 8)), data[2:5, 1:8].astype(np.float32))
    assert cube.default_bands == (2, 1, 0)
    assert cube.bad_bands.tolist() == [False] * 4 + [True]
    assert cube.good_bands().bands == 4


@pytest.mark.parametrize("ext", ["", ".img", ".dat", ".raw", ".bsq", ".bil", ".bip"])
def test_data_file_extensions_and_opening_by_data_file(tmp_path, ext):
    data = np.arange(4 * 5 * 3, dtype=np.int16).reshape(4, 5, 3)
    hdr = _write(tmp_path, data, "bil", 0, ext=ext)
    np.testing.assert_array_equal(open_cube(hdr).read(dtype=np.int16), data)
    if ext:
        np.testing.assert_array_equal(open_cube(tmp_path / f"c{ext}").read(dtype=np.int16), data)


def test_header_offset(tmp_path):
    data = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    hdr = _write(tmp_path, data, "bsq", 0, offset=128)
    np.testing.assert_array_equal(open_cube(hdr).read(), data)


def test_subsetting_reads_the_right_pixels(tmp_path):
    data = np.random.default_rng(0).random((12, 10, 6)).astype(np.float32)
    cube = open_cube(_write(tmp_path, data, "bsq", 0))
    sub = cube.subset(slice(2, 11, 2), slice(3, 9)).subset_bands([5, 1, 2])
    np.testing.assert_array_equal(sub.read(), data[2:11:2, 3:9][:, :, [5, 1, 2]])
    np.testing.assert_array_equal(sub.subset(slice(1, 3), slice(None)).read(), data[4:7:2, 3:9][:, :, [5, 1, 2]])
    assert sub.wavelengths.tolist() == [450.0, 410.0, 420.0]
    tiles = list(cube.iter_tiles(tile_bytes=10 * 6 * 4 * 5))
    assert [t[0].stop - t[0].start for t in tiles] == [5, 5, 2]
    np.testing.assert_array_equal(np.concatenate([t[1] for t in tiles]), data)


def test_two_gigabyte_cube_opens_at_once_and_reads_in_tiles(tmp_path):
    rows, cols, bands = 4096, 2048, 128  # int16: 2 GiB, a sparse file
    hdr = tmp_path / "big.hdr"
    hdr.write_text(f"ENVI\nsamples = {cols}\nlines = {rows}\nbands = {bands}\nheader offset = 0\n"
                   "data type = 2\ninterleave = bip\nbyte order = 0\n")
    with open(tmp_path / "big.img", "wb") as fh:
        fh.seek(rows * cols * bands * 2 - 2)
        fh.write(np.int16(7).tobytes())
    cube = open_cube(hdr)  # how fast it opens is the bench's to measure, not CI's
    assert cube.nbytes == 2 * 2**30
    rows_per_tile = cube.tile_rows()
    assert rows_per_tile * cols * bands * 4 <= 64 * 2**20
    rs, block = next(cube.iter_tiles())
    assert block.shape == (rows_per_tile, cols, bands) and block.dtype == np.float32
    assert cube.read(slice(rows - 1, rows), slice(cols - 1, cols))[0, 0, -1] == 7


def test_truncated_data_file(tmp_path):
    data = np.ones((6, 6, 4), np.int16)
    hdr = _write(tmp_path, data, "bsq", 0)
    img = tmp_path / "c.img"
    img.write_bytes(img.read_bytes()[:100])
    with pytest.raises(CubeFormatError, match="truncated"):
        open_cube(hdr)


def test_header_with_wrong_sizes(tmp_path):
    hdr = _write(tmp_path, np.ones((6, 6, 4), np.int16), "bsq", 0)
    hdr.write_text(hdr.read_text().replace("lines = 6", "lines = 60"))
    with pytest.raises(CubeFormatError, match="header's sizes"):
        open_cube(hdr)


def test_a_data_file_larger_than_its_header_says_is_refused(tmp_path):
    """A header with too few bands, or a smaller data type, over a larger file was read without a word
    (scores of nothing, exit 0); a few stray bytes past the end (less than a band) are let be."""
    hdr = _write(tmp_path, np.ones((6, 6, 4), np.int16), "bsq", 0)
    text = "\n".join(ln for ln in hdr.read_text().splitlines() if not ln.lower().startswith(("wavelength", "fwhm", "bbl")))
    hdr.write_text(text.replace("bands = 4", "bands = 3"))
    with pytest.raises(CubeFormatError, match="c.img: data file holds 288 bytes, 1 band more than its header"):
        open_cube(hdr)
    hdr.write_text(text.replace("data type = 2", "data type = 1"))
    with pytest.raises(CubeFormatError, match="4 bands more than its header describes"):
        open_cube(hdr)
    hdr.write_text(text)
    img = tmp_path / "c.img"
    img.write_bytes(img.read_bytes() + b"\0" * 8)
    assert open_cube(hdr).shape == (6, 6, 4)


def test_unknown_data_type(tmp_path):
    hdr = _write(tmp_path, np.ones((6, 6, 4), np.int16), "bsq", 0)
    hdr.write_text(hdr.read_text().replace("data type = 2", "data type = 8"))
    with pytest.raises(CubeFormatError, match="unsupported ENVI data type 8"):
        open_cube(hdr)


def test_missing_header_and_missing_files(tmp_path):
    (tmp_path / "lonely.img").write_bytes(b"\0" * 64)
    with pytest.raises(CubeNotFoundError, match="no ENVI header"):
        open_cube(tmp_path / "lonely.img")
    with pytest.raises(CubeNotFoundError, match="not found"):
        open_cube(tmp_path / "nothing.hdr")
    (tmp_path / "h.hdr").write_text("ENVI\nsamples = 2\nlines = 2\nbands = 1\ndata type = 1\ninterleave = bsq\n")
    with pytest.raises(CubeNotFoundError, match=r"no data file .*looked for h, h\.img, h\.dat") as got:
        open_cube(tmp_path / "h.hdr")
    assert "(none)" not in str(got.value)  # the names looked for, the extension-less one too
    # a header cut short before its interleave: named as the header's problem, where the library's words
    # came about the data file
    (tmp_path / "h.img").write_bytes(b"\0" * 4)
    (tmp_path / "h.hdr").write_text("ENVI\nsamples = 2\nlines = 2\nbands = 1\ndata type = 1\n")
    with pytest.raises(CubeFormatError, match=r"h\.hdr: header lacks the required field 'interleave'"):
        open_cube(tmp_path / "h.hdr")


def test_not_a_header(tmp_path):
    (tmp_path / "x.hdr").write_text("hello\n")
    (tmp_path / "x.img").write_bytes(b"\0" * 8)
    with pytest.raises(CubeFormatError, match="not an ENVI header"):
        open_cube(tmp_path / "x.hdr")
