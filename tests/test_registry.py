"""The registry (what the CLI's --param and the window's forms offer) and the estimators agree."""

import pytest

from hyperapp.models.registry import ANALYSES, METHODS


@pytest.mark.parametrize("method", [*METHODS.values(), *ANALYSES.values()], ids=lambda m: m.name)
def test_registry_defaults_are_the_estimators_defaults(method):
    """One source for defaults: each form default equals the class's own ``__init__`` default."""
    est = method.factory()
    own = est.get_params()
    for p in method.params:
        assert p.name in own, f"{method.name}: the registry offers {p.name}, which the estimator does not take"
        assert p.type(own[p.name]) == p.default, (method.name, p.name, own[p.name], p.default)


def _methods():
    from hyperapp.models.registry import ANALYSES, METHODS

    return [*METHODS.values(), *ANALYSES.values()]


@pytest.mark.parametrize("m", _methods(), ids=lambda m: m.name)
def test_the_registry_reads_each_methods_parameters_from_its_class(m):
    """Declared once: the registry's rows are the class's declaration, defaults its ``__init__``'s."""
    est = m.factory()
    declared = type(est).declared()
    for p in m.params:
        assert declared[p.name] is p
        assert p.default == type(est)().get_params()[p.name] or m.name == "cart"


@pytest.mark.parametrize("m", _methods(), ids=lambda m: m.name)
def test_every_declared_bound_is_what_fit_enforces(m):
    """Just outside each declared range (or among no choice) fit refuses the value, naming the option,
    before touching the data; at the bound itself it passes the parameter checks."""
    from hyperapp.core.errors import InputError

    def fit(est):
        try:
            est.fit(None, None)
        except Exception as exc:  # noqa: BLE001  (past the checks, fit fails on the data it was not given)
            return exc
        return None

    for p in m.params:
        outside, inside = [], []
        if p.choices:
            outside.append("no-such-choice")
            inside.append(p.choices[-1])
        if p.minimum is not None:
            outside.append(p.minimum - (1 if p.type is int else max(abs(p.minimum), 1) * 0.5))
            inside.append(p.minimum)
        if p.maximum is not None:
            outside.append(p.maximum + (1 if p.type is int else max(abs(p.maximum), 1) * 0.5))
            inside.append(p.maximum)
        for v in outside:
            est = m.factory()
            setattr(est, p.name, p.type(v) if p.type is not str else v)
            exc = fit(est)
            assert isinstance(exc, InputError) and f"option {p.name}" in str(exc), (m.name, p.name, v, exc)
        for v in inside:
            est = m.factory()
            setattr(est, p.name, p.type(v))
            exc = fit(est)
            assert not (isinstance(exc, InputError) and f"option {p.name} " in str(exc)), (m.name, p.name, v, exc)
