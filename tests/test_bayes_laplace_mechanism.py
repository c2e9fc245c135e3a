"""The truncated Laplace-mechanism generator (Wilde et al. 2021, Proposition 3): sensitivity, ledger."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from synthinfer.errors import BudgetExceededError, PrivacyError, UnknownColumnError
from synthinfer.generate import LaplaceMechanismGenerator
from synthinfer.privacy import PrivacyBudget, PrivacyLedger

BOUNDS = {"a": (-3.0, 3.0), "b": (0.0, 10.0)}


def _log_density(z, x, gen):
    """log P(output row = z | input row x) of the mechanism (before shuffling), per row."""
    cols = list(gen.bounds)
    lo = np.array([gen.bounds[c][0] for c in cols])
    hi = np.array([gen.bounds[c][1] for c in cols])
    lam = np.array([gen.scales_[c] for c in cols])
    return scipy.stats.laplace.logpdf(z, np.clip(x, lo, hi), lam).sum(axis=-1)


def test_sensitivity_on_neighbouring_datasets():
    # Replace-one neighbours, including values far outside the bounds: the privacy loss
    # |log p(z | x) - log p(z | x')| of the changed row never exceeds epsilon, and the worst
    # case (x, x' at opposite bounds, z beyond both) attains it.
    gen = LaplaceMechanismGenerator(BOUNDS, epsilon=2.0, seed=0).fit(pd.DataFrame({"a": [0.0], "b": [1.0]}))
    rng = np.random.default_rng(1)
    x = rng.normal(0, 20, size=(5000, 2))
    x2 = rng.normal(0, 20, size=(5000, 2))
    z = rng.normal(0, 20, size=(5000, 2))
    loss = np.abs(_log_density(z, x, gen) - _log_density(z, x2, gen))
    assert loss.max() <= 2.0 + 1e-12
    worst = abs(_log_density(np.array([[-9, -9]]), np.array([[-3, 0]]), gen) - _log_density(np.array([[-9, -9]]), np.array([[3, 10]]), gen))
    assert worst[0] == pytest.approx(2.0)


def test_equal_split_scales_and_ledger_charges():
    df = pd.DataFrame({"a": np.linspace(-5, 5, 50), "b": np.linspace(0, 20, 50)})
    gen = LaplaceMechanismGenerator(BOUNDS, epsilon=6.0, seed=0).fit(df)
    assert gen.scales_ == pytest.approx({"a": 6 / 3.0, "b": 10 / 3.0})  # lambda_j = d (b_j - a_j) / epsilon
    assert gen.ledger_.spent == pytest.approx((6.0, 0.0))
    assert [c.name for c in gen.ledger_.charges] == ["laplace_synthetic[a]", "laplace_synthetic[b]"]
    assert gen.privacy_["epsilon"] == pytest.approx(6.0) and gen.privacy_["seed_fixed"] is True
    assert len(gen.generate(1)[0]) == 50 and len(gen.generate(1, n=10, seed=0)[0]) == 10


def test_paper_setting_one_column_width_six():
    # A.6.3: bounds of width 6, lambda = 1 -> epsilon = 6; lambda = 0.75 -> epsilon = 8.
    for lam, eps in [(1.0, 6.0), (0.75, 8.0)]:
        gen = LaplaceMechanismGenerator({"x": (-3, 3)}, scales={"x": lam}, seed=0).fit(pd.DataFrame({"x": [0.0, 1.0]}))
        assert gen.ledger_.spent[0] == pytest.approx(eps)


def test_overspend_refused_before_any_noise_or_charge():
    ledger = PrivacyLedger(PrivacyBudget(1.0))
    ledger.spend("earlier", 0.5, mechanism="test")
    gen = LaplaceMechanismGenerator(BOUNDS, epsilon=0.6, seed=0)
    with pytest.raises(BudgetExceededError):
        gen.fit(pd.DataFrame({"a": [0.0], "b": [1.0]}), ledger=ledger)
    assert not hasattr(gen, "synthetic_")
    assert len(ledger.charges) == 1
    gen = LaplaceMechanismGenerator(BOUNDS, epsilon=0.5, seed=0).fit(pd.DataFrame({"a": [0.0], "b": [1.0]}), ledger=ledger)
    assert ledger.remaining is None


@pytest.mark.real_noise
def test_noise_distribution_is_laplace_of_the_right_scale():
    # real (unseeded) noise: the p-value is uniform when the sampler is right, so the threshold
    # is the test's false-alarm rate; at 20,000 draws a 20% error in the scale still has a KS
    # distance of 0.034, p ~ 1e-19 (a 10% error, 0.017, would sit at the threshold)
    df = pd.DataFrame({"x": np.zeros(20_000)})
    gen = LaplaceMechanismGenerator({"x": (-3, 3)}, scales={"x": 1.0}, seed=2).fit(df)
    assert scipy.stats.kstest(gen.synthetic_["x"], "laplace", args=(0, 1.0)).pvalue > 1e-5
    assert scipy.stats.kstest(gen.synthetic_["x"], "laplace", args=(0, 1.2)).pvalue < 1e-5


def test_binary_postprocessing_and_bad_input():
    df = pd.DataFrame({"y": [0, 1] * 50})
    out = LaplaceMechanismGenerator({"y": (0, 1)}, epsilon=1.0, binary=["y"], seed=0).fit(df).generate(1)[0]
    assert set(out["y"].unique()) <= {0.0, 1.0}
    with pytest.raises(UnknownColumnError):
        LaplaceMechanismGenerator({"z": (0, 1)}, epsilon=1.0).fit(df)
    with pytest.raises(PrivacyError):
        LaplaceMechanismGenerator({"y": (0, 1)}).fit(df)
    with pytest.raises(PrivacyError):
        LaplaceMechanismGenerator({"y": (0, 1)}, epsilon=-1.0).fit(df)
