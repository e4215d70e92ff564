"""Batch mode: job files, a local Dask cluster over 20 cubes with a broken one, resuming a
killed run, and the README's example job."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hyperapp.batch.jobfile import job_text, load_job
from hyperapp.cli import main
from hyperapp.core.errors import InputError

from .conftest import ROOT, cli_env

pytest.importorskip("distributed")


def _scenes(folder: Path, n: int, size: int = 48, bands: int = 16, seed: int = 0) -> list[Path]:
    """``n`` small ENVI scenes of one material mix with a bright target block each."""
    import spectral.io.envi as envi

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.1, 0.5, (4, bands))
    target = rng.uniform(0.3, 0.9, bands)
    out = []
    for i in range(n):
        ab = rng.dirichlet(np.ones(4), (size, size))
        X = (ab @ ends + rng.normal(0, 0.005, (size, size, bands))).astype(np.float32)
        X[10:14, 10:14] = target + rng.normal(0, 0.005, (4, 4, bands))
        hdr = folder / f"scene-{i:02d}.hdr"
        envi.save_image(str(hdr), X, dtype=np.float32, force=True, ext=".img")
        out.append(hdr)
    return out


def _job(tmp: Path, body: str) -> Path:
    p = tmp / "job.toml"
    p.write_text(body)
    return p


BASIC = """
[inputs]
paths = ["scenes/*.hdr"]
[[steps]]
detect = "sam"
targets = "clicks.csv"
far = 0.01
[output]
folder = "out"
"""


def test_job_file_errors_name_file_and_key(tmp_path):
    _scenes(tmp_path / "scenes", 1)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    cases = [
        ("[inputs]\npaths = 3\n", "inputs.paths"),
        (BASIC.replace('"scenes/*.hdr"', '"nothing/*.hdr"'), "matches no file"),
        (BASIC.replace('detect = "sam"', 'detect = "samm"'), "unknown method 'samm'"),
        (BASIC.replace("far = 0.01", "far = 2.0"), "steps[0].far"),
        (BASIC.replace('targets = "clicks.csv"', ""), "needs targets"),
        (BASIC.replace("far = 0.01", "params = { hidden = 3 }"), "steps[0].params"),
        (BASIC + "[extra]\n", "unknown section"),
        ("[inputs\n", "not valid TOML"),
    ]
    for body, message in cases:
        with pytest.raises(InputError, match=re.escape(message)) as e:
            load_job(_job(tmp_path, body))
        assert "job.toml" in str(e.value)
    # the CLI: one line, exit 2
    assert main(["--headless", "run", str(_job(tmp_path, cases[2][0]))]) == 2


def test_twenty_cubes_on_a_dask_cluster_with_a_broken_one(tmp_path, capfd, monkeypatch):
    # the worker processes start in this folder: outside the checkout, they import the installed package
    monkeypatch.chdir(tmp_path)
    cubes = _scenes(tmp_path / "scenes", 20)
    cubes[7].with_suffix(".img").write_bytes(b"\0" * 100)  # truncated: a broken cube
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    job = _job(tmp_path, BASIC)
    code = main(["--headless", "run", str(job), "--workers", "2", "--device", "cpu"])
    err = capfd.readouterr().err  # the worker processes' output too
    assert code == 1
    assert "distributed.worker - INFO" not in err  # the workers' start and stop lines stay quiet
    out = tmp_path / "out"
    done = [c for c in cubes if (out / c.stem / "detect-sam" / "report.json").is_file()]
    assert len(done) == 19 and cubes[7] not in done
    assert "scene-07" in err and "truncated" in err  # the summary names it and says why
    log = (out / "hyperapp-batch.log").read_text()
    assert "FAILED" in log and "scene-07" in log and "truncated" in log
    man = json.loads((out / "manifest.json").read_text())
    assert sum(e["status"] == "done" for e in man["cubes"].values()) == 19
    # every finished cube found its target block
    rep = json.loads((out / "scene-03" / "detect-sam" / "report.json").read_text())
    assert rep["detections"] >= 16


def test_killed_run_resumes_without_redoing_cubes(tmp_path):
    cubes = _scenes(tmp_path / "scenes", 20, size=160, bands=48)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    job = _job(tmp_path, BASIC.replace('detect = "sam"', 'detect = "rbfn"'))
    out = tmp_path / "out"
    env = cli_env(CUDA_VISIBLE_DEVICES="")
    cmd = [sys.executable, "-m", "hyperapp", "--headless", "run", str(job), "--device", "cpu"]
    p = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    n_done = 0
    while time.time() - t0 < 120 and p.poll() is None:
        try:
            n_done = sum(e["status"] == "done" for e in
                         json.loads((out / "manifest.json").read_text())["cubes"].values())
        except (OSError, ValueError):
            n_done = 0
        if n_done >= 4:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    man = json.loads((out / "manifest.json").read_text())["cubes"]
    first = {c: e for c, e in man.items() if e["status"] == "done"}
    assert 0 < len(first) < 20
    stamps = {c: (Path(e["outputs"][0]) / "report.json").stat().st_mtime_ns for c, e in first.items()}
    # no partial output under final names: a step's folder holds all its files or none
    finals = {"scores.hdr", "scores.img", "mask.hdr", "mask.img", "objects.csv", "report.json"}
    for c in cubes:
        d = out / c.stem / "detect-rbfn"
        if d.exists():
            names = {f.name for f in d.iterdir() if not f.name.startswith(".")}
            assert names in (set(), finals), names
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    man = json.loads((out / "manifest.json").read_text())["cubes"]
    assert sum(e["status"] == "done" for e in man.values()) == 20
    for c, ns in stamps.items():  # the finished cubes were not recomputed
        assert (Path(man[c]["outputs"][0]) / "report.json").stat().st_mtime_ns == ns
    assert "skipped" in r.stderr


def test_readme_example_job_runs(tmp_path):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    _scenes(tmp_path / "scenes", 3)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    job = _job(tmp_path, block)
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 0
    j = load_job(job)
    for c in j.inputs:
        for s in j.steps:
            assert (Path(j.output) / Path(c).stem / s.name / "report.json").is_file()


def test_job_text_round_trips(tmp_path):
    _scenes(tmp_path / "scenes", 1)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    text = job_text([str(tmp_path / "scenes" / "*.hdr")], [
        {"detect": "rbfn", "targets": str(tmp_path / "clicks.csv"), "params": {"n_hidden": 6, "whiten": "pca"},
         "far": 0.001}], str(tmp_path / "o"))
    j = load_job(_job(tmp_path, text))
    assert j.steps[0].request.params == {"n_hidden": 6, "whiten": "pca"} and j.steps[0].request.far == 0.001


def test_gui_saves_a_batch_job(qtbot, win, land_hdr, tmp_path):
    pytest.importorskip("pytestqt")
    from hyperapp.io import read_labels

    assert win.open_cube(land_hdr)
    win.session.roi.mark_pixels(np.argwhere(read_labels(land_hdr.with_name("land_targets.csv"), (128, 128))),
                                "target")
    win.session.roi.mark_pixels(np.array([[100, 100], [101, 101]]), "background")
    win.detector.device.setCurrentIndex(win.detector.device.findData("cpu"))
    for method in ("sam", "rbfn"):
        win.detector.set_method(method)
        with qtbot.waitSignal(win.run_finished, timeout=60000):
            win.run_detector()
    assert win.save_batch_job(tmp_path / "campaign")
    # the job loads: the background marks go to the step that learns from them (RBFN), not to SAM's, and
    # no step carries an option its run did not use (a job refuses both)
    job = load_job(tmp_path / "campaign.toml")
    assert [s.method for s in job.steps] == ["sam", "rbfn"]
    assert job.steps[0].request.background is None and Path(job.steps[1].request.background).name == "campaign-background.csv"
    assert "n_library_targets" not in job.steps[1].request.params and "min_fill" not in job.steps[1].request.params
    job.steps = job.steps[:1]
    assert job.steps[0].method == "sam" and Path(job.steps[0].request.targets).name == "campaign-clicks.csv"
    assert str(land_hdr.resolve()) in job.inputs
    job.inputs = [str(land_hdr.resolve())]
    from hyperapp.batch.runner import run_job

    assert run_job(job, device="cpu") == 0
    rep = json.loads((Path(job.output) / "land" / "detect-sam" / "report.json").read_text())
    assert rep["n_target_pixels"] == 5


def test_a_step_trained_on_another_scene_scores_as_the_cli_does(tmp_path, capsys):
    """A job step's ``train`` and the CLI's ``--train-from`` are one function
    (:func:`hyperapp.detect.training.train_on_scene`): the same scene and clicks give the same scores."""
    from hyperapp.io import open_cube

    _scenes(tmp_path / "scenes", 2)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    job = _job(tmp_path, BASIC.replace('detect = "sam"', 'detect = "ace"').replace(
        'targets = "clicks.csv"', 'targets = "clicks.csv"\ntrain = "scenes/scene-00.hdr"'))
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 0
    assert (tmp_path / "out/.models/detect-ace.npz").is_file()
    cube = tmp_path / "scenes/scene-01.hdr"
    assert main(["--headless", "detect", str(cube), "--method", "ace", "--train-from",
                 str(tmp_path / "scenes/scene-00.hdr"), "--train-truth", str(tmp_path / "clicks.csv"),
                 "--far", "0.01", "--device", "cpu", "--out", str(tmp_path / "cli")]) == 0
    batch = open_cube(tmp_path / "out/scene-01/detect-ace/scores.hdr").read()
    cli = open_cube(tmp_path / "cli/scores.hdr").read()
    np.testing.assert_array_equal(batch, cli)
    rep = json.loads((tmp_path / "out/scene-01/detect-ace/report.json").read_text())
    assert rep["n_target_pixels"] == 0  # the clicks were on the training scene
    # a trained model and a saved one: the CLI refuses both as the job file does
    capsys.readouterr()
    assert main(["--headless", "detect", str(cube), "--method", "ace", "--train-from", str(cube), "--train-truth",
                 str(tmp_path / "clicks.csv"), "--model", str(tmp_path / "out/.models/detect-ace.npz"),
                 "--out", str(tmp_path / "both")]) == 2
    assert "not both" in capsys.readouterr().err


def test_masks_a_glob_matches_are_left_out_and_said_so(tmp_path, capsys):
    """Truth masks beside the cubes (ENVI classification files, as hyperapp writes them, or named in
    [inputs.truth]) are not run as cubes; the run's first line says how many were left out and why."""
    from hyperapp.io.writers import MASK_CLASSES, write_envi

    _scenes(tmp_path / "scenes", 2)
    truth = np.zeros((48, 48), np.uint8)
    truth[10:14, 10:14] = 1
    write_envi(tmp_path / "scenes" / "scene-00_truth", truth, classes=MASK_CLASSES)
    write_envi(tmp_path / "scenes" / "plain_truth", truth)  # ENVI Standard, but named a truth below
    assert "ENVI Classification" in (tmp_path / "scenes" / "scene-00_truth.hdr").read_text()
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    job = _job(tmp_path, BASIC.replace('paths = ["scenes/*.hdr"]', 'paths = ["scenes/*.hdr"]\n[inputs.truth]\n'
                                       '"scenes/scene-01.hdr" = "scenes/plain_truth.hdr"'))
    j = load_job(job)
    assert [Path(c).name for c in j.inputs] == ["scene-00.hdr", "scene-01.hdr"]
    assert len(j.skipped) == 2
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("left out 2 file(s)"), err
    assert not (tmp_path / "out" / "scene-00_truth").exists() and not (tmp_path / "out" / "plain_truth").exists()
    only_masks = _job(tmp_path, BASIC.replace("scenes/*.hdr", "scenes/scene-*_truth.hdr"))
    with pytest.raises(InputError, match="matches no cube, only 1 other file"):
        load_job(only_masks)
    # a glob's tables, images and job files are left out too, and said so; one named as an input is refused
    (tmp_path / "scenes" / "notes.csv").write_text("row,col\n1,1\n")
    (tmp_path / "scenes" / "job.toml").write_text("")
    j = load_job(_job(tmp_path, BASIC.replace("scenes/*.hdr", "scenes/*")))
    assert [Path(c).name for c in j.inputs] == ["plain_truth.hdr", "scene-00.hdr", "scene-01.hdr"]
    assert "a CSV table file, not a cube" in j.skipped[str(tmp_path / "scenes" / "notes.csv")]
    with pytest.raises(InputError, match=r"inputs.paths\[0\].*CSV table file, not a cube"):
        load_job(_job(tmp_path, BASIC.replace("scenes/*.hdr", "scenes/notes.csv")))


