"""The GMM posterior has one home, hyperapp.analyse.run.posterior_image: the window's Posterior tab and the
CLI's and batch's posterior.hdr both come from it."""

import numpy as np
import pytest


def _fit(land_hdr, device="cpu"):
    from hyperapp.analyse.run import run_analysis
    from hyperapp.io import open_cube
    from hyperapp.request import AnalyseRequest

    cube = open_cube(land_hdr).good_bands()
    res = run_analysis(cube, AnalyseRequest("gmm", params={"k": "3", "covariance": "diag"}, select="sample", sample=2000, device=device))
    return cube, res


def test_posterior_image_and_its_file(land_hdr, tmp_path):
    from hyperapp.analyse.run import posterior_image, write_analysis
    from hyperapp.core.backend import get_backend
    from hyperapp.io import open_cube

    cube, res = _fit(land_hdr)
    post = posterior_image(res.model, cube, get_backend("cpu"))  # read tile by tile from the file
    assert post.shape == (128, 128, 3) and post.dtype == np.float32
    np.testing.assert_allclose(post.sum(axis=2), 1.0, atol=1e-4)
    P = cube.read().reshape(-1, cube.bands)
    np.testing.assert_allclose(post.reshape(-1, 3), np.asarray(res.model.predict_proba(P)), atol=1e-5)
    paths = write_analysis(res, tmp_path / "gmm", cube)
    on_disk = open_cube(paths["posterior"]).read()
    np.testing.assert_allclose(on_disk, post, atol=1e-6)
    # the labels are the most probable component
    np.testing.assert_array_equal(np.argmax(post, axis=2), res.labels)


@pytest.mark.gpu
def test_posterior_image_on_the_gpu(cp, land_hdr):
    from hyperapp.analyse.run import posterior_image
    from hyperapp.core.backend import get_backend
    from hyperapp.core.progress import NULL_PROGRESS
    from hyperapp.detect.run import load_pixels

    cube, res = _fit(land_hdr, "gpu")
    gpu = get_backend("gpu")
    image = load_pixels(cube, gpu, NULL_PROGRESS)
    on_device = posterior_image(res.model, cube, gpu, image)
    from_file = posterior_image(res.model, cube, gpu)
    assert isinstance(on_device, np.ndarray) and on_device.shape == (128, 128, 3)
    np.testing.assert_allclose(on_device, from_file, atol=1e-5)
    np.testing.assert_allclose(on_device.sum(axis=2), 1.0, atol=1e-4)
