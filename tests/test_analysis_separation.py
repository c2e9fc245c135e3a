"""Separation: the exact detector against a brute-force LP, and analyze's remedies on both paths."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linprog

from synthinfer.analysis import analyze
from synthinfer.analysis.separation import DEFAULT_SEPARATION, is_separated
from synthinfer.errors import ParameterError, SynthinferWarning


def _reference(X: np.ndarray, y: np.ndarray) -> bool:
    """Separated iff max Σ sᵢxᵢᵀβ over the box |β| <= 1, with sᵢxᵢᵀβ >= 0 on one-outcome rows
    and xᵢᵀβ = 0 on fractional ones, is positive (every row as given, no reduction)."""
    s = np.where(y > 0, 1.0, -1.0)
    frac = (y > 0) & (y < 1)
    A = s[~frac, None] * X[~frac]
    res = linprog(
        -A.sum(axis=0) if len(A) else np.zeros(X.shape[1]),
        A_ub=-A if len(A) else None,
        b_ub=np.zeros(len(A)) if len(A) else None,
        A_eq=X[frac] if frac.any() else None,
        b_eq=np.zeros(frac.sum()) if frac.any() else None,
        bounds=[(-1, 1)] * X.shape[1],
        method="highs",
    )
    return bool(-res.fun > 1e-7)


def test_detector_agrees_with_brute_force_on_small_designs():
    rng = np.random.default_rng(0)
    n_separated = 0
    for t in range(400):
        n, k = int(rng.integers(2, 20)), int(rng.integers(1, 5))
        if t % 2:  # dummy-coded categorical designs with an intercept, as patsy builds them
            X = np.column_stack([np.ones(n)] + [rng.integers(0, 2, n) for _ in range(k - 1)]).astype(float)
        else:
            X = rng.integers(-2, 3, (n, k)).astype(float)
        y = (rng.random(n) < rng.random()).astype(float)
        if t % 7 == 0:
            y[rng.integers(0, n)] = 0.5  # a fractional outcome constrains both ways
        expected = _reference(X, y)
        assert is_separated(X, y) == expected, (X, y)
        n_separated += expected
    assert 50 < n_separated < 350  # both answers were exercised


def test_detector_ignores_zero_weight_rows_and_rank_deficiency():
    X = np.array([[1, 0], [1, 0], [1, 1], [1, 1]], float)
    y = np.array([0, 1, 0, 0], float)
    assert is_separated(X, y)  # x2 = 1 only with y = 0
    assert not is_separated(X, np.array([0, 1, 0, 1.0]))
    assert is_separated(X, np.array([0, 1, 0, 1.0]), weights=np.array([1, 1, 1, 0.0]))
    # duplicated columns (rank deficient) without separation are not separation
    Xd = np.column_stack([X, X[:, 1]])
    assert not is_separated(Xd, np.array([0, 1, 0, 1.0]))


def _toy(rng, n=300, separate=False):
    x = rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], n, p=[0.45, 0.45, 0.1])
    y = rng.random(n) < 1 / (1 + np.exp(-(-0.3 + x + 0.5 * (g == "b"))))
    if separate:
        y[g == "c"] = False  # nobody of group c has the outcome: quasi-complete separation
    return pd.DataFrame({"y": y.astype(float), "x": x, "g": pd.Categorical(g, categories=["a", "b", "c"])})


@pytest.fixture(scope="module")
def datasets():
    rng = np.random.default_rng(52)
    return [_toy(rng, separate=(i == 3)) for i in range(8)]


def _quiet(*a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(*a, **k)


@pytest.mark.parametrize("fast", [True, False])
def test_both_paths_flag_the_separated_dataset(datasets, fast):
    res = _quiet(datasets, "y ~ x + C(g)", n=300, progress=False, fast=fast, separation="drop")
    assert [r.separated for r in res.records] == [i == 3 for i in range(8)]
    assert res.separated == [3] and res.n_separated == 1 and res.separation == "drop"
    assert res.m == 7 and res.records[3].remedy == "drop" and not res.records[3].used
    assert "1 of 8 datasets; left out" in str(res.summary())
    ols = _quiet(datasets, "y ~ x + C(g)", model="ols", n=300, progress=False, fast=fast)
    assert all(r.separated is None for r in ols.records) and ols.separated == []


def test_a_single_separated_dataset_does_not_blow_up_the_interval(datasets):
    without = _quiet(datasets[:3] + datasets[4:], "y ~ x + C(g)", n=300, progress=False)
    width0 = without.conf_int().diff(axis=1)["upper"]
    for remedy in ("penalty", "drop"):
        res = _quiet(datasets, "y ~ x + C(g)", n=300, progress=False, separation=remedy, seed=3)
        ratio = res.conf_int().diff(axis=1)["upper"] / width0
        assert ratio.max() < 50, (remedy, ratio)
    # the check can fail: kept as fitted, the separated coefficient's interval is useless
    with pytest.warns(SynthinferWarning, match="separated"):
        kept = analyze(datasets, "y ~ x + C(g)", n=300, progress=False, separation="ignore")
    assert (kept.conf_int().diff(axis=1)["upper"] / width0)["C(g)[T.c]"] > 1000


def test_default_remedy_and_penalty_refit(datasets):
    res = _quiet(datasets, "y ~ x + C(g)", n=300, progress=False, seed=3)
    assert res.separation == DEFAULT_SEPARATION
    rec = res.records[3]
    if DEFAULT_SEPARATION == "penalty":
        pen = _quiet(datasets, "y ~ x + C(g)", n=300, progress=False, separation="penalty", seed=3)
        assert pen.records[3].remedy == "penalty" and pen.m == 8
        assert abs(pen.records[3].params["C(g)[T.c]"]) < 30  # finite, unlike the MLE
        # the other datasets keep their maximum-likelihood fits
        pd.testing.assert_series_equal(pen.records[0].params, res.records[0].params)
        assert "L2 penalty 1e-5" in str(pen.summary())
    assert rec.remedy == DEFAULT_SEPARATION


def test_bad_separation_option(datasets):
    with pytest.raises(ParameterError, match="separation"):
        analyze(datasets, "y ~ x + C(g)", progress=False, separation="firth")


def test_absent_categories_are_reported(datasets):
    ds = [d for d in datasets[:4]]
    ds[1] = ds[1][ds[1].g != "b"].reset_index(drop=True)
    ds[1]["g"] = pd.Categorical(ds[1]["g"], categories=["a", "b", "c"])
    res = _quiet(ds, "y ~ x + C(g)", n=300, progress=False, separation="drop")
    assert res.absent_columns == {1: ("C(g)[T.b]",)}
    assert "Absent categories" in str(res.summary())
