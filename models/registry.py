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
        known = {p.name for p in self.params}
        unknown = set(kwargs) - known
        if unknown:
            from hyperapp.errors import InputError

            raise InputError(f"method {self.name} takes no option(s) {', '.join(sorted(unknown))}")
        return self.factory(**kwargs)


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


def get_method(name: str) -> Method:
    if name not in METHODS:
        from hyperapp.errors import InputError

        raise InputError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[name]
