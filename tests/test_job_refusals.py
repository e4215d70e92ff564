"""Job files: a job is valid or not before its first cube, every key checked with the CLI's words; libraries
and bands in jobs as on the command line."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hyperapp.core.errors import Cancelled, HyperappError, InputError

pytest.importorskip("distributed")
from .refusal_helpers import _cli, _cube, _one_clean_line  # noqa: F401


def _job(folder: Path, body: str, name="job.toml") -> Path:
    p = folder / name
    p.write_text(body)
    return p


def _scene_job(tmp_path, step: str, out="out", paths='["scenes/*.hdr"]') -> Path:
    return _job(tmp_path, f"[inputs]\npaths = {paths}\n[[steps]]\n{step}\n[output]\nfolder = \"{out}\"\n")


def test_job_is_valid_or_not_before_its_first_cube(tmp_path, capsys):
    from hyperapp.batch.jobfile import load_job

    _cube(tmp_path / "scenes" / "s1.hdr")
    (tmp_path / "clicks.csv").write_text("row,col\n5,5\n")
    (tmp_path / "afolder").mkdir()
    (tmp_path / "words.csv").write_text("row,col\nx,y\n")
    np.save(tmp_path / "halves.npy", np.full((24, 24), 0.5))
    cases = [
        ('detect = "sam"\ntargets = "words.csv"', "steps[0].targets"),
        ('analyse = "forest"\nroi = "halves.npy"', "steps[0].roi"),
        ('detect = "sam"\nmodel = "clicks.csv"', "steps[0].model"),
        ('analyse = "kmeans"\nparams = { k = 0 }', "steps[0].params"),
        ('analyse = "gmm"\nparams = { covariance = "banana" }', "covariance"),
        ('analyse = "hac"\nparams = { linkage = "foo" }', "linkage"),
        ('analyse = "kmeans"\nparams = { n_init = 2.5 }', "n_init"),
        ('analyse = "kmeans"\nsample = 0', "steps[0].sample"),
        ('analyse = "kmeans"\nsample = true', "steps[0].sample"),
        ('analyse = "kmeans"\nseed = -1', "steps[0].seed"),
        ('analyse = "kmeans"\nselect = "objects"', "steps[0].select"),
        ('analyse = "kmeans"\nselect = "roi"', "steps[0].select"),
        ('analyse = "forest"', "steps[0].roi"),
        ('analyse = "kmeans"\nroi = "afolder"', "is a folder"),
        ('analyse = "kmeans"\nbands = ""', "steps[0].bands"),
        ('detect = "sam"\ntargets = "afolder"', "steps[0].targets"),
        ('detect = "sam"\ntargets = "clicks.csv"\nthreshold = nan', "steps[0].threshold"),
        ('detect = "sam"\ntargets = "clicks.csv"\nthreshold = true', "steps[0].threshold"),
        ('detect = "sam"\ntargets = "clicks.csv"\nname = "../../escape"', "steps[0].name"),
        ('detect = "sam"\ntargets = "clicks.csv"\nname = ".."', "steps[0].name"),
        ('detect = "sam"\ntargets = "clicks.csv"\nmodel = "afolder"', "steps[0].model"),
        ('detect = "rx"\nall_bands = "maybe"', "steps[0].all_bands"),
    ]
    for step, words in cases:
        job = _scene_job(tmp_path, step)
        with pytest.raises(InputError, match=None) as e:
            load_job(job)
        assert words in str(e.value) and "job.toml" in str(e.value), (step, str(e.value))
        rc, err = _cli(["run", job, "--device", "cpu"], capsys)
        _one_clean_line(rc, err, "job.toml")
        assert not (tmp_path / "out").exists(), step
    for step, paths, words in [('detect = "rx"', '["afolder"]', "is a folder"),
                               ('detect = "rx"', '[]', "lists no cube")]:
        with pytest.raises(InputError, match=words):
            load_job(_scene_job(tmp_path, step, paths=paths))
    with pytest.raises(InputError, match="output.folder"):
        load_job(_scene_job(tmp_path, 'detect = "rx"', out=""))
    job = _scene_job(tmp_path, 'detect = "rx"')
    for argv, words in [(["--memory", "0"], "--memory"), (["--memory", "nan"], "--memory"),
                        (["--workers", "-1"], "--workers"), (["--scheduler", "not an address"], "--scheduler")]:
        rc, err = _cli(["run", job, *argv], capsys)
        _one_clean_line(rc, err, words)
    assert not (tmp_path / "out").exists()


def test_unreachable_scheduler_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    import hyperapp.batch.runner as batch

    monkeypatch.setattr(batch, "CONNECT_TIMEOUT", 1)
    _cube(tmp_path / "scenes" / "s1.hdr")
    job = _scene_job(tmp_path, 'detect = "rx"')
    t0 = time.perf_counter()
    rc, err = _cli(["run", job, "--scheduler", "tcp://127.0.0.1:1"], capsys)
    assert time.perf_counter() - t0 < 20
    _one_clean_line(rc, err, "scheduler", "127.0.0.1:1")
    assert not (tmp_path / "out").exists()


def test_inputs_sharing_a_name_get_their_own_folders(tmp_path, capsys):
    from hyperapp.batch.jobfile import load_job, output_names

    _cube(tmp_path / "a" / "x.hdr", seed=1)
    _cube(tmp_path / "b" / "x.hdr", seed=2)
    job = _job(tmp_path, '[inputs]\npaths = ["a/*.hdr", "b/*.hdr"]\n[[steps]]\ndetect = "rx"\n'
                         '[output]\nfolder = "out"\n')
    j = load_job(job)
    folders = [j.folder_of(c) for c in j.inputs]
    assert len({f.casefold() for f in folders}) == len(j.inputs) == len(folders)
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    assert rc == 0, err
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())["cubes"]
    outs = [e["outputs"][0] for e in man.values()]
    assert len(set(outs)) == len(j.inputs)
    scores = [np.fromfile(Path(o) / "scores.img", np.float32) for o in outs]
    assert not np.array_equal(scores[0], scores[1])  # two results, not one written twice
    # the rule: stems where unique; paths below the shared folder where not; extensions where needed
    names = output_names(["/d/a/x.hdr", "/d/b/x.hdr", "/d/c/y.hdr", "/d/c/z.hdr", "/d/c/z.h5"])
    assert names["/d/c/y.hdr"] == "y" and names["/d/a/x.hdr"] == "a-x" and names["/d/b/x.hdr"] == "b-x"
    assert names["/d/c/z.hdr"] != names["/d/c/z.h5"]


def test_a_failing_job_keeps_an_earlier_runs_records(tmp_path, capsys):
    """A cube that fails in a later run keeps the earlier run's record and outputs (the next good run skips
    it). The later job's clicks fit only the other, larger cube: the job is valid, and the small cube
    fails alone when it runs."""
    _cube(tmp_path / "scenes" / "s1.hdr")
    _cube(tmp_path / "scenes" / "s2.hdr", rows=32, cols=32, seed=4)
    good = _scene_job(tmp_path, 'detect = "rx"')
    assert _cli(["run", good, "--device", "cpu"], capsys)[0] == 0
    man_path = tmp_path / "out" / "manifest.json"
    first = json.loads(man_path.read_text())["cubes"]
    s1 = str(tmp_path / "scenes" / "s1.hdr")
    stamp = (Path(first[s1]["outputs"][0]) / "report.json").stat().st_mtime_ns
    (tmp_path / "far.csv").write_text("row,col\n30,30\n")  # outside s1 (24 x 24), inside s2
    bad = _job(tmp_path, '[inputs]\npaths = ["scenes/*.hdr"]\n[[steps]]\ndetect = "sam"\ntargets = "far.csv"\n'
                         'name = "detect-rx"\n[output]\nfolder = "out"\n', "bad.toml")
    rc, err = _cli(["run", bad, "--device", "cpu"], capsys)
    assert rc == 1 and "outside" in err
    e = json.loads(man_path.read_text())["cubes"][s1]
    assert e["status"] == "done" and e["outputs"] == first[s1]["outputs"] and "outside" in e["last_failure"]
    rc, err = _cli(["run", good, "--device", "cpu"], capsys)
    assert rc == 0 and "skipped" in err
    assert (Path(e["outputs"][0]) / "report.json").stat().st_mtime_ns == stamp  # s1 not recomputed


def test_no_data_cube_leaves_no_empty_folders(tmp_path, capsys):
    cube = _cube(tmp_path / "scenes" / "s1.hdr", header={"data ignore value": "nan"})
    data = np.fromfile(cube.with_suffix(".img"), np.float32)
    data[:] = np.nan
    data.tofile(cube.with_suffix(".img"))
    job = _scene_job(tmp_path, 'analyse = "kmeans"')
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    assert rc == 1 and "no data" in err
    assert not (tmp_path / "out" / "s1").exists()
    rc, err = _cli(["analyse", cube, "--method", "kmeans", "--out", tmp_path / "new" / "o"], capsys)
    _one_clean_line(rc, err, "no data")
    assert not (tmp_path / "new").exists()


def test_bad_bands_alike_from_the_cli_a_job_and_the_window(tmp_path, capsys):
    from hyperapp.detect.run import run_detection
    from hyperapp.project.session import Session
    from hyperapp.request import DetectRequest

    bbl = [1, 0, 1, 1, 0, 1, 1, 1]
    cube = _cube(tmp_path / "scenes" / "s1.hdr", bbl=bbl)
    for keep, flag, key in [(False, [], ""), (True, ["--all-bands"], "all_bands = true\n")]:
        cli_out = tmp_path / f"cli-{keep}"
        assert _cli(["detect", cube, "--method", "rx", "--threshold", "1", "--out", cli_out, *flag], capsys)[0] == 0
        job = _scene_job(tmp_path, f'detect = "rx"\nthreshold = 1.0\n{key}', out=f"job-{keep}")
        assert _cli(["run", job, "--device", "cpu"], capsys)[0] == 0
        s = Session.open(cube, all_bands=keep)
        win = run_detection(s.cube, DetectRequest("rx", device="cpu", threshold=1.0), None, None).scores
        a = np.fromfile(cli_out / "scores.img", np.float32)
        b = np.fromfile(tmp_path / f"job-{keep}" / "s1" / "detect-rx" / "scores.img", np.float32)
        assert json.loads((cli_out / "report.json").read_text())["shape"][2] == (8 if keep else 6)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, win.reshape(-1))
        assert s.to_project(tmp_path)["all_bands"] is keep


def test_cancel_stops_kmeans_within_a_chunk():
    """SIGTERM in a batch cancels the running cubes' progress: the fit stops at its next check."""
    from hyperapp.core.progress import Progress
    from hyperapp.models.kmeans import MultiKMeans

    X = np.random.default_rng(0).normal(size=(200000, 32)).astype(np.float32)
    prog = Progress()
    threading.Timer(0.3, prog.cancel).start()
    t0 = time.perf_counter()
    with pytest.raises(Cancelled):
        MultiKMeans(k="2..16", n_init=4, max_iter=300, tol=0).fit(X, progress=prog)
    assert time.perf_counter() - t0 < 5


