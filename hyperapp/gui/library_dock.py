"""The spectral-library dock: open a library, see its spectra on the cube's bands, pick targets and undesired
signatures for Train & Run, and save the clicked pixels' mean and each ROI class's mean as entries.

Everything it computes goes through :mod:`hyperapp.io.speclib` and :mod:`hyperapp.io.signatures`, the
functions the CLI's ``--target-spectra`` uses; the dock only shows and keeps the choice. It also installs
the MTMF score-against-infeasibility scatter (:mod:`hyperapp.gui.mtmf_scatter`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize
from PySide6.QtGui import QBrush, QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hyperapp.core.errors import HyperappError
from hyperapp.gui.panels import value_axis, wavelength_axis

ROLES = ("", "target", "undesired")
ROLE_COLOURS = {"target": (230, 60, 60), "undesired": (60, 140, 255), "": (170, 170, 170)}
#: spectra without a role: muted colours that stay clear of the target red and the undesired blue
OTHER_COLOURS = [(188, 189, 34), (23, 190, 207), (148, 103, 189), (227, 119, 194), (140, 86, 75), (170, 170, 170)]
DATABASE_PATTERNS = "*.db *.sqlite *.sqlite3"
LIBRARY_FILTER = (f"Spectral libraries and databases (*.sli *.hdr *.csv *.txt *.asc {DATABASE_PATTERNS});;"
                  f"Spectral Python databases ({DATABASE_PATTERNS});;All files (*)")


class CompactPlot(pg.PlotWidget):
    """A plot that asks for the room a narrow tool column has (pyqtgraph asks for 600 x 480): a tool's
    page is as tall as its parts ask, and a taller one scrolls its plot's axis out of view."""

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        return QSize(300, 220)


