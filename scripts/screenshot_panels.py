"""Screenshots of every tool of the toolbox on the land scene, one PNG per tool, at a given window size:
the detector before and after a run, then each analysis panel after a run on default settings (or the
few lighter settings named below), with its plots in front.

    QT_QPA_PLATFORM=offscreen python scripts/screenshot_panels.py OUTDIR [1366x768]
"""

from __future__ import annotations

import sys
from pathlib import Path

#: panel title -> (method, params, spectra source) for the screenshots (defaults where they run in seconds)
RUNS = {
    "k-means": ("kmeans", {"k": "2..12"}, None),
    "Band reduction": ("band-subsets", {}, None),
    "SOM": ("som", {}, None),
    "Gaussian mixture": ("gmm", {"k": "2..8", "covariance": "diag"}, None),
    "Forest classification": ("forest", {"n_trees": 50}, None),
    "Hierarchical clustering": ("hac", {}, None),
}


def main(out_dir: str, size: str = "1366x768") -> int:
    import os
    import tempfile

    import numpy as np
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import DETECT_TOOL, MainWindow
    from hyperapp.io import read_labels
    from hyperapp.samples import sample_path

    os.environ["HYPERAPP_SETTINGS"] = str(Path(tempfile.mkdtemp()) / "settings.ini")  # the defaults
    app = QApplication.instance() or QApplication(sys.argv)
    win = MainWindow()
    w, h = (int(v) for v in size.split("x"))
    win.resize(w, h)
    win.show()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def settle(n=30):
        QThreadPool.globalInstance().waitForDone()
        for _ in range(n):
            app.processEvents()

    def shot(name):
        settle()
        p = out / f"{name}-{size}.png"
        win.grab().save(str(p), "PNG")
        print(f"wrote {p}")

    shot("empty")
    land = sample_path("land")
    win.open_cube(land)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    clicks = read_labels(land.with_name("land_targets.csv"), (128, 128))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    k = win.session.roi.add_class("field")
    win.session.roi.rectangle(20, 60, 35, 80, k)
    win.load_truth(land.with_name("land_truth.hdr"))
    shot("detector-before")
    win.toolbox.choose(DETECT_TOOL)
    win.run_detector()
    settle()
    for i, tab in enumerate(("histogram", "roc", "objects")):
        win.results.tabs.setCurrentIndex(i)
        shot(f"detector-{tab}")
    for title, (method, params, source) in RUNS.items():
        panel = win.panels[title]
        win.toolbox.choose(title)
        panel.set_method(method)
        if source:
            panel.set_source(source)
        panel.form.set_values(params)
        shot(f"panel-{method}-form")
        panel.run()
        settle()
        for i in range(panel.tabs.count()):
            panel.tabs.setCurrentIndex(i)
            shot(f"panel-{method}-{i}")
    win.results_dock.raise_()
    shot("results-after-analysis")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots",
                  sys.argv[2] if len(sys.argv) > 2 else "1366x768"))
