"""Pareto-smoothed importance sampling of NAPSU-MQ's posterior from a proposal built on the Laplace fit.

Why. NUTS costs thousands of gradients per chain, which at d ~ 1,000 canonical queries is
hours; the Laplace approximation is fast but can be far from the posterior (near-empty cells
make it one-sided). Importance sampling needs only log-posterior *values* at independent
proposal draws, ``S`` of them evaluated in batches by the network's value program
(:func:`synthinfer.napsu.likelihood.values`), and Pareto-smoothed importance sampling (PSIS;
Vehtari, Simpson, Gelman, Yao & Gabry 2024, "Pareto smoothed importance sampling", JMLR
25(72)) says from the same draws whether the result can be trusted: the estimated shape
``k-hat`` of the generalised Pareto tail of the weights. Above ``min(1 - 1/log10 S, 0.7)`` the
Monte Carlo error of the estimates falls too slowly with ``S`` for any practical number of
draws (Vehtari et al. 2024), and the proposal is refused.

The proposal ``q``. Sampling runs in the coordinates ``u`` of NUTS's map
(:func:`synthinfer.napsu.reparam.one_sided_map`): the Laplace fit whitens every parameter
except those of near-empty cells, which get the one-sided map ``theta_j = b_j + T(phi_j) - ...``
(and the emptying directions of the dropped cells are rotated onto axes). The posterior
density of ``u`` is ``p(theta(u) | s~) |d theta / d u|``. With no near-empty cell the map is
plain whitening by the Laplace fit and ``q`` is the multivariate Student-t ``t_df(theta*,
scale^2 Sigma_Laplace)`` (Geweke 1989, "Bayesian inference in econometric models using Monte
Carlo integration", Econometrica 57(6): heavier tails than the target keep the weights
bounded). Otherwise ``q`` is a product:

* the coordinates on which the posterior is close to Gaussian (all unflagged ones whose log
  density at ``u* +- 2 h_k e_k`` drops within :data:`SCREEN_TOLERANCE` nats of the Gaussian's
  ``2``) share one multivariate ``t_df`` with scales ``scale * h_k``;
* every other coordinate (the one-sided ones, and those the screen rejected) gets its own 1-D
  density: the exact log posterior along its axis through ``u*`` (a profile on a geometric grid
  of :data:`PROFILE_GRID` steps of ``h_k``, out to where it has dropped by
  :data:`PROFILE_DEPTH` nats), interpolated linearly in log density, with exponential tails.
  This is the split-t idea of Geweke (1989) carried to the whole 1-D shape: a one-sided cell's
  bulk is a narrow wall on one side and a flat plateau on the other, which no symmetric
  proposal covers at a usable efficiency.

``h_k`` is 1 on whitened coordinates and, on a one-sided coordinate, its Laplace standard
deviation in ``u`` (``sqrt((H_SS^-1)_jj) / T'(phi*_j)`` with ``H`` the Laplace precision). A
profile is a conditional density (the other coordinates at ``u*``), so ``q`` ignores how the
near-empty cells empty together; PSIS measures what that costs.

What it cannot do. Where many near-empty cells can empty together, the product of
conditional profiles misses their joint plateaus: on the paper's Adult model (d = 130) at
epsilon = 1, 44 one-sided cells, k-hat is ~1.5 and the proposal is refused; at epsilon = 4
(32 one-sided cells) k-hat is ~0.44 and the means agree with NUTS's within Monte Carlo error
(``benchmarks/napsu/importance_vs_nuts.py``).

Costs: at most ``2 d + 1`` log-posterior values for the screen, 20-40 per profiled coordinate
and ``S`` for the draws, all batched; no gradient.

Resampling. The released posterior is a set of equally weighted draws (``generate`` picks
draws uniformly), so the ``M = n_chains * num_samples`` draws are a systematic resample of the
``S`` weighted ones with the smoothed weights (Douc, Cappé & Moulines 2005, "Comparison of
resampling schemes for particle filtering"): one uniform for all ``M`` points on the weights'
CDF, so that each proposal draw appears ``M w_s`` times rounded down or up, where multinomial
resampling would add the noise of ``M`` independent picks. The resample is then shuffled, so
that any subset of it, a "chain" included, is a random one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import gammaln, logsumexp

from synthinfer._jax import jax, jnp, quick_compiler_options, uses_float64
from synthinfer.errors import ParameterError
from synthinfer.napsu.likelihood import PRIOR_SD, batch_size, evaluate_in_batches, is_block_program, posterior_args, values
from synthinfer.napsu.reparam import OneSidedMap, _log_t_prime, one_sided_map, to_theta
from synthinfer.napsu.structured import canonical_summary

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthinfer.napsu.laplace import LaplaceResult
    from synthinfer.napsu.network import MarkovNetwork
    from synthinfer.napsu.structured import Layout

__all__ = [
    "AxisDensity", "DEFAULT_DF", "DEFAULT_NUM_PROPOSALS", "DEFAULT_SCALE", "ImportanceResult", "Proposal",
    "build_proposal", "check_settings", "importance_sample", "systematic_resample",
]

#: Degrees of freedom of the Student-t part of the proposal.
DEFAULT_DF = 7.0
#: Spread of the proposal relative to the Laplace fit's (the profiles are stretched alike): a
#: little wider than the Laplace fit, as a conditional profile is narrower than the marginal
#: it stands for. Chosen with the near-empty-cell data of tests/test_napsu_importance.py at
#: n = 1,000-5,000 and epsilon 0.5-1, two noise draws each (df 4/7/20 x scale 1/1.1/1.25): at
#: df 7 and scale 1.1, k-hat <= 0.48 and PSIS ESS >= 725 of 4000 on all six.
DEFAULT_SCALE = 1.1
#: Proposal draws ``S`` (log-posterior values): enough for a stable k-hat (its tail fit uses
#: ``3 sqrt(S)`` ~ 190 weights) and a PSIS ESS above NUTS's 400 at the efficiencies measured
#: in tests/test_napsu_importance.py.
DEFAULT_NUM_PROPOSALS = 4000
#: The most proposal draws one fit makes when topping up a short ESS.
MAX_PROPOSALS_FACTOR = 4
#: The screen: a whitened coordinate is "Gaussian" when its log posterior at ``+-2`` drops
#: by ``2 +- SCREEN_TOLERANCE`` nats.
SCREEN_RADIUS = 2.0
SCREEN_TOLERANCE = 0.5
#: Profile grid, in units of the coordinate's Laplace scale ``h_k``, on each side of ``u*``
#: (geometric, so a one-sided coordinate's narrow wall and its plateau hundreds of ``h_k``
#: away are both resolved), cut at :data:`PROFILE_EXTENT` in ``u`` and at
#: :data:`PROFILE_DEPTH` nats below the profile's maximum.
PROFILE_GRID = np.array([0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512])
PROFILE_EXTENT = 12.0
PROFILE_DEPTH = 40.0


# ------------------------------------------------------------------------------------------
# The proposal
# ------------------------------------------------------------------------------------------
def _segment_log_mass(level: np.ndarray, slope: np.ndarray, width: np.ndarray) -> np.ndarray:
    """``log int_0^w exp(l + b t) dt`` per segment, stable for any sign and size of ``b w``."""
    bw = slope * width
    small = np.abs(bw) < 1e-8
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rising = level + bw + np.log(-np.expm1(-bw)) - np.log(np.abs(slope))
        falling = level + np.log(-np.expm1(bw)) - np.log(np.abs(slope))
    return np.where(small, level + np.log(width) + 0.5 * bw, np.where(bw > 0, rising, falling))


@dataclass(frozen=True)
class AxisDensity:
    """A 1-D density whose log is linear between the grid points ``x`` (values ``level``) and
    decays exponentially beyond them (rates ``left_rate``, ``right_rate``): exact sampling by
    inverse CDF, exact log density."""

    x: np.ndarray
    level: np.ndarray
    left_rate: float
    right_rate: float

    @classmethod
    def from_profile(cls, x: np.ndarray, log_density: np.ndarray, depth: float = PROFILE_DEPTH) -> AxisDensity:
        """The density through a profile's finite points, cut one point beyond where it is
        ``depth`` nats below its maximum. Tail rates: half the end segment's descent (a tail
        heavier than the profile's), at least ``1 / span`` so that the tails are proper."""
        ok = np.isfinite(log_density)
        x, lp = np.asarray(x, float)[ok], np.asarray(log_density, float)[ok]
        lp = lp - lp.max()
        inside = np.flatnonzero(lp > -depth)
        lo, hi = max(inside[0] - 1, 0), min(inside[-1] + 1, x.size - 1)
        # the end points may lie far below: floored, the proposal only gets heavier there
        x, lp = x[lo:hi + 1], np.maximum(lp[lo:hi + 1], -depth - 20.0)
        if x.size < 2:
            raise ParameterError("log_density must have at least two finite values")
        span = x[-1] - x[0]
        ends = np.diff(lp)[[0, -1]] / np.diff(x)[[0, -1]]
        return cls(x, lp, max(ends[0] / 2.0, 1.0 / span), max(-ends[1] / 2.0, 1.0 / span))

    @property
    def _slopes(self) -> np.ndarray:
        return np.diff(self.level) / np.diff(self.x)

    @property
    def _log_masses(self) -> np.ndarray:
        """Log masses of the left tail, the segments and the right tail."""
        mid = _segment_log_mass(self.level[:-1], self._slopes, np.diff(self.x))
        return np.concatenate([[self.level[0] - math.log(self.left_rate)], mid,
                               [self.level[-1] - math.log(self.right_rate)]])

    def log_pdf(self, y: np.ndarray) -> np.ndarray:
        """The normalised log density at each ``y``."""
        x, lv, b = self.x, self.level, self._slopes
        k = np.clip(np.searchsorted(x, y) - 1, 0, x.size - 2)
        out = lv[k] + b[k] * (y - x[k])
        out = np.where(y < x[0], lv[0] + self.left_rate * (y - x[0]), out)
        out = np.where(y > x[-1], lv[-1] - self.right_rate * (y - x[-1]), out)
        return out - logsumexp(self._log_masses)

    def sample(self, rng: np.random.Generator, num: int) -> np.ndarray:
        """``num`` draws: a piece (tail or segment) by its mass, then the inverse CDF within it."""
        lm = self._log_masses
        p = np.exp(lm - logsumexp(lm))
        piece = rng.choice(p.size, size=num, p=p / p.sum())
        v = rng.uniform(size=num)
        out = np.empty(num)
        left, right = piece == 0, piece == p.size - 1
        out[left] = self.x[0] + np.log(v[left]) / self.left_rate
        out[right] = self.x[-1] - np.log(v[right]) / self.right_rate
        mid = ~(left | right)
        k = piece[mid] - 1
        b, w, vm = self._slopes[k], np.diff(self.x)[k], v[mid]
        bw = b * w
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # inverse CDF of exp(b t) on [0, w], written so that neither sign of b overflows
            t = np.where(np.abs(bw) < 1e-8, vm * w,
                         np.where(bw < 0, np.log1p(vm * np.expm1(bw)) / b, w + np.log(vm + (1 - vm) * np.exp(-bw)) / b))
        out[mid] = self.x[k] + t
        return out