class LibraryDock(QWidget):
    """Library spectra with a role each (target, undesired or neither), plotted over the cube's bands."""

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window = window
        self.library = None  # hyperapp.io.speclib.SpectralLibrary
        #: the names the library's file holds (as opened or last saved): spectra added since are in no file
        self._in_file: set[str] = set()
        self.roles: dict[str, str] = {}
        self._cached = None  # (key, run_detection keywords) of the last choice
        lay = QVBoxLayout(self)
        files = QHBoxLayout()
        self.open_button = QPushButton("Open library…")
        self.save_button = QPushButton("Save as…")
        self.open_button.setToolTip("An ENVI spectral library (.sli/.hdr), a CSV (wavelength column + one column "
                                    "per spectrum), a two-column ASCII spectrum (USGS, ECOSTRESS) or a Spectral Python "
                                    "database (ECOSTRESS, ASTER, USGS: you pick its spectra from a list)")
        self.save_button.setToolTip("Write the library as an ENVI spectral library (.sli + .hdr) or CSV")
        files.addWidget(self.open_button)
        files.addWidget(self.save_button)
        lay.addLayout(files)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Spectrum", "Use as"])
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setRootIsDecorated(False)
        self.tree.setMinimumHeight(90)
        self.tree.setMaximumHeight(120)
        lay.addWidget(self.tree)
        roles = QGridLayout()
        self.target_button = QPushButton("Target")
        self.undesired_button = QPushButton("Undesired")
        self.neither_button = QPushButton("Neither")
        self.target_button.setToolTip("Detect the selected spectra (each gets its own detector; the highest "
                                      "score is kept)")
        self.undesired_button.setToolTip("Suppress the selected spectra (OSP, TCIMF, MTTCIMF) or train the "
                                         "RBFN against them")
        for i, b in enumerate((self.target_button, self.undesired_button, self.neither_button)):
            roles.addWidget(b, 0, i)
        self.add_clicks_button = QPushButton("Add clicked targets' mean")
        self.add_rois_button = QPushButton("Add ROI class means")
        self.add_clicks_button.setToolTip("The mean spectrum of the pixels marked as target, as a library entry")
        self.add_rois_button.setToolTip("Each ROI class's mean spectrum as a library entry")
        # one button a row: the tool's column is narrow at 1366 x 768
        roles.addWidget(self.add_clicks_button, 1, 0, 1, 3)
        roles.addWidget(self.add_rois_button, 2, 0, 1, 3)
        lay.addLayout(roles)
        self.use = QCheckBox("Train && Run uses the library's targets")
        self.use.setToolTip("When on, Train & Run uses the spectra marked Target (and Undesired); clicked "
                            "targets, if any, are left out of the background statistics")
        lay.addWidget(self.use)
        self.plot = CompactPlot()
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.plot.setMinimumHeight(160)
        for ax in ("left", "bottom"):
            self.plot.getAxis(ax).enableAutoSIPrefix(False)
        self._library_axes()  # before any library: what it would show
        # the list above is the legend (a swatch of each curve's colour by its name): a legend in this
        # narrow plot would cover the curves
        self.plot.setToolTip("Each spectrum in the colour of the swatch by its name in the list: targets red, "
                             "undesired blue")
        lay.addWidget(self.plot, 1)
        self.status = QLabel("No library open.")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.open_button.clicked.connect(self._open_dialog)
        self.save_button.clicked.connect(self._save_dialog)
        self.target_button.clicked.connect(lambda: self.set_role(self._selected(), "target"))
        self.undesired_button.clicked.connect(lambda: self.set_role(self._selected(), "undesired"))
        self.neither_button.clicked.connect(lambda: self.set_role(self._selected(), ""))
        self.add_clicks_button.clicked.connect(self._guard(self.add_clicked_mean))
        self.add_rois_button.clicked.connect(self._guard(self.add_roi_means))

    # ------------------------------------------------------------------ library
    def _guard(self, fn):
        def run():
            try:
                fn()
            except HyperappError as exc:
                self.window.show_error(str(exc))
        return run

    def open_library(self, path, names: list[str] | None = None) -> bool:
        """Open the library at ``path`` (its spectra ``names``, all when None). A Spectral Python database
        without ``names`` asks for them (:meth:`pick_database_spectra`); cancelling leaves the tool as it
        was. False after showing the error, or when cancelled."""
        from hyperapp.io.speclib import is_sqlite, read_library

        if names is None and is_sqlite(Path(path)):
            names = self.pick_database_spectra(path)
            if names is None:
                return False
        try:
            lib = read_library(path, names)
        except HyperappError as exc:
            self.window.show_error(str(exc))
            return False
        self.library = lib
        self._in_file = set(lib.names)
        self.roles = {n: self.roles.get(n, "") for n in lib.names}
        self.refresh()
        return True

    def pick_database_spectra(self, path) -> list[str] | None:
        """The spectra of the database at ``path`` chosen in a :class:`DatabasePicker`; None when cancelled
        (or after showing the error of a database that cannot be listed)."""
        from hyperapp.gui.database_picker import DatabasePicker
        from hyperapp.io.speclib import database_entries

        try:
            entries = database_entries(path)
        except HyperappError as exc:
            self.window.show_error(str(exc))
            return None
        picker = DatabasePicker(path, entries, self)
        try:
            return picker.chosen() if picker.exec() == DatabasePicker.DialogCode.Accepted else None
        finally:
            picker.deleteLater()

    def save_library(self, path) -> bool:
        from hyperapp.io.speclib import write_library

        if self.library is None:
            self.window.show_error("the library is empty: open one or add spectra first")
            return False
        try:
            from hyperapp.request import checks as options
            options.out_file(str(path), make_folder=False)
            out = write_library(self.library, path)
        except HyperappError as exc:
            self.window.show_error(str(exc))
            return False
        self.library.path = str(out)
        self._in_file = set(self.library.names)
        n = len(self.library)
        self.status.setText(f"Saved {n} spectr{'um' if n == 1 else 'a'} to {out}")
        return True

    def _cube(self):
        s = self.window.session
        return None if s is None else s.cube

    def _add(self, name: str, spectrum: np.ndarray, role: str = "") -> str:
        from hyperapp.io.speclib import append_spectrum

        cube = self._cube()
        wl = None if cube.wavelengths is None else np.asarray(cube.wavelengths, float)
        lib = self.library
        if lib is not None and lib.spectra.shape[1] != spectrum.size:
            from hyperapp.core.errors import InputError

            raise InputError(f"the open library's spectra have {lib.spectra.shape[1]} samples and the cube "
                             f"{spectrum.size} bands: save the library and start a new one to add cube spectra",
                             lib.path)
        self.library = append_spectrum(lib, name, spectrum, wl, cube.wavelength_units,
                                       None if cube.fwhm is None else np.asarray(cube.fwhm, float))
        new = self.library.names[-1]
        self.roles[new] = role
        return new

    def add_clicked_mean(self) -> str | None:
        """The mean spectrum of the pixels marked as target, as a new entry (the cube's bands)."""
        from hyperapp.core.errors import InputError

        s = self.window.session
        if s is None:
            raise InputError("open a cube first")
        mask = s.roi.targets
        if not mask.any():
            raise InputError("no target pixels marked: click some first")
        from hyperapp.io.signatures import roi_class_means

        _, means = roi_class_means(s.cube, mask.astype(np.int32))
        name = self._add(f"{Path(s.cube.path or 'cube').stem} targets ({int(mask.sum())} px)", means[0])
        self.refresh()
        return name

    def add_roi_means(self) -> list[str]:
        """Each marked ROI class's mean spectrum as a new entry, named after the class."""
        from hyperapp.core.errors import InputError
        from hyperapp.io.signatures import roi_class_means

        s = self.window.session
        if s is None:
            raise InputError("open a cube first")
        names = s.roi.class_names()
        _, means = roi_class_means(s.cube, s.roi.labels)
        values = [int(v) for v in np.unique(s.roi.labels) if v > 0]
        held = [] if self.library is None else list(self.library.spectra)
        added, same = [], []
        for v, m in zip(values, means):
            name = names.get(v, f"class {v}")
            # a class whose mean the library holds already (the clicked targets' mean, added before) is not
            # added twice under another name
            if any(h.shape == m.shape and np.allclose(h, m, rtol=1e-6, atol=0) for h in held):
                same.append(name)
                continue
            added.append(self._add(name, m))
        self.refresh()
        if same:
            self.status.setText(self.status.text() + f" Not added again (the library holds the same mean): "
                                f"{', '.join(same)}.")
        return added

    def set_role(self, names, role: str) -> None:
        for n in [names] if isinstance(names, str) else names:
            if n in self.roles:
                self.roles[n] = role
        if role == "target" and names:
            self.use.setChecked(True)
        self.refresh()

    def _selected(self) -> list[str]:
        return [it.text(0) for it in self.tree.selectedItems()]

    def names_with(self, role: str) -> list[str]:
        return [n for n in (self.library.names if self.library else []) if self.roles.get(n) == role]

    # ------------------------------------------------------------------ for Train & Run
    def unsaved(self) -> list[str]:
        """The library's spectra that no file holds (added since it was opened or saved)."""
        return [] if self.library is None else [n for n in self.library.names if n not in self._in_file]

    def settings(self) -> dict:
        """The chosen targets and undesired signatures under the request's keys
        (:class:`hyperapp.request.DetectRequest`): the library's file and the names; {} when the library is
        not in use, or its file does not hold every chosen spectrum (spectra added and not saved: the run
        takes them as arrays, and a batch job saved from it is refused until the library is saved)."""
        if self.library is None or not self.use.isChecked() or not self.library.path:
            return {}
        if not Path(self.library.path).is_file():
            return {}
        targets, undesired = self.names_with("target"), self.names_with("undesired")
        if set(targets + undesired) - self._in_file:
            return {}
        out: dict = {}
        if targets:
            out.update(target_spectra=str(self.library.path), spectra=",".join(targets))
        if undesired:
            out.update(undesired_spectra=(str(self.library.path),), undesired_names=",".join(undesired))
        return out

    def run_kwargs(self, cube):
        """``run_detection`` keywords for the chosen targets and undesired signatures ({} when the library
        is not in use); None after showing the error when they cannot be brought onto the cube."""
        from hyperapp.io.signatures import signature_kwargs

        if self.library is None or not self.use.isChecked():
            return {}
        targets, undesired = self.names_with("target"), self.names_with("undesired")
        if not targets and not undesired:
            return {}
        key = (id(self.library), len(self.library), tuple(targets), tuple(undesired), id(cube))
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]  # the live path: resampled once per library, choice and cube
        try:
            kw = signature_kwargs(cube, self.library if targets else None, targets or None,
                                  [self.library] if undesired else (), undesired or None)
        except HyperappError as exc:
            self.window.show_error(str(exc))
            return None
        self._cached = (key, kw)
        return kw

    # ------------------------------------------------------------------ display
    def refresh(self) -> None:
        sel = set(self._selected())
        self.tree.clear()
        lib = self.library
        for n in lib.names if lib else []:
            role = self.roles.get(n, "")
            it = QTreeWidgetItem([n, role or "—"])
            it.setForeground(1, QBrush(QColor(*ROLE_COLOURS[role])))
            swatch = QPixmap(12, 12)
            swatch.fill(QColor(*self.curve_colour(lib.names.index(n), n)))
            it.setIcon(0, QIcon(swatch))
            self.tree.addTopLevelItem(it)
            it.setSelected(n in sel)
        self.tree.resizeColumnToContents(0)
        self._plot()

    def cube_changed(self, *_):
        """Another cube: the library stays listed, but Train & Run stops taking its targets until they
        are ticked again (a spectrum saved from the last scene is rarely this one's target), and the
        status line says so."""
        was = self.use.isChecked()
        self.use.setChecked(False)
        self.refresh()
        if was:
            self.status.setText("Another cube: Train & Run no longer uses the library's targets; tick the box to "
                                f"use them on this cube.\n{self.status.text()}")

    def curve_colour(self, i: int, name: str) -> tuple[int, int, int]:
        """The colour of library spectrum ``i`` (``name``) on the plot and its swatch in the list."""
        role = self.roles.get(name, "")
        return ROLE_COLOURS[role] if role else OTHER_COLOURS[i % len(OTHER_COLOURS)]

    def _library_axes(self, x_label: str = "wavelength (nm)") -> None:
        """The plot's axes for spectra as the library holds them (no cube to resample to)."""
        self.plot.setLabel("bottom", x_label)
        self.plot.setLabel("left", "value (library units)")

    def _plot(self) -> None:
        from hyperapp.io.speclib import cube_level, match_scale, resample_to_cube

        self.plot.clear()
        lib, cube = self.library, self._cube()
        if lib is None or not len(lib):
            self.status.setText("No library open." if lib is None else "The library is empty.")
            self._library_axes()  # the empty plot's axes still say what a library would show on them
            return
        note = ""
        y, x = None, None
        if cube is not None:
            try:
                y, how = resample_to_cube(lib, cube)
                y, factor = match_scale(y, cube_level(cube))
                note = f"{how}" + (f"; multiplied by {factor:g} to the cube's scale" if factor != 1 else "")
                # on the Spectrum dock's axes: its wavelengths, its value scale (reflectance where the
                # header gives a scale factor)
                x, xlabel = wavelength_axis(cube)
                scale, ylabel = value_axis(cube)
                y = y / scale
                self.plot.setLabel("bottom", xlabel)
                self.plot.setLabel("left", ylabel)
            except HyperappError as exc:
                note = f"Not usable on this cube: {exc}"
        if y is None:  # the library as it is
            y = lib.spectra
            nm = lib.wavelengths_nm()
            x = nm if nm is not None else np.arange(y.shape[1], dtype=float)
            self._library_axes("wavelength (nm)" if nm is not None else "sample")
        for i, n in enumerate(lib.names):
            role = self.roles.get(n, "")
            self.plot.plot(x, y[i], pen=pg.mkPen(self.curve_colour(i, n), width=2.5 if role else 1.2))
        t, u = len(self.names_with("target")), len(self.names_with("undesired"))
        src = Path(lib.path).name if lib.path else "Unsaved library"
        unsaved = len(self.unsaved()) if lib.path else 0
        self.status.setText(f"{src}: {len(lib)} spectr{'um' if len(lib) == 1 else 'a'}"
                            + (f" ({unsaved} not saved yet)" if unsaved else "")
                            + f", {t} target, {u} undesired. {note}")

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open spectral library", self.window._last_dir(), LIBRARY_FILTER)
        if path:
            self.open_library(path)

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save spectral library", self.window._last_dir(),
                                              "ENVI spectral library (*.sli);;CSV (*.csv)")
        if path:
            self.save_library(path)


