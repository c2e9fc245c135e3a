"""Additive-noise mechanisms: analytic Gaussian and Laplace.

Each mechanism charges the ledger before it draws noise, so an overspend raises
:class:`~synthinfer.errors.BudgetExceededError` with no noise drawn and no output produced.
"""

from __future__ import annotations

import math

import numpy as np

from synthinfer.errors import PrivacyError
from synthinfer.privacy.ledger import PrivacyLedger
from synthinfer.privacy.randomness import SeedLike, make_rng


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value) or value <= 0:
        raise PrivacyError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest noise standard deviation of the analytic Gaussian mechanism.

    The Gaussian mechanism ``M(X) = f(X) + N(0, sigma^2 I)`` with L2 sensitivity ``Delta`` is
    (epsilon, delta)-DP if and only if (Balle & Wang 2018, Thm 8; NAPSU-MQ Theorem 3.6, eq. 2)

        Phi(Delta / (2 sigma) - epsilon sigma / Delta)
          - e^epsilon Phi(-Delta / (2 sigma) - epsilon sigma / Delta) <= delta.

    The left side decreases in sigma; we return the sigma at which it equals delta, computed
    by ``dp_accounting.gaussian_mechanism.get_sigma_gaussian`` (exact, for sensitivity 1)
    and scaled by ``Delta``. For epsilon=1, delta=1e-5, Delta=1 this is about 3.7306.
    """
    from dp_accounting import gaussian_mechanism

    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise PrivacyError(f"delta must be in (0, 1) for the Gaussian mechanism, got {delta!r}")
    try:
        sigma = float(gaussian_mechanism.get_sigma_gaussian(epsilon, float(delta)))
    except ValueError:  # the root finder meets overflow for absurd budgets (epsilon ~ 1e300)
        raise PrivacyError(f"the Gaussian noise cannot be calibrated for epsilon={epsilon:g}, delta={delta:g}") from None
    return sigma * sensitivity


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
    seed: SeedLike = None,
    name: str = "gaussian",
) -> tuple[np.ndarray, float]:
    """Release ``values + N(0, sigma^2 I)`` with the analytic calibration (see :func:`gaussian_sigma`).

    Guarantee: (epsilon, delta)-DP when ``sensitivity`` bounds the L2 distance of ``values``
    between neighbouring datasets. Returns the noisy values and sigma.
    """
    sigma = gaussian_sigma(epsilon, delta, sensitivity)
    ledger.spend(name, epsilon, delta, mechanism="analytic gaussian", sensitivity_l2=float(sensitivity), sigma=sigma)
    x = np.asarray(values, dtype=np.float64)
    return x + make_rng(seed).normal(0.0, sigma, size=x.shape), sigma


def laplace_mechanism(
    values: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    ledger: PrivacyLedger,
    seed: SeedLike = None,
    name: str = "laplace",
) -> tuple[np.ndarray, float]:
    """Release ``values + Laplace(0, b)`` per coordinate with ``b = Delta_1 / epsilon``.

    Guarantee: (epsilon, 0)-DP when ``sensitivity`` bounds the L1 distance of ``values``
    between neighbouring datasets (Dwork & Roth 2014, Thm 3.6). Returns the noisy values and b.
    """
    epsilon = _check_positive("epsilon", epsilon)
    sensitivity = _check_positive("sensitivity", sensitivity)
    scale = sensitivity / epsilon
    ledger.spend(name, epsilon, 0.0, mechanism="laplace", sensitivity_l1=sensitivity, scale=scale)
    x = np.asarray(values, dtype=np.float64)
    return x + make_rng(seed).laplace(0.0, scale, size=x.shape), scale
