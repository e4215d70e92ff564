"""A review of a detection's objects, as an analyst confirms targets: each object Pending, Good or Bad,
its mean spectrum, its best matches in a spectral library (by SAM and by SID), ``review.csv`` (every
object) and the export of the confirmed (Good) objects only.

No Qt: the window's review list (:mod:`hyperapp.gui.review_panel`) shows a :class:`Review` and calls it,
the project saves it (:meth:`Review.to_dict`), and a batch run's outputs open as one
(:meth:`Review.from_folder`: ``objects.csv``, ``mask`` and ``scores`` as ``hyperapp --headless detect``
writes them).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import CubeFormatError, InputError

PENDING, GOOD, BAD = "pending", "good", "bad"
STATUSES = (PENDING, GOOD, BAD)
#: how review.csv and the window name a status
STATUS_TITLES = {PENDING: "Pending", GOOD: "Good", BAD: "Bad"}
#: the columns of review.csv (then lon, lat where the objects carry them, in degrees to 7 decimals, as
#: objects.csv gives them: about a centimetre)
CSV_FIELDS = ("id", "row0", "col0", "row1", "col1", "pixels", "centroid_row", "centroid_col", "peak_score", "status",
              "sam_match", "sam_angle", "sid_match", "sid_divergence")
GEO_FIELDS = ("lon", "lat")
REVIEW_CSV = "review.csv"
CONFIRMED_CSV = "confirmed.csv"
CONFIRMED_MASK = "confirmed_mask"


def parse_status(text: str) -> str:
    """A status as typed (``good``, ``G``, ``Bad``, ``p``): one of :data:`STATUSES`."""
    t = str(text).strip().lower()
    for s in STATUSES:
        if t in (s, s[0]):
            return s
    raise InputError(f"unknown review status {text!r}: Pending, Good or Bad")


def box(obj: dict) -> tuple[int, int, int, int]:
    """An object's bounding box ``(row0, col0, row1, col1)`` (exclusive ends)."""
    return int(obj["row0"]), int(obj["col0"]), int(obj["row1"]), int(obj["col1"])


@dataclass
class Matches:
    """A library's best matches for each object: library indices (n, k) and scores (n, k), best first,
    by SAM (angle, radians) and by SID (divergence)."""

    library: str
    names: list[str]
    sam_index: np.ndarray
    sam_angle: np.ndarray
    sid_index: np.ndarray
    sid_divergence: np.ndarray

    def best(self, i: int) -> dict:
        """Object ``i``'s best match by each measure: the columns of ``review.csv``."""
        return {"sam_match": self.names[int(self.sam_index[i, 0])], "sam_angle": float(self.sam_angle[i, 0]),
                "sid_match": self.names[int(self.sid_index[i, 0])],
                "sid_divergence": float(self.sid_divergence[i, 0])}

    def ranked(self, i: int) -> list[tuple[str, float, str, float]]:
        """Object ``i``'s k matches, rank by rank: (SAM name, angle, SID name, divergence)."""
        return [(self.names[int(a)], float(sa), self.names[int(b)], float(sd))
                for a, sa, b, sd in zip(self.sam_index[i], self.sam_angle[i], self.sid_index[i],
                                        self.sid_divergence[i])]


