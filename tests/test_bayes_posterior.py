"""Posteriors: closed forms against analytic moments, NUTS (vectorised, padded) against closed forms."""

import math

import numpy as np
import pytest

from synthinfer.bayes.calibration import calibrate_beta_weight
from synthinfer.bayes.losses import BetaLoss, ImportanceWeightedLoss, LogLoss
from synthinfer.bayes.models import GaussianLocationScale, LinearRegression, NormalInverseGammaPrior
from synthinfer.bayes.posterior import GeneralisedPosterior, nig_posterior
from synthinfer.errors import NotFittedError, ParameterError

PRIOR = NormalInverseGammaPrior(mean=0.5, scale=2.0, shape=3.0, rate=2.0)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(0.2, 1.0, 15), rng.normal(0.8, 1.5, 40)


def _nig_moments(x, z, w):
    y = np.r_[x, z]
    wt = np.r_[np.ones(len(x)), np.full(len(z), w)]
    mu_n, kappa_n, a_n, b_n = nig_posterior(y, wt, PRIOR)
    # mu | data ~ Student-t: mean mu_n, var b_n / ((a_n - 1) kappa_n); E[sigma^2] = b_n / (a_n - 1).
    return mu_n, math.sqrt(b_n / ((a_n - 1) * kappa_n)), b_n / (a_n - 1)


def test_weighted_nig_update_by_hand():
    # One real point y=1 with weight 1, prior mean 0, scale 1 (kappa0 = 1), IG(2, 4).
    mu_n, kappa_n, a_n, b_n = nig_posterior(np.array([1.0]), np.array([1.0]), NormalInverseGammaPrior(0.0, 1.0, 2.0, 4.0))
    assert (mu_n, kappa_n, a_n, b_n) == pytest.approx((0.5, 2.0, 2.5, 4.25))
    # Weight w on a point is the same as w copies' worth of sufficient statistics.
    a = nig_posterior(np.array([1.0, 3.0]), np.array([1.0, 2.0]), PRIOR)
    b = nig_posterior(np.array([1.0, 3.0, 3.0]), np.array([1.0, 1.0, 1.0]), PRIOR)
    assert a == pytest.approx(b)


def test_exact_sampler_matches_closed_form_moments():
    x, z = _data()
    post = GeneralisedPosterior(GaussianLocationScale(), LogLoss(0.5), PRIOR, num_samples=20000, num_chains=2, seed=1)
    idata = post.fit(real=x, synthetic=z).idata_
    assert post.method_ == "exact"
    m, sd, es2 = _nig_moments(x, z, 0.5)
    mu = idata.posterior["mu"].values.ravel()
    s2 = idata.posterior["sigma"].values.ravel() ** 2
    n = mu.size
    assert abs(mu.mean() - m) < 4 * sd / math.sqrt(n)
    assert mu.std() == pytest.approx(sd, rel=0.03)
    assert s2.mean() == pytest.approx(es2, rel=0.03)


def test_vectorised_nuts_with_padding_matches_closed_form():
    # Two configurations of different sizes in one vmapped NUTS run: padding rows carry weight 0.
    x, z = _data(2)
    post = GeneralisedPosterior(GaussianLocationScale(), LogLoss(0.5), PRIOR, method="nuts", num_warmup=300, num_samples=1500, num_chains=2, seed=3)
    draws = post.sample_many([(x, z), (x[:5], z[:10])])
    assert draws.shape == (2, 2, 1500, 2)
    for k, (xr, zs) in enumerate([(x, z), (x[:5], z[:10])]):
        m, sd, _ = _nig_moments(xr, zs, 0.5)
        mu = draws[k, ..., 0].ravel()
        # NUTS draws are autocorrelated; 5 sd of an ESS of at least ~500.
        assert abs(mu.mean() - m) < 5 * sd / math.sqrt(500)
        assert mu.std() == pytest.approx(sd, rel=0.12)


def test_importance_weights_enter_as_row_weights():
    x, z = _data(4)
    w = np.r_[np.full(20, 2.0), np.zeros(20)]
    a = GeneralisedPosterior(GaussianLocationScale(), ImportanceWeightedLoss(w, self_normalise=False), PRIOR, num_samples=10, seed=0)
    y, _, wt = a._weighted_stats(a.model.prepare(x), a.model.prepare(z), a._loss())
    assert nig_posterior(y, wt, PRIOR) == pytest.approx(nig_posterior(np.r_[x, z[:20], z[:20]], np.ones(55), PRIOR))


