"""The batch pipeline: read, compute and write overlapped on three threads, cubes out in order,
a broken cube alone failing, a stop that leaves only whole outputs, and the manifest written in batches."""

import json
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path

import numpy as np
import pytest

from hyperapp.batch.jobfile import Step, load_job
from hyperapp.batch.pipeline import CubePipeline
from hyperapp.batch.runner import FLUSH_SECONDS, Manifest, run_job
from hyperapp.io.atomic import atomic_write_text, staged_folder
from hyperapp.request import DetectRequest

from .test_batch import BASIC, _job, _scenes

FINALS = {"scores.hdr", "scores.img", "mask.hdr", "mask.img", "objects.csv", "report.json"}


def _steps(tmp_path: Path, method: str = "sam") -> list[dict]:
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    return [Step("detect", f"detect-{method}", DetectRequest(method, targets=str(tmp_path / "clicks.csv"), far=0.01)).to_dict()]


def _slow(pipe: CubePipeline, seconds: float, log: list) -> None:
    """Each stage of ``pipe`` takes ``seconds`` more (sleeping, as I/O or the GPU would) and logs
    (stage, cube, start, end)."""
    for name in ("_read", "_compute", "_write"):
        fn = getattr(pipe, name)

        def slow(item, fn=fn, name=name):
            t0 = time.perf_counter()
            time.sleep(seconds)
            fn(item)
            log.append((name, item.path, t0, time.perf_counter()))

        slow.__name__ = name
        setattr(pipe, name, slow)


def test_cubes_leave_in_order_with_their_own_outputs(tmp_path):
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 6)]
    steps = _steps(tmp_path)
    done: list[str] = []
    with CubePipeline(steps, str(tmp_path / "out"), device="cpu") as pipe:
        futs = [pipe.submit(c) for c in cubes]
        for f in futs:
            f.add_done_callback(lambda f: done.append(f.result()["cube"]))
        rows = [f.result(timeout=60) for f in futs]
    assert done == cubes and [r["cube"] for r in rows] == cubes
    for c, r in zip(cubes, rows):
        assert r["error"] is None and set(r["stages"]) == {"read", "compute", "write", "wait"}
        out = Path(r["outputs"][0])
        assert out == tmp_path / "out" / Path(c).stem / "detect-sam"
        assert {f.name for f in out.iterdir()} == FINALS
        assert json.loads((out / "report.json").read_text())["cube"] == c  # no cube's pixels under another's name
        assert r["detections"]["detect-sam"] >= 16  # the bright block of each scene (per step)


def test_stages_overlap_and_memory_stays_bounded(tmp_path):
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 8, size=24)]
    log: list = []
    pipe = CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu", depth=1)
    _slow(pipe, 0.08, log)
    t0 = time.perf_counter()
    with pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    wall = time.perf_counter() - t0
    assert all(r["error"] is None for r in rows)
    assert min(r["stages"]["read"] for r in rows) >= 0.08  # the stages' own seconds reach the row
    # one stage at a time would take 8 x 3 x 0.08 = 1.9 s; overlapped, about (8 + 2) x 0.08 = 0.8 s
    assert wall < 1.5, wall
    span = {(s, c): (a, b) for s, c, a, b in log}
    # cube n+1 was read while cube n was being computed
    assert any(span[("_read", cubes[i + 1])][0] < span[("_compute", cubes[i])][1] for i in range(len(cubes) - 1))
    # bounded: the reader is never more than depth + 2 cubes ahead of the writer
    for i, c in enumerate(cubes):
        read_start = span[("_read", c)][0]
        written = sum(span[("_write", x)][1] <= read_start for x in cubes)
        assert i - written <= 1 + 2, (i, written)


def test_a_broken_cube_fails_alone_in_its_place(tmp_path):
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 5)]
    Path(cubes[2]).with_suffix(".img").write_bytes(b"\0" * 100)
    with CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu") as pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    assert [r["cube"] for r in rows] == cubes
    assert "truncated" in rows[2]["error"] and rows[2]["outputs"] == []
    assert all(r["error"] is None for i, r in enumerate(rows) if i != 2)
    assert not (tmp_path / "out" / Path(cubes[2]).stem / "detect-sam" / "report.json").exists()


