"""Take the README's screenshot: the window (1366 x 768 unless a size is given) after an RBFN run on the shared AVIRIS airport
scene (five target clicks drawn from its truth, seed 0), or on the bundled land scene when the shared
scene is not there.

Run it from an install (offscreen, no display needed):

    QT_QPA_PLATFORM=offscreen python scripts/screenshot.py resources/screenshot.png
    QT_QPA_PLATFORM=offscreen python scripts/screenshot.py resources/screenshot-1920.png 1920x1080
    QT_QPA_PLATFORM=offscreen python scripts/screenshot.py resources/screenshot-review.png 1366x768 review

``review``: the review of the run's objects instead (false-alarm rate 0.01): a library of the scene's
aircraft and background means open, three objects marked Good and two Bad with the keys, the next one
chosen, its mean spectrum beside the target's.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out: str, size: str = "1366x768", what: str = "") -> int:
    import os
    import tempfile

    import numpy as np
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import MainWindow
    from hyperapp.gui.worker import wait_for_workers
    from hyperapp.io import read_labels
    from hyperapp.io.samples import sample_path

    # the defaults, not the parameters this machine's last session left in its settings
    os.environ["HYPERAPP_SETTINGS"] = str(Path(tempfile.mkdtemp()) / "settings.ini")
    app = QApplication(sys.argv)
    win = MainWindow()
    w, h = (int(v) for v in size.split("x"))
    win.resize(w, h)
    win.show()
    shared = os.environ.get("HYPERAPP_CUBES") or Path(__file__).resolve().parent.parent.parent / "shared" / "cubes"
    abu = Path(shared) / "abu-airport-1.mat"
    if abu.is_file():
        win.open_cube(abu, "data")
        win.load_truth(abu, "map")
        truth = win.session.truth > 0
        rng = np.random.default_rng(0)
        pick = rng.choice(np.flatnonzero(truth.ravel()), 5, replace=False)
        win.session.roi.mark_pixels(np.column_stack(np.unravel_index(pick, truth.shape)), "target")
    else:
        land = sample_path("land")
        win.open_cube(land)
        clicks = read_labels(land.with_name("land_targets.csv"), (win.session.cube.rows, win.session.cube.cols))
        win.session.roi.mark_pixels(np.argwhere(clicks), "target")
        win.load_truth(land.with_name("land_truth.hdr"))
    win.detector.set_method("rbfn")
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    if what == "review":
        _library(win, Path(tempfile.mkdtemp()))
        win.detector.far.setValue(0.01)
    win.run_detector()
    wait_for_workers(600)  # the window's runs are Python threads (hyperapp.gui.worker)
    for _ in range(20):
        app.processEvents()
    if what == "review":
        _review(win, app)
    else:
        win.results.tabs.setCurrentIndex(1)
        win._hover(40, 40)
        win.pin_spectrum()
    for _ in range(20):
        app.processEvents()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    ok = win.grab().save(out, "PNG")
    print(f"wrote {out}" if ok else f"could not write {out}")
    return 0 if ok else 1


def _library(win, folder: Path) -> None:
    """A library of the scene's truth (target) mean and background mean, opened in the library tool."""
    from hyperapp.io.speclib import SpectralLibrary, write_library

    X = win.session.cube.read()
    truth = win.session.truth > 0
    lib = SpectralLibrary(["aircraft (truth mean)" if X.shape[2] == 205 else "target (truth mean)", "background mean"],
                          [X[truth].mean(axis=0), X[~truth].mean(axis=0)])
    win.library_dock.open_library(write_library(lib, folder / "scene.sli"))


def _review(win, app) -> None:
    """The Objects tab: three objects Good, two Bad (keys G and B, each moving on), then the next one."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    win.results.tabs.setCurrentWidget(win.results.review)
    panel = win.results.review
    panel.select(0)
    for key in (Qt.Key.Key_G, Qt.Key.Key_G, Qt.Key.Key_G, Qt.Key.Key_B, Qt.Key.Key_B):
        QTest.keyClick(panel.table, key)
        app.processEvents()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "resources/screenshot.png",
                  sys.argv[2] if len(sys.argv) > 2 else "1366x768", sys.argv[3] if len(sys.argv) > 3 else ""))
