"""General Bayesian posteriors from real and synthetic data (Wilde et al. 2021, Eq. 6-9; A.6).

    pi(theta | x_{1:n}, z_{1:m}) ∝ pi(theta) exp( - sum_i l_0(x_i; theta) - sum_j l(z_j; theta) ),

with the log loss ``l_0 = -log f`` on the real data and a loss ``l`` from
:mod:`synthinfer.bayes.losses` on the synthetic data.

Sampling: NUTS (BlackJAX) with window adaptation, ``jax.vmap``-ed over chains *and* over many
(real, synthetic) configurations at once (:func:`synthinfer.bayes.nuts.nuts_batch`) (:meth:`GeneralisedPosterior.sample_many`). Datasets of
different sizes are padded to a common length and padded rows get row-weight 0, so one compiled
program serves a whole experiment grid. Where the model allows it the posterior is sampled
exactly instead (``method="exact"``, chosen by ``"auto"``): the weighted log loss with the
Normal-Inverse-Gamma prior is conjugate for the Gaussian location-scale and linear regression
models (weights act as fractional counts in the sufficient statistics).

NUTS fits are checked against synthinfer's convergence policy (:mod:`synthinfer.mcmc`: split
R-hat < 1.01, or the limit converged chains reach over many parameters, and bulk ESS >= 100 per
chain), with a ConvergenceWarning when it fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from synthinfer._jax import jax, jnp, uses_float64
from synthinfer._params import ParamsMixin
from synthinfer.bayes.calibration import calibrate_beta_weight
from synthinfer.bayes.losses import BetaLoss, ImportanceWeightedLoss, LogLoss
from synthinfer.bayes.models import GaussianLocationScale, LinearRegression, NormalInverseGammaPrior
from synthinfer.bayes.nuts import nuts_batch
from synthinfer.errors import EmptyDataError, NotFittedError, ParameterError
from synthinfer.mcmc import convergence_diagnostics, import_arviz
from synthinfer.privacy.randomness import SeedLike, jax_key, make_rng, seed_fixed


az = import_arviz()


def _n_rows(data: dict | None) -> int:
    return 0 if data is None else int(data["y"].shape[0])


def _pad(data: dict | None, template: dict, length: int) -> dict:
    """Zero-pad every array of ``data`` to ``length`` rows (``template`` gives shapes when data is None)."""
    out = {}
    for k, v in template.items():
        v = np.zeros((0, *v.shape[1:])) if data is None else data[k]
        pad = np.zeros((length - v.shape[0], *v.shape[1:]))
        out[k] = np.concatenate([v, pad], axis=0)
    return out


class GeneralisedPosterior(ParamsMixin):
    """A general Bayesian posterior for a model, a synthetic-data loss and a prior.

    Settings are stored as given (scikit-learn's contract: ``get_params``, ``set_params``,
    ``sklearn.base.clone``) and checked by :meth:`fit` and :meth:`sample_many`.

    Parameters
    ----------
    model : a model from :mod:`synthinfer.bayes.models`.
    loss : the loss on the synthetic data (None: ``LogLoss(1.0)``, Bayes' rule on all data).
    prior : the prior object (None: ``model.default_prior()``).
    method : ``"auto"`` (exact when conjugate, else NUTS), ``"nuts"`` or ``"exact"``.
    num_warmup, num_samples, num_chains : NUTS settings (A.6.3 used 500 warm-up draws).
    max_tree_depth : NUTS trajectories have at most 2^max_tree_depth leapfrog steps. Under
        ``vmap`` all configurations step in lockstep, so one badly adapted chain sets the cost of
        the whole batch; a smaller depth (6-8) bounds it for well-conditioned posteriors.
    seed : int / Generator / None for the sampler's randomness.

    Attributes after :meth:`fit`
    ----------------------------
    idata_ : ArviZ InferenceData (posterior in the model's named parameters, sample_stats).
    draws_ : unconstrained draws, shape (num_chains, num_samples, dim).
    loss_ : the loss used, with ``w_beta`` filled in when it was calibrated.
    w_beta_ : the calibrated beta weight (None unless ``BetaLoss(w_beta="calibrate")``).
    method_ : ``"exact"`` or ``"nuts"``.
    diagnostics_ : :func:`synthinfer.mcmc.convergence_diagnostics` of a NUTS fit (None for exact
        draws, which are independent).
    """

    def __init__(
        self,
        model: Any,
        loss: Any = None,
        prior: Any = None,
        *,
        method: str = "auto",
        num_warmup: int = 500,
        num_samples: int = 1000,
        num_chains: int = 2,
        max_tree_depth: int = 10,
        seed: SeedLike = None,
    ):
        self.model = model
        self.loss = loss
        self.prior = prior
        self.method = method
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.max_tree_depth = max_tree_depth
        self.seed = seed

    # ------------------------------------------------------------------ set-up
    def _check(self) -> None:
        if self.method not in ("auto", "nuts", "exact"):
            raise ParameterError(f"method must be 'auto', 'nuts' or 'exact', got {self.method!r}")
        for k in ("num_warmup", "num_samples", "num_chains", "max_tree_depth"):
            v = getattr(self, k)
            if not isinstance(v, (int, np.integer)) or v < (0 if k == "num_warmup" else 1):
                raise ParameterError(f"{k} must be a positive integer, got {v!r}")

    def _prior(self) -> Any:
        return self.model.default_prior() if self.prior is None else self.prior

    def _loss(self) -> Any:
        return LogLoss(1.0) if self.loss is None else self.loss

    def _base_loss(self) -> Any:
        loss = self._loss()
        return loss.base if isinstance(loss, ImportanceWeightedLoss) else loss

    def is_conjugate(self) -> bool:
        """True when the posterior is available in closed form (weighted log loss, NIG prior)."""
        return (
            isinstance(self.model, (GaussianLocationScale, LinearRegression))
            and isinstance(self._base_loss(), LogLoss)
            and isinstance(self._prior(), NormalInverseGammaPrior)
        )

    def _resolve_method(self) -> str:
        if self.method == "exact" and not self.is_conjugate():
            raise ParameterError(
                f"no closed form for {type(self.model).__name__} with {self._loss()!r} and {self._prior()!r}; use method='nuts'"
            )
        if self.method == "auto":
            return "exact" if self.is_conjugate() else "nuts"
        return self.method

    def _resolve_loss(self, syn: dict | None) -> tuple[Any, float | None]:
        """Fill in a calibrated w_beta from the synthetic data when asked for."""
        loss, base = self._loss(), self._base_loss()
        if isinstance(base, BetaLoss) and base.w_beta == "calibrate":
            if syn is None:
                raise EmptyDataError("BetaLoss(w_beta='calibrate') needs synthetic data to calibrate on")
            weights = loss.row_weights(_n_rows(syn)) if isinstance(loss, ImportanceWeightedLoss) else None
            w = calibrate_beta_weight(self.model, base, syn, row_weights=weights)
            new = BetaLoss(base.beta, w)
            if isinstance(loss, ImportanceWeightedLoss):
                return ImportanceWeightedLoss(loss.weights, new, self_normalise=False), w
            return new, w
        return loss, None

    def _row_weights(self, loss: Any, m: int, count: np.ndarray | None = None) -> np.ndarray:
        """Per-row weights of the synthetic rows: importance weights, or each row's multiplicity
        ``count`` (a dataset collapsed to its distinct rows; the loss is a sum over rows, so the
        same posterior), else 1."""
        if isinstance(loss, ImportanceWeightedLoss):
            return loss.row_weights(m)
        return np.ones(m) if count is None else np.asarray(count, dtype=np.float64)

    def _prepare(self, real: Any, synthetic: Any) -> tuple[dict | None, dict | None]:
        r = None if real is None else self.model.prepare(real)
        s = None if synthetic is None else self.model.prepare(synthetic)
        if _n_rows(r) == 0:
            r = None
        if _n_rows(s) == 0:
            s = None
        return r, s

    # ------------------------------------------------------------------ fitting
    @uses_float64
    def fit(self, real: Any = None, synthetic: Any = None) -> GeneralisedPosterior:
        """Sample the posterior given real data ``real`` and synthetic data ``synthetic``.

        Either may be None/empty (prior only on that side). Stores ``idata_`` (and the other
        fitted attributes) and returns ``self``.
        """
        self._check()
        r, s = self._prepare(real, synthetic)
        loss, w_beta = self._resolve_loss(s)
        self.loss_, self.w_beta_ = loss, w_beta
        self.method_ = self._resolve_method()
        rng = make_rng(self.seed)
        draws, stats = self._sample_batch([r], [s], loss, rng)
        self.draws_ = draws[0]
        self.idata_ = self._to_idata(self.draws_, {k: v[0] for k, v in stats.items()})
        self.diagnostics_ = convergence_diagnostics(self.idata_) if self.method_ == "nuts" else None
        return self

    @uses_float64
    def sample_many(self, pairs: Sequence[tuple[Any, Any]], seed: SeedLike = None, *,
                    counts: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
        """Posterior draws for many (real, synthetic) configurations in one vectorised run.

        Returns unconstrained draws of shape (len(pairs), num_chains, num_samples, dim). The
        loss's ``w_beta='calibrate'`` is not allowed here (calibrate once with :meth:`fit` or
        :func:`~synthinfer.bayes.calibration.calibrate_beta_weight` and pass the number).
        ``counts``: per pair, the multiplicity of each synthetic row (its data collapsed to
        distinct rows) or None; not with importance weights, which are per row already.
        """
        self._check()
        base = self._base_loss()
        if isinstance(base, BetaLoss) and base.w_beta == "calibrate":
            raise ParameterError("sample_many needs a numeric w_beta; calibrate first")
        counts = [None] * len(pairs) if counts is None else list(counts)
        if len(counts) != len(pairs):
            raise ParameterError(f"counts must have one entry per pair ({len(pairs)}), got {len(counts)}")
        if isinstance(self._loss(), ImportanceWeightedLoss) and any(c is not None for c in counts):
            raise ParameterError("counts cannot be combined with an ImportanceWeightedLoss (its weights are per row)")
        self.method_ = self._resolve_method()
        prepared = [self._prepare(r, s) for r, s in pairs]
        for (_, syn), c in zip(prepared, counts):
            if c is not None and (np.shape(c) != (_n_rows(syn),) or not np.all(np.isfinite(c) & (np.asarray(c) > 0))):
                raise ParameterError(f"counts must be {_n_rows(syn)} positive multiplicities, one per synthetic row")
        rng = make_rng(self.seed if seed is None else seed)
        draws, _ = self._sample_batch([p[0] for p in prepared], [p[1] for p in prepared], self._loss(), rng, counts)
        return draws

    def _sample_batch(self, reals: list, syns: list, loss: Any, rng: np.random.Generator,
                      counts: list | None = None) -> tuple[np.ndarray, dict]:
        counts = [None] * len(syns) if counts is None else counts
        if self.method_ == "exact":
            out = np.stack([self._sample_exact(r, s, loss, rng, c) for r, s, c in zip(reals, syns, counts)])
            return out, {}
        return self._sample_nuts(reals, syns, loss, rng, counts)

    # ---------------------------------------------------------- closed forms
    def _weighted_stats(self, r: dict | None, s: dict | None, loss: Any,
                        count: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stack real (weight 1) and synthetic (weight w * importance weight) rows."""
        ys, Xs, ws = [], [], []
        if r is not None:
            ys.append(r["y"])
            Xs.append(r.get("X", np.zeros((len(r["y"]), 0))))
            ws.append(np.ones(len(r["y"])))
        if s is not None:
            m = len(s["y"])
            ys.append(s["y"])
            Xs.append(s.get("X", np.zeros((m, 0))))
            ws.append(self._base_loss().w * self._row_weights(loss, m, count))
        if not ys:
            return np.zeros(0), np.zeros((0, 0)), np.zeros(0)
        return np.concatenate(ys), np.concatenate(Xs), np.concatenate(ws)

    def _sample_exact(self, r: dict | None, s: dict | None, loss: Any, rng: np.random.Generator,
                      count: np.ndarray | None = None) -> np.ndarray:
        """Exact draws from the weighted Normal-Inverse-Gamma posterior (unconstrained coordinates)."""
        p = self._prior()
        y, X, w = self._weighted_stats(r, s, loss, count)
        S, C = self.num_samples, self.num_chains
        if isinstance(self.model, GaussianLocationScale):
            mu_n, kappa_n, a_n, b_n = nig_posterior(y, w, p)
            s2 = b_n / rng.gamma(a_n, 1.0, size=(C, S))
            mu = rng.normal(mu_n, np.sqrt(s2 / kappa_n))
            return np.stack([mu, 0.5 * np.log(s2)], axis=-1)
        # Linear regression: beta | sigma ~ N(m_n, sigma^2 Lambda_n^{-1}), sigma^2 ~ IG(a_n, b_n).
        d = self.model.dim - 1
        Z = self.model.design(X) if len(y) else np.zeros((0, d))
        lam0 = np.eye(d) / p.scale**2
        m0 = np.full(d, p.mean)
        lam_n = lam0 + Z.T @ (w[:, None] * Z)
        m_n = np.linalg.solve(lam_n, lam0 @ m0 + Z.T @ (w * y))
        a_n = p.shape + w.sum() / 2
        b_n = p.rate + 0.5 * (np.sum(w * y**2) + m0 @ lam0 @ m0 - m_n @ lam_n @ m_n)
        s2 = b_n / rng.gamma(a_n, 1.0, size=(C, S))
        L = np.linalg.cholesky(np.linalg.inv(lam_n))
        coef = m_n + np.sqrt(s2)[..., None] * (rng.standard_normal((C, S, d)) @ L.T)
        return np.concatenate([coef, 0.5 * np.log(s2)[..., None]], axis=-1)

    # ------------------------------------------------------------------ NUTS
    def _sample_nuts(self, reals: list, syns: list, loss: Any, rng: np.random.Generator,
                     counts: list | None = None) -> tuple[np.ndarray, dict]:
        model, prior = self.model, self._prior()
        template = next((d for d in (*reals, *syns) if d is not None), None)
        if template is None:
            template = model.prepare(np.zeros((0,)) if isinstance(model, GaussianLocationScale) else (np.zeros((0, model.n_features_in)), np.zeros(0)))
        nr = max(1, max(_n_rows(r) for r in reals))
        ns = max(1, max(_n_rows(s) for s in syns))
        batch_r = {k: np.stack([_pad(r, template, nr)[k] for r in reals]) for k in template}
        batch_s = {k: np.stack([_pad(s, template, ns)[k] for s in syns]) for k in template}
        wr = np.stack([np.r_[np.ones(_n_rows(r)), np.zeros(nr - _n_rows(r))] for r in reals])
        counts = [None] * len(syns) if counts is None else counts
        ws = np.stack([np.r_[self._row_weights(loss, _n_rows(s), c) if s is not None else [], np.zeros(ns - _n_rows(s))]
                       for s, c in zip(syns, counts)])
        inits = []
        for r, s, c in zip(reals, syns, counts):
            if r is None and s is not None and c is not None:  # the start from the rows as they were
                s = {k: np.repeat(v, np.asarray(c, dtype=np.int64), axis=0) for k, v in s.items()}
            base = model.init_position(r if r is not None else (s if s is not None else template))
            inits.append(base + 0.1 * rng.standard_normal((self.num_chains, model.dim)))
        inits = np.stack(inits)
        C = len(reals)
        keys = jax.random.split(jax_key(rng), C * self.num_chains).reshape(C, self.num_chains)
        n_warm, n_samp, depth = int(self.num_warmup), int(self.num_samples), int(self.max_tree_depth)

        def logdensity(u, d):
            dr, wr_, ds, ws_ = d
            lp = model.log_prior(u, prior)
            lp = lp + jnp.sum(wr_ * model.log_density(u, dr))
            return lp - jnp.sum(ws_ * loss.per_row(model, u, ds))

        pos, div, acc = nuts_batch(logdensity, keys, inits, (batch_r, wr, batch_s, ws), num_warmup=n_warm,
                                   num_samples=n_samp, max_tree_depth=depth)
        return np.asarray(pos), {"diverging": np.asarray(div), "acceptance_rate": np.asarray(acc)}

    # ------------------------------------------------------------------ outputs
    def _to_idata(self, draws: np.ndarray, stats: dict) -> az.InferenceData:
        named = {k: np.asarray(v) for k, v in self.model.constrain(jnp.asarray(draws)).items()}
        idata = az.from_dict(posterior=named, sample_stats=stats or None)
        idata.posterior.attrs.update(
            {
                "model": type(self.model).__name__,
                "loss": getattr(self.loss_, "label", repr(self.loss_)),
                "method": self.method_,
                "seed_fixed": seed_fixed(self.seed),
            }
        )
        return idata

    def _fitted_draws(self) -> np.ndarray:
        if not hasattr(self, "draws_"):
            raise NotFittedError("GeneralisedPosterior is not fitted; call fit() first")
        return self.draws_

    @uses_float64
    def log_predictive(self, data: Any, draws: np.ndarray | None = None) -> np.ndarray:
        """Per-row log posterior predictive density ``log (1/S) sum_s f(x_i | theta_s)`` (log score, A.20)."""
        u = (self._fitted_draws() if draws is None else draws).reshape(-1, self.model.dim)
        return log_predictive_density(self.model, jnp.asarray(u), self.model.prepare(data))

    @uses_float64
    def predict_proba(self, data: Any, draws: np.ndarray | None = None) -> np.ndarray:
        """Posterior predictive P(y = 1 | x) for the logistic model (mean over draws)."""
        u = (self._fitted_draws() if draws is None else draws).reshape(-1, self.model.dim)
        d = self.model.prepare(data)
        return predictive_proba(self.model, jnp.asarray(u), d)

    def summary(self) -> Any:
        """ArviZ summary table of the fitted posterior (means, sds, HDIs, R-hat, ESS)."""
        if not hasattr(self, "idata_"):
            raise NotFittedError("GeneralisedPosterior is not fitted; call fit() first")
        return az.summary(self.idata_)


def nig_posterior(y: np.ndarray, w: np.ndarray, prior: Any) -> tuple[float, float, float, float]:
    """Weighted Normal-Inverse-Gamma update: (mu_n, kappa_n, a_n, b_n).

    With weights w_i (real rows 1, synthetic rows w) and kappa_0 = 1 / sigma_p^2:
    W = sum w, ybar = sum w y / W, S = sum w (y - ybar)^2,
    kappa_n = kappa_0 + W, mu_n = (kappa_0 mu_0 + W ybar) / kappa_n, a_n = a_0 + W/2,
    b_n = b_0 + S/2 + kappa_0 W (ybar - mu_0)^2 / (2 kappa_n).
    """
    kappa0 = 1.0 / prior.scale**2
    W = float(np.sum(w))
    ybar = float(np.sum(w * y) / W) if W > 0 else 0.0
    S = float(np.sum(w * (y - ybar) ** 2)) if W > 0 else 0.0
    kappa_n = kappa0 + W
    mu_n = (kappa0 * prior.mean + W * ybar) / kappa_n
    a_n = prior.shape + W / 2
    b_n = prior.rate + S / 2 + kappa0 * W * (ybar - prior.mean) ** 2 / (2 * kappa_n)
    return mu_n, kappa_n, a_n, b_n


@uses_float64
def log_predictive_density(model: Any, u: jnp.ndarray, data: dict) -> np.ndarray:
    """``log (1/S) sum_s f(x_i | u_s)`` for draws ``u`` of shape (S, dim)."""
    ld = jax.vmap(lambda uu: model.log_density(uu, {k: jnp.asarray(v) for k, v in data.items()}))(u)
    return np.asarray(jax.scipy.special.logsumexp(ld, axis=0) - math.log(u.shape[0]))


@uses_float64
def predictive_proba(model: Any, u: jnp.ndarray, data: dict) -> np.ndarray:
    """Mean over draws of P(y = 1 | x, theta_s) for a binary model (logistic or probit)."""
    X = jnp.asarray(data["X"])
    return np.asarray(jnp.mean(jax.vmap(lambda uu: model.probability(uu, X))(u), axis=0))
