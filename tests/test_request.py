"""One request: the CLI, a job step and the window build the same DetectRequest from the same settings;
it is checked once, round-trips through its dict, and its target filter reaches the mask, the objects,
the detection rate and report.json."""

import json

import numpy as np
import pytest

from hyperapp.core.errors import InputError
from hyperapp.request import VOCABULARY, AnalyseRequest, DetectRequest, job_keys

from .test_batch import _job, _scenes


def _library(tmp_path):
    from hyperapp.io import open_cube
    from hyperapp.io.speclib import SpectralLibrary, write_library

    cubes = _scenes(tmp_path / "scenes", 1)
    cube = open_cube(cubes[0]).good_bands()
    target = cube.read()[10:14, 10:14].reshape(-1, cube.bands).mean(axis=0)
    lib = tmp_path / "lib.sli"
    write_library(SpectralLibrary(["paint", "other"], np.stack([target, target[::-1]])), lib)
    return cubes[0], lib


def test_the_cli_a_job_and_the_window_build_the_same_request(qtbot, win, tmp_path):
    from hyperapp.batch.jobfile import load_job
    from hyperapp.cli import _request, build_parser

    cube, lib = _library(tmp_path)
    # the command line
    args = build_parser().parse_args([
        "detect", str(cube), "--method", "RBFN", "--target-spectra", str(lib), "--spectra", "paint",
        "--far", "0.01", "--param", "n_hidden=12", "--clump", "3", "--sieve", "2..400", "--connectivity", "4",
        "--continuum-removed", "--out", str(tmp_path / "o")])
    cli = _request(args, "detect")
    # a job step
    job = load_job(_job(tmp_path, f"""
[inputs]
paths = ["scenes/*.hdr"]
[[steps]]
detect = "rbfn"
target_spectra = "{lib}"
spectra = "paint"
far = 0.01
params = {{ n_hidden = 12 }}
clump = 3
sieve = "2..400"
connectivity = 4
continuum_removed = true
[output]
folder = "out"
"""))
    step = job.steps[0].request
    # the window's forms
    assert win.open_cube(cube)
    win.detector.set_method("rbfn")
    win.detector.set_params({"n_hidden": 12})
    win.detector.far.setValue(0.01)
    win.detector.clump.setValue(3)
    win.detector.sieve_min.setValue(2)
    win.detector.sieve_max.setValue(400)
    win.detector.connectivity.setCurrentIndex(win.detector.connectivity.findData(4))
    win.detector.continuum_removed.setChecked(True)
    assert win.library_dock.open_library(lib)
    win.library_dock.set_role("paint", "target")
    window = win.detect_request()
    assert cli == step == window, (cli, step, window)
    assert cli.params == {"n_hidden": 12} and cli.sieve == (2, 400) and cli.connectivity == 4
    assert cli.continuum_removed and cli.target_spectra == str(lib) and cli.spectra == "paint"
    # the one vocabulary names the setting each way: a wrong value is one line in each front end's words
    with pytest.raises(InputError, match="--sieve"):
        DetectRequest.from_mapping({"method": "rx", "sieve": "9..3"}, "cli")
    with pytest.raises(InputError, match="^sieve"):
        DetectRequest.from_mapping({"detect": "rx", "sieve": "9..3"}, "job")
    with pytest.raises(InputError, match="Sieve") as e:
        DetectRequest.from_mapping({"method": "rx", "sieve": "9..3"}, "window")
    assert e.value.key == "sieve"


def test_a_request_round_trips_through_its_dict():
    r = DetectRequest.from_mapping({"detect": "sam", "far": "1e-2", "clump": 5, "sieve": "3", "continuum_removed": True},
                                   need_targets=False)
    assert r.far == 0.01 and r.sieve == (3, None) and r.continuum_removed is True
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert DetectRequest.from_dict(d) == r == r.check(need_targets=False)
    assert r.to_dict(defaults=False) == {"method": "sam", "far": 0.01, "clump": 5, "sieve": [3, None],
                                         "continuum_removed": True}
    assert r.job_table() == {"detect": "sam", "far": 0.01, "clump": 5, "sieve": [3, None], "continuum_removed": True}
    a = AnalyseRequest.from_mapping({"analyse": "kmeans", "params": {"k": "2..4"}, "sample": "500"})
    assert a.select == "sample" and a.sample == 500 and AnalyseRequest.from_dict(a.to_dict()) == a
    with pytest.raises(InputError, match="unknown key"):
        DetectRequest.from_dict({"method": "sam", "hidden": 3})


def test_every_key_has_one_name_per_front_end():
    from dataclasses import fields

    for cls in (DetectRequest, AnalyseRequest):
        assert {f.name for f in fields(cls)} <= set(VOCABULARY)
    assert "clump" in job_keys("detect") and "targets" in job_keys("detect") and "truth" not in job_keys("detect")
    assert job_keys("analyse") >= {"analyse", "select", "sample", "seed", "roi", "roi_class"}
    assert len({w.cli for w in VOCABULARY.values()}) == len(VOCABULARY)


