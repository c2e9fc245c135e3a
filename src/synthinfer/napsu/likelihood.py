"""NAPSU-MQ's noise-aware posterior and PGM's objective (Räisä et al. 2023, eq. 4-6, Supplement D).

Model, with ``d`` canonical queries, ``n`` rows and Gaussian-mechanism noise ``sigma_DP``::

    theta ~ N(0, prior_sd^2 I) * prod_q prod_c P_q(c | theta)^alpha   (prior_sd = 10, Section 4)
    s~ | theta ~ N(n mu(theta), n Sigma(theta) + sigma_DP^2 I)        (normal approximation, eq. 6)

``P_q(c | theta)`` are the cell probabilities of each measured marginal ``q``: the cell prior
(:func:`log_cell_prior`, weight ``alpha = cell_prior``; ``0`` is the paper's prior). With an
interaction prior (``interaction_sd = tau``) the normal prior is instead on the log-linear
interactions ``lambda = M theta`` (:func:`log_interaction_prior`), ``N(0, prior_sd^2)`` on the
main effects and ``N(0, tau^2)`` on the rest, and the cell prior is on each column's 1-way
table only::

    M theta ~ N(0, diag(s^2)) * prod_i prod_v P_i(v | theta)^alpha

``mu`` and ``Sigma`` are the mean and covariance of the queries under MED_theta (eq. 7), from the
network's ``mean_and_cov``. :func:`log_likelihood` is the dense form; the objectives evaluate
the same likelihood by message passing (:mod:`synthinfer.napsu.structured`), which also takes
any other measurements of the marginals' cells with one noise variance per value (AIM's). The
functions are pure JAX; the objectives a backend optimises or
samples are made once per network (:func:`objective`, :func:`value_and_grad`, and the batched
:func:`gradients` and :func:`values` of the Laplace fit) and held in the
network's program cache, so a network compiles each of them once whatever the data or epsilon
(the noisy counts, noise level, n and prior are traced arguments, never closure constants).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse

from synthinfer._jax import jax, jnp, quick_compiler_options
from synthinfer.errors import ParameterError

if TYPE_CHECKING:
    from synthinfer.napsu.network import MarkovNetwork
    from synthinfer.napsu.structured import Layout

MeanAndCov = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
Mean = Callable[[jax.Array], jax.Array]

#: Prior standard deviation of every theta component (NAPSU-MQ Section 4 / Supplement E).
PRIOR_SD = 10.0
#: Default weight of the cell prior (:func:`log_cell_prior`): a uniform Dirichlet on each
#: column's categories (on each measured marginal's cells without the interaction prior).
#: The paper's prior is ``0``.
CELL_PRIOR = 1.0
#: Default standard deviation of the interaction prior (:func:`log_interaction_prior`):
#: valid and calibrated Laplace intervals at AIM's scale (docs/napsu-sampler.md), where 2 gave
#: intervals three times as wide. ``None``: the normal prior is on the canonical parameters.
INTERACTION_SD: float | None = 1.0
_LOG_2PI = math.log(2.0 * math.pi)


def log_likelihood(
    theta: jax.Array, s_tilde: jax.Array, sigma_dp: jax.Array, n: jax.Array, mean_and_cov: MeanAndCov
) -> jax.Array:
    """Noise-aware log-likelihood, NAPSU-MQ eq. 6.

    ``log N(s~ | n mu(theta), n Sigma(theta) + sigma_DP^2 I)``: the exact query values
    ``s = a(X)`` are replaced by their central-limit normal approximation and integrated out
    against the Gaussian mechanism's noise. Evaluated in float64 with one Cholesky
    factorisation ``L L^T = n Sigma + sigma_DP^2 I`` (symmetric positive definite as
    ``sigma_DP > 0``) for both the log-determinant and the quadratic form ``|L^{-1} r|^2``
    (about half the cost of an LU factorisation; run it with one BLAS thread,
    :func:`synthinfer._jax.single_threaded_blas`, as threads only contend at this size).
    """
    mu, sigma = mean_and_cov(theta)
    d = s_tilde.shape[0]
    cov = n * sigma + (sigma_dp**2) * jnp.eye(d)
    chol = jnp.linalg.cholesky(cov)
    y = jax.scipy.linalg.solve_triangular(chol, s_tilde - n * mu, lower=True)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return -0.5 * jnp.dot(y, y) - 0.5 * logdet - 0.5 * d * _LOG_2PI


def log_prior(theta: jax.Array, prior_sd: float | jax.Array = PRIOR_SD) -> jax.Array:
    """``log N(theta | 0, prior_sd^2 I)``."""
    d = theta.shape[0]
    return -0.5 * jnp.sum((theta / prior_sd) ** 2) - d * jnp.log(prior_sd) - 0.5 * d * _LOG_2PI


def log_cell_prior(log_tables: Sequence[jax.Array], weight: float | jax.Array) -> jax.Array:
    """``alpha * sum_q sum_c log P_q(c)`` over every cell ``c`` of every measured marginal ``q``
    (``log_tables``: :meth:`MarkovNetwork.log_query_marginals`), unnormalised.

    For one marginal this is the Dirichlet(alpha) density of its cell probabilities expressed
    in the canonical (reference-coded log-linear) parameters: with ``p = softmax(theta)`` on
    ``K`` cells, ``Dir(p | alpha) |dp/dtheta| ∝ prod_c p_c^(alpha - 1) * prod_c p_c``, so
    ``alpha = 1`` is the uniform distribution on the simplex (the Dirichlet, conjugate to the
    multinomial, acts as ``alpha`` pseudo-counts per cell; Gelman et al., Bayesian Data
    Analysis, 3rd ed., 2013). With several overlapping marginals it is one such factor per
    marginal; the normal prior keeps the product proper.

    Why: under ``N(0, prior_sd^2)`` alone a cell whose noisy count is within a few noise sd
    of zero has a posterior flat towards ``theta -> -inf`` for tens of units (the prior's
    width), and a count near 0 is ``e^-20`` as likely as ``e^-2`` (the plateaus of
    docs/napsu-sampler.md). Here its density in ``theta`` falls as ``e^(alpha theta)`` (in the
    count ``c``: ``c^(alpha - 1)``, flat for alpha = 1), so every direction has unit scale
    and the cost of one pseudo-count per cell is negligible beside the noise
    (``sigma_DP`` tens of counts)."""
    return weight * sum(jnp.sum(t) for t in log_tables)


def log_interaction_prior(lam: jax.Array, is_interaction: np.ndarray, prior_sd: float | jax.Array,
                          interaction_sd: float | jax.Array) -> jax.Array:
    """``sum_j log N(lambda_j | 0, s_j^2)``: ``s_j = interaction_sd`` for the interactions (order
    two or more, and slopes) and ``prior_sd`` for the main effects, ``lambda = M theta``
    (:func:`synthinfer.napsu.queries.interaction_matrix`). As ``det M = 1`` it is also the density
    of ``theta``, a normal with precision ``M^T diag(s^-2) M``.

    Why: the paper's ``N(0, prior_sd^2)`` on each canonical parameter (a cell's log-odds against
    the all-reference cell) and the cell prior both pull a cell measured below its noise towards
    the *uniform* table, and a rare category, all of whose cells are such, towards the frequent
    ones (docs/napsu-sampler.md). A normal prior on the interactions pulls such a cell towards
    the lower-order model instead (its interaction towards 0: the count its categories' main
    effects and lower-order interactions predict), which the data nearly always support, and
    its tails are Gaussian of width ``interaction_sd`` rather than a plateau. This is the
    shrinkage of Bayesian log-linear models towards independence (Bishop, Fienberg and
    Holland, Discrete Multivariate Analysis, 1975, Chapter 12, pseudo-Bayes estimates)."""
    d = lam.shape[0]
    sd = jnp.where(jnp.asarray(is_interaction), interaction_sd, prior_sd)
    return -0.5 * jnp.sum((lam / sd) ** 2) - jnp.sum(jnp.log(sd)) - 0.5 * d * _LOG_2PI


def _lse_except(table: jax.Array, axis: int) -> jax.Array:
    """Log of ``table``'s one-way margin on ``axis`` (a log-probability table)."""
    others = tuple(a for a in range(table.ndim) if a != axis)
    return jax.scipy.special.logsumexp(table, axis=others) if others else table