@dataclass(frozen=True)
class Proposal:
    """``q(u)``: ``u_R = center_R + spread_R * t`` with ``t ~ t_df(0, I)`` on the regular
    coordinates ``R``, and ``u_k = center_k + spread_k * y_k``, ``y_k ~ axes[k]`` (an
    :class:`AxisDensity` in units of ``spread_k``) on each profiled one."""

    center: np.ndarray
    spread: np.ndarray
    df: float
    axes: dict[int, AxisDensity] = field(default_factory=dict)

    @property
    def regular(self) -> np.ndarray:
        return np.setdiff1d(np.arange(self.center.size), np.fromiter(self.axes, int, len(self.axes)))

    def sample(self, rng: np.random.Generator, num: int) -> tuple[np.ndarray, np.ndarray]:
        """``num`` draws of ``u`` and their ``log q(u)``."""
        u = np.repeat(self.center[None], num, axis=0)
        reg = self.regular
        p, nu = reg.size, self.df
        z = rng.standard_normal((num, p)) / np.sqrt(rng.chisquare(nu, num) / nu)[:, None]
        u[:, reg] += z * self.spread[reg]
        log_q = (gammaln((nu + p) / 2) - gammaln(nu / 2) - 0.5 * p * math.log(nu * math.pi)
                 - 0.5 * (nu + p) * np.log1p(np.sum(z**2, axis=1) / nu) - np.sum(np.log(self.spread[reg])))
        for k, axis in self.axes.items():
            y = axis.sample(rng, num)
            u[:, k] += y * self.spread[k]
            log_q = log_q + axis.log_pdf(y) - math.log(self.spread[k])
        return u, log_q


