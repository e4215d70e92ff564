"""Many spectra against many: the spectral angle (SAM) and the spectral information divergence (SID) of
every pair, as a spectral library's best matches for a set of spectra (a detection review's objects).

Both are written once against the inputs' array module (NumPy or CuPy) and reduce to one matrix product
each, never a loop over spectra:

* SAM: angle(a, b) = arccos(a·b / (|a| |b|)), in radians (0 = the same shape).
* SID (Chang 2000): with p = a / Σa and q = b / Σb read as distributions over the bands,
  D(a, b) = Σ (p - q)(log p - log q) = Σ p log p + Σ q log q - p·log q - q·log p, 0 for the same shape.
  Values below :data:`~hyperapp.models.classic.SID_EPS` count as it (in both spectra), as the SID detector
  (:class:`hyperapp.models.classic.SID`) reads them: its score of a pixel against a target is minus this
  divergence.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace
from hyperapp.models.classic import SID_EPS  # the SID detector's floor: one formula for both

__all__ = ["SID_EPS", "best_matches", "sam_angles", "sid_divergences"]


def _rows(A, xp):
    return xp.atleast_2d(xp.asarray(A, dtype=xp.float64))


def sam_angles(A, B):
    """Spectral angles (radians) between every row of ``A`` (n, bands) and every row of ``B`` (m, bands):
    an (n, m) array. A spectrum of zeros has no direction: its angles are NaN."""
    xp = get_namespace(A, B)
    A, B = _rows(A, xp), _rows(B, xp)
    na = xp.sqrt((A * A).sum(axis=1))
    nb = xp.sqrt((B * B).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (A @ B.T) / xp.multiply(na[:, None], nb[None, :])
    return xp.arccos(xp.clip(cos, -1.0, 1.0))


def _shares(A, xp):
    """The rows of ``A`` as distributions over the bands (values floored at ``SID_EPS``) and their logs."""
    P = xp.maximum(A, SID_EPS)
    P = P / P.sum(axis=1, keepdims=True)
    return P, xp.log(P)


def sid_divergences(A, B):
    """Spectral information divergences between every row of ``A`` (n, bands) and every row of ``B``
    (m, bands): an (n, m) array, 0 or more (0: the same shape)."""
    xp = get_namespace(A, B)
    A, B = _rows(A, xp), _rows(B, xp)
    P, logP = _shares(A, xp)
    Q, logQ = _shares(B, xp)
    own_p = (P * logP).sum(axis=1)
    own_q = (Q * logQ).sum(axis=1)
    D = own_p[:, None] + own_q[None, :] - P @ logQ.T - logP @ Q.T
    return xp.maximum(D, 0.0)  # rounding leaves -1e-17 where the shapes are the same


def best_matches(D, k: int):
    """The ``k`` smallest values of each row of ``D`` (n, m): (indices (n, k), values (n, k)), smallest
    first, on ``D``'s array module (NaN last)."""
    xp = get_namespace(D)
    k = max(1, min(int(k), D.shape[1]))
    key = xp.where(xp.isnan(D), xp.inf, D)
    idx = xp.argsort(key, axis=1)[:, :k]
    return idx, xp.take_along_axis(D, idx, axis=1)
