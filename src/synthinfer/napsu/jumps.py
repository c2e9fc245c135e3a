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

Under the interaction or cell prior (no one-sided map: :func:`axis_jumps`). A cell's parameter
can still have two regions there. On Adult, with Husband as relationship's reference, a divorced
person's interactions with every relationship make up for the structurally empty (Divorced,
Husband) cell; where one of those cells is small, e.g. (Divorced, Other-relative), 222 against a
noise sd of 45, its interaction has a bulk near 4.7 and a second mode near the interaction
prior's centre 0, where the cell is empty, behind a drop of ~5.6 nats. A fifth of the mass sits
there, and NUTS crossed between the two only a few times per pass (docs/napsu-sampler.md). The
update then moves ``theta_j`` itself, the other parameters held fixed: the NUTS position ``u``
maps linearly to ``theta = loc + L u``, so the line ``u + t L^{-1} e_j`` is where only
``theta_j`` changes, and the update is an exact Metropolis-within-Gibbs step on ``theta_j``'s
conditional. Its histogram comes from that conditional's profile at the Laplace mean, the log
posterior itself evaluated on a grid along the axis, for the parameters of cells 2 to 5 noise sd
above zero whose profile rises again below the bulk (a second mode). A long tail that only falls
away from the mode gets no jump: NUTS crosses it well.

Along a line the draws show (:func:`line_jumps`). A second region may need the other parameters
to move with the cell's: with (Widowed, Husband) structurally empty, (Widowed, Unmarried)'s
interaction (905 against a noise sd of 186) has a second region near 0 where other interactions
of Widowed and of Unmarried move with it, and along its own axis at the Laplace mean that region
is 20 nats down, so no axis jump; the chains reach it (a tenth of the mass) but cross over
rarely. Where a convergence check fails, the parameters that mixed worst are profiled along
their regression lines in the draws so far (how the others moved with them), and one whose
profile there rises again gets the same update along that line.

This move is our addition; the paper's NUTS (Section 5.2) has none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from synthinfer._jax import jax, jnp
from synthinfer.napsu.reparam import OneSidedMap, _log_t_prime, _t

#: Bins of each proposal histogram (fixed: the sampler compiles once per network).
BINS = 48
_GRID = np.linspace(-40.0, 20.0, 24001)  # phi; T has slope >= 1, so this covers theta in [b - 40 kappa, b + 20]


@dataclass(frozen=True)
class PlateauJumps:
    """Coordinates to update (``index[:count]``, in turn, a coordinate as often as it appears)
    and their histogram edges ``edges[j]``.

    The updated value of coordinate ``j`` is ``x_j = start[j] + rows[j] . u`` and a move to
    ``x'`` is ``u + (x' - x_j) directions[j]`` (``rows[j] . directions[j] = 1``): for the one-sided
    map's cells the NUTS coordinate ``u_j`` itself (zero, the identity's rows), under the other
    priors the parameter ``theta_j`` (the Laplace mean, the whitening's rows and the columns of
    its inverse).
    """

    index: np.ndarray  # (d,) int, the updated coordinates first
    count: int
    edges: np.ndarray  # (d, BINS + 1), increasing in each row that is used
    start: np.ndarray  # (d,)
    rows: np.ndarray  # (d, d)
    directions: np.ndarray  # (d, d)

    @property
    def parameters(self) -> int:
        """How many coordinates get jumps (a line jump's is in ``index[:count]`` once per try)."""
        return len(set(np.asarray(self.index[:self.count]).tolist()))

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The proposal's numbers, traced arguments of the compiled sampler (NumPy arrays of
        fixed dtypes, as :meth:`OneSidedMap.arrays`)."""
        return (np.asarray(self.index, dtype=np.int32), np.asarray(self.count, dtype=np.int32),
                *(np.asarray(a, dtype=np.float64) for a in (self.edges, self.start, self.rows, self.directions)))

    @classmethod
    def none(cls, d: int) -> PlateauJumps:
        return cls(np.arange(d), 0, np.tile(np.linspace(0.0, 1.0, BINS + 1), (d, 1)), np.zeros(d), np.eye(d), np.eye(d))


def _histogram_edges(grid: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """``BINS + 1`` edges of equal mass under ``0.8 p + 0.2 p^{1/4} / Z`` on ``grid`` (increasing,
    not necessarily evenly spaced; ``logp`` unnormalised): the tempered part keeps proposals where
    the profile understates the posterior."""
    p = np.exp(logp - logp.max())
    tempered = np.exp(0.25 * (logp - logp.max()))
    widths = np.diff(grid)

    def integral(f: np.ndarray) -> float:  # trapezoid rule on the grid
        return float(np.sum(0.5 * (f[1:] + f[:-1]) * widths))

    g = 0.8 * p / integral(p) + 0.2 * tempered / integral(tempered)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (g[1:] + g[:-1]) * widths)])
    cdf /= cdf[-1]
    return np.interp(np.linspace(1e-9, 1 - 1e-9, BINS + 1), cdf, grid)


def _share_below(grid: np.ndarray, logp: np.ndarray, i: int) -> float:
    """The share of a profile's mass (trapezoid rule, ``logp`` unnormalised) on ``grid[:i + 1]``."""
    p = np.exp(logp - logp.max())
    mass = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(grid))])
    return float(mass[i] / mass[-1])