def test_sigterm_stops_a_batch_analysis_promptly(tmp_path, capsys):
    import spectral.io.envi as envi

    (tmp_path / "scenes").mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        envi.save_image(str(tmp_path / "scenes" / f"s{i}.hdr"), rng.normal(size=(250, 240, 32)).astype(np.float32),
                        dtype=np.float32, force=True, ext=".img")
    job = _scene_job(tmp_path, 'analyse = "kmeans"\nselect = "image"\nparams = { k = "2..12", max_iter = 300, tol = 0 }')
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
    old = signal.getsignal(signal.SIGTERM)
    timer.start()
    t0 = time.perf_counter()
    try:
        rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert rc == 143, err
    assert time.perf_counter() - t0 < 1.5 + 6
    for i in range(2):  # nothing under the final names
        assert not (tmp_path / "out" / f"s{i}" / "analyse-kmeans" / "report.json").exists()


def test_identical_spectra_are_refused_by_every_analysis(tmp_path):
    from hyperapp.analyse.run import run_analysis
    from hyperapp.core.cube import cube_from_array
    from hyperapp.request import AnalyseRequest

    X = np.ones((10, 10, 6), np.float32)
    roi = np.zeros((10, 10), np.int32)
    roi[:5], roi[5:] = 1, 2
    for method in ("kmeans", "gmm", "som", "hac", "forest", "cart", "band-subsets", "band-clusters"):
        with pytest.raises(HyperappError, match="identical"):
            params = {"n_clusters": 2} if method == "band-clusters" else {}
            run_analysis(cube_from_array(X), AnalyseRequest(method, params=params, select="image", device="cpu"), roi=roi)


