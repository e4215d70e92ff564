"""Gaussian mixture segmentation by EM (seed 003), full or diagonal covariances, NumPy or CuPy.

E-step: each component's log density through the Cholesky factor of its precision, as scikit-learn
does (y = (x - mu) U with U U^T = Sigma^-1, log N = -(d log 2pi + |y|^2)/2 + log det U), one GEMM per
component over all spectra, then a log-sum-exp over components for stable responsibilities. M-step:
weights, means and covariances from GEMMs of the responsibilities with the spectra, a covariance floor
(``reg_covar`` on the diagonal, so constant bands stay invertible), and the Cholesky factors from the
covariances. EM stops when the average log-likelihood per spectrum changes by less than ``tol``;
several initialisations keep the best. k-means (part 1) starts each run. With a range of k, BIC picks
the k that labels the image.

The spectra are centred and every product runs in float64, on both backends: real scenes (radiance in
the thousands, hundreds of nearly collinear bands) have covariances whose smallest eigenvalues sit
below float32's rounding of their largest, and a float32 sum of uncentred products leaves them
indefinite. Where a covariance is still not positive definite (a component on a handful of nearly
identical spectra), the diagonal gets the smallest extra floor, in steps from 1e-10 of the component's
mean variance, that makes it so; ``regularised_`` reports which components got how much. A run whose
likelihood is not finite is dropped, and a fit where every run fails ends in a :class:`ModelError`.
"""

from __future__ import annotations

import math

import numpy as np

from hyperapp.core.backend import get_namespace, to_host
from hyperapp.core.errors import ModelError
from hyperapp.models.base import Estimator, Param

CHUNK_BYTES = 256 << 20