def _map_program(network: MarkovNetwork) -> Callable:
    """``u (k, d), *map arrays -> (k, d + 1)``: ``theta(u)`` and ``log |d theta / d u|`` side by
    side (:func:`synthinfer.napsu.reparam.to_theta`), one compiled program per network and block
    size (the map's numbers are traced arguments)."""

    def make():
        # a closure over nothing of the network's, as in synthinfer.napsu.likelihood
        def program(u, *arrays):
            theta, log_jac = jax.vmap(lambda x: to_theta(x, arrays))(u)
            return jnp.concatenate([theta, log_jac[:, None]], axis=1)

        return jax.jit(program, compiler_options=quick_compiler_options())

    return network.programs.get(("importance", "to_theta"), make)


class _TargetU:
    """The log posterior density of ``u``: ``log p(theta(u) | s~) + log |d theta / d u|``
    (up to a constant), through the network's value program
    (:func:`synthinfer.napsu.likelihood.values`). Calls of the compiled block programs are
    padded to whole blocks of :func:`synthinfer.napsu.likelihood.batch_size` points, so that
    they compile for one block shape whatever the number of points."""

    def __init__(self, network: MarkovNetwork, umap: OneSidedMap, args: tuple, layout: Layout | None = None):
        self.arrays = umap.arrays()
        self.map = _map_program(network)
        self.program = values(network, "neg_log_posterior", layout)
        self.args = args
        self.size = batch_size(network)
        self.evaluations = 0

    def __call__(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log density, theta)`` at each row of ``u``; ``-inf`` where it is not finite."""
        k = u.shape[0]
        whole = -(-k // self.size) * self.size
        padded = np.concatenate([u, np.repeat(u[:1], whole - k, axis=0)]) if whole > k else u
        theta_jac = evaluate_in_batches(self.map, padded, self.arrays, self.size)
        theta = theta_jac[:, :-1]
        # the padding is for block programs; a loop over points (the CPU default) skips it
        nlp = evaluate_in_batches(self.program, theta if is_block_program(self.program) else theta[:k], self.args,
                                  self.size)[:k]
        self.evaluations += k
        out = -nlp + theta_jac[:k, -1]
        return np.where(np.isfinite(out), out, -np.inf), theta[:k]


def _laplace_spread(umap: OneSidedMap, center: np.ndarray, laplace: LaplaceResult) -> np.ndarray:
    """``h_k``: 1 on whitened coordinates; on a one-sided coordinate ``j``, its Laplace sd in
    ``u``, ``sqrt((H_SS^-1)_jj) / T'(phi*_j)`` (``theta_S`` given ``theta_R`` has covariance
    ``H_SS^-1``, and ``d theta_j / d phi_j = T'``)."""
    h = np.ones(center.size)
    one = umap.mask
    if one.any():
        prec = np.linalg.inv(np.asarray(laplace.cov, dtype=np.float64))
        cond_var = np.diag(np.linalg.inv(prec[np.ix_(one, one)]))
        slope = np.exp(np.asarray(_log_t_prime(jnp.asarray(center[one]), jnp.asarray(umap.kappa[one]))))
        h[one] = np.sqrt(cond_var) / slope
    return h


