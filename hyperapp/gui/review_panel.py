"""The review list: the Results dock's object table as an analyst reviews it, each object Pending, Good
or Bad (keys G, B, P or 1, 2, 3), next and previous (N, Shift+N) centring the image on the object, its
mean spectrum beside the target's in the Spectrum dock and its best matches in the open spectral
library by SAM and by SID; the confirmed objects exported alone.

Everything it shows comes from a :class:`hyperapp.detect.review.Review` (statuses, mean spectra,
matches, ``review.csv``, the export): the panel only shows it and calls it. :func:`install_review`
connects it to the window (the image, the Spectrum dock, the library, the menus and the project).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hyperapp.core.errors import HyperappError
from hyperapp.detect.review import BAD, GOOD, PENDING, STATUS_TITLES, Review, box

#: the review list's keys (with the list focused): status, then moves
STATUS_KEYS = {Qt.Key.Key_G: GOOD, Qt.Key.Key_B: BAD, Qt.Key.Key_P: PENDING,
               Qt.Key.Key_1: GOOD, Qt.Key.Key_2: BAD, Qt.Key.Key_3: PENDING}
STATUS_COLOURS = {GOOD: (60, 200, 90), BAD: (230, 70, 70), PENDING: (200, 200, 200)}
COLUMNS = ("id", "status", "pixels", "best match: SID", "best match: SAM", "centre row", "centre col",
           "peak score", "box: rows, cols")
#: where the lon/lat columns go, where the objects carry them: after the pixels, so that the coordinates are
#: in view beside the status at 1366 x 768 (at the end they needed a scroll)
GEO_AT = COLUMNS.index("pixels") + 1
#: the matches each object gets (the detail line lists them)
MATCHES_K = 3
#: the image's smallest view around an object when next/previous centre it (pixels a side)
MIN_VIEW = 40
KEYS_TIP = ("With the list focused: G (or 1) Good, B (or 2) Bad, P (or 3) Pending; N next object, Shift+N "
            "previous. Each move centres the image on the object and draws its mean spectrum in the Spectrum dock")
#: each column's tooltip, by its name
COLUMN_TIPS = {
    "id": "The object's id, as objects.csv and review.csv name it (the rows are sorted by peak score)",
    "pixels": "The object's pixels; '(N clicked)': N of them are target pixels marked for this run, which the "
              "detector trained on, so they are no find (review.csv's clicked_pixels)",
    "status": "Pending, Good or Bad: " + KEYS_TIP,
    "best match: SID": "The open spectral library's spectrum closest by spectral information divergence (0 = the "
                       "same shape), with it",
    "best match: SAM": "The open spectral library's spectrum closest by spectral angle (radians; 0 = the same "
                       "shape), with it",
    "box: rows, cols": "The first and last row and column the object covers. objects.csv gives row0, col0 and the "
                       "ends row1, col1 one past them, as a Python slice: rows 63-64 here are row0 63, row1 65 there",
    "lon": "WGS84 longitude of the object's centroid (degrees), as objects.csv gives it",
    "lat": "WGS84 latitude of the object's centroid (degrees), as objects.csv gives it",
}


def _pixels_text(rv: Review, i: int) -> str:
    """The pixels column: the object's pixel count, and how many of them were clicked for the run."""
    n, c = rv.objects[i].get("pixels", ""), rv.clicked_in(i)
    return f"{n} ({c} clicked)" if c else str(n)


def _span(first: int, end: int) -> str:
    """An exclusive end shown as the last index covered."""
    return str(first) if end - 1 == first else f"{first}\u2013{end - 1}"