class GaussianMixtureEM(Estimator):
    """EM for Gaussian mixtures over spectra.

    Parameters
    ----------
    k : int or str
        Components, one (``8``) or a range (``"2..10"``, the lowest BIC labels the image).
    covariance : {"full", "diag"}
    n_init : int
        Initialisations (k-means with different seeds); the highest likelihood is kept. 3 by default:
        one start (scikit-learn's default) lands in a visibly worse optimum on some real scenes and k,
        and three cost little on the GPU (k = 8, full covariances, 10,000 spectra of 205 bands: 0.6 s
        a start on an H100). Compare with scikit-learn at the same ``n_init``.
    max_iter : int
    tol : float
        Stop when the average log-likelihood per spectrum changes by less than this.
    reg_covar : float
        Added to every covariance's diagonal (scikit-learn's ``reg_covar``).
    seed : int

    Attributes
    ----------
    k_values_, bic_, log_likelihood_ (average per spectrum, per k) : host arrays
    chosen_k_ : int
    weights_, means_, covariances_ : the chosen k's parameters (host arrays)
    ll_curve_ : per-iteration average log-likelihood of the chosen k's best run
    n_iter_ : iterations of that run
    """

    #: declared once (:class:`~hyperapp.models.base.Param`; defaults: ``__init__``'s): forms, checks and fit use it
    parameters = (
        Param("k", str, help="Components, one number (8) or a range (2..10): the lowest BIC labels the image.", label="Components (k or range)"),
        Param("covariance", str, help="Each component's covariance: full matrices, or diagonal (bands independent).", choices=("full", "diag"), label="Covariance"),
        Param("n_init", int, help="EM runs from different k-means starts; the highest likelihood is kept. One start can settle in a worse optimum; several cost little on the GPU. To compare with scikit-learn's GaussianMixture, give it the same number (its n_init).", minimum=1, maximum=100, label="Starts"),
        Param("max_iter", int, help="EM iterations at most.", minimum=1, maximum=10000, label="Iterations at most"),
        Param("tol", float, help="Stop when the average log-likelihood per spectrum changes by less than this.", minimum=0.0, maximum=10.0, label="Tolerance"),
        Param("reg_covar", float, help="Added to every covariance's diagonal, so constant or collinear bands stay invertible.", minimum=0.0, maximum=1e6, label="Covariance floor"),
        Param("seed", int, help="Seed of the k-means starts.", minimum=0, maximum=2**31 - 1, label="Random seed"),
    )

    accepts_progress = True

    def __init__(self, k="8", covariance: str = "full", n_init: int = 3, max_iter: int = 100, tol: float = 1e-3,
                 reg_covar: float = 1e-6, seed: int = 0):
        self.k = k
        self.covariance = covariance
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.seed = seed


    # ------------------------------------------------------------------ the two steps
    def _log_gauss(self, X, means, chol):
        """(n, k) log densities; ``chol`` (k, d, d) precision Cholesky factors, or (k, d) for diag."""
        xp = get_namespace(X)
        n, d = X.shape
        k = means.shape[0]
        out = xp.empty((n, k), xp.float64)
        for j in range(k):  # a loop over components (a handful), never over spectra
            D = X - means[j]
            if self.covariance == "full":
                y2 = ((D @ chol[j]) ** 2).sum(axis=1)
                logdet = xp.log(xp.diagonal(chol[j])).sum()
            else:
                y2 = ((D * chol[j]) ** 2).sum(axis=1)
                logdet = xp.log(chol[j]).sum()
            out[:, j] = -0.5 * (d * math.log(2 * math.pi) + y2) + logdet
        return out

    def _e_step(self, X, weights, means, chol):
        """(average log-likelihood, responsibilities (n, k)), ``X`` centred float64."""
        xp = get_namespace(X)
        lp = self._log_gauss(X, means, chol) + xp.log(weights)[None, :]
        m = lp.max(axis=1, keepdims=True)
        lse = m[:, 0] + xp.log(xp.exp(lp - m).sum(axis=1))
        resp = xp.exp(lp - lse[:, None])
        return float(lse.mean()), resp

    def _m_step(self, X, resp):
        """Weights, means, covariances, precision factors and the extra diagonal floor per component,
        from centred float64 spectra and their responsibilities."""
        xp = get_namespace(X)
        n, d = X.shape
        nk = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
        means = (resp.T @ X) / nk[:, None]
        k = resp.shape[1]
        reg = float(self.reg_covar)
        if self.covariance == "full":
            cov = xp.empty((k, d, d), xp.float64)
            diag = xp.arange(d)
            for j in range(k):
                D = X - means[j]
                cov[j] = ((resp[:, j:j + 1] * D).T @ D) / nk[j]
                cov[j, diag, diag] += reg
            chol, extra = self._precision_factors(cov)
        else:
            sq = (resp.T @ (X * X)) / nk[:, None]
            cov = xp.maximum(sq - means ** 2, 0) + reg
            # a band with no variance in a component (and reg_covar 0) gets a floor relative to the rest
            floor = 1e-10 * xp.maximum(cov.mean(axis=1, keepdims=True), np.finfo(np.float64).tiny)
            extra = to_host(xp.maximum(floor - cov, 0).max(axis=1))
            cov = xp.maximum(cov, floor)
            chol = 1.0 / xp.sqrt(cov)
        return nk / n, means, cov, chol, extra

    @staticmethod
    def _precision_factors(cov):
        """Cholesky factors U of the precisions (Sigma^-1 = U U^T, U = (L^-1)^T for Sigma = L L^T).

        Returns the factors and, per component, what had to be added to the diagonal (in place in
        ``cov``) for its Cholesky factorisation to exist: 0 for every component that needed nothing.
        NumPy raises on a matrix that is not positive definite, CuPy returns NaN: both are caught.
        """
        xp = get_namespace(cov)
        k, d, _ = cov.shape
        extra = np.zeros(k)

        def factor(a):
            try:
                L = xp.linalg.cholesky(a)
            except np.linalg.LinAlgError:
                return None
            return L if bool(xp.isfinite(L).all()) else None

        L = factor(cov)
        if L is None:  # find the components that fail, and floor only those
            L = xp.empty_like(cov)
            diag = xp.arange(d)
            for j in range(k):
                Lj = factor(cov[j])
                if Lj is None:
                    scale = max(float(xp.trace(cov[j])) / d, np.finfo(np.float64).tiny)
                    step = 1e-10 * scale
                    while Lj is None and step <= scale:
                        Lj = factor(cov[j] + step * xp.eye(d))
                        if Lj is None:
                            step *= 10
                    if Lj is None:
                        raise ModelError(f"mixture component {j + 1}'s covariance stays singular even with a "
                                         "floor of its mean variance: try diagonal covariances or fewer components")
                    cov[j, diag, diag] += step
                    extra[j] = step
                L[j] = Lj
        eye = xp.broadcast_to(xp.eye(d), (k, d, d))
        return xp.linalg.solve(L, eye).transpose(0, 2, 1), extra

    def _n_params(self, k: int, d: int) -> int:
        cov = k * d * (d + 1) // 2 if self.covariance == "full" else k * d
        return cov + k * d + k - 1

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, progress=None):
        from hyperapp.models.base import as_pixels, selected_spectra
        from hyperapp.models.kmeans import MultiKMeans, parse_k

        X, _ = as_pixels(X)
        xp = get_namespace(X)
        ks = parse_k(self.k)
        X = selected_spectra(X, max(ks), f"{max(ks)} components is more than the number of spectra ({X.shape[0]})")
        n, d = X.shape
        self.center_ = X.mean(axis=0, dtype=xp.float64)
        Xc = X.astype(xp.float64) - self.center_
        if float(Xc.var(axis=0).max()) <= 0:
            raise ModelError("the selected spectra are all identical: there is nothing to model")
        self.k_values_ = np.asarray(ks)
        self.bic_ = np.empty(len(ks))
        self.log_likelihood_ = np.empty(len(ks))
        best_models = []
        total = len(ks) * int(self.n_init)
        step = 0
        for i, k in enumerate(ks):
            best = None
            for r in range(int(self.n_init)):
                if progress is not None:
                    progress(step / total, f"EM with {k} components, start {r + 1}")
                step += 1
                start = None if progress is None else progress.sub((step - 1) / total, (step - 1) / total)
                km = MultiKMeans(k=k, n_init=1, seed=int(self.seed) + r, silhouette_sample=0, max_iter=100).fit(
                    Xc.astype(xp.float32), progress=start)
                resp = (km.labels_[:, None] == xp.arange(k)[None, :]).astype(xp.float64)
                params = self._m_step(Xc, resp)
                curve = []
                for it in range(int(self.max_iter)):
                    ll, resp = self._e_step(Xc, params[0], params[1], params[3])
                    curve.append(ll)
                    if not math.isfinite(ll) or (it and abs(curve[-1] - curve[-2]) < float(self.tol)):
                        break
                    params = self._m_step(Xc, resp)
                    if progress is not None:
                        progress((step - 1 + it / self.max_iter) / total, f"EM with {k} components")
                ll, _ = self._e_step(Xc, params[0], params[1], params[3])
                if math.isfinite(ll) and (best is None or ll > best[0]):
                    best = (ll, params, curve, len(curve))
            if best is None:  # every start diverged: say so, never label from NaN responsibilities
                raise ModelError(f"the Gaussian mixture with {k} components has no finite likelihood on these "
                                 "spectra: try diagonal covariances, fewer components or a larger covariance floor")
            ll, params, curve, n_it = best
            self.log_likelihood_[i] = ll
            self.bic_[i] = -2.0 * ll * n + self._n_params(k, d) * math.log(n)
            best_models.append((params, curve, n_it))
        i = int(np.argmin(self.bic_))
        self.chosen_k_ = int(ks[i])
        (w, means, cov, chol, extra), curve, n_it = best_models[i]
        self.weights_ = to_host(w)
        self.means_ = to_host(means + self.center_)
        self.covariances_ = to_host(cov)
        #: components whose covariance needed more than ``reg_covar`` on its diagonal: {component: amount}
        self.regularised_ = {int(j): float(extra[j]) for j in np.flatnonzero(extra > 0)}
        self._chol = chol
        self._means_c = means
        self.ll_curve_ = np.asarray(curve)
        self.n_iter_ = n_it
        if progress is not None:
            progress(1.0, "mixture fitted")
        return self


    def predict_proba(self, X):
        """Posterior probability of every component (n, k) for the rows of ``X``."""
        from hyperapp.models.base import as_pixels

        self._check_fitted()
        P, _ = as_pixels(X)
        xp = get_namespace(P)
        out = xp.empty((P.shape[0], self.chosen_k_), xp.float32)
        step = max(1024, CHUNK_BYTES // (8 * P.shape[1]))
        w, mu, ch, c0 = (xp.asarray(to_host(v)) for v in (self.weights_, self._means_c, self._chol, self.center_))
        for a in range(0, P.shape[0], step):
            Pc = P[a:a + step].astype(xp.float64) - c0
            out[a:a + step] = self._e_step(Pc, w, mu, ch)[1]
        return out

    def predict(self, X):
        """Most probable component of every row of ``X``."""
        from hyperapp.models.base import as_pixels

        _, lead = as_pixels(X)
        return self.predict_proba(X).argmax(axis=1).astype(np.int32).reshape(lead)

    def score(self, X) -> float:
        """Average log-likelihood per spectrum of ``X`` under the chosen mixture."""
        from hyperapp.models.base import as_pixels

        self._check_fitted()
        P, _ = as_pixels(X)
        xp = get_namespace(P)
        w, mu, ch, c0 = (xp.asarray(to_host(v)) for v in (self.weights_, self._means_c, self._chol, self.center_))
        return self._e_step(P.astype(xp.float64) - c0, w, mu, ch)[0]

    def summary(self) -> dict:
        self._check_fitted()
        return {"k": [int(k) for k in self.k_values_], "bic": [float(v) for v in self.bic_],
                "log_likelihood_per_sample": [float(v) for v in self.log_likelihood_],
                "chosen_k": self.chosen_k_, "covariance": self.covariance,
                "weights": [float(v) for v in self.weights_], "n_iter": int(self.n_iter_),
                "regularised_components": [
                    {"component": j, "added_to_diagonal": v,
                     "relative_to_mean_variance": v / max(float(np.trace(self.covariances_[j])) / self.means_.shape[1]
                                                          if self.covariance == "full"
                                                          else float(self.covariances_[j].mean()), 1e-300)}
                    for j, v in sorted(self.regularised_.items())],
                "log_likelihood_curve": [float(v) for v in self.ll_curve_]}

    def tables(self) -> dict:
        s = self.summary()
        return {"gmm_bic": (["k", "bic", "log_likelihood_per_sample"],
                            [list(r) for r in zip(s["k"], s["bic"], s["log_likelihood_per_sample"])]),
                "components": (["component", "weight"] + [f"band_{b}" for b in range(self.means_.shape[1])],
                               [[j, float(self.weights_[j]), *map(float, self.means_[j])]
                                for j in range(self.chosen_k_)])}
