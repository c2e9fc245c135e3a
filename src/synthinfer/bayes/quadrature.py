"""Whole learning-trajectory grids for the Gaussian location-scale model by deterministic quadrature.

The Gaussian experiment of Wilde et al. (A.6.3) needs a posterior for every (n, m, loss, repeat):
16 x ~120 x losses x repeats, about 10^5-10^6 posteriors. NUTS for each (A.6.3 used Stan/Turing on
a cluster) is out of reach on one machine, and unnecessary: the parameter (mu, log sigma) is
two-dimensional, so the posterior can be computed on a fixed grid exactly up to quadrature error,
and because the loss is a *sum over rows*, the unnormalised log posterior of every prefix
(x_{1:n}, z_{1:m}) is a cumulative sum:

    log pi(u_g | x_{1:n}, z_{1:m}) = log pi(u_g) - C^x_n(g) - C^z_m(g) + const,
    C^x_n(g) = sum_{i<=n} -log f(x_i; u_g),   C^z_m(g) = sum_{j<=m} l(z_j; u_g).

One pass over the rows therefore gives all (n, m) posteriors of a repeat. On a uniform grid in
the unconstrained coordinates (mu, log sigma) the trapezoid rule is spectrally accurate for these
smooth, light-tailed posteriors as long as the spacing is below about one posterior standard
deviation (relative error ~ 2 exp(-2 pi^2 sd^2 / h^2); the default grid has spacing <= 1 sd up to
n + m = 300); :func:`conjugate_predictive` gives the exact answer for the weighted log
loss, against which the benchmark checks the grid.

The posterior predictive p(x) = sum_g W_g N(x; mu_g, sigma_g^2) is evaluated on an x-grid by one
dense matrix product per n (all m at once), which gives the
criteria of A.6.2 against a known DGP N(m0, s0^2): KLD(F0 || p) and the 1-Wasserstein distance by
quadrature on the x-grid, and the log score on a held-out sample by interpolating log p.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special
import scipy.stats

from synthinfer._precision import uses_float64
from synthinfer.bayes.losses import BetaLoss, LogLoss, NoiseAwareLoss, truncated_normal_laplace_logpdf
from synthinfer.bayes.models import NormalInverseGammaPrior
from synthinfer.errors import ParameterError


@dataclass(frozen=True)
class GaussianGrid:
    """Uniform grids in (mu, log sigma) for the posterior and in x for the predictive."""

    mu_range: tuple[float, float] = (-6.0, 6.0)
    mu_step: float = 0.06
    log_sigma_range: tuple[float, float] = (math.log(0.2), math.log(15.0))
    log_sigma_step: float = 0.04
    x_range: tuple[float, float] = (-9.0, 9.0)
    x_step: float = 0.05

    def theta(self) -> tuple[np.ndarray, np.ndarray]:
        mu = np.arange(self.mu_range[0], self.mu_range[1] + 1e-9, self.mu_step)
        ls = np.arange(self.log_sigma_range[0], self.log_sigma_range[1] + 1e-9, self.log_sigma_step)
        M, L = np.meshgrid(mu, ls, indexing="ij")
        return M.ravel(), L.ravel()

    def x(self) -> np.ndarray:
        return np.arange(self.x_range[0], self.x_range[1] + 1e-9, self.x_step)


def _per_row_losses(loss: Any, y: np.ndarray, mu: np.ndarray, log_s: np.ndarray) -> np.ndarray:
    """(rows, G) matrix of loss(y_i; mu_g, sigma_g) in numpy (same formulas as losses.py)."""
    s = np.exp(log_s)
    z = (y[:, None] - mu[None, :]) / s[None, :]
    logf = -0.5 * z**2 - log_s[None, :] - 0.5 * math.log(2 * math.pi)
    if isinstance(loss, LogLoss):
        return -loss.w * logf
    if isinstance(loss, BetaLoss):
        b = loss.beta
        integral = (2 * math.pi) ** (-b / 2) * s ** (-b) * (1 + b) ** (-1.5)  # A.15
        return loss.w_beta * (integral[None, :] - np.exp(b * logf) / b)
    if isinstance(loss, NoiseAwareLoss) and loss.bounds is not None:
        from synthinfer._jax import jnp

        lp = truncated_normal_laplace_logpdf(jnp.asarray(y[:, None]), jnp.asarray(mu[None, :]), jnp.asarray(s[None, :]), loss.lam, *loss.bounds)
        return -np.asarray(lp)
    if isinstance(loss, NoiseAwareLoss):
        lam = loss.lam
        r, sl = z, (s / lam)[None, :]
        a = (mu[None, :] - y[:, None]) / lam + scipy.special.log_ndtr(r - sl)
        c = (y[:, None] - mu[None, :]) / lam + scipy.special.log_ndtr(-r - sl)
        return -(0.5 * sl**2 - math.log(2 * lam) + np.logaddexp(a, c))
    raise ParameterError(f"quadrature supports LogLoss, BetaLoss and NoiseAwareLoss, got {loss!r}")


def _log_prior(prior: NormalInverseGammaPrior, mu: np.ndarray, log_s: np.ndarray) -> np.ndarray:
    s2 = np.exp(2 * log_s)
    lp = prior.shape * math.log(prior.rate) - math.lgamma(prior.shape) - (prior.shape + 1) * np.log(s2) - prior.rate / s2
    return lp + math.log(2) + 2 * log_s + scipy.stats.norm.logpdf(mu, prior.mean, prior.scale * np.exp(log_s))


@dataclass
class Criteria:
    """Criteria arrays of shape (len(n_grid), len(m_grid)) (lower is better for all three)."""

    kld: np.ndarray
    log_score: np.ndarray
    wasserstein: np.ndarray


def _criteria_from_predictive(dens, cdf, xg, f0, F0, logf0, i0, t, xp=np) -> tuple:
    """KLD(F0 || p), -mean log p(test), W1(F0, p) from predictive density/CDF rows on the x-grid.

    ``f0, F0, logf0`` are the DGP's density, CDF and log density on the x-grid; ``i0, t`` locate
    the held-out points for linear interpolation of log p. ``xp`` is numpy or jax.numpy.
    """
    h = xg[1] - xg[0]
    logp = xp.log(xp.maximum(dens, 1e-300))
    trap = lambda v: h * (v.sum(axis=-1) - 0.5 * (v[..., 0] + v[..., -1]))  # noqa: E731
    kld = trap(f0 * (logf0 - logp))
    w1 = trap(xp.abs(F0 - cdf))
    ls = -((1 - t) * logp[..., i0] + t * logp[..., i0 + 1]).mean(axis=-1)
    return kld, ls, w1


def _dgp_on_grid(xg: np.ndarray, dgp: tuple[float, float], test: np.ndarray) -> tuple:
    h = xg[1] - xg[0]
    pos = np.clip((np.asarray(test, dtype=float) - xg[0]) / h, 0, len(xg) - 1 - 1e-9)
    i0 = pos.astype(int)
    return (
        scipy.stats.norm.pdf(xg, *dgp), scipy.stats.norm.cdf(xg, *dgp), scipy.stats.norm.logpdf(xg, *dgp), i0, pos - i0,
    )


@functools.lru_cache(maxsize=4)
def _components(grid: GaussianGrid) -> tuple:
    """(mu, log sigma) grid and the (G, 2X) float32 matrix of component densities and CDFs on the x-grid."""
    from synthinfer._jax import jnp

    mu, ls = grid.theta()
    xg = grid.x()
    s = np.exp(ls)
    zz = (xg[None, :] - mu[:, None]) / s[:, None]
    # float32 for the product: weights and component densities are positive and O(1), so single
    # precision changes the criteria by < 1e-5 and halves the cost.
    DC = np.hstack([np.exp(-0.5 * zz**2) / (s[:, None] * math.sqrt(2 * math.pi)), scipy.special.ndtr(zz)])
    return mu, ls, xg, jnp.asarray(DC, dtype=jnp.float32)


@functools.lru_cache(maxsize=1)
def _grid_kernel():
    """The jitted per-n computation: softmax posterior weights -> predictive -> criteria, for all m."""
    from synthinfer._jax import jax, jnp

    @jax.jit
    def run(lp0, cx, cz, DC, xg, f0, F0, logf0, i0, t):
        X = xg.shape[0]

        def per_n(cxn):
            W = jax.nn.softmax(lp0 - cxn - cz, axis=1)
            # the product stays in the compiled program (no round trip to numpy per n)
            P = (W.astype(jnp.float32) @ DC).astype(jnp.float64)
            return jnp.stack(_criteria_from_predictive(P[:, :X], P[:, X:], xg, f0, F0, logf0, i0, t, xp=jnp))

        return jax.lax.map(per_n, cx)

    return run


@uses_float64
def grid_trajectories(
    x: np.ndarray,
    z: np.ndarray,
    n_grid: np.ndarray,
    m_grid: np.ndarray,
    loss: Any,
    prior: NormalInverseGammaPrior,
    dgp: tuple[float, float],
    test: np.ndarray,
    grid: GaussianGrid = GaussianGrid(),
) -> Criteria:
    """Criteria of the posterior predictive given x[:n] (log loss) and z[:m] (``loss``) for all n, m."""
    from synthinfer._jax import jnp

    mu, ls, xg, DC = _components(grid)
    n_grid, m_grid = np.asarray(n_grid, int), np.asarray(m_grid, int)
    if n_grid.max() > len(x) or m_grid.max() > len(z) or min(n_grid.min(), m_grid.min()) < 0:
        raise ParameterError("n_grid / m_grid exceed the data given")
    lp0 = _log_prior(prior, mu, ls)
    cx = np.cumsum(np.vstack([np.zeros(len(mu)), _per_row_losses(LogLoss(1.0), x[: n_grid.max()], mu, ls)]), axis=0)[n_grid]
    cz = np.cumsum(np.vstack([np.zeros(len(mu)), _per_row_losses(loss, z[: m_grid.max()], mu, ls)]), axis=0)[m_grid]
    args = (lp0, cx, cz, DC, xg, *_dgp_on_grid(xg, dgp, test))
    out = np.array(_grid_kernel()(*(jnp.asarray(a) for a in args)))  # (n, 3, m), a writable copy
    return Criteria(*np.moveaxis(out, 1, 0))


@uses_float64
def conjugate_predictive(
    x: np.ndarray, z: np.ndarray, n_grid: np.ndarray, m_grid: np.ndarray, w: float, prior: NormalInverseGammaPrior,
    dgp: tuple[float, float], test: np.ndarray, grid: GaussianGrid = GaussianGrid(),
) -> Criteria:
    """Exact criteria for the weighted log loss l_w: the predictive is Student-t (NIG posterior).

    p(x) = t_{2 a_n}(x; mu_n, b_n (kappa_n + 1) / (a_n kappa_n)), computed from running weighted
    sums, so every (n, m) costs O(1) besides evaluating the density on the x-grid.
    """
    xg = grid.x()
    n_grid, m_grid = np.asarray(n_grid, int), np.asarray(m_grid, int)
    kappa0 = 1.0 / prior.scale**2
    sx = np.r_[0, np.cumsum(x)][n_grid][:, None]
    sxx = np.r_[0, np.cumsum(x**2)][n_grid][:, None]
    sz = w * np.r_[0, np.cumsum(z)][m_grid][None, :]
    szz = w * np.r_[0, np.cumsum(z**2)][m_grid][None, :]
    W = n_grid[:, None] + w * m_grid[None, :]
    S1, S2 = sx + sz, sxx + szz
    ybar = np.where(W > 0, S1 / np.maximum(W, 1e-300), 0.0)
    SS = np.maximum(S2 - W * ybar**2, 0.0)
    kappa_n = kappa0 + W
    mu_n = (kappa0 * prior.mean + S1) / kappa_n
    a_n = prior.shape + W / 2
    b_n = prior.rate + SS / 2 + kappa0 * W * (ybar - prior.mean) ** 2 / (2 * kappa_n)
    scale = np.sqrt(b_n * (kappa_n + 1) / (a_n * kappa_n))
    dof = 2 * a_n
    dens = scipy.stats.t.pdf(xg, dof[..., None], mu_n[..., None], scale[..., None])
    cdf = scipy.stats.t.cdf(xg, dof[..., None], mu_n[..., None], scale[..., None])
    return Criteria(*(np.asarray(c) for c in _criteria_from_predictive(dens, cdf, xg, *_dgp_on_grid(xg, dgp, test))))