def test_linear_regression_exact_posterior_mean():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 2))
    y = 1.0 + X @ np.array([2.0, -1.0]) + rng.normal(0, 0.5, 200)
    post = GeneralisedPosterior(LinearRegression(), LogLoss(1.0), num_samples=4000, seed=0)
    idata = post.fit(real=(X, y)).idata_
    est = np.r_[idata.posterior["alpha"].values.mean(), idata.posterior["theta"].values.mean(axis=(0, 1))]
    ols = np.linalg.lstsq(np.column_stack([np.ones(200), X]), y, rcond=None)[0]
    np.testing.assert_allclose(est, ols, atol=0.01)  # weak prior (scale 10): posterior mean ~ OLS
    assert idata.posterior["sigma"].values.mean() == pytest.approx(0.5, rel=0.1)


def test_fisher_matching_calibration_is_one_for_log_loss_limit():
    # beta -> 0 gives the log loss; for a correctly specified model I = J, so w* -> 1.
    rng = np.random.default_rng(6)
    z = {"y": rng.normal(1.0, 2.0, 4000)}
    w = calibrate_beta_weight(GaussianLocationScale(), BetaLoss(1e-4), z)
    assert w == pytest.approx(1.0, abs=0.08)
    # For beta = 0.5 the loss is scaled by ~f^beta: the calibration must undo it (w > 1).
    assert calibrate_beta_weight(GaussianLocationScale(), BetaLoss(0.5), z) > 1.5


def test_calibration_with_importance_weights_counts_their_variance():
    # Loss sum_j w_j l_j with weights independent of the data, near the log loss: J ~ E[w] J0 and
    # I ~ E[w^2] J0, so w* ~ E[w] / E[w^2] (the weighted posterior must be tempered).
    rng = np.random.default_rng(7)
    z = {"y": rng.normal(1.0, 2.0, 4000)}
    loss, model = BetaLoss(1e-4), GaussianLocationScale()
    plain = calibrate_beta_weight(model, loss, z)
    assert calibrate_beta_weight(model, loss, z, row_weights=np.ones(4000)) == pytest.approx(plain, rel=1e-9)
    assert calibrate_beta_weight(model, loss, z, row_weights=np.full(4000, 2.0)) == pytest.approx(plain / 2, rel=1e-4)  # BFGS tolerance
    # Uniform(0, 2) weights: w* ~ 3/4 of the unweighted value. The relative sd of the sampled I
    # is about sqrt(E[w^4] E[g^4] / (E[w^2] E[g^2])^2 / m) = sqrt(1.8 * 15 / m) (g: the log-scale
    # score z^2 - 1), 0.037 at m = 20,000; the tolerance is 3 sd.
    z = {"y": rng.normal(1.0, 2.0, 20000)}
    w = rng.uniform(0.0, 2.0, 20000)
    expected = calibrate_beta_weight(model, loss, z) * w.mean() / np.mean(w**2)
    assert calibrate_beta_weight(model, loss, z, row_weights=w) == pytest.approx(expected, rel=0.11)


def test_errors():
    post = GeneralisedPosterior(GaussianLocationScale(), BetaLoss(0.5), method="exact")
    with pytest.raises(ParameterError, match="no closed form"):
        post.fit(real=np.zeros(3))
    with pytest.raises(NotFittedError):
        GeneralisedPosterior(GaussianLocationScale()).log_predictive(np.zeros(3))
    with pytest.raises(ParameterError, match="w_beta"):
        GeneralisedPosterior(GaussianLocationScale(), BetaLoss(0.5, "calibrate")).sample_many([(np.zeros(3), np.zeros(3))])
    # arrays are numbers of the model's shape, never flattened or coerced
    from synthinfer.errors import DomainError

    for data, message in ((np.zeros((5, 2)), r"y must be a vector, got shape \(5, 2\)"),
                          (["a"] * 4, "must be numbers")):
        with pytest.raises(DomainError, match=message):
            GaussianLocationScale().prepare(data)
    with pytest.raises(DomainError, match="X must be a matrix"):
        LinearRegression().prepare((np.zeros((4, 2, 2)), np.zeros(4)))
    assert GaussianLocationScale().prepare(np.zeros((6, 1)))["y"].shape == (6,)


def test_grid_quadrature_matches_conjugate_closed_form():
    # The grid engine of the Gaussian benchmark against the exact Student-t predictive (l_w, w = 0.5).
    from synthinfer.bayes.quadrature import GaussianGrid, conjugate_predictive, grid_trajectories

    rng = np.random.default_rng(7)
    x, z, test = rng.normal(size=20), rng.normal(0.3, 1.7, size=60), rng.normal(size=200)
    n_grid, m_grid = np.array([5, 20]), np.array([1, 10, 60])
    grid = GaussianGrid()
    ex = conjugate_predictive(x, z, n_grid, m_grid, 0.5, PRIOR, (0.0, 1.0), test, grid)
    gr = grid_trajectories(x, z, n_grid, m_grid, LogLoss(0.5), PRIOR, (0.0, 1.0), test, grid)
    np.testing.assert_allclose(gr.kld, ex.kld, atol=2e-4)
    np.testing.assert_allclose(gr.log_score, ex.log_score, atol=2e-4)
    np.testing.assert_allclose(gr.wasserstein, ex.wasserstein, atol=1e-3)


