"""The image view: RGB or single band with a percentile stretch, zoom and pan, and the overlays
(score map with a colour map and opacity, detection mask, ROIs, FFBP boxes)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPen, QPixmap
from PySide6.QtWidgets import QListWidget, QListWidgetItem

ROI_COLOURS = {1: (255, 40, 40, 200), 2: (40, 120, 255, 160)}
#: marked pixels ringed by a screen-sized symbol up to this many (more: the outlines alone)
MAX_RINGS = 2000
#: a marked patch of at most this many pixels is ringed pixel by pixel; a larger one (a rectangle, a
#: polygon) is outlined, so the image inside stays visible
RING_PATCH = 9
#: the detection mask's colour: green, which the score colour map (inferno: black, purple, red, orange,
#: yellow) never uses, so a masked pixel cannot be read as a high score
MASK_COLOUR = (0, 230, 0, 190)
#: the truth mask's outline colour
TRUTH_COLOUR = (0, 255, 255, 230)
#: with a truth shown, the detected pixels off it (false alarms): magenta, far from the score colour map,
#: the mask's green, the truth's cyan and the marks' red and blue
FALSE_ALARM_COLOUR = (255, 0, 255, 210)
#: what the score colour bar's values are
BAR_LABEL = "score (1st-99.9th percentile)"
#: the window detector's boxes: white and dashed, apart from the green mask they surround
BOX_COLOUR = (255, 255, 255)


def stretch(img: np.ndarray, lo_pct: float = 2.0, hi_pct: float = 98.0) -> np.ndarray:
    """Per-channel percentile stretch to uint8."""
    a = np.asarray(img, dtype=np.float32)
    if a.ndim == 2:
        a = a[:, :, None]
    out = np.empty(a.shape, np.uint8)
    for k in range(a.shape[2]):
        ch = a[:, :, k]
        finite = ch[np.isfinite(ch)]
        lo, hi = np.percentile(finite, [lo_pct, hi_pct]) if finite.size else (0.0, 1.0)
        out[:, :, k] = np.clip((np.nan_to_num(ch, nan=lo) - lo) / max(hi - lo, 1e-12) * 255, 0, 255)
    return out if out.shape[2] > 1 else out[:, :, 0]


#: the score overlay's colour map (its colour bar shows the same)
SCORE_CMAP = "inferno"


def score_levels(scores: np.ndarray) -> tuple[float, float]:
    """The score range the overlay's colours span: the 1st to the 99.9th percentile of the finite scores."""
    s = np.asarray(scores, dtype=np.float32)
    finite = s[np.isfinite(s)]
    lo, hi = np.percentile(finite, [1, 99.9]) if finite.size else (0.0, 1.0)
    return float(lo), float(max(hi, lo + 1e-12))


def colourise(scores: np.ndarray, opacity: float, cmap: str = SCORE_CMAP) -> np.ndarray:
    """RGBA uint8 of a score map through a colour map (over :func:`score_levels`), with opacity that
    grows with the score (the square root of its place on the colour bar, up to ``opacity`` at its top):
    at one opacity for all, the lowest scores' dark purple covered the whole scene, where they say
    least. Pixels without data (NaN) are not drawn."""
    s = np.asarray(scores, dtype=np.float32)
    lo, hi = score_levels(s)
    t = np.clip((np.nan_to_num(s, nan=lo) - lo) / max(hi - lo, 1e-12), 0, 1)
    lut = pg.colormap.get(cmap).getLookupTable(0.0, 1.0, 256, alpha=False)
    rgba = np.empty(s.shape + (4,), np.uint8)
    rgba[..., :3] = lut[(t * 255).astype(np.uint8)]
    alpha = np.sqrt(t) * (opacity * 255)
    alpha[np.isnan(s)] = 0
    rgba[..., 3] = np.rint(alpha).astype(np.uint8)
    return rgba


#: the class legend's rows at most, under the image (more classes scroll)
LEGEND_ROWS = 3


def bar_label_forms(text: str) -> list[str]:
    """``text`` and its shorter forms, longest first: without the percentiles' parenthesis, then its
    first word ("score (1st-99.9th pct.), white: threshold" -> "score, white: threshold" -> "score")."""
    import re

    forms = [text, re.sub(r" \([^)]*\)", "", text), text.split()[0] if text.split() else text]
    return list(dict.fromkeys(forms))