def test_the_filter_reaches_the_mask_objects_pd_and_the_report(tmp_path, capsys):
    """Two targets and a one-pixel speck: the sieve removes the speck from the mask, the object table and
    the mask's detection rate, and report.json records the filter; the window's remask filters alike."""
    from hyperapp.cli import main
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.io.writers import write_envi_cube

    rng = np.random.default_rng(0)
    X = rng.normal(0.3, 0.01, (40, 40, 8)).astype(np.float32)
    target = np.linspace(0.1, 0.9, 8, dtype=np.float32)
    X[5:10, 5:10] = target
    X[25:29, 20:24] = target
    X[33, 33] = target  # a speck
    truth = np.zeros((40, 40), np.int8)
    truth[5:10, 5:10] = truth[25:29, 20:24] = 1
    clicks = np.zeros((40, 40), bool)
    clicks[6, 6] = True
    cube = cube_from_array(X, "f")
    plain = run_detection(cube, DetectRequest("sam", device="cpu", threshold=0.99), clicks, truth=truth)
    sieved = run_detection(cube, DetectRequest("sam", device="cpu", threshold=0.99, sieve=(2, None)), clicks,
                           truth=truth)
    assert plain.mask[33, 33] and not sieved.mask[33, 33]
    assert plain.report["objects"] == 3 and sieved.report["objects"] == 2 and len(sieved.objects) == 2
    assert sieved.report["detections"] == plain.report["detections"] - 1
    assert sieved.report["filters"] == {"clump": 0, "sieve": [2, None], "connectivity": 8}
    assert sieved.report["evaluation"]["pd_of_mask"] == pytest.approx(1.0)
    assert not sieved.remask(0.99)[33, 33] and sieved.count_at(0.99) == (sieved.report["detections"], 2)
    # the command line's options, to report.json and objects.csv
    hdr = write_envi_cube(tmp_path / "f", X, "bsq")
    np.savetxt(tmp_path / "clicks.csv", [[6, 6]], fmt="%d", delimiter=",", header="row,col", comments="")
    rc = main(["--headless", "detect", str(hdr), "--method", "sam", "--targets", str(tmp_path / "clicks.csv"),
               "--threshold", "0.99", "--sieve", "2", "--device", "cpu", "--out", str(tmp_path / "out")])
    assert rc == 0, capsys.readouterr().err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["filters"]["sieve"] == [2, None] and rep["objects"] == 2
    assert len((tmp_path / "out" / "objects.csv").read_text().strip().splitlines()) == 3  # header + 2


def test_continuum_removal_runs_on_the_request():
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection

    rng = np.random.default_rng(1)
    X = rng.uniform(0.2, 0.8, (20, 20, 12)).astype(np.float32)
    clicks = np.zeros((20, 20), bool)
    clicks[3, 3] = True
    cube = cube_from_array(X, "c")
    a = run_detection(cube, DetectRequest("sam", device="cpu"), clicks)
    b = run_detection(cube, DetectRequest("sam", device="cpu", continuum_removed=True), clicks)
    assert b.report["continuum_removed"] and "continuum_removed" not in a.report
    assert not np.allclose(a.scores, b.scores)


def test_continuum_removal_and_mnf_together():
    """MNF runs on the continuum-removed spectra (InContinuum outside InMNF); the report counts the
    components of the MNF inside."""
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection

    rng = np.random.default_rng(2)
    X = rng.uniform(0.2, 0.8, (24, 24, 12)).astype(np.float32)
    clicks = np.zeros((24, 24), bool)
    clicks[3, 3] = clicks[4, 4] = True
    r = run_detection(cube_from_array(X, "c"), DetectRequest("ace", device="cpu", mnf=5, continuum_removed=True),
                      clicks)
    assert r.report["mnf_components"] == 5 and r.report["continuum_removed"]
    with pytest.raises(InputError, match="not a pixel detector"):
        DetectRequest.from_mapping({"method": "ffbp", "continuum_removed": True}, "cli", need_targets=False)


def test_the_windows_filter_runs_saves_and_reopens(qtbot, win, land_hdr, tmp_path):
    """The detector form's filter goes into the run's request and result; the project file holds the
    request, and reopening it runs it again (in a worker) and shows its settings in the form."""
    from hyperapp.gui.main_window import MainWindow

    from .conftest import mark_clicks, run_detector

    assert win.open_cube(land_hdr)
    mark_clicks(win, land_hdr)
    win.detector.clump.setValue(3)
    win.detector.sieve_min.setValue(4)
    run = run_detector(qtbot, win, "ace")
    assert run is not None, win.last_error
    assert run.request.clump == 3 and run.request.sieve == (4, None) and run.request.device == "cpu"
    assert run.result.report["filters"] == {"clump": 3, "sieve": [4, None], "connectivity": 8}
    assert win.results.filters == run.result.filters
    assert win.save_project(tmp_path / "p.hyperapp.json"), win.last_error
    w2 = MainWindow()
    qtbot.addWidget(w2)
    assert w2.open_project(tmp_path / "p.hyperapp.json"), w2.last_error
    assert w2.detector.clump.value() == 3 and w2.detector.sieve_min.value() == 4
    qtbot.waitUntil(lambda: w2.worker is None, timeout=120000)
    again = w2.session.runs[0]
    assert again.request.replace(device="auto", threshold=None, far=None) == \
        run.request.replace(device="auto", threshold=None, far=None)
    np.testing.assert_array_equal(again.result.mask, run.result.mask)


def test_the_cli_and_a_job_build_the_same_analysis_request(tmp_path):
    from hyperapp.batch.jobfile import load_job
    from hyperapp.cli import _request, build_parser

    cube, _ = _library(tmp_path)
    args = build_parser().parse_args(["analyse", str(cube), "--method", "kmeans", "--param", "k=2..5",
                                      "--sample", "500", "--seed", "3", "--out", str(tmp_path / "o")])
    cli = _request(args, "analyse")
    job = load_job(_job(tmp_path, """
[inputs]
paths = ["scenes/*.hdr"]
[[steps]]
analyse = "kmeans"
params = { k = "2..5" }
sample = 500
seed = 3
[output]
folder = "out"
"""))
    assert cli == job.steps[0].request == AnalyseRequest("kmeans", params={"k": "2..5"}, sample=500, seed=3)
