"""Screenshots of the window with each sensor product open: a tiny product file of each kind
(``tests/product_files.py``) opened one after another in one window through File > Open cube, the cursor
moved over a known pixel (a real mouse-move event on the image), the window grabbed. Prints, per product,
what the window says under the cursor beside the file's truth.

    QT_QPA_PLATFORM=offscreen python scripts/screenshot_products.py OUTDIR [1366x768] [1920x1080:emit,prisma]

PNGs are named ``NN-PRODUCT-SIZE.png``; the second size (optional) is taken for the products listed after
its colon, opened again in the same window after the others.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

#: the pixel the cursor is put over (row, col): a planted target of tests/product_files.py
PIXEL = (12, 30)


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's tests/ (its product writers)
from tests.gui_actions import move_mouse_to_pixel, open_from_menu  # noqa: E402


def products(folder: Path) -> dict:
    """{name: (path to open, truth)}: every product kind tests/product_files.py writes."""
    from tests import product_files as pf

    out = {}
    for name, write, kw in (("emit-l2a", pf.write_emit, {"level": "L2A"}), ("emit-l1b", pf.write_emit, {"level": "L1B"}),
                            ("prisma-l2d", pf.write_prisma, {"level": "L2D"}),
                            ("prisma-l1", pf.write_prisma, {"level": "L1"}),
                            ("enmap-l2a", pf.write_enmap, {"level": "L2A"}),
                            ("enmap-l1b", pf.write_enmap, {"level": "L1B"}),
                            ("aviris3-nc", pf.write_aviris_nc, {}), ("tanager", pf.write_tanager, {}),
                            ("desis", pf.write_desis, {}), ("geotiff", pf.write_geotiff, {})):
        sub = folder / name
        sub.mkdir()
        out[name] = write(sub, **kw)
    return out


def settle(app, n: int = 20) -> None:
    for _ in range(n):
        app.processEvents()


def shoot(win, app, name: str, path: Path, truth: dict, out: Path, size: str, i: int) -> str:
    """Open ``path``, hover :data:`PIXEL`, grab the window to ``out``; the line said of it."""
    w, h = (int(v) for v in size.split("x"))
    win.resize(w, h)
    settle(app)
    open_from_menu(win, path)
    settle(app)
    if i == 3:  # a product just opened over another (PRISMA over EMIT), before any hover: nothing of the first may show
        win.grab().save(str(out / f"{i:02d}-{name}-{size}-opened.png"), "PNG")
    r, c = PIXEL
    move_mouse_to_pixel(win.view, r, c)
    settle(app)
    png = out / f"{i:02d}-{name}-{size}.png"
    win.grab().save(str(png), "PNG")
    lon, lat = truth["lonlat"](r, c)
    cube = win.session.cube
    sp = win.spectrum
    return (f"{png.name}: title {win.windowTitle()!r}\n  status {win.statusBar().currentMessage()!r}\n"
            f"  cube line {win.cube_info.text()!r}\n"
            f"  truth lon {float(lon):.6f}, lat {float(lat):.6f}; product {cube.product!r}, units {cube.value_units!r}\n"
            f"  x axis {sp.getAxis('bottom').labelText!r} {sp.x.min():.1f}..{sp.x.max():.1f}, "
            f"y axis {sp.getAxis('left').labelText!r}, plot title {sp.plotItem.titleLabel.text!r}, "
            f"rgb {[round(float(cube.wavelengths[b])) for b in cube.rgb_bands()] if cube.wavelengths is not None else None}")


def main(out: str, size: str = "1366x768", big: str = "1920x1080:emit-l2a,prisma-l2d") -> int:
    import os

    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import MainWindow

    os.environ["HYPERAPP_SETTINGS"] = str(Path(tempfile.mkdtemp()) / "settings.ini")
    os.environ.setdefault("HYPERAPP_GPU_WARMUP", "0")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv)
    win = MainWindow()
    win.show()
    files = products(Path(tempfile.mkdtemp()))
    i = 0
    for name, (path, truth) in files.items():
        i += 1
        print(shoot(win, app, name, path, truth, out_dir, size, i))
    # EMIT's swath orthorectified through its GLT (File > Orthorectify swath): grid cell (13, 31) is swath
    # pixel (12, 30) (the synthetic GLT's one-cell border), the same place under the cursor
    i += 1
    path, truth = files["emit-l2a"]
    w, h = (int(v) for v in size.split("x"))
    win.resize(w, h)
    open_from_menu(win, path)
    win.ortho_action.trigger()
    while not win.session.ortho:  # (a worker thread)
        settle(app)
    settle(app)
    move_mouse_to_pixel(win.view, PIXEL[0] + 1, PIXEL[1] + 1)
    settle(app)
    png = out_dir / f"{i:02d}-emit-l2a-ortho-{size}.png"
    win.grab().save(str(png), "PNG")
    lon, lat = truth["lonlat"](*PIXEL)
    print(f"{png.name}: status {win.statusBar().currentMessage()!r}\n  truth lon {lon:.6f}, lat {lat:.6f}; "
          f"cube line {win.cube_info.text()!r}")
    if big:
        big_size, names = big.split(":")
        for name in names.split(","):
            i += 1
            print(shoot(win, app, name, *files[name], out_dir, big_size, i))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