class ReviewTable(QTableWidget):
    """The object rows; takes the review's keys before the window's shortcuts (B marks background, P pins
    a spectrum elsewhere) while it has the focus."""

    key_pressed = Signal(str)  # a status, "next" or "previous"

    def _action(self, ev) -> str | None:
        mods = ev.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        if ev.key() == Qt.Key.Key_N and mods in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.ShiftModifier):
            return "previous" if mods == Qt.KeyboardModifier.ShiftModifier else "next"
        if ev.key() in STATUS_KEYS and mods == Qt.KeyboardModifier.NoModifier:
            return STATUS_KEYS[ev.key()]
        return None

    def event(self, ev) -> bool:  # noqa: D401 (Qt's name)
        if ev.type() == QEvent.Type.ShortcutOverride and self._action(ev) is not None:
            ev.accept()  # delivered as a key press here, not as the window's shortcut
            return True
        return super().event(ev)

    def keyPressEvent(self, ev) -> None:  # noqa: N802 (Qt's name)
        action = self._action(ev)
        if action is None:
            super().keyPressEvent(ev)
            return
        self.key_pressed.emit(action)


class ReviewPanel(QWidget):
    """The objects of the chosen run at its threshold, as a review list."""

    #: an object chosen (its index in the review): the window centres the image and draws its spectrum
    object_chosen = Signal(int)
    #: the review was built anew (another threshold or run) or restored
    review_changed = Signal(object)
    #: a status was set
    status_changed = Signal(int, str)
    export_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.review: Review | None = None
        #: a reopened project's (threshold, saved review) for its runs as they are added again (:func:`reopen_runs`)
        self.pending: list = []
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        bar = QHBoxLayout()
        self.buttons = {}
        for status, key, tip in ((GOOD, "G", "a target: confirmed (exported)"),
                                 (BAD, "B", "a false alarm"), (PENDING, "P", "not reviewed yet")):
            b = QPushButton(f"{STATUS_TITLES[status]} ({key})")
            b.setToolTip(f"Mark the chosen object {STATUS_TITLES[status]}: {tip}. Key {key} (or "
                         f"{'123'['gbp'.index(status[0])]}) with the list focused")
            b.setStyleSheet(f"QPushButton {{ border-left: 6px solid rgb{STATUS_COLOURS[status]}; padding: 2px 6px; }}")
            b.clicked.connect(lambda _=False, s=status: self.mark(s))
            bar.addWidget(b)
            self.buttons[status] = b
        self.prev_button = QPushButton("\u25c0 Prev")
        self.next_button = QPushButton("Next \u25b6")
        self.prev_button.setToolTip("The previous object (Shift+N), centred on the image")
        self.next_button.setToolTip("The next object (N), centred on the image")
        self.prev_button.clicked.connect(lambda: self.step(-1))
        self.next_button.clicked.connect(lambda: self.step(1))
        bar.addWidget(self.prev_button)
        bar.addWidget(self.next_button)
        self.advance = QCheckBox("then next")
        self.advance.setChecked(True)
        self.advance.setToolTip("After marking an object Good, Bad or Pending, go to the next one")
        bar.addWidget(self.advance)
        self.export_button = QPushButton("Export Good…")
        self.export_button.setToolTip("Write the Good objects only (confirmed.csv with their library match, their "
                                      "mask) and review.csv (every object's status) to a folder "
                                      "(File > Export > Confirmed objects)")
        self.export_button.clicked.connect(self.export_requested)
        bar.addWidget(self.export_button)
        bar.addStretch(1)
        lay.addLayout(bar)
        self.counts = QLabel("")
        self.counts.setWordWrap(True)
        lay.addWidget(self.counts)
        self.table = ReviewTable(0, len(COLUMNS))
        self._set_headers(())
        self.table.setToolTip(KEYS_TIP)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        lay.addWidget(self.table, 1)
        self.detail = QLabel("")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.detail)
        self.table.key_pressed.connect(self._key)
        self.table.currentCellChanged.connect(lambda r, *_: self._chosen(r))
        self.table.cellClicked.connect(lambda r, _c: self._chosen(r, again=True))
        self._shown = -1
        self.show_review(None)

    # ------------------------------------------------------------------ the review
    def show_at(self, scores: np.ndarray, threshold: float, filters: dict | None = None, geo=None,
                clicked: np.ndarray | None = None) -> Review:
        """The review of the objects above ``threshold`` (through the run's target filter ``filters``, where it
        has one): the one shown when it was made at that threshold (the run's own, :meth:`adopt`), else a
        new one whose objects keep the marks of the objects they overlap, where those agree
        (:meth:`~hyperapp.detect.review.Review.carry_statuses`). ``geo``: the cube's location, where it has
        one: the objects get the lon/lat objects.csv gives them (``hyperapp.io.objects.with_lonlat``);
        ``clicked``: the run's target marks, where known: the list says which objects hold them."""
        from hyperapp.detect.finish import mask_at

        old = self.review
        if old is not None and old.threshold == threshold:
            self.show_review(old)
            return old
        mask = mask_at(scores, threshold, filters) if filters else mask_at(scores, threshold)
        new = Review.from_mask(mask, scores, threshold, connectivity=int((filters or {}).get("connectivity", 8)))
        if geo is not None:
            from hyperapp.io.objects import with_lonlat

            new.objects = with_lonlat(new.objects, geo)
        if clicked is not None:
            new.count_clicked(clicked)
        if old is not None:
            new.carry_statuses(old)
        self.show_review(new)
        self.review_changed.emit(new)
        return new

    def adopt(self, review: Review | None) -> None:
        """Show a run's own review (None: the run has none yet; :meth:`show_at` makes one)."""
        self.show_review(review)

    def show_review(self, review: Review | None) -> None:
        """Show ``review`` (None: none), its first object chosen."""
        self.review = review
        self._shown = -1
        self.table.blockSignals(True)
        self._set_headers(() if review is None else review.geo_fields())
        self.table.setRowCount(0 if review is None else len(review))
        if review is not None:
            for i in range(len(review)):
                self._fill_row(i)
        self.table.blockSignals(False)
        for w in (*self.buttons.values(), self.prev_button, self.next_button, self.export_button):
            w.setEnabled(review is not None and len(review) > 0)
        self._count()
        self.detail.setText("" if review is None or not len(review) else
                            "Choose an object: its mean spectrum shows in the Spectrum dock, its library matches here.")

    def _set_headers(self, geo: tuple[str, ...]) -> None:
        """The columns, with the objects' lon/lat fields ``geo`` (none: no location) at :data:`GEO_AT`."""
        names = [*COLUMNS[:GEO_AT], *geo, *COLUMNS[GEO_AT:]]
        self.table.setColumnCount(len(names))
        for j, name in enumerate(names):
            head = QTableWidgetItem(name)
            head.setToolTip(COLUMN_TIPS.get(name, ""))
            self.table.setHorizontalHeaderItem(j, head)

    def _fill_row(self, i: int) -> None:
        rv = self.review
        o = rv.objects[i]
        status = rv.status[i]
        match = rv.found.best(i) if rv.found is not None else None
        vals = [int(rv.ids[i]), STATUS_TITLES[status], _pixels_text(rv, i),
                f"{match['sid_match']} ({match['sid_divergence']:.3g})" if match else "\u2014",
                f"{match['sam_match']} ({match['sam_angle']:.3g} rad)" if match else "\u2014",
                _num(o.get("centroid_row")), _num(o.get("centroid_col")), _num(o.get("peak_score"), ".4g"),
                "{}, {}".format(_span(o["row0"], o["row1"]), _span(o["col0"], o["col1"]))]
        vals[GEO_AT:GEO_AT] = [_num(o[k], ".6f") for k in rv.geo_fields()]
        for j, v in enumerate(vals):
            it = self.table.item(i, j)
            if it is None:
                it = QTableWidgetItem()
                self.table.setItem(i, j, it)
            it.setText(str(v))
        swatch = self.table.item(i, 1)
        swatch.setBackground(QBrush(QColor(*STATUS_COLOURS[status], 110 if status != PENDING else 40)))

    def refresh_matches(self) -> None:
        """The match columns again (the review's library matches changed)."""
        if self.review is None:
            return
        self.table.blockSignals(True)
        for i in range(len(self.review)):
            self._fill_row(i)
        self.table.blockSignals(False)
        if self._shown >= 0:
            self._describe(self._shown)

    def _count(self) -> None:
        rv = self.review
        if rv is None:
            self.counts.setText("No objects yet: run a detector, or File > Open results for review…")
            return
        c = rv.counts()
        where = f" from {Path(rv.source).name}" if rv.source else ""
        self.counts.setText(f"{len(rv)} object{'' if len(rv) == 1 else 's'}{where}: {c[GOOD]} Good, {c[BAD]} Bad, "
                            f"{c[PENDING]} Pending. Keys: G/B/P (or 1/2/3) mark, N/Shift+N move")

    # ------------------------------------------------------------------ moving and marking
    def current(self) -> int:
        return self.table.currentRow() if self.review is not None else -1

    def select(self, i: int) -> None:
        """Choose object ``i`` (its row): the image centres on it, its spectrum shows."""
        if self.review is None or not len(self.review):
            return
        i = min(max(int(i), 0), len(self.review) - 1)
        self.table.setCurrentCell(i, 0)
        self.table.scrollToItem(self.table.item(i, 0))
        self._chosen(i, again=True)

    def step(self, d: int) -> None:
        """The next (``d`` = 1) or previous (-1) object."""
        if self.review is None or not len(self.review):
            return
        i = self.current()
        self.select(0 if i < 0 else (i + d) % len(self.review))
        self.table.setFocus()

    def mark(self, status: str, i: int | None = None) -> None:
        """Object ``i``'s (default: the chosen one's) status; then the next object when "then next" is ticked."""
        if self.review is None or not len(self.review):
            return
        i = self.current() if i is None else i
        if i < 0:
            i = 0
        self.review.status[i] = status
        self.table.blockSignals(True)
        self._fill_row(i)
        self.table.blockSignals(False)
        self._count()
        self.status_changed.emit(i, status)
        if self.advance.isChecked() and i < len(self.review) - 1:
            self.select(i + 1)
        else:
            self._chosen(i, again=True)  # its status said again where it shows (the Spectrum dock's title)
        self.table.setFocus()

    def _key(self, action: str) -> None:
        if action in ("next", "previous"):
            self.step(1 if action == "next" else -1)
        else:
            self.mark(action)

    def _chosen(self, i: int, again: bool = False) -> None:
        if self.review is None or not (0 <= i < len(self.review)) or (i == self._shown and not again):
            return
        self._shown = i
        self._describe(i)
        self.object_chosen.emit(i)

    def _describe(self, i: int) -> None:
        rv = self.review
        o = rv.objects[i]
        head = f"Object {int(rv.ids[i])} ({STATUS_TITLES[rv.status[i]]}, {o.get('pixels', '?')} px"
        n = rv.clicked_in(i)
        head += (")" if not n else f", {'all' if n == o.get('pixels') else n} clicked as targets for this run: "
                 "the detector trained on them)")
        if rv.found is None:
            self.detail.setText(f"{head}. Open a spectral library (Tools > Spectral library) for its best matches.")
            return
        ranked = rv.found.ranked(i)
        sid = ", ".join(f"{n} {v:.3g}" for _, _, n, v in ranked)
        sam = ", ".join(f"{n} {v:.3g}" for n, v, _, _ in ranked)
        self.detail.setText(f"{head} in {rv.found.library}. SID (divergence): {sid}. SAM (radians): {sam}.")


