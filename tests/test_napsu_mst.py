"""MST selection: score sensitivity on neighbouring datasets, exponential mechanism, budget."""

from __future__ import annotations

import numpy as np
import pytest

from synthinfer.data import Domain, Marginal
from synthinfer.errors import BudgetExceededError, DomainError
from synthinfer.napsu.selection import (
    SCORE_SENSITIVITY,
    exponential_mechanism,
    n_spanning_edges,
    pair_scores,
    select_mst_marginals,
)
from synthinfer.privacy import PrivacyBudget, PrivacyLedger

DOM = Domain({"a": [0, 1, 2], "b": [0, 1], "c": [0, 1, 2, 3], "d": [0, 1]})


def test_score_sensitivity_on_neighbouring_datasets():
    rng = np.random.default_rng(0)
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    worst = 0.0
    for trial in range(200):
        codes = np.column_stack([rng.integers(0, k, 60) for k in DOM.shape])
        one_way = [rng.normal(20, 10, k) for k in DOM.shape]  # any released 1-way answers
        nb = codes.copy()
        nb[rng.integers(60)] = [rng.integers(0, k) for k in DOM.shape]  # substitute one row
        diff = np.abs(pair_scores(codes, DOM, one_way, pairs) - pair_scores(nb, DOM, one_way, pairs))
        worst = max(worst, diff.max())
    assert worst <= SCORE_SENSITIVITY + 1e-9
    assert worst >= SCORE_SENSITIVITY - 1e-9  # the bound is attained: it is the sensitivity


@pytest.mark.real_noise
def test_exponential_mechanism_frequencies():
    rng = np.random.default_rng(1)
    scores = np.array([0.0, 2.0, 4.0])
    eps, sens = 1.0, 2.0
    draws = np.array([exponential_mechanism(scores, epsilon=eps, sensitivity=sens) for _ in range(6000)])
    p = np.exp(eps * scores / (2 * sens))
    p /= p.sum()
    freq = np.bincount(draws, minlength=3) / len(draws)
    assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / len(draws)))


def test_selection_spans_and_charges_its_budget():
    rng = np.random.default_rng(2)
    codes = np.column_stack([rng.integers(0, k, 300) for k in DOM.shape])
    codes[:, 2] = (codes[:, 0] + codes[:, 1]) % 4  # strong a,b -> c dependence
    fixed = [Marginal(("a", "b"))]
    assert n_spanning_edges(DOM, fixed) == 2
    led = PrivacyLedger((1.0, 1e-6))
    chosen = select_mst_marginals(codes, DOM, fixed, n_extra=2, budget=PrivacyBudget(0.5, 5e-7), ledger=led)
    assert len(chosen) == 2 and all(len(m.columns) == 2 for m in chosen)
    assert led.spent == pytest.approx((0.5, 5e-7))
    assert len(led.charges) == 3
    with pytest.raises(DomainError, match="between 1 and 2"):
        select_mst_marginals(codes, DOM, fixed, n_extra=3, budget=PrivacyBudget(0.1, 1e-7), ledger=led)
    with pytest.raises(BudgetExceededError):
        select_mst_marginals(codes, DOM, fixed, n_extra=1, budget=PrivacyBudget(0.6, 1e-7), ledger=led)
    assert led.spent == pytest.approx((0.5, 5e-7))
