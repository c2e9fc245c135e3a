import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from synthinfer.data import Domain, QuerySet
from synthinfer.privacy import (
    PrivacyBudget,
    PrivacyLedger,
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    gaussian_delta,
    gaussian_mechanism,
    gaussian_sigma,
    laplace_mechanism,
)
from synthinfer.errors import BudgetExceededError, ParameterError, PrivacyError
from synthinfer.privacy.zcdp import zcdp_delta
from synthinfer.privacy.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier, noisy_clipped_sum, poisson_lots


def eq2_delta(sigma, eps, sens):
    """NAPSU-MQ Theorem 3.6, eq. 2, written out directly."""
    return norm.cdf(sens / (2 * sigma) - eps * sigma / sens) - math.exp(eps) * norm.cdf(
        -sens / (2 * sigma) - eps * sigma / sens
    )


def test_gaussian_sigma_known_value():
    # zCDP calibration (the continuous Gaussian's analytic calibration would give 3.7306)
    assert gaussian_sigma(1.0, 1e-5, 1.0) == pytest.approx(4.0451, abs=1e-4)


@pytest.mark.parametrize("eps,delta,sens", [(1.0, 1e-5, 1.0), (0.1, 1e-9, 2.0), (8.0, 1e-6, math.sqrt(20)), (0.5, 0.01, 3.0)])
def test_gaussian_sigma_calibration(eps, delta, sens):
    """sigma is Delta / sqrt(2 rho) at the largest rho whose zCDP conversion meets (eps, delta), and
    (continuous Gaussian as a sanity check) never below the analytic continuous calibration."""
    s = gaussian_sigma(eps, delta, sens)
    rho = sens**2 / (2 * s**2)
    assert zcdp_delta(rho, eps) <= delta
    assert zcdp_delta(rho * 1.001, eps) > delta  # the smallest such sigma
    assert eq2_delta(s, eps, sens) <= delta * (1 + 1e-9)
    assert gaussian_delta(s, eps, sens) <= delta * (1 + 1e-9)


def test_gaussian_sigma_errors():
    for bad in [dict(epsilon=0), dict(epsilon=-1), dict(epsilon=float("inf"))]:
        with pytest.raises(PrivacyError, match="epsilon"):
            gaussian_sigma(bad["epsilon"], 1e-5)
    with pytest.raises(PrivacyError, match="delta"):
        gaussian_sigma(1.0, 0.0)
    with pytest.raises(PrivacyError, match="sensitivity"):
        gaussian_sigma(1.0, 1e-5, 0.0)


def test_budget_validation_and_split():
    with pytest.raises(PrivacyError):
        PrivacyBudget(0.0)
    with pytest.raises(PrivacyError):
        PrivacyBudget(1.0, 1.0)
    with pytest.raises(PrivacyError):
        PrivacyBudget(True)
    a, b = PrivacyBudget(1.0, 1e-6).split(0.9, 0.1, delta_fractions=[0.7, 0.3])
    assert (a.epsilon, b.epsilon) == pytest.approx((0.9, 0.1))
    assert (a.delta, b.delta) == pytest.approx((7e-7, 3e-7))
    with pytest.raises(PrivacyError, match="sum"):
        PrivacyBudget(1.0).split(0.8, 0.3)


