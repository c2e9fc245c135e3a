"""A bijective reparametrisation of the NAPSU-MQ posterior for NUTS: one-sided cells.

Why. A marginal cell whose noisy count is within a few noise standard deviations of zero
gives a *one-sided* posterior in its parameter ``theta_j`` (NAPSU-MQ eq. 6 with the
``N(0, 10^2)`` prior): towards small probabilities the likelihood is flat and the prior alone
sets a spread of ~10 units, towards large ones the count ``n p_j ∝ e^{theta_j}`` meets the
Gaussian noise, a wall about one unit wide. After whitening by the Laplace approximation
(whose scale is the wall's) NUTS needs ~120 leapfrog steps per draw to cross the flat sides
of Adult's posterior at epsilon = 1.

What. For each flagged cell ``j``::

    theta_j = b_j + T(phi_j),   T(phi) = phi - (kappa_j - 1) (softplus(-phi) - log 2)

``T`` has slope 1 above ``phi = 0`` and ``kappa_j`` below it, smoothly, with ``T(0) = 0``.
``b_j`` is where the expected count is ``sigma_DP`` (the wall), and ``kappa_j`` is the
prior's scale below ``b_j``, so the flat side is compressed to unit scale and the wall side is
left as it is. ``T`` is strictly increasing (``T' = 1 + (kappa - 1) sigmoid(-phi) >= 1``), and
NUTS samples ``phi`` under the exact density ``p(theta(phi)) |T'(phi)|``: the draws of
``theta`` are from the same posterior, only the geometry changes.

Why not straighten the wall too. A first version used ``T ≈ log phi`` above 0, which makes
the likelihood Gaussian in ``phi`` (17 instead of ~120 gradients per draw on Adult) and passed
R-hat and ESS, but it was confidently wrong: it compresses *every* upward move of
``theta_j`` exponentially, also the moves along which the other parameters keep the cell's
count fixed. One such direction, the unmeasured cell ``(age 75-90, Married-civ-spouse)``
emptying (implied count ~140 +- 70, with the others compensating), holds ~5% of the mass of
``theta`` for ``(age 75-90, <=50K)`` below -6 in long plain NUTS runs; that version put ~2%
there. A linear right side keeps such directions as reachable as in plain NUTS.

Why the bend stays where and as wide as it is. The stiffest coordinates under this map are
cells 1-2 noise sd above zero whose data-informed bulk sits in the bend, where ``T'`` ~5
(``benchmarks/napsu/stiffness.py``). Moving the kink down to where the likelihood is ~0.1 nat
from its limit at count 0 (expected count ``e^{-2} sigma_DP^2 / (sigma_DP + s~^+)``) and
halving the bend's width (``benchmarks/napsu/variants/low_kink.patch``) looked better on one
Adult fit at epsilon = 1: 53 instead of 84 gradients per draw, bulk ESS 1240 instead of 405,
quantiles agreeing with long plain NUTS (max two-sample |z| 3.46 over 650), though with 46
divergent transitions. On another fit (``speed.py``'s) it gave 417 divergences, max R-hat
1.044 and bulk ESS 104 (``results/speed_low_kink.json``): not robust, so dropped.

The other coordinates ``R`` are whitened by the Laplace approximation's covariance, and each
flagged ``theta_j`` is shifted by its Laplace regression on them::

    theta_R = m_R + L_R z_R,   theta_S = b_S + T(phi_S) - H_SS^{-1} H_SR (theta_R - m_R)

(``H`` the Laplace precision, ``L_R L_R^T`` the Laplace covariance of ``R``), which keeps a
flagged cell's wall where the other parameters put it (``n p_j ≈ e^{theta_j + g(theta_R)}``
for a small cell, and at the wall ``H_jR / H_jj ≈ grad g``). The map is triangular, so its
log-Jacobian is a constant plus ``sum_j log T'(phi_j)``.

Which cells. Query ``j`` is a cell indicator, so ``s~_j`` estimates its count. A cell is
flagged when ``s~_j < threshold * sqrt(sigma_DP^2 + max(s~_j, 0))`` (default threshold 5):
zero count is within 5 standard deviations of what was observed. At 3, a cell 3.04
standard deviations above zero was left out, and its parameter, with 1% of its posterior mass
17 units below the median, had the lowest ESS on Adult; for a well-determined cell the map
is the identity (plus a shift) where its posterior mass is, so flagging too many is harmless. The choice uses the noisy
counts only (post-processing).

Dropped cells. The map works along coordinate axes; a near-empty cell *without* its own
parameter (dropped by the canonical parametrisation) has a one-sided direction that follows
no axis. NAPSU-MQ chooses the reference categories so that the dropped cells are the large
ones (:func:`synthinfer.napsu.reference.most_frequent_reference`), but in a rare row every
cell is small: on Adult, ``(age 75-90, Married-civ-spouse)`` (implied count ~140 +- 70) can
empty, the row's other marital statuses rising together while the age parameter compensates,
and the parameters along that direction had the lowest ESS (``theta`` of ``(age 75-90,
Widowed)``: Laplace sd 0.6, posterior 1% and 99% quantiles -6 and 12). Given the Jacobian
``J_D`` of the dropped cells' log-probabilities at the Laplace mean, the cells whose Laplace
log-count sd exceeds ``1 / threshold`` get their log-count direction (``J_c`` pulled back to
the whitened coordinates) as axes: an orthogonal rotation of those coordinates (QR with
these directions first), so their Laplace approximation stays ``N(0, I)`` and the diagonal
mass-matrix adaptation can stretch the emptying direction. No bend there: a general map
(``psi_c = J_c (theta - m)`` for every cell, kept or dropped, with ``T`` on each and the rest
whitened conditionally) raised bulk ESS on one Adult fit from ~300 to ~1000 but halved the
step size (0.03 against 0.06; 127 gradients per iteration against 69-79;
``benchmarks/napsu/results/sampler_variants.json``). Our guess, not verified: moving a
log-count coordinate far into its flat side drags the other parameters along the Laplace
regression, which only holds near the mode.

What the map cannot do. A cell a few noise sd above zero has its bulk on the slope-1 side
and an empty-cell plateau below the bend. ``T`` compresses the plateau to unit scale, not
below the bulk's width, so its density stays a few nats below the bulk's, and Hamiltonian
dynamics climbs such a drop only with the one direction's kinetic energy (``chi^2_1 / 2``).
:mod:`synthinfer.napsu.jumps` adds Metropolis-Hastings jumps between the two.

This transformation is our addition; the paper's NUTS (Section 5.2) runs on the
Laplace-whitened posterior only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synthinfer._jax import jax, jnp

_LOG2 = float(np.log(2.0))


@dataclass(frozen=True)
class OneSidedMap:
    """``theta = to_theta(u)`` for the NUTS position ``u``, all arrays of full length ``d``.

    ``theta = where(mask, offset + T(u), loc) + linear @ where(mask, 0, u)``: where ``mask``
    is true, ``u_j`` is the ``phi_j`` of a flagged cell. ``linear`` holds ``L_R`` in the
    unflagged rows and ``-H_SS^{-1} H_SR L_R`` in the flagged ones, zero in the flagged
    columns. Fixed shapes whatever the flagged set, so the sampler compiles once per
    network, not once per set.
    """

    mask: np.ndarray  # (d,) bool
    offset: np.ndarray  # (d,) b_j (0 where unflagged)
    kappa: np.ndarray  # (d,) left-side scale (2 where unflagged, unused)
    loc: np.ndarray  # (d,) Laplace mean
    linear: np.ndarray  # (d, d)

    @property
    def n_one_sided(self) -> int:
        return int(self.mask.sum())

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The map's numbers, traced arguments of the compiled sampler: NumPy arrays of fixed
        dtypes (the compiled program takes them as they are; ``jnp.asarray`` would compile
        a conversion program per shape first)."""
        return (np.asarray(self.mask, dtype=bool),
                *(np.asarray(a, dtype=np.float64) for a in (self.offset, self.kappa, self.loc, self.linear)))

    def to_u(self, theta: np.ndarray) -> np.ndarray:
        """The inverse map (NumPy; flagged coordinates by bisection, ``T`` is increasing)."""
        theta = np.asarray(theta, dtype=np.float64)
        u = np.zeros_like(theta)
        rest, one = ~self.mask, self.mask
        if rest.any():
            u[rest] = np.linalg.solve(self.linear[np.ix_(rest, rest)], theta[rest] - self.loc[rest])
        if one.any():
            target = theta[one] - self.offset[one] - (self.linear @ u)[one]
            kappa = jnp.asarray(self.kappa[one])
            # T(phi) > phi above 0 and T(phi) <= kappa phi + (kappa - 1) log 2 below 0
            lo = np.minimum(target, (target - self.kappa[one]) / self.kappa[one]) - 1.0
            hi = np.maximum(target, 0.0) + 1.0
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                below = np.asarray(_t(jnp.asarray(mid), kappa)) < target
                lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
            u[one] = 0.5 * (lo + hi)
        return u