def _num(v, fmt: str = ".1f") -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else ("" if v is None else str(v))


# ---------------------------------------------------------------------- the window's side
def centre_on(view, r0: int, c0: int, r1: int, c1: int) -> None:
    """Centre the image view on a box, keeping the zoom when the box fits it and the view is zoomed in;
    else a view of the box and a margin (at least :data:`MIN_VIEW` pixels a side)."""
    from PySide6.QtCore import QRectF

    (x0, x1), (y0, y1) = view.vb.viewRange()
    w, h = x1 - x0, y1 - y0
    rows, cols = view.shape if view.shape is not None else (r1, c1)
    bw, bh = c1 - c0, r1 - r0
    if not (bw + 4 <= w and bh + 4 <= h and (w < 0.75 * cols or h < 0.75 * rows)):
        w = h = max(MIN_VIEW, 2 * max(bw, bh) + 20)
    cx, cy = (c0 + c1) / 2.0, (r0 + r1) / 2.0
    view.vb.setRange(QRectF(cx - w / 2, cy - h / 2, w, h), padding=0)


def install_review(window) -> ReviewPanel:
    """Connect the Results dock's review list (``window.results.review``) to the window: each chosen
    object centred on the image and its mean spectrum in the Spectrum dock (beside the target's, and
    its best library match), matches in the library dock's library, the export of the Good objects,
    and File > Open results for review…. Returns the panel."""
    panel: ReviewPanel = window.results.review
    state = {"library": None}

    def session():
        return window.session

    def prepare(review: Review | None) -> None:
        """The review's mean spectra (once) and its matches in the open library (once per library)."""
        s = session()
        if review is None or s is None or not len(review):
            return
        if review.means is None:
            held = s.held_pixels() if s.bands is None else None
            review.mean_spectra(held if held is not None else s.base_cube)
        lib = window.library_dock.library
        key = None if lib is None or not len(lib) else (id(lib), len(lib), id(s.base_cube))
        if key is None:
            review.found = None
        elif review.found is None or state["library"] != key:
            from hyperapp.io.speclib import cube_level, match_scale, resample_to_cube

            try:
                spectra, _ = resample_to_cube(lib, s.base_cube)
                review.matches_for(list(lib.names), spectra, MATCHES_K, Path(lib.path or "library").name)
                # drawn on the cube's scale, as the library tool draws them
                state["curves"] = match_scale(spectra, cube_level(s.base_cube))[0]
            except HyperappError as exc:
                review.found = None
                panel.detail.setText(f"The library's matches cannot be computed: {exc}")
        state["library"] = key if review.found is not None else None

    def changed(review) -> None:
        run = window.current_run()
        if run is not None:
            run.review = review
        try:
            prepare(review)
        except HyperappError as exc:
            window.show_error(str(exc))
        panel.refresh_matches()
        if review is not None and len(review) and panel.current() < 0:
            panel.table.blockSignals(True)
            panel.table.setCurrentCell(0, 0)
            panel.table.blockSignals(False)

    def chosen(i: int) -> None:
        rv, s = panel.review, session()
        if rv is None or s is None:
            return
        try:
            prepare(rv)
        except HyperappError as exc:
            window.show_error(str(exc))
            return
        panel.refresh_matches()
        centre_on(window.view, *box(rv.objects[i]))
        highlight(*box(rv.objects[i]))
        match = None
        if rv.found is not None and state.get("curves") is not None:
            j = int(rv.found.sid_index[i, 0])
            match = (rv.found.names[j], state["curves"][j])
        oid, status = int(rv.ids[i]), STATUS_TITLES[rv.status[i]]
        window.spectrum.show_review(rv.means[i], f"object {oid} mean", f"object {oid} ({status})", match)
        _spectrum_beside(window)

    def highlight(r0: int | None = None, c0: int = 0, r1: int = 0, c1: int = 0) -> None:
        """The chosen object outlined on the image in the colour of its spectrum (None: no outline)."""
        from PySide6.QtGui import QPen
        from PySide6.QtWidgets import QGraphicsRectItem

        from hyperapp.gui.spectrum_plot import REVIEW_COLOUR

        item = state.get("outline")
        if item is not None and item.scene() is not None:
            window.view.vb.removeItem(item)
        state["outline"] = None
        if r0 is None:
            return
        pen = QPen(QColor(*REVIEW_COLOUR))
        pen.setCosmetic(True)
        pen.setWidth(2)
        item = QGraphicsRectItem(c0 - 0.5, r0 - 0.5, c1 - c0 + 1, r1 - r0 + 1)
        item.setPen(pen)
        item.setZValue(11)
        item.setToolTip("The object chosen in the review list")
        window.view.vb.addItem(item)
        state["outline"] = item

    def status_set(i: int, _status: str) -> None:
        rv = panel.review
        if rv is not None and rv.source:  # a results folder: its review.csv follows every mark
            try:
                rv.to_csv(rv.source)
            except (HyperappError, OSError) as exc:
                window.statusBar().showMessage(f"review.csv not written in {rv.source}: {exc}", 8000)

    def forget(*_) -> None:
        """Another cube, run or set of objects: no object chosen (no outline, no object spectrum)."""
        highlight()
        window.spectrum.clear_review()

    def finished(run) -> None:
        """A reopened project's run added: its saved review back (:func:`reopen_runs`)."""
        if run is None or not panel.pending:
            return
        threshold, saved = panel.pending[0]
        if threshold is None or float(threshold) != run.threshold:  # not the project's run: none of them is
            panel.pending.clear()
            return
        panel.pending.pop(0)
        restore_saved(window, run, saved)

    window.run_finished.connect(finished)
    panel.review_changed.connect(forget)
    panel.review_changed.connect(changed)
    window.cube_opened.connect(forget)
    window.results.run_selected.connect(forget)
    panel.object_chosen.connect(chosen)
    panel.status_changed.connect(status_set)
    panel.export_requested.connect(lambda: export_dialog(window))
    window.review_prepare = prepare
    return panel


