"""Kernels ahead of use: ``prepare-gpu``, the window's warm-up, and no first-use import in
``evaluate`` on the GPU."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from hyperapp.cli import main
from hyperapp.core.backend import gpu_available
from hyperapp.core.errors import BackendError

from .conftest import OUTSIDE, cli_env

no_gpu = pytest.mark.skipif(gpu_available(), reason="the no-GPU message needs a machine without a GPU")


@no_gpu
def test_prepare_gpu_without_a_gpu_says_so_and_does_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["--headless", "prepare-gpu"]) == 0
    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and "no GPU here" in out.out and "nothing to prepare" in out.out
    assert not (tmp_path / "cache").exists()
    from hyperapp.batch.prepare_gpu import is_prepared, prepare_gpu

    with pytest.raises(BackendError, match="no GPU"):
        prepare_gpu()
    assert not is_prepared()


def test_every_warm_up_runs(tmp_path):
    """The warm-ups are the app's own paths: on the CPU they run too (every reader and detector, and the
    quick analyses here; the GPU machine runs them all through prepare-gpu)."""
    from hyperapp.batch.prepare_gpu import warmup_tasks
    from hyperapp.models.registry import ANALYSES, METHODS

    tasks = warmup_tasks(tmp_path, device="cpu")
    names = [n for n, _ in tasks]
    assert all(any(n.startswith(f"{m} ") for n in names) for m in list(METHODS) + list(ANALYSES))
    assert sum("streamed" in n for n in names) >= 5 and sum(n.startswith("reading") for n in names) == 7
    slow = ("kmeans", "band-subsets", "gmm", "hac", "forest", "ffbp")
    for name, fn in tasks:
        if not name.startswith(slow):
            fn()


def test_an_analysis_warm_up_takes_its_cost_estimate_too(tmp_path, monkeypatch):
    """What analyse and the window's panels compute before a run (two small timed fits, with other options
    than the run's) is warmed with the run: the GMM's estimate compiled four kernels its runs had not."""
    from hyperapp.analyse import cost
    from hyperapp.batch.prepare_gpu import warmup_tasks

    asked = []
    monkeypatch.setattr(cost, "calibrate", lambda *a: asked.append(a))
    dict(warmup_tasks(tmp_path, device="cpu"))["mnf on the land scene"]()
    assert asked == [("mnf", {}, 64, "cpu")]


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no GPU")
def test_cupy_reduces_without_cub_block_reductions_after_hyperapps_probe():
    """The GPU's probe turns CuPy's CUB block reductions off (a kernel per length class reduced) and keeps
    CUB's device-wide routines (compiled into CuPy); a CUPY_ACCELERATORS the user set stays."""
    import os

    code = ("import cupy; from cupy._core import _accelerator as a; "
            "from hyperapp.core.backend import gpu_available; assert gpu_available(); "
            "print(bool(a.get_reduction_accelerators()), bool(a.get_routine_accelerators()))")
    env = {k: v for k, v in os.environ.items() if k != "CUPY_ACCELERATORS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False True"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "CUPY_ACCELERATORS": "cub"})
    assert out.stdout.strip() == "True True"


def test_a_users_cube_adds_its_band_count(tmp_path, land_hdr):
    from hyperapp.batch.prepare_gpu import warmup_tasks

    base = len(warmup_tasks(tmp_path, device="cpu"))
    tasks = warmup_tasks(tmp_path, [str(land_hdr)], device="cpu")
    assert len(tasks) > base and any(n.endswith("on land.hdr") for n, _ in tasks)
    dict(tasks)["rbfn on land.hdr"]()


@no_gpu
def test_window_warm_up_without_a_gpu_shows_nothing(qtbot, monkeypatch):
    pytest.importorskip("pytestqt")
    from PySide6.QtWidgets import QMainWindow

    from hyperapp.gui.gpu_warmup import start_gpu_warmup

    win = QMainWindow()
    qtbot.addWidget(win)
    monkeypatch.setenv("HYPERAPP_GPU_WARMUP", "0")
    assert start_gpu_warmup(win) is None
    monkeypatch.setenv("HYPERAPP_GPU_WARMUP", "1")
    w = start_gpu_warmup(win)
    qtbot.waitUntil(lambda: w.finished, timeout=20000)
    assert w.label.parent() is None  # no status-bar line where there is nothing to prepare


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("pytestqt") is None or importlib.util.find_spec("PySide6") is None,
                    reason="the window's warm-up needs PySide6 and pytest-qt (GPU hosts without Qt run the rest)")
