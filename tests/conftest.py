import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# The suite tests the installed hyperapp (``pip install ".[test]"`` in CI, ``pip install -e ".[test]"``
# while developing), as a user gets it: the checkout itself is taken off the import path before anything
# imports hyperapp, so a subpackage missing from the build fails here rather than hiding behind the
# source folder. Subprocesses run from a temporary folder for the same reason (see ``cli_env``).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
try:
    import hyperapp  # noqa: E402,F401
    import hyperapp.models  # noqa: E402,F401
except ImportError as exc:  # pragma: no cover - a set-up mistake, said plainly
    raise pytest.UsageError(f"hyperapp is not installed ({exc}): run pip install -e \".[test]\" first") from exc
SAMPLES = ROOT / "sample_cubes"
SHARED_CUBES = Path(os.environ.get("HYPERAPP_CUBES", ROOT.parent / "shared" / "cubes"))  # real scenes, never copied in
ABU = SHARED_CUBES / "abu-airport-1.mat"
ABU_MISSING = f"the shared AVIRIS scene abu-airport-1.mat is not at {SHARED_CUBES} (set HYPERAPP_CUBES)"

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# no window's background GPU warm-up during the tests (tests/test_prepare_gpu.py starts it itself)
os.environ.setdefault("HYPERAPP_GPU_WARMUP", "0")


@pytest.hookimpl(trylast=True)
def pytest_runtest_setup(item):
    """Collection puts the checkout back on sys.path (to import the test modules): take it off before
    each test, so the processes tests start (Dask workers take this process's sys.path) import the
    installed package. Last of the setup hooks: the tests package's own setup (``tests/__init__.py``)
    puts it back again after any earlier hook (a test run alone then started workers that imported the
    checkout's ``hyperapp``, without its ``kernels``)."""
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]


def pytest_report_header(config):
    import hyperapp

    return f"hyperapp under test: {Path(hyperapp.__file__).parent}"


#: a working folder outside the checkout for subprocesses
OUTSIDE = Path(__import__("tempfile").gettempdir())


def cli_env(**extra: str) -> dict:
    """Environment for a ``python -m hyperapp`` subprocess: the installed package, never the checkout
    (run it with ``cwd`` outside the repository, since ``-m`` and ``-c`` put the working folder first)."""
    env = dict(os.environ)
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    env.pop("PYTHONPATH", None)
    if keep:  # an install on the path (a --target folder) stays; the checkout never does
        env["PYTHONPATH"] = os.pathsep.join(keep)
    env.update(extra)
    return env


