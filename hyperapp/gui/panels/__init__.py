"""Analysis panels: one module each, all built on :class:`AnalysisPanel`.

A panel is a dock with a method list, the method's form (from the registry), the spectra selection and
Run/Cancel with progress, plus a second dock with its plots (:attr:`AnalysisPanel.plots`: a line saying
"Run <tool> to see its plots here" until the tool has a result, then the plot tabs :attr:`AnalysisPanel.tabs`). It computes nothing itself: Run calls
:func:`hyperapp.analyse.run.run_analysis` in a worker thread, the same path as ``hyperapp --headless
analyse``. The main window registers each panel with one line (:data:`PANELS`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QLabel,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from hyperapp.analyse.cost import ASK_ABOVE
from hyperapp.core.cube import units_text
from hyperapp.core.errors import HyperappError
from hyperapp.gui.param_form import IntBox, ParamForm
from hyperapp.gui.run_controls import method_row, set_busy, show_progress, tool_page
from hyperapp.gui.worker import Worker, start, while_shown
from hyperapp.models.registry import ANALYSES
from hyperapp.request import AnalyseRequest

#: (label, Selection kind, ROI class) of the spectra a panel can analyse
SOURCES = (
    ("Random sample of pixels", "sample", 1),
    ("Whole image", "image", 1),
    ("Target ROI", "roi", 1),
    ("Background ROI", "roi", 2),
    ("All ROIs", "rois", 1),
    ("Detected objects (current result)", "objects", 1),
)


class AnalysisPanel(QWidget):
    """Base of the analysis panels. Subclasses set :attr:`methods` and :attr:`title`, and implement
    :meth:`build_plots` and :meth:`show_result`."""

    methods: tuple[str, ...] = ()
    title = "Analysis"
    #: method -> parameter values sized for a CPU (the registry's defaults are sized for a GPU)
    cpu_defaults: dict[str, dict] = {}
    #: pixels a random sample draws by default
    sample_default = 20000
    #: the same on a CPU, where it is smaller (None: as on the GPU)
    cpu_sample: int | None = None
    finished = Signal(object)  # the AnalysisResult, or None when cancelled or failed
    plots_shown = Signal()  # a result was drawn: the window raises the plots' dock

    def __init__(self, host, parent=None):
        super().__init__(parent)
        self.host = host
        self.worker: Worker | None = None
        self.result = None
        body = QWidget()
        lay = QVBoxLayout(body)
        top = QFormLayout()
        self.method = QComboBox()
        for name in self.methods:
            self.method.addItem(ANALYSES[name].title, name)
        method_row(top, self.method)
        self.source = QComboBox()
        for label, _, _ in SOURCES:
            self.source.addItem(label)
        self.source.setToolTip("Which spectra the method is fitted on; where it can, it then labels the whole image.")
        top.addRow("Spectra", self.source)
        self.sample = IntBox()  # says what it refused, under the form (watched below)
        self.sample.setRange(10, 10_000_000)
        self.sample.setValue(self.sample_default)
        self.sample.setSingleStep(1000)
        self.sample.setToolTip("Pixels drawn at random (seeded) for a random sample; marked ROI pixels are added.")
        top.addRow("Sample size (pixels)", self.sample)
        lay.addLayout(top)
        self.form = ParamForm()  # before the extra controls, which may follow its edits; laid out below them
        self.form.watch(self.sample, "Sample size")  # (its range joins its tooltip)
        self.build_controls(lay)
        lay.addWidget(self.form)
        self.cost_line(lay)  # every method's run in seconds, under its options
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("font-style: italic;")  # in the text's colour: a pale grey was hard to read
        lay.addWidget(self.note)
        lay.addStretch(1)
        tool_page(self, body)
        # the plots live in their own dock (the window puts it beside the spectrum, where plots get
        # the width they need); the controls stay beside the detector
        self.tabs = QTabWidget()
        self.tabs.setMinimumHeight(220)
        # beside the tab names, while the plots are of a run made with other options than the form's now
        # (the options changed since, or a run with new ones was cancelled or failed)
        self.stale = QLabel("")
        self.stale.setStyleSheet("color: #e0a000; font-style: italic; padding-right: 6px;")
        self.tabs.setCornerWidget(self.stale, Qt.Corner.TopRightCorner)
        self._shown_options = None  # the options of the run the plots show
        # the plots are built when first needed (a result to draw, or anything reading them), not here:
        # six tools' 29 pyqtgraph plots took 0.6 s of the window's start and again of every cube opened
        self._plots_built = False
        # until the tool has a result (and again after the cube changes), one line instead of empty plots
        self.placeholder = QLabel(f"Run {self.title} to see its plots here.")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.plots = QStackedWidget()
        self.plots.addWidget(self.placeholder)
        self.plots.addWidget(self.tabs)
        self.relabel_worker: Worker | None = None  # a new cut or another subset labelling the image
        # the sample size counts only for a random sample: greyed otherwise, saying why
        self.source.currentIndexChanged.connect(self._sample_in_use)
        self.method.currentIndexChanged.connect(self._rebuild)
        self.form.changed.connect(self._cpu_note)
        self.sample.valueChanged.connect(self._cpu_note)
        for signal in (self.form.changed, self.sample.valueChanged, self.source.currentIndexChanged,
                       self.method.currentIndexChanged):
            signal.connect(self._mark_stale)
        self.run_button.clicked.connect(lambda: self.run())
        self.cancel_button.clicked.connect(self.cancel)
        self._rebuild()

    # ------------------------------------------------------------------ for subclasses
    def build_controls(self, layout: QVBoxLayout) -> None:
        """Extra controls above the method's form (none here)."""

    def cost_line(self, layout: QVBoxLayout) -> None:
        """A line (:attr:`cost`) saying what a run will cost, in seconds on this machine
        (:func:`hyperapp.analyse.cost.estimate`), again whenever the spectra, their number, the options or
        the method change. The first estimate of a method times two small fits, in a worker thread, while
        the tool is shown."""
        self.cost = QLabel("")
        self.cost.setWordWrap(True)
        self.cost.setToolTip("Estimated from two small fits of the method timed on this machine (once per "
                             "session), scaled by how its work grows with the spectra, bands and options. "
                             f"A run estimated above {ASK_ABOVE:.0f} s asks before it starts.")
        layout.addWidget(self.cost)
        self.calibrating: Worker | None = None
        self.sample.valueChanged.connect(self._estimate)
        self.source.currentIndexChanged.connect(self._estimate)
        self.form.changed.connect(self._estimate)

    def cost_words(self, n: int, v: dict) -> str:
        """What the run does, in words, before its time (a panel says its k, starts, iterations here)."""
        return f"{n:,} spectra"

    def cost_spectra(self) -> int | None:
        """Spectra a run fits on, for its cost: :meth:`spectra_count`, or the marked pixels of the ROIs
        chosen, or the current result's object pixels; None where not known before the run."""
        n = self.spectra_count()
        s = self.host.session
        if n is not None or s is None:
            return n
        sel = self.selection()
        if sel.kind in ("roi", "rois"):
            lab = s.roi.labels
            n = int((lab == sel.roi_class).sum() if sel.kind == "roi" else (lab > 0).sum())
        elif sel.kind == "objects":
            run = self.host.current_run() if hasattr(self.host, "current_run") else None
            n = None if run is None else int(run.result.remask(run.threshold).sum())
        return n or None

    def estimate(self, calibrate: bool = True):
        """The run's :class:`~hyperapp.analyse.cost.Estimate` as the form stands, or None where the spectra
        are not known yet or the options do not parse (``calibrate=False``: None too where this machine's
        speed for the method is not measured yet)."""
        from hyperapp.analyse import cost
        from hyperapp.core.backend import get_backend

        s = self.host.session
        n = self.cost_spectra()
        if s is None or n is None:
            return None
        method, backend = self.method_name(), get_backend(self.host.detector.device_name())
        try:
            params = ANALYSES[method].check_params(self.params())
            if not calibrate and not cost.is_calibrated(method, params, s.cube.bands, backend):
                return None
            return cost.estimate(method, params, n, s.cube.bands, backend, s.cube.rows * s.cube.cols)
        except HyperappError:
            return None

    def _estimate(self) -> None:
        """Write :attr:`cost`: what the run does and its time, or what is still being measured."""
        from hyperapp.analyse import cost
        from hyperapp.core.backend import get_backend

        if not hasattr(self, "cost"):
            return
        s = self.host.session
        n = self.cost_spectra()
        if s is None or n is None:
            kind = self.selection().kind
            self.cost.setText("Cost: known once pixels are marked (the ROIs it fits on)." if kind in ("roi", "rois")
                              else "Cost: known once there are detected objects (run a detector)."
                              if kind == "objects" else "Cost: known once a cube is open.")
            return
        try:
            params = ANALYSES[self.method_name()].check_params(self.params())
            what = self.cost_words(n, {**{p.name: p.default for p in ANALYSES[self.method_name()].params},
                                       **params})
        except HyperappError as exc:
            self.cost.setText(f"Cost: {exc}")
            return
        backend = get_backend(self.host.detector.device_name())
        where = "GPU" if backend.is_gpu else "CPU"
        if cost.is_calibrated(self.method_name(), params, s.cube.bands, backend):
            est = self.estimate(calibrate=False)
            took = f"{est.words()} on the {where}" if est is not None else "unknown"
            self.cost.setText(f"Cost: {what}; estimated time {took}.")
        elif self.isVisible():
            self._calibrate(self.method_name(), params, s.cube.bands, backend)
            self.cost.setText(f"Cost: {what}; estimating its time (timing a small fit on the {where}).")
        else:
            self.cost.setText(f"Cost: {what}; its time is estimated when this tool is shown.")

    def _calibrate(self, method: str, params: dict, bands: int, backend) -> None:
        """Time the method's small fits in a worker thread, then write the cost line again."""
        from hyperapp.analyse import cost

        if self.calibrating is not None:
            return

        def job(progress):
            cost.calibrate(method, params, bands, backend)

        w = Worker(job)
        w.signals.error.connect(lambda m: self.cost.setText(f"Cost: its time could not be estimated ({m})."))
        w.signals.finished.connect(self._calibrated)
        self.calibrating = w
        start(w)

    def _calibrated(self) -> None:
        self.calibrating = None
        self._estimate()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if hasattr(self, "cost"):
            self._estimate()

    def ask_long_run(self, est) -> None:
        """Ask before a run estimated above :data:`~hyperapp.analyse.cost.ASK_ABOVE` seconds: a dialog
        (not modal: the window stays usable) whose Run starts it (:attr:`confirm_box`)."""
        from PySide6.QtWidgets import QMessageBox

        if getattr(self, "confirm_box", None) is not None:
            self.confirm_box.close()
        box = QMessageBox(QMessageBox.Icon.Question, "hyperapp",
                          f"{ANALYSES[self.method_name()].title} is estimated to take {est.words()} on this "
                          "machine. Run it?", QMessageBox.StandardButton.Cancel, self)
        run = box.addButton("Run", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setInformativeText("Fewer spectra, a smaller k range or fewer iterations make it shorter.")
        box.setModal(False)

        def answered(button):
            self.confirm_box = None
            if button is run:
                self.run(confirmed=True)

        box.buttonClicked.connect(answered)
        box.show()
        self.confirm_box = box

    def build_plots(self, tabs: QTabWidget) -> None:
        raise NotImplementedError

    def ensure_plots(self) -> None:
        """Build the plot tabs (:meth:`build_plots`) unless they are built."""
        if not self.__dict__.get("_plots_built", True):
            self._plots_built = True
            before = set(self.__dict__)
            self.build_plots(self.tabs)
            self._plot_names = set(self.__dict__) - before  # what clear_plots forgets with the tabs

    def __getattr__(self, name: str):
        # only for a name not found: one of the plots' attributes, before they are built
        if name.startswith("__") or self.__dict__.get("_plots_built", True):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.ensure_plots()
        return getattr(self, name)

    def show_result(self, result) -> None:
        raise NotImplementedError

    def after_fit(self, result, image):
        """Extra maps a panel needs from the fitted model, computed in the worker thread (none here)."""
        return None

    # ------------------------------------------------------------------ running
    def method_name(self) -> str:
        return self.method.currentData()

    def set_method(self, name: str) -> None:
        self.method.setCurrentIndex(self.method.findData(name))

    def set_source(self, kind: str, roi_class: int = 1) -> None:
        for i, (_, k, c) in enumerate(SOURCES):
            if k == kind and c == roi_class:
                self.source.setCurrentIndex(i)
                return

    def _rebuild(self) -> None:
        m = ANALYSES[self.method_name()]
        self.form.set_params(m.params)
        if m.needs_classes:  # a classifier trains on the marked classes
            self.set_source("rois")
        #: the options sized down for the CPU: {name: (title, value, GPU default)}, "sample" for the sample
        self._cpu_set: dict = {}
        cpu = self.cpu_defaults.get(m.name, {})
        if (cpu or self.cpu_sample) and self.on_cpu():
            self.form.set_values(cpu)
            self._cpu_set = {p.name: (p.title, cpu[p.name], p.default) for p in m.params if p.name in cpu}
            if self.cpu_sample:
                self.sample.setValue(self.cpu_sample)
                self._cpu_set["sample"] = ("Sample size", self.cpu_sample, self.sample_default)
        self._cpu_note()
        if hasattr(self, "cost"):  # the new method's cost (the base builds it after the first rebuild)
            self._estimate()

    def _cpu_note(self) -> None:
        """Say which options were sized down for the CPU, and only while they still hold that value: a
        note that went on saying "Subsets explored 500" after the person set 300 misled."""
        if not hasattr(self, "_cpu_set"):
            return  # (the sample box's signal, before the first rebuild)
        now = dict(self.form.values(), sample=self.sample.value())
        said = [f"{title} {v:,} (GPU default {d:,})" for name, (title, v, d) in sorted(
            self._cpu_set.items(), key=lambda kv: kv[0] != "sample") if now.get(name) == v]
        self.note.setText(f"Sized for the CPU: {', '.join(said)}." if said else "")

    def spectra_count(self) -> int | None:
        """How many spectra the chosen selection fits on (a random sample takes every marked pixel too);
        None where that is known only at run time (the marked classes, detected objects)."""
        s = self.host.session
        sel = self.selection()
        n = {"sample": self.sample.value(), "image": (s.cube.rows * s.cube.cols) if s else None}.get(sel.kind)
        if s is not None and sel.kind == "sample":
            # the run's own draw (seeded) and the marked pixels it adds, counted: an estimate of their
            # overlap said 5,391 where the run took 5,375 (a first-time walk)
            labels = s.roi.labels
            n = int(sel.indices((s.cube.rows, s.cube.cols), labels if labels.any() else None).size)
        return n

    def params(self) -> dict:
        """The form's options as the service layer takes them (a panel whose form shows a value on
        another scale converts it back here)."""
        return self.form.values()

    def on_cpu(self) -> bool:
        """Whether the run will use the CPU (the device list says CPU, or auto finds no GPU)."""
        from hyperapp.core.backend import gpu_available

        dev = self.host.detector.device_name() if getattr(self.host, "detector", None) else "auto"
        return dev == "cpu" or (dev == "auto" and not gpu_available())

    def selection(self):
        from hyperapp.analyse.run import Selection

        _, kind, cls = SOURCES[self.source.currentIndex()]
        return Selection(kind, self.sample.value(), 0, cls)

    def _k_above_spectra(self, params: dict) -> str:
        """The run's refusal where its largest k exceeds the spectra it will fit, as far as they are known
        before the run (:meth:`cost_spectra`), else "" (:func:`~hyperapp.analyse.cost.k_beyond_spectra`)."""
        from hyperapp.analyse.cost import k_beyond_spectra

        n = self.cost_spectra()
        return "" if n is None else k_beyond_spectra(params, n)

    def run(self, confirmed: bool = False):
        """Fit the chosen method in a worker thread; returns the worker (None when nothing to run, or
        while a run estimated above a minute asks first: :meth:`ask_long_run`; ``confirmed`` skips
        that)."""
        from hyperapp.analyse.run import run_analysis

        s = self.host.session
        if s is None:
            self.host.show_error("open a cube first")
            return None
        if self.worker is not None:
            if getattr(self.worker, "session", None) is not s:  # the last cube's run, cancelled, still stopping
                self.status.setText("the run on the last cube is still stopping: Run again in a moment")
            return self.worker
        try:  # the options' check the CLI and a job make, before any work: a dialog, not a failed run
            method, sel = self.method_name(), self.selection()
            params = ANALYSES[method].check_params(self.params())
        except HyperappError as exc:
            self.host.show_error(str(exc))
            return None
        too_many = self._k_above_spectra(params)
        if too_many:  # refused now, not asked about: the run would refuse it after the wait
            self.host.show_error(too_many)
            return None
        if not confirmed and hasattr(self, "cost"):
            from hyperapp.analyse.cost import ASK_ABOVE

            est = self.estimate()  # (times the method's small fits first, where this session has not)
            self._estimate()
            # (its longest: every iteration allowed; this machine's runs were up to 3x its "about")
            if est is not None and est.longest > ASK_ABOVE:
                self.ask_long_run(est)
                return None
        device = self.host.detector.device_name()
        # the ROIs and objects are the window's, in memory: the request names no file
        req = AnalyseRequest(method, params=params, device=device, select=sel.kind, sample=sel.n, seed=sel.seed,
                             roi_class=sel.roi_class)
        roi = s.roi.labels.astype("int32") if s.roi.labels.any() else None
        names, colours = s.roi.class_names(), s.roi.class_colours()
        objects = None
        if sel.kind == "objects":
            run = self.host.current_run()
            objects = None if run is None else run.result.remask(run.threshold)

        def job(progress):
            image = s.pixels_on(device, progress.sub(0.0, 0.3))
            result = run_analysis(s.cube, req, roi=roi, objects=objects, image=image, class_names=names,
                                  class_colours=colours, progress=progress.sub(0.3, 0.95))
            result.extra = self.after_fit(result, image)  # still in the worker thread
            return result

        w = Worker(job)
        w.session = s  # the cube it runs on (run says when it is another's, still stopping)
        w.signals.progress.connect(while_shown(w, self.host, self._progress))
        w.signals.result.connect(while_shown(w, self.host, self._done))
        w.signals.error.connect(while_shown(w, self.host, self._failed))
        w.signals.cancelled.connect(while_shown(w, self.host, self._cancelled))
        w.signals.finished.connect(self._finished)
        set_busy(self, True)
        self._outcome = None
        self._asked = self.options()
        self._running = ANALYSES[method].title  # what the status line names when the run ends
        self.worker = w
        start(w)
        return w

    def relabel(self, predictor, doing: str, done: str, shown=None):
        """Label the image again with ``predictor`` (anything with the fitted model's ``predict``: a new
        cut of the tree, another subset of a ranking) in a worker, with progress; the map follows when it
        is done (``shown()`` called first), the status line saying ``doing`` then ``done``. One at a time:
        returns the worker, or None while another relabels or without a result; :meth:`relabel_finished`
        is called after each."""
        from hyperapp.analyse.run import label_image
        from hyperapp.core.backend import get_backend

        if self.result is None or self.relabel_worker is not None or self.host.session is None:
            return None
        s = self.host.session
        device = self.host.detector.device_name()

        def job(progress):
            image = s.pixels_on(device, progress.sub(0.0, 0.3))
            return label_image(predictor, s.cube, get_backend(device), image, progress.sub(0.3, 1.0))

        result = self.result
        w = Worker(job)
        w.session = s
        w.signals.progress.connect(while_shown(w, self.host, self._progress))

        def relabelled(labels):
            if self.result is result:  # not a result that came after it
                result.labels = labels
                if shown is not None:
                    shown()
                self.show_labels(result)
                self.status.setText(done)

        w.signals.result.connect(relabelled)
        w.signals.error.connect(while_shown(w, self.host, self.host.show_error))
        w.signals.finished.connect(self._relabel_done)
        self.relabel_worker = w
        self.status.setText(doing)
        start(w)
        return w

    def _relabel_done(self) -> None:
        self.relabel_worker = None
        self.progress.setValue(0)
        self.relabel_finished()

    def relabel_finished(self) -> None:
        """After a relabelling (none here; a panel may start the next one it was asked for meanwhile)."""

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.status.setText("cancelling…")

    def _progress(self, fraction: float, message: str) -> None:
        show_progress(self, fraction, message)

    def _sample_in_use(self, *_) -> None:
        self.sample.setEnabled(SOURCES[self.source.currentIndex()][1] == "sample")

    def options(self) -> tuple:
        """What a run is made of, as the form holds it now (to tell whether the plots are of these)."""
        return self.method_name(), self.form.values(), self.source.currentIndex(), self.sample.value()

    def _mark_stale(self, *_) -> None:
        """Say, beside the plots' tabs, when they are of a run made with other options than the form's."""
        old = self.result is not None and self._shown_options is not None and self._shown_options != self.options()
        self.stale.setText("the plots are of the last run; its options differ from the form's: Run to update"
                           if old else "")
        self.stale.setToolTip("The plots and the map show the last finished run. The options in the form have "
                              "changed since, or a run with them was cancelled or failed." if old else "")

    def _done(self, result) -> None:
        self.result = result
        self.form.clear_refusal()  # the run took the kept values: a refusal said before is history
        self._shown_options = self._asked
        rep = result.report
        self.status.setText(f"{ANALYSES[result.method].title} finished: {rep['selection']['n_spectra']} spectra in "
                            f"{rep['seconds']['total']:.2f} s on {rep['device']}")
        self.ensure_plots()
        self.plots.setCurrentWidget(self.tabs)
        self.show_result(result)
        if result.labels is not None:
            self.show_labels(result)
        elif getattr(self.host, "shown", None) == self.title:  # this tool's last map is not this result's
            self.host.show_detection(f"{ANALYSES[result.method].title} gives no map of pixels (its result is in "
                                     "the plots below)")
        self.plots_shown.emit()
        self._outcome = result

    def show_labels(self, result) -> None:
        """Draw the result's label map over the image, in the classes' colours."""
        from hyperapp.analyse.run import class_table

        values, names, colours = class_table(result)
        self.host.show_labels(result.labels, self.title, values, colours, names, self.legend_tip(result),
                              heading=self.map_heading(result))

    def map_heading(self, result) -> str:
        """What the map's legend and the status line call it."""
        return ANALYSES[result.method].title

    def legend_tip(self, result) -> str:
        """What the colours of the result's map are (the legend's tooltip)."""
        return (f"{ANALYSES[result.method].title}: each colour is one of its classes; the number is the "
                "pixels of the image in it")

    def _failed(self, message: str) -> None:
        self.status.setText(f"{self._running} failed: "
                            f"{message.splitlines()[0] if message else ''}")
        self.host.show_error(message)

    def _cancelled(self) -> None:
        self.status.setText(f"{self._running} cancelled" + ("; the plots still show the last finished run"
                                                          if self.result is not None else ""))

    def _finished(self) -> None:
        # ``finished`` goes out only once the worker is gone, so a listener may start the next run
        self.worker = None
        self._mark_stale()
        set_busy(self, False)
        self.finished.emit(self._outcome)

    def reset(self) -> None:
        """Forget the last result (a new cube or project was opened): the plots are built anew, empty, so
        nothing of the old cube's run stays on them."""
        self.cancel()
        self.result = None
        self._shown_options = None
        self._mark_stale()
        self.status.setText("")
        self.progress.setValue(0)
        self.clear_plots()
        self.plots.setCurrentWidget(self.placeholder)
        if hasattr(self, "cost") and self.host.session is not None:  # the sample takes the marked pixels too
            self.host.session.roi.listeners.append(self._estimate)
            self._estimate()

    def has_plots(self) -> bool:
        """Whether the plots dock shows this tool's plots (a result), not the "Run ..." line."""
        return self.plots.currentWidget() is self.tabs

    def clear_plots(self) -> None:
        """Drop every plot tab: fresh, empty ones are built (:meth:`build_plots` again) when next needed."""
        if not self._plots_built:
            return
        while self.tabs.count():
            w = self.tabs.widget(0)
            self.tabs.removeTab(0)
            w.deleteLater()
        for name in self._plot_names:  # no attribute left on a deleted plot: the next read builds afresh
            self.__dict__.pop(name, None)
        self._plots_built = False


#: unit symbols for band names in tables and titles
def wavelength_axis(cube) -> tuple:
    """(x values, axis label) of a cube's bands: wavelengths with units, or band numbers."""
    import numpy as np

    if cube.wavelengths is not None and len(cube.wavelengths) == cube.bands:
        u = units_text(cube.wavelength_units)
        return np.asarray(cube.wavelengths, float), (f"wavelength ({u})" if u else "wavelength")
    return np.arange(cube.bands, dtype=float), "band"


def value_axis(cube) -> tuple[float, str]:
    """(divisor, axis label) of spectral values: reflectance where the header gives a reflectance scale
    factor (the Spectrum dock divides by it too, so every plot shows one scale), else what the product says
    its values are (``value_units``: "reflectance (0-1)", "radiance (uW/cm^2/SR/nm)"), else the stored values.
    The one label of values in the window: the Spectrum dock's axis, the status line and every panel's."""
    f = getattr(cube, "scale_factor", None)
    if f:
        return float(f), "reflectance"
    units = getattr(cube, "value_units", None)
    return (1.0, units) if units else (1.0, "value (as stored)")


def value_unit(cube) -> tuple[float, str]:
    """(divisor, unit) of spectral values as a label's parenthesis names them: "reflectance" where the
    header gives a reflectance scale factor or the product's ``value_units`` say reflectance (its "(0-1)" a
    range, not a unit), the product's other units ("radiance, uW/cm^2/SR/nm"), else "as stored"
    (:func:`value_axis`'s scale)."""
    import re

    scale, label = value_axis(cube)
    if label == "value (as stored)":
        return scale, "as stored"
    m = re.fullmatch(r"(.+?) \((.+)\)", label)
    if m is None:
        return scale, label
    word, inner = m.groups()
    return scale, word if re.fullmatch(r"[\d.\s-]+", inner) else f"{word}, {inner}"


def band_wavelength(cube, b: int) -> str:
    """Band ``b``'s wavelength as a label writes it ("650 nm"), or "" where the cube gives none."""
    if cube.wavelengths is None or not 0 <= b < len(cube.wavelengths):
        return ""
    u = units_text(cube.wavelength_units)
    w = float(cube.wavelengths[b])
    return f"{w:.4g} {u}" if u else f"{w:.4g}"


def band_name(cube, b: int) -> str:
    """Band ``b`` as people read it: its index and wavelength ("12 (650 nm)"), or the index alone."""
    w = band_wavelength(cube, b)
    return f"{b} ({w})" if w else str(b)


def side_legend(plot):
    """A legend beside the plot's view, never over its curves: curves plotted with ``name=`` join it."""
    import pyqtgraph as pg
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QSizePolicy

    pi = plot.getPlotItem()
    legend = pg.LegendItem(verSpacing=-4, labelTextSize="8pt")
    # beside the title, the view and the x axis (rows 1-3): a legend taller than the view alone would
    # push the x axis and its label out of the plot
    pi.layout.addItem(legend, 1, 3, 3, 1)
    legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)  # its rows, not the plot's height
    pi.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    pi.legend = legend
    return legend