def log_posterior(
    theta: jax.Array,
    s_tilde: jax.Array,
    sigma_dp: jax.Array,
    n: jax.Array,
    mean_and_cov: MeanAndCov,
    prior_sd: float | jax.Array = PRIOR_SD,
) -> jax.Array:
    """Unnormalised log posterior ``log p(theta) + log p(s~ | theta)`` (eq. 4-6)."""
    return log_prior(theta, prior_sd) + log_likelihood(theta, s_tilde, sigma_dp, n, mean_and_cov)


def pgm_loss(theta: jax.Array, s_tilde: jax.Array, n: jax.Array, mean: Mean) -> jax.Array:
    """PGM's objective ``||s~/n - mu(theta)||_2^2`` (Supplement D, eq. 20).

    Minimising it is maximum likelihood under the law-of-large-numbers model (eq. 15): the
    sampling variability ``n Sigma(theta)`` of the counts is ignored, so it is not noise-aware.
    """
    r = s_tilde / n - mean(theta)
    return jnp.dot(r, r)


def posterior_args(s_tilde, sigma_dp, n, prior_sd, cell_prior: float = 0.0,
                   interaction_sd: float | None = None) -> tuple[np.ndarray, ...]:
    """The data arguments ``(y, D, n, prior_sd, alpha, tau)`` of the noise-aware objective, as
    float64 NumPy arrays (compiled programs take them as they are; ``jnp.asarray`` would compile
    a conversion program first): the noisy values ``y`` (``s~``), their noise *variances* ``D``
    (one per value: ``sigma_dp`` is the noise standard deviation, a scalar or one per value),
    ``n``, the prior's standard deviation, the weight of the cell prior (:func:`log_cell_prior`)
    and the interaction prior's standard deviation (:func:`log_interaction_prior`; ``0`` for
    ``None``: the normal prior is on ``theta``). One compiled objective takes every prior."""
    y = np.asarray(s_tilde, dtype=np.float64)
    sd = np.asarray(sigma_dp, dtype=np.float64)
    if sd.shape not in ((), y.shape):
        raise ParameterError(f"sigma_dp must be a scalar or have one entry per value {y.shape}, got {sd.shape}")
    return (y, np.broadcast_to(sd**2, y.shape).copy(), np.asarray(float(n)), np.asarray(float(prior_sd)),
            np.asarray(float(cell_prior)), np.asarray(0.0 if interaction_sd is None else float(interaction_sd)))


