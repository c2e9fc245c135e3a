"""Section 5.2 robustness options: dropping extreme variances; L2 penalty with bootstrap."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from synthinfer.analysis import analyze, drop_extreme_variances
from synthinfer.errors import ParameterError


def test_drop_extreme_variances_known_answer():
    q = np.array([[1.0, 2.0], [1.5, 40.0], [0.5, np.nan], [2.0, 3.0]])
    v = np.array([[0.1, 0.2], [0.1, 5e3], [1e3, np.nan], [np.inf, 0.3]])
    q2, v2, dropped = drop_extreme_variances(q, v, threshold=1e3)
    assert list(dropped) == [2, 1]  # (1e3 and inf) in column 0; 5e3 in column 1; NaN not counted
    assert np.isnan(q2[2, 0]) and np.isnan(q2[3, 0]) and np.isnan(q2[1, 1])
    assert q2[0, 0] == 1.0 and v2[3, 1] == 0.3
    assert np.isnan(q[2, 1]) and q[1, 1] == 40.0  # inputs untouched
    with pytest.raises(ParameterError, match="positive"):
        drop_extreme_variances(q, v, threshold=0)


def _toy(rng, n=300, separate=False):
    x = rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], n, p=[0.45, 0.45, 0.1])
    y = rng.random(n) < 1 / (1 + np.exp(-(-0.3 + x + 0.5 * (g == "b"))))
    if separate:
        y[g == "c"] = False  # nobody of group c has the outcome: quasi-separation
    return pd.DataFrame({"y": y.astype(float), "x": x, "g": pd.Categorical(g, categories=["a", "b", "c"])})


@pytest.fixture(scope="module")
def datasets():
    rng = np.random.default_rng(52)
    return [_toy(rng, separate=(i == 3)) for i in range(8)]


def _quiet_analyze(*a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(*a, **k)


def test_dropping_removes_the_separated_estimate(datasets):
    plain = _quiet_analyze(datasets, "y ~ x + C(g)", n=300, progress=False, separation="ignore")
    assert plain.records[3].cov.loc["C(g)[T.c]", "C(g)[T.c]"] >= 1e3
    robust = _quiet_analyze(datasets, "y ~ x + C(g)", n=300, progress=False, drop_variance_above=1e3,
                            separation="ignore")
    assert robust.n_dropped.to_dict() == {"Intercept": 0, "C(g)[T.b]": 0, "C(g)[T.c]": 1, "x": 0}
    assert robust.combined.m[robust.names.index("C(g)[T.c]")] == 7
    assert robust.bse["C(g)[T.c]"] < plain.bse["C(g)[T.c]"] / 3
    assert robust.params["x"] == plain.params["x"]
    assert "Dropped var" in str(robust.summary())


def test_penalised_fit_with_bootstrap_variances(datasets):
    datasets = datasets[:4]  # dataset 3 is the separated one
    kw = dict(n=300, progress=False, penalty=1e-5, n_bootstrap=10)
    res = _quiet_analyze(datasets, "y ~ x + C(g)", seed=7, n_jobs=1, **kw)
    assert np.all(np.isfinite(res.params)) and np.all(np.isfinite(res.bse))
    # the tiny penalty leaves well-determined coefficients essentially at the MLE ...
    plain = _quiet_analyze(datasets, "y ~ x + C(g)", n=300, progress=False, separation="ignore")
    assert res.params["x"] == pytest.approx(plain.params["x"], abs=1e-3)
    # ... but keeps the separated one finite, so the combined interval is usable
    assert abs(res.records[3].params["C(g)[T.c]"]) < 30
    assert res.bse["C(g)[T.c]"] < plain.bse["C(g)[T.c]"] / 3
    # bootstrap streams are per dataset: same seed -> same answer, in worker processes too
    again = _quiet_analyze(datasets, "y ~ x + C(g)", seed=7, n_jobs=2, **kw)
    pd.testing.assert_series_equal(again.bse, res.bse)
    other = _quiet_analyze(datasets, "y ~ x + C(g)", seed=8, n_jobs=1, **kw)
    assert not np.allclose(other.bse, res.bse)
