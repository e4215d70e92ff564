"""Start the window: ``hyperapp [CUBE]`` (the bundled land scene when none is given)."""

from __future__ import annotations

import logging
import sys


def run_gui(path: str | None = None, dataset: str | None = None, all_bands: bool = False,
            review: str | None = None) -> int:
    """The window on ``path``; ``review``: a results folder of that cube to review (File > Open results for
    review)."""
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.main_window import MainWindow
    from hyperapp.io.samples import sample_path

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName("hyperapp")
    win = MainWindow()
    win.show()
    if win.open_cube(path or sample_path("land"), dataset, all_bands) and review:
        from hyperapp.gui.review_panel import open_results

        open_results(win, review)
    return app.exec()
