"""Rubin's rules for fully synthetic data (Supplement B eqs. 9-11): hand-computed answers and
calibration on a conjugate model where exact posterior-predictive synthetic data can be drawn."""

from __future__ import annotations

import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from synthinfer.analysis import rubins_rules
from synthinfer.errors import AnalysisError, ParameterError, SynthinferWarning


def test_hand_computed_example():
    q = [1.0, 2.0, 3.0, 4.0]
    v = [0.5, 0.5, 0.5, 0.5]
    c = rubins_rules(q, v)
    # by hand: q̄ = 2.5, v̄ = 0.5, b = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3
    b = 5.0 / 3.0
    T = 1.25 * b - 0.5  # = 19/12
    r = 1.25 * b / 0.5  # = 25/6
    nu = 3.0 * (1.0 - 1.0 / r) ** 2  # = 3 (19/25)^2 = 1.7328
    assert c.q_bar[0] == pytest.approx(2.5)
    assert c.v_bar[0] == pytest.approx(0.5)
    assert c.b[0] == pytest.approx(b)
    assert c.T[0] == pytest.approx(19.0 / 12.0)
    assert c.T_star[0] == pytest.approx(T)
    assert c.r[0] == pytest.approx(25.0 / 6.0)
    assert c.df[0] == pytest.approx(1.7328)
    assert not c.fallback[0] and c.m[0] == 4
    half = stats.t.ppf(0.975, nu) * np.sqrt(T)
    np.testing.assert_allclose(c.conf_int(0.05)[0], [2.5 - half, 2.5 + half])
    assert c.pvalues()[0] == pytest.approx(2 * stats.t.sf(2.5 / np.sqrt(T), nu))
    assert c.pvalues(null=2.5)[0] == pytest.approx(1.0)


def test_negative_T_uses_the_fallback_and_flags_it():
    q = [1.0, 1.1, 0.9]
    v = [1.0, 1.0, 1.0]
    # b = 0.01, T = (4/3)(0.01) - 1 < 0  ->  T* = (n_syn/n) v̄ = (100/200) * 1
    c = rubins_rules(q, v, n=200, n_syn=100)
    assert c.T[0] == pytest.approx(4.0 / 3.0 * 0.01 - 1.0)
    assert c.fallback[0]
    assert c.T_star[0] == pytest.approx(0.5)
    assert np.isinf(c.df[0])  # normal reference for the fallback (documented choice)
    np.testing.assert_allclose(c.conf_int(0.05)[0], 1.0 + np.array([-1, 1]) * stats.norm.ppf(0.975) * np.sqrt(0.5))
    with pytest.warns(SynthinferWarning, match="pass n and n_syn"):
        c2 = rubins_rules(q, v)
    assert c2.fallback[0] and np.isnan(c2.T_star[0])


def test_T_below_the_real_data_floor_falls_back_instead_of_unbounded_intervals():
    # r = 1.001: T = 0.001 v̄ > 0, where eq. 11 alone gives nu ~ 1e-4 and t quantiles ~ 1e150
    m, v = 100, 1.0
    z = np.random.default_rng(0).normal(size=m)
    b = 1.001 * v / (1 + 1 / m)
    q = 3.0 + z / z.std(ddof=1) * np.sqrt(b)
    bare = rubins_rules(q, np.full(m, v))
    assert bare.T[0] == pytest.approx(0.001 * v) and bare.df[0] < 1e-3 and not bare.fallback[0]
    assert np.ptp(bare.conf_int()[0]) > 1e100  # the paper's rule alone
    c = rubins_rules(q, np.full(m, v), n=1000, n_syn=1000)
    assert c.fallback[0] and np.isinf(c.df[0]) and c.T_star[0] == pytest.approx(v)
    np.testing.assert_allclose(c.conf_int()[0], q.mean() + np.array([-1, 1]) * stats.norm.ppf(0.975))
    # just above the floor eq. 10-11 apply, with nu >= (m - 1) (n_syn / (n + n_syn))^2
    q2 = 3.0 + z / z.std(ddof=1) * np.sqrt(2.01 * v / (1 + 1 / m))
    c2 = rubins_rules(q2, np.full(m, v), n=1000, n_syn=1000)
    assert not c2.fallback[0] and c2.T_star[0] == pytest.approx(1.01 * v)
    assert c2.df[0] >= (m - 1) * 0.25


def test_vectorised_equals_one_at_a_time_and_nan_is_missing():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(7, 5))
    v = rng.uniform(0.01, 0.5, size=(7, 5))
    q[2, 1] = np.nan  # one missing estimate for coefficient 1
    c = rubins_rules(q, v, n=50, n_syn=50, names=list("abcde"))
    for j in range(5):
        keep = ~np.isnan(q[:, j])
        cj = rubins_rules(q[keep, j], v[keep, j], n=50, n_syn=50)
        for field in ("q_bar", "v_bar", "b", "T", "T_star", "df"):
            assert getattr(c, field)[j] == pytest.approx(getattr(cj, field)[0])
    assert list(c.m) == [7, 6, 7, 7, 7]
    frame = c.to_frame()
    assert list(frame.index) == list("abcde")
    assert {"estimate", "std_err", "p_value", "df", "m", "fallback"} <= set(frame.columns)