def test_window_warm_up_fills_the_cache_with_a_status_line(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMainWindow

    from hyperapp.batch.prepare_gpu import stamp_path
    from hyperapp.gui.gpu_warmup import start_gpu_warmup

    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HYPERAPP_GPU_WARMUP", "1")
    win = QMainWindow()
    qtbot.addWidget(win)
    w = start_gpu_warmup(win)
    qtbot.waitUntil(lambda: "Preparing GPU kernels" in w.label.text(), timeout=60000)
    qtbot.waitUntil(lambda: w.finished, timeout=600000)
    assert "GPU kernels ready" in w.label.text() and "failed" not in w.label.text()
    assert stamp_path().is_file()


EVALUATE_PROBE = r"""
import json, sys, time
import numpy as np
from hyperapp.detect.run import run_detection
from hyperapp.request import DetectRequest
from hyperapp.io import open_cube
from hyperapp.io.writers import write_envi_cube
from pathlib import Path
d = Path(sys.argv[1])
rng = np.random.default_rng(0)
X = rng.uniform(0.1, 0.9, (1024, 1024, 32)).astype(np.float32)
hdr = write_envi_cube(d / "c", X, "bil")
t = np.zeros((1024, 1024), bool); t[100:104, 100:104] = True  # the clicks
truth = np.zeros((1024, 1024), np.int8); truth[100:110, 100:110] = 1  # AUC over the pixels not clicked
cube = open_cube(hdr)
res = run_detection(cube, DetectRequest("ace", device="gpu"), t, truth=truth)
print(json.dumps({"evaluate": res.report["seconds"]["evaluate"],
                  "special": "cupyx.scipy.special" in sys.modules}))
"""


@pytest.mark.gpu
def test_evaluate_on_the_gpu_has_no_first_use_import(tmp_path):
    """A fresh process: ``detect --truth``'s evaluation stays under 0.1 s (it paid 0.3-0.4 s importing
    cupyx.scipy.special through a scalar operator)."""
    # the first process fills the kernel cache where prepare-gpu has not run (a bare test machine); the
    # second is the fresh process the figure is about
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", EVALUATE_PROBE, str(tmp_path)], capture_output=True, text=True,
                           env=cli_env(), cwd=OUTSIDE, timeout=300)
        assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert not got["special"]
    assert got["evaluate"] < 0.1, got


SPECIAL_PROBE = r"""
import json, sys
import numpy as np
from hyperapp.detect.run import run_detection
from hyperapp.request import DetectRequest
from hyperapp.core.cube import cube_from_array
from hyperapp.models.registry import METHODS
rng = np.random.default_rng(0)
X = rng.uniform(0.1, 0.9, (64, 64, 16)).astype(np.float32)
t = np.zeros((64, 64), bool); t[10:12, 10:12] = True
truth = np.zeros((64, 64), np.int8); truth[10:14, 10:14] = 1
cube = cube_from_array(X, "probe")
first = None
# the window detector (FFBP) is left out: its training still has operators with scalars on the GPU
for m in [m for m in METHODS if m != "ffbp"]:
    run_detection(cube, DetectRequest(m, device="gpu"), t, truth=truth)
    if first is None and "cupyx.scipy.special" in sys.modules:
        first = m
print(json.dumps({"first": first}))
"""


@pytest.mark.gpu
def test_no_detector_imports_cupyx_special_on_the_gpu():
    """Every pixel detector's fresh GPU run leaves ``cupyx.scipy.special`` unimported: an operator between a
    CuPy array and a scalar imports it (0.4-0.5 s of the run; hyperapp.core.backend, scalar operators). SAM,
    CEM, RX, local RX, TCIMF, MTMF and MTTCIMF did (``scripts/special_import_probe.py`` names the line)."""
    r = subprocess.run([sys.executable, "-c", SPECIAL_PROBE], capture_output=True, text=True, env=cli_env(),
                       cwd=OUTSIDE, timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["first"] is None


@pytest.mark.gpu
def test_pipeline_on_the_gpu_equals_one_cube_alone(tmp_path):
    from hyperapp.batch.jobfile import Step
    from hyperapp.batch.pipeline import CubePipeline
    from hyperapp.request import DetectRequest

    from .test_batch import _scenes

    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 6, size=96, bands=32)]
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    steps = [Step("detect", "r", DetectRequest("rbfn", targets=str(tmp_path / "clicks.csv"), far=0.01)).to_dict()]
    with CubePipeline(steps, str(tmp_path / "piped"), device="gpu") as pipe:
        rows = [f.result(timeout=300) for f in [pipe.submit(c) for c in cubes]]
    alone = CubePipeline(steps, str(tmp_path / "alone"), device="gpu")
    for c, r in zip(cubes, rows):
        assert r["error"] is None
        a = alone.run_one(c)
        from hyperapp.io import open_cube

        s1 = open_cube(f"{r['outputs'][0]}/scores.hdr").to_float32()
        s2 = open_cube(f"{a['outputs'][0]}/scores.hdr").to_float32()
        np.testing.assert_allclose(s1, s2, rtol=1e-5, atol=1e-6)