def _t(phi: jax.Array, kappa: jax.Array) -> jax.Array:
    """``T(phi) = phi - (kappa - 1) (softplus(-phi) - log 2)``: slope 1 above 0, kappa below."""
    return phi - (kappa - 1.0) * (jax.nn.softplus(-phi) - _LOG2)


def _log_t_prime(phi: jax.Array, kappa: jax.Array) -> jax.Array:
    """``log T'(phi) = log(1 + (kappa - 1) sigmoid(-phi))``."""
    return jnp.log1p((kappa - 1.0) * jax.nn.sigmoid(-phi))


def to_theta(u: jax.Array, arrays: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
    """``(theta(u), log |d theta / d u|)`` (up to a constant) for :meth:`OneSidedMap.arrays`."""
    mask, offset, kappa, loc, linear = arrays
    phi = jnp.where(mask, u, 0.0)
    theta = jnp.where(mask, offset + _t(phi, kappa), loc) + linear @ jnp.where(mask, 0.0, u)
    # triangular map: L_R's determinant is constant, only the flagged coordinates' T' varies
    return theta, jnp.sum(jnp.where(mask, _log_t_prime(phi, kappa), 0.0))


def map_options(network, plateaus: bool) -> dict:
    """Keyword arguments of :func:`synthinfer.napsu.nuts.nuts_sample` and
    :func:`synthinfer.napsu.importance.importance_sample` for the one-sided map: the map (with
    the rotation onto the dropped cells' emptying directions) when the prior has the plateaus
    it is shaped for (``PosteriorProblem.plateaus``: the ``N(0, prior_sd^2)`` prior alone);
    none under the cell or interaction priors, which have none (docs/napsu-sampler.md, "The
    cell prior")."""
    if plateaus:
        return {"dropped_cell_jacobian": network.dropped_cell_log_prob_jacobian}
    return {"one_sided_threshold": -np.inf}


def one_sided_cells(s_tilde: np.ndarray, sigma_dp: float | np.ndarray, threshold: float = 5.0) -> np.ndarray:
    """The cells :func:`one_sided_map` flags: ``s~_j < threshold * sqrt(sigma_DP^2 + max(s~_j, 0))``."""
    s = np.asarray(s_tilde, dtype=np.float64)
    return s < threshold * np.sqrt(sigma_dp**2 + np.maximum(s, 0.0))


def one_sided_map(
    s_tilde: np.ndarray,
    sigma_dp: float | np.ndarray,
    n: int,
    mu_at_mode: np.ndarray,
    laplace_mean: np.ndarray,
    laplace_cov: np.ndarray,
    *,
    prior_sd: float,
    threshold: float = 5.0,
    dropped_jacobian: np.ndarray | None = None,
) -> OneSidedMap:
    """The map for the cells flagged by ``s~_j < threshold * sqrt(sigma_DP^2 + max(s~_j, 0))``.

    ``mu_at_mode`` is ``mu(theta*)`` at the Laplace mean ``theta*``; ``b_j = theta*_j +
    log(sigma_DP / (n mu_j(theta*)))`` places the expected count ``sigma_DP`` where ``T = 0``
    (holding the other parameters at the mode, where ``n p_j ∝ e^{theta_j}`` for a small cell).
    ``kappa_j = prior_sd^2 / max(prior_sd, -b_j)``: the ``N(0, prior_sd^2)`` prior below
    ``b_j`` has scale ``prior_sd`` when ``b_j`` is above about ``-prior_sd``, and the scale
    ``prior_sd^2 / |b_j|`` of its tail below that (floored at 2). ``dropped_jacobian`` (rows:
    the gradients at the Laplace mean of the log-probabilities of the cells the canonical
    parametrisation dropped) turns on the rotation of the unflagged coordinates described in
    the module docstring, for the dropped cells whose Laplace log-count sd exceeds
    ``1 / threshold``. With no cell flagged (or ``threshold = -inf``) this is plain whitening
    by the Laplace approximation. ``sigma_dp`` is a scalar or one noise sd per query.
    """
    s = np.asarray(s_tilde, dtype=np.float64)
    flagged = one_sided_cells(s, sigma_dp, threshold)
    d = s.size
    mean = np.asarray(laplace_mean, dtype=np.float64)
    expected = np.maximum(n * np.asarray(mu_at_mode, dtype=np.float64), 1e-300)
    offset = np.where(flagged, mean + np.log(sigma_dp / expected), 0.0)
    # floored at 2: a prior tail steeper than that is slightly over-stretched, which the
    # step-size and mass-matrix adaptation absorbs
    kappa = np.where(flagged, np.maximum(prior_sd**2 / np.maximum(prior_sd, -offset), 2.0), 2.0)
    rest, one = np.flatnonzero(~flagged), np.flatnonzero(flagged)
    cov = np.asarray(laplace_cov, dtype=np.float64)
    linear = np.zeros((d, d))
    if rest.size:
        chol_r = np.linalg.cholesky(cov[np.ix_(rest, rest)])
        linear[np.ix_(rest, rest)] = chol_r
        if one.size:
            prec = np.linalg.inv(cov)
            shift = -np.linalg.solve(prec[np.ix_(one, one)], prec[np.ix_(one, rest)])
            linear[np.ix_(one, rest)] = shift @ chol_r
    if dropped_jacobian is not None and rest.size:
        # Dropped cells (no own parameter) that can empty: rotate the whitened coordinates so
        # that each such cell's log count, to first order, moves along one axis, which the
        # diagonal mass-matrix adaptation can then stretch (a rotation: the Laplace
        # approximation of the rotated coordinates is still N(0, I)).
        jd = np.asarray(dropped_jacobian, dtype=np.float64)
        sd = np.sqrt(np.maximum(np.einsum("cd,de,ce->c", jd, cov, jd), 0.0))
        dirs = jd[sd * threshold > 1.0] @ linear[:, rest] if threshold > 0 else np.zeros((0, rest.size))
        if dirs.shape[0]:
            q = np.linalg.qr(np.hstack([dirs.T, np.eye(rest.size)]))[0]
            linear[:, rest] = linear[:, rest] @ q
    return OneSidedMap(flagged, offset, kappa, mean, linear)
