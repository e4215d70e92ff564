"""Take the README's screenshot: the window on the land scene after an RBFN run.

Run under a virtual X server, as the README says:

    PYTHONPATH=. xvfb-run -a -s "-screen 0 1600x1000x24" python3 scripts/screenshot.py resources/screenshot.png
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out: str) -> int:
    import numpy as np
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import MainWindow
    from hyperapp.io import read_labels
    from hyperapp.samples import sample_path

    app = QApplication(sys.argv)
    win = MainWindow()
    win.resize(1500, 950)
    win.show()
    land = sample_path("land")
    win.open_cube(land)
    clicks = read_labels(land.with_name("land_targets.csv"), (win.session.cube.rows, win.session.cube.cols))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    win.load_truth(land.with_name("land_truth.hdr"))
    win.detector.set_method("rbfn")
    win.run_detector()
    QThreadPool.globalInstance().waitForDone()
    for _ in range(20):
        app.processEvents()
    win.results.tabs.setCurrentIndex(1)
    win._hover(64, 40)
    win.pin_spectrum()
    for _ in range(20):
        app.processEvents()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    ok = win.grab().save(out, "PNG")
    print(f"wrote {out}" if ok else f"could not write {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "resources/screenshot.png"))
