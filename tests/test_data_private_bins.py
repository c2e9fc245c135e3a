"""Private bin edges (DP quantiles through OpenDP) and numbers drawn back inside bins."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from synthinfer.data import Binning, Domain, PrivateBins, decode, encode, resolve_private_bins
from synthinfer.data.private_bins import candidate_edges, check_private_bins, planned_domain
from synthinfer.errors import (
    BudgetExceededError,
    DomainError,
    MissingValueError,
    OutOfDomainError,
    ParameterError,
)
from synthinfer.privacy import PrivacyLedger, samplers

pytestmark = pytest.mark.real_noise  # the private edges through OpenDP's own quantile sampler

AGE = {"name": "age", "bounds": [17, 90], "bins": "private:5", "integer": True}
INCOME = {"name": "income", "categories": ["<=50K", ">50K"]}


def _table(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(17 + rng.gamma(4.0, 7.0, n)), 17, 90)
    return pd.DataFrame({"age": age, "income": rng.choice(["<=50K", ">50K"], n)})


# -- the Domain ----------------------------------------------------------------------------------
def test_private_bins_round_trip_through_json_and_stay_unresolved():
    dom = Domain.from_dict({"columns": [AGE, INCOME]})
    col = dom["age"]
    assert isinstance(col, PrivateBins) and (col.bins, col.integer, col.lower, col.upper) == (5, True, 17.0, 90.0)
    assert Domain.from_json(dom.to_json())["age"] == col
    assert not dom.is_finite
    with pytest.raises(DomainError, match="asks for 5 private bins"):
        encode(_table(), dom)


def test_resolved_edges_are_recorded_as_private_in_the_domain_json():
    dom = resolve_private_bins(_table(), Domain.from_dict({"columns": [AGE, INCOME]}), epsilon=5.0,
                               ledger=PrivacyLedger((5.0, 0.0)))
    b = dom["age"].binning
    assert b.private and b.integer and (b.lower, b.upper) == (17.0, 90.0)
    d = dom.to_dict()["columns"][0]
    assert d["private_edges"] is True and d["integer"] is True
    assert Domain.from_dict(dom.to_dict())["age"].binning == b


# -- the mechanism: calibration, neighbours, budget first ----------------------------------------
@pytest.mark.parametrize("epsilon", [0.01, 0.5, 3.0])
def test_quantile_scale_gives_exactly_epsilon_under_substitution(epsilon):
    """A substitution is symmetric distance 2 on vectors of known size: OpenDP's privacy map
    there must equal the epsilon charged (a wrong distance or scale constant fails)."""
    import opendp.prelude as dp

    samplers._dp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=100), dp.symmetric_distance()
    m = dp.m.make_private_quantile(*space, dp.max_divergence(), candidates=[1.0, 2.0, 3.0], alpha=0.3,
                                   scale=samplers.quantile_scale(epsilon))
    assert float(m.map(2)) == pytest.approx(epsilon, rel=1e-9)
    assert float(m.map(1)) < epsilon  # an add/remove bound would understate a substitution's loss


def test_a_substitution_moves_the_quantile_scores_by_at_most_the_declared_sensitivity():
    import opendp.prelude as dp

    samplers._dp()
    rng = np.random.default_rng(1)
    cands = np.linspace(0, 10, 41).tolist()
    n = 200
    t = dp.t.make_quantile_score_candidates(dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n),
                                            dp.symmetric_distance(), candidates=cands, alpha=0.3)
    moved = 0
    for _ in range(50):
        x = rng.uniform(0, 10, n)
        y = x.copy()
        y[rng.integers(n)] = rng.uniform(0, 10)  # substitute one row
        diff = max(abs(int(a) - int(b)) for a, b in zip(t(x.tolist()), t(y.tolist())))  # exact integers
        assert diff <= int(t.map(2))
        moved += diff > 0
    assert moved > 10


def test_neighbouring_tables_change_the_edge_distribution_by_at_most_e_epsilon():
    """Empirical check of one quantile through OpenDP on two neighbouring tables: every
    output's probability ratio stays within e^epsilon (Clopper-Pearson, 99.9% per bound)."""
    epsilon, draws = 1.0, 2500
    x = np.array([1.0, 1.0, 9.0, 9.0])
    y = np.array([1.0, 9.0, 9.0, 9.0])  # one row substituted
    cands = np.array([0.5, 5.0, 9.5])

    def freq(v):
        out = [samplers.private_quantile(v, candidates=cands, alpha=0.5, epsilon=epsilon) for _ in range(draws)]
        return np.array([np.sum(np.asarray(out) == c) for c in cands])

    fx, fy = freq(x), freq(y)
    for a, b in ((fx, fy), (fy, fx)):
        lo = stats.beta.ppf(0.0005, a, draws - a + 1)
        hi = stats.beta.ppf(0.9995, b + 1, draws - b)
        assert np.all(lo <= math.exp(epsilon) * hi)


def test_the_ledger_is_charged_before_any_edge_is_drawn(monkeypatch):
    dom = Domain.from_dict({"columns": [AGE, INCOME]})

    def no_draw(*a, **k):
        raise AssertionError("drew an edge without the budget")

    monkeypatch.setattr(samplers, "private_quantile", no_draw)
    with pytest.raises(BudgetExceededError):
        resolve_private_bins(_table(), dom, epsilon=2.0, ledger=PrivacyLedger((1.0, 0.0)))