def pgm_args(s_tilde, n) -> tuple[np.ndarray, ...]:
    """The data arguments ``(s~, n)`` of PGM's objective, as float64 NumPy arrays."""
    return np.asarray(s_tilde, dtype=np.float64), np.asarray(float(n))


# --------------------------------------------------------------------------------------
# Objectives of a network, made once and held in its program cache
# --------------------------------------------------------------------------------------
def _gauss_newton_posterior(theta, D_eff, n, prior_precision, *, mean_and_cov) -> np.ndarray:
    """Gauss-Newton (Fisher) curvature of the negative log posterior on the canonical queries:
    ``J^T C^{-1} J + P`` (``P``: the normal prior's precision) with ``J = n Sigma`` (the Jacobian of ``n mu``) and
    ``C = n Sigma + diag(D_eff)``, ``D_eff`` the queries' noise variances (for other
    measurements, their inverse-variance combination: :func:`synthinfer.napsu.structured.
    canonical_information`). Used only to precondition the optimiser; NumPy around the
    network's compiled ``mean_and_cov`` (no program of its own to compile)."""
    from scipy.linalg import solve_triangular

    _, sig = mean_and_cov(jnp.asarray(theta))
    j = float(n) * np.asarray(sig, dtype=np.float64)
    d = j.shape[0]
    # C = J + diag(D) is positive definite: with C = L L^T, J C^-1 J = X^T X for X = L^-1 J (half
    # the work of an LU solve with d right-hand sides; the Woodbury form J - D + D C^-1 D would
    # cancel catastrophically where the noise dominates, as for AIM's sparse marginals)
    lc = np.linalg.cholesky(j + np.diag(D_eff))
    x = solve_triangular(lc, j, lower=True, check_finite=False)
    return x.T @ x + prior_precision


#: Levenberg-Marquardt damping of PGM's Gauss-Newton metric, relative to its mean eigenvalue.
#: ``J^T J`` is near-singular along cells of probability ~0 (most of AIM's cells), where an
#: undamped metric proposes steps the line search cannot use. On AIM's models 1e-3 converges
#: to a lower loss than plain L-BFGS, and 1e-6 does not converge (docs/performance.md).
PGM_DAMPING = 1e-3


