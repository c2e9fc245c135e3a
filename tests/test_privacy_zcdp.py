"""zCDP accounting: the Canonne-Kamath-Steinke conversion, its inverse, and the mechanisms' rhos."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synthinfer.errors import PrivacyError
from synthinfer.privacy import gaussian_delta, zcdp_delta, zcdp_epsilon, zcdp_rho
from synthinfer.privacy.zcdp import exponential_rho, gaussian_rho


def brute_force_delta(rho: float, eps: float) -> float:
    """CKS 2020 Cor. 13 minimised over a fine grid of orders, written out independently."""
    a = np.concatenate([1 + np.logspace(-4, 0, 20_000), np.linspace(2, 4 * (eps + 1) / rho + 4, 400_000)])
    log_delta = (a - 1) * (a * rho - eps) + a * np.log1p(-1 / a) - np.log(a - 1)
    return float(np.exp(log_delta.min()))


def test_known_value():
    # The classic conversion (Bun & Steinke 2016, Prop. 1.3) would give 0.017469 here.
    assert zcdp_rho(1.0, 1e-6) == pytest.approx(0.0243560, abs=2e-7)
    log_inv = math.log(1e6)
    assert (math.sqrt(1 + log_inv) - math.sqrt(log_inv)) ** 2 == pytest.approx(0.0174689, abs=1e-7)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-6), (0.5, 1e-9), (1.0, 1 / 45222**2), (8.0, 1e-5), (0.1, 1e-3)])
def test_round_trip_and_independent_minimum(eps, delta):
    rho = zcdp_rho(eps, delta)
    d = zcdp_delta(rho, eps)
    assert d <= delta and d == pytest.approx(delta, rel=1e-8)
    assert zcdp_delta(rho * (1 + 1e-6), eps) > delta  # the largest feasible rho
    # the exact infimum is no larger than a grid search, and the grid comes close to it
    grid = brute_force_delta(rho, eps)
    assert d <= grid * (1 + 1e-9)
    assert grid == pytest.approx(d, rel=1e-4)


def test_bounds_the_exact_gaussian_curve():
    """The Gaussian mechanism is Delta^2 / (2 sigma^2)-zCDP; its exact (epsilon, delta) curve
    (Balle & Wang 2018) lies below the zCDP conversion, and not far below (the bound is tight)."""
    for sigma, sens, eps in [(3.0, 1.0, 1.0), (10.0, math.sqrt(2), 0.5), (1.0, 1.0, 2.0)]:
        rho = gaussian_rho(sens, sigma)
        assert rho == pytest.approx(sens**2 / (2 * sigma**2))
        exact = gaussian_delta(sigma, eps, sens)
        bound = zcdp_delta(rho, eps)
        assert exact <= bound <= 5 * exact  # classic conversion: ~90x at sigma = 3


def test_monotone_and_edges():
    rhos = [0.001, 0.01, 0.1, 1.0]
    deltas = [zcdp_delta(r, 1.0) for r in rhos]
    assert all(a < b for a, b in zip(deltas, deltas[1:]))
    assert zcdp_delta(0.0, 1.0) == 0.0
    assert exponential_rho(0.2) == pytest.approx(0.2**2 / 8)


def test_bad_input():
    with pytest.raises(PrivacyError, match="delta"):
        zcdp_rho(1.0, 0.0)
    with pytest.raises(PrivacyError, match="epsilon"):
        zcdp_rho(0.0, 1e-6)
    with pytest.raises(PrivacyError, match="rho"):
        zcdp_delta(-1.0, 1.0)
    with pytest.raises(PrivacyError, match="sigma"):
        gaussian_rho(1.0, 0.0)


@pytest.mark.parametrize("rho, delta", [(0.024356, 1e-6), (0.5, 1e-9), (3.0, 2e-10)])
def test_zcdp_epsilon_is_the_smallest_sufficient_epsilon(rho, delta):
    eps = zcdp_epsilon(rho, delta)
    assert zcdp_delta(rho, eps) <= delta
    assert zcdp_delta(rho, eps * (1 - 1e-6)) > delta
    assert zcdp_rho(eps, delta) == pytest.approx(rho, rel=1e-6)  # the inverse of zcdp_rho