def _profile_edges(grid: np.ndarray, logp: np.ndarray) -> np.ndarray | None:
    """:func:`_histogram_edges` of a log-posterior profile (floored 700 nats below its top, where
    ``exp`` underflows), or None where the edges are not strictly increasing."""
    row = _histogram_edges(grid, np.maximum(logp, logp.max() - 700.0))
    return row if np.all(np.diff(row) > 0) else None


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
        row = _histogram_edges(_GRID, logp)
        if np.all(np.diff(row) > 0):
            edges[j] = row
            chosen.append(j)
    rest = sorted(set(range(d)) - set(chosen))
    return PlateauJumps(np.array(chosen + rest, dtype=np.int64), len(chosen), edges, np.zeros(d), np.eye(d), np.eye(d))


#: Points of :func:`axis_jumps`'s profiles below a parameter's bulk: a coarse one for every
#: candidate, a fine one where the coarse one has a second mode.
COARSE_POINTS, PROFILE_POINTS = 8, 32
#: The log density given to points where it is not finite.
_FLOOR = -1e300
#: Most parameters :func:`axis_jumps` updates: each costs a log-density value per iteration.
MAX_AXIS_JUMPS = 16


def _dip(logp: np.ndarray) -> int:
    """Where a profile on an increasing grid (its last point nearest the mode) is lowest between
    the mode and the second mode that :func:`_rise` measures."""
    peak = int(np.argmax(logp - np.minimum.accumulate(logp[::-1])[::-1]))
    return peak + int(np.argmin(logp[peak:]))


def _rise(logp: np.ndarray) -> float:
    """How far a profile on an increasing grid rises again after its running minimum from the
    right (its last point, nearest the mode): 0 for one that only falls away from the mode."""
    return float(np.max(logp - np.minimum.accumulate(logp[::-1])[::-1], initial=0.0))


