"""Additive-noise mechanisms: the Gaussian (discrete on counts) and Laplace (discrete on counts).

Each mechanism charges the ledger before it draws noise, so an overspend raises
:class:`~synthinfer.errors.BudgetExceededError` with no noise drawn and no output produced. The
noise comes from :mod:`synthinfer.privacy.samplers` (OpenDP's exact samplers and its CSPRNG);
no mechanism takes a seed.

**Gaussian accounting.** Every Gaussian mechanism here, discrete on integer counts or
grid-based on reals, is accounted in zCDP: at L2 sensitivity ``Delta`` and scale ``sigma`` it
is ``rho = Delta^2 / (2 sigma^2)``-zCDP. For the discrete Gaussian this is Canonne, Kamath &
Steinke 2020 (Thm 4 in one dimension; for vectors the Rényi divergences of the independent
coordinates add, so the bound holds for every integer shift of L2 norm ``<= Delta``), and it is
the privacy map OpenDP proves for both samplers. The ledger is charged ``(epsilon, delta)``
with ``rho = zcdp_rho(epsilon, delta)`` (the Canonne-Kamath-Steinke conversion, Cor. 13, of
:mod:`synthinfer.privacy.zcdp`): valid for any rho-zCDP mechanism. The analytic (epsilon, delta)
calibration of the continuous Gaussian (Balle & Wang 2018; :func:`gaussian_delta`) is not used:
it is proven for the continuous distribution only (CKS 2020, Thm 7 gives the discrete Gaussian's
own, different, one-dimensional curve). It needs about 8% less noise at (1, 1e-5); a tighter
accountant can recover most of it from ``dp_accounting``'s exact discrete-Gaussian privacy loss
(``dp_accounting.pld.privacy_loss_mechanism.DiscreteGaussianPrivacyLoss``, one-dimensional
with integer sensitivity: a substitution moves a marginal's counts by +-1 in two cells, so the
vector mechanism is the composition of ``2 d`` such one-dimensional losses).
"""

from __future__ import annotations

import math

import numpy as np

