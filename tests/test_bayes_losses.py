"""Losses of synthinfer.bayes against hand-computed values and their defining formulas."""

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from synthinfer._jax import jnp
from synthinfer.bayes.losses import BetaLoss, ImportanceWeightedLoss, LogLoss, NoiseAwareLoss, normal_laplace_logpdf
from synthinfer.bayes.models import GaussianLocationScale, LinearRegression, LogisticRegression
from synthinfer.errors import ParameterError

# these tests call lower-level JAX code directly, which runs in the caller's precision
pytestmark = pytest.mark.usefixtures("float64")

G = GaussianLocationScale()


def _u(mu, sigma):
    return jnp.array([mu, math.log(sigma)])


def test_weighted_log_loss_gaussian_by_hand():
    # -w log N(1; 0, 2^2) = w (0.5 log(2 pi 4) + 1/8)
    val = float(LogLoss(0.5).per_row(G, _u(0.0, 2.0), {"y": jnp.array([1.0])})[0])
    assert val == pytest.approx(0.5 * (0.5 * math.log(8 * math.pi) + 1 / 8), rel=1e-12)


def test_beta_loss_gaussian_matches_closed_form_a15():
    beta, wb, mu, sigma, y = 0.5, 1.25, 0.3, 1.7, -0.4
    f = scipy.stats.norm.pdf(y, mu, sigma)
    a15 = -wb * (f**beta / beta - 1 / ((2 * math.pi) ** (beta / 2) * (1 + beta) ** 1.5 * sigma**beta))
    val = float(BetaLoss(beta, wb).per_row(G, _u(mu, sigma), {"y": jnp.array([y])})[0])
    assert val == pytest.approx(a15, rel=1e-12)


def test_gaussian_power_integral_by_quadrature():
    mu, sigma, gamma = 0.2, 0.8, 1.6
    num, _ = scipy.integrate.quad(lambda t: scipy.stats.norm.pdf(t, mu, sigma) ** gamma, -np.inf, np.inf)
    val = float(G.log_power_integral(_u(mu, sigma), {"y": jnp.zeros(1)}, gamma)[0])
    assert math.exp(val) == pytest.approx(num, rel=1e-8)