def build_proposal(
    target: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    umap: OneSidedMap,
    laplace: LaplaceResult,
    *,
    df: float = DEFAULT_DF,
    scale: float = DEFAULT_SCALE,
    profile: bool = True,
) -> Proposal:
    """The proposal of the module docstring around ``u* = umap.to_u(laplace.mean)``.

    ``target(u) -> (log density of u, theta)`` evaluates a block of points. ``scale``
    multiplies every spread (``scale^2`` times the Laplace covariance where the map is plain
    whitening). ``profile=False`` leaves out the screen and the profiles: the Student-t on
    every coordinate.
    """
    center = umap.to_u(np.asarray(laplace.mean, dtype=np.float64))
    h = _laplace_spread(umap, center, laplace)
    d = center.size
    axes: dict[int, AxisDensity] = {}
    if profile:
        unflagged = np.flatnonzero(~umap.mask)
        steps = np.zeros((2 * unflagged.size, d))
        steps[np.arange(unflagged.size), unflagged] = SCREEN_RADIUS
        steps[unflagged.size + np.arange(unflagged.size), unflagged] = -SCREEN_RADIUS
        lp = target(np.concatenate([center[None], center + steps]))[0]
        drop = lp[0] - lp[1:].reshape(2, -1)
        off = np.abs(drop - SCREEN_RADIUS**2 / 2).max(axis=0) > SCREEN_TOLERANCE
        irregular = np.sort(np.concatenate([np.flatnonzero(umap.mask), unflagged[off]]))
        grids = []
        for k in irregular:
            g = np.concatenate([-PROFILE_GRID[::-1], [0.0], PROFILE_GRID])
            grids.append(g[np.abs(g * h[k]) <= PROFILE_EXTENT])
        if irregular.size:
            points = np.concatenate([np.repeat(center[None], g.size, axis=0) + np.outer(g * h[k], np.eye(d)[k])
                                     for k, g in zip(irregular, grids)])
            lp = target(points)[0]
            start = 0
            for k, g in zip(irregular, grids):
                axes[int(k)] = AxisDensity.from_profile(g, lp[start:start + g.size])
                start += g.size
    return Proposal(center, scale * h, float(df), axes)


