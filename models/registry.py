"""Detectors and analysis methods by the names the CLI (``--method``) and the GUI's lists use.

Each entry builds an estimator from keyword parameters; the estimator's class declares those parameters
once (:attr:`hyperapp.models.base.Estimator.parameters`: type, range, label, help; the default is its
``__init__``'s), and :attr:`Method.params` reads them, so the GUI builds its form from them, the CLI and
job files check against them, and ``fit`` enforces the same bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hyperapp.models.base import Param  # noqa: F401  (the declarations' type, named here for the forms)


@dataclass(frozen=True)
class Method:
    name: str
    title: str
    factory: Callable
    #: which of the class's declared parameters the method shows and checks (names; default: every one)
    shown: Callable | None = None
    uses_targets: bool = True
    kind: str = "pixel"  # "pixel" detectors score every pixel; "window" ones return boxes; "analysis"
    #: analysis methods: whether the fitted model labels every pixel of the image (``predict``)
    labels_image: bool = False
    #: analysis methods: whether classes (ROIs or a label map) are required
    needs_classes: bool = False
    #: what the method does, for people (the method list's tooltip)
    help: str = ""
    #: detectors: whether undesired signatures (a library's, ROI class means) are suppressed or learnt
    uses_undesired: bool = False
    #: analysis methods: fitted on the whole image (rows, cols, bands), not a selection of spectra
    needs_image: bool = False
    #: defaults that replace the click-trained ones when the target is a library spectrum (options the
    #: user gives still win)
    library_params: dict = field(default_factory=dict)

    #: method-specific rules on the checked options (a range of k that parses, odd windows), from the
    #: models' own parsers; raises InputError
    rules: Callable | None = None
    #: detectors: whether background pixels the user marks are learnt from (the others estimate the
    #: background from every pixel but the targets, and would drop them without a word)
    uses_background: bool = False
    #: detectors: the fewest bands whose scores mean anything (SAM's angle and ACE's coherence compare
    #: spectral shapes, and in one band every spectrum has the same shape; the subspace methods need a
    #: band beyond the signatures they project out)
    min_bands: int = 1
    #: options the user gave that this run would not use: ``idle(given, merged, settings)`` -> [(option,
    #: why)], from the names given, every option's value, and the run's other settings (library keys)
    idle: Callable | None = None

    @property
    def params(self) -> tuple[Param, ...]:
        """The method's parameters as its model class declares them (:attr:`~hyperapp.models.base.Estimator.
        parameters`: type, range, default, label, help), the form's rows and the checks' bounds."""
        key = (self.kind, self.name)
        if key not in _DECLARED:
            decl = type(self.factory()).declared()
            _DECLARED[key] = tuple(decl[n] for n in (self.shown() if self.shown else decl))
        return _DECLARED[key]

    def idle_options(self, given: dict, settings: dict) -> list[tuple[str, str]]:
        """(option, why) for each of the options ``given`` (checked values) that a run with ``settings``
        (its library keys) would not use (:attr:`idle`); [] for a method without such rules."""
        if self.idle is None or not given:
            return []
        return self.idle(set(given), {**self.factory().get_params(), **given}, settings)

    def schema(self, est=None) -> dict[str, Param]:
        """Every option the method takes: the declared :attr:`params`, and the estimator's other
        ``__init__`` parameters typed by their defaults (advanced options the window does not show)."""
        est = est if est is not None else self.factory()
        out = {p.name: p for p in self.params}
        for k, v in est.get_params().items():
            if k not in out:
                t = type(v) if isinstance(v, (bool, int, float, str)) else int
                out[k] = Param(k, t, v, "", minimum=1 if v is None else None)
        return out

    def check_params(self, params: dict | None) -> dict:
        """``params`` checked and converted (``{"n_init": "4"}`` -> ``{"n_init": 4}``): unknown names,
        wrong types, values out of range or not among the choices, and the method's own rules are an
        :class:`~hyperapp.core.errors.InputError`. The one check every entry point goes through."""
        from hyperapp.core.errors import InputError

        if params is None:
            return {}
        if not isinstance(params, dict):
            raise InputError(f"options of {self.name} must be a table of NAME = VALUE, got {params!r}")
        est = self.factory()
        schema = self.schema(est)
        out = {}
        for k, v in params.items():
            if not isinstance(k, str):
                raise InputError(f"option names of {self.name} are text, got {k!r}")
            key = k.strip().replace("-", "_")
            if key not in schema:
                raise InputError(f"method {self.name} takes no option {k!r}; "
                                 f"it takes {', '.join(sorted(schema)) or 'none'}")
            default = est.get_params()[key]
            out[key] = None if v is None and default is None else schema[key].check(v, self.name)
        if self.rules is not None:
            self.rules({**est.get_params(), **out})
        if hasattr(est, "_validate_params"):  # the model's own rules between its parameters
            for k, v in out.items():
                setattr(est, k, v)
            est._validate_params()
        return out

    def build(self, **kwargs):
        """A new estimator with ``kwargs`` set (any of its ``__init__`` parameters), checked by
        :meth:`check_params`."""
        est = self.factory()
        for k, v in self.check_params(kwargs).items():
            setattr(est, k, v)
        return est


def _classic(name):
    def make(**kw):
        from hyperapp.models import classic

        return getattr(classic, name)(**kw)

    return make


def _k_rule(p: dict) -> None:
    from hyperapp.models.kmeans import parse_k

    parse_k(p["k"])


def _max_features_rule(p: dict) -> None:
    from hyperapp.core.errors import InputError

    mf = str(p["max_features"]).strip().lower()
    if mf in ("sqrt", "log2", "all", "none"):
        return
    try:
        if int(mf) >= 1:
            return
    except ValueError:
        pass
    raise InputError("option max_features (Bands tried per split) must be sqrt, log2, all or a number of bands, "
                     f"got {p['max_features']!r}")


METHODS: dict[str, Method] = {}
#: each method's declared parameters, read from its class once
_DECLARED: dict[tuple[str, str], tuple] = {}


def register(method: Method) -> Method:
    METHODS[method.name] = method
    return method


register(Method("sam", "SAM (spectral angle)", _classic("SAM"), min_bands=2))
register(Method("sid", "SID (spectral information divergence)", _classic("SID"), min_bands=2,
                help="Chang 2000, as ENVI's SID: spectra read as distributions over the bands; the score is minus "
                     "their symmetric Kullback-Leibler divergence from the target's (0 for the same shape)."))
register(Method("ace", "ACE (adaptive coherence)", _classic("ACE"), min_bands=2))
register(Method("mf", "Matched filter", _classic("MatchedFilter")))
register(Method("cem", "CEM (constrained energy min.)", _classic("CEM")))
register(Method("rx", "RX anomaly (global)", _classic("RX"), uses_targets=False))
register(Method("lrx", "RX anomaly (local window)", _classic("LocalRX"), uses_targets=False))


def _subspace(name):
    def make(**kw):
        from hyperapp.models import subspace

        return getattr(subspace, name)(**kw)

    return make


def _mnf_model(name):
    def make(**kw):
        from hyperapp.models import mnf

        return getattr(mnf, name)(**kw)

    return make


def _mnf_idle(given: set, merged: dict, settings: dict) -> list[tuple[str, str]]:
    return ([("snr_min", "chooses the MNF components only when n_components is 0")]
            if "snr_min" in given and int(merged["n_components"]) != 0 else [])


def _undesired_idle(given: set, merged: dict, settings: dict) -> list[tuple[str, str]]:
    return ([("n_undesired", "counts the signatures found automatically, and undesired spectra are given")]
            if "n_undesired" in given and (settings.get("undesired_spectra") or settings.get("undesired_rois"))
            else [])


def _mnf_undesired_idle(given: set, merged: dict, settings: dict) -> list[tuple[str, str]]:
    return _mnf_idle(given, merged, settings) + _undesired_idle(given, merged, settings)


def _rbfn_idle(given: set, merged: dict, settings: dict) -> list[tuple[str, str]]:
    out = []
    if "n_components" in given and merged["whiten"] != "pca":
        out.append(("n_components", f"is the pca whitening's, and whiten is {merged['whiten']}"))
    if not settings.get("target_spectra"):
        out += [(k, "shapes the training from a library spectrum, and no target spectra are given")
                for k in ("n_library_targets", "min_fill") if k in given]
    return out


def _hac_idle(given: set, merged: dict, settings: dict) -> list[tuple[str, str]]:
    return ([("n_clusters", "is not used when height cuts the tree")]
            if "n_clusters" in given and float(merged["height"]) > 0 else [])


def _kmeans_idle(given: set, merged: dict, settings: dict) -> list[tuple[str, str]]:
    from hyperapp.models.kmeans import parse_k

    return ([("criterion", "chooses among a range of k, and k is one number")]
            if "criterion" in given and len(parse_k(merged["k"])) == 1 else [])



register(Method("osp", "OSP (orthogonal subspace projection)", _subspace("OSP"),
                help="Harsanyi and Chang 1994: projects out the undesired signatures, then scores each pixel's "
                     "target abundance (1 = pure target).", uses_undesired=True, idle=_undesired_idle, min_bands=2))
register(Method("tcimf", "TCIMF (target-constrained interference min.)", _subspace("TCIMF"),
                help="Ren and Chang 2000: a filter with gain 1 on the target, 0 on the undesired signatures, "
                     "least output energy otherwise (CEM when there are none).", uses_undesired=True,
                idle=_undesired_idle, min_bands=2))
register(Method("mtmf", "MTMF (mixture-tuned matched filter)", _mnf_model("MTMF"),
                help="Boardman 1998: matched filter in MNF space, plus an infeasibility map (noise-sigma units); "
                     "targets score high with low infeasibility.", idle=_mnf_idle, min_bands=2))
register(Method("mttcimf", "MTTCIMF (mixture-tuned TCIMF)", _mnf_model("MTTCIMF"),
                help="TCIMF in MNF space with the mixture-tuning infeasibility map, suppressing undesired "
                     "signatures.", uses_undesired=True, idle=_mnf_undesired_idle, min_bands=2))


def _rbfn(**kw):
    from hyperapp.models.rbfn import RBFN

    return RBFN(**kw)


register(Method("rbfn", "RBFN (radial-basis network)", _rbfn, help="Radial-basis network trained in milliseconds from clicks, or from a library spectrum via synthetic "
        "sub-pixel mixtures with the background.", uses_undesired=True, uses_background=True,
    idle=_rbfn_idle,
    # measured on abu-airport-1 from the truth's mean spectrum (README, "Targets from a spectral library"):
    # mixtures are linear in the cube's units, so spectra keep their brightness; wide units and a firm
    # ridge keep the network near the matched-filter input that the synthetic abundances teach it
    library_params={"normalize": False, "width_scale": 10.0, "ridge": 0.3, "min_fill": 0.1, "n_background": 8000}))


def _ffbp(**kw):
    from hyperapp.models.ffbp import FFBP

    return FFBP(**kw)


register(Method("ffbp", "FFBP multi-resolution windows", _ffbp, kind="window", uses_background=True))  # background marks train the RBFN that refines its boxes


# ------------------------------------------------------------------ analysis methods (side panels)
ANALYSES: dict[str, Method] = {}


def register_analysis(method: Method) -> Method:
    ANALYSES[method.name] = method
    return method


def _kmeans(**kw):
    from hyperapp.models.kmeans import MultiKMeans

    return MultiKMeans(**kw)


def _band_subsets(**kw):
    from hyperapp.models.band_selection import BandSubsetSearch

    return BandSubsetSearch(**kw)


def _band_clusters(**kw):
    from hyperapp.models.band_selection import BandClustering

    return BandClustering(**kw)


register_analysis(Method("kmeans", "k-means (one k or a range)", _kmeans, uses_targets=False, kind="analysis", labels_image=True, rules=_k_rule, idle=_kmeans_idle))

register_analysis(Method("band-subsets", "Band subsets (k-means code search)", _band_subsets, uses_targets=False, kind="analysis", labels_image=True))

register_analysis(Method("band-clusters", "Band clustering (one band per cluster)", _band_clusters, uses_targets=False, kind="analysis"))


def _som(**kw):
    from hyperapp.models.som import SOM

    return SOM(**kw)


def _gmm(**kw):
    from hyperapp.models.gmm import GaussianMixtureEM

    return GaussianMixtureEM(**kw)


register_analysis(Method("som", "Self-organising map (SOM)", _som, uses_targets=False, kind="analysis", labels_image=True))

register_analysis(Method("gmm", "Gaussian mixture (EM)", _gmm, uses_targets=False, kind="analysis", labels_image=True, rules=_k_rule))


def _forest(**kw):
    from hyperapp.models.forest import RandomForest

    return RandomForest(**kw)


def _cart(**kw):
    from hyperapp.models.forest import cart

    return cart(**kw)


def _tree_parameters() -> list[str]:
    from hyperapp.models.forest import TREE_PARAMETERS

    return [p.name for p in TREE_PARAMETERS]


def _hac(**kw):
    from hyperapp.models.hac import HierarchicalClustering

    return HierarchicalClustering(**kw)



register_analysis(Method("forest", "Random forest (classes from ROIs)", _forest, uses_targets=False, kind="analysis", labels_image=True, needs_classes=True,
    rules=_max_features_rule))

register_analysis(Method("cart", "Decision tree (CART)", _cart, shown=_tree_parameters,
                         uses_targets=False, kind="analysis", labels_image=True, needs_classes=True,
                         rules=_max_features_rule))

register_analysis(Method("hac", "Hierarchical clustering (HAC)", _hac, uses_targets=False, kind="analysis", labels_image=True, idle=_hac_idle))


register_analysis(Method("mnf", "MNF (minimum noise fraction)", _mnf_model("MNF"), uses_targets=False, kind="analysis", needs_image=True, idle=_mnf_idle,
    help="Green et al. 1988: components ordered by signal-to-noise ratio (noise from neighbouring-pixel "
         "differences); eigenvalue plot and component images."))


def get_analysis(name: str) -> Method:
    if name not in ANALYSES:
        from hyperapp.core.errors import InputError

        raise InputError(f"unknown analysis method {name!r}; choose one of {', '.join(ANALYSES)}")
    return ANALYSES[name]


def get_method(name: str) -> Method:
    if name not in METHODS:
        from hyperapp.core.errors import InputError

        raise InputError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[name]
