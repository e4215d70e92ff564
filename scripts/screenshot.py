"""Take the README's screenshot: the window (1366 x 768 unless a size is given) after an RBFN run on the shared AVIRIS airport
scene (five target clicks drawn from its truth, seed 0), or on the bundled land scene when the shared
scene is not there.

Run it from an install (offscreen, no display needed):

    QT_QPA_PLATFORM=offscreen python scripts/screenshot.py resources/screenshot.png
    QT_QPA_PLATFORM=offscreen python scripts/screenshot.py resources/screenshot-1920.png 1920x1080
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out: str, size: str = "1366x768") -> int:
    import os
    import tempfile

    import numpy as np
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import MainWindow
    from hyperapp.io import read_labels
    from hyperapp.io.samples import sample_path

    # the defaults, not the parameters this machine's last session left in its settings
    os.environ["HYPERAPP_SETTINGS"] = str(Path(tempfile.mkdtemp()) / "settings.ini")
    app = QApplication(sys.argv)
    win = MainWindow()
    w, h = (int(v) for v in size.split("x"))
    win.resize(w, h)
    win.show()
    abu = Path(__file__).resolve().parent.parent.parent / "shared" / "cubes" / "abu-airport-1.mat"
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
    win.run_detector()
    QThreadPool.globalInstance().waitForDone()
    for _ in range(20):
        app.processEvents()
    win.results.tabs.setCurrentIndex(1)
    win._hover(40, 40)
    win.pin_spectrum()
    for _ in range(20):
        app.processEvents()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    ok = win.grab().save(out, "PNG")
    print(f"wrote {out}" if ok else f"could not write {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "resources/screenshot.png",
                  sys.argv[2] if len(sys.argv) > 2 else "1366x768"))
