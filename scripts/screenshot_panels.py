"""Walk the window as a new user would and take screenshots of the whole window at each step: a scene
opened and marked, a detector run (histogram, ROC, objects), every method of every analysis tool chosen
through the tool picker and run on default settings (or the few lighter settings named below) with each
of its plot tabs in front, the spectral library tool with a library of the scene's own spectra and an MTMF
run from it, the Spectrum and Compare docks, and the window after another cube was opened (nothing of the
last scene's runs may stay).

    QT_QPA_PLATFORM=offscreen python scripts/screenshot_panels.py OUTDIR [1366x768] [land | airport | CUBE]

``land`` (the default) is the bundled sample scene with its clicks and truth; ``airport`` the shared AVIRIS
airport scene (``HYPERAPP_CUBES`` or ../shared/cubes), marked from its truth; any other cube path is
marked at its centre. PNGs are named ``SCENE-STEP-SIZE.png``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: panel title -> (method, params) for the screenshots (defaults where they run in seconds on a CPU)
RUNS = {
    "k-means": [("kmeans", {"k": "2..12"})],
    "Band reduction": [("band-subsets", {}), ("band-clusters", {})],
    "SOM": [("som", {})],
    "Gaussian mixture": [("gmm", {"k": "2..5", "covariance": "diag"})],
    "Forest classification": [("forest", {"n_trees": 50}), ("cart", {})],
    "Hierarchical clustering": [("hac", {})],
}


def airport_path() -> Path:
    """The shared AVIRIS airport scene (``HYPERAPP_CUBES`` or the checkout's ../shared/cubes)."""
    root = os.environ.get("HYPERAPP_CUBES") or Path(__file__).resolve().parent.parent.parent / "shared" / "cubes"
    return Path(root) / "abu-airport-1.mat"


def open_scene(win, scene: str) -> None:
    """Open ``scene`` in ``win`` and mark what a user would: five targets, a background rectangle and a
    third class (so the forest has classes to train on), and the truth where there is one."""
    import numpy as np

    from hyperapp.io import read_labels
    from hyperapp.io.samples import sample_path

    if scene == "land":
        land = sample_path("land")
        assert win.open_cube(land), win.last_error
        clicks = np.argwhere(read_labels(land.with_name("land_targets.csv"), (128, 128)))
        win.load_truth(land.with_name("land_truth.hdr"))
    elif scene == "airport":
        path = airport_path()
        assert win.open_cube(path, "data"), win.last_error
        win.load_truth(path, "map")
        truth = win.session.truth > 0
        pick = np.random.default_rng(0).choice(np.flatnonzero(truth.ravel()), 5, replace=False)
        clicks = np.column_stack(np.unravel_index(pick, truth.shape))
    else:
        assert win.open_cube(scene), win.last_error
        c = win.session.cube
        clicks = np.array([[c.rows // 2, c.cols // 2]])
    r, c = win.session.cube.rows, win.session.cube.cols
    win.session.roi.mark_pixels(clicks, "target")
    win.session.roi.rectangle(int(r * 0.78), int(r * 0.78), int(r * 0.86), int(c * 0.9), "background")
    k = win.session.roi.add_class("field")
    win.session.roi.rectangle(int(r * 0.15), int(c * 0.45), int(r * 0.27), int(c * 0.62), k)


def scene_library(win, path: Path) -> None:
    """Open a spectral library of the scene's own mean target and background spectra (on the cube's
    wavelengths, or band for band where the cube gives none) in the library tool, the target picked."""
    import numpy as np

    from hyperapp.io.speclib import SpectralLibrary, write_library

    s = win.session
    X = s.cube.to_float32()
    spectra = np.array([X[s.roi.labels == 1].mean(0), X[s.roi.labels == 2].mean(0)], float)
    wl = None if s.cube.wavelengths is None else np.asarray(s.cube.wavelengths, float)
    write_library(SpectralLibrary(["target (scene)", "background (scene)"], spectra, wl,
                                  "nm" if wl is not None else None), path)
    win.library_dock.open_library(path)
    win.library_dock.set_role(["target (scene)"], "target")


def main(out_dir: str, size: str = "1366x768", scene: str = "land") -> int:
    import tempfile

    from PySide6.QtWidgets import QApplication

    from hyperapp.gui.library_dock import LIBRARY_TOOL
    from hyperapp.gui.main_window import DETECT_TOOL, MainWindow
    from hyperapp.gui.worker import wait_for_workers
    from hyperapp.io.samples import sample_path

    tmp = Path(tempfile.mkdtemp())
    os.environ["HYPERAPP_SETTINGS"] = str(tmp / "settings.ini")  # the defaults
    app = QApplication.instance() or QApplication(sys.argv)
    win = MainWindow()
    w, h = (int(v) for v in size.split("x"))
    win.resize(w, h)
    win.show()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tag = scene if scene in ("land", "airport") else Path(scene).stem

    def settle(n=30):
        wait_for_workers(600)  # the window's runs are Python threads (hyperapp.gui.worker)
        for _ in range(n):
            app.processEvents()

    def shot(name):
        settle()
        p = out / f"{tag}-{name}-{size}.png"
        win.grab().save(str(p), "PNG")
        print(f"wrote {p}", flush=True)

    shot("empty")
    open_scene(win, scene)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    shot("detector-before")
    win.toolbox.choose(DETECT_TOOL)
    win.run_detector()
    settle()
    for i, tab in enumerate(("histogram", "roc", "objects")):
        win.results.tabs.setCurrentIndex(i)
        shot(f"detector-{tab}")
    win.spec_dock.raise_()
    win._hover(win.session.cube.rows // 3, win.session.cube.cols // 3)
    win.pin_spectrum()
    shot("spectrum")
    for title, runs in RUNS.items():
        panel = win.panels[title]
        win.toolbox.choose(title)
        for method, params in runs:
            panel.set_method(method)
            panel.form.set_values(params)
            shot(f"{method}-form")
            panel.run()
            settle()
            for i in range(panel.tabs.count()):
                if not panel.tabs.isTabVisible(i):  # a tab this method does not have: a user cannot reach it
                    continue
                panel.tabs.setCurrentIndex(i)
                shot(f"{method}-{i}")
    win.results_dock.raise_()
    shot("results-after-analysis")
    win.toolbox.choose(LIBRARY_TOOL)
    scene_library(win, tmp / ("scene.csv" if win.session.cube.wavelengths is not None else "scene.sli"))
    shot("library")
    win.detector.set_method("mtmf")
    win.run_detector()
    settle()
    win.toolbox.choose(LIBRARY_TOOL)
    shot("library-mtmf")
    win.compare_dock.raise_()
    shot("compare")
    # another cube: nothing of this scene's runs stays on the plots, the legend or the status lines
    other = sample_path("sea") if scene == "land" else sample_path("land")
    win.open_cube(other)
    win.toolbox.choose("k-means")
    shot("after-another-cube")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots",
                  sys.argv[2] if len(sys.argv) > 2 else "1366x768",
                  sys.argv[3] if len(sys.argv) > 3 else "land"))
