"""Independent Metropolis-Hastings jumps between a near-empty cell's bulk and its plateau.

Why. A marginal cell whose noisy count ``s~_j`` is a few noise standard deviations above
zero has a two-part posterior in its parameter: a *bulk* where the expected count matches
``s~_j`` and a *plateau* where the cell is empty, which the likelihood (NAPSU-MQ eq. 6)
penalises by only ``~ s~_j^2 / (2 sigma_DP^2)`` nats while the ``N(0, 10^2)`` prior lets it
stretch over tens of units of ``theta_j``. On Adult at epsilon = 1, ``(age 60-75,
Federal-gov)`` (``s~ = 86``, ``sigma_DP = 25``) has 5.5% of its mass there, behind a ~6-nat
drop. Hamiltonian dynamics can only climb that drop with the kinetic energy of the one
direction, ``chi^2_1 / 2``, whatever the mass matrix: in 2000 NUTS draws the four chains
crossed between bulk and plateau 2 to 8 times each, and the chains disagreed on the
plateau's share (2.5% to 8.6%), which is what failed R-hat and ESS.

What. After every NUTS transition, for each such cell ``j`` in turn, an independence
Metropolis-Hastings update of its coordinate ``phi_j`` of the one-sided map
(:mod:`synthinfer.napsu.reparam`), the others held fixed: propose ``phi'`` from a
histogram ``q_j`` and accept with probability
``min(1, p(u') q_j(phi_j) / (p(u) q_j(phi'_j)))`` (Tierney 1994). Each update leaves the
posterior invariant, so NUTS followed by the updates still targets the exact posterior; the
updates only add routes between bulk and plateau. ``q_j`` has ``BINS`` bins of equal mass
under ``0.8 p_j + 0.2 p_j^{1/4} / Z``, where ``p_j`` is the cell's 1-D profile in ``phi_j``
at the Laplace mean: the small-cell approximation ``n mu_j ∝ e^{theta_j}``, the cell's own
term of eq. 6 (``N(s~_j | c, sigma_DP^2 + c)``), the prior, and the map's ``log T'``. The
tempered part keeps proposals where the profile understates the posterior. Outside the
histogram's range ``q_j = 0``: a chain there is moved by NUTS only (still exact).

Which cells. One-sided cells whose profile puts between ``1e-4`` and ``1/2`` of its mass on
counts below ``sigma_DP / 2``: a plateau that matters beside a bulk away from zero. (Where
the plateau is the bulk, NUTS on the map moves freely: the other side is a wall, not a
second region.) Each update costs one log-density evaluation (no gradient), and one gradient
recomputation per iteration when any update was accepted.

This move is our addition; the paper's NUTS (Section 5.2) has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.napsu.reparam import OneSidedMap, _log_t_prime, _t

#: Bins of each proposal histogram (fixed: the sampler compiles once per network).
BINS = 48
_GRID = np.linspace(-40.0, 20.0, 24001)  # phi; T has slope >= 1, so this covers theta in [b - 40 kappa, b + 20]


@dataclass(frozen=True)
class PlateauJumps:
    """Cells to update (``index[:count]``) and their histogram edges ``edges[j]`` in ``phi_j``."""

    index: np.ndarray  # (d,) int, the updated coordinates first
    count: int
    edges: np.ndarray  # (d, BINS + 1), increasing in each row that is used

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The proposal's numbers, traced arguments of the compiled sampler (NumPy arrays of
        fixed dtypes, as :meth:`OneSidedMap.arrays`)."""
        return (np.asarray(self.index, dtype=np.int32), np.asarray(self.count, dtype=np.int32),
                np.asarray(self.edges, dtype=np.float64))

    @classmethod
    def none(cls, d: int) -> PlateauJumps:
        return cls(np.arange(d), 0, np.tile(np.linspace(0.0, 1.0, BINS + 1), (d, 1)))


