"""The window's first click, measured without Qt (the GPU host has no Qt): in a fresh process, a cube is
opened as the window opens it (:class:`hyperapp.project.session.Session`), the window's GPU warm-up is
started as the window starts it (:func:`hyperapp.batch.prepare_gpu.start_background`), and so is the
open cube's preparation (:func:`hyperapp.project.session.prepare_in_background`, which the window starts;
``--cold`` leaves it out); once it is done, and ``--pause`` seconds later (a person marks targets
meanwhile; a first click started as the preparation ends waited with nothing to load, which ``--trace``
shows: docs/performance.md), the targets are marked and the detector runs twice through
:meth:`Session.detect`, the call the window's Run makes, each run on a thread of its own as the window's
worker runs it, and each from an empty store of what a fit hands on to the next (:func:`_forget_kept`).
What Qt adds (the signals, the drawing) is the same on every click.

    python -m hyperapp.bench.window_click HEADER TARGETS METHOD [--device gpu] [--cold] [--pause S] [--trace]

prints one JSON line: the process's start (imports and the cube's opening), the preparation's seconds,
each click's seconds, its load (the cube's pixels to the device, where no preparation held them) and
its stages; with ``--trace``, what each click loaded or waited on.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from contextlib import nullcontext


def _on_a_thread_of_its_own(fn):
    """``fn()`` on a new thread, as the window's Run runs each job (``hyperapp.gui.worker.start``): CuPy keeps
    its cuBLAS and cuSOLVER handles per thread, so a click on one thread would not pay what a window's
    click pays. Its exception is raised here."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001  (raised again in the caller's thread)
            box["error"] = exc

    t = threading.Thread(target=run, name="hyperapp-worker")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


#: seconds between the preparation's end and the first click (a person marks targets meanwhile)
PAUSE_S = 1.0


def window_clicks(header: str, targets: str, method: str, device: str = "gpu", clicks: int = 2,
                  cold: bool = False, pause: float = PAUSE_S, trace: bool = False) -> dict:
    """The first ``clicks`` runs of ``method`` in this process, as the window makes them (see the module);
    ``trace``: with what each click loaded or waited on (:class:`hyperapp.bench.click_trace.ClickTrace`)."""
    t0 = time.perf_counter()
    import numpy as np

    from hyperapp.batch.prepare_gpu import start_background
    from hyperapp.bench.click_trace import ClickTrace
    from hyperapp.io import read_labels
    from hyperapp.project.session import Session, prepare_in_background
    from hyperapp.request import DetectRequest

    tracer = ClickTrace().install() if trace else None
    said: list[str] = []
    installing = start_background(lambda share, task: None, said.append)
    session = Session.open(header)
    prepared: dict = {}
    if not cold:
        t = time.perf_counter()
        preparing = prepare_in_background(session, device, installing)
        preparing.join()
        prepared = {**preparing.prepared, "wall_s": round(time.perf_counter() - t, 3)}
        time.sleep(pause)
    session.roi.mark_pixels(np.argwhere(read_labels(targets, (session.cube.rows, session.cube.cols))), "target")
    request = DetectRequest.from_mapping({"method": method, "device": device}, "window", need_targets=False)
    start = time.perf_counter() - t0 - prepared.get("wall_s", 0.0) - (0.0 if cold else pause)
    runs = []
    for i in range(clicks):
        _forget_kept(session)
        t = time.perf_counter()
        with tracer.during(f"click {i + 1}") if tracer else nullcontext():
            result = _on_a_thread_of_its_own(
                lambda: session.detect(request, session.roi.targets.copy(), session.roi.background))
        runs.append({"seconds": time.perf_counter() - t,
                     "stages": {k: round(v, 4) for k, v in result.report["seconds"].items()}})
    return {"method": method, "start_s": round(start, 3), "prepared": prepared, "clicks": runs,
            "warmup_line": said[0] if said else None, **({"trace": tracer.events} if tracer else {})}


def _forget_kept(session) -> None:
    """Empty what fits on the held pixels hand on to the next (:attr:`ResidentImage.kept`: the RBFN's
    whitening): each click then computes what the first computes, and the second measures the first's
    compile stalls, not what the first click's fit left to the next (at 430 bands the RBFN's second click
    took 8 ms with it against the first's 75, nothing compiled)."""
    from hyperapp.detect.resident import resident

    held = session.held_pixels()
    entry = resident(held) if held is not None else None
    if entry is not None:
        entry.kept.clear()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("header")
    ap.add_argument("targets")
    ap.add_argument("method")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--clicks", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="no preparation of the open cube (before it existed)")
    ap.add_argument("--pause", type=float, default=PAUSE_S, help="seconds from the preparation's end to the click")
    ap.add_argument("--trace", action="store_true",
                    help="record each click's kernel loads, garbage collections and memory-pool growth")
    a = ap.parse_args(argv)
    print(json.dumps(window_clicks(a.header, a.targets, a.method, a.device, a.clicks, a.cold, a.pause, a.trace)))


if __name__ == "__main__":
    main()