class Review:
    """The objects of one detection, each with a status, and what the review computed for them.

    Parameters
    ----------
    objects : list of dict
        The object table's rows (:func:`hyperapp.models.postprocess.object_table`, or ``objects.csv``):
        ``label`` (the object's id), ``pixels``, ``row0, col0, row1, col1``, and any further keys
        (``lon``/``lat`` where the cube has geolocation).
    labels : (rows, cols) int array
        The object each pixel belongs to (its ``label``; 0 outside the objects).
    source : str, optional
        The results folder the objects came from (a batch run's), or None for a run in the window.
    threshold : float, optional
        The score threshold the objects were found at.
    """

    def __init__(self, objects: list[dict], labels: np.ndarray, source: str | None = None,
                 threshold: float | None = None):
        self.objects = [dict(o) for o in objects]
        self.labels = np.asarray(to_host(labels)).astype(np.int32, copy=False)
        if self.labels.ndim != 2:
            raise InputError(f"the objects' label image must be 2-D, got shape {self.labels.shape}")
        self.ids = np.array([int(o["label"]) for o in self.objects], dtype=np.int64)
        if len(set(self.ids.tolist())) != self.ids.size:
            raise InputError("two objects share an id")
        self.status = [PENDING] * len(self.objects)
        self.source = source
        self.threshold = threshold
        self.means: np.ndarray | None = None
        self._device_means = None
        #: the last library's best matches (:meth:`matches`)
        self.found: Matches | None = None
        #: each object's pixels that were clicked as targets for its run (:meth:`count_clicked`), or None
        self.clicked: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.objects)

    def count_clicked(self, clicked) -> None:
        """Count each object's pixels among ``clicked`` (the run's target marks, a bool map of the image):
        an object made of the person's own clicks is the training, not a find, and the list says so."""
        c = np.asarray(to_host(clicked), bool)
        if c.shape != self.labels.shape:
            raise InputError(f"the clicked pixels' map is {c.shape}, the objects' {self.labels.shape}")
        per_label = np.bincount(self.labels[c], minlength=int(self.labels.max(initial=0)) + 1)
        self.clicked = per_label[self.ids] if self.ids.size else np.zeros(0, np.int64)

    def clicked_in(self, i: int) -> int:
        """Object ``i``'s pixels clicked as targets for its run (0 where the clicks are not known)."""
        return 0 if self.clicked is None else int(self.clicked[i])

    # ------------------------------------------------------------------ building one
    @classmethod
    def from_mask(cls, mask, scores, threshold: float | None = None, source: str | None = None,
                  connectivity: int = 8) -> Review:
        """The objects of a detection mask (its connected components) with their peak ``scores``."""
        from hyperapp.models.postprocess import object_table

        lab, n = _label(mask, connectivity)
        rows = object_table(None, np.asarray(to_host(scores)), labels=np.asarray(to_host(lab)), n=n)
        return cls(rows, lab, source, threshold)

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, shape: tuple[int, int] | None = None) -> Review:
        """The review of a batch run's outputs (``hyperapp --headless detect`` or a job step's folder):
        its ``objects.csv`` (every column kept, ``lon``/``lat`` among them), its mask (``mask.hdr``, or
        ``mask.tif``/``.png``/``.npy``) labelled into the same objects, the threshold of its
        ``report.json``, and the statuses of a ``review.csv`` a last review left there. ``shape``: the
        cube's (rows, cols), which the mask must have."""
        from hyperapp.io.masks import read_mask

        d = Path(folder)
        if not d.is_dir():
            raise InputError("not a results folder (it does not exist or is a file)", d)
        objects_path = d / "objects.csv"
        if not objects_path.is_file():
            raise InputError("no objects.csv in this folder: open the folder hyperapp --headless detect wrote", d)
        mask_path = next((d / f"mask{e}" for e in (".hdr", ".tif", ".png", ".npy") if (d / f"mask{e}").is_file()),
                         None)
        if mask_path is None:
            raise InputError("no mask (mask.hdr, .tif, .png or .npy) in this folder beside objects.csv", d)
        report = {}
        if (d / "report.json").is_file():
            try:
                report = json.loads((d / "report.json").read_text(encoding="utf-8"))
            except ValueError as exc:
                raise CubeFormatError(f"report.json is not readable JSON ({exc})", d / "report.json") from exc
        objects = read_objects_csv(objects_path)
        mask = read_mask(mask_path, shape) > 0
        lab, n = _label(mask, int((report.get("filters") or {}).get("connectivity") or 8))
        review = cls._matched(objects, lab, n, objects_path)
        review.source = str(d)
        review.threshold = report.get("threshold")
        if (d / REVIEW_CSV).is_file():
            review.read_statuses(d / REVIEW_CSV)
        return review

    @classmethod
    def _matched(cls, objects: list[dict], lab: np.ndarray, n: int, where) -> Review:
        """``objects`` (a CSV's rows) onto the mask's labels ``lab``: each row's id is its label there when
        its box and pixel count agree; otherwise each row is found by its box."""
        from hyperapp.models.postprocess import object_columns

        if len(objects) != n:
            raise InputError(f"objects.csv lists {len(objects)} objects and the mask beside it holds {n}: they "
                             "are not the same run's outputs", where)
        cols = object_columns(None, np.zeros(lab.shape, np.float32), labels=lab, n=n)
        by_label = {int(lb): (int(p), (int(a), int(b), int(c), int(e)))
                    for lb, p, a, b, c, e in zip(cols["label"], cols["pixels"], cols["row0"], cols["col0"],
                                                 cols["row1"], cols["col1"])}
        if all(by_label.get(int(o["label"])) == (int(o["pixels"]), box(o)) for o in objects):
            return cls(objects, lab)
        by_box: dict = {}
        for lb, (p, b) in by_label.items():
            by_box.setdefault((p, b), []).append(lb)
        relabel = np.zeros(n + 1, np.int32)
        for o in objects:
            found = by_box.get((int(o["pixels"]), box(o)), [])
            if len(found) != 1:
                raise InputError(f"object {o['label']} of objects.csv (rows {o['row0']}-{int(o['row1']) - 1}, cols "
                                 f"{o['col0']}-{int(o['col1']) - 1}) is not one object of the mask beside it", where)
            relabel[found[0]] = int(o["label"])
        return cls(objects, relabel[lab])

    @classmethod
    def from_dict(cls, d: dict, shape: tuple[int, int]) -> Review:
        """A review saved by :meth:`to_dict` (in a project), on an image of ``shape`` (rows, cols)."""
        if tuple(d.get("shape", shape)) != tuple(shape):
            raise InputError(f"the saved review is of a {d['shape'][0]} x {d['shape'][1]} image, the cube is "
                             f"{shape[0]} x {shape[1]}")
        lab = np.zeros(shape, np.int32)
        px = d.get("pixels") or {}
        r, c, v = (np.asarray(px.get(k, []), np.int64) for k in ("rows", "cols", "labels"))
        if r.size:
            if r.min() < 0 or c.min() < 0 or r.max() >= shape[0] or c.max() >= shape[1]:
                raise InputError("the saved review's objects do not fit the cube")
            lab[r, c] = v
        review = cls(d.get("objects", []), lab, d.get("source"), d.get("threshold"))
        review.status = [parse_status(s) for s in d.get("status", [PENDING] * len(review))]
        if len(review.status) != len(review):
            raise InputError(f"the saved review has {len(review.status)} statuses for {len(review)} objects")
        return review

    def to_dict(self) -> dict:
        """The review as JSON-ready values (the project's): the objects, their pixels and statuses."""
        r, c = np.nonzero(self.labels)
        return {"shape": list(self.labels.shape), "source": self.source,
                "threshold": None if self.threshold is None else float(self.threshold),
                "objects": [{k: _plain(v) for k, v in o.items()} for o in self.objects],
                "pixels": {"rows": r.tolist(), "cols": c.tolist(), "labels": self.labels[r, c].tolist()},
                "status": list(self.status)}

    # ------------------------------------------------------------------ statuses
    def index_of(self, object_id: int) -> int:
        hit = np.flatnonzero(self.ids == int(object_id))
        if not hit.size:
            raise InputError(f"no object {object_id} in this review")
        return int(hit[0])

    def set_status(self, object_id: int, status: str) -> None:
        """Object ``object_id``'s (its ``label``) status: Pending, Good or Bad (:func:`parse_status`)."""
        self.status[self.index_of(object_id)] = parse_status(status)

    def counts(self) -> dict[str, int]:
        return {s: self.status.count(s) for s in STATUSES}

    def confirmed(self) -> list[dict]:
        """The Good objects (their rows, with their best library matches where there are any)."""
        return [self.row(i) for i, s in enumerate(self.status) if s == GOOD]

    def carry_statuses(self, other: Review) -> int:
        """Take ``other``'s statuses (a threshold moved, a run reopened); returns how many objects took one.

        With both label images (the same shape): each object takes the status its overlapping objects of
        ``other`` were given, where those marked agree (an object that grew or shrank keeps its mark; one
        that merged a Good and a Bad object stays Pending). Otherwise (``other`` read from a review.csv):
        the objects with the same box and size."""
        mine = getattr(other, "labels", None)
        if mine is not None and mine.shape == self.labels.shape:
            a, b = mine.reshape(-1), self.labels.reshape(-1)
            both = (a > 0) & (b > 0)
            pairs = np.unique(np.stack([b[both], a[both]]), axis=1) if both.any() else np.zeros((2, 0), np.int64)
            marked = {int(i): s for i, s in zip(other.ids, other.status) if s != PENDING}
            given: dict[int, set] = {}
            for new, old in pairs.T.tolist():  # one pass over the overlapping pairs of objects, not pixels
                if old in marked:
                    given.setdefault(new, set()).add(marked[old])
            n = 0
            for k, i in enumerate(self.ids.tolist()):
                if len(given.get(i, ())) == 1:
                    self.status[k] = next(iter(given[i]))
                    n += 1
            return n
        theirs = {(box(o), int(o["pixels"])): s for o, s in zip(other.objects, other.status)}
        n = 0
        for k, o in enumerate(self.objects):
            s = theirs.get((box(o), int(o["pixels"])))
            if s is not None and s != PENDING:
                self.status[k] = s
                n += 1
        return n

    def read_statuses(self, path: str | os.PathLike) -> int:
        """The statuses of a ``review.csv`` (:meth:`to_csv`) for the objects it lists with the same box and
        size; returns how many were taken."""
        p = Path(path)
        try:
            rows = list(csv.DictReader(io.StringIO(p.read_text(encoding="utf-8"))))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise CubeFormatError(f"cannot read the review ({exc})", p) from exc
        old = []
        for r in rows:
            try:
                old.append(({"label": int(r["id"]), **{k: int(r[k]) for k in ("row0", "col0", "row1", "col1", "pixels")}},
                            parse_status(r["status"])))
            except (KeyError, ValueError, TypeError) as exc:
                raise CubeFormatError(f"not a review.csv (a row without id, box or status: {exc})", p) from exc
        prior = Review.__new__(Review)
        prior.labels = None  # matched by box and size
        prior.ids = np.array([o["label"] for o, _ in old], np.int64)
        prior.objects = [o for o, _ in old]
        prior.status = [s for _, s in old]
        return self.carry_statuses(prior)

    # ------------------------------------------------------------------ spectra and matches
    def mean_spectra(self, pixels) -> np.ndarray:
        """Each object's mean spectrum, (objects, bands) float64 on the host, in the objects' order;
        computed once (later calls return it).

        ``pixels``: the image as (rows, cols, bands) on NumPy or CuPy (the window's pixels on its device),
        or a :class:`~hyperapp.core.cube.Cube` (only the rows the objects span are read). The sums are one
        scatter-add over the object pixels (``np.add.at``, ``cupyx.scatter_add`` on the GPU), no loop.
        """
        if self.means is not None:
            return self.means
        n_lab = int(self.labels.max(initial=0)) + 1
        rr = np.flatnonzero(self.labels.any(axis=1))
        if hasattr(pixels, "read") and hasattr(pixels, "bands"):  # a Cube: the rows the objects span
            r0, r1 = (int(rr[0]), int(rr[-1]) + 1) if rr.size else (0, 0)
            block = pixels.read(slice(r0, r1)) if r1 > r0 else np.zeros((0, self.labels.shape[1], pixels.bands),
                                                                        np.float32)
            lab = self.labels[r0:r1]
        else:
            block, lab = pixels, self.labels
            if tuple(block.shape[:2]) != self.labels.shape:
                raise InputError(f"the image is {block.shape[0]} x {block.shape[1]}, the objects' "
                                 f"{self.labels.shape[0]} x {self.labels.shape[1]}")
        xp = get_namespace(block)
        bands = int(block.shape[2])
        flat = xp.asarray(lab.reshape(-1))
        where = xp.flatnonzero(flat)
        P = block.reshape(-1, bands)[where].astype(xp.float64)
        which = flat[where]
        sums = xp.zeros((n_lab, bands), xp.float64)
        if xp is np:
            np.add.at(sums, which, P)
        else:
            import cupyx

            cupyx.scatter_add(sums, which, P)
        count = xp.bincount(which, minlength=n_lab).astype(xp.float64)
        ids = xp.asarray(self.ids)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums[ids] / count[ids][:, None]
        self._device_means = means
        self.means = np.asarray(to_host(means))
        return self.means

    def matches_for(self, names: list[str], spectra, k: int = 3, library: str = "") -> Matches:
        """Each object's ``k`` best matches among a library's ``spectra`` (n, bands; on the cube's bands:
        :func:`hyperapp.io.speclib.resample_to_cube`) by spectral angle and by spectral information
        divergence (:mod:`hyperapp.models.spectral_match`), on the array module the mean spectra were
        computed on. Call :meth:`mean_spectra` first. Kept as :attr:`found` (``review.csv``'s columns)."""
        from hyperapp.models.spectral_match import best_matches, sam_angles, sid_divergences

        if self.means is None:
            raise InputError("the objects' mean spectra are not computed yet")
        lib = np.asarray(spectra, np.float64)
        if lib.ndim != 2 or lib.shape[0] != len(names) or not len(names):
            raise InputError("the library holds no spectra" if not len(names) else
                             f"{len(names)} names for library spectra of shape {lib.shape}")
        if lib.shape[1] != self.means.shape[1]:
            raise InputError(f"the library's spectra have {lib.shape[1]} bands, the objects' {self.means.shape[1]}: "
                             "resample it to the cube first")
        A = self._device_means if self._device_means is not None else self.means
        xp = get_namespace(A)
        B = xp.asarray(lib)
        if len(self):
            si, sa = best_matches(sam_angles(A, B), k)
            di, dd = best_matches(sid_divergences(A, B), k)
            host = [np.asarray(to_host(v)) for v in (si, sa, di, dd)]
        else:
            kk = max(1, min(int(k), len(names)))
            host = [np.zeros((0, kk), np.int64), np.zeros((0, kk)), np.zeros((0, kk), np.int64), np.zeros((0, kk))]
        self.found = Matches(library, list(names), *host)
        return self.found

    def matches(self, library, k: int = 3, cube=None) -> Matches:
        """Each object's ``k`` best matches in ``library`` by SAM and SID (:meth:`Review.matches_for`):
        a :class:`~hyperapp.io.speclib.SpectralLibrary` (resampled to ``cube``'s bands first; without a cube,
        taken band for band) or anything with ``names`` and ``spectra`` on the cube's bands
        (:class:`~hyperapp.io.speclib.LibraryTargets`)."""
        from hyperapp.io.speclib import SpectralLibrary, resample_to_cube

        name = Path(getattr(library, "path", None) or "library").name
        if isinstance(library, SpectralLibrary) and cube is not None:
            spectra, _ = resample_to_cube(library, cube)
        else:
            spectra = library.spectra
        return self.matches_for(list(library.names), spectra, k, name)

    # ------------------------------------------------------------------ rows, CSV, exports
    def geo_fields(self) -> tuple[str, ...]:
        """``lon``, ``lat`` when every object carries them (a cube with geolocation), else none."""
        return GEO_FIELDS if self.objects and all(all(k in o for k in GEO_FIELDS) for o in self.objects) else ()

    def row(self, i: int) -> dict:
        """Object ``i``'s line of ``review.csv``."""
        o = self.objects[i]
        r = {"id": int(self.ids[i]), **{k: o.get(k, "") for k in CSV_FIELDS[1:9]}, "status": STATUS_TITLES[self.status[i]]}
        r.update(self.found.best(i) if self.found is not None and len(self) else
                 {"sam_match": "", "sam_angle": "", "sid_match": "", "sid_divergence": ""})
        if self.clicked is not None:
            r["clicked_pixels"] = self.clicked_in(i)
        for k in self.geo_fields():
            r[k] = o[k]
        return r

    def csv_text(self, rows: list[dict] | None = None) -> str:
        """``review.csv``'s text: every object (or ``rows``), its id, box, size, peak score, status, best
        library matches (name and score by SAM, in radians, and by SID), and where known its pixels clicked
        as targets for the run and its lon/lat."""
        fields = CSV_FIELDS + (("clicked_pixels",) if self.clicked is not None else ()) + self.geo_fields()
        buf = io.StringIO()
        w = csv.DictWriter(buf, fields, lineterminator="\n")
        w.writeheader()
        for r in (rows if rows is not None else [self.row(i) for i in range(len(self))]):
            w.writerow({k: (format(v, ".7f" if k in GEO_FIELDS else ".6g") if isinstance(v, float) else v)
                        for k, v in r.items()})
        return buf.getvalue()

    def to_csv(self, path: str | os.PathLike) -> Path:
        """Write ``review.csv`` (:meth:`csv_text`) at ``path`` (a folder: ``review.csv`` in it), atomically."""
        from hyperapp.io.atomic import atomic_write_text

        p = Path(path)
        if p.is_dir():
            p = p / REVIEW_CSV
        atomic_write_text(p, self.csv_text())
        return p

    def confirmed_mask(self) -> np.ndarray:
        """uint8 (rows, cols): 1 on the Good objects' pixels."""
        good = np.zeros(int(self.labels.max(initial=0)) + 1, bool)
        good[self.ids[[s == GOOD for s in self.status]]] = True
        good[0] = False
        return good[self.labels].view(np.uint8)

    def export_confirmed(self, folder: str | os.PathLike, cube=None) -> dict[str, Path]:
        """The confirmed objects only, in ``folder`` all or nothing: ``confirmed.csv`` (the Good objects'
        lines of ``review.csv``, with their library match), ``confirmed_mask`` (ENVI classification: the
        Good objects' pixels) and ``review.csv`` (every object's status). Returns the paths."""
        from hyperapp.io.atomic import atomic_write_text, staged_folder
        from hyperapp.io.writers import MASK_CLASSES, write_envi

        if not any(s == GOOD for s in self.status):
            raise InputError("no object is marked Good: confirm some first (G in the review list)")
        out = Path(folder)
        with staged_folder(out) as stage:
            atomic_write_text(stage / CONFIRMED_CSV, self.csv_text(self.confirmed()))
            atomic_write_text(stage / REVIEW_CSV, self.csv_text())
            mask = write_envi(stage / CONFIRMED_MASK, self.confirmed_mask(), cube,
                              f"hyperapp confirmed objects ({self.counts()[GOOD]} Good of {len(self)})",
                              classes=MASK_CLASSES)
            names = {"confirmed": CONFIRMED_CSV, "review": REVIEW_CSV, "mask": mask.name}
        return {k: out / v for k, v in names.items()}


def _label(mask, connectivity: int):
    from hyperapp.models.postprocess import label_objects

    return label_objects(mask, int(connectivity))


def _plain(v):
    """A JSON-ready value (NumPy scalars as Python numbers)."""
    return v.item() if isinstance(v, np.generic) else v


def read_objects_csv(path: str | os.PathLike) -> list[dict]:
    """The rows of an ``objects.csv`` (:func:`hyperapp.models.postprocess.objects_csv`) as dicts: whole
    numbers as int, others as float, text as it is; ``label``, ``pixels`` and the box required."""
    p = Path(path)
    try:
        rows = list(csv.DictReader(io.StringIO(p.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CubeFormatError(f"cannot read the object table ({exc})", p) from exc
    need = ("label", "pixels", "row0", "col0", "row1", "col1")
    if rows and any(k not in rows[0] for k in need):
        raise CubeFormatError(f"not an object table: it needs the columns {', '.join(need)}", p)

    def value(text: str):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    out = [{k: value(v) for k, v in r.items() if k is not None} for r in rows]
    for o in out:
        if not all(isinstance(o[k], int) for k in need):
            raise CubeFormatError(f"object {o.get('label')!r}: its id, size and box must be whole numbers", p)
    return out