def test_nuts_fit_returns_self_with_the_shared_convergence_diagnostics():
    from synthinfer.errors import ConvergenceWarning

    x, z = _data(8)
    post = GeneralisedPosterior(GaussianLocationScale(), LogLoss(0.5), PRIOR, method="nuts", num_warmup=200, num_samples=500, seed=4)
    assert post.fit(real=x, synthetic=z) is post
    d = post.diagnostics_
    assert d["ok"] and d["rhat_max"] < 1.01 and d["ess_bulk_required"] == 200.0 and len(d["rhat"]) == 2
    # Too short to mix: the policy fails and says so.
    short = GeneralisedPosterior(GaussianLocationScale(), LogLoss(0.5), PRIOR, method="nuts", num_warmup=3, num_samples=20, seed=4)
    with pytest.warns(ConvergenceWarning, match="NUTS diagnostics failed"):
        short.fit(real=x, synthetic=z)
    assert short.diagnostics_["ok"] is False
    exact = GeneralisedPosterior(GaussianLocationScale(), LogLoss(0.5), PRIOR, num_samples=50, seed=0).fit(real=x)
    assert exact.method_ == "exact" and exact.diagnostics_ is None


def test_settings_are_stored_as_given_and_checked_at_fit():
    post = GeneralisedPosterior(GaussianLocationScale(), num_samples=0)
    assert post.loss is None and post.get_params()["num_samples"] == 0
    with pytest.raises(ParameterError, match="num_samples"):
        post.fit(real=np.zeros(3))
    with pytest.raises(ParameterError, match="method"):
        GeneralisedPosterior(GaussianLocationScale(), method="gibbs").fit(real=np.zeros(3))


def test_linear_regression_with_independent_priors_is_sampled_by_nuts():
    from synthinfer.bayes.models import NormalHalfNormalPrior

    rng = np.random.default_rng(9)
    X = rng.normal(size=(150, 1))
    y = 2.0 * X[:, 0] + rng.normal(0, 0.5, 150)
    post = GeneralisedPosterior(LinearRegression(fit_intercept=False), LogLoss(1.0), NormalHalfNormalPrior(1.0, 10.0),
                                num_warmup=300, num_samples=500, seed=1)
    assert not post.is_conjugate()
    with pytest.raises(ParameterError, match="no closed form"):
        post.set_params(method="exact").fit(real=(X, y))
    post.set_params(method="auto").fit(real=(X, y))
    assert post.method_ == "nuts" and set(post.idata_.posterior.data_vars) == {"theta", "sigma"}
    # Flat-enough prior: the posterior mean is the least-squares slope through the origin.
    slope = float(X[:, 0] @ y / (X[:, 0] @ X[:, 0]))
    assert post.idata_.posterior["theta"].values.mean() == pytest.approx(slope, abs=0.02)
    assert post.idata_.posterior["sigma"].values.mean() == pytest.approx(0.5, rel=0.15)


def test_linear_regression_without_intercept_exact_posterior():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 2))
    y = X @ np.array([1.5, -0.5]) + rng.normal(0, 0.3, 300)
    post = GeneralisedPosterior(LinearRegression(fit_intercept=False), num_samples=2000, seed=0).fit(real=(X, y))
    assert post.method_ == "exact" and post.draws_.shape[-1] == 3
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    np.testing.assert_allclose(post.idata_.posterior["theta"].values.mean(axis=(0, 1)), ols, atol=0.01)


@pytest.mark.usefixtures("float64")
def test_multinomial_model_density_and_power_integral():
    from synthinfer._jax import jnp
    from synthinfer.bayes.models import MultinomialRegression

    rng = np.random.default_rng(11)
    X = rng.normal(size=(20, 2))
    y = rng.integers(0, 3, 20)
    model = MultinomialRegression(n_classes=3)
    d = model.prepare((X, y))
    assert model.dim == 9 and model.n_features_in == 2
    u = rng.normal(size=9)
    B = u.reshape(3, 3)
    eta = B[0] + X @ B[1:]
    logp = eta - np.log(np.exp(eta).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(model.log_density(jnp.asarray(u), d), logp[np.arange(20), y], rtol=1e-10)
    np.testing.assert_allclose(model.log_power_integral(jnp.asarray(u), d, 1.5), np.log((np.exp(logp) ** 1.5).sum(axis=1)), rtol=1e-10)
    par = model.constrain(jnp.asarray(np.stack([u, u])))
    assert par["alpha"].shape == (2, 3) and par["theta"].shape == (2, 2, 3)
    from synthinfer.errors import DomainError

    with pytest.raises(DomainError, match="class code"):
        model.prepare((X, np.full(20, 3)))
