"""A batch job's cubes through three overlapped stages: read, compute, write.

One thread per stage, joined by bounded queues, so that cube n+1 is read while cube n is computed and
cube n-1 is written::

    submit -> [inbox] -> read -> [depth] -> compute -> [depth] -> write -> future's result (a summary row)

- **read** opens the cube and brings its pixels (good bands, float32, no-data NaN) to where they are
  computed: onto the GPU through the page-locked tile ring (:func:`hyperapp.detect.run.load_pixels`), or into
  host memory. Cubes of :data:`LARGE_CUBE_BYTES` or more (on the GPU :data:`HELPER_CUBE_BYTES`, where the
  helper copies to the GPU itself) are read by the reading helper process
  (:mod:`hyperapp.reading.reader_process`), so that their reads do not wait on the compute stage's Python. A
  cube too large to hold ``depth + 2`` times (host budget, half the GPU's free memory) is not read
  ahead: its compute stage runs the whole-file path (:func:`hyperapp.detect.run.detect_to_folder`, which
  streams it), as a cube alone would.
- **compute** runs every step on those pixels through the one detection and analysis path
  (:func:`hyperapp.detect.run.run_detection`, :func:`hyperapp.analyse.run.run_analysis`) and finishes on the
  device what the outputs need (the object table), so that the writer touches host memory only.
- **write** writes each step's outputs all or nothing (:func:`hyperapp.detect.outputs.write_detection`,
  :func:`hyperapp.analyse.run.write_analysis`) and completes the cube's future. The object tables' CSV
  is formatted meanwhile in the formatting helper process (:mod:`hyperapp.detect.format_process`), which the
  pipeline starts: it was the stage's one long stretch of Python, and held the compute stage back.

Cubes leave in the order they were submitted. The queues bound memory: at most ``depth`` cubes wait
between two stages. On the GPU each stage thread issues its work on a stream of its own, and a stage
hands a cube on only once its work on the device is done, so a hand-off never races the device.

What does not change from cube to cube is prepared once per pipeline, not per cube: the steps, the
click files as masks (per image shape), saved models (per band count), the backend. A step's model is
fitted on each cube from that cube's own pixels at the clicks (the job's meaning of ``targets``); a
step with ``train`` (or ``model``) fits once before the run and every cube scores with that model.

Each summary row carries ``stages``: seconds in read, compute and write, and the seconds the cube
waited for the compute stage (``wait``); the manifest keeps them.

The same pipeline serves a run in this process (:func:`hyperapp.batch.runner.run_job`) and each Dask worker:
:func:`run_on_worker` feeds the cube of a Dask task into the worker process's one pipeline and waits
for it, so a worker with three or more threads overlaps the stages of its cubes too.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from hyperapp.batch.jobfile import Step
from hyperapp.core.errors import Cancelled, HyperappError, InputError
from hyperapp.core.progress import Progress
from hyperapp.request import DetectRequest

#: cubes waiting between two stages (bounds memory: at most this many read cubes wait for the GPU)
DEPTH = 2
#: seconds a stage waits on a queue before it looks whether the pipeline was closed
POLL = 0.1
#: the interpreter's thread switch interval while a pipeline runs (Python's default is 5 ms): a stage
#: that comes back from a file read or a device wait needs the GIL for a moment, and with the default it
#: waited up to 5 ms for the compute thread's Python each time, eight tiles a cube. Shorter intervals
#: (0.1, 0.02 ms) sped the read stage a little and slowed the compute and write stages as much: a
#: campaign ran no faster (`scripts/profile_campaign.py --switch`, H100 host)
SWITCH_INTERVAL = 0.0005
STAGES = ("read", "compute", "write")
#: stored bytes per tile the read stage reads: eight times a lone read's (:data:`hyperapp.reading.tiles.TILE_BYTES`).
#: Each tile costs the read and copy threads a few dozen hand-offs of the interpreter, which the compute
#: and write threads hold much of the time, so the read stage's rate grows with the tile: onto the GPU
#: beside a thread running Python, 2.2 / 7.3 / 19.8 GB/s with 16 / 64 / 256 MB tiles, against 11 / 30 /
#: 33 GB/s alone (`scripts/profile_reading.py`, H100 host). Such cubes are read by the reading helper
#: process (its calls moved out of this interpreter), into its shared ring of :data:`READ_RING` tiles
#: (1 GB): on the GPU, where the helper copies each tile itself (:mod:`hyperapp.reading.helper_gpu`), else in
#: host memory pinned once per process
READ_TILE_BYTES: int | None = 128 << 20
#: buffers in the ring of such a reader (:class:`hyperapp.reading.tiles.TileReader`'s ``ring``): all but the two
#: the GPU's copies hold are being read at once. Between two tiles the helper waits for a reply to cross
#: to this process, a tile to be handed on, a buffer to come back and the next request to cross back,
#: and with two tiles in flight its threads idled through that: a campaign of 2 GB cubes (16-core H200
#: host, ``scripts/profile_stages.py --layouts``, two runs each) ran at 27.3-29.1 GB/s with four tiles of
#: 256 MB, 32.4-33.2 with eight of 128 MB (the same 1 GB), 32.8 with eight of 256 MB and 30.1-30.6 with
#: sixteen of 64 MB (whose hand-offs cost the read stage's thread 33-34 ms of CPU a cube, against 23)
READ_RING = 8
#: cubes smaller than this read with a lone read's tiles, in this process, unless the next limit takes
#: them to the helper: the large ring (1 GB on the GPU and a CUDA context for each reading helper, or 1 GB
#: of host memory pinned at about 0.3 GB/s where the helper cannot copy to the GPU, once in each process)
#: pays only over cubes of a gigabyte or more
LARGE_CUBE_BYTES = 1 << 30
#: on the GPU, cubes of this size or more are read by the reading helper too, where it copies to the GPU
#: itself (no host memory to pin): a batch of 134 MB cubes (512 x 512 x 128, RBFN from clicks, one-H200
#: host, three runs each) ran at 25-27 ms a cube against 35 read in this process, the read stage 8-9 ms
#: against 21-22 and the process's CPU 27-31 ms a cube against 73-76: the reads' futures and system calls
#: no longer take turns with the compute stage's Python. Where the helper cannot copy to the GPU they are
#: read here, as smaller ones are
HELPER_CUBE_BYTES = 64 << 20
#: the most of the GPU's free memory the reading helpers' rings may take for such cubes (two rings of about
#: 1 GB: a GPU of 80 GB has room, one of 8 GB keeps it for the computation and reads them here)
HELPER_RING_SHARE = 0.25


@dataclass
class _Item:
    """One cube on its way through the stages."""

    path: str
    future: Future
    row: dict
    folder: str | None = None  # the cube's output folder's name (the job's, unique among its inputs)
    truth: str | None = None  # the cube's truth mask (its detections' reports carry AUC and Pd)
    cube: object = None
    image: object = None  # the cube's pixels where they are computed; None: each step reads itself
    results: list = field(default_factory=list)  # (step, folder, result or None when already written)
    t_ready: float = 0.0  # when the read stage handed it on
    planned: bool = False  # opened, and its read planned (:meth:`CubePipeline._plan`)
    plan: object = None  # the cube on the steps' bands, when the read stage reads it
    reader: object = None  # its TileReader, made while the cube before it was read (started once that one's reads end)


class CubePipeline:
    """Read, compute and write a job's cubes on three threads (see the module).

    Parameters
    ----------
    steps : list of dict
        The job's steps (:meth:`hyperapp.batch.jobfile.Step.to_dict`, models of ``train`` steps saved).
    out : str
        The job's output folder.
    dataset : str, optional
        HDF5 dataset / .mat variable of the inputs.
    device : {"auto", "gpu", "cpu"}
    memory : float, optional
        Host memory (GB) one cube may hold (``--memory``).
    depth : int
        Cubes waiting between two stages.
    band_axis : int, optional
        The stored axis holding the bands of generic HDF5/NetCDF inputs (the job's ``band_axis``).
    """

    def __init__(self, steps: list[dict], out: str, dataset: str | None = None, device: str = "auto",
                 memory: float | None = None, depth: int = DEPTH, band_axis: int | None = None):
        from hyperapp.io.speclib import ResampledLibraries

        self.steps = [Step.from_dict(d) for d in steps]
        self.out, self.dataset, self.device, self.memory = str(out), dataset, device, memory
        self.band_axis = band_axis
        self.depth = max(1, int(depth))
        self._progress = Progress()  # no display: a cancel flag that every long computation checks
        self._labels: dict = {}
        self._models: dict = {}
        self._backgrounds_checked: set = set()
        self._cache_lock = threading.Lock()
        # the steps' spectral libraries, each read and resampled once per cube wavelength grid (the scale
        # match to each cube's values stays per cube)
        self._libraries = ResampledLibraries()
        self._inbox: queue.Queue = queue.Queue()
        self._to_compute: queue.Queue = queue.Queue(self.depth)
        self._to_write: queue.Queue = queue.Queue(self.depth)
        self._threads: list[threading.Thread] = []
        self._started = False
        self._start_lock = threading.Lock()
        self._closed = False
        self._ahead: _Item | None = None  # the next cube for the read stage, taken from the inbox early
        self.waits: str | None = None  # how the GPU's waits are scheduled (cuda_start.schedule_waits)

    # ------------------------------------------------------------------ public
    def submit(self, path: str, folder: str | None = None, truth: str | None = None) -> Future:
        """Queue cube ``path`` (``truth``: its truth mask, for AUC and Pd in its detections' reports); the
        future's result is its summary row (an ``error`` line instead of raising); a cube dropped by
        :meth:`close` has its future cancelled (``CancelledError``)."""
        if self._closed:
            raise RuntimeError("the pipeline is closed")
        self._start()
        fut: Future = Future()
        row = {"cube": path, "seconds": 0.0, "detections": None, "outputs": [], "steps": {}, "error": None,
               "stages": {s: 0.0 for s in STAGES}}
        row["stages"]["wait"] = 0.0
        self._inbox.put(_Item(path, fut, row, folder, truth))
        if self._closed:  # closed meanwhile, by another thread: nothing will take it
            self._drain(self._inbox)
        return fut

    def close(self, wait: bool = True) -> None:
        """Stop: the cube in the compute stage stops at its next check (nothing of it is written), the
        cube being written is finished (outputs are atomic anyway), queued cubes are dropped (their
        futures cancelled). Each stage notices within :data:`POLL` seconds; no stage ever blocks on a
        full queue once the pipeline is closed."""
        if self._closed:
            return
        self._closed = True
        self._progress.cancel()
        for q in (self._inbox, self._to_compute, self._to_write):
            # wakes a stage waiting on its queue at once (it would notice the flag only at its next
            # POLL: a run's last 0.1 s spent doing nothing); a full queue has no stage waiting on it
            with contextlib.suppress(queue.Full):
                q.put_nowait(_WAKE)
        if wait:
            for t in self._threads:
                t.join()
            self._drop_ahead()
        for q in (self._inbox, self._to_compute, self._to_write):
            self._drain(q)

    def __enter__(self) -> CubePipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run_one(self, path: str, folder: str | None = None, truth: str | None = None) -> dict:
        """Every stage of one cube in the calling thread (no overlap): a cube alone."""
        fut: Future = Future()
        item = _Item(path, fut, {"cube": path, "seconds": 0.0, "detections": None, "outputs": [], "steps": {},
                                 "error": None, "stages": {**{s: 0.0 for s in STAGES}, "wait": 0.0}}, folder, truth)
        for stage in (self._read, self._compute, self._write):
            self._timed(stage, item)
        self._finish(item)
        return item.row

    # ------------------------------------------------------------------ threads
    def _start(self) -> None:
        with self._start_lock:
            if self._started:
                return
            self._started = True
            if sys.getswitchinterval() > SWITCH_INTERVAL:
                sys.setswitchinterval(SWITCH_INTERVAL)
            from hyperapp.detect import format_process
            format_process.start()  # the write stage's object tables are formatted there (not waited for)
            for name, fn, src, dst in (("read", self._read, self._inbox, self._to_compute),
                                       ("compute", self._compute, self._to_compute, self._to_write),
                                       ("write", self._write, self._to_write, None)):
                t = threading.Thread(target=self._loop, args=(fn, src, dst), name=f"hyperapp-{name}", daemon=True)
                t.start()
                self._threads.append(t)

    def _loop(self, fn, src: queue.Queue, dst: queue.Queue | None) -> None:
        """One stage: take a cube, do ``fn`` on it (on this thread's own stream on the GPU), pass it on,
        until the pipeline is closed. Waits on the queues time out every :data:`POLL` seconds to look
        at the flag, so a stage whose neighbour has stopped never waits for it for ever."""
        try:
            with self._own_stream():
                self._run_stage(fn, src, dst)
        finally:
            if fn == self._read:  # the cube taken early for the read stage goes with it
                self._drop_ahead()

    def _run_stage(self, fn, src: queue.Queue, dst: queue.Queue | None) -> None:
        while not self._closed:
            try:
                item = self._take_ahead() if fn == self._read else None
                item = item or src.get(timeout=POLL)
            except queue.Empty:
                continue
            if item is _WAKE:
                continue
            if self._closed:
                _cancel(item)
                return
            if fn == self._compute:
                item.row["stages"]["wait"] = round(max(time.perf_counter() - item.t_ready, 0.0), 6)
            self._timed(fn, item)
            if fn == self._read:
                item.t_ready = time.perf_counter()
            if dst is None:
                self._finish(item)
                continue
            while True:
                try:
                    dst.put(item, timeout=POLL)
                    break
                except queue.Full:
                    if self._closed:
                        _cancel(item)
                        return
            if self._closed:
                # closed while this stage worked (close(wait=False) does not wait for it): the next stage may
                # have gone already, so what was just handed on is cancelled here, not left waiting for ever
                self._drain(dst)

    def _take_ahead(self) -> _Item | None:
        item, self._ahead = self._ahead, None
        return item

    def _drop_ahead(self) -> None:
        item = self._take_ahead()
        if item is not None:
            _cancel(item)

    def _drain(self, q: queue.Queue) -> None:
        while True:
            try:
                item = q.get_nowait()
            except queue.Empty:
                return
            if item is not _WAKE:
                _cancel(item)

    def _own_stream(self):
        """A non-blocking CUDA stream for this thread on the GPU (so the reader's copies and the compute
        stage's kernels run side by side); nothing on the CPU."""
        from hyperapp.core.backend import get_backend

        try:
            backend = get_backend(self.device)
        except HyperappError:
            return contextlib.nullcontext()  # every cube then fails with the backend's one line
        if not backend.is_gpu:
            return contextlib.nullcontext()
        stream = backend.xp.cuda.Stream(non_blocking=True)  # the context is now current on this thread
        from hyperapp.core.cuda_start import schedule_waits

        # the stages' waits for the GPU sleep instead of spinning (a quarter less CPU a cube, the same rate:
        # see schedule_waits); it holds for every thread of the process, and each stage sets it, as each may
        # be the first
        self.waits = schedule_waits()
        return stream

    def _timed(self, fn, item: _Item) -> None:
        """Run stage ``fn`` on ``item`` unless an earlier stage failed; its seconds go to the row, its
        error becomes the row's one line (a broken cube fails alone)."""
        if item.row["error"] is not None:
            return
        t0 = time.perf_counter()
        try:
            fn(item)
        except Cancelled:
            item.row["error"] = "cancelled"
            item.image = None
        except HyperappError as exc:
            item.row["error"] = str(exc)
            item.image = None
        except Exception as exc:  # noqa: BLE001  (one broken cube fails alone, with one line)
            item.row["error"] = f"internal error: {exc.__class__.__name__}: {exc}"
            item.image = None
        item.row["stages"][fn.__name__.lstrip("_")] = round(time.perf_counter() - t0, 6)

    def _finish(self, item: _Item) -> None:
        if item.row["error"] is not None:  # nothing of a failed cube was kept: no counts beside its error
            item.row["detections"] = None
        st = item.row["stages"]
        item.row["seconds"] = round(st["read"] + st["compute"] + st["write"], 3)
        if item.row["error"] == "cancelled":
            _cancel(item)
        elif not item.future.done():
            item.future.set_result(item.row)

    # ------------------------------------------------------------------ stages
    def _read(self, item: _Item) -> None:
        from hyperapp.core.backend import get_backend
        from hyperapp.detect.run import load_pixels

        backend = get_backend(self.device)
        if not item.planned:
            self._plan(item, backend)
        if item.plan is None:
            return  # steps on different bands, or a cube too large to read ahead: the compute stage reads it
        reader, item.reader = item.reader, None
        try:
            if reader is not None:
                # a large cube's reads start now; the next cube's reader is made meanwhile and starts as soon
                # as this one's reads end, while this cube's last tiles still go to the device (no gap
                # between cubes)
                reader.start()
                nxt = self._look_ahead(backend)
                if nxt is not None and nxt.reader is not None:
                    reader.then(nxt.reader)
            item.image = load_pixels(item.plan, backend, self._progress, reader=reader)
        except BaseException:
            if reader is not None:  # stopped and its ring given back, even where the load failed before reading
                reader.close()
            raise
        backend.synchronize()  # the pixels are on the device before the compute stage gets them

    def _plan(self, item: _Item, backend) -> None:
        """Open the cube and plan its read: ``item.plan`` is the cube on the steps' bands when the read
        stage reads it, None when the compute stage does (steps on different bands, or too large to read
        ahead); a cube of :data:`LARGE_CUBE_BYTES` or more gets its reader (``item.reader``: tiles of
        :data:`READ_TILE_BYTES`, through the reading helper), not yet started. Others are read with a
        lone read's tiles, in this process."""
        from hyperapp.io import open_cube
        from hyperapp.reading.tiles import TileReader

        item.planned, item.plan, item.reader = True, None, None
        item.cube = open_cube(item.path, self.dataset, self.band_axis)
        sel = {(s.request.all_bands, s.request.bands) for s in self.steps}
        if len(sel) != 1:
            return  # steps on different bands: each reads its own (compute stage)
        all_bands, bands = sel.pop()
        cube = item.cube.run_bands(all_bands, bands, "bands")
        if self._read_ahead(cube, backend):
            item.plan = cube
            size = cube.rows * cube.cols * cube.store.shape[2] * cube.store.dtype.itemsize
            large = size >= LARGE_CUBE_BYTES
            if large or (size >= HELPER_CUBE_BYTES and backend.is_gpu):
                reader = TileReader(cube, READ_TILE_BYTES, pinned=backend.is_gpu, helper=True, ring=READ_RING)
                if large or (reader.helper_can_read and self._helper_copies_to_gpu(backend, reader)):
                    item.reader = reader

    @staticmethod
    def _helper_copies_to_gpu(backend, reader) -> bool:
        """Whether a reading helper copies this process's tiles to its GPU (one with ``reader``'s slots is
        started if none runs), where the helpers' rings on the GPU take at most :data:`HELPER_RING_SHARE`
        of its free memory (a small GPU keeps its memory for the computation)."""
        from hyperapp.core.backend import gpu_free_bytes
        from hyperapp.reading import reader_process
        from hyperapp.reading.tiles import HELPER_THREADS

        rings = reader.slot_bytes * reader.ring * reader_process.MAX_HELPERS
        if rings > HELPER_RING_SHARE * gpu_free_bytes(backend.xp):
            return False
        return reader_process.copies_to_gpu(backend.xp.cuda.runtime.getDevice(), reader.slot_bytes, reader.ring,
                                            HELPER_THREADS)

    def _look_ahead(self, backend) -> _Item | None:
        """The read stage's next cube, taken from the inbox now (None if none is waiting), opened, with a
        reader made for it when it is large (:meth:`_plan`). Where any of that fails, the cube is opened
        again in its turn, and the failure is its own."""
        if self._ahead is not None or self._closed:
            return None
        try:
            nxt = self._inbox.get_nowait()
        except queue.Empty:
            return None
        if nxt is _WAKE:  # the pipeline is closing
            return None
        self._ahead = nxt
        try:
            self._plan(nxt, backend)
        except Exception:  # noqa: BLE001  (see above)
            nxt.planned, nxt.plan, nxt.cube, nxt.reader = False, None, None, None
        return nxt

    def _read_ahead(self, cube, backend) -> bool:
        """Whether ``depth + 2`` cubes of this size fit where they are computed (else the compute
        stage reads the cube itself, streaming it when it must)."""
        from hyperapp.core.backend import gpu_free_bytes
        from hyperapp.detect.budget import GPU_FRACTION, memory_budget

        need = cube.rows * cube.cols * cube.bands * 4 * (self.depth + 2)
        if backend.is_gpu:
            return need <= GPU_FRACTION * gpu_free_bytes(backend.xp)
        return need <= memory_budget(self.memory)

    def _compute(self, item: _Item) -> None:
        from hyperapp.analyse.run import run_analysis, write_analysis
        from hyperapp.batch.folders import cube_folder, step_folder
        from hyperapp.core.backend import get_backend
        from hyperapp.detect.run import detect_to_folder, run_detection
        from hyperapp.io.masks import check_background

        backend = get_backend(self.device)
        raw, X = item.cube, item.image
        item.image = None  # the stage's own reference goes when the cube is done
        cube_out = cube_folder(self.out, item.path, item.folder)
        truth = None
        if item.truth:
            from hyperapp.io import read_truth

            truth = read_truth(item.truth, (raw.rows, raw.cols))
        for step in self.steps:
            s = step.request.replace(device=self.device, memory=self.memory)
            cube = raw.run_bands(s.all_bands, s.bands, "bands")
            image = X  # read ahead only when every step runs on the same bands (the read stage)
            shape = (cube.rows, cube.cols)
            folder = step_folder(cube_out, step.name)
            if step.kind == "detect":
                model = self._model(s, cube.bands)
                targets = self._mask(s.targets, shape) if s.targets and model is None else None
                background = self._mask(s.background, shape) if s.background and model is None else None
                if (s.background, s.targets, shape) not in self._backgrounds_checked:  # once per job and shape
                    check_background(background, targets, s.background)
                    self._backgrounds_checked.add((s.background, s.targets, shape))
                kw = dict(model=model, progress=self._progress, truth=truth)
                if model is None:  # targets and undesired signatures from spectral libraries, where given
                    kw.update(step.library_kwargs(cube, self._libraries))
                if image is None:  # not read ahead: the whole-file path, streamed when it must be
                    res, _ = detect_to_folder(cube, s, targets, background, folder, **kw)
                    item.results.append((step, folder, None, cube))
                else:
                    res = run_detection(cube, s, targets, background, image=image, **kw)
                    res.object_columns  # noqa: B018  (the object table, built on the device before the writer)
                    item.results.append((step, folder, res, cube))
                item.row["detections"] = {**(item.row["detections"] or {}), step.name: int(res.report["detections"])}
            else:
                roi = self._classes(s.roi, shape) if s.roi else None
                res = run_analysis(cube, s, roi=roi, image=image, progress=self._progress)
                if image is None:
                    write_analysis(res, folder, cube)
                    item.results.append((step, folder, None, cube))
                else:
                    item.results.append((step, folder, res, cube))
            del image
        # the device is done with the pixels before they are let go: their memory goes back to the
        # reader's stream, which may fill it with the next cube at once
        backend.synchronize()
        del X

    def _write(self, item: _Item) -> None:
        from hyperapp.analyse.run import write_analysis
        from hyperapp.detect.outputs import write_detection

        for s, folder, res, cube in item.results:
            if res is not None:
                if s.kind == "detect":
                    write_detection(res, folder, cube)
                else:
                    write_analysis(res, folder, cube)
            item.row["outputs"].append(str(folder))
            item.row["steps"][s.name] = str(folder)
        item.results = []

    # ------------------------------------------------------------------ prepared once
    def _mask(self, path: str, shape: tuple[int, int]):
        """A click file as a mask, read once per image shape (the masks are only read, never changed)."""
        from hyperapp.io import read_labels

        key = (path, shape)
        with self._cache_lock:
            if key not in self._labels:
                m = read_labels(path, shape)
                m.setflags(write=False)
                self._labels[key] = m
            return self._labels[key]

    def _classes(self, path: str, shape: tuple[int, int]):
        from hyperapp.io.masks import read_class_map

        key = ("roi", path, shape)
        with self._cache_lock:
            if key not in self._labels:
                self._labels[key] = read_class_map(path, shape)
            return self._labels[key].copy()

    def _model(self, s: DetectRequest, n_bands: int):
        """A step's saved model, loaded once per band count (scoring does not change it)."""
        if not s.model:
            return None
        from hyperapp.detect.model_files import load_model

        key = (s.model, n_bands, s.method)
        with self._cache_lock:
            if key not in self._models:
                if s.train:  # a model this run trained: errors name its scene, not the run's copy of the model
                    self._train_fits(s, n_bands)
                self._models[key] = load_model(s.model, n_bands=n_bands, method=s.method)
            return self._models[key]

    def _train_fits(self, s: DetectRequest, n_bands: int) -> None:
        """An :class:`InputError` naming step ``s``'s training scene when the model trained on it (on the
        step's bands) cannot score a cube of ``n_bands`` bands (its header read once)."""
        from hyperapp.io import open_cube

        key = ("train", s.train, s.all_bands, s.bands)
        if key not in self._models:
            self._models[key] = open_cube(s.train, self.dataset).run_bands(s.all_bands, s.bands, "bands").bands
        if self._models[key] != n_bands:
            raise InputError(f"the model trained on this scene ({self._models[key]} bands) cannot score a cube of "
                             f"{n_bands} bands", s.train)


#: put on each queue by :meth:`CubePipeline.close` to wake the stage waiting on it
_WAKE = object()


def _cancel(item: _Item) -> None:
    """Drop a cube: its future is cancelled (nothing of it was written), its reader (if made) stopped."""
    item.image = None
    reader, item.reader = item.reader, None
    if reader is not None:
        reader.close()
    item.future.cancel()


# ---------------------------------------------------------------------------------------------- Dask
#: this worker process's pipelines by job (a cluster may run a few jobs at once); the oldest is closed
#: when a new one would make more than :data:`WORKER_PIPELINES`
_WORKER_PIPES: dict[str, CubePipeline] = {}
WORKER_PIPELINES = 4
_WORKER_LOCK = threading.Lock()


def run_on_worker(path: str, steps: list[dict], out: str, dataset: str | None, device: str,
                  memory: float | None, folder: str | None = None, truth: str | None = None,
                  band_axis: int | None = None) -> dict:
    """A Dask task: cube ``path`` through this worker process's pipeline for its job (made on the job's
    first task, kept for the next ones); returns its summary row. Concurrent tasks of one worker (its
    threads) fill the pipeline's stages."""
    import json

    key = json.dumps([steps, out, dataset, device, memory, band_axis], sort_keys=True, default=str)
    with _WORKER_LOCK:
        pipe = _WORKER_PIPES.pop(key, None) or CubePipeline(steps, out, dataset, device, memory,
                                                             band_axis=band_axis)
        _WORKER_PIPES[key] = pipe  # the most recent last
        while len(_WORKER_PIPES) > WORKER_PIPELINES:
            _WORKER_PIPES.pop(next(iter(_WORKER_PIPES))).close(wait=False)
    return pipe.submit(path, folder, truth).result()
