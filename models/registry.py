"""Detectors and analysis methods by the names the CLI (``--method``) and the GUI's lists use.

Each entry builds an estimator from keyword parameters; :data:`PARAMS` describes those parameters
(type, default, range, help) so the GUI builds its form from them and the CLI its options, and a
new model adds one entry here rather than a hand-built form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Param:
    """One option of a method: the CLI's ``--param NAME=VALUE`` and one row of the GUI's form.

    ``label`` is what a person reads in the form; ``help`` is the tooltip that explains it.
    """

    name: str
    type: type
    default: object
    help: str
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
        CLI's ``--param`` and a job's ``params``)."""
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


@dataclass(frozen=True)
class Method:
    name: str
    title: str
    factory: Callable
    params: tuple[Param, ...] = field(default_factory=tuple)
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


def _windows_rule(p: dict) -> None:
    from hyperapp.core.errors import InputError

    inner, outer = int(p["inner"]), int(p["outer"])
    if inner % 2 == 0 or outer % 2 == 0 or inner >= outer:
        raise InputError(f"the guard window (option inner, {inner} px) must be smaller than the background window "
                         f"(option outer, {outer} px), and both an odd number of pixels")


def _rbfn_rule(p: dict) -> None:
    from hyperapp.models.rbfn import RBFN

    est = RBFN()
    for k, v in p.items():
        setattr(est, k, v)
    est._validate_params()


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
register(Method("lrx", "RX anomaly (local window)", _classic("LocalRX"), (
    Param("inner", int, 3, "Width in pixels of the guard window around the pixel under test, left out of the background statistics (odd).", 1, 99, label="Guard window (px)"),
    Param("outer", int, 15, "Width in pixels of the local window whose pixels (outside the guard window) estimate the background (odd).", 3, 201, label="Background window (px)"),
), uses_targets=False, rules=_windows_rule))


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


_N_UNDESIRED = Param("n_undesired", int, 8, "Undesired (background) signatures found automatically by ATGP, "
                     "started from the target, when none are given from a library or ROI classes; 0 uses none.",
                     0, 64, label="Undesired found (ATGP)")
_MNF_PARAMS = (
    Param("n_components", int, 0, "MNF components the filter works in; 0 keeps those whose signal-to-noise "
          "ratio (eigenvalue - 1) is at least the SNR below.", 0, 1024, label="MNF components (0 = by SNR)"),
    Param("snr_min", float, 1.0, "With 0 components: the smallest signal-to-noise ratio of a component kept.",
          0.0, 1e6, label="SNR kept down to"),
)

register(Method("osp", "OSP (orthogonal subspace projection)", _subspace("OSP"), (_N_UNDESIRED,),
                help="Harsanyi and Chang 1994: projects out the undesired signatures, then scores each pixel's "
                     "target abundance (1 = pure target).", uses_undesired=True, idle=_undesired_idle, min_bands=2))
register(Method("tcimf", "TCIMF (target-constrained interference min.)", _subspace("TCIMF"), (_N_UNDESIRED,),
                help="Ren and Chang 2000: a filter with gain 1 on the target, 0 on the undesired signatures, "
                     "least output energy otherwise (CEM when there are none).", uses_undesired=True,
                idle=_undesired_idle, min_bands=2))
register(Method("mtmf", "MTMF (mixture-tuned matched filter)", _mnf_model("MTMF"), _MNF_PARAMS,
                help="Boardman 1998: matched filter in MNF space, plus an infeasibility map (noise-sigma units); "
                     "targets score high with low infeasibility.", idle=_mnf_idle, min_bands=2))
register(Method("mttcimf", "MTTCIMF (mixture-tuned TCIMF)", _mnf_model("MTTCIMF"), _MNF_PARAMS + (_N_UNDESIRED,),
                help="TCIMF in MNF space with the mixture-tuning infeasibility map, suppressing undesired "
                     "signatures.", uses_undesired=True, idle=_mnf_undesired_idle, min_bands=2))


def _rbfn(**kw):
    from hyperapp.models.rbfn import RBFN

    return RBFN(**kw)


