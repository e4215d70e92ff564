"""The main window: menus, the image view, spectrum, ROI tools, detector dock, results and compare.

Everything computed goes through :func:`hyperapp.detect.run.run_detection` and the model classes, the same
path as ``hyperapp --headless detect``; the window only displays and edits the :class:`Session`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from hyperapp.core.errors import HyperappError
from hyperapp.core.words import counted
from hyperapp.gui.detector_dock import DetectorDock
from hyperapp.gui.image_view import ClassLegend, ImageView, colourise, colourise_labels, score_levels, stretch
from hyperapp.gui.panels import analysis_panels
from hyperapp.gui.results_panel import ResultsPanel
from hyperapp.gui.spectrum_plot import SpectrumPlot
from hyperapp.gui.toolbox import ToolBox
from hyperapp.gui.worker import Worker, start, while_shown
from hyperapp.project.session import Run, Session
from hyperapp.request import DetectRequest

log = logging.getLogger("hyperapp.gui")
CUBE_FILTER = ("Cubes (*.hdr *.img *.dat *.raw *.bsq *.bil *.bip *.h5 *.hdf5 *.he5 *.nc *.mat *.tif *.tiff *.TIF "
               "*.xml *.XML *.zip);;All files (*)")
ROI_STATS_SAMPLE = 500
MASK_FILTERS = {"ENVI (*.hdr)": "envi", "GeoTIFF (*.tif)": "tiff", "PNG (*.png)": "png", "NumPy (*.npy)": "npy"}
TOOLS = (("inspect", "0", "Inspect / pan (clicks mark nothing)"), ("pixel", "1", "Mark pixels"),
         ("brush", "2", "Brush"), ("rectangle", "3", "Rectangle (two clicks)"),
         ("polygon", "4", "Polygon (double-click closes)"))
#: the toolbox's first tool
DETECT_TOOL = "Detect targets"


def as_list(value) -> list[str]:
    """A QSettings list read back: a later process gets a one-element list as a plain string."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def settings() -> QSettings:
    """QSettings (recent files, last parameters); ``HYPERAPP_SETTINGS`` points it at an ini file."""
    path = os.environ.get("HYPERAPP_SETTINGS")
    if path:
        return QSettings(path, QSettings.Format.IniFormat)
    return QSettings("hyperapp", "hyperapp")


#: the message of a truth mask chosen before any cube (the menu's and the call's)
NO_CUBE_FOR_TRUTH = "open a cube first: a truth mask marks the pixels of a cube"


def _run_summary(run: Run, threshold: float | None = None, auc: float | None = None) -> str:
    """The Tools dock's line for a detection run: its counts at its own threshold, time, device and (with a
    truth) AUC; where the threshold was moved since (``threshold``), it says so and where the counts at
    the new one are, instead of the run's counts, which the Results dock's then contradicted (a
    first-time walk read them as stale). ``auc``: the Results dock's, against a truth loaded after the run
    (whose report has none: a walk found the line without the AUC its ROC tab showed)."""
    rep = run.result.report
    if threshold is not None and float(threshold) != float(rep["threshold"]):
        counts = (f"threshold moved to {threshold:.4g} (the run's: {rep['threshold']:.4g}; its pixels and objects "
                  "there are in Results)")
    else:
        counts = (f"{counted(rep['detections'], 'pixel')}, {counted(rep['objects'], 'object')} at its threshold "
                  f"{rep['threshold']:.4g}")
    sig = rep.get("signatures") or {}
    names = sig.get("target_names") or []
    source = f" from the library's {', '.join(names)}" if names else ""  # which spectra it ran from
    msg = f"{run.name}{source} finished: {counts}, in {rep['seconds']['total']:.3f} s on {rep['device']}"
    if "evaluation" in rep:
        msg += f", AUC {rep['evaluation']['auc']:.4f}"
    elif auc is not None:
        msg += f", AUC {auc:.4f} against the truth loaded since"
    return msg


