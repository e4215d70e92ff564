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