register(Method("rbfn", "RBFN (radial-basis network)", _rbfn, (
    Param("n_hidden", int, 32, "Radial-basis neurons: centres placed by k-means among the target clicks and the background.", 2, 1024, label="Neurons"),
    Param("whiten", str, "pca", "How spectra are whitened before the distances: principal components of the background (pca), its full covariance (cov), or per-band scaling (std).", choices=("pca", "cov", "std"), label="Whitening"),
    Param("n_components", int, 16, "Principal components of the background kept by the pca whitening.", 1, 512, label="Components kept"),
    Param("width_scale", float, 3.0, "Multiplies every neuron's width: larger values give smoother, more tolerant scores.", 0.1, 20.0, label="Width factor"),
    Param("coherence", float, 1.0, "Weight of the coherence input: how well each pixel lines up with the clicks in the background-whitened space (ACE), which finds weak and sub-pixel targets; 0 uses the network alone.", 0.0, 100.0, label="Coherence input"),
    Param("anomaly", float, 0.5, "Weight of the anomaly input (RX, the distance from the background): where most clicks are strong anomalies, a pixel scores as a target when either the network or RX says so, so targets of materials nobody clicked are found too; where the clicks are ordinary it does not count. 0 uses the network alone.", 0.0, 100.0, label="Anomaly input"),
    Param("normalize", bool, True, "Divide every spectrum by its norm, so brightness (shade, slope) does not change the score.", label="Ignore brightness"),
    Param("n_background", int, 4000, "Background pixels sampled from the image (beside any you marked) to train on.", 10, 200000, label="Background samples"),
    Param("n_augment", int, 0, "Synthetic sub-pixel targets mixed from the clicks and the background, added to the training set.", 0, 100000, label="Synthetic sub-pixel targets"),
    Param("ridge", float, 3e-3, "Ridge penalty of the output layer's least-squares fit (regularisation).", 0.0, 10.0, label="Regularisation"),
    Param("n_library_targets", int, 1024, "Training from a library spectrum: synthetic sub-pixel targets mixing it with sampled background pixels (abundances from the smallest fill to 1).", 0, 100000, label="Library mixtures"),
    Param("min_fill", float, 0.3, "Smallest target abundance of the synthetic sub-pixel targets.", 0.01, 1.0, label="Smallest fill"),
    Param("seed", int, 0, "Seed of the background sampling and of k-means: the same seed gives the same network.", 0, 2**31 - 1, label="Random seed"),
), help="Radial-basis network trained in milliseconds from clicks, or from a library spectrum via synthetic "
        "sub-pixel mixtures with the background.", uses_undesired=True, rules=_rbfn_rule, uses_background=True,
    idle=_rbfn_idle,
    # measured on abu-airport-1 from the truth's mean spectrum (README, "Targets from a spectral library"):
    # mixtures are linear in the cube's units, so spectra keep their brightness; wide units and a firm
    # ridge keep the network near the matched-filter input that the synthetic abundances teach it
    library_params={"normalize": False, "width_scale": 10.0, "ridge": 0.3, "min_fill": 0.1, "n_background": 8000}))


def _ffbp(**kw):
    from hyperapp.models.ffbp import FFBP

    return FFBP(**kw)


register(Method("ffbp", "FFBP multi-resolution windows", _ffbp, (
    Param("features", str, "std", "What describes a window: the standard deviation of each band (std) or its mean and standard deviation (meanstd).", choices=("std", "meanstd"), label="Window features"),
    Param("n_hidden", int, 16, "Hidden neurons of each of the two window networks.", 2, 256, label="Neurons per network"),
    Param("min_window", int, 8, "The search stops at windows of this side.", 2, 256, label="Smallest window (px)"),
    Param("pad", int, 3, "Pixels added around each detected box.", 0, 32, label="Box margin (px)"),
    Param("epochs", int, 300, "Training epochs at most (training stops early when the validation error stops falling).", 1, 10000, label="Training epochs"),
), kind="window", uses_background=True))  # background marks train the RBFN that refines its boxes


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


register_analysis(Method("kmeans", "k-means (one k or a range)", _kmeans, (
    Param("k", str, "2..16", "One number of clusters (8) or a range (2..16): every k of a range is fitted at "
          "once and the criterion picks the one that labels the image.", label="Clusters (k or range)"),
    Param("n_init", int, 4, "Restarts per k from different k-means++ seeds; the lowest inertia is kept.", 1, 100,
          label="Restarts"),
    Param("max_iter", int, 100, "Lloyd iterations at most.", 1, 10000, label="Iterations at most"),
    Param("tol", float, 1e-4, "Stop when the centres move less than this (relative to the mean band variance).",
          0.0, 1.0, label="Tolerance"),
    Param("criterion", str, "silhouette", "How a range chooses k: highest silhouette (on a sample), lowest "
          "Davies-Bouldin index, or the elbow of the inertia curve.",
          choices=("silhouette", "davies_bouldin", "elbow"), label="Choose k by"),
    Param("silhouette_sample", int, 2000, "Spectra (a random sample) the silhouette is computed on.", 0, 20000,
          label="Silhouette sample"),
    Param("seed", int, 0, "Seed of the k-means++ seeding and the silhouette sample.", 0, 2**31 - 1,
          label="Random seed"),
), uses_targets=False, kind="analysis", labels_image=True, rules=_k_rule, idle=_kmeans_idle))