def test_an_interrupted_run_says_which_cubes_it_keeps(tmp_path, capsys, monkeypatch):
    """Ctrl-C after the first cube: its folder stays for the next run, and the message says so."""
    import hyperapp.batch.runner as batch

    _scenes(tmp_path / "scenes", 3)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    job = _job(tmp_path, BASIC)
    real, calls = batch.detections_text, []

    def stop_after_first(d):  # called once a cube is recorded as done
        calls.append(d)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(d)

    monkeypatch.setattr(batch, "detections_text", stop_after_first)
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 130
    err = capsys.readouterr().err
    m = re.search(r"interrupted; (\d+) cube\(s\) done are kept; run again to resume", err)
    assert m and "nothing written" not in err, err
    kept = int(m.group(1))
    assert kept == sum((tmp_path / "out" / f"scene-{i:02d}" / "detect-sam" / "report.json").is_file()
                       for i in range(3)) >= 1
    assert "interrupted: " in (tmp_path / "out" / "hyperapp-batch.log").read_text()  # the log says so too
    # a second interrupt while the stages stop (seen in the threads' join) no longer replaces the first:
    # the line said "nothing written" over the cubes kept
    import shutil

    from hyperapp.batch.pipeline import CubePipeline

    shutil.rmtree(tmp_path / "out")
    calls.clear()
    real_close = CubePipeline.close

    def close_interrupted(self, wait=True):
        real_close(self, wait)
        raise KeyboardInterrupt

    monkeypatch.setattr(CubePipeline, "close", close_interrupted)
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 130
    err = capsys.readouterr().err
    assert re.search(r"interrupted; \d+ cube\(s\) done are kept", err) and "nothing written" not in err, err