def test_closing_mid_run_leaves_whole_outputs_or_none(tmp_path):
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 10, size=24)]
    pipe = CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu", depth=1)
    _slow(pipe, 0.05, [])
    futs = [pipe.submit(c) for c in cubes]
    futs[1].result(timeout=60)
    pipe.close()
    finished = [f for f in futs if f.done() and not f.cancelled()]
    assert 2 <= len(finished) < len(cubes)
    for f in futs[len(finished) + 2:]:  # the cubes still queued were dropped, not computed
        assert f.cancelled()
        with pytest.raises(CancelledError):
            f.result()
    for c in cubes:
        d = tmp_path / "out" / Path(c).stem / "detect-sam"
        names = {p.name for p in d.iterdir()} if d.exists() else set()
        assert names in (set(), FINALS), names  # no staging folder, no partial file under a final name


def test_manifest_is_written_in_batches_and_at_the_end(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    writes = []
    import hyperapp.io.atomic as atomic

    real = atomic.atomic_write_text
    monkeypatch.setattr(atomic, "atomic_write_text", lambda p, t: (writes.append(p), real(p, t)))
    m = Manifest(out, {})
    m._flushed = time.monotonic()
    for i in range(50):
        m.record({"cube": str(tmp_path / f"c{i}.hdr"), "seconds": 0.01, "detections": 1, "outputs": [], "error": None,
                  "stages": {"read": 0.001}})
    assert len(writes) <= 1  # 50 cubes within FLUSH_SECONDS: not one rewrite per cube
    m.flush()
    data = json.loads((out / "manifest.json").read_text())
    assert len(data["cubes"]) == 50 and data["cubes"][str(tmp_path / "c7.hdr")]["stages"] == {"read": 0.001}
    m._flushed -= FLUSH_SECONDS
    n = len(writes)
    m.record({"cube": str(tmp_path / "late.hdr"), "seconds": 0.01, "detections": 1, "outputs": [], "error": None})
    assert len(writes) == n + 1  # older than FLUSH_SECONDS: written at once


def test_run_records_stage_times_and_resumes(tmp_path, capsys):
    _scenes(tmp_path / "scenes", 4)
    (tmp_path / "clicks.csv").write_text("row,col\n11,11\n12,12\n")
    job = load_job(_job(tmp_path, BASIC))
    assert run_job(job, device="cpu") == 0
    err = capsys.readouterr().err
    assert "cubes/s" in err and "read" in err and "compute" in err and "write" in err
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())["cubes"]
    assert len(man) == 4 and all(set(e["stages"]) >= {"read", "compute", "write"} for e in man.values())
    stamps = {c: (Path(e["outputs"][0]) / "report.json").stat().st_mtime_ns for c, e in man.items()}
    assert run_job(job, device="cpu") == 0
    assert "skipped" in capsys.readouterr().err
    for c, ns in stamps.items():
        assert (Path(man[c]["outputs"][0]) / "report.json").stat().st_mtime_ns == ns


def test_saved_models_and_click_masks_are_prepared_once(tmp_path, monkeypatch):
    import hyperapp.detect.model_files as hmodels
    import hyperapp.io as hio

    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 4)]
    steps = _steps(tmp_path)
    reads, loads = [], []
    real_read, real_load = hio.read_labels, hmodels.load_model
    monkeypatch.setattr(hio, "read_labels", lambda *a, **k: (reads.append(a), real_read(*a, **k))[1])
    with CubePipeline(steps, str(tmp_path / "out"), device="cpu") as pipe:
        assert all(f.result(timeout=60)["error"] is None for f in [pipe.submit(c) for c in cubes])
    assert len(reads) == 1  # four cubes of one shape: the click file read once
    # a saved model: loaded once, every cube scored with it
    from hyperapp.detect.run import run_detection
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = open_cube(cubes[0]).good_bands()
    model = run_detection(cube, DetectRequest("sam", device="cpu"), real_read(tmp_path / "clicks.csv", (48, 48))).model
    hmodels.save_model(model, tmp_path / "sam.npz", method="sam")
    monkeypatch.setattr(hmodels, "load_model", lambda *a, **k: (loads.append(a), real_load(*a, **k))[1])
    steps = [Step("detect", "saved", DetectRequest("sam", model=str(tmp_path / "sam.npz"), far=0.01)).to_dict()]
    with CubePipeline(steps, str(tmp_path / "out2"), device="cpu") as pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    assert all(r["error"] is None and r["detections"]["saved"] >= 16 for r in rows)
    assert len(loads) == 1


def test_a_failed_write_inside_a_staging_folder_leaves_nothing(tmp_path):
    out = tmp_path / "o"
    with pytest.raises(RuntimeError), staged_folder(out) as stage:
        atomic_write_text(stage / "report.json", "{}")
        assert (stage / "report.json").is_file()  # under its final name at once: the folder is hidden
        raise RuntimeError("killed")
    assert not out.exists() or list(out.iterdir()) == []  # the folder it made for the outputs goes too


