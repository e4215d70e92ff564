"""What every click on a resident image reuses: the image's no-data test and its background sums.

The window keeps the cube's pixels on the device between clicks (``run_detection(..., image=)``), and
the pixels do not change between clicks; only the clicks do. So what depends on the pixels alone is
computed on the first click on an image and kept with it, as Spectral Python's users compute
``stats = calc_stats(img)`` once and ENVI keeps a statistics file:

* the no-data test: the image's largest and smallest value (two reductions over the cube), and where
  some pixel has no data, the map of the pixels with data and its host copy;
* the background sums (:class:`~hyperapp.models.stats.PixelSums`: the sum and scatter of the pixels
  with data about a rough mean, and their count), from which ACE, MF, RX and CEM take their statistics,
  each click subtracting its clicked targets' rows exactly (:meth:`BackgroundStats.from_pixels`);
* what a model's fit hands on to the next (:attr:`ResidentImage.kept`): the RBFN's whitening and
  training background wherever a click samples the same pixels as the last (:mod:`hyperapp.models.rbfn_reuse`).

The entry is keyed on the image object itself: it holds a weak reference to it, and a finalizer drops the
entry when the image is freed, so a new cube (even one the allocator puts at the same address) never
finds an old image's entry. The resident image must not be written in place (the window never does;
every step that changes pixels makes a new array). Files, streamed runs and batches never come here.
"""

from __future__ import annotations

import threading
import weakref

#: id(image) -> its entry; each entry is dropped by a finalizer when its image is freed
_ENTRIES: dict[int, ResidentImage] = {}
_LOCK = threading.Lock()


class ResidentImage:
    """What the clicks on one resident image share (see the module). Computed on first use, under a lock
    (the window's runs are worker threads), and never written after."""

    def __init__(self, image):
        self._ref = weakref.ref(image)
        self._lock = threading.RLock()
        self._extremes: tuple[float, float] | None = None
        self._valid = None
        self.magnitude_checked = False
        self._sums = None
        #: what a model's fit hands on to the next fit on this image (its own entries: the RBFN's,
        #: :mod:`hyperapp.models.rbfn_reuse`)
        self.kept: dict = {}

    @property
    def image(self):
        """The image, or None once it is freed."""
        return self._ref()

    def extremes(self) -> tuple[float, float]:
        """:func:`hyperapp.reading.tiles.extremes` of the image (its largest and smallest value)."""
        with self._lock:
            if self._extremes is None:
                from hyperapp.reading.tiles import extremes

                self._extremes = extremes(self._alive())
            return self._extremes

    def valid(self):
        """(valid, valid on the host, no-data count): the (rows, cols) map of the pixels with data on the
        image's device and on the host, or (None, None, 0) when every pixel has data."""
        with self._lock:
            if self._valid is None:
                import numpy as np

                from hyperapp.core.backend import to_host
                from hyperapp.reading.tiles import finite_pixels

                if np.isfinite(self.extremes()).all():
                    self._valid = (None, None, 0)
                else:
                    valid = finite_pixels(self._alive())
                    valid_h = to_host(valid)
                    self._valid = (valid, valid_h, int(valid_h.size - np.count_nonzero(valid_h)))
            return self._valid

    @property
    def has_sums(self) -> bool:
        return self._sums is not None

    def sums(self):
        """The :class:`~hyperapp.models.stats.PixelSums` of the image's pixels with data (in their flat
        order: the rows a fit over those pixels alone would read)."""
        with self._lock:
            if self._sums is None:
                from hyperapp.core.backend import get_namespace
                from hyperapp.models.stats import PixelSums

                X = self._alive()
                P = X.reshape(-1, X.shape[-1])
                valid = self.valid()[0]
                if valid is not None:
                    xp = get_namespace(P)
                    P = P[xp.flatnonzero(valid.reshape(-1))]
                self._sums = PixelSums.of(P)
            return self._sums

    def _alive(self):
        X = self._ref()
        if X is None:  # (the caller holds the image while it asks: this would be a misuse)
            raise RuntimeError("the resident image was freed")
        return X


def resident(image) -> ResidentImage | None:
    """The entry of ``image`` (made on first use), or None where the array takes no weak reference (then
    nothing is kept: every click computes afresh)."""
    key = id(image)
    with _LOCK:
        entry = _ENTRIES.get(key)
        if entry is not None and entry.image is image:
            return entry
        try:
            entry = ResidentImage(image)
        except TypeError:
            return None
        _ENTRIES[key] = entry
        weakref.finalize(image, _drop, key, entry)
        return entry


def _drop(key: int, entry: ResidentImage) -> None:
    with _LOCK:
        if _ENTRIES.get(key) is entry:
            del _ENTRIES[key]


def warm(image) -> None:
    """Take ``image``'s no-data test and background sums now (the window's loading worker calls it after
    putting a cube on the device, so the first click finds them)."""
    entry = resident(image)
    if entry is not None:
        entry.sums()


def forget(image) -> None:
    """Drop ``image``'s entry (a test's, or a caller that wrote into the image)."""
    with _LOCK:
        entry = _ENTRIES.get(id(image))
        if entry is not None and entry.image is image:
            del _ENTRIES[id(image)]