# ------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------
def systematic_resample(log_weights: np.ndarray, num: int, rng: np.random.Generator) -> np.ndarray:
    """``num`` indices drawn with probabilities ``softmax(log_weights)`` by systematic
    resampling (one uniform offset, ``num`` evenly spaced points on the weights' CDF), in random
    order."""
    w = np.exp(log_weights - logsumexp(log_weights))
    cdf = np.cumsum(w)
    cdf[-1] = 1.0
    idx = np.searchsorted(cdf, (rng.uniform() + np.arange(num)) / num, side="right")
    return rng.permutation(np.minimum(idx, w.size - 1))


@dataclass
class ImportanceResult:
    """Equally weighted draws of theta ``(chains, draws, d)`` resampled from ``S`` weighted
    proposal draws, with PSIS's diagnostics."""

    draws: np.ndarray
    k_hat: float
    k_hat_threshold: float
    ess: float  # PSIS effective sample size 1 / sum(w~_s^2) of the smoothed, normalised weights
    ess_per_parameter: np.ndarray  # (d,) effective sample size of each parameter's mean (_parameter_ess)
    num_proposals: int
    df: float
    scale: float
    n_one_sided: int
    n_profiled: int
    log_density_evaluations: int  # screen + profiles + proposal draws
    zero_weight_draws: int  # proposal draws where the log posterior was not finite
    seconds: float

    @property
    def reliable(self) -> bool:
        """PSIS's criterion: ``k_hat <= min(1 - 1/log10 S, 0.7)``."""
        return self.k_hat <= self.k_hat_threshold

    @property
    def ess_min(self) -> float:
        return float(np.min(self.ess_per_parameter))

    def info(self) -> dict[str, Any]:
        """JSON-ready diagnostics (no per-parameter arrays)."""
        return {
            "k_hat": self.k_hat, "k_hat_threshold": self.k_hat_threshold, "ess": self.ess, "ess_min": self.ess_min,
            "num_proposals": self.num_proposals, "proposal_df": self.df, "proposal_scale": self.scale,
            "one_sided_parameters": self.n_one_sided, "profiled_parameters": self.n_profiled,
            "log_density_evaluations": self.log_density_evaluations, "zero_weight_draws": self.zero_weight_draws,
            "seconds": self.seconds,
        }