def _spectrum_beside(window) -> None:
    """The Spectrum dock in view with the review list: out of the bottom tabs it shares with the Results dock,
    to the left of the image (a scene's picture is most often limited by the height there, and the width
    beside it is black). Done once; the person may dock it elsewhere again."""
    if getattr(window, "_review_split", False):
        return
    window._review_split = True
    dock = window.spec_dock
    if dock in window.tabifiedDockWidgets(window.results_dock):
        window.removeDockWidget(dock)
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        # as wide as the image's bar of controls leaves (its sliders keep their length), 320 px at least
        centre = window.width() - window.tools_dock.width()
        bar = window.centralWidget().sizeHint().width()
        window.resizeDocks([dock], [int(max(320, min(centre - bar, 0.4 * centre)))], Qt.Orientation.Horizontal)
    dock.show()


def export_dialog(window) -> None:
    folder = QFileDialog.getExistingDirectory(window, "Export the Good objects to a folder", window._last_dir())
    if folder:
        export_confirmed(window, folder)


def export_confirmed(window, folder) -> dict | None:
    """The chosen run's Good objects (and review.csv) in ``folder`` (:meth:`Review.export_confirmed`)."""
    rv = window.results.review.review
    if rv is None:
        window.show_error("no review to export: run a detector, then mark objects Good in the Results dock's "
                          "Objects tab")
        return None
    try:
        window.review_prepare(rv)
        paths = rv.export_confirmed(folder, window.session.base_cube)
    except HyperappError as exc:
        window.show_error(str(exc))
        return None
    window.statusBar().showMessage(f"exported {rv.counts()[GOOD]} Good objects to {paths['confirmed']} (and "
                                   f"review.csv beside it)", 8000)
    return paths


