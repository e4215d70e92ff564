"""The bench's CPU-vs-peers case: it runs where there is no GPU and writes every method's figure, its peer's
and the command that measured them (small spectra here: the real case reads the airport scene)."""

from __future__ import annotations

import json

import pytest

from hyperapp.core.errors import BackendError

NAMES = ["cpu-kmeans-k8-4starts", "cpu-kmeans-every-k-2..10-8starts", "cpu-gmm-k8-full-3starts",
         "cpu-gmm-k8-diag-3starts", "cpu-forest-100trees", "cpu-forest-100trees-predict", "cpu-cart", "cpu-hac-ward-5000"]


def test_cpu_vs_peers_runs_without_a_gpu_and_says_how(tmp_path, monkeypatch):
    import hyperapp.bench as B
    import hyperapp.bench.peers as P
    import hyperapp.core.backend
    from hyperapp.bench.cases import _spectra

    X = _spectra(1500, 24)[0] * 1000.0
    monkeypatch.setattr(P, "_spectra", lambda: (X, "test spectra"))
    monkeypatch.setattr(hyperapp.core.backend, "gpu_available", lambda: False)  # as on a machine without one
    out = tmp_path / "b.json"
    assert B.run_bench(["cpu-analysis-vs-peers"], repeats=1, json_path=str(out)) == 0
    got = json.loads(out.read_text())
    assert [c["name"] for c in got["cases"]] == NAMES
    for c in got["cases"]:
        n = c["notes"]
        assert c["gpu_ms"] is None and c["numpy_ms"] > 0 and c["peer_ms"] > 0 and n["device"] == "cpu"
        # (rounded to three decimals: a ratio of 0.044 is 1 % off after rounding)
        assert n["hyperapp/peer"] == pytest.approx(c["numpy_ms"] / c["peer_ms"], rel=0.01, abs=5e-4)
        assert n["command"] == "hyperapp --headless bench --case cpu-analysis-vs-peers" and n["data"].startswith("test spectra")
    by = {c["name"]: c["notes"] for c in got["cases"]}
    assert abs(float(by["cpu-gmm-k8-full-3starts"]["loglik_rel_diff"])) < 0.005
    assert abs(float(by["cpu-gmm-k8-diag-3starts"]["loglik_rel_diff"])) < 0.005
    assert 0.95 < by["cpu-kmeans-every-k-2..10-8starts"]["inertia/sklearn_worst"] < 1.05  # (different local optima)
    assert by["cpu-hac-ward-5000"]["same_heights"]
    assert by["cpu-forest-100trees-predict"]["same_labels"] > 0.9
    # a GPU case still needs a GPU (or --quick, for the whole-run cases)
    with pytest.raises(BackendError, match="needs a GPU"):
        B.run_bench(["cpu-analysis-vs-peers", "gmm-262144x128-k8-full-100it"], repeats=1)


def test_host_steal_is_read_and_shared_out():
    """The click cases' host note: the hypervisor's share of CPU time between two readings of /proc/stat."""
    import sys

    from hyperapp.bench.live import cpu_jiffies, steal_percent

    assert steal_percent((10, 1000), (30, 2000)) == 2.0
    assert steal_percent(None, (30, 2000)) is None
    assert steal_percent((30, 2000), (30, 2000)) is None  # no time passed: no share
    got = cpu_jiffies()
    if sys.platform.startswith("linux"):
        assert got is not None and 0 <= got[0] <= got[1]


def test_file_bench_settings_are_checked(monkeypatch):
    from hyperapp.bench.whole_path import FILE_CUBES, _file_settings
    from hyperapp.core.errors import InputError

    monkeypatch.delenv("HYPERAPP_FILE_CUBES", raising=False)
    monkeypatch.delenv("HYPERAPP_FILE_CPU_RUNS", raising=False)
    assert _file_settings() == (FILE_CUBES, 3)
    monkeypatch.setenv("HYPERAPP_FILE_CUBES", "float32-bil, uint16-bil")
    monkeypatch.setenv("HYPERAPP_FILE_CPU_RUNS", "0")
    assert _file_settings() == (("float32-bil", "uint16-bil"), 0)
    monkeypatch.setenv("HYPERAPP_FILE_CUBES", "float32-bil,bip")
    with pytest.raises(InputError, match="HYPERAPP_FILE_CUBES='float32-bil,bip'"):
        _file_settings()
    monkeypatch.setenv("HYPERAPP_FILE_CUBES", "float32-bil")
    monkeypatch.setenv("HYPERAPP_FILE_CPU_RUNS", "two")
    with pytest.raises(InputError, match="HYPERAPP_FILE_CPU_RUNS"):
        _file_settings()


def test_clicks_are_timed_in_rounds_and_told_apart_by_the_host_state(monkeypatch):
    """The click cases' rounds (live.clicks_in_rounds): every method clicked in each round, each round's
    launch time beside it, and the clicks of the rounds that ran slow (a launch time over 1.3x the fastest
    round's) given apart."""
    import types

    from hyperapp.bench import live

    launches = iter([10.0, 14.0, 10.5, 10.0, 20.0, 10.0, 10.0, 10.0])
    monkeypatch.setattr(live, "launch_us", lambda n=2000: next(launches))
    monkeypatch.setattr(live.time, "sleep", lambda s: None)
    walls = iter(range(10_000))

    def fake_walls(fn, repeats):
        out = []
        for _ in range(repeats):
            fn()
            out.append(float(next(walls)))
        return out

    monkeypatch.setattr(live, "_walls", fake_walls)

    def click():
        return types.SimpleNamespace(report={"seconds": {"fit": 0.002, "total": 0.004}})

    got = live.clicks_in_rounds({"a": click, "b": click}, repeats=24)
    assert set(got) == {"a", "b"}
    ms, notes = got["a"]
    assert len(notes["round_medians_ms"]) == live.ROUNDS == len(notes["launch_us_rounds"])
    assert notes["stages_ms"] == {"fit": 2.0}
    # a's clicks are 0-2, 6-8, 12-14, ... (b's in between); rounds 2 and 5 ran slow
    assert notes["round_medians_ms"][:2] == [1.0, 7.0]
    assert notes["click_ms_by_host_state"]["slow episode"] == 16.0  # median of 6, 7, 8, 24, 25, 26
    assert notes["click_ms_by_host_state"]["normal"] is not None and ms == 22.0