def test_bad_input():
    with pytest.raises(AnalysisError, match="at least 2"):
        rubins_rules([1.0], [1.0])
    with pytest.raises(AnalysisError, match="differ in shape"):
        rubins_rules([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(AnalysisError, match="non-negative"):
        rubins_rules([1.0, 2.0], [1.0, -1.0])
    with pytest.raises(ParameterError, match="alpha"):
        rubins_rules([1.0, 2.0], [1.0, 1.0], n=2, n_syn=2).conf_int(1.5)


def _binomial_band(reps: int, p: float, level: float = 0.999) -> tuple[float, float]:
    """Central `level` range of the coverage fraction if the true coverage is exactly p."""
    lo = stats.binom.ppf((1 - level) / 2, reps, p) / reps
    hi = stats.binom.ppf(1 - (1 - level) / 2, reps, p) / reps
    return lo, hi


@pytest.mark.parametrize("n_syn_factor", [1, 2])
def test_coverage_normal_mean_posterior_predictive(n_syn_factor):
    """x_1..n ~ N(μ, 1) with known variance and a flat prior: μ | x ~ N(x̄, 1/n). Each synthetic
    dataset draws μ_i from the posterior and n_syn rows from N(μ_i, 1); the analyst estimates μ
    by the sample mean with variance s²/n_syn. We draw the sufficient statistics exactly
    (mean ~ N(μ_i, 1/n_syn), s² ~ χ²_{n_syn-1}/(n_syn-1)), for `reps` independent real datasets at
    once, and check the coverage of the true μ against binomial error (99.9% band)."""
    rng = np.random.default_rng(20230425 + n_syn_factor)
    reps, m, n = 4000, 100, 200
    n_syn = n * n_syn_factor
    mu = 1.5
    x_bar = mu + rng.normal(0, 1 / np.sqrt(n), reps)
    mu_i = x_bar + rng.normal(0, 1 / np.sqrt(n), (m, reps))
    q = mu_i + rng.normal(0, 1 / np.sqrt(n_syn), (m, reps))
    s2 = rng.chisquare(n_syn - 1, (m, reps)) / (n_syn - 1)
    c = rubins_rules(q, s2 / n_syn, n=n, n_syn=n_syn)
    for level in (0.95, 0.9, 0.8):
        ci = c.conf_int(1 - level)
        coverage = np.mean((ci[:, 0] <= mu) & (mu <= ci[:, 1]))
        lo, hi = _binomial_band(reps, level)
        assert lo <= coverage <= hi, (level, coverage, lo, hi)
    # the t-test of the true value is correspondingly of the right size
    size = np.mean(c.pvalues(null=mu) < 0.05)
    lo, hi = _binomial_band(reps, 0.05)
    assert lo <= size <= hi


def test_coverage_beta_bernoulli_posterior_predictive():
    """θ ~ Beta(1, 1), x_1..n ~ Bernoulli(θ): θ | x ~ Beta(1 + s, 1 + n - s). Each synthetic dataset
    draws θ_i from the posterior and n_syn Bernoulli(θ_i) rows; the analyst reports p̂ with the
    Wald variance p̂(1 - p̂)/n_syn. 95% coverage of the true θ within the 99.9% binomial band."""
    rng = np.random.default_rng(1987)
    reps, m, n, theta = 4000, 100, 500, 0.3
    s = rng.binomial(n, theta, reps)
    theta_i = rng.beta(1 + s, 1 + n - s, (m, reps))
    p_hat = rng.binomial(n, theta_i) / n
    c = rubins_rules(p_hat, p_hat * (1 - p_hat) / n, n=n, n_syn=n)
    ci = c.conf_int(0.05)
    coverage = np.mean((ci[:, 0] <= theta) & (theta <= ci[:, 1]))
    lo, hi = _binomial_band(reps, 0.95)
    assert lo <= coverage <= hi, coverage


@settings(max_examples=40, deadline=None)
@given(
    q=hnp.arrays(np.float64, (6, 2), elements=st.floats(-100, 100)),
    v=hnp.arrays(np.float64, (6, 2), elements=st.floats(0.01, 10)),
    shift=st.floats(-50, 50),
    scale=st.floats(0.1, 10),
)
def test_location_scale_equivariance(q, v, shift, scale):
    """Shifting estimates moves q̄ only; scaling estimates by a and variances by a² scales T*
    by a² and leaves ν, r and the fallback decision unchanged."""
    base = rubins_rules(q, v, n=100, n_syn=100)
    moved = rubins_rules(q + shift, v, n=100, n_syn=100)
    np.testing.assert_allclose(moved.q_bar, base.q_bar + shift, atol=1e-6)
    np.testing.assert_allclose(moved.T, base.T, rtol=1e-6, atol=1e-6)
    scaled = rubins_rules(q * scale, v * scale**2, n=100, n_syn=100)
    np.testing.assert_allclose(scaled.T_star, base.T_star * scale**2, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(scaled.fallback, base.fallback)
    np.testing.assert_allclose(scaled.df, base.df, rtol=1e-6)


def test_nearly_identical_estimates_give_infinite_degrees_of_freedom_without_a_warning():
    """b -> 0 makes r -> 0 and nu = (m - 1)(1 - 1/r)^2 -> inf: its limit, not an overflow warning."""
    q = np.zeros((6, 1))
    q[0] = 1e-160
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = rubins_rules(q, np.ones((6, 1)), n=100, n_syn=100)
    assert np.isinf(c.df[0]) and np.isfinite(c.T_star[0])


def test_zero_total_variance_gives_nan_and_a_warning_not_a_zero_width_interval():
    from synthinfer.errors import SynthinferWarning

    with pytest.warns(SynthinferWarning, match="zero total variance"):
        c = rubins_rules([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], n=100, n_syn=100)
    assert np.isnan(c.T_star[0]) and np.all(np.isnan(c.conf_int(0.05)))
    with pytest.warns(SynthinferWarning, match="fewer than 2 datasets"):
        c = rubins_rules(np.array([[1.0, 2.0], [1.5, np.nan], [0.5, np.nan]]), np.ones((3, 2)), n=10, n_syn=10)
    assert np.isfinite(c.q_bar[0]) and np.isnan(c.q_bar[1])