from synthinfer.errors import PrivacyError
from synthinfer.privacy import samplers
from synthinfer.privacy.ledger import PrivacyLedger


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value) or value <= 0:
        raise PrivacyError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _gaussian_rho(epsilon: float, delta: float) -> float:
    from synthinfer.privacy.zcdp import zcdp_rho

    epsilon = _check_positive("epsilon", epsilon)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise PrivacyError(f"delta must be in (0, 1) for the Gaussian mechanism, got {delta!r}")
    try:
        return zcdp_rho(epsilon, float(delta))
    except (ValueError, OverflowError, ArithmeticError):  # absurd budgets (epsilon ~ 1e300)
        raise PrivacyError(f"the Gaussian noise cannot be calibrated for epsilon={epsilon:g}, delta={delta:g}") from None


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise scale of the (discrete or grid-based) Gaussian mechanism at ``(epsilon, delta)``.

    ``sigma = Delta / sqrt(2 rho)`` with ``rho = zcdp_rho(epsilon, delta)``, the largest zCDP
    that the Canonne-Kamath-Steinke conversion turns into ``(epsilon, delta)``-DP (module
    docstring). For epsilon=1, delta=1e-5, Delta=1 this is about 4.05 (the continuous
    Gaussian's analytic calibration, valid only for continuous noise, gives 3.73).
    """
    sensitivity = _check_positive("sensitivity", sensitivity)
    rho = _gaussian_rho(epsilon, delta)
    return sensitivity / math.sqrt(2.0 * rho)


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """The delta of the Gaussian mechanism at ``epsilon`` (left side of eq. 2 above)."""
    from scipy.stats import norm

    r = sensitivity / sigma
    return float(norm.cdf(r / 2 - epsilon / r) - math.exp(epsilon) * norm.cdf(-r / 2 - epsilon / r))


def gaussian_mechanism(
    values: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger,
    name: str = "gaussian",
) -> tuple[np.ndarray, float]:
    """Release real ``values`` plus Gaussian noise of scale ``sigma`` (:func:`gaussian_sigma`).

    The noise is OpenDP's grid-based Gaussian (:func:`synthinfer.privacy.samplers.gaussian`).
    Guarantee: ``rho``-zCDP, hence (epsilon, delta)-DP, when ``sensitivity`` bounds the L2
    distance of ``values`` between neighbouring datasets. Returns the noisy values and sigma
    (OpenDP's scale, a hair above :func:`gaussian_sigma` when its privacy map counts rounding).
    """
    sensitivity = _check_positive("sensitivity", sensitivity)
    rho = _gaussian_rho(epsilon, delta)
    sigma = sensitivity / math.sqrt(2.0 * rho)
    x = samplers.as_reals(values)
    ledger.spend(name, epsilon, delta, mechanism="gaussian", sampler="OpenDP, float grid", sensitivity_l2=sensitivity,
                 sigma=sigma, rho=rho, accounting="zCDP, Canonne, Kamath & Steinke 2020 Cor. 13")
    noisy, scale = samplers.gaussian(x, sensitivity=sensitivity, rho=rho)
    return noisy, scale


def discrete_gaussian_mechanism(
    counts: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger,
    name: str = "discrete gaussian",
) -> tuple[np.ndarray, float]:
    """Release integer ``counts`` plus discrete Gaussian noise ``N_Z(0, sigma^2)`` (CKS 2020).

    ``sigma`` is :func:`gaussian_sigma`; the released values are integers, so every output is
    attainable from every input. Guarantee: ``rho``-zCDP for integer vectors whose L2 distance
    between neighbours is at most ``sensitivity`` (module docstring), hence (epsilon, delta)-DP.
    Returns the noisy counts (int64) and the noise's standard deviation
    ``sqrt(discrete_gaussian_variance(sigma))`` (at most sigma; what a likelihood of the
    noisy counts needs). The ledger's charge records both ``sigma`` and this variance.
    """
    x = samplers.as_counts(counts)
    sigma = gaussian_sigma(epsilon, delta, sensitivity)
    rho = samplers.discrete_gaussian_rho(sensitivity, sigma)
    variance = samplers.discrete_gaussian_variance(sigma)
    ledger.spend(name, epsilon, delta, mechanism="discrete gaussian (OpenDP)", sensitivity_l2=float(sensitivity),
                 sigma=sigma, variance=variance, rho=rho,
                 accounting="zCDP (Canonne, Kamath & Steinke 2020, Thm 4), converted by their Cor. 13")
    return samplers.discrete_gaussian(x, sigma), math.sqrt(variance)


def laplace_mechanism(
    values: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    ledger: PrivacyLedger,
    name: str = "laplace",
) -> tuple[np.ndarray, float]:
    """Release real ``values + Laplace(0, b)`` per coordinate, ``b = Delta_1 / epsilon``.

    OpenDP's grid-based Laplace (:func:`synthinfer.privacy.samplers.laplace`). Guarantee:
    (epsilon, 0)-DP when ``sensitivity`` bounds the L1 distance of ``values`` between
    neighbouring datasets (Dwork & Roth 2014, Thm 3.6; OpenDP's privacy map, rounding
    included). Returns the noisy values and b (a hair above ``Delta_1 / epsilon`` when the
    map counts rounding).
    """
    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    x = samplers.as_reals(values)
    scale = sensitivity / epsilon
    ledger.spend(name, epsilon, 0.0, mechanism="laplace", sampler="OpenDP, float grid",
                 sensitivity_l1=sensitivity, scale=scale)
    return samplers.laplace(x, sensitivity=sensitivity, epsilon=epsilon)


def discrete_laplace_mechanism(
    counts: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    ledger: PrivacyLedger,
    name: str = "discrete laplace",
) -> tuple[np.ndarray, float]:
    """Release integer ``counts`` plus discrete Laplace noise of scale ``t = Delta_1 / epsilon``.

    :func:`synthinfer.privacy.samplers.discrete_laplace`: ``P(k)`` proportional to
    ``exp(-|k| / t)``; integer outputs. Guarantee: (epsilon, 0)-DP when ``sensitivity`` bounds
    the L1 distance of ``counts`` between neighbours (Ghosh, Roughgarden & Sundararajan 2012).
    Returns the noisy counts (int64) and t.
    """
    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    x = samplers.as_counts(counts)
    scale = sensitivity / epsilon
    ledger.spend(name, epsilon, 0.0, mechanism="discrete laplace (OpenDP)", sensitivity_l1=sensitivity, scale=scale,
                 variance=samplers.discrete_laplace_variance(scale))
    return samplers.discrete_laplace(x, scale), scale
