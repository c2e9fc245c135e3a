"""The importance-weighted Bayesian posterior of eq. (3), in NumPyro.

    pi_IW(theta | x_{1:N_G}) ∝ pi(theta) exp( sum_i w(x_i) log f(x_i | theta) )

is a generalised Bayesian posterior (Bissiri et al. 2016) with loss ``-w(x) log f(x | theta)``;
by Theorem 1 (Supp. B.6) it has the same limiting Gaussian as the posterior given real data.
:class:`IWBayesianRegression` samples it with NUTS for logistic, linear and multinomial
(softmax) regression, with the priors of Supplement C.5: ``N(0, prior_scale^2)`` on every
coefficient and intercept, and ``HalfNormal(10)`` on the linear model's noise scale. The
weights enter through ``numpyro.factor``; they are self-normalised to mean 1 so that the
posterior's concentration corresponds to ``N_G`` rows.

Posterior-predictive metrics (Section 4.3, Fig. 2, Supp. C.5): :meth:`metric_draws` gives the
test ROC-AUC (one-vs-rest macro average for multinomial) or MSE for every posterior draw.
"""

from __future__ import annotations

import numpy as np

from synthinfer.errors import NotFittedError, SynthinferError
from synthinfer.privacy import make_rng
from synthinfer.privacy.randomness import SeedLike, jax_key
from synthinfer.weights.diagnostics import self_normalise

_KINDS = ("logistic", "linear", "multinomial")


def _model(x, y, w, kind: str, n_classes: int, prior_scale: float):
    import numpyro
    import numpyro.distributions as dist

    from synthinfer._jax import jnp

    p = x.shape[1]
    if kind == "multinomial":
        beta = numpyro.sample("beta", dist.Normal(0.0, prior_scale).expand([p, n_classes]).to_event(2))
        ll = dist.Categorical(logits=x @ beta).log_prob(y)
    else:
        beta = numpyro.sample("beta", dist.Normal(0.0, prior_scale).expand([p]).to_event(1))
        if kind == "logistic":
            ll = dist.Bernoulli(logits=x @ beta).log_prob(y)
        else:
            sigma = numpyro.sample("sigma", dist.HalfNormal(10.0))
            ll = dist.Normal(x @ beta, sigma).log_prob(y)
    numpyro.factor("iw_loglik", jnp.sum(w * ll))


class IWBayesianRegression:
    """Importance-weighted Bayesian regression (eq. 3) sampled with NUTS.

    Parameters
    ----------
    kind : ``"logistic"``, ``"linear"`` or ``"multinomial"``.
    prior_scale : standard deviation of the Normal prior on coefficients (Supp. C.5: 1).
    fit_intercept : prepend a column of ones.
    num_warmup, num_samples, num_chains : NUTS settings.
    seed : sampler randomness.
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

    def _design(self, X) -> np.ndarray:
        x = np.asarray(X, dtype=float)
        if x.ndim != 2:
            raise SynthinferError(f"X must be 2-dimensional, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise SynthinferError("X has non-finite values")
        return np.hstack([np.ones((len(x), 1)), x]) if self.fit_intercept else x

    def fit(self, X, y, weights=None) -> IWBayesianRegression:
        """Sample the IW posterior given synthetic ``X, y`` and weights (``None``: the unweighted posterior)."""
        from numpyro.infer import MCMC, NUTS

        from synthinfer._jax import jnp

        if self.kind not in _KINDS:
            raise SynthinferError(f"kind must be one of {_KINDS}, got {self.kind!r}")
        x = self._design(X)
        y = np.asarray(y)
        if len(y) != len(x):
            raise SynthinferError(f"{len(y)} targets for {len(x)} rows")
        w = np.ones(len(x)) if weights is None else self_normalise(weights)
        if len(w) != len(x):
            raise SynthinferError(f"{len(w)} weights for {len(x)} rows")
        if self.kind == "linear":
            yj = jnp.asarray(y, dtype=float)
            self.n_classes_ = 0
        else:
            self.classes_, codes = np.unique(y, return_inverse=True)
            if self.kind == "logistic" and len(self.classes_) != 2:
                raise SynthinferError(f"logistic regression needs 2 classes, got {len(self.classes_)}")
            self.n_classes_ = len(self.classes_)
            yj = jnp.asarray(codes)
        mcmc = MCMC(NUTS(_model), num_warmup=self.num_warmup, num_samples=self.num_samples,
                    num_chains=self.num_chains, chain_method="sequential", progress_bar=False)
        mcmc.run(jax_key(make_rng(self.seed)), jnp.asarray(x), yj, jnp.asarray(w), self.kind,
                 self.n_classes_, float(self.prior_scale))
        self.mcmc_ = mcmc
        self.samples_ = {k: np.asarray(v) for k, v in mcmc.get_samples().items()}
        return self

    def _check(self) -> None:
        if not hasattr(self, "samples_"):
            raise NotFittedError("IWBayesianRegression is not fitted yet; call fit(X, y, weights) first")

    def predictive_draws(self, X) -> np.ndarray:
        """Per-draw predictions: P(y=1) (logistic), class probabilities (multinomial) or means (linear)."""
        from scipy.special import expit, softmax

        self._check()
        x = self._design(X)
        beta = self.samples_["beta"]
        if self.kind == "multinomial":
            return softmax(np.einsum("np,spk->snk", x, beta), axis=-1)
        lin = beta @ x.T
        return expit(lin) if self.kind == "logistic" else lin

    def predict(self, X) -> np.ndarray:
        """Posterior-predictive mean (probabilities for the classifiers)."""
        return self.predictive_draws(X).mean(axis=0)

    def _metric(self, y, pred) -> float:
        from sklearn.metrics import mean_squared_error, roc_auc_score

        if self.kind == "linear":
            return float(mean_squared_error(y, pred))
        codes = np.searchsorted(self.classes_, y)
        if self.kind == "logistic":
            return float(roc_auc_score(codes, pred))
        return float(roc_auc_score(codes, pred, multi_class="ovr", average="macro", labels=np.arange(self.n_classes_)))

    def score(self, X, y) -> float:
        """ROC-AUC (classifiers; one-vs-rest macro for multinomial) or MSE (linear) of the predictive mean."""
        return self._metric(np.asarray(y), self.predict(X))

    def metric_draws(self, X, y) -> np.ndarray:
        """The metric of :meth:`score` for each posterior draw (the distributions of Fig. 2)."""
        y = np.asarray(y)
        return np.array([self._metric(y, p) for p in self.predictive_draws(X)])

    def to_arviz(self):
        """The draws as ArviZ ``InferenceData`` (for R-hat, ESS, plots)."""
        import arviz as az

        self._check()
        return az.from_numpyro(self.mcmc_)