def pytest_collection_modifyitems(config, items):
    from hyperapp.core.backend import gpu_available, gpu_status

    if gpu_available():
        return
    skip = pytest.mark.skip(reason=f"GPU test: {gpu_status()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def land_hdr():
    return SAMPLES / "land.hdr"


@pytest.fixture
def sea_hdr():
    return SAMPLES / "sea.hdr"


@pytest.fixture
def abu():
    if not ABU.is_file():
        pytest.skip(ABU_MISSING)
    return ABU


@pytest.fixture
def cp():
    return pytest.importorskip("cupy")


def random_clicks(truth: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The issue's protocol: n target pixels drawn at random (seeded) from the truth mask."""
    rng = np.random.default_rng(seed)
    idx = np.flatnonzero(truth.reshape(-1) > 0)
    pick = rng.choice(idx, size=n, replace=False)
    m = np.zeros(truth.size, bool)
    m[pick] = True
    return m.reshape(truth.shape)


def stratified_split(y: np.ndarray, frac: float, seed: int = 0) -> np.ndarray:
    """A fixed training split: ``frac`` of every class's pixels (at least one), seeded."""
    rng = np.random.default_rng(seed)
    tr = np.zeros(y.size, bool)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        tr[rng.choice(idx, max(1, int(frac * idx.size)), replace=False)] = True
    return tr


def hac_reference(X: np.ndarray, method: str, metric: str) -> np.ndarray:
    """SciPy's linkage of spectra ``X`` by Euclidean distance or spectral angle (radians)."""
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import pdist

    A = X.astype(np.float64)
    if metric == "sam":
        A = A / np.linalg.norm(A, axis=1, keepdims=True)
        return linkage(np.arccos(np.clip(1 - pdist(A, "cosine"), -1, 1)), method)
    return linkage(pdist(A), method)


@pytest.fixture
def win(qtbot, tmp_path, monkeypatch):
    """The main window at 1600 x 1000 with its settings in a temporary ini file; waits for its workers."""
    monkeypatch.setenv("HYPERAPP_SETTINGS", str(tmp_path / "settings.ini"))
    from hyperapp.gui.main_window import MainWindow

    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    yield w
    for p in getattr(w, "panels", {}).values():
        p.cancel()
    w.cancel_run()
    from hyperapp.gui.worker import wait_for_workers

    wait_for_workers(20.0)


def mark_clicks(win, hdr) -> None:
    """Mark the sample scene's target clicks (``<stem>_targets.csv`` beside ``hdr``) in the window."""
    from hyperapp.io import read_labels

    clicks = read_labels(hdr.with_name(hdr.stem + "_targets.csv"), (win.session.cube.rows, win.session.cube.cols))
    win.session.roi.mark_pixels(np.argwhere(clicks), "target")


def run_detector(qtbot, win, method: str, timeout: int = 120000, **params):
    """Run ``method`` on the CPU from the window's detector tool; the finished run (or None)."""
    win.detector.set_method(method)
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    win.detector.set_params(params)
    with qtbot.waitSignal(win.run_finished, timeout=timeout) as blocker:
        win.run_detector()
    return blocker.args[0]


# ------------------------------------------------------------------ Spectral Python databases
def spectrum_curve(x_um, k):
    """A smooth reflectance curve (0-1) over wavelengths ``x_um`` (micrometres); ``k`` shifts it."""
    return 0.2 + 0.1 * np.sin(3 * x_um + k) + 0.05 * x_um


def ecostress_db(tmp_path):
    """An ECOSTRESS database built by ``spectral.EcostressDatabase.create`` from three files in the
    ECOSTRESS v1 layout (header lines, a blank line, wavelength/percent columns in descending order):
    two spectra named alike on one grid, and a grass spectrum on another. Each file is imported from its
    own folder so the SpectrumIDs (1, 2, 3) do not hang on the order a folder lists its files."""
    from spectral import EcostressDatabase

    db = EcostressDatabase.create(str(tmp_path / "eco.db"))
    files = (("mineral.silicate.tectosilicate.coarse.quartz1.jhu.becknic.spectrum.txt", "Quartz SiO2", 0.01, 0),
             ("mineral.silicate.tectosilicate.fine.quartz2.jhu.nicolet.spectrum.txt", "Quartz SiO2", 0.01, 1),
             ("vegetation.grass.avena.fatua.vswir.vh352.ucsb.asd.spectrum.txt", "Avena fatua", 0.004, 2))
    for fname, name, step, k in files:
        x = np.round(np.arange(2.6, 0.35 - 1e-9, -step), 4)  # descending, as ECOSTRESS writes them
        head = (f"Name: {name}\nType: mineral\nClass: silicate\nSubclass: tectosilicate\nParticle Size: 125-500 um\n"
                "Sample No.: 1\nOwner: JHU\nWavelength Range: VSWIR\nOrigin: a fixture\nCollection Date: N/A\n"
                "Description: a test spectrum\nMeasurement: Directional (10 Degree) Hemispherical Reflectance\n"
                "First Column: X\nSecond Column: Y\nX Units: Wavelength (micrometers)\nY Units: Reflectance (percent)\n"
                f"First X Value: {x[0]}\nLast X Value: {x[-1]}\nNumber of X Values: {x.size}\n"
                "Additional Information: none\n\n")
        rows = "".join(f"{a:.4f}\t{100 * spectrum_curve(a, k):.5f}\n" for a in x)
        src = tmp_path / f"eco{k}"
        src.mkdir()
        (src / fname).write_text(head + rows, encoding="iso-8859-1")
        db._import_files(str(src))
    db.db.close()
    return tmp_path / "eco.db"
