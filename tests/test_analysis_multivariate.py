"""Reiter (2005) Wald test for multi-component estimands from fully synthetic data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from synthinfer.analysis import reiter_wald_test, rubins_rules
from synthinfer.errors import AnalysisError, ParameterError


def _draw(rng, m, k, n, mean=0.0):
    """Posterior-predictive estimates for a k-dim normal mean with known identity covariance
    (flat prior), as in the scalar calibration test: U_i = I/n exactly."""
    x_bar = mean + rng.normal(0, 1 / np.sqrt(n), k)
    mu_i = x_bar + rng.normal(0, 1 / np.sqrt(n), (m, k))
    q = mu_i + rng.normal(0, 1 / np.sqrt(n), (m, k))
    U = np.broadcast_to(np.eye(k) / n, (m, k, k)).copy()
    return q, U


def test_one_component_statistic_is_the_squared_t():
    rng = np.random.default_rng(0)
    q, U = _draw(rng, 200, 1, 100)
    # n_syn = n / 2: the floor (n_syn/n) v̄ sits well below T ~ v̄, so eqs. 10-11 apply
    w = reiter_wald_test(q, U, n=100, n_syn=50)
    c = rubins_rules(q[:, 0], U[:, 0, 0], n=100, n_syn=50)
    assert not w.fallback and not c.fallback[0]
    assert w.statistic == pytest.approx(c.tvalues()[0] ** 2)
    assert w.r_f == pytest.approx(c.r[0])
    assert w.df_denom == pytest.approx(c.df[0])  # ν_f = t(1 - 1/r_f)² is eq. 11 for k = 1
    assert w.pvalue == pytest.approx(c.pvalues()[0])


def test_hand_computed_two_components():
    q = np.array([[1.0, 0.0], [3.0, 2.0], [2.0, 4.0]])
    U = np.broadcast_to(np.diag([0.5, 1.0]), (3, 2, 2))
    w = reiter_wald_test(q, U)
    # by hand: q̄ = (2, 2); B = [[1, 1], [1, 4]]; Ū⁻¹ = diag(2, 1)
    # r_f = (4/3) tr(B Ū⁻¹) / 2 = (4/3)(2 + 4)/2 = 4
    # S_f = q̄ᵀ Ū⁻¹ q̄ / (k (r_f - 1)) = (8 + 4) / (2 * 3) = 2
    # t = k(m-1) = 4 -> ν_f = t (1 - 1/r_f)² = 4 * 0.5625 = 2.25
    assert w.r_f == pytest.approx(4.0)
    assert w.statistic == pytest.approx(2.0)
    assert w.df_denom == pytest.approx(2.25)
    assert w.pvalue == pytest.approx(stats.f.sf(2.0, 2, 2.25))
    # the restriction R = [0, 1] tests the second component alone
    w2 = reiter_wald_test(q, U, r_matrix=[[0.0, 1.0]], null=[2.0])
    assert w2.df_num == 1 and w2.statistic == pytest.approx(0.0)


def test_fallback_needs_n():
    q = np.array([[1.0, 1.0], [1.01, 1.0], [1.0, 1.01]])
    U = np.broadcast_to(np.eye(2), (3, 2, 2))
    with pytest.raises(AnalysisError, match="pass n and n_syn"):
        reiter_wald_test(q, U)
    w = reiter_wald_test(q, U, n=10, n_syn=10)
    assert w.fallback and np.isinf(w.df_denom)
    assert w.statistic == pytest.approx((q.mean(axis=0) ** 2).sum() / 2)
    assert w.pvalue == pytest.approx(stats.chi2.sf(2 * w.statistic, 2))


def test_r_f_below_the_real_data_floor_falls_back():
    # the hand-computed example above, r_f = 4: T_f = 3 Ū, against the floor (n_syn/n) Ū
    q = np.array([[1.0, 0.0], [3.0, 2.0], [2.0, 4.0]])
    U = np.broadcast_to(np.diag([0.5, 1.0]), (3, 2, 2))
    assert not reiter_wald_test(q, U, n=10, n_syn=29).fallback  # floor 2.9 < r_f - 1 = 3
    w = reiter_wald_test(q, U, n=10, n_syn=31)  # floor 3.1 > 3
    assert w.fallback and np.isinf(w.df_denom)
    assert w.statistic == pytest.approx(float(q.mean(0) @ np.linalg.solve(U.mean(0), q.mean(0))) / (3.1 * 2))


def test_size_under_the_null():
    """Rejection rate of H0: μ = μ0 (true) at level 0.05 over 1500 independent repeats, within
    the 99.9% binomial band; m = 100 datasets, k = 3 components."""
    rng = np.random.default_rng(2005)
    reps = 1500
    p = np.array([reiter_wald_test(*_draw(rng, 100, 3, 200, mean=0.7), null=0.7, n=200, n_syn=200).pvalue for _ in range(reps)])
    rate = np.mean(p < 0.05)
    lo = stats.binom.ppf(0.0005, reps, 0.05) / reps
    hi = stats.binom.ppf(0.9995, reps, 0.05) / reps
    assert lo <= rate <= hi, rate


def test_bad_shapes():
    with pytest.raises(AnalysisError, match=r"\(m, p\)"):
        reiter_wald_test(np.zeros((3, 2)), np.zeros((3, 3, 3)))
    with pytest.raises(ParameterError, match="r_matrix"):
        reiter_wald_test(np.zeros((3, 2)), np.zeros((3, 2, 2)), r_matrix=[[1.0, 0.0, 0.0]])


def test_near_singular_or_indefinite_u_bar_is_refused():
    q = np.array([[1.0, 0.0], [3.0, 2.0], [2.0, 4.0]])
    near = np.broadcast_to(np.array([[1.0, 1.0], [1.0, 1.0 + 1e-14]]), (3, 2, 2))
    with pytest.raises(AnalysisError, match="numerically singular"):
        reiter_wald_test(q, near)
    indefinite = np.broadcast_to(np.array([[1.0, 0.0], [0.0, -0.5]]), (3, 2, 2))
    with pytest.raises(AnalysisError, match="indefinite"):
        reiter_wald_test(q, indefinite)