def test_a_trained_model_that_cannot_score_a_cube_names_the_training_scene(tmp_path, capsys):
    """A cube changed after the job was checked (another band count): its failure names the scene the
    model was trained on, never the run's internal copy of the model."""
    from rich.console import Console

    from hyperapp.batch.runner import run_job

    _scenes(tmp_path / "scenes", 2)
    _scenes(tmp_path / "train", 1)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    job = load_job(_job(tmp_path, BASIC.replace('detect = "sam"', 'detect = "ace"').replace(
        'targets = "clicks.csv"', 'targets = "clicks.csv"\ntrain = "train/scene-00.hdr"')))
    _scenes(tmp_path / "scenes", 1, bands=12)  # scene-00 now has 12 bands
    console = Console(stderr=True, width=400)
    assert run_job(job, device="cpu", console=console) == 1
    err = capsys.readouterr().err
    assert "train/scene-00.hdr" in err and "cannot score" in err and ".models" not in err, err
    assert (tmp_path / "out" / "scene-01" / "detect-ace" / "report.json").is_file()


def test_a_skipped_cube_shows_its_own_jobs_detections(tmp_path, capsys):
    """Two jobs writing into one output folder: a rerun of the first skips its finished cubes, and their
    summary rows show the first job's counts, not the second job's."""
    _scenes(tmp_path / "scenes", 2)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    first = _job(tmp_path, BASIC)
    second = tmp_path / "second.toml"
    second.write_text(BASIC.replace('detect = "sam"', 'detect = "ace"').replace("far = 0.01", "far = 0.2"))
    assert main(["--headless", "run", str(first)]) == 0
    out1 = "".join(capsys.readouterr())
    assert main(["--headless", "run", str(second)]) == 0
    out2 = "".join(capsys.readouterr())
    counts1 = re.findall(r"detect-sam (\d+)", out1)
    assert counts1 and re.findall(r"detect-ace (\d+)", out2), out2
    assert main(["--headless", "run", str(first)]) == 0
    again = "".join(capsys.readouterr())
    assert "skipped" in again and "detect-ace" not in again, again
    assert re.findall(r"detect-sam (\d+)", again) == counts1, again