def test_one_tile_cube_is_read_without_a_thread(tmp_path):
    from hyperapp.io import open_cube
    from hyperapp.reading.tiles import read_float32

    hdr = _scenes(tmp_path / "s", 1)[0]
    cube = open_cube(hdr)
    before = threading.active_count()
    seen = []
    real = threading.Thread.start
    threading.Thread.start = lambda self: (seen.append(self.name), real(self))[1]
    try:
        X = read_float32(cube, np)
    finally:
        threading.Thread.start = real
    assert "hyperapp-tile-reader" not in seen and threading.active_count() == before
    np.testing.assert_array_equal(X, cube.to_float32())


def test_rbfn_background_pool_is_listed_without_a_set_difference():
    """A 512 x 512 cube's RBFN pool is listed by a mask, not ``np.setdiff1d`` over every pixel (0.3 s of
    host time per cube on a busy host, the GPU waiting): the same array, so the same draws."""
    from hyperapp.models.rbfn import RBFN, _arange_without, _Pool

    rng = np.random.default_rng(1)
    for n in (1, 7, 1000, 1 << 18):
        for k in (0, 1, 5, min(n, 300)):
            ex = np.unique(rng.integers(0, n, k)) if k else np.zeros(0, np.int64)
            want = np.setdiff1d(np.arange(n), ex)
            got = _arange_without(n, ex)
            assert got.dtype == want.dtype and np.array_equal(got, want)
    pool = _Pool(1 << 18, np.array([3, 99, 70000]))
    assert pool._listed is not None and pool._listed.size == (1 << 18) - 3
    y = -np.ones((512, 512), np.int8)
    y[100, 100] = y[300, 301] = 1
    t, s, b, _ = RBFN().sample_indices(y, (512, 512))
    assert t.tolist() == [100 * 512 + 100, 300 * 512 + 301] and s.size > 0 and b.size > 0


def test_closing_never_hangs_whatever_the_stages_hold(tmp_path):
    """A stage whose neighbour has stopped must not wait on a full queue for ever (depth 1, closed at
    different moments; an earlier version hung here about one time in five)."""
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 8, size=16)]
    steps = _steps(tmp_path)
    for k in range(6):
        pipe = CubePipeline(steps, str(tmp_path / f"out{k}"), device="cpu", depth=1)
        _slow(pipe, 0.01 * (k % 3), [])
        futs = [pipe.submit(c) for c in cubes]
        futs[k % 4].result(timeout=60)
        closer = threading.Thread(target=pipe.close)
        closer.start()
        closer.join(timeout=20)
        assert not closer.is_alive(), f"close() hung (round {k})"
        assert all(f.done() for f in futs)  # every cube finished or was cancelled: no task waits for ever


def test_a_steps_library_is_resampled_once_per_wavelength_grid(tmp_path, monkeypatch):
    """Four cubes of one band set: the step's library is read and resampled once, each cube still gets
    its own scale match and the spectra the uncached path gives."""
    import hyperapp.io.speclib as speclib
    from hyperapp.io import open_cube
    from hyperapp.io.speclib import SpectralLibrary, write_library

    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 4)]
    cube = open_cube(cubes[0]).good_bands()
    target = cube.read()[10:14, 10:14].reshape(-1, cube.bands).mean(axis=0)
    write_library(SpectralLibrary(["paint", "other"], np.stack([target, target[::-1]])), tmp_path / "lib.sli")
    step = Step("detect", "lib", DetectRequest("ace", target_spectra=str(tmp_path / "lib.sli"), spectra="paint", far=0.01))
    uncached = step.library_kwargs(cube)
    reads = []
    real = speclib.read_library
    monkeypatch.setattr(speclib, "read_library", lambda *a, **k: (reads.append(a), real(*a, **k))[1])
    with CubePipeline([step.to_dict()], str(tmp_path / "out"), device="cpu") as pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
        cached = step.library_kwargs(cube, pipe._libraries)
    assert all(r["error"] is None and r["detections"]["lib"] >= 16 for r in rows)
    assert len(reads) == 1
    np.testing.assert_array_equal(cached["target_spectra"], uncached["target_spectra"])
    assert cached["signature_info"] == uncached["signature_info"]


