"""Importance-weighted GLMs, scikit-learn IW-ERM and the IW Bayesian posterior (eq. 3)."""

import numpy as np
import pandas as pd
import pytest

from synthinfer.errors import ArgumentTypeError, ParameterError
from synthinfer.weights import IWBayesianRegression, fit_iw_glm, fit_weighted


def _shifted(n, seed):
    """Covariate shift: real x ~ N(0, 1), synthetic x ~ N(1, 1); y | x misspecified (quadratic)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(1.0, 1.0, n)
    z = x + 0.5 * x**2 + rng.normal(size=n)
    w = np.exp(-0.5 * x**2 + 0.5 * (x - 1) ** 2)  # N(0,1) / N(1,1) density ratio
    return pd.DataFrame({"x": x, "z": z}), w


def test_iw_glm_targets_the_real_data_parameter_with_sandwich_se():
    # Best linear fit of z on x under N(0,1): slope = Cov(x, x + x^2/2) = 1, intercept = E[x^2]/2 = 0.5
    est = []
    for seed in range(20):
        df, w = _shifted(2000, seed)
        res = fit_iw_glm("z ~ x", df, w, family="gaussian")
        est.append(res.params.to_numpy())
    est = np.array(est)
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - [0.5, 1.0]) < 4 * se + 0.02)
    unweighted = fit_iw_glm("z ~ x", df, np.ones(len(df)), family="gaussian").params["x"]
    assert unweighted > 1.5  # without weights the slope is that of the shifted data (1 + E_G[x] = 2)
    # sandwich SE equals the manual J^-1 K J^-1
    x = np.c_[np.ones(len(df)), df.x]
    wn = w / w.mean()
    r = df.z.to_numpy() - x @ res.params.to_numpy()
    j = (x * wn[:, None]).T @ x
    k = (x * (wn * r)[:, None]).T @ (x * (wn * r)[:, None])
    v = np.linalg.inv(j) @ k @ np.linalg.inv(j)
    np.testing.assert_allclose(res.bse.to_numpy(), np.sqrt(np.diag(v)), rtol=1e-8)
    assert "z" in str(res.summary())


def test_fit_weighted_uses_sample_weight_and_rejects_estimators_without_it():
    from sklearn.linear_model import LinearRegression
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    df, w = _shifted(3000, 0)
    lr = fit_weighted(LinearRegression(), df[["x"]], df.z, w)
    glm = fit_iw_glm("z ~ x", df, w, family="gaussian")
    assert lr.coef_[0] == pytest.approx(glm.params["x"], rel=1e-8)
    pipe = fit_weighted(make_pipeline(StandardScaler(), LinearRegression()), df[["x"]], df.z, w)
    assert pipe.predict(df[["x"]].iloc[:5]) == pytest.approx(lr.predict(df[["x"]].iloc[:5]))
    with pytest.raises(ArgumentTypeError, match="sample_weight"):
        fit_weighted(KNeighborsRegressor(), df[["x"]], df.z, w)
    with pytest.raises(ParameterError, match="weights"):
        fit_weighted(LinearRegression(), df[["x"]], df.z, w[:10])


def _numpyro_iw_model(x, y, w, kind, n_classes, prior_scale):
    """Eq. (3) written independently in NumPyro: the reference the BlackJAX sampler must match."""
    import numpyro
    import numpyro.distributions as dist

    from synthinfer._jax import jnp

    p = x.shape[1]
    if kind == "multinomial":
        beta = numpyro.sample("beta", dist.Normal(0.0, prior_scale).expand([p, n_classes]).to_event(2))
        ll = dist.Categorical(logits=x @ beta).log_prob(y)
    else:
        beta = numpyro.sample("beta", dist.Normal(0.0, prior_scale).expand([p]).to_event(1))
        if kind == "logistic":
            ll = dist.Bernoulli(logits=x @ beta).log_prob(y)
        else:
            sigma = numpyro.sample("sigma", dist.HalfNormal(10.0))
            ll = dist.Normal(x @ beta, sigma).log_prob(y)
    numpyro.factor("iw_loglik", jnp.sum(w * ll))


def _iw_problem(kind, seed):
    rng = np.random.default_rng(seed)
    n = 120
    X = rng.normal(size=(n, 2))
    if kind == "linear":
        y = 0.5 + X @ [1.0, -0.5] + rng.normal(0, 0.7, n)
    elif kind == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [1.5, -1.0])))).astype(int)
    else:
        eta = np.c_[np.zeros(n), X @ [1.0, 0.5], X @ [-1.0, 1.0]]
        y = np.array([rng.choice(3, p=np.exp(e) / np.exp(e).sum()) for e in eta])
    return X, y, rng.gamma(2.0, 0.5, n)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["logistic", "linear", "multinomial"])
def test_iw_posterior_matches_an_independent_numpyro_sampler(kind):
    """Same posterior (means and sds within Monte Carlo error) as NumPyro's NUTS on eq. (3)."""
    pytest.importorskip("numpyro")
    from numpyro.infer import MCMC, NUTS

    from synthinfer._jax import jax, jnp

    X, y, w = _iw_problem(kind, 0)
    m = IWBayesianRegression(kind, num_warmup=400, num_samples=1000, num_chains=2, seed=1).fit(X, y, w)
    assert m.diagnostics_["ok"]
    x1 = np.c_[np.ones(len(X)), X]
    codes = np.unique(y, return_inverse=True)[1]
    ref = MCMC(NUTS(_numpyro_iw_model), num_warmup=400, num_samples=2000, progress_bar=False)
    ref.run(jax.random.key(2), jnp.asarray(x1), jnp.asarray(y if kind == "linear" else codes), jnp.asarray(w / w.mean()),
            kind, 3, 1.0)
    for name, draws in ref.get_samples().items():
        a, b = m.samples_[name], np.asarray(draws)
        sd = b.std(axis=0)
        # MC error of each mean: sd / sqrt(ESS) with ESS >= ~400 each, so a difference of 0.25 sd is ~3.5 se.
        np.testing.assert_array_less(np.abs(a.mean(axis=0) - b.mean(axis=0)), 0.25 * sd)
        np.testing.assert_allclose(a.std(axis=0), sd, rtol=0.2)


def test_iw_bayesian_logistic_regression_predicts():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (rng.random(200) < 1 / (1 + np.exp(-(X @ [2.0, -1.0])))).astype(int)
    m = IWBayesianRegression("logistic", num_warmup=200, num_samples=300, seed=0).fit(X, y, np.ones(200))
    assert m.posterior_.method_ == "nuts" and m.samples_["beta"].shape == (300, 3)
    beta = m.samples_["beta"].mean(axis=0)
    assert beta[1] > 1.0 and beta[2] < -0.4
    draws = m.metric_draws(X, y)
    assert draws.shape == (300,) and m.score(X, y) > 0.8
    idata = m.to_arviz()
    assert idata.posterior["beta"].shape == (1, 300, 3) and "diverging" in idata.sample_stats
    assert m.diagnostics_["rhat"] is None and m.diagnostics_["ess_bulk_required"] == 100.0  # one chain: ESS only
    with pytest.raises(ParameterError, match="2 classes"):
        IWBayesianRegression("logistic").fit(X, np.arange(200) % 3)