def test_library_options_refused_alike_by_the_cli_and_a_job_before_the_first_cube(tmp_path, capsys):
    """Spectral-library keys go through hyperapp.request.checks: the CLI and a job refuse the same
    things with the same words, naming the option or the step's key, and a job reads its libraries
    (and finds the names it picks) before any cube."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.io.speclib import SpectralLibrary, write_library

    cube = _cube(tmp_path / "scenes" / "s1.hdr")
    (tmp_path / "afolder").mkdir()
    write_library(SpectralLibrary(["a", "b"], np.random.default_rng(0).uniform(0.1, 0.5, (2, 8)),
                                  np.arange(400, 480, 10.0), "nm"), tmp_path / "lib.sli")
    (tmp_path / "notalib.txt").write_text("not a spectrum\n")
    cases = [  # (CLI options, job keys, words both say)
        (["--method", "ace", "--spectra", "a"], 'detect = "ace"\nspectra = "a"', "give {target_spectra} too"),
        (["--method", "ace", "--target-spectra", "lib.sli", "--undesired-names", "a"],
         'detect = "ace"\ntarget_spectra = "lib.sli"\nundesired_names = "a"', "give {undesired_spectra} too"),
        (["--method", "ace", "--target-spectra", "afolder"], 'detect = "ace"\ntarget_spectra = "afolder"',
         "is a folder; a spectral library"),
        (["--method", "ace", "--target-spectra", "missing.sli"], 'detect = "ace"\ntarget_spectra = "missing.sli"',
         "spectral library not found"),
        (["--method", "osp", "--target-spectra", "lib.sli", "--undesired-spectra", "missing.sli"],
         'detect = "osp"\ntarget_spectra = "lib.sli"\nundesired_spectra = ["missing.sli"]', "spectral library not found"),
        (["--method", "ace", "--target-spectra", "lib.sli", "--undesired-spectra", "lib.sli"],
         'detect = "ace"\ntarget_spectra = "lib.sli"\nundesired_spectra = "lib.sli"', "does not use undesired signatures"),
        (["--method", "rx", "--target-spectra", "lib.sli"], 'detect = "rx"\ntarget_spectra = "lib.sli"',
         "takes no target: drop {target_spectra}"),
        # the window detector learns from clicks only (it crashed with a library target)
        (["--method", "ffbp", "--target-spectra", "lib.sli"], 'detect = "ffbp"\ntarget_spectra = "lib.sli"',
         "learns from clicked target pixels, not from a library spectrum: drop {target_spectra}"),
        (["--method", "ace"], 'detect = "ace"', "needs {targets} (training clicks), {target_spectra}"),
        (["--method", "ace", "--spectra", ","], 'detect = "ace"\nspectra = ","', "must be spectrum names"),
    ]
    cli_label = {"target_spectra": "--target-spectra", "undesired_spectra": "--undesired-spectra", "targets": "--targets"}
    job_label = {k: k for k in cli_label}
    for argv, step, words in cases:
        argv = [str(tmp_path / a) if a.endswith((".sli", "afolder")) else a for a in argv]
        rc, err = _cli(["detect", cube, *argv, "--device", "cpu", "--out", tmp_path / "out"], capsys)
        _one_clean_line(rc, err, words.format(**cli_label))
        job = _scene_job(tmp_path, step)
        with pytest.raises(HyperappError) as e:  # (a missing file is named by its path, as for masks)
            load_job(job)
        assert words.format(**job_label) in str(e.value), (step, str(e.value))
        assert "not found" in words or "steps[0]." in str(e.value), (step, str(e.value))
        assert not (tmp_path / "out").exists(), step
    # a job reads its libraries before any cube: an unreadable library, a name it does not hold
    for step, words in [('detect = "ace"\ntarget_spectra = "notalib.txt"', "steps[0].target_spectra"),
                        ('detect = "ace"\ntarget_spectra = "lib.sli"\nspectra = "clay"', "no spectrum named 'clay'"),
                        ('detect = "osp"\ntarget_spectra = "lib.sli"\nundesired_spectra = ["lib.sli"]\n'
                         'undesired_names = "clay"', "steps[0].undesired_spectra[0]")]:
        with pytest.raises(InputError) as e:
            load_job(_scene_job(tmp_path, step))
        assert words in str(e.value), (step, str(e.value))
    # --mnf: a number of components, for pixel detectors trained here
    for argv, words in [(["--mnf", "x"], "--mnf must be a number of MNF components"),
                        (["--mnf", "-1"], "--mnf must be a number of MNF components"),
                        # (the window detector refuses the library target first)
                        (["--method", "ffbp", "--mnf", "4"], "learns from clicked target pixels")]:
        m = [] if "--method" in argv else ["--method", "ace"]
        rc, err = _cli(["detect", cube, *m, *argv, "--target-spectra", tmp_path / "lib.sli", "--device", "cpu",
                        "--out", tmp_path / "out"], capsys)
        _one_clean_line(rc, err, words)
    (tmp_path / "clicks.csv").write_text("row,col\n1,1\n")
    rc, err = _cli(["detect", cube, "--method", "ffbp", "--mnf", "4", "--targets", tmp_path / "clicks.csv",
                    "--device", "cpu", "--out", tmp_path / "out"], capsys)
    _one_clean_line(rc, err, "ffbp is not a pixel detector")
    assert not (tmp_path / "out").exists()
    job = load_job(_scene_job(tmp_path, 'detect = "osp"\ntarget_spectra = "lib.sli"\nspectra = ["a"]\n'
                                        'undesired_spectra = "lib.sli"\nundesired_names = ["b"]'))
    s = job.steps[0].request
    assert (s.target_spectra, s.spectra, s.undesired_spectra, s.undesired_names) == (
        str(tmp_path / "lib.sli"), "a", (str(tmp_path / "lib.sli"),), "b")


def test_a_jobs_truth_masks_are_checked_before_its_first_cube(tmp_path, capsys):
    """[inputs.truth] (a job saved from the window): each mask checked as the CLI's --truth is, and read
    once, before anything is written; a good one gives every detect step's report its AUC."""
    from hyperapp.batch.jobfile import load_job

    _cube(tmp_path / "scenes" / "s1.hdr")
    truth = np.zeros((24, 24), np.uint8)
    truth[4:7, 4:7] = 1
    np.save(tmp_path / "truth.npy", truth)
    np.save(tmp_path / "small.npy", truth[:10])
    np.save(tmp_path / "halves.npy", np.full((24, 24), 0.5))
    (tmp_path / "afolder").mkdir()
    np.save(tmp_path / "empty.npy", np.zeros((24, 24), np.uint8))
    cases = [('"scenes/s1.hdr" = "missing.npy"', "not found"),
             ('"scenes/s1.hdr" = "afolder"', "is a folder"),
             ('"scenes/s1.hdr" = "empty.npy"', "marks no pixel"),
             ('"scenes/s1.hdr" = "scenes/s1.hdr"', "a mask has one band"),
             ('"scenes/s1.hdr" = "halves.npy"', "inputs.truth.scenes/s1.hdr"),
             ('"scenes/s1.hdr" = "small.npy"', "inputs.truth.scenes/s1.hdr"),
             ('"scenes/other.hdr" = "truth.npy"', "not among the inputs"),
             ('"scenes/s1.hdr" = 3', "inputs.truth.scenes/s1.hdr")]
    for line, words in cases:
        job = _job(tmp_path, f'[inputs]\npaths = ["scenes/*.hdr"]\n[inputs.truth]\n{line}\n'
                             '[[steps]]\ndetect = "rx"\n[output]\nfolder = "out"\n')
        with pytest.raises(InputError) as e:
            load_job(job)
        assert words in str(e.value) and "job.toml" in str(e.value), (line, str(e.value))
        rc, err = _cli(["run", job, "--device", "cpu"], capsys)
        _one_clean_line(rc, err, "job.toml", "inputs.truth")
        assert not (tmp_path / "out").exists(), line
    job = _job(tmp_path, '[inputs]\npaths = ["scenes/*.hdr"]\n[inputs.truth]\n"scenes/s1.hdr" = "truth.npy"\n'
                         '[[steps]]\ndetect = "rx"\n[[steps]]\ndetect = "rx"\nname = "again"\n'
                         '[output]\nfolder = "out"\n')
    assert load_job(job).truth == {str((tmp_path / "scenes" / "s1.hdr").resolve()): str(tmp_path / "truth.npy")}
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    assert rc == 0, err
    for step in ("detect-rx", "again"):
        rep = json.loads((tmp_path / "out" / "s1" / step / "report.json").read_text())
        assert rep["evaluation"]["auc"] > 0.9  # the pipeline's reports carry the truth's AUC
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())["cubes"]
    assert set(next(iter(man.values()))["detections"]) == {"detect-rx", "again"}  # per step, not summed


