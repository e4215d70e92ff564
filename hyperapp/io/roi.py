"""Training-pixel ROIs: which pixels the user marked as target or background (Qt-free).

A :class:`RoiSet` is a label map (0 none, 1 target, 2 background, 3.. classes the user adds) with
undo/redo, and the shapes a user draws with: single pixels, a brush (disk), a rectangle and a polygon.
The GUI's tools call these methods and redraw on the ``changed`` callbacks; the detectors read
:attr:`targets` and :attr:`background`; a classifier (the forest panel) takes every class, each with
the name and colour the user gave it (:attr:`classes`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hyperapp.core.errors import InputError
from hyperapp.io.masks import BACKGROUND, CLASSES, NONE, TARGET  # noqa: E402,F401  (the labels ROIs store)
from hyperapp.io.writers import class_colour

#: the fixed first two classes, (name, RGB)
DEFAULT_CLASSES = [("target", (255, 40, 40)), ("background", (40, 120, 255))]
#: the most classes a label map holds (uint8, 0 = none)
MAX_CLASSES = 255


class RoiSet:
    """Marked pixels of one image, with undo/redo."""

    def __init__(self, shape: tuple[int, int], max_undo: int = 100):
        self.shape = tuple(shape)
        self.labels = np.zeros(self.shape, np.uint8)
        self._undo: list[np.ndarray] = []
        self._redo: list[np.ndarray] = []
        self.max_undo = max_undo
        self.listeners: list[Callable[[], None]] = []
        #: (name, (r, g, b)) of class 1, 2, ...: target, background, then the user's classes
        self.classes: list[tuple[str, tuple[int, int, int]]] = list(DEFAULT_CLASSES)

    # ------------------------------------------------------------------ queries
    @property
    def targets(self) -> np.ndarray:
        return self.labels == TARGET

    @property
    def background(self) -> np.ndarray | None:
        b = self.labels == BACKGROUND
        return b if b.any() else None

    def counts(self) -> dict[str, int]:
        return {"target": int(self.targets.sum()), "background": int((self.labels == BACKGROUND).sum())}

    def class_counts(self) -> np.ndarray:
        """Pixels marked per class (index 0 = class 1)."""
        return np.bincount(self.labels.reshape(-1), minlength=len(self.classes) + 1)[1:len(self.classes) + 1]

    def class_names(self) -> dict[int, str]:
        return {k: name for k, (name, _) in enumerate(self.classes, 1)}

    def class_colours(self) -> dict[int, tuple[int, int, int]]:
        return {k: colour for k, (_, colour) in enumerate(self.classes, 1)}

    def colour_table(self, alpha: int = 180) -> np.ndarray:
        """RGBA per label value (row 0 transparent), for drawing the ROIs."""
        lut = np.zeros((len(self.classes) + 1, 4), np.uint8)
        for k, (_, c) in enumerate(self.classes, 1):
            lut[k] = (*c, alpha)
        return lut

    # ------------------------------------------------------------------ classes
    def add_class(self, name: str, colour: tuple[int, int, int] | None = None) -> int:
        """A new class (the next label value); returns it."""
        name = str(name).strip()
        if not name:
            raise InputError("a class needs a name")
        if name in (n for n, _ in self.classes):
            raise InputError(f"there is already a class named {name!r}")
        if len(self.classes) >= MAX_CLASSES:
            raise InputError(f"at most {MAX_CLASSES} classes")
        self.classes.append((name, tuple(colour) if colour else class_colour(len(self.classes) + 2)))
        self._changed()
        return len(self.classes)

    def rename_class(self, k: int, name: str) -> None:
        name = str(name).strip()
        if not name or name in (n for i, (n, _) in enumerate(self.classes, 1) if i != k):
            raise InputError(f"class names must be unique and not empty: {name!r}")
        self.classes[k - 1] = (name, self.classes[k - 1][1])
        self._changed()

    def set_class_colour(self, k: int, colour: tuple[int, int, int]) -> None:
        self.classes[k - 1] = (self.classes[k - 1][0], tuple(int(c) for c in colour[:3]))
        self._changed()

    def remove_class(self, k: int) -> None:
        """Remove a class the user added (3..): its pixels are unmarked, later classes move down by one."""
        if k <= BACKGROUND or k > len(self.classes):
            raise InputError("target and background stay: they are what the detectors train on")
        lab = self.labels.copy()
        lab[lab == k] = NONE
        lab[lab > k] -= 1
        del self.classes[k - 1]
        self.set_labels(lab)

    # ------------------------------------------------------------------ edits
    def _apply(self, mask: np.ndarray, cls: int) -> None:
        if not mask.any():
            return
        self._undo.append(self.labels.copy())
        del self._undo[: -self.max_undo]
        self._redo.clear()
        self.labels[mask] = cls
        self._changed()

    def _changed(self) -> None:
        for f in self.listeners:
            f()

    def _cls(self, cls: str | int) -> int:
        if isinstance(cls, str):
            if cls == "erase":
                return NONE
            for k, (name, _) in enumerate(self.classes, 1):
                if name == cls:
                    return k
            raise InputError(f"unknown ROI class {cls!r}")
        k = int(cls)
        if not 0 <= k <= len(self.classes):
            raise InputError(f"unknown ROI class {k}")
        return k

    def mark_pixels(self, pixels, cls: str | int = "target") -> None:
        """Mark (row, col) pixels; pixels outside the image are an :class:`InputError`."""
        p = np.asarray(pixels, dtype=np.int64).reshape(-1, 2)
        bad = (p[:, 0] < 0) | (p[:, 0] >= self.shape[0]) | (p[:, 1] < 0) | (p[:, 1] >= self.shape[1])
        if bad.any():
            r, c = p[bad][0]
            raise InputError(f"pixel ({r}, {c}) is outside the {self.shape[0]}x{self.shape[1]} image")
        m = np.zeros(self.shape, bool)
        m[p[:, 0], p[:, 1]] = True
        self._apply(m, self._cls(cls))

    def brush(self, row: float, col: float, radius: float, cls: str | int = "target") -> None:
        rr, cc = np.ogrid[: self.shape[0], : self.shape[1]]
        self._apply((rr - row) ** 2 + (cc - col) ** 2 <= radius**2, self._cls(cls))

    def rectangle(self, r0: int, c0: int, r1: int, c1: int, cls: str | int = "background") -> None:
        """Mark rows r0..r1 and cols c0..c1 inclusive (clipped to the image)."""
        r0, r1 = sorted((int(r0), int(r1)))
        c0, c1 = sorted((int(c0), int(c1)))
        m = np.zeros(self.shape, bool)
        m[max(r0, 0): min(r1 + 1, self.shape[0]), max(c0, 0): min(c1 + 1, self.shape[1])] = True
        self._apply(m, self._cls(cls))

    def polygon(self, vertices, cls: str | int = "target") -> None:
        """Mark the pixels whose centres fall inside the polygon of (row, col) vertices."""
        from PIL import Image, ImageDraw

        v = [(float(c), float(r)) for r, c in vertices]
        if len(v) < 3:
            raise InputError("a polygon needs at least 3 vertices")
        img = Image.new("1", (self.shape[1], self.shape[0]), 0)
        ImageDraw.Draw(img).polygon(v, fill=1, outline=1)
        self._apply(np.asarray(img, dtype=bool), self._cls(cls))

    def clear(self) -> None:
        self._apply(self.labels > 0, NONE)

    def set_labels(self, labels: np.ndarray) -> None:
        a = np.asarray(labels)
        if a.shape != self.shape:
            raise InputError(f"ROI mask is {a.shape[0]}x{a.shape[1]}, the image is {self.shape[0]}x{self.shape[1]}")
        top = int(a.max(initial=0))
        if top > MAX_CLASSES:
            raise InputError(f"ROI mask holds class {top}; at most {MAX_CLASSES} classes")
        while len(self.classes) < top:  # classes a loaded map holds beyond the named ones
            self.classes.append((f"class {len(self.classes) + 1}", class_colour(len(self.classes) + 2)))
        self._undo.append(self.labels.copy())
        self._redo.clear()
        self.labels = a.astype(np.uint8)
        self._changed()

    # ------------------------------------------------------------------ history
    def undo(self) -> bool:
        if not self._undo:
            return False
        self._redo.append(self.labels.copy())
        self.labels = self._undo.pop()
        self._changed()
        return True

    def redo(self) -> bool:
        if not self._redo:
            return False
        self._undo.append(self.labels.copy())
        self.labels = self._redo.pop()
        self._changed()
        return True

    # ------------------------------------------------------------------ files
    def export(self, path):
        """Write the ROIs: ``.csv`` as ``row,col,class`` lines, else a label mask (``.npy``/``.png``/ENVI);
        returns the file written (for ENVI, its header)."""
        from pathlib import Path

        from hyperapp.io.atomic import atomic_write_text
        from hyperapp.io.writers import write_envi, write_npy

        p = Path(path)
        if not self.labels.any():  # an empty file would pass for ROIs that were lost
            raise InputError("no pixels are marked: mark ROIs first (nothing was written)", p)
        if p.suffix.lower() == ".csv":
            rr, cc = np.nonzero(self.labels)
            names = self.class_names()
            atomic_write_text(p, "row,col,class\n" + "".join(
                f"{r},{c},{names[int(self.labels[r, c])]}\n" for r, c in zip(rr, cc)))
            return p
        if p.suffix.lower() == ".npy":
            return write_npy(p, self.labels)
        if p.suffix.lower() == ".png":
            from PIL import Image

            from hyperapp.io.atomic import atomic_paths

            with atomic_paths(p) as (tmp,):
                Image.fromarray(self.labels).save(tmp, format="PNG")
            return p
        # an ENVI classification file, as ENVI writes ROIs' class maps: its class names and colours travel
        # with it, and a job's glob over the folder leaves it out as a mask, not a cube
        lookup = [0, 0, 0] + [int(v) for _, colour in self.classes for v in colour]
        return write_envi(p, self.labels, classes={"class names": ["Unclassified", *(n for n, _ in self.classes)],
                                                   "class lookup": lookup})

    def _class_of(self, name: str) -> int:
        """The label of a class name from a CSV (a new class when the name is new)."""
        for k, (n, _) in enumerate(self.classes, 1):
            if n == name:
                return k
        return self.add_class(name)

    def import_(self, path) -> None:
        """Read ROIs written by :meth:`export`, a ``row,col`` CSV (targets) or any label mask."""
        from pathlib import Path

        from hyperapp.io import read_mask
        from hyperapp.io.masks import read_pixel_classes

        p = Path(path)
        if p.suffix.lower() == ".csv":
            pts, names = read_pixel_classes(p, self.shape)  # the one reader of pixel lists (CLI and jobs too)
            lab = np.zeros(self.shape, np.uint8)
            if names is None:  # a row,col list: targets
                lab[pts[:, 0], pts[:, 1]] = TARGET
            else:  # the classes by name, as exported (a name not yet here becomes a class)
                for (r, c), k in zip(pts.tolist(), names):
                    lab[r, c] = self._class_of(k)
            self.set_labels(lab)
        else:
            from hyperapp.io.masks import class_names_of

            m = read_mask(p, self.shape)
            names = class_names_of(p)
            if names:  # a classification file (:meth:`export` writes one): its classes by name
                lab = np.zeros(self.shape, np.uint8)
                for k, name in names.items():
                    if (m == k).any():
                        lab[m == k] = self._class_of(name)
                self.set_labels(lab)
            else:
                self.set_labels(np.where(m >= BACKGROUND, BACKGROUND, np.where(m > 0, TARGET, NONE)))
