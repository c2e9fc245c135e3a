"""Losses l(z, f_theta) for the general Bayesian update (Bissiri et al. 2016; Wilde et al. 2021).

The posterior is pi(theta | x, z) ∝ pi(theta) exp(-sum_i l_0(x_i) - sum_j l(z_j)) with the
log loss l_0 = -log f on the real data x and one of these losses on the synthetic data z:

- :class:`LogLoss` ``l_w(z) = -w log f(z; theta)`` (A.14, A.17); ``w = 1`` is Bayes' rule, ``w = 0``
  ignores the synthetic data.
- :class:`BetaLoss` ``l_beta(z) = -w_beta [ (1/beta) f(z; theta)^beta - 1/(beta+1) int f(y; theta)^(beta+1) dy ]``
  (A.1-A.3, A.15). For the Gaussian the integral is ``((2 pi)^(beta/2) (1+beta)^(1/2) sigma^beta)^(-1)``;
  for Bernoulli/logistic regression it is a sum over y in {0, 1}, so the loss is
  ``-w_beta [ (1/beta) p(y|x)^beta - 1/(beta+1) (p^(beta+1) + (1-p)^(beta+1)) ]``.
  (The paper's A.19 and its reference Stan code use ``(p^y + (1-p)^(1-y))^beta`` and a ``+`` sign
  before the integral term; both are wrong: the first is not the density of the observed label
  and the second does not give a divergence. We use the definition A.1.)
- :class:`NoiseAwareLoss` ``-log NL(z; mu, sigma, lambda)``, the Normal-Laplace convolution (A.16,
  Reed 2006 as corrected by Amini & Rabbani 2017) for data released by the Laplace mechanism with
  known scale lambda, optionally with the clamping of the truncated mechanism modelled exactly.
  Gaussian location-scale model only.
- :class:`ImportanceWeightedLoss` ``w_j * l(z_j)`` with per-row importance weights (Ghalebikesabi
  et al. 2022), e.g. from :mod:`synthinfer.weights`.

Every loss maps ``(model, u, data)`` to a vector of per-row losses; the posterior multiplies it
by per-row masks, so padding for vectorised fits costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.errors import ParameterError


@dataclass(frozen=True)
class LogLoss:
    """``l_w(z) = -w log f(z; theta)`` (A.14, A.17)."""

    w: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.w) and self.w >= 0):
            raise ParameterError(f"LogLoss.w must be finite and >= 0, got {self.w!r}")

    def per_row(self, model: Any, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        return -self.w * model.log_density(u, data)

    @property
    def label(self) -> str:
        return f"w={self.w:g}"


@dataclass(frozen=True)
class BetaLoss:
    """The beta-divergence (density power) loss with calibration weight ``w_beta`` (A.15, A.19 corrected).

    ``w_beta`` is a number (the paper fixes 1.25) or ``"calibrate"``: the posterior then sets it
    from the synthetic data by matching Fisher information (see
    :func:`synthinfer.bayes.calibration.calibrate_beta_weight`).
    """

    beta: float = 0.5
    w_beta: float | str = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ParameterError(f"BetaLoss.beta must be finite and > 0, got {self.beta!r}")
        if isinstance(self.w_beta, str):
            if self.w_beta != "calibrate":
                raise ParameterError(f"BetaLoss.w_beta must be a number or 'calibrate', got {self.w_beta!r}")
        elif not (math.isfinite(self.w_beta) and self.w_beta > 0):
            raise ParameterError(f"BetaLoss.w_beta must be finite and > 0, got {self.w_beta!r}")

    def unweighted_per_row(self, model: Any, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        """``(1/(beta+1)) int f^(beta+1) - (1/beta) f(z)^beta`` (w_beta = 1), computed in log space."""
        b = self.beta
        f_b = jnp.exp(b * model.log_density(u, data))
        integral = jnp.exp(model.log_power_integral(u, data, 1.0 + b))
        return integral / (b + 1.0) - f_b / b

    def per_row(self, model: Any, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        if isinstance(self.w_beta, str):
            raise ParameterError("BetaLoss(w_beta='calibrate') must be calibrated first (GeneralisedPosterior.fit does it)")
        return self.w_beta * self.unweighted_per_row(model, u, data)

    @property
    def label(self) -> str:
        wb = self.w_beta if isinstance(self.w_beta, str) else f"{self.w_beta:g}"
        return f"beta={self.beta:g} (w_beta={wb})"


def normal_laplace_logpdf(y: jnp.ndarray, mu: jnp.ndarray, sigma: jnp.ndarray, lam: float) -> jnp.ndarray:
    """log density of ``X + E`` with ``X ~ N(mu, sigma^2)``, ``E ~ Laplace(0, lam)`` (A.16).

    ``NL(y) = (1/(2 lam)) e^{sigma^2/(2 lam^2)} [ e^{(mu-y)/lam} Phi(r - s) + e^{(y-mu)/lam} Phi(-r - s) ]``
    with ``r = (y - mu)/sigma``, ``s = sigma/lam``; A.16 writes ``Phi(t) = (1 + erf(t/sqrt 2))/2``.
    Evaluated with ``log_ndtr`` and ``logaddexp`` so the tails neither overflow nor cancel.
    """
    r = (y - mu) / sigma
    s = sigma / lam
    c = 0.5 * s**2 - jnp.log(2.0 * lam)
    a = (mu - y) / lam + jax.scipy.special.log_ndtr(r - s)
    b = (y - mu) / lam + jax.scipy.special.log_ndtr(-r - s)
    return c + jnp.logaddexp(a, b)


def _log_diff_ndtr(hi: jnp.ndarray, lo: jnp.ndarray) -> jnp.ndarray:
    """log(Phi(hi) - Phi(lo)) for hi >= lo, accurate in both tails (-inf when hi <= lo)."""
    # In the upper tail use Phi(hi) - Phi(lo) = Phi(-lo) - Phi(-hi) to avoid cancellation.
    upper = lo > 0
    a = jnp.where(upper, -lo, hi)
    b = jnp.where(upper, -hi, lo)
    la, lb = jax.scipy.special.log_ndtr(a), jax.scipy.special.log_ndtr(b)
    d = jnp.minimum(lb - la, 0.0)
    out = la + jnp.log(-jnp.expm1(jnp.minimum(d, -1e-300)))
    return jnp.where(hi > lo, out, -jnp.inf)


def truncated_normal_laplace_logpdf(
    y: jnp.ndarray, mu: jnp.ndarray, sigma: jnp.ndarray, lam: float, lower: float, upper: float
) -> jnp.ndarray:
    """log density of ``clip(X, lower, upper) + E``, ``X ~ N(mu, sigma^2)``, ``E ~ Laplace(0, lam)``.

    The exact law of data from the *truncated* Laplace mechanism (A.3): clamping puts point
    masses Phi((a - mu)/sigma) at a and 1 - Phi((b - mu)/sigma) at b, and the noise convolves
    those and the Gaussian restricted to [a, b]. With L(t) = exp(-|t|/lam)/(2 lam):

        p(y) = int_a^b N(x; mu, sigma^2) L(y - x) dx + Phi((a-mu)/sigma) L(y - a) + Phi((mu-b)/sigma) L(y - b),

    and splitting the integral at x = y gives two Gaussian-times-exponential pieces in closed
    form (the same algebra as A.16, on finite intervals). All terms are combined in log space.
    """
    s2l = sigma**2 / lam
    c = 0.5 * (sigma / lam) ** 2 - jnp.log(2.0 * lam)
    # x < y part: e^{-(y-x)/lam}; Gaussian shifted by +sigma^2/lam.
    t1 = c + (mu - y) / lam + _log_diff_ndtr((jnp.minimum(upper, y) - mu - s2l) / sigma, (lower - mu - s2l) / sigma)
    # x > y part: e^{-(x-y)/lam}; Gaussian shifted by -sigma^2/lam.
    t2 = c + (y - mu) / lam + _log_diff_ndtr((upper - mu + s2l) / sigma, (jnp.maximum(lower, y) - mu + s2l) / sigma)
    log_lap = lambda t: -jnp.abs(t) / lam - jnp.log(2.0 * lam)  # noqa: E731
    t3 = jax.scipy.special.log_ndtr((lower - mu) / sigma) + log_lap(y - lower)
    t4 = jax.scipy.special.log_ndtr((mu - upper) / sigma) + log_lap(y - upper)
    return jax.scipy.special.logsumexp(jnp.stack([t1, t2, t3, t4]), axis=0)


@dataclass(frozen=True)
class NoiseAwareLoss:
    """``-log`` of the density of Laplace-mechanism output under the Gaussian model (A.16).

    With ``bounds=None`` this is A.16, the Normal-Laplace convolution: right when clamping to
    the public bounds is negligible. With ``bounds=(a, b)`` (the mechanism's public clamping
    bounds) it is the exact likelihood of the *truncated* mechanism of
    :class:`~synthinfer.generate.LaplaceMechanismGenerator`, which A.16 ignores
    (see :func:`truncated_normal_laplace_logpdf`).
    """

    lam: float
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lam) and self.lam > 0):
            raise ParameterError(f"NoiseAwareLoss.lam must be finite and > 0, got {self.lam!r}")
        if self.bounds is not None:
            a, b = self.bounds
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise ParameterError(f"NoiseAwareLoss.bounds must be finite with a < b, got {self.bounds!r}")

    def per_row(self, model: Any, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        if getattr(model, "name", None) != "gaussian":
            raise ParameterError("NoiseAwareLoss is defined for the Gaussian location-scale model only")
        p = model.constrain(u)
        if self.bounds is None:
            return -normal_laplace_logpdf(data["y"], p["mu"], p["sigma"], self.lam)
        return -truncated_normal_laplace_logpdf(data["y"], p["mu"], p["sigma"], self.lam, *self.bounds)

    @property
    def label(self) -> str:
        tr = "" if self.bounds is None else f", clamped to [{self.bounds[0]:g}, {self.bounds[1]:g}]"
        return f"noise-aware (lambda={self.lam:g}{tr})"


@dataclass(frozen=True)
class ImportanceWeightedLoss:
    """``w_j * base(z_j)``: per-row importance weights on the synthetic data (Ghalebikesabi et al. 2022).

    ``weights`` are the (non-negative) weights of the synthetic rows, in order; with
    ``self_normalise=True`` they are rescaled to average 1 so that the synthetic data keep their
    nominal sample size m in the posterior.
    """

    weights: Any
    base: Any = field(default_factory=LogLoss)
    self_normalise: bool = True

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=np.float64).reshape(-1)
        if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ParameterError("ImportanceWeightedLoss.weights must be a non-empty vector of finite values >= 0")
        if self.self_normalise:
            if w.sum() <= 0:
                raise ParameterError("ImportanceWeightedLoss.weights are all zero")
            w = w / w.mean()
        object.__setattr__(self, "weights", w)

    def row_weights(self, m: int) -> np.ndarray:
        if m != self.weights.size:
            raise ParameterError(f"ImportanceWeightedLoss has {self.weights.size} weights but there are {m} synthetic rows")
        return self.weights

    def per_row(self, model: Any, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        # The weights enter through the posterior's row weights (see row_weights); here the base loss.
        return self.base.per_row(model, u, data)

    @property
    def label(self) -> str:
        return f"importance-weighted {self.base.label}"


Loss = LogLoss | BetaLoss | NoiseAwareLoss | ImportanceWeightedLoss