_WL = np.arange(400, 480, 10.0)  # the bands of _cube's 8-band cubes


def _csv(rows: str):
    """A fixture maker: the CSV library ``rows`` at ``p`` (.csv)."""
    def make(p: Path) -> Path:
        p.with_suffix(".csv").write_text(rows)
        return p.with_suffix(".csv")
    return make


def _sli(names, spectra):
    """A fixture maker: an ENVI library of ``spectra`` named ``names`` on _cube's wavelengths at ``p`` (.sli)."""
    from hyperapp.io.speclib import SpectralLibrary, write_library

    return lambda p: write_library(SpectralLibrary(names, np.asarray(spectra, float), _WL, "nm"), p.with_suffix(".sli"))


@pytest.mark.parametrize("make, spectra, words", [
    (_csv("wavelength,a\n400,0.3\n410,0.31\n420,0.32\n430,0.3\n"), None,
     ["the library (400-430 nm) does not cover 4 of the cube's 8 bands"]),
    (_csv("wavelength,a\n" + "".join(f"400,{0.3 + i / 100}\n" for i in range(8))), None,
     ["wavelength 400 repeats (samples 1 and 2)", "must be distinct"]),
    (_csv("wavelength,a\n" + "".join(f"{w:g},0.3\n" for w in (*_WL, 430))), None,
     ["wavelength 430 repeats (samples 4 and 9)"]),
    (_csv("wavelength,a,b\n" + "".join(f"{w:g},0.3,{1e300 if w == 430 else 0.2}\n" for w in _WL)), None,
     ["spectrum 'b' has a value that is not finite in float32 (1e+300 at wavelength 430)"]),
    (_csv("wavelength,a\n" + "".join(f"{w:g},{'inf' if w == 410 else 0.2}\n" for w in _WL)), None,
     ["spectrum 'a' has a value that is not finite in float32 (inf at wavelength 410)"]),
    (_csv("wavelength,grass,blank\n" + "".join(f"{w:g},0.3,0\n" for w in _WL)), None,
     ["spectrum 'blank' is zero at every wavelength"]),
    (_csv("wavelength,a\n" + "".join(f"{w:g},{0.0 if w < 480 else 0.3}\n" for w in range(400, 600, 10))), None,
     ["spectrum 'a' is zero at every band of the cube"]),
    (_csv("wavelength,a,a\n" + "".join(f"{w:g},0.3,0.4\n" for w in _WL)), "a",
     ["2 spectra in the library are named 'a': pick one as 'a #1', 'a #2'"]),
    (_sli(["a", "b", "a"], np.full((3, 8), 0.3)), "A",
     ["2 spectra in the library are named 'A': pick one as 'a #1', 'a #3'"]),
    (_csv("wavelength,a\n"), None, ["the CSV holds no spectra"]),
    (lambda p: p.parent / "scene.hdr", None, ["this is an image cube's header, not a spectral library"]),
], ids=["partial", "repeated-wavelengths", "repeated-out-of-order", "huge", "inf", "zero", "zero-on-the-cube",
        "csv-repeated-names", "sli-repeated-names", "header-only", "cube-header"])
def test_bad_spectral_libraries_get_one_line_naming_the_file(tmp_path, capsys, make, spectra, words):
    """Each bad library: exit 2, one line on stderr naming the library and what is wrong (no Spectral
    Python logging, no NumPy warnings), nothing written."""
    cube = _cube(tmp_path / "scene.hdr")
    lib = make(tmp_path / "lib")
    argv = ["detect", cube, "--method", "ace", "--target-spectra", lib, "--device", "cpu", "--out", tmp_path / "out"]
    rc, err = _cli(argv + (["--spectra", spectra] if spectra else []), capsys)
    _one_clean_line(rc, err, *words)
    assert Path(lib).stem in err
    assert not (tmp_path / "out").exists()

@pytest.mark.parametrize("step, key, words", [
    ('detect = "rx"\nall_bands = "yes"', "steps[0].all_bands", "true or false"),
    ('detect = "rx"\nall_bands = 1', "steps[0].all_bands", "true or false"),
    ('detect = "rbfn"\ntargets = "clicks.csv"\nparams = { normalize = "no" }', "steps[0].params", "normalize"),
    ('detect = "sam"\ntargets = "empty.npy"', "steps[0].targets", "marks no target pixel"),
    ('detect = "ace"\ntargets = "clicks.csv"\ntrain = "other/o.hdr"', "steps[0].train", "other/o.hdr"),
    ('detect = "ace"\ntargets = "clicks.csv"\ntrain = "nosuch.hdr"', "steps[0].train", "nosuch.hdr"),
    ('detect = "ace"\ntargets = "nosuch.csv"', "steps[0].targets", "nosuch.csv"),
    ('detect = "ace"\nmodel = "nosuch.npz"', "steps[0].model", "nosuch.npz"),
    ('detect = "osp"\ntargets = "clicks.csv"\nundesired_spectra = ["nosuch.sli"]', "steps[0].undesired_spectra",
     "nosuch.sli"),
])
def test_a_job_names_its_file_the_key_and_the_problem_before_any_work(tmp_path, capsys, step, key, words):
    from hyperapp.batch.jobfile import load_job

    _cube(tmp_path / "scenes" / "s1.hdr", bands=8)
    _cube(tmp_path / "other" / "o.hdr", bands=6)
    (tmp_path / "clicks.csv").write_text("row,col\n5,5\n")
    np.save(tmp_path / "empty.npy", np.zeros((24, 24), np.uint8))
    job = _scene_job(tmp_path, step)
    with pytest.raises(InputError) as e:
        load_job(job)
    assert "job.toml" in str(e.value) and f"[{key}]" in str(e.value) and words in str(e.value), str(e.value)
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    _one_clean_line(rc, err, "job.toml", key, words)
    assert not (tmp_path / "out").exists()