def open_results(window, folder) -> bool:
    """A batch run's outputs (``hyperapp --headless detect``'s folder) on the open cube, for review
    (:func:`read_results`); False after showing the error."""
    try:
        read_results(window, folder)
    except HyperappError as exc:
        window.show_error(str(exc))
        return False
    return True


def read_results(window, folder):
    """A batch run's outputs on the open cube, for review: its scores and threshold in the Results dock as a
    run of their own, its objects in the review list (with the statuses of a review.csv there). Returns
    the run; a folder that is not such outputs, or another cube's, is a :class:`HyperappError`."""
    import json

    from hyperapp.detect.finish import DetectionResult
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    s = window.session
    if s is None:
        raise HyperappError("open the results' cube first (File > Open cube…), then its results folder")
    d = Path(folder)
    review = Review.from_folder(d, (s.cube.rows, s.cube.cols))
    scores_path = next((d / f"scores{e}" for e in (".hdr", ".tif", ".npy") if (d / f"scores{e}").is_file()), None)
    if scores_path is None:
        raise HyperappError("no scores (scores.hdr, .tif or .npy) in this folder beside objects.csv", d)
    scores = np.load(scores_path, allow_pickle=False) if scores_path.suffix == ".npy" else \
        open_cube(scores_path).read()[:, :, 0]
    if scores.shape != (s.cube.rows, s.cube.cols):
        raise HyperappError(f"the scores are {scores.shape[0]} x {scores.shape[1]}, the cube {s.cube.rows} x "
                            f"{s.cube.cols}: not this cube's results", scores_path)
    try:
        report = json.loads((d / "report.json").read_text(encoding="utf-8")) if (d / "report.json").is_file() else {}
    except (OSError, ValueError) as exc:
        raise HyperappError(f"report.json is not readable ({exc})", d / "report.json") from exc
    report.setdefault("seconds", {"total": 0.0})
    method = str(report.get("method") or "results")
    threshold = float(review.threshold if review.threshold is not None else np.nanmin(scores[review.labels > 0]))
    review.threshold = threshold
    filters = dict(report.get("filters") or {})  # the run's target filter: the Results dock counts with it
    result = DetectionResult(method, scores.astype(np.float32), (review.labels > 0).view(np.uint8), threshold, report,
                             filters=filters)
    sieve = filters.get("sieve")
    request = DetectRequest(method, params=dict(report.get("params") or {}), threshold=threshold,
                            clump=int(filters.get("clump") or 0), sieve=tuple(sieve) if sieve else None,
                            connectivity=int(filters.get("connectivity") or 8))
    window.results.tabs.setCurrentIndex(0)  # no review built from the scores while the run is added
    run = window._run_done(request, result)
    run.name = f"{method} ({d.name})"
    run.results_folder = str(d)
    window.results.runs.setItemText(window.session.runs.index(run), run.name)
    restore_review(window, run, review)
    window.statusBar().showMessage(f"{len(review)} objects from {d} to review; the marks go to its review.csv", 8000)
    return run


