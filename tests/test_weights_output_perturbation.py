"""Output-perturbed weights (Supplement A.1): release size, unbiased noise, single release."""

import math

import pytest

from synthinfer.datasets import make_triangle_square
from synthinfer.errors import BudgetExceededError, PrivacyError, ReleaseError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.weights import OutputPerturbedWeights, largest_release_size
from synthinfer.weights.output_perturbation import output_noise_scale

BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}


def test_largest_release_size_is_the_largest_that_fits():
    for noise, delta in (("laplace", 0.0), ("gaussian", 1e-5)):
        n = largest_release_size(2000, 0.1, 1.0, delta, noise, max_scale=0.5)
        assert n >= 1
        assert output_noise_scale(n, 2000, 0.1, 1.0, delta, noise) < 0.5
        assert output_noise_scale(n + 1, 2000, 0.1, 1.0, delta, noise) >= 0.5
    # Laplace scale is linear in N_S: rho = 2 N_S / (N_D lam eps)
    assert output_noise_scale(7, 2000, 0.1, 1.0) == pytest.approx(2 * 7 / (2000 * 0.1), rel=1e-5)  # + the solver tolerance term
    assert largest_release_size(2000, 0.1, 1.0, n_available=10) == 10


@pytest.mark.real_noise
def test_unbiased_noise_mean_of_exp_zeta_is_one():
    """E[exp(zeta)] = 1 for both noise families (Theorem 2), checked over many released weights."""
    real, synth = make_triangle_square(4000, seed=0)
    for noise, delta in (("laplace", 0.0), ("gaussian", 1e-4)):
        m = OutputPerturbedWeights(BOUNDS, epsilon=1.0, delta=delta, lam=0.1, noise=noise, max_scale=0.3, seed=5)
        m.fit(real, synth)
        released = synth.iloc[: m.n_release_]
        from synthinfer.weights import LogRegWeights

        with pytest.warns(Warning):
            w_hat = LogRegWeights(BOUNDS, lam=0.1).fit(real, synth).weights(released)
        ratio = m.weights(released) / w_hat  # = exp(zeta_i), i.i.d.
        se = math.sqrt(m.noise_variance_factor() / len(ratio))
        assert abs(ratio.mean() - 1.0) < 4 * se
        assert m.ledger_.spent == pytest.approx((1.0, delta))


def test_weights_only_for_released_rows_and_budget_checked():
    real, synth = make_triangle_square(2000, seed=1)
    m = OutputPerturbedWeights(BOUNDS, epsilon=1.0, lam=0.1, seed=0).fit(real, synth)
    assert len(m.weights(synth.iloc[: m.n_release_])) == m.n_release_
    with pytest.raises(ReleaseError):
        m.weights(synth)
    with pytest.raises(PrivacyError, match="at most"):
        OutputPerturbedWeights(BOUNDS, epsilon=1.0, lam=0.1, n_release=m.n_release_ + 1).fit(real, synth)
    ledger = PrivacyLedger(PrivacyBudget(0.5))
    with pytest.raises(BudgetExceededError):
        OutputPerturbedWeights(BOUNDS, epsilon=1.0, lam=0.1).fit(real, synth, ledger=ledger)
    with pytest.raises(PrivacyError, match="max_scale"):
        OutputPerturbedWeights(BOUNDS, epsilon=1.0, lam=0.1, max_scale=1.5).fit(real, synth)


def test_gaussian_output_perturbation_has_l2_sensitivity_sqrt_n_release_times_delta2():
    """||X (beta - beta')||_2 <= sqrt(N_S) Delta_2 (Supplement A.1): the Gaussian noise is
    calibrated to that sensitivity, in the plan (output_noise_scale) and in the charge."""
    from synthinfer.privacy import gaussian_sigma
    from synthinfer.weights.logistic import logreg_l2_sensitivity

    real, synth = make_triangle_square(2000, seed=3)
    m = OutputPerturbedWeights(BOUNDS, epsilon=1.0, delta=1e-5, lam=0.1, noise="gaussian", n_release=9, seed=0)
    m.fit(real, synth)
    sens = math.sqrt(9) * logreg_l2_sensitivity(len(real), 0.1)
    charge = m.ledger_.charges[-1]
    assert charge.details["sensitivity_l2"] == pytest.approx(sens, rel=1e-12)
    assert charge.details["sigma"] == pytest.approx(gaussian_sigma(1.0, 1e-5, sens), rel=1e-12)
    assert m.noise_scale_ == pytest.approx(charge.details["sigma"], rel=1e-12)
    assert output_noise_scale(9, 2000, 0.1, 1.0, 1e-5, "gaussian") == pytest.approx(m.noise_scale_, rel=1e-12)