def axis_jumps(log_density: Callable[[np.ndarray], np.ndarray], loc: np.ndarray, linear: np.ndarray,
               candidates: np.ndarray, *, prior_scale: float | None, max_jumps: int = MAX_AXIS_JUMPS) -> PlateauJumps:
    """Jumps along the parameter axes for NUTS's linear whitening ``theta = loc + linear u``
    (``loc`` the Laplace mean): for the ``candidates`` (e.g. the parameters of cells 2-5 noise
    sd above zero, :func:`synthinfer.napsu.reparam.one_sided_cells`) whose conditional
    posterior at ``loc`` has a second mode below its bulk (module docstring), at most
    ``max_jumps`` of them. ``log_density`` maps points ``(k, d)`` of ``theta`` to the
    unnormalised log posterior ``(k,)``.

    With ``sd_j = H_jj^{-1/2}`` (``H = (linear linear^T)^{-1}``, the conditional sd), each
    candidate's profile is evaluated on :data:`COARSE_POINTS` points from 4 sd below the mode
    down to ``min(mode - 8 sd, -3 prior_scale)`` (a cell that can empty has its second mode
    towards the prior's centre 0; ``prior_scale`` the interaction prior's sd; ``None``, the cell
    prior alone, whose tails fall exponentially rather than rise again: 16 sd below the mode).
    Where it rises again away from the bulk by more than 0.01 nat (a second mode; a long tail
    that only falls, which NUTS crosses well, gets no jump), the profile is
    evaluated again on :data:`PROFILE_POINTS` points, the bulk's side up to 6 sd above the mode
    added, and the parameter gets a jump if that still rises and between ``1e-3`` and ``1/2`` of
    its mass lies more than 4 sd below the mode."""
    loc = np.asarray(loc, dtype=np.float64)
    linear = np.asarray(linear, dtype=np.float64)
    d = loc.size
    inverse = np.linalg.inv(linear)
    sd = 1.0 / np.linalg.norm(inverse, axis=0)  # H = inverse^T inverse: H_jj is column j's squared norm
    cand = np.flatnonzero(np.asarray(candidates, dtype=bool))
    edges = PlateauJumps.none(d).edges

    def grids(points: int) -> np.ndarray:  # (candidates, points), increasing towards the bulk
        if prior_scale is not None and prior_scale > 0:
            low = np.minimum(loc[cand] - 8.0 * sd[cand], -3.0 * prior_scale)
        else:
            low = loc[cand] - 16.0 * sd[cand]
        return np.linspace(low, loc[cand] - 4.0 * sd[cand], points, axis=1)

    def along(js: np.ndarray, grid: np.ndarray) -> np.ndarray:  # profiles of parameters js on their grids
        points = np.repeat(loc[None], grid.size, axis=0)
        points[np.arange(grid.size), np.repeat(js, grid.shape[1])] = grid.ravel()
        out = np.asarray(log_density(points), dtype=np.float64).reshape(grid.shape)
        return np.where(np.isfinite(out), out, _FLOOR)  # finite: differences of two such stay 0, not NaN

    chosen: list[tuple[float, int]] = []
    if cand.size:
        coarse = along(cand, grids(COARSE_POINTS))
        second = np.array([_rise(row) > 0.01 for row in coarse], dtype=bool)
        fine = grids(PROFILE_POINTS)[second]
        for j, grid in zip(cand[second], fine, strict=True):
            below = along(np.array([j]), grid[None])[0]
            if not _rise(below) > 0.01:
                continue
            bulk = np.linspace(loc[j] - 4.0 * sd[j], loc[j] + 6.0 * sd[j], 21)[1:]
            full, logp = np.concatenate([grid, bulk]), np.concatenate([below, along(np.array([j]), bulk[None])[0]])
            share = _share_below(full, logp, PROFILE_POINTS - 1)
            if 1e-3 < share < 0.5 and (row := _profile_edges(full, logp)) is not None:
                edges[j] = row
                chosen.append((share, int(j)))
    keep = [j for _, j in sorted(chosen, reverse=True)[:max_jumps]]
    rest = sorted(set(range(d)) - set(keep))
    return PlateauJumps(np.array(keep + rest, dtype=np.int64), len(keep), edges, loc.copy(), linear, inverse.T.copy())