def test_the_edges_come_from_the_public_candidates_and_bounds_only():
    ledger = PrivacyLedger((2.0, 0.0))
    dom = Domain.from_dict({"columns": [AGE, {"name": "x", "bounds": [0, 1], "bins": "private:4"}, INCOME]})
    df = _table().assign(x=np.random.default_rng(2).beta(2, 5, 4000))
    out = resolve_private_bins(df, dom, epsilon=2.0, ledger=ledger)
    for name in ("age", "x"):
        e = np.asarray(out[name].binning.edges)
        assert set(e[1:-1]) <= set(candidate_edges(dom[name])) and (e[0], e[-1]) == (dom[name].lower, dom[name].upper)
    charges = {c.name: c for c in ledger.charges}
    assert set(charges) == {"private bin edges: age", "private bin edges: x"}
    assert charges["private bin edges: age"].epsilon == pytest.approx(1.0) and charges["private bin edges: age"].delta == 0
    assert charges["private bin edges: x"].details["quantiles"] == 3


def test_private_edges_are_near_the_quantiles_at_a_generous_budget():
    df = _table(20000)
    out = resolve_private_bins(df, Domain.from_dict({"columns": [AGE, INCOME]}), epsilon=20.0,
                               ledger=PrivacyLedger((20.0, 0.0)))
    codes = encode(df, out)[:, 0]
    shares = np.bincount(codes, minlength=out["age"].size) / len(df)
    assert np.all(np.abs(shares - 0.2) < 0.05)  # equal mass, up to the integer ties of age


# -- bad input: clear errors before any spend ----------------------------------------------------
@pytest.mark.parametrize("change, error, message", [
    (lambda d: d.assign(age=d["age"].where(d.index > 2, 150.0)), OutOfDomainError, r"'age': 3 row\(s\) lie outside"),
    (lambda d: d.assign(age=d["age"].where(d.index > 0, np.nan)), MissingValueError, "1 missing values"),
    (lambda d: d.assign(age=d["age"].where(d.index > 0, 30.5)), OutOfDomainError, "whole numbers only"),
    (lambda d: d.assign(age=d["age"].astype(object).where(d.index > 0, "old")), DomainError, "not numbers"),
])
def test_bad_values_are_refused_without_showing_them(change, error, message):
    ledger = PrivacyLedger((1.0, 0.0))
    with pytest.raises(error, match=message) as info:
        resolve_private_bins(change(_table()), Domain.from_dict({"columns": [AGE, INCOME]}), epsilon=1.0,
                             ledger=ledger)
    assert not any(v in str(info.value) for v in ("150", "30.5", "'old'"))
    assert ledger.charges == ()


def test_bins_too_fine_for_the_budget_are_refused_by_name():
    dom = Domain.from_dict({"columns": [{**AGE, "bins": "private:40"}, INCOME]})
    with pytest.raises(ParameterError, match=r"'age': 40 private bins are too fine for the budget"):
        check_private_bins(_table(2000), dom, 0.1)


def test_planned_domain_has_the_requested_shape():
    dom = planned_domain(Domain.from_dict({"columns": [AGE, INCOME]}))
    assert dom.shape == (5, 2) and not dom["age"].binning.private


# -- numbers back inside bins --------------------------------------------------------------------
def test_binning_sample_stays_inside_bins_and_is_uniform():
    b = Binning((0.0, 1.0, 3.0, 10.0))
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, 30000)
    x = b.sample(codes, rng)
    assert np.array_equal(b.codes(x), codes)
    for k in range(3):
        u = (x[codes == k] - b.edges[k]) / (b.edges[k + 1] - b.edges[k])
        assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_integer_bins_give_every_whole_number_in_the_bin_equally():
    b = Binning((17.0, 20.5, 30.0, 33.0), integer=True)
    rng = np.random.default_rng(0)
    x = b.sample(np.zeros(40000, int), rng)
    assert set(np.unique(x)) == {17.0, 18.0, 19.0, 20.0}
    assert stats.chisquare(np.unique(x, return_counts=True)[1]).pvalue > 1e-3
    assert set(np.unique(b.sample(np.full(1000, 2), rng))) == {30.0, 31.0, 32.0, 33.0}  # last bin closed


def test_decode_numbers_midpoints_and_labels():
    dom = Domain.from_dict({"columns": [{"name": "age", "bounds": [17, 90], "bins": 4, "integer": True},
                                        {"name": "h", "bounds": [0, 100], "bins": 5}, INCOME]})
    codes = np.array([[0, 0, 0], [3, 4, 1], [1, 2, 0]])
    rng = np.random.default_rng(0)
    out = decode(codes, dom, midpoints=["h"], numbers=["age"], rng=rng)
    assert out["age"].dtype == np.int64 and list(dom["age"].binning.codes(out["age"])) == [0, 3, 1]
    assert list(out["h"]) == [10.0, 90.0, 50.0]
    assert str(decode(codes, dom)["age"].dtype) == "category"
    with pytest.raises(ParameterError, match="midpoints and as numbers"):
        decode(codes, dom, midpoints=["age"], numbers=True, rng=rng)
    with pytest.raises(ParameterError, match="needs rng"):
        decode(codes, dom, numbers=["age"])
    with pytest.raises(DomainError, match=r"numbers: columns \['income'\]"):
        decode(codes, dom, numbers=["income"], rng=rng)