def test_ledger_refuses_overspend_before_noise():
    ledger = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    gaussian_mechanism(np.zeros(3), sensitivity=1.0, epsilon=0.9, delta=1e-6, ledger=ledger)
    with pytest.raises(BudgetExceededError, match="remain"):
        gaussian_mechanism(np.zeros(3), sensitivity=1.0, epsilon=0.2, delta=0.0 + 1e-9, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        laplace_mechanism(np.zeros(3), sensitivity=1.0, epsilon=0.2, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        discrete_gaussian_mechanism(np.zeros(3), sensitivity=1.0, epsilon=0.2, delta=1e-9, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        discrete_laplace_mechanism(np.zeros(3), sensitivity=1.0, epsilon=0.2, ledger=ledger)
    assert len(ledger.charges) == 1
    laplace_mechanism(np.zeros(3), sensitivity=1.0, epsilon=0.1, ledger=ledger)  # exact fit
    assert ledger.remaining is None
    rec = ledger.to_dict()
    assert rec["spent"]["epsilon"] == pytest.approx(1.0)
    assert PrivacyLedger.from_dict(rec).spent == ledger.spent


def test_mechanisms_scaled_and_not_seeded():
    led = PrivacyLedger((100.0, 0.5))
    a, s = gaussian_mechanism(np.zeros(20000), sensitivity=1.0, epsilon=1.0, delta=1e-5, ledger=led)
    b, _ = gaussian_mechanism(np.zeros(20000), sensitivity=1.0, epsilon=1.0, delta=1e-5, ledger=led)
    assert not np.array_equal(a, b)  # fresh noise from OpenDP's CSPRNG every time
    assert s == pytest.approx(gaussian_sigma(1.0, 1e-5), rel=1e-6)
    # sample sd within ~5 standard errors of sigma (se of sd ~ sigma / sqrt(2N))
    assert abs(a.std() - s) < 5 * s / math.sqrt(2 * a.size)
    c, scale = laplace_mechanism(np.zeros(20000), sensitivity=2.0, epsilon=4.0, ledger=led)
    assert scale == pytest.approx(0.5, rel=1e-6)
    assert abs(np.abs(c).mean() - scale) < 5 * scale / math.sqrt(c.size)
    d, sd = discrete_gaussian_mechanism(np.full(20000, 7), sensitivity=1.0, epsilon=1.0, delta=1e-5, ledger=led)
    assert d.dtype == np.int64 and sd <= gaussian_sigma(1.0, 1e-5)
    assert abs((d - 7).std() - sd) < 5 * sd / math.sqrt(2 * d.size)
    e, t = discrete_laplace_mechanism(np.full(20000, 3), sensitivity=2.0, epsilon=4.0, ledger=led)
    assert e.dtype == np.int64 and t == 0.5
    assert led.charges[-2].details["variance"] == pytest.approx(sd**2)


def test_mechanisms_refuse_bad_values_before_spending():
    led = PrivacyLedger((10.0, 1e-6))
    with pytest.raises(ParameterError, match="integer"):
        discrete_gaussian_mechanism(np.array([1.5, 2.0]), sensitivity=1.0, epsilon=1.0, delta=1e-7, ledger=led)
    with pytest.raises(ParameterError, match="integer"):
        discrete_laplace_mechanism(np.array([0.5]), sensitivity=1.0, epsilon=1.0, ledger=led)
    with pytest.raises(ParameterError, match="finite"):
        laplace_mechanism(np.array([np.nan]), sensitivity=1.0, epsilon=1.0, ledger=led)
    assert led.charges == ()


# --- NAPSU-MQ Theorem 3.5: sensitivity of n_s full marginal sets is sqrt(2 n_s) ----------------
DOM = Domain({"a": [0, 1, 2], "b": [0, 1], "c": [0, 1, 2, 3], "d": [0, 1]})
MARGINAL_SETS = [("a",), ("a", "b"), ("b", "c"), ("a", "c", "d"), ("d",), ("c", "d")]


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 30),
    k=st.integers(1, len(MARGINAL_SETS)),
)
def test_marginal_sensitivity_substitution(data, n, k):
    rows = data.draw(st.lists(st.tuples(*[st.integers(0, s - 1) for s in DOM.shape]), min_size=n, max_size=n))
    codes = np.array(rows, dtype=np.int64)
    i = data.draw(st.integers(0, n - 1))
    new = data.draw(st.tuples(*[st.integers(0, s - 1) for s in DOM.shape]))
    neighbour = codes.copy()
    neighbour[i] = new
    qs = QuerySet(DOM, MARGINAL_SETS[:k])
    dist = np.linalg.norm(qs.count(codes) - qs.count(neighbour))
    assert dist <= qs.l2_sensitivity + 1e-12
    # the tight accounting's premise: at most 2 n_s counts change, each by exactly +-1
    diff = qs.count(codes) - qs.count(neighbour)
    assert set(np.unique(diff)) <= {-1, 0, 1} and np.count_nonzero(diff) <= qs.unit_changes == 2 * k
    # equality whenever the substituted row differs in every column
    if all(codes[i, j] != new[j] for j in range(len(DOM))):
        assert dist == pytest.approx(math.sqrt(2 * k))


# -- the discrete Gaussian's tight (PLD) calibration ---------------------------------------------


def _discrete_gaussian_losses(sigma: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact privacy loss (values, probabilities) under P of N_Z(0, sigma^2) on k coordinates each
    shifted by 1: (k - 2 S) / (2 sigma^2), S the sum of the k noises (the k-fold convolution of the
    pmf, by FFT)."""
    from scipy.signal import fftconvolve

    t = int(math.ceil(40 * sigma))
    z = np.arange(-t, t + 1)
    pmf = np.exp(-(z.astype(float) ** 2) / (2 * sigma * sigma))
    pmf /= pmf.sum()
    total = pmf
    for _ in range(k - 1):
        total = np.clip(fftconvolve(total, pmf), 0.0, None)
    s = np.arange(-k * t, k * t + 1)
    keep = total > 1e-300
    return (k - 2.0 * s[keep]) / (2 * sigma * sigma), total[keep]


def _exact_discrete_gaussian_delta(sigma: float, epsilon: float, k: int) -> float:
    """Brute force: delta = E_P[max(0, 1 - exp(epsilon - L))] over the exact privacy loss L of
    :func:`_discrete_gaussian_losses` (both directions agree by symmetry)."""
    loss, p = _discrete_gaussian_losses(sigma, k)
    return float(np.sum(p * np.maximum(0.0, 1.0 - np.exp(np.minimum(epsilon - loss, 700.0)))))


@pytest.mark.parametrize("epsilon, delta, k", [(1.0, 1e-5, 1), (1.0, 1e-6, 2), (0.5, 1e-8, 4), (4.0, 1e-9, 6),
                                               (1.0, 1e-6, 40), (40.0, 1e-6, 2)])
def test_discrete_gaussian_pld_calibration_against_brute_force(epsilon, delta, k):
    from synthinfer.privacy import discrete_gaussian_pld_delta, discrete_gaussian_sigma

    sigma = discrete_gaussian_sigma(epsilon, delta, k)
    exact = _exact_discrete_gaussian_delta(sigma, epsilon, k)
    assert exact <= delta  # valid
    # the PLD bound is an upper bound (to the brute-force sum's rounding: at epsilon 40 its terms
    # are ~1e-9 and agree to ~1e-8 relatively), and close to the exact curve
    assert exact * (1 - 1e-6) <= discrete_gaussian_pld_delta(sigma, epsilon, k) <= 1.1 * exact + 1e-15
    # tight: 1% less noise breaks the budget (so the zCDP scale was not simply returned)
    assert _exact_discrete_gaussian_delta(0.99 * sigma, epsilon, k) > delta
    assert sigma < 0.98 * gaussian_sigma(epsilon, delta, math.sqrt(k))


def test_discrete_gaussian_above_epsilon_100_keeps_the_zcdp_scale_and_says_so():
    from synthinfer.privacy import discrete_gaussian_mechanism, discrete_gaussian_sigma

    assert discrete_gaussian_sigma(150.0, 1e-6, 2) == gaussian_sigma(150.0, 1e-6, math.sqrt(2))
    led = PrivacyLedger(PrivacyBudget(150.0, 1e-6), allow_large_epsilon=True)
    discrete_gaussian_mechanism(np.arange(3), sensitivity=math.sqrt(2), unit_changes=2, epsilon=150.0, delta=1e-6,
                                ledger=led)
    assert led.charges[0].details["accounting"].startswith("zCDP")


def test_discrete_gaussian_mechanism_with_unit_changes_uses_the_tight_scale():
    from synthinfer.privacy import discrete_gaussian_mechanism, discrete_gaussian_sigma

    led = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    discrete_gaussian_mechanism(np.arange(5), sensitivity=2.0, unit_changes=4, epsilon=1.0, delta=1e-6, ledger=led)
    (charge,) = led.charges
    assert charge.details["sigma"] == pytest.approx(discrete_gaussian_sigma(1.0, 1e-6, 4))
    assert charge.details["unit_changes"] == 4 and "privacy loss distribution" in charge.details["accounting"]
    with pytest.raises(PrivacyError, match="sqrt"):  # unit changes and sensitivity must agree
        discrete_gaussian_mechanism(np.arange(5), sensitivity=1.0, unit_changes=4, epsilon=1.0, delta=1e-6,
                                    ledger=PrivacyLedger(PrivacyBudget(1.0, 1e-6)))
    with pytest.raises(PrivacyError, match="unit_changes"):
        discrete_gaussian_sigma(1.0, 1e-6, 0)


# -- DP-SGD step (synthinfer.privacy.dpsgd) ------------------------------------------------
def test_clipped_sum_has_l2_sensitivity_2c_under_substitution():
    from synthinfer._jax import jax, jnp

    rng = np.random.default_rng(1)
    C = 0.7
    grads = {"w": jnp.asarray(rng.normal(0, 5, (8, 3, 2))), "b": jnp.asarray(rng.normal(0, 5, (8, 2)))}
    mask = jnp.asarray([1, 1, 1, 1, 1, 1, 0, 0], dtype=float)
    key = jax.random.key(0)

    def flat(t):
        return np.concatenate([np.ravel(t["w"]), np.ravel(t["b"])])

    base = flat(noisy_clipped_sum(grads, mask, C, 0.0, key))
    worst = 0.0
    for i in (0, 5):  # replace private row i by an adversarial row
        for sign in (-1.0, 1.0):
            other = jax.tree_util.tree_map(lambda g: g.at[i].set(-sign * 1e3 * g[i]), grads)
            worst = max(worst, np.linalg.norm(flat(noisy_clipped_sum(other, mask, C, 0.0, key)) - base))
    assert worst <= 2 * C + 1e-9
    assert worst > 1.9 * C  # the bound is attained by flipping a row's direction
    # padding rows (mask 0) never contribute
    padded = jax.tree_util.tree_map(lambda g: g.at[7].set(1e6), grads)
    assert np.allclose(flat(noisy_clipped_sum(padded, mask, C, 0.0, key)), base)


def test_poisson_lots_have_binomial_sizes_and_distinct_rows():
    idx, mask = poisson_lots(1000, 0.05, 400, np.random.default_rng(1))
    sizes = mask.sum(axis=1)
    # Binomial(1000, 0.05): mean 50, sd 6.9; the mean of 400 sizes has sd 0.34
    assert abs(sizes.mean() - 50) < 4 * 0.345
    for t in range(20):
        rows = idx[t, mask[t]]
        assert len(np.unique(rows)) == len(rows)


# -- DP-SGD accounting (synthinfer.privacy.dpsgd) ----------------------------------------
@pytest.mark.parametrize("epsilon", [1.0, 6.0])
def test_noise_multiplier_reaches_target_epsilon_within_one_percent(epsilon):
    q, steps, delta = 64 / 5000, 400, 1e-5
    sigma = dpsgd_noise_multiplier(epsilon, delta, q, steps)
    eps = dpsgd_epsilon(sigma, q, steps, delta)
    assert eps <= epsilon * (1 + 1e-6)
    assert eps == pytest.approx(epsilon, rel=0.01)
    # a 2% smaller noise multiplier must overshoot the target: sigma is (nearly) the smallest
    assert dpsgd_epsilon(0.98 * sigma, q, steps, delta) > epsilon


def test_accounting_uses_substitution_neighbours():
    """The epsilon is dp_accounting's PLD value for REPLACE_ONE (substitution) neighbours, here
    computed on a finer grid, and well above the add/remove value (about 1.53)."""
    import dp_accounting
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import PLDAccountant

    q, steps, sigma, delta = 0.02, 300, 1.2, 1e-5
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)),
                                              steps)
    expected = {}
    for relation in (NeighboringRelation.REPLACE_ONE, NeighboringRelation.ADD_OR_REMOVE_ONE):
        acc = PLDAccountant(neighboring_relation=relation, value_discretization_interval=1e-4)
        expected[relation] = acc.compose(event).get_epsilon(delta)
    eps = dpsgd_epsilon(sigma, q, steps, delta)
    assert eps == pytest.approx(expected[NeighboringRelation.REPLACE_ONE], rel=1e-3)
    assert eps == pytest.approx(2.4553, abs=1e-3)
    assert eps > 1.5 * expected[NeighboringRelation.ADD_OR_REMOVE_ONE]


def test_accounting_rejects_bad_parameters():
    with pytest.raises(PrivacyError):
        dpsgd_epsilon(1.0, 0.0, 10, 1e-5)
    with pytest.raises(PrivacyError):
        dpsgd_noise_multiplier(1.0, 0.0, 0.1, 10)
    with pytest.raises(PrivacyError, match="epsilon"):
        dpsgd_noise_multiplier(500.0, 0.5, 0.5, 1)


def test_ledger_check_spends_nothing_and_names_the_part():
    led = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    led.check("marginals", 1.0, 1e-6, mechanism="gaussian")  # fits exactly: no error
    led.spend("marginals", 0.6, 0.0, mechanism="gaussian")
    with pytest.raises(BudgetExceededError, match="selection .exponential. asks for epsilon=0.5"):
        led.check("selection", 0.5, mechanism="exponential")
    assert led.spent == (0.6, 0.0) and len(led.charges) == 1


def test_ledger_refuses_delta_overspend_when_epsilon_fits():
    ledger = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    ledger.spend("a", 0.1, 8e-7, mechanism="gaussian")
    with pytest.raises(BudgetExceededError, match="delta=3e-07"):
        ledger.spend("b", 0.1, 3e-7, mechanism="gaussian")  # epsilon 0.2 of 1 fits, delta 1.1e-6 does not
    assert not ledger.can_spend(0.0, 3e-7) and ledger.can_spend(0.9, 2e-7)
    assert len(ledger.charges) == 1
    with pytest.raises(BudgetExceededError):
        PrivacyLedger(PrivacyBudget(1.0)).check("pure", 0.5, 1e-12, mechanism="gaussian")  # a pure-DP total


def test_check_budget_refuses_delta_from_one_over_n_and_absurd_epsilon():
    from synthinfer.errors import ParameterError
    from synthinfer.privacy import MAX_EPSILON, check_budget, default_delta

    assert check_budget(1.0, 0.999e-3, 1000) == PrivacyBudget(1.0, 0.999e-3)
    with pytest.raises(ParameterError, match=r"delta=0\.001 is not below 1/n=0\.001 \(n=1,000 .*allow_large_delta=True"):
        check_budget(1.0, 1e-3, 1000)
    assert check_budget(1.0, 0.5, 1000, allow_large_delta=True).delta == 0.5
    assert check_budget(MAX_EPSILON, 0.0, 10).epsilon == 100.0
    with pytest.raises(ParameterError, match=r"epsilon=100\.5 is above 100.*allow_large_epsilon=True"):
        check_budget(100.5, 0.0, 10)
    assert check_budget(1e300, 0.0, 10, allow_large_epsilon=True).epsilon == 1e300
    for eps, delta in ((math.inf, 0.0), (math.nan, 0.0), (1.0, math.nan), (1.0, math.inf), (1.0, -1e-9)):
        with pytest.raises(PrivacyError):
            check_budget(eps, delta, 10, allow_large_delta=True, allow_large_epsilon=True)
    with pytest.raises(ParameterError, match="n"):
        check_budget(1.0, 0.0, 0)
    assert default_delta(1000) == pytest.approx(1e-6) and default_delta(1) == 1.0


def test_ledger_overrides_are_explicit_and_recorded():
    from synthinfer.errors import ParameterError

    ledger = PrivacyLedger((1.0, 0.5))
    with pytest.raises(ParameterError, match="delta"):
        ledger.check_budget(100)
    with pytest.raises(ParameterError, match="epsilon"):  # the mechanism's own share is checked too
        PrivacyLedger((1.0, 1e-6)).check_budget(100, PrivacyBudget(200.0))
    assert ledger.charges == () and ledger.to_dict()["unsafe_overrides"] == []
    study = PrivacyLedger((1.0, 0.5), allow_large_delta=True)
    study.check_budget(100)
    assert study.to_dict()["unsafe_overrides"] == ["allow_large_delta"]
    assert PrivacyLedger.from_dict(study.to_dict()).allow_large_delta
    with pytest.raises(ParameterError, match="allow_large_epsilon"):
        PrivacyLedger((1.0, 0.0), allow_large_epsilon=1)


@pytest.mark.parametrize("epsilon, delta, k", [(1.0, 2000**-2.0, 2), (0.3, 1e-9, 20), (8.0, 1e-6, 3)])
def test_pld_calibration_is_the_smallest_passing_scale_to_its_tolerance(epsilon, delta, k):
    """The false-position search returns a scale that passes the PLD check, and one ``rtol``
    below it fails: what a bisection to the same tolerance would bracket."""
    from synthinfer.privacy import discrete_gaussian_pld_delta
    from synthinfer.privacy.mechanisms import _PLD_SIGMA_RTOL, _pld_sigma

    sigma, by_pld = _pld_sigma(epsilon, delta, k)
    assert by_pld
    assert discrete_gaussian_pld_delta(sigma, epsilon, k) <= delta
    assert discrete_gaussian_pld_delta(sigma / (1 + 1.01 * _PLD_SIGMA_RTOL), epsilon, k) > delta


def test_smallest_passing_keeps_the_passing_side_and_counts_few_evaluations():
    from synthinfer.privacy.mechanisms import _smallest_passing

    calls = []

    def margin(x):  # passes at x >= 0.7321 (a steep, curved margin like log delta(sigma))
        calls.append(x)
        return -30.0 * (x * x - 0.7321**2)

    x = _smallest_passing(margin, 0.5, 1.0, 1e-6)
    assert margin(x) <= 0 and margin(x / (1 + 1e-6)) > 0
    assert len(calls) <= 2 + 12  # bisection to 1e-6 from a factor of 2 needs 20
    # a margin that is -inf where it passes (a delta of exactly 0) falls back to bisection
    x = _smallest_passing(lambda v: -math.inf if v >= 0.6 else 1.0, 0.5, 1.0, 1e-4)
    assert 0.6 <= x <= 0.6 * (1 + 1e-4)


@pytest.mark.parametrize("epsilon, delta, k", [(1.0, 2000**-2.0, 2), (0.5, 1e-9, 40)])
def test_pld_calibration_starts_at_the_analytic_scale_and_composes_few_plds(epsilon, delta, k, monkeypatch):
    """The search starts from the continuous Gaussian's analytic scale (a root of
    ``gaussian_delta``) and composes at most 5 PLDs at moderate epsilon (8 from the bracket
    [zCDP / 2, zCDP]); the answer still passes the PLD check."""
    from synthinfer.privacy import discrete_gaussian_pld_delta, gaussian_delta
    from synthinfer.privacy import mechanisms

    start = mechanisms._analytic_gaussian_sigma(epsilon, delta, math.sqrt(k))
    assert gaussian_delta(start, epsilon, math.sqrt(k)) == pytest.approx(delta, rel=1e-9)
    scales = []

    def counted(sigma, eps, changes):
        scales.append(sigma)
        return discrete_gaussian_pld_delta(sigma, eps, changes)

    monkeypatch.setattr(mechanisms, "discrete_gaussian_pld_delta", counted)
    sigma, by_pld = mechanisms._pld_sigma.__wrapped__(epsilon, delta, k)  # not the cached answer
    assert by_pld and scales[0] == start
    assert len(set(scales)) <= 5
    assert discrete_gaussian_pld_delta(sigma, epsilon, k) <= delta