def test_a_cube_whose_write_fails_shows_no_counts(tmp_path, monkeypatch):
    """Its detections were computed but not kept: the row shows the error, not counts beside it."""
    import hyperapp.detect.outputs as detect
    from hyperapp.core.errors import OutputError

    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 2)]

    def refuse(res, folder, cube):
        raise OutputError("disk full", folder)

    monkeypatch.setattr(detect, "write_detection", refuse)
    with CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu") as pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    assert all("disk full" in r["error"] and r["detections"] is None for r in rows)


def test_large_cubes_are_read_by_the_reading_helper_with_the_same_results(tmp_path, monkeypatch):
    """The read stage reads cubes of LARGE_CUBE_BYTES or more through the reading helper process (in
    large tiles); the outputs are those of a read in this process."""
    from hyperapp.batch import pipeline
    from hyperapp.reading import reader_process
    if not reader_process.available():
        pytest.skip("the reading helper needs Linux (memfd_create, preadv)")
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 3)]
    monkeypatch.setattr(pipeline, "LARGE_CUBE_BYTES", 1)
    monkeypatch.setattr(pipeline, "READ_TILE_BYTES", 9 * 48 * 16 * 4)  # six tiles a cube
    used = []
    lease = reader_process.lease
    monkeypatch.setattr(reader_process, "lease", lambda *a: used.append(lease(*a)) or used[-1])
    scores = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("HYPERAPP_READ_PROCESS", mode)
        with CubePipeline(_steps(tmp_path), str(tmp_path / f"out{mode}"), device="cpu") as pipe:
            rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
        assert all(r["error"] is None for r in rows)
        scores[mode] = [np.fromfile(Path(r["outputs"][0]) / "scores.img", np.float32) for r in rows]
    assert len(used) == 6 and all(h is not None for h in used[:3]) and all(h is None for h in used[3:])
    for a, b in zip(scores["1"], scores["0"]):
        np.testing.assert_array_equal(a, b)


def test_the_next_large_cube_is_read_while_this_one_finishes_and_a_close_stops_it(tmp_path, monkeypatch):
    """The read stage takes the next cube early, opens it and starts its reader as soon as this cube's
    reads end (its tiles are in the second helper's ring before the stage asks for them); closing the
    pipeline then stops that reader, gives every helper back and cancels the cube."""
    from hyperapp.batch import pipeline
    from hyperapp.reading import reader_process
    if not reader_process.available():
        pytest.skip("the reading helper needs Linux (memfd_create, preadv)")
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 5)]
    monkeypatch.setattr(pipeline, "LARGE_CUBE_BYTES", 1)
    monkeypatch.setattr(pipeline, "READ_TILE_BYTES", 9 * 48 * 16 * 4)
    pipe = CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu")
    compute = pipe._compute
    gate = threading.Event()
    monkeypatch.setattr(pipe, "_compute", lambda item: gate.wait(30) and compute(item))
    futures = [pipe.submit(c) for c in cubes]
    deadline = time.monotonic() + 30
    # cube 1 held in the compute stage, cubes 2 and 3 waiting for it, cube 4 read and waiting to be handed
    # on, cube 5 read ahead
    while time.monotonic() < deadline:
        ahead = pipe._ahead
        if ahead is not None and ahead.reader is not None and ahead.reader._ready.qsize() > 0:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the fifth cube was not read ahead")
    reader = ahead.reader
    pipe.close(wait=False)
    gate.set()  # the compute stage goes on, sees the pipeline closed and stops
    for t in pipe._threads:
        t.join(30)
    assert futures[4].cancelled() and reader._stop.is_set() and not reader._thread.is_alive()
    helpers = reader_process._HELPERS
    assert all(h.lease() for h in helpers)
    for h in helpers:
        h.release()


def test_closing_a_pipeline_wakes_its_idle_stages_at_once(tmp_path, monkeypatch):
    """A run's end does not wait for the stages' next look at the flag (POLL seconds, a tenth of a
    second that every job paid at its end): close() wakes each stage waiting on its queue."""
    from hyperapp.batch import pipeline
    monkeypatch.setattr(pipeline, "POLL", 30.0)
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 2)]
    pipe = CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu")
    rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    assert all(r["error"] is None for r in rows)
    t0 = time.perf_counter()
    pipe.close()
    assert time.perf_counter() - t0 < 5 and not any(t.is_alive() for t in pipe._threads)