def integer_ticks(plot, values, axis: str = "bottom", most: int = 16) -> None:
    """Ticks at whole numbers only (k, epochs, iterations): at most ``most`` of ``values``."""
    import numpy as np

    v = np.unique(np.asarray(values, float).round().astype(int))
    if v.size == 0:
        plot.getAxis(axis).setTicks(None)
        return
    step = max(1, int(np.ceil(v.size / most)))
    plot.getAxis(axis).setTicks([[(float(x), str(int(x))) for x in v[::step]]])
    if v.size == 1:
        plot.setXRange(v[0] - 1, v[0] + 1, padding=0) if axis == "bottom" else None


#: characters of one line of a vertical axis label that a low plot (the analysis dock at 1366 x 768, about
#: 150 pixels of axis) still shows whole
LABEL_LINE = 20


def tick_power(values) -> int:
    """The power of ten (a multiple of 3; 0 for values within 10^-3..10^3) to divide ``values`` by so
    their tick labels stay short."""
    import numpy as np

    v = np.asarray(values, float)
    finite = np.abs(v[np.isfinite(v)])
    top = float(finite.max()) if finite.size else 0.0
    p = int(np.floor(np.log10(top) / 3) * 3) if top > 0 else 0
    return 0 if abs(p) < 3 else p


