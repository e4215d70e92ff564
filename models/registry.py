"""Detectors by the names the CLI (``--method``) and the GUI's method list use.

Each entry builds an estimator from keyword parameters; :data:`PARAMS` describes those parameters
(type, default, range, help) so the GUI builds its form from them and the CLI its options, and a
new model adds one entry here rather than a hand-built form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Param:
    name: str
    type: type
    default: object
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple = ()


@dataclass(frozen=True)
class Method:
    name: str
    title: str
    factory: Callable
    params: tuple[Param, ...] = field(default_factory=tuple)
    uses_targets: bool = True
    kind: str = "pixel"  # "pixel" detectors score every pixel; "window" ones return boxes

    def build(self, **kwargs):
        """A new estimator with ``kwargs`` set (any of its ``__init__`` parameters)."""
        est = self.factory()
        known = set(est.get_params())
        unknown = set(kwargs) - known
        if unknown:
            from hyperapp.errors import InputError

            raise InputError(f"method {self.name} takes no option(s) {', '.join(sorted(unknown))}; "
                             f"it takes {', '.join(sorted(known)) or 'none'}")
        for k, v in kwargs.items():
            setattr(est, k, v)
        return est


def _classic(name):
    def make(**kw):
        from hyperapp.models import classic

        return getattr(classic, name)(**kw)

    return make


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    METHODS[method.name] = method
    return method


register(Method("sam", "SAM (spectral angle)", _classic("SAM")))
register(Method("ace", "ACE (adaptive coherence)", _classic("ACE")))
register(Method("mf", "Matched filter", _classic("MatchedFilter")))
register(Method("cem", "CEM (constrained energy min.)", _classic("CEM")))
register(Method("rx", "RX anomaly (global)", _classic("RX"), uses_targets=False))
register(Method("lrx", "RX anomaly (local window)", _classic("LocalRX"), (
    Param("inner", int, 3, "guard window width (odd)", 1, 99),
    Param("outer", int, 15, "background window width (odd)", 3, 201),
), uses_targets=False))


def _rbfn(**kw):
    from hyperapp.models.rbfn import RBFN

    return RBFN(**kw)


register(Method("rbfn", "RBFN (radial-basis network)", _rbfn, (
    Param("n_hidden", int, 4, "hidden neurons", 2, 1024),
    Param("whiten", str, "pca", "whitening fitted on the background", choices=("pca", "cov", "std")),
    Param("n_components", int, 16, "principal components kept (pca)", 1, 512),
    Param("width_scale", float, 2.0, "multiplies every RBF width", 0.1, 20.0),
    Param("normalize", bool, True, "divide spectra by their norm (brightness invariance)"),
    Param("n_background", int, 4000, "background pixels sampled for training", 10, 200000),
    Param("n_augment", int, 0, "synthetic sub-pixel targets mixed from the clicks", 0, 100000),
    Param("ridge", float, 1e-3, "ridge penalty of the output layer", 0.0, 10.0),
    Param("seed", int, 0, "seed of sampling and k-means", 0, 2**31 - 1),
)))


def _ffbp(**kw):
    from hyperapp.models.ffbp import FFBP

    return FFBP(**kw)


register(Method("ffbp", "FFBP multi-resolution windows", _ffbp, (
    Param("features", str, "std", "window features", choices=("std", "meanstd")),
    Param("n_hidden", int, 16, "hidden neurons of each network", 2, 256),
    Param("min_window", int, 8, "smallest window side (pixels)", 2, 256),
    Param("pad", int, 3, "pixels added around each box", 0, 32),
    Param("epochs", int, 300, "training epochs (early stopping)", 1, 10000),
), kind="window"))


def get_method(name: str) -> Method:
    if name not in METHODS:
        from hyperapp.errors import InputError

        raise InputError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[name]