def _profile(phi: np.ndarray, s: float, sigma_dp: float, count_at_mode: float, theta_mode: float,
             offset: float, kappa: float, prior_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Log profile density of ``phi_j`` (unnormalised) and the expected count along ``phi``."""
    theta = offset + np.asarray(_t(jnp.asarray(phi), kappa))
    count = count_at_mode * np.exp(np.minimum(theta - theta_mode, 50.0))
    var = sigma_dp**2 + count
    logp = (-0.5 * (s - count) ** 2 / var - 0.5 * np.log(var) - 0.5 * (theta / prior_sd) ** 2
            + np.asarray(_log_t_prime(jnp.asarray(phi), kappa)))
    return logp, count


def plateau_jumps(umap: OneSidedMap, s_tilde: np.ndarray, sigma_dp: float | np.ndarray, n: int,
                  mu_at_mode: np.ndarray, *, prior_sd: float) -> PlateauJumps:
    """The jump proposals for the one-sided cells of ``umap`` with a plateau worth visiting
    (``sigma_dp``: a scalar or one noise sd per query)."""
    s = np.asarray(s_tilde, dtype=np.float64)
    d = s.size
    sd = np.broadcast_to(np.asarray(sigma_dp, dtype=np.float64), s.shape)
    edges = PlateauJumps.none(d).edges  # a fresh array
    chosen = []
    for j in np.flatnonzero(umap.mask):
        logp, count = _profile(_GRID, s[j], float(sd[j]), n * float(mu_at_mode[j]), float(umap.loc[j]),
                               float(umap.offset[j]), float(umap.kappa[j]), prior_sd)
        p = np.exp(logp - logp.max())
        p /= p.sum()
        plateau = float(p[count < sd[j] / 2].sum())
        if not 1e-4 < plateau < 0.5:
            continue
        tempered = np.exp(0.25 * (logp - logp.max()))
        g = 0.8 * p + 0.2 * tempered / tempered.sum()
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (g[1:] + g[:-1]))])
        cdf /= cdf[-1]
        row = np.interp(np.linspace(1e-9, 1 - 1e-9, BINS + 1), cdf, _GRID)
        if np.all(np.diff(row) > 0):
            edges[j] = row
            chosen.append(j)
    rest = sorted(set(range(d)) - set(chosen))
    return PlateauJumps(np.array(chosen + rest, dtype=np.int64), len(chosen), edges)


def jump_sweep(key: jax.Array, u: jax.Array, logp: jax.Array, logdensity, index: jax.Array, count: jax.Array,
               edges: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One independence Metropolis-Hastings update of each ``u[index[i]]``, ``i < count``.

    Returns ``(u, log density at u, number accepted)``. ``q(phi)`` is ``1 / (BINS * width)``
    inside the histogram and 0 outside; the acceptance ratio is ``p(u') q(phi_j) / (p(u)
    q(phi'))``, which is 0 when the current ``phi_j`` is outside (the reverse move is
    impossible) and rejects a NaN log density.
    """
    bins = edges.shape[1] - 1

    def body(i, carry):
        u, logp, accepted = carry
        j = index[i]
        e = edges[j]
        k_bin, k_pos, k_acc = jax.random.split(jax.random.fold_in(key, i), 3)
        b = jax.random.randint(k_bin, (), 0, bins)
        new = e[b] + jax.random.uniform(k_pos, dtype=e.dtype) * (e[b + 1] - e[b])
        log_q_new = -jnp.log(e[b + 1] - e[b])
        cur = u[j]
        k = jnp.clip(jnp.searchsorted(e, cur) - 1, 0, bins - 1)
        inside = (cur >= e[0]) & (cur <= e[bins])
        log_q_cur = jnp.where(inside, -jnp.log(e[k + 1] - e[k]), -jnp.inf)
        proposal = u.at[j].set(new)
        logp_new = logdensity(proposal)
        ok = jnp.log(jax.random.uniform(k_acc, dtype=e.dtype)) < (logp_new - log_q_new) - (logp - log_q_cur)
        return jnp.where(ok, proposal, u), jnp.where(ok, logp_new, logp), accepted + ok.astype(jnp.int32)

    return jax.lax.fori_loop(0, count, body, (u, logp, jnp.asarray(0, jnp.int32)))