class ImageView(pg.GraphicsLayoutWidget):
    """Shows an image and overlays; reports the pixel under the cursor and clicks."""

    pixel_hovered = Signal(int, int)
    pixel_clicked = Signal(int, int, object)  # row, col, the mouse event

    def __init__(self, parent=None):
        super().__init__(parent)
        self.vb = self.addViewBox(row=0, col=0, lockAspect=True, invertY=True)
        # the score overlay's colour bar, beside the image (hidden while no scores are shown)
        self.colour_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=pg.colormap.get(SCORE_CMAP),
                                          interactive=False, width=18)
        # the label beside the tick values (pyqtgraph's own label goes on the bar's narrow left edge,
        # over the gradient)
        self.colour_bar.getAxis("right").enableAutoSIPrefix(False)
        # (the colours span the 1st to the 99.9th percentile, score_levels: the scores beyond take the end
        # colours, which a bar labelled "score" alone showed as the whole range)
        self._bar_label = ""  # the label wanted; the axis shows the longest form of it its height takes
        self.set_bar_label(BAR_LABEL)
        self.colour_bar.getAxis("right").geometryChanged.connect(self._fit_bar_label)
        # the threshold on the bar (white: the colour map's top is the histogram's yellow), at its end when
        # beyond it: RX's threshold sat above the 99.9th percentile, off the bar, with nothing saying where
        self.bar_mark = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen((255, 255, 255), width=3))
        self.colour_bar.addItem(self.bar_mark)
        self.bar_mark.hide()
        self._bar_on = False  # scores shown with the bar (set_overlay)
        self.colour_bar.getAxis("right").setWidth(64)
        self.addItem(self.colour_bar, row=0, col=1)
        self.colour_bar.hide()
        self.base = pg.ImageItem(axisOrder="row-major")
        self.overlay = pg.ImageItem(axisOrder="row-major")
        self.mask_item = pg.ImageItem(axisOrder="row-major")
        self.roi_item = pg.ImageItem(axisOrder="row-major")
        # the truth drawn as lines along its pixels' edges (one screen pixel wide at any zoom), not as
        # filled border pixels: on targets of one or two pixels those hid the detection mask beneath
        self.truth_item = pg.PlotCurveItem(pen=pg.mkPen(TRUTH_COLOUR, width=1, cosmetic=True), connect="pairs")
        for z, item in enumerate((self.base, self.overlay, self.mask_item, self.truth_item, self.roi_item)):
            item.setZValue(z)
            self.vb.addItem(item)
        self.roi_lines: list = []  # the ROI classes' outlines, a curve a class
        self.hint = pg.TextItem("", color=(200, 200, 200), anchor=(0.5, 0.5))
        self.vb.addItem(self.hint)
        self.marks = pg.ScatterPlotItem(pxMode=True)
        self.marks.setZValue(9)
        self.vb.addItem(self.marks)
        self.box_items: list = []
        # what the overlays on the image are: one line under it, kept to the layers drawn
        self.key = pg.LabelItem("", justify="left", size="9pt")
        self.addItem(self.key, row=1, col=0, colspan=2)
        self._key: dict = {"boxes": False, "marks": []}  # (the truth and the mask: from what is shown)
        self._truth: np.ndarray | None = None  # the truth shown (bool), which colours the mask
        self._mask: np.ndarray | None = None  # the detection mask shown (bool)
        self._update_key()
        self.shape: tuple[int, int] | None = None
        self.scene().sigMouseMoved.connect(self._moved)
        self.scene().sigMouseClicked.connect(self._clicked)

    # ------------------------------------------------------------------ content
    def set_image(self, img_u8: np.ndarray, fit: bool | None = None) -> None:
        """Show ``img_u8``; ``fit`` the view to it (default: when its shape changed)."""
        first = self.shape != img_u8.shape[:2]
        self.hint.hide()
        self.shape = img_u8.shape[:2]
        self.base.setImage(img_u8, autoLevels=False, levels=(0, 255))
        if fit or (fit is None and first):
            self.fit()

    def fit(self) -> None:
        """Frame the image itself: autoRange framed every item, and the last cube's overlays (the ROIs,
        redrawn only after the new cube's picture) kept a small cube a thumbnail in the corner of the last
        one's frame."""
        if self.shape is not None:
            h, w = self.shape
            self.vb.setRange(QRectF(0, 0, w, h), padding=0.02)

    def show_hint(self, text: str) -> None:
        """A line in the middle of an empty view (what to do first)."""
        self.hint.setText(text)
        self.hint.setPos(0, 0)
        self.hint.show()
        self.vb.setRange(xRange=(-1, 1), yRange=(-1, 1), padding=0)

    def set_truth(self, truth: np.ndarray | None) -> None:
        """Outline of a truth mask (lines along the edges of its regions), so loading one shows where it
        is while the detection mask and the image inside it stay visible."""
        self._truth = None if truth is None else np.asarray(truth) > 0
        if self._mask is not None:  # the mask shown is coloured by the truth: hits and false alarms
            self.set_mask(self._mask)
        self._update_key()
        if truth is None:
            self.truth_item.setData([], [])
            return
        xs, ys = outline_segments(self._truth)
        self.truth_item.setData(xs, ys)

    def _key_parts(self) -> list[tuple]:
        """(colour, symbol, name) of each overlay drawn; a mask over a truth is two: its pixels on the
        truth and its false alarms."""
        k = self._key
        truth = self._truth is not None and bool(self._truth.any())
        parts = [(TRUTH_COLOUR, "\u25a1", "truth outline")] if truth else []
        if self._mask is not None and self._mask.any():
            parts += ([(MASK_COLOUR, "\u25a0", "detection on the truth"), (FALSE_ALARM_COLOUR, "\u25a0", "false alarm")]
                      if self._truth is not None else [(MASK_COLOUR, "\u25a0", "detection mask")])
        if k["boxes"]:
            parts.append((BOX_COLOUR, "\u2b1a", "window boxes"))
        return parts + [(c, "\u25cb", f"{name} marks") for name, c in k["marks"]]

    def _update_key(self) -> None:
        """The key's line: a swatch and a name for each overlay drawn (nothing drawn: an empty line)."""
        html = "&nbsp;&nbsp;&nbsp;".join(
            f"<span style='color: rgb({c[0]},{c[1]},{c[2]}); font-weight: bold'>{sym}</span>&nbsp;{text}"
            for c, sym, text in self._key_parts())
        self.key.setText(html or "&nbsp;")

    def key_entries(self) -> list[str]:
        """The key's names (for tests)."""
        return [text for _, _, text in self._key_parts()]

    def clear_layers(self) -> None:
        """Remove every overlay (a new cube)."""
        self.overlay.clear()
        self.colour_bar.hide()
        self._bar_on = False
        self.set_mask(None)
        self.set_truth(None)
        self.set_boxes([])
        self.roi_item.clear()  # the last cube's marks (the Compare view showed them over the next cube)
        self._drop_roi_lines()
        self.set_marks(None)

    def set_threshold_mark(self, t: float | None) -> None:
        """Mark threshold ``t`` on the score colour bar (None: no mark); one beyond the bar's ends sits at
        the end, and the bar's label says where it is."""
        if t is None or not self._bar_on:  # (not isVisible: a view in a tab not shown is not visible)
            self.bar_mark.hide()
            self.set_bar_label(BAR_LABEL)
            return
        lo, hi = self.colour_bar.levels()
        # the bar's own view spans its colour map's 256 rows, its axis the values: placed by its share
        self.bar_mark.setValue(256.0 * (min(max(t, lo), hi) - lo) / max(hi - lo, 1e-12))
        self.bar_mark.show()
        beyond = "above" if t > hi else "below" if t < lo else ""
        # one line, short (a second line was clipped at the view's edge)
        # (its value is the Results dock's; with it the line ran past a 1366 x 768 window's bar)
        self.set_bar_label("score (1st-99.9th pct.), " + (f"threshold {beyond}" if beyond else "white: threshold"))

    def set_bar_label(self, text: str) -> None:
        """Say what the colour bar's values are beside it: the whole ``text`` where the bar is tall enough,
        else a shorter form of it (:func:`bar_label_forms`; the Compare view's bar at 1366 x 768 cut the
        line off mid-word), the whole of it in the bar's tooltip."""
        self._bar_label = text
        self.colour_bar.getAxis("right").setToolTip(text)
        self._fit_bar_label()

    def drop_key_line(self) -> None:
        """Take the key line out from under the image (a second view beside the main one, whose key says
        the same): its height goes to the image."""
        if self.key.scene() is not None:
            self.removeItem(self.key)

    def bar_label_shown(self) -> str:
        """The form of the colour bar's label shown now (for tests)."""
        return getattr(self, "_bar_shown", "")

    def _fit_bar_label(self) -> None:
        from PySide6.QtGui import QFontMetrics

        axis = self.colour_bar.getAxis("right")
        room = axis.geometry().height() - 8
        fm = QFontMetrics(axis.label.font())
        forms = bar_label_forms(self._bar_label)
        text = next((f for f in forms if fm.horizontalAdvance(f) <= room), forms[-1])
        if text != getattr(self, "_bar_shown", None):
            self._bar_shown = text
            axis.setLabel(text)

    def set_overlay(self, rgba: np.ndarray | None, levels: tuple[float, float] | None = None) -> None:
        """Draw an RGBA overlay; ``levels``: the score range it spans, shown on the colour bar (None: a
        class map or nothing, no bar)."""
        if rgba is None:
            self.overlay.clear()
        else:
            self.overlay.setImage(rgba, autoLevels=False, levels=(0, 255))
        self._bar_on = rgba is not None and levels is not None
        if self._bar_on:
            self.colour_bar.setLevels(levels)
            self.colour_bar.show()
        else:
            self.colour_bar.hide()

    def set_mask(self, mask: np.ndarray | None, colour=MASK_COLOUR) -> None:
        """Fill the pixels of a detection mask (None: none); with a truth shown, its pixels on the truth
        in ``colour`` and those off it (false alarms) in :data:`FALSE_ALARM_COLOUR`."""
        self._mask = None if mask is None else np.asarray(mask, bool)
        self._update_key()
        if mask is None:
            self.mask_item.clear()
            return
        rgba = np.zeros(self._mask.shape + (4,), np.uint8)
        rgba[self._mask] = colour
        if self._truth is not None and self._truth.shape == self._mask.shape:
            rgba[self._mask & ~self._truth] = FALSE_ALARM_COLOUR
        self.mask_item.setImage(rgba, autoLevels=False, levels=(0, 255))

    def set_rois(self, labels: np.ndarray, lut: np.ndarray | None = None, names: dict | None = None) -> None:
        """Draw the ROI label map as outlines over a faint tint, so the image inside a marked area stays
        visible; ``lut`` holds an RGBA row per label value (row 0 transparent), ``names`` the classes'
        names by label value (for the key)."""
        if lut is None:
            lut = np.zeros((3, 4), np.uint8)
            for k, c in ROI_COLOURS.items():
                lut[k] = c
        lab = np.minimum(labels, len(lut) - 1)
        rgba = lut[lab].copy()
        rgba[..., 3] = np.where(lab > 0, 40, 0)
        self.roi_item.setImage(rgba, autoLevels=False, levels=(0, 255))
        # outlined along the pixels' edges, not by painting border pixels: a patch one or two pixels
        # wide was all border, a solid block over the pixels marked
        self._drop_roi_lines()
        for v, (xs, ys) in class_outlines(lab).items():
            it = pg.PlotCurveItem(xs, ys, pen=pg.mkPen(tuple(int(c) for c in lut[v][:3]), width=1.5, cosmetic=True),
                                  connect="pairs")
            it.setZValue(self.roi_item.zValue())
            self.vb.addItem(it)
            self.roi_lines.append(it)
        self.set_marks(labels, lut, names)

    def _drop_roi_lines(self) -> None:
        for it in self.roi_lines:
            self.vb.removeItem(it)
        self.roi_lines = []

    def set_marks(self, labels: np.ndarray | None, lut: np.ndarray | None = None, names: dict | None = None) -> None:
        """Ring every small marked patch (a click, a few pixels) once, at its centre, with a symbol of
        fixed screen size in its class colour, so a single click stays visible at any zoom; larger
        patches, and every mark past :data:`MAX_RINGS` pixels, keep their outlines only. One ring a patch,
        not a pixel: an imported truth of 3 x 3 targets drew nine overlapping rings each, solid blobs
        that hid the targets and their outlines."""
        from scipy import ndimage

        present = np.unique(labels[labels > 0]) if labels is not None else []
        self._key["marks"] = [((names or {}).get(int(v), f"class {int(v)}"), tuple(int(x) for x in lut[v][:3]))
                              for v in present if lut is not None and v < len(lut)]
        self._update_key()
        n = int(np.count_nonzero(labels)) if labels is not None else 0
        if n == 0 or n > MAX_RINGS or lut is None:
            self.marks.setData([], [])
            return
        patches, count = ndimage.label(labels > 0)
        rr, cc = np.nonzero(patches)
        ids = patches[rr, cc]
        size = np.bincount(ids, minlength=count + 1)
        small = np.flatnonzero(size[1:] <= RING_PATCH) + 1
        if not small.size:
            self.marks.setData([], [])
            return
        yc = np.bincount(ids, weights=rr, minlength=count + 1)[small] / size[small]
        xc = np.bincount(ids, weights=cc, minlength=count + 1)[small] / size[small]
        first = np.zeros(count + 1, int)  # a pixel of each patch, for its class colour
        uniq, at = np.unique(ids, return_index=True)
        first[uniq] = at
        cls = np.minimum(labels[rr[first[small]], cc[first[small]]], len(lut) - 1)
        pens = [pg.mkPen(tuple(int(v) for v in lut[k][:3]), width=2.5) for k in cls]
        self.marks.setData(xc + 0.5, yc + 0.5, pen=pens, brush=None, symbol="o", size=13)

    def set_boxes(self, boxes: list[dict]) -> None:
        """Draw the window detector's boxes (dashed). The boxes a cascade adds around its RBFN's mask
        objects (``source`` ``"rbfn"``, most one pixel) are not drawn: the mask shows those pixels, and
        dozens of tiny dashed squares read as unexplained dots (they stay in the exported boxes)."""
        boxes = [b for b in boxes if b.get("source", "ffbp") != "rbfn"]
        for it in self.box_items:
            self.vb.removeItem(it)
        self.box_items = []
        self._key["boxes"] = bool(boxes)
        self._update_key()
        pen = QPen(QColor(*BOX_COLOUR))
        pen.setCosmetic(True)
        pen.setWidth(2)
        pen.setStyle(Qt.PenStyle.DashLine)
        for b in boxes:
            it = pg.QtWidgets.QGraphicsRectItem(b["col"], b["row"], b["width"], b["height"])
            it.setPen(pen)
            it.setZValue(10)
            self.vb.addItem(it)
            self.box_items.append(it)

    def zoom_to(self, r0: int, c0: int, r1: int, c1: int, margin: int = 10) -> None:
        self.vb.setRange(QRectF(c0 - margin, r0 - margin, c1 - c0 + 2 * margin, r1 - r0 + 2 * margin), padding=0)

    # ------------------------------------------------------------------ mouse
    def _pixel(self, scene_pos) -> tuple[int, int] | None:
        if self.shape is None or not self.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p: QPointF = self.vb.mapSceneToView(scene_pos)
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        if 0 <= r < self.shape[0] and 0 <= c < self.shape[1]:
            return r, c
        return None

    def _moved(self, pos) -> None:
        px = self._pixel(pos)
        if px is not None:
            self.pixel_hovered.emit(*px)

    def _clicked(self, ev) -> None:
        px = self._pixel(ev.scenePos())
        if px is not None:
            self.pixel_clicked.emit(px[0], px[1], ev)


