"""Clumping and sieving of a detection mask (models/postprocess.py): against plain scipy.ndimage references,
on planted objects of known sizes; the CLI-string parsers; the GPU path against NumPy."""

import numpy as np
import pytest
from scipy import ndimage

from hyperapp.core.errors import InputError
from hyperapp.models.postprocess import (
    clump_mask,
    filter_mask,
    filter_objects,
    label_objects,
    parse_clump,
    parse_connectivity,
    parse_sieve,
)

FOUR = ndimage.generate_binary_structure(2, 1)
EIGHT = ndimage.generate_binary_structure(2, 2)


def _reference(mask, clump, sieve, connectivity):
    """The same filter from scipy.ndimage alone: binary_closing of the mask padded by clump // 2 unmarked
    pixels, then label + bincount."""
    m = mask.astype(bool)
    if clump > 1:
        r = clump // 2
        m = ndimage.binary_closing(np.pad(m, r), structure=np.ones((clump, clump), bool))[r:-r, r:-r]
    if sieve is None:
        return m
    lab, _ = ndimage.label(m, structure=EIGHT if connectivity == 8 else FOUR)
    sizes = np.bincount(lab.ravel())
    keep = sizes >= sieve[0]
    if sieve[1] is not None:
        keep &= sizes <= sieve[1]
    keep[0] = False
    return keep[lab]


def _planted():
    """Objects of known sizes: 1, 4 (2x2), 9 (3x3), 25 (5x5), 100 (10x10) pixels, a diagonal pair (one object
    with 8 neighbours, two with 4), and a 5x5 ring with a one-pixel hole touching the image's corner."""
    m = np.zeros((60, 70), bool)
    m[2, 40] = True                 # 1
    m[10:12, 10:12] = True          # 4
    m[20:23, 20:23] = True          # 9
    m[30:35, 30:35] = True          # 25
    m[45:55, 50:60] = True          # 100
    m[5, 60] = m[6, 61] = True      # diagonal pair
    m[0:5, 0:5] = True
    m[2, 2] = False                 # ring around one hole, at the corner
    return m


def _random_mask(shape, density, seed):
    rng = np.random.default_rng(seed)
    return ndimage.binary_opening(rng.random(shape) < density) | (rng.random(shape) < density / 4)


def test_sieve_keeps_objects_by_their_planted_sizes():
    m = _planted()
    lab, n = label_objects(m)
    assert n == 7
    out = filter_mask(m, sieve=(5, 30))
    kept = sorted(np.bincount(label_objects(out)[0].ravel())[1:].tolist())
    assert kept == [9, 24, 25]  # the ring has 24 pixels; 1, 2, 4 and 100 are out
    assert sorted(np.bincount(label_objects(filter_mask(m, sieve=(2, None)))[0].ravel())[1:].tolist()) == \
        [2, 4, 9, 24, 25, 100]
    # with 4 neighbours the diagonal pair is two objects of one pixel: a sieve of 2 removes both
    four = filter_mask(m, sieve=(2, None), connectivity=4)
    assert not four[5, 60] and not four[6, 61] and four[10, 10]
    assert np.array_equal(filter_mask(m, sieve=(1, None)), m)


def test_clump_fills_holes_and_keeps_the_edge():
    m = _planted()
    out = clump_mask(m, 3)
    assert out[2, 2]  # the ring's hole is filled
    assert np.all(out[m])  # the closing keeps every marked pixel, at the image's edge too
    assert not np.all(ndimage.binary_closing(m, np.ones((3, 3), bool))[m])  # scipy's default border would not
    assert np.array_equal(clump_mask(m, 1), m)
    # two 3x3 squares one column apart become one 3x7 object
    g = np.zeros((20, 20), bool)
    g[5:8, 5:8] = g[5:8, 9:12] = True
    c = clump_mask(g, 3)
    assert c[5:8, 5:12].all() and c.sum() == 21 and label_objects(c)[1] == 1
    assert np.array_equal(clump_mask(g, 5), c)  # a wider kernel fills no more here (no corner to round)