def _psis(log_weights: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """Smoothed normalised log weights, k-hat, its threshold and the PSIS ESS."""
    from synthinfer.weights.diagnostics import pareto_smooth

    ps = pareto_smooth(log_weights - np.max(log_weights), warn=False)
    k = ps.k_hat if math.isfinite(ps.k_hat) else math.inf
    return ps.log_weights, k, ps.threshold, float(1.0 / np.sum(np.exp(2.0 * ps.log_weights)))


def _parameter_ess(theta: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """Effective sample size of the self-normalised estimate of each parameter's mean.

    With normalised weights ``w~_s`` the estimate ``sum_s w~_s theta_s`` has asymptotic
    variance ``sum_s w~_s^2 (theta_s - m)^2`` (delta method), against ``v / ESS`` for ``ESS``
    independent posterior draws of variance ``v = sum_s w~_s (theta_s - m)^2``; so ``ESS_i =
    v_i / sum_s w~_s^2 (theta_si - m_i)^2`` (Vehtari et al. 2024, Section 3.4: the global ``1 /
    sum w~^2`` can overstate it for a parameter whose far tail carries the large weights).
    """
    w = np.exp(log_weights)
    dev2 = (theta - w @ theta) ** 2
    return (w @ dev2) / np.maximum((w**2) @ dev2, np.finfo(float).tiny)


def check_settings(**settings: Any) -> None:
    """:class:`ParameterError` naming the first bad setting: ``num_proposals`` an integer of at
    least 100 (PSIS's tail fit needs a few dozen weights), ``n_chains``/``num_samples``
    positive integers, ``df``/``scale`` positive finite numbers."""
    for name, value in settings.items():
        if name in ("df", "scale"):
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ParameterError(f"{name} must be a positive number, got {value!r}")
        else:
            low = 100 if name == "num_proposals" else 1
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ParameterError(f"{name} must be an integer >= {low}, got {value!r}")


@uses_float64
def importance_sample(
    network: MarkovNetwork,
    s_tilde: np.ndarray,
    sigma_dp: float | np.ndarray,
    n: int,
    laplace: LaplaceResult,
    *,
    layout: Layout | None = None,
    prior_sd: float = PRIOR_SD,
    cell_prior: float = 0.0,
    interaction_sd: float | None = None,
    n_chains: int = 4,
    num_samples: int = 2000,
    num_proposals: int = DEFAULT_NUM_PROPOSALS,
    min_ess: float = 0.0,
    df: float = DEFAULT_DF,
    scale: float = DEFAULT_SCALE,
    profile: bool = True,
    one_sided_threshold: float = 5.0,
    dropped_cell_jacobian: Callable[[jax.Array], jax.Array] | None = None,
    rng: np.random.Generator,
) -> ImportanceResult:
    """PSIS of ``p(theta | s~)`` from :func:`build_proposal`'s proposal.

    Draws ``num_proposals`` points of ``u``, weights them by ``log p(theta(u) | s~) +
    log |d theta / d u| - log q(u)``, Pareto-smooths the weights (ArviZ's ``psislw`` through
    :func:`synthinfer.weights.diagnostics.pareto_smooth`) and resamples ``n_chains *
    num_samples`` equally weighted draws (:func:`systematic_resample`). When the smallest
    effective sample size of a parameter's mean (:func:`_parameter_ess`) is below ``min_ess``
    while k-hat is acceptable, more draws are added (the same proposal: the pooled sample is
    one importance sample), up to ``MAX_PROPOSALS_FACTOR * num_proposals`` in all.
    The map's settings (``one_sided_threshold``, ``dropped_cell_jacobian``) are NUTS's
    (:func:`synthinfer.napsu.nuts.nuts_sample`), and so is ``layout``: with one, ``s_tilde`` and
    ``sigma_dp`` are the measured values and their noise sds in its order (AIM's measurements),
    the target is eq. 6 on every measured value, and the map reads each canonical query's
    inverse-variance combination of them. The caller decides what a k-hat above the
    threshold means (:attr:`ImportanceResult.reliable`).
    """
    check_settings(df=df, scale=scale, num_proposals=num_proposals, n_chains=n_chains, num_samples=num_samples)
    t0 = time.perf_counter()
    mean = np.asarray(laplace.mean, dtype=np.float64)
    mu_mode = np.asarray(network.mean_and_cov(jnp.asarray(mean))[0])
    jd = None if dropped_cell_jacobian is None else np.asarray(dropped_cell_jacobian(jnp.asarray(mean)))
    s_map, sigma_map = ((s_tilde, sigma_dp) if layout is None
                        else canonical_summary(network.queries.canonical, layout, s_tilde, sigma_dp))
    s_map, sigma_map = network.queries.summarise(s_map, sigma_map)  # per parameter (a tie: its sum)
    umap = one_sided_map(s_map, sigma_map, n, mu_mode, mean, laplace.cov, prior_sd=prior_sd,
                         threshold=one_sided_threshold, dropped_jacobian=jd)
    target = _TargetU(network, umap, posterior_args(s_tilde, sigma_dp, n, prior_sd, cell_prior, interaction_sd), layout)
    proposal = build_proposal(target, umap, laplace, df=df, scale=scale, profile=profile)

    def draw(num: int) -> tuple[np.ndarray, np.ndarray]:
        u, log_q = proposal.sample(rng, num)
        log_p, theta = target(u)
        return theta, log_p - log_q

    theta, log_w = draw(int(num_proposals))
    smoothed, k, threshold, ess = _psis(log_w)
    ess_i = _parameter_ess(theta, smoothed)
    cap = MAX_PROPOSALS_FACTOR * int(num_proposals)
    if k <= threshold and ess_i.min() < min_ess and theta.shape[0] < cap:
        # ESS grows in proportion to the draws: one batch sized to reach min_ess, 10% to spare
        extra = min(cap, math.ceil(1.1 * theta.shape[0] * min_ess / max(ess_i.min(), 1.0))) - theta.shape[0]
        more_theta, more_w = draw(extra)
        theta, log_w = np.concatenate([theta, more_theta]), np.concatenate([log_w, more_w])
        smoothed, k, threshold, ess = _psis(log_w)
        ess_i = _parameter_ess(theta, smoothed)
    pick = systematic_resample(smoothed, n_chains * num_samples, rng)
    return ImportanceResult(
        draws=theta[pick].reshape(n_chains, num_samples, -1), k_hat=k, k_hat_threshold=threshold, ess=ess,
        ess_per_parameter=ess_i,
        num_proposals=int(theta.shape[0]), df=float(df), scale=float(scale), n_one_sided=umap.n_one_sided,
        n_profiled=len(proposal.axes), log_density_evaluations=target.evaluations,
        zero_weight_draws=int(np.sum(~np.isfinite(log_w))), seconds=time.perf_counter() - t0,
    )


# ------------------------------------------------------------------------------------------
# The backend
# ------------------------------------------------------------------------------------------
