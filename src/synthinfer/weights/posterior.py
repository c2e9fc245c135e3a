"""The importance-weighted Bayesian posterior of eq. (3), sampled by :mod:`synthinfer.bayes`.

    pi_IW(theta | x_{1:N_G}) ∝ pi(theta) exp( sum_i w(x_i) log f(x_i | theta) )

is a generalised Bayesian posterior (Bissiri et al. 2016) with loss ``-w(x) log f(x | theta)``;
by Theorem 1 (Supp. B.6) it has the same limiting Gaussian as the posterior given real data.
:class:`IWBayesianRegression` is that posterior for logistic, linear and multinomial (softmax)
regression with the priors of Supplement C.5: ``N(0, prior_scale^2)`` on every coefficient and
intercept, and ``HalfNormal(10)`` on the linear model's noise scale. It is a
:class:`~synthinfer.bayes.GeneralisedPosterior` with an
:class:`~synthinfer.bayes.ImportanceWeightedLoss` on the log loss, sampled by the same vectorised
NUTS and checked by the same convergence policy (:mod:`synthinfer.mcmc`). The weights are
self-normalised to mean 1 so that the posterior's concentration corresponds to ``N_G`` rows.

Posterior-predictive metrics (Section 4.3, Fig. 2, Supp. C.5): :meth:`metric_draws` gives the
test ROC-AUC (one-vs-rest macro average for multinomial) or MSE for every posterior draw.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synthinfer._precision import uses_float64
from synthinfer._params import ParamsMixin
from synthinfer.errors import NonFiniteError, NotFittedError, ParameterError
from synthinfer.privacy.randomness import SeedLike
from synthinfer.weights.diagnostics import self_normalise

_KINDS = ("logistic", "linear", "multinomial")

#: Scale of the HalfNormal prior on the linear model's noise sigma (Supp. C.5).
SIGMA_PRIOR_SCALE = 10.0


class IWBayesianRegression(ParamsMixin):
    """Importance-weighted Bayesian regression (eq. 3) sampled with NUTS.

    Parameters
    ----------
    kind : ``"logistic"``, ``"linear"`` or ``"multinomial"``.
    prior_scale : standard deviation of the Normal prior on coefficients (Supp. C.5: 1).
    fit_intercept : include an intercept (the first coefficient, with the same prior).
    num_warmup, num_samples, num_chains : NUTS settings (see
        :class:`~synthinfer.bayes.GeneralisedPosterior`).
    seed : sampler randomness.

    Attributes after :meth:`fit`
    ----------------------------
    samples_ : ``{"beta": ...}`` (and ``"sigma"`` for linear), draws of all chains in a row:
        beta has shape (draws, p) or (draws, p, n_classes) for multinomial, with p the number of
        columns of ``X`` (plus the intercept, first, when fitted).
    classes_, n_classes_ : the target's classes (not for linear; ``n_classes_`` is 0 there).
    posterior_ : the fitted :class:`~synthinfer.bayes.GeneralisedPosterior`.
    diagnostics_ : its convergence diagnostics (:func:`synthinfer.mcmc.convergence_diagnostics`).
    """

    def __init__(self, kind: str = "logistic", *, prior_scale: float = 1.0, fit_intercept: bool = True,
                 num_warmup: int = 500, num_samples: int = 1000, num_chains: int = 1, seed: SeedLike = None):
        self.kind = kind
        self.prior_scale = prior_scale
        self.fit_intercept = fit_intercept
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.seed = seed

    def _features(self, X: Any) -> np.ndarray:
        x = np.asarray(X, dtype=float)
        if x.ndim != 2:
            raise ParameterError(f"X must be 2-dimensional, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise NonFiniteError("X has non-finite values")
        return x

    def _design(self, X: Any) -> np.ndarray:
        """The columns that ``beta`` multiplies (a column of ones first when fitting the intercept)."""
        x = self._features(X)
        return np.hstack([np.ones((len(x), 1)), x]) if self.fit_intercept else x

    def _model_and_prior(self, n_features: int) -> tuple[Any, Any]:
        from synthinfer.bayes.models import (
            LinearRegression,
            LogisticRegression,
            MultinomialRegression,
            NormalHalfNormalPrior,
            NormalPrior,
        )

        intercept = bool(self.fit_intercept)
        if self.kind == "linear":
            return (LinearRegression(n_features=n_features, fit_intercept=intercept),
                    NormalHalfNormalPrior(float(self.prior_scale), SIGMA_PRIOR_SCALE))
        prior = NormalPrior(float(self.prior_scale))
        if self.kind == "logistic":
            return LogisticRegression(n_features=n_features, fit_intercept=intercept), prior
        return MultinomialRegression(n_features=n_features, n_classes=self.n_classes_, fit_intercept=intercept), prior

    @uses_float64
    def fit(self, X: Any, y: Any, weights: Any = None) -> IWBayesianRegression:
        """Sample the IW posterior given synthetic ``X, y`` and weights (``None``: the unweighted posterior)."""
        from synthinfer.bayes.losses import ImportanceWeightedLoss, LogLoss
        from synthinfer.bayes.posterior import GeneralisedPosterior

        if self.kind not in _KINDS:
            raise ParameterError(f"kind must be one of {_KINDS}, got {self.kind!r}")
        if isinstance(self.prior_scale, bool) or not (isinstance(self.prior_scale, (int, float)) and np.isfinite(self.prior_scale)
                                                      and self.prior_scale > 0):
            raise ParameterError(f"prior_scale must be a finite number > 0, got {self.prior_scale!r}")
        x = self._features(X)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(x):
            raise ParameterError(f"y must have one target per row of X ({len(x)}), got shape {y.shape}")
        w = None if weights is None else self_normalise(weights)
        if w is not None and len(w) != len(x):
            raise ParameterError(f"weights has {len(w)} entries for the {len(x)} rows of X")
        if self.kind == "linear":
            target = y.astype(float)
            self.n_classes_ = 0
        else:
            self.classes_, codes = np.unique(y, return_inverse=True)
            if self.kind == "logistic" and len(self.classes_) != 2:
                raise ParameterError(f"kind='logistic' needs y with 2 classes, got {len(self.classes_)}")
            self.n_classes_ = len(self.classes_)
            target = codes.astype(float)
        model, prior = self._model_and_prior(x.shape[1])
        loss = LogLoss(1.0) if w is None else ImportanceWeightedLoss(w, LogLoss(1.0), self_normalise=False)
        self.posterior_ = GeneralisedPosterior(
            model, loss, prior, method="nuts", num_warmup=self.num_warmup, num_samples=self.num_samples,
            num_chains=self.num_chains, seed=self.seed,
        ).fit(synthetic=(x, target))
        self.diagnostics_ = self.posterior_.diagnostics_
        self.samples_ = {k: v.reshape(-1, *v.shape[2:]) for k, v in self._chain_draws().items()}
        return self

    def _chain_draws(self) -> dict[str, np.ndarray]:
        """``beta`` (and ``sigma``) of shape (chains, draws, ...) from the posterior's unconstrained draws."""
        u = self.posterior_.draws_
        if self.kind == "linear":
            return {"beta": u[..., :-1], "sigma": np.exp(u[..., -1])}
        if self.kind == "multinomial":
            return {"beta": u.reshape(*u.shape[:-1], -1, self.n_classes_)}
        return {"beta": u}

    def _check(self) -> None:
        if not hasattr(self, "samples_"):
            raise NotFittedError("IWBayesianRegression is not fitted yet; call fit(X, y, weights) first")

    @uses_float64
    def predictive_draws(self, X: Any) -> np.ndarray:
        """Per-draw predictions: P(y=1) (logistic), class probabilities (multinomial) or means (linear)."""
        from scipy.special import expit, softmax

        self._check()
        x = self._design(X)
        beta = self.samples_["beta"]
        if self.kind == "multinomial":
            return softmax(np.einsum("np,spk->snk", x, beta), axis=-1)
        lin = beta @ x.T
        return expit(lin) if self.kind == "logistic" else lin

    @uses_float64
    def predict(self, X: Any) -> np.ndarray:
        """Posterior-predictive mean (probabilities for the classifiers)."""
        return self.predictive_draws(X).mean(axis=0)

    def _metric(self, y: np.ndarray, pred: np.ndarray) -> float:
        from sklearn.metrics import mean_squared_error, roc_auc_score

        if self.kind == "linear":
            return float(mean_squared_error(y, pred))
        codes = np.searchsorted(self.classes_, y)
        if self.kind == "logistic":
            return float(roc_auc_score(codes, pred))
        return float(roc_auc_score(codes, pred, multi_class="ovr", average="macro", labels=np.arange(self.n_classes_)))

    @uses_float64
    def score(self, X: Any, y: Any) -> float:
        """ROC-AUC (classifiers; one-vs-rest macro for multinomial) or MSE (linear) of the predictive mean."""
        return self._metric(np.asarray(y), self.predict(X))

    @uses_float64
    def metric_draws(self, X: Any, y: Any) -> np.ndarray:
        """The metric of :meth:`score` for each posterior draw (the distributions of Fig. 2)."""
        y = np.asarray(y)
        return np.array([self._metric(y, p) for p in self.predictive_draws(X)])

    def to_arviz(self) -> Any:
        """The draws as ArviZ ``InferenceData`` (``beta``, ``sigma``; the sampler's statistics)."""
        from synthinfer.mcmc import import_arviz

        az = import_arviz()

        self._check()
        stats = self.posterior_.idata_.sample_stats
        return az.from_dict(posterior=self._chain_draws(), sample_stats={k: v.values for k, v in stats.data_vars.items()})
