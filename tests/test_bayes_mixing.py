"""Mixing per-dataset posteriors (Räisä, Jälkö & Honkela 2025), against the theory of a
conjugate model and on a logistic model sampled by NUTS."""

import warnings

import numpy as np
import pandas as pd
import pytest

from synthinfer.bayes import mix_posteriors
from synthinfer.errors import AnalysisError, ParameterError, SynthinferError, SynthinferWarning


def _normal_release(n: int, n_syn: int, m: int, seed: int = 0):
    """Real y ~ N(0.3, 1) (n rows); each synthetic dataset from the posterior predictive of the
    normal-mean model with the variance known: mu_i ~ N(ybar, 1/n), z ~ N(mu_i, 1)."""
    rng = np.random.default_rng(seed)
    y = rng.normal(0.3, 1.0, n)
    mus = rng.normal(y.mean(), 1 / np.sqrt(n), m)
    return y, [pd.DataFrame({"y": rng.normal(mu, 1.0, n_syn)}) for mu in mus]


@pytest.mark.parametrize("ratio", [20, 1])
def test_mixture_recovers_the_real_posterior_as_the_theory_says(ratio):
    # the mixture's variance is 1/n (the real posterior) + 1/n_syn (where each component sits)
    # + 1/n_syn (each component's own width)
    n, m = 200, 400
    y, datasets = _normal_release(n, ratio * n, m)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        idata = mix_posteriors(datasets, "y ~ 1", "ols", n=n, seed=1)
    assert any("overstate" in str(x.message) for x in w) == (ratio < 5)
    mu = idata.posterior["coef"].sel(term="Intercept").values.ravel()
    assert idata.posterior.attrs["sampler"] == "exact" and idata.posterior.attrs["m"] == m
    assert mu.size == m * 2 * 500
    # mean: within 4 sd of the m-component average around ybar (sd sqrt(1/n/m))
    assert abs(mu.mean() - y.mean()) < 4 * np.sqrt((1 / n + 1 / (ratio * n)) / m)
    # variance ratio to the real posterior's 1/n: 1 + 2/ratio; the estimate's sd is ~sqrt(2/m) relative
    assert mu.var() * n == pytest.approx(1 + 2 / ratio, rel=4 * np.sqrt(2 / m))
    sigma = idata.posterior["sigma"].values.ravel()
    assert np.median(sigma) == pytest.approx(1.0, abs=0.05)


