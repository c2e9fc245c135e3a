"""The shared convergence policy: split R-hat < 1.01 (Vehtari et al. 2021), or the limit converged
chains reach over many quantities, and bulk ESS >= 100 per chain."""

import json
import warnings

import arviz as az
import numpy as np
import pytest

from synthinfer.errors import ConvergenceWarning
from synthinfer.mcmc import (
    ESS_BULK_PER_CHAIN,
    RHAT_CEILING,
    RHAT_MAX,
    batched_ess,
    convergence_diagnostics,
    further_draws,
    rhat_null_limits,
)


def _idata(**posterior):
    return az.from_dict(posterior=posterior)


def _ar1_block(rng, chains, draws, k, rho):
    """``k`` independent stationary AR(1) series per chain: converged chains with autocorrelation."""
    x = np.empty((chains, draws, k))
    x[:, 0] = rng.standard_normal((chains, k))
    e = rng.standard_normal((chains, draws, k)) * np.sqrt(1 - rho**2)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return x


def _ar1(rng, chains, draws, rho):
    return _ar1_block(rng, chains, draws, 1, rho)[..., 0]


def test_policy_constants():
    assert (RHAT_MAX, ESS_BULK_PER_CHAIN) == (1.01, 100.0)


def test_independent_chains_pass_and_match_arviz():
    rng = np.random.default_rng(0)
    idata = _idata(a=rng.standard_normal((4, 1000, 2)), b=rng.standard_normal((4, 1000)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        out = convergence_diagnostics(idata)
    assert out["ok"] is True
    assert len(out["rhat"]) == len(out["ess_bulk"]) == 3  # a's two components, then b
    np.testing.assert_allclose(out["rhat"][:2], az.rhat(idata)["a"].values)
    np.testing.assert_allclose(out["ess_bulk"][2], float(az.ess(idata, method="bulk")["b"]))
    assert out["rhat_max"] == max(out["rhat"]) and out["ess_bulk_min"] == min(out["ess_bulk"])
    assert out["ess_tail_min"] == pytest.approx(float(az.ess(idata, method="tail").to_array().min()))
    assert out["ess_bulk_required"] == 400.0 and out["rhat_threshold"] == 1.01
    json.dumps(out, allow_nan=False)  # JSON-ready
    only_b = convergence_diagnostics(idata, var_names=["b"])
    assert len(only_b["rhat"]) == 1 and only_b["rhat"][0] == out["rhat"][2]


def test_chains_in_different_places_fail_rhat():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 500)) + np.array([0.0, 0.0, 0.0, 0.5])[:, None]
    with pytest.warns(ConvergenceWarning, match="R-hat"):
        out = convergence_diagnostics(_idata(x=x), label="test sampler")
    assert out["ok"] is False and out["rhat_max"] > 1.01


def test_sticky_chains_fail_ess_and_warning_can_be_turned_off():
    rng = np.random.default_rng(2)
    x = _ar1(rng, 2, 1000, 0.98)  # ESS about 1000 * 0.01 per chain
    with pytest.warns(ConvergenceWarning, match="bulk ESS"):
        out = convergence_diagnostics(_idata(x=x))
    assert out["ok"] is False and out["ess_bulk_min"] < 200
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert convergence_diagnostics(_idata(x=x), warn=False)["ok"] is False
        assert convergence_diagnostics(_idata(x=x), ess_per_chain=1.0, rhat_max=1.5)["ok"] is True


def test_a_further_pass_sized_to_the_missing_ess_reaches_it():
    """Stationary AR(1) chains (rho 0.5: about a third of an ESS per draw) short of the bulk
    ESS asked for: the pass :func:`further_draws` sizes brings them to it; R-hat failures,
    an undefined ESS and small shortfalls get a whole pass or a quarter of one."""
    rng = np.random.default_rng(5)
    x = _ar1_block(rng, 4, 1600, 1, 0.5)[..., 0]
    first = convergence_diagnostics(_idata(x=x[:, :600]), ess_per_chain=250.0, warn=False)
    assert first["rhat_ok"] and not first["ok"] and 600 < first["ess_bulk_min"] < 1000
    k = further_draws(first, 600, 1000)
    assert 150 < k < 1000  # sized: more than a quarter pass, less than a whole one
    after = convergence_diagnostics(_idata(x=x[:, :600 + k]), ess_per_chain=250.0, warn=False)
    assert after["ok"], after["problems"]
    # the shortest pass further_draws gives, a quarter of one, would not have reached it here
    assert not convergence_diagnostics(_idata(x=x[:, :600 + 250]), ess_per_chain=250.0, warn=False)["ok"]
    assert further_draws({**first, "ess_bulk_min": 990.0}, 600, 1000) == 250  # at least a quarter of a pass
    assert further_draws({**first, "rhat_ok": False}, 600, 1000) == 1000  # R-hat failed: a whole pass
    assert further_draws({**first, "ess_bulk_min": None}, 600, 1000) == 1000  # ESS undefined
    assert further_draws({**first, "ess_bulk_min": 5.0}, 600, 1000) == 1000  # never more than a pass


def test_one_chain_checks_ess_only():
    rng = np.random.default_rng(3)
    out = convergence_diagnostics(_idata(x=rng.standard_normal((1, 800))))
    assert out["rhat"] is None and out["rhat_max"] is None and out["ok"] is True
    assert out["ess_bulk_required"] == 100.0


