"""Screenshots of the analysis panels after a run on the land scene (one PNG per panel).

    xvfb-run -a -s "-screen 0 1600x1000x24" python3 scripts/screenshot_panels.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out_dir: str) -> int:
    import os
    import tempfile

    import numpy as np
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication, QDockWidget

    from hyperapp.gui.main_window import MainWindow
    from hyperapp.io import read_labels
    from hyperapp.samples import sample_path

    os.environ["HYPERAPP_SETTINGS"] = str(Path(tempfile.mkdtemp()) / "settings.ini")  # the defaults
    app = QApplication(sys.argv)
    win = MainWindow()
    win.resize(1600, 1000)
    win.show()
    land = sample_path("land")
    win.open_cube(land)
    clicks = read_labels(land.with_name("land_targets.csv"), (128, 128))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")
    win.session.roi.rectangle(100, 100, 110, 115, "background")
    k = win.session.roi.add_class("field")
    win.session.roi.rectangle(20, 60, 35, 80, k)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = {"k-means": ("kmeans", {"k": "2..12"}, 1), "Band reduction": ("band-subsets", {"n_subsets": 300}, 0),
            "Forest classification": ("forest", {"n_trees": 50}, 0),
            "Hierarchical clustering": ("hac", {"n_clusters": 5}, 0)}
    for title, (method, params, tab) in runs.items():
        panel = win.panels[title]
        win.findChild(QDockWidget, title).raise_()
        panel.set_method(method)
        if method == "hac":
            panel.set_source("sample")
            panel.sample.setValue(3000)
        panel.form.set_values(params)
        panel.run()
        QThreadPool.globalInstance().waitForDone()
        for _ in range(30):
            app.processEvents()
        panel.tabs.setCurrentIndex(tab)
        for _ in range(10):
            app.processEvents()
        p = out / f"panel-{method}.png"
        win.grab().save(str(p), "PNG")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots"))
