"""Post-processing and diagnostics on known cases: PSIS k-hat, ESS, N_G^(e), tempering."""

import numpy as np
import pytest

from synthinfer.errors import NonFiniteError, ParameterError, ParetoKWarning
from synthinfer.weights import (
    effective_sample_size,
    pareto_smooth,
    self_normalise,
    synthetic_effective_sample_size,
    temper,
)


def test_pareto_khat_recovers_tail_shape_with_the_right_sign():
    """Weights with a Pareto(alpha) right tail have shape k = 1/alpha."""
    rng = np.random.default_rng(0)
    light = np.log1p(rng.pareto(5.0, 4000))  # k = 0.2
    heavy = np.log1p(rng.pareto(1 / 0.9, 4000))  # k = 0.9
    ps = pareto_smooth(light)
    assert 0.0 < ps.k_hat < 0.45 and ps.reliable
    assert np.exp(ps.log_weights).sum() == pytest.approx(1.0)
    with pytest.warns(ParetoKWarning, match="k-hat"):
        ph = pareto_smooth(heavy)
    assert ph.k_hat > 0.7 and not ph.reliable
    # passing the negated log weights (ArviZ's LOO convention) would hide the heavy tail
    assert pareto_smooth(-heavy, warn=False).k_hat < 0.7
    # smoothing keeps the order of the weights and leaves the body below the tail unchanged (up to normalisation)
    order = np.argsort(heavy)
    assert np.all(np.diff(ph.log_weights[order]) >= -1e-12)
    body = order[: len(order) // 2]
    np.testing.assert_allclose(np.diff(ph.log_weights[body]), np.diff(heavy[body]), atol=1e-10)


def test_effective_sample_size_known_cases():
    assert effective_sample_size(np.ones(50)) == pytest.approx(50)
    assert effective_sample_size(np.r_[np.ones(10), np.zeros(40)]) == pytest.approx(10)
    w = np.r_[np.full(10, 3.0), np.ones(10)]
    assert effective_sample_size(w) == pytest.approx(40**2 / (90 + 10))
    assert effective_sample_size(log_weights=np.log(w)) == pytest.approx(16.0)


def test_synthetic_ess_reduces_to_kish_for_a_mean_and_to_n_for_uniform_weights():
    rng = np.random.default_rng(1)
    w = rng.exponential(size=500)
    scores = np.ones(500)  # constant score: a location model with unit residuals
    assert synthetic_effective_sample_size(scores, w) == pytest.approx(effective_sample_size(w))
    s = rng.normal(size=(500, 3))
    assert synthetic_effective_sample_size(s, np.ones(500)) == pytest.approx(500)
    assert synthetic_effective_sample_size(s, np.ones(500), norm="det") == pytest.approx(500)
    assert synthetic_effective_sample_size(s, w) < 500


def test_temper_and_self_normalise():
    lw = np.log(np.array([1.0, 4.0, 16.0]))
    np.testing.assert_allclose(np.exp(temper(lw, 0.5)), [1, 2, 4])
    np.testing.assert_allclose(temper(lw, 0.0), 0.0)
    np.testing.assert_allclose(self_normalise(log_weights=lw + 1000), [3 / 21, 12 / 21, 48 / 21])
    assert effective_sample_size(log_weights=temper(lw, 0.3)) > effective_sample_size(log_weights=lw)
    with pytest.raises(ParameterError, match="tau"):
        temper(lw, 1.5)
    with pytest.raises(ParameterError, match="exactly one"):
        self_normalise(np.ones(3), log_weights=lw)
    with pytest.raises(NonFiniteError):
        self_normalise(np.array([1.0, np.nan]))
    with pytest.raises(NonFiniteError):
        self_normalise(np.array([1.0, -1.0]))


def test_khat_threshold_depends_on_the_sample_size_as_in_vehtari_et_al():
    from synthinfer.weights.diagnostics import ParetoSmoothed, khat_threshold

    assert khat_threshold(100) == pytest.approx(0.5)
    assert khat_threshold(1000) == pytest.approx(1 - 1 / 3)
    assert khat_threshold(10**6) == 0.7
    assert not ParetoSmoothed(np.zeros(100), 0.6).reliable
    assert ParetoSmoothed(np.zeros(10**4), 0.6).reliable
