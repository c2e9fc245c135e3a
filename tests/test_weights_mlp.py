"""(DP-)MLP weights: accounting, clipping sensitivity, Poisson lots, learning and the ledger."""

import numpy as np
import pytest

from synthinfer._jax import jax, jnp
from synthinfer.datasets import make_triangle_square
from synthinfer.errors import BudgetExceededError, PrivacyError
from synthinfer.privacy import PrivacyBudget, PrivacyLedger
from synthinfer.weights import DPMLPWeights, MLPWeights
from synthinfer.privacy.dpsgd import dpsgd_noise_multiplier, noisy_clipped_sum
from synthinfer.weights.mlp import _init_mlp, per_example_gradients

BOUNDS = {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}


def test_mlp_clipped_sum_changes_by_at_most_2C_between_neighbours():
    rng = np.random.default_rng(0)
    params = _init_mlp(jax.random.key(0), 3, 8)
    params = jax.tree_util.tree_map(lambda p: p * 20, params)  # large gradients, so clipping binds
    x = jnp.asarray(rng.random((50, 3)))
    y = jnp.asarray(rng.integers(0, 2, 50).astype(float))
    mask = jnp.ones(50)
    clipped = jax.jit(lambda p, x, y, m, c: noisy_clipped_sum(per_example_gradients(p, x, y), m, c, 0.0, jax.random.key(0)))
    full = clipped(params, x, y, mask, 0.7)
    worst = 0.0
    for i in range(50):  # substitution neighbours: row i replaced by another row with the label flipped
        j = (i + 1) % 50
        diff = jax.tree_util.tree_map(lambda a, b: a - b, full,
                                      clipped(params, x.at[i].set(x[j]), y.at[i].set(1 - y[j]), mask, 0.7))
        worst = max(worst, float(jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(diff)))))
    assert worst <= 2 * 0.7 + 1e-9
    assert worst > 0.7  # beyond the add-or-remove bound C: accounting for it would understate the loss


def test_dp_mlp_learns_the_triangle_and_spends_exactly_its_budget():
    real, synth = make_triangle_square(1000, seed=0)
    ledger = PrivacyLedger(PrivacyBudget(2.0, 2e-6))
    m = DPMLPWeights(BOUNDS, epsilon=1.0, delta=1e-6, epochs=3, lot_size=128, seed=0).fit(real, synth, ledger=ledger)
    (charge,) = ledger.charges
    assert (charge.epsilon, charge.delta) == (1.0, 1e-6)
    assert charge.details["noise_multiplier"] == pytest.approx(m.noise_multiplier_)
    # accounted for substitution neighbours, like every synthinfer mechanism
    assert m.noise_multiplier_ == pytest.approx(dpsgd_noise_multiplier(1.0, 1e-6, m.sampling_rate_, m.steps_))
    assert charge.details["neighbouring"] == "substitution of one real row"
    w = m.weights(synth)
    inside = (synth.x1 + synth.x2 < 1).to_numpy()
    assert w[inside].mean() > 1.5 * w[~inside].mean()
    with pytest.raises(BudgetExceededError):
        DPMLPWeights(BOUNDS, epsilon=1.5, delta=1e-4, seed=0).fit(real, synth, ledger=ledger)
    with pytest.raises(PrivacyError):
        DPMLPWeights(BOUNDS, epsilon=1.0, delta=0.0).fit(real, synth)


@pytest.mark.filterwarnings("ignore::synthinfer.errors.NonPrivateWarning")
def test_non_private_mlp_learns_the_triangle():
    real, synth = make_triangle_square(1000, seed=0)
    w = MLPWeights(BOUNDS, seed=0).fit(real, synth).weights(synth)
    inside = (synth.x1 + synth.x2 < 1).to_numpy()
    assert w[inside].mean() > 2 * w[~inside].mean()
