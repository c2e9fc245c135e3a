"""NapsuMQ(select_extra="aim"): AIM's measurements at several noise levels, one noise-aware posterior."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from synthinfer import float64
from synthinfer.data import Domain
from synthinfer.errors import ParameterError, UnknownColumnError
from synthinfer.napsu import NapsuMQ, backends
from synthinfer.privacy import PrivacyBudget, PrivacyLedger

DOM = Domain({"a": ["0", "1", "2"], "b": ["0", "1", "2"], "c": ["0", "1"], "d": ["0", "1"]})


@pytest.fixture(scope="module", autouse=True)
def _fixed_noise():
    """These statistical checks of the inference are tuned on one noise realisation: draw the
    privacy noise from a seeded stream (test-only hook of synthinfer.privacy.samplers)."""
    from synthinfer.privacy import samplers

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(2))
        yield


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 20000
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 3  # strong a-b and c-d structure
    c = rng.integers(0, 2, n)
    d = (c ^ (rng.random(n) < 0.1)).astype(int)
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d}).astype(str)


@pytest.fixture(scope="module")
def fitted(table):
    ledger = PrivacyLedger(PrivacyBudget(1.0, 1e-6))
    gen = NapsuMQ([("a", "c")], epsilon=1.0, delta=1e-6, inference="laplace", select_extra="aim", seed=1)
    with warnings.catch_warnings():  # the Laplace fit's Gaussianity check may warn on this small table
        warnings.simplefilter("ignore")
        gen.fit(table, DOM, ledger=ledger)
    return gen, ledger


def test_aim_is_charged_once_and_its_measurements_are_the_posteriors_data(fitted):
    gen, ledger = fitted
    assert [c.name for c in ledger.charges] == ["napsu-mq: AIM"]
    assert gen.spent_ == pytest.approx((1.0, 1e-6))
    assert gen.marginals_[0].columns == ("a", "c")  # the analyst's marginal is in the model
    cols = [set(m.columns) for m in gen.marginals_]
    # every measurement lies in a model marginal, and the likelihood sees every measured value
    assert all(any(set(m.marginal.columns) <= c for c in cols) for m in gen.measurements_)
    assert gen.noisy_counts_.size == sum(m.values.size for m in gen.measurements_)
    assert len({m.variance for m in gen.measurements_}) > 1  # several noise levels
    assert gen.sigma_dp_ is None and "AIM" in gen.summary()
    record = gen.diagnostics_["aim"]
    assert record["likelihood_flops"] > 0 and record["workload"] and record["max_clique_cells"] >= 1
    # AIM finds the strong pairs at epsilon = 1 on 3,000 rows
    assert {("a", "b"), ("c", "d")} <= {tuple(sorted(m.columns)) for m in gen.marginals_}


def test_the_posterior_mode_follows_the_data(fitted, table):
    """At the MAP, the model's marginals match the data's within the measurements' noise
    (sd <= ~60 counts per cell here: at most ~0.003 per cell of 20,000 rows, so a total
    variation of 0.02 is several sd). Laplace *draws* are not checked: the empty cells of
    (a, b) make this posterior one-sided, which the Laplace fit's own check reports."""
    gen, _ = fitted
    with float64():  # the network's programs are float64 (outside, JAX truncates theta to float32)
        tables = gen.network_.clique_marginals(gen.laplace_.mean)
    jt = gen.network_.junction_tree
    for i, col in enumerate(DOM.names):
        c = next(k for k, cl in enumerate(jt.cliques) if i in cl)
        other = tuple(a for a, v in enumerate(jt.cliques[c]) if v != i)
        model = np.asarray(tables[c]).sum(axis=other)
        real = table[col].value_counts(normalize=True).reindex(DOM[col].categories).to_numpy()
        assert 0.5 * np.abs(model - real).sum() < 0.02, col


def test_save_and_load_keep_the_measurements(fitted, tmp_path):
    gen, _ = fitted
    gen.save(tmp_path / "g.npz")
    back = NapsuMQ.load(tmp_path / "g.npz")
    assert back.summary() == gen.summary()
    assert [m.variance for m in back.measurements_] == [m.variance for m in gen.measurements_]
    assert all(np.array_equal(a.values, b.values) and np.array_equal(a.cells, b.cells)
               for a, b in zip(back.measurements_, gen.measurements_))
    assert back.layout_ == gen.layout_


