"""What every pixel detector shares: input checks, the label convention, and the array module.

Labels: ``y`` is an integer map over the pixels with 1 = target (the user's clicks), 0 = background
the user marked, -1 = unlabelled, -2 = no data (fill outside a swath, a bad detector pixel: NaN in the
pixels, left out of every statistic and sample). Images are (rows, cols, bands) or already flat (n, bands);
:meth:`PixelDetector.decision_function` returns scores of the same leading shape, higher = more
target-like.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace

import numpy as np

from hyperapp.core.backend import get_namespace, sparse_flatnonzero, to_host
from hyperapp.core.errors import InputError, ModelError

TARGET, BACKGROUND, UNLABELLED, NODATA = 1, 0, -1, -2


def as_pixels(X):
    """(rows, cols, bands) or (n, bands) -> ((n, bands) view, leading shape)."""
    if X.ndim == 3:
        return X.reshape(-1, X.shape[2]), X.shape[:2]
    if X.ndim == 2:
        return X, X.shape[:1]
    raise InputError(f"expected an image (rows, cols, bands) or pixels (n, bands), got shape {X.shape}")


def check_finite(X, what: str = "image", y=None) -> None:
    """Raise when ``X`` holds NaN or Inf outside the pixels ``y`` marks as no data. One sum first (a
    NaN or Inf anywhere makes it non-finite; one read of the data); the element-wise test only when the
    sum is not finite."""
    xp = get_namespace(X)
    if X.size and bool(xp.isfinite(X.sum(dtype=xp.float64))):
        return
    bad = ~xp.isfinite(X).all(axis=-1) if X.ndim > 1 else ~xp.isfinite(X)
    if y is not None:
        bad &= xp.asarray(y).reshape(bad.shape) != NODATA
    if bool(bad.any()):
        raise InputError(
            f"the {what} holds NaN or Inf values; mask them out or set the cube's no-data value"
        )


def check_not_identical(X, what: str = "cluster") -> None:
    """Refuse a selection whose spectra are all the same (one pixel repeated, a constant image): no
    analysis method learns anything from it, and each says so in the same words."""
    xp = get_namespace(X)
    # each band's least and greatest value: two reductions, no full-size comparison (an MNF's whole image)
    if X.shape[0] and not bool(xp.any(xp.not_equal(X.max(axis=0), X.min(axis=0)))):
        raise ModelError(f"the selected spectra are all identical: there is nothing to {what}")


#: the least squared Mahalanobis distance of a target from the background's mean that a statistical
#: detector can tell from it: 0.1 standard deviations (background pixels lie about sqrt(bands) away)
TARGET_APART = 1e-2


def check_target_apart(d2: float, bands: int, what: str) -> None:
    """Refuse a target at the background's mean: ``d2`` its squared Mahalanobis distance from it. The
    matched filter divides by it, so a target that is the scene's mean spectrum gave scores of +-900 and
    a mask of random background pixels, without a word."""
    from hyperapp.core.errors import ModelError

    if not d2 >= TARGET_APART:
        raise ModelError(f"the target spectrum is the background's mean (Mahalanobis distance {max(d2, 0.0) ** 0.5:.2g}; "
                         f"background pixels lie about {bands ** 0.5:.2g} from it): {what} cannot tell it from the "
                         "background; mark pixels of the target itself (where every pixel is alike, a constant "
                         "cube, there is nothing to find)")


def selected_spectra(X, at_least: int, too_few: str):
    """The selected spectra (n, bands) as float32, after the checks an analysis model starts with: the
    selection is not empty, holds at least ``at_least`` spectra (else ``too_few`` is the error), and
    every value is finite."""
    n = X.shape[0]
    if n == 0:
        raise ModelError("no spectra selected: the selection is empty")
    if n < at_least:
        raise ModelError(too_few)
    check_finite(X, "selected spectra")
    return X.astype(get_namespace(X).float32)


def check_labels(y, n: int):
    """The labels flattened and their target pixels' flat indices (on the labels' device), checked: they
    cover the ``n`` pixels, with at least one target and one non-target pixel. The index list's length
    counts the targets (a boolean map's plain sum is one thread block on the GPU: 1.6 ms at 2048 x 2048)."""
    xp = get_namespace(y)
    y = y.reshape(-1)
    if y.shape[0] != n:
        raise InputError(f"labels cover {y.shape[0]} pixels, the image has {n}")
    tgt = xp.flatnonzero(xp.equal(y, TARGET))  # a ufunc where an operand is a scalar: hyperapp.core.backend
    check_target_count(int(tgt.size), n)
    return y, tgt


def check_target_count(n_t: int, n: int) -> None:
    """At least one target pixel and one that is not, of ``n``."""
    if n_t == 0:
        raise ModelError("no target pixels marked: click at least one target pixel")
    if n_t == n:
        raise ModelError("every pixel is marked as target: nothing is left to describe the background")


def targets_without_data(y, valid, cols: int) -> str:
    """The refusal of marked targets (``y`` == TARGET) on pixels with no data (``valid`` False, the same
    shape), naming the first one (row, col; ``cols`` a row's pixels) and how many more there are: the
    message the person can act on."""
    bad = np.flatnonzero(((np.asarray(y) == TARGET) & ~np.asarray(valid, bool)).reshape(-1))
    r, c = divmod(int(bad[0]), cols)
    more = f" and {bad.size - 1} more" if bad.size > 1 else ""
    return f"a marked target pixel has no data (NaN or the no-data value): pixel ({r}, {c}){more}"


def label_lists(y) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Sorted host index lists of the target, marked background and no-data pixels among the labels
    ``y`` (any shape, either backend), and the pixel count, with :func:`check_labels`' checks.

    One copy of the labels to the host and one pass over them: only the few marked pixels are
    sorted into lists.
    """
    y = to_host(y).reshape(-1)
    n = int(y.shape[0])
    marked = sparse_flatnonzero(y, UNLABELLED)
    v = y[marked]
    tgt = marked[v == TARGET]
    check_target_count(tgt.size, n)
    return tgt, marked[v == BACKGROUND], marked[v == NODATA], n


@dataclass(frozen=True)
class Param:
    """One parameter of a model, declared once on its class (:attr:`Estimator.parameters`): its type, range
    or choices, the words a person reads (``label``) and its tooltip (``help``). The default is the class's
    ``__init__`` default (:meth:`Estimator.declared` fills it in). The registry's forms, the CLI's
    ``--param``, a job's ``params`` and ``fit`` all check a value through :meth:`check`."""

    name: str
    type: type
    default: object = None
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple = ()
    label: str = ""

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def check(self, value, owner: str = ""):
        """``value`` as this parameter's type, within its range and choices, or an
        :class:`~hyperapp.core.errors.InputError` naming the option (the same words from the window, the
        CLI's ``--param``, a job's ``params`` and a direct ``fit``)."""
        from hyperapp.core import values as options

        name = f"{owner} option {self.name}" if owner else self.name
        if self.label:  # the window's words beside the option's name, for whoever typed it where
            name += f" ({self.label})"
        if self.type is bool:
            return options.flag(value, name)
        if self.type is int:
            return options.whole(value, name, None if self.minimum is None else int(self.minimum),
                                 None if self.maximum is None else int(self.maximum))
        if self.type is float:
            return options.number(value, name, self.minimum, self.maximum)
        return options.text(value, name, self.choices)


class Estimator:
    """What every model shares, scikit-learn style: parameters read from ``__init__``'s signature, a
    fitted-ness check (fitted state lives in attributes ending in ``_``), and a readable repr.

    A model declares its parameters once, in :attr:`parameters` (as scikit-learn's
    ``_parameter_constraints``): the registry's forms and checks derive from it, and ``fit`` (and
    ``fit_signature``) check the current values against it before any work (:meth:`_validate_declared`)."""

    #: the parameters a person sets, each once: type, range or choices, label and help (defaults: ``__init__``'s)
    parameters: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("fit", "fit_signature", "fit_from_stats", "fit_scenes", "fit_from_pixels"):
            f = cls.__dict__.get(name)
            if f is not None and not getattr(f, "_validates", False):
                setattr(cls, name, _validating(f))

    @classmethod
    def declared(cls) -> dict[str, Param]:
        """The declared parameters by name, each with its ``__init__`` default."""
        got = cls.__dict__.get("_declared_cache")
        if got is None:
            import inspect

            sig = inspect.signature(cls.__init__).parameters
            got = {p.name: replace(p, default=sig[p.name].default) for p in cls.parameters}
            cls._declared_cache = got
        return got

    def _validate_declared(self) -> None:
        """Every declared parameter's current value within its declaration, or an InputError naming it."""
        for p in type(self).declared().values():
            v = getattr(self, p.name)
            if not (v is None and p.default is None):
                p.check(v, type(self).__name__)

    def _check_fitted(self) -> None:
        if not any(k.endswith("_") and not k.startswith("_") for k in vars(self)):
            raise ModelError(f"{type(self).__name__} is not fitted yet: call fit first")

    def get_params(self) -> dict:
        import inspect

        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self"}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


#: set inside :func:`unchecked_parameters`: fit skips the declared parameters' check
_UNCHECKED = contextvars.ContextVar("hyperapp_unchecked_parameters", default=False)


@contextlib.contextmanager
def unchecked_parameters():
    """Fits inside it skip the declared parameters' check (scikit-learn's ``skip_parameter_validation``):
    for a maintainer's measurement that sets a value no person may ask (a calibration's ``tol < 0``, every
    iteration run)."""
    token = _UNCHECKED.set(True)
    try:
        yield
    finally:
        _UNCHECKED.reset(token)


def _validating(fit):
    """``fit`` that first checks the declared parameters (:meth:`Estimator._validate_declared`)."""
    import functools

    @functools.wraps(fit)
    def checked(self, *args, **kwargs):
        if not _UNCHECKED.get():
            self._validate_declared()
        return fit(self, *args, **kwargs)

    checked._validates = True
    return checked


class PixelDetector(Estimator):
    """Base class of the detectors: the ``predict`` that thresholds scores."""

    #: whether the method uses the target clicks (RX does not)
    uses_targets = True
    #: what the streamed (two-pass) path gathers in its first pass to fit the detector: "background"
    #: or "correlation" statistics, "none" (the target pixels alone), "sample" (the pixels the model
    #: names, :meth:`sample_indices`), "mnf" (the image's statistics and its neighbour differences':
    #: MTMF, MTTCIMF), or None: the detector needs the whole image in memory
    stream_stats: str | None = None
    #: whether ``fit`` works on the labels on the host (so callers holding both copies pass the host's)
    labels_on_host = False
    #: whether ``fit`` takes ``check_input=False``, as scikit-learn's trees do: a caller that has just
    #: tested the pixels for NaN and Inf (:func:`hyperapp.detect.run.run_detection`, on every click) skips
    #: the second read of the cube
    accepts_check_input = False
    #: whether ``fit`` (and ``fit_signature``) take ``sums=``, the :class:`~hyperapp.models.stats.PixelSums` of
    #: the image's pixels with data taken once (:mod:`hyperapp.detect.resident`: a resident image's, reused by
    #: every click); the labels then mark the pixels outside them no data
    accepts_sums = False

    #: whether the detector suppresses undesired signatures (OSP, TCIMF, MTTCIMF; the RBFN trains on them)
    uses_undesired = False

    def fit_signature(self, X, target, y=None, undesired=None, check_input: bool = True):
        """Fit from a target spectrum (bands,) rather than clicked pixels (a spectral library's entry,
        resampled to the image's bands); ``undesired`` (q, bands) are signatures to suppress."""
        raise ModelError(f"{type(self).__name__} cannot take a target spectrum from a library: it learns "
                         "from marked pixels only")

    def predict(self, X, threshold: float):
        """Boolean target mask: scores above ``threshold``."""
        return self.decision_function(X) > threshold


def float_dtype(X):
    """float64 stays float64; anything else computes in float32."""
    return np.float64 if X.dtype == np.float64 else np.float32


def labelled_target_mean(X, y, check_input: bool = True, with_targets: bool = False):
    """Checked pixels (n, bands), their array module, the labels and the mean target spectrum (float64);
    ``check_input=False`` skips the finiteness test (the caller made it); ``with_targets``: the target
    pixels' flat indices (on the labels' device) follow."""
    P, _ = as_pixels(X)
    if check_input:
        check_finite(P)
    xp = get_namespace(P)
    y, tgt = check_labels(xp.asarray(y), P.shape[0])
    # rows by index, not by a boolean mask: CuPy's boolean row indexing of a large image is ~40x slower
    mean = P[tgt].astype(xp.float64).mean(axis=0)
    return (P, xp, y, mean, tgt) if with_targets else (P, xp, y, mean)


class PerTarget(PixelDetector):
    """One fitted detector per target spectrum (several library entries at once, as ENVI writes a rule
    image per target); the score is the highest of them, and ``target_index`` says which won.

    Parameters
    ----------
    estimators : list of fitted detectors
    """

    def __init__(self, estimators=()):
        self.estimators = list(estimators)
        self.estimators_ = self.estimators

    def decision_function(self, X):
        return self.score_maps(X)[0]

    def score_maps(self, X):
        """(highest score, {"target_index": which target gave it, and each detector's other maps at
        that target})."""
        self._check_fitted()
        xp = get_namespace(X)
        best = idx = None
        extra: dict = {}
        for i, est in enumerate(self.estimators_):
            if hasattr(est, "score_maps"):
                s, maps = est.score_maps(X)
            else:
                s, maps = est.decision_function(X), {}
            if best is None:
                best, idx, extra = s, xp.zeros(s.shape, xp.int16), dict(maps)
                continue
            win = xp.greater(s, best)
            best = xp.where(win, s, best)
            idx = xp.where(win, xp.asarray(i, dtype=xp.int16), idx)
            for k, v in maps.items():
                extra[k] = xp.where(win, v, extra[k])
        extra["target_index"] = idx
        return best, extra


def fitted_on(est, xp):
    """A shallow copy of fitted ``est`` whose array attributes (``*_``) live in array module ``xp``.

    A model saved from one backend and loaded (host arrays), or fitted on the GPU and used on the CPU,
    scores on the backend of the run: the fused kernels upload its weights from device arrays, the
    NumPy path needs host ones.
    """
    import copy

    new = copy.copy(est)
    for k, v in vars(est).items():
        if k.endswith("_") and hasattr(v, "shape") and hasattr(v, "dtype"):
            setattr(new, k, to_host(v) if xp is np else xp.asarray(v))
    return new


class TransformedDetector(PixelDetector):
    """A detector run on transformed pixels (MNF components, continuum-removed spectra): the wrapped
    ``detector_`` scores what ``_transform(X)`` gives; subclasses fit it and define ``_transform``."""

    def decision_function(self, X):
        return self.detector_.decision_function(self._transform(X))

    def score_maps(self, X):
        Z = self._transform(X)
        if hasattr(self.detector_, "score_maps"):
            return self.detector_.score_maps(Z)
        return self.detector_.decision_function(Z), {}