def test_the_bench_command_names_its_settings():
    """The JSON's command names the settings that chose what was measured (band counts, repeats)."""
    from hyperapp.bench import bench_command

    argv = ["/venv/bin/hyperapp", "--headless", "bench", "--case", "first-run-new-bands"]
    env = {"HYPERAPP_WINDOW_REPEATS": "2", "HYPERAPP_FIRST_RUN_BANDS": "285,430", "PATH": "/bin"}
    assert bench_command(argv, env) == ("HYPERAPP_FIRST_RUN_BANDS=285,430 HYPERAPP_WINDOW_REPEATS=2 "
                                        "hyperapp --headless bench --case first-run-new-bands")
    assert bench_command(["python", "-c", "x"], env) is None  # not the hyperapp command


def test_the_first_run_benchs_settings_refuse_what_is_not_a_count(monkeypatch):
    from hyperapp.bench import setting_counts as _counts
    from hyperapp.core.errors import InputError

    monkeypatch.delenv("HYPERAPP_FIRST_RUN_BANDS", raising=False)
    assert _counts("HYPERAPP_FIRST_RUN_BANDS", "57,224", 3) == (57, 224)
    monkeypatch.setenv("HYPERAPP_FIRST_RUN_BANDS", " 285, 430 ,")
    assert _counts("HYPERAPP_FIRST_RUN_BANDS", "57", 3) == (285, 430)
    for bad in ("abc", "285;430", "2", "0", ",", "-5"):
        monkeypatch.setenv("HYPERAPP_FIRST_RUN_BANDS", bad)
        with pytest.raises(InputError, match="^HYPERAPP_FIRST_RUN_BANDS=.*whole numbers of 3 or more"):
            _counts("HYPERAPP_FIRST_RUN_BANDS", "57", 3)


@no_gpu
def test_quick_bench_runs_the_campaign_on_the_cpu(tmp_path, monkeypatch):
    import hyperapp.bench.campaign as C
    import hyperapp.bench.whole_path as F
    from hyperapp.bench import run_bench

    for mod, names in ((C, ("CAMPAIGN_CUBES", "CAMPAIGN_SHAPE")),
                       (F, ("FILE_SHAPE", "BATCH_CUBES", "BATCH_SHAPE", "DEVICE"))):
        for n in names:  # --quick sets them for the process; put them back after
            monkeypatch.setattr(mod, n, getattr(mod, n))
    with pytest.raises(BackendError, match="--quick"):
        run_bench(["campaign-16x2048x2048x128"])
    # as on a machine of two GPUs (the CPU's workers stand in): the two-worker row too
    monkeypatch.setattr(F, "gpu_count", lambda: 2)
    assert run_bench(["campaign-16x2048x2048x128"], json_path=str(tmp_path / "b.json"), quick=True) == 0
    got = json.loads((tmp_path / "b.json").read_text())
    names = [c["name"] for c in got["cases"]]
    assert names == ["campaign-4x96x80x16-rbfn", "campaign-4x96x80x16-ace",
                     "campaign-4x96x80x16-rbfn-4-processes-one-device",
                     "campaign-4x96x80x16-rbfn-two-workers"] and got["quick"]
    notes = got["cases"][0]["notes"]
    assert notes["GBps"] > 0 and notes["page_cache_GBps"] > 0 and notes["device"] == "cpu"
    assert set(notes["stage_median_s"]) == {"read", "compute", "write", "wait"}
    two = got["cases"][-1]
    assert two["gpu_ms"] > 0 and two["peer_ms"] > 0 and two["notes"]["speedup"] > 0
    assert two["notes"]["GBps_one"] > 0 and set(two["notes"]["with_cluster_start"]) == {
        "speedup", "seconds_one", "seconds_two"}


def test_bench_processes_read_the_installed_bytecode(monkeypatch, tmp_path):
    from hyperapp.bench import whole_path
    from hyperapp.bench.whole_path import fresh_env

    # the fresh processes read and write bytecode as an installed system does: no prefix where the package's
    # folder is writable (with one, Python reads bytecode from it alone, so the first process recompiled
    # every module it imported, the standard library's too)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(whole_path.os, "access", lambda path, mode: True)
    a = fresh_env({"CUPY_CACHE_DIR": "/x"})
    assert "PYTHONDONTWRITEBYTECODE" not in a and "PYTHONPYCACHEPREFIX" not in a
    assert a["CUPY_CACHE_DIR"] == "/x"
    # where it is read-only, every process of a case shares one prefix
    monkeypatch.setattr(whole_path.os, "access", lambda path, mode: False)
    a, b = fresh_env({"CUPY_CACHE_DIR": "/x"}), fresh_env()
    assert a["PYTHONPYCACHEPREFIX"] == b["PYTHONPYCACHEPREFIX"]