def test_bad_settings_fail_before_any_budget_is_spent(table, monkeypatch):
    ledger = PrivacyLedger(PrivacyBudget(1.0, 1e-6))

    class CanonicalOnly:  # a backend that takes only one noise level per canonical query
        name, noise_aware = "canonical-only", True

    monkeypatch.setitem(backends._REGISTRY, "canonical-only", CanonicalOnly())
    with pytest.raises(ParameterError, match="cannot yet use AIM.*'nuts'"):
        NapsuMQ([("a", "c")], inference="canonical-only", select_extra="aim", delta=1e-6).fit(
            table, DOM, ledger=ledger)
    with pytest.raises(ParameterError, match="select_extra='aim' only"):
        NapsuMQ([("a", "c")], inference="laplace", workload=[("a", "b")], delta=1e-6).fit(table, DOM, ledger=ledger)
    with pytest.raises(ParameterError, match="max_model_cells"):
        NapsuMQ([("a", "c")], inference="laplace", select_extra="aim", max_model_cells=0).fit(table, DOM, ledger=ledger)
    for bad in (0, 2.5, True):
        with pytest.raises(ParameterError, match=f"max_likelihood_flops must be a positive integer, got {bad!r}"):
            NapsuMQ([("a", "c")], inference="laplace", select_extra="aim", max_likelihood_flops=bad).fit(
                table, DOM, ledger=ledger)
    with pytest.raises(ParameterError, match="max_likelihood_flops and required_share apply to select_extra='aim'"):
        NapsuMQ([("a", "c")], inference="laplace", select_extra="mst", max_likelihood_flops=10**6).fit(
            table, DOM, ledger=ledger)
    with pytest.raises(ParameterError, match="required_share must be a number in \\[0, 1\\), got 1.5"):
        NapsuMQ([("a", "c")], inference="laplace", select_extra="aim", required_share=1.5).fit(table, DOM, ledger=ledger)
    with pytest.raises(ParameterError, match="required_share apply to select_extra='aim' only"):
        NapsuMQ([("a", "c")], inference="laplace", select_extra="mst", required_share=0.5).fit(table, DOM, ledger=ledger)
    with pytest.raises(UnknownColumnError):
        NapsuMQ([("a", "c")], inference="laplace", select_extra="aim", workload=[("a", "zz")],
                delta=1e-6).fit(table, DOM, ledger=ledger)
    assert ledger.charges == [] or len(ledger.charges) == 0


def test_importance_sampling_takes_aims_measurements(fitted, table):
    """PSIS on AIM's measurements: the same target as NUTS's (eq. 6 on every measured value),
    so on this small, well-measured model the proposal is accepted and its draws' means sit
    near the Laplace mode (within a few posterior sd, which the Laplace fit gives)."""
    gen = NapsuMQ([("a", "c")], epsilon=1.0, delta=1e-6, inference="importance", select_extra="aim", seed=1,
                  n_chains=2, num_samples=100)
    gen.fit(table, DOM)
    info = gen.diagnostics_["importance"]
    assert info["sampler"] == "importance" and info["validated"], info
    draws = gen.posterior_.posterior["theta"].values.reshape(-1, gen.network_.dimension)
    sd = np.sqrt(np.diag(gen.laplace_.cov))
    assert np.all(np.abs(draws.mean(axis=0) - gen.laplace_.mean) < 3 * sd)
    assert gen.layout_ is not None


def test_nuts_samples_the_posterior_of_aims_measurements(table, monkeypatch):
    """NUTS on every value AIM measured (eq. 6 with one noise level per measurement; the
    one-sided map on each query's combined measurements): chains that agree (R-hat) and 1-way
    marginals that follow the data in every draw (the noise sd is <= ~60 counts per cell of
    20,000 rows, so 0.03 in total variation is many sd). Its own noise stream, so the
    realisation does not depend on which tests ran before."""
    from synthinfer.privacy import samplers

    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(1))
    gen = NapsuMQ([("a", "c")], epsilon=1.0, delta=1e-6, inference="nuts", select_extra="aim", seed=1,
                  n_chains=2, num_warmup=300, num_samples=200)
    gen.fit(table, DOM)
    assert gen.diagnostics_["nuts"]["rhat_max"] < 1.05
    for syn in gen.generate(4, seed=2):
        for col in DOM.names:
            real = table[col].value_counts(normalize=True)
            syn_p = syn[col].value_counts(normalize=True).reindex(real.index, fill_value=0.0)
            assert 0.5 * np.abs(syn_p - real).sum() < 0.03, col