def test_a_train_scene_is_checked_on_the_steps_bands(tmp_path):
    """The bands a step selects decide: a 6-band scene trains a model for the inputs' first six bands."""
    from hyperapp.batch.jobfile import load_job

    _cube(tmp_path / "scenes" / "s1.hdr", bands=8)
    _cube(tmp_path / "other" / "o.hdr", bands=6)
    (tmp_path / "clicks.csv").write_text("row,col\n5,5\n")
    job = load_job(_scene_job(tmp_path, 'detect = "ace"\ntargets = "clicks.csv"\ntrain = "other/o.hdr"\n'
                                        'bands = "0-5"'))
    assert job.steps[0].request.train.endswith("o.hdr")


def _envi(path: Path, X: np.ndarray, wavelengths=None) -> Path:
    import spectral.io.envi as envi

    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {} if wavelengths is None else {"wavelength": [str(w) for w in wavelengths]}
    envi.save_image(str(path), X, dtype=X.dtype, force=True, ext=".img", metadata=meta)
    return path


def test_numeric_edge_cases_get_one_line_naming_the_cause(tmp_path, capsys):
    """Cubes a careless export makes: one all-NaN band, float64 values beyond float32, one band with a
    library, spectra that vary in fewer MNF components than MTTCIMF uses. Each was an internal error, a
    success with NaN maps, or a message that blamed the clicks."""
    from hyperapp.io.speclib import SpectralLibrary, write_library

    rng = np.random.default_rng(0)
    wl = [400.0 + 50 * i for i in range(10)]
    X = rng.uniform(0.1, 0.5, (20, 20, 10)).astype(np.float32)
    nanband = X.copy()
    nanband[..., 4] = np.nan
    flat = np.repeat(rng.uniform(0.1, 0.5, (20, 20, 1)), 10, axis=2).astype(np.float32)  # flat spectra
    write_library(SpectralLibrary(["a"], rng.uniform(0.1, 0.5, (1, 10)), np.asarray(wl), "nm"), tmp_path / "l.sli")
    (tmp_path / "t.csv").write_text("row,col\n10,10\n")
    out = tmp_path / "out"
    cases = [
        (["detect", _envi(tmp_path / "nanband.hdr", nanband, wl), "--method", "ace", "--targets", tmp_path / "t.csv"],
         "band 4 at 600 (counted from 0) holds no finite value in any pixel"),
        (["analyse", tmp_path / "nanband.hdr", "--method", "kmeans"], "band 4"),
        (["detect", _envi(tmp_path / "f64.hdr", (X.astype(np.float64) * 1e300), wl), "--method", "rx"],
         "exceed the float32 range"),
        (["detect", _envi(tmp_path / "huge.hdr", X * np.float32(1e30), wl), "--method", "sam", "--targets",
          tmp_path / "t.csv"], "hyperapp computes in float32"),
        (["analyse", tmp_path / "huge.hdr", "--method", "hac"], "rescale the cube"),
        (["detect", _envi(tmp_path / "b1.hdr", X[..., :1], wl[:1]), "--method", "ace", "--target-spectra",
          tmp_path / "l.sli"], "the cube has 1 band"),
        (["detect", _envi(tmp_path / "flat.hdr", flat, wl), "--method", "mttcimf", "--targets", tmp_path / "t.csv"],
         "MNF components it uses"),
    ]
    for argv, words in cases:
        rc, err = _cli([*argv, "--device", "cpu", "--out", out], capsys)
        _one_clean_line(rc, err, words)
        assert not out.exists()
    # MNF's analysis refuses more components than bands, as detect --mnf does (it cut them silently)
    rc, err = _cli(["analyse", tmp_path / "nanband.hdr", "--bands", "0-3", "--method", "mnf", "--param",
                    "n_components=5", "--device", "cpu", "--out", out], capsys)
    _one_clean_line(rc, err, "n_components 5 is more than the 4 bands")
    # a one-band cube: SOM's principal-component start runs on its one band; cube bands listed in
    # descending wavelength take a library spectrum (they were called uncovered)
    assert _cli(["analyse", tmp_path / "b1.hdr", "--method", "som", "--device", "cpu", "--out", out], capsys)[0] == 0
    down = _envi(tmp_path / "down.hdr", X[..., ::-1].copy(), wl[::-1])
    rc, err = _cli(["detect", down, "--method", "ace", "--target-spectra", tmp_path / "l.sli", "--device", "cpu",
                    "--out", tmp_path / "out2"], capsys)
    assert rc == 0 and not err.strip(), err


def test_a_second_run_into_a_folder_leaves_none_of_the_firsts_outputs(tmp_path, capsys):
    """An MTMF run's infeasibility map stayed beside a later RX run's scores in the same --out; files
    hyperapp did not write there stay, and a run that fails changes nothing."""
    cube = _cube(tmp_path / "s.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    out = tmp_path / "out"
    assert _cli(["detect", cube, "--method", "mtmf", "--targets", tmp_path / "t.csv", "--device", "cpu",
                 "--out", out], capsys)[0] == 0
    assert (out / "infeasibility.img").is_file()
    (out / "notes.txt").write_text("mine")
    assert _cli(["detect", cube, "--method", "ace", "--far", "2", "--targets", tmp_path / "t.csv", "--out", out],
                capsys)[0] == 2
    assert (out / "infeasibility.img").is_file()  # a refused run leaves the folder as it was
    assert _cli(["detect", cube, "--method", "rx", "--device", "cpu", "--out", out], capsys)[0] == 0
    assert not (out / "infeasibility.img").exists() and (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "report.json").read_text())["method"] == "rx"


def test_a_pixel_lists_header_names_its_columns(tmp_path):
    """A CSV headed "col,row" (or x,y) is read by its names; it was read as row,col, every pixel swapped."""
    from hyperapp.io.masks import read_pixels

    for text, want in [("col,row\n5,3\n", [[3, 5]]), ("row,col\n5,3\n", [[5, 3]]), ("x,y\n5,3\n", [[3, 5]]),
                       ("id,col,row\n1,5,3\n", [[3, 5]]), ("5,3\n", [[5, 3]])]:
        (tmp_path / "t.csv").write_text(text)
        assert read_pixels(tmp_path / "t.csv", (10, 10)).tolist() == want, text