@pytest.mark.parametrize("clump", [0, 1, 3, 5, 9])
@pytest.mark.parametrize("sieve", [None, (1, None), (3, None), (4, 40), (20, 20)])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_filter_equals_the_scipy_reference(clump, sieve, connectivity):
    for seed, shape, density in ((0, (64, 80), 0.08), (1, (37, 29), 0.3), (2, (1, 50), 0.3), (3, (50, 1), 0.4)):
        m = _random_mask(shape, density, seed)
        if shape[0] == 1 or shape[1] == 1:
            m = np.random.default_rng(seed).random(shape) < density
        got = filter_mask(m, clump=clump, sieve=sieve, connectivity=connectivity)
        ref = _reference(m, clump, sieve, connectivity)
        assert got.dtype == bool and got.shape == m.shape
        assert np.array_equal(got, ref), (seed, clump, sieve, connectivity)
        fm, lab, n = filter_objects(m, clump=clump, sieve=sieve, connectivity=connectivity)
        ref_lab, ref_n = label_objects(ref, connectivity)
        assert np.array_equal(fm, ref) and n == ref_n and np.array_equal(lab, ref_lab)


def test_clump_larger_than_the_image():
    m = np.zeros((4, 6), bool)
    m[0, 0] = m[3, 5] = True
    assert np.array_equal(filter_mask(m, clump=11), _reference(m, 11, None, 8))


def test_parsers():
    assert parse_sieve("5..500") == (5, 500)
    assert parse_sieve(" 5 .. 5 ") == (5, 5)
    assert parse_sieve("5") == (5, None) == parse_sieve(5) == parse_sieve([5])
    assert parse_sieve([5, 500]) == (5, 500) == parse_sieve((5, "500"))
    assert parse_sieve(None) is None and parse_sieve("") is None
    assert parse_clump("3") == 3 and parse_clump(0) == 0 and parse_clump(None) == 0 and parse_clump(1) == 1
    assert parse_connectivity("4") == 4 and parse_connectivity(8) == 8


@pytest.mark.parametrize("fn,value,words", [
    (parse_sieve, "5..2", "MAX (2) is below its MIN (5)"),
    (parse_sieve, "0", "MIN must be a whole number of pixels, 1 or more"),
    (parse_sieve, "a..5", "MIN or MIN..MAX"),
    (parse_sieve, "5-500", "MIN or MIN..MAX"),
    (parse_sieve, "5..", "MIN or MIN..MAX"),
    (parse_sieve, [1, 2, 3], "MIN or MIN..MAX"),
    (parse_sieve, 2.5, "MIN must be a whole number"),
    (parse_clump, "4", "odd whole number"),
    (parse_clump, "-3", "odd whole number"),
    (parse_clump, "x", "odd whole number"),
    (parse_connectivity, "6", "4 or 8"),
    (parse_connectivity, True, "4 or 8"),
])
def test_parsers_refuse_in_one_line(fn, value, words):
    with pytest.raises(InputError) as e:
        fn(value, name="--opt")
    msg = str(e.value)
    assert words in msg and "\n" not in msg and "--opt" in msg
    assert isinstance(e.value, ValueError)


def test_filter_mask_checks_its_arguments():
    m = _planted()
    for kw in ({"clump": 2}, {"sieve": (5, 4)}, {"connectivity": 6}, {"sieve": "x"}):
        with pytest.raises(ValueError):
            filter_mask(m, **kw)
    with pytest.raises(InputError, match="rows, cols"):
        filter_mask(m[None], sieve=(2, None))
    assert np.array_equal(filter_mask(m, clump="3", sieve="2..30", connectivity="4"),
                          _reference(m, 3, (2, 30), 4))


@pytest.mark.gpu
@pytest.mark.parametrize("connectivity", [4, 8])
def test_filter_on_the_gpu_equals_numpy(cp, connectivity):
    for seed, shape, density in ((0, (300, 257), 0.06), (1, (129, 1031), 0.25), (2, (1, 700), 0.5)):
        m = _random_mask(shape, density, seed) if shape[0] > 1 else np.random.default_rng(seed).random(shape) < 0.5
        lab, n = label_objects(cp.asarray(m), connectivity)
        ref_lab, ref_n = label_objects(m, connectivity)
        assert n == ref_n and np.array_equal(lab.get(), ref_lab)
        for clump, sieve in ((0, (3, None)), (5, None), (3, (4, 60)), (7, (1, 500))):
            got = filter_mask(cp.asarray(m), clump=clump, sieve=sieve, connectivity=connectivity)
            assert isinstance(got, cp.ndarray)
            assert np.array_equal(got.get(), filter_mask(m, clump=clump, sieve=sieve, connectivity=connectivity))
            gm, glab, gn = filter_objects(cp.asarray(m), clump=clump, sieve=sieve, connectivity=connectivity)
            fm, flab, fn = filter_objects(m, clump=clump, sieve=sieve, connectivity=connectivity)
            assert gn == fn and np.array_equal(glab.get(), flab) and np.array_equal(gm.get(), fm)