def _gauss_newton_pgm(theta, s_tilde, n, *, mean, damping: float = PGM_DAMPING):
    """Damped Gauss-Newton curvature ``2 J^T J + lambda I`` of :func:`pgm_loss`,
    ``J = Sigma = d mu / d theta``, ``lambda = damping * tr(2 J^T J) / d``."""
    j = jax.jacfwd(mean)(theta)
    h = 2.0 * j.T @ j
    return h + damping * jnp.trace(h) / h.shape[0] * jnp.eye(h.shape[0])


def _posterior_objectives(net: MarkovNetwork, layout: Layout | None) -> tuple[Callable, Callable]:
    from synthinfer.napsu.structured import canonical_information, canonical_layout, plan, structured_log_likelihood

    mean_and_cov = net.mean_and_cov
    canonical = layout is None
    # the measured values: the canonical queries' s~ (layout None) or any cells of the marginals,
    # whatever the network's parameters (canonical cells or interactions, some tied)
    tree_plan = plan(net, canonical_layout(net.queries.canonical) if canonical else layout)
    info = None if canonical else canonical_information(net.queries.canonical, layout, grouped=True)

    # Closures, not functools.partial: JAX caches a jitted function's signature, weakly keyed on
    # the function, and a partial's signature holds its bound values. Bound to the network, that
    # entry would hold the network, whose program cache holds the function: never freed.
    # Eq. 6 by message passing (synthinfer.napsu.structured): the same value as
    # log_likelihood's dense form at a cost about linear in the clique tables' cells.
    # the interactions lambda = M theta (a sparse matrix-vector product; M = I where the
    # parameters are interactions) and each column's 1-way table from the first measured
    # marginal that holds it, for the interaction prior
    M, is_interaction = net.queries.interactions()  # order two or more, and slopes (napsu.interactions)
    M_rows, M_cols, M_vals = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr)), M.indices, M.data
    first: dict[str, tuple[int, int]] = {}
    for i, m in enumerate(net.queries.queryset.marginals):
        for axis, c in enumerate(m.columns):
            first.setdefault(c, (i, axis))
    columns = tuple(first.values())

    def interactions(theta):
        return jax.ops.segment_sum(M_vals * theta[M_cols], M_rows, num_segments=M.shape[0], indices_are_sorted=True)

    def log_prior_density(theta, prior_sd, cell_prior, interaction_sd):
        tables = net.log_query_marginals(theta)
        on = interaction_sd > 0
        # both branches are evaluated: keep the unused one finite so its gradient is not NaN
        tau = jnp.where(on, interaction_sd, 1.0)
        normal = jnp.where(on, log_interaction_prior(interactions(theta), is_interaction, prior_sd, tau),
                           log_prior(theta, prior_sd))
        one_way = [_lse_except(tables[i], axis) for i, axis in columns]
        cells = jnp.where(on, log_cell_prior(one_way, cell_prior), log_cell_prior(tables, cell_prior))
        return normal + cells

    def loss(theta, y, D, n, prior_sd, cell_prior, interaction_sd):
        return -(log_prior_density(theta, prior_sd, cell_prior, interaction_sd)
                 + structured_log_likelihood(theta, y, D, n, tree_plan))

    def curvature(theta, y, D, n, prior_sd, cell_prior, interaction_sd):
        # the cell prior's curvature is left out: this only preconditions the optimiser, and at
        # near-empty cells, where the prior matters, it is about linear in theta
        D = np.asarray(D, dtype=np.float64)
        if not canonical:  # queries measured only through sub-marginals: weak, not zero, information
            precision = info @ (1.0 / D)
            D = 1.0 / np.maximum(precision, 1e-6 / D.max())
        D = net.queries.summarise(np.zeros(D.shape), np.sqrt(D))[1] ** 2  # per parameter (a tie: its sum's)
        if float(interaction_sd) > 0:
            sd = np.where(is_interaction, float(interaction_sd), float(prior_sd))
            prior_precision = (M.T @ sparse.diags_array(sd**-2.0) @ M).toarray()
        else:
            prior_precision = np.eye(M.shape[0]) / float(prior_sd) ** 2
        return _gauss_newton_posterior(theta, D, n, prior_precision, mean_and_cov=mean_and_cov)

    return loss, curvature


