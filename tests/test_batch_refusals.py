"""A batch run's edges: schedulers that do not answer, interrupted runs, output folders that fail mid-run;
every result kept in its own folder."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")
from .refusal_helpers import _cli, _cube, _one_clean_line  # noqa: F401


def _listener(reply: bytes | None):
    """A local TCP server that answers each connection with ``reply`` (None: accepts and says nothing);
    returns its port and a function that stops it."""
    import socket

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    done = threading.Event()
    held = []

    def serve():
        while not done.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            held.append(conn)
            if reply is not None:
                try:
                    conn.sendall(reply)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()

    def stop():
        done.set()
        for c in held:
            c.close()
        srv.close()

    return srv.getsockname()[1], stop


@pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 4, None],
                         ids=["another-protocol", "silent"])
def test_a_scheduler_address_that_is_not_a_dask_scheduler_is_one_line(tmp_path, capsys, monkeypatch, reply):
    """--scheduler at something that answers in another protocol (an HTTP server: the dashboard's port)
    or accepts and says nothing: one line, exit 2, within the connection's time limit, nothing written
    (Dask read the HTTP reply as a message length and failed with a MemoryError; a silent one hung)."""
    from hyperapp.batch import runner as batch
    monkeypatch.setattr(batch, "CONNECT_TIMEOUT", 2)
    _cube(tmp_path / "c" / "a.hdr")
    (tmp_path / "t.csv").write_text("row,col\n5,5\n")
    (tmp_path / "j.toml").write_text('[inputs]\npaths = ["c/*.hdr"]\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n'
                                     '[output]\nfolder = "out"\n')
    port, stop = _listener(reply)
    try:
        t0 = time.monotonic()
        rc, err = _cli(["run", tmp_path / "j.toml", "--device", "cpu", "--scheduler", f"tcp://127.0.0.1:{port}"], capsys)
        assert time.monotonic() - t0 < 30
    finally:
        stop()
    _one_clean_line(rc, err, f"127.0.0.1:{port}", "scheduler")
    assert not (tmp_path / "out").exists()


def test_workers_beyond_the_machine_are_refused(tmp_path, capsys):
    """--workers 1e3 (read as 1000) started processes for a minute and ate gigabytes before anything ran."""
    cores = os.cpu_count() or 1
    top = max(8, 2 * cores)
    _one_clean_line(*_cli(["run", tmp_path / "j.toml", "--workers", "1e3"], capsys), "--workers", f"to {top}",
                    f"{cores} core")
    _one_clean_line(*_cli(["run", tmp_path / "j.toml", "--workers", str(top + 1)], capsys), "--workers")


def test_a_local_clusters_workers_ignore_ctrl_c(tmp_path):
    """Ctrl-C in a terminal reaches every process of the group: the local cluster's workers ignore it (this
    process stops them), where each printed its own tracebacks under the run's one line."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("reads the workers' ignored signals from /proc (Linux)")
    from distributed import Client

    from hyperapp.batch.runner import _local_cluster

    before = signal.getsignal(signal.SIGINT)
    cluster = _local_cluster(1)
    try:
        assert signal.getsignal(signal.SIGINT) == before  # this process handles it again
        with Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
        for pid in pids:
            ignored = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("SigIgn"))
            assert int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)), ignored
    finally:
        cluster.close()


def test_an_unreadable_data_file_is_one_line_without_a_stray_traceback(tmp_path, capfd, monkeypatch):
    """A data file that cannot be opened (no permission): one line naming it, and no traceback of Spectral
    Python's half-made file object when it is collected (it printed one on stderr, twice a batch)."""
    import builtins
    import gc

    from hyperapp.core.errors import CubeFormatError
    from hyperapp.io import envi as envi_io
    from hyperapp.io import open_cube

    hdr = _cube(tmp_path / "c.hdr")
    real_open = builtins.open

    def no_permission(file, *a, **k):
        if str(file).endswith(".img"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", no_permission)
    with pytest.raises(CubeFormatError, match="cannot read the data file .Permission denied") as e:
        open_cube(hdr)
    monkeypatch.setattr(builtins, "open", real_open)
    gc.collect()
    assert "c.img" in str(e.value)
    assert "Traceback" not in capfd.readouterr().err
    assert envi_io.check_readable  # the one check, shared with the spectral-library reader


def test_bench_interrupted_says_what_its_json_holds(tmp_path, capsys, monkeypatch):
    """Ctrl-C during a bench: the JSON holds the cases measured before (it is written after each, on
    purpose), and the line says so, instead of "nothing written" or a batch's "cubes kept"."""
    import hyperapp.bench as B
    B.list_cases()  # every real case registered now (cases, campaign, peers, ...), not into the stand-ins below
    from hyperapp.bench import Measurement

    def fine(ctx):
        return Measurement("fine", gpu_ms=1.0)

    def cut(ctx):
        raise KeyboardInterrupt

    monkeypatch.setattr(B, "CASES", {"fine": fine, "cut": cut})
    monkeypatch.setattr(B, "CPU_CASES", ("fine", "cut"))
    out = tmp_path / "b.json"
    out.write_text('{"keep": 1}')
    rc, err = _cli(["bench", "--quick", "--json", out], capsys)
    assert rc == 130
    assert f"the 1 measurement(s) made before are in {out}" in err and "cube" not in err, err
    assert [c["name"] for c in json.loads(out.read_text())["cases"]] == ["fine"]
    monkeypatch.setattr(B, "CASES", {"cut": cut})
    monkeypatch.setattr(B, "CPU_CASES", ("cut",))
    rc, err = _cli(["bench", "--quick"], capsys)
    assert rc == 130 and "interrupted; nothing written" in err


def test_an_empty_job_argument_and_a_huge_click_say_what_they_are(tmp_path, capsys):
    _one_clean_line(*_cli(["run", ""], capsys), "no job file given")
    _cube(tmp_path / "c" / "a.hdr")
    (tmp_path / "t.csv").write_text("row,col\n99999999999999999999999,1\n")
    (tmp_path / "j.toml").write_text('[inputs]\npaths = ["c/*.hdr"]\n[[steps]]\ndetect = "ace"\ntargets = "t.csv"\n'
                                     '[output]\nfolder = "out"\n')
    rc, err = _cli(["run", tmp_path / "j.toml", "--device", "cpu"], capsys)
    _one_clean_line(rc, err, "t.csv", "too large to be a pixel")
    assert "4611686018427387904" not in err