def test_worker_envs_deal_gpus_and_cores_out():
    from hyperapp.batch.runner import worker_envs

    # two GPUs, two workers: one GPU each, half the cores each
    envs = worker_envs(2, n_gpu=2, gpus=None, cores=32)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1"]
    assert {e["HYPERAPP_CORES"] for e in envs} == {"16"}
    # four workers held to the first GPU of two (the bench's "processes on one device")
    assert [e["CUDA_VISIBLE_DEVICES"] for e in worker_envs(4, n_gpu=2, gpus=1, cores=32)] == ["0"] * 4
    # three workers over four GPUs use three of them; one GPU or none: no device named
    assert [e["CUDA_VISIBLE_DEVICES"] for e in worker_envs(3, n_gpu=4, gpus=None, cores=8)] == ["0", "1", "2"]
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in worker_envs(2, n_gpu=1, gpus=None, cores=8))
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in worker_envs(2, n_gpu=0, gpus=1, cores=8))
    # never fewer than two read threads
    assert worker_envs(8, n_gpu=0, gpus=None, cores=4)[0]["HYPERAPP_CORES"] == "2"


def test_step_folder_refuses_names_and_links_that_lead_elsewhere(tmp_path):
    from hyperapp.batch.folders import step_folder
    from hyperapp.core.errors import InputError

    cube_out = tmp_path / "out" / "c00"
    cube_out.mkdir(parents=True)
    assert step_folder(cube_out, "detect-rbfn") == cube_out / "detect-rbfn"
    for bad in ("../x", "a/b", "..", ".hidden", ""):
        with pytest.raises(InputError, match="step name"):
            step_folder(cube_out, bad)
    (tmp_path / "elsewhere").mkdir()
    (cube_out / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="symbolic link"):
        step_folder(cube_out, "linked")


