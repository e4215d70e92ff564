"""The window's session without Qt: its run (Session.detect), the open cube's GPU preparation and the warm-up
that loads every method into the process (hyperapp.batch.prepare_gpu.warm_process)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from hyperapp.core.backend import gpu_available
from hyperapp.models.registry import METHODS

from .conftest import OUTSIDE, cli_env


def _session(land_hdr):
    from hyperapp.io import read_labels
    from hyperapp.project.session import Session

    s = Session.open(land_hdr)
    s.roi.mark_pixels(np.argwhere(read_labels(land_hdr.with_name("land_targets.csv"), (s.cube.rows, s.cube.cols))))
    return s


def test_the_windows_run_is_the_command_lines(land_hdr):
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    s = _session(land_hdr)
    req = DetectRequest("ace", device="cpu")
    got = s.detect(req, s.roi.targets.copy(), s.roi.background)
    want = run_detection(s.cube, req, s.roi.targets.copy(), None)
    np.testing.assert_array_equal(got.scores, want.scores)
    assert got.threshold == want.threshold
    assert s.held_pixels() is not None  # held for the next click
    assert s._yield.is_set()  # a person's run stops the preparation


def test_an_analysis_run_stops_the_preparation_too(land_hdr):
    s = _session(land_hdr)
    assert not s._yield.is_set()
    s.pixels_on("cpu")  # (an analysis panel's run takes its pixels here)
    assert s._yield.is_set()


def test_the_preparation_does_nothing_on_the_cpu(land_hdr):
    s = _session(land_hdr)
    assert s.prepare_device("cpu") == {}
    assert s.held_pixels() is None


def test_the_warm_up_runs_each_method_and_stops_when_asked():
    from hyperapp.batch import prepare_gpu

    seen = []

    def stop():
        seen.append(1)
        return len(seen) > 2  # two runs, then a person's Run

    assert prepare_gpu.warm_process(57, "cpu", stop) == 2


def test_the_warm_clicks_run_on_the_held_pixels_as_a_click_does(land_hdr, monkeypatch):
    """The preparation's detectors run on the open cube's held pixels (``image=``), with a block of targets
    at its centre, and stop when asked."""
    from hyperapp.batch import prepare_gpu
    from hyperapp.detect import run as run_module

    s = _session(land_hdr)
    image = s.pixels_on("cpu")
    seen = []
    real = run_module.run_detection

    def spy(cube, request, targets, background, **k):
        seen.append((request.method, k.get("image") is image, int(targets.sum())))
        return real(cube, request, targets, background, **k)

    monkeypatch.setattr(run_module, "run_detection", spy)
    calls = []
    assert prepare_gpu.warm_clicks(s.cube, image, "cpu", lambda: calls.append(1) or len(calls) > 2) == 2
    assert seen == [(m, True, 9) for m in list(METHODS)[:2]]


def test_the_click_targets_sit_at_the_centre():
    from hyperapp.batch.prepare_gpu import click_targets

    m = click_targets((5, 7))
    assert m.sum() == 9 and m[2, 3] and m[1:4, 2:5].all()
    assert click_targets((1, 1)).sum() == 1


def test_resampled_bands_keeps_the_ends_and_the_line():
    from hyperapp.batch.prepare_gpu import resampled_bands

    X = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    Y = resampled_bands(X, 9)
    assert Y.shape == (2, 3, 9) and Y.dtype == np.float32
    np.testing.assert_allclose(Y[..., 0], X[..., 0])
    np.testing.assert_allclose(Y[..., -1], X[..., -1])
    np.testing.assert_allclose(Y[..., 1], (X[..., 0] + X[..., 1]) / 2)


def test_a_run_started_during_the_load_waits_for_it(land_hdr, monkeypatch):
    """The preparation and a Run share one load of the pixels: the Run waits for it, never makes a second."""
    from hyperapp.detect import run as run_module

    s = _session(land_hdr)
    loads, gate = [], threading.Event()
    real = run_module.load_pixels

    def slow_load(*a, **k):
        loads.append(1)
        gate.wait(5)
        return real(*a, **k)

    monkeypatch.setattr(run_module, "load_pixels", slow_load)
    first = threading.Thread(target=s.pixels_on, args=("cpu",))
    first.start()
    while not loads:
        pass
    second = threading.Thread(target=s.pixels_on, args=("cpu",))
    second.start()
    gate.set()
    first.join(5)
    second.join(5)
    assert len(loads) == 1 and s.held_pixels() is not None


def test_the_window_click_bench_runs_on_the_cpu(land_hdr):
    out = subprocess.run([sys.executable, "-m", "hyperapp.bench.window_click", str(land_hdr),
                          str(land_hdr.with_name("land_targets.csv")), "sam", "--device", "cpu", "--pause", "0.2",
                          "--trace"], capture_output=True, text=True, check=True, cwd=OUTSIDE, env=cli_env())
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["method"] == "sam" and len(got["clicks"]) == 2 and got["prepared"] == {"wall_s": got["prepared"]["wall_s"]}
    assert all(c["seconds"] > 0 and "fit" in c["stages"] for c in got["clicks"])
    assert 0 <= got["start_s"] < 60  # the pause is not the process's start
    assert all(e["click"] in ("click 1", "click 2") and e["kind"] != "module loaded" for e in got["trace"])


def test_the_click_trace_keeps_what_happens_during_a_click_only():
    import gc

    from hyperapp.bench.click_trace import ClickTrace

    tracer = ClickTrace().install()
    try:
        gc.collect()  # outside a click: not kept
        with tracer.during("click 1"):
            gc.collect()
        gc.collect()
    finally:
        gc.callbacks.remove(tracer._on_gc)
    assert [(e["click"], e["kind"], e["generation"]) for e in tracer.events] == [("click 1", "garbage collection", 2)]
    assert tracer.events[0]["ms"] >= 0


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no GPU")
def test_the_preparation_holds_the_pixels_and_loads_every_method(land_hdr):
    s = _session(land_hdr)
    said = s.prepare_device("gpu")
    assert said["runs"] > 20 and s.held_pixels() is not None
