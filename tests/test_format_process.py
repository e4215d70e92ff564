"""The formatting helper process: the object table's CSV made there is the one made here, and a helper that
is missing, not ready or killed loses nothing."""

import time

import numpy as np
import pytest

from hyperapp.detect import format_process
from hyperapp.models.postprocess import TABLE_COLUMNS, objects_csv


def _table(n=500):
    rng = np.random.default_rng(3)
    t = {c: rng.integers(0, 2048, n) for c in TABLE_COLUMNS}
    t["label"] = np.arange(1, n + 1)
    for c in ("centroid_row", "centroid_col", "peak_score"):
        t[c] = rng.normal(100.0, 300.0, n)
    t["peak_score"][:4] = [np.nan, np.inf, -0.0, 1e-7][:n]
    return t


def _ready(timeout=20.0):
    format_process.start()
    helper = format_process._HELPER
    assert helper is not None
    t0 = time.monotonic()
    while not helper.usable():
        assert time.monotonic() - t0 < timeout, "the formatting helper did not start"
        time.sleep(0.02)
    return helper


@pytest.fixture
def helper(monkeypatch):
    monkeypatch.delenv("HYPERAPP_FORMAT_PROCESS", raising=False)
    format_process.stop()
    yield _ready()
    format_process.stop()


def test_csv_from_the_helper_is_the_one_made_here(helper):
    t = _table()
    before = helper._next
    got = [format_process.objects_csv_later(t), format_process.objects_csv_later(_table(3))]
    assert helper._next == before + 2  # both went to the helper
    assert got[1]() == objects_csv(_table(3)).encode()  # replies taken out of order
    assert got[0]() == objects_csv(t).encode()
    rows = [dict(zip(TABLE_COLUMNS, r)) for r in zip(*(t[c].tolist() for c in TABLE_COLUMNS))]
    assert format_process.objects_csv_later(rows)() == objects_csv(rows).encode()


def test_killed_helper_loses_nothing(helper):
    import signal

    t = _table()
    # stopped first, so that it cannot answer before it dies (it did once, in a fresh venv: nothing broke)
    helper._proc.send_signal(signal.SIGSTOP)
    pending = format_process.objects_csv_later(t)
    helper._proc.kill()
    helper._proc.wait()
    assert pending() == objects_csv(t).encode()  # formatted here instead
    assert helper.broken
    assert format_process.objects_csv_later(t)() == objects_csv(t).encode()
    format_process.start()  # a batch started later gets a new helper
    assert format_process._HELPER is not helper


def test_stuck_helper_is_let_go(helper, monkeypatch):
    """A helper that does not answer (stopped here) holds the write stage up for REPLY_TIMEOUT, no longer."""
    import signal

    monkeypatch.setattr(format_process, "REPLY_TIMEOUT", 0.3)
    t = _table(50)
    helper._proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        assert format_process.objects_csv_later(t)() == objects_csv(t).encode()
        assert time.monotonic() - t0 < 5
        assert helper.broken
    finally:
        helper._proc.send_signal(signal.SIGCONT)


def test_no_helper_formats_here(monkeypatch):
    format_process.stop()
    monkeypatch.setenv("HYPERAPP_FORMAT_PROCESS", "0")
    format_process.start()
    assert format_process._HELPER is None
    t = _table(20)
    assert format_process.objects_csv_later(t)() == objects_csv(t).encode()


def test_batch_formats_in_the_helper(tmp_path, monkeypatch, helper):
    """A job's detect step writes its object table through the helper, byte for byte as a run without it."""
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job
    from hyperapp.io.writers import write_envi

    rng = np.random.default_rng(0)
    cube = rng.normal(0, 1, (40, 30, 12)).astype(np.float32)
    cube[20:23, 10:13] += 4.0
    write_envi(tmp_path / "c0", cube)
    (tmp_path / "t.csv").write_text("row,col\n21,11\n")
    outs = {}
    for name in ("with", "without"):
        if name == "without":
            monkeypatch.setenv("HYPERAPP_FORMAT_PROCESS", "0")
        (tmp_path / f"{name}.toml").write_text(f'[inputs]\npaths = ["c0.hdr"]\n[[steps]]\ndetect = "ace"\n'
                                               f'targets = "t.csv"\n[output]\nfolder = "{name}"\n')
        before = helper._next
        run_job(load_job(tmp_path / f"{name}.toml"), device="cpu")
        assert (helper._next > before) == (name == "with")
        outs[name] = sorted(tmp_path.joinpath(name).rglob("objects.csv"))
    assert len(outs["with"]) == 1
    assert outs["with"][0].read_bytes() == outs["without"][0].read_bytes()
    assert outs["with"][0].read_text().count("\n") > 1