def jump_sweep(key: jax.Array, u: jax.Array, logp: jax.Array, logdensity, index: jax.Array, count: jax.Array,
               edges: jax.Array, start: jax.Array, rows: jax.Array,
               directions: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One independence Metropolis-Hastings update of each coordinate ``index[i]``, ``i < count``
    (its value ``x = start[j] + rows[j] . u``, moved along ``directions[j]``: :class:`PlateauJumps`).

    Returns ``(u, log density at u, number accepted)``. ``q(x)`` is ``1 / (BINS * width)``
    inside the histogram and 0 outside; the acceptance ratio is ``p(u') q(x) / (p(u)
    q(x'))``, which is 0 when the current ``x`` is outside (the reverse move is
    impossible) and rejects a NaN log density. The move is a translation along a line on which
    ``x`` is the coordinate with unit slope, so the target's density along it in ``x`` is
    ``p(u)`` itself (no Jacobian).
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
        cur = start[j] + rows[j] @ u
        k = jnp.clip(jnp.searchsorted(e, cur) - 1, 0, bins - 1)
        inside = (cur >= e[0]) & (cur <= e[bins])
        log_q_cur = jnp.where(inside, -jnp.log(e[k + 1] - e[k]), -jnp.inf)
        proposal = u + (new - cur) * directions[j]
        logp_new = logdensity(proposal)
        ok = jnp.log(jax.random.uniform(k_acc, dtype=e.dtype)) < (logp_new - log_q_new) - (logp - log_q_cur)
        return jnp.where(ok, proposal, u), jnp.where(ok, logp_new, logp), accepted + ok.astype(jnp.int32)

    return jax.lax.fori_loop(0, count, body, (u, logp, jnp.asarray(0, jnp.int32)))


#: Points of :func:`line_jumps`' profiles along a regression line.
LINE_POINTS = 96
#: Proposals per iteration of each line jump (one log-density value each). The profile at the
#: Laplace mean is only an approximation of the conditional along the line at the chain's
#: position (the ridge curves), so one proposal is accepted about a third of the time; several
#: in a row come near a draw from that conditional, where the two regions' shares are moderate
#: from most positions (docs/napsu-sampler.md).
LINE_TRIES = 4


def line_jumps(log_density: Callable[[np.ndarray], np.ndarray], jumps: PlateauJumps, draws: np.ndarray,
               parameters: np.ndarray, *, max_jumps: int = MAX_AXIS_JUMPS, tries: int | None = None) -> PlateauJumps:
    """``jumps`` (of :func:`axis_jumps`: ``theta = start + rows u``) with a jump added for each of
    ``parameters`` (e.g. those whose draws mixed worst) whose posterior has a second region along
    its regression line in the ``draws`` ``(k, d)`` of ``theta`` so far, at most ``max_jumps`` in all.

    Where a parameter's second region needs the others to move with it (the module docstring's
    ridges: the cell empties while the interactions that share its row make up for it), its own
    axis shows none and :func:`axis_jumps` gives it no jump. The draws show how the others move:
    ``v = Cov(theta, theta_j) / Var(theta_j)`` (``v_j = 1``), and the line ``theta + t v`` through
    the Laplace mean ``start`` is profiled on :data:`LINE_POINTS` points of ``theta_j`` over the
    draws' range widened by their sd on each side. If the profile rises again after falling on
    either side of its highest point (by more than 0.01 nat) and the region beyond its lowest
    point in between holds between ``1e-3`` and ``1 - 1e-3`` of its mass, the parameter gets a
    jump along that line: ``theta_j`` the updated value, moved along ``u + t rows^{-1} v``
    (``rows . rows^{-1} v = v_j = 1``: a translation along a fixed line, exact as the axis
    jumps), with the histogram of the profile. The line is chosen from earlier draws and then
    held fixed, so each later transition still leaves the posterior invariant. Each such jump
    is made ``tries`` (default :data:`LINE_TRIES`) times per iteration (its parameter that many
    times in ``index[:count]``, as many as ``d`` leaves room for): each is an exact update, and so
    is their sequence."""
    draws = np.asarray(draws, dtype=np.float64)
    loc, rows = np.asarray(jumps.start, dtype=np.float64), np.asarray(jumps.rows, dtype=np.float64)
    index, count = np.asarray(jumps.index).copy(), int(jumps.count)
    edges, directions = np.array(jumps.edges, dtype=np.float64), np.array(jumps.directions, dtype=np.float64)
    mean = draws.mean(0)
    centred = draws - mean
    have = set(index[:count].tolist())
    added: list[int] = []
    for j in (int(p) for p in parameters):
        if len(have) + len(added) >= max_jumps or j in have:
            continue
        var = float(centred[:, j] @ centred[:, j]) / len(draws)
        if not var > 0:
            continue
        v = centred.T @ centred[:, j] / (len(draws) * var)
        v[j] = 1.0
        sd = math.sqrt(var)
        grid = np.linspace(draws[:, j].min() - sd, draws[:, j].max() + sd, LINE_POINTS)
        logp = np.asarray(log_density(loc[None] + (grid - loc[j])[:, None] * v[None]), dtype=np.float64)
        logp = np.where(np.isfinite(logp), logp, _FLOOR)
        top = int(np.argmax(logp))
        left, right = _rise(logp[:top + 1]), _rise(logp[top:][::-1])
        if not max(left, right) > 0.01:
            continue
        side = left >= right
        low = _dip(logp[:top + 1]) if side else len(logp) - 1 - _dip(logp[top:][::-1])
        below = _share_below(grid, logp, low)
        share = below if side else 1.0 - below
        if 1e-3 < share < 1.0 - 1e-3 and (row := _profile_edges(grid, logp)) is not None:
            edges[j], directions[j] = row, np.linalg.solve(rows, v)
            added.append(j)
    if not added:
        return jumps
    tries = LINE_TRIES if tries is None else max(1, int(tries))
    keep = [*index[:count].tolist(), *(j for j in added for _ in range(tries))][:loc.size]
    rest = sorted(set(range(loc.size)) - set(keep))  # the index's remaining places: unused
    return PlateauJumps(np.array((keep + rest)[:loc.size], dtype=np.int64), len(keep), edges, loc, rows, directions)