def test_logit_mixture_by_nuts_names_the_coefficients_and_checks_convergence():
    rng = np.random.default_rng(3)
    m, n_syn = 10, 1500
    datasets = []
    for _ in range(m):
        x = rng.normal(size=n_syn)
        g = rng.choice(["a", "b", "c"], size=n_syn)
        eta = -0.5 + 1.0 * x + np.where(g == "b", 0.8, 0.0)
        datasets.append(pd.DataFrame({"y": rng.random(n_syn) < 1 / (1 + np.exp(-eta)), "x": x, "g": g}))
    datasets[-1] = datasets[-1][datasets[-1]["g"] != "c"].head(n_syn)  # a level absent from one dataset
    datasets[-1] = pd.concat([datasets[-1], datasets[0].iloc[: n_syn - len(datasets[-1])]], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no convergence or size warning: n_syn = 5 n, m = 10
        idata = mix_posteriors([d.astype({"y": float}) for d in datasets], "y ~ x + C(g)", n=300, seed=0)
    post = idata.posterior
    assert list(post["coef"].coords["term"].values) == ["Intercept", "C(g)[T.b]", "C(g)[T.c]", "x"]
    assert post.sizes["chain"] == m * 2 and post.attrs["datasets_not_converged"] == 0
    est = post["coef"].mean(("chain", "draw")).values
    np.testing.assert_allclose(est[[0, 1, 3]], [-0.5, 0.8, 1.0], atol=0.15)


@pytest.mark.parametrize("model", ["probit", "poisson"])
def test_probit_and_poisson_mixtures_recover_their_coefficients(model):
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    m, n_syn, beta = 10, 600, (-0.3, 0.6)
    datasets = []
    for _ in range(m):
        x = rng.normal(size=n_syn)
        eta = beta[0] + beta[1] * x
        y = (rng.random(n_syn) < norm.cdf(eta)) if model == "probit" else rng.poisson(np.exp(eta))
        datasets.append(pd.DataFrame({"y": y.astype(float), "x": x}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        idata = mix_posteriors(datasets, "y ~ x", model, n=120, num_warmup=150, num_samples=200, seed=0)
    post = idata.posterior
    assert post.attrs["datasets_not_converged"] == 0
    est = post["coef"].mean(("chain", "draw")).values
    # each component's sd is ~0.04-0.06 at n_syn = 600, so the mixture's mean is ~0.02 from beta
    np.testing.assert_allclose(est, beta, atol=0.1)


def test_poisson_refuses_a_non_count_outcome():
    d = pd.DataFrame({"y": [0.5, 1.0, 2.0] * 100, "x": np.arange(300.0)})
    with pytest.raises(SynthinferError, match="counts"):
        mix_posteriors([d] * 10, "y ~ x", "poisson", n=60, seed=0)


def test_logit_refuses_a_numeric_outcome():
    d = pd.DataFrame({"y": [0.0, 1.0, 2.0] * 100, "x": np.arange(300.0)})
    with pytest.raises(SynthinferError, match="outside \\[0, 1\\]"):
        mix_posteriors([d] * 10, "y ~ x", "logit", n=60, seed=0)


def test_an_analysts_own_logdensity_mixes_the_exact_component_posteriors():
    # y ~ N(mu, 1), prior mu ~ N(0, 10^2): each component is N(zbar_i / (1 + 1/(100 n_syn)), .),
    # so the mixture's mean and variance follow from the datasets themselves
    import jax.numpy as jnp
    import jax.scipy.stats as jst

    from synthinfer.bayes import mix_logdensity_posteriors

    n, n_syn, m = 200, 1000, 20
    _, datasets = _normal_release(n, n_syn, m, seed=4)

    def logdensity(p, d):
        return jst.norm.logpdf(p["mu"], 0.0, 10.0) + jnp.sum(jst.norm.logpdf(d["y"], p["mu"], 1.0))

    idata = mix_logdensity_posteriors(datasets, logdensity, {"mu": 0.0}, n=n, seed=0)
    mu = idata.posterior["mu"].values.ravel()
    prec = n_syn + 1 / 100
    means = np.array([d["y"].sum() / prec for d in datasets])
    assert mu.mean() == pytest.approx(means.mean(), abs=4 * np.sqrt(1 / prec / 400 / m))
    assert mu.var() == pytest.approx(means.var() + 1 / prec, rel=0.1)
    assert idata.posterior.attrs["sampler"] == "nuts" and idata.posterior.sizes["chain"] == 2 * m
    with pytest.raises(AnalysisError, match="logdensity"):
        mix_logdensity_posteriors(datasets, lambda p, d: d["nope"], {"mu": 0.0}, n=n)


@pytest.mark.filterwarnings("ignore:the mixture's 95% intervals")  # 10 datasets of 5 n rows: about 0.93 expected
def test_a_numpyro_model_mixes_through_its_potential_energy():
    # the wrapping documented in mix_logdensity_posteriors: NumPyro's unconstrained space,
    # Jacobians added by potential_energy; the normal-mean components as in the test above
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist
    from numpyro.infer.util import potential_energy

    from synthinfer.bayes import mix_logdensity_posteriors

    def model(d):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
        numpyro.sample("y", dist.Normal(mu, sigma), obs=d["y"])

    n, n_syn, m = 200, 1000, 10
    _, datasets = _normal_release(n, n_syn, m, seed=6)
    idata = mix_logdensity_posteriors(datasets, lambda p, d: -potential_energy(model, (d,), {}, p),
                                      {"mu": 0.0, "sigma": 0.0}, n=n, seed=0)
    mu = idata.posterior["mu"].values.ravel()
    sigma = np.exp(idata.posterior["sigma"].values.ravel())  # HalfNormal's unconstrained space is log
    means = np.array([d["y"].mean() for d in datasets])
    assert mu.mean() == pytest.approx(means.mean(), abs=4 * np.sqrt(1 / n_syn / m))
    assert mu.var() == pytest.approx(means.var() + 1 / n_syn, rel=0.25)
    assert np.median(sigma) == pytest.approx(1.0, abs=0.05)


def test_bad_input_is_refused_with_the_parameter_named():
    d = [pd.DataFrame({"y": [0.0, 1.0, 1.0], "x": [1.0, 2.0, 3.0]})] * 2
    with pytest.raises(ParameterError, match="model"):
        mix_posteriors(d, "y ~ x", "gamma", n=1)
    with pytest.raises(ParameterError, match="formula"):
        mix_posteriors(d, "y x", n=1)
    with pytest.raises(ParameterError, match="n "):
        mix_posteriors(d, "y ~ x", n=0)
    with pytest.raises(ParameterError, match="common"):
        mix_posteriors([d[0], d[0].head(2)], "y ~ x", n=1)
    with pytest.raises(AnalysisError, match="formula"):
        with pytest.warns(SynthinferWarning):
            mix_posteriors(d, "y ~ nope", n=1)


def _release(path, n=100, n_syn=500, m=10):
    from synthinfer.privacy import PrivacyLedger
    from synthinfer.release import ReleaseRecord, write_release

    rng = np.random.default_rng(5)

    def table():
        x = rng.choice(["lo", "hi"], n_syn)
        y = np.where(rng.random(n_syn) < np.where(x == "hi", 0.7, 0.3), "yes", "no")
        return pd.DataFrame({"y": pd.Categorical(y, ["no", "yes"]), "x": pd.Categorical(x, ["lo", "hi"])})

    ledger = PrivacyLedger((1.0, 1e-6))
    ledger.spend("marginals", 1.0, 1e-6, mechanism="gaussian")
    record = ReleaseRecord(mechanism="toy", settings={}, ledger=ledger, n=n, seed_fixed=True, marginals=[["x"]])
    return write_release(path, [table() for _ in range(m)], record=record, skip_private_data_check=True)


def test_release_mixes_with_its_n_and_warns_when_unsupported(tmp_path):
    from synthinfer.errors import UnsupportedAnalysisWarning
    from synthinfer.release import open_release

    n, n_syn, m = 100, 500, 10
    rel = open_release(_release(tmp_path / "r", n, n_syn, m))
    with pytest.warns(UnsupportedAnalysisWarning, match=r"\(x, y\)"):
        idata = rel.mix_posteriors("y ~ C(x)", num_samples=300, seed=0)
    post = idata.posterior
    assert post.attrs["n"] == n and post.attrs["n_syn"] == n_syn and post.sizes["chain"] == 2 * m
    # log-odds of "yes": -0.85 at lo, +1.69 higher at hi; the mixture is wide (n = 100)
    est = post["coef"].mean(("chain", "draw")).values
    np.testing.assert_allclose(est, [np.log(0.3 / 0.7), np.log(0.7 / 0.3) - np.log(0.3 / 0.7)], atol=0.3)


def test_cli_analyze_bayes(tmp_path):
    import json

    from typer.testing import CliRunner

    from synthinfer.cli import app

    path = _release(tmp_path / "r")
    out = CliRunner().invoke(app, ["analyze", str(path), "-f", "y ~ C(x)", "--bayes", "--seed", "0", "--json"])
    assert out.exit_code == 0, out.output
    res = json.loads(out.output[out.output.index("{"):])
    assert res["m"] == 10 and res["draws"] == 10 * 2 * 500 and res["supports"]["supported"] is False
    assert 0 < res["tail_coverage_95"] <= 1
    (a, b) = res["coefficients"]
    assert a["name"] == "Intercept" and a["lower"] < np.log(0.3 / 0.7) < a["upper"]
    bad = CliRunner().invoke(app, ["analyze", str(path), "-f", "y ~ C(x)", "--bayes", "-m", "poisson"])
    assert bad.exit_code == 2 and "error:" in bad.output and "model" in bad.output


def test_distinct_rows_with_counts_are_the_same_posterior():
    """A dataset collapsed to its distinct rows, each weighted by its count: the exact linear
    model's draws equal the full data's to rounding (same sufficient statistics, same random
    numbers); the logit's NUTS draws agree within Monte Carlo error; the counts are checked."""
    from synthinfer.bayes import GeneralisedPosterior, LinearRegression, LogisticRegression
    from synthinfer.bayes.mixing import distinct_rows

    rng = np.random.default_rng(5)
    X = rng.integers(0, 3, size=(2000, 2)).astype(float)
    y_lin = X @ [0.5, -1.0] + rng.normal(size=2000).round(1)  # few distinct values
    y_bin = (rng.random(2000) < 1 / (1 + np.exp(-(X @ [0.7, -0.4] - 0.2)))).astype(float)
    for model, y, atol in ((LinearRegression(n_features=2), y_lin, 1e-9), (LogisticRegression(n_features=2), y_bin, None)):
        # two datasets in one run, the second with fewer distinct rows (padded in the batch)
        sets = [(X, y), (np.minimum(X, 1.0), y)]
        collapsed = [distinct_rows(*xy) for xy in sets]
        assert all(c.sum() == len(y) for *_, c in collapsed) and len(collapsed[1][1]) < len(collapsed[0][1]) < len(y) / 3
        post = GeneralisedPosterior(model, num_warmup=300, num_samples=1000, num_chains=2, seed=0)
        full = post.sample_many([(None, xy) for xy in sets], seed=1)
        short = post.sample_many([(None, (Xu, yu)) for Xu, yu, _ in collapsed], seed=1, counts=[c for *_, c in collapsed])
        if atol is not None:
            np.testing.assert_allclose(short, full, atol=atol)
        else:  # two NUTS runs: means within 4 Monte Carlo standard errors (ESS >= 400 of 2,000 draws)
            for a, b in zip(full.reshape(2, -1, 3), short.reshape(2, -1, 3)):
                assert np.all(np.abs(a.mean(0) - b.mean(0)) < 4 * np.sqrt(2 / 400) * a.std(0))
                np.testing.assert_allclose(b.std(0), a.std(0), rtol=0.15)
    Xu, yu, c = collapsed[0]
    for bad in (c[:-1], np.r_[c[:-1], np.inf]):
        with pytest.raises(ParameterError, match="multiplicities"):
            post.sample_many([(None, (Xu, yu))], counts=[bad])


def test_mixture_coverage_against_order_statistics_and_the_large_m_limit():
    from scipy.stats import norm

    from synthinfer.bayes.mixing import mixture_coverage

    # point-mass components (W = 0): the interval runs from the k-th to the (m + 1 - k)-th centre,
    # k = ceil(0.025 m), which holds (m + 1 - 2k) / (m + 1) of the centres' law on average
    for m, k in ((20, 1), (100, 3)):
        assert mixture_coverage(m, 1.0, 0.0) == pytest.approx((m + 1 - 2 * k) / (m + 1), abs=0.01)
    # many datasets: the interval +-1.96 sd of the mixture (B + W) around a target of variance B - W
    B, W = 1.2, 0.2
    assert mixture_coverage(1000, B, W) == pytest.approx(2 * norm.cdf(1.96 * np.sqrt((B + W) / (B - W))) - 1, abs=0.005)
    assert np.isnan(mixture_coverage(20, 0.2, 0.2))  # no variance left for the target


def test_few_large_datasets_warn_that_the_tails_rest_on_few_of_them():
    n = 200
    _, datasets = _normal_release(n, 20 * n, 20)
    with pytest.warns(SynthinferWarning, match=r"cover about 0\.9\d.*use about \d+ datasets"):
        idata = mix_posteriors(datasets, "y ~ 1", "ols", n=n, seed=1)
    assert 0.88 < idata.posterior.attrs["tail_coverage_95"] < 0.94
    _, datasets = _normal_release(n, 5 * n, 20)  # the recommended size: no warning at m = 20
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mix_posteriors(datasets, "y ~ 1", "ols", n=n, seed=1).posterior.attrs["tail_coverage_95"] >= 0.94
