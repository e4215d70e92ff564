"""What an RBFN fit on a resident image hands on to the next click's fit on the same image.

Every click re-trains from the same seed, and the pixels it samples are drawn by rejection from draws that do
not depend on the clicks (:meth:`~hyperapp.models.rbfn.RBFN.sample_indices`). So the whitening sample
(50,000 pixels with data, less the clicked targets and the marked background) is the same list of pixels
whenever no click falls in it, and the background training sample (less the targets' neighbourhoods too)
whenever no neighbourhood does. What follows from those pixels alone is then the same to the bit:

* :class:`Whitening`: the statistics' every whitening (the network's projection, the coherence input's
  and the anomaly input's) and the mean, on the device and where the host keeps them;
* :class:`TrainingBackground`: the background training rows' whitened coordinates, their k-means centres
  with each centre's members and spread, and their coherence and anomaly products.

A fit takes these from the last fit's where the lists match exactly and the parameters are the same, and
computes them otherwise, so the model is the one a fresh fit makes, to float rounding (the clicks' own
products are then taken over fewer rows, which can round differently: scores within a few 1e-6 of a fresh
fit's on the bundled land scene, the same threshold and mask); a 1024 x 1024 click then skips the
whitening sample's pass, both eigen- and Cholesky decompositions and the k-means (docs/performance.md).
The caller owns the store (``kept``, a dict): the run keeps one per resident image
(:mod:`hyperapp.detect.resident`), dropped with the image. It holds at most :data:`KEPT` whitenings, each
with one RX map (a float per pixel: 16 MB at 2048 x 2048) and :data:`KEPT` training backgrounds (the
background rows' coordinates: about 1 MB each at 64 bands).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np


@dataclass
class Whitening:
    """What the whitening sample gives a fit (device arrays where the pixels are, host arrays NumPy)."""

    #: the network's mean (float32) and projection, on the device; the projection on the host (None for
    #: ``whiten="std"``) and the mean on the host (float32), for the scoring kernel's constants
    mean: object
    proj: object = None
    proj_h: np.ndarray | None = None
    host_mean: np.ndarray | None = None
    #: the coherence input's whitening on the device (None without the input) and whether it is triangular
    coh_w: object = None
    coh_tri: bool = False
    #: the anomaly input's mean and whitening on the device (None without the input), whether triangular
    a_mu: object = None
    a_w: object = None
    a_tri: bool = False
    #: the anomaly input's RX of every pixel of the image (GPU only): (the image's key, the map, the event
    #: after which it is complete), from the first fit's early pass (``RBFN._start_early_passes``) or, where
    #: none started (a small image), from its score's own pass (``RBFN._add_coherence_fused``)
    rx_map: tuple | None = None


@dataclass
class TrainingBackground:
    """What the background training rows give a fit, under one :class:`Whitening`."""

    #: their whitened coordinates (device, float32)
    Zb: object
    #: how many centres the k-means placed (the hidden neurons less the target centres, which follow the
    #: clicks' count where that is smaller than asked)
    k: int
    #: the k-means centres (host float32), each centre's member count and summed squared member distance
    centres: np.ndarray
    counts: np.ndarray
    ssq: np.ndarray
    #: the rows' coherence-whitened coordinates (device) and their squared norms (host); None without the input
    coh_z: object = None
    coh_sq: np.ndarray | None = None
    #: the rows' squared Mahalanobis distances, the anomaly input's (host); None without it
    an_sq: np.ndarray | None = None


#: whitening samples a store keeps (the last few: clicks that land in the sample make samples of their own,
#: and a person's next click most often samples the common one again), and training backgrounds per sample
KEPT = 4


class Reuse:
    """One fit's handle on a store: what it found there (:attr:`whitening`, :attr:`background`, each None
    where the lists or parameters differ) and, after the fit, what it computed, kept for the next."""

    def __init__(self, kept: dict | None, key: tuple, stat_idx: np.ndarray, bg_idx: np.ndarray, k: int):
        """``k``: how many centres this fit's k-means places (a kept training background serves that many)."""
        self.kept, self.key, self.stat_idx, self.bg_idx = kept, key, stat_idx, bg_idx
        self.whitening: Whitening | None = None
        self.background: TrainingBackground | None = None
        for entry in self._entries():
            if self._same(entry):
                self.whitening = entry[2]
                self.background = next((b for i, b in entry[3] if b.k == k and np.array_equal(i, bg_idx)), None)
                return

    def _same(self, entry) -> bool:
        """Whether a kept entry is of this fit's whitening sample and parameters."""
        return entry[0] == self.key and np.array_equal(entry[1], self.stat_idx)

    def _entries(self) -> list:
        return self.kept.setdefault("rbfn", []) if self.kept is not None else []

    def keep(self, whitening: Whitening, background: TrainingBackground) -> None:
        """Keep what this fit used for the next fits: the most recent :data:`KEPT` whitening samples, and
        for each the most recent :data:`KEPT` training backgrounds. The GUI's threads may share a store: the
        update is made under a lock, from the entries as they are then (another fit may have replaced this
        one's since it began), and replaces the list whole."""
        if self.kept is None:
            return
        with _KEEPING:
            entries = self._entries()
            entry = next((e for e in entries if self._same(e)), None) or (self.key, self.stat_idx, whitening, [])
            # (the one this fit took, or one it computed again, is moved to the front)
            others = [(i, b) for i, b in entry[3] if not (b.k == background.k and np.array_equal(i, self.bg_idx))]
            backgrounds = [(self.bg_idx, background)] + others[:KEPT - 1]
            self.kept["rbfn"] = [(entry[0], entry[1], entry[2], backgrounds)] + \
                [e for e in entries if not self._same(e)][:KEPT - 1]


#: held while a fit updates a store (:meth:`Reuse.keep`)
_KEEPING = threading.Lock()