def outline_segments(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The outline of a boolean mask's regions as line segments, for a curve drawn with
    ``connect="pairs"``: every pixel edge between a masked pixel and an unmasked one (or the image's
    edge), in image coordinates, where pixel (row r, column c) spans x in [c, c + 1] and y in [r, r + 1].
    Returns ``(xs, ys)``, two points a segment."""
    return class_outlines(np.asarray(mask, bool).astype(np.int8)).get(1, (np.zeros(0), np.zeros(0)))


def class_outlines(labels: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The outline of each labelled (non-zero) class of an integer map, as :func:`outline_segments` gives
    a mask's, in one pass over the map: {label: (xs, ys)}. An edge between two classes is drawn in the
    colour of the one below or to the right of it (either would do; both would overdraw)."""
    pad = np.pad(np.asarray(labels), 1)
    hr, hc = np.nonzero(pad[1:, 1:-1] != pad[:-1, 1:-1])  # edge along y = hr, x from hc to hc + 1
    vr, vc = np.nonzero(pad[1:-1, 1:] != pad[1:-1, :-1])  # edge along x = vc, y from vr to vr + 1
    below, above = pad[1:, 1:-1][hr, hc], pad[:-1, 1:-1][hr, hc]
    right, left = pad[1:-1, 1:][vr, vc], pad[1:-1, :-1][vr, vc]
    hv = np.where(below != 0, below, above)  # the class each edge outlines
    vv = np.where(right != 0, right, left)
    xs = np.concatenate([np.stack([hc, hc + 1], 1), np.stack([vc, vc], 1)]).astype(np.float64)
    ys = np.concatenate([np.stack([hr, hr], 1), np.stack([vr, vr + 1], 1)]).astype(np.float64)
    v = np.concatenate([hv, vv])
    order = np.argsort(v, kind="stable")
    v, xs, ys = v[order], xs[order], ys[order]
    out = {}
    cuts = np.flatnonzero(np.diff(v)) + 1
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, v.size]):
        if b > a and v[a] != 0:
            out[int(v[a])] = (xs[a:b].ravel(), ys[a:b].ravel())
    return out