register_analysis(Method("band-subsets", "Band subsets (k-means code search)", _band_subsets, (
    Param("n_subsets", int, 10000, "Random band subsets explored, each with its own small k-means.", 1, 1000000,
          label="Subsets explored"),
    Param("subset_size", int, 3, "Bands in each subset.", 1, 16, label="Bands per subset"),
    Param("k", int, 8, "Clusters per subset: each pixel is coded in log2(k) bits.", 2, 64, label="Clusters per subset"),
    Param("max_iter", int, 20, "k-means iterations per subset at most.", 1, 1000, label="Iterations at most"),
    Param("top", int, 20, "Best subsets listed.", 1, 1000, label="Subsets listed"),
    Param("seed", int, 0, "Seed of the subsets and the initial centres.", 0, 2**31 - 1, label="Random seed"),
), uses_targets=False, kind="analysis", labels_image=True))

register_analysis(Method("band-clusters", "Band clustering (one band per cluster)", _band_clusters, (
    Param("n_clusters", int, 8, "Bands kept: the bands are clustered by how they vary together, and the band "
          "nearest each cluster's centre is kept.", 1, 1024, label="Bands to keep"),
    Param("max_pixels", int, 20000, "Of the spectra chosen above, at most this many (a random subset of them) "
          "build the band vectors.", 100, 10**7, label="Of them, use at most"),
    Param("seed", int, 0, "Seed of the sample and of k-means.", 0, 2**31 - 1, label="Random seed"),
), uses_targets=False, kind="analysis"))


def _som(**kw):
    from hyperapp.models.som import SOM

    return SOM(**kw)


def _gmm(**kw):
    from hyperapp.models.gmm import GaussianMixtureEM

    return GaussianMixtureEM(**kw)


register_analysis(Method("som", "Self-organising map (SOM)", _som, (
    Param("rows", int, 10, "Neurons down the map.", 1, 512, label="Map rows"),
    Param("cols", int, 10, "Neurons across the map.", 1, 512, label="Map columns"),
    Param("epochs", int, 10, "Passes over the spectra; each is one batch update of every neuron.", 1, 10000,
          label="Epochs"),
    Param("sigma_start", float, 0.0, "Neighbourhood radius (in neurons) at the first epoch; 0: half the map's "
          "larger side.", 0.0, 1000.0, label="Start radius (0 = half the map)"),
    Param("sigma_end", float, 1.0, "Neighbourhood radius at the last epoch; the radius shrinks exponentially.",
          0.01, 1000.0, label="End radius"),
    Param("learning_rate_start", float, 1.0, "Share of each epoch's batch mean taken into the codebook at the "
          "start (1: the pure batch rule).", 0.001, 1.0, label="Start learning rate (1 = batch)"),
    Param("learning_rate_end", float, 1.0, "The same at the last epoch.", 0.001, 1.0,
          label="End learning rate (1 = batch)"),
    Param("codebook_clusters", int, 8, "k: colour the image by k-means clusters of the neurons (a readable "
          "number of classes); 0: by best-matching neuron (one class per neuron).", 0, 4096,
          label="Clusters of the codebook"),
    Param("init", str, "pca", "Start from the plane of the two principal components, or from random spectra.",
          choices=("pca", "random"), label="Start codebook"),
    Param("training", str, "batch", "batch: one neighbourhood-weighted mean per epoch (fast); online: the "
          "thesis's per-spectrum updates (sequential, slow on large selections; use learning rates like "
          "0.5 -> 0.01).", choices=("batch", "online"), label="Training"),
    Param("seed", int, 0, "Seed of the random start and of the codebook's k-means.", 0, 2**31 - 1,
          label="Random seed"),
), uses_targets=False, kind="analysis", labels_image=True))

register_analysis(Method("gmm", "Gaussian mixture (EM)", _gmm, (
    Param("k", str, "8", "Components, one number (8) or a range (2..10): the lowest BIC labels the image.",
          label="Components (k or range)"),
    Param("covariance", str, "full", "Each component's covariance: full matrices, or diagonal (bands "
          "independent).", choices=("full", "diag"), label="Covariance"),
    Param("n_init", int, 3, "EM runs from different k-means starts; the highest likelihood is kept. One start "
          "can settle in a worse optimum; several cost little on the GPU. To compare with scikit-learn's "
          "GaussianMixture, give it the same number (its n_init).", 1, 100, label="Starts"),
    Param("max_iter", int, 100, "EM iterations at most.", 1, 10000, label="Iterations at most"),
    Param("tol", float, 1e-3, "Stop when the average log-likelihood per spectrum changes by less than this.",
          0.0, 10.0, label="Tolerance"),
    Param("reg_covar", float, 1e-6, "Added to every covariance's diagonal, so constant or collinear bands stay "
          "invertible.", 0.0, 1e6, label="Covariance floor"),
    Param("seed", int, 0, "Seed of the k-means starts.", 0, 2**31 - 1, label="Random seed"),
), uses_targets=False, kind="analysis", labels_image=True, rules=_k_rule))