def test_constant_component_has_undefined_rhat_and_fails():
    rng = np.random.default_rng(4)
    x = np.stack([rng.standard_normal((2, 500)), np.ones((2, 500))], axis=-1)
    with pytest.warns(ConvergenceWarning):
        out = convergence_diagnostics(_idata(x=x))
    assert out["ok"] is False and out["rhat"][1] is None
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("method", ["bulk", "folded"])
def test_batched_ess_equals_arviz_series_by_series(method):
    """Geyer's sequences vectorised: equal to ArviZ's ESS of each series to rounding, across
    autocorrelations from antithetic to sticky, odd and minimal lengths, ties, a constant series
    (ESS = its size) and one with a NaN (undefined)."""
    rng = np.random.default_rng(11)
    for chains, draws in ((1, 200), (4, 101), (2, 7), (1, 5), (3, 4), (2, 3)):
        for rho in (-0.9, -0.5, 0.0, 0.5, 0.95):
            x = np.moveaxis(_ar1_block(rng, chains, draws, 6, rho), 2, 0)  # (series, chains, draws)
            x[0] = 2.5
            x[1, 0, 0] = np.nan
            x[2] = np.round(x[2])
            ours = batched_ess(x, method)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = [float(az.ess(_idata(v=x[i]), method=method)["v"]) for i in range(len(x))]
            np.testing.assert_allclose(ours, ref, rtol=1e-12, equal_nan=True)
    with pytest.raises(ValueError, match="method"):
        batched_ess(x, "tail")


def test_null_limits_read_each_half_chains_own_ess():
    """The limits from the batched ESS equal those from ArviZ's ESS of each half-chain alone."""
    from scipy.stats import chi2

    x = _ar1_block(np.random.default_rng(3), 4, 120, 5, 0.6)
    halves = np.concatenate([x[:, :60], x[:, 60:]], axis=0)
    ess = [[min(float(az.ess(_idata(v=h[None, :, j]), method=m)["v"]) for m in ("bulk", "folded"))
            for h in halves] for j in range(5)]
    n_e = np.mean(ess, axis=1)
    expected = np.sqrt(59 / 60 + chi2.isf(0.01 / 10, 7) / (7 * n_e))
    np.testing.assert_allclose(rhat_null_limits(x), expected, rtol=1e-12)


def test_null_limit_matches_the_simulated_largest_rhat():
    """At alpha = 0.5 the limit is the median of the largest R-hat of converged chains; simulated
    (20 replicates of 4 x 200 draws, 100 quantities, rho = 0.3) they agree to 3e-3, where the
    median itself is ~1.02 (so a wrong degrees of freedom or ESS would miss by more)."""
    rng = np.random.default_rng(5)
    largest, predicted = [], []
    for _ in range(20):
        x = _ar1_block(rng, 4, 200, 100, 0.3)
        largest.append(float(az.rhat(_idata(x=x))["x"].max()))
        predicted.append(float(np.median(rhat_null_limits(x, alpha=0.5))))
    assert np.median(largest) > 1.015
    assert abs(np.median(largest) - np.median(predicted)) < 3e-3


def test_many_converged_quantities_pass_where_the_fixed_bound_fails():
    """360 stationary chains of 4 x 400 draws (ESS ~ 870): the largest R-hat is above 1.01, as
    it is in every such replicate, and the policy passes them: 1.01 is exceeded by chance."""
    x = _ar1_block(np.random.default_rng(6), 4, 400, 360, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        out = convergence_diagnostics(_idata(x=x))
    assert out["rhat_max"] > 1.01 and out["ok"] is True
    assert 1.01 < out["rhat_limit_max"] < RHAT_CEILING


def test_one_chain_away_in_a_few_of_many_quantities_fails():
    """The same chains with one of them 0.5 sd away in 3 of 360 quantities (7 standard errors of
    its mean): flagged, and the warning names the limit it exceeded."""
    x = _ar1_block(np.random.default_rng(7), 4, 400, 360, 0.3)
    x[3, :, :3] += 0.5
    with pytest.warns(ConvergenceWarning, match=r"the limit for converged chains .* over 360 quantities"):
        out = convergence_diagnostics(_idata(x=x))
    assert out["ok"] is False


def test_few_quantities_and_long_chains_keep_the_fixed_bound():
    x = _ar1_block(np.random.default_rng(8), 4, 2000, 3, 0.3)
    out = convergence_diagnostics(_idata(x=x))
    assert out["ok"] is True and out["rhat_limit_max"] == RHAT_MAX


def test_chains_antithetic_in_location_but_not_in_scale_pass():
    """Converged chains that are antithetic in location (AR(1), rho = -0.5: bulk ESS ~3x the
    draws, as NUTS often gives) with a persistent scale (log-sd AR(1), rho = 0.6): the folded
    R-hat's own ESS sets the limit, so 360 such quantities pass (with the bulk ESS alone the
    limit fell to 1.01, which the folded R-hat of such chains exceeds)."""
    rng = np.random.default_rng(0)
    x = _ar1_block(rng, 4, 400, 360, -0.5) * np.exp(0.3 * _ar1_block(rng, 4, 400, 360, 0.6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        out = convergence_diagnostics(_idata(x=x))
    assert out["ok"] is True and out["rhat_max"] > 1.01 and out["ess_bulk_min"] > 1600