def colourise_labels(labels: np.ndarray, opacity: float, values=None, colours=None) -> np.ndarray:
    """RGBA uint8 of a class or cluster map (-1 transparent): label ``values[i]`` in ``colours[i]``, or
    one colour of the class palette per label."""
    from hyperapp.io.writers import class_colour

    lab = np.asarray(labels)
    top = int(lab.max(initial=0)) + 1
    lut = np.asarray([class_colour(i) for i in range(max(top, 1))], np.uint8)
    if values is not None and colours is not None:
        for v, c in zip(values, colours):
            if 0 <= int(v) < top:
                lut[int(v)] = c[:3]
    rgba = np.zeros(lab.shape + (4,), np.uint8)
    ok = lab >= 0
    rgba[ok, :3] = lut[lab[ok]]
    rgba[ok, 3] = int(round(opacity * 255))
    return rgba


class ClassLegend(QListWidget):
    """The colour legend of a class or cluster map on the image: a swatch, the name and the pixel count of
    each class; hidden while no class map is shown. It lies under the image, its lines side by side and
    wrapping, as tall as they need (:data:`LEGEND_ROWS` rows at most, then it scrolls): beside the image
    it took a 210-pixel column, mostly empty for the few classes of a map."""

    def __init__(self, parent=None):
        from PySide6.QtWidgets import QListView, QSizePolicy

        super().__init__(parent)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(True)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setSpacing(1)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip("The classes drawn on the image")
        self.title = ""
        self.hide()

    def show_classes(self, title: str, names: list[str], colours: list, counts: list[int] | None = None,
                     tip: str = "") -> None:
        """List ``names`` in ``colours`` under ``title`` (with each class's pixel ``counts``); ``tip`` says
        what the colours are (the legend's and every line's tooltip)."""
        self.clear()
        self.setToolTip(tip or "The classes drawn on the image")
        self.title = title
        head = QListWidgetItem(f"{title}:")
        f = head.font()
        f.setBold(True)
        head.setFont(f)
        head.setFlags(Qt.ItemFlag.NoItemFlags | Qt.ItemFlag.ItemIsEnabled)
        self.addItem(head)
        for i, (name, c) in enumerate(zip(names, colours)):
            pix = QPixmap(14, 14)
            pix.fill(QColor(*[int(v) for v in c[:3]]))
            text = name if counts is None else f"{name} ({counts[i]} px)"
            item = QListWidgetItem(QIcon(pix), text)
            item.setToolTip(tip)
            self.addItem(item)
        self.show()
        self.fit_height()

    def fit_height(self) -> None:
        """As tall as its lines laid out at its width need, :data:`LEGEND_ROWS` rows at most."""
        if not self.count():
            return
        self.doItemsLayout()
        row = max(self.sizeHintForRow(0), self.fontMetrics().lineSpacing() + 4)
        bottom = max(self.visualItemRect(self.item(i)).bottom() for i in range(self.count()))
        bottom += self.verticalOffset()  # (laid out while scrolled: the rows above count too)
        frame = 2 * self.frameWidth() + 2 * self.spacing()
        self.setFixedHeight(min(bottom + 1, LEGEND_ROWS * (row + 2 * self.spacing())) + frame)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.fit_height()

    def entries(self) -> list[str]:
        """The class lines (for tests)."""
        return [self.item(i).text() for i in range(1, self.count())]

    def hide_classes(self) -> None:
        self.clear()
        self.title = ""
        self.hide()