@pytest.mark.parametrize("beta", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("y", [0.0, 1.0])
def test_bernoulli_beta_loss_equals_general_beta_divergence_formula(beta, y):
    # General definition (A.1-A.3), counting measure on {0, 1}:
    # l(y) = 1/(beta+1) sum_t p(t)^(beta+1) - (1/beta) p(y)^beta.
    m = LogisticRegression(n_features=1)
    u = jnp.array([0.4, -1.1])
    x = 0.7
    p1 = 1 / (1 + math.exp(-(0.4 - 1.1 * x)))
    py = p1 if y == 1 else 1 - p1
    general = (p1 ** (beta + 1) + (1 - p1) ** (beta + 1)) / (beta + 1) - py**beta / beta
    val = float(BetaLoss(beta, 1.0).per_row(m, u, {"X": jnp.array([[x]]), "y": jnp.array([y])})[0])
    assert val == pytest.approx(general, rel=1e-12)
    # The reference code's (p^y + (1-p)^(1-y))^beta is a different (wrong) quantity.
    buggy = (p1**y + (1 - p1) ** (1 - y)) ** beta / beta
    assert abs(val - ((p1 ** (beta + 1) + (1 - p1) ** (beta + 1)) / (beta + 1) - buggy)) > 1e-3


def test_beta_loss_tends_to_log_loss():
    # (1/beta) f^beta = 1/beta + log f + O(beta) (A.4): the beta-loss + 1/beta -> -log f.
    data = {"y": jnp.array([-1.0, 0.5, 2.0])}
    u = _u(0.1, 1.3)
    b = 1e-6
    lb = np.asarray(BetaLoss(b, 1.0).per_row(G, u, data)) + 1 / b
    ll = np.asarray(LogLoss(1.0).per_row(G, u, data))
    np.testing.assert_allclose(lb, ll + 1.0, atol=1e-4)  # the integral term -> 1/(beta+1) * 1 -> 1


def test_linear_regression_beta_integral_is_gaussian():
    m = LinearRegression(n_features=1)
    u = jnp.array([0.0, 1.0, math.log(0.5)])
    d = {"X": jnp.array([[1.0]]), "y": jnp.array([0.0])}
    assert float(m.log_power_integral(u, d, 1.5)[0]) == pytest.approx(float(G.log_power_integral(_u(0, 0.5), {"y": jnp.zeros(1)}, 1.5)[0]))


def _total_mass(logpdf) -> float:
    """Integral of exp(logpdf) over the line: one vectorised evaluation, trapezoid rule (h = 1e-3)."""
    y = np.arange(-60.0, 60.0, 1e-3)
    return float(np.trapezoid(np.exp(np.asarray(logpdf(jnp.asarray(y)))), y))


@pytest.mark.parametrize("mu,sigma,lam", [(0.0, 1.0, 1.0), (1.5, 0.3, 2.0), (-2.0, 3.0, 0.1)])
def test_normal_laplace_integrates_to_one(mu, sigma, lam):
    assert _total_mass(lambda y: normal_laplace_logpdf(y, mu, sigma, lam)) == pytest.approx(1.0, abs=1e-6)


def test_normal_laplace_matches_numerical_convolution_and_tails():
    mu, sigma, lam = 0.5, 0.8, 0.75
    ys = np.array([-2.0, 0.3, 4.0])
    got = np.exp(np.asarray(normal_laplace_logpdf(jnp.asarray(ys), mu, sigma, lam)))
    for y, g in zip(ys, got):
        conv, _ = scipy.integrate.quad(
            lambda e: scipy.stats.norm.pdf(y - e, mu, sigma) * scipy.stats.laplace.pdf(e, 0, lam), -np.inf, np.inf
        )
        assert g == pytest.approx(conv, rel=1e-7)
    # Far tails: the Laplace part dominates, log density ~ -|y - mu|/lam; no overflow/NaN.
    far = np.asarray(normal_laplace_logpdf(jnp.array([-500.0, 500.0]), mu, sigma, lam))
    assert np.all(np.isfinite(far))
    assert far[1] == pytest.approx(-(500 - mu) / lam + sigma**2 / (2 * lam**2) - math.log(2 * lam), rel=1e-9)


def test_noise_aware_loss_needs_gaussian_model():
    with pytest.raises(ParameterError):
        NoiseAwareLoss(1.0).per_row(LogisticRegression(n_features=1), jnp.zeros(2), {"X": jnp.zeros((1, 1)), "y": jnp.zeros(1)})


def test_importance_weighted_loss_normalises_and_checks_length():
    loss = ImportanceWeightedLoss([1.0, 3.0])
    np.testing.assert_allclose(loss.row_weights(2), [0.5, 1.5])
    with pytest.raises(ParameterError):
        loss.row_weights(3)
    with pytest.raises(ParameterError):
        ImportanceWeightedLoss([1.0, -1.0])


@pytest.mark.parametrize("bad", [dict(beta=0.0), dict(beta=0.5, w_beta=-1.0), dict(beta=0.5, w_beta="auto")])
def test_beta_loss_rejects_bad_settings(bad):
    with pytest.raises(ParameterError):
        BetaLoss(**bad)


@pytest.mark.parametrize("mu,sigma,lam", [(0.0, 1.0, 1.0), (2.5, 1.0, 0.75), (-1.0, 2.0, 0.5)])
def test_truncated_normal_laplace_is_the_law_of_the_truncated_mechanism(mu, sigma, lam):
    from synthinfer.bayes.losses import truncated_normal_laplace_logpdf

    a, b = -3.0, 3.0
    assert _total_mass(lambda y: truncated_normal_laplace_logpdf(y, mu, sigma, lam, a, b)) == pytest.approx(1.0, abs=1e-6)
    ys = np.array([-3.5, 0.2, 2.9])
    got = np.exp(np.asarray(truncated_normal_laplace_logpdf(jnp.asarray(ys), mu, sigma, lam, a, b)))
    # Against the definition: the Gaussian part by quadrature plus the two clamping atoms.
    for y, g in zip(ys, got):
        pts = [y] if a < y < b else None
        cont, _ = scipy.integrate.quad(lambda x: scipy.stats.norm.pdf(x, mu, sigma) * scipy.stats.laplace.pdf(y - x, 0, lam), a, b, points=pts)
        atoms = scipy.stats.norm.cdf(a, mu, sigma) * scipy.stats.laplace.pdf(y - a, 0, lam) + scipy.stats.norm.sf(b, mu, sigma) * scipy.stats.laplace.pdf(y - b, 0, lam)
        assert g == pytest.approx(cont + atoms, rel=1e-7)
