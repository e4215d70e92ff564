"""Screenshot of the spectral-library dock and the MTMF scatter on the land scene, no clicks used to detect.

    QT_QPA_PLATFORM=offscreen python scripts/screenshot_library.py OUTDIR

A library (CSV, micrometres, reflectance 0-1 as a field spectrometer gives it) of the scene's target and two
background materials is opened, resampled onto the cube's bands, the target picked, MTMF run from it, and a
selection drawn on the scatter (high score, low infeasibility).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out_dir: str) -> int:
    import os
    import tempfile

    import numpy as np
    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.library_dock import LIBRARY_TOOL
    from hyperapp.gui.main_window import MainWindow
    from hyperapp.gui.worker import wait_for_workers
    from hyperapp.io import read_labels
    from hyperapp.io.samples import sample_path
    from hyperapp.io.speclib import SpectralLibrary, write_library

    tmp = Path(tempfile.mkdtemp())
    os.environ["HYPERAPP_SETTINGS"] = str(tmp / "settings.ini")  # the defaults
    app = QApplication(sys.argv)
    win = MainWindow()
    win.resize(1366, 768)
    win.show()
    land = sample_path("land")
    win.open_cube(land)
    cube = win.session.cube
    X = cube.to_float32()
    truth = read_labels(land.with_name("land_truth.hdr"), (cube.rows, cube.cols)) > 0
    wl = np.asarray(cube.wavelengths) / 1000.0  # a library in micrometres, reflectance 0-1
    fine = np.linspace(wl[0], wl[-1], 400)
    spectra = [X[truth].mean(0), X[100:110, 100:115].reshape(-1, cube.bands).mean(0),
               X[20:35, 60:80].reshape(-1, cube.bands).mean(0)]
    lib = SpectralLibrary(["painted metal (field)", "dry grass", "bare soil"],
                          np.array([np.interp(fine, wl, s) / 10000.0 for s in spectra]), fine, "micrometers")
    write_library(lib, tmp / "field.csv")
    dock = win.library_dock
    win.toolbox.choose(LIBRARY_TOOL)
    dock.open_library(tmp / "field.csv")
    dock.set_role(["painted metal (field)"], "target")
    dock.set_role(["dry grass", "bare soil"], "undesired")
    dock.set_role(["dry grass", "bare soil"], "")  # MTMF takes no undesired signatures
    win.detector.set_method("mtmf")
    win.detector.set_params({})
    win.run_detector()
    wait_for_workers(600)  # the window's runs are Python threads (hyperapp.gui.worker)
    win.toolbox.choose(LIBRARY_TOOL)  # the tool and, in the plots dock, its MTMF scatter
    for _ in range(30):
        app.processEvents()
    sc = dock.scatter
    s, f = sc.score, sc.infeas
    top = np.quantile(f[s > 0.5], 0.9) if (s > 0.5).any() else float(np.quantile(f, 0.5))
    sc.set_polygon([(0.5, 0.0), (float(s.max()) * 1.05, 0.0), (float(s.max()) * 1.05, top), (0.5, top)])
    dock.tree.topLevelItem(0).setSelected(True)
    win.plots_dock.raise_()  # the library's plot and the scatter are what this picture is for
    for _ in range(20):
        app.processEvents()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p = out / "library.png"
    win.grab().save(str(p), "PNG")
    print(f"wrote {p}; status: {dock.status.text()}; {win.detector.status.text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots31"))