class MainWindow(QMainWindow):
    run_finished = Signal(object)  # the new Run, or None when cancelled or failed
    cube_opened = Signal(object)

    def __init__(self):
        super().__init__()
        self.setWindowTitle("hyperapp")
        self.resize(1400, 900)
        self.setAcceptDrops(True)
        self.session: Session | None = None
        self.worker: Worker | None = None
        self.last_error: str | None = None
        self.error_box: QMessageBox | None = None
        #: (run, truth, AUC): a run's AUC against a truth loaded after it, computed once for the Compare note
        self._auc_for: tuple | None = None
        self.tool = "inspect"
        self.roi_class = "target"
        self._poly: list[tuple[int, int]] = []
        self._rect_start: tuple[int, int] | None = None
        self.ffbp_model = None
        # central view + display controls
        central = QWidget()
        cl = QVBoxLayout(central)
        bar = QHBoxLayout()
        self.mode = QComboBox()
        self.mode.addItems(["RGB", "Band"])
        self.band = QSlider(Qt.Orientation.Horizontal)
        self.band_label = QLabel("")
        self.lo_pct, self.hi_pct = QSpinBox(), QSpinBox()
        for w, v in ((self.lo_pct, 2), (self.hi_pct, 98)):
            w.setRange(0, 100)
            w.setValue(v)
            w.setSuffix(" %")
        self.opacity = QSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0, 100)
        self.opacity.setValue(60)
        self.opacity_label = QLabel("60 %")
        # as wide as "100 %" at any value: the boxes beside it moved as it went from 0 to 100
        self.opacity_label.setFixedWidth(self.opacity_label.fontMetrics().horizontalAdvance("100 %") + 4)
        self.opacity.valueChanged.connect(lambda v: self.opacity_label.setText(f"{v} %"))
        self.band.setEnabled(False)  # a band to choose only in Band view (refresh_image)
        for w, tip in ((self.mode, "RGB: three bands near red, green and blue as a colour image; Band: one band in grey"),
                       (self.band, "The band shown in Band view (its number and wavelength beside it)"),
                       (self.lo_pct, "Contrast stretch: the darkest shown colour is this percentile of each band"),
                       (self.hi_pct, "Contrast stretch: the brightest shown colour is this percentile of each band"),
                       (self.opacity, "Opacity of the score or class overlay on the image (0 % hides it; the detection mask, the truth "
                        "outline and the marks stay)")):
            w.setToolTip(tip)
        for w in (QLabel("View"), self.mode, QLabel("band"), self.band, self.band_label, QLabel("stretch"),
                  self.lo_pct, self.hi_pct, QLabel("overlay opacity"), self.opacity, self.opacity_label):
            bar.addWidget(w)
        cl.addLayout(bar)
        # a run that succeeded took the kept values: the refusal said under the detector's form is history
        self.run_finished.connect(lambda run: run is not None and self.detector.param_form.clear_refusal())
        self.view = ImageView()
        self.legend = ClassLegend()  # under the image, as tall as its lines (it was a column beside it)
        cl.addWidget(self.view, 1)
        cl.addWidget(self.legend)
        self.view.show_hint("Open a cube: File > Open cube… (Ctrl+O), or drop a file here")
        #: what the image's overlay shows: "detection" (the chosen run) or an analysis's title
        self.shown = "detection"
        self.setCentralWidget(central)
        # docks: the toolbox on the right (one tool at a time, its Run strip always in view); the
        # spectrum, the detection results, the chosen analysis's plots and the comparison at the bottom
        self.spectrum = SpectrumPlot()
        self.detector = DetectorDock()
        self.results = ResultsPanel()
        self.compare_view = ImageView()
        # its image about as tall as the dock allows at 1366 x 768 (it was ~150 pixels): no key line (the
        # image's own says the same overlays), and a minimum the bottom docks' height holds anyway
        self.compare_view.drop_key_line()
        self.compare_view.setMinimumSize(320, 230)
        self.compare_pick = QComboBox()
        cw = QWidget()
        cwl = QVBoxLayout(cw)
        # the picker and its note on one row, in thin margins: the view gets the dock's height (at 1366 x 768
        # the image was about 150 pixels tall under a row each and the layout's margins)
        cwl.setContentsMargins(2, 2, 2, 2)
        cwl.setSpacing(2)
        pick_row = QHBoxLayout()
        pick_row.addWidget(self.compare_pick, 2)
        # what the view below shows (until a run is picked: what it is for); two lines always, so that a
        # change of text never resizes the view, which is linked to the main view's zoom
        self.compare_note = QLabel("")
        self.compare_note.setWordWrap(True)
        self.compare_note.setFixedHeight(2 * self.compare_note.fontMetrics().lineSpacing() + 4)
        pick_row.addWidget(self.compare_note, 3)
        cwl.addLayout(pick_row)
        cwl.addWidget(self.compare_view, 1)
        self._compare_placeholder()
        # zoomed and panned with the image: the image's range drives the view's, and the person's own zoom or
        # pan in the view drives the image's. Not pyqtgraph's two-way link: the two views' aspects differ,
        # and a resize of the linked view (a run, a layout) moved the person's zoom on the image
        self.view.vb.sigRangeChanged.connect(self._follow_view)
        self.compare_view.vb.sigRangeChangedManually.connect(self._lead_view)
        self.toolbox = ToolBox()
        self.toolbox.add_tool(DETECT_TOOL, self.detector, tip="Train a detector on the marked pixels and "
                              "score every pixel; the Results dock shows the scores, the threshold and the objects")
        self.tools_dock = self._dock("Tools", self.toolbox, Qt.DockWidgetArea.RightDockWidgetArea)
        self.detector_dock = self.tools_dock  # where a new right-hand dock is tabified
        bottom = Qt.DockWidgetArea.BottomDockWidgetArea
        # the toolbox runs the window's full height (its forms get it); the bottom docks sit under the image
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.setCorner(Qt.Corner.TopRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        spec_dock = self.spec_dock = self._dock("Spectrum", self.spectrum, bottom)
        self.results_dock = self._dock("Results", self.results, bottom)
        self.plots_dock = self._dock("Analysis plots", self.toolbox.plots, bottom)
        self.compare_dock = self._dock("Compare", cw, bottom)
        for d in (self.results_dock, self.plots_dock, self.compare_dock):
            self.tabifyDockWidget(spec_dock, d)
        # analysis panels: one registration each, a tool of the toolbox
        self.panels: dict[str, object] = {}
        for panel in analysis_panels():
            self._add_panel(panel)
        self.detector_dock.raise_()
        spec_dock.raise_()  # the spectrum, not the last panel's plots, in front at the bottom
        from hyperapp.gui.library_dock import install_library_dock
        self.library_dock = install_library_dock(self)  # spectral library + MTMF scatter (their own module)
        from hyperapp.gui.review_panel import install_review
        install_review(self)  # the Objects tab's review list: image, Spectrum dock, library (its own module)
        self._readable_tabs()
        self._build_menus()
        self._fit_docks()
        # signals
        self.view.pixel_hovered.connect(self._hover)
        self.view.pixel_clicked.connect(self._click)
        self.mode.currentIndexChanged.connect(self.refresh_image)
        self.band.valueChanged.connect(self.refresh_image)
        self.lo_pct.valueChanged.connect(self.refresh_image)
        self.hi_pct.valueChanged.connect(self.refresh_image)
        self.opacity.valueChanged.connect(self._redraw_result)
        self.opacity.valueChanged.connect(self._compare_overlay)
        self.detector.run_requested.connect(self.run_detector)
        self.detector.marking.tool_chosen.connect(self.set_tool)
        self.detector.marking.class_chosen.connect(self.set_roi_class)
        self.detector.cancel_requested.connect(self.cancel_run)
        self.results.threshold_changed.connect(self._threshold_moved)
        self.results.run_selected.connect(self._show_run)
        self.results.show_detection_requested.connect(self.show_detection)
        self.compare_pick.currentIndexChanged.connect(self._show_compare)
        self._timing_message = ""
        self.statusBar().messageChanged.connect(self._status_changed)
        # what the open cube is, on the status bar's right while the cursor's lines come and go on its left
        # (the window's title said only the file's name, and a screenshot of the window shows no title)
        self.cube_info = QLabel("")
        self.cube_info.setMinimumWidth(1)  # a long product name is cut (whole in the tooltip), the window not widened
        self.statusBar().addPermanentWidget(self.cube_info)
        self.detector.set_method("rbfn")  # the network the app is built around
        self.detector.set_params(self._saved_params(self.detector.method_name()))
        self.detector.method.currentIndexChanged.connect(
            lambda: self.detector.set_params(self._saved_params(self.detector.method_name())))
        self.detector.method.currentIndexChanged.connect(self._method_changed)
        from hyperapp.gui.gpu_warmup import start_gpu_warmup

        self.gpu_warmup = start_gpu_warmup(self)  # every kernel compiled in the background, once per installation

    def _readable_tabs(self) -> None:
        """Dock tab titles in full (scroll buttons when they do not fit) instead of "De…", "k…"."""
        from PySide6.QtWidgets import QTabBar

        for bar in self.findChildren(QTabBar):
            if bar.parent() is self:  # the main window's own dock tab bars, not a panel's tabs
                bar.setElideMode(Qt.TextElideMode.ElideNone)
                bar.setUsesScrollButtons(True)
                bar.setExpanding(False)

    def showEvent(self, event) -> None:  # noqa: N802  (Qt's name)
        super().showEvent(event)
        self._readable_tabs()  # the window makes its dock tab bars as it lays them out

    def _add_panel(self, cls) -> None:
        """Add an analysis panel as a tool: its form in the toolbox, its plots in the plots dock."""
        panel = cls(self)
        self.panels[panel.title] = panel
        self.toolbox.add_tool(panel.title, panel, panel.plots, tip=panel.__doc__.split("\n")[0] if panel.__doc__ else "")
        panel.plots_shown.connect(lambda t=panel.title: self._raise_plots(t))

    def _raise_plots(self, title: str) -> None:
        shown = self.toolbox.current()
        if title in self.panels and shown in self.panels and shown != title:
            return  # another analysis tool is on screen now: its form keeps its own plots under it
        self.toolbox.show_plots(title)
        self.plots_dock.raise_()

    def run_current_tool(self):
        """Run > Run the chosen tool (F5): the detector on the Detect page, the analysis on a panel's (the
        detector ran whatever tool was shown)."""
        panel = self.panels.get(self.toolbox.current())
        if panel is not None:
            return panel.run()
        if self.toolbox.current() == DETECT_TOOL:
            return self.run_detector()
        self.statusBar().showMessage(f"{self.toolbox.current()} has nothing to run: choose Detect targets or an "
                                     "analysis tool", 6000)
        return None

    def cancel_everything(self) -> None:
        """Run > Cancel (Esc): whatever runs, the detector's run and every analysis's (Esc cancelled only the
        detector's)."""
        self.cancel_run()
        for p in self.panels.values():
            p.cancel()

    def _fit_docks(self) -> None:
        """Dock sizes for the window's size: the toolbox a third of the width at most, the bottom docks
        about a third of the height, the image the rest."""
        w, h = max(self.width(), 800), max(self.height(), 600)
        self.resizeDocks([self.tools_dock], [int(min(max(0.28 * w, 380), 520))], Qt.Orientation.Horizontal)
        self.resizeDocks([self.spec_dock], [int(min(max(0.36 * h, 250), 440))], Qt.Orientation.Vertical)

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt's name)
        super().resizeEvent(event)
        self._fit_docks()
        # the cube's line never takes the cursor's room (row, col, lon, lat): cut, whole in its tooltip
        self.cube_info.setMaximumWidth(max(1, int(0.45 * self.width())))

    def _dock(self, title, widget, area):
        d = QDockWidget(title, self)
        d.setObjectName(title)
        d.setWidget(widget)
        self.addDockWidget(area, d)
        return d

    # ------------------------------------------------------------------ menus
    def _action(self, menu, text, slot, shortcut=None, checkable=False):
        a = QAction(text, self)
        if shortcut:
            a.setShortcut(QKeySequence(shortcut))
        a.setCheckable(checkable)
        if slot is not None:
            a.triggered.connect(slot)
        menu.addAction(a)
        return a

    def _build_menus(self) -> None:
        mb = self.menuBar()
        f = mb.addMenu("&File")
        self._action(f, "&Open cube…", self._open_dialog, QKeySequence.StandardKey.Open)
        self.recent_menu = f.addMenu("Open &recent")
        self._action(f, "Load &truth mask…", self._truth_dialog, "Ctrl+T")
        self._action(f, "Load FFBP &model…", self._model_dialog)
        self._action(f, "Train FFBP on another &scene…", self._train_model_dialog)
        self.keep_bad_bands = self._action(f, "&Keep bad bands", None, checkable=True)
        self.keep_bad_bands.setToolTip("Keep the bands the header marks bad (bbl), as --all-bands does")
        self.keep_bad_bands.toggled.connect(self._keep_bad_bands_changed)
        # (a lambda: triggered's `checked` would land in orthorectify's `then`)
        self.ortho_action = self._action(f, "Ortho&rectify swath (GLT)", lambda: self.orthorectify())
        self.ortho_action.setToolTip("Show, mark and detect on the map grid of the swath's geometry lookup table "
                                     "(EMIT), as detect --ortho writes its outputs")
        self.ortho_action.setEnabled(False)
        f.addSeparator()
        self._action(f, "Open &project…", self._open_project_dialog, "Ctrl+Shift+O")
        self._action(f, "&Save project…", self._save_project_dialog, QKeySequence.StandardKey.Save)
        self._action(f, "Save as &batch job…", self._save_job_dialog)
        self._action(f, "Open results for re&view…", lambda: self._review("open_results_dialog"))
        f.addSeparator()
        ex = f.addMenu("&Export")
        self._action(ex, "Detection &mask…", lambda: self._export_dialog("mask"), "Ctrl+E")
        self._action(ex, "&Score map…", lambda: self._export_dialog("scores"))
        self._action(ex, "&Objects (CSV, GeoJSON)…", lambda: self._export_dialog("objects"))
        self._action(ex, "&Boxes (CSV, GeoJSON)…", lambda: self._export_dialog("boxes"))
        self._action(ex, "Screens&hot…", lambda: self._export_dialog("screenshot"))
        self._action(ex, "&ROIs…", lambda: self._export_dialog("rois"))
        self._action(ex, "&Confirmed objects (review)…", lambda: self._review("export_dialog"))
        self._action(f, "&Import ROIs…", self._import_rois_dialog)
        f.addSeparator()
        self._action(f, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        e = mb.addMenu("&Edit")
        self._action(e, "&Undo", lambda: self.undo_marks(), QKeySequence.StandardKey.Undo)
        self._action(e, "&Redo", lambda: self.undo_marks(redo=True), QKeySequence.StandardKey.Redo)
        self._action(e, "&Clear ROIs", lambda: self.session and self.session.roi.clear(), "Ctrl+Shift+Del")
        self._action(e, "&Pin spectrum under cursor", self.pin_spectrum, "P")
        self._action(e, "Clear pinned spectra", self.spectrum.clear_pins)
        t = mb.addMenu("&Tools")
        group = QActionGroup(self)
        self.tool_actions = {}
        for name, key, text in TOOLS:
            a = self._action(t, text, lambda _=False, n=name: self.set_tool(n), key, checkable=True)
            group.addAction(a)
            a.setChecked(name == self.tool)
            self.tool_actions[name] = a
        t.addSeparator()
        cg = QActionGroup(self)
        cg.setExclusionPolicy(QActionGroup.ExclusionPolicy.ExclusiveOptional)  # none ticked while inspecting
        self.class_actions = {}
        for name, key in (("target", "T"), ("background", "B")):
            a = self._action(t, f"Mark {name}", lambda _=False, n=name: self.set_roi_class(n), key, checkable=True)
            cg.addAction(a)
            self.class_actions[name] = a
        self._show_marking()
        v = mb.addMenu("&View")
        for dock in self.findChildren(QDockWidget):
            v.addAction(dock.toggleViewAction())
        v.addSeparator()
        self._action(v, "&Fit image to window", self.view.fit, "Ctrl+0")
        r = mb.addMenu("&Run")
        self._action(r, "&Run the chosen tool", self.run_current_tool, "F5")
        # the window's, not the Train & Run button's: a button's shortcut works only while it is shown, and
        # Ctrl+R did nothing with an analysis tool or the library in front
        self._action(r, "Run the &detector", self.run_detector, "Ctrl+R")
        self._action(r, "&Cancel", self.cancel_everything, "Esc")
        self._update_recent()

    # ------------------------------------------------------------------ errors
    def show_error(self, message: str) -> None:
        """Log the error and show it in a (non-blocking) dialog; the window stays usable."""
        log.error(message)
        self.last_error = message
        if self.error_box is not None:  # one box at a time: the last error replaces the one before
            self.error_box.close()
        box = QMessageBox(QMessageBox.Icon.Warning, "hyperapp", message, QMessageBox.StandardButton.Ok, self)
        box.setInformativeText("Nothing was changed.")
        box.setModal(False)
        box.show()
        self.error_box = box

    def _dismiss_error(self) -> None:
        """Close the last error's box once what it was about has moved on (a new cube, a run that worked):
        a walk found a missing folder's warning still up over the next cube."""
        if self.error_box is not None:
            self.error_box.close()
            self.error_box = None

    # ------------------------------------------------------------------ cube
    def open_cube(self, path, dataset: str | None = None, all_bands: bool | None = None) -> bool:
        keep = self.keep_bad_bands.isChecked() if all_bands is None else bool(all_bands)
        try:
            session = Session.open(path, dataset, keep)
        except HyperappError as exc:
            self.show_error(str(exc))
            return False
        self.keep_bad_bands.setChecked(keep)
        self.set_session(session)
        self._remember(str(path))
        return True

    def _keep_bad_bands_changed(self, keep: bool) -> None:
        """File > Keep bad bands: reopen the cube with or without the header's bad bands (as the CLI's
        --all-bands), keeping the marked ROIs."""
        s = self.session
        if s is None or s.all_bands == keep or not s.cube.path:
            return
        labels, classes = s.roi.labels.copy(), list(s.roi.classes)

        def keep_marks() -> None:
            self.session.roi.classes = classes
            self.session.roi.set_labels(labels)

        if self.open_cube(s.base_cube.path, s.dataset, keep) and (not s.ortho or self.orthorectify(keep_marks)):
            if not s.ortho:
                keep_marks()
        else:
            self.keep_bad_bands.blockSignals(True)
            self.keep_bad_bands.setChecked(s.all_bands)
            self.keep_bad_bands.blockSignals(False)

    def orthorectify(self, then=None) -> bool:
        """File > Orthorectify swath: the open swath (with a GLT) replaced by its orthorectified cube
        (:func:`hyperapp.io.georef.ortho_cube`, in a worker thread with progress and Cancel: a real swath
        is gigabytes); marks and runs start afresh, on the grid's pixels. ``then`` runs once the grid is
        shown. Returns whether the work started."""
        from hyperapp.io.georef import ortho_cube

        s = self.session
        if s is None or not self._ready():
            return False
        base, dataset, all_bands = s.base_cube, s.dataset, s.all_bands

        def done(cube) -> None:
            if self.session is not s:  # another cube opened meanwhile: this grid is stale
                return
            # (the grid's cube holds the swath's bands in memory: the bands left out between them are the swath's)
            self.set_session(Session(cube, dataset, all_bands=all_bands, ortho=True), base.bands_left_out())
            self.statusBar().showMessage(f"orthorectified through the GLT: {cube.rows} x {cube.cols} grid cells "
                                         "(marks and runs start afresh on the grid)", 10000)
            if then is not None:
                then()

        # blocks of 64 MB: a real swath (1.8 GB) then moves the progress bar every few percent
        self._start_worker(lambda progress: ortho_cube(base, block_bytes=64 << 20, progress=progress), done,
                           "orthorectification")
        self.detector.status.setText("orthorectifying the swath through its GLT… (Cancel stops it)")
        return True

    def set_session(self, session: Session, left_out=None) -> None:
        """Show ``session``: everything tied to the last cube (plots, status lines, results, overlays,
        legends) is cleared. The image, the band slider and the Spectrum dock show the cube as opened
        (``session.base_cube``: a project reopened with a band subset gave the axis the subset's bands
        and the spectra all of them); ``left_out``: the bands left out after each band, where the cube no
        longer knows them (:meth:`SpectrumPlot.set_axis`)."""
        self.cancel_run()
        self._dismiss_error()
        if self.session is not None:
            self.session.release()  # its GPU preparation, if still running, stops
        self.session = session
        self.statusBar().clearMessage()
        self.legend.hide_classes()
        self.shown = "detection"
        self.detector.status.setText("")
        self.detector.progress.setValue(0)
        cube = session.base_cube
        self._set_title()
        for panel in self.panels.values():
            panel.reset()
        self.band.setRange(0, cube.bands - 1)
        self.band.setValue(cube.rgb_bands()[0])
        self.spectrum.set_axis(cube, left_out)
        summary = cube_summary(cube, left_out, session.ortho)
        self.cube_info.setText(summary)
        self.cube_info.setToolTip("\n".join([summary, *cube.notes]))
        self.spectrum.clear_pins()
        self.spectrum.clear_cursor()
        session.roi.listeners.append(self._rois_changed)
        self.results.clear()
        from hyperapp.io.georef import geo_of

        self.results.geo = geo_of(cube)  # (the object table's lon/lat columns)
        from hyperapp.io.georef import has_glt

        self.ortho_action.setEnabled(has_glt(self.results.geo))
        self.compare_pick.blockSignals(True)
        self.compare_pick.clear()
        self.compare_pick.blockSignals(False)
        self._compare_placeholder()
        self.compare_view.clear_layers()
        self.compare_view.base.clear()  # the last cube's picture too: the view shows a run, and there is none
        self.view.clear_layers()
        self.spectrum.frame_values(self.refresh_image())
        self.view.fit()  # the new cube, whatever the last one's zoom
        self._rois_changed()
        from hyperapp.gui.gpu_warmup import prepare_session

        # the pixels onto the GPU and every method's kernels loaded, while the person looks and clicks
        prepare_session(self, session, self.detector.device_name())
        self.cube_opened.emit(session)

    def refresh_image(self) -> np.ndarray | None:
        """Draw the image (RGB or the band chosen) with the stretch chosen; returns the values drawn (no
        data as NaN)."""
        if self.session is None:
            return None
        cube = self.session.base_cube  # the view shows the cube as opened, whatever bands detect
        lo, hi = self.lo_pct.value(), max(self.hi_pct.value(), self.lo_pct.value() + 1)
        self.band.setEnabled(self.mode.currentText() != "RGB")  # it chooses nothing in RGB view
        if self.mode.currentText() == "RGB":
            raw = _no_data_nan(cube.subset_bands(list(cube.rgb_bands())).read(), cube.nodata)
            self.band_label.setText("")
        else:
            b = self.band.value()
            raw = _no_data_nan(cube.band(b), cube.nodata)
            from hyperapp.gui.panels import band_name

            self.band_label.setText(band_name(cube, b))  # "12 (650 nm)", as every table and title names it
        self.view.set_image(stretch(raw, lo, hi))
        if not np.isfinite(raw).any():  # a black picture, and nothing said until a run refused the cube
            self.statusBar().showMessage("the bands shown hold no data at any pixel (NaN, Inf or the no-data "
                                         "value): try another band, or another cube", 15000)
        return raw

    def _hover(self, r: int, c: int) -> None:
        if self.session is None:
            return
        from hyperapp.gui.panels import value_axis

        cube = self.session.base_cube
        s = cube.spectrum(r, c)
        run = self.current_run()
        extra = f"  score {run.result.scores[r, c]:.4g}" if run is not None else ""
        scale, unit = value_axis(cube)  # the mean on the Spectrum dock's scale, named as its axis is
        v = _no_data_nan(s, cube.nodata)
        ok = np.isfinite(v)
        if ok.all():
            said = f"{s.size} bands, mean {unit} {v.mean() / scale:.4g}"
        elif ok.any():  # (the mean of the bands holding values: a fill value's -9999 is none)
            said = f"{s.size} bands ({s.size - int(ok.sum())} without data), mean {unit} {v[ok].mean() / scale:.4g}"
        else:
            said = f"no data at this pixel (the fill value or NaN in all {s.size} bands)"
        self.statusBar().showMessage(f"row {r}, col {c}{_place(cube, r, c)}: {said}{extra}")
        self.spectrum.show_cursor(s, f"pixel ({r}, {c})")
        self._hovered = (r, c)

    def pin_spectrum(self) -> None:
        if self.session is not None and getattr(self, "_hovered", None):
            r, c = self._hovered
            self.spectrum.pin(self.session.base_cube.spectrum(r, c), f"({r}, {c})")

    # ------------------------------------------------------------------ ROIs
    def set_tool(self, name: str) -> None:
        self.tool = name
        self._poly, self._rect_start = [], None
        if name in getattr(self, "tool_actions", {}):
            self.tool_actions[name].setChecked(True)
        self._show_marking()

    def _show_marking(self) -> None:
        """The Tools menu's class ticks and the Detect page's marking row as the tool and class are: no
        class ticked while clicks mark nothing (the inspect tool)."""
        marking = self.tool != "inspect"
        for name, a in getattr(self, "class_actions", {}).items():
            a.setChecked(marking and name == self.roi_class)
        self.detector.marking.show_state(self.tool, self.roi_class)

    def set_roi_class(self, name: str | int) -> None:
        """Mark pixels of ROI class ``name`` (a name or a class value) from now on."""
        self.roi_class = name
        if not isinstance(name, str) and self.session is not None:
            name = self.session.roi.classes[int(name) - 1][0]
        if self.tool == "inspect":  # asking to mark means: mark, with the pixel tool
            self.set_tool("pixel")
        self._show_marking()
        self.statusBar().showMessage(f"marking {name} pixels with the {self.tool} tool", 3000)

    def _click(self, r: int, c: int, ev) -> None:
        if self.session is None or ev.button() != Qt.MouseButton.LeftButton:
            return
        if self.tool == "inspect":  # a click that marks nothing says how to mark
            self.statusBar().showMessage("Inspecting: clicks mark nothing. To mark pixels, choose Mark targets "
                                         "(or Mark background) on the Detect page, or press T (B)", 8000)
            return
        roi = self.session.roi
        before = roi.labels.copy()
        self._mark(roi, r, c, ev)
        self._say_remarked(before)

    def _mark(self, roi, r: int, c: int, ev) -> None:
        """What a click of the marking tool does to the marks at (r, c)."""
        if self.tool == "pixel":
            roi.mark_pixels([(r, c)], self.roi_class)
        elif self.tool == "brush":
            roi.brush(r, c, 2.5, self.roi_class)
        elif self.tool == "rectangle":
            if self._rect_start is None:
                self._rect_start = (r, c)
            else:
                roi.rectangle(*self._rect_start, r, c, self.roi_class)
                self._rect_start = None
        elif self.tool == "polygon":
            if ev.double() and len(self._poly) >= 3:
                roi.polygon(self._poly, self.roi_class)
                self._poly = []
            else:
                self._poly.append((r, c))

    def undo_marks(self, redo: bool = False) -> bool:
        """Edit > Undo (``redo``: Redo) on the marks, said in the status bar either way (the notice of the
        change undone stayed up after it)."""
        if self.session is None:
            return False
        done = self.session.roi.redo() if redo else self.session.roi.undo()
        if done:
            self.statusBar().showMessage(f"marks: last change {'redone' if redo else 'undone'}", 5000)
        else:
            self.statusBar().showMessage(f"marks: nothing to {'redo' if redo else 'undo'}", 5000)
        return done

    def _say_remarked(self, before: np.ndarray) -> None:
        """A mark over pixels of another class takes them from it (a pixel has one class): said, with the
        way back (a walk marked a target as background and found it re-classed without a word)."""
        roi = self.session.roi
        moved = (before != roi.labels) & (before > 0) & (roi.labels > 0)
        if not moved.any():
            return
        was = np.bincount(before[moved], minlength=len(roi.classes) + 1)
        said = ", ".join(counted(int(n), f"{roi.classes[k - 1][0]} pixel") for k, n in enumerate(was) if k and n)
        now = roi.classes[int(roi.labels[moved][0]) - 1][0]
        self.statusBar().showMessage(f"{said} re-marked as {now} (a pixel has one class; Edit > Undo takes it "
                                     "back)", 10000)

    def _rois_changed(self) -> None:
        from hyperapp.analyse.run import class_statistics

        roi = self.session.roi
        self.view.set_rois(roi.labels, roi.colour_table(), roi.class_names())
        if self.compare_pick.currentIndex() >= 0:  # the marks where the compared run shows, as on the image
            self.compare_view.set_rois(roi.labels, roi.colour_table(), roi.class_names())
        stats = class_statistics(self.session.base_cube, roi.labels, ROI_STATS_SAMPLE)
        self.spectrum.show_rois({roi.classes[k - 1][0]: (m, sd, roi.classes[k - 1][1]) for k, (m, sd) in stats.items()
                                 if k <= len(roi.classes)})
        if self.worker is None:  # every class's marks (a user class trains the forest, not the detector)
            said = ", ".join(f"{int(c)} {name}" for (name, _), c in zip(roi.classes, roi.class_counts()))
            self.detector.status.setText(f"pixels marked: {said}")

    # ------------------------------------------------------------------ running
    def detect_request(self) -> DetectRequest:
        """The request the Detector tool's fields and the Spectral library tool make, checked as the CLI's
        options and a job step's keys are (an :class:`InputError` names the window's fields). The clicks are
        the session's, not files: the request names none."""
        s = self.session
        mapping = {**self.detector.settings(), **self.library_dock.settings()}
        if s is not None:
            mapping.update(all_bands=s.all_bands, bands=",".join(map(str, s.bands)) if s.bands is not None else None)
        return DetectRequest.from_mapping(mapping, "window", need_targets=False)

    def run_detector(self):
        """Train and run the chosen detector in a worker thread; returns the worker."""
        if not self._ready():
            return self.worker
        from hyperapp.models.registry import get_method

        s = self.session
        label = self.detector.method.currentText()
        try:  # the check the CLI and a job make, before any work: a dialog, not a failed run
            req = self.detect_request()
        except HyperappError as exc:
            self.show_error(str(exc))
            self._not_started(label)
            return None
        method = req.method
        targets = s.roi.targets.copy()
        background = s.roi.background
        truth = None if s.truth is None else s.truth.copy()
        model = self.ffbp_model if method == "ffbp" else None
        self._save_params(method, req.params)
        if (sig := self.library_dock.run_kwargs(s.cube)) is None:  # library targets / undesired, or an error shown
            self._not_started(label)
            return None
        if get_method(method).uses_targets and not targets.any() and "target_spectra" not in sig and model is None:
            # the window's words (the checks after it name the command line's options)
            self.show_error(f"{label} needs targets: click target pixels on the image (Tools > Mark pixels and "
                            "Mark target, keys 1 and T), or tick a target spectrum in the Spectral library tool"
                            + (", or train it on another scene (File > Train FFBP on another scene)"
                               if method == "ffbp" else ""))
            self._not_started(label)
            self.run_finished.emit(None)  # a failed run, as one that fails in its worker
            return None

        def job(progress):
            return s.detect(req, targets, background, truth=truth, model=model, progress=progress, **sig)

        lib = self.library_dock
        unsaved = tuple(n for n in lib.names_with("target") + lib.names_with("undesired") if n in lib.unsaved()) \
            if sig else ()
        return self._start_worker(job, lambda res: setattr(self, "_outcome", self._run_done(
            req, res, emit=False, clicked=targets, unsaved_spectra=unsaved)), method)

    def _not_started(self, label: str) -> None:
        """The Detect tool's line when Run refused to start (the dialog said why): the last run's line stayed
        and read as this one's result (a walker's)."""
        self.detector.status.setText(f"{label} did not run: {self.last_error}")

    def _ready(self) -> bool:
        """Whether a worker may start: a cube is open (else a dialog says so) and no worker runs."""
        if self.session is None:
            self.show_error("open a cube first")
            return False
        if self.worker is not None and getattr(self.worker, "session", None) is not self.session:
            # the last cube's run, cancelled when this cube opened, is still stopping (a fit finishing its
            # step): said, where Run did nothing for seconds
            self.detector.status.setText("the run on the last cube is still stopping: Run again in a moment")
        return self.worker is None

    def _start_worker(self, job, on_result, what: str) -> Worker:
        """Run ``job(progress)`` in a worker thread with the Detector tool's progress bar and Cancel;
        ``on_result`` takes what it returns; errors go to a dialog; ``what`` names the run in the
        status line when it fails or is cancelled."""
        w = Worker(job)
        w.session = self.session  # the cube it runs on (_ready says when it is another's, still stopping)
        w.signals.progress.connect(while_shown(w, self, self.detector.show_progress))
        self._outcome = None
        w.signals.result.connect(while_shown(w, self, on_result))
        w.signals.error.connect(while_shown(w, self, lambda message: self._run_failed(what, message)))
        w.signals.cancelled.connect(while_shown(w, self, lambda: self._run_cancelled(what)))
        w.signals.finished.connect(self._worker_finished)
        self.detector.set_busy(True)
        self.worker = w
        start(w)
        return w

    def cancel_run(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.detector.status.setText("cancelling…")

    def _worker_finished(self) -> None:
        # run_finished goes out only now, once the worker is gone, so a listener may start the next run
        last_cube = self.worker is not None and self.worker.session is not self.session
        self.worker = None
        self.detector.set_busy(False)
        if last_cube and self.session is not None:  # the new cube's marks line waited for that run to stop
            self._rois_changed()
        self.run_finished.emit(self._outcome)

    def _run_failed(self, method: str, message: str) -> None:
        self.detector.status.setText(f"{method} run failed: {message.splitlines()[0] if message else ''}")
        self.show_error(message)

    def _run_cancelled(self, method: str) -> None:
        self.detector.status.setText(f"{method} run cancelled")

    def _run_done(self, request: DetectRequest, result, emit: bool = True, threshold: float | None = None,
                  clicked: np.ndarray | None = None, unsaved_spectra: tuple[str, ...] = ()) -> Run:
        s = self.session
        run = Run(s.unique_run_name(request.method), request, result,
                  result.threshold if threshold is None else threshold,
                  clicked=clicked if clicked is not None and clicked.any() else None, unsaved_spectra=unsaved_spectra)
        s.runs.append(run)
        self._dismiss_error()  # (a refusal before this run is over)
        rep = result.report
        self.detector.status.setText(_run_summary(run))
        sec = rep["seconds"]
        stages = "\n".join(f"{k}: {v * 1e3:.1f} ms" for k, v in sec.items() if k != "total" and v >= 5e-5)
        total = sec["total"]
        said = f"{run.name} finished in {total * 1e3:.0f} ms" if total < 1 else f"{run.name} finished in {total:.1f} s"
        # the total in words; the stages (for whoever tunes the detectors) in the tooltip while it shows
        self._timing_message = said
        self.statusBar().setToolTip(f"{run.name}, from the click to the result:\n{stages}")
        self.statusBar().showMessage(said, 15000)
        self.results.runs.addItem(run.name)
        self.compare_pick.addItem(run.name)
        self._compare_placeholder()
        self.results.runs.setCurrentIndex(len(s.runs) - 1)
        self._show_run(len(s.runs) - 1)
        self.results_dock.raise_()  # the scores' histogram, ROC and objects in front
        if emit:
            self.run_finished.emit(run)
        return run

    def show_labels(self, labels: np.ndarray, title: str = "", values=None, colours=None, names=None,
                    tip: str = "", heading: str | None = None) -> None:
        """Show an analysis's class or cluster map over the image (-1 transparent), label ``values[i]``
        in ``colours[i]`` where given, with its colour legend (``names[i]``; ``tip``: what the colours
        are); the Results dock then says the image no longer shows the detection. ``title``: the tool
        that drew it (:attr:`shown`); ``heading``: the method named on the legend and the status line
        (default ``title``: one tool runs several methods, a decision tree among a forest's)."""
        from hyperapp.io.writers import class_colour

        self.view.set_overlay(colourise_labels(labels, self.opacity.value() / 100.0, values, colours))
        self.view.set_mask(None)
        self.view.set_boxes([])
        if values is None:
            values = np.arange(int(labels.max(initial=-1)) + 1)
        if colours is None:
            colours = [class_colour(int(v)) for v in values]
        if names is None:
            names = [f"class {int(v)}" for v in values]
        counts = np.bincount(labels[labels >= 0].ravel(), minlength=int(max(values, default=-1)) + 1)
        heading = heading or title
        # the map is blended with the image: say so where the swatches are, which are not
        tip = (tip + "\n" if tip else "") + ("On the image the colours are drawn at the overlay opacity (the "
                                             "slider above it), over the scene, so they look paler or tinted "
                                             "there; at 100 % they are as in this legend.")
        self.legend.show_classes(heading, list(names), list(colours), [int(counts[int(v)]) for v in values], tip)
        self.shown = title
        self.results.set_detection_shown(False, f"the {heading} map")
        self.statusBar().showMessage(f"{heading}: {len(values)} class{'' if len(values) == 1 else 'es'} shown on the image (legend under it)",
                                     5000)

    def show_detection(self, reason: str = "") -> None:
        """Draw the chosen detection run again (after an analysis's map replaced it); ``reason`` says why
        on the status line (an analysis whose result has no map of pixels)."""
        self.legend.hide_classes()
        previous = self.shown
        was_map = previous != "detection"
        self.shown = "detection"
        if was_map:  # "<map>: n classes shown on the image" is no longer true
            self.statusBar().clearMessage()
        run = self.current_run()
        if run is None:
            self.view.set_overlay(None)
            self.view.set_mask(None)
            if reason:
                self.statusBar().showMessage(reason, 8000)
            return
        if was_map:  # (a new run's first showing too: not "again")
            instead = f"{run.name} shown on the image instead of the {previous} map"
            self.statusBar().showMessage(f"{reason}; {instead}" if reason else instead, 8000 if reason else 5000)
        self.view.set_boxes(run.result.boxes)
        self.results.set_detection_shown(True)
        self._redraw_result()

    def use_bands(self, bands: list[int] | None) -> None:
        """Detect and analyse on these bands of the current cube from now on (None: all bands)."""
        if self.session is None:
            return
        try:
            self.session.use_bands(bands)
        except HyperappError as exc:
            self.show_error(str(exc))
            return
        self._set_title()
        n = self.session.cube.bands
        self.detector.status.setText(f"detecting on {n} band(s): {self.session.bands}" if bands is not None
                                     else f"detecting on all {n} bands")

    def _set_title(self) -> None:
        cube = self.session.cube
        extra = f", {cube.bands} of {self.session.base_cube.bands} bands" if self.session.bands is not None else ""
        product = f"{cube.product}: " if cube.product else ""
        self.setWindowTitle(f"hyperapp — {product}{cube.name} ({cube.rows} x {cube.cols} x "
                            f"{self.session.base_cube.bands}{extra})")

    def current_run(self) -> Run | None:
        if self.session is None or not self.session.runs:
            return None
        i = self.results.runs.currentIndex()
        return self.session.runs[i] if 0 <= i < len(self.session.runs) else None

    def _show_run(self, i: int) -> None:
        if self.session is None or not (0 <= i < len(self.session.runs)):
            return
        run = self.session.runs[i]
        from hyperapp.detect.finish import threshold_origin

        res = run.result
        # the default threshold's account while the run still sits at it
        origin = threshold_origin(res.report) if run.threshold == res.threshold else ""
        self.results.review.adopt(run.review)  # its statuses, when the Objects tab showed it before
        self.results.show_result(res.scores, run.threshold, self.session.truth,
                                 self.session.roi.targets if self.session.truth is not None else None, origin,
                                 res.report.get("far") if run.threshold == res.threshold else None,
                                 report=res.report, filters=res.filters, clicked=run.clicked)
        self.detector.status.setText(self._run_line(run, run.threshold))
        self._say_shown_run(run)
        self.show_detection()

    def _method_changed(self) -> None:
        """Another method in the form: the dock cleared the last run's line (it belongs to the method it
        ran); where a run is shown, its line comes back as the run shown, said to be another method's (a
        walk found the line empty or not by the order of a person's clicks)."""
        run = self.current_run()
        if run is not None and self.worker is None:
            self.detector.status.setText(self._run_line(run, run.threshold))

    def _run_line(self, run: Run, threshold: float) -> str:
        """The Tools dock's line for the run shown: the run shown, not the last one made; said to be another
        method's where the form holds another (it read "ace #1 finished" under the RX form); with the AUC
        the Results dock computed (a truth loaded after the run)."""
        line = _run_summary(run, threshold, self.results.auc)
        if run.result.method != self.detector.method_name():
            line = f"Shown: {line} (the form above holds the next run's method)"
        return line

    def _say_shown_run(self, run: Run) -> None:
        """The status bar names the run shown (it went on naming the last run made after another was picked
        in the Results dock), with its stage timings in the tooltip; the run just made says it finished."""
        if self._timing_message.startswith(f"{run.name} finished"):
            return  # (said by _run_done a moment ago)
        sec = run.result.report["seconds"]
        total = sec["total"]
        took = f"{total * 1e3:.0f} ms" if total < 1 else f"{total:.1f} s"
        said = f"Shown: {run.name} (it took {took})"
        stages = "\n".join(f"{k}: {v * 1e3:.1f} ms" for k, v in sec.items() if k != "total" and v >= 5e-5)
        self._timing_message = said
        self.statusBar().setToolTip(f"{run.name}, from the click to the result:\n{stages}")
        self.statusBar().showMessage(said, 15000)

    def _threshold_moved(self, t: float) -> None:
        run = self.current_run()
        if run is None:
            return
        run.threshold = t
        # the line follows the threshold, the run shown again ("Shown: ...") too: a walk found that one stuck
        if self.detector.status.text().startswith((f"{run.name} finished: ", f"Shown: {run.name} finished: ")):
            self.detector.status.setText(self._run_line(run, t))
        if self.shown == "detection":
            self.view.set_mask(run.result.remask(t))
            self.view.set_threshold_mark(t)
        if self.session.runs.index(run) == self.compare_pick.currentIndex():  # the compared run's mask follows
            self._compare_mask(run)

    def _redraw_result(self) -> None:
        run = self.current_run()
        if run is None or self.shown != "detection":
            return
        scores = run.result.scores
        self.view.set_overlay(colourise(scores, self.opacity.value() / 100.0), score_levels(scores))
        self.view.set_mask(run.result.remask(run.threshold))
        self.view.set_threshold_mark(run.threshold)

    def _status_changed(self, text: str) -> None:
        """A run's stage timings stay in the status bar's tooltip only while its message shows."""
        if text != self._timing_message:
            self.statusBar().setToolTip("")

    def _follow_view(self, *_) -> None:
        """The Compare view shows the image's range (framed to its own aspect)."""
        xr, yr = self.view.vb.viewRange()
        self.compare_view.vb.setRange(xRange=xr, yRange=yr, padding=0)

    def _lead_view(self, *_) -> None:
        """A zoom or pan made in the Compare view moves the image the same way."""
        xr, yr = self.compare_view.vb.viewRange()
        self.view.vb.setRange(xRange=xr, yRange=yr, padding=0)

    def _compare_placeholder(self) -> None:
        """The Compare picker's line while nothing is picked, following the runs it lists."""
        n = self.compare_pick.count()
        if self.compare_pick.currentIndex() < 0:
            self.compare_note.setText("Run a detector, then pick a run above: its scores and mask show here, "
                                      "beside the image, zoomed and panned with it.")
        self.compare_pick.setPlaceholderText(
            "Pick a result to show beside the image (none yet: run a detector)" if n == 0
            else f"Pick a result to show beside the image ({n} run{'s' if n > 1 else ''} so far)")

    def _show_compare(self, i: int) -> None:
        if self.session is None or not (0 <= i < len(self.session.runs)):
            return
        run = self.session.runs[i]
        self.compare_view.set_image(self.view.base.image, fit=False)  # linked to the main view: keep its zoom
        self._compare_overlay()
        self.compare_view.set_truth(self.session.truth)  # hits and false alarms apart, as in the main view
        roi = self.session.roi
        self.compare_view.set_rois(roi.labels, roi.colour_table(), roi.class_names())  # the marks too
        self._compare_mask(run)
        self.compare_view.set_boxes(run.result.boxes)

    def _compare_overlay(self) -> None:
        """The compared run's scores as the image draws them: the overlay's opacity and the colour bar (the
        opacity slider redraws only this, not the picture, truth and marks beside it)."""
        i = self.compare_pick.currentIndex()
        if self.session is None or not (0 <= i < len(self.session.runs)):
            return
        run = self.session.runs[i]
        self.compare_view.set_overlay(colourise(run.result.scores, self.opacity.value() / 100.0),
                                      score_levels(run.result.scores))
        self.compare_view.set_threshold_mark(run.threshold)

    def _compare_mask(self, run) -> None:
        """The compared run's numbers beside it (the Results dock shares the bottom tabs: they could not
        be read while comparing) and its mask, at its threshold now."""
        pixels, objects = run.result.count_at(run.threshold)
        self.compare_view.set_threshold_mark(run.threshold)  # on its colour bar, as on the image's
        ev = run.result.report.get("evaluation")
        later = None if ev else self._auc_since(run)
        self.compare_note.setText(f"{run.name} at threshold {run.threshold:.4g}: {counted(pixels, 'pixel')}, "
                                  f"{counted(objects, 'object')}"
                                  + (f", AUC {ev['auc']:.4f}" if ev else "")
                                  + (f", AUC {later:.4f} against the truth loaded since" if later is not None else "")
                                  + "; zoomed and panned with the image.")
        self.compare_view.set_mask(run.result.remask(run.threshold))

    def _auc_since(self, run: Run) -> float | None:
        """``run``'s AUC against the truth loaded after it, as the Results dock's ROC computes it (the marked
        targets left out), once per run and truth: the note follows every threshold move."""
        truth = self.session.truth
        if truth is None:
            return None
        if self._auc_for is None or self._auc_for[0] is not run or self._auc_for[1] is not truth:
            from hyperapp.models.evaluation import auc

            scores = np.asarray(run.result.scores, np.float32)
            self._auc_for = (run, truth, auc(scores, truth, self.session.roi.targets))
        return self._auc_for[2]

    def current_mask(self) -> np.ndarray:
        run = self.current_run()
        if run is None:
            raise HyperappError("no result to export: run a detector first")
        return run.result.remask(run.threshold)

    # ------------------------------------------------------------------ files
    def load_truth(self, path, variable: str | None = None) -> bool:
        if self.session is None:
            self.show_error(NO_CUBE_FOR_TRUTH)
            return False
        try:
            self.session.load_truth(path, variable)
        except HyperappError as exc:
            self.show_error(str(exc))
            return False
        self.view.set_truth(self.session.truth)
        self.statusBar().showMessage(f"truth mask {Path(path).name}: {int((self.session.truth > 0).sum())} target "
                                     "pixels (outlined in cyan)", 8000)
        run = self.current_run()
        if run is not None:
            self._show_run(self.results.runs.currentIndex())
        if self.compare_pick.currentIndex() >= 0:  # the compared run's truth outline and AUC too
            self._show_compare(self.compare_pick.currentIndex())
        return True

    def export(self, kind: str, path, fmt: str = "envi") -> Path | None:
        """Export ``kind`` (mask, scores, objects, boxes, screenshot, rois) to ``path``; says so in the
        status bar."""
        out = self._export(kind, path, fmt)
        if out is not None:
            from hyperapp.io.georef import geotiff_placement

            placed = f" ({geotiff_placement(self.session.cube)})" if fmt == "tiff" and kind in ("mask", "scores") else ""
            self.statusBar().showMessage(f"exported {kind} to {out}{placed}", 8000)
        return out

    def mask_filters(self) -> dict[str, str]:
        """Formats offered for a mask or score map: GeoTIFF only when the cube has a location."""
        from hyperapp.io.georef import geo_of

        has_map = self.session is not None and geo_of(self.session.cube) is not None
        return {k: v for k, v in MASK_FILTERS.items() if v != "tiff" or has_map}

    def _export(self, kind: str, path, fmt: str = "envi") -> Path | None:
        from hyperapp.detect.outputs import write_detection_item

        try:
            from hyperapp.request import checks as options
            p = Path(options.out_file(str(path), make_folder=False))  # not a folder, in an existing one that takes files
            if kind in ("mask", "scores", "objects", "boxes"):
                run = self.current_run()
                if run is None:
                    raise HyperappError("no result to export: run a detector first")
                return write_detection_item(run.result, kind, p, self.session.cube, run.threshold, fmt)
            if kind == "screenshot":
                from hyperapp.io.atomic import atomic_paths

                with atomic_paths(p) as (tmp,):
                    if not self.grab().save(str(tmp), "PNG"):
                        raise HyperappError("could not write the screenshot", p)
                return p
            if kind == "rois":
                return self.session.roi.export(p)  # the file written (an ENVI class map: its .hdr)
            raise HyperappError(f"unknown export {kind!r}")
        except HyperappError as exc:
            self.show_error(str(exc))
            return None

    def save_project(self, path) -> bool:
        if self.session is None:
            self.show_error("open a cube first: there is nothing to save")
            return False
        try:
            self.session.save_project(path)  # (refuses a folder that does not exist itself)
        except HyperappError as exc:
            self.show_error(str(exc))
            return False
        self.statusBar().showMessage(f"project saved to {path}", 8000)
        return True

    def open_project(self, path) -> bool:
        """Reopen a project: the cube, ROIs and truth, then re-run each saved run's request with its saved
        model (no retraining) in a worker thread; False (after a dialog) when the project cannot open."""
        try:
            d = Session.read_project(path)
            session = Session.open(d["cube"], d.get("dataset"), bool(d.get("all_bands", False)), bool(d.get("ortho")))
            self.keep_bad_bands.blockSignals(True)
            self.keep_bad_bands.setChecked(session.all_bands)
            self.keep_bad_bands.blockSignals(False)
            session.restore_rois(d)
            if d.get("truth"):
                session.load_truth(d["truth"])
            if d.get("bands"):
                session.use_bands(d["bands"])
            self.set_session(session)
            if d.get("truth"):
                self.view.set_truth(session.truth)
            runs = [(r["request"].check("window", need_targets=False), r.get("model"), r["threshold"])
                    for r in self._review("reopen_runs", d.get("runs", []))]  # results folders: read again
        except HyperappError as exc:
            self.show_error(str(exc))
            return False
        opened = f"project {Path(path).name} opened"
        if runs:
            self.detector.set_settings(runs[-1][0])
            self._rerun(session, runs, opened)
        else:
            self.statusBar().showMessage(opened, 15000)
        return True

    def _review(self, name: str, *args):
        """A function of the review list's module (:mod:`hyperapp.gui.review_panel`) on this window."""
        from hyperapp.gui import review_panel

        return getattr(review_panel, name)(self, *args)

    def _rerun(self, session: Session, runs: list, opened: str) -> None:
        """Run a reopened project's requests (each with its saved model, on the CPU as saved) in a worker;
        each shows as it would after Run, at the threshold it was saved at, and the status bar then says
        ``opened`` (the project's name) with the runs shown."""
        from hyperapp.detect.model_files import load_model

        targets = session.roi.targets.copy()
        background = None if session.roi.background is None else session.roi.background.copy()
        truth = None if session.truth is None else session.truth.copy()

        def job(progress):
            out = []
            for i, (req, model_file, threshold) in enumerate(runs):
                part = progress.sub(i / len(runs), (i + 1) / len(runs))
                model = load_model(model_file, n_bands=session.cube.bands, method=req.method) if model_file else None
                req = req.replace(device="cpu", threshold=threshold, far=None)
                res = session.detect(req, targets, background, truth=truth, model=model, progress=part)
                out.append((req, res, threshold))
            return out

        def done(results):
            for req, res, threshold in results:
                self._run_done(req, res, threshold=threshold)
            n = len(results)
            self.statusBar().showMessage(f"{opened}: {n} run{'s' if n != 1 else ''} shown again at the saved "
                                         f"threshold{'s' if n != 1 else ''}", 15000)

        self._start_worker(job, done, "reopened project")

    # ------------------------------------------------------------------ dialogs
    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open cube", self._last_dir(), CUBE_FILTER)
        if path:
            self.open_cube(path)

    def _truth_dialog(self) -> None:
        if self.session is None:
            self.show_error(NO_CUBE_FOR_TRUTH)
            return
        path, _ = QFileDialog.getOpenFileName(self, "Truth mask", self._last_dir(),
                                              "Masks (*.hdr *.png *.npy *.mat *.tif);;All files (*)")
        if path:
            self.load_truth(path, "map" if path.endswith(".mat") else None)

    def _model_dialog(self) -> None:
        from hyperapp.detect.model_files import load_model

        path, _ = QFileDialog.getOpenFileName(self, "FFBP model", self._last_dir(), "Models (*.npz)")
        if path and self.session is not None:
            try:
                self._set_ffbp_model(load_model(path, n_bands=self.session.cube.bands, method="ffbp"),
                                     Path(path).name)
            except HyperappError as exc:
                self.show_error(str(exc))

    def _set_ffbp_model(self, model, where: str) -> None:
        self.ffbp_model = model
        self.detector.model_label.setText(f"FFBP model: {where}")

    def _train_model_dialog(self) -> None:
        if not self._ready():  # no cube (a dialog says so), or a run in progress: no file dialogs
            return
        scene, _ = QFileDialog.getOpenFileName(self, "Train FFBP on another scene", self._last_dir(), CUBE_FILTER)
        if not scene:
            return
        truth, _ = QFileDialog.getOpenFileName(self, "That scene's targets (truth mask or clicks)", str(Path(scene).parent),
                                               "Masks and clicks (*.hdr *.png *.npy *.mat *.tif *.csv);;All files (*)")
        if truth:
            self.train_ffbp_model(scene, truth)

    def train_ffbp_model(self, scene: str, truth: str):
        """Train the FFBP networks on another scene's targets (a truth mask or clicks) in a worker thread,
        on this cube's bands, as the CLI's ``--train-from`` does (:func:`hyperapp.detect.training.train_on_scene`);
        the model then scores this cube's FFBP runs. Returns the worker."""
        if not self._ready():
            return self.worker
        from hyperapp.detect.training import train_on_scene

        s = self.session
        device = self.detector.device_name()
        params = self.detector.params() if self.detector.method_name() == "ffbp" else {}

        def job(progress):
            return train_on_scene(scene, "ffbp", truth, all_bands=s.all_bands, params=params, device=device,
                                  expected_bands=s.cube.bands, progress=progress)

        return self._start_worker(job, lambda model: self._set_ffbp_model(model, f"trained on {Path(scene).name}"),
                                  "FFBP training")

    def _export_dialog(self, kind: str) -> None:
        run = self.current_run()
        if kind == "boxes" and (run is None or not run.result.boxes):
            # said before a file is asked for (it was said after, with the last export's line still showing)
            self.statusBar().clearMessage()
            self.show_error("no boxes to export: run the FFBP detector first (its windows are the boxes)")
            return
        if kind in ("mask", "scores"):
            filters = self.mask_filters()
            path, flt = QFileDialog.getSaveFileName(self, f"Export {kind}", self._last_dir(), ";;".join(filters))
            if path:
                self.export(kind, path, filters.get(flt, "envi"))
            return
        filters = {"objects": "CSV (*.csv);;GeoJSON, each object's box (*.geojson)", "boxes": "CSV (*.csv)",
                   "screenshot": "PNG (*.png)", "rois": "CSV (*.csv);;NumPy (*.npy);;PNG (*.png);;ENVI (*.hdr)"}
        path, flt = QFileDialog.getSaveFileName(self, f"Export {kind}", self._last_dir(), filters[kind])
        if path and kind == "objects" and "geojson" in flt.lower() and not Path(path).suffix:
            path += ".geojson"  # the name's extension chooses the format; without one, the filter chosen
        if path:
            self.export(kind, path)

    def _import_rois_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import ROIs", self._last_dir(),
                                              "ROIs (*.csv *.npy *.png *.hdr);;All files (*)")
        if path and self.session is not None:
            try:
                self.session.roi.import_(path)
            except HyperappError as exc:
                self.show_error(str(exc))

    def save_batch_job(self, path) -> bool:
        """File > Save as batch job: this session as a job file for ``hyperapp --headless run``."""
        if self.session is None:
            self.show_error("open a cube first: there is nothing to save")
            return False
        try:
            from hyperapp.request import checks as options
            options.out_file(str(path), make_folder=False)
            job = self.session.save_batch_job(path)
        except HyperappError as exc:
            self.show_error(str(exc))
            return False
        self.statusBar().showMessage(f"batch job saved to {job}: run it with hyperapp --headless run {job.name}",
                                     10000)
        return True

    def _save_job_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save as batch job", self._last_dir(), "Batch jobs (*.toml)")
        if path:
            self.save_batch_job(path)

    def _open_project_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open project", self._last_dir(), "Projects (*.hyperapp.json *.json)")
        if path:
            self.open_project(path)

    def _save_project_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save project", self._last_dir(), "Projects (*.hyperapp.json)")
        if path:
            self.save_project(path)

    # ------------------------------------------------------------------ settings
    def _remember(self, path: str) -> None:
        st = settings()
        recent = [p for p in as_list(st.value("recent", [])) if p != path]
        st.setValue("recent", [path, *recent][:10])
        st.setValue("last_dir", str(Path(path).parent))
        self._update_recent()

    def _update_recent(self) -> None:
        self.recent_menu.clear()
        for p in as_list(settings().value("recent", [])):
            a = QAction(p, self)
            a.triggered.connect(lambda _=False, q=p: self.open_cube(q))
            self.recent_menu.addAction(a)

    def _last_dir(self) -> str:
        return str(settings().value("last_dir", "") or "")

    def _save_params(self, method: str, params: dict) -> None:
        import json

        settings().setValue(f"params/{method}", json.dumps(params))

    def _saved_params(self, method: str) -> dict:
        import json

        raw = settings().value(f"params/{method}", "")
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    # ------------------------------------------------------------------ drag and drop
    def dragEnterEvent(self, ev) -> None:
        if ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev) -> None:
        urls = ev.mimeData().urls()
        if urls:
            QTimer.singleShot(0, lambda: self.open_cube(urls[0].toLocalFile()))


def _no_data_nan(img: np.ndarray, nodata: float | None) -> np.ndarray:
    """No-data values as NaN, so the display's stretch ignores a fill border (drawn black)."""
    if nodata is not None:
        img = np.where(img == np.float32(nodata), np.float32(np.nan), img)
    return img


def cube_summary(cube, left_out=None, ortho: bool = False) -> str:
    """The status bar's line on the open cube: the product (where the reader names it; ``ortho``: on its
    GLT's grid), its wavelength range and the bands left out, the bad ones and those the reader left out of
    the file ("EMIT L2A surface reflectance, 381-2493 nm, 40 of 48 bands (left out: 8 bad, File > Keep bad
    bands)", "PRISMA L2D ..., 230 of 239 bands (left out: 2 unused; 7 overlap copies)")."""
    from hyperapp.gui.panels import units_text

    parts = [cube.product] if cube.product else []
    if ortho:
        parts.append("orthorectified (GLT)")
    if cube.wavelengths is not None and len(cube.wavelengths) == cube.bands and cube.bands:
        wl = np.asarray(cube.wavelengths, float)
        u = units_text(cube.wavelength_units)
        parts.append(f"{wl.min():.4g}-{wl.max():.4g} {u}".rstrip())
    dropped = cube.store.shape[2] - cube.bands if left_out is None else int(np.sum(left_out))
    why = ([f"{dropped} bad, File > Keep bad bands"] if dropped else []) + \
        [f"{n} {what}" for n, what in cube.file_bands_left_out]
    total = cube.bands + dropped + sum(n for n, _ in cube.file_bands_left_out)
    parts.append(f"{cube.bands} of {total} bands (left out: {'; '.join(why)})" if why else f"{cube.bands} bands")
    return ", ".join(parts)


def _place(cube, r: int, c: int) -> str:
    """", lon X, lat Y" (WGS84 degrees) of pixel (r, c)'s centre where the cube has a location, else ""."""
    from hyperapp.io.georef import geo_of

    geo = geo_of(cube)
    if geo is None:
        return ""
    from hyperapp.core.geo import lonlat

    try:
        lon, lat = lonlat(geo, r, c)
    except Exception:  # noqa: BLE001  (a location that cannot be worked out: the row and column still show)
        return ""
    return f", lon {float(lon):.6f}, lat {float(lat):.6f}"
