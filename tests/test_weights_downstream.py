"""Importance-weighted GLMs, scikit-learn IW-ERM and the IW Bayesian posterior (eq. 3)."""

import numpy as np
import pandas as pd
import pytest

from synthinfer.errors import SynthinferError
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
    with pytest.raises(SynthinferError, match="sample_weight"):
        fit_weighted(KNeighborsRegressor(), df[["x"]], df.z, w)
    with pytest.raises(SynthinferError, match="weights"):
        fit_weighted(LinearRegression(), df[["x"]], df.z, w[:10])


def test_iw_posterior_log_density_equals_duplicated_data():
    """With integer weights, eq. (3) is the ordinary posterior of the data with rows repeated."""
    from numpyro.infer.util import log_density

    from synthinfer._jax import jnp
    from synthinfer.weights.posterior import _model

    rng = np.random.default_rng(0)
    x = np.c_[np.ones(30), rng.normal(size=(30, 2))]
    y = rng.integers(0, 3, 30)
    w = rng.integers(1, 4, 30).astype(float)
    beta = {"beta": jnp.asarray(rng.normal(size=(3, 3)))}
    lw, _ = log_density(_model, (jnp.asarray(x), jnp.asarray(y), jnp.asarray(w), "multinomial", 3, 1.0), {}, beta)
    rep = np.repeat(np.arange(30), w.astype(int))
    ld, _ = log_density(_model, (jnp.asarray(x[rep]), jnp.asarray(y[rep]), jnp.ones(len(rep)), "multinomial", 3, 1.0), {}, beta)
    assert float(lw) == pytest.approx(float(ld), rel=1e-10)


def test_iw_bayesian_logistic_regression_predicts():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (rng.random(200) < 1 / (1 + np.exp(-(X @ [2.0, -1.0])))).astype(int)
    m = IWBayesianRegression("logistic", num_warmup=150, num_samples=150, seed=0).fit(X, y, np.ones(200))
    beta = m.samples_["beta"].mean(axis=0)
    assert beta[1] > 1.0 and beta[2] < -0.4
    draws = m.metric_draws(X, y)
    assert draws.shape == (150,) and m.score(X, y) > 0.8
    with pytest.raises(SynthinferError, match="2 classes"):
        IWBayesianRegression("logistic").fit(X, np.arange(200) % 3)
