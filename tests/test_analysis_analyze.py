"""analyze(): formula analysis over m synthetic datasets, records, weights, models, MIResult."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf

from synthinfer.analysis import MIResult, analyze, rubins_rules
from synthinfer.errors import AnalysisError, FitFailedWarning, ParameterError, SynthinferWarning


def _toy(rng, n=400):
    x = rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], n)
    eta = -0.5 + 1.0 * x + 0.6 * (g == "b") - 0.4 * (g == "c")
    y = rng.random(n) < 1 / (1 + np.exp(-eta))
    return pd.DataFrame(
        {
            "y": pd.Categorical(np.where(y, ">50K", "<=50K"), categories=["<=50K", ">50K"]),
            "x": x,
            "g": pd.Categorical(g, categories=["a", "b", "c"]),
            "count": rng.poisson(np.exp(0.3 + 0.5 * x)),
        }
    )


@pytest.fixture(scope="module")
def datasets():
    rng = np.random.default_rng(11)
    return [_toy(rng) for _ in range(6)]


def test_combines_the_individual_fits(datasets):
    res = analyze(datasets, "y ~ x + C(g)", n=400, progress=False)
    assert isinstance(res, MIResult) and res.m == 6
    fits = [
        smf.glm("yy ~ x + C(g)", d.assign(yy=(d.y == ">50K").astype(float)), family=sm.families.Binomial()).fit()
        for d in datasets
    ]
    q = np.array([f.params.to_numpy() for f in fits])
    v = np.array([f.bse.to_numpy() ** 2 for f in fits])
    ref = rubins_rules(q, v, n=400, n_syn=400)
    np.testing.assert_allclose(res.params.to_numpy(), ref.q_bar)
    np.testing.assert_allclose(res.bse.to_numpy(), ref.se)
    np.testing.assert_allclose(res.df.to_numpy(), ref.df)
    assert list(res.params.index) == list(fits[0].params.index)
    ci = res.conf_int(0.1)
    np.testing.assert_allclose(ci.to_numpy(), ref.conf_int(0.1))
    assert list(ci.columns) == ["lower", "upper"]
    np.testing.assert_allclose(np.diag(res.cov.to_numpy()), res.bse.to_numpy() ** 2)
    pd.testing.assert_frame_equal(res.cov_params(), res.cov)  # statsmodels' name
    frame = res.to_frame()
    assert {"estimate", "std_err", "t", "p_value", "df", "m", "fallback", "n_dropped"} <= set(frame.columns)
    text = str(res.summary())
    assert "Coef." in text and "C(g)[T.b]" in text and "P>|t|" in text


@pytest.mark.parametrize("model", ["ols", "poisson"])
def test_ols_and_poisson_match_statsmodels(datasets, model):
    res = analyze(datasets, "count ~ x", model=model, n=400, progress=False)
    fam = sm.families.Gaussian() if model == "ols" else sm.families.Poisson()
    q = np.array([smf.glm("count ~ x", d, family=fam).fit().params.to_numpy() for d in datasets])
    np.testing.assert_allclose(res.params.to_numpy(), q.mean(axis=0))
    if model == "ols":
        ols_bse = np.array([smf.ols("count ~ x", d).fit().bse.to_numpy() for d in datasets])
        np.testing.assert_allclose(res.combined.v_bar, (ols_bse**2).mean(axis=0))


def test_statsmodels_class_and_formula_function(datasets):
    data = [d.assign(yy=(d.y == ">50K").astype(int)) for d in datasets]
    a = analyze(data, "yy ~ x", model=smf.probit, n=400, progress=False)
    b = analyze(data, "yy ~ x", model=sm.Probit, n=400, progress=False)
    pd.testing.assert_series_equal(a.params, b.params)
    assert a.model == "Probit"


def test_multi_equation_and_extra_parameter_models_keep_every_parameter(datasets):
    # MNLogit's params are one column per equation; NegativeBinomial adds alpha to the design's
    # (both failed on every dataset)
    three = [d.assign(k=np.where(d["count"] > 2, 2, np.minimum(d["count"], 1))) for d in datasets]
    res = analyze(three, "k ~ x + C(g)", model=smf.mnlogit, n=400, progress=False)
    ref = smf.mnlogit("k ~ x + C(g)", three[0]).fit(disp=0)
    first = res.records[0].params
    assert list(first.index) == [f"k={j} vs 0: {nm}" for j in (1, 2) for nm in ref.params.index]
    np.testing.assert_allclose(first.to_numpy(), ref.params.to_numpy().ravel(order="F"), rtol=1e-6)
    np.testing.assert_allclose(res.records[0].cov.to_numpy(), ref.cov_params().to_numpy(), rtol=1e-5)
    assert res.wald_test("x").df_num == 2 and res.wald_test("g").df_num == 4  # a term in every equation
    assert res.wald_test("k=1 vs 0: x", null=0.5).df_num == 1  # a name with "=" is a name, not a hypothesis
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SynthinferWarning)  # alpha near 0 for Poisson counts: slow convergence
        nb = analyze(datasets, "count ~ x + C(g)", model=smf.negativebinomial, n=400, progress=False)
    assert list(nb.params.index) == ["Intercept", "C(g)[T.b]", "C(g)[T.c]", "x", "alpha"] and not nb.failed


def test_multinomial_outcome_levels_absent_from_a_dataset(datasets):
    # a category outcome: a level a dataset lacks has no equation there (absent, not junk); a
    # dataset without the reference level fails by name
    cats = ["lo", "mid", "hi"]
    three = [d.assign(k=pd.Categorical(np.array(cats)[np.minimum(d["count"], 2)], categories=cats)) for d in datasets]
    three[1] = three[1].assign(k=three[1]["k"].where(three[1]["k"] != "mid", "hi"))
    three[2] = three[2].assign(k=three[2]["k"].where(three[2]["k"] != "lo", "mid"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        res = analyze(three, "k ~ x", model="mnlogit", n=400, progress=False)
    assert [r.index for r in res.failed] == [2] and "lacks its first level 'lo'" in res.failed[0].error
    assert res.absent_columns == {1: ("k=mid: Intercept", "k=mid: x")}
    assert res.to_frame()["m"].to_dict() == {"k=mid: Intercept": 4, "k=mid: x": 4, "k=hi: Intercept": 5, "k=hi: x": 5}
    assert np.isfinite(res.params).all() and (res.bse < 1).all()  # no runaway estimate from an empty level


def test_callable_model(datasets):
    def mean_x(df):
        x = df["x"].to_numpy()
        return pd.Series({"mean_x": x.mean()}), np.array([[x.var(ddof=1) / len(x)]])

    res = analyze(datasets, model=mean_x, n=400, progress=False)
    assert list(res.params.index) == ["mean_x"]
    assert res.params["mean_x"] == pytest.approx(np.mean([d.x.mean() for d in datasets]))


def test_failed_fit_gives_a_warning_and_a_record(datasets):
    bad = [d.copy() for d in datasets]
    bad[2]["x"] = 1.0  # collinear with the intercept: the fit refuses the rank-deficient design
    with pytest.warns(FitFailedWarning, match="dataset 2"):
        res = analyze(bad, "y ~ x + C(g)", n=400, progress=False)
    assert res.m == 5 and len(res.records) == 6
    rec = res.records[2]
    assert not rec.ok and rec.params is None and "rank" in rec.error.lower()
    assert all(res.combined.m == 5)
    assert "1 fit(s) failed" in str(res.summary())


def test_all_fits_failing_is_an_error(datasets):
    with pytest.raises(AnalysisError, match="0 of 6 fits succeeded"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        analyze(datasets, "y ~ nosuchcolumn", progress=False)


@pytest.mark.parametrize("model", ["logit", "probit"])
def test_binary_models_refuse_a_numeric_outcome_outside_the_unit_interval(datasets, model):
    # before, every dataset "separated" and the estimates came back as zeros with NaN intervals
    with pytest.raises(AnalysisError, match="outcome 'count' has values outside \\[0, 1\\].*model='ols'"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        analyze(datasets, "count ~ x", model=model, progress=False)
    rng = np.random.default_rng(0)
    fractions = [d.assign(share=rng.random(len(d))) for d in datasets]  # proportions are a Binomial outcome
    assert np.isfinite(analyze(fractions, "share ~ x", model=model, n=400, progress=False).params).all()


@pytest.mark.parametrize(("formula", "model", "message"), [
    ("y ~ x", "ols", "two-category column .*'logit' or 'probit'"),
    ("g ~ x", "logit", "expands to 3 columns .*mnlogit"),
])
def test_categorical_outcomes_the_family_cannot_take_are_named(datasets, formula, model, message):
    with pytest.raises(AnalysisError, match=message), warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        analyze(datasets, formula, model=model, progress=False)


def test_a_malformed_formula_is_named_on_one_line(datasets):
    with pytest.raises(ParameterError) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        analyze(datasets, "y ~ x +", progress=False)
    assert "expected a noun" in str(err.value) and "(at '+')" in str(err.value) and "\n" not in str(err.value)


def test_missing_values_are_refused_or_dropped_as_complete_cases(datasets):
    rng = np.random.default_rng(3)
    holes = []
    for d in datasets:
        d = d.copy()
        d.loc[rng.random(len(d)) < 0.1, "x"] = np.nan
        d["unused"] = np.where(rng.random(len(d)) < 0.5, np.nan, 1.0)  # a column the formula does not name
        holes.append(d)
    with pytest.raises(AnalysisError, match=r"dataset 0 has missing values in 'x' \(\d+ rows\).*missing='drop'"):
        analyze(holes, "y ~ x + C(g)", progress=False)
    w = [np.linspace(0.5, 1.5, len(d)) for d in holes]
    res = analyze(holes, "y ~ x + C(g)", weights=w, n=400, missing="drop", progress=False)
    kept = [d["x"].notna().to_numpy() for d in holes]
    by_hand = analyze([d[k].reset_index(drop=True) for d, k in zip(holes, kept)], "y ~ x + C(g)",
                      weights=[a[k] for a, k in zip(w, kept)], n=400 * np.mean([k.mean() for k in kept]),
                      progress=False)
    pd.testing.assert_frame_equal(res.to_frame(), by_hand.to_frame())
    assert res.options["complete_share"] == pytest.approx(np.mean([k.mean() for k in kept]))
    assert "Complete cases:" in str(res.summary())
    with pytest.raises(ParameterError, match="missing must be one of"):
        analyze(holes, "y ~ x", missing="impute", progress=False)
    with pytest.raises(AnalysisError, match=r"weights\[0\] has \d+ entries"):  # already cut to the complete cases
        analyze(holes, "y ~ x + C(g)", weights=[a[k] for a, k in zip(w, kept)], missing="drop", progress=False)
    with pytest.raises(ParameterError, match="leave n_syn out"):
        analyze(holes, "y ~ x", missing="drop", n_syn=400, progress=False)

    def own_rule(data, formula):  # a callable model handles its own missing values
        fit = smf.ols("count ~ x", data.dropna(subset=["x"])).fit()
        return fit.params.to_numpy(), fit.cov_params().to_numpy()

    assert analyze(holes, "count ~ x", model=own_rule, n=400, progress=False).m == len(holes)


def test_absent_category_is_missing_not_a_failure(datasets):
    data = [d.copy() for d in datasets]
    for d in data:
        d["g"] = d["g"].cat.add_categories(["d"])  # a level no dataset has
    data[0] = data[0][data[0].g != "c"].reset_index(drop=True)  # and one dataset lacks "c"
    with pytest.warns(SynthinferWarning, match=r"C\(g\)\[T.d\]\) have a usable estimate in fewer than 2"):
        res = analyze(data, "y ~ x + C(g)", n=400, progress=False)
    assert res.m == 6
    assert res.records[0].dropped_columns == ("C(g)[T.c]", "C(g)[T.d]")
    assert res.combined.m[res.names.index("C(g)[T.c]")] == 5
    assert np.isnan(res.params["C(g)[T.d]"])
    w = res.wald_test("C(g)")  # tests the estimable levels b and c jointly
    assert w.df_num == 2 and 0 <= w.pvalue <= 1


def _sandwich(d, w, beta):
    X = np.column_stack([np.ones(len(d)), d.x.to_numpy()])
    y = (d.y == ">50K").to_numpy(float)
    p = 1 / (1 + np.exp(-X @ beta))
    A = (X * (w * p * (1 - p))[:, None]).T @ X
    S = X * (w * (y - p))[:, None]
    Ainv = np.linalg.inv(A)
    return Ainv @ (S.T @ S) @ Ainv


def test_weighted_fit_uses_the_importance_weight_sandwich(datasets):
    rng = np.random.default_rng(5)
    w = [rng.uniform(0.2, 3.0, len(d)) for d in datasets]
    res = analyze(datasets, "y ~ x", weights=w, n=400, progress=False)
    for rec, d, wi in zip(res.records, datasets, w, strict=True):
        by_hand = _sandwich(d, wi, rec.params.to_numpy())
        np.testing.assert_allclose(rec.cov.to_numpy(), by_hand, rtol=1e-6)
    # invariant to rescaling the weights; and a weight column name works too
    scaled = analyze(datasets, "y ~ x", weights=[7.0 * wi for wi in w], n=400, progress=False)
    np.testing.assert_allclose(scaled.bse.to_numpy(), res.bse.to_numpy(), rtol=1e-6)
    named = analyze([d.assign(w=wi) for d, wi in zip(datasets, w, strict=True)], "y ~ x", weights="w", n=400, progress=False)
    np.testing.assert_allclose(named.params.to_numpy(), res.params.to_numpy())


def test_bad_arguments(datasets):
    with pytest.raises(AnalysisError, match="at least 2"):
        analyze(datasets[:1], "y ~ x", progress=False)
    with pytest.raises(ParameterError, match="unknown model"):
        analyze(datasets, "y ~ x", model="tobit", progress=False)
    with pytest.raises(ParameterError, match="needs a formula"):
        analyze(datasets, model="logit", progress=False)
    with pytest.raises(AnalysisError, match="weight column"):
        analyze(datasets, "y ~ x", weights="nope", progress=False)
    with pytest.raises(AnalysisError, match="weights\\[0\\]"):
        analyze(datasets, "y ~ x", weights=[np.ones(3)] * 6, progress=False)
    with pytest.raises(ParameterError, match="penalty"):
        analyze(datasets, model=lambda d: (np.zeros(1), np.eye(1)), penalty=1e-5, progress=False)
    with pytest.raises(AnalysisError, match="list"):
        analyze(datasets[0], "y ~ x", progress=False)
    with pytest.raises(ParameterError, match="alpha"):
        analyze(datasets, "y ~ x", alpha=1.5, progress=False)
    with pytest.raises(ParameterError, match="n_jobs"):
        analyze(datasets, "y ~ x", n_jobs=0, progress=False)


@pytest.mark.parametrize("kw", [{"n": "100"}, {"n": 0}, {"n_syn": -1}, {"n": True}, {"n_syn": float("nan")}])
def test_row_counts_are_checked_before_any_fit(datasets, kw, monkeypatch):
    import synthinfer.analysis.api as api

    monkeypatch.setattr(api, "fit_fast", lambda *a, **k: pytest.fail("fitted before checking n"))
    with pytest.raises(ParameterError, match="positive number of rows"):
        analyze(datasets, "y ~ x", progress=False, **kw)


def test_usable_cores_follow_the_affinity_mask():
    import os

    from synthinfer._system import usable_cores

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no affinity masks on this platform")
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(before)})
        assert usable_cores() == 1
    finally:
        os.sched_setaffinity(0, before)
    assert usable_cores() == len(before)


def test_statsmodels_models_refuse_rank_deficient_designs_and_nan_estimates(datasets):
    data = [d.copy() for d in datasets]
    data[0] = data[0][data[0].g != "a"].reset_index(drop=True)  # the reference level is absent
    with pytest.warns(FitFailedWarning, match="dataset 0"):
        res = analyze([d.assign(yy=(d.y == ">50K").astype(int)) for d in data], "yy ~ x + C(g)",
                      model=sm.GLM, n=400, progress=False)
    assert not res.records[0].ok and "rank deficient" in res.records[0].error

    def nan_once(df):
        est = df["x"].mean() if len(df) != len(datasets[3]) or not df.equals(datasets[3]) else np.nan
        return pd.Series({"mean_x": est}), np.array([[0.01]])

    with pytest.warns(FitFailedWarning, match="dataset 3"):
        res = analyze(datasets, model=nan_once, n=400, progress=False)
    assert not res.records[3].ok and res.m == 5


def test_weighted_fits_refuse_model_based_errors_and_conf_int_follows_alpha(datasets):
    w = [np.ones(len(d)) for d in datasets]
    # every fit failing is one error (with the first fit's), no warning per failure before it
    with warnings.catch_warnings(record=True) as seen, pytest.raises(AnalysisError, match="0 of 6"):
        warnings.simplefilter("always")
        analyze(datasets, "y ~ x", weights=w, cov_type="nonrobust", n=400, progress=False)
    assert not [x for x in seen if issubclass(x.category, FitFailedWarning)]
    res = analyze(datasets, "y ~ x", n=400, alpha=0.1, progress=False)
    pd.testing.assert_frame_equal(res.conf_int(), res.conf_int(0.1))


def test_wald_test_finds_a_factor_however_it_is_named(datasets):
    res = analyze(datasets, "y ~ x + C(g, Treatment('b'))", n=400, progress=False)
    a = res.wald_test("C(g, Treatment('b'))")
    for name in ("C(g)", "g"):
        w = res.wald_test(name)
        assert (w.df_num, w.statistic) == (a.df_num, a.statistic) == (2, pytest.approx(a.statistic))
    assert res.wald_test("x").df_num == 1


def test_wald_test_takes_linear_hypotheses_as_statsmodels_writes_them(datasets):
    res = analyze(datasets, "y ~ x + C(g)", n=400, progress=False)
    names = res.names
    r = np.zeros((2, len(names)))
    r[0, names.index("x")] = 1.0
    r[1, names.index("C(g)[T.b]")], r[1, names.index("C(g)[T.c]")] = 1.0, -2.0
    by_matrix = res.wald_test(r_matrix=r, null=[0.5, 0.0])
    by_text = res.wald_test("x = 0.5, C(g)[T.b] = 2 * C(g)[T.c]")
    assert (by_text.df_num, by_text.statistic, by_text.pvalue) == (
        by_matrix.df_num, pytest.approx(by_matrix.statistic), pytest.approx(by_matrix.pvalue))
    with pytest.raises(ParameterError, match="hypothesis 'z = 0'"):
        res.wald_test("z = 0")
    with pytest.raises(ParameterError, match="leave out null"):
        res.wald_test("x = 0", null=[1.0])
    ref = analyze(datasets, "y ~ x + C(g, Treatment(reference='b'))", n=400, progress=False)
    assert ref.wald_test("C(g, Treatment(reference='b'))").df_num == 2  # a factor written with "="


def test_summary_says_when_the_fallback_needs_n():
    """Identical datasets give b = 0, so T = -v̄ < 0: with n the fallback T* is used and noted;
    without n there is no interval, and the summary says so rather than claiming T*."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200)
    df = pd.DataFrame({"x": x, "y": (rng.random(200) < 1 / (1 + np.exp(-x))).astype(int)})
    with pytest.warns(SynthinferWarning, match="pass n and n_syn"):
        without = analyze([df] * 3, "y ~ x", model="logit", progress=False)
    text = without.summary().as_text()
    assert "T<=0" in text and "needs n" in text and "T*:" not in text
    assert np.isnan(without.to_frame()["std_err"]).all()
    with_n = analyze([df] * 3, "y ~ x", model="logit", n=200, progress=False)
    text = with_n.summary().as_text()
    assert "T*:" in text and "T<=0" not in text and np.isfinite(with_n.to_frame()["std_err"]).all()


def test_text_columns_give_patsys_own_design():
    """Text columns are handed to patsy as categoricals (its per-value loop is slow on large
    tables): the design, its column names and the outcome must be patsy's own on the text, also
    where the formula computes with the text (which a categorical would refuse)."""
    import patsy

    from synthinfer.analysis.models import _design

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": rng.choice(["no", "yes"], 200), "g": rng.choice(["b", "B", "a", "Z", "é"], 200),
                       "x": rng.normal(size=200)})
    for formula in ["y ~ g + x", "y ~ C(g, Treatment('b')) + x:g", "y ~ C(g + '_' + y) + I(g > 'a') + g"]:
        y, X = _design(formula, df, binary=True)
        y_ref, X_ref = patsy.dmatrices(formula, df.astype({"y": object, "g": object}), return_type="dataframe")
        assert list(X.columns) == list(X_ref.columns)
        np.testing.assert_array_equal(X.to_numpy(), X_ref.to_numpy())
        np.testing.assert_array_equal(y.to_numpy(), y_ref.iloc[:, -1].to_numpy())  # y[yes]