def test_a_mat_file_holding_a_cube_and_its_truth_scores_in_a_job(tmp_path):
    """A .mat scene with its truth beside the cube in the same file (as the ABU scenes are) is named as its
    own [inputs.truth]: it runs as a cube and its report carries AUC (it was left out as a mask), and the
    job's dataset counts it as a .mat input."""
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    X = rng.uniform(0.1, 0.5, (30, 30, 12)).astype(np.float32)
    X[5:8, 5:8] += 0.4
    truth = np.zeros((30, 30), np.uint8)
    truth[5:8, 5:8] = 1
    savemat(tmp_path / "scene.mat", {"data": X, "map": truth})
    (tmp_path / "clicks.csv").write_text("row,col\n6,6\n")
    job = _job(tmp_path, '[inputs]\npaths = ["scene.mat"]\ndataset = "data"\n[inputs.truth]\n'
                         '"scene.mat" = "scene.mat"\n[[steps]]\ndetect = "ace"\ntargets = "clicks.csv"\n'
                         '[output]\nfolder = "out"\n')
    j = load_job(job)
    assert [Path(c).name for c in j.inputs] == ["scene.mat"] and not j.skipped
    from hyperapp.batch.runner import run_job

    assert run_job(j, device="cpu") == 0
    rep = json.loads((tmp_path / "out" / "scene" / "detect-ace" / "report.json").read_text())
    assert rep["evaluation"]["auc"] > 0.9