@pytest.mark.parametrize("method", ["osp", "tcimf", "mttcimf", "rbfn"])
def test_an_undesired_signature_that_is_the_target_is_refused(tmp_path, capsys, method):
    """A library's target given again as an undesired signature (or a multiple of it): every detector that
    suppresses undesired signatures refuses it in one line before reading a pixel (TCIMF's constraints
    would contradict each other, the RBFN would learn its target as background)."""
    from hyperapp.io.speclib import SpectralLibrary, write_library

    cube = _cube(tmp_path / "scene.hdr")
    rng = np.random.default_rng(4)
    spectra = rng.uniform(0.1, 0.5, (2, 8))
    write_library(SpectralLibrary(["grass", "roof"], spectra, _WL, "nm"), tmp_path / "lib.sli")
    write_library(SpectralLibrary(["grass x2"], 2 * spectra[:1], _WL, "nm"), tmp_path / "same.sli")
    rc, err = _cli(["detect", cube, "--method", method, "--target-spectra", tmp_path / "lib.sli", "--spectra", "grass",
                    "--undesired-spectra", tmp_path / "same.sli", "--out", tmp_path / "out"], capsys)
    _one_clean_line(rc, err, "undesired signature 1 'grass x2' is the target 'grass'", "up to scale")
    assert not (tmp_path / "out").exists()
    # a different material is no reason to refuse
    rc, err = _cli(["detect", cube, "--method", method, "--target-spectra", tmp_path / "lib.sli", "--spectra", "grass",
                    "--undesired-spectra", tmp_path / "lib.sli", "--undesired-names", "roof", "--out", tmp_path / "ok"],
                   capsys)
    assert rc == 0, err


@pytest.mark.parametrize("method", ["tcimf", "rbfn"])
def test_undesired_equal_to_the_clicked_target_is_refused_at_fitting(method):
    from hyperapp.core.cube import cube_from_array
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    rng = np.random.default_rng(5)
    X = rng.uniform(0.1, 0.5, (20, 20, 8)).astype(np.float32)
    targets = np.zeros((20, 20), bool)
    targets[5, 5] = True
    with pytest.raises(InputError, match="is the target"):
        run_detection(cube_from_array(X, "s"), DetectRequest(method, device="cpu"), targets, undesired_spectra=X[5, 5][None].astype(np.float64) * 3)


