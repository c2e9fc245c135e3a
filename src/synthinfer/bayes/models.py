"""Models f(y | theta) and their priors for generalised Bayesian learning (Wilde et al. 2021, A.6).

A model maps an *unconstrained* parameter vector ``u`` (what NUTS moves in) to named
parameters, gives the prior log density in ``u`` (Jacobian included), the per-row log density
``log f(y_i | theta, x_i)`` and the per-row ``log int f(y | theta, x_i)^gamma dy`` that the
beta-divergence loss needs (A.1, A.15). Data are dicts of numpy/JAX arrays with a common
leading length (``{"y": ...}`` or ``{"X": ..., "y": ...}``); :meth:`prepare` builds them from
arrays or DataFrames.

Models here:

- :class:`GaussianLocationScale`: f = N(mu, sigma^2) with the prior of A.6.3,
  sigma^2 ~ InverseGamma(alpha_p, beta_p), mu | sigma ~ N(mu_p, (sigma_p sigma)^2), i.e. a
  Normal-Inverse-Gamma prior with kappa_0 = 1 / sigma_p^2.
- :class:`LogisticRegression`: y ~ Bernoulli(logistic(alpha + x . theta)), alpha, theta ~ N(0, s^2)
  independently (A.6.3 uses s^2 = 50).
- :class:`ProbitRegression`: y ~ Bernoulli(Phi(alpha + x . theta)), the logistic model's prior.
- :class:`PoissonRegression`: y ~ Poisson(exp(alpha + x . theta)), the same normal prior.
- :class:`MultinomialRegression`: y ~ Categorical(softmax(alpha + x . Theta)) over K classes, every
  coefficient N(0, s^2) (over-parameterised; the prior makes the posterior proper).
- :class:`LinearRegression`: y ~ N(alpha + x . theta, sigma^2) with the conjugate prior
  sigma^2 ~ InverseGamma(a, b), (alpha, theta) | sigma ~ N(0, s^2 sigma^2 I), or with independent
  priors (alpha, theta) ~ N(0, s^2 I), sigma ~ HalfNormal(s_sigma) (:class:`NormalHalfNormalPrior`,
  the priors of Ghalebikesabi et al. 2022, Supp. C.5).

The regression models take ``fit_intercept=False`` to drop alpha (the design is then used as given).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from synthinfer._jax import jax, jnp
from synthinfer.errors import DomainError, MissingValueError, NonFiniteError, ParameterError, UnknownColumnError

_LOG2PI = math.log(2 * math.pi)


def _numbers(data: pd.DataFrame, columns: Sequence[str], model: str) -> np.ndarray:
    """``data[columns]`` as a float64 array; a column that is not numbers (text, bin labels, or
    categories that are not numbers) is a :class:`DomainError` naming it."""
    out = []
    for c in columns:
        s = data[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object)
        try:
            out.append(pd.to_numeric(s, errors="raise").to_numpy(dtype=np.float64, na_value=np.nan))
        except (ValueError, TypeError):
            raise DomainError(
                f"column {c!r} is not numbers (text, bin labels or categories): {model} takes numbers; give "
                "categories as numbers (e.g. 0/1 indicators), and binned columns as numbers (a release written with "
                "--numbers or --midpoints)") from None
    return np.column_stack(out) if out else np.zeros((len(data), 0))


def regression_design(frames: Sequence[pd.DataFrame], target: str, features: Sequence[str], *, binary: bool = False,
                      model: str = "the regression model") -> tuple[list[tuple[np.ndarray, np.ndarray]], list[str]]:
    """``(X, y)`` of each of ``frames`` on one shared design, and the names of ``X``'s columns.

    A feature that is numbers in any frame is a column of numbers in every frame (text that does
    not read as numbers there, e.g. bin labels, is an error naming the column and ``model``); any
    other (text, categories) is one indicator per level but the first (treatment coding, as
    patsy's ``C()``), its levels those that occur in any frame, compared as text: in the order
    of a categorical column's categories (a release's Domain order), then the others, sorted. A
    level absent from one frame (e.g. a subset of synthetic rows) is a zero column there.
    The target: numbers as they are; for a ``binary`` model a column of two levels is the
    indicator of the second (``income``: ``>50K``), as statsmodels codes it. Give the regression
    models the arrays (``model.prepare((X, y))``, :func:`choose_m` takes ``(X, y)`` tuples).
    """
    from synthinfer.data.encoding import category_text

    for c in (target, *features):
        absent = [i for i, f in enumerate(frames) if c not in f.columns]
        if absent:
            raise UnknownColumnError(f"column {c!r} is not in table(s) {absent} "
                                     f"(columns: {list(frames[absent[0]].columns)})")

    def numbers(c: str) -> list[np.ndarray] | None:
        if not any(pd.api.types.is_numeric_dtype(f[c].dtype) and not isinstance(f[c].dtype, pd.CategoricalDtype)
                   for f in frames):
            return None
        return [_numbers(f, [c], model)[:, 0] for f in frames]

    def levels(c: str) -> list[str]:
        # the levels that occur (a release's file lists every Domain category, used or not:
        # an unused one as the reference would make the indicators sum to the intercept)
        seen = set().union(*(set(_texts(f[c])) for f in frames)) - {None}
        ordered: list[str] = []
        for f in frames:
            if isinstance(f[c].dtype, pd.CategoricalDtype):
                ordered += [v for v in map(category_text, f[c].cat.categories) if v in seen and v not in ordered]
        return ordered + sorted(seen - set(ordered))

    blocks: list[list[np.ndarray]] = [[] for _ in frames]
    names: list[str] = []
    for c in features:
        values = numbers(c)
        if values is not None:
            for b, v in zip(blocks, values):
                b.append(v[:, None])
            names.append(c)
            continue
        lv = levels(c)
        for i, (b, f) in enumerate(zip(blocks, frames)):
            text = _texts(f[c])
            if pd.isna(text).any():
                raise MissingValueError(f"column {c!r} has missing values in table {i}: remove or impute them first")
            b.append(np.column_stack([(text == v).astype(np.float64) for v in lv[1:]]) if len(lv) > 1
                     else np.zeros((len(f), 0)))
        names += [f"{c}={v}" for v in lv[1:]]
    ys = numbers(target)
    if ys is None:
        lv = levels(target)
        if not binary or len(lv) != 2:
            need = "two levels for a binary model" if binary else "numbers for this model"
            shown = f"{lv[:10]}{' ...' if len(lv) > 10 else ''}"
            raise DomainError(f"target {target!r} has levels {shown}; it needs {need}")
        texts = [_texts(f[target]) for f in frames]
        if any(pd.isna(text).any() for text in texts):
            raise MissingValueError(f"the target {target!r} has missing values: remove them first")
        ys = [(text == lv[1]).astype(np.float64) for text in texts]
    return [(np.hstack(b) if b else np.zeros((len(y), 0)), y) for b, y in zip(blocks, ys)], names


def _texts(s: pd.Series) -> np.ndarray:
    """A column's values as text (:func:`~synthinfer.data.encoding.category_text`; missing ones
    as ``None``), each distinct value converted once, for comparing levels across tables."""
    from synthinfer.data.encoding import category_text

    if isinstance(s.dtype, pd.CategoricalDtype):
        codes, uniques = s.cat.codes.to_numpy(), s.cat.categories
    else:
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
    lookup = np.array([category_text(v) for v in uniques] + [None], dtype=object)
    return lookup[codes]  # code -1 (missing) takes the last entry


def _array(name: str, a: Any, ndim: int) -> np.ndarray:
    """``a`` as float64 numbers of at most ``ndim`` dimensions (a column ``(n, 1)`` counts as a
    vector); text and other shapes are refused by name, never coerced or flattened."""
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (ValueError, TypeError):
        raise DomainError(f"{name} must be numbers; got values of type {np.asarray(a).dtype}") from None
    if ndim == 1 and arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim > ndim:
        raise DomainError(f"{name} must be {'a vector' if ndim == 1 else 'a matrix (rows x features)'}, "
                          f"got shape {arr.shape}")
    return arr.reshape(-1) if ndim == 1 else arr


def _finite(name: str, a: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(a)):
        raise NonFiniteError(f"{name} contains missing or non-finite values")
    return a


@dataclass(frozen=True)
class NormalInverseGammaPrior:
    """sigma^2 ~ InverseGamma(shape, rate), location | sigma ~ N(mean, (scale * sigma)^2) (A.6.3).

    Defaults are the paper's alpha_p = 2, beta_p = 4, mu_p = 0, sigma_p = 10 (its grid has
    mu_p in {0, 1, 3} and sigma_p in {1, 10, 30}).
    """

    mean: float = 0.0
    scale: float = 10.0
    shape: float = 2.0
    rate: float = 4.0

    def __post_init__(self) -> None:
        for k in ("scale", "shape", "rate"):
            v = getattr(self, k)
            if not (math.isfinite(v) and v > 0):
                raise ParameterError(f"NormalInverseGammaPrior.{k} must be finite and > 0, got {v!r}")


@dataclass(frozen=True)
class NormalPrior:
    """Independent N(0, scale^2) priors on every regression coefficient (intercept included)."""

    scale: float = math.sqrt(50.0)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"NormalPrior.scale must be finite and > 0, got {self.scale!r}")


@dataclass(frozen=True)
class NormalHalfNormalPrior:
    """Linear regression: every coefficient N(0, scale^2), the noise sigma ~ HalfNormal(sigma_scale).

    Not conjugate (the posterior is sampled with NUTS). Defaults are the priors of Ghalebikesabi
    et al. (2022), Supplement C.5.
    """

    scale: float = 1.0
    sigma_scale: float = 10.0

    def __post_init__(self) -> None:
        for k in ("scale", "sigma_scale"):
            v = getattr(self, k)
            if not (math.isfinite(v) and v > 0):
                raise ParameterError(f"NormalHalfNormalPrior.{k} must be finite and > 0, got {v!r}")


class GaussianLocationScale:
    """f(y | mu, sigma) = N(y; mu, sigma^2); unconstrained u = (mu, log sigma).

    Parameters
    ----------
    column : the column to use when data come as a DataFrame (default: its only column).
    """

    name = "gaussian"
    param_names = ("mu", "sigma")

    def __init__(self, column: str | None = None):
        self.column = column

    def default_prior(self) -> NormalInverseGammaPrior:
        return NormalInverseGammaPrior()

    @property
    def dim(self) -> int:
        return 2

    def prepare(self, data: Any) -> dict[str, np.ndarray]:
        if isinstance(data, pd.DataFrame):
            col = self.column
            if col is None:
                if data.shape[1] != 1:
                    raise ParameterError(f"GaussianLocationScale needs column= for a frame with columns {list(data.columns)}")
                col = data.columns[0]
            if col not in data.columns:
                raise UnknownColumnError(f"column {col!r} not in {list(data.columns)}")
            y = _numbers(data, [col], type(self).__name__)[:, 0]
        else:
            y = _array("y", data, 1)
        return {"y": _finite("y", y)}

    def constrain(self, u: jnp.ndarray) -> dict[str, jnp.ndarray]:
        return {"mu": u[..., 0], "sigma": jnp.exp(u[..., 1])}

    def log_prior(self, u: jnp.ndarray, prior: NormalInverseGammaPrior) -> jnp.ndarray:
        mu, log_s = u[0], u[1]
        s2 = jnp.exp(2 * log_s)
        # InverseGamma(a, b) on s2, plus log|d s2 / d log s| = log 2 + 2 log s.
        lp_s2 = prior.shape * math.log(prior.rate) - math.lgamma(prior.shape) - (prior.shape + 1) * jnp.log(s2) - prior.rate / s2
        lp_mu = jax.scipy.stats.norm.logpdf(mu, prior.mean, prior.scale * jnp.exp(log_s))
        return lp_s2 + math.log(2.0) + 2 * log_s + lp_mu

    def log_density(self, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        mu, log_s = u[0], u[1]
        z = (data["y"] - mu) * jnp.exp(-log_s)
        return -0.5 * z**2 - log_s - 0.5 * _LOG2PI

    def log_power_integral(self, u: jnp.ndarray, data: dict, gamma: float) -> jnp.ndarray:
        """log int N(y; mu, sigma^2)^gamma dy = (1 - gamma)/2 log(2 pi sigma^2) - 1/2 log gamma."""
        log_s = u[1]
        val = 0.5 * (1 - gamma) * (_LOG2PI + 2 * log_s) - 0.5 * math.log(gamma)
        return jnp.broadcast_to(val, data["y"].shape)

    def init_position(self, data: dict) -> np.ndarray:
        y = data["y"]
        if y.size == 0:
            return np.array([0.0, 0.0])
        return np.array([float(np.mean(y)), float(np.log(np.std(y) + 0.5))])


class _Regression:
    """Shared data handling of the regression models: design X (no intercept column) and y.

    The linear predictor is ``alpha + X theta`` (``X theta`` when ``fit_intercept`` is False), with
    u's first ``n_intercept`` entries the intercept and the next ``n_features_in`` the slopes.
    """

    def __init__(self, target: str | None = None, features: Sequence[str] | None = None, n_features: int | None = None,
                 fit_intercept: bool = True):
        self.target = target
        self.features = None if features is None else tuple(features)
        self.n_features_in = n_features
        self.fit_intercept = bool(fit_intercept)

    @property
    def n_intercept(self) -> int:
        return 1 if self.fit_intercept else 0

    @property
    def n_coef(self) -> int:
        """Intercept and slopes per linear predictor."""
        if self.n_features_in is None:
            raise ParameterError(f"{type(self).__name__}: number of features unknown before data are seen (give n_features=)")
        return self.n_features_in + self.n_intercept

    def _learn_features(self, d: dict[str, np.ndarray]) -> None:
        if self.n_features_in is None:
            self.n_features_in = d["X"].shape[1]
        elif d["X"].shape[1] != self.n_features_in:
            raise DomainError(f"expected {self.n_features_in} features, got {d['X'].shape[1]}")

    def _coef_names(self, *rest: str) -> tuple[str, ...]:
        return (("alpha",) if self.fit_intercept else ()) + ("theta", *rest)

    def prepare(self, data: Any) -> dict[str, np.ndarray]:
        if isinstance(data, pd.DataFrame):
            if self.target is None:
                raise ParameterError(f"{type(self).__name__} needs target= to read a DataFrame")
            missing = [c for c in (self.target, *(self.features or ())) if c not in data.columns]
            if missing:
                raise UnknownColumnError(f"columns {missing} not in {list(data.columns)}")
            feats = self.features or tuple(c for c in data.columns if c != self.target)
            X = _numbers(data, list(feats), type(self).__name__)
            y = _numbers(data, [self.target], type(self).__name__)[:, 0]
        else:
            X, y = data
            X, y = _array("X", X, 2), _array("y", y, 1)
            if X.ndim == 1:
                X = X[:, None]
        if X.shape[0] != y.shape[0]:
            raise DomainError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        return {"X": _finite("X", X), "y": _finite("y", y)}

    def n_features(self, data: dict) -> int:
        return int(data["X"].shape[1])


class _NormalPriorGLM(_Regression):
    """A GLM with one linear predictor ``eta = alpha + x . theta``; u = (alpha, theta), every
    coefficient N(0, s^2) independently (:class:`NormalPrior`)."""

    def default_prior(self) -> NormalPrior:
        return NormalPrior()

    @property
    def dim(self) -> int:
        return self.n_coef

    @property
    def param_names(self) -> tuple[str, ...]:
        return self._coef_names()

    def prepare(self, data: Any) -> dict[str, np.ndarray]:
        d = super().prepare(data)
        self._check_target(d["y"])
        self._learn_features(d)
        return d

    def _check_target(self, y: np.ndarray) -> None:
        pass

    def constrain(self, u: jnp.ndarray) -> dict[str, jnp.ndarray]:
        if not self.fit_intercept:
            return {"theta": u}
        return {"alpha": u[..., 0], "theta": u[..., 1:]}

    def log_prior(self, u: jnp.ndarray, prior: NormalPrior) -> jnp.ndarray:
        return jnp.sum(jax.scipy.stats.norm.logpdf(u, 0.0, prior.scale))

    def linear_predictor(self, u: jnp.ndarray, X: jnp.ndarray) -> jnp.ndarray:
        k = self.n_intercept
        return X @ u[k:] + (u[0] if k else 0.0)

    def init_position(self, data: dict) -> np.ndarray:
        return np.zeros(self.dim)


class _BinaryGLM(_NormalPriorGLM, ABC):
    """y in {0, 1} with ``p(y = 1 | x) = F(eta)``; a subclass gives ``log F`` (stable in both
    tails, ``log(1 - F(eta)) = log F(-eta)`` for the symmetric links here)."""

    def _check_target(self, y: np.ndarray) -> None:
        if not np.all(np.isin(y, (0.0, 1.0))):
            raise DomainError(f"{type(self).__name__}: the target must be 0/1")

    @abstractmethod
    def log_cdf(self, eta: jnp.ndarray) -> jnp.ndarray:
        """``log F(eta)``, the link's log-CDF."""

    def probability(self, u: jnp.ndarray, X: jnp.ndarray) -> jnp.ndarray:
        """``P(y = 1 | x)`` for each row of ``X``."""
        return jnp.exp(self.log_cdf(self.linear_predictor(u, X)))

    def log_density(self, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        eta = self.linear_predictor(u, data["X"])
        y = data["y"]
        return y * self.log_cdf(eta) + (1 - y) * self.log_cdf(-eta)

    def log_power_integral(self, u: jnp.ndarray, data: dict, gamma: float) -> jnp.ndarray:
        """log (p^gamma + (1 - p)^gamma), the counting-measure integral over y in {0, 1}."""
        eta = self.linear_predictor(u, data["X"])
        return jnp.logaddexp(gamma * self.log_cdf(eta), gamma * self.log_cdf(-eta))


class LogisticRegression(_BinaryGLM):
    """p(y = 1 | x) = logistic(alpha + x . theta); u = (alpha, theta) (A.6.1.2, A.17, A.18).

    The number of features is set by the first data passed to :meth:`prepare`.
    """

    name = "logistic"

    def log_cdf(self, eta: jnp.ndarray) -> jnp.ndarray:
        return jax.nn.log_sigmoid(eta)


class ProbitRegression(_BinaryGLM):
    """p(y = 1 | x) = Phi(alpha + x . theta), the standard normal CDF; u = (alpha, theta) with
    the logistic model's independent N(0, s^2) prior."""

    name = "probit"

    def log_cdf(self, eta: jnp.ndarray) -> jnp.ndarray:
        return jax.scipy.special.log_ndtr(eta)


class PoissonRegression(_NormalPriorGLM):
    """y ~ Poisson(exp(alpha + x . theta)) (log link); u = (alpha, theta), each N(0, s^2)
    independently (:class:`NormalPrior`)."""

    name = "poisson"

    def _check_target(self, y: np.ndarray) -> None:
        if not np.all((y >= 0) & (y == np.floor(y))):
            raise DomainError("PoissonRegression: the target must be counts (integers >= 0)")

    def log_density(self, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        eta = self.linear_predictor(u, data["X"])
        y = data["y"]
        return y * eta - jnp.exp(eta) - jax.scipy.special.gammaln(y + 1.0)

    def log_power_integral(self, u: jnp.ndarray, data: dict, gamma: float) -> jnp.ndarray:
        # sum_y Poisson(y; lambda)^gamma has no closed form: the beta loss is not offered here
        raise ParameterError("PoissonRegression supports the log loss only (the beta loss needs "
                             "sum_y f(y)^gamma, which has no closed form for the Poisson)")

    def init_position(self, data: dict) -> np.ndarray:
        u = np.zeros(self.dim)
        if self.fit_intercept and data["y"].size:
            u[0] = float(np.log(np.mean(data["y"]) + 0.5))
        return u


class MultinomialRegression(_Regression):
    """p(y = k | x) = softmax(alpha + x . Theta)_k over ``n_classes`` classes coded 0, ..., K-1.

    u is the row-major flattening of the (n_coef, K) coefficient matrix whose first row is the
    intercepts alpha (when ``fit_intercept``) and the others Theta. Every coefficient has an
    independent N(0, s^2) prior, so the softmax's shift invariance leaves the posterior proper.
    ``n_features`` and ``n_classes`` are set by the first data when not given.
    """

    name = "multinomial"

    def __init__(self, target: str | None = None, features: Sequence[str] | None = None, n_features: int | None = None,
                 n_classes: int | None = None, fit_intercept: bool = True):
        super().__init__(target, features, n_features, fit_intercept)
        if n_classes is not None and not (isinstance(n_classes, (int, np.integer)) and n_classes >= 2):
            raise ParameterError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        self.n_classes = None if n_classes is None else int(n_classes)

    def default_prior(self) -> NormalPrior:
        return NormalPrior()

    @property
    def dim(self) -> int:
        if self.n_classes is None:
            raise ParameterError("MultinomialRegression: number of classes unknown before data are seen (give n_classes=)")
        return self.n_coef * self.n_classes

    @property
    def param_names(self) -> tuple[str, ...]:
        return self._coef_names()

    def prepare(self, data: Any) -> dict[str, np.ndarray]:
        d = super().prepare(data)
        y = d["y"]
        if not np.all((y >= 0) & (y == np.round(y))):
            raise DomainError("MultinomialRegression: the target must be class codes 0, 1, ..., K-1")
        if self.n_classes is None:
            self.n_classes = max(2, int(y.max()) + 1) if y.size else None
        elif y.size and y.max() >= self.n_classes:
            raise DomainError(f"MultinomialRegression: class code {int(y.max())} with n_classes={self.n_classes}")
        self._learn_features(d)
        return d

    def coefficients(self, u: jnp.ndarray) -> jnp.ndarray:
        """The (..., n_coef, K) coefficient matrix of u."""
        return u.reshape(*u.shape[:-1], self.n_coef, self.n_classes)

    def constrain(self, u: jnp.ndarray) -> dict[str, jnp.ndarray]:
        B = self.coefficients(u)
        if not self.fit_intercept:
            return {"theta": B}
        return {"alpha": B[..., 0, :], "theta": B[..., 1:, :]}

    def log_prior(self, u: jnp.ndarray, prior: NormalPrior) -> jnp.ndarray:
        return jnp.sum(jax.scipy.stats.norm.logpdf(u, 0.0, prior.scale))

    def logits(self, u: jnp.ndarray, X: jnp.ndarray) -> jnp.ndarray:
        """(n, K) class logits."""
        B = self.coefficients(u)
        k = self.n_intercept
        return X @ B[k:] + (B[0] if k else 0.0)

    def log_density(self, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        logp = jax.nn.log_softmax(self.logits(u, data["X"]), axis=-1)
        # y holds class codes as floats (data arrays share one dtype, padding included)
        return jnp.sum(jnp.where(data["y"][..., None] == jnp.arange(self.n_classes), logp, 0.0), axis=-1)

    def log_power_integral(self, u: jnp.ndarray, data: dict, gamma: float) -> jnp.ndarray:
        """log sum_k p_k^gamma, the counting-measure integral over the K classes."""
        logp = jax.nn.log_softmax(self.logits(u, data["X"]), axis=-1)
        return jax.scipy.special.logsumexp(gamma * logp, axis=-1)

    def init_position(self, data: dict) -> np.ndarray:
        return np.zeros(self.dim)


class LinearRegression(_Regression):
    """y ~ N(alpha + x . theta, sigma^2); u = (alpha, theta, log sigma).

    The prior is the conjugate Normal-Inverse-Gamma (default; posteriors of the weighted log loss
    are then exact) or :class:`NormalHalfNormalPrior`.
    """

    name = "linear"

    def default_prior(self) -> NormalInverseGammaPrior:
        return NormalInverseGammaPrior(mean=0.0, scale=10.0, shape=2.0, rate=4.0)

    @property
    def dim(self) -> int:
        return self.n_coef + 1

    @property
    def param_names(self) -> tuple[str, ...]:
        return self._coef_names("sigma")

    def prepare(self, data: Any) -> dict[str, np.ndarray]:
        d = super().prepare(data)
        self._learn_features(d)
        return d

    def constrain(self, u: jnp.ndarray) -> dict[str, jnp.ndarray]:
        k = self.n_intercept
        out = {"alpha": u[..., 0]} if k else {}
        return {**out, "theta": u[..., k:-1], "sigma": jnp.exp(u[..., -1])}

    def log_prior(self, u: jnp.ndarray, prior: NormalInverseGammaPrior | NormalHalfNormalPrior) -> jnp.ndarray:
        log_s = u[-1]
        if isinstance(prior, NormalHalfNormalPrior):
            # HalfNormal density 2 N(sigma; 0, s^2) on sigma > 0, plus log|d sigma / d log sigma| = log sigma.
            lp_b = jnp.sum(jax.scipy.stats.norm.logpdf(u[:-1], 0.0, prior.scale))
            return lp_b + math.log(2.0) + jax.scipy.stats.norm.logpdf(jnp.exp(log_s), 0.0, prior.sigma_scale) + log_s
        s2 = jnp.exp(2 * log_s)
        lp_s2 = prior.shape * math.log(prior.rate) - math.lgamma(prior.shape) - (prior.shape + 1) * jnp.log(s2) - prior.rate / s2
        lp_b = jnp.sum(jax.scipy.stats.norm.logpdf(u[:-1], prior.mean, prior.scale * jnp.exp(log_s)))
        return lp_s2 + math.log(2.0) + 2 * log_s + lp_b

    def design(self, X: np.ndarray) -> np.ndarray:
        """The design with the intercept column (when fitted): the columns of u[:-1]."""
        return np.column_stack([np.ones(len(X)), X]) if self.fit_intercept else np.asarray(X)

    def log_density(self, u: jnp.ndarray, data: dict) -> jnp.ndarray:
        k = self.n_intercept
        mean = data["X"] @ u[k:-1] + (u[0] if k else 0.0)
        return jax.scipy.stats.norm.logpdf(data["y"], mean, jnp.exp(u[-1]))

    def log_power_integral(self, u: jnp.ndarray, data: dict, gamma: float) -> jnp.ndarray:
        log_s = u[-1]
        val = 0.5 * (1 - gamma) * (_LOG2PI + 2 * log_s) - 0.5 * math.log(gamma)
        return jnp.broadcast_to(val, data["y"].shape)

    def init_position(self, data: dict) -> np.ndarray:
        u = np.zeros(self.dim)
        if data["y"].size:
            if self.fit_intercept:
                u[0] = float(np.mean(data["y"]))
            u[-1] = float(np.log(np.std(data["y"]) + 0.5))
        return u


Model = (GaussianLocationScale | LogisticRegression | ProbitRegression | PoissonRegression
         | MultinomialRegression | LinearRegression)
