"""Zero-concentrated differential privacy (zCDP) and its conversion to (epsilon, delta)-DP.

A mechanism is rho-zCDP (Bun & Steinke 2016, Def. 1.1) when its Rényi divergence of every order
``a > 1`` between neighbouring datasets is at most ``a rho``. zCDP composes by adding the rhos,
and two mechanisms synthinfer composes this way have simple rhos:

* the Gaussian mechanism with L2 sensitivity ``Delta`` and noise ``N(0, sigma^2)`` is
  ``Delta^2 / (2 sigma^2)``-zCDP (Bun & Steinke 2016, Prop. 1.6): :func:`gaussian_rho`;
* the exponential mechanism at ``epsilon`` is ``epsilon^2 / 8``-zCDP (Cesar & Rogers 2021,
  "Bounding, concentrating, and truncating: unifying privacy loss composition for data
  analytics", Lemma 3.2 with Thm 3.3: it is epsilon-bounded-range): :func:`exponential_rho`.

Conversion (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential privacy",
Prop. 12 / Cor. 13): a rho-zCDP mechanism is (epsilon, delta)-DP for

    delta(rho, epsilon) = inf_{a > 1} exp((a - 1)(a rho - epsilon)) / (a - 1) * (1 - 1/a)^a.

``dp_accounting`` implements this bound for a Rényi curve at a *given list* of orders
(``rdp_privacy_accountant.compute_delta``, which also takes the minimum with the KL bound
``sqrt(1 - exp(-a rho))``), and its accountant evaluates it on a fixed grid of orders, which is
valid but not the infimum. Here the infimum is found exactly: the log of the bound is convex in
``a`` with derivative ``(2a - 1) rho - epsilon + log(1 - 1/a)``, whose root is found by Brent's
method, and ``compute_delta`` is evaluated at that order. The inverse, the largest rho that a
(epsilon, delta) budget allows (:func:`zcdp_rho`), is found by bisection on rho (delta grows
with rho) and returned from the feasible side.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from synthinfer.errors import PrivacyError

# Below this order the bound is numerically unstable (dp_accounting uses only the KL bound
# there); the optimum lies below it only when epsilon is hardly larger than rho.
_MIN_ORDER = 1.01


def _check(name: str, value: float, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PrivacyError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise PrivacyError(f"{name} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def gaussian_rho(sensitivity: float, sigma: float) -> float:
    """zCDP of the Gaussian mechanism: ``rho = Delta_2^2 / (2 sigma^2)`` (Bun & Steinke 2016, Prop. 1.6)."""
    sensitivity = _check("sensitivity", sensitivity, positive=True)
    sigma = _check("sigma", sigma, positive=True)
    return sensitivity**2 / (2.0 * sigma**2)


def exponential_rho(epsilon: float) -> float:
    """zCDP of the epsilon-DP exponential mechanism: ``rho = epsilon^2 / 8`` (Cesar & Rogers 2021)."""
    return _check("epsilon", epsilon, positive=False) ** 2 / 8.0


def _optimal_order(rho: float, epsilon: float) -> float:
    """The order ``a > 1`` minimising the Canonne-Kamath-Steinke bound (root of its log's derivative)."""
    from scipy.optimize import brentq

    def slope(a: float) -> float:
        return (2.0 * a - 1.0) * rho - epsilon + math.log1p(-1.0 / a)

    if slope(_MIN_ORDER) >= 0:
        return _MIN_ORDER
    hi = max(2.0, (epsilon + 1.0) / (2.0 * rho) + 2.0)  # slope(hi) > 0 there
    return float(brentq(slope, _MIN_ORDER, hi, xtol=1e-12, rtol=1e-14, maxiter=500))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The delta at which rho-zCDP implies (epsilon, delta)-DP (Canonne, Kamath & Steinke 2020, Cor. 13).

    Evaluated by ``dp_accounting``'s ``compute_delta`` at the optimal Rényi order (module docstring).
    """
    from dp_accounting.rdp.rdp_privacy_accountant import compute_delta

    rho = _check("rho", rho, positive=False)
    epsilon = _check("epsilon", epsilon, positive=False)
    if rho == 0:
        return 0.0
    a = _optimal_order(rho, epsilon)
    delta, _ = compute_delta([a], [a * rho], epsilon)
    return float(delta)


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest rho such that rho-zCDP implies (epsilon, delta)-DP (inverse of :func:`zcdp_delta`).

    Bisection on rho, started from the classic conversion ``rho_0 = (sqrt(epsilon + L) -
    sqrt(L))^2``, ``L = log(1/delta)`` (Bun & Steinke 2016, Prop. 1.3, looser, so ``rho_0`` is
    feasible), to a relative width of 1e-12; the returned value always satisfies
    ``zcdp_delta(rho, epsilon) <= delta``. For (1, 1e-6) it is 0.024356 (``rho_0``: 0.017469).
    """
    epsilon = _check("epsilon", epsilon, positive=True)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise PrivacyError(f"delta must be in (0, 1) to convert zCDP to (epsilon, delta)-DP, got {delta!r}")
    log_inv = math.log(1.0 / delta)
    lo = (math.sqrt(epsilon + log_inv) - math.sqrt(log_inv)) ** 2
    hi = 2.0 * lo
    while zcdp_delta(hi, epsilon) <= delta:
        lo, hi = hi, 2.0 * hi
    return _bisect(lambda r: zcdp_delta(r, epsilon) <= delta, lo, hi, 1e-12)[0]


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon at which ``rho``-zCDP is ``(epsilon, delta)``-DP: the inverse of
    :func:`zcdp_delta` in epsilon (which it decreases), by bisection from the classic conversion
    ``rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke 2016, Prop. 1.3), a feasible upper end;
    to a relative 1e-9, rounded upwards (the value returned always suffices)."""
    rho = _check("rho", rho, positive=True)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise PrivacyError(f"delta must be in (0, 1) to convert zCDP to (epsilon, delta)-DP, got {delta!r}")
    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    return _bisect(lambda e: zcdp_delta(rho, e) > delta, 0.0, hi, 1e-9)[1]


def _bisect(below: Callable[[float], bool], lo: float, hi: float, rel: float) -> tuple[float, float]:
    """Bisection for where ``below`` (true at ``lo``, false at ``hi``) turns false, to a width
    of ``rel * hi``: ``(lo, hi)`` on either side of it."""
    while hi - lo > rel * hi:
        mid = 0.5 * (lo + hi)
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi
