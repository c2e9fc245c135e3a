"""choose_m, its test, predictive averaging and n-effective (Wilde et al. 2021, A.2, A.5, A.6.4)."""

import math

import numpy as np
import pytest
import scipy.stats

from synthinfer.bayes.choose_m import choose_m, learning_trajectory, n_effective, predictive_average
from synthinfer.bayes.losses import LogLoss
from synthinfer.bayes.models import GaussianLocationScale, NormalInverseGammaPrior
from synthinfer.bayes.posterior import GeneralisedPosterior
from synthinfer.errors import ParameterError


def _posterior():
    # A prior centred away from the DGP N(0, 1), so that good synthetic data clearly help.
    prior = NormalInverseGammaPrior(mean=3.0, scale=1.0, shape=2.0, rate=4.0)
    return GeneralisedPosterior(GaussianLocationScale(), LogLoss(1.0), prior, num_samples=500, seed=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=3), rng.normal(size=300), rng


def test_far_synthetic_data_give_m_zero(data):
    x, test, rng = data
    res = choose_m(_posterior(), x, rng.normal(4.0, 0.3, 200), test, seed=1)
    assert res.m_hat == 0 and not res.use_synthetic and res.p_value == 1.0


def test_dgp_synthetic_data_give_large_m(data):
    x, test, rng = data
    res = choose_m(_posterior(), x, rng.normal(size=200), test, seed=1)
    assert res.use_synthetic and res.p_value < 1e-6
    assert res.m_hat >= 19
    assert res.trajectory.values[-1] < res.trajectory.values[0] - 0.2
    assert res.trajectory.m_grid.max() == 30  # the default grid stops at 10 times the 3 real rows


def test_kld_trajectory_where_dgp_known(data):
    x, test, rng = data
    tr = learning_trajectory(_posterior(), x, rng.normal(size=200), test, [0, 200], criterion="kld", dgp_logpdf=scipy.stats.norm.logpdf, seed=0)
    # KLD(F0 || p) estimates: positive-ish, and 200 DGP draws bring it close to 0.
    assert tr.values[0] > 0.2 and abs(tr.values[1]) < 0.05


def test_predictive_averaging_is_no_worse_than_its_members(data):
    # Proposition 2: log of the average predictive >= average of the log predictives, pointwise.
    x, test, rng = data
    post = _posterior()
    pa = predictive_average(post, x, rng.normal(0.5, 1.0, 100), 5, n_subsets=6, seed=0)
    avg = pa.log_predictive(test)
    d = post.model.prepare(test)
    from synthinfer._jax import jnp
    from synthinfer.bayes.posterior import log_predictive_density

    members = np.stack([log_predictive_density(post.model, jnp.asarray(dr.reshape(-1, 2)), d) for dr in pa.draws])
    assert np.all(avg >= members.mean(axis=0) - 1e-12)


def test_n_effective_by_hand():
    n, curve = [2, 4, 8, 16, 32], [3.0, 2.0, 1.6, 1.5, 1.45]
    assert n_effective(n, curve, 4, 1.55) == pytest.approx(8.0)  # halfway 8 -> 16 is 12; 12 - 4
    assert n_effective(n, curve, 4, 2.5) == 0.0
    assert math.isinf(n_effective(n, curve, 4, 1.0))
    assert n_effective(n, [0.6, 0.7, 0.8, 0.9, 0.95], 2, 0.75, higher_is_better=True) == pytest.approx(4.0)


def test_bad_criterion():
    with pytest.raises(ParameterError, match="wasserstein"):
        choose_m(_posterior(), np.zeros(3), np.zeros(3), np.zeros(10), criterion="wasserstein")