def _pgm_objectives(net: MarkovNetwork, layout: Layout | None) -> tuple[Callable, Callable]:
    if layout is not None:
        raise ParameterError("PGM's objective takes the canonical queries (combine other measurements first)")
    mean = net.mean

    def loss(theta, s_tilde, n):  # a closure, as in _posterior_objectives
        return pgm_loss(theta, s_tilde, n, mean)

    def curvature(theta, s_tilde, n):
        return _gauss_newton_pgm(theta, s_tilde, n, mean=mean)

    return loss, jax.jit(curvature)


#: name -> (objective, curvature) builders of a network's objectives: the noise-aware negative
#: log posterior (arguments :func:`posterior_args`) and PGM's loss (arguments :func:`pgm_args`)
_OBJECTIVES = {"neg_log_posterior": _posterior_objectives, "pgm": _pgm_objectives}


def objective(network: MarkovNetwork, name: str, layout: Layout | None = None) -> tuple[Callable, Callable]:
    """``(loss, curvature)`` of the named objective of ``network`` (``"neg_log_posterior"`` or
    ``"pgm"``), one pair per network and layout of the measured values
    (:mod:`synthinfer.napsu.structured`; ``None``: the canonical queries ``s~``).

    The loss is ``jax.jit``-wrapped so that every program built on it (value and gradient,
    values, NUTS) reuses one trace of it and of its derivative: JAX caches a jitted function's
    jaxpr per argument shapes. Traced anew in each, it was six traces in a small fit, a
    noticeable part of its wait. XLA inlines the nested call in the compiled programs."""

    def make():
        loss, curvature = _OBJECTIVES[name](network, layout)
        return jax.jit(loss), curvature

    return network.programs.get(("objective", name, layout), make)


def value_and_grad(network: MarkovNetwork, name: str, layout: Layout | None = None) -> Callable:
    """``jax.jit(jax.value_and_grad(loss))`` of the named objective, one compiled program per
    network: everything a fit evaluates (L-BFGS iterations, the Hessian by differences of
    gradients, the diagnostics along its axes) calls it, so an objective compiles once.

    Compiled with :func:`synthinfer._jax.quick_compiler_options`: a fit evaluates it a few
    thousand times, and its time is in a few dense operations per clique that the quick
    options compile as well (measured on Adult: d = 130, 0.55 against 0.45 ms per call, compile
    6 against 19 s; d = 1,417, 6 ms either way, compile 5 against 46 s; docs/performance.md).
    NUTS, which evaluates ~10^6 gradients, compiles its own program with the default options."""

    def make():
        return jax.jit(jax.value_and_grad(objective(network, name, layout)[0]), compiler_options=quick_compiler_options())

    return network.programs.get(("value_and_grad", name, layout), make)


# --------------------------------------------------------------------------------------
# Batched programs: one call evaluates the objective at a block of points
# --------------------------------------------------------------------------------------
#: Memory a batched program's block of points may use for their working arrays (the
#: message-passing matrices of :mod:`synthinfer.napsu.structured` and their reverse-mode
#: residuals); :func:`batch_size` picks the block size from it. Small, so a block stays near
#: the CPU caches: on the 15-column Adult model (d = 1,417) blocks of 4 points took ~3 ms a
#: value, while blocks of 32 (1 GiB allowed) had not finished a Hessian after 10 minutes.
BATCH_MEMORY_BYTES = 32 << 20
#: Largest block: past a few dozen points a block's arrays leave the CPU caches and the
#: time per point rises (benchmarks/napsu/README.md).
MAX_BATCH = 32


