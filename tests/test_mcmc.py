"""The shared convergence policy: split R-hat < 1.01 and bulk ESS >= 100 per chain (Vehtari et al. 2021)."""

import json
import warnings

import arviz as az
import numpy as np
import pytest

from synthinfer.errors import ConvergenceWarning
from synthinfer.mcmc import ESS_BULK_PER_CHAIN, RHAT_MAX, convergence_diagnostics


def _idata(**posterior):
    return az.from_dict(posterior=posterior)


def _ar1(rng, chains, draws, rho):
    x = np.zeros((chains, draws))
    e = rng.standard_normal((chains, draws)) * np.sqrt(1 - rho**2)
    x[:, 0] = rng.standard_normal(chains)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return x


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
