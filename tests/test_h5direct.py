"""Direct reads of unfiltered HDF5 datasets (hyperapp.io.h5direct) give exactly h5py's values."""

import h5py
import numpy as np
import pytest

from hyperapp.io.h5direct import ChunkedDirect, direct_source

SELECTIONS = [np.s_[:, :, :], np.s_[3:17, 5:44, 2:40], np.s_[1:39:3, ::4, 5:47:5], np.s_[10:11, 0:50, 47:48],
              np.s_[0:40:7, 3:4, ::2]]


@pytest.mark.parametrize("userblock", [0, 512])
@pytest.mark.parametrize("dtype", ["<f4", ">i2", "<u2"])
@pytest.mark.parametrize("chunks", [None, (7, 5, 3), (40, 50, 48), (3, 50, 1)])
def test_direct_reads_equal_h5py(tmp_path, userblock, dtype, chunks):
    rng = np.random.default_rng(0)
    a = (rng.random((40, 50, 48)) * 1000).astype(dtype)
    p = tmp_path / "t.h5"
    with h5py.File(p, "w", **({"userblock_size": userblock} if userblock else {})) as f:
        f.create_dataset("x", data=a, chunks=chunks, fillvalue=7)
        if chunks is not None:  # only one chunk written: the others read as the fill value
            f.create_dataset("y", shape=a.shape, dtype=dtype, chunks=chunks, fillvalue=7)[0:2, 0:2, 0:1] = 1
    with h5py.File(p, "r") as f:
        for name in ("x", "y") if chunks is not None else ("x",):
            ds = f[name]
            src = direct_source(ds, p)
            assert isinstance(src, np.memmap if chunks is None else ChunkedDirect)
            ref = ds[()]
            for sel in SELECTIONS:
                got = np.asarray(src[sel])
                assert got.dtype == ref.dtype
                np.testing.assert_array_equal(got, ref[sel])
            if chunks is not None:
                dest = np.empty((13, 50, 48), ds.dtype)
                src.read_direct(dest, np.s_[20:33, :, :])
                np.testing.assert_array_equal(dest, ref[20:33])


def test_filtered_datasets_stay_h5py(tmp_path):
    p = tmp_path / "z.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.ones((4, 5, 6), np.float32), chunks=(2, 5, 6), compression="gzip")
    with h5py.File(p, "r") as f:
        assert isinstance(direct_source(f["x"], p), h5py.Dataset)
