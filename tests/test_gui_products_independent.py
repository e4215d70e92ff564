"""The window on the independently built products (tests/independent_products.py): each opens, with its
wavelengths on the spectrum's axis and the place of the pixel under the cursor within half a pixel."""

import re

import numpy as np
import pytest

from .independent_products import BUILDERS, TARGETS

pytest.importorskip("pytestqt")

NAMES = ("emit", "prisma", "enmap_cog", "aviris", "tanager", "tanager_basic", "desis")


@pytest.mark.parametrize("name", NAMES)
def test_the_window_opens_the_product_and_says_where_the_cursor_is(win, tmp_path, name):
    from .test_products_independent import _pixel_error

    p = BUILDERS[name](tmp_path)
    assert win.open_cube(p.path)
    cube = win.session.base_cube
    assert cube.wavelengths is not None and cube.bands >= 40
    # the spectrum's axis is the product's wavelengths, in nm
    np.testing.assert_allclose(win.spectrum.x, np.asarray(cube.wavelengths, float))
    assert (
        win.spectrum.x.min() >= p.wavelengths.min() - 0.01
        and win.spectrum.x.max() <= p.wavelengths.max() + 0.01
    )
    assert "wavelength (n" in win.spectrum.getAxis("bottom").labelText.lower()
    r, c = TARGETS[2]
    win._hover(r, c)
    msg = win.statusBar().currentMessage()
    m = re.search(r"lon (-?[0-9.]+), lat (-?[0-9.]+)", msg)
    assert f"row {r}, col {c}" in msg and m, msg
    err = _pixel_error(p, r, c, float(m.group(1)), float(m.group(2)))
    assert np.all(np.abs(err) <= 0.5), (name, err, msg)