def batch_size(network: MarkovNetwork, memory_bytes: int = BATCH_MEMORY_BYTES) -> int:
    """Points per call of a batched program of ``network``: at most :data:`MAX_BATCH`, and few
    enough that the points' working arrays (``TreeLikelihoodPlan.bytes_per_point``) fit in
    ``memory_bytes`` (at least one point)."""
    from synthinfer.napsu.structured import canonical_layout, plan

    per_point = plan(network, canonical_layout(network.queries.canonical)).bytes_per_point
    return int(max(1, min(MAX_BATCH, memory_bytes // per_point)))


def _batched(network: MarkovNetwork, name: str, kind: str, layout: Layout | None) -> Callable:
    def make():
        loss = objective(network, name, layout)[0]
        fn = jax.grad(loss) if kind == "gradients" else loss

        # A closure, as in _posterior_objectives: the points are mapped, the data arguments shared.
        def batched(points, *args):
            return jax.vmap(lambda x: fn(x, *args))(points)

        # A batched program runs a few times per fit: quick options, as value_and_grad.
        return jax.jit(batched, compiler_options=quick_compiler_options())

    return network.programs.get((kind, name, layout), make)


def gradients(network: MarkovNetwork, name: str, *, batched: bool | None = None, layout: Layout | None = None) -> Callable:
    """``points (k, d), *args -> (k, d)``: the gradient of the named objective at each of ``k``
    points, for the Hessian by finite differences (:func:`synthinfer.napsu.optimize.hessian`),
    whose ``d + 1`` gradients are independent.

    ``batched=True``: one compiled program per network and block size (``jax.vmap`` of
    ``jax.grad``), so a block of points is one call. ``batched=False``: a loop over the
    network's compiled :func:`value_and_grad`, nothing new to compile. The default batches
    on accelerators, where a block's points run in parallel, and loops on CPU: there XLA
    factorises a block's matrices one after another, so a point costs as much batched as
    alone while the batched program takes seconds to compile (measurements in
    benchmarks/napsu/README.md).
    """
    if _batches(batched):
        return _batched(network, name, "gradients", layout)
    vg = value_and_grad(network, name, layout)

    def loop(points, *args):
        return np.stack([np.asarray(vg(jnp.asarray(x), *args)[1]) for x in points])

    return loop


def values(network: MarkovNetwork, name: str, layout: Layout | None = None, *,
           batched: bool | None = None) -> Callable:
    """``points (k, d), *args -> (k,)``: the named objective at each of ``k`` points, no
    gradient. For checks that need only values, such as :func:`synthinfer.napsu.laplace.laplace_gap`.

    ``batched=True``: one compiled program per network and block size (``jax.vmap`` of the
    objective). ``batched=False``: a loop over one jitted value program. The default batches on
    accelerators and loops on CPU, as :func:`gradients` does, for its reasons and one more: on
    XLA:CPU a vmapped program of this likelihood at AIM's scale (d ~ 500-800) can wedge XLA's
    Eigen thread pool, so that the first read of its result never returns (every worker idle,
    the caller waiting; seen in a Laplace fit's gap check). The same wedge of vmapped graphs is
    described at https://github.com/PyAutoLabs/PyAutoFit/issues/1528, where
    ``--xla_cpu_multi_thread_eigen=false`` avoided it.
    """
    if _batches(batched):
        return _batched(network, name, "values", layout)

    def make():
        return jax.jit(objective(network, name, layout)[0], compiler_options=quick_compiler_options())

    value = network.programs.get(("value", name, layout), make)

    def loop(points, *args):
        return np.array([float(value(jnp.asarray(x), *args)) for x in points])

    return loop


def _batches(batched: bool | None) -> bool:
    """Whether :func:`gradients` and :func:`values` build a block program: as asked, or by
    default on accelerators only (their docstrings say why not on CPU)."""
    return jax.default_backend() != "cpu" if batched is None else bool(batched)


def is_block_program(program: Callable) -> bool:
    """Whether ``program`` (from :func:`gradients` or :func:`values`) is a compiled block
    program, which compiles once per block shape (so callers pad to whole blocks), rather than
    a loop over points."""
    return hasattr(program, "lower")


def evaluate_in_batches(program: Callable, points: np.ndarray, args: tuple, size: int) -> np.ndarray:
    """``program`` (from :func:`gradients` or :func:`values`) at every row of ``points``, in
    at most ``size`` rows a call. The blocks are balanced (``ceil(k / size)`` of nearly equal
    length) and a jitted program's last block is padded with copies of its first row, so every
    call has one shape and the program compiles once."""
    points = np.asarray(points, dtype=np.float64)
    k = points.shape[0]
    size = -(-k // -(-k // size))  # ceil(k / number of blocks): pads fewer than that many rows
    pad = is_block_program(program)
    out = []
    for start in range(0, k, size):
        block = points[start:start + size]
        m = block.shape[0]
        if pad and m < size:
            block = np.concatenate([block, np.repeat(block[:1], size - m, axis=0)])
        out.append(np.asarray(program(block, *args))[:m])
    return np.concatenate(out)