def reopen_runs(window, runs: list[dict]) -> list[dict]:
    """A reopened project's runs (:meth:`Session.read_project`'s): those read from a results folder are read
    again now, with their saved reviews; the others are returned to be re-run, and their saved reviews
    come back as each is added (the window's ``run_finished``, in order)."""
    rest = []
    for r in runs:
        if r.get("results"):
            restore_saved(window, read_results(window, r["results"]), r.get("review"))
        else:
            rest.append(r)
    window.results.review.pending = [(r.get("threshold"), r.get("review")) for r in rest]
    return rest


def restore_review(window, run, review: Review) -> None:
    """``review`` as ``run``'s own (a project's, a results folder's), shown in the Objects tab when the run
    is the chosen one."""
    run.review = review
    if window.current_run() is run:
        panel = window.results.review
        panel.adopt(review)
        window.results.tabs.setCurrentWidget(panel)
        window.results.refresh_objects()
        panel.review_changed.emit(review)
        panel.select(0)


def restore_saved(window, run, saved: dict | None) -> None:
    """A project's saved review (:meth:`Review.to_dict`) as ``run``'s own; an unreadable one is said, and the
    run keeps none."""
    if not saved:
        return
    s = window.session
    try:
        review = Review.from_dict(saved, (s.cube.rows, s.cube.cols))
    except (HyperappError, KeyError, TypeError, ValueError) as exc:
        window.show_error(f"the project's review of {run.name} is not readable: {exc}")
        return
    restore_review(window, run, review)


def open_results_dialog(window) -> None:
    folder = QFileDialog.getExistingDirectory(window, "Open a detection's results folder for review (objects.csv, "
                                              "mask, scores)", window._last_dir())
    if folder:
        open_results(window, folder)