def test_a_large_cube_whose_load_fails_gives_its_reader_and_helper_back(tmp_path, monkeypatch):
    """A load that fails after the cube's reader was started (here: its pixels' array cannot be made)
    fails that cube alone with its one line, stops the reader and gives every helper back; the other
    cubes are read and scored."""
    from hyperapp.batch import pipeline
    from hyperapp.core.errors import InputError
    from hyperapp.reading import reader_process
    from hyperapp.reading import tiles as stream

    if not reader_process.available():
        pytest.skip("the reading helper needs Linux (memfd_create, preadv)")
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 3)]
    monkeypatch.setattr(pipeline, "LARGE_CUBE_BYTES", 1)
    monkeypatch.setattr(pipeline, "READ_TILE_BYTES", 9 * 48 * 16 * 4)
    real = stream.read_float32

    def read_float32(cube, *a, **k):
        if cube.path.endswith(Path(cubes[1]).name):
            raise InputError("no memory for this cube's pixels", cube.path)
        return real(cube, *a, **k)

    monkeypatch.setattr(stream, "read_float32", read_float32)
    with CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu") as pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    assert [r["error"] is None for r in rows] == [True, False, True] and "no memory" in rows[1]["error"]
    helpers = reader_process._HELPERS
    assert helpers and all(h.lease() for h in helpers)
    for h in helpers:
        h.release()


def test_a_next_cube_whose_early_start_fails_fails_alone(tmp_path, monkeypatch):
    """A cube read whole before the next one is opened starts the next reader at once; where that start
    fails (here: no memory for the next cube's ring) the next cube fails alone in its turn with its one
    line, the cube before it is written, and no reader or helper is left behind."""
    from hyperapp.batch import pipeline
    from hyperapp.reading import reader_process
    from hyperapp.reading import tiles as stream
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 3)]
    monkeypatch.setattr(pipeline, "LARGE_CUBE_BYTES", 1)
    monkeypatch.setattr(pipeline, "READ_TILE_BYTES", 12 * 48 * 16 * 4)  # four tiles: the ring holds the cube
    bufs = stream.TileReader.bufs.fget

    def failing_bufs(self):
        if self._bufs is None and self.cube.path.endswith(Path(cubes[1]).name):
            raise MemoryError("no memory for this cube's ring")
        return bufs(self)

    monkeypatch.setattr(stream.TileReader, "bufs", property(failing_bufs))
    pipe = CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu")
    plan = pipe._plan

    def slow_plan(item, backend):  # the next cube's header takes longer to open than this cube to read
        if item.path == cubes[1]:
            time.sleep(0.3)
        plan(item, backend)

    monkeypatch.setattr(pipe, "_plan", slow_plan)
    with pipe:
        rows = [f.result(timeout=60) for f in [pipe.submit(c) for c in cubes]]
    assert [r["error"] is None for r in rows] == [True, False, True] and "no memory" in rows[1]["error"]
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if t.name == "hyperapp-tile-reader"]
    helpers = reader_process._HELPERS
    assert all(h.lease() for h in helpers)
    for h in helpers:
        h.release()


def test_a_cube_handed_on_after_close_without_waiting_is_cancelled(tmp_path, monkeypatch):
    """close(wait=False) (a Dask worker letting an old job's pipeline go) drains the queues at once; a
    cube its stage finishes afterwards and hands on is cancelled, not left in a queue whose stage has
    gone, where its future (a task waiting in run_on_worker) would never end."""
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 1)]
    pipe = CubePipeline(_steps(tmp_path), str(tmp_path / "out"), device="cpu")
    compute, gate, entered = pipe._compute, threading.Event(), threading.Event()
    monkeypatch.setattr(pipe, "_compute", lambda item: (entered.set(), gate.wait(30), compute(item)))
    fut = pipe.submit(cubes[0])
    assert entered.wait(30)
    pipe.close(wait=False)
    time.sleep(0.3)  # the write stage sees the pipeline closed and leaves
    gate.set()
    for t in pipe._threads:
        t.join(30)
    assert fut.done()


def test_the_gpu_wait_schedule_is_named_by_the_environment(monkeypatch):
    """``HYPERAPP_CUDA_WAITS`` names the schedule of the GPU waits where it names one, whatever its case
    and spaces; anything else is the default. Without a CUDA context the schedule is not touched."""
    from hyperapp.core import cuda_start
    monkeypatch.delenv("HYPERAPP_CUDA_WAITS", raising=False)
    assert cuda_start.wanted_schedule() == "block"
    monkeypatch.setenv("HYPERAPP_CUDA_WAITS", " Spin ")
    assert cuda_start.wanted_schedule() == "spin"
    monkeypatch.setenv("HYPERAPP_CUDA_WAITS", "sleep")
    assert cuda_start.wanted_schedule("auto") == "auto"
    pipe = CubePipeline([], "unused", device="cpu")
    assert pipe.waits is None  # the CPU's pipeline never asks the driver