def test_a_second_run_into_a_busy_output_folder_is_refused(tmp_path):
    """Two runs into one output folder rewrote each other's manifest (a finished cube's record lost) and
    interleaved their outputs: while one run holds the folder, another is one line and writes nothing."""
    fcntl = pytest.importorskip("fcntl")
    from hyperapp.batch.jobfile import LOCK
    from hyperapp.batch.runner import run_job

    _scenes(tmp_path / "scenes", 1)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    job = load_job(_job(tmp_path, BASIC))
    (tmp_path / "out").mkdir()
    with open(tmp_path / "out" / LOCK, "a") as held:  # another run's lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(InputError, match=r"\[output.folder\].*another hyperapp run is writing into this folder"):
            run_job(job, device="cpu")
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [LOCK]
    assert run_job(job, device="cpu") == 0  # once it is free
    assert run_job(job, device="cpu") == 0  # and its own lock was let go


def test_a_value_that_fits_no_input_stops_the_job_and_one_that_fits_some_fails_the_others_alone(tmp_path):
    """Checked on the inputs' headers before any work: clicks outside every cube, bands beyond every cube's,
    a background that is the targets, an ROI class no map holds, a truth that is the clicks, a dataset no
    input has -- each a job error naming its key. Clicks inside one cube of two: the job loads, and only
    the other cube fails when it runs."""
    small = _scenes(tmp_path / "small", 1, size=24)[0]
    big = _scenes(tmp_path / "big", 1, size=48)[0]
    (tmp_path / "in-big.csv").write_text("row,col\n11,11\n40,40\n")
    (tmp_path / "outside.csv").write_text("row,col\n60,60\n")
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    roi = np.zeros((24, 24), np.uint8)
    roi[:4, :4] = 1
    np.save(tmp_path / "roi.npy", roi)

    def job(inputs: str, step: str, extra: str = "") -> Path:
        p = tmp_path / f"job-{len(list(tmp_path.glob('job-*.toml')))}.toml"
        p.write_text(f"[inputs]\npaths = [{inputs}]\n{extra}[[steps]]\n{step}\n[output]\nfolder = \"out\"\n")
        return p

    one = f'"{small.as_posix()}"'
    for path, key in (
        (job(one, 'detect = "ace"\ntargets = "outside.csv"'), "steps[0].targets"),
        (job(one, 'detect = "ace"\ntargets = "clicks.csv"\nbands = "0-40"'), "steps[0].bands"),
        (job(one, 'detect = "rbfn"\ntargets = "clicks.csv"\nbackground = "clicks.csv"'), "steps[0].background"),
        (job(one, 'analyse = "kmeans"\nparams = { k = 3 }\nselect = "roi"\nroi = "roi.npy"\nroi_class = 4'),
         "steps[0].roi"),
        (job(one, 'detect = "ace"\ntargets = "clicks.csv"', f'[inputs.truth]\n{one} = "clicks.csv"\n'), "inputs.truth"),
    ):
        with pytest.raises(InputError, match=re.escape(f"[{key}")):
            load_job(path)
    both = load_job(job(f'{one}, "{big.as_posix()}"', 'detect = "ace"\ntargets = "in-big.csv"'))
    from hyperapp.batch.runner import run_job

    assert run_job(both, device="cpu") == 1  # the small cube fails alone; the big one is done
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())["cubes"]
    assert man[str(big)]["status"] == "done" and man[str(small)]["status"] == "failed"


