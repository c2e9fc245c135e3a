"""The batched GLM fit of analyze(): equal to statsmodels, and statsmodels wherever it is not routine."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from synthinfer.analysis import analyze
from synthinfer.analysis import parallel as par
from synthinfer.analysis.fastglm import fast_path_applies, fit_fast
from synthinfer.analysis.models import FitOptions, fit_dataset, resolve_model
from synthinfer.errors import FitFailedWarning

FORMULA = {"logit": "y ~ x + z + C(g)", "probit": "y ~ x + z + C(g)", "poisson": "count ~ x + C(g)",
           "ols": "v ~ x + z + C(g)"}


def _data(rng, n, discrete=False):
    # discrete: few distinct rows (as in synthetic categorical tables), so the design is built
    # on the distinct rows; otherwise on every row
    x = rng.integers(-2, 3, n).astype(float) if discrete else rng.normal(size=n)
    z = rng.choice([25.0, 40.0, 55.0, 70.0], n) if discrete else rng.uniform(20, 80, n)  # unscaled, as age is
    g = rng.choice(["a", "b", "c", "d"], n, p=[0.4, 0.3, 0.2, 0.1])
    eta = -1.5 + 0.8 * x + 0.02 * z + 0.5 * (g == "b") - 0.4 * (g == "c") + 0.9 * (g == "d")
    y = rng.random(n) < 1 / (1 + np.exp(-eta))
    return pd.DataFrame({
        "y": pd.Categorical(np.where(y, "yes", "no"), categories=["no", "yes"]),
        "x": x,
        "z": z,
        "g": pd.Categorical(g, categories=["a", "b", "c", "d"]),
        "count": rng.poisson(np.exp(0.2 + 0.4 * x + 0.3 * (g == "b"))),
        "v": np.round(eta + rng.standard_t(5, n)) if discrete else eta + rng.standard_t(5, n),
    })


def _statsmodels(datasets, model, formula, weights=None, cov_type=None):
    spec = resolve_model(model)
    opts = FitOptions(formula=formula, cov_type=cov_type)
    return [fit_dataset(i, d, spec, opts, None if weights is None else weights[i], None)
            for i, d in enumerate(datasets)]


def _assert_equal(fast, ref):
    assert all(r is not None for r in fast)
    for a, b in zip(fast, ref, strict=True):
        assert b.ok and not b.warnings and list(a.params.index) == list(b.params.index)
        np.testing.assert_allclose(a.params.to_numpy(), b.params.to_numpy(), rtol=1e-8, atol=0)
        np.testing.assert_allclose(np.sqrt(np.diag(a.cov)), np.sqrt(np.diag(b.cov)), rtol=1e-8, atol=0)
        np.testing.assert_allclose(a.cov.to_numpy(), b.cov.to_numpy(), rtol=1e-7, atol=1e-12 * np.abs(b.cov.to_numpy()).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("model", ["logit", "probit", "poisson", "ols"])
@pytest.mark.parametrize("how", ["plain", "HC0", "weighted"])
@pytest.mark.parametrize("discrete", [False, True])
def test_equal_to_statsmodels(model, seed, how, discrete):
    rng = np.random.default_rng(seed)
    datasets = [_data(rng, (300 + 100 * seed) * (6 if discrete else 1), discrete) for _ in range(4)]
    weights = [rng.uniform(0.2, 3.0, len(d)) for d in datasets] if how == "weighted" else None
    cov_type = "HC0" if how == "HC0" else None
    spec, opts = resolve_model(model), FitOptions(formula=FORMULA[model], cov_type=cov_type)
    assert fast_path_applies(spec, opts)
    fast = fit_fast(datasets, spec, opts, weights)
    _assert_equal(fast, _statsmodels(datasets, model, FORMULA[model], weights, cov_type))


def test_analyze_uses_it_and_equals_the_statsmodels_path():
    rng = np.random.default_rng(3)
    datasets = [_data(rng, 500) for _ in range(5)] + [_data(rng, 420)]  # two row counts
    a = analyze(datasets, FORMULA["logit"], n=500, progress=False)
    b = analyze(datasets, FORMULA["logit"], n=500, fast=False, progress=False)
    np.testing.assert_allclose(a.params.to_numpy(), b.params.to_numpy(), rtol=1e-8)
    np.testing.assert_allclose(a.bse.to_numpy(), b.bse.to_numpy(), rtol=1e-8)
    assert [r.nobs for r in a.records] == [r.nobs for r in b.records]


def test_the_formula_is_parsed_once_per_level_signature(monkeypatch):
    import patsy

    calls = []
    real = patsy.dmatrices
    monkeypatch.setattr(patsy, "dmatrices", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(4)
    datasets = [_data(rng, 200) for _ in range(6)]
    spec, opts = resolve_model("logit"), FitOptions(formula=FORMULA["logit"])
    assert all(r is not None for r in fit_fast(datasets, spec, opts, None))
    assert len(calls) == 1
    # the design is built on the distinct rows of discrete data, on every row otherwise
    from synthinfer.analysis.fastglm import _designs

    disc = [_data(rng, 2000, discrete=True) for _ in range(2)]
    for model in FORMULA:
        des = _designs(FORMULA[model], disc + datasets[:1], binary=model in ("logit", "probit"))
        assert des[0].X.shape[0] < 1000 and des[1].X.shape[0] < 1000 and des[2].X.shape[0] == 200
        np.testing.assert_array_equal(des[0].X[des[0].codes], patsy.dmatrix(FORMULA[model].split("~")[1], disc[0]))
    # a string factor takes its levels from the data: a dataset lacking a level gets its own
    # design (so its reference level is the one statsmodels would pick), not the first one's
    calls.clear()
    strs = [d.assign(g=d.g.astype(str)) for d in datasets]
    strs[2] = strs[2][strs[2].g != "a"].reset_index(drop=True)
    fast = fit_fast(strs, spec, opts, None)
    assert len(calls) == 2
    assert "C(g)[T.b]" not in fast[2].params.index
    _assert_equal(fast, _statsmodels(strs, "logit", FORMULA["logit"]))


@pytest.mark.filterwarnings("ignore::synthinfer.errors.SynthinferWarning")
def test_unroutine_datasets_go_to_statsmodels_with_its_warnings_and_records():
    rng = np.random.default_rng(5)
    datasets = [_data(rng, 300) for _ in range(5)]
    sep = datasets[1].copy()
    sep["y"] = pd.Categorical(np.where(sep.x > 0, "yes", "no"), categories=["no", "yes"])  # separated
    datasets[1] = sep
    datasets[2] = datasets[2][datasets[2].g != "d"].reset_index(drop=True)  # an absent category
    three = datasets[3].y.cat.add_categories("maybe")
    three[:5] = "maybe"  # an outcome of three categories: the design fails, and statsmodels' path says why
    datasets[3] = datasets[3].assign(y=three)
    spec, opts = resolve_model("logit"), FitOptions(formula=FORMULA["logit"])
    fast = fit_fast(datasets, spec, opts, None)
    assert [r is None for r in fast] == [False, True, True, True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(datasets, FORMULA["logit"], n=300, progress=False)
        b = analyze(datasets, FORMULA["logit"], n=300, fast=False, progress=False)
    for ra, rb in zip(a.records, b.records, strict=True):
        assert (ra.ok, ra.error, ra.warnings, ra.dropped_columns) == (rb.ok, rb.error, rb.warnings, rb.dropped_columns)
    assert a.records[1].warnings and a.records[2].dropped_columns == ("C(g)[T.d]",) and not a.records[3].ok
    np.testing.assert_allclose(a.params.to_numpy(), b.params.to_numpy(), rtol=1e-8)
    with pytest.warns(FitFailedWarning, match="dataset 3"):
        analyze(datasets, FORMULA["logit"], n=300, progress=False)


def test_options_it_does_not_reproduce_go_to_statsmodels():
    spec = resolve_model("logit")
    assert not fast_path_applies(spec, FitOptions(formula="y ~ x", cov_type="HC1"))
    assert not fast_path_applies(spec, FitOptions(formula="y ~ x", penalty=1e-5))
    assert not fast_path_applies(spec, FitOptions(formula="y ~ x", fit_kwargs={"maxiter": 5}))
    assert not fast_path_applies(resolve_model(lambda d: None), FitOptions(formula="y ~ x"))
    # weighted with model-based errors: refused by the statsmodels path, with its message
    rng = np.random.default_rng(6)
    datasets = [_data(rng, 200) for _ in range(2)]
    w = [np.ones(200)] * 2
    assert fit_fast(datasets, spec, FitOptions(formula="y ~ x", cov_type="nonrobust"), w) == [None, None]


def test_n_jobs_from_the_time_of_a_fit(monkeypatch):
    monkeypatch.setattr(par, "free_cores", lambda: 4.0)
    assert par.choose_n_jobs(None, 99, 0.01) == 1  # 1 s of fits: starting workers costs more
    assert par.choose_n_jobs(None, 99, 2.0) == 4
    assert par.choose_n_jobs(None, 3, 2.0) == 1  # 6 s: workers would save too little
    assert par.choose_n_jobs(None, 99, None) == 1
    assert par.choose_n_jobs(2, 99) == 2 and par.choose_n_jobs(5, 3) == 3
    monkeypatch.setattr(par, "free_cores", lambda: 1.3)  # a loaded machine
    assert par.choose_n_jobs(None, 99, 2.0) == 1


def test_free_cores_count_the_load_of_others(monkeypatch):
    import os

    monkeypatch.setattr(par, "usable_cores", lambda: 8)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 0.0, 0.0))
    assert par.free_cores() == 6.0
    monkeypatch.setattr(os, "getloadavg", lambda: (20.0, 0.0, 0.0))
    assert par.free_cores() == 1.0


def test_stateful_transforms_take_their_state_from_each_dataset():
    # center() memorises the mean of the data it sees: statsmodels centres each dataset on its
    # own mean, so the batched path must not reuse the first dataset's (nor that of distinct rows)
    rng = np.random.default_rng(7)
    datasets = [_data(rng, 3000, discrete=True) for _ in range(3)]
    formula = "y ~ center(z) + C(g)"
    fast = fit_fast(datasets, resolve_model("logit"), FitOptions(formula=formula), None)
    _assert_equal(fast, _statsmodels(datasets, "logit", formula))


def test_whole_column_expressions_see_every_row():
    # x.mean(), .median() or pd.qcut summarise the column they are given: on the distinct rows
    # (few values, each once) they differ from statsmodels' on every row
    from synthinfer.analysis.fastglm import _rowwise

    rng = np.random.default_rng(8)
    datasets = [_data(rng, 3000, discrete=True) for _ in range(2)]
    for formula in ["y ~ I(z - z.mean()) + C(g)", "y ~ I(z > z.median())", "y ~ pd.qcut(z, 3)"]:
        assert not _rowwise(formula)
        fast = fit_fast(datasets, resolve_model("logit"), FitOptions(formula=formula), None)
        _assert_equal(fast, _statsmodels(datasets, "logit", formula))
    assert _rowwise("y ~ np.log(z + 1) + I(z ** 2) + C(g, Treatment('b')) + z:g")


@pytest.mark.parametrize("model", ["logit", "ols", "poisson"])
def test_one_singular_dataset_leaves_the_others_on_the_batched_fit(model):
    # a stacked solve raises for the whole stack when one Gram matrix is singular: every
    # dataset went to statsmodels, one fit at a time
    rng = np.random.default_rng(5)
    datasets = [_data(rng, 300) for _ in range(5)]
    datasets[3] = datasets[3].assign(x=1.0)  # collinear with the intercept
    fast = fit_fast(datasets, resolve_model(model), FitOptions(formula=FORMULA[model]), None)
    assert [r is None for r in fast] == [False, False, False, True, False]
    rest = [0, 1, 2, 4]
    _assert_equal([fast[i] for i in rest], _statsmodels([datasets[i] for i in rest], model, FORMULA[model]))
