"""Start the window: ``hyperapp [CUBE]`` (the bundled land scene when none is given)."""

from __future__ import annotations

import logging
import sys


def run_gui(path: str | None = None, dataset: str | None = None, all_bands: bool = False) -> int:
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import MainWindow
    from hyperapp.io.samples import sample_path

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName("hyperapp")
    win = MainWindow()
    win.show()
    win.open_cube(path or sample_path("land"), dataset, all_bands)
    return app.exec()
