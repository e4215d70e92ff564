"""The installed ``hyperapp``, run as a user runs it: its own entry point, from a folder outside the
checkout, on the sample scene shipped inside the package.

CI installs with ``pip install ".[test]"`` (not editable), so a subpackage or data file missing from the
wheel fails here, where the source tree would hide it: the window must open and stay up, and every
headless command must succeed once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from .conftest import ROOT, cli_env

pytestmark = pytest.mark.slow


def _entry_point() -> list[str]:
    """The ``hyperapp`` console script pip installed beside this interpreter (or on PATH)."""
    exe = Path(sys.executable).parent / "hyperapp"
    found = str(exe) if exe.is_file() else shutil.which("hyperapp")
    assert found, "the hyperapp entry point is not installed: pip install \".[test]\""
    return [found]


@pytest.fixture(scope="module")
def installed():
    import hyperapp
    import hyperapp.sample_cubes

    pkg = Path(hyperapp.__file__).resolve().parent
    if os.environ.get("CI"):  # CI installs a wheel: what runs must not be the checkout's sources
        assert ROOT not in pkg.parents, f"CI must test the installed wheel, not {pkg}"
    land = Path(hyperapp.sample_cubes.__file__).resolve().parent / "land.hdr"
    assert land.is_file(), f"the wheel ships no sample scene ({land})"
    return land


def _bad_lines(stderr: str) -> list[str]:
    """stderr lines that are more than a warning (Qt's offscreen plugin says a few harmless things)."""
    words = ("Traceback", "Error", "error:", "Exception", "CRITICAL")
    return [ln for ln in stderr.splitlines() if any(w in ln for w in words)]


def _run(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    r = subprocess.run(_entry_point() + args, cwd=cwd, env=cli_env(CUDA_VISIBLE_DEVICES=""), capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"hyperapp {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}"
    assert not _bad_lines(r.stderr), r.stderr[-2000:]
    return r


def test_window_opens_and_stays_up(installed, tmp_path):
    env = cli_env(QT_QPA_PLATFORM="offscreen", CUDA_VISIBLE_DEVICES="")
    p = subprocess.Popen(_entry_point(), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t0 = time.time()
    while time.time() - t0 < 6 and p.poll() is None:
        time.sleep(0.1)
    alive = p.poll() is None
    p.terminate()
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    assert alive, f"the window closed after {time.time() - t0:.1f} s (exit {p.returncode}): {err[-2000:]}"
    assert not _bad_lines(err), err[-2000:]


def test_headless_commands_on_the_shipped_sample(installed, tmp_path):
    land = installed
    info = _run(["--headless", "info", str(land)], tmp_path)
    assert "128 rows" in info.stdout

    targets = land.with_name("land_targets.csv")
    _run(["--headless", "detect", str(land), "--method", "ace", "--targets", str(targets), "--device", "cpu",
          "--out", str(tmp_path / "detect")], tmp_path)
    assert json.loads((tmp_path / "detect" / "report.json").read_text())["detections"] > 0

    # two ROI classes for the classifiers: the truth's target pixels and a block of background
    from hyperapp.io import open_cube
    from hyperapp.models.registry import ANALYSES

    truth = np.asarray(open_cube(land.with_name("land_truth.hdr")).to_float32())[..., 0] > 0
    roi = np.zeros(truth.shape, np.int32)
    roi[truth] = 1
    roi[:20, :20][~truth[:20, :20]] = 2
    np.save(tmp_path / "roi.npy", roi)
    small = {"band-subsets": ["--param", "n_subsets=50"], "som": ["--param", "rows=4", "--param", "cols=4"],
             "kmeans": ["--param", "k=2..4"], "gmm": ["--param", "k=3"], "forest": ["--param", "n_trees=10"]}
    for name, method in ANALYSES.items():
        # classes for the class-aware methods; a random sample for the rest but MNF (the whole image)
        extra = (["--roi", str(tmp_path / "roi.npy")] if method.needs_classes else
                 [] if method.needs_image else ["--sample", "3000"])
        out = tmp_path / f"analyse-{name}"
        _run(["--headless", "analyse", str(land), "--method", name, "--device", "cpu",
              *extra, *small.get(name, []), "--out", str(out)], tmp_path)
        assert (out / "report.json").is_file(), name

    job = tmp_path / "job.toml"
    job.write_text(f'[inputs]\npaths = ["{land.as_posix()}"]\n[[steps]]\ndetect = "sam"\n'
                   f'targets = "{targets.as_posix()}"\n[output]\nfolder = "{(tmp_path / "run").as_posix()}"\n')
    _run(["--headless", "run", str(job), "--device", "cpu"], tmp_path)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [e["status"] for e in manifest["cubes"].values()] == ["done"]