@pytest.mark.gpu
def test_mid_size_cubes_on_the_gpu_are_read_by_the_helper_with_the_same_results(cp, tmp_path, monkeypatch):
    """On the GPU, cubes of HELPER_CUBE_BYTES or more (below LARGE_CUBE_BYTES) are read by the reading
    helpers, which copy them to the device themselves, once those have started in the background; the
    outputs are those of a read in this process. On the CPU the same cubes are read in this process."""
    from hyperapp.batch import pipeline
    from hyperapp.reading import reader_process
    if not reader_process.available():
        pytest.skip("the reading helper needs Linux (memfd_create, preadv)")
    cubes = [str(c) for c in _scenes(tmp_path / "scenes", 3)]
    monkeypatch.setattr(pipeline, "HELPER_CUBE_BYTES", 1)
    monkeypatch.setattr(pipeline, "READ_TILE_BYTES", 9 * 48 * 16 * 4)
    monkeypatch.delenv("HYPERAPP_READ_TO_GPU", raising=False)
    readers = []
    plan = CubePipeline._plan

    def _plan(self, item, backend):
        plan(self, item, backend)
        readers.append((backend.is_gpu, item.reader))

    monkeypatch.setattr(CubePipeline, "_plan", _plan)
    for h in list(reader_process._HELPERS):  # earlier tests' helpers go: these cubes' are started below
        assert h.lease()
        h.close()
        h.release()
    reader_process._HELPERS.clear()
    from hyperapp.reading.tiles import HELPER_THREADS

    # the helpers start in the background (the first cubes of a run are read in this process meanwhile):
    # started here first, so that every cube of the run below goes through them
    assert not reader_process.copies_to_gpu(cp.cuda.runtime.getDevice(), pipeline.READ_TILE_BYTES,
                                            pipeline.READ_RING, HELPER_THREADS)
    deadline = time.monotonic() + 60
    while not reader_process.copies_to_gpu(cp.cuda.runtime.getDevice(), pipeline.READ_TILE_BYTES,
                                           pipeline.READ_RING, HELPER_THREADS):
        assert time.monotonic() < deadline and not reader_process._GPU_COPIES_FAILED, "no GPU helper started"
        time.sleep(0.05)
    scores = {}
    for mode, device in (("1", "gpu"), ("0", "gpu"), ("1", "cpu")):
        monkeypatch.setenv("HYPERAPP_READ_PROCESS", mode)
        with CubePipeline(_steps(tmp_path), str(tmp_path / f"out{mode}{device}"), device=device) as pipe:
            rows = [f.result(timeout=120) for f in [pipe.submit(c) for c in cubes]]
        assert all(r["error"] is None for r in rows)
        scores[mode + device] = [np.fromfile(Path(r["outputs"][0]) / "scores.img", np.float32) for r in rows]
    got = [r is not None for _, r in readers]
    assert got == [True] * 3 + [False] * 6, got  # the helper on the GPU only, and only where it runs
    assert any(h.device is not None for h in reader_process._HELPERS)
    for a, b in zip(scores["1gpu"], scores["0gpu"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_a_gpu_pipeline_makes_its_waits_block(cp, tmp_path, monkeypatch):
    """A pipeline on the GPU sets the context's wait schedule to blocking (its stages' waits sleep),
    or to what ``HYPERAPP_CUDA_WAITS`` names; the schedule read back from the driver is what was asked."""
    from hyperapp.core import cuda_start
    scenes = _scenes(tmp_path, 2)
    monkeypatch.delenv("HYPERAPP_CUDA_WAITS", raising=False)
    try:
        for want in ("block", "spin"):
            if want != "block":
                monkeypatch.setenv("HYPERAPP_CUDA_WAITS", want)
            with CubePipeline(_steps(tmp_path), str(tmp_path / f"out-{want}"), device="gpu") as pipe:
                rows = [f.result() for f in [pipe.submit(str(s)) for s in scenes]]
            assert all(r["error"] is None for r in rows)
            assert pipe.waits == want
            with cp.cuda.Stream(non_blocking=True):
                assert cuda_start.schedule_waits(want) == want  # read back from this thread's context
    finally:
        with cp.cuda.Stream(non_blocking=True):
            cuda_start.schedule_waits("auto")