def test_a_double_star_glob_takes_every_depth_and_never_the_jobs_own_outputs(tmp_path, capsys):
    """``**`` in an input glob is any depth of folders (as a shell's globstar); a glob that reaches the
    job's own output folder leaves the outputs of the run before out (said so), and a second run finds
    the same cubes done."""
    import shutil

    for sub, seed in (("scenes", 0), ("scenes/a", 1), ("scenes/a/b", 2)):
        for i, hdr in enumerate(_scenes(tmp_path / sub, 1, seed=seed)):
            for f in (hdr, hdr.with_suffix(".img")):
                shutil.move(f, tmp_path / sub / f"{sub.replace('/', '-')}-{i}{f.suffix}")
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    body = BASIC.replace('paths = ["scenes/*.hdr"]', 'paths = ["scenes/**/*.hdr"]').replace('folder = "out"',
                                                                                          'folder = "scenes/out"')
    job = _job(tmp_path, body)
    assert sorted(Path(c).name for c in load_job(job).inputs) == ["scenes-0.hdr", "scenes-a-0.hdr", "scenes-a-b-0.hdr"]
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 0
    capsys.readouterr()
    j = load_job(job)  # the outputs (score maps are ENVI images too) are now under the glob
    assert sorted(Path(c).name for c in j.inputs) == ["scenes-0.hdr", "scenes-a-0.hdr", "scenes-a-b-0.hdr"]
    assert j.skipped and set(j.skipped.values()) == {"files in the job's own output folder"}
    assert main(["--headless", "run", str(job), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "files in the job's own output folder" in err.splitlines()[0] and err.count(" skipped ") == 3
    with pytest.raises(InputError, match=r"inputs.paths\[0\].*only files in the job's own output folder"):
        load_job(_job(tmp_path, body.replace("scenes/**/*.hdr", "scenes/out/**/*.hdr")))


@pytest.mark.parametrize("prepared", [False, True])
def test_a_batch_on_an_unprepared_gpu_says_how_to_prepare_it(tmp_path, capsys, monkeypatch, prepared):
    """A batch about to use a GPU whose kernels were never compiled ahead says so, with the command that
    does it (its first cubes would compile them mid-run); prepared, or on the CPU, it says nothing."""
    from rich.console import Console

    from hyperapp.batch import prepare_gpu as gpu_prepare
    from hyperapp.batch.runner import run_job
    from hyperapp.core import backend

    _scenes(tmp_path / "scenes", 1)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    monkeypatch.setattr(backend, "gpu_available", lambda: True)  # the note's test only; the run is on the CPU
    monkeypatch.setattr(gpu_prepare, "is_prepared", lambda: prepared)
    for device, said in (("auto", not prepared), ("cpu", False)):
        job = load_job(_job(tmp_path, BASIC.replace('folder = "out"', f'folder = "out-{device}"')))
        assert run_job(job, device=device, console=Console(stderr=True, width=400)) == 0
        err = capsys.readouterr().err
        assert ("prepare-gpu" in err and "not prepared" in err) == said, err


def test_a_tired_users_job_files_get_words_not_python(tmp_path, capsys):
    """An empty job, a section left out, a misspelt step kind: said in words (they said "got NoneType
    None", or nothing of the stray key); an input listed twice, or a link to one listed, runs once and is
    said to be left out (it was dropped without a word)."""
    from hyperapp.batch.jobfile import load_job

    _scenes(tmp_path / "scenes", 1)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n")
    for body, words in (("", "is empty: a job has [inputs]"),
                        (BASIC.replace("[output]\nfolder = \"out\"", ""), "[output] is missing: it must be a table"),
                        ('[inputs]\npaths = ["scenes/*.hdr"]\n[output]\nfolder = "out"\n', "[steps] is missing"),
                        (BASIC.replace('detect = "sam"', 'detetc = "sam"'), "it has 'detetc', spelt otherwise")):
        with pytest.raises(InputError, match=re.escape(words)):
            load_job(_job(tmp_path, body))
    (tmp_path / "again.hdr").symlink_to(tmp_path / "scenes" / "scene-00.hdr")
    job = load_job(_job(tmp_path, BASIC.replace('paths = ["scenes/*.hdr"]',
                                                'paths = ["scenes/*.hdr", "scenes/scene-00.hdr", "again.hdr"]')))
    assert len(job.inputs) == 1 and len(job.twice) == 2
    assert main(["--headless", "run", str(tmp_path / "job.toml"), "--device", "cpu"]) == 0
    assert "left out 2 input(s) that are the same file as one listed before" in capsys.readouterr().err