def _forest(**kw):
    from hyperapp.models.forest import RandomForest

    return RandomForest(**kw)


def _cart(**kw):
    from hyperapp.models.forest import cart

    return cart(**kw)


def _hac(**kw):
    from hyperapp.models.hac import HierarchicalClustering

    return HierarchicalClustering(**kw)


_TREE_PARAMS = (
    Param("max_depth", int, 0, "Levels below the root at most; 0 grows every tree until its leaves are pure "
          "or too small to split.", 0, 64, label="Depth at most (0 = no limit)"),
    Param("min_samples_leaf", int, 1, "No split may leave fewer training spectra than this on a side.", 1, 100000,
          label="Spectra per leaf at least"),
    Param("min_samples_split", int, 2, "A node with fewer training spectra stays a leaf.", 2, 100000,
          label="Spectra to split at least"),
    Param("n_bins", int, 256, "Candidate thresholds per band + 1: each band is cut into this many bins at "
          "quantiles of the training spectra.", 2, 256, label="Thresholds per band"),
    Param("test_fraction", float, 0.3, "Share of each class's marked pixels kept out of training, to measure "
          "the accuracy and the confusion matrix on.", 0.0, 0.9, label="Held out for testing"),
    Param("seed", int, 0, "Seed of the held-out split, the bootstrap samples and the bands drawn per split.",
          0, 2**31 - 1, label="Random seed"),
)

register_analysis(Method("forest", "Random forest (classes from ROIs)", _forest, (
    Param("n_trees", int, 100, "Trees grown together, each on its own bootstrap sample; the class is their "
          "majority (mean probability).", 1, 10000, label="Trees"),
    Param("max_features", str, "sqrt", "Bands drawn at random as candidates at each split: sqrt or log2 of "
          "the band count, all, or a number.", label="Bands tried per split"),
    Param("bootstrap", bool, True, "Train each tree on a sample drawn with replacement (gives the out-of-bag "
          "accuracy).", label="Bootstrap samples"),
) + _TREE_PARAMS, uses_targets=False, kind="analysis", labels_image=True, needs_classes=True,
    rules=_max_features_rule))

register_analysis(Method("cart", "Decision tree (CART)", _cart, _TREE_PARAMS,
                         uses_targets=False, kind="analysis", labels_image=True, needs_classes=True,
                         rules=_max_features_rule))

register_analysis(Method("hac", "Hierarchical clustering (HAC)", _hac, (
    Param("linkage", str, "ward", "How the distance between two clusters is measured: Ward (least growth of "
          "the within-cluster variance), average, complete (farthest pair) or single (closest pair).",
          choices=("ward", "average", "complete", "single"), label="Linkage"),
    Param("metric", str, "euclidean", "Distance between spectra: Euclidean, or the spectral angle (SAM, "
          "insensitive to brightness).", choices=("euclidean", "sam"), label="Distance"),
    Param("n_clusters", int, 8, "Clusters the tree is cut into.", 1, 100000, label="Clusters"),
    Param("height", float, 0.0, "Cut the tree at this merge height instead (0: cut into the number of clusters "
          "above).", 0.0, 1e12, label="Cut height (0 = by count)"),
), uses_targets=False, kind="analysis", labels_image=True, idle=_hac_idle))


register_analysis(Method("mnf", "MNF (minimum noise fraction)", _mnf_model("MNF"), (
    Param("n_components", int, 0, "Component images written; 0 keeps those whose signal-to-noise ratio "
          "(eigenvalue - 1) is at least the SNR below.", 0, 1024, label="Components (0 = by SNR)"),
    Param("snr_min", float, 1.0, "With 0 components: the smallest signal-to-noise ratio kept.", 0.0, 1e6,
          label="SNR kept down to"),
    Param("direction", str, "lowerright", "Which neighbour the noise is estimated from (shift differences).",
          choices=("lowerright", "lowerleft", "right", "lower"), label="Noise from neighbour"),
), uses_targets=False, kind="analysis", needs_image=True, idle=_mnf_idle,
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
