"""NAPSU-MQ inference: posterior recovery of a known theta, Laplace vs NUTS, restarts, MLE."""

from __future__ import annotations

import numpy as np
import pytest

from synthinfer._jax import jax, jnp
from synthinfer.data import Domain, Marginal
from synthinfer.generate import inference as inf
from synthinfer.generate.napsu_mq import _network

# The toy domain and marginal of test_napsu_mq: the cached network (and so its compiled
# programs) is shared between the test files when they run in one process.
DOMAIN = Domain({"x1": [0, 1], "x2": [0, 1], "y": [0, 1]})
MARGINALS = [("x1", "x2", "y")]


@pytest.fixture(scope="module")
def truth():
    """A known theta, n = 200,000 rows drawn exactly from MED_theta, and their exact counts."""
    net = _network(DOMAIN, [Marginal(m) for m in MARGINALS])
    rng = np.random.default_rng(0)
    theta = rng.normal(0.0, 0.7, net.dimension)
    n = 200_000
    codes = np.asarray(net.sample(jnp.asarray(theta), n, jax.random.key(1)))
    counts = net.queries.count(codes)
    return net, theta, n, counts


def test_laplace_recovers_known_theta(truth):
    net, theta, n, counts = truth
    sigma = 0.01  # tiny DP noise
    s_tilde = counts + np.random.default_rng(2).normal(0, sigma, counts.shape)
    lap = inf.laplace_approximation(net.mean_and_cov, s_tilde, sigma, n, rng=np.random.default_rng(3))
    assert lap.converged
    sd = np.sqrt(np.diag(lap.cov))
    z = (lap.mean - theta) / sd
    # d independent-ish standard normal z-scores: |z| < 4 each fails with prob < 1e-3 overall.
    assert np.all(np.abs(z) < 4.0), z
    # With n = 2e5 the posterior is tight: sds of order 1/sqrt(n p) ~ 0.01.
    assert np.all(sd < 0.05)
    # The posterior mean reproduces the observed counts (moment matching at the mode).
    fitted = n * np.asarray(net.mean(jnp.asarray(lap.mean)))
    assert np.all(np.abs(fitted - counts) <= 5 * np.sqrt(counts) + 1)


@pytest.mark.slow
def test_nuts_agrees_with_laplace_when_gaussian(truth):
    net, theta, n, counts = truth
    sigma = 5.0
    s_tilde = counts + np.random.default_rng(4).normal(0, sigma, counts.shape)
    rng = np.random.default_rng(5)
    lap = inf.laplace_approximation(net.mean_and_cov, s_tilde, sigma, n, rng=rng)
    res = inf.nuts_sample(net.mean_and_cov, s_tilde, sigma, n, lap, n_chains=4, num_warmup=200, num_samples=1000, rng=rng)
    assert res.draws.shape == (4, 1000, net.dimension)
    assert res.n_grad_evals > res.n_grad_evals_warmup > 0
    post = inf.to_inference_data(res.draws)
    diag = inf.convergence_diagnostics(post, ess_per_chain=50)
    assert diag["ok"], diag["rhat_max"]
    flat = res.draws.reshape(-1, net.dimension)
    sd = np.sqrt(np.diag(lap.cov))
    # Monte Carlo error of the NUTS mean is sd / sqrt(ESS) with ESS >= 100: 0.35 sd is > 3.5 MC s.e.
    assert np.all(np.abs(flat.mean(0) - lap.mean) < 0.35 * sd)
    np.testing.assert_allclose(flat.std(0), sd, rtol=0.25)
    assert np.all(np.abs((lap.mean - theta) / sd) < 4.0)


def test_noise_aware_posterior_is_wider_than_naive(truth):
    net, _, n, counts = truth
    sigma = 200.0
    s_tilde = counts + np.random.default_rng(6).normal(0, sigma, counts.shape)
    wide = inf.laplace_approximation(net.mean_and_cov, s_tilde, sigma, n, rng=np.random.default_rng(7))
    narrow = inf.laplace_approximation(net.mean_and_cov, s_tilde, 0.005, n, rng=np.random.default_rng(7))
    assert np.all(np.diag(wide.cov) > 1.5 * np.diag(narrow.cov))


def test_likelihood_matches_scipy(truth):
    from scipy.stats import multivariate_normal

    net, theta, n, counts = truth
    mu, cov = (np.asarray(x) for x in net.mean_and_cov(jnp.asarray(theta)))
    s = counts + 3.0
    want = multivariate_normal(n * mu, n * cov + 4.0 * np.eye(len(mu))).logpdf(s)
    got = float(inf.log_likelihood(jnp.asarray(theta), jnp.asarray(s), 2.0, float(n), net.mean_and_cov))
    assert got == pytest.approx(want, rel=1e-9)


def test_lbfgs_restarts_when_an_attempt_is_rejected():
    def loss(x, c):
        return jnp.sum((x - c) ** 2)

    calls = []

    def accept(x):
        calls.append(x)
        return len(calls) > 2  # reject the first two optima

    res = inf.lbfgs_minimize(loss, np.zeros(3), (jnp.ones(3),), rng=np.random.default_rng(0), accept=accept)
    assert res.converged and res.n_restarts == 2 and len(res.attempts) == 3
    np.testing.assert_allclose(res.x, 1.0, atol=1e-4)


def test_lbfgs_reports_failure_after_max_restarts():
    def loss(x):
        return jnp.sum(x**2)

    res = inf.lbfgs_minimize(loss, np.zeros(2), (), rng=np.random.default_rng(0), max_restarts=1, accept=lambda x: False)
    assert not res.converged and res.n_restarts == 1


def test_pgm_mle_recovers_theta_without_noise(truth):
    net, theta, n, counts = truth
    res = inf.maximum_likelihood_pgm(net.mean, counts, n, rng=np.random.default_rng(0))
    mu_hat = np.asarray(net.mean(jnp.asarray(res.x)))
    np.testing.assert_allclose(n * mu_hat, counts, atol=2.0)



def test_evicted_networks_release_their_cached_objectives(monkeypatch):
    from synthinfer.generate import napsu_mq

    monkeypatch.setattr(napsu_mq, "_MAX_NETWORKS", 1)
    first = _network(DOMAIN, [Marginal(("x1", "y"))])
    inf._loss_for(first.mean_and_cov)
    assert first.mean_and_cov in inf._LOSS_CACHE
    second = _network(DOMAIN, [Marginal(("x2", "y"))])  # evicts the first
    assert second is not first
    assert first.mean_and_cov not in inf._LOSS_CACHE