def scaled(plot, values, label: str, axis: str = "left"):
    """``values`` divided by a power of ten (:func:`tick_power`), with the power in the axis label
    ("BIC (x 10^6)"), so the tick labels stay short and clear of the axis label. A label of two lines
    (``<br>``) gets the power in its second's parenthesis ("merge distance<br>(as stored, x 10^3)"), or
    on a third line where the second would grow past :data:`LABEL_LINE` characters ("Ward merge
    cost<br>(as stored x size)<br>(x 10^3)"): a low plot's vertical label cuts a longer line off."""
    import numpy as np

    p = tick_power(values)
    if p:
        head, br, tail = label.partition("<br>")
        if br and tail.endswith(")") and len(tail) + len(f", x 10^{p}") <= LABEL_LINE:
            label = f"{head}{br}{tail[:-1]}, x 10^{p})"
        elif br:
            label = f"{label}<br>(x 10^{p})"
        else:
            label = f"{label} (x 10^{p})"
    plot.setLabel(axis, label)
    return np.asarray(values, float) / 10.0 ** p


def plot_spectra(plot, cube, spectra, names: list[str], old: list) -> list:
    """Replace the curves ``old`` on ``plot`` with one per row of ``spectra`` (in the class palette),
    against the cube's wavelengths and on the Spectrum dock's value scale; returns the new curves."""
    import numpy as np
    import pyqtgraph as pg

    from hyperapp.io.writers import class_colour

    for it in old:
        plot.removeItem(it)
    legend = plot.getPlotItem().legend
    if legend is not None:
        legend.clear()
    x, label = wavelength_axis(cube)
    scale, ylabel = value_axis(cube)
    plot.setLabel("bottom", label)
    plot.setLabel("left", ylabel)
    # at most LEGEND_CURVES named: 200 components' legend ran 34 columns wide, off the plot's right edge
    curves = [plot.plot(x, np.asarray(spectra[j], float) / scale, pen=pg.mkPen(class_colour(j), width=2),
                        name=name if j < LEGEND_CURVES else None)
              for j, name in enumerate(names)]
    if legend is not None:  # many curves: the legend in columns of at most 7, so it stays as low as the plot
        named = min(len(names), LEGEND_CURVES)
        if len(names) > named:
            legend.addItem(pg.PlotDataItem(pen=None), f"and {len(names) - named} more (the map's legend)")
            named += 1
        legend.setColumnCount(max(1, -(-named // 7)))
    return curves


#: the most curves :func:`plot_spectra` names in its legend (the rest are drawn, and counted there): two
#: columns at most, so the curves keep most of the plot's width (four columns of 24 left 150 px of a
#: 1366-pixel screen's plot to 30 components' curves)
LEGEND_CURVES = 13


def plot_widget(x_label: str, y_label: str, title: str = ""):
    """A pyqtgraph plot readable in a dock: minimum size, grid, labelled axes with room for their labels."""
    import pyqtgraph as pg

    p = pg.PlotWidget(title=title)
    p.setMinimumSize(320, 180)
    p.showGrid(x=True, y=True, alpha=0.3)
    p.setLabel("bottom", x_label)
    p.setLabel("left", y_label)
    p.getAxis("bottom").enableAutoSIPrefix(False)
    p.getAxis("left").enableAutoSIPrefix(False)
    p.getAxis("left").setWidth(70)  # room for the tick values and the label beside them
    return p


class ImageFrame(QWidget):
    """The place of an image plot in a layout: it sizes the plot to its image's aspect and centres it, so
    the image fills the plot and the plot's axes span the image alone (a square image in a wide dock is
    a square plot, not a square in a wide plot with axes running far past the image)."""

    def __init__(self, plot, min_width: int, min_height: int):
        from PySide6.QtWidgets import QSizePolicy

        super().__init__()
        self.plot = plot
        plot.setParent(self)
        plot.setMinimumSize(0, 0)
        self.setMinimumSize(min_width, min_height)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.aspect: float | None = None  # the image's width / height

    def set_image_shape(self, rows: int, cols: int) -> None:
        self.aspect = cols / max(rows, 1)
        self.fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self.fit()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self.fit()

    def fit(self) -> None:
        """Lay the plot out at full size to measure what is not image (title, axes, colour bar), then
        shrink it to the image's aspect."""
        import numpy as np

        W, H = self.width(), self.height()
        self.plot.setGeometry(0, 0, W, H)
        if not self.aspect:
            return
        item = self.plot.getPlotItem()
        item.setGeometry(0, 0, W, H)  # laid out now, even while the plot is hidden (a tab behind)
        view = item.vb.geometry()
        ew, eh = W - view.width(), H - view.height()
        vw, vh = max(W - ew, 1.0), max(H - eh, 1.0)
        if vw / vh > self.aspect:
            vw = vh * self.aspect
        else:
            vh = vw / self.aspect
        # never narrower than the plot can be laid out (its title, its axes): then the view is wider
        w = max(int(round(vw + ew)), int(np.ceil(self.plot.getPlotItem().minimumWidth())))
        h = int(round(vh + eh))
        self.plot.setGeometry((W - w) // 2, (H - h) // 2, w, h)


def image_plot(title: str, x_label: str = "column", y_label: str = "row", min_width: int = 320,
               bar_label: str = ""):
    """A plot holding one image (a map of neurons, a posterior), with a colour bar, for a dock: the image
    keeps its aspect (one cell is square) and fills the plot; its axes count its cells (``x_label``,
    ``y_label``: image columns and rows, or neurons), row 0 at the top; the colour bar's label
    (``bar_label``, :func:`bar_label`) says what its values are. Lay out ``plot.frame`` (an
    :class:`ImageFrame`), not the plot: it sizes the plot to the image."""
    import pyqtgraph as pg

    p = pg.PlotWidget(title=title)
    p.setAspectLocked(True)
    p.invertY(True)
    p.setLabel("bottom", x_label)
    p.setLabel("left", y_label)
    for name in ("bottom", "left"):
        p.getAxis(name).enableAutoSIPrefix(False)
    p.getAxis("left").setWidth(42)
    p.setMenuEnabled(False)
    img = pg.ImageItem(axisOrder="row-major")
    p.addItem(img)
    bar = pg.ColorBarItem(colorMap=pg.colormap.get("viridis"), interactive=False, width=14)
    bar.setImageItem(img, insert_in=p.getPlotItem())
    bar.getAxis("right").enableAutoSIPrefix(False)
    set_bar_label(bar, bar_label)
    p.frame = ImageFrame(p, min_width, 160)
    return p, img, bar


def set_bar_label(bar, text: str) -> None:
    """Name what a colour bar's values are ("spectra", "reflectance"), beside its tick values: the unit
    lives on the bar, so the plot's title stays short enough for a narrow plot. A bar is short: break a
    long label in two lines with ``<br>``."""
    axis = bar.getAxis("right")
    axis.setLabel(text)
    axis.setWidth((76 if "<br>" in text else 62) if text else 45)


def fit_image(plot, image, cells: bool = False) -> None:
    """Frame ``plot`` on its image (after :func:`image_plot`'s image got new data), nothing around it.
    ``cells``: a small grid (a SOM's neurons), ticked at cells' centres with their whole numbers (at
    most 6 ticks an axis) rather than at the cells' edges."""
    h, w = image.shape[:2]
    plot.getPlotItem().vb.setRange(xRange=(0, w), yRange=(0, h), padding=0)
    plot.frame.set_image_shape(h, w)
    for name, n in (("bottom", w), ("left", h)):
        if cells:
            step = max(1, -(-n // 6))  # a map in a low dock is ~100 px tall: 10 labels would touch
            plot.getAxis(name).setTicks([[(i + 0.5, str(i)) for i in range(0, n, step)], []])
        else:
            plot.getAxis(name).setTicks(None)


def analysis_panels() -> tuple:
    """The panel classes the window registers, one per analysis module."""
    from hyperapp.gui.panels.bands_panel import BandsPanel
    from hyperapp.gui.panels.forest_panel import ForestPanel
    from hyperapp.gui.panels.gmm_panel import GMMPanel
    from hyperapp.gui.panels.hac_panel import HACPanel
    from hyperapp.gui.panels.kmeans_panel import KMeansPanel
    from hyperapp.gui.panels.som_panel import SOMPanel

    return (KMeansPanel, BandsPanel, SOMPanel, GMMPanel, ForestPanel, HACPanel)