def test_a_truth_mask_that_cannot_score_is_refused_before_any_work(tmp_path, capsys):
    """--truth that marks nothing, everything, only the clicked targets, or is a cube: one line, exit 2,
    nothing written."""
    cube = _cube(tmp_path / "c.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    np.save(tmp_path / "none.npy", np.zeros((24, 24), np.uint8))
    np.save(tmp_path / "all.npy", np.ones((24, 24), np.uint8))
    for truth, words in (("none.npy", "marks no pixel"), ("all.npy", "marks every pixel"),
                         ("t.csv", "besides the clicked targets"), ("c.hdr", "a mask has one band")):
        rc, err = _cli(["detect", cube, "--method", "sam", "--targets", tmp_path / "t.csv", "--truth",
                        tmp_path / truth, "--device", "cpu", "--out", tmp_path / "out"], capsys)
        _one_clean_line(rc, err, words)
        assert not (tmp_path / "out").exists(), truth


def test_the_runs_own_file_names_never_clash(tmp_path, capsys):
    """Cubes named like the run's own files get folders of their own; an output folder whose manifest or
    log is a folder is refused in one line before anything is written."""
    for stem in ("manifest.json", "hyperapp-batch.log", "x"):
        _cube(tmp_path / "scenes" / f"{stem}.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    job = _scene_job(tmp_path, 'detect = "sam"\ntargets = "t.csv"')
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    assert rc == 0, err
    out = tmp_path / "out"
    assert (out / "manifest.json").is_file() and (out / "hyperapp-batch.log").is_file()
    assert {p.name for p in out.iterdir() if p.is_dir()} == {"manifest.json-2", "hyperapp-batch.log-2", "x"}
    assert len(json.loads((out / "manifest.json").read_text())["cubes"]) == 3
    (tmp_path / "out2" / "hyperapp-batch.log").mkdir(parents=True)
    job = _scene_job(tmp_path, 'detect = "sam"\ntargets = "t.csv"', out="out2")
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    _one_clean_line(rc, err, "hyperapp-batch.log", "is not a file")
    assert not (tmp_path / "out2" / "manifest.json").exists()


def test_bench_and_prepare_gpu_check_their_files_before_any_work(tmp_path, capsys):
    (tmp_path / "afolder").mkdir()
    for value, words in ((tmp_path / "afolder", "is a folder"), ("", "must name a file"),
                         (tmp_path / "a-file" / "x.json", "is a file")):
        if "a-file" in str(value):
            (tmp_path / "a-file").write_text("")
        rc, err = _cli(["bench", "--quick", "--json", value], capsys)
        _one_clean_line(rc, err, "--json", words)
    for cube, words in ((tmp_path / "nope.hdr", "not found"), (tmp_path / "afolder", "is a folder")):
        rc, err = _cli(["prepare-gpu", cube], capsys)
        _one_clean_line(rc, err, str(cube), words)


def test_run_on_a_gpu_this_machine_lacks_is_one_line_and_writes_nothing(tmp_path, capsys):
    from hyperapp.core.backend import gpu_available

    if gpu_available():
        pytest.skip("needs a machine without a GPU")
    _cube(tmp_path / "scenes" / "s.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    job = _scene_job(tmp_path, 'detect = "sam"\ntargets = "t.csv"')
    rc, err = _cli(["run", job, "--device", "gpu"], capsys)
    _one_clean_line(rc, err, "--device gpu")
    assert not (tmp_path / "out").exists()


def test_a_job_saved_with_a_byte_order_mark_runs(tmp_path, capsys):
    """Some editors start UTF-8 files with a byte-order mark; the job is read as written."""
    _cube(tmp_path / "scenes" / "s.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    job = _scene_job(tmp_path, 'detect = "sam"\ntargets = "t.csv"')
    job.write_bytes(b"\xef\xbb\xbf" + job.read_bytes())
    rc, err = _cli(["run", job, "--device", "cpu"], capsys)
    assert rc == 0, err


def test_a_file_that_is_not_a_model_says_what_it_is_in_a_few_words(tmp_path):
    from hyperapp.core.errors import ModelError
    from hyperapp.detect.model_files import load_model

    (tmp_path / "text.npz").write_text("hello")
    np.savez(tmp_path / "objects.npz", __meta__=np.array([object()], dtype=object))
    np.savez(tmp_path / "other.npz", a=np.zeros(3))  # another program's archive
    for name, words in (("text.npz", "not a NumPy .npz archive"), ("objects.npz", "Python objects"),
                        ("other.npz", "without hyperapp's model description")):
        with pytest.raises(ModelError) as e:
            load_model(tmp_path / name)
        assert words in str(e.value) and name in str(e.value) and "allow_pickle" not in str(e.value)


def test_a_tls_scheduler_without_certificates_is_not_called_a_timeout(tmp_path, capsys):
    _cube(tmp_path / "scenes" / "s.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    job = _scene_job(tmp_path, 'detect = "sam"\ntargets = "t.csv"')
    rc, err = _cli(["run", job, "--scheduler", "tls://127.0.0.1:1", "--device", "cpu"], capsys)
    _one_clean_line(rc, err, "tls://127.0.0.1:1", "TLS settings")
    assert "within" not in err and not (tmp_path / "out").exists()


def test_save_model_is_checked_before_any_output(tmp_path, capsys):
    """--save-model that names a folder (with the .npz it gets), a place that cannot hold files, or a model
    that cannot be saved: one line, exit 2, and an earlier run's outputs untouched."""
    cube = _cube(tmp_path / "c.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    good = tmp_path / "good"
    rc, err = _cli(["detect", cube, "--method", "ace", "--targets", tmp_path / "t.csv", "--device", "cpu",
                    "--out", good], capsys)
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in good.iterdir()}
    (tmp_path / "mdl.npz").mkdir()
    (tmp_path / "a-file").write_text("")
    for save, extra, words in (("mdl", [], "is a folder"), (tmp_path / "a-file" / "m", [], "is a file"),
                               ("m2", ["--mnf", "3"], "MNF space")):
        rc, err = _cli(["detect", cube, "--method", "rx", "--targets", tmp_path / "t.csv", "--device", "cpu",
                        "--save-model", tmp_path / save if isinstance(save, str) else save, "--out", good, *extra],
                       capsys)
        _one_clean_line(rc, err, words)
        assert {p.name: p.read_bytes() for p in good.iterdir()} == before, save


def test_samples_into_a_file_and_system_refusals_are_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "a-file").write_text("")
    rc, err = _cli(["samples", tmp_path / "a-file"], capsys)
    _one_clean_line(rc, err, "a-file", "is a file")
    # an operation the system refuses (here: an I/O error reading a header) is the user's environment
    import hyperapp.cli as cli

    def refuse(args):
        raise OSError(5, "Input/output error", str(tmp_path / "c.hdr"))

    monkeypatch.setitem(cli.COMMANDS, "info", refuse)
    rc, err = _cli(["info", tmp_path / "c.hdr"], capsys)
    _one_clean_line(rc, err, "c.hdr", "Input/output error")


def test_an_image_or_a_table_given_as_a_cube_says_what_it_is(tmp_path, capsys):
    """A PNG mask beside an ENVI header of its name was read as that header's data file ("truncated")."""
    from PIL import Image

    _cube(tmp_path / "truth.hdr")
    Image.fromarray(np.zeros((24, 24), np.uint8)).save(tmp_path / "truth.png")
    np.save(tmp_path / "m.npy", np.zeros((24, 24), np.uint8))
    for name, words in (("truth.png", "PNG image"), ("m.npy", "NumPy array")):
        rc, err = _cli(["info", tmp_path / name], capsys)
        _one_clean_line(rc, err, name, words, "not a cube")


def test_inputs_the_command_would_ignore_are_refused(tmp_path, capsys):
    """What argparse or a reader would drop without a word is one line, exit 2, nothing written: an option
    given twice, --dataset with an ENVI cube, a .mat variable with another mask format, and a background
    that marks no pixel or only target pixels (the targets' file given twice). The same background in a
    job stops it before any work."""
    from hyperapp.batch.jobfile import load_job

    cube = _cube(tmp_path / "c.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    (tmp_path / "b.csv").write_text("row,col\n20,20\n")
    np.save(tmp_path / "empty.npy", np.zeros((24, 24), np.uint8))
    truth = np.zeros((24, 24), np.uint8)
    truth[4:7, 4:7] = 1
    np.save(tmp_path / "truth.npy", truth)
    out = tmp_path / "out"
    base = ["detect", cube, "--method", "rbfn", "--targets", tmp_path / "t.csv", "--out", out]
    for extra, words in (
        (["--far", "0.01", "--far", "0.02"], ("--far given twice", "'0.01'", "'0.02'")),
        (["--dataset", "data"], ("--dataset", "c.hdr", "leave --dataset out")),
        (["--truth", tmp_path / "truth.npy", "--truth-var", "map"], ("truth.npy", "'map'", ".mat")),
        (["--background", tmp_path / "t.csv"], ("t.csv", "target pixel too")),
        (["--background", tmp_path / "empty.npy"], ("empty.npy", "marks no pixel")),
    ):
        _one_clean_line(*_cli(base + extra, capsys), *words)
        assert not out.exists()
    # a class map that marks no pixel names its file, whatever it is given for
    for argv in (["detect", cube, "--method", "osp", "--targets", tmp_path / "t.csv", "--undesired-rois"],
                 ["analyse", cube, "--method", "forest", "--roi"], ["analyse", cube, "--method", "som", "--roi"],
                 ["analyse", cube, "--method", "kmeans", "--objects"]):
        _one_clean_line(*_cli(argv + [tmp_path / "empty.npy", "--out", out], capsys), "empty.npy", "marks no pixel")
        assert not out.exists()
    _one_clean_line(*_cli(["info", cube, "--dataset", "data"], capsys), "leave --dataset out")
    rc, err = _cli(base + ["--background", tmp_path / "b.csv", "--truth", tmp_path / "truth.npy"], capsys)
    assert rc == 0, err  # the same options, given right, run
    job = tmp_path / "job.toml"
    job.write_text('[inputs]\npaths = ["c.hdr"]\n[[steps]]\ndetect = "rbfn"\ntargets = "t.csv"\n'
                   'background = "t.csv"\n[output]\nfolder = "jobout"\n')
    with pytest.raises(InputError, match=r"steps\[0\]\.background.*target pixel too"):
        load_job(job)  # before any work: it fits no input


def test_inputs_a_run_would_not_use_are_refused(tmp_path, capsys):
    """The class of the silently ignored input, for each kind of run: background pixels for a detector that
    does not learn from them or for a saved model, a saved model's options, library spectra or (window
    detector) false-alarm rate, selection inputs an analysis does not read, method options another option
    turns off, --truth-var without --truth, --workers with --scheduler. One line, exit 2, nothing written;
    the same keys in a job stop it before its first cube."""
    from hyperapp.batch.jobfile import load_job

    cube = _cube(tmp_path / "c.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    (tmp_path / "b.csv").write_text("row,col\n20,20\n")
    roi = np.zeros((24, 24), np.uint8)
    roi[4:7, 4:7], roi[15:20, 15:20] = 1, 2
    np.save(tmp_path / "roi.npy", roi)
    (tmp_path / "lib.csv").write_text("band,x\n" + "".join(f"{i},0.5\n" for i in range(8)))
    out = tmp_path / "out"
    assert _cli(["detect", cube, "--method", "rbfn", "--targets", tmp_path / "t.csv", "--save-model",
                 tmp_path / "m", "--out", tmp_path / "made"], capsys)[0] == 0
    det = ["detect", cube, "--out", out]
    ana = ["analyse", cube, "--out", out]
    cases = [
        (det + ["--method", "ace", "--targets", tmp_path / "t.csv", "--background", tmp_path / "b.csv"],
         ("ace does not learn from background", "--background")),
        (det + ["--method", "rbfn", "--model", tmp_path / "m.npz", "--background", tmp_path / "b.csv"],
         ("--model", "leave --background out")),
        (det + ["--method", "rbfn", "--model", tmp_path / "m.npz", "--param", "n_hidden=4"], ("n_hidden", "--param")),
        (det + ["--method", "rbfn", "--model", tmp_path / "m.npz", "--undesired-spectra", tmp_path / "lib.csv"],
         ("leave --undesired-spectra out",)),
        (det + ["--method", "mtmf", "--targets", tmp_path / "t.csv", "--param", "n_components=3",
                "--param", "snr_min=5"], ("snr_min", "n_components is 0")),
        (det + ["--method", "rbfn", "--targets", tmp_path / "t.csv", "--param", "whiten=std",
                "--param", "n_components=2"], ("n_components", "whiten is std")),
        (det + ["--method", "rbfn", "--targets", tmp_path / "t.csv", "--param", "min_fill=0.5"],
         ("min_fill", "library")),
        (det + ["--method", "ace", "--targets", tmp_path / "t.csv", "--truth-var", "map"], ("give --truth too",)),
        (ana + ["--method", "kmeans", "--param", "k=3", "--select", "image", "--sample", "50"],
         ("--sample is for --select sample",)),
        (ana + ["--method", "kmeans", "--param", "k=3", "--select", "image", "--seed", "4"], ("--seed",)),
        (ana + ["--method", "kmeans", "--param", "k=3", "--sample", "50", "--roi-class", "2"], ("--roi-class",)),
        (ana + ["--method", "mnf", "--sample", "50"], ("whole image", "--sample")),
        (ana + ["--method", "forest", "--roi", tmp_path / "roi.npy", "--select", "sample"], ("leave --select out",)),
        (ana + ["--method", "forest", "--roi", tmp_path / "roi.npy", "--sample", "50"], ("random sample",)),
        (ana + ["--method", "hac", "--param", "height=2", "--param", "n_clusters=3"], ("n_clusters", "height")),
        (ana + ["--method", "kmeans", "--param", "k=3", "--param", "criterion=elbow"], ("criterion", "one number")),
    ]
    for argv, words in cases:
        _one_clean_line(*_cli(argv, capsys), *words)
        assert not out.exists(), argv
    (tmp_path / "j.toml").write_text('[inputs]\npaths = ["c.hdr"]\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n'
                                     '[output]\nfolder = "jo"\n')
    _one_clean_line(*_cli(["run", tmp_path / "j.toml", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
                          capsys), "--workers", "--scheduler", "not both")
    for body, words in (
        ('[inputs]\npaths = ["c.hdr"]\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\nbackground = "b.csv"\n',
         ("background", "ace does not learn")),
        ('[inputs]\npaths = ["c.hdr"]\ndataset = "data"\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n',
         ("inputs.dataset", "no input is HDF5")),
        ('[inputs]\npaths = ["c.hdr"]\n[inputs.truth]\n"c.hdr" = "t.csv"\n[[steps]]\nanalyse = "kmeans"\n',
         ("inputs.truth", "no detect step")),
        ('[inputs]\npaths = ["c.hdr"]\n[[steps]]\nanalyse = "kmeans"\nselect = "image"\nsample = 10\n',
         ("sample", "select")),
    ):
        (tmp_path / "j.toml").write_text(body + '[output]\nfolder = "jo"\n')
        with pytest.raises(InputError) as e:
            load_job(tmp_path / "j.toml")
        assert all(w in str(e.value) for w in words), (body, str(e.value))
    # given right, the same inputs run
    for argv in (det + ["--method", "rbfn", "--targets", tmp_path / "t.csv", "--background", tmp_path / "b.csv"],
                 ana + ["--method", "kmeans", "--param", "k=3", "--select", "sample", "--sample", "50", "--seed", "4"],
                 ana + ["--method", "forest", "--roi", tmp_path / "roi.npy"]):
        rc, err = _cli(argv, capsys)
        assert rc == 0, (argv, err)
        import shutil

        shutil.rmtree(out)


def test_a_reader_that_leaves_the_pipe_ends_the_command_quietly(tmp_path, capsys, monkeypatch):
    """``hyperapp --headless info CUBE | head -1``: the output's reader leaves; the command ends with the
    shell's code for it (141), and no error line (it was "error: Broken pipe")."""
    import hyperapp.cli as cli

    def info(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setitem(cli.COMMANDS, "info", info)
    monkeypatch.setattr(cli.os, "dup2", lambda *a: None)  # pytest's captured stdout stays as it is
    rc, err = _cli(["info", _cube(tmp_path / "c.hdr")], capsys)
    assert rc == 141 and err == ""


def test_a_pixel_list_is_read_by_its_header_even_from_a_spreadsheet(tmp_path):
    """A CSV saved with a byte-order mark (spreadsheets do) keeps its col,row header: the pixel is not
    swapped; a header whose columns are not named row and col is refused, not read as row,col."""
    from hyperapp.io.masks import read_pixels

    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfcol,row\n4,3\n")
    assert read_pixels(tmp_path / "bom.csv", (10, 10)).tolist() == [[3, 4]]
    (tmp_path / "unknown.csv").write_text("x_px,y_px\n4,3\n")
    with pytest.raises(InputError, match="names no row and column"):
        read_pixels(tmp_path / "unknown.csv", (10, 10))
    (tmp_path / "classes.csv").write_text("row,col,class\n4,3,target\n")  # as ROIs are exported
    assert read_pixels(tmp_path / "classes.csv", (10, 10)).tolist() == [[4, 3]]


def test_repeated_bands_shared_step_names_and_refused_output_folders_are_named(tmp_path, capsys):
    """A band listed twice ("3,3,3" is one band), two steps sharing a name (the message names it), and an
    output folder the system refuses when the run starts (named as the job's key)."""
    cube = _cube(tmp_path / "c.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    _one_clean_line(*_cli(["detect", cube, "--method", "sam", "--targets", tmp_path / "t.csv", "--bands", "3,3,3",
                           "--out", tmp_path / "o"], capsys), "band 3 more than once")
    two = _job(tmp_path, '[inputs]\npaths = ["c.hdr"]\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n'
                         'name = "detect-ace-1"\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n[[steps]]\n'
                         'detect = "ace"\ntargets = "t.csv"\n[output]\nfolder = "o"\n')
    _one_clean_line(*_cli(["run", two, "--device", "cpu"], capsys), "'detect-ace-1'", "[steps]")
    if Path("/proc/self").is_dir():
        proc = _job(tmp_path, '[inputs]\npaths = ["c.hdr"]\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n'
                              '[output]\nfolder = "/proc/hyperapp-out"\n', "proc.toml")
        _one_clean_line(*_cli(["run", proc, "--device", "cpu"], capsys), "proc.toml", "[output.folder]")
        # a folder that exists and refuses files: said as the folder's refusal, where the system's "No such
        # file or directory" alone sent the user looking for a missing folder (the third walk)
        _one_clean_line(*_cli(["detect", cube, "--method", "sam", "--targets", tmp_path / "t.csv",
                               "--out", "/proc/hyperapp-out"], capsys),
                        "/proc/hyperapp-out", "the system does not let files be made in /proc")