#: the library's name in the window's tool picker
LIBRARY_TOOL = "Spectral library"


def install_library_dock(window) -> LibraryDock:
    """Add the library (a tool of the window's toolbox, the MTMF scatter as its plots) to ``window``, and
    connect them: the scatter shows each mixture-tuned run, its selection the image."""
    from hyperapp.gui.mtmf_scatter import InfeasibilityScatter
    from hyperapp.gui.run_controls import scrolled

    dock = LibraryDock(window)
    area = scrolled(dock)
    scatter = dock.scatter = InfeasibilityScatter()
    # one tool of the window's toolbox: its form on the right, the MTMF scatter as its plots below
    window.toolbox.add_tool(LIBRARY_TOOL, area, plots=scatter,
                            tip="Targets and undesired signatures from spectral libraries; the MTMF scatter")

    def run_finished(run):
        res = getattr(run, "result", None)
        if res is not None and "infeasibility" in getattr(res, "maps", {}):
            scorer = "TCIMF" if run.method == "mttcimf" else "MF"  # the score the mixture tuning ran on
            scatter.set_data(res.scores, res.maps["infeasibility"], f"{run.name}: score against infeasibility",
                             f"{scorer} score (abundance estimate)")
            window._raise_plots(LIBRARY_TOOL)  # the scatter in front, not behind the Results tab

    def cube_opened(_session):
        scatter.clear()
        dock.cube_changed()

    def selection(mask):
        if mask is None:
            window._redraw_result()  # the run's own mask again
        else:
            window.view.set_mask(mask)

    window.run_finished.connect(run_finished)
    window.cube_opened.connect(cube_opened)
    scatter.selection_changed.connect(selection)
    return dock
